/* The samples a supervised task trains and evaluates on: rows of float32 features shaped
 * alike, each with a class (int64) or target values (float32). Internal to
 * libksdist-tasks. */
#ifndef KS_TASKS_SAMPLES_H
#define KS_TASKS_SAMPLES_H

#include "tasks-private.h"

#pragma GCC visibility push(hidden)

G_BEGIN_DECLS

typedef struct {
  char *source;     /* what the rows came from, for messages: "spirals", "data.csv" */
  gsize n;          /* rows */
  int ndim;         /* of one row's features */
  gint64 shape[4];
  gsize x_bytes, y_bytes; /* of one row */
  guint8 *x, *y;
  gint64 outputs;   /* classes, or targets a row */
  gboolean generated; /* by [data] task, [data] samples of them */
  float *mean, *std; /* per feature, when the rows were standardised by them; else NULL */
  char **class_names; /* the classes' names in id order (from a file's named labels), or NULL */
} SampleSet;

/* The [data] keys the configured data set reads ("data.task", ...), NULL-terminated. */
const char *const *sample_set_settings (const KsConfig *config);
/* The data set's refusals from the settings alone (a regression on classes, ...). */
gboolean sample_set_check (const KsConfig *config, gboolean regression, GError **error);
/* The training rows and the held-out ones of [data] (whole batches of `batch` where it
 * generates them). */
gboolean sample_set_load (SampleSet *train, SampleSet *eval, const KsConfig *config,
                          gboolean regression, gsize batch, GError **error);
void sample_set_clear (SampleSet *set);

extern const KsTrainTask ks_samples_task, ks_samples_regression_task, ks_samples_logistic_task;

G_END_DECLS

#pragma GCC visibility pop

#endif
