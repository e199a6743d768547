/* What the first-party compute plugins do beyond the conformance suite (test-kind-compute:
 * memory, copies, sgemm and the kernels on every backend): sgemm's message for a bad
 * shape, OpenBLAS's threads, the CUDA probe. A backend test runs on OpenBLAS, and on CUDA
 * where that plugin is built and a device is present (skipped, with the reason, elsewhere). */
#include "testutil.h"

#include <math.h>
#include <string.h>

typedef struct {
  KsConfig *config;
  KsRegistry *registry;
  KsCompute *compute; /* NULL when the backend cannot run here: the test is skipped */
} Fixture;

typedef struct {
  const char *backend;
  const char *set; /* an extra --set, or NULL */
} Params;

static char *
plugin_dir (const char *name)
{
  return g_build_filename (g_getenv ("KS_BUILD_PLUGINS"), name, ".libs", NULL);
}

static void
setup (Fixture *f, gconstpointer data)
{
  const Params *params = data;
  g_autofree char *openblas = plugin_dir ("openblas");
  g_autofree char *cuda = plugin_dir ("cuda");
  g_autofree char *path = g_strdup_printf ("%s:%s", openblas, cuda);
  g_autoptr (GError) error = NULL;

  ks_test_clear_env ();
  f->config = ks_config_new ();
  g_assert_true (ks_config_set_override (f->config, "compute.backend=auto", NULL));
  if (params->set != NULL)
    g_assert_true (ks_config_set_override (f->config, params->set, NULL));
  f->registry = ks_test_scan (f->config, path);
  g_assert_true (ks_config_validate (f->config, &error));
  f->compute = ks_compute_new (f->registry, f->config, params->backend, &error);
  if (g_error_matches (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_UNAVAILABLE))
    {
      g_test_skip (error->message);
      return;
    }
  g_assert_no_error (error);
  g_assert_cmpstr (ks_compute_plugin (f->compute), ==, params->backend);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  ks_compute_free (f->compute);
  ks_registry_free (f->registry);
  ks_config_free (f->config);
}

static void
test_bad_shape (Fixture *f, gconstpointer data)
{
  if (f->compute == NULL)
    return;
  g_autoptr (GError) error = NULL;
  float x[4] = { 0 };
  g_assert_false (ks_compute_sgemm (f->compute, KS_TRANS_N, KS_TRANS_N, 2, 2, 2, 1, x, 1, x, 2, 0,
                                    x, 2, &error));
  g_assert_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID);
  g_assert_cmpstr (error->message, ==, "sgemm: bad shape m=2 n=2 k=2 lda=1 ldb=2 ldc=2 "
                                       "(row-major: lda must be at least 2, ldb at least 2, "
                                       "ldc at least 2)");
}

static void
test_threads_setting (Fixture *f, gconstpointer data)
{
  if (f->compute == NULL)
    return;
  g_autoptr (GError) error = NULL;
  g_autofree char *d = ks_compute_describe (f->compute);
  g_assert_true (g_str_has_suffix (d, ", 1 thread"));
  g_assert_true (ks_compute_set_threads (f->compute, 2, &error));
  g_autofree char *d2 = ks_compute_describe (f->compute);
  g_assert_true (g_str_has_suffix (d2, ", 2 threads"));
  g_assert_false (ks_compute_set_threads (f->compute, -1, &error));
  g_assert_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID);

  /* 0: what a launcher asked for, else the cores shared by this host's processes */
  const char *vars[] = { "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "LOCAL_WORLD_SIZE",
                         "OMPI_COMM_WORLD_LOCAL_SIZE" };
  for (guint i = 0; i < G_N_ELEMENTS (vars); i++)
    g_unsetenv (vars[i]);
  int cores = (int) g_get_num_processors ();
  struct { const char *var, *value; int want; } cases[] = {
    { NULL, NULL, cores },
    { "LOCAL_WORLD_SIZE", "2", MAX (1, cores / 2) },
    { "OMPI_COMM_WORLD_LOCAL_SIZE", "4096", 1 },
    { "OMP_NUM_THREADS", "3", 3 },
    { "OPENBLAS_NUM_THREADS", "5", 5 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      if (cases[i].var != NULL)
        g_setenv (cases[i].var, cases[i].value, TRUE);
      g_assert_true (ks_compute_set_threads (f->compute, 0, NULL));
      g_autofree char *d3 = ks_compute_describe (f->compute);
      g_autofree char *want = g_strdup_printf (", %d thread%s", cases[i].want,
                                               cases[i].want == 1 ? "" : "s");
      g_test_message ("%s=%s: %s", cases[i].var, cases[i].value, d3);
      g_assert_true (g_str_has_suffix (d3, want));
    }
  for (guint i = 0; i < G_N_ELEMENTS (vars); i++)
    g_unsetenv (vars[i]);
}

/* Without a GPU the CUDA probe answers "unavailable" with the runtime's reason; with
 * one, it ranks above OpenBLAS, so "auto" picks it. */
static void
test_cuda_probe (void)
{
  g_autofree char *path = plugin_dir ("cuda");
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = NULL;
  g_autoptr (GPtrArray) list = NULL;
  const KsImplInfo *info;

  ks_test_clear_env ();
  registry = ks_test_scan (config, path);
  list = ks_registry_list (registry, KS_KIND_COMPUTE);
  g_assert_cmpuint (list->len, ==, 1);
  info = g_ptr_array_index (list, 0);
  g_assert_cmpstr (info->impl->name, ==, "cuda");
  if (info->priority >= 0)
    g_assert_cmpint (info->priority, ==, 100);
  else
    g_assert_true (g_str_has_prefix (info->reason, "cudaGetDeviceCount: ")
                   || g_str_equal (info->reason, "no CUDA device on this machine"));
}

static void
add_backend_tests (const char *backend)
{
  static const char *const names[] = { "bad-shape" };
  static const GTestFixtureFunc funcs[] = { (GTestFixtureFunc) test_bad_shape };
  static Params backends[2];
  static guint n_backends;
  Params *params = &backends[n_backends++];
  g_assert_cmpuint (n_backends, <=, G_N_ELEMENTS (backends));
  params->backend = backend;
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *name = g_strdup_printf ("/compute/%s/%s", backend, names[i]);
      g_test_add_vtable (name, sizeof (Fixture), params, (GTestFixtureFunc) setup, funcs[i],
                         (GTestFixtureFunc) teardown);
    }
}

static gboolean
built (const char *name)
{
  g_autofree char *dir = plugin_dir (name);
  g_autofree char *file = g_strdup_printf ("%s/%s.so", dir, name);
  return g_file_test (file, G_FILE_TEST_EXISTS);
}

int
main (int argc, char **argv)
{
  static const Params threads = { "openblas", "openblas.threads=1" };

  g_test_init (&argc, &argv, NULL);
  if (built ("openblas"))
    {
      add_backend_tests ("openblas");
      g_test_add ("/compute/openblas/threads-setting", Fixture, &threads, setup,
                  test_threads_setting, teardown);
    }
  if (built ("cuda"))
    {
      add_backend_tests ("cuda");
      g_test_add_func ("/compute/cuda/probe", test_cuda_probe);
    }
  if (!built ("openblas") && !built ("cuda"))
    g_test_skip ("no compute plugin was built (configure found neither OpenBLAS nor CUDA)");
  return g_test_run ();
}
