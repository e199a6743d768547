/* The pslib mode's sparse messages and a server's sparse tables.
 *
 * A pull carries ids (guint64) and is answered with their values (dim floats each); a
 * push carries one record per id: the id, its show and click counts and its gradient
 * (summed over the shows). Ids go to server id % S. Everything in a request is checked
 * before it touches a table: the table's index, the payload's size, each id's server,
 * finite gradients within [table.NAME] max_grad per show, 0 <= click <= show, the rows a
 * pull would create (its distinct new ids) within max_new_rows and max_rows; a shrink only from worker 0, as often as [data]
 * shrink_every says. */
#ifndef KS_PSLIB_ROWS_H
#define KS_PSLIB_ROWS_H

#include "ps/job.h"
#include "ps/wire.h"

#include <ksdist/ksdist.h>
#include <ksdist/sparse.h>

/* Bytes of a push record for rows of `dim` floats. */
#define PS_PUSH_RECORD(dim) (sizeof (guint64) + 2 * sizeof (float) + (dim) * sizeof (float))

/* The server a row lives on. */
static inline int
ps_row_server (guint64 id, int servers)
{
  return (int) (id % (guint64) servers);
}

typedef struct PsRows PsRows;

/* Server `index` of `servers`: a table per config (names[i], configs[i]), of which a pull
 * may create at most max_new[i] rows, holding at most max_rows (0: their share of `budget`
 * bytes, which `budget_why` explains: budget.h); no request or answer may exceed `max_message`
 * bytes; worker 0 may ask for a shrink every `shrink_every` steps (0: never). */
PsRows *ps_rows_new (const char *const *names, const KsSparseConfig *configs,
                     const gint64 *max_new, gsize n, int index, int servers,
                     double budget, const char *budget_why, gsize max_message,
                     gint64 shrink_every);
void ps_rows_free (PsRows *rows);
/* A PsServerConfig.extra handler: sparse pulls, pushes and shrink. */
gboolean ps_rows_handle (void *rows, const PsHeader *req, const void *payload,
                         GByteArray *reply, gint64 *reply_step, char **refusal);
/* Writes every table's rows (mode all) as DIR/sparse-<table>-server-<i>-of-<S>.bin, each
 * naming its save (ks_checkpoint_save_id of DIR), step, server, server count and table. */
gboolean ps_rows_save (PsRows *rows, const char *dir, gint64 step, GError **error);
/* Loads every table from the files of checkpoint `dir`, each of which must name the save,
 * step and server count of `id` (its job.json), its own server and table, and hold only
 * its server's ids; keeps this server's rows. A table whose file is bad is as it was (one
 * loaded before it is not: the server then refuses to start). */
gboolean ps_rows_load (PsRows *rows, const char *dir, const PsJobIdentity *id,
                       GError **error);
/* Rows pulled and pushed so far, and the seconds spent serving them. */
void ps_rows_served (PsRows *rows, guint64 *pulled, double *pull_s, guint64 *pushed,
                     double *push_s);
/* Rows and bytes held over all tables (for the log). */
void ps_rows_usage (PsRows *rows, gsize *n_rows, gsize *bytes);

#endif
