/* Who may talk to a parameter server, and how much an unknown peer may cost it.
 *
 * Every connection is ZeroMQ CURVE: the server's keypair and the workers' keypair are both
 * derived from the job's token (KS_STORE_TOKEN) with different labels, so a process
 * without the token can neither complete a handshake with a server (its ZAP handler
 * admits only the workers' public key) nor pose as one. Each connection has its own
 * transient keys, so captured bytes replay nothing. A job that says `encryption = off`
 * (a trusted network, where CURVE's cipher would cost more than the link) uses ZeroMQ's
 * PLAIN instead: a worker proves a password derived from the token, in clear, and the
 * traffic is readable on the way; a process without the token still gets nothing.
 * Before the handshake completes a peer can hold: one frame of at most PS_FRAME_MAX bytes
 * (ZMQ_MAXMSGSIZE; messages are split into frames no larger), [comm] timeout of time
 * (ZMQ_HANDSHAKE_IVL), and one of a bounded number of connections
 * (ps_auth_connection_cap). */
#ifndef KS_PS_AUTH_H
#define KS_PS_AUTH_H

#include <glib.h>

/* A message's payload travels in frames of at most this many bytes; a frame on the wire
 * is at most PS_FRAME_MAX_WIRE (the payload, CURVE's box and ZeroMQ's command name). */
#define PS_FRAME_MAX (1u << 20)
#define PS_FRAME_MAX_WIRE (PS_FRAME_MAX + 256)

/* Whether this libzmq has CURVE; else an error saying so, naming `who`. */
gboolean ps_auth_available (const char *who, GError **error);
/* The Z85 keypair (41 bytes each, NUL included) of `role` ("server" or "worker") of the
 * job with `token`. */
void ps_auth_keypair (const char *token, const char *role, char public_key[41],
                      char secret_key[41]);
/* What every server's and worker's start line says of a job with `encryption = off`. */
#define PS_UNENCRYPTED_NOTE                                                              \
  "NOT ENCRYPTED (encryption = off: workers prove the token with a PLAIN password and "  \
  "the parameters travel readable; for a trusted network only)"

/* A worker's start line for a job with `encryption = off` (nothing when encrypted). */
void ps_auth_say_worker_security (int worker, gboolean unencrypted);

/* The workers' PLAIN password (64 hex digits and a NUL) of the job with `token`: for a
 * job whose traffic is not encrypted (`encryption = off`), derived so that one seen on
 * the wire admits to this job only and says nothing of the token. */
void ps_auth_password (const char *token, char password[65]);
/* Makes `socket` a CURVE client of the job's servers (`unencrypted`: a PLAIN client with
 * the workers' password), with at most PS_FRAME_MAX_WIRE bytes a frame; FALSE with an
 * error naming `who` when libzmq refuses. */
gboolean ps_auth_client_socket (void *socket, const char *token, const char *who,
                                gboolean unencrypted, GError **error);

/* What a worker's socket saw of its handshakes with a server, so a worker that gets no
 * answer can tell a server that refused it from one that is gone. */
typedef struct PsAuthWatch PsAuthWatch;
PsAuthWatch *ps_auth_watch_new (void *zctx, void *socket);
/* Why the latest handshake failed (a sentence saying what to do), or NULL when none
 * failed since the latest that succeeded; reads the events that came. */
const char *ps_auth_watch_failure (PsAuthWatch *watch);
void ps_auth_watch_free (PsAuthWatch *watch);

/* The most connections a server of `workers` workers keeps at once: its workers and
 * some spare (reconnections, tools), and never so many that it runs out of descriptors
 * (RLIMIT_NOFILE) for its checkpoints and logs. */
int ps_auth_connection_cap (int workers);

typedef struct PsAuth PsAuth;

/* Makes `socket` (a ROUTER of context `zctx`, not yet bound) a CURVE server of the job
 * (`unencrypted`: a PLAIN server): starts the ZAP handler that admits the workers' key
 * (or password) only, drops handshakes that take
 * longer than `handshake_ms`, and refuses connections beyond `cap` (shutdown of the
 * newest; `port`: the socket's). `who` names the server in logs; the refusals are logged, a bounded number
 * of lines. */
PsAuth *ps_auth_server_new (void *zctx, void *socket, const char *token, const char *who,
                            int port, int handshake_ms, int cap, gboolean unencrypted,
                            GError **error);
/* Whether the ZAP handler admitted a worker's key yet (a worker completed, or is
 * completing, a handshake); the connections it refused or that failed their handshake. */
gboolean ps_auth_admitted_any (PsAuth *auth, guint64 *refused);
/* Stops the handler (logging what it refused); after the socket is closed (a CURVE
 * socket without a ZAP handler admits any key), before zmq_ctx_term. */
void ps_auth_free (PsAuth *auth);

#endif
