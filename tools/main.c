/* ksdist: the command line. `ksdist help` lists the subcommands. */
#include "cli.h"

#include <locale.h>
#include <stdio.h>
#include <string.h>

static const KsCommand *const commands[] = {
  &ks_cmd_train,   &ks_cmd_launch, &ks_cmd_segment, &ks_cmd_generate, &ks_cmd_infer,
  &ks_cmd_export,  &ks_cmd_datagen, &ks_cmd_plot,   &ks_cmd_bench,    &ks_cmd_plugins,
  &ks_cmd_config,  NULL,
};

static void
print_help (FILE *out)
{
  fprintf (out, "Usage: ksdist COMMAND [OPTIONS...]\n\n"
                "Distributed neural-network training.\n\nCommands:\n");
  for (int i = 0; commands[i] != NULL; i++)
    fprintf (out, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
  fprintf (out, "  %-10s %s\n\n", "help", "Show the help of a command");
  fprintf (out, "Options:\n  --version  Print the version\n  --help     Show this help\n\n"
                "Run `ksdist help COMMAND` for a command's options.\n");
}

static const KsCommand *
find_command (const char *name)
{
  for (int i = 0; commands[i] != NULL; i++)
    if (strcmp (commands[i]->name, name) == 0)
      return commands[i];
  return NULL;
}

static int
unknown_command (const char *name)
{
  const char *names[G_N_ELEMENTS (commands)];
  gsize n = 0;
  const char *near;

  for (; commands[n] != NULL; n++)
    names[n] = commands[n]->name;
  if ((near = ks_suggest (name, names, n)) != NULL)
    ks_cli_error ("unknown command '%s'; did you mean '%s'? (see ksdist --help)", name, near);
  else
    ks_cli_error ("unknown command '%s' (see ksdist --help)", name);
  return KS_EXIT_USAGE;
}

int
main (int argc, char **argv)
{
  const KsCommand *command;

  setlocale (LC_ALL, "");
  ks_log_to_stderr ("ksdist", "info");
  if (argc < 2)
    {
      print_help (stderr);
      return KS_EXIT_USAGE;
    }
  if (strcmp (argv[1], "--version") == 0 || strcmp (argv[1], "-V") == 0)
    {
      printf ("ksdist %s (plugin ABI %d.%d)\n", ks_version (), KS_ABI_MAJOR, KS_ABI_MINOR);
      return KS_EXIT_OK;
    }
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0)
    {
      print_help (stdout);
      return KS_EXIT_OK;
    }
  if (strcmp (argv[1], "help") == 0)
    {
      if (argc < 3 || strcmp (argv[2], "help") == 0)
        {
          print_help (stdout);
          return KS_EXIT_OK;
        }
      if ((command = find_command (argv[2])) == NULL)
        return unknown_command (argv[2]);
      char *help_argv[] = { argv[2], "--help", NULL };
      return command->run (2, help_argv);
    }
  if (argv[1][0] == '-')
    {
      ks_cli_error ("unknown option '%s' (see ksdist --help)", argv[1]);
      return KS_EXIT_USAGE;
    }
  if ((command = find_command (argv[1])) == NULL)
    return unknown_command (argv[1]);
  return command->run (argc - 1, argv + 1);
}
