/* The worker's side of the transport (client.h). */
#include "client.h"
#include "auth.h"

#include <errno.h>
#include <string.h>
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
  PsReceived in;
};

PsClient *
ps_client_new (const char *const *endpoints, const char *token, guint32 worker, int timeout_ms,
               gsize max_message, GError **error)
{
  g_autofree char *who = g_strdup_printf ("worker %u", worker);
  int linger = 0;

  if (!ps_token_required (token, who, error))
    return NULL;
  PsClient *c = g_new0 (PsClient, 1);

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
      if (!ps_auth_client_socket (c->sockets[s], token, who, error))
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
  g_free (c);
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

/* Reads what server `call->server` sent; TRUE when it was the awaited reply (*done). */
static gboolean
take_reply (PsClient *c, PsCall *call, guint64 id, PsType type, gboolean *done, GError **error)
{
  PsReceived *r = &c->in;
  PsHeader h;
  g_autofree char *why = NULL;
  gboolean ok = TRUE;

  if (ps_receive (c->sockets[call->server], FALSE, c->max_message, r) == 0)
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
  else if (h.type != PS_REPLY_OK || (call->reply != NULL && h.payload != call->reply_len))
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
                   "server %d (%s) answered a %s with a %s of %" G_GUINT64_FORMAT " bytes, "
                   "expected %" G_GSIZE_FORMAT ": is it running the same model and version?",
                   call->server, c->endpoints[call->server], ps_type_name (type),
                   ps_type_name (h.type), h.payload, call->reply_len);
      ok = FALSE;
    }
  else
    {
      if (call->reply != NULL)
        memcpy (call->reply, payload, call->reply_len);
      call->reply_step = h.step;
      *done = TRUE;
    }
  return ok;
}

gboolean
ps_client_call (PsClient *c, PsType type, gint64 step, guint32 arg, guint64 aux, PsCall *calls,
                gsize n, GError **error)
{
  guint64 id = c->next_id++;
  g_autofree gboolean *done = g_new0 (gboolean, n);
  g_autofree zmq_pollitem_t *items = g_new0 (zmq_pollitem_t, n);
  gint64 deadline = g_get_monotonic_time () + (gint64) c->timeout_ms * 1000;
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
      gint64 now = g_get_monotonic_time ();
      gsize k = 0;
      if (now >= deadline)
        break;
      for (gsize i = 0; i < n; i++)
        items[i] = (zmq_pollitem_t) { c->sockets[calls[i].server], 0, done[i] ? 0 : ZMQ_POLLIN, 0 };
      if (zmq_poll (items, (int) n, (long) MAX (1, (deadline - now) / 1000)) < 0 && errno != EINTR)
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
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
               "%s did not answer a %s within %.0f s ([comm] timeout): a server died, or "
               "never started; see its serverlog", who->str, ps_type_name (type),
               c->timeout_ms / 1000.0);
  g_string_free (who, TRUE);
  return FALSE;
}
