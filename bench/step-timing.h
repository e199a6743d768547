/* Timing of training steps for the bench programs that run beside PyTorch
 * (bench/run-vs-torch.sh reads their one output line: ms/step, peak RSS in MiB). */
#ifndef KS_BENCH_STEP_TIMING_H
#define KS_BENCH_STEP_TIMING_H

#include <ksdist/ksdist.h>

#include <stdio.h>
#include <sys/resource.h>

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
