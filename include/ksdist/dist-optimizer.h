/* ksdist — the distributed-optimizer base.
 *
 * For authors of a training mode, who wrap the optimizer with their gradient exchange.
 *
 * Every training mode wraps the optimizer the same way. Once a step's gradients are
 * ready, the mode exchanges them (averages them over the workers, or pushes them to the
 * servers and takes their values back); then the base unscales them (mixed precision),
 * clips them by their global norm and lets the inner optimizer apply them. A mode
 * supplies only its exchange (KsDistModeOps); the order, the unscaling and the clipping
 * are the base's, the same in every mode and for an optimizer used alone. */
#ifndef KSDIST_DIST_OPTIMIZER_H
#define KSDIST_DIST_OPTIMIZER_H

#include <ksdist/compute.h>
#include <ksdist/model.h>
#include <ksdist/optimizer.h>

G_BEGIN_DECLS

/* What a mode does around the base; every slot is optional. */
typedef struct {
  gsize size;

  /* With the wrapper: the mode's state goes */
  void (*destroy) (void *mode);
  /* Before the inner backward takes views of the gradients (e.g. moves them to memory
   * the workers share) */
  gboolean (*prepare) (void *mode, KsModel *model, GError **error);
  /* After it, with the pairs it made: checks them, sets the exchange up */
  gboolean (*bind) (void *mode, KsModel *model, GArray *pairs, GError **error);
  /* Each step, the gradients ready: the exchange. It may narrow the pairs the update
   * takes (*pairs, *n_pairs: memory the mode keeps until the next exchange), or set
   * *update to FALSE when the parameters are updated elsewhere (on servers). */
  gboolean (*exchange) (void *mode, KsModel *model, const KsParamGrad **pairs,
                        gsize *n_pairs, gboolean *update, GError **error);
  /* Each step, after the update (also when loss scaling skipped it) */
  gboolean (*after_update) (void *mode, KsModel *model, GError **error);
} KsDistModeOps;

/* For an algorithm's distributed_optimizer slot: the base around `inner` (which
 * outlives it) with the mode's slots; *out_ops and *out are what the slot returns.
 * The base clips by the inner optimizer's clip_norm setting. */
void ks_dist_optimizer_new (const KsDistModeOps *mode_ops, void *mode,
                            const KsOptimizerOps *inner_ops, void *inner,
                            const KsOptimizerOps **out_ops, void **out);

/* The same without an algorithm plugin: `inner` (taken over, not yet minimized) in the
 * base with the mode's slots (a C program's own exchange, or a test's). */
KsOptimizer *ks_optimizer_wrap (KsOptimizer *inner, const KsDistModeOps *mode_ops, void *mode);

/* The one clipping by global L2 norm: when sqrt(squares) is over max_norm, scales the
 * `n` gradients (device memory) by max_norm / sqrt(squares). `squares` is the sum of
 * the squares of the whole model's gradients, however the caller holds them. */
gboolean ks_clip_by_global_norm (KsCompute *compute, float *grads, gsize n, double squares,
                                 double max_norm, GError **error);

G_END_DECLS

#endif
