/* ksdist — sparse tables: a row per 64-bit id (a "feasign"), made on its first pull.
 *
 * For the parameter-server modes and programs with sparse (CTR) models: pslib's tables and
 * their rows.
 *
 * After Paddle pslib's sparse table with its CtrCommonAccessor. A row holds
 *   value       embed_w (1 float) and embedx_w (embedx_dim floats, made only once the
 *               row's score reaches embedx_threshold; read as zeros before)
 *   state       the update rule's (Adagrad: one g2sum for embed_w, one for embedx_w)
 *   statistics  show, click, delta_score, unseen_days
 * score = (show - click) * nonclk_coeff + click * click_coeff.
 * A pull gives 1 + embedx_dim floats per id: [embed_w, embedx_w...]. Id 0 is "no value"
 * (an empty field): it reads as zeros, is never made and its pushes are ignored.
 * Initial values depend only on (seed, id), so a row is the same on any server count.
 * A table is not thread-safe: one thread uses it at a time. */
#ifndef KSDIST_SPARSE_H
#define KSDIST_SPARSE_H

#include <ksdist/config.h>

G_BEGIN_DECLS

typedef enum {
  KS_SPARSE_RULE_ADAGRAD = 0, /* pslib's: w -= lr * g * sqrt (g0 / (g0 + g2sum)) */
  KS_SPARSE_RULE_SGD = 1,     /* w -= lr * g */
  KS_SPARSE_RULE_ADAM = 2,    /* per element m, v and a step count per row */
} KsSparseRule;

/* A table's settings: the [table.NAME] group of a config (its keys and pslib's defaults
 * are in the core schema, group "table.*"). */
typedef struct {
  int embedx_dim;                   /* 8 */
  KsSparseRule rule;                /* adagrad */
  double learning_rate;             /* 0.05 */
  double initial_g2sum;             /* 3 */
  double initial_range;             /* 1e-4: initial values uniform in [-r, r] */
  double min_bound, max_bound;      /* -10, 10: values are clipped to them */
  double beta1, beta2, epsilon;     /* adam: 0.9, 0.999, 1e-8 */
  double embedx_threshold;          /* 10 */
  double nonclk_coeff, click_coeff; /* 0.1, 1 */
  double base_threshold;            /* 1.5 */
  double delta_threshold;           /* 0.25 */
  int delta_keep_days;              /* 16 */
  double show_click_decay_rate;     /* 0.98 */
  double delete_threshold;          /* 0.8 */
  int delete_after_unseen_days;     /* 30 */
  int shard_num;                    /* 64: hash tables per table (rows go by id) */
  guint64 seed;                     /* 1: of the initial values */
  /* what a parameter server accepts for the table (the table itself does not check) */
  double max_grad;                  /* 100: the largest |gradient| per show of a push */
  gint64 max_new_rows;              /* 0: rows a pull may create (0: the batch's bound) */
  gint64 max_rows;                  /* 0: rows a server holds at most (0: from its memory) */
} KsSparseConfig;

/* pslib's defaults (above). */
void ks_sparse_config_defaults (KsSparseConfig *config);
/* The [table.NAME] group of `config` (defaults for keys not given). */
void ks_sparse_config_read (const KsConfig *config, const char *name, KsSparseConfig *out);

typedef struct KsSparseTable KsSparseTable;

KsSparseTable *ks_sparse_table_new (const char *name, const KsSparseConfig *config);
void ks_sparse_table_free (KsSparseTable *table);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsSparseTable, ks_sparse_table_free)

const char *ks_sparse_table_name (const KsSparseTable *table);
const KsSparseConfig *ks_sparse_table_config (const KsSparseTable *table);
/* Floats per id of a pull or a push: 1 + embedx_dim. */
gsize ks_sparse_table_dim (const KsSparseTable *table);

/* The values of `n` ids into out[n * dim], making the rows that do not exist; FALSE and
 * an error when a shard is full (the rows made before it stay). */
gboolean ks_sparse_table_pull (KsSparseTable *table, const guint64 *ids, gsize n, float *out,
                               GError **error);
/* As pull, but a missing row reads as zeros and is not made (evaluation). */
void ks_sparse_table_lookup (KsSparseTable *table, const guint64 *ids, gsize n, float *out);
/* Updates `n` distinct ids: grads[i * dim ...] is the gradient summed over the id's
 * shows[i] occurrences in a batch, clicks[i] of them positive. The rule steps with the
 * mean gradient (the sum / shows[i]); show and click add up, delta_score grows by the
 * push's score, unseen_days becomes 0, and embedx is made when the score reaches the
 * threshold. A missing row is made first; FALSE and an error when its shard is full (the
 * ids before it are updated). */
gboolean ks_sparse_table_push (KsSparseTable *table, const guint64 *ids, gsize n,
                               const float *grads, const float *shows, const float *clicks,
                               GError **error);

/* A day's end: show and click decay by show_click_decay_rate, unseen_days grows by one,
 * then rows with score < delete_threshold or unseen_days > delete_after_unseen_days go.
 * Returns the rows deleted. */
gsize ks_sparse_table_shrink (KsSparseTable *table);

/* Rows held. */
gsize ks_sparse_table_size (const KsSparseTable *table);
/* Bytes held for the rows: values, state, statistics and the index. */
gsize ks_sparse_table_memory (const KsSparseTable *table);
/* Bytes a row takes at most: its record and index slot, with the arrays' growth slack. */
gsize ks_sparse_table_row_bytes (const KsSparseTable *table);
/* Whether `id` has a row; its statistics when it has (any pointer may be NULL). */
gboolean ks_sparse_table_row_stats (const KsSparseTable *table, guint64 id, float *show,
                                    float *click, float *delta_score, int *unseen_days,
                                    gboolean *has_embedx);

typedef enum {
  KS_SPARSE_SAVE_ALL = 0,   /* every row */
  KS_SPARSE_SAVE_DELTA = 1, /* score >= base_threshold, delta_score >= delta_threshold,
                               unseen_days <= delta_keep_days; their delta_score resets */
  KS_SPARSE_SAVE_BASE = 2,  /* score >= base_threshold; every row's delta_score resets */
} KsSparseSaveMode;

const char *ks_sparse_save_mode_name (KsSparseSaveMode mode);
gboolean ks_sparse_save_mode_from_name (const char *name, KsSparseSaveMode *mode);

/* Writes the rows `mode` selects to `path` atomically (a temporary name, fsync, rename):
 * a header (magic, version, the table's embedx_dim and rule, row count), the rows, and
 * a SHA-256 of all before it. *n_rows (may be NULL) gets the rows written. */
gboolean ks_sparse_table_save (KsSparseTable *table, const char *path, KsSparseSaveMode mode,
                               gsize *n_rows, GError **error);
/* The same with `identity` (string to string, may be NULL: none) in the file's header,
 * so a load can tell which save, server and table a file is of (a parameter server's
 * checkpoint: save_id, step, server, servers, table). Keys hold no '=' or newline, values
 * no newline; all of it at most 4096 bytes. */
gboolean ks_sparse_table_save_with (KsSparseTable *table, const char *path,
                                    KsSparseSaveMode mode, GHashTable *identity,
                                    gsize *n_rows, GError **error);

/* What ks_sparse_table_load_with requires of one file. */
typedef struct {
  /* every pair of it in the file's identity, equal (NULL: none required); a file without
   * one is refused when it is not NULL */
  GHashTable *identity;
  /* the file holds only ids with id % servers == server (servers 0: any id) */
  int server, servers;
  /* who expects it, for the message ("checkpoint-300/job.json"; NULL: "the load") */
  const char *expected_by;
} KsSparseFileCheck;

/* Reads files of ks_sparse_table_save (of any server count) and keeps the rows with
 * id % servers == index. With `replace` they become the table's rows; without, they go
 * over the table's (a delta on its base). Every file is read and checked (size, magic,
 * version, embedx_dim and rule, checksum, each row) before the table changes: a bad file is an
 * error naming it, and the table is as it was. *n_rows (may be NULL) gets the rows kept. */
gboolean ks_sparse_table_load (KsSparseTable *table, const char *const *paths, gsize n_paths,
                               int index, int servers, gboolean replace, gsize *n_rows,
                               GError **error);
/* The same with checks[p] (checks may be NULL) required of paths[p]. Every load also
 * refuses rows no save writes: id 0, an id twice, a value, state or statistic that is
 * not finite, a negative count. */
gboolean ks_sparse_table_load_with (KsSparseTable *table, const char *const *paths,
                                    const KsSparseFileCheck *checks, gsize n_paths, int index,
                                    int servers, gboolean replace, gsize *n_rows,
                                    GError **error);

G_END_DECLS

#endif
