/* The server's loop (server.h). Sync mode: a step's gradients are summed as they come
 * and the replies held back until the last worker's arrives; then the mean is applied
 * once and every worker gets the new values. Other modes apply each push on arrival. */
#include "server.h"
#include "wire.h"
#include "auth.h"
#include "session.h"
#include "floats.h"

#include <ksdist/away.h>
#include <errno.h>
#include <gio/gio.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <zmq.h>

#define STALE_RING 64

typedef struct {
  const PsServerConfig *cfg;
  void *zctx, *socket;
  PsAuth *auth;
  gint64 signal_at; /* when it saw its cancellable cancelled; 0: not yet */
  gint64 serve_start; /* when it began to serve, moved on by its own gaps */
  guint8 token[PS_TOKEN_BYTES];
  char *checkpoint_dir; /* absolute, from the start; NULL: saves are refused */
  gsize msg_floats;
  /* per worker */
  gboolean *hello, *stopped;
  guint8 (*owner)[PS_SESSION_BYTES]; /* the session of the process that said hello */
  char (*hello_peer)[64];            /* and its address */
  gint64 *last_seen;
  /* async: the table's update count in the values each of a worker's last STALE_RING
   * replies carried (index: its push number), and in its last pull's (push number 0), to
   * measure a push's staleness */
  gint64 (*sent)[STALE_RING];
  gint64 *pulled;
  GBytes **pending_peer; /* sync: the identity to answer once the step is complete */
  guint64 *pending_id;
  /* the sync step being gathered */
  gint64 round_step, round_start;
  int round_count;
  float *sum, *values, *aligned;
  double values_norm; /* of `values` as last read: what a push is measured against */
  GByteArray *reply; /* of an extra request */
  PsReceived in;     /* the message being served */
  /* statistics */
  guint64 requests, refused, bytes_in, bytes_out;
  gint64 window_start;
  guint64 window_requests, window_in, window_out, window_updates;
} Server;

/* Answers a request. A `stable` payload is sent without a copy: its buffer must not change
 * until the worker has it (sync mode's values, which change only once every worker has
 * pushed again, after this reply). */
static void
send_reply_from (Server *s, GBytes *peer, const PsHeader *req, PsType type, gint64 step,
                 const void *payload, gsize len, gboolean stable)
{
  PsHeader h = { 0 };
  gsize peer_len;
  const void *id = g_bytes_get_data (peer, &peer_len);

  h.type = type;
  h.sender = s->cfg->index;
  h.id = req->id;
  h.step = step;
  memcpy (h.token, s->token, PS_TOKEN_BYTES);
  if (!ps_send (s->socket, id, peer_len, &h, payload, len, stable))
    g_warning ("server %d: cannot answer worker %u: %s", s->cfg->index, req->sender,
               zmq_strerror (errno));
  s->bytes_out += sizeof h + len;
  s->window_out += sizeof h + len;
}

static void
send_reply (Server *s, GBytes *peer, const PsHeader *req, PsType type, gint64 step,
            const void *payload, gsize len)
{
  send_reply_from (s, peer, req, type, step, payload, len, FALSE);
}

static void
send_error (Server *s, GBytes *peer, const PsHeader *req, const char *format, ...)
    G_GNUC_PRINTF (4, 5);

static void
send_error (Server *s, GBytes *peer, const PsHeader *req, const char *format, ...)
{
  va_list ap;
  va_start (ap, format);
  g_autofree char *m = g_strdup_vprintf (format, ap);
  va_end (ap);
  /* the peer's address too: a refusal may be of another process than the worker */
  g_warning ("server %d: refused a %s from worker %u (%s): %s", s->cfg->index,
             ps_type_name (req->type), req->sender, s->in.peer[0] ? s->in.peer : "address unknown",
             m);
  send_reply (s, peer, req, PS_REPLY_ERROR, 0, m, strlen (m));
}

/* Reads the table's values into s->values, and their norm. */
static gboolean
read_values (Server *s, GError **error)
{
  if (!ps_dense_table_read (s->cfg->table, s->values, error))
    return FALSE;
  s->values_norm = ps_floats_norm (s->values, s->msg_floats);
  return TRUE;
}

/* Replies with the table's values; FALSE when they cannot be read. */
static gboolean
reply_values (Server *s, GBytes *peer, const PsHeader *req, GError **error)
{
  if (!read_values (s, error))
    return FALSE;
  send_reply (s, peer, req, PS_REPLY_OK, req->step, s->values, s->msg_floats * sizeof (float));
  return TRUE;
}

/* A sync push: adds to the step's sum; the last one applies and answers everyone. */
static gboolean
sync_push (Server *s, GBytes *peer, const PsHeader *req, const float *grads, GError **error)
{
  int w = req->sender, W = s->cfg->workers;

  if (s->round_count > 0 && req->step != s->round_step)
    {
      send_error (s, peer, req, "pushed step %" G_GINT64_FORMAT " while the others are at "
                  "step %" G_GINT64_FORMAT ": sync workers must step together", req->step,
                  s->round_step);
      return TRUE;
    }
  if (s->pending_peer[w] != NULL)
    {
      send_error (s, peer, req, "pushed step %" G_GINT64_FORMAT " twice", req->step);
      return TRUE;
    }
  if (s->round_count == 0)
    {
      s->round_step = req->step;
      s->round_start = g_get_monotonic_time ();
      memset (s->sum, 0, s->msg_floats * sizeof (float));
    }
  ps_floats_add (s->sum, grads, s->msg_floats);
  s->pending_peer[w] = g_bytes_ref (peer);
  s->pending_id[w] = req->id;
  if (++s->round_count < W)
    return TRUE;

  ps_floats_divide (s->sum, s->msg_floats, (float) W); /* as sum[i] /= W */
  if (!ps_dense_table_apply (s->cfg->table, s->sum, error) || !read_values (s, error))
    return FALSE;
  s->window_updates++;
  for (int i = 0; i < W; i++)
    {
      PsHeader h = *req;
      h.id = s->pending_id[i];
      h.sender = i;
      send_reply_from (s, s->pending_peer[i], &h, PS_REPLY_OK, s->round_step, s->values,
                       s->msg_floats * sizeof (float), TRUE);
      g_clear_pointer (&s->pending_peer[i], g_bytes_unref);
    }
  s->round_count = 0;
  return TRUE;
}

/* A push of as many floats as this server holds, every one finite: one NaN or infinity
 * would spread to every value it reaches and from there to every worker. */
static gboolean
expect_floats (Server *s, GBytes *peer, const PsHeader *req, const float *v)
{
  if (req->payload != s->msg_floats * sizeof (float))
    {
      send_error (s, peer, req, "%" G_GUINT64_FORMAT " bytes of floats, but this server holds %"
                  G_GSIZE_FORMAT " floats of the model: is every process running the same "
                  "config?", req->payload, s->msg_floats);
      return FALSE;
    }
  gsize i = ps_floats_nonfinite (v, s->msg_floats);
  if (i < s->msg_floats)
    {
      send_error (s, peer, req, "float %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT " is %g, "
                  "not finite: nothing of this push was applied", i, s->msg_floats, v[i]);
      return FALSE;
    }
  return TRUE;
}

/* A GEO delta within [strategy] max_update_norm: one finite delta of 1e3 per float (a
 * delta is added as it is) wrecked a job that then ended with exit 0. The bound is
 * relative to the values (at least to an RMS of 1 per float: values near 0 at the start
 * still train), far above what a worker's training pushes. */
static gboolean
within_bound (Server *s, GBytes *peer, const PsHeader *req, const float *v)
{
  double bound = s->cfg->max_update_norm * MAX (s->values_norm, sqrt ((double) s->msg_floats));
  double n = ps_floats_norm (v, s->msg_floats);
  if (s->cfg->max_update_norm <= 0 || n <= bound)
    return TRUE;
  send_error (s, peer, req, "its GEO delta has norm %.3g, above [strategy] max_update_norm = %g "
              "times %.3g (the larger of the norm of this server's %" G_GSIZE_FORMAT
              " parameters, %.3g, and the square root of their count): nothing of it was "
              "applied (a worker whose training diverged, or a process with the job's token; "
              "raise max_update_norm, or 0 for no bound, if the run is sound)",
              n,
              s->cfg->max_update_norm, bound / s->cfg->max_update_norm, s->msg_floats,
              s->values_norm);
  return FALSE;
}

/* An async push: its staleness is the updates applied since the values
 * its gradients were computed on, those of the reply to its push number `arg` (the
 * oldest of the gradients it merges); the table divides the learning rate by it. A push
 * number older than the ring (a queue longer than it) counts as `workers` updates per
 * push since. */
static gboolean
async_apply (Server *s, int w, const PsHeader *req, const void *payload, GError **error)
{
  PsDenseTable *t = s->cfg->table;
  gint64 behind = req->step - (gint64) req->arg, staleness;

  if (s->cfg->mode != PS_MODE_ASYNC) /* half-async: the rate as it is */
    return ps_dense_table_apply (t, payload, error);
  if (req->arg == 0)
    staleness = t->updates - s->pulled[w];
  else if (behind >= 1 && behind < STALE_RING)
    staleness = t->updates - s->sent[w][req->arg % STALE_RING];
  else
    staleness = MAX (behind, 1) * s->cfg->workers;
  if (!ps_dense_table_apply_stale (t, payload, staleness, error))
    return FALSE;
  /* the push number is the peer's: unsigned, so a negative one indexes inside the ring */
  s->sent[w][(guint64) req->step % STALE_RING] = t->updates;
  return TRUE;
}

/* Serves one well-formed request; FALSE only when the server cannot go on. */
static gboolean
handle (Server *s, GBytes *peer, const PsHeader *req, const void *payload, GError **error)
{
  const PsServerConfig *c = s->cfg;
  gboolean geo = c->mode == PS_MODE_GEO;
  int w = req->sender;

  /* a payload of floats where floats may be read (ZeroMQ may place a small one anywhere) */
  if (req->payload == s->msg_floats * sizeof (float) && ((guintptr) payload % sizeof (float)) != 0)
    payload = memcpy (s->aligned, payload, req->payload);
  if (req->type != PS_HELLO && !s->hello[w])
    {
      send_error (s, peer, req, "a %s before hello", ps_type_name (req->type));
      return TRUE;
    }
  /* the process that said hello as worker w speaks for it, no other (session.h) */
  if (s->hello[w] && !ps_session_owns (peer, s->owner[w]))
    {
      send_error (s, peer, req, "it came from %s on a connection of another process than "
                  "the one that said hello as worker %d (from %s): a process with the job's "
                  "token speaking for a worker, or worker %d started twice; nothing was done",
                  s->in.peer[0] ? s->in.peer : "an unknown address", w, s->hello_peer[w], w);
      return TRUE;
    }
  switch (req->type)
    {
    case PS_HELLO:
      if (req->aux != c->fingerprint)
        send_error (s, peer, req, "worker %d holds another model than server %d (the "
                    "parameters' names, sizes or the server count differ): start every "
                    "process with the same config", w, c->index);
      else if (req->arg != (guint32) c->mode)
        send_error (s, peer, req, "worker %d runs [strategy] mode %s but server %d runs %s",
                    w, req->arg <= PS_MODE_GEO ? ps_mode_name (req->arg) : "?", c->index,
                    ps_mode_name (c->mode));
      else if (g_bytes_get_size (peer) != PS_SESSION_BYTES + 4)
        send_error (s, peer, req, "a hello as worker %d from %s without a worker's session "
                    "in its routing id: is every process running the same ksdist?", w,
                    s->in.peer[0] ? s->in.peer : "an unknown address");
      else
        {
          s->hello[w] = TRUE;
          memcpy (s->owner[w], g_bytes_get_data (peer, NULL), PS_SESSION_BYTES);
          g_strlcpy (s->hello_peer[w], s->in.peer[0] ? s->in.peer : "an unknown address",
                     sizeof s->hello_peer[w]);
          send_reply (s, peer, req, PS_REPLY_OK, c->step, NULL, 0);
        }
      return TRUE;
    case PS_PULL:
      s->pulled[w] = c->table->updates;
      return reply_values (s, peer, req, error);
    case PS_PUSH_GRAD:
      if (geo)
        {
          send_error (s, peer, req, "gradients pushed to a GEO server (it takes deltas)");
          return TRUE;
        }
      /* no norm bound: the optimizer scales a gradient (Adam's step is about lr a float
       * whatever its size), and a sound regression on raw targets pushes gradients
       * hundreds of times its parameters' norm */
      if (!expect_floats (s, peer, req, payload))
        return TRUE;
      if (c->mode == PS_MODE_SYNC)
        return sync_push (s, peer, req, payload, error);
      if (!async_apply (s, w, req, payload, error))
        return FALSE;
      s->window_updates++;
      return reply_values (s, peer, req, error);
    case PS_PUSH_DELTA:
      if (!geo)
        {
          send_error (s, peer, req, "a delta pushed to a %s server", ps_mode_name (c->mode));
          return TRUE;
        }
      if (!expect_floats (s, peer, req, payload) || !within_bound (s, peer, req, payload))
        return TRUE;
      if (!ps_dense_table_add (c->table, payload, error))
        return FALSE;
      s->window_updates++;
      return reply_values (s, peer, req, error);
    case PS_SAVE:
      {
        g_autofree char *dir = g_strndup (payload, MIN (req->payload, 4096));
        g_autoptr (GError) e = NULL;
        /* the directory is the request's, so untrusted: only a save's own, in the
         * directory this server was started with */
        if (w != 0)
          send_error (s, peer, req, "a save from worker %d: only worker 0 asks for one", w);
        else if (req->payload == 0 || req->payload > 4096 || strlen (dir) != req->payload)
          send_error (s, peer, req, "a save needs a directory name (1 to 4096 bytes, no NUL)");
        else if (s->checkpoint_dir == NULL)
          send_error (s, peer, req, "server %d was started without [train] checkpoint_dir, "
                      "so it writes no checkpoint: start every process with the same "
                      "[train] checkpoint_dir", c->index);
        else if (!ks_checkpoint_check_temporary (s->checkpoint_dir, dir, req->step, &e))
          send_error (s, peer, req, "%s: this server writes only a save's temporary "
                      "directory in its [train] checkpoint_dir", e->message);
        else if (!c->save (c->save_data, dir, req->step, &e))
          send_error (s, peer, req, "%s", e->message);
        else
          send_reply (s, peer, req, PS_REPLY_OK, req->step, NULL, 0);
        /* the workers waited for the save, not silent */
        for (int i = 0; i < c->workers; i++)
          s->last_seen[i] = MAX (s->last_seen[i], g_get_monotonic_time ());
        return TRUE;
      }
    case PS_HEARTBEAT: /* last_seen is noted; the worker learns this server is alive */
      send_reply (s, peer, req, PS_REPLY_OK, 0, NULL, 0);
      return TRUE;
    case PS_STOP:
      s->stopped[w] = TRUE;
      send_reply (s, peer, req, PS_REPLY_OK, 0, NULL, 0);
      return TRUE;
    default:
      if (c->extra == NULL)
        send_error (s, peer, req, "unknown request type %u", req->type);
      else
        {
          g_autofree char *refusal = NULL;
          gint64 step = 0;
          g_byte_array_set_size (s->reply, 0);
          if (!c->extra (c->extra_data, req, payload, s->reply, &step, &refusal))
            send_error (s, peer, req, "%s", refusal);
          else
            {
              s->window_updates += req->type == PS_PUSH_SPARSE;
              send_reply (s, peer, req, PS_REPLY_OK, step, s->reply->data, s->reply->len);
            }
        }
      return TRUE;
    }
}

/* Logs a refused message: every one of the first ten, then every thousandth. */
static void
refuse (Server *s, const char *why)
{
  s->refused++;
  if (s->refused <= 10 || s->refused % 1000 == 0)
    g_warning ("server %d: refused a message (%" G_GUINT64_FORMAT " so far): %s",
               s->cfg->index, s->refused, why);
}

/* Receives one message (identity, header and payload frames) and serves it. */
static gboolean
receive (Server *s, GError **error)
{
  PsReceived *r = &s->in;
  PsHeader h;
  g_autofree char *why = NULL;

  if (ps_receive (s->socket, TRUE, s->cfg->max_message, r) == 0)
    return TRUE;
  s->requests++;
  s->window_requests++;
  s->bytes_in += r->header_len + r->payload_len;
  s->window_in += r->header_len + r->payload_len;
  if (r->parts < 2)
    {
      why = g_strdup_printf ("a message of %d parts, not a header and a payload", r->parts);
      refuse (s, why);
    }
  else if (!ps_header_parse (r->header, r->header_len, r->payload_len, s->token, &h, &why))
    refuse (s, why);
  else if (r->uneven != 0)
    {
      why = g_strdup_printf ("a payload in frames of %" G_GSIZE_FORMAT " bytes: every one "
                             "but the last has %u", r->uneven, PS_FRAME_MAX);
      refuse (s, why);
    }
  else if (r->payload == NULL && r->payload_len > 0)
    {
      why = g_strdup_printf ("a payload of %" G_GSIZE_FORMAT " bytes, above [ps] "
                             "max_message_mb", r->payload_len);
      refuse (s, why);
    }
  else if (h.sender >= (guint32) s->cfg->workers)
    {
      g_autofree char *m = g_strdup_printf ("from worker %u of a job of %d workers", h.sender,
                                            s->cfg->workers);
      refuse (s, m);
    }
  else
    {
      s->last_seen[h.sender] = g_get_monotonic_time ();
      return handle (s, r->identity, &h, r->payload, error);
    }
  return TRUE;
}

static void
log_rates (Server *s, gboolean final)
{
  gint64 now = g_get_monotonic_time ();
  double dt = MAX (1e-6, (now - s->window_start) / 1e6);
  /* the rates are of the window since the last line, the counts of the whole run */
  g_message ("server %d: %.0f requests/s, in %.1f MB/s, out %.1f MB/s, %.1f updates/s in "
             "the last %.1f s; since the start %" G_GINT64_FORMAT " updates, %" G_GUINT64_FORMAT
             " requests, %.1f MB in, %.1f MB out, %" G_GUINT64_FORMAT " refused%s",
             s->cfg->index, s->window_requests / dt, s->window_in / dt / 1e6,
             s->window_out / dt / 1e6, s->window_updates / dt, dt, s->cfg->table->updates,
             s->requests, s->bytes_in / 1e6, s->bytes_out / 1e6, s->refused,
             final ? " (at the end)" : "");
  if (final && s->cfg->mode == PS_MODE_ASYNC)
    {
      const PsDenseTable *t = s->cfg->table;
      if (t->base_lr > 0)
        g_message ("server %d: largest staleness %" G_GINT64_FORMAT "; %" G_GINT64_FORMAT
                   " pushes applied at [optim] lr / staleness", s->cfg->index,
                   t->staleness_max, t->staleness_divided);
      else
        g_message ("server %d: largest staleness %" G_GINT64_FORMAT "; every push applied "
                   "at [optim] lr, whatever its staleness", s->cfg->index,
                   t->staleness_max);
    }
  s->window_start = now;
  s->window_requests = s->window_in = s->window_out = s->window_updates = 0;
}

/* The workers (of those that said hello and did not stop) that have been silent too
 * long, or NULL. A worker may take long to load its data before its hello. */
static char *
silent_workers (Server *s, gint64 now)
{
  GString *who = NULL;
  for (int w = 0; w < s->cfg->workers; w++)
    {
      if (s->hello[w] && !s->stopped[w]
          && now - s->last_seen[w] > (gint64) s->cfg->timeout_ms * 1000)
        {
          if (who == NULL)
            who = g_string_new (NULL);
          g_string_append_printf (who, "%s%d", who->len ? ", " : "", w);
        }
    }
  return who != NULL ? g_string_free (who, FALSE) : NULL;
}

static gboolean
all_stopped (Server *s)
{
  for (int w = 0; w < s->cfg->workers; w++)
    if (!s->stopped[w])
      return FALSE;
  return TRUE;
}

/* Whether this process was away (stopped, or starved of CPU: away.h) since *seen, its
 * ks_away_total then, which moves to now: its workers' silence counts only while it runs,
 * and past the timeout they gave up on it (FALSE, with the error that says so). */
static gboolean
check_away (Server *s, gint64 *seen, GError **error)
{
  const PsServerConfig *c = s->cfg;
  gint64 total = ks_away_total (), gap = total - *seen, now = g_get_monotonic_time ();
  gboolean watched = FALSE;

  *seen = total;
  if (gap <= 0)
    return TRUE;
  for (int w = 0; w < c->workers; w++)
    {
      s->last_seen[w] = MIN (s->last_seen[w] + gap, now);
      watched |= s->hello[w] && !s->stopped[w];
    }
  s->round_start += gap;
  s->serve_start += gap; /* the wait for a first worker counts only while it runs */
  if (!watched || gap <= (gint64) c->timeout_ms * 1000)
    return TRUE;
  /* said here (KS_AWAY_SAID): the trainer does not say it again */
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
               "server %d (%s): this server was stopped or starved for %.1f s, longer than "
               "[comm] timeout = %g s, so its workers gave up on it (they end when a server "
               "does not answer that long, and their workerlogs name it): stopping",
               c->index, c->endpoint, gap / 1e6, c->timeout_ms / 1000.0);
  return FALSE;
}

/* Whether any worker said hello and has not stopped. */
static gboolean
serving_any (Server *s)
{
  for (int w = 0; w < s->cfg->workers; w++)
    if (s->hello[w] && !s->stopped[w])
      return TRUE;
  return FALSE;
}

/* Whether to go on waiting for the workers. A server that turned connections away and
 * admitted none within [comm] timeout of its start (no key of the job's workers came,
 * others did: a token that differs) ends saying so; one that no one reached waits on, as
 * a worker may take long to start (the launcher ends it when its workers die); one
 * asked to stop (its cancellable cancelled: the trainer's SIGTERM or SIGINT) ends at once
 * when it serves no worker, else once they stopped (they were asked too, and save through
 * it first) or [comm] timeout after the request. */
static gboolean
go_on (Server *s, gint64 now, GError **error)
{
  const PsServerConfig *c = s->cfg;
  gint64 timeout = (gint64) c->timeout_ms * 1000;
  guint64 refused;

  if (!ps_auth_admitted_any (s->auth, &refused) && refused > 0
      && now - s->serve_start > timeout)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
                   "server %d (%s): no worker connected within [comm] timeout = %g s of its "
                   "start (%" G_GUINT64_FORMAT " connections were refused or failed their "
                   "CURVE handshake): check that KS_STORE_TOKEN is the same in every process "
                   "of the job (the workers' keys come from it), and that the workers run "
                   "and reach this address", c->index, c->endpoint, c->timeout_ms / 1000.0,
                   refused);
      return FALSE;
    }
  if (!g_cancellable_is_cancelled (c->cancellable))
    return TRUE;
  if (s->signal_at == 0)
    s->signal_at = now;
  gboolean serving = serving_any (s);
  if (serving && now - s->signal_at <= timeout)
    return TRUE;
  return ks_fail (error, G_IO_ERROR, G_IO_ERROR_CANCELLED,
                  "server %d (%s): asked to stop (SIGTERM or SIGINT) %s", c->index, c->endpoint,
                  serving ? "and its workers did not stop within [comm] timeout of it"
                          : "with no worker to serve");
}

static gboolean
serve (Server *s, GError **error)
{
  const PsServerConfig *c = s->cfg;
  gint64 start = g_get_monotonic_time (), next_log = start + (gint64) (c->log_every_s * 1e6);

  s->window_start = s->serve_start = start;
  gint64 seen = ks_away_total ();
  while (!all_stopped (s))
    {
      zmq_pollitem_t item = { s->socket, 0, ZMQ_POLLIN, 0 };
      if (!check_away (s, &seen, error))
        return FALSE;
      if (zmq_poll (&item, 1, 100) < 0 && errno != EINTR)
        {
          g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED, "server %d: poll: %s",
                       c->index, zmq_strerror (errno));
          return FALSE;
        }
      /* stopped while it waited (the usual place): said before judging the workers */
      if (!check_away (s, &seen, error))
        return FALSE;
      for (int i = 0; (item.revents & ZMQ_POLLIN) && i < 64; i++) /* a burst, then checks */
        {
          int events = 0;
          size_t len = sizeof events;
          if (!receive (s, error))
            return FALSE;
          zmq_getsockopt (s->socket, ZMQ_EVENTS, &events, &len);
          if (!(events & ZMQ_POLLIN))
            break;
        }
      gint64 now = g_get_monotonic_time ();
      if (!go_on (s, now, error))
        return FALSE;
      if (s->round_count > 0 && now - s->round_start > (gint64) c->timeout_ms * 1000)
        {
          GString *missing = g_string_new (NULL);
          for (int w = 0; w < c->workers; w++)
            if (s->pending_peer[w] == NULL)
              g_string_append_printf (missing, "%s%d", missing->len ? ", " : "", w);
          g_autofree char *m = g_strdup_printf (
              "server %d (%s): worker %s sent no gradient for step %" G_GINT64_FORMAT
              " within %.0f s ([comm] timeout) while the others waited: it died or hangs; "
              "see its workerlog", c->index, c->endpoint, missing->str, s->round_step,
              c->timeout_ms / 1000.0);
          g_set_error_literal (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT, m);
          g_string_free (missing, TRUE);
          for (int w = 0; w < c->workers; w++) /* the waiting workers learn why */
            if (s->pending_peer[w] != NULL)
              {
                PsHeader h = { 0 };
                h.id = s->pending_id[w];
                h.sender = w;
                h.type = PS_PUSH_GRAD;
                send_reply (s, s->pending_peer[w], &h, PS_REPLY_ERROR, 0, m, strlen (m));
              }
          return FALSE;
        }
      /* a worker sends heartbeats while it computes: a silent one is gone (in every mode,
       * also for servers started by hand, without a launcher to end the job) */
      g_autofree char *silent = silent_workers (s, now);
      if (silent != NULL)
        {
          g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
                       "server %d (%s): worker %s sent nothing for %.0f s, not even a "
                       "heartbeat ([comm] timeout), and did not stop: it died, hangs or was "
                       "stopped; stopping (see its workerlog)", c->index, c->endpoint, silent,
                       c->timeout_ms / 1000.0);
          return FALSE;
        }
      if (c->log_every_s > 0 && now >= next_log)
        {
          log_rates (s, FALSE);
          next_log = now + (gint64) (c->log_every_s * 1e6);
        }
    }
  log_rates (s, TRUE);
  return TRUE;
}

gboolean
ps_server_run (const PsServerConfig *c, GError **error)
{
  Server s = { 0 };
  g_autofree char *uri = g_strdup_printf ("tcp://%s", c->endpoint);
  int linger = 2000; /* the last replies still go out after the loop */
  PsAuth *auth;
  const char *colon = strrchr (c->endpoint, ':');
  gboolean ok;

  g_autofree char *who = g_strdup_printf ("server %d (%s)", c->index, c->endpoint);
  if (!ps_token_required (c->token, who, error))
    return FALSE;
  s.cfg = c;
  /* decided now, not by a request; relative to this process's directory, as the
   * workers' */
  if (c->checkpoint_dir != NULL && *c->checkpoint_dir != '\0')
    s.checkpoint_dir = g_canonicalize_filename (c->checkpoint_dir, NULL);
  s.msg_floats = c->table->n_floats;
  ps_token_digest (c->token, s.token);
  s.zctx = zmq_ctx_new ();
  /* sync: the workers' pushes come together while the server waits, so their connections
   * are spread over I/O threads (libzmq picks the least loaded per connection) and
   * decrypted in parallel (2 cores: sync with 1 server 54 -> 48 ms a step). Not in the
   * other modes, nor on the workers: their I/O runs beside training, and more threads
   * there made async 10% slower on 2 cores. */
  if (c->mode == PS_MODE_SYNC)
    zmq_ctx_set (s.zctx, ZMQ_IO_THREADS, ps_io_threads (c->workers));
  s.socket = zmq_socket (s.zctx, ZMQ_ROUTER);
  zmq_setsockopt (s.socket, ZMQ_LINGER, &linger, sizeof linger);
  /* CURVE with the job's keys (or PLAIN, unencrypted); a handshake gets [comm] timeout at
   * most */
  auth = ps_auth_server_new (s.zctx, s.socket, c->token, who,
                             colon != NULL ? atoi (colon + 1) : 0, c->timeout_ms,
                             ps_auth_connection_cap (c->workers), c->unencrypted, error);
  if (auth == NULL)
    {
      zmq_close (s.socket);
      zmq_ctx_term (s.zctx);
      g_free (s.checkpoint_dir);
      return FALSE;
    }
  if (zmq_bind (s.socket, uri) != 0)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
                   "server %d: cannot listen on %s: %s (is another job using the port? "
                   "PADDLE_PSERVERS_IP_PORT_LIST names this server's HOST:PORT)", c->index,
                   c->endpoint, zmq_strerror (errno));
      zmq_close (s.socket);
      ps_auth_free (auth);
      zmq_ctx_term (s.zctx);
      g_free (s.checkpoint_dir);
      return FALSE;
    }
  g_message ("server %d of %d listening on %s (%s mode, %" G_GSIZE_FORMAT " blocks, %"
             G_GSIZE_FORMAT " floats, %d workers; %s, at most %d connections)", c->index,
             c->servers, c->endpoint, ps_mode_name (c->mode), c->table->n_blocks,
             c->table->n_floats, c->workers,
             c->unencrypted ? PS_UNENCRYPTED_NOTE : "CURVE",
             ps_auth_connection_cap (c->workers));
  s.hello = g_new0 (gboolean, c->workers);
  s.stopped = g_new0 (gboolean, c->workers);
  s.owner = g_malloc0_n (c->workers, sizeof *s.owner);
  s.hello_peer = g_malloc0_n (c->workers, sizeof *s.hello_peer);
  s.last_seen = g_new0 (gint64, c->workers);
  s.sent = g_malloc0_n (c->workers, sizeof *s.sent);
  s.pulled = g_new0 (gint64, c->workers);
  s.pending_peer = g_new0 (GBytes *, c->workers);
  s.pending_id = g_new0 (guint64, c->workers);
  s.sum = g_new0 (float, MAX (s.msg_floats, 1));
  s.values = g_new0 (float, MAX (s.msg_floats, 1));
  s.aligned = g_new0 (float, MAX (s.msg_floats, 1));
  s.reply = g_byte_array_new ();
  s.auth = auth;
  ks_away_watch_begin ();
  ok = read_values (&s, error) && serve (&s, error);
  ks_away_watch_end ();
  for (int w = 0; w < c->workers; w++)
    if (s.pending_peer[w] != NULL)
      g_bytes_unref (s.pending_peer[w]);
  ps_received_clear (&s.in);
  zmq_close (s.socket);
  ps_auth_free (auth);
  zmq_ctx_term (s.zctx);
  g_free (s.hello);
  g_free (s.stopped);
  g_free (s.owner);
  g_free (s.hello_peer);
  g_free (s.last_seen);
  g_free (s.sent);
  g_free (s.pulled);
  g_free (s.pending_peer);
  g_free (s.pending_id);
  g_free (s.sum);
  g_free (s.values);
  g_free (s.aligned);
  g_byte_array_unref (s.reply);
  g_free (s.checkpoint_dir);
  return ok;
}
