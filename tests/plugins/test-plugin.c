/* A plugin built only for the tests, in several variants chosen by macros:
 *   TP_NAME             the descriptor's name (also the module's file name)
 *   TP_ABI_MAJOR_DELTA  added to KS_ABI_MAJOR (a plugin for another ABI)
 *   TP_ABI_MINOR_DELTA  added to KS_ABI_MINOR (a plugin for a newer core)
 *   TP_UNAVAILABLE      its query reports it cannot run here
 *   TP_NO_REQUIRED_SLOT its compute vtable leaves `alloc` unset
 *   TP_NO_ENTRY         exports no descriptor at all
 *   TP_ALGORITHMS       also provides the "collective" and "transpiler" algorithms;
 *                       the latter's run_server_cancellable serves until cancelled
 *   TP_BAD_SETTING=1    declares the setting "level" twice
 *   TP_BAD_SETTING=2    gives "level" a default outside its own range
 *   TP_OPTIMIZER        also provides optimizers: "tp-sgd" (p -= lr g, the rate through
 *                       set_learning_rate, each step's logged) and "tp-fixed" (its
 *                       own rate, 0.01; no set_learning_rate); neither keeps a state
 * The compute implementation keeps host memory and reports its settings in describe(). */
#include <ksdist/ksdist.h>
#include <gio/gio.h>

#include <stdlib.h>
#include <string.h>

#ifndef TP_ABI_MAJOR_DELTA
#define TP_ABI_MAJOR_DELTA 0
#endif
#ifndef TP_ABI_MINOR_DELTA
#define TP_ABI_MINOR_DELTA 0
#endif
#ifndef TP_BAD_SETTING
#define TP_BAD_SETTING 0
#endif

typedef struct {
  gint64 level;
  char *label;
} TestCtx;

static void *
tp_create (const KsSettings *settings, GError **error)
{
  TestCtx *ctx = g_new0 (TestCtx, 1);
  ctx->level = ks_settings_get_int (settings, "level");
  ctx->label = g_strdup (ks_settings_get_string (settings, "label"));
  if (strcmp (ctx->label, "fail") == 0)
    {
      g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED, "label 'fail' asks to fail");
      g_free (ctx->label);
      g_free (ctx);
      return NULL;
    }
  return ctx;
}

static void
tp_destroy (void *p)
{
  TestCtx *ctx = p;
  g_free (ctx->label);
  g_free (ctx);
}

static char *
tp_describe (void *p)
{
  TestCtx *ctx = p;
  return g_strdup_printf ("level=%" G_GINT64_FORMAT " label=%s", ctx->level, ctx->label);
}

#ifndef TP_NO_REQUIRED_SLOT
static void *
tp_alloc (void *ctx, gsize nbytes, GError **error)
{
  return g_malloc0 (MAX (nbytes, 1));
}
#endif

static void
tp_free (void *ctx, void *ptr)
{
  g_free (ptr);
}

static gboolean
tp_copy (void *ctx, void *dst, const void *src, gsize nbytes, GError **error)
{
  memcpy (dst, src, nbytes);
  return TRUE;
}

/* Lies beyond the size this vtable declares: the core must never call it. */
static gboolean
tp_beyond_size (void *ctx, GError **error)
{
  abort ();
}

static const KsComputeOps tp_compute_ops = {
  /* As if built against an older ABI 1.x whose vtable ended before synchronize. */
  .size = offsetof (KsComputeOps, synchronize),
  .create = tp_create,
  .destroy = tp_destroy,
#ifndef TP_NO_REQUIRED_SLOT
  .alloc = tp_alloc,
#endif
  .free = tp_free,
  .copy_to_device = tp_copy,
  .copy_to_host = tp_copy,
  .describe = tp_describe,
  .synchronize = tp_beyond_size,
};

static int
tp_query (char **reason)
{
#ifdef TP_UNAVAILABLE
  *reason = g_strdup ("no test device on this machine");
  return -1;
#else
  return 1;
#endif
}

#ifdef TP_ALGORITHMS
static gboolean
tp_algorithm_init (void *ctx, KsRoleMaker *role, GError **error)
{
  ((TestCtx *) ctx)->level += 100; /* observable: init ran */
  return TRUE;
}

static gboolean
tp_algorithm_init_worker (void *ctx, GError **error)
{
  if (((TestCtx *) ctx)->level < 100)
    {
      g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED, "init_worker before init");
      return FALSE;
    }
  return TRUE;
}

static const KsAlgorithmOps tp_algorithm_ops = {
  .size = sizeof (KsAlgorithmOps),
  .create = tp_create,
  .destroy = tp_destroy,
  .init = tp_algorithm_init,
  .init_worker = tp_algorithm_init_worker,
  .traits = 0, /* its "collective": no servers */
};

/* Serves nothing until cancelled (at most 30 s), as a parameter server with no worker. */
static gboolean
tp_run_server_cancellable (void *ctx, GCancellable *cancellable, GError **error)
{
  for (int i = 0; i < 3000 && !g_cancellable_is_cancelled (cancellable); i++)
    g_usleep (10000);
  return !g_cancellable_set_error_if_cancelled (cancellable, error);
}

static const KsAlgorithmOps tp_servers_ops = {
  .size = sizeof (KsAlgorithmOps),
  .create = tp_create,
  .destroy = tp_destroy,
  .init = tp_algorithm_init,
  .init_worker = tp_algorithm_init_worker,
  .traits = KS_ALGORITHM_SERVERS | KS_ALGORITHM_SERVER_CHECKPOINTS,
  .run_server_cancellable = tp_run_server_cancellable,
};
#endif

#ifdef TP_OPTIMIZER
typedef struct {
  double lr;
} TpOpt;

static void *
tp_opt_create (const KsSettings *settings, GError **error)
{
  TpOpt *o = g_new0 (TpOpt, 1);
  o->lr = 0.01;
  return o;
}

static gboolean
tp_opt_backward (void *ctx, KsModel *model, KsExpr *loss, KsExpr *const *params,
                 gsize n_params, const char *const *no_grad, GArray *pairs, GError **error)
{
  return ks_model_backward (model, loss, params, n_params, no_grad, pairs, error);
}

static gboolean
tp_opt_apply (void *ctx, KsModel *model, const KsParamGrad *pairs, gsize n_pairs,
              GError **error)
{
  TpOpt *o = ctx;
  KsArena *params = ks_model_parameters (model), *grads = ks_model_gradients (model);
  float *p = ks_arena_data (params);
  const float *g = ks_arena_data (grads);
  g_message ("tp-sgd: step lr %.6g", o->lr);
  for (gsize i = 0; i < ks_arena_numel (params); i++)
    p[i] -= (float) o->lr * g[i];
  ks_model_parameters_changed (model);
  return TRUE;
}

static gboolean
tp_opt_set_lr (void *ctx, double lr, GError **error)
{
  ((TpOpt *) ctx)->lr = lr;
  return TRUE;
}

static const KsOptimizerOps tp_sgd_ops = {
  .size = sizeof (KsOptimizerOps),
  .create = tp_opt_create,
  .destroy = g_free,
  .backward = tp_opt_backward,
  .apply_gradients = tp_opt_apply,
  .set_learning_rate = tp_opt_set_lr,
};

static const KsOptimizerOps tp_fixed_ops = {
  .size = sizeof (KsOptimizerOps),
  .create = tp_opt_create,
  .destroy = g_free,
  .backward = tp_opt_backward,
  .apply_gradients = tp_opt_apply,
};
#endif

static const KsImplDesc tp_impls[] = {
  { KS_KIND_COMPUTE, TP_NAME, &tp_compute_ops, tp_query, "test compute" },
#ifdef TP_ALGORITHMS
  { KS_KIND_ALGORITHM, "collective", &tp_algorithm_ops, NULL, "test collective" },
  { KS_KIND_ALGORITHM, "transpiler", &tp_servers_ops, NULL, "test transpiler" },
#endif
#ifdef TP_OPTIMIZER
  { KS_KIND_OPTIMIZER, "tp-sgd", &tp_sgd_ops, NULL, "test SGD, its rate from the core" },
  { KS_KIND_OPTIMIZER, "tp-fixed", &tp_fixed_ops, NULL, "test SGD at its own rate" },
#endif
};

static const KsKeyDesc tp_settings[] = {
#if TP_BAD_SETTING == 2
  { NULL, "level", KS_VALUE_INT, "10", 0, 9, NULL, "A number the tests set and read back" },
#else
  { NULL, "level", KS_VALUE_INT, "1", 0, 9, NULL, "A number the tests set and read back" },
#endif
  { NULL, "label", KS_VALUE_STRING, "plain", 1, 0, NULL, "A word the tests set and read back" },
#if TP_BAD_SETTING == 1
  { NULL, "level", KS_VALUE_INT, "2", 0, 9, NULL, "The same key again" },
#endif
};

static const KsPluginDesc tp_plugin = {
  .abi_major = KS_ABI_MAJOR + TP_ABI_MAJOR_DELTA,
  .abi_minor = KS_ABI_MINOR + TP_ABI_MINOR_DELTA,
  .name = TP_NAME,
  .version = "0.0.1-test",
  .description = "a plugin built for the tests",
  .impls = tp_impls,
  .n_impls = G_N_ELEMENTS (tp_impls),
  .settings = tp_settings,
  .n_settings = G_N_ELEMENTS (tp_settings),
};

#ifndef TP_NO_ENTRY
KS_PLUGIN_DEFINE (tp_plugin)
#else
/* Keeps the descriptor referenced so the variant still compiles without warnings. */
const KsPluginDesc *tp_unused_descriptor (void);
const KsPluginDesc *
tp_unused_descriptor (void)
{
  return &tp_plugin;
}
#endif
