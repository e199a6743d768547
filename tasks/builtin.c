/* The tasks of ksdist train: a GPT predicting the next character of a text or solving
 * additions (the networks on samples are samples-task.c's), and the choice among all of
 * them. Each step's batch depends only on the seed and the step. */
#include "net.h"
#include "samples.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* [model]: the model a task builds, read here (the choice of task, the GPT's shape), in
 * net.c (the MLP), net-config.c (a layer list) and the tasks; [model] init_from is the
 * trainer's, declared by the core. ks_tasks_add_schema adds it with the other groups. */
const KsKeyDesc ks_tasks_model_keys[] = {
  { "model", "type", KS_VALUE_CHOICE, "mlp", 1, 0, "mlp|layers|gpt|ctr",
    "The model `ksdist train` builds: mlp (for spirals, rings), layers (the [layer.NAME] "
    "groups listed in [model] net), gpt (for text, addition) or ctr (for ctr: sparse slots' "
    "embeddings and integer features into an MLP)" },
  { "model", "net", KS_VALUE_LIST, "", 1, 0, NULL,
    "layers: the names of the [layer.NAME] groups, input to output (e.g. conv1, pool1, "
    "flat, out); the last layer gives one value per class (per target with loss = mse, one "
    "logit with loss = logistic)" },
  { "model", "loss", KS_VALUE_CHOICE, "cross_entropy", 1, 0, "cross_entropy|mse|logistic",
    "layers: cross_entropy (softmax over classes; metric accuracy), mse (mean squared "
    "error against values; metric RMSE) or logistic (binary: sigmoid and binary cross "
    "entropy of one logit a row against labels 0 and 1; metric AUC)" },
  { "model", "hidden", KS_VALUE_LIST, "64,64", 1, 0, NULL,
    "Sizes of the MLP's hidden layers, input to output (mlp and ctr)" },
  { "model", "activation", KS_VALUE_CHOICE, "tanh", 1, 0, "relu|tanh|sigmoid|gelu",
    "Activation after each hidden layer of the MLP" },
  { "model", "dropout", KS_VALUE_DOUBLE, "0", 0, 0.95, NULL,
    "Dropout rate: after each hidden layer of the MLP; on the GPT's embeddings and on each "
    "residual branch before it is added. 0 for none; evaluation never drops" },
  { "model", "context", KS_VALUE_INT, "64", 2, 4096, NULL, "GPT: tokens per sequence" },
  { "model", "layers", KS_VALUE_INT, "2", 1, 256, NULL, "GPT: transformer blocks" },
  { "model", "heads", KS_VALUE_INT, "4", 1, 256, NULL, "GPT: attention heads (divide width)" },
  { "model", "width", KS_VALUE_INT, "64", 1, 65536, NULL, "GPT: embedding width" },
  { "model", "skip", KS_VALUE_BOOL, "false", 1, 0, NULL,
    "GPT: a long skip connection, the embeddings added to the last block's output (on a "
    "pipeline it goes straight from the first stage to the last)" },
  { "model", "seed", KS_VALUE_INT, "1", 0, 1e15, NULL, "Seed of the parameter initialisers" },
  { NULL },
};

/* A random generator for `step`: the same step always draws the same batch. */
static GRand *
step_rng (const KsConfig *c, gint64 step)
{
  guint64 seed = ks_config_get_int (c, "train", "seed");
  return g_rand_new_with_seed ((guint32) (seed * 1000003u + (guint64) step));
}

/* ---- gpt on a text ---- */

/* What both GPT tasks keep first in their task data: the model's shape and its layer
 * list, and what they feed: rows of `context` tokens, their positions and the next
 * tokens. */
typedef struct {
  KsGptShape shape;
  Net net;
  gsize context;
  gint64 *tokens, *positions, *targets;
  char *description;
} GptFeeds;

typedef struct {
  GptFeeds g;
  KsText *text;
  gsize split; /* tokens before `split` train, the rest is held out */
} Text;

/* The model of [model] on `vocab` tokens (those of `source`) as g's layer list, built and
 * initialised (on the trainer's model, or as this worker's pipeline stage): the GPT, or
 * with [model] type = layers the [layer.NAME] groups of [model] net. */
static gboolean
gpt_build (KsTrainer *t, GptFeeds *g, gsize vocab, const char *source, GError **error)
{
  const KsConfig *c = ks_trainer_config (t);
  KsGptShape *shape = &g->shape;
  const KsLayerDesc no_metric = { 0 };
  KsExpr *metric;

  shape->vocab = vocab;
  shape->context = ks_config_get_int (c, "model", "context");
  shape->batch = ks_trainer_rows (t);
  ks_trainer_set_tokens_per_row (t, shape->context);
  if (strcmp (ks_config_get_string (c, "model", "type"), "layers") == 0)
    {
      if (!net_on_tokens (&g->net, c, vocab, shape->context, source, error))
        return FALSE;
      g->net.input = "tokens"; /* the data the GPT reads: one set of feeds for both */
      g->net.labels = "targets";
    }
  else
    {
      shape->layers = ks_config_get_int (c, "model", "layers");
      shape->heads = ks_config_get_int (c, "model", "heads");
      shape->width = ks_config_get_int (c, "model", "width");
      shape->seed = ks_config_get_int (c, "model", "seed");
      shape->dropout = ks_config_get_double (c, "model", "dropout");
      shape->skip = ks_config_get_bool (c, "model", "skip");
      if (!net_gpt (&g->net, shape, error))
        return FALSE;
    }
  static const char *const with_positions[] = { "tokens", "positions", NULL };
  static const char *const ids_only[] = { "tokens", NULL };
  ks_trainer_set_inputs (t, net_has_positions (&g->net) ? with_positions : ids_only);
  net_describe (&g->net, shape->batch, 0, NULL);
  return ks_trainer_build_layers (t, g->net.desc, g->net.n_desc, &g->net.loss_desc, &no_metric,
                                  &metric, error);
}

/* Allocates g's rows for ks_trainer_batch (t) and makes them t's feeds: tokens, their
 * positions when the model reads them, targets. */
static void
gpt_feeds_init (KsTrainer *t, GptFeeds *g)
{
  gsize n = ks_trainer_batch (t) * g->context, k = 0;
  KsFeed feeds[3];
  g->tokens = g_new (gint64, n);
  g->positions = g_new (gint64, n);
  g->targets = g_new (gint64, n);
  for (gsize i = 0; i < n; i++)
    g->positions[i] = i % g->context;
  feeds[k++] = (KsFeed) { "tokens", g->tokens, n * sizeof (gint64) };
  if (net_has_positions (&g->net))
    feeds[k++] = (KsFeed) { "positions", g->positions, n * sizeof (gint64) };
  feeds[k++] = (KsFeed) { "targets", g->targets, n * sizeof (gint64) };
  ks_trainer_set_feeds (t, feeds, k);
}

static void
gpt_feeds_clear (GptFeeds *g)
{
  net_clear (&g->net);
  g_free (g->tokens);
  g_free (g->positions);
  g_free (g->targets);
  g_free (g->description);
}

static const char *
gpt_describe (KsTrainer *t)
{
  return ((GptFeeds *) ks_trainer_data (t))->description;
}

/* Windows of context + 1 tokens: tokens[i], targets[i] = the next token. */
static void
fill_window (Text *x, gsize row, gsize start)
{
  for (gsize j = 0; j < x->g.context; j++)
    {
      x->g.tokens[row * x->g.context + j] = x->text->tokens[start + j];
      x->g.targets[row * x->g.context + j] = x->text->tokens[start + j + 1];
    }
}

static gboolean
text_build (KsTrainer *t, GError **error)
{
  const KsConfig *c = ks_trainer_config (t);
  Text *x = g_new0 (Text, 1);
  ks_trainer_set_data (t, x);

  if ((x->text = ks_text_load (ks_config_get_string (c, "data", "path"), error)) == NULL)
    return FALSE;
  x->g.context = ks_config_get_int (c, "model", "context");
  x->split = x->text->length - x->text->length / 10;
  if (x->text->length / 10 < x->g.context + 1)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[data] path = %s: %" G_GSIZE_FORMAT " bytes is too short for [model] context "
                   "= %" G_GSIZE_FORMAT " (its last tenth, held out, must hold a window)",
                   x->text->path, x->text->length, x->g.context);
      return FALSE;
    }
  if (!gpt_build (t, &x->g, x->text->vocab_size, x->text->path, error))
    return FALSE;

  gpt_feeds_init (t, &x->g);
  if (strcmp (ks_config_get_string (c, "model", "type"), "layers") == 0)
    x->g.description = g_strdup_printf ("a layer list (%" G_GSIZE_FORMAT " layers, vocabulary %"
                                        G_GINT64_FORMAT ") on %s (%" G_GSIZE_FORMAT " bytes)",
                                        x->g.net.n_desc, x->g.net.outputs, x->text->path,
                                        x->text->length);
  else
    x->g.description = g_strdup_printf ("a GPT (%" G_GINT64_FORMAT " layers, width %"
                                        G_GINT64_FORMAT ", %" G_GINT64_FORMAT " heads, "
                                        "vocabulary %" G_GSIZE_FORMAT ") on %s (%"
                                        G_GSIZE_FORMAT " bytes)", x->g.shape.layers,
                                        x->g.shape.width, x->g.shape.heads,
                                        x->text->vocab_size, x->text->path, x->text->length);
  return TRUE;
}

static void
text_batch (KsTrainer *t, gint64 step)
{
  Text *x = ks_trainer_data (t);
  g_autoptr (GRand) rng = step_rng (ks_trainer_config (t), step);
  gsize first = ks_trainer_rank (t) * ks_trainer_batch (t);
  for (gsize g = 0; g < first + ks_trainer_batch (t); g++) /* the global batch's rows up to ours */
    {
      gint32 start = g_rand_int_range (rng, 0, (gint32) (x->split - x->g.context - 1) + 1);
      if (g >= first)
        fill_window (x, g - first, start);
    }
}

static void
fill_held (gpointer data, gsize row, gsize window)
{
  Text *x = data;
  fill_window (x, row, x->split + window * x->g.context);
}

/* Mean loss over the last tenth's tokens, each predicted once: every whole window of
 * context tokens (the last fewer than context are not a window). */
static gboolean
text_evaluate (KsTrainer *t, gboolean final, double *value, gsize *samples, GError **error)
{
  Text *x = ks_trainer_data (t);
  gsize windows = (x->text->length - x->split - 1) / x->g.context;
  (void) final;
  return net_eval_windows (t, windows, x->g.context, fill_held, x, value, samples, error);
}

static void
text_clear (KsTrainer *t)
{
  Text *x = ks_trainer_data (t);
  ks_text_free (x->text);
  gpt_feeds_clear (&x->g);
  g_free (x);
}

/* What `ksdist generate` needs to rebuild a GPT: its shape and the vocabulary. */
static void
gpt_metadata (KsTrainer *t, GHashTable *meta, const guint8 *vocab, gsize vocab_size)
{
  const char *keys[] = { "context", "layers", "heads", "width" };
  GString *hex = g_string_new (NULL);

  g_hash_table_insert (meta, g_strdup ("model.type"), g_strdup ("gpt"));
  for (guint i = 0; i < G_N_ELEMENTS (keys); i++)
    g_hash_table_insert (meta, g_strconcat ("model.", keys[i], NULL),
                         g_strdup_printf ("%" G_GINT64_FORMAT,
                                          ks_config_get_int (ks_trainer_config (t), "model", keys[i])));
  if (ks_config_get_bool (ks_trainer_config (t), "model", "skip")) /* absent: no skip, as before */
    g_hash_table_insert (meta, g_strdup ("model.skip"), g_strdup ("true"));
  for (gsize i = 0; i < vocab_size; i++)
    g_string_append_printf (hex, "%02x", vocab[i]);
  g_hash_table_insert (meta, g_strdup ("vocab_hex"), g_string_free (hex, FALSE));
}

static void
text_metadata (KsTrainer *t, GHashTable *meta)
{
  Text *x = ks_trainer_data (t);
  gpt_metadata (t, meta, x->text->vocab, x->text->vocab_size);
}

/* A layer list's: its type, context and vocabulary, so `ksdist generate` runs its export
 * (the graph is in the export; the layers' settings are the config's). */
static void
text_layers_metadata (KsTrainer *t, GHashTable *meta)
{
  Text *x = ks_trainer_data (t);
  gpt_metadata (t, meta, x->text->vocab, x->text->vocab_size);
  g_hash_table_insert (meta, g_strdup ("model.type"), g_strdup ("layers"));
  g_hash_table_remove (meta, "model.layers");
  g_hash_table_remove (meta, "model.heads");
  g_hash_table_remove (meta, "model.width");
  g_hash_table_remove (meta, "model.skip");
}

#define GPT_SETTINGS                                                                      \
  "model.type", "model.context", "model.layers", "model.heads", "model.width", "model.seed", \
      "model.dropout", "model.skip", "data.task"

/* The [layer.NAME] groups: those of [model] net with type = layers, none with the GPT. */
static gboolean
text_check (const KsConfig *c, const KsTrainWorld *world, GError **error)
{
  (void) world;
  return net_check_config (c, error);
}

static const char *const text_settings[] = { GPT_SETTINGS, "data.path", NULL };

static const KsTrainTask text_task = {
  .size = sizeof (KsTrainTask),
  .name = "the gpt on a text",
  .metric = "loss",
  .unit = "tokens",
  .build = text_build,
  .batch = text_batch,
  .evaluate = text_evaluate,
  .describe = gpt_describe,
  .clear = text_clear,
  .metadata = text_metadata,
  .settings = text_settings,
  .check = text_check,
  .torch_name = ks_gpt_torch_name,
  .honours_eval_rows = TRUE,
};

/* [model] type = layers on a text: the text task with the [layer.NAME] groups (the GPT
 * written as such trains as [model] type = gpt does) */
static const char *const text_layers_settings[] = { "model.type", "model.net", "model.context",
                                                    "model.seed", "data.task", "data.path",
                                                    NULL };

static const KsTrainTask text_layers_task = {
  .size = sizeof (KsTrainTask),
  .name = "a layer list on a text",
  .metric = "loss",
  .unit = "tokens",
  .build = text_build,
  .batch = text_batch,
  .evaluate = text_evaluate,
  .describe = gpt_describe,
  .clear = text_clear,
  .metadata = text_layers_metadata,
  .settings = text_layers_settings,
  .check = text_check,
  .honours_eval_rows = TRUE,
};

/* ---- gpt on addition: lines "a+b=c" ---- */

/* The vocabulary, sorted by byte as a text corpus's is, so `ksdist generate` reads it. */
static const char addition_vocab[] = "\n+0123456789=";
enum { ADD_EVAL_ROUNDS = 8 };

typedef struct {
  GptFeeds g;
  gint64 digits, limit; /* operands in [0, limit = 10^digits) */
  char *line;
  KsExpr *logits;
} Addition;

static gint64
add_token (char ch)
{
  return strchr (addition_vocab, ch) - addition_vocab;
}

/* About a tenth of the problems, chosen by a hash of (a, b), are never trained on: the
 * exact-match score is on those. */
static gboolean
add_held_out (gint64 a, gint64 b)
{
  guint64 h = (guint64) a * 0x9e3779b97f4a7c15u ^ ((guint64) b + 0x632be59bd9b4e019u);
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9u;
  h ^= h >> 32;
  return h % 10 == 0;
}

static void
add_draw (Addition *x, GRand *rng, gboolean held_out, gint64 *a, gint64 *b)
{
  do
    {
      *a = g_rand_int_range (rng, 0, (gint32) x->limit);
      *b = g_rand_int_range (rng, 0, (gint32) x->limit);
    }
  while (add_held_out (*a, *b) != held_out);
}

static gboolean
addition_check (const KsConfig *c, const KsTrainWorld *world, GError **error)
{
  if (ks_config_get_int (c, "train", "eval_rows") > 0)
    return ks_tasks_config_error (error, "[train] eval_rows: the addition task scores a fixed "
                                  "number of generated problems; remove the setting");
  if (ks_trainer_pipelined_config (c))
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[pipeline]: the addition task scores by decoding the logits greedily in "
                   "one process, which a pipeline does not have; train [data] task = text "
                   "pipelined, or addition without [pipeline]");
      return FALSE;
    }
  return text_check (c, world, error);
}

static gboolean
addition_build (KsTrainer *t, GError **error)
{
  const KsConfig *c = ks_trainer_config (t);
  Addition *x = g_new0 (Addition, 1);
  ks_trainer_set_data (t, x);

  x->digits = ks_config_get_int (c, "data", "digits");
  x->limit = 1;
  for (gint64 i = 0; i < x->digits; i++)
    x->limit *= 10;
  x->g.context = ks_config_get_int (c, "model", "context");
  if ((gint64) x->g.context < 3 * x->digits + 4)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[model] context = %" G_GSIZE_FORMAT " cannot hold a problem of [data] digits "
                   "= %" G_GINT64_FORMAT " (it needs %" G_GINT64_FORMAT ", e.g. \"a+b=c\" and a "
                   "newline): raise the context or lower the digits",
                   x->g.context, x->digits, 3 * x->digits + 4);
      return FALSE;
    }
  if (!gpt_build (t, &x->g, strlen (addition_vocab), "the additions", error))
    return FALSE;
  x->logits = ks_trainer_logits (t);
  gpt_feeds_init (t, &x->g);
  x->line = g_new (char, x->g.context + 32);
  x->g.description = g_strdup_printf ("a GPT (%" G_GINT64_FORMAT " layers, width %" G_GINT64_FORMAT
                                    ") on additions of up to %" G_GINT64_FORMAT "-digit numbers",
                                    x->g.shape.layers, x->g.shape.width, x->digits);
  return TRUE;
}

/* Each row: training problems, one per line from the row's start, cut at context + 1. */
static void
addition_batch (KsTrainer *t, gint64 step)
{
  Addition *x = ks_trainer_data (t);
  g_autoptr (GRand) rng = step_rng (ks_trainer_config (t), step);
  g_autofree char *row = g_new (char, x->g.context + 1 + 3 * x->digits + 8);

  gsize first = ks_trainer_rank (t) * ks_trainer_batch (t);
  for (gsize g = 0; g < first + ks_trainer_batch (t); g++) /* the global batch's rows up to ours */
    {
      gsize len = 0, b = g - first;
      while (len < x->g.context + 1)
        {
          gint64 a, c;
          add_draw (x, rng, FALSE, &a, &c);
          len += sprintf (row + len, "%" G_GINT64_FORMAT "+%" G_GINT64_FORMAT "=%" G_GINT64_FORMAT
                          "\n", a, c, a + c);
        }
      for (gsize j = 0; g >= first && j < x->g.context; j++)
        {
          x->g.tokens[b * x->g.context + j] = add_token (row[j]);
          x->g.targets[b * x->g.context + j] = add_token (row[j + 1]);
        }
    }
}

/* Exact match on held-out problems: each row is prompted with "a+b=" and completed
 * greedily, one token per run, until a newline; right only if the answer is exactly
 * a + b. Positions after the prompt start at 0 and, being later, cannot matter. */
static gboolean
addition_evaluate (KsTrainer *t, gboolean final, double *value, gsize *samples, GError **error)
{
  Addition *x = ks_trainer_data (t);
  const gsize V = strlen (addition_vocab), T = x->g.context;
  g_autoptr (GRand) rng = g_rand_new_with_seed ((guint32) ks_config_get_int (ks_trainer_config (t), "data",
                                                                             "seed"));
  g_autofree char **want = g_new0 (char *, ks_trainer_batch (t) + 1);
  g_autofree gsize *prompt = g_new (gsize, ks_trainer_batch (t)), *len = g_new (gsize, ks_trainer_batch (t));
  g_autofree float *out = g_new (float, ks_trainer_batch (t) * T * V);
  gsize right = 0;

  for (gsize r = 0; r < ADD_EVAL_ROUNDS; r++)
    {
      memset (x->g.tokens, 0, ks_trainer_batch (t) * T * sizeof (gint64));
      for (gsize i = 0; i < ks_trainer_batch (t); i++)
        {
          gint64 a, b;
          add_draw (x, rng, TRUE, &a, &b);
          len[i] = prompt[i] = sprintf (x->line, "%" G_GINT64_FORMAT "+%" G_GINT64_FORMAT "=", a, b);
          for (gsize j = 0; j < prompt[i]; j++)
            x->g.tokens[i * T + j] = add_token (x->line[j]);
          want[i] = g_strdup_printf ("%" G_GINT64_FORMAT "\n", a + b);
        }
      for (gint64 k = 0; k < x->digits + 2; k++) /* the longest answer and its newline */
        {
          gsize n_feeds;
          const KsFeed *feeds = ks_trainer_feeds (t, &n_feeds);
          if (!ks_model_run (ks_trainer_model (t), feeds, 2, &x->logits, 1, error)
              || !ks_tensor_to_host (ks_expr_value (x->logits, error), out,
                                     ks_trainer_batch (t) * T * V * sizeof (float), error))
            return FALSE;
          for (gsize i = 0; i < ks_trainer_batch (t); i++)
            {
              if (len[i] >= T || (len[i] > prompt[i] && x->g.tokens[i * T + len[i] - 1] == 0))
                continue; /* full, or ended by its newline (token 0) */
              const float *l = out + (i * T + len[i] - 1) * V;
              gsize best = 0;
              for (gsize j = 1; j < V; j++)
                if (l[j] > l[best])
                  best = j;
              x->g.tokens[i * T + len[i]++] = best;
            }
        }
      for (gsize i = 0; i < ks_trainer_batch (t); i++)
        {
          gboolean ok = len[i] - prompt[i] == strlen (want[i]);
          for (gsize j = 0; ok && want[i][j] != '\0'; j++)
            ok = addition_vocab[x->g.tokens[i * T + prompt[i] + j]] == want[i][j];
          right += ok;
          g_clear_pointer (&want[i], g_free);
        }
    }
  *value = (double) right / (ADD_EVAL_ROUNDS * ks_trainer_batch (t));
  if (samples != NULL)
    *samples = ADD_EVAL_ROUNDS * ks_trainer_batch (t);
  return TRUE;
}

static void
addition_clear (KsTrainer *t)
{
  Addition *x = ks_trainer_data (t);
  gpt_feeds_clear (&x->g);
  g_free (x->line);
  g_free (x);
}

static void
addition_metadata (KsTrainer *t, GHashTable *meta)
{
  gpt_metadata (t, meta, (const guint8 *) addition_vocab, strlen (addition_vocab));
}

static const char *const addition_settings[] = { GPT_SETTINGS, "data.digits", "data.seed",
                                                NULL };

static const KsTrainTask addition_task = {
  .size = sizeof (KsTrainTask),
  .name = "the gpt on additions",
  .metric = "exact_match",
  .unit = "problems",
  .build = addition_build,
  .batch = addition_batch,
  .evaluate = addition_evaluate,
  .describe = gpt_describe,
  .clear = addition_clear,
  .metadata = addition_metadata,
  .settings = addition_settings,
  .check = addition_check,
  .torch_name = ks_gpt_torch_name,
};

void
ks_tasks_add_schema (KsConfig *config)
{
  static const KsKeyDesc *const tables[] = { ks_tasks_model_keys, ks_tasks_data_keys,
                                             ks_tasks_meta_keys, ks_tasks_layer_keys };
  for (guint t = 0; t < G_N_ELEMENTS (tables); t++)
    for (const KsKeyDesc *k = tables[t]; k->key != NULL; k++)
      if (!ks_config_lookup (config, k->group, k->key, NULL, NULL, NULL))
        ks_config_add_schema (config, k->group, k, 1);
}

const KsTrainTask *
ks_builtin_task (const KsConfig *c, GError **error)
{
  const char *task = ks_config_get_string (c, "data", "task");
  const char *model = ks_config_get_string (c, "model", "type");
  gboolean gpt = strcmp (model, "gpt") == 0, ctr = strcmp (model, "ctr") == 0;
  gboolean text = strcmp (task, "text") == 0, addition = strcmp (task, "addition") == 0;
  gboolean layers = strcmp (model, "layers") == 0;

  if ((gpt && !text && !addition) || (text && !gpt && !layers) || (addition && !gpt)
      || ctr != (strcmp (task, "ctr") == 0))
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[model] type = %s does not train on [data] task = %s: mlp and layers take "
                   "spirals, rings, csv, npy, idx or image_folder (layers tokens and text too), "
                   "gpt takes text or addition, ctr takes ctr", model, task);
      return NULL;
    }
  if (strcmp (ks_config_get_string (c, "meta", "algorithm"), "reptile") == 0)
    return &ks_meta_task;
  if (ctr)
    return &ks_ctr_task;
  if (addition || text)
    return addition ? &addition_task : gpt ? &text_task : &text_layers_task;
  if (strcmp (task, "tokens") == 0)
    return &ks_tokens_task;
  if (layers && strcmp (ks_config_get_string (c, "model", "loss"), "logistic") == 0)
    return &ks_samples_logistic_task;
  return layers && strcmp (ks_config_get_string (c, "model", "loss"), "mse") == 0
             ? &ks_samples_regression_task
             : &ks_samples_task;
}
