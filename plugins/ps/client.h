/* A worker's connections to the servers: one ZeroMQ DEALER each; a call sends one
 * request to several servers at once and waits for every reply until a deadline. */
#ifndef KS_PS_CLIENT_H
#define KS_PS_CLIENT_H

#include "wire.h"

#include <ksdist/ksdist.h>

/* A worker waits this much longer than [comm] timeout for an answer: a server that gives
 * up on a missing worker after the timeout answers the others first, naming it. */
#define PS_ANSWER_SLACK_MS 2000

typedef struct PsClient PsClient;

/* One server's part of a call. */
typedef struct {
  int server;
  const void *payload; /* the request's */
  gsize len;
  const PsSegment *reply; /* receive the reply's payload, which must be as long as they
                             are together (NULL: any payload, ignored); the awaited
                             reply's frames are copied straight into them, once its header
                             is checked: a late or refused reply leaves them as they were */
  gsize n_reply;
  gint64 reply_step; /* the reply header's step */
} PsCall;

/* `unencrypted`: PLAIN, not CURVE (the job's `encryption = off`, auth.h). */
PsClient *ps_client_new (const char *const *endpoints, const char *token, guint32 worker,
                         int timeout_ms, gsize max_message, gboolean unencrypted,
                         GError **error);
void ps_client_free (PsClient *client);
int ps_client_servers (const PsClient *client);
const char *ps_client_endpoint (const PsClient *client, int server);
/* Sends `type` to calls[i].server for each i, then waits for all the replies; an error
 * names every server that did not answer within the deadline, or the first that refused. */
gboolean ps_client_call (PsClient *client, PsType type, gint64 step, guint32 arg, guint64 aux,
                         PsCall *calls, gsize n, GError **error);

/* Heartbeats, once the worker said hello to every server: a thread sends one to every
 * server every timeout_ms / 6 (at most 1 s) and reads their answers; a call in progress
 * sends them itself. When a server answered nothing for `timeout_ms` ([comm] timeout), or
 * this process was itself stopped or starved longer than that (ksdist/away.h's watch:
 * the servers gave up on it), the worker ends at once with exit status 3, saying which,
 * even while it computes; a call fails with that error. */
void ps_client_heartbeat_start (PsClient *client, int timeout_ms);
/* Before the worker's stop request: the servers may end after it. */
void ps_client_heartbeat_stop (PsClient *client);

#endif
