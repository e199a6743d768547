/* sgemm through the ksdist compute vtable against the same library called directly,
 * in one run: the ratio is what the plugin path costs. Not a test: `make bench`.
 *   bench/bench-sgemm [THREADS [MAX_N]]   (THREADS 0 or none: one per core; sizes up to
 *                                         MAX_N, default 2048)
 * Needs KS_PLUGIN_PATH to reach the openblas plugin (make bench sets it). */
#include <ksdist/ksdist.h>

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
  KsCompute *compute;
  int n;
  float *a, *b, *c;
} Case;

static void
via_ksdist (Case *k)
{
  g_autoptr (GError) error = NULL;
  if (!ks_compute_sgemm (k->compute, KS_TRANS_N, KS_TRANS_N, k->n, k->n, k->n, 1.0f, k->a, k->n,
                         k->b, k->n, 0.0f, k->c, k->n, &error))
    g_error ("%s", error->message);
}

static void
direct (Case *k)
{
  cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, k->n, k->n, k->n, 1.0f, k->a, k->n,
               k->b, k->n, 0.0f, k->c, k->n);
}

/* Seconds per call, over `calls` calls: small products take microseconds, so one
 * sample times a batch long enough for the clock. */
static double
seconds (void (*run) (Case *), Case *k, int calls)
{
  gint64 t0 = g_get_monotonic_time ();
  for (int i = 0; i < calls; i++)
    run (k);
  return (g_get_monotonic_time () - t0) / 1e6 / calls;
}

/* Best GFLOP/s of each path over `repeats` rounds, the two alternating within a round
 * so that both see the same noise from the rest of the machine. */
static void
measure (Case *k, int repeats, double *ours, double *theirs)
{
  double best_ours = G_MAXDOUBLE, best_theirs = G_MAXDOUBLE;
  double flops = 2.0 * k->n * k->n * (double) k->n;
  int calls = (int) MAX (1.0, 4e9 / flops); /* about 20 ms a sample at 200 GFLOP/s */

  via_ksdist (k); /* warm-up: threads started, pages touched */
  direct (k);
  for (int r = 0; r < repeats; r++)
    {
      best_ours = MIN (best_ours, seconds (via_ksdist, k, calls));
      best_theirs = MIN (best_theirs, seconds (direct, k, calls));
    }
  *ours = flops / best_ours / 1e9;
  *theirs = flops / best_theirs / 1e9;
}

int
main (int argc, char **argv)
{
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = ks_registry_new ();
  g_autoptr (GError) error = NULL;
  g_autofree char *threads = g_strdup_printf ("openblas.threads=%s", argc > 1 ? argv[1] : "0");
  const int sizes[] = { 16, 64, 256, 512, 1024, 2048 };

  if (!ks_config_set_override (config, threads, &error) || !ks_registry_scan (registry, config, &error)
      || !ks_config_validate (config, &error))
    g_error ("%s", error->message);
  g_autoptr (KsCompute) compute = ks_compute_new (registry, config, "openblas", &error);
  if (compute == NULL)
    {
      fprintf (stderr, "bench-sgemm: %s\n", error->message);
      return 1;
    }
  g_autofree char *what = ks_compute_describe (compute);
  printf ("# %s\n# %6s %12s %12s %8s\n", what, "n", "ksdist GF/s", "cblas GF/s", "ratio");
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      if (argc > 2 && sizes[i] > atoi (argv[2]))
        break;
      Case k = { compute, sizes[i], NULL, NULL, NULL };
      gsize bytes = (gsize) k.n * k.n * sizeof (float);
      k.a = ks_compute_alloc (compute, bytes, NULL);
      k.b = ks_compute_alloc (compute, bytes, NULL);
      k.c = ks_compute_alloc (compute, bytes, NULL);
      for (gsize j = 0; j < (gsize) k.n * k.n; j++)
        k.a[j] = k.b[j] = (float) (j % 7) * 0.25f;
      int repeats = k.n <= 1024 ? 10 : 5;
      double ours, theirs;
      measure (&k, repeats, &ours, &theirs);
      printf ("  %6d %12.1f %12.1f %8.3f\n", k.n, ours, theirs, ours / theirs);
      ks_compute_free_memory (compute, k.a);
      ks_compute_free_memory (compute, k.b);
      ks_compute_free_memory (compute, k.c);
    }
  return 0;
}
