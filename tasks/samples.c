/* Where a supervised task's samples come from: points generated in the plane (spirals,
 * rings), or the user's own rows from CSV, NumPy or IDX files (table.h), with a held-out
 * part and optional standardisation by the training rows' moments. */
#include "samples.h"

#include <ksdist/table.h>
#include <string.h>

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
                                     "data.delimiter", "data.normalize", NULL };
  static const char *const npy[] = { "data.task", "data.path", "data.labels", "data.test_path",
                                     "data.test_labels", "data.holdout", "data.seed",
                                     "data.normalize", NULL };
  static const char *const idx[] = { "data.task", "data.path", "data.normalize", NULL };
  static const char *const images[] = { "data.task", "data.path", "data.test_path",
                                        "data.holdout", "data.seed", "data.height",
                                        "data.width", "data.channels", "data.normalize", NULL };
  const char *const *by_source[] = { points, csv, npy, idx, images };
  return by_source[source_of (c)];
}

gboolean
sample_set_check (const KsConfig *c, gboolean regression, GError **error)
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
  if (source == SOURCE_NPY && *ks_config_get_string (c, "data", "labels") == '\0')
    return ks_tasks_config_error (error, "[data] task = npy needs [data] labels: the labels' .npy file");
  if (source == SOURCE_NPY
      && (*ks_config_get_string (c, "data", "test_path") == '\0')
             != (*ks_config_get_string (c, "data", "test_labels") == '\0'))
    return ks_tasks_config_error (error, "[data] test_path and test_labels go together for npy: set both "
                   "(the held-out features and labels) or neither (hold out [data] holdout)");
  if (ks_config_is_set (c, "data", "holdout") && *ks_config_get_string (c, "data", "test_path"))
    return ks_tasks_config_error (error, "[data] holdout is set, but [data] test_path gives the held-out "
                   "rows: remove one of them");
  return TRUE;
}

/* n generated points of `task` from `seed` */
static void
generate (SampleSet *s, const char *name, KsTask task, gsize n, double noise, guint64 seed)
{
  s->source = g_strdup (name);
  s->n = n;
  s->generated = TRUE;
  s->ndim = 1;
  s->shape[0] = 2;
  s->x_bytes = 2 * sizeof (float);
  s->y_bytes = sizeof (gint64);
  s->outputs = ks_task_classes (task);
  s->x = g_malloc (n * s->x_bytes);
  s->y = g_malloc (n * s->y_bytes);
  ks_task_generate (task, n, noise, seed, (float *) s->x, (gint64 *) s->y);
}

static KsTable *
load_table (const KsConfig *c, Source source, const char *path, const char *labels,
            gboolean regression, gboolean train, GError **error)
{
  if (source == SOURCE_IDX)
    return ks_table_load_idx (path, train, error);
  if (source == SOURCE_IMAGES)
    {
      KsImageFolderOptions o = { ks_config_get_int (c, "data", "height"),
                                 ks_config_get_int (c, "data", "width"),
                                 ks_config_get_string (c, "data", "channels")[0] - '0' };
      return ks_table_load_image_folder (path, &o, error);
    }
  if (source == SOURCE_NPY)
    return ks_table_load_npy (path, labels, regression, error);
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
  return ks_table_load_csv (path, &options, error);
}

/* The table's rows as samples (its buffers taken over). */
static void
from_table (SampleSet *s, KsTable *t)
{
  s->source = g_strdup (t->path);
  s->n = t->rows;
  s->ndim = t->ndim;
  memcpy (s->shape, t->shape, sizeof s->shape);
  s->x_bytes = t->features * sizeof (float);
  s->x = (guint8 *) g_steal_pointer (&t->x);
  if (t->regression)
    {
      s->y_bytes = sizeof (float);
      s->outputs = 1;
      s->y = (guint8 *) g_steal_pointer (&t->target);
    }
  else
    {
      s->y_bytes = sizeof (gint64);
      s->outputs = t->classes;
      s->y = (guint8 *) g_steal_pointer (&t->y);
    }
}

/* Training and held-out tables of the rows in the configured files. */
static gboolean
load_tables (const KsConfig *c, Source source, gboolean regression, KsTable **train,
             KsTable **test, GError **error)
{
  const char *path = ks_config_get_string (c, "data", "path");
  const char *test_path = ks_config_get_string (c, "data", "test_path");
  g_autoptr (KsTable) all = NULL;

  if (source == SOURCE_IDX)
    return (*train = load_table (c, source, path, NULL, FALSE, TRUE, error)) != NULL
           && (*test = load_table (c, source, path, NULL, FALSE, FALSE, error)) != NULL;
  if (*test_path != '\0')
    return (*train = load_table (c, source, path, ks_config_get_string (c, "data", "labels"),
                                 regression, TRUE, error)) != NULL
           && (*test = load_table (c, source, test_path,
                                   ks_config_get_string (c, "data", "test_labels"),
                                   regression, FALSE, error)) != NULL;
  return (all = load_table (c, source, path, ks_config_get_string (c, "data", "labels"),
                            regression, TRUE, error)) != NULL
         && ks_table_split (all, ks_config_get_double (c, "data", "holdout"),
                            ks_config_get_int (c, "data", "seed"), train, test, error);
}

/* The two tables must be of one kind: features of one shape, labels of one sort. */
static gboolean
check_alike (const KsTable *train, const KsTable *test, GError **error)
{
  if (train->features != test->features || train->ndim != test->ndim
      || memcmp (train->shape, test->shape, train->ndim * sizeof (gint64)) != 0)
    return ks_tasks_config_error (error, "%s has %" G_GSIZE_FORMAT " features a row but %s has %"
                   G_GSIZE_FORMAT ": the held-out rows must be like the training rows",
                   train->path, train->features, test->path, test->features);
  if (!train->regression && train->class_names != NULL
      && (test->class_names == NULL
          || !g_strv_equal ((const char *const *) train->class_names,
                            (const char *const *) test->class_names)))
    return ks_tasks_config_error (error, "%s and %s name different classes (the held-out file must use "
                   "the training file's class names, each of them at least once)",
                   train->path, test->path);
  return TRUE;
}

gboolean
sample_set_load (SampleSet *train, SampleSet *eval, const KsConfig *c, gboolean regression,
                 gsize batch, GError **error)
{
  Source source = source_of (c);
  const char *name = ks_config_get_string (c, "data", "task");
  g_autoptr (KsTable) train_table = NULL;
  g_autoptr (KsTable) test_table = NULL;

  if (!sample_set_check (c, regression, error))
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
  if (!load_tables (c, source, regression, &train_table, &test_table, error)
      || !check_alike (train_table, test_table, error))
    return FALSE;
  if (strcmp (ks_config_get_string (c, "data", "normalize"), "standard") == 0)
    {
      train->mean = g_new (float, train_table->features);
      train->std = g_new (float, train_table->features);
      ks_table_moments (train_table, train->mean, train->std);
      ks_table_standardize (train_table, train->mean, train->std);
      ks_table_standardize (test_table, train->mean, train->std);
    }
  from_table (train, train_table);
  from_table (eval, test_table);
  /* numeric classes: the output layer covers the largest id of either part */
  train->outputs = eval->outputs = MAX (train->outputs, eval->outputs);
  if (!regression && train->outputs < 2)
    return ks_tasks_config_error (error, "%s: every training row has the label 0, one class: nothing to "
                   "learn. Is the label column right (%s)? Set [data] label", train->source,
                   source == SOURCE_CSV && *ks_config_get_string (c, "data", "label") == '\0'
                       ? "the last column, by default" : "as set");
  return TRUE;
}

void
sample_set_clear (SampleSet *s)
{
  g_free (s->source);
  g_free (s->x);
  g_free (s->y);
  g_free (s->mean);
  g_free (s->std);
  memset (s, 0, sizeof *s);
}
