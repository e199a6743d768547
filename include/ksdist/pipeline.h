/* ksdist — pipeline schedules as data: per stage, the list of instructions one training
 * step runs (forward and backward of a micro-batch on a model chunk, the activation and
 * gradient transfers between stages, the tied-gradient reduction and the optimizer step).
 * One executor runs them; a simulator predicts their idle time (the bubble).
 *
 * With p stages and v virtual stages the layers are cut into p·v chunks; global chunk g
 * lives on stage g mod p as its local chunk g / p, and micro-batches flow through global
 * chunks 0 .. p·v − 1 (segmenter.h). */
#ifndef KSDIST_PIPELINE_H
#define KSDIST_PIPELINE_H

#include <glib.h>

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

G_END_DECLS

#endif
