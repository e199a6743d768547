/* The pipeline executor (pipeline.h): one stage's chunks of a layer list on one model,
 * and the stage's schedule program run over the communicator.
 *
 * Every transfer has its own tag, made of its kind, the global chunk that receives it
 * and the micro-batch, so messages never meet the wrong receive. A micro-batch's
 * activations are set aside between its forward and its backward (a KsStash per chunk
 * and micro-batch; with recompute, only the chunk's data and each k-th layer's output),
 * and its parameter gradients add up in the model's gradient arena. */
#include "pipeline-private.h"

#include <string.h>

static void
chunk_clear (Chunk *c, int m)
{
  for (int i = 0; c->stash != NULL && i < m; i++)
    ks_stash_free (c->stash[i]);
  if (c->spare != NULL)
    g_ptr_array_unref (c->spare);
  g_free (c->stash);
  g_free (c->kept);
  g_free (c->act_in);
  g_free (c->act_out);
  g_free (c->grad_in);
  g_free (c->grad_out);
  if (c->skip_out != NULL)
    g_ptr_array_unref (c->skip_out);
  if (c->skip_in != NULL)
    g_ptr_array_unref (c->skip_in);
}

static void
skip_end_free (SkipEnd *end)
{
  g_free (end->value);
  g_free (end->grad);
  g_free (end);
}

/* Completes every send in flight (their buffers are reused by the next step). */
gboolean
ks_pipe_drain (KsPipeline *pl, GError **error)
{
  gboolean ok = TRUE;
  for (guint i = 0; i < pl->pending->len; i++)
    {
      g_autoptr (GError) local = NULL;
      if (!ks_comm_wait (g_ptr_array_index (pl->pending, i), &local) && ok)
        {
          ok = FALSE;
          g_propagate_error (error, g_steal_pointer (&local));
        }
    }
  g_ptr_array_set_size (pl->pending, 0);
  return ok;
}

/* Completes every receive posted and not waited for (after a failure). */
void
ks_pipe_cancel_posted (KsPipeline *pl)
{
  GHashTableIter iter;
  gpointer request;
  g_hash_table_iter_init (&iter, pl->posted);
  while (g_hash_table_iter_next (&iter, NULL, &request))
    ks_comm_wait (request, NULL);
  g_hash_table_remove_all (pl->posted);
}

void
ks_pipeline_free (KsPipeline *pl)
{
  if (pl == NULL)
    return;
  ks_pipe_drain (pl, NULL);
  ks_pipe_cancel_posted (pl);
  ks_grad_average_free (pl->replicas);
  g_hash_table_unref (pl->posted);
  for (int c = 0; pl->chunks != NULL && c < pl->v; c++)
    chunk_clear (&pl->chunks[c], pl->m);
  g_free (pl->chunks);
  g_free (pl->routes);
  for (guint i = 0; pl->shared != NULL && i < pl->shared->len; i++)
    g_free (g_array_index (pl->shared, Shared, i).name);
  if (pl->shared != NULL)
    g_array_unref (pl->shared);
  g_hash_table_unref (pl->mailbox);
  g_ptr_array_unref (pl->pending);
  if (pl->events != NULL)
    g_array_unref (pl->events);
  ks_schedule_free (pl->schedule);
  ks_model_free (pl->model);
  g_free (pl);
}

/* A send that returns at once: to another stage through the communicator (completed by
 * ks_pipe_drain), to this stage into the mailbox. */
gboolean
ks_pipe_send (KsPipeline *pl, const void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  KsCommRequest *r;
  if (peer == pl->stage)
    {
      g_hash_table_insert (pl->mailbox, GUINT_TO_POINTER (tag), g_bytes_new (buf, nbytes));
      return TRUE;
    }
  if ((r = ks_comm_isend (pl->comm, buf, nbytes, peer, tag, error)) == NULL)
    return FALSE;
  g_ptr_array_add (pl->pending, r);
  return TRUE;
}

gboolean
ks_pipe_recv (KsPipeline *pl, void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  if (peer != pl->stage)
    {
      KsCommRequest *r = g_hash_table_lookup (pl->posted, GUINT_TO_POINTER (tag));
      if (r != NULL) /* posted at the step's start: the data may be here already */
        g_hash_table_remove (pl->posted, GUINT_TO_POINTER (tag));
      else
        r = ks_comm_irecv (pl->comm, buf, nbytes, peer, tag, error);
      return r != NULL && ks_comm_wait (r, error);
    }
  GBytes *bytes = g_hash_table_lookup (pl->mailbox, GUINT_TO_POINTER (tag));
  g_assert (bytes != NULL && g_bytes_get_size (bytes) == nbytes); /* the schedule's order */
  memcpy (buf, g_bytes_get_data (bytes, NULL), nbytes);
  g_hash_table_remove (pl->mailbox, GUINT_TO_POINTER (tag));
  return TRUE;
}

/* ---- building this stage's chunks ---- */

/* The stages owning each shared parameter, from the segmentation alone (every stage
 * finds the same). */
static gboolean
find_shared (KsPipeline *pl, const KsPipelineShape *shape, const KsLayerDesc *layers,
             gsize n_layers, GError **error)
{
  pl->shared = g_array_new (FALSE, TRUE, sizeof (Shared));
  for (gsize l = 0; l < n_layers; l++)
    {
      Shared *s = NULL;
      int owner;
      if (layers[l].shared == NULL)
        continue;
      for (guint i = 0; i < pl->shared->len && s == NULL; i++)
        if (strcmp (g_array_index (pl->shared, Shared, i).name, layers[l].shared) == 0)
          s = &g_array_index (pl->shared, Shared, i);
      if (s == NULL)
        {
          Shared fresh = { g_strdup (layers[l].shared), { 0 }, 0 };
          g_array_append_val (pl->shared, fresh);
          s = &g_array_index (pl->shared, Shared, pl->shared->len - 1);
        }
      owner = ks_pipeline_stage_of_layer (shape->boundaries, pl->p, pl->v, l);
      int k = s->n_owners;
      while (k > 0 && s->owners[k - 1] > owner)
        k--;
      if (k > 0 && s->owners[k - 1] == owner)
        continue;
      if (s->n_owners == G_N_ELEMENTS (s->owners))
        return ks_invalid (error, "shared parameter '%s': more than %d stages share it",
                           s->name, (int) G_N_ELEMENTS (s->owners));
      memmove (s->owners + k + 1, s->owners + k, (s->n_owners - k) * sizeof (int));
      s->owners[k] = owner;
      s->n_owners++;
    }
  return TRUE;
}

/* A new end of route `route` in `ends`, its other end on stage `peer`. */
static SkipEnd *
skip_end_add (GPtrArray *ends, int route, int peer)
{
  SkipEnd *end = g_new0 (SkipEnd, 1);
  g_ptr_array_add (ends, end);
  end->route = route;
  end->peer = peer;
  return end;
}

/* The end's expression and its host buffers, one slot per micro-batch. */
static void
skip_end_bind (KsPipeline *pl, SkipEnd *end, KsExpr *expr)
{
  end->expr = expr;
  end->numel = expr->numel;
  end->value = g_new (float, pl->m * end->numel);
  end->grad = g_new (float, pl->m * end->numel);
}

/* Before a chunk's layers: for each value popped there that another chunk stashes, data
 * shaped as that chunk says, where the popping layer finds it. */
static gboolean
receive_skip_shapes (KsPipeline *pl, Chunk *c, GError **error)
{
  c->skip_in = g_ptr_array_new_with_free_func ((GDestroyNotify) skip_end_free);
  for (gsize r = 0; r < pl->n_routes; r++)
    {
      const KsSkipRoute *route = &pl->routes[r];
      g_autofree char *name = g_strdup_printf ("pipe.skip.%s", route->name);
      SkipEnd *end;
      KsExpr *data;
      if (route->pop_chunk != c->global || route->stash_chunk == c->global)
        continue;
      end = skip_end_add (c->skip_in, r, route->stash_chunk % pl->p);
      if (!ks_pipe_recv (pl, &end->shape, sizeof end->shape, end->peer,
                      tag_of (TAG_SKIP_SHAPE, r, 0), error)
          || (data = ks_model_data (pl->model, name, end->shape.ndim, end->shape.shape,
                                    KS_DTYPE_FLOAT32, error)) == NULL)
        return FALSE;
      skip_end_bind (pl, end, data);
      ks_skip_offer (pl->model, route->name, data);
    }
  return TRUE;
}

/* After a chunk's layers: each value stashed there for another chunk, its shape sent to
 * that chunk's stage. */
static gboolean
send_skip_shapes (KsPipeline *pl, Chunk *c, GError **error)
{
  c->skip_out = g_ptr_array_new_with_free_func ((GDestroyNotify) skip_end_free);
  for (gsize r = 0; r < pl->n_routes; r++)
    {
      const KsSkipRoute *route = &pl->routes[r];
      SkipEnd *end;
      if (route->stash_chunk != c->global || route->pop_chunk == c->global)
        continue;
      end = skip_end_add (c->skip_out, r, route->pop_chunk % pl->p);
      /* the stashing layer checked that it stashed */
      skip_end_bind (pl, end, ks_skip_take (pl->model, route->name));
      end->shape.ndim = end->expr->ndim;
      memcpy (end->shape.shape, end->expr->shape, sizeof end->expr->shape);
      if (!ks_pipe_send (pl, &end->shape, sizeof end->shape, end->peer,
                    tag_of (TAG_SKIP_SHAPE, r, 0), error))
        return FALSE;
    }
  return TRUE;
}

static gboolean
build_chunk (KsPipeline *pl, Chunk *c, const KsPipelineShape *shape, const KsLayerDesc *layers,
             const KsLayerDesc *loss, const KsLayerDesc *metric, ShapeMessage *carried,
             GError **error)
{
  int g = c->global, p = pl->p, last = p * pl->v - 1;
  g_autoptr (GArray) kept_ids = g_array_new (FALSE, FALSE, sizeof (guint));
  KsExpr *x = NULL;

  if (g > 0)
    {
      g_autofree char *name = g_strdup_printf ("pipe.in.%d", g);
      if ((g - 1) % p != pl->stage
          && !ks_comm_recv (pl->comm, carried, sizeof *carried, (g - 1) % p,
                            tag_of (TAG_SHAPE, g, 0), error))
        return FALSE;
      c->first = ks_model_n_exprs (pl->model);
      if ((x = c->input = ks_model_data (pl->model, name, (int) carried->ndim, carried->shape,
                                         KS_DTYPE_FLOAT32, error)) == NULL)
        return FALSE;
      c->in_numel = x->numel;
    }
  else
    c->first = ks_model_n_exprs (pl->model);
  if (!receive_skip_shapes (pl, c, error))
    return FALSE;
  for (gsize l = shape->boundaries[g]; l < shape->boundaries[g + 1]; l++)
    {
      if ((x = ks_layer_build (pl->model, &layers[l], l, x, error)) == NULL)
        return FALSE;
      if (pl->recompute > 0 && (l - shape->boundaries[g] + 1) % pl->recompute == 0)
        g_array_append_val (kept_ids, x->id);
    }
  if (!send_skip_shapes (pl, c, error))
    return FALSE;
  if (g == last)
    {
      KsExpr *logits = x;
      if ((c->out = ks_layer_build (pl->model, loss, shape->boundaries[g + 1], logits, error))
              == NULL
          || (metric != NULL && metric->build != NULL
              && (c->metric = ks_layer_build (pl->model, metric, shape->boundaries[g + 1],
                                              logits, error))
                     == NULL))
        return FALSE;
      if (c->out->numel != 1 || c->out->dtype != KS_DTYPE_FLOAT32)
        return ks_invalid (error, "pipeline: the loss (%s) must be a float32 scalar",
                           loss->name);
    }
  else
    {
      if (x->dtype != KS_DTYPE_FLOAT32)
        return ks_invalid (error, "pipeline: layer %" G_GSIZE_FORMAT " (%s) ends chunk %d with "
                           "%s data; only float32 activations pass between stages: move the "
                           "boundary", shape->boundaries[g + 1] - 1,
                           layers[shape->boundaries[g + 1] - 1].name, g,
                           ks_dtype_name (x->dtype));
      c->out = x;
      c->out_numel = x->numel;
      carried->ndim = x->ndim;
      memcpy (carried->shape, x->shape, sizeof x->shape);
      if ((g + 1) % p != pl->stage
          && !ks_comm_send (pl->comm, carried, sizeof *carried, (g + 1) % p,
                            tag_of (TAG_SHAPE, g + 1, 0), error))
        return FALSE;
    }
  c->n = ks_model_n_exprs (pl->model) - c->first;
  if (pl->recompute > 0)
    {
      c->kept = g_new0 (gboolean, c->n);
      for (guint i = 0; i < c->n; i++)
        c->kept[i] = ((KsExpr *) g_ptr_array_index (pl->model->exprs, c->first + i))->op
                     == OP_DATA;
      for (guint i = 0; i < kept_ids->len; i++)
        c->kept[g_array_index (kept_ids, guint, i) - c->first] = TRUE;
    }
  c->stash = g_new0 (KsStash *, pl->m);
  c->spare = g_ptr_array_new_with_free_func ((GDestroyNotify) ks_stash_free);
  c->act_in = g_new (float, pl->m * c->in_numel);
  c->grad_out = g_new (float, pl->m * c->in_numel);
  c->act_out = g_new (float, pl->m * c->out_numel);
  c->grad_in = g_new (float, pl->m * c->out_numel);
  return TRUE;
}

KsPipeline *
ks_pipeline_new (KsCompute *compute, KsComm *comm, int stage, const KsPipelineShape *shape,
                 const KsLayerDesc *layers, gsize n_layers, const KsLayerDesc *loss,
                 const KsLayerDesc *metric, GError **error)
{
  g_autoptr (KsPipeline) pl = g_new0 (KsPipeline, 1);
  int p = shape->stages, v = shape->virtual_stages;
  ShapeMessage carried = { 0 };

  pl->mailbox = g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) g_bytes_unref);
  pl->pending = g_ptr_array_new ();
  pl->posted = g_hash_table_new (NULL, NULL);
  pl->overlap = TRUE;
  if ((pl->schedule = ks_schedule_new (shape->schedule, p, v, shape->micro_batches, error))
      == NULL)
    return NULL;
  if (p * v > 4095 || shape->micro_batches > 65535 || stage < 0 || stage >= p
      || shape->recompute_interval < 0)
    {
      ks_invalid (error, "pipeline: stage %d of %d, %d chunks, %d micro-batches, recompute "
                  "interval %d: stages x virtual stages must stay below 4096, micro-batches "
                  "below 65536", stage, p, p * v, shape->micro_batches,
                  shape->recompute_interval);
      return NULL;
    }
  if (p > 1 && (comm == NULL || ks_comm_size (comm) != p || ks_comm_rank (comm) != stage))
    {
      ks_invalid (error, "pipeline: %d stages need a communicator of %d ranks with this stage "
                  "(%d) as its rank; it has %d", p, p, stage, comm ? ks_comm_size (comm) : 0);
      return NULL;
    }
  if (shape->boundaries[p * v] != n_layers)
    {
      ks_invalid (error, "pipeline: the segmentation ends at layer %" G_GSIZE_FORMAT
                  " but the list has %" G_GSIZE_FORMAT, shape->boundaries[p * v], n_layers);
      return NULL;
    }
  pl->compute = compute;
  pl->comm = comm;
  pl->stage = stage;
  pl->p = p;
  pl->v = v;
  pl->m = shape->micro_batches;
  pl->recompute = shape->recompute_interval;
  pl->model = ks_model_new (compute);
  pl->chunks = g_new0 (Chunk, v);
  if (!find_shared (pl, shape, layers, n_layers, error)
      || !ks_skip_layout (layers, n_layers, shape->boundaries, p * v, &pl->routes,
                          &pl->n_routes, error))
    return NULL;
  if (pl->n_routes > 4095)
    {
      ks_invalid (error, "pipeline: %" G_GSIZE_FORMAT " skip connections; at most 4095",
                  pl->n_routes);
      return NULL;
    }
  /* in global chunk order, each stage waiting for its input's shape */
  for (int g = 0; g < p * v; g++)
    {
      Chunk *c = &pl->chunks[g / p];
      if (g % p != stage)
        continue;
      c->global = g;
      if (!build_chunk (pl, c, shape, layers, loss, metric, &carried, error))
        {
          g_prefix_error (error, "pipeline stage %d, chunk %d: ", stage, g);
          return NULL;
        }
    }
  if (!ks_pipe_drain (pl, error)) /* the skip shapes */
    return NULL;
  return g_steal_pointer (&pl);
}

KsModel *
ks_pipeline_model (KsPipeline *pl)
{
  return pl->model;
}

const KsSchedule *
ks_pipeline_schedule (const KsPipeline *pl)
{
  return pl->schedule;
}

gboolean
ks_pipeline_groups (KsComm *world, int stages, KsComm **pipe, KsComm **data, GError **error)
{
  int n = ks_comm_size (world), rank = ks_comm_rank (world);
  int replicas = n / MAX (stages, 1), stage = rank % MAX (stages, 1);
  g_autofree int *ranks = g_new (int, MAX (stages, replicas));

  *pipe = *data = NULL;
  if (stages < 1 || n % stages != 0)
    return ks_invalid (error, "pipeline: %d ranks cannot be cut into pipelines of %d stages: "
                       "the rank count must be a multiple of the stage count", n, stages);
  for (int s = 0; s < stages; s++)
    ranks[s] = rank - stage + s;
  if ((*pipe = ks_comm_subgroup (world, ranks, stages, error)) == NULL)
    return FALSE;
  for (int d = 0; d < replicas; d++)
    ranks[d] = d * stages + stage;
  if ((*data = ks_comm_subgroup (world, ranks, replicas, error)) == NULL)
    {
      g_clear_pointer (pipe, ks_comm_free);
      return FALSE;
    }
  return TRUE;
}

void
ks_pipeline_set_data_parallel (KsPipeline *pl, KsComm *data)
{
  pl->data = data != NULL && ks_comm_size (data) > 1 ? data : NULL;
}

void
ks_pipeline_set_overlap (KsPipeline *pl, gboolean overlap)
{
  pl->overlap = overlap;
}

/* Every replica of this stage starts from replica 0's parameters. */
static gboolean
broadcast_replica0 (KsPipeline *pl, GError **error)
{
  KsArena *params = ks_model_parameters (pl->model);
  if (pl->data == NULL || params == NULL)
    return TRUE;
  if (!ks_comm_broadcast (pl->data, ks_arena_data (params), ks_arena_numel (params),
                          KS_DTYPE_FLOAT32, 0, error))
    {
      g_prefix_error (error, "pipeline stage %d: broadcasting replica 0's parameters: ",
                      pl->stage);
      return FALSE;
    }
  return TRUE;
}

gboolean
ks_pipeline_init (KsPipeline *pl, GError **error)
{
  if (!ks_model_init (pl->model, error) || !broadcast_replica0 (pl, error))
    return FALSE;
  for (guint i = 0; i < pl->shared->len; i++)
    {
      const Shared *s = &g_array_index (pl->shared, Shared, i);
      const KsTensor *t = ks_arena_tensor (ks_model_parameters (pl->model), s->name);
      if (!exchanges (pl, s))
        continue;
      g_autofree float *host = g_new (float, t->numel);
      gsize nbytes = t->numel * sizeof (float);
      if (s->owners[0] == pl->stage)
        {
          if (!ks_tensor_to_host (t, host, nbytes, error))
            return FALSE;
          for (int k = 1; k < s->n_owners; k++)
            if (!ks_comm_send (pl->comm, host, nbytes, s->owners[k],
                               tag_of (TAG_SHARED_INIT, i, 0), error))
              return FALSE;
        }
      else if (!ks_comm_recv (pl->comm, host, nbytes, s->owners[0],
                              tag_of (TAG_SHARED_INIT, i, 0), error)
               || !ks_compute_copy_to_device (pl->compute, t->data, host, nbytes, error))
        return FALSE;
    }
  ks_model_parameters_changed (pl->model);
  return TRUE;
}
