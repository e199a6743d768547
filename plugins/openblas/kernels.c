/* The CPU kernels of training: elementwise, reductions, softmax, layer norm, embedding,
 * cross entropy and the fused optimizer update. Row-major; every kernel may run in
 * place (output == input) unless its comment says otherwise. Sums accumulate in double,
 * or in float lanes folded in double (softmax, layer norm). The elementwise, row-wise and
 * update kernels split their work over the plugin's threads (KS_PARALLEL, vector.h): by
 * ranges, by rows, and layer norm's parameter sums by columns, so that no result depends
 * on the thread count. reduce, embedding and transpose stay on one thread. */
#include <config.h>

/* The loops here may run in place (y == x), so GCC's -O2 vectoriser, which adds no
 * runtime alias checks, leaves them scalar; -O3's adds the checks and vectorises.
 * Without trapping math GCC turns the clamps below into selects (no FP exception flag
 * is ever read here); with it, a loop holding one stays scalar. */
#pragma GCC optimize ("O3", "no-trapping-math")

#include "kernels.h"

#include <ksdist/tensor.h>

#include "vector.h"

#include <math.h>
#include <string.h>

static gboolean
bad_op (GError **error, const char *kernel, int op)
{
  g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
               "openblas: %s: unknown operation %d", kernel, op);
  return FALSE;
}

/* GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh (k (x + c x^3))) */
#define GELU_K 0.7978845608028654f /* sqrt (2 / pi) */
#define GELU_C 0.044715f

/* tanh as a rational function of x, clamped where float tanh is +-1: a few multiplies
 * and one division, no branches, so loops of it vectorise (glibc's tanhf is a scalar
 * call through expm1f, and was a third of a GPT step). Odd numerator of degree 13 over
 * an even denominator of degree 6; within 1e-6 of tanh on the float range. */
static inline float
fast_tanh (float x)
{
  const float clamp = 7.90531110763549805f;
  float v = x > clamp ? clamp : x; /* two single selects: GCC if-converts these, not a nest */
  v = v < -clamp ? -clamp : v;
  float v2 = v * v;
  float p = -2.76076847742355e-16f;
  p = p * v2 + 2.00018790482477e-13f;
  p = p * v2 - 8.60467152213735e-11f;
  p = p * v2 + 5.12229709037114e-08f;
  p = p * v2 + 1.48572235717979e-05f;
  p = p * v2 + 6.37261928875436e-04f;
  p = p * v2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;
  q = q * v2 + 1.18534705686654e-04f;
  q = q * v2 + 2.26843463243900e-03f;
  q = q * v2 + 4.89352518554385e-03f;
  return v * p / q;
}

static inline float
sigmoid (float x)
{
  return x >= 0 ? 1 / (1 + expf (-x)) : expf (x) / (1 + expf (x));
}

/* One loop per operation, the switch outside it, so the compiler vectorises the cheap
 * ones (relu, neg) and calls libm once per element for the others. */
KS_VECTOR_KERNEL static void
unary_part (KsUnaryOp op, const float *x, float *y, gsize n)
{
  switch (op)
    {
    case KS_UNARY_RELU: for (gsize i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0; break;
    case KS_UNARY_TANH: for (gsize i = 0; i < n; i++) y[i] = fast_tanh (x[i]); break;
    case KS_UNARY_SIGMOID: for (gsize i = 0; i < n; i++) y[i] = sigmoid (x[i]); break;
    case KS_UNARY_GELU:
      for (gsize i = 0; i < n; i++)
        y[i] = 0.5f * x[i] * (1 + fast_tanh (GELU_K * (x[i] + GELU_C * x[i] * x[i] * x[i])));
      break;
    case KS_UNARY_EXP: for (gsize i = 0; i < n; i++) y[i] = expf (x[i]); break;
    case KS_UNARY_LOG: for (gsize i = 0; i < n; i++) y[i] = logf (x[i]); break;
    case KS_UNARY_NEG: for (gsize i = 0; i < n; i++) y[i] = -x[i]; break;
    case KS_UNARY_SQRT: for (gsize i = 0; i < n; i++) y[i] = sqrtf (x[i]); break;
    }
}

gboolean
ks_openblas_unary (void *ctx, KsUnaryOp op, const float *x, float *y, gsize n, GError **error)
{
  if ((guint) op > KS_UNARY_SQRT)
    return bad_op (error, "unary", op);
  KS_PARALLEL (ctx, n)
  {
    KsShare s = ks_share (n);
    unary_part (op, x + s.begin, y + s.begin, s.n);
  }
  return TRUE;
}

/* dx = dy * f'(x); y = f(x) when given, else recomputed */
KS_VECTOR_KERNEL static void
unary_backward_part (KsUnaryOp op, const float *x, const float *y, const float *dy, float *dx,
                     gsize n)
{
  switch (op)
    {
    case KS_UNARY_RELU:
      for (gsize i = 0; i < n; i++)
        dx[i] = x[i] > 0 ? dy[i] : 0;
      break;
    case KS_UNARY_TANH:
      for (gsize i = 0; i < n; i++)
        {
          float t = y != NULL ? y[i] : fast_tanh (x[i]);
          dx[i] = dy[i] * (1 - t * t);
        }
      break;
    case KS_UNARY_SIGMOID:
      for (gsize i = 0; i < n; i++)
        {
          float s = y != NULL ? y[i] : sigmoid (x[i]);
          dx[i] = dy[i] * s * (1 - s);
        }
      break;
    case KS_UNARY_GELU:
      for (gsize i = 0; i < n; i++)
        {
          float v = x[i], t = fast_tanh (GELU_K * (v + GELU_C * v * v * v));
          dx[i] = dy[i] * (0.5f * (1 + t)
                           + 0.5f * v * (1 - t * t) * GELU_K * (1 + 3 * GELU_C * v * v));
        }
      break;
    case KS_UNARY_EXP:
      for (gsize i = 0; i < n; i++)
        dx[i] = dy[i] * (y != NULL ? y[i] : expf (x[i]));
      break;
    case KS_UNARY_LOG: for (gsize i = 0; i < n; i++) dx[i] = dy[i] / x[i]; break;
    case KS_UNARY_NEG: for (gsize i = 0; i < n; i++) dx[i] = -dy[i]; break;
    case KS_UNARY_SQRT:
      for (gsize i = 0; i < n; i++)
        dx[i] = dy[i] * 0.5f / (y != NULL ? y[i] : sqrtf (x[i]));
      break;
    }
}

gboolean
ks_openblas_unary_backward (void *ctx, KsUnaryOp op, const float *x, const float *y,
                            const float *dy, float *dx, gsize n, GError **error)
{
  if ((guint) op > KS_UNARY_SQRT)
    return bad_op (error, "unary_backward", op);
  KS_PARALLEL (ctx, n)
  {
    KsShare s = ks_share (n);
    unary_backward_part (op, x + s.begin, y != NULL ? y + s.begin : NULL, dy + s.begin,
                         dx + s.begin, s.n);
  }
  return TRUE;
}

KS_VECTOR_KERNEL static void
binary_part (KsBinaryOp op, const float *a, const float *b, float *c, gsize rows, gsize cols,
             gsize b_rows)
{
  for (gsize r = 0; r < rows; r++)
    {
      const float *ar = a + r * cols, *br = b + (b_rows == 1 ? 0 : r * cols);
      float *cr = c + r * cols;
      switch (op)
        {
        case KS_BINARY_ADD: for (gsize j = 0; j < cols; j++) cr[j] = ar[j] + br[j]; break;
        case KS_BINARY_SUB: for (gsize j = 0; j < cols; j++) cr[j] = ar[j] - br[j]; break;
        case KS_BINARY_MUL: for (gsize j = 0; j < cols; j++) cr[j] = ar[j] * br[j]; break;
        case KS_BINARY_DIV: for (gsize j = 0; j < cols; j++) cr[j] = ar[j] / br[j]; break;
        }
    }
}

gboolean
ks_openblas_binary (void *ctx, KsBinaryOp op, const float *a, const float *b, float *c,
                    gsize rows, gsize cols, gsize b_rows, GError **error)
{
  if ((guint) op > KS_BINARY_DIV)
    return bad_op (error, "binary", op);
  if (b_rows != 1 || rows == 1) /* b is as large as a: one row of rows * cols */
    cols *= rows, rows = b_rows = 1;
  KS_PARALLEL (ctx, rows * cols)
  {
    if (rows == 1) /* split the row */
      {
        KsShare s = ks_share (cols);
        binary_part (op, a + s.begin, b + s.begin, c + s.begin, 1, s.n, 1);
      }
    else /* split the rows; b is the one row broadcast */
      {
        KsShare s = ks_share_rows (rows);
        binary_part (op, a + s.begin * cols, b, c + s.begin * cols, s.n, cols, 1);
      }
  }
  return TRUE;
}

static inline double
reduce_start (KsReduceOp op)
{
  switch (op)
    {
    case KS_REDUCE_MIN: return INFINITY;
    case KS_REDUCE_MAX: return -INFINITY;
    case KS_REDUCE_PROD: return 1;
    case KS_REDUCE_SUM: case KS_REDUCE_AVG: break;
    }
  return 0;
}

static inline double
reduce_step (KsReduceOp op, double acc, double v)
{
  switch (op)
    {
    case KS_REDUCE_MIN: return v < acc ? v : acc;
    case KS_REDUCE_MAX: return v > acc ? v : acc;
    case KS_REDUCE_PROD: return acc * v;
    case KS_REDUCE_SUM: case KS_REDUCE_AVG: break;
    }
  return acc + v;
}

/* y must not overlap x. Over rows (axis 0) the accumulators are a row walked in memory
 * order, row after row; over columns each row folds into one. */
KS_VECTOR_KERNEL gboolean
ks_openblas_reduce (void *ctx, KsReduceOp op, const float *x, float *y, gsize rows, gsize cols,
                    int axis, GError **error)
{
  gsize outer = axis == 0 ? cols : rows, inner = axis == 0 ? rows : cols;
  g_autofree double *acc = NULL;

  if ((guint) op > KS_REDUCE_PROD)
    return bad_op (error, "reduce", op);
  acc = g_new (double, MAX (outer, 1));
  /* each thread its outputs (columns over rows, or rows), each summed in one order */
  KS_PARALLEL (ctx, rows * cols)
  {
    KsShare part = axis == 0 ? ks_share (cols) : ks_share_rows (rows);
    gsize end = part.begin + part.n;
    for (gsize o = part.begin; o < end; o++)
      acc[o] = reduce_start (op);
    if (axis == 0 && (op == KS_REDUCE_SUM || op == KS_REDUCE_AVG))
      /* column sums (bias gradients): the same additions, in a loop that vectorises */
      for (gsize r = 0; r < rows; r++)
        for (gsize j = part.begin; j < end; j++)
          acc[j] += x[r * cols + j];
    else if (axis == 0)
      for (gsize r = 0; r < rows; r++)
        for (gsize j = part.begin; j < end; j++)
          acc[j] = reduce_step (op, acc[j], x[r * cols + j]);
    else
      for (gsize r = part.begin; r < end; r++)
        for (gsize j = 0; j < cols; j++)
          acc[r] = reduce_step (op, acc[r], x[r * cols + j]);
    for (gsize o = part.begin; o < end; o++)
      y[o] = (float) (op == KS_REDUCE_AVG && inner > 0 ? acc[o] / inner : acc[o]);
  }
  return TRUE;
}

KS_VECTOR_KERNEL static void
softmax_part (const float *x, float *y, gsize rows, gsize cols, gboolean log_softmax)
{
  g_autofree float *terms = log_softmax ? g_new (float, cols) : NULL; /* y may be x */

  for (gsize r = 0; r < rows; r++)
    {
      const float *xr = x + r * cols;
      float *yr = y + r * cols;
      float max = row_max (xr, cols);
      if (log_softmax)
        {
          float shift = max + (float) log (exp_sum (xr, max, terms, cols));
          for (gsize j = 0; j < cols; j++)
            yr[j] = xr[j] - shift;
        }
      else
        {
          float scale = (float) (1 / exp_sum (xr, max, yr, cols));
          for (gsize j = 0; j < cols; j++)
            yr[j] *= scale;
        }
    }
}

gboolean
ks_openblas_softmax (void *ctx, const float *x, float *y, gsize rows, gsize cols,
                     gboolean log_softmax, GError **error)
{
  KS_PARALLEL (ctx, rows * cols)
  {
    KsShare s = ks_share_rows (rows);
    softmax_part (x + s.begin * cols, y + s.begin * cols, s.n, cols, log_softmax);
  }
  return TRUE;
}

KS_VECTOR_KERNEL static void
softmax_backward_part (const float *y, const float *dy, float *dx, gsize rows, gsize cols,
                       gboolean log_softmax)
{
  for (gsize r = 0; r < rows; r++)
    {
      const float *yr = y + r * cols, *dyr = dy + r * cols;
      float *dxr = dx + r * cols;
      double dot = 0;
      /* softmax: dx = y (dy - <dy, y>); log-softmax: dx = dy - exp (y) sum (dy) */
      for (gsize j = 0; j < cols; j++)
        dot += log_softmax ? dyr[j] : (double) dyr[j] * yr[j];
      for (gsize j = 0; j < cols; j++)
        dxr[j] = (float) (log_softmax ? dyr[j] - exp (yr[j]) * dot : yr[j] * (dyr[j] - dot));
    }
}

gboolean
ks_openblas_softmax_backward (void *ctx, const float *y, const float *dy, float *dx, gsize rows,
                              gsize cols, gboolean log_softmax, GError **error)
{
  KS_PARALLEL (ctx, rows * cols)
  {
    KsShare s = ks_share_rows (rows);
    gsize at = s.begin * cols;
    softmax_backward_part (y + at, dy + at, dx + at, s.n, cols, log_softmax);
  }
  return TRUE;
}

/* Layer norm's row sums in eight float lanes, folded in double at the end (as exp_sum):
 * the loops vectorise, where double sums converted every element. With m = 0 and s = 1,
 * sums[0] = sum a[j]; else, for g = a gamma and xhat = (x - m) s, sums[0] = sum g and
 * sums[1] = sum g xhat. */
static inline void
lane_sums (const float *a, const float *gamma, const float *x, float m, float s, gsize n,
           double sums[2])
{
  float l0[8] = { 0 }, l1[8] = { 0 };
  gsize j;
  sums[0] = sums[1] = 0;
  for (j = 0; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; k++)
      {
        float g = a[j + k] * (gamma != NULL ? gamma[j + k] : 1);
        l0[k] += g;
        l1[k] += x != NULL ? g * ((x[j + k] - m) * s) : 0;
      }
  for (; j < n; j++)
    {
      float g = a[j] * (gamma != NULL ? gamma[j] : 1);
      sums[0] += g;
      sums[1] += x != NULL ? g * ((x[j] - m) * s) : 0;
    }
  for (int k = 0; k < 8; k++)
    sums[0] += l0[k], sums[1] += l1[k];
}

KS_VECTOR_KERNEL static void
layer_norm_part (const float *x, const float *gamma, const float *beta, float *y, float *mean,
                 float *rstd, gsize rows, gsize cols, float eps)
{
  for (gsize r = 0; r < rows; r++)
    {
      const float *xr = x + r * cols;
      float *yr = y + r * cols;
      double sums[2];
      lane_sums (xr, NULL, NULL, 0, 1, cols, sums);
      float m = (float) (sums[0] / cols);
      /* the centred values go through y (y may be x), so the variance is a sum of
       * squares */
      for (gsize j = 0; j < cols; j++)
        yr[j] = xr[j] - m;
      lane_sums (yr, yr, NULL, 0, 1, cols, sums);
      float s = (float) (1 / sqrt (sums[0] / cols + eps));
      for (gsize j = 0; j < cols; j++)
        yr[j] = yr[j] * s * (gamma ? gamma[j] : 1) + (beta ? beta[j] : 0);
      if (mean != NULL)
        mean[r] = m;
      if (rstd != NULL)
        rstd[r] = s;
    }
}

gboolean
ks_openblas_layer_norm (void *ctx, const float *x, const float *gamma, const float *beta,
                        float *y, float *mean, float *rstd, gsize rows, gsize cols, float eps,
                        GError **error)
{
  KS_PARALLEL (ctx, rows * cols)
  {
    KsShare s = ks_share_rows (rows);
    gsize at = s.begin * cols;
    layer_norm_part (x + at, gamma, beta, y + at, mean != NULL ? mean + s.begin : NULL,
                     rstd != NULL ? rstd + s.begin : NULL, s.n, cols, eps);
  }
  return TRUE;
}

/* dx of rows of layer norm */
KS_VECTOR_KERNEL static void
layer_norm_dx_part (const float *x, const float *gamma, const float *mean, const float *rstd,
                    const float *dy, float *dx, gsize rows, gsize cols)
{
  for (gsize r = 0; r < rows; r++)
    {
      const float *xr = x + r * cols, *dyr = dy + r * cols;
      float *dxr = dx + r * cols;
      float m = mean[r], s = rstd[r];
      double sums[2]; /* of dxhat = dy gamma and of dxhat * xhat */
      lane_sums (dyr, gamma, xr, m, s, cols, sums);
      float mean_g = (float) (sums[0] / cols), mean_gx = (float) (sums[1] / cols);
      for (gsize j = 0; j < cols; j++)
        dxr[j] = s * (dyr[j] * (gamma ? gamma[j] : 1) - mean_g - (xr[j] - m) * s * mean_gx);
    }
}

/* dgamma[j] += sum_r dy[r][j] xhat[r][j] and dbeta[j] += sum_r dy[r][j] for the columns
 * [c0, c0 + n): each thread owns columns, so the sums do not depend on the thread count */
KS_VECTOR_KERNEL static void
layer_norm_params_part (const float *x, const float *mean, const float *rstd, const float *dy,
                        float *dgamma, float *dbeta, gsize rows, gsize cols, gsize c0, gsize n)
{
  for (gsize r = 0; r < rows; r++)
    {
      const float *xr = x + r * cols + c0, *dyr = dy + r * cols + c0;
      float m = mean[r], s = rstd[r];
      if (dgamma != NULL)
        for (gsize j = 0; j < n; j++)
          dgamma[c0 + j] += dyr[j] * ((xr[j] - m) * s);
      if (dbeta != NULL)
        for (gsize j = 0; j < n; j++)
          dbeta[c0 + j] += dyr[j];
    }
}

gboolean
ks_openblas_layer_norm_backward (void *ctx, const float *x, const float *gamma, const float *mean,
                                 const float *rstd, const float *dy, float *dx, float *dgamma,
                                 float *dbeta, gsize rows, gsize cols, GError **error)
{
  KS_PARALLEL (ctx, rows * cols)
  {
    KsShare s = ks_share_rows (rows), c = ks_share (cols);
    gsize at = s.begin * cols;
    /* the parameters' sums read every row: all of them before any dx is written (dx may
     * be x or dy) */
    layer_norm_params_part (x, mean, rstd, dy, dgamma, dbeta, rows, cols, c.begin, c.n);
    KS_BARRIER;
    layer_norm_dx_part (x + at, gamma, mean + s.begin, rstd + s.begin, dy + at, dx + at, s.n,
                        cols);
  }
  return TRUE;
}

/* All ids are checked before anything is written, so a bad batch changes nothing. */
static gboolean
check_ids (const gint64 *ids, gsize n_ids, gsize n_rows, const char *kernel, GError **error)
{
  /* one pass without a branch (it vectorises), then the search only for the message */
  gboolean bad = FALSE;
  for (gsize i = 0; i < n_ids; i++)
    bad |= (guint64) ids[i] >= n_rows;
  for (gsize i = 0; bad && i < n_ids; i++)
    if (ids[i] < 0 || (guint64) ids[i] >= n_rows)
      {
        g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                     "%s: ids[%" G_GSIZE_FORMAT "] = %" G_GINT64_FORMAT " is outside the "
                     "table's %" G_GSIZE_FORMAT " rows",
                     kernel, i, ids[i], n_rows);
        return FALSE;
      }
  return TRUE;
}

gboolean
ks_openblas_embedding (void *ctx, const float *table, gsize n_rows, const gint64 *ids, float *out,
                       gsize n_ids, gsize dim, GError **error)
{
  if (!check_ids (ids, n_ids, n_rows, "embedding", error))
    return FALSE;
  for (gsize i = 0; i < n_ids; i++)
    memcpy (out + i * dim, table + ids[i] * dim, dim * sizeof (float));
  return TRUE;
}

gboolean
ks_openblas_embedding_backward (void *ctx, const float *dout, const gint64 *ids, float *dtable,
                                gsize n_rows, gsize n_ids, gsize dim, GError **error)
{
  if (!check_ids (ids, n_ids, n_rows, "embedding_backward", error))
    return FALSE;
  /* Split by where the sums go, so every element adds its ids' values in their order on
   * any thread count: a thread takes the table's rows [begin, end) and looks at every id
   * when rows are one value (a max pool's backward), else its columns of every row. */
  KS_PARALLEL (ctx, n_ids * MAX (dim, 4))
  {
    if (dim < 32)
      {
        KsShare part = ks_share_rows (n_rows);
        gint64 begin = (gint64) part.begin, end = (gint64) (part.begin + part.n);
        for (gsize i = 0; i < n_ids && part.n > 0; i++)
          if (ids[i] >= begin && ids[i] < end)
            for (gsize j = 0; j < dim; j++)
              dtable[ids[i] * dim + j] += dout[i * dim + j];
      }
    else
      {
        KsShare part = ks_share (dim);
        for (gsize i = 0; i < n_ids && part.n > 0; i++)
          {
            float *d = dtable + ids[i] * dim + part.begin;
            const float *src = dout + i * dim + part.begin;
            for (gsize j = 0; j < part.n; j++)
              d[j] += src[j];
          }
      }
  }
  return TRUE;
}

KS_VECTOR_KERNEL static void
cross_entropy_part (const float *logits, const gint64 *labels, float *losses, float *dlogits,
                    gsize rows, gsize cols)
{
  g_autofree float *terms = dlogits == NULL ? g_new (float, cols) : NULL;
  for (gsize r = 0; r < rows; r++)
    {
      const float *xr = logits + r * cols;
      float *dr = dlogits != NULL ? dlogits + r * cols : terms;
      float max = row_max (xr, cols);
      double sum = exp_sum (xr, max, dr, cols);
      losses[r] = (float) (log (sum) + max - xr[labels[r]]);
      if (dlogits != NULL)
        {
          float scale = (float) (1 / sum);
          for (gsize j = 0; j < cols; j++)
            dr[j] *= scale;
          dr[labels[r]] -= 1;
        }
    }
}

gboolean
ks_openblas_cross_entropy (void *ctx, const float *logits, const gint64 *labels, float *losses,
                           float *dlogits, gsize rows, gsize cols, GError **error)
{
  for (gsize r = 0; r < rows; r++)
    if (labels[r] < 0 || (guint64) labels[r] >= cols)
      {
        g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                     "cross_entropy: labels[%" G_GSIZE_FORMAT "] = %" G_GINT64_FORMAT
                     " is not a class in [0, %" G_GSIZE_FORMAT ")",
                     r, labels[r], cols);
        return FALSE;
      }
  KS_PARALLEL (ctx, rows * cols)
  {
    KsShare s = ks_share_rows (rows);
    cross_entropy_part (logits + s.begin * cols, labels + s.begin, losses + s.begin,
                        dlogits != NULL ? dlogits + s.begin * cols : NULL, s.n, cols);
  }
  return TRUE;
}

KS_VECTOR_KERNEL static void
update_part (const KsUpdateArgs *a, float *p, const float *g, float *s1, float *s2, gsize n)
{
  double bias1 = 1, bias2 = 1;

  if (a->rule == KS_UPDATE_ADAM || a->rule == KS_UPDATE_ADAMW)
    {
      bias1 = 1 - pow (a->beta1, (double) a->step);
      bias2 = 1 - pow (a->beta2, (double) a->step);
    }
  /* Weight decay is L2 in the gradient, except AdamW's decoupled form (PyTorch's rules).
   * One loop per rule, in float, so each vectorises. Adam's bias corrections fold into
   * two constants (as PyTorch's step size and sqrt of bias2): one division per element. */
  const float lr = a->lr, wd = a->weight_decay, mu = a->momentum, eps = a->eps;
  const float b1 = a->beta1, b2 = a->beta2;
  const float step = (float) (a->lr / bias1), inv_sqrt_c2 = (float) (1 / sqrt (bias2));
  switch (a->rule)
    {
    case KS_UPDATE_SGD:
      for (gsize i = 0; i < n; i++)
        p[i] -= lr * (g[i] + wd * p[i]);
      break;
    case KS_UPDATE_MOMENTUM:
      for (gsize i = 0; i < n; i++)
        {
          float gi = g[i] + wd * p[i];
          s1[i] = mu * s1[i] + gi;
          p[i] -= lr * (a->nesterov ? gi + mu * s1[i] : s1[i]);
        }
      break;
    case KS_UPDATE_ADAGRAD:
      for (gsize i = 0; i < n; i++)
        {
          float gi = g[i] + wd * p[i];
          s1[i] += gi * gi;
          p[i] -= lr * gi / (sqrtf (s1[i]) + eps);
        }
      break;
    case KS_UPDATE_ADAM:
    case KS_UPDATE_ADAMW:
      for (gsize i = 0; i < n; i++)
        {
          float gi = g[i];
          if (a->rule == KS_UPDATE_ADAMW)
            p[i] -= lr * wd * p[i];
          else
            gi += wd * p[i];
          s1[i] = b1 * s1[i] + (1 - b1) * gi;
          s2[i] = b2 * s2[i] + (1 - b2) * gi * gi;
          p[i] -= step * s1[i] / (sqrtf (s2[i]) * inv_sqrt_c2 + eps);
        }
      break;
    }
}

gboolean
ks_openblas_update (void *ctx, const KsUpdateArgs *a, float *p, const float *g, float *s1,
                    float *s2, gsize n, GError **error)
{
  KS_PARALLEL (ctx, n)
  {
    KsShare s = ks_share (n);
    update_part (a, p + s.begin, g + s.begin, s1 != NULL ? s1 + s.begin : NULL,
                 s2 != NULL ? s2 + s.begin : NULL, s.n);
  }
  return TRUE;
}

KS_VECTOR_KERNEL void
ks_openblas_axpby_part (float alpha, const float *x, float beta, float *y, gsize n)
{
  if (beta == 0)
    for (gsize i = 0; i < n; i++)
      y[i] = alpha * x[i];
  else
    for (gsize i = 0; i < n; i++)
      y[i] = alpha * x[i] + beta * y[i];
}

gboolean
ks_openblas_axpby (void *ctx, float alpha, const float *x, float beta, float *y, gsize n,
                   GError **error)
{
  KS_PARALLEL (ctx, n)
  {
    KsShare s = ks_share (n);
    ks_openblas_axpby_part (alpha, x + s.begin, beta, y + s.begin, s.n);
  }
  return TRUE;
}

gboolean
ks_openblas_transpose (void *ctx, const float *x, float *y, int ndim, const gint64 *shape,
                       const int *perm, GError **error)
{
  gint64 stride[KS_TENSOR_MAX_DIMS], out_shape[KS_TENSOR_MAX_DIMS] = { 0 };
  gint64 step[KS_TENSOR_MAX_DIMS] = { 0 };
  gint64 index[KS_TENSOR_MAX_DIMS] = { 0 };
  gsize n = 1, src = 0;

  stride[ndim - 1] = 1;
  for (int d = ndim - 1; d > 0; d--)
    stride[d - 1] = stride[d] * shape[d];
  for (int d = 0; d < ndim; d++)
    {
      out_shape[d] = shape[perm[d]];
      step[d] = stride[perm[d]]; /* how far x moves when y's index d moves by one */
      n *= shape[d];
    }
  /* y in memory order, a row of its last dimension at a time, with an odometer over the
   * dimensions before it */
  gint64 inner = out_shape[ndim - 1], inner_step = step[ndim - 1];
  for (gsize o = 0; o < n; o += inner)
    {
      for (gint64 j = 0; j < inner; j++)
        y[o + j] = x[src + j * inner_step];
      for (int d = ndim - 2; d >= 0; d--)
        {
          src += step[d];
          if (++index[d] < out_shape[d])
            break;
          src -= step[d] * out_shape[d];
          index[d] = 0;
        }
    }
  return TRUE;
}

gboolean
ks_openblas_dropout_mask (void *ctx, float *mask, gsize n, float p, guint64 seed, GError **error)
{
  float scale = 1 / (1 - p);
  KS_PARALLEL (ctx, n)
  {
    KsShare s = ks_share (n);
    for (gsize i = s.begin; i < s.begin + s.n; i++)
      mask[i] = ks_dropout_uniform (seed, i) >= p ? scale : 0;
  }
  return TRUE;
}
