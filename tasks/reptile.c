/* Reptile on few-shot image sets (meta.h). Three models of one network share the weights
 * by copy: one trains tasks (inner_batch rows), one fine-tunes evaluation tasks
 * (eval_inner_batch rows), one predicts (the shots and one query in a batch). */
#include "tasks-private.h"

#include <math.h>
#include <string.h>

typedef struct {
  KsModel *model;
  KsExpr *loss, *logits;
  KsOptimizer *optimizer; /* NULL for the predicting net */
  int batch;
} Net;

struct KsReptile {
  KsCompute *compute;
  KsImageSet *set;
  KsComm *comm;
  KsReptileOptions o;
  Net train, tune, predict;
  gsize n_params;
  float *start, *moves; /* device: the weights before a meta-step, the tasks' moves */
  gsize image_floats;
  float *images, *batch; /* host: a task's images, a mini-batch */
  gint64 *labels, *batch_labels;
  KsReptileProgress progress;
  gpointer progress_data;
};

void
ks_reptile_set_progress (KsReptile *r, KsReptileProgress progress, gpointer data)
{
  r->progress = progress;
  r->progress_data = data;
}

static void
net_clear (Net *net)
{
  if (net->optimizer != NULL)
    ks_optimizer_free (net->optimizer);
  if (net->model != NULL)
    ks_model_free (net->model);
}

void
ks_reptile_free (KsReptile *r)
{
  if (r == NULL)
    return;
  net_clear (&r->train);
  net_clear (&r->tune);
  net_clear (&r->predict);
  if (r->start != NULL)
    ks_compute_free_memory (r->compute, r->start);
  if (r->moves != NULL)
    ks_compute_free_memory (r->compute, r->moves);
  g_free (r->images);
  g_free (r->batch);
  g_free (r->labels);
  g_free (r->batch_labels);
  g_free (r);
}

/* The network on `batch` images; the same names and seeds on every net, so their
 * parameter arenas have one layout. */
static gboolean
build_net (KsReptile *r, Net *net, int batch, KsRegistry *registry, const KsConfig *config,
           const char *optimizer, GError **error)
{
  int size = ks_image_set_size (r->set), channels = ks_image_set_channels (r->set);
  gboolean colour = channels == 3;
  const gint64 xshape[] = { batch, size, size, channels }, yshape[] = { batch };
  KsExpr *h, *y;

  net->batch = batch;
  net->model = ks_model_new (r->compute);
  if ((h = ks_model_data (net->model, "images", 4, xshape, KS_DTYPE_FLOAT32, error)) == NULL
      || (y = ks_model_data (net->model, "labels", 1, yshape, KS_DTYPE_INT64, error)) == NULL)
    return FALSE;
  for (int i = 0; i < 4; i++)
    {
      g_autofree char *conv = g_strdup_printf ("conv%d", i + 1);
      g_autofree char *bn = g_strdup_printf ("bn%d", i + 1);
      /* the paper's Mini-ImageNet net pools; its Omniglot one strides */
      if ((h = ks_conv2d (h, r->o.filters, 3, colour ? 1 : 2, 1, conv, r->o.seed + i, error))
              == NULL
          || (h = ks_batch_norm (h, bn, 0.01f, 1e-3f, error)) == NULL
          || (colour && (h = ks_max_pool (h, 2, 2, error)) == NULL)
          || (h = ks_relu (h, error)) == NULL)
        return FALSE;
    }
  if ((h = ks_flatten (h, error)) == NULL
      || (net->logits = ks_fc (h, r->o.ways, -1, "logits", r->o.seed + 4, error)) == NULL
      || (net->loss = ks_softmax_cross_entropy (net->logits, y, error)) == NULL
      || !ks_model_init (net->model, error))
    return FALSE;
  if (optimizer == NULL)
    return TRUE;
  if ((net->optimizer = ks_optimizer_new (registry, config, optimizer, error)) == NULL
      || !ks_optimizer_minimize (net->optimizer, net->model, net->loss, NULL, 0, NULL, error))
    return FALSE;
  return TRUE;
}

/* Whether a task of every split can be drawn (ways classes, each with the images a task
 * takes): found now, not after the training. */
static gboolean
splits_fit (KsImageSet *set, const KsReptileOptions *o, GError **error)
{
  static const char *const splits[] = { "train", "val", "test" };
  for (KsSplit s = KS_SPLIT_TRAIN; s <= KS_SPLIT_TEST; s++)
    {
      gsize need = s == KS_SPLIT_TRAIN ? (gsize) (o->train_shots > 0 ? o->train_shots : o->shots)
                                       : (gsize) o->shots + 1;
      if (ks_image_set_n_classes (set, s) < (gsize) o->ways)
        return ks_tasks_invalid (error, "reptile: %d-way tasks, but the %s split has %"
                           G_GSIZE_FORMAT " classes; lower [meta] ways or add classes", o->ways,
                           splits[s], ks_image_set_n_classes (set, s));
      for (gsize i = 0; i < ks_image_set_n_classes (set, s); i++)
        if (ks_image_set_class_size (set, s, i) < need)
          return ks_tasks_invalid (error, "reptile: class %s of the %s split has %" G_GSIZE_FORMAT
                             " images; its tasks take %" G_GSIZE_FORMAT " of a class (shots, "
                             "and one more to test; train_shots in training)",
                             ks_image_set_class_name (set, s, i), splits[s],
                             ks_image_set_class_size (set, s, i), need);
    }
  return TRUE;
}

KsReptile *
ks_reptile_new (KsRegistry *registry, const KsConfig *config, KsCompute *compute,
                KsImageSet *set, const char *optimizer, KsComm *comm,
                const KsReptileOptions *options, GError **error)
{
  g_autoptr (KsReptile) r = NULL;
  const KsReptileOptions *o = options;

  if (o->ways < 2 || o->shots < 1 || o->train_shots < 0 || o->inner_batch < 1
      || o->inner_iters < 1 || o->eval_inner_batch < 1 || o->eval_inner_iters < 1 || o->meta_batch < 1
      || o->filters < 1 || o->meta_iters < 1)
    return ks_tasks_invalid (error, "reptile: ways (%d) at least 2; shots, batches, iterations and "
                       "filters at least 1", o->ways), NULL;
  if (!splits_fit (set, o, error))
    return NULL;
  /* the host buffers of a task: at most 1 GiB */
  gint64 task_rows = (gint64) o->ways * MAX (o->shots + 1, o->train_shots);
  gint64 batch_rows = MAX (task_rows, MAX (o->inner_batch, o->eval_inner_batch));
  if (batch_rows * (gint64) ks_image_set_image_floats (set) * 4 > (G_GINT64_CONSTANT (1) << 30))
    return ks_tasks_invalid (error, "reptile: a task of %d ways x %d shots (or a batch of %d) of %"
                       G_GSIZE_FORMAT "-float images needs over 1 GiB; use fewer", o->ways,
                       MAX (o->shots + 1, o->train_shots),
                       MAX (o->inner_batch, o->eval_inner_batch),
                       ks_image_set_image_floats (set)), NULL;
  r = g_new0 (KsReptile, 1);
  r->compute = compute;
  r->set = set;
  r->comm = comm;
  r->o = *o;
  r->image_floats = ks_image_set_image_floats (set);
  r->images = g_new (float, (gsize) task_rows * r->image_floats);
  r->labels = g_new (gint64, task_rows);
  r->batch = g_new (float, (gsize) batch_rows * r->image_floats);
  r->batch_labels = g_new (gint64, batch_rows);
  if (!build_net (r, &r->train, o->inner_batch, registry, config, optimizer, error)
      || !build_net (r, &r->tune, o->eval_inner_batch, registry, config, optimizer, error)
      || !build_net (r, &r->predict, o->ways * o->shots + 1, registry, config, NULL, error))
    return NULL;
  r->n_params = ks_arena_numel (ks_model_parameters (r->train.model));
  if ((r->start = ks_compute_alloc (compute, r->n_params * sizeof (float), error)) == NULL
      || (r->moves = ks_compute_alloc (compute, r->n_params * sizeof (float), error)) == NULL)
    return NULL;
  /* every rank starts from rank 0's weights (they agree already when seeded alike) */
  if (comm != NULL
      && !ks_comm_broadcast (comm, ks_arena_data (ks_model_parameters (r->train.model)),
                             r->n_params, KS_DTYPE_FLOAT32, 0, error))
    return NULL;
  return g_steal_pointer (&r);
}

KsModel *
ks_reptile_model (KsReptile *r)
{
  return r->train.model;
}

static float *
weights (const Net *net)
{
  return ks_arena_data (ks_model_parameters (net->model));
}

/* to's weights = from (a device buffer) */
static gboolean
set_weights (KsReptile *r, const Net *to, const float *from, GError **error)
{
  if (!ks_compute_axpby (r->compute, 1, from, 0, weights (to), r->n_params, error))
    return FALSE;
  ks_model_parameters_changed (to->model);
  return TRUE;
}

/* A generator of task `index` of meta-step or evaluation round `iter`: a pure function
 * of the seed and both, so any rank draws the same task. */
static GRand *
task_rng (const KsReptile *r, guint64 stream, gint64 iter, gint64 index)
{
  guint32 seed[4] = { (guint32) r->o.seed, (guint32) (r->o.seed >> 32) ^ (guint32) stream,
                      (guint32) iter, (guint32) index };
  return g_rand_new_with_seed_array (seed, 4);
}

/* `iters` steps of `net` on the first `rows` images and labels of the task, in
 * mini-batches of net->batch drawn as supervised-reptile does: the rows shuffled, taken
 * in order, shuffled again when used up. `loss` gets the last step's. */
static gboolean
train_on (KsReptile *r, Net *net, int rows, int iters, GRand *rng, double *loss, GError **error)
{
  g_autofree int *order = g_new (int, rows);
  int next = rows; /* used up: shuffle first */
  KsFeed feeds[] = {
    { "images", r->batch, (gsize) net->batch * r->image_floats * sizeof (float) },
    { "labels", r->batch_labels, (gsize) net->batch * sizeof (gint64) },
  };

  for (int i = 0; i < rows; i++)
    order[i] = i;
  if (!ks_optimizer_reset (net->optimizer, error))
    return FALSE;
  for (int it = 0; it < iters; it++)
    {
      for (int k = 0; k < net->batch; k++)
        {
          if (next == rows)
            {
              for (int i = rows - 1; i > 0; i--)
                {
                  int j = g_rand_int_range (rng, 0, i + 1), t = order[i];
                  order[i] = order[j], order[j] = t;
                }
              next = 0;
            }
          int row = order[next++];
          memcpy (r->batch + k * r->image_floats, r->images + row * r->image_floats,
                  r->image_floats * sizeof (float));
          r->batch_labels[k] = r->labels[row];
        }
      if (!ks_optimizer_step (net->optimizer, feeds, 2, error))
        return FALSE;
    }
  const KsTensor *last = ks_expr_last_value (net->loss);
  float v = 0;
  if (loss != NULL && last != NULL && ks_tensor_to_host (last, &v, sizeof v, NULL))
    *loss = v;
  return TRUE;
}

gboolean
ks_reptile_step (KsReptile *r, gint64 iter, double *loss, GError **error)
{
  int rank = r->comm != NULL ? ks_comm_rank (r->comm) : 0;
  int size = r->comm != NULL ? ks_comm_size (r->comm) : 1;
  int shots = r->o.train_shots > 0 ? r->o.train_shots : r->o.shots, rows = r->o.ways * shots;
  double frac = (double) iter / r->o.meta_iters, loss_sum = 0;
  double step = frac * r->o.meta_step_final + (1 - frac) * r->o.meta_step;

  if (!ks_compute_axpby (r->compute, 1, weights (&r->train), 0, r->start, r->n_params, error)
      || !ks_compute_fill_zero (r->compute, r->moves, r->n_params * sizeof (float), error))
    return FALSE;
  for (int j = 0; j < r->o.meta_batch; j++)
    {
      g_autoptr (GRand) rng = task_rng (r, 1, iter, (gint64) rank * r->o.meta_batch + j);
      double task_loss = 0;
      /* moves += (trained - start) */
      if ((j > 0 && !set_weights (r, &r->train, r->start, error))
          || !ks_image_set_task (r->set, KS_SPLIT_TRAIN, r->o.ways, shots, rng, r->images,
                                 r->labels, error)
          || !train_on (r, &r->train, rows, r->o.inner_iters, rng, &task_loss, error)
          || !ks_compute_axpby (r->compute, 1, weights (&r->train), 1, r->moves, r->n_params,
                                error)
          || !ks_compute_axpby (r->compute, -1, r->start, 1, r->moves, r->n_params, error))
        return FALSE;
      loss_sum += task_loss;
    }
  if (r->comm != NULL
      && !ks_comm_allreduce (r->comm, r->moves, r->n_params, KS_DTYPE_FLOAT32, KS_REDUCE_SUM,
                             error))
    return FALSE;
  /* weights = start + step * mean move */
  if (!ks_compute_axpby (r->compute, 1, r->start, 0, weights (&r->train), r->n_params, error)
      || !ks_compute_axpby (r->compute, step / ((double) r->o.meta_batch * size), r->moves, 1,
                            weights (&r->train), r->n_params, error))
    return FALSE;
  ks_model_parameters_changed (r->train.model);
  if (loss != NULL)
    *loss = loss_sum / r->o.meta_batch;
  return TRUE;
}

/* The predicted class of the query at row `query` of the task, from one batch of the
 * shots and it. */
static gboolean
predict (KsReptile *r, int query, int *label, GError **error)
{
  int rows = r->o.ways * r->o.shots, cols = r->o.ways;
  g_autofree float *logits = g_new (float, (gsize) (rows + 1) * cols);
  KsFeed feed = { "images", r->batch, (gsize) (rows + 1) * r->image_floats * sizeof (float) };
  KsExpr *target = r->predict.logits;

  memcpy (r->batch, r->images, (gsize) rows * r->image_floats * sizeof (float));
  memcpy (r->batch + (gsize) rows * r->image_floats, r->images + (gsize) query * r->image_floats,
          r->image_floats * sizeof (float));
  if (!ks_model_run (r->predict.model, &feed, 1, &target, 1, error)
      || !ks_tensor_to_host (ks_expr_value (target, NULL), logits,
                             (gsize) (rows + 1) * cols * sizeof (float), error))
    return FALSE;
  const float *last = logits + (gsize) rows * cols;
  *label = 0;
  for (int j = 1; j < cols; j++)
    if (last[j] > last[*label])
      *label = j;
  return TRUE;
}

gboolean
ks_reptile_evaluate (KsReptile *r, KsSplit split, int n_tasks, guint64 seed, double *accuracy,
                     double *ci95, GError **error)
{
  int rank = r->comm != NULL ? ks_comm_rank (r->comm) : 0;
  int size = r->comm != NULL ? ks_comm_size (r->comm) : 1;
  int ways = r->o.ways, shots = r->o.shots, per_class = shots + 1;
  double sums[2] = { 0, 0 }; /* of the tasks' accuracies and their squares */
  g_autofree float *grouped = g_new (float, (gsize) ways * per_class * r->image_floats);
  g_autofree gint64 *grouped_labels = g_new (gint64, (gsize) ways * per_class);

  if (n_tasks < 1)
    return ks_tasks_invalid (error, "reptile: evaluation over %d tasks; at least 1", n_tasks);
  for (int t = rank; t < n_tasks; t += size)
    {
      g_autoptr (GRand) rng = task_rng (r, 2 + seed, split, t);
      int correct = 0;
      if (!ks_image_set_task (r->set, split, ways, per_class, rng, grouped, grouped_labels,
                              error))
        return FALSE;
      /* rows 0 .. ways * shots - 1: the shots; then one query of each class */
      for (int w = 0; w < ways; w++)
        for (int k = 0; k < per_class; k++)
          {
            int row = k < shots ? w * shots + k : ways * shots + w;
            memcpy (r->images + (gsize) row * r->image_floats,
                    grouped + ((gsize) w * per_class + k) * r->image_floats,
                    r->image_floats * sizeof (float));
            r->labels[row] = w;
          }
      if (!set_weights (r, &r->tune, weights (&r->train), error)
          || !train_on (r, &r->tune, ways * shots, r->o.eval_inner_iters, rng, NULL, error)
          || !set_weights (r, &r->predict, weights (&r->tune), error))
        return FALSE;
      for (int w = 0; w < ways; w++)
        {
          int label;
          if (!predict (r, ways * shots + w, &label, error))
            return FALSE;
          correct += label == w;
        }
      double acc = (double) correct / ways;
      sums[0] += acc, sums[1] += acc * acc;
      if (r->progress != NULL)
        r->progress (r->progress_data, (gsize) (t / size + 1),
                     (gsize) ((n_tasks - rank + size - 1) / size));
    }
  if (r->comm != NULL
      && !ks_comm_allreduce (r->comm, sums, 2, KS_DTYPE_FLOAT64, KS_REDUCE_SUM, error))
    return FALSE;
  double mean = sums[0] / n_tasks;
  double var = n_tasks > 1 ? MAX (0, (sums[1] - n_tasks * mean * mean) / (n_tasks - 1)) : 0;
  *accuracy = mean;
  if (ci95 != NULL)
    *ci95 = 1.96 * sqrt (var / n_tasks);
  return TRUE;
}
