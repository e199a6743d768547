/* Token files for language models, memory-mapped: llm.c shards (a 1024-byte header) and
 * plain uint16 files (nanoGPT's train.bin); see ksdist/table.h for how they are told apart. */
#include "table-private.h"

#include <string.h>

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER 1024 /* 256 int32 */

static gint32
le32 (const char *p)
{
  guint32 u;
  memcpy (&u, p, 4);
  return (gint32) GUINT32_FROM_LE (u);
}

void
ks_tokens_free (KsTokens *tokens)
{
  if (tokens == NULL)
    return;
  g_free (tokens->path);
  ks_table_unmap (tokens->map);
  g_free (tokens);
}

KsTokens *
ks_tokens_load (const char *path, GError **error)
{
  return ks_tokens_load_as (path, 2, error);
}

KsTokens *
ks_tokens_load_as (const char *path, guint width, GError **error)
{
  g_autoptr (KsTokens) t = NULL;
  const char *b;
  gsize n, start = 0;

  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (width == 2 || width == 4, NULL);
#if G_BYTE_ORDER != G_LITTLE_ENDIAN
  /* the tokens are used in place, as the file stores them */
  g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO,
               "%s: token files are read on little-endian machines only", path);
  return NULL;
#endif
  t = g_new0 (KsTokens, 1);
  t->path = g_strdup (path);
  t->width = width;
  if ((t->map = ks_table_map (path, error)) == NULL)
    return NULL;
  b = g_mapped_file_get_contents (t->map);
  n = g_mapped_file_get_length (t->map);
  if (n == 0)
    return ks_table_bad (error, "%s: empty file (expected uint%u tokens)", path, width * 8);
  if (n >= 2 && (guint8) b[0] == 0x1f && (guint8) b[1] == 0x8b)
    return ks_table_bad (error, "%s: gzip-compressed; token files are memory-mapped, so "
                         "gunzip it first", path);
  if (width == 4)
    {
      /* plain uint32 tokens: llm.c's shards hold uint16 only */
      if (n % 4 != 0)
        return ks_table_bad (error, "%s: %" G_GSIZE_FORMAT " bytes, not a multiple of 4: not "
                             "uint32 tokens ([data] dtype = uint32); uint16 tokens are read "
                             "with dtype = uint16", path, n);
      if (le32 (b) == SHARD_MAGIC)
        return ks_table_bad (error, "%s: an llm.c shard (magic %d) holds uint16 tokens: set "
                             "[data] dtype = uint16", path, SHARD_MAGIC);
    }
  else if (n >= 4 && le32 (b) == SHARD_MAGIC)
    {
      /* a shard: all of it must agree, never a fallback to plain tokens */
      gint64 count;
      if (n < SHARD_HEADER)
        return ks_table_bad (error, "%s: truncated: the llm.c shard magic %d, but %"
                             G_GSIZE_FORMAT " bytes, less than the %d-byte header", path,
                             SHARD_MAGIC, n, SHARD_HEADER);
      if (le32 (b + 4) != SHARD_VERSION)
        return ks_table_bad (error, "%s: llm.c shard version %d (expected %d: uint16 tokens)",
                             path, le32 (b + 4), SHARD_VERSION);
      count = le32 (b + 8);
      if (count <= 0 || (gsize) count * 2 != n - SHARD_HEADER)
        return ks_table_bad (error, "%s: %s: the header says %" G_GINT64_FORMAT " tokens (%"
                             G_GINT64_FORMAT " bytes) but %" G_GSIZE_FORMAT " bytes follow",
                             path, count > 0 && (gsize) count * 2 > n - SHARD_HEADER
                                     ? "truncated" : "a wrong token count",
                             count, count * 2, n - SHARD_HEADER);
      start = SHARD_HEADER;
    }
  else if (n % 2 != 0)
    return ks_table_bad (error, "%s: %" G_GSIZE_FORMAT " bytes, an odd number: not uint16 "
                         "tokens (nor an llm.c shard: no magic %d)", path, n, SHARD_MAGIC);
  /* mmap'ed memory is page-aligned and start a multiple of the width: access is aligned */
  t->data = b + start;
  t->tokens = width == 2 ? t->data : NULL;
  t->n = (n - start) / width;
  for (gsize i = 0; i < t->n; i++)
    {
      guint32 v = ks_tokens_get (t, i);
      t->vocab_hint = MAX (t->vocab_hint, v == G_MAXUINT32 ? v : v + 1); /* no wrap to 0 */
      t->zeros += v == 0;
    }
  return g_steal_pointer (&t);
}
