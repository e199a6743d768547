/* Observers of a run (KsTrainObserver): a program's own sees every step with the loss the
 * default observer prints on stdout, the held-out evaluations, the saves and the end; the
 * default printing one can be removed, which silences stdout and leaves [log] metrics. */
#include "testutil.h"

#include <ksdist/tasks.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { STEPS = 20, EVAL_EVERY = 6, CKPT_EVERY = 10 };

typedef struct {
  int steps, evals, saves, ends;
  gint64 step_seen[STEPS + 1];
  double loss[STEPS + 1];
  gint64 saved[4];
  double end_eval;
  gsize struct_size;
} Seen;

static void
on_step (KsTrainer *t, const KsTrainStep *s, gpointer data)
{
  Seen *seen = data;
  g_assert_cmpuint (s->size, ==, sizeof *s);
  g_assert_cmpint (s->steps, ==, STEPS);
  g_assert_true (s->step >= 1 && s->step <= STEPS);
  g_assert_false (s->task_steps);
  g_assert_true (s->lr >= 0 && s->rate > 0); /* warmup starts at 0 */
  seen->step_seen[s->step]++;
  seen->loss[s->step] = s->loss;
  seen->steps++;
}

static void
on_eval (KsTrainer *t, const KsTrainEval *e, gpointer data)
{
  Seen *seen = data;
  g_assert_cmpint (e->step % EVAL_EVERY, ==, 0);
  g_assert_true (e->value >= 0 && e->value <= 1 && e->samples > 0);
  g_assert_true (e->reported); /* log_every = 1: a step's report follows */
  seen->evals++;
}

static void
on_save (KsTrainer *t, gint64 step, const char *dir, gpointer data)
{
  Seen *seen = data;
  g_autofree char *name = g_strdup_printf ("checkpoint-%" G_GINT64_FORMAT, step);
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_assert_true (g_file_test (path, G_FILE_TEST_IS_DIR)); /* written before it is told */
  g_assert_cmpint (seen->saves, <, 4);
  seen->saved[seen->saves++] = step;
}

static void
on_end (KsTrainer *t, const KsTrainEnd *e, gpointer data)
{
  Seen *seen = data;
  seen->end_eval = e->eval;
  seen->ends++;
}

static const KsTrainObserver observer = {
  .size = sizeof observer, .on_step = on_step, .on_eval = on_eval, .on_save = on_save,
  .on_end = on_end,
};

/* A run of the spirals MLP with `seen` observing, its stdout in `out`. */
static double
run (const char *dir, const char *name, gboolean silence, Seen *seen, char **out)
{
  g_autofree char *openblas = g_build_filename (g_getenv ("KS_BUILD_PLUGINS"), "openblas", ".libs", NULL);
  g_autofree char *optim = g_build_filename (g_getenv ("KS_BUILD_PLUGINS"), "optim", ".libs", NULL);
  g_autofree char *path = g_strdup_printf ("%s:%s", openblas, optim);
  g_autofree char *ini = g_build_filename (g_getenv ("KS_SRCDIR"), "examples", "default.ini", NULL);
  g_autofree char *ckpt = g_build_filename (dir, name, NULL);
  g_autofree char *metrics = g_strdup_printf ("%s.jsonl", ckpt);
  g_autofree char *capture = g_strdup_printf ("%s.out", ckpt);
  g_autoptr (GError) error = NULL;
  g_autoptr (KsConfig) config = ks_config_new ();
  const char *sets[] = { "compute.backend=openblas", "openblas.threads=1", "train.steps=20",
                         "train.log_every=1", "train.eval_every=6", "train.checkpoint_every=10",
                         "data.samples=512", "optim.warmup=2" };

  g_assert_true (ks_config_load_file (config, ini, &error));
  for (gsize i = 0; i < G_N_ELEMENTS (sets); i++)
    g_assert_true (ks_config_set_override (config, sets[i], &error));
  g_autofree char *set_ckpt = g_strdup_printf ("train.checkpoint_dir=%s", ckpt);
  g_autofree char *set_metrics = g_strdup_printf ("log.metrics=%s", metrics);
  g_assert_true (ks_config_set_override (config, set_ckpt, &error));
  g_assert_true (ks_config_set_override (config, set_metrics, &error));
  g_autoptr (KsRegistry) registry = ks_test_scan (config, path);
  g_assert_true (ks_config_validate (config, &error));
  const KsTrainTask *task = ks_builtin_task (config, &error);
  g_assert_no_error (error);
  g_autoptr (KsTrainer) t = ks_trainer_new (registry, config, task, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (ks_trainer_add_observer (t, &observer, seen), >, KS_TRAINER_OBSERVER_PRINT);
  if (silence)
    ks_trainer_remove_observer (t, KS_TRAINER_OBSERVER_PRINT);

  /* stdout into a file for the run */
  fflush (stdout);
  int saved = dup (STDOUT_FILENO);
  FILE *f = fopen (capture, "w");
  g_assert_nonnull (f);
  dup2 (fileno (f), STDOUT_FILENO);
  gboolean ok = ks_trainer_run (t, &error);
  fflush (stdout);
  dup2 (saved, STDOUT_FILENO);
  close (saved);
  fclose (f);
  g_assert_no_error (error);
  g_assert_true (ok);
  g_assert_true (g_file_get_contents (capture, out, NULL, NULL));

  /* the metrics observer stays whatever prints: a line per step */
  g_autofree char *jsonl = NULL;
  g_assert_true (g_file_get_contents (metrics, &jsonl, NULL, NULL));
  g_auto (GStrv) lines = g_strsplit (g_strchomp (jsonl), "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, STEPS);
  g_assert_nonnull (strstr (lines[EVAL_EVERY - 1], "\"eval_accuracy\""));
  return ks_trainer_result (t);
}

static void
check_seen (const Seen *seen, double result)
{
  g_assert_cmpint (seen->steps, ==, STEPS);
  for (int s = 1; s <= STEPS; s++)
    g_assert_cmpint (seen->step_seen[s], ==, 1);
  g_assert_cmpint (seen->evals, ==, (STEPS - 1) / EVAL_EVERY); /* the last is the end's */
  g_assert_cmpint (seen->saves, ==, 2);
  g_assert_cmpint (seen->saved[0], ==, CKPT_EVERY);
  g_assert_cmpint (seen->saved[1], ==, STEPS);
  g_assert_cmpint (seen->ends, ==, 1);
  g_assert_cmpfloat (seen->end_eval, ==, result);
}

static void
test_sees_printed (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *out = NULL;
  Seen seen = { 0 };
  double result = run (dir, "printed", FALSE, &seen, &out);
  check_seen (&seen, result);

  /* every step's printed loss is the one the observer saw */
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  int printed = 0;
  for (int i = 0; lines[i] != NULL; i++)
    {
      gint64 step, steps;
      char loss[32];
      if (sscanf (lines[i], "step %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT " loss %31s", &step,
                  &steps, loss) != 3)
        continue;
      g_assert_true (step >= 1 && step <= STEPS);
      g_autofree char *want = g_strdup_printf ("%.4f", seen.loss[step]);
      g_assert_cmpstr (loss, ==, want);
      printed++;
    }
  g_assert_cmpint (printed, ==, STEPS);
  g_autofree char *end = g_strdup_printf ("eval accuracy %.4f (", result);
  g_assert_nonnull (strstr (out, end));
  g_assert_nonnull (strstr (out, "eval accuracy ")); /* and the mid-run ones */
  g_assert_nonnull (strstr (out, " at step 6 ("));
  ks_test_rmtree (dir);
}

static void
test_silenced (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *out = NULL;
  Seen seen = { 0 };
  double result = run (dir, "silent", TRUE, &seen, &out);
  check_seen (&seen, result);
  /* g_test's log handler writes the run's g_message lines on stdout; nothing else */
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  for (int i = 0; lines[i] != NULL; i++)
    g_assert_true (*lines[i] == '\0' || g_str_has_prefix (lines[i], "# "));
  ks_test_rmtree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  ks_test_clear_env ();
  g_test_add_func ("/observer/sees-printed", test_sees_printed);
  g_test_add_func ("/observer/silenced", test_silenced);
  return g_test_run ();
}
