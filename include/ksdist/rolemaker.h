/* ksdist — the role maker interface: who this process is in the job.
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

G_END_DECLS

#endif
