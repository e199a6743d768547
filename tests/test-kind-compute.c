/* The compute backend conformance suite: the same checks against every backend found
 * (openblas and cuda in the build tree; or only the plugin KS_KIND_PLUGIN names, as `make
 * check-plugin PLUGIN=path/x.so` runs it). Every slot is called through the vtable on
 * tensors copied in and out (a backend of device memory is never read directly), and
 * checked against values computed here in double precision; gradients against central
 * finite differences of the backend's own forward, on L = sum (w * y) (so dy = w). An
 * optional slot the backend lacks skips its check, saying so. What only one backend does
 * stays in its own test (test-compute: threads, the CUDA probe; test-kernels, test-cuda). */
#include "kind-compute.h"

typedef struct {
  char *dir, *name;
} Backend;

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
      g_autofree char *why = g_strdup_printf ("no compute backend %s in %s (not built, not usable "
                                              "on this machine, or of another kind)", b->name, b->dir);
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

void *
up (Fixture *f, const void *host, gsize nbytes)
{
  g_autoptr (GError) error = NULL;
  void *dev = ks_compute_alloc (f->c, MAX (nbytes, 1), &error);
  g_assert_no_error (error);
  g_assert_true (ks_compute_copy_to_device (f->c, dev, host, nbytes, &error));
  return dev;
}

float *
upf (Fixture *f, const float *host, gsize n)
{
  return up (f, host, n * sizeof (float));
}

/* A host copy of n floats at `dev`, which is freed. */
float *
down (Fixture *f, float *dev, gsize n)
{
  float *host = g_new (float, MAX (n, 1));
  g_autoptr (GError) error = NULL;
  g_assert_true (ks_compute_copy_to_host (f->c, host, dev, n * sizeof (float), &error));
  ks_compute_free_memory (f->c, dev);
  return host;
}

/* FALSE, with the test skipped, when the call failed because the slot is missing. */
gboolean
has_slot (GError **error, const char *slot)
{
  if (!g_error_matches (*error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_SUPPORTED))
    return TRUE;
  g_autofree char *why = g_strdup_printf ("%s: %s", slot, (*error)->message);
  g_test_skip (why);
  g_clear_error (error);
  return FALSE;
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
            ks_test_assert_close (what, idx, out[idx], want, 1e-5 * (k + 1));
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
unary_loss (gpointer ctx, const float *x, gpointer data)
{
  Fixture *f = ctx;
  UnaryCase *u = data;
  g_autofree float *y = run_unary (f, u->op, x, u->n, NULL);
  g_assert_nonnull (y);
  return ks_test_weighted_sum (u->w, y, u->n);
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
        ks_test_assert_close (what, i, y[i], ks_test_reference_unary (op, x[i]), op == KS_UNARY_GELU ? 1e-4 : 1e-5);

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
      ks_test_check_gradient (f, what, unary_loss, &u, x, n, grad, 1e-3, 5e-3);
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
            ks_test_assert_close (what, r * cols + j, c[r * cols + j],
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
            ks_test_assert_close (what, o, y[o], op == KS_REDUCE_AVG ? acc / inner : acc, 1e-5);
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
        ks_test_assert_close ("axpby", i, out[i], 1.5 * x[i] + (zero_beta ? 0 : beta * (double) y[i]),
                      1e-6);
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
    { "batch-norm", test_batch_norm },
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
