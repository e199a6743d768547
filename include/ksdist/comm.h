/* ksdist — the communicator interface and its rendezvous store.
 *
 * For authors of a communicator or store plugin (KsCommOps, KsStoreOps), and modes or
 * programs that exchange tensors between ranks.
 *
 * A store is a small key-value service the ranks of a job meet at (a shared directory,
 * or a TCP server hosted by the launcher). A communicator is made over a store and
 * carries collectives and point-to-point messages. Every blocking call takes a timeout;
 * on expiry the error (KS_COMM_ERROR_TIMEOUT) names the operation and the ranks that
 * did not answer. Buffers are device pointers of the compute backend in use. */
#ifndef KSDIST_COMM_H
#define KSDIST_COMM_H

#include <ksdist/registry.h>

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
  /* Serves a network store at `address` (host:port; port 0 picks a free one) in the
   * background until the ctx is destroyed, to clients that present `token`. *bound
   * (g_free'd by the caller) is the host:port actually listened on. */
  gboolean (*serve) (void *ctx, const char *address, const char *token, char **bound,
                     GError **error);
  /* The longest any call waits for the network (a connect, an answer) beyond a wait's
   * own timeout: [comm] timeout, set by ks_store_new. */
  gboolean (*set_timeout) (void *ctx, int timeout_ms, GError **error);
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
  /* Start a send or receive and return a handle at once (NULL and the error when it
   * cannot start); the buffer is the plugin's until wait, which completes the
   * operation within the timeout and frees the handle, whatever it returns. */
  void *(*isend) (void *ctx, const void *buf, gsize nbytes, int peer, guint32 tag,
                  GError **error);
  void *(*irecv) (void *ctx, void *buf, gsize nbytes, int peer, guint32 tag, GError **error);
  gboolean (*wait) (void *ctx, void *request, GError **error);
  /* Memory every rank of the group maps: `nbytes` of this rank's own, which the others
   * read and write during a collective on it, so that an allreduce of a buffer in it
   * moves no copies through staging. Every rank calls it with the same size; it lives
   * as long as the communicator. */
  void *(*alloc_shared) (void *ctx, gsize nbytes, GError **error);
  /* After a failed operation: sets ended[r] for each rank r of the group whose process
   * this communicator knows to have ended (the core then names it at once instead of
   * waiting for it to report). */
  void (*ended_ranks) (void *ctx, gboolean *ended);
  /* Queue later operations on the compute backend's `stream` (KsComputeOps
   * native_stream), behind the kernels that write the buffers, instead of waiting for
   * the whole device first. Sub-groups made afterwards share it. */
  gboolean (*use_stream) (void *ctx, void *stream, GError **error);

  /* appended in ABI 1.1: KS_COMM_* flags, the communicator's reach (0: host memory, ranks
   * on any host). A 1.0 plugin gets KS_COMM_TRAITS_1_0. */
  guint32 traits;
} KsCommOps;

/* Every rank must be on one host (shared memory): what [comm] backend = auto takes when
 * the launcher says all ranks share this host, and the hosts' inner level of a
 * hierarchical communicator. */
#define KS_COMM_ONE_HOST (1u << 0)
/* Reads and writes buffers in a compute backend's device memory (KS_COMPUTE_DEVICE_MEMORY),
 * and only there. */
#define KS_COMM_DEVICE_MEMORY (1u << 1)
/* What the core assumed of a communicator before traits: host memory, any host. */
#define KS_COMM_TRAITS_1_0 0u

/* ---- the core's handles on a store and a communicator ---- */

typedef struct KsStore KsStore;
typedef struct KsComm KsComm;

/* Creates the store implementation `name` ("file", "tcp"; NULL or "auto" = the best). */
KsStore *ks_store_new (KsRegistry *registry, const KsConfig *config, const char *name,
                       GError **error);

/* The kinds of store a job meets at, by what their address is. A program asks for a
 * kind's implementation with ks_store_kind_name and never names one itself: libksdist
 * maps them to the store plugin's implementations in one place. */
typedef enum {
  KS_STORE_KIND_DIRECTORY, /* a directory every rank can reach (one host, a shared disk) */
  KS_STORE_KIND_SERVED,    /* HOST:PORT of a server one process of the job hosts */
  KS_STORE_KIND_TORCH,     /* PyTorch's TCPStore, which torchrun's agent hosts */
} KsStoreKind;

/* The store implementation of `kind` ([comm] store's value, ks_store_new's name). */
const char *ks_store_kind_name (KsStoreKind kind);
/* Whether the store implementation `name` is of `kind` (FALSE for a name no kind has). */
gboolean ks_store_kind_is (const char *name, KsStoreKind kind);
void ks_store_free (KsStore *store);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsStore, ks_store_free)
const char *ks_store_name (const KsStore *store);
/* Whether `token` (KS_STORE_TOKEN) is set: FALSE with a KS_CONFIG_ERROR that says, as
 * `who` ("worker 0", "server 1 (HOST:PORT)"), why a job with parameter servers needs it and
 * how to set one. Every process of such a job checks it before meeting the others, so
 * that none ends on a peer's exit instead. */
gboolean ks_store_token_required (const char *token, const char *who, GError **error);
gboolean ks_store_open (KsStore *store, const char *address, const char *prefix,
                        const char *token, GError **error);
gboolean ks_store_set (KsStore *store, const char *key, const void *data, gsize len,
                       GError **error);
gboolean ks_store_get (KsStore *store, const char *key, int timeout_ms, void **data,
                       gsize *len, GError **error);
/* A process that fails while its peers may wait for it says so under this key (the
 * first failure of the job stays), and a wait for another key that finds it fails at
 * once with that message: peers name the failed rank, not the key it never wrote. */
#define KS_STORE_FAILURE_KEY "ks/failure"
void ks_store_report_failure (KsStore *store, const char *who, const char *message);
/* The failure a process of the job reported ("rank 0 failed: ..."), or NULL; g_free it. */
char *ks_store_failure (KsStore *store);
/* For a wait in slices: a timeout's "... within LAST ms" (the last slice's) becomes the
 * whole wait's TIMEOUT ms. */
void ks_store_whole_timeout (GError *error, int last_ms, int timeout_ms);
/* Waits for every key; on timeout the error lists the keys still missing. */
gboolean ks_store_wait (KsStore *store, const char *const *keys, int timeout_ms, GError **error);
gboolean ks_store_add (KsStore *store, const char *key, gint64 delta, gint64 *result,
                       GError **error);
/* Hosts the store for a job (a TCP store's server) until the store is freed; see
 * KsStoreOps.serve. */
gboolean ks_store_serve (KsStore *store, const char *address, const char *token, char **bound,
                         GError **error);
/* The plugin's vtable and context, for a communicator's connect. */
const KsStoreOps *ks_store_ops (const KsStore *store);
void *ks_store_ctx (const KsStore *store);

/* Creates the communicator implementation `name` ("gloo", "nccl", ...). */
KsComm *ks_comm_new (KsRegistry *registry, const KsConfig *config, const char *name,
                     GError **error);
void ks_comm_free (KsComm *comm);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsComm, ks_comm_free)
const char *ks_comm_name (const KsComm *comm);
/* Joins the job as `rank` of `size`; `store` must stay open while the communicator lives
 * (sub-groups and error reports use it). */
gboolean ks_comm_connect (KsComm *comm, KsStore *store, int rank, int size, int timeout_ms,
                          GError **error);
int ks_comm_rank (const KsComm *comm);
int ks_comm_size (const KsComm *comm);
gboolean ks_comm_allreduce (KsComm *comm, void *buf, gsize count, KsDType dtype, KsReduceOp op,
                            GError **error);
gboolean ks_comm_broadcast (KsComm *comm, void *buf, gsize count, KsDType dtype, int root,
                            GError **error);
gboolean ks_comm_barrier (KsComm *comm, GError **error);
gboolean ks_comm_allgather (KsComm *comm, const void *send, void *recv, gsize count,
                            KsDType dtype, GError **error);
gboolean ks_comm_allgatherv (KsComm *comm, const void *send, void *recv, const gsize *counts,
                             KsDType dtype, GError **error);
gboolean ks_comm_reduce_scatter (KsComm *comm, const void *send, void *recv, gsize recv_count,
                                 KsDType dtype, KsReduceOp op, GError **error);
gboolean ks_comm_send (KsComm *comm, const void *buf, gsize nbytes, int peer, guint32 tag,
                       GError **error);
gboolean ks_comm_recv (KsComm *comm, void *buf, gsize nbytes, int peer, guint32 tag,
                       GError **error);
/* Non-blocking send and receive: each returns at once with a request (NULL and the error
 * when it cannot start), and the buffer must be left alone until ks_comm_wait says the
 * operation is done. Messages between two ranks under one tag arrive in order. */
typedef struct KsCommRequest KsCommRequest;
KsCommRequest *ks_comm_isend (KsComm *comm, const void *buf, gsize nbytes, int peer,
                              guint32 tag, GError **error);
KsCommRequest *ks_comm_irecv (KsComm *comm, void *buf, gsize nbytes, int peer, guint32 tag,
                              GError **error);
/* Completes the request within the communicator's timeout and frees it, whatever it
 * returns; the error names the peer, the tag and the size. As with a collective, a
 * send or receive that timed out may leave the communicator unusable (Gloo closes the
 * pair): make a new one. */
gboolean ks_comm_wait (KsCommRequest *request, GError **error);
gboolean ks_comm_set_timeout (KsComm *comm, int timeout_ms, GError **error);
/* A communicator over `ranks` of this one (sorted, with this rank); every member calls
 * it with the same list. Free it before its parent. */
KsComm *ks_comm_subgroup (KsComm *comm, const int *ranks, int n_ranks, GError **error);
/* Lets the communicator queue its operations on `compute`'s stream where both know one
 * (NCCL on CUDA); otherwise nothing. Call it before making sub-groups. */
struct KsCompute;
gboolean ks_comm_use_compute (KsComm *comm, struct KsCompute *compute, GError **error);
/* This rank's part of memory every rank maps (see KsCommOps.alloc_shared); NULL and
 * KS_PLUGIN_ERROR_NOT_SUPPORTED where the plugin has none. Every rank calls it. */
void *ks_comm_alloc_shared (KsComm *comm, gsize nbytes, GError **error);

/* A communicator over `world`'s ranks whose allreduce goes in three legs: inside each host
 * through a `local_backend` communicator of that host's ranks (e.g. "shm"), among one
 * leader per host through `world`, and inside the host again (Horovod's hierarchical
 * allreduce). Every other operation goes through `world`. `host` names this rank's host:
 * the ranks that give the same string form one. Every rank of `world` calls it. On
 * success the result owns `world`; on failure the caller keeps it. */
KsComm *ks_comm_hierarchical (KsRegistry *registry, const KsConfig *config, KsComm *world,
                              const char *host, const char *local_backend, GError **error);

/* This host's address as a peer reaches it on the way to `master` (HOST:PORT, [V6]:PORT
 * or HOST): the source address of the route there, 127.0.0.1 for loopback, else the host
 * name. Free with g_free. */
char *ks_comm_address_toward (const char *master);

/* The host of `address` (HOST:PORT, [V6]:PORT or HOST): what stands before its last
 * colon (all of it where there is none), an IPv6 address's brackets taken off, as
 * getaddrinfo and g_inet_address_new_from_string take it; `port` (may be NULL) is set to
 * the text after that colon, or NULL. Free with g_free. */
char *ks_comm_address_host (const char *address, const char **port);

G_END_DECLS

#endif
