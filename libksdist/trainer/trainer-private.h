/* The trainer's insides, shared by its files (not installed):
 * trainer.c   the object, its accessors and the task's building blocks
 * plan.c      the plan's check: what the settings, the task and the world allow
 * dist.c      the processes of a job: role, store, communicator, the mode's algorithm
 * meet.c      where a job another launcher started meets
 * single.c    the executor of one model
 * own.c       the executor of a task's own steps
 * stages.c    the pipeline executor: segmenting, building a stage, its report
 * precision.c [amp] on the built model
 * persist.c   checkpoints, resume and export
 * owner.c     a run owns its checkpoint_dir: the lock, fresh runs refused or started over
 * stop.c      preemption: SIGTERM or SIGINT saves at the next step boundary and stops
 * loop.c      ks_trainer_run: the loop
 * observe.c   its observers: the printed lines, [log] metrics, a program's own */
#ifndef KS_TRAINER_PRIVATE_H
#define KS_TRAINER_PRIVATE_H

#include "ks-private.h"
#include <ksdist/trainer.h>

#include <stdio.h>

/* the library's insides: not exported (libksdist.so exports the public API only) */
#pragma GCC visibility push(hidden)

G_BEGIN_DECLS

/* The executor: one model (single.c), the pipeline of [pipeline] (stages.c) or a task's
 * own steps (own.c), chosen once by the plan; the loop calls it and never asks which. */
typedef struct {
  /* after the model is built: the optimizer, bound to the model (and the mode's
   * algorithm) */
  gboolean (*prepare) (KsTrainer *t, GError **error);
  /* step `step` (ks_trainer_fed_step: the task's batch, then the update), and the loss
   * to report (as computed before its update) */
  gboolean (*step) (KsTrainer *t, gint64 step, GError **error);
  gboolean (*loss) (KsTrainer *t, double *loss, GError **error);
  /* whether this process writes checkpoints when no algorithm does, and how */
  gboolean (*writes) (const KsTrainer *t);
  gboolean (*save) (KsTrainer *t, const char *dir, gint64 step, GHashTable *meta, guint keep,
                    GError **error);
  gboolean (*load) (KsTrainer *t, const char *checkpoint, gint64 *step, GHashTable **meta,
                    GError **error);
  /* the start lines; after the first step (which allocates); at the end (reports);
   * first_step and finish may be NULL: nothing to do */
  void (*begin) (KsTrainer *t);
  void (*first_step) (KsTrainer *t);
  gboolean (*finish) (KsTrainer *t, GError **error);
  gboolean task_steps; /* a step is the task's, of no rows the trainer knows: steps/s */
  /* The slots below may be NULL: the trainer's own way, given in each comment. */
  /* after the communicator: the executor's own groups (NULL: the mode's algorithm) */
  gboolean (*connect) (KsTrainer *t, GError **error);
  /* the task's layer list onto the model (NULL: one model of all of it) */
  gboolean (*build) (KsTrainer *t, const KsLayerDesc *layers, gsize n,
                     const KsLayerDesc *loss, const KsLayerDesc *metric, GError **error);
  /* the held-out metric of a batch, one value or n (NULL: run the task's metric) */
  gboolean (*metric) (KsTrainer *t, const KsFeed *feeds, gsize n_feeds, double *value,
                      GError **error);
  gboolean (*metric_values) (KsTrainer *t, const KsFeed *feeds, gsize n_feeds,
                             float *values, gsize n, GError **error);
  /* frees exec_state (and the model when it owns it: then sets t->model NULL) */
  void (*clear) (KsTrainer *t);
} KsExecutor;

extern const KsExecutor ks_executor_single, ks_executor_pipeline, ks_executor_own;

/* loop.c: the task's batch of `step`, its prepare, `update` on the feeds, its finish */
gboolean ks_trainer_fed_step (KsTrainer *t, gint64 step,
                              gboolean (*update) (KsTrainer *t, GError **error),
                              GError **error);
/* loop.c: mixed precision and the optimizer ([train] optimizer), checked for the plan */
gboolean ks_trainer_make_optimizer (KsTrainer *t, GError **error);

struct _KsTrainer {
  KsConfig *config;
  KsRegistry *registry;
  const KsTrainTask *task; /* &task_copy */
  KsTrainTask task_copy;   /* the program's table, its missing slots NULL */
  gpointer task_data;
  const KsExecutor *exec;
  KsCompute *compute;
  KsModel *model;
  gboolean model_borrowed; /* the task frees it */
  KsOptimizer *optimizer;
  KsExpr *loss;
  KsExpr *logits;            /* what an exported inference model computes ... */
  const char *const *inputs; /* ... from these data (NULL-terminated) */
  gsize batch;
  KsFeed *feeds;
  gsize n_feeds;
  gsize eval_samples;
  gsize eval_total; /* the held-out set's size when an evaluation scored fewer ([train]
                     * eval_rows); else 0 */
  gboolean eval_cap_asked;   /* ks_trainer_eval_cap was called (the task read the cap) */
  gboolean eval_cap_checked; /* the first evaluation's check of it was made */
  gsize tokens_per_row;
  double result; /* the final held-out metric */
  FILE *metrics;       /* [log] metrics, written by its observer */
  GArray *observers;   /* of observe.c's entries, in the order added */
  guint observer_ids;
  gboolean tty;
  /* the job (dist.c): this worker's rank among `world` data-parallel workers (replicas
   * of a pipeline); role and the rest NULL for one process alone */
  int rank, world;
  KsRoleMaker *role;
  KsStore *store;
  KsComm *comm;
  const char *comm_why; /* why this communicator: the setting, or auto's reason */
  KsAlgorithm *algorithm;
  gboolean worker_stopped; /* the mode stopped this worker (after a flush) */
  /* a server's: cancelled by the stop signal (dist.c), for the mode's blocking calls */
  GCancellable *stop;
  GThread *stop_watch;
  gint stop_watch_done;
  /* the plan's executor takes the layer list as stages of a pipeline; this worker's
   * stage of it (0 without) */
  gboolean pipelined;
  int stage;
  gpointer exec_state; /* the executor's own (its clear frees it) */
  gboolean describe_only;
  /* settings an executor overrode for itself ("group.key" to the value as written): what
   * checkpoints record */
  GHashTable *written;
  const KsLayerDesc *layers, *loss_layer;
  gsize n_layers;
  int ckpt_lock; /* owner.c: the lock on [train] checkpoint_dir this process holds, or -1 */
  char *ckpt_made; /* owner.c: that directory when this process created it, else NULL */
  /* stop.c: the step of the workers' next agreement on a stop; the last one's time, step */
  gint64 agree_next, agree_at_us, agree_at_step;
};

/* trainer.c */
/* Sets group.key to `value` for this run, keeping the value as written for checkpoints. */
gboolean ks_trainer_override (KsTrainer *t, const char *group, const char *key,
                              const char *value, GError **error);
/* `task` into `copy` by its size (the slots it lacks NULL); an error without the
 * required ones. */
gboolean ks_trainer_task_copy (const KsTrainTask *task, KsTrainTask *copy, GError **error);
/* A trainer without the plan's check (ks_trainer_new makes both). */
KsTrainer *ks_trainer_alloc (KsRegistry *registry, KsConfig *config, const KsTrainTask *task,
                             gpointer data, GError **error);

/* plan.c */
/* "WHAT is VALUE: the model diverged (...)", a KS_COMPUTE_ERROR; FALSE (trainer.c). */
gboolean ks_trainer_not_finite (GError **error, const char *what, double value);

/* The plan's check of the world (the role maker's counts at run time). */
gboolean ks_trainer_check_world (KsRegistry *registry, const KsConfig *c,
                                 const KsTrainTask *task, const KsTrainWorld *world,
                                 GError **error);
/* Whether the compute backend this run will get keeps its tensors in device memory. */
gboolean ks_trainer_on_device (KsRegistry *registry, const KsConfig *c);

/* owner.c */
/* "checkpoint-N (a model of [model] type = T)", the newest checkpoint of `dir`, or NULL
 * when it holds none. */
char *ks_trainer_describe_checkpoints (const char *dir);
/* The job's one owner of [train] checkpoint_dir `dir` (its leader) takes the lock, a
 * configuration error naming the holder when another job has it; with [train]
 * start_over, then moves the old checkpoints aside. */
gboolean ks_trainer_own_checkpoints (KsTrainer *t, const char *dir, GError **error);
void ks_trainer_release_checkpoints (KsTrainer *t);

/* dist.c */
gboolean ks_trainer_dist_setup (KsTrainer *t, GError **error);
gboolean ks_trainer_dist_wrap (KsTrainer *t, GError **error);
gboolean ks_trainer_dist_mean (KsTrainer *t, double *value, GError **error);
void ks_trainer_dist_clear (KsTrainer *t);
/* The mode's life on a worker (nothing without servers): start it before the first
 * step, flush before an evaluation that must see the servers' final values, stop it. */
gboolean ks_trainer_mode_begin (KsTrainer *t, GError **error);
gboolean ks_trainer_mode_flush (KsTrainer *t, GError **error);
gboolean ks_trainer_mode_end (KsTrainer *t, GError **error);

/* meet.c: where a job another launcher started meets (store kind, address, job prefix,
 * whether this rank serves the store); address NULL when nothing says. Under srun also
 * where the store listens and this host's address for Gloo when the step spans several
 * nodes (else NULL); KS_STORE_TOKEN set when it was not. */
typedef struct {
  char *store, *address, *job;
  gboolean serve;
  char *listen, *host;
} KsMeeting;
gboolean ks_trainer_meeting (const char *job, gboolean rank0, KsMeeting *m, GError **error);
void ks_trainer_meeting_clear (KsMeeting *m);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (KsMeeting, ks_trainer_meeting_clear)

/* stages.c */
/* The settings a pipelined run cannot honour, and the batch split. */
gboolean ks_trainer_pipeline_check (const KsConfig *c, GError **error);
/* init-from.c: [model] init_from's weights into the model just built. */
gboolean ks_trainer_init_from (KsTrainer *t, GError **error);
/* ks_model_torch_layouts of the whole model, for checkpoints and exports. */
char *ks_trainer_torch_layouts (KsTrainer *t);

/* precision.c */
gboolean ks_trainer_amp (KsTrainer *t, GError **error);
char *ks_trainer_amp_describe (KsTrainer *t);
char *ks_trainer_amp_fields (KsTrainer *t);

/* persist.c */
gboolean ks_trainer_save (KsTrainer *t, const char *dir, gint64 step, guint keep,
                          GError **error);
gboolean ks_trainer_resume (KsTrainer *t, const char *dir, gint64 *first, GError **error);
gboolean ks_trainer_export (KsTrainer *t, const char *dir, GError **error);

/* stop.c: SIGTERM and SIGINT handlers for ks_trainer_run's time (a flag; a second signal
 * stops at once), the workers' agreement at a step boundary, the stop's error. */
void ks_trainer_signals_catch (void);
void ks_trainer_signals_restore (void);
/* start-up made `dir` (and its `lock`): a signal before the first step removes them */
void ks_trainer_startup_made_dir (const char *dir, const char *lock);
/* The directory and lock that ks_trainer_startup_made_dir announced exist now (or could not
 * be made): a start-up signal may remove them from here on. */
void ks_trainer_startup_made_done (void);
/* the first step begins: a signal from now on stops at a step boundary, saved */
void ks_trainer_signals_stepping (void);

gboolean ks_trainer_stop_agreed (KsTrainer *t, gint64 step, int *sig, GError **error);
gboolean ks_trainer_stopped (KsTrainer *t, int sig, gint64 step, const char *ckpt_dir,
                             GError **error);
gboolean ks_trainer_server_stopped (KsTrainer *t, GError **error);

/* observe.c: the default printing observer (at ks_trainer_new); [log] metrics' (which
 * opens the file); what the loop tells them */
void ks_trainer_observe_init (KsTrainer *t);
gboolean ks_trainer_metrics_open (KsTrainer *t, const char *path, gboolean append,
                                  GError **error);
void ks_trainer_notify_step (KsTrainer *t, const KsTrainStep *s);
void ks_trainer_notify_eval (KsTrainer *t, const KsTrainEval *e);
void ks_trainer_notify_save (KsTrainer *t, gint64 step, const char *dir);
void ks_trainer_notify_end (KsTrainer *t, const KsTrainEnd *e);
void ks_trainer_notify_progress (KsTrainer *t, const KsTrainProgress *p);

G_END_DECLS

#pragma GCC visibility pop

#endif
