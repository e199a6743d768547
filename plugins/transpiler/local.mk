# The transpiler algorithm: parameter-server training (sync, half-async, async, GEO) with
# the trainer-server traffic on ZeroMQ. libps holds what the pslib mode shares with it:
# the transport, the dense tables, the worker's modes and the job's checkpoints.
if HAVE_ZMQ
noinst_LTLIBRARIES += plugins/transpiler/libps.la
plugins_transpiler_libps_la_SOURCES = \
	plugins/transpiler/strategy.c plugins/transpiler/strategy.h \
	plugins/transpiler/layout.c plugins/transpiler/layout.h \
	plugins/transpiler/wire.c plugins/transpiler/wire.h \
	plugins/transpiler/client.c plugins/transpiler/client.h \
	plugins/transpiler/server.c plugins/transpiler/server.h \
	plugins/transpiler/table.c plugins/transpiler/table.h \
	plugins/transpiler/shard.c plugins/transpiler/shard.h \
	plugins/transpiler/worker.c plugins/transpiler/worker.h \
	plugins/transpiler/job.c plugins/transpiler/job.h \
	plugins/transpiler/settings.c plugins/transpiler/settings.h
plugins_transpiler_libps_la_CFLAGS = $(AM_CFLAGS) $(ZMQ_CFLAGS) $(JSON_CFLAGS)

pkglib_LTLIBRARIES += plugins/transpiler/transpiler.la
plugins_transpiler_transpiler_la_SOURCES = plugins/transpiler/transpiler.c
plugins_transpiler_transpiler_la_CFLAGS = $(AM_CFLAGS) $(ZMQ_CFLAGS) $(JSON_CFLAGS)
plugins_transpiler_transpiler_la_LDFLAGS = $(KS_PLUGIN_LDFLAGS)
plugins_transpiler_transpiler_la_LIBADD = plugins/transpiler/libps.la $(KS_PLUGIN_LIBADD) \
	$(ZMQ_LIBS) $(JSON_LIBS) -lpthread
endif
