/* What the transpiler and pslib plugins share of their settings and of a server's start:
 * [transpiler] / [pslib] block_floats, max_message_mb, log_every_s and model_dir. */
#ifndef KS_PS_SETTINGS_H
#define KS_PS_SETTINGS_H

#include "server.h"

typedef struct {
  gsize block_floats, max_message;
  double log_every_s;
  char *model_dir;
  char *checkpoint_dir; /* [train]'s, from distributed_optimizer's config */
} PsSettings;

/* The settings' descriptions, for a plugin's descriptor (PS_N_SETTINGS entries). */
#define PS_N_SETTINGS 4
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
