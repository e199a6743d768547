/* The shared-memory communicator, with real processes on this host meeting at a file
 * store. Each case starts this program again once per rank (`test-shm --rank SCENARIO R
 * N DIR TIMEOUT_MS`); a rank checks its results against values computed here and exits
 * non-zero with a message on stderr when one is wrong. No case leaves a segment in
 * /dev/shm. */
#include "testutil.h"
#include "shm-faults.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *self;

#define CHECK(cond, ...) KS_RANK_CHECK ("rank", rank, cond, __VA_ARGS__)
#define OK(call) KS_RANK_OK ("rank", rank, call)

/* ---- one rank ---- */


/* rank r's float32 element i: not exact in float, so a sum in another order differs */
static float
inexact (int r, gsize i)
{
  return (float) ((i % 13 + 1) / (r + 3.0) + 1e-3 * (double) i);
}

/* A float32 sum is each element's, in rank order, bit for bit (what every bitwise test
 * of a data-parallel job against one process rests on); NaN and infinity pass through;
 * counts that end in a vector's tail and span rounds. `v` holds count floats: private
 * memory, or this rank's part of memory from alloc_shared. */
static void
check_rank_order (KsComm *comm, int rank, int n, gsize count, float *v)
{
  g_autofree float *want = g_new (float, count);
  for (gsize i = 0; i < count; i++)
    {
      v[i] = inexact (rank, i);
      want[i] = inexact (0, i);
      for (int r = 1; r < n; r++)
        want[i] += inexact (r, i);
    }
  v[count / 2] = rank == 0 ? NAN : 1.0f;
  v[count - 1] = rank == n - 1 ? -INFINITY : 2.0f;
  OK (ks_comm_allreduce (comm, v, count, KS_DTYPE_FLOAT32, KS_REDUCE_SUM, ERR));
  CHECK (isnan (v[count / 2]) && v[count - 1] == -INFINITY, "NaN and -inf became %g and %g",
         v[count / 2], v[count - 1]);
  v[count / 2] = want[count / 2] = v[count - 1] = want[count - 1] = 0;
  CHECK (memcmp (v, want, count * sizeof (float)) == 0,
         "the float32 sum of %" G_GSIZE_FORMAT " is not each element's in rank order", count);
}

/* Every operation, type and reduction; counts of one element, odd ones, and ones that
 * take several rounds of the 256 KiB chunk. */
static void
scenario_collectives (KsComm *comm, int rank, int n)
{
  static const KsDType types[] = { KS_DTYPE_FLOAT32, KS_DTYPE_FLOAT64, KS_DTYPE_INT32,
                                   KS_DTYPE_INT64 };
  static const KsReduceOp ops[] = { KS_REDUCE_SUM, KS_REDUCE_MIN, KS_REDUCE_MAX, KS_REDUCE_AVG,
                                    KS_REDUCE_PROD };
  static const gsize counts[] = { 1, 37, 262147, 700001 };

  for (guint t = 0; t < G_N_ELEMENTS (types); t++)
    for (guint o = 0; o < G_N_ELEMENTS (ops); o++)
      for (guint c = 0; c < G_N_ELEMENTS (counts); c++)
        if ((c < 2 || o == 0 || (o == 3 && t == 0)) /* an average is of floats */
            && (ops[o] != KS_REDUCE_AVG || t < 2))
          ks_test_check_allreduce (comm, rank, n, types[t], ops[o], counts[c], 1e-6);
  for (guint c = 1; c < G_N_ELEMENTS (counts); c++)
    {
      g_autofree float *v = g_new (float, counts[c]);
      check_rank_order (comm, rank, n, counts[c], v);
    }

  /* broadcast from the last rank: 5 values, and 300000 (several rounds) */
  for (gsize count = 5; count <= 300000; count *= 60000)
    {
      g_autofree gint64 *b = g_new (gint64, count);
      for (gsize i = 0; i < count; i++)
        b[i] = rank == n - 1 ? (gint64) (100 + i) : -1;
      OK (ks_comm_broadcast (comm, b, count, KS_DTYPE_INT64, n - 1, ERR));
      for (gsize i = 0; i < count; i++)
        CHECK (b[i] == (gint64) (100 + i), "broadcast of %" G_GSIZE_FORMAT ": [%" G_GSIZE_FORMAT
               "] = %" G_GINT64_FORMAT, count, i, b[i]);
    }

  /* allgather: rank r's block is r * 1e6 + i; 3 values, and 300001 each */
  for (gsize count = 3; count <= 300001; count = count * 100000 + 1)
    {
      g_autofree float *mine = g_new (float, count), *all = g_new (float, count * n);
      for (gsize i = 0; i < count; i++)
        mine[i] = rank * 1e6 + i;
      OK (ks_comm_allgather (comm, mine, all, count, KS_DTYPE_FLOAT32, ERR));
      for (int r = 0; r < n; r++)
        for (gsize i = 0; i < count; i++)
          CHECK (all[r * count + i] == (float) (r * 1e6 + i), "allgather of %" G_GSIZE_FORMAT
                 ": block %d [%" G_GSIZE_FORMAT "] = %g", count, r, i, all[r * count + i]);
    }

  /* back to back, each round's values new: a fast rank's next round must not land in a
   * slow rank's result of this one */
  ks_test_check_rounds (comm, rank, n);

  /* allgatherv, uneven: rank r gives r * 150000 + 1 values of r (one rank one value, the
   * others several rounds) */
  g_autofree gsize *sizes = g_new (gsize, n);
  gsize total = 0;
  for (int r = 0; r < n; r++)
    total += sizes[r] = r * 150000 + 1;
  g_autofree gint32 *part = g_new (gint32, sizes[rank]), *gathered = g_new (gint32, total);
  for (gsize i = 0; i < sizes[rank]; i++)
    part[i] = rank * 1000000 + i;
  OK (ks_comm_allgatherv (comm, part, gathered, sizes, KS_DTYPE_INT32, ERR));
  for (int r = 0, k = 0; r < n; r++)
    for (gsize i = 0; i < sizes[r]; i++, k++)
      CHECK (gathered[k] == (gint32) (r * 1000000 + i), "allgatherv: [%d] = %d", k, gathered[k]);

  /* reduce-scatter: block r of the reduction, 2 and 300001 elements a block */
  for (gsize count = 2; count <= 300001; count = count * 150000 + 1)
    for (guint o = 0; o < G_N_ELEMENTS (ops); o += 3)
      {
        g_autofree double *send = g_new (double, count * n), *got = g_new (double, count);
        ks_test_fill_rank (send, KS_DTYPE_FLOAT64, rank, count * n);
        OK (ks_comm_reduce_scatter (comm, send, got, count, KS_DTYPE_FLOAT64, ops[o], ERR));
        /* and in place: the result over this rank's own block of send */
        double *own = send + rank * count;
        OK (ks_comm_reduce_scatter (comm, send, own, count, KS_DTYPE_FLOAT64, ops[o], ERR));
        for (gsize i = 0; i < count; i++)
          {
            double want = ks_test_reduced (ops[o], n, rank * count + i);
            CHECK (got[i] == want && own[i] == want, "reduce_scatter %s of %" G_GSIZE_FORMAT
                   ": [%" G_GSIZE_FORMAT "] = %g (in place %g), want %g",
                   ks_reduce_op_name (ops[o]), count, i, got[i], own[i], want);
          }
      }

  OK (ks_comm_barrier (comm, ERR));

  /* a type shared memory does not move: refused, naming it */
  {
    g_autoptr (GError) e_ = NULL;
    guint16 h[4] = { 0 };
    CHECK (!ks_comm_allreduce (comm, h, 4, KS_DTYPE_FLOAT16, KS_REDUCE_SUM, ERR)
               && g_error_matches (e_, KS_COMM_ERROR, KS_COMM_ERROR_INVALID)
               && strstr (e_->message, "allreduce of float16") != NULL,
           "float16: %s", e_ != NULL ? e_->message : "accepted");
  }
  OK (ks_comm_barrier (comm, ERR));
}

/* Rank r's message number k: `bytes` bytes, each a function of (r, k, i). */
static guint8 *
message (int r, int k, gsize bytes)
{
  guint8 *m = g_malloc (bytes);
  for (gsize i = 0; i < bytes; i++)
    m[i] = (guint8) (r * 31 + k * 7 + i * 13 + i / 251);
  return m;
}

#define CHECK_MESSAGE(got, r, k, bytes)                                                   \
  G_STMT_START                                                                            \
  {                                                                                       \
    g_autofree guint8 *want_ = message ((r), (k), (bytes));                               \
    CHECK ((bytes) == 0 || memcmp ((got), want_, (bytes)) == 0, "message %d of rank %d (%"  \
           G_GSIZE_FORMAT                                                                 \
           " bytes) arrived wrong", (k), (r), (gsize) (bytes));                           \
  }                                                                                       \
  G_STMT_END

/* Tagged messages: around the ring, small (in the descriptor) and large (read from the
 * sender), tags received in another order than sent, one tag in order, more messages in
 * flight than an inbox holds, and a size the receiver did not expect. */
static void
scenario_p2p (KsComm *comm, int rank, int n)
{
  static const gsize sizes[] = { 0, 16, 192, 193, 3 << 20 };
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;

  for (guint k = 0; k < G_N_ELEMENTS (sizes); k++)
    {
      g_autofree guint8 *out = message (rank, k, sizes[k]), *in = g_malloc (sizes[k] + 1);
      KsCommRequest *r;
      OK ((r = ks_comm_isend (comm, out, sizes[k], next, k, ERR)) != NULL);
      OK (ks_comm_recv (comm, in, sizes[k], prev, k, ERR));
      OK (ks_comm_wait (r, ERR));
      CHECK_MESSAGE (in, prev, (int) k, sizes[k]);
    }
  if (rank == 0)
    {
      /* tags 1, 2, 3 (large, small, large) sent in order, received 3, 1, 2 */
      g_autofree guint8 *a = message (0, 1, 100000), *b = message (0, 2, 40),
                        *c = message (0, 3, 70000);
      KsCommRequest *r[3];
      OK ((r[0] = ks_comm_isend (comm, a, 100000, 1, 1, ERR)) != NULL);
      OK ((r[1] = ks_comm_isend (comm, b, 40, 1, 2, ERR)) != NULL);
      OK ((r[2] = ks_comm_isend (comm, c, 70000, 1, 3, ERR)) != NULL);
      for (int i = 0; i < 3; i++)
        OK (ks_comm_wait (r[i], ERR));
      /* 2500 messages of one tag, more than an inbox holds */
      for (guint32 k = 0; k < 2500; k++)
        OK (ks_comm_send (comm, &k, sizeof k, 1, 9, ERR));
      OK (ks_comm_send (comm, &rank, sizeof rank, 1, 77, ERR));
    }
  else if (rank == 1)
    {
      g_autofree guint8 *a = g_malloc (100000), *b = g_malloc (40), *c = g_malloc (70000);
      KsCommRequest *r[3];
      OK ((r[2] = ks_comm_irecv (comm, c, 70000, 0, 3, ERR)) != NULL);
      OK ((r[0] = ks_comm_irecv (comm, a, 100000, 0, 1, ERR)) != NULL);
      OK ((r[1] = ks_comm_irecv (comm, b, 40, 0, 2, ERR)) != NULL);
      OK (ks_comm_wait (r[2], ERR));
      OK (ks_comm_wait (r[0], ERR));
      OK (ks_comm_wait (r[1], ERR));
      CHECK_MESSAGE (a, 0, 1, 100000);
      CHECK_MESSAGE (b, 0, 2, 40);
      CHECK_MESSAGE (c, 0, 3, 70000);
      for (guint32 k = 0; k < 2500; k++)
        {
          guint32 got = G_MAXUINT32;
          OK (ks_comm_recv (comm, &got, sizeof got, 0, 9, ERR));
          CHECK (got == k, "message %u of tag 9 arrived as %u", k, got);
        }
      g_autoptr (GError) e_ = NULL;
      gint64 wide[2];
      CHECK (!ks_comm_recv (comm, wide, sizeof wide, 0, 77, ERR)
                 && strstr (e_->message, "receive of 16 bytes with tag 77 from rank 0 on rank 1: "
                                         "the message has 4 bytes") != NULL,
             "a message of the wrong size: %s", e_ != NULL ? e_->message : "accepted");
    }
}

/* Sub-groups: the even and the odd ranks, twice each (two groups of the same ranks are
 * apart), used for collectives and messages; and a group of this rank alone. */
static void
scenario_groups (KsComm *comm, int rank, int n)
{
  g_autofree int *members = g_new (int, n);
  int m = 0, alone[1] = { rank };
  for (int r = rank % 2; r < n; r += 2)
    members[m++] = r;
  g_autoptr (KsComm) g1 = NULL, g2 = NULL, solo = NULL;
  OK ((g1 = ks_comm_subgroup (comm, members, m, ERR)) != NULL);
  OK ((g2 = ks_comm_subgroup (comm, members, m, ERR)) != NULL);
  OK ((solo = ks_comm_subgroup (comm, alone, 1, ERR)) != NULL);
  CHECK (ks_comm_size (g1) == m && ks_comm_rank (g1) == rank / 2, "group rank %d of %d",
         ks_comm_rank (g1), ks_comm_size (g1));
  for (int round = 0; round < 3; round++)
    {
      double x = rank + round, y = 10 * rank + round, want_x = 0, want_y = 0;
      for (int i = 0; i < m; i++)
        want_x += members[i] + round, want_y += 10 * members[i] + round;
      OK (ks_comm_allreduce (g2, &y, 1, KS_DTYPE_FLOAT64, KS_REDUCE_SUM, ERR));
      OK (ks_comm_allreduce (g1, &x, 1, KS_DTYPE_FLOAT64, KS_REDUCE_SUM, ERR));
      OK (ks_comm_allreduce (solo, &y, 1, KS_DTYPE_FLOAT64, KS_REDUCE_SUM, ERR));
      CHECK (x == want_x && y == want_y, "group sums %g %g, want %g %g", x, y, want_x, want_y);
    }
  if (m > 1)
    {
      int me = ks_comm_rank (g1), to = (me + 1) % m, from = (me + m - 1) % m;
      g_autofree guint8 *out = message (rank, 5, 50000), *in = g_malloc (50000);
      KsCommRequest *r;
      OK ((r = ks_comm_isend (g1, out, 50000, to, 4, ERR)) != NULL);
      OK (ks_comm_recv (g1, in, 50000, from, 4, ERR));
      OK (ks_comm_wait (r, ERR));
      CHECK_MESSAGE (in, members[from], 5, 50000);
    }
  OK (ks_comm_barrier (comm, ERR));
}

/* Allreduce in memory from alloc_shared (no staging copies): every type and reduction,
 * at an offset, across several chunks; the same bits as through the slots (private
 * buffers), the values as computed; then ranks that disagree on where their buffer is
 * are refused. */
static void
scenario_shared (KsComm *comm, int rank, int n)
{
  static const KsDType types[] = { KS_DTYPE_FLOAT32, KS_DTYPE_FLOAT64, KS_DTYPE_INT32,
                                   KS_DTYPE_INT64 };
  static const KsReduceOp ops[] = { KS_REDUCE_SUM, KS_REDUCE_MIN, KS_REDUCE_MAX, KS_REDUCE_AVG,
                                    KS_REDUCE_PROD };
  static const gsize counts[] = { 1, 37, 300001 };
  const gsize at = 3, most = 300001 + at;
  guint8 *shared, *other;

  OK ((shared = ks_comm_alloc_shared (comm, most * 8, ERR)) != NULL);
  OK ((other = ks_comm_alloc_shared (comm, 100, ERR)) != NULL);
  memset (shared, 0xab, most * 8); /* all of it this rank's to write */
  memset (other, 0xcd, 100);
  for (guint t = 0; t < G_N_ELEMENTS (types); t++)
    for (guint o = 0; o < G_N_ELEMENTS (ops); o++)
      for (guint c = 0; c < G_N_ELEMENTS (counts); c++)
        {
          gsize count = counts[c], es = ks_dtype_size (types[t]);
          g_autofree guint8 *private = g_malloc (count * es);
          guint8 *mine = shared + at * es;
          if (ops[o] == KS_REDUCE_AVG && t >= 2)
            continue;
          ks_test_fill_rank (private, types[t], rank, count);
          ks_test_fill_rank (mine, types[t], rank, count);
          OK (ks_comm_allreduce (comm, private, count, types[t], ops[o], ERR));
          OK (ks_comm_allreduce (comm, mine, count, types[t], ops[o], ERR));
          CHECK (memcmp (private, mine, count * es) == 0, "%s %s of %" G_GSIZE_FORMAT
                 " in shared memory: not the bits of the slots'", ks_dtype_name (types[t]),
                 ks_reduce_op_name (ops[o]), count);
          for (gsize i = 0; i < count; i += 997)
            {
              double got = ks_test_element (mine, types[t], i);
              double want = ks_test_reduced (ops[o], n, i);
              CHECK (fabs (got - want) <= 1e-6 * fabs (want), "%s %s [%" G_GSIZE_FORMAT "] = %g, "
                     "want %g", ks_dtype_name (types[t]), ks_reduce_op_name (ops[o]), i, got,
                     want);
            }
        }
  /* inexact floats: the sum in rank order, as the slots give it */
  check_rank_order (comm, rank, n, counts[2], (float *) (shared + at * sizeof (float)));
  CHECK (other[0] == 0xcd && other[99] == 0xcd, "the other region was written");
  OK (ks_comm_barrier (comm, ERR));

  if (n == 1)
    return; /* no other rank to disagree with */
  /* rank 0 reduces in shared memory, the others in private memory */
  {
    g_autoptr (GError) e_ = NULL;
    float x[4] = { 0 };
    CHECK (!ks_comm_allreduce (comm, rank == 0 ? (void *) shared : x, 4, KS_DTYPE_FLOAT32,
                               KS_REDUCE_SUM, ERR)
               && strstr (e_->message, rank == 0 ? "rank 1's buffer is in private memory, this "
                                                   "rank's in shared"
                                                 : "rank 0's buffer is in shared memory, this "
                                                   "rank's in private") != NULL,
           "mixed buffers: %s", e_ != NULL ? e_->message : "accepted");
  }
}

/* Hierarchical allreduce over Gloo between two "hosts" (told apart by name here; both
 * are this machine, so shared memory joins each host's ranks): ranks below n/2 are host
 * A, the others host B; every reduction against the computed one, and the operations
 * passed through to Gloo. */
static void
scenario_hier (KsRegistry *registry, KsConfig *config, KsStore *store, int rank, int n,
               int timeout_ms)
{
  static const KsReduceOp ops[] = { KS_REDUCE_SUM, KS_REDUCE_MIN, KS_REDUCE_MAX, KS_REDUCE_AVG,
                                    KS_REDUCE_PROD };
  static const gsize counts[] = { 1, 37, 262147 };
  KsComm *world = NULL;
  g_autoptr (KsComm) comm = NULL;

  OK ((world = ks_comm_new (registry, config, "gloo", ERR)) != NULL);
  OK (ks_comm_connect (world, store, rank, n, timeout_ms, ERR));
  OK ((comm = ks_comm_hierarchical (registry, config, world, rank < n / 2 ? "A" : "B", "shm",
                                    ERR)) != NULL);
  CHECK (strcmp (ks_comm_name (comm), "hierarchical") == 0 && ks_comm_rank (comm) == rank
             && ks_comm_size (comm) == n, "%s rank %d of %d", ks_comm_name (comm),
         ks_comm_rank (comm), ks_comm_size (comm));
  for (guint o = 0; o < G_N_ELEMENTS (ops); o++)
    for (guint c = 0; c < G_N_ELEMENTS (counts); c++)
      {
        ks_test_check_allreduce (comm, rank, n, KS_DTYPE_FLOAT32, ops[o], counts[c], 1e-6);
        if (ops[o] != KS_REDUCE_AVG)
          ks_test_check_allreduce (comm, rank, n, KS_DTYPE_INT64, ops[o], counts[c], 0);
      }
  ks_test_check_allreduce (comm, rank, n, KS_DTYPE_FLOAT64, KS_REDUCE_AVG, 1000, 1e-12);
  ks_test_check_rounds (comm, rank, n);

  /* passed through: broadcast, allgather, a sub-group's allreduce, messages */
  gint64 b[3] = { rank, rank, rank }, all[8], sum = rank, want = 0;
  OK (ks_comm_broadcast (comm, b, 3, KS_DTYPE_INT64, n - 1, ERR));
  CHECK (b[0] == n - 1 && b[2] == n - 1, "broadcast gave %" G_GINT64_FORMAT, b[0]);
  OK (ks_comm_allgather (comm, &sum, all, 1, KS_DTYPE_INT64, ERR));
  for (int r = 0; r < n; r++)
    CHECK (all[r] == r, "allgather [%d] = %" G_GINT64_FORMAT, r, all[r]);
  int pair[2] = { 0, n - 1 };
  if (rank == 0 || rank == n - 1)
    {
      g_autoptr (KsComm) ends = NULL;
      OK ((ends = ks_comm_subgroup (comm, pair, 2, ERR)) != NULL);
      OK (ks_comm_allreduce (ends, &sum, 1, KS_DTYPE_INT64, KS_REDUCE_SUM, ERR));
      want = n - 1;
      CHECK (sum == want, "sub-group sum %" G_GINT64_FORMAT, sum);
      int peer = rank == 0 ? n - 1 : 0;
      int got = -1;
      KsCommRequest *r;
      OK ((r = ks_comm_isend (comm, &rank, sizeof rank, peer, 5, ERR)) != NULL);
      OK (ks_comm_recv (comm, &got, sizeof got, peer, 5, ERR));
      OK (ks_comm_wait (r, ERR));
      CHECK (got == peer, "message from %d said %d", peer, got);
    }
  OK (ks_comm_barrier (comm, ERR));
}

static int
run_rank (char **argv)
{
  const char *scenario = argv[2];
  int rank = atoi (argv[3]), n = atoi (argv[4]), timeout_ms = atoi (argv[6]);
  g_autofree char *shm = ks_test_build_plugin_dir ("shm");
  g_autofree char *store_dir = ks_test_build_plugin_dir ("store");
  g_autofree char *gloo = ks_test_build_plugin_dir ("gloo");
  g_autofree char *path = g_strdup_printf ("%s:%s:%s", shm, store_dir, gloo);
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = ks_test_scan (config, path);
  g_autoptr (KsStore) store = NULL;
  g_autoptr (KsComm) comm = NULL;

  if (strcmp (scenario, "rank0-full") == 0)
    shm_faults_rank0_full (argv[5], rank);
  OK ((store = ks_store_new (registry, config, "file", ERR)) != NULL);
  /* the same token on every rank, as ksdist launch gives */
  OK (ks_store_open (store, argv[5], "job", "test-token", ERR));
  if (strcmp (scenario, "hier") == 0)
    {
      scenario_hier (registry, config, store, rank, n, timeout_ms);
      return 0;
    }
  shm_faults_before_connect (store, scenario, rank);
  if (strcmp (scenario, "die-crowded") == 0)
    shm_faults_crowd (rank);
  OK ((comm = ks_comm_new (registry, config, "shm", ERR)) != NULL);
  OK (ks_comm_connect (comm, store, rank, n, timeout_ms, ERR));
  CHECK (ks_comm_rank (comm) == rank && ks_comm_size (comm) == n, "wrong rank or size");
  if (strcmp (scenario, "collectives") == 0)
    scenario_collectives (comm, rank, n);
  else if (strcmp (scenario, "p2p") == 0)
    scenario_p2p (comm, rank, n);
  else if (strcmp (scenario, "shared") == 0)
    scenario_shared (comm, rank, n);
  else if (strcmp (scenario, "groups") == 0)
    scenario_groups (comm, rank, n);
  else if (strcmp (scenario, "die-recv") == 0)
    {
      /* the last rank ends at once; rank 0 waits for its message */
      g_autoptr (GError) error = NULL;
      gint64 start = g_get_monotonic_time ();
      char byte;
      if (rank == n - 1)
        _exit (0);
      if (rank == 0 && !ks_comm_recv (comm, &byte, 1, n - 1, 3, &error))
        {
          g_printerr ("rank %d: failed after %d ms: %s\n", rank,
                      (int) ((g_get_monotonic_time () - start) / 1000), error->message);
          return 1;
        }
    }
  else if (strcmp (scenario, "failed-first") == 0)
    {
      /* rank 2 ends; rank 0 fails to receive from it and ends; rank 1 then receives
       * from rank 0 */
      g_autoptr (GError) error = NULL;
      char byte;
      if (rank == 2)
        _exit (0);
      if (rank == 1)
        shm_faults_wait_rank0_ended (store, rank);
      CHECK (!ks_comm_recv (comm, &byte, 1, rank == 0 ? 2 : 0, 3, &error), "received a byte");
      g_printerr ("rank %d: %s\n", rank, error->message);
      return 1;
    }
  else if (strcmp (scenario, "kill-root") == 0)
    OK (ks_comm_barrier (comm, ERR)); /* fails, naming rank 0, if connect did not */
  else if (strcmp (scenario, "big") == 0)
    ks_test_check_allreduce (comm, rank, n, KS_DTYPE_FLOAT32, KS_REDUCE_SUM, 16 << 20,
                             1e-6); /* 64 MiB */
  else if (strcmp (scenario, "die") == 0 || strcmp (scenario, "stall") == 0
           || strcmp (scenario, "die-late") == 0 || strcmp (scenario, "die-crowded") == 0)
    {
      /* the last rank dies (or stalls for 4 timeouts) after the first allreduce; the
       * others say how long their second took to fail, and why (die-late: rank 1 starts
       * its second once rank 0 has failed and ended) */
      for (int i = 0; i < 2; i++)
        {
          float x[1000] = { 0 };
          gint64 start = g_get_monotonic_time ();
          g_autoptr (GError) error = NULL;
          if (i == 1 && rank == 1 && strcmp (scenario, "die-late") == 0)
            {
              shm_faults_wait_rank0_ended (store, rank);
              start = g_get_monotonic_time ();
            }
          if (i == 1 && rank == n - 1)
            {
              if (strcmp (scenario, "stall") == 0)
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

/* ---- the test cases ---- */

/* The names of the segments in /dev/shm that the ranks of `job` made (rank 0's process
 * id is in the name; other tests may make their own meanwhile). */
static char *
segments (const KsTestJob *job, int n)
{
  g_autoptr (GDir) d = g_dir_open ("/dev/shm", 0, NULL);
  GString *names = g_string_new (NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    for (int r = 0; r < n; r++)
      {
        g_autofree char *prefix = g_strdup_printf ("ksdist-%d-", (int) job->pid[r]);
        if (g_str_has_prefix (name, prefix))
          g_string_append_printf (names, "%s ", name);
      }
  return g_string_free (names, FALSE);
}

/* Runs `scenario` with n ranks; their stderr, and their statuses in `status`. */
static char *
run_job (const char *scenario, int n, int timeout_ms, int *status)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *ns = g_strdup_printf ("%d", n), *ts = g_strdup_printf ("%d", timeout_ms);
  const char *argv[] = { self, "--rank", scenario, "R", ns, dir, ts, NULL };
  KsTestJob job;

  ks_test_start_ranks (&job, argv, 3, n);
  char *err = ks_test_wait_ranks (&job, status);
  g_autofree char *left = segments (&job, n);
  g_assert_cmpstr (left, ==, ""); /* nothing left in /dev/shm */
  ks_test_rmtree (dir);
  return err;
}

static void
assert_job_ok (const char *scenario, int n)
{
  int status[8];
  g_autofree char *err = run_job (scenario, n, 20000, status);
  for (int r = 0; r < n; r++)
    if (!g_spawn_check_wait_status (status[r], NULL))
      g_error ("rank %d of %d failed:\n%s", r, n, err);
}

/* A scenario that ends well on every rank. */
typedef struct {
  const char *path, *scenario;
  int n;
} Job;

static void
test_job (gconstpointer data)
{
  const Job *job = data;
  assert_job_ok (job->scenario, job->n);
}

/* A receive from a rank whose process is gone fails at once, naming it. */
static void
test_dead_sender (void)
{
  int status[8];
  g_autofree char *err = run_job ("die-recv", 2, 5000, status);
  const char *line = strstr (err, "rank 0: failed after ");

  g_test_message ("%s", err);
  g_assert_nonnull (line);
  g_assert_nonnull (strstr (line, "shm: receive of 1 bytes with tag 3 from rank 1 on rank 0 "
                                  "of 2: rank 1 (process "));
  g_assert_nonnull (strstr (line, ") is gone"));
  g_assert_cmpint (atoi (line + strlen ("rank 0: failed after ")), <, 2000);
}

/* A rank whose process is gone: the others fail at once (they look every 100 ms), not
 * after their timeout, naming it; the core names it without waiting for its report.
 * Each says how long its allreduce took; it must be under `limit_ms`. */
static void
check_dead_rank (const char *scenario, int limit_ms)
{
  int status[8];
  g_autofree char *err = run_job (scenario, 3, 20000, status);

  g_test_message ("%s", err);
  g_assert_true (g_spawn_check_wait_status (status[2], NULL));
  for (int r = 0; r < 2; r++)
    {
      g_autofree char *want = g_strdup_printf ("rank %d: failed after ", r);
      const char *line = strstr (err, want);
      g_assert_false (g_spawn_check_wait_status (status[r], NULL));
      g_assert_nonnull (line);
      g_autofree char *one = g_strndup (line, strcspn (line, "\n"));
      g_assert_nonnull (strstr (one, "rank 2 ended before allreduce #2 (the others reached "
                                     "it): shm: allreduce on rank"));
      g_assert_nonnull (strstr (one, ": rank 2 (process "));
      g_assert_nonnull (strstr (one, ") is gone"));
      g_assert_cmpint (atoi (line + strlen (want)), <, limit_ms);
    }
}

/* Before the 20 s timeout: it is known to be gone. It takes about 100 ms; the rest is
 * headroom for sanitizers on a loaded machine (the timeout itself is long for the same
 * reason: a timeout would take 20 s and more). */
static void
test_dead_rank (void)
{
  check_dead_rank ("die", 20000);
}

/* The same with the ranks on one CPU beside two busy processes: a waiting rank that gave
 * its core away 4000 times before its first look at its peers took 15-20 s to notice
 * (each sched_yield lets a busy process run for milliseconds); it spins 2 ms at most. */
static void
test_dead_rank_crowded (void)
{
  check_dead_rank ("die-crowded", 2000);
}

/* The first cause, even when a rank that failed because of it has ended since: rank 0
 * fails (rank 2 died) and ends before rank 1 starts the same allreduce; rank 1 names
 * rank 2, not "rank 0, 2" (rank 0 reported the failure before it ended). */
static void
test_dead_rank_late (void)
{
  int status[8];
  g_autofree char *err = run_job ("die-late", 3, 2000, status);
  const char *line = strstr (err, "rank 1: failed after ");

  g_test_message ("%s", err);
  g_assert_false (g_spawn_check_wait_status (status[0], NULL));
  g_assert_false (g_spawn_check_wait_status (status[1], NULL));
  g_assert_nonnull (line);
  g_autofree char *one = g_strndup (line, strcspn (line, "\n"));
  g_assert_nonnull (strstr (one, "rank 2 ended before allreduce #2 (the others reached it): "
                                 "shm: allreduce on rank 1 of 3: rank 2 (process "));
  g_assert_nonnull (strstr (one, ") is gone"));
}

/* A rank waiting for one that failed (because a third died) and ended since quotes its
 * failure: the first cause, not "rank 0 is gone". */
static void
test_failed_first (void)
{
  int status[8];
  g_autofree char *err = run_job ("failed-first", 3, 20000, status);
  const char *line = strstr (err, "rank 1: ");

  g_test_message ("%s", err);
  g_assert_nonnull (line);
  g_autofree char *one = g_strndup (line, strcspn (line, "\n"));
  g_assert_nonnull (strstr (one, "receive of 1 bytes with tag 3 from rank 0 on rank 1 of 3: "
                                 "rank 0 (process "));
  g_assert_nonnull (strstr (one, ") failed first and ended: shm: receive of 1 bytes with tag 3 "
                                 "from rank 2 on rank 0 of 3: rank 2 (process "));
  g_assert_nonnull (strstr (one, ") is gone"));
}

/* A non-zero rank killed while rank 0's segment has a name, before its connect: rank 0
 * fails its connect, and nothing of the job is left in /dev/shm (run_job checks). */
static void
test_kill_unmapped (void)
{
  int status[8];
  g_autofree char *err = run_job ("kill-unmapped", 2, 1500, status);

  g_test_message ("%s", err);
  g_assert_true (WIFSIGNALED (status[1]) && WTERMSIG (status[1]) == SIGKILL);
  g_assert_false (g_spawn_check_wait_status (status[0], NULL));
  g_assert_nonnull (strstr (err, "connect on rank 0 of 2: rank 1 did not arrive within 1500 ms"));
}

/* The same, but rank 1 dies inside its connect (its process id is in the store): rank 0
 * names it at once, not at the 20 s timeout; nothing is left in /dev/shm. */
static void
test_kill_connecting (void)
{
  int status[8];
  g_autofree char *err = run_job ("kill-connecting", 2, 20000, status);

  g_test_message ("%s", err);
  g_assert_true (WIFSIGNALED (status[1]) && WTERMSIG (status[1]) == SIGKILL);
  g_assert_false (g_spawn_check_wait_status (status[0], NULL));
  g_assert_nonnull (strstr (err, "connect on rank 0 of 2: rank 1 (process "));
  g_assert_nonnull (strstr (err, ") is gone: it ended before it mapped the segment"));
}

/* Rank 0 killed while its segment has a name (no code of it runs): the others name it
 * and remove the name; nothing is left in /dev/shm. */
static void
test_kill_root (gconstpointer data)
{
  int status[8], n = GPOINTER_TO_INT (data);
  g_autofree char *err = run_job ("kill-root", n, 20000, status);

  g_test_message ("%s", err);
  g_assert_true (WIFSIGNALED (status[0]) && WTERMSIG (status[0]) == SIGKILL);
  for (int r = 1; r < n; r++)
    g_assert_false (g_spawn_check_wait_status (status[r], NULL));
  g_assert_nonnull (strstr (err, "rank 1: "));
  g_assert_nonnull (strstr (err, ": rank 0 (process "));
  g_assert_nonnull (strstr (err, ") is gone"));
}

/* A name left by a job killed whole (its creator ended, no code ran) is removed by the
 * next job; a name whose creator lives stays. */
static void
test_stale_segment (void)
{
  struct stat ns;
  pid_t dead = fork ();
  if (dead == 0)
    _exit (0);
  g_assert_cmpint (waitpid (dead, NULL, 0), ==, dead);
  g_assert_cmpint (stat ("/proc/self/ns/pid", &ns), ==, 0);
  g_autofree char *stale = g_strdup_printf ("/dev/shm/ksdist-%d-%" G_GINT64_MODIFIER
                                            "x-0badcafe", (int) dead, (guint64) ns.st_ino);
  g_autofree char *live = g_strdup_printf ("/dev/shm/ksdist-%d-%" G_GINT64_MODIFIER
                                           "x-0badcafe", (int) getpid (), (guint64) ns.st_ino);
  g_assert_true (g_file_set_contents (stale, "x", 1, NULL));
  g_assert_true (g_file_set_contents (live, "x", 1, NULL));
  assert_job_ok ("connect", 2);
  g_assert_false (g_file_test (stale, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (live, G_FILE_TEST_EXISTS));
  g_unlink (stale);
  g_unlink (live);
}

/* Rank 0 fails early (its /dev/shm is full) and ends before rank 1 opens the store: rank
 * 1 keeps this run's records (not "an earlier job's") and names rank 0's failure at once,
 * not a key rank 0 never wrote. */
static void
test_rank0_failed (void)
{
  int status[8];
  g_autofree char *err = run_job ("rank0-full", 2, 20000, status);
  const char *line = strstr (err, "rank 1: ");

  g_test_message ("%s", err);
  if (WIFEXITED (status[0]) && WEXITSTATUS (status[0]) == 77)
    {
      g_test_skip ("this process may not mount a tmpfs in a mount namespace of its own");
      return;
    }
  g_assert_false (g_spawn_check_wait_status (status[0], NULL));
  g_assert_false (g_spawn_check_wait_status (status[1], NULL));
  g_assert_nonnull (line);
  g_autofree char *one = g_strndup (line, strcspn (line, "\n"));
  g_assert_nonnull (strstr (one, "waiting for ks/shm/segment in the store: rank 0 failed: "));
  g_assert_nonnull (strstr (one, "No space left on device (make /dev/shm larger"));
  g_assert_null (strstr (err, "earlier job"));
}

/* A stalled rank (alive, not answering): the others name it after their timeout. */
static void
test_stalled_rank (void)
{
  int status[8];
  g_autofree char *err = run_job ("stall", 3, 1000, status);

  g_test_message ("%s", err);
  for (int r = 0; r < 2; r++)
    {
      g_autofree char *want = g_strdup_printf ("rank %d: failed after ", r);
      const char *line = strstr (err, want);
      g_assert_false (g_spawn_check_wait_status (status[r], NULL));
      g_assert_nonnull (line);
      g_assert_nonnull (strstr (line, "rank 2 did not arrive within 1000 ms"));
      g_assert_cmpint (atoi (line + strlen (want)), >=, 1000);
      /* not a speed limit (the machines are shared): only "did not wait forever" */
      g_assert_cmpint (atoi (line + strlen (want)), <, 30000);
    }
}

int
main (int argc, char **argv)
{
  self = argv[0];
  if (argc > 1 && strcmp (argv[1], "--rank") == 0)
    return run_rank (argv);
  g_test_init (&argc, &argv, NULL);
  static const Job jobs[] = {
    { "/shm/collectives-2", "collectives", 2 }, { "/shm/collectives-3", "collectives", 3 },
    { "/shm/collectives-4", "collectives", 4 }, { "/shm/allreduce-64MiB", "big", 2 },
    { "/shm/p2p-2", "p2p", 2 },                 { "/shm/p2p-3", "p2p", 3 },
    { "/shm/shared-1", "shared", 1 },           { "/shm/shared-2", "shared", 2 },
    { "/shm/shared-3", "shared", 3 },           { "/shm/shared-4", "shared", 4 },
    { "/shm/groups-4", "groups", 4 },           { "/shm/groups-3", "groups", 3 },
    { "/shm/hierarchical-4", "hier", 4 },       { "/shm/hierarchical-3", "hier", 3 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (jobs); i++)
    g_test_add_data_func (jobs[i].path, &jobs[i], test_job);
  g_test_add_func ("/shm/dead-sender", test_dead_sender);
  g_test_add_func ("/shm/dead-rank", test_dead_rank);
  g_test_add_func ("/shm/dead-rank-crowded", test_dead_rank_crowded);
  g_test_add_func ("/shm/dead-rank-late", test_dead_rank_late);
  g_test_add_func ("/shm/failed-first", test_failed_first);
  g_test_add_func ("/shm/kill-unmapped", test_kill_unmapped);
  g_test_add_func ("/shm/kill-connecting", test_kill_connecting);
  g_test_add_data_func ("/shm/kill-root-2", GINT_TO_POINTER (2), test_kill_root);
  g_test_add_data_func ("/shm/kill-root-3", GINT_TO_POINTER (3), test_kill_root);
  g_test_add_func ("/shm/stale-segment", test_stale_segment);
  g_test_add_func ("/shm/rank0-failed", test_rank0_failed);
  g_test_add_func ("/shm/stalled-rank", test_stalled_rank);
  return g_test_run ();
}
