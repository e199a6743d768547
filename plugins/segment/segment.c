/* The segmenters: uniform layer counts, balanced counts of layers matching a regex,
 * balanced parameters or measured cost (the least possible slowest stage), and an
 * explicit boundary list. The core checks every result (segmenter.c). */
#include <config.h>

#include <ksdist/ksdist.h>

#include <math.h>
#include <string.h>

typedef struct {
  gboolean extra_first; /* where layers that do not divide evenly go */
} Segment;

static void *
segment_create (const KsSettings *settings, GError **error)
{
  Segment *s = g_new0 (Segment, 1);
  s->extra_first = g_strcmp0 (ks_settings_get_string (settings, "remainder"), "first") == 0;
  return s;
}

static void
segment_destroy (void *ctx)
{
  g_free (ctx);
}

/* Stage k's share of `total` items over `parts`: total / parts, one more for the
 * total % parts stages at the end (Paddle) or at the start (DeepSpeed). */
static gsize
share (const Segment *s, gsize total, gsize parts, gsize k)
{
  gsize extra = total % parts;
  gboolean gets_one = s->extra_first ? k < extra : k >= parts - extra;
  return total / parts + (gets_one ? 1 : 0);
}

static gboolean
segment_uniform (void *ctx, const KsLayerInfo *layers, gsize n, gsize parts, const char *method,
                 gsize *b, GError **error)
{
  b[0] = 0;
  for (gsize k = 0; k < parts; k++)
    b[k + 1] = b[k] + share (ctx, n, parts, k);
  return TRUE;
}

/* layer:<regex>: each stage gets an even share of the matching layers; a stage starts at
 * its first matching layer, so unmatched layers before the first match join stage 0 and
 * those after the last match the last stage. */
static gboolean
segment_layer (void *ctx, const KsLayerInfo *layers, gsize n, gsize parts, const char *method,
               gsize *b, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (GRegex) re = NULL;
  g_autofree gsize *matches = g_new (gsize, n + 1);
  gsize n_matches = 0;

  if (method == NULL || *method == '\0'
      || (re = g_regex_new (method, G_REGEX_CASELESS, 0, &local)) == NULL)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "seg_method layer:%s: %s", method ? method : "",
                   local ? local->message : "give a regular expression after 'layer:'");
      return FALSE;
    }
  for (gsize i = 0; i < n; i++)
    if (g_regex_match (re, layers[i].name != NULL ? layers[i].name : "", 0, NULL))
      matches[n_matches++] = i;
  if (n_matches < parts)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "seg_method layer:%s matches %" G_GSIZE_FORMAT " of the %" G_GSIZE_FORMAT
                   " layers; each of the %" G_GSIZE_FORMAT " stages needs at least one",
                   method, n_matches, n, parts);
      return FALSE;
    }
  b[0] = 0;
  b[parts] = n;
  for (gsize k = 1, seen = 0; k < parts; k++)
    {
      seen += share (ctx, n_matches, parts, k - 1);
      b[k] = matches[seen];
    }
  return TRUE;
}

/* The boundaries that minimise the largest stage total of `w`, every stage non-empty
 * (dynamic programming over prefix sums, O(parts n^2)); among equal maxima the earliest
 * cut found wins. */
static gboolean
min_max_partition (const double *w, gsize n, gsize parts, gsize *b)
{
  g_autofree double *prefix = g_new0 (double, n + 1);
  g_autofree double *best = g_new (double, (parts + 1) * (n + 1));
  g_autofree gsize *cut = g_new0 (gsize, (parts + 1) * (n + 1));
#define BEST(k, i) best[(k) * (n + 1) + (i)]
#define CUT(k, i) cut[(k) * (n + 1) + (i)]

  for (gsize i = 0; i < n; i++)
    prefix[i + 1] = prefix[i] + w[i];
  for (gsize i = 0; i <= n; i++)
    BEST (0, i) = i == 0 ? 0 : INFINITY;
  for (gsize k = 1; k <= parts; k++)
    for (gsize i = 0; i <= n; i++)
      {
        BEST (k, i) = INFINITY;
        /* stage k holds layers j .. i-1: at least one, and k-1 stages before hold j */
        for (gsize j = k - 1; j + 1 <= i; j++)
          {
            double slowest = MAX (BEST (k - 1, j), prefix[i] - prefix[j]);
            if (slowest < BEST (k, i))
              {
                BEST (k, i) = slowest;
                CUT (k, i) = j;
              }
          }
      }
  b[parts] = n;
  for (gsize k = parts; k > 0; k--)
    b[k - 1] = CUT (k, b[k]);
#undef BEST
#undef CUT
  return TRUE;
}

static gboolean
balance (const KsLayerInfo *layers, gsize n, gsize parts, gboolean by_cost, gsize *b,
         GError **error)
{
  g_autofree double *w = g_new (double, n);
  double total = 0;

  for (gsize i = 0; i < n; i++)
    {
      w[i] = by_cost ? layers[i].cost : (double) layers[i].n_params;
      if (!(w[i] >= 0) || isinf (w[i]))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "seg_method %s: layer %" G_GSIZE_FORMAT " (%s) has %s %g; it must be a "
                       "finite number >= 0", by_cost ? "cost" : "parameters", i,
                       layers[i].name ? layers[i].name : "?", by_cost ? "cost" : "parameters",
                       w[i]);
          return FALSE;
        }
      total += w[i];
    }
  if (by_cost && total == 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "seg_method cost: no layer has a measured cost; profile the layers first");
      return FALSE;
    }
  return min_max_partition (w, n, parts, b);
}

static gboolean
segment_parameters (void *ctx, const KsLayerInfo *layers, gsize n, gsize parts,
                    const char *method, gsize *b, GError **error)
{
  return balance (layers, n, parts, FALSE, b, error);
}

static gboolean
segment_cost (void *ctx, const KsLayerInfo *layers, gsize n, gsize parts, const char *method,
              gsize *b, GError **error)
{
  return balance (layers, n, parts, TRUE, b, error);
}

/* "0,3,6,10": the boundaries themselves; the core checks their order and ends. */
static gboolean
segment_list (void *ctx, const KsLayerInfo *layers, gsize n, gsize parts, const char *method,
              gsize *b, GError **error)
{
  g_auto (GStrv) items = g_strsplit (method != NULL ? method : "", ",", -1);
  guint64 v;

  if (g_strv_length (items) != parts + 1)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "seg_method %s: %u boundaries for %" G_GSIZE_FORMAT " stages; it needs %"
                   G_GSIZE_FORMAT " (0, then where each stage ends)",
                   method, g_strv_length (items), parts, parts + 1);
      return FALSE;
    }
  for (gsize k = 0; k <= parts; k++)
    {
      g_strstrip (items[k]);
      if (!g_ascii_string_to_unsigned (items[k], 10, 0, G_MAXSIZE, &v, NULL))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "seg_method %s: '%s' is not a layer index", method, items[k]);
          return FALSE;
        }
      b[k] = v;
    }
  return TRUE;
}

#define SEGMENTER_OPS(var, fn)                                                       \
  static const KsSegmenterOps var = {                                                \
    .size = sizeof (KsSegmenterOps),                                                 \
    .create = segment_create,                                                        \
    .destroy = segment_destroy,                                                      \
    .segment = fn,                                                                   \
  };
SEGMENTER_OPS (uniform_ops, segment_uniform)
SEGMENTER_OPS (layer_ops, segment_layer)
SEGMENTER_OPS (parameters_ops, segment_parameters)
SEGMENTER_OPS (cost_ops, segment_cost)
SEGMENTER_OPS (list_ops, segment_list)

static const KsImplDesc segment_impls[] = {
  { KS_KIND_SEGMENTER, "uniform", &uniform_ops, NULL, "equal layer counts" },
  { KS_KIND_SEGMENTER, "layer", &layer_ops, NULL,
    "equal counts of layers whose name matches a regex (layer:<regex>)" },
  { KS_KIND_SEGMENTER, "parameters", &parameters_ops, NULL,
    "the least possible largest stage parameter count" },
  { KS_KIND_SEGMENTER, "cost", &cost_ops, NULL,
    "the least possible slowest stage, from measured layer times" },
  { KS_KIND_SEGMENTER, "list", &list_ops, NULL, "explicit boundaries, e.g. 0,3,6,10" },
};

static const KsKeyDesc segment_settings[] = {
  { NULL, "remainder", KS_VALUE_CHOICE, "last", 1, 0, "last|first",
    "uniform and layer: which stages get the layers that do not divide evenly (last: as "
    "Paddle; first: as DeepSpeed)" },
};

static const KsPluginDesc segment_plugin = {
  .abi_major = KS_ABI_MAJOR,
  .abi_minor = KS_ABI_MINOR,
  .name = "segment",
  .version = PACKAGE_VERSION,
  .description = "Pipeline segmenters: uniform, layer:<regex>, parameters, cost, explicit list",
  .impls = segment_impls,
  .n_impls = G_N_ELEMENTS (segment_impls),
  .settings = segment_settings,
  .n_settings = G_N_ELEMENTS (segment_settings),
};

KS_PLUGIN_DEFINE (segment_plugin)
