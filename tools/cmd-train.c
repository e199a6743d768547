/* ksdist train: the configuration's task (train-tasks.c) on the trainer (trainer.h),
 * which runs the whole job of this process: worker, pipeline stage or server. */
#include "train.h"

#include <stdio.h>

int
ks_train_check (KsRegistry *registry, KsConfig *config, const KsTrainWorld *world,
                gboolean build)
{
  g_autoptr (GError) error = NULL;
  const KsTrainTask *task = ks_builtin_task (config, &error);

  if (task != NULL && ks_trainer_check (registry, config, task, world, build, &error))
    return KS_EXIT_OK;
  ks_cli_error ("%s", error->message);
  return ks_trainer_exit_status (error);
}

/* The exit status of a run that failed: a peer that ended or never answered is
 * KS_EXIT_PEER, so that ksdist launch names that one, not this */
static int
failed_status (const GError *error)
{
  if (g_error_matches (error, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST)
      || g_error_matches (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT))
    return KS_EXIT_PEER;
  return ks_trainer_exit_status (error);
}

int
ks_train_command (const KsCommand *command, int argc, char **argv, int (*body) (KsTrainer *t))
{
  g_auto (GStrv) sets = NULL;
  GOptionEntry entries[] = { KS_CLI_SET_OPTION (sets), { NULL } };
  g_autoptr (KsConfig) config = NULL;
  g_autoptr (KsRegistry) registry = NULL;
  g_autoptr (GError) error = NULL;
  int status;

  if (command == &ks_cmd_train) /* a signal while it loads and meets the job: one line */
    ks_trainer_catch_startup_signals ("ksdist");
  if (!ks_cli_parse (command->name, "[CONFIG]", command->summary, entries, &argc, &argv))
    return KS_EXIT_USAGE;
  if (argc > 2)
    {
      ks_cli_error ("%s: one CONFIG at most, got '%s' too (see ksdist help %s)", command->name,
                    argv[2], command->name);
      return KS_EXIT_USAGE;
    }
  if ((status = ks_cli_load (argc == 2 ? argv[1] : NULL, sets, &config, &registry)) != 0)
    return status;
  const KsTrainTask *task = ks_builtin_task (config, &error);
  /* the plan's warnings: printed once by ksdist launch's own check, not by each worker */
  gboolean checked = g_strcmp0 (g_getenv ("KS_LAUNCH_CHECKED"), "1") == 0;
  if (checked)
    ks_log_to_stderr ("ksdist", "error");
  g_autoptr (KsTrainer) trainer = task != NULL ? ks_trainer_new (registry, config, task, NULL,
                                                                 &error)
                                               : NULL;
  if (checked)
    ks_log_to_stderr ("ksdist", ks_config_get_string (config, "log", "level"));
  if (trainer == NULL)
    {
      ks_cli_error ("%s", error->message);
      return failed_status (error);
    }
  return body (trainer);
}

static int
train (KsTrainer *trainer)
{
  g_autoptr (GError) error = NULL;

  if (ks_trainer_run (trainer, &error))
    return KS_EXIT_OK;
  ks_cli_error ("%s", error->message);
  return failed_status (error);
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
