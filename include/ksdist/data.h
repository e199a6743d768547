/* ksdist — data: generated tasks for training and tests.
 *
 * For programs and tests using the tasks library's generated data (libksdist-tasks); not
 * part of the core. */
#ifndef KSDIST_DATA_H
#define KSDIST_DATA_H

#include <ksdist/types.h>

G_BEGIN_DECLS

/* Classification tasks in the plane, with a real metric (accuracy). */
typedef enum {
  KS_TASK_SPIRALS = 0, /* two interleaved spirals: classes 0, 1 */
  KS_TASK_RINGS = 1,   /* three concentric rings: classes 0, 1, 2 */
} KsTask;

/* The number of classes of a task; -1 for an unknown one. */
int ks_task_classes (KsTask task);
/* Parses "spirals" or "rings"; FALSE for another name. */
gboolean ks_task_from_name (const char *name, KsTask *task);

/* Fills n points (xs: n x 2, row-major) and their labels, shuffled, from `seed`:
 * the same seed gives the same set. */
void ks_task_generate (KsTask task, gsize n, double noise, guint64 seed, float *xs,
                       gint64 *labels);

/* A text corpus for character-level models: the file's distinct bytes, sorted, are the
 * vocabulary, and the text is a sequence of their indices. */
typedef struct {
  char *path;
  guint8 vocab[256]; /* token -> byte */
  gsize vocab_size;
  gint64 *tokens;
  gsize length;
} KsText;

/* Reads `path`, a file or a folder of text files (joined in name order, each ending in a
 * newline); an empty text or a file that cannot be read is an error naming it. */
KsText *ks_text_load (const char *path, GError **error);
void ks_text_free (KsText *text);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsText, ks_text_free)

G_END_DECLS

#endif
