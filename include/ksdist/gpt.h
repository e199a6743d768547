/* ksdist tasks — a GPT (as nanoGPT's) built from the core's layers: the layer list that
 * [model] type = gpt trains, on one model. Part of libksdist-tasks (pkg-config
 * ksdist-tasks).
 *
 * For programs using the tasks library (libksdist-tasks); not part of the core. */
#ifndef KSDIST_GPT_H
#define KSDIST_GPT_H

#include <ksdist/pipeline.h>

G_BEGIN_DECLS

typedef struct {
  gint64 vocab, context, layers, heads, width, batch;
  guint64 seed;
  float dropout; /* rate on the embeddings and each residual branch; 0 for none */
  gboolean skip; /* a long skip: the embeddings added to the last block's output */
} KsGptShape;

/* PyTorch's name of a GPT's parameter after nanoGPT (transformer.h.0.attn.c_attn.weight,
 * lm_head.weight): the GPT tasks' KsTrainTask.torch_name (a KsTorchNameFunc). */
char *ks_gpt_torch_name (const char *base, const char *suffix);

/* A GPT on `model`, the layer list [model] type = gpt trains: data "tokens", "positions"
 * and "targets", each int64 [batch * context]; token and position embeddings, `layers`
 * pre-norm blocks (causal self-attention, then a GELU MLP of 4 * width, each added to
 * the residual), a final layer norm and a head to the vocabulary; with dropout > 0,
 * dropout on the summed embeddings and on each branch before it joins the residual.
 * Sets the logits [batch * context, vocab] and the mean next-token cross entropy. */
gboolean ks_gpt_build (KsModel *model, const KsGptShape *shape, KsExpr **logits, KsExpr **loss,
                       GError **error);

/* One pre-norm transformer block on h [batch * T, width] (T tokens a sequence): causal
 * self-attention of `heads` heads, then a GELU MLP of 4 * width, each added to the
 * residual, with dropout on each branch when `dropout` > 0. Parameters PREFIX.ln1,
 * PREFIX.attn.qkv, PREFIX.attn.proj, PREFIX.ln2, PREFIX.mlp.fc, PREFIX.mlp.proj, seeded
 * from `seed` (+1 .. +6). The GPT's blocks, and a [layer.NAME] type = transformer's. */
KsExpr *ks_transformer_block (KsExpr *h, const char *prefix, gint64 batch, gint64 heads,
                              float dropout, guint64 seed, GError **error);

G_END_DECLS

#endif
