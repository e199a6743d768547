/* The TCP store's server: one thread accepts, one thread per client connection serves
 * its requests in order. Values live in one table under one lock; a change wakes every
 * request waiting for a key. A client must first say hello with the job's token; one
 * that does not, or sends anything malformed, is logged and disconnected, and the
 * server goes on serving the others. */
#include <config.h>
#include <ksdist/ksdist.h>

#include "tcp.h"
#include "wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_WAIT_MS (24 * 3600 * 1000) /* longer waits are cut to a day */
/* Before its hello a client is a stranger: it gets little room and little time */
#define HELLO_MAX_FRAME 4096
#define HELLO_DEADLINE_MS 5000
#define MAX_STRANGERS 32     /* connections without a hello yet */
#define MAX_CONNECTIONS 1024 /* in all: a thread each */

struct TcpServer {
  int listen_fd;
  char *token;
  GThread *acceptor;
  GMutex lock;
  GCond changed;           /* a value changed, a connection ended, or stop began */
  GHashTable *values;      /* "prefix\nkey" -> GBytes */
  GHashTable *connections; /* Connection * -> itself */
  guint strangers;         /* of them, without a hello yet */
  guint64 refused;         /* clients disconnected or turned away */
  gboolean stopping;
};

typedef struct {
  TcpServer *server;
  int fd;
  char *peer;   /* host:port, for the log */
  char *prefix; /* the job this client belongs to, after its hello */
} Connection;

static char *
describe_peer (const struct sockaddr_storage *addr, socklen_t len)
{
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo ((const struct sockaddr *) addr, len, host, sizeof host, port, sizeof port,
                   NI_NUMERICHOST | NI_NUMERICSERV)
      != 0)
    return g_strdup ("an unknown address");
  return g_strdup_printf ("%s:%s", host, port);
}

/* The table's key of a client's key, or NULL for a key with a NUL byte (it would alias
 * the shorter key). */
static char *
full_key (Connection *c, const char *key, gsize key_len)
{
  if (memchr (key, '\0', key_len) != NULL)
    return NULL;
  return g_strdup_printf ("%s\n%.*s", c->prefix, (int) key_len, key);
}

/* Logs a refused client: each of the first ten, then every hundredth, with the count (a
 * flood of strangers must not flood the log). Lock held. */
static void
log_refused (TcpServer *s, const char *peer, const char *why)
{
  s->refused++;
  if (s->refused <= 10 || s->refused % 100 == 0)
    g_warning ("tcp store: disconnected the client at %s: %s (%" G_GUINT64_FORMAT " refused so "
               "far)", peer, why, s->refused);
}

static gint64
deadline_after (guint32 timeout_ms)
{
  return g_get_monotonic_time () + (gint64) MIN (timeout_ms, MAX_WAIT_MS) * 1000;
}

/* Waits (lock held) until `key` is set, the deadline passes, or the server stops. */
static GBytes *
wait_for (TcpServer *s, const char *key, gint64 deadline)
{
  GBytes *value;
  while ((value = g_hash_table_lookup (s->values, key)) == NULL && !s->stopping)
    if (!g_cond_wait_until (&s->changed, &s->lock, deadline))
      return g_hash_table_lookup (s->values, key);
  return value;
}

static void
reply_status (GByteArray *out, WireStatus status)
{
  wire_put_u8 (out, (guint8) status);
}

/* Serves one request into `out`; FALSE (with *why) when the request is malformed. */
static gboolean
serve_request (Connection *c, WireReader *r, GByteArray *out, char **why)
{
  TcpServer *s = c->server;
  const guint8 *key, *value;
  guint32 key_len, value_len, timeout_ms, n;
  guint8 op;
  gint64 delta;

  if (!wire_get_u8 (r, &op))
    goto malformed;
  switch (op)
    {
    case OP_SET:
      {
        if (!wire_get_bytes (r, &key, &key_len) || !wire_get_bytes (r, &value, &value_len))
          goto malformed;
        char *k = full_key (c, (const char *) key, key_len);
        if (k == NULL)
          goto nul_key;
        g_mutex_lock (&s->lock);
        g_hash_table_replace (s->values, k, g_bytes_new (value, value_len));
        g_cond_broadcast (&s->changed);
        g_mutex_unlock (&s->lock);
        reply_status (out, REPLY_OK);
        return TRUE;
      }
    case OP_GET:
      {
        if (!wire_get_bytes (r, &key, &key_len) || !wire_get_u32 (r, &timeout_ms))
          goto malformed;
        g_autofree char *k = full_key (c, (const char *) key, key_len);
        if (k == NULL)
          goto nul_key;
        g_mutex_lock (&s->lock);
        GBytes *found = wait_for (s, k, deadline_after (timeout_ms));
        if (found != NULL)
          {
            gsize len;
            const void *data = g_bytes_get_data (found, &len);
            reply_status (out, REPLY_OK);
            wire_put_bytes (out, data, len);
          }
        else
          reply_status (out, REPLY_TIMEOUT);
        g_mutex_unlock (&s->lock);
        return TRUE;
      }
    case OP_WAIT:
      {
        if (!wire_get_u32 (r, &timeout_ms) || !wire_get_u32 (r, &n) || n > r->left / 4)
          goto malformed;
        g_autoptr (GPtrArray) keys = g_ptr_array_new_with_free_func (g_free);
        for (guint32 i = 0; i < n; i++)
          {
            if (!wire_get_bytes (r, &key, &key_len))
              goto malformed;
            char *k = full_key (c, (const char *) key, key_len);
            if (k == NULL)
              goto nul_key;
            g_ptr_array_add (keys, k);
          }
        gint64 deadline = deadline_after (timeout_ms);
        g_autoptr (GString) missing = g_string_new (NULL);
        g_mutex_lock (&s->lock);
        for (guint i = 0; i < keys->len; i++)
          if (wait_for (s, keys->pdata[i], deadline) == NULL)
            g_string_append_printf (missing, "%s'%s'", missing->len ? ", " : "",
                                    (char *) keys->pdata[i] + strlen (c->prefix) + 1);
        g_mutex_unlock (&s->lock);
        reply_status (out, missing->len ? REPLY_TIMEOUT : REPLY_OK);
        wire_put_string (out, missing->str);
        return TRUE;
      }
    case OP_ADD:
      {
        if (!wire_get_bytes (r, &key, &key_len) || !wire_get_i64 (r, &delta))
          goto malformed;
        char *k = full_key (c, (const char *) key, key_len);
        gint64 counter = 0;
        gboolean ok = TRUE;
        if (k == NULL)
          goto nul_key;
        g_mutex_lock (&s->lock);
        GBytes *old = g_hash_table_lookup (s->values, k);
        if (old != NULL)
          {
            g_autofree char *text = g_strndup (g_bytes_get_data (old, NULL), g_bytes_get_size (old));
            ok = g_ascii_string_to_signed (text, 10, G_MININT64, G_MAXINT64, &counter, NULL);
          }
        if (ok && (delta > 0 ? counter > G_MAXINT64 - delta : counter < G_MININT64 - delta))
          {
            g_autofree char *message = g_strdup_printf ("counter '%.*s' would overflow (%"
                                                        G_GINT64_FORMAT " + %" G_GINT64_FORMAT ")",
                                                        (int) key_len, key, counter, delta);
            reply_status (out, REPLY_ERROR);
            wire_put_string (out, message);
            g_free (k);
          }
        else if (ok)
          {
            counter += delta;
            char *text = g_strdup_printf ("%" G_GINT64_FORMAT, counter);
            g_hash_table_replace (s->values, k, g_bytes_new_take (text, strlen (text)));
            g_cond_broadcast (&s->changed);
            reply_status (out, REPLY_OK);
            wire_put_i64 (out, counter);
          }
        else
          {
            g_autofree char *message = g_strdup_printf ("key '%.*s' is not a counter",
                                                        (int) key_len, key);
            reply_status (out, REPLY_ERROR);
            wire_put_string (out, message);
            g_free (k);
          }
        g_mutex_unlock (&s->lock);
        return TRUE;
      }
    case OP_REMOVE:
      {
        if (!wire_get_bytes (r, &key, &key_len))
          goto malformed;
        g_autofree char *k = full_key (c, (const char *) key, key_len);
        if (k == NULL)
          goto nul_key;
        g_mutex_lock (&s->lock);
        g_hash_table_remove (s->values, k);
        g_mutex_unlock (&s->lock);
        reply_status (out, REPLY_OK);
        return TRUE;
      }
    default:
      *why = g_strdup_printf ("unknown request %u", op);
      return FALSE;
    }
malformed:
  *why = g_strdup_printf ("a malformed request (op %u)", op);
  return FALSE;
nul_key:
  *why = g_strdup_printf ("a key with a NUL byte (op %u)", op);
  return FALSE;
}

/* The hello: FALSE (with *why, and an error reply sent) when the client may not stay. */
static gboolean
check_hello (Connection *c, WireReader *r, char **why)
{
  g_autofree char *magic = NULL, *token = NULL, *prefix = NULL;
  guint8 op = 0;
  g_autoptr (GByteArray) out = g_byte_array_new ();

  if (!wire_get_u8 (r, &op) || op != OP_HELLO || !wire_get_string (r, &magic)
      || strcmp (magic, WIRE_MAGIC) != 0 || !wire_get_string (r, &token)
      || !wire_get_string (r, &prefix))
    *why = g_strdup ("refused: it did not begin with a ksdist store hello");
  else if (!wire_equal_secret (token, c->server->token))
    *why = g_strdup ("refused: wrong token");
  else
    {
      c->prefix = g_steal_pointer (&prefix);
      reply_status (out, REPLY_OK);
      return wire_send (c->fd, out, -1);
    }
  reply_status (out, REPLY_ERROR);
  wire_put_string (out, *why);
  wire_send (c->fd, out, -1);
  return FALSE;
}

static gpointer
serve_connection (gpointer data)
{
  Connection *c = data;
  TcpServer *s = c->server;
  g_autofree char *why = NULL;

  gint64 hello_deadline = g_get_monotonic_time () + HELLO_DEADLINE_MS * 1000;
  for (;;)
    {
      g_autoptr (GByteArray) body = NULL;
      g_autoptr (GByteArray) out = g_byte_array_new ();
      gboolean stranger = c->prefix == NULL;
      /* a stranger gets a small frame and a few seconds for its hello */
      int status = stranger ? wire_receive_limited (c->fd, hello_deadline, HELLO_MAX_FRAME, &body,
                                                    &why)
                            : wire_receive (c->fd, -1, &body, &why);
      if (status <= 0)
        {
          if (status == 0 && stranger)
            why = g_strdup ("it closed the connection without a hello");
          break;
        }
      WireReader r = { body->data, body->len };
      if (stranger ? !check_hello (c, &r, &why)
                   : !serve_request (c, &r, out, &why) || !wire_send (c->fd, out, -1))
        break;
      if (stranger)
        {
          g_mutex_lock (&s->lock);
          s->strangers--;
          g_mutex_unlock (&s->lock);
        }
    }
  g_mutex_lock (&s->lock);
  if (c->prefix == NULL)
    s->strangers--;
  if (why != NULL && !s->stopping)
    log_refused (s, c->peer, why);
  g_hash_table_remove (s->connections, c);
  close (c->fd);
  g_free (c->peer);
  g_free (c->prefix);
  g_free (c);
  g_cond_broadcast (&s->changed);
  g_mutex_unlock (&s->lock);
  return NULL;
}

static gpointer
accept_clients (gpointer data)
{
  TcpServer *s = data;
  for (;;)
    {
      struct sockaddr_storage addr;
      socklen_t len = sizeof addr;
      int fd = accept (s->listen_fd, (struct sockaddr *) &addr, &len);
      if (fd >= 0)
        {
          int one = 1;
          fcntl (fd, F_SETFD, FD_CLOEXEC); /* the launcher's workers must not inherit it */
          setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
      if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
        continue;
      g_mutex_lock (&s->lock);
      if (fd < 0 || s->stopping)
        {
          if (fd >= 0)
            close (fd);
          else if (!s->stopping)
            g_warning ("tcp store: stopped accepting clients: %s", g_strerror (errno));
          g_mutex_unlock (&s->lock);
          return NULL;
        }
      if (s->strangers >= MAX_STRANGERS || g_hash_table_size (s->connections) >= MAX_CONNECTIONS)
        {
          g_autofree char *peer = describe_peer (&addr, len);
          log_refused (s, peer, s->strangers >= MAX_STRANGERS
                                    ? "turned away: " G_STRINGIFY (MAX_STRANGERS) " clients "
                                      "are already waiting to say hello"
                                    : "turned away: " G_STRINGIFY (MAX_CONNECTIONS)
                                      " clients are connected");
          close (fd);
          g_mutex_unlock (&s->lock);
          continue;
        }
      Connection *c = g_new0 (Connection, 1);
      c->server = s;
      c->fd = fd;
      c->peer = describe_peer (&addr, len);
      g_hash_table_add (s->connections, c);
      s->strangers++;
      g_mutex_unlock (&s->lock);
      g_thread_unref (g_thread_new ("ks-store-client", serve_connection, c));
    }
}

/* A listening socket on host:port; the error names the address. */
static int
listen_on (const char *address, char **bound, GError **error)
{
  g_autofree char *host = NULL;
  guint16 port;
  struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                            .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
  struct addrinfo *found = NULL;
  int fd = -1, err = 0;

  if (!wire_parse_address (address, &host, &port, error))
    return -1;
  g_autofree char *service = g_strdup_printf ("%u", port);
  if ((err = getaddrinfo (host, service, &hints, &found)) != 0)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "tcp store: cannot resolve '%s' to listen on: %s", host, gai_strerror (err));
      return -1;
    }
  for (struct addrinfo *a = found; a != NULL && fd < 0; a = a->ai_next)
    {
      int one = 1;
      fd = socket (a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0)
        continue;
      setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (bind (fd, a->ai_addr, a->ai_addrlen) != 0 || listen (fd, 1024) != 0)
        {
          err = errno;
          close (fd);
          fd = -1;
        }
    }
  freeaddrinfo (found);
  if (fd < 0)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
                   "tcp store: cannot listen on %s: %s; choose another port or address",
                   address, g_strerror (err));
      return -1;
    }
  struct sockaddr_storage addr;
  socklen_t len = sizeof addr;
  getsockname (fd, (struct sockaddr *) &addr, &len);
  *bound = describe_peer (&addr, len);
  if (addr.ss_family == AF_INET6)
    {
      char *colon = strrchr (*bound, ':');
      char *v6 = g_strdup_printf ("[%.*s]%s", (int) (colon - *bound), *bound, colon);
      g_free (*bound);
      *bound = v6;
    }
  return fd;
}

TcpServer *
ks_tcp_server_start (const char *address, const char *token, char **bound, GError **error)
{
  TcpServer *s;
  int fd;

  if (token == NULL || *token == '\0')
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "tcp store: no token to serve with: clients are admitted only with the "
                   "job's token (KS_STORE_TOKEN)");
      return NULL;
    }
  if ((fd = listen_on (address, bound, error)) < 0)
    return NULL;
  s = g_new0 (TcpServer, 1);
  s->listen_fd = fd;
  s->token = g_strdup (token);
  g_mutex_init (&s->lock);
  g_cond_init (&s->changed);
  s->values = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                     (GDestroyNotify) g_bytes_unref);
  s->connections = g_hash_table_new (NULL, NULL);
  s->acceptor = g_thread_new ("ks-store-accept", accept_clients, s);
  return s;
}

void
ks_tcp_server_stop (TcpServer *s)
{
  GHashTableIter it;
  gpointer c;

  if (s == NULL)
    return;
  g_mutex_lock (&s->lock);
  s->stopping = TRUE;
  shutdown (s->listen_fd, SHUT_RDWR); /* wakes accept() */
  g_hash_table_iter_init (&it, s->connections);
  while (g_hash_table_iter_next (&it, &c, NULL))
    shutdown (((Connection *) c)->fd, SHUT_RDWR);
  g_cond_broadcast (&s->changed);
  g_mutex_unlock (&s->lock);
  g_thread_join (s->acceptor);

  g_mutex_lock (&s->lock);
  while (g_hash_table_size (s->connections) > 0)
    g_cond_wait (&s->changed, &s->lock);
  g_mutex_unlock (&s->lock);
  close (s->listen_fd);
  g_hash_table_unref (s->values);
  g_hash_table_unref (s->connections);
  g_mutex_clear (&s->lock);
  g_cond_clear (&s->changed);
  g_free (s->token);
  g_free (s);
}
