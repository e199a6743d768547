/* A pipeline stage's step (pipeline.h): its schedule's program of forwards, backwards
 * and transfers, the shared parameters' and the replicas' gradients summed, clipping
 * over every stage, and the evaluation. */
#include "pipeline-private.h"

#include <string.h>

static gboolean
is_shared (const KsPipeline *pl, const char *name)
{
  for (guint i = 0; i < pl->shared->len; i++)
    if (strcmp (g_array_index (pl->shared, Shared, i).name, name) == 0)
      return TRUE;
  return FALSE;
}

/* The model's grad_ready during a chunk's last backward of the step: a shared parameter
 * waits for the update (other chunks and stages add to its gradient after). */
static void
replica_ready (KsModel *model, KsExpr *param, gpointer data)
{
  KsPipeline *pl = data;
  if (!is_shared (pl, ks_expr_name (param)))
    ks_grad_average_ready (model, param, pl->replicas);
}

/* The gradients of this stage averaged over its replicas, before the update: the
 * buckets the backwards launched, and the rest now (all of them in the first step). */
static gboolean
average_replicas (KsPipeline *pl, GError **error)
{
  if (pl->data == NULL)
    return TRUE;
  if (pl->replicas == NULL)
    {
      KsArena *grads = ks_model_gradients (pl->model);
      g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
      for (gsize i = 0; i < ks_arena_count (grads); i++)
        {
          const char *name;
          ks_arena_tensor_at (grads, i, &name, NULL);
          KsParamGrad pair = { ks_model_find (pl->model, name), NULL };
          g_array_append_val (pairs, pair);
        }
      pl->replicas = ks_grad_average_new (pl->model, pl->data, (const KsParamGrad *) pairs->data,
                                          pairs->len, KS_GRAD_AVERAGE_BUCKET_FLOATS);
    }
  return ks_grad_average_finish (pl->replicas, error);
}

void
ks_pipeline_set_clip_norm (KsPipeline *pl, double clip_norm)
{
  pl->clip_norm = clip_norm;
}

/* Whether a gradient of this stage counts in the model's norm: a shared parameter's
 * counts on its lowest owning stage only. */
static gboolean
counts_here (const KsPipeline *pl, const char *name)
{
  for (guint i = 0; i < pl->shared->len; i++)
    {
      const Shared *s = &g_array_index (pl->shared, Shared, i);
      if (strcmp (s->name, name) == 0)
        return s->owners[0] == pl->stage;
    }
  return TRUE;
}

/* Scales every stage's gradients so that their global L2 norm, over the model as one
 * process has it, is at most clip_norm: the stages sum their squares (a shared
 * parameter's once), and the base's one clipping scales by them. */
static gboolean
clip_global (KsPipeline *pl, GError **error)
{
  KsArena *grads = ks_model_gradients (pl->model);
  gsize n = ks_arena_numel (grads);
  g_autofree float *host = NULL;
  double squares = 0;

  if (pl->clip_norm <= 0)
    return TRUE;
  host = g_new (float, n);
  if (!ks_compute_copy_to_host (pl->compute, host, ks_arena_data (grads), n * sizeof (float),
                                error))
    return FALSE;
  for (gsize i = 0; i < ks_arena_count (grads); i++)
    {
      const char *name;
      gsize offset;
      const KsTensor *t = ks_arena_tensor_at (grads, i, &name, &offset);
      for (gsize j = 0; counts_here (pl, name) && j < t->numel; j++)
        squares += (double) host[offset + j] * host[offset + j];
    }
  if (pl->p > 1
      && !ks_comm_allreduce (pl->comm, &squares, 1, KS_DTYPE_FLOAT64, KS_REDUCE_SUM, error))
    return FALSE;
  return ks_clip_by_global_norm (pl->compute, ks_arena_data (grads), n, squares, pl->clip_norm,
                                 error);
}

/* Sums each shared parameter's gradient over its stages, adding in stage order so every
 * stage gets the same bits. */
static gboolean
reduce_shared (KsPipeline *pl, GError **error)
{
  for (guint i = 0; i < pl->shared->len; i++)
    {
      const Shared *s = &g_array_index (pl->shared, Shared, i);
      if (!exchanges (pl, s))
        continue;
      const KsTensor *t = ks_arena_tensor (ks_model_gradients (pl->model), s->name);
      gsize n = t->numel, nbytes = n * sizeof (float);
      g_autofree float *all = g_new (float, n * s->n_owners), *sum = g_new0 (float, n);
      KsCommRequest *recvs[G_N_ELEMENTS (s->owners)] = { NULL };
      gboolean ok = TRUE;
      int me = 0;

      while (s->owners[me] != pl->stage)
        me++;
      if (!ks_tensor_to_host (t, all + me * n, nbytes, error))
        return FALSE;
      for (int k = 0; k < s->n_owners; k++)
        if (k != me
            && (!ks_pipe_send (pl, all + me * n, nbytes, s->owners[k], tag_of (TAG_SHARED_GRAD, i, 0),
                          error)
                || (recvs[k] = ks_comm_irecv (pl->comm, all + k * n, nbytes, s->owners[k],
                                              tag_of (TAG_SHARED_GRAD, i, 0), error))
                       == NULL))
          {
            ok = FALSE;
            break;
          }
      for (int k = 0; k < s->n_owners; k++)
        if (recvs[k] != NULL)
          ok = ks_comm_wait (recvs[k], ok ? error : NULL) && ok;
      /* the send buffer must outlive the sends */
      if (!ks_pipe_drain (pl, ok ? error : NULL) || !ok)
        return FALSE;
      for (int k = 0; k < s->n_owners; k++)
        for (gsize j = 0; j < n; j++)
          sum[j] += all[k * n + j];
      if (!ks_compute_copy_to_device (pl->compute, t->data, sum, nbytes, error))
        return FALSE;
    }
  return TRUE;
}

/* Feeds this chunk's data: the micro-batch's rows of the batch feeds that name its data,
 * and the activation received from the previous chunk. */
static gboolean
run_forward (KsPipeline *pl, Chunk *c, int mb, const KsFeed *feeds, gsize n_feeds,
             KsExpr *target, GError **error)
{
  g_autoptr (GArray) mine = g_array_new (FALSE, FALSE, sizeof (KsFeed));
  for (gsize i = 0; i < n_feeds; i++)
    {
      KsExpr *e = ks_model_find (pl->model, feeds[i].name);
      gsize part = feeds[i].nbytes / pl->m;
      if (e == NULL || e->op != OP_DATA || e->id < c->first || e->id >= c->first + c->n)
        continue;
      if (feeds[i].nbytes % pl->m != 0 || part != ks_dtype_size (e->dtype) * e->numel)
        {
          g_autofree char *shape = ks_expr_shape_string (e);
          return ks_invalid (error, "pipeline: feed '%s' of %" G_GSIZE_FORMAT " bytes is not "
                             "%d micro-batches of its data's shape %s",
                             feeds[i].name, feeds[i].nbytes, pl->m, shape);
        }
      KsFeed f = { feeds[i].name, (const char *) feeds[i].data + mb * part, part };
      g_array_append_val (mine, f);
    }
  if (c->input != NULL)
    {
      KsFeed f = { c->input->name, c->act_in + mb * c->in_numel, c->in_numel * sizeof (float) };
      g_array_append_val (mine, f);
    }
  for (guint i = 0; i < c->skip_in->len; i++) /* popped here, stashed by another chunk */
    {
      SkipEnd *end = g_ptr_array_index (c->skip_in, i);
      KsFeed f = { end->expr->name, end->value + mb * end->numel, end->numel * sizeof (float) };
      if (!ks_pipe_recv (pl, end->value + mb * end->numel, f.nbytes, end->peer,
                      tag_of (TAG_SKIP_VALUE, end->route, mb), error))
        return FALSE;
      g_array_append_val (mine, f);
    }
  g_autoptr (GPtrArray) targets = g_ptr_array_new ();
  g_ptr_array_add (targets, target);
  for (guint i = 0; i < c->skip_out->len; i++)
    g_ptr_array_add (targets, ((SkipEnd *) g_ptr_array_index (c->skip_out, i))->expr);
  /* the same dropout masks for the forward and its recompute, different per step */
  ks_model_set_rng_state (pl->model, (guint64) pl->steps * pl->m + mb);
  if (!ks_model_run (pl->model, (const KsFeed *) mine->data, mine->len,
                     (KsExpr **) targets->pdata, targets->len, error))
    return FALSE;
  for (guint i = 0; i < c->skip_out->len; i++) /* stashed here: straight to the popper */
    {
      SkipEnd *end = g_ptr_array_index (c->skip_out, i);
      float *value = end->value + mb * end->numel;
      if (!ks_tensor_to_host (end->expr->value, value, end->numel * sizeof (float), error)
          || !ks_pipe_send (pl, value, end->numel * sizeof (float), end->peer,
                       tag_of (TAG_SKIP_VALUE, end->route, mb), error))
        return FALSE;
    }
  return TRUE;
}

static gboolean
forward (KsPipeline *pl, Chunk *c, int mb, const KsFeed *feeds, gsize n_feeds,
         double *loss_sum, GError **error)
{
  KsStash *s;
  float loss;
  if (!run_forward (pl, c, mb, feeds, n_feeds, c->out, error))
    return FALSE;
  if (c->out_numel > 0) /* to send on */
    {
      if (!ks_tensor_to_host (c->out->value, c->act_out + mb * c->out_numel,
                              c->out_numel * sizeof (float), error))
        return FALSE;
    }
  else if (ks_tensor_to_host (c->out->value, &loss, sizeof loss, error)) /* the last chunk */
    *loss_sum += loss;
  else
    return FALSE;
  s = c->spare->len > 0 ? g_ptr_array_steal_index_fast (c->spare, c->spare->len - 1)
                        : ks_stash_new (c->first, c->n, c->kept);
  ks_model_swap_stash (pl->model, s); /* s takes this micro-batch's activations */
  c->stash[mb] = s;
  return TRUE;
}

static gboolean
backward (KsPipeline *pl, Chunk *c, int mb, GError **error)
{
  const float mean = 1.0f / pl->m;
  KsStash *s = g_steal_pointer (&c->stash[mb]);

  ks_model_swap_stash (pl->model, s); /* back in; s holds the spare ones */
  g_ptr_array_add (c->spare, s);
  if (c->kept != NULL)
    {
      ks_model_set_rng_state (pl->model, (guint64) pl->steps * pl->m + mb);
      if (!ks_model_recompute (pl->model, c->first, c->n, c->kept, error))
        return FALSE;
    }
  /* seeds: the next chunk's gradient (1/m of the loss's), and the popping chunks' */
  g_autoptr (GPtrArray) outs = g_ptr_array_new (), seeds = g_ptr_array_new ();
  g_autoptr (GPtrArray) inputs = g_ptr_array_new ();
  g_ptr_array_add (outs, c->out);
  g_ptr_array_add (seeds, c->out_numel > 0 ? c->grad_in + mb * c->out_numel : (float *) &mean);
  for (guint i = 0; i < c->skip_out->len; i++)
    {
      SkipEnd *end = g_ptr_array_index (c->skip_out, i);
      if (!ks_pipe_recv (pl, end->grad + mb * end->numel, end->numel * sizeof (float), end->peer,
                      tag_of (TAG_SKIP_GRAD, end->route, mb), error))
        return FALSE;
      g_ptr_array_add (outs, end->expr);
      g_ptr_array_add (seeds, end->grad + mb * end->numel);
    }
  if (c->input != NULL)
    g_ptr_array_add (inputs, c->input);
  for (guint i = 0; i < c->skip_in->len; i++)
    g_ptr_array_add (inputs, ((SkipEnd *) g_ptr_array_index (c->skip_in, i))->expr);
  gboolean last = ++c->backwards == pl->m, ok;
  if (last && pl->replicas != NULL && pl->overlap)
    ks_model_set_grad_ready (pl->model, replica_ready, pl);
  ok = ks_model_sweep_from (pl->model, (KsExpr **) outs->pdata, (const float **) seeds->pdata,
                            outs->len, (KsExpr **) inputs->pdata, inputs->len, error);
  ks_model_set_grad_ready (pl->model, NULL, NULL);
  if (!ok)
    return FALSE;
  if (c->input != NULL
      && !ks_tensor_to_host (c->input->grad, c->grad_out + mb * c->in_numel,
                             c->in_numel * sizeof (float), error))
    return FALSE;
  for (guint i = 0; i < c->skip_in->len; i++) /* back to the stashing chunk */
    {
      SkipEnd *end = g_ptr_array_index (c->skip_in, i);
      float *grad = end->grad + mb * end->numel;
      if (!ks_tensor_to_host (end->expr->grad, grad, end->numel * sizeof (float), error)
          || !ks_pipe_send (pl, grad, end->numel * sizeof (float), end->peer,
                       tag_of (TAG_SKIP_GRAD, end->route, mb), error))
        return FALSE;
    }
  return TRUE;
}

/* A transfer's buffer (this micro-batch's slot of the chunk), size and tag; the tag
 * names the chunk that receives it. */
static guint32
transfer_of (Chunk *c, const KsPipeInstr *in, float **buf, gsize *nbytes)
{
  int mb = in->micro_batch;
  gsize n = in->op == KS_PIPE_SEND_ACTIVATION || in->op == KS_PIPE_RECV_GRADIENT
                ? c->out_numel : c->in_numel;

  *nbytes = n * sizeof (float);
  switch (in->op)
    {
    case KS_PIPE_SEND_ACTIVATION:
      *buf = c->act_out + mb * n;
      return tag_of (TAG_ACTIVATION, c->global + 1, mb);
    case KS_PIPE_RECV_ACTIVATION:
      *buf = c->act_in + mb * n;
      return tag_of (TAG_ACTIVATION, c->global, mb);
    case KS_PIPE_SEND_GRADIENT:
      *buf = c->grad_out + mb * n;
      return tag_of (TAG_GRADIENT, c->global - 1, mb);
    default: /* KS_PIPE_RECV_GRADIENT */
      *buf = c->grad_in + mb * n;
      return tag_of (TAG_GRADIENT, c->global, mb);
    }
}

static gboolean
run_instruction (KsPipeline *pl, const KsPipeInstr *in, KsOptimizer *optimizer,
                 const KsFeed *feeds, gsize n_feeds, double *loss_sum, GError **error)
{
  Chunk *c = in->chunk >= 0 ? &pl->chunks[in->chunk] : NULL;
  int mb = in->micro_batch;

  switch (in->op)
    {
    case KS_PIPE_FORWARD:
      return forward (pl, c, mb, feeds, n_feeds, loss_sum, error);
    case KS_PIPE_BACKWARD:
      return backward (pl, c, mb, error);
    case KS_PIPE_SEND_ACTIVATION:
    case KS_PIPE_SEND_GRADIENT:
    case KS_PIPE_RECV_ACTIVATION:
    case KS_PIPE_RECV_GRADIENT:
      {
        gsize nbytes;
        float *buf;
        guint32 tag = transfer_of (c, in, &buf, &nbytes);
        return in->op == KS_PIPE_SEND_ACTIVATION || in->op == KS_PIPE_SEND_GRADIENT
                   ? ks_pipe_send (pl, buf, nbytes, in->peer, tag, error)
                   : ks_pipe_recv (pl, buf, nbytes, in->peer, tag, error);
      }
    case KS_PIPE_REDUCE_TIED:
      return reduce_shared (pl, error);
    case KS_PIPE_OPTIMIZER_STEP:
      return average_replicas (pl, error) && clip_global (pl, error)
             && ks_optimizer_apply (optimizer, pl->model, error);
    }
  g_assert_not_reached ();
}

/* Posts every receive of the step from another stage at once: each has its own buffer
 * and tag, and a sender's data then flows while this stage computes. */
static gboolean
post_receives (KsPipeline *pl, const GArray *program, GError **error)
{
  for (guint i = 0; i < program->len; i++)
    {
      const KsPipeInstr *in = &g_array_index (program, KsPipeInstr, i);
      KsCommRequest *r;
      float *buf;
      gsize nbytes;
      if ((in->op != KS_PIPE_RECV_ACTIVATION && in->op != KS_PIPE_RECV_GRADIENT)
          || in->peer == pl->stage)
        continue;
      guint32 tag = transfer_of (&pl->chunks[in->chunk], in, &buf, &nbytes);
      if ((r = ks_comm_irecv (pl->comm, buf, nbytes, in->peer, tag, error)) == NULL)
        return FALSE;
      g_hash_table_insert (pl->posted, GUINT_TO_POINTER (tag), r);
    }
  return TRUE;
}

/* The last stage's value, on every stage. */
static gboolean
from_last_stage (KsPipeline *pl, double *value, GError **error)
{
  return pl->p == 1
         || ks_comm_broadcast (pl->comm, value, 1, KS_DTYPE_FLOAT64, pl->p - 1, error);
}

gboolean
ks_pipeline_step (KsPipeline *pl, KsOptimizer *optimizer, const KsFeed *feeds, gsize n_feeds,
                  double *loss, GError **error)
{
  KsArena *grads = ks_model_gradients (pl->model);
  const GArray *program = pl->schedule->program[pl->stage];
  double loss_sum = 0;

  if (grads == NULL)
    return ks_invalid (error, "pipeline: call ks_pipeline_init before stepping");
  gint64 start = g_get_monotonic_time (), last_compute = start;
  for (int c = 0; c < pl->v; c++)
    pl->chunks[c].backwards = 0;
  if (!ks_compute_fill_zero (pl->compute, ks_arena_data (grads),
                             ks_arena_numel (grads) * sizeof (float), error)
      || !post_receives (pl, program, error))
    {
      ks_pipe_cancel_posted (pl);
      return FALSE;
    }
  for (guint i = 0; i < program->len; i++)
    {
      const KsPipeInstr *in = &g_array_index (program, KsPipeInstr, i);
      gint64 t0 = g_get_monotonic_time ();
      gboolean ok = run_instruction (pl, in, optimizer, feeds, n_feeds, &loss_sum, error);
      gint64 t1 = g_get_monotonic_time ();
      if (in->op == KS_PIPE_FORWARD || in->op == KS_PIPE_BACKWARD)
        {
          pl->busy += (t1 - t0) / 1e6;
          last_compute = t1;
        }
      if (pl->events != NULL)
        {
          Event e = { *in, t0, t1 };
          g_array_append_val (pl->events, e);
        }
      if (!ok)
        {
          g_autofree char *what = ks_schedule_describe_instr (in);
          g_prefix_error (error, "pipeline stage %d, step %" G_GINT64_FORMAT ", %s: ",
                          pl->stage, pl->steps + 1, what);
          ks_pipe_drain (pl, NULL);
          ks_pipe_cancel_posted (pl);
          return FALSE;
        }
    }
  pl->steps++;
  pl->wall += (last_compute - start) / 1e6;
  *loss = loss_sum / pl->m;
  return ks_pipe_drain (pl, error) && from_last_stage (pl, loss, error)
         && (pl->data == NULL
             || ks_comm_allreduce (pl->data, loss, 1, KS_DTYPE_FLOAT64, KS_REDUCE_AVG, error));
}

/* The forwards of an evaluation: the last chunk's target (the metric, else the loss) of
 * each micro-batch summed into *sum from its first value, or, with `values`, all its
 * values copied there, micro-batch after micro-batch (n in all). */
static gboolean
evaluate (KsPipeline *pl, const KsFeed *feeds, gsize n_feeds, double *value, float *values,
          gsize n, GError **error)
{
  gboolean training = ks_model_training (pl->model), ok = TRUE;
  int last = pl->p * pl->v - 1;
  double sum = 0;

  ks_model_set_training (pl->model, FALSE);
  /* micro-batch by micro-batch, chunk by chunk: each waits only on an earlier one */
  for (int mb = 0; ok && mb < pl->m; mb++)
    for (int k = 0; ok && k < pl->v; k++)
      {
        Chunk *c = &pl->chunks[k];
        int g = c->global;
        KsExpr *target = g == last && c->metric != NULL ? c->metric : c->out;
        float v;
        ok = (g == 0
              || ks_pipe_recv (pl, c->act_in + mb * c->in_numel, c->in_numel * sizeof (float),
                            (g - 1) % pl->p, tag_of (TAG_ACTIVATION, g, mb), error))
             && run_forward (pl, c, mb, feeds, n_feeds, target, error);
        if (ok && g < last)
          ok = ks_tensor_to_host (c->out->value, c->act_out + mb * c->out_numel,
                                  c->out_numel * sizeof (float), error)
               && ks_pipe_send (pl, c->act_out + mb * c->out_numel, c->out_numel * sizeof (float),
                           (g + 1) % pl->p, tag_of (TAG_ACTIVATION, g + 1, mb), error);
        else if (ok && values != NULL)
          {
            gsize per = ks_expr_numel (target);
            if (per * pl->m != n)
              ok = ks_invalid (error, "pipeline evaluation: the metric gives %" G_GSIZE_FORMAT
                               " values a micro-batch, %d micro-batches, but %" G_GSIZE_FORMAT
                               " were asked for", per, pl->m, n);
            else
              ok = ks_tensor_to_host (target->value, values + mb * per, per * sizeof (float),
                                      error);
          }
        else if (ok)
          {
            ok = ks_tensor_to_host (target->value, &v, sizeof v, error);
            sum += v;
          }
      }
  ks_model_set_training (pl->model, training);
  ok = ks_pipe_drain (pl, ok ? error : NULL) && ok;
  if (values != NULL)
    return ok
           && (pl->p == 1
               || ks_comm_broadcast (pl->comm, values, n, KS_DTYPE_FLOAT32, pl->p - 1, error));
  *value = sum / pl->m;
  return ok && from_last_stage (pl, value, error);
}

gboolean
ks_pipeline_evaluate (KsPipeline *pl, const KsFeed *feeds, gsize n_feeds, double *value,
                      GError **error)
{
  return evaluate (pl, feeds, n_feeds, value, NULL, 0, error);
}

gboolean
ks_pipeline_evaluate_values (KsPipeline *pl, const KsFeed *feeds, gsize n_feeds, float *values,
                             gsize n, GError **error)
{
  return evaluate (pl, feeds, n_feeds, NULL, values, n, error);
}
