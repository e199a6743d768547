/* ksdist export --torch: a checkpoint's or export's weights as a PyTorch state dict in
 * safetensors: nn.Linear's [out, in] weights and the names PyTorch modules give them
 * (weight, bias; a GPT's after nanoGPT: transformer.h.0.attn.c_attn.weight, lm_head), so
 * torch (safetensors.torch.load_file, or any safetensors reader) loads it into a module
 * of the same shape with load_state_dict(strict=True). */
#include "cli.h"

#include <errno.h>
#include <json-glib/json-glib.h>
#include <string.h>

/* `tensors` renamed and transposed as PyTorch has them, written with `meta` to `output`. */
static gboolean
write_torch (const char *output, GPtrArray *tensors, GHashTable *meta, gboolean gpt,
             GError **error)
{
  g_autofree KsSafetensor *out = g_new0 (KsSafetensor, tensors->len + 1);
  g_autoptr (GPtrArray) owned = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i < tensors->len; i++)
    {
      const KsSavedTensor *t = g_ptr_array_index (tensors, i);
      gboolean transpose;
      char *name = ks_torch_name (t->name, gpt, &transpose);
      const float *data = t->data;

      g_ptr_array_add (owned, name);
      transpose = transpose && t->ndim == 2;
      if (transpose)
        {
          float *flipped = g_new (float, MAX (t->numel, 1));
          for (gint64 r = 0; r < t->shape[0]; r++)
            for (gint64 c = 0; c < t->shape[1]; c++)
              flipped[c * t->shape[0] + r] = t->data[r * t->shape[1] + c];
          g_ptr_array_add (owned, flipped);
          data = flipped;
        }
      out[i] = (KsSafetensor) { name, t->ndim, { 0 }, t->numel, data };
      for (int d = 0; d < t->ndim; d++)
        out[i].shape[d] = t->shape[transpose ? 1 - d : d];
    }
  return ks_safetensors_write (output, out, tensors->len, meta, FALSE, NULL, error);
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
  if (!write_torch (output, tensors, meta, gpt, &error))
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
