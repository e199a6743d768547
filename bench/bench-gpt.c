/* One training step of the GPT of the issue (vocabulary 65, context 64 unless CONTEXT, 4
 * layers, 4 heads, width 128, batch 16, AdamW) on a compute backend: prints ms/step (best of several timed
 * runs) and peak RSS. bench/run-vs-torch.sh gpt runs it beside PyTorch.
 *   bench/bench-gpt THREADS [BACKEND [CONTEXT]]   (openblas and 64 by default;
 *                        KS_PLUGIN_PATH must reach the backend and optim)
 * GPT_SHAPE=LAYERS,HEADS,WIDTH,BATCH sets another shape (GPT-2 small: 12,12,768,8);
 * AMP=bf16 or fp16 runs the matmuls in mixed precision ([amp] dtype). */
#include "step-timing.h"
#include <ksdist/tasks.h>

#include <string.h>

enum { WARMUP = 2, STEPS = 5, ROUNDS = 3 };

int
main (int argc, char **argv)
{
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = ks_registry_new ();
  g_autoptr (GError) error = NULL;
  KsGptShape shape = { 65, argc > 3 ? g_ascii_strtoll (argv[3], NULL, 10) : 64, 4, 4, 128, 16,
                       1 };
  gsize n = shape.batch * shape.context;
  g_autofree gint64 *tokens = g_new (gint64, n);
  g_autofree gint64 *positions = g_new (gint64, n);
  g_autofree gint64 *targets = g_new (gint64, n);
  KsExpr *logits, *loss;

  if (shape.context < 1)
    g_error ("bench-gpt: CONTEXT %s; it is a positive number of tokens", argv[3]);
  const char *want = g_getenv ("GPT_SHAPE");
  if (want != NULL
      && sscanf (want, "%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%"
                 G_GINT64_FORMAT, &shape.layers, &shape.heads, &shape.width, &shape.batch) != 4)
    g_error ("bench-gpt: GPT_SHAPE=%s; it is LAYERS,HEADS,WIDTH,BATCH", want);
  n = shape.batch * shape.context;
  tokens = g_renew (gint64, tokens, n);
  positions = g_renew (gint64, positions, n);
  targets = g_renew (gint64, targets, n);
  const char *amp = g_getenv ("AMP");
  KsAmpSettings amp_settings = { KS_DTYPE_FLOAT32, 32768, 2, 0.5, 1000, TRUE };
  if (amp != NULL && strcmp (amp, "bf16") == 0)
    amp_settings.dtype = KS_DTYPE_BFLOAT16;
  else if (amp != NULL && strcmp (amp, "fp16") == 0)
    amp_settings.dtype = KS_DTYPE_FLOAT16;
  else if (amp != NULL && strcmp (amp, "off") != 0)
    g_error ("bench-gpt: AMP=%s; it is off, bf16 or fp16", amp);

  const char *const sets[] = { "optim.lr=0.0003", "optim.weight_decay=0.01", NULL };
  g_autoptr (KsCompute) compute = ks_bench_compute (argc, argv, sets, config, registry);
  g_autoptr (KsModel) model = ks_model_new (compute);
  if (!ks_gpt_build (model, &shape, &logits, &loss, &error)
      || !ks_model_set_amp (model, &amp_settings, &error) || !ks_model_init (model, &error))
    g_error ("%s", error->message);
  g_autoptr (KsOptimizer) adamw = ks_optimizer_new (registry, config, "adamw", &error);
  if (adamw == NULL || !ks_optimizer_minimize (adamw, model, loss, NULL, 0, NULL, &error))
    g_error ("%s", error->message);

  g_autoptr (GRand) rng = g_rand_new_with_seed (1);
  for (gsize i = 0; i < n; i++)
    {
      tokens[i] = g_rand_int_range (rng, 0, shape.vocab);
      targets[i] = g_rand_int_range (rng, 0, shape.vocab);
      positions[i] = i % shape.context;
    }
  KsFeed feeds[] = { { "tokens", tokens, n * sizeof (gint64) },
                     { "positions", positions, n * sizeof (gint64) },
                     { "targets", targets, n * sizeof (gint64) } };
  ks_bench_time_steps (compute, adamw, feeds, 3, WARMUP, STEPS, ROUNDS);
  return 0;
}
