/* [model] net = a, b, c and one [layer.NAME] group per name: the layers of a network in
 * the config. Each key a layer's type does not use is refused (never silently ignored),
 * as is a group the net does not list. */
#include "net.h"

#include <string.h>

/* [layer.NAME]: one group per layer of a [model] type = layers network, read here only */
const KsKeyDesc ks_tasks_layer_keys[] = {
  { "layer.*", "type", KS_VALUE_CHOICE, "linear", 1, 0,
    "linear|conv2d|max_pool|avg_pool|batch_norm|layer_norm|dropout|flatten|activation|"
    "embedding|"
    "position|transformer",
    "Layer: what it computes (required). Images are [rows, height, width, channels]; "
    "embedding, position and transformer work on [data] task = tokens or text" },
  { "layer.*", "size", KS_VALUE_INT, "1", 1, 1 << 24, NULL,
    "Layer: linear's outputs; embedding's width" },
  { "layer.*", "vocab", KS_VALUE_INT, "1", 1, 1 << 24, NULL,
    "Layer: embedding's token ids (default: the data's largest + 1)" },
  { "layer.*", "heads", KS_VALUE_INT, "1", 1, 1024, NULL,
    "Layer: transformer's attention heads (they divide the width)" },
  { "layer.*", "tie", KS_VALUE_STRING, "", 1, 0, NULL,
    "Layer: linear: the name of an earlier embedding whose table it uses, transposed, as "
    "its weights (a language model's head tied to its input, as GPT-2's)" },
  { "layer.*", "filters", KS_VALUE_INT, "1", 1, 1 << 20, NULL, "Layer: conv2d's output channels" },
  { "layer.*", "kernel", KS_VALUE_INT, "3", 1, 64, NULL,
    "Layer: conv2d's, max_pool's and avg_pool's window, kernel x kernel" },
  { "layer.*", "stride", KS_VALUE_INT, "1", 1, 64, NULL,
    "Layer: conv2d's step (default 1), max_pool's and avg_pool's (default the kernel)" },
  { "layer.*", "padding", KS_VALUE_INT, "0", 0, 64, NULL,
    "Layer: conv2d's and avg_pool's zeros on each side (avg_pool: at most half the kernel; "
    "the zeros count in each window's mean, as PyTorch's AvgPool2d)" },
  { "layer.*", "activation", KS_VALUE_CHOICE, "none", 1, 0, "none|relu|tanh|sigmoid|gelu",
    "Layer: applied to the output of linear, conv2d, batch_norm, layer_norm, or alone" },
  { "layer.*", "rate", KS_VALUE_DOUBLE, "0", 0, 0.95, NULL,
    "Layer: dropout's rate; on linear, dropout after the activation; on transformer, on "
    "each residual branch" },
  { "layer.*", "momentum", KS_VALUE_DOUBLE, "0.1", 0, 1, NULL,
    "Layer: batch_norm's running-statistics update weight" },
  { "layer.*", "eps", KS_VALUE_DOUBLE, "1e-5", 1e-12, 1, NULL,
    "Layer: batch_norm's and layer_norm's epsilon" },
  { "layer.*", "seed", KS_VALUE_INT, "0", 0, 1e15, NULL,
    "Layer: seed of its initialiser or dropout masks (default [model] seed + its index)" },
  { "layer.*", "add", KS_VALUE_STRING, "", 1, 0, NULL,
    "Layer: a skip connection: the output of the named earlier layer is added to this "
    "layer's output (after its activation); works across pipeline stages" },
  { "layer.*", "repeat", KS_VALUE_INT, "1", 1, 1000, NULL,
    "Layer: copies of this layer in a row (named NAME.0, NAME.1, ...)" },
  { NULL },
};

typedef struct {
  const char *name;
  NetLayerType type;
  const char *required; /* keys, space-separated */
  const char *optional;
} TypeKeys;

static const TypeKeys types[] = {
  { "linear", NET_LINEAR, "", "size tie activation rate seed" },
  { "conv2d", NET_CONV2D, "filters kernel", "stride padding activation seed" },
  { "max_pool", NET_MAX_POOL, "kernel", "stride" },
  { "avg_pool", NET_AVG_POOL, "kernel", "stride padding" },
  { "batch_norm", NET_BATCH_NORM, "", "momentum eps activation" },
  { "layer_norm", NET_LAYER_NORM, "", "eps activation" },
  { "dropout", NET_DROPOUT, "rate", "seed" },
  { "flatten", NET_FLATTEN, "", "" },
  { "activation", NET_ACTIVATION, "activation", "" },
  { "embedding", NET_EMBEDDING, "size", "vocab seed" },
  { "position", NET_POSITION, "", "seed" },
  { "transformer", NET_TRANSFORMER, "heads", "rate seed" },
};
static const char common_keys[] = "type add repeat";

static const TypeKeys *
type_keys (const char *name)
{
  for (gsize i = 0; i < G_N_ELEMENTS (types); i++)
    if (strcmp (types[i].name, name) == 0)
      return &types[i];
  g_return_val_if_reached (NULL); /* the schema's choice */
}

static int
activation (const char *name)
{
  static const char *const names[] = { "relu", "tanh", "sigmoid", "gelu" };
  static const KsUnaryOp ops[] = { KS_UNARY_RELU, KS_UNARY_TANH, KS_UNARY_SIGMOID,
                                   KS_UNARY_GELU };
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    if (strcmp (names[i], name) == 0)
      return ops[i];
  return -1; /* none */
}

/* The keys set in [layer.NAME]: all known to its type, the required ones present. */
static gboolean
check_keys (const KsConfig *c, const char *group, const TypeKeys *t, GError **error)
{
  g_autofree char *all = g_strjoin (" ", common_keys, t->required, t->optional, NULL);
  g_auto (GStrv) words = g_strsplit (all, " ", -1);
  g_autoptr (GPtrArray) used = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *reader = g_strdup_printf ("a %s layer", t->name);

  for (int i = 0; words[i] != NULL; i++)
    if (*words[i] != '\0')
      g_ptr_array_add (used, g_strdup_printf ("%s.%s", group, words[i]));
  g_ptr_array_add (used, NULL);
  if (!ks_config_check_used (c, group, (const char *const *) used->pdata, reader, error))
    return FALSE;
  g_auto (GStrv) required = g_strsplit (t->required, " ", -1);
  for (int i = 0; required[i] != NULL; i++)
    if (*required[i] != '\0' && !ks_config_is_set (c, group, required[i]))
      {
        g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                     "[%s] is a %s layer and needs %s: set it", group, t->name, required[i]);
        return FALSE;
      }
  return TRUE;
}

/* A pooling window's padding: at most half the kernel, as PyTorch's pools allow (so each
 * window keeps pixels of the image). */
static gboolean
check_window (const KsConfig *c, const char *group, const TypeKeys *t, GError **error)
{
  gint64 kernel = ks_config_get_int (c, group, "kernel");
  gint64 padding = ks_config_get_int (c, group, "padding");
  if (t->type != NET_AVG_POOL || 2 * padding <= kernel)
    return TRUE;
  g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
               "[%s] padding = %" G_GINT64_FORMAT " with kernel = %" G_GINT64_FORMAT ": an "
               "%s layer's padding is at most half its kernel; lower padding or raise kernel",
               group, padding, kernel, t->name);
  return FALSE;
}

/* The [layer.NAME] groups written, and whether each is in `names`. */
static gboolean
check_groups (const KsConfig *c, char **names, gboolean layers_model, GError **error)
{
  g_auto (GStrv) groups = ks_config_groups (c);
  for (int i = 0; groups[i] != NULL; i++)
    {
      const char *name = groups[i] + strlen ("layer.");
      if (!g_str_has_prefix (groups[i], "layer.") || strcmp (name, "*") == 0)
        continue;
      if (!layers_model)
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "[%s] is set, but [model] type = %s does not read layer groups: set "
                       "[model] type = layers and list it in [model] net, or remove it",
                       groups[i], ks_config_get_string (c, "model", "type"));
          return FALSE;
        }
      if (!g_strv_contains ((const char *const *) names, name))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "[%s] is not in [model] net: add '%s' to the list where it belongs, "
                       "or remove the group", groups[i], name);
          return FALSE;
        }
    }
  return TRUE;
}

/* Layer `l` from [layer.NAME] (copy `copy` of `repeat`), the index-th of the net. */
static void
read_layer (const KsConfig *c, const char *group, const TypeKeys *t, NetLayer *l,
            gsize index, gint64 vocab)
{
  l->type = t->type;
  l->size = ks_config_get_int (c, group, t->type == NET_CONV2D ? "filters" : "size");
  l->kernel = ks_config_get_int (c, group, "kernel");
  l->stride = ks_config_is_set (c, group, "stride") ? ks_config_get_int (c, group, "stride")
              : t->type == NET_MAX_POOL || t->type == NET_AVG_POOL ? l->kernel
                                                                   : 1;
  l->padding = ks_config_get_int (c, group, "padding");
  l->act = activation (ks_config_get_string (c, group, "activation"));
  l->rate = ks_config_get_double (c, group, "rate");
  l->momentum = ks_config_get_double (c, group, "momentum");
  l->eps = ks_config_get_double (c, group, "eps");
  l->seed = ks_config_is_set (c, group, "seed")
                ? (guint64) ks_config_get_int (c, group, "seed")
                : (guint64) ks_config_get_int (c, "model", "seed") + index;
  l->dropout_seed = l->seed + 500;
  l->heads = ks_config_get_int (c, group, "heads");
  l->vocab = ks_config_is_set (c, group, "vocab") ? ks_config_get_int (c, group, "vocab") : vocab;
  l->tie = -1;
  if (t->type == NET_EMBEDDING || t->type == NET_POSITION)
    l->table = g_strdup_printf ("%s.table", l->name);
}

static gboolean
refuse_tie (GError **error, const char *group, const char *why)
{
  g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE, "[%s] tie: %s", group, why);
  return FALSE;
}

/* A linear layer's tie = NAME: an earlier embedding, whose table it uses transposed (its
 * size is then the vocabulary); without a tie it needs its size. */
static gboolean
tie_of (const KsConfig *c, const char *group, GArray *layers, GHashTable *last, gssize *tie,
        GError **error)
{
  const char *name = ks_config_get_string (c, group, "tie");
  gpointer at;
  if (strcmp (ks_config_get_string (c, group, "type"), "linear") != 0)
    return TRUE;
  if (*name == '\0')
    {
      if (ks_config_is_set (c, group, "size"))
        return TRUE;
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[%s] is a linear layer and needs size (or tie = an embedding): set it",
                   group);
      return FALSE;
    }
  if (ks_config_is_set (c, group, "size"))
    return refuse_tie (error, group, "a tied layer's size is its embedding's vocabulary; "
                       "remove size");
  if (!g_hash_table_lookup_extended (last, name, NULL, &at)
      || g_array_index (layers, NetLayer, GPOINTER_TO_SIZE (at)).type != NET_EMBEDDING)
    return refuse_tie (error, group, "name an embedding layer that comes before it in "
                       "[model] net");
  *tie = GPOINTER_TO_SIZE (at);
  return TRUE;
}

static void
layer_clear (gpointer p)
{
  NetLayer *l = p;
  g_free (l->name);
  g_free (l->table);
  g_strfreev (l->stash);
  g_strfreev (l->pop);
}

/* Parses the net into `net` (or only checks it when net is NULL). */
static gboolean
parse (Net *net, const KsConfig *c, gint64 vocab, GError **error)
{
  g_auto (GStrv) names = ks_config_get_list (c, "model", "net");
  g_autoptr (GArray) layers = g_array_new (FALSE, TRUE, sizeof (NetLayer));
  g_array_set_clear_func (layers, layer_clear);
  g_autoptr (GHashTable) last = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  if (!check_groups (c, names, TRUE, error))
    return FALSE;
  if (names[0] == NULL)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[model] type = layers needs [model] net: the names of its [layer.NAME] "
                   "groups in order, e.g. net = hidden, out");
      return FALSE;
    }
  for (int i = 0; names[i] != NULL; i++)
    {
      g_autofree char *group = g_strconcat ("layer.", names[i], NULL);
      if (!ks_config_is_set (c, group, "type"))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "[model] net names '%s', but there is no [%s] group with a type: "
                       "write one (type = linear, conv2d, max_pool, avg_pool, batch_norm, layer_norm, "
                       "dropout, flatten, activation, embedding, position or transformer)", names[i], group);
          return FALSE;
        }
      if (g_hash_table_contains (last, names[i]))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "[model] net names '%s' twice: a layer is listed once (use [%s] "
                       "repeat = N for copies)", names[i], group);
          return FALSE;
        }
      const TypeKeys *t = type_keys (ks_config_get_string (c, group, "type"));
      if (!check_keys (c, group, t, error) || !check_window (c, group, t, error))
        return FALSE;
      gint64 repeat = ks_config_get_int (c, group, "repeat");
      gssize tie = -1;
      if (!tie_of (c, group, layers, last, &tie, error))
        return FALSE;
      const char *add = ks_config_get_string (c, group, "add");
      char *pop = NULL;
      if (add != NULL && *add != '\0')
        {
          gpointer from;
          if (repeat > 1)
            {
              g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                           "[%s] add with repeat = %" G_GINT64_FORMAT ": a repeated layer "
                           "cannot take a skip connection; list the copies one by one",
                           group, repeat);
              return FALSE;
            }
          if (!g_hash_table_lookup_extended (last, add, NULL, &from))
            {
              g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                           "[%s] add = %s: no layer of that name comes before it in "
                           "[model] net", group, add);
              return FALSE;
            }
          pop = g_strdup_printf ("%s>%s", add, names[i]);
          NetLayer *src = &g_array_index (layers, NetLayer, GPOINTER_TO_SIZE (from));
          guint n = src->stash == NULL ? 0 : g_strv_length (src->stash);
          src->stash = g_renew (char *, src->stash, n + 2);
          src->stash[n] = g_strdup (pop);
          src->stash[n + 1] = NULL;
        }
      for (gint64 k = 0; k < repeat; k++)
        {
          NetLayer l = { 0 };
          l.name = repeat > 1 ? g_strdup_printf ("%s.%" G_GINT64_FORMAT, names[i], k)
                              : g_strdup (names[i]);
          l.kind = l.name;
          read_layer (c, group, t, &l, layers->len, vocab);
          if (tie >= 0)
            {
              l.tie = tie;
              l.table = g_strdup (g_array_index (layers, NetLayer, tie).table);
            }
          if (pop != NULL)
            {
              l.pop = g_new0 (char *, 2);
              l.pop[0] = g_strdup (pop);
            }
          g_array_append_val (layers, l);
        }
      g_free (pop);
      if (tie >= 0 && repeat > 1)
        return refuse_tie (error, group, "a repeated layer cannot tie; list the copies one by one");
      g_hash_table_insert (last, g_strdup (names[i]), GSIZE_TO_POINTER (layers->len - 1));
    }
  if (net == NULL)
    return TRUE;
  net->n = layers->len;
  net->layer = (NetLayer *) g_array_free (g_steal_pointer (&layers), FALSE);
  for (gsize i = 0; i < net->n; i++)
    net->layer[i].kind = net->layer[i].name;
  return TRUE;
}

gboolean
net_check_config (const KsConfig *c, GError **error)
{
  if (strcmp (ks_config_get_string (c, "model", "type"), "layers") != 0)
    return check_groups (c, NULL, FALSE, error);
  return parse (NULL, c, 0, error);
}

gboolean
net_from_config (Net *net, const KsConfig *c, NetLoss loss, gint64 outputs, gint64 vocab,
                 GError **error)
{
  net->loss = loss;
  net->outputs = outputs;
  return parse (net, c, vocab, error);
}
