/* ksdist — tensors and arenas.
 *
 * For program, task and plugin authors who handle tensors and parameter arenas.
 *
 * A tensor is a typed, shaped block of a compute backend's memory (up to 8 dims,
 * row-major). An arena holds many float32 tensors in one contiguous buffer with a table
 * of offsets (llm.c's malloc_and_point_parameters): parameters, their gradients and the
 * optimizer state each live in one arena of the same layout, so a whole gradient set is
 * one buffer to allreduce or shard. */
#ifndef KSDIST_TENSOR_H
#define KSDIST_TENSOR_H

#include <ksdist/compute.h>

G_BEGIN_DECLS

#define KS_TENSOR_MAX_DIMS 8

typedef struct {
  KsDType dtype;
  int ndim;                          /* 0 for a scalar */
  gint64 shape[KS_TENSOR_MAX_DIMS];
  gsize numel;
  void *data;                        /* device memory of `compute` */
  KsCompute *compute;
  gboolean owns_data;                /* FALSE for a view into an arena */
} KsTensor;

/* A tensor of zeros. Fails for a bad shape (a dimension < 1, more than 8 dims, a size
 * that overflows) or when the backend cannot allocate. */
KsTensor *ks_tensor_new (KsCompute *compute, KsDType dtype, int ndim, const gint64 *shape,
                         GError **error);
void ks_tensor_free (KsTensor *tensor);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsTensor, ks_tensor_free)

gsize ks_tensor_nbytes (const KsTensor *tensor);
/* "[2, 3]"; "[]" for a scalar */
char *ks_tensor_shape_string (const KsTensor *tensor);
/* Checks a shape; `numel` gets the element count. */
gboolean ks_shape_check (int ndim, const gint64 *shape, gsize *numel, GError **error);

/* Host copies of the whole tensor; `nbytes` must equal ks_tensor_nbytes. */
gboolean ks_tensor_from_host (KsTensor *tensor, const void *src, gsize nbytes, GError **error);
gboolean ks_tensor_to_host (const KsTensor *tensor, void *dst, gsize nbytes, GError **error);

typedef struct KsArena KsArena;

/* An empty float32 arena; declare its tensors, then allocate it once. */
KsArena *ks_arena_new (KsCompute *compute);
void ks_arena_free (KsArena *arena);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsArena, ks_arena_free)

/* Declares a tensor; names are unique; only before ks_arena_allocate. */
gboolean ks_arena_add (KsArena *arena, const char *name, int ndim, const gint64 *shape,
                       GError **error);
/* Allocates the buffer (zeroed). Each tensor starts on a 64-byte boundary; the padding
 * between tensors is zero and stays zero under elementwise updates. */
gboolean ks_arena_allocate (KsArena *arena, GError **error);
/* Moves the buffer's contents into `memory` (host memory of ks_arena_numel floats, for a
 * backend that computes in host memory) and uses it from now on, without ever freeing
 * it: its owner keeps it alive as long as the arena. Views taken before stay on the old
 * buffer, so move an arena before anything takes views of it (a model's gradients:
 * before its backward is built). */
gboolean ks_arena_move (KsArena *arena, float *memory, GError **error);
/* A new allocated arena with the same layout (for gradients or optimizer state). */
KsArena *ks_arena_new_like (const KsArena *layout, GError **error);

gsize ks_arena_count (const KsArena *arena);
/* The whole buffer and its length in floats, padding included (NULL before allocate). */
float *ks_arena_data (const KsArena *arena);
gsize ks_arena_numel (const KsArena *arena);
/* The tensor called `name` (a view into the buffer), or NULL; by index in declaration
 * order with ks_arena_tensor_at. Offsets are in floats from the start of the buffer. */
const KsTensor *ks_arena_tensor (const KsArena *arena, const char *name);
const KsTensor *ks_arena_tensor_at (const KsArena *arena, gsize index, const char **name,
                                    gsize *offset);

G_END_DECLS

#endif
