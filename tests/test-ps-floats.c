/* The parameter servers' passes over floats (plugins/ps/floats.c) against plain loops:
 * the vectorized checks find the first NaN or infinity wherever it lies (chunk edges,
 * tails), never a finite float, and the sums the sync step applies are bitwise a loop's. */
#include "../plugins/ps/floats.h"

#include <float.h>
#include <math.h>
#include <string.h>

static const gsize sizes[] = { 0, 1, 7, 8, 9, 4095, 4096, 4097, 8193, 100003 };

static float *
random_floats (GRand *rng, gsize n)
{
  float *v = g_new (float, MAX (n, 1));
  for (gsize i = 0; i < n; i++)
    v[i] = (float) g_rand_double_range (rng, -3, 3);
  return v;
}

static void
test_nonfinite (void)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (7);
  const float bad[] = { NAN, -NAN, INFINITY, -INFINITY };
  for (gsize k = 0; k < G_N_ELEMENTS (sizes); k++)
    {
      gsize n = sizes[k];
      g_autofree float *v = random_floats (rng, n);
      /* the largest finite floats and subnormals are finite */
      if (n > 2)
        {
          v[0] = FLT_MAX;
          v[1] = -FLT_MAX;
          v[n - 1] = FLT_MIN / 4;
        }
      g_assert_cmpuint (ps_floats_nonfinite (v, n), ==, n);
      const gsize at[] = { 0, n / 2, 4095, 4096, n - 1 };
      for (gsize a = 0; a < G_N_ELEMENTS (at); a++)
        for (gsize b = 0; b < G_N_ELEMENTS (bad); b++)
          {
            gsize i = at[a];
            if (i >= n)
              continue;
            float keep = v[i];
            v[i] = bad[b];
            g_assert_cmpuint (ps_floats_nonfinite (v, n), ==, i);
            if (i + 1 < n) /* the first of two */
              {
                float next = v[n - 1];
                v[n - 1] = NAN;
                g_assert_cmpuint (ps_floats_nonfinite (v, n), ==, i);
                v[n - 1] = next;
              }
            v[i] = keep;
          }
    }
}

/* runs one check on every size, each test with its own seed so a failure replays */
static void
each_size (guint32 seed, void (*check) (GRand *rng, gsize n))
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed);
  for (gsize k = 0; k < G_N_ELEMENTS (sizes); k++)
    check (rng, sizes[k]);
}

static void
check_norm (GRand *rng, gsize n)
{
  g_autofree float *v = random_floats (rng, n);
  double sum = 0;
  for (gsize i = 0; i < n; i++)
    sum += (double) v[i] * v[i];
  double want = sqrt (sum), got = ps_floats_norm (v, n);
  g_assert_cmpfloat (fabs (got - want), <=, 1e-12 * MAX (want, 1));
}

static void
test_norm (void)
{
  each_size (11, check_norm);
}

/* the sync step's sum and mean, bitwise as sum[i] += g[i]; sum[i] /= W */
static void
check_add_divide (GRand *rng, gsize n)
{
  g_autofree float *a = random_floats (rng, n);
  g_autofree float *b = random_floats (rng, n);
  g_autofree float *want = g_memdup2 (a, MAX (n, 1) * sizeof (float));
  for (gsize i = 0; i < n; i++)
    want[i] += b[i];
  for (gsize i = 0; i < n; i++)
    want[i] /= 3;
  ps_floats_add (a, b, n);
  ps_floats_divide (a, n, 3.0f);
  g_assert_cmpmem (a, n * sizeof (float), want, n * sizeof (float));
}

static void
test_add_divide (void)
{
  each_size (13, check_add_divide);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/ps-floats/nonfinite", test_nonfinite);
  g_test_add_func ("/ps-floats/norm", test_norm);
  g_test_add_func ("/ps-floats/add-divide", test_add_divide);
  return g_test_run ();
}
