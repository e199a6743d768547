/* Which parameters PyTorch holds in another order than ksdist's NHWC one: a conv2d's
 * kernel (ksdist [kh * kw * c, filters] in (ky, kx, channel) order; nn.Conv2d
 * [filters, c, kh, kw]) and the weight of a linear layer after a flatten of images
 * (ksdist's rows in (y, x, channel) order; PyTorch flattens NCHW as (channel, y, x)).
 * Found from the graph, so any layer list is covered, and written into checkpoints and
 * exports (KS_TORCH_LAYOUT_KEY) for `ksdist export --torch`. */
#include "model/model-private.h"

/* x with the ops that keep its elements' order (dropout) looked through. */
static const KsExpr *
through_dropout (const KsExpr *x)
{
  while (x->op == OP_DROPOUT)
    x = x->in[0];
  return x;
}

char *
ks_model_torch_layouts (KsModel *model)
{
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < model->exprs->len; i++)
    {
      const KsExpr *e = g_ptr_array_index (model->exprs, i);
      const KsExpr *w = e->n_in > 1 ? e->in[1] : NULL;
      if (w == NULL || w->op != OP_PARAMETER || w->ndim != 2)
        continue;
      if (e->op == OP_CONV2D)
        g_string_append_printf (out, "%s %d %d %d 4\n", w->name, e->conv.kh, e->conv.kw,
                                e->conv.c);
      else if (e->op == OP_MATMUL)
        {
          const KsExpr *x = through_dropout (e->in[0]), *image = x->n_in > 0 ? x->in[0] : NULL;
          /* a flatten: each image of [n, h, w, c] one row of h * w * c */
          if (x->op == OP_RESHAPE && image->ndim == 4 && x->ndim == 2
              && x->shape[0] == image->shape[0] && image->shape[3] > 1
              && x->shape[1] == image->shape[1] * image->shape[2] * image->shape[3])
            g_string_append_printf (out, "%s %" G_GINT64_FORMAT " %" G_GINT64_FORMAT
                                    " %" G_GINT64_FORMAT " 2\n", w->name, image->shape[1],
                                    image->shape[2], image->shape[3]);
        }
    }
  return g_string_free (out, FALSE);
}
