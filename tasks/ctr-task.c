/* The ctr task of ksdist train: click-through rate on Criteo-format data (ksdist datagen
 * ctr writes some), scored by AUC.
 *
 * The model (Wide & Deep without a separate wide part): each of the 26 categorical slots
 * looks up its feasign's row in sparse table "emb" ([table.emb]): embed_w, then embedx
 * (a slot holds one id, so the slot's sum-pooling is that row; an empty field reads
 * zeros). The 26 rows, concatenated, and the 13 log-transformed integer features feed an
 * MLP ([model] hidden, ReLU) whose first layer takes both (W_e e + W_d d + b, as one
 * layer over their concatenation); two logits, softmax cross entropy (the sigmoid loss of
 * their difference).
 *
 * A batch's distinct ids are pulled into the rows of parameter "emb.rows" (row 0 stays
 * zero for empty fields) before its step, and the gradients of those rows pushed after
 * it, summed over each id's shows (the loss is the batch's mean, so times the batch),
 * with shows and clicks from the labels. With [job] mode = pslib the table is on the
 * servers; a process alone keeps it in memory. */
#include "tasks-private.h"

#include <ksdist/sparse.h>
#include <math.h>
#include <string.h>

#define TABLE "emb"
#define ROWS_PARAM "emb.rows"

typedef struct {
  guint64 id;
  guint32 pos;
} IdPos;

typedef struct {
  KsCriteo *train, *test;
  gsize dim, capacity; /* of emb.rows: 1 + batch * 26 rows */
  KsSparseTable *local; /* alone; else the algorithm's servers */
  KsExpr *rows_param, *prob;
  /* the batch */
  gint64 *slots, *labels;
  float *dense;
  IdPos *sorted;
  guint64 *uniq;
  float *shows, *clicks, *values;
  gsize n_uniq;
  guint *order;
  gint64 epoch;
  gint64 shrink_every; /* [data] shrink_every */
} Ctr;

static gboolean
load_split (KsTrainer *t, const char *dir, gboolean split, KsCriteo **out, GError **error)
{
  gboolean skip = strcmp (ks_config_get_string (ks_trainer_config (t), "data", "bad_lines"), "skip") == 0;
  g_auto (GStrv) files = ks_data_dir_files (dir, error);
  g_auto (GStrv) mine = NULL;

  if (files == NULL)
    {
      g_prefix_error (error, "[data] path: ");
      return FALSE;
    }
  if (split && ks_trainer_role (t) != NULL
      && (mine = ks_role_maker_split_files (ks_trainer_role (t), (const char *const *) files, error)) == NULL)
    return FALSE;
  if (mine != NULL && mine[0] == NULL)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "%s has %u files for %d workers: worker %d has none (write more parts, "
                   "ksdist datagen ctr --files N)", dir, g_strv_length (files), ks_trainer_world (t), ks_trainer_rank (t));
      return FALSE;
    }
  GStrv use = mine != NULL ? mine : files;
  if ((*out = ks_criteo_load ((const char *const *) use, g_strv_length (use), skip, error)) == NULL)
    return FALSE;
  if ((*out)->skipped > 0)
    g_warning ("%s: skipped %" G_GSIZE_FORMAT " malformed lines ([data] bad_lines = skip)", dir,
               (*out)->skipped);
  return TRUE;
}

/* DeepFM's interactions: the slots' rows summed with a weight per slot (1 at first), s,
 * then s * s mapped to the logits. s * s holds every pair's product sum_{i<j} <e_i, e_j>
 * (and each slot's own square, a first-order effect the other parts take up). */
static KsExpr *
fm_part (KsTrainer *t, Ctr *x, KsExpr *e, guint64 seed, GError **error)
{
  gint64 B = (gint64) ks_trainer_batch (t), D = (gint64) x->dim;
  const gint64 by_slot[] = { B, KS_CRITEO_SLOTS, D }, by_dim[] = { B * D, KS_CRITEO_SLOTS },
               per_sample[] = { B, D }, field_shape[] = { KS_CRITEO_SLOTS, 1 },
               map_shape[] = { D, 2 };
  const int perm[] = { 0, 2, 1 };
  KsExpr *field_w, *map, *s;

  if ((field_w = ks_model_parameter (ks_trainer_model (t), "fm.field_w", 2, field_shape,
                                     (KsInit) { KS_INIT_CONSTANT, 1, 0, 0 }, error)) == NULL
      || (map = ks_model_parameter (ks_trainer_model (t), "fm.w", 2, map_shape,
                                    (KsInit) { KS_INIT_XAVIER, 1, 0, seed + 3000 }, error)) == NULL
      || (s = ks_reshape (e, 3, by_slot, error)) == NULL
      || (s = ks_transpose (s, perm, error)) == NULL
      || (s = ks_reshape (s, 2, by_dim, error)) == NULL
      || (s = ks_matmul (s, field_w, error)) == NULL
      || (s = ks_reshape (s, 2, per_sample, error)) == NULL
      || (s = ks_mul (s, s, error)) == NULL)
    return NULL;
  return ks_matmul (s, map, error);
}

static gboolean
build_model (KsTrainer *t, Ctr *x, GError **error)
{
  const KsConfig *c = ks_trainer_config (t);
  guint64 seed = ks_config_get_int (c, "model", "seed");
  g_auto (GStrv) hidden = ks_config_get_list (c, "model", "hidden");
  gint64 B = (gint64) ks_trainer_batch (t), slots_shape[] = { B, KS_CRITEO_SLOTS },
         dense_shape[] = { B, KS_CRITEO_DENSE }, y_shape[] = { B },
         rows_shape[] = { (gint64) x->capacity, (gint64) x->dim },
         flat[] = { B, KS_CRITEO_SLOTS * (gint64) x->dim }, wide_shape[] = { KS_CRITEO_DENSE, 2 };
  KsExpr *slots, *dense, *y, *e, *h, *wd, *wide, *fm;
  guint n_hidden = g_strv_length (hidden);

  if (n_hidden == 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[model] hidden: the ctr model needs at least one hidden layer");
      return FALSE;
    }
  KsModel *model = ks_model_new (ks_trainer_compute (t));
  KsExpr *logits, *loss;
  if (!ks_trainer_set_model (t, model, error))
    return FALSE;
  if ((slots = ks_model_data (ks_trainer_model (t), "slots", 2, slots_shape, KS_DTYPE_INT64, error)) == NULL
      || (dense = ks_model_data (ks_trainer_model (t), "dense", 2, dense_shape, KS_DTYPE_FLOAT32, error)) == NULL
      || (y = ks_model_data (ks_trainer_model (t), "y", 1, y_shape, KS_DTYPE_INT64, error)) == NULL
      || (x->rows_param = ks_model_parameter (ks_trainer_model (t), ROWS_PARAM, 2, rows_shape,
                                              (KsInit) { KS_INIT_CONSTANT, 0, 0, 0 }, error)) == NULL
      || (e = ks_embedding (slots, x->rows_param, error)) == NULL
      || (e = ks_reshape (e, 2, flat, error)) == NULL)
    return FALSE;
  h = e;
  for (guint i = 0; i < n_hidden; i++)
    {
      guint64 size;
      g_autofree char *name = g_strdup_printf ("fc_%u", i);
      if (!g_ascii_string_to_unsigned (hidden[i], 10, 1, 1 << 20, &size, NULL))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "[model] hidden: '%s' is not a layer size (an integer in [1, 1048576])",
                       hidden[i]);
          return FALSE;
        }
      gint64 wd_shape[] = { KS_CRITEO_DENSE, (gint64) size };
      if ((h = ks_fc (h, (gint64) size, i == 0 ? -1 : KS_UNARY_RELU, name, seed + i, error)) == NULL)
        return FALSE;
      if (i > 0)
        continue;
      /* the first layer also takes the integer features */
      if ((wd = ks_model_parameter (ks_trainer_model (t), "fc_0.dense_w", 2, wd_shape,
                                    (KsInit) { KS_INIT_XAVIER, 1, 0, seed + 500 }, error)) == NULL
          || (wd = ks_matmul (dense, wd, error)) == NULL || (h = ks_add (h, wd, error)) == NULL
          || (h = ks_relu (h, error)) == NULL)
        return FALSE;
    }
  /* the deep part's logits, plus the wide part's (a linear map of the rows), plus the
   * factorisation machine's */
  if ((h = ks_fc (h, 2, -1, "out", seed + 1000, error)) == NULL
      || (wide = ks_fc (e, 2, -1, "wide", seed + 2000, error)) == NULL
      || (h = ks_add (h, wide, error)) == NULL
      || (wd = ks_model_parameter (ks_trainer_model (t), "wide.dense_w", 2, wide_shape,
                                   (KsInit) { KS_INIT_XAVIER, 1, 0, seed + 2500 }, error)) == NULL
      || (wd = ks_matmul (dense, wd, error)) == NULL || (h = ks_add (h, wd, error)) == NULL || (fm = fm_part (t, x, e, seed, error)) == NULL
      || (logits = ks_add (h, fm, error)) == NULL
      || (loss = ks_softmax_cross_entropy (logits, y, error)) == NULL
      || (x->prob = ks_softmax (logits, FALSE, error)) == NULL)
    return FALSE;
  ks_trainer_set_loss (t, loss, logits);
  static const char *const inputs[] = { "slots", "dense", NULL };
  ks_trainer_set_inputs (t, inputs);
  return ks_model_init (ks_trainer_model (t), error);
}

/* The embeddings live in a sparse table: pslib's servers, or one process's memory. */
static gboolean
ctr_check (const KsConfig *c, const KsTrainWorld *world, GError **error)
{
  const char *mode = ks_config_get_string (c, "job", "mode");
  gboolean collective = strcmp (mode, "collective") == 0;

  if (strcmp (mode, "transpiler") == 0 || (collective && world->workers > 1))
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[data] task = ctr keeps its embeddings in a sparse table: a job of several "
                   "processes needs [job] mode = pslib (this one is %s)", mode);
      return FALSE;
    }
  if (!collective)
    return TRUE;
  /* one process alone */
  if (ks_config_get_double (c, "optim", "clip_norm") > 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[optim] clip_norm with the ctr task: the rows' gradients go to the sparse "
                   "table, whose rule is not clipped; remove clip_norm");
      return FALSE;
    }
  if (*ks_config_get_string (c, "train", "checkpoint_dir") != '\0')
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[train] checkpoint_dir: a ctr model trained by one process keeps its sparse "
                   "table in memory only; for checkpoints train with servers ([job] mode = "
                   "pslib, ksdist launch --servers S --workers W)");
      return FALSE;
    }
  return TRUE;
}

static gboolean
ctr_build (KsTrainer *t, GError **error)
{
  const KsConfig *c = ks_trainer_config (t);
  Ctr *x = g_new0 (Ctr, 1);
  ks_trainer_set_data (t, x);
  const char *path = ks_config_get_string (c, "data", "path");
  gboolean worker = ks_trainer_role (t) == NULL || ks_role_maker_is_worker (ks_trainer_role (t));
  KsSparseConfig table;
  gsize B = ks_trainer_batch (t), ids = B * KS_CRITEO_SLOTS;

  ks_sparse_config_read (c, TABLE, &table);
  x->dim = 1 + (gsize) table.embedx_dim;
  x->capacity = 1 + ids;
  x->epoch = -1;
  x->shrink_every = ks_config_get_int (c, "data", "shrink_every");
  if (*ks_config_get_string (c, "train", "export_dir") != '\0' && worker && ks_trainer_rank (t) <= 0
      && !ks_trainer_describing (t))
    g_warning ("[train] export_dir: the exported model holds the dense part and emb.rows, the "
               "rows of the last batch evaluated; the embeddings themselves stay in the sparse "
               "table (the servers' checkpoints)");
  if (worker)
    {
      g_autofree char *train = g_build_filename (path, "train", NULL);
      g_autofree char *test = g_build_filename (path, "test", NULL);
      if (!g_file_test (train, G_FILE_TEST_IS_DIR))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "[data] path = %s has no train/ directory: make the data with `ksdist "
                       "datagen ctr %s` (or give Criteo files in DIR/train and DIR/test)", path,
                       path);
          return FALSE;
        }
      if (!load_split (t, train, TRUE, &x->train, error) || !load_split (t, test, FALSE, &x->test, error))
        return FALSE;
    }
  if (!build_model (t, x, error))
    return FALSE;
  if (ks_trainer_algorithm (t) != NULL
      && !ks_algorithm_sparse_table (ks_trainer_algorithm (t), TABLE, ROWS_PARAM, error))
    return FALSE;
  if (ks_trainer_algorithm (t) == NULL)
    x->local = ks_sparse_table_new (TABLE, &table);
  x->slots = g_new0 (gint64, ids);
  x->labels = g_new0 (gint64, B);
  x->dense = g_new0 (float, B * KS_CRITEO_DENSE);
  x->sorted = g_new (IdPos, ids);
  x->uniq = g_new (guint64, ids);
  x->shows = g_new (float, ids);
  x->clicks = g_new (float, ids);
  x->values = g_new0 (float, x->capacity * x->dim);
  const KsFeed feeds[] = { { "slots", x->slots, ids * sizeof (gint64) },
                           { "dense", x->dense, B * KS_CRITEO_DENSE * sizeof (float) },
                           { "y", x->labels, B * sizeof (gint64) } };
  ks_trainer_set_feeds (t, feeds, G_N_ELEMENTS (feeds));
  return TRUE;
}

/* Copies sample `k` of `data` into row `i` of the batch. */
static void
put_sample (Ctr *x, const KsCriteo *data, gsize k, gsize i)
{
  for (int s = 0; s < KS_CRITEO_SLOTS; s++)
    x->sorted[i * KS_CRITEO_SLOTS + s] = (IdPos) { data->ids[k * KS_CRITEO_SLOTS + s],
                                                   (guint32) (i * KS_CRITEO_SLOTS + s) };
  memcpy (x->dense + i * KS_CRITEO_DENSE, data->dense + k * KS_CRITEO_DENSE,
          KS_CRITEO_DENSE * sizeof (float));
  x->labels[i] = data->labels[k] > 0.5f;
}

/* This worker's samples in epochs, each in an order drawn from the seed and the epoch. */
static void
ctr_batch (KsTrainer *t, gint64 step)
{
  Ctr *x = ks_trainer_data (t);
  gsize n = x->train->n;
  for (gsize i = 0; i < ks_trainer_batch (t); i++)
    {
      guint64 k = (guint64) (step - 1) * ks_trainer_batch (t) + i;
      if ((gint64) (k / n) != x->epoch)
        {
          guint64 seed = ks_config_get_int (ks_trainer_config (t), "train", "seed");
          g_autoptr (GRand) rng = g_rand_new_with_seed ((guint32) (seed * 7919u + k / n));
          x->epoch = k / n;
          x->order = g_renew (guint, x->order, n);
          for (gsize j = 0; j < n; j++)
            x->order[j] = j;
          for (gsize j = n; j > 1; j--)
            {
              gsize r = g_rand_int_range (rng, 0, (gint32) j);
              guint tmp = x->order[j - 1];
              x->order[j - 1] = x->order[r];
              x->order[r] = tmp;
            }
        }
      put_sample (x, x->train, x->order[k % n], i);
    }
}

static int
by_id (gconstpointer a, gconstpointer b)
{
  guint64 x = ((const IdPos *) a)->id, y = ((const IdPos *) b)->id;
  return x < y ? -1 : x > y;
}

/* The batch's distinct ids (not 0) with their shows and clicks; each slot's row index. */
static void
dedupe (KsTrainer *t, Ctr *x)
{
  gsize total = ks_trainer_batch (t) * KS_CRITEO_SLOTS;
  qsort (x->sorted, total, sizeof (IdPos), by_id);
  x->n_uniq = 0;
  for (gsize i = 0; i < total; i++)
    {
      const IdPos *e = &x->sorted[i];
      gboolean click = x->labels[e->pos / KS_CRITEO_SLOTS] != 0;
      if (e->id == 0)
        {
          x->slots[e->pos] = 0;
          continue;
        }
      if (x->n_uniq == 0 || x->uniq[x->n_uniq - 1] != e->id)
        {
          x->uniq[x->n_uniq] = e->id;
          x->shows[x->n_uniq] = x->clicks[x->n_uniq] = 0;
          x->n_uniq++;
        }
      x->shows[x->n_uniq - 1] += 1;
      x->clicks[x->n_uniq - 1] += click;
      x->slots[e->pos] = (gint64) x->n_uniq; /* row 0 is the empty field's */
    }
}

/* The distinct ids' rows into emb.rows (rows 1..n; row 0 zero). */
static gboolean
fill_rows (KsTrainer *t, Ctr *x, gboolean train, GError **error)
{
  float *rows = x->values + x->dim;
  const KsTensor *param = ks_arena_tensor (ks_model_parameters (ks_trainer_model (t)), ROWS_PARAM);

  if (x->local != NULL && train)
    {
      if (!ks_sparse_table_pull (x->local, x->uniq, x->n_uniq, rows, error))
        return FALSE;
    }
  else if (x->local != NULL)
    ks_sparse_table_lookup (x->local, x->uniq, x->n_uniq, rows);
  else if (!ks_algorithm_pull_sparse (ks_trainer_algorithm (t), TABLE, x->uniq, x->n_uniq, train, rows, error))
    return FALSE;
  memset (x->values, 0, x->dim * sizeof (float));
  if (!ks_compute_copy_to_device (ks_trainer_compute (t), param->data, x->values,
                                  (x->n_uniq + 1) * x->dim * sizeof (float), error))
    return FALSE;
  ks_model_parameters_changed (ks_trainer_model (t));
  return TRUE;
}

static gboolean
ctr_prepare (KsTrainer *t, gint64 step, GError **error)
{
  Ctr *x = ks_trainer_data (t);
  dedupe (t, x);
  return fill_rows (t, x, TRUE, error);
}

/* A day's end every [data] shrink_every steps, asked by the first worker. */
static gboolean
shrink (KsTrainer *t, Ctr *x, gint64 step, GError **error)
{
  guint64 deleted;

  if (x->shrink_every == 0 || step % x->shrink_every != 0 || ks_trainer_rank (t) > 0)
    return TRUE;
  if (x->local != NULL)
    deleted = ks_sparse_table_shrink (x->local);
  else if (!ks_algorithm_shrink (ks_trainer_algorithm (t), &deleted, error))
    return FALSE;
  g_message ("step %" G_GINT64_FORMAT ": shrink deleted %" G_GUINT64_FORMAT " rows", step, deleted);
  return TRUE;
}

static gboolean
ctr_finish (KsTrainer *t, gint64 step, GError **error)
{
  Ctr *x = ks_trainer_data (t);
  const KsTensor *grad = ks_arena_tensor (ks_model_gradients (ks_trainer_model (t)), ROWS_PARAM);
  float *grads = x->values + x->dim;
  gsize n = x->n_uniq * x->dim;

  if (!ks_compute_copy_to_host (ks_trainer_compute (t), grads, (const float *) grad->data + x->dim,
                                n * sizeof (float), error))
    return FALSE;
  for (gsize i = 0; i < n; i++) /* the batch's mean -> the sum over the shows */
    grads[i] *= (float) ks_trainer_batch (t);
  if (x->local != NULL)
    {
      if (!ks_sparse_table_push (x->local, x->uniq, x->n_uniq, grads, x->shows, x->clicks,
                                 error))
        return FALSE;
    }
  else if (!ks_algorithm_push_sparse (ks_trainer_algorithm (t), TABLE, step, x->uniq, x->n_uniq, grads,
                                      x->shows, x->clicks, error))
    return FALSE;
  return shrink (t, x, step, error);
}

/* AUC over the test split: worker r scores samples r, r + W, ...; the counts add up. */
static gboolean
ctr_evaluate (KsTrainer *t, gboolean final, double *value, gsize *samples, GError **error)
{
  Ctr *x = ks_trainer_data (t);
  g_autoptr (KsAuc) auc = ks_auc_new (KS_AUC_BUCKETS);
  g_autofree float *prob = g_new (float, ks_trainer_batch (t) * 2);
  g_autofree float *p1 = g_new (float, ks_trainer_batch (t));
  g_autofree float *y = g_new (float, ks_trainer_batch (t));
  KsComm *workers = ks_trainer_role (t) != NULL ? ks_role_maker_worker_comm (ks_trainer_role (t)) : NULL;
  int rank = MAX (ks_trainer_rank (t), 0), world = MAX (ks_trainer_world (t), 1);
  gsize held = x->test->n, cap = ks_trainer_eval_cap (t);
  if (cap > 0 && cap < held) /* [train] eval_rows: the first ones */
    {
      ks_trainer_set_eval_total (t, held);
      held = cap;
    }
  gsize mine = held > (gsize) rank ? (held - rank + world - 1) / world : 0;

  for (gsize start = 0; start < mine; start += ks_trainer_batch (t))
    {
      gsize valid = MIN (ks_trainer_batch (t), mine - start);
      for (gsize i = 0; i < ks_trainer_batch (t); i++) /* a short last batch repeats its last sample */
        put_sample (x, x->test, (start + MIN (i, valid - 1)) * world + rank, i);
      gsize n_feeds;
      const KsFeed *feeds = ks_trainer_feeds (t, &n_feeds);
      dedupe (t, x);
      if (!fill_rows (t, x, FALSE, error)
          || !ks_model_run (ks_trainer_model (t), feeds, n_feeds, &x->prob, 1, error)
          || !ks_tensor_to_host (ks_expr_value (x->prob, error), prob,
                                 ks_trainer_batch (t) * 2 * sizeof (float), error))
        return FALSE;
      for (gsize i = 0; i < valid; i++)
        {
          p1[i] = prob[2 * i + 1];
          y[i] = (float) x->labels[i];
        }
      ks_auc_add (auc, p1, y, valid);
    }
  gsize n;
  double *counts = ks_auc_counts (auc, &n);
  if (workers != NULL && !ks_comm_allreduce (workers, counts, n, KS_DTYPE_FLOAT64, KS_REDUCE_SUM, error))
    return FALSE;
  *value = ks_auc_value (auc);
  if (samples != NULL)
    *samples = (gsize) ks_auc_samples (auc);
  return TRUE;
}

static const char *
ctr_describe (KsTrainer *t)
{
  Ctr *x = ks_trainer_data (t);
  static char text[256];
  g_snprintf (text, sizeof text, "a ctr model (26 slots of sparse table " TABLE " rows of %"
              G_GSIZE_FORMAT " floats, 13 integer features, MLP %s) on %s (%" G_GSIZE_FORMAT
              " training samples on this worker)", x->dim,
              ks_config_get_string (ks_trainer_config (t), "model", "hidden"),
              ks_config_get_string (ks_trainer_config (t), "data", "path"), x->train != NULL ? x->train->n : 0);
  return text;
}

static void
ctr_clear (KsTrainer *t)
{
  Ctr *x = ks_trainer_data (t);
  ks_criteo_free (x->train);
  ks_criteo_free (x->test);
  ks_sparse_table_free (x->local);
  g_free (x->slots);
  g_free (x->labels);
  g_free (x->dense);
  g_free (x->sorted);
  g_free (x->uniq);
  g_free (x->shows);
  g_free (x->clicks);
  g_free (x->values);
  g_free (x->order);
  g_free (x);
}

static gint64
ctr_last_epoch (KsTrainer *t, gint64 step)
{
  Ctr *x = ks_trainer_data (t);
  return x->train == NULL ? -1 : (gint64) ((guint64) step * ks_trainer_batch (t) / x->train->n) - 1;
}

static const char *const ctr_tables[] = { TABLE, NULL };

static const char *const ctr_settings[] = {
  "model.type", "model.hidden", "model.seed", "data.task", "data.path", "data.bad_lines",
  "data.shrink_every", NULL,
};

/* A missing data folder is most often one not made yet. */
static char *
ctr_missing_hint (const KsConfig *c, const char *key)
{
  if (strcmp (key, "data.path") != 0)
    return NULL;
  return g_strdup_printf ("make the data with `ksdist datagen ctr %s` (or give Criteo files "
                          "in DIR/train and DIR/test)", ks_config_get_string (c, "data", "path"));
}

const KsTrainTask ks_ctr_task = {
  .size = sizeof (KsTrainTask),
  .name = "the ctr model",
  .metric = "auc",
  .unit = "samples",
  .build = ctr_build,
  .batch = ctr_batch,
  .evaluate = ctr_evaluate,
  .describe = ctr_describe,
  .clear = ctr_clear,
  .last_epoch = ctr_last_epoch,
  .prepare = ctr_prepare,
  .finish = ctr_finish,
  .settings = ctr_settings,
  .check = ctr_check,
  .sparse_tables = ctr_tables,
  .missing_hint = ctr_missing_hint,
  .honours_eval_rows = TRUE,
};
