/* A client of PyTorch's c10d TCPStore, as torchrun's agent serves it to its workers
 * (TORCHELASTIC_USE_AGENT_STORE): the protocol of torch 1.13, Debian 12's. No handshake;
 * a query is a type byte then its fields; strings and values are a u64 length and the
 * bytes, integers 64-bit, in the host's order (x86-64 and the server alike). Every key is
 * written "/<prefix>/<key>", as torch's own client adds a '/'.
 *
 * One connection per client, kept for its life. A wait is a CHECK, asked again with a
 * growing pause (1 ms to POLL_MAX_MS), never torch's WAIT: a WAIT that times out leaves
 * a waiter in the server that answers later on the same connection, so the connection
 * would have to be dropped after each (a rank polling a key made a connection per
 * poll). A GET is sent only once CHECK says the key is there (a GET of a missing key
 * makes the server close the connection). Every call ends by its deadline: a wait's own
 * timeout, and [comm] timeout (set_timeout) for a connect, a set, an add, a remove; an
 * answer gets at least answer_floor_ms. A connection lost is made again, with a growing
 * pause between tries, within the deadline of the call that needs it. */
#include <config.h>
#include <ksdist/ksdist.h>

#include "tcp.h"
#include "wire.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { Q_SET = 0, Q_GET = 2, Q_ADD = 3, Q_CHECK = 4, Q_DELETE_KEY = 8 };
enum { READY = 0, NOT_READY = 1 };
#define POLL_MAX_MS 50        /* the longest pause between two CHECKs of a wait */
#define RETRY_MIN_MS 50       /* pauses between connection tries: 50 ms doubling ... */
#define RETRY_MAX_MS 1000     /* ... up to 1 s */
#define ANSWER_FLOOR_MS 1000  /* an answer to a look (a query whose deadline is sooner) gets */
#define ANSWER_ROOF_MS 5000   /* a quarter of [comm] timeout, within these (and the timeout) */
#define MAX_VALUE (64u << 20) /* a longer value from the server is refused */

typedef struct {
  int connect_timeout_ms; /* open: how long a store not up yet is waited for */
  int timeout_ms;         /* [comm] timeout: the longest any other call waits */
  char *address, *host, *prefix;
  guint16 port;
  int fd;
  gint64 retry_at; /* no connection try before this (monotonic µs) */
  int retry_ms;    /* the pause after the next failed try */
  char *why;       /* why the last try or the connection failed */
  GMutex lock;     /* one query at a time on the connection */
} C10dStore;

static void *
c10d_create (const KsSettings *settings, GError **error)
{
  C10dStore *s = g_new0 (C10dStore, 1);
  s->connect_timeout_ms = (int) ks_settings_get_int (settings, "connect_timeout_ms");
  s->timeout_ms = 300000; /* [comm] timeout's default, until set_timeout */
  s->fd = -1;
  s->retry_ms = RETRY_MIN_MS;
  g_mutex_init (&s->lock);
  return s;
}

static void
drop (C10dStore *s)
{
  if (s->fd >= 0)
    close (s->fd);
  s->fd = -1;
}

static void
c10d_destroy (void *p)
{
  C10dStore *s = p;
  drop (s);
  g_mutex_clear (&s->lock);
  g_free (s->address);
  g_free (s->host);
  g_free (s->prefix);
  g_free (s->why);
  g_free (s);
}

static gboolean
c10d_set_timeout (void *p, int timeout_ms, GError **error)
{
  C10dStore *s = p;
  g_mutex_lock (&s->lock);
  s->timeout_ms = MAX (timeout_ms, 1);
  g_mutex_unlock (&s->lock);
  return TRUE;
}

/* How long an answer may take when the call's own deadline is sooner. */
static int
answer_floor_ms (const C10dStore *s)
{
  return MIN (s->timeout_ms, CLAMP (s->timeout_ms / 4, ANSWER_FLOOR_MS, ANSWER_ROOF_MS));
}

static gint64
now (void)
{
  return g_get_monotonic_time ();
}

static int
ms_until (gint64 deadline)
{
  return (int) CLAMP ((deadline - now () + 999) / 1000, 0, G_MAXINT);
}

/* A call's deadline `ms` from now. */
static gint64
deadline_in (int ms)
{
  return now () + (gint64) MAX (ms, 0) * 1000;
}

static void
set_why (C10dStore *s, const char *why)
{
  g_free (s->why);
  s->why = g_strdup (why);
}

/* No connection (any more): the next try waits a pause that grows until an answer comes. */
static void
fail_connection (C10dStore *s, const char *why)
{
  set_why (s, why);
  drop (s);
  s->retry_at = now () + (gint64) s->retry_ms * 1000;
  s->retry_ms = MIN (s->retry_ms * 2, RETRY_MAX_MS);
}

/* Makes sure there is a connection, trying (again) until `deadline`; the pause between
 * tries grows, across calls too, so a store that is gone is not knocked at by every look.
 * `doing` says what the call was for, in the error. */
static gboolean
ensure_connected (C10dStore *s, gint64 deadline, const char *doing, GError **error)
{
  if (s->fd >= 0)
    return TRUE;
  if (s->host == NULL)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID, "c10d store: call open first");
      return FALSE;
    }
  for (;;)
    {
      gint64 pause = s->retry_at - now ();
      if (pause > 0)
        {
          if (s->retry_at >= deadline)
            break;
          g_usleep ((gulong) pause);
        }
      s->fd = ks_tcp_connect (s->host, s->port, deadline, error);
      if (s->fd >= 0)
        return TRUE;
      if (s->fd == -2)
        {
          s->fd = -1;
          return FALSE;
        }
      s->fd = -1;
      fail_connection (s, g_strerror (errno));
      if (now () >= deadline)
        break;
    }
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST,
               "c10d store: cannot reach PyTorch's TCPStore at %s (%s) %s: check that "
               "torchrun's agent, the process serving MASTER_ADDR:MASTER_PORT, still runs",
               s->address, s->why != NULL ? s->why : "no try made in time", doing);
  return FALSE;
}

static gboolean
c10d_open (void *p, const char *address, const char *prefix, const char *token, GError **error)
{
  C10dStore *s = p;
  g_autoptr (GError) local = NULL;
  g_autofree char *host = NULL;
  guint16 port;

  if (!wire_parse_address (address, &host, &port, error))
    return FALSE;
  g_mutex_lock (&s->lock);
  drop (s);
  g_free (s->host);
  g_free (s->address);
  g_free (s->prefix);
  s->host = g_steal_pointer (&host);
  s->port = port;
  s->address = g_strdup (address);
  s->prefix = g_strdup (prefix != NULL && *prefix ? prefix : "default");
  s->retry_at = 0;
  s->retry_ms = RETRY_MIN_MS;
  int wait_ms = MIN (s->connect_timeout_ms, s->timeout_ms);
  /* torch's store has no token: it trusts its network */
  gboolean ok = ensure_connected (s, deadline_in (wait_ms), "when this process opened it",
                                  &local);
  if (!ok && g_error_matches (local, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST))
    g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
                 "c10d store: cannot reach PyTorch's TCPStore at %s within %d ms (%s): is "
                 "torchrun's agent there (MASTER_ADDR, MASTER_PORT)?",
                 address, wait_ms, s->why != NULL ? s->why : "no answer");
  else if (!ok)
    g_propagate_error (error, g_steal_pointer (&local));
  g_mutex_unlock (&s->lock);
  return ok;
}

static void
put_u64 (GByteArray *q, guint64 v)
{
  g_byte_array_append (q, (const guint8 *) &v, 8);
}

static void
put_bytes (GByteArray *q, const void *data, gsize len)
{
  put_u64 (q, len);
  g_byte_array_append (q, data, len);
}

static void
put_key (C10dStore *s, GByteArray *q, const char *key)
{
  g_autofree char *full = g_strdup_printf ("/%s/%s", s->prefix, key);
  put_bytes (q, full, strlen (full));
}

static gboolean
lost (C10dStore *s, const char *why, const char *doing, GError **error)
{
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST,
               "c10d store at %s: the connection to PyTorch's TCPStore was lost (%s) %s; "
               "torchrun's agent may have stopped",
               s->address, why, doing);
  fail_connection (s, why);
  return FALSE;
}

/* Sends query `q` whole (the server reads a query in one go and would stall on half of
 * one) and, when `reply` is not NULL, reads `reply_len` bytes of answer. Both by
 * `deadline`, an answer by answer_floor_ms at least (within [comm] timeout); a late
 * answer would come on the connection after the next query, so the connection goes with
 * it. Called with the lock held. */
static gboolean
exchange (C10dStore *s, GByteArray *q, void *reply, gsize reply_len, gint64 deadline,
          const char *doing, GError **error)
{
  g_autofree char *why = NULL;
  gint64 start = now ();
  gint64 answer_by = MAX (deadline, deadline_in (answer_floor_ms (s)));
  if (!ensure_connected (s, answer_by, doing, error)) /* a look may connect too */
    return FALSE;
  /* by the deadline: a server that reads nothing fills the socket */
  if (!wire_send_all (s->fd, q->data, q->len, answer_by))
    return lost (s, g_strerror (errno), doing, error);
  if (reply == NULL)
    return TRUE;
  int got = wire_receive_all (s->fd, reply, reply_len, answer_by, &why);
  if (got > 0)
    {
      s->retry_ms = RETRY_MIN_MS; /* it answers: a later loss is a new story */
      return TRUE;
    }
  if (got < 0 && now () >= answer_by)
    {
      g_autofree char *late = g_strdup_printf ("no answer within %d ms",
                                               (int) ((answer_by - start) / 1000));
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST,
                   "c10d store at %s: PyTorch's TCPStore stopped answering (%s) %s: check "
                   "that torchrun's agent, the process serving MASTER_ADDR:MASTER_PORT, runs "
                   "and is not stopped; if it is only slow, raise [comm] timeout",
                   s->address, late, doing);
      fail_connection (s, late);
      return FALSE;
    }
  return lost (s, got == 0 ? "closed by the server" : why, doing, error);
}

/* Waits by `deadline` until every key is in the store: CHECK, then a pause growing from
 * 1 ms to POLL_MAX_MS, on the one connection. */
static gboolean
wait_keys (C10dStore *s, const char *const *keys, gint64 deadline, int timeout_ms,
           GError **error)
{
  g_autoptr (GByteArray) q = g_byte_array_new ();
  g_autofree char *list = g_strjoinv ("', '", (char **) keys);
  g_autofree char *doing = g_strdup_printf ("while waiting for key '%s'", list);
  guint8 type = Q_CHECK;
  int pause_ms = 1;

  g_byte_array_append (q, &type, 1);
  put_u64 (q, g_strv_length ((char **) keys));
  for (guint i = 0; keys[i] != NULL; i++)
    put_key (s, q, keys[i]);
  for (;;)
    {
      guint8 answer = 0xff;
      if (!exchange (s, q, &answer, 1, deadline, doing, error))
        return FALSE;
      if (answer == READY)
        return TRUE;
      if (answer != NOT_READY)
        return lost (s, "an answer to a check that is neither 'ready' nor 'not ready'", doing,
                     error);
      if (now () >= deadline)
        break;
      g_usleep ((gulong) MIN (pause_ms, ms_until (deadline)) * 1000);
      pause_ms = MIN (pause_ms * 2, POLL_MAX_MS);
    }
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
               "c10d store at %s: keys '%s' did not appear within %d ms", s->address, list,
               timeout_ms);
  return FALSE;
}

static gboolean
c10d_wait (void *p, const char *const *keys, int timeout_ms, GError **error)
{
  C10dStore *s = p;
  gint64 deadline = deadline_in (timeout_ms);
  g_mutex_lock (&s->lock);
  gboolean ok = wait_keys (s, keys, deadline, timeout_ms, error);
  g_mutex_unlock (&s->lock);
  return ok;
}

static gboolean
c10d_set (void *p, const char *key, const void *data, gsize len, GError **error)
{
  C10dStore *s = p;
  g_autoptr (GByteArray) q = g_byte_array_new ();
  g_autofree char *doing = g_strdup_printf ("while setting key '%s'", key);
  guint8 type = Q_SET;

  g_byte_array_append (q, &type, 1);
  put_key (s, q, key);
  put_bytes (q, data, len);
  g_mutex_lock (&s->lock);
  /* no answer to a set */
  gboolean ok = exchange (s, q, NULL, 0, deadline_in (s->timeout_ms), doing, error);
  g_mutex_unlock (&s->lock);
  return ok;
}

static gboolean
c10d_get (void *p, const char *key, int timeout_ms, void **data, gsize *len, GError **error)
{
  C10dStore *s = p;
  const char *keys[] = { key, NULL };
  g_autoptr (GByteArray) q = g_byte_array_new ();
  g_autofree char *doing = g_strdup_printf ("while reading key '%s'", key);
  gint64 deadline = deadline_in (timeout_ms);
  guint8 type = Q_GET;
  guint64 size;
  gboolean ok = FALSE;
  g_autofree char *why = NULL;

  g_byte_array_append (q, &type, 1);
  put_key (s, q, key);
  g_mutex_lock (&s->lock);
  if (wait_keys (s, keys, deadline, timeout_ms, error)
      && exchange (s, q, &size, 8, deadline, doing, error))
    {
      if (size > MAX_VALUE)
        lost (s, "a value longer than 64 MiB", doing, error);
      else
        {
          *data = g_malloc (size + 1);
          *len = size;
          gint64 by = MAX (deadline, deadline_in (answer_floor_ms (s)));
          int got = size == 0 ? 1 : wire_receive_all (s->fd, *data, size, by, &why);
          if (!(ok = got > 0))
            {
              g_clear_pointer (data, g_free);
              lost (s, why != NULL ? why : "closed by the server", doing, error);
            }
        }
    }
  g_mutex_unlock (&s->lock);
  return ok;
}

/* A query answered by one 64-bit integer (add, delete). */
static gboolean
int_query (C10dStore *s, GByteArray *q, const char *doing, gint64 *result, GError **error)
{
  gint64 value;
  g_mutex_lock (&s->lock);
  gboolean ok = exchange (s, q, &value, 8, deadline_in (s->timeout_ms), doing, error);
  g_mutex_unlock (&s->lock);
  if (ok && result != NULL)
    *result = value;
  return ok;
}

static gboolean
c10d_add (void *p, const char *key, gint64 delta, gint64 *result, GError **error)
{
  C10dStore *s = p;
  g_autoptr (GByteArray) q = g_byte_array_new ();
  g_autofree char *doing = g_strdup_printf ("while adding to key '%s'", key);
  guint8 type = Q_ADD;
  g_byte_array_append (q, &type, 1);
  put_key (s, q, key);
  g_byte_array_append (q, (const guint8 *) &delta, 8);
  return int_query (s, q, doing, result, error);
}

static gboolean
c10d_remove (void *p, const char *key, GError **error)
{
  C10dStore *s = p;
  g_autoptr (GByteArray) q = g_byte_array_new ();
  g_autofree char *doing = g_strdup_printf ("while deleting key '%s'", key);
  guint8 type = Q_DELETE_KEY;
  g_byte_array_append (q, &type, 1);
  put_key (s, q, key);
  return int_query (s, q, doing, NULL, error);
}

const KsStoreOps ks_c10d_store_ops = {
  .size = sizeof (KsStoreOps),
  .create = c10d_create,
  .destroy = c10d_destroy,
  .open = c10d_open,
  .set = c10d_set,
  .get = c10d_get,
  .wait = c10d_wait,
  .add = c10d_add,
  .remove = c10d_remove,
  .set_timeout = c10d_set_timeout,
};
