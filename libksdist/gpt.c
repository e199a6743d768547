/* A GPT built from the model's layers (after GPT-2 / llm.c, pre-norm). */
#include "ks-private.h"

/* x, or dropout of x when the shape asks for it */
static KsExpr *
maybe_dropout (KsExpr *x, const KsGptShape *s, guint64 seed, GError **error)
{
  return x == NULL || s->dropout <= 0 ? x : ks_dropout (x, s->dropout, seed, error);
}

static KsExpr *
block (KsExpr *h, const KsGptShape *s, gint64 layer, GError **error)
{
  g_autofree char *ln1 = g_strdup_printf ("h%" G_GINT64_FORMAT ".ln1", layer);
  g_autofree char *qkv = g_strdup_printf ("h%" G_GINT64_FORMAT ".attn.qkv", layer);
  g_autofree char *proj = g_strdup_printf ("h%" G_GINT64_FORMAT ".attn.proj", layer);
  g_autofree char *ln2 = g_strdup_printf ("h%" G_GINT64_FORMAT ".ln2", layer);
  g_autofree char *fc = g_strdup_printf ("h%" G_GINT64_FORMAT ".mlp.fc", layer);
  g_autofree char *out = g_strdup_printf ("h%" G_GINT64_FORMAT ".mlp.proj", layer);
  guint64 seed = s->seed + 16 * (guint64) layer;
  KsExpr *a;

  if ((a = ks_layer_norm (h, ln1, 1e-5f, error)) == NULL
      || (a = ks_fc (a, 3 * s->width, -1, qkv, seed + 1, error)) == NULL
      || (a = ks_causal_self_attention (a, s->batch, s->heads, error)) == NULL
      || (a = maybe_dropout (ks_fc (a, s->width, -1, proj, seed + 2, error), s, seed + 5,
                             error)) == NULL
      || (h = ks_add (h, a, error)) == NULL || (a = ks_layer_norm (h, ln2, 1e-5f, error)) == NULL
      || (a = ks_fc (a, 4 * s->width, KS_UNARY_GELU, fc, seed + 3, error)) == NULL
      || (a = maybe_dropout (ks_fc (a, s->width, -1, out, seed + 4, error), s, seed + 6,
                             error)) == NULL)
    return NULL;
  return ks_add (h, a, error);
}

gboolean
ks_gpt_build (KsModel *model, const KsGptShape *s, KsExpr **logits, KsExpr **loss,
              GError **error)
{
  const gint64 ids[] = { s->batch * s->context };
  const gint64 wte[] = { s->vocab, s->width }, wpe[] = { s->context, s->width };
  KsInit small = { KS_INIT_NORMAL, 0, 0.02, s->seed };
  KsInit small_pos = { KS_INIT_NORMAL, 0, 0.01, s->seed + 7 };
  KsExpr *tokens, *positions, *targets, *h, *te, *pe;

  if (s->width % s->heads != 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "gpt: width %" G_GINT64_FORMAT " does not split into %" G_GINT64_FORMAT
                   " heads", s->width, s->heads);
      return FALSE;
    }
  if ((tokens = ks_model_data (model, "tokens", 1, ids, KS_DTYPE_INT64, error)) == NULL
      || (positions = ks_model_data (model, "positions", 1, ids, KS_DTYPE_INT64, error)) == NULL
      || (targets = ks_model_data (model, "targets", 1, ids, KS_DTYPE_INT64, error)) == NULL
      || (te = ks_model_parameter (model, "wte", 2, wte, small, error)) == NULL
      || (pe = ks_model_parameter (model, "wpe", 2, wpe, small_pos, error)) == NULL
      || (te = ks_embedding (tokens, te, error)) == NULL
      || (pe = ks_embedding (positions, pe, error)) == NULL
      || (h = maybe_dropout (ks_add (te, pe, error), s, s->seed + 8, error)) == NULL)
    return FALSE;
  for (gint64 l = 0; l < s->layers && h != NULL; l++)
    h = block (h, s, l, error);
  if (h == NULL || (h = ks_layer_norm (h, "ln_f", 1e-5f, error)) == NULL
      || (*logits = ks_fc (h, s->vocab, -1, "head", s->seed + 999, error)) == NULL
      || (*loss = ks_softmax_cross_entropy (*logits, targets, error)) == NULL)
    return FALSE;
  return TRUE;
}
