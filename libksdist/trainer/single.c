/* The executor of one model: the optimizer's step (wrapped by the mode's algorithm) on
 * the task's feeds, and checkpoints of the whole model by worker 0. */
#include "trainer-private.h"

#include <math.h>

static gboolean
single_prepare (KsTrainer *t, GError **error)
{
  return ks_trainer_make_optimizer (t, error) && ks_trainer_dist_wrap (t, error)
         && ks_optimizer_minimize (t->optimizer, t->model, t->loss, NULL, 0, NULL, error);
}

static gboolean
single_update (KsTrainer *t, GError **error)
{
  return ks_optimizer_step (t->optimizer, t->feeds, t->n_feeds, error);
}

static gboolean
single_step (KsTrainer *t, gint64 step, GError **error)
{
  return ks_trainer_fed_step (t, step, single_update, error);
}

/* The loss of the step just taken (as computed before its update). */
static gboolean
single_loss (KsTrainer *t, double *loss, GError **error)
{
  const KsTensor *value = ks_expr_last_value (t->loss);
  float v;

  if (value == NULL)
    return g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                        "no step has run yet"), FALSE;
  if (!ks_tensor_to_host (value, &v, sizeof v, error))
    return FALSE;
  *loss = v;
  return TRUE;
}

static gboolean
single_writes (const KsTrainer *t)
{
  return t->rank == 0;
}

static gboolean
single_save (KsTrainer *t, const char *dir, gint64 step, GHashTable *meta, guint keep,
             GError **error)
{
  return ks_checkpoint_save (dir, step, t->model, t->optimizer, meta, keep, error);
}

static gboolean
single_load (KsTrainer *t, const char *checkpoint, gint64 *step, GHashTable **meta,
             GError **error)
{
  return ks_checkpoint_load (checkpoint, t->model, t->optimizer, step, meta, error);
}

static void
single_begin (KsTrainer *t)
{
  if (*ks_config_get_string (t->config, "trace", "path") != '\0')
    g_warning ("[trace] path: only a pipelined run (see [pipeline]) writes a trace");
  if (t->world > 1)
    g_message ("worker %d of %d (%s mode, %s by %s), %" G_GSIZE_FORMAT " rows per step each",
               t->rank, t->world,
               t->algorithm != NULL ? ks_algorithm_mode (t->algorithm)
                                  : ks_config_get_string (t->config, "job", "mode"),
               ks_comm_name (t->comm), t->comm_why, t->batch);
}

const KsExecutor ks_executor_single = {
  .prepare = single_prepare, .step = single_step, .loss = single_loss,
  .writes = single_writes, .save = single_save, .load = single_load, .begin = single_begin,
};
