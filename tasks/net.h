/* A network described as a list of layers (the config's [model] net and its [layer.NAME]
 * groups, or the built-in mlp's), turned into the layer list every executor runs: one
 * model, pipeline stages, data parallel or parameter servers. Internal to libksdist-tasks. */
#ifndef KS_TASKS_NET_H
#define KS_TASKS_NET_H

#include "tasks-private.h"

#include <ksdist/gpt.h>
#include <ksdist/pipeline.h>

#pragma GCC visibility push(hidden)

G_BEGIN_DECLS

typedef enum {
  NET_LINEAR,
  NET_CONV2D,
  NET_MAX_POOL,
  NET_AVG_POOL,
  NET_BATCH_NORM,
  NET_LAYER_NORM,
  NET_DROPOUT,
  NET_FLATTEN,
  NET_ACTIVATION,
  NET_EMBEDDING,   /* token ids to vectors: the first layer of a token model */
  NET_POSITION,    /* a learned vector per position in the context, added */
  NET_TRANSFORMER, /* ks_transformer_block */
} NetLayerType;

typedef enum {
  NET_LOSS_CROSS_ENTROPY, /* int64 labels "y" [rows] (of tokens: [rows * context]);
                           * metric accuracy */
  NET_LOSS_MSE,           /* float targets "y" [rows, outputs]; metric the loss (RMSE) */
  NET_LOSS_LOGISTIC,      /* one logit a row, int64 labels "y" [rows] of 0 or 1; the
                           * metric layer gives sigmoid (logit) [rows, 1] for the AUC */
} NetLoss;

typedef struct Net Net;

typedef struct {
  const Net *net;
  char *name;       /* the parameters' prefix: "conv1" makes conv1.w, conv1.b */
  const char *kind; /* the layer list's name, what seg_method layer:<regex> matches */
  NetLayerType type;
  gint64 size;      /* linear: outputs; conv2d: filters */
  int kernel, stride, padding;
  int act;          /* KsUnaryOp, or -1 for none */
  gboolean flatten; /* linear: an input of more dimensions flattened first (the mlp's) */
  float rate;       /* dropout: rate; linear: dropout after the activation (0: none) */
  guint64 dropout_seed;
  float momentum, eps;
  guint64 seed;
  gint64 vocab, heads; /* embedding: its ids; transformer: attention heads */
  char *table;      /* embedding: its table, "NAME.table" (a tied linear's too) */
  gssize tie;       /* linear: the index of the embedding whose table it uses, or -1 */
  char **stash;     /* skip names this layer's output is set aside under (NULL-terminated) */
  char **pop;       /* "add": the skip name added to this layer's output */
  gboolean joins;   /* built in the step of the layer before it, one layer of the list (the
                     * GPT's Embedding: its embedding, position and dropout); of the layers
                     * joined into one, at most one stashes and at most one pops */
} NetLayer;

struct Net {
  gint64 rows;               /* of one build: a micro-batch on a pipeline */
  gint64 context;            /* tokens a row (data "x" int64 [rows * context]); 0: features */
  int in_ndim;               /* of one sample */
  gint64 in_shape[4];
  NetLoss loss;
  gint64 outputs;            /* classes, or regression targets per row */
  NetLayer *layer;
  gsize n;
  const char *input, *labels; /* the data's names; NULL: "x" and "y" */
  KsLayerDesc *desc, loss_desc, metric_desc;
  gsize n_desc;              /* the layer list's length: n, less the layers that join */
};

/* The mlp of [model] hidden, activation and dropout on samples of `features` values into
 * `classes`: fc_0 .. fc_k-1 and out, as the built-in mlp always named and seeded them. */
gboolean net_mlp (Net *net, const KsConfig *config, gint64 classes, GError **error);
/* The GPT of `shape` (ksdist/gpt.h) as its layer list always was: "Embedding" (the
 * embedding wte, the position wpe, dropout), a "Block" each (h0, h1, ...), "Head" (the
 * long skip's end, the norm ln_f and the linear head), each layer's seeds as before;
 * data "tokens" and "targets". An error when the width does not split into the heads. */
gboolean net_gpt (Net *net, const KsGptShape *shape, GError **error);
/* The layers of [model] net, each from its [layer.NAME] group, ending in `outputs`
 * values a row (the last layer must give that many); `vocab` is the token ids' count of
 * token data (an embedding's default), 0 for features. */
gboolean net_from_config (Net *net, const KsConfig *config, NetLoss loss, gint64 outputs,
                          gint64 vocab, GError **error);
/* The layers of [model] net on rows of `context` token ids below `vocab` (those of
 * `source`, named in errors): an embedding first, the head's outputs its vocabulary. */
gboolean net_on_tokens (Net *net, const KsConfig *config, gint64 vocab, gint64 context,
                        const char *source, GError **error);
/* The check of [model] net and the [layer.NAME] groups alone, for the plan. */
gboolean net_check_config (const KsConfig *config, GError **error);
/* Fills net->desc (net->n_desc of them), the loss and the metric for builds of `rows`
 * rows of samples shaped `shape` (the data "x" or net->input, float32 [rows, shape...];
 * with net->context, int64 token ids [rows * context] and shape is ignored). */
void net_describe (Net *net, gint64 rows, int ndim, const gint64 *shape);
void net_clear (Net *net);
/* Whether a layer makes the data "positions" (int64 [rows * context], i % context). */
gboolean net_has_positions (const Net *net);

extern const KsTrainTask ks_tokens_task;

/* A language model's held-out windows, each scored once (tokens [w * context, (w + 1) *
 * context] and their next: no window overlaps another), the first [train] eval_rows of
 * them when set: `fill` puts window `w` in row `row` of the trainer's feeds; *mean is the
 * loss over those scored, the last batch partial, and *tokens their tokens (`context` a
 * window). */
typedef void (*NetFillRow) (gpointer data, gsize row, gsize window);
gboolean net_eval_windows (KsTrainer *t, gsize windows, gsize context, NetFillRow fill,
                           gpointer data, double *mean, gsize *tokens, GError **error);

G_END_DECLS

#pragma GCC visibility pop

#endif
