/* ksdist config: the effective configuration and where each value came from. */
#include "train.h"

#include <stdio.h>

static void
print_config (const KsConfig *config)
{
  g_auto (GStrv) groups = ks_config_groups (config);

  for (int g = 0; groups[g] != NULL; g++)
    {
      g_autoptr (GPtrArray) keys = ks_config_group_keys (config, groups[g]);
      printf ("%s[%s]\n", g ? "\n" : "", groups[g]);
      for (guint i = 0; i < keys->len; i++)
        {
          const KsKeyDesc *d = g_ptr_array_index (keys, i);
          const char *value = NULL;
          g_autofree char *where = NULL;
          g_autofree char *line = NULL;
          ks_config_lookup (config, groups[g], d->key, &value, NULL, &where);
          line = g_strdup_printf ("%s = %s", d->key, value != NULL ? value : "");
          printf ("%-32s # %s\n", line, where);
        }
    }
}

static int
run_config (int argc, char **argv)
{
  g_auto (GStrv) sets = NULL;
  KsTrainWorld world = { 0, 0 };
  GOptionEntry entries[] = {
    KS_CLI_SET_OPTION (sets),
    { "workers", 'n', 0, G_OPTION_ARG_INT, &world.workers,
      "Check for a job of N workers (as ksdist launch -n N or --workers N)", "N" },
    { "servers", 0, 0, G_OPTION_ARG_INT, &world.servers,
      "Check for a job with N parameter servers (as ksdist launch --servers N)", "N" },
    { NULL }
  };
  g_autoptr (KsConfig) config = NULL;
  g_autoptr (KsRegistry) registry = NULL;
  int status;

  if (!ks_cli_parse ("config", "[FILE]", ks_cmd_config.summary, entries, &argc, &argv))
    return KS_EXIT_USAGE;
  if (argc > 2)
    {
      ks_cli_error ("config: one FILE at most, got '%s' too (see ksdist help config)", argv[2]);
      return KS_EXIT_USAGE;
    }
  if ((status = ks_cli_load (argc == 2 ? argv[1] : NULL, sets, &config, &registry)) != KS_EXIT_OK)
    return status;
  /* printed as written, before the check sets what follows from other keys */
  print_config (config);
  fflush (stdout);
  if (world.servers > 0 && world.workers == 0)
    world.workers = 1;
  return ks_train_check (registry, config, &world, TRUE);
}

const KsCommand ks_cmd_config = {
  "config",
  "Check a configuration and print every effective value with its source",
  run_config,
};
