/* A server's dense table (table.h). */
#include "table.h"

#include <string.h>

PsDenseTable *
ps_dense_table_new (KsCompute *compute, const PsLayout *layout, int server,
                    const KsArena *initial, const KsOptimizerOps *ops, void *opt, GError **error)
{
  PsDenseTable *t = g_new0 (PsDenseTable, 1);
  g_autofree gsize *mine = ps_layout_server_blocks (layout, server, &t->n_blocks);
  g_autofree float *tmp = NULL;

  t->model = ks_model_new (compute);
  t->ops = ops;
  t->opt = opt;
  t->blocks = g_new (const PsBlock *, t->n_blocks);
  t->pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  for (gsize i = 0; i < t->n_blocks; i++)
    {
      const PsBlock *b = &layout->blocks[mine[i]];
      gint64 shape[1] = { (gint64) b->len };
      KsParamGrad pair = { NULL, NULL };
      t->blocks[i] = b;
      t->n_floats += b->len;
      if ((pair.param = ks_model_parameter (t->model, b->name, 1, shape,
                                            (KsInit) { KS_INIT_CONSTANT, 0, 0, 0 }, error))
          == NULL)
        goto fail;
      g_array_append_val (t->pairs, pair);
    }
  if (!ks_model_init (t->model, error))
    goto fail;
  /* the initial values, through the host (the arenas may be on a device) */
  tmp = g_new (float, MAX (t->n_floats, 1));
  for (gsize i = 0, pos = 0; i < t->n_blocks; pos += t->blocks[i]->len, i++)
    if (!ks_compute_copy_to_host (compute, tmp + pos,
                                  ks_arena_data (initial) + t->blocks[i]->arena_offset,
                                  t->blocks[i]->len * sizeof (float), error))
      goto fail;
  if (!ps_dense_table_add (t, tmp, error))
    goto fail;
  t->updates = 0;
  return t;
fail:
  ps_dense_table_free (t);
  return NULL;
}

void
ps_dense_table_free (PsDenseTable *t)
{
  if (t == NULL)
    return;
  ks_model_free (t->model);
  g_array_unref (t->pairs);
  g_free (t->blocks);
  g_free (t);
}

gboolean
ps_dense_table_transfer (PsDenseTable *t, KsArena *arena, float *host, gboolean to_host, GError **error)
{
  KsCompute *compute = ks_model_device (t->model);
  for (gsize i = 0, pos = 0; i < t->n_blocks; pos += t->blocks[i]->len, i++)
    {
      float *dev = ks_arena_tensor (arena, t->blocks[i]->name)->data;
      gsize bytes = t->blocks[i]->len * sizeof (float);
      if (!(to_host ? ks_compute_copy_to_host (compute, host + pos, dev, bytes, error)
                    : ks_compute_copy_to_device (compute, dev, host + pos, bytes, error)))
        return FALSE;
    }
  return TRUE;
}

gboolean
ps_dense_table_read (PsDenseTable *t, float *out, GError **error)
{
  return ps_dense_table_transfer (t, ks_model_parameters (t->model), out, TRUE, error);
}

gboolean
ps_dense_table_apply (PsDenseTable *t, const float *grads, GError **error)
{
  if (!ps_dense_table_transfer (t, ks_model_gradients (t->model), (float *) grads, FALSE, error)
      || !t->ops->apply_gradients (t->opt, t->model, (const KsParamGrad *) t->pairs->data,
                                   t->pairs->len, error))
    return FALSE;
  t->updates++;
  return TRUE;
}

gboolean
ps_dense_table_apply_stale (PsDenseTable *t, const float *grads, gint64 staleness,
                            GError **error)
{
  gboolean divide = t->base_lr > 0 && KS_OPS_HAS (t->ops, KsOptimizerOps, set_learning_rate);
  if (divide && !t->ops->set_learning_rate (t->opt, t->base_lr / MAX (staleness, 1), error))
    return FALSE;
  t->staleness_max = MAX (t->staleness_max, staleness);
  t->staleness_divided += divide && staleness > 1;
  return ps_dense_table_apply (t, grads, error);
}

gboolean
ps_dense_table_add (PsDenseTable *t, const float *deltas, GError **error)
{
  KsArena *params = ks_model_parameters (t->model);
  g_autofree float *values = g_new (float, MAX (t->n_floats, 1));

  if (!ps_dense_table_transfer (t, params, values, TRUE, error))
    return FALSE;
  for (gsize i = 0; i < t->n_floats; i++)
    values[i] += deltas[i];
  if (!ps_dense_table_transfer (t, params, values, FALSE, error))
    return FALSE;
  ks_model_parameters_changed (t->model);
  t->updates++;
  return TRUE;
}

gboolean
ps_dense_table_state (PsDenseTable *t, KsArena ***arenas, gsize *n, gint64 **step,
                      GError **error)
{
  if (!KS_OPS_HAS (t->ops, KsOptimizerOps, state))
    return ks_set_not_supported (error, "transpiler", KS_KIND_OPTIMIZER, "state");
  return t->ops->state (t->opt, t->model, arenas, n, step, error);
}
