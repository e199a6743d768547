/* ksdist — meta-learning: Reptile (Nichol, Achiam and Schulman, 2018) on few-shot image
 * sets (images.h), as OpenAI's supervised-reptile trains it.
 *
 * For programs using the tasks library (libksdist-tasks); not part of the core.
 *
 * A meta-step draws `meta_batch` tasks (ways classes of the train split, shots images
 * each), trains a copy of the weights on each for inner_iters steps of inner_batch images
 * with a fresh inner optimizer, and moves the weights toward the tasks' mean result by
 * the meta step size, which falls linearly from meta_step to meta_step_final. With a
 * communicator the tasks of a meta-batch are spread over the ranks (rank r takes tasks
 * r * meta_batch .. of the meta_batch * size drawn) and their moves are averaged by an
 * allreduce: the same as one process with a meta-batch size times as large. */
#ifndef KSDIST_META_H
#define KSDIST_META_H

#include <ksdist/comm.h>
#include <ksdist/images.h>
#include <ksdist/model.h>

G_BEGIN_DECLS

typedef struct {
  int ways, shots;
  int train_shots;                        /* of the training tasks; 0: shots */
  int inner_batch, inner_iters;           /* training tasks */
  int eval_inner_batch, eval_inner_iters; /* fine-tuning on an evaluation task's shots */
  int meta_batch;                         /* tasks per meta-step on each rank */
  double meta_step, meta_step_final;
  gint64 meta_iters;                      /* for the step size's schedule */
  int filters;                            /* of each of the network's 4 convolutions */
  guint64 seed;                           /* of the weights and of the tasks */
} KsReptileOptions;

typedef struct KsReptile KsReptile;

/* The network of supervised-reptile for `set`'s images: characters, 4 x [conv 3x3 stride
 * 2, batch norm, ReLU]; colour, 4 x [conv 3x3, batch norm, max pool 2x2, ReLU] (the pool
 * unpadded: 84 -> 5 where TensorFlow's padded one gives 6); then a fully connected layer
 * to `ways` logits. Batch norm always normalises by the batch, as
 * there. `optimizer` names the inner loop's ([train] optimizer, adam in the paper), made
 * with `config`'s settings; `comm` may be NULL. */
KsReptile *ks_reptile_new (KsRegistry *registry, const KsConfig *config, KsCompute *compute,
                           KsImageSet *set, const char *optimizer, KsComm *comm,
                           const KsReptileOptions *options, GError **error);
void ks_reptile_free (KsReptile *reptile);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsReptile, ks_reptile_free)

/* The weights (the training model; checkpoint it to save them). */
KsModel *ks_reptile_model (KsReptile *reptile);

/* Meta-step `iter` (0-based; tasks and step size follow from it alone, so a resumed run
 * takes the same steps); `loss` (may be NULL) gets the mean loss of the tasks' last inner
 * steps on this rank. */
gboolean ks_reptile_step (KsReptile *reptile, gint64 iter, double *loss, GError **error);

/* The mean accuracy over `n_tasks` tasks of `split` (drawn from `seed`): each fine-tunes
 * a copy of the weights on its shots, then classifies one more image of each class with
 * the shots beside it in the batch (supervised-reptile's non-transductive test); the
 * weights are left as they were. `ci95` (may be NULL) gets the 95% interval's half
 * width. With a communicator the tasks are spread over the ranks and every rank gets the
 * mean over all. */
gboolean ks_reptile_evaluate (KsReptile *reptile, KsSplit split, int n_tasks, guint64 seed,
                              double *accuracy, double *ci95, GError **error);
/* Called after each task an evaluation has done on this rank, with that rank's count
 * of tasks done and to do (a progress line, say); NULL for none. */
typedef void (*KsReptileProgress) (gpointer data, gsize done, gsize total);
void ks_reptile_set_progress (KsReptile *reptile, KsReptileProgress progress, gpointer data);

G_END_DECLS

#endif
