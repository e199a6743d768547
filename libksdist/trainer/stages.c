/* The pipeline executor: a task's layer list cut by [pipeline] seg_method into stages
 * (one worker each), this worker's stage built on the pipeline, and at the end each
 * stage's idle share, peak memory and the trace. */
#include "trainer-private.h"

#include <string.h>
#include <sys/resource.h>

gboolean
ks_trainer_pipeline_check (const KsConfig *c, GError **error)
{
  gint64 m = ks_config_get_int (c, "pipeline", "micro_batches");
  gsize batch = ks_config_get_int (c, "train", "batch");
  static const char *const refused[][2] = { { "train", "export_dir" } };

  gint64 stages = ks_config_get_int (c, "pipeline", "stages");
  if (batch % m != 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[pipeline] micro_batches = %" G_GINT64_FORMAT " does not divide [train] "
                   "batch = %" G_GSIZE_FORMAT ": every micro-batch has the same rows",
                   m, batch);
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

/* The executor's state (KsTrainer.exec_state): the pipeline, which owns the model; with
 * data-parallel replicas, the pipeline's and this stage's groups of the communicator. */
typedef struct {
  KsPipeline *pipeline;
  KsComm *pipe_comm, *data_comm;
  double loss;                 /* of the last step */
  double warm_busy, warm_wall; /* the pipeline's timing after the first step */
} Stages;

static Stages *
stages_of (KsTrainer *t)
{
  if (t->exec_state == NULL)
    t->exec_state = g_new0 (Stages, 1);
  return t->exec_state;
}

enum { PROFILE_STEPS = 3 };

/* Each layer's cost for seg_method cost: measured by the first worker, told to the rest. */
static gboolean
measure_costs (KsTrainer *t, KsLayerInfo *info, GError **error)
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
ks_trainer_segment (KsTrainer *t, KsLayerInfo *info, gsize *boundaries, gboolean *measured,
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

/* the stages talk through the pipeline, not an algorithm; replicas through their
 * stage's data-parallel group */
static gboolean
pipeline_connect (KsTrainer *t, GError **error)
{
  Stages *s = stages_of (t);
  return t->world == 1
         || ks_pipeline_groups (t->comm, ks_config_get_int (t->config, "pipeline", "stages"),
                                &s->pipe_comm, &s->data_comm, error);
}

static gboolean
pipeline_build (KsTrainer *t, const KsLayerDesc *layers, gsize n, const KsLayerDesc *loss,
                const KsLayerDesc *metric, GError **error)
{
  Stages *s = stages_of (t);
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
  if (!ks_trainer_segment (t, info, boundaries, &measured, error))
    return FALSE;
  shape.boundaries = boundaries;
  if ((s->pipeline = ks_pipeline_new (t->compute, s->pipe_comm ? s->pipe_comm : t->comm,
                                      t->stage, &shape, layers, n, loss, metric, error))
      == NULL)
    return FALSE;
  ks_pipeline_set_data_parallel (s->pipeline, s->data_comm);
  ks_pipeline_set_overlap (s->pipeline, ks_config_get_bool (c, "pipeline", "overlap"));
  /* clipped by the norm over all stages; the optimizer (made after) would clip each
   * stage by its own norm, so its clip_norm is turned off */
  double clip_norm = ks_config_get_double (c, "optim", "clip_norm");
  ks_pipeline_set_clip_norm (s->pipeline, clip_norm);
  if (clip_norm > 0 && !ks_trainer_override (t, "optim", "clip_norm", "0", error))
    return FALSE;
  if (!ks_pipeline_init (s->pipeline, error))
    return FALSE;
  t->model = ks_pipeline_model (s->pipeline);
  return TRUE;
}

/* The trace of every replica's pipeline in one file (a process per replica): each
 * replica's stage 0 gathers its stages, replica 0's gathers the replicas and writes it. */
static gboolean
write_trace (KsTrainer *t, const char *path, GError **error)
{
  g_autoptr (GString) mine = NULL;
  gint64 len;
  KsComm *data_comm = stages_of (t)->data_comm;

  if (!ks_pipeline_trace_events (stages_of (t)->pipeline, t->rank, &mine, error))
    return FALSE;
  if (mine == NULL)
    return TRUE; /* a later stage: sent to its stage 0 */
  if (t->rank > 0)
    return (len = mine->len, ks_comm_send (data_comm, &len, sizeof len, 0, 1, error))
           && ks_comm_send (data_comm, mine->str, len, 0, 2, error);
  for (int r = 1; r < t->world; r++)
    {
      if (!ks_comm_recv (data_comm, &len, sizeof len, r, 1, error))
        return FALSE;
      if (len < 0 || len > (1 << 30))
        return g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                            "replica %d sent a trace of %" G_GINT64_FORMAT " bytes", r, len),
               FALSE;
      gsize at = mine->len;
      g_string_set_size (mine, at + len);
      if (!ks_comm_recv (data_comm, mine->str + at, len, r, 2, error))
        return FALSE;
    }
  g_string_overwrite (mine, 0, "["); /* in place of the first event's leading comma */
  g_string_erase (mine, 1, 1);
  g_string_append (mine, "\n]\n");
  return g_file_set_contents (path, mine->str, mine->len, error);
}

/* Each stage's idle share after the first step and its peak memory, and the trace. */
static gboolean
pipeline_finish (KsTrainer *t, GError **error)
{
  Stages *st = stages_of (t);
  const KsSchedule *s = ks_pipeline_schedule (st->pipeline);
  double busy, wall;
  struct rusage usage;

  const char *trace = ks_config_get_string (t->config, "trace", "path");

  ks_pipeline_timing (st->pipeline, &busy, &wall);
  busy -= st->warm_busy;
  wall -= st->warm_wall;
  if (wall > 0)
    g_message ("stage %d: computing %.3f s of %.3f s in steps (idle %.2f%%; theory for equal "
               "stages %.2f%%)", t->stage, busy, wall, 100 * (1 - busy / wall),
               100 * ks_schedule_theoretical_bubble (s->stages, s->virtual_stages,
                                                     s->micro_batches));
  /* what recompute saves shows here (Linux counts ru_maxrss in KiB) */
  if (getrusage (RUSAGE_SELF, &usage) == 0)
    g_message ("stage %d: peak resident memory %.1f MiB", t->stage, usage.ru_maxrss / 1024.0);
  if (*trace == '\0')
    return TRUE;
  if (!write_trace (t, trace, error))
    return FALSE;
  if (t->stage == 0 && t->rank == 0)
    g_message ("trace of %d replica%s x %d stage%s written to %s", t->world,
               t->world == 1 ? "" : "s", s->stages, s->stages == 1 ? "" : "s", trace);
  return TRUE;
}


/* The pipeline builds its optimizer's steps itself; a stage's replicas average through
 * its data-parallel group, not an algorithm. */
static gboolean
pipeline_prepare (KsTrainer *t, GError **error)
{
  return ks_trainer_make_optimizer (t, error);
}

static gboolean
pipeline_update (KsTrainer *t, GError **error)
{
  return ks_pipeline_step (stages_of (t)->pipeline, t->optimizer, t->feeds, t->n_feeds,
                           &stages_of (t)->loss, error);
}

static gboolean
pipeline_step (KsTrainer *t, gint64 step, GError **error)
{
  return ks_trainer_fed_step (t, step, pipeline_update, error);
}

static gboolean
pipeline_loss (KsTrainer *t, double *loss, GError **error)
{
  *loss = (float) stages_of (t)->loss; /* as one model's, a float */
  return TRUE;
}

/* every stage of the first replica writes its part */
static gboolean
pipeline_writes (const KsTrainer *t)
{
  return t->rank == 0;
}

static gboolean
pipeline_save (KsTrainer *t, const char *dir, gint64 step, GHashTable *meta, guint keep,
               GError **error)
{
  return ks_pipeline_save_checkpoint (stages_of (t)->pipeline, t->optimizer, dir, step, meta, keep, error);
}

static gboolean
pipeline_load (KsTrainer *t, const char *checkpoint, gint64 *step, GHashTable **meta,
               GError **error)
{
  return ks_pipeline_load_checkpoint (stages_of (t)->pipeline, t->optimizer, checkpoint, step, meta, error);
}

static void
pipeline_begin (KsTrainer *t)
{
  const KsSchedule *s = ks_pipeline_schedule (stages_of (t)->pipeline);
  g_autofree char *through = t->comm != NULL ? g_strdup_printf (", through %s by %s",
                                                                ks_comm_name (t->comm),
                                                                t->comm_why)
                                             : g_strdup ("");
  g_message ("stage %d of %d (%s schedule, %d virtual stage%s, %d micro-batch%s of %"
             G_GSIZE_FORMAT " rows)%s", t->stage, s->stages, ks_schedule_kind_name (s->kind),
             s->virtual_stages, s->virtual_stages == 1 ? "" : "s", s->micro_batches,
             s->micro_batches == 1 ? "" : "es", ks_trainer_rows (t), through);
  if (t->world > 1)
    g_message ("replica %d of %d (each stage averages its gradients over the replicas), %"
               G_GSIZE_FORMAT " rows per step each", t->rank, t->world, t->batch);
  if (*ks_config_get_string (t->config, "trace", "path") != '\0')
    ks_pipeline_record (stages_of (t)->pipeline, TRUE);
}

static void
pipeline_first_step (KsTrainer *t)
{
  ks_pipeline_timing (stages_of (t)->pipeline, &stages_of (t)->warm_busy,
                     &stages_of (t)->warm_wall);
}

static gboolean
pipeline_metric (KsTrainer *t, const KsFeed *feeds, gsize n_feeds, double *value,
                 GError **error)
{
  return ks_pipeline_evaluate (stages_of (t)->pipeline, feeds, n_feeds, value, error);
}

static gboolean
pipeline_metric_values (KsTrainer *t, const KsFeed *feeds, gsize n_feeds, float *values,
                        gsize n, GError **error)
{
  return ks_pipeline_evaluate_values (stages_of (t)->pipeline, feeds, n_feeds, values, n,
                                      error);
}

static void
pipeline_clear (KsTrainer *t)
{
  Stages *s = t->exec_state;
  if (s == NULL)
    return;
  if (s->pipeline != NULL)
    {
      ks_pipeline_free (s->pipeline); /* with its model */
      t->model = NULL;
    }
  ks_comm_free (s->pipe_comm);
  ks_comm_free (s->data_comm);
  g_free (s);
  t->exec_state = NULL;
}

const KsExecutor ks_executor_pipeline = {
  .prepare = pipeline_prepare, .step = pipeline_step, .loss = pipeline_loss,
  .writes = pipeline_writes, .save = pipeline_save, .load = pipeline_load,
  .begin = pipeline_begin, .first_step = pipeline_first_step, .finish = pipeline_finish,
  .connect = pipeline_connect, .build = pipeline_build, .metric = pipeline_metric,
  .metric_values = pipeline_metric_values, .clear = pipeline_clear,
};
