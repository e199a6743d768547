/* ksdist — the role maker interface: who this process is in the job.
 *
 * For authors of a role maker plugin (KsRoleMakerOps) and of modes that ask who is a
 * worker or a server.
 *
 * After OpenKS's RoleMakerBase: a process is a worker (trainer) or a server, with an
 * index among its kind, and knows every endpoint. Its collectives are real: workers
 * among themselves; all_gather and barrier_all over workers followed by servers. */
#ifndef KSDIST_ROLEMAKER_H
#define KSDIST_ROLEMAKER_H

#include <ksdist/comm.h>

G_BEGIN_DECLS

typedef enum { KS_ROLE_WORKER = 0, KS_ROLE_SERVER = 1 } KsRole;

typedef struct {
  gsize size;

  /* required */
  void *(*create) (const KsSettings *settings, GError **error);
  void (*destroy) (void *ctx);
  /* Reads the environment or configuration; fails naming the missing variable or key. */
  gboolean (*generate_role) (void *ctx, GError **error);
  gboolean (*is_worker) (void *ctx);
  gboolean (*is_server) (void *ctx);
  gboolean (*is_first_worker) (void *ctx);
  int (*worker_num) (void *ctx);
  int (*worker_index) (void *ctx);
  int (*server_num) (void *ctx);
  int (*server_index) (void *ctx);
  /* NULL-terminated, owned by the role maker */
  const char *const *(*get_trainer_endpoints) (void *ctx);
  const char *const *(*get_pserver_endpoints) (void *ctx);
  char *(*to_string) (void *ctx);

  /* optional: the collectives, over a communicator the role maker owns */
  /* gathers one int64 from every process (workers, then servers) */
  gboolean (*all_gather) (void *ctx, gint64 value, gint64 *out, GError **error);
  gboolean (*all_reduce_worker) (void *ctx, const double *in, double *out, gsize count,
                                 KsReduceOp op, GError **error);
  gboolean (*barrier_worker) (void *ctx, GError **error);
  gboolean (*barrier_all) (void *ctx, GError **error);
} KsRoleMakerOps;

/* ---- the core's handle on a role maker ---- */

typedef struct KsRoleMaker KsRoleMaker;

/* Creates the role maker `name` ("paddlecloud", "user", "env"; NULL or "auto" = the one
 * whose environment is present) and runs its generate_role. */
KsRoleMaker *ks_role_maker_new (KsRegistry *registry, const KsConfig *config, const char *name,
                                GError **error);
void ks_role_maker_free (KsRoleMaker *role);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsRoleMaker, ks_role_maker_free)
const char *ks_role_maker_name (const KsRoleMaker *role);
gboolean ks_role_maker_is_worker (const KsRoleMaker *role);
gboolean ks_role_maker_is_server (const KsRoleMaker *role);
gboolean ks_role_maker_is_first_worker (const KsRoleMaker *role);
int ks_role_maker_worker_num (const KsRoleMaker *role);
int ks_role_maker_worker_index (const KsRoleMaker *role);
int ks_role_maker_server_num (const KsRoleMaker *role);
int ks_role_maker_server_index (const KsRoleMaker *role);
const char *const *ks_role_maker_trainer_endpoints (const KsRoleMaker *role);
const char *const *ks_role_maker_pserver_endpoints (const KsRoleMaker *role);
char *ks_role_maker_to_string (const KsRoleMaker *role);
/* This process's rank among all of the job's: workers first, then servers. */
int ks_role_maker_global_rank (const KsRoleMaker *role);

/* This worker's share of `files` (OpenKS's split_files): contiguous blocks in order,
 * len / n files each (integer division), the first len % n workers one more. A NULL-
 * terminated copy (g_strfreev), possibly empty; NULL with an error on a server. */
char **ks_role_maker_split_files (const KsRoleMaker *role, const char *const *files,
                                  GError **error);

/* Gives the role maker the communicator over all of the job's processes (ranked as
 * ks_role_maker_global_rank says; it must outlive the role maker). The collectives below
 * run over it, and workers' ones over a sub-group of the workers made here. */
gboolean ks_role_maker_set_comm (KsRoleMaker *role, KsComm *all, GError **error);
/* The workers' communicator (NULL before set_comm, and on a server). */
KsComm *ks_role_maker_worker_comm (const KsRoleMaker *role);
gboolean ks_role_maker_all_gather (KsRoleMaker *role, gint64 value, gint64 *out, GError **error);
gboolean ks_role_maker_all_reduce_worker (KsRoleMaker *role, const double *in, double *out,
                                          gsize count, KsReduceOp op, GError **error);
gboolean ks_role_maker_barrier_worker (KsRoleMaker *role, GError **error);
gboolean ks_role_maker_barrier_all (KsRoleMaker *role, GError **error);

G_END_DECLS

#endif
