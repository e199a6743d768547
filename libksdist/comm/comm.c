/* The store and the communicator as the core calls them.
 *
 * Every collective is numbered; when one fails with a timeout or a lost peer, the ranks
 * that saw the failure say so in the store under that number, and the error gains the
 * list of ranks that did not: the ones that never reached the operation (a dead or
 * stuck process), which is what the user has to look at. */
#include "ks-private.h"

#include <string.h>

#include "comm-private.h"

/* ---- store ---- */

/* A store waits for nothing longer than [comm] timeout: its connects, its queries' answers
 * (a wait's own timeout aside). */
KsStore *
ks_store_new (KsRegistry *registry, const KsConfig *config, const char *name, GError **error)
{
  KsStore *store = (KsStore *) ks_instance_new (registry, config, KS_KIND_STORE, name,
                                                sizeof (KsStore), error);
  double timeout_s = config != NULL ? ks_config_get_double (config, "comm", "timeout") : 0;
  if (store != NULL && timeout_s > 0 && KS_OPS_HAS (STORE_OPS (store), KsStoreOps, set_timeout)
      && !STORE_OPS (store)->set_timeout (CTX (store), (int) MIN (timeout_s * 1000, G_MAXINT),
                                          error))
    g_clear_pointer (&store, ks_store_free);
  return store;
}

void
ks_store_free (KsStore *store)
{
  ks_instance_free ((KsInstance *) store);
}

const char *
ks_store_name (const KsStore *store)
{
  return store->instance.impl->name;
}

gboolean
ks_store_token_required (const char *token, const char *who, GError **error)
{
  if (token != NULL && *token != '\0')
    return TRUE;
  g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
               "%s: KS_STORE_TOKEN is not set, and a job's servers and workers know each "
               "other by it (a server without one would take requests from anyone who "
               "reaches its port): `ksdist launch` sets one; for processes started "
               "otherwise set KS_STORE_TOKEN to the same secret in every process of the "
               "job (e.g. the output of `head -c16 /dev/urandom | xxd -p`, made once)", who);
  return FALSE;
}

gboolean
ks_store_open (KsStore *store, const char *address, const char *prefix, const char *token,
               GError **error)
{
  return STORE_OPS (store)->open (CTX (store), address, prefix, token, error);
}

gboolean
ks_store_set (KsStore *store, const char *key, const void *data, gsize len, GError **error)
{
  return STORE_OPS (store)->set (CTX (store), key, data, len, error);
}

void
ks_store_report_failure (KsStore *store, const char *who, const char *message)
{
  g_autofree char *first = ks_store_failure (store);
  g_autofree char *text = g_strdup_printf ("%s failed: %s", who, message);
  if (first == NULL) /* two at once: either one is a first cause */
    STORE_OPS (store)->set (CTX (store), KS_STORE_FAILURE_KEY, text, strlen (text) + 1, NULL);
}

char *
ks_store_failure (KsStore *store)
{
  void *data = NULL;
  gsize len;
  if (!STORE_OPS (store)->get (CTX (store), KS_STORE_FAILURE_KEY, 1, &data, &len, NULL))
    return NULL;
  char *text = g_strndup (data, len); /* whatever a peer wrote, a string */
  g_free (data);
  return text;
}

#define FAILURE_LOOK_MS 500 /* how often a long wait looks for a peer's failure */

/* A store's "... within LAST ms" of the wait's last slice says the whole wait's. */
void
ks_store_whole_timeout (GError *error, int last_ms, int timeout_ms)
{
  g_autofree char *tail = g_strdup_printf (" within %d ms", last_ms);
  if (error == NULL || !g_error_matches (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT)
      || !g_str_has_suffix (error->message, tail))
    return;
  char *whole = g_strdup_printf ("%.*s within %d ms",
                                 (int) (strlen (error->message) - strlen (tail)),
                                 error->message, timeout_ms);
  g_free (error->message);
  error->message = whole;
}

gboolean
ks_store_get (KsStore *store, const char *key, int timeout_ms, void **data, gsize *len,
              GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  for (;;)
    {
      int left = MAX (0, (int) ((deadline - g_get_monotonic_time ()) / 1000));
      if (strcmp (key, KS_STORE_FAILURE_KEY) == 0)
        return STORE_OPS (store)->get (CTX (store), key, timeout_ms, data, len, error);
      if (left <= FAILURE_LOOK_MS)
        {
          if (STORE_OPS (store)->get (CTX (store), key, left, data, len, error))
            return TRUE;
          ks_store_whole_timeout (error != NULL ? *error : NULL, left, timeout_ms);
          return FALSE;
        }
      GError *slice = NULL;
      if (STORE_OPS (store)->get (CTX (store), key, FAILURE_LOOK_MS, data, len, &slice))
        return TRUE;
      if (!g_error_matches (slice, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT))
        {
          g_propagate_error (error, slice); /* not a wait: the store's own failure */
          return FALSE;
        }
      g_error_free (slice);
      g_autofree char *failed = ks_store_failure (store);
      if (failed != NULL)
        {
          g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST, "waiting for %s in the "
                       "store: %s", key, failed);
          return FALSE;
        }
    }
}

gboolean
ks_store_wait (KsStore *store, const char *const *keys, int timeout_ms, GError **error)
{
  if (KS_OPS_HAS (STORE_OPS (store), KsStoreOps, wait))
    return STORE_OPS (store)->wait (CTX (store), keys, timeout_ms, error);
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  for (guint i = 0; keys[i] != NULL; i++)
    {
      g_autofree void *data = NULL;
      gsize len;
      int left = MAX (0, (int) ((deadline - g_get_monotonic_time ()) / 1000));
      if (!ks_store_get (store, keys[i], left, &data, &len, error))
        return FALSE;
    }
  return TRUE;
}

gboolean
ks_store_add (KsStore *store, const char *key, gint64 delta, gint64 *result, GError **error)
{
  KS_REQUIRE_SLOT (&store->instance, KsStoreOps, add, error);
  return STORE_OPS (store)->add (CTX (store), key, delta, result, error);
}

gboolean
ks_store_serve (KsStore *store, const char *address, const char *token, char **bound,
                GError **error)
{
  KS_REQUIRE_SLOT (&store->instance, KsStoreOps, serve, error);
  return STORE_OPS (store)->serve (CTX (store), address, token, bound, error);
}

const KsStoreOps *
ks_store_ops (const KsStore *store)
{
  return STORE_OPS (store);
}

void *
ks_store_ctx (const KsStore *store)
{
  return CTX (store);
}

/* ---- communicator ---- */

KsComm *
ks_comm_new (KsRegistry *registry, const KsConfig *config, const char *name, GError **error)
{
  KsComm *comm = (KsComm *) ks_instance_new (registry, config, KS_KIND_COMM, name,
                                             sizeof (KsComm), error);
  if (comm != NULL)
    comm->group = g_strdup ("");
  return comm;
}

void
ks_comm_free (KsComm *comm)
{
  if (comm == NULL)
    return;
  g_free (comm->group);
  g_free (comm->world);
  if (comm->shared_instance)
    {
      COMM_OPS (comm)->destroy (CTX (comm));
      g_free (comm);
    }
  else
    ks_instance_free ((KsInstance *) comm);
}

const char *
ks_comm_name (const KsComm *comm)
{
  return comm->instance.impl->name;
}

gboolean
ks_comm_connect (KsComm *comm, KsStore *store, int rank, int size, int timeout_ms,
                 GError **error)
{
  if (size < 1 || rank < 0 || rank >= size || timeout_ms <= 0)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "%s: cannot join as rank %d of %d with a timeout of %d ms: the rank must be "
                   "in [0, size) and the timeout positive",
                   ks_comm_name (comm), rank, size, timeout_ms);
      return FALSE;
    }
  if (!COMM_OPS (comm)->connect (CTX (comm), STORE_OPS (store), CTX (store), rank, size,
                                 timeout_ms, error))
    {
      g_autofree char *who = g_strdup_printf ("rank %d", rank);
      if (error != NULL && *error != NULL)
        ks_store_report_failure (store, who, (*error)->message);
      return FALSE;
    }
  comm->store = store;
  comm->timeout_ms = timeout_ms;
  comm->n_world = size;
  comm->world = g_new (int, size);
  for (int i = 0; i < size; i++)
    comm->world[i] = i;
  return TRUE;
}

int
ks_comm_rank (const KsComm *comm)
{
  return COMM_OPS (comm)->rank (CTX (comm));
}

int
ks_comm_size (const KsComm *comm)
{
  return COMM_OPS (comm)->world_size (CTX (comm));
}

/* Whether rank r said it saw the collective before or after this one fail: it is alive
 * and one collective apart (a ring's rank can finish its part of one while a neighbour,
 * or this rank, waits in it), so it is no more missing than this rank. */
static gboolean
failed_nearby (KsComm *comm, int r)
{
  for (int d = -1; d <= 1; d += 2)
    {
      g_autofree char *key = g_strdup_printf ("ks/failed%s/%" G_GUINT64_FORMAT "/%d",
                                              comm->group, comm->seq + d, r);
      g_autofree void *data = NULL;
      gsize len;
      if ((d > 0 || comm->seq > 1)
          && STORE_OPS (comm->store)->get (CTX (comm->store), key, 1, &data, &len, NULL))
        return TRUE;
    }
  return FALSE;
}

/* After a failed collective: says in the store that this rank saw it fail, waits for the
 * others to say the same, and appends the ranks that did not (and, at once, those the
 * plugin knows to have ended). A rank that lost its peer
 * fails at once and its neighbours only when their own timeout expires, so it waits 1.5
 * timeouts; after a timeout the others, stuck on the same rank, time out about when this
 * one did, so half a timeout covers their lag (a stalled rank is named after 1.5). */
static gboolean
name_missing_ranks (KsComm *comm, const char *op, GError **error)
{
  int me = ks_comm_rank (comm), n = ks_comm_size (comm);
  g_autoptr (GString) missing = g_string_new (NULL), gone = g_string_new (NULL);
  g_autofree gboolean *ended = g_new0 (gboolean, n);
  gint64 deadline;

  if (error == NULL || *error == NULL || comm->store == NULL
      || !((*error)->domain == KS_COMM_ERROR
           && ((*error)->code == KS_COMM_ERROR_TIMEOUT
               || (*error)->code == KS_COMM_ERROR_PEER_LOST)))
    return FALSE;
  g_autofree char *mine = g_strdup_printf ("ks/failed%s/%" G_GUINT64_FORMAT "/%d", comm->group,
                                           comm->seq, me);
  if (!ks_store_set (comm->store, mine, op, strlen (op), NULL))
    return FALSE;
  if (KS_OPS_HAS (COMM_OPS (comm), KsCommOps, ended_ranks))
    COMM_OPS (comm)->ended_ranks (CTX (comm), ended);
  deadline = g_get_monotonic_time ()
             + (gint64) comm->timeout_ms * ((*error)->code == KS_COMM_ERROR_TIMEOUT ? 500 : 1500);
  for (int r = 0; r < n; r++)
    {
      g_autofree char *key = g_strdup_printf ("ks/failed%s/%" G_GUINT64_FORMAT "/%d", comm->group,
                                              comm->seq, r);
      g_autofree void *data = NULL;
      gsize len;
      int left = MAX (1, (int) ((deadline - g_get_monotonic_time ()) / 1000));
      if (r == me)
        continue;
      /* an ended rank that said it saw the failure failed because of it, and then ended:
       * not a cause */
      if (ended[r] && !STORE_OPS (comm->store)->get (CTX (comm->store), key, 1, &data, &len, NULL))
        g_string_append_printf (gone, "%s%d", gone->len > 0 ? ", " : "", comm->world[r]);
      else if (!ended[r]
               && !STORE_OPS (comm->store)->get (CTX (comm->store), key, left, &data, &len, NULL)
               && !failed_nearby (comm, r))
        g_string_append_printf (missing, "%s%d", missing->len > 0 ? ", " : "", comm->world[r]);
    }
  /* a rank that failed by itself said why (the trainer does): its cause comes first */
  g_autofree char *cause = missing->len > 0 || gone->len > 0 ? ks_store_failure (comm->store) : NULL;
  if (cause != NULL)
    g_prefix_error (error, "%s; on this rank: ", cause);
  if (missing->len > 0)
    g_prefix_error (error, "rank %s did not reach %s #%" G_GUINT64_FORMAT
                    " within %d ms (the others did): ",
                    missing->str, op, comm->seq, comm->timeout_ms);
  if (gone->len > 0)
    g_prefix_error (error, "rank %s ended before %s #%" G_GUINT64_FORMAT "%s: ", gone->str, op,
                    comm->seq, missing->len > 0 ? "" : " (the others reached it)");
  return TRUE;
}

/* Every collective goes through here: numbered, and its failure explained. */
#define COLLECTIVE(comm, name, call, error)                                               \
  G_STMT_START                                                                            \
  {                                                                                       \
    gboolean ok_;                                                                         \
    (comm)->seq++;                                                                        \
    ok_ = (call);                                                                         \
    if (!ok_)                                                                             \
      name_missing_ranks ((comm), (name), (error));                                       \
    return ok_;                                                                           \
  }                                                                                       \
  G_STMT_END

static gboolean
check_reduce (KsComm *comm, KsDType dtype, KsReduceOp op, GError **error)
{
  if (op == KS_REDUCE_AVG && dtype != KS_DTYPE_FLOAT32 && dtype != KS_DTYPE_FLOAT64)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "%s: avg of %s is not defined; sum the values and divide yourself",
                   ks_comm_name (comm), ks_dtype_name (dtype));
      return FALSE;
    }
  return TRUE;
}

gboolean
ks_comm_allreduce (KsComm *comm, void *buf, gsize count, KsDType dtype, KsReduceOp op,
                   GError **error)
{
  if (!check_reduce (comm, dtype, op, error))
    return FALSE;
  COLLECTIVE (comm, "allreduce",
              COMM_OPS (comm)->allreduce (CTX (comm), buf, count, dtype, op, error), error);
}

gboolean
ks_comm_broadcast (KsComm *comm, void *buf, gsize count, KsDType dtype, int root,
                   GError **error)
{
  if (root < 0 || root >= ks_comm_size (comm))
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "%s: broadcast from rank %d, but the ranks are 0..%d", ks_comm_name (comm),
                   root, ks_comm_size (comm) - 1);
      return FALSE;
    }
  COLLECTIVE (comm, "broadcast",
              COMM_OPS (comm)->broadcast (CTX (comm), buf, count, dtype, root, error), error);
}

gboolean
ks_comm_barrier (KsComm *comm, GError **error)
{
  COLLECTIVE (comm, "barrier", COMM_OPS (comm)->barrier (CTX (comm), error), error);
}

#define REQUIRE(c, field, error) KS_REQUIRE_SLOT (&(c)->instance, KsCommOps, field, error)

gboolean
ks_comm_allgather (KsComm *comm, const void *send, void *recv, gsize count, KsDType dtype,
                   GError **error)
{
  REQUIRE (comm, allgather, error);
  COLLECTIVE (comm, "allgather",
              COMM_OPS (comm)->allgather (CTX (comm), send, recv, count, dtype, error), error);
}

gboolean
ks_comm_allgatherv (KsComm *comm, const void *send, void *recv, const gsize *counts,
                    KsDType dtype, GError **error)
{
  REQUIRE (comm, allgatherv, error);
  COLLECTIVE (comm, "allgatherv",
              COMM_OPS (comm)->allgatherv (CTX (comm), send, recv, counts, dtype, error), error);
}

gboolean
ks_comm_reduce_scatter (KsComm *comm, const void *send, void *recv, gsize recv_count,
                        KsDType dtype, KsReduceOp op, GError **error)
{
  REQUIRE (comm, reduce_scatter, error);
  if (!check_reduce (comm, dtype, op, error))
    return FALSE;
  COLLECTIVE (comm, "reduce_scatter",
              COMM_OPS (comm)->reduce_scatter (CTX (comm), send, recv, recv_count, dtype, op,
                                               error),
              error);
}

static gboolean
check_peer (KsComm *comm, const char *what, int peer, GError **error)
{
  if (peer < 0 || peer >= ks_comm_size (comm) || peer == ks_comm_rank (comm))
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "%s: %s rank %d: the peer must be another rank in 0..%d", ks_comm_name (comm),
                   what, peer, ks_comm_size (comm) - 1);
      return FALSE;
    }
  return TRUE;
}

/* Point-to-point messages are not numbered: only the two ranks take part. */
gboolean
ks_comm_send (KsComm *comm, const void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  REQUIRE (comm, send, error);
  return check_peer (comm, "send to", peer, error)
         && COMM_OPS (comm)->send (CTX (comm), buf, nbytes, peer, tag, error);
}

gboolean
ks_comm_recv (KsComm *comm, void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  REQUIRE (comm, recv, error);
  return check_peer (comm, "receive from", peer, error)
         && COMM_OPS (comm)->recv (CTX (comm), buf, nbytes, peer, tag, error);
}

struct KsCommRequest {
  KsComm *comm;
  void *handle;
};

static KsCommRequest *
request_new (KsComm *comm, void *handle)
{
  KsCommRequest *r;
  if (handle == NULL)
    return NULL;
  r = g_new (KsCommRequest, 1);
  r->comm = comm;
  r->handle = handle;
  return r;
}

/* Whether `comm`'s plugin has non-blocking operations and `peer` is in it. */
static gboolean
can_start (KsComm *comm, const char *slot, const char *verb, int peer, GError **error)
{
  if (!KS_OPS_HAS (COMM_OPS (comm), KsCommOps, wait))
    return ks_set_not_supported (error, comm->instance.plugin->name, KS_KIND_COMM, slot);
  return check_peer (comm, verb, peer, error);
}

KsCommRequest *
ks_comm_isend (KsComm *comm, const void *buf, gsize nbytes, int peer, guint32 tag,
               GError **error)
{
  if (!can_start (comm, "isend", "send to", peer, error))
    return NULL;
  return request_new (comm, COMM_OPS (comm)->isend (CTX (comm), buf, nbytes, peer, tag, error));
}

KsCommRequest *
ks_comm_irecv (KsComm *comm, void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  if (!can_start (comm, "irecv", "receive from", peer, error))
    return NULL;
  return request_new (comm, COMM_OPS (comm)->irecv (CTX (comm), buf, nbytes, peer, tag, error));
}

gboolean
ks_comm_wait (KsCommRequest *request, GError **error)
{
  gboolean ok = COMM_OPS (request->comm)->wait (CTX (request->comm), request->handle, error);
  g_free (request);
  return ok;
}

gboolean
ks_comm_set_timeout (KsComm *comm, int timeout_ms, GError **error)
{
  REQUIRE (comm, set_timeout, error);
  if (!COMM_OPS (comm)->set_timeout (CTX (comm), timeout_ms, error))
    return FALSE;
  comm->timeout_ms = timeout_ms;
  return TRUE;
}

void *
ks_comm_alloc_shared (KsComm *comm, gsize nbytes, GError **error)
{
  if (!KS_OPS_HAS (COMM_OPS (comm), KsCommOps, alloc_shared))
    {
      ks_set_not_supported (error, comm->instance.plugin->name, KS_KIND_COMM, "alloc_shared");
      return NULL;
    }
  return COMM_OPS (comm)->alloc_shared (CTX (comm), nbytes, error);
}

gboolean
ks_comm_use_compute (KsComm *comm, KsCompute *compute, GError **error)
{
  void *stream = ks_compute_native_stream (compute);
  if (stream == NULL || !KS_OPS_HAS (COMM_OPS (comm), KsCommOps, use_stream))
    return TRUE;
  return COMM_OPS (comm)->use_stream (CTX (comm), stream, error);
}

KsComm *
ks_comm_subgroup (KsComm *comm, const int *ranks, int n_ranks, GError **error)
{
  int me = ks_comm_rank (comm);
  gboolean member = FALSE;
  KsComm *sub;
  void *ctx;

  if (!KS_OPS_HAS (COMM_OPS (comm), KsCommOps, subgroup))
    {
      ks_set_not_supported (error, comm->instance.plugin->name, KS_KIND_COMM, "subgroup");
      return NULL;
    }
  for (int i = 0; i < n_ranks; i++)
    {
      if (ranks[i] < 0 || ranks[i] >= ks_comm_size (comm) || (i > 0 && ranks[i] <= ranks[i - 1]))
        {
          g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                       "%s: sub-group ranks must be increasing and in 0..%d; got %d at index %d",
                       ks_comm_name (comm), ks_comm_size (comm) - 1, ranks[i], i);
          return NULL;
        }
      member |= ranks[i] == me;
    }
  if (!member)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "%s: rank %d asked for a sub-group it is not in", ks_comm_name (comm), me);
      return NULL;
    }
  if ((ctx = COMM_OPS (comm)->subgroup (CTX (comm), ranks, n_ranks, error)) == NULL)
    return NULL;
  sub = g_new0 (KsComm, 1);
  sub->instance = comm->instance;
  sub->instance.ctx = ctx;
  sub->shared_instance = TRUE;
  sub->store = comm->store;
  sub->timeout_ms = comm->timeout_ms;
  GString *group = g_string_new (comm->group);
  g_string_append (group, "/g");
  sub->world = g_new (int, n_ranks);
  sub->n_world = n_ranks;
  for (int i = 0; i < n_ranks; i++)
    {
      sub->world[i] = comm->world[ranks[i]];
      g_string_append_printf (group, "%s%d", i > 0 ? "," : "", ranks[i]);
    }
  sub->group = g_string_free (group, FALSE);
  return sub;
}
