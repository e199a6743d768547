/* ksdist — finding, loading, validating and selecting plugins.
 *
 * For programs that load and choose plugins themselves (the trainer and `ksdist plugins`
 * do it through this).
 *
 * Search order: KS_PLUGIN_PATH (colon-separated directories or files), then
 * `[plugins] path` of the configuration (relative entries are relative to the config
 * file), then the system directory: $(pkglibdir), or KS_PLUGIN_SYSTEM_PATH when set
 * (set it empty to search no system directory, as the tests do). Empty entries are
 * ignored: the current directory is never searched unless named.
 *
 * `[plugins] load` (or KS_PLUGINS, which overrides it) is an include list
 * ("gloo,openblas") or, starting with '^', an exclude list ("^mpi,cuda"); an excluded
 * file is never opened. Plugins are opened RTLD_NOW | RTLD_LOCAL and never closed. */
#ifndef KSDIST_REGISTRY_H
#define KSDIST_REGISTRY_H

#include <ksdist/plugin.h>

G_BEGIN_DECLS

typedef enum {
  KS_PLUGIN_LOADED = 0,
  KS_PLUGIN_REJECTED = 1, /* could not be used: see reason */
  KS_PLUGIN_SHADOWED = 2, /* a plugin of the same name came earlier in the search path */
  KS_PLUGIN_EXCLUDED = 3, /* left out by the include/exclude list; never opened */
} KsPluginState;

const char *ks_plugin_state_name (KsPluginState state);

typedef struct {
  char *path;               /* the file */
  char *name;               /* the file name without ".so" */
  KsPluginState state;
  char *reason;             /* why rejected, shadowed or excluded; NULL when loaded */
  const KsPluginDesc *desc; /* set when the descriptor could be read */
} KsPluginRecord;

typedef struct KsRegistry KsRegistry;

KsRegistry *ks_registry_new (void);
void ks_registry_free (KsRegistry *registry);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsRegistry, ks_registry_free)

/* Scans the search path once and adds each loaded plugin's settings to `config` as the
 * group [<plugin name>]. Problems with single files are recorded, not returned; fails
 * only for a malformed include/exclude list. */
gboolean ks_registry_scan (KsRegistry *registry, KsConfig *config, GError **error);

/* Every file considered, in search order (of KsPluginRecord*). */
const GPtrArray *ks_registry_records (const KsRegistry *registry);
/* The directories and files searched, in order. */
const char *const *ks_registry_search_path (const KsRegistry *registry);
/* When no plugin loaded: what to do about it, naming the search path (free it); else
 * NULL. */
char *ks_registry_empty_hint (const KsRegistry *registry);
/* The record of the loaded plugin called `name`, or NULL. */
const KsPluginRecord *ks_registry_find_plugin (const KsRegistry *registry, const char *name);

/* One implementation of a loaded plugin with its query result. */
typedef struct {
  const KsImplDesc *impl;
  const KsPluginRecord *plugin;
  int priority;  /* >= 0 when available */
  char *reason;  /* why unavailable, else NULL */
} KsImplInfo;

/* The implementations of `kind` (every kind for KS_KIND_COUNT), queried now; free the
 * array with g_ptr_array_unref. Shadowed implementation names (the same name in a later
 * plugin) are left out. */
GPtrArray *ks_registry_list (KsRegistry *registry, KsKind kind);

/* Selects an implementation of `kind` by name, or by "auto" (or NULL): the available one
 * with the highest priority. Errors name what was asked for and list what is available. */
const KsImplDesc *ks_registry_select (KsRegistry *registry, KsKind kind, const char *name,
                                      const KsPluginRecord **plugin, GError **error);

/* Traits (ABI 1.1, plugin.h): what an implementation declares of itself, so that the
 * core chooses and checks by them, never by a plugin's name. */

/* The traits word of `impl` (KS_COMPUTE_*, KS_COMM_*, KS_ALGORITHM_* flags): its
 * vtable's, or its kind's KS_*_TRAITS_1_0 for a plugin built before ABI 1.1; 0 for a
 * kind without traits. */
guint32 ks_impl_traits (const KsImplDesc *impl);
/* Into *traits, those of the available implementation `name` of `kind` ("auto": the one
 * ks_registry_select takes); FALSE when there is none. */
gboolean ks_registry_traits (KsRegistry *registry, KsKind kind, const char *name,
                             guint32 *traits);
/* The available implementation of `kind` of highest priority (the first of equals)
 * whose traits, masked by `mask`, equal `want`; NULL when none is. */
const KsImplDesc *ks_registry_choose (KsRegistry *registry, KsKind kind, guint32 mask,
                                      guint32 want);
/* The names of every such implementation as "a, b or c" ("" for none), for a message
 * that says what to set instead. Free it. */
char *ks_registry_names_with (KsRegistry *registry, KsKind kind, guint32 mask, guint32 want);
/* Each loaded plugin's own check of its settings in `config` (KsPluginDesc.check_settings,
 * ABI 1.4); FALSE with the first one's error. */
gboolean ks_registry_check_settings (const KsRegistry *registry, const KsConfig *config,
                                     GError **error);

G_END_DECLS

#endif
