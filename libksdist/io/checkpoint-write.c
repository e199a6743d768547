/* A checkpoint's files: the weights, the optimizer's state beside them, each sealed
 * and naming its save (checkpoint.h). */
#include "checkpoint-private.h"

#include <glib/gstdio.h>
#include <string.h>

/* Writes one sealed file; *seal (unless NULL) receives its SHA-256. */
static gboolean
write_file (const char *path, GArray *entries, GHashTable *meta, char **seal, GError **error)
{
  g_autofree KsSafetensor *tensors = g_new0 (KsSafetensor, entries->len + 1);
  g_autoptr (GPtrArray) host = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i < entries->len; i++)
    {
      const Entry *e = &g_array_index (entries, Entry, i);
      float *data = g_malloc (MAX (ks_tensor_nbytes (e->tensor), 1));
      g_ptr_array_add (host, data);
      if (!ks_tensor_to_host (e->tensor, data, ks_tensor_nbytes (e->tensor), error))
        return FALSE;
      tensors[i] = (KsSafetensor) { e->name, e->tensor->ndim, { 0 }, e->tensor->numel, data };
      memcpy (tensors[i].shape, e->tensor->shape, sizeof tensors[i].shape);
    }
  return ks_safetensors_write (path, tensors, entries->len, meta, TRUE, seal, error);
}

/* The file of part `part` of `parts`: model.safetensors for a whole checkpoint. */
char *
ks_checkpoint_part_file (int part, int parts)
{
  return parts == 1 ? g_strdup (FILE_NAME)
                    : g_strdup_printf (PART_PREFIX "%d-of-%d.safetensors", part, parts);
}

char *
ks_checkpoint_optim_file (int part, int parts)
{
  g_autofree char *model = ks_checkpoint_part_file (part, parts);
  return parts == 1 ? g_strdup (OPTIM_FILE) : g_strconcat (OPTIM_PREFIX, model, NULL);
}

GHashTable *
ks_string_table_copy (GHashTable *from)
{
  GHashTable *table = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  GHashTableIter it;
  gpointer k, v;

  if (from != NULL)
    {
      g_hash_table_iter_init (&it, from);
      while (g_hash_table_iter_next (&it, &k, &v))
        g_hash_table_insert (table, g_strdup (k), g_strdup (v));
    }
  return table;
}

/* The identity of the save being written into `tmp`: every part of it is written into
 * that directory, whose name ks_checkpoint_begin made unique, so the processes writing
 * the parts agree on it without telling each other anything more. */
char *
ks_checkpoint_save_id (const char *tmp)
{
  g_autofree char *name = g_path_get_basename (tmp);
  return g_compute_checksum_for_string (G_CHECKSUM_SHA256, name, -1);
}

#define save_of ks_checkpoint_save_id

/* The metadata every file of a checkpoint carries: `extra`, the step, the format, the
 * save it is of. */
static GHashTable *
file_metadata (GHashTable *extra, const char *save, gint64 step, int part, int parts)
{
  GHashTable *meta = ks_string_table_copy (extra);

  if (step >= 0)
    g_hash_table_insert (meta, g_strdup ("step"), g_strdup_printf ("%" G_GINT64_FORMAT, step));
  g_hash_table_insert (meta, g_strdup ("format"), g_strdup (CHECKPOINT_FORMAT));
  g_hash_table_insert (meta, g_strdup ("version"), g_strdup (CHECKPOINT_VERSION));
  g_hash_table_insert (meta, g_strdup (SAVE_KEY), g_strdup (save));
  if (parts > 1)
    {
      g_hash_table_insert (meta, g_strdup ("part"), g_strdup_printf ("%d", part));
      g_hash_table_insert (meta, g_strdup ("parts"), g_strdup_printf ("%d", parts));
    }
  return meta;
}

/* float16 training's loss scale, in the weights file's metadata beside rng_state */
static void
put_loss_scale (GHashTable *meta, KsModel *model)
{
  KsLossScale ls;
  char scale[G_ASCII_DTOSTR_BUF_SIZE];

  if (!ks_model_loss_scale (model, &ls))
    return;
  g_hash_table_insert (meta, g_strdup ("loss_scale"),
                       g_strdup (g_ascii_dtostr (scale, sizeof scale, ls.scale)));
  g_hash_table_insert (meta, g_strdup ("loss_scale_good_steps"),
                       g_strdup_printf ("%" G_GINT64_FORMAT, ls.good_steps));
  g_hash_table_insert (meta, g_strdup ("loss_scale_skipped"),
                       g_strdup_printf ("%" G_GINT64_FORMAT, ls.skipped));
}

gboolean
ks_checkpoint_write_part (const char *tmp, int part, int parts, gint64 step, KsModel *model,
                          KsOptimizer *optimizer, GHashTable *metadata, const char *const *skip,
                          GError **error)
{
  g_autofree char *save = save_of (tmp);
  g_autoptr (GHashTable) meta = file_metadata (metadata, save, step, part, parts);
  g_autofree char *name = ks_checkpoint_part_file (part, parts), *optim_name = ks_checkpoint_optim_file (part, parts);
  g_autofree char *file = g_build_filename (tmp, name, NULL);
  g_autofree char *optim_path = g_build_filename (tmp, optim_name, NULL);
  g_autofree char *seal = NULL;
  g_autoptr (GArray) params = NULL, state = NULL;
  gint64 *opt_step = NULL;

  g_return_val_if_fail (parts >= 1 && parts <= MAX_PARTS && part >= 0 && part < parts, FALSE);
  if ((params = ks_checkpoint_entries (model, TRUE, NULL, skip, NULL, error)) == NULL
      || (optimizer != NULL
          && (state = ks_checkpoint_entries (model, FALSE, optimizer, skip, &opt_step, error)) == NULL))
    return FALSE;
  g_hash_table_insert (meta, g_strdup ("rng_state"),
                       g_strdup_printf ("%" G_GUINT64_FORMAT, ks_model_rng_state (model)));
  put_loss_scale (meta, model);
  if (!write_file (file, params, meta, &seal, error))
    {
      g_unlink (file);
      return FALSE;
    }
  if (optimizer == NULL)
    return TRUE;
  /* the weights file stays what any safetensors reader expects; the state names it */
  g_autoptr (GHashTable) optim_meta = file_metadata (NULL, save, step, part, parts);
  g_hash_table_insert (optim_meta, g_strdup ("optimizer"), g_strdup (ks_optimizer_name (optimizer)));
  g_hash_table_insert (optim_meta, g_strdup ("optimizer_step"),
                       g_strdup_printf ("%" G_GINT64_FORMAT, *opt_step));
  g_hash_table_insert (optim_meta, g_strdup (MODEL_SEAL_KEY), g_steal_pointer (&seal));
  if (!write_file (optim_path, state, optim_meta, NULL, error))
    {
      g_unlink (optim_path);
      g_unlink (file);
      return FALSE;
    }
  return TRUE;
}

/* Writes `model` (and `optimizer`) with `meta` (and `step` unless < 0) as the directory
 * `final`, whole: into a temporary sibling, fsynced, then renamed over it; a crash leaves
 * the old one or the new one. */
static gboolean
write_whole (const char *final, gint64 step, KsModel *model, KsOptimizer *optimizer,
             GHashTable *meta, guint keep, GError **error)
{
  g_autofree char *tmp = ks_checkpoint_begin (final, error);
  if (tmp == NULL)
    return FALSE;
  if (!ks_checkpoint_write_part (tmp, 0, 1, step, model, optimizer, meta, NULL, error))
    {
      ks_checkpoint_abort (tmp);
      return FALSE;
    }
  return ks_checkpoint_commit (tmp, final, keep, error);
}

gboolean
ks_checkpoint_write_dir (const char *final, KsModel *model, KsOptimizer *optimizer,
                         GHashTable *meta, GError **error)
{
  return write_whole (final, -1, model, optimizer, meta, 0, error);
}

gboolean
ks_checkpoint_save (const char *dir, gint64 step, KsModel *model, KsOptimizer *optimizer,
                    GHashTable *metadata, guint keep, GError **error)
{
  g_autofree char *final = g_strdup_printf ("%s/" PREFIX "%" G_GINT64_FORMAT, dir, step);
  return write_whole (final, step, model, optimizer, metadata, keep, error);
}

