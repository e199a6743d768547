/* The file and TCP stores and the Gloo communicator, with real processes over 127.0.0.1.
 *
 * Each case starts this program again once per rank (`test-comm --rank SCENARIO R N DIR
 * PREFIX TIMEOUT_MS`); a rank checks its own results against values computed here
 * independently and exits non-zero with a message on stderr when one is wrong. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *self;

/* ---- one rank ---- */

#define CHECK(cond, ...) KS_RANK_CHECK ("rank", rank, cond, __VA_ARGS__)
#define OK(call) KS_RANK_OK ("rank", rank, call)

/* The job's store under `prefix`: KS_TEST_DIR is a directory, or tcp:HOST:PORT for a
 * TCP store the test hosts. */
static KsStore *
open_store (KsRegistry *registry, KsConfig *config, const char *prefix, int rank)
{
  const char *where = g_getenv ("KS_TEST_DIR");
  gboolean tcp = g_str_has_prefix (where, "tcp:");
  KsStore *store;
  OK ((store = ks_store_new (registry, config, tcp ? "tcp" : "file", ERR)) != NULL);
  OK (ks_store_open (store, where + (tcp ? 4 : 0), prefix, g_getenv ("KS_STORE_TOKEN"), ERR));
  return store;
}


static KsComm *
join (KsRegistry *registry, KsConfig *config, KsStore *store, int rank, int n, int timeout_ms)
{
  g_autoptr (GError) error = NULL;
  KsComm *comm = ks_comm_new (registry, config, "gloo", &error);
  CHECK (comm != NULL, "%s", error->message);
  OK (ks_comm_connect (comm, store, rank, n, timeout_ms, ERR));
  CHECK (ks_comm_rank (comm) == rank && ks_comm_size (comm) == n, "wrong rank or size");
  return comm;
}

static void
scenario_collectives (KsRegistry *registry, KsConfig *config, KsComm *comm, int rank, int n)
{
  /* every type and op, broadcast, allgather and back-to-back rounds: test-kind-comm */
  /* twice the same signature: the cached algorithm object runs again on new data */
  for (int i = 0; i < 2; i++)
    ks_test_check_allreduce (comm, rank, n, KS_DTYPE_FLOAT32, KS_REDUCE_SUM, 37, 1e-5);
  /* above auto's threshold: halving-doubling */
  ks_test_check_allreduce (comm, rank, n, KS_DTYPE_FLOAT32, KS_REDUCE_SUM, 100003, 1e-5);

  /* allgatherv: rank r gives r + 1 values of r */
  gsize counts[8], total = 0;
  gint32 part[8], gathered[64];
  for (int r = 0; r < n; r++)
    total += counts[r] = r + 1;
  for (int i = 0; i <= rank; i++)
    part[i] = rank;
  OK (ks_comm_allgatherv (comm, part, gathered, counts, KS_DTYPE_INT32, ERR));
  for (int r = 0, k = 0; r < n; r++)
    for (int i = 0; i <= r; i++, k++)
      CHECK (gathered[k] == r, "allgatherv: [%d] = %d, want %d", k, gathered[k], r);

  /* reduce-scatter: block r of the sum */
  double send[8 * 2], got[2];
  for (int i = 0; i < n * 2; i++)
    send[i] = ks_test_rank_value (rank, i);
  OK (ks_comm_reduce_scatter (comm, send, got, 2, KS_DTYPE_FLOAT64, KS_REDUCE_SUM, ERR));
  for (int i = 0; i < 2; i++)
    CHECK (got[i] == ks_test_reduced (KS_REDUCE_SUM, n, rank * 2 + i),
           "reduce_scatter: [%d] = %g", i, got[i]);

  OK (ks_comm_barrier (comm, ERR));

  /* messages around the ring: a send returns once the peer has taken it, so the even
   * ranks send first and the odd ones receive first */
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  char out1[16], out2[16], in1[16] = "", in2[16] = "";
  g_snprintf (out1, sizeof out1, "one from %d", rank);
  g_snprintf (out2, sizeof out2, "two from %d", rank);
  if (rank % 2 == 0)
    {
      OK (ks_comm_send (comm, out1, sizeof out1, next, 1, ERR));
      OK (ks_comm_send (comm, out2, sizeof out2, next, 2, ERR));
      OK (ks_comm_recv (comm, in1, sizeof in1, prev, 1, ERR));
      OK (ks_comm_recv (comm, in2, sizeof in2, prev, 2, ERR));
    }
  else
    {
      OK (ks_comm_recv (comm, in1, sizeof in1, prev, 1, ERR));
      OK (ks_comm_recv (comm, in2, sizeof in2, prev, 2, ERR));
      OK (ks_comm_send (comm, out1, sizeof out1, next, 1, ERR));
      OK (ks_comm_send (comm, out2, sizeof out2, next, 2, ERR));
    }
  g_autofree char *want1 = g_strdup_printf ("one from %d", prev);
  g_autofree char *want2 = g_strdup_printf ("two from %d", prev);
  CHECK (strcmp (in1, want1) == 0 && strcmp (in2, want2) == 0, "recv: got '%s' and '%s'", in1,
         in2);

  /* non-blocking: every rank starts 4 MiB to each neighbour and both receives before it
   * waits for any (blocking sends in this order would wait on each other forever), then
   * waits in another order than it started */
  enum { BIG = 1 << 20 };
  g_autofree gint32 *to_next = g_new (gint32, BIG), *to_prev = g_new (gint32, BIG);
  g_autofree gint32 *from_prev = g_new0 (gint32, BIG), *from_next = g_new0 (gint32, BIG);
  for (int i = 0; i < BIG; i++)
    to_next[i] = rank * BIG + i, to_prev[i] = -(rank * BIG + i);
  KsCommRequest *requests[4];
  {
    g_autoptr (GError) e_ = NULL;
    requests[0] = ks_comm_isend (comm, to_next, BIG * 4, next, 7, ERR);
    requests[1] = ks_comm_isend (comm, to_prev, BIG * 4, prev, 8, ERR);
    requests[2] = ks_comm_irecv (comm, from_prev, BIG * 4, prev, 7, ERR);
    requests[3] = ks_comm_irecv (comm, from_next, BIG * 4, next, 8, ERR);
    CHECK (e_ == NULL, "isend/irecv: %s", e_->message);
  }
  for (int i = 3; i >= 0; i--)
    OK (ks_comm_wait (requests[i], ERR));
  for (int i = 0; i < BIG; i++)
    CHECK (from_prev[i] == prev * BIG + i && from_next[i] == -(next * BIG + i),
           "irecv [%d]: %d from rank %d, %d from rank %d", i, from_prev[i], prev, from_next[i],
           next);
  /* a sub-group of the even ranks sums only their values */
  int evens[4], n_evens = 0;
  for (int r = 0; r < n; r += 2)
    evens[n_evens++] = r;
  if (rank % 2 == 0)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (KsComm) sub = ks_comm_subgroup (comm, evens, n_evens, &error);
      CHECK (sub != NULL, "subgroup: %s", error->message);
      CHECK (ks_comm_rank (sub) == rank / 2 && ks_comm_size (sub) == n_evens,
             "subgroup rank %d of %d", ks_comm_rank (sub), ks_comm_size (sub));
      double v = rank + 1, want = 0;
      for (int i = 0; i < n_evens; i++)
        want += evens[i] + 1;
      OK (ks_comm_allreduce (sub, &v, 1, KS_DTYPE_FLOAT64, KS_REDUCE_SUM, ERR));
      CHECK (v == want, "subgroup sum %g, want %g", v, want);
    }
  /* every explicit algorithm gives the same sums */
  static const char *const algorithms[] = { "ring", "ring_chunked", "halving_doubling", "bcube",
                                             "unbound" };
  for (guint a = 0; a < G_N_ELEMENTS (algorithms); a++)
    {
      if (strcmp (algorithms[a], "bcube") == 0 && (n & (n - 1)) != 0)
        continue; /* bcube needs a power-of-two group */
      g_autofree char *set = g_strdup_printf ("gloo.algorithm=%s", algorithms[a]);
      g_assert_true (ks_config_set_override (config, set, NULL));
      g_autofree char *prefix = g_strdup_printf ("%s-%s", g_getenv ("KS_TEST_PREFIX"), algorithms[a]);
      g_autoptr (KsStore) store = open_store (registry, config, prefix, rank);
      g_autoptr (KsComm) c = join (registry, config, store, rank, n, 20000);
      ks_test_check_allreduce (c, rank, n, KS_DTYPE_FLOAT32, KS_REDUCE_SUM, 10007, 1e-5);
      ks_test_check_allreduce (c, rank, n, KS_DTYPE_INT64, KS_REDUCE_MAX, 5, 1e-5);
    }

  /* last, for it breaks the communicator (Gloo closes a pair whose operation timed out):
   * rank 0's receive that nobody answers ends at the timeout, named, while rank 1 waits */
  if (rank == 0)
    {
      g_autoptr (GError) e_ = NULL;
      gint32 nothing;
      OK (ks_comm_set_timeout (comm, 300, ERR));
      KsCommRequest *lonely = ks_comm_irecv (comm, &nothing, sizeof nothing, 1, 99, ERR);
      CHECK (lonely != NULL, "irecv: %s", e_->message);
      CHECK (!ks_comm_wait (lonely, ERR) && g_error_matches (e_, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT)
                 && strstr (e_->message, "receive of 4 bytes from rank 1 (tag 99)") != NULL
                 && strstr (e_->message, "300") != NULL,
             "a receive nobody answers: %s", e_ != NULL ? e_->message : "it succeeded");
    }
  else if (rank == 1)
    g_usleep (1500 * 1000);
}

/* PaddleCloud's parameter-server form: ranks 0..n-2 trainers, the last a server. */
static void
scenario_roles (KsRegistry *registry, KsConfig *config, KsComm *comm, int rank, int n)
{
  g_autofree char *trainers = g_strdup_printf ("%d", n - 1), *id = g_strdup_printf ("%d", rank);
  g_autoptr (GError) error = NULL;

  g_setenv ("TRAINING_ROLE", rank < n - 1 ? "TRAINER" : "PSERVER", TRUE);
  g_setenv ("PADDLE_TRAINERS_NUM", trainers, TRUE);
  g_setenv ("PADDLE_TRAINER_ID", id, TRUE);
  g_setenv ("PADDLE_PSERVERS_IP_PORT_LIST", "127.0.0.1:1", TRUE);
  g_setenv ("POD_IP", "127.0.0.1", TRUE);
  g_setenv ("PADDLE_PORT", "1", TRUE);
  g_autoptr (KsRoleMaker) role = ks_role_maker_new (registry, config, "paddlecloud", &error);
  CHECK (role != NULL, "%s", error->message);
  OK (ks_role_maker_set_comm (role, comm, ERR));

  gint64 gathered[8];
  OK (ks_role_maker_all_gather (role, 10 * rank, gathered, ERR));
  for (int r = 0; r < n; r++)
    CHECK (gathered[r] == 10 * r, "all_gather [%d] = %" G_GINT64_FORMAT, r, gathered[r]);
  if (ks_role_maker_is_worker (role))
    {
      double in[2] = { rank + 1, -rank }, out[2];
      OK (ks_role_maker_all_reduce_worker (role, in, out, 2, KS_REDUCE_MAX, ERR));
      CHECK (out[0] == n - 1 && out[1] == 0, "all_reduce_worker max: %g %g", out[0], out[1]);
      OK (ks_role_maker_all_reduce_worker (role, in, out, 2, KS_REDUCE_SUM, ERR));
      CHECK (out[0] == (n - 1) * n / 2, "all_reduce_worker sum: %g", out[0]);
      OK (ks_role_maker_barrier_worker (role, ERR));
    }
  else
    {
      double x = 0;
      CHECK (!ks_role_maker_all_reduce_worker (role, &x, &x, 1, KS_REDUCE_SUM, &error)
                 && strstr (error->message, "is for workers, and this process is server 0"),
             "a server's all_reduce_worker should fail");
    }
  OK (ks_role_maker_barrier_all (role, ERR));
}

/* ks_grad_average without a backward (every bucket averaged by finish), in buckets of 4
 * floats over the gradients of p0, p2 and p3, not p1's: the averaged ones are the mean
 * of every rank's, p1's between them stays this rank's own. */
static void
scenario_average (KsComm *comm, int rank, int n)
{
  static const gint64 sizes[] = { 5, 7, 3, 4 };
  CpuFixture f;
  ks_test_cpu_setup (&f, NULL);
  KsModel *model = ks_model_new (f.c); /* freed before its compute */
  g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  g_autoptr (GArray) averaged = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  KsExpr *loss = NULL;

  for (int i = 0; i < 4; i++)
    {
      g_autofree char *name = g_strdup_printf ("p%d", i);
      KsExpr *p, *term;
      OK ((p = ks_model_parameter (model, name, 1, &sizes[i], (KsInit) { KS_INIT_CONSTANT, 1, 0, 0 },
                                   ERR)) != NULL);
      OK ((term = ks_mean (p, ERR)) != NULL);
      OK ((loss = loss == NULL ? term : ks_add (loss, term, ERR)) != NULL);
    }
  OK (ks_model_init (model, ERR));
  OK (ks_model_backward (model, loss, NULL, 0, NULL, pairs, ERR));
  for (guint i = 0; i < pairs->len; i++)
    if (strcmp (ks_expr_name (g_array_index (pairs, KsParamGrad, i).param), "p1") != 0)
      g_array_append_val (averaged, g_array_index (pairs, KsParamGrad, i));
  CHECK (averaged->len == 3, "%u pairs averaged, not 3", averaged->len);

  KsArena *grads = ks_model_gradients (model);
  gsize total = ks_arena_numel (grads);
  g_autofree float *host = g_new (float, total);
  for (gsize j = 0; j < total; j++)
    host[j] = rank * 1000.0f + j;
  OK (ks_compute_copy_to_device (f.c, ks_arena_data (grads), host, total * sizeof (float), ERR));
  KsGradAverage *average = ks_grad_average_new (model, comm, (const KsParamGrad *) averaged->data,
                                                averaged->len, 4);
  OK (ks_grad_average_finish (average, ERR));
  ks_grad_average_free (average);
  OK (ks_compute_copy_to_host (f.c, host, ks_arena_data (grads), total * sizeof (float), ERR));
  for (gsize i = 0; i < ks_arena_count (grads); i++)
    {
      const char *name;
      gsize offset;
      const KsTensor *t = ks_arena_tensor_at (grads, i, &name, &offset);
      gboolean mine = strcmp (name, "p1") == 0;
      for (gsize j = offset; j < offset + t->numel; j++)
        {
          float want = (mine ? rank : (n - 1) / 2.0f) * 1000.0f + j;
          CHECK (host[j] == want, "gradient %s[%zu] is %g, not %g (%s)", name, j - offset,
                 host[j], want, mine ? "not averaged" : "the mean");
        }
    }
  ks_model_free (model);
  ks_test_cpu_teardown (&f);
}

static int
run_rank (char **argv)
{
  const char *scenario = argv[2];
  int rank = atoi (argv[3]), n = atoi (argv[4]), timeout_ms = atoi (argv[7]);
  g_autofree char *gloo = ks_test_build_plugin_dir ("gloo");
  g_autofree char *store_dir = ks_test_build_plugin_dir ("store");
  g_autofree char *roles = ks_test_build_plugin_dir ("roles");
  g_autofree char *path = g_strdup_printf ("%s:%s:%s", gloo, store_dir, roles);
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = ks_test_scan (config, path);

  g_setenv ("KS_TEST_DIR", argv[5], TRUE);
  g_setenv ("KS_TEST_PREFIX", argv[6], TRUE);
  g_autoptr (KsStore) store = open_store (registry, config, argv[6], rank);
  g_autoptr (KsComm) comm = join (registry, config, store, rank, n, timeout_ms);
  if (strcmp (scenario, "collectives") == 0)
    scenario_collectives (registry, config, comm, rank, n);
  else if (strcmp (scenario, "roles") == 0)
    scenario_roles (registry, config, comm, rank, n);
  else if (strcmp (scenario, "average") == 0)
    scenario_average (comm, rank, n);
  else if (strcmp (scenario, "sum") == 0)
    {
      /* the prefix's number in every rank's value: a job meeting another would see it */
      double v = atoi (argv[6] + strlen (argv[6]) - 1) * 1000 + rank;
      double want = atoi (argv[6] + strlen (argv[6]) - 1) * 1000 * n + n * (n - 1) / 2;
      for (int i = 0; i < 20; i++)
        {
          double x = v;
          OK (ks_comm_allreduce (comm, &x, 1, KS_DTYPE_FLOAT64, KS_REDUCE_SUM, ERR));
          CHECK (x == want, "sum %g, want %g", x, want);
        }
    }
  else if (strcmp (scenario, "die") == 0 || strcmp (scenario, "die-reported") == 0)
    {
      /* the last rank leaves after the first allreduce; the others fail the second. It
       * lingers first: closing a socket with unread bytes resets it, which could cut off
       * the first allreduce's last message to a peer still reading it. */
      for (int i = 0; i < 2; i++)
        {
          float x[1000] = { 0 };
          if (i == 1 && rank == n - 1)
            {
              /* die-reported: it failed by itself and said why, as the trainer does */
              if (strcmp (scenario, "die-reported") == 0)
                ks_store_report_failure (store, "rank 2", "step 7: no space left on /ckpt");
              g_usleep (300 * 1000);
              _exit (0);
            }
          OK (ks_comm_allreduce (comm, x, 1000, KS_DTYPE_FLOAT32, KS_REDUCE_SUM, ERR));
        }
    }
  else if (strcmp (scenario, "stall") == 0)
    {
      /* the last rank stalls (as if stopped) for 4 timeouts after the first allreduce;
       * the others say how long their second took to fail */
      for (int i = 0; i < 2; i++)
        {
          float x[1000] = { 0 };
          gint64 start = g_get_monotonic_time ();
          g_autoptr (GError) error = NULL;
          if (i == 1 && rank == n - 1)
            {
              g_usleep ((gulong) timeout_ms * 4000);
              _exit (0);
            }
          if (!ks_comm_allreduce (comm, x, 1000, KS_DTYPE_FLOAT32, KS_REDUCE_SUM, &error))
            {
              g_printerr ("rank %d: failed after %d ms: %s\n", rank,
                          (int) ((g_get_monotonic_time () - start) / 1000), error->message);
              return 1;
            }
        }
    }
  return 0;
}

/* ---- the test cases: start the ranks, collect what they say ---- */

typedef KsTestJob Job;

/* Starts `started` of the `n` ranks of a job. */
static void
start_job (Job *job, const char *scenario, int n, int started, const char *dir,
           const char *prefix, int timeout_ms)
{
  g_autofree char *ns = g_strdup_printf ("%d", n), *ts = g_strdup_printf ("%d", timeout_ms);
  const char *argv[] = { self, "--rank", scenario, "R", ns, dir, prefix, ts, NULL };
  ks_test_start_ranks (job, argv, 3, started);
}

static char *
run_job (const char *scenario, int n, int started, const char *dir, const char *prefix,
         int timeout_ms, int *status)
{
  Job job;
  start_job (&job, scenario, n, started, dir, prefix, timeout_ms);
  return ks_test_wait_ranks (&job, status);
}

static void
assert_job_ok (const char *scenario, int n)
{
  g_autofree char *dir = ks_test_tmpdir ();
  int status[8];
  g_autofree char *err = run_job (scenario, n, n, dir, "job", 20000, status);
  for (int r = 0; r < n; r++)
    if (!g_spawn_check_wait_status (status[r], NULL))
      g_error ("rank %d of %d failed:\n%s", r, n, err);
  ks_test_rmtree (dir);
}

static void
test_collectives_2 (void)
{
  assert_job_ok ("collectives", 2);
}

static void
test_collectives_3 (void)
{
  assert_job_ok ("collectives", 3);
}

static void
test_grad_average (void)
{
  if (ks_test_have_openblas ())
    assert_job_ok ("average", 3);
}

static void
test_role_maker (void)
{
  assert_job_ok ("roles", 3);
}

/* The ranks meet at a TCP store this test hosts, and run every collective. */
static void
test_tcp_store (void)
{
  g_autofree char *dir = ks_test_build_plugin_dir ("store");
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = ks_test_scan (config, dir);
  g_autoptr (GError) error = NULL;
  g_autoptr (KsStore) server = ks_store_new (registry, config, "tcp", &error);
  g_autofree char *bound = NULL;
  int status[8];

  g_assert_no_error (error);
  g_assert_true (ks_store_serve (server, "127.0.0.1:0", "s3cret", &bound, &error));
  g_setenv ("KS_STORE_TOKEN", "s3cret", TRUE);
  g_autofree char *address = g_strconcat ("tcp:", bound, NULL);
  g_autofree char *err = run_job ("collectives", 3, 3, address, "job", 20000, status);
  g_unsetenv ("KS_STORE_TOKEN");
  for (int r = 0; r < 3; r++)
    if (!g_spawn_check_wait_status (status[r], NULL))
      g_error ("rank %d of 3 failed:\n%s", r, err);
}

/* Two jobs in one directory at once, told apart by their prefix. */
static void
test_two_jobs (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  int status1[8], status2[8];
  Job job1, job2;

  start_job (&job1, "sum", 2, 2, dir, "job1", 20000);
  start_job (&job2, "sum", 2, 2, dir, "job2", 20000);
  g_autofree char *e1 = ks_test_wait_ranks (&job1, status1);
  g_autofree char *e2 = ks_test_wait_ranks (&job2, status2);
  for (int r = 0; r < 2; r++)
    if (!g_spawn_check_wait_status (status1[r], NULL)
        || !g_spawn_check_wait_status (status2[r], NULL))
      g_error ("a rank failed:\n%s%s", e1, e2);
  ks_test_rmtree (dir);
}

/* A job name used again in a file store: the earlier job's records (its ranks' addresses,
 * gone now) are removed by the first process of the new job, which says so, and the new
 * job meets; the first job's, started before, saw nothing to remove. */
static void
test_reused_name (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *store = g_build_filename (dir, "job", NULL);
  int status[8];
  g_autofree char *first = run_job ("sum", 3, 3, dir, "job", 20000, status);
  for (int r = 0; r < 3; r++)
    if (!g_spawn_check_wait_status (status[r], NULL))
      g_error ("first job, rank %d failed:\n%s", r, first);
  g_assert_null (strstr (first, "removed"));
  g_autofree char *again = run_job ("sum", 3, 3, dir, "job", 20000, status);
  g_test_message ("%s", again);
  for (int r = 0; r < 3; r++)
    if (!g_spawn_check_wait_status (status[r], NULL))
      g_error ("second job, rank %d failed:\n%s", r, again);
  g_autofree char *want = g_strdup_printf ("file store %s: removed ", store);
  g_assert_nonnull (strstr (again, want));
  g_assert_nonnull (strstr (again, "records of an earlier job named 'job'"));
  ks_test_rmtree (dir);
}

static void
test_missing_rank (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  int status[8];
  g_autofree char *err = run_job ("sum", 3, 2, dir, "job", 1500, status);

  g_test_message ("%s", err);
  for (int r = 0; r < 2; r++)
    g_assert_false (g_spawn_check_wait_status (status[r], NULL));
  g_assert_nonnull (strstr (err, "rank 0: gloo: connect on rank 0 of 3: rank 2 did not join "
                                 "within 1500 ms"));
  g_assert_nonnull (strstr (err, "rank 1: gloo: connect on rank 1 of 3: rank 2 did not join"));
  ks_test_rmtree (dir);
}

static void
test_dead_rank (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  int status[8];
  g_autofree char *err = run_job ("die", 3, 3, dir, "job", 1000, status);

  g_test_message ("%s", err);
  g_assert_true (g_spawn_check_wait_status (status[2], NULL));
  for (int r = 0; r < 2; r++)
    {
      g_autofree char *want = g_strdup_printf ("rank %d: rank 2 did not reach allreduce #2", r);
      g_assert_false (g_spawn_check_wait_status (status[r], NULL));
      g_assert_nonnull (strstr (err, want));
    }
  ks_test_rmtree (dir);
}

/* A rank that failed by itself and said why in the store: the others name it and its
 * cause, before what they saw themselves. */
static void
test_dead_rank_reported (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  int status[8];
  g_autofree char *err = run_job ("die-reported", 3, 3, dir, "job", 1000, status);

  g_test_message ("%s", err);
  for (int r = 0; r < 2; r++)
    {
      g_autofree char *want = g_strdup_printf ("rank %d: rank 2 did not reach allreduce #2", r);
      const char *line = strstr (err, want);
      g_assert_false (g_spawn_check_wait_status (status[r], NULL));
      g_assert_nonnull (line);
      g_autofree char *one = g_strndup (line, strcspn (line, "\n"));
      g_assert_nonnull (strstr (one, ": rank 2 failed: step 7: no space left on /ckpt; on this "
                                     "rank: "));
    }
  ks_test_rmtree (dir);
}

/* A stalled rank (alive, not answering): the others name it after 1.5 timeouts (their
 * own, then half of one for the others to say they timed out too), not 3 as before. */
static void
test_stalled_rank (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  int status[8];
  g_autofree char *err = run_job ("stall", 3, 3, dir, "job", 1000, status);

  g_test_message ("%s", err);
  for (int r = 0; r < 2; r++)
    {
      g_autofree char *want = g_strdup_printf ("rank %d: failed after ", r);
      const char *line = strstr (err, want);
      g_assert_false (g_spawn_check_wait_status (status[r], NULL));
      g_assert_nonnull (line);
      int ms = atoi (line + strlen (want));
      g_assert_nonnull (strstr (line, "rank 2 did not reach allreduce #2 within 1000 ms"));
      g_assert_cmpint (ms, >=, 1000);
      g_assert_cmpint (ms, <, 30000); /* "did not wait forever", not a speed limit */
    }
  ks_test_rmtree (dir);
}

/* ksdist bench allreduce: three ranks, every size from -b to -e by -f as nccl-tests
 * takes them, no wrong value, busbw = algbw · 2(n−1)/n, nccl-tests' closing lines with
 * the average busbw; the JSON form; one process refused. */
static void
test_bench_allreduce (void)
{
  static const char *const plugins[] = { "store", "gloo", NULL };
  g_autofree char *out = NULL, *err = NULL, *json = NULL;
  int status = ks_test_run_ksdist ((const char *const[]) { "bench", "allreduce", "-n", "3",
                                                           "-b", "2K", "-e", "64K", "-f", "2",
                                                           "--iters", "7", "-w", "1", NULL },
                                   NULL, plugins, &out, &err);
  g_auto (GStrv) lines = NULL;
  gsize rows = 0, want = 2048;
  double busbw_sum = 0, avg;
  const char *closing;

  g_test_message ("%s%s", out, err);
  g_assert_cmpint (status, ==, 0);
  g_assert_true (g_str_has_prefix (out, "# ksdist allreduce: 3 ranks, gloo (auto: the shm plugin "
                                        "is not loaded), float32 sum, private memory\n"));
  lines = g_strsplit (out, "\n", -1);
  for (int i = 0; lines[i] != NULL; i++)
    {
      gsize bytes, count, wrong;
      double us, algbw, busbw;
      if (lines[i][0] == '#' || lines[i][0] == '\0')
        continue;
      g_assert_cmpint (sscanf (lines[i], "%zu %zu %lf %lf %lf %zu", &bytes, &count, &us, &algbw,
                               &busbw, &wrong), ==, 6);
      g_assert_cmpuint (bytes, ==, want);
      g_assert_cmpuint (count, ==, bytes / 4);
      g_assert_cmpuint (wrong, ==, 0);
      g_assert_cmpfloat (us, >, 0);
      g_assert_cmpfloat (fabs (busbw - algbw * 4 / 3), <=, 0.002);
      busbw_sum += busbw;
      want *= 2;
      rows++;
    }
  g_assert_cmpuint (rows, ==, 6);
  g_assert_nonnull (strstr (out, "# Out of bounds values : 0 OK\n"));
  g_assert_nonnull (closing = strstr (out, "# Avg bus bandwidth    : "));
  avg = g_ascii_strtod (closing + strlen ("# Avg bus bandwidth    : "), NULL);
  g_assert_cmpfloat (fabs (avg - busbw_sum / rows), <=, 0.002); /* the table's, rounded */

  status = ks_test_run_ksdist ((const char *const[]) { "bench", "allreduce", "--json",
                                                       "--max-bytes", "16384", "--set",
                                                       "gloo.algorithm=unbound", NULL },
                               NULL, plugins, &json, NULL);
  g_assert_cmpint (status, ==, 0);
  g_assert_true (g_str_has_prefix (json, "{\"what\": \"allreduce\", \"comm\": \"gloo\", "
                                         "\"chosen_by\": \"auto: the shm plugin is not loaded\", "
                                         "\"ranks\": 2, \"memory\": \"private\","));
  g_assert_nonnull (strstr (json, "{\"bytes\": 16384, \"count\": 4096, \"time_us\": "));
  g_assert_null (strstr (json, "65536"));
  g_assert_nonnull (strstr (json, "], \"wrong\": 0, \"avg_busbw\": "));

  g_clear_pointer (&err, g_free);
  status = ks_test_run_ksdist ((const char *const[]) { "bench", "allreduce", "-n", "1", NULL },
                               NULL, plugins, NULL, &err);
  g_assert_cmpint (status, ==, 2);
  g_assert_nonnull (strstr (err, "an allreduce needs 2 processes or more"));

  /* with shared memory at hand, auto measures what a job launched here uses */
  static const char *const with_shm[] = { "store", "gloo", "shm", NULL };
  g_clear_pointer (&out, g_free);
  status = ks_test_run_ksdist ((const char *const[]) { "bench", "allreduce", "-e", "16K", NULL },
                               NULL, with_shm, &out, NULL);
  g_assert_cmpint (status, ==, 0);
  g_assert_true (g_str_has_prefix (out, "# ksdist allreduce: 2 ranks, shm (auto: every rank on "
                                        "this host, as a job launched here), float32 sum, "
                                        "private memory\n"));
  g_assert_nonnull (strstr (out, "# Out of bounds values : 0 OK\n"));

  /* --shared: the sums in alloc_shared memory (data parallel's gradients), three ranks and
   * an odd size; refused, naming the plugin, where the backend has no such memory */
  g_clear_pointer (&out, g_free);
  status = ks_test_run_ksdist ((const char *const[]) { "bench", "allreduce", "-n", "3", "-b", "4K",
                                                       "-e", "300K", "-f", "5", "--shared", NULL },
                               NULL, with_shm, &out, NULL);
  g_assert_cmpint (status, ==, 0);
  g_assert_nonnull (strstr (out, "float32 sum, shared (alloc_shared) memory\n"));
  g_assert_nonnull (strstr (out, "\n      102400      25600 "));
  g_assert_nonnull (strstr (out, "# Out of bounds values : 0 OK\n"));
  g_clear_pointer (&err, g_free);
  status = ks_test_run_ksdist ((const char *const[]) { "bench", "allreduce", "-e", "16K",
                                                       "--shared", NULL },
                               NULL, plugins, NULL, &err);
  g_assert_cmpint (status, !=, 0);
  g_assert_nonnull (strstr (err, "alloc_shared is not supported by plugin 'gloo'"));
}

int
main (int argc, char **argv)
{
  self = argv[0];
  if (argc == 8 && strcmp (argv[1], "--rank") == 0)
    return run_rank (argv);
  g_test_init (&argc, &argv, NULL);
  g_autofree char *gloo = ks_test_build_plugin_dir ("gloo");
  g_autofree char *so = g_build_filename (gloo, "gloo.so", NULL);
  if (!g_file_test (so, G_FILE_TEST_EXISTS))
    {
      g_test_skip ("the gloo plugin was not built (apt-get install libgloo-dev, reconfigure)");
      return g_test_run ();
    }
  g_test_add_func ("/comm/gloo/collectives-2", test_collectives_2);
  g_test_add_func ("/comm/gloo/collectives-3", test_collectives_3);
  g_test_add_func ("/comm/gloo/grad-average", test_grad_average);
  g_test_add_func ("/comm/gloo/role-maker", test_role_maker);
  g_test_add_func ("/comm/gloo/tcp-store", test_tcp_store);
  g_test_add_func ("/comm/gloo/two-jobs", test_two_jobs);
  g_test_add_func ("/comm/gloo/reused-name", test_reused_name);
  g_test_add_func ("/comm/gloo/missing-rank", test_missing_rank);
  g_test_add_func ("/comm/gloo/dead-rank", test_dead_rank);
  g_test_add_func ("/comm/gloo/dead-rank-reported", test_dead_rank_reported);
  g_test_add_func ("/comm/gloo/stalled-rank", test_stalled_rank);
  g_test_add_func ("/comm/gloo/bench-allreduce", test_bench_allreduce);
  return g_test_run ();
}
