/* The OpenBLAS plugin's own kernels (kernels.c), the slots of KsComputeOps it fills. */
#ifndef KS_OPENBLAS_KERNELS_H
#define KS_OPENBLAS_KERNELS_H

#include <ksdist/compute.h>

/* The threads the plugin's kernels may use: its `threads` setting when OpenBLAS runs on
 * OpenMP's pool, else 1 (openblas.c) */
int ks_openblas_threads (void *ctx);
/* The context's scratch of at least `floats`, aligned to a cache line, held until
 * ks_openblas_scratch_give (one holder at a time); NULL with `error` set (and nothing
 * held) where it cannot be allocated. `what` names the caller in the message. */
float *ks_openblas_scratch_take (void *ctx, gsize floats, const char *what, GError **error);
void ks_openblas_scratch_give (void *ctx);

gboolean ks_openblas_unary (void *ctx, KsUnaryOp op, const float *x, float *y, gsize n,
                            GError **error);
gboolean ks_openblas_unary_backward (void *ctx, KsUnaryOp op, const float *x, const float *y,
                                     const float *dy, float *dx, gsize n, GError **error);
gboolean ks_openblas_binary (void *ctx, KsBinaryOp op, const float *a, const float *b, float *c,
                             gsize rows, gsize cols, gsize b_rows, GError **error);
gboolean ks_openblas_reduce (void *ctx, KsReduceOp op, const float *x, float *y, gsize rows,
                             gsize cols, int axis, GError **error);
gboolean ks_openblas_softmax (void *ctx, const float *x, float *y, gsize rows, gsize cols,
                              gboolean log_softmax, GError **error);
gboolean ks_openblas_softmax_backward (void *ctx, const float *y, const float *dy, float *dx,
                                       gsize rows, gsize cols, gboolean log_softmax,
                                       GError **error);
gboolean ks_openblas_layer_norm (void *ctx, const float *x, const float *gamma, const float *beta,
                                 float *y, float *mean, float *rstd, gsize rows, gsize cols,
                                 float eps, GError **error);
gboolean ks_openblas_layer_norm_backward (void *ctx, const float *x, const float *gamma,
                                          const float *mean, const float *rstd, const float *dy,
                                          float *dx, float *dgamma, float *dbeta, gsize rows,
                                          gsize cols, GError **error);
gboolean ks_openblas_embedding (void *ctx, const float *table, gsize n_rows, const gint64 *ids,
                                float *out, gsize n_ids, gsize dim, GError **error);
gboolean ks_openblas_embedding_backward (void *ctx, const float *dout, const gint64 *ids,
                                         float *dtable, gsize n_rows, gsize n_ids, gsize dim,
                                         GError **error);
gboolean ks_openblas_cross_entropy (void *ctx, const float *logits, const gint64 *labels,
                                    float *losses, float *dlogits, gsize rows, gsize cols,
                                    GError **error);
gboolean ks_openblas_update (void *ctx, const KsUpdateArgs *args, float *param, const float *grad,
                             float *state1, float *state2, gsize n, GError **error);
gboolean ks_openblas_axpby (void *ctx, float alpha, const float *x, float beta, float *y,
                            gsize n, GError **error);
/* y = alpha x + beta y on the calling thread (beta 0 never reads y) */
void ks_openblas_axpby_part (float alpha, const float *x, float beta, float *y, gsize n);
gboolean ks_openblas_transpose (void *ctx, const float *x, float *y, int ndim,
                                const gint64 *shape, const int *perm, GError **error);
gboolean ks_openblas_dropout_mask (void *ctx, float *mask, gsize n, float p, guint64 seed,
                                   GError **error);

/* conv.c */
/* The first pixel of window o along one axis is o * stride - pad; its kernel taps
 * [k0, k1) fall inside the image (none when k1 <= k0). */
static inline void
ks_openblas_taps_inside (int o, int stride, int pad, int k, int size, int *k0, int *k1)
{
  int start = o * stride - pad;
  *k0 = start < 0 ? -start : 0;
  *k1 = start + k > size ? size - start : k;
}
gboolean ks_openblas_im2col (void *ctx, const float *x, float *col, const KsConvShape *s,
                             GError **error);
gboolean ks_openblas_col2im (void *ctx, const float *col, float *dx, const KsConvShape *s,
                             GError **error);
/* One image's patches (col: its oh * ow rows), and their adjoint written into `image`;
 * `padded` is scratch of ks_openblas_padded_floats floats. On the calling thread. */
gsize ks_openblas_padded_floats (const KsConvShape *s);
void ks_openblas_im2col_image (const float *image, float *col, const KsConvShape *s,
                               float *padded);
void ks_openblas_col2im_image (const float *col, float *image, const KsConvShape *s,
                               float *padded);
gboolean ks_openblas_max_pool (void *ctx, const float *x, float *y, gint64 *argmax,
                               const KsConvShape *s, GError **error);
gboolean ks_openblas_avg_pool (void *ctx, const float *x, float *y, const KsConvShape *s,
                               GError **error);
gboolean ks_openblas_avg_pool_backward (void *ctx, const float *dy, float *dx,
                                        const KsConvShape *s, GError **error);
gboolean ks_openblas_batch_norm (void *ctx, const float *x, const float *gamma, const float *beta,
                                 float *y, float *mean, float *var, gsize rows, gsize cols,
                                 float eps, gboolean training, GError **error);
gboolean ks_openblas_batch_norm_backward (void *ctx, const float *x, const float *gamma,
                                          const float *mean, const float *var, const float *dy,
                                          float *dx, float *dgamma, float *dbeta, gsize rows,
                                          gsize cols, float eps, gboolean training,
                                          GError **error);

/* conv-gemm.c: whole convolutions (KsComputeOps conv2d, conv2d_backward) */
gboolean ks_openblas_conv2d (void *ctx, const float *x, const float *w, const float *b, float *y,
                             int filters, const KsConvShape *s, GError **error);
gboolean ks_openblas_conv2d_backward (void *ctx, const float *x, const float *w, const float *dy,
                                      float *dx, float *dw, float w_beta, int filters,
                                      const KsConvShape *s, GError **error);

/* attention.c */
gboolean ks_openblas_attention (void *ctx, const float *qkv, float *out, float *lse,
                                const KsAttentionShape *s, GError **error);
gboolean ks_openblas_attention_backward (void *ctx, const float *qkv, const float *lse,
                                         const float *dout, float *dqkv, float beta,
                                         const KsAttentionShape *s, GError **error);

/* half.c: mixed precision */
gboolean ks_openblas_convert (void *ctx, const void *x, KsDType x_dtype, void *y, KsDType y_dtype,
                              gsize n, GError **error);
gboolean ks_openblas_gemm_half (void *ctx, KsDType dtype, KsTranspose ta, KsTranspose tb, int m,
                                int n, int k, float alpha, const void *a, int lda, const void *b,
                                int ldb, float beta, float *c, int ldc, GError **error);
gboolean ks_openblas_find_nonfinite (void *ctx, const float *x, gsize n, float *found,
                                     GError **error);

#endif
