/* The CPU kernels of convolutional networks on NHWC images: im2col and its adjoint,
 * max and average pooling, batch normalisation. A convolution is im2col then sgemm (a few
 * images at a time, model-conv.c), so the heavy work stays in OpenBLAS; these loops move
 * memory (conv-gemm.c runs whole convolutions, blocks of rows on each thread). Sums
 * accumulate in double. Images are split over the plugin's threads (KS_PARALLEL,
 * vector.h): an image's work keeps its order, so any thread count gives the same bits. */
#include <config.h>

/* As in kernels.c: -O3's vectoriser checks aliasing at run time where -O2's gives up, and
 * without trapping math the max pool's comparisons become selects. */
#pragma GCC optimize ("O3", "no-trapping-math")

#include "kernels.h"
#include "vector.h"

#include <string.h>
#include <math.h>

/* The pixels the windows span, padding included: ph x pw of them, the image's pixel
 * (iy, ix) at (iy + pad, ix + pad) when inside. */
typedef struct {
  gsize ph, pw, c;
} Padded;

static Padded
padded_of (const KsConvShape *s)
{
  return (Padded) { (gsize) (s->oh - 1) * s->stride + s->kh,
                    (gsize) (s->ow - 1) * s->stride + s->kw, s->c };
}

/* The rows [0, ph) of one image, padded: each a copy of its pixels framed by zeros. */
static void
pad_image (const float *image, float *padded, const Padded *p, const KsConvShape *s)
{
  gsize inside_w = MIN ((gsize) s->w, p->pw - s->pad), row = p->pw * p->c;
  for (gsize py = 0; py < p->ph; py++)
    {
      float *d = padded + py * row;
      gint64 iy = (gint64) py - s->pad;
      if (iy < 0 || iy >= s->h)
        {
          memset (d, 0, row * sizeof *d);
          continue;
        }
      gsize left = (gsize) s->pad * p->c, copied = inside_w * p->c;
      memset (d, 0, left * sizeof *d);
      memcpy (d + left, image + (gsize) iy * s->w * p->c, copied * sizeof *d);
      memset (d + left + copied, 0, (row - left - copied) * sizeof *d);
    }
}

/* The other way: the image's pixels out of the padded rows (the frame dropped). */
static void
unpad_image (const float *padded, float *image, const Padded *p, const KsConvShape *s)
{
  gsize inside_w = MIN ((gsize) s->w, p->pw - s->pad), row = p->pw * p->c;
  for (gsize iy = 0; iy < (gsize) s->h; iy++)
    {
      float *d = image + iy * s->w * p->c;
      if (iy + s->pad >= p->ph)
        {
          memset (d, 0, (gsize) s->w * p->c * sizeof *d);
          continue;
        }
      memcpy (d, padded + (iy + s->pad) * row + (gsize) s->pad * p->c,
              inside_w * p->c * sizeof *d);
      memset (d + inside_w * p->c, 0, ((gsize) s->w - inside_w) * p->c * sizeof *d);
    }
}

/* d += src over a window row (kw * c floats) */
static inline void
add_floats (float *restrict d, const float *restrict src, gsize n)
{
  for (gsize j = 0; j < n; j++)
    d[j] += src[j];
}

gsize
ks_openblas_padded_floats (const KsConvShape *s)
{
  Padded p = padded_of (s);
  return p.ph * p.pw * p.c;
}

/* Each image padded once (into `padded`, ks_openblas_padded_floats), so every window row
 * is one copy of kw * c floats from it. */
KS_VECTOR_KERNEL void
ks_openblas_im2col_image (const float *image, float *col, const KsConvShape *s, float *padded)
{
  Padded p = padded_of (s);
  gsize seg = (gsize) s->kw * s->c, row_len = s->kh * seg, step = (gsize) s->stride * s->c;

  pad_image (image, padded, &p, s);
  for (int oy = 0; oy < s->oh; oy++)
    for (int ky = 0; ky < s->kh; ky++)
      {
        const float *src = padded + ((gsize) oy * s->stride + ky) * p.pw * p.c;
        float *d = col + (gsize) oy * s->ow * row_len + ky * seg;
        for (int ox = 0; ox < s->ow; ox++)
          memcpy (d + ox * row_len, src + ox * step, seg * sizeof *d);
      }
}

/* The adjoint of im2col for one image, summed into a zeroed padded image, whose inside is
 * dx's image: the image's sums keep one order. */
KS_VECTOR_KERNEL void
ks_openblas_col2im_image (const float *col, float *image, const KsConvShape *s, float *padded)
{
  Padded p = padded_of (s);
  gsize seg = (gsize) s->kw * s->c, row_len = s->kh * seg, step = (gsize) s->stride * s->c;

  memset (padded, 0, p.ph * p.pw * p.c * sizeof *padded);
  for (int oy = 0; oy < s->oh; oy++)
    for (int ky = 0; ky < s->kh; ky++)
      {
        float *d = padded + ((gsize) oy * s->stride + ky) * p.pw * p.c;
        const float *src = col + (gsize) oy * s->ow * row_len + ky * seg;
        for (int ox = 0; ox < s->ow; ox++)
          add_floats (d + ox * step, src + ox * row_len, seg);
      }
  unpad_image (padded, image, &p, s);
}

KS_VECTOR_KERNEL gboolean
ks_openblas_im2col (void *ctx, const float *x, float *col, const KsConvShape *s, GError **error)
{
  gsize pixels = (gsize) s->oh * s->ow, k = (gsize) s->kh * s->kw * s->c;

  KS_PARALLEL (ctx, (gsize) s->n * pixels * k)
  {
    KsShare part = ks_share_rows (s->n);
    float *padded = part.n > 0 ? g_new (float, ks_openblas_padded_floats (s)) : NULL;
    for (gsize n = part.begin; n < part.begin + part.n; n++)
      ks_openblas_im2col_image (x + n * s->h * s->w * s->c, col + n * pixels * k, s, padded);
    g_free (padded);
  }
  return TRUE;
}

/* Images are split over the threads. */
KS_VECTOR_KERNEL gboolean
ks_openblas_col2im (void *ctx, const float *col, float *dx, const KsConvShape *s, GError **error)
{
  gsize pixels = (gsize) s->oh * s->ow, k = (gsize) s->kh * s->kw * s->c;

  KS_PARALLEL (ctx, (gsize) s->n * pixels * k)
  {
    KsShare part = ks_share_rows (s->n);
    float *padded = part.n > 0 ? g_new (float, ks_openblas_padded_floats (s)) : NULL;
    for (gsize n = part.begin; n < part.begin + part.n; n++)
      ks_openblas_col2im_image (col + n * pixels * k, dx + n * s->h * s->w * s->c, s, padded);
    g_free (padded);
  }
  return TRUE;
}

/* best and at: one window's running maximum and its index in x; tap: the c channels of
 * the pixel at index `in` of x. Without branches, so the loop vectorises. */
static inline void
max_pool_tap (float *restrict best, gint64 *restrict at, const float *restrict tap, gint64 in,
              gsize c)
{
  for (gsize j = 0; j < c; j++)
    {
      /* a larger tap wins; a NaN wins and stays (NaN > m and m > NaN are both false), as
       * in PyTorch */
      float v = tap[j], m = best[j];
      gboolean take = (v > m) | ((v != v) & (m == m));
      best[j] = take ? v : m;
      at[j] = take ? in + (gint64) j : at[j];
    }
}

/* Each window starts from its first tap, then meets every tap (the first again changes
 * nothing). */
KS_VECTOR_KERNEL gboolean
ks_openblas_max_pool (void *ctx, const float *x, float *y, gint64 *argmax, const KsConvShape *s,
                      GError **error)
{
  gsize c = s->c;
  KS_PARALLEL (ctx, (gsize) s->n * s->oh * s->ow * c * s->kh * s->kw)
  {
    KsShare part = ks_share_rows (s->n);
    for (gsize n = part.begin; n < part.begin + part.n; n++)
      for (int oy = 0; oy < s->oh; oy++)
        for (int ox = 0; ox < s->ow; ox++)
          {
            gsize out = ((n * s->oh + oy) * s->ow + ox) * c;
            gint64 first = (((gint64) n * s->h + oy * s->stride) * s->w + ox * s->stride) * c;
            for (gsize j = 0; j < c; j++)
              y[out + j] = x[first + j], argmax[out + j] = first + (gint64) j;
            for (int ky = 0; ky < s->kh; ky++)
              for (int kx = 0; kx < s->kw; kx++)
                {
                  gint64 in = first + ((gint64) ky * s->w + kx) * c;
                  max_pool_tap (y + out, argmax + out, x + in, in, c);
                }
          }
  }
  return TRUE;
}

/* Each window's taps on the image summed in double, over kh * kw (padding counts as 0). */
gboolean
ks_openblas_avg_pool (void *ctx, const float *x, float *y, const KsConvShape *s, GError **error)
{
  double inv = 1.0 / ((double) s->kh * s->kw);
  KS_PARALLEL (ctx, (gsize) s->n * s->oh * s->ow * s->c * s->kh * s->kw)
  {
    KsShare part = ks_share_rows (s->n);
    double *sum = g_new (double, s->c);
    for (gsize n = part.begin; n < part.begin + part.n; n++)
      for (int oy = 0; oy < s->oh; oy++)
        for (int ox = 0; ox < s->ow; ox++)
          {
            float *out = y + (((gsize) n * s->oh + oy) * s->ow + ox) * s->c;
            int y0, y1, x0, x1;
            ks_openblas_taps_inside (oy, s->stride, s->pad, s->kh, s->h, &y0, &y1);
            ks_openblas_taps_inside (ox, s->stride, s->pad, s->kw, s->w, &x0, &x1);
            memset (sum, 0, s->c * sizeof *sum);
            for (int ky = y0; ky < y1; ky++)
              for (int kx = x0; kx < x1; kx++)
                {
                  int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad + kx;
                  const float *in = x + (((gsize) n * s->h + iy) * s->w + ix) * s->c;
                  for (int j = 0; j < s->c; j++)
                    sum[j] += in[j];
                }
            for (int j = 0; j < s->c; j++)
              out[j] = (float) (sum[j] * inv);
          }
    g_free (sum);
  }
  return TRUE;
}

/* The adjoint: dx (zeroed first) gets dy / (kh * kw) at every tap on the image. */
gboolean
ks_openblas_avg_pool_backward (void *ctx, const float *dy, float *dx, const KsConvShape *s,
                               GError **error)
{
  float inv = (float) (1.0 / ((double) s->kh * s->kw));
  KS_PARALLEL (ctx, (gsize) s->n * s->oh * s->ow * s->c * s->kh * s->kw)
  {
    KsShare part = ks_share_rows (s->n); /* each image's taps land in its own image */
    memset (dx + part.begin * s->h * s->w * s->c, 0, part.n * s->h * s->w * s->c * sizeof *dx);
    for (gsize n = part.begin; n < part.begin + part.n; n++)
      for (int oy = 0; oy < s->oh; oy++)
        for (int ox = 0; ox < s->ow; ox++)
          {
            const float *g = dy + (((gsize) n * s->oh + oy) * s->ow + ox) * s->c;
            int y0, y1, x0, x1;
            ks_openblas_taps_inside (oy, s->stride, s->pad, s->kh, s->h, &y0, &y1);
            ks_openblas_taps_inside (ox, s->stride, s->pad, s->kw, s->w, &x0, &x1);
            for (int ky = y0; ky < y1; ky++)
              for (int kx = x0; kx < x1; kx++)
                {
                  int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad + kx;
                  float *d = dx + (((gsize) n * s->h + iy) * s->w + ix) * s->c;
                  for (int j = 0; j < s->c; j++)
                    d[j] += g[j] * inv;
                }
          }
  }
  return TRUE;
}

gboolean
ks_openblas_batch_norm (void *ctx, const float *x, const float *gamma, const float *beta,
                        float *y, float *mean, float *var, gsize rows, gsize cols, float eps,
                        gboolean training, GError **error)
{
  g_autofree float *scale = g_new (float, cols), *shift = g_new (float, cols);
  g_autofree double *sum = g_new0 (double, cols), *sq = g_new0 (double, cols);

  /* each thread the statistics of its columns (summed in row order), then y of its rows */
  KS_PARALLEL (ctx, rows * cols)
  {
    KsShare part = ks_share_aligned (cols, 1);
    gsize end = part.begin + part.n;
    if (training)
      {
        for (gsize r = 0; r < rows; r++)
          for (gsize j = part.begin; j < end; j++)
            sum[j] += x[r * cols + j];
        for (gsize j = part.begin; j < end; j++)
          mean[j] = (float) (sum[j] / rows);
        for (gsize r = 0; r < rows; r++)
          for (gsize j = part.begin; j < end; j++)
            {
              double d = x[r * cols + j] - mean[j];
              sq[j] += d * d;
            }
        for (gsize j = part.begin; j < end; j++)
          var[j] = (float) (sq[j] / rows);
      }
    /* y = x * scale + shift per column */
    for (gsize j = part.begin; j < end; j++)
      {
        double rstd = 1 / sqrt ((double) var[j] + eps);
        scale[j] = (float) (gamma[j] * rstd);
        shift[j] = (float) (beta[j] - mean[j] * gamma[j] * rstd);
      }
    KS_BARRIER;
    KsShare mine = ks_share_rows (rows);
    for (gsize r = mine.begin; r < mine.begin + mine.n; r++)
      for (gsize j = 0; j < cols; j++)
        y[r * cols + j] = x[r * cols + j] * scale[j] + shift[j];
  }
  return TRUE;
}

gboolean
ks_openblas_batch_norm_backward (void *ctx, const float *x, const float *gamma, const float *mean,
                                 const float *var, const float *dy, float *dx, float *dgamma,
                                 float *dbeta, gsize rows, gsize cols, float eps,
                                 gboolean training, GError **error)
{
  g_autofree double *rstd = g_new (double, cols);
  g_autofree double *sum_dy = g_new0 (double, cols), *sum_dyx = g_new0 (double, cols);

  /* the sums of its columns on each thread; then (every sum read: dx may be dy) dx of its
   * rows */
  KS_PARALLEL (ctx, rows * cols)
  {
    KsShare part = ks_share_aligned (cols, 1);
    gsize end = part.begin + part.n;
    for (gsize j = part.begin; j < end; j++)
      rstd[j] = 1 / sqrt ((double) var[j] + eps);
    for (gsize r = 0; r < rows; r++)
      for (gsize j = part.begin; j < end; j++)
        {
          double xhat = (x[r * cols + j] - mean[j]) * rstd[j];
          sum_dy[j] += dy[r * cols + j];
          sum_dyx[j] += dy[r * cols + j] * xhat;
        }
    for (gsize j = part.begin; j < end; j++)
      {
        if (dgamma != NULL)
          dgamma[j] += (float) sum_dyx[j];
        if (dbeta != NULL)
          dbeta[j] += (float) sum_dy[j];
      }
    KS_BARRIER;
    /* training: dx = gamma rstd (dy - mean (dy) - xhat mean (dy xhat)), the batch's mean
     * and variance depending on x; otherwise they are constants and dx = gamma rstd dy */
    KsShare mine = ks_share_rows (rows);
    for (gsize r = mine.begin; r < mine.begin + mine.n; r++)
      for (gsize j = 0; j < cols; j++)
        {
          double g = dy[r * cols + j];
          if (training)
            {
              double xhat = (x[r * cols + j] - mean[j]) * rstd[j];
              g -= (sum_dy[j] + xhat * sum_dyx[j]) / rows;
            }
          dx[r * cols + j] = (float) (gamma[j] * rstd[j] * g);
        }
  }
  return TRUE;
}
