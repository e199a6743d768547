/* The compute backend as the rest of ksdist calls it: every method through a slot check. */
#include "ks-private.h"

#define OPS(c) KS_INSTANCE_OPS (&(c)->instance, KsComputeOps)
#define CTX(c) ((c)->instance.ctx)
#define REQUIRE(c, field, error) KS_REQUIRE_SLOT (&(c)->instance, KsComputeOps, field, error)

KsCompute *
ks_compute_new (KsRegistry *registry, const KsConfig *config, const char *name, GError **error)
{
  if (name == NULL)
    name = ks_config_get_string (config, "compute", "backend");
  return (KsCompute *) ks_instance_new (registry, config, KS_KIND_COMPUTE, name,
                                        sizeof (KsCompute), error);
}

void
ks_compute_free (KsCompute *compute)
{
  ks_instance_free ((KsInstance *) compute);
}

const char *
ks_compute_plugin (const KsCompute *compute)
{
  return compute->instance.plugin->name;
}

char *
ks_compute_describe (KsCompute *compute)
{
  if (KS_OPS_HAS (OPS (compute), KsComputeOps, describe))
    return OPS (compute)->describe (CTX (compute));
  return g_strdup_printf ("%s (plugin %s)", compute->instance.impl->name,
                          ks_compute_plugin (compute));
}

void *
ks_compute_alloc (KsCompute *compute, gsize nbytes, GError **error)
{
  return OPS (compute)->alloc (CTX (compute), nbytes, error);
}

void
ks_compute_free_memory (KsCompute *compute, void *ptr)
{
  if (ptr != NULL)
    OPS (compute)->free (CTX (compute), ptr);
}

gboolean
ks_compute_copy_to_device (KsCompute *compute, void *dst, const void *src, gsize nbytes,
                           GError **error)
{
  compute->to_device++;
  return OPS (compute)->copy_to_device (CTX (compute), dst, src, nbytes, error);
}

gboolean
ks_compute_copy_to_host (KsCompute *compute, void *dst, const void *src, gsize nbytes,
                         GError **error)
{
  compute->to_host++;
  return OPS (compute)->copy_to_host (CTX (compute), dst, src, nbytes, error);
}

void
ks_compute_transfers (const KsCompute *compute, guint64 *to_device, guint64 *to_host)
{
  *to_device = compute->to_device;
  *to_host = compute->to_host;
}

gboolean
ks_compute_fill_zero (KsCompute *compute, void *ptr, gsize nbytes, GError **error)
{
  REQUIRE (compute, fill_zero, error);
  return OPS (compute)->fill_zero (CTX (compute), ptr, nbytes, error);
}

gboolean
ks_compute_synchronize (KsCompute *compute, GError **error)
{
  REQUIRE (compute, synchronize, error);
  return OPS (compute)->synchronize (CTX (compute), error);
}

gboolean
ks_compute_set_threads (KsCompute *compute, int n_threads, GError **error)
{
  REQUIRE (compute, set_threads, error);
  return OPS (compute)->set_threads (CTX (compute), n_threads, error);
}

/* Row-major shapes: op(A) is m x k, so A is m x k (lda >= k) or k x m (lda >= m). */
static gboolean
check_gemm (KsTranspose ta, KsTranspose tb, int m, int n, int k, int lda, int ldb, int ldc,
            GError **error)
{
  int need_a = ta == KS_TRANS_N ? k : m;
  int need_b = tb == KS_TRANS_N ? n : k;

  if (m < 0 || n < 0 || k < 0 || lda < MAX (1, need_a) || ldb < MAX (1, need_b)
      || ldc < MAX (1, n))
    return ks_invalid (error,
                       "sgemm: bad shape m=%d n=%d k=%d lda=%d ldb=%d ldc=%d (row-major: lda "
                       "must be at least %d, ldb at least %d, ldc at least %d)",
                       m, n, k, lda, ldb, ldc, MAX (1, need_a), MAX (1, need_b), MAX (1, n));
  return TRUE;
}

gboolean
ks_compute_sgemm (KsCompute *compute, KsTranspose ta, KsTranspose tb, int m, int n, int k,
                  float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                  float *c, int ldc, GError **error)
{
  REQUIRE (compute, sgemm, error);
  if (!check_gemm (ta, tb, m, n, k, lda, ldb, ldc, error))
    return FALSE;
  return OPS (compute)->sgemm (CTX (compute), ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                               ldc, error);
}

gboolean
ks_compute_sgemm_strided_batched (KsCompute *compute, KsTranspose ta, KsTranspose tb, int m,
                                  int n, int k, float alpha, const float *a, int lda,
                                  gint64 stride_a, const float *b, int ldb, gint64 stride_b,
                                  float beta, float *c, int ldc, gint64 stride_c, int batch,
                                  GError **error)
{
  REQUIRE (compute, sgemm_strided_batched, error);
  if (!check_gemm (ta, tb, m, n, k, lda, ldb, ldc, error))
    return FALSE;
  if (batch < 0)
    return ks_invalid (error, "sgemm_strided_batched: negative batch count %d", batch);
  return OPS (compute)->sgemm_strided_batched (CTX (compute), ta, tb, m, n, k, alpha, a, lda,
                                               stride_a, b, ldb, stride_b, beta, c, ldc,
                                               stride_c, batch, error);
}

/* ---- kernels of training ---- */

gboolean
ks_compute_unary (KsCompute *compute, KsUnaryOp op, const float *x, float *y, gsize n,
                  GError **error)
{
  REQUIRE (compute, unary, error);
  return OPS (compute)->unary (CTX (compute), op, x, y, n, error);
}

gboolean
ks_compute_unary_backward (KsCompute *compute, KsUnaryOp op, const float *x, const float *y,
                           const float *dy, float *dx, gsize n, GError **error)
{
  REQUIRE (compute, unary_backward, error);
  return OPS (compute)->unary_backward (CTX (compute), op, x, y, dy, dx, n, error);
}

gboolean
ks_compute_binary (KsCompute *compute, KsBinaryOp op, const float *a, const float *b, float *c,
                   gsize rows, gsize cols, gsize b_rows, GError **error)
{
  REQUIRE (compute, binary, error);
  if (b_rows != 1 && b_rows != rows)
    return ks_invalid (error,
                       "binary: b has %" G_GSIZE_FORMAT " rows; it needs 1 (broadcast) or %"
                       G_GSIZE_FORMAT " (as a)", b_rows, rows);
  return OPS (compute)->binary (CTX (compute), op, a, b, c, rows, cols, b_rows, error);
}

gboolean
ks_compute_reduce (KsCompute *compute, KsReduceOp op, const float *x, float *y, gsize rows,
                   gsize cols, int axis, GError **error)
{
  REQUIRE (compute, reduce, error);
  if (axis != 0 && axis != 1)
    return ks_invalid (error, "reduce: axis %d; it is 0 (over rows) or 1 (over columns)", axis);
  return OPS (compute)->reduce (CTX (compute), op, x, y, rows, cols, axis, error);
}

gboolean
ks_compute_softmax (KsCompute *compute, const float *x, float *y, gsize rows, gsize cols,
                    gboolean log_softmax, GError **error)
{
  REQUIRE (compute, softmax, error);
  return OPS (compute)->softmax (CTX (compute), x, y, rows, cols, log_softmax, error);
}

gboolean
ks_compute_softmax_backward (KsCompute *compute, const float *y, const float *dy, float *dx,
                             gsize rows, gsize cols, gboolean log_softmax, GError **error)
{
  REQUIRE (compute, softmax_backward, error);
  return OPS (compute)->softmax_backward (CTX (compute), y, dy, dx, rows, cols, log_softmax,
                                          error);
}

gboolean
ks_compute_layer_norm (KsCompute *compute, const float *x, const float *gamma, const float *beta,
                       float *y, float *mean, float *rstd, gsize rows, gsize cols, float eps,
                       GError **error)
{
  REQUIRE (compute, layer_norm, error);
  return OPS (compute)->layer_norm (CTX (compute), x, gamma, beta, y, mean, rstd, rows, cols, eps,
                                    error);
}

gboolean
ks_compute_layer_norm_backward (KsCompute *compute, const float *x, const float *gamma,
                                const float *mean, const float *rstd, const float *dy, float *dx,
                                float *dgamma, float *dbeta, gsize rows, gsize cols,
                                GError **error)
{
  REQUIRE (compute, layer_norm_backward, error);
  return OPS (compute)->layer_norm_backward (CTX (compute), x, gamma, mean, rstd, dy, dx, dgamma,
                                             dbeta, rows, cols, error);
}

gboolean
ks_compute_embedding (KsCompute *compute, const float *table, gsize n_rows, const gint64 *ids,
                      float *out, gsize n_ids, gsize dim, GError **error)
{
  REQUIRE (compute, embedding, error);
  return OPS (compute)->embedding (CTX (compute), table, n_rows, ids, out, n_ids, dim, error);
}

gboolean
ks_compute_embedding_backward (KsCompute *compute, const float *dout, const gint64 *ids,
                               float *dtable, gsize n_rows, gsize n_ids, gsize dim, GError **error)
{
  REQUIRE (compute, embedding_backward, error);
  return OPS (compute)->embedding_backward (CTX (compute), dout, ids, dtable, n_rows, n_ids, dim,
                                            error);
}

gboolean
ks_compute_cross_entropy (KsCompute *compute, const float *logits, const gint64 *labels,
                          float *losses, float *dlogits, gsize rows, gsize cols, GError **error)
{
  REQUIRE (compute, cross_entropy, error);
  return OPS (compute)->cross_entropy (CTX (compute), logits, labels, losses, dlogits, rows, cols,
                                       error);
}

gboolean
ks_compute_update (KsCompute *compute, const KsUpdateArgs *args, float *param, const float *grad,
                   float *state1, float *state2, gsize n, GError **error)
{
  static const char *const names[] = { "sgd", "momentum", "adagrad", "adam", "adamw" };
  static const int states[] = { 0, 1, 1, 2, 2 }; /* state buffers each rule needs */

  REQUIRE (compute, update, error);
  if (args->size < sizeof (KsUpdateArgs))
    return ks_invalid (error,
                       "update: KsUpdateArgs of %" G_GSIZE_FORMAT " bytes, expected %"
                       G_GSIZE_FORMAT ": set args.size = sizeof (KsUpdateArgs)",
                       args->size, sizeof (KsUpdateArgs));
  if ((guint) args->rule > KS_UPDATE_ADAMW)
    return ks_invalid (error, "update: unknown rule %d", args->rule);
  if ((states[args->rule] >= 1 && state1 == NULL) || (states[args->rule] >= 2 && state2 == NULL))
    return ks_invalid (error, "update: rule %s needs %d state buffer(s)", names[args->rule],
                       states[args->rule]);
  if (states[args->rule] == 2 && args->step < 1) /* Adam's bias correction divides by zero */
    return ks_invalid (error, "update: rule %s needs step >= 1 (it is %" G_GINT64_FORMAT ")",
                       names[args->rule], args->step);
  return OPS (compute)->update (CTX (compute), args, param, grad, state1, state2, n, error);
}

gboolean
ks_compute_axpby (KsCompute *compute, float alpha, const float *x, float beta, float *y, gsize n,
                  GError **error)
{
  REQUIRE (compute, axpby, error);
  return OPS (compute)->axpby (CTX (compute), alpha, x, beta, y, n, error);
}

int
ks_permutation_flaw (int ndim, const int *perm)
{
  guint seen = 0;
  for (int i = 0; i < ndim; i++)
    {
      if (perm[i] < 0 || perm[i] >= ndim || (seen & (1u << perm[i])))
        return i;
      seen |= 1u << perm[i];
    }
  return -1;
}

gboolean
ks_compute_transpose (KsCompute *compute, const float *x, float *y, int ndim, const gint64 *shape,
                      const int *perm, GError **error)
{
  REQUIRE (compute, transpose, error);
  if (ndim < 1 || ndim > KS_TENSOR_MAX_DIMS || ks_permutation_flaw (ndim, perm) >= 0)
    return ks_invalid (error, "transpose: perm must order the %d dimensions 0 .. %d, each "
                       "once (1 to %d dimensions)", ndim, ndim - 1, KS_TENSOR_MAX_DIMS);
  return OPS (compute)->transpose (CTX (compute), x, y, ndim, shape, perm, error);
}

gboolean
ks_compute_dropout_mask (KsCompute *compute, float *mask, gsize n, float p, guint64 seed,
                         GError **error)
{
  REQUIRE (compute, dropout_mask, error);
  if (!(p >= 0 && p < 1))
    return ks_invalid (error, "dropout: rate %g; it is in [0, 1)", p);
  return OPS (compute)->dropout_mask (CTX (compute), mask, n, p, seed, error);
}

/* Whether s describes windows that fit: positive sizes, and oh x ow as the formula gives. */
static gboolean
conv_shape_valid (const KsConvShape *s, GError **error)
{
  /* in 64 bits: sizes near 2^31 must not wrap; a pad below the kernel keeps every window
   * partly on the image */
  gint64 ph = (gint64) s->h + 2 * (gint64) s->pad, pw = (gint64) s->w + 2 * (gint64) s->pad;
  if (s->n > 0 && s->h > 0 && s->w > 0 && s->c > 0 && s->kh > 0 && s->kw > 0 && s->stride > 0
      && s->pad >= 0 && s->pad < s->kh && s->pad < s->kw && ph >= s->kh && pw >= s->kw
      && s->oh == (ph - s->kh) / s->stride + 1 && s->ow == (pw - s->kw) / s->stride + 1)
    return TRUE;
  return ks_invalid (error, "window %dx%d, stride %d, pad %d over %d images of %dx%dx%d giving "
                     "%dx%d: not a valid shape", s->kh, s->kw, s->stride, s->pad, s->n, s->h,
                     s->w, s->c, s->oh, s->ow);
}

gboolean
ks_compute_im2col (KsCompute *compute, const float *x, float *col, const KsConvShape *s,
                   GError **error)
{
  REQUIRE (compute, im2col, error);
  return conv_shape_valid (s, error) && OPS (compute)->im2col (CTX (compute), x, col, s, error);
}

gboolean
ks_compute_col2im (KsCompute *compute, const float *col, float *dx, const KsConvShape *s,
                   GError **error)
{
  REQUIRE (compute, col2im, error);
  return conv_shape_valid (s, error) && OPS (compute)->col2im (CTX (compute), col, dx, s, error);
}

gboolean
ks_compute_has_conv2d (KsCompute *compute)
{
  return KS_OPS_HAS (OPS (compute), KsComputeOps, conv2d)
         && KS_OPS_HAS (OPS (compute), KsComputeOps, conv2d_backward);
}

static gboolean
filters_valid (int filters, GError **error)
{
  return filters > 0 || ks_invalid (error, "conv2d: %d filters; at least 1", filters);
}

gboolean
ks_compute_conv2d (KsCompute *compute, const float *x, const float *w, const float *b, float *y,
                   int filters, const KsConvShape *s, GError **error)
{
  REQUIRE (compute, conv2d, error);
  return conv_shape_valid (s, error) && filters_valid (filters, error)
         && OPS (compute)->conv2d (CTX (compute), x, w, b, y, filters, s, error);
}

gboolean
ks_compute_conv2d_backward (KsCompute *compute, const float *x, const float *w, const float *dy,
                            float *dx, float *dw, float w_beta, int filters,
                            const KsConvShape *s, GError **error)
{
  REQUIRE (compute, conv2d_backward, error);
  return conv_shape_valid (s, error) && filters_valid (filters, error)
         && OPS (compute)->conv2d_backward (CTX (compute), x, w, dy, dx, dw, w_beta, filters, s,
                                            error);
}

gboolean
ks_compute_max_pool (KsCompute *compute, const float *x, float *y, gint64 *argmax,
                     const KsConvShape *s, GError **error)
{
  REQUIRE (compute, max_pool, error);
  if (s->pad != 0)
    return ks_invalid (error, "max pool: padding %d; its windows must lie inside the image",
                       s->pad);
  return conv_shape_valid (s, error)
         && OPS (compute)->max_pool (CTX (compute), x, y, argmax, s, error);
}

gboolean
ks_compute_avg_pool (KsCompute *compute, const float *x, float *y, const KsConvShape *s,
                     GError **error)
{
  REQUIRE (compute, avg_pool, error);
  return conv_shape_valid (s, error) && OPS (compute)->avg_pool (CTX (compute), x, y, s, error);
}

gboolean
ks_compute_avg_pool_backward (KsCompute *compute, const float *dy, float *dx,
                              const KsConvShape *s, GError **error)
{
  REQUIRE (compute, avg_pool_backward, error);
  return conv_shape_valid (s, error)
         && OPS (compute)->avg_pool_backward (CTX (compute), dy, dx, s, error);
}

gboolean
ks_compute_batch_norm (KsCompute *compute, const float *x, const float *gamma, const float *beta,
                       float *y, float *mean, float *var, gsize rows, gsize cols, float eps,
                       gboolean training, GError **error)
{
  REQUIRE (compute, batch_norm, error);
  return OPS (compute)->batch_norm (CTX (compute), x, gamma, beta, y, mean, var, rows, cols, eps,
                                    training, error);
}

gboolean
ks_compute_batch_norm_backward (KsCompute *compute, const float *x, const float *gamma,
                                const float *mean, const float *var, const float *dy, float *dx,
                                float *dgamma, float *dbeta, gsize rows, gsize cols, float eps,
                                gboolean training, GError **error)
{
  REQUIRE (compute, batch_norm_backward, error);
  return OPS (compute)->batch_norm_backward (CTX (compute), x, gamma, mean, var, dy, dx, dgamma,
                                             dbeta, rows, cols, eps, training, error);
}

gboolean
ks_compute_supports_op (KsCompute *compute, const char *op, const char *layer, GError **error)
{
  const KsComputeOps *ops = OPS (compute);
  const char *lacks = NULL;

  if (strcmp (op, "conv2d") == 0)
    lacks = !KS_OPS_HAS (ops, KsComputeOps, im2col)   ? "im2col"
            : !KS_OPS_HAS (ops, KsComputeOps, col2im) ? "col2im"
                                                      : NULL;
  else if (strcmp (op, "max_pool") == 0)
    lacks = !KS_OPS_HAS (ops, KsComputeOps, max_pool) ? "max_pool" : NULL;
  else if (strcmp (op, "avg_pool") == 0)
    lacks = !KS_OPS_HAS (ops, KsComputeOps, avg_pool)            ? "avg_pool"
            : !KS_OPS_HAS (ops, KsComputeOps, avg_pool_backward) ? "avg_pool_backward"
                                                                 : NULL;
  else if (strcmp (op, "batch_norm") == 0)
    lacks = !KS_OPS_HAS (ops, KsComputeOps, batch_norm)            ? "batch_norm"
            : !KS_OPS_HAS (ops, KsComputeOps, batch_norm_backward) ? "batch_norm_backward"
                                                                   : NULL;
  if (lacks == NULL)
    return TRUE;
  g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
               "%s: a %s layer needs compute.%s, which the compute backend '%s' (plugin %s) "
               "does not have: set [compute] backend to one that has it (openblas has every "
               "layer; `ksdist plugins` lists the backends)",
               layer, op, lacks, compute->instance.impl->name, ks_compute_plugin (compute));
  return FALSE;
}

gboolean
ks_compute_has_attention (KsCompute *compute)
{
  return KS_OPS_HAS (OPS (compute), KsComputeOps, attention)
         && KS_OPS_HAS (OPS (compute), KsComputeOps, attention_backward);
}

static gboolean
attention_shape_valid (const KsAttentionShape *s, GError **error)
{
  /* each factor within what is left of G_MAXINT, so no product can overflow */
  gint64 room = G_MAXINT / 3;
  const int factors[] = { s->batch, s->tokens, s->heads, s->head_size };
  gboolean valid = TRUE;
  for (gsize i = 0; i < G_N_ELEMENTS (factors) && valid; i++)
    if ((valid = factors[i] > 0 && factors[i] <= room))
      room /= factors[i];
  if (valid)
    return TRUE;
  return ks_invalid (error, "attention: batch %d, %d tokens, %d heads of %d: not a valid shape",
                     s->batch, s->tokens, s->heads, s->head_size);
}

gboolean
ks_compute_attention (KsCompute *compute, const float *qkv, float *out, float *lse,
                      const KsAttentionShape *s, GError **error)
{
  REQUIRE (compute, attention, error);
  return attention_shape_valid (s, error)
         && OPS (compute)->attention (CTX (compute), qkv, out, lse, s, error);
}

gboolean
ks_compute_attention_backward (KsCompute *compute, const float *qkv, const float *lse,
                               const float *dout, float *dqkv, float beta,
                               const KsAttentionShape *s, GError **error)
{
  REQUIRE (compute, attention_backward, error);
  return attention_shape_valid (s, error)
         && OPS (compute)->attention_backward (CTX (compute), qkv, lse, dout, dqkv, beta, s,
                                               error);
}

gboolean
ks_compute_has_half (KsCompute *compute)
{
  return KS_OPS_HAS (OPS (compute), KsComputeOps, convert)
         && KS_OPS_HAS (OPS (compute), KsComputeOps, gemm_half)
         && KS_OPS_HAS (OPS (compute), KsComputeOps, find_nonfinite);
}

static gboolean
is_half (KsDType dtype)
{
  return dtype == KS_DTYPE_BFLOAT16 || dtype == KS_DTYPE_FLOAT16;
}

gboolean
ks_compute_convert (KsCompute *compute, const void *x, KsDType x_dtype, void *y,
                    KsDType y_dtype, gsize n, GError **error)
{
  REQUIRE (compute, convert, error);
  if (!(x_dtype == KS_DTYPE_FLOAT32 && is_half (y_dtype))
      && !(is_half (x_dtype) && y_dtype == KS_DTYPE_FLOAT32))
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "convert: %s to %s; it converts between float32 and bfloat16 or float16",
                   ks_dtype_name (x_dtype), ks_dtype_name (y_dtype));
      return FALSE;
    }
  return OPS (compute)->convert (CTX (compute), x, x_dtype, y, y_dtype, n, error);
}

gboolean
ks_compute_gemm_half (KsCompute *compute, KsDType dtype, KsTranspose trans_a,
                      KsTranspose trans_b, int m, int n, int k, float alpha, const void *a,
                      int lda, const void *b, int ldb, float beta, float *c, int ldc,
                      GError **error)
{
  REQUIRE (compute, gemm_half, error);
  if (!is_half (dtype))
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "gemm_half: operands of %s; it multiplies bfloat16 or float16",
                   ks_dtype_name (dtype));
      return FALSE;
    }
  return OPS (compute)->gemm_half (CTX (compute), dtype, trans_a, trans_b, m, n, k, alpha, a,
                                   lda, b, ldb, beta, c, ldc, error);
}

gboolean
ks_compute_find_nonfinite (KsCompute *compute, const float *x, gsize n, float *found,
                           GError **error)
{
  REQUIRE (compute, find_nonfinite, error);
  return OPS (compute)->find_nonfinite (CTX (compute), x, n, found, error);
}

void *
ks_compute_native_stream (KsCompute *compute)
{
  if (!KS_OPS_HAS (OPS (compute), KsComputeOps, native_stream))
    return NULL;
  return OPS (compute)->native_stream (CTX (compute));
}
