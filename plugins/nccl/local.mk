# The NCCL communicator (CUDA runtime + libnccl; never -lcuda).
if HAVE_NCCL
pkglib_LTLIBRARIES += plugins/nccl/nccl.la
plugins_nccl_nccl_la_SOURCES = plugins/nccl/nccl.c
plugins_nccl_nccl_la_CFLAGS = $(AM_CFLAGS) $(NCCL_CFLAGS)
plugins_nccl_nccl_la_LDFLAGS = $(KS_PLUGIN_LDFLAGS)
plugins_nccl_nccl_la_LIBADD = $(KS_PLUGIN_LIBADD) $(NCCL_LIBS)
endif
EXTRA_DIST += plugins/nccl/nccl.c
