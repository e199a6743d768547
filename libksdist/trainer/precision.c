/* [amp]: mixed precision on the model a task built. */
#include "trainer-private.h"

#include <string.h>

static const struct {
  const char *name;
  KsDType dtype;
} amp_types[] = { { "bf16", KS_DTYPE_BFLOAT16 }, { "fp16", KS_DTYPE_FLOAT16 } };

gboolean
ks_trainer_amp (KsTrainer *t, GError **error)
{
  const KsConfig *c = t->config;
  const char *dtype = ks_config_get_string (c, "amp", "dtype");
  KsAmpSettings amp = { KS_DTYPE_FLOAT32, ks_config_get_double (c, "amp", "initial_scale"),
                        ks_config_get_double (c, "amp", "growth_factor"),
                        ks_config_get_double (c, "amp", "backoff_factor"),
                        ks_config_get_int (c, "amp", "growth_interval"),
                        ks_config_get_bool (c, "amp", "dynamic") };

  for (gsize i = 0; i < G_N_ELEMENTS (amp_types); i++)
    if (strcmp (dtype, amp_types[i].name) == 0)
      amp.dtype = amp_types[i].dtype;
  if (amp.dtype == KS_DTYPE_FLOAT32)
    return TRUE;
  /* what cannot take it (fp16 on a pipeline, servers) the plan refused */
  return ks_model_set_amp (t->model, &amp, error);
}

char *
ks_trainer_amp_describe (KsTrainer *t)
{
  KsLossScale ls;
  KsDType dtype = ks_model_amp_dtype (t->model);

  if (dtype == KS_DTYPE_FLOAT32)
    return g_strdup ("");
  if (ks_model_loss_scale (t->model, &ls))
    return g_strdup_printf (", matmuls in %s (loss scale %g)", ks_dtype_name (dtype), ls.scale);
  return g_strdup_printf (", matmuls in %s", ks_dtype_name (dtype));
}

char *
ks_trainer_amp_fields (KsTrainer *t)
{
  KsLossScale ls;

  if (!ks_model_loss_scale (t->model, &ls))
    return g_strdup ("");
  return g_strdup_printf (", \"loss_scale\": %g, \"skipped_steps\": %" G_GINT64_FORMAT,
                          ls.scale, ls.skipped);
}
