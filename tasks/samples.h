/* The samples a supervised task trains and evaluates on: rows of float32 features shaped
 * alike, each with a class (int64) or target values (float32). Internal to
 * libksdist-tasks. */
#ifndef KS_TASKS_SAMPLES_H
#define KS_TASKS_SAMPLES_H

#include "tasks-private.h"

#include <ksdist/rolemaker.h>

#pragma GCC visibility push(hidden)

G_BEGIN_DECLS

/* The files' rows a set draws from (in memory or memory-mapped, table-private.h), shared
 * by a training set and its held-out set. */
typedef struct SampleFiles SampleFiles;

typedef struct {
  char *source;     /* what the rows came from, for messages: "spirals", "data.csv" */
  gsize n;          /* rows */
  int ndim;         /* of one row's features */
  gint64 shape[4];
  gsize x_bytes, y_bytes; /* of one row */
  SampleFiles *files;
  gsize *rows;      /* the set's rows among the files' rows, in order; NULL: all of them */
  gint64 outputs;   /* classes, or targets a row */
  gboolean generated; /* by [data] task, [data] samples of them */
  float *mean, *std; /* per feature: each row is standardised by them as it is read; or NULL */
  float *fill;      /* [data] missing = mean: the training rows' column means, which held-out
                     * files' missing cells take (kept in exports as data.fill); or NULL */
  char **class_names; /* the classes' names in id order (from a file's named labels), or NULL */
  gboolean split;   /* [data] split_files: this worker holds its share of the files only
                     * (held-out rows: those of its own files, counted over every worker) */
} SampleSet;

/* The [data] keys the configured data set reads ("data.task", ...), NULL-terminated. */
const char *const *sample_set_settings (const KsConfig *config);
/* The data set's refusals from the settings alone (a regression on classes, ...), and
 * with `workers` (0: not known) the file share of [data] split_files. */
gboolean sample_set_check (const KsConfig *config, gboolean regression, int workers,
                           GError **error);
/* The training rows and the held-out ones of [data] (whole batches of `batch` where it
 * generates them); `role` (NULL alone) gives this worker its files with split_files. */
gboolean sample_set_load (SampleSet *train, SampleSet *eval, const KsConfig *config,
                          gboolean regression, gsize batch, KsRoleMaker *role,
                          GError **error);
/* Row i of the set: its features (standardised when the set is) into x (x_bytes), its
 * label into y (y_bytes) unless NULL. */
void sample_set_row (const SampleSet *set, gsize i, guint8 *x, guint8 *y);
void sample_set_clear (SampleSet *set);
/* The features' names of the set's files (a CSV header's), NULL-terminated; or NULL. */
char *const *sample_set_feature_names (const SampleSet *set);

/* samples-files.c: whether a [data] path names many files (a folder or a glob). */
gboolean sample_files_is_list (const char *path);
/* The files of [data] `key` = path, sorted by name: the one file, a folder's files, or a
 * glob's matches. With `labels` (npy), each features file's labels too: labels_path for
 * one file; beside NAME.npy, NAME.labels.npy for many (labels_path must then be empty). */
gboolean sample_files_list (const char *key, const char *path, const char *labels_key,
                            const char *labels_path, char ***files, char ***labels,
                            GError **error);

extern const KsTrainTask ks_samples_task, ks_samples_regression_task, ks_samples_logistic_task;

G_END_DECLS

#pragma GCC visibility pop

#endif
