/* Settings that the plugins' libraries read once, from the environment, when they first
 * load: set here before the first dlopen, each only where the user has not set it. */
#include "loader.h"

#include <string.h>

/* OpenMP's threads (OpenBLAS's OpenMP build and the openblas plugin's kernels share its
 * pool) spin between parallel regions by default: on cores other processes also use, a
 * spinning thread holds the core the thread it waits for needs (2 threads ran the CNN of
 * examples/cnn-idx.ini 15 to 27 times slower than 1 on a busy 2-core machine). Sleeping
 * between regions costs a wake-up each; OMP_WAIT_POLICY=active keeps the spinning, for
 * cores of one's own. libgomp reads it once, when a plugin first loads it. */
static void
omp_wait_passive (void)
{
  if (g_getenv ("OMP_WAIT_POLICY") == NULL && g_getenv ("GOMP_SPINCOUNT") == NULL)
    g_setenv ("OMP_WAIT_POLICY", "passive", FALSE);
}

/* OpenBLAS builds for many CPUs (DYNAMIC_ARCH) choose their kernels by the CPU's model:
 * Debian 12's 0.3.21 takes an AMD Zen 4, which has AVX-512, for a Zen, whose kernels are
 * Haswell's (AVX2), and runs sgemm at half the speed its AVX-512 kernels reach there (99
 * against 190 GFLOP/s on one core of an EPYC Zen 4, bench/bench-sgemm 1). Later OpenBLAS
 * releases take such AMD CPUs for the Intel ones with the same instructions, the choice
 * made here, by what the CPU and the operating system support. Intel CPUs are left to
 * OpenBLAS, which knows them. */
static const char *
openblas_core_for_cpu (void)
{
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init ();
  if (!__builtin_cpu_is ("amd") || !__builtin_cpu_supports ("avx512f")
      || !__builtin_cpu_supports ("avx512bw") || !__builtin_cpu_supports ("avx512dq")
      || !__builtin_cpu_supports ("avx512vl"))
    return NULL;
  return __builtin_cpu_supports ("avx512bf16") ? "Cooperlake" : "SkylakeX";
#else
  return NULL;
#endif
}

static void
openblas_core (void)
{
  const char *core = openblas_core_for_cpu ();
  if (core != NULL && g_getenv ("OPENBLAS_CORETYPE") == NULL)
    g_setenv ("OPENBLAS_CORETYPE", core, FALSE);
}

void
ks_library_env_prepare (void)
{
  static gsize once = 0;
  if (g_once_init_enter (&once))
    {
      omp_wait_passive ();
      openblas_core ();
      g_once_init_leave (&once, 1);
    }
}
