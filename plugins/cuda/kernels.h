/* The CUDA plugin's training kernels (kernels.cu, built by nvcc), launched on `stream`.
 * Each returns the launch's status; argument checks and messages are cuda.c's. The
 * semantics are those of KsComputeOps (compute.h). Every kernel is deterministic: no
 * floating-point atomics, so a run and its resume give the same bits. */
#ifndef KS_CUDA_KERNELS_H
#define KS_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t ks_cu_unary (cudaStream_t s, int op, const float *x, float *y, size_t n);
cudaError_t ks_cu_unary_backward (cudaStream_t s, int op, const float *x, const float *y,
                                  const float *dy, float *dx, size_t n);
cudaError_t ks_cu_binary (cudaStream_t s, int op, const float *a, const float *b, float *c,
                          size_t rows, size_t cols, size_t b_rows);
cudaError_t ks_cu_reduce (cudaStream_t s, int op, const float *x, float *y, size_t rows,
                          size_t cols, int axis);
cudaError_t ks_cu_softmax (cudaStream_t s, const float *x, float *y, size_t rows, size_t cols,
                           int log_softmax);
cudaError_t ks_cu_softmax_backward (cudaStream_t s, const float *y, const float *dy, float *dx,
                                    size_t rows, size_t cols, int log_softmax);
cudaError_t ks_cu_layer_norm (cudaStream_t s, const float *x, const float *gamma,
                              const float *beta, float *y, float *mean, float *rstd, size_t rows,
                              size_t cols, float eps);
cudaError_t ks_cu_layer_norm_backward (cudaStream_t s, const float *x, const float *gamma,
                                       const float *mean, const float *rstd, const float *dy,
                                       float *dx, float *dgamma, float *dbeta, size_t rows,
                                       size_t cols);
/* Writes to *first_bad (device memory) the lowest i with ids[i] outside [0, limit), or
 * n_ids when there is none. */
cudaError_t ks_cu_find_bad_id (cudaStream_t s, const int64_t *ids, size_t n_ids, size_t limit,
                               unsigned long long *first_bad);
cudaError_t ks_cu_embedding (cudaStream_t s, const float *table, const int64_t *ids, float *out,
                             size_t n_ids, size_t dim);
cudaError_t ks_cu_embedding_backward (cudaStream_t s, const float *dout, const int64_t *ids,
                                      float *dtable, size_t n_rows, size_t n_ids, size_t dim);
cudaError_t ks_cu_cross_entropy (cudaStream_t s, const float *logits, const int64_t *labels,
                                 float *losses, float *dlogits, size_t rows, size_t cols);
/* rule and hyper-parameters as KsUpdateArgs; c1, c2: Adam's bias corrections */
cudaError_t ks_cu_update (cudaStream_t s, int rule, float lr, float momentum, float beta1,
                          float beta2, float eps, float weight_decay, int nesterov, float c1,
                          float c2, float *p, const float *g, float *s1, float *s2, size_t n);
cudaError_t ks_cu_axpby (cudaStream_t s, float alpha, const float *x, float beta, float *y,
                         size_t n);

cudaError_t ks_cu_transpose (cudaStream_t s, const float *x, float *y, int ndim,
                             const int64_t *shape, const int *perm);
cudaError_t ks_cu_dropout_mask (cudaStream_t s, float *mask, size_t n, float p,
                                unsigned long long seed);

/* Mixed precision: float32 to and from bfloat16 (bf16 != 0) or float16 bit patterns,
 * rounded to nearest even as half.h; found[0] = 1 when x holds an inf or NaN, else 0. */
cudaError_t ks_cu_to_half (cudaStream_t s, const float *x, uint16_t *y, size_t n, int bf16);
cudaError_t ks_cu_from_half (cudaStream_t s, const uint16_t *x, float *y, size_t n, int bf16);
cudaError_t ks_cu_find_nonfinite (cudaStream_t s, const float *x, size_t n, float *found);

#ifdef __cplusplus
}
#endif

#endif
