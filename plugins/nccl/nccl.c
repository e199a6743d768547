/* The NCCL communicator: collectives and send/recv between GPUs, on buffers in CUDA
 * device memory (the cuda compute plugin's).
 *
 * Rank 0 makes the ncclUniqueId and puts it in the store; every rank creates its
 * communicator non-blocking (ncclCommInitRankConfig, blocking = 0) so that no call can
 * hang: each operation is enqueued on this plugin's stream and then polled, with
 * ncclCommGetAsyncError, until it completes, fails or passes the timeout. On a timeout
 * the communicator is aborted (ncclCommAbort) and unusable, and the error names the
 * ranks that never reached this operation: every rank that times out says in the store
 * which operation it was stuck in, and those that did not say so are the late ones.
 *
 * Operations are synchronous, as the interface asks. Given the compute plugin's stream
 * (use_stream; the trainer does it), they queue on it, behind the kernels that wrote the
 * buffers; otherwise they run on a stream of their own after a device-wide wait. Sub-groups
 * (a pipeline's stages, its replicas) are communicators of their own: the group's first
 * rank puts a new unique id in the store. isend/irecv queue their transfers and wait launches every queued one in
 * one NCCL group, so that a pipeline's paired send and receive cannot deadlock. NCCL has
 * no tags: a pair's messages arrive in the order they were sent. */
#include <config.h>

#include "../cuda/local-device.h"

#include <ksdist/comm.h>

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  gboolean is_send;
  void *buf;
  gsize nbytes;
  int peer;
} Transfer;

typedef struct {
  int device; /* -1: ks_cuda_local_device's */
  ncclComm_t comm;
  cudaStream_t stream;
  const KsStoreOps *store_ops;
  void *store;
  int rank, size, timeout_ms;
  guint64 ops;      /* operations started: their sequence number names a stuck one */
  gboolean aborted; /* by a timeout or error: every later operation fails at once */
  GArray *queued;   /* Transfer: isend/irecv not launched yet */
  float *one;       /* a device float for barrier */
  char *keys;       /* this communicator's prefix of store keys */
  guint subgroups;  /* made from this one so far */
  gboolean shares_stream; /* stream is the compute plugin's (use_stream) */
} Nccl;

/* A communicator error, "nccl: " and the printf-style message; FALSE. */
#define fail(error, code, ...) ks_fail (error, KS_COMM_ERROR, code, "nccl: " __VA_ARGS__)

static gboolean
cuda_ok (cudaError_t status, const char *what, GError **error)
{
  return status == cudaSuccess
         || fail (error, KS_COMM_ERROR_FAILED, "%s: %s", what, cudaGetErrorString (status));
}

static void *
nccl_create (const KsSettings *settings, GError **error)
{
  Nccl *n = g_new0 (Nccl, 1);
  n->device = (int) ks_settings_get_int (settings, "device");
  n->queued = g_array_new (FALSE, FALSE, sizeof (Transfer));
  n->timeout_ms = 300000;
  n->keys = g_strdup ("nccl/");
  return n;
}

static void
nccl_destroy (void *p)
{
  Nccl *n = p;
  if (n->comm != NULL)
    {
      if (n->aborted)
        ncclCommAbort (n->comm);
      else
        ncclCommDestroy (n->comm);
    }
  if (n->one != NULL)
    cudaFree (n->one);
  if (n->stream != NULL && !n->shares_stream)
    cudaStreamDestroy (n->stream);
  g_array_unref (n->queued);
  g_free (n->keys);
  g_free (n);
}

/* The ranks that did not reach operation `seq`: each stuck rank says it was there, and
 * waits a moment for the others to say so too. */
static char *
late_ranks (Nccl *n, guint64 seq)
{
  g_autofree char *mine = g_strdup_printf ("%sstuck/%" G_GUINT64_FORMAT "/%d", n->keys, seq,
                                           n->rank);
  g_autoptr (GString) late = g_string_new (NULL);

  n->store_ops->set (n->store, mine, "1", 1, NULL);
  for (int r = 0; r < n->size; r++)
    {
      g_autofree char *key = g_strdup_printf ("%sstuck/%" G_GUINT64_FORMAT "/%d", n->keys, seq,
                                              r);
      void *data = NULL;
      gsize len;
      if (r == n->rank)
        continue;
      if (n->store_ops->get (n->store, key, 2000, &data, &len, NULL))
        g_free (data);
      else
        g_string_append_printf (late, "%s%d", late->len ? ", " : "", r);
    }
  return late->len ? g_string_free (g_steal_pointer (&late), FALSE)
                   : g_strdup ("none: every rank timed out in it");
}

/* Polls until the stream is done, NCCL reports an error or the timeout passes. */
static gboolean
finish (Nccl *n, const char *what, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) n->timeout_ms * 1000;
  guint64 seq = n->ops;

  for (;;)
    {
      ncclResult_t async = ncclSuccess, asked;
      cudaError_t status = cudaStreamQuery (n->stream);
      if (status == cudaSuccess)
        return TRUE;
      if (status != cudaErrorNotReady)
        {
          n->aborted = TRUE;
          return cuda_ok (status, what, error);
        }
      if ((asked = ncclCommGetAsyncError (n->comm, &async)) != ncclSuccess)
        async = asked;
      if (async != ncclSuccess && async != ncclInProgress)
        {
          n->aborted = TRUE;
          ncclCommAbort (n->comm);
          n->comm = NULL;
          return fail (error, KS_COMM_ERROR_PEER_LOST, "%s (operation %" G_GUINT64_FORMAT
                       ", rank %d of %d): %s; the communicator is aborted", what, seq, n->rank,
                       n->size, ncclGetErrorString (async));
        }
      if (g_get_monotonic_time () > deadline)
        {
          n->aborted = TRUE;
          ncclCommAbort (n->comm);
          n->comm = NULL;
          g_autofree char *late = late_ranks (n, seq);
          return fail (error, KS_COMM_ERROR_TIMEOUT,
                       "%s (operation %" G_GUINT64_FORMAT ", rank %d of %d) timed out after "
                       "%.1f s; ranks that never reached it: %s. The communicator is aborted",
                       what, seq, n->rank, n->size, n->timeout_ms / 1000.0, late);
        }
      g_usleep (50);
    }
}

/* Before an operation: the communicator usable, the buffers' writers done */
static gboolean
start (Nccl *n, const char *what, GError **error)
{
  if (n->comm == NULL || n->aborted)
    return fail (error, KS_COMM_ERROR_FAILED, "%s: the communicator %s", what,
                 n->aborted ? "was aborted by an earlier failure; make a new one"
                            : "is not connected");
  n->ops++;
  /* on its own stream, the buffers' writers (the compute plugin's kernels) must be done */
  return n->shares_stream || cuda_ok (cudaDeviceSynchronize (), what, error);
}

/* An enqueue's result: ncclInProgress is fine on a non-blocking communicator */
static gboolean
enqueued (Nccl *n, ncclResult_t r, const char *what, GError **error)
{
  if (r == ncclSuccess || r == ncclInProgress)
    return finish (n, what, error);
  n->aborted = TRUE;
  return fail (error, KS_COMM_ERROR_FAILED, "%s: %s", what, ncclGetErrorString (r));
}

/* The ncclUniqueId under `key`: made by the group's first rank, read by the others */
static gboolean
exchange_id (Nccl *n, const char *key, gboolean first, ncclUniqueId *id, GError **error)
{
  void *data = NULL;
  gsize len = 0;

  if (first)
    {
      ncclResult_t r = ncclGetUniqueId (id);
      if (r != ncclSuccess)
        return fail (error, KS_COMM_ERROR_FAILED, "ncclGetUniqueId: %s", ncclGetErrorString (r));
      return n->store_ops->set (n->store, key, id, sizeof *id, error);
    }
  if (!n->store_ops->get (n->store, key, n->timeout_ms, &data, &len, error))
    {
      g_prefix_error (error, "nccl: rank %d waiting for the group's ncclUniqueId (%s): ", n->rank,
                      key);
      return FALSE;
    }
  if (len != sizeof *id) /* from the store: checked before use */
    {
      g_free (data);
      return fail (error, KS_COMM_ERROR_INVALID, "the store's %s holds %" G_GSIZE_FORMAT
                   " bytes, not an ncclUniqueId (%zu): another job's key?", key, len,
                   sizeof *id);
    }
  memcpy (id, data, sizeof *id);
  g_free (data);
  return TRUE;
}

/* Joins the communicator of `size` ranks whose unique id is under `key`, as n->rank */
static gboolean
join (Nccl *n, const char *key, GError **error)
{
  ncclUniqueId id;
  int device = n->device;

  if (device < 0)
    {
      int devices = 0;
      if (!cuda_ok (cudaGetDeviceCount (&devices), "cudaGetDeviceCount", error))
        return FALSE;
      device = ks_cuda_local_device (devices);
    }
  if (!cuda_ok (cudaSetDevice (device), "cudaSetDevice", error)
      || (n->stream == NULL
          && !cuda_ok (cudaStreamCreateWithFlags (&n->stream, cudaStreamNonBlocking),
                       "cudaStreamCreate", error))
      || !cuda_ok (cudaMalloc ((void **) &n->one, sizeof (float)), "cudaMalloc", error)
      || !exchange_id (n, key, n->rank == 0, &id, error))
    return FALSE;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig (&n->comm, n->size, id, n->rank, &config);
  if (r != ncclSuccess && r != ncclInProgress)
    {
      n->comm = NULL;
      return fail (error, KS_COMM_ERROR_FAILED, "ncclCommInitRankConfig (rank %d of %d, GPU %d): "
                   "%s", n->rank, n->size, device, ncclGetErrorString (r));
    }
  /* the init completes in the background: poll it within the timeout */
  gint64 deadline = g_get_monotonic_time () + (gint64) n->timeout_ms * 1000;
  ncclResult_t state;
  while (ncclCommGetAsyncError (n->comm, &state) == ncclSuccess && state == ncclInProgress)
    {
      if (g_get_monotonic_time () > deadline)
        {
          n->aborted = TRUE;
          g_autofree char *late = late_ranks (n, 0);
          return fail (error, KS_COMM_ERROR_TIMEOUT, "rank %d of %d: NCCL's init timed out "
                       "after %.1f s; ranks that never joined: %s", n->rank, n->size,
                       n->timeout_ms / 1000.0, late);
        }
      g_usleep (100);
    }
  if (state != ncclSuccess)
    {
      n->aborted = TRUE;
      return fail (error, KS_COMM_ERROR_FAILED, "rank %d of %d (GPU %d): NCCL's init failed: "
                   "%s (one GPU cannot hold two ranks of a communicator)", n->rank, n->size,
                   device, ncclGetErrorString (state));
    }
  return TRUE;
}

static gboolean
nccl_connect (void *p, const KsStoreOps *store_ops, void *store, int rank, int size,
              int timeout_ms, GError **error)
{
  Nccl *n = p;
  g_autofree char *key = g_strdup_printf ("%sunique_id", n->keys);

  n->store_ops = store_ops;
  n->store = store;
  n->rank = rank;
  n->size = size;
  n->timeout_ms = timeout_ms;
  return join (n, key, error);
}

/* A new communicator of `ranks`: its first rank puts a new unique id in the store under a
 * key that names the parent, its count of sub-groups and the ranks, so that every member
 * (and no other group) finds the same one */
static void *
nccl_subgroup (void *p, const int *ranks, int n_ranks, GError **error)
{
  Nccl *parent = p, *n = g_new0 (Nccl, 1);
  g_autoptr (GString) key = g_string_new (NULL);

  g_string_printf (key, "%ssub%u-", parent->keys, parent->subgroups++);
  n->keys = g_strdup (key->str);
  for (int i = 0; i < n_ranks; i++)
    {
      g_string_append_printf (key, "%s%d", i ? "," : "", ranks[i]);
      if (ranks[i] == parent->rank)
        n->rank = i;
    }
  g_string_append (key, "/unique_id");
  n->device = parent->device;
  n->queued = g_array_new (FALSE, FALSE, sizeof (Transfer));
  n->store_ops = parent->store_ops;
  n->store = parent->store;
  n->size = n_ranks;
  n->timeout_ms = parent->timeout_ms;
  n->stream = parent->shares_stream ? parent->stream : NULL;
  n->shares_stream = parent->shares_stream;
  if (!join (n, key->str, error))
    {
      nccl_destroy (n);
      return NULL;
    }
  return n;
}

/* The compute plugin's stream: operations queue behind its kernels, no device-wide wait */
static gboolean
nccl_use_stream (void *p, void *stream, GError **error)
{
  Nccl *n = p;
  if (n->stream != NULL && !n->shares_stream)
    cudaStreamDestroy (n->stream);
  n->stream = stream;
  n->shares_stream = TRUE;
  return TRUE;
}

static gboolean
nccl_type (KsDType dtype, ncclDataType_t *out, GError **error)
{
  switch (dtype)
    {
    case KS_DTYPE_FLOAT32: *out = ncclFloat32; return TRUE;
    case KS_DTYPE_FLOAT64: *out = ncclFloat64; return TRUE;
    case KS_DTYPE_INT32: *out = ncclInt32; return TRUE;
    case KS_DTYPE_INT64: *out = ncclInt64; return TRUE;
    case KS_DTYPE_FLOAT16: *out = ncclFloat16; return TRUE;
    case KS_DTYPE_BFLOAT16: *out = ncclBfloat16; return TRUE;
    case KS_DTYPE_UINT8: *out = ncclUint8; return TRUE;
    }
  return fail (error, KS_COMM_ERROR_INVALID, "no NCCL type for %s", ks_dtype_name (dtype));
}

static gboolean
nccl_op (KsReduceOp op, ncclRedOp_t *out, GError **error)
{
  switch (op)
    {
    case KS_REDUCE_SUM: *out = ncclSum; return TRUE;
    case KS_REDUCE_MIN: *out = ncclMin; return TRUE;
    case KS_REDUCE_MAX: *out = ncclMax; return TRUE;
    case KS_REDUCE_AVG: *out = ncclAvg; return TRUE;
    case KS_REDUCE_PROD: *out = ncclProd; return TRUE;
    }
  return fail (error, KS_COMM_ERROR_INVALID, "no NCCL reduction for %s", ks_reduce_op_name (op));
}

static gboolean
nccl_allreduce (void *p, void *buf, gsize count, KsDType dtype, KsReduceOp op, GError **error)
{
  Nccl *n = p;
  ncclDataType_t t = ncclFloat32;
  ncclRedOp_t o = ncclSum;
  return nccl_type (dtype, &t, error) && nccl_op (op, &o, error)
         && start (n, "allreduce", error)
         && enqueued (n, ncclAllReduce (buf, buf, count, t, o, n->comm, n->stream), "allreduce",
                      error);
}

static gboolean
nccl_broadcast (void *p, void *buf, gsize count, KsDType dtype, int root, GError **error)
{
  Nccl *n = p;
  ncclDataType_t t = ncclFloat32;
  if (root < 0 || root >= n->size)
    return fail (error, KS_COMM_ERROR_INVALID, "broadcast: root %d is not a rank of %d", root,
                 n->size);
  return nccl_type (dtype, &t, error) && start (n, "broadcast", error)
         && enqueued (n, ncclBroadcast (buf, buf, count, t, root, n->comm, n->stream),
                      "broadcast", error);
}

static gboolean
nccl_barrier (void *p, GError **error)
{
  Nccl *n = p;
  return start (n, "barrier", error)
         && enqueued (n, ncclAllReduce (n->one, n->one, 1, ncclFloat32, ncclSum, n->comm,
                                        n->stream), "barrier", error);
}

static gboolean
nccl_allgather (void *p, const void *send, void *recv, gsize count, KsDType dtype,
                GError **error)
{
  Nccl *n = p;
  ncclDataType_t t = ncclFloat32;
  return nccl_type (dtype, &t, error) && start (n, "allgather", error)
         && enqueued (n, ncclAllGather (send, recv, count, t, n->comm, n->stream), "allgather",
                      error);
}

static gboolean
nccl_reduce_scatter (void *p, const void *send, void *recv, gsize recv_count, KsDType dtype,
                     KsReduceOp op, GError **error)
{
  Nccl *n = p;
  ncclDataType_t t = ncclFloat32;
  ncclRedOp_t o = ncclSum;
  return nccl_type (dtype, &t, error) && nccl_op (op, &o, error)
         && start (n, "reduce_scatter", error)
         && enqueued (n, ncclReduceScatter (send, recv, recv_count, t, o, n->comm, n->stream),
                      "reduce_scatter", error);
}

/* Launches the queued transfers as one group and waits for them */
static gboolean
flush (Nccl *n, GError **error)
{
  ncclResult_t r = ncclSuccess;
  guint count = n->queued->len;

  if (count == 0)
    return TRUE;
  if (!start (n, "send/recv", error))
    {
      g_array_set_size (n->queued, 0);
      return FALSE;
    }
  ncclGroupStart ();
  for (guint i = 0; i < count && (r == ncclSuccess || r == ncclInProgress); i++)
    {
      Transfer *t = &g_array_index (n->queued, Transfer, i);
      r = t->is_send ? ncclSend (t->buf, t->nbytes, ncclChar, t->peer, n->comm, n->stream)
                     : ncclRecv (t->buf, t->nbytes, ncclChar, t->peer, n->comm, n->stream);
    }
  ncclResult_t end = ncclGroupEnd ();
  g_array_set_size (n->queued, 0);
  return enqueued (n, r != ncclSuccess ? r : end, "send/recv", error);
}

static gboolean
queue (Nccl *n, gboolean is_send, const void *buf, gsize nbytes, int peer, GError **error)
{
  Transfer t = { is_send, (void *) buf, nbytes, peer };
  if (peer < 0 || peer >= n->size || peer == n->rank)
    return fail (error, KS_COMM_ERROR_INVALID, "%s: peer %d is not another rank of %d",
                 is_send ? "send" : "recv", peer, n->size);
  g_array_append_val (n->queued, t);
  return TRUE;
}

static gboolean
nccl_send (void *p, const void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  return queue (p, TRUE, buf, nbytes, peer, error) && flush (p, error);
}

static gboolean
nccl_recv (void *p, void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  return queue (p, FALSE, buf, nbytes, peer, error) && flush (p, error);
}

/* The request is only a token: wait launches everything queued */
static void *
nccl_isend (void *p, const void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  return queue (p, TRUE, buf, nbytes, peer, error) ? p : NULL;
}

static void *
nccl_irecv (void *p, void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  return queue (p, FALSE, buf, nbytes, peer, error) ? p : NULL;
}

static gboolean
nccl_wait (void *p, void *request, GError **error)
{
  return flush (p, error);
}

static gboolean
nccl_set_timeout (void *p, int timeout_ms, GError **error)
{
  ((Nccl *) p)->timeout_ms = timeout_ms;
  return TRUE;
}

static int
nccl_rank (void *p)
{
  return ((Nccl *) p)->rank;
}

static int
nccl_world_size (void *p)
{
  return ((Nccl *) p)->size;
}

static const KsCommOps nccl_ops = {
  .size = sizeof (KsCommOps),
  .create = nccl_create,
  .destroy = nccl_destroy,
  .connect = nccl_connect,
  .allreduce = nccl_allreduce,
  .broadcast = nccl_broadcast,
  .barrier = nccl_barrier,
  .allgather = nccl_allgather,
  .reduce_scatter = nccl_reduce_scatter,
  .send = nccl_send,
  .recv = nccl_recv,
  .set_timeout = nccl_set_timeout,
  .rank = nccl_rank,
  .world_size = nccl_world_size,
  .isend = nccl_isend,
  .irecv = nccl_irecv,
  .wait = nccl_wait,
  .subgroup = nccl_subgroup,
  .use_stream = nccl_use_stream,
  .traits = KS_COMM_DEVICE_MEMORY, /* any host */
};

/* Without a GPU the runtime's error is the reason; below Gloo in priority, so auto
 * takes NCCL only where the trainer asks for it (a CUDA compute backend). */
static int
nccl_query (char **reason)
{
  int count = 0, version = 0;
  cudaError_t status = cudaGetDeviceCount (&count);

  if (status != cudaSuccess)
    {
      *reason = g_strdup_printf ("cudaGetDeviceCount: %s", cudaGetErrorString (status));
      return -1;
    }
  if (count == 0)
    {
      *reason = g_strdup ("no CUDA device on this machine");
      return -1;
    }
  if (ncclGetVersion (&version) != ncclSuccess)
    {
      *reason = g_strdup ("ncclGetVersion failed: libnccl cannot run here");
      return -1;
    }
  return 0;
}

static const KsImplDesc nccl_impls[] = {
  { KS_KIND_COMM, "nccl", &nccl_ops, nccl_query,
    "Collectives and send/recv between GPUs with NCCL (CUDA device memory); what auto takes "
    "when the compute backend is cuda" },
};

static const KsKeyDesc nccl_settings[] = {
  { NULL, "device", KS_VALUE_INT, "-1", -1, 1023, NULL,
    "CUDA device of this rank; -1: the cuda plugin's choice (this rank's place on its host, "
    "modulo the devices), else 0" },
};

static const KsPluginDesc nccl_plugin = {
  .abi_major = KS_ABI_MAJOR,
  .abi_minor = KS_ABI_MINOR,
  .name = "nccl",
  .version = PACKAGE_VERSION,
  .description = "NCCL communicator: allreduce, broadcast, allgather, reduce-scatter, "
                 "barrier, grouped send/recv on GPU memory",
  .impls = nccl_impls,
  .n_impls = G_N_ELEMENTS (nccl_impls),
  .settings = nccl_settings,
  .n_settings = G_N_ELEMENTS (nccl_settings),
};

KS_PLUGIN_DEFINE (nccl_plugin)
