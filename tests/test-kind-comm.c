/* The communicator conformance suite: the same scenarios against every communicator
 * found (shm, gloo, nccl in the build tree; or only the plugin KS_KIND_PLUGIN names, as
 * `make check-plugin PLUGIN=path/x.so` runs it), one process per rank over 127.0.0.1.
 * An implementation whose traits say it moves device memory skips the host scenarios.
 * Plugin-specific checks stay in test-comm.c (gloo) and test-shm.c (shm). */
#include "testutil.h"

#include <string.h>

static const char *self;

#define CHECK(cond, ...) KS_RANK_CHECK ("rank", rank, cond, __VA_ARGS__)
#define OK(call) KS_RANK_OK ("rank", rank, call)

/* Allreduce of every type and op, broadcast, allgather, reduce-scatter and barrier,
 * each checked against values computed here. */
static void
scenario_collectives (KsComm *comm, int rank, int n)
{
  static const KsDType types[] = { KS_DTYPE_FLOAT32, KS_DTYPE_FLOAT64, KS_DTYPE_INT32,
                                   KS_DTYPE_INT64 };
  static const KsReduceOp ops[] = { KS_REDUCE_SUM, KS_REDUCE_MIN, KS_REDUCE_MAX, KS_REDUCE_PROD };

  for (guint t = 0; t < G_N_ELEMENTS (types); t++)
    for (guint o = 0; o < G_N_ELEMENTS (ops); o++)
      ks_test_check_allreduce (comm, rank, n, types[t], ops[o], 37, 1e-5);
  ks_test_check_allreduce (comm, rank, n, KS_DTYPE_FLOAT32, KS_REDUCE_AVG, 1000, 1e-5);
  ks_test_check_allreduce (comm, rank, n, KS_DTYPE_FLOAT32, KS_REDUCE_SUM, 300000, 1e-5);
  ks_test_check_rounds (comm, rank, n);

  gint64 b[5];
  for (int i = 0; i < 5; i++)
    b[i] = rank == n - 1 ? 100 + i : -1;
  OK (ks_comm_broadcast (comm, b, 5, KS_DTYPE_INT64, n - 1, ERR));
  for (int i = 0; i < 5; i++)
    CHECK (b[i] == 100 + i, "broadcast: [%d] = %" G_GINT64_FORMAT, i, b[i]);

  float mine[3], all[3 * 8];
  for (int i = 0; i < 3; i++)
    mine[i] = rank * 1000 + i;
  OK (ks_comm_allgather (comm, mine, all, 3, KS_DTYPE_FLOAT32, ERR));
  for (int r = 0; r < n; r++)
    for (int i = 0; i < 3; i++)
      CHECK (all[r * 3 + i] == r * 1000 + i, "allgather: block %d [%d] = %g", r, i,
             all[r * 3 + i]);

  double send[2 * 8], got[2];
  ks_test_fill_rank (send, KS_DTYPE_FLOAT64, rank, 2 * n);
  OK (ks_comm_reduce_scatter (comm, send, got, 2, KS_DTYPE_FLOAT64, KS_REDUCE_SUM, ERR));
  for (int i = 0; i < 2; i++)
    {
      double want = ks_test_reduced (KS_REDUCE_SUM, n, rank * 2 + i);
      CHECK (got[i] == want, "reduce_scatter: [%d] = %g, want %g", i, got[i], want);
    }
  OK (ks_comm_barrier (comm, ERR));
}

/* argv: --rank PLUGIN_DIR NAME R N STORE_DIR */
static int
run_rank (char **argv)
{
  int rank = atoi (argv[4]), n = atoi (argv[5]);
  g_autofree char *store_dir = ks_test_build_plugin_dir ("store");
  g_autofree char *path = g_strdup_printf ("%s:%s", argv[2], store_dir);
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = ks_test_scan (config, path);
  KsStore *store;
  KsComm *comm;

  OK ((store = ks_store_new (registry, config, "file", ERR)) != NULL);
  OK (ks_store_open (store, argv[6], "kind", NULL, ERR));
  OK ((comm = ks_comm_new (registry, config, argv[3], ERR)) != NULL);
  OK (ks_comm_connect (comm, store, rank, n, 20000, ERR));
  CHECK (ks_comm_rank (comm) == rank && ks_comm_size (comm) == n, "wrong rank or size");
  scenario_collectives (comm, rank, n);
  ks_comm_free (comm);
  ks_store_free (store);
  return 0;
}

typedef struct {
  char *dir, *name;
  int n;
} Case;

static void
test_case (gconstpointer data)
{
  const Case *c = data;
  g_autofree char *store = ks_test_tmpdir ();
  g_autofree char *ns = g_strdup_printf ("%d", c->n);
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = ks_test_scan (config, c->dir);
  guint32 traits = 0;
  KsTestJob job;
  int status[8];

  if (!ks_registry_traits (registry, KS_KIND_COMM, c->name, &traits))
    {
      g_autofree char *why = g_strdup_printf ("no communicator %s in %s (not built, or the "
                                              "plugin is of another kind)", c->name, c->dir);
      g_test_skip (why);
      return;
    }
  if (traits & KS_COMM_DEVICE_MEMORY)
    {
      g_autofree char *why = g_strdup_printf ("%s moves device memory: the host scenarios "
                                              "do not apply", c->name);
      g_test_skip (why);
      return;
    }
  const char *argv[] = { self, "--rank", c->dir, c->name, "R", ns, store, NULL };
  ks_test_start_ranks (&job, argv, 4, c->n);
  g_autofree char *err = ks_test_wait_ranks (&job, status);
  for (int r = 0; r < c->n; r++)
    if (!g_spawn_check_wait_status (status[r], NULL))
      g_error ("%s: rank %d of %d failed:\n%s", c->name, r, c->n, err);
  ks_test_rmtree (store);
}

static void
add_cases (const char *dir, const char *name)
{
  for (int n = 2; n <= 3; n++)
    {
      Case *c = g_new0 (Case, 1); /* lives as long as the test run */
      g_autofree char *p = g_strdup_printf ("/kind-comm/%s/collectives-%d", name, n);
      c->dir = g_strdup (dir);
      c->name = g_strdup (name);
      c->n = n;
      g_test_add_data_func (p, c, test_case);
    }
}

int
main (int argc, char **argv)
{
  self = argv[0];
  if (argc == 7 && strcmp (argv[1], "--rank") == 0)
    return run_rank (argv);
  g_test_init (&argc, &argv, NULL);
  const char *plugin = g_getenv ("KS_KIND_PLUGIN");
  if (plugin != NULL && *plugin != '\0')
    {
      g_autofree char *dir = g_path_get_dirname (plugin), *base = g_path_get_basename (plugin);
      if (g_str_has_suffix (base, ".so"))
        base[strlen (base) - 3] = '\0';
      add_cases (dir, g_str_has_prefix (base, "lib") ? base + 3 : base);
      return g_test_run ();
    }
  static const char *const names[] = { "shm", "gloo", "nccl" };
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *dir = ks_test_build_plugin_dir (names[i]);
      add_cases (dir, names[i]);
    }
  return g_test_run ();
}
