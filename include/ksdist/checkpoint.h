/* ksdist — checkpoints: a model's parameters and its optimizer's state.
 *
 * For programs that save or load a model outside the trainer, and modes that write their
 * own checkpoints; trainer.h users need not include it.
 *
 * A checkpoint is a directory DIR/checkpoint-<step>/ holding model.safetensors: the
 * parameters under their names, and in the header's __metadata__ the format
 * ("ksdist-checkpoint"), its version, the step, the model's dropout counter (rng_state,
 * restored on load), the file's seal (a SHA-256 of all of it, below), the save's identity
 * (save_id, the same in every file of one save) and the caller's own entries; and beside
 * it optimizer.safetensors: the optimizer's state as optim.<i>.<name>, the optimizer, its
 * step and the weights file's seal (model_sha256).
 * Other tools read the weights as plain safetensors. It is written under a temporary name, fsynced, then
 * renamed, so a crash leaves the previous checkpoints and no half-written one. */
#ifndef KSDIST_CHECKPOINT_H
#define KSDIST_CHECKPOINT_H

#include <ksdist/model.h>

G_BEGIN_DECLS

#define KS_CHECKPOINT_ERROR (ks_checkpoint_error_quark ())
GQuark ks_checkpoint_error_quark (void);

typedef enum {
  KS_CHECKPOINT_ERROR_IO,       /* cannot read, write, rename */
  KS_CHECKPOINT_ERROR_FORMAT,   /* not a ksdist checkpoint, another version, bad header */
  KS_CHECKPOINT_ERROR_CORRUPT,  /* truncated, or the data does not match its checksum */
  KS_CHECKPOINT_ERROR_MISMATCH, /* a tensor missing or of another shape than the model's */
} KsCheckpointError;

/* Saves `model` and (unless NULL) `optimizer`'s state at `step`, with `metadata` (string
 * to string, may be NULL), then removes all but the newest `keep` checkpoints of DIR
 * (keep 0: remove none). */
gboolean ks_checkpoint_save (const char *dir, gint64 step, KsModel *model,
                             KsOptimizer *optimizer, GHashTable *metadata, guint keep,
                             GError **error);

/* Checks the `len` bytes of a safetensors file read from `file` by the whole format: an
 * 8-byte header length that fits, a header that is a JSON object from its first byte,
 * tensors of known dtypes whose shapes and data_offsets cover the data exactly (no
 * overlap, gap or trailing byte), and metadata that maps strings to strings. Sets
 * *header_len; the error (KS_CHECKPOINT_ERROR) names the file and the rule. Every
 * safetensors file ksdist reads passes this first. */
gboolean ks_safetensors_check (const char *file, const char *bytes, gsize len,
                               guint64 *header_len, GError **error);

/* A float32 tensor to write: its name, shape and `numel` floats at `data` (host). */
typedef struct {
  const char *name;
  int ndim;
  gint64 shape[KS_TENSOR_MAX_DIMS];
  gsize numel;
  const float *data;
} KsSafetensor;

/* Writes the safetensors file `path` (every ksdist writer does it here): a header of the
 * `n` tensors in order, their data back to back, and `metadata` (string to string, may
 * be NULL) as __metadata__, padded with spaces to 8 bytes; with `seal` sealed (below),
 * *digest (unless NULL) receiving the seal. It is written into a new file beside `path`
 * (created exclusively, no link followed), fsynced and renamed over `path`, so a crash
 * leaves the old file or the new one, never half of one. */
gboolean ks_safetensors_write (const char *path, const KsSafetensor *tensors, gsize n,
                               GHashTable *metadata, gboolean seal, char **digest,
                               GError **error);

/* Sealed files: a safetensors file whose __metadata__ holds "sha256": the SHA-256 of the
 * whole file (length, header, data) computed with those 64 digits as '0'. */
#define KS_SEAL_KEY "sha256"
/* The metadata key of the save a checkpoint's file is of: the same in every file of one
 * save (see ks_checkpoint_begin), another in each save. */
#define KS_CHECKPOINT_SAVE_KEY "save_id"
/* Writes the digest into `json` (the header, `json_len` bytes, holding "sha256":"0…0"
 * once) for the data `chunks`; FALSE when the header has no such place. */
gboolean ks_seal_fill (char *json, gsize json_len, const guint8 *const *chunks,
                       const gsize *chunk_lens, gsize n_chunks);
/* Whether a whole file's `len` bytes match `want`, the sealed digest its header gives. */
gboolean ks_seal_matches (const char *bytes, gsize len, const char *want);

/* Makes a file, or a directory's entries, durable; an error names the path. */
gboolean ks_checkpoint_fsync (const char *path, GError **error);
/* Removes a directory and everything below it (no symlink followed). */
void ks_checkpoint_remove_all (const char *dir);

/* A hidden name in `parent` for a directory `base` being written by this process:
 * PARENT/<prefix><base>@HOST-PID, so a later writer can tell one whose writer is gone. */
char *ks_checkpoint_temporary_name (const char *parent, const char *prefix, const char *base);
/* Removes the directories ks_checkpoint_temporary_name made with `prefix` in `parent`
 * (and their ".old" copies) whose process on this host is gone (a killed writer). */
void ks_checkpoint_remove_stale (const char *parent, const char *prefix);

/* Checkpoints written in parts, one per process (a pipeline's stages, see
 * ks_pipeline_save_checkpoint): one process begins the directory `final` under a
 * temporary name (returned), each writes its part into it, stage-<part>-of-<parts>
 * .safetensors (model.safetensors when parts is 1), leaving out the parameters named in
 * `skip` (NULL-terminated, may be NULL: a shared one another part holds) and their state;
 * once every part is written the first commits: fsync, rename to `final` (one already
 * there is replaced whole, in one atomic step where the file system can), then keep the
 * newest `keep` checkpoints of its directory (0: all). Every directory ksdist writes
 * whole (a parameter-server job's checkpoint too) is committed so. Each part records the save's
 * identity, which follows from the temporary directory's name (random for each begin), so
 * the parts of one save must be written into the directory begin returned, under the name
 * it returned. ks_checkpoint_load reads either form into any model whose tensors the files
 * hold: a pipeline's parts into one process, a whole checkpoint into each stage; a file of
 * another save beside them is refused. Abort removes an unfinished directory. */
char *ks_checkpoint_begin (const char *final, GError **error);
gboolean ks_checkpoint_write_part (const char *tmp, int part, int parts, gint64 step,
                                   KsModel *model, KsOptimizer *optimizer,
                                   GHashTable *metadata, const char *const *skip,
                                   GError **error);
gboolean ks_checkpoint_commit (const char *tmp, const char *final, guint keep, GError **error);
void ks_checkpoint_abort (const char *tmp);
/* The identity of the save being written into `tmp` (a directory ks_checkpoint_begin
 * returned): what every part records as save_id. Any process told the directory computes
 * the same (a new string); another begin gives another. */
char *ks_checkpoint_save_id (const char *tmp);
/* For a process that writes into a directory another process names (a parameter
 * server, told by a request): whether `tmp` is a directory ks_checkpoint_begin made for
 * checkpoint-<step> directly in `dir` (links resolved), not a link, not a committed
 * checkpoint; FALSE with an error naming it otherwise. */
gboolean ks_checkpoint_check_temporary (const char *dir, const char *tmp, gint64 step,
                                        GError **error);

/* The newest checkpoint directory under `dir`, or NULL when there is none. */
char *ks_checkpoint_latest (const char *dir);

/* Loads a checkpoint directory into an initialised model and (unless NULL) optimizer.
 * Every tensor is checked (present, float32, the model's shape, data matching the
 * checksum) before anything is changed, so a bad file leaves the model as it was.
 * `step` and `metadata` (new hash table, may be NULL) receive what was saved. */
gboolean ks_checkpoint_load (const char *path, KsModel *model, KsOptimizer *optimizer,
                             gint64 *step, GHashTable **metadata, GError **error);

/* The __metadata__ of a checkpoint directory (a new string table), without loading it. */
GHashTable *ks_checkpoint_metadata (const char *path, GError **error);

/* A tensor of a checkpoint's weights, read without a model: float32 on the host. */
typedef struct {
  char *name;
  int ndim;
  gint64 shape[KS_TENSOR_MAX_DIMS];
  gsize numel;
  float *data;
} KsSavedTensor;
void ks_saved_tensor_free (KsSavedTensor *tensor);

/* The weights of a checkpoint or inference model directory (a pipeline's parts merged,
 * a shared tensor once), each file checked as a load checks it, in file order: a new
 * array of KsSavedTensor. */
GPtrArray *ks_checkpoint_read_tensors (const char *path, GError **error);

/* The F32 tensors of any safetensors file (one PyTorch wrote, say), checked by the whole
 * format (ks_safetensors_check; no seal needed): a new array of KsSavedTensor. */
GPtrArray *ks_safetensors_read (const char *path, GError **error);
/* A task's PyTorch names (KsTrainTask.torch_name): the whole name for the parameter
 * `base` (its ksdist name less ".w", ".b", ".gamma", ".beta") and PyTorch's `suffix` for
 * it (".weight", ".bias", or "" for none). A new string. */
typedef char *(*KsTorchNameFunc) (const char *base, const char *suffix);
/* PyTorch's name for the ksdist parameter `name` (weight, bias), through `rename` (the
 * task's; NULL: BASE SUFFIX); *transpose when it is a matmul's [in, out] weight, which
 * nn.Linear holds as [out, in]. What `ksdist export --torch` writes. */
char *ks_torch_name (const char *name, KsTorchNameFunc rename, gboolean *transpose);
/* The metadata key of a checkpoint's or export's ks_model_torch_layouts. */
#define KS_TORCH_LAYOUT_KEY "torch_layout"
/* The parameters of `model` that PyTorch orders otherwise (a conv2d's kernel, the linear
 * layer after a flatten of images): one line each, "NAME A B C NDIM" for a weight of
 * [A * B * C, out] in ksdist's (A, B, C) order that PyTorch holds as [out, C, A, B]
 * (NDIM 4) or [out, C * A * B] (NDIM 2). A new string. */
char *ks_model_torch_layouts (KsModel *model);
/* How the ksdist weight `name` of `ndim` dimensions, `shape`, is laid out in PyTorch,
 * from `layouts` (ks_model_torch_layouts' text, may be NULL) and whether it is
 * transposed (ks_torch_name): torch_shape and its dimension count, and what
 * ks_torch_permute needs. */
typedef struct {
  gint64 a, b, c, out; /* ksdist's [a * b * c, out] in (a, b, c) order */
  int ndim;            /* PyTorch's: 0 when it is ksdist's own layout */
  gint64 shape[KS_TENSOR_MAX_DIMS];
} KsTorchLayout;
void ks_torch_layout (const char *layouts, const char *name, gboolean transpose, int ndim,
                      const gint64 *shape, KsTorchLayout *out);
/* `n` floats from ksdist's layout to PyTorch's (to_torch) or back, into `dst`. */
void ks_torch_permute (const KsTorchLayout *layout, const float *src, float *dst,
                       gboolean to_torch);
/* Sets every parameter of an initialised `model` from `tensors` (KsSavedTensor, read from
 * `file`): each found under its own name and layout, or under ks_torch_name's in
 * PyTorch's layout (ks_torch_layout of the model's ks_model_torch_layouts) turned back.
 * A parameter with no tensor, or one of another shape, is an error naming both, found before any parameter changes. The names of the tensors used
 * are added to `used` (may be NULL), so a caller can refuse those left over. */
gboolean ks_model_load_weights (KsModel *model, GPtrArray *tensors, const char *file,
                                KsTorchNameFunc rename, GHashTable *used, GError **error);

/* The metadata key of an inference model's graph: a checkpoint without it is not one. */
#define KS_INFERENCE_GRAPH_KEY "inference_graph"

/* Saves an inference model as the directory `dir` (replaced whole; written under a
 * temporary name, fsynced, renamed): the ops `targets` need, computed from the data named
 * in `feeds` (NULL-terminated), with their parameters, in DIR/model.safetensors, the graph
 * as JSON in its metadata. Ops the targets do not need are left out. An error when the
 * targets need data not among the feeds, or a gradient. */
gboolean ks_save_inference_model (const char *dir, KsModel *model, const char *const *feeds,
                                   KsExpr *const *targets, gsize n_targets, GError **error);
/* The same with `metadata` (string to string, may be NULL) in the file's __metadata__. */
gboolean ks_save_inference_model_with_metadata (const char *dir, KsModel *model,
                                                const char *const *feeds,
                                                KsExpr *const *targets, gsize n_targets,
                                                GHashTable *metadata, GError **error);

/* Loads an inference model onto `compute`: a new initialised model in evaluation mode,
 * runnable without the program or config that built it. *feeds and *targets (either may
 * be NULL) receive the names to feed and to compute (new NULL-terminated arrays); find
 * the expressions with ks_model_find. A damaged file or graph is an error naming the
 * file, and the op or tensor. */
KsModel *ks_load_inference_model (const char *dir, KsCompute *compute, char ***feeds,
                                  char ***targets, GError **error);

/* The same, built for `batch` rows at a time (0: the batch it was saved with): every op
 * computed from the feeds has the saved batch in its first dimension ([batch, ...], or a
 * GPT's [batch * context]) and is built with `batch` there. A graph that moves the batch
 * elsewhere or reduces over it runs only with its own batch: an error naming the op. */
KsModel *ks_load_inference_model_with_batch (const char *dir, KsCompute *compute,
                                             gint64 batch, char ***feeds, char ***targets,
                                             GError **error);

G_END_DECLS

#endif
