/* Message framing and checks (wire.h). */
#include "wire.h"

#include <ksdist/ksdist.h>

#include <string.h>

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
  if (token != NULL && *token != '\0')
    return TRUE;
  g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
               "%s: KS_STORE_TOKEN is not set, and a job's servers and workers know each "
               "other by it (a server without one would take requests from anyone who "
               "reaches its port): `ksdist launch` sets one; for processes started "
               "otherwise set KS_STORE_TOKEN to the same secret in every process of the "
               "job (e.g. the output of `head -c16 /dev/urandom | xxd -p`, made once)", who);
  return FALSE;
}

gboolean
ps_failed (GError **error, const char *format, ...)
{
  va_list ap;
  va_start (ap, format);
  g_autofree char *m = g_strdup_vprintf (format, ap);
  va_end (ap);
  g_set_error_literal (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED, m);
  return FALSE;
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
