/* [strategy] (strategy.h). Paddle fleet's rule: a_sync = false, k_steps = 0 is sync;
 * a_sync = true, k_steps = 0 async; a_sync = true, k_steps > 0 GEO; a_sync = false with
 * k_steps > 0 an error. `mode` names the mode directly (and half_async, which Paddle's
 * 2.x form cannot); when both forms are given they must agree. */
#include "strategy.h"

#include <string.h>

static const char *const names[] = { "sync", "half_async", "async", "geo" };

const char *
ps_mode_name (PsMode mode)
{
  return names[mode];
}

gboolean
ps_strategy_read (const KsConfig *c, PsStrategy *out, GError **error)
{
  const char *mode = ks_config_get_string (c, "strategy", "mode");
  gboolean a_sync = ks_config_get_bool (c, "strategy", "a_sync");
  gint64 k = ks_config_get_int (c, "strategy", "k_steps");
  PsMode from_paddle = !a_sync ? PS_MODE_SYNC : k > 0 ? PS_MODE_GEO : PS_MODE_ASYNC;

  out->send_queue_size = ks_config_get_int (c, "strategy", "send_queue_size");
  out->max_merge_var_num = ks_config_get_int (c, "strategy", "max_merge_var_num");
  out->max_update_norm = ks_config_get_double (c, "strategy", "max_update_norm");
  out->staleness_lr = ks_config_get_bool (c, "strategy", "staleness_lr");
  if (!a_sync && k > 0 && (strcmp (mode, "auto") == 0 || ks_config_is_set (c, "strategy", "a_sync")))
    return ks_fail (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                    "[strategy] a_sync = false with k_steps = %" G_GINT64_FORMAT ": "
                    "k_steps > 0 means GEO, which is asynchronous; set a_sync = true (GEO) or "
                    "k_steps = 0 (sync)", k);
  if (strcmp (mode, "auto") == 0)
    out->mode = from_paddle;
  else
    {
      guint i = 0;
      while (i < G_N_ELEMENTS (names) && strcmp (names[i], mode) != 0)
        i++;
      if (i == G_N_ELEMENTS (names))
        return ks_fail (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                        "[strategy] mode = %s: not a parameter-server mode (sync, "
                        "half_async, async, geo)", mode);
      out->mode = i;
      if (ks_config_is_set (c, "strategy", "a_sync") && (a_sync != (out->mode == PS_MODE_ASYNC || out->mode == PS_MODE_GEO)))
        return ks_fail (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                        "[strategy] mode = %s but a_sync = %s: they disagree; set one "
                        "of them", mode, a_sync ? "true" : "false");
      if (out->mode != PS_MODE_GEO && k > 0)
        return ks_fail (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                        "[strategy] k_steps = %" G_GINT64_FORMAT " is for mode = geo, "
                        "not mode = %s; remove it", k, mode);
    }
  /* keys one mode reads: given with another, they would do nothing */
  static const struct {
    const char *key;
    PsMode mode;
    const char *why;
  } only[] = {
    { "staleness_lr", PS_MODE_ASYNC, "only async servers apply pushes computed on old values" },
    { "send_queue_size", PS_MODE_ASYNC, "only async workers queue their gradients" },
    { "max_merge_var_num", PS_MODE_ASYNC, "only async workers merge queued gradients" },
    { "max_update_norm", PS_MODE_GEO, "only GEO workers push parameter deltas" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (only); i++)
    if (out->mode != only[i].mode && ks_config_is_set (c, "strategy", only[i].key))
      return ks_fail (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                      "[strategy] %s is for mode = %s, not mode = %s (%s); remove it",
                      only[i].key, ps_mode_name (only[i].mode), ps_mode_name (out->mode),
                      only[i].why);
  /* Paddle 1.x's geo_sgd_need_push_nums default */
  out->k_steps = out->mode == PS_MODE_GEO ? (k > 0 ? k : 100) : 0;
  return TRUE;
}
