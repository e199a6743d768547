/* The CPU backend's whole conv2d (plugins/openblas/conv-gemm.c) where one image's patches
 * pass a unit's 1 MiB (CHUNK_BYTES there) and are cut into blocks of rows, a block ending
 * mid image row: forward and backward against direct sums in double at sampled elements,
 * on 1 and on 3 threads, with the same bits on both; one case with a dW too large for two
 * partial sums (the units in order, OpenBLAS threading each product), whose dW on each
 * thread count is checked by the sums alone: whether OpenBLAS's threads round as its one
 * thread does depends on its kernels and blocking (with OPENBLAS_CORETYPE=Haswell or Zen
 * on an AMD EPYC of family 26 they did not). And a shape whose single pixel's patch is
 * past what the scratch holds: an error, not an abort. */
#include "testutil.h"

#include <math.h>
#include <string.h>

typedef struct {
  CpuFixture cpu;
  KsCompute *c;
  GRand *rng;
} Fixture;

static void
setup (Fixture *f, gconstpointer data)
{
  ks_test_cpu_setup (&f->cpu, NULL);
  f->c = f->cpu.c;
  f->rng = g_rand_new_with_seed (20261128);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  g_rand_free (f->rng);
  ks_test_cpu_teardown (&f->cpu);
}

typedef struct {
  gsize in, out, k, kf;
  float *y, *dx, *dx_only, *dw, *dw_added;
} Results;

static void
results_init (Results *r, const KsConvShape *s, int f)
{
  r->in = (gsize) s->n * s->h * s->w * s->c;
  r->out = (gsize) s->n * s->oh * s->ow * f;
  r->k = (gsize) s->kh * s->kw * s->c;
  r->kf = r->k * f;
  r->y = g_new (float, r->out);
  r->dx = g_new (float, r->in);
  r->dx_only = g_new (float, r->in);
  r->dw = g_new (float, r->kf);
  r->dw_added = g_new (float, r->kf);
}

static void
results_clear (Results *r)
{
  g_free (r->y), g_free (r->dx), g_free (r->dx_only), g_free (r->dw), g_free (r->dw_added);
}

static void
run (Fixture *f, const KsConvShape *s, int filters, const float *x, const float *w,
     const float *b, const float *dy, int threads, Results *r)
{
  GError *error = NULL;
  g_assert_true (ks_compute_set_threads (f->c, threads, NULL));
  memset (r->dw, 0xff, r->kf * sizeof (float)); /* NaN: w_beta 0 must not read dw */
  memset (r->dx, 0xff, r->in * sizeof (float)); /* dx is written, not added to */
  memcpy (r->dw_added, w, r->kf * sizeof (float));
  g_assert_true (ks_compute_conv2d (f->c, x, w, b, r->y, filters, s, &error));
  g_assert_no_error (error);
  g_assert_true (ks_compute_conv2d_backward (f->c, x, w, dy, r->dx, r->dw, 0, filters, s,
                                             &error));
  g_assert_true (ks_compute_conv2d_backward (f->c, x, w, dy, NULL, r->dw_added, 0.5f, filters,
                                             s, &error));
  g_assert_true (ks_compute_conv2d_backward (f->c, x, w, dy, r->dx_only, NULL, 0, filters, s,
                                             &error));
  g_assert_no_error (error);
  g_assert_cmpmem (r->dx, r->in * sizeof (float), r->dx_only, r->in * sizeof (float));
}

static double
pixel (const KsConvShape *s, const float *x, int n, int iy, int ix, int ch)
{
  if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
    return 0;
  return x[(((gsize) n * s->h + iy) * s->w + ix) * s->c + ch];
}

/* Asserts |got - want| <= 1e-5 (1 + sqrt (sumsq)), sumsq the sum of the squared terms
 * of the want's sum (float32's rounding grows as the root of the terms' size), naming
 * the element on failure. */
static void
assert_close (const char *what, gsize i, double got, double want, double sumsq)
{
  double tol = 1e-5 * (1 + sqrt (sumsq));
  if (fabs (got - want) > tol)
    g_error ("%s[%" G_GSIZE_FORMAT "]: got %.7g, want %.7g (tolerance %g)", what, i, got, want,
             tol);
}

/* The results at sampled elements against the direct sums in double. */
static void
check_sums (const KsConvShape *s, int filters, const float *x, const float *w, const float *b,
            const float *dy, const Results *r)
{
  /* y at sampled outputs (every block boundary is crossed: the step is prime) */
  for (gsize o = 0; o < r->out; o += 101)
    {
      gsize pix = o / filters;
      int fi = (int) (o % filters), n = (int) (pix / ((gsize) s->oh * s->ow));
      int oy = (int) (pix / s->ow % s->oh), ox = (int) (pix % s->ow);
      double y = b[fi], sq = 0;
      for (int ky = 0; ky < s->kh; ky++)
        for (int kx = 0; kx < s->kw; kx++)
          for (int ch = 0; ch < s->c; ch++)
            {
              double t = pixel (s, x, n, oy * s->stride - s->pad + ky,
                                ox * s->stride - s->pad + kx, ch)
                         * w[(((gsize) ky * s->kw + kx) * s->c + ch) * filters + fi];
              y += t, sq += t * t;
            }
      assert_close ("conv y", o, r->y[o], y, sq);
    }
  /* dx: the outputs whose windows cover the pixel */
  for (gsize i = 0; i < r->in; i += 97)
    {
      int ch = (int) (i % s->c), ix = (int) (i / s->c % s->w);
      int iy = (int) (i / s->c / s->w % s->h), n = (int) (i / s->c / s->w / s->h);
      double dx = 0, sq = 0;
      for (int ky = 0; ky < s->kh; ky++)
        for (int kx = 0; kx < s->kw; kx++)
          {
            int ty = iy + s->pad - ky, tx = ix + s->pad - kx;
            if (ty < 0 || tx < 0 || ty % s->stride || tx % s->stride)
              continue;
            int oy = ty / s->stride, ox = tx / s->stride;
            if (oy >= s->oh || ox >= s->ow)
              continue;
            for (int fi = 0; fi < filters; fi++)
              {
                double t = (double) dy[(((gsize) n * s->oh + oy) * s->ow + ox) * filters + fi]
                           * w[(((gsize) ky * s->kw + kx) * s->c + ch) * filters + fi];
                dx += t, sq += t * t;
              }
          }
      assert_close ("conv dx", i, r->dx[i], dx, sq);
    }
  /* dw: the sum over every output pixel */
  for (gsize i = 0; i < r->kf; i += 89)
    {
      gsize row = i / filters;
      int fi = (int) (i % filters), ky = (int) (row / ((gsize) s->kw * s->c));
      int kx = (int) (row / s->c % s->kw), ch = (int) (row % s->c);
      double dw = 0, sq = 0;
      for (int n = 0; n < s->n; n++)
        for (int oy = 0; oy < s->oh; oy++)
          for (int ox = 0; ox < s->ow; ox++)
            {
              double t = pixel (s, x, n, oy * s->stride - s->pad + ky,
                                ox * s->stride - s->pad + kx, ch)
                         * dy[(((gsize) n * s->oh + oy) * s->ow + ox) * filters + fi];
              dw += t, sq += t * t;
            }
      assert_close ("conv dw", i, r->dw[i], dw, sq);
      assert_close ("conv dw added", i, r->dw_added[i], 0.5 * w[i] + dw, sq);
    }
}

static void
check_shape (Fixture *f, const KsConvShape *s, int filters, gboolean dw_same_bits)
{
  Results one, three;
  results_init (&one, s, filters);
  results_init (&three, s, filters);
  float *x = g_new (float, one.in), *w = g_new (float, one.kf), *b = g_new (float, filters);
  float *dy = g_new (float, one.out);
  for (gsize i = 0; i < one.in; i++)
    x[i] = (float) g_rand_double_range (f->rng, -1, 1);
  for (gsize i = 0; i < one.kf; i++)
    w[i] = (float) g_rand_double_range (f->rng, -1, 1);
  for (int i = 0; i < filters; i++)
    b[i] = (float) g_rand_double_range (f->rng, -1, 1);
  for (gsize i = 0; i < one.out; i++)
    dy[i] = (float) g_rand_double_range (f->rng, -1, 1);
  run (f, s, filters, x, w, b, dy, 1, &one);
  run (f, s, filters, x, w, b, dy, 3, &three);
  g_assert_cmpmem (one.y, one.out * sizeof (float), three.y, one.out * sizeof (float));
  g_assert_cmpmem (one.dx, one.in * sizeof (float), three.dx, one.in * sizeof (float));
  if (dw_same_bits)
    {
      g_assert_cmpmem (one.dw, one.kf * sizeof (float), three.dw, one.kf * sizeof (float));
      g_assert_cmpmem (one.dw_added, one.kf * sizeof (float), three.dw_added,
                       one.kf * sizeof (float));
    }
  check_sums (s, filters, x, w, b, dy, &one);
  check_sums (s, filters, x, w, b, dy, &three);
  g_free (x), g_free (w), g_free (b), g_free (dy);
  results_clear (&one);
  results_clear (&three);
}

/* 2 images of 64 x 64 x 16, 3 x 3: 2.36 MB of patches each, 3 blocks of 1820 rows (28.4
 * image rows); 5 x 5 by 2, padding 2: 1.6 MB, 2 blocks of 655 rows */
static void
test_blocks (Fixture *f, gconstpointer data)
{
  const KsConvShape same = { 2, 64, 64, 16, 3, 3, 1, 1, 64, 64 };
  const KsConvShape strided = { 2, 64, 64, 16, 5, 5, 2, 2, 32, 32 };
  if (!ks_compute_has_conv2d (f->c))
    {
      g_test_skip ("this backend has no whole conv2d");
      return;
    }
  check_shape (f, &same, 4, TRUE);
  check_shape (f, &strided, 3, TRUE);
}

/* 8 x 8 x 2048 images, 3 x 3, 128 filters: dW of 2.36 M floats, past half of the 4 M
 * floats of partial sums, so one sum over 10 units of 14 rows */
static void
test_large_dw (Fixture *f, gconstpointer data)
{
  const KsConvShape s = { 2, 8, 8, 2048, 3, 3, 1, 1, 8, 8 };
  if (!ks_compute_has_conv2d (f->c))
    {
      g_test_skip ("this backend has no whole conv2d");
      return;
    }
  check_shape (f, &s, 128, FALSE);
}

/* A 3 x 3 kernel over 16 M channels: one pixel's patch is 576 MiB, past the 64 MiB a
 * pixel may take. The buffers are never touched: the call refuses first. */
static void
test_huge (Fixture *f, gconstpointer data)
{
  const KsConvShape s = { 1, 3, 3, 1 << 24, 3, 3, 1, 1, 3, 3 };
  float dummy[16] = { 0 };
  GError *error = NULL;
  if (!ks_compute_has_conv2d (f->c))
    {
      g_test_skip ("this backend has no whole conv2d");
      return;
    }
  g_assert_false (ks_compute_conv2d (f->c, dummy, dummy, dummy, dummy, 4, &s, &error));
  g_assert_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, "conv2d: one pixel's patch is 3 x 3 x 16777216"));
  g_assert_nonnull (strstr (error->message, "use a smaller kernel or fewer channels"));
  g_clear_error (&error);
  g_assert_false (ks_compute_conv2d_backward (f->c, dummy, dummy, dummy, dummy, dummy, 0, 4, &s,
                                              &error));
  g_assert_nonnull (strstr (error->message, "conv2d backward: one pixel's patch"));
  g_clear_error (&error);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (!ks_test_have_openblas ())
    return g_test_run ();
  g_test_add ("/conv-blocks/blocks", Fixture, NULL, setup, test_blocks, teardown);
  g_test_add ("/conv-blocks/large-dw", Fixture, NULL, setup, test_large_dw, teardown);
  g_test_add ("/conv-blocks/huge", Fixture, NULL, setup, test_huge, teardown);
  return g_test_run ();
}
