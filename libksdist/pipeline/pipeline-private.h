/* The pipeline executor's insides, shared by its files: pipeline.c (building a stage and
 * its transfers), pipeline-run.c (a step's program), pipeline-trace.c and
 * pipeline-save.c (each stage's checkpoint part). */
#ifndef KS_PIPELINE_PRIVATE_H
#define KS_PIPELINE_PRIVATE_H

#include "model/model-private.h"

#include <ksdist/pipeline.h>

#pragma GCC visibility push(hidden)

/* the skip kinds name their route where the others name a chunk */
enum { TAG_ACTIVATION = 1, TAG_GRADIENT, TAG_SHAPE, TAG_SHARED_INIT, TAG_SHARED_GRAD, TAG_TRACE,
       TAG_SKIP_SHAPE, TAG_SKIP_VALUE, TAG_SKIP_GRAD, TAG_CHECKPOINT, TAG_CHECKPOINT_DONE };


typedef struct {
  gint64 ndim, shape[KS_TENSOR_MAX_DIMS];
} ShapeMessage;

/* A chunk's end of a skip connection to another chunk. */
typedef struct {
  int route;              /* index in the pipeline's routes */
  int peer;               /* the stage of the other end */
  KsExpr *expr;           /* stashing end: the stashed value; popping end: its data */
  gsize numel;
  float *value, *grad;    /* per micro-batch, on the host */
  ShapeMessage shape;     /* stashing end: sent to the popping end at build time */
} SkipEnd;

typedef struct {
  int global;             /* its global chunk */
  guint first, n;         /* its expressions */
  KsExpr *input;          /* "pipe.in.<global>": the previous chunk's output; NULL for 0 */
  KsExpr *out;            /* what goes on to the next chunk; the loss on the last one */
  KsExpr *metric;         /* on the last chunk, when a metric was given */
  gboolean *kept;         /* with recompute: the expressions a stash keeps */
  KsStash **stash;        /* per micro-batch, between its forward and its backward */
  GPtrArray *spare;       /* stashes holding tensors free for the next forward */
  gsize in_numel, out_numel;
  float *act_in, *act_out, *grad_in, *grad_out; /* per micro-batch, on the host */
  GPtrArray *skip_out, *skip_in; /* SkipEnd: values this chunk stashes and pops */
  int backwards;          /* done this step: the m-th leaves its gradients final */
} Chunk;

typedef struct {
  char *name;
  int owners[64], n_owners; /* stages with a layer sharing it, ascending */
} Shared;

typedef struct {
  KsPipeInstr instr;
  gint64 start, end; /* monotonic microseconds */
} Event;

struct KsPipeline {
  KsCompute *compute;
  KsComm *comm;
  KsComm *data;         /* this stage's data-parallel group (other replicas); may be NULL */
  KsGradAverage *replicas; /* with data: averaging over them */
  gboolean overlap;        /* each bucket while backward goes on */
  double clip_norm;     /* > 0: gradients clipped by their norm over every stage */
  int stage, p, v, m, recompute;
  KsSchedule *schedule;
  KsModel *model;
  Chunk *chunks;        /* the v local chunks */
  KsSkipRoute *routes;  /* the skip layout */
  gsize n_routes;
  GArray *shared;       /* Shared, by name */
  GHashTable *mailbox;  /* tag -> GBytes: transfers from this stage to itself */
  GPtrArray *pending;   /* KsCommRequest of sends still in flight */
  GHashTable *posted;   /* tag -> KsCommRequest of a receive posted at the step's start */
  gint64 steps;
  double busy, wall; /* seconds in forwards and backwards, and in steps up to the last one */
  GArray *events;    /* Event, when recording */
};

static inline guint32
tag_of (int kind, int chunk, int micro_batch)
{
  return (guint32) kind << 28 | (guint32) chunk << 16 | (guint32) micro_batch;
}

/* Whether this stage owns shared parameter `s`, and it is shared with another stage. */
static inline gboolean
exchanges (const KsPipeline *pl, const Shared *s)
{
  gboolean mine = FALSE;
  for (int i = 0; i < s->n_owners; i++)
    mine |= s->owners[i] == pl->stage;
  return mine && s->n_owners > 1;
}

/* pipeline.c: completes every send in flight (their buffers are reused by the next step) */
gboolean ks_pipe_drain (KsPipeline *pl, GError **error);
/* pipeline.c: completes every receive posted and not waited for (after a failure) */
void ks_pipe_cancel_posted (KsPipeline *pl);
/* pipeline.c: a transfer to or from stage `peer` (to itself: through the mailbox) */
gboolean ks_pipe_send (KsPipeline *pl, const void *buf, gsize nbytes, int peer, guint32 tag,
                       GError **error);
gboolean ks_pipe_recv (KsPipeline *pl, void *buf, gsize nbytes, int peer, guint32 tag,
                       GError **error);

#pragma GCC visibility pop

#endif
