/* Parameter-server training (the transpiler plugin) with real server and worker processes
 * over 127.0.0.1: sync equals one process with the whole batch; half_async, async and GEO
 * reach its held-out accuracy; bad [strategy] settings are refused naming the keys; a
 * checkpoint written by 2 servers resumes on 3; a killed server, a killed worker and
 * hostile messages to a server's port each end as they should. */
#define _GNU_SOURCE /* memmem */
#include "testutil.h"
#include "../plugins/transpiler/wire.h"

#include <arpa/inet.h>
#include <gio/gio.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

static const char *const plugins[] = { "openblas", "optim", "store", "roles", "gloo",
                                       "collective", "transpiler", NULL };

#define ARGS(...) ((const char *const[]) { __VA_ARGS__, NULL })

static gboolean
have_transpiler (void)
{
  g_autofree char *so = g_build_filename (g_getenv ("KS_BUILD_PLUGINS"), "transpiler", ".libs",
                                          "transpiler.so", NULL);
  if (g_file_test (so, G_FILE_TEST_EXISTS))
    return TRUE;
  g_test_skip ("the transpiler plugin was not built (no ZeroMQ)");
  return FALSE;
}

static char *
example (void)
{
  return g_build_filename (g_getenv ("KS_SRCDIR"), "examples", "ps-mlp.ini", NULL);
}

/* Runs ksdist with `head` (NULL-terminated), then the example config and --set `sets`. */
static int
run (const char *const *head, const char *const *sets, char **out, char **err)
{
  g_autoptr (GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  const char *common[] = { "openblas.threads=1", "comm.timeout=20" };

  for (int i = 0; head[i] != NULL; i++)
    g_ptr_array_add (args, g_strdup (head[i]));
  g_ptr_array_add (args, example ());
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
  int status = ks_test_run_ksdist ((const char *const *) args->pdata, NULL, plugins, out, err);
  g_test_message ("%s%s", *out, *err);
  return status;
}

/* The value after `key` on the first line of `text` that has it (NAN when none). */
static double
value_after (const char *text, const char *key)
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
static double
assert_exports_close (const char *a, const char *b, double rel)
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

/* One process with the whole batch (2 x 64 rows) against 2 workers x 64 rows on 2
 * servers, sync mode, 20 Adam steps: the same parameters. The blocks are small enough
 * that the larger parameters are cut over both servers. */
static void
test_sync_equals_one_process (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *one = g_build_filename (dir, "one", NULL);
  g_autofree char *ps = g_build_filename (dir, "ps", NULL);
  g_autofree char *set_one = g_strdup_printf ("train.export_dir=%s", one);
  g_autofree char *set_ps = g_strdup_printf ("train.export_dir=%s", ps);
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;

  if (!have_transpiler ())
    return;
  g_assert_cmpint (run (ARGS ("train"),
                        ARGS ("job.mode=collective", "train.batch=128", "train.steps=20",
                              "train.log_every=20", set_one),
                        &out, &err),
                   ==, 0);
  g_assert_cmpint (run (ARGS ("launch", "--servers", "2", "--workers", "2"),
                        ARGS ("strategy.mode=sync", "train.steps=20", "train.log_every=20",
                              "transpiler.block_floats=200", set_ps),
                        &out2, &err2),
                   ==, 0);
  g_assert_nonnull (strstr (out2, "server 0 of 2 listening on 127.0.0.1:"));
  g_assert_nonnull (strstr (out2, "(sync mode, "));
  /* the 64 x 64 weight is cut in two: each server holds more than one block */
  g_assert_nonnull (strstr (out2, "server 1: "));
  g_assert_nonnull (strstr (out2, "20 updates"));
  assert_exports_close (one, ps, 1e-5);
  g_assert_cmpfloat (fabs (value_after (out, "step 20/20 loss ")
                           - value_after (out2, "[rank 0] step 20/20 loss ")),
                     <, 1e-4);
  ks_test_rmtree (dir);
}

/* half_async, async and GEO reach the one-process held-out accuracy within 0.02. */
static void
test_modes_accuracy (void)
{
  static const char *const modes[][6] = {
    { "strategy.mode=half_async", NULL },
    /* this model computes a step faster than a push travels: with Paddle's queue of 20 the
     * workers would run 20 steps ahead of the servers. Stale updates keep the loss moving
     * at a constant rate; the servers' cosine schedule over their 2 x 1500 updates (a push
     * of each worker per step) lets it settle */
    { "strategy.mode=async", "strategy.send_queue_size=1",
      "strategy.max_merge_var_num=1", "optim.schedule=cosine", "optim.total_steps=3000", NULL },
    /* GEO in Paddle's form */
    { "strategy.mode=auto", "strategy.a_sync=true", "strategy.k_steps=10", NULL },
  };
  g_autofree char *out = NULL, *err = NULL;

  if (!have_transpiler ())
    return;
  g_assert_cmpint (run (ARGS ("train"), ARGS ("job.mode=collective", "train.batch=128"), &out,
                        &err),
                   ==, 0);
  double one = value_after (out, "eval accuracy ");
  g_assert_cmpfloat (one, >=, 0.9);
  for (guint m = 0; m < G_N_ELEMENTS (modes); m++)
    {
      g_autofree char *o = NULL, *e = NULL;
      g_assert_cmpint (run (ARGS ("launch", "--servers", "2", "--workers", "2"), modes[m], &o,
                            &e),
                       ==, 0);
      for (int w = 0; w < 2; w++)
        {
          g_autofree char *key = g_strdup_printf ("[rank %d] eval accuracy ", w);
          double acc = value_after (o, key);
          g_test_message ("%s: worker %d accuracy %.4f, one process %.4f", modes[m][0], w, acc,
                          one);
          g_assert_cmpfloat (fabs (acc - one), <=, 0.02);
        }
    }
}

/* Impossible [strategy] settings are refused, naming the keys. */
static void
test_strategy_refusals (void)
{
  static const struct {
    const char *sets[3];
    const char *message;
  } cases[] = {
    { { "strategy.a_sync=false", "strategy.k_steps=5", NULL },
      "[strategy] a_sync = false with k_steps = 5" },
    { { "strategy.mode=sync", "strategy.k_steps=5", NULL },
      "[strategy] k_steps = 5 is for mode = geo, not mode = sync" },
    { { "strategy.mode=geo", "strategy.a_sync=false", NULL },
      "[strategy] mode = geo but a_sync = false: they disagree" },
    { { "strategy.mode=half_async", "optim.clip_norm=1", NULL },
      "[optim] clip_norm with [strategy] mode = half_async" },
  };
  g_autofree char *out = NULL, *err = NULL;

  if (!have_transpiler ())
    return;
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *o = NULL, *e = NULL;
      int status = run (ARGS ("launch", "--servers", "1", "--workers", "1"), cases[i].sets, &o,
                        &e);
      g_assert_cmpint (status, !=, 0);
      g_assert_nonnull (strstr (o, cases[i].message));
    }
  /* one process alone cannot train with servers */
  g_assert_cmpint (run (ARGS ("train"), NULL, &out, &err), ==, 2);
  g_assert_nonnull (strstr (err, "[job] mode = transpiler trains with parameter servers, but "
                                 "this is one process alone"));
}

/* 40 sync steps on 2 servers, against 20 steps on 2 servers checkpointed and resumed on 3
 * servers: the same parameters (sync mode does not depend on the server count). Servers
 * also start from the checkpoint by [transpiler] model_dir, and refuse a damaged shard. */
static void
test_reshard (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *ckpt = g_build_filename (dir, "ckpt", NULL);
  g_autofree char *e_a = g_build_filename (dir, "a", NULL);
  g_autofree char *e_b = g_build_filename (dir, "b", NULL);
  g_autofree char *set_ckpt = g_strdup_printf ("train.checkpoint_dir=%s", ckpt);
  g_autofree char *set_a = g_strdup_printf ("train.export_dir=%s", e_a);
  g_autofree char *set_b = g_strdup_printf ("train.export_dir=%s", e_b);
  g_autofree char *model_dir = g_strdup_printf ("transpiler.model_dir=%s/checkpoint-20", ckpt);
  g_autofree char *shard = g_build_filename (ckpt, "checkpoint-20", "server-1-of-2.safetensors",
                                             NULL);
  g_autofree char *o1 = NULL, *e1 = NULL, *o2 = NULL, *e2 = NULL, *o3 = NULL, *e3 = NULL;
  g_autofree char *o4 = NULL, *e4 = NULL, *o5 = NULL, *e5 = NULL;

  if (!have_transpiler ())
    return;
  g_assert_cmpint (run (ARGS ("launch", "--servers", "2", "--workers", "2"),
                        ARGS ("train.steps=40", "train.log_every=20", "transpiler.block_floats=200",
                              set_a),
                        &o1, &e1),
                   ==, 0);
  g_assert_cmpint (run (ARGS ("launch", "--servers", "2", "--workers", "2"),
                        ARGS ("train.steps=20", "train.log_every=20", "transpiler.block_floats=200",
                              set_ckpt),
                        &o2, &e2),
                   ==, 0);
  g_assert_true (g_file_test (shard, G_FILE_TEST_IS_REGULAR));
  g_assert_cmpint (run (ARGS ("launch", "--servers", "3", "--workers", "2"),
                        ARGS ("train.steps=40", "train.log_every=20", "transpiler.block_floats=200",
                              set_ckpt, "train.resume=true", set_b),
                        &o3, &e3),
                   ==, 0);
  g_assert_nonnull (strstr (o3, "server 2: loaded its blocks from"));
  g_assert_nonnull (strstr (o3, "/checkpoint-20 at step 20"));
  assert_exports_close (e_a, e_b, 1e-6);
  g_assert_cmpfloat (value_after (o3, "[rank 0] step 40/40 loss "), ==,
                     value_after (o1, "[rank 0] step 40/40 loss "));

  /* init_server(model_dir) with fresh workers: incremental training from the checkpoint */
  g_assert_cmpint (run (ARGS ("launch", "--servers", "3", "--workers", "1"),
                        ARGS ("train.steps=5", "train.log_every=5", "transpiler.block_floats=200",
                              model_dir),
                        &o4, &e4),
                   ==, 0);
  g_assert_nonnull (strstr (o4, "server 0: loaded its blocks from"));

  /* a flipped byte in a shard: the servers refuse to start, naming the file */
  g_autofree char *bytes = NULL;
  gsize len;
  g_assert_true (g_file_get_contents (shard, &bytes, &len, NULL));
  bytes[len - 3] ^= 0x10;
  g_assert_true (g_file_set_contents (shard, bytes, len, NULL));
  g_assert_cmpint (run (ARGS ("launch", "--servers", "3", "--workers", "1"),
                        ARGS ("train.steps=5", "transpiler.block_floats=200", model_dir),
                        &o5, &e5),
                   !=, 0);
  g_assert_nonnull (strstr (o5, "server-1-of-2.safetensors: the data does not match its SHA-256"));
  ks_test_rmtree (dir);
}

/* ---- jobs started by hand, as fleetrun does, to watch each process ---- */

typedef struct {
  char *dir;
  int servers, workers;
  int *ports;
  GSubprocess **proc; /* workers, then servers */
} Job;

static int
free_port (void)
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof a;
  int fd = socket (AF_INET, SOCK_STREAM, 0);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &a, sizeof a), ==, 0);
  g_assert_cmpint (getsockname (fd, (struct sockaddr *) &a, &len), ==, 0);
  close (fd);
  return ntohs (a.sin_port);
}

static char *
log_path (Job *j, int p)
{
  return p < j->workers ? g_strdup_printf ("%s/workerlog.%d", j->dir, p)
                        : g_strdup_printf ("%s/serverlog.%d", j->dir, p - j->workers);
}

static char *
read_log (Job *j, int p)
{
  g_autofree char *path = log_path (j, p);
  char *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    text = g_strdup ("");
  return text;
}

/* Starts S servers and W workers of the example with `sets`, meeting at a file store. */
static void
job_start (Job *j, int servers, int workers, const char *const *sets)
{
  GString *eps = g_string_new (NULL);
  g_autofree char *plugin_path = NULL;
  g_autofree char *config = example ();
  GString *pp = g_string_new (NULL);

  j->dir = ks_test_tmpdir ();
  j->servers = servers;
  j->workers = workers;
  j->ports = g_new (int, servers);
  j->proc = g_new0 (GSubprocess *, servers + workers);
  for (int s = 0; s < servers; s++)
    {
      j->ports[s] = free_port ();
      g_string_append_printf (eps, "%s127.0.0.1:%d", s ? "," : "", j->ports[s]);
    }
  for (int i = 0; plugins[i] != NULL; i++)
    g_string_append_printf (pp, "%s%s/%s/.libs", i ? ":" : "", g_getenv ("KS_BUILD_PLUGINS"),
                            plugins[i]);
  for (int p = 0; p < servers + workers; p++)
    {
      g_autoptr (GSubprocessLauncher) l = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDERR_MERGE);
      g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
      g_autoptr (GError) error = NULL;
      g_autofree char *path = log_path (j, p);
      g_autofree char *store = g_build_filename (j->dir, "store", NULL);
      g_autofree char *n = g_strdup_printf ("%d", workers);
      g_autofree char *id = g_strdup_printf ("%d", p < workers ? p : 0);
      g_autofree char *port = g_strdup_printf ("%d", p < workers ? 0 : j->ports[p - workers]);

      g_subprocess_launcher_set_stdout_file_path (l, path);
      g_subprocess_launcher_setenv (l, "KS_PLUGIN_PATH", pp->str, TRUE);
      g_subprocess_launcher_setenv (l, "KS_STORE", "file", TRUE);
      g_subprocess_launcher_setenv (l, "KS_STORE_ADDRESS", store, TRUE);
      g_subprocess_launcher_setenv (l, "KS_JOB", "ps-test", TRUE);
      g_subprocess_launcher_setenv (l, "KS_STORE_TOKEN", "the-jobs-token", TRUE);
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
static gboolean
job_wait_log (Job *j, int p, const char *text, double seconds)
{
  gint64 end = g_get_monotonic_time () + (gint64) (seconds * 1e6);
  while (g_get_monotonic_time () < end)
    {
      g_autofree char *log = read_log (j, p);
      if (strstr (log, text) != NULL)
        return TRUE;
      g_usleep (50000);
    }
  return FALSE;
}

/* Waits for every process (at most `seconds` in all; the test fails past it); returns the
 * seconds it took. */
static double
job_wait (Job *j, double seconds)
{
  gint64 start = g_get_monotonic_time (), end = start + (gint64) (seconds * 1e6);
  for (int p = 0; p < j->servers + j->workers; p++)
    {
      /* GLib reaps a child on its worker thread; it has no identifier after that */
      while (g_get_monotonic_time () < end && g_subprocess_get_identifier (j->proc[p]) != NULL)
        g_usleep (20000);
      if (g_subprocess_get_identifier (j->proc[p]) != NULL)
        {
          for (int q = 0; q < j->servers + j->workers; q++)
            g_subprocess_force_exit (j->proc[q]);
          g_autofree char *log = read_log (j, p);
          g_test_message ("%s", log);
          g_error ("process %d of the job still runs after %.0f s", p, seconds);
        }
    }
  return (g_get_monotonic_time () - start) / 1e6;
}

static int
job_status (Job *j, int p)
{
  return g_subprocess_get_if_exited (j->proc[p]) ? g_subprocess_get_exit_status (j->proc[p])
                                                  : 128 + g_subprocess_get_term_sig (j->proc[p]);
}

static void
job_free (Job *j)
{
  for (int p = 0; p < j->servers + j->workers; p++)
    {
      g_autofree char *log = read_log (j, p);
      g_test_message ("--- %s %d:\n%s", p < j->workers ? "worker" : "server",
                      p < j->workers ? p : p - j->workers, log);
      g_clear_object (&j->proc[p]);
    }
  ks_test_rmtree (j->dir);
  g_free (j->dir);
  g_free (j->ports);
  g_free (j->proc);
}

/* Processes started by the job would run long; each test ends them by a fault. */
#define LONG_RUN "train.steps=100000000", "train.log_every=100000000", "comm.timeout=3", \
                 "log.level=info", "openblas.threads=1"

/* A server killed mid-run: every worker ends within the timeout naming it and its endpoint;
 * the other server, left without workers, ends too. */
static void
test_killed_server (void)
{
  Job j = { 0 };
  if (!have_transpiler ())
    return;
  job_start (&j, 2, 2, ARGS ("strategy.mode=sync", LONG_RUN));
  g_assert_true (job_wait_log (&j, 0, "training rings", 30));
  g_usleep (300000);
  g_subprocess_send_signal (j.proc[2 + 1], SIGKILL);
  double took = job_wait (&j, 30);
  g_autofree char *endpoint = g_strdup_printf ("server 1 (127.0.0.1:%d) did not answer a push",
                                               j.ports[1]);
  for (int w = 0; w < 2; w++)
    {
      g_autofree char *log = read_log (&j, w);
      g_assert_cmpint (job_status (&j, w), ==, 1);
      g_assert_nonnull (strstr (log, endpoint));
    }
  g_autofree char *server0 = read_log (&j, 2);
  g_assert_cmpint (job_status (&j, 2), ==, 1);
  g_assert_nonnull (strstr (server0, "sent nothing for 3 s"));
  g_test_message ("the job ended %.1f s after the kill", took);
  g_assert_cmpfloat (took, <, 15);
  job_free (&j);
}

/* A worker killed mid-run in sync mode: the servers give up on its step after the timeout
 * and tell the other worker, which ends naming it. */
static void
test_killed_worker (void)
{
  Job j = { 0 };
  if (!have_transpiler ())
    return;
  job_start (&j, 2, 2, ARGS ("strategy.mode=sync", LONG_RUN));
  g_assert_true (job_wait_log (&j, 1, "worker 1 of 2", 30));
  g_usleep (500000);
  g_subprocess_send_signal (j.proc[1], SIGKILL);
  job_wait (&j, 30);
  g_autofree char *w0 = read_log (&j, 0);
  g_assert_cmpint (job_status (&j, 0), ==, 1);
  g_assert_nonnull (strstr (w0, "worker 1 sent no gradient for step"));
  for (int s = 0; s < 2; s++)
    {
      g_autofree char *log = read_log (&j, 2 + s);
      g_assert_cmpint (job_status (&j, 2 + s), ==, 1);
      /* "worker 1 sent no gradient", or (killed between its two pushes) "worker 0, 1 sent
       * nothing" from the server that never saw its step */
      g_assert_nonnull (strstr (log, "1 sent no"));
    }
  job_free (&j);
}

/* Sends `len` bytes on a raw TCP connection to `port`, then closes it. */
static void
raw_send (int port, const void *data, gsize len, gboolean linger)
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

/* Sends a header (announcing `payload` bytes; with `magic` when not 0) and an empty
 * payload frame. */
static void
send_header (void *socket, PsHeader *h, guint64 payload, guint32 magic)
{
  ps_header_seal (h, 0);
  h->payload = payload;
  if (magic != 0)
    h->magic = magic;
  zmq_send (socket, h, sizeof *h, ZMQ_SNDMORE);
  zmq_send (socket, "", 0, 0);
}

/* Garbage, a wrong token, lying lengths, strangers' worker numbers, several parts and a
 * half message to a server's port: each refused; the job finishes and learns. */
static void
test_bad_messages (void)
{
  Job j = { 0 };
  guint8 token[PS_TOKEN_BYTES], wrong[PS_TOKEN_BYTES];
  PsHeader h = { 0 };

  if (!have_transpiler ())
    return;
  job_start (&j, 1, 2, ARGS ("strategy.mode=sync", "train.steps=3000", "log.level=info",
                             "openblas.threads=1", "comm.timeout=20", "train.log_every=3000"));
  g_assert_true (job_wait_log (&j, 2, "listening on", 30));

  /* raw TCP: not even ZeroMQ's greeting; then the start of a greeting and silence */
  raw_send (j.ports[0], "GET / HTTP/1.0\r\n\r\n", 18, FALSE);
  raw_send (j.ports[0], "\xff\x00\x00\x00", 4, TRUE);

  void *ctx = zmq_ctx_new (), *s = zmq_socket (ctx, ZMQ_DEALER);
  g_autofree char *uri = g_strdup_printf ("tcp://127.0.0.1:%d", j.ports[0]);
  int linger = 10000; /* zmq_ctx_term waits until they are out */
  zmq_setsockopt (s, ZMQ_LINGER, &linger, sizeof linger);
  g_assert_cmpint (zmq_connect (s, uri), ==, 0);
  ps_token_digest ("the-jobs-token", token);
  ps_token_digest ("another-token", wrong);

  zmq_send (s, "garbage!", 8, 0);                    /* one part */
  zmq_send (s, "garbage!", 8, ZMQ_SNDMORE);
  zmq_send (s, "", 0, 0);                            /* a header shorter than one */
  h.type = PS_PULL;
  memcpy (h.token, wrong, sizeof wrong);
  send_header (s, &h, 0, 0);                         /* the wrong token */
  memcpy (h.token, token, sizeof token);
  send_header (s, &h, G_GUINT64_CONSTANT (1) << 60, 0); /* a payload length it does not have */
  h.sender = 77;
  send_header (s, &h, 0, 0);                         /* a worker the job does not have */
  zmq_send (s, "part one", 8, ZMQ_SNDMORE);
  zmq_send (s, "part two", 8, ZMQ_SNDMORE);
  zmq_send (s, "part three", 10, 0);                 /* three parts */
  h.sender = 1;
  h.type = 999;
  send_header (s, &h, 0, 0x12345678);                /* not the magic */
  zmq_close (s);
  zmq_ctx_term (ctx);

  job_wait (&j, 60);
  for (int p = 0; p < 3; p++)
    g_assert_cmpint (job_status (&j, p), ==, 0);
  g_autofree char *server = read_log (&j, 2);
  g_autofree char *w0 = read_log (&j, 0);
  g_test_message ("%s", server);
  g_assert_nonnull (strstr (server, "a message of 1 parts"));
  g_assert_nonnull (strstr (server, "a header of 8 bytes, not 64"));
  g_assert_nonnull (strstr (server, "refused: wrong token"));
  g_assert_nonnull (strstr (server, "payload bytes but 0 came"));
  g_assert_nonnull (strstr (server, "from worker 77 of a job of 2 workers"));
  g_assert_nonnull (strstr (server, "a message of 3 parts"));
  g_assert_nonnull (strstr (server, "bad magic"));
  g_assert_nonnull (strstr (server, "7 refused"));
  g_assert_cmpfloat (value_after (w0, "eval accuracy "), >=, 0.95);
  job_free (&j);
}

/* The pids of `launcher`'s children (GPid array). */
static GArray *
children_of (GPid launcher)
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

/* A server killed under ksdist launch: the launcher stops the job, naming it, and leaves
 * no process; the job restarts from its last checkpoint on 3 servers and converges. */
static void
test_restart_after_killed_server (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *ckpt = g_build_filename (dir, "ckpt", NULL);
  g_autofree char *first = g_build_filename (ckpt, "checkpoint-200", NULL);
  g_autofree char *set_ckpt = g_strdup_printf ("train.checkpoint_dir=%s", ckpt);
  g_autofree char *config = example ();
  g_autofree char *o = NULL, *e = NULL;
  int out_fd, err_fd;

  if (!have_transpiler ())
    return;
  GPid launcher = ks_test_spawn_ksdist (
      ARGS ("launch", "--servers", "2", "--workers", "2", config, "--set", set_ckpt, "--set",
            "train.checkpoint_every=100", "--set", "train.steps=100000000", "--set",
            "train.log_every=100000000", "--set", "openblas.threads=1", "--set",
            "comm.timeout=5"),
      NULL, plugins, &out_fd, &err_fd);
  gint64 end = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  while (!g_file_test (first, G_FILE_TEST_IS_DIR) && g_get_monotonic_time () < end)
    g_usleep (50000);
  g_assert_true (g_file_test (first, G_FILE_TEST_IS_DIR));
  g_autoptr (GArray) kids = children_of (launcher);
  g_assert_cmpuint (kids->len, ==, 4);
  /* the server: the child whose environment says PSERVER */
  GPid server = 0;
  for (guint i = 0; i < kids->len; i++)
    {
      g_autofree char *env_path = g_strdup_printf ("/proc/%d/environ", g_array_index (kids, GPid, i));
      g_autofree char *env = NULL;
      gsize len;
      if (g_file_get_contents (env_path, &env, &len, NULL)
          && memmem (env, len, "TRAINING_ROLE=PSERVER", 21) != NULL)
        server = g_array_index (kids, GPid, i);
    }
  g_assert_cmpint (server, >, 0);
  kill (server, SIGKILL);
  int status;
  g_assert_cmpint (waitpid (launcher, &status, 0), ==, launcher);
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) != 0);
  char buf[65536];
  gssize got = read (err_fd, buf, sizeof buf - 1);
  buf[MAX (got, 0)] = '\0';
  g_test_message ("%s", buf);
  g_assert_nonnull (strstr (buf, "was killed by signal 9"));
  close (out_fd);
  close (err_fd);
  for (guint i = 0; i < kids->len; i++) /* nothing left running */
    g_assert_cmpint (kill (g_array_index (kids, GPid, i), 0), !=, 0);

  g_assert_cmpint (run (ARGS ("launch", "--servers", "3", "--workers", "2"),
                        ARGS (set_ckpt, "train.resume=true"), &o, &e),
                   ==, 0);
  g_assert_nonnull (strstr (o, "resumed from"));
  g_assert_nonnull (strstr (o, "server 2: loaded its blocks from"));
  g_assert_cmpfloat (value_after (o, "[rank 0] eval accuracy "), >=, 0.95);
  ks_test_rmtree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  ks_test_clear_env ();
  g_test_add_func ("/ps/sync-equals-one-process", test_sync_equals_one_process);
  g_test_add_func ("/ps/modes-accuracy", test_modes_accuracy);
  g_test_add_func ("/ps/strategy-refusals", test_strategy_refusals);
  g_test_add_func ("/ps/reshard", test_reshard);
  g_test_add_func ("/ps/killed-server", test_killed_server);
  g_test_add_func ("/ps/killed-worker", test_killed_worker);
  g_test_add_func ("/ps/bad-messages", test_bad_messages);
  g_test_add_func ("/ps/restart-after-killed-server", test_restart_after_killed_server);
  return g_test_run ();
}
