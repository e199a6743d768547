/* The CUDA training kernels: elementwise ops, reductions, softmax, layer norm, embedding,
 * cross entropy and the fused optimizer update, as the CPU plugin's kernels.c computes
 * them. Row-wise kernels run one block per row with a shared-memory reduction; sums of a
 * row accumulate in double like the CPU's. Sums over rows (bias gradients, layer norm's
 * dgamma and dbeta) fold fixed groups of rows in a fixed order, and the embedding
 * gradient scans the ids in order: no atomics, so results do not depend on scheduling. */
#include <ksdist/compute.h>
#include <ksdist/tensor.h>

#include "kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#define THREADS 256

static unsigned
blocks_for (size_t n)
{
  size_t b = (n + THREADS - 1) / THREADS;
  return (unsigned) (b < 1 ? 1 : b > 65535 ? 65535 : b);
}

#define FOR_EACH(i, n)                                                                       \
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < (n);                     \
       i += (size_t) gridDim.x * blockDim.x)

#define GELU_K 0.7978845608028654f /* sqrt (2 / pi) */
#define GELU_C 0.044715f

__device__ static float
sigmoid (float x)
{
  return x >= 0 ? 1 / (1 + expf (-x)) : expf (x) / (1 + expf (x));
}

__global__ static void
unary_kernel (int op, const float *x, float *y, size_t n)
{
  FOR_EACH (i, n)
    {
      float v = x[i], r;
      switch (op)
        {
        case KS_UNARY_RELU: r = v > 0 ? v : 0; break;
        case KS_UNARY_TANH: r = tanhf (v); break;
        case KS_UNARY_SIGMOID: r = sigmoid (v); break;
        case KS_UNARY_GELU: r = 0.5f * v * (1 + tanhf (GELU_K * (v + GELU_C * v * v * v))); break;
        case KS_UNARY_EXP: r = expf (v); break;
        case KS_UNARY_LOG: r = logf (v); break;
        case KS_UNARY_NEG: r = -v; break;
        default: r = sqrtf (v); break;
        }
      y[i] = r;
    }
}

__global__ static void
unary_backward_kernel (int op, const float *x, const float *y, const float *dy, float *dx,
                       size_t n)
{
  FOR_EACH (i, n)
    {
      float v = x[i], d = dy[i], r;
      switch (op)
        {
        case KS_UNARY_RELU: r = v > 0 ? d : 0; break;
        case KS_UNARY_TANH:
          {
            float t = y != NULL ? y[i] : tanhf (v);
            r = d * (1 - t * t);
            break;
          }
        case KS_UNARY_SIGMOID:
          {
            float s = y != NULL ? y[i] : sigmoid (v);
            r = d * s * (1 - s);
            break;
          }
        case KS_UNARY_GELU:
          {
            float t = tanhf (GELU_K * (v + GELU_C * v * v * v));
            r = d * (0.5f * (1 + t) + 0.5f * v * (1 - t * t) * GELU_K * (1 + 3 * GELU_C * v * v));
            break;
          }
        case KS_UNARY_EXP: r = d * (y != NULL ? y[i] : expf (v)); break;
        case KS_UNARY_LOG: r = d / v; break;
        case KS_UNARY_NEG: r = -d; break;
        default: r = d * 0.5f / (y != NULL ? y[i] : sqrtf (v)); break;
        }
      dx[i] = r;
    }
}

extern "C" cudaError_t
ks_cu_unary (cudaStream_t s, int op, const float *x, float *y, size_t n)
{
  unary_kernel<<<blocks_for (n), THREADS, 0, s>>> (op, x, y, n);
  return cudaGetLastError ();
}

extern "C" cudaError_t
ks_cu_unary_backward (cudaStream_t s, int op, const float *x, const float *y, const float *dy,
                      float *dx, size_t n)
{
  unary_backward_kernel<<<blocks_for (n), THREADS, 0, s>>> (op, x, y, dy, dx, n);
  return cudaGetLastError ();
}

__global__ static void
binary_kernel (int op, const float *a, const float *b, float *c, size_t rows, size_t cols,
               size_t b_rows)
{
  FOR_EACH (i, rows * cols)
    {
      float x = a[i], v = b[b_rows == 1 ? i % cols : i];
      c[i] = op == KS_BINARY_ADD ? x + v : op == KS_BINARY_SUB ? x - v
             : op == KS_BINARY_MUL ? x * v : x / v;
    }
}

extern "C" cudaError_t
ks_cu_binary (cudaStream_t s, int op, const float *a, const float *b, float *c, size_t rows,
              size_t cols, size_t b_rows)
{
  binary_kernel<<<blocks_for (rows * cols), THREADS, 0, s>>> (op, a, b, c, rows, cols, b_rows);
  return cudaGetLastError ();
}

__device__ static double
reduce_start (int op)
{
  return op == KS_REDUCE_MIN ? INFINITY : op == KS_REDUCE_MAX ? -INFINITY
         : op == KS_REDUCE_PROD ? 1 : 0;
}

__device__ static double
reduce_step (int op, double acc, double v)
{
  switch (op)
    {
    case KS_REDUCE_MIN: return v < acc ? v : acc;
    case KS_REDUCE_MAX: return v > acc ? v : acc;
    case KS_REDUCE_PROD: return acc * v;
    default: return acc + v;
    }
}

/* Folds each thread's `acc` across the block (THREADS threads); every thread gets the
 * result. The fold order is fixed, so the result is too. */
__device__ static double
block_reduce (int op, double acc)
{
  __shared__ double part[THREADS];
  part[threadIdx.x] = acc;
  __syncthreads ();
  for (unsigned w = THREADS / 2; w > 0; w /= 2)
    {
      if (threadIdx.x < w)
        part[threadIdx.x] = reduce_step (op, part[threadIdx.x], part[threadIdx.x + w]);
      __syncthreads ();
    }
  double r = part[0];
  __syncthreads (); /* part is reused by the caller's next reduction */
  return r;
}

/* Over columns (axis 1), one block per row. */
__global__ static void
reduce_kernel (int op, const float *x, float *y, size_t rows, size_t cols)
{
  for (size_t r = blockIdx.x; r < rows; r += gridDim.x)
    {
      double acc = reduce_start (op);
      for (size_t j = threadIdx.x; j < cols; j += THREADS)
        acc = reduce_step (op, acc, x[r * cols + j]);
      acc = block_reduce (op, acc);
      if (threadIdx.x == 0)
        y[r] = (float) (op == KS_REDUCE_AVG && cols > 0 ? acc / cols : acc);
    }
}

/* Sums over rows (axis 0) use blocks of COL_TILE columns x ROW_GROUPS row groups: row
 * group y folds rows y, y + ROW_GROUPS, ... of its column (coalesced across the
 * columns), then the groups' results are folded in order by the first group. */
#define COL_TILE 32
#define ROW_GROUPS 32

static dim3
column_grid (size_t cols)
{
  size_t b = (cols + COL_TILE - 1) / COL_TILE;
  return dim3 ((unsigned) (b < 1 ? 1 : b > 65535 ? 65535 : b));
}

__global__ static void
reduce_rows_kernel (int op, const float *x, float *y, size_t rows, size_t cols)
{
  __shared__ double part[ROW_GROUPS][COL_TILE + 1];
  for (size_t tile = blockIdx.x * (size_t) COL_TILE; tile < cols;
       tile += (size_t) gridDim.x * COL_TILE)
    {
      size_t j = tile + threadIdx.x;
      double acc = reduce_start (op);
      if (j < cols)
        for (size_t r = threadIdx.y; r < rows; r += ROW_GROUPS)
          acc = reduce_step (op, acc, x[r * cols + j]);
      part[threadIdx.y][threadIdx.x] = acc;
      __syncthreads ();
      if (threadIdx.y == 0 && j < cols)
        {
          for (int k = 1; k < ROW_GROUPS; k++)
            acc = reduce_step (op, acc, part[k][threadIdx.x]);
          y[j] = (float) (op == KS_REDUCE_AVG && rows > 0 ? acc / rows : acc);
        }
      __syncthreads ();
    }
}

extern "C" cudaError_t
ks_cu_reduce (cudaStream_t s, int op, const float *x, float *y, size_t rows, size_t cols,
              int axis)
{
  if (axis == 0)
    reduce_rows_kernel<<<column_grid (cols), dim3 (COL_TILE, ROW_GROUPS), 0, s>>> (op, x, y, rows,
                                                                                   cols);
  else
    reduce_kernel<<<blocks_for (rows * THREADS), THREADS, 0, s>>> (op, x, y, rows, cols);
  return cudaGetLastError ();
}

/* max and log (sum (exp (x - max))) of one row, for every thread of the block */
__device__ static void
row_log_sum_exp (const float *xr, size_t cols, double *max, double *log_sum)
{
  double m = -INFINITY, sum = 0;
  for (size_t j = threadIdx.x; j < cols; j += THREADS)
    m = fmax (m, (double) xr[j]);
  m = block_reduce (KS_REDUCE_MAX, m);
  for (size_t j = threadIdx.x; j < cols; j += THREADS)
    sum += exp (xr[j] - m);
  sum = block_reduce (KS_REDUCE_SUM, sum);
  *max = m;
  *log_sum = log (sum);
}

__device__ static float
warp_max (float v)
{
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf (v, __shfl_xor_sync (0xffffffffu, v, o));
  return v;
}

__device__ static double
warp_sum (double v)
{
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync (0xffffffffu, v, o);
  return v;
}

/* A warp per row: attention's rows (tokens wide) are short, and a block per row spent
 * its time in __syncthreads (a tenth of a GPT-2 step on the H200). Terms in float, their
 * sum in double, as the CPU's kernel. */
__global__ static void
softmax_kernel (const float *x, float *y, size_t rows, size_t cols, int log_softmax)
{
  const unsigned lane = threadIdx.x % 32;
  const size_t warps = (size_t) gridDim.x * (THREADS / 32);
  for (size_t r = blockIdx.x * (size_t) (THREADS / 32) + threadIdx.x / 32; r < rows; r += warps)
    {
      const float *xr = x + r * cols;
      float *yr = y + r * cols;
      float max = -INFINITY;
      for (size_t j = lane; j < cols; j += 32)
        max = fmaxf (max, xr[j]);
      max = warp_max (max);
      double sum = 0;
      for (size_t j = lane; j < cols; j += 32)
        sum += expf (xr[j] - max);
      sum = warp_sum (sum);
      const float log_sum = (float) log (sum), scale = (float) (1 / sum);
      for (size_t j = lane; j < cols; j += 32)
        yr[j] = log_softmax ? xr[j] - max - log_sum : expf (xr[j] - max) * scale;
    }
}

extern "C" cudaError_t
ks_cu_softmax (cudaStream_t s, const float *x, float *y, size_t rows, size_t cols,
               int log_softmax)
{
  softmax_kernel<<<blocks_for (rows * 32), THREADS, 0, s>>> (x, y, rows, cols, log_softmax);
  return cudaGetLastError ();
}

__global__ static void
softmax_backward_kernel (const float *y, const float *dy, float *dx, size_t rows, size_t cols,
                         int log_softmax)
{
  for (size_t r = blockIdx.x; r < rows; r += gridDim.x)
    {
      const float *yr = y + r * cols, *dyr = dy + r * cols;
      float *dxr = dx + r * cols;
      double dot = 0;
      for (size_t j = threadIdx.x; j < cols; j += THREADS)
        dot += log_softmax ? dyr[j] : (double) dyr[j] * yr[j];
      dot = block_reduce (KS_REDUCE_SUM, dot);
      for (size_t j = threadIdx.x; j < cols; j += THREADS)
        dxr[j] = (float) (log_softmax ? dyr[j] - exp ((double) yr[j]) * dot : yr[j] * (dyr[j] - dot));
    }
}

extern "C" cudaError_t
ks_cu_softmax_backward (cudaStream_t s, const float *y, const float *dy, float *dx, size_t rows,
                        size_t cols, int log_softmax)
{
  softmax_backward_kernel<<<blocks_for (rows * THREADS), THREADS, 0, s>>> (y, dy, dx, rows, cols,
                                                                           log_softmax);
  return cudaGetLastError ();
}

__global__ static void
layer_norm_kernel (const float *x, const float *gamma, const float *beta, float *y, float *mean,
                   float *rstd, size_t rows, size_t cols, float eps)
{
  for (size_t r = blockIdx.x; r < rows; r += gridDim.x)
    {
      const float *xr = x + r * cols;
      float *yr = y + r * cols;
      double m = 0, var = 0;
      for (size_t j = threadIdx.x; j < cols; j += THREADS)
        m += xr[j];
      m = block_reduce (KS_REDUCE_SUM, m) / cols;
      for (size_t j = threadIdx.x; j < cols; j += THREADS)
        var += (xr[j] - m) * (xr[j] - m);
      var = block_reduce (KS_REDUCE_SUM, var);
      double sd = 1 / sqrt (var / cols + eps);
      for (size_t j = threadIdx.x; j < cols; j += THREADS)
        yr[j] = (float) ((xr[j] - m) * sd * (gamma ? gamma[j] : 1) + (beta ? beta[j] : 0));
      if (threadIdx.x == 0 && mean != NULL)
        mean[r] = (float) m;
      if (threadIdx.x == 0 && rstd != NULL)
        rstd[r] = (float) sd;
    }
}

extern "C" cudaError_t
ks_cu_layer_norm (cudaStream_t s, const float *x, const float *gamma, const float *beta, float *y,
                  float *mean, float *rstd, size_t rows, size_t cols, float eps)
{
  layer_norm_kernel<<<blocks_for (rows * THREADS), THREADS, 0, s>>> (x, gamma, beta, y, mean, rstd,
                                                                     rows, cols, eps);
  return cudaGetLastError ();
}

__global__ static void
layer_norm_dx_kernel (const float *x, const float *gamma, const float *mean, const float *rstd,
                      const float *dy, float *dx, size_t rows, size_t cols)
{
  for (size_t r = blockIdx.x; r < rows; r += gridDim.x)
    {
      const float *xr = x + r * cols, *dyr = dy + r * cols;
      float *dxr = dx + r * cols;
      double mean_g = 0, mean_gx = 0; /* means of dxhat and dxhat * xhat */
      for (size_t j = threadIdx.x; j < cols; j += THREADS)
        {
          double g = dyr[j] * (gamma ? gamma[j] : 1);
          mean_g += g;
          mean_gx += g * ((xr[j] - mean[r]) * rstd[r]);
        }
      mean_g = block_reduce (KS_REDUCE_SUM, mean_g) / cols;
      mean_gx = block_reduce (KS_REDUCE_SUM, mean_gx) / cols;
      for (size_t j = threadIdx.x; j < cols; j += THREADS)
        {
          double xhat = (xr[j] - mean[r]) * rstd[r];
          double g = dyr[j] * (gamma ? gamma[j] : 1);
          dxr[j] = (float) (rstd[r] * (g - mean_g - xhat * mean_gx));
        }
    }
}

/* dgamma[j] += sum over rows of dy * xhat, dbeta[j] += sum of dy: tiles as
 * reduce_rows_kernel's */
__global__ static void
layer_norm_dparams_kernel (const float *x, const float *mean, const float *rstd, const float *dy,
                           float *dgamma, float *dbeta, size_t rows, size_t cols)
{
  __shared__ double part_g[ROW_GROUPS][COL_TILE + 1], part_b[ROW_GROUPS][COL_TILE + 1];
  for (size_t tile = blockIdx.x * (size_t) COL_TILE; tile < cols;
       tile += (size_t) gridDim.x * COL_TILE)
    {
      size_t j = tile + threadIdx.x;
      double sg = 0, sb = 0;
      if (j < cols)
        for (size_t r = threadIdx.y; r < rows; r += ROW_GROUPS)
          {
            float xhat = (x[r * cols + j] - mean[r]) * rstd[r];
            sg += dy[r * cols + j] * xhat;
            sb += dy[r * cols + j];
          }
      part_g[threadIdx.y][threadIdx.x] = sg;
      part_b[threadIdx.y][threadIdx.x] = sb;
      __syncthreads ();
      if (threadIdx.y == 0 && j < cols)
        {
          for (int k = 1; k < ROW_GROUPS; k++)
            sg += part_g[k][threadIdx.x], sb += part_b[k][threadIdx.x];
          if (dgamma != NULL)
            dgamma[j] += (float) sg;
          if (dbeta != NULL)
            dbeta[j] += (float) sb;
        }
      __syncthreads ();
    }
}

extern "C" cudaError_t
ks_cu_layer_norm_backward (cudaStream_t s, const float *x, const float *gamma, const float *mean,
                           const float *rstd, const float *dy, float *dx, float *dgamma,
                           float *dbeta, size_t rows, size_t cols)
{
  if (dgamma != NULL || dbeta != NULL)
    layer_norm_dparams_kernel<<<column_grid (cols), dim3 (COL_TILE, ROW_GROUPS), 0, s>>> (
        x, mean, rstd, dy, dgamma, dbeta, rows, cols);
  layer_norm_dx_kernel<<<blocks_for (rows * THREADS), THREADS, 0, s>>> (x, gamma, mean, rstd, dy,
                                                                        dx, rows, cols);
  return cudaGetLastError ();
}

__global__ static void
find_bad_id_kernel (const int64_t *ids, size_t n_ids, size_t limit, unsigned long long *first_bad)
{
  FOR_EACH (i, n_ids)
    if (ids[i] < 0 || (uint64_t) ids[i] >= limit)
      atomicMin (first_bad, (unsigned long long) i); /* an integer minimum: order-free */
}

__global__ static void
fill_u64_kernel (unsigned long long *p, unsigned long long v)
{
  *p = v;
}

extern "C" cudaError_t
ks_cu_find_bad_id (cudaStream_t s, const int64_t *ids, size_t n_ids, size_t limit,
                   unsigned long long *first_bad)
{
  fill_u64_kernel<<<1, 1, 0, s>>> (first_bad, n_ids);
  find_bad_id_kernel<<<blocks_for (n_ids), THREADS, 0, s>>> (ids, n_ids, limit, first_bad);
  return cudaGetLastError ();
}

__global__ static void
embedding_kernel (const float *table, const int64_t *ids, float *out, size_t n_ids, size_t dim)
{
  FOR_EACH (i, n_ids * dim)
    out[i] = table[ids[i / dim] * dim + i % dim];
}

extern "C" cudaError_t
ks_cu_embedding (cudaStream_t s, const float *table, const int64_t *ids, float *out,
                 size_t n_ids, size_t dim)
{
  embedding_kernel<<<blocks_for (n_ids * dim), THREADS, 0, s>>> (table, ids, out, n_ids, dim);
  return cudaGetLastError ();
}

/* A block per table row, a thread per column: scans the ids in order and adds the rows
 * that name it. O(rows * ids) reads of the (cached) ids, but deterministic. */
__global__ static void
embedding_backward_kernel (const float *dout, const int64_t *ids, float *dtable, size_t n_rows,
                           size_t n_ids, size_t dim)
{
  for (size_t row = blockIdx.x; row < n_rows; row += gridDim.x)
    for (size_t j = threadIdx.x; j < dim; j += THREADS)
      {
        float acc = dtable[row * dim + j];
        for (size_t i = 0; i < n_ids; i++)
          if ((size_t) ids[i] == row)
            acc += dout[i * dim + j];
        dtable[row * dim + j] = acc;
      }
}

extern "C" cudaError_t
ks_cu_embedding_backward (cudaStream_t s, const float *dout, const int64_t *ids, float *dtable,
                          size_t n_rows, size_t n_ids, size_t dim)
{
  embedding_backward_kernel<<<blocks_for (n_rows * THREADS), THREADS, 0, s>>> (dout, ids, dtable,
                                                                               n_rows, n_ids, dim);
  return cudaGetLastError ();
}

__global__ static void
cross_entropy_kernel (const float *logits, const int64_t *labels, float *losses, float *dlogits,
                      size_t rows, size_t cols)
{
  for (size_t r = blockIdx.x; r < rows; r += gridDim.x)
    {
      const float *xr = logits + r * cols;
      double max, log_sum;
      row_log_sum_exp (xr, cols, &max, &log_sum);
      log_sum += max;
      if (threadIdx.x == 0)
        losses[r] = (float) (log_sum - xr[labels[r]]);
      if (dlogits != NULL)
        for (size_t j = threadIdx.x; j < cols; j += THREADS)
          dlogits[r * cols + j] = (float) (exp (xr[j] - log_sum) - ((int64_t) j == labels[r]));
    }
}

extern "C" cudaError_t
ks_cu_cross_entropy (cudaStream_t s, const float *logits, const int64_t *labels, float *losses,
                     float *dlogits, size_t rows, size_t cols)
{
  cross_entropy_kernel<<<blocks_for (rows * THREADS), THREADS, 0, s>>> (logits, labels, losses,
                                                                        dlogits, rows, cols);
  return cudaGetLastError ();
}

/* Weight decay is L2 in the gradient, except AdamW's decoupled form (as kernels.c). */
__global__ static void
update_kernel (int rule, float lr, float mu, float b1, float b2, float eps, float wd, int nesterov,
               float c1, float c2, float *p, const float *g, float *s1, float *s2, size_t n)
{
  FOR_EACH (i, n)
    {
      float pi = p[i], gi = g[i];
      switch (rule)
        {
        case KS_UPDATE_SGD: pi -= lr * (gi + wd * pi); break;
        case KS_UPDATE_MOMENTUM:
          gi += wd * pi;
          s1[i] = mu * s1[i] + gi;
          pi -= lr * (nesterov ? gi + mu * s1[i] : s1[i]);
          break;
        case KS_UPDATE_ADAGRAD:
          gi += wd * pi;
          s1[i] += gi * gi;
          pi -= lr * gi / (sqrtf (s1[i]) + eps);
          break;
        default:
          if (rule == KS_UPDATE_ADAMW)
            pi -= lr * wd * pi;
          else
            gi += wd * pi;
          s1[i] = b1 * s1[i] + (1 - b1) * gi;
          s2[i] = b2 * s2[i] + (1 - b2) * gi * gi;
          pi -= lr * (s1[i] / c1) / (sqrtf (s2[i] / c2) + eps);
        }
      p[i] = pi;
    }
}

extern "C" cudaError_t
ks_cu_update (cudaStream_t s, int rule, float lr, float momentum, float beta1, float beta2,
              float eps, float weight_decay, int nesterov, float c1, float c2, float *p,
              const float *g, float *s1, float *s2, size_t n)
{
  update_kernel<<<blocks_for (n), THREADS, 0, s>>> (rule, lr, momentum, beta1, beta2, eps,
                                                    weight_decay, nesterov, c1, c2, p, g, s1, s2, n);
  return cudaGetLastError ();
}

__global__ static void
axpby_kernel (float alpha, const float *x, float beta, float *y, size_t n)
{
  FOR_EACH (i, n)
    y[i] = beta == 0 ? alpha * x[i] : alpha * x[i] + beta * y[i];
}

extern "C" cudaError_t
ks_cu_axpby (cudaStream_t s, float alpha, const float *x, float beta, float *y, size_t n)
{
  axpby_kernel<<<blocks_for (n), THREADS, 0, s>>> (alpha, x, beta, y, n);
  return cudaGetLastError ();
}

/* y's index decomposed over its dimensions, each step taken in x: see ks_cu_transpose */
struct TransposeDims {
  int ndim;
  long long out_shape[KS_TENSOR_MAX_DIMS], step[KS_TENSOR_MAX_DIMS];
};

__global__ static void
transpose_kernel (const float *x, float *y, TransposeDims dims, size_t n)
{
  FOR_EACH (i, n)
    {
      size_t rest = i, src = 0;
      for (int d = dims.ndim - 1; d >= 0; d--)
        {
          src += (rest % dims.out_shape[d]) * dims.step[d];
          rest /= dims.out_shape[d];
        }
      y[i] = x[src];
    }
}

extern "C" cudaError_t
ks_cu_transpose (cudaStream_t s, const float *x, float *y, int ndim, const int64_t *shape,
                 const int *perm)
{
  TransposeDims dims;
  long long stride[KS_TENSOR_MAX_DIMS];
  size_t n = 1;

  dims.ndim = ndim;
  stride[ndim - 1] = 1;
  for (int d = ndim - 1; d > 0; d--)
    stride[d - 1] = stride[d] * shape[d];
  for (int d = 0; d < ndim; d++)
    {
      dims.out_shape[d] = shape[perm[d]];
      dims.step[d] = stride[perm[d]];
      n *= shape[d];
    }
  if (n == 0)
    return cudaSuccess;
  transpose_kernel<<<blocks_for (n), THREADS, 0, s>>> (x, y, dims, n);
  return cudaGetLastError ();
}

__global__ static void
dropout_mask_kernel (float *mask, size_t n, float p, unsigned long long seed)
{
  float scale = 1 / (1 - p);
  FOR_EACH (i, n)
    mask[i] = ks_dropout_uniform (seed, i) >= p ? scale : 0;
}

extern "C" cudaError_t
ks_cu_dropout_mask (cudaStream_t s, float *mask, size_t n, float p, unsigned long long seed)
{
  dropout_mask_kernel<<<blocks_for (n), THREADS, 0, s>>> (mask, n, p, seed);
  return cudaGetLastError ();
}

__global__ static void
to_half_kernel (const float *x, uint16_t *y, size_t n, int bf16)
{
  FOR_EACH (i, n)
    y[i] = bf16 ? __bfloat16_as_ushort (__float2bfloat16_rn (x[i]))
                : __half_as_ushort (__float2half_rn (x[i]));
}

extern "C" cudaError_t
ks_cu_to_half (cudaStream_t s, const float *x, uint16_t *y, size_t n, int bf16)
{
  to_half_kernel<<<blocks_for (n), THREADS, 0, s>>> (x, y, n, bf16);
  return cudaGetLastError ();
}

__global__ static void
from_half_kernel (const uint16_t *x, float *y, size_t n, int bf16)
{
  FOR_EACH (i, n)
    y[i] = bf16 ? __bfloat162float (__ushort_as_bfloat16 (x[i]))
                : __half2float (__ushort_as_half (x[i]));
}

extern "C" cudaError_t
ks_cu_from_half (cudaStream_t s, const uint16_t *x, float *y, size_t n, int bf16)
{
  from_half_kernel<<<blocks_for (n), THREADS, 0, s>>> (x, y, n, bf16);
  return cudaGetLastError ();
}

/* Every thread that sees a bad value writes the same 1: the result does not depend on
 * which one wins */
__global__ static void
find_nonfinite_kernel (const float *x, size_t n, float *found)
{
  FOR_EACH (i, n)
    if (!isfinite (x[i]))
      *found = 1.0f;
}

extern "C" cudaError_t
ks_cu_find_nonfinite (cudaStream_t s, const float *x, size_t n, float *found)
{
  cudaError_t status = cudaMemsetAsync (found, 0, sizeof (float), s);
  if (status != cudaSuccess)
    return status;
  find_nonfinite_kernel<<<blocks_for (n), THREADS, 0, s>>> (x, n, found);
  return cudaGetLastError ();
}
