/* A sparse table's file (sparse.h): saved whole or by mode, and loaded from the files
 * of any number of servers, each row to the shard that holds it. The format is sparse.c's
 * header comment. */
#include "sparse-private.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static gboolean
selected (const KsSparseConfig *c, const RowHead *h, KsSparseSaveMode mode)
{
  switch (mode)
    {
    case KS_SPARSE_SAVE_ALL:
      return TRUE;
    case KS_SPARSE_SAVE_DELTA:
      return score (c, h) >= c->base_threshold && h->delta_score >= c->delta_threshold
             && h->unseen_days <= c->delta_keep_days;
    case KS_SPARSE_SAVE_BASE:
      return score (c, h) >= c->base_threshold;
    }
  return FALSE;
}

typedef struct {
  int fd;
  GChecksum *sum;
  guint8 *buf;
  gsize len, cap;
} Writer;

static gboolean
writer_flush (Writer *w, gboolean hash)
{
  if (hash)
    g_checksum_update (w->sum, w->buf, w->len);
  for (gsize done = 0; done < w->len;)
    {
      ssize_t k = write (w->fd, w->buf + done, w->len - done);
      if (k < 0 && errno == EINTR)
        continue;
      if (k <= 0)
        return FALSE;
      done += (gsize) k;
    }
  w->len = 0;
  return TRUE;
}

static gboolean
writer_put (Writer *w, const void *data, gsize n)
{
  if (w->len + n > w->cap && !writer_flush (w, TRUE))
    return FALSE;
  memcpy (w->buf + w->len, data, n);
  w->len += n;
  return TRUE;
}

static void
header_bytes (const KsSparseTable *t, guint32 version, guint64 rows, guint8 out[HEADER_BYTES])
{
  guint32 u[4] = { GUINT32_TO_LE (version), GUINT32_TO_LE ((guint32) t->config.embedx_dim),
                   GUINT32_TO_LE ((guint32) t->config.rule),
                   GUINT32_TO_LE ((guint32) (sizeof (guint64) + t->rec_size)) };
  guint64 r = GUINT64_TO_LE (rows);
  memcpy (out, MAGIC, 8);
  memcpy (out + 8, u, sizeof u);
  memcpy (out + 24, &r, 8);
}

static int
by_string (const void *a, const void *b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* The identity block's text: "key=value\n" for each pair, sorted by key; NULL (with an
 * error) for a key or value that the format cannot hold. */
static char *
identity_text (GHashTable *identity, GError **error)
{
  g_autoptr (GString) text = g_string_new (NULL);
  g_autofree gpointer *keys = NULL;
  guint n = 0;

  if (identity != NULL)
    keys = g_hash_table_get_keys_as_array (identity, &n);
  if (n > 0)
    qsort (keys, n, sizeof *keys, by_string);
  for (guint i = 0; i < n; i++)
    {
      const char *k = keys[i], *v = g_hash_table_lookup (identity, k);
      if (*k == '\0' || strpbrk (k, "=\n") != NULL || strchr (v, '\n') != NULL)
        {
          g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_FORMAT,
                       "sparse table file identity '%s': a key without '=' or a newline and a "
                       "value without a newline are needed", k);
          return NULL;
        }
      g_string_append_printf (text, "%s=%s\n", k, v);
    }
  if (text->len > MAX_IDENTITY_BYTES)
    {
      g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_FORMAT,
                   "a sparse table file identity of %" G_GSIZE_FORMAT " bytes, above %d",
                   text->len, MAX_IDENTITY_BYTES);
      return NULL;
    }
  return g_string_free (g_steal_pointer (&text), FALSE);
}

static gboolean
write_rows (KsSparseTable *t, Writer *w, KsSparseSaveMode mode, guint64 rows, const char *identity)
{
  guint8 header[HEADER_BYTES];
  guint32 len = GUINT32_TO_LE ((guint32) strlen (identity));
  header_bytes (t, FORMAT_VERSION, rows, header);
  if (!writer_put (w, header, sizeof header) || !writer_put (w, &len, sizeof len)
      || !writer_put (w, identity, strlen (identity)))
    return FALSE;
  for (int k = 0; k < t->config.shard_num; k++)
    {
      Shard *s = &t->shards[k];
      for (guint32 i = 0; i < s->cap; i++)
        if (s->keys[i] != 0)
          {
            RowHead *h = record (t, s, s->rows[i]);
            guint64 id = GUINT64_TO_LE (s->keys[i]);
            if (!selected (&t->config, h, mode))
              continue;
            if (!(writer_put (w, &id, sizeof id) && writer_put (w, h, t->rec_size)))
              return FALSE;
            /* a delta or base save resets the row's delta_score: the file holds the row
             * as the table will be after the save, so a resume continues from it */
            if (mode != KS_SPARSE_SAVE_ALL)
              {
                float zero = 0;
                memcpy (w->buf + w->len - t->rec_size + G_STRUCT_OFFSET (RowHead, delta_score),
                        &zero, sizeof zero);
              }
          }
    }
  guint8 digest[DIGEST_BYTES];
  gsize dlen = sizeof digest;
  if (!writer_flush (w, TRUE))
    return FALSE;
  g_checksum_get_digest (w->sum, digest, &dlen);
  return writer_put (w, digest, dlen) && writer_flush (w, FALSE);
}

gboolean
ks_sparse_table_save (KsSparseTable *t, const char *path, KsSparseSaveMode mode, gsize *n_rows,
                      GError **error)
{
  return ks_sparse_table_save_with (t, path, mode, NULL, n_rows, error);
}

gboolean
ks_sparse_table_save_with (KsSparseTable *t, const char *path, KsSparseSaveMode mode,
                           GHashTable *identity, gsize *n_rows, GError **error)
{
  const KsSparseConfig *c = &t->config;
  g_autofree char *tmp = NULL;
  g_autofree char *dir = g_path_get_dirname (path);
  g_autofree char *id_text = identity_text (identity, error);
  guint64 rows = 0;

  if (id_text == NULL)
    return FALSE;

  for (int k = 0; k < c->shard_num; k++)
    {
      Shard *s = &t->shards[k];
      for (guint32 i = 0; i < s->cap; i++)
        rows += s->keys[i] != 0 && selected (c, record (t, s, s->rows[i]), mode);
    }

  /* never a name another can predict and plant a link or a FIFO at */
  int fd = ks_io_create_beside (path, &tmp, error);
  if (fd < 0)
    return FALSE;
  Writer w = { fd, g_checksum_new (G_CHECKSUM_SHA256), g_malloc (4 << 20), 0, 4 << 20 };
  gboolean ok = write_rows (t, &w, mode, rows, id_text);
  ok = (ok || ks_io_error (error, "cannot write", tmp))
       && (fsync (fd) == 0 || ks_io_error (error, "cannot fsync", tmp));
  g_checksum_free (w.sum);
  g_free (w.buf);
  if (close (fd) != 0 && ok)
    ok = ks_io_error (error, "cannot close", tmp);
  if (ok && g_rename (tmp, path) != 0)
    ok = ks_io_error (error, "cannot rename the new file to", path);
  if (!ok)
    {
      g_unlink (tmp);
      return FALSE;
    }
  int dfd = open (dir, O_RDONLY | O_CLOEXEC);
  gboolean synced = dfd >= 0 && fsync (dfd) == 0;
  if (dfd >= 0)
    close (dfd);
  if (!synced)
    return ks_io_error (error, "cannot fsync the directory", dir);

  /* written: now the delta counts restart (the rows a delta took, or all for a base) */
  if (mode != KS_SPARSE_SAVE_ALL)
    for (int k = 0; k < c->shard_num; k++)
      {
        Shard *s = &t->shards[k];
        for (guint32 i = 0; i < s->cap; i++)
          if (s->keys[i] != 0)
            {
              RowHead *h = record (t, s, s->rows[i]);
              if (mode == KS_SPARSE_SAVE_BASE || selected (c, h, mode))
                h->delta_score = 0;
            }
      }
  if (n_rows)
    *n_rows = (gsize) rows;
  return TRUE;
}

/* ---- load ---- */

static gboolean G_GNUC_PRINTF (4, 5)
file_error (GError **error, KsCheckpointError code, const char *path, const char *format, ...)
{
  va_list ap;
  va_start (ap, format);
  ks_fail_valist (error, KS_CHECKPOINT_ERROR, code, format, ap);
  va_end (ap);
  g_prefix_error (error, "sparse table file %s: ", path);
  return FALSE;
}

static gboolean
read_full (int fd, guint8 *buf, gsize n)
{
  for (gsize done = 0; done < n;)
    {
      ssize_t k = read (fd, buf + done, n - done);
      if (k < 0 && errno == EINTR)
        continue;
      if (k <= 0)
        return FALSE;
      done += (gsize) k;
    }
  return TRUE;
}

static const char *
rule_name (guint32 rule)
{
  static const char *const names[] = { "adagrad", "sgd", "adam" };
  return rule < G_N_ELEMENTS (names) ? names[rule] : "unknown";
}

/* The identity block of a version 2 file (`len` bytes at `text`) as a new table; NULL
 * with an error naming the file when it is not "key=value\n" lines. */
static GHashTable *
parse_identity (const char *path, const char *text, gsize len, GError **error)
{
  g_autoptr (GHashTable) id = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  for (gsize at = 0; at < len;)
    {
      const char *nl = memchr (text + at, '\n', len - at);
      const char *eq = nl != NULL ? memchr (text + at, '=', nl - (text + at)) : NULL;
      if (eq == NULL || eq == text + at || memchr (text + at, '\0', nl - (text + at)) != NULL
          || !g_utf8_validate (text + at, nl - (text + at), NULL))
        {
          file_error (error, KS_CHECKPOINT_ERROR_CORRUPT, path,
                      "its identity block is not key=value lines; the header is damaged: use "
                      "an intact copy");
          return NULL;
        }
      char *key = g_strndup (text + at, eq - (text + at));
      if (g_hash_table_contains (id, key))
        {
          file_error (error, KS_CHECKPOINT_ERROR_CORRUPT, path,
                      "its identity block gives '%s' twice; the header is damaged or edited: "
                      "use an intact copy", key);
          g_free (key);
          return NULL;
        }
      g_hash_table_insert (id, key, g_strndup (eq + 1, nl - eq - 1));
      at = nl + 1 - text;
    }
  return g_steal_pointer (&id);
}

/* Every pair of `want` in the file's `have` (NULL: a file without identity). */
static gboolean
check_identity (const char *path, GHashTable *have, GHashTable *want, const char *what,
                GError **error)
{
  gpointer k, v;

  if (want == NULL || g_hash_table_size (want) == 0)
    return TRUE;
  if (have == NULL || g_hash_table_size (have) == 0)
    return file_error (error, KS_CHECKPOINT_ERROR_MISMATCH, path,
                       "carries no save identity (written by an older ksdist, or planted) but "
                       "%s expects %s; restore the checkpoint directory whole from the run "
                       "that saved it", what,
                       (const char *) g_hash_table_lookup (want, "save_id") ?: "one");
  /* the same key first every time: the message is stable */
  g_autofree gpointer *keys = g_hash_table_get_keys_as_array (want, NULL);
  qsort (keys, g_hash_table_size (want), sizeof *keys, by_string);
  for (guint i = 0; i < g_hash_table_size (want); i++)
    {
      k = keys[i];
      v = g_hash_table_lookup (want, k);
      const char *got = g_hash_table_lookup (have, k);
      if (g_strcmp0 (got, v) != 0)
        return file_error (error, KS_CHECKPOINT_ERROR_MISMATCH, path,
                           "holds %s %s but %s expects %s %s: a file of another save, server "
                           "or table; restore the checkpoint directory whole from the run that "
                           "saved it (or remove the checkpoint)", (const char *) k,
                           got != NULL ? got : "(none)", what, (const char *) k,
                           (const char *) v);
    }
  return TRUE;
}

/* A saved row that training could have made: finite floats, counts not negative, known
 * flags. */
static gboolean
row_sane (const KsSparseTable *t, const guint8 *rec)
{
  RowHead h;
  memcpy (&h, rec, sizeof h);
  if (!(isfinite (h.show) && isfinite (h.click) && isfinite (h.delta_score) && h.show >= 0
        && h.click >= 0 && (h.flags & ~FLAG_EMBEDX) == 0))
    return FALSE;
  for (gsize i = 0; i < t->dim + t->n_state; i++)
    {
      float f;
      memcpy (&f, rec + sizeof h + i * sizeof f, sizeof f);
      if (!isfinite (f))
        return FALSE;
    }
  return TRUE;
}

/* Checks one file whole and copies its rows of this server into `stage`. */
static gboolean
load_file (KsSparseTable *stage, const char *path, const KsSparseFileCheck *check, int index,
           int servers, GError **error)
{
  const gsize rec = sizeof (guint64) + stage->rec_size;
  guint8 header[HEADER_BYTES], want[HEADER_BYTES];
  struct stat st;
  /* O_NONBLOCK: a FIFO put there after the check opens at once, and is refused below */
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return ks_io_error (error, "cannot open sparse table file", path);
  gboolean ok = FALSE;
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  g_autofree guint8 *buf = NULL;
  g_autofree char *id_text = NULL;
  g_autoptr (GHashTable) identity = NULL;
  guint32 id_len = 0;
  gsize id_bytes = 0;

  if (fstat (fd, &st) != 0)
    {
      ks_io_error (error, "cannot stat sparse table file", path);
      goto out;
    }
  if (!S_ISREG (st.st_mode))
    {
      file_error (error, KS_CHECKPOINT_ERROR_IO, path,
                  "not a regular file (a FIFO or a device would block or never end); put the "
                  "saved table file there");
      goto out;
    }
  if (st.st_size < HEADER_BYTES + DIGEST_BYTES
      || !read_full (fd, header, sizeof header))
    {
      file_error (error, KS_CHECKPOINT_ERROR_CORRUPT, path,
                  "%lld bytes, shorter than a header and checksum: truncated or not a "
                  "sparse table; use an intact copy", (long long) st.st_size);
      goto out;
    }
  if (memcmp (header, MAGIC, 8) != 0)
    {
      file_error (error, KS_CHECKPOINT_ERROR_FORMAT, path,
                  "not a ksdist sparse table file (no %s magic); check the path", MAGIC);
      goto out;
    }
  guint32 version, dim, rule, per;
  guint64 rows;
  memcpy (&version, header + 8, 4);
  memcpy (&dim, header + 12, 4);
  memcpy (&rule, header + 16, 4);
  memcpy (&per, header + 20, 4);
  memcpy (&rows, header + 24, 8);
  version = GUINT32_FROM_LE (version), dim = GUINT32_FROM_LE (dim), rule = GUINT32_FROM_LE (rule);
  per = GUINT32_FROM_LE (per), rows = GUINT64_FROM_LE (rows);
  if (version != FORMAT_VERSION && version != 1)
    {
      file_error (error, KS_CHECKPOINT_ERROR_FORMAT, path,
                  "format version %u, this build reads versions 1 and %u; load it with the "
                  "ksdist that wrote it", version, FORMAT_VERSION);
      goto out;
    }
  if (dim != (guint32) stage->config.embedx_dim || rule != (guint32) stage->config.rule)
    {
      file_error (error, KS_CHECKPOINT_ERROR_MISMATCH, path,
                  "saved with embedx_dim %u and rule %s, table %s has embedx_dim %d and rule "
                  "%s; set [table.%s] as when it was saved", dim, rule_name (rule), stage->name,
                  stage->config.embedx_dim, rule_name (stage->config.rule), stage->name);
      goto out;
    }
  header_bytes (stage, version, rows, want);
  if (per != rec || memcmp (header, want, HEADER_BYTES) != 0)
    {
      file_error (error, KS_CHECKPOINT_ERROR_CORRUPT, path,
                  "header says %u bytes per row, the table's rows take %" G_GSIZE_FORMAT
                  "; the header is damaged: use an intact copy", per, rec);
      goto out;
    }
  g_checksum_update (sum, header, sizeof header);
  if (version >= 2)
    {
      if (st.st_size < HEADER_BYTES + 4 + DIGEST_BYTES || !read_full (fd, (guint8 *) &id_len, 4)
          || (id_len = GUINT32_FROM_LE (id_len)) > MAX_IDENTITY_BYTES)
        {
          file_error (error, KS_CHECKPOINT_ERROR_CORRUPT, path,
                      "no identity block of at most %d bytes after the header: truncated or "
                      "damaged; use an intact copy", MAX_IDENTITY_BYTES);
          goto out;
        }
      id_bytes = 4 + (gsize) id_len;
      id_text = g_malloc (id_len + 1);
      if (!read_full (fd, (guint8 *) id_text, id_len))
        {
          ks_io_error (error, "cannot read sparse table file", path);
          goto out;
        }
      guint32 le = GUINT32_TO_LE (id_len);
      g_checksum_update (sum, (const guint8 *) &le, 4);
      g_checksum_update (sum, (const guint8 *) id_text, id_len);
    }
  if (rows > (guint64) G_MAXINT64 / rec
      || (guint64) st.st_size != HEADER_BYTES + id_bytes + rows * rec + DIGEST_BYTES)
    {
      file_error (error, KS_CHECKPOINT_ERROR_CORRUPT, path,
                  "%lld bytes, but its header's %" G_GUINT64_FORMAT " rows of %" G_GSIZE_FORMAT
                  " bytes make %" G_GUINT64_FORMAT ": truncated or damaged; use an intact copy",
                  (long long) st.st_size, rows, rec,
                  HEADER_BYTES + id_bytes + rows * rec + DIGEST_BYTES);
      goto out;
    }
  /* who the file says it is, before any row: a file of another save is refused as such,
   * even when its rows are intact */
  if (id_text != NULL && (identity = parse_identity (path, id_text, id_len, error)) == NULL)
    goto out;
  if (check != NULL
      && !check_identity (path, identity, check->identity,
                          check->expected_by != NULL ? check->expected_by : "the load", error))
    goto out;

  const gsize per_read = MAX ((gsize) (4 << 20) / rec, 1);
  buf = g_malloc (per_read * rec);
  for (guint64 done = 0; done < rows;)
    {
      gsize k = (gsize) MIN ((guint64) per_read, rows - done);
      if (!read_full (fd, buf, k * rec))
        {
          ks_io_error (error, "cannot read sparse table file", path);
          goto out;
        }
      g_checksum_update (sum, buf, k * rec);
      for (gsize r = 0; r < k; r++)
        {
          guint64 id;
          const guint8 *row = buf + r * rec + sizeof id;
          memcpy (&id, buf + r * rec, sizeof id);
          id = GUINT64_FROM_LE (id);
          /* rows a save could not have written: refused, not skipped */
          if (id == 0 || !row_sane (stage, row))
            {
              file_error (error, KS_CHECKPOINT_ERROR_CORRUPT, path,
                          "row %" G_GUINT64_FORMAT " (id %" G_GUINT64_FORMAT ") is not one a "
                          "save writes (id 0, a value or statistic that is not finite, a "
                          "negative count or unknown flags): use an intact copy",
                          done + r, id);
              goto out;
            }
          if (check != NULL && check->servers > 0
              && id % (guint64) check->servers != (guint64) check->server)
            {
              file_error (error, KS_CHECKPOINT_ERROR_CORRUPT, path,
                          "row %" G_GUINT64_FORMAT " holds id %" G_GUINT64_FORMAT ", a row of "
                          "server %d of %d, but this is server %d's file: a file of another "
                          "server; restore the checkpoint directory whole",
                          done + r, id, (int) (id % (guint64) check->servers), check->servers,
                          check->server);
              goto out;
            }
          if (id % (guint64) servers != (guint64) index)
            continue;
          gboolean made;
          RowHead *h = ks_sparse_find_or_make (stage, id, &made, error);
          if (h == NULL)
            goto out;
          if (!made)
            {
              file_error (error, KS_CHECKPOINT_ERROR_CORRUPT, path,
                          "id %" G_GUINT64_FORMAT " (row %" G_GUINT64_FORMAT ") is saved "
                          "twice in the files loaded: a file copied over another, or edited; "
                          "restore the checkpoint directory whole", id, done + r);
              goto out;
            }
          memcpy (h, row, stage->rec_size);
        }
      done += k;
    }
  guint8 digest[DIGEST_BYTES], saved[DIGEST_BYTES];
  gsize dlen = sizeof digest;
  g_checksum_get_digest (sum, digest, &dlen);
  if (!read_full (fd, saved, sizeof saved))
    {
      ks_io_error (error, "cannot read sparse table file", path);
      goto out;
    }
  if (memcmp (digest, saved, sizeof digest) != 0)
    {
      file_error (error, KS_CHECKPOINT_ERROR_CORRUPT, path,
                  "its rows do not match its SHA-256: the file is damaged; use an intact copy");
      goto out;
    }
  ok = TRUE;
out:
  close (fd);
  return ok;
}

gboolean
ks_sparse_table_load (KsSparseTable *t, const char *const *paths, gsize n_paths, int index,
                      int servers, gboolean replace, gsize *n_rows, GError **error)
{
  return ks_sparse_table_load_with (t, paths, NULL, n_paths, index, servers, replace, n_rows,
                                    error);
}

gboolean
ks_sparse_table_load_with (KsSparseTable *t, const char *const *paths,
                           const KsSparseFileCheck *checks, gsize n_paths, int index,
                           int servers, gboolean replace, gsize *n_rows, GError **error)
{
  g_return_val_if_fail (servers >= 1 && index >= 0 && index < servers, FALSE);
  g_autoptr (KsSparseTable) stage = ks_sparse_table_new (t->name, &t->config);

  for (gsize p = 0; p < n_paths; p++)
    if (!load_file (stage, paths[p], checks != NULL ? &checks[p] : NULL, index, servers, error))
      return FALSE;
  if (n_rows)
    *n_rows = stage->size;
  if (replace)
    {
      /* the staged rows become the table's; the old ones go with the stage */
      Shard *shards = t->shards;
      gsize size = t->size;
      guint64 salt = t->salt;
      t->shards = stage->shards, t->size = stage->size, t->salt = stage->salt;
      stage->shards = shards, stage->size = size, stage->salt = salt;
      return TRUE;
    }
  for (int k = 0; k < stage->config.shard_num; k++)
    {
      Shard *s = &stage->shards[k];
      for (guint32 i = 0; i < s->cap; i++)
        if (s->keys[i] != 0)
          {
            gboolean made;
            RowHead *h = ks_sparse_find_or_make (t, s->keys[i], &made, error);
            if (h == NULL)
              return FALSE;
            memcpy (h, record (stage, s, s->rows[i]), t->rec_size);
          }
    }
  return TRUE;
}
