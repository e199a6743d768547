/* Convolutional layers on the CPU backend: conv2d, max and average pooling and batch norm
 * against direct loops written here, im2col and the average pool against their adjoints,
 * every gradient against finite differences, the binary logistic loss against its
 * closed form (large logits included), the running statistics (eval mode, excluded from
 * gradients, kept by a checkpoint), and the errors of bad shapes. */
#include "testutil.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

typedef CpuFixture Fixture;

static void
setup (Fixture *f, gconstpointer data)
{
  ks_test_cpu_setup (f, (const char *const[]) { "openblas.threads=1", NULL });
}

static void
teardown (Fixture *f, gconstpointer data)
{
  ks_test_cpu_teardown (f);
}

static float *
host_copy (KsExpr *e)
{
  float *v = g_new (float, ks_expr_numel (e));
  g_assert_true (ks_tensor_to_host (ks_expr_value (e, NULL), v, ks_expr_numel (e) * sizeof *v,
                                    NULL));
  return v;
}

static const float *
param (KsModel *model, const char *name)
{
  const KsTensor *t = ks_arena_tensor (ks_model_parameters (model), name);
  g_assert_nonnull (t);
  return t->data;
}

/* x[n][y][x][c] of an NHWC image batch, 0 outside it */
static double
pixel (const float *x, int h, int w, int c, int n, int y, int xx, int ch)
{
  return y < 0 || y >= h || xx < 0 || xx >= w ? 0 : x[(((gsize) n * h + y) * w + xx) * c + ch];
}

/* conv2d against the direct sum, for one window shape */
static void
check_conv (Fixture *f, int n, int h, int w, int c, int filters, int k, int stride, int pad)
{
  g_autoptr (KsModel) model = ks_model_new (f->c);
  g_autoptr (GError) error = NULL;
  g_autoptr (GRand) rng = g_rand_new_with_seed (h * 100 + k * 10 + stride);
  const gint64 shape[] = { n, h, w, c };
  KsExpr *x = ks_model_data (model, "x", 4, shape, KS_DTYPE_FLOAT32, &error);
  KsExpr *y = ks_conv2d (x, filters, k, stride, pad, "conv", 5, &error);
  g_assert_no_error (error);
  int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  g_autofree char *want_shape = g_strdup_printf ("[%d, %d, %d, %d]", n, oh, ow, filters);
  g_autofree char *got_shape = ks_expr_shape_string (y);
  g_assert_cmpstr (got_shape, ==, want_shape);
  g_assert_true (ks_model_init (model, &error));

  /* a non-zero bias, so its broadcast is checked too */
  float *bias = (float *) param (model, "conv.b");
  for (int j = 0; j < filters; j++)
    bias[j] = 0.1f * (j + 1);
  ks_model_parameters_changed (model);
  g_autofree float *xs = ks_test_random_floats (rng, (gsize) n * h * w * c, -1, 1);
  KsFeed feed = { "x", xs, (gsize) n * h * w * c * sizeof (float) };
  g_assert_true (ks_model_run (model, &feed, 1, &y, 1, &error));
  g_autofree float *got = host_copy (y);
  const float *wt = param (model, "conv.w");

  for (int in = 0; in < n; in++)
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++)
        for (int j = 0; j < filters; j++)
          {
            double sum = bias[j];
            for (int ky = 0; ky < k; ky++)
              for (int kx = 0; kx < k; kx++)
                for (int ch = 0; ch < c; ch++)
                  sum += pixel (xs, h, w, c, in, oy * stride - pad + ky, ox * stride - pad + kx,
                                ch)
                         * wt[((ky * k + kx) * c + ch) * filters + j];
            float g = got[(((gsize) in * oh + oy) * ow + ox) * filters + j];
            g_assert_cmpfloat_with_epsilon (g, sum, 1e-5 * (1 + fabs (sum)));
          }
}

static void
test_conv_forward (Fixture *f, gconstpointer data)
{
  check_conv (f, 2, 7, 6, 3, 4, 3, 2, 1);  /* Reptile's window, odd sizes */
  check_conv (f, 3, 28, 28, 1, 8, 3, 2, 1); /* Omniglot's first layer */
  check_conv (f, 1, 5, 5, 2, 3, 2, 1, 0);  /* even kernel, no padding */
  check_conv (f, 2, 4, 5, 2, 2, 5, 3, 2);  /* the window wider than the image */
  /* on the CPU the patches are made 1 MB of them at a time (model-conv.c): 313 KB an
   * image for the second layer of examples/cnn-idx.ini, in chunks of 3 and 2; 1.2 MB an
   * image, one a chunk */
  check_conv (f, 5, 14, 14, 16, 32, 5, 1, 2);
  check_conv (f, 3, 28, 28, 16, 8, 5, 1, 2);
}

/* <im2col (x), c> = <x, col2im (c)>: col2im is im2col's adjoint, what the backward needs */
static void
test_im2col_adjoint (Fixture *f, gconstpointer data)
{
  KsConvShape s = { 2, 6, 5, 3, 3, 3, 2, 1, 3, 3 };
  gsize nx = 2 * 6 * 5 * 3, ncol = 2 * 3 * 3 * 27;
  g_autoptr (GRand) rng = g_rand_new_with_seed (3);
  g_autofree float *x = ks_test_random_floats (rng, nx, -1, 1);
  g_autofree float *c = ks_test_random_floats (rng, ncol, -1, 1);
  g_autofree float *col = g_new (float, ncol), *dx = g_new (float, nx);
  g_autoptr (GError) error = NULL;
  double left = 0, right = 0;

  g_assert_true (ks_compute_im2col (f->c, x, col, &s, &error));
  g_assert_true (ks_compute_col2im (f->c, c, dx, &s, &error));
  for (gsize i = 0; i < ncol; i++)
    left += (double) col[i] * c[i];
  for (gsize i = 0; i < nx; i++)
    right += (double) x[i] * dx[i];
  g_assert_cmpfloat_with_epsilon (left, right, 1e-4);

  /* a shape whose output size does not follow from the window is refused */
  s.oh = 4;
  g_assert_false (ks_compute_im2col (f->c, x, col, &s, &error));
  g_assert_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID);
  g_assert_nonnull (strstr (error->message, "not a valid shape"));
}

static void
test_max_pool (Fixture *f, gconstpointer data)
{
  g_autoptr (KsModel) model = ks_model_new (f->c);
  g_autoptr (GError) error = NULL;
  const gint64 shape[] = { 2, 5, 6, 3 };
  gsize nx = 2 * 5 * 6 * 3;
  KsExpr *x = ks_model_parameter (model, "x", 4, shape, (KsInit) { KS_INIT_UNIFORM, -1, 1, 4 },
                                  &error);
  KsExpr *y = ks_max_pool (x, 2, 2, &error);
  KsExpr *loss = ks_mean (ks_mul (y, y, &error), &error);
  g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  g_assert_no_error (error);
  g_autofree char *ys = ks_expr_shape_string (y);
  g_assert_cmpstr (ys, ==, "[2, 2, 3, 3]");
  g_assert_true (ks_model_init (model, &error));
  g_assert_true (ks_model_backward (model, loss, NULL, 0, NULL, pairs, &error));
  g_assert_true (ks_model_run (model, NULL, 0, NULL, 0, &error));
  g_assert_no_error (error);

  const float *xs = param (model, "x");
  g_autofree float *got = host_copy (y);
  const float *dx = ks_arena_data (ks_model_gradients (model));
  gsize routed = 0;
  for (int n = 0; n < 2; n++)
    for (int oy = 0; oy < 2; oy++)
      for (int ox = 0; ox < 3; ox++)
        for (int c = 0; c < 3; c++)
          {
            double best = -INFINITY;
            for (int ky = 0; ky < 2; ky++)
              for (int kx = 0; kx < 2; kx++)
                best = MAX (best, pixel (xs, 5, 6, 3, n, oy * 2 + ky, ox * 2 + kx, c));
            g_assert_cmpfloat (got[((n * 2 + oy) * 3 + ox) * 3 + c], ==, best);
          }
  /* the gradient reaches only the maxima: d mean (y^2) / dy = 2 y / 36 */
  for (gsize i = 0; i < nx; i++)
    if (dx[i] != 0)
      {
        routed++;
        g_assert_cmpfloat_with_epsilon (dx[i], 2 * xs[i] / 36, 1e-6);
      }
  g_assert_cmpuint (routed, ==, 36);
}

/* The average pool against the direct mean (padding counted as zeros, every window over
 * kernel^2, as PyTorch's AvgPool2d), its backward against its adjoint and the analytic
 * gradient, for windows that overlap, pad, and step past the image's end. */
static void
check_avg_pool (Fixture *f, int n, int h, int w, int c, int k, int stride, int pad)
{
  g_autoptr (KsModel) model = ks_model_new (f->c);
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  const gint64 shape[] = { n, h, w, c };
  gsize nx = (gsize) n * h * w * c;
  int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  gsize ny = (gsize) n * oh * ow * c;
  KsExpr *x = ks_model_parameter (model, "x", 4, shape,
                                  (KsInit) { KS_INIT_UNIFORM, -1, 1, k * 10 + pad }, &error);
  KsExpr *y = ks_avg_pool (x, k, stride, pad, &error);
  KsExpr *loss = ks_mean (ks_mul (y, y, &error), &error);
  g_assert_no_error (error);
  g_autofree char *want_shape = g_strdup_printf ("[%d, %d, %d, %d]", n, oh, ow, c);
  g_autofree char *got_shape = ks_expr_shape_string (y);
  g_assert_cmpstr (got_shape, ==, want_shape);
  g_assert_true (ks_model_init (model, &error));
  g_assert_true (ks_model_backward (model, loss, NULL, 0, NULL, pairs, &error));
  g_assert_true (ks_model_run (model, NULL, 0, NULL, 0, &error));
  g_assert_no_error (error);

  const float *xs = param (model, "x");
  g_autofree float *got = host_copy (y);
  g_autofree double *dx = g_new0 (double, nx);
  for (int in = 0; in < n; in++)
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++)
        for (int ch = 0; ch < c; ch++)
          {
            double sum = 0;
            for (int ky = 0; ky < k; ky++)
              for (int kx = 0; kx < k; kx++)
                sum += pixel (xs, h, w, c, in, oy * stride - pad + ky, ox * stride - pad + kx, ch);
            double mean = sum / (k * k);
            float g = got[(((gsize) in * oh + oy) * ow + ox) * c + ch];
            g_assert_cmpfloat_with_epsilon (g, mean, 1e-6);
            /* d mean (y^2) / dx = 2 y / ny / k^2 at each pixel of the window on the image */
            for (int ky = 0; ky < k; ky++)
              for (int kx = 0; kx < k; kx++)
                {
                  int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                  if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                    dx[(((gsize) in * h + iy) * w + ix) * c + ch] += 2 * mean / ny / (k * k);
                }
          }
  const float *grad = ks_arena_data (ks_model_gradients (model));
  for (gsize i = 0; i < nx; i++)
    g_assert_cmpfloat_with_epsilon (grad[i], dx[i], 1e-7);
  g_assert_cmpuint (ks_test_check_parameter_gradients (model, loss, 1e-2, 1e-3), ==, nx);

  /* <avg_pool (x), g> = <x, avg_pool_backward (g)> */
  KsConvShape s = { n, h, w, c, k, k, stride, pad, oh, ow };
  g_autoptr (GRand) rng = g_rand_new_with_seed (k + stride + pad);
  g_autofree float *gy = ks_test_random_floats (rng, ny, -1, 1);
  g_autofree float *py = g_new (float, ny), *px = g_new (float, nx);
  double left = 0, right = 0;
  g_assert_true (ks_compute_avg_pool (f->c, xs, py, &s, &error));
  g_assert_true (ks_compute_avg_pool_backward (f->c, gy, px, &s, &error));
  for (gsize i = 0; i < ny; i++)
    left += (double) py[i] * gy[i];
  for (gsize i = 0; i < nx; i++)
    right += (double) xs[i] * px[i];
  g_assert_cmpfloat_with_epsilon (left, right, 1e-4);
}

static void
test_avg_pool (Fixture *f, gconstpointer data)
{
  check_avg_pool (f, 2, 6, 6, 3, 2, 2, 0); /* the usual 2x2 halving */
  check_avg_pool (f, 2, 7, 5, 2, 3, 2, 1); /* overlapping, padded, odd sizes */
  check_avg_pool (f, 1, 5, 6, 4, 3, 1, 1); /* stride 1: every pixel in 9 windows */
  check_avg_pool (f, 3, 8, 8, 1, 4, 3, 2); /* windows past the end, pad kernel / 2 */
}

/* The binary logistic loss: mean (max (z, 0) - y z + log (1 + e^-|z|)), in double here,
 * and its gradient (sigmoid (z) - y) / m, for logits up to +-200 (a naive log (sigmoid)
 * is -inf there); finite differences on moderate ones; a label other than 0 or 1 and a
 * logit of more than one column are refused. */
static void
test_logistic (Fixture *f, gconstpointer data)
{
  g_autoptr (KsModel) model = ks_model_new (f->c);
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  enum { M = 10 };
  const gint64 zshape[] = { M, 1 }, yshape[] = { M };
  const float zs[M] = { -200, -30, -3.5f, -0.7f, 0, 0.3f, 1.2f, 4, 40, 200 };
  gint64 labels[M] = { 0, 1, 1, 0, 1, 0, 1, 0, 1, 0 };
  KsExpr *z = ks_model_parameter (model, "z", 2, zshape, (KsInit) { KS_INIT_CONSTANT, 0, 0, 0 },
                                  &error);
  KsExpr *y = ks_model_data (model, "y", 1, yshape, KS_DTYPE_INT64, &error);
  KsExpr *loss = ks_sigmoid_cross_entropy (z, y, &error);
  g_assert_no_error (error);
  g_assert_true (ks_model_init (model, &error));
  memcpy ((float *) param (model, "z"), zs, sizeof zs);
  ks_model_parameters_changed (model);
  g_assert_true (ks_model_backward (model, loss, NULL, 0, NULL, pairs, &error));
  KsFeed feed = { "y", labels, sizeof labels };
  g_assert_true (ks_model_run (model, &feed, 1, NULL, 0, &error));
  g_assert_no_error (error);

  double want = 0;
  const float *grad = ks_arena_data (ks_model_gradients (model));
  for (int i = 0; i < M; i++)
    {
      double zi = zs[i];
      want += (MAX (zi, 0) - labels[i] * zi + log1p (exp (-fabs (zi)))) / M;
      double dz = (1 / (1 + exp (-zi)) - labels[i]) / M;
      g_assert_cmpfloat_with_epsilon (grad[i], dz, 1e-6);
    }
  float got = ks_test_scalar (loss);
  g_test_message ("loss %.7g, closed form %.7g", got, want);
  g_assert_true (isfinite (got));
  g_assert_cmpfloat_with_epsilon (got, want, 1e-5 * want);

  /* finite differences where the loss is smooth enough for float32 steps */
  for (int i = 0; i < M; i++)
    ((float *) param (model, "z"))[i] = zs[i] / 100;
  ks_model_parameters_changed (model);
  g_assert_true (ks_model_run (model, &feed, 1, NULL, 0, &error));
  g_assert_cmpuint (ks_test_check_parameter_gradients (model, loss, 1e-2, 1e-3), ==, M);

  /* a label of 2 is an error naming its row */
  labels[3] = 2;
  g_assert_false (ks_model_run (model, &feed, 1, &loss, 1, &error));
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, "binary logistic loss (labels 0 or 1): "));
  g_assert_nonnull (strstr (error->message, "labels[3] = 2"));
  g_clear_error (&error);

  const gint64 two[] = { M, 2 };
  KsExpr *z2 = ks_model_data (model, "z2", 2, two, KS_DTYPE_FLOAT32, &error);
  g_assert_null (ks_sigmoid_cross_entropy (z2, y, &error));
  g_assert_nonnull (strstr (error->message, "one logit a row, [m, 1]"));
}

/* A config CNN of the new pieces: image -> conv -> relu -> avg pool (k3, s2, p1) ->
 * flatten -> fc to one logit -> binary logistic loss; every gradient, the image's
 * through the pool, against finite differences. */
static void
test_avg_pool_logistic_gradients (Fixture *f, gconstpointer data)
{
  g_autoptr (KsModel) model = ks_model_new (f->c);
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  const gint64 shape[] = { 4, 6, 5, 2 }, lshape[] = { 4 };
  const gint64 labels[] = { 1, 0, 0, 1 };
  KsExpr *image = ks_model_parameter (model, "image", 4, shape,
                                      (KsInit) { KS_INIT_UNIFORM, -1, 1, 9 }, &error);
  KsExpr *y = ks_model_data (model, "y", 1, lshape, KS_DTYPE_INT64, &error);
  KsExpr *h = ks_relu (ks_conv2d (image, 3, 3, 1, 1, "c1", 1, &error), &error);
  h = ks_flatten (ks_avg_pool (h, 3, 2, 1, &error), &error);
  KsExpr *loss = ks_sigmoid_cross_entropy (ks_fc (h, 1, -1, "fc", 3, &error), y, &error);
  g_assert_no_error (error);
  g_autofree char *hs = ks_expr_shape_string (h);
  g_assert_cmpstr (hs, ==, "[4, 27]"); /* 6 x 5 -> 3 x 3, 3 channels */
  g_assert_true (ks_model_init (model, &error));
  g_assert_true (ks_model_backward (model, loss, NULL, 0, NULL, pairs, &error));
  KsFeed feed = { "y", labels, sizeof labels };
  g_assert_true (ks_model_run (model, &feed, 1, NULL, 0, &error));
  g_assert_no_error (error);
  gsize checked = ks_test_check_parameter_gradients (model, loss, 1e-3, 5e-3);
  g_assert_cmpuint (checked, ==, 240 + 54 + 3 + 27 + 1);
}

/* A small network through every op of this file and then some:
 * image -> conv (s2, p1) -> batch norm -> tanh -> conv (s1, p1) -> max pool -> batch norm
 * -> flatten -> fc -> cross entropy; the image is a parameter, so its gradient (col2im's
 * path) is checked with the others. Steps of 1e-3 keep the overlapping max-pool windows
 * from swapping their maxima between the two sides of a difference. */
static void
test_gradients (Fixture *f, gconstpointer data)
{
  g_autoptr (KsModel) model = ks_model_new (f->c);
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  const gint64 shape[] = { 3, 6, 5, 2 }, lshape[] = { 3 };
  const gint64 labels[] = { 2, 0, 1 };
  KsExpr *image = ks_model_parameter (model, "image", 4, shape,
                                      (KsInit) { KS_INIT_UNIFORM, -1, 1, 8 }, &error);
  KsExpr *y = ks_model_data (model, "y", 1, lshape, KS_DTYPE_INT64, &error);
  KsExpr *h = ks_conv2d (image, 3, 3, 2, 1, "c1", 1, &error);
  h = ks_tanh (ks_batch_norm (h, "bn1", 0.1f, 1e-5f, &error), &error);
  h = ks_max_pool (ks_conv2d (h, 4, 3, 1, 1, "c2", 2, &error), 2, 1, &error);
  h = ks_flatten (ks_batch_norm (h, "bn2", 0.1f, 1e-5f, &error), &error);
  KsExpr *loss = ks_softmax_cross_entropy (ks_fc (h, 3, -1, "fc", 3, &error), y, &error);
  g_assert_no_error (error);
  g_autofree char *hs = ks_expr_shape_string (h);
  g_assert_cmpstr (hs, ==, "[3, 16]");
  g_assert_true (ks_model_init (model, &error));
  g_assert_true (ks_model_backward (model, loss, NULL, 0, NULL, pairs, &error));
  /* image, c1 w b, bn1 gamma beta, c2 w b, bn2 gamma beta, fc w b: no running statistic */
  g_assert_cmpuint (pairs->len, ==, 11);
  for (guint i = 0; i < pairs->len; i++)
    g_assert_null (strstr (ks_expr_name (g_array_index (pairs, KsParamGrad, i).param),
                           "running"));
  KsFeed feed = { "y", labels, sizeof labels };
  g_assert_true (ks_model_run (model, &feed, 1, NULL, 0, &error));
  g_assert_no_error (error);
  gsize checked = ks_test_check_parameter_gradients (model, loss, 1e-3, 5e-3);
  g_assert_cmpuint (checked, ==, 180 + 54 + 3 + 6 + 108 + 4 + 8 + 48 + 3);
}

/* The backward of a conv whose images' patches are made in chunks (518 KB of them an
 * image: chunks of 2 and 1): its weights', bias's and image's gradients against finite
 * differences, steps of 1e-2 and a tolerance of 3e-4 (the image's gradients are near 1e-3
 * each). */
static void
test_gradients_in_chunks (Fixture *f, gconstpointer data)
{
  g_autoptr (KsModel) model = ks_model_new (f->c);
  g_autoptr (GError) error = NULL;
  const gint64 shape[] = { 3, 20, 20, 4 }, lshape[] = { 3 };
  const gint64 labels[] = { 2, 0, 1 };
  KsExpr *image = ks_model_parameter (model, "image", 4, shape,
                                      (KsInit) { KS_INIT_UNIFORM, -1, 1, 8 }, &error);
  KsExpr *y = ks_model_data (model, "y", 1, lshape, KS_DTYPE_INT64, &error);
  KsExpr *h = ks_tanh (ks_conv2d (image, 2, 9, 1, 4, "c", 1, &error), &error);
  KsExpr *logits = ks_fc (ks_flatten (h, &error), 3, -1, "fc", 3, &error);
  KsExpr *loss = ks_softmax_cross_entropy (logits, y, &error);
  g_assert_no_error (error);
  g_assert_true (ks_model_init (model, &error));
  g_assert_true (ks_model_backward (model, loss, NULL, 0, NULL, NULL, &error));
  KsFeed feed = { "y", labels, sizeof labels };
  g_assert_true (ks_model_run (model, &feed, 1, NULL, 0, &error));
  g_assert_no_error (error);
  gsize checked = ks_test_check_parameter_gradients (model, loss, 1e-2, 3e-4);
  g_assert_cmpuint (checked, ==, 4800 + 648 + 2 + 2400 + 3);
}

/* Training mode: the batch's statistics, the running ones moved toward them; evaluation
 * mode: the running ones; a checkpoint keeps them. */
static void
test_batch_norm (Fixture *f, gconstpointer data)
{
  g_autoptr (KsModel) model = ks_model_new (f->c);
  g_autoptr (GError) error = NULL;
  g_autoptr (GRand) rng = g_rand_new_with_seed (21);
  const gint64 shape[] = { 4, 3, 2 };
  const gsize rows = 12, cols = 2;
  KsExpr *x = ks_model_data (model, "x", 3, shape, KS_DTYPE_FLOAT32, &error);
  KsExpr *y = ks_batch_norm (x, "bn", 0.25f, 1e-3f, &error);
  g_assert_no_error (error);
  g_assert_true (ks_model_init (model, &error));
  float *gamma = (float *) param (model, "bn.gamma"), *beta = (float *) param (model, "bn.beta");
  gamma[0] = 2, gamma[1] = 0.5f, beta[0] = 1, beta[1] = -1;
  ks_model_parameters_changed (model);
  double run_mean[2] = { 0, 0 }, run_var[2] = { 1, 1 };

  for (int round = 0; round < 2; round++)
    {
      g_autofree float *xs = ks_test_random_floats (rng, rows * cols, -2, 3);
      KsFeed feed = { "x", xs, sizeof (float) * rows * cols };
      g_assert_true (ks_model_run (model, &feed, 1, &y, 1, &error));
      g_autofree float *got = host_copy (y);
      for (gsize j = 0; j < cols; j++)
        {
          double mean = 0, var = 0;
          for (gsize r = 0; r < rows; r++)
            mean += xs[r * cols + j] / (double) rows;
          for (gsize r = 0; r < rows; r++)
            var += pow (xs[r * cols + j] - mean, 2) / rows;
          for (gsize r = 0; r < rows; r++)
            {
              double want = (xs[r * cols + j] - mean) / sqrt (var + 1e-3) * gamma[j] + beta[j];
              g_assert_cmpfloat_with_epsilon (got[r * cols + j], want, 1e-5);
            }
          run_mean[j] = 0.75 * run_mean[j] + 0.25 * mean;
          run_var[j] = 0.75 * run_var[j] + 0.25 * var * rows / (rows - 1);
        }
    }
  const float *rm = param (model, "bn.running_mean"), *rv = param (model, "bn.running_var");
  for (gsize j = 0; j < cols; j++)
    {
      g_assert_cmpfloat_with_epsilon (rm[j], run_mean[j], 1e-5);
      g_assert_cmpfloat_with_epsilon (rv[j], run_var[j], 1e-5);
    }

  /* evaluation: the running statistics, and the same input gives the same output */
  g_autofree float *xs = ks_test_random_floats (rng, rows * cols, -2, 3);
  KsFeed feed = { "x", xs, sizeof (float) * rows * cols };
  ks_model_set_training (model, FALSE);
  g_assert_true (ks_model_run (model, &feed, 1, &y, 1, &error));
  g_autofree float *eval = host_copy (y);
  for (gsize r = 0; r < rows; r++)
    for (gsize j = 0; j < cols; j++)
      {
        double want = (xs[r * cols + j] - run_mean[j]) / sqrt (run_var[j] + 1e-3) * gamma[j]
                      + beta[j];
        g_assert_cmpfloat_with_epsilon (eval[r * cols + j], want, 1e-5);
      }
  g_assert_cmpfloat (rm[0], ==, (float) run_mean[0]) ; /* evaluation leaves them alone */

  /* a checkpoint keeps the running statistics */
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *latest = NULL;
  float saved_var = rv[1];
  g_assert_true (ks_checkpoint_save (dir, 2, model, NULL, NULL, 0, &error));
  ((float *) rv)[1] = 123;
  g_assert_nonnull (latest = ks_checkpoint_latest (dir));
  g_assert_true (ks_checkpoint_load (latest, model, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpfloat (rv[1], ==, saved_var);
  ks_test_rmtree (dir);
}

/* An exported conv net (evaluation mode: batch norm by its running statistics) loads
 * back and computes the same logits, also built for another batch. */
static void
test_export (Fixture *f, gconstpointer data)
{
  g_autoptr (KsModel) model = ks_model_new (f->c);
  g_autoptr (GError) error = NULL;
  g_autoptr (GRand) rng = g_rand_new_with_seed (31);
  const gint64 shape[] = { 3, 8, 8, 2 };
  const gsize n = 3 * 8 * 8 * 2;
  KsExpr *x = ks_model_data (model, "x", 4, shape, KS_DTYPE_FLOAT32, &error);
  KsExpr *h = ks_relu (ks_batch_norm (ks_conv2d (x, 4, 3, 2, 1, "c", 1, &error), "bn", 0.5f,
                                      1e-5f, &error), &error);
  KsExpr *logits = ks_fc (ks_flatten (ks_max_pool (h, 2, 1, &error), &error), 3, -1, "fc", 2,
                          &error);
  g_assert_no_error (error);
  g_assert_true (ks_model_init (model, &error));
  g_autofree float *xs = ks_test_random_floats (rng, 2 * n, -1, 1);
  KsFeed feed = { "x", xs, n * sizeof (float) };
  g_assert_true (ks_model_run (model, &feed, 1, &logits, 1, &error)); /* moves the stats */
  ks_model_set_training (model, FALSE);
  g_assert_true (ks_model_run (model, &feed, 1, &logits, 1, &error));
  g_autofree float *want = host_copy (logits);

  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *path = g_build_filename (dir, "export", NULL);
  const char *const feeds[] = { "x", NULL };
  g_assert_true (ks_save_inference_model (path, model, feeds, &logits, 1, &error));
  g_assert_no_error (error);
  for (gint64 batch = 3; batch <= 5; batch += 2)
    {
      g_auto (GStrv) in = NULL, out = NULL;
      g_autoptr (KsModel) loaded = ks_load_inference_model_with_batch (path, f->c, batch, &in,
                                                                       &out, &error);
      g_assert_no_error (error);
      KsExpr *y = ks_model_find (loaded, out[0]);
      KsFeed lf = { in[0], xs, batch * (n / 3) * sizeof (float) };
      g_assert_true (ks_model_run (loaded, &lf, 1, &y, 1, &error));
      g_autofree float *got = host_copy (y);
      for (int i = 0; i < 9; i++) /* the first 3 rows: the saved model's batch */
        g_assert_cmpfloat_with_epsilon (got[i], want[i], 1e-6);
    }
  ks_test_rmtree (dir);
}

static void
test_errors (Fixture *f, gconstpointer data)
{
  g_autoptr (KsModel) model = ks_model_new (f->c);
  const gint64 flat[] = { 4, 8 }, img[] = { 2, 5, 5, 3 };
  KsExpr *x2 = ks_model_data (model, "x2", 2, flat, KS_DTYPE_FLOAT32, NULL);
  KsExpr *x4 = ks_model_data (model, "x4", 4, img, KS_DTYPE_FLOAT32, NULL);
  GError *error = NULL;

  g_assert_null (ks_conv2d (x2, 4, 3, 1, 1, "c", 1, &error));
  g_assert_cmpstr (error->message, ==, "conv2d: 'x2' is float32 [4, 8]; it takes float32 images "
                   "[batch, height, width, channels]");
  g_clear_error (&error);
  g_assert_null (ks_conv2d (x4, 4, 7, 1, 0, "c", 1, &error));
  g_assert_nonnull (strstr (error->message, "kernel 7, stride 1, pad 0 do not fit"));
  g_clear_error (&error);
  g_assert_null (ks_max_pool (x4, 2, 0, &error));
  g_assert_nonnull (strstr (error->message, "max pool of 'x4' [2, 5, 5, 3]"));
  g_clear_error (&error);
  g_assert_null (ks_avg_pool (x4, 6, 1, 0, &error)); /* wider than the image */
  g_assert_nonnull (strstr (error->message, "avg pool of 'x4' [2, 5, 5, 3]: kernel 6"));
  g_clear_error (&error);
  g_assert_null (ks_avg_pool (x4, 2, 1, 2, &error)); /* pad not below the kernel */
  g_assert_nonnull (strstr (error->message, "pad 2 do not fit"));
  g_clear_error (&error);
  g_assert_null (ks_avg_pool (x2, 2, 2, 0, &error));
  g_assert_nonnull (strstr (error->message, "avg pool: 'x2' is float32 [4, 8]"));
  g_clear_error (&error);
  g_assert_null (ks_batch_norm (x4, "bn", 1.5f, 1e-5f, &error));
  g_assert_cmpstr (error->message, ==, "batch norm 'bn': momentum 1.5 must be in [0, 1] and "
                   "eps 1e-05 above 0");
  g_clear_error (&error);

  /* a running statistic named for backward is refused */
  KsExpr *y = ks_batch_norm (x4, "bn", 0.1f, 1e-5f, &error);
  KsExpr *loss = ks_mean (y, &error);
  g_assert_no_error (error);
  g_assert_true (ks_model_init (model, &error));
  KsExpr *stat = ks_model_find (model, "bn.running_var");
  g_assert_false (ks_model_backward (model, loss, &stat, 1, NULL, NULL, &error));
  g_assert_cmpstr (error->message, ==, "backward: 'bn.running_var' is a running statistic, "
                   "not trained by gradients");
  g_clear_error (&error);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (!ks_test_have_openblas ())
    return g_test_run ();
#define ADD(name, fn) g_test_add ("/conv/" name, Fixture, NULL, setup, fn, teardown)
  ADD ("forward", test_conv_forward);
  ADD ("im2col-adjoint", test_im2col_adjoint);
  ADD ("max-pool", test_max_pool);
  ADD ("avg-pool", test_avg_pool);
  ADD ("logistic", test_logistic);
  ADD ("avg-pool-logistic-gradients", test_avg_pool_logistic_gradients);
  ADD ("gradients", test_gradients);
  ADD ("gradients-in-chunks", test_gradients_in_chunks);
  ADD ("batch-norm", test_batch_norm);
  ADD ("export", test_export);
  ADD ("errors", test_errors);
  return g_test_run ();
}
