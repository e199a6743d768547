# The GPU compute backend (CUDA runtime + cuBLAS; never -lcuda).
if HAVE_CUDA
pkglib_LTLIBRARIES += plugins/cuda/cuda.la
plugins_cuda_cuda_la_SOURCES = plugins/cuda/cuda.c
plugins_cuda_cuda_la_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS)
plugins_cuda_cuda_la_LDFLAGS = $(KS_PLUGIN_LDFLAGS)
plugins_cuda_cuda_la_LIBADD = $(KS_PLUGIN_LIBADD) $(CUDA_LIBS)
endif
EXTRA_DIST += plugins/cuda/cuda.c
