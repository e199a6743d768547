/* Criteo display-advertising data (a hand-written parser over mapped files) and a
 * streaming AUC counted in buckets, as Paddle's auc op. */
#include "tasks-private.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

enum { CRITEO_FIELDS = 1 + KS_CRITEO_DENSE + KS_CRITEO_SLOTS };

/* ---- feasigns ---- */

static inline guint64
splitmix64_finish (guint64 z)
{
  z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

guint64
ks_criteo_feasign (int slot, const char *value, gsize len)
{
  /* FNV-1a over the slot's 4 bytes and the value, then a finaliser: FNV alone mixes
   * its last bytes into the high bits poorly, and tables take ids modulo a size */
  guint64 h = G_GUINT64_CONSTANT (0xcbf29ce484222325);
  const guint64 prime = G_GUINT64_CONSTANT (0x100000001b3);
  guint32 s = (guint32) slot;

  for (int i = 0; i < 4; i++, s >>= 8)
    h = (h ^ (s & 0xff)) * prime;
  for (gsize i = 0; i < len; i++)
    h = (h ^ (guint8) value[i]) * prime;
  h = splitmix64_finish (h);
  return h != 0 ? h : G_GUINT64_CONSTANT (0x9e3779b97f4a7c15); /* 0 means empty */
}

/* ---- the reader ---- */

/* log (1 + x) of the small counts that make up most of Criteo's integers */
enum { LOG_TABLE = 4096 };
static float log_table[LOG_TABLE];

static gpointer
init_log_table (gpointer data)
{
  for (int i = 0; i < LOG_TABLE; i++)
    log_table[i] = (float) log1p ((double) i);
  return NULL;
}

static const char *const field_names[CRITEO_FIELDS] = {
  "label", "I1",  "I2",  "I3",  "I4",  "I5",  "I6",  "I7",  "I8",  "I9",  "I10", "I11", "I12", "I13",
  "C1",    "C2",  "C3",  "C4",  "C5",  "C6",  "C7",  "C8",  "C9",  "C10", "C11", "C12", "C13",
  "C14",   "C15", "C16", "C17", "C18", "C19", "C20", "C21", "C22", "C23", "C24", "C25", "C26",
};

typedef struct {
  GArray *labels, *dense, *ids;
  gsize n;
} Rows;

/* A decimal integer, an optional '-' then 1..18 digits (no overflow possible). */
static gboolean
parse_int (const char *p, const char *end, gint64 *out)
{
  gboolean neg = FALSE;
  gint64 v = 0;

  if (p < end && *p == '-')
    {
      neg = TRUE;
      p++;
    }
  if (p == end || end - p > 18)
    return FALSE;
  for (; p < end; p++)
    {
      unsigned d = (unsigned) (*p - '0');
      if (d > 9)
        return FALSE;
      v = v * 10 + d;
    }
  *out = neg ? -v : v;
  return TRUE;
}

static gboolean
is_hex (const char *p, const char *end)
{
  if (p == end || end - p > 16)
    return FALSE;
  for (; p < end; p++)
    if (!g_ascii_isxdigit (*p))
      return FALSE;
  return TRUE;
}

/* Shows at most 24 bytes of a bad field, non-printable bytes as '?'. */
static char *
shown (const char *p, const char *end)
{
  gsize len = MIN ((gsize) (end - p), 24);
  char *s = g_strndup (p, len);
  for (gsize i = 0; i < len; i++)
    if (!g_ascii_isprint (s[i]))
      s[i] = '?';
  if ((gsize) (end - p) > len)
    {
      char *longer = g_strconcat (s, "...", NULL);
      g_free (s);
      s = longer;
    }
  return s;
}

/* Parses one line (without its end of line) into the rows; on a malformed line sets
 * `what` (without file and line) and returns FALSE, adding nothing. */
static gboolean
parse_line (const char *line, const char *end, Rows *rows, char **what)
{
  const char *start[CRITEO_FIELDS + 1];
  float label, dense[KS_CRITEO_DENSE];
  guint64 ids[KS_CRITEO_SLOTS];
  gsize n_fields = 0;
  const char *p = line;

  /* split first: a wrong field count is the likeliest fault and names itself best */
  for (;;)
    {
      const char *tab = memchr (p, '\t', end - p);
      if (n_fields < CRITEO_FIELDS)
        start[n_fields] = p;
      n_fields++;
      if (tab == NULL)
        break;
      p = tab + 1;
    }
  if (n_fields != CRITEO_FIELDS)
    {
      *what = g_strdup_printf ("has %" G_GSIZE_FORMAT " fields, a Criteo line has %d: label, "
                               "%d integers, %d categorical (tab-separated, empty allowed)",
                               n_fields, CRITEO_FIELDS, KS_CRITEO_DENSE, KS_CRITEO_SLOTS);
      return FALSE;
    }
  start[CRITEO_FIELDS] = end + 1; /* each field ends one byte before the next starts */

  if (start[1] - start[0] != 2 || (start[0][0] != '0' && start[0][0] != '1'))
    {
      g_autofree char *bad = shown (start[0], start[1] - 1);
      *what = g_strdup_printf ("has label '%s', a Criteo label is 0 or 1", bad);
      return FALSE;
    }
  label = start[0][0] == '1' ? 1.0f : 0.0f;

  for (int k = 0; k < KS_CRITEO_DENSE; k++)
    {
      const char *a = start[1 + k], *b = start[2 + k] - 1;
      gint64 x = 0;
      if (a != b && !parse_int (a, b, &x))
        {
          g_autofree char *bad = shown (a, b);
          *what = g_strdup_printf ("field %d (%s) is '%s', not a decimal integer (or empty)",
                                   2 + k, field_names[1 + k], bad);
          return FALSE;
        }
      dense[k] = x <= 0 ? 0.0f : x < LOG_TABLE ? log_table[x] : (float) log1p ((double) x);
    }

  for (int c = 0; c < KS_CRITEO_SLOTS; c++)
    {
      int f = 1 + KS_CRITEO_DENSE + c;
      const char *a = start[f], *b = start[f + 1] - 1;
      if (a == b)
        {
          ids[c] = 0;
          continue;
        }
      if (!is_hex (a, b))
        {
          g_autofree char *bad = shown (a, b);
          *what = g_strdup_printf ("field %d (%s) is '%s', not 1 to 16 hex digits (or empty)",
                                   f + 1, field_names[f], bad);
          return FALSE;
        }
      ids[c] = ks_criteo_feasign (c, a, b - a);
    }

  g_array_append_val (rows->labels, label);
  g_array_append_vals (rows->dense, dense, KS_CRITEO_DENSE);
  g_array_append_vals (rows->ids, ids, KS_CRITEO_SLOTS);
  rows->n++;
  return TRUE;
}

static gboolean
load_file (const char *path, Rows *rows, gboolean skip_bad, gsize *skipped, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (GMappedFile) file = g_mapped_file_new (path, FALSE, &local);
  const char *p, *end;
  gsize line_no = 0;

  if (file == NULL)
    {
      g_set_error (error, G_FILE_ERROR, local->code, "cannot read Criteo data: %s",
                   local->message);
      return FALSE;
    }
  p = g_mapped_file_get_contents (file);
  end = p + g_mapped_file_get_length (file);
  if (p == NULL) /* an empty file maps to nothing */
    return TRUE;
  while (p < end)
    {
      const char *nl = memchr (p, '\n', end - p);
      const char *stop = nl != NULL ? nl : end;
      const char *next = nl != NULL ? nl + 1 : end;
      char *what = NULL;

      line_no++;
      if (stop > p && stop[-1] == '\r')
        stop--;
      if (stop > p && !parse_line (p, stop, rows, &what))
        {
          if (!skip_bad)
            {
              g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                           "%s:%" G_GSIZE_FORMAT ": %s; fix or delete the line, or skip "
                           "malformed lines",
                           path, line_no, what);
              g_free (what);
              return FALSE;
            }
          g_free (what);
          (*skipped)++;
        }
      p = next;
    }
  return TRUE;
}

KsCriteo *
ks_criteo_load (const char *const *paths, gsize n_paths, gboolean skip_bad, GError **error)
{
  static GOnce once = G_ONCE_INIT;
  Rows rows;
  gsize skipped = 0;
  KsCriteo *data;

  g_once (&once, init_log_table, NULL);
  rows.labels = g_array_new (FALSE, FALSE, sizeof (float));
  rows.dense = g_array_new (FALSE, FALSE, sizeof (float));
  rows.ids = g_array_new (FALSE, FALSE, sizeof (guint64));
  rows.n = 0;
  for (gsize i = 0; i < n_paths; i++)
    if (!load_file (paths[i], &rows, skip_bad, &skipped, error))
      goto fail;
  if (rows.n == 0)
    {
      g_autoptr (GString) names = g_string_new (NULL);
      for (gsize i = 0; i < n_paths && i < 4; i++)
        g_string_append_printf (names, "%s%s", i > 0 ? ", " : "", paths[i]);
      if (n_paths > 4)
        g_string_append_printf (names, " and %" G_GSIZE_FORMAT " more", n_paths - 4);
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "no Criteo samples in %s (%" G_GSIZE_FORMAT " malformed lines skipped): "
                   "give files of lines 'label<TAB>I1..I13<TAB>C1..C26'",
                   n_paths > 0 ? names->str : "no files", skipped);
      goto fail;
    }
  data = g_new0 (KsCriteo, 1);
  data->n = rows.n;
  data->skipped = skipped;
  data->labels = (float *) g_array_free (rows.labels, FALSE);
  data->dense = (float *) g_array_free (rows.dense, FALSE);
  data->ids = (guint64 *) g_array_free (rows.ids, FALSE);
  return data;

fail:
  g_array_free (rows.labels, TRUE);
  g_array_free (rows.dense, TRUE);
  g_array_free (rows.ids, TRUE);
  return NULL;
}

void
ks_criteo_free (KsCriteo *data)
{
  if (data == NULL)
    return;
  g_free (data->labels);
  g_free (data->dense);
  g_free (data->ids);
  g_free (data);
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

char **
ks_data_dir_files (const char *dir, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (GDir) d = g_dir_open (dir, 0, &local);
  g_autoptr (GPtrArray) files = NULL;
  const char *name;

  if (d == NULL)
    {
      g_set_error (error, G_FILE_ERROR, local->code, "cannot list the data directory: %s",
                   local->message);
      return NULL;
    }
  files = g_ptr_array_new_with_free_func (g_free);
  while ((name = g_dir_read_name (d)) != NULL)
    {
      char *path;
      if (name[0] == '.')
        continue;
      path = g_build_filename (dir, name, NULL);
      if (g_file_test (path, G_FILE_TEST_IS_REGULAR))
        g_ptr_array_add (files, path);
      else if (g_file_test (path, G_FILE_TEST_IS_SYMLINK))
        {
          /* a part file whose link broke: training on the others would drop its samples
           * without a word */
          g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT,
                       "%s is a link to nothing (its target is gone): restore the part file "
                       "it pointed to, or remove the link", path);
          g_free (path);
          return NULL;
        }
      else
        g_free (path);
    }
  if (files->len == 0)
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT,
                   "the data directory %s holds no data files (regular files whose names do "
                   "not start with '.'): give the directory of the part files",
                   dir);
      return NULL;
    }
  g_ptr_array_sort (files, compare_names);
  g_ptr_array_set_free_func (files, NULL);
  g_ptr_array_add (files, NULL);
  return (char **) g_ptr_array_free (g_steal_pointer (&files), FALSE);
}

/* ---- the streaming AUC ---- */

struct KsAuc {
  gsize buckets;
  double *counts; /* [buckets] positives, then [buckets] negatives */
};

KsAuc *
ks_auc_new (gsize buckets)
{
  KsAuc *auc;

  g_return_val_if_fail (buckets > 0, NULL);
  auc = g_new (KsAuc, 1);
  auc->buckets = buckets;
  auc->counts = g_new0 (double, 2 * buckets);
  return auc;
}

void
ks_auc_free (KsAuc *auc)
{
  if (auc == NULL)
    return;
  g_free (auc->counts);
  g_free (auc);
}

void
ks_auc_reset (KsAuc *auc)
{
  memset (auc->counts, 0, 2 * auc->buckets * sizeof (double));
}

/* Bucket of p: floor (p * buckets), with p = 1 in the top bucket (Paddle gives it one of
 * its own: num_thresholds + 1 buckets) and values outside [0, 1] (or NaN) clamped. */
void
ks_auc_add (KsAuc *auc, const float *predictions, const float *labels, gsize n)
{
  const double top = (double) auc->buckets;

  for (gsize i = 0; i < n; i++)
    {
      double x = (double) predictions[i] * top;
      gsize b = x >= top ? auc->buckets - 1 : x > 0 ? (gsize) x : 0;
      auc->counts[labels[i] > 0.5f ? b : auc->buckets + b] += 1.0;
    }
}

double *
ks_auc_counts (KsAuc *auc, gsize *n)
{
  if (n != NULL)
    *n = 2 * auc->buckets;
  return auc->counts;
}

/* Paddle's calcAuc: from the highest threshold down, the ROC curve's trapezoid between
 * consecutive (false positives, true positives) points; ties in a bucket count half. */
double
ks_auc_value (const KsAuc *auc)
{
  const double *pos = auc->counts, *neg = auc->counts + auc->buckets;
  double area = 0, tot_pos = 0, tot_neg = 0;

  for (gsize i = auc->buckets; i-- > 0;)
    {
      double pos_prev = tot_pos, neg_prev = tot_neg;
      tot_pos += pos[i];
      tot_neg += neg[i];
      area += (tot_neg - neg_prev) * (tot_pos + pos_prev) / 2;
    }
  if (tot_pos <= 0 || tot_neg <= 0)
    return 0.5;
  return area / (tot_pos * tot_neg);
}

double
ks_auc_samples (const KsAuc *auc)
{
  double sum = 0;
  for (gsize i = 0; i < 2 * auc->buckets; i++)
    sum += auc->counts[i];
  return sum;
}
