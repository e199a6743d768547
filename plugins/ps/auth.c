/* CURVE keys, the ZAP handler and the connection cap of a parameter server (auth.h). */
#include "auth.h"

#include <ksdist/ksdist.h>

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <zmq.h>

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_DOMAIN "ksdist-ps"
#define PLAIN_USER "worker"

gboolean
ps_auth_available (const char *who, GError **error)
{
  if (zmq_has ("curve"))
    return TRUE;
  g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED,
               "%s: this libzmq was built without CURVE (zmq_has(\"curve\") is 0), and the "
               "parameter servers admit only workers that prove the job's token with it: "
               "install a libzmq with libsodium or its own tweetnacl (Debian's libzmq5 has "
               "it)", who);
  return FALSE;
}

void
ps_auth_keypair (const char *token, const char *role, char public_key[41], char secret_key[41])
{
  static const char label[] = "ksdist parameter-server CURVE key v1";
  guint8 secret[32];
  gsize len = sizeof secret;
  g_autoptr (GChecksum) c = g_checksum_new (G_CHECKSUM_SHA256);

  /* the label, the role and the token, each with its NUL: no two inputs run together */
  g_checksum_update (c, (const guchar *) label, sizeof label);
  g_checksum_update (c, (const guchar *) role, strlen (role) + 1);
  g_checksum_update (c, (const guchar *) (token != NULL ? token : ""),
                     token != NULL ? strlen (token) : 0);
  g_checksum_get_digest (c, secret, &len);
  zmq_z85_encode (secret_key, secret, sizeof secret);
  zmq_curve_public (public_key, secret_key);
  memset (secret, 0, sizeof secret);
}

void
ps_auth_say_worker_security (int worker, gboolean unencrypted)
{
  if (unencrypted)
    g_message ("worker %d: its traffic with the servers is %s", worker, PS_UNENCRYPTED_NOTE);
}

void
ps_auth_password (const char *token, char password[65])
{
  static const char label[] = "ksdist parameter-server PLAIN password v1";
  g_autoptr (GChecksum) c = g_checksum_new (G_CHECKSUM_SHA256);

  /* not the token itself: a password seen on the wire admits to this job only */
  g_checksum_update (c, (const guchar *) label, sizeof label);
  g_checksum_update (c, (const guchar *) (token != NULL ? token : ""),
                     token != NULL ? strlen (token) : 0);
  g_strlcpy (password, g_checksum_get_string (c), 65);
}

/* The unencrypted client: ZeroMQ's PLAIN mechanism, the workers' password. */
static gboolean
plain_client_socket (void *socket, const char *token, const char *who, GError **error)
{
  char password[65];
  gint64 max = PS_FRAME_MAX_WIRE;

  ps_auth_password (token, password);
  gboolean ok = zmq_setsockopt (socket, ZMQ_PLAIN_USERNAME, PLAIN_USER, strlen (PLAIN_USER)) == 0
                && zmq_setsockopt (socket, ZMQ_PLAIN_PASSWORD, password, 64) == 0
                && zmq_setsockopt (socket, ZMQ_MAXMSGSIZE, &max, sizeof max) == 0;
  memset (password, 0, sizeof password);
  if (!ok)
    g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
                 "%s: libzmq refused the PLAIN credentials: %s", who, zmq_strerror (errno));
  return ok;
}

gboolean
ps_auth_client_socket (void *socket, const char *token, const char *who, gboolean unencrypted,
                       GError **error)
{
  char server_public[41], server_secret[41], public_key[41], secret_key[41];
  gint64 max = PS_FRAME_MAX_WIRE;

  if (unencrypted)
    return plain_client_socket (socket, token, who, error);
  if (!ps_auth_available (who, error))
    return FALSE;
  ps_auth_keypair (token, "server", server_public, server_secret);
  ps_auth_keypair (token, "worker", public_key, secret_key);
  if (zmq_setsockopt (socket, ZMQ_CURVE_SERVERKEY, server_public, 41) != 0
      || zmq_setsockopt (socket, ZMQ_CURVE_PUBLICKEY, public_key, 41) != 0
      || zmq_setsockopt (socket, ZMQ_CURVE_SECRETKEY, secret_key, 41) != 0
      || zmq_setsockopt (socket, ZMQ_MAXMSGSIZE, &max, sizeof max) != 0)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
                   "%s: libzmq refused the CURVE keys: %s", who, zmq_strerror (errno));
      return FALSE;
    }
  memset (server_secret, 0, sizeof server_secret);
  memset (secret_key, 0, sizeof secret_key);
  return TRUE;
}

int
ps_auth_connection_cap (int workers)
{
  struct rlimit r;
  int nofile = 1024;

  if (getrlimit (RLIMIT_NOFILE, &r) == 0)
    nofile = r.rlim_cur == RLIM_INFINITY ? 1 << 20 : (int) MIN (r.rlim_cur, (rlim_t) 1 << 20);
  /* half the descriptors at most, and 64 always left for files, logs and the store */
  int most = MIN (nofile / 2, nofile - 64);
  return MAX (MIN (4 * workers + 32, most), MIN (workers + 4, nofile - 16));
}

struct PsAuth {
  char *who;
  void *zap, *monitor;
  guint8 worker_key[32];
  char password[65]; /* unencrypted: the workers' PLAIN password; else empty */
  gboolean unencrypted;
  int cap, port;
  GHashTable *fds; /* of the connections counted */
  GThread *thread;
  gint stop;
  gint admitted; /* atomic: a key of the job's workers came */
  guint64 refused_keys, refused_connections, failed_handshakes; /* the thread's */
  gint refused; /* atomic: refused_keys + failed_handshakes, up to G_MAXINT */
};

/* A bounded number of lines: the first ten of a kind, then every thousandth. */
static gboolean
worth_a_line (guint64 count)
{
  return count <= 10 || count % 1000 == 0;
}

/* One more connection refused or failed, for ps_auth_admitted_any (the thread's only). */
static void
note_refused (PsAuth *a)
{
  if (g_atomic_int_get (&a->refused) < G_MAXINT)
    g_atomic_int_inc (&a->refused);
}

/* Whether frame `m` holds the `len` bytes `want`, compared in constant time. */
static gboolean
frame_equals (zmq_msg_t *m, const void *want, gsize len)
{
  guint8 diff = 0;
  const guint8 *got = zmq_msg_data (m), *w = want;
  if (zmq_msg_size (m) != len)
    return FALSE;
  for (gsize i = 0; i < len; i++)
    diff |= got[i] ^ w[i];
  return diff == 0;
}

/* Answers one ZAP request: 200 for the workers' key (CURVE) or password (PLAIN, when
 * the job's traffic is unencrypted), 400 for any other. */
static void
zap_answer (PsAuth *a)
{
  zmq_msg_t part[8];
  int n = 0, more = 1;
  size_t more_len = sizeof more;

  while (more)
    {
      zmq_msg_t extra, *m = n < 8 ? &part[n] : &extra; /* frames past 8 are dropped */
      zmq_msg_init (m);
      if (zmq_msg_recv (m, a->zap, 0) < 0)
        {
          zmq_msg_close (m);
          break;
        }
      zmq_getsockopt (a->zap, ZMQ_RCVMORE, &more, &more_len);
      if (n < 8)
        n++;
      else
        zmq_msg_close (m);
    }
  /* version, request id, domain, address, identity, mechanism, credentials (CURVE: the
   * key; PLAIN: user and password; anything short is refused, and a REP socket must
   * answer every request) */
  g_autofree char *address = n >= 4 ? g_strndup (zmq_msg_data (&part[3]), zmq_msg_size (&part[3]))
                                    : g_strdup ("?");
  const char *mechanism = a->unencrypted ? "PLAIN" : "CURVE";
  gboolean job_mechanism = n >= 6 && frame_equals (&part[5], mechanism, 5);
  gboolean ok;
  if (!job_mechanism)
    ok = FALSE;
  else if (a->unencrypted)
    ok = n >= 8 && frame_equals (&part[6], PLAIN_USER, strlen (PLAIN_USER))
         && frame_equals (&part[7], a->password, 64);
  else
    ok = n >= 7 && frame_equals (&part[6], a->worker_key, 32);
  if (ok)
    g_atomic_int_set (&a->admitted, 1);
  else
    note_refused (a);
  if (!ok && worth_a_line (++a->refused_keys))
    g_warning ("%s: refused a connection from %s (%" G_GUINT64_FORMAT " so far): its %s is "
               "not this job's workers' (derived from KS_STORE_TOKEN): a process of another "
               "job, or without this job's token", a->who, address, a->refused_keys,
               !job_mechanism  ? "security mechanism"
               : a->unencrypted ? "PLAIN password"
                                : "CURVE key");
  zmq_send (a->zap, "1.0", 3, ZMQ_SNDMORE);
  if (n >= 2)
    zmq_send (a->zap, zmq_msg_data (&part[1]), zmq_msg_size (&part[1]), ZMQ_SNDMORE);
  else
    zmq_send (a->zap, "", 0, ZMQ_SNDMORE);
  zmq_send (a->zap, ok ? "200" : "400", 3, ZMQ_SNDMORE);
  zmq_send (a->zap, ok ? "OK" : "not this job's worker", ok ? 2 : 21, ZMQ_SNDMORE);
  zmq_send (a->zap, ok ? "worker" : "", ok ? 6 : 0, ZMQ_SNDMORE);
  zmq_send (a->zap, "", 0, 0);
  for (int i = 0; i < n; i++)
    zmq_msg_close (&part[i]);
}

/* Whether `fd` is still a connection accepted on this server's port (not a descriptor
 * that was closed and reused meanwhile). */
static gboolean
ours (PsAuth *a, int fd)
{
  struct sockaddr_storage s;
  socklen_t len = sizeof s;
  if (getsockname (fd, (struct sockaddr *) &s, &len) != 0)
    return FALSE;
  if (s.ss_family == AF_INET)
    return ntohs (((struct sockaddr_in *) &s)->sin_port) == a->port;
  if (s.ss_family == AF_INET6)
    return ntohs (((struct sockaddr_in6 *) &s)->sin6_port) == a->port;
  return FALSE;
}

/* Counts connections from the socket's events; one beyond the cap is shut down. */
static void
monitor_event (PsAuth *a)
{
  zmq_msg_t head, address;
  zmq_msg_init (&head);
  zmq_msg_init (&address);
  if (zmq_msg_recv (&head, a->monitor, 0) < 0)
    {
      zmq_msg_close (&head);
      zmq_msg_close (&address);
      return;
    }
  zmq_msg_recv (&address, a->monitor, 0);
  if (zmq_msg_size (&head) >= 6)
    {
      guint16 event;
      guint32 value;
      memcpy (&event, zmq_msg_data (&head), 2);
      memcpy (&value, (char *) zmq_msg_data (&head) + 2, 4);
      int fd = (int) value;
      if (event == ZMQ_EVENT_ACCEPTED)
        {
          if ((int) g_hash_table_size (a->fds) < a->cap)
            g_hash_table_add (a->fds, GINT_TO_POINTER (fd + 1));
          else if (ours (a, fd))
            {
              shutdown (fd, SHUT_RDWR);
              if (worth_a_line (++a->refused_connections))
                {
                  g_autofree char *from = g_strndup (zmq_msg_data (&address), zmq_msg_size (&address));
                  g_warning ("%s: refused a connection (%" G_GUINT64_FORMAT " so far): %d are "
                             "open, the most this server keeps (its workers and spare, "
                             "below RLIMIT_NOFILE): something opens connections and leaves "
                             "them idle; a worker refused so retries", a->who,
                             a->refused_connections, a->cap);
                }
            }
        }
      else if (event == ZMQ_EVENT_DISCONNECTED)
        g_hash_table_remove (a->fds, GINT_TO_POINTER (fd + 1));
      else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
               || event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        {
          note_refused (a);
          if (worth_a_line (++a->failed_handshakes))
            {
              const char *why;
              if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
                why = "it was silent for [comm] timeout, closed, or sent what is not ZeroMQ";
              else if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
                why = a->unencrypted ? "not PLAIN (this job's encryption = off): a client "
                                       "without this job's token, or of another setting"
                                     : "not CURVE: a client without this job's token, or of "
                                       "an older ksdist or encryption = off";
              else if (value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
                why = "its CURVE box does not open: keys of another token, or replayed bytes";
              else
                why = "a ZeroMQ protocol error: not a worker of this job";
              g_warning ("%s: a connection failed its handshake (%" G_GUINT64_FORMAT " so "
                         "far; protocol code 0x%x): %s", a->who, a->failed_handshakes, value,
                         why);
            }
        }
    }
  zmq_msg_close (&head);
  zmq_msg_close (&address);
}

static gpointer
auth_thread (gpointer data)
{
  PsAuth *a = data;
  while (!g_atomic_int_get (&a->stop))
    {
      zmq_pollitem_t items[2] = { { a->zap, 0, ZMQ_POLLIN, 0 }, { a->monitor, 0, ZMQ_POLLIN, 0 } };
      if (zmq_poll (items, 2, 100) < 0)
        {
          if (errno == ETERM)
            break;
          continue;
        }
      if (items[0].revents & ZMQ_POLLIN)
        zap_answer (a);
      if (items[1].revents & ZMQ_POLLIN)
        monitor_event (a);
    }
  return NULL;
}

PsAuth *
ps_auth_server_new (void *zctx, void *socket, const char *token, const char *who, int port,
                    int handshake_ms, int cap, gboolean unencrypted, GError **error)
{
  char public_key[41], secret_key[41], worker_public[41], worker_secret[41];
  int one = 1, linger = 0;
  gint64 max = PS_FRAME_MAX_WIRE;
  g_autofree char *inproc = NULL;

  if (!unencrypted && !ps_auth_available (who, error))
    return NULL;
  PsAuth *a = g_new0 (PsAuth, 1);
  a->who = g_strdup (who);
  a->cap = cap;
  a->fds = g_hash_table_new (NULL, NULL);
  a->port = port;
  a->unencrypted = unencrypted;
  ps_auth_keypair (token, "server", public_key, secret_key);
  ps_auth_keypair (token, "worker", worker_public, worker_secret);
  zmq_z85_decode (a->worker_key, worker_public);
  memset (worker_secret, 0, sizeof worker_secret);
  if (unencrypted)
    ps_auth_password (token, a->password);

  /* the ZAP handler first, and closed only after the socket: a CURVE server without one
   * admits every key (ZMQ_ZAP_ENFORCE_DOMAIN, which refuses instead, is a draft option
   * that Debian's libzmq lacks) */
  a->zap = zmq_socket (zctx, ZMQ_REP);
  zmq_setsockopt (a->zap, ZMQ_LINGER, &linger, sizeof linger);
  if (zmq_bind (a->zap, ZAP_ENDPOINT) != 0)
    goto failed;
  if ((unencrypted ? zmq_setsockopt (socket, ZMQ_PLAIN_SERVER, &one, sizeof one) != 0
                   : zmq_setsockopt (socket, ZMQ_CURVE_SERVER, &one, sizeof one) != 0
                         || zmq_setsockopt (socket, ZMQ_CURVE_SECRETKEY, secret_key, 41) != 0)
      || zmq_setsockopt (socket, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen (ZAP_DOMAIN)) != 0
      || zmq_setsockopt (socket, ZMQ_HANDSHAKE_IVL, &handshake_ms, sizeof handshake_ms) != 0
      || zmq_setsockopt (socket, ZMQ_MAXMSGSIZE, &max, sizeof max) != 0)
    goto failed;
  memset (secret_key, 0, sizeof secret_key);
  inproc = g_strdup_printf ("inproc://ps-monitor-%p", (void *) a);
  if (zmq_socket_monitor (socket, inproc, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED
                                                | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                                                | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0)
    goto failed;
  a->monitor = zmq_socket (zctx, ZMQ_PAIR);
  zmq_setsockopt (a->monitor, ZMQ_LINGER, &linger, sizeof linger);
  if (zmq_connect (a->monitor, inproc) != 0)
    goto failed;
  a->thread = g_thread_new ("ps-auth", auth_thread, a);
  return a;

failed:
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
               "%s: cannot set up %s authentication: %s", who, unencrypted ? "PLAIN" : "CURVE",
               zmq_strerror (errno));
  ps_auth_free (a);
  return NULL;
}

gboolean
ps_auth_admitted_any (PsAuth *a, guint64 *refused)
{
  *refused = (guint64) g_atomic_int_get (&a->refused);
  return g_atomic_int_get (&a->admitted) != 0;
}

void
ps_auth_free (PsAuth *a)
{
  if (a == NULL)
    return;
  if (a->thread != NULL)
    {
      g_atomic_int_set (&a->stop, 1);
      g_thread_join (a->thread);
    }
  if (a->refused_keys + a->refused_connections + a->failed_handshakes > 0)
    g_message ("%s: refused %" G_GUINT64_FORMAT " connections of keys not the job's, %"
               G_GUINT64_FORMAT " beyond its cap of %d, and %" G_GUINT64_FORMAT " failed "
               "their handshake", a->who, a->refused_keys, a->refused_connections, a->cap,
               a->failed_handshakes);
  if (a->monitor != NULL)
    zmq_close (a->monitor);
  if (a->zap != NULL)
    zmq_close (a->zap);
  g_hash_table_unref (a->fds);
  memset (a->password, 0, sizeof a->password);
  g_free (a->who);
  g_free (a);
}

struct PsAuthWatch {
  void *monitor;
  const char *failure;
};

PsAuthWatch *
ps_auth_watch_new (void *zctx, void *socket)
{
  PsAuthWatch *w = g_new0 (PsAuthWatch, 1);
  g_autofree char *inproc = g_strdup_printf ("inproc://ps-watch-%p", (void *) w);
  int linger = 0;

  if (zmq_socket_monitor (socket, inproc, ZMQ_EVENT_HANDSHAKE_SUCCEEDED
                                              | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                                              | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                                              | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) == 0)
    {
      w->monitor = zmq_socket (zctx, ZMQ_PAIR);
      zmq_setsockopt (w->monitor, ZMQ_LINGER, &linger, sizeof linger);
      if (zmq_connect (w->monitor, inproc) != 0)
        g_clear_pointer (&w->monitor, zmq_close);
    }
  return w;
}

const char *
ps_auth_watch_failure (PsAuthWatch *w)
{
  while (w->monitor != NULL)
    {
      guint8 head[6];
      char address[256];
      guint16 event;
      guint32 value;
      if (zmq_recv (w->monitor, head, sizeof head, ZMQ_DONTWAIT) < (int) sizeof head)
        break;
      zmq_recv (w->monitor, address, sizeof address, 0);
      memcpy (&event, head, 2);
      memcpy (&value, head + 2, 4);
      if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
        w->failure = NULL;
      else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        w->failure = "the server refused this worker's key or password: KS_STORE_TOKEN "
                     "differs between this worker and the server; start every process of the "
                     "job with the same one";
      else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
               && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
        w->failure = "the server's security mechanism is not this worker's: `encryption` "
                     "([transpiler] or [pslib]) differs between them, or a ksdist of another "
                     "version, or not a ksdist parameter server, listens there";
      else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
               && value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
        w->failure = "the server's CURVE key is not this job's: KS_STORE_TOKEN differs "
                     "between this worker and the server; start every process of the job "
                     "with the same one";
      else if (event != ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL || w->failure == NULL)
        w->failure = "the handshake with the server failed: are KS_STORE_TOKEN and "
                     "`encryption` the same in every process of the job, and is a ksdist of "
                     "this version listening there?";
    }
  return w->failure;
}

void
ps_auth_watch_free (PsAuthWatch *w)
{
  if (w == NULL)
    return;
  if (w->monitor != NULL)
    zmq_close (w->monitor);
  g_free (w);
}
