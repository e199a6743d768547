/* ksdist export --torch: a checkpoint's or export's weights as a PyTorch state dict in
 * safetensors: nn.Linear's [out, in] weights and the names PyTorch modules give them
 * (weight, bias; a GPT's after nanoGPT: transformer.h.0.attn.c_attn.weight, lm_head), so
 * torch (safetensors.torch.load_file, or any safetensors reader) loads it into a module
 * of the same shape with load_state_dict(strict=True). */
#include "cli.h"

#include <errno.h>
#include <json-glib/json-glib.h>
#include <string.h>

/* A GPT's layer names (gpt.c) and nanoGPT's. */
static const char *const gpt_names[][2] = {
  { "ln1", "ln_1" },           { "ln2", "ln_2" },         { "attn.qkv", "attn.c_attn" },
  { "attn.proj", "attn.c_proj" }, { "mlp.fc", "mlp.c_fc" }, { "mlp.proj", "mlp.c_proj" },
};

/* The PyTorch name of the ksdist parameter `name`; *transpose when it is a matmul's
 * [in, out] weight, which nn.Linear holds as [out, in]. */
static char *
torch_name (const char *name, gboolean gpt, gboolean *transpose)
{
  static const char *const suffixes[][2] = {
    { ".w", ".weight" }, { ".b", ".bias" }, { ".gamma", ".weight" }, { ".beta", ".bias" },
  };
  g_autofree char *base = g_strdup (name);
  const char *suffix = gpt && (strcmp (name, "wte") == 0 || strcmp (name, "wpe") == 0)
                           ? ".weight" : "";
  guint64 layer;

  *transpose = FALSE;
  for (guint i = 0; i < G_N_ELEMENTS (suffixes); i++)
    if (g_str_has_suffix (name, suffixes[i][0]))
      {
        base[strlen (name) - strlen (suffixes[i][0])] = '\0';
        suffix = suffixes[i][1];
        *transpose = i == 0;
        break;
      }
  if (!gpt)
    return g_strconcat (base, suffix, NULL);
  if (strcmp (base, "head") == 0)
    return g_strconcat ("lm_head", suffix, NULL);
  /* h<N>.<layer>: block N's */
  const char *dot = strchr (base, '.');
  g_autofree char *digits = dot != NULL && base[0] == 'h' ? g_strndup (base + 1, dot - base - 1)
                                                           : NULL;
  if (digits != NULL && g_ascii_string_to_unsigned (digits, 10, 0, G_MAXINT32, &layer, NULL))
    {
      const char *rest = dot + 1;
      for (guint i = 0; i < G_N_ELEMENTS (gpt_names); i++)
        if (strcmp (rest, gpt_names[i][0]) == 0)
          rest = gpt_names[i][1];
      return g_strdup_printf ("transformer.h.%" G_GUINT64_FORMAT ".%s%s", layer, rest, suffix);
    }
  return g_strconcat ("transformer.", base, suffix, NULL);
}

/* The safetensors file of `tensors` (renamed, transposed) with `meta`. */
static GBytes *
torch_file (GPtrArray *tensors, GHashTable *meta, gboolean gpt)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (GByteArray) data = g_byte_array_new ();
  GHashTableIter it;
  gpointer k, v;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "__metadata__");
  json_builder_begin_object (b);
  g_hash_table_iter_init (&it, meta);
  while (g_hash_table_iter_next (&it, &k, &v))
    {
      json_builder_set_member_name (b, k);
      json_builder_add_string_value (b, v);
    }
  json_builder_end_object (b);
  for (guint i = 0; i < tensors->len; i++)
    {
      const KsSavedTensor *t = g_ptr_array_index (tensors, i);
      gboolean transpose;
      g_autofree char *name = torch_name (t->name, gpt, &transpose);
      gsize at = data->len;

      transpose = transpose && t->ndim == 2;
      g_byte_array_set_size (data, at + t->numel * sizeof (float));
      float *out = (float *) (data->data + at);
      if (!transpose && t->numel > 0)
        memcpy (out, t->data, t->numel * sizeof (float));
      else
        for (gint64 r = 0; r < t->shape[0]; r++)
          for (gint64 c = 0; c < t->shape[1]; c++)
            out[c * t->shape[0] + r] = t->data[r * t->shape[1] + c];
      json_builder_set_member_name (b, name);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "dtype");
      json_builder_add_string_value (b, "F32");
      json_builder_set_member_name (b, "shape");
      json_builder_begin_array (b);
      for (int d = 0; d < t->ndim; d++)
        json_builder_add_int_value (b, t->shape[transpose ? 1 - d : d]);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "data_offsets");
      json_builder_begin_array (b);
      json_builder_add_int_value (b, at);
      json_builder_add_int_value (b, data->len);
      json_builder_end_array (b);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  g_autoptr (JsonNode) root = json_builder_get_root (b);
  g_autofree char *json = json_to_string (root, FALSE);
  /* an 8-byte little-endian length, the JSON padded with spaces to 8 bytes, the data */
  gsize padded = (strlen (json) + 7) / 8 * 8;
  guint64 len = GUINT64_TO_LE (padded);
  GByteArray *file = g_byte_array_new ();
  g_byte_array_append (file, (const guint8 *) &len, 8);
  g_byte_array_append (file, (const guint8 *) json, strlen (json));
  while (file->len < 8 + padded)
    g_byte_array_append (file, (const guint8 *) " ", 1);
  g_byte_array_append (file, data->data, data->len);
  return g_byte_array_free_to_bytes (file);
}

static int
run_export (int argc, char **argv)
{
  gboolean torch = FALSE;
  g_autofree char *output = NULL;
  GOptionEntry entries[] = {
    { "torch", 0, 0, G_OPTION_ARG_NONE, &torch,
      "PyTorch's layout and names ([out, in] weights; the only format so far)", NULL },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "The file to write", "FILE" },
    { NULL },
  };
  g_autoptr (GError) error = NULL;
  g_autofree char *path = NULL;

  if (!ks_cli_parse ("export", "CHECKPOINT|EXPORT", ks_cmd_export.summary, entries, &argc, &argv))
    return KS_EXIT_USAGE;
  if (argc != 2 || !torch || output == NULL)
    {
      ks_cli_error ("export: give --torch, one CHECKPOINT (a checkpoint-N directory, the "
                    "checkpoint_dir holding them, or an export_dir) and -o FILE.safetensors "
                    "(see ksdist help export)");
      return KS_EXIT_USAGE;
    }
  path = ks_cli_checkpoint_path (argv[1]);
  g_autoptr (GHashTable) source = ks_checkpoint_metadata (path, &error);
  g_autoptr (GPtrArray) tensors = source != NULL ? ks_checkpoint_read_tensors (path, &error)
                                                 : NULL;
  if (tensors == NULL)
    {
      ks_cli_error ("%s", error->message);
      return KS_EXIT_USAGE;
    }
  /* the source's metadata (config, GPT shape, vocabulary, step) without its own seal,
   * save and format; "pt" as PyTorch's safetensors files say */
  static const char *const dropped[] = { KS_SEAL_KEY, KS_CHECKPOINT_SAVE_KEY, "format",
                                         "version", "rng_state", KS_INFERENCE_GRAPH_KEY,
                                         NULL };
  g_autoptr (GHashTable) meta = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init (&it, source);
  while (g_hash_table_iter_next (&it, &k, &v))
    if (!g_strv_contains (dropped, k))
      g_hash_table_insert (meta, k, v);
  g_hash_table_insert (meta, "format", "pt");
  gboolean gpt = g_strcmp0 (g_hash_table_lookup (source, "model.type"), "gpt") == 0;
  g_autoptr (GBytes) bytes = torch_file (tensors, meta, gpt);
  gsize len;
  const char *contents = g_bytes_get_data (bytes, &len);
  if (!g_file_set_contents_full (output, contents, len,
                                 G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE,
                                 0644, &error))
    {
      ks_cli_error ("%s", error->message);
      return KS_EXIT_RUNTIME;
    }
  g_message ("%u tensors of %s in PyTorch's layout written to %s", tensors->len, path, output);
  return KS_EXIT_OK;
}

const KsCommand ks_cmd_export = {
  "export",
  "Write a checkpoint's or export's weights in PyTorch's layout (safetensors)",
  run_export,
};
