/* The factory: mode names and the original's integer flag select an algorithm; an
 * unknown or unprovided mode lists what is available. */
#include "testutil.h"

#include <gio/gio.h>

static void
setup (PluginFixture *f, gconstpointer data)
{
  ks_test_clear_env ();
  f->dir = ks_test_tmpdir ();
  if (data != NULL) /* with the plugin that provides collective and transpiler */
    g_free (ks_test_copy_plugin ("tgood", f->dir, "tgood.so", 0755));
  f->config = ks_config_new ();
  f->registry = ks_test_scan (f->config, f->dir);
}


static void
test_by_name (PluginFixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  const char *modes[] = { KS_MODE_COLLECTIVE, KS_MODE_TRANSPILER };

  for (guint i = 0; i < G_N_ELEMENTS (modes); i++)
    {
      g_autoptr (KsAlgorithm) algorithm =
          ks_factory_instantiate (f->registry, f->config, modes[i], &error);
      g_assert_no_error (error);
      g_assert_cmpstr (ks_algorithm_mode (algorithm), ==, modes[i]);
      g_assert_cmpstr (ks_algorithm_plugin (algorithm), ==, "tgood");
    }
}

static void
test_by_flag (PluginFixture *f, gconstpointer data)
{
  struct { int flag; const char *mode; } cases[] = {
    { 1, "collective" }, { -3, "collective" }, { 42, "collective" }, { 0, "transpiler" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (KsAlgorithm) algorithm =
          ks_factory_instantiate_flag (f->registry, f->config, cases[i].flag, &error);
      g_assert_no_error (error);
      g_assert_cmpstr (ks_algorithm_mode (algorithm), ==, cases[i].mode);
      g_assert_cmpstr (ks_factory_mode_for_flag (cases[i].flag), ==, cases[i].mode);
    }
}

static void
test_not_provided (PluginFixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_assert_null (ks_factory_instantiate (f->registry, f->config, "pslib", &error));
  g_assert_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==, "mode 'pslib': no loaded plugin provides it; available: "
                                       "collective (plugin tgood), transpiler (plugin tgood)");
}

static void
test_unknown (PluginFixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_assert_null (ks_factory_instantiate (f->registry, f->config, "colective", &error));
  g_assert_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==, "unknown mode 'colective' (modes: collective, transpiler, "
                                       "pslib); available here: collective (plugin tgood), "
                                       "transpiler (plugin tgood)");
}

static void
test_no_plugins (PluginFixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_assert_null (ks_factory_instantiate_flag (f->registry, f->config, 1, &error));
  g_assert_cmpstr (error->message, ==, "mode 'collective': no loaded plugin provides it; "
                                       "available: none (no loaded plugin provides an algorithm; "
                                       "see `ksdist plugins`)");
}

/* Calls go through the slot checks: present slots run, absent ones say so. */
static void
test_calls (PluginFixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsAlgorithm) algorithm =
      ks_factory_instantiate (f->registry, f->config, "collective", &error);

  g_assert_false (ks_algorithm_init_worker (algorithm, &error)); /* the plugin wants init first */
  g_assert_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED);
  g_clear_error (&error);
  g_assert_true (ks_algorithm_init (algorithm, NULL, &error));
  g_assert_true (ks_algorithm_init_worker (algorithm, &error));
  g_assert_no_error (error);
  g_assert_false (ks_algorithm_run_server (algorithm, &error));
  g_assert_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_SUPPORTED);
  g_assert_cmpstr (error->message, ==, "algorithm.run_server is not supported by plugin 'tgood': "
                                       "update the plugin or choose another algorithm "
                                       "implementation");
}

/* A layer whose compute slots the backend lacks is refused when the graph is built (so by
 * ksdist config, before any step), naming the layer, the slot and the backend; a layer it
 * can run is not; a graph built without a device is checked when it gets one. */
static void
test_compute_lacks_layer (PluginFixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsCompute) compute = ks_compute_new (f->registry, f->config, "tgood", &error);
  g_assert_no_error (error);
  const gint64 image[] = { 2, 8, 8, 3 };
  const struct { const char *op, *slot; } cases[] = {
    { "conv2d", "im2col" }, { "max_pool", "max_pool" },
    { "avg_pool", "avg_pool" }, { "batch_norm", "batch_norm" },
  };
  (void) data;
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (KsModel) model = ks_model_new (compute);
      KsExpr *x = ks_model_data (model, "x", 4, image, KS_DTYPE_FLOAT32, &error), *y = NULL;
      g_assert_no_error (error);
      g_assert_nonnull (ks_flatten (x, &error)); /* a reshape: every backend runs it */
      g_assert_no_error (error);
      switch (i)
        {
        case 0: y = ks_conv2d (x, 4, 3, 1, 1, "conv1", 1, &error); break;
        case 1: y = ks_max_pool (x, 2, 2, &error); break;
        case 2: y = ks_avg_pool (x, 2, 2, 0, &error); break;
        default: y = ks_batch_norm (x, "bn1", 0.1f, 1e-5f, &error); break;
        }
      g_assert_null (y);
      g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE);
      g_autofree char *needs = g_strdup_printf ("a %s layer needs compute.%s, which the compute "
                                                "backend 'tgood' (plugin tgood) does not have",
                                                cases[i].op, cases[i].slot);
      g_assert_nonnull (strstr (error->message, needs));
      g_assert_nonnull (strstr (error->message, "set [compute] backend"));
      g_clear_error (&error);
    }

  g_autoptr (KsModel) shapes = ks_model_new (NULL); /* shapes only, as the plan's check */
  KsExpr *x = ks_model_data (shapes, "x", 4, image, KS_DTYPE_FLOAT32, &error);
  g_assert_nonnull (ks_conv2d (x, 4, 3, 1, 1, "conv1", 1, &error));
  g_assert_no_error (error);
  g_assert_false (ks_model_set_device (shapes, compute, &error));
  g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE);
  g_assert_nonnull (strstr (error->message, "a conv2d layer needs compute.im2col"));
}

static gpointer
run_server (gpointer algorithm)
{
  GError *error = NULL;
  gint64 start = g_get_monotonic_time ();
  g_assert_false (ks_algorithm_run_server (algorithm, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_error_free (error);
  return GINT_TO_POINTER ((int) ((g_get_monotonic_time () - start) / 1000));
}

/* A blocking slot takes a GCancellable: run_server returns once it is cancelled, given
 * per call or set on the algorithm (as the trainer does for its stop signal); a mode
 * without the slot answers "not supported". */
static void
test_run_server_cancellable (PluginFixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsAlgorithm) servers = ks_factory_instantiate (f->registry, f->config,
                                                            KS_MODE_TRANSPILER, &error);
  g_autoptr (KsAlgorithm) none = ks_factory_instantiate (f->registry, f->config,
                                                         KS_MODE_COLLECTIVE, &error);
  g_autoptr (GCancellable) given = g_cancellable_new ();
  g_autoptr (GCancellable) set = g_cancellable_new ();
  g_assert_no_error (error);

  g_cancellable_cancel (given);
  g_assert_false (ks_algorithm_run_server_cancellable (servers, given, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);

  /* cancelled from elsewhere while it serves: it returns within a few of its polls */
  ks_algorithm_set_cancellable (servers, set);
  GThread *thread = g_thread_new ("serve", run_server, servers);
  g_usleep (200000);
  g_cancellable_cancel (set);
  int ms = GPOINTER_TO_INT (g_thread_join (thread));
  g_test_message ("run_server returned %d ms after it began; the cancel came at 200 ms", ms);
  g_assert_cmpint (ms, >=, 190);
  g_assert_cmpint (ms, <, 5000);

  g_assert_false (ks_algorithm_run_server_cancellable (none, given, &error));
  g_assert_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_SUPPORTED);
}

int
main (int argc, char **argv)
{
  static const int with_plugin = 1;
  g_test_init (&argc, &argv, NULL);
#define ADD(name, data, fn) g_test_add ("/factory/" name, PluginFixture, data, setup, fn, ks_test_fixture_teardown)
  ADD ("by-name", &with_plugin, test_by_name);
  ADD ("by-flag", &with_plugin, test_by_flag);
  ADD ("not-provided", &with_plugin, test_not_provided);
  ADD ("unknown", &with_plugin, test_unknown);
  ADD ("no-plugins", NULL, test_no_plugins);
  ADD ("calls", &with_plugin, test_calls);
  ADD ("run-server-cancellable", &with_plugin, test_run_server_cancellable);
  ADD ("compute-lacks-layer", &with_plugin, test_compute_lacks_layer);
  return g_test_run ();
}
