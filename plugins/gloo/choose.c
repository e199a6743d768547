/* `auto`: the ring for small messages (lowest latency), and above auto_small_bytes the
 * algorithm with the best bandwidth where the ranks are.
 *
 * One host (loopback, memory speed): halving-doubling. The default 1 MiB is where it
 * overtook the ring for 2 ranks here (best of 3 runs of `ksdist bench allreduce --set
 * gloo.algorithm=X`: 256 KiB ring 282 us, HD 347 us; 1 MiB ring 1232 us, HD 986 us).
 *
 * Several hosts (a link slower than memory): ring_chunked, which keeps every link busy
 * in both directions, where halving-doubling sends log2(N) rounds of halves that leave
 * links idle and Gloo's ring forwards the whole message N-1 times (busbw at most 2/N of
 * the link). 4 namespace hosts of tools/cluster.sh, 1gbit links (0.125 GB/s), busbw GB/s
 * at 1/4/16 MiB: ring_chunked 0.113/0.114/0.104, halving-doubling 0.081/0.077/0.071,
 * ring 0.056/0.049/0.047 (doc/benchmarks.md, "Across hosts").
 * Below 1 MiB ring_chunked's 2N chunks are small, and its speed there depends on the
 * TCP receive window the earlier traffic left (256 KiB: 0.043-0.111; 512 KiB alone:
 * 0.028-0.036, after smaller sizes 0.105-0.109), where halving-doubling held
 * 0.070-0.093 at 256 KiB and 0.085-0.089 at 512 KiB, and the ring 0.059 (its 2/N). So
 * with more than 2 ranks across hosts, halving-doubling from auto_hosts_ring_bytes (128
 * KiB: below it the ring was as fast or faster) up to auto_small_bytes. With 2 ranks the
 * ring sends each byte once each way, as halving-doubling does: the ring up to
 * auto_small_bytes. */
#include "choose.h"

#include <string.h>

static gboolean
middle_band (const KsGlooAuto *a)
{
  return a->several_hosts && a->ranks > 2 && a->hosts_ring_bytes < a->small_bytes;
}

const char *
ks_gloo_choose (const char *algorithm, const KsGlooAuto *a, gsize bytes)
{
  if (strcmp (algorithm, "auto") != 0)
    return algorithm;
  if ((gint64) bytes >= a->small_bytes)
    return a->several_hosts ? "ring_chunked" : "halving_doubling";
  if (middle_band (a) && (gint64) bytes >= a->hosts_ring_bytes)
    return "halving_doubling";
  return "ring";
}

char *
ks_gloo_auto_describe (const KsGlooAuto *a)
{
  const char *large = a->several_hosts ? "ring_chunked" : "halving_doubling";
  if (middle_band (a))
    return g_strdup_printf ("the ring below %" G_GINT64_FORMAT " bytes ([gloo] "
                            "auto_hosts_ring_bytes), halving_doubling below %" G_GINT64_FORMAT
                            " ([gloo] auto_small_bytes), %s from there",
                            a->hosts_ring_bytes, a->small_bytes, large);
  return g_strdup_printf ("the ring below %" G_GINT64_FORMAT " bytes ([gloo] auto_small_bytes), "
                          "%s from there", a->small_bytes, large);
}
