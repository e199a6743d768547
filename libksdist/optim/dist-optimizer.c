/* The distributed-optimizer base (dist-optimizer.h): one order for every mode's update,
 * and the one clipping by global norm. */
#include "ks-private.h"

#include <math.h>

typedef struct {
  const KsDistModeOps *mode_ops;
  void *mode;
  const KsOptimizerOps *inner_ops;
  void *inner;
  KsClip clip;
} DistOptimizer;

#define HAS(ops, slot) ((ops) != NULL && KS_OPS_HAS (ops, KsDistModeOps, slot))

gboolean
ks_clip_by_global_norm (KsCompute *compute, float *grads, gsize n, double squares,
                        double max_norm, GError **error)
{
  double norm = sqrt (squares);
  if (norm <= max_norm)
    return TRUE;
  return ks_compute_axpby (compute, (float) (max_norm / norm), grads, 0, grads, n, error);
}

void
ks_clip_clear (KsClip *clip)
{
  if (clip->scratch != NULL)
    ks_compute_free_memory (clip->compute, clip->scratch);
  clip->scratch = NULL;
}

/* The model's whole gradient arena clipped by its norm, when clip_norm is set. */
static gboolean
clip_model (KsClip *clip, KsModel *model, GError **error)
{
  KsArena *grads = ks_model_gradients (model);
  float *g, squares;
  gsize n;

  if (clip->max_norm <= 0 || grads == NULL)
    return TRUE;
  g = ks_arena_data (grads);
  n = ks_arena_numel (grads);
  if (clip->scratch == NULL)
    {
      clip->compute = ks_model_device (model);
      if ((clip->scratch = ks_compute_alloc (clip->compute, sizeof (float), error)) == NULL)
        return FALSE;
    }
  /* the sum of squares as one BLAS call on the device: [1 x n] . [n x 1] (padding is 0) */
  return ks_compute_sgemm (clip->compute, KS_TRANS_N, KS_TRANS_N, 1, 1, n, 1, g, n, g, 1, 0,
                           clip->scratch, 1, error)
         && ks_compute_copy_to_host (clip->compute, &squares, clip->scratch, sizeof squares,
                                     error)
         && ks_clip_by_global_norm (clip->compute, g, n, squares, clip->max_norm, error);
}

/* The one order: gradients ready -> the mode's exchange -> unscale -> clip -> apply. */
static gboolean
update (const KsDistModeOps *mode_ops, void *mode, const KsOptimizerOps *inner_ops, void *inner,
        KsClip *clip, KsModel *model, const KsParamGrad *pairs, gsize n_pairs, GError **error)
{
  gboolean here = TRUE, finite = TRUE;

  if (HAS (mode_ops, exchange)
      && !mode_ops->exchange (mode, model, &pairs, &n_pairs, &here, error))
    return FALSE;
  /* a step with an overflow under float16's loss scaling is skipped, not applied */
  if (here
      && (!ks_model_unscale_gradients (model, &finite, error)
          || (finite
              && (!clip_model (clip, model, error)
                  || !inner_ops->apply_gradients (inner, model, pairs, n_pairs, error)))))
    return FALSE;
  return !HAS (mode_ops, after_update) || mode_ops->after_update (mode, model, error);
}

gboolean
ks_dist_update_alone (const KsOptimizerOps *ops, void *ctx, KsClip *clip, KsModel *model,
                      const KsParamGrad *pairs, gsize n_pairs, GError **error)
{
  return update (NULL, NULL, ops, ctx, clip, model, pairs, n_pairs, error);
}

/* ---- the base as an optimizer's ops ---- */

static void
base_destroy (void *p)
{
  DistOptimizer *d = p;
  if (HAS (d->mode_ops, destroy))
    d->mode_ops->destroy (d->mode);
  ks_clip_clear (&d->clip);
  g_free (d);
}

static gboolean
base_backward (void *p, KsModel *model, KsExpr *loss, KsExpr *const *params, gsize n_params,
               const char *const *no_grad, GArray *pairs, GError **error)
{
  DistOptimizer *d = p;
  return (!HAS (d->mode_ops, prepare) || d->mode_ops->prepare (d->mode, model, error))
         && d->inner_ops->backward (d->inner, model, loss, params, n_params, no_grad, pairs,
                                    error)
         && (!HAS (d->mode_ops, bind) || d->mode_ops->bind (d->mode, model, pairs, error));
}

static gboolean
base_apply (void *p, KsModel *model, const KsParamGrad *pairs, gsize n_pairs, GError **error)
{
  DistOptimizer *d = p;
  return update (d->mode_ops, d->mode, d->inner_ops, d->inner, &d->clip, model, pairs, n_pairs,
                 error);
}

static const KsOptimizerOps base_ops = {
  .size = sizeof (KsOptimizerOps),
  .destroy = base_destroy,
  .backward = base_backward,
  .apply_gradients = base_apply,
  /* the rest is the inner optimizer's (ks_optimizer_learning_rate, ks_optimizer_state) */
};

void
ks_dist_optimizer_new (const KsDistModeOps *mode_ops, void *mode,
                       const KsOptimizerOps *inner_ops, void *inner,
                       const KsOptimizerOps **out_ops, void **out)
{
  DistOptimizer *d = g_new0 (DistOptimizer, 1);
  d->mode_ops = mode_ops;
  d->mode = mode;
  d->inner_ops = inner_ops;
  d->inner = inner;
  *out_ops = &base_ops;
  *out = d;
}

void
ks_dist_optimizer_adopt (KsOptimizer *wrapper)
{
  if (wrapper->instance.impl->ops == (const void *) &base_ops)
    ((DistOptimizer *) wrapper->instance.ctx)->clip.max_norm = wrapper->inner->clip.max_norm;
}

KsOptimizer *
ks_optimizer_wrap (KsOptimizer *inner, const KsDistModeOps *mode_ops, void *mode)
{
  const KsOptimizerOps *ops;
  void *ctx;

  g_return_val_if_fail (inner->pairs == NULL, NULL); /* wrap before minimize */
  ks_dist_optimizer_new (mode_ops, mode, KS_INSTANCE_OPS (&inner->instance, KsOptimizerOps),
                         inner->instance.ctx, &ops, &ctx);
  return ks_optimizer_new_wrapper (inner, ops, ctx, inner->instance.plugin);
}
