/* Sealed files (checkpoint.h): a SHA-256 over every byte of a safetensors file, kept in
 * its own header with its 64 digits read as zeros, so an edit anywhere is caught. */
#include "ks-private.h"

#include <string.h>

#define SLOT_HEX 64

/* Where the value of "sha256" starts in `json`, if its value there is `value` and the
 * key is there once: found as JSON has it, with any white space around the colon (as
 * other writers space it), the key never matched inside a string value. */
static char *
slot_of (char *json, gsize len, const char *value)
{
  static const char key[] = "\"" KS_SEAL_KEY "\"";
  gsize klen = strlen (key), vlen = strlen (value);
  char *found = NULL, *end = json + len;
  gboolean in_string = FALSE;

  for (char *p = json; p < end; p++)
    {
      if (in_string)
        {
          if (*p == '\\')
            p++;
          else if (*p == '"')
            in_string = FALSE;
          continue;
        }
      if (*p != '"')
        continue;
      if ((gsize) (end - p) < klen || memcmp (p, key, klen) != 0)
        {
          in_string = TRUE;
          continue;
        }
      char *q = p + klen;
      while (q < end && g_ascii_isspace (*q))
        q++;
      if (q >= end || *q != ':')
        {
          in_string = TRUE; /* the key's text as a value: skip it as a string */
          continue;
        }
      for (q++; q < end && g_ascii_isspace (*q); q++)
        ;
      if (found != NULL || (gsize) (end - q) < vlen + 2 || q[0] != '"'
          || memcmp (q + 1, value, vlen) != 0 || q[1 + vlen] != '"')
        return NULL;
      found = q + 1;
      p = q + vlen + 1; /* past the value's closing quote */
    }
  return found;
}

static char *
digest_of (guint64 json_len, const char *json, const guint8 *const *chunks,
           const gsize *chunk_lens, gsize n_chunks)
{
  g_autoptr (GChecksum) sha = g_checksum_new (G_CHECKSUM_SHA256);
  guint64 le = GUINT64_TO_LE (json_len);
  g_checksum_update (sha, (const guint8 *) &le, 8);
  g_checksum_update (sha, (const guint8 *) json, json_len);
  for (gsize i = 0; i < n_chunks; i++)
    g_checksum_update (sha, chunks[i], chunk_lens[i]);
  return g_strdup (g_checksum_get_string (sha));
}

gboolean
ks_seal_fill (char *json, gsize json_len, const guint8 *const *chunks, const gsize *chunk_lens,
              gsize n_chunks)
{
  g_autofree char *zeros = g_strnfill (SLOT_HEX, '0');
  char *slot = slot_of (json, json_len, zeros);
  if (slot == NULL)
    return FALSE;
  g_autofree char *digest = digest_of (json_len, json, chunks, chunk_lens, n_chunks);
  memcpy (slot, digest, SLOT_HEX);
  return TRUE;
}

gboolean
ks_seal_matches (const char *bytes, gsize len, const char *want)
{
  guint64 json_len;
  char *slot;

  if (len < 8 || want == NULL || strlen (want) != SLOT_HEX)
    return FALSE;
  memcpy (&json_len, bytes, 8);
  json_len = GUINT64_FROM_LE (json_len);
  if (json_len > len - 8)
    return FALSE;
  g_autofree char *copy = g_memdup2 (bytes + 8, json_len);
  if ((slot = slot_of (copy, json_len, want)) == NULL)
    return FALSE;
  memset (slot, '0', SLOT_HEX);
  const guint8 *data = (const guint8 *) bytes + 8 + json_len;
  gsize data_len = len - 8 - json_len;
  g_autofree char *got = digest_of (json_len, copy, &data, &data_len, 1);
  return strcmp (got, want) == 0;
}
