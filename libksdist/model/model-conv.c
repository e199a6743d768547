/* The ops of convolutional networks on NHWC images: conv2d (the backend's whole
 * convolution where it has one, else im2col then sgemm a chunk of images at a time), max
 * and average pooling and batch normalisation.
 * Like the other ops (model-ops.c), a backward adds into its inputs' gradients. */
#include "model-private.h"

#include <math.h>
#include <string.h>

#define DEV(e) ((e)->model->compute)
#define F(t) ((float *) (t)->data)

/* ---- building ---- */

static gboolean
require_image (const char *op, const KsExpr *x, GError **error)
{
  g_autofree char *sx = ks_expr_shape_string (x);
  if (x->dtype == KS_DTYPE_FLOAT32 && x->ndim == 4 && x->shape[1] <= G_MAXINT32
      && x->shape[2] <= G_MAXINT32 && x->shape[3] <= G_MAXINT32)
    return TRUE;
  return ks_invalid (error, "%s: '%s' is %s %s; it takes float32 images [batch, height, width, "
                     "channels]", op, x->name, ks_dtype_name (x->dtype), sx);
}

/* The window of `kernel` moved by `stride` with `pad` over x; FALSE with the reason when
 * it does not fit. */
static gboolean
window_over (const char *op, const KsExpr *x, int kernel, int stride, int pad, KsConvShape *s,
             GError **error)
{
  *s = (KsConvShape) { (int) x->shape[0], (int) x->shape[1], (int) x->shape[2],
                       (int) x->shape[3], kernel, kernel, stride, pad, 0, 0 };
  if (kernel < 1 || stride < 1 || pad < 0 || pad >= kernel
      || x->shape[1] + 2 * (gint64) pad < kernel || x->shape[2] + 2 * (gint64) pad < kernel
      || x->shape[1] + 2 * (gint64) pad > G_MAXINT32
      || x->shape[2] + 2 * (gint64) pad > G_MAXINT32 || x->shape[0] > G_MAXINT32)
    {
      g_autofree char *sx = ks_expr_shape_string (x);
      return ks_invalid (error, "%s of '%s' %s: kernel %d, stride %d, pad %d do not fit (kernel "
                         "and stride at least 1, pad in [0, kernel), the padded image at "
                         "least a kernel wide)", op, x->name, sx, kernel, stride, pad);
    }
  s->oh = (int) ((x->shape[1] + 2 * (gint64) pad - kernel) / stride + 1);
  s->ow = (int) ((x->shape[2] + 2 * (gint64) pad - kernel) / stride + 1);
  return TRUE;
}

static KsExpr *
conv2d_on (KsExpr *x, KsExpr *w, KsExpr *b, const KsConvShape *s, GError **error)
{
  KsExpr *in[] = { x, w, b };
  gint64 k = (gint64) s->kh * s->kw * s->c;
  KsExpr *e;

  if (w->dtype != KS_DTYPE_FLOAT32 || b->dtype != KS_DTYPE_FLOAT32 || w->ndim != 2
      || w->shape[0] != k || b->numel != (gsize) w->shape[1])
    {
      g_autofree char *sw = ks_expr_shape_string (w), *sb = ks_expr_shape_string (b);
      ks_invalid (error, "conv2d: weight '%s' %s and bias '%s' %s; a %dx%d kernel over %d "
                  "channels needs [%" G_GINT64_FORMAT ", filters] and [filters]", w->name, sw,
                  b->name, sb, s->kh, s->kw, s->c, k);
      return NULL;
    }
  const gint64 shape[] = { s->n, s->oh, s->ow, w->shape[1] };
  if ((e = ks_op_expr_n (OP_CONV2D, in, 3, 4, shape, error)) != NULL)
    e->conv = *s;
  return e;
}

KsExpr *
ks_conv2d_with (KsExpr *x, KsExpr *w, KsExpr *b, int kernel, int stride, int pad,
                GError **error)
{
  KsConvShape s;
  if (!require_image ("conv2d", x, error) || !window_over ("conv2d", x, kernel, stride, pad, &s,
                                                         error))
    return NULL;
  return conv2d_on (x, w, b, &s, error);
}

KsExpr *
ks_conv2d (KsExpr *x, gint64 filters, int kernel, int stride, int pad, const char *name,
           guint64 seed, GError **error)
{
  KsConvShape s;
  KsExpr *w, *b;

  if (!require_image ("conv2d", x, error) || !window_over ("conv2d", x, kernel, stride, pad, &s,
                                                         error))
    return NULL;
  if (filters < 1 || filters > G_MAXINT32)
    return ks_invalid (error, "conv2d '%s': %" G_GINT64_FORMAT " filters; at least 1", name,
                       filters), NULL;
  gint64 k = (gint64) kernel * kernel * s.c;
  /* TensorFlow's glorot_uniform for a conv kernel counts the window in both fans */
  double limit = sqrt (6.0 / ((double) k + (double) kernel * kernel * filters));
  const gint64 wshape[] = { k, filters }, bshape[] = { filters };
  g_autofree char *wname = g_strdup_printf ("%s.w", name);
  g_autofree char *bname = g_strdup_printf ("%s.b", name);
  KsInit glorot = { KS_INIT_UNIFORM, -limit, limit, seed }, zero = { KS_INIT_CONSTANT, 0, 0, 0 };
  if ((w = ks_model_parameter (x->model, wname, 2, wshape, glorot, error)) == NULL
      || (b = ks_model_parameter (x->model, bname, 1, bshape, zero, error)) == NULL)
    return NULL;
  return conv2d_on (x, w, b, &s, error);
}

KsExpr *
ks_max_pool (KsExpr *x, int kernel, int stride, GError **error)
{
  KsConvShape s;
  KsExpr *e;

  if (!require_image ("max pool", x, error)
      || !window_over ("max pool", x, kernel, stride, 0, &s, error))
    return NULL;
  const gint64 shape[] = { s.n, s.oh, s.ow, s.c };
  if ((e = ks_op_expr_n (OP_MAX_POOL, &x, 1, 4, shape, error)) != NULL)
    e->conv = s;
  return e;
}

KsExpr *
ks_avg_pool (KsExpr *x, int kernel, int stride, int pad, GError **error)
{
  KsConvShape s;
  KsExpr *e;

  if (!require_image ("avg pool", x, error)
      || !window_over ("avg pool", x, kernel, stride, pad, &s, error))
    return NULL;
  const gint64 shape[] = { s.n, s.oh, s.ow, s.c };
  if ((e = ks_op_expr_n (OP_AVG_POOL, &x, 1, 4, shape, error)) != NULL)
    e->conv = s;
  return e;
}

/* Whether batch norm can normalise x; the reason when not. */
static gboolean
batch_norm_fits (const char *name, const KsExpr *x, float momentum, float eps, GError **error)
{
  if (x->dtype != KS_DTYPE_FLOAT32 || x->ndim < 2)
    {
      g_autofree char *sx = ks_expr_shape_string (x);
      return ks_invalid (error, "batch norm '%s': '%s' is %s %s; it takes float32 of at least "
                         "2 dimensions, channels last", name, x->name,
                         ks_dtype_name (x->dtype), sx);
    }
  if (!(momentum >= 0 && momentum <= 1) || !(eps > 0))
    return ks_invalid (error, "batch norm '%s': momentum %g must be in [0, 1] and eps %g "
                       "above 0", name, momentum, eps);
  return TRUE;
}

KsExpr *
ks_batch_norm_with (KsExpr *x, KsExpr *const *state, float momentum, float eps, GError **error)
{
  KsExpr *in[5] = { x, state[0], state[1], state[2], state[3] };
  KsExpr *e;

  if (!batch_norm_fits (x->name, x, momentum, eps, error))
    return NULL;
  for (int i = 1; i < 5; i++)
    if (in[i]->op != OP_PARAMETER || in[i]->ndim != 1
        || in[i]->shape[0] != x->shape[x->ndim - 1])
      {
        g_autofree char *sp = ks_expr_shape_string (in[i]);
        return ks_invalid (error, "batch norm of '%s': '%s' %s must be a parameter of one "
                           "value per channel", x->name, in[i]->name, sp), NULL;
      }
  if ((e = ks_op_expr_n (OP_BATCH_NORM, in, 5, x->ndim, x->shape, error)) == NULL)
    return NULL;
  e->momentum = momentum, e->eps = eps;
  in[3]->buffer = in[4]->buffer = TRUE;
  return e;
}

KsExpr *
ks_batch_norm (KsExpr *x, const char *name, float momentum, float eps, GError **error)
{
  static const char *const suffixes[] = { "gamma", "beta", "running_mean", "running_var" };
  static const double fills[] = { 1, 0, 0, 1 };
  KsExpr *state[4];

  if (!batch_norm_fits (name, x, momentum, eps, error))
    return NULL;
  const gint64 shape[] = { x->shape[x->ndim - 1] };
  for (int i = 0; i < 4; i++)
    {
      g_autofree char *pname = g_strdup_printf ("%s.%s", name, suffixes[i]);
      KsInit fill = { KS_INIT_CONSTANT, fills[i], 0, 0 };
      if ((state[i] = ks_model_parameter (x->model, pname, 1, shape, fill, error)) == NULL)
        return NULL;
    }
  return ks_batch_norm_with (x, state, momentum, eps, error);
}

KsExpr *
ks_flatten (KsExpr *x, GError **error)
{
  if (x->ndim < 1)
    return ks_invalid (error, "flatten: '%s' is a scalar", x->name), NULL;
  const gint64 shape[] = { x->shape[0], x->shape[0] > 0 ? (gint64) x->numel / x->shape[0] : 0 };
  return ks_reshape (x, 2, shape, error);
}

/* ---- running ---- */

/* Per-op scratch of rows x cols (2-D, so the tensor's own size check sees the product). */
static gboolean
ensure_aux (KsExpr *e, KsDType dtype, gsize rows, gsize cols, GError **error)
{
  const gint64 shape[] = { (gint64) rows, (gint64) cols };
  return e->aux != NULL || (e->aux = ks_tensor_new (DEV (e), dtype, 2, shape, error)) != NULL;
}

/* Rows (pixels of the batch) and columns (channels) of a channels-last tensor. */
static gsize
channels (const KsExpr *e)
{
  return (gsize) e->shape[e->ndim - 1];
}

/* The images of the batch whose patches one im2col holds. A backend with no queue of its
 * own (OpenBLAS: each call runs on the host and returns) takes a few images at a time, so
 * that their patches stay in the cache between the im2col that writes them and the sgemm
 * that reads them (the whole batch's, 40 MB for the second conv of examples/cnn-idx.ini,
 * would go through memory twice more); a GPU (CUDA's stream) takes the whole batch in one
 * large call. 1 MB (3 images there) measured as fast as 256 KB at one thread on a 2-core
 * EPYC VM (512 KB of L2 a core) and faster at two, each sgemm larger to split. */
enum { CONV_CHUNK_BYTES = 1 << 20 };
static gsize
conv_chunk (const KsExpr *e)
{
  gsize per_image = (gsize) e->conv.oh * e->conv.ow * e->in[1]->shape[0] * sizeof (float);
  if (ks_compute_native_stream (DEV (e)) != NULL)
    return e->conv.n;
  return CLAMP (CONV_CHUNK_BYTES / MAX (per_image, 1), 1, (gsize) e->conv.n);
}

/* The images [first, first + chunk) of the conv's batch (fewer at its end), as their own
 * shape. */
static KsConvShape
conv_images (const KsExpr *e, gsize first, gsize chunk)
{
  KsConvShape s = e->conv;
  s.n = (int) MIN (chunk, (gsize) e->conv.n - first);
  return s;
}

/* y = im2col (x) W + b, a chunk of images at a time; aux keeps the last chunk's patches
 * (with a single chunk, the backward's). */
static gboolean
conv2d_forward (KsExpr *e, GError **error)
{
  KsCompute *c = DEV (e);
  const KsExpr *w = e->in[1], *b = e->in[2];
  gsize k = w->shape[0], f = channels (e), chunk = conv_chunk (e);
  gsize out_pixels = (gsize) e->conv.oh * e->conv.ow;
  gsize in_floats = (gsize) e->conv.h * e->conv.w * e->conv.c;

  if (ks_compute_has_conv2d (c)) /* the backend's own chunks, on its threads */
    return ks_compute_conv2d (c, F (e->in[0]->value), F (w->value), F (b->value), F (e->value),
                              (int) f, &e->conv, error);
  if (!ensure_aux (e, KS_DTYPE_FLOAT32, chunk * out_pixels, k, error))
    return FALSE;
  for (gsize first = 0; first < (gsize) e->conv.n; first += chunk)
    {
      KsConvShape s = conv_images (e, first, chunk);
      gsize rows = (gsize) s.n * out_pixels;
      float *y = F (e->value) + first * out_pixels * f;
      if (!ks_compute_im2col (c, F (e->in[0]->value) + first * in_floats, F (e->aux), &s, error)
          || !ks_compute_sgemm (c, KS_TRANS_N, KS_TRANS_N, rows, f, k, 1, F (e->aux), k,
                                F (w->value), f, 0, y, f, error)
          || !ks_compute_binary (c, KS_BINARY_ADD, y, F (b->value), y, rows, f, 1, error))
        return FALSE;
    }
  return TRUE;
}

/* The running statistics move toward the batch's: r = (1 - m) r + m batch, the variance
 * unbiased (n / (n - 1)) as PyTorch keeps it. They feed only evaluation mode, which
 * recomputes when the mode changes (ks_model_set_training), so their version stays. */
static gboolean
batch_norm_forward (KsExpr *e, GError **error)
{
  KsCompute *c = DEV (e);
  gsize cols = channels (e), rows = e->numel / cols;
  KsExpr *x = e->in[0], *gamma = e->in[1], *beta = e->in[2];
  float *run_mean = F (e->in[3]->value), *run_var = F (e->in[4]->value);
  gboolean training = e->model->training;
  double unbias = rows > 1 ? (double) rows / (rows - 1) : 1;

  if (!ensure_aux (e, KS_DTYPE_FLOAT32, 2, cols, error))
    return FALSE;
  e->attr = training; /* backward follows the mode of this forward */
  float *mean = training ? F (e->aux) : run_mean, *var = training ? F (e->aux) + cols : run_var;
  return ks_compute_batch_norm (c, F (x->value), F (gamma->value), F (beta->value),
                                F (e->value), mean, var, rows, cols, e->eps, training, error)
         && (!training
             || (ks_compute_axpby (c, e->momentum, mean, 1 - e->momentum, run_mean, cols, error)
                 && ks_compute_axpby (c, (float) (e->momentum * unbias), var, 1 - e->momentum,
                                      run_var, cols, error)));
}

gboolean
ks_conv_op_forward (KsExpr *e, GError **error)
{
  switch (e->op)
    {
    case OP_CONV2D:
      return conv2d_forward (e, error);
    case OP_MAX_POOL:
      return ensure_aux (e, KS_DTYPE_INT64, e->numel, 1, error)
             && ks_compute_max_pool (DEV (e), F (e->in[0]->value), F (e->value), e->aux->data,
                                     &e->conv, error);
    case OP_AVG_POOL:
      return ks_compute_avg_pool (DEV (e), F (e->in[0]->value), F (e->value), &e->conv, error);
    case OP_BATCH_NORM:
      return batch_norm_forward (e, error);
    default:
      return ks_invalid (error, "%s is not an op of model-conv.c", ks_op_name (e->op));
    }
}

/* dW += col^T dy and dcol = dy W^T folded back onto x (col2im), a chunk of images at a
 * time as in the forward: each chunk's patches made again (the forward kept only the
 * last chunk's, which is all of them when there is one); db += the sum of dy's rows. */
static gboolean
conv2d_backward (KsExpr *e, GError **error)
{
  KsCompute *c = DEV (e);
  KsExpr *x = e->in[0], *w = e->in[1], *b = e->in[2];
  gsize k = w->shape[0], f = channels (e), pixels = e->numel / f, chunk = conv_chunk (e);
  gsize out_pixels = (gsize) e->conv.oh * e->conv.ow;
  gsize in_floats = (gsize) e->conv.h * e->conv.w * e->conv.c;
  gboolean one_chunk = chunk == (gsize) e->conv.n, whole = ks_compute_has_conv2d (c);
  const float *dy = F (e->grad);
  /* scratch: the bias's sums, then a chunk's patch gradients, then x's if not fresh */
  gsize n_dcol = x->needs_grad && !whole ? chunk * out_pixels * k : 0;
  gsize n_dx = x->needs_grad && !x->grad_fresh ? x->numel : 0;
  float *scratch = ks_model_scratch (e->model, f + n_dcol + n_dx, error);

  if (scratch == NULL)
    return FALSE;
  float *db = scratch, *dcol = scratch + f, *dx = n_dx > 0 ? dcol + n_dcol : NULL;
  if (b->needs_grad
      && (!ks_compute_reduce (c, KS_REDUCE_SUM, dy, db, pixels, f, 0, error)
          || !ks_compute_axpby (c, 1, db, ks_op_grad_beta (b), F (b->grad), f, error)))
    return FALSE;
  if (x->needs_grad && dx == NULL)
    dx = F (x->grad);
  float w_beta = w->needs_grad ? ks_op_grad_beta (w) : 0;
  if (whole)
    return ks_compute_conv2d_backward (c, F (x->value), F (w->value), dy,
                                       x->needs_grad ? dx : NULL,
                                       w->needs_grad ? F (w->grad) : NULL, w_beta, (int) f,
                                       &e->conv, error)
           && (!x->needs_grad || ks_op_grad_written (x, dx, error));
  for (gsize first = 0; first < (gsize) e->conv.n; first += chunk)
    {
      KsConvShape s = conv_images (e, first, chunk);
      gsize rows = (gsize) s.n * out_pixels;
      const float *dy_rows = dy + first * out_pixels * f;
      if (w->needs_grad
          && ((!one_chunk
               && !ks_compute_im2col (c, F (x->value) + first * in_floats, F (e->aux), &s,
                                      error))
              || !ks_compute_sgemm (c, KS_TRANS_T, KS_TRANS_N, k, f, rows, 1, F (e->aux), k,
                                    dy_rows, f, first == 0 ? w_beta : 1, F (w->grad), f,
                                    error)))
        return FALSE;
      if (x->needs_grad
          && (!ks_compute_sgemm (c, KS_TRANS_N, KS_TRANS_T, rows, k, f, 1, dy_rows, f,
                                 F (w->value), f, 0, dcol, k, error)
              || !ks_compute_col2im (c, dcol, dx + first * in_floats, &s, error)))
        return FALSE;
    }
  return !x->needs_grad || ks_op_grad_written (x, dx, error);
}

static gboolean
batch_norm_backward (KsExpr *e, GError **error)
{
  KsExpr *x = e->in[0], *gamma = e->in[1], *beta = e->in[2];
  gsize cols = channels (e), rows = e->numel / cols;
  gboolean training = e->attr;
  const float *mean = training ? F (e->aux) : F (e->in[3]->value);
  const float *var = training ? F (e->aux) + cols : F (e->in[4]->value);
  float *dx = !x->needs_grad || !x->grad_fresh ? ks_model_scratch (e->model, x->numel, error)
                                               : F (x->grad);

  /* dgamma and dbeta (parameters: their gradients start zeroed) are added to by the
   * kernel; dx is written */
  return dx != NULL
         && ks_compute_batch_norm_backward (DEV (e), F (x->value), F (gamma->value), mean, var,
                                            F (e->grad), dx,
                                            gamma->needs_grad ? F (gamma->grad) : NULL,
                                            beta->needs_grad ? F (beta->grad) : NULL, rows,
                                            cols, e->eps, training, error)
         && (!x->needs_grad || ks_op_grad_written (x, dx, error));
}

gboolean
ks_conv_op_backward (KsExpr *e, GError **error)
{
  KsExpr *x = e->in[0];
  switch (e->op)
    {
    case OP_CONV2D:
      return conv2d_backward (e, error);
    case OP_MAX_POOL: /* each output's gradient goes to the pixel that was its maximum */
      return !x->needs_grad
             || (ks_op_grad_zeroed (x, error)
                 && ks_compute_embedding_backward (DEV (e), F (e->grad), e->aux->data,
                                                   F (x->grad), x->numel, e->numel, 1, error));
    case OP_AVG_POOL: /* each output's gradient spread over its window */
      {
        float *dx;
        return !x->needs_grad
               || ((dx = x->grad_fresh ? F (x->grad) : ks_model_scratch (e->model, x->numel,
                                                                        error)) != NULL
                   && ks_compute_avg_pool_backward (DEV (e), F (e->grad), dx, &e->conv, error)
                   && ks_op_grad_written (x, dx, error));
      }
    case OP_BATCH_NORM:
      return batch_norm_backward (e, error);
    default:
      return ks_invalid (error, "%s is not an op of model-conv.c", ks_op_name (e->op));
    }
}
