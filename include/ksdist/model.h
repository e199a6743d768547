/* ksdist — the Model: a static graph bound to one device (after Paddle's design seed).
 *
 * For program and task authors who build networks (a trainer task's build callback), and
 * the tasks library.
 *
 * A model holds an init net (parameter initialisers, run by ks_model_init) and a net
 * (forward and gradient ops). Expressions (KsExpr) name its variables. Layer functions
 * take expressions and return new ones; they are not methods of the model.
 * ks_model_run executes only the ops its targets need; the extracted subgraph is cached
 * per target set and the cache is dropped whenever the graph grows.
 *
 * Parameters live in one float32 arena, their gradients in a second of the same layout
 * (tensor.h), so an optimizer or a gradient allreduce sees one buffer. */
#ifndef KSDIST_MODEL_H
#define KSDIST_MODEL_H

#include <ksdist/optimizer.h>
#include <ksdist/registry.h>
#include <ksdist/tensor.h>

G_BEGIN_DECLS

typedef enum {
  KS_INIT_CONSTANT = 0, /* a */
  KS_INIT_UNIFORM = 1,  /* uniform in [a, b) */
  KS_INIT_NORMAL = 2,   /* mean a, standard deviation b */
  KS_INIT_XAVIER = 3,   /* Glorot uniform, +-a*sqrt(6/(fan_in+fan_out)); a = gain (0 means 1) */
} KsInitKind;

typedef struct {
  KsInitKind kind;
  double a, b;
  guint64 seed;
} KsInit;

/* A model with no device yet (`compute` may be NULL; set it before ks_model_init). */
KsModel *ks_model_new (KsCompute *compute);
void ks_model_free (KsModel *model);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsModel, ks_model_free)

/* Binds the model to a device; an error once the model was initialised or run. */
gboolean ks_model_set_device (KsModel *model, KsCompute *compute, GError **error);
KsCompute *ks_model_device (const KsModel *model);

/* A trainable parameter, initialised by ks_model_init; names are unique. */
KsExpr *ks_model_parameter (KsModel *model, const char *name, int ndim, const gint64 *shape,
                            KsInit init, GError **error);
/* An input fed at run time (float32 or int64). */
KsExpr *ks_model_data (KsModel *model, const char *name, int ndim, const gint64 *shape,
                       KsDType dtype, GError **error);

/* Training mode (the default) or evaluation mode: in evaluation, dropout passes its input
 * through unchanged. */
void ks_model_set_training (KsModel *model, gboolean training);
gboolean ks_model_training (const KsModel *model);
/* The counter dropout masks are drawn from, with each dropout's seed: it advances by one
 * after every run that drew masks. Checkpoints save and restore it, so a resumed run
 * draws the masks the uninterrupted one would have. */
guint64 ks_model_rng_state (const KsModel *model);
void ks_model_set_rng_state (KsModel *model, guint64 state);

/* The expression of that name (a parameter, data or any op), or NULL. */
KsExpr *ks_model_find (KsModel *model, const char *name);

/* The names of the model's parameters (running statistics too), in the order they were
 * made: a new NULL-terminated array (g_strfreev). */
char **ks_model_parameter_names (const KsModel *model);

/* Runs the init net: allocates the parameter and gradient arenas and fills the
 * parameters. Parameters cannot be added afterwards. */
gboolean ks_model_init (KsModel *model, GError **error);

typedef struct {
  const char *name; /* of a data expression */
  const void *data; /* host memory */
  gsize nbytes;     /* must match the declared shape and type */
} KsFeed;

/* Feeds the inputs, then executes the ops the targets need (all of the net when
 * n_targets is 0), in graph order. */
gboolean ks_model_run (KsModel *model, const KsFeed *feeds, gsize n_feeds,
                       KsExpr *const *targets, gsize n_targets, GError **error);

/* Ops executed since the model was made (for tests of pruning). */
guint64 ks_model_ops_executed (const KsModel *model);

/* The arenas of ks_model_init (NULL before). */
KsArena *ks_model_parameters (const KsModel *model);
KsArena *ks_model_gradients (const KsModel *model);
/* Called during a backward sweep as soon as `param`'s gradient is final in the gradient
 * arena, while the sweep goes on with the layers below: a data-parallel algorithm starts
 * averaging it there. Calls come in the same order on every process that runs the same
 * graph. One callback per model; NULL removes it. */
typedef void (*KsGradReadyFunc) (KsModel *model, KsExpr *param, gpointer data);
void ks_model_set_grad_ready (KsModel *model, KsGradReadyFunc func, gpointer data);
/* Tells the graph a parameter's values changed outside it (an optimizer step). */
void ks_model_parameters_changed (KsModel *model);

/* Appends gradient ops for `params` (NULL: every parameter) except those named in
 * `no_grad` (NULL-terminated, may be NULL); fills `pairs` with KsParamGrad. Running a
 * gradient expression runs the backward sweep of `loss`, a scalar. */
gboolean ks_model_backward (KsModel *model, KsExpr *loss, KsExpr *const *params,
                            gsize n_params, const char *const *no_grad, GArray *pairs,
                            GError **error);

/* An expression's value, computed first if it was never computed or its inputs changed
 * since. The tensor belongs to the expression. */
const KsTensor *ks_expr_value (KsExpr *expr, GError **error);
/* The value as last computed (NULL if never), not recomputed even if its inputs changed:
 * the loss of the step an optimizer just took, say, without running the forward again
 * on the updated parameters (which would also draw new dropout masks). */
const KsTensor *ks_expr_last_value (const KsExpr *expr);
const char *ks_expr_name (const KsExpr *expr);
/* Gives `expr` another name, unique in its model (an error if another has it): what an
 * exported output is called, say "logits" rather than "add_65". */
gboolean ks_expr_rename (KsExpr *expr, const char *name, GError **error);
KsModel *ks_expr_model (const KsExpr *expr);
/* "[2, 3]" */
char *ks_expr_shape_string (const KsExpr *expr);
/* Its element type, and its element count (what a feed of it holds). */
KsDType ks_expr_dtype (const KsExpr *expr);
gsize ks_expr_numel (const KsExpr *expr);

/* ---- mixed precision ---- */

/* The settings of [amp]: the matmuls' operands in `dtype` (KS_DTYPE_BFLOAT16 or
 * KS_DTYPE_FLOAT16; KS_DTYPE_FLOAT32 turns it off) with float32 sums, parameters, their
 * gradients and optimizer state staying float32 (master weights). float16 scales the
 * loss: the backward starts from `initial_scale`, a step whose gradients hold an inf or
 * NaN is skipped and the scale multiplied by `backoff_factor`; after `growth_interval`
 * steps in a row without one it is multiplied by `growth_factor`. `dynamic` FALSE keeps
 * the scale fixed (overflowing steps are still skipped). bfloat16 has float32's range
 * and is not scaled. */
typedef struct {
  KsDType dtype;
  double initial_scale, growth_factor, backoff_factor;
  gint64 growth_interval;
  gboolean dynamic;
} KsAmpSettings;

/* The loss scale now, the good steps in a row since it last changed, and the steps
 * skipped so far: what a checkpoint keeps. */
typedef struct {
  double scale;
  gint64 good_steps;
  gint64 skipped;
} KsLossScale;

/* Before the model first runs; an error when the backend lacks the mixed-precision
 * kernels (ks_compute_has_half) or a setting is out of range. */
gboolean ks_model_set_amp (KsModel *model, const KsAmpSettings *amp, GError **error);
/* The matmuls' operand type (KS_DTYPE_FLOAT32 when mixed precision is off). */
KsDType ks_model_amp_dtype (const KsModel *model);
/* FALSE when the model does not scale its loss. */
gboolean ks_model_loss_scale (const KsModel *model, KsLossScale *state);
/* Restores a saved state (a resumed run); an error for a scale that is not a positive
 * finite number or negative counts, or when the model does not scale its loss. */
gboolean ks_model_set_loss_scale (KsModel *model, const KsLossScale *state, GError **error);
/* For an optimizer's update, after any gradient averaging: when the gradient arena holds
 * only finite numbers, divides it by the loss scale and sets *apply; otherwise leaves it
 * and clears *apply (skip this step). Then moves the scale as the settings say. Without
 * loss scaling it only sets *apply. The one value read back to the host is the flag. */
gboolean ks_model_unscale_gradients (KsModel *model, gboolean *apply, GError **error);

/* ---- layer functions ---- */

/* [m, k] x [k, n] -> [m, n] */
KsExpr *ks_matmul (KsExpr *a, KsExpr *b, GError **error);
/* a + b: b of a's shape, or one row of it broadcast over a's rows */
KsExpr *ks_add (KsExpr *a, KsExpr *b, GError **error);
/* a * b elementwise, of one shape */
KsExpr *ks_mul (KsExpr *a, KsExpr *b, GError **error);
KsExpr *ks_unary (KsUnaryOp op, KsExpr *x, GError **error);
KsExpr *ks_relu (KsExpr *x, GError **error);
KsExpr *ks_tanh (KsExpr *x, GError **error);
KsExpr *ks_sigmoid (KsExpr *x, GError **error);
KsExpr *ks_gelu (KsExpr *x, GError **error);
/* A fully connected layer x [m, k] -> [m, size]: parameters <name>.w [k, size]
 * (Xavier, seeded by `seed`) and <name>.b [size] (zero); `act` < 0 for none. */
KsExpr *ks_fc (KsExpr *x, gint64 size, int act, const char *name, guint64 seed, GError **error);
/* Rows of `table` [vocab, dim] picked by int64 `ids` (any shape): ids' shape + [dim]. An
 * id outside [0, vocab) is an error at run time naming it. */
KsExpr *ks_embedding (KsExpr *ids, KsExpr *table, GError **error);
/* Layer normalisation over the last dimension, with parameters <name>.gamma (ones) and
 * <name>.beta (zeros). */
KsExpr *ks_layer_norm (KsExpr *x, const char *name, float eps, GError **error);
/* Causal multi-head self-attention. `qkv` is [batch * T, 3 * C]: each row holds a
 * token's query, key and value (C = heads * head size); the result is [batch * T, C],
 * softmax (q k^T / sqrt (head size)) v per head, a token seeing only itself and earlier
 * tokens of its sequence. */
KsExpr *ks_causal_self_attention (KsExpr *qkv, gint64 batch, gint64 heads, GError **error);
/* Softmax (or log-softmax) over the last dimension. */
KsExpr *ks_softmax (KsExpr *x, gboolean log_softmax, GError **error);
/* The same elements, row-major, in another shape of as many elements. */
KsExpr *ks_reshape (KsExpr *x, int ndim, const gint64 *shape, GError **error);
/* x with its dimensions permuted: the result's dimension i is x's dimension perm[i]
 * (perm orders 0 .. ndim - 1, each once). */
KsExpr *ks_transpose (KsExpr *x, const int *perm, GError **error);
/* Inverted dropout: in training mode each element is zeroed with probability `rate`, in
 * [0, 1), and the others scaled by 1 / (1 - rate); in evaluation mode, x unchanged. The
 * masks depend on `seed`, the model's RNG counter and the element only, so every backend
 * draws the same ones. */
KsExpr *ks_dropout (KsExpr *x, float rate, guint64 seed, GError **error);
/* The mean of every element: a scalar. */
KsExpr *ks_mean (KsExpr *x, GError **error);
/* Mean softmax cross entropy of logits [m, c] against int64 labels [m]: a scalar. */
KsExpr *ks_softmax_cross_entropy (KsExpr *logits, KsExpr *labels, GError **error);
/* Mean binary logistic loss (sigmoid, then binary cross entropy, in the stable form
 * max (z, 0) - y z + log (1 + e^-|z|)) of logits [m, 1] against int64 labels [m] of 0 or
 * 1 (another label is an error naming its row): a scalar, PyTorch's
 * binary_cross_entropy_with_logits. */
KsExpr *ks_sigmoid_cross_entropy (KsExpr *logits, KsExpr *labels, GError **error);
/* The fraction of rows whose largest logit is the label: a scalar (no gradient). */
KsExpr *ks_accuracy (KsExpr *logits, KsExpr *labels, GError **error);

/* ---- convolutional layers: images are NHWC, [batch, height, width, channels] ---- */

/* A 2-d convolution of x [n, h, w, c] by `filters` kernels of kernel x kernel, moved by
 * `stride`, with `pad` zero pixels on each side: [n, oh, ow, filters] where
 * oh = (h + 2 pad - kernel) / stride + 1. Parameters <name>.w [kernel * kernel * c,
 * filters] (rows in (ky, kx, channel) order; Glorot uniform as TensorFlow's conv2d, seeded)
 * and <name>.b [filters] (zero). */
KsExpr *ks_conv2d (KsExpr *x, gint64 filters, int kernel, int stride, int pad,
                   const char *name, guint64 seed, GError **error);
/* The maximum of each kernel x kernel window moved by `stride`, per channel (no padding):
 * [n, (h - kernel) / stride + 1, ..., c]. */
KsExpr *ks_max_pool (KsExpr *x, int kernel, int stride, GError **error);
/* The mean of each kernel x kernel window moved by `stride` over x with `pad` zero pixels
 * on each side, per channel, always divided by kernel * kernel (PyTorch's AvgPool2d with
 * count_include_pad): [n, (h + 2 pad - kernel) / stride + 1, ..., c]; pad < kernel. */
KsExpr *ks_avg_pool (KsExpr *x, int kernel, int stride, int pad, GError **error);
/* Batch normalisation per channel (the last dimension) over every other one. Training
 * mode uses the batch's mean and variance and moves the running statistics toward them
 * by `momentum` (the variance unbiased, as PyTorch); evaluation mode uses the running
 * ones. Parameters <name>.gamma (ones) and <name>.beta (zeros); the running statistics
 * <name>.running_mean (zeros) and <name>.running_var (ones) are parameters without a
 * gradient, so checkpoints keep them and optimizers leave them alone. */
KsExpr *ks_batch_norm (KsExpr *x, const char *name, float momentum, float eps,
                       GError **error);
/* [n, ...] -> [n, the product of the rest] */
KsExpr *ks_flatten (KsExpr *x, GError **error);

/* ---- optimizers (the optimizer interface, optimizer.h) driving a model ---- */

typedef struct KsOptimizer KsOptimizer;

/* Selects an optimizer implementation by name ("adam", "sgd", ...) with its plugin's
 * settings from `config`, which must outlive it. */
KsOptimizer *ks_optimizer_new (KsRegistry *registry, const KsConfig *config, const char *name,
                               GError **error);
void ks_optimizer_free (KsOptimizer *optimizer);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsOptimizer, ks_optimizer_free)

/* Once, at build time: appends the gradient ops of `loss` (as ks_model_backward). */
gboolean ks_optimizer_minimize (KsOptimizer *optimizer, KsModel *model, KsExpr *loss,
                                KsExpr *const *params, gsize n_params,
                                const char *const *no_grad, GError **error);
/* One training step: feeds, runs the loss and its gradients, applies the update. */
gboolean ks_optimizer_step (KsOptimizer *optimizer, const KsFeed *feeds, gsize n_feeds,
                            GError **error);
/* For a caller that fills the model's gradient arena itself (a pipeline stage): the
 * update of every parameter from it. */
gboolean ks_optimizer_apply (KsOptimizer *optimizer, KsModel *model, GError **error);
/* After minimize: the optimizer as new, its state (moments) zero and its step count 0
 * (Reptile trains each task with a fresh inner optimizer). */
gboolean ks_optimizer_reset (KsOptimizer *optimizer, GError **error);
/* The (parameter, gradient) pairs of minimize, as KsParamGrad. */
const GArray *ks_optimizer_pairs (const KsOptimizer *optimizer);
/* The learning rate the next step will use (schedules included); -1 if unknown. */
double ks_optimizer_learning_rate (KsOptimizer *optimizer);
const char *ks_optimizer_name (const KsOptimizer *optimizer);

G_END_DECLS

#endif
