/* Tensors in a compute backend's memory, and float32 arenas with a table of offsets. */
#include "ks-private.h"

#include <string.h>

#define ARENA_ALIGN_FLOATS 16 /* 64 bytes */

gboolean
ks_shape_check (int ndim, const gint64 *shape, gsize *numel, GError **error)
{
  gsize n = 1;

  if (ndim < 0 || ndim > KS_TENSOR_MAX_DIMS)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "a tensor has 0 to %d dimensions, not %d", KS_TENSOR_MAX_DIMS, ndim);
      return FALSE;
    }
  for (int i = 0; i < ndim; i++)
    {
      if (shape[i] < 1)
        {
          g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                       "dimension %d of a tensor is %" G_GINT64_FORMAT "; each must be at "
                       "least 1", i, shape[i]);
          return FALSE;
        }
      if (n > G_MAXSIZE / 8 / (guint64) shape[i])
        {
          g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                       "a tensor of that shape would not fit in memory (dimension %d = %"
                       G_GINT64_FORMAT ")", i, shape[i]);
          return FALSE;
        }
      n *= (gsize) shape[i];
    }
  *numel = n;
  return TRUE;
}

static void
set_shape (KsTensor *t, KsDType dtype, int ndim, const gint64 *shape, gsize numel)
{
  t->dtype = dtype;
  t->ndim = ndim;
  if (ndim > 0) /* a scalar's shape may be NULL */
    memcpy (t->shape, shape, ndim * sizeof *shape);
  t->numel = numel;
}

KsTensor *
ks_tensor_new (KsCompute *compute, KsDType dtype, int ndim, const gint64 *shape, GError **error)
{
  gsize numel;
  KsTensor *t;

  if (!ks_shape_check (ndim, shape, &numel, error))
    return NULL;
  t = g_new0 (KsTensor, 1);
  set_shape (t, dtype, ndim, shape, numel);
  t->compute = compute;
  t->owns_data = TRUE;
  t->data = ks_compute_alloc (compute, ks_tensor_nbytes (t), error);
  if (t->data == NULL || !ks_compute_fill_zero (compute, t->data, ks_tensor_nbytes (t), error))
    {
      ks_tensor_free (t);
      return NULL;
    }
  return t;
}

void
ks_tensor_free (KsTensor *t)
{
  if (t == NULL)
    return;
  if (t->owns_data)
    ks_compute_free_memory (t->compute, t->data);
  g_free (t);
}

gsize
ks_tensor_nbytes (const KsTensor *t)
{
  return t->numel * ks_dtype_size (t->dtype);
}

char *
ks_tensor_shape_string (const KsTensor *t)
{
  GString *s = g_string_new ("[");
  for (int i = 0; i < t->ndim; i++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, i ? ", " : "", t->shape[i]);
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

static gboolean
check_host_size (const KsTensor *t, gsize nbytes, GError **error)
{
  if (nbytes == ks_tensor_nbytes (t))
    return TRUE;
  g_autofree char *shape = ks_tensor_shape_string (t);
  g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
               "a %s tensor of shape %s holds %" G_GSIZE_FORMAT " bytes, not %" G_GSIZE_FORMAT,
               ks_dtype_name (t->dtype), shape, ks_tensor_nbytes (t), nbytes);
  return FALSE;
}

gboolean
ks_tensor_from_host (KsTensor *t, const void *src, gsize nbytes, GError **error)
{
  return check_host_size (t, nbytes, error)
         && ks_compute_copy_to_device (t->compute, t->data, src, nbytes, error);
}

gboolean
ks_tensor_to_host (const KsTensor *t, void *dst, gsize nbytes, GError **error)
{
  return check_host_size (t, nbytes, error)
         && ks_compute_copy_to_host (t->compute, dst, t->data, nbytes, error);
}

/* ---- arenas ---- */

typedef struct {
  char *name;
  gsize offset; /* in floats */
  KsTensor view;
} ArenaEntry;

struct KsArena {
  KsCompute *compute;
  GArray *entries; /* ArenaEntry */
  gsize numel;     /* floats, padding included */
  float *data;
  gboolean borrowed; /* data is someone else's (ks_arena_move) */
};

static void
arena_entry_clear (gpointer p)
{
  g_free (((ArenaEntry *) p)->name);
}

KsArena *
ks_arena_new (KsCompute *compute)
{
  KsArena *arena = g_new0 (KsArena, 1);
  arena->compute = compute;
  arena->entries = g_array_new (FALSE, TRUE, sizeof (ArenaEntry));
  g_array_set_clear_func (arena->entries, arena_entry_clear);
  return arena;
}

void
ks_arena_free (KsArena *arena)
{
  if (arena == NULL)
    return;
  if (!arena->borrowed)
    ks_compute_free_memory (arena->compute, arena->data);
  g_array_unref (arena->entries);
  g_free (arena);
}

gboolean
ks_arena_add (KsArena *arena, const char *name, int ndim, const gint64 *shape, GError **error)
{
  ArenaEntry entry = { 0 };
  gsize numel;

  g_return_val_if_fail (arena->data == NULL, FALSE);
  if (ks_arena_tensor (arena, name) != NULL)
    {
      g_set_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                   "arena: a tensor named '%s' is already declared", name);
      return FALSE;
    }
  if (!ks_shape_check (ndim, shape, &numel, error))
    return FALSE;
  entry.name = g_strdup (name);
  entry.offset = arena->numel;
  set_shape (&entry.view, KS_DTYPE_FLOAT32, ndim, shape, numel);
  entry.view.compute = arena->compute;
  arena->numel += (numel + ARENA_ALIGN_FLOATS - 1) / ARENA_ALIGN_FLOATS * ARENA_ALIGN_FLOATS;
  g_array_append_val (arena->entries, entry);
  return TRUE;
}

gboolean
ks_arena_allocate (KsArena *arena, GError **error)
{
  gsize bytes = MAX (arena->numel, 1) * sizeof (float);

  g_return_val_if_fail (arena->data == NULL, FALSE);
  arena->data = ks_compute_alloc (arena->compute, bytes, error);
  if (arena->data == NULL)
    return FALSE;
  if (!ks_compute_fill_zero (arena->compute, arena->data, bytes, error))
    {
      ks_compute_free_memory (arena->compute, g_steal_pointer (&arena->data));
      return FALSE;
    }
  for (guint i = 0; i < arena->entries->len; i++)
    {
      ArenaEntry *e = &g_array_index (arena->entries, ArenaEntry, i);
      e->view.data = arena->data + e->offset;
    }
  return TRUE;
}

gboolean
ks_arena_move (KsArena *arena, float *memory, GError **error)
{
  g_return_val_if_fail (arena->data != NULL, FALSE);
  if (!ks_compute_copy_to_host (arena->compute, memory, arena->data,
                                MAX (arena->numel, 1) * sizeof (float), error))
    return FALSE;
  if (!arena->borrowed)
    ks_compute_free_memory (arena->compute, arena->data);
  arena->data = memory;
  arena->borrowed = TRUE;
  for (guint i = 0; i < arena->entries->len; i++)
    {
      ArenaEntry *e = &g_array_index (arena->entries, ArenaEntry, i);
      e->view.data = arena->data + e->offset;
    }
  return TRUE;
}

KsArena *
ks_arena_new_like (const KsArena *layout, GError **error)
{
  KsArena *arena = ks_arena_new (layout->compute);

  for (guint i = 0; i < layout->entries->len; i++)
    {
      const ArenaEntry *e = &g_array_index (layout->entries, ArenaEntry, i);
      ks_arena_add (arena, e->name, e->view.ndim, e->view.shape, NULL);
    }
  if (!ks_arena_allocate (arena, error))
    {
      ks_arena_free (arena);
      return NULL;
    }
  return arena;
}

gsize
ks_arena_count (const KsArena *arena)
{
  return arena->entries->len;
}

float *
ks_arena_data (const KsArena *arena)
{
  return arena->data;
}

gsize
ks_arena_numel (const KsArena *arena)
{
  return arena->numel;
}

const KsTensor *
ks_arena_tensor (const KsArena *arena, const char *name)
{
  for (guint i = 0; i < arena->entries->len; i++)
    {
      const ArenaEntry *e = &g_array_index (arena->entries, ArenaEntry, i);
      if (strcmp (e->name, name) == 0)
        return &e->view;
    }
  return NULL;
}

const KsTensor *
ks_arena_tensor_at (const KsArena *arena, gsize index, const char **name, gsize *offset)
{
  const ArenaEntry *e;

  g_return_val_if_fail (index < arena->entries->len, NULL);
  e = &g_array_index (arena->entries, ArenaEntry, index);
  if (name != NULL)
    *name = e->name;
  if (offset != NULL)
    *offset = e->offset;
  return &e->view;
}
