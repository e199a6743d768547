/* The compute plugins through the vtable: memory, copies and sgemm, checked against a
 * naive triple loop in double precision. Every test runs on OpenBLAS, and on CUDA where
 * that plugin is built and a device is present (skipped, with the reason, elsewhere). */
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

static float *
device_random (Fixture *f, GRand *rng, gsize n, float **host_out)
{
  float *host = g_new (float, n);
  float *dev = ks_compute_alloc (f->compute, n * sizeof (float), NULL);
  for (gsize i = 0; i < n; i++)
    host[i] = (float) g_rand_double_range (rng, -1, 1);
  g_assert_true (ks_compute_copy_to_device (f->compute, dev, host, n * sizeof (float), NULL));
  *host_out = host;
  return dev;
}

/* Row-major element (i, j) of op(X) where X has leading dimension ld. */
static double
at (const float *x, KsTranspose t, int ld, int i, int j)
{
  return t == KS_TRANS_N ? x[(gsize) i * ld + j] : x[(gsize) j * ld + i];
}

static void
check_gemm (Fixture *f, GRand *rng, KsTranspose ta, KsTranspose tb, int m, int n, int k,
            float alpha, float beta, int pad, int batch)
{
  int rows_a = ta == KS_TRANS_N ? m : k, cols_a = ta == KS_TRANS_N ? k : m;
  int rows_b = tb == KS_TRANS_N ? k : n, cols_b = tb == KS_TRANS_N ? n : k;
  int lda = cols_a + pad, ldb = cols_b + pad, ldc = n + pad;
  gint64 sa = (gint64) rows_a * lda, sb = (gint64) rows_b * ldb, sc = (gint64) m * ldc;
  float *ha, *hb, *hc;
  float *a = device_random (f, rng, sa * batch, &ha);
  float *b = device_random (f, rng, sb * batch, &hb);
  float *c = device_random (f, rng, sc * batch, &hc);
  g_autofree float *out = g_new (float, sc * batch);
  g_autoptr (GError) error = NULL;

  if (beta == 0) /* C's old contents are ignored, even NaN (padding columns keep theirs) */
    {
      for (gint64 i = 0; i < sc * batch; i++)
        hc[i] = NAN;
      g_assert_true (ks_compute_copy_to_device (f->compute, c, hc, sc * batch * sizeof (float),
                                                NULL));
    }

  if (batch == 1)
    ks_compute_sgemm (f->compute, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &error);
  else
    ks_compute_sgemm_strided_batched (f->compute, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb,
                                      beta, c, ldc, sc, batch, &error);
  g_assert_no_error (error);
  g_assert_true (ks_compute_copy_to_host (f->compute, out, c, sc * batch * sizeof (float), NULL));

  for (int p = 0; p < batch; p++)
    for (int i = 0; i < m; i++)
      for (int j = 0; j < ldc; j++)
        {
          gsize idx = p * sc + (gsize) i * ldc + j;
          double want = hc[idx]; /* padding columns must stay untouched */
          if (j < n)
            {
              double sum = 0;
              for (int l = 0; l < k; l++)
                sum += at (ha + p * sa, ta, lda, i, l) * at (hb + p * sb, tb, ldb, l, j);
              want = alpha * sum + (beta != 0 ? beta * hc[idx] : 0);
            }
          if (isnan (want))
            g_assert_true (isnan (out[idx]));
          else
            g_assert_cmpfloat_with_epsilon (out[idx], want, 1e-5 * (k + 1));
        }
  ks_compute_free_memory (f->compute, a);
  ks_compute_free_memory (f->compute, b);
  ks_compute_free_memory (f->compute, c);
  g_free (ha);
  g_free (hb);
  g_free (hc);
}

static void
test_sgemm (Fixture *f, gconstpointer data)
{
  if (f->compute == NULL)
    return;
  g_autoptr (GRand) rng = g_rand_new_with_seed (1234);
  const int shapes[][3] = { { 1, 1, 1 }, { 7, 5, 3 }, { 37, 53, 29 }, { 64, 64, 64 },
                            { 128, 3, 257 } };
  for (guint s = 0; s < G_N_ELEMENTS (shapes); s++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++)
        check_gemm (f, rng, ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 0.75f, -0.5f,
                    s % 2 ? 3 : 0, 1);
  /* beta = 0, rows end to end and with padding between them */
  check_gemm (f, rng, KS_TRANS_N, KS_TRANS_N, 37, 16, 25, 1.0f, 0.0f, 0, 1);
  check_gemm (f, rng, KS_TRANS_N, KS_TRANS_T, 37, 16, 25, 0.5f, 0.0f, 3, 1);
}

static void
test_sgemm_batched (Fixture *f, gconstpointer data)
{
  if (f->compute == NULL)
    return;
  g_autoptr (GRand) rng = g_rand_new_with_seed (99);
  check_gemm (f, rng, KS_TRANS_N, KS_TRANS_T, 9, 11, 13, 1.0f, 0.0f, 2, 4);
  check_gemm (f, rng, KS_TRANS_T, KS_TRANS_N, 16, 8, 5, -2.0f, 1.0f, 0, 3);
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
test_memory (Fixture *f, gconstpointer data)
{
  if (f->compute == NULL)
    return;
  g_autoptr (GError) error = NULL;
  const gsize n = 1000;
  g_autofree float *host = g_new (float, n);
  g_autofree float *back = g_new (float, n);
  float *a = ks_compute_alloc (f->compute, n * sizeof (float), &error);
  float *b = ks_compute_alloc (f->compute, n * sizeof (float), &error);

  g_assert_no_error (error);
  g_assert_cmpuint ((guintptr) a % 64, ==, 0);
  for (gsize i = 0; i < n; i++)
    host[i] = (float) i * 0.5f;
  g_assert_true (ks_compute_copy_to_device (f->compute, a, host, n * sizeof (float), &error));
  g_assert_true (ks_compute_fill_zero (f->compute, b, n * sizeof (float), &error));
  g_assert_true (ks_compute_copy_to_host (f->compute, back, b, n * sizeof (float), &error));
  for (gsize i = 0; i < n; i++)
    g_assert_cmpfloat (back[i], ==, 0.0f);
  g_assert_true (ks_compute_copy_to_host (f->compute, back, a, n * sizeof (float), &error));
  g_assert_cmpmem (back, n * sizeof (float), host, n * sizeof (float));
  g_assert_true (ks_compute_synchronize (f->compute, &error));
  ks_compute_free_memory (f->compute, a);
  ks_compute_free_memory (f->compute, b);

  /* an allocation that cannot succeed is an error, not an abort */
  g_assert_null (ks_compute_alloc (f->compute, G_MAXSIZE / 2, &error));
  g_assert_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_NO_MEMORY);
}

static void
test_threads_setting (Fixture *f, gconstpointer data)
{
  if (f->compute == NULL)
    return;
  g_autoptr (GError) error = NULL;
  g_autofree char *d = ks_compute_describe (f->compute);
  g_assert_true (g_str_has_suffix (d, ", 1 threads"));
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
      g_autofree char *want = g_strdup_printf (", %d threads", cases[i].want);
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
  static const char *const names[] = { "sgemm", "sgemm-strided-batched", "bad-shape", "memory" };
  static const GTestFixtureFunc funcs[] = { (GTestFixtureFunc) test_sgemm,
                                            (GTestFixtureFunc) test_sgemm_batched,
                                            (GTestFixtureFunc) test_bad_shape,
                                            (GTestFixtureFunc) test_memory };
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
