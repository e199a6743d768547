/* The message framing alone (plugins/ps/wire.c) over a real ZeroMQ socket pair: the
 * payload of the awaited answer, in several frames, lands straight in the caller's
 * segments (the blocks of a worker's arena: no join, no unpacking), byte for byte across
 * frame and segment edges; any other message (another request's answer, an error reply,
 * another length, another job's token, a malformed header) leaves the segments untouched
 * and is joined as before, or kept not at all past max_payload, its length still told. */
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

static guint8 token[PS_TOKEN_BYTES];

/* Sends `len` bytes (a pattern of `seed`) after the header `h` (NULL: the awaited answer,
 * request 7's PS_REPLY_OK of this job) and receives them into r. */
static char *
send_receive (Pair *p, gsize len, guint8 seed, gsize max_payload, PsReceived *r,
              const PsHeader *h)
{
  char *data = g_malloc (MAX (len, 1));
  PsHeader answer = { .type = PS_REPLY_OK, .id = 7 };
  memcpy (answer.token, token, sizeof token);
  if (h != NULL)
    answer = *h;
  for (gsize i = 0; i < len; i++)
    data[i] = (char) (i * 7 + i / 4099 + seed);
  g_assert_true (ps_send (p->out, NULL, 0, &answer, data, len, FALSE));
  zmq_pollitem_t item = { p->in, 0, ZMQ_POLLIN, 0 };
  g_assert_cmpint (zmq_poll (&item, 1, 60000), ==, 1);
  g_assert_cmpint (ps_receive (p->in, FALSE, max_payload, r), ==, 1);
  g_assert_cmpuint (r->payload_len, ==, len);
  g_assert_cmpuint (r->uneven, ==, 0);
  return data;
}

static void
fill (PsSegment *segs, int n, guint8 byte)
{
  for (int i = 0; i < n; i++)
    memset (segs[i].data, byte, segs[i].len);
}

static gboolean
untouched (const PsSegment *segs, int n, guint8 byte)
{
  for (int i = 0; i < n; i++)
    for (gsize j = 0; j < segs[i].len; j++)
      if (((const guint8 *) segs[i].data)[j] != byte)
        return FALSE;
  return TRUE;
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
  ps_token_digest ("5a0c33e1b7d24f96", token);
  PsExpected want = { token, 7, PS_REPLY_OK, big };

  pair_open (&p);
  r.into = segs;
  r.n_into = 3;
  r.expect = &want;
  /* three frames, as long as the segments: straight there, each byte in its place */
  g_autofree char *a = send_receive (&p, big, 1, max, &r, NULL);
  g_assert_true (r.scattered);
  g_assert_cmpint (r.parts, ==, 4);
  for (gsize i = 0, at = 0; i < 3; at += lens[i], i++)
    g_assert_cmpmem (segs[i].data, lens[i], a + at, lens[i]);
  /* longer or shorter than the answer awaited: joined, every byte, the segments untouched */
  fill (segs, 3, 0xa5);
  g_autofree char *b = send_receive (&p, big + PS_FRAME_MAX, 2, max, &r, NULL);
  g_assert_false (r.scattered);
  g_assert_nonnull (r.payload);
  g_assert_cmpmem (r.payload, big + PS_FRAME_MAX, b, big + PS_FRAME_MAX);
  g_autofree char *c = send_receive (&p, PS_FRAME_MAX + 9, 3, max, &r, NULL);
  g_assert_false (r.scattered);
  g_assert_cmpmem (r.payload, PS_FRAME_MAX + 9, c, PS_FRAME_MAX + 9);
  g_assert_true (untouched (segs, 3, 0xa5));
  /* one frame: ZeroMQ's own message, no copy at all */
  g_autofree char *d = send_receive (&p, 100, 4, max, &r, NULL);
  g_assert_false (r.scattered);
  g_assert_cmpmem (r.payload, 100, d, 100);
  /* its scatter by hand (what a worker does with it) */
  ps_segments_scatter (segs, 3, PS_FRAME_MAX + 2, d, 100);
  g_assert_cmpmem ((char *) segs[0].data + PS_FRAME_MAX + 2, 5, d, 5);
  g_assert_cmpmem (segs[1].data, 5, d + 5, 5);
  g_assert_cmpmem (segs[2].data, 90, d + 10, 90);
  /* past max_payload: nothing kept, the length told */
  g_autofree char *e = send_receive (&p, big + PS_FRAME_MAX, 5, PS_FRAME_MAX, &r, NULL);
  g_assert_null (r.payload);
  /* segments longer than max_payload are not used */
  g_autofree char *f = send_receive (&p, big, 6, big - 1, &r, NULL);
  g_assert_null (r.payload);
  g_assert_false (r.scattered);
  g_assert_true (r.into == segs); /* kept for the next message */
  r.into = NULL;
  r.n_into = 0;
  g_autofree char *g = send_receive (&p, big, 7, max, &r, NULL);
  g_assert_false (r.scattered);
  g_assert_cmpmem (r.payload, big, g, big);
  ps_received_clear (&r);
  pair_close (&p);
  for (int i = 0; i < 3; i++)
    g_free (segs[i].data);
}

/* Messages of the awaited length that are not the awaited answer: each is received whole
 * (joined), and the segments keep every byte they had; the answer then lands. */
static void
test_not_the_answer (void)
{
  Pair p;
  PsReceived r = { 0 };
  gsize big = 2 * PS_FRAME_MAX + 12, max = 8 * PS_FRAME_MAX;
  gsize lens[2] = { PS_FRAME_MAX + 3, big - PS_FRAME_MAX - 3 };
  PsSegment segs[2];
  for (int i = 0; i < 2; i++)
    segs[i] = (PsSegment) { g_malloc (lens[i]), lens[i] };
  ps_token_digest ("5a0c33e1b7d24f96", token);
  PsExpected want = { token, 7, PS_REPLY_OK, big };
  PsHeader stale = { .type = PS_REPLY_OK, .id = 6 }, refused = { .type = PS_REPLY_ERROR, .id = 7 };
  PsHeader other_job = { .type = PS_REPLY_OK, .id = 7 }, request = { .type = PS_PULL, .id = 7 };
  memcpy (stale.token, token, sizeof token);
  memcpy (refused.token, token, sizeof token);
  memcpy (request.token, token, sizeof token);
  ps_token_digest ("another job's token", other_job.token);
  const struct {
    const char *what;
    const PsHeader *h;
  } others[] = {
    { "the late answer to request 6", &stale },
    { "an error reply", &refused },
    { "another job's token", &other_job },
    { "a request, not a reply", &request },
  };

  pair_open (&p);
  r.into = segs;
  r.n_into = 2;
  r.expect = &want;
  fill (segs, 2, 0x5c);
  for (gsize i = 0; i < G_N_ELEMENTS (others); i++)
    {
      g_autofree char *x = send_receive (&p, big, (guint8) i, max, &r, others[i].h);
      g_test_message ("%s", others[i].what);
      g_assert_false (r.scattered);
      g_assert_cmpmem (r.payload, big, x, big);
      g_assert_true (untouched (segs, 2, 0x5c));
    }
  /* a header frame that is not a header at all, then three payload frames */
  char junk[40] = "not a header";
  g_assert_cmpint (zmq_send (p.out, junk, sizeof junk, ZMQ_SNDMORE), ==, sizeof junk);
  g_autofree char *frame = g_malloc0 (PS_FRAME_MAX);
  g_assert_cmpint (zmq_send (p.out, frame, PS_FRAME_MAX, ZMQ_SNDMORE), ==, PS_FRAME_MAX);
  g_assert_cmpint (zmq_send (p.out, frame, PS_FRAME_MAX, ZMQ_SNDMORE), ==, PS_FRAME_MAX);
  g_assert_cmpint (zmq_send (p.out, frame, 12, 0), ==, 12);
  zmq_pollitem_t item = { p.in, 0, ZMQ_POLLIN, 0 };
  g_assert_cmpint (zmq_poll (&item, 1, 60000), ==, 1);
  g_assert_cmpint (ps_receive (p.in, FALSE, max, &r), ==, 1);
  g_assert_cmpuint (r.header_len, ==, sizeof junk);
  g_assert_false (r.scattered);
  g_assert_true (untouched (segs, 2, 0x5c));
  /* the answer itself */
  g_autofree char *a = send_receive (&p, big, 9, max, &r, NULL);
  g_assert_true (r.scattered);
  g_assert_cmpmem (segs[0].data, lens[0], a, lens[0]);
  g_assert_cmpmem (segs[1].data, lens[1], a + lens[0], lens[1]);
  ps_received_clear (&r);
  pair_close (&p);
  for (int i = 0; i < 2; i++)
    g_free (segs[i].data);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/ps-wire/into", test_into);
  g_test_add_func ("/ps-wire/not-the-answer", test_not_the_answer);
  return g_test_run ();
}
