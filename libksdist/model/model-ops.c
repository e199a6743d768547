/* The model's ops: each builder checks shapes and adds an expression; each op has a
 * forward and a backward through the compute backend. Backward adds into the inputs'
 * gradients (an input may feed several ops). Attention is in model-attention.c, the
 * convolutional ops in model-conv.c. */
#include "model-private.h"

#include <math.h>
#include <string.h>

#define DEV(e) ((e)->model->compute)
#define F(t) ((float *) (t)->data)

const char *
ks_op_name (OpType op)
{
  static const char *const names[] = { "parameter", "data", "matmul", "add", "unary", "mean",
                                       "cross_entropy", "accuracy", "embedding", "layer_norm",
                                       "attention", "grad", "softmax", "reshape", "transpose",
                                       "dropout", "mul", "conv2d", "max_pool",
                                       "batch_norm", "avg_pool", "logistic" };
  return names[op];
}

/* ---- building ---- */

KsExpr *
ks_op_expr_n (OpType op, KsExpr *const *in, guint n_in, int ndim, const gint64 *shape,
              GError **error)
{
  KsExpr *e;
  for (guint k = 1; k < n_in; k++)
    if (in[k]->model != in[0]->model)
      {
        ks_invalid (error, "%s: '%s' and '%s' belong to different models", ks_op_name (op),
                    in[0]->name, in[k]->name);
        return NULL;
      }
  e = ks_model_add_expr (in[0]->model, op, NULL, KS_DTYPE_FLOAT32, ndim, shape, error);
  if (e == NULL)
    return NULL;
  memcpy (e->in, in, n_in * sizeof *in);
  e->n_in = n_in;
  return e;
}

static KsExpr *
op_expr (OpType op, KsExpr *a, KsExpr *b, int ndim, const gint64 *shape, GError **error)
{
  KsExpr *in[] = { a, b };
  return ks_op_expr_n (op, in, b != NULL ? 2 : 1, ndim, shape, error);
}

gboolean
ks_op_require_float (const char *op, const KsExpr *x, GError **error)
{
  return x->dtype == KS_DTYPE_FLOAT32
         || ks_invalid (error, "%s: '%s' is %s; it takes float32", op, x->name,
                        ks_dtype_name (x->dtype));
}

KsExpr *
ks_matmul (KsExpr *a, KsExpr *b, GError **error)
{
  g_autofree char *sa = ks_expr_shape_string (a);
  g_autofree char *sb = ks_expr_shape_string (b);
  if (!ks_op_require_float ("matmul", a, error) || !ks_op_require_float ("matmul", b, error))
    return NULL;
  if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[0])
    {
      ks_invalid (error, "matmul: '%s' is %s and '%s' is %s; it multiplies [m, k] by [k, n]",
                  a->name, sa, b->name, sb);
      return NULL;
    }
  const gint64 shape[] = { a->shape[0], b->shape[1] };
  return op_expr (OP_MATMUL, a, b, 2, shape, error);
}

/* The last dimension of x, and how many rows of it x holds. */
static gsize
cols_of (const KsExpr *x)
{
  return x->ndim > 0 ? (gsize) x->shape[x->ndim - 1] : 1;
}

KsExpr *
ks_add (KsExpr *a, KsExpr *b, GError **error)
{
  g_autofree char *sa = ks_expr_shape_string (a);
  g_autofree char *sb = ks_expr_shape_string (b);
  if (!ks_op_require_float ("add", a, error) || !ks_op_require_float ("add", b, error))
    return NULL;
  gboolean same = a->numel == b->numel && a->ndim == b->ndim
                  && memcmp (a->shape, b->shape, a->ndim * sizeof *a->shape) == 0;
  gboolean row = b->numel == cols_of (a) && cols_of (b) == cols_of (a);
  if (!same && !row)
    {
      ks_invalid (error,
                  "add: '%s' is %s and '%s' is %s; b must have a's shape or be one row of it",
                  a->name, sa, b->name, sb);
      return NULL;
    }
  return op_expr (OP_ADD, a, b, a->ndim, a->shape, error);
}

KsExpr *
ks_mul (KsExpr *a, KsExpr *b, GError **error)
{
  g_autofree char *sa = ks_expr_shape_string (a);
  g_autofree char *sb = ks_expr_shape_string (b);
  if (!ks_op_require_float ("mul", a, error) || !ks_op_require_float ("mul", b, error))
    return NULL;
  if (a->ndim != b->ndim || memcmp (a->shape, b->shape, a->ndim * sizeof *a->shape) != 0)
    {
      ks_invalid (error, "mul: '%s' is %s and '%s' is %s; they must have one shape", a->name,
                  sa, b->name, sb);
      return NULL;
    }
  return op_expr (OP_MUL, a, b, a->ndim, a->shape, error);
}

KsExpr *
ks_unary (KsUnaryOp op, KsExpr *x, GError **error)
{
  KsExpr *e;
  if (!ks_op_require_float ("unary", x, error))
    return NULL;
  if ((e = op_expr (OP_UNARY, x, NULL, x->ndim, x->shape, error)) != NULL)
    e->attr = op;
  return e;
}

KsExpr *ks_relu (KsExpr *x, GError **error) { return ks_unary (KS_UNARY_RELU, x, error); }
KsExpr *ks_tanh (KsExpr *x, GError **error) { return ks_unary (KS_UNARY_TANH, x, error); }
KsExpr *ks_sigmoid (KsExpr *x, GError **error) { return ks_unary (KS_UNARY_SIGMOID, x, error); }
KsExpr *ks_gelu (KsExpr *x, GError **error) { return ks_unary (KS_UNARY_GELU, x, error); }

KsExpr *
ks_softmax (KsExpr *x, gboolean log_softmax, GError **error)
{
  KsExpr *e;
  if (!ks_op_require_float ("softmax", x, error))
    return NULL;
  if ((e = op_expr (OP_SOFTMAX, x, NULL, x->ndim, x->shape, error)) != NULL)
    e->attr = log_softmax;
  return e;
}

KsExpr *
ks_reshape (KsExpr *x, int ndim, const gint64 *shape, GError **error)
{
  gsize numel = 1;
  if (!ks_op_require_float ("reshape", x, error))
    return NULL;
  for (int i = 0; i < ndim; i++)
    numel *= shape[i] > 0 ? (gsize) shape[i] : 0;
  if (ndim < 0 || ndim > KS_TENSOR_MAX_DIMS || numel != x->numel)
    {
      g_autofree char *sx = ks_expr_shape_string (x);
      ks_invalid (error, "reshape: '%s' %s has %" G_GSIZE_FORMAT " elements; the new shape "
                  "(%d dimensions, at most %d) must have as many", x->name, sx, x->numel, ndim,
                  KS_TENSOR_MAX_DIMS);
      return NULL;
    }
  return op_expr (OP_RESHAPE, x, NULL, ndim, shape, error);
}

KsExpr *
ks_transpose (KsExpr *x, const int *perm, GError **error)
{
  gint64 shape[KS_TENSOR_MAX_DIMS];
  KsExpr *e;
  int flaw;

  if (!ks_op_require_float ("transpose", x, error))
    return NULL;
  if ((flaw = ks_permutation_flaw (x->ndim, perm)) >= 0)
    {
      g_autofree char *sx = ks_expr_shape_string (x);
      ks_invalid (error, "transpose: '%s' is %s; perm[%d] = %d, but perm must order its "
                  "dimensions 0 .. %d, each once", x->name, sx, flaw, perm[flaw], x->ndim - 1);
      return NULL;
    }
  for (int i = 0; i < x->ndim; i++)
    shape[i] = x->shape[perm[i]];
  if ((e = op_expr (OP_TRANSPOSE, x, NULL, x->ndim, shape, error)) != NULL)
    memcpy (e->perm, perm, x->ndim * sizeof *perm);
  return e;
}

KsExpr *
ks_dropout (KsExpr *x, float rate, guint64 seed, GError **error)
{
  KsExpr *e;
  if (!ks_op_require_float ("dropout", x, error))
    return NULL;
  if (!(rate >= 0 && rate < 1))
    {
      ks_invalid (error, "dropout of '%s': rate %g; it is the probability of dropping an "
                  "element, in [0, 1)", x->name, rate);
      return NULL;
    }
  if ((e = op_expr (OP_DROPOUT, x, NULL, x->ndim, x->shape, error)) != NULL)
    e->rate = rate, e->seed = seed;
  return e;
}

KsExpr *
ks_mean (KsExpr *x, GError **error)
{
  if (!ks_op_require_float ("mean", x, error))
    return NULL;
  return op_expr (OP_MEAN, x, NULL, 0, NULL, error);
}

static gboolean
check_labels (const char *op, const KsExpr *logits, const KsExpr *labels, GError **error)
{
  g_autofree char *sl = ks_expr_shape_string (logits);
  g_autofree char *sy = ks_expr_shape_string (labels);
  if (logits->ndim == 2 && logits->dtype == KS_DTYPE_FLOAT32 && labels->ndim == 1
      && labels->dtype == KS_DTYPE_INT64 && labels->shape[0] == logits->shape[0])
    return TRUE;
  return ks_invalid (error,
                     "%s: logits '%s' are %s %s and labels '%s' are %s %s; it takes float32 "
                     "[m, classes] and int64 [m]",
                     op, logits->name, ks_dtype_name (logits->dtype), sl, labels->name,
                     ks_dtype_name (labels->dtype), sy);
}

KsExpr *
ks_softmax_cross_entropy (KsExpr *logits, KsExpr *labels, GError **error)
{
  if (!check_labels ("softmax_cross_entropy", logits, labels, error))
    return NULL;
  return op_expr (OP_CROSS_ENTROPY, logits, labels, 0, NULL, error);
}

/* The binary logistic loss of one logit a row: softmax cross entropy over the two logits
 * [0, z], which is log (1 + e^z) - y z in the stable form max (z, 0) - y z + log (1 +
 * e^-|z|), and whose gradient is sigmoid (z) - y. */
KsExpr *
ks_sigmoid_cross_entropy (KsExpr *logits, KsExpr *labels, GError **error)
{
  if (!check_labels ("sigmoid_cross_entropy", logits, labels, error))
    return NULL;
  if (logits->shape[1] != 1)
    {
      g_autofree char *sl = ks_expr_shape_string (logits);
      return ks_invalid (error, "sigmoid_cross_entropy: logits '%s' are %s; the binary "
                         "logistic loss takes one logit a row, [m, 1]", logits->name, sl),
             NULL;
    }
  return op_expr (OP_LOGISTIC, logits, labels, 0, NULL, error);
}

KsExpr *
ks_accuracy (KsExpr *logits, KsExpr *labels, GError **error)
{
  if (!check_labels ("accuracy", logits, labels, error))
    return NULL;
  return op_expr (OP_ACCURACY, logits, labels, 0, NULL, error);
}

KsExpr *
ks_embedding (KsExpr *ids, KsExpr *table, GError **error)
{
  gint64 shape[KS_TENSOR_MAX_DIMS];
  g_autofree char *st = ks_expr_shape_string (table);

  if (ids->dtype != KS_DTYPE_INT64 || table->dtype != KS_DTYPE_FLOAT32 || table->ndim != 2
      || ids->ndim >= KS_TENSOR_MAX_DIMS)
    {
      ks_invalid (error,
                  "embedding: ids '%s' are %s and the table '%s' is %s %s; it takes int64 ids "
                  "and a float32 [vocab, dim] table",
                  ids->name, ks_dtype_name (ids->dtype), table->name,
                  ks_dtype_name (table->dtype), st);
      return NULL;
    }
  memcpy (shape, ids->shape, ids->ndim * sizeof *shape);
  shape[ids->ndim] = table->shape[1];
  return op_expr (OP_EMBEDDING, table, ids, ids->ndim + 1, shape, error);
}

KsExpr *
ks_layer_norm_with (KsExpr *x, KsExpr *gamma, KsExpr *beta, float eps, GError **error)
{
  KsExpr *e;
  if (!ks_op_require_float ("layer_norm", x, error))
    return NULL;
  if (gamma->ndim != 1 || beta->ndim != 1 || gamma->numel != cols_of (x)
      || beta->numel != cols_of (x) || gamma->model != x->model || beta->model != x->model)
    {
      g_autofree char *sx = ks_expr_shape_string (x);
      ks_invalid (error, "layer_norm of '%s' %s: gamma '%s' and beta '%s' must be vectors of "
                  "its last dimension in the same model", x->name, sx, gamma->name, beta->name);
      return NULL;
    }
  if ((e = op_expr (OP_LAYER_NORM, x, gamma, x->ndim, x->shape, error)) == NULL)
    return NULL;
  e->in[2] = beta;
  e->n_in = 3;
  e->eps = eps;
  return e;
}

KsExpr *
ks_layer_norm (KsExpr *x, const char *name, float eps, GError **error)
{
  KsModel *model = x->model;
  g_autofree char *base = name != NULL ? g_strdup (name)
                                       : g_strdup_printf ("ln_%u", model->n_layers);
  g_autofree char *gname = g_strconcat (base, ".gamma", NULL);
  g_autofree char *bname = g_strconcat (base, ".beta", NULL);
  KsInit one = { KS_INIT_CONSTANT, 1, 0, 0 }, zero = { KS_INIT_CONSTANT, 0, 0, 0 };
  const gint64 shape[] = { (gint64) cols_of (x) };
  KsExpr *gamma, *beta;

  if (!ks_op_require_float ("layer_norm", x, error))
    return NULL;
  model->n_layers++;
  if ((gamma = ks_model_parameter (model, gname, 1, shape, one, error)) == NULL
      || (beta = ks_model_parameter (model, bname, 1, shape, zero, error)) == NULL)
    return NULL;
  return ks_layer_norm_with (x, gamma, beta, eps, error);
}

KsExpr *
ks_fc (KsExpr *x, gint64 size, int act, const char *name, guint64 seed, GError **error)
{
  KsModel *model = x->model;
  g_autofree char *base = name != NULL ? g_strdup (name)
                                       : g_strdup_printf ("fc_%u", model->n_layers);
  g_autofree char *wname = g_strconcat (base, ".w", NULL);
  g_autofree char *bname = g_strconcat (base, ".b", NULL);
  KsInit xavier = { KS_INIT_XAVIER, 1, 0, seed }, zero = { KS_INIT_CONSTANT, 0, 0, 0 };
  KsExpr *w, *b, *y;

  if (x->ndim != 2)
    {
      g_autofree char *sx = ks_expr_shape_string (x);
      ks_invalid (error, "fc '%s': input '%s' is %s; it takes [m, k]", base, x->name, sx);
      return NULL;
    }
  model->n_layers++;
  const gint64 wshape[] = { x->shape[1], size }, bshape[] = { size };
  if ((w = ks_model_parameter (model, wname, 2, wshape, xavier, error)) == NULL
      || (b = ks_model_parameter (model, bname, 1, bshape, zero, error)) == NULL
      || (y = ks_matmul (x, w, error)) == NULL || (y = ks_add (y, b, error)) == NULL)
    return NULL;
  return act >= 0 ? ks_unary (act, y, error) : y;
}

/* ---- forward ---- */

/* Scalar broadcast: y[i] = op(x[i], s[0]) through the binary kernel (n rows of 1). */
static gboolean
with_scalar (KsCompute *c, KsBinaryOp op, const float *x, const float *s, float *y, gsize n,
             GError **error)
{
  return ks_compute_binary (c, op, x, s, y, n, 1, 1, error);
}

/* The logits [0, z] of each row through the cross entropy kernel: aux holds [0 .. 0, z]
 * ([2, rows]), its transpose ([rows, 2]), the kernel's softmax - onehot, the losses. */
static gboolean
logistic_forward (KsExpr *e, GError **error)
{
  KsCompute *c = DEV (e);
  const KsExpr *z = e->in[0], *y = e->in[1];
  gsize rows = z->shape[0];
  const gint64 shape[] = { (gint64) (7 * rows) }, cols[] = { 2, (gint64) rows };
  static const int swap[] = { 1, 0 };
  if (e->aux == NULL && (e->aux = ks_tensor_new (c, KS_DTYPE_FLOAT32, 1, shape, error)) == NULL)
    return FALSE;
  float *pair = F (e->aux), *logits = pair + 2 * rows, *dlogits = logits + 2 * rows;
  float *losses = dlogits + 2 * rows;
  if (!ks_compute_fill_zero (c, pair, rows * sizeof (float), error)
      || !ks_compute_axpby (c, 1, F (z->value), 0, pair + rows, rows, error)
      || !ks_compute_transpose (c, pair, logits, 2, cols, swap, error))
    return FALSE;
  if (!ks_compute_cross_entropy (c, logits, y->value->data, losses, dlogits, rows, 2, error))
    {
      g_prefix_error (error, "binary logistic loss (labels 0 or 1): ");
      return FALSE;
    }
  return ks_compute_reduce (c, KS_REDUCE_AVG, losses, F (e->value), 1, rows, 1, error);
}

/* dz += (dloss / rows) (sigmoid (z) - y): the second column of softmax - onehot. */
static gboolean
logistic_backward (KsExpr *e, GError **error)
{
  KsCompute *c = DEV (e);
  KsExpr *z = e->in[0];
  gsize rows = z->shape[0];
  const gint64 shape[] = { (gint64) rows, 2 };
  static const int swap[] = { 1, 0 };
  float *pair = F (e->aux), *dlogits = pair + 4 * rows, *scale, *tmp;
  if (!z->needs_grad)
    return TRUE;
  if ((scale = ks_model_scratch (e->model, rows + 16, error)) == NULL)
    return FALSE;
  scale += rows;
  tmp = z->grad_fresh ? F (z->grad) : scale - rows;
  return ks_compute_transpose (c, dlogits, pair, 2, shape, swap, error)
         && ks_compute_axpby (c, 1.0f / rows, F (e->grad), 0, scale, 1, error)
         && with_scalar (c, KS_BINARY_MUL, pair + rows, scale, tmp, rows, error)
         && ks_op_grad_written (z, tmp, error);
}

static gboolean
accuracy_forward (KsExpr *e, GError **error)
{
  const KsExpr *logits = e->in[0], *labels = e->in[1];
  gsize rows = logits->shape[0], cols = logits->shape[1];
  g_autofree float *x = g_new (float, rows * cols);
  g_autofree gint64 *y = g_new (gint64, rows);
  gsize correct = 0;
  float result;

  /* a metric, not a hot path: on the host */
  if (!ks_tensor_to_host (logits->value, x, rows * cols * sizeof (float), error)
      || !ks_tensor_to_host (labels->value, y, rows * sizeof (gint64), error))
    return FALSE;
  for (gsize r = 0; r < rows; r++)
    {
      gsize best = 0;
      for (gsize j = 1; j < cols; j++)
        if (x[r * cols + j] > x[r * cols + best])
          best = j;
      correct += (gint64) best == y[r];
    }
  result = (float) correct / rows;
  return ks_tensor_from_host (e->value, &result, sizeof result, error);
}

static gboolean
dropout_forward (KsExpr *e, GError **error)
{
  KsModel *model = e->model;
  KsCompute *c = DEV (e);
  const KsExpr *x = e->in[0];

  e->attr = model->training && e->rate > 0; /* backward follows the mode of this forward */
  if (!e->attr)
    return ks_compute_axpby (c, 1, F (x->value), 0, F (e->value), x->numel, error);
  if (e->aux == NULL
      && (e->aux = ks_tensor_new (c, KS_DTYPE_FLOAT32, x->ndim, x->shape, error)) == NULL)
    return FALSE;
  /* a new stream of draws per run: the seed moved by the counter times an odd constant */
  guint64 seed = e->seed + model->rng_state * G_GUINT64_CONSTANT (0xd1b54a32d192ed03);
  model->rng_drawn = TRUE;
  return ks_compute_dropout_mask (c, F (e->aux), x->numel, e->rate, seed, error)
         && ks_compute_binary (c, KS_BINARY_MUL, F (x->value), F (e->aux), F (e->value), 1,
                               x->numel, 1, error);
}

/* Mixed precision: A and B rounded to the model's 16-bit type into aux (kept for the
 * backward), their product summed in float32. */
static gboolean
matmul_half_forward (KsExpr *e, GError **error)
{
  KsCompute *c = DEV (e);
  const KsExpr *a = e->in[0], *b = e->in[1];
  int m = a->shape[0], k = a->shape[1], n = b->shape[1];
  KsDType half = e->model->half;

  if (e->aux == NULL)
    {
      const gint64 shape[] = { (gint64) (a->numel + b->numel) };
      if ((e->aux = ks_tensor_new (c, half, 1, shape, error)) == NULL)
        return FALSE;
    }
  guint16 *a16 = e->aux->data, *b16 = a16 + a->numel;
  return ks_compute_convert (c, F (a->value), KS_DTYPE_FLOAT32, a16, half, a->numel, error)
         && ks_compute_convert (c, F (b->value), KS_DTYPE_FLOAT32, b16, half, b->numel, error)
         && ks_compute_gemm_half (c, half, KS_TRANS_N, KS_TRANS_N, m, n, k, 1, a16, k, b16, n, 0,
                                  F (e->value), n, error);
}

/* dA += dC B^T, dB += A^T dC with dC rounded too: where float16 overflows or underflows
 * unless the loss is scaled */
static gboolean
matmul_half_backward (KsExpr *e, GError **error)
{
  KsCompute *c = DEV (e);
  KsExpr *a = e->in[0], *b = e->in[1];
  int m = a->shape[0], k = a->shape[1], n = b->shape[1];
  KsDType half = e->model->half;
  const guint16 *a16 = e->aux->data, *b16 = a16 + a->numel;
  guint16 *dc16 = (guint16 *) ks_model_scratch (e->model, (e->numel + 1) / 2, error);

  return dc16 != NULL
         && ks_compute_convert (c, F (e->grad), KS_DTYPE_FLOAT32, dc16, half, e->numel, error)
         && (!a->needs_grad
             || ks_compute_gemm_half (c, half, KS_TRANS_N, KS_TRANS_T, m, k, n, 1, dc16, n, b16,
                                      n, ks_op_grad_beta (a), F (a->grad), k, error))
         && (!b->needs_grad
             || ks_compute_gemm_half (c, half, KS_TRANS_T, KS_TRANS_N, k, n, m, 1, a16, k, dc16,
                                      n, ks_op_grad_beta (b), F (b->grad), n, error));
}

gboolean
ks_op_forward (KsExpr *e, GError **error)
{
  KsCompute *c = DEV (e);
  KsExpr *a = e->in[0], *b = e->in[1];

  switch (e->op)
    {
    case OP_MATMUL:
      if (e->model->half != KS_DTYPE_FLOAT32)
        return matmul_half_forward (e, error);
      return ks_compute_sgemm (c, KS_TRANS_N, KS_TRANS_N, a->shape[0], b->shape[1], a->shape[1],
                               1, F (a->value), a->shape[1], F (b->value), b->shape[1], 0,
                               F (e->value), b->shape[1], error);
    case OP_ADD:
      return ks_compute_binary (c, KS_BINARY_ADD, F (a->value), F (b->value), F (e->value),
                                a->numel / cols_of (a), cols_of (a), b->numel / cols_of (a),
                                error);
    case OP_MUL:
      return ks_compute_binary (c, KS_BINARY_MUL, F (a->value), F (b->value), F (e->value), 1,
                                a->numel, 1, error);
    case OP_UNARY:
      return ks_compute_unary (c, e->attr, F (a->value), F (e->value), a->numel, error);
    case OP_MEAN:
      return ks_compute_reduce (c, KS_REDUCE_AVG, F (a->value), F (e->value), 1, a->numel, 1,
                                error);
    case OP_CROSS_ENTROPY:
      {
        gsize rows = a->shape[0], cols = a->shape[1];
        /* aux keeps softmax - onehot for backward, then the per-row losses */
        const gint64 shape[] = { (gint64) (rows * cols + rows) };
        if (e->aux == NULL
            && (e->aux = ks_tensor_new (c, KS_DTYPE_FLOAT32, 1, shape, error)) == NULL)
          return FALSE;
        float *dlogits = F (e->aux), *losses = dlogits + rows * cols;
        return ks_compute_cross_entropy (c, F (a->value), b->value->data, losses, dlogits, rows,
                                         cols, error)
               && ks_compute_reduce (c, KS_REDUCE_AVG, losses, F (e->value), 1, rows, 1, error);
      }
    case OP_LOGISTIC:
      return logistic_forward (e, error);
    case OP_ACCURACY:
      return accuracy_forward (e, error);
    case OP_EMBEDDING:
      return ks_compute_embedding (c, F (a->value), a->shape[0], b->value->data, F (e->value),
                                   b->numel, a->shape[1], error);
    case OP_LAYER_NORM:
      {
        gsize cols = cols_of (a), rows = a->numel / cols;
        const gint64 shape[] = { (gint64) (2 * rows) };
        if (e->aux == NULL
            && (e->aux = ks_tensor_new (c, KS_DTYPE_FLOAT32, 1, shape, error)) == NULL)
          return FALSE;
        return ks_compute_layer_norm (c, F (a->value), F (b->value), F (e->in[2]->value),
                                      F (e->value), F (e->aux), F (e->aux) + rows, rows, cols,
                                      e->eps, error);
      }
    case OP_ATTENTION:
      return ks_attention_forward (e, error);
    case OP_GRAD:
      return ks_model_sweep (e->model, a, error);
    case OP_SOFTMAX:
      return ks_compute_softmax (c, F (a->value), F (e->value), a->numel / cols_of (a),
                                 cols_of (a), e->attr, error);
    case OP_RESHAPE:
      return ks_compute_axpby (c, 1, F (a->value), 0, F (e->value), a->numel, error);
    case OP_TRANSPOSE:
      return ks_compute_transpose (c, F (a->value), F (e->value), a->ndim, a->shape, e->perm,
                                   error);
    case OP_DROPOUT:
      return dropout_forward (e, error);
    case OP_CONV2D:
    case OP_MAX_POOL:
    case OP_BATCH_NORM:
    case OP_AVG_POOL:
      return ks_conv_op_forward (e, error);
    case OP_PARAMETER:
    case OP_DATA:
      break;
    }
  return TRUE;
}

/* ---- backward ---- */

/* Contributions to a gradient: the sweep does not zero an activation's gradient, so
 * the first contribution writes it (beta 0) and later ones add (beta 1). */
float
ks_op_grad_beta (KsExpr *x)
{
  float beta = x->grad_fresh ? 0 : 1;
  x->grad_fresh = FALSE;
  return beta;
}

gboolean
ks_op_grad_zeroed (KsExpr *x, GError **error)
{
  if (!x->grad_fresh)
    return TRUE;
  x->grad_fresh = FALSE;
  return ks_compute_fill_zero (DEV (x), x->grad->data, ks_tensor_nbytes (x->grad), error);
}

/* x's gradient += src */
static gboolean
add_grad (KsExpr *x, const float *src, GError **error)
{
  return ks_compute_axpby (DEV (x), 1, src, ks_op_grad_beta (x), F (x->grad), x->numel, error);
}

/* Where a kernel that writes (does not add) its result for x's gradient puts it: the
 * gradient itself for the first contribution, else scratch for add_grad afterwards. */
static float *
grad_target (KsExpr *x, GError **error)
{
  return x->grad_fresh ? F (x->grad) : ks_model_scratch (x->model, x->numel, error);
}

/* Completes a grad_target write. */
gboolean
ks_op_grad_written (KsExpr *x, const float *target, GError **error)
{
  return target == F (x->grad) ? (ks_op_grad_beta (x), TRUE) : add_grad (x, target, error);
}

gboolean
ks_op_backward (KsExpr *e, GError **error)
{
  KsCompute *c = DEV (e);
  KsExpr *a = e->in[0], *b = e->in[1];
  float *tmp;

  switch (e->op)
    {
    case OP_MATMUL:
      {
        int m = a->shape[0], k = a->shape[1], n = b->shape[1];
        if (e->model->half != KS_DTYPE_FLOAT32)
          return matmul_half_backward (e, error);
        /* dA += dC B^T, dB += A^T dC */
        return (!a->needs_grad
                || ks_compute_sgemm (c, KS_TRANS_N, KS_TRANS_T, m, k, n, 1, F (e->grad), n,
                                     F (b->value), n, ks_op_grad_beta (a), F (a->grad), k, error))
               && (!b->needs_grad
                   || ks_compute_sgemm (c, KS_TRANS_T, KS_TRANS_N, k, n, m, 1, F (a->value), k,
                                        F (e->grad), n, ks_op_grad_beta (b), F (b->grad), n, error));
      }
    case OP_ADD:
      if (a->needs_grad && !add_grad (a, F (e->grad), error))
        return FALSE;
      if (!b->needs_grad)
        return TRUE;
      if (b->numel == e->numel)
        return add_grad (b, F (e->grad), error);
      /* a broadcast row: its gradient sums over the rows */
      return (tmp = ks_model_scratch (e->model, b->numel, error)) != NULL
             && ks_compute_reduce (c, KS_REDUCE_SUM, F (e->grad), tmp, e->numel / b->numel,
                                   b->numel, 0, error)
             && add_grad (b, tmp, error);
    case OP_MUL:
      /* da += dc * b, db += dc * a (a square, b = a, gets both) */
      return (!a->needs_grad
              || ((tmp = grad_target (a, error)) != NULL
                  && ks_compute_binary (c, KS_BINARY_MUL, F (e->grad), F (b->value), tmp, 1,
                                        e->numel, 1, error)
                  && ks_op_grad_written (a, tmp, error)))
             && (!b->needs_grad
                 || ((tmp = grad_target (b, error)) != NULL
                     && ks_compute_binary (c, KS_BINARY_MUL, F (e->grad), F (a->value), tmp, 1,
                                           e->numel, 1, error)
                     && ks_op_grad_written (b, tmp, error)));
    case OP_UNARY:
      return (tmp = grad_target (a, error)) != NULL
             && ks_compute_unary_backward (c, e->attr, F (a->value), F (e->value), F (e->grad),
                                           tmp, e->numel, error)
             && ks_op_grad_written (a, tmp, error);
    case OP_MEAN:
      /* dx += dy / n, the scalar broadcast on the device */
      return (tmp = ks_model_scratch (e->model, 1, error)) != NULL
             && ks_op_grad_zeroed (a, error)
             && ks_compute_axpby (c, 1.0f / a->numel, F (e->grad), 0, tmp, 1, error)
             && with_scalar (c, KS_BINARY_ADD, F (a->grad), tmp, F (a->grad), a->numel, error);
    case OP_CROSS_ENTROPY:
      {
        gsize rows = a->shape[0], n = a->numel;
        float *scale;
        /* dlogits += (dloss / rows) * (softmax - onehot) */
        if ((scale = ks_model_scratch (e->model, n + 16, error)) == NULL)
          return FALSE;
        scale += n;
        tmp = a->grad_fresh ? F (a->grad) : scale - n;
        return ks_compute_axpby (c, 1.0f / rows, F (e->grad), 0, scale, 1, error)
               && with_scalar (c, KS_BINARY_MUL, F (e->aux), scale, tmp, n, error)
               && ks_op_grad_written (a, tmp, error);
      }
    case OP_ATTENTION:
      return !a->needs_grad || ks_attention_backward (e, ks_op_grad_beta (a), error);
    case OP_EMBEDDING: /* the ids have no gradient; the table's rows add up */
      return !a->needs_grad
             || (ks_op_grad_zeroed (a, error)
                 && ks_compute_embedding_backward (c, F (e->grad), b->value->data, F (a->grad),
                                                   a->shape[0], b->numel, a->shape[1], error));
    case OP_LAYER_NORM:
      {
        KsExpr *beta = e->in[2];
        gsize cols = cols_of (a), rows = a->numel / cols;
        /* dgamma and dbeta are added to by the kernel; dx is written */
        return (tmp = a->needs_grad ? grad_target (a, error)
                                    : ks_model_scratch (e->model, a->numel, error)) != NULL
               && ks_compute_layer_norm_backward (c, F (a->value), F (b->value), F (e->aux),
                                                  F (e->aux) + rows, F (e->grad), tmp,
                                                  b->needs_grad ? F (b->grad) : NULL,
                                                  beta->needs_grad ? F (beta->grad) : NULL, rows,
                                                  cols, error)
               && (!a->needs_grad || ks_op_grad_written (a, tmp, error));
      }
    case OP_SOFTMAX:
      return (tmp = grad_target (a, error)) != NULL
             && ks_compute_softmax_backward (c, F (e->value), F (e->grad), tmp,
                                             e->numel / cols_of (e), cols_of (e), e->attr, error)
             && ks_op_grad_written (a, tmp, error);
    case OP_RESHAPE:
      return add_grad (a, F (e->grad), error);
    case OP_TRANSPOSE:
      {
        int inverse[KS_TENSOR_MAX_DIMS];
        for (int i = 0; i < e->ndim; i++)
          inverse[e->perm[i]] = i;
        return (tmp = grad_target (a, error)) != NULL
               && ks_compute_transpose (c, F (e->grad), tmp, e->ndim, e->shape, inverse, error)
               && ks_op_grad_written (a, tmp, error);
      }
    case OP_DROPOUT:
      if (!e->attr)
        return add_grad (a, F (e->grad), error);
      return (tmp = grad_target (a, error)) != NULL
             && ks_compute_binary (c, KS_BINARY_MUL, F (e->grad), F (e->aux), tmp, 1, e->numel,
                                   1, error)
             && ks_op_grad_written (a, tmp, error);
    case OP_CONV2D:
    case OP_MAX_POOL:
    case OP_BATCH_NORM:
    case OP_AVG_POOL:
      return ks_conv_op_backward (e, error);
    case OP_LOGISTIC:
      return logistic_backward (e, error);
    case OP_ACCURACY:
    case OP_GRAD:
    case OP_PARAMETER:
    case OP_DATA:
      break;
    }
  return TRUE;
}
