/* ksdist — image folders for few-shot learning (supervised-reptile's readers).
 *
 * For programs using the tasks library (libksdist-tasks); not part of the core.
 *
 * An image set is a folder DIR with DIR/train, DIR/val and DIR/test; in each, one folder
 * per class holding its image files (PNG or JPEG, decoded by gdk-pixbuf), or one folder
 * per alphabet holding a folder per character (Omniglot's layout). Images come out as
 * float32 in [0, 1], rows of pixels with the channels innermost (HWC). */
#ifndef KSDIST_IMAGES_H
#define KSDIST_IMAGES_H

#include <ksdist/types.h>

G_BEGIN_DECLS

typedef enum {
  KS_IMAGES_COLOUR = 0,     /* RGB, 84 x 84 by default (Mini-ImageNet) */
  KS_IMAGES_CHARACTERS = 1, /* one grey channel, 28 x 28 by default (Omniglot) */
} KsImageKind;

typedef enum { KS_SPLIT_TRAIN = 0, KS_SPLIT_VAL = 1, KS_SPLIT_TEST = 2 } KsSplit;

typedef struct {
  KsImageKind kind;
  int size;            /* pixels per side; 0 for the kind's default */
  gsize cache_bytes;   /* decoded images kept in memory after their first read */
  gboolean skip_bad;   /* a file that does not decode is skipped and counted, not an error */
  gboolean rotations;  /* characters: each training class also rotated by 90, 180 and 270
                        * degrees, as three more classes (supervised-reptile's augmentation) */
} KsImageOptions;

typedef struct KsImageSet KsImageSet;

/* Lists DIR's three splits and their classes (sorted by name); an error names a missing
 * split, an empty one, or a class folder without files. Nothing is decoded yet. */
KsImageSet *ks_image_set_open (const char *dir, const KsImageOptions *options, GError **error);
void ks_image_set_free (KsImageSet *set);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsImageSet, ks_image_set_free)

/* Floats per image: size * size * channels. */
gsize ks_image_set_image_floats (const KsImageSet *set);
int ks_image_set_size (const KsImageSet *set);
int ks_image_set_channels (const KsImageSet *set);
gsize ks_image_set_n_classes (const KsImageSet *set, KsSplit split);
/* "class" or "alphabet/character", with "@90" (180, 270) for a rotated copy */
const char *ks_image_set_class_name (const KsImageSet *set, KsSplit split, gsize i);
gsize ks_image_set_class_size (const KsImageSet *set, KsSplit split, gsize i);
/* Files skipped so far because they did not decode (with skip_bad). */
guint ks_image_set_skipped (const KsImageSet *set);

/* n images of class i, without replacement (all of them, in random order, when the class
 * has fewer), drawn with `rng`, into `out` (n * image floats); returns how many were
 * written, -1 on error (a file that does not decode, naming it, unless skip_bad). */
gssize ks_image_set_sample (KsImageSet *set, KsSplit split, gsize i, gsize n, GRand *rng,
                            float *out, GError **error);

/* A few-shot task: `ways` distinct classes of `split` drawn with `rng`, and `per_class`
 * images of each; images (ways * per_class * image floats) grouped by class, labels the
 * class's place 0 .. ways - 1 in the draw. An error when the split has fewer classes
 * than ways or a class fewer images than per_class. */
gboolean ks_image_set_task (KsImageSet *set, KsSplit split, int ways, int per_class, GRand *rng,
                            float *images, gint64 *labels, GError **error);

G_END_DECLS

#endif
