# The parameter-server runtime that the transpiler and pslib plugins share (not a plugin
# itself: a convenience library linked into both): the ZeroMQ transport and its wire
# format, the dense tables and their shards, the server, the worker's modes (sync,
# half-async, async, GEO) and the job's checkpoints. Plugins include it as "ps/NAME.h".
if HAVE_ZMQ
noinst_LTLIBRARIES += plugins/ps/libps.la
plugins_ps_libps_la_SOURCES = \
	plugins/ps/strategy.c plugins/ps/strategy.h \
	plugins/ps/layout.c plugins/ps/layout.h \
	plugins/ps/wire.c plugins/ps/wire.h \
	plugins/ps/floats.c plugins/ps/floats.h \
	plugins/ps/auth.c plugins/ps/auth.h \
	plugins/ps/session.c plugins/ps/session.h \
	plugins/ps/client.c plugins/ps/client.h \
	plugins/ps/server.c plugins/ps/server.h \
	plugins/ps/table.c plugins/ps/table.h \
	plugins/ps/shard.c plugins/ps/shard.h \
	plugins/ps/worker.c plugins/ps/worker.h \
	plugins/ps/job.c plugins/ps/job.h \
	plugins/ps/settings.c plugins/ps/settings.h
plugins_ps_libps_la_CFLAGS = $(AM_CFLAGS) $(ZMQ_CFLAGS) $(JSON_CFLAGS)
endif
