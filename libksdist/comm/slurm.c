/* Slurm's job step, read from the variables srun sets for each task: SLURM_JOB_ID,
 * SLURM_PROCID, SLURM_NTASKS, SLURM_NODEID, SLURMD_NODENAME, SLURM_STEP_NODELIST (else
 * SLURM_JOB_NODELIST) and SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE). The
 * first node of the list serves the store on a port derived from the job id, as PyTorch
 * Lightning and Horovod do, so `srun ksdist train CONFIG` needs no flags. */
#include <config.h>

#include "slurm.h"

#include <ksdist/ksdist.h>
#include <string.h>
#include <unistd.h>

#define MAX_HOSTS (1 << 20)
#define SLURM_ERROR(error, ...) \
  g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE, __VA_ARGS__)

/* One bracket's ranges "0-3,7,09-11" applied to every name in `names` (prefix + number
 * + nothing yet): the cross product, appended to a new array. */
static GPtrArray *
expand_ranges (GPtrArray *names, const char *ranges, const char *what, const char *list,
               GError **error)
{
  g_autoptr (GPtrArray) out = g_ptr_array_new_with_free_func (g_free);
  g_auto (GStrv) parts = g_strsplit (ranges, ",", -1);

  for (int i = 0; parts[i] != NULL || i == 0; i++)
    {
      const char *part = parts[i] != NULL ? parts[i] : ""; /* "[]" splits into nothing */
      const char *dash = strchr (part, '-');
      g_autofree char *lo_text = g_strndup (part, dash ? (gsize) (dash - part)
                                                           : strlen (part));
      const char *hi_text = dash ? dash + 1 : lo_text;
      guint64 lo, hi;
      if (!g_ascii_string_to_unsigned (lo_text, 10, 0, G_MAXUINT32, &lo, NULL)
          || !g_ascii_string_to_unsigned (hi_text, 10, 0, G_MAXUINT32, &hi, NULL) || hi < lo
          || names->len * (hi - lo + 1) + out->len > MAX_HOSTS)
        {
          SLURM_ERROR (error, "%s = '%s': '[%s]' is not a list of numbers and ranges N-M with "
                              "N <= M (at most %d hosts)",
                       what, list, ranges, MAX_HOSTS);
          return NULL;
        }
      int width = (int) strlen (lo_text); /* "08-10": two digits, as Slurm pads */
      for (guint n = 0; n < names->len; n++)
        for (guint64 v = lo; v <= hi; v++)
          g_ptr_array_add (out, g_strdup_printf ("%s%0*" G_GUINT64_FORMAT,
                                                 (char *) g_ptr_array_index (names, n), width, v));
    }
  return g_steal_pointer (&out);
}

/* One name of the list, with any number of brackets: appended to `hosts`. */
static gboolean
expand_name (GPtrArray *hosts, const char *name, const char *what, const char *list,
             GError **error)
{
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *p = name;

  g_ptr_array_add (names, g_strdup (""));
  while (*p != '\0')
    {
      const char *open = strchr (p, '['), *close = open ? strchr (open, ']') : NULL;
      gsize plain = open ? (gsize) (open - p) : strlen (p);
      if ((open != NULL && close == NULL) || memchr (p, ']', plain) != NULL)
        {
          SLURM_ERROR (error, "%s = '%s': unbalanced brackets in '%s'", what, list, name);
          return FALSE;
        }
      for (guint n = 0; n < names->len; n++)
        {
          char *old = g_ptr_array_index (names, n);
          names->pdata[n] = g_strdup_printf ("%s%.*s", old, (int) plain, p);
          g_free (old);
        }
      if (open == NULL)
        break;
      g_autofree char *ranges = g_strndup (open + 1, (gsize) (close - open - 1));
      GPtrArray *next = expand_ranges (names, ranges, what, list, error);
      if (next == NULL)
        return FALSE;
      g_ptr_array_unref (names);
      names = next;
      p = close + 1;
    }
  if (*name == '\0' || *(char *) g_ptr_array_index (names, 0) == '\0')
    {
      SLURM_ERROR (error, "%s = '%s': an empty host name", what, list);
      return FALSE;
    }
  for (guint n = 0; n < names->len; n++)
    g_ptr_array_add (hosts, g_strdup (g_ptr_array_index (names, n)));
  return TRUE;
}

char **
ks_slurm_hostlist_expand (const char *list, const char *what, GError **error)
{
  g_autoptr (GPtrArray) hosts = g_ptr_array_new_with_free_func (g_free);
  const char *start = list;
  int depth = 0;

  /* names are split at the commas outside brackets */
  for (const char *p = list;; p++)
    {
      if (*p == '[')
        depth++;
      else if (*p == ']')
        depth--;
      if (depth < 0 || depth > 1)
        {
          SLURM_ERROR (error, "%s = '%s': unbalanced brackets", what, list);
          return NULL;
        }
      if (*p != '\0' && (*p != ',' || depth > 0))
        continue;
      g_autofree char *name = g_strstrip (g_strndup (start, (gsize) (p - start)));
      if (!expand_name (hosts, name, what, list, error))
        return NULL;
      if (*p == '\0')
        break;
      start = p + 1;
    }
  g_ptr_array_add (hosts, NULL);
  return (char **) g_ptr_array_free (g_steal_pointer (&hosts), FALSE);
}

gboolean
ks_slurm_tasks_on_node (const char *spec, const char *what, int node, int *tasks,
                        GError **error)
{
  g_auto (GStrv) parts = g_strsplit (spec, ",", -1);
  gint64 first = 0;
  int found = -1;

  /* the whole spec is read, so a malformed one fails on every node alike */
  for (int i = 0; parts[i] != NULL; i++)
    {
      char *end;
      guint64 count = g_ascii_strtoull (parts[i], &end, 10), times = 1;
      if (end == parts[i])
        goto bad;
      if (*end == '(')
        {
          char *close;
          if (end[1] != 'x' || (times = g_ascii_strtoull (end + 2, &close, 10)) == 0
              || close == end + 2 || strcmp (close, ")") != 0)
            goto bad;
        }
      else if (*end != '\0')
        goto bad;
      if (count > MAX_HOSTS || times > MAX_HOSTS)
        goto bad;
      if (found < 0 && node >= first && node < first + (gint64) times)
        found = (int) count;
      first += (gint64) times;
    }
  if (found >= 0)
    {
      *tasks = found;
      return TRUE;
    }
  SLURM_ERROR (error, "%s = '%s' counts %" G_GINT64_FORMAT " nodes, but this is node %d "
                      "(SLURM_NODEID)",
               what, spec, first, node);
  return FALSE;
bad:
  SLURM_ERROR (error, "%s = '%s': expected counts like 2(x3),1", what, spec);
  return FALSE;
}

gboolean
ks_slurm_port (const char *job_id, int *port, GError **error)
{
  guint64 id;
  if (!g_ascii_string_to_unsigned (job_id, 10, 0, G_MAXUINT64, &id, NULL))
    {
      SLURM_ERROR (error, "SLURM_JOB_ID = '%s' is not a number", job_id);
      return FALSE;
    }
  *port = 15000 + (int) (id % 1000) * KS_SLURM_PORTS_PER_JOB;
  return TRUE;
}

/* The value of `a`, or when it is unset or empty of `b`; *which names the one taken. */
static const char *
first_set (const char *a, const char *b, const char **which)
{
  const char *v = g_getenv (a);
  gboolean first = v != NULL && *v != '\0';
  if (which != NULL)
    *which = first ? a : b;
  return first ? v : g_getenv (b);
}

gboolean
ks_slurm_meeting (char **connect, char **listen, int *nodes, GError **error)
{
  const char *job_id = g_getenv ("SLURM_JOB_ID");
  const char *what;
  const char *list = first_set ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", &what);
  const char *me = g_getenv ("SLURMD_NODENAME"), *procid = g_getenv ("SLURM_PROCID");
  int port;

  *connect = *listen = NULL;
  *nodes = 0;
  if (job_id == NULL || procid == NULL)
    return TRUE;
  if (list == NULL || *list == '\0')
    {
      SLURM_ERROR (error, "SLURM_JOB_ID is set but not SLURM_JOB_NODELIST: start the job "
                          "with srun, or set [comm] store_address");
      return FALSE;
    }
  g_auto (GStrv) hosts = ks_slurm_hostlist_expand (list, what, error);
  if (hosts == NULL || !ks_slurm_port (job_id, &port, error))
    return FALSE;
  /* task 0 serves: on another node than the first, no task would find it */
  if (strcmp (procid, "0") == 0 && me != NULL && strcmp (me, hosts[0]) != 0)
    {
      SLURM_ERROR (error, "Slurm put task 0 on %s, but the job meets on the first node of "
                          "%s (%s): use srun's default block distribution, or set [comm] "
                          "store_address",
                   me, what, hosts[0]);
      return FALSE;
    }
  *nodes = (int) g_strv_length (hosts);
  *connect = g_strdup_printf ("%s:%d", hosts[0], port);
  *listen = g_strdup_printf ("0.0.0.0:%d", port);
  return TRUE;
}

gboolean
ks_slurm_sizes (int *local, int *world)
{
  const char *spec = first_set ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", NULL);
  const char *node = g_getenv ("SLURM_NODEID"), *ntasks = g_getenv ("SLURM_NTASKS");
  guint64 n, w;

  return spec != NULL && node != NULL && ntasks != NULL
         && g_ascii_string_to_unsigned (node, 10, 0, MAX_HOSTS, &n, NULL)
         && g_ascii_string_to_unsigned (ntasks, 10, 1, G_MAXINT, &w, NULL)
         && ks_slurm_tasks_on_node (spec, "SLURM_STEP_TASKS_PER_NODE", (int) n, local, NULL)
         && (*world = (int) w, TRUE);
}

char *
ks_slurm_token (void)
{
  return g_strdup_printf ("slurm-%s-%u", g_getenv ("SLURM_JOB_ID"), (unsigned) getuid ());
}

char **
ks_slurm_task_hosts (GError **error)
{
  const char *what;
  const char *list = first_set ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", &what);
  const char *spec = first_set ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", NULL);
  const char *ntasks = g_getenv ("SLURM_NTASKS");
  g_autoptr (GPtrArray) tasks = g_ptr_array_new_with_free_func (g_free);
  g_auto (GStrv) hosts = NULL;
  guint64 n;

  if (list == NULL || spec == NULL || ntasks == NULL
      || !g_ascii_string_to_unsigned (ntasks, 10, 1, MAX_HOSTS, &n, NULL))
    {
      SLURM_ERROR (error, "srun's SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE and "
                          "SLURM_NTASKS are missing or not numbers: start the job with srun");
      return NULL;
    }
  if ((hosts = ks_slurm_hostlist_expand (list, what, error)) == NULL)
    return NULL;
  for (int j = 0; hosts[j] != NULL && tasks->len <= n; j++)
    {
      int count;
      if (!ks_slurm_tasks_on_node (spec, "SLURM_STEP_TASKS_PER_NODE", j, &count, error))
        return NULL;
      for (int t = 0; t < count && tasks->len <= n; t++)
        g_ptr_array_add (tasks, g_strdup (hosts[j]));
    }
  if (tasks->len != n)
    {
      SLURM_ERROR (error, "SLURM_STEP_TASKS_PER_NODE = '%s' on the nodes %s gives %u tasks, "
                          "but SLURM_NTASKS = %s",
                   spec, list, tasks->len, ntasks);
      return NULL;
    }
  g_ptr_array_add (tasks, NULL);
  return (char **) g_ptr_array_free (g_steal_pointer (&tasks), FALSE);
}
