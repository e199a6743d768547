/* ks_trainer_main: the whole of a training program's main, for a task of its own; and
 * the log lines of ksdist's programs. */
#include "trainer-private.h"

#include <locale.h>
#include <stdio.h>

static GLogLevelFlags log_threshold = G_LOG_LEVEL_INFO;
static char *log_program;

static void
log_line (const char *domain, GLogLevelFlags level, const char *message, gpointer data)
{
  /* GLib's levels grow less severe as their bit value grows */
  GLogLevelFlags severity = level & G_LOG_LEVEL_MASK;
  const char *label = severity <= G_LOG_LEVEL_CRITICAL  ? "error"
                      : severity <= G_LOG_LEVEL_WARNING ? "warning"
                      : severity <= G_LOG_LEVEL_INFO    ? "info"
                                                        : "debug";
  if (severity > log_threshold)
    return;
  g_autofree char *shown = ks_message_shorten (message); /* no 16 MB lines */
  fprintf (stderr, "%s: %s: %s\n", log_program, label, shown);
}

void
ks_log_to_stderr (const char *program, const char *level)
{
  static const struct { const char *name; GLogLevelFlags level; } levels[] = {
    { "error", G_LOG_LEVEL_CRITICAL }, { "warning", G_LOG_LEVEL_WARNING },
    { "info", G_LOG_LEVEL_INFO }, { "debug", G_LOG_LEVEL_DEBUG },
  };
  for (guint i = 0; i < G_N_ELEMENTS (levels); i++)
    if (g_strcmp0 (level, levels[i].name) == 0)
      log_threshold = levels[i].level;
  g_free (log_program);
  log_program = g_strdup (program);
  g_log_set_default_handler (log_line, NULL);
}

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
  g_autofree char *name = g_path_get_basename (argc > 0 ? argv[0] : "train");

  setlocale (LC_ALL, ""); /* GLib's messages in the user's charset, as ksdist's */
  ks_trainer_catch_startup_signals (name);
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
  ks_log_to_stderr (name, error == NULL ? ks_config_get_string (config, "log", "level") : "info");
  if (error == NULL)
    ks_trainer_add_task_schema (config, task);
  if (error == NULL && ks_registry_scan (registry, config, &error)
      && ks_config_validate (config, &error))
    {
      g_autoptr (KsTrainer) t = ks_trainer_new (registry, config, task, data, &error);
      if (t != NULL && ks_trainer_run (t, &error))
        return 0;
    }
  if (error == NULL) /* a callback failed without saying why */
    g_set_error (&error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                 "the task %s failed without an error message", name);
  g_strdelimit (error->message, "\n", ' ');
  g_autofree char *shown = ks_message_shorten (error->message);
  g_printerr ("%s: %s\n", name, shown);
  return error->domain == G_OPTION_ERROR ? 2 : ks_trainer_exit_status (error);
}
