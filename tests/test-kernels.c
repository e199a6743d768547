/* The training kernels of the CPU backend, through the compute vtable. Forward kernels
 * are checked against independent double-precision computations; every backward kernel
 * against central finite differences of its forward kernel, on L = sum (w * y) for
 * random weights w (so dy = w). */
#include "ref-ops.h"
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
  f->rng = g_rand_new_with_seed (20261122);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  g_rand_free (f->rng);
  ks_test_cpu_teardown (&f->cpu);
}

/* ---- unary ---- */

typedef struct {
  KsUnaryOp op;
  const float *w;
  gsize n;
} UnaryCase;

static double
unary_loss (gpointer ctx, const float *x, gpointer data)
{
  Fixture *f = ctx;
  UnaryCase *u = data;
  g_autofree float *y = g_new (float, u->n);
  g_assert_true (ks_compute_unary (f->c, u->op, x, y, u->n, NULL));
  return ks_test_weighted_sum (u->w, y, u->n);
}

static void
test_unary (Fixture *f, gconstpointer data)
{
  const gsize n = 64;
  for (int op = KS_UNARY_RELU; op <= KS_UNARY_SQRT; op++)
    {
      gboolean positive = op == KS_UNARY_LOG || op == KS_UNARY_SQRT;
      g_autofree float *x = ks_test_random_floats (f->rng, n, positive ? 0.2 : -3, 3);
      g_autofree float *w = ks_test_random_floats (f->rng, n, -1, 1);
      g_autofree float *y = g_new (float, n);
      g_autofree float *dx = g_new (float, n);
      g_autofree float *dx_no_y = g_new (float, n);
      g_autofree char *what = g_strdup_printf ("unary op %d", op);
      UnaryCase u = { op, w, n };

      for (gsize i = 0; i < n; i++) /* keep away from relu's kink */
        if (fabsf (x[i]) < 0.05f)
          x[i] = 0.5f;
      g_assert_true (ks_compute_unary (f->c, op, x, y, n, NULL));
      for (gsize i = 0; i < n; i++)
        ks_test_assert_close (what, i, y[i], ks_test_reference_unary (op, x[i]),
                              op == KS_UNARY_GELU ? 1e-4 : 1e-6); /* a fast tanh in GELU */
      g_assert_true (ks_compute_unary_backward (f->c, op, x, y, w, dx, n, NULL));
      g_assert_true (ks_compute_unary_backward (f->c, op, x, NULL, w, dx_no_y, n, NULL));
      for (gsize i = 0; i < n; i++) /* y given (float) or recomputed (double) */
        ks_test_assert_close (what, i, dx_no_y[i], dx[i], 1e-6);
      ks_test_check_gradient (f, what, unary_loss, &u, x, n, dx, 1e-3, 5e-3);
    }
  g_autoptr (GError) error = NULL;
  float one = 1;
  g_assert_false (ks_compute_unary (f->c, 99, &one, &one, 1, &error));
  g_assert_cmpstr (error->message, ==, "openblas: unary: unknown operation 99");
}

/* ---- binary, reduce, axpby ---- */

static void
test_binary (Fixture *f, gconstpointer data)
{
  const gsize rows = 5, cols = 7;
  g_autofree float *a = ks_test_random_floats (f->rng, rows * cols, -2, 2);
  g_autofree float *b = ks_test_random_floats (f->rng, rows * cols, 0.5, 2);
  g_autofree float *c = g_new (float, rows * cols);
  g_autoptr (GError) error = NULL;

  for (int op = KS_BINARY_ADD; op <= KS_BINARY_DIV; op++)
    for (gsize b_rows = 1; b_rows <= rows; b_rows += rows - 1)
      {
        g_assert_true (ks_compute_binary (f->c, op, a, b, c, rows, cols, b_rows, NULL));
        for (gsize r = 0; r < rows; r++)
          for (gsize j = 0; j < cols; j++)
            {
              double x = a[r * cols + j], y = b[(b_rows == 1 ? 0 : r * cols) + j];
              double want = op == KS_BINARY_ADD ? x + y : op == KS_BINARY_SUB ? x - y
                            : op == KS_BINARY_MUL ? x * y : x / y;
              ks_test_assert_close ("binary", r * cols + j, c[r * cols + j], want, 1e-6);
            }
      }
  g_assert_false (ks_compute_binary (f->c, KS_BINARY_ADD, a, b, c, rows, cols, 2, &error));
  g_assert_cmpstr (error->message, ==, "binary: b has 2 rows; it needs 1 (broadcast) or 5 (as a)");
}

static void
test_reduce (Fixture *f, gconstpointer data)
{
  const gsize rows = 6, cols = 9;
  g_autofree float *x = ks_test_random_floats (f->rng, rows * cols, 0.5, 1.5);
  float y[9];
  g_autoptr (GError) error = NULL;

  for (int op = KS_REDUCE_SUM; op <= KS_REDUCE_PROD; op++)
    for (int axis = 0; axis < 2; axis++)
      {
        gsize outer = axis == 0 ? cols : rows, inner = axis == 0 ? rows : cols;
        g_assert_true (ks_compute_reduce (f->c, op, x, y, rows, cols, axis, NULL));
        for (gsize o = 0; o < outer; o++)
          {
            double sum = 0, prod = 1, lo = INFINITY, hi = -INFINITY;
            for (gsize i = 0; i < inner; i++)
              {
                double v = axis == 0 ? x[i * cols + o] : x[o * cols + i];
                sum += v, prod *= v, lo = fmin (lo, v), hi = fmax (hi, v);
              }
            double want[] = { sum, lo, hi, sum / inner, prod };
            ks_test_assert_close (ks_reduce_op_name (op), o, y[o], want[op], 1e-6);
          }
      }
  g_assert_false (ks_compute_reduce (f->c, KS_REDUCE_SUM, x, y, rows, cols, 2, &error));
  g_assert_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID);
}

static void
test_axpby (Fixture *f, gconstpointer data)
{
  float x[3] = { 1, 2, 3 }, y[3] = { 10, 20, 30 }, z[3] = { NAN, NAN, NAN };
  g_assert_true (ks_compute_axpby (f->c, 2, x, 0.5f, y, 3, NULL));
  g_assert_cmpfloat (y[0], ==, 7);
  g_assert_cmpfloat (y[2], ==, 21);
  g_assert_true (ks_compute_axpby (f->c, -1, x, 0, z, 3, NULL)); /* beta 0 ignores NaN */
  g_assert_cmpfloat (z[1], ==, -2);
}

/* ---- softmax ---- */

typedef struct {
  gsize rows, cols;
  gboolean log;
  const float *w;
} SoftmaxCase;

static double
softmax_loss (gpointer ctx, const float *x, gpointer data)
{
  Fixture *f = ctx;
  SoftmaxCase *s = data;
  g_autofree float *y = g_new (float, s->rows * s->cols);
  g_assert_true (ks_compute_softmax (f->c, x, y, s->rows, s->cols, s->log, NULL));
  return ks_test_weighted_sum (s->w, y, s->rows * s->cols);
}

static void
test_softmax (Fixture *f, gconstpointer data)
{
  const gsize rows = 4, cols = 10, n = rows * cols;
  for (int log_softmax = 0; log_softmax < 2; log_softmax++)
    {
      g_autofree float *x = ks_test_random_floats (f->rng, n, -4, 4);
      g_autofree float *w = ks_test_random_floats (f->rng, n, -1, 1);
      g_autofree float *y = g_new (float, n);
      g_autofree float *dx = g_new (float, n);
      g_autofree double *want = g_new (double, n);
      SoftmaxCase s = { rows, cols, log_softmax, w };

      x[3] += 1000; /* large logits must not overflow */
      g_assert_true (ks_compute_softmax (f->c, x, y, rows, cols, log_softmax, NULL));
      ks_test_reference_softmax (x, rows, cols, log_softmax, want);
      for (gsize i = 0; i < n; i++)
        ks_test_assert_close ("softmax", i, y[i], want[i], 1e-5);
      x[3] -= 1000;
      g_assert_true (ks_compute_softmax (f->c, x, y, rows, cols, log_softmax, NULL));
      g_assert_true (ks_compute_softmax_backward (f->c, y, w, dx, rows, cols, log_softmax, NULL));
      ks_test_check_gradient (f, log_softmax ? "log_softmax" : "softmax", softmax_loss, &s, x, n, dx,
                      1e-3, 5e-3);
    }
}

/* ---- layer norm ---- */

typedef struct {
  gsize rows, cols;
  float *x, *gamma, *beta; /* the one being perturbed is passed as x to the loss */
  int which;               /* 0: x, 1: gamma, 2: beta */
  const float *w;
} NormCase;

static double
norm_loss (gpointer ctx, const float *v, gpointer data)
{
  Fixture *f = ctx;
  NormCase *c = data;
  gsize n = c->rows * c->cols;
  g_autofree float *y = g_new (float, n);
  const float *x = c->which == 0 ? v : c->x;
  const float *gamma = c->which == 1 ? v : c->gamma;
  const float *beta = c->which == 2 ? v : c->beta;
  g_assert_true (ks_compute_layer_norm (f->c, x, gamma, beta, y, NULL, NULL, c->rows, c->cols,
                                        1e-5f, NULL));
  return ks_test_weighted_sum (c->w, y, n);
}

static void
test_layer_norm (Fixture *f, gconstpointer data)
{
  const gsize rows = 3, cols = 16, n = rows * cols;
  g_autofree float *x = ks_test_random_floats (f->rng, n, -2, 2);
  g_autofree float *gamma = ks_test_random_floats (f->rng, cols, 0.5, 1.5);
  g_autofree float *beta = ks_test_random_floats (f->rng, cols, -0.5, 0.5);
  g_autofree float *w = ks_test_random_floats (f->rng, n, -1, 1);
  g_autofree float *y = g_new (float, n);
  g_autofree float *dx = g_new (float, n);
  g_autofree float *dgamma = g_new0 (float, cols);
  g_autofree float *dbeta = g_new0 (float, cols);
  float mean[3], rstd[3];
  double want[3 * 16], want_mean[3], want_rstd[3];

  g_assert_true (ks_compute_layer_norm (f->c, x, gamma, beta, y, mean, rstd, rows, cols, 1e-5f,
                                        NULL));
  ks_test_reference_layer_norm (x, gamma, beta, rows, cols, 1e-5, want, want_mean, want_rstd);
  for (gsize r = 0; r < rows; r++)
    {
      ks_test_assert_close ("mean", r, mean[r], want_mean[r], 1e-6);
      ks_test_assert_close ("rstd", r, rstd[r], want_rstd[r], 1e-5);
    }
  for (gsize i = 0; i < n; i++)
    ks_test_assert_close ("layer_norm", i, y[i], want[i], 1e-5);
  g_assert_true (ks_compute_layer_norm_backward (f->c, x, gamma, mean, rstd, w, dx, dgamma, dbeta,
                                                 rows, cols, NULL));
  NormCase c = { rows, cols, x, gamma, beta, 0, w };
  ks_test_check_gradient (f, "layer_norm dx", norm_loss, &c, x, n, dx, 1e-3, 5e-3);
  c.which = 1;
  ks_test_check_gradient (f, "layer_norm dgamma", norm_loss, &c, gamma, cols, dgamma, 1e-3, 5e-3);
  c.which = 2;
  ks_test_check_gradient (f, "layer_norm dbeta", norm_loss, &c, beta, cols, dbeta, 1e-3, 5e-3);

  /* parameter gradients are added to, not overwritten */
  g_autofree float *dgamma2 = g_memdup2 (dgamma, cols * sizeof (float));
  g_assert_true (ks_compute_layer_norm_backward (f->c, x, gamma, mean, rstd, w, dx, dgamma2,
                                                 NULL, rows, cols, NULL));
  for (gsize j = 0; j < cols; j++)
    ks_test_assert_close ("dgamma accumulated", j, dgamma2[j], 2.0 * dgamma[j], 1e-6);
}

/* ---- embedding ---- */

static void
test_embedding (Fixture *f, gconstpointer data)
{
  const gsize vocab = 5, dim = 3, n_ids = 4;
  g_autofree float *table = ks_test_random_floats (f->rng, vocab * dim, -1, 1);
  gint64 ids[] = { 4, 0, 4, 2 }, bad[] = { 1, 5, 0, 0 };
  float out[12], dout[12], dtable[15] = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_true (ks_compute_embedding (f->c, table, vocab, ids, out, n_ids, dim, NULL));
  for (gsize i = 0; i < n_ids; i++)
    g_assert_cmpmem (out + i * dim, dim * sizeof (float), table + ids[i] * dim,
                     dim * sizeof (float));
  for (gsize i = 0; i < G_N_ELEMENTS (dout); i++)
    dout[i] = (float) i;
  g_assert_true (ks_compute_embedding_backward (f->c, dout, ids, dtable, vocab, n_ids, dim, NULL));
  for (gsize j = 0; j < dim; j++)
    {
      g_assert_cmpfloat (dtable[4 * dim + j], ==, dout[0 * dim + j] + dout[2 * dim + j]);
      g_assert_cmpfloat (dtable[0 * dim + j], ==, dout[1 * dim + j]);
      g_assert_cmpfloat (dtable[2 * dim + j], ==, dout[3 * dim + j]);
      g_assert_cmpfloat (dtable[1 * dim + j], ==, 0);
    }

  memset (out, 0, sizeof out);
  g_assert_false (ks_compute_embedding (f->c, table, vocab, bad, out, n_ids, dim, &error));
  g_assert_cmpstr (error->message, ==, "embedding: ids[1] = 5 is outside the table's 5 rows");
  g_assert_cmpfloat (out[0], ==, 0); /* nothing written */
  g_clear_error (&error);
  g_assert_false (ks_compute_embedding_backward (f->c, dout, bad, dtable, vocab, n_ids, dim,
                                                 &error));
  g_assert_cmpfloat (dtable[1 * dim], ==, 0);
  g_clear_error (&error);

  /* one value an id (a max pool's backward), and a negative id refused */
  float d1[5] = { 0 };
  gint64 negative[] = { 1, -1, 0, 0 };
  g_assert_true (ks_compute_embedding_backward (f->c, dout, ids, d1, vocab, n_ids, 1, NULL));
  g_assert_cmpfloat (d1[4], ==, dout[0] + dout[2]);
  g_assert_cmpfloat (d1[0], ==, dout[1]);
  g_assert_cmpfloat (d1[2], ==, dout[3]);
  g_assert_cmpfloat (d1[1] + d1[3], ==, 0);
  g_assert_false (ks_compute_embedding_backward (f->c, dout, negative, d1, vocab, n_ids, 1,
                                                 &error));
  g_assert_cmpstr (error->message, ==,
                   "embedding_backward: ids[1] = -1 is outside the table's 5 rows");
  g_assert_cmpfloat (d1[1], ==, 0); /* nothing written */
}

/* ---- cross entropy ---- */

typedef struct {
  gsize rows, cols;
  const gint64 *labels;
} EntropyCase;

static double
entropy_loss (gpointer ctx, const float *x, gpointer data)
{
  Fixture *f = ctx;
  EntropyCase *e = data;
  g_autofree float *losses = g_new (float, e->rows);
  double total = 0;
  g_assert_true (ks_compute_cross_entropy (f->c, x, e->labels, losses, NULL, e->rows, e->cols,
                                           NULL));
  for (gsize r = 0; r < e->rows; r++)
    total += losses[r];
  return total;
}

static void
test_cross_entropy (Fixture *f, gconstpointer data)
{
  const gsize rows = 4, cols = 6;
  g_autofree float *x = ks_test_random_floats (f->rng, rows * cols, -3, 3);
  g_autofree float *dx = g_new (float, rows * cols);
  gint64 labels[] = { 0, 5, 2, 2 }, bad[] = { 0, 6, 0, 0 };
  float losses[4];
  double want[4];
  g_autoptr (GError) error = NULL;
  EntropyCase e = { rows, cols, labels };

  g_assert_true (ks_compute_cross_entropy (f->c, x, labels, losses, dx, rows, cols, NULL));
  ks_test_reference_cross_entropy (x, labels, rows, cols, want);
  for (gsize r = 0; r < rows; r++)
    ks_test_assert_close ("cross_entropy", r, losses[r], want[r], 1e-5);
  ks_test_check_gradient (f, "cross_entropy", entropy_loss, &e, x, rows * cols, dx, 1e-3, 5e-3);
  g_assert_false (ks_compute_cross_entropy (f->c, x, bad, losses, dx, rows, cols, &error));
  g_assert_cmpstr (error->message, ==, "cross_entropy: labels[1] = 6 is not a class in [0, 6)");
}

/* ---- optimizer updates ---- */

/* Three steps of each rule against the textbook formulas in double precision. */
static void
test_update_rules (Fixture *f, gconstpointer data)
{
  const gsize n = 8;
  for (int rule = KS_UPDATE_SGD; rule <= KS_UPDATE_ADAMW; rule++)
    for (int nesterov = 0; nesterov <= (rule == KS_UPDATE_MOMENTUM); nesterov++)
      {
        g_autofree float *p = ks_test_random_floats (f->rng, n, -1, 1);
        g_autofree float *s1 = g_new0 (float, n);
        g_autofree float *s2 = g_new0 (float, n);
        double rp[8], r1[8] = { 0 }, r2[8] = { 0 };
        KsUpdateArgs a = { sizeof a, rule, 0.05f, 0.9f, 0.9f, 0.999f, 1e-8f, 0.01f, nesterov, 0 };
        g_autofree char *what = g_strdup_printf ("update rule %d nesterov %d", rule, nesterov);

        for (gsize i = 0; i < n; i++)
          rp[i] = p[i];
        for (a.step = 1; a.step <= 3; a.step++)
          {
            g_autofree float *g = ks_test_random_floats (f->rng, n, -1, 1);
            g_assert_true (ks_compute_update (f->c, &a, p, g, s1, s2, n, NULL));
            ks_test_reference_update (&a, rp, r1, r2, g, n);
            for (gsize i = 0; i < n; i++)
              ks_test_assert_close (what, i, p[i], rp[i], 1e-5);
          }
      }
}

static void
test_update_errors (Fixture *f, gconstpointer data)
{
  float p = 1, g = 1;
  KsUpdateArgs a = { sizeof a, KS_UPDATE_ADAM, 0.1f, 0, 0.9f, 0.999f, 1e-8f, 0, FALSE, 1 };
  g_autoptr (GError) error = NULL;

  g_assert_false (ks_compute_update (f->c, &a, &p, &g, NULL, NULL, 1, &error));
  g_assert_cmpstr (error->message, ==, "update: rule adam needs 2 state buffer(s)");
  g_clear_error (&error);
  float s1 = 0, s2 = 0;
  a.step = 0;
  g_assert_false (ks_compute_update (f->c, &a, &p, &g, &s1, &s2, 1, &error));
  g_assert_cmpstr (error->message, ==, "update: rule adam needs step >= 1 (it is 0)");
  g_clear_error (&error);
  a.size = 8;
  g_assert_false (ks_compute_update (f->c, &a, &p, &g, &s1, &s2, 1, &error));
  g_assert_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID);
  g_assert_cmpfloat (p, ==, 1); /* untouched by every refused call */
}

/* Transposes of 1 to 4 dimensions against index arithmetic done here, and a bad perm. */
static void
test_transpose (Fixture *f, gconstpointer data)
{
  static const struct {
    int ndim;
    gint64 shape[4];
    int perm[4];
  } cases[] = { { 1, { 7 }, { 0 } },
                { 2, { 3, 5 }, { 1, 0 } },
                { 3, { 2, 3, 4 }, { 2, 0, 1 } },
                { 4, { 2, 3, 4, 5 }, { 3, 1, 0, 2 } },
                { 4, { 2, 3, 4, 5 }, { 0, 1, 2, 3 } } };
  g_autoptr (GError) error = NULL;

  for (gsize c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      int nd = cases[c].ndim;
      const gint64 *shape = cases[c].shape;
      const int *perm = cases[c].perm;
      gsize n = 1;
      for (int d = 0; d < nd; d++)
        n *= shape[d];
      g_autofree float *x = g_new (float, n), *y = g_new (float, n);
      for (gsize i = 0; i < n; i++)
        x[i] = (float) i;
      g_assert_true (ks_compute_transpose (f->c, x, y, nd, shape, perm, &error));
      g_assert_no_error (error);
      for (gsize i = 0; i < n; i++)
        {
          /* y's multi-index from i, then x's offset of the same element */
          gsize rest = i, src = 0;
          gint64 index[4];
          for (int d = nd - 1; d >= 0; d--)
            {
              index[d] = rest % shape[perm[d]];
              rest /= shape[perm[d]];
            }
          for (int d = 0; d < nd; d++)
            {
              gint64 at = 0;
              for (int k = 0; k < nd; k++)
                if (perm[k] == d)
                  at = index[k];
              src = src * shape[d] + at;
            }
          if (y[i] != x[src])
            g_error ("transpose case %" G_GSIZE_FORMAT ": y[%" G_GSIZE_FORMAT "] = %g, want "
                     "x[%" G_GSIZE_FORMAT "]", c, i, y[i], src);
        }
    }
  const gint64 shape[] = { 2, 3 };
  float x[6] = { 0 }, y[6];
  g_assert_false (ks_compute_transpose (f->c, x, y, 2, shape, (const int[]) { 1, 1 }, &error));
  g_assert_cmpstr (error->message, ==,
                   "transpose: perm must order the 2 dimensions 0 .. 1, each once (1 to 8 "
                   "dimensions)");
}

/* Dropout masks: the values are 0 or 1 / (1 - p), the dropped share is near p, a seed
 * gives the same mask again and another seed another one; p outside [0, 1) is refused. */
static void
test_dropout_mask (Fixture *f, gconstpointer data)
{
  enum { N = 20000 };
  g_autofree float *a = g_new (float, N), *b = g_new (float, N), *c = g_new (float, N);
  g_autoptr (GError) error = NULL;
  gsize dropped = 0;

  g_assert_true (ks_compute_dropout_mask (f->c, a, N, 0.3f, 42, &error));
  g_assert_true (ks_compute_dropout_mask (f->c, b, N, 0.3f, 42, &error));
  g_assert_true (ks_compute_dropout_mask (f->c, c, N, 0.3f, 43, &error));
  g_assert_no_error (error);
  for (gsize i = 0; i < N; i++)
    {
      g_assert_true (a[i] == 0 || a[i] == 1 / (1 - 0.3f));
      dropped += a[i] == 0;
    }
  /* binomial: standard deviation sqrt (N p (1 - p)) = 65 */
  g_assert_cmpuint (dropped, >, 0.3 * N - 300);
  g_assert_cmpuint (dropped, <, 0.3 * N + 300);
  g_assert_cmpmem (a, N * sizeof (float), b, N * sizeof (float));
  g_assert_true (memcmp (a, c, N * sizeof (float)) != 0);
  g_assert_true (ks_compute_dropout_mask (f->c, a, N, 0, 42, &error));
  for (gsize i = 0; i < N; i++)
    g_assert_cmpfloat (a[i], ==, 1);
  g_assert_false (ks_compute_dropout_mask (f->c, a, N, 1, 42, &error));
  g_assert_cmpstr (error->message, ==, "dropout: rate 1; it is in [0, 1)");
}

/* ---- fused causal attention ---- */

typedef struct {
  KsAttentionShape shape;
  const float *w; /* the weights of the outputs in the loss */
} AttentionCase;

static gsize
attention_out_size (const KsAttentionShape *s)
{
  return (gsize) s->batch * s->tokens * s->heads * s->head_size;
}

static double
attention_loss (gpointer ctx, const float *qkv, gpointer data)
{
  Fixture *f = ctx;
  AttentionCase *a = data;
  gsize n_out = attention_out_size (&a->shape);
  g_autofree float *out = g_new (float, n_out);
  g_autofree float *lse = g_new (float, (gsize) a->shape.batch * a->shape.heads * a->shape.tokens);
  g_assert_true (ks_compute_attention (f->c, qkv, out, lse, &a->shape, NULL));
  return ks_test_weighted_sum (a->w, out, n_out);
}

/* The forward in double, query by query: softmax over the keys up to it, as written. */
static void
reference_attention (const KsAttentionShape *s, const float *qkv, double *out, double *lse)
{
  int T = s->tokens, d = s->head_size, C = s->heads * d;
  g_autofree double *score = g_new (double, T);
  for (int b = 0; b < s->batch; b++)
    for (int h = 0; h < s->heads; h++)
      for (int i = 0; i < T; i++)
        {
          const float *q = qkv + ((gsize) b * T + i) * 3 * C + h * d;
          double max = -INFINITY, sum = 0;
          for (int j = 0; j <= i; j++)
            {
              const float *k = qkv + ((gsize) b * T + j) * 3 * C + C + h * d;
              score[j] = 0;
              for (int c = 0; c < d; c++)
                score[j] += (double) q[c] * k[c] * s->scale;
              max = fmax (max, score[j]);
            }
          for (int j = 0; j <= i; j++)
            sum += exp (score[j] - max);
          for (int c = 0; c < d; c++)
            {
              double o = 0;
              for (int j = 0; j <= i; j++)
                o += exp (score[j] - max) / sum * qkv[((gsize) b * T + j) * 3 * C + 2 * C + h * d + c];
              out[((gsize) b * T + i) * C + h * d + c] = o;
            }
          lse[((gsize) b * s->heads + h) * T + i] = max + log (sum);
        }
}

/* The fused kernel against the double forward; its backward by finite differences, and
 * with beta 1 adding onto what was there. Shapes: a head size below a vector (5) and
 * one of two (16); a last block of queries that is partial; keys not a multiple of 8. */
static void
test_attention (Fixture *f, gconstpointer data)
{
  const KsAttentionShape shapes[] = { { 2, 13, 3, 5, 0.45f }, { 1, 37, 2, 16, 0.25f } };
  g_autoptr (GError) error = NULL;

  for (gsize k = 0; k < G_N_ELEMENTS (shapes); k++)
    {
      const KsAttentionShape *s = &shapes[k];
      gsize n_in = (gsize) s->batch * s->tokens * 3 * s->heads * s->head_size;
      gsize n_out = attention_out_size (s), n_lse = (gsize) s->batch * s->heads * s->tokens;
      g_autofree float *qkv = g_new (float, n_in), *w = g_new (float, n_out);
      g_autofree float *out = g_new (float, n_out), *lse = g_new (float, n_lse);
      g_autofree float *grad = g_new (float, n_in), *twice = g_new (float, n_in);
      g_autofree double *want = g_new (double, n_out), *want_lse = g_new (double, n_lse);
      for (gsize i = 0; i < n_in; i++)
        qkv[i] = (float) g_rand_double_range (f->rng, -2, 2);
      for (gsize i = 0; i < n_out; i++)
        w[i] = (float) g_rand_double_range (f->rng, -1, 1);

      g_assert_true (ks_compute_attention (f->c, qkv, out, lse, s, &error));
      g_assert_no_error (error);
      reference_attention (s, qkv, want, want_lse);
      for (gsize i = 0; i < n_out; i++)
        ks_test_assert_close ("attention", i, out[i], want[i], 1e-5);
      for (gsize i = 0; i < n_lse; i++)
        ks_test_assert_close ("attention lse", i, lse[i], want_lse[i], 1e-5);

      g_assert_true (ks_compute_attention_backward (f->c, qkv, lse, w, grad, 0, s, &error));
      AttentionCase a = { *s, w };
      ks_test_check_gradient (f, "attention_backward", attention_loss, &a, qkv, n_in, grad, 1e-2, 5e-3);
      memcpy (twice, grad, n_in * sizeof (float));
      g_assert_true (ks_compute_attention_backward (f->c, qkv, lse, w, twice, 1, s, &error));
      for (gsize i = 0; i < n_in; i++)
        ks_test_assert_close ("attention_backward beta 1", i, twice[i], 2.0 * grad[i], 1e-6);
    }
  const KsAttentionShape bad = { 1, 4, 0, 8, 1 };
  g_assert_false (ks_compute_attention (f->c, NULL, NULL, NULL, &bad, &error));
  g_assert_cmpstr (error->message, ==, "attention: batch 1, 4 tokens, 0 heads of 8: not a "
                                       "valid shape");
}

/* Every kernel that splits its work over threads, on sizes large enough to split, gives
 * the same bits on 1 thread and on 3 (elements, rows or columns are split; never a
 * partial sum). Without OpenBLAS's OpenMP build both runs use one thread. */
enum { ROWS_T = 512, COLS_T = 96, N_T = ROWS_T * COLS_T };

typedef struct {
  float y[N_T], dx[N_T], dx_in_place[N_T], mean[ROWS_T], rstd[ROWS_T], dgamma[COLS_T], dbeta[COLS_T];
  float losses[ROWS_T], param[N_T], state1[N_T], state2[N_T], mask[N_T];
  float att[N_T / 3], lse[ROWS_T * 4], dqkv[N_T];
  /* conv.c's: 6 images of 12 x 12 x 8, 3 x 3 windows (padded by 1; the max pool's not) */
  float col[6 * 144 * 72], dimage[6 * 144 * 8], max[6 * 100 * 8], avg[6 * 144 * 8];
  float davg[6 * 144 * 8];
  gint64 argmax[6 * 100 * 8];
  float demb[N_T], dscatter[N_T]; /* embedding_backward: rows of COLS_T, and of 1 */
  float col_sums[COLS_T], col_max[COLS_T], row_sums[ROWS_T];
  float bn_y[N_T], bn_mean[COLS_T], bn_var[COLS_T], bn_dx[N_T], bn_dgamma[COLS_T];
  float bn_dbeta[COLS_T];
} ThreadResults;

static void
run_threaded_kernels (Fixture *f, const float *x, const float *w, const gint64 *labels,
                      ThreadResults *r)
{
  KsCompute *c = f->c;
  const KsAttentionShape att = { 4, ROWS_T / 4, 4, COLS_T / 12, 0.3f };
  KsUpdateArgs adamw = { sizeof adamw, KS_UPDATE_ADAMW, 0.01f, 0, 0.9f, 0.999f, 1e-8f, 0.1f,
                         FALSE, 3 };
  memset (r, 0, sizeof *r);
  memcpy (r->param, x, sizeof r->param);
  g_assert_true (ks_compute_unary (c, KS_UNARY_GELU, x, r->y, N_T, NULL));
  g_assert_true (ks_compute_unary_backward (c, KS_UNARY_GELU, x, NULL, w, r->dx, N_T, NULL));
  g_assert_true (ks_compute_binary (c, KS_BINARY_ADD, r->y, w, r->y, ROWS_T, COLS_T, 1, NULL));
  g_assert_true (ks_compute_binary (c, KS_BINARY_MUL, r->y, w, r->y, 1, N_T, 1, NULL));
  g_assert_true (ks_compute_axpby (c, 0.5f, w, 2, r->dx, N_T, NULL));
  g_assert_true (ks_compute_softmax (c, x, r->y, ROWS_T, COLS_T, FALSE, NULL));
  g_assert_true (ks_compute_softmax_backward (c, r->y, w, r->dx, ROWS_T, COLS_T, FALSE, NULL));
  g_assert_true (ks_compute_layer_norm (c, x, w, w + COLS_T, r->y, r->mean, r->rstd, ROWS_T,
                                        COLS_T, 1e-5f, NULL));
  g_assert_true (ks_compute_layer_norm_backward (c, x, w, r->mean, r->rstd, w, r->dx, r->dgamma,
                                                 r->dbeta, ROWS_T, COLS_T, NULL));
  /* in place (dx over dy): every thread's parameter sums read dy before any dx is written */
  float dgamma[COLS_T] = { 0 }, dbeta[COLS_T] = { 0 };
  memcpy (r->dx_in_place, w, sizeof r->dx_in_place);
  g_assert_true (ks_compute_layer_norm_backward (c, x, w, r->mean, r->rstd, r->dx_in_place,
                                                 r->dx_in_place, dgamma, dbeta, ROWS_T, COLS_T,
                                                 NULL));
  g_assert_cmpmem (r->dx, sizeof r->dx, r->dx_in_place, sizeof r->dx_in_place);
  g_assert_cmpmem (r->dgamma, sizeof dgamma, dgamma, sizeof dgamma);
  g_assert_cmpmem (r->dbeta, sizeof dbeta, dbeta, sizeof dbeta);
  g_assert_true (ks_compute_cross_entropy (c, x, labels, r->losses, r->y, ROWS_T, COLS_T, NULL));
  for (int step = 0; step < 3; step++)
    g_assert_true (ks_compute_update (c, &adamw, r->param, w, r->state1, r->state2, N_T, NULL));
  g_assert_true (ks_compute_dropout_mask (c, r->mask, N_T, 0.3f, 7, NULL));
  g_assert_true (ks_compute_attention (c, x, r->att, r->lse, &att, NULL));
  g_assert_true (ks_compute_attention_backward (c, x, r->lse, w, r->dqkv, 0, &att, NULL));
  const KsConvShape conv = { 6, 12, 12, 8, 3, 3, 1, 1, 12, 12 };
  const KsConvShape max_pool = { 6, 12, 12, 8, 3, 3, 1, 0, 10, 10 };
  g_assert_true (ks_compute_im2col (c, x, r->col, &conv, NULL));
  g_assert_true (ks_compute_col2im (c, r->col, r->dimage, &conv, NULL));
  g_assert_true (ks_compute_max_pool (c, x, r->max, r->argmax, &max_pool, NULL));
  g_assert_true (ks_compute_avg_pool (c, x, r->avg, &conv, NULL));
  g_assert_true (ks_compute_avg_pool_backward (c, w, r->davg, &conv, NULL));
  g_assert_true (ks_compute_reduce (c, KS_REDUCE_SUM, x, r->col_sums, ROWS_T, COLS_T, 0, NULL));
  g_assert_true (ks_compute_reduce (c, KS_REDUCE_MAX, x, r->col_max, ROWS_T, COLS_T, 0, NULL));
  g_assert_true (ks_compute_reduce (c, KS_REDUCE_AVG, x, r->row_sums, ROWS_T, COLS_T, 1, NULL));
  g_assert_true (ks_compute_batch_norm (c, x, w, w + COLS_T, r->bn_y, r->bn_mean, r->bn_var,
                                        ROWS_T, COLS_T, 1e-5f, TRUE, NULL));
  g_assert_true (ks_compute_batch_norm_backward (c, x, w, r->bn_mean, r->bn_var, w, r->bn_dx,
                                                 r->bn_dgamma, r->bn_dbeta, ROWS_T, COLS_T,
                                                 1e-5f, TRUE, NULL));
  /* ids repeat: the sums into one row come from several ids, in their order */
  g_assert_true (ks_compute_embedding_backward (c, w, labels, r->demb, ROWS_T, ROWS_T, COLS_T,
                                                NULL));
  g_autofree gint64 *scatter = g_new (gint64, N_T);
  for (gsize i = 0; i < N_T; i++)
    scatter[i] = (gint64) ((i * 7919) % (N_T / 3));
  g_assert_true (ks_compute_embedding_backward (c, x, scatter, r->dscatter, N_T, N_T, 1, NULL));
}

static void
test_threads (Fixture *f, gconstpointer data)
{
  g_autofree float *x = g_new (float, N_T), *w = g_new (float, N_T);
  g_autofree gint64 *labels = g_new (gint64, ROWS_T);
  g_autofree ThreadResults *one = g_new (ThreadResults, 1), *three = g_new (ThreadResults, 1);
  for (gsize i = 0; i < N_T; i++)
    {
      x[i] = (float) g_rand_double_range (f->rng, -3, 3);
      w[i] = (float) g_rand_double_range (f->rng, -1, 1);
    }
  for (gsize r = 0; r < ROWS_T; r++)
    labels[r] = g_rand_int_range (f->rng, 0, COLS_T);
  g_assert_true (ks_compute_set_threads (f->c, 1, NULL));
  run_threaded_kernels (f, x, w, labels, one);
  g_assert_true (ks_compute_set_threads (f->c, 3, NULL));
  run_threaded_kernels (f, x, w, labels, three);
  g_assert_cmpmem (one, sizeof *one, three, sizeof *three);
  /* the kernels ran on 3 threads only where OpenBLAS is its OpenMP build */
  g_autofree char *described = ks_compute_describe (f->c);
  g_test_message ("%s", described);
}

/* The backend's whole conv2d (conv-gemm.c) on 1, 2 and 3 threads: the same bits, forward
 * and backward, dw both written and added to; and against direct sums in double. 20
 * images of 32 x 32 x 16 make 20 chunks of 1 MB patches (one image each), more than the
 * backward's 16 partial sums of dw, so groups of 1 and 2 chunks are summed. */
enum { CN = 20, CH = 32, CC = 16, CK = 3, CF = 8, C_IN = CN * CH * CH * CC };
enum { C_KK = CK * CK * CC, C_OUT = CN * CH * CH * CF };

typedef struct {
  float y[C_OUT], dx[C_IN], dx_only[C_IN], dw[C_KK * CF], dw_added[C_KK * CF];
} ConvResults;

static void
run_conv (Fixture *f, const float *x, const float *w, const float *b, const float *dy,
          int threads, ConvResults *r)
{
  const KsConvShape s = { CN, CH, CH, CC, CK, CK, 1, 1, CH, CH };
  GError *error = NULL;
  g_assert_true (ks_compute_set_threads (f->c, threads, NULL));
  memset (r, 0xff, sizeof *r); /* NaN: w_beta 0 must not read dw */
  for (gsize i = 0; i < C_KK * CF; i++)
    r->dw_added[i] = w[i];
  g_assert_true (ks_compute_conv2d (f->c, x, w, b, r->y, CF, &s, &error));
  g_assert_no_error (error);
  g_assert_true (ks_compute_conv2d_backward (f->c, x, w, dy, r->dx, r->dw, 0, CF, &s, &error));
  g_assert_true (ks_compute_conv2d_backward (f->c, x, w, dy, NULL, r->dw_added, 0.5f, CF, &s,
                                             &error));
  g_assert_true (ks_compute_conv2d_backward (f->c, x, w, dy, r->dx_only, NULL, 0, CF, &s,
                                             &error));
  g_assert_no_error (error);
  g_assert_cmpmem (r->dx, sizeof r->dx, r->dx_only, sizeof r->dx_only);
}

/* x's pixel (n, iy, ix, ch), 0 outside (padding 1) */
static double
pixel (const float *x, int n, int iy, int ix, int ch)
{
  if (iy < 0 || iy >= CH || ix < 0 || ix >= CH)
    return 0;
  return x[(((gsize) n * CH + iy) * CH + ix) * CC + ch];
}

static void
test_conv_threads (Fixture *f, gconstpointer data)
{
  g_autofree float *x = g_new (float, C_IN), *w = g_new (float, C_KK * CF);
  g_autofree float *b = g_new (float, CF), *dy = g_new (float, C_OUT);
  g_autofree ConvResults *one = g_new (ConvResults, 1), *two = g_new (ConvResults, 1);
  g_autofree ConvResults *three = g_new (ConvResults, 1);
  g_autofree double *dx = g_new0 (double, C_IN);

  if (!ks_compute_has_conv2d (f->c))
    {
      g_test_skip ("this backend has no whole conv2d");
      return;
    }
  for (gsize i = 0; i < C_IN; i++)
    x[i] = (float) g_rand_double_range (f->rng, -1, 1);
  for (gsize i = 0; i < C_KK * CF; i++)
    w[i] = (float) g_rand_double_range (f->rng, -1, 1);
  for (gsize i = 0; i < CF; i++)
    b[i] = (float) g_rand_double_range (f->rng, -1, 1);
  for (gsize i = 0; i < C_OUT; i++)
    dy[i] = (float) g_rand_double_range (f->rng, -1, 1);
  run_conv (f, x, w, b, dy, 1, one);
  run_conv (f, x, w, b, dy, 2, two);
  run_conv (f, x, w, b, dy, 3, three);
  g_assert_cmpmem (one, sizeof *one, two, sizeof *two);
  g_assert_cmpmem (one, sizeof *one, three, sizeof *three);

  /* direct sums: y, dw = sum over pixels of patch^T dy, dx = the adjoint */
  for (int n = 0; n < CN; n++)
    for (int oy = 0; oy < CH; oy++)
      for (int ox = 0; ox < CH; ox++)
        {
          gsize o = (((gsize) n * CH + oy) * CH + ox) * CF;
          for (int fi = 0; fi < CF; fi++)
            {
              double y = b[fi];
              for (int ky = 0; ky < CK; ky++)
                for (int kx = 0; kx < CK; kx++)
                  for (int ch = 0; ch < CC; ch++)
                    {
                      gsize row = ((gsize) ky * CK + kx) * CC + ch;
                      int iy = oy + ky - 1, ix = ox + kx - 1;
                      y += pixel (x, n, iy, ix, ch) * w[row * CF + fi];
                      if (iy >= 0 && iy < CH && ix >= 0 && ix < CH)
                        dx[(((gsize) n * CH + iy) * CH + ix) * CC + ch]
                          += (double) dy[o + fi] * w[row * CF + fi];
                    }
              ks_test_assert_close ("conv y", o + fi, one->y[o + fi], y, 1e-5);
            }
        }
  for (gsize i = 0; i < C_IN; i += 7)
    ks_test_assert_close ("conv dx", i, one->dx[i], dx[i], 1e-5);
  for (int row = 0; row < C_KK; row++)
    for (int fi = 0; fi < CF; fi++)
      {
        int ky = row / (CK * CC), kx = row / CC % CK, ch = row % CC;
        double dw = 0;
        for (int n = 0; n < CN; n++)
          for (int oy = 0; oy < CH; oy++)
            for (int ox = 0; ox < CH; ox++)
              dw += pixel (x, n, oy + ky - 1, ox + kx - 1, ch)
                    * dy[(((gsize) n * CH + oy) * CH + ox) * CF + fi];
        gsize i = (gsize) row * CF + fi;
        ks_test_assert_close ("conv dw", i, one->dw[i], dw, 1e-4);
        ks_test_assert_close ("conv dw added", i, one->dw_added[i], 0.5 * w[i] + dw, 1e-4);
      }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (!ks_test_have_openblas ())
    return g_test_run ();
#define ADD(name, fn) g_test_add ("/kernels/openblas/" name, Fixture, NULL, setup, fn, teardown)
  ADD ("unary", test_unary);
  ADD ("binary", test_binary);
  ADD ("reduce", test_reduce);
  ADD ("axpby", test_axpby);
  ADD ("softmax", test_softmax);
  ADD ("layer-norm", test_layer_norm);
  ADD ("embedding", test_embedding);
  ADD ("cross-entropy", test_cross_entropy);
  ADD ("update-rules", test_update_rules);
  ADD ("update-errors", test_update_errors);
  ADD ("transpose", test_transpose);
  ADD ("dropout-mask", test_dropout_mask);
  ADD ("attention", test_attention);
  ADD ("threads", test_threads);
  ADD ("conv-threads", test_conv_threads);
  return g_test_run ();
}
