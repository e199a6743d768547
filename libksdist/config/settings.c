/* A plugin's view of the configuration: its own group, resolved as
 * default < [<plugin>] < KS_<PLUGIN>_<KEY> < --set <plugin>.<key>=value. */
#include "ks-private.h"

struct KsSettings {
  const KsConfig *config;
  char *plugin;
};

KsSettings *
ks_settings_new (const KsConfig *config, const char *plugin)
{
  KsSettings *settings = g_new0 (KsSettings, 1);
  settings->config = config;
  settings->plugin = g_strdup (plugin);
  return settings;
}

void
ks_settings_free (KsSettings *settings)
{
  if (settings == NULL)
    return;
  g_free (settings->plugin);
  g_free (settings);
}

const char *
ks_settings_plugin (const KsSettings *settings)
{
  return settings->plugin;
}

const char *
ks_settings_get_string (const KsSettings *settings, const char *key)
{
  return ks_config_get_string (settings->config, settings->plugin, key);
}

gint64
ks_settings_get_int (const KsSettings *settings, const char *key)
{
  return ks_config_get_int (settings->config, settings->plugin, key);
}

double
ks_settings_get_double (const KsSettings *settings, const char *key)
{
  return ks_config_get_double (settings->config, settings->plugin, key);
}

gboolean
ks_settings_get_bool (const KsSettings *settings, const char *key)
{
  return ks_config_get_bool (settings->config, settings->plugin, key);
}

gboolean
ks_settings_is_set (const KsSettings *settings, const char *key)
{
  return ks_config_is_set (settings->config, settings->plugin, key);
}
