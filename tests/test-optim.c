/* The optim plugin through the optimizer interface: every rule trains a small model,
 * one SGD step is exact, clipping bounds the step, the one clipping function agrees
 * with a norm computed here and clips alike in every mode of the distributed-optimizer
 * base, schedules give the rates they promise, a parameter subset updates only those
 * parameters. */
#include "testutil.h"

#include <math.h>
#include <string.h>

enum { N = 64 };

typedef struct {
  CpuFixture cpu;
  KsModel *model;
  KsExpr *loss;
  float xs[N * 2];
  gint64 ys[N];
  KsFeed feeds[2];
} Fixture;

/* A fresh model: XOR of two signs, which needs the hidden layer. */
static void
build_model (Fixture *f)
{
  const gint64 xshape[] = { N, 2 }, yshape[] = { N };
  g_autoptr (GError) error = NULL;

  ks_model_free (f->model);
  f->model = ks_model_new (f->cpu.c);
  KsExpr *x = ks_model_data (f->model, "x", 2, xshape, KS_DTYPE_FLOAT32, &error);
  KsExpr *y = ks_model_data (f->model, "y", 1, yshape, KS_DTYPE_INT64, &error);
  KsExpr *h = ks_fc (x, 16, KS_UNARY_TANH, "hidden", 5, &error);
  f->loss = ks_softmax_cross_entropy (ks_fc (h, 2, -1, "out", 6, &error), y, &error);
  g_assert_no_error (error);
  g_assert_true (ks_model_init (f->model, &error));
}

static void
setup (Fixture *f, gconstpointer data)
{
  ks_test_cpu_setup (&f->cpu, (const char *const[]) { "openblas.threads=1", NULL });
  for (int i = 0; i < N; i++)
    {
      f->xs[2 * i] = (float) sin (i * 2.1);
      f->xs[2 * i + 1] = (float) cos (i * 1.3);
      f->ys[i] = (f->xs[2 * i] > 0) != (f->xs[2 * i + 1] > 0);
    }
  f->feeds[0] = (KsFeed) { "x", f->xs, sizeof f->xs };
  f->feeds[1] = (KsFeed) { "y", f->ys, sizeof f->ys };
  build_model (f);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  ks_model_free (f->model);
  ks_test_cpu_teardown (&f->cpu);
}

static float
loss_value (Fixture *f)
{
  float v;
  g_assert_true (ks_model_run (f->model, f->feeds, 2, &f->loss, 1, NULL));
  g_assert_true (ks_tensor_to_host (ks_expr_value (f->loss, NULL), &v, sizeof v, NULL));
  return v;
}

static KsOptimizer *
optimizer (Fixture *f, const char *name, const char *const *sets)
{
  g_autoptr (GError) error = NULL;
  for (int i = 0; sets != NULL && sets[i] != NULL; i++)
    g_assert_true (ks_config_set_override (f->cpu.config, sets[i], NULL));
  g_assert_true (ks_config_validate (f->cpu.config, &error));
  KsOptimizer *opt = ks_optimizer_new (f->cpu.registry, f->cpu.config, name, &error);
  g_assert_no_error (error);
  g_assert_true (ks_optimizer_minimize (opt, f->model, f->loss, NULL, 0, NULL, &error));
  return opt;
}

#define SETS(...) ((const char *const[]) { __VA_ARGS__, NULL })

static void
test_rules_train (Fixture *f, gconstpointer data)
{
  const char *rules[] = { "sgd", "momentum", "adagrad", "adam", "adamw" };
  const char *lrs[] = { "optim.lr=0.5", "optim.lr=0.1", "optim.lr=0.1", "optim.lr=0.02",
                        "optim.lr=0.02" };
  for (guint r = 0; r < G_N_ELEMENTS (rules); r++)
    {
      g_autoptr (GError) error = NULL;
      build_model (f);
      g_autoptr (KsOptimizer) opt = optimizer (f, rules[r], SETS (lrs[r], "optim.weight_decay=1e-4"));
      float before = loss_value (f);
      for (int step = 0; step < 300; step++)
        g_assert_true (ks_optimizer_step (opt, f->feeds, 2, &error));
      float after = loss_value (f);
      g_test_message ("%s: loss %.4f -> %.4f", rules[r], before, after);
      if (!(after < before / 3))
        g_error ("%s did not train: loss %.4f -> %.4f", rules[r], before, after);
    }
}

/* One SGD step: p' = p - lr * g exactly, with the gradient of the step's own run. */
static void
test_sgd_step_exact (Fixture *f, gconstpointer data)
{
  g_autoptr (KsOptimizer) opt = optimizer (f, "sgd", SETS ("optim.lr=0.25"));
  KsArena *params = ks_model_parameters (f->model), *grads = ks_model_gradients (f->model);
  gsize n = ks_arena_numel (params);
  g_autofree float *before = g_memdup2 (ks_arena_data (params), n * sizeof (float));

  g_assert_true (ks_optimizer_step (opt, f->feeds, 2, NULL));
  float *after = ks_arena_data (params), *g = ks_arena_data (grads);
  gsize moved = 0;
  for (gsize i = 0; i < n; i++)
    {
      g_assert_cmpfloat_with_epsilon (after[i], before[i] - 0.25f * g[i], 1e-6);
      moved += after[i] != before[i];
    }
  g_assert_cmpuint (moved, >, n / 2);
}

/* With clipping the whole step has norm lr * clip_norm. */
static void
test_clip_norm (Fixture *f, gconstpointer data)
{
  g_autoptr (KsOptimizer) opt = optimizer (f, "sgd", SETS ("optim.lr=1", "optim.clip_norm=0.001"));
  KsArena *params = ks_model_parameters (f->model);
  gsize n = ks_arena_numel (params);
  g_autofree float *before = g_memdup2 (ks_arena_data (params), n * sizeof (float));
  double step2 = 0;

  g_assert_true (ks_optimizer_step (opt, f->feeds, 2, NULL));
  for (gsize i = 0; i < n; i++)
    step2 += pow (ks_arena_data (params)[i] - before[i], 2);
  g_assert_cmpfloat_with_epsilon (sqrt (step2), 0.001, 1e-5);
}

static void
assert_rates (Fixture *f, KsOptimizer *opt, const double *want, int n)
{
  for (int i = 0; i < n; i++)
    {
      g_assert_cmpfloat_with_epsilon (ks_optimizer_learning_rate (opt), want[i], 1e-9);
      g_assert_true (ks_optimizer_step (opt, f->feeds, 2, NULL));
    }
}

static void
test_schedules (Fixture *f, gconstpointer data)
{
  {
    g_autoptr (KsOptimizer) opt = optimizer (f, "sgd", SETS ("optim.lr=0.1", "optim.schedule=cosine",
                                                             "optim.warmup=2",
                                                             "optim.total_steps=6",
                                                             "optim.min_lr=0.02"));
    /* warmup 0.05, 0.1; then cosine over 4 steps from 0.1 to 0.02 */
    const double c = 0.02, span = 0.08;
    const double want[] = { 0.05, 0.1, c + span * 0.5 * (1 + cos (G_PI * 0.25)),
                            c + span * 0.5, c + span * 0.5 * (1 + cos (G_PI * 0.75)), c, c };
    assert_rates (f, opt, want, G_N_ELEMENTS (want));
  }
  build_model (f);
  {
    g_autoptr (KsOptimizer) opt = optimizer (f, "sgd", SETS ("optim.schedule=step",
                                                             "optim.warmup=0",
                                                             "optim.step_size=2",
                                                             "optim.gamma=0.5",
                                                             "optim.lr=0.4"));
    const double want[] = { 0.4, 0.4, 0.2, 0.2, 0.1 };
    assert_rates (f, opt, want, G_N_ELEMENTS (want));
  }
}

/* Minimizing over a subset updates exactly those parameters. */
static void
test_parameter_subset (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_assert_true (ks_config_set_override (f->cpu.config, "optim.lr=0.1", NULL));
  g_autoptr (KsOptimizer) opt = ks_optimizer_new (f->cpu.registry, f->cpu.config, "adam", &error);
  KsArena *params = ks_model_parameters (f->model);
  gsize n = ks_arena_numel (params);
  g_autofree float *before = g_memdup2 (ks_arena_data (params), n * sizeof (float));
  const char *const no_grad[] = { "hidden.w", "hidden.b", NULL };

  g_assert_true (ks_optimizer_minimize (opt, f->model, f->loss, NULL, 0, no_grad, &error));
  g_assert_cmpuint (ks_optimizer_pairs (opt)->len, ==, 2);
  g_assert_true (ks_optimizer_step (opt, f->feeds, 2, &error));
  for (gsize t = 0; t < ks_arena_count (params); t++)
    {
      const char *name;
      gsize offset;
      const KsTensor *v = ks_arena_tensor_at (params, t, &name, &offset);
      gboolean frozen = g_str_has_prefix (name, "hidden.");
      gboolean changed = memcmp (before + offset, ks_arena_data (params) + offset,
                                 v->numel * sizeof (float)) != 0;
      g_assert_true (changed != frozen);
    }
}

/* The one clipping function against a norm computed here, in double on the host. */
static void
test_clip_function (Fixture *f, gconstpointer data)
{
  enum { M = 1000 };
  g_autoptr (GError) error = NULL;
  float host[M], out[M];
  double squares = 0;
  float *dev = ks_compute_alloc (f->cpu.c, sizeof host, &error);

  for (int i = 0; i < M; i++)
    {
      host[i] = (float) sin (i * 0.37) * (1 + i % 7);
      squares += (double) host[i] * host[i];
    }
  double norm = sqrt (squares);
  g_assert_nonnull (dev);
  /* over the bound: scaled to it */
  g_assert_true (ks_compute_copy_to_device (f->cpu.c, dev, host, sizeof host, &error));
  g_assert_true (ks_clip_by_global_norm (f->cpu.c, dev, M, squares, norm / 4, &error));
  g_assert_true (ks_compute_copy_to_host (f->cpu.c, out, dev, sizeof out, &error));
  double clipped = 0;
  for (int i = 0; i < M; i++)
    {
      g_assert_cmpfloat_with_epsilon (out[i], host[i] / 4.0, 1e-6 * fabs (host[i]) + 1e-12);
      clipped += (double) out[i] * out[i];
    }
  g_assert_cmpfloat_with_epsilon (sqrt (clipped), norm / 4, 1e-5 * norm);
  /* at or under it: not a bit changes */
  g_assert_true (ks_compute_copy_to_device (f->cpu.c, dev, host, sizeof host, &error));
  g_assert_true (ks_clip_by_global_norm (f->cpu.c, dev, M, squares, norm, &error));
  g_assert_true (ks_compute_copy_to_host (f->cpu.c, out, dev, sizeof out, &error));
  g_assert_cmpmem (out, sizeof out, host, sizeof host);
  g_assert_no_error (error);
  ks_compute_free_memory (f->cpu.c, dev);
}

/* Test modes for the base (dist-optimizer.h), each like one of the real ones. */
typedef struct {
  double factor;       /* the exchange scales the gradients (a sum over workers) */
  gboolean dense_only; /* the update takes the "out" layer's pairs only (pslib allreduce) */
  gboolean elsewhere;  /* no update here (parameter servers) */
  GArray *kept;        /* the narrowed pairs */
  int exchanges, after;
} TestMode;

static gboolean
test_exchange (void *p, KsModel *model, const KsParamGrad **pairs, gsize *n_pairs,
               gboolean *update, GError **error)
{
  TestMode *m = p;
  KsArena *grads = ks_model_gradients (model);
  m->exchanges++;
  if (m->factor != 1
      && !ks_compute_axpby (ks_model_device (model), (float) m->factor, ks_arena_data (grads), 0,
                            ks_arena_data (grads), ks_arena_numel (grads), error))
    return FALSE;
  if (m->dense_only)
    {
      g_array_set_size (m->kept, 0);
      for (gsize i = 0; i < *n_pairs; i++)
        if (g_str_has_prefix (ks_expr_name ((*pairs)[i].param), "out."))
          g_array_append_val (m->kept, (*pairs)[i]);
      *pairs = (const KsParamGrad *) m->kept->data;
      *n_pairs = m->kept->len;
    }
  *update = !m->elsewhere;
  return TRUE;
}

static gboolean
test_after_update (void *p, KsModel *model, GError **error)
{
  ((TestMode *) p)->after++;
  return TRUE;
}

static const KsDistModeOps test_mode_ops = {
  .size = sizeof (KsDistModeOps),
  .exchange = test_exchange,
  .after_update = test_after_update,
};

/* One clipped SGD step from the same start, the optimizer alone or in the base with
 * `mode` (NULL: alone); the parameters after it. */
static float *
clipped_step (Fixture *f, TestMode *mode)
{
  g_autoptr (GError) error = NULL;
  build_model (f);
  KsOptimizer *sgd = ks_optimizer_new (f->cpu.registry, f->cpu.config, "sgd", &error);
  g_assert_no_error (error);
  g_autoptr (KsOptimizer) opt = mode != NULL ? ks_optimizer_wrap (sgd, &test_mode_ops, mode) : sgd;
  g_assert_true (ks_optimizer_minimize (opt, f->model, f->loss, NULL, 0, NULL, &error));
  g_assert_true (ks_optimizer_step (opt, f->feeds, 2, &error));
  g_assert_no_error (error);
  KsArena *params = ks_model_parameters (f->model);
  return g_memdup2 (ks_arena_data (params), ks_arena_numel (params) * sizeof (float));
}

/* Clipping is the base's, after the exchange, the same in every mode: the optimizer
 * alone, an exchange that keeps the gradients (an average of equal ones), one that sums
 * them over 4 workers (clipped after it, the step is the same: had it clipped before,
 * the step would be 4 times longer), one that updates a subset here (its parameters
 * move as with every pair: the norm is over the whole model) and one that updates
 * elsewhere (nothing moves here). */
static void
test_clip_every_mode (Fixture *f, gconstpointer data)
{
  g_assert_true (ks_config_set_override (f->cpu.config, "optim.lr=1", NULL));
  g_assert_true (ks_config_set_override (f->cpu.config, "optim.clip_norm=0.001", NULL));
  g_assert_true (ks_config_validate (f->cpu.config, NULL));
  build_model (f);
  gsize n = ks_arena_numel (ks_model_parameters (f->model));
  g_autofree float *start = g_memdup2 (ks_arena_data (ks_model_parameters (f->model)),
                                       n * sizeof (float));
  g_autofree float *alone = clipped_step (f, NULL);
  double step2 = 0;
  for (gsize i = 0; i < n; i++)
    step2 += pow (alone[i] - start[i], 2);
  g_assert_cmpfloat_with_epsilon (sqrt (step2), 0.001, 1e-5); /* it did clip */

  TestMode same = { 1 }, summed = { 4 }, servers = { 1, FALSE, TRUE };
  TestMode subset = { 1, TRUE, FALSE, g_array_new (FALSE, FALSE, sizeof (KsParamGrad)) };
  g_autofree float *with_same = clipped_step (f, &same);
  g_autofree float *with_sum = clipped_step (f, &summed);
  g_autofree float *with_subset = clipped_step (f, &subset);
  g_autofree float *with_servers = clipped_step (f, &servers);
  g_assert_cmpmem (with_same, n * sizeof (float), alone, n * sizeof (float));
  g_assert_cmpmem (with_sum, n * sizeof (float), alone, n * sizeof (float));
  g_assert_cmpmem (with_servers, n * sizeof (float), start, n * sizeof (float));
  KsArena *params = ks_model_parameters (f->model); /* each step's model has this layout */
  for (gsize t = 0; t < ks_arena_count (params); t++)
    {
      const char *name;
      gsize offset;
      const KsTensor *v = ks_arena_tensor_at (params, t, &name, &offset);
      gsize bytes = v->numel * sizeof (float);
      g_assert_cmpmem (with_subset + offset, bytes,
                       (g_str_has_prefix (name, "out.") ? alone : start) + offset, bytes);
    }
  g_assert_cmpint (same.exchanges + summed.exchanges + subset.exchanges + servers.exchanges, ==, 4);
  g_assert_cmpint (same.after + summed.after + subset.after + servers.after, ==, 4);
  g_array_unref (subset.kept);
}

static void
test_errors (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_assert_true (ks_config_set_override (f->cpu.config, "optim.schedule=cosine", NULL));
  g_assert_true (ks_config_set_override (f->cpu.config, "optim.warmup=5", NULL));
  g_assert_null (ks_optimizer_new (f->cpu.registry, f->cpu.config, "adam", &error));
  g_assert_cmpstr (error->message, ==, "optimizer 'adam' (plugin optim) could not be created: "
                                       "[optim] schedule = cosine needs total_steps (0) greater "
                                       "than warmup (5)");
  g_clear_error (&error);
  g_assert_true (ks_config_set_override (f->cpu.config, "optim.schedule=constant", NULL));
  g_autoptr (KsOptimizer) opt = ks_optimizer_new (f->cpu.registry, f->cpu.config, "adam", &error);
  g_assert_false (ks_optimizer_step (opt, f->feeds, 2, &error));
  g_assert_cmpstr (error->message, ==, "optimizer adam: call ks_optimizer_minimize before "
                                       "stepping");
  g_clear_error (&error);
  g_assert_null (ks_optimizer_new (f->cpu.registry, f->cpu.config, "lion", &error));
  g_assert_true (g_str_has_prefix (error->message, "no optimizer implementation named 'lion'; "
                                                   "available: sgd (plugin optim), "));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (!ks_test_have_openblas ())
    return g_test_run ();
#define ADD(name, fn) g_test_add ("/optim/" name, Fixture, NULL, setup, fn, teardown)
  ADD ("rules-train", test_rules_train);
  ADD ("sgd-step-exact", test_sgd_step_exact);
  ADD ("clip-norm", test_clip_norm);
  ADD ("clip-function", test_clip_function);
  ADD ("clip-every-mode", test_clip_every_mode);
  ADD ("schedules", test_schedules);
  ADD ("parameter-subset", test_parameter_subset);
  ADD ("errors", test_errors);
  return g_test_run ();
}
