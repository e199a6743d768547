/* The few-shot image readers on real files: sets made by `ksdist datagen glyphs` and
 * `ksdist datagen images`, a JPEG written here, and broken files (empty, not an image, a
 * truncated PNG); sampling without replacement, rotations, the cache, tasks, errors. */
#include "testutil.h"
#include <ksdist/tasks.h>

#include <gdk-pixbuf/gdk-pixbuf.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

/* A set written by `ksdist datagen KIND` with `extra` options into a new folder. */
static char *
make_set (const char *kind, const char *const *extra)
{
  g_autofree char *dir = ks_test_tmpdir ();
  return ks_test_datagen (kind, dir, extra);
}

static KsImageSet *
open_set (const char *dir, KsImageKind kind, gsize cache, gboolean skip, gboolean rotations)
{
  KsImageOptions o = { kind, 0, cache, skip, rotations };
  g_autoptr (GError) error = NULL;
  KsImageSet *set = ks_image_set_open (dir, &o, &error);
  g_assert_no_error (error);
  return set;
}

/* Whether images a and b (n floats) are equal. */
static gboolean
same (const float *a, const float *b, gsize n)
{
  return memcmp (a, b, n * sizeof *a) == 0;
}

static void
test_glyphs (void)
{
  const char *const extra[] = { "--alphabets", "4", "--characters", "6", "--per-class", "5",
                                NULL };
  g_autofree char *dir = make_set ("glyphs", extra);
  g_autoptr (KsImageSet) set = open_set (dir, KS_IMAGES_CHARACTERS, 1 << 20, FALSE, TRUE);
  g_autoptr (GError) error = NULL;
  gsize floats = ks_image_set_image_floats (set);

  /* 4 scripts: 2 train (each character 4 times, rotated), 1 val, 1 test; 6 each */
  g_assert_cmpuint (floats, ==, 28 * 28);
  g_assert_cmpuint (ks_image_set_n_classes (set, KS_SPLIT_TRAIN), ==, 2 * 6 * 4);
  g_assert_cmpuint (ks_image_set_n_classes (set, KS_SPLIT_VAL), ==, 6);
  g_assert_cmpuint (ks_image_set_n_classes (set, KS_SPLIT_TEST), ==, 6);
  g_assert_nonnull (strstr (ks_image_set_class_name (set, KS_SPLIT_TRAIN, 1), "/character01@90"));
  g_assert_cmpuint (ks_image_set_class_size (set, KS_SPLIT_TEST, 0), ==, 5);

  /* all 5 images of a class asked for 8: 5 distinct ones, in [0, 1], ink and paper both */
  g_autofree float *imgs = g_new (float, 8 * floats);
  g_autoptr (GRand) rng = g_rand_new_with_seed (1);
  g_assert_cmpint (ks_image_set_sample (set, KS_SPLIT_TEST, 2, 8, rng, imgs, &error), ==, 5);
  for (int i = 0; i < 5; i++)
    {
      float lo = 1, hi = 0;
      for (gsize k = 0; k < floats; k++)
        lo = MIN (lo, imgs[i * floats + k]), hi = MAX (hi, imgs[i * floats + k]);
      g_assert_cmpfloat (lo, <, 0.2);
      g_assert_cmpfloat (hi, >, 0.99);
      g_assert_cmpfloat (hi, <=, 1);
      g_assert_cmpfloat (lo, >=, 0);
      for (int j = 0; j < i; j++)
        g_assert_false (same (imgs + i * floats, imgs + j * floats, floats));
    }

  /* the same seed draws the same images; the rotated class is the image turned
   * counter-clockwise: its pixel (y, x) is the original's (x, 27 - y) */
  g_autofree float *plain = g_new (float, 2 * floats), *turned = g_new (float, 2 * floats);
  g_autoptr (GRand) r1 = g_rand_new_with_seed (9), r2 = g_rand_new_with_seed (9);
  g_assert_cmpint (ks_image_set_sample (set, KS_SPLIT_TRAIN, 0, 2, r1, plain, &error), ==, 2);
  g_assert_cmpint (ks_image_set_sample (set, KS_SPLIT_TRAIN, 1, 2, r2, turned, &error), ==, 2);
  for (int y = 0; y < 28; y++)
    for (int x = 0; x < 28; x++)
      g_assert_cmpfloat (turned[y * 28 + x], ==, plain[x * 28 + 27 - y]);
  /* without the augmentation the train split has each character once */
  g_autoptr (KsImageSet) bare = open_set (dir, KS_IMAGES_CHARACTERS, 0, FALSE, FALSE);
  g_assert_cmpuint (ks_image_set_n_classes (bare, KS_SPLIT_TRAIN), ==, 2 * 6);
  /* the cache (set) and no cache (bare) give the same images */
  g_autoptr (GRand) r3 = g_rand_new_with_seed (9);
  g_autofree float *again = g_new (float, 2 * floats);
  g_assert_cmpint (ks_image_set_sample (bare, KS_SPLIT_TRAIN, 0, 2, r3, again, &error), ==, 2);
  g_assert_true (same (plain, again, 2 * floats));

  /* a 5-way 2-image task: grouped by class, labels 0 .. 4 */
  g_autofree float *task = g_new (float, 10 * floats);
  gint64 labels[10];
  g_assert_true (ks_image_set_task (set, KS_SPLIT_VAL, 5, 2, rng, task, labels, &error));
  for (int i = 0; i < 10; i++)
    g_assert_cmpint (labels[i], ==, i / 2);
  g_assert_false (ks_image_set_task (set, KS_SPLIT_VAL, 7, 2, rng, task, labels, &error));
  g_assert_cmpstr (error->message, ==, "a 7-way task of 2 images a class from the val split, "
                   "which has 6 classes");
  g_clear_error (&error);
  g_assert_false (ks_image_set_task (set, KS_SPLIT_VAL, 2, 6, rng, task, labels, &error));
  g_assert_nonnull (strstr (error->message, "has 5 readable images; a task takes 6"));
  g_autofree char *root = g_path_get_dirname (dir);
  ks_test_rmtree (root);
}

static void
write_file (const char *path, const void *data, gsize len)
{
  g_assert_true (g_file_set_contents (path, data, len, NULL));
}

/* CRC-32 of PNG chunks (ISO 3309), bit by bit */
static guint32
crc32_of (const guint8 *p, gsize n)
{
  guint32 c = 0xffffffffu;
  for (gsize i = 0; i < n; i++)
    {
      c ^= p[i];
      for (int k = 0; k < 8; k++)
        c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
  return c ^ 0xffffffffu;
}

/* A valid PNG header declaring a 60000 x 60000 RGB image (10 GiB decoded), then the
 * start of its pixels (an IDAT chunk of 8 zero bytes, where a reader learns the size): 53
 * bytes. */
static void
png_bomb (guint8 out[53])
{
  static const guint8 head[] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13,
                                 'I', 'H', 'D', 'R', 0, 0, 0xea, 0x60, 0, 0, 0xea, 0x60,
                                 8, 2, 0, 0, 0 };
  memcpy (out, head, sizeof head);
  guint32 crc = crc32_of (head + 12, 17);
  static const guint8 idat[] = { 0, 0, 0, 8, 'I', 'D', 'A', 'T', 0, 0, 0, 0, 0, 0, 0, 0 };
  for (int k = 0; k < 4; k++)
    out[29 + k] = (guint8) (crc >> (24 - 8 * k));
  memcpy (out + 33, idat, sizeof idat);
  crc = crc32_of (idat + 4, 12);
  for (int k = 0; k < 4; k++)
    out[49 + k] = (guint8) (crc >> (24 - 8 * k));
}

static void
test_colour_and_bad_files (void)
{
  const char *const extra[] = { "--classes", "5", "--per-class", "3", NULL };
  g_autofree char *dir = make_set ("images", extra);
  g_autofree char *cls = g_build_filename (dir, "test", "class005", NULL);
  g_autofree char *png = g_build_filename (cls, "01.png", NULL);
  g_autofree char *jpeg = g_build_filename (cls, "04.jpg", NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (GdkPixbuf) pb = gdk_pixbuf_new_from_file (png, &error);

  /* a JPEG beside the PNGs decodes as well, close to the PNG it was saved from */
  g_assert_true (gdk_pixbuf_save (pb, jpeg, "jpeg", &error, "quality", "95", NULL));
  g_autoptr (KsImageSet) set = open_set (dir, KS_IMAGES_COLOUR, 1 << 20, FALSE, TRUE);
  gsize floats = ks_image_set_image_floats (set);
  g_assert_cmpuint (floats, ==, 84 * 84 * 3);
  g_assert_cmpuint (ks_image_set_n_classes (set, KS_SPLIT_TRAIN), ==, 3); /* no rotations */
  g_autofree float *imgs = g_new (float, 4 * floats);
  g_autoptr (GRand) rng = g_rand_new_with_seed (2);
  gsize last = ks_image_set_n_classes (set, KS_SPLIT_TEST) - 1;
  g_assert_cmpint (ks_image_set_sample (set, KS_SPLIT_TEST, last, 4, rng, imgs, &error), ==, 4);
  int matched = 0;
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++)
      {
        double diff = 0;
        for (gsize k = 0; k < floats; k++)
          diff += fabsf (imgs[a * floats + k] - imgs[b * floats + k]);
        matched += a != b && diff / floats < 0.08; /* the PNG and its JPEG (others: > 0.14) */
      }
  g_assert_cmpint (matched, ==, 2);

  /* broken files (empty, text, a truncated PNG, a PNG declaring a huge image): each an
   * error naming it, or skipped and counted */
  static const guint8 png_head[] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13,
                                     'I', 'H', 'D', 'R', 0, 0, 0, 84 };
  guint8 bomb[53];
  png_bomb (bomb);
  const char *const names[] = { "05.png", "06.png", "07.png", "08.png" };
  const char *const contents[] = { "", "not an image\n", (const char *) png_head,
                                   (const char *) bomb };
  const char *const reasons[] = { "not an image", "not an image", "not an image",
                                  "a 60000x60000 image, over the 64 megapixels" };
  const gsize lengths[] = { 0, 13, sizeof png_head, sizeof bomb };
  for (int i = 0; i < 4; i++)
    {
      g_autofree char *broken_dir = g_build_filename (dir, "val", NULL);
      g_autoptr (GDir) d = g_dir_open (broken_dir, 0, NULL);
      g_autofree char *vcls = g_build_filename (broken_dir, g_dir_read_name (d), NULL);
      g_autofree char *path = g_build_filename (vcls, names[i], NULL);
      write_file (path, contents[i], lengths[i]);

      g_autoptr (KsImageSet) strict = open_set (dir, KS_IMAGES_COLOUR, 0, FALSE, FALSE);
      g_autoptr (GRand) r = g_rand_new_with_seed (3);
      g_autofree float *all = g_new (float, 10 * floats);
      g_assert_cmpint (ks_image_set_sample (strict, KS_SPLIT_VAL, 0, 10, r, all, &error), ==,
                       -1);
      g_assert_nonnull (strstr (error->message, path));
      if (strstr (error->message, reasons[i]) == NULL)
        g_error ("file %d: %s", i, error->message);
      g_assert_nonnull (strstr (error->message, "bad_images = skip"));
      g_clear_error (&error);

      g_autoptr (KsImageSet) lenient = open_set (dir, KS_IMAGES_COLOUR, 0, TRUE, FALSE);
      g_assert_cmpint (ks_image_set_sample (lenient, KS_SPLIT_VAL, 0, 10, r, all, &error), ==,
                       3);
      g_assert_no_error (error);
      g_assert_cmpuint (ks_image_set_skipped (lenient), ==, 1);
      g_assert_cmpint (g_unlink (path), ==, 0);
    }

  /* a JPEG cut short, its scan data half there, is refused, not decoded half grey */
  {
    g_autofree char *whole = NULL;
    gsize len;
    g_assert_true (g_file_get_contents (jpeg, &whole, &len, NULL));
    g_autofree char *broken_dir = g_build_filename (dir, "val", NULL);
    g_autoptr (GDir) d = g_dir_open (broken_dir, 0, NULL);
    g_autofree char *vcls = g_build_filename (broken_dir, g_dir_read_name (d), NULL);
    g_autofree char *cut = g_build_filename (vcls, "09.jpg", NULL);
    write_file (cut, whole, len / 2);
    g_autoptr (KsImageSet) strict = open_set (dir, KS_IMAGES_COLOUR, 0, FALSE, FALSE);
    g_autoptr (GRand) r = g_rand_new_with_seed (3);
    g_autofree float *all = g_new (float, 10 * floats);
    g_assert_cmpint (ks_image_set_sample (strict, KS_SPLIT_VAL, 0, 10, r, all, &error), ==, -1);
    g_assert_nonnull (strstr (error->message, cut));
    g_assert_nonnull (strstr (error->message, "truncated: the file ends before the JPEG's "
                                              "end-of-image marker"));
    g_clear_error (&error);
    g_assert_cmpint (g_unlink (cut), ==, 0);
  }

  /* a missing split and an empty class folder are named */
  g_autofree char *val = g_build_filename (dir, "val", NULL);
  g_autofree char *moved = g_build_filename (dir, "val.away", NULL);
  g_assert_cmpint (g_rename (val, moved), ==, 0);
  KsImageOptions o = { KS_IMAGES_COLOUR, 0, 0, FALSE, FALSE };
  g_assert_null (ks_image_set_open (dir, &o, &error));
  g_assert_nonnull (strstr (error->message, "/val: no such folder; an image set holds train, "
                            "val and test"));
  g_clear_error (&error);
  g_assert_cmpint (g_rename (moved, val), ==, 0);
  g_autofree char *empty = g_build_filename (dir, "train", "empty", NULL);
  g_assert_cmpint (g_mkdir (empty, 0755), ==, 0);
  g_autofree char *sub = g_build_filename (empty, "inner", NULL);
  g_assert_cmpint (g_mkdir (sub, 0755), ==, 0);
  g_assert_null (ks_image_set_open (dir, &o, &error));
  g_assert_nonnull (strstr (error->message, "/train/empty/inner: a class folder without image "
                            "files"));
  g_autofree char *root = g_path_get_dirname (dir);
  ks_test_rmtree (root);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/images/glyphs", test_glyphs);
  g_test_add_func ("/images/colour-and-bad-files", test_colour_and_bad_files);
  return g_test_run ();
}
