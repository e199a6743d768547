/* Fused causal self-attention on the CPU, the FlashAttention idea: for each sequence and
 * head, blocks of ROWS queries meet only the keys up to the block's last query; each
 * query's row of scores (at most `tokens` floats, in L1 or L2) gets an exact softmax and
 * is used at once. The backward recomputes the probabilities from the forward's
 * log-sum-exp. Nothing of size tokens x tokens is stored, and the masked half of the
 * scores is never computed (beyond the diagonal's block of ROWS queries, rounded up to
 * LANES keys). The (sequence, head) pairs are shared among the plugin's threads. */
#include <config.h>

/* see kernels.c: -O3 vectorises the loops that may alias, no-trapping-math the selects */
#pragma GCC optimize ("O3", "no-trapping-math")

#include "kernels.h"
#include "vector.h"

#include <math.h>
#include <string.h>

enum {
  ROWS = 4, /* queries per block: each key vector loaded serves this many */
  LANES = 8 /* scores per accumulator: one AVX2 register */
};

/* One sequence and head at a time; keys and values transposed to [head_size][padded]
 * so that a row of scores is a sum of contiguous vectors. */
typedef struct {
  int tokens, padded, d, ld, C; /* padded: tokens rounded up to LANES; ld: a qkv row */
  float *kt, *vt;               /* [d][padded], zero beyond tokens */
  float *s, *dp;                /* [ROWS][padded]: scores (then probabilities), dout·v */
  float *o;                     /* [ROWS][d]: a block's output, or its queries' gradient */
  float *dk, *dv;               /* [tokens][d]: the backward's sums over queries */
} Scratch;

static Scratch *
scratch_new (const KsAttentionShape *s, gboolean backward)
{
  Scratch *w = g_new0 (Scratch, 1);
  w->tokens = s->tokens;
  w->padded = (s->tokens + LANES - 1) / LANES * LANES;
  w->d = s->head_size;
  w->C = s->heads * s->head_size;
  w->ld = 3 * w->C;
  gsize square = (gsize) w->d * w->padded, block = (gsize) ROWS * w->padded;
  w->kt = g_new0 (float, square);
  w->s = g_new0 (float, block);
  w->o = g_new0 (float, (gsize) ROWS * w->d);
  if (backward)
    {
      w->vt = g_new0 (float, square);
      w->dp = g_new0 (float, block);
      w->dk = g_new (float, (gsize) w->tokens * w->d);
      w->dv = g_new (float, (gsize) w->tokens * w->d);
    }
  return w;
}

static void
scratch_free (Scratch *w)
{
  g_free (w->kt);
  g_free (w->vt);
  g_free (w->s);
  g_free (w->dp);
  g_free (w->dk);
  g_free (w->dv);
  g_free (w->o);
  g_free (w);
}

/* t[c][j] = x[j * ld + c] for the first `tokens` rows: t is written in order */
static void
transpose_in (const float *x, int ld, const Scratch *w, float *t)
{
  for (int c = 0; c < w->d; c++)
    for (int j = 0; j < w->tokens; j++)
      t[(gsize) c * w->padded + j] = x[(gsize) j * ld + c];
}

/* LANES floats; GCC's vector extension, so the loops below vectorise along the keys
 * (its auto-vectoriser took the rows instead, with gathers) */
typedef float Lanes __attribute__ ((vector_size (LANES * sizeof (float))));

/* unaligned vector loads and stores, as macros: a function returning a vector would
 * change the ABI between the clones */
#define LOAD(v, x) memcpy (&(v), (x), sizeof (Lanes))
#define STORE(y, v) memcpy ((y), &(v), sizeof (Lanes))

/* out[r][j] = scale * sum_c a[r][c] t[c][j] for every r < ROWS and j < n (rounded up to
 * LANES): ROWS x LANES sums stay in registers while t's rows stream past. */
KS_VECTOR_KERNEL static void
rows_times (const float *const a[ROWS], float scale, const float *t, const Scratch *w, int n,
            float *out)
{
  for (int j0 = 0; j0 < n; j0 += LANES)
    {
      Lanes acc[ROWS] = { 0 };
      for (int c = 0; c < w->d; c++)
        {
          Lanes tc;
          LOAD (tc, t + (gsize) c * w->padded + j0);
          for (int r = 0; r < ROWS; r++)
            acc[r] += a[r][c] * tc;
        }
      for (int r = 0; r < ROWS; r++)
        {
          Lanes y = scale * acc[r];
          STORE (out + (gsize) r * w->padded + j0, y);
        }
    }
}

/* The rows of a block starting at query r0, each a pointer into x (row stride ld); past
 * the end the last row repeats, so the loops need no branch. */
static int
block_rows (const float *x, int ld, int r0, const Scratch *w, const float *rows[ROWS])
{
  int n_rows = MIN (ROWS, w->tokens - r0);
  for (int r = 0; r < ROWS; r++)
    rows[r] = x + (gsize) (r0 + MIN (r, n_rows - 1)) * ld;
  return n_rows;
}

/* o[r][c] = sum_{j < n} a[r][j] x_j[c] for the block's rows (a [ROWS][padded]), the x_j
 * rows of stride ld: each x_j vector loaded serves ROWS rows. */
KS_VECTOR_KERNEL static void
block_times_rows (const float *a, int n, const float *x, int ld, const Scratch *w, float *o)
{
  int c0 = 0;
  for (; c0 + LANES <= w->d; c0 += LANES)
    {
      Lanes acc[ROWS] = { 0 };
      for (int j = 0; j < n; j++)
        {
          Lanes xj;
          LOAD (xj, x + (gsize) j * ld + c0);
          for (int r = 0; r < ROWS; r++)
            acc[r] += a[(gsize) r * w->padded + j] * xj;
        }
      for (int r = 0; r < ROWS; r++)
        STORE (o + (gsize) r * w->d + c0, acc[r]);
    }
  for (; c0 < w->d; c0++) /* head sizes that are not a multiple of LANES */
    for (int r = 0; r < ROWS; r++)
      {
        float sum = 0;
        for (int j = 0; j < n; j++)
          sum += a[(gsize) r * w->padded + j] * x[(gsize) j * ld + c0];
        o[(gsize) r * w->d + c0] = sum;
      }
}

/* acc[j][c] += sum_r a[r][j] x_r[c] for j < n: the block's rows x_r spread over the keys */
KS_VECTOR_KERNEL static void
block_spread (const float *a, int n, const float *const x[ROWS], const Scratch *w, float *acc)
{
  int c0 = 0;
  for (; c0 + LANES <= w->d; c0 += LANES)
    {
      Lanes xr[ROWS];
      for (int r = 0; r < ROWS; r++)
        LOAD (xr[r], x[r] + c0);
      for (int j = 0; j < n; j++)
        {
          float *y = acc + (gsize) j * w->d + c0;
          Lanes sum;
          LOAD (sum, y);
          for (int r = 0; r < ROWS; r++)
            sum += a[(gsize) r * w->padded + j] * xr[r];
          STORE (y, sum);
        }
    }
  for (; c0 < w->d; c0++)
    for (int j = 0; j < n; j++)
      for (int r = 0; r < ROWS; r++)
        acc[(gsize) j * w->d + c0] += a[(gsize) r * w->padded + j] * x[r][c0];
}

/* Query i's row of scores s[0..n) as e^(s - max), zero after n up to `padded`; returns
 * the max, and the row's sum in *sum. */
KS_VECTOR_KERNEL static float
exp_row (float *s, int n, int padded, double *sum)
{
  float max = row_max (s, n);
  *sum = exp_sum (s, max, s, n);
  memset (s + n, 0, (padded - n) * sizeof (float));
  return max;
}

static void
forward_head (const float *q, float *out, float *lse, Scratch *w, float scale)
{
  const float *k = q + w->C, *v = q + 2 * w->C;
  const float *rows[ROWS];

  transpose_in (k, w->ld, w, w->kt);
  for (int r0 = 0; r0 < w->tokens; r0 += ROWS)
    {
      int n_rows = block_rows (q, w->ld, r0, w, rows), n = r0 + n_rows;
      double sum[ROWS];
      rows_times (rows, scale, w->kt, w, n, w->s);
      for (int r = 0; r < ROWS; r++)
        {
          float *p = w->s + (gsize) r * w->padded;
          if (r >= n_rows)
            memset (p, 0, w->padded * sizeof (float));
          else
            lse[r0 + r] = exp_row (p, r0 + r + 1, w->padded, &sum[r]);
        }
      block_times_rows (w->s, n, v, w->ld, w, w->o);
      for (int r = 0; r < n_rows; r++)
        {
          ks_openblas_axpby_part ((float) (1 / sum[r]), w->o + (gsize) r * w->d, 0,
                                  out + (gsize) (r0 + r) * w->C, w->d);
          lse[r0 + r] += (float) log (sum[r]);
        }
    }
}

gboolean
ks_openblas_attention (void *ctx, const float *qkv, float *out, float *lse,
                       const KsAttentionShape *s, GError **error)
{
  KS_PARALLEL (ctx, (gsize) s->batch * s->tokens * s->heads * s->tokens)
  {
    KsShare share = ks_share_rows ((gsize) s->batch * s->heads);
    Scratch *w = share.n > 0 ? scratch_new (s, FALSE) : NULL;
    for (int bh = share.begin; bh < (int) (share.begin + share.n); bh++)
      {
        int b = bh / s->heads, h = bh % s->heads;
        gsize row = (gsize) b * s->tokens;
        forward_head (qkv + row * w->ld + (gsize) h * w->d, out + row * w->C + (gsize) h * w->d,
                      lse + (gsize) bh * s->tokens, w, s->scale);
      }
    if (w != NULL)
      scratch_free (w);
  }
  return TRUE;
}

/* Query i's probabilities from its scores p (keys j < n) and lse, and from them and
 * dp_j = dout_i · v_j the scores' gradient p (dp - sum p dp) * scale into ds; after n,
 * both are zero up to `padded`. */
KS_VECTOR_KERNEL static void
score_gradient (float *p, const float *dp, float *ds, int n, int padded, float lse, float scale)
{
  double dot = 0;
  for (int j = 0; j < n; j++)
    p[j] = fast_exp_neg (p[j] - lse);
  for (int j = 0; j < n; j++)
    dot += p[j] * dp[j];
  for (int j = 0; j < n; j++)
    ds[j] = p[j] * (dp[j] - (float) dot) * scale;
  memset (p + n, 0, (padded - n) * sizeof (float));
  memset (ds + n, 0, (padded - n) * sizeof (float));
}

static void
backward_head (const float *q, const float *lse, const float *dout, float *dq, float beta,
               Scratch *w, float scale)
{
  const float *k = q + w->C, *v = q + 2 * w->C;
  const float *qrows[ROWS], *drows[ROWS];
  gsize n_kv = (gsize) w->tokens * w->d;

  transpose_in (k, w->ld, w, w->kt);
  transpose_in (v, w->ld, w, w->vt);
  memset (w->dk, 0, n_kv * sizeof (float));
  memset (w->dv, 0, n_kv * sizeof (float));
  for (int r0 = 0; r0 < w->tokens; r0 += ROWS)
    {
      int n_rows = block_rows (q, w->ld, r0, w, qrows), n = r0 + n_rows;
      block_rows (dout, w->C, r0, w, drows);
      rows_times (qrows, scale, w->kt, w, n, w->s);
      rows_times (drows, 1, w->vt, w, n, w->dp);
      /* s turns into p, dp into ds */
      for (int r = 0; r < ROWS; r++)
        {
          float *p = w->s + (gsize) r * w->padded, *dp = w->dp + (gsize) r * w->padded;
          if (r >= n_rows)
            {
              memset (p, 0, w->padded * sizeof (float));
              memset (dp, 0, w->padded * sizeof (float));
            }
          else
            score_gradient (p, dp, dp, r0 + r + 1, w->padded, lse[r0 + r], scale);
        }
      block_spread (w->s, n, drows, w, w->dv);  /* dv_j += sum_i p_ij dout_i */
      block_spread (w->dp, n, qrows, w, w->dk); /* dk_j += sum_i ds_ij q_i */
      block_times_rows (w->dp, n, k, w->ld, w, w->o); /* dq_i = sum_j ds_ij k_j */
      for (int r = 0; r < n_rows; r++)
        ks_openblas_axpby_part (1, w->o + (gsize) r * w->d, beta, dq + (gsize) (r0 + r) * w->ld,
                                w->d);
    }
  for (int j = 0; j < w->tokens; j++)
    {
      float *dk = dq + (gsize) j * w->ld + w->C;
      ks_openblas_axpby_part (1, w->dk + (gsize) j * w->d, beta, dk, w->d);
      ks_openblas_axpby_part (1, w->dv + (gsize) j * w->d, beta, dk + w->C, w->d);
    }
}

gboolean
ks_openblas_attention_backward (void *ctx, const float *qkv, const float *lse, const float *dout,
                                float *dqkv, float beta, const KsAttentionShape *s,
                                GError **error)
{
  KS_PARALLEL (ctx, (gsize) s->batch * s->tokens * s->heads * s->tokens)
  {
    KsShare share = ks_share_rows ((gsize) s->batch * s->heads);
    Scratch *w = share.n > 0 ? scratch_new (s, TRUE) : NULL;
    for (int bh = share.begin; bh < (int) (share.begin + share.n); bh++)
      {
        int b = bh / s->heads, h = bh % s->heads;
        gsize row = (gsize) b * s->tokens, col = (gsize) h * w->d;
        backward_head (qkv + row * w->ld + col, lse + (gsize) bh * s->tokens,
                       dout + row * w->C + col, dqkv + row * w->ld + col, beta, w, s->scale);
      }
    if (w != NULL)
      scratch_free (w);
  }
  return TRUE;
}
