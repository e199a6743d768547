/* ksdist — the optimizer interface.
 *
 * For authors of an optimizer plugin (KsOptimizerOps) and programs that step a model
 * themselves.
 *
 * After OpenKS's BaseDistributedOptimizer: minimize(loss) = backward(loss) followed by
 * apply_gradients(pairs), and returns the (parameter, gradient) pairs so a distributed
 * algorithm can wrap an optimizer and act between the two halves.
 *
 * The learning rate: [optim] lr, schedule, warmup, total_steps, step_size, gamma and
 * min_lr are the run's, whichever optimizer runs. The optim plugin reads them as its own
 * settings. Any other optimizer (a plugin of its own) receives them through
 * set_learning_rate: before each apply_gradients the core calls it with the rate of that
 * step, ks_lr_schedule_at (the [optim] schedule, step counted from 1: the optimizer's
 * `state` step + 1 when it has that slot, else the updates applied so far + 1). An
 * optimizer without set_learning_rate keeps its own rate, and the plan (ksdist config)
 * refuses an [optim] lr or schedule set for it. Checkpoints save the optimizer's `state`:
 * the plan refuses [train] checkpoint_dir for an optimizer without that slot. */
#ifndef KSDIST_OPTIMIZER_H
#define KSDIST_OPTIMIZER_H

#include <ksdist/plugin.h>

G_BEGIN_DECLS

/* Defined by the model module of the training work; opaque to this interface. */
typedef struct KsModel KsModel;
typedef struct KsExpr KsExpr;
struct KsArena; /* tensor.h */

typedef struct {
  KsExpr *param;
  KsExpr *grad;
} KsParamGrad;

typedef struct {
  gsize size;

  /* required */
  void *(*create) (const KsSettings *settings, GError **error);
  void (*destroy) (void *ctx);
  /* Appends gradient ops for `params` (NULL = every trainable parameter), skipping
   * `no_grad` (NULL-terminated names, may be NULL); fills `pairs` (of KsParamGrad). */
  gboolean (*backward) (void *ctx, KsModel *model, KsExpr *loss, KsExpr *const *params,
                        gsize n_params, const char *const *no_grad, GArray *pairs,
                        GError **error);
  /* The gradients come unscaled (mixed precision) and clipped by global norm: the core
   * does both (dist-optimizer.h) */
  gboolean (*apply_gradients) (void *ctx, KsModel *model, const KsParamGrad *pairs,
                               gsize n_pairs, GError **error);

  /* optional */
  /* backward + apply_gradients in one call */
  gboolean (*minimize) (void *ctx, KsModel *model, KsExpr *loss, KsExpr *const *params,
                        gsize n_params, const char *const *no_grad, GArray *pairs,
                        GError **error);
  gboolean (*set_learning_rate) (void *ctx, double lr, GError **error);
  double (*learning_rate) (void *ctx);
  /* floats of state the optimizer keeps per parameter element (Adam: 2) */
  gsize (*state_per_param) (void *ctx);
  /* The state a checkpoint saves and restores, in place: `*n` arenas of the parameters'
   * layout (made now if need be; struct KsArena, tensor.h) and the step counter. */
  gboolean (*state) (void *ctx, KsModel *model, struct KsArena ***arenas, gsize *n,
                     gint64 **step, GError **error);
} KsOptimizerOps;

/* The learning-rate schedule of [optim]: linear warmup from 0 to lr over `warmup` steps,
 * then constant, step (lr x gamma^((step - 1) / step_size)) or cosine (from lr to min_lr
 * at total_steps, which must pass warmup). */
typedef enum {
  KS_LR_CONSTANT,
  KS_LR_STEP,
  KS_LR_COSINE,
} KsLrShape;

typedef struct {
  KsLrShape shape;
  double lr, min_lr, gamma;
  gint64 warmup, total_steps, step_size;
} KsLrSchedule;

/* The learning rate of 1-based step `step`. */
double ks_lr_schedule_at (const KsLrSchedule *schedule, gint64 step);
/* "constant", "step" or "cosine" into *shape; FALSE for another word. */
gboolean ks_lr_shape_from_name (const char *name, KsLrShape *shape);

G_END_DECLS

#endif
