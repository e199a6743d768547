/* ksdist generate: text from a GPT checkpoint or export of `ksdist train`, or the export
 * of a layer-list language model trained on a text. Its metadata gives the model's shape
 * and vocabulary, so no config is needed; a batch-1 GPT (built, or the export's graph
 * built for one sequence) extends the prompt one character at a time. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  KsGptShape shape;
  guint8 vocab[256];
  gsize vocab_size;
  gboolean export; /* an inference model, not a checkpoint */
  gboolean layers; /* a layer list's export ([model] type = layers on a text) */
} GptInfo;

/* The GPT setting `key` ("model.context") from the metadata of the checkpoint `path`,
 * checked against the range the config gives the same setting. */
static gboolean
meta_int (const char *path, GHashTable *meta, const char *key, gint64 *out, GError **error)
{
  g_autoptr (KsConfig) schema = ks_config_new ();
  ks_tasks_add_schema (schema);
  g_autoptr (GPtrArray) keys = ks_config_group_keys (schema, "model");
  const char *text = g_hash_table_lookup (meta, key);
  g_autofree char *expected = NULL;

  for (guint i = 0; keys != NULL && i < keys->len; i++)
    {
      const KsKeyDesc *d = g_ptr_array_index (keys, i);
      if (strcmp (d->key, key + strlen ("model.")) != 0)
        continue;
      if (text != NULL && ks_config_check_value (d, text, &expected))
        return *out = g_ascii_strtoll (text, NULL, 10), TRUE;
      break;
    }
  g_autofree char *shown = text != NULL ? g_strescape (text, NULL) : NULL;
  g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_FORMAT,
               "%s: metadata '%s' is %s%.64s%s, not %s as [model] %s takes: it was not saved "
               "by `ksdist train` for a gpt", path, key, shown ? "'" : "missing",
               shown ? shown : "", shown ? "'" : "", expected ? expected : "an integer",
               key + strlen ("model."));
  return FALSE;
}

static gboolean
read_info (const char *path, GptInfo *info, GError **error)
{
  g_autoptr (GHashTable) meta = ks_checkpoint_metadata (path, error);
  const char *hex;

  if (meta == NULL)
    return FALSE;
  info->export = g_hash_table_contains (meta, KS_INFERENCE_GRAPH_KEY);
  info->layers = g_strcmp0 (g_hash_table_lookup (meta, "model.type"), "layers") == 0
                 && g_hash_table_contains (meta, "vocab_hex");
  if (info->layers && !info->export)
    {
      g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_FORMAT,
                   "%s is a checkpoint of a layer list ([model] type = layers): `ksdist "
                   "generate` runs a layer list's export, which holds its graph: train with "
                   "[train] export_dir set (or resume this run with it and one more step: "
                   "--set train.resume=true) and give that folder", path);
      return FALSE;
    }
  if ((g_strcmp0 (g_hash_table_lookup (meta, "model.type"), "gpt") != 0 && !info->layers)
      || (hex = g_hash_table_lookup (meta, "vocab_hex")) == NULL || strlen (hex) % 2 != 0
      || strlen (hex) / 2 > 256 || strlen (hex) == 0)
    {
      /* the model's type from its metadata, or from the settings a checkpoint keeps */
      const char *type = g_hash_table_lookup (meta, "model.type");
      const char *config = g_hash_table_lookup (meta, "config");
      const char *line = config != NULL ? strstr (config, "model.type = ") : NULL;
      g_autofree char *from_config = line != NULL
          ? g_strndup (line + 13, MIN (strcspn (line + 13, "\n"), 64)) : NULL;
      type = type != NULL ? type : from_config;
      g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_FORMAT,
                   "%s is %s%.64s%s: `ksdist generate` runs a checkpoint or export of "
                   "[model] type = gpt trained on [data] task = text (as "
                   "examples/gpt-words.ini), or the export of a layer list trained on "
                   "[data] task = text", path,
                   type != NULL ? "a model of [model] type = " : "not a gpt's from `ksdist train`",
                   type != NULL ? type : "",
                   type == NULL ? ""
                   : strcmp (type, "gpt") == 0 ? " without its vocabulary"
                   : strcmp (type, "layers") == 0
                       ? " without a vocabulary (one trained on [data] task = tokens has "
                         "token ids, no text to print)"
                       : "");
      return FALSE;
    }
  /* a digit that is not hex would shift -1 into a byte */
  for (const char *c = hex; *c != '\0'; c++)
    if (!g_ascii_isxdigit (*c))
      {
        g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_FORMAT,
                     "%s: metadata 'vocab_hex' has byte 0x%02x at offset %d, not a hex "
                     "digit: it was not saved by `ksdist train`", path, (guchar) *c,
                     (int) (c - hex));
        return FALSE;
      }
  info->vocab_size = strlen (hex) / 2;
  for (gsize i = 0; i < info->vocab_size; i++)
    info->vocab[i] = (g_ascii_xdigit_value (hex[2 * i]) << 4) | g_ascii_xdigit_value (hex[2 * i + 1]);
  info->shape.vocab = info->vocab_size;
  info->shape.batch = 1;
  info->shape.seed = 1; /* the initialisers' values are replaced by the checkpoint's */
  info->shape.skip = g_strcmp0 (g_hash_table_lookup (meta, "model.skip"), "true") == 0;
  if (info->layers) /* the export's graph has the rest */
    return meta_int (path, meta, "model.context", &info->shape.context, error);
  return meta_int (path, meta, "model.context", &info->shape.context, error)
         && meta_int (path, meta, "model.layers", &info->shape.layers, error)
         && meta_int (path, meta, "model.heads", &info->shape.heads, error)
         && meta_int (path, meta, "model.width", &info->shape.width, error);
}

/* The token of each prompt byte; an error names a byte the model never saw. */
static gboolean
encode (const GptInfo *info, const char *prompt, GArray *tokens, GError **error)
{
  for (const guint8 *p = (const guint8 *) prompt; *p != '\0'; p++)
    {
      gint64 token = -1;
      for (gsize i = 0; i < info->vocab_size && token < 0; i++)
        if (info->vocab[i] == *p)
          token = i;
      if (token < 0)
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "the prompt's character '%c' (byte 0x%02x) is not in the model's "
                       "vocabulary of %" G_GSIZE_FORMAT " characters",
                       g_ascii_isprint (*p) ? *p : '?', *p, info->vocab_size);
          return FALSE;
        }
      g_array_append_val (tokens, token);
    }
  return TRUE;
}

/* The GPT of a checkpoint (built from its metadata, then loaded), or of an export ([train]
 * export_dir: its graph, built for one sequence); its logits in *logits. */
static KsModel *
load_gpt (KsCompute *compute, const char *path, const GptInfo *info, KsExpr **logits,
          GError **error)
{
  static const char *const gpt_feeds[] = { "tokens", "positions", NULL };
  static const char *const tokens_only[] = { "tokens", NULL }; /* a layer list's */
  g_auto (GStrv) feeds = NULL, targets = NULL;
  g_autoptr (KsModel) model = NULL;
  KsExpr *loss;

  if (!info->export)
    {
      model = ks_model_new (compute);
      if (!ks_gpt_build (model, &info->shape, logits, &loss, error) || !ks_model_init (model, error)
          || !ks_checkpoint_load (path, model, NULL, NULL, NULL, error))
        return NULL;
      return g_steal_pointer (&model);
    }
  if ((model = ks_load_inference_model_with_batch (path, compute, 1, &feeds, &targets, error))
      == NULL)
    return NULL;
  if ((!g_strv_equal ((const char *const *) feeds, gpt_feeds)
       && !(info->layers && g_strv_equal ((const char *const *) feeds, tokens_only)))
      || g_strv_length (targets) != 1
      || ks_expr_numel (*logits = ks_model_find (model, targets[0]))
             != (gsize) (info->shape.context * info->shape.vocab))
    {
      g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_FORMAT,
                   "%s: its graph is not a language model's (feeds tokens and positions, or "
                   "tokens alone, one target of context x vocabulary logits)", path);
      return NULL;
    }
  return g_steal_pointer (&model);
}

/* The next token from the logits of the last position: the most likely one at
 * temperature 0, else a draw from softmax (logits / temperature). */
static gint64
pick (const float *logits, gsize vocab, double temperature, GRand *rng)
{
  gsize best = 0;
  for (gsize j = 1; j < vocab; j++)
    if (logits[j] > logits[best])
      best = j;
  if (temperature <= 0)
    return best;
  double sum = 0, r;
  for (gsize j = 0; j < vocab; j++)
    sum += exp ((logits[j] - logits[best]) / temperature);
  r = g_rand_double (rng) * sum;
  for (gsize j = 0; j < vocab; j++)
    if ((r -= exp ((logits[j] - logits[best]) / temperature)) <= 0)
      return j;
  return best;
}

static int
generate (KsRegistry *registry, const KsConfig *config, const char *path, const char *prompt,
          gint64 n_new, double temperature, gint64 seed)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) tokens = g_array_new (FALSE, FALSE, sizeof (gint64));
  g_autoptr (GRand) rng = g_rand_new_with_seed ((guint32) seed);
  GptInfo info = { 0 };
  KsExpr *logits = NULL;
  gsize n_feeds = 2;

  if (!read_info (path, &info, &error) || !encode (&info, prompt, tokens, &error))
    return ks_cli_checkpoint_fail (error);
  gsize T = info.shape.context, V = info.vocab_size;
  g_autoptr (KsCompute) compute = ks_compute_new (registry, config, NULL, &error);
  g_autoptr (KsModel) model = compute != NULL ? load_gpt (compute, path, &info, &logits, &error)
                                              : NULL;
  if (model == NULL)
    return ks_cli_checkpoint_fail (error);
  if (info.export && ks_model_find (model, "positions") == NULL)
    n_feeds = 1; /* a layer list without a position layer: tokens alone */
  g_autofree gint64 *window = g_new0 (gint64, T);
  g_autofree gint64 *positions = g_new (gint64, T);
  g_autofree float *out = g_new (float, T * V);
  for (gsize i = 0; i < T; i++)
    positions[i] = i;
  fputs (prompt, stdout);
  for (gint64 k = 0; k < n_new; k++)
    {
      /* the last T tokens; later positions stay 0 and, being later, cannot matter */
      gsize len = MIN (tokens->len, T), from = tokens->len - len;
      memcpy (window, &g_array_index (tokens, gint64, from), len * sizeof (gint64));
      KsFeed feeds[] = { { "tokens", window, T * sizeof (gint64) },
                         { "positions", positions, T * sizeof (gint64) } };
      if (!ks_model_run (model, feeds, n_feeds, &logits, 1, &error)
          || !ks_tensor_to_host (ks_expr_value (logits, &error), out, T * V * sizeof (float),
                                 &error))
        {
          ks_cli_error ("%s", error->message);
          return KS_EXIT_RUNTIME;
        }
      gint64 next = pick (out + (len - 1) * V, V, temperature, rng);
      g_array_append_val (tokens, next);
      putchar (info.vocab[next]);
    }
  putchar ('\n');
  return KS_EXIT_OK;
}

static int
run_generate (int argc, char **argv)
{
  g_auto (GStrv) sets = NULL;
  g_autofree char *prompt = NULL;
  gint n_new = 100, seed = 1;
  double temperature = 0;
  GOptionEntry entries[] = {
    { "prompt", 'p', 0, G_OPTION_ARG_STRING, &prompt, "Text to continue", "TEXT" },
    { "tokens", 'n', 0, G_OPTION_ARG_INT, &n_new, "Characters to generate (default 100)", "N" },
    { "temperature", 't', 0, G_OPTION_ARG_DOUBLE, &temperature,
      "0 (default) picks the most likely character; above 0 samples", "T" },
    { "seed", 0, 0, G_OPTION_ARG_INT, &seed, "Seed of the sampling", "S" },
    KS_CLI_SET_OPTION (sets),
    { NULL },
  };
  g_autoptr (KsConfig) config = NULL;
  g_autoptr (KsRegistry) registry = NULL;
  g_autofree char *path = NULL;
  int status;

  if (!ks_cli_parse ("generate", "CHECKPOINT", ks_cmd_generate.summary, entries, &argc, &argv))
    return KS_EXIT_USAGE;
  if (argc != 2 || prompt == NULL || *prompt == '\0' || n_new < 0 || temperature < 0)
    {
      ks_cli_error ("generate: give one CHECKPOINT (a checkpoint-N directory, the "
                    "checkpoint_dir holding them, or an export_dir), a non-empty --prompt, "
                    "tokens >= 0 and temperature >= 0 (see ksdist help generate)");
      return KS_EXIT_USAGE;
    }
  path = ks_cli_checkpoint_path (argv[1]);
  if ((status = ks_cli_load (NULL, sets, &config, &registry)) != KS_EXIT_OK)
    return status;
  return generate (registry, config, path, prompt, n_new, temperature, seed);
}

const KsCommand ks_cmd_generate = {
  "generate",
  "Continue a prompt with a GPT checkpoint or export, or a text layer list's export",
  run_generate,
};
