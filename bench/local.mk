# Benchmarks: not tests (timings on shared machines are noisy); `make bench` runs them.
if HAVE_OPENBLAS
EXTRA_PROGRAMS += bench/bench-sgemm bench/bench-mlp bench/bench-gpt bench/bench-conv bench/bench-ddp
bench_bench_conv_SOURCES = bench/bench-conv.c bench/step-timing.h
bench_bench_conv_LDADD = libksdist.la $(GLIB_LIBS)
bench_bench_ddp_SOURCES = bench/bench-ddp.c
bench_bench_ddp_LDADD = libksdist.la $(GLIB_LIBS)
bench_bench_gpt_SOURCES = bench/bench-gpt.c bench/step-timing.h
bench_bench_gpt_LDADD = libksdist-tasks.la libksdist.la $(GLIB_LIBS)
bench_bench_mlp_SOURCES = bench/bench-mlp.c bench/step-timing.h
bench_bench_mlp_LDADD = libksdist.la $(GLIB_LIBS)
bench_bench_sgemm_SOURCES = bench/bench-sgemm.c
bench_bench_sgemm_CFLAGS = $(AM_CFLAGS) $(OPENBLAS_CFLAGS)
bench_bench_sgemm_LDADD = libksdist.la $(GLIB_LIBS) $(OPENBLAS_LIBS)
CLEANFILES += bench/bench-sgemm bench/bench-mlp bench/bench-gpt bench/bench-conv bench/bench-ddp
EXTRA_DIST += bench/bench-mlp-torch.py bench/bench-gpt-torch.py bench/bench-conv-torch.py \
	bench/torch_step_timing.py bench/run-vs-torch.sh bench/bench-overlap.sh \
	bench/bench-cnn-config.sh bench/bench-cnn-idx-torch.py bench/bench-data.sh \
	bench/cnn-idx-accuracy-torch.py bench/bench-csv.sh bench/csv-classifier-torch.py \
	bench/thread-scaling.sh

bench: bench/bench-sgemm bench/bench-mlp bench/bench-gpt bench/bench-conv
	KS_PLUGIN_PATH=$(abs_top_builddir)/plugins/openblas/.libs KS_PLUGIN_SYSTEM_PATH= \
		bench/bench-sgemm 1
	KS_PLUGIN_PATH=$(abs_top_builddir)/plugins/openblas/.libs KS_PLUGIN_SYSTEM_PATH= \
		bench/bench-sgemm
	$(SHELL) $(srcdir)/bench/run-vs-torch.sh mlp
	$(SHELL) $(srcdir)/bench/run-vs-torch.sh gpt
	$(SHELL) $(srcdir)/bench/run-vs-torch.sh conv
.PHONY: bench
endif

# Allreduce: `ksdist bench allreduce` beside raw Gloo (bench/bench-allreduce [N]) and
# PyTorch's gloo backend (bench/allreduce-torch.py), by bench/run-allreduce.sh.
if HAVE_GLOO
EXTRA_PROGRAMS += bench/bench-allreduce
bench_bench_allreduce_SOURCES = bench/bench-allreduce.cc
bench_bench_allreduce_CXXFLAGS = $(KS_CXXFLAGS) $(GLOO_CFLAGS) $(GLIB_CFLAGS)
bench_bench_allreduce_LDADD = $(GLIB_LIBS) $(GLOO_LIBS)
CLEANFILES += bench/bench-allreduce

bench-allreduce: bench/bench-allreduce tools/ksdist
	$(SHELL) $(srcdir)/bench/run-allreduce.sh 2
.PHONY: bench-allreduce

# Data-parallel step time: bench/bench-ddp beside PyTorch DDP (bench/run-ddp.sh).
bench-ddp: bench/bench-ddp
	$(SHELL) $(srcdir)/bench/run-ddp.sh 2
.PHONY: bench-ddp
endif
EXTRA_DIST += bench/bench-allreduce.cc bench/run-allreduce.sh bench/allreduce-torch.py \
	bench/allreduce-mpi.c \
	bench/memcpy-rate.c \
	bench/run-ddp.sh bench/ddp-torch.py bench/run-pipeline.sh

# Parameter servers: every transpiler mode with 1 and 2 servers beside the collective mode
# and loopback TCP (bench/bench-ps [W], by bench/run-ps.sh).
EXTRA_PROGRAMS += bench/bench-ps
bench_bench_ps_SOURCES = bench/bench-ps.c
bench_bench_ps_LDADD = libksdist.la $(GLIB_LIBS)
CLEANFILES += bench/bench-ps
EXTRA_DIST += bench/run-ps.sh bench/hostile-ps.sh bench/run-cluster.sh bench/cluster-doc.py bench/ps-async-accuracy.sh
if HAVE_ZMQ
bench-ps: bench/bench-ps
	$(SHELL) $(srcdir)/bench/run-ps.sh
.PHONY: bench-ps
# the transport alone: before CURVE and now (bench/bench-ps-wire [MiB [rounds]])
EXTRA_PROGRAMS += bench/bench-ps-wire
bench_bench_ps_wire_SOURCES = bench/bench-ps-wire.c plugins/ps/wire.c plugins/ps/auth.c
bench_bench_ps_wire_CFLAGS = $(AM_CFLAGS) $(ZMQ_CFLAGS)
bench_bench_ps_wire_LDADD = libksdist.la $(GLIB_LIBS) $(ZMQ_LIBS)
CLEANFILES += bench/bench-ps-wire
endif

# Sparse tables: create, pull, push, memory per row, save and load of N rows beside this
# machine's memcpy bandwidth (bench/bench-sparse [N [DIR]]).
EXTRA_PROGRAMS += bench/bench-sparse
bench_bench_sparse_SOURCES = bench/bench-sparse.c
bench_bench_sparse_LDADD = libksdist.la $(GLIB_LIBS)
CLEANFILES += bench/bench-sparse
bench-sparse: bench/bench-sparse
	bench/bench-sparse

# The pslib mode: the table above at 10M rows, then CTR training with 2 workers for S = 1,
# 2, staleness 0, 4 and the dense part on servers or allreduced (bench/run-pslib.sh).
EXTRA_DIST += bench/run-pslib.sh
# (automake takes .PHONY only under conditions: the rules themselves are unconditional)
if HAVE_ZMQ
bench-pslib: bench/bench-sparse tools/ksdist
	$(SHELL) $(srcdir)/bench/run-pslib.sh
.PHONY: bench-sparse bench-pslib benchmarks-doc
else
.PHONY: bench-sparse benchmarks-doc
endif

# doc/benchmarks.md, every table of it printed by its bench in one run with the machine
# and the spread over the runs (bench/make-benchmarks-doc.sh; --quick here, a few
# minutes; the script without it runs the full sizes).
EXTRA_DIST += bench/make-benchmarks-doc.sh bench/benchmarks.md.in bench/run-examples.sh
benchmarks-doc: tools/ksdist
	$(SHELL) $(srcdir)/bench/make-benchmarks-doc.sh --quick
