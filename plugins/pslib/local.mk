# The pslib algorithm: sparse tables on parameter servers, on the parameter-server runtime
# of plugins/ps/ (its transport, dense tables and checkpoints).
if HAVE_ZMQ
pkglib_LTLIBRARIES += plugins/pslib/pslib.la
plugins_pslib_pslib_la_SOURCES = plugins/pslib/pslib.c \
	plugins/pslib/rows.c plugins/pslib/rows.h plugins/pslib/budget.c plugins/pslib/budget.h \
	plugins/pslib/sparse-worker.c plugins/pslib/sparse-worker.h
plugins_pslib_pslib_la_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/plugins $(ZMQ_CFLAGS) $(JSON_CFLAGS)
plugins_pslib_pslib_la_LDFLAGS = $(KS_PLUGIN_LDFLAGS)
plugins_pslib_pslib_la_LIBADD = plugins/ps/libps.la $(KS_PLUGIN_LIBADD) \
	$(ZMQ_LIBS) $(JSON_LIBS) -lpthread -lm
endif
