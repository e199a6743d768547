/* The learning-rate schedules of [optim], one copy for the optim plugin and for the core,
 * which gives every other optimizer its rate step by step (ksdist/optimizer.h). */
#include "ks-private.h"

#include <math.h>
#include <string.h>

gboolean
ks_lr_shape_from_name (const char *name, KsLrShape *shape)
{
  static const char *const names[] = { "constant", "step", "cosine" };
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    if (strcmp (name, names[i]) == 0)
      return *shape = (KsLrShape) i, TRUE;
  return FALSE;
}

double
ks_lr_schedule_at (const KsLrSchedule *s, gint64 step)
{
  if (step <= s->warmup)
    return s->lr * step / s->warmup; /* reaches lr at the last warmup step */
  switch (s->shape)
    {
    case KS_LR_STEP:
      return s->lr * pow (s->gamma, (double) ((step - 1) / MAX (s->step_size, 1)));
    case KS_LR_COSINE:
      {
        if (s->total_steps <= s->warmup)
          return s->min_lr;
        double t = MIN (1.0, (double) (step - s->warmup) / (s->total_steps - s->warmup));
        return s->min_lr + (s->lr - s->min_lr) * 0.5 * (1 + cos (G_PI * t));
      }
    case KS_LR_CONSTANT:
      break;
    }
  return s->lr;
}
