/* Gradients averaged in buckets on a communication thread while backward goes on
 * (average.h). The main thread only counts down and queues; the thread only reduces;
 * nothing else uses the communicator until finish has seen the queue drain. */
#include "ks-private.h"

typedef struct {
  gsize offset, count; /* in floats, in the gradient arena */
  int params, pending; /* parameters in the bucket; not yet ready this step */
  gboolean launched;
} Bucket;

struct KsGradAverage {
  KsComm *comm;
  float *data;
  Bucket *bucket;
  guint n;
  GHashTable *of_param; /* KsExpr * -> Bucket * */
  GThread *thread;
  GAsyncQueue *queue;   /* Bucket *, or &stop */
  GMutex lock;
  GCond idle;
  int in_flight;
  GError *failure;      /* the first allreduce that failed this step */
};

static Bucket stop;

static gpointer
reduce_buckets (gpointer p)
{
  KsGradAverage *s = p;
  Bucket *b;

  while ((b = g_async_queue_pop (s->queue)) != &stop)
    {
      GError *error = NULL;
      g_mutex_lock (&s->lock);
      gboolean failed = s->failure != NULL;
      g_mutex_unlock (&s->lock);
      if (!failed)
        ks_comm_allreduce (s->comm, s->data + b->offset, b->count, KS_DTYPE_FLOAT32,
                           KS_REDUCE_AVG, &error);
      g_mutex_lock (&s->lock);
      if (error != NULL)
        s->failure = error;
      if (--s->in_flight == 0)
        g_cond_broadcast (&s->idle);
      g_mutex_unlock (&s->lock);
    }
  return NULL;
}

typedef struct {
  KsExpr *param;
  gsize offset, numel;
} Slot;

static int
by_offset_descending (gconstpointer a, gconstpointer b)
{
  gsize x = ((const Slot *) a)->offset, y = ((const Slot *) b)->offset;
  return x < y ? 1 : x > y ? -1 : 0;
}

KsGradAverage *
ks_grad_average_new (KsModel *model, KsComm *comm, const KsParamGrad *pairs, gsize n_pairs,
                     gsize bucket_floats)
{
  KsArena *grads = ks_model_gradients (model);
  gsize n_slots = ks_arena_count (grads);
  KsGradAverage *s = g_new0 (KsGradAverage, 1);
  g_autoptr (GHashTable) averaged = g_hash_table_new (g_str_hash, g_str_equal);
  g_autofree Slot *slots = g_new0 (Slot, MAX (n_slots, 1));

  /* every gradient of the arena, those of the pairs with their parameter */
  for (gsize i = 0; i < n_pairs; i++)
    g_hash_table_insert (averaged, (gpointer) ks_expr_name (pairs[i].param), pairs[i].param);
  for (gsize i = 0; i < n_slots; i++)
    {
      const char *name;
      slots[i].numel = ks_arena_tensor_at (grads, i, &name, &slots[i].offset)->numel;
      slots[i].param = g_hash_table_lookup (averaged, name);
    }
  qsort (slots, n_slots, sizeof (Slot), by_offset_descending);

  s->comm = comm;
  s->data = ks_arena_data (grads);
  s->bucket = g_new0 (Bucket, MAX (n_pairs, 1));
  s->of_param = g_hash_table_new (NULL, NULL);
  for (gsize i = 0; i < n_slots; i++)
    {
      Bucket *b = &s->bucket[s->n];
      if (slots[i].param == NULL)
        {
          /* a gradient not averaged (pslib's rows) ends the bucket: a bucket covers the
           * pairs' gradients and the alignment between them only */
          if (b->params > 0)
            s->n++;
          continue;
        }
      if (b->params == 0)
        b->offset = slots[i].offset + slots[i].numel;
      b->count += b->offset - slots[i].offset; /* grows down to this parameter */
      b->offset = slots[i].offset;
      b->params++;
      g_hash_table_insert (s->of_param, slots[i].param, b);
      if (b->count >= bucket_floats)
        s->n++;
    }
  if (s->n < n_pairs && s->bucket[s->n].params > 0) /* the last, not closed by its size */
    s->n++;
  for (guint i = 0; i < s->n; i++)
    s->bucket[i].pending = s->bucket[i].params;
  g_debug ("%zu gradients in %u buckets of about %zu KiB, averaged while backward "
           "runs", n_pairs, s->n, bucket_floats * sizeof (float) / 1024);
  g_mutex_init (&s->lock);
  g_cond_init (&s->idle);
  s->queue = g_async_queue_new ();
  s->thread = g_thread_new ("ks-grad-allreduce", reduce_buckets, s);
  return s;
}

void
ks_grad_average_free (KsGradAverage *s)
{
  if (s == NULL)
    return;
  g_async_queue_push (s->queue, &stop);
  g_thread_join (s->thread);
  g_async_queue_unref (s->queue);
  g_hash_table_unref (s->of_param);
  g_clear_error (&s->failure);
  g_mutex_clear (&s->lock);
  g_cond_clear (&s->idle);
  g_free (s->bucket);
  g_free (s);
}

void
ks_grad_average_ready (KsModel *model, KsExpr *param, gpointer data)
{
  KsGradAverage *s = data;
  Bucket *b = g_hash_table_lookup (s->of_param, param);

  if (b == NULL || b->launched || --b->pending > 0)
    return;
  b->launched = TRUE;
  g_mutex_lock (&s->lock);
  s->in_flight++;
  g_mutex_unlock (&s->lock);
  g_async_queue_push (s->queue, b);
}

gboolean
ks_grad_average_finish (KsGradAverage *s, GError **error)
{
  gboolean ok = TRUE;

  g_mutex_lock (&s->lock);
  while (s->in_flight > 0)
    g_cond_wait (&s->idle, &s->lock);
  g_mutex_unlock (&s->lock);
  if (s->failure != NULL)
    {
      g_propagate_prefixed_error (error, g_steal_pointer (&s->failure),
                                  "averaging gradients: ");
      ok = FALSE;
    }
  for (guint i = 0; i < s->n; i++)
    {
      Bucket *b = &s->bucket[i];
      if (ok && !b->launched)
        ok = ks_comm_allreduce (s->comm, s->data + b->offset, b->count, KS_DTYPE_FLOAT32,
                                KS_REDUCE_AVG, error);
      b->launched = FALSE;
      b->pending = b->params;
    }
  return ok;
}
