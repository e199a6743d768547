/* Which process speaks for a worker. Every worker's token is the job's, so a process
 * holding it passes the CURVE handshake and could stop or push in any worker's name. A
 * worker process draws a random session at its start and begins the routing id of each
 * of its connections with it (ZeroMQ sends the routing id inside the encrypted
 * handshake, and keeps it across reconnections); a server binds worker w to the session
 * of the connection whose hello it accepted, and refuses every later request in w's name
 * from another session. */
#ifndef KS_PS_SESSION_H
#define KS_PS_SESSION_H

#include <glib.h>

#define PS_SESSION_BYTES 16

/* A session from 32 hex digits; FALSE when they are not. */
gboolean ps_session_parse (const char *hex, guint8 session[PS_SESSION_BYTES]);
/* This process's session: KS_PS_WORKER_SESSION (32 hex digits: a tool or test that
 * speaks for a worker gives the one it gave that worker) or random, drawn once. FALSE
 * with an error naming the variable when it is set but not 32 hex digits. */
gboolean ps_session_get (guint8 session[PS_SESSION_BYTES], GError **error);
/* Gives `socket` (a DEALER, before it connects) a routing id of `session` and number
 * `n`: the routing ids of a server's connections must differ. */
void ps_session_set_routing_id (void *socket, const guint8 session[PS_SESSION_BYTES],
                                guint32 n);
/* Whether routing id `id` begins with `session`. */
gboolean ps_session_owns (GBytes *id, const guint8 session[PS_SESSION_BYTES]);

#endif
