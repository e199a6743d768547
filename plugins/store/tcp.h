/* The TCP store: a server one process hosts (ksdist launch, or rank 0) and a client in
 * every rank, for jobs whose processes share no directory. */
#ifndef KS_STORE_TCP_H
#define KS_STORE_TCP_H

#include <ksdist/ksdist.h>

typedef struct TcpServer TcpServer;

/* Listens on `address` (host:port, port 0 for any free one) and serves in background
 * threads until stopped; *bound is the host:port it listens on. */
TcpServer *ks_tcp_server_start (const char *address, const char *token, char **bound,
                                GError **error);
/* Disconnects every client and frees the server. */
void ks_tcp_server_stop (TcpServer *server);

/* One try at a connection (TCP_NODELAY) by `deadline` (monotonic µs; -1: the kernel's
 * own limit): the socket; -1 with errno set when it fails (ETIMEDOUT at the deadline),
 * -2 with `error` set when the host does not resolve. */
int ks_tcp_connect (const char *host, guint16 port, gint64 deadline, GError **error);

extern const KsStoreOps ks_tcp_store_ops;
extern const KsStoreOps ks_c10d_store_ops;

#endif
