/* Mixed precision on the CPU: 16-bit floats stored (half.h's rounding), float32
 * arithmetic. A half-precision product widens its operands into float32 scratch and runs
 * OpenBLAS's sgemm, so it gives exactly the sums a GPU's float32 accumulation gives up to
 * the order of addition. */
#include <config.h>

#include <ksdist/half.h>

#include "kernels.h"
#include "vector.h"

#include <cblas.h>

static void
to_half_part (const float *x, guint16 *y, gsize n, gboolean bf16)
{
  if (bf16)
    for (gsize i = 0; i < n; i++)
      y[i] = ks_float_to_bf16 (x[i]);
  else
    for (gsize i = 0; i < n; i++)
      y[i] = ks_float_to_fp16 (x[i]);
}

static void
from_half_part (const guint16 *x, float *y, gsize n, gboolean bf16)
{
  if (bf16)
    for (gsize i = 0; i < n; i++)
      y[i] = ks_bf16_to_float (x[i]);
  else
    for (gsize i = 0; i < n; i++)
      y[i] = ks_fp16_to_float (x[i]);
}

static void
widen (void *ctx, const guint16 *x, float *y, gsize n, gboolean bf16)
{
  KS_PARALLEL (ctx, n)
  {
    KsShare s = ks_share (n);
    from_half_part (x + s.begin, y + s.begin, s.n, bf16);
  }
}

gboolean
ks_openblas_convert (void *ctx, const void *x, KsDType x_dtype, void *y, KsDType y_dtype,
                     gsize n, GError **error)
{
  (void) error;
  if (x_dtype == KS_DTYPE_FLOAT32)
    {
      gboolean bf16 = y_dtype == KS_DTYPE_BFLOAT16;
      KS_PARALLEL (ctx, n)
      {
        KsShare s = ks_share (n);
        to_half_part ((const float *) x + s.begin, (guint16 *) y + s.begin, s.n, bf16);
      }
    }
  else
    widen (ctx, x, y, n, x_dtype == KS_DTYPE_BFLOAT16);
  return TRUE;
}

/* Elements a row-major operand of `rows` rows of `cols` with leading dimension ld spans */
static gsize
span (int rows, int cols, int ld)
{
  return rows == 0 || cols == 0 ? 0 : (gsize) (rows - 1) * ld + cols;
}

gboolean
ks_openblas_gemm_half (void *ctx, KsDType dtype, KsTranspose ta, KsTranspose tb, int m, int n,
                       int k, float alpha, const void *a, int lda, const void *b, int ldb,
                       float beta, float *c, int ldc, GError **error)
{
  gboolean bf16 = dtype == KS_DTYPE_BFLOAT16;
  gsize a_n = ta == KS_TRANS_N ? span (m, k, lda) : span (k, m, lda);
  gsize b_n = tb == KS_TRANS_N ? span (k, n, ldb) : span (n, k, ldb);
  float *wide = g_try_malloc ((a_n + b_n) * sizeof (float) + 1);

  if (wide == NULL)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_NO_MEMORY,
                   "gemm_half: no memory to widen %" G_GSIZE_FORMAT " operand elements",
                   a_n + b_n);
      return FALSE;
    }
  widen (ctx, a, wide, a_n, bf16);
  widen (ctx, b, wide + a_n, b_n, bf16);
  cblas_sgemm (CblasRowMajor, ta == KS_TRANS_T ? CblasTrans : CblasNoTrans,
               tb == KS_TRANS_T ? CblasTrans : CblasNoTrans, m, n, k, alpha, wide, lda,
               wide + a_n, ldb, beta, c, ldc);
  g_free (wide);
  return TRUE;
}

gboolean
ks_openblas_find_nonfinite (void *ctx, const float *x, gsize n, float *found, GError **error)
{
  guint32 bad = 0;

  (void) ctx;
  (void) error;
  /* an all-ones exponent is infinity or NaN; no early exit, so the loop vectorises */
  for (gsize i = 0; i < n; i++)
    bad |= (ks_float_bits (x[i]) & 0x7f800000u) == 0x7f800000u;
  found[0] = bad ? 1.0f : 0.0f;
  return TRUE;
}
