/* ks_trainer_main: the whole of a training program's main, for a task of its own. */
#include "trainer-private.h"

int
ks_trainer_main (int argc, char **argv, const KsTrainTask *task, gpointer data)
{
  g_auto (GStrv) sets = NULL;
  GOptionEntry entries[] = {
    { "set", 's', 0, G_OPTION_ARG_STRING_ARRAY, &sets,
      "Override a setting (repeatable); wins over the file and KS_<GROUP>_<KEY>",
      "GROUP.KEY=VALUE" },
    { NULL }
  };
  g_autoptr (GOptionContext) context = g_option_context_new ("CONFIG");
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = ks_registry_new ();
  g_autoptr (GError) error = NULL;
  const char *name = argc > 0 ? argv[0] : "train";

  g_option_context_add_main_entries (context, entries, NULL);
  g_option_context_set_summary (context, task->name != NULL ? task->name : "");
  if (!g_option_context_parse (context, &argc, &argv, &error))
    ;
  else if (argc != 2)
    g_set_error (&error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                 "usage: %s CONFIG [--set GROUP.KEY=VALUE ...]", name);
  else if (ks_config_load_file (config, argv[1], &error))
    for (int i = 0; sets != NULL && sets[i] != NULL && error == NULL; i++)
      ks_config_set_override (config, sets[i], &error);
  if (error == NULL && ks_registry_scan (registry, config, &error)
      && ks_config_validate (config, &error)
      && ks_trainer_check (registry, config, task, NULL, FALSE, &error))
    {
      g_autoptr (KsTrainer) t = ks_trainer_new (registry, config, task, data, &error);
      if (t != NULL && ks_trainer_run (t, &error))
        return 0;
    }
  g_strdelimit (error->message, "\n", ' ');
  g_printerr ("%s: %s\n", name, error->message);
  return error->domain == G_OPTION_ERROR || ks_trainer_is_config_error (error) ? 2 : 1;
}
