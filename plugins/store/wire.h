/* The TCP store's wire format, shared by its client and server.
 *
 * Every message is a frame: a 32-bit big-endian length, then that many bytes of body.
 * A request body is an op byte and its fields; a reply body is a status byte and its
 * fields. A field is a u8, a big-endian u32 or i64, or bytes (a u32 length, then the
 * bytes). The first request on a connection is HELLO(magic, token, prefix); the server
 * closes a connection whose hello is wrong and answers nothing else before it. */
#ifndef KS_STORE_WIRE_H
#define KS_STORE_WIRE_H

#include <glib.h>

#define WIRE_MAGIC "ksdist-store-1"
#define WIRE_MAX_FRAME (64u << 20) /* a longer frame is malformed */

typedef enum {
  OP_HELLO = 1, /* magic, token, prefix             -> OK | ERROR(message) */
  OP_SET,       /* key, value                       -> OK */
  OP_GET,       /* key, u32 timeout_ms              -> OK(value) | TIMEOUT */
  OP_WAIT,      /* u32 timeout_ms, u32 n, n keys    -> OK | TIMEOUT(missing keys) */
  OP_ADD,       /* key, i64 delta                   -> OK(i64) | ERROR(message) */
  OP_REMOVE,    /* key                              -> OK */
} WireOp;

typedef enum { REPLY_OK = 0, REPLY_TIMEOUT = 1, REPLY_ERROR = 2 } WireStatus;

/* Building a body. */
void wire_put_u8 (GByteArray *body, guint8 v);
void wire_put_u32 (GByteArray *body, guint32 v);
void wire_put_i64 (GByteArray *body, gint64 v);
void wire_put_bytes (GByteArray *body, const void *data, gsize len);
void wire_put_string (GByteArray *body, const char *s);

/* Reading a body: each returns FALSE when the body is too short for the field. */
typedef struct {
  const guint8 *p;
  gsize left;
} WireReader;
gboolean wire_get_u8 (WireReader *r, guint8 *v);
gboolean wire_get_u32 (WireReader *r, guint32 *v);
gboolean wire_get_i64 (WireReader *r, gint64 *v);
/* points into the body; *len excludes the NUL that a string field does not carry */
gboolean wire_get_bytes (WireReader *r, const guint8 **data, guint32 *len);
/* a newly allocated NUL-terminated copy; FALSE too when the field holds a NUL */
gboolean wire_get_string (WireReader *r, char **s);

/* Sends one frame by `deadline` (a g_get_monotonic_time() value, or -1 to block as long
 * as it takes); FALSE with errno set on failure, ETIMEDOUT past the deadline (a peer that
 * reads nothing). */
gboolean wire_send (int fd, const GByteArray *body, gint64 deadline);
/* Receives one frame into *body (g_byte_array_unref'd by the caller). deadline is a
 * g_get_monotonic_time() value, or -1 to wait for ever. Returns 1 on success, 0 when
 * the peer closed the connection before a frame began, -1 with `why` set (timeout,
 * an I/O error, a frame longer than WIRE_MAX_FRAME, or one cut short). */
int wire_receive (int fd, gint64 deadline, GByteArray **body, char **why);
/* The same with a smaller limit than WIRE_MAX_FRAME (a client not yet authenticated). */
int wire_receive_limited (int fd, gint64 deadline, guint32 limit, GByteArray **body, char **why);

/* Compares a presented token with the secret in time that does not depend on where
 * they differ. */
gboolean wire_equal_secret (const char *presented, const char *secret);

/* Splits host:port (or [v6]:port); the port must be 0-65535. */
/* Reads exactly len bytes by `deadline` (monotonic µs, -1: none). 1: done; 0: closed
 * before the first byte; -1: *why (g_free'd by the caller) says. */
int wire_receive_all (int fd, void *data, gsize len, gint64 deadline, char **why);
/* Writes all of `data` (no frame around it) by `deadline`, as wire_send. */
gboolean wire_send_all (int fd, const void *data, gsize len, gint64 deadline);
gboolean wire_parse_address (const char *address, char **host, guint16 *port, GError **error);

#endif
