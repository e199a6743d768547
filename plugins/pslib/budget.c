/* The default budget of a server's sparse tables (budget.h). */
#include "budget.h"

#include <ksdist/ksdist.h>

#include <math.h>
#include <string.h>
#include <unistd.h>

/* A limit file's bytes: 0 for "max" (v2: none), a missing or unreadable file. */
static double
read_limit (const char *path)
{
  g_autofree char *text = NULL;
  char *end;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return 0;
  double limit = g_ascii_strtod (text, &end);
  return end != text && limit > 0 ? limit : 0;
}

/* The smallest `file` of the cgroup `path` under the hierarchy mounted at `base` and of
 * its parents up to `base` itself (a parent's limit holds its children too); *where: the
 * file it was read from. */
static double
smallest_up (const char *base, const char *path, const char *file, double least,
             char **where)
{
  g_autofree char *dir = g_build_filename (base, path, NULL);
  for (;;)
    {
      g_autofree char *name = g_build_filename (dir, file, NULL);
      double limit = read_limit (name);
      if (limit > 0 && (least == 0 || limit < least))
        {
          least = limit;
          g_free (*where);
          *where = g_steal_pointer (&name);
        }
      /* stop at the mount point; ".." in a path (a cgroup outside our namespace) cannot
       * walk past it either */
      if (strlen (dir) <= strlen (base))
        return least;
      char *up = g_path_get_dirname (dir);
      g_free (dir);
      dir = up;
    }
}

/* MemTotal of `root`/proc/meminfo in bytes, or 0. */
static double
mem_total (const char *root)
{
  g_autofree char *path = g_build_filename (root, "proc", "meminfo", NULL);
  g_autofree char *text = NULL;
  const char *line;
  if (!g_file_get_contents (path, &text, NULL, NULL)
      || (line = strstr (text, "MemTotal:")) == NULL)
    return 0;
  return g_ascii_strtod (line + strlen ("MemTotal:"), NULL) * 1024;
}

double
ps_memory_at (const char *root, char **source)
{
  g_autofree char *cgroups = g_build_filename (root, "proc", "self", "cgroup", NULL);
  g_autofree char *v2 = g_build_filename (root, "sys", "fs", "cgroup", NULL);
  g_autofree char *hybrid = g_build_filename (v2, "unified", NULL);
  g_autofree char *v1 = g_build_filename (v2, "memory", NULL);
  g_autofree char *text = NULL, *where = NULL;
  double least = 0;

  /* "ID:CONTROLLERS:PATH" a line; v2's has no controllers, v1's memory one names it. A
   * process whose file cannot be read is taken to be in the root cgroups. */
  if (!g_file_get_contents (cgroups, &text, NULL, NULL))
    text = g_strdup ("0::/\n1:memory:/\n");
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (int i = 0; lines[i] != NULL; i++)
    {
      g_auto (GStrv) f = g_strsplit (lines[i], ":", 3);
      if (g_strv_length (f) != 3 || f[2][0] != '/')
        continue;
      g_auto (GStrv) controllers = g_strsplit (f[1], ",", -1);
      if (f[1][0] == '\0')
        {
          least = smallest_up (v2, f[2], "memory.max", least, &where);
          least = smallest_up (hybrid, f[2], "memory.max", least, &where);
        }
      else if (g_strv_contains ((const char *const *) controllers, "memory"))
        least = smallest_up (v1, f[2], "memory.limit_in_bytes", least, &where);
    }
  double total = mem_total (root);
  if (total <= 0 && strcmp (root, "/") == 0)
    total = (double) sysconf (_SC_PHYS_PAGES) * sysconf (_SC_PAGESIZE);
  if (least > 0 && (total <= 0 || least < total))
    {
      *source = g_strdup_printf ("the memory cgroup's limit, %s", where);
      return least;
    }
  *source = g_strdup_printf ("MemTotal, %s/proc/meminfo", strcmp (root, "/") == 0 ? "" : root);
  return total;
}

/* The host part of "host:port" ("[::1]:port" too): its length. */
static gsize
host_length (const char *endpoint)
{
  const char *colon = strrchr (endpoint, ':');
  return colon != NULL ? (gsize) (colon - endpoint) : strlen (endpoint);
}

int
ps_servers_on_host (const char *const *endpoints, int servers, int index)
{
  if (endpoints == NULL || index < 0 || index >= servers)
    return 1;
  for (int s = 0; s <= index; s++) /* a list shorter than the servers' count */
    if (endpoints[s] == NULL)
      return 1;
  const char *own = endpoints[index];
  gsize len = host_length (own);
  int same = 0;
  for (int s = 0; s < servers && endpoints[s] != NULL; s++)
    same += host_length (endpoints[s]) == len && strncmp (endpoints[s], own, len) == 0;
  return MAX (same, 1);
}

gboolean
ps_server_budget (const char *root, gint64 server_memory_mb, int host_servers, double *bytes,
                  char **why, GError **error)
{
  g_autofree char *source = NULL;
  double memory = ps_memory_at (root, &source);

  if (server_memory_mb <= 0)
    {
      *bytes = memory / 4 / MAX (host_servers, 1);
      *why = g_strdup_printf ("a quarter of this host's %.0f MB (%s) over its %d server%s",
                              memory / 1e6, source, host_servers, host_servers == 1 ? "" : "s");
      return TRUE;
    }
  *bytes = (double) server_memory_mb * (1 << 20);
  if (*bytes > memory)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[pslib] server_memory_mb = %" G_GINT64_FORMAT ": more than the %.0f MiB "
                   "this process may use (%s); set at most %.0f, or 0 for a quarter of it "
                   "shared by the host's servers", server_memory_mb, memory / (1 << 20), source,
                   floor (memory / (1 << 20)));
      return FALSE;
    }
  *why = g_strdup_printf ("[pslib] server_memory_mb = %" G_GINT64_FORMAT, server_memory_mb);
  return TRUE;
}

gint64
ps_default_max_rows (double budget, gsize tables, gsize row_bytes)
{
  double rows = budget / MAX (tables, 1) / MAX (row_bytes, 1);
  return (gint64) MAX (rows, 1000);
}
