/* The parameter servers' transport alone, over loopback TCP: a worker sends a payload of
 * M MiB and a server answers with as many bytes (a push and its new values), N times,
 * first as before CURVE (ZeroMQ's NULL mechanism, the payload in one frame, copied into
 * its message), then in 1 MiB frames without CURVE, then as the plugins do now (CURVE
 * with the job's keys, 1 MiB frames, joined on receipt), and as a job of `encryption = off`
 * does (PLAIN: the workers' password, no encryption). Prints MB/s each way and the
 * ratios: what authentication and encryption cost.
 *   bench/bench-ps-wire [M [N]]     (M = 7.1, the MLP of bench-ps on one server; N = 40) */
#include "../plugins/ps/auth.h"
#include "../plugins/ps/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

static gsize bytes;
static int rounds;
static const char *const token = "bench-token"; /* the job's KS_STORE_TOKEN */

typedef enum { NO_AUTH, CURVE, PLAIN } Security; /* PLAIN: the job's encryption = off */

typedef struct {
  void *zctx, *socket;
  Security security;
  gboolean framed;
  int port;
} Server;

static gpointer
serve (gpointer data)
{
  Server *s = data;
  PsReceived r = { 0 };
  char *reply = g_malloc0 (bytes);
  for (int i = 0; i < rounds + 1; i++)
    {
      zmq_pollitem_t item = { s->socket, 0, ZMQ_POLLIN, 0 };
      zmq_poll (&item, 1, -1);
      if (s->framed)
        {
          ps_receive (s->socket, TRUE, bytes + 1, &r);
          PsHeader h = { 0 };
          gsize idlen;
          const void *id = g_bytes_get_data (r.identity, &idlen);
          g_assert_cmpuint (r.payload_len, ==, bytes);
          h.type = PS_REPLY_OK; /* the answer the worker awaits (answer below) */
          h.id = 1;
          ps_token_digest (token, h.token);
          ps_send (s->socket, id, idlen, &h, reply, bytes, TRUE);
        }
      else
        {
          zmq_msg_t id, head, body;
          zmq_msg_init (&id);
          zmq_msg_init (&head);
          zmq_msg_init (&body);
          zmq_msg_recv (&id, s->socket, 0);
          zmq_msg_recv (&head, s->socket, 0);
          zmq_msg_recv (&body, s->socket, 0);
          g_assert_cmpuint (zmq_msg_size (&body), ==, bytes);
          PsHeader h = { 0 };
          zmq_msg_t out;
          zmq_msg_init_size (&out, bytes);
          memcpy (zmq_msg_data (&out), reply, bytes);
          zmq_msg_send (&id, s->socket, ZMQ_SNDMORE);
          zmq_send (s->socket, &h, sizeof h, ZMQ_SNDMORE);
          zmq_msg_send (&out, s->socket, 0);
          zmq_msg_close (&head);
          zmq_msg_close (&body);
        }
    }
  ps_received_clear (&r);
  g_free (reply);
  return NULL;
}

/* Seconds for `rounds` round trips (after one to connect). */
static double
run (Security security, gboolean framed)
{
  Server s = { zmq_ctx_new (), NULL, security, framed, 0 };
  PsAuth *auth = NULL;
  char endpoint[64];
  size_t len = sizeof endpoint;
  gint64 big = 1ll << 40;

  s.socket = zmq_socket (s.zctx, ZMQ_ROUTER);
  if (security != NO_AUTH)
    auth = ps_auth_server_new (s.zctx, s.socket, token, "bench server", 0, 30000, 64,
                               security == PLAIN, NULL);
  else
    zmq_setsockopt (s.socket, ZMQ_MAXMSGSIZE, &big, sizeof big);
  g_assert_cmpint (zmq_bind (s.socket, "tcp://127.0.0.1:*"), ==, 0);
  zmq_getsockopt (s.socket, ZMQ_LAST_ENDPOINT, endpoint, &len);
  GThread *t = g_thread_new ("server", serve, &s);

  void *cctx = zmq_ctx_new (), *c = zmq_socket (cctx, ZMQ_DEALER);
  if (security != NO_AUTH)
    g_assert_true (ps_auth_client_socket (c, token, "bench worker", security == PLAIN, NULL));
  g_assert_cmpint (zmq_connect (c, endpoint), ==, 0);
  char *payload = g_malloc0 (bytes), *values = g_malloc (bytes);
  PsReceived r = { 0 };
  PsSegment into = { values, bytes };
  guint8 digest[PS_TOKEN_BYTES];
  ps_token_digest (token, digest);
  PsExpected answer = { digest, 1, PS_REPLY_OK, bytes };
  if (framed) /* as a worker: the reply's frames straight into its buffer */
    {
      r.into = &into;
      r.n_into = 1;
      r.expect = &answer;
    }
  gint64 start = 0;
  for (int i = 0; i < rounds + 1; i++)
    {
      PsHeader h = { 0 };
      if (i == 1)
        start = g_get_monotonic_time ();
      if (framed)
        ps_send (c, NULL, 0, &h, payload, bytes, TRUE);
      else
        {
          zmq_msg_t m;
          zmq_msg_init_size (&m, bytes);
          memcpy (zmq_msg_data (&m), payload, bytes);
          zmq_send (c, &h, sizeof h, ZMQ_SNDMORE);
          zmq_msg_send (&m, c, 0);
        }
      zmq_pollitem_t item = { c, 0, ZMQ_POLLIN, 0 };
      zmq_poll (&item, 1, -1);
      ps_receive (c, FALSE, bytes + 1, &r);
      g_assert_cmpuint (r.payload_len, ==, bytes);
      g_assert_true (r.scattered == (framed && bytes > PS_FRAME_MAX));
    }
  double dt = (g_get_monotonic_time () - start) / 1e6;
  g_thread_join (t);
  ps_received_clear (&r);
  zmq_close (c);
  zmq_ctx_term (cctx);
  zmq_close (s.socket);
  ps_auth_free (auth);
  zmq_ctx_term (s.zctx);
  g_free (payload);
  g_free (values);
  return dt;
}

int
main (int argc, char **argv)
{
  double mib = argc > 1 ? atof (argv[1]) : 7.1;
  rounds = argc > 2 ? atoi (argv[2]) : 40;
  bytes = (gsize) (mib * 1048576);
  printf ("# %d round trips of %.1f MiB each way over loopback TCP, one thread each side\n",
          rounds, mib);
  printf ("%-34s %10s %12s\n", "transport", "seconds", "MB/s each way");
  double plain = run (NO_AUTH, FALSE);
  printf ("%-34s %10.3f %12.1f\n", "NULL mechanism, one frame (before)", plain,
          rounds * bytes / plain / 1e6);
  double framed = run (NO_AUTH, TRUE);
  printf ("%-34s %10.3f %12.1f\n", "NULL mechanism, 1 MiB frames", framed,
          rounds * bytes / framed / 1e6);
  double curve = run (CURVE, TRUE);
  printf ("%-34s %10.3f %12.1f\n", "CURVE, 1 MiB frames (now)", curve,
          rounds * bytes / curve / 1e6);
  double unencrypted = run (PLAIN, TRUE);
  printf ("%-34s %10.3f %12.1f\n", "PLAIN (encryption = off)", unencrypted,
          rounds * bytes / unencrypted / 1e6);
  printf ("# 1 MiB frames / before: %.2fx the time; CURVE / before: %.2fx; CURVE / 1 MiB "
          "frames: %.2fx; PLAIN / 1 MiB frames: %.2fx\n", framed / plain, curve / plain,
          curve / framed, unencrypted / framed);
  return 0;
}
