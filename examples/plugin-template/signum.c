/* signum: an optimizer plugin for ksdist, the template of an out-of-tree plugin.
 *
 * Signum (Bernstein et al., 2018, "signSGD"): a momentum of the gradients, m = beta m +
 * (1 - beta) g, and a step of the learning rate against each element's sign,
 * p -= lr sign(m). Train with it: `[train] optimizer = signum`; its own setting is
 * `[signum] beta`. The learning rate and its schedule are the run's ([optim] lr, warmup,
 * schedule): the core hands this plugin each step's rate through set_learning_rate.
 * Checkpoints save and restore the momentum and the step through the `state` slot.
 *
 * The update runs on the host: the arrays are copied out of the compute backend and
 * back, so it works on every backend (host or device memory), simply rather than fast;
 * a fast optimizer calls the backend's kernels (ks_compute_*, compute.h). */
#include <ksdist/ksdist.h>

typedef struct {
  double beta, lr;
  KsArena *momentum; /* the parameters' layout; made on the first step or restore */
  gint64 step;       /* updates applied: a checkpoint keeps it */
} Signum;

static void *
signum_create (const KsSettings *settings, GError **error)
{
  Signum *s = g_new0 (Signum, 1);
  s->beta = ks_settings_get_double (settings, "beta"); /* range-checked by the core */
  s->lr = 0.01; /* replaced by set_learning_rate before the first step */
  return s;
}

static void
signum_destroy (void *ctx)
{
  Signum *s = ctx;
  ks_arena_free (s->momentum);
  g_free (s);
}

/* The gradients of the loss: the model's own backward, as every optimizer does. */
static gboolean
signum_backward (void *ctx, KsModel *model, KsExpr *loss, KsExpr *const *params,
                 gsize n_params, const char *const *no_grad, GArray *pairs, GError **error)
{
  return ks_model_backward (model, loss, params, n_params, no_grad, pairs, error);
}

static gboolean
make_momentum (Signum *s, KsModel *model, GError **error)
{
  if (s->momentum == NULL)
    s->momentum = ks_arena_new_like (ks_model_parameters (model), error);
  return s->momentum != NULL;
}

/* One step over the whole parameter arena (the padding between tensors is zero in the
 * parameters, the gradients and the momentum, and stays zero). */
static gboolean
signum_apply (void *ctx, KsModel *model, const KsParamGrad *pairs, gsize n_pairs,
              GError **error)
{
  Signum *s = ctx;
  KsCompute *device = ks_model_device (model);
  KsArena *params = ks_model_parameters (model), *grads = ks_model_gradients (model);
  gsize n = ks_arena_numel (params), bytes = n * sizeof (float);
  gboolean ok = FALSE;

  if (!make_momentum (s, model, error))
    return FALSE;
  float *p = g_malloc (bytes), *g = g_malloc (bytes), *m = g_malloc (bytes);
  if (ks_compute_copy_to_host (device, p, ks_arena_data (params), bytes, error)
      && ks_compute_copy_to_host (device, g, ks_arena_data (grads), bytes, error)
      && ks_compute_copy_to_host (device, m, ks_arena_data (s->momentum), bytes, error))
    {
      for (gsize i = 0; i < n; i++)
        {
          m[i] = (float) (s->beta * m[i] + (1 - s->beta) * g[i]);
          p[i] -= (float) s->lr * (float) ((m[i] > 0) - (m[i] < 0));
        }
      ok = ks_compute_copy_to_device (device, ks_arena_data (params), p, bytes, error)
           && ks_compute_copy_to_device (device, ks_arena_data (s->momentum), m, bytes, error);
    }
  g_free (p);
  g_free (g);
  g_free (m);
  if (!ok)
    return FALSE;
  s->step++;
  ks_model_parameters_changed (model); /* the backend's cached views of them are stale */
  return TRUE;
}

static gboolean
signum_set_learning_rate (void *ctx, double lr, GError **error)
{
  ((Signum *) ctx)->lr = lr;
  return TRUE;
}

static double
signum_learning_rate (void *ctx)
{
  return ((Signum *) ctx)->lr;
}

static gsize
signum_state_per_param (void *ctx)
{
  return 1;
}

/* What a checkpoint saves and a resume restores in place: the momentum and the step. */
static gboolean
signum_state (void *ctx, KsModel *model, KsArena ***arenas, gsize *n, gint64 **step,
              GError **error)
{
  Signum *s = ctx;
  if (!make_momentum (s, model, error))
    return FALSE;
  *arenas = &s->momentum;
  *n = 1;
  *step = &s->step;
  return TRUE;
}

static const KsOptimizerOps signum_ops = {
  .size = sizeof (KsOptimizerOps),
  .create = signum_create,
  .destroy = signum_destroy,
  .backward = signum_backward,
  .apply_gradients = signum_apply,
  .set_learning_rate = signum_set_learning_rate,
  .learning_rate = signum_learning_rate,
  .state_per_param = signum_state_per_param,
  .state = signum_state,
};

static const KsImplDesc signum_impls[] = {
  { KS_KIND_OPTIMIZER, "signum", &signum_ops, NULL, "sign of the gradients' momentum" },
};

/* Read from [signum] (the plugin's name is its group); the core checks types, ranges and
 * unknown keys before anything runs, and `ksdist config --reference` lists them. */
static const KsKeyDesc signum_settings[] = {
  { NULL, "beta", KS_VALUE_DOUBLE, "0.9", 0, 0.999, NULL,
    "Momentum of the gradients whose sign each step follows" },
};

static const KsPluginDesc signum_plugin = {
  .abi_major = KS_ABI_MAJOR,
  .abi_minor = KS_ABI_MINOR,
  .name = "signum", /* must equal the file's name: signum.so */
  .version = "0.1",
  .description = "Signum optimizer (template of an out-of-tree plugin)",
  .impls = signum_impls,
  .n_impls = G_N_ELEMENTS (signum_impls),
  .settings = signum_settings,
  .n_settings = G_N_ELEMENTS (signum_settings),
};

KS_PLUGIN_DEFINE (signum_plugin)
