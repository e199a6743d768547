/* ksdist train with [pipeline]: a task describes its model as a layer list; this file
 * builds it on one model, or cuts it into stages (one worker each) and runs the
 * pipeline's steps and evaluations. */
#include "train.h"

#include <math.h>
#include <string.h>

gboolean
ks_train_pipelined (const KsConfig *c)
{
  return ks_config_get_int (c, "pipeline", "stages") > 1
         || ks_config_get_int (c, "pipeline", "virtual_stages") > 1
         || ks_config_get_int (c, "pipeline", "micro_batches") > 1;
}

gboolean
ks_train_pipeline_check (Trainer *t, GError **error)
{
  const KsConfig *c = t->config;
  gint64 m = ks_config_get_int (c, "pipeline", "micro_batches");
  static const char *const refused[][2] = { { "train", "export_dir" } };

  gint64 stages = ks_config_get_int (c, "pipeline", "stages");
  if (stages > 1 && t->comm == NULL)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[pipeline] stages = %" G_GINT64_FORMAT " needs one worker process per "
                   "stage: run `ksdist launch -n %" G_GINT64_FORMAT " CONFIG`", stages, stages);
      return FALSE;
    }
  if (t->batch % m != 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[pipeline] micro_batches = %" G_GINT64_FORMAT " does not divide [train] "
                   "batch = %" G_GSIZE_FORMAT ": every micro-batch has the same rows",
                   m, t->batch);
      return FALSE;
    }
  for (guint i = 0; i < G_N_ELEMENTS (refused); i++)
    if (*ks_config_get_string (c, refused[i][0], refused[i][1]) != '\0')
      {
        g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                     "[%s] %s: a pipelined run (see [pipeline]) cannot export its stages "
                     "as one inference model yet; leave it empty or train without [pipeline]",
                     refused[i][0], refused[i][1]);
        return FALSE;
      }
  KsScheduleKind kind;
  g_autoptr (GError) local = NULL;
  g_autoptr (KsSchedule) schedule = NULL;
  ks_schedule_kind_from_name (ks_config_get_string (c, "pipeline", "schedule"), &kind);
  if ((schedule = ks_schedule_new (kind, stages, ks_config_get_int (c, "pipeline",
                                                                    "virtual_stages"),
                                   m, &local)) == NULL)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE, "[pipeline] %s",
                   local->message);
      return FALSE;
    }
  return TRUE;
}

gsize
ks_train_rows (const Trainer *t)
{
  return t->batch / (gsize) ks_config_get_int (t->config, "pipeline", "micro_batches");
}

enum { PROFILE_STEPS = 3 };

/* Each layer's cost for seg_method cost: measured by the first worker, told to the rest. */
static gboolean
measure_costs (Trainer *t, KsLayerInfo *info, GError **error)
{
  g_autofree double *seconds = g_new0 (double, t->n_layers);
  double total = 0;
  gboolean first = t->comm == NULL || ks_comm_rank (t->comm) == 0;

  if (first
      && !ks_layers_profile (t->compute, t->layers, t->n_layers, t->loss_layer, PROFILE_STEPS,
                             seconds, error))
    {
      g_prefix_error (error, "seg_method cost: profiling the layers: ");
      return FALSE;
    }
  if (t->comm != NULL
      && !ks_comm_broadcast (t->comm, seconds, t->n_layers, KS_DTYPE_FLOAT64, 0, error))
    return FALSE;
  for (gsize i = 0; i < t->n_layers; i++)
    total += info[i].cost = seconds[i];
  if (first)
    g_message ("seg_method cost: %" G_GSIZE_FORMAT " layers take %.2f ms per micro-batch "
               "(forward and backward, mean of %d steps)", t->n_layers, 1e3 * total,
               PROFILE_STEPS);
  return TRUE;
}

gboolean
ks_train_segment (Trainer *t, KsLayerInfo *info, gsize *boundaries, gboolean *measured,
                  GError **error)
{
  const KsConfig *c = t->config;
  const char *method = ks_config_get_string (c, "pipeline", "seg_method");
  gsize parts = ks_config_get_int (c, "pipeline", "stages")
                * ks_config_get_int (c, "pipeline", "virtual_stages");
  g_autoptr (KsSegmenter) segmenter = NULL;

  *measured = strcmp (method, "cost") == 0;
  if ((segmenter = ks_segmenter_new (t->registry, c, method, error)) == NULL
      || !ks_layers_info (t->layers, t->n_layers, info, error)
      || (*measured && !measure_costs (t, info, error))
      || !ks_segmenter_segment (segmenter, info, t->n_layers, parts, boundaries, error))
    {
      g_prefix_error (error, "[pipeline] ");
      return FALSE;
    }
  return TRUE;
}

/* This stage's part of the layer list, cut by [pipeline] seg_method. */
static gboolean
build_stage (Trainer *t, const KsLayerDesc *layers, gsize n, const KsLayerDesc *loss,
             const KsLayerDesc *metric, GError **error)
{
  gboolean measured;
  const KsConfig *c = t->config;
  KsPipelineShape shape = {
    ks_config_get_int (c, "pipeline", "stages"), ks_config_get_int (c, "pipeline", "virtual_stages"),
    ks_config_get_int (c, "pipeline", "micro_batches"), 0, NULL,
    ks_config_get_int (c, "pipeline", "recompute_interval"),
  };
  g_autofree gsize *boundaries = g_new (gsize, shape.stages * shape.virtual_stages + 1);
  g_autofree KsLayerInfo *info = g_new (KsLayerInfo, n);

  ks_schedule_kind_from_name (ks_config_get_string (c, "pipeline", "schedule"), &shape.schedule);
  if (!ks_train_segment (t, info, boundaries, &measured, error))
    return FALSE;
  shape.boundaries = boundaries;
  if ((t->pipeline = ks_pipeline_new (t->compute, t->pipe_comm ? t->pipe_comm : t->comm,
                                      t->stage, &shape, layers, n, loss, metric, error))
      == NULL)
    return FALSE;
  ks_pipeline_set_data_parallel (t->pipeline, t->data_comm);
  /* clipped by the norm over all stages; the optimizer (made after) would clip each
   * stage by its own norm, so its clip_norm is turned off */
  double clip_norm = ks_config_get_double (c, "optim", "clip_norm");
  const char *as_written = NULL;
  ks_pipeline_set_clip_norm (t->pipeline, clip_norm);
  ks_config_lookup (c, "optim", "clip_norm", &as_written, NULL, NULL);
  t->clip_norm_setting = g_strdup (as_written); /* what checkpoints record */
  if (clip_norm > 0 && !ks_config_set_override (t->config, "optim.clip_norm=0", error))
    return FALSE;
  if (!ks_pipeline_init (t->pipeline, error))
    return FALSE;
  t->model = ks_pipeline_model (t->pipeline);
  return TRUE;
}

gboolean
ks_train_build_layers (Trainer *t, const KsLayerDesc *layers, gsize n, const KsLayerDesc *loss,
                       const KsLayerDesc *metric, KsExpr **metric_out, GError **error)
{
  KsExpr *logits;

  *metric_out = NULL;
  t->layers = layers;
  t->n_layers = n;
  t->loss_layer = loss;
  if (t->describe_only)
    return TRUE;
  if (ks_train_pipelined (t->config))
    return build_stage (t, layers, n, loss, metric, error);
  t->model = ks_model_new (t->compute);
  if (!ks_layers_build (t->model, layers, n, &logits, error)
      || (t->loss = loss->build (t->model, logits, loss->args, error)) == NULL
      || (metric->build != NULL
          && (*metric_out = metric->build (t->model, logits, metric->args, error)) == NULL))
    return FALSE;
  t->logits = logits;
  return ks_model_init (t->model, error);
}

gboolean
ks_train_metric (Trainer *t, const KsFeed *feeds, gsize n_feeds, KsExpr *metric, double *value,
                 GError **error)
{
  float v;
  if (t->pipeline != NULL)
    return ks_pipeline_evaluate (t->pipeline, feeds, n_feeds, value, error);
  if (!ks_model_run (t->model, feeds, n_feeds, &metric, 1, error)
      || isnan (v = ks_train_scalar (metric, error)))
    return FALSE;
  *value = v;
  return TRUE;
}

gboolean
ks_train_has_layers (Trainer *t, GError **error)
{
  if (t->layers != NULL || !(t->describe_only || ks_train_pipelined (t->config)))
    return TRUE;
  g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
               "[pipeline]: the %s model is not described as a layer list yet, so it cannot "
               "be cut into stages; use [model] type = mlp, or train it without [pipeline]",
               ks_config_get_string (t->config, "model", "type"));
  return FALSE;
}
