# The CPU compute backend.
if HAVE_OPENBLAS
pkglib_LTLIBRARIES += plugins/openblas/openblas.la
plugins_openblas_openblas_la_SOURCES = plugins/openblas/openblas.c \
	plugins/openblas/kernels.h plugins/openblas/kernels.c plugins/openblas/conv.c \
	plugins/openblas/conv-gemm.c plugins/openblas/attention.c plugins/openblas/half.c \
	plugins/openblas/vector.h plugins/target-clones.h
plugins_openblas_openblas_la_CFLAGS = $(AM_CFLAGS) $(OPENBLAS_CFLAGS)
plugins_openblas_openblas_la_LDFLAGS = $(KS_PLUGIN_LDFLAGS)
plugins_openblas_openblas_la_LIBADD = $(KS_PLUGIN_LIBADD) $(OPENBLAS_LIBS) -lm
endif
EXTRA_DIST += plugins/openblas/openblas.c plugins/openblas/kernels.h plugins/openblas/kernels.c plugins/openblas/conv.c \
	plugins/openblas/conv-gemm.c plugins/openblas/attention.c plugins/openblas/half.c plugins/openblas/vector.h \
	plugins/target-clones.h
