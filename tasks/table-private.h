/* Shared by the table readers (tasks/table*.c); not installed. */
#ifndef KS_TABLE_PRIVATE_H
#define KS_TABLE_PRIVATE_H

#include "tasks-private.h"

#pragma GCC visibility push(hidden)

G_BEGIN_DECLS

/* Sets a KS_CONFIG_ERROR_BAD_VALUE error; NULL, for `return ks_table_bad (...)`. */
G_GNUC_PRINTF (2, 3) gpointer ks_table_bad (GError **error, const char *format, ...);

/* The bytes of `path`, decompressed when they start with gzip's magic (whatever the name);
 * NUL-terminated one past *length. A file that cannot be read is KS_CONFIG_ERROR_IO. */
char *ks_table_read (const char *path, gsize *length, GError **error);

/* A new table of rows x features floats and rows labels of the kind asked; NULL (with an
 * error naming `path`) when the sizes overflow. */
KsTable *ks_table_alloc (const char *path, gsize rows, gsize features, gboolean regression,
                         GError **error);

/* table-images.c (with gdk-pixbuf): whether b[0, n) is a whole PNG or JPEG, walked to its
 * last chunk or end-of-image marker (gdk-pixbuf decodes a file cut short without a word):
 * NULL, with *png and the size its header declares, or the reason it is not. */
const char *ks_image_check (const guint8 *b, gsize n, gboolean *png, guint32 *w, guint32 *h);

G_END_DECLS

#pragma GCC visibility pop

#endif
