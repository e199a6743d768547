/* The optimizer as the core calls it: minimize once, then a step per batch. */
#include "model/model-private.h"

#include <string.h>

#define OPS(o) KS_INSTANCE_OPS (&(o)->instance, KsOptimizerOps)
#define CTX(o) ((o)->instance.ctx)

/* The run's [optim] schedule (when the optim plugin, which declares it, is loaded) for an
 * optimizer of another plugin: it reaches it through set_learning_rate (optimizer.h). */
static void
feed_schedule (KsOptimizer *o, const KsConfig *config)
{
  const char *shape;
  if (strcmp (ks_settings_plugin (o->instance.settings), "optim") == 0
      || !KS_OPS_HAS (OPS (o), KsOptimizerOps, set_learning_rate)
      || !ks_config_lookup (config, "optim", "schedule", &shape, NULL, NULL)
      || !ks_lr_shape_from_name (shape, &o->schedule.shape))
    return;
  o->fed = TRUE;
  o->schedule.lr = ks_config_get_double (config, "optim", "lr");
  o->schedule.min_lr = ks_config_get_double (config, "optim", "min_lr");
  o->schedule.gamma = ks_config_get_double (config, "optim", "gamma");
  o->schedule.warmup = ks_config_get_int (config, "optim", "warmup");
  o->schedule.total_steps = ks_config_get_int (config, "optim", "total_steps");
  o->schedule.step_size = ks_config_get_int (config, "optim", "step_size");
}

/* The 1-based step the next update makes: the optimizer's own count when it keeps one
 * (a resumed run's), else the core's. */
static gint64
next_step (KsOptimizer *o)
{
  KsArena **arenas;
  gsize n;
  gint64 *step;
  if (KS_OPS_HAS (OPS (o), KsOptimizerOps, state) && o->model != NULL
      && OPS (o)->state (CTX (o), o->model, &arenas, &n, &step, NULL))
    return *step + 1;
  return o->applied + 1;
}

KsOptimizer *
ks_optimizer_new (KsRegistry *registry, const KsConfig *config, const char *name, GError **error)
{
  KsOptimizer *o = (KsOptimizer *) ks_instance_new (registry, config, KS_KIND_OPTIMIZER, name,
                                                    sizeof (KsOptimizer), error);
  const char *clip_norm = NULL;

  /* the core clips (dist-optimizer.c), by the setting of the plugin that declares one */
  if (o != NULL
      && ks_config_lookup (config, ks_settings_plugin (o->instance.settings), "clip_norm",
                           &clip_norm, NULL, NULL)
      && clip_norm != NULL)
    o->clip.max_norm = g_ascii_strtod (clip_norm, NULL);
  if (o != NULL)
    feed_schedule (o, config);
  return o;
}

KsOptimizer *
ks_optimizer_new_wrapper (KsOptimizer *inner, const KsOptimizerOps *ops, void *ctx,
                          const KsPluginRecord *plugin)
{
  KsOptimizer *o = g_new0 (KsOptimizer, 1);
  o->inner = inner;
  /* the inner optimizer's name: checkpoints hold its state, whatever wraps it */
  o->wrapper = (KsImplDesc) { KS_KIND_OPTIMIZER, inner->instance.impl->name, ops, NULL,
                              "a distributed optimizer" };
  o->instance.impl = &o->wrapper;
  o->instance.plugin = plugin;
  o->instance.ctx = ctx;
  ks_dist_optimizer_adopt (o);
  return o;
}

void
ks_optimizer_free (KsOptimizer *optimizer)
{
  if (optimizer == NULL)
    return;
  if (optimizer->pairs != NULL)
    g_array_unref (optimizer->pairs);
  if (optimizer->inner != NULL)
    {
      /* a wrapper: its ctx is the algorithm's, the settings the inner one's */
      OPS (optimizer)->destroy (CTX (optimizer));
      ks_optimizer_free (optimizer->inner);
      g_free (optimizer);
      return;
    }
  ks_clip_clear (&optimizer->clip);
  ks_instance_free ((KsInstance *) optimizer);
}

const char *
ks_optimizer_name (const KsOptimizer *optimizer)
{
  return optimizer->instance.impl->name;
}

gboolean
ks_optimizer_minimize (KsOptimizer *o, KsModel *model, KsExpr *loss, KsExpr *const *params,
                       gsize n_params, const char *const *no_grad, GError **error)
{
  g_return_val_if_fail (o->pairs == NULL, FALSE); /* once per optimizer */
  o->pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  o->model = model;
  o->loss = loss;
  return OPS (o)->backward (CTX (o), model, loss, params, n_params, no_grad, o->pairs, error);
}

/* A wrapper's ops are the base's (dist-optimizer.c), which order the update; an
 * optimizer used alone goes through the same base with no mode. */
static gboolean
update (KsOptimizer *o, KsModel *model, GError **error)
{
  const KsParamGrad *pairs = (const KsParamGrad *) o->pairs->data;
  KsOptimizer *base = o;
  while (base->inner != NULL)
    base = base->inner;
  if (base->fed)
    {
      if (base->model == NULL)
        base->model = model;
      if (!OPS (base)->set_learning_rate (CTX (base),
                                          ks_lr_schedule_at (&base->schedule, next_step (base)),
                                          error))
        return FALSE;
      base->applied++;
    }
  if (o->inner != NULL)
    return OPS (o)->apply_gradients (CTX (o), model, pairs, o->pairs->len, error);
  return ks_dist_update_alone (OPS (o), CTX (o), &o->clip, model, pairs, o->pairs->len, error);
}

gboolean
ks_optimizer_step (KsOptimizer *o, const KsFeed *feeds, gsize n_feeds, GError **error)
{
  g_autoptr (GPtrArray) targets = g_ptr_array_new ();

  if (o->pairs == NULL)
    {
      g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED,
                   "optimizer %s: call ks_optimizer_minimize before stepping",
                   ks_optimizer_name (o));
      return FALSE;
    }
  g_ptr_array_add (targets, o->loss);
  for (guint i = 0; i < o->pairs->len; i++)
    g_ptr_array_add (targets, g_array_index (o->pairs, KsParamGrad, i).grad);
  return ks_model_run (o->model, feeds, n_feeds, (KsExpr *const *) targets->pdata, targets->len,
                       error)
         && update (o, o->model, error);
}

void
ks_optimizer_bind (KsOptimizer *o, KsModel *model)
{
  if (o->pairs != NULL)
    return;
  /* every trained parameter, as apply_gradients takes them (running statistics have no
   * gradient: weight decay must not shrink them) */
  KsArena *params = ks_model_parameters (model);
  o->pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  o->model = model;
  for (gsize i = 0; params != NULL && i < ks_arena_count (params); i++)
    {
      const char *name;
      ks_arena_tensor_at (params, i, &name, NULL);
      KsParamGrad pair = { ks_model_find (model, name), NULL };
      if (!pair.param->buffer)
        g_array_append_val (o->pairs, pair);
    }
}

gboolean
ks_optimizer_apply (KsOptimizer *o, KsModel *model, GError **error)
{
  ks_optimizer_bind (o, model);
  return update (o, model, error);
}

const GArray *
ks_optimizer_pairs (const KsOptimizer *o)
{
  return o->pairs;
}

/* A distributed wrapper (ks_algorithm_distributed_optimizer) that leaves out a slot lends
 * the inner optimizer's: the optimizer that answers for `field`. */
#define SLOT_OWNER(o, field)                                                            \
  G_STMT_START                                                                          \
  {                                                                                     \
    while ((o)->inner != NULL && !KS_OPS_HAS (OPS (o), KsOptimizerOps, field))          \
      (o) = (o)->inner;                                                                 \
  }                                                                                     \
  G_STMT_END

double
ks_optimizer_learning_rate (KsOptimizer *o)
{
  SLOT_OWNER (o, learning_rate);
  KsOptimizer *base = o;
  while (base->inner != NULL)
    base = base->inner;
  if (!KS_OPS_HAS (OPS (o), KsOptimizerOps, learning_rate))
    return base->fed ? ks_lr_schedule_at (&base->schedule, next_step (base)) : -1;
  return OPS (o)->learning_rate (CTX (o));
}

gboolean
ks_optimizer_check_plan (KsOptimizer *o, const KsConfig *config, GError **error)
{
  /* not total_steps: the plan sets it from [train] steps */
  static const char *const rate[] = { "lr", "schedule", "warmup", "step_size", "gamma",
                                      "min_lr" };
  const char *plugin = ks_settings_plugin (o->instance.settings);
  const char *dir = ks_config_get_string (config, "train", "checkpoint_dir");

  if (*dir != '\0' && !KS_OPS_HAS (OPS (o), KsOptimizerOps, state))
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[train] checkpoint_dir = %s, but optimizer %s (plugin %s) has no `state` "
                   "slot to save and restore: its checkpoints could not be written; leave "
                   "checkpoint_dir empty or choose another [train] optimizer", dir,
                   ks_optimizer_name (o), plugin);
      return FALSE;
    }
  if (o->fed || strcmp (plugin, "optim") == 0)
    return TRUE;
  for (guint i = 0; i < G_N_ELEMENTS (rate); i++)
    if (ks_config_is_set (config, "optim", rate[i]))
      {
        g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                     "[optim] %s is set, but optimizer %s (plugin %s) has no "
                     "set_learning_rate slot to receive the rate: it keeps its own (see its "
                     "[%s] settings); remove [optim] %s", rate[i], ks_optimizer_name (o),
                     plugin, plugin, rate[i]);
        return FALSE;
      }
  return TRUE;
}

gboolean
ks_optimizer_state (KsOptimizer *o, KsArena ***arenas, gsize *n, gint64 **step, GError **error)
{
  KsModel *model = o->model; /* minimize ran on the outermost */
  SLOT_OWNER (o, state);
  KS_REQUIRE_SLOT (&o->instance, KsOptimizerOps, state, error);
  if (model == NULL)
    {
      g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED,
                   "optimizer %s: call ks_optimizer_minimize before saving or loading its state",
                   ks_optimizer_name (o));
      return FALSE;
    }
  return OPS (o)->state (CTX (o), model, arenas, n, step, error);
}

gboolean
ks_optimizer_reset (KsOptimizer *o, GError **error)
{
  KsArena **arenas;
  gsize n;
  gint64 *step;
  if (o->model != NULL)
    ks_optimizer_bind (o, o->model);
  if (!ks_optimizer_state (o, &arenas, &n, &step, error))
    return FALSE;
  for (gsize i = 0; i < n; i++)
    if (!ks_compute_fill_zero (o->model->compute, ks_arena_data (arenas[i]),
                               ks_arena_numel (arenas[i]) * sizeof (float), error))
      return FALSE;
  *step = 0;
  return TRUE;
}
