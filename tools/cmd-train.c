/* ksdist train: single-process training from a configuration. A task (train-tasks.c)
 * builds the model and fills each step's batch; this file runs the loop: optimizer
 * steps, progress (a line on a terminal, plain lines otherwise), [log] metrics JSONL,
 * checkpoints and resume, and the held-out evaluation at the end. */
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

void
ks_trainer_clear (Trainer *t)
{
  if (t->metrics != NULL)
    fclose (t->metrics);
  if (t->task != NULL && t->task_data != NULL)
    t->task->clear (t);
  ks_optimizer_free (t->optimizer);
  if (t->pipeline != NULL)
    ks_pipeline_free (t->pipeline); /* with its model */
  else
    ks_model_free (t->model);
  ks_train_dist_clear (t); /* a server's algorithm holds tables on the compute */
  ks_compute_free (t->compute);
  g_free (t->clip_norm_setting);
}

/* A scalar tensor's value on the host; NaN when there is none or the copy fails. */
static float
host_scalar (const KsTensor *value, GError **error)
{
  float v = NAN;
  if (value != NULL)
    ks_tensor_to_host (value, &v, sizeof v, error);
  return v;
}

float
ks_train_scalar (KsExpr *e, GError **error)
{
  return host_scalar (ks_expr_value (e, error), error);
}

/* The loss of the step just taken (as computed before its update). */
static float
step_loss (Trainer *t, GError **error)
{
  if (t->pipeline != NULL)
    return t->pipeline_loss;
  const KsTensor *value = ks_expr_last_value (t->loss);
  if (value == NULL)
    g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID, "no step has run yet");
  return host_scalar (value, error);
}

/* A line of the [log] metrics file: the step, the wall time since the run began, then
 * `fields` ("\"loss\": 0.5, ..."), the held-out metric when evaluated. */
static void
metrics_line (Trainer *t, gint64 step, double wall_s, const char *fields, const double *eval)
{
  if (t->metrics == NULL)
    return;
  fprintf (t->metrics, "{\"step\": %" G_GINT64_FORMAT ", \"wall_s\": %.3f%s%s", step, wall_s,
           *fields ? ", " : "", fields);
  if (eval != NULL)
    fprintf (t->metrics, ", \"eval_%s\": %.6g", t->task->metric, *eval);
  fputs ("}\n", t->metrics);
  fflush (t->metrics);
}

static void
report (Trainer *t, gint64 step, gint64 steps, float loss, double lr, double rate, double eta,
        double wall_s, const double *eval)
{
  if (t->tty)
    {
      printf ("\rstep %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT "  loss %.4f  lr %.3g  %.0f "
              "samples/s  ETA %.0fs   ",
              step, steps, loss, lr, rate, eta);
      if (step == steps)
        putchar ('\n');
    }
  else
    printf ("step %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT " loss %.4f lr %.3g samples/s %.0f "
            "eta_s %.0f\n",
            step, steps, loss, lr, rate, eta);
  fflush (stdout);
  g_autofree char *fields = g_strdup_printf ("\"loss\": %.6g, \"lr\": %.6g, \"samples_per_s\": "
                                             "%.1f", loss, lr, rate);
  if (t->tokens_per_row > 0)
    {
      g_autofree char *with_tokens = g_strdup_printf ("%s, \"tokens_per_s\": %.1f", fields,
                                                      rate * t->tokens_per_row);
      g_free (fields);
      fields = g_steal_pointer (&with_tokens);
    }
  g_autofree char *amp = ks_train_amp_fields (t);
  g_autofree char *all = g_strconcat (fields, amp, NULL);
  metrics_line (t, step, wall_s, all, eval);
}


/* The settings a step's result depends on, as "group.key = value" lines, kept in each
 * checkpoint's metadata ("config") so that a resume with other settings is noticed. The
 * step count, logging and checkpointing may change freely. */
static char *
trajectory_config (const Trainer *t)
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
          if (t->clip_norm_setting != NULL && strcmp (groups[g], "optim") == 0
              && strcmp (d->key, "clip_norm") == 0)
            value = t->clip_norm_setting; /* the pipeline clips in the optimizer's stead */
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
static gboolean
save (Trainer *t, const char *dir, gint64 step, guint keep, GError **error)
{
  g_autoptr (GHashTable) meta = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  KsTrainStatus status = { t->task->last_epoch != NULL ? t->task->last_epoch (t, step) : -1,
                           step };

  if (t->task->metadata != NULL)
    t->task->metadata (t, meta);
  g_hash_table_insert (meta, g_strdup ("config"), trajectory_config (t));
  if (t->algorithm != NULL)
    return ks_algorithm_save_check_point (t->algorithm, t->model, t->optimizer, dir, &status,
                                          meta, keep, error);
  g_hash_table_insert (meta, g_strdup ("epoch"), g_strdup_printf ("%" G_GINT64_FORMAT, status.epoch));
  if (t->pipeline != NULL) /* each stage its part */
    return ks_pipeline_save_checkpoint (t->pipeline, t->optimizer, dir, step, meta, keep, error);
  return ks_checkpoint_save (dir, step, t->model, t->optimizer, meta, keep, error);
}

/* Warns about each setting that differs from the checkpoint's: the run goes on, but it
 * will not repeat an uninterrupted one. */
static void
compare_config (Trainer *t, GHashTable *meta, const char *checkpoint)
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
      const char *was = "(not set)";
      for (int j = 0; old_lines[j] != NULL; j++)
        if (g_str_has_prefix (old_lines[j], key) && g_str_has_prefix (old_lines[j] + strlen (key), " = "))
          was = old_lines[j] + strlen (key) + 3;
      if (*(eq + 3) == '\0' && strcmp (was, "(not set)") == 0)
        continue; /* a key newer than the checkpoint, at its default now */
      g_warning ("resuming with %s = %s, but %s was trained with %s: the result will differ "
                 "from an uninterrupted run", key, eq + 3, checkpoint, was);
    }
}

/* Loads the newest checkpoint (with several workers, the one worker 0 finds) when asked
 * to resume; returns the first step to run. */
static gboolean
resume (Trainer *t, const char *dir, gint64 *first, GError **error)
{
  g_autofree char *latest = t->algorithm == NULL ? ks_checkpoint_latest (dir) : NULL;
  g_autoptr (GHashTable) meta = NULL;
  KsTrainStatus status = { -1, 0 };

  gboolean ok = t->algorithm != NULL
                    ? ks_algorithm_load_check_point (t->algorithm, t->model, t->optimizer, dir,
                                                     &status, &meta, error)
                : latest == NULL ? TRUE
                : t->pipeline != NULL
                    ? ks_pipeline_load_checkpoint (t->pipeline, t->optimizer, latest,
                                                   &status.step, &meta, error)
                    : ks_checkpoint_load (latest, t->model, t->optimizer, &status.step, &meta,
                                          error);
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
  g_autofree char *name = g_strdup_printf ("%s/checkpoint-%" G_GINT64_FORMAT, dir, status.step);
  compare_config (t, meta, name);
  const char *epoch = g_hash_table_lookup (meta, "epoch");
  if (epoch != NULL && strcmp (epoch, "-1") != 0)
    g_message ("resumed from %s at step %" G_GINT64_FORMAT " (epoch %s done)", name,
               status.step, epoch);
  else
    g_message ("resumed from %s at step %" G_GINT64_FORMAT, name, status.step);
  return TRUE;
}

/* The held-out metric, in evaluation mode (dropout passes through). */
static gboolean
evaluate (Trainer *t, double *value, GError **error)
{
  gboolean ok;
  ks_model_set_training (t->model, FALSE);
  ok = t->task->evaluate (t, value, &t->eval_samples, error);
  ks_model_set_training (t->model, TRUE);
  return ok;
}

/* The trace of every replica's pipeline in one file (a process per replica): each
 * replica's stage 0 gathers its stages, replica 0's gathers the replicas and writes it. */
static gboolean
write_trace (Trainer *t, const char *path, GError **error)
{
  g_autoptr (GString) mine = NULL;
  gint64 len;

  if (!ks_pipeline_trace_events (t->pipeline, t->rank, &mine, error))
    return FALSE;
  if (mine == NULL)
    return TRUE; /* a later stage: sent to its stage 0 */
  if (t->rank > 0)
    return (len = mine->len, ks_comm_send (t->data_comm, &len, sizeof len, 0, 1, error))
           && ks_comm_send (t->data_comm, mine->str, len, 0, 2, error);
  for (int r = 1; r < t->world; r++)
    {
      if (!ks_comm_recv (t->data_comm, &len, sizeof len, r, 1, error))
        return FALSE;
      if (len < 0 || len > (1 << 30))
        return g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                            "replica %d sent a trace of %" G_GINT64_FORMAT " bytes", r, len),
               FALSE;
      gsize at = mine->len;
      g_string_set_size (mine, at + len);
      if (!ks_comm_recv (t->data_comm, mine->str + at, len, r, 2, error))
        return FALSE;
    }
  g_string_overwrite (mine, 0, "["); /* in place of the first event's leading comma */
  g_string_erase (mine, 1, 1);
  g_string_append (mine, "\n]\n");
  return g_file_set_contents (path, mine->str, mine->len, error);
}

/* Each stage's idle share after the first step and its peak memory, and the trace. */
static gboolean
pipeline_report (Trainer *t, double warm_busy, double warm_wall, const char *trace,
                 GError **error)
{
  const KsSchedule *s = ks_pipeline_schedule (t->pipeline);
  double busy, wall;
  struct rusage usage;

  ks_pipeline_timing (t->pipeline, &busy, &wall);
  busy -= warm_busy;
  wall -= warm_wall;
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
    g_message ("trace of %d replicas x %d stages written to %s", t->world, s->stages, trace);
  return TRUE;
}

/* Whether the job has parameter servers: its workers then init_worker before the first
 * step and stop_worker after the last. */
static gboolean
has_servers (Trainer *t)
{
  return t->role != NULL && t->algorithm != NULL && ks_role_maker_server_num (t->role) > 0;
}

/* Whether `dir` holds a checkpoint-N entry. */
static gboolean
has_checkpoints (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    if (g_str_has_prefix (name, "checkpoint-"))
      return TRUE;
  return FALSE;
}

/* A server's life: its shard of the parameters (from the newest checkpoint of ckpt_dir
 * when resuming), then serving until every worker has stopped. */
static int
serve (Trainer *t, const char *ckpt_dir)
{
  g_autoptr (GError) error = NULL;
  const char *model_dir = ckpt_dir != NULL && has_checkpoints (ckpt_dir) ? ckpt_dir : NULL;

  if (!ks_algorithm_init_server (t->algorithm, model_dir, &error)
      || !ks_algorithm_run_server (t->algorithm, &error))
    {
      ks_cli_error ("%s", error->message);
      return error->domain == KS_CONFIG_ERROR ? KS_EXIT_USAGE : KS_EXIT_RUNTIME;
    }
  g_message ("server %d: every worker has stopped", ks_role_maker_server_index (t->role));
  return KS_EXIT_OK;
}

static int
train (Trainer *t)
{
  const KsConfig *c = t->config;
  g_autoptr (GError) error = NULL;
  gint64 steps = ks_config_get_int (c, "train", "steps");
  gint64 log_every = ks_config_get_int (c, "train", "log_every");
  gint64 eval_every = ks_config_get_int (c, "train", "eval_every");
  const char *metrics = ks_config_get_string (c, "log", "metrics");
  const char *ckpt_dir = ks_config_get_string (c, "train", "checkpoint_dir");
  gint64 ckpt_every = ks_config_get_int (c, "train", "checkpoint_every");
  guint keep = ks_config_get_int (c, "train", "keep");
  gboolean resuming = *ckpt_dir != '\0' && ks_config_get_bool (c, "train", "resume");
  gint64 first = 1;
  double eval;
  gboolean evaluated = FALSE, stopped = FALSE, leader;

  if (strcmp (ks_config_get_string (c, "meta", "algorithm"), "reptile") == 0)
    {
      if (!ks_train_amp_refused (c, "meta-learning does not support mixed precision yet",
                                 &error))
        {
          ks_cli_error ("%s", error->message);
          return KS_EXIT_USAGE;
        }
      return ks_train_meta (t);
    }
  t->batch = ks_config_get_int (c, "train", "batch");
  if ((t->task = ks_train_task (c, &error)) == NULL)
    {
      ks_cli_error ("%s", error->message);
      return KS_EXIT_USAGE;
    }
  if (!ks_train_dist_setup (t, &error)
      || (ks_train_pipelined (c) && !ks_train_pipeline_check (t, &error)))
    {
      ks_cli_error ("%s", error->message);
      return error->domain == KS_CONFIG_ERROR ? KS_EXIT_USAGE : KS_EXIT_RUNTIME;
    }
  leader = t->rank == 0 && t->stage == 0;
  if (leader && *metrics != '\0' && (t->metrics = fopen (metrics, resuming ? "a" : "w")) == NULL)
    {
      ks_cli_error ("[log] metrics = %s: %s", metrics, g_strerror (errno));
      return KS_EXIT_USAGE;
    }
  if ((t->compute = ks_compute_new (t->registry, c, NULL, &error)) == NULL
      || (t->comm != NULL && !ks_comm_use_compute (t->comm, t->compute, &error))
      || !t->task->build (t, &error) || !ks_train_has_layers (t, &error)
      || !ks_train_amp (t, &error)
      || (t->optimizer = ks_optimizer_new (t->registry, c,
                                           ks_config_get_string (c, "train", "optimizer"), &error))
             == NULL
      || (t->pipeline == NULL
          && (!ks_train_dist_wrap (t, &error)
              || !ks_optimizer_minimize (t->optimizer, t->model, t->loss, NULL, 0, NULL,
                                         &error))))
    {
      /* a name in the config that nothing here provides is a configuration error */
      gboolean config_error = error->domain == KS_CONFIG_ERROR
                              || g_error_matches (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_FOUND)
                              || g_error_matches (error, KS_PLUGIN_ERROR,
                                                  KS_PLUGIN_ERROR_UNAVAILABLE);
      ks_cli_error ("%s", error->message);
      return config_error ? KS_EXIT_USAGE : KS_EXIT_RUNTIME;
    }
  if (t->role != NULL && ks_role_maker_is_server (t->role))
    return serve (t, resuming ? ckpt_dir : NULL);
  if ((resuming && !resume (t, ckpt_dir, &first, &error))
      || (has_servers (t) && !ks_algorithm_init_worker (t->algorithm, &error)))
    {
      ks_cli_error ("%s", error->message);
      return KS_EXIT_RUNTIME;
    }
  g_autofree char *device = ks_compute_describe (t->compute);
  if (t->pipeline != NULL)
    {
      const KsSchedule *s = ks_pipeline_schedule (t->pipeline);
      g_autofree char *through = t->comm != NULL ? g_strdup_printf (", through %s by %s",
                                                                    ks_comm_name (t->comm),
                                                                    t->comm_why)
                                                 : g_strdup ("");
      g_message ("stage %d of %d (%s schedule, %d virtual stages, %d micro-batches of %"
                 G_GSIZE_FORMAT " rows)%s", t->stage, s->stages, ks_schedule_kind_name (s->kind),
                 s->virtual_stages, s->micro_batches, ks_train_rows (t), through);
    }
  if (t->world > 1 && t->pipeline != NULL)
    g_message ("replica %d of %d (each stage averages its gradients over the replicas), %"
               G_GSIZE_FORMAT " rows per step each", t->rank, t->world, t->batch);
  else if (t->world > 1)
    g_message ("worker %d of %d (%s mode, %s by %s), %" G_GSIZE_FORMAT " rows per step each",
               t->rank, t->world, ks_algorithm_mode (t->algorithm), ks_comm_name (t->comm),
               t->comm_why, t->batch);
  g_autofree char *amp = ks_train_amp_describe (t);
  if (leader)
    g_message ("training %s with %s on %s%s", t->task->describe (t),
               ks_optimizer_name (t->optimizer), device, amp);

  const char *trace = ks_config_get_string (c, "trace", "path");
  double warm_busy = 0, warm_wall = 0; /* after the first step, which allocates */
  if (t->pipeline != NULL && *trace != '\0')
    ks_pipeline_record (t->pipeline, TRUE);
  else if (*trace != '\0')
    g_warning ("[trace] path: only a pipelined run (see [pipeline]) writes a trace");

  gint64 window_start = g_get_monotonic_time (), run_start = window_start, window_steps = 0;
  for (gint64 step = first; step <= steps; step++)
    {
      double lr = ks_optimizer_learning_rate (t->optimizer);
      t->task->batch (t, step);
      if ((t->task->prepare != NULL && !t->task->prepare (t, step, &error))
          || (t->pipeline != NULL
                  ? !ks_pipeline_step (t->pipeline, t->optimizer, t->feeds, t->n_feeds,
                                       &t->pipeline_loss, &error)
                  : !ks_optimizer_step (t->optimizer, t->feeds, t->n_feeds, &error))
          || (t->task->finish != NULL && !t->task->finish (t, step, &error)))
        {
          ks_cli_error ("step %" G_GINT64_FORMAT ": %s", step, error->message);
          return KS_EXIT_RUNTIME;
        }
      window_steps++;
      if (t->pipeline != NULL && step == first)
        ks_pipeline_timing (t->pipeline, &warm_busy, &warm_wall);
      /* worker 0 saves; with servers every worker takes part, in a pipeline every stage
       * of the first replica writes its part */
      if ((leader || t->algorithm != NULL || (t->pipeline != NULL && t->rank == 0))
          && *ckpt_dir != '\0'
          && ((ckpt_every > 0 && step % ckpt_every == 0) || step == steps)
          && !save (t, ckpt_dir, step, keep, &error))
        {
          ks_cli_error ("step %" G_GINT64_FORMAT ": %s", step, error->message);
          return KS_EXIT_RUNTIME;
        }
      /* a held-out evaluation during training ([train] eval_every); the last step's is below */
      double mid_eval;
      gboolean mid = eval_every > 0 && step % eval_every == 0 && step != steps;
      if (mid && !evaluate (t, &mid_eval, &error))
        {
          ks_cli_error ("step %" G_GINT64_FORMAT ": evaluation: %s", step, error->message);
          return KS_EXIT_RUNTIME;
        }
      if (mid && leader)
        printf ("%seval %s %.4f at step %" G_GINT64_FORMAT " (%" G_GSIZE_FORMAT " held-out %s)\n",
                t->tty ? "\n" : "", t->task->metric, mid_eval, step, t->eval_samples,
                t->task->unit);
      if (step % log_every != 0 && step != steps)
        {
          if (mid && leader)
            metrics_line (t, step, (g_get_monotonic_time () - run_start) / 1e6, "", &mid_eval);
          continue;
        }
      gint64 now = g_get_monotonic_time ();
      double rate = window_steps * t->batch * t->world / MAX (1e-6, (now - window_start) / 1e6);
      double eta = (steps - step) * ((now - run_start) / 1e6 / (step - first + 1));
      double loss = step_loss (t, &error);
      if (!ks_train_dist_mean (t, &loss, &error))
        {
          ks_cli_error ("step %" G_GINT64_FORMAT ": %s", step, error->message);
          return KS_EXIT_RUNTIME;
        }
      gboolean last = step == steps;
      /* with servers, the evaluation sees their final values (async: nothing queued);
       * a mode whose evaluation reads the servers' sparse rows stops after it */
      if (last && has_servers (t) && !ks_algorithm_flush_worker (t->algorithm, &stopped, &error))
        {
          ks_cli_error ("before the evaluation: %s", error->message);
          return KS_EXIT_RUNTIME;
        }
      if (last && !(evaluated = evaluate (t, &eval, &error)))
        {
          ks_cli_error ("evaluation: %s", error->message);
          return KS_EXIT_RUNTIME;
        }
      if (leader)
        report (t, step, steps, loss, lr, rate, eta, (now - run_start) / 1e6,
                last ? &eval : mid ? &mid_eval : NULL);
      window_start = now;
      window_steps = 0;
    }
  /* the result; evaluated here when a resumed run had nothing left to do (with servers,
   * before this worker stops) */
  if (!evaluated && has_servers (t) && !stopped
      && !ks_algorithm_flush_worker (t->algorithm, &stopped, &error))
    {
      ks_cli_error ("before the evaluation: %s", error->message);
      return KS_EXIT_RUNTIME;
    }
  if (!evaluated && !evaluate (t, &eval, &error))
    {
      ks_cli_error ("evaluation: %s", error->message);
      return KS_EXIT_RUNTIME;
    }
  if (has_servers (t) && !stopped && !ks_algorithm_stop_worker (t->algorithm, &error))
    {
      ks_cli_error ("stop_worker: %s", error->message);
      return KS_EXIT_RUNTIME;
    }
  if (t->pipeline != NULL && !pipeline_report (t, warm_busy, warm_wall, trace, &error))
    {
      ks_cli_error ("%s", error->message);
      return KS_EXIT_RUNTIME;
    }
  const char *export_dir = ks_config_get_string (c, "train", "export_dir");
  if (leader && *export_dir != '\0')
    {
      /* the output goes by what it is, not by the op that made it last; the task's
       * metadata lets `ksdist generate` use a GPT's export, the settings tell its shape */
      g_autoptr (GHashTable) meta = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                           g_free);
      if (t->task->metadata != NULL)
        t->task->metadata (t, meta);
      g_hash_table_insert (meta, g_strdup ("config"), trajectory_config (t));
      if (!ks_expr_rename (t->logits, "logits", &error)
          || !ks_save_inference_model_with_metadata (export_dir, t->model, t->inputs,
                                                     &t->logits, 1, meta, &error))
        {
          ks_cli_error ("exporting the inference model: %s", error->message);
          return KS_EXIT_RUNTIME;
        }
      g_autofree char *inputs = g_strjoinv (", ", (GStrv) t->inputs);
      g_message ("inference model (%s to %s) written to %s", inputs, ks_expr_name (t->logits),
                 export_dir);
    }
  printf ("eval %s %.4f (%" G_GSIZE_FORMAT " held-out %s)\n", t->task->metric, eval,
          t->eval_samples, t->task->unit);
  return KS_EXIT_OK;
}

int
ks_train_command (const KsCommand *command, int argc, char **argv, int (*body) (Trainer *t))
{
  g_auto (GStrv) sets = NULL;
  GOptionEntry entries[] = { KS_CLI_SET_OPTION (sets), { NULL } };
  Trainer t = { 0 };
  int status;

  if (!ks_cli_parse (command->name, "[CONFIG]", command->summary, entries, &argc, &argv))
    return KS_EXIT_USAGE;
  if (argc > 2)
    {
      ks_cli_error ("%s: one CONFIG at most, got '%s' too (see ksdist help %s)", command->name,
                    argv[2], command->name);
      return KS_EXIT_USAGE;
    }
  if ((status = ks_cli_load (argc == 2 ? argv[1] : NULL, sets, &t.config, &t.registry)) != 0)
    return status;
  if ((status = ks_train_check (t.registry, t.config, FALSE)) != 0)
    {
      ks_registry_free (t.registry);
      ks_config_free (t.config);
      return status;
    }
  t.tty = isatty (STDOUT_FILENO);
  status = body (&t);
  ks_trainer_clear (&t);
  ks_registry_free (t.registry);
  ks_config_free (t.config);
  return status;
}

static int
run_train (int argc, char **argv)
{
  return ks_train_command (&ks_cmd_train, argc, argv, train);
}

const KsCommand ks_cmd_train = {
  "train",
  "Train a model in this process from a configuration ([model], [data], [train])",
  run_train,
};
