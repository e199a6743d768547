/* ksdist — configuration: INI files checked against a schema, with overrides.
 *
 * For programs that load a job's configuration, and plugin authors who declare settings
 * (KsKeyDesc).
 *
 * A value is resolved as  default < file < environment KS_<GROUP>_<KEY> < --set group.key=value.
 * The core declares its own groups; each loaded plugin adds a group named after
 * itself with the settings it declares, so plugin settings resolve the same way. */
#ifndef KSDIST_CONFIG_H
#define KSDIST_CONFIG_H

#include <ksdist/types.h>

G_BEGIN_DECLS

typedef enum {
  KS_VALUE_STRING = 0,
  KS_VALUE_INT = 1,    /* 64-bit integer, range [min, max] when min <= max */
  KS_VALUE_DOUBLE = 2, /* range [min, max] when min <= max */
  KS_VALUE_BOOL = 3,   /* true/false, yes/no, on/off, 1/0 */
  KS_VALUE_CHOICE = 4, /* one of the '|'-separated words in `choices` */
  KS_VALUE_LIST = 5,   /* comma-separated strings */
  /* A file or folder the run reads (a glob allowed): a relative path written in a config
   * file is looked for beside the file first, then in the current directory; one that
   * is not there is refused before the run (ks_config_check_input_paths). What declares
   * the key says it is one: the core, the tasks library, a program's task. */
  KS_VALUE_PATH = 6,
} KsValueType;

/* One known key. Plugins declare their settings with the same struct (group ignored). */
typedef struct {
  const char *group;
  const char *key;
  KsValueType type;
  const char *default_value; /* as it would be written in the file; NULL = unset */
  double min, max;           /* range for INT and DOUBLE; min > max means none */
  const char *choices;       /* for CHOICE: "a|b|c" */
  const char *help;
} KsKeyDesc;

typedef enum {
  KS_SOURCE_DEFAULT = 0,
  KS_SOURCE_FILE = 1,
  KS_SOURCE_ENV = 2,
  KS_SOURCE_CMDLINE = 3,
} KsSource;

typedef struct KsConfig KsConfig;

/* A new configuration that knows the core schema and holds only defaults. */
KsConfig *ks_config_new (void);
void ks_config_free (KsConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsConfig, ks_config_free)

/* Reads an INI file. Syntax errors and duplicate keys fail here, naming file and line;
 * unknown groups and keys are found by ks_config_validate() once plugins have added theirs. */
gboolean ks_config_load_file (KsConfig *config, const char *path, GError **error);

/* Parses one command-line override, "group.key=value". */
gboolean ks_config_set_override (KsConfig *config, const char *assignment, GError **error);

/* Adds known keys under `group` (a plugin's settings); `keys[i].group` is ignored. */
void ks_config_add_schema (KsConfig *config, const char *group, const KsKeyDesc *keys, gsize n_keys);

/* Checks every group and key given (file and --set) against the schema, and every
 * effective value against its type and range. Reports the first error; on success
 * logs a warning for groups that belong to known plugins not loaded here (once per
 * configuration: validating it again after more keys were added repeats none). */
gboolean ks_config_validate (KsConfig *config, GError **error);

/* Every file a run reads that a setting of type KS_VALUE_PATH names ([model] init_from,
 * the tasks library's [data] path, test_path, labels, test_labels, a task's own): a
 * relative one written in the file was looked for beside the file first
 * (ks_config_get_string gives what was found), then in the current directory; from --set
 * or the environment, in the current directory. One that is not there is
 * KS_CONFIG_ERROR_IO naming the setting, where it was set and that rule. The trainer's
 * plan runs it (train, launch, config). */
gboolean ks_config_check_input_paths (const KsConfig *config, GError **error);

/* The path of the file loaded, or NULL. */
const char *ks_config_file (const KsConfig *config);

/* Effective values. Getters of a key not in the schema are programmer errors. */
const char *ks_config_get_string (const KsConfig *config, const char *group, const char *key);
gint64 ks_config_get_int (const KsConfig *config, const char *group, const char *key);
double ks_config_get_double (const KsConfig *config, const char *group, const char *key);
gboolean ks_config_get_bool (const KsConfig *config, const char *group, const char *key);
/* A NULL-terminated copy of a LIST value (empty items removed); free with g_strfreev. */
char **ks_config_get_list (const KsConfig *config, const char *group, const char *key);

/* The effective value and where it came from; `where` is "default", "FILE:LINE", "env
 * KS_X_Y" or "--set"; any of the three may be NULL. Returns FALSE for a key not in the
 * schema. */
gboolean ks_config_lookup (const KsConfig *config, const char *group, const char *key,
                           const char **value, KsSource *source, char **where);
/* Whether group.key is set by the file, the environment or --set (not its default). */
gboolean ks_config_is_set (const KsConfig *config, const char *group, const char *key);
/* A KS_CONFIG_ERROR for the first key of `group` that is set but not in `used`
 * ("group.key" names, NULL-terminated; others' groups may be there too): "[group] key is
 * set, but `reader` does not use it (it reads ...); remove it". TRUE when none is. */
gboolean ks_config_check_used (const KsConfig *config, const char *group,
                               const char *const *used, const char *reader, GError **error);

/* The known groups (sorted) and the schema of one group, in declaration order. */
char **ks_config_groups (const KsConfig *config);
GPtrArray *ks_config_group_keys (const KsConfig *config, const char *group); /* of const KsKeyDesc* */

/* "KS_<GROUP>_<KEY>", upper case, '-' and '.' as '_'. */
char *ks_config_env_name (const char *group, const char *key);

/* Checks `value` against `desc`; the message says what was expected. */
gboolean ks_config_check_value (const KsKeyDesc *desc, const char *value, char **expected);

G_END_DECLS

#endif
