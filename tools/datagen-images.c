/* ksdist datagen images: a small Mini-ImageNet-like set of 84 x 84 colour images, to
 * exercise the colour reader and few-shot training on it.
 *
 * A class is a drawn object (disc, square, triangle, ring, cross or star) of its own hue
 * on a background of its own stripes (angle and frequency) and tint; an image moves,
 * scales and turns the object, shifts the stripes and the hues a little and adds pixel
 * noise. Classes go 64 / 16 / 20 % to train, val and test, as Mini-ImageNet's do. */
#include "datagen.h"

#include <errno.h>
#include <gdk-pixbuf/gdk-pixbuf.h>
#include <glib/gstdio.h>
#include <string.h>

enum { SIDE = 84, SHAPES = 6 };

typedef struct {
  int shape;
  double hue, tint, angle, frequency;
} ImageClassStyle;

/* r, g, b in [0, 1] from a hue in [0, 1) at saturation s and value v */
static void
hsv (double h, double s, double v, double rgb[3])
{
  double f = h * 6 - floor (h * 6), p = v * (1 - s), q = v * (1 - s * f),
         t = v * (1 - s * (1 - f));
  double table[6][3] = { { v, t, p }, { q, v, p }, { p, v, t },
                         { p, q, v }, { t, p, v }, { v, p, q } };
  memcpy (rgb, table[(int) (h * 6) % 6], 3 * sizeof (double));
}

/* Whether (u, v), in the object's own frame of radius 1, is inside the object. */
static gboolean
inside (int shape, double u, double v)
{
  double r = sqrt (u * u + v * v), a = atan2 (v, u);
  switch (shape)
    {
    case 0: return r < 1;
    case 1: return fabs (u) < 0.8 && fabs (v) < 0.8;
    case 2: return v > -0.6 && v < 0.9 - 1.7 * fabs (u);
    case 3: return r < 1 && r > 0.6;
    case 4: return (fabs (u) < 0.3 && fabs (v) < 1) || (fabs (v) < 0.3 && fabs (u) < 1);
    default: return r < 0.55 + 0.45 * cos (5 * a); /* a five-pointed star */
    }
}

static void
draw_image (const ImageClassStyle *c, Rng *r, guint8 *px, int stride)
{
  double cx = SIDE / 2 + (rng_uniform (r) - 0.5) * 30, cy = SIDE / 2 + (rng_uniform (r) - 0.5) * 30;
  double radius = 14 + 12 * rng_uniform (r), turn = rng_uniform (r) * 2 * G_PI;
  double phase = rng_uniform (r) * 2 * G_PI, shift = (rng_uniform (r) - 0.5) * 0.06;
  double fg[3], bg[3], stripe[3];
  hsv (fmod (c->hue + shift + 1, 1), 0.85, 0.9, fg);
  hsv (c->tint, 0.25, 0.85, bg);
  hsv (fmod (c->tint + 0.5, 1), 0.3, 0.55, stripe);
  for (int y = 0; y < SIDE; y++)
    for (int x = 0; x < SIDE; x++)
      {
        double dx = (x - cx) / radius, dy = (y - cy) / radius;
        double u = dx * cos (turn) + dy * sin (turn), v = -dx * sin (turn) + dy * cos (turn);
        double w = sin ((x * cos (c->angle) + y * sin (c->angle)) * c->frequency + phase);
        const double *rgb = inside (c->shape, u, v) ? fg : w > 0.3 ? stripe : bg;
        for (int k = 0; k < 3; k++)
          px[y * stride + x * 3 + k] =
              (guint8) CLAMP ((rgb[k] + (rng_uniform (r) - 0.5) * 0.12) * 255, 0, 255);
      }
}

gboolean
datagen_prepare_image_dir (const char *dir, gboolean force)
{
  static const char *const splits[] = { "train", "val", "test" };
  for (int s = 0; s < 3; s++)
    {
      g_autofree char *path = g_build_filename (dir, splits[s], NULL);
      if (!g_file_test (path, G_FILE_TEST_EXISTS))
        continue;
      if (!force)
        {
          ks_cli_error ("datagen: %s already exists (data of an earlier run?): give a new "
                        "DIR, or --force to replace it", path);
          return FALSE;
        }
      g_autofree char *quoted = g_shell_quote (path);
      g_autofree char *command = g_strdup_printf ("rm -rf %s", quoted);
      if (system (command) != 0)
        {
          ks_cli_error ("datagen: cannot remove %s", path);
          return FALSE;
        }
    }
  if (g_mkdir_with_parents (dir, 0755) != 0)
    {
      ks_cli_error ("datagen: cannot create %s: %s", dir, g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}

int
datagen_images (const char *dir, const DatagenImageOptions *o)
{
  int n = o->alphabets > 0 ? o->alphabets : 100;
  int n_train = n * 64 / 100, n_val = MAX (1, n * 16 / 100);
  g_autoptr (GdkPixbuf) pb = gdk_pixbuf_new (GDK_COLORSPACE_RGB, FALSE, 8, SIDE, SIDE);
  Rng r;

  if (n < 3)
    {
      ks_cli_error ("datagen images: --classes %d; at least 3 (one for each split)", n);
      return KS_EXIT_USAGE;
    }
  if (!datagen_prepare_image_dir (dir, o->force))
    return KS_EXIT_USAGE;
  for (int c = 0; c < n; c++)
    {
      const char *split = c < n_train ? "train" : c < n_train + n_val ? "val" : "test";
      g_autofree char *cdir = g_strdup_printf ("%s/%s/class%03d", dir, split, c + 1);
      ImageClassStyle style;
      rng_seed (&r, (guint64) o->seed, 1000 + c);
      style.shape = (int) (rng_uniform (&r) * SHAPES);
      style.hue = rng_uniform (&r), style.tint = rng_uniform (&r);
      style.angle = rng_uniform (&r) * G_PI, style.frequency = 0.2 + 0.6 * rng_uniform (&r);
      if (g_mkdir_with_parents (cdir, 0755) != 0)
        {
          ks_cli_error ("datagen images: cannot create %s: %s", cdir, g_strerror (errno));
          return KS_EXIT_RUNTIME;
        }
      for (int k = 0; k < o->per_class; k++)
        {
          g_autofree char *path = g_strdup_printf ("%s/%02d.png", cdir, k + 1);
          g_autoptr (GError) error = NULL;
          draw_image (&style, &r, gdk_pixbuf_get_pixels (pb), gdk_pixbuf_get_rowstride (pb));
          if (!gdk_pixbuf_save (pb, path, "png", &error, NULL))
            {
              ks_cli_error ("datagen images: %s: %s", path, error->message);
              return KS_EXIT_RUNTIME;
            }
        }
    }
  printf ("images: %d classes (%d train, %d val, %d test), %d images in %s\n", n, n_train, n_val,
          n - n_train - n_val, n * o->per_class, dir);
  return KS_EXIT_OK;
}
