/* Creating an implementation of any kind: select it, give it its settings, create it. */
#include "ks-private.h"

KsInstance *
ks_instance_new (KsRegistry *registry, const KsConfig *config, KsKind kind, const char *name,
                 gsize struct_size, GError **error)
{
  const KsPluginRecord *plugin = NULL;
  const KsImplDesc *impl = ks_registry_select (registry, kind, name, &plugin, error);
  g_autoptr (GError) local = NULL;
  KsInstance *instance;

  if (impl == NULL)
    return NULL;
  g_return_val_if_fail (struct_size >= sizeof (KsInstance), NULL);
  instance = g_malloc0 (struct_size);
  instance->impl = impl;
  instance->plugin = plugin;
  instance->settings = ks_settings_new (config, plugin->name);
  instance->ctx = ((const KsOpsHead *) impl->ops)->create (instance->settings, &local);
  if (instance->ctx == NULL)
    {
      /* a plugin refusing its settings is a configuration error (exit 2), as the
       * same refusal by the core is */
      gboolean config = local != NULL && local->domain == KS_CONFIG_ERROR;
      g_set_error (error, config ? KS_CONFIG_ERROR : KS_PLUGIN_ERROR,
                   config ? local->code : KS_PLUGIN_ERROR_FAILED,
                   "%s '%s' (plugin %s) could not be created: %s", ks_kind_name (kind),
                   impl->name, plugin->name,
                   local != NULL ? local->message : "the plugin gave no reason");
      ks_settings_free (instance->settings);
      g_free (instance);
      return NULL;
    }
  return instance;
}

void
ks_instance_free (KsInstance *instance)
{
  if (instance == NULL)
    return;
  ((const KsOpsHead *) instance->impl->ops)->destroy (instance->ctx);
  ks_settings_free (instance->settings);
  g_free (instance);
}

/* Every vtable begins like KsOpsHead, which this file relies on. */
#define SAME_HEAD(Type)                                                                 \
  G_STATIC_ASSERT (offsetof (Type, create) == offsetof (KsOpsHead, create)              \
                   && offsetof (Type, destroy) == offsetof (KsOpsHead, destroy))
SAME_HEAD (KsComputeOps);
SAME_HEAD (KsCommOps);
SAME_HEAD (KsStoreOps);
SAME_HEAD (KsRoleMakerOps);
SAME_HEAD (KsSegmenterOps);
SAME_HEAD (KsOptimizerOps);
SAME_HEAD (KsAlgorithmOps);
