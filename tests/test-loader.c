/* The loader and registry: every way a plugin file is found, loaded, rejected,
 * shadowed or excluded, with the exact reason reported. */
#include "testutil.h"

#include <glib/gstdio.h>
#include <unistd.h>

static void
setup (PluginFixture *f, gconstpointer data)
{
  ks_test_clear_env ();
  f->dir = ks_test_tmpdir ();
  f->config = ks_config_new ();
}


static void
scan (PluginFixture *f, const char *path)
{
  f->registry = ks_test_scan (f->config, path != NULL ? path : f->dir);
}

static const KsPluginRecord *
only_record (PluginFixture *f)
{
  const GPtrArray *records = ks_registry_records (f->registry);
  g_assert_cmpuint (records->len, ==, 1);
  return g_ptr_array_index (records, 0);
}

static void
assert_rejected (PluginFixture *f, const char *expected_reason)
{
  const KsPluginRecord *r = only_record (f);
  g_assert_cmpstr (ks_plugin_state_name (r->state), ==, "rejected");
  g_assert_cmpstr (r->reason, ==, expected_reason);
}

static void
test_good (PluginFixture *f, gconstpointer data)
{
  g_autofree char *path = ks_test_copy_plugin ("tgood", f->dir, "tgood.so", 0755);
  const KsPluginRecord *plugin = NULL;
  const KsImplDesc *impl;
  g_autoptr (GError) error = NULL;

  scan (f, NULL);
  const KsPluginRecord *r = only_record (f);
  g_assert_cmpint (r->state, ==, KS_PLUGIN_LOADED);
  g_assert_null (r->reason);
  g_assert_cmpstr (r->path, ==, path);
  g_assert_cmpstr (r->desc->name, ==, "tgood");
  g_assert_cmpstr (r->desc->version, ==, "0.0.1-test");
  g_assert_true (ks_registry_find_plugin (f->registry, "tgood") == r);

  impl = ks_registry_select (f->registry, KS_KIND_COMPUTE, "tgood", &plugin, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (impl->name, ==, "tgood");
  g_assert_true (plugin == r);
}

static void
test_abi_major (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p = ks_test_copy_plugin ("tabimajor", f->dir, "tabimajor.so", 0755);
  scan (f, NULL);
  assert_rejected (f, "built for plugin ABI 2." G_STRINGIFY (KS_ABI_MINOR) ", this ksdist has "
                      "ABI 1." G_STRINGIFY (KS_ABI_MINOR) ": rebuild the plugin against this "
                      "ksdist");
}

static void
test_abi_minor (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p = ks_test_copy_plugin ("tabiminor", f->dir, "tabiminor.so", 0755);
  scan (f, NULL);
  g_autofree char *want = g_strdup_printf ("built for plugin ABI 1.%d, newer than this "
                                           "ksdist's 1.%d: upgrade ksdist or rebuild the "
                                           "plugin against this one", KS_ABI_MINOR + 1,
                                           KS_ABI_MINOR);
  assert_rejected (f, want);
}

static void
test_no_entry (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p = ks_test_copy_plugin ("tnoentry", f->dir, "tnoentry.so", 0755);
  g_autofree char *want = g_strdup_printf (
      "no entry symbol ks_plugin_descriptor(): %s: undefined symbol: ks_plugin_descriptor", p);
  scan (f, NULL);
  assert_rejected (f, want);
}

static void
test_name_mismatch (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p = ks_test_copy_plugin ("tgood", f->dir, "wrongname.so", 0755);
  scan (f, NULL);
  assert_rejected (f, "descriptor names the plugin 'tgood' but the file is wrongname.so: rename "
                      "one to match the other");
}

static void
test_not_shared_object (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p = ks_test_write_not_elf (f->dir, "junk.so");
  g_autofree char *want = g_strdup_printf ("cannot be opened: %s: invalid ELF header", p);
  g_chmod (p, 0755);
  scan (f, NULL);
  assert_rejected (f, want);
}

static void
test_not_so_file (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p = ks_test_write (f->dir, "plugin.txt", "text");
  scan (f, p);
  assert_rejected (f, "a plugin file's name must end in .so");
}

/* A name that could not be a config group is refused before the file is opened. */
static void
test_invalid_name (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p = ks_test_copy_plugin ("tgood", f->dir, "t.good.so", 0755);
  scan (f, NULL);
  assert_rejected (f, "'t.good' is not a valid plugin name (it names a configuration group and "
                      "KS_<PLUGIN>_<KEY> variables): rename the file with letters, digits, '-' "
                      "and '_' only");
  g_assert_null (only_record (f)->desc);
}

static void
test_core_group_name (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p = ks_test_copy_plugin ("tgood", f->dir, "compute.so", 0755);
  scan (f, NULL);
  assert_rejected (f, "the name 'compute' is a configuration group of the core: rename the "
                      "plugin");
  g_assert_null (only_record (f)->desc);
}

static void
test_missing_required_slot (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p = ks_test_copy_plugin ("tnoslot", f->dir, "tnoslot.so", 0755);
  scan (f, NULL);
  assert_rejected (f, "compute implementation 'tnoslot' leaves the required method alloc unset");
}

static void
test_bad_settings (PluginFixture *f, gconstpointer data)
{
  g_autofree char *d1 = g_build_filename (f->dir, "1", NULL);
  g_autofree char *d2 = g_build_filename (f->dir, "2", NULL);
  g_mkdir (d1, 0700);
  g_mkdir (d2, 0700);
  g_free (ks_test_copy_plugin ("tdupset", d1, "tdupset.so", 0755));
  g_free (ks_test_copy_plugin ("tbaddefault", d2, "tbaddefault.so", 0755));
  g_autofree char *path = g_strdup_printf ("%s:%s", d1, d2);

  scan (f, path);
  const KsPluginRecord *dup = ks_test_record (f->registry, "tdupset.so");
  const KsPluginRecord *bad = ks_test_record (f->registry, "tbaddefault.so");
  g_assert_cmpint (dup->state, ==, KS_PLUGIN_REJECTED);
  g_assert_cmpstr (dup->reason, ==, "setting 'level' is declared twice");
  g_assert_cmpint (bad->state, ==, KS_PLUGIN_REJECTED);
  g_assert_cmpstr (bad->reason, ==, "setting 'level': default '10' is not an integer in [0, 9]");
}

static void
test_duplicate (PluginFixture *f, gconstpointer data)
{
  g_autofree char *a = g_build_filename (f->dir, "a", NULL);
  g_autofree char *b = g_build_filename (f->dir, "b", NULL);
  g_mkdir (a, 0700);
  g_mkdir (b, 0700);
  g_autofree char *first = ks_test_copy_plugin ("tgood", a, "tgood.so", 0755);
  g_autofree char *second = ks_test_copy_plugin ("tgood", b, "tgood.so", 0755);
  g_autofree char *path = g_strdup_printf ("%s:%s", a, b);
  g_autofree char *want = g_strdup_printf ("shadowed by %s, earlier in the search path", first);

  scan (f, path);
  const GPtrArray *records = ks_registry_records (f->registry);
  g_assert_cmpuint (records->len, ==, 2);
  const KsPluginRecord *r0 = g_ptr_array_index (records, 0);
  const KsPluginRecord *r1 = g_ptr_array_index (records, 1);
  g_assert_cmpstr (r0->path, ==, first);
  g_assert_cmpint (r0->state, ==, KS_PLUGIN_LOADED);
  g_assert_cmpstr (r1->path, ==, second);
  g_assert_cmpint (r1->state, ==, KS_PLUGIN_SHADOWED);
  g_assert_cmpstr (r1->reason, ==, want);
  g_assert_null (r1->desc); /* never opened */
}

static void
test_unavailable (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p1 = ks_test_copy_plugin ("tunavail", f->dir, "tunavail.so", 0755);
  g_autofree char *p2 = ks_test_copy_plugin ("tgood", f->dir, "tgood.so", 0755);
  g_autoptr (GError) error = NULL;
  g_autofree char *want = NULL;
  const KsImplDesc *impl;

  scan (f, NULL);
  g_assert_cmpint (ks_test_record (f->registry, "tunavail.so")->state, ==, KS_PLUGIN_LOADED);

  g_autoptr (GPtrArray) list = ks_registry_list (f->registry, KS_KIND_COMPUTE);
  g_assert_cmpuint (list->len, ==, 2);
  const KsImplInfo *tgood = g_ptr_array_index (list, 0); /* sorted: tgood.so first */
  const KsImplInfo *tunavail = g_ptr_array_index (list, 1);
  g_assert_cmpstr (tgood->impl->name, ==, "tgood");
  g_assert_cmpint (tgood->priority, ==, 1);
  g_assert_cmpstr (tunavail->impl->name, ==, "tunavail");
  g_assert_cmpint (tunavail->priority, <, 0);
  g_assert_cmpstr (tunavail->reason, ==, "no test device on this machine");

  impl = ks_registry_select (f->registry, KS_KIND_COMPUTE, "tunavail", NULL, &error);
  g_assert_null (impl);
  want = g_strdup_printf ("compute 'tunavail' (plugin tunavail, %s) is unavailable: no test "
                          "device on this machine", p1);
  g_assert_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_UNAVAILABLE);
  g_assert_cmpstr (error->message, ==, want);

  /* auto passes over the unavailable one */
  impl = ks_registry_select (f->registry, KS_KIND_COMPUTE, "auto", NULL, NULL);
  g_assert_cmpstr (impl->name, ==, "tgood");
}

static void
test_not_found (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p = ks_test_copy_plugin ("tgood", f->dir, "tgood.so", 0755);
  g_autoptr (GError) error = NULL;

  scan (f, NULL);
  g_assert_null (ks_registry_select (f->registry, KS_KIND_COMPUTE, "nosuch", NULL, &error));
  g_assert_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==,
                   "no compute implementation named 'nosuch'; available: tgood (plugin tgood)");
  g_clear_error (&error);
  g_assert_null (ks_registry_select (f->registry, KS_KIND_COMM, "auto", NULL, &error));
  g_assert_cmpstr (error->message, ==,
                   "no comm implementation is available; found: none: see `ksdist plugins` for "
                   "what was found and rejected");
}

static void
test_exclude_list (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p1 = ks_test_copy_plugin ("tgood", f->dir, "tgood.so", 0755);
  g_autofree char *p2 = ks_test_copy_plugin ("tunavail", f->dir, "tunavail.so", 0755);
  g_autoptr (GError) error = NULL;

  g_setenv ("KS_PLUGINS", "^tgood", TRUE);
  scan (f, NULL);
  const KsPluginRecord *r = ks_test_record (f->registry, "tgood.so");
  g_assert_cmpint (r->state, ==, KS_PLUGIN_EXCLUDED);
  g_assert_cmpstr (r->reason, ==, "excluded by KS_PLUGINS=^tgood");
  g_assert_null (r->desc);
  g_assert_cmpint (ks_test_record (f->registry, "tunavail.so")->state, ==, KS_PLUGIN_LOADED);

  /* asking for it by name says why it is not there */
  g_assert_null (ks_registry_select (f->registry, KS_KIND_COMPUTE, "tgood", NULL, &error));
  g_assert_true (g_str_has_suffix (error->message, "was excluded: excluded by KS_PLUGINS=^tgood; "
                                                   "available: tunavail (plugin tunavail, "
                                                   "unavailable: no test device on this machine)"));
  g_clear_error (&error);
  /* and so does auto, finding none: the plugin left out is named with the list */
  g_assert_null (ks_registry_select (f->registry, KS_KIND_COMPUTE, "auto", NULL, &error));
  g_assert_cmpstr (error->message, ==,
                   "no compute implementation is available; found: tunavail (plugin tunavail, "
                   "unavailable: no test device on this machine); not loaded, as excluded by "
                   "KS_PLUGINS=^tgood: tgood (change that list if it provides compute)");
}

static void
test_include_list_from_config (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p1 = ks_test_copy_plugin ("tgood", f->dir, "tgood.so", 0755);
  g_autofree char *p2 = ks_test_copy_plugin ("tunavail", f->dir, "tunavail.so", 0755);

  g_assert_true (ks_config_set_override (f->config, "plugins.load=tunavail", NULL));
  scan (f, NULL);
  const KsPluginRecord *r = ks_test_record (f->registry, "tgood.so");
  g_assert_cmpint (r->state, ==, KS_PLUGIN_EXCLUDED);
  g_assert_cmpstr (r->reason, ==, "not in the include list [plugins] load = tunavail");
  g_assert_cmpint (ks_test_record (f->registry, "tunavail.so")->state, ==, KS_PLUGIN_LOADED);
}

static void
test_mixed_list (PluginFixture *f, gconstpointer data)
{
  g_autoptr (KsRegistry) registry = ks_registry_new ();
  g_autoptr (GError) error = NULL;

  g_setenv ("KS_PLUGINS", "gloo,^mpi", TRUE);
  g_assert_false (ks_registry_scan (registry, f->config, &error));
  g_assert_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_INVALID);
  g_assert_cmpstr (error->message, ==,
                   "KS_PLUGINS=gloo,^mpi mixes included and excluded plugins: write an include "
                   "list (gloo,openblas) or an exclude list (^mpi,cuda)");
}

static void
test_world_writable_file (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p = ks_test_copy_plugin ("tgood", f->dir, "tgood.so", 0777);
  g_autofree char *want = g_strdup_printf (
      "%s is writable by other users (mode 777): a stranger's code must not run in a training "
      "job; run chmod o-w %s", p, p);
  scan (f, NULL);
  assert_rejected (f, want);
}

static void
test_world_writable_dir (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p = ks_test_copy_plugin ("tgood", f->dir, "tgood.so", 0755);
  g_autofree char *want = g_strdup_printf (
      "%s is writable by other users (mode 777): a stranger's code must not run in a training "
      "job; run chmod o-w %s", f->dir, f->dir);
  g_chmod (f->dir, 0777);
  scan (f, NULL);
  g_chmod (f->dir, 0700);
  assert_rejected (f, want);
}

/* A link from a private directory to a file in an open one is judged by the target. */
static void
test_symlink_into_writable_dir (PluginFixture *f, gconstpointer data)
{
  g_autofree char *open_dir = g_build_filename (f->dir, "open", NULL);
  g_autofree char *private_dir = g_build_filename (f->dir, "private", NULL);
  g_autofree char *link = g_build_filename (private_dir, "tgood.so", NULL);
  g_mkdir (open_dir, 0700);
  g_mkdir (private_dir, 0700);
  g_autofree char *target = ks_test_copy_plugin ("tgood", open_dir, "tgood.so", 0755);
  g_assert_cmpint (symlink (target, link), ==, 0);
  g_autofree char *want = g_strdup_printf (
      "%s is writable by other users (mode 777): a stranger's code must not run in a training "
      "job; run chmod o-w %s", open_dir, open_dir);

  g_chmod (open_dir, 0777);
  scan (f, private_dir);
  g_chmod (open_dir, 0700);
  assert_rejected (f, want);
}

/* Empty entries never mean the current directory. */
static void
test_current_dir_not_searched (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p = ks_test_copy_plugin ("tgood", f->dir, "tgood.so", 0755);
  g_autofree char *cwd = g_get_current_dir ();

  g_assert_cmpint (chdir (f->dir), ==, 0);
  scan (f, "::");
  g_assert_cmpint (chdir (cwd), ==, 0);
  g_assert_cmpuint (ks_registry_records (f->registry)->len, ==, 0);
  g_assert_null (ks_registry_search_path (f->registry)[0]);
}

/* Order: KS_PLUGIN_PATH, then [plugins] path (relative to the config file), then the
 * system directory; the first of a name wins. */
static void
test_search_order (PluginFixture *f, gconstpointer data)
{
  const char *dirs[] = { "env", "conf", "sys" };
  g_autoptr (GError) error = NULL;
  for (guint i = 0; i < G_N_ELEMENTS (dirs); i++)
    {
      g_autofree char *d = g_build_filename (f->dir, dirs[i], NULL);
      g_mkdir (d, 0700);
      g_free (ks_test_copy_plugin ("tgood", d, "tgood.so", 0755));
    }
  g_autofree char *env = g_build_filename (f->dir, "env", NULL);
  g_autofree char *conf = g_build_filename (f->dir, "conf", NULL);
  g_autofree char *sys = g_build_filename (f->dir, "sys", NULL);
  ks_config_free (f->config);
  f->config = ks_test_config ("[plugins]\npath = conf\n", f->dir, &error);
  g_assert_no_error (error);
  g_setenv ("KS_PLUGIN_SYSTEM_PATH", sys, TRUE);
  scan (f, env);

  const char *const *path = ks_registry_search_path (f->registry);
  g_assert_cmpstr (path[0], ==, env);
  g_assert_cmpstr (path[1], ==, conf);
  g_assert_cmpstr (path[2], ==, sys);
  g_assert_null (path[3]);
  const GPtrArray *records = ks_registry_records (f->registry);
  g_assert_cmpuint (records->len, ==, 3);
  g_assert_cmpint (((KsPluginRecord *) g_ptr_array_index (records, 0))->state, ==,
                   KS_PLUGIN_LOADED);
  g_assert_true (g_str_has_prefix (((KsPluginRecord *) g_ptr_array_index (records, 1))->path,
                                   conf));
  g_assert_cmpint (((KsPluginRecord *) g_ptr_array_index (records, 1))->state, ==,
                   KS_PLUGIN_SHADOWED);
  g_assert_cmpint (((KsPluginRecord *) g_ptr_array_index (records, 2))->state, ==,
                   KS_PLUGIN_SHADOWED);
}

/* A method beyond the vtable's declared size answers "not supported", and the core
 * never calls the function pointer that lies past it (it would abort). */
static void
test_slot_beyond_size (PluginFixture *f, gconstpointer data)
{
  g_autofree char *p = ks_test_copy_plugin ("tgood", f->dir, "tgood.so", 0755);
  g_autoptr (GError) error = NULL;

  scan (f, NULL);
  g_autoptr (KsCompute) compute = ks_compute_new (f->registry, f->config, "tgood", &error);
  g_assert_no_error (error);
  g_assert_false (ks_compute_synchronize (compute, &error));
  g_assert_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_SUPPORTED);
  g_assert_cmpstr (error->message, ==,
                   "compute.synchronize is not supported by plugin 'tgood': update the plugin "
                   "or choose another compute implementation");
  g_clear_error (&error);
  /* a slot inside the size but unset */
  g_assert_false (ks_compute_sgemm (compute, KS_TRANS_N, KS_TRANS_N, 1, 1, 1, 1, NULL, 1, NULL,
                                    1, 0, NULL, 1, &error));
  g_assert_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_SUPPORTED);
}

/* The first plugin loaded makes OpenMP's threads sleep between regions unless the user
 * chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT, unset by main): libgomp reads it when a plugin
 * loads it. */
static void
test_omp_wait_passive (PluginFixture *f, gconstpointer data)
{
  g_autofree char *path = ks_test_copy_plugin ("tgood", f->dir, "tgood.so", 0755);
  scan (f, NULL);
  g_assert_cmpint (only_record (f)->state, ==, KS_PLUGIN_LOADED);
  g_assert_cmpstr (g_getenv ("OMP_WAIT_POLICY"), ==, "passive");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_unsetenv ("OMP_WAIT_POLICY");
  g_unsetenv ("GOMP_SPINCOUNT");
#define ADD(name, fn) g_test_add ("/loader/" name, PluginFixture, NULL, setup, fn, ks_test_fixture_teardown)
  ADD ("good", test_good);
  ADD ("omp-wait-passive", test_omp_wait_passive);
  ADD ("abi-major-newer", test_abi_major);
  ADD ("abi-minor-newer", test_abi_minor);
  ADD ("no-entry-symbol", test_no_entry);
  ADD ("name-mismatch", test_name_mismatch);
  ADD ("not-a-shared-object", test_not_shared_object);
  ADD ("not-a-so-file", test_not_so_file);
  ADD ("invalid-name", test_invalid_name);
  ADD ("core-group-name", test_core_group_name);
  ADD ("missing-required-slot", test_missing_required_slot);
  ADD ("bad-settings", test_bad_settings);
  ADD ("duplicate-shadowed", test_duplicate);
  ADD ("query-unavailable", test_unavailable);
  ADD ("not-found", test_not_found);
  ADD ("exclude-list", test_exclude_list);
  ADD ("include-list-from-config", test_include_list_from_config);
  ADD ("mixed-list", test_mixed_list);
  ADD ("world-writable-file", test_world_writable_file);
  ADD ("world-writable-dir", test_world_writable_dir);
  ADD ("symlink-into-writable-dir", test_symlink_into_writable_dir);
  ADD ("current-dir-not-searched", test_current_dir_not_searched);
  ADD ("search-order", test_search_order);
  ADD ("slot-beyond-size", test_slot_beyond_size);
  return g_test_run ();
}
