/* What a server's sparse tables may hold by default ([table.NAME] max_rows = 0): [pslib]
 * server_memory_mb, or (0) a quarter of the host's memory shared by the parameter servers
 * on the host (the workers, the dense tables and the system keep the rest); in each
 * server, shared by its tables. A table's own max_rows wins. */
#ifndef KS_PSLIB_BUDGET_H
#define KS_PSLIB_BUDGET_H

#include <glib.h>

/* Bytes of memory this process may use: the smallest memory limit of its own cgroups
 * and their parents (/proc/self/cgroup's paths; v2 memory.max under /sys/fs/cgroup or
 * /sys/fs/cgroup/unified, v1 memory.limit_in_bytes under /sys/fs/cgroup/memory), else
 * the host's MemTotal. `root` is "/", or a fake root holding proc/ and sys/ (the tests);
 * *source (free it) says which file gave the figure. */
double ps_memory_at (const char *root, char **source);
/* How many of the `servers` endpoints ("host:port") share the host of server `index`. */
int ps_servers_on_host (const char *const *endpoints, int servers, int index);
/* The bytes a server's sparse tables share: [pslib] server_memory_mb when set (above the
 * memory this process may use: a configuration error), else a quarter of that memory over
 * the `host_servers` servers of its host (itself included); *why (free it) says which,
 * for the server's line. */
gboolean ps_server_budget (const char *root, gint64 server_memory_mb, int host_servers,
                           double *bytes, char **why, GError **error);
/* The default max_rows of each of `tables` tables of rows of `row_bytes` sharing
 * `budget` bytes; 1000 at least. */
gint64 ps_default_max_rows (double budget, gsize tables, gsize row_bytes);

#endif
