/* The model's graph: expressions, the init net, running a pruned and cached subgraph,
 * lazy values. The backward sweep is model-backward.c's, the ops model-ops.c's. */
#include "model-private.h"

#include <math.h>
#include <string.h>

static void
expr_free (gpointer p)
{
  KsExpr *e = p;
  ks_tensor_free (e->value);
  ks_tensor_free (e->grad);
  ks_tensor_free (e->aux);
  g_free (e->name);
  g_free (e);
}

KsModel *
ks_model_new (KsCompute *compute)
{
  KsModel *model = g_new0 (KsModel, 1);
  model->compute = compute;
  model->exprs = g_ptr_array_new_with_free_func (expr_free);
  model->by_name = g_hash_table_new (g_str_hash, g_str_equal);
  model->plans = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                        (GDestroyNotify) g_array_unref);
  model->training = TRUE;
  model->skips = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  return model;
}

void
ks_model_free (KsModel *model)
{
  if (model == NULL)
    return;
  g_ptr_array_unref (model->exprs); /* before the arenas their views point into */
  g_hash_table_unref (model->by_name);
  g_hash_table_unref (model->plans);
  g_hash_table_unref (model->skips);
  g_free (model->op_seconds);
  ks_arena_free (model->params);
  ks_arena_free (model->grads);
  if (model->compute != NULL)
    {
      ks_compute_free_memory (model->compute, model->unit);
      ks_compute_free_memory (model->compute, model->scratch);
    }
  g_free (model);
}

gboolean
ks_model_set_device (KsModel *model, KsCompute *compute, GError **error)
{
  if (model->initialised || model->ran)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "the model is bound to its device (plugin %s) since it was %s; make a new "
                   "model for another device",
                   ks_compute_plugin (model->compute), model->initialised ? "initialised" : "run");
      return FALSE;
    }
  for (guint i = 0; compute != NULL && i < model->exprs->len; i++)
    {
      const KsExpr *e = g_ptr_array_index (model->exprs, i);
      if (!ks_compute_supports_op (compute, ks_op_name (e->op), e->name, error))
        return FALSE;
    }
  model->compute = compute;
  return TRUE;
}

KsCompute *
ks_model_device (const KsModel *model)
{
  return model->compute;
}

void
ks_model_set_training (KsModel *model, gboolean training)
{
  if (model->training == !!training)
    return;
  model->training = !!training;
  for (guint i = 0; i < model->exprs->len; i++)
    {
      KsExpr *e = g_ptr_array_index (model->exprs, i);
      if (e->op == OP_DROPOUT || e->op == OP_BATCH_NORM)
        e->version = 0; /* its value depends on the mode: stale */
    }
}

gboolean
ks_model_training (const KsModel *model)
{
  return model->training;
}

guint64
ks_model_rng_state (const KsModel *model)
{
  return model->rng_state;
}

void
ks_model_set_rng_state (KsModel *model, guint64 state)
{
  model->rng_state = state;
}

guint64
ks_model_ops_executed (const KsModel *model)
{
  return model->ops_executed;
}

KsArena *
ks_model_parameters (const KsModel *model)
{
  return model->params;
}

KsArena *
ks_model_gradients (const KsModel *model)
{
  return model->grads;
}

const KsTensor *
ks_expr_last_value (const KsExpr *expr)
{
  return expr->version != 0 ? expr->value : NULL;
}

const char *
ks_expr_name (const KsExpr *expr)
{
  return expr->name;
}

KsModel *
ks_expr_model (const KsExpr *expr)
{
  return expr->model;
}

char *
ks_expr_shape_string (const KsExpr *e)
{
  KsTensor t = { .ndim = e->ndim };
  memcpy (t.shape, e->shape, sizeof t.shape);
  return ks_tensor_shape_string (&t);
}

KsDType
ks_expr_dtype (const KsExpr *e)
{
  return e->dtype;
}

gsize
ks_expr_numel (const KsExpr *e)
{
  return e->numel;
}

/* ---- building ---- */

KsExpr *
ks_model_add_expr (KsModel *model, OpType op, const char *name, KsDType dtype, int ndim,
                   const gint64 *shape, GError **error)
{
  g_autofree char *generated = NULL;
  KsExpr *e;
  gsize numel;

  if (!ks_shape_check (ndim, shape, &numel, error))
    return NULL;
  if (name == NULL)
    {
      name = generated = g_strdup_printf ("%s_%u", ks_op_name (op), model->exprs->len);
      /* it steps aside for a variable that already took it (a graph read back from a
       * file keeps its original names) */
      for (guint k = 1; g_hash_table_contains (model->by_name, name); k++)
        {
          g_free (generated);
          name = generated = g_strdup_printf ("%s_%u_%u", ks_op_name (op), model->exprs->len, k);
        }
    }
  if (g_hash_table_contains (model->by_name, name))
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "the model already has a variable named '%s'", name);
      return NULL;
    }
  if (model->compute != NULL
      && !ks_compute_supports_op (model->compute, ks_op_name (op), name, error))
    return NULL;
  e = g_new0 (KsExpr, 1);
  e->model = model;
  e->id = model->exprs->len;
  e->name = g_strdup (name);
  e->op = op;
  e->dtype = dtype;
  e->ndim = ndim;
  if (ndim > 0) /* a scalar's shape may be NULL */
    memcpy (e->shape, shape, ndim * sizeof *shape);
  e->numel = numel;
  g_ptr_array_add (model->exprs, e);
  g_hash_table_insert (model->by_name, e->name, e);
  g_hash_table_remove_all (model->plans); /* the graph changed */
  return e;
}

KsExpr *
ks_model_find (KsModel *model, const char *name)
{
  return g_hash_table_lookup (model->by_name, name);
}

gboolean
ks_expr_rename (KsExpr *e, const char *name, GError **error)
{
  if (strcmp (e->name, name) == 0)
    return TRUE;
  if (g_hash_table_contains (e->model->by_name, name))
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "the model already has a variable named '%s'", name);
      return FALSE;
    }
  g_hash_table_remove (e->model->by_name, e->name);
  g_free (e->name);
  e->name = g_strdup (name);
  g_hash_table_insert (e->model->by_name, e->name, e);
  return TRUE;
}

KsExpr *
ks_model_parameter (KsModel *model, const char *name, int ndim, const gint64 *shape, KsInit init,
                    GError **error)
{
  KsExpr *e;

  if (model->initialised)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "parameter '%s': the model is already initialised; declare every parameter "
                   "before ks_model_init", name);
      return NULL;
    }
  e = ks_model_add_expr (model, OP_PARAMETER, name, KS_DTYPE_FLOAT32, ndim, shape, error);
  if (e != NULL)
    e->init = init;
  return e;
}

KsExpr *
ks_model_data (KsModel *model, const char *name, int ndim, const gint64 *shape, KsDType dtype,
               GError **error)
{
  if (dtype != KS_DTYPE_FLOAT32 && dtype != KS_DTYPE_INT64)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "data '%s': type %s; inputs are float32 or int64", name,
                   ks_dtype_name (dtype));
      return NULL;
    }
  return ks_model_add_expr (model, OP_DATA, name, dtype, ndim, shape, error);
}

/* ---- the init net ---- */

static double
normal (GRand *rng)
{
  /* Box-Muller; 1 - u keeps the log finite */
  double u = g_rand_double (rng), v = g_rand_double (rng);
  return sqrt (-2 * log (1 - u)) * cos (2 * G_PI * v);
}

static void
fill_init (const KsExpr *p, float *host)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed ((guint32) (p->init.seed ^ (p->init.seed >> 32)));
  double fan_in = p->ndim >= 1 ? p->shape[0] : 1, fan_out = p->ndim >= 2 ? p->shape[1] : fan_in;
  double gain = p->init.a != 0 ? p->init.a : 1;
  double limit = gain * sqrt (6 / (fan_in + fan_out));

  for (gsize i = 0; i < p->numel; i++)
    switch (p->init.kind)
      {
      case KS_INIT_CONSTANT: host[i] = (float) p->init.a; break;
      case KS_INIT_UNIFORM: host[i] = (float) g_rand_double_range (rng, p->init.a, p->init.b); break;
      case KS_INIT_NORMAL: host[i] = (float) (p->init.a + p->init.b * normal (rng)); break;
      case KS_INIT_XAVIER: host[i] = (float) g_rand_double_range (rng, -limit, limit); break;
      }
}

KsTensor *
ks_arena_view (const KsTensor *entry)
{
  KsTensor *t = g_memdup2 (entry, sizeof *entry);
  t->owns_data = FALSE;
  return t;
}

gboolean
ks_model_init (KsModel *model, GError **error)
{
  g_return_val_if_fail (!model->initialised, FALSE);
  if (model->compute == NULL)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "the model has no device: give one to ks_model_new or ks_model_set_device");
      return FALSE;
    }
  model->params = ks_arena_new (model->compute);
  for (guint i = 0; i < model->exprs->len; i++)
    {
      KsExpr *e = g_ptr_array_index (model->exprs, i);
      if (e->op == OP_PARAMETER && !ks_arena_add (model->params, e->name, e->ndim, e->shape, error))
        return FALSE;
    }
  if (!ks_arena_allocate (model->params, error)
      || (model->grads = ks_arena_new_like (model->params, error)) == NULL)
    return FALSE;
  for (guint i = 0; i < model->exprs->len; i++)
    {
      KsExpr *e = g_ptr_array_index (model->exprs, i);
      if (e->op != OP_PARAMETER)
        continue;
      g_autofree float *host = g_new (float, e->numel);
      e->value = ks_arena_view (ks_arena_tensor (model->params, e->name));
      fill_init (e, host);
      if (!ks_tensor_from_host (e->value, host, e->numel * sizeof (float), error))
        return FALSE;
      e->version = ++model->clock;
    }
  model->initialised = TRUE;
  return TRUE;
}

void
ks_model_parameters_changed (KsModel *model)
{
  for (guint i = 0; i < model->exprs->len; i++)
    {
      KsExpr *e = g_ptr_array_index (model->exprs, i);
      if (e->op == OP_PARAMETER)
        e->version = ++model->clock;
    }
}

/* ---- running ---- */

float *
ks_model_scratch (KsModel *model, gsize n, GError **error)
{
  if (n > model->scratch_len)
    {
      ks_compute_free_memory (model->compute, g_steal_pointer (&model->scratch));
      model->scratch = ks_compute_alloc (model->compute, n * sizeof (float), error);
      model->scratch_len = model->scratch != NULL ? n : 0;
    }
  return model->scratch;
}

/* The ids of the targets and everything they depend on, in graph order; cached. */
static GArray *
plan (KsModel *model, KsExpr *const *targets, gsize n_targets)
{
  g_autoptr (GString) key = g_string_new (NULL);
  g_autofree gboolean *needed = g_new0 (gboolean, model->exprs->len);
  g_autofree guint *sorted = g_new (guint, MAX (n_targets, 1));
  GArray *ids;

  for (gsize i = 0; i < n_targets; i++)
    sorted[i] = targets[i]->id;
  for (gsize i = 1; i < n_targets; i++) /* insertion sort: the key ignores target order */
    for (gsize j = i; j > 0 && sorted[j - 1] > sorted[j]; j--)
      {
        guint t = sorted[j];
        sorted[j] = sorted[j - 1];
        sorted[j - 1] = t;
      }
  for (gsize i = 0; i < n_targets; i++)
    g_string_append_printf (key, "%u,", sorted[i]);
  if ((ids = g_hash_table_lookup (model->plans, key->str)) != NULL)
    return ids;

  /* inputs have smaller ids, so one pass from the top marks every dependency */
  for (gsize i = 0; i < n_targets; i++)
    needed[targets[i]->id] = TRUE;
  for (guint i = model->exprs->len; n_targets > 0 && i-- > 0;)
    if (needed[i])
      {
        KsExpr *e = g_ptr_array_index (model->exprs, i);
        for (guint k = 0; k < e->n_in; k++)
          needed[e->in[k]->id] = TRUE;
      }
  ids = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint i = 0; i < model->exprs->len; i++)
    if (n_targets == 0 || needed[i])
      g_array_append_val (ids, i);
  g_hash_table_insert (model->plans, g_strdup (key->str), ids);
  return ids;
}

static gboolean
execute (KsExpr *e, GError **error)
{
  KsModel *model = e->model;

  if (e->op == OP_PARAMETER || e->op == OP_DATA)
    {
      if (e->version != 0)
        return TRUE;
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   e->op == OP_DATA ? "data '%s' was not fed: pass it in the feeds of "
                                      "ks_model_run"
                                    : "parameter '%s' has no value: run ks_model_init first",
                   e->name);
      return FALSE;
    }
  if (e->value == NULL && e->op != OP_GRAD
      && (e->value = ks_tensor_new (model->compute, e->dtype, e->ndim, e->shape, error)) == NULL)
    return FALSE;
  gint64 start = model->op_seconds != NULL ? g_get_monotonic_time () : 0;
  if (!ks_op_forward (e, error))
    return FALSE;
  if (model->op_seconds != NULL)
    model->op_seconds[e->id] += (g_get_monotonic_time () - start) / 1e6;
  model->ops_executed++;
  e->version = ++model->clock;
  return TRUE;
}

static gboolean
stale (const KsExpr *e)
{
  if (e->version == 0)
    return TRUE;
  for (guint k = 0; k < e->n_in; k++)
    if (e->in[k]->version > e->version)
      return TRUE;
  return FALSE;
}

static gboolean
feed (KsModel *model, const KsFeed *f, GError **error)
{
  KsExpr *e = g_hash_table_lookup (model->by_name, f->name);
  g_autoptr (GError) local = NULL;

  if (e == NULL || e->op != OP_DATA)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "feed '%s': the model has no data of that name", f->name);
      return FALSE;
    }
  if (e->value == NULL
      && (e->value = ks_tensor_new (model->compute, e->dtype, e->ndim, e->shape, error)) == NULL)
    return FALSE;
  if (!ks_tensor_from_host (e->value, f->data, f->nbytes, &local))
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID, "feed '%s': %s", f->name,
                   local->message);
      return FALSE;
    }
  e->version = ++model->clock;
  return TRUE;
}

/* After a run: the next one draws new dropout masks. */
static void
next_masks (KsModel *model)
{
  if (model->rng_drawn)
    model->rng_state++;
  model->rng_drawn = FALSE;
}

gboolean
ks_model_run (KsModel *model, const KsFeed *feeds, gsize n_feeds, KsExpr *const *targets,
              gsize n_targets, GError **error)
{
  GArray *ids;

  if (model->compute == NULL)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "the model has no device: give one to ks_model_new or ks_model_set_device");
      return FALSE;
    }
  for (gsize i = 0; i < n_targets; i++)
    if (targets[i]->model != model)
      {
        g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                     "target '%s' belongs to another model", targets[i]->name);
        return FALSE;
      }
  model->ran = TRUE;
  for (gsize i = 0; i < n_feeds; i++)
    if (!feed (model, &feeds[i], error))
      return FALSE;
  ids = plan (model, targets, n_targets);
  for (guint i = 0; i < ids->len; i++)
    if (!execute (g_ptr_array_index (model->exprs, g_array_index (ids, guint, i)), error))
      return FALSE;
  next_masks (model);
  return TRUE;
}

const KsTensor *
ks_expr_value (KsExpr *expr, GError **error)
{
  KsModel *model = expr->model;
  GArray *ids = plan (model, &expr, 1);

  model->ran = TRUE;
  for (guint i = 0; i < ids->len; i++)
    {
      KsExpr *e = g_ptr_array_index (model->exprs, g_array_index (ids, guint, i));
      if (stale (e) && !execute (e, error))
        return NULL;
    }
  next_masks (model);
  return expr->value;
}

/* ---- activations kept per micro-batch (pipeline.c) ---- */

struct KsStash {
  guint first, n;
  gboolean *kept;   /* per expression of the range: swapped (NULL: all) */
  KsTensor **value, **aux;
};

KsStash *
ks_stash_new (guint first, guint n, const gboolean *kept)
{
  KsStash *s = g_new0 (KsStash, 1);
  s->first = first;
  s->n = n;
  s->kept = kept != NULL ? g_memdup2 (kept, n * sizeof (gboolean)) : NULL;
  s->value = g_new0 (KsTensor *, n);
  s->aux = g_new0 (KsTensor *, n);
  return s;
}

void
ks_stash_free (KsStash *s)
{
  if (s == NULL)
    return;
  for (guint i = 0; i < s->n; i++)
    {
      ks_tensor_free (s->value[i]);
      ks_tensor_free (s->aux[i]);
    }
  g_free (s->kept);
  g_free (s->value);
  g_free (s->aux);
  g_free (s);
}

void
ks_model_swap_stash (KsModel *model, KsStash *s)
{
  for (guint i = 0; i < s->n; i++)
    {
      KsExpr *e = g_ptr_array_index (model->exprs, s->first + i);
      KsTensor *t;
      if (e->op == OP_PARAMETER || e->op == OP_GRAD || (s->kept != NULL && !s->kept[i]))
        continue;
      t = e->value, e->value = s->value[i], s->value[i] = t;
      t = e->aux, e->aux = s->aux[i], s->aux[i] = t;
      e->version = e->value != NULL ? ++model->clock : 0;
    }
}

gboolean
ks_model_recompute (KsModel *model, guint first, guint n, const gboolean *kept, GError **error)
{
  for (guint i = 0; i < n; i++)
    {
      KsExpr *e = g_ptr_array_index (model->exprs, first + i);
      if (!kept[i] && e->op != OP_PARAMETER && e->op != OP_DATA && e->op != OP_GRAD
          && !execute (e, error))
        return FALSE;
    }
  next_masks (model);
  return TRUE;
}

char **
ks_model_parameter_names (const KsModel *model)
{
  GPtrArray *names = g_ptr_array_new ();
  for (guint i = 0; i < model->exprs->len; i++)
    {
      const KsExpr *e = g_ptr_array_index (model->exprs, i);
      if (e->op == OP_PARAMETER)
        g_ptr_array_add (names, g_strdup (e->name));
    }
  g_ptr_array_add (names, NULL);
  return (char **) g_ptr_array_free (names, FALSE);
}

guint
ks_model_n_exprs (const KsModel *model)
{
  return model->exprs->len;
}
