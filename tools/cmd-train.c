/* ksdist train: single-process training from a configuration. The MLP of [model] learns
 * the generated task of [data] with the optimizer of [train]; progress on a terminal,
 * plain lines otherwise, one JSON object per logged step in [log] metrics. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  KsConfig *config;
  KsRegistry *registry;
  KsCompute *compute;
  KsModel *model;
  KsOptimizer *optimizer;
  KsExpr *loss, *accuracy;
  gsize batch;
  float *bx;   /* the batch being fed */
  gint64 *by;
  FILE *metrics;
  gboolean tty;
} Trainer;

static void
trainer_clear (Trainer *t)
{
  if (t->metrics != NULL)
    fclose (t->metrics);
  ks_optimizer_free (t->optimizer);
  ks_model_free (t->model);
  ks_compute_free (t->compute);
  g_free (t->bx);
  g_free (t->by);
}

/* [model] hidden as positive sizes; FALSE with a message naming the key. */
static gboolean
hidden_sizes (const KsConfig *config, GArray *sizes, GError **error)
{
  g_auto (GStrv) items = ks_config_get_list (config, "model", "hidden");
  for (int i = 0; items[i] != NULL; i++)
    {
      guint64 v;
      if (!g_ascii_string_to_unsigned (items[i], 10, 1, 1 << 20, &v, NULL))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "[model] hidden: '%s' is not a layer size (an integer in [1, 1048576])",
                       items[i]);
          return FALSE;
        }
      gint64 size = (gint64) v;
      g_array_append_val (sizes, size);
    }
  return TRUE;
}

static gboolean
build (Trainer *t, KsTask task, GError **error)
{
  const KsConfig *c = t->config;
  const gint64 xshape[] = { (gint64) t->batch, 2 }, yshape[] = { (gint64) t->batch };
  g_autoptr (GArray) sizes = g_array_new (FALSE, FALSE, sizeof (gint64));
  const char *act_name = ks_config_get_string (c, "model", "activation");
  const char *const acts[] = { "relu", "tanh", "sigmoid", "gelu" };
  const KsUnaryOp act_ops[] = { KS_UNARY_RELU, KS_UNARY_TANH, KS_UNARY_SIGMOID, KS_UNARY_GELU };
  guint64 seed = ks_config_get_int (c, "model", "seed");
  KsUnaryOp act = KS_UNARY_TANH;
  KsExpr *x, *y, *h, *logits;

  if (!hidden_sizes (c, sizes, error))
    return FALSE;
  for (guint i = 0; i < G_N_ELEMENTS (acts); i++)
    if (strcmp (act_name, acts[i]) == 0)
      act = act_ops[i];
  t->model = ks_model_new (t->compute);
  if ((x = ks_model_data (t->model, "x", 2, xshape, KS_DTYPE_FLOAT32, error)) == NULL
      || (y = ks_model_data (t->model, "y", 1, yshape, KS_DTYPE_INT64, error)) == NULL)
    return FALSE;
  h = x;
  for (guint i = 0; i < sizes->len && h != NULL; i++)
    h = ks_fc (h, g_array_index (sizes, gint64, i), act, NULL, seed + i, error);
  if (h == NULL || (logits = ks_fc (h, ks_task_classes (task), -1, "out", seed + 1000, error)) == NULL
      || (t->loss = ks_softmax_cross_entropy (logits, y, error)) == NULL
      || (t->accuracy = ks_accuracy (logits, y, error)) == NULL || !ks_model_init (t->model, error))
    return FALSE;
  t->optimizer = ks_optimizer_new (t->registry, c, ks_config_get_string (c, "train", "optimizer"),
                                   error);
  return t->optimizer != NULL
         && ks_optimizer_minimize (t->optimizer, t->model, t->loss, NULL, 0, NULL, error);
}

static float
scalar (KsExpr *e, GError **error)
{
  float v = NAN;
  const KsTensor *value = ks_expr_value (e, error);
  if (value != NULL)
    ks_tensor_to_host (value, &v, sizeof v, error);
  return v;
}

/* Accuracy over a held-out set, a batch at a time. */
static gboolean
evaluate (Trainer *t, const float *xs, const gint64 *ys, gsize n_batches, double *accuracy,
          GError **error)
{
  double sum = 0;
  for (gsize b = 0; b < n_batches; b++)
    {
      KsFeed feeds[] = { { "x", xs + b * t->batch * 2, t->batch * 2 * sizeof (float) },
                         { "y", ys + b * t->batch, t->batch * sizeof (gint64) } };
      if (!ks_model_run (t->model, feeds, 2, &t->accuracy, 1, error))
        return FALSE;
      float a = scalar (t->accuracy, error);
      if (isnan (a))
        return FALSE;
      sum += a;
    }
  *accuracy = sum / n_batches;
  return TRUE;
}

/* The order of an epoch: a shuffle that depends only on the seed and the epoch, so a
 * resumed run sees the same batches as an uninterrupted one. */
static void
epoch_order (guint64 seed, gint64 epoch, guint *order, gsize n)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed ((guint32) (seed * 1000003u + epoch));
  for (gsize i = 0; i < n; i++)
    order[i] = i;
  for (gsize i = n; i > 1; i--)
    {
      gsize j = g_rand_int_range (rng, 0, (gint32) i);
      guint tmp = order[i - 1];
      order[i - 1] = order[j];
      order[j] = tmp;
    }
}

static void
report (Trainer *t, gint64 step, gint64 steps, float loss, double lr, double rate,
        double eta, const double *accuracy)
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
  if (t->metrics == NULL)
    return;
  fprintf (t->metrics, "{\"step\": %" G_GINT64_FORMAT ", \"loss\": %.6g, \"lr\": %.6g, "
                       "\"samples_per_s\": %.1f",
           step, loss, lr, rate);
  if (accuracy != NULL)
    fprintf (t->metrics, ", \"eval_accuracy\": %.6g", *accuracy);
  fputs ("}\n", t->metrics);
  fflush (t->metrics);
}

static int
train (Trainer *t)
{
  const KsConfig *c = t->config;
  g_autoptr (GError) error = NULL;
  KsTask task;
  gint64 steps = ks_config_get_int (c, "train", "steps");
  gint64 log_every = ks_config_get_int (c, "train", "log_every");
  gsize n = ks_config_get_int (c, "data", "samples");
  double noise = ks_config_get_double (c, "data", "noise");
  guint64 data_seed = ks_config_get_int (c, "data", "seed");
  const char *metrics = ks_config_get_string (c, "log", "metrics");

  ks_task_from_name (ks_config_get_string (c, "data", "task"), &task); /* a checked choice */
  t->batch = ks_config_get_int (c, "train", "batch");
  if (t->batch > n)
    {
      ks_cli_error ("[train] batch = %" G_GSIZE_FORMAT " is larger than [data] samples = %"
                    G_GSIZE_FORMAT ": lower the batch or generate more samples",
                    t->batch, n);
      return KS_EXIT_USAGE;
    }
  if (*metrics != '\0'
      && (t->metrics = fopen (metrics, ks_config_get_bool (c, "train", "resume") ? "a" : "w"))
             == NULL)
    {
      ks_cli_error ("[log] metrics = %s: %s", metrics, g_strerror (errno));
      return KS_EXIT_USAGE;
    }
  if ((t->compute = ks_compute_new (t->registry, c, NULL, &error)) == NULL || !build (t, task, &error))
    {
      /* a name in the config that nothing here provides is a configuration error */
      gboolean config_error = error->domain == KS_CONFIG_ERROR
                              || g_error_matches (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_FOUND)
                              || g_error_matches (error, KS_PLUGIN_ERROR,
                                                  KS_PLUGIN_ERROR_UNAVAILABLE);
      ks_cli_error ("%s", error->message);
      return config_error ? KS_EXIT_USAGE : KS_EXIT_RUNTIME;
    }

  gsize eval_batches = MAX (1, n / t->batch / 4);
  g_autofree float *xs = g_new (float, n * 2);
  g_autofree gint64 *ys = g_new (gint64, n);
  g_autofree float *ex = g_new (float, eval_batches * t->batch * 2);
  g_autofree gint64 *ey = g_new (gint64, eval_batches * t->batch);
  g_autofree guint *order = g_new (guint, n);
  guint64 shuffle_seed = ks_config_get_int (c, "train", "seed");
  g_autofree char *device = ks_compute_describe (t->compute);
  const char *ckpt_dir = ks_config_get_string (c, "train", "checkpoint_dir");
  gint64 ckpt_every = ks_config_get_int (c, "train", "checkpoint_every");
  guint keep = ks_config_get_int (c, "train", "keep");
  gint64 first = 1, epoch = -1;
  gint64 window_start = g_get_monotonic_time (), run_start = window_start, window_steps = 0;

  ks_task_generate (task, n, noise, data_seed, xs, ys);
  ks_task_generate (task, eval_batches * t->batch, noise, data_seed + 1, ex, ey);
  if (*ckpt_dir != '\0' && ks_config_get_bool (c, "train", "resume"))
    {
      g_autofree char *latest = ks_checkpoint_latest (ckpt_dir);
      gint64 done = 0;
      if (latest == NULL)
        g_message ("no checkpoint in %s yet: starting from step 1", ckpt_dir);
      else if (!ks_checkpoint_load (latest, t->model, t->optimizer, &done, NULL, &error))
        {
          ks_cli_error ("%s", error->message);
          return KS_EXIT_RUNTIME;
        }
      else
        g_message ("resumed from %s at step %" G_GINT64_FORMAT, latest, done);
      first = done + 1;
    }
  t->bx = g_new (float, t->batch * 2);
  t->by = g_new (gint64, t->batch);
  g_message ("training an MLP on %s (%" G_GSIZE_FORMAT " samples) with %s on %s",
             ks_config_get_string (c, "data", "task"), n, ks_optimizer_name (t->optimizer),
             device);

  for (gint64 step = first; step <= steps; step++)
    {
      for (gsize i = 0; i < t->batch; i++)
        {
          guint64 k = (guint64) (step - 1) * t->batch + i; /* samples before this one */
          if ((gint64) (k / n) != epoch)
            epoch_order (shuffle_seed, epoch = k / n, order, n);
          memcpy (t->bx + 2 * i, xs + 2 * order[k % n], 2 * sizeof (float));
          t->by[i] = ys[order[k % n]];
        }
      KsFeed feeds[] = { { "x", t->bx, t->batch * 2 * sizeof (float) },
                         { "y", t->by, t->batch * sizeof (gint64) } };
      double lr = ks_optimizer_learning_rate (t->optimizer);
      if (!ks_optimizer_step (t->optimizer, feeds, 2, &error))
        {
          ks_cli_error ("step %" G_GINT64_FORMAT ": %s", step, error->message);
          return KS_EXIT_RUNTIME;
        }
      window_steps++;
      if (*ckpt_dir != '\0' && ((ckpt_every > 0 && step % ckpt_every == 0) || step == steps)
          && !ks_checkpoint_save (ckpt_dir, step, t->model, t->optimizer, NULL, keep, &error))
        {
          ks_cli_error ("step %" G_GINT64_FORMAT ": %s", step, error->message);
          return KS_EXIT_RUNTIME;
        }
      if (step % log_every != 0 && step != steps)
        continue;
      gint64 now = g_get_monotonic_time ();
      double seconds = MAX (1e-6, (now - window_start) / 1e6);
      double rate = window_steps * t->batch / seconds;
      double eta = (steps - step) * ((now - run_start) / 1e6 / (step - first + 1));
      float loss = scalar (t->loss, &error);
      double accuracy = 0;
      gboolean last = step == steps;
      if (last && !evaluate (t, ex, ey, eval_batches, &accuracy, &error))
        {
          ks_cli_error ("evaluation: %s", error->message);
          return KS_EXIT_RUNTIME;
        }
      report (t, step, steps, loss, lr, rate, eta, last ? &accuracy : NULL);
      if (last)
        printf ("eval accuracy %.4f (%" G_GSIZE_FORMAT " held-out samples)\n", accuracy,
                eval_batches * t->batch);
      window_start = now;
      window_steps = 0;
    }
  if (first > steps) /* resumed from a checkpoint at or past the last step */
    {
      double accuracy;
      if (!evaluate (t, ex, ey, eval_batches, &accuracy, &error))
        {
          ks_cli_error ("evaluation: %s", error->message);
          return KS_EXIT_RUNTIME;
        }
      printf ("eval accuracy %.4f (%" G_GSIZE_FORMAT " held-out samples)\n", accuracy,
              eval_batches * t->batch);
    }
  return KS_EXIT_OK;
}

static int
run_train (int argc, char **argv)
{
  g_auto (GStrv) sets = NULL;
  GOptionEntry entries[] = { KS_CLI_SET_OPTION (sets), { NULL } };
  Trainer t = { 0 };
  int status;

  if (!ks_cli_parse ("train", "[CONFIG]", ks_cmd_train.summary, entries, &argc, &argv))
    return KS_EXIT_USAGE;
  if (argc > 2)
    {
      ks_cli_error ("train: one CONFIG at most, got '%s' too (see ksdist help train)", argv[2]);
      return KS_EXIT_USAGE;
    }
  if ((status = ks_cli_load (argc == 2 ? argv[1] : NULL, sets, &t.config, &t.registry)) != 0)
    return status;
  t.tty = isatty (STDOUT_FILENO);
  status = train (&t);
  trainer_clear (&t);
  ks_registry_free (t.registry);
  ks_config_free (t.config);
  return status;
}

const KsCommand ks_cmd_train = {
  "train",
  "Train a model in this process from a configuration ([model], [data], [train])",
  run_train,
};
