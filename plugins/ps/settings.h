/* What the transpiler and pslib plugins share of their settings and of a server's start:
 * [transpiler] / [pslib] block_floats, max_message_mb, log_every_s, model_dir and
 * encryption. */
#ifndef KS_PS_SETTINGS_H
#define KS_PS_SETTINGS_H

#include "server.h"

typedef struct {
  gsize block_floats, max_message;
  double log_every_s;
  gboolean unencrypted; /* encryption = off */
  char *model_dir;
  char *checkpoint_dir; /* [train]'s, from distributed_optimizer's config */
} PsSettings;

/* The settings' descriptions, for a plugin's descriptor (PS_N_SETTINGS entries); a
 * plugin with settings of its own (pslib) starts its list with PS_SETTINGS_KEYS. */
#define PS_SETTINGS_KEYS \
  { NULL, "block_floats", KS_VALUE_INT, "8192", 1, 1e12, NULL, \
    "Least floats in a dense block: a parameter of n floats is cut into min(servers, n / " \
    "block_floats) blocks, spread over the servers round-robin" }, \
  { NULL, "max_message_mb", KS_VALUE_INT, "1024", 1, 1 << 20, NULL, \
    "Largest message a server or worker accepts, in MiB; a larger one is refused" }, \
  { NULL, "log_every_s", KS_VALUE_DOUBLE, "10", 0, 1e6, NULL, \
    "Seconds between a server's log lines of request rate, bytes and updates; 0 only at the end" }, \
  { NULL, "model_dir", KS_VALUE_STRING, "", 1, 0, NULL, \
    "Servers start from this checkpoint (init_server's model_dir: a checkpoint-N directory " \
    "of a parameter-server job of this mode, or a directory holding them; any server " \
    "count); empty for the initial values" }, \
  { NULL, "encryption", KS_VALUE_CHOICE, "curve", 1, 0, "curve|off", \
    "curve: the servers' traffic is encrypted and authenticated (ZeroMQ CURVE, keys " \
    "derived from KS_STORE_TOKEN); off, for a trusted network only: workers prove a " \
    "password derived from the token (ZeroMQ PLAIN) and the parameters travel readable, " \
    "as every server's and worker's start line says; a job without a token is refused " \
    "either way" }
#define PS_N_SETTINGS 5
extern const KsKeyDesc ps_settings[PS_N_SETTINGS];

void ps_settings_read (const KsSettings *s, PsSettings *out);
void ps_settings_clear (PsSettings *settings);
/* From the job's configuration (distributed_optimizer's): [train] checkpoint_dir, the
 * only directory a server writes checkpoints into. */
void ps_settings_read_job (PsSettings *settings, const KsConfig *config);

/* A server's config from the role maker (its index, counts, endpoint), the job's token
 * and the settings; the caller sets the rest (mode, table, save, ...). */
void ps_server_config_init (PsServerConfig *c, KsRoleMaker *role, const PsSettings *settings,
                            int timeout_ms);

#endif
