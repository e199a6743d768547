/* ksdist — the segmenter interface: cutting a layer list into pipeline stages.
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

G_END_DECLS

#endif
