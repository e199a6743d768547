/* Causal self-attention: the builder, and the op's forward and backward, fused where
 * the compute backend has an attention kernel, else composed of batched GEMMs, a mask
 * and a softmax. Apart from model-ops.c because it is the one op with its own shape
 * bookkeeping (AttentionShape) and two paths each way. */
#include "model-private.h"

#include <math.h>

#define DEV(e) ((e)->model->compute)
#define F(t) ((float *) (t)->data)

KsExpr *
ks_causal_self_attention (KsExpr *qkv, gint64 batch, gint64 heads, GError **error)
{
  g_autofree char *sq = ks_expr_shape_string (qkv);
  KsExpr *e;

  if (!ks_op_require_float ("attention", qkv, error))
    return NULL;
  if (qkv->ndim != 2 || batch < 1 || heads < 1 || qkv->shape[0] % batch != 0
      || qkv->shape[1] % (3 * heads) != 0)
    {
      ks_invalid (error,
                  "attention: '%s' is %s; it takes [batch * T, 3 * heads * head size] with "
                  "batch = %" G_GINT64_FORMAT " and heads = %" G_GINT64_FORMAT,
                  qkv->name, sq, batch, heads);
      return NULL;
    }
  const gint64 shape[] = { qkv->shape[0], qkv->shape[1] / 3 };
  if ((e = ks_op_expr_n (OP_ATTENTION, &qkv, 1, 2, shape, error)) != NULL)
    e->batch = batch, e->heads = heads;
  return e;
}

/* The shape of an attention op: T tokens per sequence, width C, head size d. */
typedef struct {
  int T, C, d, H, B;
  float scale;
} AttentionShape;

static AttentionShape
attention_shape (const KsExpr *e)
{
  AttentionShape s;
  s.B = e->batch;
  s.H = e->heads;
  s.T = e->shape[0] / e->batch;
  s.C = e->shape[1];
  s.d = s.C / s.H;
  s.scale = 1 / sqrtf (s.d);
  return s;
}

static KsAttentionShape
fused_shape (const AttentionShape *s)
{
  return (KsAttentionShape) { s->B, s->T, s->H, s->d, s->scale };
}

gboolean
ks_attention_forward (KsExpr *e, GError **error)
{
  KsCompute *c = DEV (e);
  AttentionShape s = attention_shape (e);
  gsize probs = (gsize) s.B * s.H * s.T * s.T;
  const float *qkv = F (e->in[0]->value);

  if (ks_compute_has_attention (c))
    {
      /* aux: each query's log-sum-exp, all the backward needs */
      const gint64 shape[] = { (gint64) s.B * s.H * s.T };
      KsAttentionShape fs = fused_shape (&s);
      if (e->aux == NULL
          && (e->aux = ks_tensor_new (c, KS_DTYPE_FLOAT32, 1, shape, error)) == NULL)
        return FALSE;
      return ks_compute_attention (c, qkv, F (e->value), F (e->aux), &fs, error);
    }
  /* composed: aux holds the probabilities and the mask */
  if (e->aux == NULL)
    {
      /* the mask: 0 where a token may look, -inf after it */
      const gint64 shape[] = { (gint64) (probs + (gsize) s.T * s.T) };
      g_autofree float *mask = g_new (float, (gsize) s.T * s.T);
      for (int i = 0; i < s.T; i++)
        for (int j = 0; j < s.T; j++)
          mask[i * s.T + j] = j <= i ? 0 : -INFINITY;
      if ((e->aux = ks_tensor_new (c, KS_DTYPE_FLOAT32, 1, shape, error)) == NULL
          || !ks_compute_copy_to_device (c, F (e->aux) + probs, mask,
                                         (gsize) s.T * s.T * sizeof (float), error))
        return FALSE;
    }
  float *att = F (e->aux), *mask = att + probs;
  for (int b = 0; b < s.B; b++)
    {
      const float *q = qkv + (gsize) b * s.T * 3 * s.C, *k = q + s.C, *v = q + 2 * s.C;
      float *att_b = att + (gsize) b * s.H * s.T * s.T;
      /* scores of head h: q_h k_h^T, the heads side by side in each row of qkv */
      if (!ks_compute_sgemm_strided_batched (c, KS_TRANS_N, KS_TRANS_T, s.T, s.T, s.d, s.scale,
                                             q, 3 * s.C, s.d, k, 3 * s.C, s.d, 0, att_b, s.T,
                                             (gint64) s.T * s.T, s.H, error))
        return FALSE;
      for (int h = 0; h < s.H; h++)
        if (!ks_compute_binary (c, KS_BINARY_ADD, att_b + (gsize) h * s.T * s.T, mask,
                                att_b + (gsize) h * s.T * s.T, s.T, s.T, s.T, error))
          return FALSE;
      if (!ks_compute_softmax (c, att_b, att_b, (gsize) s.H * s.T, s.T, FALSE, error)
          || !ks_compute_sgemm_strided_batched (c, KS_TRANS_N, KS_TRANS_N, s.T, s.d, s.T, 1, att_b,
                                                s.T, (gint64) s.T * s.T, v, 3 * s.C, s.d, 0,
                                                F (e->value) + (gsize) b * s.T * s.C, s.C, s.d,
                                                s.H, error))
        return FALSE;
    }
  return TRUE;
}

/* beta: 0 to write qkv's gradient, 1 to add to it */
gboolean
ks_attention_backward (KsExpr *e, float beta, GError **error)
{
  KsCompute *c = DEV (e);
  AttentionShape s = attention_shape (e);
  const float *qkv = F (e->in[0]->value);
  float *dqkv = F (e->in[0]->grad);
  float *datt;

  if (ks_compute_has_attention (c))
    {
      KsAttentionShape fs = fused_shape (&s);
      return ks_compute_attention_backward (c, qkv, F (e->aux), F (e->grad), dqkv, beta, &fs,
                                            error);
    }
  if ((datt = ks_model_scratch (e->model, (gsize) s.H * s.T * s.T, error)) == NULL)
    return FALSE;
  for (int b = 0; b < s.B; b++)
    {
      gsize row = (gsize) b * s.T * 3 * s.C;
      const float *q = qkv + row, *k = q + s.C, *v = q + 2 * s.C;
      float *dq = dqkv + row, *dk = dq + s.C, *dv = dq + 2 * s.C;
      const float *att = F (e->aux) + (gsize) b * s.H * s.T * s.T;
      const float *dout = F (e->grad) + (gsize) b * s.T * s.C;
      gint64 tt = (gint64) s.T * s.T;
      /* datt = dout v^T; dv += att^T dout; dscores = softmax'; dq += dscores k * scale;
       * dk += dscores^T q * scale (masked entries have att = 0, so no gradient) */
      if (!ks_compute_sgemm_strided_batched (c, KS_TRANS_N, KS_TRANS_T, s.T, s.T, s.d, 1, dout,
                                             s.C, s.d, v, 3 * s.C, s.d, 0, datt, s.T, tt, s.H,
                                             error)
          || !ks_compute_sgemm_strided_batched (c, KS_TRANS_T, KS_TRANS_N, s.T, s.d, s.T, 1, att,
                                                s.T, tt, dout, s.C, s.d, beta, dv, 3 * s.C, s.d,
                                                s.H, error)
          || !ks_compute_softmax_backward (c, att, datt, datt, (gsize) s.H * s.T, s.T, FALSE,
                                           error)
          || !ks_compute_sgemm_strided_batched (c, KS_TRANS_N, KS_TRANS_N, s.T, s.d, s.T, s.scale,
                                                datt, s.T, tt, k, 3 * s.C, s.d, beta, dq,
                                                3 * s.C, s.d, s.H, error)
          || !ks_compute_sgemm_strided_batched (c, KS_TRANS_T, KS_TRANS_N, s.T, s.d, s.T, s.scale,
                                                datt, s.T, tt, q, 3 * s.C, s.d, beta, dk,
                                                3 * s.C, s.d, s.H, error))
        return FALSE;
    }
  return TRUE;
}
