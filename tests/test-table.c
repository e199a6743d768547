/* The data-set readers on files written here (CSV, TSV, .npy, IDX, token files; plain and
 * gzipped with zlib), checked value by value; every malformed case names its file and
 * place; the held-out split and the moments. */
#include "testutil.h"
#include <ksdist/tasks.h>

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <zlib.h>

/* dir/name holding n bytes; returns the path. */
static char *
write_bytes (const char *dir, const char *name, const void *bytes, gsize n)
{
  g_autoptr (GError) error = NULL;
  char *path = g_build_filename (dir, name, NULL);
  g_file_set_contents (path, bytes, n, &error);
  g_assert_no_error (error);
  return path;
}

/* dir/name holding n bytes gzipped by zlib. */
static char *
write_gz (const char *dir, const char *name, const void *bytes, gsize n)
{
  char *path = g_build_filename (dir, name, NULL);
  gzFile gz = gzopen (path, "wb");
  g_assert_nonnull (gz);
  g_assert_cmpint (gzwrite (gz, bytes, (unsigned) n), ==, (int) n);
  g_assert_cmpint (gzclose (gz), ==, Z_OK);
  return path;
}

static KsTable *
csv_ok (const char *path, const KsCsvOptions *o)
{
  g_autoptr (GError) error = NULL;
  KsTable *t = ks_table_load_csv (path, o, &error);
  g_assert_no_error (error);
  g_assert_nonnull (t);
  return t;
}

/* Asserts that loading CSV `text` (as dir/name) fails with a message holding `where`
 * (the file and place) and `what`. */
static void
csv_bad (const char *dir, const char *name, const char *text, const KsCsvOptions *o,
         const char *where, const char *what)
{
  g_autofree char *path = ks_test_write (dir, name, text);
  g_autoptr (GError) error = NULL;
  g_assert_null (ks_table_load_csv (path, o, &error));
  g_assert_nonnull (error);
  if (strstr (error->message, where) == NULL || strstr (error->message, what) == NULL)
    g_error ("'%s' lacks '%s' or '%s'", error->message, where, what);
  g_assert_true (g_error_matches (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID));
}

/* A [data] label that names no column: a setting to change (exit status 2). */
static void
label_bad (const char *dir, const char *name, const char *text, const KsCsvOptions *o,
           const char *what)
{
  g_autofree char *path = ks_test_write (dir, name, text);
  g_autoptr (GError) error = NULL;
  g_assert_null (ks_table_load_csv (path, o, &error));
  g_assert_nonnull (error);
  if (strstr (error->message, what) == NULL)
    g_error ("'%s' lacks '%s'", error->message, what);
  g_assert_true (g_error_matches (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE));
}

static void
assert_floats (const float *got, const float *want, gsize n)
{
  for (gsize i = 0; i < n; i++)
    g_assert_cmpfloat (got[i], ==, want[i]);
}

static void
test_csv (void)
{
  g_autofree char *dir = ks_test_tmpdir ();

  /* a header (x1 is not a number), CRLF, blank trailing lines, the label last */
  g_autofree char *p1 = ks_test_write (dir, "data.csv",
                                       "x1, x2 ,label\r\n1.5,2,0\r\n-3,4e2,1\r\n0.25,-0,3\r\n\r\n\n");
  g_autoptr (KsTable) t = csv_ok (p1, NULL);
  const float x1[] = { 1.5f, 2, -3, 400, 0.25f, 0 };
  const gint64 y1[] = { 0, 1, 3 };
  g_assert_cmpuint (t->rows, ==, 3);
  g_assert_cmpint (t->ndim, ==, 1);
  g_assert_cmpint (t->shape[0], ==, 2);
  g_assert_cmpuint (t->features, ==, 2);
  assert_floats (t->x, x1, 6);
  for (int i = 0; i < 3; i++)
    g_assert_cmpint (t->y[i], ==, y1[i]);
  g_assert_false (t->regression);
  g_assert_null (t->target);
  g_assert_cmpint (t->classes, ==, 4);
  g_assert_null (t->class_names);
  g_assert_cmpstr (t->feature_names[0], ==, "x1");
  g_assert_cmpstr (t->feature_names[1], ==, "x2");
  g_assert_null (t->feature_names[2]);
  g_assert_cmpstr (t->path, ==, p1);

  /* no header: every field of the first record is a number; no final newline */
  g_autofree char *p2 = ks_test_write (dir, "plain.csv", "1,2,3\n4,5,6");
  g_autoptr (KsTable) t2 = csv_ok (p2, NULL);
  const float x2[] = { 1, 2, 4, 5 };
  g_assert_cmpuint (t2->rows, ==, 2);
  assert_floats (t2->x, x2, 4);
  g_assert_cmpint (t2->y[0], ==, 3);
  g_assert_cmpint (t2->y[1], ==, 6);
  g_assert_cmpint (t2->classes, ==, 7);
  g_assert_null (t2->feature_names);
  /* the same file said to have a header of numeric names */
  KsCsvOptions with_header = { 0, 1, NULL, FALSE };
  g_autoptr (KsTable) t3 = csv_ok (p2, &with_header);
  g_assert_cmpuint (t3->rows, ==, 1);
  g_assert_cmpstr (t3->feature_names[1], ==, "2");
  g_assert_cmpint (t3->y[0], ==, 6);

  /* the label by index (0-based), no header said */
  KsCsvOptions first = { 0, 0, "0", FALSE };
  g_autoptr (KsTable) t4 = csv_ok (p2, &first);
  const float x4[] = { 2, 3, 5, 6 };
  assert_floats (t4->x, x4, 4);
  g_assert_cmpint (t4->y[0], ==, 1);
  g_assert_cmpint (t4->y[1], ==, 4);

  /* TSV by its name, the label by name in the middle, categorical, sorted */
  g_autofree char *p5 = ks_test_write (dir, "iris.tsv",
                                       "length\tspecies\twidth\n"
                                       "5.1\tsetosa\t3.5\n"
                                       "7.0\tversicolor\t3.2\n"
                                       "6.3\tvirginica\t3.3\n"
                                       "4.9\tsetosa\t3.0\n");
  KsCsvOptions by_name = { 0, -1, "species", FALSE };
  g_autoptr (KsTable) t5 = csv_ok (p5, &by_name);
  const float x5[] = { 5.1f, 3.5f, 7.0f, 3.2f, 6.3f, 3.3f, 4.9f, 3.0f };
  const gint64 y5[] = { 0, 1, 2, 0 };
  g_assert_cmpuint (t5->rows, ==, 4);
  assert_floats (t5->x, x5, 8);
  for (int i = 0; i < 4; i++)
    g_assert_cmpint (t5->y[i], ==, y5[i]);
  g_assert_cmpint (t5->classes, ==, 3);
  g_assert_cmpstr (t5->class_names[0], ==, "setosa");
  g_assert_cmpstr (t5->class_names[1], ==, "versicolor");
  g_assert_cmpstr (t5->class_names[2], ==, "virginica");
  g_assert_null (t5->class_names[3]);
  g_assert_cmpstr (t5->feature_names[0], ==, "length");
  g_assert_cmpstr (t5->feature_names[1], ==, "width");

  /* categorical labels make a header by themselves only with the header's other names:
   * here the first record is data (its features are numbers) */
  g_autofree char *p6 = ks_test_write (dir, "animals.csv", "1,cat\n2,dog\n3,cat\n");
  g_autoptr (KsTable) t6 = csv_ok (p6, NULL);
  g_assert_cmpuint (t6->rows, ==, 3);
  g_assert_cmpint (t6->y[0], ==, 0);
  g_assert_cmpint (t6->y[1], ==, 1);
  g_assert_cmpstr (t6->class_names[1], ==, "dog");

  /* regression: the labels are values */
  KsCsvOptions values = { ';', -1, NULL, TRUE };
  g_autofree char *p7 = ks_test_write (dir, "prices.txt", "size;price\n10;1.5\n20;-2.25\n");
  g_autoptr (KsTable) t7 = csv_ok (p7, &values);
  g_assert_true (t7->regression);
  g_assert_null (t7->y);
  g_assert_cmpfloat (t7->target[0], ==, 1.5f);
  g_assert_cmpfloat (t7->target[1], ==, -2.25f);
  g_assert_cmpfloat (t7->x[1], ==, 20);

  /* a byte-order mark before numbers: still no header, the first record is data */
  g_autofree char *p9 = ks_test_write (dir, "bom.csv", "\xef\xbb\xbf" "1,2\n3,4\n");
  g_autoptr (KsTable) t9 = csv_ok (p9, NULL);
  g_assert_cmpuint (t9->rows, ==, 2);
  g_assert_cmpfloat (t9->x[0], ==, 1);

  /* quoting: a delimiter and doubled quotes inside quotes */
  g_autofree char *p8 = ks_test_write (dir, "quoted.csv",
                                       "\"x, 1\",\"y\"\n\"1.5\", \"a \"\"q\"\" b\" \n2,c\n");
  g_autoptr (KsTable) t8 = csv_ok (p8, NULL);
  g_assert_cmpstr (t8->feature_names[0], ==, "x, 1");
  g_assert_cmpstr (t8->class_names[0], ==, "a \"q\" b");
  g_assert_cmpstr (t8->class_names[1], ==, "c");
  g_assert_cmpfloat (t8->x[0], ==, 1.5f);

  ks_test_rmtree (dir);
}

/* A CSV gzipped by zlib is read through its magic, with a .gz name or without. */
static void
test_csv_gzip (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autoptr (GString) text = g_string_new ("a\tb\tlabel\n");
  for (int i = 0; i < 5000; i++)
    g_string_append_printf (text, "%d\t%g\t%d\n", i, i * 0.5, i % 7);

  g_autofree char *p1 = write_gz (dir, "big.tsv.gz", text->str, text->len);
  g_autofree char *p2 = write_gz (dir, "looks-plain.tsv", text->str, text->len);
  for (int k = 0; k < 2; k++)
    {
      g_autoptr (KsTable) t = csv_ok (k ? p2 : p1, NULL);
      g_assert_cmpuint (t->rows, ==, 5000);
      g_assert_cmpint (t->classes, ==, 7);
      for (int i = 0; i < 5000; i++)
        {
          g_assert_cmpfloat (t->x[2 * i], ==, (float) i);
          g_assert_cmpfloat (t->x[2 * i + 1], ==, (float) (i * 0.5));
          g_assert_cmpint (t->y[i], ==, i % 7);
        }
    }

  /* cut short: the stream does not end */
  g_autofree char *whole = NULL;
  gsize n;
  g_assert_true (g_file_get_contents (p1, &whole, &n, NULL));
  g_autofree char *cut = write_bytes (dir, "cut.csv.gz", whole, n / 2);
  g_autoptr (GError) error = NULL;
  g_assert_null (ks_table_load_csv (cut, NULL, &error));
  g_assert_nonnull (strstr (error->message, "cut.csv.gz: truncated gzip data"));
  ks_test_rmtree (dir);
}

/* label = 4 is column 4 even when a header cell is named "4"; no message names a setting
 * that does not exist. */
static void
test_csv_label_index (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *p = ks_test_write (dir, "named4.csv", "a,b,4,c,d\n1,2,3,4,0\n5,6,7,8,1\n");
  KsCsvOptions four = { 0, -1, "4", FALSE };
  g_autoptr (KsTable) t = csv_ok (p, &four);
  g_assert_cmpint (t->y[0], ==, 0); /* column d, not the column named 4 (3, 7) */
  g_assert_cmpint (t->y[1], ==, 1);
  g_assert_cmpstr (t->feature_names[2], ==, "4");
  g_assert_cmpfloat (t->x[2], ==, 3);
  /* a value where a class is expected names the real setting */
  csv_bad (dir, "value.csv", "x,y\n1,0.5\n", NULL, "value.csv:2:", "set [model] loss = mse)");
  ks_test_rmtree (dir);
}

/* [data] missing: empty, NA, N/A and ? cells are an error naming the setting, or skipped,
 * or filled with the column's mean (of the file's values) or 0. */
static void
test_csv_missing (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  const char *text = "f1,f2,f3,y\n1,2,,0\n3,NA,6,1\n5,4,9,?\n7,8,3,1\n";
  csv_bad (dir, "gaps.csv", text, NULL, "gaps.csv:2:",
           "column 'f3': '' is a missing value; set [data] missing = skip (drop such rows), "
           "mean or zero (fill them)");
  g_autofree char *p = ks_test_write (dir, "gaps.csv", text);

  KsCsvOptions skip = { 0, -1, NULL, FALSE, KS_CSV_MISSING_SKIP };
  g_test_expect_message (NULL, G_LOG_LEVEL_WARNING,
                         "*gaps.csv: skipped 3 of 4 records with a missing value*");
  g_autoptr (KsTable) s = csv_ok (p, &skip);
  g_test_assert_expected_messages ();
  g_assert_cmpuint (s->rows, ==, 1);
  g_assert_cmpfloat (s->x[0], ==, 7);

  /* mean and zero fill features; the missing label (?) stays an error naming skip */
  KsCsvOptions mean = { 0, -1, NULL, FALSE, KS_CSV_MISSING_MEAN };
  csv_bad (dir, "gaps.csv", text, &mean, "gaps.csv:4:",
           "the label (column 3) is missing; [data] missing = skip drops such rows");
  const char *labelled = "f1,f2,f3,y\n1,2,,0\n3,NA,6,1\n5,4,9,0\n7,N/A,3,1\n";
  g_autofree char *q = ks_test_write (dir, "labelled.csv", labelled);
  g_autoptr (KsTable) m = csv_ok (q, &mean);
  g_assert_cmpuint (m->rows, ==, 4);
  g_assert_cmpfloat (m->x[2], ==, 6.0f);          /* f3's mean: (6 + 9 + 3) / 3 */
  g_assert_cmpfloat (m->x[4], ==, 3.0f);          /* f2's mean: (2 + 4) / 2 */
  g_assert_cmpfloat (m->x[10], ==, 3.0f);
  g_assert_cmpfloat (m->x[0], ==, 1.0f);
  KsCsvOptions zero = { 0, -1, NULL, FALSE, KS_CSV_MISSING_ZERO };
  g_autoptr (KsTable) z = csv_ok (q, &zero);
  g_assert_cmpfloat (z->x[2], ==, 0.0f);
  g_assert_cmpfloat (z->x[4], ==, 0.0f);
  g_assert_cmpfloat (z->x[5], ==, 6.0f);
  /* a column with no value at all has no mean */
  csv_bad (dir, "empty-col.csv", "a,b,y\n1,,0\n2,NA,1\n", &mean, "empty-col.csv",
           "column 'b' has no value at all");
  ks_test_rmtree (dir);
}

/* The reader's parts ksdist infer uses: a file of features alone (no label column, a
 * single column allowed), its first record, and missing cells filled with given values
 * (a training file's means) rather than the file's own. */
static void
test_csv_features_only (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *p = ks_test_write (dir, "f.csv", "a,b\n1,2\n,4\n5,NA\n");
  KsCsvOptions o = { 0, -1, NULL, FALSE, KS_CSV_MISSING_MEAN, TRUE, NULL };
  const float fill[] = { 10, 20 };
  o.fill = fill;
  o.n_fill = G_N_ELEMENTS (fill);
  g_autoptr (KsTable) t = csv_ok (p, &o);
  const float want[] = { 1, 2, 10, 4, 5, 20 }; /* not the file's means 3 and 3 */
  g_assert_cmpuint (t->rows, ==, 3);
  g_assert_cmpuint (t->features, ==, 2);
  g_assert_null (t->y);
  g_assert_null (t->target);
  for (guint i = 0; i < G_N_ELEMENTS (want); i++)
    g_assert_cmpfloat (t->x[i], ==, want[i]);
  g_assert_cmpstr (t->feature_names[0], ==, "a");
  g_assert_cmpstr (t->feature_names[1], ==, "b");
  g_assert_null (t->feature_names[2]);
  /* a file wider than the fill (the training rows' features) is refused, never read past
   * the fill's end */
  g_autofree char *w = ks_test_write (dir, "w.csv", "a,b,c\n1,,3\n4,5,\n");
  GError *error = NULL;
  g_assert_null (ks_table_load_csv (w, &o, &error));
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error->message, "w.csv: 3 feature columns, but the training rows "
                                            "whose means fill its missing cells had 2"));
  g_clear_error (&error);

  g_autofree char *q = ks_test_write (dir, "one.csv", "0.5\n1.5\n");
  KsCsvOptions one = { 0, -1, NULL, FALSE, KS_CSV_MISSING_ERROR, TRUE, NULL };
  g_autoptr (KsTable) u = csv_ok (q, &one);
  g_assert_cmpuint (u->rows, ==, 2);
  g_assert_cmpfloat (u->x[1], ==, 1.5f);

  gboolean numeric = TRUE;
  g_auto (GStrv) first = ks_table_csv_first_record (p, 0, &numeric, NULL);
  g_assert_false (numeric);
  g_assert_cmpuint (g_strv_length (first), ==, 2);
  g_assert_cmpstr (first[1], ==, "b");
  g_auto (GStrv) digits = ks_table_csv_first_record (q, 0, &numeric, NULL);
  g_assert_true (numeric);
  g_assert_cmpstr (digits[0], ==, "0.5");
  ks_test_rmtree (dir);
}

static void
test_csv_errors (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autoptr (GString) text = g_string_new ("a,b,c,d\n");
  KsCsvOptions values = { 0, -1, NULL, TRUE };
  KsCsvOptions named = { 0, -1, "target", FALSE };
  KsCsvOptions far = { 0, -1, "9", FALSE };

  for (int line = 2; line < 17; line++)
    g_string_append (text, line == 9 ? "\n" : "1,2,3,4\n");
  g_string_append (text, "1,2,3\n5,6,7,8\n");
  csv_bad (dir, "data.csv", text->str, NULL, "data.csv:17:",
           "3 fields where the header (line 1) has 4");
  csv_bad (dir, "nohead.csv", "1,2\n3,4,5\n", NULL, "nohead.csv:2:",
           "3 fields where the first record (line 1) has 2");
  csv_bad (dir, "nolabel.csv", "x,y\n1,a\n2,\n", NULL, "nolabel.csv:3:",
           "the label (column 1) is empty");
  csv_bad (dir, "word.csv", "x1,x2,y\n1,2,0\n3,4,1\n\n5,abc,0\n", NULL, "word.csv:5:",
           "column 'x2': 'abc' is not a number");
  csv_bad (dir, "nan.csv", "1,2,0\n3,nan,1\n", NULL, "nan.csv:2:",
           "column 1: 'nan' is not a finite");
  csv_bad (dir, "inf.csv", "x,y\n1e39,1\n", NULL, "inf.csv:2:", "column 'x': '1e39'");
  /* hexadecimal is text, not 16 (issue 49: it was read as 16) */
  csv_bad (dir, "hex.csv", "x,y\n1,0\n0x10,1\n", NULL, "hex.csv:3:",
           "column 'x': '0x10' is not a decimal number (hexadecimal is not read");
  csv_bad (dir, "neg.csv", "x,y\n1,0\n2,-1\n", NULL, "neg.csv:3:",
           "class label '-1' is negative");
  csv_bad (dir, "half.csv", "x,y\n1,0\n2,1.5\n", NULL, "half.csv:3:",
           "class label '1.5' is not an integer");
  csv_bad (dir, "huge.csv", "x,y\n1,1e9\n", NULL, "huge.csv:2:", "too large");
  csv_bad (dir, "value.csv", "x,y\n1,0.5\n2,high\n", &values, "value.csv:3:",
           "label 'high' is not a finite number");
  csv_bad (dir, "empty.csv", "", NULL, "empty.csv", "empty file");
  csv_bad (dir, "blank.csv", "\n\r\n  \n", NULL, "blank.csv", "empty file");
  csv_bad (dir, "head.csv", "\nx,y\n\n", NULL, "head.csv:2:", "a header and no data records");
  csv_bad (dir, "one.csv", "1\n2\n", NULL, "one.csv:1:", "1 field");
  csv_bad (dir, "quote.csv", "x,y\n\"1,0\n", NULL, "quote.csv:2:",
           "field 1: a quote that is not closed");
  csv_bad (dir, "after.csv", "x,y\n\"1\"2,0\n", NULL, "after.csv:2:",
           "field 1: text after the closing quote");
  label_bad (dir, "name.csv", "x,y\n1,0\n", &named,
             "name.csv:1: [data] label = target: no column is named so");
  label_bad (dir, "far.csv", "x,y\n1,0\n", &far,
             "far.csv:1: [data] label = 9, a 0-based column index, but the record has 2 fields");
  const char nul[] = "x,y\n1,0\0\n";
  g_autofree char *p = write_bytes (dir, "nul.csv", nul, sizeof nul - 1);
  g_autoptr (GError) error = NULL;
  g_assert_null (ks_table_load_csv (p, NULL, &error));
  g_assert_nonnull (strstr (error->message, "nul.csv: a NUL byte at offset 7"));
  g_clear_error (&error);

  /* a missing file: the I/O error names it */
  g_autofree char *missing = g_build_filename (dir, "missing.csv", NULL);
  g_assert_null (ks_table_load_csv (missing, NULL, &error));
  g_assert_true (g_error_matches (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO));
  g_assert_nonnull (strstr (error->message, "missing.csv"));
  ks_test_rmtree (dir);
}

/* dir/name: a .npy file (format `version`) with header `dict` and n data bytes; gzipped
 * by zlib with `gz`. */
static char *
write_npy_dict (const char *dir, const char *name, int version, const char *dict,
                const void *data, gsize n, gboolean gz)
{
  g_autoptr (GByteArray) b = g_byte_array_new ();
  gsize pre = version == 1 ? 10 : 12, hlen = strlen (dict) + 1;
  guint8 v[2] = { version, 0 }, len[4];

  /* the data starts at a multiple of 64, as numpy writes it */
  hlen += (64 - (pre + hlen) % 64) % 64;
  for (int i = 0; i < 4; i++)
    len[i] = (guint8) (hlen >> (8 * i));
  g_byte_array_append (b, (const guint8 *) "\x93NUMPY", 6);
  g_byte_array_append (b, v, 2);
  g_byte_array_append (b, len, pre - 8);
  g_byte_array_append (b, (const guint8 *) dict, strlen (dict));
  while (b->len < pre + hlen - 1)
    g_byte_array_append (b, (const guint8 *) " ", 1);
  g_byte_array_append (b, (const guint8 *) "\n", 1);
  g_byte_array_append (b, data, n);
  return gz ? write_gz (dir, name, b->data, b->len) : write_bytes (dir, name, b->data, b->len);
}

static char *
write_npy (const char *dir, const char *name, const char *descr, const char *shape,
           const void *data, gsize n)
{
  g_autofree char *dict = g_strdup_printf ("{'descr': '%s', 'fortran_order': False, "
                                           "'shape': %s, }", descr, shape);
  return write_npy_dict (dir, name, 1, dict, data, n, FALSE);
}

static KsTable *
npy_ok (const char *features, const char *labels, gboolean regression)
{
  g_autoptr (GError) error = NULL;
  KsTable *t = ks_table_load_npy (features, labels, regression, &error);
  g_assert_no_error (error);
  g_assert_nonnull (t);
  return t;
}

/* Asserts the pair fails with a message holding `where` and `what`. */
static void
npy_bad (const char *features, const char *labels, gboolean regression, const char *where,
         const char *what)
{
  g_autoptr (GError) error = NULL;
  g_assert_null (ks_table_load_npy (features, labels, regression, &error));
  g_assert_nonnull (error);
  if (strstr (error->message, where) == NULL || strstr (error->message, what) == NULL)
    g_error ("'%s' lacks '%s' or '%s'", error->message, where, what);
}

static void
test_npy (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  /* little-endian hosts only, like the files: the arrays are written as they lie */
  const float f32[12] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, -11.5f };
  const gint64 i64[3] = { 2, 0, 5 };
  g_autofree char *pf = write_npy (dir, "features.npy", "<f4", "(3, 2, 2)", f32, sizeof f32);
  g_autofree char *pl = write_npy (dir, "labels.npy", "<i8", "(3,)", i64, sizeof i64);
  g_autoptr (KsTable) t = npy_ok (pf, pl, FALSE);
  g_assert_cmpuint (t->rows, ==, 3);
  g_assert_cmpint (t->ndim, ==, 2);
  g_assert_cmpint (t->shape[0], ==, 2);
  g_assert_cmpint (t->shape[1], ==, 2);
  g_assert_cmpuint (t->features, ==, 4);
  assert_floats (t->x, f32, 12);
  for (int i = 0; i < 3; i++)
    g_assert_cmpint (t->y[i], ==, i64[i]);
  g_assert_cmpint (t->classes, ==, 6);
  g_assert_null (t->class_names);

  /* float64 features, uint8 labels, a version-2 header, both gzipped */
  const double f64[6] = { 0.5, -1e-3, 1e30, 7, 8, 9 };
  const guint8 u8[2] = { 1, 3 };
  g_autofree char *d1 = g_strdup ("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }");
  g_autofree char *d2 = g_strdup ("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }");
  g_autofree char *pf2 = write_npy_dict (dir, "f64.npy.gz", 2, d1, f64, sizeof f64, TRUE);
  g_autofree char *pl2 = write_npy_dict (dir, "u8.npy", 2, d2, u8, sizeof u8, TRUE);
  g_autoptr (KsTable) t2 = npy_ok (pf2, pl2, FALSE);
  g_assert_cmpint (t2->ndim, ==, 1);
  g_assert_cmpint (t2->shape[0], ==, 3);
  for (int i = 0; i < 6; i++)
    g_assert_cmpfloat (t2->x[i], ==, (float) f64[i]);
  g_assert_cmpint (t2->y[1], ==, 3);
  g_assert_cmpint (t2->classes, ==, 4);

  /* uint8 features (as stored, not scaled), int32 labels [rows, 1] */
  const guint8 pix[4] = { 0, 255, 17, 3 };
  const gint32 i32[2] = { 1, 0 };
  g_autofree char *pf3 = write_npy (dir, "pix.npy", "|u1", "(2, 2)", pix, sizeof pix);
  g_autofree char *pl3 = write_npy (dir, "i32.npy", "<i4", "(2, 1)", i32, sizeof i32);
  g_autoptr (KsTable) t3 = npy_ok (pf3, pl3, FALSE);
  for (int i = 0; i < 4; i++)
    g_assert_cmpfloat (t3->x[i], ==, pix[i]);
  g_assert_cmpint (t3->y[0], ==, 1);
  g_assert_cmpint (t3->classes, ==, 2);
  /* int32 features [rows, 1] */
  g_autoptr (KsTable) t6 = npy_ok (pl3, pl2, FALSE);
  g_assert_cmpuint (t6->features, ==, 1);
  g_assert_cmpfloat (t6->x[0], ==, 1);
  g_assert_cmpfloat (t6->x[1], ==, 0);

  /* int64 features of one dimension; float32 and float64 values for regression */
  const gint64 one[3] = { -4, 1 << 20, 9 };
  const float r32[3] = { 0.5f, -2, 1e-7f };
  const double r64[3] = { 3.25, 0, -1 };
  g_autofree char *pf4 = write_npy (dir, "one.npy", "<i8", "(3,)", one, sizeof one);
  g_autofree char *pl4 = write_npy (dir, "r32.npy", "<f4", "(3,)", r32, sizeof r32);
  g_autofree char *pl5 = write_npy (dir, "r64.npy", "<f8", "(3,)", r64, sizeof r64);
  g_autoptr (KsTable) t4 = npy_ok (pf4, pl4, TRUE);
  g_autoptr (KsTable) t5 = npy_ok (pf4, pl5, TRUE);
  g_assert_cmpint (t4->ndim, ==, 1);
  g_assert_cmpint (t4->shape[0], ==, 1);
  g_assert_cmpuint (t4->features, ==, 1);
  g_assert_true (t4->regression);
  for (int i = 0; i < 3; i++)
    {
      g_assert_cmpfloat (t4->x[i], ==, (float) one[i]);
      g_assert_cmpfloat (t4->target[i], ==, r32[i]);
      g_assert_cmpfloat (t5->target[i], ==, (float) r64[i]);
    }
  ks_test_rmtree (dir);
}

static void
test_npy_errors (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree float *zeros = g_new0 (float, 4000);
  g_autofree gint64 *ids = g_new0 (gint64, 1000);
  const float nan3[3] = { 1, NAN, 2 };
  const gint64 neg[3] = { 0, -3, 1 };
  const float vals[3] = { 0, 1, 2 };

  g_autofree char *short_f = write_npy (dir, "features.npy", "<f4", "(1000, 4)", zeros, 12000);
  g_autofree char *labels = write_npy (dir, "labels.npy", "<i8", "(1000,)", ids, 8000);
  npy_bad (short_f, labels, FALSE, "features.npy: truncated: ",
           "the header says 1000 x 4 float32 (16000 bytes of data) but 12000 follow");
  g_autofree char *long_f = write_npy (dir, "long.npy", "<f4", "(2, 4)", zeros, 36);
  npy_bad (long_f, labels, FALSE, "long.npy: ", "extra bytes after the data");
  g_autofree char *f = write_npy (dir, "f.npy", "<f4", "(1000, 4)", zeros, 16000);
  g_autofree char *l999 = write_npy (dir, "l999.npy", "<i8", "(999,)", ids, 7992);
  npy_bad (f, l999, FALSE, "l999.npy: ", "999 labels but");
  npy_bad (f, l999, FALSE, "f.npy has 1000 rows", "");
  g_autofree char *f3 = write_npy (dir, "f3.npy", "<f4", "(3,)", vals, sizeof vals);
  g_autofree char *fl = write_npy (dir, "floats.npy", "<f4", "(3,)", vals, sizeof vals);
  npy_bad (f3, fl, FALSE, "floats.npy: ", "float32 labels are values");
  g_autofree char *ln = write_npy (dir, "neg.npy", "<i8", "(3,)", neg, sizeof neg);
  npy_bad (f3, ln, FALSE, "neg.npy: ", "label 1 is -3, not a class id");
  g_autofree char *fn = write_npy (dir, "nan.npy", "<f4", "(3,)", nan3, sizeof nan3);
  npy_bad (fn, fl, TRUE, "nan.npy: ", "row 1, feature 0 is nan");
  npy_bad (f3, fn, TRUE, "nan.npy: ", "label 1 is nan");
  g_autofree char *fb = write_npy (dir, "big.npy", ">f4", "(3,)", vals, sizeof vals);
  npy_bad (fb, fl, TRUE, "big.npy: ", "element type '>f4' is not one read here");
  g_autofree char *f0 = write_npy (dir, "none.npy", "<f4", "(0, 3)", vals, 0);
  npy_bad (f0, fl, TRUE, "none.npy: ", "no rows");
  g_autofree char *f6 = write_npy (dir, "six.npy", "<f4", "(1, 1, 1, 1, 1, 1)", vals, 4);
  npy_bad (f6, fl, TRUE, "six.npy: ", "6 dimensions");
  g_autofree char *ff = write_npy_dict (dir, "fortran.npy", 1, "{'descr': '<f4', "
                                        "'fortran_order': True, 'shape': (3,), }", vals,
                                        sizeof vals, FALSE);
  npy_bad (ff, fl, TRUE, "fortran.npy: ", "not in C order");
  g_autofree char *fs = write_npy_dict (dir, "noshape.npy", 1, "{'descr': '<f4', "
                                        "'fortran_order': False, 'shape': [3], }", vals,
                                        sizeof vals, FALSE);
  npy_bad (fs, fl, TRUE, "noshape.npy: ", "'shape' is not a tuple");
  g_autofree char *fo = write_npy (dir, "overflow.npy", "<f4",
                                   "(4294967296, 4294967296, 4294967296)", vals, 4);
  npy_bad (fo, fl, TRUE, "overflow.npy: ", "too large");
  g_autofree char *fm = ks_test_write (dir, "text.npy", "x,y\n1,2\n");
  npy_bad (fm, fl, TRUE, "text.npy: ", "not a NumPy .npy file");
  g_autofree char *fe = ks_test_write (dir, "empty.npy", "");
  npy_bad (f3, fe, TRUE, "empty.npy: ", "empty file");
  g_autofree char *fh = write_bytes (dir, "head.npy", "\x93NUMPY\x01\x00\xff\x00{'descr", 18);
  npy_bad (fh, fl, TRUE, "head.npy: ", "truncated: a header of 255 bytes but 8 follow");
  g_autofree char *fv = write_bytes (dir, "v9.npy", "\x93NUMPY\x09\x00\x00\x00", 10);
  npy_bad (fv, fl, TRUE, "v9.npy: ", "format version 9.0");
  ks_test_rmtree (dir);
}

/* The header is read as numpy reads it: mutations numpy refuses are refused here too
 * (issue 49: 31 of 150 trained), and files numpy itself wrote load. */
static void
test_npy_strict (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  const float vals[6] = { 1, 2, 3, 4, 5, 6 };
  const gint64 lab[3] = { 0, 1, 0 };
  g_autofree char *fl = write_npy (dir, "l.npy", "<i8", "(3,)", lab, sizeof lab);
  static const struct {
    const char *dict, *what;
  } bad[] = {
    { "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), } x", "bytes after the dict" },
    { "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }}", "bytes after the dict" },
    { "f'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", "no '{'" },
    { "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), '__import__': os.system('x')}",
      "a key other than" },
    { "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), 'extra': 1}", "a key other than" },
    { "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3, 2)}", "twice" },
    { "{'descr': '<f4', 'shape': (3, 2)}", "no 'fortran_order'" },
    { "{'descr': '<f4', 'fortran_order': 0, 'shape': (3, 2)}", "not True or False" },
    { "{'descr': '<f4', 'fortran_order': False, 'shape': (6)}", "without its comma" },
    { "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2) 'x'}", "no ',' or '}'" },
    { "{'descr': <f4, 'fortran_order': False, 'shape': (3, 2)}", "not a string" },
    { "{'descr': '<f4', 'fortran_order': False, 'shape': (3, -2)}", "not a whole number" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autofree char *name = g_strdup_printf ("m%u.npy", i);
      g_autofree char *f = write_npy_dict (dir, name, 1, bad[i].dict, vals, sizeof vals, FALSE);
      npy_bad (f, fl, TRUE, name, bad[i].what);
    }
  /* what numpy writes, in the forms of its versions: a trailing comma or none */
  g_autofree char *ok1 = write_npy_dict (dir, "ok1.npy", 1, "{'shape': (3, 2), 'fortran_order': "
                                         "False, 'descr': '<f4'}", vals, sizeof vals, FALSE);
  g_autoptr (KsTable) t1 = npy_ok (ok1, fl, TRUE);
  g_assert_cmpuint (t1->rows, ==, 3);

  /* files numpy itself wrote, where Debian's python3-numpy is installed */
  g_autofree char *script = g_strdup_printf (
      "import numpy as np\n"
      "np.save('%s/x.npy', np.arange(12, dtype=np.float32).reshape(3, 2, 2))\n"
      "np.save('%s/y.npy', np.array([2, 0, 1], dtype=np.int64))\n"
      "np.save('%s/u.npy', np.arange(6, dtype=np.uint8).reshape(3, 2))\n", dir, dir, dir);
  const char *argv[] = { "/usr/bin/python3", "-c", script, NULL };
  int status = -1;
  if (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, NULL,
                    NULL, &status, NULL)
      && g_spawn_check_wait_status (status, NULL))
    {
      g_autofree char *x = g_build_filename (dir, "x.npy", NULL);
      g_autofree char *y = g_build_filename (dir, "y.npy", NULL);
      g_autofree char *u = g_build_filename (dir, "u.npy", NULL);
      g_autoptr (KsTable) t = npy_ok (x, y, FALSE);
      g_assert_cmpuint (t->rows, ==, 3);
      g_assert_cmpint (t->ndim, ==, 2);
      g_autoptr (KsTable) tu = npy_ok (u, y, FALSE);
      g_assert_cmpuint (tu->rows, ==, 3);
    }
  else
    g_test_message ("numpy's own files not tried: /usr/bin/python3 has no numpy");
  ks_test_rmtree (dir);
}

/* An IDX file of unsigned bytes: the magic 0x000008nn, big-endian dims, then the data. */
static GByteArray *
idx_bytes (guint32 magic, const guint32 *dims, int ndim, const guint8 *data, gsize n)
{
  GByteArray *b = g_byte_array_new ();
  guint32 be = GUINT32_TO_BE (magic);
  g_byte_array_append (b, (const guint8 *) &be, 4);
  for (int d = 0; d < ndim; d++)
    {
      be = GUINT32_TO_BE (dims[d]);
      g_byte_array_append (b, (const guint8 *) &be, 4);
    }
  g_byte_array_append (b, data, n);
  return b;
}

/* dir/name: `rows` images of h x w, pixel (r, i) = (r * 31 + i * 7) % 256, or the labels
 * r % 10; gzipped with `gz` (".gz" added). */
static void
write_idx (const char *dir, const char *name, gboolean labels, guint32 rows, guint32 h,
           guint32 w, gboolean gz)
{
  gsize n = labels ? rows : (gsize) rows * h * w;
  g_autofree guint8 *data = g_new (guint8, n);
  guint32 dims[3] = { rows, h, w };
  for (gsize i = 0; i < n; i++)
    data[i] = labels ? i % 10 : (i / (h * w) * 31 + i % (h * w) * 7) % 256;
  g_autoptr (GByteArray) b = idx_bytes (labels ? 0x801 : 0x803, dims, labels ? 1 : 3, data, n);
  g_autofree char *gzname = g_strconcat (name, ".gz", NULL);
  g_autofree char *path = gz ? write_gz (dir, gzname, b->data, b->len)
                             : write_bytes (dir, name, b->data, b->len);
}

static void
test_idx (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autoptr (GError) error = NULL;

  write_idx (dir, "train-images-idx3-ubyte", FALSE, 12, 5, 4, FALSE);
  write_idx (dir, "train-labels-idx1-ubyte", TRUE, 12, 0, 0, FALSE);
  write_idx (dir, "t10k-images-idx3-ubyte", FALSE, 3, 5, 4, TRUE);
  write_idx (dir, "t10k-labels-idx1-ubyte", TRUE, 3, 0, 0, TRUE);
  for (int train = 1; train >= 0; train--)
    {
      g_autoptr (KsTable) t = ks_table_load_idx (dir, train, &error);
      gsize rows = train ? 12 : 3;
      g_assert_no_error (error);
      g_assert_cmpuint (t->rows, ==, rows);
      g_assert_cmpint (t->ndim, ==, 3);
      g_assert_cmpint (t->shape[0], ==, 5);
      g_assert_cmpint (t->shape[1], ==, 4);
      g_assert_cmpint (t->shape[2], ==, 1);
      g_assert_cmpuint (t->features, ==, 20);
      g_assert_cmpint (t->classes, ==, train ? 10 : 3);
      for (gsize r = 0; r < rows; r++)
        {
          g_assert_cmpint (t->y[r], ==, r % 10);
          for (gsize i = 0; i < 20; i++)
            g_assert_cmpfloat (t->x[r * 20 + i], ==, (r * 31 + i * 7) % 256 / 255.0f);
        }
    }
  ks_test_rmtree (dir);
}

static void
idx_bad (const char *dir, gboolean train, const char *where, const char *what)
{
  g_autoptr (GError) error = NULL;
  g_assert_null (ks_table_load_idx (dir, train, &error));
  g_assert_nonnull (error);
  if (strstr (error->message, where) == NULL || strstr (error->message, what) == NULL)
    g_error ("'%s' lacks '%s' or '%s'", error->message, where, what);
}

static void
test_idx_errors (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *gone = g_build_filename (dir, "gone", NULL);
  guint32 dims[3] = { 2, 2, 2 };
  const guint8 px[8] = { 0 };

  idx_bad (gone, TRUE, "gone is not a folder", "train-images-idx3-ubyte");
  idx_bad (dir, TRUE, "neither train-images-idx3-ubyte nor train-images-idx3-ubyte.gz",
           "train-labels-idx1-ubyte");
  write_idx (dir, "train-images-idx3-ubyte", FALSE, 4, 2, 2, TRUE);
  idx_bad (dir, TRUE, "neither train-labels-idx1-ubyte nor train-labels-idx1-ubyte.gz", "");
  idx_bad (dir, FALSE, "neither t10k-images-idx3-ubyte nor", "t10k-labels-idx1-ubyte");

  /* 3 labels for 4 images */
  write_idx (dir, "train-labels-idx1-ubyte", TRUE, 3, 0, 0, FALSE);
  idx_bad (dir, TRUE, "train-labels-idx1-ubyte: 3 labels but", "has 4 images");

  /* a label file where the images should be: the wrong magic */
  g_autofree char *tl = g_build_filename (dir, "t10k-labels-idx1-ubyte", NULL);
  g_autofree char *ti = g_build_filename (dir, "t10k-images-idx3-ubyte", NULL);
  write_idx (dir, "t10k-labels-idx1-ubyte", TRUE, 2, 0, 0, FALSE);
  g_autoptr (GByteArray) b1 = idx_bytes (0x802, dims, 3, px, 8);
  g_free (write_bytes (dir, "t10k-images-idx3-ubyte", b1->data, b1->len));
  idx_bad (dir, FALSE, "t10k-images-idx3-ubyte: magic 0x00000802 is not an IDX file of "
           "unsigned bytes", "(expected 0x00000803)");
  /* truncated data, an extra byte, a short header, a zero dimension, an empty file */
  g_autoptr (GByteArray) b2 = idx_bytes (0x803, dims, 3, px, 7);
  g_free (write_bytes (dir, "t10k-images-idx3-ubyte", b2->data, b2->len));
  idx_bad (dir, FALSE, "t10k-images-idx3-ubyte: truncated",
           "the header says 8 bytes of data but 7 follow");
  g_autoptr (GByteArray) b3 = idx_bytes (0x803, dims, 3, px, 8);
  g_byte_array_append (b3, px, 1);
  g_free (write_bytes (dir, "t10k-images-idx3-ubyte", b3->data, b3->len));
  idx_bad (dir, FALSE, "t10k-images-idx3-ubyte: extra bytes", "9 follow");
  g_free (write_bytes (dir, "t10k-images-idx3-ubyte", b3->data, 10));
  idx_bad (dir, FALSE, "t10k-images-idx3-ubyte: truncated", "less than the 16-byte header");
  dims[1] = 0;
  g_autoptr (GByteArray) b4 = idx_bytes (0x803, dims, 3, px, 0);
  g_free (write_bytes (dir, "t10k-images-idx3-ubyte", b4->data, b4->len));
  idx_bad (dir, FALSE, "t10k-images-idx3-ubyte: dimension 1 is 0", "");
  g_free (write_bytes (dir, "t10k-images-idx3-ubyte", "", 0));
  idx_bad (dir, FALSE, "t10k-images-idx3-ubyte: empty file", "");
  /* a gzipped label file cut short */
  g_assert_cmpint (g_unlink (tl), ==, 0);
  g_assert_cmpint (g_unlink (ti), ==, 0);
  write_idx (dir, "t10k-images-idx3-ubyte", FALSE, 300, 28, 28, TRUE);
  write_idx (dir, "t10k-labels-idx1-ubyte", TRUE, 300, 0, 0, TRUE);
  g_autofree char *tigz = g_strconcat (ti, ".gz", NULL);
  g_autofree char *whole = NULL;
  gsize n;
  g_assert_true (g_file_get_contents (tigz, &whole, &n, NULL));
  g_free (write_bytes (dir, "t10k-images-idx3-ubyte.gz", whole, n - 9));
  idx_bad (dir, FALSE, "t10k-images-idx3-ubyte.gz: truncated gzip data", "");
  ks_test_rmtree (dir);
}

/* An llm.c shard of `n` tokens t[i] = i * 37 % 50257, its header's count `count`. */
static char *
write_shard (const char *dir, const char *name, gint32 magic, gint32 version, gint32 count,
             gsize n)
{
  g_autofree guint8 *b = g_new0 (guint8, 1024 + 2 * n);
  gint32 head[3] = { GINT32_TO_LE (magic), GINT32_TO_LE (version), GINT32_TO_LE (count) };
  memcpy (b, head, sizeof head);
  for (gsize i = 0; i < n; i++)
    {
      guint16 t = GUINT16_TO_LE (i * 37 % 50257);
      memcpy (b + 1024 + 2 * i, &t, 2);
    }
  return write_bytes (dir, name, b, 1024 + 2 * n);
}

/* [data] dtype = uint32: plain uint32 tokens read as they are; the same file read as
 * uint16 shows its zero halves (the task warns on them); sizes and shards checked. */
static void
test_tokens_uint32 (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  enum { N = 1000 };
  guint32 wide[N];
  for (gsize i = 0; i < N; i++)
    wide[i] = GUINT32_TO_LE (i < 10 ? 70000 + i : 1 + i * 7919 % 5000);
  g_autofree char *path = write_bytes (dir, "wide.bin", wide, sizeof wide);
  g_autoptr (GError) error = NULL;
  g_autoptr (KsTokens) t = ks_tokens_load_as (path, 4, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (t->n, ==, N);
  g_assert_cmpuint (t->width, ==, 4);
  g_assert_null (t->tokens);
  for (gsize i = 0; i < N; i++)
    g_assert_cmpuint (ks_tokens_get (t, i), ==, GUINT32_FROM_LE (wide[i]));
  g_assert_cmpuint (t->vocab_hint, ==, 70010);
  g_assert_cmpuint (t->zeros, ==, 0);
  /* read as uint16: twice the tokens, the high halves (990 of them) are 0 */
  g_autoptr (KsTokens) narrow = ks_tokens_load (path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (narrow->n, ==, 2 * N);
  g_assert_cmpuint (narrow->zeros, ==, N - 10);
  g_assert_cmpuint (ks_tokens_get (narrow, 20), ==, narrow->tokens[20]);
  /* a size that is no multiple of 4, and an llm.c shard, are not uint32 tokens */
  g_autofree char *odd = write_bytes (dir, "odd.bin", wide, sizeof wide - 2);
  g_assert_null (ks_tokens_load_as (odd, 4, &error));
  g_assert_nonnull (strstr (error->message, "odd.bin: 3998 bytes, not a multiple of 4: not "
                                            "uint32 tokens ([data] dtype = uint32)"));
  g_clear_error (&error);
  g_autofree char *shard = write_shard (dir, "s.bin", 20240520, 1, 100, 100);
  g_assert_null (ks_tokens_load_as (shard, 4, &error));
  g_assert_nonnull (strstr (error->message, "holds uint16 tokens: set [data] dtype = uint16"));
  ks_test_rmtree (dir);
}

static void
tokens_bad (const char *path, const char *what)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *base = g_path_get_basename (path);
  g_assert_null (ks_tokens_load (path, &error));
  g_assert_nonnull (error);
  if (strstr (error->message, base) == NULL || strstr (error->message, what) == NULL)
    g_error ("'%s' lacks '%s' or '%s'", error->message, base, what);
}

static void
test_tokens (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autoptr (GError) error = NULL;

  g_autofree char *shard = write_shard (dir, "fineweb_train_000001.bin", 20240520, 1, 3000,
                                        3000);
  g_autoptr (KsTokens) t = ks_tokens_load (shard, &error);
  guint32 max = 0;
  g_assert_no_error (error);
  g_assert_cmpuint (t->n, ==, 3000);
  for (gsize i = 0; i < 3000; i++)
    {
      g_assert_cmpuint (t->tokens[i], ==, i * 37 % 50257);
      max = MAX (max, i * 37 % 50257);
    }
  g_assert_cmpuint (t->vocab_hint, ==, max + 1);
  g_assert_cmpstr (t->path, ==, shard);

  /* nanoGPT's headerless train.bin */
  const guint16 plain[5] = { 7, 0, 65535, 3, 7 };
  g_autofree char *bin = write_bytes (dir, "train.bin", plain, sizeof plain);
  g_autoptr (KsTokens) p = ks_tokens_load (bin, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (p->n, ==, 5);
  for (int i = 0; i < 5; i++)
    g_assert_cmpuint (p->tokens[i], ==, plain[i]);
  g_assert_cmpuint (p->vocab_hint, ==, 65536);

  /* a shard that disagrees with itself is refused, never read as plain tokens */
  g_autofree char *c1 = write_shard (dir, "count.bin", 20240520, 1, 3001, 3000);
  tokens_bad (c1, "truncated: the header says 3001 tokens (6002 bytes) but 6000 bytes follow");
  g_autofree char *c2 = write_shard (dir, "more.bin", 20240520, 1, 10, 3000);
  tokens_bad (c2, "a wrong token count: the header says 10 tokens");
  g_autofree char *c3 = write_shard (dir, "zero.bin", 20240520, 1, -5, 0);
  tokens_bad (c3, "the header says -5 tokens");
  g_autofree char *v2 = write_shard (dir, "v2.bin", 20240520, 2, 10, 10);
  tokens_bad (v2, "llm.c shard version 2 (expected 1");
  g_autofree char *cut = write_bytes (dir, "cut.bin", "\x88\xd8\x34\x01\x01\x00", 6);
  tokens_bad (cut, "less than the 1024-byte header");
  g_autofree char *odd = write_bytes (dir, "odd.bin", plain, 9);
  tokens_bad (odd, "9 bytes, an odd number");
  g_autofree char *empty = write_bytes (dir, "empty.bin", "", 0);
  tokens_bad (empty, "empty file");
  g_autofree char *gz = write_gz (dir, "train.bin.gz", plain, sizeof plain);
  tokens_bad (gz, "gunzip it first");
  g_autofree char *missing = g_build_filename (dir, "missing.bin", NULL);
  g_assert_null (ks_tokens_load (missing, &error));
  g_assert_true (g_error_matches (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO));
  g_assert_nonnull (strstr (error->message, "missing.bin"));
  ks_test_rmtree (dir);
}

/* A table of `rows` rows whose first feature is the row index (to follow rows through a
 * split), the others drawn from `rng` about `scale`, classes r % 3. */
static KsTable *
made_table (gsize rows, gsize features, GRand *rng, double scale)
{
  KsTable *t = g_new0 (KsTable, 1);
  t->path = g_strdup ("made");
  t->rows = rows;
  t->ndim = 1;
  t->shape[0] = features;
  t->features = features;
  t->x = g_new (float, rows * features);
  t->y = g_new (gint64, rows);
  t->classes = 3;
  t->class_names = g_strsplit ("a b c", " ", -1);
  for (gsize r = 0; r < rows; r++)
    {
      t->x[r * features] = r;
      for (gsize j = 1; j < features; j++)
        t->x[r * features + j] = (float) (scale * j + g_rand_double_range (rng, -scale, scale));
      t->y[r] = r % 3;
    }
  return t;
}

static void
test_split (void)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (5);
  g_autoptr (KsTable) t = made_table (2000, 3, rng, 1);
  g_autoptr (GError) error = NULL;
  g_autoptr (KsTable) train = NULL, test = NULL, train2 = NULL, test2 = NULL;
  g_autoptr (KsTable) train3 = NULL, test3 = NULL, a = NULL, b = NULL;
  g_autofree int *seen = g_new0 (int, 2000);

  g_assert_true (ks_table_split (t, 0.2, 42, &train, &test, &error));
  g_assert_no_error (error);
  /* disjoint, all rows, in order, whole rows and labels carried */
  g_assert_cmpuint (train->rows + test->rows, ==, 2000);
  g_assert_cmpuint (test->rows, >, 400 - 60);
  g_assert_cmpuint (test->rows, <, 400 + 60);
  for (int k = 0; k < 2; k++)
    {
      KsTable *s = k ? test : train;
      g_assert_cmpuint (s->features, ==, 3);
      g_assert_cmpint (s->classes, ==, 3);
      g_assert_cmpstr (s->class_names[2], ==, "c");
      for (gsize i = 0; i < s->rows; i++)
        {
          gsize r = (gsize) s->x[i * 3];
          g_assert_cmpint (seen[r]++, ==, 0);
          g_assert_true (i == 0 || r > (gsize) s->x[(i - 1) * 3]);
          g_assert_cmpint (s->y[i], ==, r % 3);
          g_assert_cmpfloat (s->x[i * 3 + 2], ==, t->x[r * 3 + 2]);
        }
    }
  /* the same seed, the same split; another seed, another */
  g_assert_true (ks_table_split (t, 0.2, 42, &train2, &test2, &error));
  g_assert_cmpuint (test2->rows, ==, test->rows);
  g_assert_cmpmem (test2->x, test->rows * 12, test->x, test->rows * 12);
  g_assert_true (ks_table_split (t, 0.2, 43, &train3, &test3, &error));
  g_assert_false (test3->rows == test->rows
                  && memcmp (test3->x, test->x, test->rows * 12) == 0);
  /* a row's side depends on its index only: a table's prefix splits the same way */
  t->rows = 1000;
  g_assert_true (ks_table_split (t, 0.2, 42, &a, &b, &error));
  for (gsize i = 0; i < b->rows; i++)
    g_assert_cmpfloat (b->x[i * 3], ==, test->x[i * 3]);
  t->rows = 2000;

  /* near the fraction over several fractions and seeds */
  for (int f = 1; f < 10; f++)
    for (guint64 seed = 0; seed < 5; seed++)
      {
        KsTable *tr, *te;
        g_assert_true (ks_table_split (t, f / 10.0, seed, &tr, &te, &error));
        g_assert_cmpfloat (fabs (te->rows - 200.0 * f), <, 4 * sqrt (2000 * f / 10.0));
        ks_table_free (tr);
        ks_table_free (te);
      }

  /* fractions out of (0, 1) and an empty side are errors */
  KsTable *u = NULL, *v = NULL;
  g_assert_false (ks_table_split (t, 0, 1, &u, &v, &error));
  g_assert_nonnull (strstr (error->message, "made: a held-out fraction of 0"));
  g_clear_error (&error);
  g_assert_false (ks_table_split (t, 1.5, 1, &u, &v, &error));
  g_clear_error (&error);
  t->rows = 2;
  g_assert_false (ks_table_split (t, 1e-6, 1, &u, &v, &error));
  g_assert_nonnull (strstr (error->message, "leaves the test part empty"));
  g_assert_null (u);
  g_assert_null (v);
  t->rows = 2000;
}

static void
test_moments (void)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (9);
  /* values far from 0, where E[x^2] - E[x]^2 in float would lose the spread */
  g_autoptr (KsTable) t = made_table (3001, 5, rng, 1000);
  g_autoptr (KsTable) r = NULL, s = NULL;
  g_autoptr (GError) error = NULL;
  float mean[5], std[5], mean2[5], std2[5];

  for (gsize i = 0; i < t->rows; i++)
    t->x[i * 5 + 4] = 7; /* a constant feature */
  ks_table_moments (t, mean, std);
  /* Welford's running update in long double, another way to the same numbers */
  for (int j = 0; j < 5; j++)
    {
      long double m = 0, m2 = 0;
      for (gsize i = 0; i < t->rows; i++)
        {
          long double x = t->x[i * 5 + j], d = x - m;
          m += d / (i + 1);
          m2 += d * (x - m);
        }
      double sd = sqrtl (m2 / t->rows);
      g_assert_cmpfloat_with_epsilon (mean[j], m, 1e-6 * fabs ((double) m) + 1e-6);
      if (j < 4)
        g_assert_cmpfloat_with_epsilon (std[j], sd, 1e-5 * sd);
    }
  g_assert_cmpfloat (mean[0], ==, 1500);
  g_assert_cmpfloat (std[4], ==, KS_TABLE_STD_FLOOR);

  /* standardised: mean 0 and deviation 1 but the constant feature, which becomes 0 */
  g_assert_true (ks_table_split (t, 0.3, 1, &r, &s, &error));
  ks_table_standardize (t, mean, std);
  ks_table_moments (t, mean2, std2);
  for (int j = 0; j < 4; j++)
    {
      g_assert_cmpfloat_with_epsilon (mean2[j], 0, 1e-4);
      g_assert_cmpfloat_with_epsilon (std2[j], 1, 1e-4);
    }
  g_assert_cmpfloat (t->x[5 * 17 + 4], ==, 0);
  /* a held-out part with the training part's moments */
  g_autofree float *before = g_memdup2 (s->x, s->rows * 5 * sizeof (float));
  ks_table_moments (r, mean, std);
  ks_table_standardize (s, mean, std);
  for (gsize i = 0; i < s->rows * 5; i++)
    g_assert_cmpfloat (s->x[i], ==, (before[i] - mean[i % 5]) / std[i % 5]);
  t->rows = 0;
  ks_table_moments (t, mean, std);
  g_assert_cmpfloat (mean[2], ==, 0);
  g_assert_cmpfloat (std[2], ==, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/table/csv", test_csv);
  g_test_add_func ("/table/csv-gzip", test_csv_gzip);
  g_test_add_func ("/table/csv-errors", test_csv_errors);
  g_test_add_func ("/table/csv-label-index", test_csv_label_index);
  g_test_add_func ("/table/csv-missing", test_csv_missing);
  g_test_add_func ("/table/csv-features-only", test_csv_features_only);
  g_test_add_func ("/table/tokens-uint32", test_tokens_uint32);
  g_test_add_func ("/table/npy", test_npy);
  g_test_add_func ("/table/npy-errors", test_npy_errors);
  g_test_add_func ("/table/npy-strict", test_npy_strict);
  g_test_add_func ("/table/idx", test_idx);
  g_test_add_func ("/table/idx-errors", test_idx_errors);
  g_test_add_func ("/table/tokens", test_tokens);
  g_test_add_func ("/table/split", test_split);
  g_test_add_func ("/table/moments", test_moments);
  return g_test_run ();
}
