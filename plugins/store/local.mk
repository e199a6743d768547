# Rendezvous stores: file, TCP (client, server, wire format), PyTorch's c10d (client).
pkglib_LTLIBRARIES += plugins/store/store.la
plugins_store_store_la_SOURCES = plugins/store/store.c plugins/store/tcp-store.c \
	plugins/store/tcp-server.c plugins/store/c10d-store.c plugins/store/tcp.h plugins/store/wire.c plugins/store/wire.h
plugins_store_store_la_LDFLAGS = $(KS_PLUGIN_LDFLAGS)
plugins_store_store_la_LIBADD = $(KS_PLUGIN_LIBADD)
