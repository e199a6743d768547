/* Shared by the table readers (tasks/table*.c); not installed. */
#ifndef KS_TABLE_PRIVATE_H
#define KS_TABLE_PRIVATE_H

#include "tasks-private.h"

#pragma GCC visibility push(hidden)

G_BEGIN_DECLS

/* Sets a KS_COMPUTE_ERROR_INVALID error, bad data (exit status 1, as every data error:
 * a setting to change is 2); NULL, for `return ks_table_bad (...)`. */
G_GNUC_PRINTF (2, 3) gpointer ks_table_bad (GError **error, const char *format, ...);

/* The bytes of `path`, decompressed when they start with gzip's magic (whatever the name);
 * NUL-terminated one past *length. A file that cannot be read is KS_CONFIG_ERROR_IO. */
char *ks_table_read (const char *path, gsize *length, GError **error);
/* Its first `n` bytes (fewer when it is shorter): a header, checked before the rest is
 * decompressed. */
char *ks_table_read_head (const char *path, gsize n, gsize *length, GError **error);
/* The whole, a gzip stream decompressed only up to `limit` bytes: one that holds more is
 * refused as soon as it passes it (what its header promised), so memory stays bounded. */
char *ks_table_read_bounded (const char *path, gsize limit, gsize *length, GError **error);

/* The most pixels an image may have (64 megapixels; a photo is about 12): larger ones
 * are refused before they are decoded or decompressed. */
#define KS_TABLE_MAX_PIXELS ((guint64) 64 << 20)

/* A new table of rows x features floats and rows labels of the kind asked; NULL (with an
 * error naming `path`) when the sizes overflow. */
KsTable *ks_table_alloc (const char *path, gsize rows, gsize features, gboolean regression,
                         GError **error);

/* Whether row `row` of file number `file` of a data set is held out: a seeded hash of
 * (seed, file, row) below `fraction`, so the same row goes to the same side whatever the
 * other rows and whoever reads it (file 0's hash is ks_table_split's). */
gboolean ks_table_held_out (guint64 seed, gsize file, gsize row, double fraction);

/* Per-feature moments of rows fetched one at a time (row r into `scratch` by `get`),
 * exactly as ks_table_moments computes them: two passes in double. */
typedef void (*KsRowGetter) (gconstpointer data, gsize r, float *out);
void ks_table_moments_of (KsRowGetter get, gconstpointer data, gsize rows, gsize features,
                          float *scratch, float *mean, float *std);
/* One row standardised in place, exactly as ks_table_standardize does it. */
void ks_table_standardize_row (float *x, gsize features, const float *mean, const float *std);

/* A file's rows for training: in memory (table->x), or read in place from the file's
 * memory map and made float32 one row at a time, exactly as the whole-table reader makes
 * them, so a data set larger than memory trains. table->x is NULL when mapped; the labels
 * are always in memory (8 bytes a row). */
typedef struct KsRows KsRows;
struct KsRows {
  KsTable *table;
  GMappedFile *map;      /* NULL: the rows are table->x */
  const guint8 *cells;   /* into map: rows x features cells */
  int kind;              /* the reader's cell type */
  void (*get) (const KsRows *rows, gsize row, float *out);
};

/* Rows of an in-memory table (taken over). */
KsRows *ks_rows_new (KsTable *table);
void ks_rows_free (KsRows *rows);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsRows, ks_rows_free)
/* Row `row`'s features (table->features floats) into out. */
void ks_rows_get (const KsRows *rows, gsize row, float *out);
/* As ks_table_load_npy and ks_table_load_idx, the features memory-mapped when the file is
 * not gzipped (a gzipped one is loaded whole). */
KsRows *ks_rows_load_npy (const char *features, const char *labels, gboolean regression,
                          GError **error);
KsRows *ks_rows_load_idx (const char *path, gboolean train, GError **error);
/* table-map.c: the file mapped read-only (NULL with KS_CONFIG_ERROR_IO naming it), kept
 * so that a read past its end after someone cut it short ends the job with a message
 * naming it rather than a bare SIGBUS; ks_table_unmap forgets and unrefs it (NULL: none). */
GMappedFile *ks_table_map (const char *path, GError **error);
void ks_table_unmap (GMappedFile *map);

/* table-images.c (with gdk-pixbuf): whether b[0, n) is a whole PNG or JPEG, walked to its
 * last chunk or end-of-image marker (gdk-pixbuf decodes a file cut short without a word):
 * NULL, with *png and the size its header declares, or the reason it is not. */
const char *ks_image_check (const guint8 *b, gsize n, gboolean *png, guint32 *w, guint32 *h);

G_END_DECLS

#pragma GCC visibility pop

#endif
