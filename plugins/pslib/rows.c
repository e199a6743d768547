/* A server's sparse tables and their requests (rows.h). */
#include "rows.h"

#include "budget.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

struct PsRows {
  KsSparseTable **tables;
  gsize n, max_message;
  int index, servers;
  gint64 *max_new;     /* per table: rows a pull may create */
  gint64 *max_rows;    /* per table: rows this server holds at most */
  gint64 shrink_every; /* [data] shrink_every: 0, no shrink is accepted */
  gint64 last_shrink;  /* the step of the last shrink accepted (0: none) */
  gint64 max_step;     /* the largest step pushed here */
  /* aligned copies of a request's fields, grown to the largest request */
  gsize capacity, dim;
  guint64 *ids;
  float *shows, *clicks, *grads;
  /* rows served and the microseconds spent on them */
  guint64 pulled, pushed;
  gint64 pull_us, push_us;
};

PsRows *
ps_rows_new (const char *const *names, const KsSparseConfig *configs, const gint64 *max_new,
             gsize n, int index, int servers, double budget, const char *budget_why,
             gsize max_message, gint64 shrink_every)
{
  PsRows *r = g_new0 (PsRows, 1);

  r->max_new = g_memdup2 (max_new, MAX (n, 1) * sizeof (gint64));
  r->shrink_every = shrink_every;
  r->n = n;
  r->index = index;
  r->servers = servers;
  r->max_message = max_message;
  r->dim = 1;
  r->tables = g_new0 (KsSparseTable *, MAX (n, 1));
  r->max_rows = g_new0 (gint64, MAX (n, 1));
  /* rows are memory, and a token holder's pulls of new ids made them without end (2.4 M
   * rows in 42 s): by default the tables share the server's budget */
  gsize shared = 0; /* the tables that share the budget: those without a max_rows */
  for (gsize i = 0; i < n; i++)
    shared += configs[i].max_rows == 0;
  for (gsize i = 0; i < n; i++)
    {
      r->tables[i] = ks_sparse_table_new (names[i], &configs[i]);
      r->dim = MAX (r->dim, ks_sparse_table_dim (r->tables[i]));
      gsize row = ks_sparse_table_row_bytes (r->tables[i]);
      r->max_rows[i] = configs[i].max_rows > 0
                           ? configs[i].max_rows
                           : ps_default_max_rows (budget, shared, row);
      g_autofree char *why
          = configs[i].max_rows > 0
                ? g_strdup ("")
                : g_strdup_printf (" = 0: %s and %" G_GSIZE_FORMAT " table%s", budget_why,
                                   shared, shared == 1 ? "" : "s");
      g_message ("server %d: table %s holds at most %" G_GINT64_FORMAT " rows (%.0f MB at %"
                 G_GSIZE_FORMAT " bytes a row; [table.%s] max_rows%s)", index, names[i],
                 r->max_rows[i], r->max_rows[i] * (double) row / 1e6, row, names[i], why);
    }
  return r;
}

/* Room for a request of n ids. */
static void
reserve (PsRows *r, gsize n)
{
  if (n <= r->capacity)
    return;
  r->capacity = MAX (n, r->capacity * 2);
  r->ids = g_renew (guint64, r->ids, r->capacity);
  r->shows = g_renew (float, r->shows, r->capacity);
  r->clicks = g_renew (float, r->clicks, r->capacity);
  r->grads = g_renew (float, r->grads, r->capacity * r->dim);
}

void
ps_rows_free (PsRows *r)
{
  if (r == NULL)
    return;
  for (gsize i = 0; i < r->n; i++)
    ks_sparse_table_free (r->tables[i]);
  g_free (r->tables);
  g_free (r->max_new);
  g_free (r->max_rows);
  g_free (r->ids);
  g_free (r->shows);
  g_free (r->clicks);
  g_free (r->grads);
  g_free (r);
}

static gboolean
refuse (char **refusal, const char *format, ...) G_GNUC_PRINTF (2, 3);

static gboolean
refuse (char **refusal, const char *format, ...)
{
  va_list ap;
  va_start (ap, format);
  *refusal = g_strdup_vprintf (format, ap);
  va_end (ap);
  return FALSE;
}

/* The request's count of records of `record` bytes; its answer of `reply` bytes per
 * record must fit in a message too. */
static gboolean
count_records (PsRows *r, const PsHeader *req, gsize record, gsize reply, gsize *n,
               char **refusal)
{
  if (req->payload % record != 0)
    return refuse (refusal, "a %s of %" G_GUINT64_FORMAT " bytes is not a whole number of "
                   "%" G_GSIZE_FORMAT "-byte records", ps_type_name (req->type), req->payload,
                   record);
  *n = req->payload / record;
  if (*n > r->max_message / MAX (reply, 1) || *n * reply > G_MAXUINT)
    return refuse (refusal, "a %s of %" G_GSIZE_FORMAT " ids: its answer would exceed the "
                   "largest message ([pslib] max_message_mb); send fewer ids per request",
                   ps_type_name (req->type), *n);
  reserve (r, *n);
  return TRUE;
}

static gboolean
check_ids (PsRows *r, gsize n, char **refusal)
{
  for (gsize i = 0; i < n; i++)
    if (r->ids[i] != 0 && ps_row_server (r->ids[i], r->servers) != r->index)
      return refuse (refusal, "id %" G_GUINT64_FORMAT " belongs to server %d, not %d (rows go "
                     "to id %% servers): is every process running with the same server "
                     "count?", r->ids[i], ps_row_server (r->ids[i], r->servers), r->index);
  return TRUE;
}

static int
by_id (const void *a, const void *b)
{
  guint64 x = *(const guint64 *) a, y = *(const guint64 *) b;
  return (x > y) - (x < y);
}

/* The rows the n ids (in r->ids) would make: the distinct ids the table lacks (an id
 * repeated in one request makes one row; each was counted, against max_new_rows and
 * max_rows, as often as it came). */
static gint64
rows_made (PsRows *r, KsSparseTable *t, gsize n)
{
  g_autofree guint64 *lacking = NULL;
  gsize k, count = 0;
  gint64 made = 0;

  for (k = 0; k < n; k++)
    if (r->ids[k] != 0 && !ks_sparse_table_row_stats (t, r->ids[k], NULL, NULL, NULL, NULL, NULL))
      {
        if (lacking == NULL)
          lacking = g_new (guint64, n - k);
        lacking[count++] = r->ids[k];
      }
  if (count > 1)
    qsort (lacking, count, sizeof *lacking, by_id);
  for (k = 0; k < count; k++)
    made += k == 0 || lacking[k] != lacking[k - 1];
  return made;
}

/* Whether the n ids of the request (in r->ids) may make the rows its table lacks:
 * at most as many as one batch of the job pulls (max_new) and within the table's
 * budget (max_rows); else nothing is made. */
static gboolean
may_create (PsRows *r, const PsHeader *req, gsize n, char **refusal)
{
  guint i = req->arg;
  KsSparseTable *t = r->tables[i];
  const char *what = req->type == PS_PULL_SPARSE ? "pull" : "push";
  const char *name = ks_sparse_table_name (t);
  gint64 made = rows_made (r, t, n), held = (gint64) ks_sparse_table_size (t);
  if (made > r->max_new[i])
    return refuse (refusal, "a %s that would create %" G_GINT64_FORMAT " rows of table %s, "
                   "above the %" G_GINT64_FORMAT " one pull may create ([table.%s] "
                   "max_new_rows; 0: the most ids one batch pulls): nothing was created",
                   what, made, name, r->max_new[i], name);
  if (held + made > r->max_rows[i])
    return refuse (refusal, "a %s that would create %" G_GINT64_FORMAT " rows of table "
                   "%s on server %d, which holds %" G_GINT64_FORMAT " of the %" G_GINT64_FORMAT
                   " it may ([table.%s] max_rows): nothing was created; raise max_rows, add "
                   "servers, or let [data] shrink_every delete rows", what, made, name, r->index,
                   held, r->max_rows[i], name);
  return TRUE;
}

static gboolean
pull (PsRows *r, KsSparseTable *t, const PsHeader *req, const guint8 *payload,
      GByteArray *reply, char **refusal)
{
  gsize n, dim = ks_sparse_table_dim (t);
  if (!count_records (r, req, sizeof (guint64), dim * sizeof (float), &n, refusal))
    return FALSE;
  memcpy (r->ids, payload, n * sizeof (guint64));
  if (!check_ids (r, n, refusal))
    return FALSE;
  if ((req->aux & 1) && !may_create (r, req, n, refusal))
    return FALSE;
  g_byte_array_set_size (reply, n * dim * sizeof (float));
  g_autoptr (GError) full = NULL;
  if ((req->aux & 1) && !ks_sparse_table_pull (t, r->ids, n, (float *) reply->data, &full))
    return refuse (refusal, "%s", full->message);
  if (!(req->aux & 1))
    ks_sparse_table_lookup (t, r->ids, n, (float *) reply->data);
  return TRUE;
}

static gboolean
push (PsRows *r, KsSparseTable *t, const PsHeader *req, const guint8 *payload, char **refusal)
{
  gsize n, dim = ks_sparse_table_dim (t), record = PS_PUSH_RECORD (dim);
  double max_grad = ks_sparse_table_config (t)->max_grad;
  if (!count_records (r, req, record, 0, &n, refusal))
    return FALSE;
  for (gsize i = 0; i < n; i++)
    {
      const guint8 *p = payload + i * record;
      float *g = r->grads + i * dim;
      memcpy (&r->ids[i], p, sizeof (guint64));
      memcpy (&r->shows[i], p + 8, sizeof (float));
      memcpy (&r->clicks[i], p + 12, sizeof (float));
      memcpy (g, p + 16, dim * sizeof (float));
      /* counts of occurrences: whole, at least one, clicks among them */
      if (!(r->shows[i] >= 1 && r->shows[i] <= 1e9 && r->shows[i] == floorf (r->shows[i])
            && r->clicks[i] >= 0 && r->clicks[i] <= r->shows[i]
            && r->clicks[i] == floorf (r->clicks[i])))
        return refuse (refusal, "id %" G_GUINT64_FORMAT ": show %g and click %g (a push needs "
                       "whole counts, 1 <= show, 0 <= click <= show)", r->ids[i], r->shows[i],
                       r->clicks[i]);
      /* refused, not clipped: a clipped push would still move the rows as far as the
       * bound lets it, and a worker whose training diverged would go on unnoticed */
      for (gsize j = 0; j < dim; j++)
        if (!isfinite (g[j]) || fabs (g[j]) > max_grad * r->shows[i])
          return refuse (refusal, "id %" G_GUINT64_FORMAT ": a gradient that is not finite "
                         "or above %g per show (%g over %g shows; [table.%s] max_grad): the "
                         "worker's training diverged, or raise max_grad", r->ids[i], max_grad,
                         g[j], r->shows[i], ks_sparse_table_name (t));
    }
  /* a push makes the rows it lacks (a shrink may have deleted them since the pull) */
  if (!check_ids (r, n, refusal) || !may_create (r, req, n, refusal))
    return FALSE;
  g_autoptr (GError) full = NULL;
  if (!ks_sparse_table_push (t, r->ids, n, r->grads, r->shows, r->clicks, &full))
    return refuse (refusal, "%s", full->message);
  r->max_step = MAX (r->max_step, req->step);
  return TRUE;
}

/* A day's end asked by worker 0 at a step of [data] shrink_every that training reached,
 * at most once per shrink_every steps: a shrink deletes rows for good. */
static gboolean
shrink (PsRows *r, const PsHeader *req, gint64 *deleted, char **refusal)
{
  gint64 every = r->shrink_every, step = req->step;

  if (req->sender != 0)
    return refuse (refusal, "a shrink from worker %u: only worker 0 asks for one", req->sender);
  if (every <= 0)
    return refuse (refusal, "a shrink, but [data] shrink_every is 0 (never)");
  if (step <= 0 || step % every != 0 || step < r->last_shrink + every
      || step > r->max_step + every)
    return refuse (refusal, "a shrink at step %" G_GINT64_FORMAT ": one is due every %"
                   G_GINT64_FORMAT " steps ([data] shrink_every) and the last was at step %"
                   G_GINT64_FORMAT ", training is at step %" G_GINT64_FORMAT, step, every,
                   r->last_shrink, r->max_step);
  r->last_shrink = step;
  *deleted = 0;
  for (gsize i = 0; i < r->n; i++)
    *deleted += ks_sparse_table_shrink (r->tables[i]);
  return TRUE;
}

gboolean
ps_rows_handle (void *data, const PsHeader *req, const void *payload, GByteArray *reply,
                gint64 *reply_step, char **refusal)
{
  PsRows *r = data;
  KsSparseTable *t;

  if (req->type == PS_SHRINK)
    return shrink (r, req, reply_step, refusal);
  if (req->type != PS_PULL_SPARSE && req->type != PS_PUSH_SPARSE)
    return refuse (refusal, "unknown request type %u", req->type);
  if (req->arg >= r->n)
    return refuse (refusal, "sparse table %u, but this job has %" G_GSIZE_FORMAT, req->arg, r->n);
  t = r->tables[req->arg];
  gint64 start = g_get_monotonic_time ();
  if (req->type == PS_PULL_SPARSE)
    {
      if (!pull (r, t, req, payload, reply, refusal))
        return FALSE;
      r->pulled += req->payload / sizeof (guint64);
      r->pull_us += g_get_monotonic_time () - start;
      return TRUE;
    }
  if (!push (r, t, req, payload, refusal))
    return FALSE;
  r->pushed += req->payload / PS_PUSH_RECORD (ks_sparse_table_dim (t));
  r->push_us += g_get_monotonic_time () - start;
  return TRUE;
}

static char *
file_name (const char *dir, const char *table, int index, int servers)
{
  return g_strdup_printf ("%s/sparse-%s-server-%d-of-%d.bin", dir, table, index, servers);
}

/* A file's identity: what ps_rows_save writes and ps_rows_load requires. */
static GHashTable *
identity (const char *save_id, gint64 step, int server, int servers, const char *table)
{
  GHashTable *id = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
  if (save_id != NULL)
    g_hash_table_insert (id, KS_CHECKPOINT_SAVE_KEY, g_strdup (save_id));
  g_hash_table_insert (id, "step", g_strdup_printf ("%" G_GINT64_FORMAT, step));
  g_hash_table_insert (id, "server", g_strdup_printf ("%d", server));
  g_hash_table_insert (id, "servers", g_strdup_printf ("%d", servers));
  g_hash_table_insert (id, "table", g_strdup (table));
  return id;
}

gboolean
ps_rows_save (PsRows *r, const char *dir, gint64 step, GError **error)
{
  g_autofree char *save_id = ks_checkpoint_save_id (dir);
  for (gsize i = 0; i < r->n; i++)
    {
      const char *name = ks_sparse_table_name (r->tables[i]);
      g_autofree char *path = file_name (dir, name, r->index, r->servers);
      g_autoptr (GHashTable) id = identity (save_id, step, r->index, r->servers, name);
      gsize rows = 0;
      if (!ks_sparse_table_save_with (r->tables[i], path, KS_SPARSE_SAVE_ALL, id, &rows, error))
        return FALSE;
      g_message ("server %d: saved %" G_GSIZE_FORMAT " rows of table %s", r->index, rows, name);
    }
  return TRUE;
}

gboolean
ps_rows_load (PsRows *r, const char *dir, const PsJobIdentity *id, GError **error)
{
  int saved = id->servers;
  /* every table is read and checked into staging before any is replaced: a table that
   * loads is not undone when a later one fails, so check all files exist first */
  for (gsize i = 0; i < r->n; i++)
    for (int s = 0; s < saved; s++)
      {
        g_autofree char *path = file_name (dir, ks_sparse_table_name (r->tables[i]), s, saved);
        GStatBuf st;
        if (g_stat (path, &st) != 0 && g_file_test (path, G_FILE_TEST_IS_SYMLINK))
          return g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO,
                              "%s is a link to nothing (%s): put table %s's saved file there",
                              path, g_strerror (errno), ks_sparse_table_name (r->tables[i])),
                 FALSE;
        if (g_stat (path, &st) != 0)
          return g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_MISMATCH,
                              "%s is missing: the checkpoint was written by %d servers and "
                              "holds table %s from each", path, saved,
                              ks_sparse_table_name (r->tables[i])), FALSE;
        /* a FIFO would block the read, a device (a link to /dev/zero) never end it */
        if (!S_ISREG (st.st_mode))
          return g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO,
                              "%s is not a regular file (%s%s): put table %s's saved file "
                              "there", path,
                              g_file_test (path, G_FILE_TEST_IS_SYMLINK) ? "a link to " : "",
                              S_ISFIFO (st.st_mode)  ? "a FIFO"
                              : S_ISCHR (st.st_mode) ? "a character device"
                              : S_ISDIR (st.st_mode) ? "a directory"
                                                     : "not a file",
                              ks_sparse_table_name (r->tables[i])), FALSE;
      }
  for (gsize i = 0; i < r->n; i++)
    {
      const char *name = ks_sparse_table_name (r->tables[i]);
      g_autoptr (GPtrArray) paths = g_ptr_array_new_with_free_func (g_free);
      g_autoptr (GPtrArray) ids = g_ptr_array_new_with_free_func ((GDestroyNotify) g_hash_table_unref);
      g_autofree KsSparseFileCheck *checks = g_new0 (KsSparseFileCheck, saved);
      gsize rows = 0;
      for (int s = 0; s < saved; s++)
        {
          g_ptr_array_add (paths, file_name (dir, name, s, saved));
          /* an older checkpoint's files name nothing: only their rows are checked */
          g_ptr_array_add (ids, identity (id->save_id, id->step, s, saved, name));
          checks[s] = (KsSparseFileCheck) { id->save_id != NULL ? g_ptr_array_index (ids, s) : NULL,
                                            s, saved, id->file };
        }
      if (!ks_sparse_table_load_with (r->tables[i], (const char *const *) paths->pdata, checks,
                                      paths->len, r->index, r->servers, TRUE, &rows, error))
        return FALSE;
      g_message ("server %d: loaded %" G_GSIZE_FORMAT " rows of table %s from %d files",
                 r->index, rows, name, saved);
    }
  return TRUE;
}

void
ps_rows_served (PsRows *r, guint64 *pulled, double *pull_s, guint64 *pushed, double *push_s)
{
  *pulled = r->pulled;
  *pushed = r->pushed;
  *pull_s = r->pull_us / 1e6;
  *push_s = r->push_us / 1e6;
}

void
ps_rows_usage (PsRows *r, gsize *n_rows, gsize *bytes)
{
  *n_rows = *bytes = 0;
  for (gsize i = 0; i < r->n; i++)
    {
      *n_rows += ks_sparse_table_size (r->tables[i]);
      *bytes += ks_sparse_table_memory (r->tables[i]);
    }
}
