/* ksdist infer's data files, read as the export's training read its own: a CSV file with
 * or without its label column, image files and image folders decoded to the training
 * shape, npy and IDX. */
#include "infer.h"

#include <ksdist/config.h>

#include <math.h>
#include <string.h>

/* The export's row shape (data.shape, "28,28,1"): its dims into shape (up to 4), their
 * count returned; 0 when the export does not say (an older ksdist's). */
static int
export_shape (GHashTable *meta, gint64 *shape)
{
  const char *text = meta != NULL ? g_hash_table_lookup (meta, "data.shape") : NULL;
  if (text == NULL)
    return 0;
  g_auto (GStrv) dims = g_strsplit (text, ",", -1);
  int n = 0;
  for (; dims[n] != NULL && n < 4; n++)
    if (!g_ascii_string_to_signed (dims[n], 10, 1, G_MAXINT32, &shape[n], NULL))
      return 0;
  return dims[n] == NULL ? n : 0;
}

/* Where a header's `fields` first differ from the model's `names`, both counted from 1:
 * every column listed would make one line of kilobytes (785 columns of pixels). */
static char *
first_difference (char *const *fields, char *const *names, const char *input)
{
  guint i = 0;
  while (fields[i] != NULL && names[i] != NULL && strcmp (fields[i], names[i]) == 0)
    i++;
  const char *field = fields[i], *name = names[i];
  if (field == NULL)
    return g_strdup_printf ("%s ends after column %u, the model's feature %u is '%s'", input, i,
                            i + 1, name);
  if (name == NULL)
    return g_strdup_printf ("column %u of %s is '%s', the model has %u features", i + 1, input,
                            field, i);
  return g_strdup_printf ("column %u of %s is '%s', the model's feature %u is '%s'", i + 1, input,
                          field, i + 1, name);
}

/* Whether `fields` without column `skip` (-1: none) are `names`. */
static gboolean
same_names (char *const *fields, gint skip, char *const *names)
{
  guint j = 0;
  for (guint i = 0; fields[i] != NULL; i++)
    if ((gint) i != skip && (names[j] == NULL || strcmp (fields[i], names[j++]) != 0))
      return FALSE;
  return names[j] == NULL;
}

/* Whether the export predicts values ([model] loss = mse): its labels are read so. */
static gboolean
regression (GHashTable *meta)
{
  return g_strcmp0 (g_hash_table_lookup (meta, "data.labels"), "values") == 0;
}

/* A missing cell is filled as training filled it: [data] missing = zero, or mean with
 * the training rows' column means (the export's data.fill); else an error. */
static gboolean
missing_cells (const char *dir, GHashTable *meta, gsize width, KsCsvOptions *o, float **fill,
               GError **error)
{
  const char *missing = g_hash_table_lookup (meta, "data.missing");
  const char *text = g_hash_table_lookup (meta, "data.fill");
  if (missing != NULL && strcmp (missing, "zero") == 0)
    o->missing = KS_CSV_MISSING_ZERO;
  if (missing == NULL || strcmp (missing, "mean") != 0)
    return TRUE;
  g_auto (GStrv) values = g_strsplit (text != NULL ? text : "", ",", -1);
  if (text == NULL || g_strv_length (values) != width)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "%s: trained with [data] missing = mean, but its data.fill (the training "
                   "means) does not hold %" G_GSIZE_FORMAT " numbers: export it again", dir,
                   width);
      return FALSE;
    }
  *fill = g_new (float, width);
  for (gsize j = 0; j < width; j++)
    {
      char *end;
      (*fill)[j] = (float) g_ascii_strtod (values[j], &end);
      if (end == values[j] || *end != '\0' || !isfinite ((*fill)[j]))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "%s: its data.fill (the training means) holds '%s', not a finite "
                       "number: export it again", dir, values[j]);
          return FALSE;
        }
    }
  o->missing = KS_CSV_MISSING_MEAN;
  o->fill = *fill;
  o->n_fill = width;
  return TRUE;
}

/* A CSV file of rows to score: its features alone, or with a label column (scored). A
 * header is matched against the training file's (data.features): the same names are the
 * features, the same names and one more column that column the label. Without a header,
 * or names to match it with, the width tells: the model's features, or one more (the
 * label, the last). */
static KsTable *
load_csv (const char *dir, GHashTable *meta, const char *input, const char *label,
          GError **error)
{
  KsCsvOptions o = { 0, -1, label, regression (meta), KS_CSV_MISSING_ERROR, FALSE, NULL };
  gint64 shape[4];
  int ndim = export_shape (meta, shape);
  g_autofree float *fill = NULL;
  if (!missing_cells (dir, meta, ndim == 1 ? shape[0] : 0, &o, &fill, error))
    return NULL;
  const char *names_text = g_hash_table_lookup (meta, "data.features");
  g_auto (GStrv) names = names_text != NULL ? g_strsplit (names_text, "\n", -1) : NULL;
  g_autofree char *index = NULL;
  gboolean numeric;

  if (label != NULL || ndim != 1)
    return ks_table_load_csv (input, &o, error); /* told, or an older export: a label column */
  gsize width = shape[0];
  g_auto (GStrv) first = ks_table_csv_first_record (input, 0, &numeric, error);
  if (first == NULL)
    return NULL;
  guint n = g_strv_length (first), texts = 0;
  gint text_at = -1;
  for (guint i = 0; i < n; i++)
    {
      char *end;
      g_ascii_strtod (first[i], &end);
      /* a missing cell of a data row is no name */
      if ((end == first[i] || *end != '\0') && !ks_table_csv_missing_cell (first[i]))
        texts++, text_at = i;
    }
  if (names != NULL && same_names (first, -1, names))
    {
      o.header = 1, o.features_only = TRUE;
      return ks_table_load_csv (input, &o, error);
    }
  for (guint k = 0; names != NULL && k < n; k++)
    if (same_names (first, k, names))
      {
        o.header = 1, o.label = index = g_strdup_printf ("%u", k);
        return ks_table_load_csv (input, &o, error);
      }
  if (texts == 1 && n == width + 1) /* a data row whose label is a class name */
    {
      o.header = 0, o.label = index = g_strdup_printf ("%d", text_at);
      return ks_table_load_csv (input, &o, error);
    }
  if (texts > 0 && names != NULL)
    {
      g_autofree char *where = first_difference (first, names, input);
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "%s: its header's %u columns are neither this model's %u features nor them "
                   "and one label column (%s): name the columns as the training file did (in "
                   "its order), or give rows without a header", input, n,
                   g_strv_length (names), where);
      return NULL;
    }
  o.header = texts > 0 ? 1 : 0;
  if (n == width)
    o.features_only = TRUE;
  else if (n != width + 1)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "%s: %u columns, but the model of %s reads %" G_GSIZE_FORMAT " features a "
                   "row: give its %" G_GSIZE_FORMAT " features a row, or them and a label "
                   "column (the last, or the one --label names)", input, n, dir, width, width);
      return NULL;
    }
  return ks_table_load_csv (input, &o, error);
}

/* Images are decoded to the training rows' height, width and channels. */
static gboolean
image_options (const char *dir, GHashTable *meta, KsImageFolderOptions *o, GError **error)
{
  gint64 shape[4];
  int ndim = export_shape (meta, shape);
  if (ndim == 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "%s: its metadata has no data.shape (the training rows' shape; an export "
                   "of an older ksdist): train or export it again to score images", dir);
      return FALSE;
    }
  if (ndim != 3 || (shape[2] != 1 && shape[2] != 3) || shape[0] > KS_IMAGE_FOLDER_MAX_SIDE
      || shape[1] > KS_IMAGE_FOLDER_MAX_SIDE)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "%s: trained on rows of shape [%s], not images (height, width, and 1 or 3 "
                   "channels): give its rows as text, csv or npy", dir,
                   (char *) g_hash_table_lookup (meta, "data.shape"));
      return FALSE;
    }
  *o = (KsImageFolderOptions) { (int) shape[0], (int) shape[1], (int) shape[2] };
  return TRUE;
}

/* Each row's label, an index into t's own class names, becomes id[label]: the class's
 * id in the training's numbering. */
static void
remap_classes (KsTable *t, const gint64 *id)
{
  for (gsize r = 0; r < t->rows; r++)
    t->y[r] = id[t->y[r]];
}

/* A model trained on numbered classes (IDX, CSV ids) has no class names: an image
 * folder's class folders named 0, 1, ... are those ids (folder "10" sorts before "2"). */
static gboolean
numbered_classes (KsTable *t, GError **error)
{
  g_autofree gint64 *id = g_new (gint64, MAX (t->classes, 1));
  for (gint64 c = 0; c < t->classes; c++)
    if (!g_ascii_string_to_signed (t->class_names[c], 10, 0, KS_TABLE_MAX_CLASSES - 1, &id[c],
                                   NULL))
      {
        g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                     "%s: class folder '%s' is not a class id: the model was trained on "
                     "numbered classes, so its class folders are named 0, 1, ...", t->path,
                     t->class_names[c]);
        return FALSE;
      }
  remap_classes (t, id);
  g_clear_pointer (&t->class_names, g_strfreev);
  return TRUE;
}

/* Rows labelled by class names (a CSV's, an image folder's class folders) take the
 * training's ids for them (data.classes), not the ids of their own sorted set, which
 * differ where the rows lack a class; a name training never saw is refused. */
static gboolean
training_classes (const char *dir, GHashTable *meta, KsTable *t, GError **error)
{
  const char *joined = g_hash_table_lookup (meta, "data.classes");
  if (t->class_names == NULL || joined == NULL)
    return TRUE;
  g_auto (GStrv) names = g_strsplit (joined, "\n", -1);
  guint n = g_strv_length (names);
  g_autofree gint64 *id = g_new (gint64, MAX (t->classes, 1));
  for (gint64 c = 0; c < t->classes; c++)
    {
      id[c] = -1;
      for (guint k = 0; k < n && id[c] < 0; k++)
        if (strcmp (t->class_names[c], names[k]) == 0)
          id[c] = k;
      if (id[c] < 0)
        {
          g_autofree char *known = g_strjoinv (", ", names);
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "%s: class '%s' is not one the model of %s was trained on (%s)",
                       t->path, t->class_names[c], dir, known);
          return FALSE;
        }
    }
  remap_classes (t, id);
  g_strfreev (t->class_names);
  t->class_names = g_steal_pointer (&names);
  t->classes = n;
  return TRUE;
}

/* A missing cell of a model trained with [data] missing = error: the reader's advice
 * names a setting of training, which infer cannot change; say what can be done here. */
static void
missing_advice (const char *dir, GHashTable *meta, GError *error)
{
  const char *missing = g_hash_table_lookup (meta, "data.missing");
  const char *advice = error != NULL ? strstr (error->message, "; set [data] missing = ") : NULL;
  if (advice == NULL)
    return;
  g_autofree char *head = g_strndup (error->message, advice - error->message);
  g_free (error->message);
  error->message = g_strdup_printf ("%s; the model of %s was trained with [data] missing = "
                                    "%s, so infer does not fill it (nor drops a row to score): "
                                    "give the cell a value, or train with missing = mean or "
                                    "zero", head, dir, missing != NULL ? missing : "error");
}

KsTable *
ks_infer_load (const char *dir, GHashTable *meta, const char *format, const char *input,
               const char *const *images, const char *labels, const char *label,
               GError **error)
{
  KsImageFolderOptions o;

  if (strcmp (format, "csv") == 0)
    {
      g_autoptr (KsTable) t = load_csv (dir, meta, input, label, error);
      if (t == NULL)
        missing_advice (dir, meta, error != NULL ? *error : NULL);
      return t != NULL && training_classes (dir, meta, t, error) ? g_steal_pointer (&t) : NULL;
    }
  if (strcmp (format, "npy") == 0)
    return ks_table_load_npy (input, labels, regression (meta), error);
  if (strcmp (format, "idx") == 0)
    return ks_table_load_idx (input, FALSE, error);
  if (!image_options (dir, meta, &o, error))
    return NULL;
  if (strcmp (format, "image") == 0)
    return ks_table_load_images (images, &o, error);
  g_autoptr (KsTable) t = ks_table_load_image_folder (input, &o, error);
  if (t == NULL)
    return NULL;
  if (g_hash_table_lookup (meta, "data.classes") == NULL ? !numbered_classes (t, error)
                                                         : !training_classes (dir, meta, t, error))
    return NULL;
  return g_steal_pointer (&t);
}
