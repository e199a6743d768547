/* Reading a data file whole, gzip or not: the readers then parse bytes in memory. */
#include "table-private.h"

#include <errno.h>
#include <zlib.h>

#define CHUNK (1 << 20)

gpointer
ks_table_bad (GError **error, const char *format, ...)
{
  va_list args;
  va_start (args, format);
  g_propagate_error (error, g_error_new_valist (KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID, format,
                                                args));
  va_end (args);
  return NULL;
}

/* Gives zlib the next piece of in[]: avail_in is 32 bits, a large file goes in pieces. */
static void
feed (z_stream *z, const guint8 **in, gsize *left)
{
  z->next_in = (Bytef *) *in;
  z->avail_in = (uInt) MIN (*left, (gsize) 1 << 30);
  *in += z->avail_in;
  *left -= z->avail_in;
}

/* Inflates all gzip members of in[0, n) (`cat a.gz b.gz` is one valid file), never more
 * than `limit` bytes: with `prefix` it stops there (the first bytes, a header), else a
 * stream that goes on past it is refused (more data than its header promised). */
static char *
gunzip (const char *path, const guint8 *in, gsize n, gsize limit, gboolean prefix,
        gsize *length, GError **error)
{
  /* not a GByteArray: its length is 32 bits, and data sets pass 4 GiB */
  g_autofree char *out = NULL;
  gsize len = 0, cap = 0;
  z_stream z = { 0 };
  int rc;

  /* 15 + 16: gzip headers only, the magic was seen */
  if (inflateInit2 (&z, 15 + 16) != Z_OK)
    return ks_table_bad (error, "%s: zlib cannot start", path);
  for (;;)
    {
      if (z.avail_in == 0 && n > 0)
        feed (&z, &in, &n);
      if (cap - len < CHUNK + 1)
        {
          /* deflate expands at most ~1032 times, so even a hostile stream is bounded by
           * the file's size; still, a clean error rather than an abort */
          gsize want = MIN (MAX (2 * cap, 4 * CHUNK), MAX (limit, len) + CHUNK + 1);
          char *more = g_try_realloc (out, cap = want);
          if (more == NULL)
            {
              inflateEnd (&z);
              return ks_table_bad (error, "%s: no memory for more than %" G_GSIZE_FORMAT
                                   " bytes of decompressed data", path, len);
            }
          out = more;
        }
      z.next_out = (Bytef *) out + len;
      z.avail_out = CHUNK;
      rc = inflate (&z, Z_NO_FLUSH);
      len += CHUNK - z.avail_out;
      if (len > limit && prefix)
        {
          len = limit, rc = Z_STREAM_END; /* enough: the rest is not read */
          break;
        }
      if (len > limit)
        {
          inflateEnd (&z);
          return ks_table_bad (error, "%s: the gzip stream holds more than the %" G_GSIZE_FORMAT
                               " bytes its header promises (it was cut off there, not read "
                               "further); rewrite the file", path, limit);
        }
      if (rc == Z_STREAM_END)
        {
          /* another member may follow; zero padding after the last is allowed */
          for (;;)
            {
              if (z.avail_in == 0 && n > 0)
                feed (&z, &in, &n);
              if (z.avail_in == 0 || *z.next_in != 0)
                break;
              z.next_in++, z.avail_in--;
            }
          if (z.avail_in == 0)
            break;
          inflateReset (&z);
          continue;
        }
      if (rc != Z_OK && rc != Z_BUF_ERROR)
        {
          g_autofree char *why = g_strdup (z.msg ? z.msg : "corrupt data");
          inflateEnd (&z);
          return ks_table_bad (error, "%s: gzip data is corrupt after %" G_GSIZE_FORMAT
                               " bytes of output (%s)", path, len, why);
        }
      if (z.avail_in == 0 && n == 0 && z.avail_out != 0)
        break; /* starved: the stream ended early */
    }
  inflateEnd (&z);
  if (rc != Z_STREAM_END && !prefix)
    return ks_table_bad (error, "%s: truncated gzip data (it ends after %" G_GSIZE_FORMAT
                         " bytes of output)", path, len);
  out[len] = 0;
  *length = len;
  return g_steal_pointer (&out);
}

/* The bytes of `path` decompressed: at most `limit` (see gunzip). */
static char *
read_upto (const char *path, gsize limit, gboolean prefix, gsize *length, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autofree char *bytes = NULL;
  gsize n;

  if (!g_file_get_contents (path, &bytes, &n, &local))
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO, "%s",
                   local->message);
      return NULL;
    }
  if (n >= 2 && (guint8) bytes[0] == 0x1f && (guint8) bytes[1] == 0x8b)
    return gunzip (path, (const guint8 *) bytes, n, limit, prefix, length, error);
  *length = prefix ? MIN (n, limit) : n;
  return g_steal_pointer (&bytes);
}

char *
ks_table_read (const char *path, gsize *length, GError **error)
{
  return read_upto (path, G_MAXSIZE - 2 * CHUNK, FALSE, length, error);
}

char *
ks_table_read_head (const char *path, gsize n, gsize *length, GError **error)
{
  /* zlib's gzread streams a gzip file and reads any other as it is: only n bytes made */
  g_autofree char *out = g_malloc (n + 1);
  gzFile f = gzopen (path, "rb");
  int got;

  g_return_val_if_fail (n < G_MAXINT, NULL);
  if (f == NULL)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO, "%s: %s", path,
                   g_strerror (errno));
      return NULL;
    }
  got = gzread (f, out, (unsigned) n);
  if (got < 0)
    {
      int e;
      g_autofree char *why = g_strdup (gzerror (f, &e));
      gzclose (f);
      return ks_table_bad (error, "%s: gzip data is corrupt in its first %" G_GSIZE_FORMAT
                           " bytes (%s)", path, n, why);
    }
  gzclose (f);
  out[got] = 0;
  *length = (gsize) got;
  return g_steal_pointer (&out);
}

char *
ks_table_read_bounded (const char *path, gsize limit, gsize *length, GError **error)
{
  return read_upto (path, limit, FALSE, length, error);
}
