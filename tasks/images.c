/* Image folders for few-shot learning: the classes of train, val and test, images decoded
 * by gdk-pixbuf (PNG, JPEG), resized, made float32 in [0, 1] and cached, sampled without
 * replacement, rotated for the characters' augmentation. */
#include "table-private.h"


#ifdef HAVE_PIXBUF
#include <gdk-pixbuf/gdk-pixbuf.h>
#endif
#include <string.h>

static const char *const split_names[] = { "train", "val", "test" };

#define MAX_IMAGE_PIXELS KS_TABLE_MAX_PIXELS

typedef struct {
  char *name;
  GPtrArray *files; /* paths; shared by a class's rotated copies */
  int rotation;     /* degrees, counter-clockwise */
} ImageClass;

struct KsImageSet {
  KsImageOptions options;
  int channels;
  GPtrArray *classes[3]; /* ImageClass* per split */
  GHashTable *cache;     /* path -> float * (unrotated), up to options.cache_bytes */
  gsize cached_bytes;
  GHashTable *bad;       /* paths skipped because they did not decode */
};

static void
image_class_free (gpointer p)
{
  ImageClass *c = p;
  g_free (c->name);
  g_ptr_array_unref (c->files);
  g_free (c);
}

void
ks_image_set_free (KsImageSet *set)
{
  if (set == NULL)
    return;
  for (int s = 0; s < 3; s++)
    if (set->classes[s] != NULL)
      g_ptr_array_unref (set->classes[s]);
  g_hash_table_unref (set->cache);
  g_hash_table_unref (set->bad);
  g_free (set);
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The sorted names in `dir` that are folders (want_dirs) or regular files, skipping
 * hidden ones; NULL with an error if it cannot be read. */
static GPtrArray *
list_dir (const char *dir, gboolean want_dirs, GError **error)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, error);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  if (d == NULL)
    return NULL;
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      if (name[0] != '.'
          && g_file_test (path, want_dirs ? G_FILE_TEST_IS_DIR : G_FILE_TEST_IS_REGULAR))
        g_ptr_array_add (names, g_strdup (name));
    }
  g_ptr_array_sort (names, compare_names);
  return g_steal_pointer (&names);
}

/* Adds the class in folder `path` named `name`, with its rotated copies if asked. */
static gboolean
add_class (KsImageSet *set, GPtrArray *classes, const char *path, const char *name,
           gboolean rotate, GError **error)
{
  g_autoptr (GPtrArray) files = list_dir (path, FALSE, error);

  if (files == NULL)
    return FALSE;
  if (files->len == 0)
    return ks_tasks_invalid (error, "%s: a class folder without image files; remove it or add its "
                       "images", path);
  for (guint i = 0; i < files->len; i++)
    {
      char *file = g_build_filename (path, g_ptr_array_index (files, i), NULL);
      g_free (g_ptr_array_index (files, i));
      g_ptr_array_index (files, i) = file;
    }
  for (int r = 0; r < (rotate ? 4 : 1); r++)
    {
      ImageClass *c = g_new0 (ImageClass, 1);
      c->name = r == 0 ? g_strdup (name) : g_strdup_printf ("%s@%d", name, 90 * r);
      c->files = g_ptr_array_ref (files);
      c->rotation = 90 * r;
      g_ptr_array_add (classes, c);
    }
  return TRUE;
}

/* The classes of one split: a folder of files is a class; a folder of folders is an
 * alphabet whose folders are classes. */
static gboolean
read_split (KsImageSet *set, const char *dir, KsSplit split, GError **error)
{
  g_autofree char *root = g_build_filename (dir, split_names[split], NULL);
  g_autoptr (GPtrArray) entries = NULL;
  gboolean rotate = set->options.rotations && set->options.kind == KS_IMAGES_CHARACTERS
                    && split == KS_SPLIT_TRAIN;

  if (!g_file_test (root, G_FILE_TEST_IS_DIR))
    return ks_tasks_invalid (error, "%s: no such folder; an image set holds train, val and test, "
                       "each with one folder of images per class (`ksdist datagen glyphs "
                       "DIR` makes one)", root);
  if ((entries = list_dir (root, TRUE, error)) == NULL)
    return FALSE;
  set->classes[split] = g_ptr_array_new_with_free_func (image_class_free);
  for (guint i = 0; i < entries->len; i++)
    {
      const char *entry = g_ptr_array_index (entries, i);
      g_autofree char *path = g_build_filename (root, entry, NULL);
      g_autoptr (GPtrArray) inner = list_dir (path, TRUE, error);
      if (inner == NULL)
        return FALSE;
      if (inner->len == 0 && !add_class (set, set->classes[split], path, entry, rotate, error))
        return FALSE;
      for (guint j = 0; j < inner->len; j++)
        {
          g_autofree char *sub = g_build_filename (path, g_ptr_array_index (inner, j), NULL);
          g_autofree char *name = g_strdup_printf ("%s/%s", entry,
                                                   (char *) g_ptr_array_index (inner, j));
          if (!add_class (set, set->classes[split], sub, name, rotate, error))
            return FALSE;
        }
    }
  if (set->classes[split]->len == 0)
    return ks_tasks_invalid (error, "%s: no class folders in it", root);
  return TRUE;
}

KsImageSet *
ks_image_set_open (const char *dir, const KsImageOptions *options, GError **error)
{
  g_autoptr (KsImageSet) set = g_new0 (KsImageSet, 1);

  set->options = *options;
  if (set->options.size <= 0)
    set->options.size = options->kind == KS_IMAGES_CHARACTERS ? 28 : 84;
  set->channels = options->kind == KS_IMAGES_CHARACTERS ? 1 : 3;
  set->cache = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  set->bad = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  if (set->options.size > 4096)
    return ks_tasks_invalid (error, "images of %d pixels a side: at most 4096", set->options.size),
           NULL;
  if (!g_file_test (dir, G_FILE_TEST_IS_DIR))
    return ks_tasks_invalid (error, "%s: no such folder of images (train, val and test, one folder "
                       "per class in each)", dir), NULL;
  for (KsSplit s = KS_SPLIT_TRAIN; s <= KS_SPLIT_TEST; s++)
    if (!read_split (set, dir, s, error))
      return NULL;
  return g_steal_pointer (&set);
}

gsize
ks_image_set_image_floats (const KsImageSet *set)
{
  return (gsize) set->options.size * set->options.size * set->channels;
}

int
ks_image_set_size (const KsImageSet *set)
{
  return set->options.size;
}

int
ks_image_set_channels (const KsImageSet *set)
{
  return set->channels;
}

gsize
ks_image_set_n_classes (const KsImageSet *set, KsSplit split)
{
  g_return_val_if_fail (split <= KS_SPLIT_TEST, 0);
  return set->classes[split]->len;
}

static const ImageClass *
class_at (const KsImageSet *set, KsSplit split, gsize i)
{
  g_return_val_if_fail (split <= KS_SPLIT_TEST && i < set->classes[split]->len, NULL);
  return g_ptr_array_index (set->classes[split], i);
}

const char *
ks_image_set_class_name (const KsImageSet *set, KsSplit split, gsize i)
{
  return class_at (set, split, i)->name;
}

gsize
ks_image_set_class_size (const KsImageSet *set, KsSplit split, gsize i)
{
  return class_at (set, split, i)->files->len;
}

guint
ks_image_set_skipped (const KsImageSet *set)
{
  return g_hash_table_size (set->bad);
}

/* The file decoded, resized and made floats in [0, 1] (transparent pixels over white; grey
 * as the luma of ITU-R BT.601); NULL with an error naming the file. */
#ifdef HAVE_PIXBUF
static float *
decode (const KsImageSet *set, const char *path, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (GdkPixbuf) raw = NULL;
  g_autoptr (GdkPixbuf) pb = NULL;
  int size = set->options.size, width = 0, height = 0;

  /* the header's size first: a small file may declare a huge image */
  if (gdk_pixbuf_get_file_info (path, &width, &height) != NULL
      && ((guint64) width * height > MAX_IMAGE_PIXELS))
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "%s: a %dx%d image, over the %d megapixels an image may have here; shrink "
                   "it, or set [data] bad_images = skip to skip such files", path, width,
                   height, (int) (MAX_IMAGE_PIXELS >> 20));
      return NULL;
    }
  /* cut short or not PNG/JPEG: gdk-pixbuf would decode a part as grey without an error */
  g_autofree guint8 *bytes = NULL;
  gsize length = 0;
  guint32 w, h;
  gboolean png;
  const char *bad = !g_file_get_contents (path, (char **) &bytes, &length, NULL)
                        ? "it cannot be read"
                        : ks_image_check (bytes, length, &png, &w, &h);
  if (bad != NULL)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "%s: not an image ksdist reads (%s); remove it, or set [data] bad_images = "
                   "skip to skip such files", path, bad);
      return NULL;
    }
  if ((raw = gdk_pixbuf_new_from_file (path, &local)) == NULL)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "%s: not an image gdk-pixbuf can read (%s); remove it, or set [data] "
                   "bad_images = skip to skip such files", path, local->message);
      return NULL;
    }
  if ((pb = gdk_pixbuf_scale_simple (raw, size, size, GDK_INTERP_BILINEAR)) == NULL)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "%s: out of memory resizing it to %dx%d", path, size, size);
      return NULL;
    }
  const guint8 *px = gdk_pixbuf_read_pixels (pb);
  int stride = gdk_pixbuf_get_rowstride (pb), n = gdk_pixbuf_get_n_channels (pb);
  gboolean alpha = gdk_pixbuf_get_has_alpha (pb);
  float *out = g_new (float, (gsize) size * size * set->channels);
  for (int y = 0; y < size; y++)
    for (int x = 0; x < size; x++)
      {
        const guint8 *p = px + (gsize) y * stride + (gsize) x * n;
        float a = alpha ? p[3] / 255.0f : 1, rgb[3];
        for (int k = 0; k < 3; k++)
          rgb[k] = (a * p[k] + (1 - a) * 255) / 255.0f;
        float *o = out + ((gsize) y * size + x) * set->channels;
        if (set->channels == 1)
          o[0] = 0.299f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2];
        else
          memcpy (o, rgb, sizeof rgb);
      }
  return out;
}
#else
static float *
decode (const KsImageSet *set, const char *path, GError **error)
{
  g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
               "%s: this ksdist was built without gdk-pixbuf, which decodes images; install "
               "it (see configure's summary) and build again", path);
  return NULL;
}
#endif

/* The image of `path` (from the cache, or decoded and cached while it has room) rotated by
 * `rotation` into out; FALSE with an error, or FALSE with none when it was skipped. */
static gboolean
read_image (KsImageSet *set, const char *path, int rotation, float *out, GError **error)
{
  gsize floats = ks_image_set_image_floats (set), bytes = floats * sizeof (float);
  float *img = g_hash_table_lookup (set->cache, path);
  g_autofree float *owned = NULL;
  g_autoptr (GError) local = NULL;
  int size = set->options.size, ch = set->channels;

  if (img == NULL)
    {
      if ((owned = decode (set, path, &local)) == NULL)
        {
          if (!set->options.skip_bad)
            {
              g_propagate_error (error, g_steal_pointer (&local));
              return FALSE;
            }
          g_hash_table_add (set->bad, g_strdup (path));
          return FALSE;
        }
      img = owned;
      if (set->cached_bytes + bytes <= set->options.cache_bytes)
        {
          g_hash_table_insert (set->cache, g_strdup (path), g_steal_pointer (&owned));
          set->cached_bytes += bytes;
        }
    }
  /* out (y, x) from img: counter-clockwise by 90 takes column size - 1 - y, row x */
  for (int y = 0; y < size; y++)
    for (int x = 0; x < size; x++)
      {
        int sy = y, sx = x;
        switch (rotation)
          {
          case 90: sy = x, sx = size - 1 - y; break;
          case 180: sy = size - 1 - y, sx = size - 1 - x; break;
          case 270: sy = size - 1 - x, sx = y; break;
          default: break;
          }
        memcpy (out + ((gsize) y * size + x) * ch, img + ((gsize) sy * size + sx) * ch,
                ch * sizeof *out);
      }
  return TRUE;
}

/* The first n of a random permutation of 0 .. len - 1 (a partial Fisher-Yates shuffle). */
static guint *
draw (GRand *rng, guint len, guint n)
{
  guint *order = g_new (guint, len);
  for (guint i = 0; i < len; i++)
    order[i] = i;
  for (guint i = 0; i < MIN (n, len); i++)
    {
      guint j = g_rand_int_range (rng, i, len);
      guint t = order[i];
      order[i] = order[j], order[j] = t;
    }
  return order;
}

gssize
ks_image_set_sample (KsImageSet *set, KsSplit split, gsize i, gsize n, GRand *rng, float *out,
                     GError **error)
{
  const ImageClass *c = class_at (set, split, i);
  if (c == NULL)
    return ks_tasks_invalid (error, "no class %" G_GSIZE_FORMAT " in split %d", i, split), -1;
  g_autofree guint *order = draw (rng, c->files->len, c->files->len);
  gsize floats = ks_image_set_image_floats (set), got = 0;

  /* the whole permutation: a skipped file gives its place to the next one */
  for (guint k = 0; k < c->files->len && got < n; k++)
    {
      const char *path = g_ptr_array_index (c->files, order[k]);
      g_autoptr (GError) local = NULL;
      if (g_hash_table_contains (set->bad, path))
        continue;
      if (read_image (set, path, c->rotation, out + got * floats, &local))
        got++;
      else if (local != NULL)
        {
          g_propagate_error (error, g_steal_pointer (&local));
          return -1;
        }
    }
  return (gssize) got;
}

gboolean
ks_image_set_task (KsImageSet *set, KsSplit split, int ways, int per_class, GRand *rng,
                   float *images, gint64 *labels, GError **error)
{
  guint n_classes = set->classes[split]->len;
  gsize floats = ks_image_set_image_floats (set);

  if (ways < 1 || per_class < 1 || (guint) ways > n_classes)
    return ks_tasks_invalid (error, "a %d-way task of %d images a class from the %s split, which "
                       "has %u classes", ways, per_class, split_names[split], n_classes);
  g_autofree guint *chosen = draw (rng, n_classes, ways);
  for (int w = 0; w < ways; w++)
    {
      float *out = images + (gsize) w * per_class * floats;
      gssize got = ks_image_set_sample (set, split, chosen[w], per_class, rng, out, error);
      if (got < 0)
        return FALSE;
      if (got < per_class)
        return ks_tasks_invalid (error, "class %s of the %s split has %" G_GSSIZE_FORMAT " readable "
                           "images; a task takes %d of each class", class_at (set, split,
                           chosen[w])->name, split_names[split], got, per_class);
      for (int k = 0; k < per_class; k++)
        labels[(gsize) w * per_class + k] = w;
    }
  return TRUE;
}
