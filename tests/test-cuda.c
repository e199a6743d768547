/* The CUDA backend's training kernels against the CPU backend's, which test-kernels
 * checks against double-precision references and finite differences: the same random
 * inputs through both, outputs compared element by element. Then a small GPT trained on
 * both (gradients, SGD and AdamW steps), and twice on the GPU, bitwise. Skipped without
 * a GPU. */
#include "testutil.h"
#include "../plugins/cuda/local-device.h"
#include <ksdist/tasks.h>

#include <math.h>
#include <stdarg.h>
#include <string.h>

typedef struct {
  KsConfig *config;
  KsRegistry *registry;
  KsCompute *cpu, *gpu;
  GRand *rng;
} Fixture;

static char *skip_reason; /* why the GPU cases are skipped, or NULL */

static KsRegistry *
scan_build_plugins (KsConfig *config)
{
  const char *root = g_getenv ("KS_BUILD_PLUGINS");
  g_autofree char *path = g_strdup_printf ("%s/openblas/.libs:%s/cuda/.libs:%s/optim/.libs",
                                           root, root, root);
  ks_test_clear_env ();
  return ks_test_scan (config, path);
}

static void
setup (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  f->config = ks_config_new ();
  g_assert_true (ks_config_set_override (f->config, "openblas.threads=1", NULL));
  f->registry = scan_build_plugins (f->config);
  g_assert_true (ks_config_validate (f->config, &error));
  f->cpu = ks_compute_new (f->registry, f->config, "openblas", &error);
  g_assert_no_error (error);
  f->gpu = ks_compute_new (f->registry, f->config, "cuda", &error);
  g_assert_no_error (error);
  f->rng = g_rand_new_with_seed (20261122);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  g_rand_free (f->rng);
  ks_compute_free (f->gpu);
  ks_compute_free (f->cpu);
  ks_registry_free (f->registry);
  ks_config_free (f->config);
}

/* A device copy of `nbytes` of host memory; freed by the caller with dev_free. */
static void *
to_dev (Fixture *f, const void *host, gsize nbytes)
{
  g_autoptr (GError) error = NULL;
  void *d = ks_compute_alloc (f->gpu, nbytes, &error);
  g_assert_no_error (error);
  if (host != NULL)
    g_assert_true (ks_compute_copy_to_device (f->gpu, d, host, nbytes, &error));
  else
    g_assert_true (ks_compute_fill_zero (f->gpu, d, nbytes, &error));
  return d;
}

static void
dev_free (Fixture *f, void *d)
{
  ks_compute_free_memory (f->gpu, d);
}

/* Frees each device pointer up to the NULL. */
static void
dev_free_all (Fixture *f, ...)
{
  va_list ap;
  va_start (ap, f);
  for (void *d = va_arg (ap, void *); d != NULL; d = va_arg (ap, void *))
    dev_free (f, d);
  va_end (ap);
}

/* Asserts the device floats equal the host floats within tol * (1 + |want|). */
static void
assert_same (Fixture *f, const char *what, const float *dev, const float *want, gsize n,
             double tol)
{
  g_autofree float *got = g_new (float, n);
  g_autoptr (GError) error = NULL;

  g_assert_true (ks_compute_copy_to_host (f->gpu, got, dev, n * sizeof (float), &error));
  for (gsize i = 0; i < n; i++)
    if (!(fabs (got[i] - want[i]) <= tol * (1 + fabs (want[i]))))
      g_error ("%s[%" G_GSIZE_FORMAT "]: GPU %.8g, CPU %.8g (tolerance %g)", what, i, got[i],
               want[i], tol);
}

/* rows x cols wider than a block (256 threads), so the strided loops are exercised */
enum { ROWS = 37, COLS = 300, N = ROWS * COLS };

static void
test_elementwise (Fixture *f, gconstpointer data)
{
  g_autofree float *a = ks_test_random_floats (f->rng, N, -3, 3), *b = ks_test_random_floats (f->rng, N, 0.5, 2);
  g_autofree float *dy = ks_test_random_floats (f->rng, N, -1, 1), *want = g_new (float, N);
  g_autofree float *want_dx = g_new (float, N);
  float *da = to_dev (f, a, N * 4), *db = to_dev (f, b, N * 4), *ddy = to_dev (f, dy, N * 4);
  float *out = to_dev (f, NULL, N * 4), *dx = to_dev (f, NULL, N * 4);
  g_autoptr (GError) error = NULL;

  for (int op = KS_UNARY_RELU; op <= KS_UNARY_SQRT; op++)
    {
      gboolean positive = op == KS_UNARY_LOG || op == KS_UNARY_SQRT;
      const float *x = positive ? b : a;
      float *dev_x = positive ? db : da;
      g_autofree char *what = g_strdup_printf ("unary %d", op);
      g_assert_true (ks_compute_unary (f->cpu, op, x, want, N, NULL));
      g_assert_true (ks_compute_unary (f->gpu, op, dev_x, out, N, &error));
      assert_same (f, what, out, want, N, 1e-6);
      for (int with_y = 0; with_y < 2; with_y++)
        {
          g_assert_true (ks_compute_unary_backward (f->cpu, op, x, with_y ? want : NULL, dy,
                                                    want_dx, N, NULL));
          g_assert_true (ks_compute_unary_backward (f->gpu, op, dev_x, with_y ? out : NULL, ddy,
                                                    dx, N, &error));
          assert_same (f, what, dx, want_dx, N, 1e-5);
        }
    }
  for (int op = KS_BINARY_ADD; op <= KS_BINARY_DIV; op++)
    for (gsize b_rows = 1; b_rows <= ROWS; b_rows += ROWS - 1)
      {
        g_assert_true (ks_compute_binary (f->cpu, op, a, b, want, ROWS, COLS, b_rows, NULL));
        g_assert_true (ks_compute_binary (f->gpu, op, da, db, out, ROWS, COLS, b_rows, &error));
        assert_same (f, "binary", out, want, N, 1e-6);
      }
  g_assert_true (ks_compute_axpby (f->cpu, 0.5f, a, -2, want, N, NULL));
  g_assert_true (ks_compute_axpby (f->gpu, 0.5f, da, -2, out, N, &error));
  assert_same (f, "axpby", out, want, N, 1e-6);
  g_assert_no_error (error);

  g_assert_false (ks_compute_unary (f->gpu, 99, da, out, N, &error));
  g_assert_cmpstr (error->message, ==, "cuda: unary: unknown operation 99");
  dev_free_all (f, da, db, ddy, out, dx, NULL);
}

/* Transpose and dropout masks: exactly the CPU's (masks bitwise, from the shared hash). */
static void
test_transpose_dropout (Fixture *f, gconstpointer data)
{
  const gint64 shape[] = { 3, 7, 5, 11 };
  const int perm[] = { 2, 0, 3, 1 };
  gsize n = 3 * 7 * 5 * 11;
  g_autofree float *x = ks_test_random_floats (f->rng, n, -1, 1), *want = g_new (float, n);
  g_autofree float *mask = g_new (float, N);
  float *dx = to_dev (f, x, n * 4), *out = to_dev (f, NULL, n * 4), *dmask = to_dev (f, NULL, N * 4);
  g_autoptr (GError) error = NULL;

  g_assert_true (ks_compute_transpose (f->cpu, x, want, 4, shape, perm, NULL));
  g_assert_true (ks_compute_transpose (f->gpu, dx, out, 4, shape, perm, &error));
  g_assert_no_error (error);
  assert_same (f, "transpose", out, want, n, 0);
  g_assert_true (ks_compute_dropout_mask (f->cpu, mask, N, 0.25f, 1234567, NULL));
  g_assert_true (ks_compute_dropout_mask (f->gpu, dmask, N, 0.25f, 1234567, &error));
  g_assert_no_error (error);
  assert_same (f, "dropout_mask", dmask, mask, N, 0);
  dev_free_all (f, dx, out, dmask, NULL);
}

static void
test_reduce (Fixture *f, gconstpointer data)
{
  /* a narrow and a wide matrix: the two ways of reducing over rows */
  const gsize shapes[][2] = { { ROWS, COLS }, { 5, 1500 } };
  for (guint s = 0; s < G_N_ELEMENTS (shapes); s++)
    {
      gsize rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
      g_autofree float *x = ks_test_random_floats (f->rng, n, 0.9, 1.1), *want = g_new (float, MAX (rows, cols));
      float *dx = to_dev (f, x, n * 4), *out = to_dev (f, NULL, MAX (rows, cols) * 4);
      for (int op = KS_REDUCE_SUM; op <= KS_REDUCE_PROD; op++)
        for (int axis = 0; axis < 2; axis++)
          {
            g_assert_true (ks_compute_reduce (f->cpu, op, x, want, rows, cols, axis, NULL));
            g_assert_true (ks_compute_reduce (f->gpu, op, dx, out, rows, cols, axis, NULL));
            assert_same (f, ks_reduce_op_name (op), out, want, axis == 0 ? cols : rows, 1e-5);
          }
      dev_free (f, dx);
      dev_free (f, out);
    }
}

static void
test_softmax_layer_norm (Fixture *f, gconstpointer data)
{
  g_autofree float *x = ks_test_random_floats (f->rng, N, -4, 4), *dy = ks_test_random_floats (f->rng, N, -1, 1);
  g_autofree float *gamma = ks_test_random_floats (f->rng, COLS, 0.5, 1.5);
  g_autofree float *beta = ks_test_random_floats (f->rng, COLS, -0.5, 0.5);
  g_autofree float *y = g_new (float, N), *dx = g_new (float, N);
  g_autofree float *dgamma = ks_test_random_floats (f->rng, COLS, -1, 1), *dbeta = ks_test_random_floats (f->rng, COLS, -1, 1);
  float mean[ROWS], rstd[ROWS];
  float *d_x = to_dev (f, x, N * 4), *d_dy = to_dev (f, dy, N * 4), *d_y = to_dev (f, NULL, N * 4);
  float *d_dx = to_dev (f, NULL, N * 4), *d_gamma = to_dev (f, gamma, COLS * 4);
  float *d_beta = to_dev (f, beta, COLS * 4), *d_dgamma = to_dev (f, dgamma, COLS * 4);
  float *d_dbeta = to_dev (f, dbeta, COLS * 4);
  float *d_mean = to_dev (f, NULL, sizeof mean), *d_rstd = to_dev (f, NULL, sizeof rstd);

  for (int log_softmax = 0; log_softmax < 2; log_softmax++)
    {
      g_assert_true (ks_compute_softmax (f->cpu, x, y, ROWS, COLS, log_softmax, NULL));
      g_assert_true (ks_compute_softmax (f->gpu, d_x, d_y, ROWS, COLS, log_softmax, NULL));
      assert_same (f, "softmax", d_y, y, N, 1e-5);
      g_assert_true (ks_compute_softmax_backward (f->cpu, y, dy, dx, ROWS, COLS, log_softmax, NULL));
      g_assert_true (ks_compute_softmax_backward (f->gpu, d_y, d_dy, d_dx, ROWS, COLS, log_softmax,
                                                  NULL));
      assert_same (f, "softmax_backward", d_dx, dx, N, 1e-5);
    }
  g_assert_true (ks_compute_layer_norm (f->cpu, x, gamma, beta, y, mean, rstd, ROWS, COLS, 1e-5f,
                                        NULL));
  g_assert_true (ks_compute_layer_norm (f->gpu, d_x, d_gamma, d_beta, d_y, d_mean, d_rstd, ROWS,
                                        COLS, 1e-5f, NULL));
  assert_same (f, "layer_norm", d_y, y, N, 1e-5);
  assert_same (f, "mean", d_mean, mean, ROWS, 1e-6);
  assert_same (f, "rstd", d_rstd, rstd, ROWS, 1e-6);
  /* parameter gradients are added to what is there */
  g_assert_true (ks_compute_layer_norm_backward (f->cpu, x, gamma, mean, rstd, dy, dx, dgamma,
                                                 dbeta, ROWS, COLS, NULL));
  g_assert_true (ks_compute_layer_norm_backward (f->gpu, d_x, d_gamma, d_mean, d_rstd, d_dy, d_dx,
                                                 d_dgamma, d_dbeta, ROWS, COLS, NULL));
  assert_same (f, "layer_norm dx", d_dx, dx, N, 1e-4);
  assert_same (f, "layer_norm dgamma", d_dgamma, dgamma, COLS, 1e-4);
  assert_same (f, "layer_norm dbeta", d_dbeta, dbeta, COLS, 1e-4);

  /* in place: y = softmax (y) */
  g_assert_true (ks_compute_softmax (f->cpu, x, y, ROWS, COLS, FALSE, NULL));
  g_assert_true (ks_compute_softmax (f->gpu, d_x, d_x, ROWS, COLS, FALSE, NULL));
  assert_same (f, "softmax in place", d_x, y, N, 1e-5);
  /* causal attention's rows: the masked scores are -inf */
  for (int r = 0; r < ROWS; r++)
    for (int j = r + 1; j < COLS; j++)
      x[r * COLS + j] = -INFINITY;
  g_assert_true (ks_compute_copy_to_device (f->gpu, d_x, x, N * 4, NULL));
  g_assert_true (ks_compute_softmax (f->cpu, x, y, ROWS, COLS, FALSE, NULL));
  g_assert_true (ks_compute_softmax (f->gpu, d_x, d_y, ROWS, COLS, FALSE, NULL));
  assert_same (f, "softmax masked", d_y, y, N, 1e-5);
  dev_free_all (f, d_x, d_dy, d_y, d_dx, d_gamma, d_beta, d_dgamma, d_dbeta, d_mean, d_rstd, NULL);
}

static void
test_embedding_cross_entropy (Fixture *f, gconstpointer data)
{
  enum { VOCAB = 65, DIM = 40, IDS = 300 };
  g_autofree float *table = ks_test_random_floats (f->rng, VOCAB * DIM, -1, 1);
  g_autofree float *dout = ks_test_random_floats (f->rng, IDS * DIM, -1, 1), *out = g_new (float, IDS * DIM);
  g_autofree float *dtable = g_new0 (float, VOCAB * DIM), *losses = g_new (float, IDS);
  g_autofree float *logits = ks_test_random_floats (f->rng, IDS * VOCAB, -3, 3);
  g_autofree float *dlogits = g_new (float, IDS * VOCAB);
  gint64 ids[IDS];
  g_autoptr (GError) error = NULL;

  for (gsize i = 0; i < IDS; i++) /* many repeats: the scatter-add must sum them all */
    ids[i] = g_rand_int_range (f->rng, 0, VOCAB / 2);
  float *d_table = to_dev (f, table, sizeof (float) * VOCAB * DIM);
  float *d_dout = to_dev (f, dout, sizeof (float) * IDS * DIM);
  float *d_out = to_dev (f, NULL, sizeof (float) * IDS * DIM);
  float *d_dtable = to_dev (f, NULL, sizeof (float) * VOCAB * DIM);
  float *d_logits = to_dev (f, logits, sizeof (float) * IDS * VOCAB);
  float *d_dlogits = to_dev (f, NULL, sizeof (float) * IDS * VOCAB);
  float *d_losses = to_dev (f, NULL, sizeof (float) * IDS);
  gint64 *d_ids = to_dev (f, ids, sizeof ids);

  g_assert_true (ks_compute_embedding (f->cpu, table, VOCAB, ids, out, IDS, DIM, NULL));
  g_assert_true (ks_compute_embedding (f->gpu, d_table, VOCAB, d_ids, d_out, IDS, DIM, NULL));
  assert_same (f, "embedding", d_out, out, IDS * DIM, 0);
  g_assert_true (ks_compute_embedding_backward (f->cpu, dout, ids, dtable, VOCAB, IDS, DIM, NULL));
  g_assert_true (ks_compute_embedding_backward (f->gpu, d_dout, d_ids, d_dtable, VOCAB, IDS, DIM,
                                                NULL));
  assert_same (f, "embedding_backward", d_dtable, dtable, VOCAB * DIM, 1e-6);
  g_assert_true (ks_compute_cross_entropy (f->cpu, logits, ids, losses, dlogits, IDS, VOCAB, NULL));
  g_assert_true (ks_compute_cross_entropy (f->gpu, d_logits, d_ids, d_losses, d_dlogits, IDS,
                                           VOCAB, NULL));
  assert_same (f, "cross_entropy", d_losses, losses, IDS, 1e-6);
  assert_same (f, "cross_entropy dlogits", d_dlogits, dlogits, IDS * VOCAB, 1e-6);

  /* a bad id or label: the CPU's message, and nothing written */
  ids[7] = VOCAB;
  ids[200] = -1;
  g_assert_true (ks_compute_copy_to_device (f->gpu, d_ids, ids, sizeof ids, NULL));
  g_assert_true (ks_compute_fill_zero (f->gpu, d_out, sizeof (float) * IDS * DIM, NULL));
  g_assert_false (ks_compute_embedding (f->gpu, d_table, VOCAB, d_ids, d_out, IDS, DIM, &error));
  g_assert_cmpstr (error->message, ==, "embedding: ids[7] = 65 is outside the table's 65 rows");
  memset (out, 0, sizeof (float) * IDS * DIM);
  assert_same (f, "embedding after a bad id", d_out, out, IDS * DIM, 0);
  g_clear_error (&error);
  g_assert_false (ks_compute_cross_entropy (f->gpu, d_logits, d_ids, d_losses, NULL, IDS, VOCAB,
                                            &error));
  g_assert_cmpstr (error->message, ==, "cross_entropy: labels[7] = 65 is not a class in [0, 65)");
  dev_free_all (f, d_table, d_dout, d_out, d_dtable, d_logits, d_dlogits, d_losses, d_ids, NULL);
}

static void
test_update (Fixture *f, gconstpointer data)
{
  enum { P = 5000 };
  for (int rule = KS_UPDATE_SGD; rule <= KS_UPDATE_ADAMW; rule++)
    {
      g_autofree float *p = ks_test_random_floats (f->rng, P, -1, 1);
      g_autofree float *s1 = g_new0 (float, P), *s2 = g_new0 (float, P);
      float *d_p = to_dev (f, p, P * 4), *d_s1 = to_dev (f, NULL, P * 4);
      float *d_s2 = to_dev (f, NULL, P * 4);
      KsUpdateArgs a = { sizeof a, rule, 0.05f, 0.9f, 0.9f, 0.999f, 1e-8f, 0.01f, TRUE, 0 };
      g_autofree char *what = g_strdup_printf ("update rule %d", rule);

      for (a.step = 1; a.step <= 3; a.step++)
        {
          g_autofree float *g = ks_test_random_floats (f->rng, P, -1, 1);
          float *d_g = to_dev (f, g, P * 4);
          g_assert_true (ks_compute_update (f->cpu, &a, p, g, s1, s2, P, NULL));
          g_assert_true (ks_compute_update (f->gpu, &a, d_p, d_g, d_s1, d_s2, P, NULL));
          dev_free (f, d_g);
        }
      assert_same (f, what, d_p, p, P, 1e-6);
      assert_same (f, what, d_s1, s1, P, 1e-6);
      dev_free_all (f, d_p, d_s1, d_s2, NULL);
    }
}

/* ---- a GPT step on both backends ---- */

typedef struct {
  KsModel *model;
  KsOptimizer *opt;
  KsExpr *loss;
} Gpt;

enum { B = 4, T = 16, V = 29 };

/* A small GPT trained `steps` steps with `optimizer` on a fixed pattern. */
static void
gpt_train (Fixture *f, KsCompute *c, const char *optimizer, int steps, Gpt *g)
{
  KsGptShape shape = { V, T, 2, 2, 32, B, 7 };
  gint64 tokens[B * T], positions[B * T], targets[B * T];
  KsFeed feeds[] = { { "tokens", tokens, sizeof tokens }, { "positions", positions, sizeof positions },
                     { "targets", targets, sizeof targets } };
  KsExpr *logits;
  g_autoptr (GError) error = NULL;

  g->model = ks_model_new (c);
  g_assert_true (ks_gpt_build (g->model, &shape, &logits, &g->loss, &error));
  g_assert_true (ks_model_init (g->model, &error));
  g->opt = ks_optimizer_new (f->registry, f->config, optimizer, &error);
  g_assert_no_error (error);
  g_assert_true (ks_optimizer_minimize (g->opt, g->model, g->loss, NULL, 0, NULL, &error));
  for (int s = 0; s < steps; s++)
    {
      for (gsize i = 0; i < B * T; i++)
        {
          tokens[i] = (i * 7 + s * 3) % V;
          positions[i] = i % T;
          targets[i] = (tokens[i] * 5 + 1) % V;
        }
      g_assert_true (ks_optimizer_step (g->opt, feeds, 3, &error));
      g_assert_no_error (error);
    }
}

static void
gpt_free (Gpt *g)
{
  ks_optimizer_free (g->opt);
  ks_model_free (g->model);
}

static float *
arena_to_host (KsCompute *c, KsArena *arena)
{
  float *h = g_new (float, ks_arena_numel (arena));
  g_assert_true (ks_compute_copy_to_host (c, h, ks_arena_data (arena),
                                          ks_arena_numel (arena) * sizeof (float), NULL));
  return h;
}

static float
loss_on_host (Gpt *g)
{
  float v;
  g_assert_true (ks_tensor_to_host (ks_expr_value (g->loss, NULL), &v, sizeof v, NULL));
  return v;
}

/* The first step's gradients (at equal parameters), then parameters after SGD steps,
 * which are linear in the gradients. (Adam's first steps move each parameter by about
 * lr times the sign of its gradient, so a gradient that is zero up to rounding may move
 * either way: after Adam only the losses are compared.) */
static void
test_gpt_step (Fixture *f, gconstpointer data)
{
  Gpt cpu, gpu;

  gpt_train (f, f->cpu, "sgd", 1, &cpu);
  gpt_train (f, f->gpu, "sgd", 1, &gpu);
  gsize n = ks_arena_numel (ks_model_parameters (cpu.model));
  g_assert_cmpuint (ks_arena_numel (ks_model_parameters (gpu.model)), ==, n);
  g_autofree float *cpu_grads = arena_to_host (f->cpu, ks_model_gradients (cpu.model));
  assert_same (f, "GPT gradients", ks_arena_data (ks_model_gradients (gpu.model)), cpu_grads, n,
               1e-4);
  gpt_free (&cpu);
  gpt_free (&gpu);

  gpt_train (f, f->cpu, "sgd", 10, &cpu);
  gpt_train (f, f->gpu, "sgd", 10, &gpu);
  g_autofree float *cpu_params = arena_to_host (f->cpu, ks_model_parameters (cpu.model));
  assert_same (f, "GPT parameters after 10 SGD steps", ks_arena_data (ks_model_parameters (gpu.model)),
               cpu_params, n, 1e-5);
  g_assert_cmpfloat_with_epsilon (loss_on_host (&gpu), loss_on_host (&cpu), 1e-5);
  gpt_free (&cpu);
  gpt_free (&gpu);
}

/* AdamW: the GPU's loss follows the CPU's and falls; no atomics, so the GPU repeats
 * itself bit for bit. */
static void
test_gpt_adamw (Fixture *f, gconstpointer data)
{
  Gpt cpu, gpu, again;
  const int steps = 20;

  gpt_train (f, f->cpu, "adamw", steps, &cpu);
  gpt_train (f, f->gpu, "adamw", steps, &gpu);
  gpt_train (f, f->gpu, "adamw", steps, &again);
  float cpu_loss = loss_on_host (&cpu), gpu_loss = loss_on_host (&gpu);
  gsize n = ks_arena_numel (ks_model_parameters (gpu.model));
  g_autofree float *a = arena_to_host (f->gpu, ks_model_parameters (gpu.model));
  g_autofree float *b = arena_to_host (f->gpu, ks_model_parameters (again.model));

  g_test_message ("GPT after %d AdamW steps: loss CPU %.6f, GPU %.6f (chance %.3f)", steps,
                  cpu_loss, gpu_loss, log (V));
  g_assert_cmpfloat (fabs (gpu_loss - cpu_loss), <, 1e-3);
  g_assert_cmpfloat (gpu_loss, <, log (V) - 0.1);
  g_assert_cmpmem (a, n * sizeof (float), b, n * sizeof (float));
  gpt_free (&cpu);
  gpt_free (&gpu);
  gpt_free (&again);
}

/* Mixed precision: the same 16-bit patterns as the CPU's rounding, products of 16-bit
 * operands as the CPU's (float32 sums, in another order), and the overflow flag */
static void
test_half (Fixture *f, gconstpointer data)
{
  const int m = 37, n = 45, k = 300;
  g_autofree float *x = ks_test_random_floats (f->rng, N, -7e4, 7e4);
  g_autofree guint16 *cpu16 = g_new (guint16, N), *gpu16 = g_new (guint16, N);
  g_autoptr (GError) error = NULL;

  for (int t = 0; t < 2; t++)
    {
      KsDType dtype = t == 0 ? KS_DTYPE_FLOAT16 : KS_DTYPE_BFLOAT16;
      float *dx = to_dev (f, x, N * sizeof (float));
      guint16 *d16 = to_dev (f, NULL, N * sizeof (guint16));
      g_assert_true (ks_compute_convert (f->cpu, x, KS_DTYPE_FLOAT32, cpu16, dtype, N, &error));
      g_assert_true (ks_compute_convert (f->gpu, dx, KS_DTYPE_FLOAT32, d16, dtype, N, &error));
      g_assert_true (ks_compute_copy_to_host (f->gpu, gpu16, d16, N * sizeof (guint16), &error));
      g_assert_no_error (error);
      g_assert_cmpmem (cpu16, N * sizeof (guint16), gpu16, N * sizeof (guint16));

      g_autofree float *a = ks_test_random_floats (f->rng, m * k, -2, 2);
      g_autofree float *b = ks_test_random_floats (f->rng, k * n, -2, 2);
      g_autofree guint16 *a16 = g_new (guint16, m * k), *b16 = g_new (guint16, k * n);
      g_autofree float *want = g_new0 (float, m * n);
      g_assert_true (ks_compute_convert (f->cpu, a, KS_DTYPE_FLOAT32, a16, dtype, m * k, &error));
      g_assert_true (ks_compute_convert (f->cpu, b, KS_DTYPE_FLOAT32, b16, dtype, k * n, &error));
      g_assert_true (ks_compute_gemm_half (f->cpu, dtype, KS_TRANS_N, KS_TRANS_T, m, n, k, 1,
                                           a16, k, b16, k, 0, want, n, &error));
      void *da = to_dev (f, a16, m * k * 2), *db = to_dev (f, b16, k * n * 2);
      float *dc = to_dev (f, NULL, m * n * sizeof (float));
      g_assert_true (ks_compute_gemm_half (f->gpu, dtype, KS_TRANS_N, KS_TRANS_T, m, n, k, 1,
                                           da, k, db, k, 0, dc, n, &error));
      g_assert_no_error (error);
      assert_same (f, "gemm_half", dc, want, m * n, 1e-4);

      float found = -1, *dfound = to_dev (f, NULL, sizeof (float));
      g_assert_true (ks_compute_find_nonfinite (f->gpu, dx, N, dfound, &error));
      g_assert_true (ks_compute_copy_to_host (f->gpu, &found, dfound, sizeof found, &error));
      g_assert_cmpfloat (found, ==, 0);
      /* float16's overflow is the flag's job: x widened back holds infinities */
      g_assert_true (ks_compute_convert (f->gpu, d16, dtype, dx, KS_DTYPE_FLOAT32, N, &error));
      g_assert_true (ks_compute_find_nonfinite (f->gpu, dx, N, dfound, &error));
      g_assert_true (ks_compute_copy_to_host (f->gpu, &found, dfound, sizeof found, &error));
      g_assert_no_error (error);
      g_assert_cmpfloat (found, ==, t == 0 ? 1 : 0); /* |x| up to 7e4 > 65504 */
      dev_free_all (f, dx, d16, da, db, dc, dfound, NULL);
    }
}

/* Why the GPU cases cannot run here, or NULL. */
static char *
gpu_unusable (void)
{
  g_autofree char *plugin = g_build_filename (g_getenv ("KS_BUILD_PLUGINS"), "cuda", ".libs",
                                              "cuda.so", NULL);
  g_autofree char *openblas = g_build_filename (g_getenv ("KS_BUILD_PLUGINS"), "openblas", ".libs",
                                                "openblas.so", NULL);
  if (!g_file_test (plugin, G_FILE_TEST_EXISTS))
    return g_strdup ("the CUDA plugin was not built (configure found no CUDA toolkit or nvcc)");
  if (!g_file_test (openblas, G_FILE_TEST_EXISTS))
    return g_strdup ("the OpenBLAS plugin, the reference, was not built");

  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = scan_build_plugins (config);
  g_autoptr (GError) error = NULL;
  g_autoptr (KsCompute) gpu = ks_compute_new (registry, config, "cuda", &error);
  if (gpu == NULL)
    return g_strdup_printf ("no usable GPU: %s", error->message);
  return NULL;
}

static void
test_skipped (void)
{
  g_test_skip (skip_reason);
}

/* Which device a rank takes when none is named: its place on its host as each launcher
 * says it, modulo the devices; no GPU needed */
static void
test_local_device (void)
{
  const char *const names[] = { "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID" };
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    g_unsetenv (names[i]);
  g_assert_cmpint (ks_cuda_local_device (4), ==, 0);
  g_setenv ("SLURM_LOCALID", "3", TRUE);
  g_assert_cmpint (ks_cuda_local_device (4), ==, 3);
  g_setenv ("OMPI_COMM_WORLD_LOCAL_RANK", "2", TRUE); /* before srun's */
  g_assert_cmpint (ks_cuda_local_device (4), ==, 2);
  g_setenv ("LOCAL_RANK", "5", TRUE); /* before both; 6 ranks on 4 GPUs share them */
  g_assert_cmpint (ks_cuda_local_device (4), ==, 1);
  g_setenv ("LOCAL_RANK", "x", TRUE); /* not a number: the next launcher's */
  g_assert_cmpint (ks_cuda_local_device (4), ==, 2);
  g_assert_cmpint (ks_cuda_local_device (0), ==, 0);
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    g_unsetenv (names[i]);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cuda/local-device", test_local_device);
  if ((skip_reason = gpu_unusable ()) != NULL)
    {
      g_test_add_func ("/cuda/kernels", test_skipped);
      return g_test_run ();
    }
#define ADD(name, fn) g_test_add ("/cuda/" name, Fixture, NULL, setup, fn, teardown)
  ADD ("elementwise", test_elementwise);
  ADD ("transpose-dropout", test_transpose_dropout);
  ADD ("reduce", test_reduce);
  ADD ("softmax-layer-norm", test_softmax_layer_norm);
  ADD ("embedding-cross-entropy", test_embedding_cross_entropy);
  ADD ("update", test_update);
  ADD ("gpt-step", test_gpt_step);
  ADD ("gpt-adamw", test_gpt_adamw);
  ADD ("half", test_half);
  return g_test_run ();
}
