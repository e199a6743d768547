/* The shared-memory communicator: collectives between the ranks of one host through one
 * segment every rank maps (after DeepSpeed's CPU shm allreduce and Open MPI's coll/sm).
 *
 * Rank 0 creates the segment (shm_open, a random name given to the others through the
 * store) and unlinks it once every rank has it mapped, so a crash after connect leaves
 * nothing in /dev/shm (one during connect, only if rank 0 itself is killed then). An operation runs in rounds of at most `chunk` bytes per rank, alternating
 * between two sets of slots: in a round each rank writes its slot, arrives, waits for
 * every rank's arrival, and reads. A rank writes a set again two rounds later, only after
 * every rank arrived in the round between, which each did after reading this one; so one
 * arrival per round suffices (allreduce has two: its reduced result is shared too).
 *
 * Arrivals are per-rank counters in the segment. A waiter spins briefly, then sleeps on a
 * futex that every arrival bumps, waking every 100 ms to look for ranks whose process is
 * gone; past the timeout the error names the ranks that did not arrive. */
#include <config.h>
#include <ksdist/ksdist.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x6b736d31u /* "ksm1" */
#define MAX_RANKS 256
#define SPINS 4000       /* checks before sleeping: a round trip on one host is microseconds,
                          * unless a spinning rank holds the core a late one needs */
#define SLEEP_MS 100     /* the longest sleep between looks at the peers' processes */

/* One rank's line of the header, alone in its cache line. */
typedef struct {
  _Alignas (64) atomic_uint_least64_t arrived; /* its arrivals so far */
  atomic_int pid;
  guint64 pid_ns; /* its pid namespace: a pid means something only in ours */
} RankLine;

typedef struct {
  guint32 magic, size;
  guint64 chunk;
  _Alignas (64) atomic_uint wake;  /* the futex word: bumped by every arrival */
  atomic_uint sleepers;
  RankLine ranks[];
} Header;

typedef struct {
  gsize chunk;
  int rank, size, timeout_ms;
  char *name;        /* the segment's name until it is unlinked */
  guint8 *base;
  gsize map_len;
  Header *h;
  guint8 *data;
  guint64 arrivals; /* this rank's, as in its line */
  guint64 rounds;   /* which set of slots the next round uses */
  guint64 pid_ns;
  gboolean yield;   /* the ranks outnumber the cores: give the core away while waiting */
  gboolean broken;  /* an operation failed: the ranks' arrivals no longer line up */
  GMutex lock;      /* one operation at a time from this process's threads */
} Shm;

/* ---- the segment ---- */

static gsize
header_bytes (int size)
{
  return (sizeof (Header) + size * sizeof (RankLine) + 4095) / 4096 * 4096;
}

/* A set: a slot per rank, then the shared result. */
static guint8 *
slot (Shm *s, guint64 round, int rank)
{
  return s->data + ((round & 1) * (s->size + 1) + rank) * s->chunk;
}

static guint64
pid_namespace (void)
{
  struct stat st;
  return stat ("/proc/self/ns/pid", &st) == 0 ? (guint64) st.st_ino : 0;
}

static gboolean
fail (GError **error, int code, const char *format, ...) G_GNUC_PRINTF (3, 4);

static gboolean
fail (GError **error, int code, const char *format, ...)
{
  va_list args;
  g_autofree char *message = NULL;
  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (error, KS_COMM_ERROR, code, "shm: %s", message);
  return FALSE;
}

/* ---- waiting ---- */

/* A hint to the core that this thread spins (and to its sibling hyperthread). */
static inline void
cpu_relax (void)
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause ();
#elif defined(__aarch64__)
  __asm__ volatile ("yield");
#endif
}

static void
futex (atomic_uint *word, int op, unsigned value, const struct timespec *timeout)
{
  syscall (SYS_futex, word, op, value, timeout, NULL, 0);
}

/* The ranks whose arrivals are below `target`, as "1, 3"; NULL when none. */
static char *
late_ranks (Shm *s, guint64 target)
{
  GString *late = NULL;
  for (int r = 0; r < s->size; r++)
    if (atomic_load_explicit (&s->h->ranks[r].arrived, memory_order_acquire) < target)
      {
        if (late == NULL)
          late = g_string_new (NULL);
        g_string_append_printf (late, "%s%d", late->len ? ", " : "", r);
      }
  return late != NULL ? g_string_free (late, FALSE) : NULL;
}

/* Whether process `pid` has ended: gone, or a zombie its parent has not reaped yet. */
static gboolean
process_ended (int pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree char *stat = NULL;
  const char *state;

  if (kill (pid, 0) != 0)
    return errno == ESRCH;
  if (!g_file_get_contents (path, &stat, NULL, NULL))
    return FALSE;
  state = strrchr (stat, ')'); /* the name in parentheses may hold anything */
  return state != NULL && (state[2] == 'Z' || state[2] == 'X');
}

/* A late rank whose process has ended (in our pid namespace), or -1. */
static int
dead_rank (Shm *s, guint64 target)
{
  for (int r = 0; r < s->size; r++)
    {
      RankLine *line = &s->h->ranks[r];
      int pid = atomic_load (&line->pid);
      if (atomic_load_explicit (&line->arrived, memory_order_acquire) < target && pid > 0
          && line->pid_ns == s->pid_ns && process_ended (pid))
        return r;
    }
  return -1;
}

static gboolean
all_arrived (Shm *s, guint64 target)
{
  for (int r = 0; r < s->size; r++)
    if (atomic_load_explicit (&s->h->ranks[r].arrived, memory_order_acquire) < target)
      return FALSE;
  return TRUE;
}

/* Waits until every rank has arrived `target` times. */
static gboolean
wait_all (Shm *s, guint64 target, const char *what, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) s->timeout_ms * 1000;
  gint64 next_look = 0; /* for ended processes: at most every SLEEP_MS, not every wake-up */

  for (int i = 0; i < SPINS; i++)
    if (all_arrived (s, target))
      return TRUE;
    else if (s->yield)
      sched_yield (); /* a late rank may be waiting for this core */
    else
      cpu_relax ();
  for (;;)
    {
      unsigned seen = atomic_load (&s->h->wake);
      if (all_arrived (s, target))
        return TRUE;
      gint64 now = g_get_monotonic_time (), left = deadline - now;
      int dead = now >= next_look ? dead_rank (s, target) : -1;
      if (now >= next_look)
        next_look = now + SLEEP_MS * 1000;
      if (dead >= 0)
        return fail (error, KS_COMM_ERROR_PEER_LOST, "%s on rank %d of %d: rank %d (process %d) "
                     "is gone", what, s->rank, s->size, dead, atomic_load (&s->h->ranks[dead].pid));
      if (left <= 0)
        {
          g_autofree char *late = late_ranks (s, target);
          if (late == NULL)
            return TRUE;
          return fail (error, KS_COMM_ERROR_TIMEOUT, "%s on rank %d of %d: rank %s did not "
                       "arrive within %d ms", what, s->rank, s->size, late, s->timeout_ms);
        }
      gint64 nap = MIN (left, SLEEP_MS * 1000);
      struct timespec ts = { nap / 1000000, (nap % 1000000) * 1000 };
      atomic_fetch_add (&s->h->sleepers, 1);
      if (!all_arrived (s, target))
        futex (&s->h->wake, FUTEX_WAIT, seen, &ts);
      atomic_fetch_sub (&s->h->sleepers, 1);
    }
}

/* This rank's next arrival, and the wait for every other rank's. After a failure the
 * communicator refuses every operation: a later arrival would pair with the wrong one. */
static gboolean
arrive_and_wait (Shm *s, const char *what, GError **error)
{
  if (s->broken)
    return fail (error, KS_COMM_ERROR_FAILED, "%s on rank %d of %d: an earlier operation "
                 "failed, so the ranks are out of step; make a new communicator", what, s->rank,
                 s->size);
  atomic_store_explicit (&s->h->ranks[s->rank].arrived, ++s->arrivals, memory_order_release);
  atomic_fetch_add (&s->h->wake, 1);
  if (atomic_load (&s->h->sleepers) > 0)
    futex (&s->h->wake, FUTEX_WAKE, INT_MAX, NULL);
  if (!wait_all (s, s->arrivals, what, error))
    return s->broken = TRUE, FALSE;
  return TRUE;
}

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

#define REDUCE_INTO(T)                                                                     \
  static void reduce_##T (T *acc, const T *x, gsize n, KsReduceOp op)                      \
  {                                                                                        \
    switch (op)                                                                            \
      {                                                                                    \
      case KS_REDUCE_MIN: for (gsize i = 0; i < n; i++) acc[i] = x[i] < acc[i] ? x[i] : acc[i]; break; \
      case KS_REDUCE_MAX: for (gsize i = 0; i < n; i++) acc[i] = x[i] > acc[i] ? x[i] : acc[i]; break; \
      case KS_REDUCE_PROD: for (gsize i = 0; i < n; i++) acc[i] *= x[i]; break;           \
      default: for (gsize i = 0; i < n; i++) acc[i] += x[i]; break;                        \
      }                                                                                    \
  }                                                                                        \

REDUCE_INTO (float)
REDUCE_INTO (double)
REDUCE_INTO (gint32)
REDUCE_INTO (gint64)

/* acc = op(acc, x) over n elements. */
static void
reduce (void *acc, const void *x, gsize n, KsDType dtype, KsReduceOp op)
{
  switch (dtype)
    {
    case KS_DTYPE_FLOAT32: reduce_float (acc, x, n, op); break;
    case KS_DTYPE_FLOAT64: reduce_double (acc, x, n, op); break;
    case KS_DTYPE_INT32: reduce_gint32 (acc, x, n, op); break;
    default: reduce_gint64 (acc, x, n, op); break;
    }
}

/* An average (the core takes it of floats only): the sum divided by the ranks. */
static void
divide (void *acc, gsize n, KsDType dtype, int by)
{
  for (gsize i = 0; i < n; i++)
    if (dtype == KS_DTYPE_FLOAT32)
      ((float *) acc)[i] /= by;
    else
      ((double *) acc)[i] /= by;
}

/* The reduction over every rank's slot of round `round`, elements [lo, hi), into `out`. */
static void
reduce_slots (Shm *s, guint64 round, gsize offset, gsize lo, gsize hi, void *out, KsDType dtype,
              KsReduceOp op)
{
  gsize es = dtype_size (dtype);
  if (hi <= lo)
    return;
  memcpy (out, slot (s, round, 0) + offset + lo * es, (hi - lo) * es);
  for (int r = 1; r < s->size; r++)
    reduce (out, slot (s, round, r) + offset + lo * es, hi - lo, dtype, op);
  if (op == KS_REDUCE_AVG)
    divide (out, hi - lo, dtype, s->size);
}

static gboolean
check_dtype (const char *what, KsDType dtype, GError **error)
{
  if (dtype_size (dtype) > 0)
    return TRUE;
  return fail (error, KS_COMM_ERROR_INVALID, "%s of %s: shared memory reduces and moves "
               "float32, float64, int32 and int64", what, ks_dtype_name (dtype));
}

/* ---- collectives ---- */

static gboolean
shm_allreduce (void *p, void *buf, gsize count, KsDType dtype, KsReduceOp op, GError **error)
{
  Shm *s = p;
  gsize es = dtype_size (dtype);
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&s->lock);
  if (!check_dtype ("allreduce", dtype, error))
    return FALSE;
  gsize per_round = s->chunk / es;
  for (gsize at = 0; at < count; at += per_round)
    {
      gsize n = MIN (per_round, count - at), share = (n + s->size - 1) / s->size;
      gsize lo = MIN (n, share * s->rank), hi = MIN (n, lo + share);
      guint64 round = s->rounds++;
      guint8 *result = slot (s, round, s->size);
      memcpy (slot (s, round, s->rank), (guint8 *) buf + at * es, n * es);
      if (!arrive_and_wait (s, "allreduce", error))
        return FALSE;
      reduce_slots (s, round, 0, lo, hi, result + lo * es, dtype, op);
      if (!arrive_and_wait (s, "allreduce", error))
        return FALSE;
      memcpy ((guint8 *) buf + at * es, result, n * es);
    }
  return TRUE;
}

static gboolean
shm_broadcast (void *p, void *buf, gsize count, KsDType dtype, int root, GError **error)
{
  Shm *s = p;
  gsize bytes = count * dtype_size (dtype);
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&s->lock);
  if (!check_dtype ("broadcast", dtype, error))
    return FALSE;
  if (root < 0 || root >= s->size)
    return fail (error, KS_COMM_ERROR_INVALID, "broadcast from rank %d of %d", root, s->size);
  for (gsize at = 0; at < bytes; at += s->chunk)
    {
      gsize n = MIN (s->chunk, bytes - at);
      guint64 round = s->rounds++;
      if (s->rank == root)
        memcpy (slot (s, round, root), (guint8 *) buf + at, n);
      if (!arrive_and_wait (s, "broadcast", error))
        return FALSE;
      if (s->rank != root)
        memcpy ((guint8 *) buf + at, slot (s, round, root), n);
    }
  return TRUE;
}

static gboolean
shm_barrier (void *p, GError **error)
{
  Shm *s = p;
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&s->lock);
  return arrive_and_wait (s, "barrier", error);
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
        memcpy (slot (s, round, s->rank), (const guint8 *) send + at, MIN (s->chunk, mine - at));
      if (!arrive_and_wait (s, what, error))
        return FALSE;
      for (int r = 0; r < s->size; r++)
        if (at < counts[r] * es)
          memcpy ((guint8 *) recv + displacement[r] + at, slot (s, round, r),
                  MIN (s->chunk, counts[r] * es - at));
    }
  return TRUE;
}

static gboolean
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

static gboolean
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
static gboolean
shm_reduce_scatter (void *p, const void *send, void *recv, gsize recv_count, KsDType dtype,
                    KsReduceOp op, GError **error)
{
  Shm *s = p;
  gsize es = dtype_size (dtype);
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&s->lock);
  if (!check_dtype ("reduce_scatter", dtype, error))
    return FALSE;
  gsize per_round = s->chunk / es / s->size;
  for (gsize at = 0; at < recv_count; at += per_round)
    {
      gsize n = MIN (per_round, recv_count - at);
      guint64 round = s->rounds++;
      guint8 *mine = slot (s, round, s->rank);
      for (int b = 0; b < s->size; b++)
        memcpy (mine + b * n * es, (const guint8 *) send + (b * recv_count + at) * es, n * es);
      if (!arrive_and_wait (s, "reduce_scatter", error))
        return FALSE;
      reduce_slots (s, round, s->rank * n * es, 0, n, (guint8 *) recv + at * es, dtype, op);
    }
  return TRUE;
}

/* ---- joining ---- */

static void *
shm_create (const KsSettings *settings, GError **error)
{
  Shm *s = g_new0 (Shm, 1);
  s->chunk = (gsize) ks_settings_get_int (settings, "chunk_kib") * 1024;
  s->pid_ns = pid_namespace ();
  g_mutex_init (&s->lock);
  return s;
}

static void
shm_destroy (void *p)
{
  Shm *s = p;
  if (s->name != NULL)
    shm_unlink (s->name);
  if (s->base != NULL)
    munmap (s->base, s->map_len);
  g_free (s->name);
  g_mutex_clear (&s->lock);
  g_free (s);
}

/* This host, as every process on it sees it: the boot id tells hosts of one name apart. */
static char *
host_id (void)
{
  g_autofree char *boot = NULL;
  g_file_get_contents ("/proc/sys/kernel/random/boot_id", &boot, NULL, NULL);
  return g_strdup_printf ("%s %s", g_get_host_name (), boot != NULL ? g_strstrip (boot) : "");
}

/* Rank 0 makes the segment and tells the others its name. */
static gboolean
create_segment (Shm *s, const KsStoreOps *ops, void *store, const char *key, GError **error)
{
  for (int attempt = 0; attempt < 8; attempt++)
    {
      g_free (s->name);
      s->name = g_strdup_printf ("/ksdist-%d-%08x", (int) getpid (), g_random_int ());
      int fd = shm_open (s->name, O_RDWR | O_CREAT | O_EXCL, 0600);
      if (fd < 0 && errno == EEXIST)
        continue;
      if (fd < 0)
        return fail (error, KS_COMM_ERROR_FAILED, "cannot create %s in /dev/shm: %s", s->name,
                     g_strerror (errno));
      /* allocated now: tmpfs would grant a bigger ftruncate, then kill the process with
       * SIGBUS at the first write past what /dev/shm holds */
      int err = posix_fallocate (fd, 0, s->map_len);
      if (err == 0)
        s->base = mmap (NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      else
        errno = err;
      close (fd);
      if (err != 0 || s->base == MAP_FAILED)
        {
          s->base = NULL;
          return fail (error, KS_COMM_ERROR_FAILED, "cannot allocate or map %s (%" G_GSIZE_FORMAT
                       " bytes): %s (make /dev/shm larger, lower [shm] chunk_kib, or set [comm] "
                       "backend = gloo)", s->name, s->map_len, g_strerror (errno));
        }
      s->h = (Header *) s->base;
      s->h->size = s->size;
      s->h->chunk = s->chunk;
      s->h->magic = MAGIC;
      return ops->set (store, key, s->name, strlen (s->name) + 1, error);
    }
  return fail (error, KS_COMM_ERROR_FAILED, "no free name in /dev/shm after 8 tries");
}

static gboolean
open_segment (Shm *s, const KsStoreOps *ops, void *store, const char *key, GError **error)
{
  g_autofree char *name = NULL;
  gsize len;
  struct stat st;

  if (!ops->get (store, key, s->timeout_ms, (void **) &name, &len, error))
    return FALSE;
  if (len < 2 || name[len - 1] != '\0' || name[0] != '/' || strchr (name + 1, '/') != NULL)
    return fail (error, KS_COMM_ERROR_INVALID, "the store's %s is not a segment's name", key);
  int fd = shm_open (name, O_RDWR, 0);
  if (fd < 0)
    return fail (error, KS_COMM_ERROR_FAILED, "cannot open rank 0's segment %s: %s (are all "
                 "ranks on one host, in one IPC namespace?)", name, g_strerror (errno));
  if (fstat (fd, &st) != 0 || (gsize) st.st_size != s->map_len)
    {
      close (fd);
      return fail (error, KS_COMM_ERROR_INVALID, "rank 0's segment %s is %lld bytes, not the %"
                   G_GSIZE_FORMAT " this rank expects: give every rank the same [shm] chunk_kib",
                   name, (long long) st.st_size, s->map_len);
    }
  s->base = mmap (NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close (fd);
  if (s->base == MAP_FAILED)
    {
      s->base = NULL;
      return fail (error, KS_COMM_ERROR_FAILED, "cannot map %s: %s", name, g_strerror (errno));
    }
  s->h = (Header *) s->base;
  if (s->h->magic != MAGIC || s->h->size != (guint32) s->size || s->h->chunk != s->chunk)
    return fail (error, KS_COMM_ERROR_INVALID, "%s is not the segment of this job of %d ranks",
                 name, s->size);
  return TRUE;
}

static gboolean
shm_connect (void *p, const KsStoreOps *ops, void *store, int rank, int size, int timeout_ms,
             GError **error)
{
  Shm *s = p;
  g_autofree char *key = NULL, *host_key = NULL, *host = host_id (), *first = NULL;
  gsize len;

  if (size > MAX_RANKS)
    return fail (error, KS_COMM_ERROR_INVALID, "%d ranks; shared memory joins at most %d",
                 size, MAX_RANKS);
  s->rank = rank;
  s->size = size;
  s->timeout_ms = timeout_ms;
  s->yield = g_get_num_processors () < (guint) size;
  s->map_len = header_bytes (size) + 2 * (size + 1) * s->chunk;
  /* one shared-memory communicator per store prefix, as Gloo's "ks/gloo" */
  key = g_strdup ("ks/shm/segment");
  host_key = g_strdup ("ks/shm/host");
  /* every rank on rank 0's host, or this one says where it is */
  if ((rank == 0 && !ops->set (store, host_key, host, strlen (host) + 1, error))
      || (rank > 0 && !ops->get (store, host_key, timeout_ms, (void **) &first, &len, error)))
    return FALSE;
  if (rank > 0 && (len == 0 || first[len - 1] != '\0' || strcmp (first, host) != 0))
    return fail (error, KS_COMM_ERROR_INVALID, "rank %d is on host %s, rank 0 on another (%s): "
                 "shared memory joins the ranks of one host; set [comm] backend = gloo (or "
                 "auto) for a job across hosts", rank, g_get_host_name (),
                 len > 0 && first[len - 1] == '\0' ? first : "?");
  if (!(rank == 0 ? create_segment (s, ops, store, key, error)
                  : open_segment (s, ops, store, key, error)))
    return FALSE;
  s->data = s->base + header_bytes (size);
  s->h->ranks[rank].pid_ns = s->pid_ns;
  atomic_store (&s->h->ranks[rank].pid, (int) getpid ());
  /* every rank has it: rank 0 unlinks it, and nothing is left behind after a crash */
  if (!arrive_and_wait (s, "connect", error))
    return FALSE;
  if (rank == 0)
    {
      shm_unlink (s->name);
      g_clear_pointer (&s->name, g_free);
    }
  return TRUE;
}

static gboolean
shm_set_timeout (void *p, int timeout_ms, GError **error)
{
  ((Shm *) p)->timeout_ms = timeout_ms;
  return TRUE;
}

static int
shm_rank (void *p)
{
  return ((Shm *) p)->rank;
}

static int
shm_size (void *p)
{
  return ((Shm *) p)->size;
}

static const KsCommOps shm_ops = {
  .size = sizeof (KsCommOps),
  .create = shm_create,
  .destroy = shm_destroy,
  .connect = shm_connect,
  .allreduce = shm_allreduce,
  .broadcast = shm_broadcast,
  .barrier = shm_barrier,
  .allgather = shm_allgather,
  .allgatherv = shm_allgatherv,
  .reduce_scatter = shm_reduce_scatter,
  .set_timeout = shm_set_timeout,
  .rank = shm_rank,
  .world_size = shm_size,
};

/* Below Gloo, so that `auto` means Gloo until the caller knows every rank is on this
 * host (tools/train-dist.c asks for shm by name then). */
static int
shm_query (char **reason)
{
  if (access ("/dev/shm", W_OK) != 0)
    {
      *reason = g_strdup_printf ("/dev/shm is not writable: %s", g_strerror (errno));
      return -1;
    }
  return 0;
}

static const KsImplDesc shm_impls[] = {
  { KS_KIND_COMM, "shm", &shm_ops, shm_query,
    "Collectives between the ranks of one host through shared memory; what auto takes "
    "for a data-parallel job whose ranks share a host" },
};

static const KsKeyDesc shm_settings[] = {
  { NULL, "chunk_kib", KS_VALUE_INT, "256", 4, 1 << 20, NULL,
    "Bytes each rank moves per round, in KiB; the segment holds 2 x (ranks + 1) of them "
    "(256: the sets stay in a 2 MiB cache; 1024 and 4096 measured 25-35% slower here)" },
};

static const KsPluginDesc shm_plugin = {
  KS_ABI_MAJOR,
  KS_ABI_MINOR,
  "shm",
  PACKAGE_VERSION,
  "Shared-memory communicator: allreduce, broadcast, allgather(v), reduce-scatter and barrier "
  "for the ranks of one host",
  shm_impls,
  G_N_ELEMENTS (shm_impls),
  shm_settings,
  G_N_ELEMENTS (shm_settings),
};

KS_EXPORT const KsPluginDesc *ks_plugin_descriptor (void);

const KsPluginDesc *
ks_plugin_descriptor (void)
{
  return &shm_plugin;
}
