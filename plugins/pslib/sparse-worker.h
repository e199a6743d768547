/* A worker's side of the sparse tables: pulls on the calling thread, pushes queued for a
 * sending thread (each on its own connections). [strategy] staleness bounds the pushes a
 * worker may have unanswered when it pulls: 0 waits for every push before the next pull,
 * so a worker alone trains exactly as one process does. */
#ifndef KS_PSLIB_SPARSE_WORKER_H
#define KS_PSLIB_SPARSE_WORKER_H

#include "ps/client.h"

typedef struct PsSparseWorker PsSparseWorker;

typedef struct {
  const char *const *endpoints;
  const char *token;
  int index; /* the worker's */
  int timeout_ms;
  gsize max_message;
  gboolean unencrypted; /* encryption = off */
  guint64 fingerprint; /* hello's, as the dense worker's */
  guint32 mode;
  const gsize *dims; /* floats per row of each table */
  gsize n_tables;
  int staleness;
} PsSparseWorkerConfig;

/* Connects and says hello to every server; *server_step gets the step of the checkpoint
 * the servers loaded (0: none; an error when they differ). */
PsSparseWorker *ps_sparse_worker_new (const PsSparseWorkerConfig *config, gint64 *server_step,
                                      GError **error);
/* Ends the sending thread (dropping queued pushes) and closes the connections. */
void ps_sparse_worker_free (PsSparseWorker *w);
/* The client of the pulls (the main thread's), which said hello to every server: the
 * worker's heartbeats go on it. */
PsClient *ps_sparse_worker_pull_client (PsSparseWorker *w);
gboolean ps_sparse_worker_pull (PsSparseWorker *w, guint table, const guint64 *ids, gsize n,
                                gboolean create, float *out, GError **error);
gboolean ps_sparse_worker_push (PsSparseWorker *w, guint table, gint64 step,
                                const guint64 *ids, gsize n, const float *grads,
                                const float *shows, const float *clicks, GError **error);
/* Waits until the servers have every push. */
gboolean ps_sparse_worker_flush (PsSparseWorker *w, GError **error);
/* Flushes, then a day's end on every server; *deleted sums their deleted rows. */
gboolean ps_sparse_worker_shrink (PsSparseWorker *w, guint64 *deleted, GError **error);

#endif
