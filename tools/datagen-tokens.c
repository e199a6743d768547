/* ksdist datagen tokens: a text file made token files in llm.c's shard layout (a header
 * of 256 int32: magic 20240520, version 1, the token count; then uint16 tokens), one
 * token a distinct byte of the text (the bytes sorted), so a language model of the config
 * ([data] task = tokens) can be tried on any text before a real tokenizer's shards are at
 * hand: train.bin (the first nine tenths), val.bin (the rest) and vocab.txt (token i's
 * byte on line i, as a C escape). */
#include "datagen.h"

#include <errno.h>
#include <string.h>

enum { SHARD_MAGIC = 20240520, SHARD_VERSION = 1, HEADER_INTS = 256 };

static gboolean
write_shard (const char *dir, const char *name, const guint16 *tokens, gsize n)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree guint8 *bytes = g_malloc0 (HEADER_INTS * 4 + n * 2);
  g_autoptr (GError) error = NULL;
  gint32 *header = (gint32 *) bytes;
  header[0] = GINT32_TO_LE (SHARD_MAGIC);
  header[1] = GINT32_TO_LE (SHARD_VERSION);
  header[2] = GINT32_TO_LE ((gint32) n);
  for (gsize i = 0; i < n; i++)
    {
      guint16 le = GUINT16_TO_LE (tokens[i]);
      memcpy (bytes + HEADER_INTS * 4 + 2 * i, &le, 2);
    }
  if (g_file_set_contents (path, (const char *) bytes, HEADER_INTS * 4 + n * 2, &error))
    return TRUE;
  ks_cli_error ("datagen tokens: %s", error->message);
  return FALSE;
}

int
datagen_tokens (const char *dir, const char *text_path)
{
  g_autofree char *text = NULL;
  g_autoptr (GError) error = NULL;
  gsize len, vocab = 0;
  int token_of[256];
  gboolean seen[256] = { FALSE };

  if (!g_file_get_contents (text_path, &text, &len, &error))
    {
      ks_cli_error ("datagen tokens: %s", error->message);
      return KS_EXIT_USAGE;
    }
  if (len < 100 || len > G_MAXINT32)
    {
      ks_cli_error ("datagen tokens: %s has %" G_GSIZE_FORMAT " bytes; give a text of 100 "
                    "bytes to 2 GiB", text_path, len);
      return KS_EXIT_USAGE;
    }
  for (gsize i = 0; i < len; i++)
    seen[(guint8) text[i]] = TRUE;
  GString *names = g_string_new (NULL);
  for (int b = 0; b < 256; b++)
    if (seen[b])
      {
        g_autofree char *escaped = g_strescape ((char[]) { (char) b, 0 }, NULL);
        token_of[b] = vocab++;
        g_string_append_printf (names, "%s\n", b == 0 ? "\\000" : escaped);
      }
  g_autofree guint16 *tokens = g_new (guint16, len);
  for (gsize i = 0; i < len; i++)
    tokens[i] = token_of[(guint8) text[i]];
  gsize train = len - len / 10;
  g_autofree char *vocab_path = g_build_filename (dir, "vocab.txt", NULL);
  gboolean ok = g_mkdir_with_parents (dir, 0755) == 0
                && write_shard (dir, "train.bin", tokens, train)
                && write_shard (dir, "val.bin", tokens + train, len - train)
                && g_file_set_contents (vocab_path, names->str, names->len, &error);
  g_string_free (names, TRUE);
  if (!ok)
    {
      ks_cli_error ("datagen tokens: %s: %s", dir,
                    error != NULL ? error->message : g_strerror (errno));
      return KS_EXIT_RUNTIME;
    }
  printf ("tokens: %" G_GSIZE_FORMAT " training and %" G_GSIZE_FORMAT " validation tokens of a "
          "vocabulary of %" G_GSIZE_FORMAT " bytes from %s, in %s/train.bin and val.bin\n",
          train, len - train, vocab, text_path, dir);
  return KS_EXIT_OK;
}
