/* What a server's sparse tables may hold by default ([table.NAME] max_rows = 0): a
 * quarter of the host's memory, shared by the parameter servers on the host and, in each,
 * by its tables (the workers, the dense tables and the system keep the rest). */
#ifndef KS_PSLIB_BUDGET_H
#define KS_PSLIB_BUDGET_H

#include <glib.h>

/* Bytes of memory this host gives its processes: the physical memory, or the memory
 * cgroup's limit (a container's) when that is lower. */
double ps_host_memory (void);
/* How many of the `servers` endpoints ("host:port") share the host of server `index`. */
int ps_servers_on_host (const char *const *endpoints, int servers, int index);
/* The default max_rows of each of `tables` tables of rows of `row_bytes` on a server
 * that shares `memory` bytes with `host_servers` servers (itself included); 1000 at least. */
gint64 ps_default_max_rows (double memory, int host_servers, gsize tables, gsize row_bytes);

#endif
