/* ksdist — gradients averaged over a communicator in buckets, each while backward goes
 * on: the one averaging path of the collective mode, pslib's dense = allreduce and a
 * pipeline's replicas.
 *
 * For authors of a training mode that averages dense gradients over workers (as
 * collective, pslib and the pipeline do).
 *
 * The (parameter, gradient) pairs' gradients are grouped, from the end of the gradient
 * arena (the layers nearest the loss, whose gradients are ready first), into contiguous
 * ranges of about bucket_floats; a gradient that is not averaged (pslib's sparse rows)
 * ends a bucket, so a bucket holds the pairs' gradients only. With
 * ks_grad_average_ready as the model's KsGradReadyFunc, a bucket whose parameters are
 * all ready goes to a communication thread for its allreduce; finish waits for them and
 * averages the buckets not launched. Every rank launches the buckets in the same order
 * (the graph's), and nothing else may use the communicator between a step's first
 * ready and its finish. */
#ifndef KSDIST_AVERAGE_H
#define KSDIST_AVERAGE_H

#include <ksdist/comm.h>
#include <ksdist/model.h>

G_BEGIN_DECLS

typedef struct KsGradAverage KsGradAverage;

/* 4 MiB: the collective mode's default [collective] bucket_kb, for callers without one */
#define KS_GRAD_AVERAGE_BUCKET_FLOATS ((gsize) 1 << 20)

KsGradAverage *ks_grad_average_new (KsModel *model, KsComm *comm, const KsParamGrad *pairs,
                                    gsize n_pairs, gsize bucket_floats);
void ks_grad_average_free (KsGradAverage *average);
/* The model's KsGradReadyFunc, with the average as its data. */
void ks_grad_average_ready (KsModel *model, KsExpr *param, gpointer average);
/* Waits for the step's averages; a bucket not launched (its gradients came without a
 * ready call) is averaged now. Then the buckets are ready for the next step. */
gboolean ks_grad_average_finish (KsGradAverage *average, GError **error);

G_END_DECLS

#endif
