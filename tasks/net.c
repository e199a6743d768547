/* A list of NetLayers as the trainer's layer list: each layer one builder, the first
 * making the data "x", skip connections through the pipeline's stash and pop, the loss
 * and the metric making the labels "y". */
#include "net.h"

#include <ksdist/gpt.h>

#include <string.h>

static const char *
input_name (const Net *net)
{
  return net->input != NULL ? net->input : "x";
}

static const char *
labels_name (const Net *net)
{
  return net->labels != NULL ? net->labels : "y";
}

static KsExpr *
net_input (KsModel *model, const Net *net, GError **error)
{
  gint64 shape[5] = { net->rows };
  if (net->context > 0)
    {
      gint64 ids = net->rows * net->context;
      return ks_model_data (model, input_name (net), 1, &ids, KS_DTYPE_INT64, error);
    }
  memcpy (shape + 1, net->in_shape, net->in_ndim * sizeof (gint64));
  return ks_model_data (model, input_name (net), 1 + net->in_ndim, shape, KS_DTYPE_FLOAT32,
                        error);
}

static KsExpr *
with_act (KsExpr *x, int act, GError **error)
{
  return x == NULL || act < 0 ? x : ks_unary ((KsUnaryOp) act, x, error);
}

/* The table of an embedding (made by whichever of it and a tied linear comes first on
 * this model: a pipeline stage may hold only one of them). */
static KsExpr *
table_of (KsModel *model, const NetLayer *emb, GError **error)
{
  const gint64 shape[] = { emb->vocab, emb->size };
  KsInit small = { KS_INIT_NORMAL, 0, 0.02, emb->seed };
  return ks_model_shared_parameter (model, emb->table, 2, shape, small, error);
}

static KsExpr *
positions (KsModel *model, KsExpr *x, const NetLayer *l, GError **error)
{
  const Net *net = l->net;
  gint64 ids = net->rows * net->context;
  g_autofree char *shape = ks_expr_shape_string (x);
  const char *comma = strrchr (shape, ',');
  const gint64 table[] = { net->context, comma != NULL ? g_ascii_strtoll (comma + 1, NULL, 10) : 0 };
  KsInit small = { KS_INIT_NORMAL, 0, 0.01, l->seed };
  KsExpr *at = ks_model_find (model, "positions"), *pe;
  if (at == NULL && (at = ks_model_data (model, "positions", 1, &ids, KS_DTYPE_INT64, error)) == NULL)
    return NULL;
  if ((pe = ks_model_parameter (model, l->table, 2, table, small, error)) == NULL
      || (pe = ks_embedding (at, pe, error)) == NULL)
    return NULL;
  return ks_add (x, pe, error);
}

static KsExpr *
apply (KsModel *model, KsExpr *x, const NetLayer *l, GError **error)
{
  static const int swap[] = { 1, 0 };
  KsExpr *t;
  g_autofree char *shape = ks_expr_shape_string (x);
  switch (l->type)
    {
    case NET_LINEAR:
      /* the mlp takes samples of any shape as their values in a row */
      if (l->flatten && strchr (shape, ',') != strrchr (shape, ','))
        {
          if ((x = ks_flatten (x, error)) == NULL)
            return NULL;
          g_free (shape);
          shape = ks_expr_shape_string (x);
        }
      if (strchr (shape, ',') == NULL || strchr (shape, ',') != strrchr (shape, ','))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "its input is %s; a linear layer takes [rows, features]: put a "
                       "flatten layer before it", shape);
          return NULL;
        }
      if (l->tie >= 0) /* the embedding's table [vocab, width], transposed */
        return (t = table_of (model, &l->net->layer[l->tie], error)) == NULL
                       || (t = ks_transpose (t, swap, error)) == NULL
                   ? NULL
                   : with_act (ks_matmul (x, t, error), l->act, error);
      x = ks_fc (x, l->size, l->act, l->name, l->seed, error);
      return x != NULL && l->rate > 0 ? ks_dropout (x, l->rate, l->dropout_seed, error) : x;
    case NET_CONV2D:
      return with_act (ks_conv2d (x, l->size, l->kernel, l->stride, l->padding, l->name,
                                  l->seed, error), l->act, error);
    case NET_MAX_POOL:
      return ks_max_pool (x, l->kernel, l->stride, error);
    case NET_AVG_POOL:
      return ks_avg_pool (x, l->kernel, l->stride, l->padding, error);
    case NET_BATCH_NORM:
      return with_act (ks_batch_norm (x, l->name, l->momentum, l->eps, error), l->act, error);
    case NET_LAYER_NORM:
      return with_act (ks_layer_norm (x, l->name, l->eps, error), l->act, error);
    case NET_DROPOUT:
      return ks_dropout (x, l->rate, l->seed, error);
    case NET_FLATTEN:
      return ks_flatten (x, error);
    case NET_ACTIVATION:
      return with_act (x, l->act, error);
    case NET_EMBEDDING:
      if (ks_expr_dtype (x) != KS_DTYPE_INT64)
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "an embedding takes token ids, the first layer of a model on [data] "
                       "task = tokens");
          return NULL;
        }
      return (t = table_of (model, l, error)) == NULL ? NULL : ks_embedding (x, t, error);
    case NET_POSITION:
      return positions (model, x, l, error);
    case NET_TRANSFORMER:
      return ks_transformer_block (x, l->name, l->net->rows, l->heads, l->rate, l->seed, error);
    }
  g_return_val_if_reached (NULL);
}

/* Layer l, its skips and its error's prefix. */
static KsExpr *
build_one (KsModel *model, KsExpr *x, const NetLayer *l, GError **error)
{
  x = apply (model, x, l, error);
  for (int i = 0; x != NULL && l->pop != NULL && l->pop[i] != NULL; i++)
    {
      KsExpr *skip = ks_layer_pop (model, l->pop[i], error);
      x = skip == NULL ? NULL : ks_add (x, skip, error);
    }
  for (int i = 0; x != NULL && l->stash != NULL && l->stash[i] != NULL; i++)
    if (!ks_layer_stash (model, l->stash[i], x, error))
      x = NULL;
  if (x == NULL && l->kind == l->name && error != NULL && *error != NULL)
    {
      /* a [layer.NAME] group's: a shape that does not fit is the config's mistake (a
       * kernel wider than its input, ...), refused as one (ksdist config exits 2) */
      GError *e = *error;
      if (e->domain != KS_CONFIG_ERROR)
        {
          *error = g_error_new (KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE, "%s", e->message);
          g_error_free (e);
        }
      g_prefix_error (error, "[layer.%s]: ", l->name);
    }
  return x;
}

/* One layer of the list: layer `args` and those that join it. */
static KsExpr *
build_layer (KsModel *model, KsExpr *x, gconstpointer args, GError **error)
{
  const NetLayer *l = args, *end = l->net->layer + l->net->n;
  if (x == NULL && (x = net_input (model, l->net, error)) == NULL)
    return NULL;
  do
    x = build_one (model, x, l++, error);
  while (x != NULL && l < end && l->joins);
  return x;
}

/* the labels "y", made by whichever of the loss and the metric comes first */
static KsExpr *
labels (KsModel *model, const Net *net, GError **error)
{
  KsExpr *y = ks_model_find (model, labels_name (net));
  if (y != NULL)
    return y;
  gint64 rows = net->context > 0 ? net->rows * net->context : net->rows;
  if (net->loss != NET_LOSS_MSE)
    return ks_model_data (model, labels_name (net), 1, &rows, KS_DTYPE_INT64, error);
  const gint64 shape[] = { net->rows, net->outputs };
  return ks_model_data (model, labels_name (net), 2, shape, KS_DTYPE_FLOAT32, error);
}

/* The last layer must give what the labels need: [rows, outputs]. */
static gboolean
check_outputs (const Net *net, KsExpr *out, GError **error)
{
  g_autofree char *have = ks_expr_shape_string (out);
  gint64 rows = net->context > 0 ? net->rows * net->context : net->rows;
  g_autofree char *want = g_strdup_printf ("[%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]",
                                           rows, net->outputs);
  if (strcmp (have, want) == 0)
    return TRUE;
  if (net->loss == NET_LOSS_LOGISTIC)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[model] loss = logistic takes one logit a row, but the last layer (%s) "
                   "gives %s for %" G_GINT64_FORMAT " rows: end [model] net with a linear "
                   "layer of size = 1 ([layer.%s] size)", net->layer[net->n - 1].name, have,
                   rows, net->layer[net->n - 1].name);
      return FALSE;
    }
  g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
               "the last layer (%s) gives %s for %" G_GINT64_FORMAT " rows, but the data needs "
               "%s (%" G_GINT64_FORMAT " %s a row): end [model] net with a linear layer of "
               "size = %" G_GINT64_FORMAT, net->layer[net->n - 1].name, have, rows, want,
               net->outputs, net->loss == NET_LOSS_MSE ? "targets" : "classes", net->outputs);
  return FALSE;
}

static KsExpr *
net_loss (KsModel *model, KsExpr *out, gconstpointer args, GError **error)
{
  const Net *net = args;
  KsExpr *y, *d;
  if (!check_outputs (net, out, error) || (y = labels (model, net, error)) == NULL)
    return NULL;
  if (net->loss == NET_LOSS_CROSS_ENTROPY)
    return ks_softmax_cross_entropy (out, y, error);
  if (net->loss == NET_LOSS_LOGISTIC)
    return ks_sigmoid_cross_entropy (out, y, error);
  /* the mean of (out - y)^2 over rows and outputs */
  if ((d = ks_unary (KS_UNARY_NEG, y, error)) == NULL || (d = ks_add (out, d, error)) == NULL
      || (d = ks_mul (d, d, error)) == NULL)
    return NULL;
  return ks_mean (d, error);
}

static KsExpr *
net_metric (KsModel *model, KsExpr *out, gconstpointer args, GError **error)
{
  const Net *net = args;
  if (net->loss == NET_LOSS_LOGISTIC) /* the probabilities, for the AUC of the evaluation */
    return check_outputs (net, out, error) ? ks_sigmoid (out, error) : NULL;
  if (net->loss != NET_LOSS_CROSS_ENTROPY)
    return net_loss (model, out, args, error);
  KsExpr *y = labels (model, net, error);
  return y == NULL ? NULL : ks_accuracy (out, y, error);
}

/* Whether a linear layer uses embedding i's table. */
static gboolean
net_tied (const Net *net, gsize i)
{
  for (gsize k = 0; k < net->n; k++)
    if (net->layer[k].tie == (gssize) i)
      return TRUE;
  return FALSE;
}

gboolean
net_has_positions (const Net *net)
{
  for (gsize k = 0; k < net->n; k++)
    if (net->layer[k].type == NET_POSITION)
      return TRUE;
  return FALSE;
}

void
net_describe (Net *net, gint64 rows, int ndim, const gint64 *shape)
{
  net->rows = rows;
  net->in_ndim = ndim;
  if (ndim > 0) /* token models give no sample shape */
    memcpy (net->in_shape, shape, ndim * sizeof (gint64));
  g_free (net->desc);
  net->desc = g_new0 (KsLayerDesc, net->n);
  net->n_desc = 0;
  for (gsize i = 0; i < net->n; i++)
    {
      NetLayer *l = &net->layer[i];
      l->net = net;
      const char *shared = l->tie >= 0 ? l->table
                           : l->type == NET_EMBEDDING && net_tied (net, i) ? l->table
                                                                           : NULL;
      KsLayerDesc *d = l->joins && net->n_desc > 0 ? &net->desc[net->n_desc - 1]
                                                   : &net->desc[net->n_desc++];
      if (d->build == NULL)
        *d = (KsLayerDesc) { l->kind, build_layer, l };
      /* what the layers joined into one share, stash and pop (one list each, net.h) */
      g_warn_if_fail (d->stash == NULL || l->stash == NULL);
      g_warn_if_fail (d->pop == NULL || l->pop == NULL);
      d->shared = d->shared != NULL ? d->shared : shared;
      d->stash = d->stash != NULL ? d->stash : (const char *const *) l->stash;
      d->pop = d->pop != NULL ? d->pop : (const char *const *) l->pop;
    }
  static const char *const losses[] = { [NET_LOSS_CROSS_ENTROPY] = "CrossEntropy",
                                        [NET_LOSS_MSE] = "MeanSquaredError",
                                        [NET_LOSS_LOGISTIC] = "Logistic" };
  static const char *const metrics[] = { [NET_LOSS_CROSS_ENTROPY] = "Accuracy",
                                         [NET_LOSS_MSE] = "MeanSquaredError",
                                         [NET_LOSS_LOGISTIC] = "Probability" };
  net->loss_desc = (KsLayerDesc) { losses[net->loss], net_loss, net };
  net->metric_desc = (KsLayerDesc) { metrics[net->loss], net_metric, net };
}

gboolean
net_mlp (Net *net, const KsConfig *c, gint64 classes, GError **error)
{
  g_auto (GStrv) items = ks_config_get_list (c, "model", "hidden");
  const char *act_name = ks_config_get_string (c, "model", "activation");
  const char *const acts[] = { "relu", "tanh", "sigmoid", "gelu" };
  const KsUnaryOp act_ops[] = { KS_UNARY_RELU, KS_UNARY_TANH, KS_UNARY_SIGMOID, KS_UNARY_GELU };
  guint64 seed = ks_config_get_int (c, "model", "seed");
  float dropout = ks_config_get_double (c, "model", "dropout");
  KsUnaryOp act = KS_UNARY_TANH;
  guint hidden = g_strv_length (items);

  for (guint i = 0; i < G_N_ELEMENTS (acts); i++)
    if (strcmp (act_name, acts[i]) == 0)
      act = act_ops[i];
  net->loss = NET_LOSS_CROSS_ENTROPY;
  net->outputs = classes;
  net->n = hidden + 1;
  net->layer = g_new0 (NetLayer, net->n);
  /* hidden layers fc_0, fc_1, ..., then out (as the names of earlier checkpoints) */
  for (guint i = 0; i <= hidden; i++)
    {
      NetLayer *l = &net->layer[i];
      gboolean out = i == hidden;
      guint64 size;
      if (!out && !g_ascii_string_to_unsigned (items[i], 10, 1, 1 << 20, &size, NULL))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "[model] hidden: '%s' is not a layer size (an integer in [1, 1048576])",
                       items[i]);
          return FALSE;
        }
      l->name = out ? g_strdup ("out") : g_strdup_printf ("fc_%u", i);
      l->kind = "Linear";
      l->type = NET_LINEAR;
      l->size = out ? classes : (gint64) size;
      l->act = out ? -1 : (int) act;
      l->seed = seed + (out ? 1000 : i);
      l->rate = out ? 0 : dropout;
      l->dropout_seed = l->seed + 500;
      l->tie = -1;
    }
  net->layer[0].flatten = TRUE;
  return TRUE;
}

gboolean
net_on_tokens (Net *net, const KsConfig *c, gint64 vocab, gint64 context, const char *source,
               GError **error)
{
  if (!net_from_config (net, c, NET_LOSS_CROSS_ENTROPY, vocab, vocab, error))
    return FALSE;
  if (net->layer[0].type != NET_EMBEDDING)
    return ks_tasks_config_error (error, "[layer.%s]: a model on tokens starts with an "
                                  "embedding layer (type = embedding)", net->layer[0].name);
  /* the head's outputs: the embedding's vocabulary when it sets one */
  net->outputs = net->layer[0].vocab;
  if (net->outputs < vocab)
    return ks_tasks_config_error (error, "[layer.%s] vocab = %" G_GINT64_FORMAT ", but %s holds "
                                  "token %" G_GINT64_FORMAT ": raise vocab or leave it out",
                                  net->layer[0].name, net->outputs, source, vocab - 1);
  net->context = context;
  return TRUE;
}

void
net_clear (Net *net)
{
  for (gsize i = 0; i < net->n; i++)
    {
      g_free (net->layer[i].name);
      g_free (net->layer[i].table);
      g_strfreev (net->layer[i].stash);
      g_strfreev (net->layer[i].pop);
    }
  g_clear_pointer (&net->layer, g_free);
  g_clear_pointer (&net->desc, g_free);
  net->n = net->n_desc = 0;
}
