/* The shared-memory collectives. An operation runs in rounds of at most `chunk` bytes per
 * rank, alternating between two sets of slots: in a round each rank writes its slot,
 * arrives, waits for every rank's arrival, and reads. A rank writes a set again two
 * rounds later, only after every rank arrived in the round between, which each did after
 * reading this one; so one arrival per round suffices (allreduce has two: its reduced
 * result is shared too). */
/* the reductions at SIMD width: GCC 12 at -O2 leaves these loops scalar; an element-wise
 * sum vectorized is the same sum, bit for bit */
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")

#include "shm.h"
#include "../target-clones.h"

#include <string.h>

/* ---- element types and reductions ---- */

static gsize
dtype_size (KsDType dtype)
{
  switch (dtype)
    {
    case KS_DTYPE_FLOAT32: case KS_DTYPE_INT32: return 4;
    case KS_DTYPE_FLOAT64: case KS_DTYPE_INT64: return 8;
    default: return 0;
    }
}

/* Built for x86-64-v3 (AVX2) too (KS_VECTOR_KERNEL): an in-cache reduction moves twice
 * the bytes per instruction (measured: 2 ranks' 256 KiB allreduce on shared memory 7 us
 * against 4). Sums, products, minima, maxima and quotients round alike at any vector
 * width (no multiply-add to contract): both builds give the same bits.
 * out = op(a, x), element-wise, a as the accumulator is (out may be a). */
#define REDUCE_INTO(T)                                                                     \
  KS_VECTOR_KERNEL static void reduce_##T (T *out, const T *a, const T *x, gsize n,       \
                                           KsReduceOp op)                                  \
  {                                                                                        \
    switch (op)                                                                            \
      {                                                                                    \
      case KS_REDUCE_MIN: for (gsize i = 0; i < n; i++) out[i] = x[i] < a[i] ? x[i] : a[i]; break; \
      case KS_REDUCE_MAX: for (gsize i = 0; i < n; i++) out[i] = x[i] > a[i] ? x[i] : a[i]; break; \
      case KS_REDUCE_PROD: for (gsize i = 0; i < n; i++) out[i] = a[i] * x[i]; break;     \
      default: for (gsize i = 0; i < n; i++) out[i] = a[i] + x[i]; break;                  \
      }                                                                                    \
  }                                                                                        \

REDUCE_INTO (float)
REDUCE_INTO (double)
REDUCE_INTO (gint32)
REDUCE_INTO (gint64)

/* out = op(a, x) over n elements. */
static void
reduce (void *out, const void *a, const void *x, gsize n, KsDType dtype, KsReduceOp op)
{
  switch (dtype)
    {
    case KS_DTYPE_FLOAT32: reduce_float (out, a, x, n, op); break;
    case KS_DTYPE_FLOAT64: reduce_double (out, a, x, n, op); break;
    case KS_DTYPE_INT32: reduce_gint32 (out, a, x, n, op); break;
    default: reduce_gint64 (out, a, x, n, op); break;
    }
}

/* An average (the core takes it of floats only): the sum divided by the ranks. */
KS_VECTOR_KERNEL static void
divide (void *acc, gsize n, KsDType dtype, int by)
{
  if (dtype == KS_DTYPE_FLOAT32)
    for (gsize i = 0; i < n; i++)
      ((float *) acc)[i] /= by;
  else
    for (gsize i = 0; i < n; i++)
      ((double *) acc)[i] /= by;
}

/* The reduction of n elements at `part` of rank 0, `part + stride` of rank 1, ... into
 * `out`, in rank order (the same bits on every rank): one pass over `out` per rank
 * after the first two. Rank `me`'s elements are read at `own` instead where it is not
 * NULL (a private buffer not copied to the slots: the same values, so the same bits). */
static void
reduce_ranks (void *out, const guint8 *part, gsize stride, int ranks, int me, const void *own,
              gsize n, KsDType dtype, KsReduceOp op)
{
#define OPERAND(r) ((r) == me && own != NULL ? (const guint8 *) own : part + (r) * stride)
  if (n == 0)
    return;
  if (ranks == 1)
    {
      if (out != OPERAND (0))
        memcpy (out, OPERAND (0), n * dtype_size (dtype));
    }
  else
    reduce (out, OPERAND (0), OPERAND (1), n, dtype, op);
  for (int r = 2; r < ranks; r++)
    reduce (out, out, OPERAND (r), n, dtype, op);
  if (op == KS_REDUCE_AVG)
    divide (out, n, dtype, ranks);
#undef OPERAND
}

/* The reduction over every rank's slot of round `round`, elements [lo, hi), into `out`;
 * this rank's elements read at `own` (may be NULL: from its slot). */
static void
reduce_slots (Shm *s, guint64 round, gsize offset, gsize lo, gsize hi, const void *own,
              void *out, KsDType dtype, KsReduceOp op)
{
  gsize es = dtype_size (dtype);
  if (hi > lo) /* a round's slots lie one chunk apart (shm_slot) */
    reduce_ranks (out, shm_slot (s, round, 0) + offset + lo * es, s->chunk, s->size, s->rank,
                  own, hi - lo, dtype, op);
}

static gboolean
check_dtype (const char *what, KsDType dtype, GError **error)
{
  if (dtype_size (dtype) > 0)
    return TRUE;
  return shm_fail (error, KS_COMM_ERROR_INVALID, "%s of %s: shared memory reduces and moves "
               "float32, float64, int32 and int64", what, ks_dtype_name (dtype));
}

/* ---- collectives ---- */

/* The shared region holding this rank's [buf, buf + bytes) and the offset there, or -1. */
static int
shared_region (Shm *s, const void *buf, gsize bytes, gsize *offset)
{
  for (guint i = 0; i < s->regions->len; i++)
    {
      const SharedRegion *r = &g_array_index (s->regions, SharedRegion, i);
      const guint8 *mine = r->base + s->rank * r->stride, *at = buf;
      if (at >= mine && at + bytes <= mine + r->len)
        return *offset = at - mine, (int) i;
    }
  return -1;
}

/* Says where this rank's allreduce buffer is (0: private memory), for same_buffers. */
static guint64
buffer_id (int region, gsize offset, gsize count)
{
  if (region < 0)
    return 0;
  return ((guint64) (region + 1) * 0x9E3779B97F4A7C15ull) ^ (offset * 0xC2B2AE3D27D4EB4Full)
         ^ count;
}

/* After the first arrival: whether every rank's buffer is where this one's is (the two
 * ways of reducing must not meet). */
static gboolean
same_buffers (Shm *s, guint64 id, GError **error)
{
  for (int r = 0; r < s->size; r++)
    if (s->h->ranks[r].allreduce_at != id)
      {
        const char *theirs = s->h->ranks[r].allreduce_at != 0 ? "shared" : "private";
        s->broken = TRUE;
        return shm_fail (error, KS_COMM_ERROR_INVALID, "allreduce on rank %d of %d: rank %d's "
                         "buffer is in %s memory, this rank's in %s memory%s: give every rank "
                         "its part of the same memory from alloc_shared at the same offset, or "
                         "none", s->rank, s->size, r, theirs, id != 0 ? "shared" : "private",
                         (id != 0) == (*theirs == 's') ? " at another offset or count" : "");
      }
  return TRUE;
}

/* Without staging: each rank reduces its share of the elements straight from every rank's
 * part of the region (in rank order, as the slots are, so the sums are the same bits) into
 * rank 0's part (each element read there before it is written), then copies the result
 * into every other part, a chunk at a time, so the copy reads what the reduction left in
 * the cache: one pass fewer than through a scratch buffer. */
static gboolean
allreduce_shared (Shm *s, int region, gsize offset, gsize count, KsDType dtype,
                  KsReduceOp op, GError **error)
{
  const SharedRegion *r = &g_array_index (s->regions, SharedRegion, region);
  gsize es = dtype_size (dtype), share = (count + s->size - 1) / s->size;
  gsize lo = MIN (count, share * s->rank), hi = MIN (count, lo + share), per = s->chunk / es;
  guint64 id = buffer_id (region, offset, count);

  s->h->ranks[s->rank].allreduce_at = id;
  if (!shm_arrive_and_wait (s, "allreduce", error) || !same_buffers (s, id, error))
    return FALSE;
  for (gsize at = lo; at < hi; at += per)
    {
      gsize n = MIN (per, hi - at), from = offset + at * es;
      guint8 *first = r->base + from;
      reduce_ranks (first, first, r->stride, s->size, s->rank, NULL, n, dtype, op);
      for (int q = 1; q < s->size; q++)
        memcpy (first + q * r->stride, first, n * es);
    }
  return shm_arrive_and_wait (s, "allreduce", error);
}

/* Copies the n elements of es bytes at `from` to `to`, all but those of [lo, hi). */
static void
copy_but (guint8 *to, const guint8 *from, gsize lo, gsize hi, gsize n, gsize es)
{
  memcpy (to, from, lo * es);
  memcpy (to + hi * es, from + hi * es, (n - hi) * es);
}

gboolean
shm_allreduce (void *p, void *buf, gsize count, KsDType dtype, KsReduceOp op, GError **error)
{
  Shm *s = p;
  gsize es = dtype_size (dtype), offset;
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&s->lock);
  if (!check_dtype ("allreduce", dtype, error))
    return FALSE;
  int region = count > 0 ? shared_region (s, buf, count * es, &offset) : -1;
  if (region >= 0)
    return allreduce_shared (s, region, offset, count, dtype, op, error);
  gsize per_round = s->chunk / es;
  s->h->ranks[s->rank].allreduce_at = 0;
  for (gsize at = 0; at < count; at += per_round)
    {
      gsize n = MIN (per_round, count - at), share = (n + s->size - 1) / s->size;
      gsize lo = MIN (n, share * s->rank), hi = MIN (n, lo + share);
      guint64 round = s->rounds++;
      guint8 *result = shm_slot (s, round, s->size), *mine = shm_slot (s, round, s->rank);
      guint8 *in = (guint8 *) buf + at * es;
      /* the slot holds what the other ranks reduce; this rank reads its share in place */
      copy_but (mine, in, lo, hi, n, es);
      if (!shm_arrive_and_wait (s, "allreduce", error) || (at == 0 && !same_buffers (s, 0, error)))
        return FALSE;
      reduce_slots (s, round, 0, lo, hi, in + lo * es, result + lo * es, dtype, op);
      memcpy (in + lo * es, result + lo * es, (hi - lo) * es);
      if (!shm_arrive_and_wait (s, "allreduce", error))
        return FALSE;
      copy_but (in, result, lo, hi, n, es);
    }
  return TRUE;
}

gboolean
shm_broadcast (void *p, void *buf, gsize count, KsDType dtype, int root, GError **error)
{
  Shm *s = p;
  gsize bytes = count * dtype_size (dtype);
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&s->lock);
  if (!check_dtype ("broadcast", dtype, error))
    return FALSE;
  if (root < 0 || root >= s->size)
    return shm_fail (error, KS_COMM_ERROR_INVALID, "broadcast from rank %d of %d", root,
                     s->size);
  for (gsize at = 0; at < bytes; at += s->chunk)
    {
      gsize n = MIN (s->chunk, bytes - at);
      guint64 round = s->rounds++;
      if (s->rank == root)
        memcpy (shm_slot (s, round, root), (guint8 *) buf + at, n);
      if (!shm_arrive_and_wait (s, "broadcast", error))
        return FALSE;
      if (s->rank != root)
        memcpy ((guint8 *) buf + at, shm_slot (s, round, root), n);
    }
  return TRUE;
}

gboolean
shm_barrier (void *p, GError **error)
{
  Shm *s = p;
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&s->lock);
  return shm_arrive_and_wait (s, "barrier", error);
}

/* Rank r gives counts[r] elements (bytes[r] bytes at displacement[r] of recv). */
static gboolean
gather (Shm *s, const void *send, void *recv, const gsize *counts, gsize es, const char *what,
        GError **error)
{
  gsize most = 0, at_rank = 0;
  g_autofree gsize *displacement = g_new (gsize, s->size);
  for (int r = 0; r < s->size; r++)
    {
      displacement[r] = at_rank;
      at_rank += counts[r] * es;
      most = MAX (most, counts[r] * es);
    }
  for (gsize at = 0; at < most; at += s->chunk)
    {
      guint64 round = s->rounds++;
      gsize mine = counts[s->rank] * es;
      if (at < mine)
        memcpy (shm_slot (s, round, s->rank), (const guint8 *) send + at,
                MIN (s->chunk, mine - at));
      if (!shm_arrive_and_wait (s, what, error))
        return FALSE;
      for (int r = 0; r < s->size; r++)
        if (at < counts[r] * es)
          memcpy ((guint8 *) recv + displacement[r] + at, shm_slot (s, round, r),
                  MIN (s->chunk, counts[r] * es - at));
    }
  return TRUE;
}

gboolean
shm_allgather (void *p, const void *send, void *recv, gsize count, KsDType dtype,
               GError **error)
{
  Shm *s = p;
  g_autofree gsize *counts = g_new (gsize, s->size);
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&s->lock);
  if (!check_dtype ("allgather", dtype, error))
    return FALSE;
  for (int r = 0; r < s->size; r++)
    counts[r] = count;
  return gather (s, send, recv, counts, dtype_size (dtype), "allgather", error);
}

gboolean
shm_allgatherv (void *p, const void *send, void *recv, const gsize *counts, KsDType dtype,
                GError **error)
{
  Shm *s = p;
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&s->lock);
  return check_dtype ("allgatherv", dtype, error)
         && gather (s, send, recv, counts, dtype_size (dtype), "allgatherv", error);
}

/* Each round, every rank puts a piece of each block side by side in its slot and reduces
 * its own block's pieces from every slot: no rank computes what it does not keep. */
gboolean
shm_reduce_scatter (void *p, const void *send, void *recv, gsize recv_count, KsDType dtype,
                    KsReduceOp op, GError **error)
{
  Shm *s = p;
  gsize es = dtype_size (dtype);
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&s->lock);
  if (!check_dtype ("reduce_scatter", dtype, error))
    return FALSE;
  /* at least one element of each block a round: the least chunk holds 8 bytes a rank */
  G_STATIC_ASSERT (MIN_CHUNK_KIB * 1024 >= MAX_RANKS * 8);
  gsize per_round = s->chunk / es / s->size, bytes = recv_count * es;
  const guint8 *in = send;
  guintptr from = (guintptr) send, to = (guintptr) recv;
  /* its own block this rank reads in place, unless recv overlaps send (the result could
   * overwrite it before it is read) */
  gboolean in_place = to < from + s->size * bytes && from < to + bytes;
  for (gsize at = 0; at < recv_count; at += per_round)
    {
      gsize n = MIN (per_round, recv_count - at);
      guint64 round = s->rounds++;
      guint8 *mine = shm_slot (s, round, s->rank);
      const guint8 *own = in + (s->rank * recv_count + at) * es;
      for (int b = 0; b < s->size; b++)
        if (b != s->rank || in_place)
          memcpy (mine + b * n * es, in + (b * recv_count + at) * es, n * es);
      if (!shm_arrive_and_wait (s, "reduce_scatter", error))
        return FALSE;
      reduce_slots (s, round, s->rank * n * es, 0, n, in_place ? NULL : own,
                    (guint8 *) recv + at * es, dtype, op);
    }
  return TRUE;
}

