# Tests: GLib tests through automake's TAP driver; test plugins built only for them.
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
SH_LOG_DRIVER = $(LOG_DRIVER)
TEST_EXTENSIONS = .sh
AM_TESTS_ENVIRONMENT = \
	unset KS_PLUGIN_PATH KS_PLUGINS; \
	export KS_PLUGIN_SYSTEM_PATH=; \
	export KS_TEST_PLUGINS=$(abs_top_builddir)/tests/plugins/.libs; \
	export KS_BUILD_PLUGINS=$(abs_top_builddir)/plugins; \
	export KSDIST=$(abs_top_builddir)/tools/ksdist; \
	export KS_SRCDIR=$(abs_top_srcdir); \
	export G_DEBUG=fatal-criticals; \
	export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1; \
	export LSAN_OPTIONS=suppressions=$(abs_top_srcdir)/tests/lsan.supp:print_suppressions=0; \
	export MAKE="$(MAKE)" CC="$(CC)" KS_BUILDDIR=$(abs_top_builddir) KS_PREFIX=$(prefix) \
		KS_LIBDIR=$(libdir) KS_BINDIR=$(bindir) KS_PROGRAM_FLAGS="$(KS_CFLAGS) $(LDFLAGS)";

# Test plugins: one source, variants by macro; built for `make check`, never installed.
KS_TEST_PLUGIN_LDFLAGS = $(KS_PLUGIN_LDFLAGS) -rpath $(abs_builddir)
check_LTLIBRARIES += tests/plugins/tgood.la tests/plugins/tabimajor.la \
	tests/plugins/tabiminor.la tests/plugins/tnoentry.la tests/plugins/tnoslot.la \
	tests/plugins/tunavail.la tests/plugins/tdupset.la tests/plugins/tbaddefault.la
tests_plugins_tgood_la_SOURCES = tests/plugins/test-plugin.c
tests_plugins_tgood_la_CPPFLAGS = $(AM_CPPFLAGS) -DTP_NAME=\"tgood\" -DTP_ALGORITHMS
tests_plugins_tgood_la_LDFLAGS = $(KS_TEST_PLUGIN_LDFLAGS)
tests_plugins_tgood_la_LIBADD = $(KS_PLUGIN_LIBADD)
tests_plugins_tabimajor_la_SOURCES = tests/plugins/test-plugin.c
tests_plugins_tabimajor_la_CPPFLAGS = $(AM_CPPFLAGS) -DTP_NAME=\"tabimajor\" -DTP_ABI_MAJOR_DELTA=1
tests_plugins_tabimajor_la_LDFLAGS = $(KS_TEST_PLUGIN_LDFLAGS)
tests_plugins_tabimajor_la_LIBADD = $(KS_PLUGIN_LIBADD)
tests_plugins_tabiminor_la_SOURCES = tests/plugins/test-plugin.c
tests_plugins_tabiminor_la_CPPFLAGS = $(AM_CPPFLAGS) -DTP_NAME=\"tabiminor\" -DTP_ABI_MINOR_DELTA=1
tests_plugins_tabiminor_la_LDFLAGS = $(KS_TEST_PLUGIN_LDFLAGS)
tests_plugins_tabiminor_la_LIBADD = $(KS_PLUGIN_LIBADD)
tests_plugins_tnoentry_la_SOURCES = tests/plugins/test-plugin.c
tests_plugins_tnoentry_la_CPPFLAGS = $(AM_CPPFLAGS) -DTP_NAME=\"tnoentry\" -DTP_NO_ENTRY
# no -export-symbols-regex: with nothing to export, ld rejects the empty version script
tests_plugins_tnoentry_la_LDFLAGS = -module -avoid-version -no-undefined -rpath $(abs_builddir)
tests_plugins_tnoentry_la_LIBADD = $(KS_PLUGIN_LIBADD)
tests_plugins_tnoslot_la_SOURCES = tests/plugins/test-plugin.c
tests_plugins_tnoslot_la_CPPFLAGS = $(AM_CPPFLAGS) -DTP_NAME=\"tnoslot\" -DTP_NO_REQUIRED_SLOT
tests_plugins_tnoslot_la_LDFLAGS = $(KS_TEST_PLUGIN_LDFLAGS)
tests_plugins_tnoslot_la_LIBADD = $(KS_PLUGIN_LIBADD)
tests_plugins_tunavail_la_SOURCES = tests/plugins/test-plugin.c
tests_plugins_tunavail_la_CPPFLAGS = $(AM_CPPFLAGS) -DTP_NAME=\"tunavail\" -DTP_UNAVAILABLE
tests_plugins_tunavail_la_LDFLAGS = $(KS_TEST_PLUGIN_LDFLAGS)
tests_plugins_tunavail_la_LIBADD = $(KS_PLUGIN_LIBADD)
tests_plugins_tdupset_la_SOURCES = tests/plugins/test-plugin.c
tests_plugins_tdupset_la_CPPFLAGS = $(AM_CPPFLAGS) -DTP_NAME=\"tdupset\" -DTP_BAD_SETTING=1
tests_plugins_tdupset_la_LDFLAGS = $(KS_TEST_PLUGIN_LDFLAGS)
tests_plugins_tdupset_la_LIBADD = $(KS_PLUGIN_LIBADD)
tests_plugins_tbaddefault_la_SOURCES = tests/plugins/test-plugin.c
tests_plugins_tbaddefault_la_CPPFLAGS = $(AM_CPPFLAGS) -DTP_NAME=\"tbaddefault\" -DTP_BAD_SETTING=2
tests_plugins_tbaddefault_la_LDFLAGS = $(KS_TEST_PLUGIN_LDFLAGS)
tests_plugins_tbaddefault_la_LIBADD = $(KS_PLUGIN_LIBADD)

# optimizers of a plugin other than optim: the [optim] rate and schedule reach them
check_LTLIBRARIES += tests/plugins/topt.la
tests_plugins_topt_la_SOURCES = tests/plugins/test-plugin.c
tests_plugins_topt_la_CPPFLAGS = $(AM_CPPFLAGS) -DTP_NAME=\"topt\" -DTP_OPTIMIZER
tests_plugins_topt_la_LDFLAGS = $(KS_TEST_PLUGIN_LDFLAGS)
tests_plugins_topt_la_LIBADD = $(KS_PLUGIN_LIBADD)

# Copies of first-party plugins under other names, built from their sources: the plan and
# the choice of communicator must judge them by their traits as they do the originals
# (tests/test-traits.sh).
if HAVE_OPENBLAS
check_LTLIBRARIES += tests/plugins/tblas.la
tests_plugins_tblas_la_SOURCES = $(plugins_openblas_openblas_la_SOURCES)
tests_plugins_tblas_la_CPPFLAGS = $(AM_CPPFLAGS) -DKS_OPENBLAS_NAME=\"tblas\"
tests_plugins_tblas_la_CFLAGS = $(plugins_openblas_openblas_la_CFLAGS)
tests_plugins_tblas_la_LDFLAGS = $(KS_TEST_PLUGIN_LDFLAGS)
tests_plugins_tblas_la_LIBADD = $(plugins_openblas_openblas_la_LIBADD)
# openblas under another name, declaring device memory: the plan's checks of a GPU
# backend, without a GPU
check_LTLIBRARIES += tests/plugins/tdev.la
tests_plugins_tdev_la_SOURCES = $(plugins_openblas_openblas_la_SOURCES)
tests_plugins_tdev_la_CPPFLAGS = $(AM_CPPFLAGS) -DKS_OPENBLAS_NAME=\"tdev\" \
	-DKS_OPENBLAS_TRAITS=KS_COMPUTE_DEVICE_MEMORY
tests_plugins_tdev_la_CFLAGS = $(plugins_openblas_openblas_la_CFLAGS)
tests_plugins_tdev_la_LDFLAGS = $(KS_TEST_PLUGIN_LDFLAGS)
tests_plugins_tdev_la_LIBADD = $(plugins_openblas_openblas_la_LIBADD)
endif
check_LTLIBRARIES += tests/plugins/tshm.la
tests_plugins_tshm_la_SOURCES = $(plugins_shm_shm_la_SOURCES)
tests_plugins_tshm_la_CPPFLAGS = $(AM_CPPFLAGS) -DKS_SHM_NAME=\"tshm\"
tests_plugins_tshm_la_LDFLAGS = $(KS_TEST_PLUGIN_LDFLAGS)
tests_plugins_tshm_la_LIBADD = $(plugins_shm_shm_la_LIBADD)
check_LTLIBRARIES += tests/plugins/tcoll.la
tests_plugins_tcoll_la_SOURCES = $(plugins_collective_collective_la_SOURCES)
tests_plugins_tcoll_la_CPPFLAGS = $(AM_CPPFLAGS) -DKS_COLLECTIVE_NAME=\"tcoll\"
tests_plugins_tcoll_la_LDFLAGS = $(KS_TEST_PLUGIN_LDFLAGS)
tests_plugins_tcoll_la_LIBADD = $(plugins_collective_collective_la_LIBADD)
if HAVE_ZMQ
check_LTLIBRARIES += tests/plugins/tps.la
tests_plugins_tps_la_SOURCES = $(plugins_transpiler_transpiler_la_SOURCES)
tests_plugins_tps_la_CPPFLAGS = $(AM_CPPFLAGS) -DKS_TRANSPILER_NAME=\"tps\"
tests_plugins_tps_la_CFLAGS = $(plugins_transpiler_transpiler_la_CFLAGS)
tests_plugins_tps_la_LDFLAGS = $(KS_TEST_PLUGIN_LDFLAGS)
tests_plugins_tps_la_LIBADD = $(plugins_transpiler_transpiler_la_LIBADD)
endif

# One test program per module.
KS_TEST_LDADD = tests/libtestutil.la libksdist.la $(GLIB_LIBS)
# tests of the tasks library (ksdist/tasks.h)
KS_TASKS_TEST_LDADD = tests/libtestutil.la libksdist-tasks.la libksdist.la $(GLIB_LIBS)
check_LTLIBRARIES += tests/libtestutil.la
tests_libtestutil_la_SOURCES = tests/testutil.h tests/testutil.c tests/ref-ops.h tests/ref-ops.c
tests_libtestutil_la_LIBADD = -lm

check_PROGRAMS += tests/test-loader
tests_test_loader_LDADD = $(KS_TEST_LDADD)
TESTS += tests/test-loader

# KsTrainObserver: a program's own, the printing one removed (tests/test-observer.c)
check_PROGRAMS += tests/test-observer
tests_test_observer_LDADD = $(KS_TASKS_TEST_LDADD)
TESTS += tests/test-observer

check_PROGRAMS += tests/test-config
tests_test_config_LDADD = $(KS_TASKS_TEST_LDADD)
TESTS += tests/test-config

check_PROGRAMS += tests/test-settings tests/test-factory
tests_test_settings_LDADD = $(KS_TEST_LDADD)
tests_test_factory_LDADD = $(KS_TEST_LDADD) $(JSON_LIBS)
TESTS += tests/test-settings tests/test-factory

# A task's own keys (KsTrainTask.schema) beside the core's.
check_PROGRAMS += tests/test-task-schema
tests_test_task_schema_LDADD = $(KS_TEST_LDADD)
TESTS += tests/test-task-schema
# [train] eval_rows refused for a C task that does not honour it (tests/test-eval-rows-task.c)
check_PROGRAMS += tests/test-eval-rows-task
tests_test_eval_rows_task_LDADD = $(KS_TASKS_TEST_LDADD)
TESTS += tests/test-eval-rows-task

check_PROGRAMS += tests/test-compute tests/test-kernels tests/test-tensor tests/test-model \
	tests/test-conv tests/test-optim tests/test-checkpoint
tests_test_compute_LDADD = $(KS_TEST_LDADD)
tests_test_kernels_LDADD = $(KS_TEST_LDADD) -lm
tests_test_tensor_LDADD = $(KS_TEST_LDADD)
tests_test_model_LDADD = $(KS_TEST_LDADD) -lm
tests_test_conv_LDADD = $(KS_TEST_LDADD) -lm
tests_test_optim_LDADD = $(KS_TEST_LDADD) -lm
tests_test_checkpoint_CFLAGS = $(AM_CFLAGS) $(JSON_CFLAGS)
tests_test_checkpoint_LDADD = $(KS_TASKS_TEST_LDADD) $(JSON_LIBS)
TESTS += tests/test-compute tests/test-kernels tests/test-tensor tests/test-model \
	tests/test-conv tests/test-optim tests/test-checkpoint
# conv2d cut into blocks of rows, and a shape past the scratch refused (conv-gemm.c)
check_PROGRAMS += tests/test-conv-blocks
tests_test_conv_blocks_LDADD = $(KS_TEST_LDADD) -lm
TESTS += tests/test-conv-blocks

# Mixed precision: 16-bit rounding, half-precision products, loss scaling.
check_PROGRAMS += tests/test-amp
tests_test_amp_LDADD = $(KS_TASKS_TEST_LDADD) -lm
TESTS += tests/test-amp

# Few-shot image readers on sets made by ksdist datagen.
check_PROGRAMS += tests/test-images
tests_test_images_CFLAGS = $(AM_CFLAGS) $(PIXBUF_CFLAGS)
tests_test_images_LDADD = $(KS_TASKS_TEST_LDADD) $(PIXBUF_LIBS) -lm
TESTS += tests/test-images

# Data-set readers (CSV, .npy, IDX, token files) on files written with and without zlib.
check_PROGRAMS += tests/test-table
tests_test_table_CFLAGS = $(AM_CFLAGS) $(ZLIB_CFLAGS)
tests_test_table_LDADD = $(KS_TASKS_TEST_LDADD) $(ZLIB_LIBS) -lm
TESTS += tests/test-table

# Data sets larger than memory (a 256 MiB .npy trained with its rows mapped, RssAnon
# watched) and many files split over workers ([data] split_files), through ksdist.
check_PROGRAMS += tests/test-big-data
tests_test_big_data_CFLAGS = $(AM_CFLAGS) $(ZLIB_CFLAGS)
tests_test_big_data_LDADD = $(KS_TEST_LDADD) $(ZLIB_LIBS) -lm
TESTS += tests/test-big-data

# The image-folder reader on PNGs and JPEGs written here (only the no-gdk-pixbuf error
# without it).
check_PROGRAMS += tests/test-image-folder
tests_test_image_folder_CFLAGS = $(AM_CFLAGS) $(PIXBUF_CFLAGS)
tests_test_image_folder_LDADD = $(KS_TASKS_TEST_LDADD) $(PIXBUF_LIBS) -lm
TESTS += tests/test-image-folder

# Reptile through ksdist train and launch on a glyph set.
check_PROGRAMS += tests/test-meta
tests_test_meta_LDADD = $(KS_TEST_LDADD) -lm
TESTS += tests/test-meta

# Sparse tables (pslib's): rules, admission, shrink, save modes, resharding, bad files.
check_PROGRAMS += tests/test-sparse
tests_test_sparse_LDADD = $(KS_TEST_LDADD) -lm
TESTS += tests/test-sparse
# a shard that cannot grow: sparse.c built with an index of 64 slots at most
check_PROGRAMS += tests/test-sparse-full
tests_test_sparse_full_SOURCES = tests/test-sparse-full.c libksdist/sparse/sparse.c
tests_test_sparse_full_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/libksdist -DKS_SPARSE_INDEX_LIMIT=64
tests_test_sparse_full_CFLAGS = $(AM_CFLAGS) $(JSON_CFLAGS)
tests_test_sparse_full_LDADD = $(KS_TEST_LDADD) -lm
TESTS += tests/test-sparse-full

# Pipeline segmenters and the stage of a layer with virtual stages.
check_PROGRAMS += tests/test-segment
tests_test_segment_LDADD = $(KS_TEST_LDADD) -lm
TESTS += tests/test-segment

# Pipeline schedules as data and their simulation.
check_PROGRAMS += tests/test-pipeline
tests_test_pipeline_LDADD = $(KS_TEST_LDADD) -lm
TESTS += tests/test-pipeline

# Pipelined training against one process: every schedule, one process per stage.
check_PROGRAMS += tests/test-pipe-train
tests_test_pipe_train_LDADD = $(KS_TEST_LDADD) -lm
TESTS += tests/test-pipe-train

# the built-in GPT and the same layers from the config train to the same bits
check_PROGRAMS += tests/test-gpt-net
tests_test_gpt_net_LDADD = $(KS_TEST_LDADD)
TESTS += tests/test-gpt-net

# Parameter-server training: server and worker processes over 127.0.0.1 (ZeroMQ).
if HAVE_ZMQ
check_PROGRAMS += tests/test-ps
tests_test_ps_SOURCES = tests/test-ps.c tests/ps-harness.c tests/ps-harness.h \
	plugins/ps/wire.c plugins/ps/auth.c plugins/ps/session.c
tests_test_ps_CFLAGS = $(AM_CFLAGS) $(JSON_CFLAGS) $(ZMQ_CFLAGS)
tests_test_ps_LDADD = $(KS_TEST_LDADD) $(JSON_LIBS) $(ZMQ_LIBS) -lm
TESTS += tests/test-ps
# its jobs whose processes are killed or stopped
check_PROGRAMS += tests/test-ps-faults
tests_test_ps_faults_SOURCES = tests/test-ps-faults.c tests/ps-harness.c tests/ps-harness.h \
	plugins/ps/wire.c plugins/ps/auth.c plugins/ps/session.c
tests_test_ps_faults_CFLAGS = $(AM_CFLAGS) $(JSON_CFLAGS) $(ZMQ_CFLAGS)
tests_test_ps_faults_LDADD = $(KS_TEST_LDADD) $(JSON_LIBS) $(ZMQ_LIBS) -lm
TESTS += tests/test-ps-faults
check_PROGRAMS += tests/test-pslib
tests_test_pslib_SOURCES = tests/test-pslib.c tests/ps-harness.c tests/ps-harness.h \
	plugins/ps/wire.c plugins/ps/auth.c plugins/ps/session.c
tests_test_pslib_CFLAGS = $(AM_CFLAGS) $(JSON_CFLAGS) $(ZMQ_CFLAGS)
tests_test_pslib_LDADD = $(KS_TEST_LDADD) $(JSON_LIBS) $(ZMQ_LIBS) -lm
TESTS += tests/test-pslib
# the memory a pslib server's default budget starts from, read from fake /proc and /sys
check_PROGRAMS += tests/test-pslib-budget
tests_test_pslib_budget_SOURCES = tests/test-pslib-budget.c plugins/pslib/budget.c
tests_test_pslib_budget_LDADD = $(KS_TEST_LDADD)
TESTS += tests/test-pslib-budget
check_PROGRAMS += tests/test-pslib-trust
tests_test_pslib_trust_SOURCES = tests/test-pslib-trust.c tests/ps-harness.c \
	tests/ps-harness.h plugins/ps/wire.c plugins/ps/auth.c plugins/ps/session.c \
	plugins/pslib/budget.c
tests_test_pslib_trust_CFLAGS = $(AM_CFLAGS) $(JSON_CFLAGS) $(ZMQ_CFLAGS)
tests_test_pslib_trust_LDADD = $(KS_TEST_LDADD) $(JSON_LIBS) $(ZMQ_LIBS) -lm
TESTS += tests/test-pslib-trust
# the servers' and workers' passes over floats against plain loops
check_PROGRAMS += tests/test-ps-floats
tests_test_ps_floats_SOURCES = tests/test-ps-floats.c plugins/ps/floats.c
tests_test_ps_floats_LDADD = $(KS_TEST_LDADD) -lm
TESTS += tests/test-ps-floats
# the framing: a payload straight into the caller's buffer, joined, or refused
check_PROGRAMS += tests/test-ps-wire
tests_test_ps_wire_SOURCES = tests/test-ps-wire.c plugins/ps/wire.c
tests_test_ps_wire_CFLAGS = $(AM_CFLAGS) $(ZMQ_CFLAGS)
tests_test_ps_wire_LDADD = $(KS_TEST_LDADD) $(ZMQ_LIBS)
TESTS += tests/test-ps-wire
# hostile clients against a real server: each attack refused, the job unharmed
check_PROGRAMS += tests/test-ps-hostile
tests_test_ps_hostile_SOURCES = tests/test-ps-hostile.c tests/ps-harness.c \
	tests/ps-harness.h plugins/ps/wire.c plugins/ps/auth.c plugins/ps/session.c
tests_test_ps_hostile_CFLAGS = $(AM_CFLAGS) $(JSON_CFLAGS) $(ZMQ_CFLAGS)
tests_test_ps_hostile_LDADD = $(KS_TEST_LDADD) $(JSON_LIBS) $(ZMQ_LIBS) -lm
TESTS += tests/test-ps-hostile
# they load build-tree plugins: done before test-install relinks them (below)
KS_PS_TEST_LOG = tests/test-ps.log tests/test-ps-faults.log tests/test-pslib.log tests/test-pslib-trust.log \
	tests/test-ps-hostile.log
endif

# The CUDA kernels against the CPU's; skipped without a GPU.
check_PROGRAMS += tests/test-cuda
tests_test_cuda_LDADD = $(KS_TASKS_TEST_LDADD) -lm
TESTS += tests/test-cuda

# The NCCL communicator, a world of one rank on one GPU (skipped without one).
check_PROGRAMS += tests/test-nccl
tests_test_nccl_LDADD = $(KS_TEST_LDADD)
TESTS += tests/test-nccl

# The TCP store's server and clients in one process.
check_PROGRAMS += tests/test-store
tests_test_store_LDADD = $(KS_TEST_LDADD)
TESTS += tests/test-store

# ksdist train against a stand-in for PyTorch's TCPStore: waits end by [comm] timeout, on
# one connection.
check_PROGRAMS += tests/test-store-wait
tests_test_store_wait_LDADD = $(KS_TEST_LDADD)
TESTS += tests/test-store-wait

# The file and TCP stores and the Gloo communicator, one process per rank.
check_PROGRAMS += tests/test-comm
tests_test_comm_LDADD = $(KS_TEST_LDADD) -lm
TESTS += tests/test-comm

# What the Gloo plugin's `auto` takes for a message size, on one host or across hosts.
check_PROGRAMS += tests/test-gloo-choose
tests_test_gloo_choose_SOURCES = tests/test-gloo-choose.c plugins/gloo/choose.c plugins/gloo/choose.h
tests_test_gloo_choose_CFLAGS = $(AM_CFLAGS) # its own objects: the plugin builds choose.c with libtool
tests_test_gloo_choose_LDADD = $(GLIB_LIBS)
TESTS += tests/test-gloo-choose

# The process's watch of its own gaps (away.h), with a child that stops itself.
check_PROGRAMS += tests/test-away
tests_test_away_LDADD = $(KS_TEST_LDADD)
TESTS += tests/test-away

# The communicator conformance suite, against every communicator built (or the one
# KS_KIND_PLUGIN names: make check-plugin).
check_PROGRAMS += tests/test-kind-comm
tests_test_kind_comm_LDADD = $(KS_TEST_LDADD)
TESTS += tests/test-kind-comm

# The compute backend conformance suite, against every backend built (or the one
# KS_KIND_PLUGIN names: make check-plugin).
check_PROGRAMS += tests/test-kind-compute
tests_test_kind_compute_SOURCES = tests/test-kind-compute.c tests/kind-compute-ops.c \
	tests/kind-compute.h
tests_test_kind_compute_LDADD = $(KS_TEST_LDADD) -lm
TESTS += tests/test-kind-compute
# it loads build-tree plugins: done before test-install relinks them
tests/test-install.log: tests/test-kind-compute.log

# make check-plugin PLUGIN=path/to/x.so: the kind suites of the kinds that plugin provides
# (as `ksdist plugins` lists them), run against that plugin alone (doc/testing.md).
check-plugin: all
	@test -n "$(PLUGIN)" || { echo "make check-plugin: say which plugin: PLUGIN=path/to/x.so" >&2; exit 2; }
	@test -f "$(PLUGIN)" || { echo "make check-plugin: $(PLUGIN): no such file" >&2; exit 2; }
	@case "$(PLUGIN)" in /*) p="$(PLUGIN)" ;; *) p="$$PWD/$(PLUGIN)" ;; esac; \
	n=$${p##*/}; n=$${n%.so}; n=$${n#lib}; \
	listing=$$(unset KS_PLUGINS; KS_PLUGIN_SYSTEM_PATH= KS_PLUGIN_PATH="$${p%/*}" tools/ksdist plugins 2>/dev/null); \
	suites=; \
	for k in $$(echo "$$listing" | sed -n "s/^  \([a-z]*\) $$n: .*/\1/p"); do \
	  case $$k in comm) suites="$$suites tests/test-kind-comm" ;; \
	    compute) suites="$$suites tests/test-kind-compute" ;; esac; \
	done; \
	test -n "$$suites" || { echo "make check-plugin: $(PLUGIN) provides no communicator or compute backend, the kinds with a suite; ksdist plugins says:" >&2; \
	  echo "$$listing" | sed -n "/^$$n /,/^$$/p" >&2; exit 2; }; \
	echo "make check-plugin: $$n:$$suites"; \
	KS_KIND_PLUGIN="$$p" $(MAKE) $(AM_MAKEFLAGS) check TESTS="$${suites# }"

# The shared-memory communicator, one process per rank.
check_PROGRAMS += tests/test-shm
tests_test_shm_SOURCES = tests/test-shm.c tests/shm-faults.c tests/shm-faults.h
tests_test_shm_LDADD = $(KS_TEST_LDADD) -lm
TESTS += tests/test-shm

check_PROGRAMS += tests/test-roles
tests_test_roles_LDADD = $(KS_TEST_LDADD)
TESTS += tests/test-roles

# Slurm's variables: node lists, tasks per node, where a step meets (slurm.c built in).
check_PROGRAMS += tests/test-slurm-env
tests_test_slurm_env_SOURCES = tests/test-slurm-env.c libksdist/comm/slurm.c
tests_test_slurm_env_CPPFLAGS = $(AM_CPPFLAGS)
tests_test_slurm_env_LDADD = $(KS_TEST_LDADD)
TESTS += tests/test-slurm-env

# ksdist launch: data-parallel training with worker processes.
check_PROGRAMS += tests/test-launch
tests_test_launch_LDADD = $(KS_TEST_LDADD) -lm
TESTS += tests/test-launch

# ksdist launch when a process dies: --max-restarts, the first cause named, no orphans.
check_PROGRAMS += tests/test-launch-restart
tests_test_launch_restart_LDADD = $(KS_TEST_LDADD)
TESTS += tests/test-launch-restart

# ksdist launch on several nodes names the node a silent peer ran on.
check_PROGRAMS += tests/test-lost-nodes
tests_test_lost_nodes_SOURCES = tests/test-lost-nodes.c tools/launch-rendezvous.c \
	tools/launch-layout.c
tests_test_lost_nodes_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools
tests_test_lost_nodes_LDADD = libksdist-tasks.la $(KS_TEST_LDADD) $(JSON_LIBS)
TESTS += tests/test-lost-nodes

# Criteo data, the streaming AUC and ksdist datagen ctr.
check_PROGRAMS += tests/test-ctr
tests_test_ctr_LDADD = $(KS_TASKS_TEST_LDADD) -lm
TESTS += tests/test-ctr

check_PROGRAMS += tests/test-cli
tests_test_cli_LDADD = $(KS_TASKS_TEST_LDADD)
TESTS += tests/test-cli

# Two hosts made of network namespaces; skipped where they cannot be made.
dist_check_SCRIPTS += tests/test-netns.sh
TESTS += tests/test-netns.sh
# Jobs, restarts and faults across 4 hosts of tools/cluster.sh; skipped likewise.
dist_check_SCRIPTS += tests/test-cluster.sh
TESTS += tests/test-cluster.sh
# Parameter-server jobs across nodes (--nnodes with --servers/--workers per node): on
# 127.0.0.1, then on 3 hosts of tools/cluster.sh; the latter skipped likewise.
dist_check_SCRIPTS += tests/test-cluster-ps.sh
TESTS += tests/test-cluster-ps.sh

# A real Slurm (slurmctld, one slurmd per tools/cluster.sh host, munged) runs ksdist
# jobs; skipped where it cannot start.
dist_check_SCRIPTS += tests/test-slurm.sh
TESTS += tests/test-slurm.sh

# Fuzz targets (tests/fuzz, libFuzzer's interface): a bounded, seeded mutation run of each
# over its corpus (KS_FUZZ_RUNS inputs, 3000 by default).
check_PROGRAMS += tests/fuzz/fuzz-config tests/fuzz/fuzz-checkpoint tests/fuzz/fuzz-store
tests_fuzz_fuzz_config_SOURCES = tests/fuzz/fuzz-config.c tests/fuzz/driver.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_config_LDADD = libksdist.la $(GLIB_LIBS)
tests_fuzz_fuzz_checkpoint_SOURCES = tests/fuzz/fuzz-checkpoint.c tests/fuzz/driver.c \
	tests/fuzz/fuzz.h
tests_fuzz_fuzz_checkpoint_LDADD = libksdist.la $(GLIB_LIBS)
tests_fuzz_fuzz_store_SOURCES = tests/fuzz/fuzz-store.c tests/fuzz/driver.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_store_LDADD = libksdist.la $(GLIB_LIBS)
dist_check_SCRIPTS += tests/fuzz/run-config.sh tests/fuzz/run-checkpoint.sh tests/fuzz/run-store.sh
TESTS += tests/fuzz/run-config.sh tests/fuzz/run-checkpoint.sh tests/fuzz/run-store.sh
# the data-set readers (tasks library): CSV, .npy, IDX and token files, some gzipped
check_PROGRAMS += tests/fuzz/fuzz-table
tests_fuzz_fuzz_table_SOURCES = tests/fuzz/fuzz-table.c tests/fuzz/driver.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_table_LDADD = libksdist-tasks.la libksdist.la $(GLIB_LIBS)
dist_check_SCRIPTS += tests/fuzz/run-table.sh
TESTS += tests/fuzz/run-table.sh
EXTRA_DIST += tests/fuzz/corpus/table/csv.bin tests/fuzz/corpus/table/csv-numeric.bin \
	tests/fuzz/corpus/table/csv.gz.bin tests/fuzz/corpus/table/npy.bin \
	tests/fuzz/corpus/table/npy-regression.bin tests/fuzz/corpus/table/idx.bin \
	tests/fuzz/corpus/table/idx.gz.bin tests/fuzz/corpus/table/shard.bin \
	tests/fuzz/corpus/table/plain-tokens.bin
EXTRA_DIST += tests/fuzz/corpus/checkpoint/checkpoint.safetensors \
	tests/fuzz/corpus/checkpoint/inference.safetensors \
	tests/fuzz/corpus/store/hello-set-get.bin tests/fuzz/corpus/store/hello-add-wait.bin \
	tests/fuzz/corpus/store/hello-remove.bin

# Copies of plugins under other names judged and trained as the originals (traits).
dist_check_SCRIPTS += tests/test-traits.sh
TESTS += tests/test-traits.sh

# Every example, run as its header says (shortened).
dist_check_SCRIPTS += tests/test-examples.sh
TESTS += tests/test-examples.sh

# The plan: every mode x executor x task x amp trains or is refused alike by config,
# launch and train; the mix-ups that once ran silently.
dist_check_SCRIPTS += tests/test-plan.sh
TESTS += tests/test-plan.sh

dist_check_SCRIPTS += tests/test-layers.sh tests/test-own-data.sh tests/test-layers-torch.sh \
	tests/test-layers-binary.sh
TESTS += tests/test-layers.sh tests/test-own-data.sh tests/test-layers-torch.sh \
	tests/test-layers-binary.sh
EXTRA_DIST += tests/layers_torch.py

# doc/benchmarks.md made by bench/make-benchmarks-doc.sh (checked by --list, no bench run);
# the README under 35,000 bytes.
dist_check_SCRIPTS += tests/test-benchmarks-doc.sh
TESTS += tests/test-benchmarks-doc.sh

# doc/config.md against ksdist config --reference
dist_check_SCRIPTS += tests/test-reference.sh
TESTS += tests/test-reference.sh
dist_check_SCRIPTS += tests/test-man.sh
TESTS += tests/test-man.sh
dist_check_SCRIPTS += tests/test-mpi-env.sh
TESTS += tests/test-mpi-env.sh
dist_check_SCRIPTS += tests/test-progress.sh
TESTS += tests/test-progress.sh

# Every held-out row scored once, with the true count, on every executor.
dist_check_SCRIPTS += tests/test-eval-rows.sh
TESTS += tests/test-eval-rows.sh
dist_check_SCRIPTS += tests/test-infer-data.sh
TESTS += tests/test-infer-data.sh
dist_check_SCRIPTS += tests/test-eval-cap.sh
TESTS += tests/test-eval-cap.sh
dist_check_SCRIPTS += tests/test-missing-mean.sh
TESTS += tests/test-missing-mean.sh
dist_check_SCRIPTS += tests/test-ctr-hint.sh
TESTS += tests/test-ctr-hint.sh
dist_check_SCRIPTS += tests/test-generate-layers.sh
TESTS += tests/test-generate-layers.sh

# Names one place owns (store implementations, the tasks library's tasks and input files)
# are written nowhere else.
dist_check_SCRIPTS += tests/test-names.sh
TESTS += tests/test-names.sh

# The core loads no image or font library; the tasks library holds what does.
dist_check_SCRIPTS += tests/test-core-deps.sh
TESTS += tests/test-core-deps.sh
tests/test-core-deps.log: examples/own-model$(EXEEXT) libksdist-tasks.la

# examples/own-model.c trains in every mode (tests/test-own-model.sh).
dist_check_SCRIPTS += tests/test-own-model.sh
TESTS += tests/test-own-model.sh
tests/test-own-model.log: examples/own-model$(EXEEXT)

# ksdist export --torch loaded by PyTorch (python3-torch; skipped without it).
dist_check_SCRIPTS += tests/test-export-torch.sh
EXTRA_DIST += tests/torch-load.py tests/lsan.supp tests/tap.sh
TESTS += tests/test-export-torch.sh

# [model] init_from of a GPT from its export --torch (the task's PyTorch names).
dist_check_SCRIPTS += tests/test-gpt-init-from.sh
TESTS += tests/test-gpt-init-from.sh

# A CNN's weights (conv2d, batch_norm, pools, flatten) to PyTorch and back (python3-torch).
dist_check_SCRIPTS += tests/test-cnn-torch.sh
EXTRA_DIST += tests/cnn_torch.py
TESTS += tests/test-cnn-torch.sh

# Limits and bad values: exit statuses, environment typos, long values, BLAS threads.
dist_check_SCRIPTS += tests/test-limits.sh
TESTS += tests/test-limits.sh

# A run owns its checkpoint_dir: fresh runs refused or started over, one job at a time.
dist_check_SCRIPTS += tests/test-ckpt-owner.sh
TESTS += tests/test-ckpt-owner.sh
# it loads build-tree plugins (see test-install.log below)
tests/test-install.log: tests/test-ckpt-owner.log

# Preemption: SIGTERM or SIGINT saves at the next step boundary, says how to resume, and
# exits 128 + the signal; under ksdist launch too; a second signal stops at once.
dist_check_SCRIPTS += tests/test-preempt.sh
TESTS += tests/test-preempt.sh
tests/test-install.log: tests/test-preempt.log
# A signal before the first step: one line, nothing saved, 128 + the signal (issue 49).
dist_check_SCRIPTS += tests/test-signal-startup.sh
TESTS += tests/test-signal-startup.sh
tests/test-install.log: tests/test-signal-startup.log
# Re-sealed checkpoint fields: ranges and cross-file invariants on load (issue 49).
dist_check_SCRIPTS += tests/test-ckpt-fields.sh
EXTRA_DIST += tests/ckpt-reseal.py
TESTS += tests/test-ckpt-fields.sh
tests/test-install.log: tests/test-ckpt-fields.log
# IDX headers checked before decompressing, gzip bounded by them (issue 49).
dist_check_SCRIPTS += tests/test-idx-bounds.sh
TESTS += tests/test-idx-bounds.sh
tests/test-install.log: tests/test-idx-bounds.log
# A token file rewritten during a run: the file named (issue 49).
dist_check_SCRIPTS += tests/test-tokens-rewrite.sh
TESTS += tests/test-tokens-rewrite.sh
tests/test-install.log: tests/test-tokens-rewrite.log

# Out-of-tree plugin: install to a temporary root, build against it, load.
dist_check_SCRIPTS += tests/test-install.sh
EXTRA_DIST += tests/out-of-tree/oot.c
TESTS += tests/test-install.sh
# `make install` relinks the plugins, moving .libs/NAME.so aside for a moment (libtool
# renames it NAME.soU): the tests that load build-tree plugins must be done by then.
tests/test-install.log: tests/test-loader.log tests/test-config.log tests/test-settings.log \
	tests/test-factory.log tests/test-compute.log tests/test-kernels.log tests/test-tensor.log \
	tests/test-model.log tests/test-conv.log tests/test-conv-blocks.log tests/test-images.log tests/test-meta.log tests/test-optim.log tests/test-checkpoint.log tests/test-amp.log tests/test-cli.log \
	tests/test-cuda.log tests/test-nccl.log tests/test-comm.log tests/test-shm.log tests/test-kind-comm.log tests/test-roles.log \
	tests/test-store.log tests/test-store-wait.log \
	tests/test-launch.log tests/test-launch-restart.log tests/test-netns.log tests/test-cluster.log \
	tests/test-cluster-ps.log \
	tests/test-slurm.log \
	tests/test-segment.log \
	tests/test-pipe-train.log tests/test-gpt-net.log tests/test-ctr.log tests/test-big-data.log \
	tests/fuzz/run-checkpoint.log \
	tests/fuzz/run-store.log tests/test-examples.log tests/test-export-torch.log \
	tests/test-own-model.log tests/test-plan.log tests/test-core-deps.log \
	tests/test-reference.log tests/test-man.log tests/test-mpi-env.log tests/test-progress.log \
	$(KS_PS_TEST_LOG)

# The whole suite under ASan, LeakSanitizer and UBSan, in a copy of the distribution
# configured with --enable-sanitizers (this tree keeps its own build).
SANITIZE_DIR = sanitize-build
check-sanitize:
	rm -rf $(SANITIZE_DIR)
	$(MAKE) $(AM_MAKEFLAGS) distdir distdir=$(SANITIZE_DIR)
	cd $(SANITIZE_DIR) && ./configure --enable-sanitizers --quiet && $(MAKE) $(AM_MAKEFLAGS) check
	rm -rf $(SANITIZE_DIR)
clean-local:
	rm -rf $(SANITIZE_DIR)

# [data] dtype of token files: uint16 shards and uint32 files alike; a wrong one warned about.
dist_check_SCRIPTS += tests/test-tokens-dtype.sh
TESTS += tests/test-tokens-dtype.sh

# Plugin optimizers: the [optim] rate and schedule reach them; what they cannot do is refused.
dist_check_SCRIPTS += tests/test-plugin-optim.sh
TESTS += tests/test-plugin-optim.sh

# The first hour's frictions end to end: paths, comments, missing cells, missing classes.
dist_check_SCRIPTS += tests/test-first-hour.sh
TESTS += tests/test-first-hour.sh
