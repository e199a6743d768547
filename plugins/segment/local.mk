# Pipeline segmenters: uniform, layer:<regex>, parameters, cost, explicit list.
pkglib_LTLIBRARIES += plugins/segment/segment.la
plugins_segment_segment_la_SOURCES = plugins/segment/segment.c
plugins_segment_segment_la_LDFLAGS = $(KS_PLUGIN_LDFLAGS)
plugins_segment_segment_la_LIBADD = $(KS_PLUGIN_LIBADD) -lm
