/* Weights from elsewhere: any safetensors file read whole (a PyTorch state dict, say),
 * PyTorch's names for ksdist's parameters (what `ksdist export --torch` writes), and a
 * model's parameters set from such a file ([model] init_from). */
#include "ks-private.h"
#include "checkpoint-private.h"

#include <stdio.h>
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

char *
ks_torch_name (const char *name, KsTorchNameFunc rename, gboolean *transpose)
{
  static const char *const suffixes[][2] = {
    { ".w", ".weight" }, { ".b", ".bias" }, { ".gamma", ".weight" }, { ".beta", ".bias" },
  };
  g_autofree char *base = g_strdup (name);
  const char *suffix = "";

  *transpose = FALSE;
  for (guint i = 0; i < G_N_ELEMENTS (suffixes); i++)
    if (g_str_has_suffix (name, suffixes[i][0]))
      {
        base[strlen (name) - strlen (suffixes[i][0])] = '\0';
        suffix = suffixes[i][1];
        *transpose = i == 0;
        break;
      }
  return rename != NULL ? rename (base, suffix) : g_strconcat (base, suffix, NULL);
}

void
ks_torch_layout (const char *layouts, const char *name, gboolean transpose, int ndim,
                 const gint64 *shape, KsTorchLayout *out)
{
  *out = (KsTorchLayout) { 0 };
  if (ndim != 2 || !transpose)
    return;
  *out = (KsTorchLayout) { 1, 1, shape[0], shape[1], 2, { shape[1], shape[0] } };
  gsize len = strlen (name);
  for (const char *line = layouts; line != NULL && *line != '\0';
       line = strchr (line, '\n') != NULL ? strchr (line, '\n') + 1 : NULL)
    {
      gint64 a, b, c;
      int torch_ndim;
      if (strncmp (line, name, len) != 0 || line[len] != ' '
          || sscanf (line + len, " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT
                     " %d", &a, &b, &c, &torch_ndim) != 4
          || a < 1 || b < 1 || c < 1 || a * b * c != shape[0])
        continue;
      out->a = a, out->b = b, out->c = c;
      if (torch_ndim == 4)
        *out = (KsTorchLayout) { a, b, c, shape[1], 4, { shape[1], c, a, b } };
      return;
    }
}

void
ks_torch_permute (const KsTorchLayout *l, const float *src, float *dst, gboolean to_torch)
{
  /* ksdist's row (ia * b + ib) * c + ic of column o is PyTorch's o, (ic * a + ia) * b + ib */
  gint64 rows = l->a * l->b * l->c;
  for (gint64 ia = 0; ia < l->a; ia++)
    for (gint64 ib = 0; ib < l->b; ib++)
      for (gint64 ic = 0; ic < l->c; ic++)
        {
          gint64 ks = (ia * l->b + ib) * l->c + ic, pt = (ic * l->a + ia) * l->b + ib;
          for (gint64 o = 0; o < l->out; o++)
            if (to_torch)
              dst[o * rows + pt] = src[ks * l->out + o];
            else
              dst[ks * l->out + o] = src[o * rows + pt];
        }
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
ks_model_load_weights (KsModel *model, GPtrArray *tensors, const char *file,
                       KsTorchNameFunc rename, GHashTable *used, GError **error)
{
  KsArena *params = ks_model_parameters (model);
  gsize n = ks_arena_count (params);
  g_autofree const KsSavedTensor **from = g_new0 (const KsSavedTensor *, n);
  g_autofree KsTorchLayout *layout = g_new0 (KsTorchLayout, n);
  g_autofree char *layouts = ks_model_torch_layouts (model);

  /* every tensor found and checked before any parameter changes */
  for (gsize i = 0; i < n; i++)
    {
      const char *name;
      gboolean transpose;
      const KsTensor *p = ks_arena_tensor_at (params, i, &name, NULL);
      g_autofree char *torch = ks_torch_name (name, rename, &transpose);
      const gint64 *want = p->shape;
      int want_ndim = p->ndim;
      if ((from[i] = find_tensor (tensors, name)) == NULL
          && (from[i] = find_tensor (tensors, torch)) == NULL)
        return corrupt (error, KS_CHECKPOINT_ERROR_MISMATCH, file,
                        "holds no tensor '%s' (nor '%s', as PyTorch names it) for the "
                        "parameter %s of this model", name, torch, name);
      if (from[i] != find_tensor (tensors, name)) /* PyTorch's layout */
        ks_torch_layout (layouts, name, transpose, p->ndim, p->shape, &layout[i]);
      if (layout[i].ndim > 0)
        want = layout[i].shape, want_ndim = layout[i].ndim;
      if (from[i]->ndim != want_ndim
          || memcmp (from[i]->shape, want, want_ndim * sizeof (gint64)) != 0)
        {
          g_autofree char *have = shape_text (from[i]->ndim, from[i]->shape);
          g_autofree char *need = shape_text (want_ndim, want);
          return corrupt (error, KS_CHECKPOINT_ERROR_MISMATCH, file,
                          "tensor '%s' is %s, but the parameter %s needs %s", from[i]->name,
                          have, name, need);
        }
    }
  for (gsize i = 0; i < n; i++)
    {
      const KsTensor *p = ks_arena_tensor_at (params, i, NULL, NULL);
      g_autofree float *turned = NULL;
      const float *data = from[i]->data;
      if (layout[i].ndim > 0)
        {
          turned = g_new (float, MAX (from[i]->numel, 1));
          ks_torch_permute (&layout[i], data, turned, FALSE);
          data = turned;
        }
      if (!ks_tensor_from_host ((KsTensor *) p, data, ks_tensor_nbytes (p), error))
        return FALSE;
      if (used != NULL)
        g_hash_table_add (used, from[i]->name);
    }
  ks_model_parameters_changed (model);
  return TRUE;
}
