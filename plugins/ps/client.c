/* The worker's side of the transport (client.h). */
#include "client.h"
#include "auth.h"
#include "session.h"

#include <ksdist/away.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

struct PsClient {
  void *zctx;
  void **sockets;
  PsAuthWatch **watches;
  char **endpoints;
  int n;
  guint8 token[PS_TOKEN_BYTES];
  guint32 worker;
  int timeout_ms;
  guint64 next_id;
  gsize max_message;
  PsReceived in;             /* the last message received (under `lock`) */
  /* heartbeats: a call and the heartbeat thread take turns on the sockets */
  GMutex lock;
  GCond wake;
  GThread *beat_thread;
  gboolean beat_stop, beat_failed;
  gint64 beat_timeout_us, beat_interval_us; /* 0: no heartbeats */
  gint64 away_seen, next_beat; /* ks_away_total at the last beat */
  gint64 *heard;            /* per server: when it last sent anything */
};

static gint sockets; /* made in this process: their routing ids differ */

PsClient *
ps_client_new (const char *const *endpoints, const char *token, guint32 worker, int timeout_ms,
               gsize max_message, gboolean unencrypted, GError **error)
{
  g_autofree char *who = g_strdup_printf ("worker %u", worker);
  guint8 session[PS_SESSION_BYTES];
  int linger = 0;

  if (!ps_token_required (token, who, error) || !ps_session_get (session, error))
    return NULL;
  PsClient *c = g_new0 (PsClient, 1);

  ks_away_watch_begin (); /* this process's own gaps: the calls and heartbeats judge by them */
  g_mutex_init (&c->lock);
  g_cond_init (&c->wake);
  c->zctx = zmq_ctx_new ();
  c->n = g_strv_length ((char **) endpoints);
  c->endpoints = g_strdupv ((char **) endpoints);
  c->sockets = g_new0 (void *, c->n);
  c->watches = g_new0 (PsAuthWatch *, c->n);
  c->worker = worker;
  c->timeout_ms = timeout_ms;
  c->next_id = 1;
  c->max_message = max_message;
  ps_token_digest (token, c->token);
  for (int s = 0; s < c->n; s++)
    {
      g_autofree char *uri = g_strdup_printf ("tcp://%s", endpoints[s]);
      c->sockets[s] = zmq_socket (c->zctx, ZMQ_DEALER);
      zmq_setsockopt (c->sockets[s], ZMQ_LINGER, &linger, sizeof linger);
      /* the servers know this process by its session */
      ps_session_set_routing_id (c->sockets[s], session, (guint32) g_atomic_int_add (&sockets, 1));
      if (!ps_auth_client_socket (c->sockets[s], token, who, unencrypted, error))
        {
          ps_client_free (c);
          return NULL;
        }
      c->watches[s] = ps_auth_watch_new (c->zctx, c->sockets[s]);
      if (zmq_connect (c->sockets[s], uri) != 0)
        {
          g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
                       "server %d: cannot connect to %s: %s (PADDLE_PSERVERS_IP_PORT_LIST "
                       "entries are HOST:PORT)", s, endpoints[s], zmq_strerror (errno));
          ps_client_free (c);
          return NULL;
        }
    }
  return c;
}

void
ps_client_free (PsClient *c)
{
  if (c == NULL)
    return;
  ps_client_heartbeat_stop (c);
  for (int s = 0; s < c->n; s++)
    {
      if (c->sockets[s] != NULL)
        zmq_close (c->sockets[s]);
      ps_auth_watch_free (c->watches[s]);
    }
  zmq_ctx_term (c->zctx);
  ps_received_clear (&c->in);
  g_free (c->sockets);
  g_free (c->watches);
  g_strfreev (c->endpoints);
  g_free (c->heard);
  g_mutex_clear (&c->lock);
  g_cond_clear (&c->wake);
  g_free (c);
  ks_away_watch_end ();
}

int
ps_client_servers (const PsClient *c)
{
  return c->n;
}

const char *
ps_client_endpoint (const PsClient *c, int server)
{
  return c->endpoints[server];
}

/* ---- heartbeats (client.h) ---- */

/* [comm] timeout, as this client knows it (the callers' deadlines add PS_ANSWER_SLACK_MS) */
static gint64
comm_timeout_us (const PsClient *c)
{
  if (c->beat_timeout_us > 0)
    return c->beat_timeout_us;
  return (gint64) MAX (c->timeout_ms - PS_ANSWER_SLACK_MS, c->timeout_ms / 2) * 1000;
}

/* The error of a worker that was away longer than the timeout: the servers gave up on
 * it, and it must not blame them. The gap is the process's (away.h), whichever thread
 * found it. It says so (KS_AWAY_SAID), and does not tell the watch: the error of another
 * thread (the async sending thread's found it, a collective of the main thread's is
 * reported) may be the one the trainer explains. */
static void
set_stalled (PsClient *c, GError **error)
{
  gint64 gap, at;
  ks_away_last (&gap, &at);
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
               "worker %u: this worker was stopped or starved for %.1f s, longer than [comm] "
               "timeout = %g s, so the servers gave up on it (they end a worker silent that "
               "long, and their serverlogs name it): it ends too",
               c->worker, gap / 1e6, comm_timeout_us (c) / 1e6);
}

/* A note for a message blaming servers when this process was itself away lately: the
 * servers may have given up on it. "" when not. */
static char *
away_note (PsClient *c, gint64 now)
{
  gint64 gap, at, t = comm_timeout_us (c);
  if (!ks_away_last (&gap, &at) || gap < t / 4 || now - at > 2 * t + PS_ANSWER_SLACK_MS * 1000)
    return g_strdup ("");
  return g_strdup_printf (" (but this worker was itself stopped or starved for %.1f s, %.1f s "
                          "ago: the servers end a worker silent for [comm] timeout = %g s, so "
                          "they may have given up on it; see their serverlogs)",
                          gap / 1e6, (now - at) / 1e6, t / 1e6);
}

/* A heartbeat to every server (header and an empty payload, id 0: no call's); a server
 * that cannot take it now is judged by its silence. */
static void
send_beats (PsClient *c)
{
  PsHeader h = { 0 };
  h.type = PS_HEARTBEAT;
  h.sender = c->worker;
  memcpy (h.token, c->token, PS_TOKEN_BYTES);
  ps_header_seal (&h, 0);
  for (int s = 0; s < c->n; s++)
    if (zmq_send (c->sockets[s], &h, sizeof h, ZMQ_SNDMORE | ZMQ_DONTWAIT) == (int) sizeof h)
      zmq_send (c->sockets[s], "", 0, ZMQ_DONTWAIT);
}

/* One beat, with the lock held: asks how long this process was away since the last one
 * (stopped or starved: past the timeout the servers gave up on it), sends heartbeats when
 * due and, with `judge`, checks that every server sent something within the timeout.
 * FALSE with the error that ends the worker. */
static gboolean
beat (PsClient *c, gboolean judge, GError **error)
{
  if (c->beat_timeout_us == 0 || c->beat_stop || c->beat_failed)
    return TRUE;
  gint64 away = ks_away_total (), now = g_get_monotonic_time (), gap = away - c->away_seen;
  c->away_seen = away;
  if (gap > 0)
    {
      /* a server's silence counts only while this process runs */
      for (int s = 0; s < c->n; s++)
        c->heard[s] = MIN (now, c->heard[s] + gap);
      if (gap > c->beat_timeout_us)
        {
          c->beat_failed = TRUE;
          set_stalled (c, error);
          return FALSE;
        }
    }
  if (now >= c->next_beat)
    {
      send_beats (c);
      c->next_beat = now + c->beat_interval_us;
    }
  if (!judge)
    return TRUE;
  GString *who = NULL;
  for (int s = 0; s < c->n; s++)
    if (now - c->heard[s] > c->beat_timeout_us)
      {
        if (who == NULL)
          who = g_string_new (NULL);
        g_string_append_printf (who, "%sserver %d (%s)", who->len ? ", " : "", s,
                                c->endpoints[s]);
      }
  if (who == NULL)
    return TRUE;
  g_autofree char *note = away_note (c, now);
  c->beat_failed = TRUE;
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST,
               "worker %u: %s sent nothing for %g s, not even an answer to a heartbeat "
               "([comm] timeout): it died, hangs or was stopped; see its serverlog%s",
               c->worker, who->str, c->beat_timeout_us / 1e6, note);
  g_string_free (who, TRUE);
  return FALSE;
}

/* Reads every message waiting from server `s` outside a call (answers to heartbeats, late
 * replies), noting that it is alive. */
static void
drain (PsClient *c, int s)
{
  PsReceived *r = &c->in;
  while (ps_receive (c->sockets[s], FALSE, c->max_message, r) > 0)
    {
      PsHeader h;
      g_autofree char *why = NULL;
      if (r->parts >= 2
          && ps_header_parse (r->header, r->header_len, r->payload_len, c->token, &h, &why))
        c->heard[s] = g_get_monotonic_time ();
    }
}

static gpointer
beat_loop (gpointer data)
{
  PsClient *c = data;

  g_mutex_lock (&c->lock);
  while (!c->beat_stop && !c->beat_failed)
    {
      GError *e = NULL;
      for (int s = 0; s < c->n; s++)
        drain (c, s);
      if (!beat (c, TRUE, &e))
        {
          /* the worker may be computing for long: it ends here, with the status `ksdist
           * train` gives a process that lost a peer (KS_EXIT_PEER) */
          fflush (stdout);
          fprintf (stderr, "ksdist: %s\n", e->message);
          fflush (stderr);
          _exit (3);
        }
      g_cond_wait_until (&c->wake, &c->lock, g_get_monotonic_time () + c->beat_interval_us);
    }
  g_mutex_unlock (&c->lock);
  return NULL;
}

void
ps_client_heartbeat_start (PsClient *c, int timeout_ms)
{
  gint64 now = g_get_monotonic_time ();

  if (c->beat_thread != NULL || timeout_ms <= 0)
    return;
  /* a worker that finds a server gone ends at once, and the other workers may then write
   * to its closed sockets (the workers' own communicator): they report it, naming it,
   * rather than die of SIGPIPE */
  signal (SIGPIPE, SIG_IGN);
  g_mutex_lock (&c->lock);
  c->beat_timeout_us = (gint64) timeout_ms * 1000;
  c->beat_interval_us = CLAMP (c->beat_timeout_us / 6, 20000, G_USEC_PER_SEC);
  c->heard = g_new (gint64, c->n);
  for (int s = 0; s < c->n; s++)
    c->heard[s] = now;
  c->away_seen = ks_away_total ();
  c->next_beat = now;
  g_mutex_unlock (&c->lock);
  c->beat_thread = g_thread_new ("ps-heartbeat", beat_loop, c);
}

void
ps_client_heartbeat_stop (PsClient *c)
{
  if (c->beat_thread == NULL)
    return;
  g_mutex_lock (&c->lock);
  c->beat_stop = TRUE;
  g_cond_broadcast (&c->wake);
  g_mutex_unlock (&c->lock);
  g_thread_join (c->beat_thread);
  c->beat_thread = NULL;
}

/* Reads what server `call->server` sent; TRUE when it was the awaited reply (*done). */
static gboolean
take_reply (PsClient *c, PsCall *call, guint64 id, PsType type, gboolean *done, GError **error)
{
  PsReceived *r = &c->in;
  PsHeader h;
  g_autofree char *why = NULL;
  gboolean ok = TRUE;
  gsize reply_len = ps_segments_total (call->reply, call->n_reply);

  /* the values of the awaited answer go from the frames straight into the caller's
   * buffers; any other message leaves them as they are */
  PsExpected want = { c->token, id, PS_REPLY_OK, reply_len };
  r->into = call->reply;
  r->n_into = call->n_reply;
  r->expect = &want;
  int got = ps_receive (c->sockets[call->server], FALSE, c->max_message, r);
  r->into = NULL;
  r->n_into = 0;
  r->expect = NULL;
  if (got == 0)
    return TRUE; /* nothing yet */
  if (r->parts < 2)
    why = g_strdup_printf ("a message of %d parts, not a header and a payload", r->parts);
  else if (!ps_header_parse (r->header, r->header_len, r->payload_len, c->token, &h, &why))
    ;
  else if (r->uneven != 0)
    why = g_strdup_printf ("a payload in frames of %" G_GSIZE_FORMAT " bytes: every one but "
                           "the last has %u", r->uneven, PS_FRAME_MAX);
  else if (r->payload == NULL && r->payload_len > 0)
    why = g_strdup_printf ("a payload of %" G_GSIZE_FORMAT " bytes, above [ps] max_message_mb",
                           r->payload_len);
  const char *payload = r->payload;
  if (why == NULL && c->heard != NULL)
    c->heard[call->server] = g_get_monotonic_time ();
  if (why != NULL)
    g_warning ("worker %u: dropped a message from server %d (%s): %s", c->worker, call->server,
               c->endpoints[call->server], why);
  else if (h.id != id)
    ; /* the late answer to a request that timed out */
  else if (h.type == PS_REPLY_ERROR)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED, "server %d (%s) refused the %s: %.*s",
                   call->server, c->endpoints[call->server], ps_type_name (type),
                   (int) MIN (h.payload, 4096), payload);
      ok = FALSE;
    }
  else if (h.type != PS_REPLY_OK || (call->reply != NULL && h.payload != reply_len))
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
                   "server %d (%s) answered a %s with a %s of %" G_GUINT64_FORMAT " bytes, "
                   "expected %" G_GSIZE_FORMAT ": is it running the same model and version?",
                   call->server, c->endpoints[call->server], ps_type_name (type),
                   ps_type_name (h.type), h.payload, reply_len);
      ok = FALSE;
    }
  else
    {
      if (call->reply != NULL && !r->scattered)
        ps_segments_scatter (call->reply, call->n_reply, 0, payload, reply_len);
      call->reply_step = h.step;
      *done = TRUE;
    }
  return ok;
}

static gboolean
call_locked (PsClient *c, PsType type, gint64 step, guint32 arg, guint64 aux, PsCall *calls,
             gsize n, GError **error)
{
  guint64 id = c->next_id++;
  g_autofree gboolean *done = g_new0 (gboolean, n);
  g_autofree zmq_pollitem_t *items = g_new0 (zmq_pollitem_t, n);
  gint64 start = g_get_monotonic_time ();
  gint64 deadline = start + (gint64) c->timeout_ms * 1000;
  gsize left = n;
  PsHeader h = { 0 };

  h.type = type;
  h.sender = c->worker;
  h.arg = arg;
  h.id = id;
  h.step = step;
  h.aux = aux;
  memcpy (h.token, c->token, PS_TOKEN_BYTES);
  for (gsize i = 0; i < n; i++)
    {
      void *socket = c->sockets[calls[i].server];
      /* a large payload (a worker's packed buffer) goes without a copy: the buffer is not
       * reused before the reply, which comes only once the server has it all, and outlives
       * the sockets (ps_client_free before the worker's buffers); a small one is copied */
      if (!ps_send (socket, NULL, 0, &h, calls[i].payload, calls[i].len, TRUE))
        {
          g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED, "server %d (%s): cannot send a %s: %s",
                       calls[i].server, c->endpoints[calls[i].server], ps_type_name (type),
                       zmq_strerror (errno));
          return FALSE;
        }
    }
  while (left > 0)
    {
      gint64 now = g_get_monotonic_time (), wait = deadline - now;
      gsize k = 0;
      /* a gap first: a deadline passed while this process was stopped is not the
       * servers' fault; heartbeats go on during a call (the servers of the call are
       * judged by its deadline) */
      if (!beat (c, FALSE, error))
        return FALSE;
      if (now >= deadline)
        break;
      wait = MIN (wait, 250000);
      for (gsize i = 0; i < n; i++)
        items[i] = (zmq_pollitem_t) { c->sockets[calls[i].server], 0, done[i] ? 0 : ZMQ_POLLIN, 0 };
      if (zmq_poll (items, (int) n, (long) MAX (1, wait / 1000)) < 0 && errno != EINTR)
        {
          g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED, "polling the servers: %s",
                       zmq_strerror (errno));
          return FALSE;
        }
      for (gsize i = 0; i < n; i++)
        if (!done[i] && (items[i].revents & ZMQ_POLLIN))
          {
            if (!take_reply (c, &calls[i], id, type, &done[i], error))
              return FALSE;
            k += done[i];
          }
      left -= k;
    }
  if (left == 0)
    return TRUE;
  gint64 gap, at;
  ks_away_last (&gap, &at);
  if (at > start && gap > comm_timeout_us (c))
    {
      set_stalled (c, error);
      return FALSE;
    }
  GString *who = g_string_new (NULL);
  for (gsize i = 0; i < n; i++)
    if (!done[i])
      {
        const char *refused = ps_auth_watch_failure (c->watches[calls[i].server]);
        if (refused != NULL)
          {
            g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
                         "server %d (%s) did not answer a %s within %.0f s: %s",
                         calls[i].server, c->endpoints[calls[i].server], ps_type_name (type),
                         c->timeout_ms / 1000.0, refused);
            g_string_free (who, TRUE);
            return FALSE;
          }
        g_string_append_printf (who, "%sserver %d (%s)", who->len ? ", " : "", calls[i].server,
                                c->endpoints[calls[i].server]);
      }
  g_autofree char *note = away_note (c, g_get_monotonic_time ());
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
               "%s did not answer a %s within %.0f s ([comm] timeout + %d s): a server died, "
               "or never started; see its serverlog%s", who->str, ps_type_name (type),
               c->timeout_ms / 1000.0, PS_ANSWER_SLACK_MS / 1000, note);
  g_string_free (who, TRUE);
  return FALSE;
}

gboolean
ps_client_call (PsClient *c, PsType type, gint64 step, guint32 arg, guint64 aux, PsCall *calls,
                gsize n, GError **error)
{
  g_mutex_lock (&c->lock);
  gboolean ok = call_locked (c, type, step, arg, aux, calls, n, error);
  if (!ok) /* the worker ends with this error: the heartbeat thread says nothing more */
    c->beat_failed = TRUE;
  g_mutex_unlock (&c->lock);
  return ok;
}
