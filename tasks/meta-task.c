/* The task of [meta] algorithm = reptile: meta-training on the few-shot image set at
 * [data] path. Each step is Reptile's own (inner loops on meta_batch tasks, then the
 * meta-update; under ksdist launch the workers share each meta-batch, meta.h); a
 * validation score every [train] eval_every steps, and at the end the test accuracy over
 * [meta] eval_tasks tasks of held-out classes with its 95% interval. The trainer does the
 * rest: the loop, checkpoints and resume, progress, the metrics file. */
#include "tasks-private.h"

#include <string.h>

/* [meta]: Reptile's settings, read here ([meta] algorithm by the choice of task too). */
const KsKeyDesc ks_tasks_meta_keys[] = {
  { "meta", "algorithm", KS_VALUE_CHOICE, "none", 1, 0, "none|reptile",
    "Meta-learning: reptile trains on few-shot tasks of the image set at [data] path ([train] "
    "steps meta-steps, [train] optimizer in the inner loop); none trains as [model] says" },
  { "meta", "ways", KS_VALUE_INT, "5", 2, 1000, NULL, "Classes of a task" },
  { "meta", "shots", KS_VALUE_INT, "5", 1, 10000, NULL, "Training images of each class of a task" },
  { "meta", "train_shots", KS_VALUE_INT, "0", 0, 10000, NULL,
    "Images of each class in a training task (supervised-reptile's --train-shots: its "
    "Omniglot runs train on 10 or 15 and test on 5 or 1); 0: shots" },
  { "meta", "inner_batch", KS_VALUE_INT, "5", 1, 100000, NULL, "Images per inner step" },
  { "meta", "inner_iters", KS_VALUE_INT, "20", 1, 1e6, NULL, "Inner steps on a training task" },
  { "meta", "meta_step", KS_VALUE_DOUBLE, "0.1", 0, 1, NULL,
    "Meta step size at the first meta-step (the fraction of the way to the tasks' weights)" },
  { "meta", "meta_step_final", KS_VALUE_DOUBLE, "0", 0, 1, NULL,
    "Meta step size at the last meta-step (linear in between)" },
  { "meta", "meta_batch", KS_VALUE_INT, "1", 1, 100000, NULL,
    "Tasks per meta-step on each worker (ksdist launch -n N: N times as many in all)" },
  { "meta", "eval_inner_batch", KS_VALUE_INT, "5", 1, 100000, NULL,
    "Images per fine-tuning step on an evaluation task's shots" },
  { "meta", "eval_inner_iters", KS_VALUE_INT, "50", 1, 1e6, NULL,
    "Fine-tuning steps on an evaluation task" },
  { "meta", "eval_tasks", KS_VALUE_INT, "1000", 1, 1e7, NULL,
    "Test tasks of the final evaluation (held-out classes); [train] eval_every evaluates "
    "on a tenth as many of val" },
  { "meta", "filters", KS_VALUE_INT, "64", 1, 4096, NULL,
    "Filters of each of the 4 convolutions (supervised-reptile: 64 for characters, 32 for "
    "colour)" },
  { NULL },
};

typedef struct {
  KsImageSet *set;
  KsReptile *reptile;
  KsReptileOptions options;
  char *description;
} Meta;

static KsReptileOptions
reptile_options (const KsConfig *c)
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

/* An evaluation over many tasks shows its progress on a terminal */
static void
evaluation_progress (gpointer t, gsize done, gsize total)
{
  ks_trainer_progress (t, "evaluation tasks", done, total);
}

static gboolean
meta_build (KsTrainer *t, GError **error)
{
  const KsConfig *c = ks_trainer_config (t);
  const char *path = ks_config_get_string (c, "data", "path");
  KsImageKind kind = strcmp (ks_config_get_string (c, "data", "images"), "colour") == 0
                         ? KS_IMAGES_COLOUR : KS_IMAGES_CHARACTERS;
  KsImageOptions io = {
    kind, 0, (gsize) ks_config_get_int (c, "data", "cache_mb") << 20,
    strcmp (ks_config_get_string (c, "data", "bad_images"), "skip") == 0,
    kind == KS_IMAGES_CHARACTERS,
  };
  Meta *m = g_new0 (Meta, 1);

  ks_trainer_set_data (t, m);
  m->options = reptile_options (c);
  if (ks_trainer_describing (t))
    return TRUE; /* the images are read when training */
  g_autoptr (GError) local = NULL;
  if ((m->set = ks_image_set_open (path, &io, &local)) == NULL)
    {
      /* the setting to change */
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE, "[data] path: %s",
                   local->message);
      return FALSE;
    }
  if ((m->reptile = ks_reptile_new (ks_trainer_registry (t), c, ks_trainer_compute (t), m->set,
                                    ks_config_get_string (c, "train", "optimizer"),
                                    ks_trainer_comm (t), &m->options, &local))
      == NULL)
    {
      /* a task too big for the set is a setting to change */
      if (g_error_matches (local, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID))
        g_set_error_literal (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE, local->message);
      else
        g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  ks_reptile_set_progress (m->reptile, evaluation_progress, t);
  if (!ks_trainer_use_model (t, ks_reptile_model (m->reptile), error))
    return FALSE;
  m->description = g_strdup_printf (
      "reptile %d-way %d-shot on %s (%" G_GSIZE_FORMAT " training classes, %" G_GSIZE_FORMAT
      " val, %" G_GSIZE_FORMAT " test), %d task%s a meta-step on each of %d worker%s",
      m->options.ways, m->options.shots, path, ks_image_set_n_classes (m->set, KS_SPLIT_TRAIN),
      ks_image_set_n_classes (m->set, KS_SPLIT_VAL), ks_image_set_n_classes (m->set, KS_SPLIT_TEST),
      m->options.meta_batch, m->options.meta_batch > 1 ? "s" : "", ks_trainer_world (t),
      ks_trainer_world (t) > 1 ? "s" : "");
  return TRUE;
}

static gboolean
meta_step (KsTrainer *t, gint64 step, double *loss, GError **error)
{
  Meta *m = ks_trainer_data (t);
  return ks_reptile_step (m->reptile, step - 1, loss, error);
}

/* During training: a tenth of eval_tasks of the val classes; at the end: eval_tasks of
 * the test classes, with the 95% interval. */
static gboolean
meta_evaluate (KsTrainer *t, gboolean final, double *value, gsize *samples, GError **error)
{
  Meta *m = ks_trainer_data (t);
  int tasks = ks_config_get_int (ks_trainer_config (t), "meta", "eval_tasks");
  double ci;

  if (!final)
    tasks = MAX (1, tasks / 10);
  if (!ks_reptile_evaluate (m->reptile, final ? KS_SPLIT_TEST : KS_SPLIT_VAL, tasks,
                            final ? 0 : 1, value, &ci, error))
    return FALSE;
  *samples = tasks;
  if (ks_trainer_rank (t) == 0)
    g_message ("%s accuracy %.4f +- %.4f for 95%% (%d tasks, %d-way %d-shot, of the %s "
               "classes; chance %.4f)", final ? "test" : "validation", *value, ci, tasks,
               m->options.ways, m->options.shots, final ? "test" : "val",
               1.0 / m->options.ways);
  if (final && ks_image_set_skipped (m->set) > 0)
    g_message ("%u image files did not decode and were skipped", ks_image_set_skipped (m->set));
  return TRUE;
}

static const char *
meta_describe (KsTrainer *t)
{
  Meta *m = ks_trainer_data (t);
  return m->description != NULL ? m->description : "reptile";
}

static void
meta_clear (KsTrainer *t)
{
  Meta *m = ks_trainer_data (t);
  ks_reptile_free (m->reptile);
  ks_image_set_free (m->set);
  g_free (m->description);
  g_free (m);
}

/* [train] eval_rows caps rows; Reptile scores tasks, as many as [meta] eval_tasks says. */
static gboolean
meta_check (const KsConfig *c, const KsTrainWorld *world, GError **error)
{
  (void) world;
  if (ks_config_get_int (c, "train", "eval_rows") > 0)
    return ks_tasks_config_error (error, "[train] eval_rows: meta-learning scores tasks, not "
                                  "rows; set how many with [meta] eval_tasks and remove "
                                  "eval_rows");
  return TRUE;
}

static const char *const meta_settings[] = {
  "model.seed", "data.path", "data.images", "data.cache_mb", "data.bad_images", NULL,
};

const KsTrainTask ks_meta_task = {
  .size = sizeof (KsTrainTask),
  .name = "meta-learning",
  .metric = "accuracy",
  .unit = "tasks",
  .build = meta_build,
  .evaluate = meta_evaluate,
  .describe = meta_describe,
  .clear = meta_clear,
  .step = meta_step,
  .settings = meta_settings,
  .check = meta_check,
};
