# libksdist: the core library and its public headers.
lib_LTLIBRARIES += libksdist.la
libksdist_la_SOURCES = \
	libksdist/ks-private.h \
	libksdist/types.c \
	libksdist/suggest.c \
	libksdist/config.c \
	libksdist/config-schema.c \
	libksdist/settings.c \
	libksdist/loader.h \
	libksdist/loader.c \
	libksdist/registry.c \
	libksdist/instance.c \
	libksdist/amp.c \
	libksdist/compute.c \
	libksdist/tensor.c \
	libksdist/model-private.h \
	libksdist/model.c \
	libksdist/model-ops.c \
	libksdist/model-conv.c \
	libksdist/optimizer.c \
	libksdist/checkpoint.c \
	libksdist/seal.c \
	libksdist/safetensors.c \
	libksdist/inference.c \
	libksdist/segmenter.c \
	libksdist/schedule.c \
	libksdist/pipeline.c \
	libksdist/layers.c \
	libksdist/comm.c \
	libksdist/comm-hier.c \
	libksdist/comm-private.h \
	libksdist/rolemaker.c \
	libksdist/algorithm.c \
	libksdist/sparse.c \
	libksdist/trainer/trainer-private.h \
	libksdist/trainer/trainer.c \
	libksdist/trainer/plan.c \
	libksdist/trainer/single.c \
	libksdist/trainer/dist.c \
	libksdist/trainer/meet.c \
	libksdist/trainer/stages.c \
	libksdist/trainer/precision.c \
	libksdist/trainer/persist.c \
	libksdist/trainer/loop.c \
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
	include/ksdist/rolemaker.h \
	include/ksdist/segmenter.h \
	include/ksdist/pipeline.h \
	include/ksdist/optimizer.h \
	include/ksdist/algorithm.h \
	include/ksdist/factory.h \
	include/ksdist/sparse.h \
	include/ksdist/trainer.h
nodist_ksdistinclude_HEADERS = include/ksdist/version.h
