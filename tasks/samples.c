/* Where a supervised task's samples come from: points generated in the plane (spirals,
 * rings). */
#include "samples.h"

#include <string.h>

const char *const *
sample_set_settings (const KsConfig *c)
{
  static const char *const points[] = { "data.task", "data.samples", "data.seed", "data.noise",
                                        NULL };
  (void) c;
  return points;
}

gboolean
sample_set_check (const KsConfig *c, gboolean regression, GError **error)
{
  if (regression)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[model] loss = mse needs values to predict, but [data] task = %s gives "
                   "classes: use loss = cross_entropy", ks_config_get_string (c, "data", "task"));
      return FALSE;
    }
  return TRUE;
}

/* n generated points of `task` from `seed` */
static void
generate (SampleSet *s, const char *name, KsTask task, gsize n, double noise, guint64 seed)
{
  s->source = g_strdup (name);
  s->n = n;
  s->generated = TRUE;
  s->ndim = 1;
  s->shape[0] = 2;
  s->x_bytes = 2 * sizeof (float);
  s->y_bytes = sizeof (gint64);
  s->outputs = ks_task_classes (task);
  s->x = g_malloc (n * s->x_bytes);
  s->y = g_malloc (n * s->y_bytes);
  ks_task_generate (task, n, noise, seed, (float *) s->x, (gint64 *) s->y);
}

gboolean
sample_set_load (SampleSet *train, SampleSet *eval, const KsConfig *c, gboolean regression,
                 gsize batch, GError **error)
{
  KsTask task;
  const char *name = ks_config_get_string (c, "data", "task");
  gsize n = ks_config_get_int (c, "data", "samples");
  guint64 seed = ks_config_get_int (c, "data", "seed");
  double noise = ks_config_get_double (c, "data", "noise");

  if (!sample_set_check (c, regression, error))
    return FALSE;
  ks_task_from_name (name, &task); /* a checked choice */
  generate (train, name, task, n, noise, seed);
  /* a quarter as many held out, in whole batches */
  generate (eval, name, task, MAX (1, n / batch / 4) * batch, noise, seed + 1);
  return TRUE;
}

void
sample_set_clear (SampleSet *s)
{
  g_free (s->source);
  g_free (s->x);
  g_free (s->y);
  memset (s, 0, sizeof *s);
}
