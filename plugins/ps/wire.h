/* The messages between workers and servers: two ZeroMQ frames each, a fixed header and a
 * payload (floats, text or nothing), so the payload is sent from and received into its
 * own buffer without a copy into a message. Everything read from the network is checked
 * here before use: size, magic, version, the job's token and the payload's length. */
#ifndef KS_PS_WIRE_H
#define KS_PS_WIRE_H

#include <glib.h>

#define PS_MAGIC 0x5350534bu /* "KSPS" */
#define PS_VERSION 1
#define PS_TOKEN_BYTES 16

typedef enum {
  PS_HELLO = 1,      /* aux: layout fingerprint, arg: mode; reply step: the server's step */
  PS_PULL = 2,       /* reply: the server's values */
  PS_PUSH_GRAD = 3,  /* step: the worker's push number; payload: gradients; reply: new values;
                      * async arg: the push whose reply held the values they were computed
                      * on (0: the first pull), for the staleness */
  PS_PUSH_DELTA = 4, /* payload: deltas added to the values (GEO); reply: new values */
  PS_SAVE = 5,       /* step: the job's step; payload: the directory (text) */
  PS_STOP = 6,       /* the worker is done */
  /* the pslib mode's sparse tables (arg: the table's index) */
  PS_PULL_SPARSE = 7, /* payload: ids (guint64); aux 1: make missing rows; reply: values */
  PS_PUSH_SPARSE = 8, /* payload: per id its id, show, click and gradient; reply: nothing */
  PS_SHRINK = 9,      /* reply step: the rows deleted */
  /* a worker's heartbeat (id 0, every few hundred ms; client.h): the server answers with an
   * empty reply, so each side knows the other is alive while the worker computes */
  PS_HEARTBEAT = 10,
  PS_REPLY_OK = 100,
  PS_REPLY_ERROR = 101, /* payload: the message (text) */
} PsType;

typedef struct {
  guint32 magic;
  guint16 version;
  guint16 type;
  guint32 sender; /* worker index (requests) or server index (replies) */
  guint32 arg;
  guint64 id; /* a request's number, echoed by its reply */
  gint64 step;
  guint64 aux;
  guint64 payload; /* bytes after the header */
  guint8 token[PS_TOKEN_BYTES];
} PsHeader;

G_STATIC_ASSERT (sizeof (PsHeader) == 64);

/* Sets a KS_PLUGIN_ERROR_FAILED error of the parameter-server plugins; FALSE. */
#define ps_failed(error, ...) ks_fail (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED, __VA_ARGS__)

/* Whether `token` (KS_STORE_TOKEN) is set; else a KS_CONFIG_ERROR saying how to set it,
 * `who` ("server 0", "worker 1") first. */
gboolean ps_token_required (const char *token, const char *who, GError **error);
/* The token's digest carried in every header (all zero for an empty token). */
void ps_token_digest (const char *token, guint8 out[PS_TOKEN_BYTES]);
const char *ps_type_name (guint type);

/* Sets the header's magic, version and payload length. */
void ps_header_seal (PsHeader *header, gsize payload_len);
/* Checks a received header frame of `len` bytes followed by a payload frame of
 * `payload_len`; on success *header is a copy. Otherwise *why says what is wrong. */
gboolean ps_header_parse (const void *data, gsize len, gsize payload_len, const guint8 *token,
                          PsHeader *header, char **why);
/* The answer a caller waits for: a header of this job (`token`) of `type`, echoing request
 * `id`, announcing `payload` bytes. */
typedef struct {
  const guint8 *token;
  guint64 id;
  guint type;
  gsize payload;
} PsExpected;
/* Whether the header frame of `len` bytes is exactly that answer. */
gboolean ps_header_expected (const void *data, gsize len, const PsExpected *want);

/* Sends `h` (sealed with `len`) and the payload as frames of at most PS_FRAME_MAX bytes
 * (auth.h), after the peer's `identity` frame when not NULL. A `stable` payload is sent
 * without a copy: its buffer must not change until the peer has it. FALSE with errno. */
gboolean ps_send (void *socket, const void *identity, gsize identity_len, PsHeader *h,
                  const void *payload, gsize len, gboolean stable);

/* A piece of a caller's buffer: a payload is the concatenation of its segments. */
typedef struct {
  void *data;
  gsize len;
} PsSegment;

gsize ps_segments_total (const PsSegment *segs, gsize n);
/* Copies `len` bytes from `src` into the segments' concatenation from byte `at` on. */
void ps_segments_scatter (const PsSegment *segs, gsize n, gsize at, const void *src, gsize len);

/* One received message: the identity (ROUTER), the header frame and the payload, which
 * is the frames after the header joined (at most `max_payload` bytes kept). */
typedef struct {
  GBytes *identity;
  guint8 header[64];
  gsize header_len;
  int parts;          /* frames after the identity */
  const void *payload;
  gsize payload_len;  /* of every frame after the header, kept or not */
  gsize uneven;       /* the size of a frame before the last that is not PS_FRAME_MAX */
  GByteArray *joined; /* the payload of several frames (kept between messages) */
  void *single;       /* the zmq_msg_t of a payload of one frame */
  /* set by the caller: the payload of a message whose header is `expect`'s answer, in
   * several frames, is copied from the frames straight into the segments `into`, in order
   * (the blocks of a worker's arena: no join, no unpacking); then `scattered`, and payload
   * points to the first segment. Any other message leaves them untouched: nothing read
   * from the socket lands there before its header is checked. Only an answer whose
   * frames are longer or shorter than its header announced can leave them half written
   * (ps_header_parse then refuses it). */
  const PsSegment *into;
  gsize n_into;
  const PsExpected *expect;
  gboolean scattered;
  char peer[64];      /* the sender's address (ZeroMQ's Peer-Address), or "" */
} PsReceived;

/* Receives one message if one is waiting (1), else 0; `identity`: the socket is a
 * ROUTER. The payload is valid until the next call or ps_received_clear. `into`,
 * n_into and expect are kept. */
int ps_receive (void *socket, gboolean identity, gsize max_payload, PsReceived *r);
void ps_received_clear (PsReceived *r);

/* The ZeroMQ I/O threads for a context whose sockets talk to `peers` peers at once: one
 * each, so that their CURVE encryption runs in parallel, at most one per core. */
int ps_io_threads (int peers);

#endif
