/* The safetensors format's rules, checked whole for every file ksdist reads: its
 * checkpoints, pipeline parts, parameter-server shards and inference exports. */
#include "ks-private.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

gboolean
ks_checkpoint_corrupt (GError **error, int code, const char *file, const char *format, ...)
{
  va_list args;
  va_start (args, format);
  ks_fail_valist (error, KS_CHECKPOINT_ERROR, code, format, args);
  va_end (args);
  g_prefix_error (error, "%s: ", file);
  return FALSE;
}

#define corrupt ks_checkpoint_corrupt

/* A JSON node that is an integer in [min, max]. */
static gboolean
int_in (JsonNode *n, gint64 min, gint64 max, gint64 *out)
{
  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64)
    return FALSE;
  *out = json_node_get_int (n);
  return *out >= min && *out <= max;
}

typedef struct {
  gint64 begin, end;
  const char *name;
} Span;

static int
by_begin (gconstpointer a, gconstpointer b)
{
  const Span *x = a, *y = b;
  return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* The safetensors rules for every tensor of the header: dtype, shape and data_offsets of
 * the right types, offsets inside the data, sizes that match dtype and shape, and spans
 * that cover the data exactly, without gaps or overlaps. Metadata values are strings. */
static gboolean
check_layout (const char *file, JsonObject *header, gsize data_len, GError **error)
{
  static const struct { const char *name; int size; } dtypes[] = {
    { "F64", 8 }, { "F32", 4 }, { "F16", 2 }, { "BF16", 2 }, { "I64", 8 }, { "I32", 4 },
    { "I16", 2 }, { "I8", 1 }, { "U8", 1 }, { "BOOL", 1 },
  };
  g_autoptr (GList) names = json_object_get_members (header);
  g_autoptr (GArray) spans = g_array_new (FALSE, FALSE, sizeof (Span));

  for (GList *l = names; l != NULL; l = l->next)
    {
      const char *name = l->data;
      JsonNode *node = json_object_get_member (header, name);
      if (strcmp (name, "__metadata__") == 0)
        {
          JsonObject *meta = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
          g_autoptr (GList) keys = meta != NULL ? json_object_get_members (meta) : NULL;
          if (meta == NULL)
            return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, file, "__metadata__ is not an object");
          for (GList *k = keys; k != NULL; k = k->next)
            {
              JsonNode *v = json_object_get_member (meta, k->data);
              if (!JSON_NODE_HOLDS_VALUE (v) || json_node_get_value_type (v) != G_TYPE_STRING)
                return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, file,
                                "metadata '%s' is not a string (safetensors metadata maps "
                                "strings to strings)", (char *) k->data);
            }
          continue;
        }
      JsonObject *t = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
      JsonNode *dtype = t != NULL ? json_object_get_member (t, "dtype") : NULL;
      JsonNode *shape = t != NULL ? json_object_get_member (t, "shape") : NULL;
      JsonNode *offsets = t != NULL ? json_object_get_member (t, "data_offsets") : NULL;
      int size = 0;
      gint64 numel = 1, dim;
      Span span = { 0, 0, name };

      if (dtype != NULL && JSON_NODE_HOLDS_VALUE (dtype)
          && json_node_get_value_type (dtype) == G_TYPE_STRING)
        for (guint i = 0; i < G_N_ELEMENTS (dtypes); i++)
          if (strcmp (json_node_get_string (dtype), dtypes[i].name) == 0)
            size = dtypes[i].size;
      if (size == 0)
        return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, file,
                        "tensor '%s' has no known dtype", name);
      if (shape == NULL || !JSON_NODE_HOLDS_ARRAY (shape))
        return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, file, "tensor '%s' has no shape", name);
      JsonArray *dims = json_node_get_array (shape);
      for (guint i = 0; i < json_array_get_length (dims); i++)
        if (!int_in (json_array_get_element (dims, i), 0, (gint64) data_len, &dim)
            || (dim > 0 && numel > (gint64) data_len / dim))
          return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, file,
                          "tensor '%s': its shape is not sizes that fit the file", name);
        else
          numel *= dim;
      JsonArray *pair = offsets != NULL && JSON_NODE_HOLDS_ARRAY (offsets)
                            ? json_node_get_array (offsets) : NULL;
      if (pair == NULL || json_array_get_length (pair) != 2
          || !int_in (json_array_get_element (pair, 0), 0, (gint64) data_len, &span.begin)
          || !int_in (json_array_get_element (pair, 1), span.begin, (gint64) data_len, &span.end))
        return corrupt (error, KS_CHECKPOINT_ERROR_CORRUPT, file,
                        "tensor '%s': data_offsets are not [begin, end] within the %"
                        G_GSIZE_FORMAT " data bytes", name, data_len);
      if (span.end - span.begin != numel * size)
        return corrupt (error, KS_CHECKPOINT_ERROR_CORRUPT, file,
                        "tensor '%s': data_offsets span %" G_GINT64_FORMAT " bytes, but its "
                        "dtype and shape need %" G_GINT64_FORMAT, name, span.end - span.begin,
                        numel * size);
      g_array_append_val (spans, span);
    }
  g_array_sort (spans, by_begin);
  gint64 next = 0;
  for (guint i = 0; i < spans->len; i++)
    {
      const Span *x = &g_array_index (spans, Span, i);
      if (x->begin != next)
        return corrupt (error, KS_CHECKPOINT_ERROR_CORRUPT, file,
                        "tensor '%s' starts at byte %" G_GINT64_FORMAT " of the data, where %s "
                        "(data_offsets must cover the data without overlaps or gaps)", x->name,
                        x->begin, x->begin < next ? "another tensor lies" : "a gap ends");
      next = x->end;
    }
  if (next != (gint64) data_len)
    return corrupt (error, KS_CHECKPOINT_ERROR_CORRUPT, file,
                    "%" G_GSIZE_FORMAT " bytes of data after the last tensor", data_len - next);
  return TRUE;
}

gboolean
ks_safetensors_parse (const char *file, const char *bytes, gsize len, JsonParser *parser,
                      guint64 *header_len, JsonObject **header, GError **error)
{
  g_autoptr (GError) local = NULL;

  if (len >= 8)
    {
      memcpy (header_len, bytes, 8);
      *header_len = GUINT64_FROM_LE (*header_len);
    }
  if (len < 8 || *header_len > len - 8)
    return corrupt (error, KS_CHECKPOINT_ERROR_CORRUPT, file,
                    "truncated: %" G_GSIZE_FORMAT " bytes, too short for its header", len);
  if (*header_len == 0 || bytes[8] != '{' /* safetensors: the JSON starts at once */
      || !json_parser_load_from_data (parser, bytes + 8, *header_len, &local)
      || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, file,
                    "the header is not a JSON object starting at its first byte%s%s",
                    local ? ": " : "", local ? local->message : "");
  *header = json_node_get_object (json_parser_get_root (parser));
  return check_layout (file, *header, len - 8 - *header_len, error);
}

gboolean
ks_safetensors_check (const char *file, const char *bytes, gsize len, guint64 *header_len,
                      GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *header;
  return ks_safetensors_parse (file, bytes, len, parser, header_len, &header, error);
}

/* ---- writing ---- */

static gint
by_string (gconstpointer a, gconstpointer b, gpointer unused)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* The header: __metadata__ (keys sorted, so a file's bytes follow from its content) and
 * the tensors in order, their data back to back. */
static char *
header_json (const KsSafetensor *tensors, gsize n, GHashTable *meta)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonNode) root = NULL;
  guint64 offset = 0;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "__metadata__");
  json_builder_begin_object (b);
  if (meta != NULL)
    {
      g_autofree gpointer *keys = g_hash_table_get_keys_as_array (meta, NULL);
      g_qsort_with_data (keys, g_hash_table_size (meta), sizeof (gpointer), by_string, NULL);
      for (guint i = 0; i < g_hash_table_size (meta); i++)
        {
          json_builder_set_member_name (b, keys[i]);
          json_builder_add_string_value (b, g_hash_table_lookup (meta, keys[i]));
        }
    }
  json_builder_end_object (b);
  for (gsize i = 0; i < n; i++)
    {
      json_builder_set_member_name (b, tensors[i].name);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "dtype");
      json_builder_add_string_value (b, "F32");
      json_builder_set_member_name (b, "shape");
      json_builder_begin_array (b);
      for (int d = 0; d < tensors[i].ndim; d++)
        json_builder_add_int_value (b, tensors[i].shape[d]);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "data_offsets");
      json_builder_begin_array (b);
      json_builder_add_int_value (b, (gint64) offset);
      offset += tensors[i].numel * sizeof (float);
      json_builder_add_int_value (b, (gint64) offset);
      json_builder_end_array (b);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  return json_to_string (root, FALSE);
}

static gboolean
write_all (int fd, const void *data, gsize len)
{
  for (const char *p = data; len > 0;)
    {
      gssize done = write (fd, p, MIN (len, (gsize) G_MAXSSIZE));
      if (done < 0 && errno == EINTR)
        continue;
      if (done <= 0)
        return FALSE;
      p += done;
      len -= (gsize) done;
    }
  return TRUE;
}

int
ks_io_create_beside (const char *path, char **tmp, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (path);
  g_autofree char *base = g_path_get_basename (path);

  for (int tries = 0; tries < 100; tries++)
    {
      *tmp = g_strdup_printf ("%s/.%s.tmp-%08x", dir, base, g_random_int ());
      int fd = open (*tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd >= 0 || errno != EEXIST)
        {
          if (fd < 0)
            ks_io_error (error, "cannot create", *tmp);
          return fd;
        }
      g_clear_pointer (tmp, g_free);
    }
  g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO,
               "cannot create a temporary file beside %s: every name tried exists; remove "
               "the .%s.tmp-* files there", path, base);
  return -1;
}

gboolean
ks_safetensors_write (const char *path, const KsSafetensor *tensors, gsize n,
                      GHashTable *metadata, gboolean seal, char **digest, GError **error)
{
  g_autoptr (GHashTable) meta = ks_string_table_copy (metadata);
  g_autofree char *header = NULL, *tmp = NULL, *dir = g_path_get_dirname (path);
  g_autofree const guint8 **chunks = g_new (const guint8 *, n + 1);
  g_autofree gsize *lens = g_new (gsize, n + 1);
  gboolean ok;
  int fd;

  for (gsize i = 0; i < n; i++)
    {
      chunks[i] = (const guint8 *) tensors[i].data;
      lens[i] = tensors[i].numel * sizeof (float);
    }
  if (seal) /* the digest's place, filled in once the header is final */
    g_hash_table_insert (meta, g_strdup (KS_SEAL_KEY), g_strnfill (64, '0'));
  header = header_json (tensors, n, meta);
  /* an 8-byte little-endian length, then the JSON padded with spaces to 8 bytes */
  gsize json_len = strlen (header), padded = (json_len + 7) / 8 * 8;
  guint64 le = GUINT64_TO_LE ((guint64) padded);
  header = g_realloc (header, padded + 1);
  memset (header + json_len, ' ', padded - json_len);
  header[padded] = '\0';
  if (seal && !ks_seal_fill (header, padded, chunks, lens, n))
    g_return_val_if_reached (FALSE);
  if (seal && digest != NULL)
    *digest = g_strndup (strstr (header, "\"" KS_SEAL_KEY "\":\"") + strlen (KS_SEAL_KEY) + 4, 64);

  if ((fd = ks_io_create_beside (path, &tmp, error)) < 0)
    return FALSE;
  ok = write_all (fd, &le, 8) && write_all (fd, header, padded);
  for (gsize i = 0; ok && i < n; i++)
    ok = write_all (fd, chunks[i], lens[i]);
  ok = ok && fsync (fd) == 0;
  if (!ok)
    ks_io_error (error, "cannot write", tmp);
  if (close (fd) != 0 && ok)
    ok = ks_io_error (error, "cannot write", tmp);
  if (ok && g_rename (tmp, path) != 0)
    ok = ks_io_error (error, "cannot rename the new file to", path);
  if (!ok)
    {
      g_unlink (tmp);
      if (digest != NULL)
        g_clear_pointer (digest, g_free);
      return FALSE;
    }
  return ks_checkpoint_fsync (dir, error);
}
