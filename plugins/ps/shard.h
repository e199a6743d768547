/* A server's part of a checkpoint: DIR/server-<i>-of-<S>.safetensors, its blocks' values
 * ("<param>@<offset>") and optimizer state ("optim.<k>.<param>@<offset>"), with the step,
 * the optimizer's step, the save's identity (save_id, as job.json's) and a SHA-256 in the
 * metadata. Written under a
 * temporary name, fsynced, renamed. Loading reads every shard of a checkpoint and takes
 * the ranges this server holds now, so a job restarts with another server count. */
#ifndef KS_PS_SHARD_H
#define KS_PS_SHARD_H

#include "job.h"
#include "table.h"

gboolean ps_shard_save (PsDenseTable *t, const char *dir, int server, int servers, gint64 step,
                        GError **error);
/* Fills the table from the checkpoint directory `dir`, whose every shard must be of the
 * save `id` (its job.json) names: the same save_id (when job.json has one), step and
 * server count, each at its own place; *step receives its job step. */
gboolean ps_shard_load (PsDenseTable *t, const char *dir, const PsJobIdentity *id,
                        gint64 *step, GError **error);

#endif
