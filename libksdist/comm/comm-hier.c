/* The hierarchical communicator (Horovod's hierarchical allreduce, Paddle's
 * use_hierarchical_allreduce): an allreduce reduces inside each host through a
 * communicator of that host's ranks (shared memory), allreduces among one leader per host
 * through the world's communicator (Gloo), and broadcasts inside the host again; so only
 * one rank per host sends over the network. Every other operation goes through the world
 * communicator as it is. The hosts are found through the world: each rank gives a digest
 * of its host's name and the ranks of one digest form a host. */
#include "comm-private.h"

#include <string.h>

/* ---- a store whose keys get a prefix: the host's communicator meets apart ---- */

typedef struct {
  KsStore *inner;
  char *prefix;
} Prefixed;

static char *
prefixed_key (const Prefixed *p, const char *key)
{
  return g_strconcat (p->prefix, key, NULL);
}

static void
prefixed_destroy (void *ctx)
{
  Prefixed *p = ctx;
  g_free (p->prefix);
  g_free (p);
}

static gboolean
prefixed_set (void *ctx, const char *key, const void *data, gsize len, GError **error)
{
  g_autofree char *k = prefixed_key (ctx, key);
  return ks_store_set (((Prefixed *) ctx)->inner, k, data, len, error);
}

static gboolean
prefixed_get (void *ctx, const char *key, int timeout_ms, void **data, gsize *len,
              GError **error)
{
  g_autofree char *k = prefixed_key (ctx, key);
  return ks_store_get (((Prefixed *) ctx)->inner, k, timeout_ms, data, len, error);
}

static gboolean
prefixed_wait (void *ctx, const char *const *keys, int timeout_ms, GError **error)
{
  g_autoptr (GPtrArray) all = g_ptr_array_new_with_free_func (g_free);
  for (; *keys != NULL; keys++)
    g_ptr_array_add (all, prefixed_key (ctx, *keys));
  g_ptr_array_add (all, NULL);
  return ks_store_wait (((Prefixed *) ctx)->inner, (const char *const *) all->pdata, timeout_ms,
                        error);
}

static gboolean
prefixed_add (void *ctx, const char *key, gint64 delta, gint64 *result, GError **error)
{
  g_autofree char *k = prefixed_key (ctx, key);
  return ks_store_add (((Prefixed *) ctx)->inner, k, delta, result, error);
}

static const KsStoreOps prefixed_ops = {
  .size = sizeof (KsStoreOps),
  .destroy = prefixed_destroy,
  .set = prefixed_set,
  .get = prefixed_get,
  .wait = prefixed_wait,
  .add = prefixed_add,
};

static const KsImplDesc prefixed_impl = { KS_KIND_STORE, "prefixed", &prefixed_ops, NULL,
                                          "A store's keys under a prefix" };

static KsStore *
prefixed_store (KsStore *inner, const char *prefix)
{
  KsStore *store = g_new0 (KsStore, 1);
  Prefixed *p = g_new0 (Prefixed, 1);
  p->inner = inner;
  p->prefix = g_strdup (prefix);
  store->instance = inner->instance;
  store->instance.impl = &prefixed_impl;
  store->instance.settings = NULL;
  store->instance.ctx = p;
  return store;
}

/* ---- the communicator ---- */

typedef struct {
  const KsCommOps *ops; /* the world's plugin */
  void *ctx;            /* its context: the world's, or a sub-group's */
  KsComm *world;        /* the world's handle, once this owns it */
  gboolean owns_ctx;    /* a sub-group's */
  KsComm *local;        /* this host's ranks (NULL: everything goes through the world) */
  KsComm *leaders;      /* one rank per host, on the leaders (NULL elsewhere) */
  KsStore *local_store;
  int size;
} Hier;

static void
hier_destroy (void *ctx)
{
  Hier *h = ctx;
  ks_comm_free (h->leaders);
  ks_comm_free (h->local);
  ks_store_free (h->local_store);
  ks_comm_free (h->world);
  if (h->owns_ctx)
    h->ops->destroy (h->ctx);
  g_free (h);
}

static gboolean
divide (void *buf, gsize count, KsDType dtype, int by)
{
  for (gsize i = 0; i < count; i++)
    if (dtype == KS_DTYPE_FLOAT32)
      ((float *) buf)[i] /= by;
    else
      ((double *) buf)[i] /= by;
  return TRUE;
}

/* Inside the host, among the leaders, inside the host again. An average is a sum divided
 * at the end: hosts of different rank counts weigh each rank alike. */
static gboolean
hier_allreduce (void *ctx, void *buf, gsize count, KsDType dtype, KsReduceOp op,
                GError **error)
{
  Hier *h = ctx;
  KsReduceOp leg = op == KS_REDUCE_AVG ? KS_REDUCE_SUM : op;
  if (h->local == NULL)
    return h->ops->allreduce (h->ctx, buf, count, dtype, op, error);
  return COMM_OPS (h->local)->allreduce (CTX (h->local), buf, count, dtype, leg, error)
         && (h->leaders == NULL
             || COMM_OPS (h->leaders)->allreduce (CTX (h->leaders), buf, count, dtype, leg,
                                                  error))
         && COMM_OPS (h->local)->broadcast (CTX (h->local), buf, count, dtype, 0, error)
         && (op != KS_REDUCE_AVG || divide (buf, count, dtype, h->size));
}

/* The rest goes to the world's plugin (the core checked that it has each slot). */
static gboolean
hier_broadcast (void *ctx, void *buf, gsize count, KsDType dtype, int root, GError **error)
{
  Hier *h = ctx;
  return h->ops->broadcast (h->ctx, buf, count, dtype, root, error);
}

static gboolean
hier_barrier (void *ctx, GError **error)
{
  Hier *h = ctx;
  return h->ops->barrier (h->ctx, error);
}

static gboolean
hier_allgather (void *ctx, const void *send, void *recv, gsize count, KsDType dtype,
                GError **error)
{
  Hier *h = ctx;
  return h->ops->allgather (h->ctx, send, recv, count, dtype, error);
}

static gboolean
hier_allgatherv (void *ctx, const void *send, void *recv, const gsize *counts, KsDType dtype,
                 GError **error)
{
  Hier *h = ctx;
  return h->ops->allgatherv (h->ctx, send, recv, counts, dtype, error);
}

static gboolean
hier_reduce_scatter (void *ctx, const void *send, void *recv, gsize recv_count, KsDType dtype,
                     KsReduceOp op, GError **error)
{
  Hier *h = ctx;
  return h->ops->reduce_scatter (h->ctx, send, recv, recv_count, dtype, op, error);
}

static gboolean
hier_send (void *ctx, const void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  Hier *h = ctx;
  return h->ops->send (h->ctx, buf, nbytes, peer, tag, error);
}

static gboolean
hier_recv (void *ctx, void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  Hier *h = ctx;
  return h->ops->recv (h->ctx, buf, nbytes, peer, tag, error);
}

static void *
hier_isend (void *ctx, const void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  Hier *h = ctx;
  return h->ops->isend (h->ctx, buf, nbytes, peer, tag, error);
}

static void *
hier_irecv (void *ctx, void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  Hier *h = ctx;
  return h->ops->irecv (h->ctx, buf, nbytes, peer, tag, error);
}

static gboolean
hier_wait (void *ctx, void *request, GError **error)
{
  Hier *h = ctx;
  return h->ops->wait (h->ctx, request, error);
}

/* A sub-group is the world plugin's, every operation passed through. */
static void *
hier_subgroup (void *ctx, const int *ranks, int n_ranks, GError **error)
{
  Hier *h = ctx, *sub;
  void *sub_ctx = h->ops->subgroup (h->ctx, ranks, n_ranks, error);
  if (sub_ctx == NULL)
    return NULL;
  sub = g_new0 (Hier, 1);
  sub->ops = h->ops;
  sub->ctx = sub_ctx;
  sub->owns_ctx = TRUE;
  sub->size = n_ranks;
  return sub;
}

static gboolean
hier_set_timeout (void *ctx, int timeout_ms, GError **error)
{
  Hier *h = ctx;
  return h->ops->set_timeout (h->ctx, timeout_ms, error)
         && (h->local == NULL || ks_comm_set_timeout (h->local, timeout_ms, error))
         && (h->leaders == NULL || ks_comm_set_timeout (h->leaders, timeout_ms, error));
}

static int
hier_rank (void *ctx)
{
  Hier *h = ctx;
  return h->ops->rank (h->ctx);
}

static int
hier_world_size (void *ctx)
{
  return ((Hier *) ctx)->size;
}

static const KsCommOps hier_ops = {
  .size = sizeof (KsCommOps),
  .destroy = hier_destroy,
  .allreduce = hier_allreduce,
  .broadcast = hier_broadcast,
  .barrier = hier_barrier,
  .allgather = hier_allgather,
  .allgatherv = hier_allgatherv,
  .reduce_scatter = hier_reduce_scatter,
  .send = hier_send,
  .recv = hier_recv,
  .subgroup = hier_subgroup,
  .set_timeout = hier_set_timeout,
  .rank = hier_rank,
  .world_size = hier_world_size,
  .isend = hier_isend,
  .irecv = hier_irecv,
  .wait = hier_wait,
};

static const KsImplDesc hier_impl = {
  KS_KIND_COMM, "hierarchical", &hier_ops, NULL,
  "Allreduce inside each host, among one leader per host, and inside the host again"
};

/* The slots the hierarchical communicator passes on, which `world` must have. */
static gboolean
world_has_slots (KsComm *world, GError **error)
{
  const KsCommOps *o = COMM_OPS (world);
  if (KS_OPS_HAS (o, KsCommOps, allgather) && KS_OPS_HAS (o, KsCommOps, allgatherv)
      && KS_OPS_HAS (o, KsCommOps, reduce_scatter) && KS_OPS_HAS (o, KsCommOps, send)
      && KS_OPS_HAS (o, KsCommOps, recv) && KS_OPS_HAS (o, KsCommOps, subgroup)
      && KS_OPS_HAS (o, KsCommOps, set_timeout) && KS_OPS_HAS (o, KsCommOps, wait))
    return TRUE;
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID, "hierarchical: the world's "
               "communicator %s lacks an operation it passes on (it needs all of them)",
               ks_comm_name (world));
  return FALSE;
}

/* Every rank's host digest, through the world; the members of this rank's host and the
 * leaders (the first rank of each host), both in increasing order. */
static gboolean
find_hosts (KsComm *world, const char *host, GArray *members, GArray *leaders, GError **error)
{
  int n = ks_comm_size (world), me = ks_comm_rank (world);
  g_autofree guint8 *all = g_new (guint8, 32 * n);
  guint8 mine[32];
  gsize len = sizeof mine;
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);

  g_checksum_update (sum, (const guchar *) host, -1);
  g_checksum_get_digest (sum, mine, &len);
  if (!ks_comm_allgather (world, mine, all, sizeof mine / 8, KS_DTYPE_INT64, error))
    return FALSE;
  for (int r = 0; r < n; r++)
    {
      gboolean first = TRUE;
      for (int q = 0; q < r && first; q++)
        first = memcmp (all + 32 * q, all + 32 * r, 32) != 0;
      if (first)
        g_array_append_val (leaders, r);
      if (memcmp (all + 32 * r, all + 32 * me, 32) == 0)
        g_array_append_val (members, r);
    }
  return TRUE;
}

KsComm *
ks_comm_hierarchical (KsRegistry *registry, const KsConfig *config, KsComm *world,
                      const char *host, const char *local_backend, GError **error)
{
  g_autoptr (GArray) members = g_array_new (FALSE, FALSE, sizeof (int));
  g_autoptr (GArray) leaders = g_array_new (FALSE, FALSE, sizeof (int));
  int me = ks_comm_rank (world), local_rank = 0;
  Hier *h;
  KsComm *comm;

  if (!world_has_slots (world, error) || !find_hosts (world, host, members, leaders, error))
    return NULL;
  while (g_array_index (members, int, local_rank) != me)
    local_rank++;
  h = g_new0 (Hier, 1);
  h->ops = COMM_OPS (world);
  h->ctx = CTX (world);
  h->size = ks_comm_size (world);
  /* this host's ranks meet under the keys of their leader */
  g_autofree char *prefix = g_strdup_printf ("ks/host%d/", g_array_index (members, int, 0));
  h->local_store = prefixed_store (world->store, prefix);
  if ((h->local = ks_comm_new (registry, config, local_backend, error)) == NULL
      || !ks_comm_connect (h->local, h->local_store, local_rank, members->len, world->timeout_ms,
                           error)
      || (local_rank == 0 && leaders->len > 1
          && (h->leaders = ks_comm_subgroup (world, (int *) leaders->data, leaders->len, error))
                 == NULL))
    {
      hier_destroy (h); /* the caller keeps the world */
      return NULL;
    }
  /* the host's errors name ranks as the world does */
  memcpy (h->local->world, members->data, members->len * sizeof (int));
  h->world = world;
  comm = g_new0 (KsComm, 1);
  comm->instance = world->instance;
  comm->instance.impl = &hier_impl;
  comm->instance.settings = NULL;
  comm->instance.ctx = h;
  comm->shared_instance = TRUE;
  comm->store = world->store;
  comm->timeout_ms = world->timeout_ms;
  comm->group = g_strdup (world->group);
  comm->n_world = world->n_world;
  comm->world = g_memdup2 (world->world, world->n_world * sizeof (int));
  return comm;
}
