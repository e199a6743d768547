/* A language model of the config ([model] type = layers: an embedding first, then
 * positions, transformer blocks, a norm and a head, tied or not) on token files, llm.c's
 * and nanoGPT's layout (table.h): each row a window of [model] context tokens, drawn from
 * the training tokens by the seed and the step alone (so resumed and data-parallel runs
 * see what one unbroken run would), predicting each next token; held out: [data]
 * test_path's tokens, or the last [data] holdout of the file. */
#include "net.h"

#include <ksdist/table.h>
#include <string.h>

/* Ids above this as uint32 are no tokenizer's (the largest have a few hundred thousand). */
#define KS_TOKENS_VOCAB_WARN (1 << 24)

typedef struct {
  KsTokens *train, *test;
  const guint8 *tokens, *held; /* the training tokens and the held-out ones, width bytes each */
  guint width;
  gsize n, n_held;
  gsize context;
  gint64 *x, *positions, *y;
  Net net;
  char *description;
  guint32 vocab;  /* the tokens seen at the start are below it, the model's rows */
  /* a token at or past vocab in a window read since (the file was rewritten while mapped) */
  const char *bad_path;
  gsize bad_at;
  guint32 bad_token;
} Tokens;

static const char *const tokens_settings[] = {
  "model.type", "model.net", "model.context", "model.seed", "model.init_from", "data.task",
  "data.path", "data.test_path", "data.holdout", "data.dtype", NULL,
};

static gboolean
tokens_check (const KsConfig *c, const KsTrainWorld *world, GError **error)
{
  (void) world;
  if (strcmp (ks_config_get_string (c, "model", "type"), "layers") != 0)
    return ks_tasks_config_error (error, "[data] task = tokens trains a layer list: set [model] "
                                  "type = layers and describe it in [model] net");
  if (strcmp (ks_config_get_string (c, "model", "loss"), "cross_entropy") != 0)
    return ks_tasks_config_error (error, "[data] task = tokens predicts the next token: [model] "
                                  "loss = cross_entropy");
  if (!ks_config_is_set (c, "data", "path") || *ks_config_get_string (c, "data", "path") == '\0')
    return ks_tasks_config_error (error, "[data] task = tokens reads [data] path: set it to a "
                                  "token file (llm.c's .bin shard or nanoGPT's train.bin)");
  if (ks_config_is_set (c, "data", "holdout") && *ks_config_get_string (c, "data", "test_path"))
    return ks_tasks_config_error (error, "[data] holdout is set, but [data] test_path gives "
                                  "the held-out tokens: remove one of them");
  return net_check_config (c, error);
}

/* A file that looks read with the wrong [data] dtype: wider values (uint32, int64,
 * float32 of small ids) read as uint16 leave their zero halves as token 0, and a file of
 * uint16 read as uint32 makes ids far above what a tokenizer has. */
static void
warn_dtype (const KsTokens *t)
{
  if (t->width == 2 && t->n >= 64 && t->zeros * 5 >= t->n * 2)
    g_warning ("%s: %.0f%% of its %" G_GSIZE_FORMAT " uint16 tokens are 0, as when wider values "
               "(uint32, int64, float32) are read as uint16: if the file holds uint32 tokens, "
               "set [data] dtype = uint32; convert other types to uint16 or uint32", t->path,
               100.0 * t->zeros / t->n, t->n);
  if (t->width == 4 && t->vocab_hint > KS_TOKENS_VOCAB_WARN)
    g_warning ("%s: token %" G_GUINT32_FORMAT " as uint32, a vocabulary far above any "
               "tokenizer's (%d): is the file uint16 ([data] dtype = uint16)?", t->path,
               t->vocab_hint - 1, KS_TOKENS_VOCAB_WARN);
}

/* The training and held-out tokens, each long enough for a window. */
static gboolean
load (Tokens *k, const KsConfig *c, GError **error)
{
  const char *test = ks_config_get_string (c, "data", "test_path");
  k->width = strcmp (ks_config_get_string (c, "data", "dtype"), "uint32") == 0 ? 4 : 2;
  if ((k->train = ks_tokens_load_as (ks_config_get_string (c, "data", "path"), k->width,
                                     error)) == NULL
      || (*test != '\0' && (k->test = ks_tokens_load_as (test, k->width, error)) == NULL))
    return FALSE;
  warn_dtype (k->train);
  if (k->test != NULL)
    warn_dtype (k->test);
  k->tokens = k->train->data;
  k->n = k->train->n;
  if (k->test != NULL)
    {
      k->held = k->test->data;
      k->n_held = k->test->n;
    }
  else
    {
      k->n_held = (gsize) (k->n * ks_config_get_double (c, "data", "holdout"));
      k->n -= k->n_held;
      k->held = k->tokens + k->n * k->width;
    }
  if (k->n < k->context + 2 || k->n_held < k->context + 2)
    return ks_tasks_config_error (error, "%s: %" G_GSIZE_FORMAT " training and %" G_GSIZE_FORMAT
                                  " held-out tokens; each part needs more than [model] "
                                  "context + 1 = %" G_GSIZE_FORMAT, k->train->path, k->n,
                                  k->n_held, k->context + 1);
  return TRUE;
}

static gboolean
tokens_build (KsTrainer *t, GError **error)
{
  const KsConfig *c = ks_trainer_config (t);
  Tokens *k = g_new0 (Tokens, 1);
  gint64 vocab;
  ks_trainer_set_data (t, k);

  k->context = ks_config_get_int (c, "model", "context");
  if (!load (k, c, error))
    return FALSE;
  vocab = MAX (k->train->vocab_hint, k->test != NULL ? k->test->vocab_hint : 0);
  k->vocab = (guint32) MIN (vocab, (gint64) G_MAXUINT32);
  if (!net_on_tokens (&k->net, c, vocab, k->context, k->train->path, error))
    return FALSE;
  net_describe (&k->net, ks_trainer_rows (t), 0, NULL);
  KsExpr *metric;
  const KsLayerDesc no_metric = { 0 };
  if (!ks_trainer_build_layers (t, k->net.desc, k->net.n, &k->net.loss_desc, &no_metric,
                                &metric, error))
    return FALSE;
  static const char *const with_positions[] = { "x", "positions", NULL };
  static const char *const ids_only[] = { "x", NULL };
  ks_trainer_set_inputs (t, net_has_positions (&k->net) ? with_positions : ids_only);
  ks_trainer_set_tokens_per_row (t, k->context);
  k->description = g_strdup_printf ("a language model (%" G_GSIZE_FORMAT " layers, vocabulary %"
                                    G_GINT64_FORMAT ") on %s (%" G_GSIZE_FORMAT " tokens)",
                                    k->net.n, k->net.outputs, k->train->path, k->n);

  gsize n = ks_trainer_batch (t) * k->context;
  k->x = g_new (gint64, n);
  k->y = g_new (gint64, n);
  k->positions = g_new (gint64, n);
  for (gsize i = 0; i < n; i++)
    k->positions[i] = i % k->context;
  const KsFeed feeds[] = { { "x", k->x, n * sizeof (gint64) },
                           { "y", k->y, n * sizeof (gint64) },
                           { "positions", k->positions, n * sizeof (gint64) } };
  ks_trainer_set_feeds (t, feeds, net_has_positions (&k->net) ? 3 : 2);
  return TRUE;
}

/* Row `row`: the window at `start`, and each token's next. */
static guint32
token_at (const Tokens *k, const guint8 *tokens, gsize i)
{
  return k->width == 4 ? ((const guint32 *) tokens)[i] : ((const guint16 *) tokens)[i];
}

/* A token at or past the vocabulary seen when the job started: the mapped file was
 * rewritten since; the first one is kept, for the error that names the file. */
static void
note_bad (Tokens *k, const guint8 *tokens, gsize i, guint32 v)
{
  if (k->bad_path != NULL)
    return;
  gboolean held = tokens == k->held && k->test != NULL;
  k->bad_path = held ? k->test->path : k->train->path;
  k->bad_at = i + (gsize) (tokens - (const guint8 *) (held ? k->test : k->train)->data) / k->width;
  k->bad_token = v;
}

static void
fill_window (Tokens *k, const guint8 *tokens, gsize row, gsize start)
{
  for (gsize j = 0; j <= k->context; j++)
    {
      guint32 v = token_at (k, tokens, start + j);
      if (v >= k->vocab)
        note_bad (k, tokens, start + j, v);
      if (j < k->context)
        k->x[row * k->context + j] = v;
      if (j > 0)
        k->y[row * k->context + j - 1] = v;
    }
}

/* The error for a token past the vocabulary (FALSE), or TRUE when none was read. */
static gboolean
no_bad_token (Tokens *k, GError **error)
{
  if (k->bad_path == NULL)
    return TRUE;
  g_clear_error (error);
  g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
               "%s: token %" G_GUINT32_FORMAT " at position %" G_GSIZE_FORMAT " is outside "
               "the vocabulary of %" G_GUINT32_FORMAT " it had when the job started: the file "
               "was rewritten while this job read it (token files are memory-mapped: they "
               "must not be changed while a job trains on them); restore it, then resume "
               "from the newest checkpoint",
               k->bad_path, k->bad_token, k->bad_at, k->vocab);
  return FALSE;
}

static gboolean
tokens_prepare (KsTrainer *t, gint64 step, GError **error)
{
  (void) step;
  return no_bad_token (ks_trainer_data (t), error);
}

static void
tokens_batch (KsTrainer *t, gint64 step)
{
  Tokens *k = ks_trainer_data (t);
  guint64 seed = ks_config_get_int (ks_trainer_config (t), "train", "seed");
  g_autoptr (GRand) rng = g_rand_new_with_seed ((guint32) (seed * 1000003u + (guint64) step));
  gsize first = ks_trainer_rank (t) * ks_trainer_batch (t);
  for (gsize g = 0; g < first + ks_trainer_batch (t); g++) /* the global batch up to ours */
    {
      /* two draws: a 64-bit start, for files of more than 2^31 tokens */
      guint64 r = ((guint64) g_rand_int (rng) << 32) | g_rand_int (rng);
      gsize start = r % (k->n - k->context - 1);
      if (g >= first)
        fill_window (k, k->tokens, g - first, start);
    }
}

static void
fill_held (gpointer data, gsize row, gsize window)
{
  Tokens *k = data;
  fill_window (k, k->held, row, window * k->context);
}

/* Mean loss over the held-out tokens, each predicted once: every whole window of
 * context tokens (the last fewer than context are not a window). */
static gboolean
tokens_evaluate (KsTrainer *t, gboolean final, double *value, gsize *samples, GError **error)
{
  Tokens *k = ks_trainer_data (t);
  gsize windows = (k->n_held - 1) / k->context;
  (void) final;
  gboolean ok = net_eval_windows (t, windows, k->context, fill_held, k, value, samples, error);
  /* a rewritten file's token past the vocabulary: that, not the embedding's complaint */
  return no_bad_token (k, error) && ok;
}

static const char *
tokens_describe (KsTrainer *t)
{
  Tokens *k = ks_trainer_data (t);
  return k->description != NULL ? k->description : "a language model on tokens";
}

static void
tokens_clear (KsTrainer *t)
{
  Tokens *k = ks_trainer_data (t);
  g_clear_pointer (&k->train, ks_tokens_free);
  g_clear_pointer (&k->test, ks_tokens_free);
  net_clear (&k->net);
  g_free (k->x);
  g_free (k->y);
  g_free (k->positions);
  g_free (k->description);
  g_free (k);
}

const KsTrainTask ks_tokens_task = {
  .size = sizeof (KsTrainTask),
  .name = "a language model on tokens",
  .metric = "loss",
  .unit = "tokens",
  .build = tokens_build,
  .batch = tokens_batch,
  .prepare = tokens_prepare,
  .evaluate = tokens_evaluate,
  .describe = tokens_describe,
  .clear = tokens_clear,
  .settings = tokens_settings,
  .check = tokens_check,
  .honours_eval_rows = TRUE,
};
