/* The registry: the search path, include/exclude lists, the record of every file
 * considered, and selection of implementations by name or priority. */
#include "loader.h"

#include <stdlib.h>
#include <string.h>

struct KsRegistry {
  GPtrArray *records;     /* KsPluginRecord*, search order */
  GPtrArray *search_path; /* char*, NULL-terminated */
  GHashTable *queries;    /* KsImplDesc* -> KsImplInfo* (cached query results) */
  gboolean scanned;
};

static void
record_free (gpointer p)
{
  KsPluginRecord *r = p;
  g_free (r->path);
  g_free (r->name);
  g_free (r->reason);
  g_free (r);
}

static void
impl_info_free (gpointer p)
{
  KsImplInfo *info = p;
  g_free (info->reason);
  g_free (info);
}

KsRegistry *
ks_registry_new (void)
{
  KsRegistry *registry = g_new0 (KsRegistry, 1);
  registry->records = g_ptr_array_new_with_free_func (record_free);
  registry->search_path = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (registry->search_path, NULL);
  registry->queries = g_hash_table_new_full (NULL, NULL, NULL, impl_info_free);
  return registry;
}

void
ks_registry_free (KsRegistry *registry)
{
  if (registry == NULL)
    return;
  g_ptr_array_unref (registry->records);
  g_ptr_array_unref (registry->search_path);
  g_hash_table_unref (registry->queries);
  g_free (registry);
}

const GPtrArray *
ks_registry_records (const KsRegistry *registry)
{
  return registry->records;
}

const char *const *
ks_registry_search_path (const KsRegistry *registry)
{
  return (const char *const *) registry->search_path->pdata;
}

const KsPluginRecord *
ks_registry_find_plugin (const KsRegistry *registry, const char *name)
{
  for (guint i = 0; i < registry->records->len; i++)
    {
      const KsPluginRecord *r = g_ptr_array_index (registry->records, i);
      if (r->state == KS_PLUGIN_LOADED && strcmp (r->name, name) == 0)
        return r;
    }
  return NULL;
}

/* ---- the search path ---- */

static void
add_search_entry (KsRegistry *registry, const char *entry, const char *base_dir)
{
  GPtrArray *path = registry->search_path;
  char *full;

  /* An empty entry ("a::b", a trailing ':') would mean the current directory to some
   * programs; here it means nothing, so a plugin never comes from wherever we run. */
  if (entry == NULL || *entry == '\0')
    return;
  full = base_dir != NULL && !g_path_is_absolute (entry) ? g_build_filename (base_dir, entry, NULL)
                                                         : g_strdup (entry);
  g_ptr_array_insert (path, path->len - 1, full);
}

static void
add_search_list (KsRegistry *registry, const char *list, const char *base_dir)
{
  g_auto (GStrv) entries = g_strsplit (list != NULL ? list : "", ":", -1);
  for (int i = 0; entries[i] != NULL; i++)
    add_search_entry (registry, entries[i], base_dir);
}

static int
by_name (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The plugin folders of the build tree this library was built in (plugins/<name>/.libs,
 * where libtool puts them), when this program runs from that tree: an uninstalled build
 * finds its own plugins, as GStreamer's does, and never those of the current
 * directory or of an older installation. NULL for an installed program. */
static char *
build_tree_plugins (void)
{
  g_autofree char *exe = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *top = realpath (KS_BUILD_DIR, NULL);
  g_autofree char *plugins = NULL;
  g_autoptr (GPtrArray) dirs = g_ptr_array_new_with_free_func (g_free);
  GDir *dir;
  const char *name;

  if (exe == NULL || top == NULL || !g_str_has_prefix (exe, top) || exe[strlen (top)] != '/')
    return NULL;
  plugins = g_build_filename (top, "plugins", NULL);
  if ((dir = g_dir_open (plugins, 0, NULL)) == NULL)
    return NULL;
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      char *libs = g_build_filename (plugins, name, ".libs", NULL);
      if (g_file_test (libs, G_FILE_TEST_IS_DIR))
        g_ptr_array_add (dirs, libs);
      else
        g_free (libs);
    }
  g_dir_close (dir);
  g_ptr_array_sort (dirs, by_name);
  g_ptr_array_add (dirs, NULL);
  return g_strjoinv (":", (char **) dirs->pdata);
}

/* KS_PLUGIN_PATH, [plugins] path, then the system's: KS_PLUGIN_SYSTEM_PATH, else the
 * build tree's plugins for a program run from it, else the installed ones. */
static void
build_search_path (KsRegistry *registry, const KsConfig *config)
{
  g_auto (GStrv) from_config = ks_config_get_list (config, "plugins", "path");
  const char *file = ks_config_file (config);
  g_autofree char *config_dir = file != NULL ? g_path_get_dirname (file) : NULL;
  const char *system = g_getenv ("KS_PLUGIN_SYSTEM_PATH");

  add_search_list (registry, g_getenv ("KS_PLUGIN_PATH"), NULL);
  for (int i = 0; from_config[i] != NULL; i++)
    add_search_entry (registry, from_config[i], config_dir);
  g_autofree char *build = system == NULL ? build_tree_plugins () : NULL;

  add_search_list (registry, system != NULL ? system : build != NULL ? build : KS_PLUGINDIR,
                   NULL);
}

/* ---- include/exclude ---- */

typedef struct {
  char **names;
  gboolean exclude;
  char *origin; /* "KS_PLUGINS=..." or "[plugins] load = ..." */
} LoadFilter;

static gboolean
parse_filter (const KsConfig *config, LoadFilter *filter, GError **error)
{
  const char *env = g_getenv ("KS_PLUGINS");
  g_auto (GStrv) items = NULL;
  g_autofree char *text = NULL;

  if (env != NULL)
    {
      items = g_strsplit (env, ",", -1);
      filter->origin = g_strdup_printf ("KS_PLUGINS=%s", env);
    }
  else
    {
      items = ks_config_get_list (config, "plugins", "load");
      text = g_strjoinv (",", items);
      filter->origin = g_strdup_printf ("[plugins] load = %s", text);
    }
  GPtrArray *names = g_ptr_array_new_with_free_func (g_free);
  for (int i = 0; items[i] != NULL; i++)
    {
      char *item = g_strstrip (items[i]);
      gboolean negated = item[0] == '^';
      if (*item == '\0')
        continue;
      /* Open MPI's rule: one '^' in front negates the whole list. */
      if (names->len == 0)
        filter->exclude = negated;
      else if (negated && !filter->exclude)
        {
          g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_INVALID,
                       "%s mixes included and excluded plugins: write an include list "
                       "(gloo,openblas) or an exclude list (^mpi,cuda)",
                       filter->origin);
          g_ptr_array_free (names, TRUE);
          return FALSE;
        }
      g_ptr_array_add (names, g_strdup (negated ? item + 1 : item));
    }
  g_ptr_array_add (names, NULL);
  filter->names = (char **) g_ptr_array_free (names, FALSE);
  return TRUE;
}

/* Why the filter leaves `name` out, or NULL when it is to be loaded. */
static char *
filter_reason (const LoadFilter *filter, const char *name)
{
  gboolean listed = g_strv_contains ((const char *const *) filter->names, name);
  if (filter->names[0] == NULL || listed != filter->exclude)
    return NULL;
  return g_strdup_printf (filter->exclude ? "excluded by %s" : "not in the include list %s",
                          filter->origin);
}

/* ---- scanning ---- */

static KsPluginRecord *
add_record (KsRegistry *registry, const char *path, const char *name)
{
  KsPluginRecord *r = g_new0 (KsPluginRecord, 1);
  r->path = g_strdup (path);
  r->name = g_strdup (name);
  r->state = KS_PLUGIN_REJECTED; /* until it passes every check */
  g_ptr_array_add (registry->records, r);
  return r;
}

/* Why `name` cannot name a plugin, or NULL. A plugin's name is a configuration group
 * and part of KS_<PLUGIN>_<KEY>; checked before the file is opened. */
static char *
name_problem (const char *name)
{
  gsize n_core;
  const KsKeyDesc *core = ks_core_schema (&n_core);

  for (const char *p = name; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && *p != '-' && *p != '_')
      return g_strdup_printf ("'%s' is not a valid plugin name (it names a configuration "
                              "group and KS_<PLUGIN>_<KEY> variables): rename the file with "
                              "letters, digits, '-' and '_' only",
                              name);
  if (*name == '\0')
    return g_strdup ("a plugin file needs a name before .so");
  for (gsize i = 0; i < n_core; i++)
    if (strcmp (core[i].group, name) == 0)
      return g_strdup_printf ("the name '%s' is a configuration group of the core: rename "
                              "the plugin", name);
  return NULL;
}

static void
consider_file (KsRegistry *registry, KsConfig *config, const LoadFilter *filter,
               const char *path)
{
  g_autofree char *base = g_path_get_basename (path);
  g_autofree char *name = g_strndup (base, strlen (base) - strlen (".so"));
  const KsPluginRecord *earlier = ks_registry_find_plugin (registry, name);
  KsPluginRecord *r = add_record (registry, path, name); /* rejected until loaded */

  if ((r->reason = name_problem (name)) != NULL)
    return;
  if ((r->reason = filter_reason (filter, name)) != NULL)
    {
      r->state = KS_PLUGIN_EXCLUDED;
      return;
    }
  if (earlier != NULL)
    {
      r->state = KS_PLUGIN_SHADOWED;
      r->reason = g_strdup_printf ("shadowed by %s, earlier in the search path", earlier->path);
      return;
    }
  r->desc = ks_loader_open (path, name, &r->reason);
  if (r->desc == NULL)
    return;
  r->state = KS_PLUGIN_LOADED;
  ks_config_add_schema (config, name, r->desc->settings, r->desc->n_settings);
}

static void
scan_entry (KsRegistry *registry, KsConfig *config, const LoadFilter *filter, const char *entry)
{
  g_autoptr (GDir) dir = NULL;
  g_autoptr (GPtrArray) files = NULL;
  const char *file;

  if (!g_file_test (entry, G_FILE_TEST_EXISTS))
    {
      g_debug ("plugin search path entry %s does not exist", entry);
      return;
    }
  if (!g_file_test (entry, G_FILE_TEST_IS_DIR))
    {
      if (g_str_has_suffix (entry, ".so"))
        consider_file (registry, config, filter, entry);
      else
        {
          KsPluginRecord *r = add_record (registry, entry, entry);
          r->state = KS_PLUGIN_REJECTED;
          r->reason = g_strdup ("a plugin file's name must end in .so");
        }
      return;
    }
  dir = g_dir_open (entry, 0, NULL);
  if (dir == NULL)
    return;
  files = g_ptr_array_new_with_free_func (g_free);
  while ((file = g_dir_read_name (dir)) != NULL)
    if (g_str_has_suffix (file, ".so") && strlen (file) > strlen (".so"))
      g_ptr_array_add (files, g_build_filename (entry, file, NULL));
  /* Sorted, so the same tree always loads the same way. */
  g_ptr_array_sort (files, ks_strcmp_indirect);
  for (guint i = 0; i < files->len; i++)
    consider_file (registry, config, filter, g_ptr_array_index (files, i));
}

gboolean
ks_registry_scan (KsRegistry *registry, KsConfig *config, GError **error)
{
  LoadFilter filter = { 0 };
  gboolean ok;

  g_return_val_if_fail (!registry->scanned, FALSE);
  ok = parse_filter (config, &filter, error);
  if (ok)
    {
      build_search_path (registry, config);
      for (guint i = 0; i + 1 < registry->search_path->len; i++)
        scan_entry (registry, config, &filter, g_ptr_array_index (registry->search_path, i));
      registry->scanned = TRUE;
    }
  g_strfreev (filter.names);
  g_free (filter.origin);
  return ok;
}

/* ---- listing and selection ---- */

static const KsImplInfo *
query (KsRegistry *registry, const KsImplDesc *impl, const KsPluginRecord *plugin)
{
  KsImplInfo *info = g_hash_table_lookup (registry->queries, impl);
  if (info != NULL)
    return info;
  info = g_new0 (KsImplInfo, 1);
  info->impl = impl;
  info->plugin = plugin;
  info->priority = impl->query != NULL ? impl->query (&info->reason) : 0;
  if (info->priority < 0 && info->reason == NULL)
    info->reason = g_strdup ("its query reports it unavailable and gives no reason");
  if (info->priority >= 0)
    g_clear_pointer (&info->reason, g_free);
  g_hash_table_insert (registry->queries, (gpointer) impl, info);
  return info;
}

static gboolean
listed (GPtrArray *list, const KsImplDesc *impl)
{
  for (guint i = 0; i < list->len; i++)
    {
      const KsImplInfo *other = g_ptr_array_index (list, i);
      if (other->impl->kind == impl->kind && strcmp (other->impl->name, impl->name) == 0)
        return TRUE;
    }
  return FALSE;
}

GPtrArray *
ks_registry_list (KsRegistry *registry, KsKind kind)
{
  GPtrArray *list = g_ptr_array_new ();

  for (guint i = 0; i < registry->records->len; i++)
    {
      const KsPluginRecord *r = g_ptr_array_index (registry->records, i);
      if (r->state != KS_PLUGIN_LOADED)
        continue;
      for (gsize j = 0; j < r->desc->n_impls; j++)
        {
          const KsImplDesc *impl = &r->desc->impls[j];
          if ((kind == KS_KIND_COUNT || impl->kind == kind) && !listed (list, impl))
            g_ptr_array_add (list, (gpointer) query (registry, impl, r));
        }
    }
  return list;
}

char *
ks_registry_empty_hint (const KsRegistry *registry)
{
  for (guint i = 0; i < registry->records->len; i++)
    if (((KsPluginRecord *) g_ptr_array_index (registry->records, i))->state == KS_PLUGIN_LOADED)
      return NULL;
  g_autofree char *where = g_strjoinv (":", (char **) registry->search_path->pdata);
  return g_strdup_printf ("no plugin loaded from the search path '%s': set KS_PLUGIN_PATH to "
                          "the folders holding ksdist's plugins (PREFIX/lib/ksdist once "
                          "installed, plugins/*/.libs of a build) or [plugins] path",
                          where);
}

static char *
describe_available (const KsRegistry *registry, GPtrArray *list)
{
  GString *s = g_string_new (NULL);
  for (guint i = 0; i < list->len; i++)
    {
      const KsImplInfo *info = g_ptr_array_index (list, i);
      g_string_append_printf (s, "%s%s (plugin %s", i > 0 ? ", " : "", info->impl->name,
                              info->plugin->name);
      if (info->reason != NULL)
        g_string_append_printf (s, ", unavailable: %s", info->reason);
      g_string_append_c (s, ')');
    }
  g_autofree char *hint = list->len == 0 ? ks_registry_empty_hint (registry) : NULL;
  if (hint != NULL)
    g_string_append_printf (s, "none (%s)", hint);
  else if (list->len == 0)
    g_string_append (s, "none: see `ksdist plugins` for what was found and rejected");
  return g_string_free (s, FALSE);
}

/* "; not loaded, as excluded by KS_PLUGINS=^openblas: openblas (...)", or "" when the
 * include or exclude list left no plugin out: a plugin left out is not opened, so what
 * it would provide is not known, and a user who left out the one that does was told
 * nothing of it. */
static char *
describe_excluded (const KsRegistry *registry, KsKind kind)
{
  g_autoptr (GPtrArray) names = g_ptr_array_new ();
  const char *reason = NULL;
  for (guint i = 0; i < registry->records->len; i++)
    {
      const KsPluginRecord *r = g_ptr_array_index (registry->records, i);
      if (r->state != KS_PLUGIN_EXCLUDED)
        continue;
      reason = r->reason; /* one list leaves them all out */
      if (!g_ptr_array_find_with_equal_func (names, r->name, g_str_equal, NULL))
        g_ptr_array_add (names, r->name);
    }
  if (names->len == 0)
    return g_strdup ("");
  g_ptr_array_add (names, NULL);
  g_autofree char *list = g_strjoinv (", ", (char **) names->pdata);
  return g_strdup_printf ("; not loaded, as %s: %s (change that list if %s provides %s)",
                          reason, list, names->len > 2 ? "one of these" : "it",
                          ks_kind_name (kind));
}

const KsImplDesc *
ks_registry_select (KsRegistry *registry, KsKind kind, const char *name,
                    const KsPluginRecord **plugin, GError **error)
{
  g_autoptr (GPtrArray) list = ks_registry_list (registry, kind);
  const KsImplInfo *best = NULL;
  g_autofree char *available = NULL;
  gboolean automatic = name == NULL || strcmp (name, "auto") == 0;

  for (guint i = 0; i < list->len; i++)
    {
      const KsImplInfo *info = g_ptr_array_index (list, i);
      if (automatic && info->priority >= 0 && (best == NULL || info->priority > best->priority))
        best = info;
      if (!automatic && strcmp (info->impl->name, name) == 0)
        {
          if (info->priority < 0)
            {
              g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_UNAVAILABLE,
                           "%s '%s' (plugin %s, %s) is unavailable: %s", ks_kind_name (kind),
                           name, info->plugin->name, info->plugin->path, info->reason);
              return NULL;
            }
          best = info;
          break;
        }
    }
  if (best != NULL)
    {
      if (plugin != NULL)
        *plugin = best->plugin;
      return best->impl;
    }

  available = describe_available (registry, list);
  if (automatic)
    {
      g_autofree char *excluded = describe_excluded (registry, kind);
      g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_FOUND,
                   "no %s implementation is available; found: %s%s", ks_kind_name (kind),
                   available, excluded);
      return NULL;
    }
  /* A plugin of that name that did not load says more than "not found". */
  for (guint i = 0; i < registry->records->len; i++)
    {
      const KsPluginRecord *r = g_ptr_array_index (registry->records, i);
      if (r->state != KS_PLUGIN_LOADED && strcmp (r->name, name) == 0)
        {
          g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_FOUND,
                       "%s '%s': plugin %s was %s: %s; available: %s", ks_kind_name (kind),
                       name, r->path, ks_plugin_state_name (r->state), r->reason, available);
          return NULL;
        }
    }
  g_autofree char *shown = ks_printable (name, 200); /* a name from a config: cut */
  g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_FOUND,
               "no %s implementation named '%s'; available: %s", ks_kind_name (kind), shown,
               available);
  return NULL;
}

gboolean
ks_registry_check_settings (const KsRegistry *registry, const KsConfig *config, GError **error)
{
  for (guint i = 0; i < registry->records->len; i++)
    {
      const KsPluginRecord *r = g_ptr_array_index (registry->records, i);
      /* a plugin built for ABI 1.3 or older has no such member: not read past its end */
      if (r->state != KS_PLUGIN_LOADED || r->desc->abi_minor < 4 || r->desc->check_settings == NULL)
        continue;
      KsSettings *settings = ks_settings_new (config, r->name);
      gboolean ok = r->desc->check_settings (settings, error);
      ks_settings_free (settings);
      if (!ok)
        return FALSE;
    }
  return TRUE;
}
