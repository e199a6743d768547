/* Criteo data and the streaming AUC: feasigns, the reader's values and every malformed
 * kind, data directories, the AUC against an exact rank AUC and merged counts, and
 * `ksdist datagen ctr`. */
#include "testutil.h"
#include <ksdist/tasks.h>

#include <math.h>
#include <string.h>
#include <unistd.h>

/* A Criteo line from its label, 13 integer fields and 26 categorical fields (NULL
 * arrays or entries: empty fields). */
static char *
line (const char *label, const char *const ints[13], const char *const cats[26])
{
  GString *s = g_string_new (label);
  for (int k = 0; k < 13; k++)
    g_string_append_printf (s, "\t%s", ints != NULL && ints[k] != NULL ? ints[k] : "");
  for (int c = 0; c < 26; c++)
    g_string_append_printf (s, "\t%s", cats != NULL && cats[c] != NULL ? cats[c] : "");
  return g_string_free (s, FALSE);
}

static void
test_feasign (void)
{
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  guint64 a = ks_criteo_feasign (3, "68fd1e64", 8);

  g_assert_cmpuint (a, ==, ks_criteo_feasign (3, "68fd1e64", 8));
  g_assert_cmpuint (a, !=, ks_criteo_feasign (4, "68fd1e64", 8));
  g_assert_cmpuint (a, !=, ks_criteo_feasign (3, "68fd1e65", 8));
  /* only `len` bytes count */
  g_assert_cmpuint (ks_criteo_feasign (0, "abc", 2), ==, ks_criteo_feasign (0, "abX", 2));
  /* a fixed value: feasigns in saved tables must not change between versions */
  g_assert_cmpuint (ks_criteo_feasign (0, "05db9164", 8), ==,
                    G_GUINT64_CONSTANT (0xfa516deb79d8d513));
  for (int slot = 0; slot < 26; slot++)
    for (int i = 0; i < 4000; i++)
      {
        char text[16];
        int len = g_snprintf (text, sizeof text, "%08x", i);
        guint64 *id = g_new (guint64, 1);
        *id = ks_criteo_feasign (slot, text, len);
        g_assert_cmpuint (*id, !=, 0);
        g_assert_false (g_hash_table_contains (seen, id)); /* no collision in 104000 */
        g_hash_table_add (seen, id);
      }
}

static void
test_read (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  const char *const ints1[13] = { "1", "", "-1", "0", "2", "1000", "123456789", "", "-2", "7",
                                  "", "3", "0" };
  const char *const cats1[26] = { "68fd1e64", "", "a", "0123456789abcdef", "ABCDEF12" };
  const char *const ints2[13] = { "", "", "", "", "", "", "", "", "", "", "", "", "5" };
  const char *const cats2[26] = { [25] = "05db9164" };
  g_autofree char *l1 = line ("1", ints1, cats1);
  g_autofree char *l2 = line ("0", ints2, cats2);
  g_autofree char *l3 = line ("0", NULL, NULL);
  g_autofree char *text1 = g_strdup_printf ("%s\r\n\n%s\n", l1, l2);
  g_autofree char *text2 = g_strdup_printf ("\r\n%s", l3); /* no final newline */
  g_autofree char *p1 = ks_test_write (dir, "a", text1);
  g_autofree char *p2 = ks_test_write (dir, "b", text2);
  const char *paths[] = { p1, p2 };
  g_autoptr (GError) error = NULL;
  g_autoptr (KsCriteo) data = ks_criteo_load (paths, 2, FALSE, &error);
  const double want1[13] = { log1p (1), 0, 0, 0, log1p (2), log1p (1000), log1p (123456789),
                             0, 0, log1p (7), 0, log1p (3), 0 };

  g_assert_no_error (error);
  g_assert_cmpuint (data->n, ==, 3);
  g_assert_cmpuint (data->skipped, ==, 0);
  g_assert_cmpfloat (data->labels[0], ==, 1);
  g_assert_cmpfloat (data->labels[1], ==, 0);
  g_assert_cmpfloat (data->labels[2], ==, 0);
  for (int k = 0; k < 13; k++)
    {
      g_assert_cmpfloat (data->dense[k], ==, (float) want1[k]);
      g_assert_cmpfloat (data->dense[13 + k], ==, k == 12 ? (float) log1p (5) : 0.0f);
      g_assert_cmpfloat (data->dense[26 + k], ==, 0.0f);
    }
  for (int c = 0; c < 26; c++)
    {
      const char *v = cats1[c];
      g_assert_cmpuint (data->ids[c], ==, v != NULL && *v ? ks_criteo_feasign (c, v, strlen (v)) : 0);
      g_assert_cmpuint (data->ids[26 + c], ==,
                        c == 25 ? ks_criteo_feasign (25, "05db9164", 8) : 0);
      g_assert_cmpuint (data->ids[52 + c], ==, 0);
    }
  ks_test_rmtree (dir);
}

/* Each malformed kind alone is an error naming FILE:LINE and the fault. */
static void
test_malformed (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *good = line ("1", NULL, NULL);
  g_autofree char *fields39 = g_strndup (good, strlen (good) - 1); /* one tab fewer */
  g_autofree char *fields41 = g_strconcat (good, "\t", NULL);
  g_autofree char *label2 = line ("2", NULL, NULL);
  g_autofree char *label_empty = line ("", NULL, NULL);
  const char *const bad_ints[13] = { "", "1x", "", "", "", "", "", "", "", "", "", "", "" };
  const char *const bad_cats[26] = { "", "", "zz" };
  const char *const long_cats[26] = { "0123456789abcdef0" };
  const char *const minus_ints[13] = { "-", "", "", "", "", "", "", "", "", "", "", "", "" };
  g_autofree char *bad_int = line ("0", bad_ints, NULL);
  g_autofree char *bad_hex = line ("0", NULL, bad_cats);
  g_autofree char *long_hex = line ("0", NULL, long_cats);
  g_autofree char *minus = line ("0", minus_ints, NULL);
  struct {
    const char *bad, *what;
  } cases[] = {
    { fields39, "has 39 fields, a Criteo line has 40" },
    { fields41, "has 41 fields" },
    { label2, "label '2'" },
    { label_empty, "label ''" },
    { bad_int, "field 3 (I2) is '1x'" },
    { bad_hex, "field 17 (C3) is 'zz'" },
    { long_hex, "(C1) is '0123456789abcdef0'" },
    { minus, "(I1) is '-'" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *text = g_strdup_printf ("%s\n%s\n\n%s\n", good, good, cases[i].bad);
      g_autofree char *path = ks_test_write (dir, "part", text);
      g_autofree char *where = g_strdup_printf ("%s:4: ", path);
      const char *paths[] = { path };
      g_autoptr (GError) error = NULL;
      KsCriteo *data = ks_criteo_load (paths, 1, FALSE, &error);

      g_assert_null (data);
      g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE);
      g_test_message ("%s", error->message);
      g_assert_nonnull (strstr (error->message, where));
      g_assert_nonnull (strstr (error->message, cases[i].what));
    }

  /* an unreadable file, and files without a sample */
  {
    g_autofree char *missing = g_build_filename (dir, "missing", NULL);
    g_autofree char *empty = ks_test_write (dir, "empty", "\n\r\n");
    const char *paths[] = { missing };
    const char *empties[] = { empty };
    g_autoptr (GError) error = NULL;
    g_autoptr (GError) error2 = NULL;

    g_assert_null (ks_criteo_load (paths, 1, FALSE, &error));
    g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT);
    g_assert_nonnull (strstr (error->message, missing));
    g_assert_null (ks_criteo_load (empties, 1, TRUE, &error2));
    g_assert_error (error2, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE);
    g_assert_nonnull (strstr (error2->message, empty));
  }
  ks_test_rmtree (dir);
}

static void
test_skip_bad (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  const char *const bad_ints[13] = { "1x" };
  const char *const bad_cats[26] = { "zz" };
  g_autofree char *good = line ("1", NULL, NULL);
  g_autofree char *fields39 = g_strndup (good, strlen (good) - 1);
  g_autofree char *label2 = line ("2", NULL, NULL);
  g_autofree char *bad_int = line ("0", bad_ints, NULL);
  g_autofree char *bad_hex = line ("0", NULL, bad_cats);
  g_autofree char *text = g_strjoin ("\n", good, fields39, good, label2, bad_int, good, bad_hex,
                                     NULL);
  g_autofree char *path = ks_test_write (dir, "part", text);
  const char *paths[] = { path };
  g_autoptr (GError) error = NULL;
  g_autoptr (KsCriteo) data = ks_criteo_load (paths, 1, TRUE, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (data->n, ==, 3);
  g_assert_cmpuint (data->skipped, ==, 4);
  for (int i = 0; i < 3; i++)
    g_assert_cmpfloat (data->labels[i], ==, 1);
  ks_test_rmtree (dir);
}

static void
test_data_dir (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *sub = g_build_filename (dir, "sub", NULL);
  g_autofree char *empty_dir = g_build_filename (dir, "sub", "empty", NULL);
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) files = NULL;

  g_assert_cmpint (g_mkdir_with_parents (empty_dir, 0700), ==, 0);
  g_free (ks_test_write (sub, "part-00001", ""));
  g_free (ks_test_write (sub, "part-00000", ""));
  g_free (ks_test_write (sub, ".hidden", ""));
  g_free (ks_test_write (sub, "a", ""));
  files = ks_data_dir_files (sub, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_strv_length (files), ==, 3);
  g_assert_true (g_str_has_suffix (files[0], "/sub/a"));
  g_assert_true (g_str_has_suffix (files[1], "/part-00000"));
  g_assert_true (g_str_has_suffix (files[2], "/part-00001"));

  /* a part file's link that broke is an error naming it, not a file skipped */
  g_autofree char *link = g_build_filename (sub, "part-00002", NULL);
  g_assert_cmpint (symlink ("/nonexistent/ks-ctr-part", link), ==, 0);
  g_assert_null (ks_data_dir_files (sub, &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT);
  g_assert_nonnull (strstr (error->message, "part-00002 is a link to nothing"));
  g_clear_error (&error);
  g_assert_cmpint (unlink (link), ==, 0);

  g_assert_null (ks_data_dir_files (empty_dir, &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT);
  g_assert_nonnull (strstr (error->message, empty_dir));
  g_clear_error (&error);
  g_assert_null (ks_data_dir_files ("/nonexistent/ks-ctr", &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT);
  ks_test_rmtree (dir);
}

typedef struct {
  float p, y;
} Pair;

static int
compare_pairs (const void *a, const void *b)
{
  float x = ((const Pair *) a)->p, y = ((const Pair *) b)->p;
  return (x > y) - (x < y);
}

/* Mann-Whitney: the fraction of (positive, negative) pairs ordered right, ties half. */
static double
rank_auc (const float *p, const float *y, gsize n)
{
  g_autofree Pair *v = g_new (Pair, n);
  double pos = 0, rank_sum = 0;

  for (gsize i = 0; i < n; i++)
    v[i] = (Pair) { p[i], y[i] };
  qsort (v, n, sizeof *v, compare_pairs);
  for (gsize i = 0; i < n;)
    {
      gsize j = i;
      double k = 0;
      while (j < n && v[j].p == v[i].p)
        k += v[j++].y;
      rank_sum += k * ((i + 1) + j) / 2.0;
      pos += k;
      i = j;
    }
  return (rank_sum - pos * (pos + 1) / 2) / (pos * (n - pos));
}

/* Predictions and labels drawn so the AUC is well inside (0.5, 1). */
static void
random_scores (GRand *rng, float *p, float *y, gsize n)
{
  for (gsize i = 0; i < n; i++)
    {
      p[i] = (float) g_rand_double (rng);
      y[i] = g_rand_double (rng) < 0.1 + 0.6 * p[i] * p[i] ? 1 : 0;
    }
}

static void
test_auc_exact (void)
{
  enum { N = 20000 };
  g_autoptr (GRand) rng = g_rand_new_with_seed (7);
  g_autofree float *p = g_new (float, N);
  g_autofree float *y = g_new (float, N);
  g_autoptr (KsAuc) auc = ks_auc_new (4095);
  const float sep_p[] = { 0.1f, 0.2f, 0.8f, 1.0f }, sep_y[] = { 0, 0, 1, 1 };
  const float rev_y[] = { 1, 1, 0, 0 };
  double want;

  for (int round = 0; round < 3; round++)
    {
      random_scores (rng, p, y, N);
      want = rank_auc (p, y, N);
      ks_auc_reset (auc);
      ks_auc_add (auc, p, y, N);
      g_test_message ("bucketed %.5f, exact %.5f", ks_auc_value (auc), want);
      g_assert_cmpfloat (want, >, 0.6);
      g_assert_cmpfloat (fabs (ks_auc_value (auc) - want), <, 2e-3);
      g_assert_cmpfloat (ks_auc_samples (auc), ==, N);
    }

  /* separated classes, reversed ones, one class only, and p = 1 in the top bucket */
  ks_auc_reset (auc);
  ks_auc_add (auc, sep_p, sep_y, 4);
  g_assert_cmpfloat (ks_auc_value (auc), ==, 1.0);
  ks_auc_reset (auc);
  ks_auc_add (auc, sep_p, rev_y, 4);
  g_assert_cmpfloat (ks_auc_value (auc), ==, 0.0);
  ks_auc_reset (auc);
  g_assert_cmpfloat (ks_auc_value (auc), ==, 0.5);
  ks_auc_add (auc, sep_p + 2, sep_y + 2, 2); /* positives only */
  g_assert_cmpfloat (ks_auc_value (auc), ==, 0.5);
  {
    gsize n;
    double *counts = ks_auc_counts (auc, &n);
    g_assert_cmpuint (n, ==, 2 * 4095);
    g_assert_cmpfloat (counts[4094], ==, 1); /* p = 1.0 */
    g_assert_cmpfloat (counts[(gsize) ((double) 0.8f * 4095)], ==, 1);
    g_assert_cmpfloat (ks_auc_samples (auc), ==, 2);
  }
  /* all in one bucket: every pair a tie */
  {
    g_autoptr (KsAuc) one = ks_auc_new (1);
    ks_auc_add (one, sep_p, sep_y, 4);
    g_assert_cmpfloat (ks_auc_value (one), ==, 0.5);
  }
}

static void
test_auc_merge (void)
{
  enum { N = 10001 };
  g_autoptr (GRand) rng = g_rand_new_with_seed (11);
  g_autofree float *p = g_new (float, N);
  g_autofree float *y = g_new (float, N);
  g_autoptr (KsAuc) whole = ks_auc_new (4095);
  g_autoptr (KsAuc) a = ks_auc_new (4095);
  g_autoptr (KsAuc) b = ks_auc_new (4095);
  gsize n;
  double *ca, *cb;

  random_scores (rng, p, y, N);
  ks_auc_add (whole, p, y, N);
  ks_auc_add (a, p, y, 4000);
  ks_auc_add (b, p + 4000, y + 4000, N - 4000);
  g_assert_cmpfloat (fabs (ks_auc_value (a) - ks_auc_value (whole)), >, 1e-6); /* a real test */
  ca = ks_auc_counts (a, &n);
  cb = ks_auc_counts (b, NULL);
  for (gsize i = 0; i < n; i++)
    ca[i] += cb[i];
  g_assert_cmpfloat (ks_auc_value (a), ==, ks_auc_value (whole));
  g_assert_cmpfloat (ks_auc_samples (a), ==, N);
}

/* ---- ksdist datagen ctr ---- */

static const char *const no_plugins[] = { NULL };

static double
number_after (const char *text, const char *key)
{
  const char *at = strstr (text, key);
  g_assert_nonnull (at);
  return g_ascii_strtod (at + strlen (key), NULL);
}

static int
datagen (const char *dir, const char *seed, const char *extra, char **out, char **err)
{
  const char *args[] = { "datagen", "ctr", dir, "--train", "20000", "--test", "5000",
                         "--vocab", "2000", "--seed", seed, extra, NULL };
  return ks_test_run_ksdist (args, NULL, no_plugins, out, err);
}

static KsCriteo *
load_dir (const char *dir, const char *sub, gboolean skip_bad, GError **error)
{
  g_autofree char *path = g_build_filename (dir, sub, NULL);
  g_auto (GStrv) files = ks_data_dir_files (path, error);
  return files != NULL ? ks_criteo_load ((const char *const *) files, g_strv_length (files),
                                         skip_bad, error)
                       : NULL;
}

/* The bytes of every data file of `a` equal those of `b`. */
static gboolean
same_files (const char *a, const char *b)
{
  const char *names[] = { "train/part-00000", "train/part-00003", "train/part-00007",
                          "test/part-00000" };
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *pa = g_build_filename (a, names[i], NULL);
      g_autofree char *pb = g_build_filename (b, names[i], NULL);
      g_autofree char *ta = NULL, *tb = NULL;
      gsize la, lb;
      g_assert_true (g_file_get_contents (pa, &ta, &la, NULL));
      g_assert_true (g_file_get_contents (pb, &tb, &lb, NULL));
      if (la != lb || memcmp (ta, tb, la) != 0)
        return FALSE;
    }
  return TRUE;
}

static void
test_datagen (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *d1 = g_build_filename (dir, "one", NULL);
  g_autofree char *d2 = g_build_filename (dir, "two", NULL);
  g_autofree char *d3 = g_build_filename (dir, "three", NULL);
  g_autofree char *d4 = g_build_filename (dir, "bad", NULL);
  g_autofree char *json_path = g_build_filename (d1, "teacher.json", NULL);
  g_autofree char *out = NULL, *err = NULL, *json = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (KsCriteo) train = NULL, test = NULL;
  double auc, ctr, clicks = 0;
  char want[128];

  g_assert_cmpint (datagen (d1, "1", NULL, &out, &err), ==, 0);
  g_test_message ("%s", out);
  /* exactly one line */
  g_assert_true (g_str_has_prefix (out, "teacher auc 0."));
  g_assert_nonnull (strstr (out, " on 5000 test samples (ctr 0."));
  g_assert_true (g_str_has_suffix (out, ")\n"));
  g_assert_true (strchr (out, '\n') == out + strlen (out) - 1);
  auc = number_after (out, "teacher auc ");
  ctr = number_after (out, "(ctr ");
  g_assert_cmpfloat (auc, >, 0.65);
  g_assert_cmpfloat (auc, <, 0.95);
  g_assert_cmpfloat (ctr, >, 0.15);
  g_assert_cmpfloat (ctr, <, 0.4);

  g_assert_true (g_file_get_contents (json_path, &json, NULL, NULL));
  g_assert_cmpfloat (fabs (number_after (json, "\"auc\": ") - auc), <=, 5e-5);
  g_assert_nonnull (strstr (json, "\"train\": 20000"));
  g_assert_nonnull (strstr (json, "\"test\": 5000"));
  g_assert_nonnull (strstr (json, "\"seed\": 1"));

  train = load_dir (d1, "train", FALSE, &error);
  g_assert_no_error (error);
  test = load_dir (d1, "test", FALSE, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (train->n, ==, 20000);
  g_assert_cmpuint (test->n, ==, 5000);
  for (gsize i = 0; i < test->n; i++)
    clicks += test->labels[i];
  g_snprintf (want, sizeof want, "(ctr %.3f)", clicks / test->n);
  g_assert_nonnull (strstr (out, want)); /* the printed CTR is the test file's */
  {
    g_autofree char *eight = g_build_filename (d1, "train", "part-00007", NULL);
    g_autofree char *nine = g_build_filename (d1, "train", "part-00008", NULL);
    g_assert_true (g_file_test (eight, G_FILE_TEST_IS_REGULAR));
    g_assert_false (g_file_test (nine, G_FILE_TEST_EXISTS));
  }

  /* the same seed: the same bytes; another seed: other bytes */
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (datagen (d2, "1", NULL, &out, &err), ==, 0);
  g_assert_true (same_files (d1, d2));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (datagen (d3, "2", NULL, &out, &err), ==, 0);
  g_assert_false (same_files (d1, d3));

  /* an existing DIR is refused, then replaced with --force */
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (datagen (d3, "1", NULL, &out, &err), ==, 2);
  g_assert_nonnull (strstr (err, "--force"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (datagen (d3, "1", "--force", &out, &err), ==, 0);
  g_assert_true (same_files (d1, d3));

  /* malformed lines: an error naming train part 0, or skipped and counted */
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  {
    const char *args[] = { "datagen", "ctr", d4, "--train", "2000", "--test", "100",
                           "--bad-lines", "8", "--files", "2", NULL };
    g_autoptr (KsCriteo) skipped = NULL;
    g_assert_cmpint (ks_test_run_ksdist (args, NULL, no_plugins, &out, &err), ==, 0);
    g_assert_null (load_dir (d4, "train", FALSE, &error));
    g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE);
    g_assert_nonnull (strstr (error->message, "train/part-00000:"));
    g_clear_error (&error);
    skipped = load_dir (d4, "train", TRUE, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (skipped->n, ==, 2000);
    g_assert_cmpuint (skipped->skipped, ==, 8);
  }
  ks_test_rmtree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/ctr/feasign", test_feasign);
  g_test_add_func ("/ctr/read", test_read);
  g_test_add_func ("/ctr/malformed", test_malformed);
  g_test_add_func ("/ctr/skip-bad", test_skip_bad);
  g_test_add_func ("/ctr/data-dir", test_data_dir);
  g_test_add_func ("/ctr/auc-exact", test_auc_exact);
  g_test_add_func ("/ctr/auc-merge", test_auc_merge);
  g_test_add_func ("/ctr/datagen", test_datagen);
  return g_test_run ();
}
