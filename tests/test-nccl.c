/* The NCCL communicator on one GPU: a world of one rank (one GPU cannot hold two ranks of
 * an NCCL communicator) bootstrapped through a file store, its collectives on CUDA device
 * memory from the cuda compute plugin, bad peers and roots refused, the compute plugin's
 * stream shared, a sub-group, and a damaged unique id. Skipped, with the reason, without
 * the plugin or a GPU. */
#include "testutil.h"

#include <string.h>

static char *skip_reason;

static KsRegistry *
scan (KsConfig *config)
{
  const char *root = g_getenv ("KS_BUILD_PLUGINS");
  g_autofree char *path = g_strdup_printf ("%s/nccl/.libs:%s/cuda/.libs:%s/store/.libs", root,
                                           root, root);
  ks_test_clear_env ();
  return ks_test_scan (config, path);
}

static char *
unusable (void)
{
  g_autofree char *plugin = g_build_filename (g_getenv ("KS_BUILD_PLUGINS"), "nccl", ".libs",
                                              "nccl.so", NULL);
  if (!g_file_test (plugin, G_FILE_TEST_EXISTS))
    return g_strdup ("the NCCL plugin was not built (configure found no CUDA or NCCL)");
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = scan (config);
  g_autoptr (GError) error = NULL;
  if (ks_registry_select (registry, KS_KIND_COMM, "nccl", NULL, &error) == NULL
      || ks_registry_select (registry, KS_KIND_COMPUTE, "cuda", NULL, &error) == NULL)
    return g_strdup_printf ("no usable GPU: %s", error->message);
  return NULL;
}

static void
test_skipped (void)
{
  g_test_skip (skip_reason);
}

static void
test_world_of_one (void)
{
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = scan (config);
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = ks_test_tmpdir ();
  enum { COUNT = 1000 };
  float host[COUNT], back[COUNT * 2];

  g_assert_true (ks_config_validate (config, &error));
  g_autoptr (KsCompute) gpu = ks_compute_new (registry, config, "cuda", &error);
  g_autoptr (KsStore) store = ks_store_new (registry, config, "file", &error);
  g_assert_no_error (error);
  g_assert_true (ks_store_open (store, dir, "nccl-test", NULL, &error));
  KsComm *comm = ks_comm_new (registry, config, "nccl", &error);
  g_assert_no_error (error);
  g_assert_true (ks_comm_connect (comm, store, 0, 1, 20000, &error));
  g_assert_no_error (error);
  g_assert_cmpint (ks_comm_rank (comm), ==, 0);
  g_assert_cmpint (ks_comm_size (comm), ==, 1);

  for (int i = 0; i < COUNT; i++)
    host[i] = i * 0.5f - 7;
  float *d = ks_compute_alloc (gpu, sizeof back, &error);
  g_assert_true (ks_compute_copy_to_device (gpu, d, host, sizeof host, &error));
  /* one rank: every reduction is the identity, the gather a copy */
  const KsReduceOp ops[] = { KS_REDUCE_SUM, KS_REDUCE_MAX, KS_REDUCE_AVG };
  for (gsize o = 0; o < G_N_ELEMENTS (ops); o++)
    {
      g_assert_true (ks_comm_allreduce (comm, d, COUNT, KS_DTYPE_FLOAT32, ops[o], &error));
      g_assert_no_error (error);
      g_assert_true (ks_compute_copy_to_host (gpu, back, d, sizeof host, &error));
      g_assert_cmpmem (back, sizeof host, host, sizeof host);
    }
  g_assert_true (ks_comm_broadcast (comm, d, COUNT, KS_DTYPE_FLOAT32, 0, &error));
  g_assert_true (ks_comm_allgather (comm, d, d + COUNT, COUNT, KS_DTYPE_FLOAT32, &error));
  g_assert_true (ks_compute_copy_to_host (gpu, back, d + COUNT, sizeof host, &error));
  g_assert_cmpmem (back, sizeof host, host, sizeof host);
  g_assert_true (ks_comm_reduce_scatter (comm, d, d + COUNT, COUNT, KS_DTYPE_FLOAT32,
                                         KS_REDUCE_SUM, &error));
  g_assert_true (ks_comm_barrier (comm, &error));
  g_assert_no_error (error);
  /* a peer that is not another rank: an error, nothing queued */
  g_assert_false (ks_comm_send (comm, d, 4, 0, 0, &error));
  g_assert_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (ks_comm_broadcast (comm, d, COUNT, KS_DTYPE_FLOAT32, 3, &error));
  g_assert_nonnull (strstr (error->message, "rank 3"));
  g_clear_error (&error);
  g_assert_true (ks_comm_barrier (comm, &error)); /* still usable */

  /* on the compute plugin's stream, and a sub-group (a new communicator through the
   * store) that shares it: the kernel that writes the buffer comes first */
  g_assert_true (ks_comm_use_compute (comm, gpu, &error));
  KsComm *sub = ks_comm_subgroup (comm, (const int[]) { 0 }, 1, &error);
  g_assert_no_error (error);
  g_assert_true (ks_compute_fill_zero (gpu, d, sizeof host, &error));
  g_assert_true (ks_comm_allreduce (sub, d, COUNT, KS_DTYPE_FLOAT32, KS_REDUCE_SUM, &error));
  g_assert_true (ks_comm_allreduce (comm, d, COUNT, KS_DTYPE_FLOAT32, KS_REDUCE_SUM, &error));
  g_assert_true (ks_compute_copy_to_host (gpu, back, d, sizeof host, &error));
  g_assert_no_error (error);
  for (int i = 0; i < COUNT; i++)
    g_assert_cmpfloat (back[i], ==, 0);
  ks_comm_free (sub);

  ks_comm_free (comm);
  ks_compute_free_memory (gpu, d);
  ks_test_rmtree (dir);
}

/* The ncclUniqueId a rank reads from the store is checked before use */
static void
test_bad_id (void)
{
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = scan (config);
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = ks_test_tmpdir ();

  g_assert_true (ks_config_validate (config, &error));
  g_autoptr (KsStore) store = ks_store_new (registry, config, "file", &error);
  g_assert_true (ks_store_open (store, dir, "nccl-bad", NULL, &error));
  g_assert_true (ks_store_set (store, "nccl/unique_id", "short", 5, &error));
  KsComm *comm = ks_comm_new (registry, config, "nccl", &error);
  g_assert_no_error (error);
  g_assert_false (ks_comm_connect (comm, store, 1, 2, 2000, &error));
  g_assert_nonnull (strstr (error->message, "not an ncclUniqueId"));
  ks_comm_free (comm);
  ks_test_rmtree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if ((skip_reason = unusable ()) != NULL)
    {
      g_test_add_func ("/nccl/world-of-one", test_skipped);
      return g_test_run ();
    }
  g_test_add_func ("/nccl/world-of-one", test_world_of_one);
  g_test_add_func ("/nccl/bad-id", test_bad_id);
  return g_test_run ();
}
