/* Supervised learning on samples: rows of features with a class or a value each, from a
 * generator (spirals, rings), and a network from the config: the built-in mlp or a layer
 * list ([model] type = layers). Epochs in an order drawn from the seed and the epoch
 * alone, so a resumed run and a data-parallel one see the batches a single unbroken run
 * would. */
#include "net.h"
#include "samples.h"

#include <ksdist/ctr.h>

#include <math.h>
#include <string.h>

typedef struct {
  SampleSet train, eval;
  guint8 *bx, *by; /* this worker's batch */
  guint *order;
  gint64 epoch;
  KsExpr *metric;
  Net net;
  char *description;
} Samples;

static gboolean
regression (const KsConfig *c)
{
  return strcmp (ks_config_get_string (c, "model", "type"), "layers") == 0
         && strcmp (ks_config_get_string (c, "model", "loss"), "mse") == 0;
}

static gboolean
logistic (const KsConfig *c)
{
  return strcmp (ks_config_get_string (c, "model", "type"), "layers") == 0
         && strcmp (ks_config_get_string (c, "model", "loss"), "logistic") == 0;
}

/* The [model] and [data] keys this task reads, for the plan's check of unused ones. */
static gboolean
samples_check (const KsConfig *c, const KsTrainWorld *world, GError **error)
{
  static const char *const mlp[] = { "model.type", "model.hidden", "model.activation",
                                     "model.seed", "model.dropout", "model.init_from", NULL };
  static const char *const layers[] = { "model.type", "model.net", "model.loss", "model.seed",
                                        "model.init_from", NULL };
  gboolean is_layers = strcmp (ks_config_get_string (c, "model", "type"), "layers") == 0;
  g_autofree char *reader = g_strdup_printf ("[model] type = %s",
                                             ks_config_get_string (c, "model", "type"));
  g_autofree char *data_reader = g_strdup_printf ("[data] task = %s",
                                                  ks_config_get_string (c, "data", "task"));

  return ks_config_check_used (c, "model", is_layers ? layers : mlp, reader, error)
         && ks_config_check_used (c, "data", sample_set_settings (c), data_reader, error)
         && sample_set_check (c, regression (c), world != NULL ? world->workers : 0, error)
         && net_check_config (c, error);
}

static gboolean
samples_build (KsTrainer *t, GError **error)
{
  const KsConfig *c = ks_trainer_config (t);
  Samples *s = g_new0 (Samples, 1);
  gsize batch = ks_trainer_batch (t);
  gboolean is_layers = strcmp (ks_config_get_string (c, "model", "type"), "layers") == 0;
  ks_trainer_set_data (t, s);

  /* a parameter server (rank -1) reads every file: it only needs the model's shape */
  if (!sample_set_load (&s->train, &s->eval, c, regression (c), batch,
                        ks_trainer_rank (t) >= 0 ? ks_trainer_role (t) : NULL, error))
    return FALSE;
  if (!ks_trainer_describing (t) && batch > s->train.n)
    {
      if (s->train.generated)
        g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                     "[train] batch = %" G_GSIZE_FORMAT " is larger than [data] samples = %"
                     G_GSIZE_FORMAT ": lower the batch or generate more samples", batch,
                     s->train.n);
      else
        g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                     "[train] batch = %" G_GSIZE_FORMAT " is larger than the %" G_GSIZE_FORMAT
                     " training rows of %s: lower the batch", batch, s->train.n,
                     s->train.source);
      return FALSE;
    }
  if (s->train.n > G_MAXINT32) /* the epoch's order: guint rows, drawn by g_rand_int_range */
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "%s: %" G_GSIZE_FORMAT " training rows on one worker, more than the %d "
                   "one worker shuffles: split them into several files and set [data] "
                   "split_files = true, so that each worker holds a share",
                   s->train.source, s->train.n, G_MAXINT32);
      return FALSE;
    }
  if (logistic (c) && s->train.outputs != 2)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[model] loss = logistic takes labels 0 and 1, but %s has %" G_GINT64_FORMAT
                   " classes: use loss = cross_entropy, or give the rows two classes",
                   s->train.source, s->train.outputs);
      return FALSE;
    }
  if (is_layers ? !net_from_config (&s->net, c,
                                    regression (c) ? NET_LOSS_MSE
                                    : logistic (c) ? NET_LOSS_LOGISTIC
                                                   : NET_LOSS_CROSS_ENTROPY,
                                    logistic (c) ? 1 : s->train.outputs, 0, error)
                : !net_mlp (&s->net, c, s->train.outputs, error))
    return FALSE;
  net_describe (&s->net, ks_trainer_rows (t), s->train.ndim, s->train.shape);
  if (!ks_trainer_build_layers (t, s->net.desc, s->net.n, &s->net.loss_desc,
                                &s->net.metric_desc, &s->metric, error))
    return FALSE;
  static const char *const inputs[] = { "x", NULL };
  ks_trainer_set_inputs (t, inputs);
  if (is_layers)
    s->description = g_strdup_printf ("a layer list (%" G_GSIZE_FORMAT " layers) on %s",
                                      s->net.n, s->train.source);
  if (ks_trainer_describing (t))
    return TRUE;

  s->bx = g_malloc (batch * s->train.x_bytes);
  s->by = g_malloc (batch * s->train.y_bytes);
  s->order = g_new (guint, s->train.n);
  s->epoch = -1;
  const KsFeed feeds[] = { { "x", s->bx, batch * s->train.x_bytes },
                           { "y", s->by, batch * s->train.y_bytes } };
  ks_trainer_set_feeds (t, feeds, G_N_ELEMENTS (feeds));
  return TRUE;
}

/* The epoch's order: from the seed and the epoch, and with split_files the worker's rank
 * too (each worker shuffles the rows of its own files). */
static GRand *
epoch_rng (const KsConfig *c, gint64 epoch, gboolean split, int rank)
{
  guint64 seed = ks_config_get_int (c, "train", "seed");
  guint32 base = (guint32) (seed * 7919u + (guint64) epoch + 0x9e3779b9u);
  if (!split)
    return g_rand_new_with_seed (base);
  return g_rand_new_with_seed_array ((const guint32[]) { base, (guint32) rank, 0x5b117u }, 3);
}

/* Epochs over the samples, each in an order drawn from the seed and the epoch: one order
 * of all rows, each worker its part of every global batch; with split_files, each worker
 * an order of its own rows. */
static void
samples_batch (KsTrainer *t, gint64 step)
{
  Samples *s = ks_trainer_data (t);
  const SampleSet *d = &s->train;
  for (gsize i = 0; i < ks_trainer_batch (t); i++)
    {
      /* samples before this one: earlier steps' global batches, then earlier workers' rows
       * (with split_files, earlier steps' batches of this worker) */
      guint64 k = d->split ? (guint64) (step - 1) * ks_trainer_batch (t) + i
                           : ((guint64) (step - 1) * ks_trainer_world (t) + ks_trainer_rank (t))
                                     * ks_trainer_batch (t) + i;
      if ((gint64) (k / d->n) != s->epoch)
        {
          g_autoptr (GRand) rng = epoch_rng (ks_trainer_config (t), s->epoch = k / d->n,
                                             d->split, ks_trainer_rank (t));
          for (gsize j = 0; j < d->n; j++)
            s->order[j] = j;
          for (gsize j = d->n; j > 1; j--)
            {
              gsize r = g_rand_int_range (rng, 0, (gint32) j);
              guint tmp = s->order[j - 1];
              s->order[j - 1] = s->order[r];
              s->order[r] = tmp;
            }
        }
      sample_set_row (d, s->order[k % d->n], s->bx + i * d->x_bytes, s->by + i * d->y_bytes);
    }
}

/* With split_files each worker holds out rows of its own files: their counts (n values,
 * summed in place) over every worker, so that the metric is the whole held-out set's. */
static gboolean
sum_over_workers (KsTrainer *t, const SampleSet *eval, double *counts, gsize n, GError **error)
{
  KsRoleMaker *role = ks_trainer_role (t);
  if (!eval->split || role == NULL || ks_role_maker_worker_num (role) <= 1)
    return TRUE;
  g_autofree double *sum = g_new (double, n);
  if (!ks_role_maker_all_reduce_worker (role, counts, sum, n, KS_REDUCE_SUM, error))
    return FALSE;
  memcpy (counts, sum, n * sizeof (double));
  return TRUE;
}

/* The held-out rows this worker scores: all, or the first [train] eval_rows (with held-out
 * rows split over the workers' files, its share of them: the cap over the workers, one
 * more for the first cap % workers). */
static gsize
eval_rows (KsTrainer *t, const SampleSet *eval)
{
  gsize cap = ks_trainer_eval_cap (t);
  KsRoleMaker *role = ks_trainer_role (t);
  if (cap == 0)
    return eval->n;
  /* this worker's share of the cap, none where the cap is below the workers */
  if (eval->split && role != NULL && ks_role_maker_worker_num (role) > 1)
    {
      gsize w = ks_role_maker_worker_num (role), i = ks_role_maker_worker_index (role);
      cap = cap / w + (i < cap % w);
    }
  return MIN (cap, eval->n);
}

/* After scoring `scored` of this worker's held-out rows: the set's size for the printed
 * line when the evaluation scored fewer ([train] eval_rows). */
static gboolean
say_total (KsTrainer *t, const SampleSet *eval, gsize scored, GError **error)
{
  double counts[2] = { (double) scored, (double) eval->n };
  if (!sum_over_workers (t, eval, counts, 2, error))
    return FALSE;
  if (counts[0] < counts[1])
    ks_trainer_set_eval_total (t, (gsize) counts[1]);
  return TRUE;
}

/* The AUC of the held-out rows (each once; the last batch filled up with repeats that
 * are not counted) from the metric layer's probabilities (a pipeline's last stage's
 * too), bucketed as the ctr's. */
static gboolean
samples_auc (KsTrainer *t, double *value, gsize *samples, GError **error)
{
  Samples *s = ks_trainer_data (t);
  gsize batch = ks_trainer_batch (t);
  g_autoptr (KsAuc) auc = ks_auc_new (KS_AUC_BUCKETS);
  g_autofree float *p = g_new (float, batch), *y = g_new (float, batch);
  gsize n = eval_rows (t, &s->eval);
  for (gsize start = 0; start < n; start += batch)
    {
      gsize valid = MIN (batch, n - start), n_feeds;
      for (gsize i = 0; i < batch; i++)
        {
          gsize row = start + MIN (i, valid - 1);
          gint64 label;
          sample_set_row (&s->eval, row, s->bx + i * s->eval.x_bytes,
                          s->by + i * s->eval.y_bytes);
          memcpy (&label, s->by + i * s->eval.y_bytes, sizeof label);
          y[i] = (float) label;
        }
      const KsFeed *feeds = ks_trainer_feeds (t, &n_feeds);
      if (!ks_trainer_metric_values (t, feeds, n_feeds, s->metric, p, batch, error))
        return FALSE;
      ks_auc_add (auc, p, y, valid);
    }
  gsize n_counts;
  double *counts = ks_auc_counts (auc, &n_counts);
  if (!sum_over_workers (t, &s->eval, counts, n_counts, error)
      || !say_total (t, &s->eval, n, error))
    return FALSE;
  *value = ks_auc_value (auc);
  if (samples != NULL)
    *samples = (gsize) ks_auc_samples (auc);
  return TRUE;
}

/* The metric over every held-out row once, the last batch partial: accuracy, the root
 * of the mean squared error, or the AUC. */
static gboolean
samples_evaluate (KsTrainer *t, gboolean final, double *value, gsize *samples, GError **error)
{
  Samples *s = ks_trainer_data (t);
  gsize batch = ks_trainer_batch (t);
  double sum = 0;
  (void) final;
  if (s->net.loss == NET_LOSS_LOGISTIC)
    return samples_auc (t, value, samples, error);
  gsize n = eval_rows (t, &s->eval);
  for (gsize start = 0; start < n; start += batch)
    {
      gsize rows = MIN (batch, n - start), n_feeds;
      for (gsize i = 0; i < rows; i++)
        sample_set_row (&s->eval, start + i, s->bx + i * s->eval.x_bytes,
                        s->by + i * s->eval.y_bytes);
      const KsFeed *feeds = ks_trainer_feeds (t, &n_feeds);
      double v;
      if (!ks_trainer_metric_sum (t, feeds, n_feeds, s->metric, rows, &v, error))
        return FALSE;
      /* an accuracy's sum is a count of right rows: whole */
      sum += s->net.loss == NET_LOSS_MSE ? v : round (v);
    }
  double totals[2] = { sum, (double) n }; /* over every worker's files */
  if (!sum_over_workers (t, &s->eval, totals, 2, error) || !say_total (t, &s->eval, n, error))
    return FALSE;
  *value = totals[0] / totals[1];
  if (s->net.loss == NET_LOSS_MSE)
    *value = sqrt (*value);
  if (samples != NULL)
    *samples = (gsize) totals[1];
  return TRUE;
}

static const char *
samples_describe (KsTrainer *t)
{
  Samples *s = ks_trainer_data (t);
  return s->description != NULL ? s->description
                                : ks_config_get_string (ks_trainer_config (t), "data", "task");
}

static void
samples_clear (KsTrainer *t)
{
  Samples *s = ks_trainer_data (t);
  sample_set_clear (&s->train);
  sample_set_clear (&s->eval);
  net_clear (&s->net);
  g_free (s->bx);
  g_free (s->by);
  g_free (s->order);
  g_free (s->description);
  g_free (s);
}

/* What a user of a checkpoint or an export needs to feed it raw rows and read its
 * classes: the moments the training rows were standardised by, the classes' names. */
static void
samples_metadata (KsTrainer *t, GHashTable *meta)
{
  Samples *s = ks_trainer_data (t);
  gsize features = s->train.x_bytes / sizeof (float);
  /* the classes' names, so ksdist infer --argmax prints "cat" rather than 3 */
  if (s->train.class_names != NULL)
    g_hash_table_insert (meta, g_strdup ("data.classes"),
                         g_strjoinv ("\n", s->train.class_names));
  /* a row's shape ("28,28,1": an image's height, width, channels), so ksdist infer
   * decodes images as training did; a CSV header's names, so it knows its columns */
  GString *shape = g_string_new (NULL);
  for (int i = 0; i < s->train.ndim; i++)
    g_string_append_printf (shape, "%s%" G_GINT64_FORMAT, i ? "," : "", s->train.shape[i]);
  g_hash_table_insert (meta, g_strdup ("data.shape"), g_string_free (shape, FALSE));
  char *const *names = sample_set_feature_names (&s->train);
  if (names != NULL)
    g_hash_table_insert (meta, g_strdup ("data.features"), g_strjoinv ("\n", (char **) names));
  /* values, not classes: ksdist infer reads a data file's labels so */
  if (s->net.loss == NET_LOSS_MSE)
    g_hash_table_insert (meta, g_strdup ("data.labels"), g_strdup ("values"));
  /* [data] missing: how ksdist infer fills a missing cell (mean, zero) as training did,
   * or names the setting it cannot follow (error, skip: a row to score is never dropped) */
  const char *missing = ks_config_get_string (ks_trainer_config (t), "data", "missing");
  if (strcmp (ks_config_get_string (ks_trainer_config (t), "data", "task"), "csv") == 0)
    g_hash_table_insert (meta, g_strdup ("data.missing"), g_strdup (missing));
  if (s->train.fill != NULL)
    {
      GString *fill = g_string_new (NULL);
      for (gsize i = 0; i < features; i++)
        g_string_append_printf (fill, "%s%.9g", i ? "," : "", s->train.fill[i]);
      g_hash_table_insert (meta, g_strdup ("data.fill"), g_string_free (fill, FALSE));
    }
  if (s->train.mean == NULL)
    return;
  GString *mean = g_string_new (NULL), *std = g_string_new (NULL);
  for (gsize i = 0; i < features; i++)
    {
      g_string_append_printf (mean, "%s%.9g", i ? "," : "", s->train.mean[i]);
      g_string_append_printf (std, "%s%.9g", i ? "," : "", s->train.std[i]);
    }
  g_hash_table_insert (meta, g_strdup ("data.mean"), g_string_free (mean, FALSE));
  g_hash_table_insert (meta, g_strdup ("data.std"), g_string_free (std, FALSE));
}

static gint64
samples_last_epoch (KsTrainer *t, gint64 step)
{
  Samples *s = ks_trainer_data (t);
  guint64 rows = (guint64) step * ks_trainer_batch (t) * (s->train.split ? 1 : ks_trainer_world (t));
  return (gint64) (rows / s->train.n) - 1;
}

/* The classifier and the regression differ in what their evaluation reports. */
#define SAMPLES_TASK(task_name, task_metric)                                              \
  {                                                                                      \
    .size = sizeof (KsTrainTask), .name = task_name, .metric = task_metric,              \
    .unit = "samples", .build = samples_build, .batch = samples_batch,                   \
    .evaluate = samples_evaluate, .describe = samples_describe, .clear = samples_clear,  \
    .metadata = samples_metadata, .last_epoch = samples_last_epoch, .check = samples_check, \
    .honours_eval_rows = TRUE,                                                           \
  }

const KsTrainTask ks_samples_task = SAMPLES_TASK ("a network on samples", "accuracy");
const KsTrainTask ks_samples_regression_task = SAMPLES_TASK ("a regression on samples", "rmse");
const KsTrainTask ks_samples_logistic_task = SAMPLES_TASK ("a binary classifier on samples",
                                                           "auc");
