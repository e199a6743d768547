/* The compute conformance suite (test-kind-compute.c), continued: softmax, layer norm,
 * cross entropy, lookups, layouts, masks, optimizer updates, images, batch norm, mixed
 * precision. */
#include "kind-compute.h"

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
softmax_loss (gpointer ctx, const float *x, gpointer data)
{
  Fixture *f = ctx;
  SoftmaxCase *s = data;
  g_autofree float *y = run_softmax (f, s, x, NULL);
  g_assert_nonnull (y);
  return ks_test_weighted_sum (s->w, y, s->rows * s->cols);
}

void
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
      g_autofree double *want = g_new (double, n);
      SoftmaxCase s = { is_log, rows, cols, w };
      const char *what = is_log ? "log_softmax" : "softmax";

      x[0] = 80; /* a large logit: exp without the row's maximum taken off overflows */
      g_autofree float *y = run_softmax (f, &s, x, &error);
      if (y == NULL && !has_slot (&error, "softmax"))
        return;
      g_assert_no_error (error);
      ks_test_reference_softmax (x, rows, cols, is_log, want);
      for (gsize i = 0; i < n; i++)
        ks_test_assert_close (what, i, y[i], want[i], 1e-5);
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
      ks_test_check_gradient (f, what, softmax_loss, &s, x, n, grad, 1e-3, 5e-3);
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
norm_loss (gpointer ctx, const float *v, gpointer data)
{
  Fixture *f = ctx;
  NormCase *c = data;
  g_autofree float *y = run_layer_norm (f, c, c->wrt == 0 ? v : c->x, c->wrt == 1 ? v : c->gamma,
                                        c->wrt == 2 ? v : c->beta, NULL, NULL, NULL);
  g_assert_nonnull (y);
  return ks_test_weighted_sum (c->w, y, c->rows * c->cols);
}

void
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
  double want[3 * 8], want_mean[3], want_rstd[3];
  ks_test_reference_layer_norm (x, gamma, beta, rows, cols, 1e-5, want, want_mean, want_rstd);
  for (gsize r = 0; r < rows; r++)
    {
      ks_test_assert_close ("layer_norm mean", r, mean[r], want_mean[r], 1e-5);
      ks_test_assert_close ("layer_norm rstd", r, rstd[r], want_rstd[r], 1e-4);
    }
  for (gsize i = 0; i < n; i++)
    ks_test_assert_close ("layer_norm", i, y[i], want[i], 1e-4);

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
  ks_test_check_gradient (f, "layer_norm dx", norm_loss, &c, x, n, gx, 1e-3, 5e-3);
  c.wrt = 1;
  ks_test_check_gradient (f, "layer_norm dgamma", norm_loss, &c, gamma, cols, ggamma, 1e-3, 5e-3);
  c.wrt = 2;
  ks_test_check_gradient (f, "layer_norm dbeta", norm_loss, &c, beta, cols, gbeta, 1e-3, 5e-3);
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
cross_loss (gpointer ctx, const float *x, gpointer data)
{
  Fixture *f = ctx;
  CrossCase *c = data;
  g_autofree float *losses = run_cross_entropy (f, c, x, NULL, NULL);
  double s = 0;
  g_assert_nonnull (losses);
  for (gsize r = 0; r < c->rows; r++)
    s += losses[r];
  return s;
}

void
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
  double want[4];
  ks_test_reference_cross_entropy (x, labels, rows, cols, want);
  for (gsize r = 0; r < rows; r++)
    ks_test_assert_close ("cross_entropy", r, losses[r], want[r], 1e-5);
  ks_test_check_gradient (f, "cross_entropy dlogits", cross_loss, &c, x, n, dlogits, 1e-3, 5e-3);

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

void
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
          ks_test_assert_close ("embedding", i * dim + d, out[i * dim + d], table[ids[i] * dim + d], 0);
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
        ks_test_assert_close ("embedding_backward", r * dim + d, grad[r * dim + d], want, 1e-6);
      }
}

void
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
          ks_test_assert_close ("transpose", i, y[i], x[src], 0);
        }
    }
}

void
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
    ks_test_assert_close ("dropout_mask", i, mask[i], ks_dropout_uniform (42, i) >= p ? 1 / (1 - p) : 0,
                  1e-6);
}

/* ---- optimizer updates ---- */

/* Three steps of each rule against the textbook formulas in double precision. */
void
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
            ks_test_reference_update (&a, rp, r1, r2, g, n);
            for (gsize i = 0; i < n; i++)
              ks_test_assert_close (what, i, p[i], rp[i], 1e-5);
          }
        ks_compute_free_memory (f->c, dp);
        ks_compute_free_memory (f->c, s1);
        ks_compute_free_memory (f->c, s2);
      }
}

/* ---- images ---- */

void
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
                ks_test_assert_close ("im2col", idx, col[idx], want, 0);
                adjoint += g[idx] * want;
              }

  float *dg = upf (f, g, ncol), *ddx = ks_compute_alloc (f->c, nx * sizeof (float), NULL);
  ok = ks_compute_col2im (f->c, dg, ddx, &s, &error);
  ks_compute_free_memory (f->c, dg);
  g_autofree float *back = down (f, ddx, nx);
  if (!ok && !has_slot (&error, "col2im"))
    return;
  g_assert_no_error (error);
  ks_test_assert_close ("col2im (adjoint of im2col)", 0, ks_test_weighted_sum (x, back, nx), adjoint, 1e-5);
}

void
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
          ks_test_assert_close ("max_pool", o, y[o], want_max[o], 0);
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
    ks_test_assert_close ("avg_pool", o, y[o], want_avg[o], 1e-6);

  /* the backward is avg_pool's adjoint: sum (x * backward (gy)) = sum (gy * avg_pool (x)) */
  float *dg = upf (f, gy, ny), *ddx = ks_compute_alloc (f->c, nx * sizeof (float), NULL);
  ok = ks_compute_avg_pool_backward (f->c, dg, ddx, &s, &error);
  ks_compute_free_memory (f->c, dg);
  g_autofree float *back = down (f, ddx, nx);
  if (!ok && !has_slot (&error, "avg_pool_backward"))
    return;
  g_assert_no_error (error);
  ks_test_assert_close ("avg_pool_backward (adjoint)", 0, ks_test_weighted_sum (x, back, nx),
                ks_test_weighted_sum (gy, want_avg, ny), 1e-5);
}

/* ---- batch normalisation ---- */

typedef struct {
  gsize rows, cols;
  const float *w, *gamma, *beta, *x;
  int wrt; /* 0: x, 1: gamma, 2: beta */
} BatchCase;

/* y of batch_norm in training (mean and var written when asked) on the backend */
static float *
run_batch_norm (Fixture *f, const BatchCase *c, const float *x, const float *gamma,
                const float *beta, float **mean, float **var, GError **error)
{
  gsize n = c->rows * c->cols;
  float *dx = upf (f, x, n), *dg = upf (f, gamma, c->cols), *db = upf (f, beta, c->cols);
  float *dy = ks_compute_alloc (f->c, n * sizeof (float), NULL);
  float *dm = ks_compute_alloc (f->c, c->cols * sizeof (float), NULL);
  float *dv = ks_compute_alloc (f->c, c->cols * sizeof (float), NULL);
  gboolean ok = ks_compute_batch_norm (f->c, dx, dg, db, dy, dm, dv, c->rows, c->cols, 1e-5f,
                                       TRUE, error);
  ks_compute_free_memory (f->c, dx);
  ks_compute_free_memory (f->c, dg);
  ks_compute_free_memory (f->c, db);
  float *m = down (f, dm, c->cols), *v = down (f, dv, c->cols), *y = down (f, dy, n);
  if (mean != NULL)
    *mean = m, *var = v;
  else
    g_free (m), g_free (v);
  if (!ok)
    g_clear_pointer (&y, g_free);
  return y;
}

static double
batch_loss (gpointer ctx, const float *v, gpointer data)
{
  Fixture *f = ctx;
  BatchCase *c = data;
  g_autofree float *y = run_batch_norm (f, c, c->wrt == 0 ? v : c->x, c->wrt == 1 ? v : c->gamma,
                                        c->wrt == 2 ? v : c->beta, NULL, NULL, NULL);
  g_assert_nonnull (y);
  return ks_test_weighted_sum (c->w, y, c->rows * c->cols);
}

/* Training mode: each column's batch statistics, and the gradient through them. */
void
test_batch_norm (Fixture *f, gconstpointer data)
{
  if (f->c == NULL)
    return;
  const gsize rows = 6, cols = 3, n = rows * cols;
  g_autofree float *x = ks_test_random_floats (f->rng, n, -2, 2);
  g_autofree float *gamma = ks_test_random_floats (f->rng, cols, 0.5, 1.5);
  g_autofree float *beta = ks_test_random_floats (f->rng, cols, -0.5, 0.5);
  g_autofree float *w = ks_test_random_floats (f->rng, n, -1, 1);
  g_autofree float *mean = NULL, *var = NULL;
  g_autoptr (GError) error = NULL;
  BatchCase c = { rows, cols, w, gamma, beta, x, 0 };

  g_autofree float *y = run_batch_norm (f, &c, x, gamma, beta, &mean, &var, &error);
  if (y == NULL && !has_slot (&error, "batch_norm"))
    return;
  g_assert_no_error (error);
  for (gsize j = 0; j < cols; j++)
    {
      double mu = 0, v = 0;
      for (gsize r = 0; r < rows; r++)
        mu += x[r * cols + j];
      mu /= rows;
      for (gsize r = 0; r < rows; r++)
        v += (x[r * cols + j] - mu) * (x[r * cols + j] - mu);
      v /= rows; /* biased, as compute.h says */
      ks_test_assert_close ("batch_norm mean", j, mean[j], mu, 1e-5);
      ks_test_assert_close ("batch_norm var", j, var[j], v, 1e-5);
      for (gsize r = 0; r < rows; r++)
        ks_test_assert_close ("batch_norm", r * cols + j, y[r * cols + j],
                      (x[r * cols + j] - mu) / sqrt (v + 1e-5) * gamma[j] + beta[j], 1e-4);
    }

  g_autofree float *ones = g_new (float, cols); /* dgamma and dbeta are added to */
  for (gsize j = 0; j < cols; j++)
    ones[j] = 1;
  float *dx = upf (f, x, n), *dg = upf (f, gamma, cols), *dm = upf (f, mean, cols);
  float *dv = upf (f, var, cols), *dw = upf (f, w, n), *ddgamma = upf (f, ones, cols);
  float *ddbeta = upf (f, ones, cols), *ddx = ks_compute_alloc (f->c, n * sizeof (float), NULL);
  gboolean ok = ks_compute_batch_norm_backward (f->c, dx, dg, dm, dv, dw, ddx, ddgamma, ddbeta,
                                                rows, cols, 1e-5f, TRUE, &error);
  ks_compute_free_memory (f->c, dx);
  ks_compute_free_memory (f->c, dg);
  ks_compute_free_memory (f->c, dm);
  ks_compute_free_memory (f->c, dv);
  ks_compute_free_memory (f->c, dw);
  g_autofree float *gx = down (f, ddx, n), *ggamma = down (f, ddgamma, cols);
  g_autofree float *gbeta = down (f, ddbeta, cols);
  if (!ok && !has_slot (&error, "batch_norm_backward"))
    return;
  g_assert_no_error (error);
  for (gsize j = 0; j < cols; j++)
    ggamma[j] -= 1, gbeta[j] -= 1;
  ks_test_check_gradient (f, "batch_norm dx", batch_loss, &c, x, n, gx, 1e-3, 5e-3);
  c.wrt = 1;
  ks_test_check_gradient (f, "batch_norm dgamma", batch_loss, &c, gamma, cols, ggamma, 1e-3, 5e-3);
  c.wrt = 2;
  ks_test_check_gradient (f, "batch_norm dbeta", batch_loss, &c, beta, cols, gbeta, 1e-3, 5e-3);
}

/* ---- mixed precision ---- */

void
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
          ks_test_assert_close ("convert back", i, back[i],
                        types[t] == KS_DTYPE_BFLOAT16 ? ks_bf16_to_float (want)
                                                      : ks_fp16_to_float (want), 0);
        }
    }

  /* gemm_half: C = A B^T of bf16 operands, summed in float32: against the products of
   * the rounded values in double */
  const int m = 5, n2 = 6, k = 7;
  g_autofree float *a = ks_test_random_floats (f->rng, m * k, -1, 1);
  g_autofree float *b = ks_test_random_floats (f->rng, n2 * k, -1, 1);
  g_autofree guint16 *ha = g_new (guint16, m * k), *hb = g_new (guint16, n2 * k);
  for (int i = 0; i < m * k; i++)
    ha[i] = ks_float_to_bf16 (a[i]);
  for (int i = 0; i < n2 * k; i++)
    hb[i] = ks_float_to_bf16 (b[i]);
  void *da = up (f, ha, m * k * sizeof (guint16)), *db = up (f, hb, n2 * k * sizeof (guint16));
  float *dc = ks_compute_alloc (f->c, m * n2 * sizeof (float), NULL);
  g_autoptr (GError) error = NULL;
  g_assert_true (ks_compute_gemm_half (f->c, KS_DTYPE_BFLOAT16, KS_TRANS_N, KS_TRANS_T, m, n2,
                                       k, 1.0f, da, k, db, k, 0.0f, dc, n2, &error));
  g_assert_no_error (error);
  ks_compute_free_memory (f->c, da);
  ks_compute_free_memory (f->c, db);
  g_autofree float *c = down (f, dc, m * n2);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n2; j++)
      {
        double want = 0;
        for (int l = 0; l < k; l++)
          want += (double) ks_bf16_to_float (ha[i * k + l]) * ks_bf16_to_float (hb[j * k + l]);
        ks_test_assert_close ("gemm_half", i * n2 + j, c[i * n2 + j], want, 1e-5 * (k + 1));
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
