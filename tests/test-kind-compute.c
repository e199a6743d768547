/* The compute backend conformance suite: the same checks against every backend found
 * (openblas and cuda in the build tree; or only the plugin KS_KIND_PLUGIN names, as `make
 * check-plugin PLUGIN=path/x.so` runs it). Every slot is called through the vtable on
 * tensors copied in and out (a backend of device memory is never read directly), and
 * checked against values computed here in double precision; gradients against central
 * finite differences of the backend's own forward, on L = sum (w * y) (so dy = w). An
 * optional slot the backend lacks skips its check, saying so. What only one backend does
 * stays in its own test (test-compute: threads, the CUDA probe; test-kernels, test-cuda). */
#include "testutil.h"

#include <ksdist/half.h>

#include <math.h>
#include <string.h>

typedef struct {
  char *dir, *name;
} Backend;

typedef struct {
  KsConfig *config;
  KsRegistry *registry;
  KsCompute *c; /* NULL when the backend cannot run here: the test is skipped */
  guint32 traits;
  GRand *rng;
} Fixture;

static void
setup (Fixture *f, gconstpointer data)
{
  const Backend *b = data;
  g_autoptr (GError) error = NULL;

  ks_test_clear_env ();
  f->rng = g_rand_new_with_seed (20261128);
  f->config = ks_config_new ();
  f->registry = ks_test_scan (f->config, b->dir);
  if (!ks_registry_traits (f->registry, KS_KIND_COMPUTE, b->name, &f->traits))
    {
      g_autofree char *why = g_strdup_printf ("no compute backend %s in %s (not built, or the "
                                              "plugin is of another kind)", b->name, b->dir);
      g_test_skip (why);
      return;
    }
  f->c = ks_compute_new (f->registry, f->config, b->name, &error);
  if (g_error_matches (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_UNAVAILABLE))
    {
      g_test_skip (error->message); /* e.g. cuda on a machine without a GPU */
      return;
    }
  g_assert_no_error (error);
  g_assert_cmpstr (ks_compute_plugin (f->c), ==, b->name);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  ks_compute_free (f->c);
  if (f->registry != NULL)
    ks_registry_free (f->registry);
  ks_config_free (f->config);
  g_rand_free (f->rng);
}

/* ---- copies in and out ---- */

static void *
up (Fixture *f, const void *host, gsize nbytes)
{
  g_autoptr (GError) error = NULL;
  void *dev = ks_compute_alloc (f->c, MAX (nbytes, 1), &error);
  g_assert_no_error (error);
  g_assert_true (ks_compute_copy_to_device (f->c, dev, host, nbytes, &error));
  return dev;
}

static float *
upf (Fixture *f, const float *host, gsize n)
{
  return up (f, host, n * sizeof (float));
}

/* A host copy of n floats at `dev`, which is freed. */
static float *
down (Fixture *f, float *dev, gsize n)
{
  float *host = g_new (float, MAX (n, 1));
  g_autoptr (GError) error = NULL;
  g_assert_true (ks_compute_copy_to_host (f->c, host, dev, n * sizeof (float), &error));
  ks_compute_free_memory (f->c, dev);
  return host;
}

/* FALSE, with the test skipped, when the call failed because the slot is missing. */
static gboolean
has_slot (GError **error, const char *slot)
{
  if (!g_error_matches (*error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_SUPPORTED))
    return TRUE;
  g_autofree char *why = g_strdup_printf ("%s: %s", slot, (*error)->message);
  g_test_skip (why);
  g_clear_error (error);
  return FALSE;
}

/* Asserts |got - want| <= tol * (1 + |want|), naming the check and index on failure. */
static void
assert_close (const char *what, gsize i, double got, double want, double tol)
{
  if (!(fabs (got - want) <= tol * (1 + fabs (want))))
    g_error ("%s[%" G_GSIZE_FORMAT "]: got %.7g, want %.7g (tolerance %g)", what, i, got, want,
             tol);
}

static double
weighted_sum (const float *w, const float *y, gsize n)
{
  double s = 0;
  for (gsize i = 0; i < n; i++)
    s += (double) w[i] * y[i];
  return s;
}

/* L(x) = sum (w * forward (x)), run on the backend, for finite differences. */
typedef double (*Loss) (Fixture *f, const float *x, gpointer data);

/* grad[i] = dL/dx[i] by central differences of step h. */
static void
check_gradient (Fixture *f, const char *what, Loss loss, gpointer data, float *x, gsize n,
                const float *grad, double h, double tol)
{
  for (gsize i = 0; i < n; i++)
    {
      float saved = x[i];
      x[i] = saved + (float) h;
      double hi = loss (f, x, data);
      x[i] = saved - (float) h;
      double lo = loss (f, x, data);
      x[i] = saved;
      assert_close (what, i, grad[i], (hi - lo) / (2 * h), tol);
    }
}

/* ---- memory (the required slots) ---- */

static void
test_memory (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  g_autoptr (GError) error = NULL;
  const gsize n = 1000;
  g_autofree float *host = g_new (float, n);
  g_autofree float *back = g_new (float, n);

  for (gsize i = 0; i < n; i++)
    host[i] = (float) i * 0.5f - 7;
  float *a = upf (f, host, n);
  g_assert_true (ks_compute_copy_to_host (f->c, back, a, n * sizeof (float), &error));
  g_assert_cmpmem (back, n * sizeof (float), host, n * sizeof (float));

  if (!(f->traits & KS_COMPUTE_DEVICE_MEMORY)) /* host memory: the pointer is the data */
    g_assert_cmpmem (a, n * sizeof (float), host, n * sizeof (float));

  float *b = ks_compute_alloc (f->c, n * sizeof (float), &error);
  g_assert_no_error (error);
  if (ks_compute_fill_zero (f->c, b, n * sizeof (float), &error))
    {
      g_assert_true (ks_compute_copy_to_host (f->c, back, b, n * sizeof (float), &error));
      for (gsize i = 0; i < n; i++)
        g_assert_cmpfloat (back[i], ==, 0.0f);
    }
  else
    has_slot (&error, "fill_zero");
  g_assert_no_error (error);
  if (!ks_compute_synchronize (f->c, &error))
    has_slot (&error, "synchronize");
  g_assert_no_error (error);
  ks_compute_free_memory (f->c, a);
  ks_compute_free_memory (f->c, b);

  /* an allocation that cannot succeed is an error, not an abort */
  g_assert_null (ks_compute_alloc (f->c, G_MAXSIZE / 2, &error));
  g_assert_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_NO_MEMORY);
}

/* ---- matrix products ---- */

/* Row-major element (i, j) of op(X) where X has leading dimension ld. */
static double
at (const float *x, KsTranspose t, int ld, int i, int j)
{
  return t == KS_TRANS_N ? x[(gsize) i * ld + j] : x[(gsize) j * ld + i];
}

static void
check_gemm (Fixture *f, KsTranspose ta, KsTranspose tb, int m, int n, int k, float alpha,
            float beta, int pad, int batch)
{
  int rows_a = ta == KS_TRANS_N ? m : k, cols_a = ta == KS_TRANS_N ? k : m;
  int rows_b = tb == KS_TRANS_N ? k : n, cols_b = tb == KS_TRANS_N ? n : k;
  int lda = cols_a + pad, ldb = cols_b + pad, ldc = n + pad;
  gint64 sa = (gint64) rows_a * lda, sb = (gint64) rows_b * ldb, sc = (gint64) m * ldc;
  g_autofree float *ha = ks_test_random_floats (f->rng, sa * batch, -1, 1);
  g_autofree float *hb = ks_test_random_floats (f->rng, sb * batch, -1, 1);
  g_autofree float *hc = ks_test_random_floats (f->rng, sc * batch, -1, 1);
  g_autoptr (GError) error = NULL;

  if (beta == 0) /* C's old contents are ignored, even NaN (padding columns keep theirs) */
    for (gint64 i = 0; i < sc * batch; i++)
      hc[i] = NAN;
  float *a = upf (f, ha, sa * batch), *b = upf (f, hb, sb * batch), *c = upf (f, hc, sc * batch);
  if (batch == 1)
    ks_compute_sgemm (f->c, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &error);
  else
    ks_compute_sgemm_strided_batched (f->c, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb,
                                      beta, c, ldc, sc, batch, &error);
  ks_compute_free_memory (f->c, a);
  ks_compute_free_memory (f->c, b);
  if (!has_slot (&error, batch == 1 ? "sgemm" : "sgemm_strided_batched"))
    {
      ks_compute_free_memory (f->c, c);
      return;
    }
  g_assert_no_error (error);
  g_autofree float *out = down (f, c, sc * batch);
  g_autofree char *what = g_strdup_printf ("sgemm %c%c m=%d n=%d k=%d pad=%d batch=%d",
                                           "NT"[ta], "NT"[tb], m, n, k, pad, batch);
  for (int p = 0; p < batch; p++)
    for (int i = 0; i < m; i++)
      for (int j = 0; j < ldc; j++)
        {
          gsize idx = p * sc + (gsize) i * ldc + j;
          double want = hc[idx]; /* padding columns must stay untouched */
          if (j < n)
            {
              double sum = 0;
              for (int l = 0; l < k; l++)
                sum += at (ha + p * sa, ta, lda, i, l) * at (hb + p * sb, tb, ldb, l, j);
              want = alpha * sum + (beta != 0 ? beta * hc[idx] : 0);
            }
          if (isnan (want))
            g_assert_true (isnan (out[idx]));
          else
            assert_close (what, idx, out[idx], want, 1e-5 * (k + 1));
        }
}

static void
test_sgemm (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  const int shapes[][3] = { { 1, 1, 1 }, { 7, 5, 3 }, { 37, 53, 29 }, { 64, 64, 64 },
                            { 128, 3, 257 } };
  for (guint s = 0; s < G_N_ELEMENTS (shapes); s++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++)
        check_gemm (f, ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 0.75f, -0.5f,
                    s % 2 ? 3 : 0, 1);
  /* beta = 0, rows end to end and with padding between them */
  check_gemm (f, KS_TRANS_N, KS_TRANS_N, 37, 16, 25, 1.0f, 0.0f, 0, 1);
  check_gemm (f, KS_TRANS_N, KS_TRANS_T, 37, 16, 25, 0.5f, 0.0f, 3, 1);
}

static void
test_sgemm_batched (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  check_gemm (f, KS_TRANS_N, KS_TRANS_T, 9, 11, 13, 1.0f, 0.0f, 2, 4);
  check_gemm (f, KS_TRANS_T, KS_TRANS_N, 16, 8, 5, -2.0f, 1.0f, 0, 3);
}

/* ---- elementwise ---- */

static double
reference_unary (KsUnaryOp op, double x)
{
  switch (op)
    {
    case KS_UNARY_RELU: return fmax (x, 0);
    case KS_UNARY_TANH: return tanh (x);
    case KS_UNARY_SIGMOID: return 1 / (1 + exp (-x));
    case KS_UNARY_GELU: /* compute.h: the tanh form, as GPT-2 */
      return 0.5 * x * (1 + tanh (sqrt (2 / G_PI) * (x + 0.044715 * x * x * x)));
    case KS_UNARY_EXP: return exp (x);
    case KS_UNARY_LOG: return log (x);
    case KS_UNARY_NEG: return -x;
    case KS_UNARY_SQRT: return sqrt (x);
    }
  return NAN;
}

typedef struct {
  KsUnaryOp op;
  const float *w;
  gsize n;
} UnaryCase;

static float *
run_unary (Fixture *f, KsUnaryOp op, const float *x, gsize n, GError **error)
{
  float *dx = upf (f, x, n), *dy = ks_compute_alloc (f->c, n * sizeof (float), NULL);
  gboolean ok = ks_compute_unary (f->c, op, dx, dy, n, error);
  ks_compute_free_memory (f->c, dx);
  if (!ok)
    {
      ks_compute_free_memory (f->c, dy);
      return NULL;
    }
  return down (f, dy, n);
}

static double
unary_loss (Fixture *f, const float *x, gpointer data)
{
  UnaryCase *u = data;
  g_autofree float *y = run_unary (f, u->op, x, u->n, NULL);
  g_assert_nonnull (y);
  return weighted_sum (u->w, y, u->n);
}

static void
test_unary (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  const gsize n = 24;
  for (int op = KS_UNARY_RELU; op <= KS_UNARY_SQRT; op++)
    {
      gboolean positive = op == KS_UNARY_LOG || op == KS_UNARY_SQRT;
      g_autofree float *x = ks_test_random_floats (f->rng, n, positive ? 0.2 : -3, 3);
      g_autofree float *w = ks_test_random_floats (f->rng, n, -1, 1);
      g_autofree char *what = g_strdup_printf ("unary op %d", op);
      g_autoptr (GError) error = NULL;
      UnaryCase u = { op, w, n };

      for (gsize i = 0; i < n; i++) /* keep away from relu's kink */
        if (fabsf (x[i]) < 0.05f)
          x[i] = 0.5f;
      g_autofree float *y = run_unary (f, op, x, n, &error);
      if (!has_slot (&error, "unary"))
        return;
      g_assert_no_error (error);
      for (gsize i = 0; i < n; i++) /* a backend may use a faster tanh in GELU */
        assert_close (what, i, y[i], reference_unary (op, x[i]), op == KS_UNARY_GELU ? 1e-4 : 1e-5);

      float *dx = upf (f, x, n), *dy = upf (f, y, n), *dw = upf (f, w, n);
      float *dgrad = ks_compute_alloc (f->c, n * sizeof (float), NULL);
      gboolean ok = ks_compute_unary_backward (f->c, op, dx, dy, dw, dgrad, n, &error);
      ks_compute_free_memory (f->c, dx);
      ks_compute_free_memory (f->c, dy);
      ks_compute_free_memory (f->c, dw);
      g_autofree float *grad = down (f, dgrad, n);
      if (!ok && !has_slot (&error, "unary_backward"))
        return;
      g_assert_no_error (error);
      check_gradient (f, what, unary_loss, &u, x, n, grad, 1e-3, 5e-3);
    }
}

static double
reference_binary (KsBinaryOp op, double a, double b)
{
  switch (op)
    {
    case KS_BINARY_ADD: return a + b;
    case KS_BINARY_SUB: return a - b;
    case KS_BINARY_MUL: return a * b;
    case KS_BINARY_DIV: return a / b;
    }
  return NAN;
}

static void
test_binary (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  const gsize rows = 5, cols = 7;
  for (int op = KS_BINARY_ADD; op <= KS_BINARY_DIV; op++)
    for (gsize b_rows = 1; b_rows <= rows; b_rows += rows - 1) /* broadcast row, then full */
      {
        g_autofree float *a = ks_test_random_floats (f->rng, rows * cols, -2, 2);
        g_autofree float *b = ks_test_random_floats (f->rng, b_rows * cols, 0.5, 2);
        g_autofree char *what = g_strdup_printf ("binary op %d b_rows %zu", op, b_rows);
        g_autoptr (GError) error = NULL;
        float *da = upf (f, a, rows * cols), *db = upf (f, b, b_rows * cols);
        float *dc = ks_compute_alloc (f->c, rows * cols * sizeof (float), NULL);
        gboolean ok = ks_compute_binary (f->c, op, da, db, dc, rows, cols, b_rows, &error);
        ks_compute_free_memory (f->c, da);
        ks_compute_free_memory (f->c, db);
        g_autofree float *c = down (f, dc, rows * cols);
        if (!ok && !has_slot (&error, "binary"))
          return;
        g_assert_no_error (error);
        for (gsize r = 0; r < rows; r++)
          for (gsize j = 0; j < cols; j++)
            assert_close (what, r * cols + j, c[r * cols + j],
                          reference_binary (op, a[r * cols + j], b[(b_rows == 1 ? 0 : r) * cols + j]),
                          1e-6);
      }
}

static void
test_reduce (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  const gsize rows = 6, cols = 9;
  g_autofree float *x = ks_test_random_floats (f->rng, rows * cols, 0.5, 1.5);
  for (int op = KS_REDUCE_SUM; op <= KS_REDUCE_PROD; op++)
    for (int axis = 0; axis <= 1; axis++)
      {
        gsize outer = axis == 0 ? cols : rows, inner = axis == 0 ? rows : cols;
        g_autofree char *what = g_strdup_printf ("reduce op %d axis %d", op, axis);
        g_autoptr (GError) error = NULL;
        float *dx = upf (f, x, rows * cols);
        float *dy = ks_compute_alloc (f->c, outer * sizeof (float), NULL);
        gboolean ok = ks_compute_reduce (f->c, op, dx, dy, rows, cols, axis, &error);
        ks_compute_free_memory (f->c, dx);
        g_autofree float *y = down (f, dy, outer);
        if (!ok && !has_slot (&error, "reduce"))
          return;
        g_assert_no_error (error);
        for (gsize o = 0; o < outer; o++)
          {
            double acc = op == KS_REDUCE_PROD ? 1 : op == KS_REDUCE_MIN ? INFINITY
                         : op == KS_REDUCE_MAX ? -INFINITY : 0;
            for (gsize i = 0; i < inner; i++)
              {
                double v = axis == 0 ? x[i * cols + o] : x[o * cols + i];
                acc = op == KS_REDUCE_PROD ? acc * v : op == KS_REDUCE_MIN ? fmin (acc, v)
                      : op == KS_REDUCE_MAX ? fmax (acc, v) : acc + v;
              }
            assert_close (what, o, y[o], op == KS_REDUCE_AVG ? acc / inner : acc, 1e-5);
          }
      }
}

static void
test_axpby (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  const gsize n = 50;
  g_autofree float *x = ks_test_random_floats (f->rng, n, -1, 1);
  g_autofree float *y = ks_test_random_floats (f->rng, n, -1, 1);
  for (int zero_beta = 0; zero_beta <= 1; zero_beta++)
    {
      float beta = zero_beta ? 0.0f : -0.5f;
      g_autofree float *y0 = g_memdup2 (y, n * sizeof (float));
      g_autoptr (GError) error = NULL;
      if (zero_beta) /* beta = 0 ignores y's old contents, even NaN */
        for (gsize i = 0; i < n; i++)
          y0[i] = NAN;
      float *dx = upf (f, x, n), *dy = upf (f, y0, n);
      gboolean ok = ks_compute_axpby (f->c, 1.5f, dx, beta, dy, n, &error);
      ks_compute_free_memory (f->c, dx);
      g_autofree float *out = down (f, dy, n);
      if (!ok && !has_slot (&error, "axpby"))
        return;
      g_assert_no_error (error);
      for (gsize i = 0; i < n; i++)
        assert_close ("axpby", i, out[i], 1.5 * x[i] + (zero_beta ? 0 : beta * (double) y[i]),
                      1e-6);
    }
}

/* ---- softmax, layer norm, cross entropy ---- */

typedef struct {
  gboolean log;
  gsize rows, cols;
  const float *w;
} SoftmaxCase;

static float *
run_softmax (Fixture *f, const SoftmaxCase *s, const float *x, GError **error)
{
  gsize n = s->rows * s->cols;
  float *dx = upf (f, x, n), *dy = ks_compute_alloc (f->c, n * sizeof (float), NULL);
  gboolean ok = ks_compute_softmax (f->c, dx, dy, s->rows, s->cols, s->log, error);
  ks_compute_free_memory (f->c, dx);
  float *y = down (f, dy, n);
  if (!ok)
    g_clear_pointer (&y, g_free);
  return y;
}

static double
softmax_loss (Fixture *f, const float *x, gpointer data)
{
  SoftmaxCase *s = data;
  g_autofree float *y = run_softmax (f, s, x, NULL);
  g_assert_nonnull (y);
  return weighted_sum (s->w, y, s->rows * s->cols);
}

static void
test_softmax (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  const gsize rows = 3, cols = 6, n = rows * cols;
  for (int is_log = 0; is_log <= 1; is_log++)
    {
      g_autofree float *x = ks_test_random_floats (f->rng, n, -4, 4);
      g_autofree float *w = ks_test_random_floats (f->rng, n, -1, 1);
      g_autoptr (GError) error = NULL;
      SoftmaxCase s = { is_log, rows, cols, w };
      const char *what = is_log ? "log_softmax" : "softmax";

      x[0] = 80; /* a large logit: exp without the row's maximum taken off overflows */
      g_autofree float *y = run_softmax (f, &s, x, &error);
      if (y == NULL && !has_slot (&error, "softmax"))
        return;
      g_assert_no_error (error);
      for (gsize r = 0; r < rows; r++)
        {
          double mx = -INFINITY, sum = 0;
          for (gsize j = 0; j < cols; j++)
            mx = fmax (mx, x[r * cols + j]);
          for (gsize j = 0; j < cols; j++)
            sum += exp (x[r * cols + j] - mx);
          for (gsize j = 0; j < cols; j++)
            {
              double lp = x[r * cols + j] - mx - log (sum);
              assert_close (what, r * cols + j, y[r * cols + j], is_log ? lp : exp (lp), 1e-5);
            }
        }
      x[0] = 1; /* finite differences need a logit where float keeps fractions */
      g_clear_pointer (&y, g_free);
      y = run_softmax (f, &s, x, NULL);
      float *dy = upf (f, y, n), *dw = upf (f, w, n);
      float *dg = ks_compute_alloc (f->c, n * sizeof (float), NULL);
      gboolean ok = ks_compute_softmax_backward (f->c, dy, dw, dg, rows, cols, is_log, &error);
      ks_compute_free_memory (f->c, dy);
      ks_compute_free_memory (f->c, dw);
      g_autofree float *grad = down (f, dg, n);
      if (!ok && !has_slot (&error, "softmax_backward"))
        return;
      g_assert_no_error (error);
      check_gradient (f, what, softmax_loss, &s, x, n, grad, 1e-3, 5e-3);
    }
}

typedef struct {
  gsize rows, cols;
  const float *w, *gamma, *beta;
  float *x; /* the input, while gamma is varied */
  int wrt; /* 0: x, 1: gamma, 2: beta */
} NormCase;

/* y (and mean, rstd when asked) of layer_norm on the backend */
static float *
run_layer_norm (Fixture *f, const NormCase *c, const float *x, const float *gamma,
                const float *beta, float **mean, float **rstd, GError **error)
{
  gsize n = c->rows * c->cols;
  float *dx = upf (f, x, n), *dg = upf (f, gamma, c->cols), *db = upf (f, beta, c->cols);
  float *dy = ks_compute_alloc (f->c, n * sizeof (float), NULL);
  float *dm = ks_compute_alloc (f->c, c->rows * sizeof (float), NULL);
  float *dr = ks_compute_alloc (f->c, c->rows * sizeof (float), NULL);
  gboolean ok = ks_compute_layer_norm (f->c, dx, dg, db, dy, dm, dr, c->rows, c->cols, 1e-5f,
                                       error);
  ks_compute_free_memory (f->c, dx);
  ks_compute_free_memory (f->c, dg);
  ks_compute_free_memory (f->c, db);
  float *m = down (f, dm, c->rows), *r = down (f, dr, c->rows), *y = down (f, dy, n);
  if (mean != NULL)
    *mean = m, *rstd = r;
  else
    g_free (m), g_free (r);
  if (!ok)
    g_clear_pointer (&y, g_free);
  return y;
}

static double
norm_loss (Fixture *f, const float *v, gpointer data)
{
  NormCase *c = data;
  g_autofree float *y = run_layer_norm (f, c, c->wrt == 0 ? v : c->x, c->wrt == 1 ? v : c->gamma,
                                        c->wrt == 2 ? v : c->beta, NULL, NULL, NULL);
  g_assert_nonnull (y);
  return weighted_sum (c->w, y, c->rows * c->cols);
}

static void
test_layer_norm (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  const gsize rows = 3, cols = 8, n = rows * cols;
  g_autofree float *x = ks_test_random_floats (f->rng, n, -2, 2);
  g_autofree float *gamma = ks_test_random_floats (f->rng, cols, 0.5, 1.5);
  g_autofree float *beta = ks_test_random_floats (f->rng, cols, -0.5, 0.5);
  g_autofree float *w = ks_test_random_floats (f->rng, n, -1, 1);
  g_autofree float *mean = NULL, *rstd = NULL;
  g_autoptr (GError) error = NULL;
  NormCase c = { rows, cols, w, gamma, beta, x, 0 };

  g_autofree float *y = run_layer_norm (f, &c, x, gamma, beta, &mean, &rstd, &error);
  if (y == NULL && !has_slot (&error, "layer_norm"))
    return;
  g_assert_no_error (error);
  for (gsize r = 0; r < rows; r++)
    {
      double mu = 0, var = 0;
      for (gsize j = 0; j < cols; j++)
        mu += x[r * cols + j];
      mu /= cols;
      for (gsize j = 0; j < cols; j++)
        var += (x[r * cols + j] - mu) * (x[r * cols + j] - mu);
      double rs = 1 / sqrt (var / cols + 1e-5);
      assert_close ("layer_norm mean", r, mean[r], mu, 1e-5);
      assert_close ("layer_norm rstd", r, rstd[r], rs, 1e-4);
      for (gsize j = 0; j < cols; j++)
        assert_close ("layer_norm", r * cols + j, y[r * cols + j],
                      (x[r * cols + j] - mu) * rs * gamma[j] + beta[j], 1e-4);
    }

  /* dgamma and dbeta are added to: they start at 1 */
  g_autofree float *ones = g_new (float, cols);
  for (gsize j = 0; j < cols; j++)
    ones[j] = 1;
  float *dx = upf (f, x, n), *dg = upf (f, gamma, cols), *dm = upf (f, mean, rows);
  float *dr = upf (f, rstd, rows), *dw = upf (f, w, n), *ddgamma = upf (f, ones, cols);
  float *ddbeta = upf (f, ones, cols), *ddx = ks_compute_alloc (f->c, n * sizeof (float), NULL);
  gboolean ok = ks_compute_layer_norm_backward (f->c, dx, dg, dm, dr, dw, ddx, ddgamma, ddbeta,
                                                rows, cols, &error);
  ks_compute_free_memory (f->c, dx);
  ks_compute_free_memory (f->c, dg);
  ks_compute_free_memory (f->c, dm);
  ks_compute_free_memory (f->c, dr);
  ks_compute_free_memory (f->c, dw);
  g_autofree float *gx = down (f, ddx, n), *ggamma = down (f, ddgamma, cols);
  g_autofree float *gbeta = down (f, ddbeta, cols);
  if (!ok && !has_slot (&error, "layer_norm_backward"))
    return;
  g_assert_no_error (error);
  for (gsize j = 0; j < cols; j++)
    ggamma[j] -= 1, gbeta[j] -= 1;
  check_gradient (f, "layer_norm dx", norm_loss, &c, x, n, gx, 1e-3, 5e-3);
  c.wrt = 1;
  check_gradient (f, "layer_norm dgamma", norm_loss, &c, gamma, cols, ggamma, 1e-3, 5e-3);
  c.wrt = 2;
  check_gradient (f, "layer_norm dbeta", norm_loss, &c, beta, cols, gbeta, 1e-3, 5e-3);
}

typedef struct {
  gsize rows, cols;
  const gint64 *labels;
} CrossCase;

static float *
run_cross_entropy (Fixture *f, const CrossCase *c, const float *logits, float **dlogits,
                   GError **error)
{
  gsize n = c->rows * c->cols;
  float *dx = upf (f, logits, n), *dl = ks_compute_alloc (f->c, c->rows * sizeof (float), NULL);
  gint64 *dlab = up (f, c->labels, c->rows * sizeof (gint64));
  float *dd = dlogits != NULL ? ks_compute_alloc (f->c, n * sizeof (float), NULL) : NULL;
  gboolean ok = ks_compute_cross_entropy (f->c, dx, dlab, dl, dd, c->rows, c->cols, error);
  ks_compute_free_memory (f->c, dx);
  ks_compute_free_memory (f->c, dlab);
  if (dlogits != NULL)
    *dlogits = down (f, dd, n);
  float *losses = down (f, dl, c->rows);
  if (!ok)
    g_clear_pointer (&losses, g_free);
  return losses;
}

static double
cross_loss (Fixture *f, const float *x, gpointer data)
{
  CrossCase *c = data;
  g_autofree float *losses = run_cross_entropy (f, c, x, NULL, NULL);
  double s = 0;
  g_assert_nonnull (losses);
  for (gsize r = 0; r < c->rows; r++)
    s += losses[r];
  return s;
}

static void
test_cross_entropy (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  const gsize rows = 4, cols = 5, n = rows * cols;
  gint64 labels[] = { 0, 4, 2, 2 };
  g_autofree float *x = ks_test_random_floats (f->rng, n, -3, 3);
  g_autofree float *dlogits = NULL;
  g_autoptr (GError) error = NULL;
  CrossCase c = { rows, cols, labels };

  g_autofree float *losses = run_cross_entropy (f, &c, x, &dlogits, &error);
  if (losses == NULL && !has_slot (&error, "cross_entropy"))
    return;
  g_assert_no_error (error);
  for (gsize r = 0; r < rows; r++)
    {
      double sum = 0;
      for (gsize j = 0; j < cols; j++)
        sum += exp (x[r * cols + j]);
      assert_close ("cross_entropy", r, losses[r], log (sum) - x[r * cols + labels[r]], 1e-5);
    }
  check_gradient (f, "cross_entropy dlogits", cross_loss, &c, x, n, dlogits, 1e-3, 5e-3);

  /* a label outside [0, cols) is an error, not a read outside the row */
  labels[3] = (gint64) cols;
  g_clear_pointer (&losses, g_free);
  losses = run_cross_entropy (f, &c, x, NULL, &error);
  g_assert_null (losses);
  g_assert_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID);
  g_test_message ("bad label: %s", error->message);
}

/* ---- lookups, layouts, masks ---- */

/* An id outside the table is an error, not a read outside it. */
static void
check_embedding_bad_id (Fixture *f, const float *table, gsize n_rows, gsize dim)
{
  const gint64 bad[] = { 2, (gint64) n_rows };
  g_autoptr (GError) error = NULL;
  gint64 *db = up (f, bad, sizeof bad);
  float *dt = upf (f, table, n_rows * dim);
  float *dy = ks_compute_alloc (f->c, 2 * dim * sizeof (float), NULL);
  g_assert_false (ks_compute_embedding (f->c, dt, n_rows, db, dy, 2, dim, &error));
  g_assert_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID);
  ks_compute_free_memory (f->c, db);
  ks_compute_free_memory (f->c, dt);
  ks_compute_free_memory (f->c, dy);
}

static void
test_embedding (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  const gsize n_rows = 6, dim = 4;
  const gint64 ids[] = { 5, 0, 5, 3, 1 }; /* 5 twice: its gradient rows add up */
  const gsize n_ids = G_N_ELEMENTS (ids);
  g_autofree float *table = ks_test_random_floats (f->rng, n_rows * dim, -1, 1);
  g_autofree float *dout = ks_test_random_floats (f->rng, n_ids * dim, -1, 1);
  g_autoptr (GError) error = NULL;

  float *dt = upf (f, table, n_rows * dim);
  gint64 *di = up (f, ids, sizeof ids);
  float *dy = ks_compute_alloc (f->c, n_ids * dim * sizeof (float), NULL);
  gboolean ok = ks_compute_embedding (f->c, dt, n_rows, di, dy, n_ids, dim, &error);
  g_autofree float *out = down (f, dy, n_ids * dim);
  if (ok || has_slot (&error, "embedding"))
    {
      g_assert_no_error (error);
      for (gsize i = 0; i < n_ids; i++)
        for (gsize d = 0; d < dim; d++)
          assert_close ("embedding", i * dim + d, out[i * dim + d], table[ids[i] * dim + d], 0);
      check_embedding_bad_id (f, table, n_rows, dim);
    }

  float *dd = upf (f, dout, n_ids * dim);
  ok = ks_compute_embedding_backward (f->c, dd, di, dt, n_rows, n_ids, dim, &error);
  ks_compute_free_memory (f->c, dd);
  ks_compute_free_memory (f->c, di);
  g_autofree float *grad = down (f, dt, n_rows * dim);
  if (!ok && !has_slot (&error, "embedding_backward"))
    return;
  g_assert_no_error (error);
  for (gsize r = 0; r < n_rows; r++)
    for (gsize d = 0; d < dim; d++)
      {
        double want = table[r * dim + d]; /* added to the table's old values */
        for (gsize i = 0; i < n_ids; i++)
          if ((gsize) ids[i] == r)
            want += dout[i * dim + d];
        assert_close ("embedding_backward", r * dim + d, grad[r * dim + d], want, 1e-6);
      }
}

static void
test_transpose (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  static const struct {
    int ndim;
    gint64 shape[4];
    int perm[4];
  } cases[] = {
    { 2, { 5, 7 }, { 1, 0 } },
    { 3, { 2, 3, 4 }, { 2, 0, 1 } },
    { 4, { 2, 3, 2, 5 }, { 0, 2, 1, 3 } }, /* heads and tokens swapped, as attention does */
  };
  for (guint t = 0; t < G_N_ELEMENTS (cases); t++)
    {
      int nd = cases[t].ndim;
      const gint64 *shape = cases[t].shape;
      const int *perm = cases[t].perm;
      gsize n = 1;
      for (int d = 0; d < nd; d++)
        n *= shape[d];
      g_autofree float *x = ks_test_random_floats (f->rng, n, -1, 1);
      g_autoptr (GError) error = NULL;
      float *dx = upf (f, x, n), *dy = ks_compute_alloc (f->c, n * sizeof (float), NULL);
      gboolean ok = ks_compute_transpose (f->c, dx, dy, nd, shape, perm, &error);
      ks_compute_free_memory (f->c, dx);
      g_autofree float *y = down (f, dy, n);
      if (!ok && !has_slot (&error, "transpose"))
        return;
      g_assert_no_error (error);
      for (gsize i = 0; i < n; i++) /* y's index i, as coordinates of y, read from x */
        {
          gint64 yc[4], rest = i, src = 0;
          for (int d = nd - 1; d >= 0; d--)
            {
              yc[d] = rest % shape[perm[d]];
              rest /= shape[perm[d]];
            }
          for (int d = 0; d < nd; d++) /* x's coordinate perm[k] is y's coordinate k */
            {
              gint64 coord = 0;
              for (int k = 0; k < nd; k++)
                if (perm[k] == d)
                  coord = yc[k];
              src = src * shape[d] + coord;
            }
          assert_close ("transpose", i, y[i], x[src], 0);
        }
    }
}

static void
test_dropout_mask (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  const gsize n = 1000;
  const float p = 0.3f;
  g_autoptr (GError) error = NULL;
  float *dm = ks_compute_alloc (f->c, n * sizeof (float), NULL);
  gboolean ok = ks_compute_dropout_mask (f->c, dm, n, p, 42, &error);
  g_autofree float *mask = down (f, dm, n);
  if (!ok && !has_slot (&error, "dropout_mask"))
    return;
  g_assert_no_error (error);
  for (gsize i = 0; i < n; i++) /* the same masks on every backend (compute.h) */
    assert_close ("dropout_mask", i, mask[i], ks_dropout_uniform (42, i) >= p ? 1 / (1 - p) : 0,
                  1e-6);
}

/* ---- optimizer updates ---- */

/* Three steps of each rule against the textbook formulas in double precision. */
static void
test_update (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  const gsize n = 8;
  for (int rule = KS_UPDATE_SGD; rule <= KS_UPDATE_ADAMW; rule++)
    for (int nesterov = 0; nesterov <= (rule == KS_UPDATE_MOMENTUM); nesterov++)
      {
        g_autofree float *p = ks_test_random_floats (f->rng, n, -1, 1);
        g_autofree float *zeros = g_new0 (float, n);
        double rp[8], r1[8] = { 0 }, r2[8] = { 0 };
        KsUpdateArgs a = { sizeof a, rule, 0.05f, 0.9f, 0.9f, 0.999f, 1e-8f, 0.01f, nesterov, 0 };
        g_autofree char *what = g_strdup_printf ("update rule %d nesterov %d", rule, nesterov);
        float *dp = upf (f, p, n), *s1 = upf (f, zeros, n), *s2 = upf (f, zeros, n);

        for (gsize i = 0; i < n; i++)
          rp[i] = p[i];
        for (a.step = 1; a.step <= 3; a.step++)
          {
            g_autofree float *g = ks_test_random_floats (f->rng, n, -1, 1);
            g_autoptr (GError) error = NULL;
            float *dg = upf (f, g, n);
            gboolean ok = ks_compute_update (f->c, &a, dp, dg, s1, s2, n, &error);
            ks_compute_free_memory (f->c, dg);
            if (!ok && !has_slot (&error, "update"))
              {
                ks_compute_free_memory (f->c, dp);
                ks_compute_free_memory (f->c, s1);
                ks_compute_free_memory (f->c, s2);
                return;
              }
            g_assert_no_error (error);
            g_assert_true (ks_compute_copy_to_host (f->c, p, dp, n * sizeof (float), NULL));
            for (gsize i = 0; i < n; i++)
              {
                double wd = a.weight_decay, gi = g[i] + (rule == KS_UPDATE_ADAMW ? 0 : wd * rp[i]);
                switch (rule)
                  {
                  case KS_UPDATE_SGD: rp[i] -= a.lr * gi; break;
                  case KS_UPDATE_MOMENTUM:
                    r1[i] = a.momentum * r1[i] + gi;
                    rp[i] -= a.lr * (nesterov ? gi + a.momentum * r1[i] : r1[i]);
                    break;
                  case KS_UPDATE_ADAGRAD:
                    r1[i] += gi * gi;
                    rp[i] -= a.lr * gi / (sqrt (r1[i]) + a.eps);
                    break;
                  default:
                    if (rule == KS_UPDATE_ADAMW)
                      rp[i] *= 1 - a.lr * wd;
                    r1[i] = a.beta1 * r1[i] + (1 - a.beta1) * gi;
                    r2[i] = a.beta2 * r2[i] + (1 - a.beta2) * gi * gi;
                    rp[i] -= a.lr * (r1[i] / (1 - pow (a.beta1, a.step)))
                             / (sqrt (r2[i] / (1 - pow (a.beta2, a.step))) + a.eps);
                  }
                assert_close (what, i, p[i], rp[i], 1e-5);
              }
          }
        ks_compute_free_memory (f->c, dp);
        ks_compute_free_memory (f->c, s1);
        ks_compute_free_memory (f->c, s2);
      }
}

/* ---- images ---- */

static void
test_im2col (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  KsConvShape s = { .n = 2, .h = 5, .w = 4, .c = 3, .kh = 3, .kw = 2, .stride = 2, .pad = 1 };
  s.oh = (s.h + 2 * s.pad - s.kh) / s.stride + 1;
  s.ow = (s.w + 2 * s.pad - s.kw) / s.stride + 1;
  gsize nx = (gsize) s.n * s.h * s.w * s.c, ncols = (gsize) s.kh * s.kw * s.c;
  gsize ncol = (gsize) s.n * s.oh * s.ow * ncols;
  g_autofree float *x = ks_test_random_floats (f->rng, nx, -1, 1);
  g_autofree float *g = ks_test_random_floats (f->rng, ncol, -1, 1);
  g_autoptr (GError) error = NULL;

  float *dx = upf (f, x, nx), *dcol = ks_compute_alloc (f->c, ncol * sizeof (float), NULL);
  gboolean ok = ks_compute_im2col (f->c, dx, dcol, &s, &error);
  ks_compute_free_memory (f->c, dx);
  g_autofree float *col = down (f, dcol, ncol);
  if (!ok && !has_slot (&error, "im2col"))
    return;
  g_assert_no_error (error);
  double adjoint = 0; /* sum (g * im2col (x)), which col2im must give as sum (x * col2im (g)) */
  for (int b = 0; b < s.n; b++)
    for (int oy = 0; oy < s.oh; oy++)
      for (int ox = 0; ox < s.ow; ox++)
        for (int ky = 0; ky < s.kh; ky++)
          for (int kx = 0; kx < s.kw; kx++)
            for (int ch = 0; ch < s.c; ch++)
              {
                int iy = oy * s.stride - s.pad + ky, ix = ox * s.stride - s.pad + kx;
                gsize row = ((gsize) b * s.oh + oy) * s.ow + ox;
                gsize idx = row * ncols + ((gsize) ky * s.kw + kx) * s.c + ch;
                double want = iy < 0 || iy >= s.h || ix < 0 || ix >= s.w
                                ? 0 : x[(((gsize) b * s.h + iy) * s.w + ix) * s.c + ch];
                assert_close ("im2col", idx, col[idx], want, 0);
                adjoint += g[idx] * want;
              }

  float *dg = upf (f, g, ncol), *ddx = ks_compute_alloc (f->c, nx * sizeof (float), NULL);
  ok = ks_compute_col2im (f->c, dg, ddx, &s, &error);
  ks_compute_free_memory (f->c, dg);
  g_autofree float *back = down (f, ddx, nx);
  if (!ok && !has_slot (&error, "col2im"))
    return;
  g_assert_no_error (error);
  assert_close ("col2im (adjoint of im2col)", 0, weighted_sum (x, back, nx), adjoint, 1e-5);
}

static void
test_pools (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  KsConvShape s = { .n = 2, .h = 6, .w = 5, .c = 2, .kh = 2, .kw = 3, .stride = 2, .pad = 0 };
  s.oh = (s.h - s.kh) / s.stride + 1;
  s.ow = (s.w - s.kw) / s.stride + 1;
  gsize nx = (gsize) s.n * s.h * s.w * s.c, ny = (gsize) s.n * s.oh * s.ow * s.c;
  g_autofree float *x = ks_test_random_floats (f->rng, nx, -1, 1);
  g_autofree float *gy = ks_test_random_floats (f->rng, ny, -1, 1);
  g_autofree float *want_max = g_new (float, ny), *want_avg = g_new (float, ny);
  g_autofree gint64 *want_arg = g_new (gint64, ny);
  g_autoptr (GError) error = NULL;

  for (int b = 0; b < s.n; b++)
    for (int oy = 0; oy < s.oh; oy++)
      for (int ox = 0; ox < s.ow; ox++)
        for (int ch = 0; ch < s.c; ch++)
          {
            gsize o = (((gsize) b * s.oh + oy) * s.ow + ox) * s.c + ch;
            double sum = 0;
            want_max[o] = -INFINITY;
            for (int ky = 0; ky < s.kh; ky++)
              for (int kx = 0; kx < s.kw; kx++)
                {
                  gsize i = (((gsize) b * s.h + oy * s.stride + ky) * s.w + ox * s.stride + kx)
                            * s.c + ch;
                  sum += x[i];
                  if (x[i] > want_max[o])
                    want_max[o] = x[i], want_arg[o] = (gint64) i;
                }
            want_avg[o] = sum / (s.kh * s.kw);
          }

  float *dx = upf (f, x, nx), *dy = ks_compute_alloc (f->c, ny * sizeof (float), NULL);
  gint64 *darg = ks_compute_alloc (f->c, ny * sizeof (gint64), NULL);
  gboolean ok = ks_compute_max_pool (f->c, dx, dy, darg, &s, &error);
  g_autofree float *y = down (f, dy, ny);
  g_autofree gint64 *arg = g_new (gint64, ny);
  g_assert_true (ks_compute_copy_to_host (f->c, arg, darg, ny * sizeof (gint64), NULL));
  ks_compute_free_memory (f->c, darg);
  if (ok || has_slot (&error, "max_pool"))
    {
      g_assert_no_error (error);
      for (gsize o = 0; o < ny; o++)
        {
          assert_close ("max_pool", o, y[o], want_max[o], 0);
          g_assert_cmpint (arg[o], ==, want_arg[o]);
        }
    }

  dy = ks_compute_alloc (f->c, ny * sizeof (float), NULL);
  ok = ks_compute_avg_pool (f->c, dx, dy, &s, &error);
  ks_compute_free_memory (f->c, dx);
  g_clear_pointer (&y, g_free);
  y = down (f, dy, ny);
  if (!ok && !has_slot (&error, "avg_pool"))
    return;
  g_assert_no_error (error);
  for (gsize o = 0; o < ny; o++)
    assert_close ("avg_pool", o, y[o], want_avg[o], 1e-6);

  /* the backward is avg_pool's adjoint: sum (x * backward (gy)) = sum (gy * avg_pool (x)) */
  float *dg = upf (f, gy, ny), *ddx = ks_compute_alloc (f->c, nx * sizeof (float), NULL);
  ok = ks_compute_avg_pool_backward (f->c, dg, ddx, &s, &error);
  ks_compute_free_memory (f->c, dg);
  g_autofree float *back = down (f, ddx, nx);
  if (!ok && !has_slot (&error, "avg_pool_backward"))
    return;
  g_assert_no_error (error);
  assert_close ("avg_pool_backward (adjoint)", 0, weighted_sum (x, back, nx),
                weighted_sum (gy, want_avg, ny), 1e-5);
}

/* ---- mixed precision ---- */

static void
test_half (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  if (!ks_compute_has_half (f->c))
    {
      g_test_skip ("the backend has no mixed-precision slots (convert, gemm_half, "
                   "find_nonfinite)");
      return;
    }
  const gsize n = 40;
  g_autofree float *x = ks_test_random_floats (f->rng, n, -300, 300);
  static const KsDType types[] = { KS_DTYPE_BFLOAT16, KS_DTYPE_FLOAT16 };
  for (guint t = 0; t < G_N_ELEMENTS (types); t++)
    {
      g_autoptr (GError) error = NULL;
      g_autofree guint16 *h = g_new (guint16, n);
      float *dx = upf (f, x, n);
      guint16 *dh = ks_compute_alloc (f->c, n * sizeof (guint16), NULL);
      g_assert_true (ks_compute_convert (f->c, dx, KS_DTYPE_FLOAT32, dh, types[t], n, &error));
      g_assert_true (ks_compute_copy_to_host (f->c, h, dh, n * sizeof (guint16), &error));
      g_assert_true (ks_compute_convert (f->c, dh, types[t], dx, KS_DTYPE_FLOAT32, n, &error));
      g_autofree float *back = down (f, dx, n);
      ks_compute_free_memory (f->c, dh);
      for (gsize i = 0; i < n; i++) /* rounded as half.h rounds, and back exactly */
        {
          guint16 want = types[t] == KS_DTYPE_BFLOAT16 ? ks_float_to_bf16 (x[i])
                                                        : ks_float_to_fp16 (x[i]);
          g_assert_cmphex (h[i], ==, want);
          assert_close ("convert back", i, back[i],
                        types[t] == KS_DTYPE_BFLOAT16 ? ks_bf16_to_float (want)
                                                      : ks_fp16_to_float (want), 0);
        }
    }

  float finite[3] = { 1, -2, 3 }, found[1];
  for (int bad = 0; bad <= 2; bad++)
    {
      if (bad == 1)
        finite[1] = INFINITY;
      if (bad == 2)
        finite[1] = NAN;
      float *dx = upf (f, finite, 3), *df = ks_compute_alloc (f->c, sizeof (float), NULL);
      g_assert_true (ks_compute_find_nonfinite (f->c, dx, 3, df, NULL));
      ks_compute_free_memory (f->c, dx);
      g_autofree float *got = down (f, df, 1);
      found[0] = bad ? 1 : 0;
      g_assert_cmpfloat (got[0], ==, found[0]);
    }
}

static void
add_cases (const char *dir, const char *name)
{
  static const struct {
    const char *name;
    void (*fn) (Fixture *, gconstpointer);
  } tests[] = {
    { "memory", test_memory }, { "sgemm", test_sgemm },
    { "sgemm-strided-batched", test_sgemm_batched }, { "unary", test_unary },
    { "binary", test_binary }, { "reduce", test_reduce }, { "axpby", test_axpby },
    { "softmax", test_softmax }, { "layer-norm", test_layer_norm },
    { "cross-entropy", test_cross_entropy }, { "embedding", test_embedding },
    { "transpose", test_transpose }, { "dropout-mask", test_dropout_mask },
    { "update", test_update }, { "im2col", test_im2col }, { "pools", test_pools },
    { "half", test_half },
  };
  Backend *b = g_new0 (Backend, 1); /* lives as long as the test run */
  b->dir = g_strdup (dir);
  b->name = g_strdup (name);
  for (guint i = 0; i < G_N_ELEMENTS (tests); i++)
    {
      g_autofree char *p = g_strdup_printf ("/kind-compute/%s/%s", name, tests[i].name);
      g_test_add_vtable (p, sizeof (Fixture), b, (GTestFixtureFunc) setup,
                         (GTestFixtureFunc) tests[i].fn, (GTestFixtureFunc) teardown);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  const char *plugin = g_getenv ("KS_KIND_PLUGIN");
  if (plugin != NULL && *plugin != '\0')
    {
      g_autofree char *dir = g_path_get_dirname (plugin), *base = g_path_get_basename (plugin);
      if (g_str_has_suffix (base, ".so"))
        base[strlen (base) - 3] = '\0';
      add_cases (dir, g_str_has_prefix (base, "lib") ? base + 3 : base);
      return g_test_run ();
    }
  static const char *const names[] = { "openblas", "cuda" };
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *dir = ks_test_build_plugin_dir (names[i]);
      add_cases (dir, names[i]);
    }
  return g_test_run ();
}
