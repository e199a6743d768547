/* The shared-memory communicator's private parts: the segment's layout and the waiting
 * every operation shares (segment.c), used by the collectives (collectives.c) and the
 * point-to-point messages (p2p.c). */
#ifndef KS_SHM_H
#define KS_SHM_H

#include <config.h>
#include <ksdist/ksdist.h>

#include <stdatomic.h>

#define MAX_RANKS 256
#define MIN_CHUNK_KIB 4  /* [shm] chunk_kib's least */
#define INBOX 1024      /* messages in flight to one rank */
#define INLINE_BYTES 192 /* a message this small travels in its descriptor */

/* One rank's line of the header, alone in its cache line. */
typedef struct {
  _Alignas (64) atomic_uint_least64_t arrived; /* its arrivals so far */
  atomic_int pid;
  guint64 pid_ns; /* its pid namespace: a pid means something only in ours */
  guint64 allreduce_at; /* its allreduce's buffer: region, offset and count, or 0 */
  atomic_int state;     /* RANK_RUNNING, then RANK_FAILED or RANK_CLOSED */
  char reason[160];     /* with RANK_FAILED: its first failure, written before `state` */
} RankLine;

/* What a rank's line says of it, so that a peer that finds its process ended names the
 * first cause: a rank that died, not one that failed because of it and then ended. */
enum { RANK_RUNNING, RANK_FAILED, RANK_CLOSED };

typedef struct {
  guint32 magic, size;
  guint64 chunk;
  _Alignas (64) atomic_uint wake;  /* the futex word: bumped by every arrival and message */
  atomic_uint sleepers;
  atomic_int mapped; /* ranks that have the segment mapped: the last one unlinks its name */
  RankLine ranks[];
} Header;

/* A message's descriptor in its receiver's inbox. The receiver copies a large one straight
 * from the sender's buffer (process_vm_readv), a small one from `inline_data`. */
typedef struct {
  atomic_uint_least64_t ready; /* ticket + 1 once the sender has filled it */
  atomic_uint_least64_t done;  /* ticket + 1 once the receiver has taken it */
  guint64 addr, nbytes;
  gint32 src;
  guint32 tag;
  guint8 inline_data[INLINE_BYTES];
} Message;

/* Many senders, one receiver: a sender takes the next ticket, the receiver takes the
 * messages in any order (by sender and tag) and moves `head` past those taken. */
typedef struct {
  _Alignas (64) atomic_uint_least64_t tail; /* tickets taken */
  _Alignas (64) atomic_uint_least64_t head; /* every ticket below it is done */
  Message slots[INBOX];
} Inbox;

/* Memory of alloc_shared: rank r's part at base + r * stride, `len` bytes of it asked. */
typedef struct {
  guint8 *base;
  gsize stride, len;
} SharedRegion;

typedef struct {
  gsize chunk;
  int rank, size, timeout_ms;
  char *name;        /* the segment's name until it is unlinked (every rank knows it) */
  guint8 *base;
  gsize map_len;
  Header *h;
  Inbox *inboxes;   /* one per rank */
  guint8 *data;     /* the collectives' two sets of slots */
  guint64 arrivals; /* this rank's, as in its line */
  guint64 rounds;   /* which set of slots the next round uses */
  guint64 pid_ns;
  gboolean yield;   /* the ranks outnumber the cores: give the core away while waiting */
  gboolean broken;  /* an operation failed: the ranks no longer line up */
  GMutex lock;      /* one operation at a time from this process's threads */
  /* what sub-groups are made from */
  const KsStoreOps *store_ops;
  void *store;
  char *prefix;           /* of this group's store keys */
  GHashTable *subgroups;  /* a rank list -> how many groups of it were made */
  GArray *regions;        /* SharedRegion, of alloc_shared */
} Shm;

#define shm_fail(error, code, ...) ks_fail (error, KS_COMM_ERROR, code, "shm: " __VA_ARGS__)

/* Set `round`'s slot of `rank` (rank = size: the shared result). */
guint8 *shm_slot (Shm *s, guint64 round, int rank);

/* names.c: a name this process made or opened is remembered until shm_unlink_name
 * unlinks it (any rank may; ENOENT is fine) and forgets it; those still linked when the
 * process exits are unlinked then (atexit). A tracked communicator's line says
 * RANK_CLOSED after exit. */
void shm_remember_name (const char *name);
void shm_unlink_name (char **name);
gboolean shm_track (Shm *s, gboolean on); /* off: whether it was tracked */
/* Once per process: removes /dev/shm names whose creator (of this pid namespace) ended. */
void shm_sweep_stale (guint64 pid_ns);
/* Whether process `pid` has ended: gone, or a zombie its parent has not reaped yet. */
gboolean shm_process_ended (int pid);

/* Refuses an operation after a failed one. */
gboolean shm_usable (Shm *s, const char *what, GError **error);

/* Tells waiting ranks that something changed. */
void shm_wake (Shm *s);

/* Waits until done(s, arg), within the timeout. A failure names the rank awaited: `peer`,
 * or with peer < 0 every rank with fewer than `target` arrivals; "... rank R did not
 * <verb> within T ms". It marks the communicator broken. */
typedef gboolean (*ShmDone) (Shm *s, const void *arg);
gboolean shm_wait (Shm *s, ShmDone done, const void *arg, int peer, guint64 target,
                   const char *what, const char *verb, GError **error);

/* This rank's next arrival, and the wait for every other rank's. */
gboolean shm_arrive_and_wait (Shm *s, const char *what, GError **error);

/* collectives.c */
gboolean shm_allreduce (void *p, void *buf, gsize count, KsDType dtype, KsReduceOp op,
                        GError **error);
gboolean shm_broadcast (void *p, void *buf, gsize count, KsDType dtype, int root,
                        GError **error);
gboolean shm_barrier (void *p, GError **error);
gboolean shm_allgather (void *p, const void *send, void *recv, gsize count, KsDType dtype,
                        GError **error);
gboolean shm_allgatherv (void *p, const void *send, void *recv, const gsize *counts,
                         KsDType dtype, GError **error);
gboolean shm_reduce_scatter (void *p, const void *send, void *recv, gsize recv_count,
                             KsDType dtype, KsReduceOp op, GError **error);

/* p2p.c */
gboolean shm_send (void *p, const void *buf, gsize nbytes, int peer, guint32 tag,
                   GError **error);
gboolean shm_recv (void *p, void *buf, gsize nbytes, int peer, guint32 tag, GError **error);
void *shm_isend (void *p, const void *buf, gsize nbytes, int peer, guint32 tag, GError **error);
void *shm_irecv (void *p, void *buf, gsize nbytes, int peer, guint32 tag, GError **error);
gboolean shm_wait_request (void *p, void *request, GError **error);

#endif
