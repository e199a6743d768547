/* The CPU compute backend: host memory and OpenBLAS kernels. */
#include <config.h>

#include <ksdist/compute.h>

#include "kernels.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define ALIGNMENT 64 /* a cache line, and enough for AVX-512 loads */

typedef struct {
  int threads;
  int kernel_threads; /* threads, or 1 when OpenBLAS is not on OpenMP's pool (two pools) */
  /* the convolutions' scratch, kept between calls (megabytes each: allocated per call,
   * their pages were faulted in anew every time) */
  GMutex scratch_lock;
  float *scratch;
  gsize scratch_floats;
} OpenblasCtx;

/* A positive count from the environment variable `name`, or 0. */
static int
env_count (const char *name)
{
  const char *v = g_getenv (name);
  guint64 n;
  return v != NULL && g_ascii_string_to_unsigned (v, 10, 1, 4096, &n, NULL) ? (int) n : 0;
}

/* threads = 0: what a launcher asked for (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS), else
 * this machine's cores shared by the processes the launcher started here (ksdist launch
 * and torchrun set LOCAL_WORLD_SIZE, mpirun OMPI_COMM_WORLD_LOCAL_SIZE), so N workers on
 * one host do not each take every core. */
static int
default_threads (void)
{
  int asked = env_count ("OPENBLAS_NUM_THREADS"), local;
  if (asked == 0)
    asked = env_count ("OMP_NUM_THREADS");
  if (asked > 0)
    return asked;
  if ((local = env_count ("LOCAL_WORLD_SIZE")) == 0)
    local = env_count ("OMPI_COMM_WORLD_LOCAL_SIZE");
  return MAX (1, (int) g_get_num_processors () / MAX (local, 1));
}

/* The most threads the loaded OpenBLAS was built for (its MAX_THREADS, which it prints
 * in its config string), or 0 where it does not say. Above it OpenBLAS silently runs
 * fewer threads than ksdist's kernels would. */
static int
build_max_threads (void)
{
  const char *at = strstr (openblas_get_config (), "MAX_THREADS=");
  return at != NULL ? atoi (at + strlen ("MAX_THREADS=")) : 0;
}

/* Each OpenBLAS thread reserves a buffer (128 MB on x86-64 builds) and a stack in the
 * address space; past an address-space limit (ulimit -v) its thread start fails and the
 * first sgemm waits forever for the missing thread. Measured with OpenBLAS 0.3.21: under
 * 4 GB, 29 threads run and 30 hang; under 8 GB, 59 and 60. The most threads that fit in
 * what the limit leaves, or G_MAXINT without a limit. */
#define BLAS_BUFFER_BYTES ((guint64) 128 << 20)
static int
address_space_threads (guint64 *limit_mb)
{
  struct rlimit as, stack;
  unsigned long pages = 0;
  FILE *statm;

  if (getrlimit (RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY)
    return G_MAXINT;
  *limit_mb = as.rlim_cur >> 20;
  if ((statm = fopen ("/proc/self/statm", "r")) != NULL)
    {
      if (fscanf (statm, "%lu", &pages) != 1)
        pages = 0;
      fclose (statm);
    }
  guint64 used = (guint64) pages * sysconf (_SC_PAGESIZE);
  guint64 stack_bytes = getrlimit (RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY
                            ? stack.rlim_cur
                            : (guint64) 8 << 20;
  if (used >= as.rlim_cur)
    return 1;
  return (int) MIN ((guint64) G_MAXINT,
                    MAX (1, (as.rlim_cur - used) / (BLAS_BUFFER_BYTES + stack_bytes)));
}

/* Threads asked for (`n_threads` > 0, [openblas] threads) beyond what the loaded OpenBLAS
 * can run are refused as a configuration error; the default (0) is capped, with a
 * warning, since no one chose it. */
static gboolean
fit_threads (int n_threads, gboolean setting, int *threads, GError **error)
{
  guint64 limit_mb = 0;
  int build = build_max_threads (), space = address_space_threads (&limit_mb);
  int most = MIN (build > 0 ? build : G_MAXINT, space);

  if (*threads <= most)
    return TRUE;
  g_autofree char *why
      = most == build
            ? g_strdup_printf ("the OpenBLAS loaded runs at most %d (MAX_THREADS=%d in "
                               "\"%s\")", build, build, openblas_get_config ())
            : g_strdup_printf ("under this process's address-space limit (ulimit -v, %"
                               G_GUINT64_FORMAT " MB) at most %d fit, each reserving a "
                               "%" G_GUINT64_FORMAT " MB buffer and a stack, and OpenBLAS "
                               "would hang in its first sgemm",
                               limit_mb, most, BLAS_BUFFER_BYTES >> 20);
  if (n_threads > 0 && setting)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[openblas] threads = %d: %s; set [openblas] threads to %d or fewer%s",
                   n_threads, why, most, most == build ? "" : ", or raise ulimit -v");
      return FALSE;
    }
  if (n_threads > 0) /* ks_compute_set_threads */
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "openblas: %d threads: %s; ask for %d or fewer", n_threads, why, most);
      return FALSE;
    }
  g_warning ("openblas: %d threads by default, but %s: running %d", *threads, why, most);
  *threads = most;
  return TRUE;
}

static gboolean
apply_threads (OpenblasCtx *ctx, int n_threads, gboolean setting, GError **error)
{
  int threads;

  if (n_threads < 0)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "openblas: thread count %d is negative (0 means one per core)", n_threads);
      return FALSE;
    }
  threads = n_threads > 0 ? n_threads : default_threads ();
  if (!fit_threads (n_threads, setting, &threads, error))
    return FALSE;
  ctx->threads = threads;
  openblas_set_num_threads (ctx->threads);
  /* asked of the OpenBLAS loaded, not of the one configure saw: another may have been
   * loaded first, under the same soname */
  ctx->kernel_threads = openblas_get_parallel () == 2 ? ctx->threads : 1;
  return TRUE;
}

int
ks_openblas_threads (void *ctx)
{
  return ((OpenblasCtx *) ctx)->kernel_threads;
}

static void openblas_destroy (void *p);

static void *
openblas_create (const KsSettings *settings, GError **error)
{
  OpenblasCtx *ctx = g_new0 (OpenblasCtx, 1);
  g_mutex_init (&ctx->scratch_lock);
  if (!apply_threads (ctx, (int) ks_settings_get_int (settings, "threads"), TRUE, error))
    {
      openblas_destroy (ctx);
      return NULL;
    }
  return ctx;
}

static void
openblas_destroy (void *p)
{
  OpenblasCtx *ctx = p;
  g_mutex_clear (&ctx->scratch_lock);
  free (ctx->scratch);
  g_free (ctx);
}

float *
ks_openblas_scratch_take (void *p, gsize floats, const char *what, GError **error)
{
  OpenblasCtx *ctx = p;
  void *got = NULL;
  gsize bytes;

  g_mutex_lock (&ctx->scratch_lock);
  if (floats <= ctx->scratch_floats)
    return ctx->scratch;
  free (ctx->scratch);
  ctx->scratch = NULL;
  ctx->scratch_floats = 0;
  /* checked, not g_new: a failure is the caller's error, not an abort of the job */
  if (!g_size_checked_mul (&bytes, floats, sizeof (float))
      || posix_memalign (&got, ALIGNMENT, bytes) != 0)
    {
      g_mutex_unlock (&ctx->scratch_lock);
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_NO_MEMORY,
                   "openblas: %s: cannot allocate %" G_GSIZE_FORMAT " MiB of scratch; free "
                   "memory, or use smaller images, fewer channels or fewer [openblas] threads",
                   what, floats / (1 << 18));
      return NULL;
    }
  ctx->scratch = got;
  ctx->scratch_floats = floats;
  return ctx->scratch;
}

void
ks_openblas_scratch_give (void *p)
{
  g_mutex_unlock (&((OpenblasCtx *) p)->scratch_lock);
}

static char *
openblas_describe (void *p)
{
  OpenblasCtx *ctx = p;
  return g_strdup_printf ("OpenBLAS (%s), %d thread%s", openblas_get_config (), ctx->threads,
                          ctx->threads == 1 ? "" : "s");
}

static void *
openblas_alloc (void *ctx, gsize nbytes, GError **error)
{
  void *ptr = NULL;
  (void) ctx;
  /* posix_memalign, not g_malloc: aligned for vector loads, and a failure is an error
   * the caller can report instead of an abort. */
  if (posix_memalign (&ptr, ALIGNMENT, MAX (nbytes, 1)) != 0)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_NO_MEMORY,
                   "openblas: cannot allocate %" G_GSIZE_FORMAT " bytes of host memory", nbytes);
      return NULL;
    }
  return ptr;
}

static void
openblas_free (void *ctx, void *ptr)
{
  (void) ctx;
  free (ptr);
}

static gboolean
openblas_copy (void *ctx, void *dst, const void *src, gsize nbytes, GError **error)
{
  (void) ctx;
  (void) error;
  memmove (dst, src, nbytes);
  return TRUE;
}

static gboolean
openblas_fill_zero (void *ctx, void *ptr, gsize nbytes, GError **error)
{
  (void) ctx;
  (void) error;
  memset (ptr, 0, nbytes);
  return TRUE;
}

static gboolean
openblas_synchronize (void *ctx, GError **error)
{
  (void) ctx;
  (void) error;
  return TRUE; /* every call returns when its work is done */
}

static gboolean
openblas_set_threads (void *ctx, int n_threads, GError **error)
{
  return apply_threads (ctx, n_threads, FALSE, error);
}

static enum CBLAS_TRANSPOSE
cblas_trans (KsTranspose t)
{
  return t == KS_TRANS_T ? CblasTrans : CblasNoTrans;
}

/* Below this many multiply-adds a product runs on one thread: waking the sleeping pool
 * (ksdist runs OpenMP's threads passive) costs more than a second thread gains, where
 * OpenBLAS splits from 65536 x 4. OpenBLAS 0.3.21's OpenMP build on a 2-core AMD EPYC,
 * one thread against two (m x n x k, us): 256x64x64 12 against 80, 256x64x256 49
 * against 73, 128x256x256 97 against 91, 128x512x512 397 against 273. */
enum { SGEMM_THREADED_MIN = 1 << 23 };

/* Whether a product of m x n x k is small, and if so OpenBLAS set to one thread until
 * all_threads. OpenBLAS's count is the process's: this assumes one calling thread, as
 * ksdist's trainer is (its other threads never reach OpenBLAS). */
static gboolean
one_thread_if_small (OpenblasCtx *ctx, int m, int n, int k)
{
  if (ctx->threads <= 1 || (gint64) m * n * k >= SGEMM_THREADED_MIN)
    return FALSE;
  openblas_set_num_threads (1);
  return TRUE;
}

static void
all_threads (OpenblasCtx *ctx)
{
  openblas_set_num_threads (ctx->threads);
}

static void
sgemm_rows (KsTranspose ta, KsTranspose tb, int m, int n, int k, float alpha, const float *a,
            int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
  /* beta = 0 on rows that lie end to end: one memset, then beta = 1. OpenBLAS's own
   * zeroing goes column by column of its column-major view, a loop per row of C here,
   * slow for the narrow outputs of convolutions (16 or 32 filters a pixel). */
  if (beta == 0 && ldc == n && m > 0 && n > 0)
    {
      memset (c, 0, (gsize) m * n * sizeof *c);
      beta = 1;
    }
  cblas_sgemm (CblasRowMajor, cblas_trans (ta), cblas_trans (tb), m, n, k, alpha, a, lda, b, ldb,
               beta, c, ldc);
}

static gboolean
openblas_sgemm (void *ctx, KsTranspose ta, KsTranspose tb, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
                GError **error)
{
  gboolean small = one_thread_if_small (ctx, m, n, k);
  (void) error;
  sgemm_rows (ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (small)
    all_threads (ctx);
  return TRUE;
}

static gboolean
openblas_sgemm_strided_batched (void *ctx, KsTranspose ta, KsTranspose tb, int m, int n, int k,
                                float alpha, const float *a, int lda, gint64 stride_a,
                                const float *b, int ldb, gint64 stride_b, float beta, float *c,
                                int ldc, gint64 stride_c, int batch, GError **error)
{
  gboolean small = one_thread_if_small (ctx, m, n, k); /* once for the batch */
  (void) error;
  for (int i = 0; i < batch; i++)
    sgemm_rows (ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
                c + i * stride_c, ldc);
  if (small)
    all_threads (ctx);
  return TRUE;
}

/* The name and traits; a test builds copies under other names (tests/local.mk) that the
 * core must judge by their traits as it does this one, one of them declaring device
 * memory for the plan's checks of a GPU backend. */
#ifndef KS_OPENBLAS_NAME
#define KS_OPENBLAS_NAME "openblas"
#endif
#ifndef KS_OPENBLAS_TRAITS
#define KS_OPENBLAS_TRAITS 0 /* host memory */
#endif

static const KsComputeOps openblas_ops = {
  .size = sizeof (KsComputeOps),
  .create = openblas_create,
  .destroy = openblas_destroy,
  .alloc = openblas_alloc,
  .free = openblas_free,
  .copy_to_device = openblas_copy,
  .copy_to_host = openblas_copy,
  .describe = openblas_describe,
  .copy_on_device = openblas_copy,
  .fill_zero = openblas_fill_zero,
  .synchronize = openblas_synchronize,
  .set_threads = openblas_set_threads,
  .sgemm = openblas_sgemm,
  .sgemm_strided_batched = openblas_sgemm_strided_batched,
  .unary = ks_openblas_unary,
  .unary_backward = ks_openblas_unary_backward,
  .binary = ks_openblas_binary,
  .reduce = ks_openblas_reduce,
  .softmax = ks_openblas_softmax,
  .layer_norm = ks_openblas_layer_norm,
  .layer_norm_backward = ks_openblas_layer_norm_backward,
  .embedding = ks_openblas_embedding,
  .embedding_backward = ks_openblas_embedding_backward,
  .cross_entropy = ks_openblas_cross_entropy,
  .update = ks_openblas_update,
  .softmax_backward = ks_openblas_softmax_backward,
  .axpby = ks_openblas_axpby,
  .transpose = ks_openblas_transpose,
  .dropout_mask = ks_openblas_dropout_mask,
  .im2col = ks_openblas_im2col,
  .col2im = ks_openblas_col2im,
  .max_pool = ks_openblas_max_pool,
  .batch_norm = ks_openblas_batch_norm,
  .batch_norm_backward = ks_openblas_batch_norm_backward,
  .attention = ks_openblas_attention,
  .attention_backward = ks_openblas_attention_backward,
  .convert = ks_openblas_convert,
  .gemm_half = ks_openblas_gemm_half,
  .find_nonfinite = ks_openblas_find_nonfinite,
  .avg_pool = ks_openblas_avg_pool,
  .avg_pool_backward = ks_openblas_avg_pool_backward,
  .traits = KS_OPENBLAS_TRAITS,
  .conv2d = ks_openblas_conv2d,
  .conv2d_backward = ks_openblas_conv2d_backward,
};

static int
openblas_query (char **reason)
{
  (void) reason;
  return 10; /* always usable; a GPU backend, when present, ranks above */
}

static const KsImplDesc openblas_impls[] = {
  { KS_KIND_COMPUTE, KS_OPENBLAS_NAME, &openblas_ops, openblas_query,
    "host memory, OpenBLAS sgemm, the CPU kernels of training" },
};

static const KsKeyDesc openblas_settings[] = {
  { NULL, "threads", KS_VALUE_INT, "0", 0, 4096, NULL,
    "Threads for OpenBLAS and ksdist's CPU kernels (one pool, so they never oversubscribe "
    "the cores); 0 = OPENBLAS_NUM_THREADS or OMP_NUM_THREADS if set, else the cores "
    "divided among the processes launched on this machine" },
};

static const KsPluginDesc openblas_plugin = {
  .abi_major = KS_ABI_MAJOR,
  .abi_minor = KS_ABI_MINOR,
  .name = KS_OPENBLAS_NAME,
  .version = PACKAGE_VERSION,
  .description = "CPU compute backend on OpenBLAS",
  .impls = openblas_impls,
  .n_impls = G_N_ELEMENTS (openblas_impls),
  .settings = openblas_settings,
  .n_settings = G_N_ELEMENTS (openblas_settings),
};

KS_PLUGIN_DEFINE (openblas_plugin)
