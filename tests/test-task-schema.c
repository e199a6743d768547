/* A C program's task declares keys of its own (KsTrainTask.schema): [model] my_key is
 * known, typed and read like the core's; a key nobody declares is still refused with the
 * message ks_config_validate gives without the task. */
#include "testutil.h"

#include <ksdist/trainer.h>
#include <string.h>

static const KsKeyDesc own_keys[] = {
  { "model", "my_key", KS_VALUE_INT, "3", 1, 100, NULL, "the task's own width" },
  { "model", "init_from", KS_VALUE_STRING, "ignored", 1, 0, NULL, "the core's key: skipped" },
};

static const KsTrainTask own_task = {
  .size = sizeof (KsTrainTask),
  .name = "own-key",
  .schema = own_keys,
  .n_schema = G_N_ELEMENTS (own_keys),
};

/* The validation error of `text`, with or without the task's keys (NULL: none). */
static char *
refusal (const char *dir, const char *text, const KsTrainTask *task)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsConfig) config = ks_test_config (text, dir, &error);
  g_assert_no_error (error);
  if (task != NULL)
    ks_trainer_add_task_schema (config, task);
  if (ks_config_validate (config, &error))
    return NULL;
  return g_strdup (error->message);
}

static void
test_own_key (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autoptr (GError) error = NULL;
  const char *text = "[model]\nmy_key = 42\n";

  /* without the task's schema the key is unknown: the slot is what makes it known */
  g_autofree char *without = refusal (dir, text, NULL);
  g_assert_nonnull (without);
  g_assert_true (strstr (without, "unknown key 'my_key' in [model]") != NULL);

  g_autoptr (KsConfig) config = ks_test_config (text, dir, &error);
  ks_trainer_add_task_schema (config, &own_task);
  g_assert_true (ks_config_validate (config, &error));
  g_assert_no_error (error);
  g_assert_cmpint (ks_config_get_int (config, "model", "my_key"), ==, 42);
  g_autofree char *where = NULL;
  g_assert_true (ks_config_lookup (config, "model", "my_key", NULL, NULL, &where));
  g_assert_true (g_str_has_suffix (where, "test.ini:2"));
  /* a core key the task repeats stays the core's (one declaration, its default) */
  g_autoptr (GPtrArray) keys = ks_config_group_keys (config, "model");
  guint init_from = 0;
  for (guint i = 0; i < keys->len; i++)
    init_from += g_strcmp0 (((const KsKeyDesc *) keys->pdata[i])->key, "init_from") == 0;
  g_assert_cmpuint (init_from, ==, 1);
  g_assert_cmpstr (ks_config_get_string (config, "model", "init_from"), !=, "ignored");
  ks_test_rmtree (dir);
}

static void
test_default_and_range (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autoptr (GError) error = NULL;
  g_autoptr (KsConfig) config = ks_test_config ("[model]\n", dir, &error);
  ks_trainer_add_task_schema (config, &own_task);
  g_assert_true (ks_config_validate (config, &error));
  g_assert_cmpint (ks_config_get_int (config, "model", "my_key"), ==, 3);

  g_autofree char *bad = refusal (dir, "[model]\nmy_key = 500\n", &own_task);
  g_assert_nonnull (bad);
  g_assert_true (strstr (bad, "my_key") != NULL);
  ks_test_rmtree (dir);
}

static void
test_unknown_still_refused (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  const char *text = "[model]\nno_such_key = 1\n";
  g_autofree char *without = refusal (dir, text, NULL);
  g_autofree char *with = refusal (dir, text, &own_task);
  g_assert_nonnull (without);
  g_assert_true (strstr (without, "unknown key 'no_such_key' in [model]") != NULL);
  /* the same words, but the task's key is among those the hint may name */
  g_auto (GStrv) a = g_strsplit (without, ";", 2);
  g_auto (GStrv) b = g_strsplit (with, ";", 2);
  g_assert_cmpstr (a[0], ==, b[0]);
  ks_test_rmtree (dir);
}

/* An older, smaller task table (no schema slot) adds nothing and reads nothing past it. */
static void
test_old_table (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  KsTrainTask old = own_task;
  old.size = G_STRUCT_OFFSET (KsTrainTask, schema);
  g_autofree char *msg = refusal (dir, "[model]\nmy_key = 4\n", &old);
  g_assert_nonnull (msg);
  g_assert_true (strstr (msg, "unknown key 'my_key'") != NULL);
  ks_test_rmtree (dir);
}

/* Callbacks the plan's check needs to exist, never called here (nothing is built). */
static gboolean
no_build (KsTrainer *t, GError **error)
{
  g_assert_not_reached ();
}

static void
no_batch (KsTrainer *t, gint64 step)
{
  g_assert_not_reached ();
}

static gboolean
no_evaluate (KsTrainer *t, gboolean final, double *value, gsize *samples, GError **error)
{
  g_assert_not_reached ();
}

static const KsTrainTask checked_task = {
  .size = sizeof (KsTrainTask),
  .name = "own-key",
  .metric = "loss",
  .build = no_build,
  .batch = no_batch,
  .evaluate = no_evaluate,
  .schema = own_keys,
  .n_schema = G_N_ELEMENTS (own_keys),
};

/* The error of ks_trainer_check on `text` (loaded, the plugins scanned, nothing added or
 * validated by the program: the check does both), or NULL; `config_out` keeps the config. */
static char *
check_refusal (const char *dir, const char *text, KsConfig **config_out)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *openblas = ks_test_build_plugin_dir ("openblas");
  KsConfig *config = ks_test_config (text, dir, &error);
  g_assert_no_error (error);
  KsRegistry *registry = ks_test_scan (config, openblas);
  gboolean ok = ks_trainer_check (registry, config, &checked_task, NULL, FALSE, &error);
  ks_registry_free (registry);
  if (config_out != NULL)
    *config_out = config;
  else
    ks_config_free (config);
  return ok ? NULL : g_strdup (error->message);
}

/* ks_trainer_check adds the task's keys itself and validates with them: a program that
 * never calls ks_trainer_add_task_schema reads its key, and a bad value or a misspelt key
 * is refused with the file and line, as ks_trainer_main refuses them. */
static void
test_check_adds_schema (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *path = g_build_filename (dir, "test.ini", NULL);
  g_autoptr (KsConfig) config = NULL;

  g_autofree char *ok = check_refusal (dir, "[train]\nsteps = 5\n[model]\nmy_key = 42\n", &config);
  g_assert_null (ok);
  g_assert_cmpint (ks_config_get_int (config, "model", "my_key"), ==, 42);
  g_autofree char *where = NULL;
  g_assert_true (ks_config_lookup (config, "model", "my_key", NULL, NULL, &where));
  g_autofree char *want_where = g_strdup_printf ("%s:4", path);
  g_assert_cmpstr (where, ==, want_where);

  g_autofree char *bad = check_refusal (dir, "[model]\nmy_key = 500\n", NULL);
  g_autofree char *want_bad = g_strdup_printf ("%s:2: [model] my_key = '500': expected an "
                                               "integer in [1, 100]", path);
  g_assert_cmpstr (bad, ==, want_bad);

  g_autofree char *typo = check_refusal (dir, "[model]\nmy_kye = 5\n", NULL);
  g_autofree char *want_typo = g_strdup_printf ("%s:2: unknown key 'my_kye' in [model]; did "
                                                "you mean 'my_key'? (known: init_from, my_key)",
                                                path);
  g_assert_cmpstr (typo, ==, want_typo);
  ks_test_rmtree (dir);
}

/* A task of its own name declares its own input file ([model] vocab_file, KS_VALUE_PATH):
 * found beside the config file as the tasks library's [data] path is, and a missing one
 * refused by the plan's check, naming the key, where it was set and the rule. */
static const KsKeyDesc path_keys[] = {
  { "model", "vocab_file", KS_VALUE_PATH, "", 1, 0, NULL, "the task's vocabulary file" },
  { "model", "vocab_name", KS_VALUE_STRING, "", 1, 0, NULL, "a name, not a file: as written" },
};

static void
test_own_path (void)
{
  KsTrainTask path_task = checked_task; /* another name, its own keys */
  path_task.name = "vocab";
  path_task.schema = path_keys;
  path_task.n_schema = G_N_ELEMENTS (path_keys);
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *openblas = ks_test_build_plugin_dir ("openblas");
  g_autofree char *vocab = ks_test_write (dir, "vocab.txt", "a\nb\n");
  g_autofree char *cwd = g_get_current_dir ();
  g_autoptr (GError) error = NULL;

  g_assert_false (g_file_test ("vocab.txt", G_FILE_TEST_EXISTS)); /* only beside the config */
  g_autoptr (KsConfig) config = ks_test_config ("[model]\nvocab_file = vocab.txt\n"
                                                "vocab_name = vocab.txt\n", dir, &error);
  g_autoptr (KsRegistry) registry = ks_test_scan (config, openblas);
  g_assert_true (ks_trainer_check (registry, config, &path_task, NULL, FALSE, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (ks_config_get_string (config, "model", "vocab_file"), ==, vocab);
  g_assert_cmpstr (ks_config_get_string (config, "model", "vocab_name"), ==, "vocab.txt");

  g_autoptr (KsConfig) missing = ks_test_config ("[model]\nvocab_file = nothing.txt\n", dir,
                                                 &error);
  g_autoptr (KsRegistry) registry2 = ks_test_scan (missing, openblas);
  g_assert_false (ks_trainer_check (registry2, missing, &path_task, NULL, FALSE, &error));
  g_autofree char *full = g_canonicalize_filename (dir, cwd);
  g_autofree char *want = g_strdup_printf ("[model] vocab_file = nothing.txt (in %s/test.ini:2): "
                                           "not found (relative paths are taken from the config "
                                           "file's folder %s, then the current directory %s)",
                                           dir, full, cwd);
  g_assert_cmpstr (error->message, ==, want);
  ks_test_rmtree (dir);
}

/* Validating again (the program's own ks_config_validate, then the check's) repeats no
 * warning: a [cuda] group on a build without it is said once. */
static void
test_warned_once (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *openblas = ks_test_build_plugin_dir ("openblas");
  g_autoptr (GError) error = NULL;
  g_autoptr (KsConfig) config = ks_test_config ("[cuda]\ndevice = 0\n", dir, &error);
  g_autoptr (KsRegistry) registry = ks_test_scan (config, openblas);

  g_test_expect_message (NULL, G_LOG_LEVEL_WARNING, "*group [cuda] configures plugin 'cuda'*");
  g_assert_true (ks_config_validate (config, &error));
  g_test_assert_expected_messages ();
  /* a second warning here would be unexpected, and fatal in a GLib test */
  g_assert_true (ks_config_validate (config, &error));
  g_assert_true (ks_trainer_check (registry, config, &checked_task, NULL, FALSE, &error));
  g_assert_no_error (error);
  ks_test_rmtree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  ks_test_clear_env ();
  g_test_add_func ("/task-schema/own-key", test_own_key);
  g_test_add_func ("/task-schema/default-and-range", test_default_and_range);
  g_test_add_func ("/task-schema/unknown-still-refused", test_unknown_still_refused);
  g_test_add_func ("/task-schema/old-table", test_old_table);
  g_test_add_func ("/task-schema/check-adds-schema", test_check_adds_schema);
  g_test_add_func ("/task-schema/warned-once", test_warned_once);
  g_test_add_func ("/task-schema/own-path", test_own_path);
  return g_test_run ();
}
