/* Checkpoints of a collective job: worker 0 writes, every worker loads, all agree. */
#include <config.h>

#include "checkpoint.h"

#include <string.h>

/* Every worker's `value` (one worker: its own). */
static gint64 *
gather (KsRoleMaker *role, gint64 value, int *n, GError **error)
{
  KsComm *comm = ks_role_maker_worker_comm (role);
  gint64 *all;

  *n = comm != NULL ? ks_comm_size (comm) : 1;
  all = g_new (gint64, *n);
  all[0] = value;
  if (comm != NULL && !ks_comm_allgather (comm, &value, all, 1, KS_DTYPE_INT64, error))
    {
      g_free (all);
      return NULL;
    }
  return all;
}

/* "1 and 3": the workers whose flag is 0. */
static char *
failed_workers (const gint64 *ok, int n)
{
  GString *s = g_string_new (NULL);
  for (int i = 0; i < n; i++)
    if (!ok[i])
      g_string_append_printf (s, "%s%d", s->len > 0 ? ", " : "", i);
  return g_string_free (s, FALSE);
}

gboolean
ks_collective_save_check_point (KsRoleMaker *role, KsModel *model, KsOptimizer *optimizer,
                                const char *dir, const KsTrainStatus *status,
                                GHashTable *metadata, guint keep, GError **error)
{
  g_autoptr (GError) mine = NULL;
  g_autofree gint64 *ok = NULL;
  gboolean saved = TRUE;
  int n;

  if (ks_role_maker_is_first_worker (role))
    {
      g_autoptr (GHashTable) meta = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
      GHashTableIter it;
      gpointer key, value;
      if (metadata != NULL)
        for (g_hash_table_iter_init (&it, metadata); g_hash_table_iter_next (&it, &key, &value);)
          g_hash_table_insert (meta, g_strdup (key), g_strdup (value));
      g_hash_table_insert (meta, g_strdup ("epoch"),
                           g_strdup_printf ("%" G_GINT64_FORMAT, status->epoch));
      saved = ks_checkpoint_save (dir, status->step, model, optimizer, meta, keep, &mine);
    }
  /* the others wait here until it is on disk (or is known not to be) */
  if ((ok = gather (role, saved, &n, error)) == NULL)
    {
      g_prefix_error (error, "collective: save_check_point of step %" G_GINT64_FORMAT ": ",
                      status->step);
      return FALSE;
    }
  if (mine != NULL)
    {
      g_propagate_error (error, g_steal_pointer (&mine));
      return FALSE;
    }
  if (!ok[0])
    {
      /* another's failure, reported: a peer failed first (exit 3 under ksdist launch) */
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST,
                   "worker 0 could not write the checkpoint of step %" G_GINT64_FORMAT
                   " in %s; its log says why",
                   status->step, dir);
      return FALSE;
    }
  return TRUE;
}

/* The step of DIR's newest checkpoint (its name says it), or -1. */
static gint64
newest_step (const char *dir)
{
  g_autofree char *latest = ks_checkpoint_latest (dir);
  const char *dash = latest != NULL ? strrchr (latest, '-') : NULL;
  gint64 value = -1;
  if (dash != NULL)
    g_ascii_string_to_signed (dash + 1, 10, 0, G_MAXINT64, &value, NULL);
  return value;
}

gboolean
ks_collective_load_check_point (KsRoleMaker *role, KsModel *model, KsOptimizer *optimizer,
                                const char *dir, KsTrainStatus *status, GHashTable **metadata,
                                GError **error)
{
  int me = ks_role_maker_worker_index (role), n;
  gint64 here = newest_step (dir), step = 0;
  g_autofree gint64 *steps = NULL, *ok = NULL;
  g_autoptr (GError) mine = NULL;
  g_autoptr (GHashTable) meta = NULL;
  g_autofree char *path = NULL;

  *status = (KsTrainStatus) { -1, 0 };
  if ((steps = gather (role, here, &n, error)) == NULL)
    {
      g_prefix_error (error, "collective: load_check_point: ");
      return FALSE;
    }
  if (steps[0] < 0)
    {
      if (here >= 0)
        g_warning ("worker 0 finds no checkpoint in %s, so every worker starts afresh, though "
                   "worker %d sees the one of step %" G_GINT64_FORMAT,
                   dir, me, here);
      return TRUE;
    }
  path = g_strdup_printf ("%s/checkpoint-%" G_GINT64_FORMAT, dir, steps[0]);
  gboolean loaded = ks_checkpoint_load (path, model, optimizer, &step, &meta, &mine);
  if ((ok = gather (role, loaded, &n, error)) == NULL)
    {
      g_prefix_error (error, "collective: load_check_point %s: ", path);
      return FALSE;
    }
  if (mine != NULL)
    {
      g_propagate_prefixed_error (error, g_steal_pointer (&mine),
                                  "worker %d cannot resume from %s, the newest checkpoint "
                                  "worker 0 finds: ",
                                  me, path);
      return FALSE;
    }
  g_autofree char *failed = failed_workers (ok, n);
  if (*failed != '\0')
    {
      /* this worker loaded it, but it must not train on alone */
      g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO,
                   "worker %s cannot load %s (the newest checkpoint worker 0 finds; their "
                   "logs say why), so no worker resumes",
                   failed, path);
      return FALSE;
    }
  const char *epoch = g_hash_table_lookup (meta, "epoch");
  status->step = step;
  if (epoch == NULL || !g_ascii_string_to_signed (epoch, 10, -1, G_MAXINT64, &status->epoch, NULL))
    status->epoch = -1;
  if (metadata != NULL)
    *metadata = g_steal_pointer (&meta);
  return TRUE;
}
