/* ksdist plugins: every plugin file found, and what became of it. */
#include "cli.h"

#include <stdio.h>

typedef struct {
  KsConfig *config;
  KsRegistry *registry;
  gboolean verbose;
} Report;

/* The implementations of one plugin, with their query results. */
static GPtrArray *
impls_of (Report *report, const KsPluginRecord *r)
{
  g_autoptr (GPtrArray) all = ks_registry_list (report->registry, KS_KIND_COUNT);
  GPtrArray *mine = g_ptr_array_new ();
  for (guint i = 0; i < all->len; i++)
    if (((KsImplInfo *) g_ptr_array_index (all, i))->plugin == r)
      g_ptr_array_add (mine, g_ptr_array_index (all, i));
  return mine;
}

/* What an implementation declares of itself (registry.h's traits), in words; NULL for a
 * kind without traits. */
static char *
traits_text (const KsImplDesc *impl)
{
  guint32 t = ks_impl_traits (impl);
  switch (impl->kind)
    {
    case KS_KIND_COMPUTE:
      return g_strdup (t & KS_COMPUTE_DEVICE_MEMORY ? "device memory" : "host memory");
    case KS_KIND_COMM:
      return g_strdup_printf ("%s, %s", t & KS_COMM_DEVICE_MEMORY ? "device memory" : "host memory",
                              t & KS_COMM_ONE_HOST ? "ranks on one host" : "ranks on any host");
    case KS_KIND_ALGORITHM:
      return g_strdup_printf ("%s%s", t & KS_ALGORITHM_SERVERS ? "parameter servers" : "no servers",
                              t & KS_ALGORITHM_SERVER_CHECKPOINTS
                                  ? ", the servers write checkpoints in shards"
                                  : ", worker 0 writes checkpoints whole");
    default:
      return NULL;
    }
}

static void
print_text (Report *report)
{
  const GPtrArray *records = ks_registry_records (report->registry);
  const char *const *path = ks_registry_search_path (report->registry);

  printf ("search path:\n");
  for (int i = 0; path[i] != NULL; i++)
    printf ("  %s\n", path[i]);
  if (path[0] == NULL)
    printf ("  (empty)\n");
  if (records->len == 0)
    printf ("no plugins found\n");
  for (guint i = 0; i < records->len; i++)
    {
      const KsPluginRecord *r = g_ptr_array_index (records, i);
      printf ("\n%-12s %-9s %s\n", r->name, ks_plugin_state_name (r->state), r->path);
      if (r->desc != NULL)
        printf ("  version %s, ABI %u.%u: %s\n", r->desc->version ? r->desc->version : "?",
                r->desc->abi_major, r->desc->abi_minor,
                r->desc->description ? r->desc->description : "");
      if (r->reason != NULL)
        printf ("  reason: %s\n", r->reason);
      if (r->state != KS_PLUGIN_LOADED)
        continue;
      g_autoptr (GPtrArray) impls = impls_of (report, r);
      for (guint j = 0; j < impls->len; j++)
        {
          const KsImplInfo *info = g_ptr_array_index (impls, j);
          if (info->reason != NULL)
            printf ("  %s %s: unavailable: %s\n", ks_kind_name (info->impl->kind),
                    info->impl->name, info->reason);
          else
            printf ("  %s %s: available, priority %d%s%s\n", ks_kind_name (info->impl->kind),
                    info->impl->name, info->priority, info->impl->description ? "; " : "",
                    info->impl->description ? info->impl->description : "");
          g_autofree char *traits = report->verbose ? traits_text (info->impl) : NULL;
          if (traits != NULL)
            printf ("    traits: %s\n", traits);
        }
      for (gsize k = 0; report->verbose && k < r->desc->n_settings; k++)
        {
          const KsKeyDesc *d = &r->desc->settings[k];
          const char *value = NULL;
          g_autofree char *where = NULL;
          g_autofree char *type = ks_cli_type_text (d);
          g_autofree char *env = ks_config_env_name (r->name, d->key);
          ks_config_lookup (report->config, r->name, d->key, &value, NULL, &where);
          printf ("  setting %s.%s = %s  (%s; %s, env %s)\n      %s\n", r->name, d->key,
                  value ? value : "(unset)", where, type, env, d->help ? d->help : "");
        }
    }
}

static void
json_settings (Report *report, GString *out, const KsPluginRecord *r)
{
  g_string_append (out, ", \"settings\": [");
  for (gsize k = 0; k < r->desc->n_settings; k++)
    {
      const KsKeyDesc *d = &r->desc->settings[k];
      const char *value = NULL;
      g_autofree char *where = NULL;
      g_autofree char *type = ks_cli_type_text (d);
      ks_config_lookup (report->config, r->name, d->key, &value, NULL, &where);
      g_string_append_printf (out, "%s{\"key\": ", k ? ", " : "");
      ks_cli_json_string (out, d->key);
      g_string_append (out, ", \"type\": ");
      ks_cli_json_string (out, type);
      g_string_append (out, ", \"default\": ");
      ks_cli_json_string (out, d->default_value);
      g_string_append (out, ", \"value\": ");
      ks_cli_json_string (out, value);
      g_string_append (out, ", \"source\": ");
      ks_cli_json_string (out, where);
      g_string_append (out, ", \"help\": ");
      ks_cli_json_string (out, d->help);
      g_string_append_c (out, '}');
    }
  g_string_append_c (out, ']');
}

static void
json_record (Report *report, GString *out, const KsPluginRecord *r)
{
  g_string_append (out, "{\"name\": ");
  ks_cli_json_string (out, r->name);
  g_string_append (out, ", \"path\": ");
  ks_cli_json_string (out, r->path);
  g_string_append (out, ", \"state\": ");
  ks_cli_json_string (out, ks_plugin_state_name (r->state));
  g_string_append (out, ", \"reason\": ");
  ks_cli_json_string (out, r->reason);
  if (r->desc != NULL)
    {
      g_string_append (out, ", \"version\": ");
      ks_cli_json_string (out, r->desc->version);
      g_string_append_printf (out, ", \"abi\": \"%u.%u\", \"description\": ", r->desc->abi_major,
                              r->desc->abi_minor);
      ks_cli_json_string (out, r->desc->description);
    }
  if (r->state == KS_PLUGIN_LOADED)
    {
      g_autoptr (GPtrArray) impls = impls_of (report, r);
      g_string_append (out, ", \"provides\": [");
      for (guint j = 0; j < impls->len; j++)
        {
          const KsImplInfo *info = g_ptr_array_index (impls, j);
          g_string_append_printf (out, "%s{\"kind\": \"%s\", \"name\": ", j ? ", " : "",
                                  ks_kind_name (info->impl->kind));
          ks_cli_json_string (out, info->impl->name);
          g_string_append_printf (out, ", \"available\": %s, \"priority\": %d, \"reason\": ",
                                  info->reason ? "false" : "true", info->priority);
          ks_cli_json_string (out, info->reason);
          g_string_append_c (out, '}');
        }
      g_string_append_c (out, ']');
      json_settings (report, out, r);
    }
  g_string_append_c (out, '}');
}

static void
print_json (Report *report)
{
  const GPtrArray *records = ks_registry_records (report->registry);
  const char *const *path = ks_registry_search_path (report->registry);
  g_autoptr (GString) out = g_string_new ("{\"abi\": ");

  g_string_append_printf (out, "\"%d.%d\", \"search_path\": [", KS_ABI_MAJOR, KS_ABI_MINOR);
  for (int i = 0; path[i] != NULL; i++)
    {
      g_string_append (out, i ? ", " : "");
      ks_cli_json_string (out, path[i]);
    }
  g_string_append (out, "], \"plugins\": [");
  for (guint i = 0; i < records->len; i++)
    {
      g_string_append (out, i ? ",\n  " : "\n  ");
      json_record (report, out, g_ptr_array_index (records, i));
    }
  g_string_append (out, "]}\n");
  fputs (out->str, stdout);
}

/* A rejected file is something to fix (a broken build, a plugin for another ksdist):
 * after the full listing, each gets an error line and the exit status says so. */
static int
report_rejections (KsRegistry *registry)
{
  const GPtrArray *records = ks_registry_records (registry);
  int status = KS_EXIT_OK;

  for (guint i = 0; i < records->len; i++)
    {
      const KsPluginRecord *r = g_ptr_array_index (records, i);
      if (r->state != KS_PLUGIN_REJECTED)
        continue;
      ks_cli_error ("plugin %s rejected: %s", r->path, r->reason);
      status = KS_EXIT_RUNTIME;
    }
  return status;
}

static int
run_plugins (int argc, char **argv)
{
  g_autofree char *file = NULL;
  g_auto (GStrv) sets = NULL;
  gboolean verbose = FALSE, json = FALSE;
  GOptionEntry entries[] = {
    { "verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose, "Also list each plugin's settings", NULL },
    { "json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON instead of text", NULL },
    { "config", 'c', 0, G_OPTION_ARG_FILENAME, &file, "Read the configuration from FILE", "FILE" },
    KS_CLI_SET_OPTION (sets),
    { NULL },
  };
  g_autoptr (KsConfig) config = NULL;
  g_autoptr (KsRegistry) registry = NULL;
  int status;

  if (!ks_cli_parse ("plugins", NULL, ks_cmd_plugins.summary, entries, &argc, &argv))
    return KS_EXIT_USAGE;
  if (argc > 1)
    {
      ks_cli_error ("plugins: unexpected argument '%s' (see ksdist help plugins)", argv[1]);
      return KS_EXIT_USAGE;
    }
  if ((status = ks_cli_load (file, sets, &config, &registry)) != KS_EXIT_OK)
    return status;
  Report report = { config, registry, verbose };
  if (json)
    print_json (&report);
  else
    print_text (&report);
  g_autofree char *hint = ks_registry_empty_hint (registry);
  if ((status = report_rejections (registry)) == KS_EXIT_OK && hint != NULL)
    {
      ks_cli_error ("plugins: %s", hint); /* nothing could run */
      status = KS_EXIT_RUNTIME;
    }
  return status;
}

const KsCommand ks_cmd_plugins = {
  "plugins",
  "List the plugins found: loaded, rejected (and why), shadowed or excluded; exit 1 if any "
  "was rejected or none loaded",
  run_plugins,
};
