/* Whole convolutions on the plugin's threads (KsComputeOps conv2d and conv2d_backward).
 * The output's rows (one a pixel, as sgemm sees them) are cut into units whose patches
 * (at most CHUNK_BYTES) stay in one core's cache between the im2col that writes them and
 * the sgemm that reads them: whole images where several fit, else blocks of one image's
 * rows, so a thread's scratch is bounded whatever the image size (a 4096 x 4096 image
 * with 64 channels asked 10-20 GB per call when a unit was at least one image). Each
 * thread takes whole units and runs their sgemms on itself (OpenBLAS's OpenMP build runs
 * an sgemm called inside a parallel region on the calling thread). One parallel region a
 * call.
 * The same bits at any thread count: the units do not depend on it, each output row is
 * one unit's, each dx float gets its sums in unit and row order (backward_dx), and dW sums
 * the units' products in a fixed tree (GROUPS partial sums of consecutive units, then
 * those in order); where one dW is too large for two partial sums, the units run in
 * order and OpenBLAS threads each product (its threads split dW, not the sum). */
#include <config.h>

/* as in kernels.c: the bias loop vectorised */
#pragma GCC optimize ("O3", "no-trapping-math")

#include "kernels.h"
#include "vector.h"

#include <cblas.h>
#include <string.h>

/* 1 MB of patches a unit: model-conv.c's measure (3 images of the second conv of
 * examples/cnn-idx.ini); dW's partial sums: GROUPS, fewer where they would pass
 * PARTIAL_FLOATS (16 MB). A unit holds at least one pixel's patch, which is refused past
 * PATCH_MAX_BYTES (a kernel of millions of taps: no one's network, and its scratch times
 * the threads would not fit). */
enum { CHUNK_BYTES = 1 << 20, GROUPS = 16, PARTIAL_FLOATS = 1 << 22 };
#define PATCH_MAX_BYTES ((gsize) 64 << 20)

typedef struct {
  gsize k, f, pixels, in_floats, rows;
  gsize unit_rows; /* rows a unit: images_per_unit whole images, or a block of one image */
  gsize per_image; /* units per image when units are blocks, else 0 */
  gsize n_units;
} Units;

static gboolean
units_of (const KsConvShape *s, int filters, const char *what, Units *u, GError **error)
{
  *u = (Units) { (gsize) s->kh * s->kw * s->c, (gsize) filters, (gsize) s->oh * s->ow,
                 (gsize) s->h * s->w * s->c, 0, 0, 0, 0 };
  u->rows = (gsize) s->n * u->pixels;
  if (u->k > PATCH_MAX_BYTES / sizeof (float))
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "openblas: %s: one pixel's patch is %d x %d x %d = %" G_GSIZE_FORMAT
                   " floats, past the %" G_GSIZE_FORMAT " MiB a convolution's scratch holds "
                   "per pixel; use a smaller kernel or fewer channels", what, s->kh, s->kw,
                   s->c, u->k, PATCH_MAX_BYTES >> 20);
      return FALSE;
    }
  gsize fit = MAX (CHUNK_BYTES / (u->k * sizeof (float)), 1);
  if (u->pixels == 0)
    return TRUE;
  if (fit >= u->pixels)
    {
      gsize images = MIN (fit / u->pixels, (gsize) s->n);
      u->unit_rows = images * u->pixels;
      u->n_units = ((gsize) s->n + images - 1) / images;
    }
  else
    {
      u->unit_rows = fit;
      u->per_image = (u->pixels + fit - 1) / fit;
      u->n_units = (gsize) s->n * u->per_image;
    }
  return TRUE;
}

/* Unit i's rows [*r0, *r1) */
static void
unit_rows (const Units *u, gsize i, gsize *r0, gsize *r1)
{
  if (u->per_image == 0)
    {
      *r0 = i * u->unit_rows;
      *r1 = MIN (*r0 + u->unit_rows, u->rows);
      return;
    }
  gsize image = i / u->per_image, first = i % u->per_image * u->unit_rows;
  *r0 = image * u->pixels + first;
  *r1 = image * u->pixels + MIN (first + u->unit_rows, u->pixels);
}

/* n floats rounded up to whole cache lines, so that threads' slices share none */
static gsize
lines (gsize n)
{
  return (n + 15) / 16 * 16;
}

/* This thread's index in the region (0 outside one) */
static gsize
me (void)
{
#ifdef _OPENMP
  return (gsize) omp_get_thread_num ();
#else
  return 0;
#endif
}

/* This thread's scratch: the context's, cut in one slice of `each` floats a thread */
static float *
slice (float *scratch, gsize each)
{
  return scratch + me () * each;
}

/* Output row r's window: its image's first float, its top input row, and the window
 * row's floats [a, b) inside the image, which start at `from` in the image's rows */
typedef struct {
  gsize image, from, a, b;
  int iy0;
} Window;

static Window
window_of (const KsConvShape *s, const Units *u, gsize r)
{
  gsize p = r % u->pixels;
  int oy = (int) (p / s->ow), ox = (int) (p % s->ow), x0, x1;
  ks_openblas_taps_inside (ox, s->stride, s->pad, s->kw, s->w, &x0, &x1);
  Window win = { r / u->pixels * u->in_floats, 0, 0, 0, oy * s->stride - s->pad };
  if (x1 > x0)
    {
      win.from = (gsize) (ox * s->stride - s->pad + x0) * s->c;
      win.a = (gsize) x0 * s->c;
      win.b = (gsize) x1 * s->c;
    }
  return win;
}

/* The patches of rows [r0, r1) into col: each window row one copy from its image, the
 * padding's taps zeros. */
static void
patches (const float *x, float *col, const KsConvShape *s, const Units *u, gsize r0, gsize r1)
{
  gsize seg = (gsize) s->kw * s->c, line = (gsize) s->w * s->c;
  for (gsize r = r0; r < r1; r++)
    {
      Window win = window_of (s, u, r);
      for (int ky = 0; ky < s->kh; ky++)
        {
          float *d = col + (r - r0) * u->k + (gsize) ky * seg;
          int iy = win.iy0 + ky;
          if (iy < 0 || iy >= s->h || win.b == 0)
            {
              memset (d, 0, seg * sizeof *d);
              continue;
            }
          memset (d, 0, win.a * sizeof *d);
          memcpy (d + win.a, x + win.image + (gsize) iy * line + win.from,
                  (win.b - win.a) * sizeof *d);
          memset (d + win.b, 0, (seg - win.b) * sizeof *d);
        }
    }
}

/* d += src */
KS_VECTOR_KERNEL static void
add_floats (float *restrict d, const float *restrict src, gsize n)
{
  for (gsize j = 0; j < n; j++)
    d[j] += src[j];
}

/* The adjoint: rows [r0, r1) of dcol added into dx, in row order (each dx float gets its
 * sums in the order of the unblocked col2im: by output row, then column); only the floats
 * [lo, hi) of each image row (the part a thread owns). */
static void
scatter (const float *dcol, float *dx, const KsConvShape *s, const Units *u, gsize r0,
         gsize r1, gsize lo, gsize hi)
{
  gsize seg = (gsize) s->kw * s->c, line = (gsize) s->w * s->c;
  for (gsize r = r0; r < r1; r++)
    {
      Window win = window_of (s, u, r);
      gsize first = MAX (win.from, lo), end = MIN (win.from + win.b - win.a, hi);
      for (int ky = 0; ky < s->kh && win.b > 0 && first < end; ky++)
        {
          int iy = win.iy0 + ky;
          if (iy >= 0 && iy < s->h)
            add_floats (dx + win.image + (gsize) iy * line + first,
                        dcol + (r - r0) * u->k + (gsize) ky * seg + win.a + (first - win.from),
                        end - first);
        }
    }
}

/* rows of y += b */
KS_VECTOR_KERNEL static void
add_bias (float *restrict y, const float *restrict b, gsize rows, gsize f)
{
  for (gsize r = 0; r < rows; r++)
    for (gsize j = 0; j < f; j++)
      y[r * f + j] += b[j];
}

/* Every thread of the plugin's, even one with no unit: inside an active region OpenBLAS
 * runs each sgemm on its caller, so no unit's sgemm is split whatever the count. */
#ifdef _OPENMP
#define ALL_THREADS(ctx) KS_PRAGMA (omp parallel num_threads (ks_openblas_threads (ctx)))
#else
#define ALL_THREADS(ctx)
#endif

/* y = im2col (x) w + b, w [k, filters] */
gboolean
ks_openblas_conv2d (void *ctx, const float *x, const float *w, const float *b, float *y,
                    int filters, const KsConvShape *s, GError **error)
{
  Units u;
  if (!units_of (s, filters, "conv2d", &u, error))
    return FALSE;
  if (u.n_units == 0)
    return TRUE;
  gsize each = lines (u.unit_rows * u.k);
  float *scratch = ks_openblas_scratch_take (ctx, each * ks_openblas_threads (ctx),
                                             "conv2d", error);
  if (scratch == NULL)
    return FALSE;

  ALL_THREADS (ctx)
  {
    KsShare part = ks_share_rows (u.n_units);
    float *col = slice (scratch, each);
    for (gsize i = part.begin; i < part.begin + part.n; i++)
      {
        gsize r0, r1;
        unit_rows (&u, i, &r0, &r1);
        float *out = y + r0 * u.f;
        patches (x, col, s, &u, r0, r1);
        cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, (int) (r1 - r0), (int) u.f,
                     (int) u.k, 1, col, (int) u.k, w, (int) u.f, 0, out, (int) u.f);
        add_bias (out, b, r1 - r0, u.f);
      }
  }
  ks_openblas_scratch_give (ctx);
  return TRUE;
}

/* dw = w_beta dw + sum of the units' im2col^T dy, on the threads as described above;
 * `scratch`: `partial_floats` then a slice of `each` a thread */
static void
backward_dw (void *ctx, const float *x, const float *dy, float *dw, float w_beta,
             const KsConvShape *s, const Units *u, gsize groups, float *scratch,
             gsize partial_floats, gsize each)
{
  gsize kf = u->k * u->f;
  if (groups == 1) /* one dW: the units in order, each sgemm threaded (OpenBLAS's beta 0
                      writes dw without reading it) */
    {
      for (gsize i = 0; i < u->n_units; i++)
        {
          gsize r0, r1;
          unit_rows (u, i, &r0, &r1);
          patches (x, scratch, s, u, r0, r1);
          cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, (int) u->k, (int) u->f,
                       (int) (r1 - r0), 1, scratch, (int) u->k, dy + r0 * u->f, (int) u->f,
                       i > 0 ? 1 : w_beta, dw, (int) u->f);
        }
      return;
    }
  float *partial = scratch;
  ALL_THREADS (ctx)
  {
    KsShare part = ks_share_rows (groups);
    float *col = slice (scratch + partial_floats, each);
    for (gsize g = part.begin; g < part.begin + part.n; g++)
      {
        gsize first = g * u->n_units / groups, last = (g + 1) * u->n_units / groups;
        for (gsize i = first; i < last; i++)
          {
            gsize r0, r1;
            unit_rows (u, i, &r0, &r1);
            patches (x, col, s, u, r0, r1);
            cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, (int) u->k, (int) u->f,
                         (int) (r1 - r0), 1, col, (int) u->k, dy + r0 * u->f, (int) u->f,
                         i == first ? 0 : 1, partial + g * kf, (int) u->f);
          }
      }
    KS_BARRIER; /* every group's sum is there */
    KsShare el = ks_share (kf);
    for (gsize j = el.begin; j < el.begin + el.n; j++)
      {
        float sum = partial[j];
        for (gsize q = 1; q < groups; q++)
          sum += partial[q * kf + j];
        dw[j] = w_beta == 0 ? sum : w_beta * dw[j] + sum;
      }
  }
}

/* dcol = dy's rows [r0, r1) w^T */
static void
unit_dcol (const float *w, const float *dy, float *dcol, const Units *u, gsize r0, gsize r1)
{
  cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, (int) (r1 - r0), (int) u->k, (int) u->f,
               1, dy + r0 * u->f, (int) u->f, w, (int) u->f, 0, dcol, (int) u->k);
}

/* The threads in this region (1 outside one) */
static gsize
team (void)
{
#ifdef _OPENMP
  return (gsize) omp_get_num_threads ();
#else
  return 1;
#endif
}

/* dx = col2im (dy w^T). With at least as many images (or units of whole images) as
 * threads, each image on one thread, its units in order. With fewer (a few large images),
 * in rounds of a unit a thread: each makes its unit's dcol, then each adds every unit of
 * the round, in order, into the part of every image row it owns. Either way each dx float
 * gets its sums in unit and row order, whatever the thread count. */
static void
backward_dx (void *ctx, const float *w, const float *dy, float *dx, const KsConvShape *s,
             const Units *u, float *scratch, gsize each)
{
  gsize per = MAX (u->per_image, 1), parts = u->n_units / per, line = (gsize) s->w * s->c;
  gsize rows = (gsize) s->n * s->h;
  ALL_THREADS (ctx)
  {
    float *dcol = slice (scratch, each);
    if (parts >= team ())
      {
        KsShare part = ks_share_rows (parts);
        for (gsize j = part.begin; j < part.begin + part.n; j++)
          {
            gsize r0, r1, end;
            unit_rows (u, j * per, &r0, &r1);
            unit_rows (u, j * per + per - 1, &r1, &end);
            memset (dx + r0 / u->pixels * u->in_floats, 0,
                    ((end - 1) / u->pixels - r0 / u->pixels + 1) * u->in_floats * sizeof *dx);
            for (gsize i = j * per; i < j * per + per; i++)
              {
                unit_rows (u, i, &r0, &r1);
                unit_dcol (w, dy, dcol, u, r0, r1);
                scatter (dcol, dx, s, u, r0, r1, 0, line);
              }
          }
      }
    else
      {
        KsShare mine = ks_share (line);
        gsize threads = team (), r0, r1;
        for (gsize row = 0; row < rows; row++)
          memset (dx + row * line + mine.begin, 0, mine.n * sizeof *dx);
        for (gsize round = 0; round < u->n_units; round += threads)
          {
            gsize i = round + me (); /* this thread's unit */
            if (i < u->n_units)
              {
                unit_rows (u, i, &r0, &r1);
                unit_dcol (w, dy, dcol, u, r0, r1);
              }
            KS_BARRIER; /* the round's dcols are there, and dx's zeros */
            for (gsize q = round; q < MIN (round + threads, u->n_units); q++)
              {
                unit_rows (u, q, &r0, &r1);
                scatter (scratch + (q - round) * each, dx, s, u, r0, r1, mine.begin,
                         mine.begin + mine.n);
              }
            KS_BARRIER; /* every part added before the dcols are made anew */
          }
      }
  }
}

/* dx = col2im (dy w^T) (written; NULL: not wanted); dw = w_beta dw + im2col (x)^T dy
 * (NULL: not wanted; w_beta 0 never reads dw) */
gboolean
ks_openblas_conv2d_backward (void *ctx, const float *x, const float *w, const float *dy,
                             float *dx, float *dw, float w_beta, int filters,
                             const KsConvShape *s, GError **error)
{
  Units u;
  if (dx == NULL && dw == NULL)
    return TRUE;
  if (!units_of (s, filters, "conv2d backward", &u, error))
    return FALSE;
  gsize kf = u.k * u.f;
  if (u.n_units == 0) /* no output pixel: dx is 0, dw gets nothing added */
    {
      if (dx != NULL)
        memset (dx, 0, (gsize) s->n * u.in_floats * sizeof *dx);
      for (gsize j = 0; dw != NULL && j < kf; j++)
        dw[j] = w_beta == 0 ? 0 : w_beta * dw[j];
      return TRUE;
    }
  gsize groups = MIN (u.n_units, CLAMP (PARTIAL_FLOATS / kf, 1, (gsize) GROUPS));
  gsize partial_floats = dw != NULL && groups > 1 ? lines (groups * kf) : 0;
  gsize each = lines (u.unit_rows * u.k);
  float *scratch = ks_openblas_scratch_take (ctx, partial_floats
                                                  + each * ks_openblas_threads (ctx),
                                             "conv2d backward", error);
  if (scratch == NULL)
    return FALSE;
  if (dw != NULL)
    backward_dw (ctx, x, dy, dw, w_beta, s, &u, groups, scratch, partial_floats, each);
  if (dx != NULL)
    backward_dx (ctx, w, dy, dx, s, &u, scratch, each);
  ks_openblas_scratch_give (ctx);
  return TRUE;
}
