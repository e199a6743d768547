/* The shared-memory communicator: collectives and point-to-point messages between the
 * ranks of one host through one segment every rank maps (after DeepSpeed's CPU shm
 * allreduce, Open MPI's coll/sm and its vader transport). This file makes and joins the
 * segment and holds the waiting every operation shares; collectives.c and p2p.c use them.
 *
 * Rank 0 creates the segment (shm_open, a random name given to the others through the
 * store). The name lives as briefly as it can: the last rank to map the segment unlinks
 * it at once; a rank whose connect fails unlinks the name it knows (rank 0 or not, so a
 * killed rank 0's name goes with its peers' failure), and so does a process that exits
 * while it knows one (atexit). A name left by a job killed whole (no code ran) is removed
 * by the next job's rank 0 when its creator's process has ended (sweep_stale). A
 * sub-group makes a segment of its own the same way, under its own store keys.
 *
 * Each rank's line says whether it failed (and why) or closed its communicator, so a
 * peer that finds its process ended names the rank that died, not one that failed
 * because of that death and then exited.
 *
 * Arrivals are per-rank counters in the segment. A waiter spins briefly, then sleeps on a
 * futex that every arrival and message bumps, waking every 100 ms to look for ranks whose
 * process is gone; past the timeout the error names the ranks that did not arrive. */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x6b736d33u /* "ksm3" */
#define SPINS 4000       /* checks before sleeping: a round trip on one host is microseconds,
                          * unless a spinning rank holds the core a late one needs */
#define SPIN_US 2000     /* and at most this long: under load each sched_yield can give the
                          * core away for milliseconds, and 4000 of them took seconds
                          * (past the timeout) before the first look at the peers */
#define SLEEP_MS 100     /* the longest sleep between looks at the peers' processes */

/* ---- the segment: the header, an inbox per rank, two sets of slots ---- */

static gsize
round_up (gsize bytes)
{
  return (bytes + 4095) / 4096 * 4096;
}

static gsize
header_bytes (int size)
{
  return round_up (sizeof (Header) + size * sizeof (RankLine));
}

static gsize
inbox_bytes (int size)
{
  return round_up (size * sizeof (Inbox));
}

/* A set: a slot per rank, then the shared result. */
guint8 *
shm_slot (Shm *s, guint64 round, int rank)
{
  return s->data + ((round & 1) * (s->size + 1) + rank) * s->chunk;
}

static guint64
pid_namespace (void)
{
  struct stat st;
  return stat ("/proc/self/ns/pid", &st) == 0 ? (guint64) st.st_ino : 0;
}

/* This rank's first failure, for peers that find its process ended later. */
static void
record_failure (Shm *s, const char *reason)
{
  RankLine *line = &s->h->ranks[s->rank];
  if (atomic_load (&line->state) != RANK_RUNNING)
    return;
  g_strlcpy (line->reason, reason, sizeof line->reason);
  atomic_store_explicit (&line->state, RANK_FAILED, memory_order_release);
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

void
shm_wake (Shm *s)
{
  atomic_fetch_add (&s->h->wake, 1);
  if (atomic_load (&s->h->sleepers) > 0)
    futex (&s->h->wake, FUTEX_WAKE, INT_MAX, NULL);
}

/* Whether rank r is one awaited: `peer` itself, or (peer < 0) below `target` arrivals. */
static gboolean
awaited (Shm *s, int r, int peer, guint64 target)
{
  if (peer >= 0)
    return r == peer;
  return atomic_load_explicit (&s->h->ranks[r].arrived, memory_order_acquire) < target;
}

/* The ranks awaited, as "1, 3"; NULL when none. */
static char *
late_ranks (Shm *s, int peer, guint64 target)
{
  GString *late = NULL;
  for (int r = 0; r < s->size; r++)
    if (awaited (s, r, peer, target))
      {
        if (late == NULL)
          late = g_string_new (NULL);
        g_string_append_printf (late, "%s%d", late->len ? ", " : "", r);
      }
  return late != NULL ? g_string_free (late, FALSE) : NULL;
}

/* Whether rank r's process has ended (one in our pid namespace: a pid means something
 * only there). */
static gboolean
rank_ended (Shm *s, int r)
{
  RankLine *line = &s->h->ranks[r];
  int pid = atomic_load (&line->pid);
  return pid > 0 && line->pid_ns == s->pid_ns && shm_process_ended (pid);
}

/* An awaited rank whose process has ended, or -1: first one that died (its line still
 * says running), then one that closed its communicator, then one that failed (because of
 * another, most likely: its reason says which). */
static int
dead_rank (Shm *s, int peer, guint64 target)
{
  int found = -1, found_state = -1;
  static const int rank_of_state[] = { [RANK_RUNNING] = 3, [RANK_CLOSED] = 2,
                                       [RANK_FAILED] = 1 };
  for (int r = 0; r < s->size; r++)
    if (awaited (s, r, peer, target) && rank_ended (s, r))
      {
        int state = atomic_load_explicit (&s->h->ranks[r].state, memory_order_acquire);
        if (state < RANK_RUNNING || state > RANK_CLOSED)
          state = RANK_RUNNING;
        if (found < 0 || rank_of_state[state] > rank_of_state[found_state])
          found = r, found_state = state;
      }
  return found;
}

/* Why awaited rank r's process ended, as far as its line says. */
static gboolean
fail_ended (Shm *s, int r, const char *what, GError **error)
{
  RankLine *line = &s->h->ranks[r];
  int pid = atomic_load (&line->pid);
  int state = atomic_load_explicit (&line->state, memory_order_acquire);
  char reason[sizeof line->reason];

  if (state == RANK_FAILED)
    {
      memcpy (reason, line->reason, sizeof reason);
      reason[sizeof reason - 1] = '\0';
      return shm_fail (error, KS_COMM_ERROR_PEER_LOST, "%s on rank %d of %d: rank %d (process "
                       "%d) failed first and ended: %s", what, s->rank, s->size, r, pid,
                       reason);
    }
  if (state == RANK_CLOSED)
    return shm_fail (error, KS_COMM_ERROR_PEER_LOST, "%s on rank %d of %d: rank %d (process "
                     "%d) closed the communicator or exited without this operation: every "
                     "rank must make the same calls", what, s->rank, s->size, r, pid);
  return shm_fail (error, KS_COMM_ERROR_PEER_LOST, "%s on rank %d of %d: rank %d (process %d) "
                   "is gone", what, s->rank, s->size, r, pid);
}

static gboolean
wait_until (Shm *s, ShmDone done, const void *arg, int peer, guint64 target, const char *what,
            const char *verb, GError **error)
{
  gint64 start = g_get_monotonic_time (), deadline = start + (gint64) s->timeout_ms * 1000;
  gint64 next_look = 0; /* for ended processes: at most every SLEEP_MS, not every wake-up */

  for (int i = 0; i < SPINS && g_get_monotonic_time () < start + SPIN_US; i++)
    if (done (s, arg))
      return TRUE;
    else if (s->yield)
      sched_yield (); /* a late rank may be waiting for this core */
    else
      cpu_relax ();
  for (;;)
    {
      unsigned seen = atomic_load (&s->h->wake);
      if (done (s, arg))
        return TRUE;
      gint64 now = g_get_monotonic_time (), left = deadline - now;
      int dead = now >= next_look ? dead_rank (s, peer, target) : -1;
      if (now >= next_look)
        next_look = now + SLEEP_MS * 1000;
      if (dead >= 0)
        return fail_ended (s, dead, what, error);
      if (left <= 0)
        {
          g_autofree char *late = late_ranks (s, peer, target);
          if (late == NULL)
            return TRUE;
          return shm_fail (error, KS_COMM_ERROR_TIMEOUT, "%s on rank %d of %d: rank %s did "
                           "not %s within %d ms", what, s->rank, s->size, late, verb,
                           s->timeout_ms);
        }
      gint64 nap = MIN (left, SLEEP_MS * 1000);
      struct timespec ts = { nap / 1000000, (nap % 1000000) * 1000 };
      atomic_fetch_add (&s->h->sleepers, 1);
      if (!done (s, arg))
        futex (&s->h->wake, FUTEX_WAIT, seen, &ts);
      atomic_fetch_sub (&s->h->sleepers, 1);
    }
}

gboolean
shm_wait (Shm *s, ShmDone done, const void *arg, int peer, guint64 target, const char *what,
          const char *verb, GError **error)
{
  GError *local = NULL;
  if (wait_until (s, done, arg, peer, target, what, verb, &local))
    return TRUE;
  record_failure (s, local->message);
  g_propagate_error (error, local);
  return s->broken = TRUE, FALSE;
}

/* After a failure the communicator refuses every operation: a later arrival would pair
 * with the wrong one, a later message would follow one never sent. */
gboolean
shm_usable (Shm *s, const char *what, GError **error)
{
  if (!s->broken)
    return TRUE;
  return shm_fail (error, KS_COMM_ERROR_FAILED, "%s on rank %d of %d: an earlier operation "
                   "failed, so the ranks are out of step; make a new communicator", what,
                   s->rank, s->size);
}

static gboolean
all_arrived (Shm *s, const void *target)
{
  for (int r = 0; r < s->size; r++)
    if (atomic_load_explicit (&s->h->ranks[r].arrived, memory_order_acquire)
        < *(const guint64 *) target)
      return FALSE;
  return TRUE;
}

gboolean
shm_arrive_and_wait (Shm *s, const char *what, GError **error)
{
  if (!shm_usable (s, what, error))
    return FALSE;
  atomic_store_explicit (&s->h->ranks[s->rank].arrived, ++s->arrivals, memory_order_release);
  shm_wake (s);
  return shm_wait (s, all_arrived, &s->arrivals, -1, s->arrivals, what, "arrive", error);
}

/* ---- joining ---- */

static Shm *
shm_new (gsize chunk)
{
  Shm *s = g_new0 (Shm, 1);
  s->chunk = chunk;
  s->pid_ns = pid_namespace ();
  s->subgroups = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  s->regions = g_array_new (FALSE, FALSE, sizeof (SharedRegion));
  g_mutex_init (&s->lock);
  return s;
}

static void *
shm_create (const KsSettings *settings, GError **error)
{
  return shm_new ((gsize) ks_settings_get_int (settings, "chunk_kib") * 1024);
}

static void
shm_destroy (void *p)
{
  Shm *s = p;
  shm_unlink_name (&s->name);
  if (s->h != NULL && shm_track (s, FALSE)) /* its line is this rank's: it says so */
    {
      int running = RANK_RUNNING;
      atomic_compare_exchange_strong (&s->h->ranks[s->rank].state, &running, RANK_CLOSED);
    }
  if (s->base != NULL)
    munmap (s->base, s->map_len);
  for (guint i = 0; i < s->regions->len; i++)
    {
      SharedRegion *r = &g_array_index (s->regions, SharedRegion, i);
      munmap (r->base, r->stride * s->size);
    }
  g_array_unref (s->regions);
  g_free (s->name);
  g_free (s->prefix);
  g_hash_table_unref (s->subgroups);
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

/* Rank 0 makes a segment of `len` bytes under a random name and maps it at *base; *name
 * keeps it until it is unlinked. */
static gboolean
create_mapping (Shm *s, gsize len, char **name, guint8 **base, GError **error)
{
  shm_sweep_stale (s->pid_ns);
  for (int attempt = 0; attempt < 8; attempt++)
    {
      g_free (*name);
      *name = g_strdup_printf ("/ksdist-%d-%" G_GINT64_MODIFIER "x-%08x", (int) getpid (),
                               s->pid_ns, g_random_int ());
      int fd = shm_open (*name, O_RDWR | O_CREAT | O_EXCL, 0600);
      if (fd < 0 && errno == EEXIST)
        continue;
      if (fd < 0)
        return shm_fail (error, KS_COMM_ERROR_FAILED, "cannot create %s in /dev/shm: %s", *name,
                         g_strerror (errno));
      shm_remember_name (*name);
      /* allocated now: tmpfs would grant a bigger ftruncate, then kill the process with
       * SIGBUS at the first write past what /dev/shm holds */
      int err = posix_fallocate (fd, 0, len);
      if (err == 0)
        *base = mmap (NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      else
        errno = err;
      close (fd);
      if (err != 0 || *base == MAP_FAILED)
        {
          *base = NULL;
          shm_fail (error, KS_COMM_ERROR_FAILED, "cannot allocate or map %s (%" G_GSIZE_FORMAT
                    " bytes): %s (make /dev/shm larger, lower [shm] chunk_kib, or set [comm] "
                    "backend = gloo)", *name, len, g_strerror (errno));
          shm_unlink_name (name);
          return FALSE;
        }
      return TRUE;
    }
  return shm_fail (error, KS_COMM_ERROR_FAILED, "no free name in /dev/shm after 8 tries");
}

/* Says in the store that this rank failed where the others wait for it (the job's first
 * failure stays), so that they name it, not the key it never wrote. */
static void
report_failure (Shm *s, const GError *error)
{
  void *data = NULL;
  gsize len;
  if (error == NULL)
    return;
  if (s->store_ops->get (s->store, KS_STORE_FAILURE_KEY, 1, &data, &len, NULL))
    {
      g_free (data);
      return;
    }
  g_autofree char *group = strcmp (s->prefix, "ks/shm") == 0
                               ? g_strdup ("")
                               : g_strdup_printf (" of the group at %s", s->prefix);
  g_autofree char *text = g_strdup_printf ("rank %d%s failed: %s", s->rank, group,
                                           error->message);
  s->store_ops->set (s->store, KS_STORE_FAILURE_KEY, text, strlen (text) + 1, NULL);
}

/* The store's `key`, within the timeout; a failure a peer reported meanwhile ends the
 * wait at once, naming it. */
static gboolean
wait_key (Shm *s, const char *key, void **data, gsize *len, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) s->timeout_ms * 1000;
  for (;;)
    {
      int left = MAX (0, (int) ((deadline - g_get_monotonic_time ()) / 1000));
      void *failed = NULL;
      gsize failed_len;
      if (left <= 500)
        {
          if (s->store_ops->get (s->store, key, left, data, len, error))
            return TRUE;
          ks_store_whole_timeout (error != NULL ? *error : NULL, left, s->timeout_ms);
          return FALSE;
        }
      GError *slice = NULL;
      if (s->store_ops->get (s->store, key, 500, data, len, &slice))
        return TRUE;
      if (!g_error_matches (slice, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT))
        {
          g_propagate_error (error, slice); /* not a wait: the store's own failure */
          return FALSE;
        }
      g_error_free (slice);
      if (s->store_ops->get (s->store, KS_STORE_FAILURE_KEY, 1, &failed, &failed_len, NULL))
        {
          g_autofree char *text = g_strndup (failed, failed_len);
          g_free (failed);
          return shm_fail (error, KS_COMM_ERROR_PEER_LOST, "rank %d of %d, waiting for %s in "
                           "the store: %s", s->rank, s->size, key, text);
        }
    }
}

/* Tells the other ranks the segment's name, once it is ready for them. */
static gboolean
publish (Shm *s, const char *key, const char *name, GError **error)
{
  return s->store_ops->set (s->store, key, name, strlen (name) + 1, error);
}

/* The other ranks map rank 0's segment of `len` bytes named under `key`; *out_name keeps
 * its name (this rank may be the one to unlink it). */
static gboolean
open_mapping (Shm *s, const char *key, gsize len, char **out_name, guint8 **base,
              GError **error)
{
  g_autofree char *name = NULL;
  gsize name_len;
  struct stat st;

  if (!wait_key (s, key, (void **) &name, &name_len, error))
    return FALSE;
  if (name_len < 2 || name[name_len - 1] != '\0' || name[0] != '/'
      || strchr (name + 1, '/') != NULL || !g_str_has_prefix (name, "/ksdist-"))
    return shm_fail (error, KS_COMM_ERROR_INVALID, "the store's %s is not a segment's name", key);
  shm_remember_name (name);
  *out_name = g_strdup (name);
  int fd = shm_open (name, O_RDWR, 0), creator = 0;
  guint64 ns = 0;
  if (fd < 0 && errno == ENOENT
      && sscanf (name, "/ksdist-%d-%" G_GINT64_MODIFIER "x-", &creator, &ns) == 2
      && ns == s->pid_ns && creator > 0 && shm_process_ended (creator))
    return shm_fail (error, KS_COMM_ERROR_PEER_LOST, "rank %d of %d: rank 0 (process %d) "
                     "is gone, and its segment %s with it", s->rank, s->size,
                     creator, name);
  if (fd < 0)
    return shm_fail (error, KS_COMM_ERROR_FAILED, "cannot open rank 0's segment %s: %s (a rank "
                     "that failed to connect removes it: see the others' messages; or are "
                     "the ranks in different IPC namespaces?)", name, g_strerror (errno));
  if (fstat (fd, &st) != 0 || (gsize) st.st_size != len)
    {
      close (fd);
      return shm_fail (error, KS_COMM_ERROR_INVALID, "rank 0's segment %s is %lld bytes, not the "
                       "%" G_GSIZE_FORMAT " this rank expects: give every rank the same [shm] "
                       "chunk_kib (and, to alloc_shared, the same size)", name,
                       (long long) st.st_size, len);
    }
  *base = mmap (NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close (fd);
  if (*base == MAP_FAILED)
    {
      *base = NULL;
      return shm_fail (error, KS_COMM_ERROR_FAILED, "cannot map %s: %s", name,
                       g_strerror (errno));
    }
  return TRUE;
}

/* Where Yama restricts ptrace to a process's ancestors, lets the job's other ranks read
 * this one's send buffers (process_vm_readv), as Open MPI does. */
static void
allow_peer_reads (void)
{
  g_autofree char *scope = NULL;
  if (g_file_get_contents ("/proc/sys/kernel/yama/ptrace_scope", &scope, NULL, NULL)
      && g_ascii_strtoll (scope, NULL, 10) == 1)
    prctl (PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
}

/* Rank 0, until every rank has mapped the segment: a rank whose process ended before it
 * did (it put its process id in the store first) is named at once, not at the timeout. */
static gboolean
wait_mapped (Shm *s, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) s->timeout_ms * 1000;
  g_autofree int *pids = g_new0 (int, s->size); /* 0: not known yet; -1: not of ours */

  while (atomic_load (&s->h->mapped) < s->size)
    {
      gint64 left = deadline - g_get_monotonic_time ();
      if (left <= 0)
        {
          g_autoptr (GString) late = g_string_new (NULL);
          for (int r = 1; r < s->size; r++)
            if (atomic_load (&s->h->ranks[r].pid) == 0)
              g_string_append_printf (late, "%s%d", late->len ? ", " : "", r);
          return shm_fail (error, KS_COMM_ERROR_TIMEOUT, "connect on rank 0 of %d: rank %s did "
                           "not arrive within %d ms", s->size, late->str, s->timeout_ms);
        }
      for (int r = 1; r < s->size; r++)
        {
          g_autofree char *key = g_strdup_printf ("%s/pid/%d", s->prefix, r);
          g_autofree char *value = NULL;
          gsize len;
          guint64 ns = 0;
          GError *look = NULL;
          if (atomic_load (&s->h->ranks[r].pid) != 0)
            continue; /* mapped: the waits after connect watch it */
          if (pids[r] == 0
              && !s->store_ops->get (s->store, key, 1, (void **) &value, &len, &look)
              && look != NULL && !g_error_matches (look, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT))
            {
              /* not a key missing yet: the store's own failure ends the wait */
              g_propagate_prefixed_error (error, look, "shm: connect on rank 0 of %d: ", s->size);
              return FALSE;
            }
          g_clear_error (&look);
          if (value != NULL)
            {
              value = g_realloc (value, len + 1);
              value[len] = '\0';
              if (sscanf (value, "%d %" G_GINT64_MODIFIER "x", &pids[r], &ns) != 2
                  || ns != s->pid_ns || pids[r] <= 0)
                pids[r] = -1;
            }
          if (pids[r] > 0 && atomic_load (&s->h->ranks[r].pid) == 0
              && shm_process_ended (pids[r]))
            return shm_fail (error, KS_COMM_ERROR_PEER_LOST, "connect on rank 0 of %d: rank %d "
                             "(process %d) is gone: it ended before it mapped the segment",
                             s->size, r, pids[r]);
        }
      unsigned seen = atomic_load (&s->h->wake);
      gint64 nap = MIN (left, SLEEP_MS * 1000);
      struct timespec ts = { nap / 1000000, (nap % 1000000) * 1000 };
      atomic_fetch_add (&s->h->sleepers, 1);
      if (atomic_load (&s->h->mapped) < s->size)
        futex (&s->h->wake, FUTEX_WAIT, seen, &ts);
      atomic_fetch_sub (&s->h->sleepers, 1);
    }
  return TRUE;
}

/* Joins the group whose store keys start with s->prefix as `rank` of `size`. */
static gboolean
join (Shm *s, int rank, int size, int timeout_ms, GError **error)
{
  const KsStoreOps *ops = s->store_ops;
  g_autofree char *key = g_strdup_printf ("%s/segment", s->prefix);
  g_autofree char *host_key = g_strdup_printf ("%s/host", s->prefix);
  g_autofree char *host = host_id (), *first = NULL;
  gsize len;

  if (size > MAX_RANKS)
    return shm_fail (error, KS_COMM_ERROR_INVALID, "%d ranks; shared memory joins at most %d",
                     size, MAX_RANKS);
  s->rank = rank;
  s->size = size;
  s->timeout_ms = timeout_ms;
  s->yield = g_get_num_processors () < (guint) size;
  s->map_len = header_bytes (size) + inbox_bytes (size) + 2 * (size + 1) * s->chunk;
  /* this rank's process, for rank 0 to notice its end before it maps the segment */
  g_autofree char *pid_key = g_strdup_printf ("%s/pid/%d", s->prefix, rank);
  g_autofree char *pid = g_strdup_printf ("%d %" G_GINT64_MODIFIER "x", (int) getpid (),
                                          s->pid_ns);
  if (rank > 0 && !ops->set (s->store, pid_key, pid, strlen (pid) + 1, error))
    return FALSE;
  /* every rank on rank 0's host, or this one says where it is */
  if ((rank == 0 && !ops->set (s->store, host_key, host, strlen (host) + 1, error))
      || (rank > 0 && !wait_key (s, host_key, (void **) &first, &len, error)))
    return FALSE;
  if (rank > 0 && (len == 0 || first[len - 1] != '\0' || strcmp (first, host) != 0))
    return shm_fail (error, KS_COMM_ERROR_INVALID, "rank %d is on host %s, rank 0 on another "
                     "(%s): shared memory joins the ranks of one host; set [comm] backend = "
                     "gloo (or auto) for a job across hosts", rank, g_get_host_name (),
                     len > 0 && first[len - 1] == '\0' ? first : "?");
  if (!(rank == 0 ? create_mapping (s, s->map_len, &s->name, &s->base, error)
                  : open_mapping (s, key, s->map_len, &s->name, &s->base, error)))
    {
      if (rank == 0)
        report_failure (s, error != NULL ? *error : NULL);
      shm_unlink_name (&s->name); /* rank 0 may be gone: its name goes with this failure */
      return FALSE;
    }
  s->h = (Header *) s->base;
  if (rank == 0)
    {
      s->h->size = size;
      s->h->chunk = s->chunk;
      s->h->magic = MAGIC;
    }
  else if (s->h->magic != MAGIC || s->h->size != (guint32) size || s->h->chunk != s->chunk)
    {
      shm_unlink_name (&s->name);
      return shm_fail (error, KS_COMM_ERROR_INVALID, "the segment of %s is not one of this job "
                       "of %d ranks", key, size);
    }
  s->inboxes = (Inbox *) (s->base + header_bytes (size));
  s->data = s->base + header_bytes (size) + inbox_bytes (size);
  s->h->ranks[rank].pid_ns = s->pid_ns;
  atomic_store (&s->h->ranks[rank].state, RANK_RUNNING);
  atomic_store (&s->h->ranks[rank].pid, (int) getpid ());
  shm_track (s, TRUE);
  allow_peer_reads ();
  /* the last rank to map it unlinks the name: nothing is left behind after a crash */
  if (atomic_fetch_add (&s->h->mapped, 1) + 1 == size)
    shm_unlink_name (&s->name);
  shm_wake (s);
  if (rank == 0 && s->name != NULL && !publish (s, key, s->name, error))
    {
      shm_unlink_name (&s->name);
      return FALSE;
    }
  gboolean ok = (rank > 0 || wait_mapped (s, error)) && shm_arrive_and_wait (s, "connect", error);
  /* every rank has it (it is unlinked), or connect failed: unlink it now, whoever is gone */
  shm_unlink_name (&s->name);
  return ok;
}

static gboolean
shm_connect (void *p, const KsStoreOps *ops, void *store, int rank, int size, int timeout_ms,
             GError **error)
{
  Shm *s = p;
  s->store_ops = ops;
  s->store = store;
  s->prefix = g_strdup ("ks/shm"); /* one shared-memory communicator per store prefix */
  return join (s, rank, size, timeout_ms, error);
}

/* A sub-group has a segment of its own, met at keys named by its ranks and by how many
 * groups of those ranks this group made before (the same count on every member). */
static void *
shm_subgroup (void *p, const int *ranks, int n_ranks, GError **error)
{
  Shm *s = p, *sub;
  g_autoptr (GString) list = g_string_new (NULL);
  int me = -1;
  guint made;
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&s->lock);

  for (int i = 0; i < n_ranks; i++)
    {
      g_string_append_printf (list, "%s%d", i > 0 ? "," : "", ranks[i]);
      if (ranks[i] == s->rank)
        me = i;
    }
  made = GPOINTER_TO_UINT (g_hash_table_lookup (s->subgroups, list->str));
  g_hash_table_replace (s->subgroups, g_strdup (list->str), GUINT_TO_POINTER (made + 1));
  sub = shm_new (s->chunk);
  sub->store_ops = s->store_ops;
  sub->store = s->store;
  sub->prefix = g_strdup_printf ("%s/g%s#%u", s->prefix, list->str, made);
  if (!join (sub, me, n_ranks, s->timeout_ms, error))
    {
      shm_destroy (sub);
      return NULL;
    }
  return sub;
}

/* Each rank's part is `nbytes` rounded up to pages, side by side in one segment made as
 * the communicator's is; collectives.c reduces a buffer in it without staging copies. */
static void *
shm_alloc_shared (void *p, gsize nbytes, GError **error)
{
  Shm *s = p;
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&s->lock);
  g_autofree char *key = g_strdup_printf ("%s/shared%u", s->prefix, s->regions->len);
  g_autofree char *name = NULL;
  SharedRegion r = { NULL, round_up (MAX (nbytes, 1)), nbytes };
  gboolean ok;

  if (!shm_usable (s, "alloc_shared", error))
    return NULL;
  ok = s->rank == 0 ? create_mapping (s, r.stride * s->size, &name, &r.base, error)
                         && publish (s, key, name, error)
                    : open_mapping (s, key, r.stride * s->size, &name, &r.base, error);
  if (!ok && s->rank == 0)
    report_failure (s, error != NULL ? *error : NULL);
  /* every rank has it mapped, or one failed: every rank unlinks it (rank 0 may be gone) */
  ok = ok && shm_arrive_and_wait (s, "alloc_shared", error);
  shm_unlink_name (&name);
  if (!ok)
    {
      if (r.base != NULL)
        munmap (r.base, r.stride * s->size);
      return NULL;
    }
  g_array_append_val (s->regions, r);
  return r.base + s->rank * r.stride;
}

static void
shm_ended_ranks (void *p, gboolean *ended)
{
  Shm *s = p;
  for (int r = 0; r < s->size; r++)
    ended[r] = r != s->rank && rank_ended (s, r);
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
  .send = shm_send,
  .recv = shm_recv,
  .subgroup = shm_subgroup,
  .isend = shm_isend,
  .irecv = shm_irecv,
  .wait = shm_wait_request,
  .alloc_shared = shm_alloc_shared,
  .ended_ranks = shm_ended_ranks,
  .set_timeout = shm_set_timeout,
  .rank = shm_rank,
  .world_size = shm_size,
  .traits = KS_COMM_ONE_HOST, /* host memory */
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

/* The name; a test builds a copy under another (tests/local.mk) that the core must judge
 * by its traits as it does this one. */
#ifndef KS_SHM_NAME
#define KS_SHM_NAME "shm"
#endif

static const KsImplDesc shm_impls[] = {
  { KS_KIND_COMM, KS_SHM_NAME, &shm_ops, shm_query,
    "Collectives, sub-groups and point-to-point messages between the ranks of one host "
    "through shared memory; what auto takes when every rank shares a host" },
};

static const KsKeyDesc shm_settings[] = {
  { NULL, "chunk_kib", KS_VALUE_INT, "256", MIN_CHUNK_KIB, 1 << 20, NULL,
    "Bytes each rank moves per round, in KiB; the segment holds 2 x (ranks + 1) of them "
    "(256: the sets stay in a 2 MiB cache)" },
};

static const KsPluginDesc shm_plugin = {
  KS_ABI_MAJOR,
  KS_ABI_MINOR,
  KS_SHM_NAME,
  PACKAGE_VERSION,
  "Shared-memory communicator: allreduce, broadcast, allgather(v), reduce-scatter, barrier, "
  "sub-groups and tagged send/recv for the ranks of one host",
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
