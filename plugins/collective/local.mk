# The collective algorithm: data-parallel training (gradient allreduce, LocalSGD).
pkglib_LTLIBRARIES += plugins/collective/collective.la
plugins_collective_collective_la_SOURCES = plugins/collective/collective.c \
	plugins/collective/checkpoint.c plugins/collective/checkpoint.h
plugins_collective_collective_la_LDFLAGS = $(KS_PLUGIN_LDFLAGS)
plugins_collective_collective_la_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/plugins
plugins_collective_collective_la_LIBADD = plugins/average/libaverage.la $(KS_PLUGIN_LIBADD)
