/* The model's internals, shared by the graph (model.c) and the ops (model-ops.c). */
#ifndef KS_MODEL_PRIVATE_H
#define KS_MODEL_PRIVATE_H

#include "ks-private.h"

/* the library's insides: not exported (libksdist.so exports the public API only) */
#pragma GCC visibility push(hidden)

typedef enum {
  OP_PARAMETER,     /* leaf: initialised by the init net */
  OP_DATA,          /* leaf: fed at run time */
  OP_MATMUL,
  OP_ADD,
  OP_UNARY,
  OP_MEAN,
  OP_CROSS_ENTROPY, /* mean over rows */
  OP_ACCURACY,
  OP_EMBEDDING,     /* in: table, ids */
  OP_LAYER_NORM,    /* in: x, gamma, beta; aux: mean and rstd per row */
  OP_ATTENTION,     /* in: qkv; aux: probabilities [batch, heads, T, T], then the mask */
  OP_GRAD,          /* the gradient of a parameter; runs the backward sweep of in[0] */
  OP_SOFTMAX,       /* over the last dimension; attr: TRUE for log-softmax */
  OP_RESHAPE,       /* the same elements in another shape */
  OP_TRANSPOSE,     /* dimensions permuted by perm */
  OP_DROPOUT,       /* aux: the mask of the last training-mode forward; attr: TRUE if one */
  OP_MUL,           /* elementwise product of two tensors of one shape */
  OP_CONV2D,        /* in: x, w, b (NHWC); aux: x's patches (im2col) */
  OP_MAX_POOL,      /* aux: the index in x of each output's maximum (int64) */
  OP_BATCH_NORM,    /* in: x, gamma, beta, running mean, running var; aux: the batch's mean, var */
  OP_AVG_POOL,      /* the mean of each window, padding counted as zeros */
  OP_LOGISTIC,      /* in: logits [m, 1], labels int64 [m] of 0 or 1; the mean of the binary
                     * logistic loss; aux: [0, logit] a row, its softmax - onehot, the losses */
} OpType;

struct KsExpr {
  KsModel *model;
  guint id;   /* position in the model: inputs always have smaller ids */
  char *name;
  OpType op;
  KsExpr *in[5];
  guint n_in;
  int attr;   /* KsUnaryOp of OP_UNARY; log of OP_SOFTMAX */
  float eps;  /* OP_LAYER_NORM, OP_BATCH_NORM */
  float momentum; /* OP_BATCH_NORM: the running statistics' update weight */
  KsConvShape conv; /* OP_CONV2D, OP_MAX_POOL, OP_AVG_POOL: the window (n, h, w, c of the input) */
  gboolean buffer;  /* OP_PARAMETER: state without a gradient (running statistics) */
  gint64 batch, heads; /* OP_ATTENTION */
  int perm[KS_TENSOR_MAX_DIMS]; /* OP_TRANSPOSE */
  float rate;       /* OP_DROPOUT */
  guint64 seed;     /* OP_DROPOUT */
  KsDType dtype;
  int ndim;
  gint64 shape[KS_TENSOR_MAX_DIMS];
  gsize numel;
  KsInit init;      /* OP_PARAMETER */
  KsExpr *param;    /* OP_GRAD */
  KsTensor *value;  /* for parameters and gradients a view into an arena */
  KsTensor *grad;   /* during a backward sweep: dloss/dvalue */
  KsTensor *aux;    /* per-op scratch kept between forward and backward */
  guint64 version;  /* the model clock when value last changed; 0 = never */
  gboolean needs_grad;
  gboolean grad_fresh; /* in a sweep: grad holds no contribution yet (and is not zeroed) */
};

struct KsModel {
  KsCompute *compute;
  GPtrArray *exprs;    /* KsExpr*, owned, by id */
  GHashTable *by_name; /* name -> KsExpr* */
  GHashTable *plans;   /* "id,id,..." -> GArray of guint ids to execute, in order */
  KsArena *params, *grads;
  gboolean initialised, ran;
  gboolean training;   /* dropout drops (ks_model_set_training) */
  guint64 rng_state;   /* the dropout counter: advances once per run that drew masks */
  gboolean rng_drawn;  /* a mask was drawn in the current run */
  guint64 clock;
  guint64 ops_executed;
  KsExpr *swept_loss;  /* the loss whose backward sweep is current ... */
  guint64 swept_version; /* ... for this version of its value */
  KsGradReadyFunc grad_ready; /* told when a parameter's gradient is final */
  gpointer grad_ready_data;
  guint n_layers;      /* for default layer names */
  /* mixed precision (amp.c) */
  KsDType half;        /* the matmuls' operand type; KS_DTYPE_FLOAT32 when off */
  gboolean scaling;    /* dynamic loss scaling (float16) */
  KsAmpSettings amp;
  KsLossScale loss_scale;
  float *unit;         /* device floats: [0] the loss's backward seed, [1] a found flag */
  float unit_seed;     /* what unit[0] holds (0: not written yet) */
  float *scratch;      /* device scratch of scratch_len floats */
  gsize scratch_len;
  /* skip connections (layers.c): name -> KsExpr* stashed and not yet popped, and the
   * layer being built (whose stash and pop lists say what it may do) */
  GHashTable *skips;
  const KsLayerDesc *building;
  /* profiling (layers.c): when set, one per expression, the seconds its forwards and
   * backwards took are added there */
  double *op_seconds;
};

/* model.c */
KsExpr *ks_model_add_expr (KsModel *model, OpType op, const char *name, KsDType dtype, int ndim,
                           const gint64 *shape, GError **error);
float *ks_model_scratch (KsModel *model, gsize n, GError **error);
/* Runs the backward sweep of `loss` unless it is current for the loss's value. */
gboolean ks_model_sweep (KsModel *model, KsExpr *loss, GError **error);

/* For a pipeline stage (pipeline.c): the backward sweep from `outs`, each seeded with its
 * `seeds` (host floats, the out's size; an out that feeds another also gets what flows
 * back into it), adding every parameter's gradient into the gradient arena (not zeroed)
 * and leaving the gradient of each input in its grad (zero if it reaches no out). */
gboolean ks_model_sweep_from (KsModel *model, KsExpr *const *outs, const float *const *seeds,
                              gsize n_outs, KsExpr *const *inputs, gsize n_inputs,
                              GError **error);
/* The values (and per-op scratch) of the expressions first .. first + n - 1, those with
 * kept[i] (kept NULL: all), minus parameters, held aside for one micro-batch. Swapping
 * exchanges them with the model's own; a new stash holds none, so the model's next run
 * makes fresh ones. */
typedef struct KsStash KsStash;
KsStash *ks_stash_new (guint first, guint n, const gboolean *kept);
void ks_stash_free (KsStash *stash);
void ks_model_swap_stash (KsModel *model, KsStash *stash);
/* Runs again, in graph order, the ops of first .. first + n - 1 that are not kept (the
 * activations recompute dropped). */
gboolean ks_model_recompute (KsModel *model, guint first, guint n, const gboolean *kept,
                             GError **error);
/* The number of expressions so far (the next one's id). */
guint ks_model_n_exprs (const KsModel *model);

/* layers.c: one layer's build, its errors prefixed with its index and name; an error too
 * when it did not stash or pop what its lists say */
KsExpr *ks_layer_build (KsModel *model, const KsLayerDesc *layer, gsize index,
                        KsExpr *x, GError **error);
/* Puts `value` where a layer's ks_layer_pop of `name` finds it (a pipeline stage offers
 * the data that receives a skip from another chunk). */
void ks_skip_offer (KsModel *model, const char *name, KsExpr *value);
/* Takes the value stashed under `name` and not popped on this model (NULL if none). */
KsExpr *ks_skip_take (KsModel *model, const char *name);

/* amp.c: unit[0] set to the loss scale (1 without scaling), for a backward sweep */
gboolean ks_model_seed (KsModel *model, GError **error);

/* model-ops.c */
gboolean ks_op_forward (KsExpr *expr, GError **error);
gboolean ks_op_backward (KsExpr *expr, GError **error);
/* The beta of a contribution to x's gradient: 0 for the first of a sweep (writes it), 1
 * after (adds). */
float ks_op_grad_beta (KsExpr *x);
/* Completes a kernel's write of x's gradient contribution to `target`: x's gradient
 * itself when it was fresh, else scratch added to it. */
gboolean ks_op_grad_written (KsExpr *x, const float *target, GError **error);
/* Zeroes x's gradient if nothing has written it yet in this sweep. */
gboolean ks_op_grad_zeroed (KsExpr *x, GError **error);
const char *ks_op_name (OpType op);
/* TRUE when x is float32, else an error naming `op` */
gboolean ks_op_require_float (const char *op, const KsExpr *x, GError **error);
/* model-attention.c: the attention op; backward's beta as ks_op_grad_beta's */
gboolean ks_attention_forward (KsExpr *e, GError **error);
gboolean ks_attention_backward (KsExpr *e, float beta, GError **error);
/* model-conv.c: the ops of convolutional networks */
gboolean ks_conv_op_forward (KsExpr *e, GError **error);
gboolean ks_conv_op_backward (KsExpr *e, GError **error);
/* ks_conv2d and ks_batch_norm with given parameters (state: gamma, beta, running mean,
 * running var), for graphs read back from a file */
KsExpr *ks_conv2d_with (KsExpr *x, KsExpr *w, KsExpr *b, int kernel, int stride, int pad,
                        GError **error);
KsExpr *ks_batch_norm_with (KsExpr *x, KsExpr *const *state, float momentum, float eps,
                            GError **error);
/* Adds an op of `op` on inputs in[0 .. n_in - 1] (model-ops.c) */
KsExpr *ks_op_expr_n (OpType op, KsExpr *const *in, guint n_in, int ndim, const gint64 *shape,
                      GError **error);
/* ks_layer_norm with given parameters (for graphs read back from a file) */
KsExpr *ks_layer_norm_with (KsExpr *x, KsExpr *gamma, KsExpr *beta, float eps, GError **error);
/* model.c: a tensor that views an arena's entry (freeing it leaves the arena's memory) */
KsTensor *ks_arena_view (const KsTensor *entry);

#pragma GCC visibility pop

#endif
