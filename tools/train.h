/* ksdist train: the trainer and the tasks it runs (train-tasks.c). */
#ifndef KS_TRAIN_H
#define KS_TRAIN_H

#include "cli.h"

#include <stdio.h>

typedef struct Trainer Trainer;

/* What a task does for the loop of cmd-train.c. */
typedef struct {
  const char *metric; /* of the held-out evaluation: "accuracy", "loss" */
  const char *unit;   /* what it counts: "samples", "tokens" */
  /* Makes t->model (initialised), t->loss and the task's data. */
  gboolean (*build) (Trainer *t, GError **error);
  /* Fills t->feeds with this worker's rows of `step`'s global batch (t->batch rows from
   * row t->rank * t->batch of t->batch * t->world); depends on nothing else, for bitwise
   * resume and for data parallelism that follows a one-process run. */
  void (*batch) (Trainer *t, gint64 step);
  gboolean (*evaluate) (Trainer *t, double *value, gsize *samples, GError **error);
  const char *(*describe) (Trainer *t);
  void (*clear) (Trainer *t);
  /* Entries for a checkpoint's metadata, so it can be used without the config (may be
   * NULL). */
  void (*metadata) (Trainer *t, GHashTable *metadata);
  /* The last epoch over the training data finished after `step` (-1: none); NULL for
   * data without epochs (windows drawn at random, generated samples). */
  gint64 (*last_epoch) (Trainer *t, gint64 step);
  /* May be NULL: after batch, before the step (the ctr task pulls the batch's sparse
   * rows), and after the step (it pushes their gradients). */
  gboolean (*prepare) (Trainer *t, gint64 step, GError **error);
  gboolean (*finish) (Trainer *t, gint64 step, GError **error);
} TrainTask;

struct Trainer {
  KsConfig *config;
  KsRegistry *registry;
  KsCompute *compute;
  KsModel *model;
  KsOptimizer *optimizer;
  KsExpr *loss;
  KsExpr *logits;              /* what an exported inference model computes ... */
  const char *const *inputs;   /* ... from these data (NULL-terminated) */
  gsize batch;
  KsFeed feeds[3];
  gsize n_feeds;
  gsize eval_samples;
  gsize tokens_per_row; /* a token task's window (tokens/s in the metrics), else 0 */
  const TrainTask *task;
  void *task_data;
  FILE *metrics;
  gboolean tty;
  /* data parallel (train-dist.c): this worker's rank among `world`; the rest NULL in a
   * one-process run */
  int rank, world;
  KsRoleMaker *role;
  KsStore *store;
  KsComm *comm;
  const char *comm_why; /* why this communicator: the setting, or auto's reason */
  KsAlgorithm *algorithm;
  /* pipeline parallel (train-pipeline.c): this worker's stage; the pipeline owns model;
   * with data parallel replicas (rank and world above count them) its pipeline's and its
   * stage's groups of comm, else NULL */
  int stage;
  KsComm *pipe_comm, *data_comm;
  KsPipeline *pipeline;
  double pipeline_loss; /* of the last step */
  /* ksdist segment: the task's layer list is only recorded, not built */
  gboolean describe_only;
  char *clip_norm_setting; /* [optim] clip_norm as set, when the pipeline clips instead */
  const KsLayerDesc *layers, *loss_layer;
  gsize n_layers;
};

/* A command that runs `body` on a trainer holding the [CONFIG] and --set lines of its
 * command line (train, segment); the trainer is cleared after. */
int ks_train_command (const KsCommand *command, int argc, char **argv,
                      int (*body) (Trainer *t));
/* train-check.c: checks what settings alone decide and, with `build`, builds what
 * `train` builds before training (task, compute, model, optimizer; train itself builds
 * them next), printing what it refuses; [optim] total_steps 0 becomes [train] steps.
 * Returns the exit status: 0, 2 for a configuration error, 1 otherwise. */
int ks_train_check (KsRegistry *registry, KsConfig *config, gboolean build);
/* Frees what a trainer holds (not its config and registry). */
void ks_trainer_clear (Trainer *t);
/* train-ctr.c */
extern const TrainTask ks_ctr_task;
/* The task of [model] type and [data] task; an error when they do not go together. */
const TrainTask *ks_train_task (const KsConfig *config, GError **error);
/* train-meet.c: where a job another launcher started meets (store kind, address, job
 * prefix, whether this rank serves the store); address NULL when nothing says. */
typedef struct {
  char *store, *address, *job;
  gboolean serve;
} KsMeeting;
gboolean ks_train_meeting (const char *job, gboolean rank0, KsMeeting *m, GError **error);
void ks_train_meeting_clear (KsMeeting *m);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (KsMeeting, ks_train_meeting_clear)
/* train-dist.c */
gboolean ks_train_dist_setup (Trainer *t, GError **error);
/* train-amp.c: [amp] on t->model (before minimize); a configuration error for a mode
 * that cannot take it */
gboolean ks_train_amp (Trainer *t, GError **error);
/* TRUE when [amp] is off; else the configuration error "[amp] dtype = X: `why`; set
 * [amp] dtype = off" (for a run that cannot take mixed precision) */
gboolean ks_train_amp_refused (const KsConfig *c, const char *why, GError **error);
/* ", matmuls in bfloat16" for the start line ("" when off), and the metrics' fields of
 * the loss scale (", \"loss_scale\": ..." or "") */
char *ks_train_amp_describe (Trainer *t);
char *ks_train_amp_fields (Trainer *t);

/* train-meta.c: the whole run of [meta] algorithm = reptile; the exit status */
int ks_train_meta (Trainer *t);
gboolean ks_train_dist_wrap (Trainer *t, GError **error);
gboolean ks_train_dist_mean (Trainer *t, double *value, GError **error);
void ks_train_dist_clear (Trainer *t);

/* train-pipeline.c */
/* Whether [pipeline] asks for more than one stage, chunk or micro-batch. */
gboolean ks_train_pipelined (const KsConfig *config);
/* The settings a pipelined run cannot honour, and the batch split; t->batch is set. */
gboolean ks_train_pipeline_check (Trainer *t, GError **error);
/* The rows a task's layers are built for: one micro-batch of t->batch. */
gsize ks_train_rows (const Trainer *t);
/* Builds a task's layer list with its loss and metric (metric's build may be NULL): on
 * t->model, setting t->loss, t->logits and *metric_out; or in a pipelined run this
 * worker's stage on t->pipeline (t->model its model, *metric_out NULL). Initialised. */
gboolean ks_train_build_layers (Trainer *t, const KsLayerDesc *layers, gsize n,
                                const KsLayerDesc *loss, const KsLayerDesc *metric,
                                KsExpr **metric_out, GError **error);
/* After a task's build: an error when a pipelined run (or ksdist segment) asked for a
 * task that gave no layer list. */
gboolean ks_train_has_layers (Trainer *t, GError **error);
/* The names and parameter counts of the task's layers (t->layers), and their cut by
 * [pipeline] seg_method into stages x virtual_stages parts (boundaries has one more
 * entry). With seg_method cost, *measured is TRUE and info has each layer's cost: the
 * first worker profiles the layers and tells the others, so all cut alike. */
gboolean ks_train_segment (Trainer *t, KsLayerInfo *info, gsize *boundaries,
                           gboolean *measured, GError **error);
/* The metric for one batch of `feeds`: the model's `metric`, or the pipeline's. */
gboolean ks_train_metric (Trainer *t, const KsFeed *feeds, gsize n_feeds, KsExpr *metric,
                          double *value, GError **error);

/* A scalar expression's value on the host (NaN and the error when it fails). */
float ks_train_scalar (KsExpr *e, GError **error);

#endif
