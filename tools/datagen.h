/* ksdist datagen: what its kinds of data share (cmd-datagen.c: ctr and the command;
 * datagen-glyphs.c; datagen-images.c). */
#ifndef KS_DATAGEN_H
#define KS_DATAGEN_H

#include "cli.h"

#include <math.h>
#include <stdio.h>

/* ---- randomness: xoshiro256** for draws, splitmix64 for hashes (both fixed forever,
 * so a seed gives the same bytes on every machine) ---- */

static inline guint64
mix64 (guint64 z)
{
  z += G_GUINT64_CONSTANT (0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

typedef struct {
  guint64 s[4];
} Rng;

static inline void
rng_seed (Rng *r, guint64 seed, guint64 stream)
{
  guint64 z = mix64 (seed) ^ mix64 (stream + 0x1234);
  for (int i = 0; i < 4; i++)
    r->s[i] = z = mix64 (z);
}

static inline guint64
rotl (guint64 x, int k)
{
  return (x << k) | (x >> (64 - k));
}

static inline guint64
rng_next (Rng *r)
{
  guint64 *s = r->s, result = rotl (s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl (s[3], 45);
  return result;
}

/* uniform in [0, 1) */
static inline double
rng_uniform (Rng *r)
{
  return (rng_next (r) >> 11) * 0x1.0p-53;
}

static inline double
rng_normal (Rng *r)
{
  double u1 = 1.0 - rng_uniform (r), u2 = rng_uniform (r);
  return sqrt (-2.0 * log (u1)) * cos (2 * G_PI * u2);
}

/* Options of the image sets (glyphs, images). */
typedef struct {
  gint64 seed;
  int per_class;  /* images of each class */
  int alphabets;  /* glyphs: scripts kept (0: all); images: classes in all */
  int classes;    /* glyphs: characters a script at most (0: all) */
  gboolean force; /* replace DIR's train, val and test */
} DatagenImageOptions;

/* DIR made for an image set: refused if it holds train, val or test already, unless
 * `force` (then they are removed); FALSE after saying why. */
gboolean datagen_prepare_image_dir (const char *dir, gboolean force);

int datagen_glyphs (const char *dir, const DatagenImageOptions *o);
/* A text's bytes as token files (llm.c's shard layout). */
int datagen_tokens (const char *dir, const char *text);
/* MNIST-like digits, 0 to classes - 1 (10: all): `format` idx (MNIST's files), npy, csv
 * or folder. */
int datagen_digits (const char *dir, gint64 train, gint64 test, gint64 seed,
                    const char *format, int classes);
int datagen_images (const char *dir, const DatagenImageOptions *o);

#endif
