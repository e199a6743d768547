# libksdist: the core library and its public headers.
lib_LTLIBRARIES += libksdist.la
libksdist_la_SOURCES = libksdist/ks-private.h
# config/: the configuration: files, schema, plugin settings, error names
libksdist_la_SOURCES += libksdist/config/types.c \
	libksdist/config/suggest.c \
	libksdist/config/config.c \
	libksdist/config/config-comments.c \
	libksdist/config/config-paths.c \
	libksdist/config/config-env.c \
	libksdist/config/config-schema.c \
	libksdist/config/settings.c
# plugin/: the plugin core: loader, registry, instances of a kind
libksdist_la_SOURCES += libksdist/plugin/loader.h \
	libksdist/plugin/loader.c \
	libksdist/plugin/registry.c \
	libksdist/plugin/traits.c \
	libksdist/plugin/instance.c
# compute/: compute backends and tensors
libksdist_la_SOURCES += libksdist/compute/compute.c \
	libksdist/compute/tensor.c
# model/: the model: graph, ops, layers, mixed precision
libksdist_la_SOURCES += libksdist/model/model-private.h \
	libksdist/model/model.c \
	libksdist/model/model-backward.c \
	libksdist/model/model-ops.c \
	libksdist/model/model-attention.c \
	libksdist/model/model-conv.c \
	libksdist/model/torch-layout.c \
	libksdist/model/layers.c \
	libksdist/model/amp.c
# optim/: optimizers
libksdist_la_SOURCES += libksdist/optim/optimizer.c libksdist/optim/dist-optimizer.c \
	libksdist/optim/schedule.c
# comm/: communicators, role makers, gradient averaging
libksdist_la_SOURCES += libksdist/comm/comm-private.h \
	libksdist/comm/comm.c \
	libksdist/comm/store-kinds.c \
	libksdist/comm/comm-hier.c \
	libksdist/comm/address.c \
	libksdist/comm/slurm.h \
	libksdist/comm/slurm.c \
	libksdist/comm/rolemaker.c \
	libksdist/comm/away.c \
	libksdist/comm/average.c
# algorithm/: distributed algorithms (the mode plugins' interface)
libksdist_la_SOURCES += libksdist/algorithm/algorithm.c
# pipeline/: pipeline parallelism: segmenters, schedules, the stage runtime
libksdist_la_SOURCES += libksdist/pipeline/segmenter.c \
	libksdist/pipeline/schedule.c \
	libksdist/pipeline/pipeline-private.h \
	libksdist/pipeline/pipeline.c \
	libksdist/pipeline/pipeline-run.c \
	libksdist/pipeline/pipeline-trace.c \
	libksdist/pipeline/pipeline-save.c
# io/: persistence: safetensors, seals, checkpoints, inference exports
libksdist_la_SOURCES += libksdist/io/safetensors.c \
	libksdist/io/seal.c \
	libksdist/io/checkpoint-private.h \
	libksdist/io/checkpoint.c \
	libksdist/io/checkpoint-write.c \
	libksdist/io/checkpoint-dir.c \
	libksdist/io/inference.c \
	libksdist/io/torch.c
# sparse/: sparse tables (pslib)
libksdist_la_SOURCES += libksdist/sparse/sparse-private.h \
	libksdist/sparse/sparse.c \
	libksdist/sparse/sparse-file.c
# trainer/: the trainer (trainer.h): the plan, the loop, the executors
libksdist_la_SOURCES += libksdist/trainer/trainer-private.h \
	libksdist/trainer/trainer.c \
	libksdist/trainer/init-from.c \
	libksdist/trainer/plan.c \
	libksdist/trainer/owner.c \
	libksdist/trainer/single.c \
	libksdist/trainer/dist.c \
	libksdist/trainer/meet.c \
	libksdist/trainer/stages.c \
	libksdist/trainer/precision.c \
	libksdist/trainer/persist.c \
	libksdist/trainer/stop.c \
	libksdist/trainer/loop.c \
	libksdist/trainer/observe.c \
	libksdist/trainer/own.c \
	libksdist/trainer/progress.c \
	libksdist/trainer/main.c
libksdist_la_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/libksdist $(JSON_CFLAGS)
libksdist_la_LIBADD = $(GLIB_LIBS) $(JSON_LIBS) -lm
libksdist_la_LDFLAGS = -no-undefined -version-info 0:0:0

ksdistincludedir = $(includedir)/ksdist
ksdistinclude_HEADERS = \
	include/ksdist/ksdist.h \
	include/ksdist/types.h \
	include/ksdist/config.h \
	include/ksdist/plugin.h \
	include/ksdist/registry.h \
	include/ksdist/compute.h \
	include/ksdist/half.h \
	include/ksdist/tensor.h \
	include/ksdist/model.h \
	include/ksdist/checkpoint.h \
	include/ksdist/comm.h \
	include/ksdist/away.h \
	include/ksdist/average.h \
	include/ksdist/rolemaker.h \
	include/ksdist/segmenter.h \
	include/ksdist/pipeline.h \
	include/ksdist/optimizer.h \
	include/ksdist/dist-optimizer.h \
	include/ksdist/algorithm.h \
	include/ksdist/factory.h \
	include/ksdist/sparse.h \
	include/ksdist/trainer.h
nodist_ksdistinclude_HEADERS = include/ksdist/version.h
