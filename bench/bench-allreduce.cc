/* Raw Gloo's allreduce of float32, 4 KiB to 64 MiB, between N processes on this
 * machine: each of its algorithm classes called directly on the caller's buffer, with
 * nothing of ksdist in between; the reference `ksdist bench allreduce` is compared with
 * (bench/run-allreduce.sh). Time per call and busbw = bytes/time · 2(n−1)/n; zeros are
 * summed, so the values stay finite.
 *
 *   bench/bench-allreduce [N] [--json]      (N processes, default 2) */
#include <glib.h>
#include <glib/gstdio.h>

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
  gloo::transport::tcp::attr attr;
  /* bench/run-cluster.sh: the host's own address, one rank per host */
  const char *host = getenv ("KS_BENCH_HOSTNAME");
  attr.hostname = host != NULL && *host != '\0' ? host : "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice (attr);
  gloo::rendezvous::FileStore file_store (dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context> (rank, n);
  ctx->connectFullMesh (file_store, device);
  gloo::BarrierAllToAll barrier (ctx);

  if (rank == 0 && json)
    printf ("{\"what\": \"allreduce\", \"comm\": \"raw gloo\", \"ranks\": %d, \"results\": [", n);
  else if (rank == 0)
    printf ("# raw Gloo allreduce: %d ranks, float32 sum; time in us, busbw in GB/s\n"
            "# %10s %10s %10s %10s %10s %10s\n",
            n, "size (B)", raw_names[0], raw_names[1], raw_names[2], raw_names[3], "best busbw");
  for (size_t bytes = 4096; bytes <= (64u << 20); bytes *= 4)
    {
      int count = (int) (bytes / sizeof (float));
      std::vector<float> buf (count, 0.0f);
      double times[n_raw], best = 1e30;
      int best_which = 0;
      for (int which = 0; which < n_raw; which++)
        {
          times[which] = -1;
          if (which == 3 && (n & (n - 1)) != 0)
            continue; /* bcube: powers of two */
          std::unique_ptr<gloo::Algorithm> a (make_raw (which, ctx, buf.data (), count));
          times[which] = time_calls (barrier, bytes, [&] { a->run (); });
          if (times[which] < best)
            best = times[which], best_which = which;
        }
      double busbw = bytes / best / 1e9 * 2.0 * (n - 1) / n;
      if (rank == 0 && json)
        printf ("%s\n  {\"bytes\": %zu, \"algorithm\": \"%s\", \"time_us\": %.2f, "
                "\"busbw\": %.4f}",
                bytes == 4096 ? "" : ",", bytes, raw_names[best_which], best * 1e6, busbw);
      else if (rank == 0)
        printf ("  %10zu %10.1f %10.1f %10.1f %10.1f %10.3f\n", bytes, times[0] * 1e6,
                times[1] * 1e6, times[2] * 1e6, times[3] * 1e6, busbw);
      fflush (stdout);
    }
  if (rank == 0 && json)
    printf ("\n]}\n");
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
