/* ksdist infer: an exported inference model ([train] export_dir) run on rows read from a
 * file. Each line is one row: the values of every feed for it, in the feeds' order,
 * separated by spaces or commas; each output line is the targets' values for that row
 * (or, with --argmax, the index of the largest value in each group of the last
 * dimension: the class; of a group of one, a binary model's logit, 1 when it is above 0,
 * else 0). The export runs with any batch, so rows go through in chunks. */
#include "cli.h"
#include "infer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* One feed: its values for a row, and for all rows read. */
typedef struct {
  const char *name;
  KsDType dtype;
  gsize per_row;
  GArray *values; /* float or gint64 */
} Feed;

static void
feeds_clear (Feed *feeds, guint n)
{
  for (guint i = 0; i < n; i++)
    g_clear_pointer (&feeds[i].values, g_array_unref);
}

/* "x (2 float32), y (1 int64)" */
static char *
row_layout (const Feed *feeds, guint n)
{
  GString *s = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (s, "%s%s (%" G_GSIZE_FORMAT " %s)", i ? ", " : "", feeds[i].name,
                            feeds[i].per_row, ks_dtype_name (feeds[i].dtype));
  return g_string_free (s, FALSE);
}

/* Appends one value of `text` to `feed`; FALSE if it is not a number of its type. */
static gboolean
parse_value (Feed *feed, const char *text)
{
  char *end = NULL;
  if (feed->dtype == KS_DTYPE_INT64)
    {
      gint64 v;
      if (!g_ascii_string_to_signed (text, 10, G_MININT64, G_MAXINT64, &v, NULL))
        return FALSE;
      g_array_append_val (feed->values, v);
      return TRUE;
    }
  errno = 0;
  double d = g_ascii_strtod (text, &end);
  float v = (float) d;
  if (end == text || *end != '\0' || errno == ERANGE || !isfinite (v))
    return FALSE;
  g_array_append_val (feed->values, v);
  return TRUE;
}

/* Reads every row of `in` (named `name`) into the feeds; the count in *rows. */
static gboolean
read_rows (FILE *in, const char *name, Feed *feeds, guint n_feeds, gsize *rows, GError **error)
{
  gsize per_row = 0, cap = 0;
  ssize_t len;
  char *line = NULL;
  gsize line_no = 0;

  for (guint i = 0; i < n_feeds; i++)
    per_row += feeds[i].per_row;
  *rows = 0;
  while ((len = getline (&line, &cap, in)) >= 0)
    {
      g_auto (GStrv) words = g_strsplit_set (g_strstrip (line), " \t,", -1);
      gsize n = 0;
      line_no++;
      if (line[0] == '\0' || line[0] == '#')
        continue;
      for (char **w = words; *w != NULL; w++)
        if (**w != '\0')
          n++;
      if (n != per_row)
        {
          g_autofree char *layout = row_layout (feeds, n_feeds);
          g_autofree char *lower = g_ascii_strdown (name, -1);
          /* a training CSV read as plain rows: its label column is one value too many */
          const char *hint = g_str_has_suffix (lower, ".csv")
                                 ? " (without --format, rows are plain values; --format csv "
                                   "reads a CSV as training does, its label column left out)"
                                 : "";
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "%s:%" G_GSIZE_FORMAT ": %" G_GSIZE_FORMAT " values; a row of this model "
                       "is %" G_GSIZE_FORMAT ": %s%s", name, line_no, n, per_row, layout, hint);
          free (line);
          return FALSE;
        }
      guint f = 0;
      gsize in_feed = 0;
      for (char **w = words; *w != NULL; w++)
        {
          if (**w == '\0')
            continue;
          if (!parse_value (&feeds[f], *w))
            {
              g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                           "%s:%" G_GSIZE_FORMAT ": '%s' is not %s (feed '%s')", name, line_no,
                           *w, feeds[f].dtype == KS_DTYPE_INT64 ? "an integer"
                                                                : "a finite float32",
                           feeds[f].name);
              free (line);
              return FALSE;
            }
          if (++in_feed == feeds[f].per_row)
            f++, in_feed = 0;
        }
      (*rows)++;
    }
  free (line);
  if (ferror (in))
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE, "reading %s: %s", name,
                   g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}

/* Prints rows [0, rows) of the targets' values, or their classes (kept in `classes`
 * unless NULL); `first` (unless NULL) keeps each row's first value. */
static gboolean
print_rows (KsExpr **targets, guint n_targets, gsize rows, gboolean argmax, gint64 *classes,
            float *first, char **names, GError **error)
{
  guint n_names = names != NULL ? g_strv_length (names) : 0;
  g_autofree const float **values = g_new (const float *, n_targets);
  g_autofree gsize *per_row = g_new (gsize, n_targets), *group = g_new (gsize, n_targets);
  g_autoptr (GPtrArray) host = g_ptr_array_new_with_free_func (g_free);

  for (guint t = 0; t < n_targets; t++)
    {
      const KsTensor *v = ks_expr_value (targets[t], error);
      if (v == NULL)
        return FALSE;
      if (v->dtype != KS_DTYPE_FLOAT32)
        {
          g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                       "target '%s' is not float32", ks_expr_name (targets[t]));
          return FALSE;
        }
      float *copy = g_new (float, v->numel);
      g_ptr_array_add (host, copy);
      if (!ks_tensor_to_host (v, copy, v->numel * sizeof (float), error))
        return FALSE;
      values[t] = copy;
      per_row[t] = v->numel / rows;
      group[t] = v->ndim > 0 && v->shape[v->ndim - 1] > 0 ? (gsize) v->shape[v->ndim - 1] : 1;
    }
  for (gsize r = 0; r < rows; r++)
    {
      for (guint t = 0; t < n_targets; t++)
        {
          const float *x = values[t] + r * per_row[t];
          if (first != NULL && t == 0)
            first[r] = x[0];
          if (!argmax)
            for (gsize j = 0; j < per_row[t]; j++)
              printf ("%s%.9g", t + j ? " " : "", x[j]);
          else
            for (gsize g = 0; g < per_row[t] / group[t]; g++)
              {
                gsize best = 0;
                for (gsize j = 1; j < group[t]; j++)
                  best = x[g * group[t] + j] > x[g * group[t] + best] ? j : best;
                if (group[t] == 1) /* one logit ([model] loss = logistic): sigmoid > 1/2 */
                  best = x[g] > 0;
                if (best < n_names)
                  printf ("%s%s", t + g ? " " : "", names[best]);
                else
                  printf ("%s%" G_GSIZE_FORMAT, t + g ? " " : "", best);
                if (classes != NULL && t == 0 && g == 0)
                  classes[r] = best;
              }
        }
      putchar ('\n');
    }
  return TRUE;
}

/* The rows of a data file read by the training readers (table.h): its features are the
 * model's one float32 input, "x". */
static gboolean
table_rows (const KsTable *table, Feed *feeds, guint n_feeds, gsize *rows, GError **error)
{
  if (n_feeds != 1 || feeds[0].dtype != KS_DTYPE_FLOAT32 || feeds[0].per_row != table->features)
    {
      g_autofree char *layout = row_layout (feeds, n_feeds);
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "%s: %" G_GSIZE_FORMAT " features a row, but this model's row is %s",
                   table->path, table->features, layout);
      return FALSE;
    }
  g_array_append_vals (feeds[0].values, table->x, table->rows * table->features);
  *rows = table->rows;
  return TRUE;
}

/* A model trained on standardised rows ([data] normalize = standard) keeps the training
 * rows' moments in its metadata: raw rows are scaled by them here, as the trainer scaled
 * its own, so a user feeds what the data file holds. */
static gboolean
standardize (const char *dir, Feed *feeds, guint n_feeds, gsize rows, GError **error)
{
  g_autoptr (GHashTable) meta = ks_checkpoint_metadata (dir, error);
  if (meta == NULL)
    return FALSE;
  const char *mean_text = g_hash_table_lookup (meta, "data.mean");
  const char *std_text = g_hash_table_lookup (meta, "data.std");
  if (mean_text == NULL || std_text == NULL)
    return TRUE;
  g_auto (GStrv) mean = g_strsplit (mean_text, ",", -1), std = g_strsplit (std_text, ",", -1);
  Feed *x = NULL;
  for (guint i = 0; i < n_feeds; i++)
    if (strcmp (feeds[i].name, "x") == 0 && feeds[i].dtype == KS_DTYPE_FLOAT32)
      x = &feeds[i];
  if (x == NULL || g_strv_length (mean) != x->per_row || g_strv_length (std) != x->per_row)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "%s: its data.mean and data.std do not fit its input 'x' of %" G_GSIZE_FORMAT
                   " values: export it again", dir, x != NULL ? x->per_row : 0);
      return FALSE;
    }
  g_autofree float *m = g_new (float, x->per_row), *s = g_new (float, x->per_row);
  for (gsize j = 0; j < x->per_row; j++)
    {
      char *end_m, *end_s;
      m[j] = g_ascii_strtod (mean[j], &end_m);
      s[j] = g_ascii_strtod (std[j], &end_s);
      if (*end_m != '\0' || *end_s != '\0' || !isfinite (m[j]) || !(s[j] > 0 && isfinite (s[j])))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "%s: data.mean or data.std holds '%s' / '%s' at feature %" G_GSIZE_FORMAT
                       ": not a finite number (and a positive deviation)", dir, mean[j], std[j], j);
          return FALSE;
        }
    }
  float *v = (float *) x->values->data;
  for (gsize r = 0; r < rows; r++)
    for (gsize j = 0; j < x->per_row; j++)
      v[r * x->per_row + j] = (v[r * x->per_row + j] - m[j]) / s[j];
  g_message ("rows standardised by the training rows' moments (the export's data.mean and "
             "data.std)");
  return TRUE;
}

static int
infer (KsCompute *compute, const char *dir, FILE *in, const char *in_name,
       const KsTable *table, gsize chunk, gboolean argmax)
{
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) feed_names = NULL, target_names = NULL;
  /* batch 1 first: the feeds' values per row */
  g_autoptr (KsModel) model = ks_load_inference_model_with_batch (dir, compute, 1, &feed_names,
                                                                  &target_names, &error);
  guint n_feeds = feed_names != NULL ? g_strv_length (feed_names) : 0;
  g_autofree Feed *feeds = g_new0 (Feed, MAX (n_feeds, 1));
  gsize rows = 0, model_rows = 1;

  if (model == NULL)
    return ks_cli_checkpoint_fail (error);
  for (guint i = 0; i < n_feeds; i++)
    {
      KsExpr *e = ks_model_find (model, feed_names[i]);
      KsDType dtype = ks_expr_dtype (e);
      feeds[i] = (Feed) { feed_names[i], dtype, ks_expr_numel (e), NULL };
      feeds[i].values = g_array_new (FALSE, FALSE, dtype == KS_DTYPE_INT64 ? sizeof (gint64)
                                                                          : sizeof (float));
    }
  if (!(table != NULL ? table_rows (table, feeds, n_feeds, &rows, &error)
                       : read_rows (in, in_name, feeds, n_feeds, &rows, &error))
      || !standardize (dir, feeds, n_feeds, rows, &error))
    {
      ks_cli_error ("%s", error->message);
      feeds_clear (feeds, n_feeds);
      return KS_EXIT_USAGE;
    }
  guint n_targets = g_strv_length (target_names);
  g_autofree KsExpr **targets = g_new (KsExpr *, n_targets);
  g_autofree KsFeed *batch = g_new (KsFeed, MAX (n_feeds, 1));
  /* the classes' names the training file gave, printed for --argmax */
  g_autoptr (GHashTable) meta = ks_checkpoint_metadata (dir, NULL);
  const char *joined = meta != NULL ? g_hash_table_lookup (meta, "data.classes") : NULL;
  g_auto (GStrv) names = joined != NULL ? g_strsplit (joined, "\n", -1) : NULL;
  /* with a data file's classes: how many the model gets right */
  gboolean score = table != NULL && table->y != NULL && argmax;
  g_autofree gint64 *classes = score ? g_new0 (gint64, MAX (rows, 1)) : NULL;
  /* with a data file's values (a regression): the RMSE of the first output */
  gboolean score_values = table != NULL && table->target != NULL && !argmax;
  g_autofree float *predicted = score_values ? g_new0 (float, MAX (rows, 1)) : NULL;
  int status = KS_EXIT_OK;
  for (gsize at = 0; at < rows && status == KS_EXIT_OK; at += chunk)
    {
      gsize n = MIN (chunk, rows - at);
      if (n != model_rows) /* the chunk size, then the last chunk's */
        {
          g_clear_pointer (&model, ks_model_free);
          model = ks_load_inference_model_with_batch (dir, compute, n, NULL, NULL, &error);
          model_rows = n;
        }
      for (guint t = 0; model != NULL && t < n_targets; t++)
        targets[t] = ks_model_find (model, target_names[t]);
      for (guint i = 0; i < n_feeds; i++)
        {
          gsize size = g_array_get_element_size (feeds[i].values) * feeds[i].per_row;
          batch[i] = (KsFeed) { feeds[i].name, feeds[i].values->data + at * size, n * size };
        }
      if (model == NULL || !ks_model_run (model, batch, n_feeds, targets, n_targets, &error)
          || !print_rows (targets, n_targets, n, argmax, classes != NULL ? classes + at : NULL,
                          predicted != NULL ? predicted + at : NULL, names, &error))
        {
          ks_cli_error ("%s: %s", dir, error->message);
          status = KS_EXIT_RUNTIME;
        }
    }
  /* named labels: a file's class ids follow its own names' order, which may lack some of
   * the training file's; compare by name */
  g_autofree gint64 *to_training = NULL;
  if (status == KS_EXIT_OK && score && names != NULL && table->class_names != NULL)
    {
      to_training = g_new (gint64, g_strv_length (table->class_names));
      for (guint i = 0; table->class_names[i] != NULL; i++)
        {
          to_training[i] = -1;
          for (guint j = 0; names[j] != NULL; j++)
            if (strcmp (names[j], table->class_names[i]) == 0)
              to_training[i] = j;
          if (to_training[i] < 0)
            g_warning ("%s: class '%s' is not one the model was trained on; its rows count as "
                       "wrong", table->path, table->class_names[i]);
        }
    }
  if (status == KS_EXIT_OK && score)
    {
      gsize right = 0;
      for (gsize r = 0; r < rows; r++)
        right += classes[r] == (to_training != NULL ? to_training[table->y[r]] : table->y[r]);
      g_message ("accuracy %.4f (%" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT " rows of %s)",
                 rows ? (double) right / rows : 0.0, right, rows, table->path);
    }
  if (status == KS_EXIT_OK && score_values)
    {
      double sum = 0;
      for (gsize r = 0; r < rows; r++)
        {
          double d = (double) predicted[r] - table->target[r];
          sum += d * d;
        }
      g_message ("rmse %.4f (%" G_GSIZE_FORMAT " rows of %s)", rows ? sqrt (sum / rows) : 0.0,
                 rows, table->path);
    }
  feeds_clear (feeds, n_feeds);
  return status;
}

static int
run_infer (int argc, char **argv)
{
  g_auto (GStrv) sets = NULL;
  g_autofree char *input = NULL;
  gboolean argmax = FALSE;
  gint chunk = 256;
  g_autofree char *format = NULL, *labels = NULL, *label = NULL;
  GOptionEntry entries[] = {
    { "input", 'i', 0, G_OPTION_ARG_FILENAME, &input,
      "Rows to run, one a line (default: standard input); with --format, the data file "
      "(idx: the folder, whose t10k files are run; image_folder: the folder of class "
      "folders; image: one image)", "FILE" },
    { "format", 0, 0, G_OPTION_ARG_STRING, &format,
      "text (the default: values a line), or a training data format: csv (the features, "
      "with or without a label column: a header is matched against the training file's), "
      "npy (with --labels), idx, image_folder (ROOT/<class>/<image>) or image (PNG or JPEG "
      "files, also given as arguments after EXPORT), decoded to the training images' size "
      "and channels; rows with labels are scored: a classifier's with --argmax (accuracy), "
      "a regression's values (RMSE)", "F" },
    { "labels", 0, 0, G_OPTION_ARG_FILENAME, &labels, "npy: the labels' .npy file", "FILE" },
    { "label", 0, 0, G_OPTION_ARG_STRING, &label,
      "csv: the label column, by name or 0-based index (default: the last)", "COLUMN" },
    { "argmax", 0, 0, G_OPTION_ARG_NONE, &argmax,
      "Print the index of each row's largest output (the class; its name when the training "
      "file named the classes), not the values; of one output (a logistic model's logit), "
      "1 when it is above 0, else 0", NULL },
    { "batch", 'b', 0, G_OPTION_ARG_INT, &chunk, "Rows run at a time (default 256)", "N" },
    KS_CLI_SET_OPTION (sets),
    { NULL },
  };
  g_autoptr (KsConfig) config = NULL;
  g_autoptr (KsRegistry) registry = NULL;
  g_autoptr (GError) error = NULL;
  int status;

  if (!ks_cli_parse ("infer", "EXPORT [IMAGE...]", ks_cmd_infer.summary, entries, &argc,
                     &argv))
    return KS_EXIT_USAGE;
  if (argc < 2 || chunk < 1)
    {
      ks_cli_error ("infer: give one EXPORT (the [train] export_dir of a run) and --batch >= 1 "
                    "(see ksdist help infer)");
      return KS_EXIT_USAGE;
    }
  if (!g_file_test (argv[1], G_FILE_TEST_IS_DIR))
    {
      ks_cli_error ("%s is not a directory: give the [train] export_dir of a run", argv[1]);
      return KS_EXIT_USAGE;
    }
  /* image files after EXPORT (or one with -i): --format image */
  char **images = argv + 2, *one[] = { input, NULL };
  if (argc > 2 && format == NULL)
    format = g_strdup ("image");
  if (format != NULL && strcmp (format, "image") == 0 && argc == 2)
    images = one;
  g_autoptr (KsTable) table = NULL;
  if (format != NULL && strcmp (format, "text") != 0)
    {
      static const char *const formats[] = { "csv", "npy", "idx", "image_folder", "image",
                                             NULL };
      gboolean image = strcmp (format, "image") == 0;
      if (!g_strv_contains (formats, format) || (argc > 2 && !image)
          || (image && (argc > 2) == (input != NULL)) || (!image && input == NULL)
          || (strcmp (format, "npy") == 0) != (labels != NULL)
          || (label != NULL && strcmp (format, "csv") != 0))
        {
          ks_cli_error ("infer: --format is text, csv, npy, idx, image_folder or image, with "
                        "-i the data file (npy: and --labels; --label for csv only); image "
                        "files go after EXPORT or one with -i");
          return KS_EXIT_USAGE;
        }
      g_autoptr (GHashTable) meta = ks_checkpoint_metadata (argv[1], &error);
      if (meta == NULL
          || (table = ks_infer_load (argv[1], meta, format, input,
                                     (const char *const *) images, labels, label,
                                     &error)) == NULL)
        return ks_cli_checkpoint_fail (error);
    }
  else if (argc > 2)
    {
      ks_cli_error ("infer: %s: files after EXPORT are images (--format image)", argv[2]);
      return KS_EXIT_USAGE;
    }
  FILE *in = table != NULL ? NULL
             : input == NULL || strcmp (input, "-") == 0 ? stdin : fopen (input, "r");
  if (table == NULL && in == NULL)
    {
      ks_cli_error ("cannot open %s: %s", input, g_strerror (errno));
      return KS_EXIT_USAGE;
    }
  if ((status = ks_cli_load (NULL, sets, &config, &registry)) == KS_EXIT_OK)
    {
      g_autoptr (KsCompute) compute = ks_compute_new (registry, config, NULL, &error);
      if (compute == NULL)
        status = ks_cli_fail (error);
      else
        status = infer (compute, argv[1], in, in == stdin ? "(standard input)" : input, table,
                        chunk, argmax);
    }
  if (in != NULL && in != stdin)
    fclose (in);
  return status;
}

const KsCommand ks_cmd_infer = {
  "infer",
  "Run an exported inference model on rows from a file",
  run_infer,
};
