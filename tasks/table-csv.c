/* CSV and TSV tables: a label column and numeric feature columns (see ksdist/table.h for
 * what is read: quoting, header detection, the label's meaning). */
#include "table-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *path;
  char delimiter;
  gsize line;          /* of the record being read, from 1 */
  GPtrArray *fields;   /* char * into the file's bytes */
} Reader;

/* Splits `s` (one line, NUL-terminated, changed in place) into r->fields. */
static gboolean
split (Reader *r, char *s, GError **error)
{
  g_ptr_array_set_size (r->fields, 0);
  for (;;)
    {
      char *field, *end;

      if (r->delimiter != ' ')
        while (*s == ' ')
          s++;
      if (*s == '"')
        {
          /* quoted: "" is one quote; the delimiter is literal; unescaped in place */
          char *w = field = ++s;
          for (;;)
            {
              if (*s == 0)
                return ks_table_bad (error, "%s:%" G_GSIZE_FORMAT ": field %u: a quote that "
                                     "is not closed (a quoted field cannot span lines)",
                                     r->path, r->line, r->fields->len + 1) != NULL;
              if (*s == '"' && s[1] != '"')
                break;
              if (*s == '"')
                s++;
              *w++ = *s++;
            }
          s++;
          end = w;
          if (r->delimiter != ' ')
            while (*s == ' ')
              s++;
          if (*s != 0 && *s != r->delimiter)
            return ks_table_bad (error, "%s:%" G_GSIZE_FORMAT ": field %u: text after the "
                                 "closing quote (expected the delimiter or the line's end)",
                                 r->path, r->line, r->fields->len + 1) != NULL;
        }
      else
        {
          field = s;
          while (*s != 0 && *s != r->delimiter)
            s++;
          end = s;
          if (r->delimiter != ' ')
            while (end > field && end[-1] == ' ')
              end--;
        }
      gboolean last = *s == 0;
      *end = 0;
      g_ptr_array_add (r->fields, field);
      if (last)
        return TRUE;
      s++;
    }
}

/* Whether `s` is hexadecimal ("0x10", "-0X1p3"), which g_ascii_strtod would read. */
static gboolean
hexadecimal (const char *s)
{
  while (g_ascii_isspace (*s))
    s++;
  if (*s == '+' || *s == '-')
    s++;
  return s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
}

/* Whether `s` is a whole decimal number (g_ascii_strtod's forms but hexadecimal: a
 * spreadsheet's "0x10" is text, not 16; NaN and infinity are numbers, refused where used). */
static gboolean
number (const char *s, double *v)
{
  char *end;
  if (hexadecimal (s))
    return FALSE;
  *v = g_ascii_strtod (s, &end);
  return end != s && *end == 0;
}

/* The next non-blank line from *p (NUL-terminated in place, CR dropped), its number in
 * r->line; NULL at the end. */
static char *
next_line (Reader *r, char **p, const char *end)
{
  while (*p < end)
    {
      char *s = *p, *nl = memchr (s, '\n', end - s);
      char *e = nl ? nl : (char *) end;
      *p = nl ? nl + 1 : (char *) end;
      r->line++;
      if (e > s && e[-1] == '\r')
        e--;
      *e = 0;
      for (char *c = s; *c; c++)
        if (!g_ascii_isspace (*c))
          return s;
    }
  return NULL;
}

/* The label column of the first record (in r->fields) from options->label; *by_name when a
 * header name matched. -1 with an error. */
static gint
label_column (Reader *r, const KsCsvOptions *o, gboolean *by_name, GError **error)
{
  guint n = r->fields->len;
  guint64 index;

  *by_name = FALSE;
  if (o->features_only)
    return -1;
  if (o->label == NULL)
    return n - 1;
  /* digits alone are an index, whatever the header holds: a header cell named "4" must not
   * turn label = 4 into another column */
  if (g_ascii_string_to_unsigned (o->label, 10, 0, G_MAXINT, &index, NULL))
    {
      if (index < n)
        return (gint) index;
      /* a setting to change (exit status 2), not bad data */
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "%s:%" G_GSIZE_FORMAT ": [data] label = %s, a 0-based column index, but the "
                   "record has %u fields (0 to %u)", r->path, r->line, o->label, n, n - 1);
      return -1;
    }
  if (o->header != 0)
    for (guint i = 0; i < n; i++)
      if (strcmp (r->fields->pdata[i], o->label) == 0)
        {
          *by_name = TRUE;
          return i;
        }
  g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
               "%s:%" G_GSIZE_FORMAT ": [data] label = %s: no column is named so (the label "
               "is a header name, or a 0-based column index written as digits)%s",
               r->path, r->line, o->label,
               o->header == 0 ? "; [data] header = no says there are no names" : "");
  return -1;
}

static int
compare_names (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The labels (strings, with their lines) into t->y or t->target. */
static gboolean
set_labels (KsTable *t, char **labels, const gsize *lines, GError **error)
{
  gboolean numeric = TRUE;
  double v;

  for (gsize i = 0; i < t->rows && numeric; i++)
    numeric = number (labels[i], &v) && isfinite (v);
  if (t->regression)
    {
      for (gsize i = 0; i < t->rows; i++)
        if (!number (labels[i], &v) || !isfinite ((float) v))
          return ks_table_bad (error, "%s:%" G_GSIZE_FORMAT ": label '%s' is not a finite "
                               "number ([model] loss = mse, a regression, needs values)", t->path, lines[i],
                               labels[i]) != NULL;
        else
          t->target[i] = (float) v;
      return TRUE;
    }
  if (numeric)
    {
      for (gsize i = 0; i < t->rows; i++)
        {
          number (labels[i], &v);
          if (v < 0 || v != floor (v) || v >= KS_TABLE_MAX_CLASSES)
            return ks_table_bad (error, "%s:%" G_GSIZE_FORMAT ": class label '%s' is %s "
                                 "(numeric labels are class ids 0, 1, ... below %d; for "
                                 "values, a regression, set [model] loss = mse)", t->path, lines[i], labels[i],
                                 v < 0 ? "negative" : v != floor (v) ? "not an integer"
                                                                      : "too large",
                                 KS_TABLE_MAX_CLASSES) != NULL;
          t->y[i] = (gint64) v;
          t->classes = MAX (t->classes, t->y[i] + 1);
        }
      return TRUE;
    }
  /* names: the classes are their sorted set */
  g_autoptr (GHashTable) ids = g_hash_table_new (g_str_hash, g_str_equal);
  for (gsize i = 0; i < t->rows; i++)
    g_hash_table_add (ids, labels[i]);
  guint n;
  g_autofree gpointer *names = g_hash_table_get_keys_as_array (ids, &n);
  qsort (names, n, sizeof *names, compare_names);
  t->class_names = g_new0 (char *, n + 1);
  for (guint c = 0; c < n; c++)
    {
      t->class_names[c] = g_strdup (names[c]);
      g_hash_table_insert (ids, names[c], GUINT_TO_POINTER (c));
    }
  for (gsize i = 0; i < t->rows; i++)
    t->y[i] = GPOINTER_TO_UINT (g_hash_table_lookup (ids, labels[i]));
  t->classes = n;
  return TRUE;
}

/* A growing buffer of floats (a GArray's length is 32 bits). */
typedef struct {
  float *v;
  gsize n, cap;
} Floats;

static void
push (Floats *f, float v)
{
  if (f->n == f->cap)
    {
      f->cap = MAX (2 * f->cap, 4096);
      f->v = g_renew (float, f->v, f->cap);
    }
  f->v[f->n++] = v;
}

static void
floats_clear (Floats *f)
{
  g_free (f->v);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Floats, floats_clear)

/* A cell with no value: empty, or written as spreadsheets and R do (NA, N/A), or as UCI's
 * data sets do (?). NaN stays what it always was here: not a finite number. */
gboolean
ks_table_csv_missing_cell (const char *f)
{
  return *f == 0 || strcmp (f, "NA") == 0 || strcmp (f, "N/A") == 0 || strcmp (f, "?") == 0;
}

/* [data] missing = mean: each feature column's NaN (a missing cell) becomes the mean of the
 * file's values of that column. */
static gboolean
fill_means (const char *path, float *x, gsize rows, guint features, GPtrArray *names,
            gint label, GError **error)
{
  for (guint j = 0; j < features; j++)
    {
      double sum = 0;
      gsize n = 0;
      for (gsize i = 0; i < rows; i++)
        if (!isnan (x[i * features + j]))
          sum += x[i * features + j], n++;
      if (n == 0)
        {
          guint column = j + (label >= 0 && (gint) j >= label); /* the file's numbering */
          g_autofree char *name = names ? g_strdup_printf ("'%s'", (char *) names->pdata[column])
                                        : g_strdup_printf ("%u", column);
          return ks_table_bad (error, "%s: column %s has no value at all, so no mean to fill "
                               "it with ([data] missing = mean): remove the column, or set "
                               "missing = zero", path, name) != NULL;
        }
      for (gsize i = 0; i < rows; i++)
        if (isnan (x[i * features + j]))
          x[i * features + j] = (float) (sum / n);
    }
  return TRUE;
}

static char
default_delimiter (const char *path)
{
  return g_str_has_suffix (path, ".tsv") || g_str_has_suffix (path, ".tsv.gz") ? '\t' : ',';
}

KsTable *
ks_table_load_csv (const char *path, const KsCsvOptions *options, GError **error)
{
  static const KsCsvOptions defaults = { 0, -1, NULL, FALSE, KS_CSV_MISSING_ERROR, FALSE, NULL };
  const KsCsvOptions *o = options ? options : &defaults;
  g_autoptr (GPtrArray) fields = g_ptr_array_new ();
  g_autoptr (GPtrArray) labels = g_ptr_array_new ();
  g_autoptr (GArray) lines = g_array_new (FALSE, FALSE, sizeof (gsize));
  g_autoptr (GPtrArray) names = NULL;
  g_autofree char *bytes = NULL;
  g_auto (Floats) xs = { 0 };
  Reader r = { path, o->delimiter ? o->delimiter : default_delimiter (path), 0, fields };
  gboolean by_name, header, split_done;
  gsize len, first_line, skipped = 0;
  char *p, *line;
  guint ncols;
  gint label;

  g_return_val_if_fail (path != NULL, NULL);
  if ((bytes = ks_table_read (path, &len, error)) == NULL)
    return NULL;
  if (memchr (bytes, 0, len) != NULL)
    return ks_table_bad (error, "%s: a NUL byte at offset %" G_GSIZE_FORMAT "; this is not "
                         "a text table", path, (gsize) ((char *) memchr (bytes, 0, len) - bytes));
  /* a UTF-8 byte-order mark (spreadsheets write one) is not part of the first field */
  p = g_str_has_prefix (bytes, "\xef\xbb\xbf") ? bytes + 3 : bytes;
  if ((line = next_line (&r, &p, bytes + len)) == NULL)
    return ks_table_bad (error, "%s: empty file (no records)", path);
  if (!split (&r, line, error))
    return NULL;
  ncols = fields->len;
  first_line = r.line;
  if (ncols < 2 && !o->features_only)
    return ks_table_bad (error, "%s:%" G_GSIZE_FORMAT ": 1 field; a table needs a label "
                         "column and a feature column (is the delimiter '%s'?)", path, r.line,
                         r.delimiter == '\t' ? "\\t" : (char[]) { r.delimiter, 0 });
  if ((label = label_column (&r, o, &by_name, error)) < 0 && !o->features_only)
    return NULL;
  header = o->header == 1 || by_name;
  if (o->header == -1 && !header)
    for (guint i = 0; i < ncols && !header; i++)
      {
        double v;
        header = (gint) i != label && !number (fields->pdata[i], &v);
      }
  if (header)
    {
      names = g_ptr_array_new ();
      for (guint i = 0; i < ncols; i++)
        g_ptr_array_add (names, fields->pdata[i]);
      line = next_line (&r, &p, bytes + len);
    }

  /* without a header the first record is data, already split */
  split_done = !header;
  for (; line != NULL; line = next_line (&r, &p, bytes + len), split_done = FALSE)
    {
      if (!split_done && !split (&r, line, error))
        return NULL;
      if (fields->len != ncols)
        return ks_table_bad (error, "%s:%" G_GSIZE_FORMAT ": %u fields where %s (line %"
                             G_GSIZE_FORMAT ") has %u", path, r.line, fields->len,
                             header ? "the header" : "the first record", first_line, ncols);
      guint gap = ncols;
      for (guint i = 0; i < ncols && gap == ncols; i++)
        if (ks_table_csv_missing_cell (fields->pdata[i]))
          gap = i;
      if (gap < ncols && o->missing == KS_CSV_MISSING_SKIP)
        {
          skipped++;
          continue;
        }
      if (label >= 0 && ks_table_csv_missing_cell (fields->pdata[label]))
        return ks_table_bad (error, "%s:%" G_GSIZE_FORMAT ": the label (column %d) is %s; [data] "
                             "missing = skip drops such rows (mean and zero fill features "
                             "only)", path, r.line, label,
                             *(char *) fields->pdata[label] ? "missing" : "empty");
      for (guint i = 0; i < ncols; i++)
        {
          const char *f = fields->pdata[i];
          double v;
          if ((gint) i == label)
            continue;
          if (ks_table_csv_missing_cell (f) && o->missing != KS_CSV_MISSING_ERROR)
            {
              push (&xs, o->missing == KS_CSV_MISSING_ZERO ? 0.0f : NAN);
              continue;
            }
          if (ks_table_csv_missing_cell (f))
            {
              g_autofree char *column = names ? g_strdup_printf ("'%s'", (char *) names->pdata[i])
                                              : g_strdup_printf ("%u", i);
              return ks_table_bad (error, "%s:%" G_GSIZE_FORMAT ": column %s: '%s' is a missing "
                                   "value; set [data] missing = skip (drop such rows), mean or "
                                   "zero (fill them) to read the file", path, r.line, column, f);
            }
          if (!number (f, &v) || !isfinite ((float) v))
            {
              g_autofree char *column = names ? g_strdup_printf ("'%s'", (char *) names->pdata[i])
                                              : g_strdup_printf ("%u", i);
              return ks_table_bad (error, "%s:%" G_GSIZE_FORMAT ": column %s: '%s' is not %s",
                                   path, r.line, column, f,
                                   number (f, &v)   ? "a finite float32 number"
                                   : hexadecimal (f) ? "a decimal number (hexadecimal is not read: "
                                                       "convert the column)"
                                                     : "a number");
            }
          push (&xs, (float) v);
        }
      if (label >= 0)
        g_ptr_array_add (labels, fields->pdata[label]);
      g_array_append_val (lines, r.line);
    }
  guint features = ncols - (label >= 0);
  gsize rows = lines->len;
  if (rows == 0 && skipped > 0)
    return ks_table_bad (error, "%s: every one of its %" G_GSIZE_FORMAT " records has a missing "
                         "value ([data] missing = skip dropped them all)", path, skipped);
  if (rows == 0)
    return ks_table_bad (error, "%s:%" G_GSIZE_FORMAT ": a header and no data records", path,
                         first_line);
  if (skipped > 0)
    g_warning ("%s: skipped %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT " records with a missing "
               "value ([data] missing = skip)", path, skipped, skipped + rows);
  if (o->missing == KS_CSV_MISSING_MEAN && o->fill != NULL && o->n_fill != features)
    return ks_table_bad (error, "%s: %u feature columns, but the training rows whose means fill "
                         "its missing cells had %" G_GSIZE_FORMAT ": give rows of those features",
                         path, features, o->n_fill);
  if (o->missing == KS_CSV_MISSING_MEAN && o->fill != NULL)
    for (gsize i = 0; i < xs.n; i++)
      if (isnan (xs.v[i]))
        xs.v[i] = o->fill[i % features];
  if (o->missing == KS_CSV_MISSING_MEAN && o->fill == NULL
      && !fill_means (path, xs.v, rows, features, names, label, error))
    return NULL;

  g_autoptr (KsTable) t = ks_table_alloc (path, rows, features, o->regression, error);
  if (t == NULL)
    return NULL;
  memcpy (t->x, xs.v, xs.n * sizeof (float));
  t->ndim = 1;
  t->shape[0] = features;
  if (names != NULL)
    {
      t->feature_names = g_new0 (char *, features + 1);
      for (guint i = 0, k = 0; i < ncols; i++)
        if ((gint) i != label)
          t->feature_names[k++] = g_strdup (names->pdata[i]);
    }
  if (o->features_only)
    {
      g_clear_pointer (&t->y, g_free);
      g_clear_pointer (&t->target, g_free);
      return g_steal_pointer (&t);
    }
  if (!set_labels (t, (char **) labels->pdata, (gsize *) lines->data, error))
    return NULL;
  return g_steal_pointer (&t);
}

char **
ks_table_csv_first_record (const char *path, char delimiter, gboolean *numeric, GError **error)
{
  g_autoptr (GPtrArray) fields = g_ptr_array_new ();
  g_autofree char *bytes = NULL;
  Reader r = { path, delimiter ? delimiter : default_delimiter (path), 0, fields };
  gsize len;
  char *p, *line;

  g_return_val_if_fail (path != NULL && numeric != NULL, NULL);
  if ((bytes = ks_table_read (path, &len, error)) == NULL)
    return NULL;
  p = g_str_has_prefix (bytes, "\xef\xbb\xbf") ? bytes + 3 : bytes;
  if ((line = next_line (&r, &p, bytes + len)) == NULL)
    return ks_table_bad (error, "%s: empty file (no records)", path);
  if (!split (&r, line, error))
    return NULL;
  *numeric = TRUE;
  char **out = g_new0 (char *, fields->len + 1);
  for (guint i = 0; i < fields->len; i++)
    {
      double v;
      *numeric = *numeric && number (fields->pdata[i], &v);
      out[i] = g_strdup (fields->pdata[i]);
    }
  return out;
}
