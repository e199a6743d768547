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
           "3 fields where the header has 4");
  csv_bad (dir, "nohead.csv", "1,2\n3,4,5\n", NULL, "nohead.csv:2:",
           "3 fields where the first record has 2");
  csv_bad (dir, "word.csv", "x1,x2,y\n1,2,0\n3,4,1\n\n5,abc,0\n", NULL, "word.csv:5:",
           "column 'x2': 'abc' is not a number");
  csv_bad (dir, "nan.csv", "1,2,0\n3,nan,1\n", NULL, "nan.csv:2:",
           "column 1: 'nan' is not a finite");
  csv_bad (dir, "inf.csv", "x,y\n1e39,1\n", NULL, "inf.csv:2:", "column 'x': '1e39'");
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
  csv_bad (dir, "name.csv", "x,y\n1,0\n", &named, "name.csv:1:", "no column is named 'target'");
  csv_bad (dir, "far.csv", "x,y\n1,0\n", &far, "far.csv:1:", "label column 9, but");
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

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/table/csv", test_csv);
  g_test_add_func ("/table/csv-gzip", test_csv_gzip);
  g_test_add_func ("/table/csv-errors", test_csv_errors);
  return g_test_run ();
}
