/* Generated classification tasks in the plane. */
#include "tasks-private.h"

#include <math.h>
#include <string.h>

static const char *const task_names[] = { "spirals", "rings" };

int
ks_task_classes (KsTask task)
{
  switch (task)
    {
    case KS_TASK_SPIRALS: return 2;
    case KS_TASK_RINGS: return 3;
    }
  return -1;
}

gboolean
ks_task_from_name (const char *name, KsTask *task)
{
  for (guint i = 0; i < G_N_ELEMENTS (task_names); i++)
    if (strcmp (name, task_names[i]) == 0)
      {
        *task = (KsTask) i;
        return TRUE;
      }
  return FALSE;
}

static double
gaussian (GRand *rng)
{
  double u = g_rand_double (rng), v = g_rand_double (rng);
  return sqrt (-2 * log (1 - u)) * cos (2 * G_PI * v);
}

void
ks_task_generate (KsTask task, gsize n, double noise, guint64 seed, float *xs, gint64 *labels)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed ((guint32) (seed ^ (seed >> 32)));
  int classes = ks_task_classes (task);

  for (gsize i = 0; i < n; i++)
    {
      gint64 cls = g_rand_int_range (rng, 0, classes);
      double x, y;
      if (task == KS_TASK_SPIRALS)
        {
          /* radius grows with the angle; the second spiral is the first turned half a turn */
          double t = g_rand_double_range (rng, 0.25, 1) * 3 * G_PI;
          double r = t / (3 * G_PI), sign = cls ? -1 : 1;
          x = sign * r * cos (t);
          y = sign * r * sin (t);
        }
      else
        {
          double r = 0.3 + 0.35 * cls + g_rand_double_range (rng, -0.08, 0.08);
          double a = g_rand_double_range (rng, 0, 2 * G_PI);
          x = r * cos (a);
          y = r * sin (a);
        }
      xs[2 * i] = (float) (x + noise * gaussian (rng));
      xs[2 * i + 1] = (float) (y + noise * gaussian (rng));
      labels[i] = cls;
    }
}

static int
by_name (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The files of a folder of texts, joined in name order (hidden ones left out), each
 * ending in a newline so the last line of one never runs into the next file's first. A
 * link to nothing or a sub-folder is an error naming it, never skipped without a word. */
static char *
read_folder (const char *path, gsize *len, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (GDir) dir = g_dir_open (path, 0, &local);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  if (dir == NULL)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO, "text corpus: %s", local->message);
      return NULL;
    }
  while ((name = g_dir_read_name (dir)) != NULL)
    if (name[0] != '.')
      g_ptr_array_add (names, g_build_filename (path, name, NULL));
  g_ptr_array_sort (names, by_name);
  GString *all = g_string_new (NULL);
  for (guint i = 0; i < names->len; i++)
    {
      const char *file = g_ptr_array_index (names, i);
      g_autofree char *bytes = NULL;
      gsize n;
      if (!g_file_test (file, G_FILE_TEST_IS_REGULAR))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO,
                       "text corpus: %s is not a text file (%s): a folder of texts holds "
                       "files only; move it out", file,
                       g_file_test (file, G_FILE_TEST_IS_DIR) ? "a folder" : "a link to nothing "
                                                                              "or a device");
          g_string_free (all, TRUE);
          return NULL;
        }
      if (!g_file_get_contents (file, &bytes, &n, &local))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO, "text corpus: %s",
                       local->message);
          g_string_free (all, TRUE);
          return NULL;
        }
      g_string_append_len (all, bytes, n);
      if (n > 0 && bytes[n - 1] != '\n')
        g_string_append_c (all, '\n');
    }
  *len = all->len;
  return g_string_free (all, FALSE);
}

KsText *
ks_text_load (const char *path, GError **error)
{
  g_autofree char *bytes = NULL;
  g_autoptr (GError) local = NULL;
  gint16 index[256];
  gsize len;
  KsText *text;

  if (g_file_test (path, G_FILE_TEST_IS_DIR))
    {
      if ((bytes = read_folder (path, &len, error)) == NULL)
        return NULL;
    }
  else if (!g_file_get_contents (path, &bytes, &len, &local))
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO, "text corpus: %s", local->message);
      return NULL;
    }
  if (len == 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO, "text corpus %s is empty%s", path,
                   g_file_test (path, G_FILE_TEST_IS_DIR) ? " (a folder of no text files)" : "");
      return NULL;
    }
  text = g_new0 (KsText, 1);
  text->path = g_strdup (path);
  memset (index, -1, sizeof index);
  for (gsize i = 0; i < len; i++)
    index[(guint8) bytes[i]] = 0;
  for (int b = 0; b < 256; b++)
    if (index[b] == 0)
      {
        index[b] = text->vocab_size;
        text->vocab[text->vocab_size++] = b;
      }
  text->tokens = g_new (gint64, len);
  text->length = len;
  for (gsize i = 0; i < len; i++)
    text->tokens[i] = index[(guint8) bytes[i]];
  return text;
}

void
ks_text_free (KsText *text)
{
  if (text == NULL)
    return;
  g_free (text->path);
  g_free (text->tokens);
  g_free (text);
}
