/* Allreduce of float32, 4 KiB to 64 MiB, between N processes on this machine: raw Gloo
 * (each of its algorithm classes, called directly on the caller's buffer) beside the
 * ksdist gloo communicator ([gloo] algorithm = auto, through the core's ks_comm_allreduce).
 * Columns as nccl-tests: time, algbw = bytes/time, busbw = algbw·2(n−1)/n.
 *
 *   bench/bench-allreduce [N] [--json]      (N processes, default 2)
 *
 * Needs KS_PLUGIN_PATH to reach the store and gloo plugins (`make bench` sets it). */
#include <config.h>
#include <ksdist/ksdist.h>

#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

const char *const raw_names[] = { "ring", "ring_chunked", "halving_doubling", "bcube" };
const int n_raw = 4;

int
iterations (size_t bytes)
{
  return (int) std::max<size_t> (5, std::min<size_t> (200, (size_t) (256 << 20) / bytes));
}

/* Seconds per call of `run`, after two warm-up calls and a barrier. */
template <typename F>
double
time_calls (gloo::Algorithm &barrier, size_t bytes, F run)
{
  run ();
  run ();
  barrier.run ();
  int iters = iterations (bytes);
  gint64 start = g_get_monotonic_time ();
  for (int i = 0; i < iters; i++)
    run ();
  return (g_get_monotonic_time () - start) / 1e6 / iters;
}

gloo::Algorithm *
make_raw (int which, std::shared_ptr<gloo::Context> ctx, float *buf, int count)
{
  std::vector<float *> ptrs{ buf };
  switch (which)
    {
    case 0: return new gloo::AllreduceRing<float> (ctx, ptrs, count);
    case 1: return new gloo::AllreduceRingChunked<float> (ctx, ptrs, count);
    case 2: return new gloo::AllreduceHalvingDoubling<float> (ctx, ptrs, count);
    default: return new gloo::AllreduceBcube<float> (ctx, ptrs, count);
    }
}

int
run_rank (int rank, int n, const char *dir, bool json)
{
  /* raw Gloo: its own file store and context */
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice (attr);
  std::string raw_dir = std::string (dir) + "/raw";
  g_mkdir_with_parents (raw_dir.c_str (), 0700);
  gloo::rendezvous::FileStore file_store (raw_dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context> (rank, n);
  ctx->connectFullMesh (file_store, device);
  gloo::BarrierAllToAll barrier (ctx);

  /* ksdist */
  g_autoptr (GError) error = NULL;
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = ks_registry_new ();
  if (!ks_registry_scan (registry, config, &error) || !ks_config_validate (config, &error))
    g_error ("%s", error->message);
  g_autoptr (KsStore) store = ks_store_new (registry, config, "file", &error);
  g_autoptr (KsComm) comm = store ? ks_comm_new (registry, config, "gloo", &error) : NULL;
  if (comm == NULL || !ks_store_open (store, dir, "ksdist", NULL, &error)
      || !ks_comm_connect (comm, store, rank, n, 60000, &error))
    g_error ("rank %d: %s", rank, error ? error->message : "no comm");

  if (rank == 0 && !json)
    printf ("%d processes, float32 sum; time in us, busbw in GB/s\n%10s %-16s %9s %7s %9s %7s "
            "%7s\n",
            n, "bytes", "best raw Gloo", "time", "busbw", "ksdist", "busbw", "ratio");
  if (rank == 0 && json)
    printf ("[");
  for (size_t bytes = 4096; bytes <= (64u << 20); bytes *= 4)
    {
      int count = (int) (bytes / sizeof (float));
      std::vector<float> buf (count, 1.0f);
      double best = 1e30;
      int best_which = 0;
      for (int which = 0; which < n_raw; which++)
        {
          if (which == 3 && (n & (n - 1)) != 0)
            continue; /* bcube: powers of two */
          std::unique_ptr<gloo::Algorithm> a (make_raw (which, ctx, buf.data (), count));
          double t = time_calls (barrier, bytes, [&] { a->run (); });
          if (t < best)
            best = t, best_which = which;
        }
      double ks = time_calls (barrier, bytes, [&] {
        if (!ks_comm_allreduce (comm, buf.data (), count, KS_DTYPE_FLOAT32, KS_REDUCE_SUM, &error))
          g_error ("%s", error->message);
      });
      double factor = 2.0 * (n - 1) / n;
      double raw_bus = bytes / best / 1e9 * factor, ks_bus = bytes / ks / 1e9 * factor;
      if (rank == 0 && !json)
        printf ("%10zu %-16s %9.1f %7.3f %9.1f %7.3f %7.2f\n", bytes, raw_names[best_which],
                best * 1e6, raw_bus, ks * 1e6, ks_bus, best / ks);
      if (rank == 0 && json)
        printf ("%s\n {\"bytes\": %zu, \"raw_algorithm\": \"%s\", \"raw_us\": %.1f, "
                "\"raw_busbw\": %.4f, \"ksdist_us\": %.1f, \"ksdist_busbw\": %.4f, "
                "\"speed_ratio\": %.3f}",
                bytes == 4096 ? "" : ",", bytes, raw_names[best_which], best * 1e6, raw_bus,
                ks * 1e6, ks_bus, best / ks);
      fflush (stdout);
    }
  if (rank == 0 && json)
    printf ("\n]\n");
  return 0;
}

} // namespace

int
main (int argc, char **argv)
{
  if (argc == 6 && strcmp (argv[1], "--rank") == 0)
    return run_rank (atoi (argv[2]), atoi (argv[3]), argv[4], strcmp (argv[5], "json") == 0);
  int n = argc > 1 && argv[1][0] != '-' ? atoi (argv[1]) : 2;
  bool json = argc > 1 && strcmp (argv[argc - 1], "--json") == 0;
  g_autofree char *dir = g_dir_make_tmp ("ksdist-bench-XXXXXX", NULL);
  std::vector<pid_t> kids;
  int failed = 0;

  for (int r = 0; r < n; r++)
    {
      pid_t pid = fork ();
      if (pid == 0)
        {
          std::string rs = std::to_string (r), ns = std::to_string (n);
          execl ("/proc/self/exe", argv[0], "--rank", rs.c_str (), ns.c_str (), dir,
                 json ? "json" : "text", (char *) NULL);
          _exit (127);
        }
      kids.push_back (pid);
    }
  for (pid_t pid : kids)
    {
      int status;
      waitpid (pid, &status, 0);
      failed |= !WIFEXITED (status) || WEXITSTATUS (status) != 0;
    }
  std::string rm = std::string ("rm -rf '") + dir + "'";
  if (system (rm.c_str ()) != 0)
    failed = 1;
  return failed;
}
