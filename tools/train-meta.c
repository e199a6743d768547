/* ksdist train with [meta] algorithm = reptile: meta-training on the few-shot image set
 * at [data] path, with log lines, a validation score every [train] eval_every meta-steps,
 * checkpoints and resume, and at the end the test accuracy over [meta] eval_tasks tasks
 * of held-out classes with its 95% interval. Under ksdist launch the workers share each
 * meta-batch (meta.h). */
#include "train.h"

#include <errno.h>

static KsReptileOptions
reptile_options (const KsConfig *c, KsImageKind kind)
{
  KsReptileOptions o = {
    .ways = ks_config_get_int (c, "meta", "ways"),
    .shots = ks_config_get_int (c, "meta", "shots"),
    .train_shots = ks_config_get_int (c, "meta", "train_shots"),
    .inner_batch = ks_config_get_int (c, "meta", "inner_batch"),
    .inner_iters = ks_config_get_int (c, "meta", "inner_iters"),
    .eval_inner_batch = ks_config_get_int (c, "meta", "eval_inner_batch"),
    .eval_inner_iters = ks_config_get_int (c, "meta", "eval_inner_iters"),
    .meta_batch = ks_config_get_int (c, "meta", "meta_batch"),
    .meta_step = ks_config_get_double (c, "meta", "meta_step"),
    .meta_step_final = ks_config_get_double (c, "meta", "meta_step_final"),
    .meta_iters = ks_config_get_int (c, "train", "steps"),
    .filters = ks_config_get_int (c, "meta", "filters"),
    .seed = ks_config_get_int (c, "model", "seed"),
  };
  return o;
}

static gboolean
resume_from (KsReptile *r, const char *dir, gint64 *first, GError **error)
{
  g_autofree char *latest = ks_checkpoint_latest (dir);
  gint64 step = 0;
  if (latest == NULL)
    return TRUE; /* nothing saved yet: a fresh start */
  if (!ks_checkpoint_load (latest, ks_reptile_model (r), NULL, &step, NULL, error))
    return FALSE;
  *first = step + 1;
  g_message ("resumed from %s: meta-step %" G_GINT64_FORMAT, latest, step);
  return TRUE;
}

int
ks_train_meta (Trainer *t)
{
  const KsConfig *c = t->config;
  g_autoptr (GError) error = NULL;
  g_autoptr (KsImageSet) set = NULL;
  g_autoptr (KsReptile) reptile = NULL;
  const char *path = ks_config_get_string (c, "data", "path");
  KsImageKind kind = strcmp (ks_config_get_string (c, "data", "images"), "colour") == 0
                         ? KS_IMAGES_COLOUR : KS_IMAGES_CHARACTERS;
  KsImageOptions io = {
    kind, 0, (gsize) ks_config_get_int (c, "data", "cache_mb") << 20,
    strcmp (ks_config_get_string (c, "data", "bad_images"), "skip") == 0,
    kind == KS_IMAGES_CHARACTERS,
  };
  KsReptileOptions o = reptile_options (c, kind);
  gint64 steps = o.meta_iters, first = 1;
  gint64 log_every = ks_config_get_int (c, "train", "log_every");
  gint64 eval_every = ks_config_get_int (c, "train", "eval_every");
  const char *ckpt_dir = ks_config_get_string (c, "train", "checkpoint_dir");
  gint64 ckpt_every = ks_config_get_int (c, "train", "checkpoint_every");
  int eval_tasks = ks_config_get_int (c, "meta", "eval_tasks");
  double acc, ci, loss = 0, loss_sum = 0;
  gint64 logged = 0;

  if ((set = ks_image_set_open (path, &io, &error)) == NULL)
    {
      ks_cli_error ("[data] path: %s", error->message);
      return KS_EXIT_USAGE;
    }
  if (!ks_train_dist_setup (t, &error)
      || (t->compute = ks_compute_new (t->registry, c, NULL, &error)) == NULL
      || (reptile = ks_reptile_new (t->registry, c, t->compute, set,
                                    ks_config_get_string (c, "train", "optimizer"), t->comm, &o,
                                    &error)) == NULL)
    {
      ks_cli_error ("%s", error->message);
      /* a setting nothing here can follow (a name, a task too big for the set) */
      return error->domain == KS_CONFIG_ERROR
                     || g_error_matches (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_FOUND)
                     || g_error_matches (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID)
                 ? KS_EXIT_USAGE : KS_EXIT_RUNTIME;
    }
  if (*ckpt_dir != '\0' && ks_config_get_bool (c, "train", "resume")
      && !resume_from (reptile, ckpt_dir, &first, &error))
    {
      ks_cli_error ("%s", error->message);
      return KS_EXIT_RUNTIME;
    }
  g_autofree char *device = ks_compute_describe (t->compute);
  if (t->rank == 0)
    g_message ("reptile: %d-way %d-shot on %s (%" G_GSIZE_FORMAT " training classes, %"
               G_GSIZE_FORMAT " val, %" G_GSIZE_FORMAT " test), %d task%s a meta-step on "
               "each of %d worker%s, %s", o.ways, o.shots, path,
               ks_image_set_n_classes (set, KS_SPLIT_TRAIN),
               ks_image_set_n_classes (set, KS_SPLIT_VAL),
               ks_image_set_n_classes (set, KS_SPLIT_TEST), o.meta_batch,
               o.meta_batch > 1 ? "s" : "", t->world, t->world > 1 ? "s" : "", device);
  gint64 start = g_get_monotonic_time ();
  for (gint64 step = first; step <= steps; step++)
    {
      if (!ks_reptile_step (reptile, step - 1, &loss, &error))
        {
          ks_cli_error ("meta-step %" G_GINT64_FORMAT ": %s", step, error->message);
          return KS_EXIT_RUNTIME;
        }
      loss_sum += loss, logged++;
      if (t->rank == 0 && (step % log_every == 0 || step == steps))
        {
          double s = (g_get_monotonic_time () - start) / 1e6;
          printf ("meta-step %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT "  inner loss %.4f  "
                  "%.1f meta-steps/s\n", step, steps, loss_sum / logged,
                  (step - first + 1) / MAX (s, 1e-9));
          fflush (stdout);
          loss_sum = 0, logged = 0;
        }
      if (eval_every > 0 && step % eval_every == 0)
        {
          if (!ks_reptile_evaluate (reptile, KS_SPLIT_VAL, MAX (1, eval_tasks / 10), 1, &acc,
                                    &ci, &error))
            {
              ks_cli_error ("evaluation at meta-step %" G_GINT64_FORMAT ": %s", step,
                            error->message);
              return KS_EXIT_RUNTIME;
            }
          if (t->rank == 0)
            printf ("eval accuracy %.4f at meta-step %" G_GINT64_FORMAT " (+- %.4f for 95%%; "
                    "%d tasks of the val classes)\n", acc, step, ci, MAX (1, eval_tasks / 10));
        }
      if (t->rank == 0 && *ckpt_dir != '\0'
          && ((ckpt_every > 0 && step % ckpt_every == 0) || step == steps)
          && !ks_checkpoint_save (ckpt_dir, step, ks_reptile_model (reptile), NULL, NULL,
                                  ks_config_get_int (c, "train", "keep"), &error))
        {
          ks_cli_error ("%s", error->message);
          return KS_EXIT_RUNTIME;
        }
    }
  if (!ks_reptile_evaluate (reptile, KS_SPLIT_TEST, eval_tasks, 0, &acc, &ci, &error))
    {
      ks_cli_error ("test evaluation: %s", error->message);
      return KS_EXIT_RUNTIME;
    }
  if (t->rank == 0)
    printf ("eval accuracy %.4f (+- %.4f for 95%%; %d held-out tasks, %d-way %d-shot, of the "
            "test classes; chance %.4f)\n", acc, ci, eval_tasks, o.ways, o.shots, 1.0 / o.ways);
  if (ks_image_set_skipped (set) > 0)
    g_message ("%u image files did not decode and were skipped", ks_image_set_skipped (set));
  return KS_EXIT_OK;
}
