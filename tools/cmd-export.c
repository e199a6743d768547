/* ksdist export --torch: a checkpoint's or export's weights as a PyTorch state dict in
 * safetensors: nn.Linear's [out, in] weights and the names PyTorch modules give them
 * (weight, bias; a GPT's after nanoGPT: transformer.h.0.attn.c_attn.weight, lm_head), so
 * torch (safetensors.torch.load_file, or any safetensors reader) loads it into a module
 * of the same shape with load_state_dict(strict=True). */
#include "cli.h"

#include <errno.h>
#include <json-glib/json-glib.h>
#include <string.h>

/* `tensors` renamed and laid out as PyTorch has them (`layouts`: the source's
 * ks_model_torch_layouts), written with `meta` to `output`. A batch norm's running
 * statistics come with the num_batches_tracked nn.BatchNorm2d also holds (the source's
 * step: float32 here, which load_state_dict copies into its int64). */
static gboolean
write_torch (const char *output, GPtrArray *tensors, GHashTable *meta, gboolean gpt,
             GError **error)
{
  const char *layouts = g_hash_table_lookup (meta, KS_TORCH_LAYOUT_KEY);
  const char *step_text = g_hash_table_lookup (meta, "step");
  g_autoptr (GArray) out = g_array_new (FALSE, TRUE, sizeof (KsSafetensor));
  g_autoptr (GPtrArray) owned = g_ptr_array_new_with_free_func (g_free);
  float step = step_text != NULL ? (float) g_ascii_strtod (step_text, NULL) : 0;
  for (guint i = 0; i < tensors->len; i++)
    {
      const KsSavedTensor *t = g_ptr_array_index (tensors, i);
      gboolean transpose;
      char *name = ks_torch_name (t->name, gpt ? ks_gpt_torch_name : NULL, &transpose);
      KsTorchLayout layout;
      KsSafetensor st = { name, t->ndim, { 0 }, t->numel, t->data };

      g_ptr_array_add (owned, name);
      memcpy (st.shape, t->shape, t->ndim * sizeof (gint64));
      ks_torch_layout (layouts, t->name, transpose, t->ndim, t->shape, &layout);
      if (layout.ndim > 0)
        {
          float *turned = g_new (float, MAX (t->numel, 1));
          ks_torch_permute (&layout, t->data, turned, TRUE);
          g_ptr_array_add (owned, turned);
          st.data = turned, st.ndim = layout.ndim;
          memcpy (st.shape, layout.shape, layout.ndim * sizeof (gint64));
        }
      g_array_append_val (out, st);
      if (g_str_has_suffix (t->name, ".running_var"))
        {
          char *count = g_strdup_printf ("%.*s.num_batches_tracked",
                                         (int) (strlen (t->name) - strlen (".running_var")),
                                         t->name);
          KsSafetensor tracked = { count, 0, { 0 }, 1, &step };
          g_ptr_array_add (owned, count);
          g_array_append_val (out, tracked);
        }
    }
  return ks_safetensors_write (output, (KsSafetensor *) out->data, out->len, meta, FALSE,
                               NULL, error);
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
    return ks_cli_checkpoint_fail (error);
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
