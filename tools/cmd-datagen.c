/* ksdist datagen ctr: synthetic click data in the Criteo format, labelled by a hidden
 * "teacher" whose own test AUC is the best any model can reach.
 *
 * Features. Slot c (of 26) draws an id from a bounded Zipf law over 1 .. V_c with
 * exponent S (id 1 the most frequent), V_c = V / 100^f_c with f_c spread over [0, 1] by
 * slot, and is empty with a slot's probability between 0 and 20%. An id is written as the
 * 8 hex digits of a bijective 32-bit mix of (slot, id). The 13 integers are log-normal
 * counts (about 10% empty; I2 is sometimes -1 or -2, as in Criteo).
 *
 * Teacher. logit = bias + g * (a1 * sum_c w(c, id_c)
 *                              + a2 * sum_{c < c'} <v(c, id_c), v(c', id_c')>
 *                              + a3 * sum_k u_k log (1 + max (x_k, 0)))
 * w, v and u are pure functions of (seed, slot, id): a hash made Gaussian. Per-id weights
 * are damped by 1 / sqrt (1 + (id - 1) / 50), so the frequent ids that a model sees often
 * carry most of the signal. a1..a3 give the three terms 55%, 20% and 25% of the variance
 * on a calibration sample; then g is set by bisection for an expected AUC of 0.78 and the
 * bias for a mean click probability of 0.25. label ~ Bernoulli (sigmoid (logit)). */
#include <config.h>

#include "datagen.h"
#include <ksdist/tasks.h>

#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SLOTS = KS_CRITEO_SLOTS, DENSE = KS_CRITEO_DENSE, CALIBRATION = 20000 };
#define TARGET_AUC 0.78
#define TARGET_CTR 0.25
#define DAMP_RANK 50.0
#define MAX_VOCAB 10000000
#define MAX_FACTORS 64

/* A standard normal-like value from a hash: four 16-bit uniforms summed (Irwin-Hall),
 * mean 0 and variance 1; cheap enough for 130 per sample. */
static inline double
hash_gauss (guint64 h)
{
  double sum = (double) (h & 0xffff) + (double) ((h >> 16) & 0xffff)
               + (double) ((h >> 32) & 0xffff) + (double) (h >> 48);
  return (sum / 65536.0 - 2.0) * 1.7320508075688772;
}

/* ---- the teacher and its features ---- */

typedef struct {
  guint64 seed_hash;
  int factors;
  gint64 vocab[SLOTS];
  double *cdf[SLOTS]; /* [vocab]: P(id <= i + 1) */
  double empty[SLOTS];
  double importance[SLOTS];
  double dense_mu[DENSE], dense_sigma[DENSE], dense_empty[DENSE], u[DENSE];
  double scale[3]; /* a1..a3 times g */
  double bias;
} Teacher;

typedef struct {
  guint32 id[SLOTS]; /* 0: empty */
  gint64 x[DENSE];
  gboolean present[DENSE];
} Sample;

static void
teacher_init (Teacher *t, guint64 seed, gint64 vocab, double zipf, int factors)
{
  memset (t, 0, sizeof *t);
  t->seed_hash = mix64 (seed ^ G_GUINT64_CONSTANT (0x5851f42d4c957f2d));
  t->factors = factors;
  for (int c = 0; c < SLOTS; c++)
    {
      double f = ((c * 11) % SLOTS) / (double) (SLOTS - 1);
      double norm = 0;
      t->vocab[c] = MAX (1, (gint64) llround (vocab * pow (0.01, f)));
      t->empty[c] = 0.2 * ((c * 7) % SLOTS) / (SLOTS - 1);
      t->importance[c] = 0.3 + 0.7 * (mix64 (t->seed_hash ^ (0xc0ffee + c)) >> 11) * 0x1.0p-53;
      t->cdf[c] = g_new (double, t->vocab[c]);
      for (gint64 i = 0; i < t->vocab[c]; i++)
        t->cdf[c][i] = norm += pow ((double) (i + 1), -zipf);
      for (gint64 i = 0; i < t->vocab[c]; i++)
        t->cdf[c][i] /= norm;
      t->cdf[c][t->vocab[c] - 1] = 1.0;
    }
  for (int k = 0; k < DENSE; k++)
    {
      t->dense_mu[k] = 0.5 + 0.25 * k;
      t->dense_sigma[k] = 1.0 + 0.05 * k;
      t->dense_empty[k] = 0.04 + 0.02 * (k % 7);
      t->u[k] = hash_gauss (mix64 (t->seed_hash ^ (0xdea1 + k)));
    }
}

static void
teacher_clear (Teacher *t)
{
  for (int c = 0; c < SLOTS; c++)
    g_clear_pointer (&t->cdf[c], g_free);
}

static void
draw_sample (const Teacher *t, Rng *r, Sample *s)
{
  for (int c = 0; c < SLOTS; c++)
    {
      double u = rng_uniform (r);
      const double *cdf = t->cdf[c];
      gint64 lo = 0, hi = t->vocab[c] - 1;
      if (rng_uniform (r) < t->empty[c])
        {
          s->id[c] = 0;
          continue;
        }
      while (lo < hi) /* the first i with cdf[i] > u */
        {
          gint64 mid = (lo + hi) / 2;
          if (cdf[mid] > u)
            hi = mid;
          else
            lo = mid + 1;
        }
      s->id[c] = (guint32) (lo + 1);
    }
  for (int k = 0; k < DENSE; k++)
    {
      double u = rng_uniform (r);
      s->present[k] = u >= t->dense_empty[k];
      if (!s->present[k])
        s->x[k] = 0;
      else if (k == 1 && u > 0.97) /* Criteo's I2 has a few negatives */
        s->x[k] = u > 0.995 ? -2 : -1;
      else
        s->x[k] = MAX (0, (gint64) floor (exp (MIN (t->dense_mu[k] + t->dense_sigma[k] * rng_normal (r),
                                                     20.0))) - 1);
    }
}

/* The three raw terms of the logit: first-order, pairwise, dense. */
static void
teacher_terms (const Teacher *t, const Sample *s, double terms[3])
{
  double sum_v[MAX_FACTORS] = { 0 }, sum_sq = 0, first = 0, pair = 0, dense = 0;
  int K = t->factors;

  for (int c = 0; c < SLOTS; c++)
    {
      if (s->id[c] == 0)
        continue;
      guint64 h = mix64 (t->seed_hash ^ ((guint64) (c + 1) << 40) ^ s->id[c]);
      double damp = 1.0 / sqrt (1.0 + (s->id[c] - 1) / DAMP_RANK);
      first += t->importance[c] * damp * hash_gauss (mix64 (h));
      for (int f = 0; f < K; f++)
        {
          double v = damp * hash_gauss (mix64 (h + (guint64) (f + 1) * 0x9e3779b97f4a7c15));
          sum_v[f] += v;
          sum_sq += v * v;
        }
    }
  for (int f = 0; f < K; f++) /* sum over pairs = (|sum v|^2 - sum |v|^2) / 2 */
    pair += sum_v[f] * sum_v[f];
  pair = (pair - sum_sq) / 2 / sqrt ((double) K);
  for (int k = 0; k < DENSE; k++)
    dense += t->u[k] * log1p ((double) MAX (s->x[k], 0));
  terms[0] = first;
  terms[1] = pair;
  terms[2] = dense;
}

static inline double
teacher_logit (const Teacher *t, const Sample *s)
{
  double terms[3];
  teacher_terms (t, s, terms);
  return t->bias + t->scale[0] * terms[0] + t->scale[1] * terms[1] + t->scale[2] * terms[2];
}

static inline double
sigmoid (double z)
{
  return 1.0 / (1.0 + exp (-z));
}

static int
compare_doubles (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

/* The bias giving a mean probability of TARGET_CTR to scores g * raw. */
static double
calibrate_bias (const double *raw, gsize n, double g)
{
  double lo = -30, hi = 30;
  for (int it = 0; it < 50; it++)
    {
      double mid = (lo + hi) / 2, mean = 0;
      for (gsize i = 0; i < n; i++)
        mean += sigmoid (mid + g * raw[i]);
      if (mean / n > TARGET_CTR)
        hi = mid;
      else
        lo = mid;
    }
  return (lo + hi) / 2;
}

/* The AUC expected of the teacher on samples with scores `sorted` (ascending): the
 * expected count of correctly ordered (positive, negative) pairs over that of pairs. */
static double
expected_auc (const double *sorted, gsize n, double g, double bias)
{
  double below_neg = 0, right = 0, sum_p = 0, sum_q = 0, self = 0;
  for (gsize i = 0; i < n; i++)
    {
      double p = sigmoid (bias + g * sorted[i]);
      right += p * below_neg;
      below_neg += 1 - p;
      sum_p += p;
      sum_q += 1 - p;
      self += p * (1 - p);
    }
  return right / (sum_p * sum_q - self);
}

/* Sets the term weights, the gain and the bias from a calibration sample of its own
 * random stream (so the data's stream does not depend on it). */
static void
teacher_calibrate (Teacher *t, guint64 seed)
{
  g_autofree double *terms = g_new (double, 3 * CALIBRATION);
  g_autofree double *raw = g_new (double, CALIBRATION);
  const double share[3] = { 0.55, 0.20, 0.25 };
  double lo = 0, hi = 16, g = 1;
  Sample s;
  Rng r;

  rng_seed (&r, seed, 1);
  for (gsize i = 0; i < CALIBRATION; i++)
    {
      draw_sample (t, &r, &s);
      teacher_terms (t, &s, terms + 3 * i);
    }
  for (int j = 0; j < 3; j++)
    {
      double mean = 0, var = 0;
      for (gsize i = 0; i < CALIBRATION; i++)
        mean += terms[3 * i + j];
      mean /= CALIBRATION;
      for (gsize i = 0; i < CALIBRATION; i++)
        var += (terms[3 * i + j] - mean) * (terms[3 * i + j] - mean);
      var /= CALIBRATION;
      /* a term without variance (a vocabulary of 1) is left out */
      t->scale[j] = var > 1e-12 ? sqrt (share[j] / var) : 0;
    }
  for (gsize i = 0; i < CALIBRATION; i++)
    raw[i] = t->scale[0] * terms[3 * i] + t->scale[1] * terms[3 * i + 1]
             + t->scale[2] * terms[3 * i + 2];
  qsort (raw, CALIBRATION, sizeof *raw, compare_doubles);
  for (int it = 0; it < 30; it++)
    {
      g = (lo + hi) / 2;
      if (expected_auc (raw, CALIBRATION, g, calibrate_bias (raw, CALIBRATION, g)) > TARGET_AUC)
        hi = g;
      else
        lo = g;
    }
  g = (lo + hi) / 2;
  t->bias = calibrate_bias (raw, CALIBRATION, g);
  for (int j = 0; j < 3; j++)
    t->scale[j] *= g;
}

/* ---- writing ---- */

static inline guint32
id_code (int slot, guint32 id)
{
  /* xor with a slot constant, then murmur3's finaliser: both bijective on 32 bits */
  guint32 x = id ^ ((guint32) (slot + 1) * 0x9e3779b9u);
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}

static char *
put_int (char *p, gint64 v)
{
  char digits[24];
  int n = 0;
  guint64 u = v < 0 ? (guint64) - v : (guint64) v;
  if (v < 0)
    *p++ = '-';
  do
    digits[n++] = '0' + u % 10;
  while ((u /= 10) != 0);
  while (n > 0)
    *p++ = digits[--n];
  return p;
}

/* One line with its "\n"; returns its length (at most 400 bytes). */
static gsize
format_line (char *buf, const Sample *s, int label)
{
  static const char hex[] = "0123456789abcdef";
  char *p = buf;
  *p++ = label ? '1' : '0';
  for (int k = 0; k < DENSE; k++)
    {
      *p++ = '\t';
      if (s->present[k])
        p = put_int (p, s->x[k]);
    }
  for (int c = 0; c < SLOTS; c++)
    {
      *p++ = '\t';
      if (s->id[c] == 0)
        continue;
      guint32 code = id_code (c, s->id[c]);
      for (int i = 7; i >= 0; i--)
        *p++ = hex[(code >> (4 * i)) & 0xf];
    }
  *p++ = '\n';
  return p - buf;
}

/* Malformed line `j` for the reader's tests: each kind in turn. */
static void
write_bad_line (FILE *out, gint64 j)
{
  g_autoptr (GString) line = g_string_new (NULL);
  switch (j % 4)
    {
    case 0: /* 39 fields */
      g_string_append (line, "0");
      for (int i = 1; i < 39; i++)
        g_string_append_c (line, '\t');
      break;
    case 1: /* label 2 */
      g_string_append (line, "2");
      for (int i = 1; i < 40; i++)
        g_string_append_c (line, '\t');
      break;
    case 2: /* bad hex in C1 */
      g_string_append (line, "0");
      for (int i = 1; i < 40; i++)
        g_string_append (line, i == 14 ? "\tzz" : "\t");
      break;
    default: /* bad integer in I1 */
      g_string_append (line, "1\t1x");
      for (int i = 2; i < 40; i++)
        g_string_append_c (line, '\t');
    }
  g_string_append_c (line, '\n');
  fwrite (line->str, 1, line->len, out);
}

typedef struct {
  double z;
  float y;
} Scored;

static int
compare_scored (const void *a, const void *b)
{
  double x = ((const Scored *) a)->z, y = ((const Scored *) b)->z;
  return (x > y) - (x < y);
}

/* The exact AUC (Mann-Whitney, ties counted half). */
static double
exact_auc (Scored *v, gsize n)
{
  double pos = 0, rank_sum = 0;
  qsort (v, n, sizeof *v, compare_scored);
  for (gsize i = 0; i < n;)
    {
      gsize j = i;
      double p = 0;
      while (j < n && v[j].z == v[i].z)
        p += v[j++].y;
      rank_sum += p * ((i + 1) + j) / 2.0; /* the mean of ranks i + 1 .. j */
      pos += p;
      i = j;
    }
  if (pos == 0 || pos == n)
    return 0.5;
  return (rank_sum - pos * (pos + 1) / 2) / (pos * (n - pos));
}

typedef struct {
  gint64 train, test, vocab, seed, bad_lines;
  gint files, factors;
  double zipf;
  gboolean force;
} Options;

/* Writes `n` samples to `path`; with `scored`, keeps each (logit, label). */
static gboolean
write_part (const Teacher *t, Rng *r, const char *path, gint64 n, gint64 bad, Scored *scored,
            double *clicks)
{
  FILE *out = fopen (path, "wb");
  char line[512];
  Sample s;
  gint64 next_bad = 0, bad_done = 0;

  if (out == NULL)
    {
      ks_cli_error ("datagen: cannot write %s: %s", path, g_strerror (errno));
      return FALSE;
    }
  setvbuf (out, NULL, _IOFBF, 1 << 20);
  if (bad > 0)
    next_bad = n / (bad + 1);
  for (gint64 i = 0; i < n; i++)
    {
      while (bad_done < bad && i == next_bad)
        {
          write_bad_line (out, bad_done++);
          next_bad = (bad_done + 1) * n / (bad + 1);
        }
      draw_sample (t, r, &s);
      double z = teacher_logit (t, &s);
      int label = rng_uniform (r) < sigmoid (z);
      *clicks += label;
      if (scored != NULL)
        scored[i] = (Scored) { z, (float) label };
      fwrite (line, 1, format_line (line, &s, label), out);
    }
  while (bad_done < bad) /* n == 0 */
    write_bad_line (out, bad_done++);
  if (ferror (out) | (fclose (out) != 0))
    {
      ks_cli_error ("datagen: writing %s failed: %s (is the disk full?)", path,
                    g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}

/* Makes DIR/sub, refusing an existing one unless `force` (then its part files go). */
static gboolean
prepare_dir (const char *dir, const char *sub, gboolean force)
{
  g_autofree char *path = g_build_filename (dir, sub, NULL);

  if (g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_autoptr (GDir) d = NULL;
      const char *name;
      if (!force)
        {
          ks_cli_error ("datagen: %s already exists (data of an earlier run?): give a new "
                        "DIR, or --force to replace its part files",
                        path);
          return FALSE;
        }
      if ((d = g_dir_open (path, 0, NULL)) == NULL)
        {
          ks_cli_error ("datagen: %s exists and is not a readable directory: remove it or "
                        "give another DIR", path);
          return FALSE;
        }
      while ((name = g_dir_read_name (d)) != NULL)
        if (g_str_has_prefix (name, "part-"))
          {
            g_autofree char *file = g_build_filename (path, name, NULL);
            if (g_unlink (file) != 0)
              {
                ks_cli_error ("datagen: cannot remove %s: %s", file, g_strerror (errno));
                return FALSE;
              }
          }
      return TRUE;
    }
  if (g_mkdir_with_parents (path, 0755) != 0)
    {
      ks_cli_error ("datagen: cannot create %s: %s", path, g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}

static char *
fmt (const char *format, double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  return g_strdup (g_ascii_formatd (buf, sizeof buf, format, v)); /* never a decimal comma */
}

static int
datagen_ctr (const char *dir, const Options *o)
{
  Teacher t;
  Rng r;
  double clicks = 0, test_clicks = 0, auc;
  g_autofree Scored *scored = NULL;
  int status = KS_EXIT_RUNTIME;

  if (!prepare_dir (dir, "train", o->force) || !prepare_dir (dir, "test", o->force))
    return KS_EXIT_USAGE;
  teacher_init (&t, (guint64) o->seed, o->vocab, o->zipf, o->factors);
  teacher_calibrate (&t, (guint64) o->seed);
  rng_seed (&r, (guint64) o->seed, 2);
  for (gint64 f = 0; f < o->files; f++)
    {
      g_autofree char *name = g_strdup_printf ("part-%05" G_GINT64_FORMAT, f);
      g_autofree char *path = g_build_filename (dir, "train", name, NULL);
      gint64 n = (f + 1) * o->train / o->files - f * o->train / o->files;
      if (!write_part (&t, &r, path, n, f == 0 ? o->bad_lines : 0, NULL, &clicks))
        goto out;
    }
  scored = g_new (Scored, o->test);
  {
    g_autofree char *path = g_build_filename (dir, "test", "part-00000", NULL);
    if (!write_part (&t, &r, path, o->test, 0, scored, &test_clicks))
      goto out;
  }
  auc = exact_auc (scored, o->test);
  {
    double ctr = test_clicks / o->test;
    g_autofree char *auc_text = fmt ("%.4f", auc), *ctr_text = fmt ("%.3f", ctr);
    g_autofree char *auc_json = fmt ("%.6f", auc), *ctr_json = fmt ("%.6f", ctr);
    g_autofree char *train_ctr = fmt ("%.6f", clicks / MAX (o->train, 1));
    g_autofree char *zipf = fmt ("%.6g", o->zipf);
    g_autofree char *json_path = g_build_filename (dir, "teacher.json", NULL);
    g_autofree char *json = g_strdup_printf (
        "{\"auc\": %s, \"ctr\": %s, \"train_ctr\": %s, \"train\": %" G_GINT64_FORMAT
        ", \"test\": %" G_GINT64_FORMAT ", \"seed\": %" G_GINT64_FORMAT
        ", \"files\": %d, \"vocab\": %" G_GINT64_FORMAT ", \"zipf\": %s, \"factors\": %d"
        ", \"bad_lines\": %" G_GINT64_FORMAT "}\n",
        auc_json, ctr_json, train_ctr, o->train, o->test, o->seed, o->files, o->vocab, zipf,
        o->factors, o->bad_lines);
    g_autoptr (GError) error = NULL;
    if (!g_file_set_contents (json_path, json, -1, &error))
      {
        ks_cli_error ("datagen: %s", error->message);
        goto out;
      }
    printf ("teacher auc %s on %" G_GINT64_FORMAT " test samples (ctr %s)\n", auc_text,
            o->test, ctr_text);
  }
  status = KS_EXIT_OK;
out:
  teacher_clear (&t);
  return status;
}

/* `ksdist help datagen`: each kind prints its options instead of running */
static gboolean help_only;

/* ksdist datagen glyphs|images DIR */
static int
run_datagen_image_set (int argc, char **argv)
{
  gboolean glyphs = strcmp (argv[1], "glyphs") == 0;
  DatagenImageOptions o = { 1, 20, 0, 0, FALSE };
  GOptionEntry entries[] = {
    { "seed", 0, 0, G_OPTION_ARG_INT64, &o.seed, "Seed of the drawings (default 1)", "S" },
    { "per-class", 0, 0, G_OPTION_ARG_INT, &o.per_class, "Images of each class (default 20)",
      "N" },
    { "force", 0, 0, G_OPTION_ARG_NONE, &o.force, "Replace DIR's train, val and test", NULL },
    { glyphs ? "alphabets" : "classes", 0, 0, G_OPTION_ARG_INT, &o.alphabets,
      glyphs ? "Scripts to use (default: every one the fonts here can draw)"
             : "Classes in all (default 100)", "N" },
    /* the table ends at the first entry without a name: glyphs' last one */
    { glyphs ? "characters" : NULL, 0, 0, G_OPTION_ARG_INT, &o.classes,
      "Characters of each script at most (default 40)", "N" },
    { NULL },
  };
  g_autofree char *parameters = g_strdup_printf ("%s DIR", argv[1]);
  const char *summary = glyphs ? "Few-shot image sets (train, val, test) of glyphs drawn "
                                 "with this machine's fonts, one class per character"
                               : "Few-shot image sets (train, val, test) of coloured shapes, "
                                 "one class per shape and colour";

  if (help_only)
    {
      ks_cli_print_help ("datagen", parameters, summary, entries);
      return KS_EXIT_OK;
    }
  if (!ks_cli_parse ("datagen", parameters, ks_cmd_datagen.summary, entries, &argc, &argv))
    return KS_EXIT_USAGE;
  if (argc != 3 || o.per_class < 1 || o.per_class > 100000 || o.alphabets < 0
      || o.alphabets > 100000 || o.classes < 0)
    {
      ks_cli_error ("datagen: give one DIR, 1 <= --per-class <= 100000 and a count >= 0, as "
                    "in `ksdist datagen %s DIR` (see ksdist help datagen)", argv[1]);
      return KS_EXIT_USAGE;
    }
#ifdef HAVE_GLYPHS
  return glyphs ? datagen_glyphs (argv[2], &o) : datagen_images (argv[2], &o);
#elif defined HAVE_PIXBUF
  if (!glyphs)
    return datagen_images (argv[2], &o);
#endif
  ks_cli_error ("datagen %s: this ksdist was built without %s; install it (see configure's "
                "summary) and build again", argv[1],
                glyphs ? "FreeType and fontconfig" : "gdk-pixbuf");
  return KS_EXIT_RUNTIME;
}

/* ksdist datagen digits DIR */
static int
run_datagen_digits (int argc, char **argv)
{
  gint64 train = 10000, test = 2000, seed = 1;
  int classes = 10;
  g_autofree char *format = NULL;
  GOptionEntry entries[] = {
    { "train", 0, 0, G_OPTION_ARG_INT64, &train, "Training images (default 10000)", "N" },
    { "test", 0, 0, G_OPTION_ARG_INT64, &test, "Test images (default 2000)", "N" },
    { "seed", 0, 0, G_OPTION_ARG_INT64, &seed, "Seed of the drawings (default 1)", "S" },
    { "classes", 0, 0, G_OPTION_ARG_INT, &classes,
      "Only the digits 0 to N-1 (default 10; 2 makes labels 0 and 1 for a binary "
      "classifier)", "N" },
    { "format", 0, 0, G_OPTION_ARG_STRING, &format,
      "idx (MNIST's four files, the default), npy (train-images.npy, train-labels.npy, "
      "t10k-...), csv (train.csv, t10k.csv: a label and 784 pixels a line) or folder "
      "(train/<digit>/*.png and t10k/<digit>/*.png)", "F" },
    { NULL },
  };

  if (help_only)
    {
      ks_cli_print_help ("datagen", "digits DIR", "MNIST-like handwritten digits drawn with "
                         "this machine's fonts, in MNIST's layout", entries);
      return KS_EXIT_OK;
    }
  if (!ks_cli_parse ("datagen", "digits DIR", ks_cmd_datagen.summary, entries, &argc, &argv))
    return KS_EXIT_USAGE;
  if (format == NULL)
    format = g_strdup ("idx");
  if (argc != 3 || train < 1 || train > 10000000 || test < 1 || test > 10000000
      || classes < 2 || classes > 10
      || (strcmp (format, "idx") != 0 && strcmp (format, "npy") != 0
          && strcmp (format, "csv") != 0 && strcmp (format, "folder") != 0))
    {
      ks_cli_error ("datagen digits: give one DIR, 1 <= --train, --test <= 10000000, "
                    "2 <= --classes <= 10 and --format idx, npy, csv or folder (see ksdist "
                    "help datagen)");
      return KS_EXIT_USAGE;
    }
#ifdef HAVE_GLYPHS
  return datagen_digits (argv[2], train, test, seed, format, classes);
#else
  ks_cli_error ("datagen digits: this ksdist was built without FreeType and fontconfig; "
                "install them (see configure's summary) and build again");
  return KS_EXIT_RUNTIME;
#endif
}

/* ksdist datagen tokens DIR --text FILE */
static int
run_datagen_tokens (int argc, char **argv)
{
  g_autofree char *text = NULL;
  GOptionEntry entries[] = {
    { "text", 0, 0, G_OPTION_ARG_FILENAME, &text,
      "The text whose bytes become tokens (default /usr/share/dict/words)", "FILE" },
    { NULL },
  };
  if (help_only)
    {
      ks_cli_print_help ("datagen", "tokens DIR", "A text's bytes as token files "
                         "(train.bin, val.bin: nanoGPT's and llm.c's header and uint16 "
                         "tokens)", entries);
      return KS_EXIT_OK;
    }
  if (!ks_cli_parse ("datagen", "tokens DIR", ks_cmd_datagen.summary, entries, &argc, &argv))
    return KS_EXIT_USAGE;
  if (argc != 3)
    {
      ks_cli_error ("datagen tokens: give one DIR, as in `ksdist datagen tokens DIR --text "
                    "FILE` (see ksdist help datagen)");
      return KS_EXIT_USAGE;
    }
  return datagen_tokens (argv[2], text != NULL ? text : "/usr/share/dict/words");
}

/* Every kind's options, one after another */
static int
datagen_help (GOptionEntry *ctr_entries)
{
  static const char *const kinds[] = { "digits", "tokens", "glyphs", "images" };
  printf ("Usage:\n  ksdist datagen KIND [OPTION…] DIR\n\n%s\n\nThe kinds and their options:"
          "\n\n", ks_cmd_datagen.summary);
  help_only = TRUE;
  ks_cli_print_help ("datagen", "ctr DIR", "Click logs in Criteo's format (train part files and "
                     "a test file) labelled by a hidden teacher", ctr_entries);
  for (gsize i = 0; i < G_N_ELEMENTS (kinds); i++)
    {
      char *argv[] = { "datagen", (char *) kinds[i], NULL };
      int status = strcmp (kinds[i], "digits") == 0   ? run_datagen_digits (2, argv)
                   : strcmp (kinds[i], "tokens") == 0 ? run_datagen_tokens (2, argv)
                                                      : run_datagen_image_set (2, argv);
      if (status != KS_EXIT_OK)
        return status;
    }
  return KS_EXIT_OK;
}

static int
run_datagen (int argc, char **argv)
{
  Options o = { 1000000, 100000, 100000, 1, 0, 8, 4, 1.05, FALSE };
  GOptionEntry entries[] = {
    { "train", 0, 0, G_OPTION_ARG_INT64, &o.train, "Training samples (default 1000000)", "N" },
    { "test", 0, 0, G_OPTION_ARG_INT64, &o.test, "Test samples (default 100000)", "N" },
    { "files", 0, 0, G_OPTION_ARG_INT, &o.files, "Training part files (default 8)", "F" },
    { "vocab", 0, 0, G_OPTION_ARG_INT64, &o.vocab,
      "Ids of the largest slot (default 100000; slots have V/100 to V)", "V" },
    { "zipf", 0, 0, G_OPTION_ARG_DOUBLE, &o.zipf, "Zipf exponent of the ids (default 1.05)", "S" },
    { "factors", 0, 0, G_OPTION_ARG_INT, &o.factors,
      "Factors of the teacher's pairwise term (default 4)", "K" },
    { "seed", 0, 0, G_OPTION_ARG_INT64, &o.seed, "Seed of features and teacher (default 1)", "S" },
    { "bad-lines", 0, 0, G_OPTION_ARG_INT64, &o.bad_lines,
      "Malformed lines to put into train part 0 (default 0)", "N" },
    { "force", 0, 0, G_OPTION_ARG_NONE, &o.force, "Replace the part files of an earlier run",
      NULL },
    { NULL },
  };

  if (argc == 2 && (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0))
    return datagen_help (entries);
  if (argc >= 2 && (strcmp (argv[1], "glyphs") == 0 || strcmp (argv[1], "images") == 0))
    return run_datagen_image_set (argc, argv);
  if (argc >= 2 && strcmp (argv[1], "digits") == 0)
    return run_datagen_digits (argc, argv);
  if (argc >= 2 && strcmp (argv[1], "tokens") == 0)
    return run_datagen_tokens (argc, argv);
  if (!ks_cli_parse ("datagen", "ctr|digits|tokens|glyphs|images DIR", ks_cmd_datagen.summary, entries,
                     &argc, &argv))
    return KS_EXIT_USAGE;
  if (argc != 3 || strcmp (argv[1], "ctr") != 0)
    {
      ks_cli_error ("datagen: give the kind of data, ctr, digits, tokens, glyphs or images, and a DIR, as in "
                    "`ksdist datagen glyphs DIR` (see ksdist help datagen)");
      return KS_EXIT_USAGE;
    }
  if (o.train < 1 || o.test < 1 || o.files < 1 || o.files > o.train || o.vocab < 1
      || o.vocab > MAX_VOCAB || !(o.zipf >= 0 && o.zipf <= 10) || o.factors < 1
      || o.factors > MAX_FACTORS || o.bad_lines < 0)
    {
      ks_cli_error ("datagen: give --train >= 1, --test >= 1, 1 <= --files <= --train, "
                    "1 <= --vocab <= %d, 0 <= --zipf <= 10, 1 <= --factors <= %d and "
                    "--bad-lines >= 0 (see ksdist help datagen)",
                    MAX_VOCAB, MAX_FACTORS);
      return KS_EXIT_USAGE;
    }
  return datagen_ctr (argv[2], &o);
}

const KsCommand ks_cmd_datagen = {
  "datagen",
  "Write synthetic data: click logs (Criteo format) from a hidden teacher, MNIST-like "
  "digits (IDX, npy or CSV), a text's bytes as token files, or few-shot image sets (glyphs of this machine's fonts, "
  "coloured shapes)",
  run_datagen,
};
