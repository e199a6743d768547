/* Checkpoint shards of a server's dense table (shard.h). */
#include "shard.h"

#include <ksdist/checkpoint.h>

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>

#define SHARD_FORMAT "ksdist-ps-shard"
#define SHARD_VERSION "2" /* 1: the SHA-256 covered the data only */
#define MAX_HEADER (64u << 20)

static gboolean
io_error (GError **error, const char *what, const char *path)
{
  int e = errno;
  g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (e), "%s %s: %s", what, path,
               g_strerror (e));
  return FALSE;
}

/* The packed host copies of the values and of each state arena. */
static float **
read_arenas (PsDenseTable *t, gsize *n_arenas, gint64 **opt_step, GError **error)
{
  KsArena **state = NULL;
  gsize n_state = 0;
  float **out;

  if (!ps_dense_table_state (t, &state, &n_state, opt_step, error))
    return NULL;
  *n_arenas = 1 + n_state;
  out = g_new0 (float *, *n_arenas + 1);
  for (gsize a = 0; a < *n_arenas; a++)
    {
      out[a] = g_new (float, MAX (t->n_floats, 1));
      if (!ps_dense_table_transfer (t, a == 0 ? ks_model_parameters (t->model) : state[a - 1],
                                    out[a], TRUE, error))
        {
          for (gsize i = 0; i <= a; i++)
            g_free (out[i]);
          g_free (out);
          return NULL;
        }
    }
  return out;
}

static void
free_arenas (float **a, gsize n)
{
  for (gsize i = 0; a != NULL && i < n; i++)
    g_free (a[i]);
  g_free (a);
}

gboolean
ps_shard_save (PsDenseTable *t, const char *dir, int server, int servers, gint64 step,
               GError **error)
{
  g_autofree char *name = g_strdup_printf ("server-%d-of-%d.safetensors", server, servers);
  g_autofree char *final = g_build_filename (dir, name, NULL);
  g_autoptr (GHashTable) meta = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autofree KsSafetensor *tensors = NULL;
  gint64 *opt_step = NULL;
  gsize n_arenas = 0, n = 0;
  float **arenas;
  gboolean ok;

  if (g_mkdir_with_parents (dir, 0755) != 0)
    return io_error (error, "cannot create the directory", dir);
  if ((arenas = read_arenas (t, &n_arenas, &opt_step, error)) == NULL)
    return FALSE;
  g_hash_table_insert (meta, "format", g_strdup (SHARD_FORMAT));
  g_hash_table_insert (meta, "version", g_strdup (SHARD_VERSION));
  g_hash_table_insert (meta, "server", g_strdup_printf ("%d", server));
  g_hash_table_insert (meta, "servers", g_strdup_printf ("%d", servers));
  g_hash_table_insert (meta, "step", g_strdup_printf ("%" G_GINT64_FORMAT, step));
  /* the save's identity, as job.json and every other file of it name it */
  g_hash_table_insert (meta, KS_CHECKPOINT_SAVE_KEY, ks_checkpoint_save_id (dir));
  g_hash_table_insert (meta, "optimizer_step", g_strdup_printf ("%" G_GINT64_FORMAT, *opt_step));
  g_hash_table_insert (meta, "optimizer_states", g_strdup_printf ("%" G_GSIZE_FORMAT, n_arenas - 1));
  /* each arena's blocks packed in message order: the values, then each state */
  tensors = g_new0 (KsSafetensor, n_arenas * t->n_blocks + 1);
  for (gsize a = 0; a < n_arenas; a++)
    for (gsize i = 0, at = 0; i < t->n_blocks; at += t->blocks[i]->len, i++, n++)
      {
        char *tname = a == 0 ? g_strdup (t->blocks[i]->name)
                             : g_strdup_printf ("optim.%" G_GSIZE_FORMAT ".%s", a - 1,
                                                t->blocks[i]->name);
        g_ptr_array_add (names, tname);
        tensors[n] = (KsSafetensor) { tname, 1, { (gint64) t->blocks[i]->len },
                                      t->blocks[i]->len, arenas[a] + at };
      }
  ok = ks_safetensors_write (final, tensors, n, meta, TRUE, NULL, error);
  free_arenas (arenas, n_arenas);
  return ok;
}

/* ---- loading ---- */

typedef struct {
  char *path;
  char *bytes;
  gsize len;
  JsonParser *parser;
  JsonObject *header, *meta;
  const guint8 *data;
  gsize data_len;
} Shard;

static gboolean
bad (GError **error, const char *file, const char *format, ...) G_GNUC_PRINTF (3, 4);

static gboolean
bad (GError **error, const char *file, const char *format, ...)
{
  va_list ap;
  va_start (ap, format);
  ks_fail_valist (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_CORRUPT, format, ap);
  va_end (ap);
  g_prefix_error (error, "%s: ", file);
  return FALSE;
}

/* A metadata string that is a decimal integer in [lo, hi]. */
static gboolean
meta_int (Shard *s, const char *key, gint64 lo, gint64 hi, gint64 *out, GError **error)
{
  JsonNode *n = json_object_get_member (s->meta, key);
  const char *v = n != NULL && JSON_NODE_HOLDS_VALUE (n)
                          && json_node_get_value_type (n) == G_TYPE_STRING
                      ? json_node_get_string (n) : NULL;
  if (v == NULL || !g_ascii_string_to_signed (v, 10, lo, hi, out, NULL))
    return bad (error, s->path, "metadata '%s' is missing or not an integer in [%" G_GINT64_FORMAT
                ", %" G_GINT64_FORMAT "]", key, lo, hi);
  return TRUE;
}

static gboolean
shard_open (Shard *s, GError **error)
{
  guint64 header_len;
  g_autoptr (GChecksum) sha = g_checksum_new (G_CHECKSUM_SHA256);
  GError *e = NULL;

  if (!g_file_test (s->path, G_FILE_TEST_IS_REGULAR))
    return bad (error, s->path, "not a regular file");
  if (!g_file_get_contents (s->path, &s->bytes, &s->len, &e))
    {
      g_propagate_error (error, e);
      return FALSE;
    }
  /* the whole safetensors format first, as the library checks every file it reads */
  if (!ks_safetensors_check (s->path, s->bytes, s->len, &header_len, error))
    return FALSE;
  if (header_len > MAX_HEADER)
    return bad (error, s->path, "a header of %" G_GUINT64_FORMAT " bytes is past the %d a "
                "shard may have", header_len, (int) MAX_HEADER);
  s->parser = json_parser_new ();
  if (!json_parser_load_from_data (s->parser, s->bytes + 8, (gssize) header_len, NULL)
      || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (s->parser)))
    return bad (error, s->path, "the header is not a JSON object");
  s->header = json_node_get_object (json_parser_get_root (s->parser));
  JsonNode *m = json_object_get_member (s->header, "__metadata__");
  if (m == NULL || !JSON_NODE_HOLDS_OBJECT (m))
    return bad (error, s->path, "no __metadata__");
  s->meta = json_node_get_object (m);
  const char *version = json_object_get_string_member_with_default (s->meta, "version", "");
  if (g_strcmp0 (json_object_get_string_member_with_default (s->meta, "format", ""), SHARD_FORMAT) != 0
      || (g_strcmp0 (version, SHARD_VERSION) != 0 && g_strcmp0 (version, "1") != 0))
    return bad (error, s->path, "not a ksdist parameter-server shard of version 1 or "
                SHARD_VERSION);
  s->data = (const guint8 *) s->bytes + 8 + header_len;
  s->data_len = s->len - 8 - header_len;
  if (g_strcmp0 (version, SHARD_VERSION) == 0)
    {
      if (!ks_seal_matches (s->bytes, s->len,
                            json_object_get_string_member_with_default (s->meta, KS_SEAL_KEY, "")))
        return bad (error, s->path, "the file does not match its SHA-256: damaged, truncated "
                    "or edited");
      return TRUE;
    }
  g_checksum_update (sha, s->data, s->data_len);
  if (g_strcmp0 (g_checksum_get_string (sha),
                 json_object_get_string_member_with_default (s->meta, "data_sha256", "")) != 0)
    return bad (error, s->path, "the data does not match its SHA-256: damaged or truncated");
  g_warning ("%s: an older shard (version 1), whose checksum does not cover its header; the "
             "next save writes version " SHARD_VERSION, s->path);
  return TRUE;
}

static void
shard_clear (Shard *s)
{
  g_free (s->path);
  g_free (s->bytes);
  g_clear_object (&s->parser);
}

/* Copies tensor `name` of a shard into the packed arena `out` where it overlaps the
 * table's blocks, marking each float taken in `taken` (a float given twice is refused). */
static gboolean
take_tensor (PsDenseTable *t, Shard *s, const char *name, JsonObject *o, float *out,
             guint8 *taken, GError **error)
{
  const char *at = strrchr (name, '@');
  guint64 off, begin, end, len;
  JsonArray *shape, *offsets;

  if (at == NULL || !g_ascii_string_to_unsigned (at + 1, 10, 0, G_MAXINT64, &off, NULL))
    return bad (error, s->path, "tensor '%s' is not named <parameter>@<offset>", name);
  if (g_strcmp0 (json_object_get_string_member_with_default (o, "dtype", ""), "F32") != 0
      || !json_object_has_member (o, "shape") || !json_object_has_member (o, "data_offsets")
      || !JSON_NODE_HOLDS_ARRAY (json_object_get_member (o, "shape"))
      || !JSON_NODE_HOLDS_ARRAY (json_object_get_member (o, "data_offsets"))
      || json_array_get_length (shape = json_object_get_array_member (o, "shape")) != 1
      || json_array_get_length (offsets = json_object_get_array_member (o, "data_offsets")) != 2)
    return bad (error, s->path, "tensor '%s': not a one-dimensional F32 tensor", name);
  len = (guint64) json_array_get_int_element (shape, 0);
  if (len > s->data_len / sizeof (float))
    return bad (error, s->path, "tensor '%s': %" G_GUINT64_FORMAT " floats do not fit in %"
                G_GSIZE_FORMAT " data bytes", name, len, s->data_len);
  begin = (guint64) json_array_get_int_element (offsets, 0);
  end = (guint64) json_array_get_int_element (offsets, 1);
  if (end < begin || end > s->data_len || end - begin != len * sizeof (float) || begin % 4 != 0)
    return bad (error, s->path, "tensor '%s': data_offsets [%" G_GUINT64_FORMAT ", %"
                G_GUINT64_FORMAT "] do not hold %" G_GUINT64_FORMAT " floats in %" G_GSIZE_FORMAT
                " data bytes", name, begin, end, len, s->data_len);
  const float *src = (const float *) (s->data + begin);
  g_autofree char *param = g_strndup (name, at - name);
  for (gsize i = 0, pos = 0; i < t->n_blocks; pos += t->blocks[i]->len, i++)
    {
      const PsBlock *b = t->blocks[i];
      if (strcmp (b->param, param) != 0)
        continue;
      guint64 lo = MAX (off, b->offset), hi = MIN (off + len, b->offset + b->len);
      if (lo >= hi)
        continue;
      for (gsize k = pos + (lo - b->offset); k < pos + (hi - b->offset); k++)
        if (taken[k]++)
          return bad (error, s->path, "tensor '%s' gives element %" G_GSIZE_FORMAT " of "
                      "block %s again: overlapping ranges", name, k - pos + b->offset, b->name);
      memcpy (out + pos + (lo - b->offset), src + (lo - off), (hi - lo) * sizeof (float));
    }
  return TRUE;
}

/* The shard files of checkpoint `dir`, all of them, in server order. */
static GPtrArray *
shard_paths (const char *dir, int *servers, GError **error)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, error);
  const char *name;
  GPtrArray *paths;
  int found = 0;

  if (d == NULL)
    return NULL;
  *servers = 0;
  while ((name = g_dir_read_name (d)) != NULL)
    {
      int i, n;
      char tail;
      if (sscanf (name, "server-%d-of-%d.safetensor%c", &i, &n, &tail) == 3 && tail == 's'
          && n > 0 && n <= 100000 && i >= 0 && i < n)
        {
          if (*servers != 0 && n != *servers)
            {
              g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_FORMAT,
                           "%s holds shards of %d and of %d servers: a mixed checkpoint",
                           dir, *servers, n);
              return NULL;
            }
          *servers = n;
          found++;
        }
    }
  if (*servers == 0 || found != *servers)
    {
      g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_FORMAT,
                   "%s holds %d of %d server shards (server-<i>-of-<S>.safetensors): not a "
                   "complete parameter-server checkpoint", dir, found, *servers);
      return NULL;
    }
  paths = g_ptr_array_new_with_free_func (g_free);
  for (int i = 0; i < *servers; i++)
    g_ptr_array_add (paths, g_strdup_printf ("%s/server-%d-of-%d.safetensors", dir, i, *servers));
  return paths;
}

/* A metadata string of the shard, or NULL. */
static const char *
meta_string (Shard *s, const char *key)
{
  JsonNode *n = json_object_get_member (s->meta, key);
  return n != NULL && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING
             ? json_node_get_string (n) : NULL;
}

/* The shard is of the save `id` names: its save, step and server count, and its place. */
static gboolean
of_save (Shard *s, const PsJobIdentity *id, int index, int servers, gint64 step,
         GError **error)
{
  const char *save = meta_string (s, KS_CHECKPOINT_SAVE_KEY);
  gint64 server = -1, count = -1;
  const char *fix = "restore the checkpoint directory whole from the run that saved it (or "
                    "remove the checkpoint to resume from an older one)";

  if (id->save_id != NULL && g_strcmp0 (save, id->save_id) != 0)
    return bad (error, s->path, "holds save %s but %s names save %s: a file of another save "
                "or job; %s", save != NULL ? save : "(none: an older ksdist's)", id->file,
                id->save_id, fix);
  if (step != id->step)
    return bad (error, s->path, "is of step %" G_GINT64_FORMAT " but %s says step %"
                G_GINT64_FORMAT ": %s", step, id->file, id->step, fix);
  if (servers != id->servers)
    return bad (error, s->path, "is one of %d servers' shards but %s says %d servers: %s",
                servers, id->file, id->servers, fix);
  if (!meta_int (s, "server", 0, servers - 1, &server, error)
      || !meta_int (s, "servers", servers, servers, &count, error))
    return FALSE;
  if (server != index)
    return bad (error, s->path, "holds server %" G_GINT64_FORMAT "'s blocks, not server %d's "
                "(a shard copied over another): %s", server, index, fix);
  return TRUE;
}

gboolean
ps_shard_load (PsDenseTable *t, const char *dir, const PsJobIdentity *id, gint64 *step,
               GError **error)
{
  KsArena **state = NULL;
  gsize n_state = 0;
  gint64 *opt_step = NULL, best_opt_step = 0;
  int servers = 0;
  g_autoptr (GPtrArray) paths = shard_paths (dir, &servers, error);
  gboolean ok = paths != NULL && ps_dense_table_state (t, &state, &n_state, &opt_step, error);
  gsize n_arenas = 1 + n_state;
  float **packed = g_new0 (float *, n_arenas);
  guint8 **taken = g_new0 (guint8 *, n_arenas);

  for (gsize a = 0; a < n_arenas; a++)
    {
      packed[a] = g_new0 (float, MAX (t->n_floats, 1));
      taken[a] = g_new0 (guint8, MAX (t->n_floats, 1));
    }
  for (guint f = 0; ok && f < paths->len; f++)
    {
      Shard s = { g_strdup (g_ptr_array_index (paths, f)) };
      gint64 states = 0, shard_step = 0, shard_opt_step = 0;
      ok = shard_open (&s, error)
           && meta_int (&s, "optimizer_states", 0, 16, &states, error)
           && meta_int (&s, "step", 0, G_MAXINT64, &shard_step, error)
           && meta_int (&s, "optimizer_step", 0, G_MAXINT64, &shard_opt_step, error)
           && of_save (&s, id, (int) f, servers, shard_step, error);
      if (ok && states != (gint64) n_state)
        ok = bad (error, s.path, "holds %" G_GINT64_FORMAT " optimizer state arrays per "
                  "parameter but [train] optimizer keeps %" G_GSIZE_FORMAT ": resume with the "
                  "optimizer that wrote it", states, n_state);
      if (ok && f > 0 && shard_step != *step)
        ok = bad (error, s.path, "is of step %" G_GINT64_FORMAT " but the other shards of "
                  "step %" G_GINT64_FORMAT, shard_step, *step);
      *step = shard_step;
      best_opt_step = MAX (best_opt_step, shard_opt_step);
      g_autoptr (GList) names = ok ? json_object_get_members (s.header) : NULL;
      for (GList *l = names; ok && l != NULL; l = l->next)
        {
          const char *name = l->data;
          gsize a = 0;
          JsonNode *node = json_object_get_member (s.header, name);
          if (strcmp (name, "__metadata__") == 0)
            continue;
          if (!JSON_NODE_HOLDS_OBJECT (node))
            ok = bad (error, s.path, "entry '%s' is not an object", name);
          else if (g_str_has_prefix (name, "optim."))
            {
              char *end;
              guint64 k = g_ascii_strtoull (name + 6, &end, 10);
              if (end == name + 6 || *end != '.' || k >= n_state)
                ok = bad (error, s.path, "tensor '%s': no such optimizer state", name);
              a = k + 1;
              name = end + 1;
            }
          ok = ok && take_tensor (t, &s, name, json_node_get_object (node), packed[a], taken[a],
                                  error);
        }
      shard_clear (&s);
    }
  for (gsize a = 0; ok && a < n_arenas; a++)
    for (gsize i = 0, pos = 0; ok && i < t->n_blocks; pos += t->blocks[i]->len, i++)
      for (gsize k = pos; ok && k < pos + t->blocks[i]->len; k++)
        if (!taken[a][k])
          ok = bad (error, dir, "%s %s: element %" G_GSIZE_FORMAT " is in no shard",
                    a == 0 ? "parameter block" : "optimizer state of block",
                    t->blocks[i]->name, k - pos + t->blocks[i]->offset);
  /* everything checked: now change the table */
  for (gsize a = 0; ok && a < n_arenas; a++)
    ok = ps_dense_table_transfer (t, a == 0 ? ks_model_parameters (t->model) : state[a - 1],
                                  packed[a], FALSE, error);
  if (ok)
    {
      *opt_step = best_opt_step;
      ks_model_parameters_changed (t->model);
    }
  for (gsize a = 0; a < n_arenas; a++)
    {
      g_free (packed[a]);
      g_free (taken[a]);
    }
  g_free (packed);
  g_free (taken);
  return ok;
}
