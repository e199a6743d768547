/* ksdist — the communicator interface and its rendezvous store.
 *
 * A store is a small key-value service the ranks of a job meet at (a shared directory,
 * or a TCP server hosted by the launcher). A communicator is made over a store and
 * carries collectives and point-to-point messages. Every blocking call takes a timeout;
 * on expiry the error (KS_COMM_ERROR_TIMEOUT) names the operation and the ranks that
 * did not answer. Buffers are device pointers of the compute backend in use. */
#ifndef KSDIST_COMM_H
#define KSDIST_COMM_H

#include <ksdist/plugin.h>

G_BEGIN_DECLS

typedef struct {
  gsize size;

  /* required */
  void *(*create) (const KsSettings *settings, GError **error);
  void (*destroy) (void *ctx);
  /* `address` is a directory (file store) or host:port (TCP store); `prefix` keeps
   * concurrent jobs apart; `token` authenticates clients of a network store. */
  gboolean (*open) (void *ctx, const char *address, const char *prefix, const char *token,
                    GError **error);
  gboolean (*set) (void *ctx, const char *key, const void *data, gsize len, GError **error);
  /* waits up to timeout_ms for the key; the result is g_free'd by the caller */
  gboolean (*get) (void *ctx, const char *key, int timeout_ms, void **data, gsize *len,
                   GError **error);

  /* optional */
  gboolean (*wait) (void *ctx, const char *const *keys, int timeout_ms, GError **error);
  gboolean (*add) (void *ctx, const char *key, gint64 delta, gint64 *result, GError **error);
  gboolean (*remove) (void *ctx, const char *key, GError **error);
  /* hosts a store server (TCP store); returns when stopped */
  gboolean (*serve) (void *ctx, const char *address, const char *token, GError **error);
} KsStoreOps;

typedef struct {
  gsize size;

  /* required */
  void *(*create) (const KsSettings *settings, GError **error);
  void (*destroy) (void *ctx);
  /* Joins the job: `store_ops`/`store` is an opened store. */
  gboolean (*connect) (void *ctx, const KsStoreOps *store_ops, void *store, int rank, int size,
                       int timeout_ms, GError **error);
  gboolean (*allreduce) (void *ctx, void *buf, gsize count, KsDType dtype, KsReduceOp op,
                         GError **error);
  gboolean (*broadcast) (void *ctx, void *buf, gsize count, KsDType dtype, int root,
                         GError **error);
  gboolean (*barrier) (void *ctx, GError **error);

  /* optional */
  gboolean (*allgather) (void *ctx, const void *send, void *recv, gsize count, KsDType dtype,
                         GError **error);
  /* rank i contributes counts[i] elements; recv holds their concatenation */
  gboolean (*allgatherv) (void *ctx, const void *send, void *recv, const gsize *counts,
                          KsDType dtype, GError **error);
  /* send holds size * recv_count elements; rank i keeps the reduction of block i */
  gboolean (*reduce_scatter) (void *ctx, const void *send, void *recv, gsize recv_count,
                              KsDType dtype, KsReduceOp op, GError **error);
  gboolean (*send) (void *ctx, const void *buf, gsize nbytes, int peer, guint32 tag,
                    GError **error);
  gboolean (*recv) (void *ctx, void *buf, gsize nbytes, int peer, guint32 tag, GError **error);
  /* A communicator over `ranks` (sorted, includes this rank); every member calls it
   * with the same list. Returns a new ctx destroyed with destroy(). */
  void *(*subgroup) (void *ctx, const int *ranks, int n_ranks, GError **error);
  /* Sets the timeout of later operations. */
  gboolean (*set_timeout) (void *ctx, int timeout_ms, GError **error);
  int (*rank) (void *ctx);
  int (*world_size) (void *ctx);
} KsCommOps;

G_END_DECLS

#endif
