/* Shared pieces of the subcommands: errors, option parsing, loading config + plugins. */
#include "cli.h"

#include <stdio.h>

void
ks_cli_error (const char *format, ...)
{
  va_list args;
  g_autofree char *message = NULL;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  /* a value quoted whole (a 1 MB path) would make one unreadable line */
  g_autofree char *whole = g_steal_pointer (&message);
  message = ks_message_shorten (whole);
  /* One line each, so scripts and log collectors can take it whole. */
  g_strdelimit (message, "\n", ' ');
  fprintf (stderr, "ksdist: %s\n", message);
}

gboolean
ks_cli_check_processes (const char *command, const char *given, int n)
{
  if (n >= 1 && n <= KS_CLI_MAX_PROCESSES)
    return TRUE;
  ks_cli_error ("%s: %s: start between 1 and %d processes", command, given,
                KS_CLI_MAX_PROCESSES);
  return FALSE;
}

int
ks_cli_fail (const GError *error)
{
  ks_cli_error ("%s", error->message);
  return ks_trainer_exit_status (error);
}

gboolean
ks_cli_parse (const char *name, const char *parameters, const char *summary,
              GOptionEntry *entries, int *argc, char ***argv)
{
  g_autofree char *program = g_strdup_printf ("ksdist %s", name);
  g_autoptr (GOptionContext) context = g_option_context_new (parameters);
  g_autoptr (GError) error = NULL;

  g_set_prgname (program); /* --help prints "Usage: ksdist NAME [OPTION…] PARAMETERS" */

  g_option_context_set_summary (context, summary);
  g_option_context_add_main_entries (context, entries, NULL);
  g_option_context_set_help_enabled (context, TRUE);
  if (!g_option_context_parse (context, argc, argv, &error))
    {
      ks_cli_error ("%s: %s (see ksdist help %s)", name, error->message, name);
      return FALSE;
    }
  return TRUE;
}

void
ks_cli_print_help (const char *name, const char *parameters, const char *summary,
                   GOptionEntry *entries)
{
  g_autofree char *program = g_strdup_printf ("ksdist %s", name);
  g_autoptr (GOptionContext) context = g_option_context_new (parameters);

  g_set_prgname (program);
  g_option_context_set_summary (context, summary);
  g_option_context_add_main_entries (context, entries, NULL);
  g_autofree char *help = g_option_context_get_help (context, TRUE, NULL);
  fputs (help, stdout);
}

int
ks_cli_load (const char *file, char **sets, KsConfig **config_out, KsRegistry **registry_out)
{
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = ks_registry_new ();
  g_autoptr (GError) error = NULL;

  ks_tasks_add_schema (config); /* the built-in tasks' keys, which ksdist train reads */
  if (file != NULL && !ks_config_load_file (config, file, &error))
    goto fail;
  for (int i = 0; sets != NULL && sets[i] != NULL; i++)
    if (!ks_config_set_override (config, sets[i], &error))
      goto fail;
  /* before validation, whose warnings it filters; a bad value falls back to the default */
  ks_log_to_stderr ("ksdist", ks_config_get_string (config, "log", "level"));
  if (!ks_registry_scan (registry, config, &error) || !ks_config_validate (config, &error))
    goto fail;
  *config_out = g_steal_pointer (&config);
  *registry_out = g_steal_pointer (&registry);
  return KS_EXIT_OK;

fail:
  ks_cli_error ("%s", error->message);
  return KS_EXIT_USAGE;
}

void
ks_cli_json_string (GString *out, const char *s)
{
  if (s == NULL)
    {
      g_string_append (out, "null");
      return;
    }
  g_string_append_c (out, '"');
  for (const unsigned char *p = (const unsigned char *) s; *p != '\0'; p++)
    {
      if (*p == '"' || *p == '\\')
        g_string_append_printf (out, "\\%c", *p);
      else if (*p < 0x20)
        g_string_append_printf (out, "\\u%04x", *p);
      else
        g_string_append_c (out, *p);
    }
  g_string_append_c (out, '"');
}

char *
ks_cli_type_text (const KsKeyDesc *d)
{
  static const char *const names[] = { "string", "int", "double", "bool", "choice", "list",
                                       "path" };
  const char *name = (guint) d->type < G_N_ELEMENTS (names) ? names[d->type] : "?";

  if (d->type == KS_VALUE_CHOICE)
    return g_strdup_printf ("%s (%s)", name, d->choices);
  if ((d->type == KS_VALUE_INT || d->type == KS_VALUE_DOUBLE) && d->min <= d->max)
    return g_strdup_printf ("%s in [%g, %g]", name, d->min, d->max);
  return g_strdup (name);
}

char *
ks_cli_checkpoint_path (const char *arg)
{
  char *newest = ks_checkpoint_latest (arg);
  return newest != NULL ? newest : g_strdup (arg);
}

int
ks_cli_checkpoint_fail (const GError *error)
{
  ks_cli_error ("%s", error->message);
  if (error->domain != KS_CHECKPOINT_ERROR)
    return ks_trainer_exit_status (error);
  return error->code == KS_CHECKPOINT_ERROR_CORRUPT ? KS_EXIT_RUNTIME : KS_EXIT_USAGE;
}
