/* Generated classification tasks in the plane. */
#include "ks-private.h"

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
