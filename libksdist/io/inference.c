/* Inference models: the forward graph some targets need and its parameters, saved as a
 * checkpoint whose metadata holds the graph as JSON, so that it loads and runs without
 * the program or the config that built it. Saving rebuilds the graph from that JSON, so
 * what is written is what a load will build. */
#include "model/model-private.h"

#include <json-glib/json-glib.h>
#include <string.h>

#define GRAPH_KEY KS_INFERENCE_GRAPH_KEY
#define FILE_NAME "model.safetensors"

static const char *const unary_names[] = { "relu", "tanh", "sigmoid", "gelu",
                                           "exp",  "log",  "neg",     "sqrt" };

/* ---- the graph as JSON ---- */

static void
add_names (JsonBuilder *b, const char *member, KsExpr *const *exprs, guint n)
{
  json_builder_set_member_name (b, member);
  json_builder_begin_array (b);
  for (guint i = 0; i < n; i++)
    json_builder_add_string_value (b, exprs[i]->name);
  json_builder_end_array (b);
}

static void
add_ints (JsonBuilder *b, const char *member, int n, const gint64 *values, const int *ivalues)
{
  json_builder_set_member_name (b, member);
  json_builder_begin_array (b);
  for (int i = 0; i < n; i++)
    json_builder_add_int_value (b, values != NULL ? values[i] : ivalues[i]);
  json_builder_end_array (b);
}

static void
add_op (JsonBuilder *b, const KsExpr *e)
{
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, e->name);
  json_builder_set_member_name (b, "op");
  json_builder_add_string_value (b, ks_op_name (e->op));
  add_ints (b, "shape", e->ndim, e->shape, NULL);
  add_names (b, "in", e->in, e->n_in);
  switch (e->op)
    {
    case OP_DATA:
      json_builder_set_member_name (b, "dtype");
      json_builder_add_string_value (b, ks_dtype_name (e->dtype));
      break;
    case OP_UNARY:
      json_builder_set_member_name (b, "fn");
      json_builder_add_string_value (b, unary_names[e->attr]);
      break;
    case OP_SOFTMAX:
      json_builder_set_member_name (b, "log");
      json_builder_add_boolean_value (b, e->attr);
      break;
    case OP_LAYER_NORM:
      json_builder_set_member_name (b, "eps");
      json_builder_add_double_value (b, e->eps);
      break;
    case OP_ATTENTION:
      json_builder_set_member_name (b, "batch");
      json_builder_add_int_value (b, e->batch);
      json_builder_set_member_name (b, "heads");
      json_builder_add_int_value (b, e->heads);
      break;
    case OP_TRANSPOSE:
      add_ints (b, "perm", e->ndim, NULL, e->perm);
      break;
    case OP_DROPOUT:
      json_builder_set_member_name (b, "rate");
      json_builder_add_double_value (b, e->rate);
      break;
    case OP_CONV2D:
    case OP_MAX_POOL:
    case OP_AVG_POOL:
      add_ints (b, "window", 3, NULL, (const int[]) { e->conv.kh, e->conv.stride, e->conv.pad });
      break;
    case OP_BATCH_NORM:
      json_builder_set_member_name (b, "eps");
      json_builder_add_double_value (b, e->eps);
      json_builder_set_member_name (b, "momentum");
      json_builder_add_double_value (b, e->momentum);
      break;
    default:
      break;
    }
  json_builder_end_object (b);
}

/* The members of one op read from the file, each checked for its JSON type. */
typedef struct {
  const char *file;
  guint index;
  const char *name;
} Where;

static gboolean
bad_graph (GError **error, const Where *w, const char *format, ...) G_GNUC_PRINTF (3, 4);

static gboolean
bad_graph (GError **error, const Where *w, const char *format, ...)
{
  va_list args;
  va_start (args, format);
  ks_fail_valist (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_FORMAT, format, args);
  va_end (args);
  if (w->name != NULL)
    g_prefix_error (error, "%s: inference graph, op %u '%s': ", w->file, w->index, w->name);
  else
    g_prefix_error (error, "%s: inference graph: ", w->file);
  return FALSE;
}

static JsonNode *
member (JsonObject *o, const char *name, GType value_type, JsonNodeType node_type)
{
  JsonNode *n = o != NULL ? json_object_get_member (o, name) : NULL;
  if (n == NULL || json_node_get_node_type (n) != node_type)
    return NULL;
  if (node_type == JSON_NODE_VALUE && value_type == G_TYPE_DOUBLE)
    return json_node_get_value_type (n) == G_TYPE_DOUBLE
                   || json_node_get_value_type (n) == G_TYPE_INT64 ? n : NULL;
  return node_type != JSON_NODE_VALUE || json_node_get_value_type (n) == value_type ? n : NULL;
}

static const char *
string_member (JsonObject *o, const char *name)
{
  JsonNode *n = member (o, name, G_TYPE_STRING, JSON_NODE_VALUE);
  return n != NULL ? json_node_get_string (n) : NULL;
}

/* An array of at most `max` integers; its length, or -1 if it is not one. */
static int
ints_member (JsonObject *o, const char *name, gint64 *out, int max)
{
  JsonNode *n = member (o, name, G_TYPE_INVALID, JSON_NODE_ARRAY);
  JsonArray *a = n != NULL ? json_node_get_array (n) : NULL;
  if (a == NULL || json_array_get_length (a) > (guint) max)
    return -1;
  for (guint i = 0; i < json_array_get_length (a); i++)
    {
      JsonNode *v = json_array_get_element (a, i);
      if (!JSON_NODE_HOLDS_VALUE (v) || json_node_get_value_type (v) != G_TYPE_INT64)
        return -1;
      out[i] = json_node_get_int (v);
    }
  return json_array_get_length (a);
}

/* The names in an array member; NULL if it is not an array of strings. */
static GStrv
names_member (JsonObject *o, const char *name)
{
  JsonNode *n = member (o, name, G_TYPE_INVALID, JSON_NODE_ARRAY);
  JsonArray *a = n != NULL ? json_node_get_array (n) : NULL;
  g_autoptr (GStrvBuilder) names = g_strv_builder_new ();
  for (guint i = 0; a != NULL && i < json_array_get_length (a); i++)
    {
      JsonNode *v = json_array_get_element (a, i);
      if (!JSON_NODE_HOLDS_VALUE (v) || json_node_get_value_type (v) != G_TYPE_STRING)
        return NULL;
      g_strv_builder_add (names, json_node_get_string (v));
    }
  return a != NULL ? g_strv_builder_end (names) : NULL;
}

static const int arity[] = {
  [OP_PARAMETER] = 0, [OP_DATA] = 0,      [OP_MATMUL] = 2,    [OP_ADD] = 2,
  [OP_UNARY] = 1,     [OP_MEAN] = 1,      [OP_CROSS_ENTROPY] = 2, [OP_ACCURACY] = 2,
  [OP_EMBEDDING] = 2, [OP_LAYER_NORM] = 3, [OP_ATTENTION] = 1, [OP_GRAD] = -1,
  [OP_SOFTMAX] = 1,   [OP_RESHAPE] = 1,   [OP_TRANSPOSE] = 1, [OP_DROPOUT] = 1,
  [OP_MUL] = 2,       [OP_CONV2D] = 3,    [OP_MAX_POOL] = 1,  [OP_BATCH_NORM] = 5,
  [OP_AVG_POOL] = 1,  [OP_LOGISTIC] = 2,
};

static gboolean
op_from_name (const char *name, OpType *op)
{
  for (guint i = 0; i < G_N_ELEMENTS (arity); i++)
    if (name != NULL && strcmp (ks_op_name (i), name) == 0 && arity[i] >= 0)
      {
        *op = i;
        return TRUE;
      }
  return FALSE;
}

static double
double_member (JsonObject *o, const char *name, double fallback)
{
  JsonNode *n = member (o, name, G_TYPE_DOUBLE, JSON_NODE_VALUE);
  return n != NULL ? json_node_get_double (n) : fallback;
}

/* The batch the graph was saved with and the one it is built for: every op computed
 * from the feeds has a first dimension `saved` times some unit, built as `want` times it
 * (the feeds [batch, ...] or a GPT's [batch * context]). */
typedef struct {
  gint64 saved, want;
} Batch;

/* n for the batch wanted; the caller checked that n / saved * want fits (scale_shape). */
static gint64
batch_scaled (const Batch *b, gint64 n)
{
  return b->saved > 0 && n % b->saved == 0 ? n / b->saved * b->want : n;
}

/* An integer member in [1, 2^31), or 0. */
static gint64
count_member (JsonObject *o, const char *name)
{
  JsonNode *n = member (o, name, G_TYPE_INT64, JSON_NODE_VALUE);
  gint64 v = n != NULL ? json_node_get_int (n) : 0;
  return v >= 1 && v <= G_MAXINT32 ? v : 0;
}

/* One op of the file, built through the layer functions (which check its inputs); the
 * caller names the op in an error. */
static KsExpr *
build_op (KsModel *model, OpType op, JsonObject *o, KsExpr **in, const char *name, int ndim,
          const gint64 *shape, const Batch *batch, GError **error)
{
  KsInit zero = { KS_INIT_CONSTANT, 0, 0, 0 }; /* the checkpoint's values replace it */
  gint64 perm64[KS_TENSOR_MAX_DIMS], window[3];
  int perm[KS_TENSOR_MAX_DIMS];
  const char *s;

  switch (op)
    {
    case OP_PARAMETER:
      return ks_model_parameter (model, name, ndim, shape, zero, error);
    case OP_DATA:
      s = string_member (o, "dtype");
      if (g_strcmp0 (s, "float32") != 0 && g_strcmp0 (s, "int64") != 0)
        return ks_invalid (error, "dtype %s; data is float32 or int64", s ? s : "missing"),
               NULL;
      return ks_model_data (model, name, ndim, shape,
                            strcmp (s, "int64") == 0 ? KS_DTYPE_INT64 : KS_DTYPE_FLOAT32, error);
    case OP_MATMUL: return ks_matmul (in[0], in[1], error);
    case OP_ADD: return ks_add (in[0], in[1], error);
    case OP_MUL: return ks_mul (in[0], in[1], error);
    case OP_UNARY:
      s = string_member (o, "fn");
      for (guint i = 0; s != NULL && i < G_N_ELEMENTS (unary_names); i++)
        if (strcmp (s, unary_names[i]) == 0)
          return ks_unary (i, in[0], error);
      return ks_invalid (error, "unknown function %s", s ? s : "(missing fn)"), NULL;
    case OP_MEAN: return ks_mean (in[0], error);
    case OP_CROSS_ENTROPY: return ks_softmax_cross_entropy (in[0], in[1], error);
    case OP_LOGISTIC: return ks_sigmoid_cross_entropy (in[0], in[1], error);
    case OP_ACCURACY: return ks_accuracy (in[0], in[1], error);
    case OP_EMBEDDING: return ks_embedding (in[1], in[0], error);
    case OP_LAYER_NORM:
      return ks_layer_norm_with (in[0], in[1], in[2], double_member (o, "eps", 1e-5), error);
    case OP_ATTENTION:
      if (count_member (o, "batch") == 0 || count_member (o, "heads") == 0)
        return ks_invalid (error, "attention needs a batch and heads, integers in [1, 2^31)"),
               NULL;
      return ks_causal_self_attention (in[0], batch_scaled (batch, count_member (o, "batch")),
                                       count_member (o, "heads"), error);
    case OP_SOFTMAX:
      {
        JsonNode *n = member (o, "log", G_TYPE_BOOLEAN, JSON_NODE_VALUE);
        return ks_softmax (in[0], n != NULL && json_node_get_boolean (n), error);
      }
    case OP_RESHAPE: return ks_reshape (in[0], ndim, shape, error);
    case OP_TRANSPOSE:
      if (ints_member (o, "perm", perm64, KS_TENSOR_MAX_DIMS) != in[0]->ndim)
        return ks_invalid (error, "perm must list the input's %d dimensions", in[0]->ndim),
               NULL;
      for (int i = 0; i < in[0]->ndim; i++)
        perm[i] = perm64[i] >= 0 && perm64[i] < KS_TENSOR_MAX_DIMS ? (int) perm64[i] : -1;
      return ks_transpose (in[0], perm, error);
    case OP_DROPOUT: /* inference never drops; the rate is kept for the record */
      return ks_dropout (in[0], double_member (o, "rate", 0), 0, error);
    case OP_CONV2D:
    case OP_MAX_POOL:
    case OP_AVG_POOL:
      if (ints_member (o, "window", window, 3) != 3 || window[0] < 1 || window[0] > 4096
          || window[1] < 1 || window[1] > 4096 || window[2] < 0 || window[2] > 4096)
        return ks_invalid (error, "window must be [kernel, stride, pad], each in [0, 4096]"),
               NULL;
      if (op == OP_MAX_POOL)
        return ks_max_pool (in[0], window[0], window[1], error);
      if (op == OP_AVG_POOL)
        return ks_avg_pool (in[0], window[0], window[1], window[2], error);
      return ks_conv2d_with (in[0], in[1], in[2], window[0], window[1], window[2], error);
    case OP_BATCH_NORM:
      return ks_batch_norm_with (in[0], in + 1, double_member (o, "momentum", 0.1),
                                 double_member (o, "eps", 1e-5), error);
    case OP_GRAD:
      break;
    }
  return NULL;
}

/* The shape recorded for an op computed from the feeds, for the batch wanted. */
static gboolean
scale_shape (const Batch *batch, const Where *w, JsonObject *o, OpType op, int ndim,
             gint64 *shape, GError **error)
{
  gint64 perm[KS_TENSOR_MAX_DIMS] = { 0 };
  KsTensor recorded = { .ndim = ndim };
  memcpy (recorded.shape, shape, ndim * sizeof *shape);
  g_autofree char *text = ks_tensor_shape_string (&recorded);
  if (op == OP_TRANSPOSE && ints_member (o, "perm", perm, KS_TENSOR_MAX_DIMS) < 1)
    perm[0] = -1;
  if (ndim == 0 || shape[0] % batch->saved != 0 || perm[0] != 0
      || shape[0] / batch->saved > G_MAXINT32 / batch->want)
    return bad_graph (error, w, "computed from the feeds, its shape %s does not keep the batch "
                      "(%" G_GINT64_FORMAT ") in its first dimension: this graph runs only "
                      "with the batch it was saved with", text, batch->saved);
  shape[0] = batch_scaled (batch, shape[0]);
  return TRUE;
}

/* A model on `compute` from the graph's JSON text, for `want` rows a batch (0: as saved);
 * its feeds and targets names. */
static KsModel *
model_from_graph (KsCompute *compute, const char *text, const char *file, gint64 want,
                  GStrv *feeds, GStrv *targets, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (KsModel) model = ks_model_new (compute);
  g_autoptr (GError) local = NULL;
  g_autoptr (GHashTable) from_feeds = g_hash_table_new (NULL, NULL);
  Where w = { file, 0, NULL };
  Batch batch = { 0, 0 };
  JsonObject *root;
  JsonNode *ops, *saved;

  if (!json_parser_load_from_data (parser, text, -1, &local)
      || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return bad_graph (error, &w, "not a JSON object%s%s", local ? ": " : "",
                      local ? local->message : ""), NULL;
  root = json_node_get_object (json_parser_get_root (parser));
  if ((ops = member (root, "ops", G_TYPE_INVALID, JSON_NODE_ARRAY)) == NULL
      || (*feeds = names_member (root, "feeds")) == NULL
      || (*targets = names_member (root, "targets")) == NULL)
    return bad_graph (error, &w, "it needs the arrays ops, feeds and targets"), NULL;
  if ((saved = member (root, "batch", G_TYPE_INT64, JSON_NODE_VALUE)) != NULL)
    batch.saved = batch.want = json_node_get_int (saved);
  if (saved != NULL && batch.saved < 1)
    return bad_graph (error, &w, "its batch is not a positive integer"), NULL;
  if (want > 0 && want != batch.saved)
    {
      if (saved == NULL)
        return bad_graph (error, &w, "saved by an older ksdist, without its batch: it runs "
                          "only with the batch it was saved with (export it again)"), NULL;
      batch.want = want;
    }
  JsonArray *list = json_node_get_array (ops);
  for (w.index = 0; w.index < json_array_get_length (list); w.index++)
    {
      JsonNode *n = json_array_get_element (list, w.index);
      JsonObject *o = JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
      const char *op_name = string_member (o, "op");
      g_auto (GStrv) in_names = names_member (o, "in");
      gint64 shape[KS_TENSOR_MAX_DIMS];
      int ndim = ints_member (o, "shape", shape, KS_TENSOR_MAX_DIMS);
      KsExpr *in[5] = { NULL }, *e;
      OpType op;

      w.name = string_member (o, "name");
      if (w.name == NULL || in_names == NULL || ndim < 0)
        {
          w.name = w.name != NULL ? w.name : "?";
          return bad_graph (error, &w, "each op needs a name, a shape (at most %d integers) "
                            "and its inputs", KS_TENSOR_MAX_DIMS), NULL;
        }
      if (!op_from_name (op_name, &op))
        return bad_graph (error, &w, "'%s' is not an op this ksdist can run for inference",
                          op_name ? op_name : "(no op)"), NULL;
      if (g_strv_length (in_names) != (guint) arity[op])
        return bad_graph (error, &w, "%s takes %d inputs, not %u", op_name, arity[op],
                          g_strv_length (in_names)), NULL;
      gboolean batched = op == OP_DATA;
      for (int k = 0; k < arity[op]; k++)
        if ((in[k] = ks_model_find (model, in_names[k])) == NULL)
          return bad_graph (error, &w, "input '%s' is not defined before it", in_names[k]),
                 NULL;
        else if (g_hash_table_contains (from_feeds, in[k]))
          batched = TRUE;
      if (batched && batch.want != batch.saved
          && !scale_shape (&batch, &w, o, op, ndim, shape, error))
        return NULL;
      if ((e = build_op (model, op, o, in, w.name, ndim, shape, &batch, &local)) == NULL)
        return local != NULL ? bad_graph (error, &w, "%s", local->message), NULL : NULL;
      if (e->ndim != ndim || memcmp (e->shape, shape, ndim * sizeof *shape) != 0)
        {
          g_autofree char *got = ks_expr_shape_string (e);
          return bad_graph (error, &w, "its inputs give the shape %s, not the one recorded",
                            got), NULL;
        }
      if (!ks_expr_rename (e, w.name, &local))
        return bad_graph (error, &w, "%s", local->message), NULL;
      if (batched)
        g_hash_table_add (from_feeds, e);
    }
  w.name = NULL;
  for (char **f = *feeds; *f != NULL; f++)
    {
      KsExpr *e = ks_model_find (model, *f);
      if (e == NULL || e->op != OP_DATA)
        return bad_graph (error, &w, "feed '%s' is not a data input of the graph", *f), NULL;
    }
  for (char **t = *targets; *t != NULL; t++)
    if (ks_model_find (model, *t) == NULL)
      return bad_graph (error, &w, "target '%s' is not in the graph", *t), NULL;
  return g_steal_pointer (&model);
}

/* ---- saving ---- */

/* The batch of the ops `needed`: an attention's, which knows it, else the first feed's
 * first dimension. */
static gint64
graph_batch (KsModel *model, const gboolean *needed, const KsExpr *first_feed)
{
  for (guint i = 0; i < model->exprs->len; i++)
    {
      const KsExpr *e = g_ptr_array_index (model->exprs, i);
      if (needed[i] && e->op == OP_ATTENTION)
        return e->batch;
    }
  return first_feed != NULL && first_feed->ndim > 0 ? first_feed->shape[0] : 1;
}

static gboolean
graph_text (KsModel *model, const char *const *feeds, KsExpr *const *targets, gsize n_targets,
            char **text, GError **error)
{
  guint n = model->exprs->len;
  g_autofree gboolean *needed = g_new0 (gboolean, n);
  g_autofree KsExpr **feed_exprs = NULL;
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;
  guint n_feeds = 0;

  if (feeds == NULL)
    feeds = (const char *const[]) { NULL };
  if (n_targets == 0)
    return ks_invalid (error, "save_inference_model: give at least one target");
  feed_exprs = g_new0 (KsExpr *, g_strv_length ((GStrv) feeds) + 1);
  for (const char *const *f = feeds; *f != NULL; f++)
    {
      KsExpr *e = ks_model_find (model, *f);
      if (e == NULL || e->op != OP_DATA)
        return ks_invalid (error, "save_inference_model: feed '%s' is not a data input of the "
                           "model", *f);
      needed[e->id] = TRUE;
      feed_exprs[n_feeds++] = e;
    }
  for (gsize i = 0; i < n_targets; i++)
    {
      if (targets[i]->model != model)
        return ks_invalid (error, "save_inference_model: target '%s' belongs to another model",
                           targets[i]->name);
      needed[targets[i]->id] = TRUE;
    }
  for (guint i = n; i-- > 0;) /* inputs have smaller ids */
    if (needed[i])
      {
        KsExpr *e = g_ptr_array_index (model->exprs, i);
        if (e->op == OP_GRAD)
          return ks_invalid (error, "save_inference_model: the targets need the gradient '%s'; "
                             "an inference model holds the forward graph only", e->name);
        if (e->op == OP_DATA && !g_strv_contains (feeds, e->name))
          return ks_invalid (error, "save_inference_model: the targets need data '%s', which is "
                             "not among the feeds: add it, or choose targets that do not need "
                             "it", e->name);
        for (guint k = 0; k < e->n_in; k++)
          needed[e->in[k]->id] = TRUE;
      }
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "batch");
  json_builder_add_int_value (b, graph_batch (model, needed, feed_exprs[0]));
  add_names (b, "feeds", feed_exprs, n_feeds);
  add_names (b, "targets", targets, n_targets);
  json_builder_set_member_name (b, "ops");
  json_builder_begin_array (b);
  for (guint i = 0; i < n; i++)
    if (needed[i])
      add_op (b, g_ptr_array_index (model->exprs, i));
  json_builder_end_array (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  *text = json_generator_to_data (gen, NULL);
  return TRUE;
}

gboolean
ks_save_inference_model (const char *dir, KsModel *model, const char *const *feeds,
                         KsExpr *const *targets, gsize n_targets, GError **error)
{
  return ks_save_inference_model_with_metadata (dir, model, feeds, targets, n_targets, NULL,
                                                error);
}

gboolean
ks_save_inference_model_with_metadata (const char *dir, KsModel *model,
                                       const char *const *feeds, KsExpr *const *targets,
                                       gsize n_targets, GHashTable *metadata, GError **error)
{
  g_autoptr (GHashTable) meta = NULL;
  g_autofree char *text = NULL;
  g_autofree char *file = g_build_filename (dir, FILE_NAME, NULL);
  g_auto (GStrv) feed_names = NULL, target_names = NULL;
  g_autoptr (KsModel) pruned = NULL;

  if (!model->initialised)
    return ks_invalid (error, "save_inference_model: the model is not initialised");
  if (!graph_text (model, feeds, targets, n_targets, &text, error)
      || (pruned = model_from_graph (model->compute, text, file, 0, &feed_names,
                                     &target_names, error)) == NULL
      || !ks_model_init (pruned, error))
    return FALSE;
  /* the pruned model's parameters take the trained values */
  for (guint i = 0; i < pruned->exprs->len; i++)
    {
      KsExpr *p = g_ptr_array_index (pruned->exprs, i);
      if (p->op != OP_PARAMETER)
        continue;
      const KsTensor *from = ks_model_find (model, p->name)->value;
      g_autofree float *host = g_new (float, p->numel);
      if (!ks_tensor_to_host (from, host, p->numel * sizeof (float), error)
          || !ks_tensor_from_host (p->value, host, p->numel * sizeof (float), error))
        return FALSE;
    }
  meta = ks_string_table_copy (metadata);
  g_hash_table_insert (meta, g_strdup (GRAPH_KEY), g_steal_pointer (&text));
  return ks_checkpoint_write_dir (dir, pruned, NULL, meta, error);
}

/* ---- loading ---- */

KsModel *
ks_load_inference_model (const char *dir, KsCompute *compute, char ***feeds, char ***targets,
                         GError **error)
{
  return ks_load_inference_model_with_batch (dir, compute, 0, feeds, targets, error);
}

KsModel *
ks_load_inference_model_with_batch (const char *dir, KsCompute *compute, gint64 batch,
                                    char ***feeds, char ***targets, GError **error)
{
  g_autofree char *file = g_build_filename (dir, FILE_NAME, NULL);
  g_autoptr (GHashTable) meta = ks_checkpoint_metadata (dir, error);
  g_auto (GStrv) feed_names = NULL, target_names = NULL;
  g_autoptr (KsModel) model = NULL;
  const char *text;

  if (meta == NULL)
    return NULL;
  if ((text = g_hash_table_lookup (meta, GRAPH_KEY)) == NULL)
    {
      g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_FORMAT,
                   "%s is a training checkpoint, not an inference model (no " GRAPH_KEY " in "
                   "its metadata): write one with ks_save_inference_model", file);
      return NULL;
    }
  if ((model = model_from_graph (compute, text, file, batch, &feed_names, &target_names,
                                 error)) == NULL
      || !ks_model_init (model, error)
      || !ks_checkpoint_load (dir, model, NULL, NULL, NULL, error))
    return NULL;
  ks_model_set_training (model, FALSE);
  if (feeds != NULL)
    *feeds = g_steal_pointer (&feed_names);
  if (targets != NULL)
    *targets = g_steal_pointer (&target_names);
  return g_steal_pointer (&model);
}
