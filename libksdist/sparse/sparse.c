/* Sparse tables: shard_num open-addressing hash indexes (id -> record number) over
 * fixed-size records in one growable slab per shard.
 *
 * A record is a RowHead (show, click, delta_score, unseen_days, flags: 16 bytes), then
 * floats: embed_w, embedx_w[embedx_dim] (always reserved), then the rule's state
 *   adagrad  g2sum of embed, g2sum of embedx                       (2 floats)
 *   sgd      none
 *   adam     m, v, step of embed; m[dim], v[dim], step of embedx   (2 * embedx_dim + 4)
 * The id lives only in the index (keys[] beside rows[]; key 0 marks an empty slot, which
 * is free since id 0 never has a row). Freed records form a list through their first
 * four bytes. Both arrays grow by 3/2 (the slab by 9/8 once large) so that little
 * capacity sits unused; slots are found by a multiply-shift of the hash, which allows any
 * capacity.
 *
 * File: a 32-byte header (magic, version, embedx_dim, rule, bytes per record, rows; little
 * endian), since version 2 an identity block (a 4-byte length, at most 4096, then
 * "key=value\n" lines: what the saver named, a parameter server's save_id, step, server,
 * servers, table; version 1 files have none and still load), records (id, then the record
 * as held), then the SHA-256 of all before it. */
#include "sparse-private.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- settings ---- */

void
ks_sparse_config_defaults (KsSparseConfig *c)
{
  *c = (KsSparseConfig) {
    .embedx_dim = 8, .rule = KS_SPARSE_RULE_ADAGRAD, .learning_rate = 0.05,
    .initial_g2sum = 3, .initial_range = 1e-4, .min_bound = -10, .max_bound = 10,
    .beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-8, .embedx_threshold = 10,
    .nonclk_coeff = 0.1, .click_coeff = 1, .base_threshold = 1.5, .delta_threshold = 0.25,
    .delta_keep_days = 16, .show_click_decay_rate = 0.98, .delete_threshold = 0.8,
    .delete_after_unseen_days = 30, .shard_num = 64, .seed = 1, .max_grad = 100,
    .max_new_rows = 0,
  };
}

void
ks_sparse_config_read (const KsConfig *config, const char *name, KsSparseConfig *out)
{
  g_autofree char *g = g_strdup_printf ("table.%s", name);
  const char *rule = ks_config_get_string (config, g, "rule");

  ks_sparse_config_defaults (out);
  out->embedx_dim = (int) ks_config_get_int (config, g, "embedx_dim");
  out->rule = g_strcmp0 (rule, "sgd") == 0    ? KS_SPARSE_RULE_SGD
              : g_strcmp0 (rule, "adam") == 0 ? KS_SPARSE_RULE_ADAM
                                              : KS_SPARSE_RULE_ADAGRAD;
#define D(key) out->key = ks_config_get_double (config, g, #key)
  D (learning_rate); D (initial_g2sum); D (initial_range); D (min_bound); D (max_bound);
  D (beta1); D (beta2); D (epsilon); D (embedx_threshold); D (nonclk_coeff);
  D (click_coeff); D (base_threshold); D (delta_threshold); D (show_click_decay_rate);
  D (delete_threshold); D (max_grad);
#undef D
  out->max_new_rows = ks_config_get_int (config, g, "max_new_rows");
  out->max_rows = ks_config_get_int (config, g, "max_rows");
  out->delta_keep_days = (int) ks_config_get_int (config, g, "delta_keep_days");
  out->delete_after_unseen_days = (int) ks_config_get_int (config, g, "delete_after_unseen_days");
  out->shard_num = (int) ks_config_get_int (config, g, "shard_num");
  out->seed = (guint64) ks_config_get_int (config, g, "seed");
}

const char *
ks_sparse_save_mode_name (KsSparseSaveMode mode)
{
  switch (mode)
    {
    case KS_SPARSE_SAVE_ALL: return "all";
    case KS_SPARSE_SAVE_DELTA: return "delta";
    case KS_SPARSE_SAVE_BASE: return "base";
    }
  return NULL;
}

gboolean
ks_sparse_save_mode_from_name (const char *name, KsSparseSaveMode *mode)
{
  for (int m = KS_SPARSE_SAVE_ALL; m <= KS_SPARSE_SAVE_BASE; m++)
    if (g_strcmp0 (name, ks_sparse_save_mode_name (m)) == 0)
      {
        *mode = m;
        return TRUE;
      }
  return FALSE;
}

/* ---- hashing ---- */

static inline guint64
splitmix64 (guint64 x)
{
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* Salted per table: a file lists a shard's rows in its table's slot order, which under
 * the same hash would pile the loading table's inserts into one long probe run. */
static inline guint64
hash_of (const KsSparseTable *t, guint64 id)
{
  return splitmix64 (id ^ t->salt);
}

/* The hash's high half picks the shard (servers already split by id % S), its low half
 * the slot. */
static inline guint32
shard_of (const KsSparseTable *t, guint64 h)
{
  return (guint32) ((h >> 32) % (guint64) t->config.shard_num);
}

static inline guint32
home_of (guint64 h, guint32 cap)
{
  return (guint32) (((h & 0xffffffffu) * cap) >> 32);
}

/* Element j of id's initial row: uniform in [-r, r), a function of (seed, id, j) only;
 * `base` is row_base (seed, id). */
static inline guint64
row_base (const KsSparseConfig *c, guint64 id)
{
  return splitmix64 (splitmix64 (c->seed) ^ id);
}

static float
initial_value (const KsSparseConfig *c, guint64 base, gsize j)
{
  guint64 r = splitmix64 (base + j * 0xD1B54A32D192ED03ull);
  double u = (double) (r >> 40) / (double) (1ull << 24);
  return (float) ((2 * u - 1) * c->initial_range);
}

/* ---- records ---- */

static void
make_embedx (const KsSparseTable *t, guint64 id, RowHead *h)
{
  float *v = values (h);
  guint64 base = row_base (&t->config, id);
  for (gsize j = 1; j < t->dim; j++)
    v[j] = initial_value (&t->config, base, j);
  h->flags |= FLAG_EMBEDX;
}

static void
init_record (const KsSparseTable *t, guint64 id, RowHead *h)
{
  memset (h, 0, t->rec_size);
  values (h)[0] = initial_value (&t->config, row_base (&t->config, id), 0);
  if (score (&t->config, h) >= t->config.embedx_threshold)
    make_embedx (t, id, h);
}

/* The most slots of a shard's index, and so of ids in it (a test builds this file with
 * a small one: tests/local.mk). */
#ifndef KS_SPARSE_INDEX_LIMIT
#define KS_SPARSE_INDEX_LIMIT G_MAXUINT32
#endif

/* Shard `s` of `t` cannot hold another row: an error, never an abort (a parameter server
 * runs this on a worker's request). */
static gboolean
shard_full (const KsSparseTable *t, const Shard *s, const char *what, GError **error)
{
  return ks_fail (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_NO_MEMORY,
                  "sparse table %s: a shard holds %u rows, as many as its %s can (the table "
                  "%zu in %d shards): raise [table.%s] shard_num, or delete rows sooner "
                  "(delete_threshold, delete_after_unseen_days)", t->name, s->count, what,
                  t->size, t->config.shard_num, t->name);
}

static gboolean
alloc_record (const KsSparseTable *t, Shard *s, guint32 *row, GError **error)
{
  if (s->free_head != EMPTY_LIST)
    {
      *row = s->free_head;
      memcpy (&s->free_head, record (t, s, *row), sizeof (guint32));
      return TRUE;
    }
  if (s->slab_used == s->slab_cap)
    {
      /* 3/2 while small, then 9/8: at most an eighth of a slab is slack (realloc of a
       * large block is an mremap, not a copy) */
      guint64 grow = s->slab_cap < 256 ? s->slab_cap / 2 : s->slab_cap / 8;
      guint64 cap = MAX ((guint64) s->slab_cap + grow, 16);
      if (s->slab_cap == G_MAXUINT32 - 1)
        return shard_full (t, s, "store", error);
      cap = MIN (cap, G_MAXUINT32 - 1); /* EMPTY_LIST is no row */
      s->slab = g_realloc_n (s->slab, cap, t->rec_size);
      s->slab_cap = (guint32) cap;
    }
  *row = s->slab_used++;
  return TRUE;
}

static void
free_record (const KsSparseTable *t, Shard *s, guint32 row)
{
  memcpy (record (t, s, row), &s->free_head, sizeof (guint32));
  s->free_head = row;
}

/* ---- index ---- */

/* The slot holding id, or the empty slot where it would go. */
static inline guint32
probe (const Shard *s, guint64 id, guint64 h)
{
  guint32 i = home_of (h, s->cap);
  while (s->keys[i] != 0 && s->keys[i] != id)
    i = i + 1 == s->cap ? 0 : i + 1;
  return i;
}

static gboolean
index_grow (const KsSparseTable *t, Shard *s, GError **error)
{
  guint32 old_cap = s->cap;
  guint64 *old_keys = s->keys;
  guint32 *old_rows = s->rows;
  guint64 cap = MAX ((guint64) old_cap * 3 / 2, 16);

  if (cap > KS_SPARSE_INDEX_LIMIT)
    return shard_full (t, s, "index", error);
  s->cap = (guint32) cap;
  s->keys = g_new0 (guint64, s->cap);
  s->rows = g_new (guint32, s->cap);
  for (guint32 i = 0; i < old_cap; i++)
    if (old_keys[i] != 0)
      {
        guint32 j = probe (s, old_keys[i], hash_of (t, old_keys[i]));
        s->keys[j] = old_keys[i];
        s->rows[j] = old_rows[i];
      }
  g_free (old_keys);
  g_free (old_rows);
  return TRUE;
}

static RowHead *
find (const KsSparseTable *t, guint64 id)
{
  guint64 h = hash_of (t, id);
  const Shard *s = &t->shards[shard_of (t, h)];
  if (s->count == 0)
    return NULL;
  guint32 i = probe (s, id, h);
  return s->keys[i] == id ? record (t, s, s->rows[i]) : NULL;
}

RowHead *
ks_sparse_find_or_make (KsSparseTable *t, guint64 id, gboolean *made, GError **error)
{
  guint64 h = hash_of (t, id);
  Shard *s = &t->shards[shard_of (t, h)];
  guint32 i = s->cap > 0 ? probe (s, id, h) : 0;
  guint32 row = 0;

  *made = s->cap == 0 || s->keys[i] != id;
  if (!*made)
    return record (t, s, s->rows[i]);
  if ((guint64) (s->count + 1) * 10 > (guint64) s->cap * 7)
    {
      if (!index_grow (t, s, error))
        return NULL;
      i = probe (s, id, h);
    }
  if (!alloc_record (t, s, &row, error))
    return NULL;
  s->keys[i] = id;
  s->rows[i] = row;
  s->count++;
  t->size++;
  return record (t, s, row);
}

/* Removes slot i of s, shifting back the entries after it that it would have held. */
static void
index_remove_slot (KsSparseTable *t, Shard *s, guint32 i)
{
  guint32 cap = s->cap, j = i;
  free_record (t, s, s->rows[i]);
  for (;;)
    {
      j = j + 1 == cap ? 0 : j + 1;
      if (s->keys[j] == 0)
        break;
      guint32 k = home_of (hash_of (t, s->keys[j]), cap);
      if ((j + cap - k) % cap >= (j + cap - i) % cap)
        {
          s->keys[i] = s->keys[j];
          s->rows[i] = s->rows[j];
          i = j;
        }
    }
  s->keys[i] = 0;
  s->count--;
  t->size--;
}

static void
shard_clear (Shard *s)
{
  g_free (s->keys);
  g_free (s->rows);
  g_free (s->slab);
  *s = (Shard) { .free_head = EMPTY_LIST };
}

/* ---- the table ---- */

KsSparseTable *
ks_sparse_table_new (const char *name, const KsSparseConfig *config)
{
  g_return_val_if_fail (config != NULL && config->embedx_dim >= 0 && config->shard_num >= 1, NULL);
  KsSparseTable *t = g_new0 (KsSparseTable, 1);
  t->name = g_strdup (name);
  t->config = *config;
  t->dim = 1 + (gsize) config->embedx_dim;
  t->n_state = config->rule == KS_SPARSE_RULE_ADAGRAD ? 2
               : config->rule == KS_SPARSE_RULE_ADAM  ? 2 * t->dim + 2
                                                      : 0;
  t->rec_size = sizeof (RowHead) + (t->dim + t->n_state) * sizeof (float);
  t->salt = (guint64) g_random_int () << 32 | g_random_int ();
  t->shards = g_new0 (Shard, config->shard_num);
  for (int i = 0; i < config->shard_num; i++)
    t->shards[i].free_head = EMPTY_LIST;
  return t;
}

void
ks_sparse_table_free (KsSparseTable *t)
{
  if (t == NULL)
    return;
  for (int i = 0; i < t->config.shard_num; i++)
    shard_clear (&t->shards[i]);
  g_free (t->shards);
  g_free (t->name);
  g_free (t);
}

const char *
ks_sparse_table_name (const KsSparseTable *t)
{
  return t->name;
}

const KsSparseConfig *
ks_sparse_table_config (const KsSparseTable *t)
{
  return &t->config;
}

gsize
ks_sparse_table_dim (const KsSparseTable *t)
{
  return t->dim;
}

gsize
ks_sparse_table_size (const KsSparseTable *t)
{
  return t->size;
}

gsize
ks_sparse_table_memory (const KsSparseTable *t)
{
  gsize bytes = sizeof *t + (gsize) t->config.shard_num * sizeof (Shard);
  for (int i = 0; i < t->config.shard_num; i++)
    {
      const Shard *s = &t->shards[i];
      bytes += (gsize) s->cap * (sizeof (guint64) + sizeof (guint32));
      bytes += (gsize) s->slab_cap * t->rec_size;
    }
  return bytes;
}

gsize
ks_sparse_table_row_bytes (const KsSparseTable *t)
{
  return (t->rec_size + sizeof (guint64) + sizeof (guint32)) * 3 / 2;
}

gboolean
ks_sparse_table_row_stats (const KsSparseTable *t, guint64 id, float *show, float *click,
                           float *delta_score, int *unseen_days, gboolean *has_embedx)
{
  const RowHead *h = id == 0 ? NULL : find (t, id);
  if (h == NULL)
    return FALSE;
  if (show)
    *show = h->show;
  if (click)
    *click = h->click;
  if (delta_score)
    *delta_score = h->delta_score;
  if (unseen_days)
    *unseen_days = h->unseen_days;
  if (has_embedx)
    *has_embedx = (h->flags & FLAG_EMBEDX) != 0;
  return TRUE;
}

static void
read_row (const KsSparseTable *t, RowHead *h, float *out)
{
  if (h == NULL)
    {
      memset (out, 0, t->dim * sizeof (float));
      return;
    }
  const float *v = values (h);
  if (h->flags & FLAG_EMBEDX)
    memcpy (out, v, t->dim * sizeof (float));
  else
    {
      out[0] = v[0];
      memset (out + 1, 0, (t->dim - 1) * sizeof (float));
    }
}

gboolean
ks_sparse_table_pull (KsSparseTable *t, const guint64 *ids, gsize n, float *out,
                      GError **error)
{
  for (gsize i = 0; i < n; i++)
    {
      RowHead *h = NULL;
      if (ids[i] != 0)
        {
          gboolean made;
          if ((h = ks_sparse_find_or_make (t, ids[i], &made, error)) == NULL)
            return FALSE;
          if (made)
            init_record (t, ids[i], h);
        }
      read_row (t, h, out + i * t->dim);
    }
  return TRUE;
}

void
ks_sparse_table_lookup (KsSparseTable *t, const guint64 *ids, gsize n, float *out)
{
  for (gsize i = 0; i < n; i++)
    read_row (t, ids[i] == 0 ? NULL : find (t, ids[i]), out + i * t->dim);
}

static inline float
clip (const KsSparseConfig *c, double w)
{
  return (float) CLAMP (w, c->min_bound, c->max_bound);
}

/* One part (embed: n = 1, or embedx: n = embedx_dim) steps with mean gradient g. `state`
 * is the part's: adagrad g2sum; adam m[n], v[n], step. */
static void
update_part (const KsSparseConfig *c, float *w, const float *g, gsize n, float *state)
{
  switch (c->rule)
    {
    case KS_SPARSE_RULE_ADAGRAD:
      {
        double ratio = c->learning_rate * sqrt (c->initial_g2sum / (c->initial_g2sum + state[0]));
        double sum = 0;
        for (gsize j = 0; j < n; j++)
          {
            w[j] = clip (c, w[j] - ratio * g[j]);
            sum += (double) g[j] * g[j];
          }
        state[0] = (float) (state[0] + sum / (double) n);
        break;
      }
    case KS_SPARSE_RULE_SGD:
      for (gsize j = 0; j < n; j++)
        w[j] = clip (c, w[j] - c->learning_rate * g[j]);
      break;
    case KS_SPARSE_RULE_ADAM:
      {
        float *m = state, *v = state + n, *step = state + 2 * n;
        *step += 1;
        double c1 = 1 - pow (c->beta1, *step), c2 = 1 - pow (c->beta2, *step);
        for (gsize j = 0; j < n; j++)
          {
            m[j] = (float) (c->beta1 * m[j] + (1 - c->beta1) * g[j]);
            v[j] = (float) (c->beta2 * v[j] + (1 - c->beta2) * (double) g[j] * g[j]);
            double mh = m[j] / c1, vh = v[j] / c2;
            w[j] = clip (c, w[j] - c->learning_rate * mh / (sqrt (vh) + c->epsilon));
          }
        break;
      }
    }
}

gboolean
ks_sparse_table_push (KsSparseTable *t, const guint64 *ids, gsize n, const float *grads,
                      const float *shows, const float *clicks, GError **error)
{
  const KsSparseConfig *c = &t->config;
  const gsize dx = t->dim - 1;
  g_autofree float *g = g_new (float, t->dim);

  for (gsize i = 0; i < n; i++)
    {
      if (ids[i] == 0)
        continue;
      gboolean made;
      RowHead *h = ks_sparse_find_or_make (t, ids[i], &made, error);
      if (h == NULL)
        return FALSE;
      if (made)
        init_record (t, ids[i], h);
      float sh = shows[i], ck = clicks[i];
      h->show += sh;
      h->click += ck;
      h->delta_score += (float) ((sh - ck) * c->nonclk_coeff + ck * c->click_coeff);
      h->unseen_days = 0;

      double inv = 1.0 / (sh > 0 ? sh : 1);
      for (gsize j = 0; j < t->dim; j++)
        g[j] = (float) (grads[i * t->dim + j] * inv);
      float *w = values (h), *state = w + t->dim;
      /* state: adagrad [g2 embed][g2 embedx]; adam [m v step]embed [m.. v.. step]embedx */
      float *embedx_state = c->rule == KS_SPARSE_RULE_ADAM ? state + 3 : state + 1;
      update_part (c, w, g, 1, state);
      if (h->flags & FLAG_EMBEDX)
        {
          if (dx > 0)
            update_part (c, w + 1, g + 1, dx, embedx_state);
        }
      else if (score (c, h) >= c->embedx_threshold)
        make_embedx (t, ids[i], h);
    }
  return TRUE;
}

gsize
ks_sparse_table_shrink (KsSparseTable *t)
{
  const KsSparseConfig *c = &t->config;
  g_autoptr (GArray) doomed = g_array_new (FALSE, FALSE, sizeof (guint64));
  gsize deleted = 0;

  for (int k = 0; k < c->shard_num; k++)
    {
      Shard *s = &t->shards[k];
      g_array_set_size (doomed, 0);
      for (guint32 i = 0; i < s->cap; i++)
        if (s->keys[i] != 0)
          {
            RowHead *h = record (t, s, s->rows[i]);
            h->show = (float) (h->show * c->show_click_decay_rate);
            h->click = (float) (h->click * c->show_click_decay_rate);
            if (h->unseen_days < G_MAXUINT16)
              h->unseen_days++;
            if (score (c, h) < c->delete_threshold || h->unseen_days > c->delete_after_unseen_days)
              g_array_append_val (doomed, s->keys[i]);
          }
      /* deleting shifts entries back, so not while walking the slots */
      for (guint j = 0; j < doomed->len; j++)
        {
          guint64 id = g_array_index (doomed, guint64, j);
          index_remove_slot (t, s, probe (s, id, hash_of (t, id)));
        }
      deleted += doomed->len;
    }
  return deleted;
}
