/* Observers of a run (KsTrainObserver): a program's own sees every step with the loss the
 * default observer prints on stdout, the held-out evaluations, the saves, the end and a
 * task's long phases; the default printing one can be removed, which silences stdout and
 * leaves [log] metrics. */
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

/* A trainer of the spirals MLP, its parts freed with it. */
typedef struct {
  KsConfig *config;
  KsRegistry *registry;
  KsTrainer *t;
} Trainer;

static void
trainer_new (Trainer *tr, const char *const *sets, gsize n_sets)
{
  g_autofree char *openblas = g_build_filename (g_getenv ("KS_BUILD_PLUGINS"), "openblas", ".libs", NULL);
  g_autofree char *optim = g_build_filename (g_getenv ("KS_BUILD_PLUGINS"), "optim", ".libs", NULL);
  g_autofree char *path = g_strdup_printf ("%s:%s", openblas, optim);
  g_autofree char *ini = g_build_filename (g_getenv ("KS_SRCDIR"), "examples", "default.ini", NULL);
  g_autoptr (GError) error = NULL;

  tr->config = ks_config_new ();
  ks_tasks_add_schema (tr->config);
  g_assert_true (ks_config_load_file (tr->config, ini, &error));
  for (gsize i = 0; i < n_sets; i++)
    g_assert_true (ks_config_set_override (tr->config, sets[i], &error));
  tr->registry = ks_test_scan (tr->config, path);
  g_assert_true (ks_config_validate (tr->config, &error));
  const KsTrainTask *task = ks_builtin_task (tr->config, &error);
  g_assert_no_error (error);
  tr->t = ks_trainer_new (tr->registry, tr->config, task, NULL, &error);
  g_assert_no_error (error);
}

static void
trainer_free (Trainer *tr)
{
  ks_trainer_free (tr->t);
  ks_registry_free (tr->registry);
  ks_config_free (tr->config);
}

/* A run of the spirals MLP with `seen` observing, its stdout in `out`. */
static double
run (const char *dir, const char *name, gboolean silence, Seen *seen, char **out)
{
  g_autofree char *ckpt = g_build_filename (dir, name, NULL);
  g_autofree char *metrics = g_strdup_printf ("%s.jsonl", ckpt);
  g_autofree char *capture = g_strdup_printf ("%s.out", ckpt);
  g_autofree char *set_ckpt = g_strdup_printf ("train.checkpoint_dir=%s", ckpt);
  g_autofree char *set_metrics = g_strdup_printf ("log.metrics=%s", metrics);
  g_autoptr (GError) error = NULL;
  const char *sets[] = { "compute.backend=openblas", "openblas.threads=1", "train.steps=20",
                         "train.log_every=1", "train.eval_every=6", "train.checkpoint_every=10",
                         "data.samples=512", "optim.warmup=2", set_ckpt, set_metrics };
  Trainer tr;
  trainer_new (&tr, sets, G_N_ELEMENTS (sets));
  KsTrainer *t = tr.t;
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
  double result = ks_trainer_result (t);
  trainer_free (&tr);
  return result;
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

typedef struct {
  int told;
  gsize first, last, total;
  double eta_last;
} Progress;

static void
on_progress (KsTrainer *t, const KsTrainProgress *p, gpointer data)
{
  Progress *seen = data;
  g_assert_cmpuint (p->size, ==, sizeof *p);
  g_assert_cmpstr (p->what, ==, "test rows");
  g_assert_true (p->elapsed_s >= 0 && p->eta_s >= 0);
  if (seen->told++ == 0)
    seen->first = p->done;
  seen->last = p->done, seen->total = p->total, seen->eta_last = p->eta_s;
}

static const KsTrainObserver progress_observer = {
  .size = sizeof progress_observer, .on_progress = on_progress,
};

/* A task's phase of `total` rows told to an observer under [log] progress_after = `after`. */
static Progress
phase (const char *after, gsize total)
{
  g_autofree char *set_after = g_strdup_printf ("log.progress_after=%s", after);
  const char *sets[] = { "compute.backend=openblas", "openblas.threads=1", set_after };
  Progress seen = { 0 };
  Trainer tr;
  trainer_new (&tr, sets, G_N_ELEMENTS (sets));
  ks_trainer_add_observer (tr.t, &progress_observer, &seen);
  for (gsize done = 1; done <= total; done++)
    ks_trainer_progress (tr.t, "test rows", done, total);
  trainer_free (&tr);
  return seen;
}

/* A phase's progress reaches a program's observer whether or not stdout is a terminal
 * (the printing one shows it on a terminal only): at once with progress_after = 0, its
 * first row and its end; never for a phase that ends before progress_after. */
static void
test_progress (void)
{
  Progress now = phase ("0", 5);
  g_assert_cmpint (now.told, >=, 2); /* at most five a second: the middle rows may be left */
  g_assert_cmpuint (now.first, ==, 1);
  g_assert_cmpuint (now.last, ==, 5);
  g_assert_cmpuint (now.total, ==, 5);
  g_assert_cmpfloat (now.eta_last, ==, 0);
  Progress later = phase ("1000", 5);
  g_assert_cmpint (later.told, ==, 0);
}

/* A table whose size was not set, and removing an observer twice, are told, not ignored:
 * the run still prints once. */
static void
test_misuse (void)
{
  const char *sets[] = { "compute.backend=openblas", "openblas.threads=1" };
  static const KsTrainObserver unsized = { .on_step = on_step };
  Trainer tr;
  trainer_new (&tr, sets, G_N_ELEMENTS (sets));
  g_test_expect_message (NULL, G_LOG_LEVEL_CRITICAL,
                         "*size is 0*set .size = sizeof (KsTrainObserver)*");
  g_assert_cmpuint (ks_trainer_add_observer (tr.t, &unsized, NULL), ==, 0);
  g_test_assert_expected_messages ();
  ks_trainer_remove_observer (tr.t, KS_TRAINER_OBSERVER_PRINT);
  g_test_expect_message (NULL, G_LOG_LEVEL_CRITICAL, "*no observer 1 on this trainer*");
  ks_trainer_remove_observer (tr.t, KS_TRAINER_OBSERVER_PRINT);
  g_test_assert_expected_messages ();
  trainer_free (&tr);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  ks_test_clear_env ();
  g_test_add_func ("/observer/sees-printed", test_sees_printed);
  g_test_add_func ("/observer/silenced", test_silenced);
  g_test_add_func ("/observer/progress", test_progress);
  g_test_add_func ("/observer/misuse", test_misuse);
  return g_test_run ();
}
