/* ksdist — the distributed algorithm interface (the training mode).
 *
 * For authors of a training mode (an algorithm plugin: KsAlgorithmOps); the trainer calls
 * it, a program rarely does.
 *
 * After OpenKS's DistributedAlgorithm: "collective" (gradient allreduce, LocalSGD),
 * "transpiler" (parameter server: sync, half-async, async, GEO) and "pslib" (sparse
 * parameter server). The factory (factory.h) picks one by mode name or by the
 * original's integer flag. */
#ifndef KSDIST_ALGORITHM_H
#define KSDIST_ALGORITHM_H

#include <ksdist/model.h>
#include <ksdist/optimizer.h>
#include <ksdist/rolemaker.h>

G_BEGIN_DECLS

/* GIO's (gio/gio.h; libksdist links it): how a blocking call is told to return early. */
typedef struct _GCancellable GCancellable;

/* Where training stands, kept in a checkpoint (OpenKS's TrainStatus): the optimizer
 * steps done and the last epoch finished (-1: none, or data without epochs). */
typedef struct {
  gint64 epoch;
  gint64 step;
} KsTrainStatus;

typedef struct {
  gsize size;

  /* required */
  void *(*create) (const KsSettings *settings, GError **error);
  void (*destroy) (void *ctx);
  /* `role` (the core's handle: its collectives and its workers' communicator) outlives
   * the algorithm. */
  gboolean (*init) (void *ctx, KsRoleMaker *role, GError **error);

  /* optional */
  gboolean (*init_worker) (void *ctx, GError **error);
  /* `model_dir` may be NULL; when given it must exist, and persistables load from it */
  gboolean (*init_server) (void *ctx, const char *model_dir, GError **error);
  gboolean (*run_server) (void *ctx, GError **error);
  gboolean (*stop_worker) (void *ctx, GError **error);
  /* Wraps `inner` (which outlives the result): the result's apply_gradients does the
   * algorithm's communication, then the inner one's. It is destroyed with
   * (*out_ops)->destroy. `strategy` is the configuration whose [strategy] group the
   * algorithm reads. The result is the core's base (ks_dist_optimizer_new,
   * dist-optimizer.h), which unscales and clips after the mode's exchange. */
  gboolean (*distributed_optimizer) (void *ctx, const KsOptimizerOps *inner_ops, void *inner,
                                     const KsConfig *strategy, const KsOptimizerOps **out_ops,
                                     void **out, GError **error);
  /* Reserved, deprecated: nothing implements or calls these two (OpenKS's names). They
   * stay so that the slots after them keep their places in ABI 1.x. A model is exported
   * by the trainer (ks_save_inference_model, [train] export_dir) and a job's state is
   * saved through save_check_point. */
  gboolean (*save_inference_model) (void *ctx, KsModel *model, const char *dir,
                                    const char *const *feeds, KsExpr *const *targets,
                                    gsize n_targets, GError **error);
  gboolean (*save_persistables) (void *ctx, KsModel *model, const char *dir, GError **error);
  /* See ks_algorithm_save_check_point and ks_algorithm_load_check_point. */
  gboolean (*save_check_point) (void *ctx, KsModel *model, KsOptimizer *optimizer,
                                const char *dir, const KsTrainStatus *status,
                                GHashTable *metadata, guint keep, GError **error);
  gboolean (*load_check_point) (void *ctx, KsModel *model, KsOptimizer *optimizer,
                                const char *dir, KsTrainStatus *status, GHashTable **metadata,
                                GError **error);

  /* optional, appended: the pslib mode's sparse tables (sparse.h) */
  /* Before distributed_optimizer: model parameter `rows_param` holds, at each step, the
   * rows a batch pulled from sparse table `table` ([table.NAME]); it is not a dense
   * parameter (not on the servers' dense tables, not averaged). Same order everywhere. */
  gboolean (*sparse_table) (void *ctx, const char *table, const char *rows_param,
                            GError **error);
  /* The values of `n` ids (1 + embedx_dim floats each) into `out`; with `create`,
   * missing rows are made (training), else they read as zeros (evaluation). */
  gboolean (*pull_sparse) (void *ctx, const char *table, const guint64 *ids, gsize n,
                           gboolean create, float *out, GError **error);
  /* The gradients of `n` distinct ids, summed over their shows in `step`'s batch (as
   * ks_sparse_table_push); may return before the servers have them ([strategy] staleness). */
  gboolean (*push_sparse) (void *ctx, const char *table, gint64 step, const guint64 *ids,
                           gsize n, const float *grads, const float *shows,
                           const float *clicks, GError **error);
  /* Every push of this worker is on the servers, and the model holds their dense values
   * (before an evaluation that still reads sparse rows from the servers). */
  gboolean (*flush_worker) (void *ctx, GError **error);
  /* A day's end on every server's sparse tables (ks_sparse_table_shrink); *deleted gets
   * the rows deleted over all servers. */
  gboolean (*shrink) (void *ctx, guint64 *deleted, GError **error);

  /* optional, appended: the plan's check (trainer.h). Whether the mode can honour the
   * configuration's [strategy] (and any other group it reads), with the configuration
   * error distributed_optimizer would give; no context, cheap, without side effects. */
  gboolean (*check_strategy) (const KsConfig *config, GError **error);

  /* appended in ABI 1.1: KS_ALGORITHM_* flags, what the mode needs (0: no servers; worker
   * 0 writes each checkpoint whole). A 1.0 plugin gets KS_ALGORITHM_TRAITS_1_0. */
  guint32 traits;

  /* optional, appended in ABI 1.1: run_server that also returns once `cancellable` (may
   * be NULL) is cancelled, the trainer's stop signal: FALSE with G_IO_ERROR_CANCELLED
   * when no worker is left to serve, or they did not stop within [comm] timeout of it.
   * Called instead of run_server when set. */
  gboolean (*run_server_cancellable) (void *ctx, GCancellable *cancellable, GError **error);
} KsAlgorithmOps;

/* The mode trains with parameter servers (ksdist launch --servers S): the update runs on
 * the servers, so it has no pipeline, no task's own step, no mixed precision. */
#define KS_ALGORITHM_SERVERS (1u << 0)
/* Its checkpoints are written by the servers, each its shard, beside the workers' job
 * file (no model.safetensors to export or start from); without it worker 0 writes the
 * whole model as a one-process run does. */
#define KS_ALGORITHM_SERVER_CHECKPOINTS (1u << 1)
/* What the core assumed of a mode before traits (of any but "collective"). */
#define KS_ALGORITHM_TRAITS_1_0 (KS_ALGORITHM_SERVERS | KS_ALGORITHM_SERVER_CHECKPOINTS)

/* A distributed algorithm instance, made by ks_factory_instantiate(). */
typedef struct KsAlgorithm KsAlgorithm;

void ks_algorithm_free (KsAlgorithm *algorithm);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsAlgorithm, ks_algorithm_free)

const char *ks_algorithm_mode (const KsAlgorithm *algorithm);
const char *ks_algorithm_plugin (const KsAlgorithm *algorithm);
gboolean ks_algorithm_init (KsAlgorithm *algorithm, KsRoleMaker *role, GError **error);
/* An optimizer that wraps `inner` (taking it over) with the algorithm's communication, e.g.
 * gradient allreduce; its ks_optimizer_minimize and ks_optimizer_step are the usual ones. */
KsOptimizer *ks_algorithm_distributed_optimizer (KsAlgorithm *algorithm, KsOptimizer *inner,
                                                 const KsConfig *strategy, GError **error);
gboolean ks_algorithm_init_worker (KsAlgorithm *algorithm, GError **error);
gboolean ks_algorithm_init_server (KsAlgorithm *algorithm, const char *model_dir, GError **error);
/* Serves until every worker has stopped, or `cancellable` (may be NULL) is cancelled and
 * the mode's run_server_cancellable returns (G_IO_ERROR_CANCELLED); a mode with only
 * run_server cannot be cancelled. */
gboolean ks_algorithm_run_server_cancellable (KsAlgorithm *algorithm, GCancellable *cancellable,
                                              GError **error);
/* The same with the cancellable given to ks_algorithm_set_cancellable, if any. */
gboolean ks_algorithm_run_server (KsAlgorithm *algorithm, GError **error);
/* The cancellable of the blocking calls made without one (ks_algorithm_run_server):
 * the trainer's, cancelled by its stop signal. Referenced; NULL for none. */
void ks_algorithm_set_cancellable (KsAlgorithm *algorithm, GCancellable *cancellable);
gboolean ks_algorithm_stop_worker (KsAlgorithm *algorithm, GError **error);

/* The pslib mode's sparse tables: see the slots of the same names. A mode without them
 * answers "not supported". */
gboolean ks_algorithm_has_sparse (const KsAlgorithm *algorithm);
gboolean ks_algorithm_sparse_table (KsAlgorithm *algorithm, const char *table,
                                    const char *rows_param, GError **error);
gboolean ks_algorithm_pull_sparse (KsAlgorithm *algorithm, const char *table, const guint64 *ids,
                                   gsize n, gboolean create, float *out, GError **error);
gboolean ks_algorithm_push_sparse (KsAlgorithm *algorithm, const char *table, gint64 step,
                                   const guint64 *ids, gsize n, const float *grads,
                                   const float *shows, const float *clicks, GError **error);
/* Before an evaluation with servers: the flush_worker slot, or else stop_worker. */
gboolean ks_algorithm_flush_worker (KsAlgorithm *algorithm, gboolean *stopped, GError **error);
gboolean ks_algorithm_shrink (KsAlgorithm *algorithm, guint64 *deleted, GError **error);

/* OpenKS's save_check_point, called by every worker at the same step: the mode decides
 * who writes (collective: worker 0, as ks_checkpoint_save does, into
 * DIR/checkpoint-<status->step>, keeping the newest `keep`) and returns on every worker
 * once the checkpoint is complete, or with the same failure on every worker.
 * `metadata` (may be NULL) adds entries; the status is saved as "epoch". */
/* The check_strategy of the plugin that provides `mode` (TRUE when it has none, or no
 * plugin provides the mode: ks_factory_instantiate says so). */
gboolean ks_algorithm_check_strategy (KsRegistry *registry, const KsConfig *config,
                                      const char *mode, GError **error);

gboolean ks_algorithm_save_check_point (KsAlgorithm *algorithm, KsModel *model,
                                        KsOptimizer *optimizer, const char *dir,
                                        const KsTrainStatus *status, GHashTable *metadata,
                                        guint keep, GError **error);
/* OpenKS's load_check_point, called by every worker: each loads the newest checkpoint
 * worker 0 finds in DIR, so all resume from the same one. With none there, `status` is
 * { -1, 0 } and nothing changes. When any worker cannot load it, every worker fails,
 * and the message names the workers and why. `metadata` (may be NULL) receives the
 * checkpoint's. */
gboolean ks_algorithm_load_check_point (KsAlgorithm *algorithm, KsModel *model,
                                        KsOptimizer *optimizer, const char *dir,
                                        KsTrainStatus *status, GHashTable **metadata,
                                        GError **error);

G_END_DECLS

#endif
