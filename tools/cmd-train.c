/* ksdist train: the configuration's task (train-tasks.c) on the trainer (trainer.h),
 * which runs the whole job of this process: worker, pipeline stage or server. */
#include "train.h"

#include <stdio.h>

int
ks_train_exit_status (const GError *error)
{
  /* a name in the config that nothing here provides is a configuration error too */
  return error->domain == KS_CONFIG_ERROR
                 || g_error_matches (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_FOUND)
                 || g_error_matches (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_UNAVAILABLE)
             ? KS_EXIT_USAGE
             : KS_EXIT_RUNTIME;
}

int
ks_train_check (KsRegistry *registry, KsConfig *config, const KsTrainWorld *world,
                gboolean build)
{
  g_autoptr (GError) error = NULL;
  const KsTrainTask *task = ks_train_task (config, &error);

  if (task != NULL && ks_trainer_check (registry, config, task, world, build, &error))
    return KS_EXIT_OK;
  ks_cli_error ("%s", error->message);
  return ks_train_exit_status (error);
}

static int
run_train (int argc, char **argv)
{
  g_auto (GStrv) sets = NULL;
  GOptionEntry entries[] = { KS_CLI_SET_OPTION (sets), { NULL } };
  g_autoptr (KsConfig) config = NULL;
  g_autoptr (KsRegistry) registry = NULL;
  g_autoptr (GError) error = NULL;
  int status;

  if (!ks_cli_parse ("train", "[CONFIG]", ks_cmd_train.summary, entries, &argc, &argv))
    return KS_EXIT_USAGE;
  if (argc > 2)
    {
      ks_cli_error ("train: one CONFIG at most, got '%s' too (see ksdist help train)", argv[2]);
      return KS_EXIT_USAGE;
    }
  if ((status = ks_cli_load (argc == 2 ? argv[1] : NULL, sets, &config, &registry)) != 0
      || (status = ks_train_check (registry, config, NULL, FALSE)) != 0)
    return status;
  g_autoptr (KsTrainer) trainer = ks_trainer_new (registry, config,
                                                  ks_train_task (config, NULL), NULL, &error);
  if (trainer == NULL || !ks_trainer_run (trainer, &error))
    {
      ks_cli_error ("%s", error->message);
      return ks_train_exit_status (error);
    }
  return KS_EXIT_OK;
}

const KsCommand ks_cmd_train = {
  "train",
  "Train a model in this process from a configuration ([model], [data], [train])",
  run_train,
};
