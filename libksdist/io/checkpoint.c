/* Checkpoints read by checking everything before changing anything (checkpoint.h). */
#include "checkpoint-private.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

G_DEFINE_QUARK (ks-checkpoint-error-quark, ks_checkpoint_error)

static void
entry_clear (gpointer p)
{
  g_free (((Entry *) p)->name);
}

/* The parameters (with `params_too`) and the optimizer's state (unless `optimizer` is NULL)
 * of a checkpoint, in a fixed order; the parameters named in `skip` (NULL-terminated, may
 * be NULL) and their state left out. */
GArray *
ks_checkpoint_entries (KsModel *model, gboolean params_too, KsOptimizer *optimizer,
            const char *const *skip, gint64 **step, GError **error)
{
  KsArena *params = ks_model_parameters (model);
  GArray *entries = g_array_new (FALSE, TRUE, sizeof (Entry));
  KsArena **state = NULL;
  gsize n_state = 0;

  g_array_set_clear_func (entries, entry_clear);
  if (params == NULL)
    {
      g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_MISMATCH,
                   "the model is not initialised: run ks_model_init first");
      g_array_unref (entries);
      return NULL;
    }
  if (optimizer != NULL && !ks_optimizer_state (optimizer, &state, &n_state, step, error))
    {
      g_array_unref (entries);
      return NULL;
    }
  for (gsize a = params_too ? 0 : 1; a <= n_state; a++)
    for (gsize i = 0; i < ks_arena_count (params); i++)
      {
        const char *name;
        Entry e;
        const KsTensor *t = ks_arena_tensor_at (a == 0 ? params : state[a - 1], i, &name, NULL);
        if (skip != NULL && g_strv_contains (skip, name))
          continue;
        e.name = a == 0 ? g_strdup (name) : g_strdup_printf ("optim.%" G_GSIZE_FORMAT ".%s", a - 1,
                                                             name);
        e.tensor = t;
        g_array_append_val (entries, e);
      }
  return entries;
}

/* ---- reading ---- */

#define corrupt ks_checkpoint_corrupt

static char *
shape_text (JsonArray *shape)
{
  GString *s = g_string_new ("[");
  for (guint i = 0; shape != NULL && i < json_array_get_length (shape); i++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, i ? ", " : "",
                            json_array_get_int_element (shape, i));
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

/* Checks that the file's tensor `e` fits the model (the layout was checked on opening);
 * sets *at to its bytes. */
static gboolean
check_entry (const char *file, JsonObject *header, const Entry *e, const guint8 *data,
             const guint8 **at, GError **error)
{
  JsonNode *node = json_object_get_member (header, e->name);
  JsonObject *t = node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
  g_autofree char *want = ks_tensor_shape_string (e->tensor);
  g_autofree char *got = NULL;

  if (t == NULL)
    return corrupt (error, KS_CHECKPOINT_ERROR_MISMATCH, file,
                    "no tensor '%s', which the model has (shape %s)", e->name, want);
  got = shape_text (json_object_get_array_member (t, "shape"));
  if (strcmp (json_object_get_string_member (t, "dtype"), "F32") != 0)
    return corrupt (error, KS_CHECKPOINT_ERROR_MISMATCH, file, "tensor '%s' is not F32", e->name);
  if (strcmp (got, want) != 0)
    return corrupt (error, KS_CHECKPOINT_ERROR_MISMATCH, file,
                    "tensor '%s' has shape %s; the model's is %s", e->name, got, want);
  *at = data + json_array_get_int_element (json_object_get_array_member (t, "data_offsets"), 0);
  return TRUE;
}

/* The checksum of version 2: the file's seal. */
static gboolean
check_digest (const char *file, const char *bytes, gsize len, JsonObject *meta, GError **error)
{
  const char *want = json_object_get_string_member_with_default (meta, SHA_KEY, "");
  if (!ks_seal_matches (bytes, len, want))
    return corrupt (error, KS_CHECKPOINT_ERROR_CORRUPT, file,
                    "the file does not match its SHA-256: it is damaged, truncated or edited");
  return TRUE;
}

/* The checksum of version 1: the data only. */
static gboolean
check_old_digest (const char *file, const char *bytes, guint64 header_len, gsize len,
                  JsonObject *meta, GError **error)
{
  g_autoptr (GChecksum) sha = g_checksum_new (G_CHECKSUM_SHA256);
  g_checksum_update (sha, (const guint8 *) bytes + 8 + header_len, len - 8 - header_len);
  if (g_strcmp0 (g_checksum_get_string (sha),
                 json_object_get_string_member_with_default (meta, OLD_SHA_KEY, "")) != 0)
    return corrupt (error, KS_CHECKPOINT_ERROR_CORRUPT, file,
                    "the data does not match its SHA-256: the file is damaged or truncated");
  g_warning ("%s: written by an older ksdist (checkpoint format 1), whose checksum does not "
             "cover the header; a new save writes format " CHECKPOINT_VERSION, file);
  return TRUE;
}

/* Reads `file` and checks all of it: a regular file, safetensors by the rules, ours, of a
 * version this reads, matching its checksum. */
static gboolean
open_checkpoint (const char *file, char **bytes, gsize *len, JsonParser *parser,
                 guint64 *header_len, JsonObject **header, JsonObject **meta, GError **error)
{
  g_autoptr (GError) local = NULL;
  GStatBuf st;

  /* a FIFO or a device would block or never end */
  if (g_stat (file, &st) != 0)
    return corrupt (error, KS_CHECKPOINT_ERROR_IO, file, "%s", g_strerror (errno));
  if (!S_ISREG (st.st_mode))
    return corrupt (error, KS_CHECKPOINT_ERROR_IO, file, "not a regular file");
  if (!g_file_get_contents (file, bytes, len, &local))
    return corrupt (error, KS_CHECKPOINT_ERROR_IO, file, "%s", local->message);
  if (!ks_safetensors_parse (file, *bytes, *len, parser, header_len, header, error))
    return FALSE;
  *meta = json_object_has_member (*header, "__metadata__")
              ? json_object_get_object_member (*header, "__metadata__") : NULL;
  if (*meta == NULL || g_strcmp0 (json_object_get_string_member_with_default (*meta, "format", ""),
                                  CHECKPOINT_FORMAT) != 0)
    return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, file,
                    "not a ksdist checkpoint (no __metadata__ format \"" CHECKPOINT_FORMAT "\")");
  const char *version = json_object_get_string_member_with_default (*meta, "version", "?");
  if (strcmp (version, CHECKPOINT_VERSION) == 0)
    return check_digest (file, *bytes, *len, *meta, error);
  if (strcmp (version, "1") == 0)
    return check_old_digest (file, *bytes, *header_len, *len, *meta, error);
  return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, file,
                  "checkpoint format version %s; this ksdist reads versions 1 and "
                  CHECKPOINT_VERSION, version);
}

/* Metadata `key` as an integer in [min, max]; `fallback` when absent (-1: required). */
static gboolean
meta_number (const char *file, JsonObject *meta, const char *key, gint64 min, gint64 max,
             gint64 fallback, gint64 *out, GError **error)
{
  const char *text = json_object_get_string_member_with_default (meta, key, NULL);
  if (text == NULL && fallback >= 0)
    return *out = fallback, TRUE;
  if (text != NULL && g_ascii_string_to_signed (text, 10, min, max, out, NULL))
    return TRUE;
  return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, file,
                  "metadata '%s' is %s%s%s, not an integer in [%" G_GINT64_FORMAT ", %"
                  G_GINT64_FORMAT "]", key, text ? "'" : "missing", text ? text : "",
                  text ? "'" : "", min, max);
}

/* Whether the run that saved the checkpoint trained with `line` ("amp.dtype = fp16") in
 * its settings (the metadata "config" of checkpoints from the trainer). */
static gboolean
saved_with (JsonObject *meta, const char *line)
{
  const char *config = json_object_get_string_member_with_default (meta, "config", NULL);
  g_auto (GStrv) lines = g_strsplit (config != NULL ? config : "", "\n", -1);
  return g_strv_contains ((const char *const *) lines, line);
}

/* The saved loss scale, checked as the config checks the settings it comes from ([amp]
 * initial_scale, growth_interval); *found FALSE when the checkpoint has none or the model
 * does not scale its loss (a run resumed with other [amp] settings keeps its own). */
static gboolean
read_loss_scale (const char *file, JsonObject *meta, KsModel *model, KsLossScale *ls,
                 gboolean *found, GError **error)
{
  const char *text = json_object_get_string_member_with_default (meta, "loss_scale", NULL);
  const KsKeyDesc *scale = ks_core_key ("amp", "initial_scale");
  const KsKeyDesc *interval = ks_core_key ("amp", "growth_interval");
  char *end = NULL;

  *found = FALSE;
  if (!ks_model_loss_scale (model, ls))
    return TRUE;
  /* an fp16 run always saves its scale: without it the run would silently start over
   * from [amp] initial_scale */
  if (text == NULL && saved_with (meta, "amp.dtype = fp16"))
    return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, file,
                    "has no metadata 'loss_scale', though its run trained with [amp] dtype = "
                    "fp16, which saves it: the file was edited; resume from another checkpoint");
  if (text == NULL)
    return TRUE;
  ls->scale = g_ascii_strtod (text, &end);
  if (end == text || *end != '\0' || !(ls->scale >= scale->min) || ls->scale > G_MAXFLOAT)
    {
      g_autofree char *shown = ks_printable (text, 64);
      return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, file,
                      "metadata 'loss_scale' is '%s', not a number in [%g, %g] (the range of "
                      "[amp] initial_scale)", shown, scale->min, (double) G_MAXFLOAT);
    }
  *found = TRUE;
  /* the good steps count toward growth_interval and restart there */
  return meta_number (file, meta, "loss_scale_good_steps", 0, (gint64) interval->max - 1, -1,
                      &ls->good_steps, error)
         && meta_number (file, meta, "loss_scale_skipped", 0, MAX_STEP, -1, &ls->skipped,
                         error);
}

static GHashTable *
metadata_table (JsonObject *meta)
{
  GHashTable *table = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_autoptr (GList) names = json_object_get_members (meta);
  for (GList *n = names; n != NULL; n = n->next)
    g_hash_table_insert (table, g_strdup (n->data),
                         g_strdup (json_object_get_string_member_with_default (meta, n->data, "")));
  return table;
}

/* One file of a checkpoint, read and checked whole. */
typedef struct {
  char *file;
  char *bytes;
  gsize len;
  JsonParser *parser;
  guint64 header_len;
  JsonObject *header, *meta;
} Part;

static void
part_free (gpointer p)
{
  Part *part = p;
  g_free (part->file);
  g_free (part->bytes);
  g_clear_object (&part->parser);
  g_free (part);
}

static const char *
save_id (Part *part)
{
  return json_object_get_string_member_with_default (part->meta, SAVE_KEY, NULL);
}

static Part *
open_part (const char *dir, const char *name, GError **error)
{
  Part *part = g_new0 (Part, 1);
  part->file = g_build_filename (dir, name, NULL);
  part->parser = json_parser_new ();
  if (!open_checkpoint (part->file, &part->bytes, &part->len, part->parser, &part->header_len,
                        &part->header, &part->meta, error))
    {
      part_free (part);
      return NULL;
    }
  return part;
}

/* The number of parts whose layout the file name `name` belongs to: 1 for
 * model.safetensors and optimizer.safetensors, n for stage-<s>-of-<n>.safetensors and its
 * optimizer's file; 0 for a name that is none of a checkpoint's. */
static int
parts_of_name (const char *name)
{
  const char *weights = g_str_has_prefix (name, OPTIM_PREFIX PART_PREFIX)
                            ? name + strlen (OPTIM_PREFIX) : name;
  int part, parts;

  if (strcmp (name, FILE_NAME) == 0 || strcmp (name, OPTIM_FILE) == 0)
    return 1;
  if (sscanf (weights, PART_PREFIX "%4d-of-%4d", &part, &parts) != 2 || parts < 2
      || parts > MAX_PARTS || part < 0 || part >= parts)
    return 0;
  g_autofree char *exact = ks_checkpoint_part_file (part, parts);
  return strcmp (weights, exact) == 0 ? parts : 0;
}

/* Two files of one checkpoint directory that are not of one save. */
static gboolean
mixed (GError **error, const char *a, const char *b)
{
  g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_CORRUPT,
               "%s and %s are files of two different saves in one checkpoint directory: keep "
               "one save's files only (remove the others, or restore the directory whole from "
               "the run that saved it)", a, b);
  return FALSE;
}

/* Weights files first, then by name: the message names the same two files every time. */
static gint
weights_first (gconstpointer a, gconstpointer b)
{
  const char *x = *(const char *const *) a, *y = *(const char *const *) b;
  int ox = g_str_has_prefix (x, OPTIM_PREFIX), oy = g_str_has_prefix (y, OPTIM_PREFIX);
  return ox != oy ? ox - oy : strcmp (x, y);
}

/* How many parts the checkpoint `path` has, from its file names (1 when it has none); a
 * whole checkpoint's file beside a pipeline's parts, or parts of two counts, are refused. */
static gboolean
count_parts (const char *path, int *n, GError **error)
{
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GDir) d = g_dir_open (path, 0, NULL);
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    if (parts_of_name (name) > 0)
      g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, weights_first);
  *n = names->len > 0 ? parts_of_name (g_ptr_array_index (names, 0)) : 1;
  for (guint i = 1; i < names->len; i++)
    if (parts_of_name (g_ptr_array_index (names, i)) != *n)
      {
        g_autofree char *a = g_build_filename (path, g_ptr_array_index (names, 0), NULL);
        g_autofree char *b = g_build_filename (path, g_ptr_array_index (names, i), NULL);
        return mixed (error, a, b);
      }
  return TRUE;
}

/* The files of the checkpoint directory `path`, read and checked: model.safetensors, or
 * a pipeline's stage-<s>-of-<n>.safetensors, all n of them of one save. */
static GPtrArray *
open_parts (const char *path, GError **error)
{
  g_autoptr (GPtrArray) parts = g_ptr_array_new_with_free_func (part_free);
  int n;
  Part *part;

  if (!count_parts (path, &n, error))
    return NULL;
  for (int i = 0; i < n; i++)
    {
      g_autofree char *file = ks_checkpoint_part_file (i, n);
      gint64 index, count;
      GError *local = NULL;
      if ((part = open_part (path, file, &local)) == NULL)
        {
          if (n > 1 && g_error_matches (local, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO))
            g_prefix_error (&local, "%s is a pipeline's checkpoint of %d stages, but part %d "
                            "cannot be read: ", path, n, i);
          g_propagate_error (error, local);
          return NULL;
        }
      g_ptr_array_add (parts, part);
      if (n == 1)
        break;
      Part *first = g_ptr_array_index (parts, 0);
      if (!meta_number (part->file, part->meta, "part", i, i, -1, &index, error)
          || !meta_number (part->file, part->meta, "parts", n, n, -1, &count, error))
        return NULL;
      /* the step too: parts written before they named their save */
      if (g_strcmp0 (save_id (part), save_id (first)) != 0
          || g_strcmp0 (json_object_get_string_member_with_default (part->meta, "step", NULL),
                        json_object_get_string_member_with_default (first->meta, "step", NULL))
                 != 0)
        {
          mixed (error, first->file, part->file);
          return NULL;
        }
    }
  if (n > 1 && save_id (g_ptr_array_index (parts, 0)) == NULL)
    g_warning ("%s: written by an older ksdist, whose pipeline parts do not name their save: "
               "a part copied from another save of the same step would not be noticed; a new "
               "save names it", path);
  return g_steal_pointer (&parts);
}

/* The optimizer files beside the weights `parts` of `path`, read and checked, each
 * naming its weights file's seal; an empty array when there are none (a checkpoint
 * saved without an optimizer, or one before the split, whose weights files hold it). */
static GPtrArray *
open_optim_parts (const char *path, GPtrArray *parts, GError **error)
{
  g_autoptr (GPtrArray) optim = g_ptr_array_new_with_free_func (part_free);
  int n = parts->len;

  for (int i = 0; i < n; i++)
    {
      g_autofree char *name = ks_checkpoint_optim_file (i, n);
      g_autofree char *file = g_build_filename (path, name, NULL);
      Part *weights = g_ptr_array_index (parts, i), *part;
      GError *local = NULL;

      if (i == 0 && !g_file_test (file, G_FILE_TEST_EXISTS))
        return g_steal_pointer (&optim);
      if ((part = open_part (path, name, &local)) == NULL)
        {
          if (g_error_matches (local, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO))
            g_prefix_error (&local, "%s: the optimizer's state of part %d of %d cannot be read: ",
                            path, i, n);
          g_propagate_error (error, local);
          return NULL;
        }
      g_ptr_array_add (optim, part);
      if (g_strcmp0 (json_object_get_string_member_with_default (part->meta, MODEL_SEAL_KEY, ""),
                     json_object_get_string_member_with_default (weights->meta, SHA_KEY, "-"))
          != 0)
        {
          g_autofree char *base = g_path_get_basename (weights->file);
          corrupt (error, KS_CHECKPOINT_ERROR_MISMATCH, part->file,
                   "its " MODEL_SEAL_KEY " is not the SHA-256 of %s: the optimizer's state and "
                   "the weights are of different saves (copy the whole checkpoint directory)",
                   base);
          return NULL;
        }
    }
  return g_steal_pointer (&optim);
}

void
ks_saved_tensor_free (KsSavedTensor *t)
{
  if (t == NULL)
    return;
  g_free (t->name);
  g_free (t->data);
  g_free (t);
}

static int
by_offset_in (gconstpointer a, gconstpointer b, gpointer header)
{
  JsonObject *h = header;
  gint64 x = json_array_get_int_element (
      json_object_get_array_member (json_object_get_object_member (h, *(const char *const *) a),
                                    "data_offsets"), 0);
  gint64 y = json_array_get_int_element (
      json_object_get_array_member (json_object_get_object_member (h, *(const char *const *) b),
                                    "data_offsets"), 0);
  return x < y ? -1 : x > y;
}

/* The F32 tensors of one checked safetensors file (its header parsed), in file order,
 * appended to `tensors` unless `seen` has their name; optimizer state ("optim.") left
 * out. */
gboolean
ks_saved_tensors_append (const char *file, const char *bytes, guint64 header_len,
                         JsonObject *header, GHashTable *seen, GPtrArray *tensors,
                         GError **error)
{
  g_autoptr (GList) members = json_object_get_members (header);
  g_autoptr (GPtrArray) names = g_ptr_array_new ();
  for (GList *m = members; m != NULL; m = m->next)
    if (strcmp (m->data, "__metadata__") != 0)
      g_ptr_array_add (names, m->data);
  g_ptr_array_sort_with_data (names, by_offset_in, header);
  for (guint i = 0; i < names->len; i++)
    {
      const char *name = g_ptr_array_index (names, i);
      JsonObject *t = json_object_get_object_member (header, name);
      JsonArray *shape = json_object_get_array_member (t, "shape");
      KsSavedTensor *out;
      /* a shared one is saved once; the optimizer's state of a checkpoint from before
       * optimizer.safetensors is not a weight */
      if (g_hash_table_contains (seen, name) || g_str_has_prefix (name, "optim."))
        continue;
      /* PyTorch's batch norm counts its batches in an int64 ksdist has no use for */
      if (g_str_has_suffix (name, ".num_batches_tracked"))
        continue;
      if (strcmp (json_object_get_string_member (t, "dtype"), "F32") != 0
          || json_array_get_length (shape) > KS_TENSOR_MAX_DIMS)
        return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, file,
                        "tensor '%s' is not F32 of at most %d dimensions", name,
                        KS_TENSOR_MAX_DIMS);
      out = g_new0 (KsSavedTensor, 1);
      out->name = g_strdup (name);
      out->ndim = json_array_get_length (shape);
      out->numel = 1;
      for (int d = 0; d < out->ndim; d++)
        out->numel *= out->shape[d] = json_array_get_int_element (shape, d);
      gint64 begin = json_array_get_int_element (json_object_get_array_member (t, "data_offsets"),
                                                 0);
      out->data = g_memdup2 (bytes + 8 + header_len + begin, out->numel * sizeof (float));
      g_ptr_array_add (tensors, out);
      g_hash_table_add (seen, out->name);
    }
  return TRUE;
}

GPtrArray *
ks_checkpoint_read_tensors (const char *path, GError **error)
{
  g_autoptr (GPtrArray) parts = open_parts (path, error);
  g_autoptr (GPtrArray) tensors = g_ptr_array_new_with_free_func ((GDestroyNotify) ks_saved_tensor_free);
  g_autoptr (GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);

  if (parts == NULL)
    return NULL;
  for (guint p = 0; p < parts->len; p++)
    {
      Part *part = g_ptr_array_index (parts, p);
      if (!ks_saved_tensors_append (part->file, part->bytes, part->header_len, part->header,
                                    seen, tensors, error))
        return NULL;
    }
  return g_steal_pointer (&tensors);
}

GHashTable *
ks_checkpoint_metadata (const char *path, GError **error)
{
  g_autoptr (GPtrArray) parts = open_parts (path, error);
  if (parts == NULL)
    return NULL;
  return metadata_table (((Part *) g_ptr_array_index (parts, 0))->meta);
}

/* Checks that the first of `parts` holding the tensor `e` (the first part when none
 * does) fits the model; sets *at to its bytes. */
static gboolean
find_entry (const char *path, GPtrArray *parts, const Entry *e, const guint8 **at,
            GError **error)
{
  Part *from = g_ptr_array_index (parts, 0);
  for (guint p = 0; p < parts->len; p++)
    if (json_object_has_member (((Part *) g_ptr_array_index (parts, p))->header, e->name))
      {
        from = g_ptr_array_index (parts, p);
        break;
      }
  return check_entry (parts->len > 1 ? path : from->file, from->header, e,
                      (const guint8 *) from->bytes + 8 + from->header_len, at, error);
}

/* A checkpoint-N directory holds step N: another step inside would resume at the wrong
 * place and be reported under a directory that does not exist. */
static gboolean
step_matches_name (const char *path, const char *file, gint64 saved_step, GError **error)
{
  g_autofree char *base = g_path_get_basename (path);
  gint64 named;

  if (!g_str_has_prefix (base, PREFIX)
      || !g_ascii_string_to_signed (base + strlen (PREFIX), 10, 0, G_MAXINT64, &named, NULL)
      || named == saved_step)
    return TRUE;
  return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, file,
                  "metadata 'step' is %" G_GINT64_FORMAT ", but the directory is %s: the file "
                  "was edited or moved; resume from another checkpoint", saved_step, base);
}

/* The numbers of a step's checkpoint against each other, as the writer makes them: the
 * optimizer's file is of the weights' step, its optimizer took one step for each step
 * but those float16's loss scaling skipped, and rng_state counts at most
 * MAX_RUNS_PER_STEP runs a step. (A file re-sealed after an edit passes its checksum;
 * these catch it.) `optim` is NULL without an optimizer. */
static gboolean
saved_numbers_agree (Part *model, Part *optim, guint64 rng_state,
                     gint64 step, gint64 opt_step, GError **error)
{
  gint64 skipped = 0, optim_step = step;

  if (rng_state > (guint64) step * MAX_RUNS_PER_STEP)
    return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, model->file,
                    "metadata 'rng_state' is %" G_GUINT64_FORMAT ", more than step %"
                    G_GINT64_FORMAT " can reach (%d dropout draws a step at most): the file "
                    "was edited; resume from another checkpoint", rng_state, step,
                    MAX_RUNS_PER_STEP);
  if (optim == NULL)
    return TRUE;
  if (!meta_number (model->file, model->meta, "loss_scale_skipped", 0, MAX_STEP, 0, &skipped,
                    error)
      || (optim != model
          && !meta_number (optim->file, optim->meta, "step", 0, MAX_STEP, -1, &optim_step,
                           error)))
    return FALSE;
  if (optim_step != step)
    return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, optim->file,
                    "metadata 'step' is %" G_GINT64_FORMAT ", but the weights beside it (%s) "
                    "are of step %" G_GINT64_FORMAT ": the files are of two saves; resume from "
                    "another checkpoint", optim_step, model->file, step);
  if (opt_step != step - skipped)
    return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, optim->file,
                    "metadata 'optimizer_step' is %" G_GINT64_FORMAT ", but the weights beside "
                    "it are of step %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT " of whose steps "
                    "float16's loss scaling skipped, so %" G_GINT64_FORMAT " optimizer steps: "
                    "the file was edited; resume from another checkpoint",
                    opt_step, step, skipped, step - skipped);
  return TRUE;
}

gboolean
ks_checkpoint_load (const char *path, KsModel *model, KsOptimizer *optimizer, gint64 *step,
                    GHashTable **metadata, GError **error)
{
  g_autoptr (GPtrArray) parts = open_parts (path, error);
  g_autoptr (GPtrArray) optim = NULL;
  g_autoptr (GArray) params = NULL, state = NULL;
  g_autofree const guint8 **sources = NULL;
  gint64 *opt_step = NULL;

  if (parts == NULL)
    return FALSE;
  /* the metadata of part 0 (a pipeline's stages saved the same step and counters) */
  Part *first = g_ptr_array_index (parts, 0);
  const char *file = first->file;
  JsonObject *meta = first->meta;
  gint64 saved_opt_step = 0, saved_step = 0;
  guint64 rng_state;
  /* every number read, checked before anything changes */
  const char *rng_text = json_object_get_string_member_with_default (meta, "rng_state", "0");
  if (!g_ascii_string_to_unsigned (rng_text, 10, 0, G_MAXUINT64, &rng_state, NULL))
    return corrupt (error, KS_CHECKPOINT_ERROR_FORMAT, file,
                    "metadata 'rng_state' is '%s', not an unsigned 64-bit integer", rng_text);
  KsLossScale loss_scale;
  gboolean has_loss_scale;
  if ((step != NULL && !meta_number (file, meta, "step", 0, MAX_STEP, -1, &saved_step, error))
      || (step != NULL && !step_matches_name (path, file, saved_step, error))
      || !read_loss_scale (file, meta, model, &loss_scale, &has_loss_scale, error)
      || (optimizer != NULL && (optim = open_optim_parts (path, parts, error)) == NULL))
    return FALSE;
  /* the optimizer's own file, or the weights file of a checkpoint before the split */
  GPtrArray *state_parts = optim != NULL && optim->len > 0 ? optim : parts;
  Part *optim_first = g_ptr_array_index (state_parts, 0);
  if (optimizer != NULL && !json_object_has_member (optim_first->meta, "optimizer_step"))
    return corrupt (error, KS_CHECKPOINT_ERROR_MISMATCH, file,
                    "holds no optimizer state (no " OPTIM_FILE " beside it); load it without "
                    "an optimizer");
  if (optimizer != NULL
      && !meta_number (optim_first->file, optim_first->meta, "optimizer_step", 0, MAX_STEP, -1,
                       &saved_opt_step, error))
    return FALSE;
  if (step != NULL && !saved_numbers_agree (first, optimizer != NULL ? optim_first : NULL,
                                             rng_state, saved_step, saved_opt_step, error))
    return FALSE;

  if ((params = ks_checkpoint_entries (model, TRUE, NULL, NULL, NULL, error)) == NULL
      || (optimizer != NULL
          && (state = ks_checkpoint_entries (model, FALSE, optimizer, NULL, &opt_step, error)) == NULL))
    return FALSE;
  /* each tensor from the first part holding it (a shared one is saved once) */
  guint n_state = state != NULL ? state->len : 0;
  sources = g_new (const guint8 *, params->len + n_state);
  for (guint i = 0; i < params->len; i++)
    if (!find_entry (path, parts, &g_array_index (params, Entry, i), &sources[i], error))
      return FALSE;
  for (guint i = 0; i < n_state; i++)
    if (!find_entry (path, state_parts, &g_array_index (state, Entry, i),
                     &sources[params->len + i], error))
      return FALSE;

  /* everything checked: now change the model */
  for (guint i = 0; i < params->len + n_state; i++)
    {
      const KsTensor *t = i < params->len ? g_array_index (params, Entry, i).tensor
                                           : g_array_index (state, Entry, i - params->len).tensor;
      if (!ks_tensor_from_host ((KsTensor *) t, sources[i], ks_tensor_nbytes (t), error))
        return FALSE;
    }
  ks_model_parameters_changed (model);
  /* absent from checkpoints older than dropout: the counter starts at 0 */
  ks_model_set_rng_state (model, rng_state);
  if (has_loss_scale && !ks_model_set_loss_scale (model, &loss_scale, error))
    return FALSE; /* cannot fail: checked above */
  if (opt_step != NULL)
    *opt_step = saved_opt_step;
  if (step != NULL)
    *step = saved_step;
  if (metadata != NULL)
    {
      *metadata = metadata_table (meta);
      if (optimizer != NULL) /* what the optimizer's file says of it */
        for (const char *const *key = (const char *const[]) { "optimizer", "optimizer_step", NULL };
             *key != NULL; key++)
          g_hash_table_insert (*metadata, g_strdup (*key),
                               g_strdup (json_object_get_string_member_with_default (
                                   optim_first->meta, *key, "")));
    }
  return TRUE;
}
