/* Passes over floats (floats.h). -O2 (GCC 12) vectorizes only loops whose count is a
 * multiple of the vector width, so these are vectorized here explicitly: each was a
 * scalar loop of about 1 ms per 7 MB on the sync step's path. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include "floats.h"

#include <math.h>
#include <string.h>

enum { CHUNK = 4096 };

gsize
ps_floats_nonfinite (const float *v, gsize n)
{
  for (gsize start = 0; start < n; start += CHUNK)
    {
      gsize end = MIN (n, start + CHUNK);
      gint32 bad = 0;
      /* NaN and infinity have every exponent bit set: a compare and an or per float */
      for (gsize i = start; i < end; i++)
        {
          gint32 bits;
          memcpy (&bits, v + i, sizeof bits);
          bad |= (bits & 0x7fffffff) >= 0x7f800000;
        }
      if (bad)
        for (gsize i = start; i < end; i++)
          if (!isfinite (v[i]))
            return i;
    }
  return n;
}

double
ps_floats_norm (const float *v, gsize n)
{
  /* eight sums: independent chains the compiler may put in vectors (one sum would wait on
   * each addition's latency) */
  double acc[8] = { 0 }, sum = 0;
  gsize i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++)
      acc[j] += (double) v[i + j] * v[i + j];
  for (; i < n; i++)
    sum += (double) v[i] * v[i];
  for (int j = 0; j < 8; j++)
    sum += acc[j];
  return sqrt (sum);
}

void
ps_floats_add (float *restrict dst, const float *restrict src, gsize n)
{
  for (gsize i = 0; i < n; i++)
    dst[i] += src[i];
}

void
ps_floats_divide (float *v, gsize n, float d)
{
  for (gsize i = 0; i < n; i++)
    v[i] /= d;
}
