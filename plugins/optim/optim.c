/* Optimizers: SGD, Momentum (Nesterov), Adagrad, Adam, AdamW over a model's parameter
 * arena, with weight decay and learning-rate schedules. A step over every parameter is
 * one fused update kernel over the whole arena. The gradients come unscaled and clipped:
 * the core does both (dist-optimizer.h), after a distributed mode's exchange, by the
 * clip_norm declared here. */
#include <config.h>

#include <ksdist/ksdist.h>

#include <math.h>
#include <string.h>

typedef struct {
  KsUpdateArgs args;  /* rule, lr (of this step), momentum, betas, eps, weight decay */
  KsLrSchedule schedule; /* [optim] lr and its schedule */
  KsArena *state1, *state2; /* made on the first step, like the parameters */
  KsCompute *compute;
} Optim;

static const int states_of[] = { 0, 1, 1, 2, 2 }; /* by KsUpdateRule */

static void *
optim_create (KsUpdateRule rule, const KsSettings *s, GError **error)
{
  Optim *o = g_new0 (Optim, 1);
  o->args.size = sizeof o->args;
  o->args.rule = rule;
  o->schedule.lr = ks_settings_get_double (s, "lr");
  o->args.momentum = (float) ks_settings_get_double (s, "momentum");
  o->args.nesterov = ks_settings_get_bool (s, "nesterov");
  o->args.beta1 = (float) ks_settings_get_double (s, "beta1");
  o->args.beta2 = (float) ks_settings_get_double (s, "beta2");
  o->args.eps = (float) ks_settings_get_double (s, "eps");
  o->args.weight_decay = (float) ks_settings_get_double (s, "weight_decay");
  ks_lr_shape_from_name (ks_settings_get_string (s, "schedule"), &o->schedule.shape);
  o->schedule.warmup = ks_settings_get_int (s, "warmup");
  o->schedule.total_steps = ks_settings_get_int (s, "total_steps");
  o->schedule.step_size = ks_settings_get_int (s, "step_size");
  o->schedule.gamma = ks_settings_get_double (s, "gamma");
  o->schedule.min_lr = ks_settings_get_double (s, "min_lr");
  /* a library caller without the trainer's plan check gets the same configuration error
   * (exit 2) as `ksdist config`; the cosine would divide by total_steps - warmup */
  if (o->schedule.shape == KS_LR_COSINE && o->schedule.total_steps <= o->schedule.warmup)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[optim] schedule = cosine needs total_steps (%" G_GINT64_FORMAT ") greater "
                   "than warmup (%" G_GINT64_FORMAT ")", o->schedule.total_steps,
                   o->schedule.warmup);
      g_free (o);
      return NULL;
    }
  return o;
}

#define RULE_CREATE(fn, rule)                                                   \
  static void *fn (const KsSettings *s, GError **error)                         \
  {                                                                             \
    return optim_create (rule, s, error);                                       \
  }
RULE_CREATE (sgd_create, KS_UPDATE_SGD)
RULE_CREATE (momentum_create, KS_UPDATE_MOMENTUM)
RULE_CREATE (adagrad_create, KS_UPDATE_ADAGRAD)
RULE_CREATE (adam_create, KS_UPDATE_ADAM)
RULE_CREATE (adamw_create, KS_UPDATE_ADAMW)

static void
optim_destroy (void *p)
{
  Optim *o = p;
  ks_arena_free (o->state1);
  ks_arena_free (o->state2);
  g_free (o);
}

static gboolean
optim_backward (void *p, KsModel *model, KsExpr *loss, KsExpr *const *params, gsize n_params,
                const char *const *no_grad, GArray *pairs, GError **error)
{
  return ks_model_backward (model, loss, params, n_params, no_grad, pairs, error);
}

/* The state arenas, of the parameters' layout, made on first use. */
static gboolean
prepare (Optim *o, KsModel *model, GError **error)
{
  KsArena *params = ks_model_parameters (model);

  if (o->compute != NULL)
    return TRUE;
  if (params == NULL)
    {
      g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED,
                   "optimizer: the model is not initialised");
      return FALSE;
    }
  o->compute = ks_model_device (model);
  return (states_of[o->args.rule] < 1 || (o->state1 = ks_arena_new_like (params, error)) != NULL)
         && (states_of[o->args.rule] < 2 || (o->state2 = ks_arena_new_like (params, error)) != NULL);
}

static gboolean
optim_state (void *p, KsModel *model, KsArena ***arenas, gsize *n, gint64 **step, GError **error)
{
  Optim *o = p;
  if (!prepare (o, model, error))
    return FALSE;
  *n = states_of[o->args.rule];
  /* state1 and state2 are adjacent members: an array of up to two arenas */
  G_STATIC_ASSERT (G_STRUCT_OFFSET (Optim, state2)
                   == G_STRUCT_OFFSET (Optim, state1) + sizeof (KsArena *));
  *arenas = &o->state1;
  *step = &o->args.step;
  return TRUE;
}

static gboolean
optim_apply (void *p, KsModel *model, const KsParamGrad *pairs, gsize n_pairs, GError **error)
{
  Optim *o = p;
  KsArena *params = ks_model_parameters (model), *grads = ks_model_gradients (model);

  if (!prepare (o, model, error))
    return FALSE;
  o->args.step++;
  o->args.lr = (float) ks_lr_schedule_at (&o->schedule, o->args.step);

  float *s1 = o->state1 ? ks_arena_data (o->state1) : NULL;
  float *s2 = o->state2 ? ks_arena_data (o->state2) : NULL;
  gboolean ok = TRUE;
  if (n_pairs == ks_arena_count (params))
    /* every parameter: one fused update over the arena (padding stays zero) */
    ok = ks_compute_update (o->compute, &o->args, ks_arena_data (params), ks_arena_data (grads),
                            s1, s2, ks_arena_numel (params), error);
  else
    for (gsize i = 0; ok && i < n_pairs; i++)
      {
        const KsTensor *pv = ks_arena_tensor (params, ks_expr_name (pairs[i].param));
        gsize off = (float *) pv->data - ks_arena_data (params);
        ok = ks_compute_update (o->compute, &o->args, pv->data, ks_arena_data (grads) + off,
                                s1 ? s1 + off : NULL, s2 ? s2 + off : NULL, pv->numel, error);
      }
  ks_model_parameters_changed (model);
  return ok;
}

static gboolean
optim_set_lr (void *p, double lr, GError **error)
{
  ((Optim *) p)->schedule.lr = lr; /* the base rate: this plugin schedules it itself */
  return TRUE;
}

static double
optim_lr (void *p)
{
  Optim *o = p;
  return ks_lr_schedule_at (&o->schedule, o->args.step + 1); /* the rate of the next step */
}

static gsize
optim_state_per_param (void *p)
{
  return states_of[((Optim *) p)->args.rule];
}

#define RULE_OPS(var, create_fn)                                                \
  static const KsOptimizerOps var = {                                           \
    .size = sizeof (KsOptimizerOps),                                            \
    .create = create_fn,                                                        \
    .destroy = optim_destroy,                                                   \
    .backward = optim_backward,                                                 \
    .apply_gradients = optim_apply,                                             \
    .set_learning_rate = optim_set_lr,                                          \
    .learning_rate = optim_lr,                                                  \
    .state_per_param = optim_state_per_param,                                   \
    .state = optim_state,                                                       \
  };
RULE_OPS (sgd_ops, sgd_create)
RULE_OPS (momentum_ops, momentum_create)
RULE_OPS (adagrad_ops, adagrad_create)
RULE_OPS (adam_ops, adam_create)
RULE_OPS (adamw_ops, adamw_create)

static const KsImplDesc optim_impls[] = {
  { KS_KIND_OPTIMIZER, "sgd", &sgd_ops, NULL, "p -= lr * (g + wd p)" },
  { KS_KIND_OPTIMIZER, "momentum", &momentum_ops, NULL, "heavy ball or Nesterov momentum" },
  { KS_KIND_OPTIMIZER, "adagrad", &adagrad_ops, NULL, "per-element rates from summed squares" },
  { KS_KIND_OPTIMIZER, "adam", &adam_ops, NULL, "Adam, weight decay as L2" },
  { KS_KIND_OPTIMIZER, "adamw", &adamw_ops, NULL, "Adam with decoupled weight decay" },
};

static const KsKeyDesc optim_settings[] = {
  { NULL, "lr", KS_VALUE_DOUBLE, "0.001", 0, 1e3, NULL, "Base learning rate" },
  { NULL, "momentum", KS_VALUE_DOUBLE, "0.9", 0, 1, NULL, "Momentum factor (momentum)" },
  { NULL, "nesterov", KS_VALUE_BOOL, "false", 1, 0, NULL, "Nesterov momentum (momentum)" },
  { NULL, "beta1", KS_VALUE_DOUBLE, "0.9", 0, 0.999999, NULL, "Adam's first-moment decay" },
  { NULL, "beta2", KS_VALUE_DOUBLE, "0.999", 0, 0.999999, NULL, "Adam's second-moment decay" },
  { NULL, "eps", KS_VALUE_DOUBLE, "1e-8", 0, 1, NULL, "Added to denominators (Adam, Adagrad)" },
  { NULL, "weight_decay", KS_VALUE_DOUBLE, "0", 0, 10, NULL,
    "Weight decay: L2 in the gradient, decoupled for adamw" },
  { NULL, "clip_norm", KS_VALUE_DOUBLE, "0", 0, 1e9, NULL,
    "Clip gradients to this global L2 norm (the core does, after any exchange); 0 = off" },
  { NULL, "schedule", KS_VALUE_CHOICE, "constant", 1, 0, "constant|step|cosine",
    "Learning-rate schedule after warmup" },
  { NULL, "warmup", KS_VALUE_INT, "0", 0, 1e12, NULL, "Steps of linear warmup from 0 to lr" },
  { NULL, "total_steps", KS_VALUE_INT, "0", 0, 1e12, NULL,
    "Steps of the run (cosine); 0 = [train] steps in ksdist train" },
  { NULL, "step_size", KS_VALUE_INT, "1000", 1, 1e12, NULL, "Steps between decays (step)" },
  { NULL, "gamma", KS_VALUE_DOUBLE, "0.1", 0, 1, NULL, "Decay factor (step)" },
  { NULL, "min_lr", KS_VALUE_DOUBLE, "0", 0, 1e3, NULL, "Final learning rate (cosine)" },
};

static const KsPluginDesc optim_plugin = {
  .abi_major = KS_ABI_MAJOR,
  .abi_minor = KS_ABI_MINOR,
  .name = "optim",
  .version = PACKAGE_VERSION,
  .description = "SGD, Momentum, Adagrad, Adam, AdamW with clipping and schedules",
  .impls = optim_impls,
  .n_impls = G_N_ELEMENTS (optim_impls),
  .settings = optim_settings,
  .n_settings = G_N_ELEMENTS (optim_settings),
};

KS_PLUGIN_DEFINE (optim_plugin)
