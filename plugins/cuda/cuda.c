/* The GPU compute backend: device memory from the CUDA runtime, GEMM from cuBLAS, the
 * training kernels from kernels.cu (nvcc). Links libcudart and libcublas only (never
 * libcuda: on build machines that is a stub). Kernels run in order on one stream; a
 * call returns once its work is queued, except those that must read a result back (a
 * copy to the host, an id check).
 * Row-major GEMM is done as the column-major product of the transposes:
 * C^T = op(B)^T op(A)^T, i.e. cuBLAS with A and B swapped and m and n swapped. */
#include <config.h>

#include "kernels.h"
#include "local-device.h"

#include <ksdist/compute.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>

typedef struct {
  int device;
  cudaStream_t stream;
  cublasHandle_t blas;
  unsigned long long *first_bad; /* device word for the id and label checks */
} CudaCtx;

static gboolean
cuda_check (cudaError_t status, const char *what, GError **error)
{
  if (status == cudaSuccess)
    return TRUE;
  g_set_error (error, KS_COMPUTE_ERROR,
               status == cudaErrorMemoryAllocation ? KS_COMPUTE_ERROR_NO_MEMORY
                                                   : KS_COMPUTE_ERROR_DEVICE,
               "cuda: %s: %s", what, cudaGetErrorString (status));
  return FALSE;
}

static gboolean
blas_check (cublasStatus_t status, const char *what, GError **error)
{
  if (status == CUBLAS_STATUS_SUCCESS)
    return TRUE;
  g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_DEVICE, "cuda: %s: %s", what,
               cublasGetStatusString (status));
  return FALSE;
}

static void
cuda_destroy (void *p)
{
  CudaCtx *ctx = p;
  if (ctx->blas != NULL)
    cublasDestroy (ctx->blas);
  if (ctx->first_bad != NULL)
    cudaFree (ctx->first_bad);
  if (ctx->stream != NULL)
    cudaStreamDestroy (ctx->stream);
  g_free (ctx);
}

static void *
cuda_create (const KsSettings *settings, GError **error)
{
  CudaCtx *ctx = g_new0 (CudaCtx, 1);
  int count = 0;

  ctx->device = (int) ks_settings_get_int (settings, "device");
  if (!cuda_check (cudaGetDeviceCount (&count), "cudaGetDeviceCount", error))
    goto fail;
  if (ctx->device < 0)
    ctx->device = ks_cuda_local_device (count);
  if (ctx->device >= count)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_DEVICE,
                   "cuda: [cuda] device = %d, but this machine has %d device(s) (0..%d)",
                   ctx->device, count, count - 1);
      goto fail;
    }
  if (!cuda_check (cudaSetDevice (ctx->device), "cudaSetDevice", error)
      || !cuda_check (cudaStreamCreateWithFlags (&ctx->stream, cudaStreamNonBlocking),
                      "cudaStreamCreate", error)
      || !blas_check (cublasCreate (&ctx->blas), "cublasCreate", error)
      || !blas_check (cublasSetStream (ctx->blas, ctx->stream), "cublasSetStream", error)
      || !cuda_check (cudaMalloc ((void **) &ctx->first_bad, sizeof *ctx->first_bad),
                      "cudaMalloc", error))
    goto fail;
  return ctx;

fail:
  cuda_destroy (ctx);
  return NULL;
}

static char *
cuda_describe (void *p)
{
  CudaCtx *ctx = p;
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties (&prop, ctx->device) != cudaSuccess)
    return g_strdup_printf ("CUDA device %d (cuBLAS)", ctx->device);
  return g_strdup_printf ("CUDA device %d: %s, %.1f GiB, compute capability %d.%d (cuBLAS)",
                          ctx->device, prop.name, prop.totalGlobalMem / 1073741824.0, prop.major,
                          prop.minor);
}

static void *
cuda_alloc (void *p, gsize nbytes, GError **error)
{
  void *ptr = NULL;
  if (!cuda_check (cudaMalloc (&ptr, MAX (nbytes, 1)), "cudaMalloc", error))
    return NULL;
  return ptr;
}

static void
cuda_free (void *p, void *ptr)
{
  cudaFree (ptr);
}

/* Copies are synchronous for the caller: the host buffer may be reused on return. */
static gboolean
cuda_copy (CudaCtx *ctx, void *dst, const void *src, gsize nbytes, enum cudaMemcpyKind kind,
           GError **error)
{
  return cuda_check (cudaMemcpyAsync (dst, src, nbytes, kind, ctx->stream), "cudaMemcpyAsync",
                     error)
         && cuda_check (cudaStreamSynchronize (ctx->stream), "cudaStreamSynchronize", error);
}

static gboolean
cuda_copy_to_device (void *ctx, void *dst, const void *src, gsize nbytes, GError **error)
{
  return cuda_copy (ctx, dst, src, nbytes, cudaMemcpyHostToDevice, error);
}

static gboolean
cuda_copy_to_host (void *ctx, void *dst, const void *src, gsize nbytes, GError **error)
{
  return cuda_copy (ctx, dst, src, nbytes, cudaMemcpyDeviceToHost, error);
}

static gboolean
cuda_copy_on_device (void *p, void *dst, const void *src, gsize nbytes, GError **error)
{
  CudaCtx *ctx = p;
  return cuda_check (cudaMemcpyAsync (dst, src, nbytes, cudaMemcpyDeviceToDevice, ctx->stream),
                     "cudaMemcpyAsync", error);
}

static gboolean
cuda_fill_zero (void *p, void *ptr, gsize nbytes, GError **error)
{
  CudaCtx *ctx = p;
  return cuda_check (cudaMemsetAsync (ptr, 0, nbytes, ctx->stream), "cudaMemsetAsync", error);
}

static gboolean
cuda_synchronize (void *p, GError **error)
{
  CudaCtx *ctx = p;
  return cuda_check (cudaStreamSynchronize (ctx->stream), "cudaStreamSynchronize", error);
}

static cublasOperation_t
blas_op (KsTranspose t)
{
  return t == KS_TRANS_T ? CUBLAS_OP_T : CUBLAS_OP_N;
}

static gboolean
cuda_sgemm (void *p, KsTranspose ta, KsTranspose tb, int m, int n, int k, float alpha,
            const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
            GError **error)
{
  CudaCtx *ctx = p;
  return blas_check (cublasSgemm (ctx->blas, blas_op (tb), blas_op (ta), n, m, k, &alpha, b, ldb,
                                  a, lda, &beta, c, ldc),
                     "cublasSgemm", error);
}

static gboolean
cuda_sgemm_strided_batched (void *p, KsTranspose ta, KsTranspose tb, int m, int n, int k,
                            float alpha, const float *a, int lda, gint64 stride_a,
                            const float *b, int ldb, gint64 stride_b, float beta, float *c,
                            int ldc, gint64 stride_c, int batch, GError **error)
{
  CudaCtx *ctx = p;
  return blas_check (cublasSgemmStridedBatched (ctx->blas, blas_op (tb), blas_op (ta), n, m, k,
                                                &alpha, b, ldb, stride_b, a, lda, stride_a,
                                                &beta, c, ldc, stride_c, batch),
                     "cublasSgemmStridedBatched", error);
}

static gboolean
cuda_convert (void *p, const void *x, KsDType x_dtype, void *y, KsDType y_dtype, gsize n,
              GError **error)
{
  CudaCtx *ctx = p;
  if (x_dtype == KS_DTYPE_FLOAT32)
    return cuda_check (ks_cu_to_half (ctx->stream, x, y, n, y_dtype == KS_DTYPE_BFLOAT16),
                       "convert", error);
  return cuda_check (ks_cu_from_half (ctx->stream, x, y, n, x_dtype == KS_DTYPE_BFLOAT16),
                     "convert", error);
}

/* Tensor cores on 16-bit operands, float32 accumulation and output */
static gboolean
cuda_gemm_half (void *p, KsDType dtype, KsTranspose ta, KsTranspose tb, int m, int n, int k,
                float alpha, const void *a, int lda, const void *b, int ldb, float beta,
                float *c, int ldc, GError **error)
{
  CudaCtx *ctx = p;
  cudaDataType_t type = dtype == KS_DTYPE_BFLOAT16 ? CUDA_R_16BF : CUDA_R_16F;
  return blas_check (cublasGemmEx (ctx->blas, blas_op (tb), blas_op (ta), n, m, k, &alpha, b,
                                   type, ldb, a, type, lda, &beta, c, CUDA_R_32F, ldc,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx", error);
}

static gboolean
cuda_find_nonfinite (void *p, const float *x, gsize n, float *found, GError **error)
{
  CudaCtx *ctx = p;
  return cuda_check (ks_cu_find_nonfinite (ctx->stream, x, n, found), "find_nonfinite", error);
}

static void *
cuda_native_stream (void *p)
{
  return ((CudaCtx *) p)->stream;
}

static gboolean
bad_op (GError **error, const char *kernel, int op)
{
  g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
               "cuda: %s: unknown operation %d", kernel, op);
  return FALSE;
}

static gboolean
cuda_unary (void *p, KsUnaryOp op, const float *x, float *y, gsize n, GError **error)
{
  CudaCtx *ctx = p;
  if ((guint) op > KS_UNARY_SQRT)
    return bad_op (error, "unary", op);
  return cuda_check (ks_cu_unary (ctx->stream, op, x, y, n), "unary", error);
}

static gboolean
cuda_unary_backward (void *p, KsUnaryOp op, const float *x, const float *y, const float *dy,
                     float *dx, gsize n, GError **error)
{
  CudaCtx *ctx = p;
  if ((guint) op > KS_UNARY_SQRT)
    return bad_op (error, "unary_backward", op);
  return cuda_check (ks_cu_unary_backward (ctx->stream, op, x, y, dy, dx, n), "unary_backward",
                   error);
}

static gboolean
cuda_binary (void *p, KsBinaryOp op, const float *a, const float *b, float *c, gsize rows,
             gsize cols, gsize b_rows, GError **error)
{
  CudaCtx *ctx = p;
  if ((guint) op > KS_BINARY_DIV)
    return bad_op (error, "binary", op);
  return cuda_check (ks_cu_binary (ctx->stream, op, a, b, c, rows, cols, b_rows), "binary", error);
}

static gboolean
cuda_reduce (void *p, KsReduceOp op, const float *x, float *y, gsize rows, gsize cols, int axis,
             GError **error)
{
  CudaCtx *ctx = p;
  if ((guint) op > KS_REDUCE_PROD)
    return bad_op (error, "reduce", op);
  return cuda_check (ks_cu_reduce (ctx->stream, op, x, y, rows, cols, axis), "reduce", error);
}

static gboolean
cuda_softmax (void *p, const float *x, float *y, gsize rows, gsize cols, gboolean log_softmax,
              GError **error)
{
  CudaCtx *ctx = p;
  return cuda_check (ks_cu_softmax (ctx->stream, x, y, rows, cols, log_softmax), "softmax", error);
}

static gboolean
cuda_softmax_backward (void *p, const float *y, const float *dy, float *dx, gsize rows,
                       gsize cols, gboolean log_softmax, GError **error)
{
  CudaCtx *ctx = p;
  return cuda_check (ks_cu_softmax_backward (ctx->stream, y, dy, dx, rows, cols, log_softmax),
                   "softmax_backward", error);
}

static gboolean
cuda_layer_norm (void *p, const float *x, const float *gamma, const float *beta, float *y,
                 float *mean, float *rstd, gsize rows, gsize cols, float eps, GError **error)
{
  CudaCtx *ctx = p;
  return cuda_check (ks_cu_layer_norm (ctx->stream, x, gamma, beta, y, mean, rstd, rows, cols, eps),
                   "layer_norm", error);
}

static gboolean
cuda_layer_norm_backward (void *p, const float *x, const float *gamma, const float *mean,
                          const float *rstd, const float *dy, float *dx, float *dgamma,
                          float *dbeta, gsize rows, gsize cols, GError **error)
{
  CudaCtx *ctx = p;
  return cuda_check (ks_cu_layer_norm_backward (ctx->stream, x, gamma, mean, rstd, dy, dx, dgamma,
                                              dbeta, rows, cols),
                   "layer_norm_backward", error);
}

/* The first of `n_ids` device ids outside [0, limit), read back: a kernel that gets a
 * bad id would read outside the table, so it is checked before anything is written.
 * Sets *bad_value and returns its index, or n_ids; (gsize) -1 with `error` set when the
 * check itself failed. */
static gsize
first_bad_id (CudaCtx *ctx, const gint64 *ids, gsize n_ids, gsize limit, gint64 *bad_value,
              GError **error)
{
  unsigned long long first = 0;
  if (!cuda_check (ks_cu_find_bad_id (ctx->stream, ids, n_ids, limit, ctx->first_bad), "check ids",
                 error)
      || !cuda_copy (ctx, &first, ctx->first_bad, sizeof first, cudaMemcpyDeviceToHost, error)
      || (first < n_ids
          && !cuda_copy (ctx, bad_value, ids + first, sizeof *bad_value, cudaMemcpyDeviceToHost,
                         error)))
    return (gsize) -1;
  return (gsize) first;
}

static gboolean
check_ids (CudaCtx *ctx, const gint64 *ids, gsize n_ids, gsize n_rows, const char *kernel,
           GError **error)
{
  gint64 value = 0;
  gsize i = first_bad_id (ctx, ids, n_ids, n_rows, &value, error);
  if (i == (gsize) -1)
    return FALSE;
  if (i == n_ids)
    return TRUE;
  g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
               "%s: ids[%" G_GSIZE_FORMAT "] = %" G_GINT64_FORMAT " is outside the table's %"
               G_GSIZE_FORMAT " rows",
               kernel, i, value, n_rows);
  return FALSE;
}

static gboolean
cuda_embedding (void *p, const float *table, gsize n_rows, const gint64 *ids, float *out,
                gsize n_ids, gsize dim, GError **error)
{
  CudaCtx *ctx = p;
  return check_ids (ctx, ids, n_ids, n_rows, "embedding", error)
         && cuda_check (ks_cu_embedding (ctx->stream, table, ids, out, n_ids, dim), "embedding",
                      error);
}

static gboolean
cuda_embedding_backward (void *p, const float *dout, const gint64 *ids, float *dtable,
                         gsize n_rows, gsize n_ids, gsize dim, GError **error)
{
  CudaCtx *ctx = p;
  return check_ids (ctx, ids, n_ids, n_rows, "embedding_backward", error)
         && cuda_check (ks_cu_embedding_backward (ctx->stream, dout, ids, dtable, n_rows, n_ids, dim),
                      "embedding_backward", error);
}

static gboolean
cuda_cross_entropy (void *p, const float *logits, const gint64 *labels, float *losses,
                    float *dlogits, gsize rows, gsize cols, GError **error)
{
  CudaCtx *ctx = p;
  gint64 value = 0;
  gsize r = first_bad_id (ctx, labels, rows, cols, &value, error);

  if (r == (gsize) -1)
    return FALSE;
  if (r < rows)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "cross_entropy: labels[%" G_GSIZE_FORMAT "] = %" G_GINT64_FORMAT
                   " is not a class in [0, %" G_GSIZE_FORMAT ")",
                   r, value, cols);
      return FALSE;
    }
  return cuda_check (ks_cu_cross_entropy (ctx->stream, logits, labels, losses, dlogits, rows, cols),
                   "cross_entropy", error);
}

static gboolean
cuda_update (void *p, const KsUpdateArgs *a, float *param, const float *grad, float *s1,
             float *s2, gsize n, GError **error)
{
  CudaCtx *ctx = p;
  double c1 = 1 - pow (a->beta1, (double) a->step), c2 = 1 - pow (a->beta2, (double) a->step);
  return cuda_check (ks_cu_update (ctx->stream, a->rule, a->lr, a->momentum, a->beta1, a->beta2,
                                 a->eps, a->weight_decay, a->nesterov, (float) c1, (float) c2,
                                 param, grad, s1, s2, n),
                   "update", error);
}

static gboolean
cuda_axpby (void *p, float alpha, const float *x, float beta, float *y, gsize n, GError **error)
{
  CudaCtx *ctx = p;
  return cuda_check (ks_cu_axpby (ctx->stream, alpha, x, beta, y, n), "axpby", error);
}

static gboolean
cuda_transpose (void *p, const float *x, float *y, int ndim, const gint64 *shape, const int *perm,
                GError **error)
{
  CudaCtx *ctx = p;
  return cuda_check (ks_cu_transpose (ctx->stream, x, y, ndim, shape, perm), "transpose", error);
}

static gboolean
cuda_dropout_mask (void *p, float *mask, gsize n, float rate, guint64 seed, GError **error)
{
  CudaCtx *ctx = p;
  return cuda_check (ks_cu_dropout_mask (ctx->stream, mask, n, rate, seed), "dropout_mask",
                     error);
}

static const KsComputeOps cuda_ops = {
  .size = sizeof (KsComputeOps),
  .create = cuda_create,
  .destroy = cuda_destroy,
  .alloc = cuda_alloc,
  .free = cuda_free,
  .copy_to_device = cuda_copy_to_device,
  .copy_to_host = cuda_copy_to_host,
  .describe = cuda_describe,
  .copy_on_device = cuda_copy_on_device,
  .fill_zero = cuda_fill_zero,
  .synchronize = cuda_synchronize,
  .sgemm = cuda_sgemm,
  .sgemm_strided_batched = cuda_sgemm_strided_batched,
  .unary = cuda_unary,
  .unary_backward = cuda_unary_backward,
  .binary = cuda_binary,
  .reduce = cuda_reduce,
  .softmax = cuda_softmax,
  .layer_norm = cuda_layer_norm,
  .layer_norm_backward = cuda_layer_norm_backward,
  .embedding = cuda_embedding,
  .embedding_backward = cuda_embedding_backward,
  .cross_entropy = cuda_cross_entropy,
  .update = cuda_update,
  .softmax_backward = cuda_softmax_backward,
  .axpby = cuda_axpby,
  .transpose = cuda_transpose,
  .dropout_mask = cuda_dropout_mask,
  .convert = cuda_convert,
  .gemm_half = cuda_gemm_half,
  .find_nonfinite = cuda_find_nonfinite,
  .native_stream = cuda_native_stream,
  .traits = KS_COMPUTE_DEVICE_MEMORY,
};

/* Asks the runtime how many devices there are. Without a GPU or driver it returns an
 * error code (e.g. "CUDA driver version is insufficient"), which becomes the reason. */
static int
cuda_query (char **reason)
{
  int count = 0;
  cudaError_t status = cudaGetDeviceCount (&count);

  if (status != cudaSuccess)
    {
      *reason = g_strdup_printf ("cudaGetDeviceCount: %s", cudaGetErrorString (status));
      return -1;
    }
  if (count == 0)
    {
      *reason = g_strdup ("no CUDA device on this machine");
      return -1;
    }
  return 100; /* above the CPU backend */
}

static const KsImplDesc cuda_impls[] = {
  { KS_KIND_COMPUTE, "cuda", &cuda_ops, cuda_query, "CUDA device memory, cuBLAS sgemm, the CUDA kernels of training" },
};

static const KsKeyDesc cuda_settings[] = {
  { NULL, "device", KS_VALUE_INT, "-1", -1, 1023, NULL,
    "Index of the CUDA device to use; -1: this rank's place on its host (LOCAL_RANK from "
    "ksdist launch or torchrun, OMPI_COMM_WORLD_LOCAL_RANK from mpirun, SLURM_LOCALID from "
    "srun) modulo the devices, else 0" },
};

static const KsPluginDesc cuda_plugin = {
  .abi_major = KS_ABI_MAJOR,
  .abi_minor = KS_ABI_MINOR,
  .name = "cuda",
  .version = PACKAGE_VERSION,
  .description = "GPU compute backend on the CUDA runtime and cuBLAS",
  .impls = cuda_impls,
  .n_impls = G_N_ELEMENTS (cuda_impls),
  .settings = cuda_settings,
  .n_settings = G_N_ELEMENTS (cuda_settings),
};

KS_PLUGIN_DEFINE (cuda_plugin)
