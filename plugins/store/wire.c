/* The TCP store's frames and fields (see wire.h). */
#include <config.h>
#include <ksdist/ksdist.h>

#include "wire.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

void
wire_put_u8 (GByteArray *body, guint8 v)
{
  g_byte_array_append (body, &v, 1);
}

void
wire_put_u32 (GByteArray *body, guint32 v)
{
  guint32 be = GUINT32_TO_BE (v);
  g_byte_array_append (body, (const guint8 *) &be, 4);
}

void
wire_put_i64 (GByteArray *body, gint64 v)
{
  guint64 be = GUINT64_TO_BE ((guint64) v);
  g_byte_array_append (body, (const guint8 *) &be, 8);
}

void
wire_put_bytes (GByteArray *body, const void *data, gsize len)
{
  wire_put_u32 (body, (guint32) len);
  g_byte_array_append (body, data, (guint) len);
}

void
wire_put_string (GByteArray *body, const char *s)
{
  wire_put_bytes (body, s != NULL ? s : "", s != NULL ? strlen (s) : 0);
}

static gboolean
take (WireReader *r, void *out, gsize n)
{
  if (r->left < n)
    return FALSE;
  memcpy (out, r->p, n);
  r->p += n;
  r->left -= n;
  return TRUE;
}

gboolean
wire_get_u8 (WireReader *r, guint8 *v)
{
  return take (r, v, 1);
}

gboolean
wire_get_u32 (WireReader *r, guint32 *v)
{
  guint32 be;
  if (!take (r, &be, 4))
    return FALSE;
  *v = GUINT32_FROM_BE (be);
  return TRUE;
}

gboolean
wire_get_i64 (WireReader *r, gint64 *v)
{
  guint64 be;
  if (!take (r, &be, 8))
    return FALSE;
  *v = (gint64) GUINT64_FROM_BE (be);
  return TRUE;
}

gboolean
wire_get_bytes (WireReader *r, const guint8 **data, guint32 *len)
{
  if (!wire_get_u32 (r, len) || r->left < *len)
    return FALSE;
  *data = r->p;
  r->p += *len;
  r->left -= *len;
  return TRUE;
}

gboolean
wire_get_string (WireReader *r, char **s)
{
  const guint8 *data;
  guint32 len;
  if (!wire_get_bytes (r, &data, &len) || memchr (data, '\0', len) != NULL)
    return FALSE;
  *s = g_strndup ((const char *) data, len);
  return TRUE;
}

/* Milliseconds from now to `deadline` for poll (-1: no deadline). */
static int
poll_ms (gint64 deadline)
{
  if (deadline < 0)
    return -1;
  gint64 left = deadline - g_get_monotonic_time ();
  return left > 0 ? (int) MIN ((left + 999) / 1000, G_MAXINT) : 0;
}

/* The one send: all of msg's vectors by `deadline` (-1: blocking as long as it takes);
 * with a deadline it never blocks in sendmsg but waits in poll, so a peer that reads
 * nothing (a full socket) ends it with ETIMEDOUT. */
static gboolean
send_vectors (int fd, struct msghdr *msg, gint64 deadline)
{
  int flags = MSG_NOSIGNAL | (deadline >= 0 ? MSG_DONTWAIT : 0);
  for (;;)
    {
      while (msg->msg_iovlen > 0 && msg->msg_iov[0].iov_len == 0) /* sent, or empty */
        {
          msg->msg_iov++;
          msg->msg_iovlen--;
        }
      if (msg->msg_iovlen == 0)
        return TRUE;
      ssize_t n = sendmsg (fd, msg, flags);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && deadline >= 0)
        {
          struct pollfd pfd = { .fd = fd, .events = POLLOUT };
          int ready = poll (&pfd, 1, poll_ms (deadline));
          if (ready == 0)
            {
              errno = ETIMEDOUT;
              return FALSE;
            }
          if (ready < 0 && errno != EINTR)
            return FALSE;
          continue;
        }
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return FALSE;
      for (; n > 0 && (gsize) n >= msg->msg_iov[0].iov_len; msg->msg_iov++, msg->msg_iovlen--)
        n -= (ssize_t) msg->msg_iov[0].iov_len;
      if (n > 0)
        {
          msg->msg_iov[0].iov_base = (char *) msg->msg_iov[0].iov_base + n;
          msg->msg_iov[0].iov_len -= (gsize) n;
        }
    }
}

gboolean
wire_send_all (int fd, const void *data, gsize len, gint64 deadline)
{
  struct iovec iov = { (void *) data, len };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
  return send_vectors (fd, &msg, deadline);
}

/* One sendmsg for the length and the body, so that a small frame is one TCP segment
 * (two sends would wait on Nagle's algorithm for the peer's delayed ACK). */
gboolean
wire_send (int fd, const GByteArray *body, gint64 deadline)
{
  guint32 be = GUINT32_TO_BE (body->len);
  struct iovec iov[2] = { { &be, 4 }, { body->data, body->len } };
  struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
  return send_vectors (fd, &msg, deadline);
}

int
wire_receive_all (int fd, void *data, gsize len, gint64 deadline, char **why)
{
  char *p = data;
  gsize got = 0;
  while (got < len)
    {
      struct pollfd pfd = { .fd = fd, .events = POLLIN };
      int ready = poll (&pfd, 1, poll_ms (deadline));
      if (ready < 0 && errno == EINTR)
        continue;
      if (ready == 0)
        {
          *why = g_strdup ("no answer in time");
          return -1;
        }
      ssize_t n = ready < 0 ? -1 : recv (fd, p + got, len - got, 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n == 0 && got == 0)
        return 0;
      if (n <= 0)
        {
          *why = n == 0 ? g_strdup ("the connection closed in the middle of a message")
                        : g_strdup (g_strerror (errno));
          return -1;
        }
      got += (gsize) n;
    }
  return 1;
}

int
wire_receive (int fd, gint64 deadline, GByteArray **body, char **why)
{
  return wire_receive_limited (fd, deadline, WIRE_MAX_FRAME, body, why);
}

int
wire_receive_limited (int fd, gint64 deadline, guint32 limit, GByteArray **body, char **why)
{
  guint32 be, len;
  int status = wire_receive_all (fd, &be, 4, deadline, why);
  if (status <= 0)
    return status;
  len = GUINT32_FROM_BE (be);
  if (len > limit)
    {
      *why = g_strdup_printf ("a frame of %u bytes, over the limit of %u", len, limit);
      return -1;
    }
  *body = g_byte_array_sized_new (len);
  g_byte_array_set_size (*body, len);
  status = wire_receive_all (fd, (*body)->data, len, deadline, why);
  if (status <= 0)
    {
      if (status == 0) /* len > 0 here: an empty body is read at once */
        *why = g_strdup ("the connection closed in the middle of a message");
      g_clear_pointer (body, g_byte_array_unref);
      return -1;
    }
  return 1;
}

gboolean
wire_equal_secret (const char *presented, const char *secret)
{
  gsize n = strlen (secret), m = strlen (presented);
  guint8 diff = n != m;
  for (gsize i = 0; i < n; i++)
    diff |= (guint8) (secret[i] ^ presented[i < m ? i : 0]);
  return diff == 0;
}

gboolean
wire_parse_address (const char *address, char **host, guint16 *port, GError **error)
{
  const char *colon = address != NULL ? strrchr (address, ':') : NULL;
  guint64 value;

  if (colon == NULL || colon == address
      || !g_ascii_string_to_unsigned (colon + 1, 10, 0, 65535, &value, NULL))
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "tcp store: address '%s' is not HOST:PORT (a port from 0 to 65535)",
                   address != NULL ? address : "");
      return FALSE;
    }
  *host = ks_comm_address_host (address, NULL);
  *port = (guint16) value;
  return TRUE;
}
