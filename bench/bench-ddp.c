/* A data-parallel training step: the MLP 784-1024-1024-10 (ReLU), batch 128 per rank,
 * SGD, on N processes of this machine with one thread each, gradients averaged by the
 * collective algorithm over [comm] backend (shm, the one `auto` takes for ranks of one
 * host, unless set: gloo; [collective] at its defaults: overlapped 4 MiB buckets). Prints
 * ms/step: the slowest rank's best of 3 rounds of 20 steps
 * after 3 warm-up steps. bench/run-ddp.sh runs it beside PyTorch DDP.
 *   bench/bench-ddp [N] [--set GROUP.KEY=VALUE ...]   (N = 2 by default; KS_PLUGIN_PATH
 *                                                      must reach openblas, optim,
 *                                                      store, roles, shm or gloo,
 *                                                      collective) */
#include <ksdist/ksdist.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { BATCH = 128, IN = 784, HIDDEN = 1024, CLASSES = 10, WARMUP = 3, STEPS = 20, ROUNDS = 3 };

#define CHECK(ok)                                                                         \
  G_STMT_START                                                                            \
  {                                                                                       \
    if (!(ok))                                                                            \
      g_error ("rank %s: %s", g_getenv ("RANK"), error ? error->message : #ok);           \
  }                                                                                       \
  G_STMT_END

static int
run_rank (int argc, char **argv)
{
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = ks_registry_new ();
  g_autoptr (GError) error = NULL;
  const gint64 xshape[] = { BATCH, IN }, yshape[] = { BATCH };
  g_autofree float *xs = g_new (float, BATCH * IN);
  gint64 ys[BATCH];
  int rank = atoi (g_getenv ("RANK")), n = atoi (g_getenv ("WORLD_SIZE"));

  CHECK (ks_config_set_override (config, "openblas.threads=1", &error));
  CHECK (ks_config_set_override (config, "optim.lr=0.01", &error));
  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "--set") == 0 && i + 1 < argc)
      CHECK (ks_config_set_override (config, argv[++i], &error));
  CHECK (ks_registry_scan (registry, config, &error) && ks_config_validate (config, &error));

  g_autoptr (KsStore) store = ks_store_new (registry, config, "file", &error);
  CHECK (store != NULL && ks_store_open (store, g_getenv ("BENCH_STORE"), "ddp", NULL, &error));
  const char *backend = ks_config_get_string (config, "comm", "backend");
  g_autoptr (KsComm) comm = ks_comm_new (registry, config,
                                         strcmp (backend, "auto") == 0 ? "shm" : backend, &error);
  CHECK (comm != NULL && ks_comm_connect (comm, store, rank, n, 60000, &error));
  g_autoptr (KsRoleMaker) role = ks_role_maker_new (registry, config, "env", &error);
  CHECK (role != NULL && ks_role_maker_set_comm (role, comm, &error));
  g_autoptr (KsAlgorithm) algorithm = ks_factory_instantiate (registry, config, "collective", &error);
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

  g_autoptr (GRand) rng = g_rand_new_with_seed (1 + rank);
  for (int i = 0; i < BATCH * IN; i++)
    xs[i] = (float) g_rand_double (rng);
  for (int i = 0; i < BATCH; i++)
    ys[i] = g_rand_int_range (rng, 0, CLASSES);
  KsFeed feeds[] = { { "x", xs, sizeof (float) * BATCH * IN }, { "y", ys, sizeof ys } };

  double best = G_MAXDOUBLE;
  for (int i = 0; i < WARMUP; i++)
    CHECK (ks_optimizer_step (dist, feeds, 2, &error));
  for (int r = 0; r < ROUNDS; r++)
    {
      CHECK (ks_comm_barrier (comm, &error));
      gint64 t0 = g_get_monotonic_time ();
      for (int i = 0; i < STEPS; i++)
        CHECK (ks_optimizer_step (dist, feeds, 2, &error));
      best = MIN (best, (g_get_monotonic_time () - t0) / 1e3 / STEPS);
    }
  CHECK (ks_comm_allreduce (comm, &best, 1, KS_DTYPE_FLOAT64, KS_REDUCE_MAX, &error));
  if (rank == 0)
    printf ("%.2f\n", best);
  return 0;
}

int
main (int argc, char **argv)
{
  if (g_getenv ("RANK") != NULL)
    return run_rank (argc, argv);
  int n = argc > 1 && argv[1][0] != '-' ? atoi (argv[1]) : 2, failed = 0;
  g_autofree char *dir = g_dir_make_tmp ("ksdist-ddp-XXXXXX", NULL);
  g_autofree char *world = g_strdup_printf ("%d", n);
  GPid *pids = g_new (GPid, n);

  g_setenv ("BENCH_STORE", dir, TRUE);
  g_setenv ("WORLD_SIZE", world, TRUE);
  for (int r = 0; r < n; r++)
    {
      g_autofree char *rank = g_strdup_printf ("%d", r);
      if ((pids[r] = fork ()) == 0)
        {
          g_setenv ("RANK", rank, TRUE);
          execv ("/proc/self/exe", argv);
          _exit (127);
        }
    }
  for (int r = 0; r < n; r++)
    {
      int status;
      waitpid (pids[r], &status, 0);
      failed |= !WIFEXITED (status) || WEXITSTATUS (status) != 0;
    }
  g_free (pids);
  g_autofree char *rm = g_strdup_printf ("rm -rf '%s'", dir);
  return system (rm) != 0 || failed;
}
