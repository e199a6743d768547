/* The worker's side of each mode (worker.h). Values and gradients cross as host copies
 * of the model's arenas: gradients packed per server in the layout's block order, the
 * values received from the frames straight into their blocks. */
#include "worker.h"
#include "floats.h"

#include <math.h>
#include <string.h>

struct PsWorker {
  PsClient *client;
  const PsLayout *layout;
  PsStrategy strategy;
  int index, workers, servers;
  KsModel *model;
  KsCompute *compute;
  gsize numel;              /* of the arenas */
  gsize **blocks, *n_blocks; /* each server's block indices */
  float **send;              /* packed per server */
  PsSegment **segs;          /* per server: its blocks in a host arena (set per call) */
  float *host;               /* a host copy of an arena */
  gint64 pushes;
  gint64 since_push;         /* GEO: local steps not pushed yet */
  float *old;                /* the values last taken from the servers */
  double *norms;             /* per server: its values' norm as last taken; */
  gboolean *jumped;          /* whether a jump of them was told */
  /* async: gradients queued for the sending thread and the values it got back */
  GThread *thread;
  GMutex lock;
  GCond changed;
  GQueue queue, spare;
  GQueue read_at;            /* per queued gradient: the push whose values it was computed on */
  gboolean stopping, busy;
  GError *failure;
  float *fresh;
  guint64 fresh_version, taken_version;
};

static void
pack (PsWorker *w, int s, const float *arena, float *out)
{
  for (gsize i = 0, pos = 0; i < w->n_blocks[s]; i++)
    {
      const PsBlock *b = &w->layout->blocks[w->blocks[s][i]];
      memcpy (out + pos, arena + b->arena_offset, b->len * sizeof (float));
      pos += b->len;
    }
}

/* Points server s's segments at its blocks of `arena`, where its values go. */
static void
aim (PsWorker *w, int s, float *arena)
{
  for (gsize i = 0; i < w->n_blocks[s]; i++)
    {
      const PsBlock *b = &w->layout->blocks[w->blocks[s][i]];
      w->segs[s][i] = (PsSegment) { arena + b->arena_offset, b->len * sizeof (float) };
    }
}

/* Says (once per server) when the values that came back from a server are orders of
 * magnitude further from 0 than the last ones: a finite push that is not training's
 * (another process with the job's token) or a diverging run, which else trains on with
 * exit 0. Relative to at least an RMS of 1 per float, as the servers' bound. */
static void
watch_values (PsWorker *w)
{
  for (int s = 0; s < w->servers; s++)
    {
      gsize n = w->layout->server_floats[s];
      double floor = sqrt ((double) n), sum = 0;
      for (gsize i = 0; i < w->n_blocks[s]; i++)
        {
          double b = ps_floats_norm (w->segs[s][i].data, w->segs[s][i].len / sizeof (float));
          sum += b * b;
        }
      double now = sqrt (sum);
      if (w->norms[s] >= 0 && now > 100 * MAX (w->norms[s], floor) && !w->jumped[s])
        {
          w->jumped[s] = TRUE;
          g_warning ("worker %d: the parameters held by server %d jumped from norm %.3g to "
                     "%.3g (%.3g times) between two exchanges: a push that is not training's "
                     "(a process with the job's token) or a diverging run; check the loss and "
                     "the held-out metric", w->index, s, w->norms[s], now,
                     now / MAX (w->norms[s], 1e-30));
        }
      w->norms[s] = now;
    }
}

/* The model's parameters from (to_model) or into the host buffer `host`. */
static gboolean
params_copy (PsWorker *w, float *host, gboolean to_model, GError **error)
{
  float *dev = ks_arena_data (ks_model_parameters (w->model));
  gsize bytes = w->numel * sizeof (float);
  if (!to_model)
    return ks_compute_copy_to_host (w->compute, host, dev, bytes, error);
  if (!ks_compute_copy_to_device (w->compute, dev, host, bytes, error))
    return FALSE;
  ks_model_parameters_changed (w->model);
  return TRUE;
}

/* One request to every server: payload send[s] when `with_payload`, the replies' values
 * into their blocks of `values` (a host arena). */
static gboolean
call_all (PsWorker *w, PsType type, gint64 step, guint32 arg, gboolean with_payload,
          float *values, GError **error)
{
  g_autofree PsCall *calls = g_new0 (PsCall, w->servers);
  for (int s = 0; s < w->servers; s++)
    {
      gsize bytes = w->layout->server_floats[s] * sizeof (float);
      aim (w, s, values);
      calls[s] = (PsCall) { s, with_payload ? w->send[s] : NULL, with_payload ? bytes : 0,
                            w->segs[s], w->n_blocks[s], 0 };
    }
  return ps_client_call (w->client, type, step, arg, 0, calls, w->servers, error);
}

/* Pushes the packed send buffers; the replies' values go into `values` (a host arena).
 * `read_at` (async): the push whose reply held the values the gradients were computed on.
 * A value that is not finite would spread to every value it reaches on the servers (and
 * from there to every worker): this worker's training diverged, and the job stops here,
 * naming it, before anything is pushed. */
static gboolean
exchange (PsWorker *w, PsType type, const float *arena, float *values, guint64 read_at,
          GError **error)
{
  gsize i = ps_floats_nonfinite (arena, w->numel);
  if (i < w->numel)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "worker %d: its %s holds %g (float %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT
                   "), which is not finite: its training diverged, and nothing was pushed "
                   "(lower [optim] lr, or use a warmup)", w->index,
                   type == PS_PUSH_DELTA ? "GEO delta" : "gradient", arena[i], i, w->numel);
      return FALSE;
    }
  for (int s = 0; s < w->servers; s++)
    pack (w, s, arena, w->send[s]);
  if (!call_all (w, type, ++w->pushes, (guint32) read_at, TRUE, values, error))
    return FALSE;
  watch_values (w);
  return TRUE;
}

/* ---- async: the sending thread ---- */

static gpointer
send_loop (gpointer data)
{
  PsWorker *w = data;
  g_autofree float *merged = g_new (float, w->numel);
  g_autofree float *values = g_new0 (float, w->numel); /* the arena's padding stays 0 */

  g_mutex_lock (&w->lock);
  for (;;)
    {
      while (!w->stopping && g_queue_is_empty (&w->queue))
        g_cond_wait (&w->changed, &w->lock);
      if (g_queue_is_empty (&w->queue))
        break;
      /* up to max_merge_var_num gradients, averaged into one push */
      gsize n = 0;
      guint64 read_at = GPOINTER_TO_SIZE (g_queue_peek_head (&w->read_at)); /* the oldest */
      memset (merged, 0, w->numel * sizeof (float));
      w->busy = TRUE;
      while (!g_queue_is_empty (&w->queue) && n < (gsize) w->strategy.max_merge_var_num)
        {
          float *g = g_queue_pop_head (&w->queue);
          g_queue_pop_head (&w->read_at);
          for (gsize i = 0; i < w->numel; i++)
            merged[i] += g[i];
          g_queue_push_tail (&w->spare, g);
          n++;
        }
      g_cond_broadcast (&w->changed); /* room in the queue */
      g_mutex_unlock (&w->lock);
      for (gsize i = 0; n > 1 && i < w->numel; i++)
        merged[i] /= n;
      GError *e = NULL;
      gboolean ok = exchange (w, PS_PUSH_GRAD, merged, values, read_at, &e);
      g_mutex_lock (&w->lock);
      w->busy = FALSE;
      if (!ok)
        {
          w->failure = e;
          w->stopping = TRUE;
          g_cond_broadcast (&w->changed);
          break;
        }
      memcpy (w->fresh, values, w->numel * sizeof (float));
      w->fresh_version++;
      g_cond_broadcast (&w->changed);
    }
  g_mutex_unlock (&w->lock);
  return NULL;
}

/* Takes the sending thread's newest values into the model; called with the lock held. */
static gboolean
take_fresh (PsWorker *w, GError **error)
{
  if (w->fresh_version == w->taken_version)
    return TRUE;
  w->taken_version = w->fresh_version;
  return params_copy (w, w->fresh, TRUE, error);
}

static gboolean
async_failed (PsWorker *w, GError **error)
{
  if (w->failure == NULL)
    return FALSE;
  g_propagate_prefixed_error (error, g_error_copy (w->failure), "the sending thread: ");
  return TRUE;
}

static gboolean
async_step (PsWorker *w, GError **error)
{
  float *slot;
  gboolean ok;

  g_mutex_lock (&w->lock);
  while (w->failure == NULL && g_queue_get_length (&w->queue) >= (guint) w->strategy.send_queue_size)
    g_cond_wait (&w->changed, &w->lock);
  if (async_failed (w, error))
    {
      g_mutex_unlock (&w->lock);
      return FALSE;
    }
  slot = g_queue_is_empty (&w->spare) ? g_new (float, w->numel) : g_queue_pop_head (&w->spare);
  g_mutex_unlock (&w->lock);
  if (!ks_compute_copy_to_host (w->compute, slot, ks_arena_data (ks_model_gradients (w->model)),
                                w->numel * sizeof (float), error))
    {
      g_free (slot);
      return FALSE;
    }
  g_mutex_lock (&w->lock);
  g_queue_push_tail (&w->queue, slot);
  /* computed on the values taken at the step before */
  g_queue_push_tail (&w->read_at, GSIZE_TO_POINTER ((gsize) w->taken_version));
  g_cond_broadcast (&w->changed);
  ok = take_fresh (w, error);
  g_mutex_unlock (&w->lock);
  return ok;
}

/* ---- GEO ---- */

static gboolean
geo_exchange (PsWorker *w, GError **error)
{
  g_autofree float *delta = NULL;
  g_autofree float *server = NULL;

  w->since_push = 0;
  if (!params_copy (w, w->host, FALSE, error))
    return FALSE;
  delta = g_new (float, w->numel);
  server = g_new (float, w->numel);
  for (gsize i = 0; i < w->numel; i++)
    delta[i] = (w->host[i] - w->old[i]) / w->workers;
  memcpy (server, w->old, w->numel * sizeof (float)); /* padding stays as it was */
  if (!exchange (w, PS_PUSH_DELTA, delta, server, 0, error))
    return FALSE;
  /* Paddle's GeoCommunicator: the pushed delta counts as seen (old += delta); local then
   * takes what the others moved the servers' values, and keeps the rest of its own delta
   * for the next push */
  for (gsize i = 0; i < w->numel; i++)
    {
      w->host[i] += server[i] - (w->old[i] + delta[i]);
      w->old[i] = server[i];
    }
  return params_copy (w, w->host, TRUE, error);
}

static gboolean
geo_step (PsWorker *w, GError **error)
{
  return ++w->since_push < w->strategy.k_steps || geo_exchange (w, error);
}

/* ---- the interface ---- */

gboolean
ps_worker_step (PsWorker *w, GError **error)
{
  switch (w->strategy.mode)
    {
    case PS_MODE_ASYNC:
      return async_step (w, error);
    case PS_MODE_GEO:
      return geo_step (w, error);
    default: /* sync and half_async: push, and wait for the new values (into `old`, which
              * holds them since the pull of init, padding included) */
      return ks_compute_copy_to_host (w->compute, w->host,
                                      ks_arena_data (ks_model_gradients (w->model)),
                                      w->numel * sizeof (float), error)
             && exchange (w, PS_PUSH_GRAD, w->host, w->old, 0, error)
             && params_copy (w, w->old, TRUE, error);
    }
}

gboolean
ps_worker_flush (PsWorker *w, GError **error)
{
  gboolean ok;
  if (w->strategy.mode == PS_MODE_GEO) /* the local steps since the last push go too */
    return w->since_push == 0 || geo_exchange (w, error);
  if (w->thread == NULL)
    return TRUE;
  g_mutex_lock (&w->lock);
  while (w->failure == NULL && (!g_queue_is_empty (&w->queue) || w->busy))
    g_cond_wait (&w->changed, &w->lock);
  ok = !async_failed (w, error) && take_fresh (w, error);
  g_mutex_unlock (&w->lock);
  return ok;
}

gboolean
ps_worker_pull (PsWorker *w, GError **error)
{
  /* the host copy keeps the parameters the servers do not hold */
  if (!params_copy (w, w->old, FALSE, error)
      || !call_all (w, PS_PULL, 0, 0, FALSE, w->old, error))
    return FALSE;
  watch_values (w);
  return params_copy (w, w->old, TRUE, error);
}

gboolean
ps_worker_save (PsWorker *w, const char *dir, gint64 step, GError **error)
{
  g_autofree PsCall *calls = g_new0 (PsCall, w->servers);
  for (int s = 0; s < w->servers; s++)
    calls[s] = (PsCall) { s, dir, strlen (dir), NULL, 0, 0 };
  return ps_client_call (w->client, PS_SAVE, step, 0, 0, calls, w->servers, error);
}

/* Ends the sending thread; gradients still queued are dropped (ps_worker_stop flushes
 * first, a failed job has no use for them). */
static void
stop_thread (PsWorker *w)
{
  if (w->thread == NULL)
    return;
  g_mutex_lock (&w->lock);
  while (!g_queue_is_empty (&w->queue))
    g_queue_push_tail (&w->spare, g_queue_pop_head (&w->queue));
  g_queue_clear (&w->read_at);
  w->stopping = TRUE;
  g_cond_broadcast (&w->changed);
  g_mutex_unlock (&w->lock);
  g_thread_join (w->thread);
  w->thread = NULL;
}

gboolean
ps_worker_stop (PsWorker *w, GError **error)
{
  g_autofree PsCall *calls = g_new0 (PsCall, w->servers);
  if (!ps_worker_flush (w, error))
    return FALSE;
  stop_thread (w); /* the sockets are this thread's again */
  ps_client_heartbeat_stop (w->client); /* the servers may end once every worker stopped */
  for (int s = 0; s < w->servers; s++)
    calls[s] = (PsCall) { s, NULL, 0, NULL, 0, 0 };
  return ps_client_call (w->client, PS_STOP, 0, 0, 0, calls, w->servers, error);
}

void
ps_worker_halt (PsWorker *w)
{
  if (w != NULL)
    stop_thread (w);
}

PsWorker *
ps_worker_new (PsClient *client, const PsLayout *layout, const PsStrategy *strategy, int index,
               int workers, KsModel *model, gint64 *server_step, GError **error)
{
  PsWorker *w = g_new0 (PsWorker, 1);
  g_autofree PsCall *calls = NULL;

  w->client = client;
  w->layout = layout;
  w->strategy = *strategy;
  w->index = index;
  w->workers = workers;
  w->servers = layout->servers;
  w->model = model;
  w->compute = ks_model_device (model);
  w->numel = ks_arena_numel (ks_model_parameters (model));
  w->blocks = g_new0 (gsize *, w->servers);
  w->n_blocks = g_new0 (gsize, w->servers);
  w->send = g_new0 (float *, w->servers);
  w->segs = g_new0 (PsSegment *, w->servers);
  for (int s = 0; s < w->servers; s++)
    {
      w->blocks[s] = ps_layout_server_blocks (layout, s, &w->n_blocks[s]);
      w->send[s] = g_new (float, MAX (layout->server_floats[s], 1));
      w->segs[s] = g_new (PsSegment, MAX (w->n_blocks[s], 1));
    }
  w->host = g_new0 (float, w->numel);
  w->old = g_new0 (float, w->numel);
  w->norms = g_new (double, w->servers);
  w->jumped = g_new0 (gboolean, w->servers);
  for (int s = 0; s < w->servers; s++)
    w->norms[s] = -1; /* none yet */
  g_mutex_init (&w->lock);
  g_cond_init (&w->changed);
  g_queue_init (&w->queue);
  g_queue_init (&w->spare);
  g_queue_init (&w->read_at);

  calls = g_new0 (PsCall, w->servers);
  for (int s = 0; s < w->servers; s++)
    calls[s] = (PsCall) { s, NULL, 0, NULL, 0, 0 };
  if (!ps_client_call (client, PS_HELLO, 0, strategy->mode, layout->fingerprint, calls,
                       w->servers, error))
    {
      g_prefix_error (error, "init_worker: ");
      ps_worker_free (w);
      return NULL;
    }
  *server_step = calls[0].reply_step;
  for (int s = 1; s < w->servers; s++)
    if (calls[s].reply_step != *server_step)
      {
        g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
                     "init_worker: server 0 loaded the checkpoint of step %" G_GINT64_FORMAT
                     " but server %d that of step %" G_GINT64_FORMAT ": restart the servers "
                     "from one checkpoint", *server_step, s, calls[s].reply_step);
        ps_worker_free (w);
        return NULL;
      }
  /* everyone starts from the servers' values */
  if (!ps_worker_pull (w, error))
    {
      ps_worker_free (w);
      return NULL;
    }
  if (strategy->mode == PS_MODE_ASYNC)
    {
      w->fresh = g_memdup2 (w->old, w->numel * sizeof (float));
      w->thread = g_thread_new ("ps-send", send_loop, w);
    }
  return w;
}

void
ps_worker_free (PsWorker *w)
{
  if (w == NULL)
    return;
  stop_thread (w);
  for (int s = 0; s < w->servers; s++)
    {
      g_free (w->blocks[s]);
      g_free (w->send[s]);
      g_free (w->segs[s]);
    }
  g_free (w->blocks);
  g_free (w->n_blocks);
  g_free (w->send);
  g_free (w->segs);
  g_free (w->host);
  g_free (w->old);
  g_free (w->norms);
  g_free (w->jumped);
  g_free (w->fresh);
  g_queue_clear_full (&w->queue, g_free);
  g_queue_clear_full (&w->spare, g_free);
  g_queue_clear (&w->read_at);
  if (w->failure != NULL)
    g_error_free (w->failure);
  g_mutex_clear (&w->lock);
  g_cond_clear (&w->changed);
  g_free (w);
}
