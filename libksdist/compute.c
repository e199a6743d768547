/* The compute backend as the rest of ksdist calls it: every method through a slot check. */
#include "ks-private.h"

#define OPS(c) KS_INSTANCE_OPS (&(c)->instance, KsComputeOps)
#define CTX(c) ((c)->instance.ctx)
#define REQUIRE(c, field, error) KS_REQUIRE_SLOT (&(c)->instance, KsComputeOps, field, error)

KsCompute *
ks_compute_new (KsRegistry *registry, const KsConfig *config, const char *name, GError **error)
{
  if (name == NULL)
    name = ks_config_get_string (config, "compute", "backend");
  return (KsCompute *) ks_instance_new (registry, config, KS_KIND_COMPUTE, name,
                                        sizeof (KsCompute), error);
}

void
ks_compute_free (KsCompute *compute)
{
  ks_instance_free ((KsInstance *) compute);
}

const char *
ks_compute_plugin (const KsCompute *compute)
{
  return compute->instance.plugin->name;
}

char *
ks_compute_describe (KsCompute *compute)
{
  if (KS_OPS_HAS (OPS (compute), KsComputeOps, describe))
    return OPS (compute)->describe (CTX (compute));
  return g_strdup_printf ("%s (plugin %s)", compute->instance.impl->name,
                          ks_compute_plugin (compute));
}

void *
ks_compute_alloc (KsCompute *compute, gsize nbytes, GError **error)
{
  return OPS (compute)->alloc (CTX (compute), nbytes, error);
}

void
ks_compute_free_memory (KsCompute *compute, void *ptr)
{
  if (ptr != NULL)
    OPS (compute)->free (CTX (compute), ptr);
}

gboolean
ks_compute_copy_to_device (KsCompute *compute, void *dst, const void *src, gsize nbytes,
                           GError **error)
{
  return OPS (compute)->copy_to_device (CTX (compute), dst, src, nbytes, error);
}

gboolean
ks_compute_copy_to_host (KsCompute *compute, void *dst, const void *src, gsize nbytes,
                         GError **error)
{
  return OPS (compute)->copy_to_host (CTX (compute), dst, src, nbytes, error);
}

gboolean
ks_compute_fill_zero (KsCompute *compute, void *ptr, gsize nbytes, GError **error)
{
  REQUIRE (compute, fill_zero, error);
  return OPS (compute)->fill_zero (CTX (compute), ptr, nbytes, error);
}

gboolean
ks_compute_synchronize (KsCompute *compute, GError **error)
{
  REQUIRE (compute, synchronize, error);
  return OPS (compute)->synchronize (CTX (compute), error);
}

gboolean
ks_compute_set_threads (KsCompute *compute, int n_threads, GError **error)
{
  REQUIRE (compute, set_threads, error);
  return OPS (compute)->set_threads (CTX (compute), n_threads, error);
}

/* Row-major shapes: op(A) is m x k, so A is m x k (lda >= k) or k x m (lda >= m). */
static gboolean
check_gemm (KsTranspose ta, KsTranspose tb, int m, int n, int k, int lda, int ldb, int ldc,
            GError **error)
{
  int need_a = ta == KS_TRANS_N ? k : m;
  int need_b = tb == KS_TRANS_N ? n : k;

  if (m < 0 || n < 0 || k < 0 || lda < MAX (1, need_a) || ldb < MAX (1, need_b)
      || ldc < MAX (1, n))
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "sgemm: bad shape m=%d n=%d k=%d lda=%d ldb=%d ldc=%d (row-major: lda "
                   "must be at least %d, ldb at least %d, ldc at least %d)",
                   m, n, k, lda, ldb, ldc, MAX (1, need_a), MAX (1, need_b), MAX (1, n));
      return FALSE;
    }
  return TRUE;
}

gboolean
ks_compute_sgemm (KsCompute *compute, KsTranspose ta, KsTranspose tb, int m, int n, int k,
                  float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                  float *c, int ldc, GError **error)
{
  REQUIRE (compute, sgemm, error);
  if (!check_gemm (ta, tb, m, n, k, lda, ldb, ldc, error))
    return FALSE;
  return OPS (compute)->sgemm (CTX (compute), ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                               ldc, error);
}

gboolean
ks_compute_sgemm_strided_batched (KsCompute *compute, KsTranspose ta, KsTranspose tb, int m,
                                  int n, int k, float alpha, const float *a, int lda,
                                  gint64 stride_a, const float *b, int ldb, gint64 stride_b,
                                  float beta, float *c, int ldc, gint64 stride_c, int batch,
                                  GError **error)
{
  REQUIRE (compute, sgemm_strided_batched, error);
  if (!check_gemm (ta, tb, m, n, k, lda, ldb, ldc, error))
    return FALSE;
  if (batch < 0)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "sgemm_strided_batched: negative batch count %d", batch);
      return FALSE;
    }
  return OPS (compute)->sgemm_strided_batched (CTX (compute), ta, tb, m, n, k, alpha, a, lda,
                                               stride_a, b, ldb, stride_b, beta, c, ldc,
                                               stride_c, batch, error);
}
