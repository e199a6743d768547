/* The in-memory table: freeing, a held-out split, per-feature moments. */
#include "table-private.h"

#include <math.h>
#include <string.h>

void
ks_table_free (KsTable *t)
{
  if (t == NULL)
    return;
  g_free (t->path);
  g_free (t->x);
  g_free (t->y);
  g_free (t->target);
  g_strfreev (t->class_names);
  g_strfreev (t->feature_names);
  g_free (t);
}

KsTable *
ks_table_alloc (const char *path, gsize rows, gsize features, gboolean regression,
                GError **error)
{
  gsize floats, bytes;
  KsTable *t;

  /* the sizes come from the file: rows * features * 4 must fit before any allocation */
  if (!g_size_checked_mul (&floats, rows, features)
      || !g_size_checked_mul (&bytes, floats, sizeof (float)) || rows > G_MAXSIZE / 8)
    return ks_table_bad (error, "%s: %" G_GSIZE_FORMAT " rows of %" G_GSIZE_FORMAT
                         " features do not fit in memory", path, rows, features);
  t = g_new0 (KsTable, 1);
  t->path = g_strdup (path);
  t->rows = rows;
  t->features = features;
  t->regression = regression;
  t->x = g_try_malloc (MAX (bytes, 1));
  if (regression)
    t->target = g_try_new (float, MAX (rows, 1));
  else
    t->y = g_try_new (gint64, MAX (rows, 1));
  if (t->x == NULL || (t->target == NULL && t->y == NULL))
    {
      ks_table_free (t);
      return ks_table_bad (error, "%s: no memory for %" G_GSIZE_FORMAT " rows of %"
                           G_GSIZE_FORMAT " features", path, rows, features);
    }
  return t;
}

/* A table of t's rows where in[r] == want, its labels' meaning kept. */
static KsTable *
subset (const KsTable *t, const gboolean *in, gboolean want, gsize rows)
{
  KsTable *s = ks_table_alloc (t->path, rows, t->features, t->regression, NULL);
  gsize k = 0;

  g_assert (s != NULL); /* no larger than t */
  s->ndim = t->ndim;
  memcpy (s->shape, t->shape, sizeof s->shape);
  s->classes = t->classes;
  s->class_names = g_strdupv (t->class_names);
  s->feature_names = g_strdupv (t->feature_names);
  for (gsize r = 0; r < t->rows; r++)
    if (in[r] == want)
      {
        memcpy (s->x + k * t->features, t->x + r * t->features, t->features * sizeof (float));
        if (t->regression)
          s->target[k] = t->target[r];
        else
          s->y[k] = t->y[r];
        k++;
      }
  return s;
}

/* splitmix64's finaliser: a row's place in the split is a function of (seed, index) only,
 * so the same row goes to the same side whatever the table's other rows. */
static guint64
mix (guint64 z)
{
  z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

gboolean
ks_table_held_out (guint64 seed, gsize file, gsize row, double fraction)
{
  guint64 h = mix (mix (seed + G_GUINT64_CONSTANT (0x9e3779b97f4a7c15)) ^ (guint64) row);
  if (file > 0)
    h = mix (h + file);
  return (double) (h >> 11) * 0x1p-53 < fraction;
}

gboolean
ks_table_split (const KsTable *t, double fraction, guint64 seed, KsTable **train,
                KsTable **test, GError **error)
{
  g_autofree gboolean *in_test = NULL;
  gsize n_test = 0;

  g_return_val_if_fail (t != NULL && train != NULL && test != NULL, FALSE);
  if (!(fraction > 0 && fraction < 1))
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "%s: a held-out fraction of %g; it must be above 0 and below 1", t->path,
                   fraction);
      return FALSE;
    }
  in_test = g_new (gboolean, MAX (t->rows, 1));
  for (gsize r = 0; r < t->rows; r++)
    n_test += in_test[r] = ks_table_held_out (seed, 0, r, fraction);
  if (n_test == 0 || n_test == t->rows)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "%s: holding out a fraction %g of %" G_GSIZE_FORMAT " rows leaves the %s "
                   "part empty; use more rows or a %s fraction", t->path, fraction, t->rows,
                   n_test == 0 ? "test" : "training", n_test == 0 ? "larger" : "smaller");
      return FALSE;
    }
  *test = subset (t, in_test, TRUE, n_test);
  *train = subset (t, in_test, FALSE, t->rows - n_test);
  return TRUE;
}

void
ks_table_moments_of (KsRowGetter get, gconstpointer data, gsize rows, gsize f, float *x,
                     float *mean, float *std)
{
  g_autofree double *sum = g_new0 (double, MAX (f, 1));
  g_autofree double *sq = g_new0 (double, MAX (f, 1));

  /* two passes in double: the mean first, then squares about it (no cancellation) */
  for (gsize r = 0; r < rows; r++)
    {
      get (data, r, x);
      for (gsize j = 0; j < f; j++)
        sum[j] += x[j];
    }
  for (gsize j = 0; j < f; j++)
    sum[j] = rows ? sum[j] / rows : 0;
  for (gsize r = 0; r < rows; r++)
    {
      get (data, r, x);
      for (gsize j = 0; j < f; j++)
        {
          double d = x[j] - sum[j];
          sq[j] += d * d;
        }
    }
  for (gsize j = 0; j < f; j++)
    {
      mean[j] = (float) sum[j];
      std[j] = rows ? MAX ((float) sqrt (sq[j] / rows), KS_TABLE_STD_FLOOR) : 1;
    }
}

static void
table_row (gconstpointer data, gsize r, float *out)
{
  const KsTable *t = data;
  memcpy (out, t->x + r * t->features, t->features * sizeof (float));
}

void
ks_table_moments (const KsTable *t, float *mean, float *std)
{
  g_autofree float *x = g_new (float, MAX (t->features, 1));
  ks_table_moments_of (table_row, t, t->rows, t->features, x, mean, std);
}

void
ks_table_standardize_row (float *x, gsize f, const float *mean, const float *std)
{
  for (gsize j = 0; j < f; j++)
    x[j] = (x[j] - mean[j]) / std[j];
}

void
ks_table_standardize (KsTable *t, const float *mean, const float *std)
{
  for (gsize r = 0; r < t->rows; r++)
    ks_table_standardize_row (t->x + r * t->features, t->features, mean, std);
}
