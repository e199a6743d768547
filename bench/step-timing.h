/* Timing of training steps for the bench programs that run beside PyTorch
 * (bench/run-vs-torch.sh reads their one output line: ms/step, peak RSS in MiB). */
#ifndef KS_BENCH_STEP_TIMING_H
#define KS_BENCH_STEP_TIMING_H

#include <ksdist/ksdist.h>

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

/* The compute of a bench program run as `PROGRAM [THREADS [BACKEND ...]]`: `config` gets
 * openblas.threads = THREADS (default 1) when the backend is openblas (another's plugin
 * path need not reach openblas) and the --set lines `sets` (NULL-terminated), `registry`
 * the plugins; the backend is BACKEND (default openblas). Aborts with the reason. */
static inline KsCompute *
ks_bench_compute (int argc, char **argv, const char *const *sets, KsConfig *config,
                  KsRegistry *registry)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *threads = g_strdup_printf ("openblas.threads=%s", argc > 1 ? argv[1] : "1");
  const char *backend = argc > 2 ? argv[2] : "openblas";
  KsCompute *compute;

  if (strcmp (backend, "openblas") == 0 && !ks_config_set_override (config, threads, &error))
    g_error ("%s", error->message);
  for (int i = 0; sets[i] != NULL; i++)
    if (!ks_config_set_override (config, sets[i], &error))
      g_error ("%s", error->message);
  if (!ks_registry_scan (registry, config, &error) || !ks_config_validate (config, &error)
      || (compute = ks_compute_new (registry, config, backend, &error))
             == NULL)
    g_error ("%s", error->message);
  return compute;
}

static inline void
ks_bench_step (KsOptimizer *optimizer, const KsFeed *feeds, gsize n_feeds)
{
  g_autoptr (GError) error = NULL;
  if (!ks_optimizer_step (optimizer, feeds, n_feeds, &error))
    g_error ("%s", error->message);
}

static inline void
ks_bench_sync (KsCompute *compute)
{
  g_autoptr (GError) error = NULL;
  if (!ks_compute_synchronize (compute, &error))
    g_error ("%s", error->message);
}

/* `warmup` steps, then the best of `rounds` rounds of `steps` steps; prints the line.
 * A round ends when the device has finished its work (GPU kernels run asynchronously). */
static inline void
ks_bench_time_steps (KsCompute *compute, KsOptimizer *optimizer, const KsFeed *feeds,
                     gsize n_feeds, int warmup, int steps, int rounds)
{
  struct rusage usage;
  double best = G_MAXDOUBLE;

  for (int i = 0; i < warmup; i++)
    ks_bench_step (optimizer, feeds, n_feeds);
  ks_bench_sync (compute);
  for (int r = 0; r < rounds; r++)
    {
      gint64 t0 = g_get_monotonic_time ();
      for (int i = 0; i < steps; i++)
        ks_bench_step (optimizer, feeds, n_feeds);
      ks_bench_sync (compute);
      best = MIN (best, (g_get_monotonic_time () - t0) / 1e3 / steps);
    }
  getrusage (RUSAGE_SELF, &usage);
  printf ("%.2f %ld\n", best, usage.ru_maxrss / 1024);
}

#endif
