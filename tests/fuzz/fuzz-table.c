/* Fuzz target: the data-set readers (ksdist/table.h) on hostile files. Byte 0 picks the
 * reader and its options; for the readers of two files, bytes 1-2 (little endian) say
 * where the first file ends in the rest. A table that loads is split and standardised. */
#include "fuzz.h"

#include <ksdist/tasks.h>
#include <glib/gstdio.h>
#include <string.h>

static char *dir;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  dir = g_dir_make_tmp ("ksdist-fuzz-XXXXXX", NULL);
  g_log_set_default_handler (fuzz_log_handler, NULL);
  return 0;
}

static char *
put (const char *name, const uint8_t *data, size_t size)
{
  char *path = g_build_filename (dir, name, NULL);
  /* no fsync: thousands of inputs; without it GLib writes in place, so a longer earlier
   * input would show through its end were the file not removed first */
  g_unlink (path);
  g_file_set_contents_full (path, (const char *) data, (gssize) size, G_FILE_SET_CONTENTS_NONE,
                            0644, NULL);
  return path;
}

static void
exercise (KsTable *t)
{
  g_autofree float *mean = g_new (float, t->features);
  g_autofree float *std = g_new (float, t->features);
  KsTable *train = NULL, *test = NULL;

  ks_table_moments (t, mean, std);
  ks_table_standardize (t, mean, std);
  if (ks_table_split (t, 0.5, 1, &train, &test, NULL))
    {
      ks_table_free (train);
      ks_table_free (test);
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr (KsTable) t = NULL;
  g_autoptr (GError) error = NULL;

  if (dir == NULL)
    LLVMFuzzerInitialize (NULL, NULL);
  if (size < 3)
    return 0;
  guint mode = data[0] % 4, split = MIN (data[1] | (guint) data[2] << 8, size - 3);
  gboolean regression = (data[0] >> 2) & 1;
  const uint8_t *rest = data + 3;
  size_t n = size - 3;

  if (mode == 0)
    {
      /* CSV, header auto/none/yes, the label last or column 0 */
      g_autofree char *path = put ("fuzz.csv", rest, n);
      KsCsvOptions o = { 0, (int) ((data[0] >> 3) % 3) - 1, (data[0] >> 5) & 1 ? "0" : NULL,
                         regression };
      t = ks_table_load_csv (path, &o, &error);
    }
  else if (mode == 1)
    {
      g_autofree char *f = put ("features.npy", rest, split);
      g_autofree char *l = put ("labels.npy", rest + split, n - split);
      t = ks_table_load_npy (f, l, regression, &error);
    }
  else if (mode == 2)
    {
      g_autofree char *i = put ("t10k-images-idx3-ubyte", rest, split);
      g_autofree char *l = put ("t10k-labels-idx1-ubyte", rest + split, n - split);
      t = ks_table_load_idx (dir, FALSE, &error);
    }
  else
    {
      g_autofree char *path = put ("tokens.bin", rest, n);
      g_autoptr (KsTokens) tokens = ks_tokens_load (path, &error);
      g_assert (tokens != NULL || error != NULL);
      if (tokens != NULL)
        g_assert (tokens->n > 0 && tokens->tokens[tokens->n - 1] < tokens->vocab_hint);
      return 0;
    }
  /* one of a table or an error, and a table's values as documented */
  g_assert ((t != NULL) != (error != NULL));
  if (t != NULL)
    {
      g_assert (t->rows > 0 && t->features > 0);
      for (gsize r = 0; r < t->rows; r++)
        g_assert (t->regression || (t->y[r] >= 0 && t->y[r] < t->classes));
      exercise (t);
    }
  return 0;
}
