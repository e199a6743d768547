/* A plugin built outside the ksdist tree, against the installed headers only: a
 * segmenter that cuts n layers into equal parts, the last parts taking the remainder. */
#include <ksdist/ksdist.h>

static void *
oot_create (const KsSettings *settings, GError **error)
{
  return g_new0 (int, 1);
}

static void
oot_destroy (void *ctx)
{
  g_free (ctx);
}

static gboolean
oot_segment (void *ctx, const KsLayerInfo *layers, gsize n_layers, gsize parts,
             const char *method, gsize *boundaries, GError **error)
{
  if (parts == 0 || n_layers < parts)
    {
      g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED,
                   "cannot cut %zu layers into %zu non-empty parts", n_layers, parts);
      return FALSE;
    }
  gsize base = n_layers / parts, first_long = parts - n_layers % parts;
  boundaries[0] = 0;
  for (gsize i = 0; i < parts; i++)
    boundaries[i + 1] = boundaries[i] + base + (i >= first_long ? 1 : 0);
  return TRUE;
}

static const KsSegmenterOps oot_ops = {
  .size = sizeof (KsSegmenterOps),
  .create = oot_create,
  .destroy = oot_destroy,
  .segment = oot_segment,
};

static const KsImplDesc oot_impls[] = {
  { KS_KIND_SEGMENTER, "oot-uniform", &oot_ops, NULL, "uniform, built out of tree" },
};

static const KsPluginDesc oot_plugin = {
  .abi_major = KS_ABI_MAJOR,
  .abi_minor = KS_ABI_MINOR,
  .name = "oot",
  .version = "1.2.3",
  .description = "out-of-tree test plugin",
  .impls = oot_impls,
  .n_impls = 1,
};

KS_PLUGIN_DEFINE (oot_plugin)
