/* What the plugin's vectorised kernels share (kernels.c, attention.c). */
#ifndef KS_OPENBLAS_VECTOR_H
#define KS_OPENBLAS_VECTOR_H

#include <glib.h>

#include <math.h>

/* The vectorised kernels are built for x86-64-v3 too (KS_VECTOR_KERNEL). Results can
 * differ in the last bit between the two builds (FMA rounds once), never between runs. */
#include "../target-clones.h"

/* e^x for x <= 0 (softmax and cross entropy subtract the row's maximum first):
 * 2^n e^r with n = round (x / ln 2) and |r| <= ln 2 / 2, e^r by its degree-6 Taylor
 * polynomial (error below 2e-7 relative), 2^n put straight into the exponent bits. No
 * calls and no branches, so loops of it vectorise; below -87 it returns 0. */
static inline float
fast_exp_neg (float x)
{
  x = x < -87.0f ? -87.0f : x;
  float n = __builtin_roundevenf (x * 1.44269504088896341f);
  float r = x - n * 0.693145751953125f - n * 1.42860682030941723e-6f; /* ln 2, split */
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1;
  p = p * r + 1;
  /* n is in [-126, 0] for the x this takes; a NaN (a diverged model) must stay NaN, and
   * neither it nor an out-of-range n may reach the integer conversion */
  float e = n == n ? fminf (fmaxf (n, -127.0f), 128.0f) : 0.0f;
  union { float f; guint32 i; } scale = { .i = (guint32) ((gint32) e + 127) << 23 };
  return x <= -87.0f ? 0 : p * scale.f;
}

static inline float
row_max (const float *x, gsize n)
{
  float max = -INFINITY;
  for (gsize j = 0; j < n; j++)
    max = x[j] > max ? x[j] : max;
  return max;
}

/* out[j] = e^(x[j] - max) (out may be x) and their sum: eight float lanes folded in
 * double at the end, so both loops vectorise and every run gives the same sum. */
static inline double
exp_sum (const float *x, float max, float *out, gsize n)
{
  float lane[8] = { 0 };
  double sum = 0;
  gsize j;

  for (j = 0; j < n; j++)
    out[j] = fast_exp_neg (x[j] - max);
  for (j = 0; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; k++)
      lane[k] += out[j + k];
  for (; j < n; j++)
    sum += out[j];
  for (int k = 0; k < 8; k++)
    sum += lane[k];
  return sum;
}

/* The block after KS_PARALLEL (ctx, work) runs on each of the plugin's threads when the
 * work (elements touched) is worth waking them, else once on the caller's; ks_share
 * gives each its part. With OpenBLAS's OpenMP build, OpenMP's one pool serves both
 * OpenBLAS and these kernels, which never run at the same time: no core is asked for
 * twice. Without OpenMP the block runs once, over everything. */
enum { KS_PARALLEL_MIN = 1 << 15 };
#ifdef _OPENMP
#include <omp.h>
#define KS_PRAGMA(x) _Pragma (#x)
#define KS_PARALLEL(ctx, work)                                                              \
  KS_PRAGMA (omp parallel if ((work) >= KS_PARALLEL_MIN) num_threads (ks_openblas_threads (ctx)))
#define KS_BARRIER KS_PRAGMA (omp barrier)
#else
#define KS_PARALLEL(ctx, work)
#define KS_BARRIER
#endif

typedef struct {
  gsize begin, n;
} KsShare;

/* This thread's part of n items, in pieces of `align` */
static inline KsShare
ks_share_aligned (gsize n, gsize align)
{
#ifdef _OPENMP
  gsize threads = omp_get_num_threads (), me = omp_get_thread_num ();
#else
  gsize threads = 1, me = 0;
#endif
  gsize per = (n + threads - 1) / threads;
  per = (per + align - 1) / align * align;
  gsize begin = MIN (n, me * per);
  return (KsShare) { begin, MIN (n, begin + per) - begin };
}

/* of elements: whole cache lines (16 floats) to each thread */
static inline KsShare
ks_share (gsize n)
{
  return ks_share_aligned (n, 16);
}

static inline KsShare
ks_share_rows (gsize rows)
{
  return ks_share_aligned (rows, 1);
}

#endif
