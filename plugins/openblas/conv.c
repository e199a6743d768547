/* The CPU kernels of convolutional networks on NHWC images: im2col and its adjoint,
 * max and average pooling, batch normalisation. A convolution is im2col then one sgemm, so the
 * heavy work stays in OpenBLAS; these loops move memory. Sums accumulate in double. */
#include <config.h>

#include "kernels.h"

#include <string.h>
#include <math.h>

/* The first pixel of window (oy, ox) along one axis, and how many of its kernel taps
 * fall inside the image: taps [k0, k1) are inside. */
static inline void
taps_inside (int o, int stride, int pad, int k, int size, int *k0, int *k1)
{
  int start = o * stride - pad;
  *k0 = start < 0 ? -start : 0;
  *k1 = start + k > size ? size - start : k;
}

gboolean
ks_openblas_im2col (void *ctx, const float *x, float *col, const KsConvShape *s, GError **error)
{
  gsize tap = s->c, row_len = (gsize) s->kh * s->kw * s->c;
  for (int n = 0; n < s->n; n++)
    for (int oy = 0; oy < s->oh; oy++)
      for (int ox = 0; ox < s->ow; ox++)
        {
          float *dst = col + (((gsize) n * s->oh + oy) * s->ow + ox) * row_len;
          int y0, y1, x0, x1;
          taps_inside (oy, s->stride, s->pad, s->kh, s->h, &y0, &y1);
          taps_inside (ox, s->stride, s->pad, s->kw, s->w, &x0, &x1);
          for (int ky = 0; ky < s->kh; ky++)
            {
              float *d = dst + (gsize) ky * s->kw * tap;
              if (ky < y0 || ky >= y1)
                {
                  memset (d, 0, s->kw * tap * sizeof *d);
                  continue;
                }
              int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad;
              const float *src = x + (((gsize) n * s->h + iy) * s->w + ix) * tap;
              if (x0 > 0)
                memset (d, 0, x0 * tap * sizeof *d);
              memcpy (d + x0 * tap, src + x0 * tap, (x1 - x0) * tap * sizeof *d);
              if (x1 < s->kw)
                memset (d + x1 * tap, 0, (s->kw - x1) * tap * sizeof *d);
            }
        }
  return TRUE;
}

gboolean
ks_openblas_col2im (void *ctx, const float *col, float *dx, const KsConvShape *s, GError **error)
{
  gsize tap = s->c, row_len = (gsize) s->kh * s->kw * s->c;
  memset (dx, 0, (gsize) s->n * s->h * s->w * s->c * sizeof *dx);
  for (int n = 0; n < s->n; n++)
    for (int oy = 0; oy < s->oh; oy++)
      for (int ox = 0; ox < s->ow; ox++)
        {
          const float *src = col + (((gsize) n * s->oh + oy) * s->ow + ox) * row_len;
          int y0, y1, x0, x1;
          taps_inside (oy, s->stride, s->pad, s->kh, s->h, &y0, &y1);
          taps_inside (ox, s->stride, s->pad, s->kw, s->w, &x0, &x1);
          for (int ky = y0; ky < y1; ky++)
            {
              int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad;
              float *d = dx + (((gsize) n * s->h + iy) * s->w + ix) * tap;
              const float *c = src + (gsize) ky * s->kw * tap;
              for (gsize j = x0 * tap; j < x1 * tap; j++)
                d[j] += c[j];
            }
        }
  return TRUE;
}

gboolean
ks_openblas_max_pool (void *ctx, const float *x, float *y, gint64 *argmax, const KsConvShape *s,
                      GError **error)
{
  for (int n = 0; n < s->n; n++)
    for (int oy = 0; oy < s->oh; oy++)
      for (int ox = 0; ox < s->ow; ox++)
        {
          gsize out = (((gsize) n * s->oh + oy) * s->ow + ox) * s->c;
          for (int ky = 0; ky < s->kh; ky++)
            for (int kx = 0; kx < s->kw; kx++)
              {
                gsize in = (((gsize) n * s->h + oy * s->stride + ky) * s->w + ox * s->stride + kx)
                           * s->c;
                for (int j = 0; j < s->c; j++)
                  /* the first tap sets it; later ones win when larger; a NaN wins and
                   * stays (NaN > y and y > NaN are both false), as in PyTorch */
                  if ((ky == 0 && kx == 0) || x[in + j] > y[out + j]
                      || (isnan (x[in + j]) && !isnan (y[out + j])))
                    {
                      y[out + j] = x[in + j];
                      argmax[out + j] = (gint64) (in + j);
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
  g_autofree double *sum = g_new (double, s->c);
  for (int n = 0; n < s->n; n++)
    for (int oy = 0; oy < s->oh; oy++)
      for (int ox = 0; ox < s->ow; ox++)
        {
          float *out = y + (((gsize) n * s->oh + oy) * s->ow + ox) * s->c;
          int y0, y1, x0, x1;
          taps_inside (oy, s->stride, s->pad, s->kh, s->h, &y0, &y1);
          taps_inside (ox, s->stride, s->pad, s->kw, s->w, &x0, &x1);
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
  return TRUE;
}

/* The adjoint: dx (zeroed first) gets dy / (kh * kw) at every tap on the image. */
gboolean
ks_openblas_avg_pool_backward (void *ctx, const float *dy, float *dx, const KsConvShape *s,
                               GError **error)
{
  float inv = (float) (1.0 / ((double) s->kh * s->kw));
  memset (dx, 0, (gsize) s->n * s->h * s->w * s->c * sizeof *dx);
  for (int n = 0; n < s->n; n++)
    for (int oy = 0; oy < s->oh; oy++)
      for (int ox = 0; ox < s->ow; ox++)
        {
          const float *g = dy + (((gsize) n * s->oh + oy) * s->ow + ox) * s->c;
          int y0, y1, x0, x1;
          taps_inside (oy, s->stride, s->pad, s->kh, s->h, &y0, &y1);
          taps_inside (ox, s->stride, s->pad, s->kw, s->w, &x0, &x1);
          for (int ky = y0; ky < y1; ky++)
            for (int kx = x0; kx < x1; kx++)
              {
                int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad + kx;
                float *d = dx + (((gsize) n * s->h + iy) * s->w + ix) * s->c;
                for (int j = 0; j < s->c; j++)
                  d[j] += g[j] * inv;
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

  if (training)
    {
      g_autofree double *sum = g_new0 (double, cols), *sq = g_new0 (double, cols);
      for (gsize r = 0; r < rows; r++)
        for (gsize j = 0; j < cols; j++)
          sum[j] += x[r * cols + j];
      for (gsize j = 0; j < cols; j++)
        mean[j] = (float) (sum[j] / rows);
      for (gsize r = 0; r < rows; r++)
        for (gsize j = 0; j < cols; j++)
          {
            double d = x[r * cols + j] - mean[j];
            sq[j] += d * d;
          }
      for (gsize j = 0; j < cols; j++)
        var[j] = (float) (sq[j] / rows);
    }
  /* y = x * scale + shift per column */
  for (gsize j = 0; j < cols; j++)
    {
      double rstd = 1 / sqrt ((double) var[j] + eps);
      scale[j] = (float) (gamma[j] * rstd);
      shift[j] = (float) (beta[j] - mean[j] * gamma[j] * rstd);
    }
  for (gsize r = 0; r < rows; r++)
    for (gsize j = 0; j < cols; j++)
      y[r * cols + j] = x[r * cols + j] * scale[j] + shift[j];
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

  for (gsize j = 0; j < cols; j++)
    rstd[j] = 1 / sqrt ((double) var[j] + eps);
  for (gsize r = 0; r < rows; r++)
    for (gsize j = 0; j < cols; j++)
      {
        double xhat = (x[r * cols + j] - mean[j]) * rstd[j];
        sum_dy[j] += dy[r * cols + j];
        sum_dyx[j] += dy[r * cols + j] * xhat;
      }
  /* training: dx = gamma rstd (dy - mean (dy) - xhat mean (dy xhat)), the batch's mean and
   * variance depending on x; otherwise they are constants and dx = gamma rstd dy */
  for (gsize r = 0; r < rows; r++)
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
  for (gsize j = 0; j < cols; j++)
    {
      if (dgamma != NULL)
        dgamma[j] += (float) sum_dyx[j];
      if (dbeta != NULL)
        dbeta[j] += (float) sum_dy[j];
    }
  return TRUE;
}
