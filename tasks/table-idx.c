/* MNIST's IDX files: big-endian sizes after a magic of two zero bytes, the element type
 * (0x08, unsigned bytes here) and the number of dimensions. */
#include "table-private.h"

#include <string.h>

static guint32
be32 (const guint8 *p)
{
  return (guint32) p[0] << 24 | (guint32) p[1] << 16 | (guint32) p[2] << 8 | p[3];
}

/* dir/name or dir/name.gz (the first there), or NULL with KS_CONFIG_ERROR_IO when neither
 * is, naming both files of the `pair` (images, labels). */
static char *
pick (const char *dir, const char *name, const char *const pair[2], GError **error)
{
  g_autofree char *plain = g_build_filename (dir, name, NULL);
  g_autofree char *gz = g_strconcat (plain, ".gz", NULL);

  if (g_file_test (plain, G_FILE_TEST_EXISTS))
    return g_steal_pointer (&plain);
  if (g_file_test (gz, G_FILE_TEST_EXISTS))
    return g_steal_pointer (&gz);
  g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO,
               "%s: neither %s nor %s.gz is there (the set's IDX files are %s and %s, "
               "each possibly gzipped)", dir, name, name, pair[0], pair[1]);
  return NULL;
}

/* The bytes of `path`: at most `limit` of a gzip stream (what its header promised). With
 * `map`, a file that is not gzipped is mapped into *map rather than read (the bytes
 * returned are then the mapping's). */
static const char *
read_data (const char *path, gsize limit, GMappedFile **map, char **bytes, gsize *length,
           GError **error)
{
  if (map != NULL && (*map = ks_table_map (path, error)) == NULL)
    return NULL;
  if (map != NULL)
    {
      const guint8 *b = (const guint8 *) g_mapped_file_get_contents (*map);
      *length = g_mapped_file_get_length (*map);
      if (*length == 0) /* an empty file maps to no memory: check () says it is empty */
        {
          g_clear_pointer (map, ks_table_unmap);
          return "";
        }
      if (!(*length >= 2 && b[0] == 0x1f && b[1] == 0x8b))
        return (const char *) b;
      g_clear_pointer (map, ks_table_unmap); /* gzip: decompressed into memory */
    }
  return *bytes = ks_table_read_bounded (path, limit, length, error);
}

/* Checks the header of an IDX file of unsigned bytes with `ndim` dimensions, b[0, n):
 * their sizes into dims, the bytes the whole file should have into *total. */
static gboolean
header (const char *path, const guint8 *b, gsize n, int ndim, guint32 *dims, gsize *total,
        GError **error)
{
  guint32 want = 0x800 | ndim;
  gsize count = 1, head = 4 + 4 * (gsize) ndim;

  if (n == 0)
    return ks_table_bad (error, "%s: empty file (expected an IDX file)", path) != NULL;
  if (n < 4 || be32 (b) != want)
    return ks_table_bad (error, "%s: magic 0x%08x is not an IDX file of unsigned bytes in %d "
                         "dimensions (expected 0x%08x)", path, n < 4 ? 0 : be32 (b), ndim,
                         want) != NULL;
  if (n < head)
    return ks_table_bad (error, "%s: truncated: %" G_GSIZE_FORMAT " bytes, less than the "
                         "%" G_GSIZE_FORMAT "-byte header", path, n, head) != NULL;
  for (int d = 0; d < ndim; d++)
    {
      dims[d] = be32 (b + 4 + 4 * d);
      if (dims[d] == 0 || !g_size_checked_mul (&count, count, dims[d]))
        return ks_table_bad (error, "%s: dimension %d is %u", path, d, dims[d]) != NULL;
    }
  if (!g_size_checked_add (total, count, head))
    return ks_table_bad (error, "%s: its dimensions overflow", path) != NULL;
  return TRUE;
}

/* Checks the whole file b[0, n) against its header; the data's start into *data. */
static gboolean
check (const char *path, const guint8 *b, gsize n, int ndim, guint32 *dims,
       const guint8 **data, GError **error)
{
  gsize total, head = 4 + 4 * (gsize) ndim;

  if (!header (path, b, n, ndim, dims, &total, error))
    return FALSE;
  if (total != n)
    return ks_table_bad (error, "%s: %s: the header says %" G_GSIZE_FORMAT " bytes of data "
                         "but %" G_GSIZE_FORMAT " follow", path,
                         total > n ? "truncated" : "extra bytes after the data", total - head,
                         n - head) != NULL;
  *data = b + head;
  return TRUE;
}

/* The header of `path` (read alone: a gzip stream is not decompressed further). */
static gboolean
read_header (const char *path, int ndim, guint32 *dims, gsize *total, GError **error)
{
  gsize n;
  g_autofree char *b = ks_table_read_head (path, 4 + 4 * (gsize) ndim, &n, error);
  return b != NULL && header (path, (const guint8 *) b, n, ndim, dims, total, error);
}

/* The table of the pair of `train`; with `map`, the images mapped into *map when they
 * are not gzipped (the table's x then NULL, *pixels into the mapping). */
static KsTable *
load (const char *path, gboolean train, GMappedFile **map, const guint8 **pixels,
      GError **error)
{
  const char *images_name = train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte";
  const char *labels_name = train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte";
  g_autofree char *images_path = NULL, *labels_path = NULL;
  g_autofree char *images_bytes = NULL, *labels_bytes = NULL;
  const char *images, *labels;
  const guint8 *ids;
  guint32 idims[3], ldims[1];
  gsize ilen, llen;

  if (!g_file_test (path, G_FILE_TEST_IS_DIR))
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO, "%s is not a folder (expected one "
                   "holding MNIST's %s and %s, each possibly gzipped)", path, images_name,
                   labels_name);
      return NULL;
    }
  const char *const pair[2] = { images_name, labels_name };
  gsize itotal, ltotal;
  if ((images_path = pick (path, images_name, pair, error)) == NULL
      || (labels_path = pick (path, labels_name, pair, error)) == NULL
      || !read_header (images_path, 3, idims, &itotal, error)
      || !read_header (labels_path, 1, ldims, &ltotal, error))
    return NULL;
  /* the headers against each other and the image cap, before any data is decompressed */
  if (ldims[0] != idims[0])
    return ks_table_bad (error, "%s: %u labels but %s has %u images", labels_path, ldims[0],
                         images_path, idims[0]);
  if ((guint64) idims[1] * idims[2] > KS_TABLE_MAX_PIXELS)
    return ks_table_bad (error, "%s: its header declares images of %ux%u, over the %d "
                         "megapixels an image may have here; nothing was decompressed",
                         images_path, idims[1], idims[2], (int) (KS_TABLE_MAX_PIXELS >> 20));
  if ((images = read_data (images_path, itotal, map, &images_bytes, &ilen, error)) == NULL
      || (labels = read_data (labels_path, ltotal, NULL, &labels_bytes, &llen, error)) == NULL
      || !check (images_path, (const guint8 *) images, ilen, 3, idims, pixels, error)
      || !check (labels_path, (const guint8 *) labels, llen, 1, ldims, &ids, error))
    return NULL;

  gboolean mapped = map != NULL && *map != NULL;
  g_autoptr (KsTable) t = ks_table_alloc (path, idims[0],
                                          mapped ? 0 : (gsize) idims[1] * idims[2], FALSE,
                                          error);
  if (t == NULL)
    return NULL;
  if (mapped)
    g_clear_pointer (&t->x, g_free); /* the pixels stay in the file */
  t->features = (gsize) idims[1] * idims[2];
  t->ndim = 3;
  t->shape[0] = idims[1];
  t->shape[1] = idims[2];
  t->shape[2] = 1;
  for (gsize i = 0; !mapped && i < t->rows * t->features; i++)
    t->x[i] = (*pixels)[i] / 255.0f;
  for (gsize i = 0; i < t->rows; i++)
    {
      t->y[i] = ids[i];
      t->classes = MAX (t->classes, t->y[i] + 1);
    }
  return g_steal_pointer (&t);
}

KsTable *
ks_table_load_idx (const char *path, gboolean train, GError **error)
{
  const guint8 *pixels;
  g_return_val_if_fail (path != NULL, NULL);
  return load (path, train, NULL, &pixels, error);
}

/* A mapped image scaled as load scales the pixels. */
static void
mapped_row (const KsRows *r, gsize row, float *out)
{
  gsize f = r->table->features;
  for (gsize j = 0; j < f; j++)
    out[j] = r->cells[row * f + j] / 255.0f;
}

KsRows *
ks_rows_load_idx (const char *path, gboolean train, GError **error)
{
  GMappedFile *map = NULL;
  const guint8 *pixels;
  KsTable *t;

  g_return_val_if_fail (path != NULL, NULL);
  if ((t = load (path, train, &map, &pixels, error)) == NULL)
    {
      ks_table_unmap (map); /* forgotten by the SIGBUS handler too */
      return NULL;
    }
  KsRows *r = ks_rows_new (t);
  if (map != NULL)
    {
      r->map = map;
      r->cells = pixels;
      r->get = mapped_row;
    }
  return r;
}
