/* The environment's KS_<GROUP>_<KEY> variables checked as settings are: a known group
 * with an unknown key is a typo, refused with a did-you-mean as the same typo in a file
 * or --set is. */
#include "ks-private.h"

#include <string.h>

/* bytes of a variable's name quoted in a message */
#define MESSAGE_TEXT 200

/* The key names of `group`, NULL-terminated. */
static char **
key_names (const KsConfig *config, const char *group)
{
  g_autoptr (GPtrArray) list = ks_config_group_keys (config, group);
  GPtrArray *out = g_ptr_array_new ();
  for (guint i = 0; i < list->len; i++)
    g_ptr_array_add (out, g_strdup (((const KsKeyDesc *) g_ptr_array_index (list, i))->key));
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (out, FALSE);
}

/* KS_* environment variables that are not settings: the plugin search, the launcher's
 * rendezvous and the job's token, and the test suite's own. A variable whose prefix
 * names a group (KS_STORE_ is [store]'s) is checked as a setting unless listed here. */
static const char *const reserved_env[] = {
  "KS_PLUGIN_PATH", "KS_PLUGIN_SYSTEM_PATH", "KS_PLUGINS",          /* plugin search */
  "KS_STORE", "KS_STORE_ADDRESS", "KS_JOB",                         /* ksdist launch */
  "KS_STORE_TOKEN",                                                 /* the job's secret */
  "KS_SRCDIR", "KS_BUILDDIR", "KS_BUILD_PLUGINS", "KS_TEST_PLUGINS", /* tests/local.mk */
  "KS_PREFIX", "KS_LIBDIR", "KS_BINDIR", "KS_PROGRAM_FLAGS", "KS_TEST_DIR",
  "KS_TEST_PREFIX", "KS_FUZZ_RUNS",
  NULL,
};

/* Whether `var` is the KS_<GROUP>_<KEY> of a key of `group` (of a templated group's
 * keys when `group` is PREFIX.*: KS_TABLE_<NAME>_<KEY>). */
static gboolean
env_names_key (const KsConfig *config, const char *group, const char *var)
{
  g_autoptr (GPtrArray) list = ks_config_group_keys (config, group);
  gboolean template = g_str_has_suffix (group, ".*");

  for (guint i = 0; list != NULL && i < list->len; i++)
    {
      const KsKeyDesc *d = g_ptr_array_index (list, i);
      g_autofree char *name = ks_config_env_name (template ? "" : group, d->key);
      /* a template's keys end the variable: "KS__DIM" -> "_DIM" */
      if (template ? g_str_has_suffix (var, name + strlen ("KS_")) : strcmp (var, name) == 0)
        return TRUE;
    }
  return FALSE;
}

/* A KS_<GROUP>_<KEY> variable whose group is known and whose key is not is a typo
 * (KS_TRAIN_STPES), refused as the same typo in a file or --set is; other KS_* names
 * are not ours to judge. */
gboolean
ks_config_check_environment (const KsConfig *config, GError **error)
{
  g_auto (GStrv) vars = g_listenv ();
  g_auto (GStrv) groups = ks_config_groups (config);

  for (int v = 0; vars[v] != NULL; v++)
    {
      const char *var = vars[v], *best = NULL;
      gsize best_len = 0;
      gboolean known = FALSE;

      if (!g_str_has_prefix (var, "KS_") || g_strv_contains (reserved_env, var))
        continue;
      for (int g = 0; groups[g] != NULL && !known; g++)
        {
          g_autofree char *prefix = ks_config_env_name (groups[g], "");
          if (g_str_has_suffix (groups[g], ".*")) /* "KS_TABLE_*_" -> "KS_TABLE_" */
            prefix[strlen (prefix) - 2] = '\0';
          if (!g_str_has_prefix (var, prefix))
            continue;
          known = env_names_key (config, groups[g], var);
          if (strlen (prefix) > best_len)
            best = groups[g], best_len = strlen (prefix);
        }
      if (known || best == NULL || var[best_len] == '\0')
        continue;
      g_autofree char *shown = ks_printable (var, MESSAGE_TEXT);
      g_auto (GStrv) keys = key_names (config, best);
      g_autofree char *known_keys = g_strjoinv (", ", keys);
      if (g_str_has_suffix (best, ".*"))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_UNKNOWN_KEY,
                       "environment variable %s: no key of [%s] ends it; write %.*s<NAME>_<KEY> "
                       "with KEY one of %s, or unset it", shown, best, (int) best_len, var,
                       known_keys);
          return FALSE;
        }
      g_autofree char *key = g_ascii_strdown (var + best_len, -1);
      g_autofree char *shown_key = ks_printable (key, MESSAGE_TEXT);
      const char *near = ks_suggest (key, (const char *const *) keys, g_strv_length (keys));
      g_autofree char *near_var = near != NULL ? ks_config_env_name (best, near) : NULL;
      g_autofree char *hint = near_var != NULL
                                  ? g_strdup_printf ("did you mean %s? (known: %s)", near_var,
                                                     known_keys)
                                  : g_strdup_printf ("known: %s", known_keys);
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_UNKNOWN_KEY,
                   "environment variable %s: unknown key '%s' in [%s]; %s; rename or unset it",
                   shown, shown_key, best, hint);
      return FALSE;
    }
  return TRUE;
}

