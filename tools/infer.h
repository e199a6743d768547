/* ksdist infer's readers of data files (infer-read.c): rows as the export's training
 * read them, from its metadata (data.shape, data.features, data.classes). */
#ifndef KS_INFER_H
#define KS_INFER_H

#include <ksdist/table.h>

/* The rows of `input` in `format` (csv, npy, idx, image_folder, image) for the export
 * `dir` whose metadata is `meta`; `images` (NULL unless format is image) the image files.
 * A CSV file may hold the features alone or with a label column (told apart by its header
 * against the training file's, else by its width); --label names the label column. */
KsTable *ks_infer_load (const char *dir, GHashTable *meta, const char *format,
                        const char *input, const char *const *images, const char *labels,
                        const char *label, GError **error);

#endif
