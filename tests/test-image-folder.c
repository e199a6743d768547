/* The image-folder reader on folders written here with gdk-pixbuf: three classes of solid
 * colours in PNG and JPEG, checked pixel by pixel after resizing and grey conversion, the
 * class ids and names; every malformed folder or file is an error naming it. Built
 * without gdk-pixbuf, only the error saying so is checked. */
#include <config.h>

#include "testutil.h"
#include <ksdist/tasks.h>

#ifdef HAVE_PIXBUF
#include <gdk-pixbuf/gdk-pixbuf.h>
#endif
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

static const KsImageFolderOptions rgb_6x8 = { 6, 8, 3 };

#ifdef HAVE_PIXBUF
static char *
write_file (const char *dir, const char *name, const void *bytes, gsize n)
{
  g_autoptr (GError) error = NULL;
  char *path = g_build_filename (dir, name, NULL);
  g_file_set_contents (path, bytes, n, &error);
  g_assert_no_error (error);
  return path;
}
#endif

/* Asserts that loading root with o fails with a message holding `where` and `what`. */
static void
load_bad (const char *root, const KsImageFolderOptions *o, const char *where, const char *what)
{
  g_autoptr (GError) error = NULL;
  g_assert_null (ks_table_load_image_folder (root, o, &error));
  g_assert_nonnull (error);
  /* a path to change (KS_CONFIG_ERROR_IO) or bad data */
  g_assert_true (g_error_matches (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO)
                 || g_error_matches (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID));
  if (strstr (error->message, where) == NULL || strstr (error->message, what) == NULL)
    g_error ("'%s' lacks '%s' or '%s'", error->message, where, what);
  g_test_message ("%s", error->message);
}

#ifdef HAVE_PIXBUF

/* A w x h image (RGBA when alpha) of rgb on its top half and rgb2 below, saved as
 * dir/name in `type` ("png" or "jpeg"). */
static void
save (const char *dir, const char *name, const char *type, int w, int h, gboolean alpha,
      const guint8 rgb[3], const guint8 rgb2[3])
{
  g_autoptr (GdkPixbuf) pb = gdk_pixbuf_new (GDK_COLORSPACE_RGB, alpha, 8, w, h);
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autoptr (GError) error = NULL;
  guint8 *px = gdk_pixbuf_get_pixels (pb);
  int stride = gdk_pixbuf_get_rowstride (pb), n = alpha ? 4 : 3;

  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      {
        guint8 *p = px + y * stride + x * n;
        memcpy (p, y < h / 2 ? rgb : rgb2, 3);
        if (alpha)
          p[3] = 0; /* transparent: the reader drops alpha, the colour stays */
      }
  if (strcmp (type, "jpeg") == 0)
    gdk_pixbuf_save (pb, path, type, &error, "quality", "100", NULL);
  else
    gdk_pixbuf_save (pb, path, type, &error, NULL);
  g_assert_no_error (error);
}

static const guint8 red[3] = { 255, 0, 0 }, green[3] = { 0, 255, 0 },
                    blue[3] = { 0, 0, 255 }, grey[3] = { 51, 51, 51 },
                    white[3] = { 255, 255, 255 }, black[3] = { 0, 0, 0 };

static void
put32 (GByteArray *out, guint32 v)
{
  guint8 b[4] = { v >> 24, v >> 16, v >> 8, v };
  g_byte_array_append (out, b, 4);
}

/* PNG's CRC-32 (the reflected 0xedb88320 polynomial), bit by bit: a few bytes only. */
static guint32
crc32_png (const guint8 *p, gsize n)
{
  guint32 c = 0xffffffff;
  for (gsize i = 0; i < n; i++)
    {
      c ^= p[i];
      for (int k = 0; k < 8; k++)
        c = c & 1 ? 0xedb88320 ^ (c >> 1) : c >> 1;
    }
  return c ^ 0xffffffff;
}

static void
chunk (GByteArray *out, const char *type, const guint8 *data, gsize n)
{
  put32 (out, (guint32) n);
  guint start = out->len;
  g_byte_array_append (out, (const guint8 *) type, 4);
  g_byte_array_append (out, data, (guint) n);
  put32 (out, crc32_png (out->data + start, n + 4));
}

/* dir/name: a w x h 8-bit grey PNG (colour type 0) of one value, which gdk-pixbuf cannot
 * write: its zlib stream is one stored block. */
static void
save_grey_png (const char *dir, const char *name, int w, int h, guint8 value)
{
  g_autoptr (GByteArray) png = g_byte_array_new ();
  g_autoptr (GByteArray) z = g_byte_array_new ();
  static const guint8 magic[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
  guint8 ihdr[13] = { 0, 0, 0, w, 0, 0, 0, h, 8, 0, 0, 0, 0 };
  guint16 len = (guint16) ((w + 1) * h);
  guint8 head[7] = { 0x78, 0x01, 1, len & 0xff, len >> 8, ~len & 0xff, (~len >> 8) & 0xff };
  guint32 a = 1, b = 0;

  g_byte_array_append (png, magic, 8);
  chunk (png, "IHDR", ihdr, 13);
  g_byte_array_append (z, head, 7);
  for (int i = 0; i < len; i++)
    {
      guint8 v = i % (w + 1) == 0 ? 0 : value; /* each row: filter type 0, then pixels */
      g_byte_array_append (z, &v, 1);
      a = (a + v) % 65521, b = (b + a) % 65521;
    }
  put32 (z, b << 16 | a); /* zlib's Adler-32 */
  chunk (png, "IDAT", z->data, z->len);
  chunk (png, "IEND", NULL, 0);
  g_free (write_file (dir, name, png->data, png->len));
}

/* root/Apple, root/cat, root/zebra (strcmp order puts the capital first); a README at the
 * root and hidden files are skipped. */
static char *
make_folder (void)
{
  char *root = ks_test_tmpdir ();
  const char *names[] = { "zebra", "Apple", "cat" };
  for (int i = 0; i < 3; i++)
    {
      g_autofree char *dir = g_build_filename (root, names[i], NULL);
      g_assert_cmpint (g_mkdir (dir, 0755), ==, 0);
    }
  g_autofree char *apple = g_build_filename (root, "Apple", NULL);
  g_autofree char *cat = g_build_filename (root, "cat", NULL);
  g_autofree char *zebra = g_build_filename (root, "zebra", NULL);
  /* Apple: b.png red, a.JPG green (sorted: a.JPG first), c.jpeg red over blue */
  save (apple, "b.png", "png", 16, 12, FALSE, red, red);
  save (apple, "a.JPG", "jpeg", 32, 24, FALSE, green, green);
  save (apple, "c.jpeg", "jpeg", 16, 12, FALSE, red, blue);
  /* cat: a transparent blue PNG; zebra: grey, and white over black, the same size */
  save (cat, "x.PNG", "png", 8, 6, TRUE, blue, blue);
  save (zebra, "1.png", "png", 3, 5, FALSE, grey, grey);
  save (zebra, "2.png", "png", 8, 6, FALSE, white, black);
  save_grey_png (zebra, "3.png", 5, 4, 51);
  g_free (ks_test_write (root, "README", "not a class"));
  g_free (ks_test_write (cat, ".DS_Store", "junk"));
  g_free (ks_test_write (zebra, "._1.png", "junk (macOS resource fork)"));
  return root;
}

/* Asserts that row r of t is rgb above row `split` and rgb2 from it on, within tol. */
static void
check_row (const KsTable *t, gsize r, int split, const guint8 rgb[3], const guint8 rgb2[3],
           double tol)
{
  int h = t->shape[0], w = t->shape[1], c = t->shape[2];
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      {
        const guint8 *want = y < split ? rgb : rgb2;
        const float *p = t->x + r * t->features + ((gsize) y * w + x) * c;
        double mean = (want[0] + want[1] + want[2]) / (3 * 255.0);
        for (int k = 0; k < c; k++)
          {
            double v = c == 1 ? mean : want[k] / 255.0;
            if (fabs (p[k] - v) > tol)
              g_error ("row %" G_GSIZE_FORMAT " (%d, %d, %d): %g, expected %g", r, y, x, k, p[k], v);
          }
      }
}

static void
test_load (void)
{
  g_autofree char *root = make_folder ();
  g_autoptr (GError) error = NULL;
  g_autoptr (KsTable) t = ks_table_load_image_folder (root, &rgb_6x8, &error);
  const gint64 y[] = { 0, 0, 0, 1, 2, 2, 2 };

  g_assert_no_error (error);
  g_assert_cmpuint (t->rows, ==, 7);
  g_assert_cmpint (t->ndim, ==, 3);
  g_assert_cmpint (t->shape[0], ==, 6);
  g_assert_cmpint (t->shape[1], ==, 8);
  g_assert_cmpint (t->shape[2], ==, 3);
  g_assert_cmpuint (t->features, ==, 6 * 8 * 3);
  g_assert_false (t->regression);
  g_assert_cmpint (t->classes, ==, 3);
  g_assert_cmpstr (t->class_names[0], ==, "Apple");
  g_assert_cmpstr (t->class_names[1], ==, "cat");
  g_assert_cmpstr (t->class_names[2], ==, "zebra");
  g_assert_null (t->class_names[3]);
  for (int r = 0; r < 7; r++)
    g_assert_cmpint (t->y[r], ==, y[r]);
  /* rows: Apple/a.JPG, b.png, c.jpeg, cat/x.PNG, zebra/1.png, 2.png, 3.png; a solid colour
   * stays solid through the resize (JPEG within its error); the split image keeps its
   * rows; the grey PNG's value is in all three channels */
  check_row (t, 0, 6, green, green, 0.02);
  check_row (t, 1, 6, red, red, 0);
  check_row (t, 3, 6, blue, blue, 0);
  check_row (t, 4, 6, grey, grey, 1e-6);
  check_row (t, 5, 3, white, black, 0);
  check_row (t, 6, 6, grey, grey, 1e-6);
  /* c.jpeg, 12 rows to 6: the top and bottom rows away from the edge between colours */
  const float *c = t->x + 2 * t->features;
  for (int x = 0; x < 8; x++)
    {
      g_assert_cmpfloat_with_epsilon (c[x * 3 + 0], 1, 0.06);
      g_assert_cmpfloat_with_epsilon (c[(5 * 8 + x) * 3 + 2], 1, 0.06);
      g_assert_cmpfloat_with_epsilon (c[(5 * 8 + x) * 3 + 0], 0, 0.06);
    }

  /* grey: the mean of R, G and B; the same rows again */
  const KsImageFolderOptions grey_o = { 6, 8, 1 };
  g_autoptr (KsTable) g = ks_table_load_image_folder (root, &grey_o, &error);
  g_assert_no_error (error);
  g_assert_cmpint (g->shape[2], ==, 1);
  g_assert_cmpuint (g->features, ==, 6 * 8);
  check_row (g, 0, 6, green, green, 0.02);
  check_row (g, 1, 6, red, red, 1e-6);
  check_row (g, 3, 6, blue, blue, 1e-6);
  check_row (g, 5, 3, white, black, 0);
  check_row (g, 6, 6, grey, grey, 1e-6);
  for (gsize i = 0; i < g->rows * g->features; i++)
    g_assert_true (g->x[i] >= 0 && g->x[i] <= 1);

  /* upscaling to a non-square 3 x 40 */
  const KsImageFolderOptions wide = { 3, 40, 3 };
  g_autoptr (KsTable) u = ks_table_load_image_folder (root, &wide, &error);
  g_assert_no_error (error);
  check_row (u, 1, 3, red, red, 0);
  ks_test_rmtree (root);
}

/* The bytes of file `path`, cut to its first `keep` (a fraction). */
static void
cut_file (const char *path, double keep)
{
  g_autofree char *bytes = NULL;
  gsize n;
  g_autoptr (GError) error = NULL;
  g_assert_true (g_file_get_contents (path, &bytes, &n, &error));
  g_assert_true (g_file_set_contents (path, bytes, (gssize) (n * keep), &error));
}

/* A folder of two good classes, a and b; returns root, and class a's folder in *a. */
static char *
two_classes (char **a)
{
  char *root = ks_test_tmpdir ();
  const char *names[] = { "a", "b" };
  for (int i = 0; i < 2; i++)
    {
      g_autofree char *dir = g_build_filename (root, names[i], NULL);
      g_assert_cmpint (g_mkdir (dir, 0755), ==, 0);
      save (dir, "ok.png", "png", 40, 30, FALSE, red, blue);
      save (dir, "ok.jpg", "jpeg", 40, 30, FALSE, red, blue);
      if (i == 0)
        *a = g_strdup (dir);
    }
  return root;
}

static void
test_truncated (void)
{
  const char *names[] = { "ok.png", "ok.jpg" };
  for (int i = 0; i < 2; i++)
    {
      g_autofree char *a = NULL;
      g_autofree char *root = two_classes (&a);
      g_autofree char *path = g_build_filename (a, names[i], NULL);
      g_autoptr (KsTable) whole = ks_table_load_image_folder (root, &rgb_6x8, NULL);
      g_assert_nonnull (whole);
      /* cut in half, which gdk-pixbuf's loaders alone decode into a half-grey image */
      cut_file (path, 0.5);
      load_bad (root, &rgb_6x8, path, "truncated");
      ks_test_rmtree (root);
    }
}

/* A PNG whose chunks are whole but whose image data is damaged: gdk-pixbuf's reason. */
static void
test_undecodable (void)
{
  g_autofree char *a = NULL;
  g_autofree char *root = two_classes (&a);
  g_autofree char *path = g_build_filename (a, "ok.png", NULL);
  g_autofree char *bytes = NULL;
  gsize n;

  g_assert_true (g_file_get_contents (path, &bytes, &n, NULL));
  char *idat = NULL;
  for (gsize i = 0; i + 8 < n && idat == NULL; i++)
    if (memcmp (bytes + i, "IDAT", 4) == 0)
      idat = bytes + i;
  g_assert_nonnull (idat);
  idat[6] ^= 0x55; /* inside the data: libpng's CRC check fails */
  g_assert_true (g_file_set_contents (path, bytes, n, NULL));
  load_bad (root, &rgb_6x8, path, "gdk-pixbuf cannot decode it (");

  /* text under an image's name; an empty image file */
  g_autofree char *text = ks_test_write (a, "fake.jpeg", "hello");
  load_bad (root, &rgb_6x8, text, "neither a PNG nor a JPEG");
  g_assert_cmpint (g_unlink (text), ==, 0);
  g_assert_cmpint (g_unlink (path), ==, 0);
  g_autofree char *empty = ks_test_write (a, "empty.png", "");
  load_bad (root, &rgb_6x8, empty, "an empty file");
  ks_test_rmtree (root);
}

static void
test_bad_entries (void)
{
  g_autofree char *a = NULL;
  g_autofree char *root = two_classes (&a);

  /* files that are not images by their name, beside the images: skipped, as torchvision
   * skips them, with one warning */
  g_autofree char *notes = ks_test_write (a, "notes.txt", "labels");
  g_autofree char *readme = ks_test_write (a, "README.txt", "about");
  g_test_expect_message (NULL, G_LOG_LEVEL_WARNING, "*: skipped 2 files whose names are not "
                         ".png, .jpg or .jpeg (*README.txt, ...), as torchvision's "
                         "ImageFolder does");
  g_autoptr (KsTable) skipping = ks_table_load_image_folder (root, &rgb_6x8, NULL);
  g_test_assert_expected_messages ();
  g_assert_nonnull (skipping);
  g_assert_cmpuint (skipping->rows, ==, 4);
  g_assert_cmpint (g_unlink (notes), ==, 0);
  g_assert_cmpint (g_unlink (readme), ==, 0);

  /* a dangling link, in a class folder and at the root */
  g_autofree char *gone = g_build_filename (a, "gone.png", NULL);
  g_assert_cmpint (symlink ("/nonexistent/x.png", gone), ==, 0);
  load_bad (root, &rgb_6x8, gone, "a symbolic link to nothing");
  g_assert_cmpint (g_unlink (gone), ==, 0);
  g_autofree char *gone_class = g_build_filename (root, "c", NULL);
  g_assert_cmpint (symlink ("/nonexistent/c", gone_class), ==, 0);
  load_bad (root, &rgb_6x8, gone_class, "a symbolic link to nothing");
  g_assert_cmpint (g_unlink (gone_class), ==, 0);

  /* a folder inside a class folder */
  g_autofree char *sub = g_build_filename (a, "more", NULL);
  g_assert_cmpint (g_mkdir (sub, 0755), ==, 0);
  load_bad (root, &rgb_6x8, sub, "a folder inside a class folder");
  g_assert_cmpint (g_rmdir (sub), ==, 0);

  /* an empty class folder (hidden files do not count), named */
  g_autofree char *empty = g_build_filename (root, "empty", NULL);
  g_assert_cmpint (g_mkdir (empty, 0755), ==, 0);
  g_free (ks_test_write (empty, ".hidden", "x"));
  load_bad (root, &rgb_6x8, empty, "a class folder without images");
  ks_test_rmtree (empty);

  /* a link to a class folder is followed */
  g_autofree char *link = g_build_filename (root, "c", NULL);
  g_assert_cmpint (symlink (a, link), ==, 0);
  g_autoptr (KsTable) t = ks_table_load_image_folder (root, &rgb_6x8, NULL);
  g_assert_nonnull (t);
  g_assert_cmpint (t->classes, ==, 3);
  g_assert_cmpstr (t->class_names[2], ==, "c");
  ks_test_rmtree (root);
}

static void
test_bad_root (void)
{
  g_autofree char *a = NULL;
  g_autofree char *root = two_classes (&a);
  g_autofree char *missing = g_build_filename (root, "missing", NULL);
  g_autofree char *file = g_build_filename (a, "ok.png", NULL);
  g_autoptr (GError) error = NULL;

  g_assert_null (ks_table_load_image_folder (missing, &rgb_6x8, &error));
  g_assert_true (g_error_matches (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO));
  g_assert_nonnull (strstr (error->message, missing));
  load_bad (file, &rgb_6x8, file, "is not a folder");
  /* one class folder is not a classification */
  g_autofree char *b = g_build_filename (root, "b", NULL);
  ks_test_rmtree (b);
  load_bad (root, &rgb_6x8, root, "1 class folder; an image folder needs at least 2");
  ks_test_rmtree (root);
}

#endif

static void
test_options (void)
{
  const KsImageFolderOptions bad[] = { { 0, 8, 3 }, { 8, 4097, 3 }, { 8, 8, 2 }, { -1, 8, 1 } };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    load_bad ("/nonexistent", &bad[i], "/nonexistent", i == 2 ? "channels" : "each side");
}

static void
test_no_pixbuf (void)
{
#ifdef HAVE_PIXBUF
  g_test_skip ("built with gdk-pixbuf");
#else
  load_bad ("/nonexistent", &rgb_6x8, "/nonexistent", "built without gdk-pixbuf");
#endif
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/image-folder/options", test_options);
  g_test_add_func ("/image-folder/no-pixbuf", test_no_pixbuf);
#ifdef HAVE_PIXBUF
  g_test_add_func ("/image-folder/load", test_load);
  g_test_add_func ("/image-folder/truncated", test_truncated);
  g_test_add_func ("/image-folder/undecodable", test_undecodable);
  g_test_add_func ("/image-folder/bad-entries", test_bad_entries);
  g_test_add_func ("/image-folder/bad-root", test_bad_root);
#endif
  return g_test_run ();
}
