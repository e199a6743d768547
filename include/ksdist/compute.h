/* ksdist — the compute backend interface: a device's memory and kernels.
 *
 * For authors of a compute backend plugin (KsComputeOps); programs reach these kernels
 * through model.h and tensor.h.
 *
 * All pointers to tensor data are device pointers of the backend that allocated them.
 * Matrices are row-major. Every method returns FALSE and sets `error` on failure. */
#ifndef KSDIST_COMPUTE_H
#define KSDIST_COMPUTE_H

#include <ksdist/plugin.h>

G_BEGIN_DECLS

typedef enum { KS_TRANS_N = 0, KS_TRANS_T = 1 } KsTranspose;

typedef enum {
  KS_UNARY_RELU = 0,
  KS_UNARY_TANH = 1,
  KS_UNARY_SIGMOID = 2,
  KS_UNARY_GELU = 3, /* tanh approximation, as GPT-2 */
  KS_UNARY_EXP = 4,
  KS_UNARY_LOG = 5,
  KS_UNARY_NEG = 6,
  KS_UNARY_SQRT = 7,
} KsUnaryOp;

typedef enum {
  KS_BINARY_ADD = 0,
  KS_BINARY_SUB = 1,
  KS_BINARY_MUL = 2,
  KS_BINARY_DIV = 3,
} KsBinaryOp;

typedef enum {
  KS_UPDATE_SGD = 0,
  KS_UPDATE_MOMENTUM = 1,
  KS_UPDATE_ADAGRAD = 2,
  KS_UPDATE_ADAM = 3,
  KS_UPDATE_ADAMW = 4,
} KsUpdateRule;

/* Arguments of the fused optimizer update; starts with its size so it can grow. */
typedef struct {
  gsize size;
  KsUpdateRule rule;
  float lr, momentum, beta1, beta2, eps, weight_decay;
  gboolean nesterov;
  gint64 step; /* 1-based, for Adam's bias correction */
} KsUpdateArgs;

/* The shape of a convolution or pooling window over NHWC images: n images of h x w x c,
 * windows of kh x kw moved by `stride`, `pad` zero pixels around each side, giving
 * oh x ow outputs ((h + 2 pad - kh) / stride + 1, likewise for w). */
typedef struct {
  int n, h, w, c;
  int kh, kw, stride, pad;
  int oh, ow;
} KsConvShape;

/* Causal self-attention over qkv [batch * tokens, 3 * heads * head_size]: each row holds
 * the token's queries, keys and values side by side, the heads side by side within each;
 * the output is [batch * tokens, heads * head_size]. Scores are scaled by `scale`. */
typedef struct {
  int batch, tokens, heads, head_size;
  float scale;
} KsAttentionShape;

typedef struct {
  gsize size; /* sizeof (KsComputeOps) the plugin was built with */

  /* required */
  void *(*create) (const KsSettings *settings, GError **error);
  void (*destroy) (void *ctx);
  void *(*alloc) (void *ctx, gsize nbytes, GError **error);
  void (*free) (void *ctx, void *ptr);
  gboolean (*copy_to_device) (void *ctx, void *dst, const void *host_src, gsize nbytes, GError **error);
  gboolean (*copy_to_host) (void *ctx, void *host_dst, const void *src, gsize nbytes, GError **error);

  /* optional: a missing slot answers "not supported by plugin X" */
  char *(*describe) (void *ctx); /* one line: library, device, threads */
  gboolean (*copy_on_device) (void *ctx, void *dst, const void *src, gsize nbytes, GError **error);
  gboolean (*fill_zero) (void *ctx, void *ptr, gsize nbytes, GError **error);
  gboolean (*synchronize) (void *ctx, GError **error);
  gboolean (*set_threads) (void *ctx, int n_threads, GError **error);

  /* C = alpha * op(A) * op(B) + beta * C; op(A) is m x k, op(B) k x n, C m x n. */
  gboolean (*sgemm) (void *ctx, KsTranspose trans_a, KsTranspose trans_b, int m, int n, int k,
                     float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                     float *c, int ldc, GError **error);
  gboolean (*sgemm_strided_batched) (void *ctx, KsTranspose trans_a, KsTranspose trans_b, int m,
                                     int n, int k, float alpha, const float *a, int lda,
                                     gint64 stride_a, const float *b, int ldb, gint64 stride_b,
                                     float beta, float *c, int ldc, gint64 stride_c, int batch,
                                     GError **error);

  /* Kernels of single-process training (sketched here, filled in by the backends). */
  gboolean (*unary) (void *ctx, KsUnaryOp op, const float *x, float *y, gsize n, GError **error);
  /* dx = dy * f'(x); y = f(x) is given for ops whose derivative is cheaper from it */
  gboolean (*unary_backward) (void *ctx, KsUnaryOp op, const float *x, const float *y,
                              const float *dy, float *dx, gsize n, GError **error);
  /* c[r][j] = a[r][j] op b[j] when b_rows == 1, else op b[r][j] */
  gboolean (*binary) (void *ctx, KsBinaryOp op, const float *a, const float *b, float *c,
                      gsize rows, gsize cols, gsize b_rows, GError **error);
  /* axis 0: y[j] = reduce over rows; axis 1: y[r] = reduce over columns */
  gboolean (*reduce) (void *ctx, KsReduceOp op, const float *x, float *y, gsize rows, gsize cols,
                      int axis, GError **error);
  gboolean (*softmax) (void *ctx, const float *x, float *y, gsize rows, gsize cols,
                       gboolean log_softmax, GError **error);
  gboolean (*layer_norm) (void *ctx, const float *x, const float *gamma, const float *beta,
                          float *y, float *mean, float *rstd, gsize rows, gsize cols, float eps,
                          GError **error);
  /* dx is written; dgamma and dbeta (each may be NULL) are added to, like every
   * parameter gradient */
  gboolean (*layer_norm_backward) (void *ctx, const float *x, const float *gamma,
                                   const float *mean, const float *rstd, const float *dy,
                                   float *dx, float *dgamma, float *dbeta, gsize rows, gsize cols,
                                   GError **error);
  /* out[i] = table[ids[i]]; table is n_rows x dim; an id outside [0, n_rows) is an error */
  gboolean (*embedding) (void *ctx, const float *table, gsize n_rows, const gint64 *ids,
                         float *out, gsize n_ids, gsize dim, GError **error);
  /* dtable[ids[i]] += dout[i] */
  gboolean (*embedding_backward) (void *ctx, const float *dout, const gint64 *ids, float *dtable,
                                  gsize n_rows, gsize n_ids, gsize dim, GError **error);
  /* losses[r] = -log softmax(logits[r])[labels[r]]; dlogits (may be NULL) = softmax - onehot,
   * unscaled; a label outside [0, cols) is an error naming the row */
  gboolean (*cross_entropy) (void *ctx, const float *logits, const gint64 *labels, float *losses,
                             float *dlogits, gsize rows, gsize cols, GError **error);
  /* one optimizer step over a whole arena; state1/state2 as the rule needs (may be NULL) */
  gboolean (*update) (void *ctx, const KsUpdateArgs *args, float *param, const float *grad,
                      float *state1, float *state2, gsize n, GError **error);
  /* dx from y = softmax(x) (or log_softmax(x)) and dy */
  gboolean (*softmax_backward) (void *ctx, const float *y, const float *dy, float *dx, gsize rows,
                                gsize cols, gboolean log_softmax, GError **error);
  /* y = alpha * x + beta * y; beta = 0 ignores y's old contents (even NaN) */
  gboolean (*axpby) (void *ctx, float alpha, const float *x, float beta, float *y, gsize n,
                     GError **error);
  /* y = x with its dimensions permuted: y's dimension i is x's dimension perm[i]; x has
   * `ndim` (1 to KS_TENSOR_MAX_DIMS) dimensions of `shape`; y must not overlap x */
  gboolean (*transpose) (void *ctx, const float *x, float *y, int ndim, const gint64 *shape,
                         const int *perm, GError **error);
  /* mask[i] = 1 / (1 - p) where ks_dropout_uniform (seed, i) >= p, else 0 */
  gboolean (*dropout_mask) (void *ctx, float *mask, gsize n, float p, guint64 seed,
                            GError **error);

  /* Images are NHWC: n images of h x w pixels, c channels innermost. */
  /* col = the patches of x, one row per output pixel (image, oy, ox) and one column per
   * (ky, kx, channel); pixels outside x (padding) are 0. */
  gboolean (*im2col) (void *ctx, const float *x, float *col, const KsConvShape *s,
                      GError **error);
  /* dx = the sum of each col entry back onto the pixel it came from (dx is written) */
  gboolean (*col2im) (void *ctx, const float *col, float *dx, const KsConvShape *s,
                      GError **error);
  /* y = the maximum of each window (ky, kx) of x, per channel; argmax[i] = the index in x
   * of y[i]'s maximum, for the backward (an embedding_backward of dim 1); windows lie
   * inside x (no padding) */
  gboolean (*max_pool) (void *ctx, const float *x, float *y, gint64 *argmax,
                        const KsConvShape *s, GError **error);
  /* Batch normalisation of x [rows, cols] per column: training computes each column's
   * mean and (biased) variance into mean and var; otherwise they are read. y = (x - mean)
   * / sqrt (var + eps) * gamma + beta. */
  gboolean (*batch_norm) (void *ctx, const float *x, const float *gamma, const float *beta,
                          float *y, float *mean, float *var, gsize rows, gsize cols, float eps,
                          gboolean training, GError **error);
  /* dx is written (training: through the batch's statistics too); dgamma and dbeta (each
   * may be NULL) are added to */
  gboolean (*batch_norm_backward) (void *ctx, const float *x, const float *gamma,
                                   const float *mean, const float *var, const float *dy,
                                   float *dx, float *dgamma, float *dbeta, gsize rows,
                                   gsize cols, float eps, gboolean training, GError **error);
  /* Fused causal self-attention: out as above, and lse [batch, heads, tokens] the log of
   * each query's softmax denominator, for the backward. The masked half of the scores is
   * never computed and no tokens x tokens matrix is stored. */
  gboolean (*attention) (void *ctx, const float *qkv, float *out, float *lse,
                         const KsAttentionShape *s, GError **error);
  /* Its gradient from the forward's lse: dqkv = beta dqkv + d(attention)/d(qkv) dout */
  gboolean (*attention_backward) (void *ctx, const float *qkv, const float *lse,
                                  const float *dout, float *dqkv, float beta,
                                  const KsAttentionShape *s, GError **error);

  /* Mixed precision (half.h): 16-bit floats stored, float32 arithmetic. */
  /* y = x converted between float32 and KS_DTYPE_BFLOAT16 or KS_DTYPE_FLOAT16 (one side
   * is float32), rounded as half.h rounds */
  gboolean (*convert) (void *ctx, const void *x, KsDType x_dtype, void *y, KsDType y_dtype,
                       gsize n, GError **error);
  /* sgemm on 16-bit operands of `dtype`: the products summed in float32 into float32 C */
  gboolean (*gemm_half) (void *ctx, KsDType dtype, KsTranspose trans_a, KsTranspose trans_b,
                         int m, int n, int k, float alpha, const void *a, int lda,
                         const void *b, int ldb, float beta, float *c, int ldc, GError **error);
  /* found[0] (device memory) = 1 when some x[i] is infinite or NaN, else 0 */
  gboolean (*find_nonfinite) (void *ctx, const float *x, gsize n, float *found,
                              GError **error);

  /* The queue the backend's work runs on (CUDA: its cudaStream_t), for a communicator
   * that can queue behind it (KsCommOps use_stream); NULL when there is none. */
  void *(*native_stream) (void *ctx);

  /* y = the mean of each window (ky, kx) of x, per channel; padding pixels count as zeros
   * and every window divides by kh * kw (PyTorch's AvgPool2d, count_include_pad) */
  gboolean (*avg_pool) (void *ctx, const float *x, float *y, const KsConvShape *s,
                        GError **error);
  /* dx = each output's gradient spread evenly over the pixels of its window that lie on
   * the image, divided by kh * kw (dx is written) */
  gboolean (*avg_pool_backward) (void *ctx, const float *dy, float *dx, const KsConvShape *s,
                                 GError **error);

  /* appended in ABI 1.1: KS_COMPUTE_* flags, what the backend is (0: tensors in host
   * memory). A 1.0 plugin gets KS_COMPUTE_TRAITS_1_0. */
  guint32 traits;

  /* appended in ABI 1.2 (optional): a whole conv2d over the batch of x, for a backend
   * that runs it its own way (OpenBLAS: chunks of images, each on one of its threads);
   * without them the model composes im2col, sgemm and col2im. w is [kh * kw * c,
   * filters]. y = im2col (x) w + b (written). */
  gboolean (*conv2d) (void *ctx, const float *x, const float *w, const float *b, float *y,
                      int filters, const KsConvShape *s, GError **error);
  /* dx = col2im (dy w^T) (written; NULL: not wanted); dw = w_beta dw + im2col (x)^T dy
   * (NULL: not wanted; w_beta 0 never reads dw) */
  gboolean (*conv2d_backward) (void *ctx, const float *x, const float *w, const float *dy,
                               float *dx, float *dw, float w_beta, int filters,
                               const KsConvShape *s, GError **error);
} KsComputeOps;

/* Tensors live in device memory, which only a communicator of KS_COMM_DEVICE_MEMORY
 * reads (the trainer's data-parallel gradients). */
#define KS_COMPUTE_DEVICE_MEMORY (1u << 0)
/* What the core assumed of a backend before traits: host memory. */
#define KS_COMPUTE_TRAITS_1_0 0u

#ifdef __CUDACC__
#define KS_HOST_DEVICE __host__ __device__
#else
#define KS_HOST_DEVICE
#endif

/* The uniform draw in [0, 1) of dropout element i, from a counter-based hash
 * (SplitMix64's finaliser of seed + (i + 1) * golden ratio, 24 bits): every backend,
 * CUDA's device code included, computes the same masks. */
static inline KS_HOST_DEVICE float
ks_dropout_uniform (guint64 seed, guint64 i)
{
  guint64 z = seed + (i + 1) * G_GUINT64_CONSTANT (0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT (0x94d049bb133111eb);
  z ^= z >> 31;
  return (float) (z >> 40) * (1.0f / 16777216);
}

/* A compute backend instance, made by the core from a selected implementation. */
typedef struct KsCompute KsCompute;
struct KsRegistry;

/* Selects by name ("openblas", "cuda", or "auto": highest priority available) and creates
 * an instance with the plugin's settings from `config`. */
KsCompute *ks_compute_new (struct KsRegistry *registry, const KsConfig *config, const char *name,
                           GError **error);
void ks_compute_free (KsCompute *compute);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsCompute, ks_compute_free)

const char *ks_compute_plugin (const KsCompute *compute);
char *ks_compute_describe (KsCompute *compute);
void *ks_compute_alloc (KsCompute *compute, gsize nbytes, GError **error);
void ks_compute_free_memory (KsCompute *compute, void *ptr);
gboolean ks_compute_copy_to_device (KsCompute *compute, void *dst, const void *src, gsize nbytes,
                                    GError **error);
gboolean ks_compute_copy_to_host (KsCompute *compute, void *dst, const void *src, gsize nbytes,
                                  GError **error);
/* The host-to-device and device-to-host copies made through this instance so far: a
 * training step should make only its feeds' and what the caller reads. */
void ks_compute_transfers (const KsCompute *compute, guint64 *to_device, guint64 *to_host);
gboolean ks_compute_fill_zero (KsCompute *compute, void *ptr, gsize nbytes, GError **error);
gboolean ks_compute_synchronize (KsCompute *compute, GError **error);
gboolean ks_compute_set_threads (KsCompute *compute, int n_threads, GError **error);
gboolean ks_compute_sgemm (KsCompute *compute, KsTranspose trans_a, KsTranspose trans_b, int m,
                           int n, int k, float alpha, const float *a, int lda, const float *b,
                           int ldb, float beta, float *c, int ldc, GError **error);
gboolean ks_compute_sgemm_strided_batched (KsCompute *compute, KsTranspose trans_a,
                                           KsTranspose trans_b, int m, int n, int k, float alpha,
                                           const float *a, int lda, gint64 stride_a,
                                           const float *b, int ldb, gint64 stride_b, float beta,
                                           float *c, int ldc, gint64 stride_c, int batch,
                                           GError **error);

gboolean ks_compute_unary (KsCompute *compute, KsUnaryOp op, const float *x, float *y, gsize n,
                           GError **error);
gboolean ks_compute_unary_backward (KsCompute *compute, KsUnaryOp op, const float *x,
                                    const float *y, const float *dy, float *dx, gsize n,
                                    GError **error);
gboolean ks_compute_binary (KsCompute *compute, KsBinaryOp op, const float *a, const float *b,
                            float *c, gsize rows, gsize cols, gsize b_rows, GError **error);
gboolean ks_compute_reduce (KsCompute *compute, KsReduceOp op, const float *x, float *y,
                            gsize rows, gsize cols, int axis, GError **error);
gboolean ks_compute_softmax (KsCompute *compute, const float *x, float *y, gsize rows, gsize cols,
                             gboolean log_softmax, GError **error);
gboolean ks_compute_softmax_backward (KsCompute *compute, const float *y, const float *dy,
                                      float *dx, gsize rows, gsize cols, gboolean log_softmax,
                                      GError **error);
gboolean ks_compute_layer_norm (KsCompute *compute, const float *x, const float *gamma,
                                const float *beta, float *y, float *mean, float *rstd, gsize rows,
                                gsize cols, float eps, GError **error);
gboolean ks_compute_layer_norm_backward (KsCompute *compute, const float *x, const float *gamma,
                                         const float *mean, const float *rstd, const float *dy,
                                         float *dx, float *dgamma, float *dbeta, gsize rows,
                                         gsize cols, GError **error);
gboolean ks_compute_embedding (KsCompute *compute, const float *table, gsize n_rows,
                               const gint64 *ids, float *out, gsize n_ids, gsize dim,
                               GError **error);
gboolean ks_compute_embedding_backward (KsCompute *compute, const float *dout, const gint64 *ids,
                                        float *dtable, gsize n_rows, gsize n_ids, gsize dim,
                                        GError **error);
gboolean ks_compute_cross_entropy (KsCompute *compute, const float *logits, const gint64 *labels,
                                   float *losses, float *dlogits, gsize rows, gsize cols,
                                   GError **error);
gboolean ks_compute_update (KsCompute *compute, const KsUpdateArgs *args, float *param,
                            const float *grad, float *state1, float *state2, gsize n,
                            GError **error);
gboolean ks_compute_axpby (KsCompute *compute, float alpha, const float *x, float beta, float *y,
                           gsize n, GError **error);
gboolean ks_compute_transpose (KsCompute *compute, const float *x, float *y, int ndim,
                               const gint64 *shape, const int *perm, GError **error);
gboolean ks_compute_dropout_mask (KsCompute *compute, float *mask, gsize n, float p, guint64 seed,
                                  GError **error);
gboolean ks_compute_im2col (KsCompute *compute, const float *x, float *col, const KsConvShape *s,
                            GError **error);
gboolean ks_compute_col2im (KsCompute *compute, const float *col, float *dx, const KsConvShape *s,
                            GError **error);
gboolean ks_compute_max_pool (KsCompute *compute, const float *x, float *y, gint64 *argmax,
                              const KsConvShape *s, GError **error);
gboolean ks_compute_avg_pool (KsCompute *compute, const float *x, float *y, const KsConvShape *s,
                              GError **error);
gboolean ks_compute_avg_pool_backward (KsCompute *compute, const float *dy, float *dx,
                                       const KsConvShape *s, GError **error);
gboolean ks_compute_batch_norm (KsCompute *compute, const float *x, const float *gamma,
                                const float *beta, float *y, float *mean, float *var, gsize rows,
                                gsize cols, float eps, gboolean training, GError **error);
gboolean ks_compute_batch_norm_backward (KsCompute *compute, const float *x, const float *gamma,
                                         const float *mean, const float *var, const float *dy,
                                         float *dx, float *dgamma, float *dbeta, gsize rows,
                                         gsize cols, float eps, gboolean training,
                                         GError **error);
/* Whether the backend runs whole convolutions (conv2d, conv2d_backward); without them
 * the model composes im2col, sgemm and col2im. */
gboolean ks_compute_has_conv2d (KsCompute *compute);
gboolean ks_compute_conv2d (KsCompute *compute, const float *x, const float *w, const float *b,
                            float *y, int filters, const KsConvShape *s, GError **error);
gboolean ks_compute_conv2d_backward (KsCompute *compute, const float *x, const float *w,
                                     const float *dy, float *dx, float *dw, float w_beta,
                                     int filters, const KsConvShape *s, GError **error);
/* Whether the backend fuses attention; without it the model composes it from sgemm and
 * softmax. */
gboolean ks_compute_has_attention (KsCompute *compute);
gboolean ks_compute_attention (KsCompute *compute, const float *qkv, float *out, float *lse,
                               const KsAttentionShape *s, GError **error);
gboolean ks_compute_attention_backward (KsCompute *compute, const float *qkv, const float *lse,
                                        const float *dout, float *dqkv, float beta,
                                        const KsAttentionShape *s, GError **error);
/* The backend's native stream (KsComputeOps native_stream), or NULL. */
void *ks_compute_native_stream (KsCompute *compute);
/* Whether the backend has the mixed-precision slots (convert, gemm_half, find_nonfinite). */
gboolean ks_compute_has_half (KsCompute *compute);
gboolean ks_compute_convert (KsCompute *compute, const void *x, KsDType x_dtype, void *y,
                             KsDType y_dtype, gsize n, GError **error);
gboolean ks_compute_gemm_half (KsCompute *compute, KsDType dtype, KsTranspose trans_a,
                               KsTranspose trans_b, int m, int n, int k, float alpha,
                               const void *a, int lda, const void *b, int ldb, float beta,
                               float *c, int ldc, GError **error);
gboolean ks_compute_find_nonfinite (KsCompute *compute, const float *x, gsize n, float *found,
                                    GError **error);

G_END_DECLS

#endif
