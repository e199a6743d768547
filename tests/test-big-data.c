/* Data sets larger than memory and many files over workers, end to end with `ksdist`:
 * a 256 MiB float32 .npy trains while the process's anonymous memory (RssAnon: what
 * cannot be reclaimed, unlike the file's mapped pages) grows by a small part of it;
 * mapped rows train bitwise as rows loaded into memory (the same file gzipped; IDX too);
 * a folder of npy files is their rows one after another; a folder of CSV files split
 * over 2 workers ([data] split_files) trains, each worker reading its own files, and
 * resumes bitwise; and the settings that cannot work are refused naming the key or the
 * files. Every file is written here, in a temporary directory removed at the end. */
#include "testutil.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static const char *const plugins[] = { "openblas", "optim", "store", "roles", "gloo", "shm",
                                       "collective", NULL };

#define ARGS(...) ((const char *const[]) { __VA_ARGS__, NULL })

/* ---- writing the data ---- */

typedef enum { PLAIN, GZIP } Packing;

/* A file written piece by piece, plain or gzipped. */
typedef struct {
  FILE *plain;
  gzFile gz;
} Out;

static Out
out_open (const char *path, Packing packing)
{
  Out o = { 0 };
  if (packing == GZIP)
    g_assert_nonnull (o.gz = gzopen (path, "wb1"));
  else
    g_assert_nonnull (o.plain = fopen (path, "wb"));
  return o;
}

static void
out_write (Out *o, const void *p, gsize n)
{
  if (o->gz != NULL)
    g_assert_cmpint (gzwrite (o->gz, p, (unsigned) n), ==, (int) n);
  else
    g_assert_cmpuint (fwrite (p, 1, n, o->plain), ==, n);
}

static void
out_close (Out *o)
{
  if (o->gz != NULL)
    g_assert_cmpint (gzclose (o->gz), ==, Z_OK);
  else
    g_assert_cmpint (fclose (o->plain), ==, 0);
}

/* A .npy version 1 header for `descr` and `shape`, padded to 64 bytes. */
static void
npy_header (Out *o, const char *descr, const char *shape)
{
  g_autofree char *dict = g_strdup_printf ("{'descr': '%s', 'fortran_order': False, "
                                           "'shape': %s, }", descr, shape);
  gsize len = strlen (dict) + 1, pad = (64 - (10 + len) % 64) % 64;
  g_autoptr (GString) h = g_string_new (dict);
  for (gsize i = 0; i < pad; i++)
    g_string_append_c (h, ' ');
  g_string_append_c (h, '\n');
  guint16 hlen = GUINT16_TO_LE ((guint16) h->len);
  out_write (o, "\x93NUMPY\x01\x00", 8);
  out_write (o, &hlen, 2);
  out_write (o, h->str, h->len);
}

/* Row r's class of `classes`, and its features: class-dependent, with a spread. */
static gint64
label_of (gsize r, int classes)
{
  return (gint64) ((r * 7 + r / 5) % classes);
}

static float
feature_of (gsize r, gsize j, int classes)
{
  double noise = (double) ((r * 2654435761u + j * 40503u) % 1000) / 1000.0 - 0.5;
  return (float) ((j % classes == (gsize) label_of (r, classes) ? 1.5 : 0.0) + noise + 0.1 * j);
}

/* dir/name.npy (float32 rows x f) and dir/name.labels.npy (int64), rows from `first` of
 * the pattern; the features' file path returned. */
static char *
write_npy (const char *dir, const char *name, gsize first, gsize rows, gsize f, int classes,
           Packing packing)
{
  char *path = g_strdup_printf ("%s/%s.npy%s", dir, name, packing == GZIP ? ".gz" : "");
  g_autofree char *labels = g_strdup_printf ("%s/%s.labels.npy", dir, name);
  g_autofree char *shape = g_strdup_printf ("(%" G_GSIZE_FORMAT ", %" G_GSIZE_FORMAT ")",
                                            rows, f);
  g_autofree char *lshape = g_strdup_printf ("(%" G_GSIZE_FORMAT ",)", rows);
  g_autofree float *row = g_new (float, f);
  Out o = out_open (path, packing), l = out_open (labels, PLAIN);

  npy_header (&o, "<f4", shape);
  npy_header (&l, "<i8", lshape);
  for (gsize r = first; r < first + rows; r++)
    {
      gint64 y = GINT64_TO_LE (label_of (r, classes));
      for (gsize j = 0; j < f; j++)
        row[j] = feature_of (r, j, classes);
      out_write (&o, row, f * sizeof (float)); /* little-endian machines (as the reader) */
      out_write (&l, &y, sizeof y);
    }
  out_close (&o);
  out_close (&l);
  return path;
}

static char *
write_config (const char *dir, const char *name, const char *data, const char *train)
{
  g_autofree char *text = g_strdup_printf ("[model]\ntype = mlp\nhidden = 16\n[data]\n%s\n"
                                           "[train]\n%s\n[optim]\nlr = 0.01\n", data, train);
  return ks_test_write (dir, name, text);
}

/* The lines of a run's output that say what it learnt: the step and eval lines, without
 * the throughput (samples/s, the ETA) that differs from run to run. */
static char *
learning_lines (const char *out)
{
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  GString *s = g_string_new (NULL);
  for (char **l = lines; *l != NULL; l++)
    {
      char *cut = strstr (*l, " samples/s");
      if (strstr (*l, "step ") == NULL && strstr (*l, "eval ") == NULL)
        continue;
      g_string_append_len (s, *l, cut != NULL ? cut - *l : (gssize) strlen (*l));
      g_string_append_c (s, '\n');
    }
  return g_string_free (s, FALSE);
}

static char *
train_ok (const char *config)
{
  g_autofree char *out = NULL, *err = NULL;
  int status = ks_test_run_ksdist (ARGS ("train", config), NULL, plugins, &out, &err);
  if (status != 0)
    g_error ("ksdist train %s failed (%d):\n%s%s", config, status, out, err);
  return learning_lines (out);
}

/* ---- the memory a run holds ---- */

static gsize
rss_anon_kib (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/status", (int) pid);
  g_autofree char *text = NULL;
  const char *at;
  if (!g_file_get_contents (path, &text, NULL, NULL) || (at = strstr (text, "RssAnon:")) == NULL)
    return 0;
  return (gsize) g_ascii_strtoull (at + strlen ("RssAnon:"), NULL, 10);
}

/* Runs `ksdist train config`, sampling its RssAnon every 5 ms: the largest seen (KiB). */
static gsize
peak_rss_anon (const char *config)
{
  int out_fd, err_fd, status;
  gsize peak = 0;
  GPid pid = ks_test_spawn_ksdist (ARGS ("train", config), NULL, plugins, &out_fd, &err_fd);

  while (waitpid (pid, &status, WNOHANG) == 0)
    {
      peak = MAX (peak, rss_anon_kib (pid));
      g_usleep (5000);
    }
  /* its output is a few lines, well within the pipes' buffers */
  g_autofree char *out = ks_test_read_all (out_fd);
  g_autofree char *err = ks_test_read_all (err_fd);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    g_error ("ksdist train %s failed:\n%s%s", config, out, err);
  g_assert_nonnull (strstr (out, "eval accuracy"));
  return peak;
}

/* A 256 MiB float32 .npy trains with its rows mapped: the run's anonymous memory stays
 * within a quarter of the data's size above the same run's on a file of 1024 rows (the
 * whole-table path held all of it, and more, in anonymous memory). */
static void
test_mapped_memory (void)
{
  const gsize f = 256, rows = 262144, bytes = rows * f * sizeof (float);
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *big = write_npy (dir, "big", 0, rows, f, 2, PLAIN);
  g_autofree char *small = write_npy (dir, "small", 0, 1024, f, 2, PLAIN);
  const char *train = "steps = 20\nbatch = 64\nlog_every = 10";
  g_autofree char *data_big = g_strdup_printf ("task = npy\npath = %s\nlabels = %s/big.labels.npy\n"
                                               "normalize = standard", big, dir);
  g_autofree char *data_small = g_strdup_printf ("task = npy\npath = %s\nlabels = "
                                                 "%s/small.labels.npy\nnormalize = standard",
                                                 small, dir);
  g_autofree char *config_big = write_config (dir, "big.ini", data_big, train);
  g_autofree char *config_small = write_config (dir, "small.ini", data_small, train);

  gsize base = peak_rss_anon (config_small), peak = peak_rss_anon (config_big);
  g_test_message ("RssAnon peak: %" G_GSIZE_FORMAT " KiB on 1024 rows, %" G_GSIZE_FORMAT
                  " KiB on %" G_GSIZE_FORMAT " rows (%" G_GSIZE_FORMAT " KiB of features)",
                  base, peak, rows, bytes / 1024);
  g_assert_cmpuint (base, >, 0);
  g_assert_cmpuint (peak, <, base + bytes / 1024 / 4);
  ks_test_rmtree (dir);
}

/* A mapped file cut short while the job trains on it (a read past its new end faults):
 * the job ends with status 1 and one message naming the file and what to do, not a bare
 * SIGBUS. */
static void
test_mapped_cut_short (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *npy = write_npy (dir, "rows", 0, 65536, 64, 2, PLAIN);
  g_autofree char *data = g_strdup_printf ("task = npy\npath = %s\nlabels = %s/rows.labels.npy",
                                           npy, dir);
  g_autofree char *config = write_config (dir, "cut.ini", data,
                                          "steps = 1000000\nbatch = 64\nlog_every = 1");
  int out_fd, err_fd, status = 0;
  char first[64];
  GPid pid = ks_test_spawn_ksdist (ARGS ("train", config), NULL, plugins, &out_fd, &err_fd);

  g_assert_cmpint (read (out_fd, first, sizeof first), >, 0); /* a step line: it trains */
  g_assert_cmpint (truncate (npy, 128), ==, 0);               /* its header alone is left */
  for (int i = 0; i < 6000 && waitpid (pid, &status, WNOHANG) == 0; i++)
    g_usleep (10000);
  if (kill (pid, 0) == 0)
    {
      kill (pid, SIGKILL);
      waitpid (pid, &status, 0);
      g_error ("ksdist train went on for 60 s on a data file cut short");
    }
  g_autofree char *out = ks_test_read_all (out_fd);
  g_autofree char *err = ks_test_read_all (err_fd);
  g_test_message ("%s", err);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 1);
  g_autofree char *said = g_strdup_printf ("ksdist: %s was cut short while this job read it", npy);
  g_assert_nonnull (strstr (err, said));
  g_assert_nonnull (strstr (err, "resume from the newest checkpoint"));
  ks_test_rmtree (dir);
}

/* Mapped rows train exactly as rows in memory: the same .npy gzipped (read whole), with
 * standardisation and a held-out split, gives the same loss lines and the same weights;
 * IDX the same. */
static void
test_mapped_equals_memory (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *plain_dir = g_build_filename (dir, "plain", NULL);
  g_autofree char *gz_dir = g_build_filename (dir, "gz", NULL);
  const char *train = "steps = 40\nbatch = 32\nlog_every = 5\neval_every = 20";
  char *lines[2] = { NULL, NULL };
  float *weights[2] = { NULL, NULL };
  gsize n[2];

  for (int packed = 0; packed < 2; packed++)
    {
      const char *sub = packed ? gz_dir : plain_dir;
      g_assert_cmpint (g_mkdir (sub, 0700), ==, 0);
      g_autofree char *features = write_npy (sub, "rows", 0, 3000, 12, 3, packed ? GZIP : PLAIN);
      g_autofree char *export = g_build_filename (sub, "export", NULL);
      g_autofree char *data = g_strdup_printf ("task = npy\npath = %s\nlabels = %s/rows.labels.npy\n"
                                               "normalize = standard\nholdout = 0.2", features, sub);
      g_autofree char *t = g_strdup_printf ("%s\nexport_dir = %s", train, export);
      g_autofree char *config = write_config (sub, "run.ini", data, t);
      g_autofree char *model = g_build_filename (export, "model.safetensors", NULL);
      lines[packed] = train_ok (config);
      weights[packed] = ks_test_safetensors_floats (model, &n[packed]);
    }
  g_assert_nonnull (strstr (lines[0], "step 40/40 loss"));
  g_assert_cmpstr (lines[0], ==, lines[1]);
  g_assert_cmpuint (n[0], ==, n[1]);
  g_assert_cmpmem (weights[0], n[0] * sizeof (float), weights[1], n[1] * sizeof (float));
  for (int i = 0; i < 2; i++)
    g_free (lines[i]), g_free (weights[i]);

  /* IDX: 28 x 28 bytes an image; the plain pair mapped, the gzipped pair read whole */
  char *idx_lines[2] = { NULL, NULL };
  for (int packed = 0; packed < 2; packed++)
    {
      g_autofree char *sub = g_strdup_printf ("%s/idx%d", dir, packed);
      g_assert_cmpint (g_mkdir (sub, 0700), ==, 0);
      for (int train_set = 0; train_set < 2; train_set++)
        {
          guint32 count = train_set ? 600 : 200;
          g_autofree char *images = g_strdup_printf ("%s/%s-images-idx3-ubyte%s", sub,
                                                     train_set ? "train" : "t10k",
                                                     packed ? ".gz" : "");
          g_autofree char *labels = g_strdup_printf ("%s/%s-labels-idx1-ubyte", sub,
                                                     train_set ? "train" : "t10k");
          Out o = out_open (images, packed ? GZIP : PLAIN), l = out_open (labels, PLAIN);
          guint32 ih[4] = { GUINT32_TO_BE (0x803), GUINT32_TO_BE (count), GUINT32_TO_BE (28),
                            GUINT32_TO_BE (28) };
          guint32 lh[2] = { GUINT32_TO_BE (0x801), GUINT32_TO_BE (count) };
          out_write (&o, ih, sizeof ih);
          out_write (&l, lh, sizeof lh);
          for (guint32 r = 0; r < count; r++)
            {
              guint8 pixels[28 * 28], y = (guint8) label_of (r, 4);
              for (int p = 0; p < 28 * 28; p++)
                pixels[p] = (guint8) (feature_of (r, p, 4) * 80 + 40);
              out_write (&o, pixels, sizeof pixels);
              out_write (&l, &y, 1);
            }
          out_close (&o);
          out_close (&l);
        }
      g_autofree char *data = g_strdup_printf ("task = idx\npath = %s\nnormalize = standard", sub);
      g_autofree char *config = write_config (sub, "run.ini", data, train);
      idx_lines[packed] = train_ok (config);
    }
  g_assert_nonnull (strstr (idx_lines[0], "eval accuracy"));
  g_assert_cmpstr (idx_lines[0], ==, idx_lines[1]);
  g_free (idx_lines[0]);
  g_free (idx_lines[1]);
  ks_test_rmtree (dir);
}

/* A folder of npy files (NAME.npy beside NAME.labels.npy) is their rows one after
 * another: it trains bitwise as the one file of all of them. */
static void
test_npy_folder (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *parts = g_build_filename (dir, "parts", NULL);
  const char *train = "steps = 30\nbatch = 16\nlog_every = 5";
  g_assert_cmpint (g_mkdir (parts, 0700), ==, 0);
  g_autofree char *a = write_npy (parts, "a", 0, 100, 6, 3, PLAIN);
  g_autofree char *b = write_npy (parts, "b", 100, 250, 6, 3, PLAIN);
  g_autofree char *c = write_npy (parts, "c", 350, 50, 6, 3, PLAIN);
  g_autofree char *all = write_npy (dir, "all", 0, 400, 6, 3, PLAIN);
  g_autofree char *test = write_npy (dir, "test", 1000, 64, 6, 3, PLAIN);
  g_autofree char *data_one = g_strdup_printf ("task = npy\npath = %s\nlabels = %s/all.labels.npy\n"
                                               "test_path = %s\ntest_labels = %s/test.labels.npy",
                                               all, dir, test, dir);
  g_autofree char *data_many = g_strdup_printf ("task = npy\npath = %s\ntest_path = %s\n"
                                                "test_labels = %s/test.labels.npy", parts, test,
                                                dir);
  g_autofree char *one = write_config (dir, "one.ini", data_one, train);
  g_autofree char *many = write_config (dir, "many.ini", data_many, train);
  g_autofree char *lines_one = train_ok (one);
  g_autofree char *lines_many = train_ok (many);
  g_assert_nonnull (strstr (lines_one, "step 30/30 loss"));
  g_assert_cmpstr (lines_one, ==, lines_many);

  /* a features file without its labels is refused, naming the file it looked for */
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *orphan = g_build_filename (parts, "d.npy", NULL);
  g_assert_true (g_file_set_contents (orphan, "x", 1, NULL));
  g_assert_cmpint (ks_test_run_ksdist (ARGS ("train", many), NULL, plugins, &out, &err), ==, 2);
  g_assert_nonnull (strstr (err, "d.labels.npy"));
  ks_test_rmtree (dir);
}

/* The comma-separated floats of metadata `key` in a safetensors file's JSON header. */
static double *
metadata_floats (const char *file, const char *key, gsize *n)
{
  g_autofree char *bytes = NULL;
  gsize len;
  guint64 hlen;
  g_assert_true (g_file_get_contents (file, &bytes, &len, NULL));
  g_assert_cmpuint (len, >=, 8);
  memcpy (&hlen, bytes, 8);
  hlen = GUINT64_FROM_LE (hlen);
  g_assert_cmpuint (hlen, <=, len - 8);
  g_autofree char *header = g_strndup (bytes + 8, hlen);
  g_autofree char *quoted = g_strdup_printf ("\"%s\":\"", key);
  const char *at = strstr (header, quoted);
  g_assert_nonnull (at);
  at += strlen (quoted);
  g_autofree char *list = g_strndup (at, strcspn (at, "\""));
  g_auto (GStrv) items = g_strsplit (list, ",", -1);
  double *v = g_new (double, g_strv_length (items));
  for (*n = 0; items[*n] != NULL; (*n)++)
    v[*n] = g_ascii_strtod (items[*n], NULL);
  return v;
}

/* npy parts split over 2 workers (labels paired by name, each worker its own) with
 * normalize = standard: both workers train on one model, and the moments the export
 * keeps are those of all the files' rows, computed here independently. */
static void
test_split_npy_moments (void)
{
  const gsize f = 5, rows[3] = { 120, 200, 80 }, total = 400;
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *parts = g_build_filename (dir, "parts", NULL);
  g_autofree char *export = g_build_filename (dir, "export", NULL);
  g_assert_cmpint (g_mkdir (parts, 0700), ==, 0);
  for (gsize p = 0, first = 0; p < 3; first += rows[p++])
    {
      g_autofree char *name = g_strdup_printf ("part-%" G_GSIZE_FORMAT, p);
      g_autofree char *path = write_npy (parts, name, first, rows[p], f, 3, PLAIN);
    }
  g_autofree char *test = write_npy (dir, "test", 5000, 64, f, 3, PLAIN);
  g_autofree char *data = g_strdup_printf ("task = npy\npath = %s\nsplit_files = true\n"
                                           "normalize = standard\ntest_path = %s\n"
                                           "test_labels = %s/test.labels.npy", parts, test, dir);
  g_autofree char *train = g_strdup_printf ("steps = 20\nbatch = 16\nlog_every = 10\n"
                                            "export_dir = %s", export);
  g_autofree char *config = write_config (dir, "split.ini", data, train);
  g_autofree char *out = NULL, *err = NULL;
  int status = ks_test_run_ksdist (ARGS ("launch", "-n", "2", config), NULL, plugins, &out,
                                   &err);
  if (status != 0)
    g_error ("split npy run failed (%d):\n%s%s", status, out, err);
  g_autofree char *both = g_strconcat (out, err, NULL);
  g_assert_nonnull (strstr (both, "worker 1 reads 1 of the 3 files"));

  g_autofree char *model = g_build_filename (export, "model.safetensors", NULL);
  gsize n_mean, n_std;
  g_autofree double *mean = metadata_floats (model, "data.mean", &n_mean);
  g_autofree double *std = metadata_floats (model, "data.std", &n_std);
  g_assert_cmpuint (n_mean, ==, f);
  g_assert_cmpuint (n_std, ==, f);
  for (gsize j = 0; j < f; j++)
    {
      double sum = 0, sq = 0;
      for (gsize r = 0; r < total; r++)
        sum += feature_of (r, j, 3);
      for (gsize r = 0; r < total; r++)
        sq += (feature_of (r, j, 3) - sum / total) * (feature_of (r, j, 3) - sum / total);
      g_assert_cmpfloat_with_epsilon (mean[j], sum / total, 1e-6 * (1 + fabs (sum / total)));
      g_assert_cmpfloat_with_epsilon (std[j], sqrt (sq / total), 1e-6 * sqrt (sq / total));
    }
  ks_test_rmtree (dir);
}

/* n CSV files of 4 features and 3 classes, `rows` each, in dir/parts. */
static char *
write_csv_parts (const char *dir, int n, gsize rows, int columns)
{
  char *parts = g_build_filename (dir, "parts", NULL);
  g_assert_cmpint (g_mkdir (parts, 0700), ==, 0);
  for (int p = 0; p < n; p++)
    {
      g_autoptr (GString) s = g_string_new (NULL);
      for (gsize r = p * rows; r < (p + 1) * rows; r++)
        {
          for (int j = 0; j < columns; j++)
            g_string_append_printf (s, "%.4f,", feature_of (r, j, 3));
          g_string_append_printf (s, "%" G_GINT64_FORMAT "\n", label_of (r, 3));
        }
      g_autofree char *name = g_strdup_printf ("part-%d.csv", p);
      g_autofree char *path = ks_test_write (parts, name, s->str);
    }
  return parts;
}

static const char *
eval_value (const char *out, const char *metric)
{
  g_autofree char *key = g_strdup_printf ("eval %s ", metric);
  const char *at = NULL, *next = out;
  while ((next = strstr (next, key)) != NULL)
    at = next++;
  return at != NULL ? at + strlen (key) : NULL;
}

/* 4 CSV files over 2 workers with split_files: each reads its 2 files (its log line
 * names them), the model learns the classes, and a run resumed from its step-15
 * checkpoint ends bitwise where the unbroken run ended. */
static void
test_split_csv (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *parts = write_csv_parts (dir, 4, 300, 4);
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *data = g_strdup_printf ("task = csv\npath = %s\nsplit_files = true\n"
                                           "normalize = standard", parts);
  g_autofree char *ckpt = g_build_filename (dir, "ckpt", NULL);
  g_autofree char *resumed = g_build_filename (dir, "resumed", NULL);
  g_autofree char *train = g_strdup_printf ("steps = 30\nbatch = 32\nlog_every = 10\n"
                                            "checkpoint_dir = %s\ncheckpoint_every = 15", ckpt);
  g_autofree char *config = write_config (dir, "split.ini", data, train);

  int status = ks_test_run_ksdist (ARGS ("launch", "--nproc-per-node", "2", config), NULL,
                                   plugins, &out, &err);
  if (status != 0)
    g_error ("split run failed (%d):\n%s%s", status, out, err);
  g_autofree char *rank0 = g_strdup_printf ("worker 0 reads 2 of the 4 files of %s: "
                                            "%s/part-0.csv to %s/part-1.csv", parts, parts, parts);
  g_autofree char *rank1 = g_strdup_printf ("worker 1 reads 2 of the 4 files of %s: "
                                            "%s/part-2.csv to %s/part-3.csv", parts, parts, parts);
  /* launch passes the ranks' lines on, prefixed with their rank */
  g_autofree char *both = g_strconcat (out, err, NULL);
  if (strstr (both, rank0) == NULL || strstr (both, rank1) == NULL)
    g_error ("no line naming each worker's files:\n%s", both);
  const char *accuracy = eval_value (out, "accuracy");
  g_assert_nonnull (accuracy);
  g_test_message ("held-out accuracy %.4s", accuracy);
  g_assert_cmpfloat (g_ascii_strtod (accuracy, NULL), >=, 0.9);
  /* the held-out rows of every worker's files are counted: each worker holds out at least
   * a batch (32) of its own, and both print the same sum */
  g_autofree char *line0 = NULL, *line1 = NULL;
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    if (g_str_has_prefix (lines[i], "[rank 0] eval accuracy "))
      line0 = (g_free (line0), g_strdup (lines[i] + strlen ("[rank 0] ")));
    else if (g_str_has_prefix (lines[i], "[rank 1] eval accuracy "))
      line1 = (g_free (line1), g_strdup (lines[i] + strlen ("[rank 1] ")));
  g_assert_nonnull (line0);
  g_assert_cmpstr (line0, ==, line1);
  const char *count = strchr (line0, '(');
  g_assert_nonnull (count);
  g_assert_cmpuint (g_ascii_strtoull (count + 1, NULL, 10), >=, 64);

  /* resumed at step 15 (the checkpoint copied aside) on 2 workers: the same end */
  g_assert_cmpint (g_mkdir (resumed, 0700), ==, 0);
  g_autofree char *from = g_build_filename (ckpt, "checkpoint-15", NULL);
  g_autofree char *to = g_build_filename (resumed, "checkpoint-15", NULL);
  const char *cp[] = { "cp", "-r", from, to, NULL };
  g_autofree char *cp_out = NULL, *cp_err = NULL;
  g_assert_cmpint (ks_test_run_program (cp, NULL, plugins, &cp_out, &cp_err), ==, 0);
  g_autofree char *train2 = g_strdup_printf ("steps = 30\nbatch = 32\nlog_every = 10\n"
                                             "checkpoint_dir = %s\ncheckpoint_every = 15\n"
                                             "resume = true", resumed);
  g_autofree char *config2 = write_config (dir, "resume.ini", data, train2);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  status = ks_test_run_ksdist (ARGS ("launch", "--nproc-per-node", "2", config2), NULL,
                               plugins, &out, &err);
  if (status != 0)
    g_error ("resumed split run failed (%d):\n%s%s", status, out, err);
  g_autofree char *end_a = g_build_filename (ckpt, "checkpoint-30", NULL);
  g_autofree char *end_b = g_build_filename (resumed, "checkpoint-30", NULL);
  g_autoptr (GDir) d = g_dir_open (end_a, 0, NULL);
  const char *name;
  gboolean any = FALSE;
  g_assert_nonnull (d);
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *a = g_build_filename (end_a, name, NULL);
      g_autofree char *b = g_build_filename (end_b, name, NULL);
      if (!g_str_has_suffix (name, ".safetensors"))
        continue;
      g_autoptr (GBytes) ba = ks_test_checkpoint_bytes (a);
      g_autoptr (GBytes) bb = ks_test_checkpoint_bytes (b);
      g_assert_true (g_bytes_equal (ba, bb));
      any = TRUE;
    }
  g_assert_true (any);
  ks_test_rmtree (dir);
}

/* Refused before training, exit 2, naming the key or the files: fewer files than
 * workers, split_files on generated data, a glob matching nothing; and files of other
 * column counts (when read), naming both. */
static void
test_refusals (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *parts = write_csv_parts (dir, 3, 20, 4);
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *data = g_strdup_printf ("task = csv\npath = %s\nsplit_files = true", parts);
  g_autofree char *config = write_config (dir, "three.ini", data, "steps = 5");
  g_assert_cmpint (ks_test_run_ksdist (ARGS ("config", "-n", "4", config), NULL, plugins, &out,
                                       &err), ==, 2);
  g_assert_nonnull (strstr (err, "split_files"));
  g_assert_nonnull (strstr (err, "3 files for 4 workers"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (ks_test_run_ksdist (ARGS ("config", "-n", "3", config), NULL, plugins, &out,
                                       &err), ==, 0);

  g_autofree char *spirals = write_config (dir, "spirals.ini", "task = spirals\nsplit_files = true",
                                           "steps = 5");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (ks_test_run_ksdist (ARGS ("config", spirals), NULL, plugins, &out, &err), ==, 2);
  g_assert_nonnull (strstr (err, "split_files"));

  g_autofree char *glob = g_strdup_printf ("task = csv\npath = %s/nothing-*.csv", dir);
  g_autofree char *none = write_config (dir, "none.ini", glob, "steps = 5");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (ks_test_run_ksdist (ARGS ("config", none), NULL, plugins, &out, &err), ==, 2);
  g_assert_nonnull (strstr (err, "matches no file"));

  /* part-3.csv of 5 features beside 3 parts of 4 */
  g_autoptr (GString) s = g_string_new (NULL);
  for (int r = 0; r < 20; r++)
    g_string_append_printf (s, "1,2,3,4,5,%d\n", r % 3);
  g_autofree char *odd = ks_test_write (parts, "part-3.csv", s->str);
  g_autofree char *many = g_strdup_printf ("task = csv\npath = %s/part-*.csv", parts);
  g_autofree char *mixed = write_config (dir, "mixed.ini", many, "steps = 5\nbatch = 8");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (ks_test_run_ksdist (ARGS ("train", mixed), NULL, plugins, &out, &err), ==, 2);
  g_autofree char *first = g_build_filename (parts, "part-0.csv", NULL);
  g_assert_nonnull (strstr (err, first));
  g_assert_nonnull (strstr (err, odd));
  ks_test_rmtree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (g_getenv ("KSDIST") == NULL)
    {
      g_test_message ("KSDIST is not set (run through make check)");
      return 77;
    }
  g_test_add_func ("/big-data/mapped-memory", test_mapped_memory);
  g_test_add_func ("/big-data/mapped-equals-memory", test_mapped_equals_memory);
  g_test_add_func ("/big-data/mapped-cut-short", test_mapped_cut_short);
  g_test_add_func ("/big-data/npy-folder", test_npy_folder);
  g_test_add_func ("/big-data/split-csv", test_split_csv);
  g_test_add_func ("/big-data/split-npy-moments", test_split_npy_moments);
  g_test_add_func ("/big-data/refusals", test_refusals);
  return g_test_run ();
}
