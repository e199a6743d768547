/* The executor of a task that owns its step (KsTrainTask.step, as Reptile's): no
 * optimizer, mixed precision or pipeline of the trainer's; the loss printed is the mean
 * of the task's steps since the last report, and the rate counts steps. */
#include "trainer-private.h"

typedef struct {
  double loss_sum; /* the task's losses since the last report */
  gint64 loss_steps;
} OwnState;

static OwnState *
own_state (KsTrainer *t)
{
  if (t->exec_state == NULL)
    t->exec_state = g_new0 (OwnState, 1);
  return t->exec_state;
}

static gboolean
own_prepare (KsTrainer *t, GError **error)
{
  own_state (t);
  return TRUE; /* the task steps its own model */
}

static gboolean
own_step (KsTrainer *t, gint64 step, GError **error)
{
  double loss = 0;
  if (!t->task->step (t, step, &loss, error))
    return FALSE;
  own_state (t)->loss_sum += loss;
  own_state (t)->loss_steps++;
  return TRUE;
}

static gboolean
own_loss (KsTrainer *t, double *loss, GError **error)
{
  OwnState *s = own_state (t);
  if (s->loss_steps == 0)
    return g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                        "no step has run yet"), FALSE;
  *loss = s->loss_sum / s->loss_steps;
  s->loss_sum = 0;
  s->loss_steps = 0;
  return TRUE;
}

/* checkpoints as one model's: worker 0 writes the model (and no optimizer) */
static gboolean
own_writes (const KsTrainer *t)
{
  return ks_executor_single.writes (t);
}

static gboolean
own_save (KsTrainer *t, const char *dir, gint64 step, GHashTable *meta, guint keep,
          GError **error)
{
  return ks_executor_single.save (t, dir, step, meta, keep, error);
}

static gboolean
own_load (KsTrainer *t, const char *checkpoint, gint64 *step, GHashTable **meta,
          GError **error)
{
  return ks_executor_single.load (t, checkpoint, step, meta, error);
}

static void
own_begin (KsTrainer *t)
{
  if (t->world > 1)
    g_message ("worker %d of %d (%s by %s), %s", t->rank, t->world, ks_comm_name (t->comm),
               t->comm_why, "the task's own steps");
}

/* the task averages through comm itself: no algorithm */
static gboolean
own_connect (KsTrainer *t, GError **error)
{
  return TRUE;
}

static void
own_clear (KsTrainer *t)
{
  g_clear_pointer (&t->exec_state, g_free);
}

const KsExecutor ks_executor_own = {
  .prepare = own_prepare, .step = own_step, .loss = own_loss, .writes = own_writes,
  .save = own_save, .load = own_load, .begin = own_begin, .task_steps = TRUE,
  .connect = own_connect, .clear = own_clear,
};
