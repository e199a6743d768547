/* [train] eval_rows and a C program's task (KsTrainTask.honours_eval_rows): a task whose
 * evaluate scores every held-out row, never asking ks_trainer_eval_cap, is refused before
 * training when eval_rows is set, naming the key and the task (before, it trained and
 * printed the whole set's metric as if capped); unset, the same task runs; a task that
 * says it honours the cap (the built-in ones) is not refused. One that says so but whose
 * evaluate never asks for the cap ends at its first evaluation, naming both (before, it
 * ran to the end, exit 0, its metric over every row). */
#include "testutil.h"

#include <ksdist/tasks.h>
#include <string.h>

static gboolean
evaluate_all (KsTrainer *t, gboolean final, double *value, gsize *samples, GError **error)
{
  (void) t, (void) final, (void) error;
  *value = 1, *samples = 512; /* every row, whatever [train] eval_rows says */
  return TRUE;
}

/* A trainer of examples/default.ini with `sets` for `task`, or the error that refused it. */
static KsTrainer *
trainer (const KsTrainTask *task, const char *const *sets, KsConfig **config,
         KsRegistry **registry, GError **error)
{
  g_autofree char *openblas = g_build_filename (g_getenv ("KS_BUILD_PLUGINS"), "openblas", ".libs", NULL);
  g_autofree char *optim = g_build_filename (g_getenv ("KS_BUILD_PLUGINS"), "optim", ".libs", NULL);
  g_autofree char *path = g_strdup_printf ("%s:%s", openblas, optim);
  g_autofree char *ini = g_build_filename (g_getenv ("KS_SRCDIR"), "examples", "default.ini", NULL);
  GError *local = NULL;

  *config = ks_config_new ();
  ks_tasks_add_schema (*config); /* default.ini's [data] and [model] are the tasks library's */
  g_assert_true (ks_config_load_file (*config, ini, &local));
  g_assert_true (ks_config_set_override (*config, "compute.backend=openblas", &local));
  for (int i = 0; sets[i] != NULL; i++)
    g_assert_true (ks_config_set_override (*config, sets[i], &local));
  *registry = ks_test_scan (*config, path);
  g_assert_true (ks_config_validate (*config, &local));
  g_assert_no_error (local);
  return ks_trainer_new (*registry, *config, task, NULL, error);
}

static void
expect (const KsTrainTask *task, const char *const *sets, const char *refusal)
{
  KsConfig *config;
  KsRegistry *registry;
  g_autoptr (GError) error = NULL;
  KsTrainer *t = trainer (task, sets, &config, &registry, &error);

  if (refusal == NULL)
    {
      g_assert_no_error (error);
      g_assert_nonnull (t);
      ks_trainer_free (t);
    }
  else
    {
      g_assert_null (t);
      g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE);
      if (strstr (error->message, refusal) == NULL)
        g_error ("'%s' lacks '%s'", error->message, refusal);
    }
  ks_registry_free (registry);
  ks_config_free (config);
}

static void
test_ignoring_task (void)
{
  if (!ks_test_have_openblas ())
    {
      g_test_skip ("no OpenBLAS plugin in this build");
      return;
    }
  g_autoptr (GError) error = NULL;
  g_autoptr (KsConfig) config = ks_config_new ();
  ks_tasks_add_schema (config);
  const KsTrainTask *builtin = ks_builtin_task (config, &error); /* the spirals MLP's */
  g_assert_no_error (error);
  KsTrainTask own = *builtin;
  own.name = "my-spirals";
  own.evaluate = evaluate_all;
  own.honours_eval_rows = FALSE;
  const char *const capped[] = { "train.eval_rows=64", NULL }, *const none[] = { NULL };

  expect (&own, capped, "[train] eval_rows = 64: the task 'my-spirals' does not cap its "
                        "evaluation");
  expect (&own, none, NULL);       /* unset: nothing to refuse */
  expect (builtin, capped, NULL);  /* the built-in task scores the first 64 */
  /* a table older than the slot says nothing: refused too */
  own.size = G_STRUCT_OFFSET (KsTrainTask, honours_eval_rows);
  own.honours_eval_rows = TRUE; /* past its size: not read */
  expect (&own, capped, "the task 'my-spirals' does not cap");
}

/* A run of 4 steps (the evaluation at the end) of `task` with `sets`: its error or none */
static gboolean
run (const KsTrainTask *task, const char *const *sets, GError **error)
{
  KsConfig *config;
  KsRegistry *registry;
  KsTrainer *t = trainer (task, sets, &config, &registry, error);
  g_assert_no_error (*error);
  gboolean ok = ks_trainer_run (t, error);
  ks_trainer_free (t);
  ks_registry_free (registry);
  ks_config_free (config);
  return ok;
}

static void
test_claiming_task (void)
{
  if (!ks_test_have_openblas ())
    {
      g_test_skip ("no OpenBLAS plugin in this build");
      return;
    }
  g_autoptr (GError) error = NULL;
  g_autoptr (KsConfig) config = ks_config_new ();
  ks_tasks_add_schema (config);
  const KsTrainTask *builtin = ks_builtin_task (config, &error);
  g_assert_no_error (error);
  KsTrainTask own = *builtin;
  own.name = "my-spirals";
  own.evaluate = evaluate_all; /* never asks ks_trainer_eval_cap */
  own.honours_eval_rows = TRUE;
  const char *const capped[] = { "train.steps=4", "train.log_every=2", "optim.warmup=1",
                                 "openblas.threads=1", "train.eval_rows=64", NULL };
  const char *const uncapped[] = { "train.steps=4", "train.log_every=2", "optim.warmup=1",
                                   "openblas.threads=1", NULL };

  g_assert_false (run (&own, capped, &error));
  g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE);
  g_test_message ("%s", error->message);
  g_assert_cmpstr (error->message, ==,
                   "evaluation: [train] eval_rows = 64: the task 'my-spirals' says it honours it "
                   "(honours_eval_rows in its KsTrainTask) but its evaluate never asked "
                   "ks_trainer_eval_cap, so it scored every held-out row; have evaluate score "
                   "at most ks_trainer_eval_cap (t) rows, or remove [train] eval_rows");
  g_clear_error (&error);
  g_assert_true (run (&own, uncapped, &error)); /* unset: nothing to check */
  g_assert_no_error (error);
  g_assert_true (run (builtin, capped, &error)); /* the built-in task asks */
  g_assert_no_error (error);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  ks_test_clear_env ();
  g_test_add_func ("/eval-rows-task/ignoring-task", test_ignoring_task);
  g_test_add_func ("/eval-rows-task/claiming-task", test_claiming_task);
  return g_test_run ();
}
