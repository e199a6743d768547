/* The segmenter as the core calls it: a seg_method picks the implementation, and every
 * result is checked here, whatever plugin made it; and which stage owns a layer when
 * each stage holds several chunks (virtual stages). */
#include "ks-private.h"

#include <string.h>

#define OPS(s) KS_INSTANCE_OPS (&(s)->instance, KsSegmenterOps)

struct KsSegmenter {
  KsInstance instance;
  char *method;   /* the seg_method as given */
  char *argument; /* the part its implementation reads: a regex, a list; may be NULL */
};

KsSegmenter *
ks_segmenter_new (KsRegistry *registry, const KsConfig *config, const char *seg_method,
                  GError **error)
{
  g_autofree char *name = NULL;
  const char *argument = NULL;
  KsSegmenter *s;

  if (g_ascii_isdigit (seg_method[0]))
    name = g_strdup ("list"), argument = seg_method;
  else if (strchr (seg_method, ':') != NULL)
    {
      name = g_strndup (seg_method, strchr (seg_method, ':') - seg_method);
      argument = strchr (seg_method, ':') + 1;
    }
  else
    name = g_strdup (seg_method);
  s = (KsSegmenter *) ks_instance_new (registry, config, KS_KIND_SEGMENTER, name,
                                       sizeof (KsSegmenter), error);
  if (s != NULL)
    {
      s->method = g_strdup (seg_method);
      s->argument = g_strdup (argument);
    }
  return s;
}

void
ks_segmenter_free (KsSegmenter *s)
{
  if (s == NULL)
    return;
  g_free (s->method);
  g_free (s->argument);
  ks_instance_free ((KsInstance *) s);
}

gboolean
ks_segmenter_segment (KsSegmenter *s, const KsLayerInfo *layers, gsize n_layers, gsize parts,
                      gsize *b, GError **error)
{
  if (parts == 0 || n_layers < parts)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "cannot cut %" G_GSIZE_FORMAT " layers into %" G_GSIZE_FORMAT " parts "
                   "(stages x virtual stages): every part needs a layer; use fewer stages or "
                   "virtual stages", n_layers, parts);
      return FALSE;
    }
  if (!OPS (s)->segment (s->instance.ctx, layers, n_layers, parts, s->argument, b, error))
    return FALSE;
  if (b[0] != 0 || b[parts] != n_layers)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "seg_method %s: boundaries must start at 0 and end at the layer count %"
                   G_GSIZE_FORMAT " (they go from %" G_GSIZE_FORMAT " to %" G_GSIZE_FORMAT ")",
                   s->method, n_layers, b[0], b[parts]);
      return FALSE;
    }
  for (gsize k = 0; k < parts; k++)
    if (b[k + 1] <= b[k])
      {
        g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                     "seg_method %s: boundary %" G_GSIZE_FORMAT " (%" G_GSIZE_FORMAT ") is not "
                     "after boundary %" G_GSIZE_FORMAT " (%" G_GSIZE_FORMAT "): part %"
                     G_GSIZE_FORMAT " would be empty; boundaries must increase",
                     s->method, k + 1, b[k + 1], k, b[k], k);
        return FALSE;
      }
  return TRUE;
}

int
ks_pipeline_stage_of_layer (const gsize *b, gsize stages, gsize virtual_stages, gsize layer)
{
  gsize chunks = stages * virtual_stages;
  if (stages == 0 || virtual_stages == 0 || layer >= b[chunks])
    return -1;
  for (gsize c = 0; c < chunks; c++)
    if (layer < b[c + 1])
      return (int) (c % stages); /* chunk c is virtual stage c / stages of stage c % stages */
  return -1;
}
