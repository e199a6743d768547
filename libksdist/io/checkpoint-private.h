/* The checkpoint files' insides, shared by checkpoint.c (reading and checking),
 * checkpoint-write.c (writing a save's files) and checkpoint-dir.c (a directory's life:
 * begin, commit, prune, stale temporaries). */
#ifndef KS_CHECKPOINT_PRIVATE_H
#define KS_CHECKPOINT_PRIVATE_H

#include "ks-private.h"

#pragma GCC visibility push(hidden)

#define CHECKPOINT_FORMAT "ksdist-checkpoint"
/* 2: the SHA-256 covers the whole file (header and data) with its own value zeroed;
 * 1 (still read): it covered the data only */
#define CHECKPOINT_VERSION "2"
#define SHA_KEY KS_SEAL_KEY
#define OLD_SHA_KEY "data_sha256"
#define SHA_HEX 64
#define FILE_NAME "model.safetensors"
/* the optimizer's state beside the weights: optimizer.safetensors, or a stage's
 * optimizer-stage-<s>-of-<n>.safetensors; it names the weights file it goes with */
#define OPTIM_FILE "optimizer.safetensors"
#define OPTIM_PREFIX "optimizer-"
#define MODEL_SEAL_KEY "model_sha256"
#define PART_PREFIX "stage-" /* stage-<s>-of-<n>.safetensors: a pipeline stage's part */
#define MAX_PARTS 4095
#define PREFIX "checkpoint-"
/* every file of one save names it: the parts of a pipeline are written by several
 * processes, and a part copied from another save must not pass for this one's */
#define SAVE_KEY KS_CHECKPOINT_SAVE_KEY
/* the largest step or optimizer step a checkpoint may give: far beyond any run, far from
 * overflowing the arithmetic done with it */
#define MAX_STEP (G_GINT64_CONSTANT (1) << 53)
/* the most model runs one step makes ([pipeline] micro_batches' largest; one otherwise):
 * rng_state counts the runs that drew dropout masks, so it is at most step times this */
#define MAX_RUNS_PER_STEP 65535

/* One tensor of the file: its name and where its floats are in the model. */
typedef struct {
  char *name;
  const KsTensor *tensor;
} Entry;

/* The parameters (with `params_too`) and the optimizer's state (unless `optimizer` is
 * NULL) of a checkpoint, in a fixed order, those named in `skip` left out. */
GArray *ks_checkpoint_entries (KsModel *model, gboolean params_too, KsOptimizer *optimizer,
                               const char *const *skip, gint64 **step, GError **error);
/* The weights file of part `part` of `parts` (model.safetensors for a whole checkpoint),
 * and its optimizer's state file. */
char *ks_checkpoint_part_file (int part, int parts);
char *ks_checkpoint_optim_file (int part, int parts);

/* checkpoint.c: the F32 tensors of one checked safetensors file (header parsed), in
 * file order, appended to `tensors` (KsSavedTensor) unless `seen` has the name. */
gboolean ks_saved_tensors_append (const char *file, const char *bytes, guint64 header_len,
                                  JsonObject *header, GHashTable *seen, GPtrArray *tensors,
                                  GError **error);

#pragma GCC visibility pop

#endif
