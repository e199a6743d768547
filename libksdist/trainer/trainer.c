/* The trainer object, its accessors, and the building blocks a task's callbacks use. */
#include "trainer-private.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

gboolean
ks_trainer_task_copy (const KsTrainTask *task, KsTrainTask *copy, GError **error)
{
  /* a table of an older, smaller KsTrainTask: the slots it lacks read as NULL */
  memset (copy, 0, sizeof *copy);
  memcpy (copy, task, MIN (task->size, sizeof *copy));
  if (task->size < G_STRUCT_OFFSET (KsTrainTask, describe) || copy->build == NULL
      || copy->evaluate == NULL || (copy->batch == NULL && copy->step == NULL))
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "the task %s lacks its size or a required callback (build, evaluate, and "
                   "batch or step): set them", task->name ? task->name : "(unnamed)");
      return FALSE;
    }
  return TRUE;
}

KsTrainer *
ks_trainer_alloc (KsRegistry *registry, KsConfig *config, const KsTrainTask *task,
                  gpointer data, GError **error)
{
  KsTrainer *t = g_new0 (KsTrainer, 1);
  t->ckpt_lock = -1;

  if (!ks_trainer_task_copy (task, &t->task_copy, error))
    {
      g_free (t);
      return NULL;
    }
  t->registry = registry;
  t->config = config;
  t->task = &t->task_copy;
  t->task_data = data;
  t->world = 1;
  t->result = NAN;
  t->batch = ks_config_get_int (config, "train", "batch");
  t->pipelined = ks_trainer_pipelined_config (config);
  t->exec = t->task->step != NULL ? &ks_executor_own
            : t->pipelined ? &ks_executor_pipeline : &ks_executor_single;
  t->tty = isatty (STDOUT_FILENO);
  ks_trainer_observe_init (t);
  return t;
}

KsTrainer *
ks_trainer_new (KsRegistry *registry, KsConfig *config, const KsTrainTask *task,
                gpointer data, GError **error)
{
  g_return_val_if_fail (registry != NULL && config != NULL && task != NULL, NULL);
  if (!ks_trainer_check (registry, config, task, NULL, FALSE, error))
    return NULL;
  return ks_trainer_alloc (registry, config, task, data, error);
}

void
ks_trainer_free (KsTrainer *t)
{
  if (t == NULL)
    return;
  if (t->metrics != NULL)
    fclose (t->metrics);
  if (t->observers != NULL)
    g_array_free (t->observers, TRUE);
  ks_trainer_release_checkpoints (t);
  ks_optimizer_free (t->optimizer);
  if (t->exec->clear != NULL)
    t->exec->clear (t); /* with the model, when the executor's state owns it */
  if (!t->model_borrowed)
    ks_model_free (t->model);
  /* after the model and pipeline, which may still point at the task's layer list */
  if (t->task->clear != NULL && t->task_data != NULL)
    t->task->clear (t);
  ks_trainer_dist_clear (t); /* a server's algorithm holds tables on the compute */
  ks_compute_free (t->compute);
  g_clear_pointer (&t->written, g_hash_table_unref);
  g_free (t->feeds);
  g_free (t);
}

gboolean
ks_trainer_override (KsTrainer *t, const char *group, const char *key, const char *value,
                     GError **error)
{
  const char *as_written = NULL;
  char *name = g_strdup_printf ("%s.%s", group, key);
  g_autofree char *setting = g_strdup_printf ("%s=%s", name, value);
  ks_config_lookup (t->config, group, key, &as_written, NULL, NULL);
  if (t->written == NULL)
    t->written = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  if (g_hash_table_contains (t->written, name)) /* the first override kept the user's */
    g_free (name);
  else
    g_hash_table_insert (t->written, name, g_strdup (as_written));
  return ks_config_set_override (t->config, setting, error);
}

double ks_trainer_result (const KsTrainer *t) { return t->result; }
KsConfig *ks_trainer_config (const KsTrainer *t) { return t->config; }
KsRegistry *ks_trainer_registry (const KsTrainer *t) { return t->registry; }
KsCompute *ks_trainer_compute (const KsTrainer *t) { return t->compute; }
gpointer ks_trainer_data (const KsTrainer *t) { return t->task_data; }
void ks_trainer_set_data (KsTrainer *t, gpointer data) { t->task_data = data; }
gsize ks_trainer_batch (const KsTrainer *t) { return t->batch; }
int ks_trainer_rank (const KsTrainer *t) { return t->rank; }
int ks_trainer_world (const KsTrainer *t) { return t->world; }
gboolean ks_trainer_pipelined (const KsTrainer *t) { return t->pipelined; }
gboolean ks_trainer_describing (const KsTrainer *t) { return t->describe_only; }
KsRoleMaker *ks_trainer_role (const KsTrainer *t) { return t->role; }
KsAlgorithm *ks_trainer_algorithm (const KsTrainer *t) { return t->algorithm; }
KsComm *ks_trainer_comm (const KsTrainer *t) { return t->comm; }
KsModel *ks_trainer_model (const KsTrainer *t) { return t->model; }
KsExpr *ks_trainer_loss (const KsTrainer *t) { return t->loss; }
KsExpr *ks_trainer_logits (const KsTrainer *t) { return t->logits; }
void ks_trainer_set_inputs (KsTrainer *t, const char *const *inputs) { t->inputs = inputs; }
void ks_trainer_set_tokens_per_row (KsTrainer *t, gsize tokens) { t->tokens_per_row = tokens; }

gsize
ks_trainer_rows (const KsTrainer *t)
{
  return t->batch / (gsize) ks_config_get_int (t->config, "pipeline", "micro_batches");
}

void
ks_trainer_set_feeds (KsTrainer *t, const KsFeed *feeds, gsize n)
{
  g_free (t->feeds);
  t->feeds = g_memdup2 (feeds, n * sizeof *feeds);
  t->n_feeds = n;
}

const KsFeed *
ks_trainer_feeds (const KsTrainer *t, gsize *n)
{
  *n = t->n_feeds;
  return t->feeds;
}

const char *
ks_trainer_task_describe (KsTrainer *t)
{
  return t->task->describe != NULL ? t->task->describe (t)
         : t->task->name != NULL   ? t->task->name
                                   : "a task";
}

/* The layers' graph built on a model of the device, never initialised, and dropped, so
 * that shapes that do not fit (a layer's input, the loss's labels) and layers the device
 * cannot run are found by the plan's check, before any data is read or memory taken for
 * parameters. */
static gboolean
check_shapes (KsCompute *compute, const KsLayerDesc *layers, gsize n, const KsLayerDesc *loss,
              const KsLayerDesc *metric, GError **error)
{
  g_autoptr (KsModel) model = ks_model_new (compute);
  KsExpr *logits;
  return ks_layers_build (model, layers, n, &logits, error)
         && loss->build (model, logits, loss->args, error) != NULL
         && (metric == NULL || metric->build == NULL
             || metric->build (model, logits, metric->args, error) != NULL);
}

gboolean
ks_trainer_build_layers (KsTrainer *t, const KsLayerDesc *layers, gsize n,
                         const KsLayerDesc *loss, const KsLayerDesc *metric, KsExpr **metric_out,
                         GError **error)
{
  KsExpr *logits;

  *metric_out = NULL;
  g_return_val_if_fail (t->model == NULL, FALSE); /* one model a trainer */
  t->layers = layers;
  t->n_layers = n;
  t->loss_layer = loss;
  if (t->describe_only)
    return check_shapes (t->compute, layers, n, loss, metric, error);
  if (t->exec->build != NULL)
    return t->exec->build (t, layers, n, loss, metric, error);
  t->model = ks_model_new (t->compute);
  if (!ks_layers_build (t->model, layers, n, &logits, error)
      || (t->loss = loss->build (t->model, logits, loss->args, error)) == NULL
      || (metric != NULL && metric->build != NULL
          && (*metric_out = metric->build (t->model, logits, metric->args, error)) == NULL))
    return FALSE;
  t->logits = logits;
  return ks_model_init (t->model, error);
}

/* A model that is not a layer list, on a pipeline. */
static gboolean
refuse_unlayered (KsTrainer *t, GError **error)
{
  g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
               "[pipeline]: %s is not described as a layer list, so it cannot be cut into "
               "stages; train it without [pipeline]", ks_trainer_task_describe (t));
  return FALSE;
}

gboolean
ks_trainer_not_finite (GError **error, const char *what, double value)
{
  g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
               "%s is %g: the model diverged (lower [optim] lr, set [optim] clip_norm, or use "
               "a warmup)", what, value);
  return FALSE;
}

gboolean
ks_trainer_set_model (KsTrainer *t, KsModel *model, GError **error)
{
  g_return_val_if_fail (t->model == NULL, FALSE); /* one model a trainer */
  if (t->pipelined)
    {
      ks_model_free (model);
      return refuse_unlayered (t, error);
    }
  t->model = model;
  return TRUE;
}

void
ks_trainer_set_loss (KsTrainer *t, KsExpr *loss, KsExpr *logits)
{
  t->loss = loss;
  t->logits = logits;
}

gboolean
ks_trainer_use_model (KsTrainer *t, KsModel *model, GError **error)
{
  g_return_val_if_fail (t->model == NULL, FALSE); /* one model a trainer */
  if (t->pipelined)
    return refuse_unlayered (t, error);
  t->model = model;
  t->model_borrowed = TRUE;
  return TRUE;
}

gboolean
ks_trainer_metric (KsTrainer *t, const KsFeed *feeds, gsize n_feeds, KsExpr *metric,
                   double *value, GError **error)
{
  float v = NAN;
  const KsTensor *out;

  if (t->exec->metric != NULL)
    {
      if (!t->exec->metric (t, feeds, n_feeds, value, error))
        return FALSE;
    }
  else
    {
      if (!ks_model_run (t->model, feeds, n_feeds, &metric, 1, error)
          || (out = ks_expr_value (metric, error)) == NULL
          || !ks_tensor_to_host (out, &v, sizeof v, error))
        return FALSE;
      *value = v;
    }
  if (!isfinite (*value))
    {
      g_autofree char *what = g_strdup_printf ("the held-out %s", t->task->metric);
      return ks_trainer_not_finite (error, what, *value);
    }
  return TRUE;
}

gboolean
ks_trainer_metric_values (KsTrainer *t, const KsFeed *feeds, gsize n_feeds, KsExpr *metric,
                          float *values, gsize n, GError **error)
{
  const KsTensor *out;

  if (t->exec->metric_values != NULL)
    return t->exec->metric_values (t, feeds, n_feeds, values, n, error);
  if (!ks_model_run (t->model, feeds, n_feeds, &metric, 1, error)
      || (out = ks_expr_value (metric, error)) == NULL)
    return FALSE;
  if (ks_expr_numel (metric) != n)
    return ks_invalid (error, "the metric '%s' gives %" G_GSIZE_FORMAT " values, not %"
                       G_GSIZE_FORMAT, ks_expr_name (metric), ks_expr_numel (metric), n);
  return ks_tensor_to_host (out, values, n * sizeof (float), error);
}

gsize
ks_trainer_eval_cap (const KsTrainer *t)
{
  /* noted for the first evaluation's check (loop.c) that a task which says it honours
   * eval_rows does read it; the trainer itself is not a const object */
  ((KsTrainer *) t)->eval_cap_asked = TRUE;
  return (gsize) ks_config_get_int (t->config, "train", "eval_rows");
}

void
ks_trainer_set_eval_total (KsTrainer *t, gsize total)
{
  t->eval_total = total;
}

gboolean
ks_trainer_metric_sum (KsTrainer *t, const KsFeed *feeds, gsize n_feeds, KsExpr *metric,
                       gsize rows, double *sum, GError **error)
{
  gsize batch = t->batch;
  double all, copies;

  g_return_val_if_fail (rows > 0 && rows <= batch, FALSE);
  if (rows == batch)
    {
      if (!ks_trainer_metric (t, feeds, n_feeds, metric, &all, error))
        return FALSE;
      *sum = all * (double) batch;
      return TRUE;
    }
  /* The rows past `rows` become copies of row 0, then every row does: the first run
   * scores the rows plus batch - rows copies, the second the copies alone. */
  g_autofree KsFeed *padded = g_new (KsFeed, n_feeds);
  g_autoptr (GPtrArray) buffers = g_ptr_array_new_with_free_func (g_free);
  for (gsize f = 0; f < n_feeds; f++)
    {
      if (feeds[f].nbytes % batch != 0)
        return ks_invalid (error, "feed '%s' holds %" G_GSIZE_FORMAT " bytes, not a whole "
                           "number of the batch's %" G_GSIZE_FORMAT " rows", feeds[f].name,
                           feeds[f].nbytes, batch);
      gsize row = feeds[f].nbytes / batch;
      guint8 *b = g_malloc (feeds[f].nbytes);
      memcpy (b, feeds[f].data, rows * row);
      for (gsize r = rows; r < batch; r++)
        memcpy (b + r * row, feeds[f].data, row);
      g_ptr_array_add (buffers, b);
      padded[f] = (KsFeed) { feeds[f].name, b, feeds[f].nbytes };
    }
  if (!ks_trainer_metric (t, padded, n_feeds, metric, &all, error))
    return FALSE;
  for (gsize f = 0; f < n_feeds; f++)
    {
      guint8 *b = g_ptr_array_index (buffers, f);
      gsize row = feeds[f].nbytes / batch;
      for (gsize r = 1; r < rows; r++)
        memcpy (b + r * row, b, row);
    }
  if (!ks_trainer_metric (t, padded, n_feeds, metric, &copies, error))
    return FALSE;
  *sum = all * (double) batch - copies * (double) (batch - rows);
  return TRUE;
}

const KsLayerDesc *
ks_trainer_layers (const KsTrainer *t, gsize *n, const KsLayerDesc **loss)
{
  *n = t->n_layers;
  if (loss != NULL)
    *loss = t->loss_layer;
  return t->layers;
}

gboolean
ks_trainer_describe (KsTrainer *t, GError **error)
{
  t->describe_only = TRUE;
  if ((t->compute == NULL
       && (t->compute = ks_compute_new (t->registry, t->config, NULL, error)) == NULL)
      || !t->task->build (t, error))
    return FALSE;
  return t->layers != NULL || !t->pipelined || refuse_unlayered (t, error);
}

void
ks_trainer_add_task_schema (KsConfig *config, const KsTrainTask *task)
{
  KsTrainTask copy; /* a table of an older KsTrainTask has no schema slot */
  memset (&copy, 0, sizeof copy);
  memcpy (&copy, task, MIN (task->size, sizeof copy));
  for (gsize i = 0; copy.schema != NULL && i < copy.n_schema; i++)
    if (!ks_config_lookup (config, copy.schema[i].group, copy.schema[i].key, NULL, NULL, NULL))
      ks_config_add_schema (config, copy.schema[i].group, &copy.schema[i], 1);
}
