/* One training step of the MLP 784-1024-1024-10 (ReLU), batch 128, SGD, on a compute
 * backend: prints milliseconds per step (best of several timed runs) and peak RSS.
 *   bench/bench-mlp THREADS [BACKEND]   (openblas by default; KS_PLUGIN_PATH must reach
 *                                        the backend and optim)
 * bench/run-vs-torch.sh mlp runs it beside PyTorch and prints the ratio. */
#include "step-timing.h"

enum { BATCH = 128, IN = 784, HIDDEN = 1024, CLASSES = 10, WARMUP = 3, STEPS = 20, ROUNDS = 3 };

int
main (int argc, char **argv)
{
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = ks_registry_new ();
  g_autoptr (GError) error = NULL;
  const gint64 xshape[] = { BATCH, IN }, yshape[] = { BATCH };
  g_autofree float *xs = g_new (float, BATCH * IN);
  gint64 ys[BATCH];

  const char *const sets[] = { "optim.lr=0.01", NULL };
  g_autoptr (KsCompute) compute = ks_bench_compute (argc, argv, sets, config, registry);
  g_autoptr (KsModel) model = ks_model_new (compute);
  KsExpr *x = ks_model_data (model, "x", 2, xshape, KS_DTYPE_FLOAT32, &error);
  KsExpr *y = ks_model_data (model, "y", 1, yshape, KS_DTYPE_INT64, &error);
  KsExpr *h = ks_fc (x, HIDDEN, KS_UNARY_RELU, NULL, 1, &error);
  h = ks_fc (h, HIDDEN, KS_UNARY_RELU, NULL, 2, &error);
  KsExpr *loss = ks_softmax_cross_entropy (ks_fc (h, CLASSES, -1, NULL, 3, &error), y, &error);
  if (loss == NULL || !ks_model_init (model, &error))
    g_error ("%s", error->message);
  g_autoptr (KsOptimizer) sgd = ks_optimizer_new (registry, config, "sgd", &error);
  if (sgd == NULL || !ks_optimizer_minimize (sgd, model, loss, NULL, 0, NULL, &error))
    g_error ("%s", error->message);

  g_autoptr (GRand) rng = g_rand_new_with_seed (1);
  for (int i = 0; i < BATCH * IN; i++)
    xs[i] = (float) g_rand_double (rng);
  for (int i = 0; i < BATCH; i++)
    ys[i] = g_rand_int_range (rng, 0, CLASSES);
  KsFeed feeds[] = { { "x", xs, sizeof (float) * BATCH * IN }, { "y", ys, sizeof ys } };

  ks_bench_time_steps (compute, sgd, feeds, 2, WARMUP, STEPS, ROUNDS);
  return 0;
}
