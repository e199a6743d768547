/* The files a setting of type KS_VALUE_PATH names for a run to read ([model] init_from,
 * the tasks library's [data] path, a task's own: what declares the key says so): a
 * relative path written in a config file is looked for beside the config file first, so
 * an installed or copied example finds its data wherever it is run from, then in the
 * current directory, where configs run from a project's root (and `ksdist datagen`'s
 * output) have always been found. A path given by --set or the environment is taken from
 * the current directory, as a shell argument is. Folders a run writes (checkpoint_dir,
 * export_dir) are not resolved: they need not exist yet, so there is nothing to find. */
#include "ks-private.h"

#include <glob.h>
#include <string.h>

/* Whether `path` is there: a file or folder, or a glob that matches something. */
static gboolean
exists (const char *path)
{
  if (g_file_test (path, G_FILE_TEST_EXISTS))
    return TRUE;
  if (strpbrk (path, "*?[") == NULL)
    return FALSE;
  glob_t g = { 0 };
  gboolean found = glob (path, 0, NULL, &g) == 0 && g.gl_pathc > 0;
  globfree (&g);
  return found;
}

char *
ks_config_path_resolve (const char *config_file, const char *value)
{
  if (*value == '\0' || g_path_is_absolute (value) || config_file == NULL)
    return NULL;
  g_autofree char *dir = g_path_get_dirname (config_file);
  if (strcmp (dir, ".") == 0)
    return NULL;
  char *beside = g_build_filename (dir, value, NULL);
  if (exists (beside))
    return beside;
  g_free (beside);
  return NULL;
}

gboolean
ks_config_path_check (const char *group, const char *key, const char *value,
                      const char *config_file, gboolean from_file, const char *where,
                      GError **error)
{
  g_autofree char *beside = from_file ? ks_config_path_resolve (config_file, value) : NULL;
  if (*value == '\0' || beside != NULL || exists (value))
    return TRUE;
  g_autofree char *shown = ks_printable (value, 200);
  g_autofree char *cwd = g_get_current_dir ();
  g_autofree char *rule = NULL;
  if (g_path_is_absolute (value))
    rule = g_strdup ("");
  else if (from_file)
    {
      g_autofree char *dir = g_path_get_dirname (config_file);
      g_autofree char *full = g_canonicalize_filename (dir, cwd);
      rule = g_strdup_printf (" (relative paths are taken from the config file's folder %s, "
                              "then the current directory %s)", full, cwd);
    }
  else
    rule = g_strdup_printf (" (a relative path given by %s is taken from the current "
                            "directory %s)", where, cwd);
  g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO, "[%s] %s = %s (%s%s): %s%s",
               group, key, shown, from_file ? "in " : "", where,
               strpbrk (value, "*?[") != NULL ? "matches no file" : "not found", rule);
  return FALSE;
}
