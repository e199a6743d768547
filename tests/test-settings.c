/* Plugin settings: declared by the plugin, resolved as default < [<plugin>] <
 * KS_<PLUGIN>_<KEY> < --set <plugin>.<key>=value, checked like core keys. */
#include "testutil.h"

static void
setup (PluginFixture *f, gconstpointer data)
{
  ks_test_clear_env ();
  g_unsetenv ("KS_TGOOD_LEVEL");
  f->dir = ks_test_tmpdir ();
  g_free (ks_test_copy_plugin ("tgood", f->dir, "tgood.so", 0755));
}

static void
teardown (PluginFixture *f, gconstpointer data)
{
  g_unsetenv ("KS_TGOOD_LEVEL");
  ks_test_fixture_teardown (f, data);
}

/* Loads `text`, scans the plugins, validates; returns the validation error. */
static GError *
load (PluginFixture *f, const char *text)
{
  GError *error = NULL;
  f->config = ks_test_config (text, f->dir, &error);
  g_assert_no_error (error);
  f->registry = ks_test_scan (f->config, f->dir);
  ks_config_validate (f->config, &error);
  return error;
}

/* What the plugin itself read from its settings. */
static char *
described (PluginFixture *f)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsCompute) compute = ks_compute_new (f->registry, f->config, "tgood", &error);
  g_assert_no_error (error);
  return ks_compute_describe (compute);
}

static void
test_default (PluginFixture *f, gconstpointer data)
{
  g_assert_null (load (f, NULL));
  g_autofree char *d = described (f);
  g_assert_cmpstr (d, ==, "level=1 label=plain");
}

static void
test_precedence (PluginFixture *f, gconstpointer data)
{
  g_assert_null (load (f, "[tgood]\nlevel = 3\nlabel = fromfile\n"));
  g_autofree char *from_file = described (f);
  g_assert_cmpstr (from_file, ==, "level=3 label=fromfile");

  g_setenv ("KS_TGOOD_LEVEL", "5", TRUE);
  g_autofree char *from_env = described (f);
  g_assert_cmpstr (from_env, ==, "level=5 label=fromfile");

  g_assert_true (ks_config_set_override (f->config, "tgood.level=7", NULL));
  g_assert_true (ks_config_validate (f->config, NULL));
  g_autofree char *from_set = described (f);
  g_assert_cmpstr (from_set, ==, "level=7 label=fromfile");
}

static void
test_bad_value (PluginFixture *f, gconstpointer data)
{
  g_autoptr (GError) error = load (f, "[tgood]\n\nlevel = 12\n");
  g_autofree char *want = g_strdup_printf ("%s/test.ini:3: [tgood] level = '12': expected an "
                                           "integer in [0, 9]", f->dir);
  g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE);
  g_assert_cmpstr (error->message, ==, want);
}

static void
test_unknown_key (PluginFixture *f, gconstpointer data)
{
  g_autoptr (GError) error = load (f, "[tgood]\nlevl = 2\n");
  g_autofree char *want = g_strdup_printf ("%s/test.ini:2: unknown key 'levl' in [tgood]; did "
                                           "you mean 'level'? (known: level, label)", f->dir);
  g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_UNKNOWN_KEY);
  g_assert_cmpstr (error->message, ==, want);
}

/* The group of a plugin exists only once that plugin is loaded. */
static void
test_group_of_excluded_plugin (PluginFixture *f, gconstpointer data)
{
  g_setenv ("KS_PLUGINS", "^tgood", TRUE);
  g_autoptr (GError) error = load (f, "[tgood]\nlevel = 2\n");
  g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_UNKNOWN_GROUP);
  g_assert_true (g_str_has_suffix (error->message, "/test.ini:1: unknown group [tgood]; known: "
                                                   "amp, comm, compute, job, log, model, "
                                                   "pipeline, plugins, strategy, table.*, trace, train"));
}

static void
test_create_failure (PluginFixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_assert_null (load (f, "[tgood]\nlabel = fail\n"));
  g_assert_null (ks_compute_new (f->registry, f->config, "tgood", &error));
  g_assert_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED);
  g_assert_cmpstr (error->message, ==, "compute 'tgood' (plugin tgood) could not be created: "
                                       "label 'fail' asks to fail");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(name, fn) g_test_add ("/settings/" name, PluginFixture, NULL, setup, fn, teardown)
  ADD ("default", test_default);
  ADD ("precedence", test_precedence);
  ADD ("bad-value", test_bad_value);
  ADD ("unknown-key", test_unknown_key);
  ADD ("group-of-excluded-plugin", test_group_of_excluded_plugin);
  ADD ("create-failure", test_create_failure);
  return g_test_run ();
}
