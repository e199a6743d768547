# The collective algorithm: data-parallel training (gradient allreduce, LocalSGD).
pkglib_LTLIBRARIES += plugins/collective/collective.la
plugins_collective_collective_la_SOURCES = plugins/collective/collective.c \
	plugins/collective/checkpoint.c plugins/collective/checkpoint.h
plugins_collective_collective_la_LDFLAGS = $(KS_PLUGIN_LDFLAGS)
plugins_collective_collective_la_LIBADD = $(KS_PLUGIN_LIBADD)
