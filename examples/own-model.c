/* A model and data of the program's own, trained by ksdist's trainer in any mode:
 *   ./own-model own-model.ini                                    one process
 *   ksdist launch -n 2 -- ./own-model own-model.ini              data parallel
 *   ksdist launch --servers 2 --workers 2 -- ./own-model own-model.ini --set job.mode=transpiler
 *   ksdist launch -n 2 -- ./own-model own-model.ini --set pipeline.stages=2
 * Build: cc own-model.c $(pkg-config --cflags --libs ksdist) -lm -o own-model */
#include <ksdist/ksdist.h>

enum { IN = 4, EVAL_ROWS = 1024 };
typedef struct { gint64 size; int act; const char *name; } Dense;
/* the hidden layers' width is [model] units, a key of the program's own (main) */
static Dense dense[] = { { 32, KS_UNARY_TANH, "h1" }, { 32, KS_UNARY_TANH, "h2" },
                               { 2, -1, "out" } };
typedef struct {
  float *x;   /* a step's rows: points in [-1, 1]^4 ... */
  gint64 *y;  /* ... labelled 1 inside the sphere of radius 1.2 */
  KsExpr *accuracy;
} Rows;
static gint64 rows; /* what the layers are built for: a micro-batch on a pipeline */

/* Row g of an endless stream of points, the same whichever worker draws it. */
static void
point (guint64 g, float *p, gint64 *label)
{
  double r2 = 0;
  for (int j = 0; j < IN; j++)
    {
      guint64 h = (g * IN + j + 1) * 0x9e3779b97f4a7c15u;
      h = (h ^ (h >> 31)) * 0xbf58476d1ce4e5b9u;
      p[j] = (float) ((h ^ (h >> 29)) >> 11) * 0x1p-52f - 1;
      r2 += p[j] * p[j];
    }
  *label = r2 < 1.44;
}

static KsExpr *
dense_layer (KsModel *m, KsExpr *in, gconstpointer args, GError **e)
{
  const Dense *d = args;
  const gint64 shape[] = { rows, IN };
  if (in == NULL && (in = ks_model_data (m, "x", 2, shape, KS_DTYPE_FLOAT32, e)) == NULL)
    return NULL;
  return ks_fc (in, d->size, d->act, d->name, d - dense + 1, e);
}

static KsExpr *
labels (KsModel *m, GError **e)
{
  const gint64 shape[] = { rows };
  KsExpr *found = ks_model_find (m, "y");
  return found != NULL ? found : ks_model_data (m, "y", 1, shape, KS_DTYPE_INT64, e);
}

static KsExpr *
loss_layer (KsModel *m, KsExpr *logits, gconstpointer args, GError **e)
{
  KsExpr *l = labels (m, e);
  return l != NULL ? ks_softmax_cross_entropy (logits, l, e) : NULL;
}

static KsExpr *
accuracy_layer (KsModel *m, KsExpr *logits, gconstpointer args, GError **e)
{
  KsExpr *l = labels (m, e);
  return l != NULL ? ks_accuracy (logits, l, e) : NULL;
}

static gboolean
build (KsTrainer *t, GError **e)
{
  static KsLayerDesc layers[G_N_ELEMENTS (dense)];
  static const KsLayerDesc loss = { "Loss", loss_layer }, metric = { "Accuracy", accuracy_layer };
  static const char *const inputs[] = { "x", NULL };
  Rows *r = ks_trainer_data (t);
  gsize b = ks_trainer_batch (t);

  rows = ks_trainer_rows (t);
  dense[0].size = dense[1].size = ks_config_get_int (ks_trainer_config (t), "model", "units");
  for (gsize i = 0; i < G_N_ELEMENTS (dense); i++)
    layers[i] = (KsLayerDesc) { "Dense", dense_layer, &dense[i] };
  r->x = g_new (float, b * IN);
  r->y = g_new (gint64, b);
  const KsFeed feeds[] = { { "x", r->x, b * IN * sizeof *r->x }, { "y", r->y, b * sizeof *r->y } };
  ks_trainer_set_feeds (t, feeds, G_N_ELEMENTS (feeds));
  ks_trainer_set_inputs (t, inputs);
  return ks_trainer_build_layers (t, layers, G_N_ELEMENTS (layers), &loss, &metric,
                                  &r->accuracy, e);
}

/* This worker's rows of the step's global batch: batch rows from rank * batch. */
static void
batch (KsTrainer *t, gint64 step)
{
  Rows *r = ks_trainer_data (t);
  gsize b = ks_trainer_batch (t);
  guint64 first = ((guint64) (step - 1) * ks_trainer_world (t) + ks_trainer_rank (t)) * b;
  for (gsize i = 0; i < b; i++)
    point (first + i, r->x + i * IN, r->y + i);
}

/* Accuracy on EVAL_ROWS rows from 2^40 on, which no step reaches: each row once, in
 * batches, the last one partial (ks_trainer_metric_sum counts only its first rows). */
static gboolean
evaluate (KsTrainer *t, gboolean final, double *value, gsize *samples, GError **e)
{
  Rows *r = ks_trainer_data (t);
  gsize b = ks_trainer_batch (t), n;
  const KsFeed *feeds = ks_trainer_feeds (t, &n);
  double right = 0, sum;
  gsize held = EVAL_ROWS, cap = ks_trainer_eval_cap (t); /* [train] eval_rows, 0: all */
  if (cap > 0 && cap < held)
    ks_trainer_set_eval_total (t, held), held = cap;
  for (gsize first = 0; first < held; first += b)
    {
      gsize rows = MIN (b, held - first);
      for (gsize i = 0; i < rows; i++)
        point ((G_GUINT64_CONSTANT (1) << 40) + first + i, r->x + i * IN, r->y + i);
      if (!ks_trainer_metric_sum (t, feeds, n, r->accuracy, rows, &sum, e))
        return FALSE;
      right += sum;
    }
  *value = right / held;
  *samples = held;
  return TRUE;
}

static void
clear (KsTrainer *t)
{
  Rows *r = ks_trainer_data (t);
  g_clear_pointer (&r->x, g_free);
  g_clear_pointer (&r->y, g_free);
}

int
main (int argc, char **argv)
{
  static const char *const no_settings[] = { NULL }; /* the data is all here */
  /* a key of the program's own, checked and resolved (file < KS_MODEL_UNITS < --set) as
   * ksdist's own keys are */
  static const KsKeyDesc keys[] = {
    { "model", "units", KS_VALUE_INT, "32", 1, 4096, NULL, "width of the two hidden layers" },
  };
  static const KsTrainTask task = {
    .size = sizeof task, .name = "own-model", .metric = "accuracy", .unit = "samples",
    .build = build, .batch = batch, .evaluate = evaluate, .clear = clear,
    .settings = no_settings, .schema = keys, .n_schema = G_N_ELEMENTS (keys),
    .honours_eval_rows = TRUE, /* evaluate takes ks_trainer_eval_cap's rows */
  };
  static Rows data;
  return ks_trainer_main (argc, argv, &task, &data);
}
