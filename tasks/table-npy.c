/* NumPy .npy arrays (format versions 1 to 3): a features array and a labels array. */
#include "table-private.h"

#include <math.h>
#include <string.h>

typedef enum { F32, F64, U8, I32, I64 } Kind;

static const struct {
  const char *descr, *name;
  Kind kind;
  gsize size;
} kinds[] = {
  { "<f4", "float32", F32, 4 }, { "<f8", "float64", F64, 8 }, { "|u1", "uint8", U8, 1 },
  { "<u1", "uint8", U8, 1 },    { "<i4", "int32", I32, 4 },   { "<i8", "int64", I64, 8 },
};

/* One array: its element type and shape, and where its data starts in the file. */
typedef struct {
  const char *path;
  char *bytes;       /* read whole (gzip or not), or */
  GMappedFile *map;  /* mapped in place */
  gsize length;
  guint kind; /* into kinds[] */
  int ndim;
  guint64 shape[8];
  gsize count; /* product of shape */
  const guint8 *data;
} Npy;

static void
npy_clear (Npy *a)
{
  g_free (a->bytes);
  ks_table_unmap (a->map);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Npy, npy_clear)

/* The header, read as numpy's read_array_header reads it: a Python literal dict of
 * exactly the keys 'descr' (a string), 'fortran_order' (True or False) and 'shape' (a
 * tuple of sizes), in any order, then spaces and one newline. Anything else (another
 * key, a value that is not such a literal, bytes after the dict) is refused. */
typedef struct {
  const char *p; /* the next character */
  const char *path, *header;
  GError **error;
} Header;

static gboolean
header_bad (Header *r, const char *what)
{
  g_autofree char *shown = g_strescape (r->header, NULL);
  return ks_table_bad (r->error, "%s: the header is not the dict numpy writes (%s, at byte %"
                       G_GSIZE_FORMAT " of \"%s\"): write the file with numpy.save", r->path,
                       what, (gsize) (r->p - r->header), shown) != NULL;
}

static void
spaces (Header *r)
{
  while (*r->p == ' ')
    r->p++;
}

/* A quoted string without escapes, copied out. */
static char *
header_string (Header *r)
{
  char quote = *r->p;
  if (quote != '\'' && quote != '"')
    return NULL;
  const char *end = strchr (r->p + 1, quote);
  if (end == NULL || memchr (r->p + 1, '\\', end - r->p - 1) != NULL)
    return NULL;
  char *v = g_strndup (r->p + 1, end - r->p - 1);
  r->p = end + 1;
  return v;
}

static gboolean
header_shape (Header *r, Npy *a)
{
  guint64 d;
  char *end;
  if (*r->p != '(')
    return header_bad (r, "'shape' is not a tuple");
  r->p++;
  spaces (r);
  gboolean comma = FALSE;
  a->ndim = 0;
  a->count = 1;
  while (*r->p != ')')
    {
      if (a->ndim == G_N_ELEMENTS (a->shape))
        return header_bad (r, "a 'shape' of more than 8 sizes");
      if (!g_ascii_isdigit (*r->p) || (d = g_ascii_strtoull (r->p, &end, 10)) == G_MAXUINT64)
        return header_bad (r, "a size in 'shape' that is not a whole number");
      a->shape[a->ndim++] = d;
      if (d > G_MAXSIZE || !g_size_checked_mul (&a->count, a->count, (gsize) d))
        return ks_table_bad (r->error, "%s: a 'shape' too large for memory: %s", r->path,
                             r->header) != NULL;
      r->p = end;
      spaces (r);
      comma = *r->p == ',';
      if (comma)
        r->p++, spaces (r);
      else if (*r->p != ')')
        return header_bad (r, "'shape' is not a tuple of sizes");
    }
  /* (3) is 3, not a tuple: numpy writes (3,) */
  if (a->ndim == 1 && !comma)
    return header_bad (r, "a 'shape' of one size without its comma");
  r->p++;
  return TRUE;
}

static gboolean
parse_header (Npy *a, const char *h, GError **error)
{
  Header r = { h, a->path, h, error };
  gboolean seen[3] = { FALSE, FALSE, FALSE }, fortran = FALSE;
  g_autofree char *descr = NULL;

  spaces (&r);
  if (*r.p++ != '{')
    return (r.p--, header_bad (&r, "no '{'"));
  for (spaces (&r); *r.p != '}'; spaces (&r))
    {
      g_autofree char *key = header_string (&r);
      static const char *const keys[] = { "descr", "fortran_order", "shape" };
      guint k = 0;
      while (key != NULL && k < 3 && strcmp (key, keys[k]) != 0)
        k++;
      if (key == NULL || k == 3)
        return header_bad (&r, "a key other than 'descr', 'fortran_order' and 'shape'");
      if (seen[k])
        return header_bad (&r, "a key given twice");
      seen[k] = TRUE;
      spaces (&r);
      if (*r.p != ':')
        return header_bad (&r, "no ':' after a key");
      r.p++;
      spaces (&r);
      if (k == 0 && (descr = header_string (&r)) == NULL)
        return header_bad (&r, "'descr' is not a string");
      if (k == 1)
        {
          if (g_str_has_prefix (r.p, "True"))
            fortran = TRUE, r.p += 4;
          else if (g_str_has_prefix (r.p, "False"))
            r.p += 5;
          else
            return header_bad (&r, "'fortran_order' is not True or False");
        }
      if (k == 2 && !header_shape (&r, a))
        return FALSE;
      spaces (&r);
      if (*r.p == ',')
        r.p++;
      else if (*r.p != '}')
        return header_bad (&r, "no ',' or '}' after a value");
    }
  r.p++;
  spaces (&r);
  if (r.p[0] != '\n' || r.p[1] != '\0')
    return header_bad (&r, "bytes after the dict other than spaces and one newline");
  if (!seen[0] || !seen[1] || !seen[2])
    return header_bad (&r, !seen[0] ? "no 'descr' (the element type)"
                           : !seen[1] ? "no 'fortran_order'" : "no 'shape' tuple");
  a->kind = G_N_ELEMENTS (kinds);
  for (guint k = 0; k < G_N_ELEMENTS (kinds); k++)
    if (strcmp (descr, kinds[k].descr) == 0)
      a->kind = k;
  if (a->kind == G_N_ELEMENTS (kinds))
    return ks_table_bad (error, "%s: element type '%s' is not one read here (float32, "
                         "float64, uint8, int32, int64, little endian: '<f4', '<f8', '|u1', "
                         "'<i4', '<i8')", a->path, descr) != NULL;
  if (fortran)
    return ks_table_bad (error, "%s: the array is not in C order ('fortran_order': False "
                         "expected); save it with numpy.ascontiguousarray", a->path) != NULL;
  return TRUE;
}

/* Reads the file (mapped in place when `map` and it is not gzipped), its header checked,
 * its data's size too. */
static gboolean
npy_read (Npy *a, const char *path, gboolean map, GError **error)
{
  static const char magic[] = "\x93NUMPY";
  gsize hlen, start, data_bytes;
  const guint8 *b;

  a->path = path;
  if (map && (a->map = ks_table_map (path, error)) == NULL)
    return FALSE;
  b = a->map != NULL ? (const guint8 *) g_mapped_file_get_contents (a->map) : NULL;
  a->length = a->map != NULL ? g_mapped_file_get_length (a->map) : 0;
  if (a->map != NULL && a->length >= 2 && b[0] == 0x1f && b[1] == 0x8b)
    g_clear_pointer (&a->map, ks_table_unmap); /* gzip: decompressed into memory */
  if (a->map == NULL && (a->bytes = ks_table_read (path, &a->length, error)) == NULL)
    return FALSE;
  if (a->map == NULL)
    b = (const guint8 *) a->bytes;
  if (a->length == 0)
    return ks_table_bad (error, "%s: empty file (expected a NumPy .npy array)", path) != NULL;
  if (a->length < 10 || memcmp (b, magic, 6) != 0)
    return ks_table_bad (error, "%s: not a NumPy .npy file (no \\x93NUMPY magic at its start)",
                         path) != NULL;
  if (b[6] == 1)
    hlen = b[8] | (gsize) b[9] << 8, start = 10;
  else if ((b[6] == 2 || b[6] == 3) && a->length >= 12)
    hlen = b[8] | (gsize) b[9] << 8 | (gsize) b[10] << 16 | (gsize) b[11] << 24, start = 12;
  else
    return ks_table_bad (error, "%s: .npy format version %u.%u (1 to 3 are read)", path, b[6],
                         b[7]) != NULL;
  if (hlen > a->length - start)
    return ks_table_bad (error, "%s: truncated: a header of %" G_GSIZE_FORMAT " bytes but %"
                         G_GSIZE_FORMAT " follow", path, hlen, a->length - start) != NULL;
  /* the header is text; made a string for the parser (the byte after it is data) */
  g_autofree char *h = g_strndup ((const char *) b + start, hlen);
  if (strlen (h) != hlen)
    return ks_table_bad (error, "%s: a NUL byte in the header", path) != NULL;
  if (!parse_header (a, h, error))
    return FALSE;
  a->data = b + start + hlen;
  gsize have = a->length - start - hlen;
  g_autofree char *dims = NULL;
  if (!g_size_checked_mul (&data_bytes, a->count, kinds[a->kind].size) || data_bytes != have)
    {
      GString *s = g_string_new (NULL);
      for (int i = 0; i < a->ndim; i++)
        g_string_append_printf (s, "%s%" G_GUINT64_FORMAT, i ? " x " : "", a->shape[i]);
      dims = g_string_free (s, FALSE);
      return ks_table_bad (error, "%s: %s: the header says %s %s (%" G_GSIZE_FORMAT
                           " bytes of data) but %" G_GSIZE_FORMAT " follow", path,
                           data_bytes > have ? "truncated" : "extra bytes after the data",
                           a->ndim ? dims : "a scalar of", kinds[a->kind].name,
                           data_bytes, have) != NULL;
    }
  return TRUE;
}

/* Element i of `data` (of kinds[kind]) as a double, from the little-endian data. */
static double
cell (guint kind, const guint8 *data, gsize i)
{
  const guint8 *p = data + i * kinds[kind].size;
  switch (kinds[kind].kind)
    {
    case U8: return p[0];
    case F32: { guint32 u; float f; memcpy (&u, p, 4); u = GUINT32_FROM_LE (u); memcpy (&f, &u, 4); return f; }
    case F64: { guint64 u; double f; memcpy (&u, p, 8); u = GUINT64_FROM_LE (u); memcpy (&f, &u, 8); return f; }
    case I32: { guint32 u; memcpy (&u, p, 4); return (gint32) GUINT32_FROM_LE (u); }
    case I64: { guint64 u; memcpy (&u, p, 8); return (double) (gint64) GUINT64_FROM_LE (u); }
    }
  return 0;
}

static double
element (const Npy *a, gsize i)
{
  return cell (a->kind, a->data, i);
}

/* An int64 element exactly (a double loses ids above 2^53). */
static gint64
integer (const Npy *a, gsize i)
{
  guint64 u;
  if (kinds[a->kind].kind != I64)
    return (gint64) element (a, i);
  memcpy (&u, a->data + i * 8, 8);
  return (gint64) GUINT64_FROM_LE (u);
}

static gboolean
set_labels (KsTable *t, const Npy *l, GError **error)
{
  Kind kind = kinds[l->kind].kind;

  if (!t->regression && (kind == F32 || kind == F64))
    return ks_table_bad (error, "%s: %s labels are values: load them with regression, or "
                         "save class ids as integers (int64, int32, uint8)", l->path,
                         kinds[l->kind].name) != NULL;
  for (gsize i = 0; i < t->rows; i++)
    if (t->regression)
      {
        double v = element (l, i);
        if (!isfinite ((float) v))
          return ks_table_bad (error, "%s: label %" G_GSIZE_FORMAT " is %g, not a finite "
                               "float32 value", l->path, i, v) != NULL;
        t->target[i] = (float) v;
      }
    else
      {
        gint64 c = integer (l, i);
        if (c < 0 || c >= KS_TABLE_MAX_CLASSES)
          return ks_table_bad (error, "%s: label %" G_GSIZE_FORMAT " is %" G_GINT64_FORMAT
                               ", not a class id in [0, %d)", l->path, i, c,
                               KS_TABLE_MAX_CLASSES) != NULL;
        t->y[i] = c;
        t->classes = MAX (t->classes, c + 1);
      }
  return TRUE;
}

/* The two arrays' shapes checked against each other: rows and features a row. */
static gboolean
check_pair (const Npy *f, const Npy *l, gsize *rows, gsize *per_row, GError **error)
{
  if (f->ndim < 1 || f->ndim > 5)
    return ks_table_bad (error, "%s: %d dimensions; features are [rows, ...] with at most 4 "
                         "dimensions after the rows", f->path, f->ndim) != NULL;
  *rows = f->shape[0];
  if (*rows == 0)
    return ks_table_bad (error, "%s: no rows (shape starts with 0)", f->path) != NULL;
  *per_row = f->count / *rows;
  if (*per_row == 0)
    return ks_table_bad (error, "%s: rows of no features (a dimension after the rows is 0)",
                         f->path) != NULL;
  if (l->ndim < 1 || l->ndim > 2 || (l->ndim == 2 && l->shape[1] != 1))
    return ks_table_bad (error, "%s: labels of %d dimensions; expected [rows] or [rows, 1]",
                         l->path, l->ndim) != NULL;
  if (l->shape[0] != *rows)
    return ks_table_bad (error, "%s: %" G_GUINT64_FORMAT " labels but %s has %" G_GSIZE_FORMAT
                         " rows", l->path, l->shape[0], f->path, *rows) != NULL;
  return TRUE;
}

/* Every feature checked finite as float32; into x when not NULL (the table's floats). */
static gboolean
check_cells (const Npy *f, gsize per_row, float *x, GError **error)
{
  for (gsize i = 0; i < f->count; i++)
    {
      double v = element (f, i);
      if (!isfinite ((float) v))
        return ks_table_bad (error, "%s: row %" G_GSIZE_FORMAT ", feature %" G_GSIZE_FORMAT
                             " is %g, not a finite float32 number", f->path, i / per_row,
                             i % per_row, v) != NULL;
      if (x != NULL)
        x[i] = (float) v;
    }
  return TRUE;
}

/* The table of the pair: its floats filled (fill) or left to the mapping (x NULL). */
static KsTable *
table_of (const Npy *f, const Npy *l, gboolean regression, gboolean fill, GError **error)
{
  gsize rows = 0, per_row = 0;

  if (!check_pair (f, l, &rows, &per_row, error))
    return NULL;
  g_autoptr (KsTable) t = ks_table_alloc (f->path, rows, fill ? per_row : 0, regression,
                                          error);
  if (t == NULL)
    return NULL;
  if (!fill)
    g_clear_pointer (&t->x, g_free); /* the rows stay in the file */
  t->features = per_row;
  t->ndim = MAX (f->ndim - 1, 1);
  t->shape[0] = 1;
  for (int d = 1; d < f->ndim; d++)
    t->shape[d - 1] = (gint64) f->shape[d];
  if (!check_cells (f, per_row, t->x, error) || !set_labels (t, l, error))
    return NULL;
  return g_steal_pointer (&t);
}

KsTable *
ks_table_load_npy (const char *features, const char *labels, gboolean regression,
                   GError **error)
{
  g_auto (Npy) f = { 0 };
  g_auto (Npy) l = { 0 };

  g_return_val_if_fail (features != NULL && labels != NULL, NULL);
  if (!npy_read (&f, features, FALSE, error) || !npy_read (&l, labels, FALSE, error))
    return NULL;
  return table_of (&f, &l, regression, TRUE, error);
}

/* A mapped row made float32 as table_of makes it. */
static void
mapped_row (const KsRows *r, gsize row, float *out)
{
  gsize f = r->table->features;
  for (gsize j = 0; j < f; j++)
    out[j] = (float) cell ((guint) r->kind, r->cells, row * f + j);
}

KsRows *
ks_rows_load_npy (const char *features, const char *labels, gboolean regression,
                  GError **error)
{
  g_auto (Npy) f = { 0 };
  g_auto (Npy) l = { 0 };
  KsTable *t;

  g_return_val_if_fail (features != NULL && labels != NULL, NULL);
  if (!npy_read (&f, features, TRUE, error) || !npy_read (&l, labels, FALSE, error)
      || (t = table_of (&f, &l, regression, f.map == NULL, error)) == NULL)
    return NULL;
  KsRows *r = ks_rows_new (t);
  if (f.map != NULL)
    {
      r->map = g_steal_pointer (&f.map);
      r->cells = f.data;
      r->kind = (int) f.kind;
      r->get = mapped_row;
    }
  return r;
}
