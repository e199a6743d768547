/* Configuration: GKeyFile INI files checked against a schema, with the environment and
 * command-line overrides. Values are kept per layer and resolved at lookup, so the
 * source of each effective value can be reported. */
#include "ks-private.h"

#include <string.h>

typedef struct {
  char *value;
  char *resolved; /* an input path found beside the config file (config-paths.c), or NULL */
  int line;
} FileValue;

typedef struct {
  char *group;
  int line; /* first line the group header appears on */
} FileGroup;

struct KsConfig {
  GHashTable *schema;     /* group -> GPtrArray of owned KsKeyDesc* in declaration order */
  GHashTable *file;       /* "group.key" -> FileValue* */
  GPtrArray *file_keys;   /* "group.key" in file order */
  GPtrArray *file_groups; /* FileGroup* in file order */
  GHashTable *cmdline;    /* "group.key" -> value */
  GPtrArray *cmdline_keys;
  char *path;
  GHashTable *warned; /* absent plugins' groups warned about: once, however often validated */
};

static void
file_value_free (gpointer p)
{
  FileValue *v = p;
  g_free (v->value);
  g_free (v->resolved);
  g_free (v);
}

static void
file_group_free (gpointer p)
{
  FileGroup *g = p;
  g_free (g->group);
  g_free (g);
}

static void
key_desc_free (gpointer p)
{
  KsKeyDesc *d = p;
  g_free ((char *) d->group);
  g_free (d);
}

static char *
full_key (const char *group, const char *key)
{
  return g_strconcat (group, ".", key, NULL);
}

KsConfig *
ks_config_new (void)
{
  KsConfig *config = g_new0 (KsConfig, 1);
  gsize n;
  const KsKeyDesc *core = ks_core_schema (&n);

  config->schema = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                          (GDestroyNotify) g_ptr_array_unref);
  config->file = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, file_value_free);
  config->file_keys = g_ptr_array_new ();
  config->file_groups = g_ptr_array_new_with_free_func (file_group_free);
  config->cmdline = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  config->cmdline_keys = g_ptr_array_new ();
  config->warned = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  for (gsize i = 0; i < n; i++)
    ks_config_add_schema (config, core[i].group, &core[i], 1);
  return config;
}

void
ks_config_free (KsConfig *config)
{
  if (config == NULL)
    return;
  g_hash_table_unref (config->schema);
  g_ptr_array_unref (config->file_keys); /* points into config->file's keys */
  g_hash_table_unref (config->file);
  g_ptr_array_unref (config->file_groups);
  g_ptr_array_unref (config->cmdline_keys);
  g_hash_table_unref (config->cmdline);
  g_hash_table_unref (config->warned);
  g_free (config->path);
  g_free (config);
}

/* A file's value of a KS_VALUE_PATH key looked for beside the file: when the file is
 * loaded for the keys known then, when the key is added for a schema that comes later
 * (a task's); never at lookup, which may run on several threads. */
static void
resolve_input_path (KsConfig *config, const char *group, const char *key)
{
  g_autofree char *name = full_key (group, key);
  FileValue *fv = config->path != NULL ? g_hash_table_lookup (config->file, name) : NULL;
  if (fv != NULL && fv->resolved == NULL)
    fv->resolved = ks_config_path_resolve (config->path, fv->value);
}

void
ks_config_add_schema (KsConfig *config, const char *group, const KsKeyDesc *keys, gsize n_keys)
{
  GPtrArray *list = g_hash_table_lookup (config->schema, group);

  if (list == NULL)
    {
      list = g_ptr_array_new_with_free_func (key_desc_free);
      g_hash_table_insert (config->schema, g_strdup (group), list);
    }
  for (gsize i = 0; i < n_keys; i++)
    {
      KsKeyDesc *copy = g_memdup2 (&keys[i], sizeof keys[i]);
      copy->group = g_strdup (group);
      g_ptr_array_add (list, copy);
      if (copy->type == KS_VALUE_PATH)
        resolve_input_path (config, group, copy->key);
    }
}

/* The schema of a templated group: "table.emb" takes "table.*"'s keys (NULL if none). */
static GPtrArray *
template_of (const KsConfig *config, const char *group)
{
  const char *dot = strchr (group, '.');
  if (dot == NULL || dot[1] == '\0')
    return NULL;
  g_autofree char *name = g_strdup_printf ("%.*s.*", (int) (dot - group), group);
  return g_hash_table_lookup (config->schema, name);
}

/* Gives a group written as PREFIX.NAME the keys of PREFIX.* (a [table.NAME] per table). */
static void
instantiate_template (KsConfig *config, const char *group)
{
  GPtrArray *tmpl;
  if (g_hash_table_contains (config->schema, group) || (tmpl = template_of (config, group)) == NULL)
    return;
  for (guint i = 0; i < tmpl->len; i++)
    ks_config_add_schema (config, group, g_ptr_array_index (tmpl, i), 1);
}

/* bytes of a value or line quoted in a message */
#define MESSAGE_TEXT 200

static const KsKeyDesc *
find_key (const KsConfig *config, const char *group, const char *key)
{
  GPtrArray *list = g_hash_table_lookup (config->schema, group);

  /* a templated group the config does not write: the template's defaults */
  if (list == NULL)
    list = template_of (config, group);

  for (guint i = 0; list != NULL && i < list->len; i++)
    {
      const KsKeyDesc *d = g_ptr_array_index (list, i);
      if (strcmp (d->key, key) == 0)
        return d;
    }
  return NULL;
}

const char *
ks_config_file (const KsConfig *config)
{
  return config->path;
}

/* ---- reading a file ---- */

/* GKeyFile reports neither line numbers nor duplicate keys, so a first pass over the
 * lines finds both and catches malformed lines with their number; GKeyFile then reads
 * the values (with its escapes). */
static gboolean
scan_lines (KsConfig *config, const char *path, const char *text, GHashTable *lines,
            GError **error)
{
  g_auto (GStrv) rows = g_strsplit (text, "\n", -1);
  g_autofree char *group = NULL;

  for (int i = 0; rows[i] != NULL; i++)
    {
      int line = i + 1;
      char *row = g_strstrip (rows[i]);
      char *eq;

      if (*row == '\0' || *row == '#')
        continue;
      if (*row == '[')
        {
          char *end = strchr (row, ']');
          if (end == NULL || end[1] != '\0' || end == row + 1)
            {
              g_autofree char *shown = ks_printable (row, MESSAGE_TEXT);
              g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_SYNTAX,
                           "%s:%d: malformed group header '%s': write it as [name]", path,
                           line, shown);
              return FALSE;
            }
          g_free (group);
          group = g_strndup (row + 1, end - row - 1);
          FileGroup *fg = g_new0 (FileGroup, 1);
          fg->group = g_strdup (group);
          fg->line = line;
          g_ptr_array_add (config->file_groups, fg);
          continue;
        }
      eq = strchr (row, '=');
      if (eq == NULL || eq == row)
        {
          g_autofree char *shown = ks_printable (row, MESSAGE_TEXT);
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_SYNTAX,
                       "%s:%d: '%s' is not a [group], a key = value line or a # comment",
                       path, line, shown);
          return FALSE;
        }
      if (group == NULL)
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_SYNTAX,
                       "%s:%d: key outside any group: put a [group] line above it", path,
                       line);
          return FALSE;
        }
      *eq = '\0';
      g_autofree char *name = full_key (group, g_strstrip (row));
      gpointer previous = g_hash_table_lookup (lines, name);
      if (previous != NULL)
        {
          g_autofree char *shown = ks_printable (g_strstrip (row), MESSAGE_TEXT);
          g_autofree char *shown_group = ks_printable (group, MESSAGE_TEXT);
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_DUPLICATE,
                       "%s:%d: [%s] %s is set again (first set on line %d): keep one", path,
                       line, shown_group, shown, GPOINTER_TO_INT (previous));
          return FALSE;
        }
      g_hash_table_insert (lines, g_steal_pointer (&name), GINT_TO_POINTER (line));
    }
  return TRUE;
}

static gboolean
read_file (KsConfig *config, const char *path, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr (GError) local = NULL;
  g_autoptr (GKeyFile) kf = g_key_file_new ();
  g_autoptr (GHashTable) lines = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_auto (GStrv) groups = NULL;

  gsize len;
  const char *nul;
  if (!g_file_get_contents (path, &text, &len, &local))
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO, "%s: give the path of a "
                   "job's .ini file (as examples/default.ini)", local->message);
      return FALSE;
    }
  /* a NUL would end the text early: what follows it would never be read or checked */
  if ((nul = memchr (text, '\0', len)) != NULL)
    {
      int line = 1;
      for (const char *p = text; p < nul; p++)
        line += *p == '\n';
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_SYNTAX,
                   "%s:%d: a NUL byte: a config file is text (is this the right file?)", path,
                   line);
      return FALSE;
    }
  g_autofree char *clean = ks_config_strip_comments (text);
  if (!scan_lines (config, path, clean, lines, error))
    return FALSE;
  if (!g_key_file_load_from_data (kf, clean, -1, G_KEY_FILE_NONE, &local))
    {
      g_autofree char *shown = ks_printable (local->message, MESSAGE_TEXT);
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_SYNTAX, "%s: %s", path, shown);
      return FALSE;
    }
  groups = g_key_file_get_groups (kf, NULL);
  for (int g = 0; groups[g] != NULL; g++)
    {
      g_auto (GStrv) keys = g_key_file_get_keys (kf, groups[g], NULL, NULL);
      for (int k = 0; keys != NULL && keys[k] != NULL; k++)
        {
          FileValue *v = g_new0 (FileValue, 1);
          char *name = full_key (groups[g], keys[k]);
          v->value = g_key_file_get_string (kf, groups[g], keys[k], &local);
          /* for a bad escape GKeyFile returns a value and sets the error too */
          if (local != NULL)
            {
              g_autofree char *shown = ks_printable (local->message, MESSAGE_TEXT);
              g_autofree char *shown_group = ks_printable (groups[g], MESSAGE_TEXT);
              g_autofree char *shown_key = ks_printable (keys[k], MESSAGE_TEXT);
              g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_SYNTAX,
                           "%s:%d: [%s] %s: %s", path,
                           GPOINTER_TO_INT (g_hash_table_lookup (lines, name)), shown_group,
                           shown_key, shown);
              g_free (name);
              g_free (v->value);
              g_free (v);
              return FALSE;
            }
          g_strchomp (v->value); /* GKeyFile keeps trailing blanks; "mode = x  " means x */
          v->line = GPOINTER_TO_INT (g_hash_table_lookup (lines, name));
          g_hash_table_insert (config->file, name, v);
          g_ptr_array_add (config->file_keys, name);
        }
    }
  return TRUE;
}

gboolean
ks_config_load_file (KsConfig *config, const char *path, GError **error)
{
  g_return_val_if_fail (config->path == NULL, FALSE);
  if (!read_file (config, path, error))
    {
      /* nothing of a file that failed stays behind */
      g_ptr_array_set_size (config->file_keys, 0);
      g_hash_table_remove_all (config->file);
      g_ptr_array_set_size (config->file_groups, 0);
      return FALSE;
    }
  config->path = g_strdup (path);
  for (guint i = 0; i < config->file_keys->len; i++)
    {
      const char *name = g_ptr_array_index (config->file_keys, i);
      g_autofree char *group = g_strndup (name, strrchr (name, '.') - name);
      const KsKeyDesc *d = find_key (config, group, strrchr (name, '.') + 1);
      if (d != NULL && d->type == KS_VALUE_PATH)
        resolve_input_path (config, group, d->key);
    }
  return TRUE;
}

gboolean
ks_config_set_override (KsConfig *config, const char *assignment, GError **error)
{
  const char *eq = strchr (assignment, '=');
  const char *dot = strchr (assignment, '.');

  if (eq == NULL || dot == NULL || dot > eq || dot == assignment || dot + 1 == eq)
    {
      g_autofree char *shown = ks_printable (assignment, MESSAGE_TEXT);
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_USAGE,
                   "--set '%s': write it as group.key=value, e.g. --set comm.timeout=60",
                   shown);
      return FALSE;
    }
  char *name = g_strndup (assignment, eq - assignment);
  if (!g_hash_table_contains (config->cmdline, name))
    g_ptr_array_add (config->cmdline_keys, name);
  g_hash_table_insert (config->cmdline, name, g_strdup (eq + 1));
  return TRUE;
}

/* ---- values ---- */

char *
ks_config_env_name (const char *group, const char *key)
{
  char *name = g_strdup_printf ("KS_%s_%s", group, key);
  for (char *p = name; *p != '\0'; p++)
    *p = (*p == '-' || *p == '.') ? '_' : g_ascii_toupper (*p);
  return name;
}

static gboolean
parse_bool (const char *value, gboolean *out)
{
  static const char *const yes[] = { "true", "yes", "on", "1" };
  static const char *const no[] = { "false", "no", "off", "0" };
  for (guint i = 0; i < G_N_ELEMENTS (yes); i++)
    {
      if (g_ascii_strcasecmp (value, yes[i]) == 0)
        return *out = TRUE, TRUE;
      if (g_ascii_strcasecmp (value, no[i]) == 0)
        return *out = FALSE, TRUE;
    }
  return FALSE;
}

static gboolean
parse_double (const char *value, double *out)
{
  char *end = NULL;
  if (*value == '\0')
    return FALSE;
  *out = g_ascii_strtod (value, &end);
  return *end == '\0';
}

static char *
range_text (const KsKeyDesc *d)
{
  if (d->min > d->max)
    return g_strdup ("");
  if (d->type == KS_VALUE_INT)
    return g_strdup_printf (" in [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]", (gint64) d->min,
                            (gint64) d->max);
  return g_strdup_printf (" in [%g, %g]", d->min, d->max);
}

/* A list's empty item ("64,,64", "64, 64,") was once dropped without a word, and the
 * layer meant there with it; a list with no item at all is empty, not wrong. */
static gboolean
check_list (const char *value, char **expected)
{
  g_auto (GStrv) items = g_strsplit (value, ",", -1);
  g_autoptr (GPtrArray) kept = g_ptr_array_new ();
  int empty = -1;

  for (int i = 0; items[i] != NULL; i++)
    {
      char *item = g_strstrip (items[i]);
      if (*item != '\0')
        g_ptr_array_add (kept, item);
      else if (empty < 0)
        empty = i;
    }
  if (empty < 0 || items[1] == NULL)
    return TRUE;
  g_ptr_array_add (kept, NULL);
  g_autofree char *joined = g_strjoinv (",", (char **) kept->pdata);
  g_autofree char *fixed = kept->len > 1 ? g_strdup_printf ("write '%s'", joined)
                                         : g_strdup ("leave the value empty for none");
  *expected = g_strdup_printf ("a comma-separated list with no empty item, but item %d is "
                               "empty: %s, or the missing item in its place",
                               empty + 1, fixed);
  return FALSE;
}

gboolean
ks_config_check_value (const KsKeyDesc *d, const char *value, char **expected)
{
  gboolean ok = TRUE;
  double number = 0;

  switch (d->type)
    {
    case KS_VALUE_STRING:
    case KS_VALUE_PATH:
      return TRUE;
    case KS_VALUE_LIST:
      return check_list (value, expected);
    case KS_VALUE_BOOL:
      {
        gboolean b;
        if (parse_bool (value, &b))
          return TRUE;
        *expected = g_strdup ("a boolean (true/false, yes/no, on/off, 1/0)");
        return FALSE;
      }
    case KS_VALUE_CHOICE:
      {
        g_auto (GStrv) words = g_strsplit (d->choices, "|", -1);
        if (g_strv_contains ((const char *const *) words, value))
          return TRUE;
        g_autofree char *list = g_strjoinv (", ", words);
        *expected = g_strdup_printf ("one of %s", list);
        return FALSE;
      }
    case KS_VALUE_INT:
      {
        gint64 i;
        ok = g_ascii_string_to_signed (value, 10, G_MININT64, G_MAXINT64, &i, NULL);
        number = (double) i;
        break;
      }
    case KS_VALUE_DOUBLE:
      ok = parse_double (value, &number);
      break;
    }
  if (ok && (d->min > d->max || (number >= d->min && number <= d->max)))
    return TRUE;
  g_autofree char *range = range_text (d);
  *expected = g_strdup_printf ("%s%s", d->type == KS_VALUE_INT ? "an integer" : "a number",
                               range);
  return FALSE;
}

/* The effective value of a schema key and where it came from. */
static const char *
resolve (const KsConfig *config, const char *group, const KsKeyDesc *d, KsSource *source,
         int *line)
{
  /* `group`, not d->group: a templated group's keys are the template's */
  g_autofree char *name = full_key (group, d->key);
  g_autofree char *env = ks_config_env_name (group, d->key);
  const char *value;
  FileValue *fv;

  *line = 0;
  if ((value = g_hash_table_lookup (config->cmdline, name)) != NULL)
    return *source = KS_SOURCE_CMDLINE, value;
  if ((value = g_getenv (env)) != NULL)
    return *source = KS_SOURCE_ENV, value;
  if ((fv = g_hash_table_lookup (config->file, name)) != NULL)
    {
      *line = fv->line;
      return *source = KS_SOURCE_FILE, fv->resolved != NULL ? fv->resolved : fv->value;
    }
  *source = KS_SOURCE_DEFAULT;
  return d->default_value;
}

static char *
describe_source (const KsConfig *config, const char *group, const KsKeyDesc *d, KsSource source,
                 int line)
{
  switch (source)
    {
    case KS_SOURCE_FILE:
      return g_strdup_printf ("%s:%d", config->path, line);
    case KS_SOURCE_ENV:
      {
        g_autofree char *env = ks_config_env_name (group, d->key);
        return g_strdup_printf ("env %s", env);
      }
    case KS_SOURCE_CMDLINE:
      return g_strdup ("--set");
    case KS_SOURCE_DEFAULT:
      break;
    }
  return g_strdup ("default");
}

gboolean
ks_config_lookup (const KsConfig *config, const char *group, const char *key,
                  const char **value, KsSource *source, char **where)
{
  const KsKeyDesc *d = find_key (config, group, key);
  KsSource src;
  int line;

  if (d == NULL)
    return FALSE;
  const char *v = resolve (config, group, d, &src, &line);
  if (value != NULL)
    *value = v;
  if (source != NULL)
    *source = src;
  if (where != NULL)
    *where = describe_source (config, group, d, src, line);
  return TRUE;
}

const char *
ks_config_get_string (const KsConfig *config, const char *group, const char *key)
{
  const char *value = NULL;
  if (!ks_config_lookup (config, group, key, &value, NULL, NULL))
    g_critical ("ks_config: [%s] %s is not in the schema", group, key);
  return value;
}

/* A getter falls back to the default when the effective value does not parse; callers
 * are expected to have run ks_config_validate(), which reports that value. */
static const char *
checked_value (const KsConfig *config, const char *group, const char *key)
{
  const KsKeyDesc *d = find_key (config, group, key);
  g_autofree char *expected = NULL;
  KsSource src;
  int line;
  const char *value;

  if (d == NULL)
    {
      g_critical ("ks_config: [%s] %s is not in the schema", group, key);
      return NULL;
    }
  value = resolve (config, group, d, &src, &line);
  if (value != NULL && !ks_config_check_value (d, value, &expected))
    return d->default_value;
  return value;
}

gint64
ks_config_get_int (const KsConfig *config, const char *group, const char *key)
{
  const char *value = checked_value (config, group, key);
  return value != NULL ? g_ascii_strtoll (value, NULL, 10) : 0;
}

double
ks_config_get_double (const KsConfig *config, const char *group, const char *key)
{
  const char *value = checked_value (config, group, key);
  return value != NULL ? g_ascii_strtod (value, NULL) : 0.0;
}

gboolean
ks_config_get_bool (const KsConfig *config, const char *group, const char *key)
{
  const char *value = checked_value (config, group, key);
  gboolean b = FALSE;
  return value != NULL && parse_bool (value, &b) && b;
}

char **
ks_config_get_list (const KsConfig *config, const char *group, const char *key)
{
  const char *value = checked_value (config, group, key);
  g_auto (GStrv) items = g_strsplit (value != NULL ? value : "", ",", -1);
  GPtrArray *out = g_ptr_array_new ();

  for (int i = 0; items[i] != NULL; i++)
    {
      char *item = g_strstrip (items[i]);
      if (*item != '\0')
        g_ptr_array_add (out, g_strdup (item));
    }
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (out, FALSE);
}

char **
ks_config_groups (const KsConfig *config)
{
  GPtrArray *out = g_ptr_array_new ();
  GHashTableIter it;
  gpointer group;

  g_hash_table_iter_init (&it, config->schema);
  while (g_hash_table_iter_next (&it, &group, NULL))
    g_ptr_array_add (out, g_strdup (group));
  g_ptr_array_sort (out, ks_strcmp_indirect);
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (out, FALSE);
}

GPtrArray *
ks_config_group_keys (const KsConfig *config, const char *group)
{
  GPtrArray *list = g_hash_table_lookup (config->schema, group);
  GPtrArray *out = g_ptr_array_new ();
  for (guint i = 0; list != NULL && i < list->len; i++)
    g_ptr_array_add (out, g_ptr_array_index (list, i));
  return out;
}

/* ---- validation ---- */

static char *
did_you_mean (const char *word, char **candidates, const char *open, const char *close)
{
  const char *near = ks_suggest (word, (const char *const *) candidates,
                                 g_strv_length (candidates));
  g_autofree char *known = g_strjoinv (", ", candidates);
  if (near != NULL)
    return g_strdup_printf ("did you mean %s%s%s? (known: %s)", open, near, close, known);
  return g_strdup_printf ("known: %s", known);
}

static char **
key_names (const KsConfig *config, const char *group)
{
  GPtrArray *list = g_hash_table_lookup (config->schema, group);
  GPtrArray *out = g_ptr_array_new ();
  for (guint i = 0; list != NULL && i < list->len; i++)
    g_ptr_array_add (out, g_strdup (((KsKeyDesc *) g_ptr_array_index (list, i))->key));
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (out, FALSE);
}

/* Checks that `group` and `key` exist; `where` says where they were written. */
static gboolean
check_known (KsConfig *config, const char *group, const char *key, const char *where,
             GError **error)
{
  if (strchr (group, '*') != NULL)
    {
      g_autofree char *shown = ks_printable (group, MESSAGE_TEXT);
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_UNKNOWN_GROUP,
                   "%s: [%s] is the template of a group per name: write [%.*sNAME]", where,
                   shown, (int) MIN (strchr (group, '*') - group, MESSAGE_TEXT), group);
      return FALSE;
    }
  if (!g_hash_table_contains (config->schema, group))
    {
      g_auto (GStrv) groups = ks_config_groups (config);
      g_autofree char *hint = did_you_mean (group, groups, "[", "]");
      g_autofree char *shown = ks_printable (group, MESSAGE_TEXT);
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_UNKNOWN_GROUP,
                   "%s: unknown group [%s]; %s", where, shown, hint);
      return FALSE;
    }
  if (key != NULL && find_key (config, group, key) == NULL)
    {
      g_auto (GStrv) keys = key_names (config, group);
      g_autofree char *hint = did_you_mean (key, keys, "'", "'");
      g_autofree char *shown = ks_printable (key, MESSAGE_TEXT);
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_UNKNOWN_KEY,
                   "%s: unknown key '%s' in [%s]; %s", where, shown, group, hint);
      return FALSE;
    }
  return TRUE;
}

/* A group of a first-party plugin that is not loaded here (a [cuda] group on a CPU-only
 * build) is skipped with a warning, so one config serves several machines. */
static gboolean
is_absent_plugin_group (KsConfig *config, const char *group)
{
  return !g_hash_table_contains (config->schema, group) && ks_is_first_party_plugin (group);
}

gboolean
ks_config_validate (KsConfig *config, GError **error)
{
  for (guint i = 0; i < config->file_groups->len; i++)
    instantiate_template (config, ((FileGroup *) g_ptr_array_index (config->file_groups, i))->group);
  for (guint i = 0; i < config->cmdline_keys->len; i++)
    {
      const char *name = g_ptr_array_index (config->cmdline_keys, i);
      g_autofree char *group = g_strndup (name, strrchr (name, '.') - name);
      instantiate_template (config, group);
    }
  for (guint i = 0; i < config->file_groups->len; i++)
    {
      FileGroup *fg = g_ptr_array_index (config->file_groups, i);
      g_autofree char *where = g_strdup_printf ("%s:%d", config->path, fg->line);
      if (is_absent_plugin_group (config, fg->group))
        {
          if (!g_hash_table_add (config->warned, g_strdup (fg->group)))
            continue;
          g_warning ("%s: group [%s] configures plugin '%s', which is not loaded here; "
                     "its settings are ignored (see `ksdist plugins`)",
                     where, fg->group, fg->group);
          continue;
        }
      if (!check_known (config, fg->group, NULL, where, error))
        return FALSE;
    }
  for (guint i = 0; i < config->file_keys->len; i++)
    {
      const char *name = g_ptr_array_index (config->file_keys, i);
      FileValue *fv = g_hash_table_lookup (config->file, name);
      g_autofree char *group = g_strndup (name, strrchr (name, '.') - name);
      g_autofree char *where = g_strdup_printf ("%s:%d", config->path, fv->line);
      if (!is_absent_plugin_group (config, group)
          && !check_known (config, group, strrchr (name, '.') + 1, where, error))
        return FALSE;
    }
  for (guint i = 0; i < config->cmdline_keys->len; i++)
    {
      const char *name = g_ptr_array_index (config->cmdline_keys, i);
      g_autofree char *group = g_strndup (name, strrchr (name, '.') - name);
      g_autofree char *shown = ks_printable (name, MESSAGE_TEXT);
      g_autofree char *where = g_strdup_printf ("--set %s", shown);
      if (!check_known (config, group, strrchr (name, '.') + 1, where, error))
        return FALSE;
    }
  if (!ks_config_check_environment (config, error))
    return FALSE;

  /* Every effective value, in a stable order: groups sorted, keys as declared. */
  g_auto (GStrv) groups = ks_config_groups (config);
  for (int g = 0; groups[g] != NULL; g++)
    {
      GPtrArray *list = g_hash_table_lookup (config->schema, groups[g]);
      for (guint i = 0; i < list->len; i++)
        {
          const KsKeyDesc *d = g_ptr_array_index (list, i);
          g_autofree char *expected = NULL;
          KsSource src;
          int line;
          const char *value = resolve (config, groups[g], d, &src, &line);
          if (value == NULL || ks_config_check_value (d, value, &expected))
            continue;
          g_autofree char *where = describe_source (config, groups[g], d, src, line);
          g_autofree char *shown = ks_printable (value, MESSAGE_TEXT);
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "%s: [%s] %s = '%s': expected %s", where, d->group, d->key, shown,
                       expected);
          return FALSE;
        }
    }
  return TRUE;
}

gboolean
ks_config_check_input_paths (const KsConfig *config, GError **error)
{
  g_auto (GStrv) groups = ks_config_groups (config);
  for (int g = 0; groups[g] != NULL; g++)
    {
      GPtrArray *list = g_hash_table_lookup (config->schema, groups[g]);
      for (guint i = 0; list != NULL && i < list->len; i++)
        {
          const KsKeyDesc *d = g_ptr_array_index (list, i);
          KsSource src;
          int line;
          const char *value = resolve (config, groups[g], d, &src, &line);
          if (value == NULL || src == KS_SOURCE_DEFAULT || d->type != KS_VALUE_PATH)
            continue;
          g_autofree char *name = full_key (groups[g], d->key);
          FileValue *fv = g_hash_table_lookup (config->file, name);
          g_autofree char *where = describe_source (config, groups[g], d, src, line);
          if (!ks_config_path_check (groups[g], d->key, src == KS_SOURCE_FILE ? fv->value : value,
                                     config->path, src == KS_SOURCE_FILE, where, error))
            return FALSE;
        }
    }
  return TRUE;
}

gboolean
ks_config_is_set (const KsConfig *config, const char *group, const char *key)
{
  const char *value;
  KsSource source = KS_SOURCE_DEFAULT;
  return ks_config_lookup (config, group, key, &value, &source, NULL)
         && source != KS_SOURCE_DEFAULT;
}

gboolean
ks_config_check_used (const KsConfig *config, const char *group, const char *const *used,
                      const char *reader, GError **error)
{
  g_autoptr (GPtrArray) keys = ks_config_group_keys (config, group);

  for (guint i = 0; keys != NULL && i < keys->len; i++)
    {
      const KsKeyDesc *d = g_ptr_array_index (keys, i);
      g_autofree char *name = g_strdup_printf ("%s.%s", group, d->key);
      if (!ks_config_is_set (config, group, d->key) || g_strv_contains (used, name))
        continue;
      g_autofree char *list = used[0] != NULL ? g_strjoinv (", ", (char **) used)
                                              : g_strdup_printf ("no key of [%s]", group);
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[%s] %s is set, but %s does not use it (it reads %s); remove it", group,
                   d->key, reader, list);
      return FALSE;
    }
  return TRUE;
}
