/* Sparse table throughput on one thread: N rows of embedx_dim 15 (16 floats a row, embedx
 * made for every row), made by pull; then pull and push of random existing ids in
 * batches of 26 * 512; memory per row; save (mode all) and load. Beside them the memory
 * bandwidth of this machine measured in the same run (memcpy of 1 GiB), with pull and
 * push bytes/s as a fraction of it.
 *   bench/bench-sparse [N [DIR]]   (N = 10000000; DIR: a new directory under /tmp,
 *                                   removed after) */
#include <ksdist/ksdist.h>

#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH = 26 * 512, DIMX = 15, DIM = DIMX + 1 };

static guint64
mix (guint64 x)
{
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* Best of three copies of 1 GiB (the pages touched once before), in GB/s. */
static double
memcpy_bandwidth (void)
{
  const gsize n = (gsize) 1 << 30;
  char *a = g_malloc (n), *b = g_malloc (n);
  memset (a, 1, n);
  memset (b, 2, n);
  double best = 0;
  for (int r = 0; r < 3; r++)
    {
      gint64 t0 = g_get_monotonic_time ();
      memcpy (b, a, n);
      double s = (g_get_monotonic_time () - t0) / 1e6;
      best = MAX (best, n / s / 1e9);
    }
  if (b[n / 2] != 1)
    g_error ("memcpy");
  g_free (a);
  g_free (b);
  return best;
}

static double
seconds_since (gint64 t0)
{
  return (g_get_monotonic_time () - t0) / 1e6;
}

int
main (int argc, char **argv)
{
  gsize n = argc > 1 ? g_ascii_strtoull (argv[1], NULL, 10) : 10000000;
  g_autofree char *dir = argc > 2 ? g_strdup (argv[2]) : g_dir_make_tmp ("bench-sparse-XXXXXX", NULL);
  g_autoptr (GError) error = NULL;
  KsSparseConfig c;

  if (n < BATCH || dir == NULL)
    g_error ("usage: bench-sparse [N >= %d [DIR]]", BATCH);
  double bw = memcpy_bandwidth ();
  printf ("memory bandwidth (memcpy 1 GiB, best of 3): %.2f GB/s (read + write: %.2f GB/s moved)\n",
          bw, 2 * bw);

  ks_sparse_config_defaults (&c);
  c.embedx_dim = DIMX;
  c.embedx_threshold = 0;
  g_autoptr (KsSparseTable) t = ks_sparse_table_new ("bench", &c);
  g_autofree guint64 *ids = g_new (guint64, n);
  g_autofree guint64 *batch = g_new (guint64, BATCH);
  g_autofree float *out = g_new (float, (gsize) BATCH * DIM);
  g_autofree float *grads = g_new (float, (gsize) BATCH * DIM);
  g_autofree float *shows = g_new (float, BATCH);
  g_autofree float *clicks = g_new (float, BATCH);
  for (gsize i = 0; i < n; i++)
    ids[i] = mix (i) | 1; /* distinct enough, never 0 */
  for (gsize i = 0; i < (gsize) BATCH * DIM; i++)
    grads[i] = (float) ((i % 7) - 3) * 1e-3f;
  for (gsize i = 0; i < BATCH; i++)
    shows[i] = 1, clicks[i] = i % 10 == 0;

  gint64 t0 = g_get_monotonic_time ();
  for (gsize i = 0; i < n; i += BATCH)
    g_assert_true (ks_sparse_table_pull (t, ids + i, MIN ((gsize) BATCH, n - i), out, NULL));
  double create = seconds_since (t0);
  gsize rows = ks_sparse_table_size (t);
  printf ("rows %zu, embedx_dim %d, adagrad, shard_num %d\n", rows, DIMX, c.shard_num);
  printf ("create by pull: %.2f s (%.2f M rows/s)\n", create, rows / create / 1e6);
  printf ("memory: %zu bytes, %.1f bytes/row\n", ks_sparse_table_memory (t),
          (double) ks_sparse_table_memory (t) / rows);

  const int batches = (int) MAX (200, MIN (2000, 20 * n / BATCH));
  guint64 state = 12345;
  double pull_s = 0, push_s = 0;
  for (int b = 0; b < batches; b++)
    {
      for (gsize i = 0; i < BATCH; i++)
        batch[i] = ids[(state = mix (state)) % n];
      t0 = g_get_monotonic_time ();
      g_assert_true (ks_sparse_table_pull (t, batch, BATCH, out, NULL));
      pull_s += seconds_since (t0);
      t0 = g_get_monotonic_time ();
      g_assert_true (ks_sparse_table_push (t, batch, BATCH, grads, shows, clicks, NULL));
      push_s += seconds_since (t0);
    }
  double ids_done = (double) batches * BATCH;
  /* bytes a row moves: pull 16 floats out; push 16 floats of gradient plus show and click */
  double pull_b = ids_done * DIM * 4 / pull_s, push_b = ids_done * (DIM + 2) * 4 / push_s;
  printf ("pull (random existing ids, batches of %d): %.2f M rows/s, %.2f GB/s = %.3f of memcpy\n",
          BATCH, ids_done / pull_s / 1e6, pull_b / 1e9, pull_b / 1e9 / bw);
  printf ("push (random existing ids, batches of %d): %.2f M rows/s, %.2f GB/s = %.3f of memcpy\n",
          BATCH, ids_done / push_s / 1e6, push_b / 1e9, push_b / 1e9 / bw);

  g_autofree char *path = g_build_filename (dir, "bench.sparse", NULL);
  gsize saved;
  t0 = g_get_monotonic_time ();
  if (!ks_sparse_table_save (t, path, KS_SPARSE_SAVE_ALL, &saved, &error))
    g_error ("%s", error->message);
  double save_s = seconds_since (t0);
  GStatBuf st;
  g_stat (path, &st);
  printf ("save (all): %.2f s, %zu rows, %.1f MB (%.0f MB/s)\n", save_s, saved,
          st.st_size / 1e6, st.st_size / 1e6 / save_s);

  g_autoptr (KsSparseTable) l = ks_sparse_table_new ("bench", &c);
  const char *paths[] = { path };
  gsize loaded;
  t0 = g_get_monotonic_time ();
  if (!ks_sparse_table_load (l, paths, 1, 0, 1, TRUE, &loaded, &error))
    g_error ("%s", error->message);
  double load_s = seconds_since (t0);
  printf ("load (checked, into a new table): %.2f s, %zu rows (%.0f MB/s)\n", load_s, loaded,
          st.st_size / 1e6 / load_s);

  g_unlink (path);
  if (argc <= 2)
    g_rmdir (dir);
  return loaded == rows ? 0 : 1;
}
