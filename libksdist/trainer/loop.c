/* ks_trainer_run: the loop. It meets the job's other processes, has the task build its
 * model, resumes, and runs [train] steps, each the executor's (single.c: the task's batch
 * and the optimizer's step, which the mode's algorithm wrapped; stages.c: the pipeline's;
 * own.c: the task's own step);
 * checkpoints and held-out evaluations, told to the observers (observe.c: the printed
 * lines, [log] metrics); at the end the evaluation and the export.
 * SIGTERM or SIGINT stops it at a step boundary the workers agree on, saved (stop.c). */
#include "trainer-private.h"
#include <ksdist/away.h>

#include <math.h>
#include <string.h>

/* After the first evaluation: a task that says it honours [train] eval_rows (the plan
 * lets it run with the key set) but whose evaluate never asked ks_trainer_eval_cap scored
 * every held-out row while the line would say the cap was applied. */
static gboolean
check_eval_cap (KsTrainer *t, GError **error)
{
  gint64 rows = ks_config_get_int (t->config, "train", "eval_rows");
  if (t->eval_cap_checked)
    return TRUE;
  t->eval_cap_checked = TRUE;
  if (rows == 0 || !t->task->honours_eval_rows || t->eval_cap_asked)
    return TRUE;
  g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
               "[train] eval_rows = %" G_GINT64_FORMAT ": the task '%s' says it honours it "
               "(honours_eval_rows in its KsTrainTask) but its evaluate never asked "
               "ks_trainer_eval_cap, so it scored every held-out row; have evaluate score at "
               "most ks_trainer_eval_cap (t) rows, or remove [train] eval_rows", rows,
               t->task->name != NULL ? t->task->name : "(unnamed)");
  return FALSE;
}

/* The held-out metric, in evaluation mode (dropout passes through). */
static gboolean
evaluate (KsTrainer *t, gboolean final, double *value, GError **error)
{
  gboolean ok;
  ks_model_set_training (t->model, FALSE);
  t->eval_total = 0;
  ok = t->task->evaluate (t, final, value, &t->eval_samples, error);
  ks_model_set_training (t->model, TRUE);
  if (ok && !check_eval_cap (t, error))
    return FALSE;
  if (ok && !isfinite (*value))
    {
      g_autofree char *what = g_strdup_printf ("the held-out %s", t->task->metric);
      return ks_trainer_not_finite (error, what, *value);
    }
  return ok;
}

gboolean
ks_trainer_fed_step (KsTrainer *t, gint64 step, gboolean (*update) (KsTrainer *t, GError **error),
                     GError **error)
{
  t->task->batch (t, step);
  return (t->task->prepare == NULL || t->task->prepare (t, step, error))
         && update (t, error)
         && (t->task->finish == NULL || t->task->finish (t, step, error));
}

gboolean
ks_trainer_make_optimizer (KsTrainer *t, GError **error)
{
  const KsConfig *c = t->config;
  return ks_trainer_amp (t, error)
         && (t->optimizer = ks_optimizer_new (t->registry, c,
                                              ks_config_get_string (c, "train", "optimizer"),
                                              error))
                != NULL
         && ks_optimizer_check_plan (t->optimizer, c, error);
}

/* A server's life: its shard of the parameters (from the newest checkpoint of ckpt_dir
 * when resuming), then serving until every worker has stopped. */
static gboolean
serve (KsTrainer *t, const char *ckpt_dir, GError **error)
{
  g_autofree char *latest = ckpt_dir != NULL ? ks_checkpoint_latest (ckpt_dir) : NULL;
  gboolean any = latest != NULL;
  g_autoptr (GDir) d = ckpt_dir != NULL && !any ? g_dir_open (ckpt_dir, 0, NULL) : NULL;
  const char *name;

  while (d != NULL && !any && (name = g_dir_read_name (d)) != NULL)
    any = g_str_has_prefix (name, "checkpoint-");
  if (!ks_algorithm_init_server (t->algorithm, any ? ckpt_dir : NULL, error)
      || !ks_algorithm_run_server (t->algorithm, error))
    return FALSE;
  g_message ("server %d: every worker has stopped", ks_role_maker_server_index (t->role));
  return TRUE;
}

/* Meets the job, builds the model, the optimizer and mixed precision. */
static gboolean
build (KsTrainer *t, GError **error)
{
  const KsConfig *c = t->config;

  if ((t->compute = ks_compute_new (t->registry, c, NULL, error)) == NULL
      || (t->comm != NULL && !ks_comm_use_compute (t->comm, t->compute, error))
      || !t->task->build (t, error))
    return FALSE;
  if (t->model == NULL)
    return g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                        "the task %s built no model: its build must call "
                        "ks_trainer_build_layers or ks_trainer_set_model",
                        ks_trainer_task_describe (t)), FALSE;
  return ks_trainer_init_from (t, error) && t->exec->prepare (t, error);
}

/* The start lines: this worker's place in the job and what trains. */
static void
announce (KsTrainer *t, gboolean leader)
{
  g_autofree char *device = ks_compute_describe (t->compute);
  g_autofree char *amp = ks_trainer_amp_describe (t);

  t->exec->begin (t);
  if (leader)
    g_message ("training %s with %s on %s%s", ks_trainer_task_describe (t),
               t->optimizer != NULL ? ks_optimizer_name (t->optimizer) : "its own steps",
               device, amp);
}

static gboolean
run (KsTrainer *t, GError **error)
{
  const KsConfig *c = t->config;
  gint64 steps = ks_config_get_int (c, "train", "steps");
  gint64 log_every = ks_config_get_int (c, "train", "log_every");
  gint64 eval_every = ks_config_get_int (c, "train", "eval_every");
  const char *metrics = ks_config_get_string (c, "log", "metrics");
  const char *ckpt_dir = ks_config_get_string (c, "train", "checkpoint_dir");
  gint64 ckpt_every = ks_config_get_int (c, "train", "checkpoint_every");
  guint keep = ks_config_get_int (c, "train", "keep");
  gboolean resuming = *ckpt_dir != '\0' && ks_config_get_bool (c, "train", "resume");
  const char *export_dir = ks_config_get_string (c, "train", "export_dir");
  gint64 first = 1;
  double eval = NAN, loss = NAN;
  gboolean evaluated = FALSE, leader;

  if (!ks_trainer_dist_setup (t, error))
    return FALSE;
  leader = t->rank == 0 && t->stage == 0;
  /* one process per job (whichever processes write) holds the directory, from before
   * anything is built until the job ends */
  if (leader && *ckpt_dir != '\0' && !ks_trainer_own_checkpoints (t, ckpt_dir, error))
    return FALSE;
  if (leader && *metrics != '\0' && !ks_trainer_metrics_open (t, metrics, resuming, error))
    return FALSE;
  if (!build (t, error))
    return FALSE;
  if (t->role != NULL && ks_role_maker_is_server (t->role))
    return ks_trainer_signals_stepping (), serve (t, resuming ? ckpt_dir : NULL, error) && ks_trainer_server_stopped (t, error);
  if ((resuming && !ks_trainer_resume (t, ckpt_dir, &first, error))
      || !ks_trainer_mode_begin (t, error))
    return FALSE;
  announce (t, leader);

  gint64 window_start = g_get_monotonic_time (), run_start = window_start, window_steps = 0;
  gboolean zero_told = FALSE;
  /* resumed at the last step: no step runs, and the evaluation and export that follow
   * must not be cut short as start-up is (a signal stops at the end instead) */
  if (first > steps)
    ks_trainer_signals_stepping ();
  for (gint64 step = first; step <= steps; step++)
    {
      double lr = t->optimizer != NULL ? ks_optimizer_learning_rate (t->optimizer) : NAN;
      if (lr < 0)
        lr = NAN; /* an optimizer that does not say its rate: none printed */
      if (step == first)
        ks_trainer_signals_stepping ();
      if (!t->exec->step (t, step, error))
        return g_prefix_error (error, "step %" G_GINT64_FORMAT ": ", step), FALSE;
      window_steps++;
      if (step == first && t->exec->first_step != NULL)
        t->exec->first_step (t);
      /* SIGTERM or SIGINT to any worker: every worker saves the step where they agree on
       * it and stops */
      int stop = 0;
      if (!ks_trainer_stop_agreed (t, step, &stop, error))
        return g_prefix_error (error, "step %" G_GINT64_FORMAT ": ", step), FALSE;
      /* with servers every worker takes part (the algorithm writes), else the executor
       * says who writes */
      gboolean save = (t->algorithm != NULL || t->exec->writes (t)) && *ckpt_dir != '\0'
                      && ((ckpt_every > 0 && step % ckpt_every == 0) || step == steps || stop != 0);
      if (save && !ks_trainer_save (t, ckpt_dir, step, keep, error))
        return g_prefix_error (error, "step %" G_GINT64_FORMAT ": ", step), FALSE;
      if (save)
        ks_trainer_notify_save (t, step, ckpt_dir);
      /* with servers, the workers stop them */
      if (stop != 0)
        return (t->worker_stopped || ks_trainer_mode_end (t, error))
               && ks_trainer_stopped (t, stop, step, ckpt_dir, error);
      /* a held-out evaluation during training ([train] eval_every); the last step's is below */
      double mid_eval;
      gboolean mid = eval_every > 0 && step % eval_every == 0 && step != steps;
      if (mid && !evaluate (t, FALSE, &mid_eval, error))
        return g_prefix_error (error, "step %" G_GINT64_FORMAT ": evaluation: ", step), FALSE;
      gboolean logged = step % log_every == 0 || step == steps;
      if (mid && leader)
        ks_trainer_notify_eval (t, &(KsTrainEval) {
          sizeof (KsTrainEval), step, mid_eval, t->eval_samples, t->eval_total, logged,
          (g_get_monotonic_time () - run_start) / 1e6 });
      if (!logged)
        continue;
      gint64 now = g_get_monotonic_time ();
      double per_step = t->exec->task_steps ? 1 : (double) t->batch * t->world;
      double rate = window_steps * per_step / MAX (1e-6, (now - window_start) / 1e6);
      double eta = (steps - step) * ((now - run_start) / 1e6 / (step - first + 1));
      if (!t->exec->loss (t, &loss, error))
        return g_prefix_error (error, "step %" G_GINT64_FORMAT ": ", step), FALSE;
      if (!ks_trainer_dist_mean (t, &loss, error))
        return g_prefix_error (error, "step %" G_GINT64_FORMAT ": ", step), FALSE;
      if (!isfinite (loss) && !ks_model_loss_scale (t->model, &(KsLossScale) { 0 }))
        return ks_trainer_not_finite (error, "the training loss", loss),
               g_prefix_error (error, "step %" G_GINT64_FORMAT ": ", step), FALSE;
      /* what a wrecked model logs as "loss 0.0000" to the end (a GEO push of 1e30 did) */
      if (loss == 0 && leader && !zero_told)
        {
          zero_told = TRUE;
          g_warning ("step %" G_GINT64_FORMAT ": the training loss is exactly 0: every "
                     "prediction is certain and right, which a sound run rarely reaches (are "
                     "the parameters wrecked, by a huge update or a push that is not "
                     "training's, or do the features hold the labels?); check the held-out "
                     "metric", step);
        }
      gboolean last = step == steps;
      if (last && !ks_trainer_mode_flush (t, error))
        return g_prefix_error (error, "before the evaluation: "), FALSE;
      if (last && !(evaluated = evaluate (t, TRUE, &eval, error)))
        return g_prefix_error (error, "evaluation: "), FALSE;
      if (leader)
        ks_trainer_notify_step (t, &(KsTrainStep) {
          sizeof (KsTrainStep), step, steps, loss, lr, rate, t->exec->task_steps, eta,
          (now - run_start) / 1e6, last ? &eval : mid ? &mid_eval : NULL });
      window_start = now;
      window_steps = 0;
    }
  /* the result; evaluated here when a resumed run had nothing left to do (with servers,
   * before this worker stops) */
  if (!evaluated && !ks_trainer_mode_flush (t, error))
    return g_prefix_error (error, "before the evaluation: "), FALSE;
  if (!evaluated && !evaluate (t, TRUE, &eval, error))
    return g_prefix_error (error, "evaluation: "), FALSE;
  if (!ks_trainer_mode_end (t, error))
    return g_prefix_error (error, "stop_worker: "), FALSE;
  if (t->exec->finish != NULL && !t->exec->finish (t, error))
    return FALSE;
  if (leader && *export_dir != '\0' && !ks_trainer_export (t, export_dir, error))
    return FALSE;
  t->result = eval;
  ks_trainer_notify_end (t, &(KsTrainEnd) { sizeof (KsTrainEnd), eval, t->eval_samples,
                                             t->eval_total });
  return TRUE;
}

/* A failure of this process's own (not a peer's that it found, nor a stop asked by a
 * signal) goes in the store, so that the others name its cause, not only that it ended. */
static void
report_own_failure (KsTrainer *t, const GError *error)
{
  if (t->store == NULL || t->role == NULL || error == NULL
      || error->domain == KS_TRAINER_SIGNAL_ERROR
      /* a server's run_server cancelled by the stop signal */
      || (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED)
          && ks_trainer_stop_signal () != 0)
      || g_error_matches (error, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST)
      || g_error_matches (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT))
    return;
  g_autofree char *who = g_strdup_printf ("rank %d", ks_role_maker_global_rank (t->role));
  ks_store_report_failure (t->store, who, error->message);
}

gboolean
ks_trainer_run (KsTrainer *t, GError **error)
{
  gboolean ok;

  /* SIGTERM and SIGINT ask for a stop at the next step boundary while the run lasts */
  ks_trainer_signals_catch ();
  /* a comm error after this process was itself stopped or starved says so first */
  ks_away_watch_begin ();
  ok = run (t, error);
  if (!ok)
    ks_away_explain (ks_config_get_double (t->config, "comm", "timeout"), error);
  ks_away_watch_end ();
  ks_trainer_signals_restore ();
  if (!ok && error != NULL)
    report_own_failure (t, *error);
  return ok;
}
