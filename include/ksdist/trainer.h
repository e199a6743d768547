/* ksdist — the trainer: the training loop as a library.
 *
 * For program authors who embed the training loop (ksdist train is one): a task's
 * callbacks, observers, the plan.
 *
 * A program gives it a configuration and a task (callbacks that build the model and fill
 * each step's batch); the trainer decides once, before anything is built, how the run
 * goes (the plan: mode x executor x task x mixed precision x role x world size) and then
 * runs it: data parallel, parameter servers or pipeline stages, resume, checkpoints,
 * held-out evaluation, the metrics file, progress, traces, mixed precision and export.
 * `ksdist train` is a thin front on it; examples/own-model.c trains a model of its own in
 * every mode.
 *
 *   KsTrainer *t = ks_trainer_new (registry, config, &my_task, my_data, &error);
 *   ok = t != NULL && ks_trainer_run (t, &error);
 *   ks_trainer_free (t);
 *
 * or, for a whole program, return ks_trainer_main (argc, argv, &my_task, my_data).
 *
 * The three plug points are the mode (the [job] mode's algorithm plugin: collective,
 * transpiler, pslib), the executor (one model, or the pipeline of [pipeline]) and the
 * task; the loop tests none of them. */
#ifndef KSDIST_TRAINER_H
#define KSDIST_TRAINER_H

#include <ksdist/algorithm.h>
#include <ksdist/config.h>
#include <ksdist/model.h>
#include <ksdist/pipeline.h>
#include <ksdist/registry.h>
#include <ksdist/rolemaker.h>

G_BEGIN_DECLS

typedef struct _KsTrainer KsTrainer;

/* The world a plan is checked for: how many workers and servers the job has (0 for
 * both: not known yet, as for `ksdist config` without -n). */
typedef struct {
  int workers, servers;
} KsTrainWorld;

/* What a task does for the trainer. Every callback gets the trainer; the task's own
 * state is ks_trainer_data (t). A callback that returns FALSE sets the error. Slots are
 * only ever appended: `size` says which a table has, the rest read as NULL. */
typedef struct {
  gsize size;         /* sizeof (KsTrainTask) */
  const char *name;   /* for messages: "spirals", "my-regression" */
  const char *metric; /* of the held-out evaluation: "accuracy", "loss" */
  const char *unit;   /* what the evaluation counts: "samples", "tokens" */
  /* Required. Builds the model: a layer list through ks_trainer_build_layers (every
   * executor can run it, the pipeline included), or a model of its own through
   * ks_trainer_set_model (one model only). Then sets the step's feeds. */
  gboolean (*build) (KsTrainer *t, GError **error);
  /* Required (unless `step` is set). Fills the feeds with this worker's rows of step's
   * global batch: ks_trainer_batch (t) rows from row ks_trainer_rank (t) * batch of
   * batch * ks_trainer_world (t). Depending on nothing but the step keeps a resumed run
   * bitwise equal to an unbroken one and data parallelism equal to one process. */
  void (*batch) (KsTrainer *t, gint64 step);
  /* Required. The held-out metric over every held-out row once, and in *samples the rows
   * (or tokens) it scored, the number the trainer prints: batches of ks_trainer_batch
   * rows, the last one partial, each summed by ks_trainer_metric_sum (any executor);
   * `final` is TRUE for the evaluation at the end, FALSE for [train] eval_every's.
   * [train] eval_rows may cap the rows (ks_trainer_eval_cap; say so in
   * honours_eval_rows). */
  gboolean (*evaluate) (KsTrainer *t, gboolean final, double *value, gsize *samples,
                        GError **error);
  /* Optional from here. */
  const char *(*describe) (KsTrainer *t); /* "a GPT (2 layers) on words.txt" */
  void (*clear) (KsTrainer *t);           /* frees ks_trainer_data (t) */
  /* Entries for checkpoints' and exports' metadata, so they can be used without the
   * configuration. */
  void (*metadata) (KsTrainer *t, GHashTable *metadata);
  /* The last epoch over the training data finished after `step` (-1: none). */
  gint64 (*last_epoch) (KsTrainer *t, gint64 step);
  /* After batch and before the step (e.g. pull a batch's sparse rows), and after it. */
  gboolean (*prepare) (KsTrainer *t, gint64 step, GError **error);
  gboolean (*finish) (KsTrainer *t, gint64 step, GError **error);
  /* A whole step of the task's own (meta-learning: Reptile's inner loops and its
   * meta-update), in place of the optimizer's; the model is ks_trainer_model's, the
   * loss what it sets in *loss. Such a task runs data parallel (collective) or alone. */
  gboolean (*step) (KsTrainer *t, gint64 step, double *loss, GError **error);
  /* The keys of [model] and [data] the task reads, NULL-terminated ("data.path"); a key
   * of those groups set in the configuration but not listed is refused by the plan (a
   * setting never silently ignored). NULL: the task reads them all. */
  const char *const *settings;
  /* The task's own refusals, from the settings and the world alone, before anything is
   * built (the plan's check calls it, so ksdist config finds them too). */
  gboolean (*check) (const KsConfig *config, const KsTrainWorld *world, GError **error);
  /* The names of the task's sparse tables (sparse.h), NULL-terminated: a [table.NAME]
   * group of any other name is refused by the plan. NULL: none. */
  const char *const *sparse_tables;
  /* A hint added to the message for a missing file that setting `key` ("data.path")
   * names, saying how to make it ("make it with `ksdist datagen ctr DIR`"): a new
   * string, or NULL for none. */
  char *(*missing_hint) (const KsConfig *config, const char *key);
  /* Keys of the task's own, in any group ([model] my_key): each entry's .group is its
   * group. They resolve and are checked as the core's (ks_trainer_add_task_schema); a key
   * the core already declares is skipped. With `settings` set, the task reads them too. */
  const KsKeyDesc *schema;
  gsize n_schema;
  /* PyTorch's names of the task's parameters (a KsTorchNameFunc, checkpoint.h), for
   * [model] init_from; NULL: NAME.weight and NAME.bias. */
  char *(*torch_name) (const char *base, const char *suffix);
  /* TRUE: evaluate scores at most ks_trainer_eval_cap (t) rows ([train] eval_rows). FALSE
   * (or a table older than this slot): [train] eval_rows set is refused by the plan
   * before training, as the task would score every row all the same. */
  gboolean honours_eval_rows;
} KsTrainTask;

/* Adds `task`'s own keys (its `schema`) to `config`, before ks_config_validate;
 * ks_trainer_main and ks_trainer_check (so ks_trainer_new) do it. */
void ks_trainer_add_task_schema (KsConfig *config, const KsTrainTask *task);

/* The plan's check, before anything is built. First it adds the task's own keys
 * (ks_trainer_add_task_schema) and checks the configuration against the whole schema
 * (ks_config_validate), so a program that loads a configuration and scans the plugins
 * itself needs no more (a ks_config_validate of its own before this would not know the
 * task's keys). Then every setting that clashes with another,
 * with the mode, the executor, the task, the world, or a path the run cannot write, is
 * a KS_CONFIG_ERROR naming the settings and what to change. `world` may be NULL (not
 * known yet: the role maker's counts are checked when the run starts). With `build`,
 * the task's model is built too, to describe it (with ks_trainer_data NULL, on this
 * process's compute backend, no communication, no data read), so that what only the
 * model tells (a pipeline needs a layer list, an export needs logits) is found here as
 * well. `ksdist config`, `ksdist launch` and ks_trainer_new call it. It changes
 * `config` in two ways: the task's keys are added, and [optim] total_steps = 0 becomes
 * [train] steps. */
gboolean ks_trainer_check (KsRegistry *registry, KsConfig *config, const KsTrainTask *task,
                           const KsTrainWorld *world, gboolean build, GError **error);

/* Whether [pipeline] asks for more than one stage, chunk or micro-batch: the executor
 * is then the pipeline. */
gboolean ks_trainer_pipelined_config (const KsConfig *config);

/* A trainer for `task` on `config` (the task table is copied; registry and config must
 * outlive it), after the plan's check (ks_trainer_check without a world and without
 * build), whose error it returns. `data` is the task's state (ks_trainer_data), which
 * its build may replace; the trainer owns it from here: ks_trainer_free calls the
 * task's clear when the data is not NULL. Nothing is built or connected until
 * ks_trainer_run, which runs once. */
KsTrainer *ks_trainer_new (KsRegistry *registry, KsConfig *config, const KsTrainTask *task,
                           gpointer data, GError **error);
/* The whole run: meets the other processes, builds the task, resumes, trains [train]
 * steps with checkpoints, evaluations and progress, evaluates at the end, exports, and
 * stops the servers; a server process serves until every worker stops. FALSE and the
 * error on any failure (a KS_CONFIG_ERROR is a setting to change). */
gboolean ks_trainer_run (KsTrainer *t, GError **error);
void ks_trainer_free (KsTrainer *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsTrainer, ks_trainer_free)

/* A training program's whole main: `PROG CONFIG [--set GROUP.KEY=VALUE ...]` loads the
 * configuration and the plugins, logs through ks_log_to_stderr, checks the plan, and
 * runs `task` (with `data` as its ks_trainer_data) as this process's part of the job,
 * under ksdist launch, torchrun, mpirun or alone. Prints one line for an error; returns
 * the exit status (ks_trainer_exit_status). */
int ks_trainer_main (int argc, char **argv, const KsTrainTask *task, gpointer data);
/* The exit status for an error of the trainer: 2 for a setting to change (a
 * KS_CONFIG_ERROR, a plugin or mode not found), 128 + the signal for a run that SIGTERM
 * or SIGINT stopped (a KS_TRAINER_SIGNAL_ERROR: 143, 130), else 1. */
int ks_trainer_exit_status (const GError *error);

/* ks_trainer_run's error when SIGTERM or SIGINT asked it to stop: the workers agreed on a
 * step boundary, saved a checkpoint there (where [train] checkpoint_dir is set) and
 * stopped; the message says where and the command that resumes. Its code is the signal's
 * number. A second signal stops the process at once (its default action). */
#define KS_TRAINER_SIGNAL_ERROR (ks_trainer_signal_error_quark ())
GQuark ks_trainer_signal_error_quark (void);
/* The signal (SIGTERM or SIGINT) that asked this process to stop during ks_trainer_run,
 * or 0: code that waits outside the steps (a parameter server's loop) checks it, so the
 * first signal is never lost there. */
int ks_trainer_stop_signal (void);
/* From now until ks_trainer_run's first step, SIGTERM or SIGINT ends the process at once
 * with one line, "NAME: stopped by SIGINT before the first step: nothing was trained and
 * nothing saved", and the status 128 + the signal (a program's main calls it first, so
 * that loading and meeting the job are covered; ks_trainer_run calls it otherwise). */
void ks_trainer_catch_startup_signals (const char *name);

/* Log messages as one line each on stderr, "PROGRAM: LEVEL: message", those less
 * severe than `level` ("error", "warning", "info", "debug"; [log] level) left out.
 * ks_trainer_main calls it with the config's [log] level. */
void ks_log_to_stderr (const char *program, const char *level);

/* What a run reports, to observers: a program embedding the trainer logs its own way.
 * The structs are passed by pointer and only ever grow: `size` says which fields the
 * trainer filled. Only the job's leader (rank 0, stage 0) reports steps and evaluations;
 * every worker reports its saves and its end. */
typedef struct {
  gsize size;           /* sizeof (KsTrainStep) as the trainer was built */
  gint64 step, steps;   /* this step of [train] steps */
  double loss;          /* the mean training loss since the last report, over the workers */
  double lr;            /* the optimizer's learning rate; NaN when it says none */
  double rate;          /* samples (or, for a task with steps of its own, steps) per second */
  gboolean task_steps;  /* the task ran its own steps: `rate` counts steps */
  double eta_s, wall_s; /* seconds left (estimated) and since the run began */
  const double *eval;   /* the held-out metric evaluated at this step, or NULL */
} KsTrainStep;

/* A held-out evaluation during training ([train] eval_every); the final one is
 * KsTrainEnd's. */
typedef struct {
  gsize size;           /* sizeof (KsTrainEval) */
  gint64 step;          /* the step after which it ran */
  double value;         /* the held-out metric (KsTrainTask.metric) */
  gsize samples, total; /* what it scored; the held-out set's size when capped, else 0 */
  gboolean reported;    /* a KsTrainStep for the same step follows, carrying it */
  double wall_s;
} KsTrainEval;

typedef struct {
  gsize size; /* sizeof (KsTrainEnd) */
  double eval; /* the final held-out metric (ks_trainer_result) */
  gsize samples, total;
} KsTrainEnd;

/* A long phase of the task's own (ks_trainer_progress), once it has run [log]
 * progress_after seconds, at most five times a second, and at its end if reported before. */
typedef struct {
  gsize size;             /* sizeof (KsTrainProgress) */
  const char *what;       /* "evaluation tasks" */
  gsize done, total;
  double elapsed_s, eta_s; /* since the phase began; left (estimated) */
} KsTrainProgress;

/* Any slot may be NULL. Called in the order they were added, the default first. */
typedef struct {
  gsize size; /* sizeof (KsTrainObserver) */
  void (*on_step) (KsTrainer *t, const KsTrainStep *s, gpointer data);
  void (*on_eval) (KsTrainer *t, const KsTrainEval *e, gpointer data);
  void (*on_save) (KsTrainer *t, gint64 step, const char *dir, gpointer data);
  void (*on_end) (KsTrainer *t, const KsTrainEnd *e, gpointer data);
  void (*on_progress) (KsTrainer *t, const KsTrainProgress *p, gpointer data);
} KsTrainObserver;

/* The observer that prints the run's lines on stdout ("step 10/100 loss 0.6931 ...",
 * "eval accuracy 0.9812 (...)", a phase's progress on a terminal); every trainer starts
 * with it. */
#define KS_TRAINER_OBSERVER_PRINT 1u
/* Adds `observer` (the table must outlive the trainer) with `data` for its calls;
 * returns its id for ks_trainer_remove_observer. Before ks_trainer_run. A table whose
 * `size` is not set is refused with a critical message, returning 0. */
guint ks_trainer_add_observer (KsTrainer *t, const KsTrainObserver *observer, gpointer data);
/* Removes an observer: KS_TRAINER_OBSERVER_PRINT silences the printed lines. An id
 * not on the trainer (removed already, say) gives a critical message. */
void ks_trainer_remove_observer (KsTrainer *t, guint id);

/* After ks_trainer_run: the held-out metric at the end (NaN when none ran). */
double ks_trainer_result (const KsTrainer *t);

/* For the task's callbacks. */
KsConfig *ks_trainer_config (const KsTrainer *t);
KsRegistry *ks_trainer_registry (const KsTrainer *t);
KsCompute *ks_trainer_compute (const KsTrainer *t);
gpointer ks_trainer_data (const KsTrainer *t);
void ks_trainer_set_data (KsTrainer *t, gpointer data);
/* Rows a worker trains on each step ([train] batch), this worker's rank among the
 * world's data-parallel workers (a pipeline's replicas; -1 on a parameter server, whose
 * build makes the model but reads no data), and their number. */
gsize ks_trainer_batch (const KsTrainer *t);
int ks_trainer_rank (const KsTrainer *t);
int ks_trainer_world (const KsTrainer *t);
/* The rows the model is built for: one micro-batch of a pipelined run, else batch. */
gsize ks_trainer_rows (const KsTrainer *t);
/* TRUE while only the model's description is wanted (ksdist segment, the plan's check):
 * build the layer list, load no data. */
gboolean ks_trainer_describing (const KsTrainer *t);
/* The job's role maker and the mode's algorithm (NULL for one process alone or a
 * pipeline): a task with sparse tables reaches the servers through them. */
KsRoleMaker *ks_trainer_role (const KsTrainer *t);
KsAlgorithm *ks_trainer_algorithm (const KsTrainer *t);
/* The communicator of the whole job (NULL alone). */
KsComm *ks_trainer_comm (const KsTrainer *t);
/* Whether the executor is the pipeline ([pipeline]). */
gboolean ks_trainer_pipelined (const KsTrainer *t);
/* The model (a pipeline's: this stage's), its loss and logits (NULL on a pipeline). */
KsModel *ks_trainer_model (const KsTrainer *t);
KsExpr *ks_trainer_loss (const KsTrainer *t);
KsExpr *ks_trainer_logits (const KsTrainer *t);

/* A long phase of the task's own (an evaluation over many tasks, say): `done` of
 * `total` `what` are done. Told to the observers' on_progress (KsTrainProgress); the
 * default prints it on a terminal only, one line that updates with the count and the
 * time left. */
void ks_trainer_progress (KsTrainer *t, const char *what, gsize done, gsize total);

/* Builds the task's layer list with its loss and metric layers (metric's build may be
 * NULL): one model, or this worker's pipeline stage, cut by [pipeline] seg_method
 * (*metric_out NULL there: ks_trainer_metric asks the pipeline). Initialised. The
 * arrays must outlive the trainer. */
gboolean ks_trainer_build_layers (KsTrainer *t, const KsLayerDesc *layers, gsize n,
                                  const KsLayerDesc *loss, const KsLayerDesc *metric,
                                  KsExpr **metric_out, GError **error);
/* A model of the task's own, not a layer list (one model only: not pipelined). The
 * trainer owns it from here, also when this fails. Then its loss, and the logits an
 * export computes (may be NULL: then nothing exports), with ks_trainer_set_loss. */
gboolean ks_trainer_set_model (KsTrainer *t, KsModel *model, GError **error);
void ks_trainer_set_loss (KsTrainer *t, KsExpr *loss, KsExpr *logits);
/* A model the task keeps and frees itself in its clear (a task with a step of its own);
 * one model only, as ks_trainer_set_model. */
gboolean ks_trainer_use_model (KsTrainer *t, KsModel *model, GError **error);
/* The data a step feeds (copied; the buffers they point at stay the task's and are
 * read at each step), and the names of the inputs an export computes logits from. */
void ks_trainer_set_feeds (KsTrainer *t, const KsFeed *feeds, gsize n);
const KsFeed *ks_trainer_feeds (const KsTrainer *t, gsize *n);
void ks_trainer_set_inputs (KsTrainer *t, const char *const *inputs);
/* Tokens in each row (the metrics' tokens/s); 0 for none. */
void ks_trainer_set_tokens_per_row (KsTrainer *t, gsize tokens);
/* One batch's metric on any executor: the model's `metric`, or the pipeline's. A
 * non-finite value is an error. */
gboolean ks_trainer_metric (KsTrainer *t, const KsFeed *feeds, gsize n_feeds, KsExpr *metric,
                            double *value, GError **error);
/* One batch's metric of `n` values (one a row, say: a binary model's probabilities for an
 * AUC) into `values` (host floats), on any executor: the model's `metric`, or the
 * pipeline's last stage's, micro-batch after micro-batch, on every stage. */
gboolean ks_trainer_metric_values (KsTrainer *t, const KsFeed *feeds, gsize n_feeds,
                                   KsExpr *metric, float *values, gsize n, GError **error);

/* The sum over the batch's first `rows` rows of a metric that is a mean of per-row values
 * (an accuracy, a mean loss), so that a held-out set's last, partial batch is scored
 * without counting the rows past `rows`, whatever they hold. Every feed must be
 * batch-major (its bytes a multiple of ks_trainer_batch's rows). rows = batch: the metric
 * times the batch. Fewer: the batch runs twice (the rows past `rows` as copies of row 0,
 * then every row as row 0) and the copies' share is taken out; exact to float rounding,
 * as the rows of a batch are scored independently in evaluation mode. */
gboolean ks_trainer_metric_sum (KsTrainer *t, const KsFeed *feeds, gsize n_feeds,
                                KsExpr *metric, gsize rows, double *sum, GError **error);

/* [train] eval_rows: the most held-out rows (a language model's: windows) an evaluation
 * scores, its first ones; 0 for all. A task that scores fewer than it holds out says how
 * many it holds, in its unit (the count `evaluate` returns in *samples), with
 * ks_trainer_set_eval_total in each evaluation, and the trainer prints "N of M". */
gsize ks_trainer_eval_cap (const KsTrainer *t);
void ks_trainer_set_eval_total (KsTrainer *t, gsize total);

/* The model's layer list (ksdist segment): the task built with describing on. */
const KsLayerDesc *ks_trainer_layers (const KsTrainer *t, gsize *n, const KsLayerDesc **loss);
/* Builds the task to describe it (no data, no communication); the trainer can then be
 * asked about the layers and freed, not run. */
gboolean ks_trainer_describe (KsTrainer *t, GError **error);
/* The layers' names and parameter counts, cut by [pipeline] seg_method into stages x
 * virtual_stages parts (boundaries has one more entry); with seg_method cost,
 * *measured and each layer's measured cost. */
gboolean ks_trainer_segment (KsTrainer *t, KsLayerInfo *info, gsize *boundaries,
                             gboolean *measured, GError **error);
/* The task's description (its describe, else its name). */
const char *ks_trainer_task_describe (KsTrainer *t);

G_END_DECLS

#endif
