/* Checkpoints of a collective job (OpenKS's save_check_point and load_check_point):
 * every worker holds the whole model, so worker 0 writes for all, and every worker loads
 * the checkpoint worker 0 names. Both agree over the workers' communicator, so a
 * failure on one worker is a failure on all, named, rather than a hang. */
#ifndef KS_COLLECTIVE_CHECKPOINT_H
#define KS_COLLECTIVE_CHECKPOINT_H

#include <ksdist/ksdist.h>

gboolean ks_collective_save_check_point (KsRoleMaker *role, KsModel *model,
                                         KsOptimizer *optimizer, const char *dir,
                                         const KsTrainStatus *status, GHashTable *metadata,
                                         guint keep, GError **error);
gboolean ks_collective_load_check_point (KsRoleMaker *role, KsModel *model,
                                         KsOptimizer *optimizer, const char *dir,
                                         KsTrainStatus *status, GHashTable **metadata,
                                         GError **error);

#endif
