/* The model's backward (model.h): gradient expressions, the sweep from a loss or from a
 * pipeline chunk's outputs, and the grad_ready callback a data-parallel average starts
 * from. The ops' own gradients are model-ops.c's. */
#include "model-private.h"

#include <string.h>

void
ks_model_set_grad_ready (KsModel *model, KsGradReadyFunc func, gpointer data)
{
  model->grad_ready = func;
  model->grad_ready_data = data;
}

/* After op `e`'s backward: tells of each parameter input whose last contribution this
 * was (the sweep runs down the ids, so the consumer of lowest id contributes last). */
static void
tell_ready (KsModel *model, const KsExpr *e, const guint *last_use)
{
  for (guint k = 0; k < e->n_in; k++)
    {
      KsExpr *p = e->in[k];
      gboolean repeated = FALSE;
      for (guint j = 0; j < k; j++)
        repeated |= e->in[j] == p;
      if (p->op == OP_PARAMETER && p->needs_grad && last_use[p->id] == e->id && !repeated)
        model->grad_ready (model, p, model->grad_ready_data);
    }
}

gboolean
ks_model_backward (KsModel *model, KsExpr *loss, KsExpr *const *params, gsize n_params,
                   const char *const *no_grad, GArray *pairs, GError **error)
{
  if (loss->model != model || loss->numel != 1 || loss->dtype != KS_DTYPE_FLOAT32)
    {
      g_autofree char *shape = ks_expr_shape_string (loss);
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "backward: the loss '%s' must be a float32 scalar of this model (it is %s "
                   "%s)", loss->name, ks_dtype_name (loss->dtype), shape);
      return FALSE;
    }
  if (!model->initialised)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "backward: run ks_model_init first (gradients live beside the parameters)");
      return FALSE;
    }
  guint n = params != NULL ? n_params : model->exprs->len;
  for (guint i = 0; i < n; i++)
    {
      KsExpr *p = params != NULL ? params[i] : g_ptr_array_index (model->exprs, i);
      if (p->op != OP_PARAMETER)
        {
          if (params == NULL)
            continue;
          g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                       "backward: '%s' is not a parameter", p->name);
          return FALSE;
        }
      if (no_grad != NULL && g_strv_contains (no_grad, p->name))
        continue;
      if (p->buffer)
        {
          if (params == NULL)
            continue;
          g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                       "backward: '%s' is a running statistic, not trained by gradients",
                       p->name);
          return FALSE;
        }
      g_autofree char *name = g_strdup_printf ("%s@GRAD", p->name);
      KsExpr *g = ks_model_add_expr (model, OP_GRAD, name, KS_DTYPE_FLOAT32, p->ndim, p->shape,
                                     error);
      if (g == NULL)
        return FALSE;
      g->in[0] = loss;
      g->n_in = 1;
      g->param = p;
      g->value = ks_arena_view (ks_arena_tensor (model->grads, p->name));
      KsParamGrad pair = { p, g };
      if (pairs != NULL)
        g_array_append_val (pairs, pair);
    }
  return TRUE;
}

/* The highest id of `outs`. */
static guint
top_of (KsExpr *const *outs, gsize n_outs)
{
  guint top = 0;
  for (gsize i = 0; i < n_outs; i++)
    top = MAX (top, outs[i]->id);
  return top;
}

/* The part of a sweep every kind shares: with the roots' needs_grad set, marks every
 * expression between them and `outs`, gives each a gradient tensor, and says which
 * expressions are ancestors of an out. */
static gboolean
mark_between (KsModel *model, KsExpr *const *outs, gsize n_outs, GError **error)
{
  g_autofree gboolean *ancestor = g_new0 (gboolean, model->exprs->len);
  guint top = top_of (outs, n_outs);

  for (gsize i = 0; i < n_outs; i++)
    ancestor[outs[i]->id] = TRUE;
  for (guint i = top + 1; i-- > 0;)
    if (ancestor[i])
      {
        KsExpr *e = g_ptr_array_index (model->exprs, i);
        for (guint k = 0; k < e->n_in; k++)
          ancestor[e->in[k]->id] = TRUE;
      }
  for (guint i = 0; i <= top; i++)
    {
      KsExpr *e = g_ptr_array_index (model->exprs, i);
      for (guint k = 0; k < e->n_in && e->op != OP_GRAD && e->op != OP_ACCURACY; k++)
        e->needs_grad |= e->in[k]->needs_grad;
      e->needs_grad &= ancestor[i];
      if (!e->needs_grad)
        continue;
      if (e->grad == NULL)
        e->grad = e->op == OP_PARAMETER
                      ? ks_arena_view (ks_arena_tensor (model->grads, e->name))
                      : ks_tensor_new (model->compute, KS_DTYPE_FLOAT32, e->ndim, e->shape, error);
      if (e->grad == NULL)
        return FALSE;
      /* the first contribution writes instead of adding (ks_op_grad_beta), so an
       * activation's gradient is never zeroed; parameters' were, with the arena */
      e->grad_fresh = e->op != OP_PARAMETER;
    }
  return TRUE;
}

/* Seeds each marked out's gradient not seeded yet with its seed (host floats, the out's
 * size; `seeds` may be NULL when all are seeded) and runs every marked op's backward from
 * the top out down, so an out that feeds another gets the seed plus what flows back into
 * it; `last_use` (may be NULL) drives the grad_ready callback. */
static gboolean
sweep_down (KsModel *model, KsExpr *const *outs, const float *const *seeds, gsize n_outs,
            const guint *last_use, GError **error)
{
  for (gsize i = 0; i < n_outs; i++)
    {
      KsExpr *out = outs[i];
      g_autofree float *sum = NULL;
      if (!out->needs_grad || !out->grad_fresh) /* seeded already, with its repeats */
        continue;
      for (gsize j = i + 1; j < n_outs; j++) /* an out given twice: the seeds add */
        if (outs[j] == out)
          {
            if (sum == NULL)
              sum = g_memdup2 (seeds[i], out->numel * sizeof (float));
            for (gsize k = 0; k < out->numel; k++)
              sum[k] += seeds[j][k];
          }
      if (!ks_compute_copy_to_device (model->compute, out->grad->data,
                                      sum != NULL ? sum : seeds[i],
                                      out->numel * sizeof (float), error))
        return FALSE;
      out->grad_fresh = FALSE;
    }
  for (guint i = top_of (outs, n_outs) + 1; i-- > 0;)
    {
      KsExpr *e = g_ptr_array_index (model->exprs, i);
      gint64 start = model->op_seconds != NULL ? g_get_monotonic_time () : 0;
      if (e->needs_grad && e->n_in > 0
          && (!ks_op_grad_zeroed (e, error) || !ks_op_backward (e, error)))
        return FALSE;
      if (model->op_seconds != NULL)
        model->op_seconds[e->id] += (g_get_monotonic_time () - start) / 1e6;
      if (last_use != NULL && e->needs_grad)
        tell_ready (model, e, last_use);
    }
  return TRUE;
}

/* For the grad_ready callback: the id of each expression's lowest-id consumer that the
 * sweep from expressions up to `top` reaches (G_MAXUINT for none). */
static guint *
last_uses (KsModel *model, guint top)
{
  guint *last_use = g_new (guint, top + 1);
  memset (last_use, 0xff, (top + 1) * sizeof (guint));
  for (guint i = top + 1; i-- > 0;)
    {
      KsExpr *e = g_ptr_array_index (model->exprs, i);
      for (guint k = 0; e->needs_grad && k < e->n_in; k++)
        last_use[e->in[k]->id] = i;
    }
  return last_use;
}

/* The reverse sweep for `loss`: dloss/dx for every x between the parameters that have a
 * gradient expression of this loss and the loss. Parameter gradients are written into
 * the gradient arena (zeroed first). */
gboolean
ks_model_sweep (KsModel *model, KsExpr *loss, GError **error)
{
  if (model->swept_loss == loss && model->swept_version == loss->version)
    return TRUE; /* another gradient of the same run already swept */
  for (guint i = 0; i < model->exprs->len; i++)
    {
      KsExpr *e = g_ptr_array_index (model->exprs, i);
      e->needs_grad = FALSE;
      if (e->op == OP_GRAD && e->in[0] == loss)
        {
          e->param->needs_grad = TRUE;
          /* zero even when the parameter does not reach the loss */
          if (!ks_compute_fill_zero (model->compute, e->value->data, ks_tensor_nbytes (e->value),
                                     error))
            return FALSE;
        }
    }
  if (!mark_between (model, &loss, 1, error))
    return FALSE;
  /* for the grad_ready callback: each parameter's lowest-id consumer in this sweep, and
   * at once the parameters this loss does not reach (their zero is final) */
  g_autofree guint *last_use = NULL;
  if (model->grad_ready != NULL)
    {
      last_use = last_uses (model, loss->id);
      for (guint i = 0; i < model->exprs->len; i++)
        {
          KsExpr *g = g_ptr_array_index (model->exprs, i);
          if (g->op == OP_GRAD && g->in[0] == loss && !g->param->needs_grad)
            model->grad_ready (model, g->param, model->grad_ready_data);
        }
    }
  if (!loss->needs_grad)
    return TRUE; /* no parameter of this backward reaches the loss: gradients stay zero */
  /* the seed (the loss scale, else 1) from the device: no copy per step */
  if (!ks_model_seed (model, error)
      || !ks_compute_axpby (model->compute, 1, model->unit, 0, (float *) loss->grad->data, 1,
                            error))
    return FALSE;
  loss->grad_fresh = FALSE;
  if (!sweep_down (model, &loss, NULL, 1, last_use, error))
    return FALSE;
  model->swept_loss = loss;
  model->swept_version = loss->version;
  return TRUE;
}

gboolean
ks_model_sweep_from (KsModel *model, KsExpr *const *outs, const float *const *seeds,
                     gsize n_outs, KsExpr *const *inputs, gsize n_inputs, GError **error)
{
  if (model->scaling)
    {
      /* the seeds come from elsewhere: nothing here could scale them */
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "mixed precision: float16's loss scaling needs the backward from the loss; "
                   "a pipeline stage's cannot scale it (use [amp] dtype = bf16)");
      return FALSE;
    }
  for (guint i = 0; i < model->exprs->len; i++)
    {
      KsExpr *e = g_ptr_array_index (model->exprs, i);
      e->needs_grad = e->op == OP_PARAMETER;
    }
  for (gsize i = 0; i < n_inputs; i++)
    inputs[i]->needs_grad = TRUE;
  model->swept_loss = NULL; /* a later ks_model_sweep must not think itself current */
  if (!mark_between (model, outs, n_outs, error))
    return FALSE;
  /* a parameter is told ready at its last consumer in this sweep: the caller arms the
   * callback only for a sweep after which nothing more adds to those gradients */
  g_autofree guint *last_use = NULL;
  if (model->grad_ready != NULL)
    {
      guint top = 0;
      for (gsize i = 0; i < n_outs; i++)
        top = MAX (top, outs[i]->id);
      last_use = last_uses (model, top);
    }
  if (!sweep_down (model, outs, seeds, n_outs, last_use, error))
    return FALSE;
  for (gsize i = 0; i < n_inputs; i++) /* an input that reaches no out: zero */
    {
      KsExpr *x = inputs[i];
      if (x->needs_grad && !x->grad_fresh)
        continue;
      if ((x->grad == NULL
           && (x->grad = ks_tensor_new (model->compute, KS_DTYPE_FLOAT32, x->ndim, x->shape,
                                        error)) == NULL)
          || !ks_compute_fill_zero (model->compute, x->grad->data, ks_tensor_nbytes (x->grad),
                                    error))
        return FALSE;
    }
  return TRUE;
}
