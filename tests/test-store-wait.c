/* Waits on PyTorch's c10d TCPStore end by [comm] timeout, on one connection: `ksdist
 * train` started as torchrun starts it (its agent's store) meets at a stand-in for
 * torch 1.13's TCPStore served by this process over 127.0.0.1. A rank whose peer never
 * comes fails after the timeout and has opened one connection, not one per look; a rank
 * whose store stops answering (and stops accepting) ends within the timeout and a little,
 * naming the store's address, the key, its rank and what to look at. */
#include "testutil.h"

#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const plugins[] = { "openblas", "optim", "store", "roles", "gloo", "shm",
                                       "collective", NULL };

#define TIMEOUT_S 2
#define MAX_CLIENTS 64

/* ---- a stand-in for torch 1.13's TCPStore: SET 0, GET 2, ADD 3, CHECK 4, WAIT 5, DELETE 8 ---- */

typedef struct {
  int listener;
  guint16 port;
  GThread *thread;
  gint accepts; /* connections accepted */
  gint stop;    /* set: nothing more is accepted, read or answered (a stopped server) */
  gint quit;
  GHashTable *values; /* wire key -> GBytes */
  int clients[MAX_CLIENTS];
  GPtrArray *waiters[MAX_CLIENTS]; /* keys a client's WAIT is waiting for, or NULL */
} FakeStore;



static gboolean
all_there (FakeStore *f, GPtrArray *keys)
{
  for (guint i = 0; i < keys->len; i++)
    if (!g_hash_table_contains (f->values, keys->pdata[i]))
      return FALSE;
  return TRUE;
}

/* Reads a count and that many keys. */
static GPtrArray *
read_keys (int fd)
{
  guint64 n;
  gsize len;
  if (!ks_test_read_exact (fd, &n, 8) || n > 1024)
    return NULL;
  GPtrArray *keys = g_ptr_array_new_with_free_func (g_free);
  for (guint64 i = 0; i < n; i++)
    {
      char *key = ks_test_read_string (fd, 1 << 20, &len);
      if (key == NULL)
        return g_ptr_array_unref (keys), NULL;
      g_ptr_array_add (keys, key);
    }
  return keys;
}

/* Serves one query of client `c`; FALSE when the connection is to be closed. */
static gboolean
serve_query (FakeStore *f, int c)
{
  int fd = f->clients[c];
  guint8 type, zero = 0;
  gsize len;

  if (!ks_test_read_exact (fd, &type, 1))
    return FALSE;
  if (type == 4 || type == 5) /* CHECK, WAIT */
    {
      GPtrArray *keys = read_keys (fd);
      if (keys == NULL)
        return FALSE;
      guint8 answer = all_there (f, keys) ? 0 : 1;
      if (type == 4 || answer == 0)
        {
          g_ptr_array_unref (keys);
          return write (fd, &answer, 1) == 1;
        }
      g_clear_pointer (&f->waiters[c], g_ptr_array_unref);
      f->waiters[c] = keys; /* answered when they are set */
      return TRUE;
    }
  g_autofree char *key = ks_test_read_string (fd, 1 << 20, &len);
  if (key == NULL)
    return FALSE;
  if (type == 0) /* SET */
    {
      gsize vlen;
      char *value = ks_test_read_string (fd, 1 << 20, &vlen);
      if (value == NULL)
        return FALSE;
      g_hash_table_insert (f->values, g_strdup (key), g_bytes_new_take (value, vlen));
      for (int w = 0; w < MAX_CLIENTS; w++)
        if (f->waiters[w] != NULL && all_there (f, f->waiters[w]))
          {
            g_clear_pointer (&f->waiters[w], g_ptr_array_unref);
            if (write (f->clients[w], &zero, 1) != 1)
              g_test_message ("a waiter is gone");
          }
      return TRUE;
    }
  if (type == 2) /* GET: a missing key closes the connection, as torch does */
    {
      GBytes *v = g_hash_table_lookup (f->values, key);
      if (v == NULL)
        return FALSE;
      guint64 size = g_bytes_get_size (v);
      return write (fd, &size, 8) == 8
             && write (fd, g_bytes_get_data (v, NULL), size) == (ssize_t) size;
    }
  if (type == 3) /* ADD */
    {
      gint64 delta, value;
      if (!ks_test_read_exact (fd, &delta, 8))
        return FALSE;
      GBytes *v = g_hash_table_lookup (f->values, key);
      value = (v != NULL ? g_ascii_strtoll (g_bytes_get_data (v, NULL), NULL, 10) : 0) + delta;
      char *text = g_strdup_printf ("%" G_GINT64_FORMAT, value);
      g_hash_table_insert (f->values, g_strdup (key), g_bytes_new_take (text, strlen (text) + 1));
      return write (fd, &value, 8) == 8;
    }
  if (type == 8) /* DELETE_KEY */
    {
      gint64 removed = g_hash_table_remove (f->values, key);
      return write (fd, &removed, 8) == 8;
    }
  return FALSE;
}

static gpointer
serve (gpointer data)
{
  FakeStore *f = data;
  while (!g_atomic_int_get (&f->quit))
    {
      struct pollfd pfd[MAX_CLIENTS + 1];
      int n = 0, which[MAX_CLIENTS + 1];
      if (g_atomic_int_get (&f->stop))
        {
          g_usleep (20 * 1000);
          continue;
        }
      pfd[n] = (struct pollfd) { .fd = f->listener, .events = POLLIN };
      which[n++] = -1;
      for (int c = 0; c < MAX_CLIENTS; c++)
        if (f->clients[c] >= 0)
          {
            pfd[n] = (struct pollfd) { .fd = f->clients[c], .events = POLLIN };
            which[n++] = c;
          }
      if (poll (pfd, n, 20) <= 0)
        continue;
      for (int i = 0; i < n && !g_atomic_int_get (&f->stop); i++)
        {
          if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
          int c = which[i];
          if (c < 0)
            {
              int fd = accept (f->listener, NULL, NULL);
              if (fd < 0)
                continue;
              g_atomic_int_inc (&f->accepts);
              for (c = 0; c < MAX_CLIENTS && f->clients[c] >= 0; c++)
                ;
              if (c == MAX_CLIENTS)
                close (fd);
              else
                f->clients[c] = fd;
            }
          else if (!serve_query (f, c))
            {
              close (f->clients[c]);
              f->clients[c] = -1;
              g_clear_pointer (&f->waiters[c], g_ptr_array_unref);
            }
        }
    }
  return NULL;
}

static void
fake_start (FakeStore *f)
{
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t alen = sizeof addr;

  memset (f, 0, sizeof *f);
  for (int c = 0; c < MAX_CLIENTS; c++)
    f->clients[c] = -1;
  f->values = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                     (GDestroyNotify) g_bytes_unref);
  f->listener = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (bind (f->listener, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (listen (f->listener, 4), ==, 0); /* a stopped server's queue fills soon */
  g_assert_cmpint (getsockname (f->listener, (struct sockaddr *) &addr, &alen), ==, 0);
  f->port = ntohs (addr.sin_port);
  f->thread = g_thread_new ("fake-c10d", serve, f);
}

static void
fake_stop (FakeStore *f)
{
  g_atomic_int_set (&f->quit, 1);
  g_thread_join (f->thread);
  for (int c = 0; c < MAX_CLIENTS; c++)
    {
      if (f->clients[c] >= 0)
        close (f->clients[c]);
      g_clear_pointer (&f->waiters[c], g_ptr_array_unref);
    }
  close (f->listener);
  g_hash_table_unref (f->values);
}

/* ---- rank 0 of 2 as torchrun starts it, rank 1 never coming ---- */

typedef struct {
  GPid pid;
  int err_fd;
  gint64 started;
} Rank;

static void
start_rank (Rank *r, FakeStore *f, const char *backend)
{
  g_autofree char *comm = g_strdup_printf ("comm.backend=%s", backend);
  g_autofree char *port = g_strdup_printf ("MASTER_PORT=%u", f->port);
  g_autofree char *timeout = g_strdup_printf ("comm.timeout=%d", TIMEOUT_S);
  g_autofree char *config = g_build_filename (g_getenv ("KS_SRCDIR"), "examples", "default.ini",
                                              NULL);
  const char *const env[] = { "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2",
                              "GROUP_RANK=0", "MASTER_ADDR=127.0.0.1", port,
                              "TORCHELASTIC_USE_AGENT_STORE=True",
                              "TORCHELASTIC_RESTART_COUNT=0", "KS_STORE", "KS_STORE_ADDRESS",
                              "KS_STORE_TOKEN", NULL };
  const char *const args[] = { "train", config, "--set", timeout, "--set", comm,
                               "--set", "train.steps=5", "--set", "optim.warmup=0",
                               "--set", "log.level=warning", "--set", "openblas.threads=1",
                               NULL };
  r->started = g_get_monotonic_time ();
  r->pid = ks_test_spawn_ksdist (args, env, plugins, NULL, &r->err_fd);
}

/* Waits up to `limit_s` for the rank (then kills it): its exit status, its stderr, and in
 * *lived how long it ran. */
static char *
wait_rank (Rank *r, int limit_s, int *status, double *lived)
{
  GString *err = g_string_new (NULL);
  gint64 limit = r->started + (gint64) limit_s * G_USEC_PER_SEC;
  gboolean killed = FALSE;
  char buf[4096];

  for (;;)
    {
      struct pollfd pfd = { .fd = r->err_fd, .events = POLLIN };
      if (poll (&pfd, 1, 50) > 0)
        {
          ssize_t n = read (r->err_fd, buf, sizeof buf);
          if (n > 0)
            g_string_append_len (err, buf, n);
        }
      pid_t done = waitpid (r->pid, status, WNOHANG);
      if (done == r->pid)
        break;
      if (!killed && g_get_monotonic_time () > limit)
        {
          kill (r->pid, SIGKILL);
          killed = TRUE;
        }
    }
  *lived = (g_get_monotonic_time () - r->started) / 1e6;
  ssize_t n;
  while ((n = read (r->err_fd, buf, sizeof buf)) > 0)
    g_string_append_len (err, buf, n);
  close (r->err_fd);
  g_spawn_close_pid (r->pid);
  if (killed)
    g_string_append_printf (err, "\n(killed after %d s)", limit_s);
  return g_string_free (err, FALSE);
}

/* A rank whose peer never comes looks at the store on one connection until its timeout
 * (Gloo's rendezvous, and the shared-memory communicator's). */
static void
test_peer_missing (gconstpointer backend)
{
  FakeStore f;
  Rank r;
  int status;
  double lived;

  fake_start (&f);
  start_rank (&r, &f, backend);
  g_autofree char *err = wait_rank (&r, 20, &status, &lived);
  int accepts = g_atomic_int_get (&f.accepts);
  g_test_message ("lived %.1f s, %d connections: %s", lived, accepts, err);
  fake_stop (&f);
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) != 0);
  g_assert_nonnull (strstr (err, "rank 1 did not"));
  g_assert_nonnull (strstr (err, "within 2000 ms"));
  g_assert_cmpfloat (lived, <, TIMEOUT_S + 4);
  g_assert_cmpint (accepts, <=, 2);
}

/* A rank whose store stops answering (and accepting) ends within its timeout and a
 * little, saying which store, key and rank, and what to look at. */
static void
test_store_stops (gconstpointer backend)
{
  FakeStore f;
  Rank r;
  int status;
  double lived;

  fake_start (&f);
  start_rank (&r, &f, backend);
  /* once the rank has been there a while (it waits for rank 1), the store stops */
  while (g_atomic_int_get (&f.accepts) == 0
         && g_get_monotonic_time () - r.started < 10 * G_USEC_PER_SEC)
    g_usleep (10 * 1000);
  g_usleep (300 * 1000);
  g_atomic_int_set (&f.stop, 1);
  gint64 stopped = g_get_monotonic_time ();
  g_autofree char *err = wait_rank (&r, 30, &status, &lived);
  double after = (g_get_monotonic_time () - stopped) / 1e6;
  g_test_message ("lived %.1f s (%.1f s after the store stopped), %d connections: %s", lived,
                  after, g_atomic_int_get (&f.accepts), err);
  fake_stop (&f);
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) != 0);
  g_assert_cmpfloat (after, <, TIMEOUT_S + 3);
  g_autofree char *where = g_strdup_printf ("c10d store at 127.0.0.1:%u", f.port);
  g_assert_nonnull (strstr (err, where));
  g_assert_nonnull (strstr (err, "stopped answering"));
  g_assert_nonnull (strstr (err, "rank 0"));
  g_assert_nonnull (strstr (err, "while waiting for key '"));
  g_assert_nonnull (strstr (err, "check that torchrun's agent"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  signal (SIGPIPE, SIG_IGN);
  g_test_add_data_func ("/store-wait/c10d/peer-missing/gloo", "gloo", test_peer_missing);
  g_test_add_data_func ("/store-wait/c10d/peer-missing/shm", "shm", test_peer_missing);
  g_test_add_data_func ("/store-wait/c10d/store-stops/gloo", "gloo", test_store_stops);
  g_test_add_data_func ("/store-wait/c10d/store-stops/shm", "shm", test_store_stops);
  return g_test_run ();
}
