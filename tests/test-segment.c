/* The segmenters (plugin segment, checked by the core): each method against the values
 * the seed semantics give, its edge cases and errors; min-max balancing against brute
 * force; and the stage that owns a layer with virtual stages, for every layer index. */
#include "testutil.h"

#include <math.h>
#include <string.h>

typedef struct {
  KsConfig *config;
  KsRegistry *registry;
} Fixture;

static void
setup (Fixture *f, gconstpointer data)
{
  g_autofree char *dir = ks_test_build_plugin_dir ("segment");
  g_autoptr (GError) error = NULL;
  ks_test_clear_env ();
  f->config = ks_config_new ();
  if (data != NULL)
    g_assert_true (ks_config_set_override (f->config, data, NULL));
  f->registry = ks_test_scan (f->config, dir);
  g_assert_true (ks_config_validate (f->config, &error));
}

static void
teardown (Fixture *f, gconstpointer data)
{
  ks_registry_free (f->registry);
  ks_config_free (f->config);
}

/* Layers named by `names` (one letter each: E embedding, D decoder, N norm, H head),
 * with parameters and costs from `weights` when given. */
static KsLayerInfo *
layers_of (const char *names, const double *weights)
{
  static const char *const full[] = { ['E'] = "Embedding", ['D'] = "DecoderLayer",
                                      ['N'] = "LayerNorm", ['H'] = "Head" };
  gsize n = strlen (names);
  KsLayerInfo *l = g_new0 (KsLayerInfo, n);
  for (gsize i = 0; i < n; i++)
    {
      l[i].name = full[(int) names[i]];
      l[i].n_params = weights != NULL ? (gint64) weights[i] : 1;
      l[i].cost = weights != NULL ? weights[i] : 0;
    }
  return l;
}

/* The boundaries of `method` as "0,3,5,7,11", or the error message. */
static char *
segment (Fixture *f, const char *method, const KsLayerInfo *layers, gsize n, gsize parts)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsSegmenter) s = ks_segmenter_new (f->registry, f->config, method, &error);
  g_autofree gsize *b = g_new (gsize, parts + 1);
  GString *text = g_string_new (NULL);

  g_assert_no_error (error);
  if (!ks_segmenter_segment (s, layers, n, parts, b, &error))
    {
      g_string_free (text, TRUE);
      return g_strdup (error->message);
    }
  for (gsize k = 0; k <= parts; k++)
    g_string_append_printf (text, "%s%" G_GSIZE_FORMAT, k ? "," : "", b[k]);
  return g_string_free (text, FALSE);
}

#define ASSERT_SEGMENT(f, method, names, weights, parts, want)                          \
  G_STMT_START                                                                          \
  {                                                                                     \
    g_autofree KsLayerInfo *l_ = layers_of (names, weights);                            \
    g_autofree char *got_ = segment (f, method, l_, strlen (names), parts);             \
    g_assert_cmpstr (got_, ==, want);                                                   \
  }                                                                                     \
  G_STMT_END

/* uniform: Paddle gives the remainder to the last stages (10 over 4: 2,2,3,3). */
static void
test_uniform (Fixture *f, gconstpointer data)
{
  ASSERT_SEGMENT (f, "uniform", "DDDDDDDDDD", NULL, 4, "0,2,4,7,10");
  ASSERT_SEGMENT (f, "uniform", "DDDDDDDD", NULL, 4, "0,2,4,6,8");
  ASSERT_SEGMENT (f, "uniform", "DDDD", NULL, 4, "0,1,2,3,4");
  ASSERT_SEGMENT (f, "uniform", "DDDDD", NULL, 1, "0,5");
  ASSERT_SEGMENT (f, "uniform", "DDD", NULL, 4,
                  "cannot cut 3 layers into 4 parts (stages x virtual stages): every part "
                  "needs a layer; use fewer stages or virtual stages");
}

/* remainder = first: DeepSpeed's choice (10 over 4: 3,3,2,2). */
static void
test_uniform_first (Fixture *f, gconstpointer data)
{
  ASSERT_SEGMENT (f, "uniform", "DDDDDDDDDD", NULL, 4, "0,3,6,8,10");
  ASSERT_SEGMENT (f, "layer:decoder", "EDDDDDDDNH", NULL, 3, "0,4,6,10");
}

/* layer:<regex>: the seed's example, a count that does not divide (which Paddle
 * asserts against), case-insensitivity, and errors. */
static void
test_layer (Fixture *f, gconstpointer data)
{
  ASSERT_SEGMENT (f, "layer:Decoder", "EDDDDDDDDNH", NULL, 4, "0,3,5,7,11");
  ASSERT_SEGMENT (f, "layer:DECODERLAYER", "EDDDDDDDDNH", NULL, 2, "0,5,11");
  /* 7 decoders over 3 stages: 2, 2, 3 */
  ASSERT_SEGMENT (f, "layer:decoder", "EDDDDDDDNH", NULL, 3, "0,3,5,10");
  ASSERT_SEGMENT (f, "layer:^(embedding|head)$", "EDDDDH", NULL, 2, "0,5,6");
  ASSERT_SEGMENT (f, "layer:decoder", "EDDNH", NULL, 4,
                  "seg_method layer:decoder matches 2 of the 5 layers; each of the 4 stages "
                  "needs at least one");
  g_autofree KsLayerInfo *l = layers_of ("EDDNH", NULL);
  g_autofree char *got = segment (f, "layer:(", l, 5, 2);
  g_assert_true (g_str_has_prefix (got, "seg_method layer:(: "));
}

/* The largest part total of `b` over weights w. */
static double
largest (const double *w, const gsize *b, gsize parts)
{
  double worst = 0;
  for (gsize k = 0; k < parts; k++)
    {
      double sum = 0;
      for (gsize i = b[k]; i < b[k + 1]; i++)
        sum += w[i];
      worst = MAX (worst, sum);
    }
  return worst;
}

/* The least largest part over every way to cut n into parts (recursively). */
static double
brute_force (const double *w, gsize n, gsize parts, gsize *b, gsize k)
{
  if (k == parts)
    return b[k - 1] < n ? (b[k] = n, largest (w, b, parts)) : INFINITY;
  double best = INFINITY;
  for (gsize at = b[k - 1] + 1; at + (parts - k) <= n; at++)
    {
      b[k] = at;
      best = MIN (best, brute_force (w, n, parts, b, k + 1));
    }
  return best;
}

/* parameters and cost: the least possible largest stage, checked against brute force
 * on random weights; every layer kept, no stage empty. */
static void
test_balance (Fixture *f, gconstpointer data)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (5);
  const char *methods[] = { "parameters", "cost" };
  g_autoptr (GError) error = NULL;

  ASSERT_SEGMENT (f, "parameters", "DDDDDDDD", ((double[]) { 10, 1, 1, 1, 10, 1, 1, 1 }), 2,
                  "0,4,8");
  ASSERT_SEGMENT (f, "cost", "EDDDH", ((double[]) { 0.5, 1, 1, 1, 2.5 }), 3, "0,2,4,5");
  for (int m = 0; m < 2; m++)
    {
      g_autoptr (KsSegmenter) s = ks_segmenter_new (f->registry, f->config, methods[m], &error);
      g_assert_no_error (error);
      for (int trial = 0; trial < 40; trial++)
        {
          gsize n = g_rand_int_range (rng, 1, 10), parts = g_rand_int_range (rng, 1, n + 1);
          double w[10];
          gsize b[11] = { 0 }, brute[11] = { 0 };
          KsLayerInfo layers[10] = { { 0 } };
          for (gsize i = 0; i < n; i++)
            {
              w[i] = g_rand_int_range (rng, 1, 100);
              layers[i].name = "L";
              layers[i].n_params = (gint64) w[i];
              layers[i].cost = w[i];
            }
          g_assert_true (ks_segmenter_segment (s, layers, n, parts, b, &error));
          g_assert_no_error (error);
          g_assert_cmpfloat (largest (w, b, parts), ==, brute_force (w, n, parts, brute, 1));
        }
    }
  ASSERT_SEGMENT (f, "cost", "DDD", ((double[]) { 0, 0, 0 }), 2,
                  "seg_method cost: no layer has a measured cost; profile the layers first");
  ASSERT_SEGMENT (f, "cost", "DDD", ((double[]) { 1, -1, 0 }), 2,
                  "seg_method cost: layer 1 (DecoderLayer) has cost -1; it must be a finite "
                  "number >= 0");
}

/* An explicit list: used as given when valid, else an error that says what is wrong. */
static void
test_list (Fixture *f, gconstpointer data)
{
  ASSERT_SEGMENT (f, "0,3,6,10", "DDDDDDDDDD", NULL, 3, "0,3,6,10");
  ASSERT_SEGMENT (f, "0, 1, 10", "DDDDDDDDDD", NULL, 2, "0,1,10");
  ASSERT_SEGMENT (f, "0,3,3,10", "DDDDDDDDDD", NULL, 3,
                  "seg_method 0,3,3,10: boundary 2 (3) is not after boundary 1 (3): part 1 "
                  "would be empty; boundaries must increase");
  ASSERT_SEGMENT (f, "1,3,6,10", "DDDDDDDDDD", NULL, 3,
                  "seg_method 1,3,6,10: boundaries must start at 0 and end at the layer count "
                  "10 (they go from 1 to 10)");
  ASSERT_SEGMENT (f, "0,3,6,9", "DDDDDDDDDD", NULL, 3,
                  "seg_method 0,3,6,9: boundaries must start at 0 and end at the layer count 10 "
                  "(they go from 0 to 9)");
  ASSERT_SEGMENT (f, "0,3,x,10", "DDDDDDDDDD", NULL, 3,
                  "seg_method 0,3,x,10: 'x' is not a layer index");
  ASSERT_SEGMENT (f, "0,5,10", "DDDDDDDDDD", NULL, 3,
                  "seg_method 0,5,10: 3 boundaries for 3 stages; it needs 4 (0, then where "
                  "each stage ends)");
}

static void
test_unknown_method (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_assert_null (ks_segmenter_new (f->registry, f->config, "uniformly", &error));
  g_assert_nonnull (strstr (error->message, "uniformly"));
}

/* Virtual stages: p stages of v chunks each; stage s owns chunks s, s + p, ... Checked
 * for every layer against ownership lists built here, for p=4 v=2 and p=2 v=4 (where
 * the seed's formula, stepping by v, goes wrong), and p=v=2. */
static void
test_stage_of_layer (Fixture *f, gconstpointer data)
{
  const gsize cases[][3] = { { 4, 2, 16 }, { 2, 4, 16 }, { 2, 2, 9 }, { 3, 1, 7 } };
  g_autoptr (KsSegmenter) s = ks_segmenter_new (f->registry, f->config, "uniform", NULL);

  for (gsize c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      gsize p = cases[c][0], v = cases[c][1], n = cases[c][2];
      g_autofree KsLayerInfo *layers = g_new0 (KsLayerInfo, n);
      gsize b[17];
      g_assert_true (ks_segmenter_segment (s, layers, n, p * v, b, NULL));
      for (gsize stage = 0; stage < p; stage++)
        for (gsize chunk = stage; chunk < p * v; chunk += p)
          for (gsize layer = b[chunk]; layer < b[chunk + 1]; layer++)
            if (ks_pipeline_stage_of_layer (b, p, v, layer) != (int) stage)
              g_error ("p=%" G_GSIZE_FORMAT " v=%" G_GSIZE_FORMAT ": layer %" G_GSIZE_FORMAT
                       " (chunk %" G_GSIZE_FORMAT ") is stage %d, not %" G_GSIZE_FORMAT,
                       p, v, layer, chunk, ks_pipeline_stage_of_layer (b, p, v, layer), stage);
      g_assert_cmpint (ks_pipeline_stage_of_layer (b, p, v, n), ==, -1);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(name, fn, set) g_test_add ("/segment/" name, Fixture, set, setup, fn, teardown)
  ADD ("uniform", test_uniform, NULL);
  ADD ("uniform-remainder-first", test_uniform_first, "segment.remainder=first");
  ADD ("layer", test_layer, NULL);
  ADD ("balance", test_balance, NULL);
  ADD ("list", test_list, NULL);
  ADD ("unknown-method", test_unknown_method, NULL);
  ADD ("stage-of-layer", test_stage_of_layer, NULL);
  return g_test_run ();
}
