/* Weights from elsewhere: any safetensors file read whole (a PyTorch state dict, say),
 * PyTorch's names for ksdist's parameters (what `ksdist export --torch` writes), and a
 * model's parameters set from such a file ([model] init_from). */
#include "ks-private.h"
#include "checkpoint-private.h"

#include <string.h>

#define corrupt ks_checkpoint_corrupt

GPtrArray *
ks_safetensors_read (const char *path, GError **error)
{
  g_autofree char *bytes = NULL;
  gsize len;
  guint64 header_len;
  JsonObject *header;
  g_autoptr (GError) local = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GPtrArray) tensors = g_ptr_array_new_with_free_func ((GDestroyNotify) ks_saved_tensor_free);

  if (!g_file_get_contents (path, &bytes, &len, &local))
    {
      g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO, "%s", local->message);
      return NULL;
    }
  if (!ks_safetensors_parse (path, bytes, len, parser, &header_len, &header, error)
      || !ks_saved_tensors_append (path, bytes, header_len, header, seen, tensors, error))
    return NULL;
  return g_steal_pointer (&tensors);
}

/* A GPT's layer names (tasks/gpt.c) and nanoGPT's. */
static const char *const gpt_names[][2] = {
  { "ln1", "ln_1" },           { "ln2", "ln_2" },         { "attn.qkv", "attn.c_attn" },
  { "attn.proj", "attn.c_proj" }, { "mlp.fc", "mlp.c_fc" }, { "mlp.proj", "mlp.c_proj" },
};

char *
ks_torch_name (const char *name, gboolean gpt, gboolean *transpose)
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

static const KsSavedTensor *
find_tensor (GPtrArray *tensors, const char *name)
{
  for (guint i = 0; i < tensors->len; i++)
    {
      const KsSavedTensor *t = g_ptr_array_index (tensors, i);
      if (strcmp (t->name, name) == 0)
        return t;
    }
  return NULL;
}

static char *
shape_text (int ndim, const gint64 *shape)
{
  KsTensor t = { .ndim = ndim };
  memcpy (t.shape, shape, ndim * sizeof (gint64));
  return ks_tensor_shape_string (&t);
}

gboolean
ks_model_load_weights (KsModel *model, GPtrArray *tensors, const char *file, gboolean gpt,
                       GHashTable *used, GError **error)
{
  KsArena *params = ks_model_parameters (model);
  gsize n = ks_arena_count (params);
  g_autofree const KsSavedTensor **from = g_new0 (const KsSavedTensor *, n);
  g_autofree gboolean *flip = g_new0 (gboolean, n);

  /* every tensor found and checked before any parameter changes */
  for (gsize i = 0; i < n; i++)
    {
      const char *name;
      const KsTensor *p = ks_arena_tensor_at (params, i, &name, NULL);
      g_autofree char *torch = ks_torch_name (name, gpt, &flip[i]);
      flip[i] = flip[i] && p->ndim == 2;
      if ((from[i] = find_tensor (tensors, name)) != NULL)
        flip[i] = FALSE; /* ksdist's own layout */
      else if ((from[i] = find_tensor (tensors, torch)) == NULL)
        return corrupt (error, KS_CHECKPOINT_ERROR_MISMATCH, file,
                        "holds no tensor '%s' (nor '%s', as PyTorch names it) for the "
                        "parameter %s of this model", name, torch, name);
      gint64 want[KS_TENSOR_MAX_DIMS];
      for (int d = 0; d < p->ndim; d++)
        want[d] = p->shape[flip[i] ? 1 - d : d];
      if (from[i]->ndim != p->ndim
          || memcmp (from[i]->shape, want, p->ndim * sizeof (gint64)) != 0)
        {
          g_autofree char *have = shape_text (from[i]->ndim, from[i]->shape);
          g_autofree char *need = shape_text (p->ndim, want);
          return corrupt (error, KS_CHECKPOINT_ERROR_MISMATCH, file,
                          "tensor '%s' is %s, but the parameter %s needs %s", from[i]->name,
                          have, name, need);
        }
    }
  for (gsize i = 0; i < n; i++)
    {
      const KsTensor *p = ks_arena_tensor_at (params, i, NULL, NULL);
      g_autofree float *flipped = NULL;
      const float *data = from[i]->data;
      if (flip[i])
        {
          gint64 rows = from[i]->shape[0], cols = from[i]->shape[1];
          flipped = g_new (float, MAX (from[i]->numel, 1));
          for (gint64 r = 0; r < rows; r++)
            for (gint64 c = 0; c < cols; c++)
              flipped[c * rows + r] = data[r * cols + c];
          data = flipped;
        }
      if (!ks_tensor_from_host ((KsTensor *) p, data, ks_tensor_nbytes (p), error))
        return FALSE;
      if (used != NULL)
        g_hash_table_add (used, from[i]->name);
    }
  ks_model_parameters_changed (model);
  return TRUE;
}
