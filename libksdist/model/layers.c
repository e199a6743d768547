/* Layer lists (pipeline.h): building one in order, the facts a segmenter needs, and
 * parameters shared between layers. */
#include "model-private.h"

#include <ksdist/pipeline.h>

#include <string.h>

KsExpr *
ks_model_shared_parameter (KsModel *model, const char *name, int ndim, const gint64 *shape,
                           KsInit init, GError **error)
{
  KsExpr *p = ks_model_find (model, name);
  if (p == NULL)
    return ks_model_parameter (model, name, ndim, shape, init, error);
  if (p->op != OP_PARAMETER || p->ndim != ndim
      || memcmp (p->shape, shape, ndim * sizeof *shape) != 0)
    {
      g_autofree char *have = ks_expr_shape_string (p);
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "shared parameter '%s': the model already has a %s of that name shaped %s; "
                   "layers sharing a weight must ask for the same shape",
                   name, p->op == OP_PARAMETER ? "parameter" : "variable", have);
      return NULL;
    }
  return p;
}

/* Whether `names` (NULL-terminated, may be NULL) holds `name`. */
static gboolean
listed (const char *const *names, const char *name)
{
  for (; names != NULL && *names != NULL; names++)
    if (strcmp (*names, name) == 0)
      return TRUE;
  return FALSE;
}

/* Whether the layer just built stashed and popped all its lists say. */
static gboolean
skips_done (KsModel *model, const KsLayerDesc *layer, GError **error)
{
  for (const char *const *name = layer->stash; name != NULL && *name != NULL; name++)
    if (!g_hash_table_contains (model->skips, *name))
      return ks_invalid (error, "its stash list names '%s' but it did not stash it", *name);
  for (const char *const *name = layer->pop; name != NULL && *name != NULL; name++)
    if (g_hash_table_contains (model->skips, *name) && !listed (layer->stash, *name))
      return ks_invalid (error, "its pop list names '%s' but it did not pop it", *name);
  return TRUE;
}

KsExpr *
ks_layer_build (KsModel *model, const KsLayerDesc *layer, gsize index, KsExpr *x, GError **error)
{
  g_autoptr (GError) local = NULL;
  KsExpr *out;

  model->building = layer;
  out = layer->build (model, x, layer->args, &local);
  model->building = NULL;
  if (out != NULL && !skips_done (model, layer, &local))
    out = NULL;
  if (out == NULL)
    g_set_error (error, local != NULL ? local->domain : KS_COMPUTE_ERROR,
                 local != NULL ? local->code : KS_COMPUTE_ERROR_INVALID,
                 "layer %" G_GSIZE_FORMAT " (%s): %s", index, layer->name,
                 local != NULL ? local->message : "the builder returned nothing");
  return out;
}

gboolean
ks_layers_build (KsModel *model, const KsLayerDesc *layers, gsize n_layers, KsExpr **out,
                 GError **error)
{
  const gsize whole[] = { 0, n_layers };
  g_autofree KsSkipRoute *routes = NULL;
  gsize n_routes;
  KsExpr *x = NULL;

  if (!ks_skip_layout (layers, n_layers, whole, 1, &routes, &n_routes, error))
    return FALSE;
  for (gsize i = 0; i < n_layers; i++)
    if ((x = ks_layer_build (model, &layers[i], i, x, error)) == NULL)
      return FALSE;
  *out = x;
  return TRUE;
}

/* Builds the layers in order on `model`, noting where each one's expressions start
 * (first[n_layers]: where the next would); the last output, NULL on error. */
static KsExpr *
build_noting_ranges (KsModel *model, const KsLayerDesc *layers, gsize n_layers, guint *first,
                     GError **error)
{
  KsExpr *x = NULL;
  for (gsize i = 0; i < n_layers; i++)
    {
      first[i] = ks_model_n_exprs (model);
      if ((x = ks_layer_build (model, &layers[i], i, x, error)) == NULL)
        return NULL;
    }
  first[n_layers] = ks_model_n_exprs (model);
  return x;
}

gboolean
ks_layers_info (const KsLayerDesc *layers, gsize n_layers, KsLayerInfo *info, GError **error)
{
  g_autoptr (KsModel) model = ks_model_new (NULL); /* shapes only: nothing is allocated */
  g_autofree guint *first = g_new (guint, n_layers + 1);

  if (build_noting_ranges (model, layers, n_layers, first, error) == NULL)
    return FALSE;
  for (gsize i = 0; i < n_layers; i++)
    {
      info[i] = (KsLayerInfo) { layers[i].name, 0, 0 };
      for (guint id = first[i]; id < first[i + 1]; id++)
        {
          KsExpr *e = g_ptr_array_index (model->exprs, id);
          if (e->op == OP_PARAMETER)
            info[i].n_params += (gint64) e->numel;
        }
    }
  return TRUE;
}

/* ---- skip connections ---- */

gboolean
ks_layer_stash (KsModel *model, const char *name, KsExpr *value, GError **error)
{
  if (model->building == NULL || !listed (model->building->stash, name))
    return ks_invalid (error, "stashes '%s' but %s", name,
                       model->building != NULL ? "its stash list does not name it"
                                               : "no layer is being built");
  if (g_hash_table_contains (model->skips, name))
    return ks_invalid (error, "'%s' is stashed already and not popped yet", name);
  if (value->dtype != KS_DTYPE_FLOAT32)
    return ks_invalid (error, "'%s': only float32 values can be stashed", name);
  ks_skip_offer (model, name, value);
  return TRUE;
}

KsExpr *
ks_layer_pop (KsModel *model, const char *name, GError **error)
{
  KsExpr *value;
  if (model->building == NULL || !listed (model->building->pop, name))
    {
      ks_invalid (error, "pops '%s' but %s", name,
                  model->building != NULL ? "its pop list does not name it"
                                          : "no layer is being built");
      return NULL;
    }
  if ((value = ks_skip_take (model, name)) == NULL)
    ks_invalid (error, "pops '%s', which no earlier layer stashed", name);
  return value;
}

void
ks_skip_offer (KsModel *model, const char *name, KsExpr *value)
{
  g_hash_table_insert (model->skips, g_strdup (name), value);
}

KsExpr *
ks_skip_take (KsModel *model, const char *name)
{
  KsExpr *value = g_hash_table_lookup (model->skips, name);
  g_hash_table_remove (model->skips, name);
  return value;
}

static int
chunk_of (const gsize *boundaries, gsize parts, gsize layer)
{
  int g = 0;
  while ((gsize) g + 1 < parts && boundaries[g + 1] <= layer)
    g++;
  return g;
}

gboolean
ks_skip_layout (const KsLayerDesc *layers, gsize n_layers, const gsize *boundaries, gsize parts,
                KsSkipRoute **routes, gsize *n_routes, GError **error)
{
  g_autoptr (GArray) found = g_array_new (FALSE, FALSE, sizeof (KsSkipRoute));
  g_autoptr (GHashTable) open = g_hash_table_new (g_str_hash, g_str_equal); /* -> index+1 */

  *routes = NULL;
  *n_routes = 0;
  for (gsize l = 0; l < n_layers; l++)
    {
      /* a layer pops before it stashes: it may pass a name on */
      for (const char *const *name = layers[l].pop; name != NULL && *name != NULL; name++)
        {
          guint i = GPOINTER_TO_UINT (g_hash_table_lookup (open, *name));
          for (guint k = 0; i == 0 && k < found->len; k++)
            if (strcmp (g_array_index (found, KsSkipRoute, k).name, *name) == 0)
              return ks_invalid (error, "layer %" G_GSIZE_FORMAT " (%s) pops '%s', which layer "
                                 "%" G_GSIZE_FORMAT " pops already; each stash is popped once",
                                 l, layers[l].name, *name,
                                 g_array_index (found, KsSkipRoute, k).pop_layer);
          if (i == 0)
            return ks_invalid (error, "layer %" G_GSIZE_FORMAT " (%s) pops '%s', which no "
                               "earlier layer stashes", l, layers[l].name, *name);
          g_array_index (found, KsSkipRoute, i - 1).pop_layer = l;
          g_array_index (found, KsSkipRoute, i - 1).pop_chunk = chunk_of (boundaries, parts, l);
          g_hash_table_remove (open, *name);
        }
      for (const char *const *name = layers[l].stash; name != NULL && *name != NULL; name++)
        {
          for (guint i = 0; i < found->len; i++)
            if (strcmp (g_array_index (found, KsSkipRoute, i).name, *name) == 0)
              return ks_invalid (error, "layer %" G_GSIZE_FORMAT " (%s) stashes '%s', which "
                                 "layer %" G_GSIZE_FORMAT " stashes already; each name is "
                                 "stashed once (qualify it by a namespace)", l, layers[l].name,
                                 *name, g_array_index (found, KsSkipRoute, i).stash_layer);
          KsSkipRoute r = { *name, l, 0, chunk_of (boundaries, parts, l), -1 };
          g_array_append_val (found, r);
          g_hash_table_insert (open, (gpointer) *name, GUINT_TO_POINTER (found->len));
        }
    }
  for (guint i = 0; i < found->len; i++)
    {
      const KsSkipRoute *r = &g_array_index (found, KsSkipRoute, i);
      if (r->pop_chunk < 0)
        return ks_invalid (error, "layer %" G_GSIZE_FORMAT " (%s) stashes '%s', which no later "
                           "layer pops", r->stash_layer, layers[r->stash_layer].name, r->name);
    }
  *n_routes = found->len;
  *routes = (KsSkipRoute *) (gpointer) g_array_free (g_steal_pointer (&found), FALSE);
  return TRUE;
}

/* ---- measured cost ---- */

gboolean
ks_layers_profile (KsCompute *compute, const KsLayerDesc *layers, gsize n_layers,
                   const KsLayerDesc *loss, int steps, double *seconds, GError **error)
{
  g_autoptr (KsModel) model = ks_model_new (compute);
  g_autofree guint *first = g_new (guint, n_layers + 1);
  g_autoptr (GArray) feeds = g_array_new (FALSE, FALSE, sizeof (KsFeed));
  g_autoptr (GPtrArray) zeros = g_ptr_array_new_with_free_func (g_free);
  const float one = 1;
  KsExpr *x, *out;

  if ((x = build_noting_ranges (model, layers, n_layers, first, error)) == NULL
      || (out = ks_layer_build (model, loss, n_layers, x, error)) == NULL
      || !ks_model_init (model, error))
    return FALSE;
  first[n_layers] = ks_model_n_exprs (model); /* past the loss: its ops count with the last layer */
  for (guint id = 0; id < first[n_layers]; id++)
    {
      KsExpr *e = g_ptr_array_index (model->exprs, id);
      gsize nbytes = e->numel * ks_dtype_size (e->dtype);
      if (e->op != OP_DATA)
        continue;
      g_ptr_array_add (zeros, g_malloc0 (nbytes));
      KsFeed f = { e->name, g_ptr_array_index (zeros, zeros->len - 1), nbytes };
      g_array_append_val (feeds, f);
    }
  model->op_seconds = g_new0 (double, first[n_layers]);
  for (int s = 0; s <= steps; s++)
    {
      if (s == 1) /* the first step allocates */
        memset (model->op_seconds, 0, first[n_layers] * sizeof (double));
      if (!ks_model_run (model, (const KsFeed *) feeds->data, feeds->len, &out, 1, error)
          || !ks_model_sweep_from (model, &out, (const float *const[]) { &one }, 1, NULL, 0,
                                   error))
        return FALSE;
    }
  for (gsize i = 0; i < n_layers; i++)
    {
      seconds[i] = 0;
      for (guint id = first[i]; id < first[i + 1]; id++)
        seconds[i] += model->op_seconds[id];
      seconds[i] /= MAX (steps, 1);
    }
  return TRUE;
}
