/* ksdist — pipeline schedules as data: per stage, the list of instructions one training
 * step runs (forward and backward of a micro-batch on a model chunk, the activation and
 * gradient transfers between stages, the tied-gradient reduction and the optimizer step).
 * One executor runs them; a simulator predicts their idle time (the bubble).
 *
 * For program and task authors who give the trainer a layer list (KsLayerDesc) to cut into
 * stages, and the pipeline executor.
 *
 * With p stages and v virtual stages the layers are cut into p·v chunks; global chunk g
 * lives on stage g mod p as its local chunk g / p, and micro-batches flow through global
 * chunks 0 .. p·v − 1 (segmenter.h). */
#ifndef KSDIST_PIPELINE_H
#define KSDIST_PIPELINE_H

#include <ksdist/comm.h>
#include <ksdist/model.h>
#include <ksdist/segmenter.h>

G_BEGIN_DECLS

typedef enum {
  KS_SCHEDULE_FTHENB = 0,      /* GPipe: every forward, then every backward */
  KS_SCHEDULE_1F1B = 1,        /* warm-up forwards, then one forward one backward */
  KS_SCHEDULE_INTERLEAVED = 2, /* 1F1B over v chunks per stage (Megatron) */
} KsScheduleKind;

typedef enum {
  KS_PIPE_FORWARD = 0,
  KS_PIPE_BACKWARD = 1,
  KS_PIPE_SEND_ACTIVATION = 2, /* to the stage of the next chunk */
  KS_PIPE_RECV_ACTIVATION = 3, /* from the stage of the previous chunk */
  KS_PIPE_SEND_GRADIENT = 4,   /* to the stage of the previous chunk */
  KS_PIPE_RECV_GRADIENT = 5,   /* from the stage of the next chunk */
  KS_PIPE_REDUCE_TIED = 6,     /* allreduce shared layers' gradients among their stages */
  KS_PIPE_OPTIMIZER_STEP = 7,
} KsPipeOp;

typedef struct {
  KsPipeOp op;
  int micro_batch; /* -1 for the reduction and the step */
  int chunk;       /* local chunk (virtual stage) on this stage; -1 as above */
  int peer;        /* the other stage of a transfer; -1 otherwise */
} KsPipeInstr;

typedef struct {
  KsScheduleKind kind;
  int stages, virtual_stages, micro_batches;
  GArray **program; /* per stage: KsPipeInstr, in execution order */
} KsSchedule;

/* "fthenb", "1f1b", "interleaved" */
const char *ks_schedule_kind_name (KsScheduleKind kind);
gboolean ks_schedule_kind_from_name (const char *name, KsScheduleKind *kind);

/* The schedule of `kind` for p stages, v virtual stages and m micro-batches. FThenB and
 * 1F1B take v = 1; interleaved needs v >= 2 and m a multiple of p (each round sends p
 * micro-batches through a chunk); an error says which requirement failed. */
KsSchedule *ks_schedule_new (KsScheduleKind kind, int stages, int virtual_stages,
                             int micro_batches, GError **error);
void ks_schedule_free (KsSchedule *schedule);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsSchedule, ks_schedule_free)

/* "F3.1" (forward of micro-batch 3 on local chunk 1), "B0.0", "sa", "ra", "sg", "rg",
 * "tied", "step": one stage's program, space-separated (sends and receives as
 * "sa3.1>2": to stage 2). */
char *ks_schedule_describe_stage (const KsSchedule *schedule, int stage);
/* One instruction, as above. */
char *ks_schedule_describe_instr (const KsPipeInstr *instr);

typedef struct {
  double makespan;   /* from the first instruction to the last one ends */
  double busy;       /* compute time summed over stages */
  double bubble;     /* idle share: 1 - busy / (stages * makespan) */
} KsScheduleTiming;

/* Runs the programs against a clock: a forward of one chunk takes `forward` / v, a
 * backward `backward` / v, transfers `transfer` (sends never wait; a receive waits for its
 * send). An error names the stages that wait on each other if the programs deadlock. */
gboolean ks_schedule_simulate (const KsSchedule *schedule, double forward, double backward,
                               double transfer, KsScheduleTiming *timing, GError **error);

/* The bubble theory gives for equal stages: (p - 1) / (v m + p - 1). */
double ks_schedule_theoretical_bubble (int stages, int virtual_stages, int micro_batches);

/* ---- describing a pipelined model (Paddle's LayerDesc and SharedLayerDesc) ---- */

/* Adds one layer to `model`: x is the previous layer's output, NULL for the first layer,
 * which makes its own data (ks_model_data, shaped for one micro-batch). Returns the
 * layer's output. */
typedef KsExpr *(*KsLayerBuildFunc) (KsModel *model, KsExpr *x, gconstpointer args,
                                     GError **error);

typedef struct {
  const char *name;       /* the builder's name: what seg_method layer:<regex> matches */
  KsLayerBuildFunc build; /* run only on the stage that owns the layer */
  gconstpointer args;     /* the builder's arguments (not owned; must outlive the use) */
  /* A shared layer (SharedLayerDesc): the name of the parameter it shares with the other
   * layers naming it (made with ks_model_shared_parameter). On a pipeline it starts as
   * the lowest owning stage's and its gradient is summed over the owning stages. */
  const char *shared;
  /* Skip connections (torchgpipe's stash and pop), NULL-terminated lists or NULL: the
   * names the builder stashes with ks_layer_stash and pops with ks_layer_pop. Each name
   * is stashed by one layer and popped by exactly one later layer; on a pipeline the
   * tensor goes straight from the stashing stage to the popping one, and its gradient
   * back. A builder used twice qualifies its names by a namespace ("enc1/x"). */
  const char *const *stash;
  const char *const *pop;
} KsLayerDesc;

/* In a layer's builder: sets `value` (float32) aside under `name` for a later layer. */
gboolean ks_layer_stash (KsModel *model, const char *name, KsExpr *value, GError **error);
/* In a layer's builder: the value an earlier layer stashed under `name` (on a pipeline,
 * the data that receives it from the stashing chunk). */
KsExpr *ks_layer_pop (KsModel *model, const char *name, GError **error);

/* Measured cost per layer, for seg_method cost: builds `layers` and `loss` on one model
 * of `compute`, feeds every data zeros (dense ops take as long on any values) and runs
 * `steps` forwards and backwards after one to warm up; seconds[i] is layer i's mean
 * forward and backward time per step (the loss's counts with the last layer). */
gboolean ks_layers_profile (KsCompute *compute, const KsLayerDesc *layers, gsize n_layers,
                            const KsLayerDesc *loss, int steps, double *seconds,
                            GError **error);

/* One skip connection under a segmentation. */
typedef struct {
  const char *name;             /* the layer list's string */
  gsize stash_layer, pop_layer;
  int stash_chunk, pop_chunk;   /* global chunks */
} KsSkipRoute;

/* The skip layout of `layers` cut at `boundaries` (parts + 1 entries): every route in
 * the order of the stashing layers. An error names the layer when a name is popped but
 * no earlier layer stashes it, stashed but never popped, or stashed or popped twice.
 * Free *routes with g_free. */
gboolean ks_skip_layout (const KsLayerDesc *layers, gsize n_layers, const gsize *boundaries,
                         gsize parts, KsSkipRoute **routes, gsize *n_routes, GError **error);

/* The parameter `name`, made now (as ks_model_parameter) or the existing one when a
 * shared layer made it before; an error if that one has another shape. */
KsExpr *ks_model_shared_parameter (KsModel *model, const char *name, int ndim,
                                   const gint64 *shape, KsInit init, GError **error);

/* Builds every layer in order on one model (no pipeline); *out is the last output. */
gboolean ks_layers_build (KsModel *model, const KsLayerDesc *layers, gsize n_layers,
                          KsExpr **out, GError **error);
/* Each layer's name and parameter count (a shared parameter counts at its first layer),
 * for the segmenter, found by building the list on a model without a device. */
gboolean ks_layers_info (const KsLayerDesc *layers, gsize n_layers, KsLayerInfo *info,
                         GError **error);

/* ---- running a pipeline (Paddle's PipelineLayer and its executor) ---- */

typedef struct {
  int stages, virtual_stages, micro_batches;
  KsScheduleKind schedule;
  const gsize *boundaries; /* stages * virtual_stages + 1 entries (ks_segmenter_segment) */
  /* k > 0: a stage keeps only each k-th layer's output (and the chunk's inputs) of a
   * micro-batch between its forward and its backward, and recomputes the rest just
   * before the backward; 0 keeps every activation */
  int recompute_interval;
} KsPipelineShape;

typedef struct KsPipeline KsPipeline;

/* This stage's part of the pipeline: its chunks of `layers` on one model, with `loss`
 * (built on the last layer's output, making its labels' data) and `metric` (may have a
 * NULL build; built on the same output after the loss) on the last chunk. `comm` joins
 * the stages (rank = stage; NULL with one stage). Stages build their chunks in order,
 * each receiving the shape of its input from the stage before: call it on every stage. */
KsPipeline *ks_pipeline_new (KsCompute *compute, KsComm *comm, int stage,
                             const KsPipelineShape *shape, const KsLayerDesc *layers,
                             gsize n_layers, const KsLayerDesc *loss, const KsLayerDesc *metric,
                             GError **error);
void ks_pipeline_free (KsPipeline *pipeline);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsPipeline, ks_pipeline_free)
/* The stage's model: its parameters and gradients for the optimizer and checkpoints. */
KsModel *ks_pipeline_model (KsPipeline *pipeline);
/* Data parallel across pipelines (dp x pp): the communicators of a job of dp·pp ranks
 * laid out as Paddle's topology does, stages innermost (rank = replica · stages + stage):
 * *pipe joins this rank's pipeline (its rank there is its stage), *data the same stage of
 * every replica. Every rank calls it, with the same other sub-group calls before it. */
gboolean ks_pipeline_groups (KsComm *world, int stages, KsComm **pipe, KsComm **data,
                             GError **error);
/* Makes each step average this stage's gradients over `data` (the same stage of the other
 * replicas, each fed its own rows) before the update, and the reported loss over the
 * replicas; call it before ks_pipeline_init, which then starts every replica from
 * replica 0's parameters. NULL or a group of one: no data parallelism. */
void ks_pipeline_set_data_parallel (KsPipeline *pipeline, KsComm *data);
/* With data parallelism: TRUE (the default) averages a chunk's gradients in buckets
 * (average.h) on a communication thread while the backward goes on, once its last
 * micro-batch's backward has made them; FALSE averages every bucket after the last
 * backward. The same result either way. */
void ks_pipeline_set_overlap (KsPipeline *pipeline, gboolean overlap);
/* > 0: before each update, scales the gradients of every stage so that their global L2
 * norm (a shared parameter counted once) is at most `clip_norm`; the optimizer should not
 * clip on its own, by its stage's norm. 0: no clipping. */
void ks_pipeline_set_clip_norm (KsPipeline *pipeline, double clip_norm);
/* Initialises the model, then gives each shared parameter the value of its lowest
 * owning stage. */
gboolean ks_pipeline_init (KsPipeline *pipeline, GError **error);
/* One training step on a batch: `feeds` hold the whole batch (rows along the first
 * dimension, split in micro_batches equal parts); the stages run their programs, sum
 * shared gradients and let `optimizer` update their parameters from the gradients
 * (micro-batch means averaged). *loss (every stage) is the batch's mean loss. */
gboolean ks_pipeline_step (KsPipeline *pipeline, KsOptimizer *optimizer, const KsFeed *feeds,
                           gsize n_feeds, double *loss, GError **error);
/* The metric (else the loss), forward only, in evaluation mode, averaged over the
 * micro-batches of `feeds`; the same on every stage. */
gboolean ks_pipeline_evaluate (KsPipeline *pipeline, const KsFeed *feeds, gsize n_feeds,
                               double *value, GError **error);
/* The same forwards, but every value of the metric (one a row, say), the micro-batches'
 * one after another, `n` in all, into `values` (host floats) on every stage. */
gboolean ks_pipeline_evaluate_values (KsPipeline *pipeline, const KsFeed *feeds, gsize n_feeds,
                                      float *values, gsize n, GError **error);
/* The schedule this stage runs. */
const KsSchedule *ks_pipeline_schedule (const KsPipeline *pipeline);
/* Seconds this stage spent in forwards and backwards, and in steps from their start to
 * the end of their last backward, summed over the steps so far: 1 - busy / wall is the
 * stage's idle share (its bubble and transfer waits). */
void ks_pipeline_timing (const KsPipeline *pipeline, double *busy, double *wall);
/* Records every instruction's start and end from now on (off: forgets them). */
void ks_pipeline_record (KsPipeline *pipeline, gboolean on);
/* Every stage calls it: stage 0 gets *events (free with g_string_free), the recorded
 * instructions of all its pipeline's stages as Chrome trace events (chrome://tracing,
 * Perfetto), each led by ",\n", process `replica` (named so) with a track per stage; the
 * others get NULL. Wrapped in [ ] they are a trace file. The clocks are the machine's
 * monotonic clock, so stages on other hosts are not aligned. */
/* Every stage of the pipeline calls it: each writes its part of the checkpoint
 * DIR/checkpoint-STEP (checkpoint.h: its parameters and `optimizer`'s state, a shared
 * parameter only by the lowest stage holding it, with `metadata`) and stage 0 renames the
 * directory into place once every part is written, keeping the newest `keep`. When one
 * stage fails nothing is saved and every stage returns FALSE. */
gboolean ks_pipeline_save_checkpoint (KsPipeline *pipeline, KsOptimizer *optimizer,
                                      const char *dir, gint64 step, GHashTable *metadata,
                                      guint keep, GError **error);
/* Loads this stage's tensors from the checkpoint directory `path` (a pipeline's parts or a
 * whole checkpoint, whatever its stage count) and goes on from its step. */
gboolean ks_pipeline_load_checkpoint (KsPipeline *pipeline, KsOptimizer *optimizer,
                                      const char *path, gint64 *step, GHashTable **metadata,
                                      GError **error);
gboolean ks_pipeline_trace_events (KsPipeline *pipeline, int replica, GString **events,
                                   GError **error);

G_END_DECLS

#endif
