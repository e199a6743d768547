/* A sparse table's shard that cannot grow: pull and push return an error that names the
 * table and what to do, rows already there still read and update, and nothing aborts (a
 * parameter server runs this on a worker's request; it once called g_error). Built with
 * libksdist/sparse/sparse.c and an index of at most LIMIT slots (tests/local.mk), since
 * the real limit, 2^32, is out of a test's reach. */
#include "testutil.h"

#include <string.h>

#define LIMIT 64 /* KS_SPARSE_INDEX_LIMIT of this build of sparse.c */

/* The most rows one shard holds with LIMIT slots, from the index's rule written here:
 * it starts at 16 slots, grows by half, and grows before an insert would fill 70%. */
static guint
most_rows (void)
{
  guint cap = 16;
  while (cap * 3 / 2 <= LIMIT)
    cap = cap * 3 / 2;
  return cap * 7 / 10;
}

static void
test_full_shard (void)
{
  KsSparseConfig c;
  ks_sparse_config_defaults (&c);
  c.embedx_dim = 2;
  c.shard_num = 1;
  g_autoptr (KsSparseTable) t = ks_sparse_table_new ("clicks", &c);
  gsize dim = ks_sparse_table_dim (t);
  g_autofree float *first = g_new (float, dim), *again = g_new (float, dim);
  g_autoptr (GError) error = NULL;
  guint64 id = 1;
  float v[3], grad[3] = { 0.5f, 0.25f, 0.125f }, show = 1, click = 0;

  g_assert_cmpuint (dim, ==, 3);
  g_assert_true (ks_sparse_table_pull (t, &id, 1, first, &error));
  for (id = 2; id <= most_rows (); id++)
    g_assert_true (ks_sparse_table_pull (t, &id, 1, v, &error));
  g_assert_cmpuint (ks_sparse_table_size (t), ==, most_rows ());
  g_assert_cmpuint (most_rows (), ==, 37); /* 16, 24, 36, 54 slots; 81 > LIMIT */

  /* one more id: refused, with what to change */
  id = 1000;
  g_assert_false (ks_sparse_table_pull (t, &id, 1, v, &error));
  g_assert_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_NO_MEMORY);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, "sparse table clicks: a shard holds 37 rows, as "
                                            "many as its index can"));
  g_assert_nonnull (strstr (error->message, "raise [table.clicks] shard_num"));
  g_clear_error (&error);
  g_assert_false (ks_sparse_table_push (t, &id, 1, grad, &show, &click, &error));
  g_assert_error (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_NO_MEMORY);
  g_clear_error (&error);
  g_assert_cmpuint (ks_sparse_table_size (t), ==, most_rows ());

  /* the rows there still read as they were, and still learn */
  id = 1;
  g_assert_true (ks_sparse_table_pull (t, &id, 1, again, &error));
  g_assert_cmpmem (first, dim * sizeof (float), again, dim * sizeof (float));
  g_assert_true (ks_sparse_table_push (t, &id, 1, grad, &show, &click, &error));
  g_assert_true (ks_sparse_table_pull (t, &id, 1, again, &error));
  g_assert_cmpfloat (again[0], !=, first[0]);
  g_assert_cmpuint (ks_sparse_table_size (t), ==, most_rows ());
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/sparse/full-shard", test_full_shard);
  return g_test_run ();
}
