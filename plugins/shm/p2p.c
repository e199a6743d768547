/* Tagged point-to-point messages through shared memory. Each rank has an inbox of
 * descriptors in the segment. A sender takes the inbox's next ticket, fills its slot and
 * returns at once: a message of at most INLINE_BYTES is copied into the slot and is sent;
 * a larger one names the sender's buffer, which the receiver copies straight into its own
 * with process_vm_readv (one copy, as Open MPI's vader does with CMA), and the send is
 * done when the receiver says so. The receiver takes, among the filled slots, the oldest
 * from the peer with the tag, so messages of one sender and tag arrive in order. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* process_vm_readv */
#endif
#include "shm.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

typedef struct {
  gboolean is_send;
  int peer;
  guint32 tag;
  void *buf;
  gsize nbytes;
  guint64 ticket; /* a send's */
} Request;

typedef struct {
  Inbox *inbox;
  guint64 ticket;
} Ticket;

static gboolean
has_room (Shm *s, const void *arg)
{
  const Ticket *t = arg;
  return atomic_load_explicit (&t->inbox->head, memory_order_acquire) + INBOX > t->ticket;
}

static gboolean
taken (Shm *s, const void *arg)
{
  const Ticket *t = arg;
  const Message *m = &t->inbox->slots[t->ticket % INBOX];
  return atomic_load_explicit (&m->done, memory_order_acquire) > t->ticket;
}

void *
shm_isend (void *p, const void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  Shm *s = p;
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&s->lock);
  g_autofree char *what = NULL;
  Ticket t = { &s->inboxes[peer], 0 };
  Request *r;
  Message *m;

  if (!shm_usable (s, "send", error))
    return NULL;
  t.ticket = atomic_fetch_add (&t.inbox->tail, 1);
  if (!has_room (s, &t))
    {
      what = g_strdup_printf ("send of %" G_GSIZE_FORMAT " bytes with tag %u to rank %d "
                              "(%d messages ahead of it not received)", nbytes, tag, peer,
                              INBOX);
      if (!shm_wait (s, has_room, &t, peer, 0, what, "receive them", error))
        return NULL;
    }
  m = &t.inbox->slots[t.ticket % INBOX];
  m->addr = (guint64) (guintptr) buf;
  m->nbytes = nbytes;
  m->src = s->rank;
  m->tag = tag;
  if (nbytes <= INLINE_BYTES && nbytes > 0)
    memcpy (m->inline_data, buf, nbytes);
  atomic_store_explicit (&m->ready, t.ticket + 1, memory_order_release);
  shm_wake (s);
  r = g_new0 (Request, 1);
  *r = (Request) { TRUE, peer, tag, (void *) buf, nbytes, t.ticket };
  return r;
}

/* A receive starts when it is waited for: the message waits in the inbox until then. */
void *
shm_irecv (void *p, void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  Shm *s = p;
  Request *r;
  if (!shm_usable (s, "receive", error))
    return NULL;
  r = g_new0 (Request, 1);
  *r = (Request) { FALSE, peer, tag, buf, nbytes, 0 };
  return r;
}

typedef struct {
  const Request *request;
  guint64 found; /* the ticket of the message */
} Match;

/* The oldest message in this rank's inbox from the request's peer with its tag. */
static gboolean
arrived (Shm *s, const void *arg)
{
  Match *match = (Match *) arg;
  Inbox *in = &s->inboxes[s->rank];
  guint64 tail = atomic_load_explicit (&in->tail, memory_order_acquire);
  for (guint64 i = atomic_load_explicit (&in->head, memory_order_relaxed); i < tail; i++)
    {
      const Message *m = &in->slots[i % INBOX];
      if (atomic_load_explicit (&m->ready, memory_order_acquire) == i + 1
          && atomic_load_explicit (&m->done, memory_order_relaxed) <= i
          && m->src == match->request->peer && m->tag == match->request->tag)
        return match->found = i, TRUE;
    }
  return FALSE;
}

/* Copies a large message from the sender's buffer. */
static gboolean
copy_from_sender (Shm *s, const Message *m, void *buf, GError **error)
{
  int pid = atomic_load (&s->h->ranks[m->src].pid);
  for (gsize at = 0; at < m->nbytes;)
    {
      struct iovec local = { (guint8 *) buf + at, m->nbytes - at };
      struct iovec remote = { (void *) (guintptr) (m->addr + at), m->nbytes - at };
      ssize_t n = process_vm_readv (pid, &local, 1, &remote, 1, 0);
      if (n <= 0)
        return shm_fail (error, KS_COMM_ERROR_FAILED, "receive of %" G_GUINT64_FORMAT " bytes "
                         "with tag %u from rank %d on rank %d: cannot read process %d's "
                         "memory: %s (the kernel allows it between processes of one user "
                         "unless Yama's ptrace_scope is 2 or more or a seccomp filter forbids "
                         "process_vm_readv; set [comm] backend = gloo there)", m->nbytes,
                         m->tag, m->src, s->rank, pid, n < 0 ? g_strerror (errno) : "no data");
      at += n;
    }
  return TRUE;
}

static gboolean
receive (Shm *s, const Request *r, GError **error)
{
  g_autofree char *what = g_strdup_printf ("receive of %" G_GSIZE_FORMAT " bytes with tag %u "
                                           "from rank %d", r->nbytes, r->tag, r->peer);
  Inbox *in = &s->inboxes[s->rank];
  Match match = { r, 0 };
  Message *m;

  if (!shm_wait (s, arrived, &match, r->peer, 0, what, "send it", error))
    return FALSE;
  m = &in->slots[match.found % INBOX];
  if (m->nbytes != r->nbytes)
    {
      s->broken = TRUE;
      return shm_fail (error, KS_COMM_ERROR_INVALID, "%s on rank %d: the message has %"
                       G_GUINT64_FORMAT " bytes", what, s->rank, m->nbytes);
    }
  if (m->nbytes <= INLINE_BYTES)
    {
      if (m->nbytes > 0) /* a buffer of no bytes may be NULL */
        memcpy (r->buf, m->inline_data, m->nbytes);
    }
  else if (!copy_from_sender (s, m, r->buf, error))
    return s->broken = TRUE, FALSE;
  atomic_store_explicit (&m->done, match.found + 1, memory_order_release);
  /* only this rank moves its head: past every message taken */
  guint64 head = atomic_load_explicit (&in->head, memory_order_relaxed);
  while (head < atomic_load (&in->tail)
         && atomic_load_explicit (&in->slots[head % INBOX].done, memory_order_relaxed) == head + 1)
    head++;
  atomic_store_explicit (&in->head, head, memory_order_release);
  shm_wake (s);
  return TRUE;
}

gboolean
shm_wait_request (void *p, void *request, GError **error)
{
  Shm *s = p;
  g_autofree Request *r = request;
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&s->lock);

  if (!shm_usable (s, r->is_send ? "send" : "receive", error))
    return FALSE;
  if (!r->is_send)
    return receive (s, r, error);
  if (r->nbytes <= INLINE_BYTES)
    return TRUE; /* it travelled in its slot */
  Ticket t = { &s->inboxes[r->peer], r->ticket };
  g_autofree char *what = g_strdup_printf ("send of %" G_GSIZE_FORMAT " bytes with tag %u to "
                                           "rank %d", r->nbytes, r->tag, r->peer);
  return shm_wait (s, taken, &t, r->peer, 0, what, "receive it", error);
}

gboolean
shm_send (void *p, const void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  void *r = shm_isend (p, buf, nbytes, peer, tag, error);
  return r != NULL && shm_wait_request (p, r, error);
}

gboolean
shm_recv (void *p, void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  void *r = shm_irecv (p, buf, nbytes, peer, tag, error);
  return r != NULL && shm_wait_request (p, r, error);
}
