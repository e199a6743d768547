/* The TCP store over 127.0.0.1: values, counters and waits between clients; jobs kept
 * apart by prefix; a client without the token refused and logged; malformed and
 * truncated requests logged and cut off while the server goes on serving; a server that
 * is not there is named. The store kinds the trainer asks for are implementations the
 * store plugin has, each working at its kind of address. */
#include "testutil.h"

#include <arpa/inet.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TOKEN "job-token-1234"

typedef struct {
  KsConfig *config;
  KsRegistry *registry;
  KsStore *server;
  char *address;
} Fixture;

/* The warnings the server logs, kept for the tests to read. */
static GMutex log_lock;
static GString *logged;

static void
keep_log (const char *domain, GLogLevelFlags level, const char *message, gpointer data)
{
  g_mutex_lock (&log_lock);
  g_string_append_printf (logged, "%s\n", message);
  g_mutex_unlock (&log_lock);
}

/* Waits up to 5 s for the log to mention `text` (the server logs from its own thread). */
static gboolean
log_mentions (const char *text)
{
  for (int i = 0; i < 500; i++)
    {
      g_mutex_lock (&log_lock);
      gboolean found = strstr (logged->str, text) != NULL;
      g_mutex_unlock (&log_lock);
      if (found)
        return TRUE;
      g_usleep (10 * 1000);
    }
  return FALSE;
}

static void
setup (Fixture *f, gconstpointer data)
{
  g_autofree char *dir = ks_test_build_plugin_dir ("store");
  g_autoptr (GError) error = NULL;

  f->config = ks_config_new ();
  g_assert_true (ks_config_set_override (f->config, "store.connect_timeout_ms=400", NULL));
  f->registry = ks_test_scan (f->config, dir);
  f->server = ks_store_new (f->registry, f->config, ks_store_kind_name (KS_STORE_KIND_SERVED),
                           &error);
  g_assert_no_error (error);
  g_assert_true (ks_store_serve (f->server, "127.0.0.1:0", TOKEN, &f->address, &error));
  g_assert_no_error (error);
  g_assert_true (g_str_has_prefix (f->address, "127.0.0.1:"));
  g_mutex_lock (&log_lock);
  g_string_truncate (logged, 0);
  g_mutex_unlock (&log_lock);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  ks_store_free (f->server);
  ks_registry_free (f->registry);
  ks_config_free (f->config);
  g_free (f->address);
}

static KsStore *
client (Fixture *f, const char *prefix, const char *token, GError **error)
{
  KsStore *store = ks_store_new (f->registry, f->config, "tcp", error);
  g_assert_nonnull (store);
  if (!ks_store_open (store, f->address, prefix, token, error))
    g_clear_pointer (&store, ks_store_free);
  return store;
}

typedef struct {
  KsStore *store;
  const char *key, *value;
} LateSet;

static gpointer
set_later (gpointer data)
{
  LateSet *s = data;
  g_usleep (100 * 1000);
  g_assert_true (ks_store_set (s->store, s->key, s->value, strlen (s->value), NULL));
  return NULL;
}

static void
test_values (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsStore) a = client (f, "job", TOKEN, &error);
  g_autoptr (KsStore) b = client (f, "job", TOKEN, &error);
  g_autoptr (KsStore) other = client (f, "other-job", TOKEN, &error);
  g_autofree char *value = NULL;
  gsize len;
  gint64 count = 0;

  g_assert_no_error (error);
  /* a value set by one client, read by another, binary-safe */
  g_assert_true (ks_store_set (a, "addr/0", "x\0y", 3, &error));
  g_assert_true (ks_store_get (b, "addr/0", 1000, (void **) &value, &len, &error));
  g_assert_cmpmem (value, len, "x\0y", 3);
  /* a get waits for a value set later by another client */
  LateSet late = { a, "late", "here" };
  GThread *thread = g_thread_new ("set", set_later, &late);
  g_clear_pointer (&value, g_free);
  g_assert_true (ks_store_get (b, "late", 5000, (void **) &value, &len, &error));
  g_assert_cmpmem (value, len, "here", 4);
  g_thread_join (thread);
  /* counters are atomic and shared */
  g_assert_true (ks_store_add (a, "n", 5, &count, &error));
  g_assert_true (ks_store_add (b, "n", -2, &count, &error));
  g_assert_cmpint (count, ==, 3);
  g_assert_no_error (error);
  /* another job's prefix sees none of it, and a wait names what is missing */
  const char *keys[] = { "addr/0", "late", NULL };
  g_assert_true (ks_store_wait (a, keys, 100, &error));
  g_assert_false (ks_store_wait (other, keys, 200, &error));
  g_assert_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT);
  g_assert_nonnull (strstr (error->message, "keys 'addr/0', 'late' did not appear within 200 ms"));
  g_clear_error (&error);
  g_assert_false (ks_store_get (other, "late", 50, (void **) &value, &len, &error));
  g_assert_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT);
  g_assert_nonnull (strstr (error->message, "key 'late' did not appear within 50 ms"));
  g_clear_error (&error);
  /* a key that holds text is not a counter */
  g_assert_false (ks_store_add (a, "late", 1, NULL, &error));
  g_assert_nonnull (strstr (error->message, "key 'late' is not a counter"));
}

static void
test_wrong_token (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsStore) refused = client (f, "job", "guess", &error);

  g_assert_null (refused);
  g_assert_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "refused this process (refused: wrong token)"));
  g_assert_nonnull (strstr (error->message, "KS_STORE_TOKEN"));
  g_assert_true (log_mentions ("tcp store: disconnected the client at 127.0.0.1:"));
  g_assert_true (log_mentions ("refused: wrong token"));
  g_clear_error (&error);
  /* no token at all never reaches the server */
  g_assert_null (client (f, "job", NULL, &error));
  g_assert_nonnull (strstr (error->message, "no token: set KS_STORE_TOKEN"));
  g_clear_error (&error);
  /* the rightful client still gets in */
  g_autoptr (KsStore) ok = client (f, "job", TOKEN, &error);
  g_assert_no_error (error);
  g_assert_true (ks_store_set (ok, "k", "v", 1, &error));
}

/* A raw connection to the server. */
static int
raw_connect (Fixture *f)
{
  struct sockaddr_in addr = { .sin_family = AF_INET };
  int fd = socket (AF_INET, SOCK_STREAM, 0);
  addr.sin_port = htons ((guint16) atoi (strrchr (f->address, ':') + 1));
  inet_pton (AF_INET, "127.0.0.1", &addr.sin_addr);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  return fd;
}

/* Sends `bytes` raw and waits for the server to hang up. */
static void
send_raw_and_expect_hangup (Fixture *f, const void *bytes, gsize len, const char *logged_why)
{
  int fd = raw_connect (f);
  char buf[256];
  g_assert_cmpint (send (fd, bytes, len, 0), ==, (gssize) len);
  shutdown (fd, SHUT_WR);
  while (read (fd, buf, sizeof buf) > 0)
    ; /* an error reply, then the close */
  close (fd);
  if (!log_mentions (logged_why))
    g_error ("the server did not log '%s'; it logged:\n%s", logged_why, logged->str);
}

static void
test_malformed (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  /* a frame longer than the limit */
  static const guint8 huge[] = { 0xff, 0xff, 0xff, 0xff, 1 };
  send_raw_and_expect_hangup (f, huge, sizeof huge, "a frame of 4294967295 bytes, over the limit");
  /* an HTTP request instead of a hello */
  const char *http = "GET / HTTP/1.0\r\n\r\n";
  send_raw_and_expect_hangup (f, http, strlen (http), "a frame of");
  /* a well-framed body that is not a hello */
  static const guint8 not_hello[] = { 0, 0, 0, 2, 9, 9 };
  send_raw_and_expect_hangup (f, not_hello, sizeof not_hello,
                              "it did not begin with a ksdist store hello");
  /* a frame cut short by the client */
  static const guint8 short_frame[] = { 0, 0, 0, 50, 1, 2, 3 };
  send_raw_and_expect_hangup (f, short_frame, sizeof short_frame,
                              "the connection closed in the middle of a message");

  /* after a good hello, a request with a field longer than its frame */
  g_autoptr (GByteArray) hello = g_byte_array_new ();
  guint8 op = 1;
  const char *fields[] = { "ksdist-store-1", TOKEN, "job" };
  g_byte_array_append (hello, &op, 1);
  for (int i = 0; i < 3; i++)
    {
      guint32 n = GUINT32_TO_BE ((guint32) strlen (fields[i]));
      g_byte_array_append (hello, (guint8 *) &n, 4);
      g_byte_array_append (hello, (const guint8 *) fields[i], strlen (fields[i]));
    }
  g_autoptr (GByteArray) bytes = g_byte_array_new ();
  guint32 len = GUINT32_TO_BE (hello->len);
  g_byte_array_append (bytes, (guint8 *) &len, 4);
  g_byte_array_append (bytes, hello->data, hello->len);
  static const guint8 bad_set[] = { 0, 0, 0, 5, 2, 0x10, 0, 0, 0 }; /* SET, key of 256 MiB */
  g_byte_array_append (bytes, bad_set, sizeof bad_set);
  send_raw_and_expect_hangup (f, bytes->data, bytes->len, "a malformed request (op 2)");

  /* the server goes on serving */
  g_autoptr (KsStore) ok = client (f, "job", TOKEN, &error);
  g_assert_no_error (error);
  g_assert_true (ks_store_set (ok, "still", "up", 2, &error));
  g_assert_no_error (error);
}

/* The hello as raw bytes: a frame of op 1, the magic, the token and the job. */
static GByteArray *
hello_frame (const char *token)
{
  GByteArray *bytes = g_byte_array_new ();
  g_autoptr (GByteArray) hello = g_byte_array_new ();
  guint8 op = 1;
  const char *fields[] = { "ksdist-store-1", token, "job" };
  g_byte_array_append (hello, &op, 1);
  for (int i = 0; i < 3; i++)
    {
      guint32 n = GUINT32_TO_BE ((guint32) strlen (fields[i]));
      g_byte_array_append (hello, (guint8 *) &n, 4);
      g_byte_array_append (hello, (const guint8 *) fields[i], strlen (fields[i]));
    }
  guint32 len = GUINT32_TO_BE (hello->len);
  g_byte_array_append (bytes, (guint8 *) &len, 4);
  g_byte_array_append (bytes, hello->data, hello->len);
  return bytes;
}

/* Whether the server closed `fd` within `ms` (read gives 0 or an error). */
static gboolean
closed_within (int fd, int ms)
{
  struct pollfd p = { .fd = fd, .events = POLLIN };
  char buf[256];
  return poll (&p, 1, ms) == 1 && read (fd, buf, sizeof buf) <= 0;
}

static int
count_lines_with (const char *text)
{
  int n = 0;
  g_mutex_lock (&log_lock);
  for (const char *p = logged->str; (p = strstr (p, text)) != NULL; p++)
    n++;
  g_mutex_unlock (&log_lock);
  return n;
}

/* Strangers (clients before their hello) get a small frame, a few seconds and a limited
 * number of places; refusals are logged sparingly; with the token, a counter cannot
 * overflow and a key cannot hold a NUL. */
static void
test_strangers (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  /* a 64 MiB frame announced before the hello: refused at once, nothing buffered */
  static const guint8 big[] = { 0x04, 0, 0, 0, 1 };
  send_raw_and_expect_hangup (f, big, sizeof big, "a frame of 67108864 bytes, over the limit of 4096");

  /* 40 silent strangers: 32 are let wait, the rest turned away at once */
  int fds[40], turned = 0;
  for (int i = 0; i < 40; i++)
    fds[i] = raw_connect (f);
  g_usleep (500000); /* the server has seen them all; well within the hello deadline */
  for (int i = 0; i < 40; i++)
    turned += closed_within (fds[i], 0);
  g_assert_cmpint (turned, ==, 8);
  g_assert_true (log_mentions ("turned away: 32 clients are already waiting to say hello"));
  /* ... and those that wait are let go after the hello deadline */
  gint64 start = g_get_monotonic_time ();
  int gone = 0;
  for (int i = 0; i < 40; i++)
    gone += closed_within (fds[i], 8000);
  g_assert_cmpint (gone, >=, 32);
  g_assert_cmpfloat ((g_get_monotonic_time () - start) / 1e6, <, 8);
  g_assert_true (log_mentions ("no answer in time"));
  for (int i = 0; i < 40; i++)
    close (fds[i]);
  /* 41 refusals so far, logged 10 times and once more at the 100th at most */
  g_assert_cmpint (count_lines_with ("tcp store: disconnected the client"), <=, 11);

  /* the rightful client still gets in; its counter cannot overflow */
  g_autoptr (KsStore) ok = client (f, "job", TOKEN, &error);
  g_assert_no_error (error);
  gint64 value = 0;
  g_assert_true (ks_store_add (ok, "c", G_MAXINT64, &value, &error));
  g_assert_false (ks_store_add (ok, "c", 1, &value, &error));
  g_assert_nonnull (strstr (error->message, "counter 'c' would overflow"));
  g_clear_error (&error);
  g_assert_true (ks_store_add (ok, "c", -1, &value, &error));
  g_assert_cmpint (value, ==, G_MAXINT64 - 1);

  /* a key with a NUL byte would alias the shorter key: the client is disconnected and
   * "k" stays unset (past ten refusals the log only counts them) */
  g_autoptr (GByteArray) bytes = hello_frame (TOKEN);
  static const guint8 nul_set[] = { 0, 0, 0, 13, 2, 0, 0, 0, 3, 'k', 0, 'x', 0, 0, 0, 1, 'v' };
  g_byte_array_append (bytes, nul_set, sizeof nul_set);
  int fd = raw_connect (f);
  g_assert_cmpint (send (fd, bytes->data, bytes->len, 0), ==, (gssize) bytes->len);
  char buf[256];
  gssize got, total = 0;
  while ((got = read (fd, buf, sizeof buf)) > 0)
    total += got;
  close (fd);
  g_assert_cmpint (total, ==, 5); /* the hello's answer, then the close */
  void *v = NULL;
  gsize vlen;
  g_assert_false (ks_store_get (ok, "k", 200, &v, &vlen, &error));
  g_assert_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT);
}

/* A client whose server is gone, or never came, says where it looked. */
static void
test_no_server (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsStore) c = client (f, "job", TOKEN, &error);
  g_autofree char *address = g_strdup (f->address);
  gsize len;
  void *value;

  g_assert_no_error (error);
  g_clear_pointer (&f->server, ks_store_free);
  g_assert_false (ks_store_get (c, "k", 1000, &value, &len, &error));
  g_assert_error (error, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST);
  g_assert_nonnull (strstr (error->message, "the connection to the server was lost"));
  g_clear_error (&error);

  g_autoptr (KsStore) late = ks_store_new (f->registry, f->config, "tcp", &error);
  g_assert_false (ks_store_open (late, address, "job", TOKEN, &error));
  g_assert_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT);
  g_autofree char *want = g_strdup_printf ("cannot reach the server at %s within 400 ms", address);
  g_assert_nonnull (strstr (error->message, want));
  g_clear_error (&error);
  g_assert_false (ks_store_open (late, "no-port-here", "job", TOKEN, &error));
  g_assert_nonnull (strstr (error->message, "address 'no-port-here' is not HOST:PORT"));
}

/* ---- the c10d client against a stand-in for PyTorch's TCPStore (torch 1.13's wire) ---- */

typedef struct {
  int listener;
  GHashTable *values; /* wire key -> GBytes */
  GString *keys_seen;
  gint accepts;
} FakeC10d;



/* Serves queries honestly, except for keys that script a hostile answer: "bad-wait" gets
 * a check (or wait) answer that is neither 0 nor 1, "huge" a value length of 2^40, "cut" a
 * value cut short, "mute" no answer at all; "never" is never there. */
static gpointer
fake_c10d (gpointer data)
{
  FakeC10d *fake = data;
  int fd;
  while ((fd = accept (fake->listener, NULL, NULL)) >= 0)
    {
      guint8 type;
      g_atomic_int_inc (&fake->accepts);
      while (ks_test_read_exact (fd, &type, 1))
        {
          gsize len;
          guint64 n = 1;
          g_autofree char *key = NULL;
          if ((type == 4 || type == 5) && (!ks_test_read_exact (fd, &n, 8) || n != 1)) /* one key here */
            break;
          if ((key = ks_test_read_string (fd, 4096, &len)) == NULL)
            break;
          g_string_append_printf (fake->keys_seen, "%s;", key);
          if (type == 0) /* SET */
            {
              gsize vlen;
              char *value = ks_test_read_string (fd, 4096, &vlen);
              if (value == NULL)
                break;
              g_hash_table_insert (fake->values, g_strdup (key), g_bytes_new_take (value, vlen));
            }
          else if ((type == 4 || type == 5) && g_str_has_suffix (key, "/mute"))
            continue; /* no answer */
          else if (type == 4 || type == 5) /* CHECK: 0 ready, 1 not; WAIT: 0 when there */
            {
              guint8 answer = g_str_has_suffix (key, "/bad-wait") ? 7
                              : g_str_has_suffix (key, "/never")  ? 1
                                                                  : 0;
              if (type == 5 && answer == 1)
                continue;
              if (write (fd, &answer, 1) != 1)
                break;
            }
          else if (type == 2) /* GET */
            {
              GBytes *v = g_hash_table_lookup (fake->values, key);
              guint64 size = g_str_has_suffix (key, "/huge") ? G_GUINT64_CONSTANT (1) << 40
                             : g_str_has_suffix (key, "/cut") ? 10
                             : v != NULL ? g_bytes_get_size (v) : 0;
              gboolean ok = write (fd, &size, 8) == 8;
              if (g_str_has_suffix (key, "/cut"))
                ok = write (fd, "abc", 3) == 3 && FALSE;
              else if (v != NULL && ok)
                ok = write (fd, g_bytes_get_data (v, NULL), size) == (ssize_t) size;
              if (!ok)
                break;
            }
          else if (type == 3) /* ADD */
            {
              gint64 delta, value;
              if (!ks_test_read_exact (fd, &delta, 8))
                break;
              GBytes *v = g_hash_table_lookup (fake->values, key);
              value = (v != NULL ? g_ascii_strtoll (g_bytes_get_data (v, NULL), NULL, 10) : 0) + delta;
              char *text = g_strdup_printf ("%" G_GINT64_FORMAT, value); /* as torch keeps it */
              g_hash_table_insert (fake->values, g_strdup (key),
                                   g_bytes_new_take (text, strlen (text) + 1));
              if (write (fd, &value, 8) != 8)
                break;
            }
          else
            break;
        }
      close (fd);
    }
  return NULL;
}

static void
test_c10d (Fixture *f, gconstpointer data)
{
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t alen = sizeof addr;
  FakeC10d fake = { socket (AF_INET, SOCK_STREAM, 0),
                    g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                           (GDestroyNotify) g_bytes_unref),
                    g_string_new (NULL) };
  g_autoptr (GError) error = NULL;
  void *value = NULL;
  gsize len;
  gint64 sum = 0;

  g_assert_cmpint (bind (fake.listener, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (listen (fake.listener, 8), ==, 0);
  g_assert_cmpint (getsockname (fake.listener, (struct sockaddr *) &addr, &alen), ==, 0);
  g_autofree char *where = g_strdup_printf ("127.0.0.1:%d", ntohs (addr.sin_port));
  GThread *thread = g_thread_new ("fake-c10d", fake_c10d, &fake);
  /* an answer to a look may take a quarter of [comm] timeout, 1 s at least */
  g_assert_true (ks_config_set_override (f->config, "comm.timeout=2", NULL));
  g_autoptr (KsStore) c = ks_store_new (f->registry, f->config, "c10d", &error);
  g_assert_no_error (error);
  g_assert_true (ks_store_open (c, where, "job", NULL, &error)); /* torch's store has no token */

  /* honest answers: the values come back, keys go as "/<prefix>/<key>" */
  g_assert_true (ks_store_set (c, "k", "v\0w", 3, &error));
  g_assert_true (ks_store_get (c, "k", 1000, &value, &len, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (value, len, "v\0w", 3);
  g_clear_pointer (&value, g_free);
  g_assert_true (ks_store_add (c, "n", 5, &sum, &error) && sum == 5);
  g_assert_true (ks_store_add (c, "n", -2, &sum, &error) && sum == 3);
  g_assert_nonnull (strstr (fake.keys_seen->str, "/job/k;"));

  /* hostile answers: an error each, never a crash or a huge allocation */
  struct { const char *key; int code; const char *message; } cases[] = {
    { "bad-wait", KS_COMM_ERROR_PEER_LOST,
      "an answer to a check that is neither 'ready' nor 'not ready'" },
    { "huge", KS_COMM_ERROR_PEER_LOST, "a value longer than 64 MiB" },
    { "cut", KS_COMM_ERROR_PEER_LOST, "the connection closed in the middle of a message" },
    { "mute", KS_COMM_ERROR_PEER_LOST, "stopped answering (no answer within 1000 ms) while "
      "waiting for key 'mute'" },
    { "never", KS_COMM_ERROR_TIMEOUT, "keys 'never' did not appear within 300 ms" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_assert_false (ks_store_get (c, cases[i].key, 300, &value, &len, &error));
      g_test_message ("%s: %s", cases[i].key, error->message);
      g_assert_error (error, KS_COMM_ERROR, cases[i].code);
      g_assert_nonnull (strstr (error->message, cases[i].message));
      g_assert_null (value);
      g_clear_error (&error);
    }
  /* after each but a key not there yet, a new connection: the store works again */
  g_assert_true (ks_store_get (c, "k", 1000, &value, &len, &error));
  g_assert_cmpmem (value, len, "v\0w", 3);
  g_free (value);
  g_assert_cmpint (g_atomic_int_get (&fake.accepts), ==, 5);
  /* waits and looks for a key that is not there ask on the one connection */
  for (int i = 0; i < 20; i++)
    {
      g_assert_false (ks_store_get (c, "never", i % 2 ? 0 : 20, &value, &len, &error));
      g_assert_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT);
      g_clear_error (&error);
    }
  g_assert_cmpint (g_atomic_int_get (&fake.accepts), ==, 5);

  g_clear_pointer (&c, ks_store_free);
  shutdown (fake.listener, SHUT_RDWR);
  close (fake.listener);
  g_thread_join (thread);
  g_hash_table_unref (fake.values);
  g_string_free (fake.keys_seen, TRUE);
}

/* Each kind names an implementation of the plugin, and one that works at that kind of
 * address: a directory, a server the job hosts (the fixture's, made by kind), PyTorch's
 * TCPStore (test_c10d speaks to it by name); no name is of two kinds. */
static void
test_kinds (Fixture *f, gconstpointer data)
{
  static const KsStoreKind kinds[] = { KS_STORE_KIND_DIRECTORY, KS_STORE_KIND_SERVED,
                                       KS_STORE_KIND_TORCH };
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree void *got = NULL;
  gsize len;

  for (guint i = 0; i < G_N_ELEMENTS (kinds); i++)
    {
      const char *name = ks_store_kind_name (kinds[i]);
      g_autoptr (KsStore) store = ks_store_new (f->registry, f->config, name, &error);
      g_assert_no_error (error);
      g_assert_cmpstr (ks_store_name (store), ==, name);
      for (guint j = 0; j < G_N_ELEMENTS (kinds); j++)
        g_assert_true (ks_store_kind_is (name, kinds[j]) == (i == j));
    }
  g_assert_false (ks_store_kind_is ("auto", KS_STORE_KIND_SERVED));
  g_assert_false (ks_store_kind_is (NULL, KS_STORE_KIND_DIRECTORY));
  g_assert_cmpstr (ks_store_kind_name (KS_STORE_KIND_SERVED), ==, "tcp"); /* [comm] store = tcp */

  /* the directory kind meets in a directory */
  g_autoptr (KsStore) a = ks_store_new (f->registry, f->config,
                                        ks_store_kind_name (KS_STORE_KIND_DIRECTORY), &error);
  g_autoptr (KsStore) b = ks_store_new (f->registry, f->config,
                                        ks_store_kind_name (KS_STORE_KIND_DIRECTORY), &error);
  g_assert_true (ks_store_open (a, dir, "job", NULL, &error));
  g_assert_true (ks_store_open (b, dir, "job", NULL, &error));
  g_assert_true (ks_store_set (a, "k", "v1", 2, &error));
  g_assert_true (ks_store_get (b, "k", 5000, &got, &len, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (got, len, "v1", 2);
  ks_test_rmtree (dir);
}

/* An address's host as the launcher, the store and the route finder read it (one
 * function: ks_comm_address_host); a TCP store served and reached at [::1]:PORT. */
static void
test_address_host (Fixture *f, gconstpointer data)
{
  static const struct {
    const char *address, *host, *port;
  } cases[] = {
    { "127.0.0.1:6170", "127.0.0.1", "6170" }, { "[::1]:29500", "::1", "29500" },
    { "[fd00::2]:", "fd00::2", "" },           { "node-3:80", "node-3", "80" },
    { "node-3", "node-3", NULL },              { "[]:5", "", "5" },
    { "[:5", "[", "5" },                       { "", "", NULL },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *port = "unset";
      g_autofree char *host = ks_comm_address_host (cases[i].address, &port);
      g_assert_cmpstr (host, ==, cases[i].host);
      g_assert_cmpstr (port, ==, cases[i].port);
    }
  g_autofree char *toward = ks_comm_address_toward ("[127.0.0.1]:1");
  g_assert_cmpstr (toward, ==, "127.0.0.1");

  g_autoptr (GError) error = NULL;
  g_autoptr (KsStore) server = ks_store_new (f->registry, f->config, "tcp", &error);
  g_autofree char *bound = NULL;
  if (!ks_store_serve (server, "[::1]:0", TOKEN, &bound, &error))
    {
      g_autofree char *why = g_strdup_printf ("no IPv6 loopback here: %s", error->message);
      g_test_skip (why);
      return;
    }
  g_autofree void *got = NULL;
  gsize len;
  g_test_message ("served at %s", bound);
  g_assert_true (g_str_has_prefix (bound, "[::1]:"));
  g_autoptr (KsStore) c = ks_store_new (f->registry, f->config, "tcp", &error);
  g_assert_true (ks_store_open (c, bound, "v6", TOKEN, &error));
  g_assert_no_error (error);
  g_assert_true (ks_store_set (c, "k", "v6", 2, &error));
  g_assert_true (ks_store_get (c, "k", 5000, &got, &len, &error));
  g_assert_cmpmem (got, len, "v6", 2);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  logged = g_string_new (NULL);
  /* the server's warnings are what some cases check, not failures */
  g_log_set_always_fatal (G_LOG_FATAL_MASK);
  g_log_set_default_handler (keep_log, NULL);
  g_test_add ("/store/tcp/values", Fixture, NULL, setup, test_values, teardown);
  g_test_add ("/store/tcp/wrong-token", Fixture, NULL, setup, test_wrong_token, teardown);
  g_test_add ("/store/tcp/malformed", Fixture, NULL, setup, test_malformed, teardown);
  g_test_add ("/store/tcp/no-server", Fixture, NULL, setup, test_no_server, teardown);
  g_test_add ("/store/tcp/strangers", Fixture, NULL, setup, test_strangers, teardown);
  g_test_add ("/store/c10d/client", Fixture, NULL, setup, test_c10d, teardown);
  g_test_add ("/store/kinds", Fixture, NULL, setup, test_kinds, teardown);
  g_test_add ("/store/address-host", Fixture, NULL, setup, test_address_host, teardown);
  return g_test_run ();
}
