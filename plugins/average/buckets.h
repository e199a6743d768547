/* Gradient buckets averaged while backward goes on: the gradients of the (parameter,
 * gradient) pairs are grouped, from the end of the gradient arena (the layers nearest
 * the loss, whose gradients are ready first), into contiguous ranges of about
 * bucket_floats. The model's grad_ready callback counts a bucket's parameters down, and
 * a complete bucket goes to a communication thread for its allreduce; finish waits for
 * them all. Every rank launches the buckets in the same order (the graph's). A bucket
 * holds only the pairs' gradients: one that is not averaged (pslib's sparse rows) splits
 * them. The one averaging path of the collective mode and pslib's dense = allreduce. */
#ifndef KS_AVERAGE_BUCKETS_H
#define KS_AVERAGE_BUCKETS_H

#include <ksdist/ksdist.h>

typedef struct Buckets Buckets;

Buckets *ks_buckets_new (KsModel *model, KsComm *comm, const KsParamGrad *pairs, gsize n_pairs,
                         gsize bucket_floats);
void ks_buckets_free (Buckets *buckets);
/* The model's KsGradReadyFunc, with the buckets as its data. */
void ks_buckets_ready (KsModel *model, KsExpr *param, gpointer buckets);
/* Waits for the step's averages; a bucket not launched (its gradients came without a
 * sweep) is averaged now. Then the buckets are ready for the next step. */
gboolean ks_buckets_finish (Buckets *buckets, GError **error);

#endif
