/* The parameter-server plugins' shared settings (settings.h). */
#include "settings.h"

#include <string.h>

const KsKeyDesc ps_settings[PS_N_SETTINGS] = { PS_SETTINGS_KEYS };

void
ps_settings_read (const KsSettings *s, PsSettings *out)
{
  out->block_floats = ks_settings_get_int (s, "block_floats");
  out->max_message = (gsize) ks_settings_get_int (s, "max_message_mb") << 20;
  out->log_every_s = ks_settings_get_double (s, "log_every_s");
  out->model_dir = g_strdup (ks_settings_get_string (s, "model_dir"));
  out->unencrypted = strcmp (ks_settings_get_string (s, "encryption"), "off") == 0;
}

void
ps_settings_clear (PsSettings *settings)
{
  g_clear_pointer (&settings->model_dir, g_free);
  g_clear_pointer (&settings->checkpoint_dir, g_free);
}

void
ps_settings_read_job (PsSettings *settings, const KsConfig *config)
{
  const char *dir = NULL;
  /* a configuration without the trainer's keys (a benchmark's) has none */
  ks_config_lookup (config, "train", "checkpoint_dir", &dir, NULL, NULL);
  g_free (settings->checkpoint_dir);
  settings->checkpoint_dir = g_strdup (dir);
}

void
ps_server_config_init (PsServerConfig *c, KsRoleMaker *role, const PsSettings *settings,
                       int timeout_ms)
{
  int index = ks_role_maker_server_index (role);
  *c = (PsServerConfig) { 0 };
  c->index = index;
  c->servers = ks_role_maker_server_num (role);
  c->workers = ks_role_maker_worker_num (role);
  c->endpoint = ks_role_maker_pserver_endpoints (role)[index];
  c->token = g_getenv ("KS_STORE_TOKEN");
  c->timeout_ms = timeout_ms;
  c->max_message = settings->max_message;
  c->checkpoint_dir = settings->checkpoint_dir;
  c->log_every_s = settings->log_every_s;
  c->unencrypted = settings->unencrypted;
}
