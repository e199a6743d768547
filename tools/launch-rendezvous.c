/* Where a launched job's processes meet, and how the launchers of several nodes meet.
 *
 * One node, file store (the default): a fresh private directory and a random job name.
 * One node, [comm] store = tcp: this launcher serves a TCP store on 127.0.0.1 with a
 * random token. Several nodes: node 0's launcher serves the TCP store at --master; every
 * launcher (node 0's too) joins it with the token all nodes share (KS_STORE_TOKEN),
 * says its host and process count, and learns the others'. At the end node 0 waits for
 * the others to finish before it takes the store down. */
#include "launch.h"

#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOKEN_BYTES 16

static char *
random_hex (int bytes)
{
  GString *s = g_string_new (NULL);
  for (int i = 0; i < bytes; i++)
    g_string_append_printf (s, "%02x", g_random_int_range (0, 256));
  return g_string_free (s, FALSE);
}

/* The key of node k's `what` (node, done) in this start: the first start's as before
 * restarts were known, each restart's under its number. */
static char *
node_key (const LaunchRendezvous *rv, const char *what, int k)
{
  return rv->generation == 0 ? g_strdup_printf ("launch/%s/%d", what, k)
                             : g_strdup_printf ("launch/r%d/%s/%d", rv->generation, what, k);
}

/* The nodes that have not said they came to start `generation`: "node 2 (host h2,
 * 10.0.0.3: ranks 4-5), ...", from what the earlier start learnt, or their numbers. */
static char *
missing_nodes (LaunchRendezvous *rv)
{
  GString *out = g_string_new (NULL);
  for (int k = 0; k < rv->nnodes; k++)
    {
      g_autofree char *key = node_key (rv, "node", k);
      const char *keys[] = { key, NULL };
      if (ks_store_wait (rv->store, keys, 1, NULL))
        continue;
      g_autofree char *node = ks_launch_layout_node (rv, k);
      g_string_append_printf (out, "%s%s", out->len > 0 ? ", " : "",
                              node != NULL ? node : "");
      if (node == NULL)
        g_string_append_printf (out, "node %d", k);
    }
  return g_string_free (out, FALSE);
}

/* This node says `word` in the store (hearing no answer is no failure: node 0 may end at
 * once), and node 0, which serves the store, waits up to `wait_ms` for every other node's
 * before it goes on to end. */
static void
node0_waits_for_all (LaunchRendezvous *rv, const char *word, int wait_ms)
{
  g_autofree char *mine = node_key (rv, word, rv->node_rank);
  ks_store_set (rv->store, mine, "1", 1, NULL);
  for (int k = 1; rv->node_rank == 0 && k < rv->nnodes; k++)
    {
      g_autofree char *other = node_key (rv, word, k);
      const char *keys[] = { other, NULL };
      ks_store_wait (rv->store, keys, wait_ms, NULL);
    }
}

/* Says this node's process count, address, host name and (a parameter-server job) its
 * layout, and reads every node's. A restart waits twice [comm] timeout: the others'
 * processes may take one to notice the failure before their launchers come back. */
static gboolean
meet_nodes (LaunchRendezvous *rv, int timeout_ms, GError **error)
{
  g_autofree char *layout = ks_launch_layout_mine (rv, error);
  if (layout == NULL)
    return FALSE;
  g_autofree char *mine = g_strdup_printf ("%d %s %s%s", rv->nproc, rv->hosts[rv->node_rank],
                                           g_get_host_name (), layout);
  g_autofree char *key = node_key (rv, "node", rv->node_rank);
  g_autoptr (GPtrArray) keys = g_ptr_array_new_with_free_func (g_free);
  int wait_ms = rv->generation > 0 ? 2 * timeout_ms : timeout_ms;

  if (!ks_store_set (rv->store, key, mine, strlen (mine), error))
    return FALSE;
  for (int k = 0; k < rv->nnodes; k++)
    g_ptr_array_add (keys, node_key (rv, "node", k));
  g_ptr_array_add (keys, NULL);
  if (!ks_store_wait (rv->store, (const char *const *) keys->pdata, wait_ms, error))
    {
      if (rv->generation > 0)
        {
          g_autofree char *missing = missing_nodes (rv);
          g_clear_error (error);
          g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
                       "%s did not come back for restart %d within %d ms (twice [comm] "
                       "timeout): start `ksdist launch` there again, or the whole job",
                       *missing ? missing : "a node", rv->generation, wait_ms);
          return FALSE;
        }
      g_prefix_error (error, "not every node's launcher came (start `ksdist launch --nnodes "
                             "%d --node-rank K --master %s` on each node K): ",
                      rv->nnodes, rv->store_address);
      return FALSE;
    }
  g_autoptr (GPtrArray) values = g_ptr_array_new_with_free_func (g_free);
  for (int k = 0; k < rv->nnodes; k++)
    {
      g_autofree char *value = NULL;
      gsize len;
      if (!ks_store_get (rv->store, keys->pdata[k], timeout_ms, (void **) &value, &len, error))
        return FALSE;
      g_ptr_array_add (values, g_strndup (value, len));
    }
  /* node 0's store stays up until every node has read every node's word: the checks
   * below fail alike on every node, and each launcher says so rather than that the
   * store went away. Node 0 may end as soon as this word is stored, before its answer
   * comes back: a failure to hear it is no failure here. */
  node0_waits_for_all (rv, "read", timeout_ms);
  for (int k = 0; k < rv->nnodes; k++)
    {
      int nproc = 0;
      const char *text = values->pdata[k];
      /* NPROC HOST [NAME [WORKERS SERVERS PORTS]] */
      g_auto (GStrv) fields = g_strsplit (text, " ", -1);
      guint n = g_strv_length (fields);
      if (n < 2 || (nproc = atoi (fields[0])) < 1)
        {
          g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
                       "node %d's launcher said '%s' of itself: is it another ksdist version? "
                       "Start the same one on every node", k, text);
          return FALSE;
        }
      if (!ks_launch_layout_take (rv, k, n > 3 ? fields + 3 : NULL, error))
        return FALSE;
      if (!rv->ps && nproc != rv->nproc)
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "node %d starts %d processes and this node (%d) %d: give every node the "
                       "same -n",
                       k, nproc, rv->node_rank, rv->nproc);
          return FALSE;
        }
      g_free (rv->hosts[k]);
      rv->hosts[k] = g_strdup (fields[1]);
      g_free (rv->names[k]);
      rv->names[k] = g_strdup (n > 2 ? fields[2] : fields[1]);
    }
  return ks_launch_layout_check (rv, error);
}

char *
ks_launch_node_of_rank (const LaunchRendezvous *rv, int rank)
{
  return ks_launch_layout_node (rv, ks_launch_layout_node_of (rv, rank));
}

gboolean
ks_launch_rendezvous_begin (LaunchRendezvous *rv, KsRegistry *registry, const KsConfig *config,
                            GError **error)
{
  const char *kind = g_getenv ("KS_STORE");
  int timeout_ms = (int) (ks_config_get_double (config, "comm", "timeout") * 1000);

  if (kind == NULL || *kind == '\0')
    kind = ks_config_get_string (config, "comm", "store");
  if (rv->hosts == NULL)
    rv->hosts = g_new0 (char *, rv->nnodes + 1);
  if (rv->nnodes == 1)
    {
      rv->hosts[0] = g_strdup (rv->own_host != NULL ? rv->own_host : "127.0.0.1");
      g_autofree char *suffix = random_hex (4);
      rv->job = g_strdup_printf ("launch-%d-%s", (int) getpid (), suffix);
      if (!ks_store_kind_is (kind, KS_STORE_KIND_SERVED))
        {
          rv->store_kind = g_strdup (kind);
          /* the file store needs none, but parameter servers admit only the job's token */
          rv->token = random_hex (TOKEN_BYTES);
          rv->store_dir = g_dir_make_tmp ("ksdist-launch-XXXXXX", error);
          rv->store_address = g_strdup (rv->store_dir);
          return rv->store_dir != NULL;
        }
      rv->token = random_hex (TOKEN_BYTES);
      rv->store_kind = g_strdup (ks_store_kind_name (KS_STORE_KIND_SERVED));
      return (rv->store = ks_store_new (registry, config, rv->store_kind, error)) != NULL
             && ks_store_serve (rv->store, "127.0.0.1:0", rv->token, &rv->store_address, error);
    }

  if (rv->store != NULL) /* a restart: the store of the first start, a fresh job name */
    {
      g_free (rv->job);
      rv->job = g_strdup_printf ("%s-restart%d", rv->base_job, rv->generation);
      return meet_nodes (rv, timeout_ms, error);
    }
  const char *token = g_getenv ("KS_STORE_TOKEN");
  const char *job = g_getenv ("KS_JOB");
  if (token == NULL || *token == '\0')
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "a job on %d nodes needs a token every node shares: set KS_STORE_TOKEN to "
                   "the same secret on each (e.g. the output of `head -c16 /dev/urandom | "
                   "xxd -p` made once)",
                   rv->nnodes);
      return FALSE;
    }
  rv->names = g_new0 (char *, rv->nnodes + 1);
  rv->token = g_strdup (token);
  rv->store_kind = g_strdup (ks_store_kind_name (KS_STORE_KIND_SERVED));
  rv->store_address = g_strdup (rv->master);
  rv->base_job = g_strdup (job != NULL && *job ? job
                           : *ks_config_get_string (config, "job", "name")
                               ? ks_config_get_string (config, "job", "name")
                               : "launch");
  rv->job = g_strdup (rv->base_job);
  rv->hosts[rv->node_rank] = rv->own_host != NULL ? g_strdup (rv->own_host)
                                                  : ks_comm_address_toward (rv->master);
  if ((rv->store = ks_store_new (registry, config, rv->store_kind, error)) == NULL)
    return FALSE;
  if (rv->node_rank == 0)
    {
      g_autofree char *bound = NULL;
      if (!ks_store_serve (rv->store, rv->master, rv->token, &bound, error))
        return FALSE;
    }
  return ks_store_open (rv->store, rv->store_address, rv->job, rv->token, error)
         && meet_nodes (rv, timeout_ms, error);
}

/* The rendezvous directory holds one folder, the job's, of plain files. */
static void
remove_store_dir (const char *store_dir, const char *job)
{
  g_autofree char *folder = g_build_filename (store_dir, job, NULL);
  g_autoptr (GDir) dir = g_dir_open (folder, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = g_build_filename (folder, name, NULL);
      g_unlink (path);
    }
  g_rmdir (folder);
  g_rmdir (store_dir);
}

void
ks_launch_rendezvous_end (LaunchRendezvous *rv, int wait_ms)
{
  if (rv->nnodes > 1 && rv->store != NULL && rv->keep)
    return; /* kept for the restart's meeting (begin again with generation + 1) */
  if (rv->nnodes > 1 && rv->store != NULL)
    {
      /* node 0 keeps serving until every node's processes are done with the store */
      node0_waits_for_all (rv, "done", wait_ms);
    }
  if (rv->store_dir != NULL)
    remove_store_dir (rv->store_dir, rv->job);
  /* cleared: a restart begins again with the same struct */
  g_clear_pointer (&rv->store, ks_store_free);
  g_clear_pointer (&rv->hosts, g_strfreev);
  g_clear_pointer (&rv->names, g_strfreev);
  ks_launch_layout_clear (rv);
  g_clear_pointer (&rv->store_kind, g_free);
  g_clear_pointer (&rv->store_address, g_free);
  g_clear_pointer (&rv->store_dir, g_free);
  g_clear_pointer (&rv->token, g_free);
  g_clear_pointer (&rv->job, g_free);
  g_clear_pointer (&rv->base_job, g_free);
}

/* What a process's line says was lost, if anything: a collective's ranks ("rank 2, 3 did
 * not reach allreduce #40"), a worker's servers ("server 0 (10.0.0.1:41200) did not
 * answer a push within 8 s ([comm] timeout)", or between calls, "worker 1: server 0
 * (10.0.0.1:41200) sent nothing for 8 s, not even an answer to a heartbeat") or a
 * server's workers ("worker 0, 1 sent nothing for 8 s"). Each pattern's group 1 lists
 * them; `item` picks each one's number, and servers come after the job's workers. */
static const struct {
  const char *pattern, *item;
  gboolean servers;
} lost_patterns[] = {
  { "rank ([0-9]+(, [0-9]+)*) (did not reach|ended before) ([a-z_]+ #[0-9]+)", "([0-9]+)",
    FALSE },
  { "(server [0-9]+ \\([^)]*\\)(, server [0-9]+ \\([^)]*\\))*) did not answer an? [a-z_ ]+ "
    "within [0-9.]+ s \\(\\[comm\\] timeout[^)]*\\)", "server ([0-9]+) ", TRUE },
  { "(server [0-9]+ \\([^)]*\\)(, server [0-9]+ \\([^)]*\\))*) sent nothing for [0-9.]+ s, "
    "not even an answer to a heartbeat", "server ([0-9]+) ", TRUE },
  { "worker ([0-9]+(, [0-9]+)*) sent (no gradient for step [0-9]+ within [0-9.]+ s|nothing "
    "for [0-9.]+ s)", "([0-9]+)", FALSE },
};

/* Several nodes: from a process's line that names what the job lost, the nodes they are
 * on and what was seen: "node 1 (host h1, 10.0.0.2: ranks 2-3) was lost: rank 2, 3 did
 * not reach allreduce #40"; or NULL when the line names none. */
char *
ks_launch_lost_nodes (const LaunchRendezvous *rv, const char *line)
{
  static GRegex *patterns[G_N_ELEMENTS (lost_patterns)][2];
  static gsize compiled;

  if (rv->nnodes < 2 || rv->node_workers == NULL)
    return NULL;
  if (g_once_init_enter (&compiled))
    {
      for (guint p = 0; p < G_N_ELEMENTS (lost_patterns); p++)
        {
          patterns[p][0] = g_regex_new (lost_patterns[p].pattern, G_REGEX_OPTIMIZE, 0, NULL);
          patterns[p][1] = g_regex_new (lost_patterns[p].item, G_REGEX_OPTIMIZE, 0, NULL);
        }
      g_once_init_leave (&compiled, 1);
    }
  for (guint p = 0; p < G_N_ELEMENTS (lost_patterns); p++)
    {
      g_autoptr (GMatchInfo) match = NULL, item = NULL;
      if (!g_regex_match (patterns[p][0], line, 0, &match))
        continue;
      g_autofree char *list = g_match_info_fetch (match, 1);
      g_autofree char *seen = g_match_info_fetch (match, 0);
      g_autofree gboolean *named = g_new0 (gboolean, rv->nnodes);
      int offset = lost_patterns[p].servers ? ks_launch_layout_total (rv, FALSE) : 0;
      GString *out = g_string_new (NULL);
      for (g_regex_match (patterns[p][1], list, 0, &item); g_match_info_matches (item);
           g_match_info_next (item, NULL))
        {
          g_autofree char *number = g_match_info_fetch (item, 1);
          int k = ks_launch_layout_node_of (rv, offset + atoi (number));
          g_autofree char *node = ks_launch_layout_node (rv, k);
          if (node == NULL || named[k])
            continue;
          named[k] = TRUE;
          g_string_append_printf (out, "%s%s", out->len > 0 ? " and " : "", node);
        }
      if (out->len == 0)
        {
          g_string_free (out, TRUE);
          continue;
        }
      g_string_append_printf (out, " %s lost: %s", strstr (out->str, " and ") ? "were" : "was",
                              seen);
      return g_string_free (out, FALSE);
    }
  return NULL;
}
