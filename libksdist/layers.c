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

KsExpr *
ks_layer_build (KsModel *model, const KsLayerDesc *layer, gsize index, KsExpr *x, GError **error)
{
  g_autoptr (GError) local = NULL;
  KsExpr *out = layer->build (model, x, layer->args, &local);
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
  KsExpr *x = NULL;
  for (gsize i = 0; i < n_layers; i++)
    if ((x = ks_layer_build (model, &layers[i], i, x, error)) == NULL)
      return FALSE;
  *out = x;
  return TRUE;
}

gboolean
ks_layers_info (const KsLayerDesc *layers, gsize n_layers, KsLayerInfo *info, GError **error)
{
  g_autoptr (KsModel) model = ks_model_new (NULL); /* shapes only: nothing is allocated */
  KsExpr *x = NULL;

  for (gsize i = 0; i < n_layers; i++)
    {
      guint first = ks_model_n_exprs (model);
      if ((x = ks_layer_build (model, &layers[i], i, x, error)) == NULL)
        return FALSE;
      info[i] = (KsLayerInfo) { layers[i].name, 0, 0 };
      for (guint id = first; id < ks_model_n_exprs (model); id++)
        {
          KsExpr *e = g_ptr_array_index (model->exprs, id);
          if (e->op == OP_PARAMETER)
            info[i].n_params += (gint64) e->numel;
        }
    }
  return TRUE;
}
