/* An image folder (torchvision's ImageFolder layout) as a table: the folders are listed
 * and checked first, then each PNG or JPEG is decoded by gdk-pixbuf, resized and made
 * floats. Files are untrusted: the container is walked before decoding, because
 * gdk-pixbuf's loaders decode a truncated file into a partly grey image without error. */
#include "table-private.h"

#ifdef HAVE_PIXBUF
#include <gdk-pixbuf/gdk-pixbuf.h>
#endif
#include <string.h>

#define MAX_PIXELS KS_TABLE_MAX_PIXELS

static gboolean
check_options (const char *root, const KsImageFolderOptions *o, GError **error)
{
  if (o->height < 1 || o->height > KS_IMAGE_FOLDER_MAX_SIDE || o->width < 1
      || o->width > KS_IMAGE_FOLDER_MAX_SIDE)
    return ks_table_bad (error, "%s: images resized to %dx%d (height x width); each side must "
                         "be 1 to %d", root, o->height, o->width, KS_IMAGE_FOLDER_MAX_SIDE) != NULL;
  if (o->channels != 1 && o->channels != 3)
    return ks_table_bad (error, "%s: %d channels; images are read as 1 (grey) or 3 (RGB)",
                         root, o->channels) != NULL;
  return TRUE;
}

#ifdef HAVE_PIXBUF

typedef enum { NOT_IMAGE, PNG, JPEG } Kind;

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The names in dir, hidden ones left out, sorted by strcmp (Python's sorted() on names). */
static GPtrArray *
list_sorted (const char *dir, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (GDir) d = g_dir_open (dir, 0, &local);
  GPtrArray *names;
  const char *name;

  if (d == NULL)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO, "%s: cannot list the folder (%s)",
                   dir, local->message);
      return NULL;
    }
  names = g_ptr_array_new_with_free_func (g_free);
  while ((name = g_dir_read_name (d)) != NULL)
    if (name[0] != '.')
      g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, compare_names);
  return names;
}

static gboolean
image_name (const char *name)
{
  const char *dot = strrchr (name, '.');
  return dot != NULL && (g_ascii_strcasecmp (dot, ".png") == 0
                         || g_ascii_strcasecmp (dot, ".jpg") == 0
                         || g_ascii_strcasecmp (dot, ".jpeg") == 0);
}

static gboolean
dangling (const char *path)
{
  return g_file_test (path, G_FILE_TEST_IS_SYMLINK) && !g_file_test (path, G_FILE_TEST_EXISTS);
}

/* Files of a class folder that are not images by their name (a README.txt, a labels
 * list), skipped as torchvision's ImageFolder skips them, and said once. */
typedef struct {
  gsize n;
  char *first;
} Skipped;

/* The image paths of class folder dir, sorted; NULL with an error naming the first entry
 * that is no image file, or dir when it holds none. */
static GPtrArray *
list_class (const char *dir, Skipped *skipped, GError **error)
{
  g_autoptr (GPtrArray) names = list_sorted (dir, error);
  g_autoptr (GPtrArray) files = g_ptr_array_new_with_free_func (g_free);

  if (names == NULL)
    return NULL;
  for (guint i = 0; i < names->len; i++)
    {
      const char *name = g_ptr_array_index (names, i);
      g_autofree char *path = g_build_filename (dir, name, NULL);
      if (dangling (path))
        return ks_table_bad (error, "%s: a symbolic link to nothing; fix or remove it", path);
      if (g_file_test (path, G_FILE_TEST_IS_DIR))
        return ks_table_bad (error, "%s: a folder inside a class folder; an image folder is read "
                             "one level deep (ROOT/<class>/<image>): move its images up or "
                             "remove it", path);
      if (!image_name (name))
        {
          if (skipped->n++ == 0)
            skipped->first = g_steal_pointer (&path);
          continue;
        }
      if (!g_file_test (path, G_FILE_TEST_IS_REGULAR))
        return ks_table_bad (error, "%s: not a regular file", path);
      g_ptr_array_add (files, g_steal_pointer (&path));
    }
  if (files->len == 0)
    return ks_table_bad (error, "%s: a class folder without images (.png, .jpg, .jpeg); add its "
                         "images or remove it", dir);
  return g_steal_pointer (&files);
}

static guint32
be32 (const guint8 *p)
{
  return (guint32) p[0] << 24 | (guint32) p[1] << 16 | (guint32) p[2] << 8 | p[3];
}

/* Walks a PNG's chunks to IEND; its size from IHDR. A reason when it is cut short. */
static const char *
walk_png (const guint8 *b, gsize n, guint32 *w, guint32 *h)
{
  for (gsize pos = 8; n - pos >= 12;)
    {
      guint32 len = be32 (b + pos);
      if (len > n - pos - 12)
        break;
      if (memcmp (b + pos + 4, "IHDR", 4) == 0 && len >= 8)
        *w = be32 (b + pos + 8), *h = be32 (b + pos + 12);
      if (memcmp (b + pos + 4, "IEND", 4) == 0)
        return NULL;
      pos += 12 + (gsize) len;
    }
  return "truncated: the file ends before the PNG's last (IEND) chunk";
}

/* Walks a JPEG's segments and entropy-coded data to the end-of-image marker; its size
 * from the frame header (SOFn). A reason when it is cut short. */
static const char *
walk_jpeg (const guint8 *b, gsize n, guint32 *w, guint32 *h)
{
  gsize pos = 2;

  while (pos < n)
    {
      if (b[pos] != 0xff)
        {
          pos++; /* stray bytes between segments: libjpeg skips them too */
          continue;
        }
      while (pos < n && b[pos] == 0xff)
        pos++; /* fill bytes */
      if (pos >= n)
        break;
      guint8 m = b[pos++];
      if (m == 0xd9)
        return NULL;
      if (m == 0x01 || (m >= 0xd0 && m <= 0xd7))
        continue; /* markers without a segment */
      if (n - pos < 2)
        break;
      gsize len = (gsize) b[pos] << 8 | b[pos + 1];
      if (len < 2 || len > n - pos)
        break;
      if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc && len >= 7)
        *h = (guint32) b[pos + 3] << 8 | b[pos + 4], *w = (guint32) b[pos + 5] << 8 | b[pos + 6];
      pos += len;
      if (m == 0xda) /* a scan: its data runs to the next marker other than a restart */
        while (pos + 1 < n && !(b[pos] == 0xff && b[pos + 1] != 0
                                && !(b[pos + 1] >= 0xd0 && b[pos + 1] <= 0xd7)))
          pos++;
    }
  return "truncated: the file ends before the JPEG's end-of-image marker";
}

const char *
ks_image_check (const guint8 *b, gsize n, gboolean *png, guint32 *w, guint32 *h)
{
  static const guint8 png_magic[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
  Kind kind = n >= 8 && memcmp (b, png_magic, 8) == 0 ? PNG
              : n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff ? JPEG : NOT_IMAGE;

  *w = *h = 0;
  *png = kind == PNG;
  /* only PNG and JPEG: the other loaders would take untrusted files unchecked */
  if (kind == NOT_IMAGE)
    return n == 0 ? "an empty file; only PNG and JPEG are read"
                  : "neither a PNG nor a JPEG by its first bytes; only PNG and JPEG are read";
  return kind == PNG ? walk_png (b, n, w, h) : walk_jpeg (b, n, w, h);
}

/* Decodes the whole PNG or JPEG b[0, n) of `path`; NULL with an error naming it. */
static GdkPixbuf *
decode (const char *path, const guint8 *b, gsize n, GError **error)
{
  guint32 w, h;
  gboolean png;
  g_autoptr (GError) local = NULL;
  const char *bad = ks_image_check (b, n, &png, &w, &h);
  Kind kind = png ? PNG : JPEG;

  if (bad != NULL)
    return ks_table_bad (error, "%s: %s", path, bad);
  if ((guint64) w * h > MAX_PIXELS)
    return ks_table_bad (error, "%s: a %ux%u image, over the %d megapixels an image may have "
                         "here; shrink it", path, w, h, (int) (MAX_PIXELS >> 20));

  g_autoptr (GdkPixbufLoader) loader = gdk_pixbuf_loader_new_with_type (kind == PNG ? "png"
                                                                        : "jpeg", &local);
  if (loader == NULL)
    return ks_table_bad (error, "%s: gdk-pixbuf has no %s loader (%s)", path,
                         kind == PNG ? "PNG" : "JPEG", local->message);
  gboolean wrote = gdk_pixbuf_loader_write (loader, b, n, &local);
  /* close even after a failed write: a loader must be closed before it is freed */
  gboolean closed = gdk_pixbuf_loader_close (loader, wrote ? &local : NULL);
  GdkPixbuf *pb = gdk_pixbuf_loader_get_pixbuf (loader);
  if (!wrote || !closed || pb == NULL)
    return ks_table_bad (error, "%s: gdk-pixbuf cannot decode it (%s); remove or replace it",
                         path, local != NULL ? local->message : "no image in it");
  return g_object_ref (pb);
}

/* Decodes the image at path into out: options' height x width x channels floats. */
static gboolean
load_image (const char *path, const KsImageFolderOptions *o, float *out, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (GMappedFile) map = g_mapped_file_new (path, FALSE, &local);
  g_autoptr (GdkPixbuf) raw = NULL;
  g_autoptr (GdkPixbuf) pb = NULL;

  if (map == NULL)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO, "%s: cannot read it (%s)", path,
                   local->message);
      return FALSE;
    }
  raw = decode (path, (const guint8 *) g_mapped_file_get_contents (map),
                g_mapped_file_get_length (map), error);
  if (raw == NULL)
    return FALSE;
  if (gdk_pixbuf_get_width (raw) == o->width && gdk_pixbuf_get_height (raw) == o->height)
    pb = g_object_ref (raw);
  else if ((pb = gdk_pixbuf_scale_simple (raw, o->width, o->height, GDK_INTERP_BILINEAR)) == NULL)
    return ks_table_bad (error, "%s: out of memory resizing it to %dx%d", path, o->height,
                         o->width) != NULL;

  /* gdk-pixbuf gives 8-bit RGB or RGBA whatever the file (grey is expanded to RGB) */
  const guint8 *px = gdk_pixbuf_read_pixels (pb);
  int stride = gdk_pixbuf_get_rowstride (pb), step = gdk_pixbuf_get_n_channels (pb);
  for (int y = 0; y < o->height; y++)
    for (int x = 0; x < o->width; x++)
      {
        const guint8 *p = px + (gsize) y * stride + (gsize) x * step;
        float *q = out + ((gsize) y * o->width + x) * o->channels;
        if (o->channels == 1)
          q[0] = (float) (p[0] + p[1] + p[2]) / (3 * 255.0f);
        else
          for (int k = 0; k < 3; k++)
            q[k] = p[k] / 255.0f;
      }
  return TRUE;
}

KsTable *
ks_table_load_image_folder (const char *root, const KsImageFolderOptions *options,
                            GError **error)
{
  g_autoptr (GPtrArray) names = NULL;
  g_autoptr (GPtrArray) classes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) files = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  gsize rows = 0;
  Skipped skipped = { 0, NULL };

  g_return_val_if_fail (root != NULL && options != NULL, NULL);
  if (!check_options (root, options, error))
    return NULL;
  if (!g_file_test (root, G_FILE_TEST_EXISTS))
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO, "%s: no such folder (an image "
                   "folder holds one sub-folder of images per class)", root);
      return NULL;
    }
  if (!g_file_test (root, G_FILE_TEST_IS_DIR))
    return ks_table_bad (error, "%s is not a folder (an image folder holds one sub-folder of "
                         "images per class: ROOT/<class>/<image>)", root);

  /* every class's files are listed before anything is decoded: a bad entry fails fast */
  if ((names = list_sorted (root, error)) == NULL)
    return NULL;
  for (guint i = 0; i < names->len; i++)
    {
      const char *name = g_ptr_array_index (names, i);
      g_autofree char *path = g_build_filename (root, name, NULL);
      if (dangling (path))
        return ks_table_bad (error, "%s: a symbolic link to nothing; fix or remove it", path);
      if (!g_file_test (path, G_FILE_TEST_IS_DIR))
        continue; /* files beside the classes (a README, a labels list) are not classes */
      GPtrArray *list = list_class (path, &skipped, error);
      if (list == NULL)
        {
          g_free (skipped.first);
          return NULL;
        }
      g_ptr_array_add (classes, g_strdup (name));
      g_ptr_array_add (files, list);
      rows += list->len;
    }
  if (skipped.n > 0)
    g_warning ("%s: skipped %" G_GSIZE_FORMAT " file%s whose name%s not .png, .jpg or .jpeg "
               "(%s%s), as torchvision's ImageFolder does", root, skipped.n,
               skipped.n == 1 ? "" : "s", skipped.n == 1 ? " is" : "s are", skipped.first,
               skipped.n > 1 ? ", ..." : "");
  g_clear_pointer (&skipped.first, g_free);
  if (classes->len < 2)
    return ks_table_bad (error, "%s: %u class folder%s; an image folder needs at least 2, one "
                         "sub-folder of images per class (ROOT/<class>/<image>)", root,
                         classes->len, classes->len == 1 ? "" : "s");
  if (classes->len >= KS_TABLE_MAX_CLASSES)
    return ks_table_bad (error, "%s: %u class folders, more than the %d classes a table may "
                         "have", root, classes->len, KS_TABLE_MAX_CLASSES);

  gsize features = (gsize) options->height * options->width * options->channels;
  g_autoptr (KsTable) t = ks_table_alloc (root, rows, features, FALSE, error);
  if (t == NULL)
    return NULL;
  t->ndim = 3;
  t->shape[0] = options->height;
  t->shape[1] = options->width;
  t->shape[2] = options->channels;
  t->classes = classes->len;
  gsize r = 0;
  for (guint c = 0; c < files->len; c++)
    {
      GPtrArray *list = g_ptr_array_index (files, c);
      for (guint k = 0; k < list->len; k++, r++)
        {
          if (!load_image (g_ptr_array_index (list, k), options, t->x + r * features, error))
            return NULL;
          t->y[r] = c;
        }
    }
  g_ptr_array_add (classes, NULL);
  t->class_names = (char **) g_ptr_array_steal (classes, NULL);
  return g_steal_pointer (&t);
}

KsTable *
ks_table_load_images (const char *const *paths, const KsImageFolderOptions *options,
                      GError **error)
{
  g_return_val_if_fail (paths != NULL && paths[0] != NULL && options != NULL, NULL);
  if (!check_options (paths[0], options, error))
    return NULL;
  gsize rows = g_strv_length ((char **) paths);
  gsize features = (gsize) options->height * options->width * options->channels;
  g_autoptr (KsTable) t = ks_table_alloc (paths[0], rows, features, FALSE, error);
  if (t == NULL)
    return NULL;
  g_clear_pointer (&t->y, g_free);
  t->ndim = 3;
  t->shape[0] = options->height;
  t->shape[1] = options->width;
  t->shape[2] = options->channels;
  for (gsize r = 0; r < rows; r++)
    {
      if (!g_file_test (paths[r], G_FILE_TEST_EXISTS))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO, "%s: no such file",
                       paths[r]);
          return NULL;
        }
      if (!g_file_test (paths[r], G_FILE_TEST_IS_REGULAR))
        return ks_table_bad (error, "%s: not a regular file (give PNG or JPEG files; a "
                             "folder of class folders is --format image_folder)", paths[r]);
      if (!load_image (paths[r], options, t->x + r * features, error))
        return NULL;
    }
  return g_steal_pointer (&t);
}

#else

KsTable *
ks_table_load_images (const char *const *paths, const KsImageFolderOptions *options,
                      GError **error)
{
  g_return_val_if_fail (paths != NULL && paths[0] != NULL && options != NULL, NULL);
  return ks_table_bad (error, "%s: this ksdist was built without gdk-pixbuf, which decodes "
                       "images; install it (libgdk-pixbuf-2.0-dev), then configure and build "
                       "again", paths[0]);
}

KsTable *
ks_table_load_image_folder (const char *root, const KsImageFolderOptions *options,
                            GError **error)
{
  g_return_val_if_fail (root != NULL && options != NULL, NULL);
  if (!check_options (root, options, error))
    return NULL;
  return ks_table_bad (error, "%s: this ksdist was built without gdk-pixbuf, which decodes "
                       "the images of an image folder; install it (libgdk-pixbuf-2.0-dev), "
                       "then configure and build again", root);
}

#endif
