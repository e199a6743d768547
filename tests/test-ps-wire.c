/* The message framing alone (plugins/ps/wire.c) over a real ZeroMQ socket pair: a payload
 * of several frames lands straight in the caller's segments (the blocks of a worker's
 * arena: no join, no unpacking) when it fits, byte for byte across frame and segment
 * edges; otherwise it is joined as before, or kept not at all past max_payload, its
 * length still told. */
#include "../plugins/ps/wire.h"
#include "../plugins/ps/auth.h"

#include <string.h>
#include <zmq.h>

typedef struct {
  void *ctx, *out, *in;
} Pair;

static void
pair_open (Pair *p)
{
  p->ctx = zmq_ctx_new ();
  p->out = zmq_socket (p->ctx, ZMQ_PAIR);
  p->in = zmq_socket (p->ctx, ZMQ_PAIR);
  g_assert_cmpint (zmq_bind (p->in, "inproc://ps-wire"), ==, 0);
  g_assert_cmpint (zmq_connect (p->out, "inproc://ps-wire"), ==, 0);
}

static void
pair_close (Pair *p)
{
  zmq_close (p->out);
  zmq_close (p->in);
  zmq_ctx_term (p->ctx);
}

/* Sends `len` bytes (a pattern of `seed`) and receives them into r. */
static char *
send_receive (Pair *p, gsize len, guint8 seed, gsize max_payload, PsReceived *r)
{
  char *data = g_malloc (MAX (len, 1));
  PsHeader h = { 0 };
  for (gsize i = 0; i < len; i++)
    data[i] = (char) (i * 7 + i / 4099 + seed);
  g_assert_true (ps_send (p->out, NULL, 0, &h, data, len, FALSE));
  zmq_pollitem_t item = { p->in, 0, ZMQ_POLLIN, 0 };
  g_assert_cmpint (zmq_poll (&item, 1, 60000), ==, 1);
  g_assert_cmpint (ps_receive (p->in, FALSE, max_payload, r), ==, 1);
  g_assert_cmpuint (r->payload_len, ==, len);
  g_assert_cmpuint (r->uneven, ==, 0);
  return data;
}

static void
test_into (void)
{
  Pair p;
  PsReceived r = { 0 };
  gsize big = 2 * PS_FRAME_MAX + 12, max = 8 * PS_FRAME_MAX;
  /* three segments whose edges are not the frames' (1 MiB) */
  gsize lens[3] = { PS_FRAME_MAX + 7, 5, big - PS_FRAME_MAX - 12 };
  PsSegment segs[3];
  for (int i = 0; i < 3; i++)
    segs[i] = (PsSegment) { g_malloc (lens[i]), lens[i] };
  g_assert_cmpuint (ps_segments_total (segs, 3), ==, big);

  pair_open (&p);
  r.into = segs;
  r.n_into = 3;
  /* three frames, as long as the segments: straight there, each byte in its place */
  g_autofree char *a = send_receive (&p, big, 1, max, &r);
  g_assert_true (r.scattered);
  g_assert_cmpint (r.parts, ==, 4);
  for (gsize i = 0, at = 0; i < 3; at += lens[i], i++)
    g_assert_cmpmem (segs[i].data, lens[i], a + at, lens[i]);
  /* longer than the segments: joined, every byte */
  g_autofree char *b = send_receive (&p, big + PS_FRAME_MAX, 2, max, &r);
  g_assert_false (r.scattered);
  g_assert_nonnull (r.payload);
  g_assert_cmpmem (r.payload, big + PS_FRAME_MAX, b, big + PS_FRAME_MAX);
  /* shorter: straight there too (the caller checks the length it expects) */
  g_autofree char *c = send_receive (&p, PS_FRAME_MAX + 9, 3, max, &r);
  g_assert_true (r.scattered);
  g_assert_cmpmem (segs[0].data, lens[0], c, lens[0]);
  g_assert_cmpmem (segs[1].data, 2, c + lens[0], 2);
  /* one frame: ZeroMQ's own message, no copy at all */
  g_autofree char *d = send_receive (&p, 100, 4, max, &r);
  g_assert_false (r.scattered);
  g_assert_cmpmem (r.payload, 100, d, 100);
  /* its scatter by hand (what a worker does with it) */
  ps_segments_scatter (segs, 3, PS_FRAME_MAX + 2, d, 100);
  g_assert_cmpmem ((char *) segs[0].data + PS_FRAME_MAX + 2, 5, d, 5);
  g_assert_cmpmem (segs[1].data, 5, d + 5, 5);
  g_assert_cmpmem (segs[2].data, 90, d + 10, 90);
  /* past max_payload: nothing kept, the length told */
  g_autofree char *e = send_receive (&p, big + PS_FRAME_MAX, 5, PS_FRAME_MAX, &r);
  g_assert_null (r.payload);
  /* segments longer than max_payload are not used */
  g_autofree char *f = send_receive (&p, big, 6, big - 1, &r);
  g_assert_null (r.payload);
  g_assert_false (r.scattered);
  g_assert_true (r.into == segs); /* kept for the next message */
  r.into = NULL;
  r.n_into = 0;
  g_autofree char *g = send_receive (&p, big, 7, max, &r);
  g_assert_false (r.scattered);
  g_assert_cmpmem (r.payload, big, g, big);
  ps_received_clear (&r);
  pair_close (&p);
  for (int i = 0; i < 3; i++)
    g_free (segs[i].data);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/ps-wire/into", test_into);
  return g_test_run ();
}
