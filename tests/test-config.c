/* Configuration: every error path names file, line, group and key; overrides resolve as
 * default < file < environment < --set. */
#include "testutil.h"

#include <ksdist/tasks.h>
#include <glib/gstdio.h>
#include <string.h>

typedef struct {
  char *dir;
  char *path; /* dir/test.ini */
} Fixture;

static void
setup (Fixture *f, gconstpointer data)
{
  ks_test_clear_env ();
  g_unsetenv ("KS_COMM_TIMEOUT");
  g_unsetenv ("KS_JOB_MODE");
  f->dir = ks_test_tmpdir ();
  f->path = g_build_filename (f->dir, "test.ini", NULL);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  ks_test_rmtree (f->dir);
  g_free (f->dir);
  g_free (f->path);
}

/* Loads and validates `text`; asserts the error code and the message, in which "@"
 * stands for the file's path. */
static void
assert_fails (Fixture *f, const char *text, int code, const char *message)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsConfig) config = ks_test_config (text, f->dir, &error);
  g_auto (GStrv) parts = g_strsplit (message, "@", -1);
  g_autofree char *want = g_strjoinv (f->path, parts);

  if (config != NULL)
    g_assert_false (ks_config_validate (config, &error));
  g_assert_error (error, KS_CONFIG_ERROR, code);
  g_assert_cmpstr (error->message, ==, want);
}

/* ks_test_config with the tasks library's keys ([data], [model], ...), as ksdist's
 * commands load a file. */
static KsConfig *
tasks_config (const char *text, const char *dir, GError **error)
{
  KsConfig *config = ks_test_config (text, dir, error);
  if (config != NULL)
    ks_tasks_add_schema (config);
  return config;
}

static void
test_valid_file (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsConfig) config = ks_test_config ("# a comment\n\n[comm]\ntimeout = 12.5\n"
                                                "[job]\n  mode = transpiler  \n"
                                                "[plugins]\nload = ^mpi, cuda\n",
                                                f->dir, &error);
  g_assert_no_error (error);
  g_assert_true (ks_config_validate (config, &error));
  g_assert_cmpfloat (ks_config_get_double (config, "comm", "timeout"), ==, 12.5);
  g_assert_cmpstr (ks_config_get_string (config, "job", "mode"), ==, "transpiler");
  g_assert_cmpstr (ks_config_get_string (config, "log", "level"), ==, "info"); /* default */
  g_auto (GStrv) load = ks_config_get_list (config, "plugins", "load");
  g_assert_cmpuint (g_strv_length (load), ==, 2);
  g_assert_cmpstr (load[0], ==, "^mpi");
  g_assert_cmpstr (load[1], ==, "cuda");
  g_assert_cmpstr (ks_config_file (config), ==, f->path);
}

/* A comment after a value or a group header is not part of the value (GKeyFile alone
 * keeps it: `task = csv   # x` would be 'csv   # x'); \# writes a literal #. */
static void
test_inline_comments (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsConfig) config = tasks_config ("[data]   # what is read\n"
                                                "task = csv          # a folder of ...\n"
                                                "label = a\\#b;c ; not this\n"
                                                "; a whole-line comment\n"
                                                "[comm]\ntimeout = 12\t;seconds\n"
                                                "store = file#1 #2\n",
                                                f->dir, &error);
  g_assert_no_error (error);
  g_assert_true (ks_config_validate (config, &error));
  g_assert_cmpstr (ks_config_get_string (config, "data", "task"), ==, "csv");
  g_assert_cmpstr (ks_config_get_string (config, "data", "label"), ==, "a#b;c");
  g_assert_cmpfloat (ks_config_get_double (config, "comm", "timeout"), ==, 12);
  g_assert_cmpstr (ks_config_get_string (config, "comm", "store"), ==, "file#1");
}

/* A file a setting names: beside the config file first, then in the current directory;
 * missing, one message naming the setting, where it was set and that rule. */
static void
test_input_paths (Fixture *f, gconstpointer data)
{
  g_autofree char *cwd = g_get_current_dir ();
  g_autofree char *elsewhere = ks_test_tmpdir ();
  g_autoptr (GError) error = NULL;

  g_free (ks_test_write (f->dir, "rows.csv", "a,b\n1,2\n"));
  g_free (ks_test_write (elsewhere, "only-here.csv", "a,b\n1,2\n"));
  g_assert_cmpint (g_chdir (elsewhere), ==, 0);
  g_autoptr (KsConfig) config = tasks_config ("[data]\ntask = csv\npath = rows.csv\n"
                                                "test_path = only-here.csv\n", f->dir, &error);
  g_assert_no_error (error);
  g_assert_true (ks_config_validate (config, &error));
  g_assert_true (ks_config_check_input_paths (config, &error));
  g_autofree char *beside = g_build_filename (f->dir, "rows.csv", NULL);
  g_assert_cmpstr (ks_config_get_string (config, "data", "path"), ==, beside);
  g_assert_cmpstr (ks_config_get_string (config, "data", "test_path"), ==, "only-here.csv");

  /* missing: in the file, and from --set (the current directory only) */
  g_autoptr (KsConfig) gone = tasks_config ("[data]\ntask = csv\npath = rows.csv\n"
                                              "test_path = gone.csv\n", f->dir, &error);
  g_assert_true (ks_config_validate (gone, &error));
  g_assert_false (ks_config_check_input_paths (gone, &error));
  g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO);
  g_autofree char *want = g_strdup_printf ("[data] test_path = gone.csv (in %s:4): not found "
                                           "(relative paths are taken from the config file's "
                                           "folder %s, then the current directory %s)",
                                           f->path, f->dir, elsewhere);
  g_assert_cmpstr (error->message, ==, want);
  g_clear_error (&error);
  g_assert_true (ks_config_set_override (config, "model.init_from=rows.csv", NULL));
  g_assert_true (ks_config_validate (config, &error));
  g_assert_false (ks_config_check_input_paths (config, &error));
  g_autofree char *want_set = g_strdup_printf ("[model] init_from = rows.csv (--set): not found "
                                               "(a relative path given by --set is taken from "
                                               "the current directory %s)", elsewhere);
  g_assert_cmpstr (error->message, ==, want_set);
  g_assert_cmpint (g_chdir (cwd), ==, 0);
  ks_test_rmtree (elsewhere);
}

static void
test_missing_file (Fixture *f, gconstpointer data)
{
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (GError) error = NULL;
  g_autofree char *missing = g_build_filename (f->dir, "absent.ini", NULL);

  g_assert_false (ks_config_load_file (config, missing, &error));
  g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO);
  g_assert_nonnull (strstr (error->message, missing));
  g_assert_nonnull (strstr (error->message, "No such file or directory"));
}

static void
test_syntax_errors (Fixture *f, gconstpointer data)
{
  assert_fails (f, "[comm]\ntimeout = 3\nthis line is wrong\n", KS_CONFIG_ERROR_SYNTAX,
                "@:3: 'this line is wrong' is not a [group], a key = value line or a # comment");
  assert_fails (f, "[comm\n", KS_CONFIG_ERROR_SYNTAX,
                "@:1: malformed group header '[comm': write it as [name]");
  assert_fails (f, "[]\n", KS_CONFIG_ERROR_SYNTAX,
                "@:1: malformed group header '[]': write it as [name]");
  assert_fails (f, "timeout = 3\n", KS_CONFIG_ERROR_SYNTAX,
                "@:1: key outside any group: put a [group] line above it");
  assert_fails (f, "[comm]\n= 3\n", KS_CONFIG_ERROR_SYNTAX,
                "@:2: '= 3' is not a [group], a key = value line or a # comment");
}

/* An error late in the file leaves nothing of it behind. */
static void
test_nothing_half_loaded (Fixture *f, gconstpointer data)
{
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (GError) error = NULL;
  g_autofree char *path = ks_test_write (f->dir, "bad.ini", "[comm]\ntimeout = 5\n\n[job]\n"
                                                            "mode = a\\qb\n");
  g_autofree char *want = g_strdup_printf ("%s:5: [job] mode: ", path);
  const char *value;
  KsSource source;

  g_assert_false (ks_config_load_file (config, path, &error));
  g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_SYNTAX);
  g_assert_true (g_str_has_prefix (error->message, want)); /* then GLib's words for "\q" */
  g_assert_null (ks_config_file (config));
  g_assert_true (ks_config_lookup (config, "comm", "timeout", &value, &source, NULL));
  g_assert_cmpstr (value, ==, "300");
  g_assert_cmpint (source, ==, KS_SOURCE_DEFAULT);
  g_assert_true (ks_config_validate (config, NULL));
}

static void
test_duplicate_key (Fixture *f, gconstpointer data)
{
  assert_fails (f, "[comm]\ntimeout = 3\n\n[job]\nmode = collective\n[comm]\ntimeout = 4\n",
                KS_CONFIG_ERROR_DUPLICATE,
                "@:7: [comm] timeout is set again (first set on line 2): keep one");
}

/* The core's groups alone ([model] for the trainer's init_from); the tasks library adds
 * its own, and the message is then the one ksdist's commands always gave. */
static void
test_unknown_group (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  assert_fails (f, "[job]\nmode = collective\n\n[comn]\ntimeout = 3\n",
                KS_CONFIG_ERROR_UNKNOWN_GROUP,
                "@:4: unknown group [comn]; did you mean [comm]? (known: amp, comm, compute, "
                "job, log, model, pipeline, plugins, strategy, table.*, trace, train)");
  assert_fails (f, "[zzzzzz]\n", KS_CONFIG_ERROR_UNKNOWN_GROUP,
                "@:1: unknown group [zzzzzz]; known: amp, comm, compute, job, log, model, "
                "pipeline, plugins, strategy, table.*, trace, train");
  assert_fails (f, "[data]\ntask = csv\n", KS_CONFIG_ERROR_UNKNOWN_GROUP,
                "@:1: unknown group [data]; known: amp, comm, compute, job, log, model, "
                "pipeline, plugins, strategy, table.*, trace, train");

  g_autoptr (KsConfig) config = tasks_config ("[comn]\n", f->dir, &error);
  g_assert_false (ks_config_validate (config, &error));
  g_autofree char *want = g_strdup_printf ("%s:1: unknown group [comn]; did you mean [comm]? "
                                           "(known: amp, comm, compute, data, job, layer.*, "
                                           "log, meta, model, pipeline, plugins, strategy, "
                                           "table.*, trace, train)", f->path);
  g_assert_cmpstr (error->message, ==, want);
}

/* Hostile bytes: a NUL ends nothing silently (the line is named), and values quoted in
 * messages cannot drive a terminal or flood it. */
static void
test_hostile_bytes (Fixture *f, gconstpointer data)
{
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (GError) error = NULL;
  static const char nul_text[] = "[comm]\ntimeout = 3\n\0[nonsense]\nkey = 1\n";

  g_assert_true (g_file_set_contents (f->path, nul_text, sizeof nul_text - 1, NULL));
  g_assert_false (ks_config_load_file (config, f->path, &error));
  g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_SYNTAX);
  g_autofree char *want = g_strdup_printf ("%s:3: a NUL byte: a config file is text (is this "
                                           "the right file?)", f->path);
  g_assert_cmpstr (error->message, ==, want);

  assert_fails (f, "[comm]\ntimeout = \x1b]0;title\x07\n", KS_CONFIG_ERROR_BAD_VALUE,
                "@:2: [comm] timeout = '\\x1b]0;title\\x07': expected a number in [0.001, 1e+06]");
  assert_fails (f, "[comm]\ntimeout = \xc2\x9b" "31m\n", KS_CONFIG_ERROR_BAD_VALUE,
                "@:2: [comm] timeout = '\\x9b31m': expected a number in [0.001, 1e+06]");
  g_autofree char *long_value = g_strnfill (100000, '7');
  g_autofree char *long_text = g_strdup_printf ("[comm]\ntimeout = %sx\n", long_value);
  g_autoptr (GError) e2 = NULL;
  g_autoptr (KsConfig) c2 = ks_test_config (long_text, f->dir, &e2);
  g_assert_nonnull (c2);
  g_assert_false (ks_config_validate (c2, &e2));
  g_assert_cmpuint (strlen (e2->message), <, 400);
  g_assert_nonnull (strstr (e2->message, "... (100001 bytes)"));
}

/* [table.NAME] takes the keys of the template group table.*; a group the file does not
 * write reads the template's defaults. */
static void
test_templated_group (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsConfig) config = ks_test_config ("[table.emb]\nlearning_rate = 0.2\n", f->dir,
                                                &error);
  g_assert_no_error (error);
  g_assert_true (ks_config_validate (config, &error));
  g_assert_cmpfloat (ks_config_get_double (config, "table.emb", "learning_rate"), ==, 0.2);
  g_assert_cmpfloat (ks_config_get_double (config, "table.other", "learning_rate"), ==, 0.05);
  g_assert_true (ks_config_set_override (config, "table.emb.embedx_dim=4", &error));
  g_assert_true (ks_config_validate (config, &error));
  g_assert_cmpint (ks_config_get_int (config, "table.emb", "embedx_dim"), ==, 4);
  assert_fails (f, "[table.emb]\nlearnin_rate = 0.1\n", KS_CONFIG_ERROR_UNKNOWN_KEY,
                "@:2: unknown key 'learnin_rate' in [table.emb]; did you mean 'learning_rate'? "
                "(known: embedx_dim, rule, learning_rate, initial_g2sum, initial_range, "
                "min_bound, max_bound, beta1, beta2, epsilon, embedx_threshold, nonclk_coeff, "
                "click_coeff, base_threshold, delta_threshold, delta_keep_days, "
                "show_click_decay_rate, delete_threshold, delete_after_unseen_days, shard_num, "
                "seed, max_grad, max_new_rows, max_rows)");
  assert_fails (f, "[table.emb]\nrule = adadelta\n", KS_CONFIG_ERROR_BAD_VALUE,
                "@:2: [table.emb] rule = 'adadelta': expected one of adagrad, sgd, adam");
}

static void
test_unknown_key (Fixture *f, gconstpointer data)
{
  assert_fails (f, "[comm]\ntimeout = 3\ntimout = 4\n", KS_CONFIG_ERROR_UNKNOWN_KEY,
                "@:3: unknown key 'timout' in [comm]; did you mean 'timeout'? (known: backend, "
                "timeout, store, store_address, hierarchical)");
}

static void
test_bad_values (Fixture *f, gconstpointer data)
{
  assert_fails (f, "[comm]\ntimeout = soon\n", KS_CONFIG_ERROR_BAD_VALUE,
                "@:2: [comm] timeout = 'soon': expected a number in [0.001, 1e+06]");
  assert_fails (f, "[comm]\n\ntimeout = -1\n", KS_CONFIG_ERROR_BAD_VALUE,
                "@:3: [comm] timeout = '-1': expected a number in [0.001, 1e+06]");
  assert_fails (f, "[log]\nlevel = loud\n", KS_CONFIG_ERROR_BAD_VALUE,
                "@:2: [log] level = 'loud': expected one of error, warning, info, debug");
  /* an empty item of a list was dropped without a word */
  assert_fails (f, "[plugins]\nload = openblas,,optim\n", KS_CONFIG_ERROR_BAD_VALUE,
                "@:2: [plugins] load = 'openblas,,optim': expected a comma-separated list "
                "with no empty item, but item 2 is empty: write 'openblas,optim', or the "
                "missing item in its place");
  assert_fails (f, "[plugins]\nload = ,\n", KS_CONFIG_ERROR_BAD_VALUE,
                "@:2: [plugins] load = ',': expected a comma-separated list with no empty "
                "item, but item 1 is empty: leave the value empty for none, or the missing "
                "item in its place");
}

static void
test_set_override (Fixture *f, gconstpointer data)
{
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (GError) error = NULL;
  const char *bad[] = { "comm.timeout", "timeout=3", ".timeout=3", "comm.=3", "=3" };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autofree char *want = g_strdup_printf (
          "--set '%s': write it as group.key=value, e.g. --set comm.timeout=60", bad[i]);
      g_assert_false (ks_config_set_override (config, bad[i], &error));
      g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_USAGE);
      g_assert_cmpstr (error->message, ==, want);
      g_clear_error (&error);
    }
  g_assert_true (ks_config_set_override (config, "comm.timeot=3", &error));
  g_assert_false (ks_config_validate (config, &error));
  g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_UNKNOWN_KEY);
  g_assert_cmpstr (error->message, ==,
                   "--set comm.timeot: unknown key 'timeot' in [comm]; did you mean 'timeout'? "
                   "(known: backend, timeout, store, store_address, hierarchical)");
}

static void
test_bad_env_value (Fixture *f, gconstpointer data)
{
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (GError) error = NULL;

  g_setenv ("KS_COMM_TIMEOUT", "0", TRUE);
  g_assert_false (ks_config_validate (config, &error));
  g_unsetenv ("KS_COMM_TIMEOUT");
  g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE);
  g_assert_cmpstr (error->message, ==,
                   "env KS_COMM_TIMEOUT: [comm] timeout = '0': expected a number in [0.001, "
                   "1e+06]");
}

static void
test_precedence (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsConfig) config = ks_test_config ("[comm]\ntimeout = 20\n", f->dir, &error);
  g_autofree char *file_where = g_strdup_printf ("%s:2", f->path);
  const char *value;
  KsSource source;

  struct {
    const char *env, *set, *value, *where;
    KsSource source;
  } steps[] = {
    { NULL, NULL, "20", file_where, KS_SOURCE_FILE },
    { "30", NULL, "30", "env KS_COMM_TIMEOUT", KS_SOURCE_ENV },
    { "30", "comm.timeout=40", "40", "--set", KS_SOURCE_CMDLINE },
  };
  for (guint i = 0; i < G_N_ELEMENTS (steps); i++)
    {
      g_autofree char *where = NULL;
      if (steps[i].env != NULL)
        g_setenv ("KS_COMM_TIMEOUT", steps[i].env, TRUE);
      if (steps[i].set != NULL)
        g_assert_true (ks_config_set_override (config, steps[i].set, NULL));
      g_assert_true (ks_config_validate (config, &error));
      g_assert_true (ks_config_lookup (config, "comm", "timeout", &value, &source, &where));
      g_assert_cmpstr (value, ==, steps[i].value);
      g_assert_cmpint (source, ==, steps[i].source);
      g_assert_cmpstr (where, ==, steps[i].where);
      g_assert_cmpfloat (ks_config_get_double (config, "comm", "timeout"), ==,
                         g_ascii_strtod (steps[i].value, NULL));
    }
  g_unsetenv ("KS_COMM_TIMEOUT");

  /* a key nobody set stays at its default */
  g_autofree char *where = NULL;
  g_assert_true (ks_config_lookup (config, "log", "level", &value, &source, &where));
  g_assert_cmpint (source, ==, KS_SOURCE_DEFAULT);
  g_assert_cmpstr (where, ==, "default");
  g_assert_false (ks_config_lookup (config, "log", "nosuch", &value, NULL, NULL));
}

static void
test_value_types (Fixture *f, gconstpointer data)
{
  KsKeyDesc d = { "g", "k", KS_VALUE_INT, "1", 1, 8, NULL, NULL };
  g_autofree char *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL;

  g_assert_true (ks_config_check_value (&d, "8", &e1));
  g_assert_false (ks_config_check_value (&d, "9", &e1));
  g_assert_cmpstr (e1, ==, "an integer in [1, 8]");
  g_assert_false (ks_config_check_value (&d, "2.5", &e2));
  d.type = KS_VALUE_BOOL;
  for (const char *const *v = (const char *const[]) { "true", "No", "ON", "0", NULL }; *v; v++)
    g_assert_true (ks_config_check_value (&d, *v, &e3));
  g_assert_false (ks_config_check_value (&d, "maybe", &e3));
  g_assert_cmpstr (e3, ==, "a boolean (true/false, yes/no, on/off, 1/0)");
  d.type = KS_VALUE_DOUBLE;
  d.min = 1, d.max = 0; /* no range */
  g_assert_true (ks_config_check_value (&d, "-1e9", &e4));
  g_assert_false (ks_config_check_value (&d, "", &e4));
  g_assert_cmpstr (e4, ==, "a number");
}

static void
test_env_name (Fixture *f, gconstpointer data)
{
  g_autofree char *a = ks_config_env_name ("comm", "timeout");
  g_autofree char *b = ks_config_env_name ("my-plugin", "micro.batches");
  g_assert_cmpstr (a, ==, "KS_COMM_TIMEOUT");
  g_assert_cmpstr (b, ==, "KS_MY_PLUGIN_MICRO_BATCHES");
}

/* A group of a first-party plugin not built here is ignored with a warning, so one
 * config file serves CPU and GPU machines. */
static void
test_absent_first_party_plugin (Fixture *f, gconstpointer data)
{
  if (g_test_subprocess ())
    {
      g_log_set_always_fatal (G_LOG_FATAL_MASK); /* g_test_init made warnings fatal */
      g_autoptr (GError) error = NULL;
      g_autoptr (KsConfig) config = ks_test_config ("[cuda]\ndevice = 0\n", f->dir, &error);
      g_assert_true (ks_config_validate (config, &error));
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*group [cuda] configures plugin 'cuda', which is not loaded here*");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(name, fn) g_test_add ("/config/" name, Fixture, NULL, setup, fn, teardown)
  ADD ("valid-file", test_valid_file);
  ADD ("missing-file", test_missing_file);
  ADD ("inline-comments", test_inline_comments);
  ADD ("input-paths", test_input_paths);
  ADD ("syntax-errors", test_syntax_errors);
  ADD ("nothing-half-loaded", test_nothing_half_loaded);
  ADD ("duplicate-key", test_duplicate_key);
  ADD ("unknown-group", test_unknown_group);
  ADD ("unknown-key", test_unknown_key);
  ADD ("templated-group", test_templated_group);
  ADD ("hostile-bytes", test_hostile_bytes);
  ADD ("bad-values", test_bad_values);
  ADD ("set-override", test_set_override);
  ADD ("bad-env-value", test_bad_env_value);
  ADD ("precedence", test_precedence);
  ADD ("value-types", test_value_types);
  ADD ("env-name", test_env_name);
  ADD ("absent-first-party-plugin", test_absent_first_party_plugin);
  return g_test_run ();
}
