/* ksdist — 16-bit floats as stored by mixed precision: bfloat16 and IEEE binary16.
 *
 * For compute backend authors (the rounding every backend must match) and programs reading
 * 16-bit tensors.
 *
 * Both are kept as raw 16-bit patterns (guint16). Conversions from float32 round to
 * nearest, ties to even; binary16 overflows to infinity past 65504 and keeps subnormals;
 * NaN stays NaN. Every backend rounds the same way, so the CPU plugin's mixed precision
 * is what a GPU's would compute from the same operands. */
#ifndef KSDIST_HALF_H
#define KSDIST_HALF_H

#include <glib.h>
#include <string.h>

G_BEGIN_DECLS

static inline guint32
ks_float_bits (float x)
{
  guint32 u;
  memcpy (&u, &x, sizeof u);
  return u;
}

static inline float
ks_bits_float (guint32 u)
{
  float x;
  memcpy (&x, &u, sizeof x);
  return x;
}

static inline guint16
ks_float_to_bf16 (float x)
{
  guint32 u = ks_float_bits (x);
  if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet, never round to infinity */
    return (guint16) ((u >> 16) | 0x40);
  return (guint16) ((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

static inline float
ks_bf16_to_float (guint16 h)
{
  return ks_bits_float ((guint32) h << 16);
}

static inline guint16
ks_float_to_fp16 (float x)
{
  guint32 u = ks_float_bits (x);
  guint16 sign = (guint16) ((u >> 16) & 0x8000u);
  guint32 a = u & 0x7fffffffu;

  if (a > 0x7f800000u)
    return sign | 0x7e00u; /* NaN */
  if (a >= 0x477ff000u)
    return sign | 0x7c00u; /* at or past 65520 (65504 plus half a step): infinity */
  if (a < 0x38800000u)
    {
      /* below 2^-14: a subnormal, counted in steps of 2^-24, rounded to nearest even */
      if (a < 0x33000000u)
        return sign; /* below half the smallest subnormal: zero */
      guint32 mant = (a & 0x7fffffu) | 0x800000u;
      int shift = 126 - (int) (a >> 23); /* 14 to 24 */
      guint32 q = mant >> shift, rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
      q += rest > half || (rest == half && (q & 1));
      return sign | (guint16) q;
    }
  /* normal: rebias the exponent, round the 13 dropped bits to nearest even (a carry into
   * the exponent is the right result) */
  a += ((guint32) (15 - 127) << 23) + 0xfffu + ((a >> 13) & 1);
  return sign | (guint16) (a >> 13);
}

static inline float
ks_fp16_to_float (guint16 h)
{
  guint32 sign = (guint32) (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;

  if (e == 0x1f)
    return ks_bits_float (sign | 0x7f800000u | (m << 13)); /* infinity, NaN */
  if (e != 0)
    return ks_bits_float (sign | ((e + 127 - 15) << 23) | (m << 13));
  /* zero or subnormal: m * 2^-24 exactly */
  float v = (float) m * (1.0f / 16777216.0f);
  return sign ? -v : v;
}

G_END_DECLS

#endif
