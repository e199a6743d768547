/* Sparse tables' insides, shared by sparse.c (the index and the rules) and sparse-file.c
 * (saving and loading a table's file). */
#ifndef KS_SPARSE_PRIVATE_H
#define KS_SPARSE_PRIVATE_H

#include "ks-private.h"

#pragma GCC visibility push(hidden)

#define MAGIC "KSSPARSE"
/* 2: an identity block after the header (a 4-byte length, then "key=value\n" lines);
 * 1 (still read): none */
#define FORMAT_VERSION 2u
#define HEADER_BYTES 32
#define MAX_IDENTITY_BYTES 4096
#define DIGEST_BYTES 32
#define EMPTY_LIST G_MAXUINT32
#define FLAG_EMBEDX 1u
/* records are written as held: the format is little endian */
G_STATIC_ASSERT (G_BYTE_ORDER == G_LITTLE_ENDIAN);

typedef struct {
  float show, click, delta_score;
  guint16 unseen_days, flags;
} RowHead;
G_STATIC_ASSERT (sizeof (RowHead) == 16);

typedef struct {
  guint64 *keys;  /* 0: empty */
  guint32 *rows;  /* record number of keys[i] */
  guint32 cap, count;
  guint8 *slab;   /* slab_cap records of rec_size bytes */
  guint32 slab_cap, slab_used, free_head;
} Shard;

struct KsSparseTable {
  char *name;
  KsSparseConfig config;
  gsize dim;       /* 1 + embedx_dim */
  gsize rec_size;  /* bytes per record */
  gsize n_state;   /* floats of rule state */
  Shard *shards;
  gsize size;
  guint64 salt;    /* of the index's hash, random per table: see hash_of */
};

static inline RowHead *
record (const KsSparseTable *t, const Shard *s, guint32 row)
{
  return (RowHead *) (s->slab + (gsize) row * t->rec_size);
}

static inline float *
values (RowHead *h)
{
  return (float *) (h + 1);
}

static inline float
score (const KsSparseConfig *c, const RowHead *h)
{
  return (float) ((h->show - h->click) * c->nonclk_coeff + h->click * c->click_coeff);
}

/* sparse.c: the row of id (not 0), made when missing: *made says whether it was; NULL
 * and an error when its shard is full */
RowHead *ks_sparse_find_or_make (KsSparseTable *t, guint64 id, gboolean *made,
                                 GError **error);

#pragma GCC visibility pop

#endif
