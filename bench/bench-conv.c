/* One training step of Reptile's Omniglot model on a compute backend: images
 * [batch, 28, 28, 1] (NHWC), 4 x (conv 3x3, 64 filters, stride 2, padding 1; batch norm in
 * training mode; ReLU) down to 2 x 2 x 64, a fully connected layer to 5 classes, mean
 * softmax cross entropy, Adam lr 1e-3. Prints ms/step (best of several timed runs) and
 * peak RSS. bench/run-vs-torch.sh conv runs it beside PyTorch at several batch sizes.
 *   bench/bench-conv THREADS [BACKEND [BATCH]]   (openblas and 5, Reptile's inner batch,
 *                                                 by default; KS_PLUGIN_PATH must reach
 *                                                 the backend and optim) */
#include "step-timing.h"

enum { SIDE = 28, FILTERS = 64, LAYERS = 4, CLASSES = 5, WARMUP = 5, STEPS = 20, ROUNDS = 3 };

int
main (int argc, char **argv)
{
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = ks_registry_new ();
  g_autoptr (GError) error = NULL;
  gint64 batch = argc > 3 ? g_ascii_strtoll (argv[3], NULL, 10) : 5;
  const gint64 xshape[] = { batch, SIDE, SIDE, 1 }, yshape[] = { batch };
  gsize n = batch * SIDE * SIDE;

  if (batch < 1)
    g_error ("bench-conv: batch %s; it is a positive number", argv[3]);
  const char *const sets[] = { "optim.lr=0.001", NULL };
  g_autoptr (KsCompute) compute = ks_bench_compute (argc, argv, sets, config, registry);
  g_autoptr (KsModel) model = ks_model_new (compute);
  KsExpr *h = ks_model_data (model, "x", 4, xshape, KS_DTYPE_FLOAT32, &error);
  KsExpr *y = ks_model_data (model, "y", 1, yshape, KS_DTYPE_INT64, &error);
  for (int i = 0; i < LAYERS; i++)
    {
      g_autofree char *conv = g_strdup_printf ("conv%d", i), *bn = g_strdup_printf ("bn%d", i);
      h = ks_conv2d (h, FILTERS, 3, 2, 1, conv, i + 1, &error);
      /* momentum 0.1 and eps 1e-5: BatchNorm2d's defaults */
      h = ks_relu (ks_batch_norm (h, bn, 0.1f, 1e-5f, &error), &error);
    }
  KsExpr *logits = ks_fc (ks_flatten (h, &error), CLASSES, -1, "fc", LAYERS + 1, &error);
  KsExpr *loss = ks_softmax_cross_entropy (logits, y, &error);
  if (loss == NULL || !ks_model_init (model, &error))
    g_error ("%s", error->message);
  g_autoptr (KsOptimizer) adam = ks_optimizer_new (registry, config, "adam", &error);
  if (adam == NULL || !ks_optimizer_minimize (adam, model, loss, NULL, 0, NULL, &error))
    g_error ("%s", error->message);

  g_autoptr (GRand) rng = g_rand_new_with_seed (1);
  g_autofree float *xs = g_new (float, n);
  g_autofree gint64 *ys = g_new (gint64, batch);
  for (gsize i = 0; i < n; i++)
    xs[i] = (float) g_rand_double (rng);
  for (gint64 i = 0; i < batch; i++)
    ys[i] = g_rand_int_range (rng, 0, CLASSES);
  KsFeed feeds[] = { { "x", xs, n * sizeof (float) }, { "y", ys, batch * sizeof (gint64) } };

  ks_bench_time_steps (compute, adam, feeds, 2, WARMUP, STEPS, ROUNDS);
  return 0;
}
