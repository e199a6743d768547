/* Where a supervised task's samples come from: points generated in the plane (spirals,
 * rings), or the user's own rows from CSV, NumPy or IDX files (table.h), one file or many
 * (split over the workers with [data] split_files), with a held-out part by index lists
 * and optional standardisation by the training rows' moments, applied as rows are read.
 * npy and IDX rows stay in their files (memory-mapped): a data set larger than memory
 * trains. */
#include "samples.h"
#include "table-private.h"

#include <math.h>
#include <string.h>

/* [data]: where the rows come from, read here (the supervised tasks' rows) and by the
 * tasks of other data: tokens-task.c, ctr-task.c, meta-task.c, builtin.c (text, addition). */
const KsKeyDesc ks_tasks_data_keys[] = {
  { "data", "task", KS_VALUE_CHOICE, "spirals", 1, 0,
    "spirals|rings|csv|npy|idx|image_folder|tokens|text|addition|ctr",
    "spirals, rings: generated classification in the plane (mlp, layers); csv, npy, idx, "
    "image_folder: your own rows from [data] path (mlp, layers); tokens: a language model (layers) on a "
    "token file (llm.c's .bin shards, nanoGPT's train.bin); text: next-character "
    "prediction on [data] path (gpt); addition: lines such as 12+34=46 (gpt), scored by "
    "exact match on held-out sums; ctr: click-through rate on Criteo-format files in [data] "
    "path's train/ and test/ (ctr), scored by AUC" },
  { "data", "images", KS_VALUE_CHOICE, "characters", 1, 0, "characters|colour",
    "Few-shot image set at [data] path (train, val, test; a folder of images per class): "
    "characters, 28x28 grey with rotations as more training classes (Omniglot; `ksdist "
    "datagen glyphs`), or colour, 84x84 RGB (Mini-ImageNet; `ksdist datagen images`)" },
  { "data", "cache_mb", KS_VALUE_INT, "512", 0, 1e7, NULL,
    "Decoded images kept in memory after their first read, in MiB" },
  { "data", "bad_images", KS_VALUE_CHOICE, "error", 1, 0, "error|skip",
    "A file of the image set that does not decode is an error naming it, or skipped and "
    "counted" },
  { "data", "shrink_every", KS_VALUE_INT, "0", 0, 1e12, NULL,
    "ctr: steps between shrinks of the sparse table (a day's end: show and click decay, rows "
    "of low score or unseen too long go; see [table.NAME]), asked by the first worker; 0 "
    "never" },
  { "data", "bad_lines", KS_VALUE_CHOICE, "error", 1, 0, "error|skip",
    "ctr: a malformed line of the data is an error naming its file and line, or skipped and "
    "counted" },
  { "data", "digits", KS_VALUE_INT, "2", 1, 9, NULL,
    "Addition task: the largest number of digits of an operand" },
  { "data", "path", KS_VALUE_PATH, "/usr/share/dict/words", 1, 0, NULL,
    "Text corpus of the text task (the last tenth is held out; by default the English word "
    "list of Debian's wamerican); the ctr task's directory of train/ and test/ files; csv: "
    "a CSV or TSV file (gzip read directly), or a folder or glob (data/part-*.csv) of many "
    "of the same columns, their rows one after another in name order; npy: the features' "
    ".npy file, or a folder or glob of NAME.npy files each with its labels in "
    "NAME.labels.npy beside it; npy and uncompressed IDX rows stay in their files "
    "(memory-mapped: a data set larger than memory trains), the other formats and gzipped "
    "files load into memory; idx: a folder of MNIST's four files (train-images-idx3-ubyte, ..., t10k-labels-idx1-ubyte, or .gz); "
    "image_folder: a folder of one sub-folder of PNG or JPEG images per class "
    "(torchvision's ImageFolder); tokens: the training tokens' file" },
  { "data", "height", KS_VALUE_INT, "32", 1, 4096, NULL,
    "image_folder: the rows' image height; each image is resized to height x width" },
  { "data", "width", KS_VALUE_INT, "32", 1, 4096, NULL, "image_folder: the rows' image width" },
  { "data", "channels", KS_VALUE_CHOICE, "3", 1, 0, "1|3",
    "image_folder: 1 (grey, the mean of red, green and blue) or 3 (RGB)" },
  { "data", "labels", KS_VALUE_PATH, "", 1, 0, NULL,
    "npy: the labels' .npy file, one per row of [data] path (empty when the path names many "
    "files: NAME.labels.npy pairs with NAME.npy)" },
  { "data", "test_path", KS_VALUE_PATH, "", 1, 0, NULL,
    "csv, npy: the held-out rows' file (npy: with [data] test_labels), or a folder or glob "
    "of them as [data] path (read by every worker, also with split_files); image_folder: the "
    "held-out images' folder, its classes the same; tokens: the "
    "held-out tokens' file; empty: [data] holdout of the rows (chosen by a seeded hash) or "
    "of the tokens (the file's end)" },
  { "data", "test_labels", KS_VALUE_PATH, "", 1, 0, NULL, "npy: the held-out labels' .npy file" },
  { "data", "holdout", KS_VALUE_DOUBLE, "0.1", 0.001, 0.9, NULL,
    "csv, npy without a test_path: the fraction of rows held out (by a hash of the row "
    "number, its file's number among many and [data] seed, so every run and every worker "
    "holds out the same rows)" },
  { "data", "label", KS_VALUE_STRING, "", 1, 0, NULL,
    "csv: the label column: a 0-based index when written as digits (a header cell named 4 "
    "is picked by its index too), else a header name; empty: the last column" },
  { "data", "dtype", KS_VALUE_CHOICE, "uint16", 1, 0, "uint16|uint32",
    "tokens: the token files' integers: uint16 (llm.c's shards, nanoGPT's train.bin) or "
    "uint32 (a plain file, for vocabularies over 65,536); a file that looks read with the "
    "wrong one (many 0 tokens as uint16, ids over 16M as uint32) is warned about" },
  { "data", "missing", KS_VALUE_CHOICE, "error", 1, 0, "error|skip|mean|zero",
    "csv: a missing cell (empty, NA, N/A or ?) is an error naming it, or its record is "
    "skipped (one warning counts them), or a missing feature is its column's mean over the "
    "training file's values (a test_path file's too; exports keep the means for ksdist "
    "infer), or 0 (a missing label is an error unless skip)" },
  { "data", "header", KS_VALUE_CHOICE, "auto", 1, 0, "auto|yes|no",
    "csv: whether the first line names the columns (auto: when a field of it other than "
    "the label's is not a number)" },
  { "data", "delimiter", KS_VALUE_CHOICE, "auto", 1, 0, "auto|comma|tab|semicolon|space",
    "csv: the field separator (auto: tab for .tsv, else comma)" },
  { "data", "normalize", KS_VALUE_CHOICE, "none", 1, 0, "none|standard",
    "csv, npy, idx: standard scales each feature by the training rows' mean and standard "
    "deviation (saved with checkpoints and exports as data.mean and data.std)" },
  { "data", "split_files", KS_VALUE_BOOL, "false", 1, 0, NULL,
    "csv, npy with [data] path a folder or glob of many files: each worker reads only its "
    "contiguous share of the files (sorted by name; at least one each) and shuffles its own "
    "rows each epoch; the held-out rows and standard moments stay those of all files; false: "
    "every worker reads every file" },
  { "data", "samples", KS_VALUE_INT, "2048", 16, 1e8, NULL, "Training samples generated" },
  { "data", "noise", KS_VALUE_DOUBLE, "0.02", 0, 10, NULL, "Gaussian noise added to each point" },
  { "data", "seed", KS_VALUE_INT, "7", 0, 1e15, NULL,
    "Seed of the generated data (the held-out set uses seed + 1), and of csv's and npy's "
    "held-out rows" },
  { NULL },
};

struct SampleFiles {
  GPtrArray *files; /* KsRows *, in order */
  gsize *first;     /* files->len + 1: file k's rows are [first[k], first[k + 1]) */
};

typedef enum { SOURCE_POINTS, SOURCE_CSV, SOURCE_NPY, SOURCE_IDX, SOURCE_IMAGES } Source;

static Source
source_of (const KsConfig *c)
{
  const char *task = ks_config_get_string (c, "data", "task");
  return strcmp (task, "csv") == 0   ? SOURCE_CSV
         : strcmp (task, "npy") == 0 ? SOURCE_NPY
         : strcmp (task, "idx") == 0 ? SOURCE_IDX
         : strcmp (task, "image_folder") == 0 ? SOURCE_IMAGES
                                     : SOURCE_POINTS;
}

const char *const *
sample_set_settings (const KsConfig *c)
{
  static const char *const points[] = { "data.task", "data.samples", "data.seed", "data.noise",
                                        NULL };
  static const char *const csv[] = { "data.task", "data.path", "data.test_path", "data.holdout",
                                     "data.seed", "data.label", "data.header",
                                     "data.delimiter", "data.normalize", "data.split_files",
                                     "data.missing", NULL };
  static const char *const npy[] = { "data.task", "data.path", "data.labels", "data.test_path",
                                     "data.test_labels", "data.holdout", "data.seed",
                                     "data.normalize", "data.split_files", NULL };
  static const char *const idx[] = { "data.task", "data.path", "data.normalize", NULL };
  static const char *const images[] = { "data.task", "data.path", "data.test_path",
                                        "data.holdout", "data.seed", "data.height",
                                        "data.width", "data.channels", "data.normalize", NULL };
  const char *const *by_source[] = { points, csv, npy, idx, images };
  return by_source[source_of (c)];
}

/* [data] split_files: many files, at least one a worker, every worker its own rows. */
static gboolean
check_split (const KsConfig *c, int workers, GError **error)
{
  const char *path = ks_config_get_string (c, "data", "path");
  g_auto (GStrv) files = NULL, labels = NULL;

  if (!ks_config_get_bool (c, "data", "split_files"))
    return TRUE;
  if (ks_trainer_pipelined_config (c))
    return ks_tasks_config_error (error, "[data] split_files = true with [pipeline]: the stages "
                                  "of a pipeline must see the same rows; remove one of them");
  if (!sample_files_is_list (path))
    return ks_tasks_config_error (error, "[data] split_files = true needs [data] path to name "
                                  "many files (a folder or a glob), but %s is one file", path);
  if (workers <= 0)
    return TRUE;
  if (!sample_files_list ("path", path, "labels", ks_config_get_string (c, "data", "labels"),
                          &files,
                          source_of (c) == SOURCE_NPY ? &labels : NULL, error))
    return FALSE;
  if (g_strv_length (files) < (guint) workers)
    return ks_tasks_config_error (error, "[data] split_files = true: [data] path = %s names %u "
                                  "files for %d workers, and each worker needs one at least: "
                                  "write more files, launch fewer workers, or remove "
                                  "split_files", path, g_strv_length (files), workers);
  return TRUE;
}

gboolean
sample_set_check (const KsConfig *c, gboolean regression, int workers, GError **error)
{
  Source source = source_of (c);
  const char *task = ks_config_get_string (c, "data", "task");

  if (regression && (source == SOURCE_POINTS || source == SOURCE_IDX || source == SOURCE_IMAGES))
    return ks_tasks_config_error (error, "[model] loss = mse needs values to predict, but [data] task = %s "
                   "gives classes: use loss = cross_entropy", task);
  if (source == SOURCE_POINTS)
    return TRUE;
  if (!ks_config_is_set (c, "data", "path") || *ks_config_get_string (c, "data", "path") == '\0')
    return ks_tasks_config_error (error, "[data] task = %s reads [data] path: set it to your %s", task,
                   source == SOURCE_CSV   ? "CSV file"
                   : source == SOURCE_NPY ? "features' .npy file"
                   : source == SOURCE_IDX ? "folder of MNIST-named IDX files"
                                          : "folder of one image folder per class");
  if (source == SOURCE_NPY && *ks_config_get_string (c, "data", "labels") == '\0'
      && !sample_files_is_list (ks_config_get_string (c, "data", "path")))
    return ks_tasks_config_error (error, "[data] task = npy needs [data] labels: the labels' .npy file");
  if (source == SOURCE_NPY && !sample_files_is_list (ks_config_get_string (c, "data", "test_path"))
      && (*ks_config_get_string (c, "data", "test_path") == '\0')
             != (*ks_config_get_string (c, "data", "test_labels") == '\0'))
    return ks_tasks_config_error (error, "[data] test_path and test_labels go together for npy: set both "
                   "(the held-out features and labels) or neither (hold out [data] holdout)");
  if (ks_config_is_set (c, "data", "holdout") && *ks_config_get_string (c, "data", "test_path"))
    return ks_tasks_config_error (error, "[data] holdout is set, but [data] test_path gives the held-out "
                   "rows: remove one of them");
  return check_split (c, workers, error);
}

static void
files_free (SampleFiles *f)
{
  g_ptr_array_unref (f->files);
  g_free (f->first);
}

/* The rows of `rows` (taken over), one after another. */
static SampleFiles *
files_new (GPtrArray *rows)
{
  SampleFiles *f = g_atomic_rc_box_new0 (SampleFiles);
  f->files = rows;
  f->first = g_new0 (gsize, rows->len + 1);
  for (guint k = 0; k < rows->len; k++)
    f->first[k + 1] = f->first[k] + ((KsRows *) rows->pdata[k])->table->rows;
  return f;
}

static gsize
files_rows (const SampleFiles *f)
{
  return f->first[f->files->len];
}

/* Row `row` of all the files: the file holding it, and its row there. */
static const KsRows *
files_locate (const SampleFiles *f, gsize row, gsize *local)
{
  guint lo = 0, hi = f->files->len;
  while (hi - lo > 1)
    {
      guint mid = (lo + hi) / 2;
      if (f->first[mid] <= row)
        lo = mid;
      else
        hi = mid;
    }
  *local = row - f->first[lo];
  return f->files->pdata[lo];
}

/* Row i's features as read, not standardised (a KsRowGetter of the set). */
static void
raw_row (gconstpointer data, gsize i, float *x)
{
  const SampleSet *s = data;
  gsize local;
  const KsRows *r = files_locate (s->files, s->rows != NULL ? s->rows[i] : i, &local);
  ks_rows_get (r, local, x);
}

void
sample_set_row (const SampleSet *s, gsize i, guint8 *x, guint8 *y)
{
  gsize local;
  const KsRows *r = files_locate (s->files, s->rows != NULL ? s->rows[i] : i, &local);

  ks_rows_get (r, local, (float *) x);
  if (s->mean != NULL)
    ks_table_standardize_row ((float *) x, s->x_bytes / sizeof (float), s->mean, s->std);
  if (y == NULL)
    return;
  if (r->table->regression)
    memcpy (y, &r->table->target[local], sizeof (float));
  else
    memcpy (y, &r->table->y[local], sizeof (gint64));
}

/* The set of `rows` (NULL: all) of `files` (a reference taken), shaped as its first file. */
static void
set_of (SampleSet *s, const char *source, SampleFiles *files, gsize *rows, gsize n)
{
  const KsTable *t = ((KsRows *) files->files->pdata[0])->table;
  s->source = g_strdup (source);
  s->files = g_atomic_rc_box_acquire (files);
  s->rows = rows;
  s->n = n;
  s->ndim = t->ndim;
  memcpy (s->shape, t->shape, sizeof s->shape);
  s->x_bytes = t->features * sizeof (float);
  s->y_bytes = t->regression ? sizeof (float) : sizeof (gint64);
  s->class_names = g_strdupv (t->class_names);
  s->outputs = 1;
  for (guint k = 0; k < files->files->len && !t->regression; k++)
    s->outputs = MAX (s->outputs, ((KsRows *) files->files->pdata[k])->table->classes);
}

/* n generated points of `task` from `seed` */
static void
generate (SampleSet *s, const char *name, KsTask task, gsize n, double noise, guint64 seed)
{
  KsTable *t = ks_table_alloc (name, n, 2, FALSE, NULL);
  g_assert (t != NULL); /* [data] samples is at most 1e8 */
  t->ndim = 1;
  t->shape[0] = 2;
  t->classes = ks_task_classes (task);
  ks_task_generate (task, n, noise, seed, t->x, t->y);
  GPtrArray *rows = g_ptr_array_new_with_free_func ((GDestroyNotify) ks_rows_free);
  g_ptr_array_add (rows, ks_rows_new (t));
  SampleFiles *files = files_new (rows);
  set_of (s, name, files, NULL, n);
  g_atomic_rc_box_release_full (files, (GDestroyNotify) files_free);
  s->generated = TRUE;
  s->outputs = ks_task_classes (task);
}

/* One file's rows (npy and IDX memory-mapped); `train` picks IDX's pair. */
static KsRows *
load_rows (const KsConfig *c, Source source, const char *path, const char *labels,
           gboolean regression, gboolean train, const float *fill, gsize n_fill,
           GError **error)
{
  if (source == SOURCE_IDX)
    return ks_rows_load_idx (path, train, error);
  if (source == SOURCE_NPY)
    return ks_rows_load_npy (path, labels, regression, error);
  KsTable *t;
  if (source == SOURCE_IMAGES)
    {
      KsImageFolderOptions o = { ks_config_get_int (c, "data", "height"),
                                 ks_config_get_int (c, "data", "width"),
                                 ks_config_get_string (c, "data", "channels")[0] - '0' };
      t = ks_table_load_image_folder (path, &o, error);
      return t != NULL ? ks_rows_new (t) : NULL;
    }
  static const char *const names[] = { "comma", "tab", "semicolon", "space" };
  static const char delimiters[] = { ',', '\t', ';', ' ' };
  const char *delimiter = ks_config_get_string (c, "data", "delimiter");
  const char *header = ks_config_get_string (c, "data", "header");
  const char *label = ks_config_get_string (c, "data", "label");
  KsCsvOptions options = { 0, strcmp (header, "yes") == 0 ? 1 : strcmp (header, "no") == 0 ? 0 : -1,
                           *label != '\0' ? label : NULL, regression };
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    if (strcmp (delimiter, names[i]) == 0)
      options.delimiter = delimiters[i];
  static const char *const missing[] = { "error", "skip", "mean", "zero" };
  for (guint i = 0; i < G_N_ELEMENTS (missing); i++)
    if (strcmp (ks_config_get_string (c, "data", "missing"), missing[i]) == 0)
      options.missing = (KsCsvMissing) i;
  options.fill = fill;
  options.n_fill = n_fill;
  t = ks_table_load_csv (path, &options, error);
  return t != NULL ? ks_rows_new (t) : NULL;
}

/* Two files of one data set must be of one kind: features of one shape, labels of one
 * sort (`what` says how they are related, for the message). */
static gboolean
check_alike (const KsTable *a, const KsTable *b, const char *what, GError **error)
{
  if (a->features != b->features || a->ndim != b->ndim
      || memcmp (a->shape, b->shape, a->ndim * sizeof (gint64)) != 0)
    return ks_tasks_config_error (error, "%s has %" G_GSIZE_FORMAT " features a row but %s has %"
                   G_GSIZE_FORMAT ": %s", a->path, a->features, b->path, b->features, what);
  if (!a->regression && a->class_names != NULL
      && (b->class_names == NULL
          || !g_strv_equal ((const char *const *) a->class_names,
                            (const char *const *) b->class_names)))
    return ks_tasks_config_error (error, "%s and %s name different classes (every file must "
                   "name the same classes, each of them at least once)", a->path, b->path);
  return TRUE;
}

static int
compare_name (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* A held-out file may lack some classes: its class names (sorted, as the training
 * files') are mapped onto the training ones, which it takes; a class no training file has
 * is an error naming it. */
static gboolean
take_classes (const KsTable *train, KsTable *test, GError **error)
{
  if (train->regression)
    return TRUE;
  if (train->class_names == NULL || test->class_names == NULL)
    return TRUE; /* numeric ids need no map; named against numeric: check_alike says so */
  guint n = g_strv_length (train->class_names);
  g_autofree gint64 *map = g_new (gint64, MAX (test->classes, 1));
  for (gint64 k = 0; k < test->classes; k++)
    {
      char **at = bsearch (&test->class_names[k], train->class_names, n, sizeof (char *),
                           compare_name);
      if (at == NULL)
        return ks_tasks_config_error (error, "%s holds class '%s', which no training row has: "
                                      "the held-out classes must be among the training ones",
                                      test->path, test->class_names[k]);
      map[k] = at - train->class_names;
    }
  for (gsize r = 0; r < test->rows; r++)
    test->y[r] = map[test->y[r]];
  g_strfreev (test->class_names);
  test->class_names = g_strdupv (train->class_names);
  test->classes = train->classes;
  return TRUE;
}

/* The files' rows, each file checked like the first; a held-out set's (`like` the
 * training rows) may lack some of their classes. */
static SampleFiles *
load_files (const KsConfig *c, Source source, char **paths, char **labels,
            gboolean regression, gboolean train, const KsTable *like, const float *fill,
            GError **error)
{
  g_autoptr (GPtrArray) rows = g_ptr_array_new_with_free_func ((GDestroyNotify) ks_rows_free);
  for (guint k = 0; paths[k] != NULL; k++)
    {
      KsRows *r = load_rows (c, source, paths[k], labels != NULL ? labels[k] : NULL,
                             regression, train, fill, like != NULL ? like->features : 0, error);
      if (r == NULL)
        return NULL;
      g_ptr_array_add (rows, r);
      if (like != NULL && !take_classes (like, r->table, error))
        return NULL;
      if (k > 0 && !check_alike (((KsRows *) rows->pdata[0])->table, r->table,
                                 "the files of a data set must be alike", error))
        return NULL;
    }
  return files_new (g_steal_pointer (&rows));
}

/* The training and held-out rows of `files` (from file `first_file` of the data set on):
 * a row is held out by the seeded hash of its file's number and its row there. */
static gboolean
hold_out (const KsConfig *c, SampleFiles *files, gsize first_file, const char *source,
          SampleSet *train, SampleSet *eval, GError **error)
{
  double fraction = ks_config_get_double (c, "data", "holdout");
  guint64 seed = ks_config_get_int (c, "data", "seed");
  gsize n = files_rows (files), n_train = 0, n_test = 0;
  g_autofree gsize *train_rows = g_new (gsize, MAX (n, 1));
  g_autofree gsize *test_rows = g_new (gsize, MAX (n, 1));

  for (guint k = 0; k < files->files->len; k++)
    for (gsize r = files->first[k]; r < files->first[k + 1]; r++)
      if (ks_table_held_out (seed, first_file + k, r - files->first[k], fraction))
        test_rows[n_test++] = r;
      else
        train_rows[n_train++] = r;
  if (n_test == 0 || n_train == 0)
    return ks_tasks_config_error (error, "%s: holding out a fraction %g of %" G_GSIZE_FORMAT
                                  " rows leaves the %s part empty; use more rows or a %s "
                                  "fraction", source, fraction, n,
                                  n_test == 0 ? "test" : "training",
                                  n_test == 0 ? "larger" : "smaller");
  /* kept: 8 bytes a row */
  set_of (train, source, files, g_renew (gsize, g_steal_pointer (&train_rows), n_train), n_train);
  set_of (eval, source, files, g_renew (gsize, g_steal_pointer (&test_rows), n_test), n_test);
  return TRUE;
}

/* Per-feature moments of the training rows of every file of the data set, the same on
 * every worker whatever its share of the files: each file's count, mean and squares about
 * it in double (two passes), combined in file order by Chan et al.'s pairwise update. A
 * file of another worker's share is read for it and let go (npy mapped; CSV parsed). */
static gboolean
moments_of_all (const KsConfig *c, Source source, char **paths, char **labels,
                gboolean regression, gboolean hashed, SampleFiles *mine, gsize my_first,
                float *mean, float *std, GError **error)
{
  const KsTable *like = ((KsRows *) mine->files->pdata[0])->table;
  gsize f = like->features;
  double fraction = ks_config_get_double (c, "data", "holdout");
  guint64 seed = ks_config_get_int (c, "data", "seed");
  g_autofree double *m = g_new0 (double, f), *m2 = g_new0 (double, f);
  g_autofree double *fm = g_new (double, f), *fm2 = g_new (double, f);
  g_autofree float *x = g_new (float, f);
  double n = 0;

  for (gsize k = 0; paths[k] != NULL; k++)
    {
      g_autoptr (KsRows) other = NULL;
      const KsRows *r;
      gsize count = 0;
      if (k >= my_first && k - my_first < mine->files->len)
        r = mine->files->pdata[k - my_first];
      else if ((r = other = load_rows (c, source, paths[k], labels ? labels[k] : NULL,
                                       regression, TRUE, NULL, 0, error)) == NULL
               || !check_alike (like, r->table, "the files of a data set must be alike",
                                error))
        return FALSE;
      memset (fm, 0, f * sizeof (double));
      memset (fm2, 0, f * sizeof (double));
      for (int pass = 0; pass < 2; pass++)
        {
          for (gsize row = 0; row < r->table->rows; row++)
            {
              if (hashed && ks_table_held_out (seed, k, row, fraction))
                continue;
              ks_rows_get (r, row, x);
              for (gsize j = 0; j < f; j++)
                if (pass == 0)
                  fm[j] += x[j];
                else
                  fm2[j] += (x[j] - fm[j]) * (x[j] - fm[j]);
              count += pass == 0;
            }
          for (gsize j = 0; pass == 0 && count > 0 && j < f; j++)
            fm[j] /= count;
        }
      if (count == 0)
        continue;
      for (gsize j = 0; j < f; j++)
        {
          double delta = fm[j] - m[j], total = n + count;
          m[j] += delta * count / total;
          m2[j] += fm2[j] + delta * delta * n * count / total;
        }
      n += count;
    }
  for (gsize j = 0; j < f; j++)
    {
      mean[j] = (float) m[j];
      std[j] = n > 0 ? MAX ((float) sqrt (m2[j] / n), KS_TABLE_STD_FLOOR) : 1;
    }
  return TRUE;
}

/* With split_files the workers hold different files, but must build the same model: the
 * same features, classes and class names on every one (the output layer covers the
 * largest class id any worker holds). */
static gboolean
agree_over_workers (KsRoleMaker *role, SampleSet *train, SampleSet *eval, GError **error)
{
  g_autofree char *names = train->class_names != NULL ? g_strjoinv ("\n", train->class_names)
                                                      : g_strdup ("");
  double features = (double) train->x_bytes, hash = g_str_hash (names);
  double in[5] = { (double) train->outputs, features, -features, hash, -hash }, out[5];

  if (!ks_role_maker_all_reduce_worker (role, in, out, 5, KS_REDUCE_MAX, error))
    return FALSE;
  if (out[1] != -out[2] || out[3] != -out[4])
    return ks_tasks_config_error (error, "[data] split_files: worker %d's files (%s) have %s "
                                  "than another worker's: every file must have the same "
                                  "columns and name the same classes",
                                  ks_role_maker_worker_index (role), train->source,
                                  out[1] != -out[2] ? "other features" : "other classes");
  train->outputs = eval->outputs = (gint64) out[0];
  return TRUE;
}

/* This worker's files of the list: all, or its contiguous share with split_files (and
 * the number in the list of its first). */
static gboolean
my_share (KsRoleMaker *role, gboolean split, char **all, char **all_labels, char ***mine,
          char ***my_labels, gsize *first, GError **error)
{
  *first = 0;
  if (!split || role == NULL)
    {
      *mine = g_strdupv (all);
      *my_labels = g_strdupv (all_labels);
      return TRUE;
    }
  if ((*mine = ks_role_maker_split_files (role, (const char *const *) all, error)) == NULL)
    return FALSE;
  if ((*mine)[0] == NULL)
    return ks_tasks_config_error (error, "[data] split_files: %u files for %d workers, and "
                                  "worker %d has none: write more files or launch fewer "
                                  "workers", g_strv_length (all),
                                  ks_role_maker_worker_num (role),
                                  ks_role_maker_worker_index (role));
  while (strcmp (all[*first], (*mine)[0]) != 0)
    (*first)++;
  *my_labels = NULL;
  if (all_labels != NULL)
    {
      guint n = g_strv_length (*mine);
      *my_labels = g_new0 (char *, n + 1);
      for (guint k = 0; k < n; k++)
        (*my_labels)[k] = g_strdup (all_labels[*first + k]);
    }
  return TRUE;
}

/* The files of the data set: all of [data] path's, this worker's share of them (mine,
 * from number *first on) and the held-out files (NULL: held out by hash). */
typedef struct {
  char **all, **all_labels, **mine, **my_labels, **tests, **test_labels;
  gsize first;
} FileLists;

static void
file_lists_clear (FileLists *l)
{
  g_strfreev (l->all);
  g_strfreev (l->all_labels);
  g_strfreev (l->mine);
  g_strfreev (l->my_labels);
  g_strfreev (l->tests);
  g_strfreev (l->test_labels);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (FileLists, file_lists_clear)

static gboolean
list_files (const KsConfig *c, Source source, gboolean split, KsRoleMaker *role, FileLists *l,
            GError **error)
{
  const char *path = ks_config_get_string (c, "data", "path");
  const char *test_path = ks_config_get_string (c, "data", "test_path");
  gboolean npy = source == SOURCE_NPY;

  if (source != SOURCE_CSV && !npy)
    {
      /* one folder: IDX's holds the held-out pair too */
      l->all = g_strdupv ((char *[]) { (char *) path, NULL });
      l->mine = g_strdupv (l->all);
      if (*test_path != '\0' || source == SOURCE_IDX)
        l->tests = g_strdupv ((char *[]) { (char *) (source == SOURCE_IDX ? path : test_path),
                                           NULL });
      return TRUE;
    }
  return sample_files_list ("path", path, "labels", ks_config_get_string (c, "data", "labels"),
                            &l->all, npy ? &l->all_labels : NULL, error)
         && (*test_path == '\0'
             || sample_files_list ("test_path", test_path, "test_labels",
                                   ks_config_get_string (c, "data", "test_labels"), &l->tests,
                                   npy ? &l->test_labels : NULL, error))
         && my_share (role, split, l->all, l->all_labels, &l->mine, &l->my_labels, &l->first,
                      error);
}

/* The training and held-out sets of this worker's files: a test file's rows (missing
 * cells filled with train->fill), or rows held out by hash. */
static gboolean
split_rows (const KsConfig *c, Source source, gboolean regression, const FileLists *l,
            SampleFiles *files, const char *name, SampleSet *train, SampleSet *eval,
            GError **error)
{
  if (l->tests == NULL)
    return hold_out (c, files, l->first, name, train, eval, error);
  SampleFiles *test_files = load_files (c, source, l->tests, l->test_labels, regression, FALSE,
                                        ((KsRows *) files->files->pdata[0])->table,
                                        train->fill, error);
  if (test_files == NULL)
    return FALSE;
  gboolean ok = check_alike (((KsRows *) files->files->pdata[0])->table,
                             ((KsRows *) test_files->files->pdata[0])->table,
                             "the held-out rows must be like the training rows", error);
  if (ok)
    {
      set_of (train, name, files, NULL, files_rows (files));
      set_of (eval, l->tests[1] == NULL ? l->tests[0] : ks_config_get_string (c, "data", "test_path"),
              test_files, NULL, files_rows (test_files));
    }
  g_atomic_rc_box_release_full (test_files, (GDestroyNotify) files_free);
  return ok;
}

/* The user's files' training and held-out rows, standardised if asked. */
static gboolean
load_tables (const KsConfig *c, Source source, gboolean regression, KsRoleMaker *role,
             SampleSet *train, SampleSet *eval, GError **error)
{
  const char *path = ks_config_get_string (c, "data", "path");
  gboolean split = (source == SOURCE_CSV || source == SOURCE_NPY)
                   && ks_config_get_bool (c, "data", "split_files");
  g_auto (FileLists) l = { 0 };
  g_autofree char *name = NULL;
  SampleFiles *files;
  gboolean ok;

  if (!list_files (c, source, split, role, &l, error))
    return FALSE;
  if (split && role != NULL)
    {
      guint n = g_strv_length (l.mine), total = g_strv_length (l.all);
      name = g_strdup_printf ("%s (files %" G_GSIZE_FORMAT " to %" G_GSIZE_FORMAT " of %u)",
                              path, l.first + 1, l.first + n, total);
      g_message ("worker %d reads %u of the %u files of %s: %s to %s",
                 ks_role_maker_worker_index (role), n, total, path, l.mine[0], l.mine[n - 1]);
    }
  else
    name = g_strdup (l.all[1] == NULL ? l.all[0] : path);
  if ((files = load_files (c, source, l.mine, l.my_labels, regression, TRUE, NULL, NULL,
                           error)) == NULL)
    return FALSE;
  /* [data] missing = mean: a held-out file's missing cells take the training rows' means
   * (over every worker's files; each training file's took its own column's, which keeps
   * its mean), never the held-out file's own */
  if (source == SOURCE_CSV && strcmp (ks_config_get_string (c, "data", "missing"), "mean") == 0)
    {
      gsize f = ((KsRows *) files->files->pdata[0])->table->features;
      g_autofree float *std = g_new (float, MAX (f, 1));
      train->fill = g_new (float, MAX (f, 1));
      if (!moments_of_all (c, source, l.all, l.all_labels, regression, l.tests == NULL, files,
                           l.first, train->fill, std, error))
        {
          g_atomic_rc_box_release_full (files, (GDestroyNotify) files_free);
          return FALSE;
        }
    }
  ok = split_rows (c, source, regression, &l, files, name, train, eval, error);
  if (ok && strcmp (ks_config_get_string (c, "data", "normalize"), "standard") == 0)
    {
      gsize f = train->x_bytes / sizeof (float);
      train->mean = g_new (float, f);
      train->std = g_new (float, f);
      if (split)
        ok = moments_of_all (c, source, l.all, l.all_labels, regression, l.tests == NULL, files,
                             l.first, train->mean, train->std, error);
      else
        {
          g_autofree float *x = g_new (float, MAX (f, 1));
          ks_table_moments_of (raw_row, train, train->n, f, x, train->mean, train->std);
        }
      eval->mean = g_memdup2 (train->mean, f * sizeof (float));
      eval->std = g_memdup2 (train->std, f * sizeof (float));
    }
  train->split = split && role != NULL;
  eval->split = train->split && l.tests == NULL; /* rows held out of each worker's own files */
  g_atomic_rc_box_release_full (files, (GDestroyNotify) files_free);
  return ok;
}

gboolean
sample_set_load (SampleSet *train, SampleSet *eval, const KsConfig *c, gboolean regression,
                 gsize batch, KsRoleMaker *role, GError **error)
{
  Source source = source_of (c);
  const char *name = ks_config_get_string (c, "data", "task");

  if (!sample_set_check (c, regression, 0, error))
    return FALSE;
  if (source == SOURCE_POINTS)
    {
      KsTask task;
      gsize n = ks_config_get_int (c, "data", "samples");
      guint64 seed = ks_config_get_int (c, "data", "seed");
      double noise = ks_config_get_double (c, "data", "noise");
      ks_task_from_name (name, &task); /* a checked choice */
      generate (train, name, task, n, noise, seed);
      /* a quarter as many held out, in whole batches */
      generate (eval, name, task, MAX (1, n / batch / 4) * batch, noise, seed + 1);
      return TRUE;
    }
  if (!load_tables (c, source, regression, role, train, eval, error))
    return FALSE;
  /* numeric classes: the output layer covers the largest id of either part */
  train->outputs = eval->outputs = MAX (train->outputs, eval->outputs);
  if (train->split && ks_role_maker_worker_num (role) > 1
      && !agree_over_workers (role, train, eval, error))
    return FALSE;
  if (!regression && train->outputs < 2)
    return ks_tasks_config_error (error, "%s: every training row has the label 0, one class: nothing to "
                   "learn. Is the label column right (%s)? Set [data] label", train->source,
                   source == SOURCE_CSV && *ks_config_get_string (c, "data", "label") == '\0'
                       ? "the last column, by default" : "as set");
  return TRUE;
}

char *const *
sample_set_feature_names (const SampleSet *s)
{
  if (s->files == NULL || s->files->files->len == 0)
    return NULL;
  return ((KsRows *) s->files->files->pdata[0])->table->feature_names;
}

void
sample_set_clear (SampleSet *s)
{
  g_free (s->source);
  if (s->files != NULL)
    g_atomic_rc_box_release_full (s->files, (GDestroyNotify) files_free);
  g_free (s->rows);
  g_free (s->mean);
  g_free (s->std);
  g_free (s->fill);
  g_strfreev (s->class_names);
  memset (s, 0, sizeof *s);
}
