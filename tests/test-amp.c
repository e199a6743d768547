/* Mixed precision on the CPU plugin: 16-bit rounding against an independent search of
 * every representable value, the half-precision product against a double reference,
 * matmul gradients from rounded operands, dynamic loss scaling (a forced overflow skips
 * the step and halves the scale; good steps grow it), its checkpointed state, and the
 * host-device copies of a training step. */
#include "testutil.h"
#include <ksdist/tasks.h>

#include <ksdist/half.h>

#include <math.h>
#include <string.h>

/* ---- an independent reference: 16-bit values decoded with ldexp, rounding by search ---- */

typedef struct {
  int mantissa_bits, bias;
  guint16 infinity; /* the pattern of +inf; patterns below it are the positive finite values */
} Format;

static const Format fp16 = { 10, 15, 0x7c00 }, bf16 = { 7, 127, 0x7f80 };

static double
decode (const Format *f, guint16 p)
{
  int e = (p & 0x7fff) >> f->mantissa_bits, m = p & ((1 << f->mantissa_bits) - 1);
  double v = e == 0 ? ldexp (m, 1 - f->bias - f->mantissa_bits)
                    : ldexp ((1 << f->mantissa_bits) + m, e - f->bias - f->mantissa_bits);
  return p & 0x8000 ? -v : v;
}

/* The pattern nearest x (ties to the even pattern); past the largest finite value plus
 * half its step, infinity */
static guint16
nearest (const Format *f, float x)
{
  double a = fabs ((double) x);
  guint16 sign = signbit (x) ? 0x8000 : 0;
  guint16 lo = 0, hi = f->infinity - 1; /* largest finite */
  double top = decode (f, hi), step = top - decode (f, hi - 1);

  if (a >= top + step / 2)
    return sign | f->infinity;
  if (a >= top)
    return sign | hi;
  while (hi - lo > 1) /* decode (lo) <= a < decode (hi) */
    {
      guint16 mid = (lo + hi) / 2;
      if (decode (f, mid) <= a)
        lo = mid;
      else
        hi = mid;
    }
  double below = a - decode (f, lo), above = decode (f, hi) - a;
  guint16 p = below < above ? lo : above < below ? hi : (lo & 1) ? hi : lo;
  return sign | p;
}

/* Values that test rounding: random bit patterns, values near each format's range and
 * steps, and the edges */
static GArray *
test_values (void)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (7);
  GArray *v = g_array_new (FALSE, FALSE, sizeof (float));
  const float edges[] = { 0.0f, -0.0f, 1.0f, 65504.0f, 65519.99f, 65520.0f, 65536.0f,
                          6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f,
                          8.940697e-08f, 1.0009766f, 1.0004883f, 1.0014648f, 3.3895314e38f,
                          3.3961776e38f, 3.4028235e38f, 1.0039062f, 1.0078125f, 1e-40f,
                          INFINITY, -INFINITY };

  g_array_append_vals (v, edges, G_N_ELEMENTS (edges));
  for (int i = 0; i < 20000; i++)
    {
      float x[] = { ks_bits_float (g_rand_int (rng)), (float) g_rand_double_range (rng, -7e4, 7e4),
                    (float) g_rand_double_range (rng, -1e-4, 1e-4),
                    (float) g_rand_double_range (rng, -2, 2) };
      g_array_append_vals (v, x, G_N_ELEMENTS (x));
    }
  return v;
}

static void
check_rounding (const Format *f, guint16 (*to) (float), float (*from) (guint16))
{
  g_autoptr (GArray) values = test_values ();

  for (guint i = 0; i < values->len; i++)
    {
      float x = g_array_index (values, float, i);
      guint16 got = to (x);
      if (isnan (x))
        g_assert_true (isnan (from (got)));
      else if (got != nearest (f, x))
        g_error ("%.9g rounds to 0x%04x, nearest is 0x%04x", x, got, nearest (f, x));
    }
  /* widening is exact: every pattern decodes to its value */
  for (guint32 p = 0; p < 0x10000; p++)
    {
      double want = (p & 0x7fff) > f->infinity ? NAN
                    : (p & 0x7fff) == f->infinity ? (p & 0x8000 ? -INFINITY : INFINITY)
                                                  : decode (f, p);
      float got = from (p);
      if (isnan (want))
        g_assert_true (isnan (got));
      else
        g_assert_cmpfloat (got, ==, want);
    }
}

static void
test_rounding (void)
{
  check_rounding (&fp16, ks_float_to_fp16, ks_fp16_to_float);
  check_rounding (&bf16, ks_float_to_bf16, ks_bf16_to_float);
}

/* ---- the plugin's kernels ---- */

typedef struct {
  CpuFixture cpu;
} Fixture;

/* data: one more setting, or NULL */
static void
setup (Fixture *f, gconstpointer data)
{
  ks_test_cpu_setup (&f->cpu, (const char *const[]) { "openblas.threads=3", data, NULL });
}

static void
teardown (Fixture *f, gconstpointer data)
{
  ks_test_cpu_teardown (&f->cpu);
}

/* The convert slot rounds as half.h does, on threads (a size that splits) */
static void
test_convert (Fixture *f, gconstpointer data)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (3);
  const gsize n = 100003;
  g_autofree float *x = ks_test_random_floats (rng, n, -7e4, 7e4);
  g_autofree guint16 *h = g_new (guint16, n);
  g_autofree float *back = g_new (float, n);
  g_autoptr (GError) error = NULL;

  x[17] = NAN;
  for (int t = 0; t < 2; t++)
    {
      KsDType dtype = t == 0 ? KS_DTYPE_FLOAT16 : KS_DTYPE_BFLOAT16;
      g_assert_true (ks_compute_convert (f->cpu.c, x, KS_DTYPE_FLOAT32, h, dtype, n, &error));
      g_assert_true (ks_compute_convert (f->cpu.c, h, dtype, back, KS_DTYPE_FLOAT32, n, &error));
      g_assert_no_error (error);
      for (gsize i = 0; i < n; i++)
        {
          guint16 want = t == 0 ? ks_float_to_fp16 (x[i]) : ks_float_to_bf16 (x[i]);
          float wide = t == 0 ? ks_fp16_to_float (want) : ks_bf16_to_float (want);
          g_assert_cmpuint (h[i], ==, want);
          g_assert_true (isnan (wide) ? isnan (back[i]) : back[i] == wide);
        }
    }
  /* half to half, or float64, is not a conversion it makes */
  g_assert_false (ks_compute_convert (f->cpu.c, h, KS_DTYPE_FLOAT16, back, KS_DTYPE_BFLOAT16,
                                      n, &error));
  g_assert_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID);
}

/* C = alpha op(A) op(B) + beta C on 16-bit operands, every transposition, leading
 * dimensions wider than the rows: against double sums of the decoded operands */
static void
test_gemm (Fixture *f, gconstpointer data)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (11);
  const int m = 7, n = 5, k = 33, pad = 3;
  const float alpha = 0.75f, beta = 0.5f;

  for (int t = 0; t < 2; t++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++)
        {
          KsDType dtype = t == 0 ? KS_DTYPE_FLOAT16 : KS_DTYPE_BFLOAT16;
          const Format *fmt = t == 0 ? &fp16 : &bf16;
          int a_rows = ta ? k : m, a_cols = ta ? m : k, lda = a_cols + pad;
          int b_rows = tb ? n : k, b_cols = tb ? k : n, ldb = b_cols + pad, ldc = n + pad;
          g_autofree float *a32 = ks_test_random_floats (rng, a_rows * lda, -2, 2);
          g_autofree float *b32 = ks_test_random_floats (rng, b_rows * ldb, -2, 2);
          g_autofree float *c = ks_test_random_floats (rng, m * ldc, -1, 1);
          g_autofree float *c0 = g_memdup2 (c, m * ldc * sizeof (float));
          g_autofree guint16 *a = g_new (guint16, a_rows * lda);
          g_autofree guint16 *b = g_new (guint16, b_rows * ldb);
          g_autoptr (GError) error = NULL;

          for (int i = 0; i < a_rows * lda; i++)
            a[i] = t == 0 ? ks_float_to_fp16 (a32[i]) : ks_float_to_bf16 (a32[i]);
          for (int i = 0; i < b_rows * ldb; i++)
            b[i] = t == 0 ? ks_float_to_fp16 (b32[i]) : ks_float_to_bf16 (b32[i]);
          g_assert_true (ks_compute_gemm_half (f->cpu.c, dtype, ta, tb, m, n, k, alpha, a, lda,
                                               b, ldb, beta, c, ldc, &error));
          g_assert_no_error (error);
          for (int i = 0; i < m; i++)
            for (int j = 0; j < ldc; j++)
              {
                if (j >= n) /* outside C: untouched */
                  {
                    g_assert_cmpfloat (c[i * ldc + j], ==, c0[i * ldc + j]);
                    continue;
                  }
                double sum = 0, size = 0;
                for (int p = 0; p < k; p++)
                  {
                    double x = decode (fmt, a[ta ? p * lda + i : i * lda + p]);
                    double y = decode (fmt, b[tb ? j * ldb + p : p * ldb + j]);
                    sum += x * y;
                    size += fabs (x * y);
                  }
                double want = alpha * sum + beta * c0[i * ldc + j];
                g_assert_cmpfloat (fabs (c[i * ldc + j] - want), <=, 1e-6 * (size + 1));
              }
        }
}

static void
test_nonfinite (Fixture *f, gconstpointer data)
{
  const gsize n = 4099;
  g_autofree float *x = g_new0 (float, n);
  const float bad[] = { INFINITY, -INFINITY, NAN };
  const gsize where[] = { 0, 2048, n - 1 };
  float found = -1;

  for (gsize i = 0; i < n; i++)
    x[i] = (float) (i % 7) * 1e30f;
  g_assert_true (ks_compute_find_nonfinite (f->cpu.c, x, n, &found, NULL));
  g_assert_cmpfloat (found, ==, 0);
  for (gsize b = 0; b < G_N_ELEMENTS (bad); b++)
    for (gsize w = 0; w < G_N_ELEMENTS (where); w++)
      {
        float keep = x[where[w]];
        x[where[w]] = bad[b];
        g_assert_true (ks_compute_find_nonfinite (f->cpu.c, x, n, &found, NULL));
        g_assert_cmpfloat (found, ==, 1);
        x[where[w]] = keep;
      }
}

/* ---- the model under mixed precision ---- */

static KsAmpSettings
amp_settings (KsDType dtype, double scale)
{
  return (KsAmpSettings) { dtype, scale, 2, 0.5, 2, TRUE };
}

/* loss = mean (A B) with A [m, k] and B [k, n] parameters: the forward is the product of
 * the rounded operands, and dA = round (dC) round (B)^T, dB = round (A)^T round (dC) with
 * dC = 1 / (m n), computed here in double */
static void
test_matmul_gradients (Fixture *f, gconstpointer data)
{
  const int m = 6, k = 40, n = 9;
  const gint64 ashape[] = { m, k }, bshape[] = { k, n };

  for (int t = 0; t < 2; t++)
    {
      KsDType dtype = t == 0 ? KS_DTYPE_BFLOAT16 : KS_DTYPE_FLOAT16;
      const Format *fmt = t == 0 ? &bf16 : &fp16;
      guint16 (*round16) (float) = t == 0 ? ks_float_to_bf16 : ks_float_to_fp16;
      g_autoptr (KsModel) model = ks_model_new (f->cpu.c);
      g_autoptr (GError) error = NULL;
      KsInit init = { KS_INIT_NORMAL, 0, 1, 5 };
      KsExpr *a = ks_model_parameter (model, "a", 2, ashape, init, &error);
      init.seed = 6;
      KsExpr *b = ks_model_parameter (model, "b", 2, bshape, init, &error);
      KsExpr *loss = ks_mean (ks_matmul (a, b, &error), &error);
      g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
      KsAmpSettings amp = amp_settings (dtype, 1); /* fp16 scaled by 1: the plain gradient */

      g_assert_no_error (error);
      g_assert_true (ks_model_set_amp (model, &amp, &error));
      g_assert_true (ks_model_init (model, &error));
      g_assert_true (ks_model_backward (model, loss, NULL, 0, NULL, pairs, &error));
      KsExpr *targets[] = { loss, g_array_index (pairs, KsParamGrad, 0).grad,
                            g_array_index (pairs, KsParamGrad, 1).grad };
      g_assert_true (ks_model_run (model, NULL, 0, targets, 3, &error));
      g_assert_no_error (error);

      g_autofree float *av = g_new (float, m * k), *bv = g_new (float, k * n);
      g_autofree float *da = g_new (float, m * k), *db = g_new (float, k * n);
      const KsTensor *grad_a = ks_expr_value (targets[1], &error);
      const KsTensor *grad_b = ks_expr_value (targets[2], &error);
      g_assert_true (ks_tensor_to_host (ks_expr_value (a, &error), av, m * k * 4, &error));
      g_assert_true (ks_tensor_to_host (ks_expr_value (b, &error), bv, k * n * 4, &error));
      g_assert_true (ks_tensor_to_host (grad_a, da, m * k * 4, &error));
      g_assert_true (ks_tensor_to_host (grad_b, db, k * n * 4, &error));
      g_assert_no_error (error);

      double dc = decode (fmt, round16 (1.0f / (m * n))), total = 0;
      for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
          for (int p = 0; p < k; p++)
            total += decode (fmt, round16 (av[i * k + p])) * decode (fmt, round16 (bv[p * n + j]));
      g_assert_cmpfloat (fabs (ks_test_scalar (loss) - total / (m * n)), <=, 1e-5);
      for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++)
          {
            double want = 0;
            for (int j = 0; j < n; j++)
              want += dc * decode (fmt, round16 (bv[p * n + j]));
            g_assert_cmpfloat (fabs (da[i * k + p] - want), <=, 1e-6);
          }
      for (int p = 0; p < k; p++)
        for (int j = 0; j < n; j++)
          {
            double want = 0;
            for (int i = 0; i < m; i++)
              want += decode (fmt, round16 (av[i * k + p])) * dc;
            g_assert_cmpfloat (fabs (db[p * n + j] - want), <=, 1e-6);
          }
      /* and the gradient is float32's to about the 16-bit step */
      double step = t == 0 ? 1.0 / 128 : 1.0 / 1024;
      for (int p = 0; p < k; p++)
        {
          double want = 0;
          for (int i = 0; i < m; i++)
            want += av[i * k + p] / (double) (m * n);
          g_assert_cmpfloat (fabs (db[p * n] - want), <=, 2 * step * (fabs (want) + 0.05));
        }
    }
}

/* XOR of two signs through a hidden layer, as test-optim's */
enum { N = 64 };

typedef struct {
  KsModel *model;
  KsExpr *loss;
  KsOptimizer *opt;
  float xs[N * 2];
  gint64 ys[N];
  KsFeed feeds[2];
} Net;

static void
net_build (Net *net, Fixture *f, const KsAmpSettings *amp)
{
  const gint64 xshape[] = { N, 2 }, yshape[] = { N };
  g_autoptr (GError) error = NULL;

  for (int i = 0; i < N; i++)
    {
      net->xs[2 * i] = (float) sin (i * 2.1);
      net->xs[2 * i + 1] = (float) cos (i * 1.3);
      net->ys[i] = (net->xs[2 * i] > 0) != (net->xs[2 * i + 1] > 0);
    }
  net->feeds[0] = (KsFeed) { "x", net->xs, sizeof net->xs };
  net->feeds[1] = (KsFeed) { "y", net->ys, sizeof net->ys };
  net->model = ks_model_new (f->cpu.c);
  KsExpr *x = ks_model_data (net->model, "x", 2, xshape, KS_DTYPE_FLOAT32, &error);
  KsExpr *y = ks_model_data (net->model, "y", 1, yshape, KS_DTYPE_INT64, &error);
  KsExpr *h = ks_fc (x, 16, KS_UNARY_TANH, "hidden", 5, &error);
  net->loss = ks_softmax_cross_entropy (ks_fc (h, 2, -1, "out", 6, &error), y, &error);
  g_assert_no_error (error);
  g_assert_true (ks_model_set_amp (net->model, amp, &error));
  g_assert_true (ks_model_init (net->model, &error));
  net->opt = ks_optimizer_new (f->cpu.registry, f->cpu.config, "adam", &error);
  g_assert_no_error (error);
  g_assert_true (ks_optimizer_minimize (net->opt, net->model, net->loss, NULL, 0, NULL, &error));
}

static void
net_free (Net *net)
{
  ks_optimizer_free (net->opt);
  ks_model_free (net->model);
}

static float *
parameters (KsModel *model)
{
  KsArena *p = ks_model_parameters (model);
  return g_memdup2 (ks_arena_data (p), ks_arena_numel (p) * sizeof (float));
}

/* The optimizer's step count, from its next rate under a 1000-step warmup to 0.001 */
static gint64
optimizer_steps (KsOptimizer *opt)
{
  return (gint64) lround (ks_optimizer_learning_rate (opt) * 1e6) - 1;
}

/* float16 from a scale of 2^40: the first steps overflow and are skipped with nothing
 * changed, halving the scale, until one fits; then 2 good steps double it */
static void
test_loss_scaling (Fixture *f, gconstpointer data)
{
  KsAmpSettings amp = amp_settings (KS_DTYPE_FLOAT16, 0x1p40);
  Net net;
  KsLossScale before, after;
  gint64 applied = 0, skips = 0, growths = 0;
  g_autoptr (GError) error = NULL;

  net_build (&net, f, &amp);
  gsize numel = ks_arena_numel (ks_model_parameters (net.model));
  for (int s = 0; s < 40; s++)
    {
      g_autofree float *was = parameters (net.model);
      g_assert_true (ks_model_loss_scale (net.model, &before));
      g_assert_true (ks_optimizer_step (net.opt, net.feeds, 2, &error));
      g_assert_no_error (error);
      g_assert_true (ks_model_loss_scale (net.model, &after));
      g_autofree float *now = parameters (net.model);
      if (after.skipped > before.skipped)
        {
          skips++;
          g_assert_cmpfloat (after.scale, ==, before.scale / 2);
          g_assert_cmpint (after.good_steps, ==, 0);
          g_assert_cmpmem (was, numel * 4, now, numel * 4); /* nothing moved */
        }
      else
        {
          applied++;
          g_assert_true (memcmp (was, now, numel * 4) != 0);
          if (before.good_steps + 1 == amp.growth_interval)
            {
              growths++;
              g_assert_cmpfloat (after.scale, ==, before.scale * 2);
              g_assert_cmpint (after.good_steps, ==, 0);
            }
          else
            {
              g_assert_cmpfloat (after.scale, ==, before.scale);
              g_assert_cmpint (after.good_steps, ==, before.good_steps + 1);
            }
        }
      /* a skipped step leaves Adam's counter (and bias correction, schedule) alone */
      g_assert_cmpint (optimizer_steps (net.opt), ==, applied);
    }
  g_assert_cmpint (skips, >=, 10); /* 2^40 needed at least 10 halvings to fit float16 */
  g_assert_cmpint (applied, >, 5);
  g_assert_cmpint (growths, >, 0);
  g_assert_cmpint (after.skipped, ==, skips);
  net_free (&net);

  /* a fixed scale still skips what overflows, and stays */
  amp.dynamic = FALSE;
  net_build (&net, f, &amp);
  for (int s = 0; s < 3; s++)
    g_assert_true (ks_optimizer_step (net.opt, net.feeds, 2, &error));
  g_assert_true (ks_model_loss_scale (net.model, &after));
  g_assert_cmpfloat (after.scale, ==, 0x1p40);
  g_assert_cmpint (after.skipped, ==, 3);
  g_assert_cmpint (optimizer_steps (net.opt), ==, 0);
  net_free (&net);
}

/* float16 with a fitting scale, bfloat16 and float32 train the same net alike */
static void
test_precisions_agree (Fixture *f, gconstpointer data)
{
  const KsDType types[] = { KS_DTYPE_FLOAT32, KS_DTYPE_BFLOAT16, KS_DTYPE_FLOAT16 };
  float losses[3];

  for (int t = 0; t < 3; t++)
    {
      KsAmpSettings amp = amp_settings (types[t], 1024);
      Net net;
      net_build (&net, f, &amp);
      for (int s = 0; s < 150; s++)
        g_assert_true (ks_optimizer_step (net.opt, net.feeds, 2, NULL));
      losses[t] = ks_test_scalar (net.loss);
      net_free (&net);
    }
  /* from about 0.69 (log 2) to near 0 alike: bfloat16's 8-bit steps show at this end */
  g_test_message ("losses after 150 steps: float32 %g, bfloat16 %g, float16 %g", losses[0],
                  losses[1], losses[2]);
  g_assert_cmpfloat (losses[0], <, 0.1);
  for (int t = 1; t < 3; t++)
    g_assert_cmpfloat (fabs (losses[t] - losses[0]), <=, 0.05);
}

/* The loss scale travels with a checkpoint: the run resumed from step 5 ends bitwise as
 * the straight one, scale and counts included */
static void
test_checkpoint (Fixture *f, gconstpointer data)
{
  KsAmpSettings amp = amp_settings (KS_DTYPE_FLOAT16, 0x1p30);
  g_autofree char *dir = ks_test_tmpdir ();
  g_autoptr (GError) error = NULL;
  Net straight, resumed;
  KsLossScale a, b;

  net_build (&straight, f, &amp);
  for (int s = 1; s <= 12; s++)
    {
      g_assert_true (ks_optimizer_step (straight.opt, straight.feeds, 2, &error));
      if (s == 5)
        g_assert_true (ks_checkpoint_save (dir, s, straight.model, straight.opt, NULL, 0,
                                           &error));
      g_assert_no_error (error);
    }
  net_build (&resumed, f, &amp);
  g_autofree char *latest = ks_checkpoint_latest (dir);
  g_assert_true (ks_checkpoint_load (latest, resumed.model, resumed.opt, NULL, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (ks_model_loss_scale (resumed.model, &b));
  g_assert_cmpint (b.skipped, >, 0); /* the saved state, not the initial one */
  g_assert_cmpfloat (b.scale, <, 0x1p30);
  for (int s = 6; s <= 12; s++)
    g_assert_true (ks_optimizer_step (resumed.opt, resumed.feeds, 2, &error));
  g_assert_true (ks_model_loss_scale (straight.model, &a));
  g_assert_true (ks_model_loss_scale (resumed.model, &b));
  g_assert_cmpfloat (a.scale, ==, b.scale);
  g_assert_cmpint (a.good_steps, ==, b.good_steps);
  g_assert_cmpint (a.skipped, ==, b.skipped);
  g_autofree float *pa = parameters (straight.model), *pb = parameters (resumed.model);
  gsize numel = ks_arena_numel (ks_model_parameters (straight.model));
  g_assert_cmpmem (pa, numel * 4, pb, numel * 4);
  net_free (&straight);
  net_free (&resumed);
  ks_test_rmtree (dir);
}

/* The "\"key\":\"value\"" pair of `key` in the safetensors header of `file`. */
static char *
header_pair (const char *file, const char *key)
{
  g_autofree char *bytes = NULL;
  g_autofree char *from = g_strdup_printf ("\"%s\":\"", key);
  gsize len;
  g_assert_true (g_file_get_contents (file, &bytes, &len, NULL));
  const char *at = strstr (bytes + 8, from); /* the header: its length in bytes 0-7 */
  g_assert_nonnull (at);
  return g_strndup (at, strchr (at + strlen (from), '"') + 1 - at);
}

/* A checkpoint's loss scale and step, edited and sealed again as a forger who knows the
 * format would, meet the checks the same settings meet in a config (loss_scale = 1e-45
 * turned the weights into NaN, good_steps = INT64_MAX overflowed, a deleted loss_scale
 * restarted at the initial scale, step 5 in checkpoint-5's place was "checkpoint-60"). */
static void
test_checkpoint_ranges (Fixture *f, gconstpointer data)
{
  static const struct {
    const char *key, *to, *message; /* to NULL: the key renamed away */
  } cases[] = {
    { "loss_scale", "\"loss_scale\":\"1e-45\"",
      "metadata 'loss_scale' is '1e-45', not a number in [1e-30, 3.40282e+38] (the range of "
      "[amp] initial_scale)" },
    { "loss_scale", "\"loss_scale\":\"inf\"", "metadata 'loss_scale' is 'inf'" },
    { "loss_scale_good_steps", "\"loss_scale_good_steps\":\"9223372036854775807\"",
      "metadata 'loss_scale_good_steps' is '9223372036854775807', not an integer in [0, "
      "999999999999]" },
    { "loss_scale_skipped", "\"loss_scale_skipped\":\"9223372036854775807\"",
      "metadata 'loss_scale_skipped' is '9223372036854775807', not an integer in [0, "
      "9007199254740992]" },
    { "loss_scale", NULL,
      "has no metadata 'loss_scale', though its run trained with [amp] dtype = fp16, which "
      "saves it: the file was edited; resume from another checkpoint" },
    { "step", "\"step\":\"60\"",
      "metadata 'step' is 60, but the directory is checkpoint-5: the file was edited or "
      "moved; resume from another checkpoint" },
  };
  KsAmpSettings amp = amp_settings (KS_DTYPE_FLOAT16, 0x1p30);
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *ck = g_build_filename (dir, "checkpoint-5", NULL);
  g_autofree char *file = g_build_filename (ck, "model.safetensors", NULL);
  g_autoptr (GHashTable) meta = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GError) error = NULL;
  g_autofree char *good = NULL;
  gsize len;
  Net net;

  /* the trainer's checkpoints say their settings; the fp16 one is what counts here */
  g_hash_table_insert (meta, "config", "amp.dtype = fp16\namp.initial_scale = 1073741824\n");
  net_build (&net, f, &amp);
  for (int s = 1; s <= 5; s++)
    g_assert_true (ks_optimizer_step (net.opt, net.feeds, 2, &error));
  g_assert_true (ks_checkpoint_save (dir, 5, net.model, net.opt, meta, 0, &error));
  g_assert_no_error (error);
  net_free (&net);
  g_assert_true (g_file_get_contents (file, &good, &len, NULL));
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *from = header_pair (file, cases[i].key);
      g_autofree char *renamed = g_strdup_printf ("\"%sX\"%s", cases[i].key,
                                                  from + strlen (cases[i].key) + 2);
      gint64 step = -1;
      KsLossScale before, after;
      ks_test_edit_header (file, from, cases[i].to != NULL ? cases[i].to : renamed, TRUE, 0);
      net_build (&net, f, &amp);
      g_assert_true (ks_model_loss_scale (net.model, &before));
      g_assert_false (ks_checkpoint_load (ck, net.model, net.opt, &step, NULL, &error));
      g_test_message ("%s", error->message);
      g_assert_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_FORMAT);
      g_autofree char *want = g_strdup_printf ("%s: %s", file, cases[i].message);
      g_assert_true (g_str_has_prefix (error->message, want));
      g_clear_error (&error);
      /* refused before anything changed */
      g_assert_true (ks_model_loss_scale (net.model, &after));
      g_assert_cmpfloat (after.scale, ==, before.scale);
      g_assert_cmpint (step, ==, -1);
      net_free (&net);
      g_assert_true (g_file_set_contents (file, good, len, NULL));
    }
  /* the untouched checkpoint loads, scale and step included */
  net_build (&net, f, &amp);
  gint64 step = -1;
  g_assert_true (ks_checkpoint_load (ck, net.model, net.opt, &step, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpint (step, ==, 5);
  net_free (&net);
  ks_test_rmtree (dir);
}

/* A step crosses between host and device only for its feeds (and, with float16, the one
 * overflow flag); the loss stays on the device until read */
static void
test_transfers (Fixture *f, gconstpointer data)
{
  const KsDType types[] = { KS_DTYPE_FLOAT32, KS_DTYPE_FLOAT16 };

  for (int t = 0; t < 2; t++)
    {
      KsModel *model = ks_model_new (f->cpu.c);
      KsGptShape shape = { 17, 8, 2, 2, 16, 3, 1, 0.1f, FALSE };
      KsExpr *logits, *loss;
      KsAmpSettings amp = amp_settings (types[t], 64);
      g_autoptr (GError) error = NULL;
      gint64 ids[24], positions[24];
      guint64 dev0, host0, dev1, host1;

      amp.growth_interval = 1000;
      g_assert_true (ks_gpt_build (model, &shape, &logits, &loss, &error));
      g_assert_true (ks_model_set_amp (model, &amp, &error));
      g_assert_true (ks_model_init (model, &error));
      KsOptimizer *opt = ks_optimizer_new (f->cpu.registry, f->cpu.config, "adamw", &error);
      g_assert_true (ks_optimizer_minimize (opt, model, loss, NULL, 0, NULL, &error));
      g_assert_no_error (error);
      for (int i = 0; i < 24; i++)
        {
          ids[i] = (i * 5) % 17;
          positions[i] = i % 8;
        }
      const KsFeed feeds[] = { { "tokens", ids, sizeof ids },
                               { "positions", positions, sizeof positions },
                               { "targets", ids, sizeof ids } };
      g_assert_true (ks_optimizer_step (opt, feeds, 3, &error)); /* the first allocates */
      g_assert_no_error (error);
      ks_compute_transfers (f->cpu.c, &dev0, &host0);
      for (int s = 0; s < 5; s++)
        g_assert_true (ks_optimizer_step (opt, feeds, 3, &error));
      g_assert_no_error (error);
      ks_compute_transfers (f->cpu.c, &dev1, &host1);
      g_assert_cmpuint (dev1 - dev0, ==, 5 * 3);
      g_assert_cmpuint (host1 - host0, ==, t == 0 ? 0 : 5);
      ks_optimizer_free (opt);
      ks_model_free (model);
    }
}

/* Settings out of range, and a model that already ran, are refused */
static void
test_refusals (Fixture *f, gconstpointer data)
{
  g_autoptr (KsModel) model = ks_model_new (f->cpu.c);
  KsAmpSettings amp = amp_settings (KS_DTYPE_FLOAT16, 0);
  KsLossScale bad = { NAN, 0, 0 };
  g_autoptr (GError) error = NULL;

  g_assert_false (ks_model_set_amp (model, &amp, &error));
  g_assert_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID);
  g_clear_error (&error);
  amp = amp_settings (KS_DTYPE_INT32, 1);
  g_assert_false (ks_model_set_amp (model, &amp, &error));
  g_clear_error (&error);
  /* bfloat16 does not scale: no loss scale to restore */
  amp = amp_settings (KS_DTYPE_BFLOAT16, 1);
  g_assert_true (ks_model_set_amp (model, &amp, &error));
  g_assert_false (ks_model_set_loss_scale (model, &bad, &error));
  g_clear_error (&error);
  amp = amp_settings (KS_DTYPE_FLOAT16, 1);
  g_assert_true (ks_model_set_amp (model, &amp, &error));
  g_assert_false (ks_model_set_loss_scale (model, &bad, &error));
  g_assert_nonnull (strstr (error->message, "positive finite"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/amp/rounding", test_rounding);
  if (!ks_test_have_openblas ())
    {
      g_test_message ("the openblas plugin was not built");
      return g_test_run ();
    }
#define ADD(path, fn) g_test_add ("/amp/" path, Fixture, NULL, setup, fn, teardown)
  /* the optimizer's step count shows in its learning rate */
  g_test_add ("/amp/loss-scaling", Fixture, "optim.warmup=1000", setup, test_loss_scaling,
              teardown);
  ADD ("convert", test_convert);
  ADD ("gemm", test_gemm);
  ADD ("nonfinite", test_nonfinite);
  ADD ("matmul-gradients", test_matmul_gradients);
  g_test_add ("/amp/precisions-agree", Fixture, "optim.lr=0.02", setup, test_precisions_agree,
              teardown);
  ADD ("checkpoint", test_checkpoint);
  ADD ("checkpoint-ranges", test_checkpoint_ranges);
  ADD ("transfers", test_transfers);
  ADD ("refusals", test_refusals);
  return g_test_run ();
}
