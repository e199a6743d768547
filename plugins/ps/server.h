/* A parameter server's request loop: a ZeroMQ ROUTER on its endpoint, one thread. */
#ifndef KS_PS_SERVER_H
#define KS_PS_SERVER_H

#include "strategy.h"
#include "table.h"
#include "wire.h"

typedef struct {
  int index, servers, workers;
  const char *endpoint; /* HOST:PORT, bound as given (never a wildcard) */
  const char *token; /* KS_STORE_TOKEN: a server without one does not start */
  gboolean unencrypted; /* encryption = off: PLAIN, not CURVE (auth.h) */
  PsMode mode;
  double max_update_norm; /* [strategy]'s (strategy.h); 0: no bound */
  /* a sync step waits this long at most; a worker silent this long (no request, no
   * heartbeat) ends the server, naming it */
  int timeout_ms;
  gsize max_message;
  double log_every_s;
  guint64 fingerprint; /* of the layout the workers must hold */
  gint64 step;         /* of the checkpoint loaded, told to workers in hello */
  PsDenseTable *table;
  /* [train] checkpoint_dir ("" or NULL: none): a save request is served only for a
   * temporary directory of a save in it (ks_checkpoint_check_temporary) */
  const char *checkpoint_dir;
  /* writes this server's shard of a checkpoint into `dir` */
  gboolean (*save) (void *data, const char *dir, gint64 step, GError **error);
  void *save_data;
  /* Requests of the types the dense loop does not know (the pslib mode's sparse tables):
   * fills `reply` (empty on entry) and *reply_step, or returns FALSE with the message of
   * the error reply in *refusal. `payload` may be unaligned. NULL: such types are
   * refused. */
  gboolean (*extra) (void *data, const PsHeader *req, const void *payload, GByteArray *reply,
                     gint64 *reply_step, char **refusal);
  void *extra_data;
  /* cancelled: stop (see ps_server_run); NULL: never */
  GCancellable *cancellable;
} PsServerConfig;

/* Serves until every worker has sent stop; FALSE with an error naming the worker when a
 * sync step or a worker's silence exceeds the timeout, or the endpoint cannot be bound,
 * or at once without a token; G_IO_ERROR_CANCELLED once `cancellable` is cancelled and
 * no worker is left to serve, or they did not stop within the timeout of it. */
gboolean ps_server_run (const PsServerConfig *config, GError **error);

#endif
