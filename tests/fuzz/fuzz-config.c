/* Fuzz target: a configuration file (and the same bytes as a --set line), loaded and
 * validated against the core's schema. */
#include "fuzz.h"

#include <ksdist/ksdist.h>
#include <string.h>

static char *path;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  g_autofree char *dir = g_dir_make_tmp ("ksdist-fuzz-XXXXXX", NULL);
  path = g_build_filename (dir, "fuzz.ini", NULL);
  g_log_set_default_handler (fuzz_log_handler, NULL);
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsConfig) cmdline = ks_config_new ();
  g_autofree char *text = g_strndup ((const char *) data, size);
  g_autoptr (GError) error = NULL, error2 = NULL;

  if (path == NULL)
    LLVMFuzzerInitialize (NULL, NULL);
  if (!g_file_set_contents (path, (const char *) data, (gssize) size, NULL))
    return 0;
  if (ks_config_load_file (config, path, &error) && ks_config_validate (config, &error))
    {
      /* every value of the schema read back through the getters */
      g_auto (GStrv) groups = ks_config_groups (config);
      for (int g = 0; groups[g] != NULL; g++)
        {
          GPtrArray *keys = ks_config_group_keys (config, groups[g]);
          for (guint k = 0; k < keys->len; k++)
            {
              const KsKeyDesc *d = g_ptr_array_index (keys, k);
              g_autofree char *where = NULL;
              const char *value;
              KsSource source;
              ks_config_lookup (config, groups[g], d->key, &value, &source, &where);
            }
          g_ptr_array_unref (keys);
        }
    }
  if (ks_config_set_override (cmdline, text, &error2))
    ks_config_validate (cmdline, NULL);
  return 0;
}
