/* Message framing and checks (wire.h). */
#include "wire.h"

#include <ksdist/ksdist.h>

#include "auth.h"

#include <errno.h>
#include <string.h>
#include <zmq.h>

void
ps_token_digest (const char *token, guint8 out[PS_TOKEN_BYTES])
{
  guint8 sha[32];
  gsize len = sizeof sha;
  g_autoptr (GChecksum) c = g_checksum_new (G_CHECKSUM_SHA256);

  memset (out, 0, PS_TOKEN_BYTES);
  if (token == NULL || *token == '\0')
    return;
  g_checksum_update (c, (const guchar *) token, strlen (token));
  g_checksum_get_digest (c, sha, &len);
  memcpy (out, sha, PS_TOKEN_BYTES);
}

gboolean
ps_token_required (const char *token, const char *who, GError **error)
{
  /* without one every header carries the same all-zero digest: a server would take
   * anyone's requests (the TCP store refuses to serve so too) */
  return ks_store_token_required (token, who, error);
}

const char *
ps_type_name (guint type)
{
  switch (type)
    {
    case PS_HELLO: return "hello";
    case PS_PULL: return "pull";
    case PS_PUSH_GRAD: return "push";
    case PS_PUSH_DELTA: return "push delta";
    case PS_SAVE: return "save";
    case PS_STOP: return "stop";
    case PS_PULL_SPARSE: return "sparse pull";
    case PS_PUSH_SPARSE: return "sparse push";
    case PS_SHRINK: return "shrink";
    case PS_HEARTBEAT: return "heartbeat";
    case PS_REPLY_OK: return "reply";
    case PS_REPLY_ERROR: return "error reply";
    default: return "unknown";
    }
}

void
ps_header_seal (PsHeader *h, gsize payload_len)
{
  h->magic = PS_MAGIC;
  h->version = PS_VERSION;
  h->payload = payload_len;
}

gboolean
ps_header_parse (const void *data, gsize len, gsize payload_len, const guint8 *token,
                 PsHeader *h, char **why)
{
  guint8 diff = 0;

  if (len != sizeof *h)
    {
      *why = g_strdup_printf ("a header of %" G_GSIZE_FORMAT " bytes, not %" G_GSIZE_FORMAT,
                              len, sizeof *h);
      return FALSE;
    }
  memcpy (h, data, sizeof *h);
  if (h->magic != PS_MAGIC)
    {
      *why = g_strdup ("not a ksdist parameter-server message (bad magic)");
      return FALSE;
    }
  if (h->version != PS_VERSION)
    {
      *why = g_strdup_printf ("protocol version %u, expected %u: a ksdist of another version",
                              h->version, PS_VERSION);
      return FALSE;
    }
  for (int i = 0; i < PS_TOKEN_BYTES; i++) /* the same time for any wrong byte */
    diff |= h->token[i] ^ token[i];
  if (diff != 0)
    {
      *why = g_strdup ("refused: wrong token (not this job's KS_STORE_TOKEN)");
      return FALSE;
    }
  if (h->payload != payload_len)
    {
      *why = g_strdup_printf ("the header announces %" G_GUINT64_FORMAT " payload bytes but %"
                              G_GSIZE_FORMAT " came", h->payload, payload_len);
      return FALSE;
    }
  return TRUE;
}

gboolean
ps_header_expected (const void *data, gsize len, const PsExpected *want)
{
  PsHeader h;
  g_autofree char *why = NULL;
  return ps_header_parse (data, len, want->payload, want->token, &h, &why) && h.id == want->id
         && h.type == want->type;
}

gboolean
ps_send (void *socket, const void *identity, gsize identity_len, PsHeader *h,
         const void *payload, gsize len, gboolean stable)
{
  gsize off = 0;

  ps_header_seal (h, len);
  if (identity != NULL && zmq_send (socket, identity, identity_len, ZMQ_SNDMORE) < 0)
    return FALSE;
  if (zmq_send (socket, h, sizeof *h, ZMQ_SNDMORE) < 0)
    return FALSE;
  do
    {
      gsize n = MIN (len - off, PS_FRAME_MAX);
      const char *p = (const char *) payload + off;
      int flags = off + n < len ? ZMQ_SNDMORE : 0;
      zmq_msg_t m;
      /* a large frame goes without a copy when the caller keeps the buffer */
      if (stable && n >= 65536)
        zmq_msg_init_data (&m, (void *) p, n, NULL, NULL);
      else
        {
          zmq_msg_init_size (&m, n);
          if (n > 0)
            memcpy (zmq_msg_data (&m), p, n);
        }
      if (zmq_msg_send (&m, socket, flags) < 0)
        {
          int e = errno;
          zmq_msg_close (&m);
          errno = e;
          return FALSE;
        }
      off += n;
    }
  while (off < len);
  return TRUE;
}

int
ps_io_threads (int peers)
{
  return CLAMP (peers, 1, (int) MAX (g_get_num_processors (), 1));
}

gsize
ps_segments_total (const PsSegment *segs, gsize n)
{
  gsize total = 0;
  for (gsize i = 0; i < n; i++)
    total += segs[i].len;
  return total;
}

/* Copies between the segments' bytes [at, at + len) and p, either way. */
static void
segments_copy (const PsSegment *segs, gsize n, gsize at, void *p, gsize len, gboolean to_segs)
{
  char *q = p;
  for (gsize i = 0, start = 0; i < n && len > 0; start += segs[i].len, i++)
    {
      if (at >= start + segs[i].len)
        continue;
      gsize off = at - start, k = MIN (len, segs[i].len - off);
      char *seg = (char *) segs[i].data + off;
      memcpy (to_segs ? seg : q, to_segs ? q : seg, k);
      q += k;
      at += k;
      len -= k;
    }
}

void
ps_segments_scatter (const PsSegment *segs, gsize n, gsize at, const void *src, gsize len)
{
  segments_copy (segs, n, at, (void *) src, len, TRUE);
}

void
ps_received_clear (PsReceived *r)
{
  g_clear_pointer (&r->identity, g_bytes_unref);
  if (r->single != NULL)
    {
      zmq_msg_close (r->single);
      g_clear_pointer (&r->single, g_free);
    }
  g_clear_pointer (&r->joined, g_byte_array_unref);
  r->payload = NULL;
  r->payload_len = r->header_len = r->uneven = 0;
  r->parts = 0;
  r->scattered = FALSE;
  r->peer[0] = '\0';
}

int
ps_receive (void *socket, gboolean identity, gsize max_payload, PsReceived *r)
{
  int more = 1, n = 0;
  size_t more_len = sizeof more;
  gsize into_len = ps_segments_total (r->into, r->n_into);
  /* so far; and only for the expected answer, once its header is in */
  gboolean direct = r->n_into > 0 && r->expect != NULL && into_len <= max_payload;
  GByteArray *joined = r->joined != NULL ? g_byte_array_ref (r->joined) : g_byte_array_new ();

  ps_received_clear (r);
  r->joined = joined;
  g_byte_array_set_size (r->joined, 0);
  while (more)
    {
      zmq_msg_t m;
      zmq_msg_init (&m);
      if (zmq_msg_recv (&m, socket, n == 0 ? ZMQ_DONTWAIT : 0) < 0)
        {
          zmq_msg_close (&m);
          break;
        }
      zmq_getsockopt (socket, ZMQ_RCVMORE, &more, &more_len);
      gsize size = zmq_msg_size (&m);
      int part = n - (identity ? 1 : 0);
      if (part < 0)
        r->identity = g_bytes_new (zmq_msg_data (&m), size);
      else if (part == 0)
        {
          const char *peer = zmq_msg_gets (&m, "Peer-Address");
          g_strlcpy (r->peer, peer != NULL ? peer : "", sizeof r->peer);
          r->header_len = size;
          memcpy (r->header, zmq_msg_data (&m), MIN (size, sizeof r->header));
          direct = direct && ps_header_expected (zmq_msg_data (&m), size, r->expect);
        }
      else if (part == 1 && !more && r->payload_len == 0)
        {
          /* the payload in one frame: no copy */
          r->single = g_new (zmq_msg_t, 1);
          zmq_msg_init (r->single);
          zmq_msg_move (r->single, &m);
          zmq_msg_close (&m);
          r->payload_len = size;
          n++;
          break;
        }
      else
        {
          if (more && size != PS_FRAME_MAX && r->uneven == 0)
            r->uneven = MAX (size, 1);
          if (direct && r->payload_len + size > into_len)
            {
              /* longer than `into`: joined as any other (the part there first) */
              direct = FALSE;
              g_byte_array_set_size (r->joined, r->payload_len);
              segments_copy (r->into, r->n_into, 0, r->joined->data, r->payload_len, FALSE);
            }
          if (direct)
            ps_segments_scatter (r->into, r->n_into, r->payload_len, zmq_msg_data (&m), size);
          else if (r->payload_len + size <= max_payload)
            g_byte_array_append (r->joined, zmq_msg_data (&m), size);
          r->payload_len += size;
        }
      zmq_msg_close (&m);
      n++;
    }
  if (n == 0)
    return 0;
  r->parts = n - (identity ? 1 : 0);
  if (r->single != NULL)
    r->payload = zmq_msg_data (r->single);
  else if (direct && r->payload_len > 0)
    {
      r->scattered = TRUE;
      r->payload = r->into[0].data;
    }
  else if (r->payload_len <= max_payload)
    r->payload = r->joined->data;
  else /* too large: kept nothing, said so by a length the header cannot match */
    r->payload = NULL;
  return 1;
}
