/* The worker's sparse pulls and pushes (sparse-worker.h). */
#include "sparse-worker.h"
#include "rows.h"

#include <string.h>

typedef struct {
  gint64 step;
  guint table;
  GByteArray **payload; /* per server */
} PushJob;

struct PsSparseWorker {
  PsSparseWorkerConfig cfg;
  gsize *dims;
  int servers;
  PsClient *pull_client, *push_client;
  /* a pull's ids and values per server, and where each goes in the caller's order */
  GArray **ids, **where;
  float **values;
  gsize *capacity;
  /* the sending thread */
  GThread *thread;
  GMutex lock;
  GCond changed;
  GQueue queue;
  gboolean stopping;
  guint64 pushed, answered;
  GError *failure;
  gint64 last_step; /* of the latest push: a shrink names it */
};

static void
job_free (PushJob *j, int servers)
{
  for (int s = 0; s < servers; s++)
    g_byte_array_unref (j->payload[s]);
  g_free (j->payload);
  g_free (j);
}

static gpointer
send_loop (gpointer data)
{
  PsSparseWorker *w = data;
  g_autofree PsCall *calls = g_new0 (PsCall, w->servers);

  g_mutex_lock (&w->lock);
  for (;;)
    {
      while (!w->stopping && g_queue_is_empty (&w->queue))
        g_cond_wait (&w->changed, &w->lock);
      if (w->stopping)
        break;
      PushJob *j = g_queue_pop_head (&w->queue);
      g_mutex_unlock (&w->lock);
      gsize n = 0;
      g_autoptr (GError) e = NULL;
      for (int s = 0; s < w->servers; s++)
        if (j->payload[s]->len > 0)
          calls[n++] = (PsCall) { s, j->payload[s]->data, j->payload[s]->len, NULL, 0, 0 };
      gboolean ok = n == 0 || ps_client_call (w->push_client, PS_PUSH_SPARSE, j->step, j->table,
                                              0, calls, n, &e);
      job_free (j, w->servers);
      g_mutex_lock (&w->lock);
      if (!ok && w->failure == NULL)
        w->failure = g_steal_pointer (&e);
      w->answered++;
      g_cond_broadcast (&w->changed);
    }
  g_mutex_unlock (&w->lock);
  return NULL;
}

/* Waits until at most `left` pushes are unanswered; FALSE with the sending thread's error. */
static gboolean
wait_pushes (PsSparseWorker *w, guint64 left, GError **error)
{
  gboolean ok;
  g_mutex_lock (&w->lock);
  while (w->failure == NULL && w->pushed - w->answered > left)
    g_cond_wait (&w->changed, &w->lock);
  ok = w->failure == NULL;
  if (!ok)
    g_propagate_prefixed_error (error, g_error_copy (w->failure), "a sparse push: ");
  g_mutex_unlock (&w->lock);
  return ok;
}

/* Hello to every server; *step gets the step of the checkpoint they loaded (0: none),
 * which must be the same on all. */
static gboolean
hello (PsSparseWorker *w, PsClient *c, gint64 *step, GError **error)
{
  g_autofree PsCall *calls = g_new0 (PsCall, w->servers);
  for (int s = 0; s < w->servers; s++)
    calls[s] = (PsCall) { s, NULL, 0, NULL, 0, 0 };
  if (!ps_client_call (c, PS_HELLO, 0, w->cfg.mode, w->cfg.fingerprint, calls, w->servers,
                       error))
    return FALSE;
  *step = calls[0].reply_step;
  for (int s = 1; s < w->servers; s++)
    if (calls[s].reply_step != *step)
      {
        g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
                     "server 0 loaded the checkpoint of step %" G_GINT64_FORMAT " but server "
                     "%d that of step %" G_GINT64_FORMAT ": start every server from the same "
                     "checkpoint", *step, s, calls[s].reply_step);
        return FALSE;
      }
  return TRUE;
}

PsSparseWorker *
ps_sparse_worker_new (const PsSparseWorkerConfig *cfg, gint64 *server_step, GError **error)
{
  PsSparseWorker *w = g_new0 (PsSparseWorker, 1);
  gint64 other;

  w->cfg = *cfg;
  w->dims = g_memdup2 (cfg->dims, MAX (cfg->n_tables, 1) * sizeof (gsize));
  w->cfg.dims = w->dims;
  w->servers = g_strv_length ((char **) cfg->endpoints);
  g_mutex_init (&w->lock);
  g_cond_init (&w->changed);
  g_queue_init (&w->queue);
  w->ids = g_new0 (GArray *, w->servers);
  w->where = g_new0 (GArray *, w->servers);
  w->values = g_new0 (float *, w->servers);
  w->capacity = g_new0 (gsize, w->servers);
  for (int s = 0; s < w->servers; s++)
    {
      w->ids[s] = g_array_new (FALSE, FALSE, sizeof (guint64));
      w->where[s] = g_array_new (FALSE, FALSE, sizeof (gsize));
    }
  if ((w->pull_client = ps_client_new (cfg->endpoints, cfg->token, cfg->index, cfg->timeout_ms,
                                       cfg->max_message, cfg->unencrypted, error))
          == NULL
      || (w->push_client = ps_client_new (cfg->endpoints, cfg->token, cfg->index,
                                          cfg->timeout_ms, cfg->max_message, cfg->unencrypted,
                                          error))
             == NULL
      || !hello (w, w->pull_client, server_step, error)
      || !hello (w, w->push_client, &other, error))
    {
      ps_sparse_worker_free (w);
      return NULL;
    }
  w->thread = g_thread_new ("ps-sparse-send", send_loop, w);
  return w;
}

PsClient *
ps_sparse_worker_pull_client (PsSparseWorker *w)
{
  return w->pull_client;
}

void
ps_sparse_worker_free (PsSparseWorker *w)
{
  if (w == NULL)
    return;
  if (w->thread != NULL)
    {
      g_mutex_lock (&w->lock);
      w->stopping = TRUE;
      g_cond_broadcast (&w->changed);
      g_mutex_unlock (&w->lock);
      g_thread_join (w->thread);
    }
  PushJob *j;
  while ((j = g_queue_pop_head (&w->queue)) != NULL)
    job_free (j, w->servers);
  ps_client_free (w->pull_client);
  ps_client_free (w->push_client);
  for (int s = 0; s < w->servers; s++)
    {
      g_array_unref (w->ids[s]);
      g_array_unref (w->where[s]);
      g_free (w->values[s]);
    }
  g_free (w->ids);
  g_free (w->where);
  g_free (w->values);
  g_free (w->capacity);
  g_clear_error (&w->failure);
  g_mutex_clear (&w->lock);
  g_cond_clear (&w->changed);
  g_free (w->dims);
  g_free (w);
}

gboolean
ps_sparse_worker_pull (PsSparseWorker *w, guint table, const guint64 *ids, gsize n,
                       gboolean create, float *out, GError **error)
{
  g_return_val_if_fail (table < w->cfg.n_tables, FALSE);
  gsize dim = w->dims[table];
  /* ids per request: its ids and its answer each fit in a message */
  gsize most = MAX (1, w->cfg.max_message / (MAX (dim * sizeof (float), sizeof (guint64))));
  g_autofree PsCall *calls = g_new0 (PsCall, w->servers);
  g_autofree PsSegment *into = g_new0 (PsSegment, w->servers);
  if (!wait_pushes (w, (guint64) w->cfg.staleness, error))
    return FALSE;
  for (int s = 0; s < w->servers; s++)
    {
      g_array_set_size (w->ids[s], 0);
      g_array_set_size (w->where[s], 0);
    }
  for (gsize i = 0; i < n; i++)
    {
      if (ids[i] == 0) /* an empty field */
        {
          memset (out + i * dim, 0, dim * sizeof (float));
          continue;
        }
      int s = ps_row_server (ids[i], w->servers);
      g_array_append_val (w->ids[s], ids[i]);
      g_array_append_val (w->where[s], i);
    }
  for (int s = 0; s < w->servers; s++)
    if (w->capacity[s] < w->ids[s]->len * dim)
      {
        w->capacity[s] = w->ids[s]->len * dim;
        w->values[s] = g_renew (float, w->values[s], w->capacity[s]);
      }
  /* every server at once, in rounds of at most `most` ids each */
  for (gsize first = 0;; first += most)
    {
      gsize k = 0;
      for (int s = 0; s < w->servers; s++)
        {
          gsize m = w->ids[s]->len;
          if (first >= m)
            continue;
          gsize part = MIN (most, m - first);
          into[k] = (PsSegment) { w->values[s] + first * dim, part * dim * sizeof (float) };
          calls[k] = (PsCall) { s, &g_array_index (w->ids[s], guint64, first),
                                part * sizeof (guint64), &into[k], 1, 0 };
          k++;
        }
      if (k == 0)
        break;
      if (!ps_client_call (w->pull_client, PS_PULL_SPARSE, 0, table, create ? 1 : 0, calls, k,
                           error))
        return FALSE;
    }
  for (int s = 0; s < w->servers; s++)
    for (guint i = 0; i < w->where[s]->len; i++)
      memcpy (out + g_array_index (w->where[s], gsize, i) * dim, w->values[s] + i * dim,
              dim * sizeof (float));
  return TRUE;
}

gboolean
ps_sparse_worker_push (PsSparseWorker *w, guint table, gint64 step, const guint64 *ids, gsize n,
                       const float *grads, const float *shows, const float *clicks,
                       GError **error)
{
  g_return_val_if_fail (table < w->cfg.n_tables, FALSE);
  gsize dim = w->dims[table], record = PS_PUSH_RECORD (dim);
  /* records per message; the ids go in slices of that many, a push each */
  gsize most = MAX (1, MIN (w->cfg.max_message, G_MAXUINT) / record);

  for (gsize first = 0; first < MAX (n, 1); first += most)
    {
      PushJob *j = g_new0 (PushJob, 1);
      j->step = step;
      w->last_step = MAX (w->last_step, step);
      j->table = table;
      j->payload = g_new (GByteArray *, w->servers);
      for (int s = 0; s < w->servers; s++)
        j->payload[s] = g_byte_array_new ();
      for (gsize i = first; i < MIN (n, first + most); i++)
        {
          if (ids[i] == 0)
            continue;
          GByteArray *p = j->payload[ps_row_server (ids[i], w->servers)];
          gsize at = p->len;
          g_byte_array_set_size (p, at + record);
          memcpy (p->data + at, &ids[i], sizeof (guint64));
          memcpy (p->data + at + 8, &shows[i], sizeof (float));
          memcpy (p->data + at + 12, &clicks[i], sizeof (float));
          memcpy (p->data + at + 16, grads + i * dim, dim * sizeof (float));
        }
      g_mutex_lock (&w->lock);
      g_queue_push_tail (&w->queue, j);
      w->pushed++;
      g_cond_broadcast (&w->changed);
      g_mutex_unlock (&w->lock);
    }
  /* the queue is bounded: a worker never runs more than staleness + 1 pushes ahead */
  return wait_pushes (w, (guint64) w->cfg.staleness + 1, error);
}

gboolean
ps_sparse_worker_flush (PsSparseWorker *w, GError **error)
{
  return wait_pushes (w, 0, error);
}

gboolean
ps_sparse_worker_shrink (PsSparseWorker *w, guint64 *deleted, GError **error)
{
  g_autofree PsCall *calls = g_new0 (PsCall, w->servers);
  if (!ps_sparse_worker_flush (w, error))
    return FALSE;
  for (int s = 0; s < w->servers; s++)
    calls[s] = (PsCall) { s, NULL, 0, NULL, 0, 0 };
  /* the step it is due at: servers accept one every [data] shrink_every steps */
  if (!ps_client_call (w->pull_client, PS_SHRINK, w->last_step, 0, 0, calls, w->servers, error))
    return FALSE;
  *deleted = 0;
  for (int s = 0; s < w->servers; s++)
    *deleted += (guint64) MAX (calls[s].reply_step, 0);
  return TRUE;
}
