/* A GPT built from the model's layers (after GPT-2 / llm.c, pre-norm), as a layer list:
 * the embeddings, the blocks, the final norm with the head, and the loss. */
#include "tasks-private.h"

#include <string.h>

#define SKIP "embeddings" /* the long skip's name, from Embedding to Head */

/* x, or dropout of x when the shape asks for it */
static KsExpr *
maybe_dropout (KsExpr *x, const KsGptShape *s, guint64 seed, GError **error)
{
  return x == NULL || s->dropout <= 0 ? x : ks_dropout (x, s->dropout, seed, error);
}

/* The data "tokens" and "positions", their embeddings summed. */
static KsExpr *
embeddings (KsModel *model, KsExpr *x, gconstpointer args, GError **error)
{
  const KsGptShape *s = ((const KsGptLayerArgs *) args)->shape;
  const gint64 ids[] = { s->batch * s->context };
  const gint64 wte[] = { s->vocab, s->width }, wpe[] = { s->context, s->width };
  KsInit small = { KS_INIT_NORMAL, 0, 0.02, s->seed };
  KsInit small_pos = { KS_INIT_NORMAL, 0, 0.01, s->seed + 7 };
  KsExpr *tokens, *positions, *te, *pe;

  if ((tokens = ks_model_data (model, "tokens", 1, ids, KS_DTYPE_INT64, error)) == NULL
      || (positions = ks_model_data (model, "positions", 1, ids, KS_DTYPE_INT64, error)) == NULL
      || (te = ks_model_parameter (model, "wte", 2, wte, small, error)) == NULL
      || (pe = ks_model_parameter (model, "wpe", 2, wpe, small_pos, error)) == NULL
      || (te = ks_embedding (tokens, te, error)) == NULL
      || (pe = ks_embedding (positions, pe, error)) == NULL)
    return NULL;
  KsExpr *h = maybe_dropout (ks_add (te, pe, error), s, s->seed + 8, error);
  if (h != NULL && s->skip && !ks_layer_stash (model, SKIP, h, error))
    return NULL;
  return h;
}

static KsExpr *
dropout_if (KsExpr *x, float rate, guint64 seed, GError **error)
{
  return x == NULL || rate <= 0 ? x : ks_dropout (x, rate, seed, error);
}

KsExpr *
ks_transformer_block (KsExpr *h, const char *prefix, gint64 batch, gint64 heads, float dropout,
                      guint64 seed, GError **error)
{
  g_autofree char *shape = ks_expr_shape_string (h);
  const char *comma = strrchr (shape, ',');
  gint64 width = comma != NULL ? g_ascii_strtoll (comma + 1, NULL, 10) : 0;
  g_autofree char *ln1 = g_strdup_printf ("%s.ln1", prefix);
  g_autofree char *qkv = g_strdup_printf ("%s.attn.qkv", prefix);
  g_autofree char *proj = g_strdup_printf ("%s.attn.proj", prefix);
  g_autofree char *ln2 = g_strdup_printf ("%s.ln2", prefix);
  g_autofree char *fc = g_strdup_printf ("%s.mlp.fc", prefix);
  g_autofree char *out = g_strdup_printf ("%s.mlp.proj", prefix);
  KsExpr *a;

  if (comma == NULL || strchr (shape, ',') != comma || width % heads != 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "a transformer block takes [tokens, width] with the width a multiple of "
                   "its %" G_GINT64_FORMAT " heads, not %s", heads, shape);
      return NULL;
    }
  if ((a = ks_layer_norm (h, ln1, 1e-5f, error)) == NULL
      || (a = ks_fc (a, 3 * width, -1, qkv, seed + 1, error)) == NULL
      || (a = ks_causal_self_attention (a, batch, heads, error)) == NULL
      || (a = dropout_if (ks_fc (a, width, -1, proj, seed + 2, error), dropout, seed + 5,
                          error)) == NULL
      || (h = ks_add (h, a, error)) == NULL || (a = ks_layer_norm (h, ln2, 1e-5f, error)) == NULL
      || (a = ks_fc (a, 4 * width, KS_UNARY_GELU, fc, seed + 3, error)) == NULL
      || (a = dropout_if (ks_fc (a, width, -1, out, seed + 4, error), dropout, seed + 6,
                          error)) == NULL)
    return NULL;
  return ks_add (h, a, error);
}

/* Block `index`: causal self-attention, then a GELU MLP, each added to the residual. */
static KsExpr *
block (KsModel *model, KsExpr *h, gconstpointer args, GError **error)
{
  const KsGptShape *s = ((const KsGptLayerArgs *) args)->shape;
  gint64 layer = ((const KsGptLayerArgs *) args)->index;
  g_autofree char *prefix = g_strdup_printf ("h%" G_GINT64_FORMAT, layer);
  (void) model;
  return ks_transformer_block (h, prefix, s->batch, s->heads, s->dropout,
                               s->seed + 16 * (guint64) layer, error);
}

/* The final norm and the head: the logits [batch * context, vocab]; with the long skip,
 * the embeddings are added to the last block's output first. */
static KsExpr *
head (KsModel *model, KsExpr *h, gconstpointer args, GError **error)
{
  const KsGptShape *s = ((const KsGptLayerArgs *) args)->shape;
  KsExpr *skipped;
  if (s->skip && ((skipped = ks_layer_pop (model, SKIP, error)) == NULL
                  || (h = ks_add (h, skipped, error)) == NULL))
    return NULL;
  if ((h = ks_layer_norm (h, "ln_f", 1e-5f, error)) == NULL)
    return NULL;
  return ks_fc (h, s->vocab, -1, "head", s->seed + 999, error);
}

/* The mean next-token cross entropy against the data "targets". */
static KsExpr *
next_token_loss (KsModel *model, KsExpr *logits, gconstpointer args, GError **error)
{
  const KsGptShape *s = ((const KsGptLayerArgs *) args)->shape;
  const gint64 ids[] = { s->batch * s->context };
  KsExpr *targets = ks_model_data (model, "targets", 1, ids, KS_DTYPE_INT64, error);
  return targets == NULL ? NULL : ks_softmax_cross_entropy (logits, targets, error);
}

gboolean
ks_gpt_describe (const KsGptShape *s, KsGptLayerArgs *args, KsLayerDesc *layers,
                 KsLayerDesc *loss, GError **error)
{
  gsize last = s->layers + 1;
  if (s->width % s->heads != 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "gpt: width %" G_GINT64_FORMAT " does not split into %" G_GINT64_FORMAT
                   " heads", s->width, s->heads);
      return FALSE;
    }
  for (gsize i = 0; i <= last; i++)
    args[i] = (KsGptLayerArgs) { s, (gint64) i - 1 };
  static const char *const skip[] = { SKIP, NULL };
  layers[0] = (KsLayerDesc) { "Embedding", embeddings, &args[0], .stash = s->skip ? skip : NULL };
  for (gsize i = 1; i < last; i++)
    layers[i] = (KsLayerDesc) { "Block", block, &args[i] };
  layers[last] = (KsLayerDesc) { "Head", head, &args[last], .pop = s->skip ? skip : NULL };
  *loss = (KsLayerDesc) { "CrossEntropy", next_token_loss, &args[last] };
  return TRUE;
}

gboolean
ks_gpt_build (KsModel *model, const KsGptShape *s, KsExpr **logits, KsExpr **loss,
              GError **error)
{
  g_autofree KsGptLayerArgs *args = g_new (KsGptLayerArgs, s->layers + 2);
  g_autofree KsLayerDesc *layers = g_new (KsLayerDesc, s->layers + 2);
  KsLayerDesc loss_desc;

  return ks_gpt_describe (s, args, layers, &loss_desc, error)
         && ks_layers_build (model, layers, s->layers + 2, logits, error)
         && (*loss = loss_desc.build (model, *logits, loss_desc.args, error)) != NULL;
}
