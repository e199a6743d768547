/* Whole convolutions on the plugin's threads (KsComputeOps conv2d and conv2d_backward).
 * The batch is cut into chunks of images whose patches (CHUNK_BYTES) stay in one core's
 * cache between the im2col that writes them and the sgemm that reads them; each thread
 * takes whole chunks and runs their sgemms on itself (OpenBLAS's OpenMP build runs an
 * sgemm called inside a parallel region on the calling thread). One parallel region a
 * call, where the chunk loop of model-conv.c woke the threads for every im2col and split
 * each chunk's small sgemm in two.
 * The same bits at any thread count: the chunks do not depend on it, each output row is
 * one chunk's, and dW sums the chunks' products in a fixed tree (GROUPS partial sums of
 * consecutive chunks, then those in order). */
#include <config.h>

/* as in kernels.c: the bias loop vectorised */
#pragma GCC optimize ("O3", "no-trapping-math")

#include "kernels.h"
#include "vector.h"

#include <cblas.h>
#include <string.h>

/* 1 MB: model-conv.c's measure (3 images of the second conv of examples/cnn-idx.ini);
 * dW's partial sums: GROUPS, fewer where they would pass PARTIAL_FLOATS (16 MB) */
enum { CHUNK_BYTES = 1 << 20, GROUPS = 16, PARTIAL_FLOATS = 1 << 22 };

typedef struct {
  gsize k, f, pixels, in_floats, chunk, n_chunks;
} Chunks;

static Chunks
chunks_of (const KsConvShape *s, int filters)
{
  Chunks c = { (gsize) s->kh * s->kw * s->c, (gsize) filters, (gsize) s->oh * s->ow,
               (gsize) s->h * s->w * s->c, 0, 0 };
  c.chunk = CLAMP (CHUNK_BYTES / MAX (c.pixels * c.k * sizeof (float), 1), 1, (gsize) s->n);
  c.n_chunks = ((gsize) s->n + c.chunk - 1) / c.chunk;
  return c;
}

/* n floats rounded up to whole cache lines, so that threads' slices share none */
static gsize
lines (gsize n)
{
  return (n + 15) / 16 * 16;
}

/* This thread's scratch: the context's, cut in one slice of `each` floats a thread */
static float *
slice (float *scratch, gsize each)
{
#ifdef _OPENMP
  return scratch + (gsize) omp_get_thread_num () * each;
#else
  return scratch;
#endif
}

/* The patches of images [first, first + count) into col. */
static void
patches (const float *x, float *col, const KsConvShape *s, const Chunks *c, gsize first,
         gsize count, float *padded)
{
  for (gsize i = 0; i < count; i++)
    ks_openblas_im2col_image (x + (first + i) * c->in_floats, col + i * c->pixels * c->k, s,
                              padded);
}

/* rows of y += b */
KS_VECTOR_KERNEL static void
add_bias (float *restrict y, const float *restrict b, gsize rows, gsize f)
{
  for (gsize r = 0; r < rows; r++)
    for (gsize j = 0; j < f; j++)
      y[r * f + j] += b[j];
}

/* Every thread of the plugin's, even one with no chunk: inside an active region OpenBLAS
 * runs each sgemm on its caller, so no chunk's sgemm is split whatever the count. */
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
  Chunks c = chunks_of (s, filters);
  gsize col_floats = c.chunk * c.pixels * c.k;
  gsize each = lines (col_floats + ks_openblas_padded_floats (s));
  float *scratch = ks_openblas_scratch_take (ctx, each * ks_openblas_threads (ctx));

  ALL_THREADS (ctx)
  {
    KsShare part = ks_share_rows (c.n_chunks);
    float *col = slice (scratch, each), *padded = col + col_floats;
    for (gsize i = part.begin; i < part.begin + part.n; i++)
      {
        gsize first = i * c.chunk, count = MIN (c.chunk, (gsize) s->n - first);
        gsize rows = count * c.pixels;
        float *out = y + first * c.pixels * c.f;
        patches (x, col, s, &c, first, count, padded);
        cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, (int) rows, (int) c.f,
                     (int) c.k, 1, col, (int) c.k, w, (int) c.f, 0, out, (int) c.f);
        add_bias (out, b, rows, c.f);
      }
  }
  ks_openblas_scratch_give (ctx);
  return TRUE;
}

/* dx = col2im (dy w^T) (written; NULL: not wanted); dw = w_beta dw + im2col (x)^T dy
 * (NULL: not wanted; w_beta 0 never reads dw) */
gboolean
ks_openblas_conv2d_backward (void *ctx, const float *x, const float *w, const float *dy,
                             float *dx, float *dw, float w_beta, int filters,
                             const KsConvShape *s, GError **error)
{
  if (dx == NULL && dw == NULL)
    return TRUE;
  Chunks c = chunks_of (s, filters);
  gsize kf = c.k * c.f;
  gsize groups = MIN (c.n_chunks, CLAMP (PARTIAL_FLOATS / kf, 1, (gsize) GROUPS));
  gsize col_floats = c.chunk * c.pixels * c.k;
  gsize partial_floats = dw != NULL ? lines (groups * kf) : 0;
  gsize each = lines ((dw != NULL ? col_floats : 0) + (dx != NULL ? col_floats : 0)
                      + ks_openblas_padded_floats (s));
  float *scratch = ks_openblas_scratch_take (ctx, partial_floats
                                                  + each * ks_openblas_threads (ctx));
  float *partial = scratch;

  ALL_THREADS (ctx)
  {
    KsShare part = ks_share_rows (groups);
    float *mine = slice (scratch + partial_floats, each);
    float *col = dw != NULL ? mine : NULL;
    float *dcol = dx != NULL ? mine + (dw != NULL ? col_floats : 0) : NULL;
    float *padded = dcol != NULL ? dcol + col_floats : col + col_floats;
    for (gsize g = part.begin; g < part.begin + part.n; g++)
      for (gsize i = g * c.n_chunks / groups; i < (g + 1) * c.n_chunks / groups; i++)
        {
          gsize first = i * c.chunk, count = MIN (c.chunk, (gsize) s->n - first);
          int rows = (int) (count * c.pixels);
          const float *dy_rows = dy + first * c.pixels * c.f;
          if (dw != NULL)
            {
              patches (x, col, s, &c, first, count, padded);
              cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, (int) c.k, (int) c.f, rows,
                           1, col, (int) c.k, dy_rows, (int) c.f,
                           i == g * c.n_chunks / groups ? 0 : 1, partial + g * kf, (int) c.f);
            }
          if (dx != NULL)
            {
              cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, rows, (int) c.k, (int) c.f,
                           1, dy_rows, (int) c.f, w, (int) c.f, 0, dcol, (int) c.k);
              for (gsize n = 0; n < count; n++)
                ks_openblas_col2im_image (dcol + n * c.pixels * c.k,
                                          dx + (first + n) * c.in_floats, s, padded);
            }
        }
    if (dw != NULL)
      {
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
  ks_openblas_scratch_give (ctx);
  return TRUE;
}
