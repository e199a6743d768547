/* `auto`: the ring below small_bytes (lowest latency), and above it the algorithm with
 * the best bandwidth where the ranks are.
 *
 * One host (loopback, memory speed): halving-doubling. The default 1 MiB is where it
 * overtook the ring for 2 ranks here (best of 3 runs of `ksdist bench allreduce --set
 * gloo.algorithm=X`: 256 KiB ring 282 us, HD 347 us; 1 MiB ring 1232 us, HD 986 us).
 *
 * Several hosts (a link slower than memory): ring_chunked, which keeps every link busy
 * in both directions, where halving-doubling sends log2(N) rounds of halves that leave
 * links idle. 4 namespace hosts of tools/cluster.sh, 1gbit links (0.125 GB/s), busbw
 * GB/s at 1/4/16 MiB: ring_chunked 0.113/0.114/0.104, halving-doubling 0.081/0.077/0.071,
 * ring 0.056/0.049/0.047 (doc/benchmarks.md, "Across hosts"). */
#include "choose.h"

#include <string.h>

const char *
ks_gloo_choose (const char *algorithm, gint64 small_bytes, gboolean several_hosts, gsize bytes)
{
  if (strcmp (algorithm, "auto") != 0)
    return algorithm;
  if ((gint64) bytes < small_bytes)
    return "ring";
  return several_hosts ? "ring_chunked" : "halving_doubling";
}
