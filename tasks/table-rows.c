/* A file's rows for training, in memory or read in place from the file's memory map
 * (table-private.h): the readers of formats whose bytes on disk are the rows (npy, IDX)
 * map them, so only the pages in use are resident and they stay reclaimable. */
#include "table-private.h"

#include <string.h>

static void
memory_row (const KsRows *r, gsize row, float *out)
{
  const KsTable *t = r->table;
  memcpy (out, t->x + row * t->features, t->features * sizeof (float));
}

KsRows *
ks_rows_new (KsTable *table)
{
  KsRows *r = g_new0 (KsRows, 1);
  r->table = table;
  r->get = memory_row;
  return r;
}

void
ks_rows_free (KsRows *r)
{
  if (r == NULL)
    return;
  ks_table_free (r->table);
  ks_table_unmap (r->map);
  g_free (r);
}

void
ks_rows_get (const KsRows *r, gsize row, float *out)
{
  g_assert (row < r->table->rows);
  r->get (r, row, out);
}

