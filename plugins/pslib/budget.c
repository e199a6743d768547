/* The default budget of a server's sparse tables (budget.h). */
#include "budget.h"

#include <string.h>
#include <unistd.h>

/* The memory cgroup's limit in bytes (v2, then v1), or 0 when there is none. */
static double
cgroup_limit (void)
{
  static const char *const files[] = { "/sys/fs/cgroup/memory.max",
                                       "/sys/fs/cgroup/memory/memory.limit_in_bytes" };
  for (gsize i = 0; i < G_N_ELEMENTS (files); i++)
    {
      g_autofree char *text = NULL;
      if (!g_file_get_contents (files[i], &text, NULL, NULL))
        continue;
      char *end;
      double limit = g_ascii_strtod (text, &end);
      if (end != text && limit > 0) /* "max": none */
        return limit;
    }
  return 0;
}

double
ps_host_memory (void)
{
  double physical = (double) sysconf (_SC_PHYS_PAGES) * sysconf (_SC_PAGESIZE);
  double limit = cgroup_limit ();
  return limit > 0 && limit < physical ? limit : physical;
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

gint64
ps_default_max_rows (double memory, int host_servers, gsize tables, gsize row_bytes)
{
  double rows = memory / 4 / MAX (host_servers, 1) / MAX (tables, 1) / MAX (row_bytes, 1);
  return (gint64) MAX (rows, 1000);
}
