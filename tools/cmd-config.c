/* ksdist config: the effective configuration and where each value came from. */
#include "train.h"

#include <stdio.h>
#include <string.h>

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

/* A table cell: '|' escaped, so Markdown keeps one cell. */
static char *
cell (const char *text)
{
  GString *out = g_string_new (NULL);
  for (const char *p = text != NULL ? text : ""; *p != '\0'; p++)
    {
      if (*p == '|')
        g_string_append_c (out, '\\');
      g_string_append_c (out, *p);
    }
  return g_string_free (out, FALSE);
}

static char *
allowed (const KsKeyDesc *d)
{
  static const char *const types[] = { "text", "integer", "number", "true or false", "", "a list",
                                       "a path to read" };
  if (d->type == KS_VALUE_CHOICE)
    {
      g_auto (GStrv) words = g_strsplit (d->choices, "|", -1);
      return g_strjoinv (", ", words);
    }
  if ((d->type == KS_VALUE_INT || d->type == KS_VALUE_DOUBLE) && d->min <= d->max)
    return g_strdup_printf ("%s in [%g, %g]", types[d->type], d->min, d->max);
  return g_strdup (types[d->type]);
}

/* Who reads a key: the core library, the tasks library, or the plugin of its group. */
typedef enum { READER_CORE, READER_TASKS, READER_PLUGIN } Reader;

static Reader
reader_of (const KsConfig *core, const KsConfig *tasks, const char *group, const char *key)
{
  if (ks_config_lookup (core, group, key, NULL, NULL, NULL))
    return READER_CORE;
  return ks_config_lookup (tasks, group, key, NULL, NULL, NULL) ? READER_TASKS : READER_PLUGIN;
}

/* The keys of `group` that `reader` reads, as a "### [group]" section (none: nothing). */
static void
print_group (const KsConfig *config, const KsConfig *core, const KsConfig *tasks,
             const char *group, Reader reader)
{
  g_autoptr (GPtrArray) keys = ks_config_group_keys (config, group);
  const char *star = strstr (group, ".*");
  gboolean heading = FALSE;

  if (star == NULL && strchr (group, '.') != NULL)
    return; /* a template's instance, written in the file read */
  for (guint i = 0; i < keys->len; i++)
    {
      const KsKeyDesc *d = g_ptr_array_index (keys, i);
      if (reader_of (core, tasks, group, d->key) != reader)
        continue;
      if (!heading && star != NULL)
        printf ("\n### [%.*s.NAME]\n\n", (int) (star - group), group);
      else if (!heading)
        printf ("\n### [%s]%s\n\n", group, reader == READER_PLUGIN ? " (plugin)" : "");
      if (!heading)
        printf ("| key | default | allowed | meaning |\n|---|---|---|---|\n");
      heading = TRUE;
      g_autofree char *def = cell (d->default_value);
      g_autofree char *ok = allowed (d);
      g_autofree char *help = cell (d->help);
      printf ("| `%s` | %s%s%s | %s | %s |\n", d->key, *def ? "`" : "", def, *def ? "`" : "",
              ok, help);
    }
}

/* Every group and key this ksdist knows, as Markdown, grouped by who reads it: the core's,
 * the tasks library's, and the plugins' found. doc/config.md is this output
 * (tests/test-reference.sh). */
static void
print_reference (const KsConfig *config)
{
  static const char *const sections[] = {
    "## The core's keys (libksdist)\n\n"
    "Read by the core library: every program on it knows them, `ksdist train`'s and a C "
    "program's of its own (`include/ksdist/trainer.h`) alike.\n",
    "## The tasks library's keys (libksdist-tasks)\n\n"
    "Read by the models, data readers and Reptile that `ksdist train` knows by name (the "
    "tasks library); every ksdist command knows them. A C program on the core alone does "
    "not: its task declares the keys it reads (`KsTrainTask.schema`), or it adds these "
    "with `ks_tasks_add_schema`.\n",
    "## The plugins' keys\n\n"
    "Each plugin's settings, in a group named after it, known once the plugin is loaded "
    "(`ksdist plugins -v`); a group of a ksdist plugin not built here (`[cuda]` on a "
    "machine without CUDA) is warned about and ignored.\n",
  };
  g_auto (GStrv) groups = ks_config_groups (config);
  g_autoptr (KsConfig) core = ks_config_new ();
  g_autoptr (KsConfig) tasks = ks_config_new ();
  g_autoptr (GPtrArray) plugins = g_ptr_array_new ();

  ks_tasks_add_schema (tasks);
  g_auto (GStrv) known = ks_config_groups (tasks); /* the core's and the tasks library's */
  for (int g = 0; groups[g] != NULL; g++)
    if (!g_strv_contains ((const char *const *) known, groups[g]))
      g_ptr_array_add (plugins, groups[g]);
  g_ptr_array_add (plugins, NULL);
  g_autofree char *names = g_strjoinv (", ", (char **) plugins->pdata);
  printf ("# ksdist configuration reference\n\n"
          "Every group and key of ksdist's configuration, grouped by who reads it: the core, "
          "the tasks library, and the plugins found when it was made (%s). Written by "
          "`ksdist config --reference`, which prints "
          "what the program knows; `tests/test-reference.sh` fails when this file differs. A "
          "value resolves as default < file < environment `KS_<GROUP>_<KEY>` < `--set "
          "group.key=value`; an unknown group or key, or a value out of its range, is an "
          "error naming it.\n\n"
          "A `#` or `;` that begins a value or follows a blank starts a comment to the end "
          "of the line (`path = digits   # MNIST's four files` is `digits`), as in the "
          "output of `ksdist config`: a comment kept in the value would make a wrong value "
          "that is hard to see. Write `\\#` or `\\;` for a literal one (`label = "
          "size\\#2`); a `#` inside a word (`a#b`) is the value's.\n\n"
          "Files a run reads (the keys of type \"a path to read\": `[model] init_from`, "
          "`[data] path`, `test_path`, `labels`, `test_labels`, and a program's task's own "
          "keys it declares so): a relative path written in a config file is looked for in the config "
          "file's folder first, then in the current directory, so a config and its data "
          "copied or installed together work from anywhere, and configs run from a "
          "project's root with paths from there (or `ksdist datagen`'s output in the current "
          "directory) work as before; a relative path given by `--set` or `KS_<GROUP>_<KEY>` "
          "is taken from the current directory, as a shell argument is. One that is not "
          "there is an error naming the setting, where it was set and this rule (`ksdist "
          "config` checks it too). Folders a run writes (`checkpoint_dir`, `export_dir`, "
          "`[trace] path`) are taken from the current directory.\n", names);
  for (Reader r = READER_CORE; r <= READER_PLUGIN; r++)
    {
      printf ("\n%s", sections[r]);
      for (int g = 0; groups[g] != NULL; g++)
        print_group (config, core, tasks, groups[g], r);
    }
}

static int
run_config (int argc, char **argv)
{
  g_auto (GStrv) sets = NULL;
  KsTrainWorld world = { 0, 0 };
  int workers = G_MININT, servers = G_MININT; /* G_MININT: not given */
  gboolean reference = FALSE;
  GOptionEntry entries[] = {
    KS_CLI_SET_OPTION (sets),
    { "reference", 0, 0, G_OPTION_ARG_NONE, &reference,
      "Print every group and key known (the core's and the plugins' found), with its type, "
      "range, default and meaning, as Markdown (doc/config.md), and nothing else", NULL },
    { "workers", 'n', 0, G_OPTION_ARG_INT, &workers,
      "Check for a job of N workers (as ksdist launch -n N or --workers N)", "N" },
    { "servers", 0, 0, G_OPTION_ARG_INT, &servers,
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
  if (reference && (argc > 1 || sets != NULL))
    {
      ks_cli_error ("config: --reference takes no FILE and no --set: it prints what this "
                    "ksdist knows");
      return KS_EXIT_USAGE;
    }
  /* launch's own check of the counts, so that a 0 exit here means launch takes them */
  g_autofree char *given = g_strdup_printf ("-n %d", workers);
  if (workers != G_MININT && !ks_cli_check_processes ("config", given, workers))
    return KS_EXIT_USAGE;
  if (servers != G_MININT)
    {
      int w = workers != G_MININT ? workers : 1;
      gint64 total = servers < 0 ? servers : MIN ((gint64) servers + w, G_MAXINT);
      g_free (given);
      given = workers != G_MININT ? g_strdup_printf ("--servers %d -n %d", servers, w)
                                  : g_strdup_printf ("--servers %d (and 1 worker)", servers);
      if (!ks_cli_check_processes ("config", given, (int) total))
        return KS_EXIT_USAGE;
    }
  world.workers = workers != G_MININT ? workers : 0;
  world.servers = servers != G_MININT ? servers : 0;
  if ((status = ks_cli_load (argc == 2 ? argv[1] : NULL, sets, &config, &registry)) != KS_EXIT_OK)
    return status;
  if (reference)
    {
      print_reference (config);
      return KS_EXIT_OK;
    }
  /* printed as written, before the check sets what follows from other keys */
  print_config (config);
  fflush (stdout);
  gboolean sized = world.workers > 0 || world.servers > 0;
  if (world.servers > 0 && world.workers == 0)
    world.workers = 1;
  status = ks_train_check (registry, config, &world, TRUE);
  /* a parameter-server job passed here and refused by `ksdist train` alone surprised a
   * new user: say what was not checked */
  guint32 traits = 0;
  if (status == KS_EXIT_OK && !sized
      && ks_registry_traits (registry, KS_KIND_ALGORITHM,
                             ks_config_get_string (config, "job", "mode"), &traits)
      && (traits & KS_ALGORITHM_SERVERS))
    g_message ("the job's size was not checked: give --servers S and -n N (workers) as to "
               "ksdist launch");
  return status;
}

const KsCommand ks_cmd_config = {
  "config",
  "Check a configuration and print every effective value with its source",
  run_config,
};
