# Rendezvous stores (file).
pkglib_LTLIBRARIES += plugins/store/store.la
plugins_store_store_la_SOURCES = plugins/store/store.c
plugins_store_store_la_LDFLAGS = $(KS_PLUGIN_LDFLAGS)
plugins_store_store_la_LIBADD = $(KS_PLUGIN_LIBADD)
