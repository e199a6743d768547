/* The GPU compute backend: device memory from the CUDA runtime, kernels from cuBLAS.
 * Links libcudart and libcublas only (never libcuda: on build machines that is a stub).
 * Row-major GEMM is done as the column-major product of the transposes:
 * C^T = op(B)^T op(A)^T, i.e. cuBLAS with A and B swapped and m and n swapped. */
#include <config.h>

#include <ksdist/compute.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

typedef struct {
  int device;
  cudaStream_t stream;
  cublasHandle_t blas;
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
      || !blas_check (cublasSetStream (ctx->blas, ctx->stream), "cublasSetStream", error))
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
  { KS_KIND_COMPUTE, "cuda", &cuda_ops, cuda_query, "CUDA device memory, cuBLAS sgemm" },
};

static const KsKeyDesc cuda_settings[] = {
  { NULL, "device", KS_VALUE_INT, "0", 0, 1023, NULL, "Index of the CUDA device to use" },
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
