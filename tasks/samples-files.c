/* The files a [data] path names for the table formats (csv, npy): one file, a folder of
 * files, or a glob, in sorted name order; npy features paired with their labels. */
#include "samples.h"

#include <ksdist/ctr.h>

#include <glob.h>
#include <string.h>

#define LABELS_SUFFIX ".labels.npy"

gboolean
sample_files_is_list (const char *path)
{
  /* a file that is there is itself, whatever its name holds (data[2020].csv) */
  if (g_file_test (path, G_FILE_TEST_IS_REGULAR))
    return FALSE;
  return strpbrk (path, "*?[") != NULL || g_file_test (path, G_FILE_TEST_IS_DIR);
}

static int
by_name (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The regular files a glob matches, sorted by strcmp (glob's own order follows the
 * locale). */
static char **
glob_files (const char *key, const char *pattern, GError **error)
{
  g_autoptr (GPtrArray) files = g_ptr_array_new_with_free_func (g_free);
  glob_t g = { 0 };
  int rc = glob (pattern, 0, NULL, &g); /* a folder that cannot be read matches nothing */

  for (gsize i = 0; rc == 0 && i < g.gl_pathc; i++)
    if (g_file_test (g.gl_pathv[i], G_FILE_TEST_IS_REGULAR))
      g_ptr_array_add (files, g_strdup (g.gl_pathv[i]));
  globfree (&g);
  if (rc != 0 && rc != GLOB_NOMATCH)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO,
                   "[data] %s = %s: glob failed (out of memory)", key, pattern);
      return NULL;
    }
  if (files->len == 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO,
                   "[data] %s = %s matches no file: check the pattern (a folder, or a glob "
                   "such as data/part-*.csv)", key, pattern);
      return NULL;
    }
  g_ptr_array_sort (files, by_name);
  g_ptr_array_add (files, NULL);
  return (char **) g_ptr_array_free (g_steal_pointer (&files), FALSE);
}

/* npy files of a list: NAME.npy holds features, NAME.labels.npy beside it their labels;
 * anything else is refused rather than guessed at. */
static gboolean
pair_labels (const char *key, char **all, char ***features, char ***labels, GError **error)
{
  g_autoptr (GPtrArray) f = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) l = g_ptr_array_new_with_free_func (g_free);

  for (char **p = all; *p != NULL; p++)
    {
      if (g_str_has_suffix (*p, LABELS_SUFFIX))
        {
          g_autofree char *base = g_strndup (*p, strlen (*p) - strlen (LABELS_SUFFIX));
          g_autofree char *mate = g_strconcat (base, ".npy", NULL);
          if (!g_strv_contains ((const char *const *) all, mate))
            return ks_tasks_config_error (error, "[data] %s: %s has no features file %s "
                                          "(NAME.labels.npy holds the labels of NAME.npy)",
                                          key, *p, mate);
          continue;
        }
      if (!g_str_has_suffix (*p, ".npy"))
        return ks_tasks_config_error (error, "[data] %s: %s is not a .npy file (a folder or "
                                      "glob of npy files holds NAME.npy features and "
                                      "NAME.labels.npy labels only)", key, *p);
      g_autofree char *base = g_strndup (*p, strlen (*p) - 4);
      char *mate = g_strconcat (base, LABELS_SUFFIX, NULL);
      g_ptr_array_add (f, g_strdup (*p));
      g_ptr_array_add (l, mate);
      if (!g_file_test (mate, G_FILE_TEST_IS_REGULAR))
        return ks_tasks_config_error (error, "[data] %s: %s has no labels file %s beside it "
                                      "(NAME.labels.npy holds the labels of NAME.npy)", key,
                                      *p, mate);
    }
  if (f->len == 0)
    return ks_tasks_config_error (error, "[data] %s: only labels files (NAME.labels.npy), no "
                                  "features file NAME.npy", key);
  g_ptr_array_add (f, NULL);
  g_ptr_array_add (l, NULL);
  *features = (char **) g_ptr_array_free (g_steal_pointer (&f), FALSE);
  *labels = (char **) g_ptr_array_free (g_steal_pointer (&l), FALSE);
  return TRUE;
}

gboolean
sample_files_list (const char *key, const char *path, const char *labels_key,
                   const char *labels_path, char ***files, char ***labels, GError **error)
{
  g_auto (GStrv) all = NULL;

  *files = NULL;
  if (labels != NULL)
    *labels = NULL;
  if (!sample_files_is_list (path))
    {
      *files = g_strdupv ((char *[]) { (char *) path, NULL });
      if (labels != NULL)
        *labels = g_strdupv ((char *[]) { (char *) labels_path, NULL });
      return TRUE;
    }
  if (labels != NULL && *labels_path != '\0')
    return ks_tasks_config_error (error, "[data] %s is set, but [data] %s = %s names many "
                                  "files, whose labels pair by name (NAME.labels.npy beside "
                                  "NAME.npy): remove [data] %s", labels_key, key, path,
                                  labels_key);
  if (g_file_test (path, G_FILE_TEST_IS_DIR))
    all = ks_data_dir_files (path, error);
  else
    all = glob_files (key, path, error);
  if (all == NULL && g_file_test (path, G_FILE_TEST_IS_DIR))
    g_prefix_error (error, "[data] %s: ", key);
  if (all == NULL)
    return FALSE;
  if (labels != NULL)
    return pair_labels (key, all, files, labels, error);
  *files = g_steal_pointer (&all);
  return TRUE;
}
