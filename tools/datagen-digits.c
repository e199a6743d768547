/* ksdist datagen digits: an MNIST-like set, the digits 0-9 drawn with this machine's
 * fonts (each drawing with its own rotation, shear, scale, shift and stroke, as the glyph
 * sets), made 28 x 28 grey by averaging, white ink on black as MNIST has them, written in
 * MNIST's own layout (IDX files under MNIST's names) so that a folder of the real MNIST,
 * or of Fashion-MNIST, drops in where this one was. --format npy or csv writes the same
 * images as NumPy arrays or a CSV of 784 pixel columns and a label, --format folder as PNG
 * files in one folder per class (torchvision's ImageFolder), train/ and t10k/. */
#include "datagen-fonts.h"

#include <errno.h>
#include <gdk-pixbuf/gdk-pixbuf.h>
#include <string.h>

enum { SIDE = 28, PIXELS = SIDE * SIDE, MAX_DIGIT_FONTS = 48 };

static void
face_free (gpointer face)
{
  FT_Done_Face (face);
}

/* The fonts that draw all ten digits with ink, at most MAX_DIGIT_FONTS, opened. */
static GPtrArray *
digit_faces (FT_Library lib, GArray *fonts)
{
  GPtrArray *faces = g_ptr_array_new_with_free_func (face_free);
  for (guint i = 0; i < fonts->len && faces->len < MAX_DIGIT_FONTS; i++)
    {
      const Font *f = &g_array_index (fonts, Font, i);
      FT_Face face;
      gboolean all = TRUE;
      for (gunichar d = '0'; d <= '9' && all; d++)
        all = FcCharSetHasChar (f->charset, d);
      if (!all || FT_New_Face (lib, f->file, f->index, &face) != 0)
        continue;
      if (FT_Set_Pixel_Sizes (face, 0, 48) != 0)
        all = FALSE;
      for (gunichar d = '0'; d <= '9' && all; d++)
        all = has_ink (face, d);
      if (all)
        g_ptr_array_add (faces, face);
      else
        FT_Done_Face (face);
    }
  return faces;
}

/* A CANVAS-sized drawing (0 ink) as SIDE x SIDE, each pixel the mean ink of its area. */
static void
shrink (const guint8 *canvas, guint8 *out)
{
  for (int y = 0; y < SIDE; y++)
    for (int x = 0; x < SIDE; x++)
      {
        int y0 = y * CANVAS / SIDE, y1 = (y + 1) * CANVAS / SIDE;
        int x0 = x * CANVAS / SIDE, x1 = (x + 1) * CANVAS / SIDE;
        int sum = 0;
        for (int cy = y0; cy < y1; cy++)
          for (int cx = x0; cx < x1; cx++)
            sum += 255 - canvas[cy * CANVAS + cx];
        out[y * SIDE + x] = sum / ((y1 - y0) * (x1 - x0));
      }
}

static gboolean
write_file (const char *dir, const char *name, const void *head, gsize head_len,
            const void *data, gsize len)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autoptr (GError) error = NULL;
  g_autofree guint8 *bytes = g_malloc (head_len + len);
  memcpy (bytes, head, head_len);
  memcpy (bytes + head_len, data, len);
  if (g_file_set_contents (path, (const char *) bytes, head_len + len, &error))
    return TRUE;
  ks_cli_error ("datagen digits: %s", error->message);
  return FALSE;
}

/* IDX: a magic (0, 0, 8 = unsigned bytes, dimensions), then each dimension big-endian */
static gboolean
write_idx (const char *dir, const char *split, const guint8 *images, const guint8 *labels,
           guint32 n)
{
  guint32 ih[] = { GUINT32_TO_BE (0x803), GUINT32_TO_BE (n), GUINT32_TO_BE (SIDE),
                   GUINT32_TO_BE (SIDE) };
  guint32 lh[] = { GUINT32_TO_BE (0x801), GUINT32_TO_BE (n) };
  g_autofree char *in = g_strdup_printf ("%s-images-idx3-ubyte", split);
  g_autofree char *ln = g_strdup_printf ("%s-labels-idx1-ubyte", split);
  return write_file (dir, in, ih, sizeof ih, images, (gsize) n * PIXELS)
         && write_file (dir, ln, lh, sizeof lh, labels, n);
}

/* .npy version 1: magic, version, header length, a dict padded to 64 bytes */
static gboolean
write_npy (const char *dir, const char *name, const char *shape, const void *data, gsize len)
{
  g_autofree char *dict = g_strdup_printf ("{'descr': '|u1', 'fortran_order': False, "
                                           "'shape': %s, }", shape);
  gsize body = 10 + strlen (dict) + 1, pad = (64 - body % 64) % 64;
  GString *head = g_string_new_len ("\x93NUMPY\x01\x00", 8);
  guint16 hlen = GUINT16_TO_LE (strlen (dict) + pad + 1);
  g_string_append_len (head, (const char *) &hlen, 2);
  g_string_append (head, dict);
  for (gsize i = 0; i < pad; i++)
    g_string_append_c (head, ' ');
  g_string_append_c (head, '\n');
  gboolean ok = write_file (dir, name, head->str, head->len, data, len);
  g_string_free (head, TRUE);
  return ok;
}

static gboolean
write_csv (const char *dir, const char *split, const guint8 *images, const guint8 *labels,
           guint32 n)
{
  GString *s = g_string_new ("label");
  for (int p = 0; p < PIXELS; p++)
    g_string_append_printf (s, ",p%d", p);
  g_string_append_c (s, '\n');
  for (guint32 i = 0; i < n; i++)
    {
      g_string_append_printf (s, "%u", labels[i]);
      for (int p = 0; p < PIXELS; p++)
        g_string_append_printf (s, ",%u", images[(gsize) i * PIXELS + p]);
      g_string_append_c (s, '\n');
    }
  g_autofree char *name = g_strdup_printf ("%s.csv", split);
  gboolean ok = write_file (dir, name, "", 0, s->str, s->len);
  g_string_free (s, TRUE);
  return ok;
}

/* an image folder as torchvision's ImageFolder reads it: SPLIT/<digit>/<n>.png */
static gboolean
write_folder (const char *dir, const char *split, const guint8 *images, const guint8 *labels,
              guint32 n)
{
  for (guint32 i = 0; i < n; i++)
    {
      g_autofree char *class_dir = g_strdup_printf ("%s/%s/%u", dir, split, labels[i]);
      g_autofree char *path = g_strdup_printf ("%s/%05u.png", class_dir, i);
      g_autoptr (GdkPixbuf) pb = gdk_pixbuf_new (GDK_COLORSPACE_RGB, FALSE, 8, SIDE, SIDE);
      g_autoptr (GError) error = NULL;
      guint8 *px = gdk_pixbuf_get_pixels (pb);
      int stride = gdk_pixbuf_get_rowstride (pb);
      for (int y = 0; y < SIDE; y++)
        for (int x = 0; x < SIDE; x++)
          memset (px + y * stride + x * 3, images[(gsize) i * PIXELS + y * SIDE + x], 3);
      if (g_mkdir_with_parents (class_dir, 0755) != 0 || !gdk_pixbuf_save (pb, path, "png", &error, NULL))
        {
          ks_cli_error ("datagen digits: %s: %s", path,
                        error != NULL ? error->message : g_strerror (errno));
          return FALSE;
        }
    }
  return TRUE;
}

static gboolean
write_split (const char *dir, const char *format, const char *split, const guint8 *images,
             const guint8 *labels, guint32 n)
{
  if (strcmp (format, "folder") == 0)
    return write_folder (dir, split, images, labels, n);
  if (strcmp (format, "idx") == 0)
    return write_idx (dir, split, images, labels, n);
  if (strcmp (format, "csv") == 0)
    return write_csv (dir, split, images, labels, n);
  g_autofree char *xs = g_strdup_printf ("(%u, %d, %d, 1)", n, SIDE, SIDE);
  g_autofree char *ys = g_strdup_printf ("(%u,)", n);
  g_autofree char *xn = g_strdup_printf ("%s-images.npy", split);
  g_autofree char *yn = g_strdup_printf ("%s-labels.npy", split);
  return write_npy (dir, xn, xs, images, (gsize) n * PIXELS)
         && write_npy (dir, yn, ys, labels, n);
}

/* What --format wrote, for the summary line */
static const char *
format_says (const char *format)
{
  if (strcmp (format, "folder") == 0)
    return "PNG files (a folder per class)";
  if (strcmp (format, "idx") == 0)
    return "IDX files";
  return strcmp (format, "csv") == 0 ? "CSV files" : "NumPy files";
}

int
datagen_digits (const char *dir, gint64 train, gint64 test, gint64 seed, const char *format,
                int classes)
{
  FT_Library lib;
  GArray *fonts;
  int status = KS_EXIT_RUNTIME;
  Rng r;

  if (!FcInit () || FT_Init_FreeType (&lib) != 0)
    {
      ks_cli_error ("datagen digits: fontconfig or FreeType did not start");
      return KS_EXIT_RUNTIME;
    }
  fonts = list_fonts ();
  g_autoptr (GPtrArray) faces = digit_faces (lib, fonts);
  if (faces->len < 2)
    {
      ks_cli_error ("datagen digits: only %u fonts here draw the ten digits; install more "
                    "(apt-get install fonts-noto-core)", faces->len);
      goto out;
    }
  if (g_mkdir_with_parents (dir, 0755) != 0)
    {
      ks_cli_error ("datagen digits: cannot create %s: %s", dir, g_strerror (errno));
      goto out;
    }
  rng_seed (&r, seed, 28);
  for (int part = 0; part < 2; part++)
    {
      guint32 n = part == 0 ? train : test;
      g_autofree guint8 *images = g_new (guint8, (gsize) n * PIXELS);
      g_autofree guint8 *labels = g_new (guint8, n);
      for (guint32 i = 0; i < n; i++)
        {
          guint8 canvas[CANVAS * CANVAS];
          labels[i] = rng_next (&r) % classes;
          FT_Face face = g_ptr_array_index (faces, rng_next (&r) % faces->len);
          if (!draw_glyph (face, '0' + labels[i], &r, canvas))
            {
              ks_cli_error ("datagen digits: FreeType could not draw %u with %s", labels[i],
                            face->family_name);
              goto out;
            }
          shrink (canvas, images + (gsize) i * PIXELS);
        }
      if (!write_split (dir, format, part == 0 ? "train" : "t10k", images, labels, n))
        goto out;
    }
  printf ("digits: %" G_GINT64_FORMAT " training and %" G_GINT64_FORMAT " test images of 28 x "
          "28 (the digits 0 to %d) drawn with %u fonts, as %s in %s\n", train, test,
          classes - 1, faces->len, format_says (format), dir);
  status = KS_EXIT_OK;
out:
  g_ptr_array_set_size (faces, 0);
  fonts_clear (fonts);
  FT_Done_FreeType (lib);
  return status;
}
