/* Mixed precision: the model's settings and dynamic loss scaling (Paddle's AMP, PyTorch's
 * GradScaler). The matmuls' half-precision operands are model-ops.c's; here the scale that
 * starts each backward and the check that ends it. */
#include "model-private.h"

#include <math.h>

static gboolean
amp_invalid (GError **error, const char *what)
{
  g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID, "mixed precision: %s", what);
  return FALSE;
}

gboolean
ks_model_set_amp (KsModel *model, const KsAmpSettings *amp, GError **error)
{
  if (model->ran)
    return amp_invalid (error, "set it before the model first runs");
  if (amp->dtype == KS_DTYPE_FLOAT32)
    {
      model->half = KS_DTYPE_FLOAT32;
      model->scaling = FALSE;
      return TRUE;
    }
  if (amp->dtype != KS_DTYPE_BFLOAT16 && amp->dtype != KS_DTYPE_FLOAT16)
    return amp_invalid (error, "the operands are bfloat16 or float16");
  if (model->compute == NULL || !ks_compute_has_half (model->compute))
    {
      g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_SUPPORTED,
                   "mixed precision (%s): compute plugin %s has no half-precision kernels "
                   "(convert, gemm_half, find_nonfinite); set [amp] dtype = off",
                   ks_dtype_name (amp->dtype),
                   model->compute != NULL ? ks_compute_plugin (model->compute) : "(none)");
      return FALSE;
    }
  gboolean scaling = amp->dtype == KS_DTYPE_FLOAT16;
  if (scaling
      && (!(amp->initial_scale > 0) || !isfinite (amp->initial_scale)
          || !(amp->growth_factor >= 1) || !isfinite (amp->growth_factor)
          || !(amp->backoff_factor > 0 && amp->backoff_factor <= 1)
          || amp->growth_interval < 1))
    return amp_invalid (error, "loss scaling needs a positive finite initial scale, a growth "
                               "factor of at least 1, a backoff factor in (0, 1] and a growth "
                               "interval of at least 1 step");
  model->half = amp->dtype;
  model->scaling = scaling;
  model->amp = *amp;
  model->loss_scale = (KsLossScale) { scaling ? amp->initial_scale : 1, 0, 0 };
  return TRUE;
}

KsDType
ks_model_amp_dtype (const KsModel *model)
{
  return model->half;
}

gboolean
ks_model_loss_scale (const KsModel *model, KsLossScale *state)
{
  if (model->scaling)
    *state = model->loss_scale;
  return model->scaling;
}

gboolean
ks_model_set_loss_scale (KsModel *model, const KsLossScale *state, GError **error)
{
  if (!model->scaling)
    return amp_invalid (error, "this model does not scale its loss ([amp] dtype is not fp16)");
  /* the counts are incremented each step: far from overflowing */
  if (!(state->scale > 0) || !isfinite (state->scale) || state->scale > G_MAXFLOAT
      || state->scale < ks_core_key ("amp", "initial_scale")->min || state->good_steps < 0
      || state->skipped < 0 || state->good_steps > G_MAXINT64 / 2
      || state->skipped > G_MAXINT64 / 2)
    return amp_invalid (error, "a loss scale is a positive finite float32 no smaller than "
                               "[amp] initial_scale's least (1e-30), its counts are not "
                               "negative nor near overflowing");
  model->loss_scale = *state;
  return TRUE;
}

/* unit[0]: the loss's seed, written to the device only when the scale moved */
gboolean
ks_model_seed (KsModel *model, GError **error)
{
  float seed = (float) model->loss_scale.scale;

  if (!model->scaling)
    seed = 1;
  if (model->unit == NULL
      && (model->unit = ks_compute_alloc (model->compute, 16 * sizeof (float), error)) == NULL)
    return FALSE;
  if (model->unit_seed == seed)
    return TRUE;
  if (!ks_compute_copy_to_device (model->compute, model->unit, &seed, sizeof seed, error))
    return FALSE;
  model->unit_seed = seed;
  return TRUE;
}

gboolean
ks_model_unscale_gradients (KsModel *model, gboolean *apply, GError **error)
{
  KsArena *grads = model->grads;
  KsLossScale *s = &model->loss_scale;
  float found;

  *apply = TRUE;
  if (!model->scaling || grads == NULL)
    return TRUE;
  if (!ks_model_seed (model, error) /* unit allocated */
      || !ks_compute_find_nonfinite (model->compute, ks_arena_data (grads),
                                     ks_arena_numel (grads), model->unit + 1, error)
      || !ks_compute_copy_to_host (model->compute, &found, model->unit + 1, sizeof found,
                                   error))
    return FALSE;
  if (found != 0)
    {
      *apply = FALSE;
      s->skipped++;
      s->good_steps = 0;
      if (model->amp.dynamic)
        /* the smallest scale [amp] initial_scale takes, so a saved scale loads back */
        s->scale = MAX (s->scale * model->amp.backoff_factor,
                        ks_core_key ("amp", "initial_scale")->min);
      return TRUE;
    }
  if (!ks_compute_axpby (model->compute, (float) (1 / s->scale), ks_arena_data (grads), 0,
                         ks_arena_data (grads), ks_arena_numel (grads), error))
    return FALSE;
  if (model->amp.dynamic && ++s->good_steps >= model->amp.growth_interval)
    {
      /* PyTorch's GradScaler: growth stops where float32 would overflow */
      double grown = s->scale * model->amp.growth_factor;
      if (grown <= G_MAXFLOAT)
        s->scale = grown;
      s->good_steps = 0;
    }
  return TRUE;
}
