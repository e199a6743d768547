# The shared-memory communicator for the ranks of one host (POSIX shm, futexes and
# process_vm_readv).
pkglib_LTLIBRARIES += plugins/shm/shm.la
plugins_shm_shm_la_SOURCES = plugins/shm/shm.h plugins/shm/segment.c plugins/shm/names.c \
	plugins/shm/collectives.c plugins/shm/p2p.c plugins/target-clones.h
plugins_shm_shm_la_LDFLAGS = $(KS_PLUGIN_LDFLAGS)
plugins_shm_shm_la_LIBADD = $(KS_PLUGIN_LIBADD) -lrt
