/* A client of PyTorch's c10d TCPStore, as torchrun's agent serves it to its workers
 * (TORCHELASTIC_USE_AGENT_STORE): the protocol of torch 1.13, Debian 12's. No handshake;
 * a query is a type byte then its fields; strings and values are a u64 length and the
 * bytes, integers 64-bit, in the host's order (x86-64 and the server alike). A GET of a
 * missing key makes the server close the connection, so every get waits first; a
 * client-side timeout leaves a waiter behind in the server, so after one the connection
 * is made anew. Every key is written "/<prefix>/<key>", as torch's own client adds a '/'. */
#include <config.h>
#include <ksdist/ksdist.h>

#include "tcp.h"
#include "wire.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

enum { Q_SET = 0, Q_GET = 2, Q_ADD = 3, Q_WAIT = 5, Q_DELETE_KEY = 8 };
#define STOP_WAITING 0
#define RETRY_MS 100
#define ANSWER_GRACE_MS 30000 /* for a query that does not wait, the network's time */
#define MAX_VALUE (64u << 20)  /* a longer value from the server is refused */

typedef struct {
  int connect_timeout_ms;
  char *address, *host, *prefix;
  guint16 port;
  int fd;
  GMutex lock; /* one query at a time on the connection */
} C10dStore;

static void *
c10d_create (const KsSettings *settings, GError **error)
{
  C10dStore *s = g_new0 (C10dStore, 1);
  s->connect_timeout_ms = (int) ks_settings_get_int (settings, "connect_timeout_ms");
  s->fd = -1;
  g_mutex_init (&s->lock);
  return s;
}

static void
c10d_destroy (void *p)
{
  C10dStore *s = p;
  if (s->fd >= 0)
    close (s->fd);
  g_mutex_clear (&s->lock);
  g_free (s->address);
  g_free (s->host);
  g_free (s->prefix);
  g_free (s);
}

/* Connects, trying again until connect_timeout_ms while nothing listens yet. */
static gboolean
reconnect (C10dStore *s, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) s->connect_timeout_ms * 1000;
  if (s->fd >= 0)
    close (s->fd);
  while ((s->fd = ks_tcp_connect (s->host, s->port, error)) < 0)
    {
      int err = errno;
      if (s->fd == -2 || g_get_monotonic_time () >= deadline)
        {
          if (s->fd != -2)
            g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
                         "c10d store: cannot reach PyTorch's TCPStore at %s within %d ms (%s): "
                         "is torchrun's agent there (MASTER_ADDR, MASTER_PORT)?",
                         s->address, s->connect_timeout_ms, g_strerror (err));
          s->fd = -1;
          return FALSE;
        }
      g_usleep (RETRY_MS * 1000);
    }
  return TRUE;
}

static gboolean
c10d_open (void *p, const char *address, const char *prefix, const char *token, GError **error)
{
  C10dStore *s = p;
  g_free (s->host);
  s->host = NULL;
  if (!wire_parse_address (address, &s->host, &s->port, error))
    return FALSE;
  g_free (s->address);
  g_free (s->prefix);
  s->address = g_strdup (address);
  s->prefix = g_strdup (prefix != NULL && *prefix ? prefix : "default");
  return reconnect (s, error); /* torch's store has no token: it trusts its network */
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
lost (C10dStore *s, const char *why, GError **error)
{
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST,
               "c10d store at %s: the connection to PyTorch's TCPStore was lost (%s); "
               "torchrun's agent may have stopped",
               s->address, why);
  close (s->fd);
  s->fd = -1;
  return FALSE;
}

/* Sends query `q` whole (the server reads a query in one go and would stall on half of
 * one) and, when `reply` is not NULL, reads `reply_len` bytes of answer by wait_ms.
 * *timed_out tells a late answer from a lost connection. Called with the lock held. */
static gboolean
exchange (C10dStore *s, GByteArray *q, void *reply, gsize reply_len, int wait_ms,
          gboolean *timed_out, GError **error)
{
  g_autofree char *why = NULL;
  *timed_out = FALSE;
  if (s->fd < 0 && !reconnect (s, error))
    return FALSE;
  if (!wire_send_raw (s->fd, q->data, q->len))
    return lost (s, g_strerror (errno), error);
  if (reply == NULL)
    return TRUE;
  gint64 deadline = g_get_monotonic_time () + (gint64) wait_ms * 1000;
  int got = wire_receive_all (s->fd, reply, reply_len, deadline, &why);
  if (got > 0)
    return TRUE;
  if (got < 0 && g_get_monotonic_time () >= deadline)
    {
      *timed_out = TRUE; /* the server keeps our waiter: a new connection forgets it */
      close (s->fd);
      s->fd = -1;
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
                   "c10d store at %s: no answer within %d ms", s->address, wait_ms);
      return FALSE;
    }
  return lost (s, got == 0 ? "closed by the server" : why, error);
}

static gboolean
wait_keys (C10dStore *s, const char *const *keys, int timeout_ms, GError **error)
{
  g_autoptr (GByteArray) q = g_byte_array_new ();
  guint8 answer = 0xff, type = Q_WAIT;
  gboolean timed_out;

  g_byte_array_append (q, &type, 1);
  put_u64 (q, g_strv_length ((char **) keys));
  for (guint i = 0; keys[i] != NULL; i++)
    put_key (s, q, keys[i]);
  if (exchange (s, q, &answer, 1, MAX (timeout_ms, 0), &timed_out, error))
    {
      if (answer == STOP_WAITING)
        return TRUE;
      return lost (s, "an answer to a wait that is not 'stop waiting'", error);
    }
  if (timed_out && error != NULL)
    {
      g_autofree char *list = g_strjoinv ("', '", (char **) keys);
      g_clear_error (error);
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
                   "c10d store at %s: keys '%s' did not appear within %d ms", s->address, list,
                   timeout_ms);
    }
  return FALSE;
}

static gboolean
c10d_wait (void *p, const char *const *keys, int timeout_ms, GError **error)
{
  C10dStore *s = p;
  g_mutex_lock (&s->lock);
  gboolean ok = wait_keys (s, keys, timeout_ms, error);
  g_mutex_unlock (&s->lock);
  return ok;
}

static gboolean
c10d_set (void *p, const char *key, const void *data, gsize len, GError **error)
{
  C10dStore *s = p;
  g_autoptr (GByteArray) q = g_byte_array_new ();
  guint8 type = Q_SET;
  gboolean timed_out;

  g_byte_array_append (q, &type, 1);
  put_key (s, q, key);
  put_bytes (q, data, len);
  g_mutex_lock (&s->lock);
  gboolean ok = exchange (s, q, NULL, 0, 0, &timed_out, error); /* no answer to a set */
  g_mutex_unlock (&s->lock);
  return ok;
}

static gboolean
c10d_get (void *p, const char *key, int timeout_ms, void **data, gsize *len, GError **error)
{
  C10dStore *s = p;
  const char *keys[] = { key, NULL };
  g_autoptr (GByteArray) q = g_byte_array_new ();
  guint8 type = Q_GET;
  guint64 size;
  gboolean timed_out, ok = FALSE;
  g_autofree char *why = NULL;

  g_byte_array_append (q, &type, 1);
  put_key (s, q, key);
  g_mutex_lock (&s->lock);
  if (wait_keys (s, keys, timeout_ms, error)
      && exchange (s, q, &size, 8, ANSWER_GRACE_MS, &timed_out, error))
    {
      if (size > MAX_VALUE)
        lost (s, "a value longer than 64 MiB", error);
      else
        {
          *data = g_malloc (size + 1);
          *len = size;
          int got = size == 0 ? 1
                              : wire_receive_all (s->fd, *data, size,
                                                  g_get_monotonic_time () + ANSWER_GRACE_MS * 1000,
                                                  &why);
          if (!(ok = got > 0))
            {
              g_clear_pointer (data, g_free);
              lost (s, why != NULL ? why : "closed by the server", error);
            }
        }
    }
  g_mutex_unlock (&s->lock);
  return ok;
}

/* A query answered by one 64-bit integer (add, delete). */
static gboolean
int_query (C10dStore *s, GByteArray *q, const char *what, gint64 *result, GError **error)
{
  gboolean timed_out;
  gint64 value;
  g_mutex_lock (&s->lock);
  gboolean ok = exchange (s, q, &value, 8, ANSWER_GRACE_MS, &timed_out, error);
  g_mutex_unlock (&s->lock);
  if (!ok && timed_out)
    g_prefix_error (error, "%s: ", what);
  if (ok && result != NULL)
    *result = value;
  return ok;
}

static gboolean
c10d_add (void *p, const char *key, gint64 delta, gint64 *result, GError **error)
{
  C10dStore *s = p;
  g_autoptr (GByteArray) q = g_byte_array_new ();
  guint8 type = Q_ADD;
  g_byte_array_append (q, &type, 1);
  put_key (s, q, key);
  g_byte_array_append (q, (const guint8 *) &delta, 8);
  return int_query (s, q, "add", result, error);
}

static gboolean
c10d_remove (void *p, const char *key, GError **error)
{
  C10dStore *s = p;
  g_autoptr (GByteArray) q = g_byte_array_new ();
  guint8 type = Q_DELETE_KEY;
  g_byte_array_append (q, &type, 1);
  put_key (s, q, key);
  return int_query (s, q, "delete", NULL, error);
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
};
