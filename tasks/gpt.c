/* The GPT (after GPT-2 / llm.c, pre-norm) as a Net, the layer list every config model is:
 * its layers' names, seeds and skip as the GPT always had them, so its checkpoints and
 * its training stay what they were. And the transformer block, a [layer.NAME] type =
 * transformer's too. */
#include "net.h"

#include <string.h>

#define SKIP "embeddings" /* the long skip's name, from Embedding to Head */

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

/* Appends a layer of `kind` named `name` to net (its parameters' prefix or table); it
 * joins the layer before it when that is of its kind, but each Block is a layer alone. */
static NetLayer *
add_layer (Net *net, const char *kind, NetLayerType type, const char *name, guint64 seed)
{
  NetLayer *l = &net->layer[net->n++];
  *l = (NetLayer) { .name = g_strdup (name), .kind = kind, .type = type, .act = -1,
                    .seed = seed, .tie = -1, .eps = 1e-5f };
  l->joins = net->n > 1 && type != NET_TRANSFORMER
             && strcmp (net->layer[net->n - 2].kind, kind) == 0;
  return l;
}

gboolean
net_gpt (Net *net, const KsGptShape *s, GError **error)
{
  if (s->width % s->heads != 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "gpt: width %" G_GINT64_FORMAT " does not split into %" G_GINT64_FORMAT
                   " heads", s->width, s->heads);
      return FALSE;
    }
  *net = (Net) { .context = s->context, .loss = NET_LOSS_CROSS_ENTROPY, .outputs = s->vocab,
                 .input = "tokens", .labels = "targets" };
  net->layer = g_new0 (NetLayer, s->layers + 6); /* the blocks and at most 6 more */
  /* Embedding: the token and position embeddings summed, dropped out, set aside for the
   * long skip */
  NetLayer *l = add_layer (net, "Embedding", NET_EMBEDDING, "wte", s->seed);
  l->size = s->width;
  l->vocab = s->vocab;
  l->table = g_strdup ("wte");
  l = add_layer (net, "Embedding", NET_POSITION, "wpe", s->seed + 7);
  l->table = g_strdup ("wpe");
  if (s->dropout > 0)
    {
      l = add_layer (net, "Embedding", NET_DROPOUT, "dropout", s->seed + 8);
      l->rate = s->dropout;
    }
  if (s->skip)
    l->stash = g_strsplit (SKIP, ",", -1);
  for (gint64 i = 0; i < s->layers; i++)
    {
      g_autofree char *name = g_strdup_printf ("h%" G_GINT64_FORMAT, i);
      l = add_layer (net, "Block", NET_TRANSFORMER, name, s->seed + 16 * (guint64) i);
      l->heads = s->heads;
      l->rate = s->dropout;
    }
  /* Head: the long skip joins (an activation of none: nothing but the add), the final
   * norm, the head to the vocabulary (not tied to wte) */
  if (s->skip)
    add_layer (net, "Head", NET_ACTIVATION, "skip", 0)->pop = g_strsplit (SKIP, ",", -1);
  add_layer (net, "Head", NET_LAYER_NORM, "ln_f", 0);
  add_layer (net, "Head", NET_LINEAR, "head", s->seed + 999)->size = s->vocab;
  return TRUE;
}

gboolean
ks_gpt_build (KsModel *model, const KsGptShape *s, KsExpr **logits, KsExpr **loss,
              GError **error)
{
  Net net = { 0 };
  gboolean ok = net_gpt (&net, s, error);
  if (ok)
    {
      net_describe (&net, s->batch, 0, NULL);
      ok = ks_layers_build (model, net.desc, net.n_desc, logits, error)
           && (*loss = net.loss_desc.build (model, *logits, net.loss_desc.args, error)) != NULL;
    }
  net_clear (&net);
  return ok;
}

/* A GPT's layer names (ks_gpt_build) and nanoGPT's. */
static const char *const gpt_torch_names[][2] = {
  { "ln1", "ln_1" },           { "ln2", "ln_2" },         { "attn.qkv", "attn.c_attn" },
  { "attn.proj", "attn.c_proj" }, { "mlp.fc", "mlp.c_fc" }, { "mlp.proj", "mlp.c_proj" },
};

char *
ks_gpt_torch_name (const char *base, const char *suffix)
{
  guint64 layer;

  if (*suffix == '\0' && (strcmp (base, "wte") == 0 || strcmp (base, "wpe") == 0))
    suffix = ".weight"; /* the embeddings, nn.Embedding's weight */
  if (strcmp (base, "head") == 0)
    return g_strconcat ("lm_head", suffix, NULL);
  /* h<N>.<layer>: block N's */
  const char *dot = strchr (base, '.');
  g_autofree char *digits = dot != NULL && base[0] == 'h' ? g_strndup (base + 1, dot - base - 1)
                                                           : NULL;
  if (digits != NULL && g_ascii_string_to_unsigned (digits, 10, 0, G_MAXINT32, &layer, NULL))
    {
      const char *rest = dot + 1;
      for (guint i = 0; i < G_N_ELEMENTS (gpt_torch_names); i++)
        if (strcmp (rest, gpt_torch_names[i][0]) == 0)
          rest = gpt_torch_names[i][1];
      return g_strdup_printf ("transformer.h.%" G_GUINT64_FORMAT ".%s%s", layer, rest, suffix);
    }
  return g_strconcat ("transformer.", base, suffix, NULL);
}
