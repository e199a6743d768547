/* A server's dense table: its blocks of the parameters with the optimizer's state, and
 * the update. The blocks are the parameters of a model of their own ("<param>@<offset>",
 * one dimension), so the update is the optim plugin's own code over that model. */
#ifndef KS_PS_TABLE_H
#define KS_PS_TABLE_H

#include "layout.h"

typedef struct {
  KsModel *model;
  GArray *pairs; /* KsParamGrad of every block, for apply_gradients */
  const KsOptimizerOps *ops;
  void *opt;
  const PsBlock **blocks; /* the server's, in message order */
  gsize n_blocks;
  gsize n_floats; /* a message's floats */
  gint64 updates;
  /* async: [optim] lr, divided by a push's staleness before its update (0: the rate is
   * left as it is) */
  double base_lr;
  /* async, for the server's last line: the largest staleness seen, and the pushes applied
   * at a rate divided by theirs */
  gint64 staleness_max, staleness_divided;
} PsDenseTable;

/* The blocks of `server` in `layout`, with the values of `initial` (the whole model's
 * parameter arena, of the layout's model); `ops`/`opt` is an optimizer instance used by
 * this table only. */
PsDenseTable *ps_dense_table_new (KsCompute *compute, const PsLayout *layout, int server,
                                  const KsArena *initial, const KsOptimizerOps *ops, void *opt,
                                  GError **error);
void ps_dense_table_free (PsDenseTable *t);
/* The values, packed block after block (n_floats). */
gboolean ps_dense_table_read (PsDenseTable *t, float *out, GError **error);
/* One optimizer update from packed gradients. */
gboolean ps_dense_table_apply (PsDenseTable *t, const float *grads, GError **error);
/* The same, at base_lr / max (1, staleness) when base_lr is set and the optimizer takes a
 * rate: `staleness` updates were applied since the values the gradients were computed
 * on were read (Zhang et al., "Staleness-aware Async-SGD", IJCAI 2016). */
gboolean ps_dense_table_apply_stale (PsDenseTable *t, const float *grads, gint64 staleness,
                                     GError **error);
/* values += packed deltas (GEO). */
gboolean ps_dense_table_add (PsDenseTable *t, const float *deltas, GError **error);
/* Copies between packed host floats and an arena of the table's layout (its parameters,
 * or a state arena). */
gboolean ps_dense_table_transfer (PsDenseTable *t, KsArena *arena, float *host,
                                  gboolean to_host, GError **error);
/* The optimizer's state arenas (of the table model's layout) and step counter. */
gboolean ps_dense_table_state (PsDenseTable *t, KsArena ***arenas, gsize *n, gint64 **step,
                               GError **error);

#endif
