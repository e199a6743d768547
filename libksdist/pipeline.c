/* The pipeline executor (pipeline.h): one stage's chunks of a layer list on one model,
 * and the stage's schedule program run over the communicator.
 *
 * Every transfer has its own tag, made of its kind, the global chunk that receives it
 * and the micro-batch, so messages never meet the wrong receive. A micro-batch's
 * activations are set aside between its forward and its backward (a KsStash per chunk
 * and micro-batch; with recompute, only the chunk's data and each k-th layer's output),
 * and its parameter gradients add up in the model's gradient arena. */
#include "model-private.h"

#include <ksdist/pipeline.h>

#include <math.h>
#include <string.h>

/* the skip kinds name their route where the others name a chunk */
enum { TAG_ACTIVATION = 1, TAG_GRADIENT, TAG_SHAPE, TAG_SHARED_INIT, TAG_SHARED_GRAD, TAG_TRACE,
       TAG_SKIP_SHAPE, TAG_SKIP_VALUE, TAG_SKIP_GRAD, TAG_CHECKPOINT, TAG_CHECKPOINT_DONE };

static guint32
tag_of (int kind, int chunk, int micro_batch)
{
  return (guint32) kind << 28 | (guint32) chunk << 16 | (guint32) micro_batch;
}

typedef struct {
  gint64 ndim, shape[KS_TENSOR_MAX_DIMS];
} ShapeMessage;

/* A chunk's end of a skip connection to another chunk. */
typedef struct {
  int route;              /* index in the pipeline's routes */
  int peer;               /* the stage of the other end */
  KsExpr *expr;           /* stashing end: the stashed value; popping end: its data */
  gsize numel;
  float *value, *grad;    /* per micro-batch, on the host */
  ShapeMessage shape;     /* stashing end: sent to the popping end at build time */
} SkipEnd;

typedef struct {
  int global;             /* its global chunk */
  guint first, n;         /* its expressions */
  KsExpr *input;          /* "pipe.in.<global>": the previous chunk's output; NULL for 0 */
  KsExpr *out;            /* what goes on to the next chunk; the loss on the last one */
  KsExpr *metric;         /* on the last chunk, when a metric was given */
  gboolean *kept;         /* with recompute: the expressions a stash keeps */
  KsStash **stash;        /* per micro-batch, between its forward and its backward */
  GPtrArray *spare;       /* stashes holding tensors free for the next forward */
  gsize in_numel, out_numel;
  float *act_in, *act_out, *grad_in, *grad_out; /* per micro-batch, on the host */
  GPtrArray *skip_out, *skip_in; /* SkipEnd: values this chunk stashes and pops */
} Chunk;

typedef struct {
  char *name;
  int owners[64], n_owners; /* stages with a layer sharing it, ascending */
} Shared;

typedef struct {
  KsPipeInstr instr;
  gint64 start, end; /* monotonic microseconds */
} Event;

struct KsPipeline {
  KsCompute *compute;
  KsComm *comm;
  KsComm *data;         /* this stage's data-parallel group (other replicas); may be NULL */
  double clip_norm;     /* > 0: gradients clipped by their norm over every stage */
  int stage, p, v, m, recompute;
  KsSchedule *schedule;
  KsModel *model;
  Chunk *chunks;        /* the v local chunks */
  KsSkipRoute *routes;  /* the skip layout */
  gsize n_routes;
  GArray *shared;       /* Shared, by name */
  GHashTable *mailbox;  /* tag -> GBytes: transfers from this stage to itself */
  GPtrArray *pending;   /* KsCommRequest of sends still in flight */
  GHashTable *posted;   /* tag -> KsCommRequest of a receive posted at the step's start */
  gint64 steps;
  double busy, wall; /* seconds in forwards and backwards, and in steps up to the last one */
  GArray *events;    /* Event, when recording */
};

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
static gboolean
drain (KsPipeline *pl, GError **error)
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
static void
cancel_posted (KsPipeline *pl)
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
  drain (pl, NULL);
  cancel_posted (pl);
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
 * drain), to this stage into the mailbox. */
static gboolean
send_to (KsPipeline *pl, const void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
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

static gboolean
recv_from (KsPipeline *pl, void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
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
      if (!recv_from (pl, &end->shape, sizeof end->shape, end->peer,
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
      if (!send_to (pl, &end->shape, sizeof end->shape, end->peer,
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
  if (!drain (pl, error)) /* the skip shapes */
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

/* Whether this stage owns shared parameter `s`, and it is shared with another stage. */
static gboolean
exchanges (const KsPipeline *pl, const Shared *s)
{
  gboolean mine = FALSE;
  for (int i = 0; i < s->n_owners; i++)
    mine |= s->owners[i] == pl->stage;
  return mine && s->n_owners > 1;
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

/* The gradients of this stage averaged over its replicas, before the update. */
static gboolean
average_replicas (KsPipeline *pl, GError **error)
{
  KsArena *grads = ks_model_gradients (pl->model);
  return pl->data == NULL
         || ks_comm_allreduce (pl->data, ks_arena_data (grads), ks_arena_numel (grads),
                               KS_DTYPE_FLOAT32, KS_REDUCE_AVG, error);
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
 * process has it, is at most clip_norm: the stages sum their squares. */
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
  double norm = sqrt (squares);
  return norm <= pl->clip_norm
         || ks_compute_axpby (pl->compute, (float) (pl->clip_norm / norm), ks_arena_data (grads),
                              0, ks_arena_data (grads), n, error);
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

/* ---- running the program ---- */

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
            && (!send_to (pl, all + me * n, nbytes, s->owners[k], tag_of (TAG_SHARED_GRAD, i, 0),
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
      if (!drain (pl, ok ? error : NULL) || !ok)
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
      if (!recv_from (pl, end->value + mb * end->numel, f.nbytes, end->peer,
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
          || !send_to (pl, value, end->numel * sizeof (float), end->peer,
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
      if (!recv_from (pl, end->grad + mb * end->numel, end->numel * sizeof (float), end->peer,
                      tag_of (TAG_SKIP_GRAD, end->route, mb), error))
        return FALSE;
      g_ptr_array_add (outs, end->expr);
      g_ptr_array_add (seeds, end->grad + mb * end->numel);
    }
  if (c->input != NULL)
    g_ptr_array_add (inputs, c->input);
  for (guint i = 0; i < c->skip_in->len; i++)
    g_ptr_array_add (inputs, ((SkipEnd *) g_ptr_array_index (c->skip_in, i))->expr);
  if (!ks_model_sweep_from (pl->model, (KsExpr **) outs->pdata, (const float **) seeds->pdata,
                            outs->len, (KsExpr **) inputs->pdata, inputs->len, error))
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
          || !send_to (pl, grad, end->numel * sizeof (float), end->peer,
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
                   ? send_to (pl, buf, nbytes, in->peer, tag, error)
                   : recv_from (pl, buf, nbytes, in->peer, tag, error);
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
  if (!ks_compute_fill_zero (pl->compute, ks_arena_data (grads),
                             ks_arena_numel (grads) * sizeof (float), error)
      || !post_receives (pl, program, error))
    {
      cancel_posted (pl);
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
          drain (pl, NULL);
          cancel_posted (pl);
          return FALSE;
        }
    }
  pl->steps++;
  pl->wall += (last_compute - start) / 1e6;
  *loss = loss_sum / pl->m;
  return drain (pl, error) && from_last_stage (pl, loss, error)
         && (pl->data == NULL
             || ks_comm_allreduce (pl->data, loss, 1, KS_DTYPE_FLOAT64, KS_REDUCE_AVG, error));
}

gboolean
ks_pipeline_evaluate (KsPipeline *pl, const KsFeed *feeds, gsize n_feeds, double *value,
                      GError **error)
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
              || recv_from (pl, c->act_in + mb * c->in_numel, c->in_numel * sizeof (float),
                            (g - 1) % pl->p, tag_of (TAG_ACTIVATION, g, mb), error))
             && run_forward (pl, c, mb, feeds, n_feeds, target, error);
        if (ok && g < last)
          ok = ks_tensor_to_host (c->out->value, c->act_out + mb * c->out_numel,
                                  c->out_numel * sizeof (float), error)
               && send_to (pl, c->act_out + mb * c->out_numel, c->out_numel * sizeof (float),
                           (g + 1) % pl->p, tag_of (TAG_ACTIVATION, g + 1, mb), error);
        else if (ok)
          {
            ok = ks_tensor_to_host (target->value, &v, sizeof v, error);
            sum += v;
          }
      }
  ks_model_set_training (pl->model, training);
  ok = drain (pl, ok ? error : NULL) && ok;
  *value = sum / pl->m;
  return ok && from_last_stage (pl, value, error);
}

/* ---- timing and the trace ---- */

void
ks_pipeline_timing (const KsPipeline *pl, double *busy, double *wall)
{
  *busy = pl->busy;
  *wall = pl->wall;
}

void
ks_pipeline_record (KsPipeline *pl, gboolean on)
{
  if (on && pl->events == NULL)
    pl->events = g_array_new (FALSE, FALSE, sizeof (Event));
  else if (!on && pl->events != NULL)
    g_clear_pointer (&pl->events, g_array_unref);
}

/* This stage's events as Chrome trace events (process `replica`, one thread per stage),
 * comma-led. */
static GString *
trace_events (const KsPipeline *pl, int replica)
{
  static const char *const category[] = { "forward", "backward", "send", "recv", "send",
                                          "recv", "shared", "optimizer" };
  GString *text = g_string_new (NULL);

  g_string_append_printf (text, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, "
                          "\"tid\": %d, \"args\": {\"name\": \"stage %d\"}}", replica, pl->stage,
                          pl->stage);
  for (guint i = 0; pl->events != NULL && i < pl->events->len; i++)
    {
      const Event *e = &g_array_index (pl->events, Event, i);
      g_autofree char *name = ks_schedule_describe_instr (&e->instr);
      g_string_append_printf (text, ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", "
                              "\"ts\": %" G_GINT64_FORMAT ", \"dur\": %" G_GINT64_FORMAT
                              ", \"pid\": %d, \"tid\": %d}",
                              name, category[e->instr.op], e->start, e->end - e->start,
                              replica, pl->stage);
    }
  return text;
}

gboolean
ks_pipeline_trace_events (KsPipeline *pl, int replica, GString **events, GError **error)
{
  g_autoptr (GString) mine = trace_events (pl, replica);
  gint64 len = mine->len;

  *events = NULL;
  if (pl->stage > 0)
    return ks_comm_send (pl->comm, &len, sizeof len, 0, tag_of (TAG_TRACE, 0, 0), error)
           && ks_comm_send (pl->comm, mine->str, len, 0, tag_of (TAG_TRACE, 0, 1), error);
  g_autoptr (GString) all = g_string_new (NULL);
  g_string_append_printf (all, ",\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
                          "\"args\": {\"name\": \"ksdist pipeline, replica %d\"}}", replica,
                          replica);
  g_string_append_len (all, mine->str, mine->len);
  for (int s = 1; s < pl->p; s++)
    {
      if (!ks_comm_recv (pl->comm, &len, sizeof len, s, tag_of (TAG_TRACE, 0, 0), error))
        return FALSE;
      if (len < 0 || len > (1 << 30))
        return ks_invalid (error, "pipeline: stage %d sent a trace of %" G_GINT64_FORMAT
                           " bytes", s, len);
      gsize at = all->len;
      g_string_set_size (all, at + len);
      if (!ks_comm_recv (pl->comm, all->str + at, len, s, tag_of (TAG_TRACE, 0, 1), error))
        return FALSE;
    }
  *events = g_steal_pointer (&all);
  return TRUE;
}

/* ---- checkpoints: each stage its part ---- */

/* The shared parameters this stage holds that a lower stage saves (NULL-terminated). */
static GStrv
saved_elsewhere (const KsPipeline *pl)
{
  GPtrArray *names = g_ptr_array_new ();
  for (guint i = 0; i < pl->shared->len; i++)
    {
      const Shared *s = &g_array_index (pl->shared, Shared, i);
      if (exchanges (pl, s) && s->owners[0] != pl->stage)
        g_ptr_array_add (names, g_strdup (s->name));
    }
  g_ptr_array_add (names, NULL);
  return (GStrv) g_ptr_array_free (names, FALSE);
}

/* Stage 0 tells every stage `ok`; the others learn it. */
static gboolean
agree (KsPipeline *pl, int kind, gboolean *ok, GError **error)
{
  guint8 v = *ok;
  for (int s = 1; s < pl->p; s++)
    if (pl->stage == 0 ? !ks_comm_send (pl->comm, &v, 1, s, tag_of (kind, 0, 0), error)
                       : s == pl->stage && !ks_comm_recv (pl->comm, &v, 1, 0, tag_of (kind, 0, 0),
                                                          error))
      return FALSE;
  *ok = v;
  return TRUE;
}

gboolean
ks_pipeline_save_checkpoint (KsPipeline *pl, KsOptimizer *optimizer, const char *dir,
                             gint64 step, GHashTable *metadata, guint keep, GError **error)
{
  g_autofree char *final = g_strdup_printf ("%s/checkpoint-%" G_GINT64_FORMAT, dir, step);
  g_autofree char *tmp = NULL;
  g_auto (GStrv) skip = saved_elsewhere (pl);
  g_autoptr (GError) mine = NULL;
  gint64 len = 0;
  gboolean ok;

  if (pl->p == 1)
    return ks_checkpoint_save (dir, step, pl->model, optimizer, metadata, keep, error);
  /* stage 0 makes the temporary directory and tells the others where it is */
  if (pl->stage == 0)
    {
      tmp = ks_checkpoint_begin (final, &mine);
      len = tmp != NULL ? (gint64) strlen (tmp) : 0;
      for (int s = 1; s < pl->p; s++)
        if (!ks_comm_send (pl->comm, &len, sizeof len, s, tag_of (TAG_CHECKPOINT, 0, 0), error)
            || (len > 0
                && !ks_comm_send (pl->comm, tmp, len, s, tag_of (TAG_CHECKPOINT, 0, 1), error)))
          {
            if (tmp != NULL)
              ks_checkpoint_abort (tmp);
            return FALSE;
          }
    }
  else
    {
      if (!ks_comm_recv (pl->comm, &len, sizeof len, 0, tag_of (TAG_CHECKPOINT, 0, 0), error))
        return FALSE;
      if (len < 0 || len > 65536)
        return ks_invalid (error, "pipeline stage %d: stage 0 named a checkpoint directory of "
                           "%" G_GINT64_FORMAT " bytes", pl->stage, len);
      tmp = g_malloc0 (len + 1);
      if (len > 0
          && !ks_comm_recv (pl->comm, tmp, len, 0, tag_of (TAG_CHECKPOINT, 0, 1), error))
        return FALSE;
      if (len == 0)
        g_set_error (&mine, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO,
                     "stage 0 could not begin %s (its message says why)", final);
    }
  /* every stage its part; stage 0 commits only when all of them wrote theirs */
  ok = mine == NULL
       && ks_checkpoint_write_part (tmp, pl->stage, pl->p, step, pl->model, optimizer,
                                    metadata, (const char *const *) skip, &mine);
  if (pl->stage == 0)
    for (int s = 1; s < pl->p; s++)
      {
        guint8 theirs = 0;
        if (!ks_comm_recv (pl->comm, &theirs, 1, s, tag_of (TAG_CHECKPOINT, 0, 2), error))
          {
            if (tmp != NULL)
              ks_checkpoint_abort (tmp);
            return FALSE;
          }
        if (!theirs && ok)
          {
            ok = FALSE;
            g_set_error (&mine, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO,
                         "stage %d could not write its part of %s (its message says why)", s,
                         final);
          }
      }
  else
    {
      guint8 v = ok;
      if (!ks_comm_send (pl->comm, &v, 1, 0, tag_of (TAG_CHECKPOINT, 0, 2), error))
        return FALSE;
    }
  if (pl->stage == 0 && tmp != NULL)
    ok = ok ? ks_checkpoint_commit (tmp, final, keep, &mine) : (ks_checkpoint_abort (tmp), FALSE);
  if (!agree (pl, TAG_CHECKPOINT_DONE, &ok, error))
    return FALSE;
  if (!ok && mine == NULL)
    g_set_error (&mine, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO,
                 "%s was not saved: another stage failed (its message says why)", final);
  if (!ok)
    g_propagate_error (error, g_steal_pointer (&mine));
  return ok;
}

gboolean
ks_pipeline_load_checkpoint (KsPipeline *pl, KsOptimizer *optimizer, const char *path,
                             gint64 *step, GHashTable **metadata, GError **error)
{
  gint64 saved;
  if (optimizer != NULL)
    ks_optimizer_bind (optimizer, pl->model); /* as its first step would */
  if (!ks_checkpoint_load (path, pl->model, optimizer, &saved, metadata, error))
    return FALSE;
  pl->steps = saved; /* the dropout masks of the next step follow from it */
  if (step != NULL)
    *step = saved;
  return TRUE;
}
