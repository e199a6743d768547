/* A parameter-server job's checkpoints, shared by the transpiler and pslib modes: a
 * directory checkpoint-N holding every server's files and job.json (the step, epoch,
 * server count and the trainer's metadata), written under a hidden name and renamed into
 * place once complete. */
#ifndef KS_PS_JOB_H
#define KS_PS_JOB_H

#include <ksdist/ksdist.h>

#define PS_JOB_FILE "job.json"
#define PS_JOB_PREFIX "checkpoint-"
/* job.json's identity of the save (ks_checkpoint_save_id of the directory it was written
 * in): every server's files carry it too, and a load refuses a file that does not */
#define PS_JOB_SAVE_KEY KS_CHECKPOINT_SAVE_KEY

/* What every file of a checkpoint must say it is, from its job.json. */
typedef struct {
  char *file;    /* the job.json, for messages */
  gint64 step;
  int servers;
  char *save_id; /* NULL: written by an older ksdist, whose files name no save */
} PsJobIdentity;

/* Reads checkpoint `path`'s job.json into `id` (cleared first; clear it after, also on
 * failure). */
gboolean ps_job_identity_read (const char *path, PsJobIdentity *id, GError **error);
void ps_job_identity_clear (PsJobIdentity *id);

/* The newest complete checkpoint-N under `dir` (a new string), or NULL. */
char *ps_job_latest (const char *dir);
/* What init_server(model_dir) loads: `model_dir` itself when it is a checkpoint, else
 * its newest; an error naming it when it holds none or does not exist. */
char *ps_job_resolve (const char *model_dir, GError **error);
/* job.json of checkpoint `path`. */
gboolean ps_job_read (const char *path, KsTrainStatus *status, GHashTable **metadata,
                      GError **error);

/* Writes checkpoint-<step> under `dir`: `save_servers` has every server write its files
 * into the hidden directory it is given, then job.json goes beside them and the directory
 * is committed as every checkpoint is (ks_checkpoint_commit: a checkpoint-<step> already
 * there replaced whole); the newest `keep` stay. */
typedef gboolean (*PsSaveServers) (void *data, const char *dir, gint64 step, GError **error);
gboolean ps_job_save (const char *dir, const KsTrainStatus *status, GHashTable *metadata,
                      int servers, guint keep, PsSaveServers save_servers, void *data,
                      GError **error);

/* OpenKS's save_check_point for the workers of a parameter-server job: once every worker
 * is at the same step (after `flush`), worker 0 writes (ps_job_save); every worker gets
 * the outcome. */
gboolean ps_job_save_check_point (KsRoleMaker *role, const char *dir,
                                  const KsTrainStatus *status, GHashTable *metadata,
                                  guint keep, PsSaveServers save_servers, void *data,
                                  GError **error);
/* OpenKS's load_check_point: every worker takes the checkpoint worker 0 finds in `dir`;
 * *found is its step, or -1 with none (status then { -1, 0 }). */
gboolean ps_job_load_check_point (KsRoleMaker *role, const char *dir, KsTrainStatus *status,
                                  GHashTable **metadata, gint64 *found, GError **error);

#endif
