/* ksdist — click-through-rate data and metrics: the Criteo display-advertising format
 * and a streaming AUC (as Paddle's auc op).
 *
 * For programs using the tasks library's CTR data (libksdist-tasks, pkg-config
 * ksdist-tasks); not part of the core. */
#ifndef KSDIST_CTR_H
#define KSDIST_CTR_H

#include <ksdist/types.h>

G_BEGIN_DECLS

/* A Criteo line: label, 13 integer features, 26 categorical features (hex strings),
 * tab-separated; any feature may be empty. */
#define KS_CRITEO_DENSE 13
#define KS_CRITEO_SLOTS 26

/* The 64-bit feasign of categorical `value` (`len` bytes) in `slot` (0-based): a hash
 * of both, never 0 (0 stands for an empty field). */
guint64 ks_criteo_feasign (int slot, const char *value, gsize len);

/* Samples read into memory. */
typedef struct {
  gsize n;
  float *labels;  /* [n]: 0 or 1 */
  float *dense;   /* [n * 13]: log (1 + x) for x > 0, else 0 (empty fields too) */
  guint64 *ids;   /* [n * 26]: feasigns, 0 for an empty field */
  gsize skipped;  /* malformed lines skipped (with skip_bad) */
} KsCriteo;

/* Reads the files in order. A malformed line (a field count other than 40, a label
 * other than 0 or 1, an integer or hex value that does not parse) is an error naming
 * the file and line, or with `skip_bad` skipped and counted. No samples at all is an
 * error naming the files. */
KsCriteo *ks_criteo_load (const char *const *paths, gsize n_paths, gboolean skip_bad,
                          GError **error);
void ks_criteo_free (KsCriteo *data);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsCriteo, ks_criteo_free)

/* The regular files of `dir`, sorted by name (NULL-terminated; an error naming the
 * directory when it cannot be read or holds none). */
char **ks_data_dir_files (const char *dir, GError **error);

/* A streaming AUC: predictions in [0, 1] counted into `buckets` buckets per label; the
 * counts of several workers add up to the AUC of all their samples. */
typedef struct KsAuc KsAuc;

#define KS_AUC_BUCKETS 4095 /* Paddle's num_thresholds, the ctr's and the layer lists' */
KsAuc *ks_auc_new (gsize buckets);
void ks_auc_free (KsAuc *auc);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsAuc, ks_auc_free)
void ks_auc_reset (KsAuc *auc);
/* labels: 0 or 1 (anything > 0.5 counts as positive) */
void ks_auc_add (KsAuc *auc, const float *predictions, const float *labels, gsize n);
/* The counts, 2 * buckets doubles (positives, then negatives): sum them over workers in
 * place to merge. */
double *ks_auc_counts (KsAuc *auc, gsize *n);
/* The area under the ROC curve of the counts (trapezoids between buckets); 0.5 when one
 * class has no sample. */
double ks_auc_value (const KsAuc *auc);
/* Samples counted. */
double ks_auc_samples (const KsAuc *auc);

G_END_DECLS

#endif
