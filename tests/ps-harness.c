/* The harness of the parameter-server tests (test-ps*.c, test-pslib*.c): their set-up,
 * ksdist runs of a config, CTR data, exported models compared, and jobs started by hand as
 * fleetrun does (a process per server and worker, each with its log) to watch and fault. */
#define _GNU_SOURCE /* memmem */
#include "ps-harness.h"
#include "../plugins/ps/auth.h"
#include "../plugins/ps/session.h"

#include <arpa/inet.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

const char *ps_test_config;
const char *const *ps_test_plugins;

static const char *const transpiler_plugins[] = { "openblas", "optim", "store", "roles", "gloo",
                                                  "shm", "collective", "transpiler", NULL };
static const char *const pslib_plugins[] = { "openblas", "optim", "store", "roles", "gloo", "shm",
                                             "collective", "pslib", NULL };

static void
setup (const char *example, const char *const *plugins)
{
  ks_test_clear_env ();
  ps_test_config = g_build_filename (g_getenv ("KS_SRCDIR"), "examples", example, NULL);
  ps_test_plugins = plugins;
}

void
ps_test_setup_transpiler (void)
{
  setup ("ps-mlp.ini", transpiler_plugins);
}

void
ps_test_setup_pslib (void)
{
  setup ("ctr-pslib.ini", pslib_plugins);
}

double
ps_test_datagen_ctr (const char *dir, const char *const *options)
{
  g_autoptr (GPtrArray) args = g_ptr_array_new ();
  g_autofree char *out = NULL, *err = NULL;
  g_ptr_array_add (args, "datagen");
  g_ptr_array_add (args, "ctr");
  g_ptr_array_add (args, (char *) dir);
  for (int i = 0; options[i] != NULL; i++)
    g_ptr_array_add (args, (char *) options[i]);
  g_ptr_array_add (args, NULL);
  g_assert_cmpint (ks_test_run_ksdist ((const char *const *) args->pdata, NULL, ps_test_plugins,
                                       &out, &err),
                   ==, 0);
  g_test_message ("%s", out);
  return ps_test_value_after (out, "teacher auc ");
}

char *
ps_test_small_ctr_data (const char *dir)
{
  char *data = g_build_filename (dir, "data", NULL);
  ps_test_datagen_ctr (data, ARGS ("--train", "20000", "--test", "4000", "--vocab", "300",
                                   "--files", "4"));
  return data;
}

/* Runs ksdist with `head` (NULL-terminated), then the example config and --set `sets`. */
int
ps_test_run (const char *const *head, const char *const *sets, char **out, char **err)
{
  g_autoptr (GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  const char *common[] = { "openblas.threads=1", "comm.timeout=20" };

  for (int i = 0; head[i] != NULL; i++)
    g_ptr_array_add (args, g_strdup (head[i]));
  g_ptr_array_add (args, g_strdup (ps_test_config));
  for (guint i = 0; i < G_N_ELEMENTS (common); i++)
    {
      g_ptr_array_add (args, g_strdup ("--set"));
      g_ptr_array_add (args, g_strdup (common[i]));
    }
  for (int i = 0; sets != NULL && sets[i] != NULL; i++)
    {
      g_ptr_array_add (args, g_strdup ("--set"));
      g_ptr_array_add (args, g_strdup (sets[i]));
    }
  g_ptr_array_add (args, NULL);
  int status = ks_test_run_ksdist ((const char *const *) args->pdata, NULL, ps_test_plugins, out, err);
  g_test_message ("%s%s", *out, *err);
  return status;
}

/* The value after `key` on the first line of `text` that has it (NAN when none). */
double
ps_test_value_after (const char *text, const char *key)
{
  const char *p = strstr (text, key);
  return p != NULL ? g_ascii_strtod (p + strlen (key), NULL) : NAN;
}

/* The floats of an exported inference model's safetensors file. */
static float *
exported_floats (const char *dir, gsize *n)
{
  g_autofree char *file = g_build_filename (dir, "model.safetensors", NULL);
  return ks_test_safetensors_floats (file, n);
}

/* Every parameter of two exports within `rel` of each other (relative to the larger
 * magnitude, with a floor of 1e-3 for values near zero); the largest difference. */
double
ps_test_assert_exports_close (const char *a, const char *b, double rel)
{
  gsize na, nb;
  g_autofree float *x = exported_floats (a, &na);
  g_autofree float *y = exported_floats (b, &nb);
  double worst = 0;

  g_assert_cmpuint (na, ==, nb);
  g_assert_cmpuint (na, >, 4000);
  for (gsize i = 0; i < na; i++)
    {
      double d = fabs ((double) x[i] - y[i]) / MAX (1e-3, MAX (fabs (x[i]), fabs (y[i])));
      worst = MAX (worst, d);
    }
  g_test_message ("largest relative difference %.3g over %" G_GSIZE_FORMAT " floats", worst, na);
  g_assert_cmpfloat (worst, <=, rel);
  return worst;
}

int
ps_test_free_port (void)
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof a;
  int fd = socket (AF_INET, SOCK_STREAM, 0);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &a, sizeof a), ==, 0);
  g_assert_cmpint (getsockname (fd, (struct sockaddr *) &a, &len), ==, 0);
  close (fd);
  return ntohs (a.sin_port);
}

/* The session of worker w's process (KS_PS_WORKER_SESSION): 32 hex digits. */
static char *
session_hex (guint w)
{
  return g_strdup_printf ("5e5510%026x", w);
}

void
ps_test_speak_for (void *socket, guint worker)
{
  static gint next;
  g_autofree char *hex = session_hex (worker);
  guint8 session[PS_SESSION_BYTES];
  g_assert_true (ps_session_parse (hex, session));
  /* numbers the worker's own sockets (from 0) do not reach */
  ps_session_set_routing_id (socket, session, 0x80000000u + (guint32) g_atomic_int_add (&next, 1));
}

static char *
log_path (PsTestJob *j, int p)
{
  return p < j->workers ? g_strdup_printf ("%s/workerlog.%d", j->dir, p)
                        : g_strdup_printf ("%s/serverlog.%d", j->dir, p - j->workers);
}

char *
ps_test_read_log (PsTestJob *j, int p)
{
  g_autofree char *path = log_path (j, p);
  char *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    text = g_strdup ("");
  return text;
}

static void
limit_descriptors (gpointer data)
{
  struct rlimit r = { GPOINTER_TO_INT (data), GPOINTER_TO_INT (data) };
  setrlimit (RLIMIT_NOFILE, &r);
}

/* Starts S servers and W workers of the example with `sets`, meeting at a file store. */
void
ps_test_job_start (PsTestJob *j, int servers, int workers, const char *const *sets)
{
  GString *eps = g_string_new (NULL);
  g_autofree char *plugin_path = NULL;
  g_autofree char *config = g_strdup (ps_test_config);
  GString *pp = g_string_new (NULL);

  j->dir = ks_test_tmpdir ();
  j->servers = servers;
  j->workers = workers;
  j->ports = g_new (int, servers);
  j->proc = g_new0 (GSubprocess *, servers + workers);
  for (int s = 0; s < servers; s++)
    {
      j->ports[s] = ps_test_free_port ();
      g_string_append_printf (eps, "%s127.0.0.1:%d", s ? "," : "", j->ports[s]);
    }
  for (int i = 0; ps_test_plugins[i] != NULL; i++)
    g_string_append_printf (pp, "%s%s/%s/.libs", i ? ":" : "", g_getenv ("KS_BUILD_PLUGINS"),
                            ps_test_plugins[i]);
  for (int p = 0; p < servers + workers; p++)
    {
      g_autoptr (GSubprocessLauncher) l = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDERR_MERGE);
      g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
      g_autoptr (GError) error = NULL;
      g_autofree char *path = log_path (j, p);
      g_autofree char *store = g_build_filename (j->dir, p < workers && j->worker_elsewhere
                                                           ? "elsewhere" : "store", NULL);
      g_autofree char *n = g_strdup_printf ("%d", workers);
      g_autofree char *id = g_strdup_printf ("%d", p < workers ? p : 0);
      g_autofree char *port = g_strdup_printf ("%d", p < workers ? 0 : j->ports[p - workers]);

      g_subprocess_launcher_set_stdout_file_path (l, path);
      if (j->nofile > 0 && p >= workers)
        g_subprocess_launcher_set_child_setup (l, limit_descriptors, GINT_TO_POINTER (j->nofile),
                                               NULL);
      g_subprocess_launcher_setenv (l, "KS_PLUGIN_PATH", pp->str, TRUE);
      g_subprocess_launcher_setenv (l, "KS_STORE", "file", TRUE);
      g_subprocess_launcher_setenv (l, "KS_STORE_ADDRESS", store, TRUE);
      g_subprocess_launcher_setenv (l, "KS_JOB", "ps-test", TRUE);
      if (p < workers)
        {
          g_autofree char *session = session_hex (p);
          g_subprocess_launcher_setenv (l, "KS_PS_WORKER_SESSION", session, TRUE);
        }
      if (j->no_token)
        g_subprocess_launcher_unsetenv (l, "KS_STORE_TOKEN");
      else
        g_subprocess_launcher_setenv (l, "KS_STORE_TOKEN",
                                      p < workers && j->worker_token != NULL ? j->worker_token
                                                                             : "the-jobs-token",
                                      TRUE);
      g_subprocess_launcher_setenv (l, "TRAINING_ROLE", p < workers ? "TRAINER" : "PSERVER", TRUE);
      g_subprocess_launcher_setenv (l, "PADDLE_PSERVERS_IP_PORT_LIST", eps->str, TRUE);
      g_subprocess_launcher_setenv (l, "PADDLE_TRAINERS_NUM", n, TRUE);
      g_subprocess_launcher_setenv (l, "PADDLE_TRAINER_ID", id, TRUE);
      g_subprocess_launcher_setenv (l, "POD_IP", "127.0.0.1", TRUE);
      g_subprocess_launcher_setenv (l, "PADDLE_PORT", port, TRUE);
      g_subprocess_launcher_unsetenv (l, "PADDLE_TRAINER_ENDPOINTS");
      g_ptr_array_add (argv, g_strdup (g_getenv ("KSDIST")));
      g_ptr_array_add (argv, g_strdup ("train"));
      g_ptr_array_add (argv, g_strdup (config));
      for (int i = 0; sets[i] != NULL; i++)
        {
          g_ptr_array_add (argv, g_strdup ("--set"));
          g_ptr_array_add (argv, g_strdup (sets[i]));
        }
      g_ptr_array_add (argv, NULL);
      j->proc[p] = g_subprocess_launcher_spawnv (l, (const char *const *) argv->pdata, &error);
      g_assert_no_error (error);
    }
  g_string_free (eps, TRUE);
  g_string_free (pp, TRUE);
}

/* Waits until process p's log has `text` (at most `seconds`). */
gboolean
ps_test_job_wait_log (PsTestJob *j, int p, const char *text, double seconds)
{
  gint64 end = g_get_monotonic_time () + (gint64) (seconds * 1e6);
  while (g_get_monotonic_time () < end)
    {
      g_autofree char *log = ps_test_read_log (j, p);
      if (strstr (log, text) != NULL)
        return TRUE;
      g_usleep (50000);
    }
  return FALSE;
}

/* Waits for every process (at most `seconds` in all; the test fails past it); returns the
 * seconds it took. */
gboolean
ps_test_job_wait_one (PsTestJob *j, int p, double seconds)
{
  gint64 end = g_get_monotonic_time () + (gint64) (seconds * 1e6);
  /* GLib reaps a child on its worker thread; it has no identifier after that */
  while (g_get_monotonic_time () < end && g_subprocess_get_identifier (j->proc[p]) != NULL)
    g_usleep (20000);
  return g_subprocess_get_identifier (j->proc[p]) == NULL;
}

double
ps_test_job_wait (PsTestJob *j, double seconds)
{
  gint64 start = g_get_monotonic_time (), end = start + (gint64) (seconds * 1e6);
  for (int p = 0; p < j->servers + j->workers; p++)
    {
      if (!ps_test_job_wait_one (j, p, (end - g_get_monotonic_time ()) / 1e6))
        {
          for (int q = 0; q < j->servers + j->workers; q++)
            g_subprocess_force_exit (j->proc[q]);
          g_autofree char *log = ps_test_read_log (j, p);
          g_test_message ("%s", log);
          g_error ("process %d of the job still runs after %.0f s", p, seconds);
        }
    }
  return (g_get_monotonic_time () - start) / 1e6;
}

int
ps_test_job_status (PsTestJob *j, int p)
{
  return g_subprocess_get_if_exited (j->proc[p]) ? g_subprocess_get_exit_status (j->proc[p])
                                                  : 128 + g_subprocess_get_term_sig (j->proc[p]);
}

void
ps_test_job_free (PsTestJob *j)
{
  for (int p = 0; p < j->servers + j->workers; p++)
    {
      g_autofree char *log = ps_test_read_log (j, p);
      g_test_message ("--- %s %d:\n%s", p < j->workers ? "worker" : "server",
                      p < j->workers ? p : p - j->workers, log);
      g_clear_object (&j->proc[p]);
    }
  ks_test_rmtree (j->dir);
  g_free (j->dir);
  g_free (j->ports);
  g_free (j->proc);
}

int
ps_test_raw_connect (int port)
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK),
                           .sin_port = htons (port) };
  int fd = socket (AF_INET, SOCK_STREAM, 0);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &a, sizeof a), ==, 0);
  return fd;
}

gsize
ps_test_server_rss (PsTestJob *j, int s)
{
  const char *pid = g_subprocess_get_identifier (j->proc[j->workers + s]);
  g_autofree char *path = g_strdup_printf ("/proc/%s/status", pid != NULL ? pid : "0");
  g_autofree char *text = NULL;
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  const char *rss = strstr (text, "VmRSS:");
  g_assert_nonnull (rss);
  return (gsize) g_ascii_strtoull (rss + 6, NULL, 10) * 1024;
}

/* Sends `len` bytes on a raw TCP connection to `port`, then closes it. */
void
ps_test_raw_send (int port, const void *data, gsize len, gboolean linger)
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK),
                           .sin_port = htons (port) };
  int fd = socket (AF_INET, SOCK_STREAM, 0);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &a, sizeof a), ==, 0);
  g_assert_cmpint (send (fd, data, len, MSG_NOSIGNAL), ==, (gssize) len);
  if (linger) /* half a message, then silence */
    g_usleep (500000);
  close (fd);
}

/* Makes `socket` a CURVE client with the keys of a job of `token` (a wrong one is
 * refused in the handshake). */
void
ps_test_curve (void *socket, const char *token)
{
  g_autoptr (GError) error = NULL;
  g_assert_true (ps_auth_client_socket (socket, token, "test client", FALSE, &error));
}

/* Sends a header (announcing `payload` bytes; with `magic` when not 0) and an empty
 * payload frame. */
void
ps_test_send_header (void *socket, PsHeader *h, guint64 payload, guint32 magic)
{
  ps_header_seal (h, 0);
  h->payload = payload;
  if (magic != 0)
    h->magic = magic;
  zmq_send (socket, h, sizeof *h, ZMQ_SNDMORE);
  zmq_send (socket, "", 0, 0);
}

int
ps_test_request (int port, guint type, gint64 step, const void *payload, gsize len,
                 double seconds, char **text)
{
  return ps_test_request_as (port, 0, type, 0, 0, step, payload, len, seconds, text);
}

static int
request (int port, gboolean stranger, guint sender, guint type, guint32 arg, guint64 aux,
         gint64 step, const void *payload, gsize len, double seconds, char **text)
{
  void *ctx = zmq_ctx_new (), *s = zmq_socket (ctx, ZMQ_DEALER);
  g_autofree char *uri = g_strdup_printf ("tcp://127.0.0.1:%d", port);
  PsHeader h = { 0 };
  int linger = 0, got = -1;

  zmq_setsockopt (s, ZMQ_LINGER, &linger, sizeof linger);
  ps_test_curve (s, "the-jobs-token");
  if (!stranger)
    ps_test_speak_for (s, sender);
  g_assert_cmpint (zmq_connect (s, uri), ==, 0);
  h.type = type;
  h.id = 4242;
  h.step = step;
  h.sender = sender;
  h.arg = arg;
  h.aux = aux;
  ps_token_digest ("the-jobs-token", h.token);
  g_assert_true (ps_send (s, NULL, 0, &h, payload, len, FALSE));
  zmq_pollitem_t item = { s, 0, ZMQ_POLLIN, 0 };
  if (zmq_poll (&item, 1, (long) (seconds * 1000)) == 1)
    {
      PsHeader r;
      char body[4096];
      int n = zmq_recv (s, &r, sizeof r, 0);
      int m = zmq_recv (s, body, sizeof body - 1, 0);
      if (n == (int) sizeof r && m >= 0)
        {
          got = r.type;
          if (text != NULL)
            *text = g_strndup (body, MIN (m, (int) sizeof body - 1));
        }
    }
  zmq_close (s);
  zmq_ctx_term (ctx);
  return got;
}

int
ps_test_request_as (int port, guint sender, guint type, guint32 arg, guint64 aux, gint64 step,
                    const void *payload, gsize len, double seconds, char **text)
{
  return request (port, FALSE, sender, type, arg, aux, step, payload, len, seconds, text);
}

int
ps_test_request_stranger (int port, guint sender, guint type, gint64 step, const void *payload,
                          gsize len, double seconds, char **text)
{
  return request (port, TRUE, sender, type, 0, 0, step, payload, len, seconds, text);
}

/* The pids of `launcher`'s children (GPid array). */
GArray *
ps_test_children_of (GPid launcher)
{
  GArray *pids = g_array_new (FALSE, FALSE, sizeof (GPid));
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *name;
  while ((name = g_dir_read_name (proc)) != NULL)
    {
      g_autofree char *stat_path = g_strdup_printf ("/proc/%s/stat", name);
      g_autofree char *stat = NULL;
      const char *close_paren;
      int ppid;
      if (g_file_get_contents (stat_path, &stat, NULL, NULL)
          && (close_paren = strrchr (stat, ')')) != NULL
          && sscanf (close_paren + 2, "%*c %d", &ppid) == 1 && ppid == launcher)
        {
          GPid pid = atoi (name);
          g_array_append_val (pids, pid);
        }
    }
  return pids;
}

static gboolean
have_plugin (const char *name)
{
  g_autofree char *file = g_strdup_printf ("%s.so", name);
  g_autofree char *so = g_build_filename (g_getenv ("KS_BUILD_PLUGINS"), name, ".libs", file,
                                          NULL);
  if (g_file_test (so, G_FILE_TEST_EXISTS))
    return TRUE;
  g_autofree char *why = g_strdup_printf ("the %s plugin was not built (no ZeroMQ)", name);
  g_test_skip (why);
  return FALSE;
}

gboolean
ps_test_have_transpiler (void)
{
  return have_plugin ("transpiler");
}

gboolean
ps_test_have_pslib (void)
{
  return have_plugin ("pslib");
}
