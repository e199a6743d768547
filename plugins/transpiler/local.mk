# The transpiler algorithm: parameter-server training (sync, half-async, async, GEO) with
# the trainer-server traffic on ZeroMQ, on the parameter-server runtime of plugins/ps/.
if HAVE_ZMQ
pkglib_LTLIBRARIES += plugins/transpiler/transpiler.la
plugins_transpiler_transpiler_la_SOURCES = plugins/transpiler/transpiler.c
plugins_transpiler_transpiler_la_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/plugins $(ZMQ_CFLAGS) $(JSON_CFLAGS)
plugins_transpiler_transpiler_la_LDFLAGS = $(KS_PLUGIN_LDFLAGS)
plugins_transpiler_transpiler_la_LIBADD = plugins/ps/libps.la $(KS_PLUGIN_LIBADD) \
	$(ZMQ_LIBS) $(JSON_LIBS) -lpthread
endif
