/* The Model on the CPU backend: gradients of every op against finite differences,
 * pruning, the plan cache, lazy values, the device-binding rule, errors, and an MLP that
 * learns a non-linear task. */
#include "testutil.h"

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


/* A small graph using every op with a gradient:
 * loss = CE (fc2 (gelu (tanh (fc1 (x)) + r)), y) + mean (sigmoid (relu (fc3 (x)))) */
typedef struct {
  KsModel *model;
  KsExpr *x, *y, *r, *loss, *acc;
  float xs[4 * 3];
  gint64 ys[4];
  float rs[4 * 5];
} Net;

static void
build (Fixture *f, Net *n)
{
  const gint64 xshape[] = { 4, 3 }, yshape[] = { 4 }, rshape[] = { 4, 5 };
  g_autoptr (GError) error = NULL;
  KsExpr *h, *logits, *side;

  n->model = ks_model_new (f->c);
  n->x = ks_model_data (n->model, "x", 2, xshape, KS_DTYPE_FLOAT32, &error);
  n->y = ks_model_data (n->model, "y", 1, yshape, KS_DTYPE_INT64, &error);
  n->r = ks_model_data (n->model, "r", 2, rshape, KS_DTYPE_FLOAT32, &error);
  h = ks_fc (n->x, 5, KS_UNARY_TANH, "fc1", 11, &error);
  h = ks_gelu (ks_add (h, n->r, &error), &error); /* add of two full tensors */
  logits = ks_fc (h, 4, -1, "fc2", 12, &error);
  side = ks_mean (ks_sigmoid (ks_relu (ks_fc (n->x, 2, -1, "fc3", 13, &error), &error), &error),
                  &error);
  n->loss = ks_add (ks_softmax_cross_entropy (logits, n->y, &error), side, &error);
  n->acc = ks_accuracy (logits, n->y, &error);
  g_assert_no_error (error);
  for (int i = 0; i < 12; i++)
    n->xs[i] = (float) sin (i * 1.7) * 1.5f;
  for (int i = 0; i < 20; i++)
    n->rs[i] = (float) cos (i * 0.9) * 0.5f;
  for (int i = 0; i < 4; i++)
    n->ys[i] = (i * 3) % 4;
}

static void
feed_all (Net *n)
{
  KsFeed feeds[] = { { "x", n->xs, sizeof n->xs }, { "y", n->ys, sizeof n->ys },
                     { "r", n->rs, sizeof n->rs } };
  g_autoptr (GError) error = NULL;
  g_assert_true (ks_model_run (n->model, feeds, 3, NULL, 0, &error));
  g_assert_no_error (error);
}

static void
test_gradients (Fixture *f, gconstpointer data)
{
  Net n;
  g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  g_autoptr (GError) error = NULL;

  build (f, &n);
  g_assert_true (ks_model_init (n.model, &error));
  g_assert_true (ks_model_backward (n.model, n.loss, NULL, 0, NULL, pairs, &error));
  g_assert_cmpuint (pairs->len, ==, 6); /* fc1..fc3, w and b each */
  feed_all (&n);

  gsize checked = ks_test_check_parameter_gradients (n.model, n.loss, 1e-2, 2e-3);
  g_assert_cmpuint (checked, ==, 3 * 5 + 5 + 5 * 4 + 4 + 3 * 2 + 2);
  ks_model_free (n.model);
}

/* Embedding and layer norm: ids -> table rows -> layer norm -> fc -> cross entropy,
 * every parameter element against finite differences. */
static void
test_embedding_layer_norm_gradients (Fixture *f, gconstpointer data)
{
  enum { M = 12, VOCAB = 7, DIM = 5, CLASSES = 4 };
  const gint64 ishape[] = { M }, tshape[] = { VOCAB, DIM }, two[] = { 3, 4 };
  g_autoptr (KsModel) model = ks_model_new (f->c);
  g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  g_autoptr (GError) error = NULL;
  KsInit normal = { KS_INIT_NORMAL, 0, 1, 9 };
  gint64 ids[M], labels[M];

  for (int i = 0; i < M; i++)
    ids[i] = (i * 5) % VOCAB, labels[i] = (i * 3) % CLASSES; /* ids repeat: rows add up */
  KsExpr *x = ks_model_data (model, "ids", 1, ishape, KS_DTYPE_INT64, &error);
  KsExpr *y = ks_model_data (model, "y", 1, ishape, KS_DTYPE_INT64, &error);
  KsExpr *table = ks_model_parameter (model, "table", 2, tshape, normal, &error);
  KsExpr *h = ks_layer_norm (ks_embedding (x, table, &error), "ln", 1e-5f, &error);
  KsExpr *loss = ks_softmax_cross_entropy (ks_fc (h, CLASSES, -1, "head", 4, &error), y, &error);
  g_assert_no_error (error);
  g_autofree char *s2 = NULL;
  KsExpr *ids2 = ks_model_data (model, "ids2", 2, two, KS_DTYPE_INT64, &error);
  s2 = ks_expr_shape_string (ks_embedding (ids2, table, &error));
  g_assert_cmpstr (s2, ==, "[3, 4, 5]");
  g_assert_true (ks_model_init (model, &error));
  g_assert_true (ks_model_backward (model, loss, NULL, 0, NULL, pairs, &error));
  KsFeed feeds[] = { { "ids", ids, sizeof ids }, { "y", labels, sizeof labels } };
  g_assert_true (ks_model_run (model, feeds, 2, &g_array_index (pairs, KsParamGrad, 0).grad, 1,
                               &error));
  g_assert_no_error (error);

  gsize checked = ks_test_check_parameter_gradients (model, loss, 1e-2, 3e-3);
  g_assert_cmpuint (checked, ==, VOCAB * DIM + DIM + DIM + DIM * CLASSES + CLASSES);

  ids[3] = VOCAB; /* out of the table */
  g_assert_false (ks_model_run (model, feeds, 2, &loss, 1, &error));
  g_assert_cmpstr (error->message, ==, "embedding: ids[3] = 7 is outside the table's 7 rows");
}

/* Reshape, softmax and log-softmax: x [6, 4] -> fc 6 -> [4, 9] -> softmax -> fc 5 ->
 * log-softmax -> [2, 10] -> cross entropy; every parameter by finite differences. */
static void
test_softmax_reshape_gradients (Fixture *f, gconstpointer data)
{
  const gint64 xshape[] = { 6, 4 }, to4x9[] = { 4, 9 }, to2x10[] = { 2, 10 }, yshape[] = { 2 };
  const gint64 bad[] = { 5, 5 };
  g_autoptr (KsModel) model = ks_model_new (f->c);
  g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  g_autoptr (GError) error = NULL;
  float xs[24];
  gint64 ys[] = { 3, 8 };

  for (int i = 0; i < 24; i++)
    xs[i] = (float) sin (i * 1.3);
  KsExpr *x = ks_model_data (model, "x", 2, xshape, KS_DTYPE_FLOAT32, &error);
  KsExpr *y = ks_model_data (model, "y", 1, yshape, KS_DTYPE_INT64, &error);
  KsExpr *h = ks_reshape (ks_fc (x, 6, -1, "fc1", 3, &error), 2, to4x9, &error);
  h = ks_fc (ks_softmax (h, FALSE, &error), 5, -1, "fc2", 4, &error);
  h = ks_reshape (ks_softmax (h, TRUE, &error), 2, to2x10, &error);
  KsExpr *loss = ks_softmax_cross_entropy (h, y, &error);
  g_assert_no_error (error);
  g_assert_true (ks_model_init (model, &error));
  g_assert_true (ks_model_backward (model, loss, NULL, 0, NULL, pairs, &error));
  KsFeed feeds[] = { { "x", xs, sizeof xs }, { "y", ys, sizeof ys } };
  g_assert_true (ks_model_run (model, feeds, 2, &g_array_index (pairs, KsParamGrad, 0).grad, 1,
                               &error));
  g_assert_no_error (error);
  g_assert_cmpuint (ks_test_check_parameter_gradients (model, loss, 1e-2, 3e-3), ==,
                    4 * 6 + 6 + 9 * 5 + 5);

  g_assert_null (ks_reshape (x, 2, bad, &error));
  g_assert_cmpstr (error->message, ==, "reshape: 'x' [6, 4] has 24 elements; the new shape (2 "
                                       "dimensions, at most 8) must have as many");
}

/* Dropout and transpose: gradients by finite differences through a 3-d transpose and a
 * fixed mask; the mask's values; a new mask per run and the same one for the same
 * counter; evaluation mode passes through; bad arguments. */
static void
test_dropout_transpose (Fixture *f, gconstpointer data)
{
  const gint64 xshape[] = { 4, 6 }, cube[] = { 2, 4, 4 }, flat[] = { 8, 4 }, yshape[] = { 8 };
  const int perm[] = { 2, 0, 1 };
  g_autoptr (KsModel) model = ks_model_new (f->c);
  g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  g_autoptr (GError) error = NULL;
  float xs[24], hs[32], ds[32], first[32];
  gint64 ys[] = { 0, 1, 2, 0, 1, 2, 0, 1 };
  gsize zeros = 0;

  for (int i = 0; i < 24; i++)
    xs[i] = (float) sin (i * 0.7);
  KsExpr *x = ks_model_data (model, "x", 2, xshape, KS_DTYPE_FLOAT32, &error);
  KsExpr *y = ks_model_data (model, "y", 1, yshape, KS_DTYPE_INT64, &error);
  KsExpr *h = ks_fc (x, 8, KS_UNARY_TANH, "fc1", 5, &error);
  KsExpr *d = ks_dropout (h, 0.5f, 11, &error);
  KsExpr *t = ks_transpose (ks_reshape (d, 3, cube, &error), perm, &error);
  g_assert_no_error (error);
  g_autofree char *tshape = ks_expr_shape_string (t);
  g_assert_cmpstr (tshape, ==, "[4, 2, 4]");
  KsExpr *logits = ks_fc (ks_reshape (t, 2, flat, &error), 3, -1, "fc2", 6, &error);
  KsExpr *loss = ks_softmax_cross_entropy (logits, y, &error);
  g_assert_no_error (error);
  g_assert_true (ks_model_init (model, &error));
  g_assert_true (ks_model_backward (model, loss, NULL, 0, NULL, pairs, &error));
  KsFeed feeds[] = { { "x", xs, sizeof xs }, { "y", ys, sizeof ys } };

  /* the mask of counter 0: every element dropped or doubled, some of each */
  g_assert_cmpuint (ks_model_rng_state (model), ==, 0);
  g_assert_true (ks_model_run (model, feeds, 2, &g_array_index (pairs, KsParamGrad, 0).grad, 1,
                               &error));
  g_assert_no_error (error);
  g_assert_cmpuint (ks_model_rng_state (model), ==, 1);
  g_assert_true (ks_tensor_to_host (ks_expr_value (h, NULL), hs, sizeof hs, NULL));
  g_assert_true (ks_tensor_to_host (ks_expr_value (d, NULL), first, sizeof first, NULL));
  for (int i = 0; i < 32; i++)
    {
      g_assert_true (first[i] == 0 || first[i] == 2 * hs[i]);
      zeros += first[i] == 0;
    }
  g_assert_cmpuint (zeros, >, 4);
  g_assert_cmpuint (zeros, <, 28);
  ks_model_set_rng_state (model, 0);
  g_assert_cmpuint (ks_test_check_parameter_gradients (model, loss, 1e-2, 3e-3), ==,
                    6 * 8 + 8 + 4 * 3 + 3);

  /* the next counter draws another mask; counter 0 again draws the first */
  ks_model_set_rng_state (model, 1);
  g_assert_true (ks_model_run (model, feeds, 2, &d, 1, &error));
  g_assert_true (ks_tensor_to_host (ks_expr_value (d, NULL), ds, sizeof ds, NULL));
  g_assert_true (memcmp (ds, first, sizeof ds) != 0);
  ks_model_set_rng_state (model, 0);
  g_assert_true (ks_model_run (model, feeds, 2, &d, 1, &error));
  g_assert_true (ks_tensor_to_host (ks_expr_value (d, NULL), ds, sizeof ds, NULL));
  g_assert_cmpmem (ds, sizeof ds, first, sizeof first);

  /* evaluation mode: the input, and no mask drawn */
  ks_model_set_training (model, FALSE);
  g_assert_false (ks_model_training (model));
  g_assert_true (ks_tensor_to_host (ks_expr_value (d, &error), ds, sizeof ds, NULL));
  g_assert_cmpmem (ds, sizeof ds, hs, sizeof hs);
  g_assert_cmpuint (ks_model_rng_state (model), ==, 1);

  g_assert_null (ks_dropout (h, 1, 0, &error));
  g_assert_cmpstr (error->message, ==, "dropout of 'unary_6': rate 1; it is the probability "
                                       "of dropping an element, in [0, 1)");
  g_clear_error (&error);
  g_assert_null (ks_transpose (t, (const int[]) { 0, 2, 2 }, &error));
  g_assert_cmpstr (error->message, ==, "transpose: 'transpose_9' is [4, 2, 4]; perm[2] = 2, but "
                                       "perm must order its dimensions 0 .. 2, each once");
}

/* Causal self-attention: gradients by finite differences through the qkv projection, and
 * causality: a later token never changes an earlier output. */
static void
test_attention (Fixture *f, gconstpointer data)
{
  enum { B = 2, T = 4, C = 6, H = 2, CLASSES = 3 };
  const gint64 xshape[] = { B * T, C }, yshape[] = { B * T };
  g_autoptr (KsModel) model = ks_model_new (f->c);
  g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  g_autoptr (GError) error = NULL;
  float xs[B * T * C];
  gint64 ys[B * T];

  for (int i = 0; i < B * T * C; i++)
    xs[i] = (float) sin (i * 0.77);
  for (int i = 0; i < B * T; i++)
    ys[i] = i % CLASSES;
  KsExpr *x = ks_model_data (model, "x", 2, xshape, KS_DTYPE_FLOAT32, &error);
  KsExpr *y = ks_model_data (model, "y", 1, yshape, KS_DTYPE_INT64, &error);
  KsExpr *att = ks_causal_self_attention (ks_fc (x, 3 * C, -1, "qkv", 21, &error), B, H, &error);
  KsExpr *loss = ks_softmax_cross_entropy (ks_fc (att, CLASSES, -1, "head", 22, &error), y,
                                           &error);
  g_assert_no_error (error);
  g_assert_true (ks_model_init (model, &error));
  g_assert_true (ks_model_backward (model, loss, NULL, 0, NULL, pairs, &error));
  KsFeed feeds[] = { { "x", xs, sizeof xs }, { "y", ys, sizeof ys } };
  g_assert_true (ks_model_run (model, feeds, 2, &g_array_index (pairs, KsParamGrad, 0).grad, 1,
                               &error));
  g_assert_no_error (error);

  g_assert_cmpuint (ks_test_check_parameter_gradients (model, loss, 1e-2, 3e-3), ==,
                    C * 3 * C + 3 * C + C * CLASSES + CLASSES);

  /* causality: change the last token of the first sequence */
  float before[B * T * C], after[B * T * C];
  g_assert_true (ks_tensor_to_host (ks_expr_value (att, NULL), before, sizeof before, NULL));
  for (int j = 0; j < C; j++)
    xs[(T - 1) * C + j] += 1;
  g_assert_true (ks_model_run (model, feeds, 1, &x, 1, &error));
  g_assert_true (ks_tensor_to_host (ks_expr_value (att, NULL), after, sizeof after, NULL));
  g_assert_cmpmem (before, (T - 1) * C * sizeof (float), after, (T - 1) * C * sizeof (float));
  g_assert_true (memcmp (before + (T - 1) * C, after + (T - 1) * C, C * sizeof (float)) != 0);
  g_assert_cmpmem (before + T * C, T * C * sizeof (float), after + T * C, T * C * sizeof (float));

  g_assert_null (ks_causal_self_attention (x, B, 4, &error));
  g_assert_cmpstr (error->message, ==, "attention: 'x' is [8, 6]; it takes [batch * T, 3 * heads * "
                                       "head size] with batch = 2 and heads = 4");
}

/* Running the gradient of a loss runs its sweep once, and no_grad leaves a parameter out. */
static void
test_backward_selection (Fixture *f, gconstpointer data)
{
  Net n;
  g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  const char *const no_grad[] = { "fc3.w", "fc3.b", NULL };
  g_autoptr (GError) error = NULL;

  build (f, &n);
  g_assert_true (ks_model_init (n.model, &error));
  g_assert_true (ks_model_backward (n.model, n.loss, NULL, 0, no_grad, pairs, &error));
  g_assert_cmpuint (pairs->len, ==, 4);
  g_assert_cmpstr (ks_expr_name (g_array_index (pairs, KsParamGrad, 0).grad), ==, "fc1.w@GRAD");
  feed_all (&n);
  const KsTensor *fc3 = ks_arena_tensor (ks_model_gradients (n.model), "fc3.w");
  for (gsize i = 0; i < fc3->numel; i++)
    g_assert_cmpfloat (((float *) fc3->data)[i], ==, 0);

  g_autoptr (GError) e2 = NULL;
  g_assert_false (ks_model_backward (n.model, n.x, NULL, 0, NULL, NULL, &e2));
  g_assert_cmpstr (e2->message, ==, "backward: the loss 'x' must be a float32 scalar of this "
                                    "model (it is float32 [4, 3])");
  ks_model_free (n.model);
}

/* What the grad_ready callback saw: each parameter's name and its gradient then. */
typedef struct {
  GPtrArray *names;
  GPtrArray *values; /* float *, g_free'd */
} ReadyLog;

static void
on_ready (KsModel *model, KsExpr *param, gpointer data)
{
  ReadyLog *log = data;
  const KsTensor *g = ks_arena_tensor (ks_model_gradients (model), ks_expr_name (param));
  g_ptr_array_add (log->names, g_strdup (ks_expr_name (param)));
  g_ptr_array_add (log->values, g_memdup2 (g->data, ks_tensor_nbytes (g)));
}

/* The callback tells of every parameter once, with its final gradient, and the layers
 * nearest the loss first: fc2 (last layer) before fc1 (first). */
static void
test_grad_ready (Fixture *f, gconstpointer data)
{
  Net n;
  ReadyLog log = { g_ptr_array_new_with_free_func (g_free), g_ptr_array_new_with_free_func (g_free) };
  g_autoptr (GError) error = NULL;
  int fc1 = -1, fc2 = -1;

  build (f, &n);
  g_assert_true (ks_model_init (n.model, &error));
  g_assert_true (ks_model_backward (n.model, n.loss, NULL, 0, NULL, NULL, &error));
  ks_model_set_grad_ready (n.model, on_ready, &log);
  feed_all (&n);
  g_assert_cmpuint (log.names->len, ==, 6);
  for (guint i = 0; i < log.names->len; i++)
    {
      const char *name = log.names->pdata[i];
      const KsTensor *g = ks_arena_tensor (ks_model_gradients (n.model), name);
      g_assert_cmpmem (log.values->pdata[i], ks_tensor_nbytes (g), g->data, ks_tensor_nbytes (g));
      for (guint j = 0; j < i; j++)
        g_assert_cmpstr (log.names->pdata[j], !=, name);
      if (strcmp (name, "fc1.w") == 0)
        fc1 = (int) i;
      if (strcmp (name, "fc2.w") == 0)
        fc2 = (int) i;
    }
  g_assert_cmpint (fc2, >=, 0);
  g_assert_cmpint (fc2, <, fc1);
  /* the gradient is not zero: the check above compared something */
  const KsTensor *g1 = ks_arena_tensor (ks_model_gradients (n.model), "fc1.w");
  double norm = 0;
  for (gsize i = 0; i < g1->numel; i++)
    norm += fabs (((float *) g1->data)[i]);
  g_assert_cmpfloat (norm, >, 0);
  g_ptr_array_unref (log.names);
  g_ptr_array_unref (log.values);
  ks_model_free (n.model);
}

static void
test_pruning_and_cache (Fixture *f, gconstpointer data)
{
  Net n;
  g_autoptr (GError) error = NULL;

  build (f, &n);
  g_assert_true (ks_model_init (n.model, &error));
  feed_all (&n); /* every op once */
  guint64 all = ks_model_ops_executed (n.model);
  KsFeed feeds[] = { { "x", n.xs, sizeof n.xs }, { "y", n.ys, sizeof n.ys } };

  /* accuracy needs fc1 (matmul, add, tanh), add r, gelu, fc2 (matmul, add) and itself:
   * 8 ops; not the cross entropy, fc3's branch or the loss */
  guint64 before = ks_model_ops_executed (n.model);
  g_assert_true (ks_model_run (n.model, feeds, 2, &n.acc, 1, &error));
  g_assert_cmpuint (ks_model_ops_executed (n.model) - before, ==, 8);
  /* all: those 8, cross entropy, fc3 (matmul, add), relu, sigmoid, mean, the loss's add */
  g_assert_cmpuint (all, ==, 8 + 1 + 2 + 1 + 1 + 1 + 1);

  /* the graph grows: the cached plan of "everything" must include the new op */
  before = ks_model_ops_executed (n.model);
  g_assert_true (ks_model_run (n.model, NULL, 0, NULL, 0, &error));
  guint64 everything = ks_model_ops_executed (n.model) - before;
  g_assert_nonnull (ks_tanh (n.loss, &error));
  before = ks_model_ops_executed (n.model);
  g_assert_true (ks_model_run (n.model, NULL, 0, NULL, 0, &error));
  g_assert_cmpuint (ks_model_ops_executed (n.model) - before, ==, everything + 1);
  ks_model_free (n.model);
}

static void
test_lazy_value (Fixture *f, gconstpointer data)
{
  Net n;
  g_autoptr (GError) error = NULL;

  build (f, &n);
  g_assert_true (ks_model_init (n.model, &error));
  feed_all (&n);
  float first = ks_test_scalar (n.loss);
  guint64 before = ks_model_ops_executed (n.model);
  g_assert_cmpfloat (ks_test_scalar (n.loss), ==, first); /* up to date: nothing runs */
  g_assert_cmpuint (ks_model_ops_executed (n.model), ==, before);

  n.xs[0] += 1; /* a new input: the value follows */
  KsFeed x = { "x", n.xs, sizeof n.xs };
  g_assert_true (ks_model_run (n.model, &x, 1, &n.x, 1, &error));
  g_assert_cmpfloat (ks_test_scalar (n.loss), !=, first);
  g_assert_cmpuint (ks_model_ops_executed (n.model), >, before);
  ks_model_free (n.model);
}

static void
test_device_binding (Fixture *f, gconstpointer data)
{
  g_autoptr (KsModel) model = ks_model_new (NULL);
  g_autoptr (GError) error = NULL;
  const gint64 shape[] = { 2 };
  KsInit zero = { KS_INIT_CONSTANT, 0, 0, 0 };

  g_assert_nonnull (ks_model_parameter (model, "p", 1, shape, zero, &error));
  g_assert_false (ks_model_init (model, &error)); /* no device yet */
  g_assert_cmpstr (error->message, ==, "the model has no device: give one to ks_model_new or "
                                       "ks_model_set_device");
  g_clear_error (&error);
  g_assert_true (ks_model_set_device (model, f->c, &error)); /* later is fine... */
  g_assert_true (ks_model_init (model, &error));
  g_assert_false (ks_model_set_device (model, f->c, &error)); /* ...but not once initialised */
  g_assert_cmpstr (error->message, ==, "the model is bound to its device (plugin openblas) since "
                                       "it was initialised; make a new model for another device");
  g_clear_error (&error);
  g_assert_null (ks_model_parameter (model, "q", 1, shape, zero, &error));
  g_assert_true (g_str_has_suffix (error->message, "declare every parameter before "
                                                   "ks_model_init"));
}

static void
test_errors (Fixture *f, gconstpointer data)
{
  Net n;
  g_autoptr (GError) error = NULL;
  float small[2] = { 0 };

  build (f, &n);
  g_assert_true (ks_model_init (n.model, &error));
  g_assert_false (ks_model_run (n.model, NULL, 0, &n.loss, 1, &error));
  g_assert_cmpstr (error->message, ==, "data 'x' was not fed: pass it in the feeds of "
                                       "ks_model_run");
  g_clear_error (&error);
  KsFeed wrong = { "x", small, sizeof small };
  g_assert_false (ks_model_run (n.model, &wrong, 1, NULL, 0, &error));
  g_assert_cmpstr (error->message, ==, "feed 'x': a float32 tensor of shape [4, 3] holds 48 "
                                       "bytes, not 8");
  g_clear_error (&error);
  KsFeed unknown = { "z", small, sizeof small };
  g_assert_false (ks_model_run (n.model, &unknown, 1, NULL, 0, &error));
  g_assert_cmpstr (error->message, ==, "feed 'z': the model has no data of that name");
  g_clear_error (&error);
  g_assert_null (ks_matmul (n.x, n.x, &error));
  g_assert_cmpstr (error->message, ==, "matmul: 'x' is [4, 3] and 'x' is [4, 3]; it multiplies "
                                       "[m, k] by [k, n]");
  g_clear_error (&error);
  g_assert_null (ks_softmax_cross_entropy (n.x, n.x, &error));
  g_assert_true (g_str_has_prefix (error->message, "softmax_cross_entropy: logits 'x' are float32 "
                                                   "[4, 3] and labels 'x' are float32 [4, 3]"));
  g_clear_error (&error);
  gint64 bad_labels[4] = { 0, 1, 9, 0 };
  KsFeed feeds[] = { { "x", n.xs, sizeof n.xs }, { "y", bad_labels, sizeof bad_labels },
                     { "r", n.rs, sizeof n.rs } };
  g_assert_false (ks_model_run (n.model, feeds, 3, &n.loss, 1, &error));
  g_assert_cmpstr (error->message, ==, "cross_entropy: labels[2] = 9 is not a class in [0, 4)");
  ks_model_free (n.model);
}

/* Two interleaved spirals: not linearly separable. An MLP trained with the fused Adam
 * update over the whole parameter arena must classify more than 95% of them. */
static void
test_mlp_learns (Fixture *f, gconstpointer data)
{
  enum { N = 256 };
  const gint64 xshape[] = { N, 2 }, yshape[] = { N };
  g_autoptr (KsModel) model = ks_model_new (f->c);
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  float xs[N * 2];
  gint64 ys[N];

  for (int i = 0; i < N; i++)
    {
      int cls = i % 2;
      double t = (i / 2) / (double) (N / 2) * 3 * G_PI + 0.3;
      double r = t / (3 * G_PI);
      xs[2 * i] = (float) ((cls ? -1 : 1) * r * cos (t));
      xs[2 * i + 1] = (float) ((cls ? -1 : 1) * r * sin (t));
      ys[i] = cls;
    }
  KsExpr *x = ks_model_data (model, "x", 2, xshape, KS_DTYPE_FLOAT32, &error);
  KsExpr *y = ks_model_data (model, "y", 1, yshape, KS_DTYPE_INT64, &error);
  KsExpr *h = ks_fc (x, 64, KS_UNARY_TANH, NULL, 1, &error);
  h = ks_fc (h, 64, KS_UNARY_TANH, NULL, 2, &error);
  KsExpr *logits = ks_fc (h, 2, -1, NULL, 3, &error);
  KsExpr *loss = ks_softmax_cross_entropy (logits, y, &error);
  KsExpr *acc = ks_accuracy (logits, y, &error);
  g_assert_no_error (error);
  g_assert_true (ks_model_init (model, &error));
  g_assert_true (ks_model_backward (model, loss, NULL, 0, NULL, pairs, &error));

  KsArena *params = ks_model_parameters (model), *grads = ks_model_gradients (model);
  g_autoptr (KsArena) m1 = ks_arena_new_like (params, &error);
  g_autoptr (KsArena) m2 = ks_arena_new_like (params, &error);
  KsUpdateArgs adam = { sizeof adam, KS_UPDATE_ADAM, 0.01f, 0, 0.9f, 0.999f, 1e-8f, 0, FALSE, 0 };
  KsFeed feeds[] = { { "x", xs, sizeof xs }, { "y", ys, sizeof ys } };
  KsExpr *step_targets[] = { loss, g_array_index (pairs, KsParamGrad, 0).grad };
  float first_loss = 0;

  for (adam.step = 1; adam.step <= 1000; adam.step++)
    {
      /* one gradient as target runs the sweep that fills every gradient */
      g_assert_true (ks_model_run (model, feeds, 2, step_targets, 2, &error));
      if (adam.step == 1)
        first_loss = ks_test_scalar (loss);
      g_assert_true (ks_compute_update (f->c, &adam, ks_arena_data (params), ks_arena_data (grads),
                                        ks_arena_data (m1), ks_arena_data (m2),
                                        ks_arena_numel (params), &error));
      ks_model_parameters_changed (model);
    }
  g_assert_true (ks_model_run (model, feeds, 2, &acc, 1, &error));
  float accuracy = ks_test_scalar (acc), last_loss = ks_test_scalar (loss);
  g_test_message ("spirals: loss %.4f -> %.4f, accuracy %.3f", first_loss, last_loss, accuracy);
  g_assert_cmpfloat (last_loss, <, first_loss / 4);
  g_assert_cmpfloat (accuracy, >, 0.95);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (!ks_test_have_openblas ())
    return g_test_run ();
#define ADD(name, fn) g_test_add ("/model/" name, Fixture, NULL, setup, fn, teardown)
  ADD ("gradients", test_gradients);
  ADD ("embedding-layer-norm-gradients", test_embedding_layer_norm_gradients);
  ADD ("softmax-reshape-gradients", test_softmax_reshape_gradients);
  ADD ("dropout-transpose", test_dropout_transpose);
  ADD ("attention", test_attention);
  ADD ("backward-selection", test_backward_selection);
  ADD ("grad-ready", test_grad_ready);
  ADD ("pruning-and-cache", test_pruning_and_cache);
  ADD ("lazy-value", test_lazy_value);
  ADD ("device-binding", test_device_binding);
  ADD ("errors", test_errors);
  ADD ("mlp-learns", test_mlp_learns);
  return g_test_run ();
}
