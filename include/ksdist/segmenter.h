/* ksdist — the segmenter interface: cutting a layer list into pipeline stages.
 *
 * For authors of a segmenter plugin (KsSegmenterOps); the pipeline executor calls it.
 *
 * A segmentation is a boundary list b[0] = 0 < b[1] < ... < b[parts] = n_layers;
 * part i holds layers b[i] .. b[i+1]-1. No layer is dropped and no part is empty;
 * an impossible request is an error that says why. */
#ifndef KSDIST_SEGMENTER_H
#define KSDIST_SEGMENTER_H

#include <ksdist/plugin.h>

G_BEGIN_DECLS

typedef struct {
  const char *name;  /* the builder's name, matched by "layer:<regex>" */
  gint64 n_params;
  double cost;       /* measured seconds per step, for "cost" */
} KsLayerInfo;

typedef struct {
  gsize size;

  /* required */
  void *(*create) (const KsSettings *settings, GError **error);
  void (*destroy) (void *ctx);
  /* `method` is what follows the implementation name in the config, e.g. the regex of
   * "layer:<regex>" or the list of "0,3,6,10"; may be NULL. `boundaries` has parts + 1
   * slots. */
  gboolean (*segment) (void *ctx, const KsLayerInfo *layers, gsize n_layers, gsize parts,
                       const char *method, gsize *boundaries, GError **error);
} KsSegmenterOps;

struct KsRegistry;
typedef struct KsSegmenter KsSegmenter;

/* A segmenter for a seg_method: "uniform", "parameters", "cost", "layer:<regex>", or a
 * boundary list such as "0,3,6,10" (implementation "list"); its plugin's settings come
 * from `config`. */
KsSegmenter *ks_segmenter_new (struct KsRegistry *registry, const KsConfig *config,
                               const char *seg_method, GError **error);
void ks_segmenter_free (KsSegmenter *segmenter);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsSegmenter, ks_segmenter_free)

/* Cuts `n_layers` layers into `parts` (stages x virtual stages) and checks the result
 * whatever plugin made it: `boundaries` (parts + 1 entries) starts at 0, increases
 * strictly and ends at n_layers. Fewer layers than parts is an error. */
gboolean ks_segmenter_segment (KsSegmenter *segmenter, const KsLayerInfo *layers,
                               gsize n_layers, gsize parts, gsize *boundaries, GError **error);

/* With virtual stages the layers are cut into stages * virtual_stages chunks and stage s
 * owns chunks s, s + stages, s + 2 stages, ...: the stage owning `layer` (-1 past the
 * end). (The seed's get_stage_from_index stepped by virtual_stages where stages is
 * meant, which is only right when the two are equal.) */
int ks_pipeline_stage_of_layer (const gsize *boundaries, gsize stages, gsize virtual_stages,
                                gsize layer);

G_END_DECLS

#endif
