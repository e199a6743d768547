/* Checkpoints (every N steps, keep K, by the mode's algorithm or the executor), resume
 * (bitwise; a setting that differs from the checkpoint's is warned about) and the
 * inference export. */
#include "trainer-private.h"

#include <string.h>

/* The settings a step's result depends on, as "group.key = value" lines, kept in each
 * checkpoint's metadata ("config") so that a resume with other settings is noticed. The
 * step count, logging and checkpointing may change freely. */
static char *
trajectory_config (const KsTrainer *t)
{
  const KsConfig *c = t->config;
  static const char *const groups[] = { "compute", "model", "data", "optim", "amp" };
  static const char *const train_keys[] = { "optimizer", "batch", "seed" };
  GString *out = g_string_new (NULL);

  for (guint g = 0; g < G_N_ELEMENTS (groups); g++)
    {
      g_autoptr (GPtrArray) keys = ks_config_group_keys (c, groups[g]);
      for (guint i = 0; keys != NULL && i < keys->len; i++)
        {
          const KsKeyDesc *d = g_ptr_array_index (keys, i);
          const char *value = NULL;
          ks_config_lookup (c, groups[g], d->key, &value, NULL, NULL);
          g_autofree char *name = g_strdup_printf ("%s.%s", groups[g], d->key);
          if (t->written != NULL && g_hash_table_contains (t->written, name))
            value = g_hash_table_lookup (t->written, name); /* the executor's override */
          g_string_append_printf (out, "%s.%s = %s\n", groups[g], d->key, value ? value : "");
        }
    }
  for (guint i = 0; i < G_N_ELEMENTS (train_keys); i++)
    {
      const char *value = NULL;
      ks_config_lookup (c, "train", train_keys[i], &value, NULL, NULL);
      g_string_append_printf (out, "train.%s = %s\n", train_keys[i], value ? value : "");
    }
  return g_string_free (out, FALSE);
}

/* Every worker calls it: with several, the algorithm has worker 0 write for all. */
gboolean
ks_trainer_save (KsTrainer *t, const char *dir, gint64 step, guint keep, GError **error)
{
  g_autoptr (GHashTable) meta = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  KsTrainStatus status = { t->task->last_epoch != NULL ? t->task->last_epoch (t, step) : -1,
                           step };

  if (t->task->metadata != NULL)
    t->task->metadata (t, meta);
  g_hash_table_insert (meta, g_strdup ("config"), trajectory_config (t));
  g_hash_table_insert (meta, g_strdup (KS_TORCH_LAYOUT_KEY), ks_trainer_torch_layouts (t));
  if (t->algorithm != NULL)
    return ks_algorithm_save_check_point (t->algorithm, t->model, t->optimizer, dir, &status,
                                          meta, keep, error);
  g_hash_table_insert (meta, g_strdup ("epoch"), g_strdup_printf ("%" G_GINT64_FORMAT, status.epoch));
  return t->exec->save (t, dir, step, meta, keep, error);
}

/* The value of `key` ("optim.warmup") in "group.key = value" lines, or NULL. */
static const char *
line_value (char **lines, const char *key)
{
  gsize n = strlen (key);
  for (int j = 0; lines[j] != NULL; j++)
    if (strncmp (lines[j], key, n) == 0 && strncmp (lines[j] + n, " = ", 3) == 0)
      return lines[j] + n + 3;
  return NULL;
}

/* Whether the steps after `step` do not read `key` under the settings they run with, so
 * that a value other than the checkpoint's leaves the result as it was: the cosine's
 * length and floor under another schedule, the step decay's under another, a warmup
 * both runs had finished by `step` outside the cosine (whose curve starts after it), and
 * [amp] initial_scale where the checkpoint's loss scale is restored or none is used. */
static gboolean
unread_after (KsTrainer *t, GHashTable *meta, gint64 step, const char *key, const char *now,
              const char *was)
{
  const KsConfig *c = t->config;
  const char *schedule = NULL;
  gboolean fp16 = strcmp (ks_config_get_string (c, "amp", "dtype"), "fp16") == 0;

  if (strcmp (key, "amp.initial_scale") == 0)
    return !fp16 || g_hash_table_contains (meta, "loss_scale");
  if (!g_str_has_prefix (key, "optim.")
      || !ks_config_lookup (c, "optim", "schedule", &schedule, NULL, NULL))
    return FALSE;
  if (strcmp (key, "optim.total_steps") == 0 || strcmp (key, "optim.min_lr") == 0)
    return strcmp (schedule, "cosine") != 0;
  if (strcmp (key, "optim.step_size") == 0 || strcmp (key, "optim.gamma") == 0)
    return strcmp (schedule, "step") != 0;
  if (strcmp (key, "optim.warmup") == 0 && strcmp (schedule, "cosine") != 0)
    return g_ascii_strtoll (now, NULL, 10) <= step && g_ascii_strtoll (was, NULL, 10) <= step;
  return FALSE;
}

/* Warns about each setting that differs from the checkpoint's and that the steps after
 * it read: the run goes on, but it will not repeat an uninterrupted one. */
static void
compare_config (KsTrainer *t, GHashTable *meta, const char *checkpoint, gint64 step)
{
  const char *saved = g_hash_table_lookup (meta, "config");
  g_autofree char *now = trajectory_config (t);

  if (saved == NULL)
    return; /* written before checkpoints kept their settings */
  g_auto (GStrv) old_lines = g_strsplit (saved, "\n", -1);
  g_auto (GStrv) new_lines = g_strsplit (now, "\n", -1);
  for (int i = 0; new_lines[i] != NULL; i++)
    {
      const char *eq = strstr (new_lines[i], " = ");
      if (eq == NULL || g_strv_contains ((const char *const *) old_lines, new_lines[i]))
        continue;
      g_autofree char *key = g_strndup (new_lines[i], eq - new_lines[i]);
      const char *was = line_value (old_lines, key);
      if (*(eq + 3) == '\0' && was == NULL)
        continue; /* a key newer than the checkpoint, at its default now */
      if (was != NULL && unread_after (t, meta, step, key, eq + 3, was))
        continue;
      if (was == NULL)
        was = "(not set)";
      /* a total the plan set from [train] steps: the user changed only the steps */
      g_autofree char *hint = strcmp (key, "optim.total_steps") == 0 && line_value (old_lines, key) != NULL
                                  ? g_strdup_printf (" ([optim] total_steps = 0 follows [train] "
                                                     "steps; --set optim.total_steps=%s keeps "
                                                     "the checkpoint's learning-rate schedule)",
                                                     was)
                                  : g_strdup ("");
      g_warning ("resuming with %s = %s, but %s was trained with %s: the result will differ "
                 "from an uninterrupted run%s", key, eq + 3, checkpoint, was, hint);
    }
}

/* Loads the newest checkpoint (with several workers, the one worker 0 finds) when asked
 * to resume; returns the first step to run. */
gboolean
ks_trainer_resume (KsTrainer *t, const char *dir, gint64 *first, GError **error)
{
  g_autofree char *latest = t->algorithm == NULL ? ks_checkpoint_latest (dir) : NULL;
  g_autoptr (GHashTable) meta = NULL;
  KsTrainStatus status = { -1, 0 };

  gboolean ok = t->algorithm != NULL
                    ? ks_algorithm_load_check_point (t->algorithm, t->model, t->optimizer, dir,
                                                     &status, &meta, error)
                : latest == NULL ? TRUE
                : t->exec->load (t, latest, &status.step, &meta, error);
  if (!ok)
    {
      /* a damaged newest checkpoint: an older one may still serve (one of another model
       * would not) */
      if (error != NULL && *error != NULL && (*error)->domain == KS_CHECKPOINT_ERROR
          && (*error)->code != KS_CHECKPOINT_ERROR_MISMATCH)
        g_prefix_error (error, "resuming from the newest checkpoint (to resume from an older "
                        "one, move this one's directory aside): ");
      return FALSE;
    }
  *first = status.step + 1;
  if (meta == NULL)
    {
      g_message ("no checkpoint in %s yet: starting from step 1", dir);
      return TRUE;
    }
  /* the directory loaded; the algorithm's is named by its step, which its load checked */
  g_autofree char *name = latest != NULL ? g_strdup (latest)
                                         : g_strdup_printf ("%s/checkpoint-%" G_GINT64_FORMAT,
                                                            dir, status.step);
  compare_config (t, meta, name, status.step);
  gint64 steps = ks_config_get_int (t->config, "train", "steps");
  if (status.step > steps)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "%s is at step %" G_GINT64_FORMAT ", past [train] steps = %" G_GINT64_FORMAT
                   ": resumed, the run would train nothing; set train.steps above %"
                   G_GINT64_FORMAT " to train on, or train.start_over=true to start afresh",
                   name, status.step, steps, status.step);
      return FALSE;
    }
  /* "epoch" is the last one finished, from 0 (-1: none) */
  const char *epoch = g_hash_table_lookup (meta, "epoch");
  gint64 last = -1;
  if (epoch != NULL && !g_ascii_string_to_signed (epoch, 10, -1, G_MAXINT64 - 1, &last, NULL))
    last = -1; /* not a count: nothing said of epochs */
  gint64 epochs = last + 1;
  if (epochs > 0)
    g_message ("resumed from %s at step %" G_GINT64_FORMAT " (%" G_GINT64_FORMAT " epoch%s "
               "over the training data done)", name, status.step, epochs, epochs == 1 ? "" : "s");
  else
    g_message ("resumed from %s at step %" G_GINT64_FORMAT, name, status.step);
  return TRUE;
}


gboolean
ks_trainer_export (KsTrainer *t, const char *export_dir, GError **error)
{
  /* the output goes by what it is, not by the op that made it last; the task's metadata
   * lets `ksdist generate` use a GPT's export, the settings tell its shape */
  g_autoptr (GHashTable) meta = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                       g_free);
  if (t->logits == NULL || t->inputs == NULL)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[train] export_dir: %s set no logits or inputs to export; leave it empty",
                   ks_trainer_task_describe (t));
      return FALSE;
    }
  if (t->task->metadata != NULL)
    t->task->metadata (t, meta);
  g_hash_table_insert (meta, g_strdup ("config"), trajectory_config (t));
  g_hash_table_insert (meta, g_strdup (KS_TORCH_LAYOUT_KEY), ks_trainer_torch_layouts (t));
  if (!ks_expr_rename (t->logits, "logits", error)
      || !ks_save_inference_model_with_metadata (export_dir, t->model, t->inputs, &t->logits,
                                                 1, meta, error))
    {
      g_prefix_error (error, "exporting the inference model: ");
      return FALSE;
    }
  g_autofree char *inputs = g_strjoinv (", ", (GStrv) t->inputs);
  g_message ("inference model (%s to %s) written to %s", inputs, ks_expr_name (t->logits),
             export_dir);
  return TRUE;
}
