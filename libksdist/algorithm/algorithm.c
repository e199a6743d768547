/* The distributed algorithm as the core calls it, and the factory that makes one. */
#include "ks-private.h"

#include <string.h>

#define OPS(a) KS_INSTANCE_OPS (&(a)->instance, KsAlgorithmOps)
#define CTX(a) ((a)->instance.ctx)
#define REQUIRE(a, field, error) KS_REQUIRE_SLOT (&(a)->instance, KsAlgorithmOps, field, error)

void
ks_algorithm_free (KsAlgorithm *algorithm)
{
  if (algorithm != NULL)
    g_clear_object (&algorithm->cancellable);
  ks_instance_free ((KsInstance *) algorithm);
}

const char *
ks_algorithm_mode (const KsAlgorithm *algorithm)
{
  return algorithm->instance.impl->name;
}

const char *
ks_algorithm_plugin (const KsAlgorithm *algorithm)
{
  return algorithm->instance.plugin->name;
}

gboolean
ks_algorithm_init (KsAlgorithm *algorithm, KsRoleMaker *role, GError **error)
{
  return OPS (algorithm)->init (CTX (algorithm), role, error);
}

gboolean
ks_algorithm_init_worker (KsAlgorithm *algorithm, GError **error)
{
  REQUIRE (algorithm, init_worker, error);
  return OPS (algorithm)->init_worker (CTX (algorithm), error);
}

gboolean
ks_algorithm_init_server (KsAlgorithm *algorithm, const char *model_dir, GError **error)
{
  REQUIRE (algorithm, init_server, error);
  return OPS (algorithm)->init_server (CTX (algorithm), model_dir, error);
}

gboolean
ks_algorithm_run_server_cancellable (KsAlgorithm *algorithm, GCancellable *cancellable,
                                     GError **error)
{
  if (KS_OPS_HAS (OPS (algorithm), KsAlgorithmOps, run_server_cancellable))
    return OPS (algorithm)->run_server_cancellable (CTX (algorithm), cancellable, error);
  REQUIRE (algorithm, run_server, error);
  return OPS (algorithm)->run_server (CTX (algorithm), error);
}

gboolean
ks_algorithm_run_server (KsAlgorithm *algorithm, GError **error)
{
  return ks_algorithm_run_server_cancellable (algorithm, algorithm->cancellable, error);
}

void
ks_algorithm_set_cancellable (KsAlgorithm *algorithm, GCancellable *cancellable)
{
  if (cancellable != NULL)
    g_object_ref (cancellable);
  g_clear_object (&algorithm->cancellable);
  algorithm->cancellable = cancellable;
}

gboolean
ks_algorithm_stop_worker (KsAlgorithm *algorithm, GError **error)
{
  REQUIRE (algorithm, stop_worker, error);
  return OPS (algorithm)->stop_worker (CTX (algorithm), error);
}

gboolean
ks_algorithm_has_sparse (const KsAlgorithm *algorithm)
{
  return KS_OPS_HAS (OPS (algorithm), KsAlgorithmOps, sparse_table);
}

gboolean
ks_algorithm_sparse_table (KsAlgorithm *algorithm, const char *table, const char *rows_param,
                           GError **error)
{
  REQUIRE (algorithm, sparse_table, error);
  return OPS (algorithm)->sparse_table (CTX (algorithm), table, rows_param, error);
}

gboolean
ks_algorithm_pull_sparse (KsAlgorithm *algorithm, const char *table, const guint64 *ids, gsize n,
                          gboolean create, float *out, GError **error)
{
  REQUIRE (algorithm, pull_sparse, error);
  return OPS (algorithm)->pull_sparse (CTX (algorithm), table, ids, n, create, out, error);
}

gboolean
ks_algorithm_push_sparse (KsAlgorithm *algorithm, const char *table, gint64 step,
                          const guint64 *ids, gsize n, const float *grads, const float *shows,
                          const float *clicks, GError **error)
{
  REQUIRE (algorithm, push_sparse, error);
  return OPS (algorithm)->push_sparse (CTX (algorithm), table, step, ids, n, grads, shows,
                                       clicks, error);
}

gboolean
ks_algorithm_flush_worker (KsAlgorithm *algorithm, gboolean *stopped, GError **error)
{
  *stopped = !KS_OPS_HAS (OPS (algorithm), KsAlgorithmOps, flush_worker);
  return *stopped ? ks_algorithm_stop_worker (algorithm, error)
                  : OPS (algorithm)->flush_worker (CTX (algorithm), error);
}

gboolean
ks_algorithm_shrink (KsAlgorithm *algorithm, guint64 *deleted, GError **error)
{
  REQUIRE (algorithm, shrink, error);
  return OPS (algorithm)->shrink (CTX (algorithm), deleted, error);
}

gboolean
ks_algorithm_save_check_point (KsAlgorithm *algorithm, KsModel *model, KsOptimizer *optimizer,
                               const char *dir, const KsTrainStatus *status,
                               GHashTable *metadata, guint keep, GError **error)
{
  REQUIRE (algorithm, save_check_point, error);
  return OPS (algorithm)->save_check_point (CTX (algorithm), model, optimizer, dir, status,
                                            metadata, keep, error);
}

gboolean
ks_algorithm_load_check_point (KsAlgorithm *algorithm, KsModel *model, KsOptimizer *optimizer,
                               const char *dir, KsTrainStatus *status, GHashTable **metadata,
                               GError **error)
{
  REQUIRE (algorithm, load_check_point, error);
  return OPS (algorithm)->load_check_point (CTX (algorithm), model, optimizer, dir, status,
                                            metadata, error);
}

KsOptimizer *
ks_algorithm_distributed_optimizer (KsAlgorithm *algorithm, KsOptimizer *inner,
                                    const KsConfig *strategy, GError **error)
{
  const KsOptimizerOps *inner_ops = KS_INSTANCE_OPS (&inner->instance, KsOptimizerOps);
  const KsOptimizerOps *ops = NULL;
  void *ctx = NULL;

  if (!KS_OPS_HAS (OPS (algorithm), KsAlgorithmOps, distributed_optimizer))
    {
      ks_set_not_supported (error, algorithm->instance.plugin->name, KS_KIND_ALGORITHM,
                            "distributed_optimizer");
      return NULL;
    }
  g_return_val_if_fail (inner->pairs == NULL, NULL); /* wrap before minimize */
  if (!OPS (algorithm)->distributed_optimizer (CTX (algorithm), inner_ops, inner->instance.ctx,
                                               strategy, &ops, &ctx, error))
    return NULL;
  return ks_optimizer_new_wrapper (inner, ops, ctx, algorithm->instance.plugin);
}

/* ---- the factory ---- */

static const char *const known_modes[] = { KS_MODE_COLLECTIVE, KS_MODE_TRANSPILER,
                                           KS_MODE_PSLIB, NULL };

const char *
ks_factory_mode_for_flag (int flag)
{
  return flag != 0 ? KS_MODE_COLLECTIVE : KS_MODE_TRANSPILER;
}

static char *
modes_available (KsRegistry *registry)
{
  g_autoptr (GPtrArray) list = ks_registry_list (registry, KS_KIND_ALGORITHM);
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < list->len; i++)
    {
      const KsImplInfo *info = g_ptr_array_index (list, i);
      g_string_append_printf (s, "%s%s (plugin %s%s%s)", i > 0 ? ", " : "", info->impl->name,
                              info->plugin->name, info->reason != NULL ? ", unavailable: " : "",
                              info->reason != NULL ? info->reason : "");
    }
  if (list->len == 0)
    g_string_append (s, "none (no loaded plugin provides an algorithm; see `ksdist plugins`)");
  return g_string_free (s, FALSE);
}

KsAlgorithm *
ks_factory_instantiate (KsRegistry *registry, const KsConfig *config, const char *mode,
                        GError **error)
{
  g_autoptr (GPtrArray) provided = ks_registry_list (registry, KS_KIND_ALGORITHM);
  gboolean is_provided = FALSE;

  g_return_val_if_fail (mode != NULL, NULL);
  for (guint i = 0; i < provided->len; i++)
    is_provided |= strcmp (((KsImplInfo *) g_ptr_array_index (provided, i))->impl->name, mode) == 0;
  if (!is_provided)
    {
      g_autofree char *available = modes_available (registry);
      g_autofree char *known = g_strjoinv (", ", (char **) known_modes);
      if (g_strv_contains (known_modes, mode))
        g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_FOUND,
                     "mode '%s': no loaded plugin provides it; available: %s", mode, available);
      else
        g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_FOUND,
                     "unknown mode '%s' (modes: %s); available here: %s", mode, known,
                     available);
      return NULL;
    }
  return (KsAlgorithm *) ks_instance_new (registry, config, KS_KIND_ALGORITHM, mode,
                                          sizeof (KsAlgorithm), error);
}

gboolean
ks_algorithm_check_strategy (KsRegistry *registry, const KsConfig *config, const char *mode,
                             GError **error)
{
  g_autoptr (GPtrArray) provided = ks_registry_list (registry, KS_KIND_ALGORITHM);

  for (guint i = 0; i < provided->len; i++)
    {
      const KsImplDesc *impl = ((KsImplInfo *) g_ptr_array_index (provided, i))->impl;
      const KsAlgorithmOps *ops = impl->ops;
      if (strcmp (impl->name, mode) == 0 && KS_OPS_HAS (ops, KsAlgorithmOps, check_strategy)
          && ops->check_strategy != NULL)
        return ops->check_strategy (config, error);
    }
  return TRUE;
}

KsAlgorithm *
ks_factory_instantiate_flag (KsRegistry *registry, const KsConfig *config, int flag,
                             GError **error)
{
  return ks_factory_instantiate (registry, config, ks_factory_mode_for_flag (flag), error);
}
