/* Parameter-server training against the collective mode, in one run on this machine:
 * the MLP 784-1024-1024-10 (ReLU), batch 128 per worker, SGD, W workers with one thread
 * each; the collective mode (gradient allreduce over Gloo) on the workers alone, then each
 * parameter-server mode with S = 1 and 2 servers. Prints samples/s per configuration (the
 * workers' steps, 3 warm-up steps then 60 timed ones ending with stop_worker, which waits
 * for anything still queued), the gradient bytes the servers took per second, loopback TCP
 * measured here, and the ratios the issue asks for; then sync once more with [transpiler]
 * encryption = off ("sync, plain": ZeroMQ PLAIN, no cipher), to show what CURVE costs.
 *   bench/bench-ps [W] [--set GROUP.KEY=VALUE ...]   (W = 2; KS_PLUGIN_PATH must reach
 *                   openblas, optim, store, roles, gloo, collective, transpiler)
 * BENCH_PS_MODES=sync (a comma-separated list) runs those modes only, after the collective
 * run (a short run to profile; the ratios of the modes left out are not printed). */
#include <ksdist/ksdist.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum { BATCH = 128, IN = 784, HIDDEN = 1024, CLASSES = 10, WARMUP = 3, STEPS = 60 };

#define CHECK(ok)                                                                         \
  G_STMT_START                                                                            \
  {                                                                                       \
    if (!(ok))                                                                            \
      g_error ("%s: %s", g_getenv ("BENCH_WHO"), error ? error->message : #ok);          \
  }                                                                                       \
  G_STMT_END

/* One process of a configuration: a worker prints its samples/s (worker 0 only). */
static int
run_process (int argc, char **argv)
{
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = ks_registry_new ();
  g_autoptr (GError) error = NULL;
  const gint64 xshape[] = { BATCH, IN }, yshape[] = { BATCH };
  g_autofree float *xs = g_new (float, BATCH * IN);
  gint64 ys[BATCH];
  const char *mode = g_getenv ("BENCH_MODE");

  CHECK (ks_config_set_override (config, "openblas.threads=1", &error));
  CHECK (ks_config_set_override (config, "optim.lr=0.01", &error));
  CHECK (ks_config_set_override (config, "transpiler.log_every_s=0", &error));
  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "--set") == 0 && i + 1 < argc)
      CHECK (ks_config_set_override (config, argv[++i], &error));
  if (g_getenv ("BENCH_STRATEGY") != NULL)
    CHECK (ks_config_set_override (config, g_getenv ("BENCH_STRATEGY"), &error));
  if (g_getenv ("BENCH_UNENCRYPTED") != NULL)
    CHECK (ks_config_set_override (config, "transpiler.encryption=off", &error));
  if (strcmp (g_getenv ("BENCH_STRATEGY") ? g_getenv ("BENCH_STRATEGY") : "", "strategy.mode=geo") == 0)
    CHECK (ks_config_set_override (config, "strategy.k_steps=10", &error));
  CHECK (ks_registry_scan (registry, config, &error) && ks_config_validate (config, &error));

  g_autoptr (KsRoleMaker) role = ks_role_maker_new (registry, config, "auto", &error);
  CHECK (role != NULL);
  int total = ks_role_maker_worker_num (role) + ks_role_maker_server_num (role);
  g_autoptr (KsStore) store = ks_store_new (registry, config, "file", &error);
  CHECK (store != NULL && ks_store_open (store, g_getenv ("BENCH_STORE"), mode, NULL, &error));
  g_autoptr (KsComm) comm = ks_comm_new (registry, config, "gloo", &error);
  CHECK (comm != NULL
         && ks_comm_connect (comm, store, ks_role_maker_global_rank (role), total, 60000, &error)
         && ks_role_maker_set_comm (role, comm, &error));
  g_autoptr (KsAlgorithm) algorithm = ks_factory_instantiate (registry, config, mode, &error);
  CHECK (algorithm != NULL && ks_algorithm_init (algorithm, role, &error));

  g_autoptr (KsCompute) compute = ks_compute_new (registry, config, "openblas", &error);
  CHECK (compute != NULL);
  g_autoptr (KsModel) model = ks_model_new (compute);
  KsExpr *x = ks_model_data (model, "x", 2, xshape, KS_DTYPE_FLOAT32, &error);
  KsExpr *y = ks_model_data (model, "y", 1, yshape, KS_DTYPE_INT64, &error);
  KsExpr *h = ks_fc (x, HIDDEN, KS_UNARY_RELU, NULL, 1, &error);
  h = ks_fc (h, HIDDEN, KS_UNARY_RELU, NULL, 2, &error);
  KsExpr *loss = ks_softmax_cross_entropy (ks_fc (h, CLASSES, -1, NULL, 3, &error), y, &error);
  CHECK (loss != NULL && ks_model_init (model, &error));
  KsOptimizer *sgd = ks_optimizer_new (registry, config, "sgd", &error);
  CHECK (sgd != NULL);
  g_autoptr (KsOptimizer) dist = ks_algorithm_distributed_optimizer (algorithm, sgd, config, &error);
  CHECK (dist != NULL && ks_optimizer_minimize (dist, model, loss, NULL, 0, NULL, &error));
  if (ks_role_maker_is_server (role))
    {
      CHECK (ks_algorithm_init_server (algorithm, NULL, &error)
             && ks_algorithm_run_server (algorithm, &error));
      return 0;
    }
  gboolean servers = ks_role_maker_server_num (role) > 0;
  CHECK (!servers || ks_algorithm_init_worker (algorithm, &error));

  g_autoptr (GRand) rng = g_rand_new_with_seed (1 + ks_role_maker_worker_index (role));
  for (int i = 0; i < BATCH * IN; i++)
    xs[i] = (float) g_rand_double (rng);
  for (int i = 0; i < BATCH; i++)
    ys[i] = g_rand_int_range (rng, 0, CLASSES);
  KsFeed feeds[] = { { "x", xs, sizeof (float) * BATCH * IN }, { "y", ys, sizeof ys } };

  for (int i = 0; i < WARMUP; i++)
    CHECK (ks_optimizer_step (dist, feeds, 2, &error));
  CHECK (ks_role_maker_barrier_worker (role, &error));
  gint64 t0 = g_get_monotonic_time ();
  for (int i = 0; i < STEPS; i++)
    CHECK (ks_optimizer_step (dist, feeds, 2, &error));
  CHECK (!servers || ks_algorithm_stop_worker (algorithm, &error));
  double seconds = (g_get_monotonic_time () - t0) / 1e6, slowest = seconds;
  CHECK (ks_role_maker_all_reduce_worker (role, &seconds, &slowest, 1, KS_REDUCE_MAX, &error));
  if (ks_role_maker_is_first_worker (role))
    printf ("%.1f %.3f\n", ks_role_maker_worker_num (role) * BATCH * STEPS / slowest,
            ks_arena_numel (ks_model_parameters (model)) * 4.0 / 1e6);
  return 0;
}

/* Loopback TCP: one process sends 256 MiB in 4 MiB writes to another; MB/s. */
static double
loopback_mb_s (void)
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof a;
  int listener = socket (AF_INET, SOCK_STREAM, 0), chunk = 4 << 20, total = 64;
  char *buf = g_malloc0 (chunk);
  double mb_s = 0;
  pid_t child;

  if (bind (listener, (struct sockaddr *) &a, sizeof a) != 0 || listen (listener, 1) != 0
      || getsockname (listener, (struct sockaddr *) &a, &len) != 0)
    g_error ("loopback: %s", g_strerror (errno));
  if ((child = fork ()) == 0)
    {
      int fd = socket (AF_INET, SOCK_STREAM, 0);
      if (connect (fd, (struct sockaddr *) &a, sizeof a) != 0)
        _exit (1);
      for (int i = 0; i < total; i++)
        for (gssize done = 0, n; done < chunk; done += n)
          if ((n = write (fd, buf + done, chunk - done)) <= 0)
            _exit (1);
      close (fd);
      _exit (0);
    }
  int fd = accept (listener, NULL, NULL);
  gint64 t0 = g_get_monotonic_time ();
  gsize got = 0;
  for (gssize n; (n = read (fd, buf, chunk)) > 0;)
    got += n;
  mb_s = got / 1e6 / ((g_get_monotonic_time () - t0) / 1e6);
  close (fd);
  close (listener);
  waitpid (child, NULL, 0);
  g_free (buf);
  return mb_s;
}

/* Runs one configuration: `servers` servers (0: collective) and `workers` workers;
 * `unencrypted`: with [transpiler] encryption = off. */
static gboolean
run_config (char **argv, const char *mode, const char *strategy, gboolean unencrypted,
            int servers, int workers, double *samples, double *model_mb)
{
  g_autofree char *dir = g_dir_make_tmp ("ksdist-bench-ps-XXXXXX", NULL);
  g_autofree char *out_path = g_build_filename (dir, "out", NULL);
  GString *eps = g_string_new (NULL);
  int n = servers + workers, failed = 0;
  GPid *pids = g_new (GPid, n);
  int *ports = g_new (int, MAX (servers, 1));

  for (int s = 0; s < servers; s++)
    {
      struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
      socklen_t len = sizeof a;
      int fd = socket (AF_INET, SOCK_STREAM, 0);
      bind (fd, (struct sockaddr *) &a, sizeof a);
      getsockname (fd, (struct sockaddr *) &a, &len);
      close (fd);
      ports[s] = ntohs (a.sin_port);
      g_string_append_printf (eps, "%s127.0.0.1:%d", s ? "," : "", ports[s]);
    }
  fflush (stdout);
  for (int p = 0; p < n; p++)
    if ((pids[p] = fork ()) == 0)
      {
        g_autofree char *id = g_strdup_printf ("%d", p < workers ? p : 0);
        g_autofree char *nw = g_strdup_printf ("%d", workers);
        g_autofree char *port = g_strdup_printf ("%d", p < workers ? 0 : ports[p - workers]);
        g_autofree char *who = g_strdup_printf ("%s %d", p < workers ? "worker" : "server",
                                                p < workers ? p : p - workers);
        g_setenv ("BENCH_WHO", who, TRUE);
        g_setenv ("BENCH_STORE", dir, TRUE);
        g_setenv ("BENCH_MODE", mode, TRUE);
        if (strategy != NULL)
          g_setenv ("BENCH_STRATEGY", strategy, TRUE);
        if (unencrypted)
          g_setenv ("BENCH_UNENCRYPTED", "1", TRUE);
        g_setenv ("KS_STORE_TOKEN", "bench", TRUE);
        g_setenv ("PADDLE_TRAINERS_NUM", nw, TRUE);
        g_setenv ("PADDLE_TRAINER_ID", id, TRUE);
        if (servers > 0)
          {
            g_setenv ("TRAINING_ROLE", p < workers ? "TRAINER" : "PSERVER", TRUE);
            g_setenv ("PADDLE_PSERVERS_IP_PORT_LIST", eps->str, TRUE);
            g_setenv ("POD_IP", "127.0.0.1", TRUE);
            g_setenv ("PADDLE_PORT", port, TRUE);
          }
        else
          {
            g_autofree char *list = NULL;
            GString *l = g_string_new (NULL);
            for (int w = 0; w < workers; w++)
              g_string_append_printf (l, "%s127.0.0.1:%d", w ? "," : "", 6170 + w);
            list = g_string_free (l, FALSE);
            g_setenv ("PADDLE_TRAINER_ENDPOINTS", list, TRUE);
          }
        if (p == 0 && freopen (out_path, "w", stdout) == NULL)
          _exit (1);
        execv ("/proc/self/exe", argv);
        _exit (127);
      }
  for (int p = 0; p < n; p++)
    {
      int status;
      waitpid (pids[p], &status, 0);
      if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
        {
          g_printerr ("bench-ps: %s %d ended with status %d\n", p < workers ? "worker" : "server",
                      p < workers ? p : p - workers, status);
          failed = 1;
        }
    }
  g_autofree char *out = NULL;
  gboolean ok = !failed && g_file_get_contents (out_path, &out, NULL, NULL)
                && sscanf (out, "%lf %lf", samples, model_mb) == 2;
  g_autofree char *rm = g_strdup_printf ("rm -rf '%s'", dir);
  if (system (rm) != 0)
    ok = FALSE;
  g_string_free (eps, TRUE);
  g_free (pids);
  g_free (ports);
  return ok;
}

int
main (int argc, char **argv)
{
  if (g_getenv ("BENCH_MODE") != NULL)
    return run_process (argc, argv);
  int workers = argc > 1 && argv[1][0] != '-' ? atoi (argv[1]) : 2;
  static const char *const modes[] = { "sync", "half_async", "async", "geo", NULL };
  double collective, samples, mb, sync_rate[3] = { 0 }, rate[4][3] = { { 0 } },
         plain_rate[3] = { 0 };

  /* a mode this bench does not know, refused before anything runs */
  g_auto (GStrv) only = g_strsplit (g_getenv ("BENCH_PS_MODES") ? g_getenv ("BENCH_PS_MODES") : "", ",", -1);
  for (int i = 0; only[i] != NULL; i++)
    if (!g_strv_contains (modes, only[i]))
      {
        fprintf (stderr, "bench-ps: BENCH_PS_MODES names '%s', not a mode: give a comma-separated "
                 "list of sync, half_async, async, geo\n", only[i]);
        return 2;
      }

  g_unsetenv ("TRAINING_ROLE");
  fflush (stdout);
  double tcp = loopback_mb_s ();
  printf ("# MLP 784-1024-1024-10, SGD, batch 128 per worker, %d workers x 1 thread; "
          "loopback TCP here: %.0f MB/s\n", workers, tcp);
  printf ("# %-12s %7s %11s %10s %16s\n", "mode", "servers", "samples/s", "ms/step",
          "server in MB/s");
  if (!run_config (argv, "collective", NULL, FALSE, 0, workers, &collective, &mb))
    g_error ("the collective run failed");
  printf ("  %-12s %7d %11.0f %10.2f %16s\n", "collective", 0, collective,
          workers * BATCH * 1e3 / collective, "-");
  for (guint m = 0; modes[m] != NULL; m++)
    for (int s = 1; s <= 2 && (!only[0] || g_strv_contains ((const char *const *) only, modes[m])); s++)
      {
        g_autofree char *strategy = g_strdup_printf ("strategy.mode=%s", modes[m]);
        if (!run_config (argv, "transpiler", strategy, FALSE, s, workers, &samples, &mb))
          g_error ("the %s run with %d servers failed", modes[m], s);
        rate[m][s] = samples;
        if (m == 0)
          sync_rate[s] = samples;
        /* the gradients (GEO: deltas, every 10th step) all workers pushed per second */
        double pushes = samples / BATCH / (m == 3 ? 10 : 1);
        printf ("  %-12s %7d %11.0f %10.2f %16.0f\n", modes[m], s, samples,
                workers * BATCH * 1e3 / samples, pushes * mb);
      }
  /* sync once more without CURVE's cipher ([transpiler] encryption = off): what it costs */
  for (int s = 1; s <= 2 && (!only[0] || g_strv_contains ((const char *const *) only, "sync")); s++)
    {
      if (!run_config (argv, "transpiler", "strategy.mode=sync", TRUE, s, workers, &samples, &mb))
        g_error ("the sync run with encryption = off and %d servers failed", s);
      plain_rate[s] = samples;
      printf ("  %-12s %7d %11.0f %10.2f %16.0f\n", "sync, plain", s, samples,
              workers * BATCH * 1e3 / samples, samples / BATCH * mb);
    }
  for (int s = 1; s <= 2; s++)
    if (rate[2][s] > 0 && rate[3][s] > 0 && sync_rate[s] > 0)
      printf ("# S = %d: async / sync %.2f (target >= 1.5), geo k=10 / sync %.2f (target >= 2), "
              "sync step time / collective %.2f (target <= 1.3)\n", s, rate[2][s] / sync_rate[s],
              rate[3][s] / sync_rate[s], collective / sync_rate[s]);
    else if (sync_rate[s] > 0)
      printf ("# S = %d: sync step time / collective %.2f (target <= 1.3)\n", s,
              collective / sync_rate[s]);
  for (int s = 1; s <= 2; s++)
    if (plain_rate[s] > 0)
      printf ("# S = %d, encryption = off: sync step time / collective %.2f (target <= 1.3); "
              "CURVE's sync step / this one %.2f\n", s, collective / plain_rate[s],
              plain_rate[s] / sync_rate[s]);
  return 0;
}
