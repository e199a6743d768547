/* The TCP store's client: one connection to the server, requests answered in order.
 * A wait is done by the server, which answers when the key appears or the wait's time
 * is up, so a client never polls. The same store may also host the server (serve). */
#include <config.h>
#include <ksdist/ksdist.h>

#include "tcp.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ANSWER_GRACE_MS 30000 /* beyond a request's own wait, for the network */
#define RETRY_MS 100          /* between tries to reach a server not up yet */

typedef struct {
  int connect_timeout_ms;
  int timeout_ms; /* [comm] timeout: bounds the connect and the grace of an answer */
  char *address;
  int fd;
  GMutex lock; /* one request at a time on the connection */
  TcpServer *server;
} TcpStore;

static void *
tcp_create (const KsSettings *settings, GError **error)
{
  TcpStore *s = g_new0 (TcpStore, 1);
  s->connect_timeout_ms = (int) ks_settings_get_int (settings, "connect_timeout_ms");
  s->timeout_ms = 300000; /* [comm] timeout's default, until set_timeout */
  s->fd = -1;
  g_mutex_init (&s->lock);
  return s;
}

static gboolean
tcp_set_timeout (void *p, int timeout_ms, GError **error)
{
  TcpStore *s = p;
  g_mutex_lock (&s->lock);
  s->timeout_ms = MAX (timeout_ms, 1);
  g_mutex_unlock (&s->lock);
  return TRUE;
}

static void
tcp_destroy (void *p)
{
  TcpStore *s = p;
  if (s->fd >= 0)
    close (s->fd);
  ks_tcp_server_stop (s->server);
  g_mutex_clear (&s->lock);
  g_free (s->address);
  g_free (s);
}

/* connect() on a non-blocking socket, waited for by `deadline` (monotonic µs, -1: the
 * kernel's own limit): a server whose backlog is full drops the SYN, and a blocking
 * connect would wait for the kernel's retries (two minutes) whatever the caller's time. */
static int
connect_by (int fd, const struct sockaddr *addr, socklen_t len, gint64 deadline)
{
  int flags = fcntl (fd, F_GETFL);
  if (flags < 0 || fcntl (fd, F_SETFL, flags | O_NONBLOCK) != 0)
    return -1;
  if (connect (fd, addr, len) != 0)
    {
      if (errno != EINPROGRESS)
        return -1;
      for (;;)
        {
          gint64 left = deadline < 0 ? 0 : MAX (deadline - g_get_monotonic_time (), 0);
          struct pollfd pfd = { .fd = fd, .events = POLLOUT };
          int n = poll (&pfd, 1, deadline < 0 ? -1 : (int) MIN ((left + 999) / 1000, G_MAXINT));
          if (n < 0 && errno == EINTR)
            continue;
          if (n < 0)
            return -1;
          if (n == 0)
            {
              errno = ETIMEDOUT;
              return -1;
            }
          int err = 0;
          socklen_t elen = sizeof err;
          if (getsockopt (fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
            return -1;
          if (err != 0)
            {
              errno = err;
              return -1;
            }
          break;
        }
    }
  return fcntl (fd, F_SETFL, flags);
}

int
ks_tcp_connect (const char *host, guint16 port, gint64 deadline, GError **error)
{
  struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                            .ai_flags = AI_NUMERICSERV };
  struct addrinfo *found = NULL;
  g_autofree char *service = g_strdup_printf ("%u", port);
  int fd = -1, err = ECONNREFUSED, gai;

  if ((gai = getaddrinfo (host, service, &hints, &found)) != 0)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "tcp store: cannot resolve '%s': %s", host, gai_strerror (gai));
      return -2;
    }
  for (struct addrinfo *a = found; a != NULL && fd < 0; a = a->ai_next)
    {
      fd = socket (a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd >= 0 && connect_by (fd, a->ai_addr, a->ai_addrlen, deadline) != 0)
        {
          err = errno;
          close (fd);
          fd = -1;
        }
    }
  freeaddrinfo (found);
  if (fd >= 0)
    {
      int one = 1;
      setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
  errno = err;
  return fd;
}

static void
lose_connection (TcpStore *s, const char *why, GError **error)
{
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST,
               "tcp store at %s: the connection to the server was lost (%s); the process "
               "hosting the store (ksdist launch, or node 0's) may have stopped",
               s->address, why);
  close (s->fd);
  s->fd = -1;
}

/* Sends `body` and reads the answer, waiting up to wait_ms beyond the usual grace. The
 * reply's status is in *status, its fields in *reply (g_byte_array_unref'd by caller). */
static gboolean
request (TcpStore *s, GByteArray *body, int wait_ms, guint8 *status, GByteArray **reply,
         WireReader *fields, GError **error)
{
  g_autofree char *why = NULL;
  gboolean ok = FALSE;
  gint64 deadline;

  g_mutex_lock (&s->lock); /* the wait for another thread's request is not this one's */
  deadline = g_get_monotonic_time ()
             + ((gint64) MAX (wait_ms, 0) + MIN (ANSWER_GRACE_MS, s->timeout_ms)) * 1000;
  if (s->fd < 0)
    g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                 s->address == NULL ? "tcp store: call open first"
                                    : "tcp store at %s: no connection (it was lost before)",
                 s->address);
  else if (!wire_send (s->fd, body, deadline))
    lose_connection (s, g_strerror (errno), error);
  else
    {
      int got = wire_receive (s->fd, deadline, reply, &why);
      if (got <= 0)
        lose_connection (s, got == 0 ? "closed by the server" : why, error);
      else
        {
          *fields = (WireReader) { (*reply)->data, (*reply)->len };
          ok = wire_get_u8 (fields, status);
          if (!ok)
            lose_connection (s, "an empty answer", error);
        }
    }
  g_mutex_unlock (&s->lock);
  return ok;
}

static gboolean
say_hello (TcpStore *s, const char *prefix, const char *token, gint64 deadline, GError **error)
{
  g_autoptr (GByteArray) body = g_byte_array_new ();
  g_autoptr (GByteArray) reply = NULL;
  g_autofree char *why = NULL, *message = NULL;
  WireReader r;
  guint8 status = REPLY_ERROR;

  wire_put_u8 (body, OP_HELLO);
  wire_put_string (body, WIRE_MAGIC);
  wire_put_string (body, token);
  wire_put_string (body, prefix);
  if (!wire_send (s->fd, body, deadline) || wire_receive (s->fd, deadline, &reply, &why) <= 0)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST,
                   "tcp store at %s: no answer to this process's hello (%s); is that address "
                   "a ksdist store?",
                   s->address, why != NULL ? why : "the connection closed");
      return FALSE;
    }
  r = (WireReader) { reply->data, reply->len };
  if (wire_get_u8 (&r, &status) && status == REPLY_OK)
    return TRUE;
  wire_get_string (&r, &message);
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
               "tcp store at %s refused this process (%s): every process of a job must have "
               "the token its launcher made, in KS_STORE_TOKEN",
               s->address, message != NULL ? message : "no reason given");
  return FALSE;
}

static gboolean
tcp_open (void *p, const char *address, const char *prefix, const char *token, GError **error)
{
  TcpStore *s = p;
  g_autofree char *host = NULL;
  guint16 port;
  int wait_ms = MIN (s->connect_timeout_ms, s->timeout_ms);
  gint64 deadline = g_get_monotonic_time () + (gint64) wait_ms * 1000;
  int err = 0;

  if (token == NULL || *token == '\0')
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "tcp store: no token: set KS_STORE_TOKEN to the job's token (ksdist launch "
                   "sets it for its workers)");
      return FALSE;
    }
  if (!wire_parse_address (address, &host, &port, error))
    return FALSE;
  if (s->fd >= 0)
    close (s->fd);
  g_free (s->address);
  s->address = g_strdup (address);
  for (;;)
    {
      g_autoptr (GError) lost = NULL;
      while ((s->fd = ks_tcp_connect (host, port, deadline, error)) < 0)
        {
          err = errno;
          if (s->fd == -2)
            {
              s->fd = -1;
              return FALSE;
            }
          if (g_get_monotonic_time () >= deadline)
            {
              g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
                           "tcp store: cannot reach the server at %s within %d ms (%s); start "
                           "the process that hosts it, or raise [store] connect_timeout_ms",
                           address, wait_ms, g_strerror (err));
              return FALSE;
            }
          g_usleep (RETRY_MS * 1000);
        }
      if (say_hello (s, prefix != NULL && *prefix ? prefix : "default", token, deadline, &lost))
        return TRUE;
      close (s->fd);
      s->fd = -1;
      /* closed without an answer: a server full of strangers turns newcomers away; try
       * again while the deadline allows (a refusal is final) */
      if (!g_error_matches (lost, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST)
          || g_get_monotonic_time () >= deadline)
        {
          g_propagate_error (error, g_steal_pointer (&lost));
          return FALSE;
        }
      g_usleep (RETRY_MS * 1000);
    }
}

/* A request whose reply carries nothing but OK. */
static gboolean
simple_request (TcpStore *s, GByteArray *body, const char *what, GError **error)
{
  g_autoptr (GByteArray) reply = NULL;
  g_autofree char *message = NULL;
  WireReader r;
  guint8 status;

  if (!request (s, body, 0, &status, &reply, &r, error))
    return FALSE;
  if (status == REPLY_OK)
    return TRUE;
  wire_get_string (&r, &message);
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED, "tcp store at %s: %s failed: %s",
               s->address, what, message != NULL ? message : "no reason given");
  return FALSE;
}

static gboolean
tcp_set (void *p, const char *key, const void *data, gsize len, GError **error)
{
  g_autoptr (GByteArray) body = g_byte_array_new ();
  wire_put_u8 (body, OP_SET);
  wire_put_string (body, key);
  wire_put_bytes (body, data, len);
  return simple_request (p, body, "set", error);
}

static gboolean
tcp_remove (void *p, const char *key, GError **error)
{
  g_autoptr (GByteArray) body = g_byte_array_new ();
  wire_put_u8 (body, OP_REMOVE);
  wire_put_string (body, key);
  return simple_request (p, body, "remove", error);
}

static gboolean
tcp_get (void *p, const char *key, int timeout_ms, void **data, gsize *len, GError **error)
{
  TcpStore *s = p;
  g_autoptr (GByteArray) body = g_byte_array_new ();
  g_autoptr (GByteArray) reply = NULL;
  const guint8 *value;
  guint32 value_len;
  WireReader r;
  guint8 status;

  wire_put_u8 (body, OP_GET);
  wire_put_string (body, key);
  wire_put_u32 (body, (guint32) MAX (timeout_ms, 0));
  if (!request (s, body, timeout_ms, &status, &reply, &r, error))
    return FALSE;
  if (status == REPLY_OK && wire_get_bytes (&r, &value, &value_len))
    {
      *data = g_memdup2 (value, value_len);
      *len = value_len;
      return TRUE;
    }
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
               "tcp store at %s: key '%s' did not appear within %d ms", s->address, key,
               timeout_ms);
  return FALSE;
}

static gboolean
tcp_wait (void *p, const char *const *keys, int timeout_ms, GError **error)
{
  TcpStore *s = p;
  g_autoptr (GByteArray) body = g_byte_array_new ();
  g_autoptr (GByteArray) reply = NULL;
  g_autofree char *missing = NULL;
  WireReader r;
  guint8 status;

  wire_put_u8 (body, OP_WAIT);
  wire_put_u32 (body, (guint32) MAX (timeout_ms, 0));
  wire_put_u32 (body, g_strv_length ((char **) keys));
  for (guint i = 0; keys[i] != NULL; i++)
    wire_put_string (body, keys[i]);
  if (!request (s, body, timeout_ms, &status, &reply, &r, error))
    return FALSE;
  if (status == REPLY_OK)
    return TRUE;
  wire_get_string (&r, &missing);
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
               "tcp store at %s: keys %s did not appear within %d ms", s->address,
               missing != NULL ? missing : "(not said)", timeout_ms);
  return FALSE;
}

static gboolean
tcp_add (void *p, const char *key, gint64 delta, gint64 *result, GError **error)
{
  TcpStore *s = p;
  g_autoptr (GByteArray) body = g_byte_array_new ();
  g_autoptr (GByteArray) reply = NULL;
  g_autofree char *message = NULL;
  WireReader r;
  guint8 status;
  gint64 value;

  wire_put_u8 (body, OP_ADD);
  wire_put_string (body, key);
  wire_put_i64 (body, delta);
  if (!request (s, body, 0, &status, &reply, &r, error))
    return FALSE;
  if (status == REPLY_OK && wire_get_i64 (&r, &value))
    {
      if (result != NULL)
        *result = value;
      return TRUE;
    }
  wire_get_string (&r, &message);
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID, "tcp store at %s: %s", s->address,
               message != NULL ? message : "a malformed answer to add");
  return FALSE;
}

static gboolean
tcp_serve (void *p, const char *address, const char *token, char **bound, GError **error)
{
  TcpStore *s = p;
  if (s->server != NULL)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "tcp store: this store already serves; make another to serve again");
      return FALSE;
    }
  return (s->server = ks_tcp_server_start (address, token, bound, error)) != NULL;
}

const KsStoreOps ks_tcp_store_ops = {
  .size = sizeof (KsStoreOps),
  .create = tcp_create,
  .destroy = tcp_destroy,
  .open = tcp_open,
  .set = tcp_set,
  .get = tcp_get,
  .wait = tcp_wait,
  .add = tcp_add,
  .remove = tcp_remove,
  .serve = tcp_serve,
  .set_timeout = tcp_set_timeout,
};
