/* Pipeline checkpoints (pipeline.h): each stage saves and loads its part. */
#include "pipeline-private.h"

#include <string.h>

/* The shared parameters this stage holds that a lower stage saves (NULL-terminated). */
static GStrv
saved_elsewhere (const KsPipeline *pl)
{
  GPtrArray *names = g_ptr_array_new ();
  for (guint i = 0; i < pl->shared->len; i++)
    {
      const Shared *s = &g_array_index (pl->shared, Shared, i);
      if (exchanges (pl, s) && s->owners[0] != pl->stage)
        g_ptr_array_add (names, g_strdup (s->name));
    }
  g_ptr_array_add (names, NULL);
  return (GStrv) g_ptr_array_free (names, FALSE);
}

/* Stage 0 tells every stage `ok`; the others learn it. */
static gboolean
agree (KsPipeline *pl, int kind, gboolean *ok, GError **error)
{
  guint8 v = *ok;
  for (int s = 1; s < pl->p; s++)
    if (pl->stage == 0 ? !ks_comm_send (pl->comm, &v, 1, s, tag_of (kind, 0, 0), error)
                       : s == pl->stage && !ks_comm_recv (pl->comm, &v, 1, 0, tag_of (kind, 0, 0),
                                                          error))
      return FALSE;
  *ok = v;
  return TRUE;
}

gboolean
ks_pipeline_save_checkpoint (KsPipeline *pl, KsOptimizer *optimizer, const char *dir,
                             gint64 step, GHashTable *metadata, guint keep, GError **error)
{
  g_autofree char *final = g_strdup_printf ("%s/checkpoint-%" G_GINT64_FORMAT, dir, step);
  g_autofree char *tmp = NULL;
  g_auto (GStrv) skip = saved_elsewhere (pl);
  g_autoptr (GError) mine = NULL;
  gint64 len = 0;
  gboolean ok;

  if (pl->p == 1)
    return ks_checkpoint_save (dir, step, pl->model, optimizer, metadata, keep, error);
  /* stage 0 makes the temporary directory and tells the others where it is */
  if (pl->stage == 0)
    {
      tmp = ks_checkpoint_begin (final, &mine);
      len = tmp != NULL ? (gint64) strlen (tmp) : 0;
      for (int s = 1; s < pl->p; s++)
        if (!ks_comm_send (pl->comm, &len, sizeof len, s, tag_of (TAG_CHECKPOINT, 0, 0), error)
            || (len > 0
                && !ks_comm_send (pl->comm, tmp, len, s, tag_of (TAG_CHECKPOINT, 0, 1), error)))
          {
            if (tmp != NULL)
              ks_checkpoint_abort (tmp);
            return FALSE;
          }
    }
  else
    {
      if (!ks_comm_recv (pl->comm, &len, sizeof len, 0, tag_of (TAG_CHECKPOINT, 0, 0), error))
        return FALSE;
      if (len < 0 || len > 65536)
        return ks_invalid (error, "pipeline stage %d: stage 0 named a checkpoint directory of "
                           "%" G_GINT64_FORMAT " bytes", pl->stage, len);
      tmp = g_malloc0 (len + 1);
      if (len > 0
          && !ks_comm_recv (pl->comm, tmp, len, 0, tag_of (TAG_CHECKPOINT, 0, 1), error))
        return FALSE;
      if (len == 0)
        g_set_error (&mine, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO,
                     "stage 0 could not begin %s (its message says why)", final);
    }
  /* every stage its part; stage 0 commits only when all of them wrote theirs */
  ok = mine == NULL
       && ks_checkpoint_write_part (tmp, pl->stage, pl->p, step, pl->model, optimizer,
                                    metadata, (const char *const *) skip, &mine);
  if (pl->stage == 0)
    for (int s = 1; s < pl->p; s++)
      {
        guint8 theirs = 0;
        if (!ks_comm_recv (pl->comm, &theirs, 1, s, tag_of (TAG_CHECKPOINT, 0, 2), error))
          {
            if (tmp != NULL)
              ks_checkpoint_abort (tmp);
            return FALSE;
          }
        if (!theirs && ok)
          {
            ok = FALSE;
            /* another's failure, reported: a peer failed first */
            g_set_error (&mine, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST,
                         "stage %d could not write its part of %s (its message says why)", s,
                         final);
          }
      }
  else
    {
      guint8 v = ok;
      if (!ks_comm_send (pl->comm, &v, 1, 0, tag_of (TAG_CHECKPOINT, 0, 2), error))
        return FALSE;
    }
  if (pl->stage == 0 && tmp != NULL)
    ok = ok ? ks_checkpoint_commit (tmp, final, keep, &mine) : (ks_checkpoint_abort (tmp), FALSE);
  if (!agree (pl, TAG_CHECKPOINT_DONE, &ok, error))
    return FALSE;
  if (!ok && mine == NULL)
    g_set_error (&mine, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO,
                 "%s was not saved: another stage failed (its message says why)", final);
  if (!ok)
    g_propagate_error (error, g_steal_pointer (&mine));
  return ok;
}

gboolean
ks_pipeline_load_checkpoint (KsPipeline *pl, KsOptimizer *optimizer, const char *path,
                             gint64 *step, GHashTable **metadata, GError **error)
{
  gint64 saved;
  if (optimizer != NULL)
    ks_optimizer_bind (optimizer, pl->model); /* as its first step would */
  if (!ks_checkpoint_load (path, pl->model, optimizer, &saved, metadata, error))
    return FALSE;
  pl->steps = saved; /* the dropout masks of the next step follow from it */
  if (step != NULL)
    *step = saved;
  return TRUE;
}
