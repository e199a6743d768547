/* A worker's side of parameter-server training: after each backward, what the mode does
 * with the gradients (push and take the new values, queue them for a sending thread, or
 * every k steps exchange the parameter delta), and the save and stop requests. */
#ifndef KS_PS_WORKER_H
#define KS_PS_WORKER_H

#include "client.h"
#include "layout.h"
#include "strategy.h"

typedef struct PsWorker PsWorker;

/* Connects to the servers, says hello (every server within the timeout, or an error
 * naming those that never answered) and pulls the parameters into `model`.
 * *server_step receives the step of the checkpoint the servers loaded (0: none). */
PsWorker *ps_worker_new (PsClient *client, const PsLayout *layout, const PsStrategy *strategy,
                         int index, int workers, KsModel *model, gint64 *server_step,
                         GError **error);
/* Ends the sending thread (dropping queued gradients); before ps_client_free. */
void ps_worker_halt (PsWorker *w);
void ps_worker_free (PsWorker *w);
/* After a backward (and, in GEO, after the local update). */
gboolean ps_worker_step (PsWorker *w, GError **error);
/* Async: waits until every queued gradient was sent and takes the servers' values. */
gboolean ps_worker_flush (PsWorker *w, GError **error);
/* The servers' values into the model (at init; after a flush, when the sending thread is
 * idle). */
gboolean ps_worker_pull (PsWorker *w, GError **error);
/* Asks every server to write its shard of the checkpoint into `dir` (after every
 * worker's ps_worker_flush). */
gboolean ps_worker_save (PsWorker *w, const char *dir, gint64 step, GError **error);
/* Flushes, then tells every server this worker is done. */
gboolean ps_worker_stop (PsWorker *w, GError **error);

#endif
