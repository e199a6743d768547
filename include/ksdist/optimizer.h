/* ksdist — the optimizer interface.
 *
 * After OpenKS's BaseDistributedOptimizer: minimize(loss) = backward(loss) followed by
 * apply_gradients(pairs), and returns the (parameter, gradient) pairs so a distributed
 * algorithm can wrap an optimizer and act between the two halves. */
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

G_END_DECLS

#endif
