/* ksdist bench allreduce: the communicator's allreduce between N processes on this
 * machine, as nccl-tests prints it: for float32 sums of 4 KiB to 64 MiB, the time per
 * call (the slowest rank's), algbw = bytes / time and busbw = algbw · 2(n−1)/n, and how
 * many values came out wrong. The launcher serves a TCP store on 127.0.0.1 and starts
 * the ranks as `ksdist bench allreduce --rank R`; rank 0 prints. bench/run-allreduce.sh
 * sets it beside raw Gloo and PyTorch. */
#include "cli.h"

#include <gio/gio.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  int n, rank;
  gboolean json;
  gint64 min_bytes, max_bytes, factor;
  int iters, warmup; /* iters 0: about 256 MiB moved per size */
  char *address;     /* the rank's: where the launcher serves the store */
  gboolean serve;    /* this rank serves it there (ranks on several hosts) */
  gboolean shared;   /* the buffer from alloc_shared, as data parallel's gradients */
} Bench;

/* Iterations for a message: as asked, else about 256 MiB moved, between 5 and 200. */
static int
iterations (const Bench *b, gsize bytes)
{
  return b->iters > 0 ? b->iters : (int) CLAMP ((256u << 20) / bytes, 5, 200);
}

/* A size as nccl-tests writes it: bytes, or with K, M or G (powers of 1024). */
static gboolean
parse_size (const char *text, gint64 *out)
{
  char *end;
  guint64 v;
  int shift = 0;
  if (text == NULL || !g_ascii_isdigit (*text))
    return FALSE;
  v = g_ascii_strtoull (text, &end, 10);
  switch (g_ascii_toupper (*end))
    {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    default: break;
    }
  if (g_ascii_toupper (*end) == 'B')
    end++;
  if (*end != '\0' || v > (G_MAXINT64 >> 30))
    return FALSE;
  *out = (gint64) (v << shift);
  return TRUE;
}

/* Values of a sum of (rank + 1) over the ranks that are not n(n+1)/2. */
static gsize
check_sum (KsComm *comm, float *buf, gsize count, int rank, int n, GError **error)
{
  gsize wrong = 0;
  for (gsize i = 0; i < count; i++)
    buf[i] = rank + 1;
  if (!ks_comm_allreduce (comm, buf, count, KS_DTYPE_FLOAT32, KS_REDUCE_SUM, error))
    return G_MAXSIZE;
  for (gsize i = 0; i < count; i++)
    wrong += buf[i] != n * (n + 1) / 2.0f;
  return wrong;
}

/* Seconds per allreduce, the slowest rank's, after the warm-up calls and a barrier. The
 * buffer is zeros, so repeated sums stay finite. */
static double
time_allreduce (const Bench *b, KsComm *comm, float *buf, gsize count, GError **error)
{
  int iters = iterations (b, count * sizeof (float));
  double seconds;

  memset (buf, 0, count * sizeof (float));
  for (int i = 0; i < b->warmup; i++)
    if (!ks_comm_allreduce (comm, buf, count, KS_DTYPE_FLOAT32, KS_REDUCE_SUM, error))
      return -1;
  if (!ks_comm_barrier (comm, error))
    return -1;
  gint64 start = g_get_monotonic_time ();
  for (int i = 0; i < iters; i++)
    if (!ks_comm_allreduce (comm, buf, count, KS_DTYPE_FLOAT32, KS_REDUCE_SUM, error))
      return -1;
  seconds = (g_get_monotonic_time () - start) / 1e6 / iters;
  if (!ks_comm_allreduce (comm, &seconds, 1, KS_DTYPE_FLOAT64, KS_REDUCE_MAX, error))
    return -1;
  return seconds;
}

static int
run_rank (Bench *b, const KsConfig *c, KsRegistry *registry)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsStore) store = NULL;
  g_autoptr (KsComm) comm = NULL;
  const char *backend = ks_config_get_string (c, "comm", "backend"), *why = "[comm] backend";
  int timeout_ms = (int) (ks_config_get_double (c, "comm", "timeout") * 1000);
  gsize wrong_total = 0, sizes = 0;
  double busbw_sum = 0;
  float *shared = NULL;
  const char *memory = b->shared ? "shared (alloc_shared)" : "private";

  /* what a launched job on one host takes (the trainer's rule): a communicator of one
   * host (shared memory) */
  const KsImplDesc *local = ks_registry_choose (registry, KS_KIND_COMM,
                                                KS_COMM_ONE_HOST | KS_COMM_DEVICE_MEMORY,
                                                KS_COMM_ONE_HOST);
  if (strcmp (backend, "auto") == 0 && local != NULL)
    backend = local->name, why = "auto: every rank on this host, as a job launched here";
  else if (strcmp (backend, "auto") == 0)
    why = "auto: the shm plugin is not loaded"; /* none of one host is */
  g_autofree char *bound = NULL;
  const char *served = ks_store_kind_name (KS_STORE_KIND_SERVED);
  if ((store = ks_store_new (registry, c, served, &error)) == NULL
      || (b->serve
          && !ks_store_serve (store, b->address, g_getenv ("KS_STORE_TOKEN"), &bound, &error))
      || !ks_store_open (store, b->address, "bench", g_getenv ("KS_STORE_TOKEN"), &error)
      || (comm = ks_comm_new (registry, c, backend, &error)) == NULL
      || !ks_comm_connect (comm, store, b->rank, b->n, timeout_ms, &error)
      || (b->shared
          && (shared = ks_comm_alloc_shared (comm, (gsize) b->max_bytes, &error)) == NULL))
    {
      ks_cli_error ("bench allreduce: rank %d: %s", b->rank, error->message);
      return KS_EXIT_RUNTIME;
    }
  if (b->rank == 0 && b->json)
    printf ("{\"what\": \"allreduce\", \"comm\": \"%s\", \"chosen_by\": \"%s\", \"ranks\": %d, "
            "\"memory\": \"%s\", \"type\": \"float32\", \"op\": \"sum\", \"results\": [",
            ks_comm_name (comm), why, b->n, b->shared ? "shared" : "private");
  else if (b->rank == 0)
    printf ("# ksdist allreduce: %d ranks, %s (%s), float32 sum, %s memory\n"
            "# %10s %10s %10s %10s %10s %6s\n",
            b->n, ks_comm_name (comm), why, memory, "size (B)", "count", "time (us)",
            "algbw GB/s", "busbw GB/s", "wrong");
  for (gsize bytes = b->min_bytes; (gint64) bytes <= b->max_bytes;
       bytes = b->factor > 1 && (gint64) bytes <= b->max_bytes / b->factor
                   ? bytes * (gsize) b->factor
                   : (gsize) b->max_bytes + 1)
    {
      gsize count = bytes / sizeof (float), wrong;
      g_autofree float *own = b->shared ? NULL : g_new (float, count);
      float *buf = b->shared ? shared : own;
      double seconds;

      if ((wrong = check_sum (comm, buf, count, b->rank, b->n, &error)) == G_MAXSIZE
          || (seconds = time_allreduce (b, comm, buf, count, &error)) < 0)
        {
          ks_cli_error ("bench allreduce: rank %d, %" G_GSIZE_FORMAT " bytes: %s", b->rank,
                        bytes, error->message);
          return KS_EXIT_RUNTIME;
        }
      wrong_total += wrong;
      double algbw = bytes / seconds / 1e9, busbw = algbw * 2.0 * (b->n - 1) / b->n;
      busbw_sum += busbw;
      sizes++;
      if (b->rank == 0 && b->json)
        printf ("%s\n  {\"bytes\": %" G_GSIZE_FORMAT ", \"count\": %" G_GSIZE_FORMAT
                ", \"time_us\": %.2f, \"algbw\": %.4f, \"busbw\": %.4f, \"wrong\": %"
                G_GSIZE_FORMAT "}",
                sizes == 1 ? "" : ",", bytes, count, seconds * 1e6, algbw, busbw, wrong);
      else if (b->rank == 0)
        printf ("  %10" G_GSIZE_FORMAT " %10" G_GSIZE_FORMAT " %10.1f %10.3f %10.3f %6"
                G_GSIZE_FORMAT "\n",
                bytes, count, seconds * 1e6, algbw, busbw, wrong);
      fflush (stdout);
    }
  /* nccl-tests' closing lines */
  if (b->rank == 0 && b->json)
    printf ("\n], \"wrong\": %" G_GSIZE_FORMAT ", \"avg_busbw\": %.4f}\n", wrong_total,
            busbw_sum / sizes);
  else if (b->rank == 0)
    printf ("# Out of bounds values : %" G_GSIZE_FORMAT " %s\n# Avg bus bandwidth    : %g \n#\n",
            wrong_total, wrong_total == 0 ? "OK" : "FAILED", busbw_sum / sizes);
  if (wrong_total > 0)
    ks_cli_error ("bench allreduce: rank %d: %" G_GSIZE_FORMAT " values were wrong", b->rank,
                  wrong_total);
  return wrong_total > 0 ? KS_EXIT_RUNTIME : KS_EXIT_OK;
}

/* Serves the store, starts the N ranks and waits for them all. */
static int
run_ranks (Bench *b, const KsConfig *c, KsRegistry *registry, char **argv, int argc)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsStore) store = ks_store_new (registry, c, ks_store_kind_name (KS_STORE_KIND_SERVED),
                                            &error);
  g_autofree char *bound = NULL, *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *token = g_strdup_printf ("%08x%08x", g_random_int (), g_random_int ());
  g_autoptr (GPtrArray) children = g_ptr_array_new_with_free_func (g_object_unref);
  int status = KS_EXIT_OK;

  if (store == NULL || !ks_store_serve (store, "127.0.0.1:0", token, &bound, &error))
    {
      ks_cli_error ("bench allreduce: %s", error->message);
      return KS_EXIT_RUNTIME;
    }
  g_setenv ("KS_STORE_TOKEN", token, TRUE);
  for (int r = 0; r < b->n && status == KS_EXIT_OK; r++)
    {
      g_autoptr (GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
      g_ptr_array_add (args, g_strdup (self != NULL ? self : g_get_prgname ()));
      for (int i = 0; i < argc; i++)
        g_ptr_array_add (args, g_strdup (argv[i]));
      g_ptr_array_add (args, g_strdup_printf ("--rank=%d", r));
      g_ptr_array_add (args, g_strdup_printf ("--address=%s", bound));
      g_ptr_array_add (args, NULL);
      GSubprocess *p = g_subprocess_newv ((const char *const *) args->pdata,
                                          G_SUBPROCESS_FLAGS_NONE, &error);
      if (p == NULL)
        {
          ks_cli_error ("bench allreduce: cannot start rank %d: %s", r, error->message);
          status = KS_EXIT_RUNTIME;
          break;
        }
      g_ptr_array_add (children, p);
    }
  for (guint r = 0; r < children->len; r++)
    {
      GSubprocess *p = g_ptr_array_index (children, r);
      if (status != KS_EXIT_OK)
        g_subprocess_force_exit (p);
      g_subprocess_wait (p, NULL, NULL);
      if (status == KS_EXIT_OK && !g_subprocess_get_successful (p))
        {
          ks_cli_error ("bench allreduce: rank %u failed (its message is above)", r);
          status = KS_EXIT_RUNTIME;
        }
    }
  return status;
}

static int
run_bench (int argc, char **argv)
{
  Bench b = { .n = 2, .rank = -1, .factor = 4, .warmup = 2 };
  g_auto (GStrv) sets = NULL;
  g_autofree char *address = NULL, *min_text = NULL, *max_text = NULL, *trace = NULL;
  GOptionEntry entries[] = {
    { "nproc", 'n', 0, G_OPTION_ARG_INT, &b.n, "Processes on this machine (default 2)", "N" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &b.json, "One JSON object instead of the table", NULL },
    { "minbytes", 'b', 0, G_OPTION_ARG_STRING, &min_text,
      "Smallest message, e.g. 4K (default 4K; K, M, G are powers of 1024)", "SIZE" },
    { "maxbytes", 'e', 0, G_OPTION_ARG_STRING, &max_text, "Largest message (default 64M)",
      "SIZE" },
    { "max-bytes", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &max_text, NULL, NULL },
    { "stepfactor", 'f', 0, G_OPTION_ARG_INT64, &b.factor,
      "Multiply the size by F from one line to the next (default 4)", "F" },
    { "iters", 0, 0, G_OPTION_ARG_INT, &b.iters,
      "Timed calls per size (nccl-tests' -n; -n is the processes here); default about "
      "256 MiB moved", "I" },
    { "warmup_iters", 'w', 0, G_OPTION_ARG_INT, &b.warmup, "Untimed calls first (default 2)",
      "W" },
    { "shared", 0, 0, G_OPTION_ARG_NONE, &b.shared,
      "Reduce memory from the communicator's alloc_shared, where data parallel keeps its "
      "gradients (shm: no staging copies); the default is private memory", NULL },
    { "rank", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &b.rank, NULL, NULL },
    { "address", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &address, NULL, NULL },
    /* bench/run-cluster.sh: one rank per host, rank 0 serving the store at --address */
    { "serve", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, &b.serve, NULL, NULL },
    /* bench/run-cluster.sh: the bubble of its own job's trace, measured as bench pipeline's */
    { "trace", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_FILENAME, &trace, NULL, NULL },
    KS_CLI_SET_OPTION (sets),
    { NULL },
  };
  g_autoptr (KsConfig) config = NULL;
  g_autoptr (KsRegistry) registry = NULL;
  g_auto (GStrv) original = g_strdupv (argv);
  int status;

  if (!ks_cli_parse ("bench", "allreduce|pipeline [CONFIG]", ks_cmd_bench.summary, entries,
                     &argc, &argv))
    return KS_EXIT_USAGE;
  if (argc < 2 || argc > 3
      || (strcmp (argv[1], "allreduce") != 0 && strcmp (argv[1], "pipeline") != 0))
    {
      ks_cli_error ("bench: say what to measure: `ksdist bench allreduce [CONFIG]` or `ksdist "
                    "bench pipeline [CONFIG]` (got %s)",
                    argc < 2 ? "nothing" : argv[argc > 3 ? 3 : 1]);
      return KS_EXIT_USAGE;
    }
  if (strcmp (argv[1], "pipeline") == 0)
    {
      if (b.n < 1)
        {
          ks_cli_error ("bench pipeline: -n (the stages) is at least 1");
          return KS_EXIT_USAGE;
        }
      if (trace != NULL && (argc == 3 || sets != NULL))
        {
          ks_cli_error ("bench pipeline --trace %s measures that trace and runs no job: "
                        "leave out CONFIG and --set",
                        trace);
          return KS_EXIT_USAGE;
        }
      return trace != NULL ? ks_bench_pipeline_trace (b.n, trace)
                           : ks_bench_pipeline (b.n, argc == 3 ? argv[2] : NULL, sets, b.json);
    }
  if (!parse_size (min_text != NULL ? min_text : "4K", &b.min_bytes)
      || !parse_size (max_text != NULL ? max_text : "64M", &b.max_bytes))
    {
      ks_cli_error ("bench allreduce: -b/-e '%s': a size is bytes or a number with K, M or G",
                    min_text != NULL && !parse_size (min_text, &b.min_bytes) ? min_text : max_text);
      return KS_EXIT_USAGE;
    }
  b.min_bytes = b.min_bytes / 4 * 4; /* whole float32 values */
  if (b.n < 2 || b.min_bytes < 4 || b.max_bytes < b.min_bytes || b.factor < 1 || b.iters < 0
      || b.warmup < 0 || b.max_bytes > ((gint64) 1 << 34))
    {
      ks_cli_error ("bench allreduce: -n %d, -b %" G_GINT64_FORMAT ", -e %" G_GINT64_FORMAT
                    ", -f %" G_GINT64_FORMAT ": an allreduce needs 2 processes or more (one "
                    "moves nothing); sizes from 4 bytes up to 16G with -b <= -e, -f >= 1, and "
                    "--iters, -w not negative",
                    b.n, b.min_bytes, b.max_bytes, b.factor);
      return KS_EXIT_USAGE;
    }
  if ((status = ks_cli_load (argc == 3 ? argv[2] : NULL, sets, &config, &registry)) != 0)
    return status;
  if (b.rank >= 0)
    {
      b.address = address;
      return run_rank (&b, config, registry);
    }
  /* the ranks get this command line ("bench allreduce ...") and their place */
  return run_ranks (&b, config, registry, original, g_strv_length (original));
}

const KsCommand ks_cmd_bench = {
  "bench",
  "Measure the communicator: `ksdist bench allreduce` prints time, algbw and busbw for "
  "4 KiB to 64 MiB (nccl-tests' -b, -e, -f, -w; --iters) between -n processes; `ksdist bench "
  "pipeline` the bubble of pipeline schedules on -n stages against the theory",
  run_bench,
};
