/* Sparse tables: rows made on demand, seeded initial values independent of sharding, the
 * three rules against formulas written here, embedx admission, shrink, the save modes,
 * resharding 2 -> 3 servers, damaged files refused with the table untouched, memory. */
#include "testutil.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

typedef struct {
  char *dir;
} Fixture;

static void
setup (Fixture *f, gconstpointer data)
{
  f->dir = ks_test_tmpdir ();
}

static void
teardown (Fixture *f, gconstpointer data)
{
  ks_test_rmtree (f->dir);
  g_free (f->dir);
}

static KsSparseConfig
config (int embedx_dim, KsSparseRule rule, double embedx_threshold, int shard_num)
{
  KsSparseConfig c;
  ks_sparse_config_defaults (&c);
  c.embedx_dim = embedx_dim;
  c.rule = rule;
  c.embedx_threshold = embedx_threshold;
  c.shard_num = shard_num;
  return c;
}

/* One id's pulled (or looked-up) row: g_free it. */
static float *
row_of (KsSparseTable *t, guint64 id, gboolean pull)
{
  float *v = g_new (float, ks_sparse_table_dim (t));
  if (pull)
    g_assert_true (ks_sparse_table_pull (t, &id, 1, v, NULL));
  else
    ks_sparse_table_lookup (t, &id, 1, v);
  return v;
}

static void
push1 (KsSparseTable *t, guint64 id, const float *grad, float show, float click)
{
  g_assert_true (ks_sparse_table_push (t, &id, 1, grad, &show, &click, NULL));
}

/* The row of id is in both tables with the same bits: values and statistics. */
static void
assert_same_row (KsSparseTable *a, KsSparseTable *b, guint64 id)
{
  gsize dim = ks_sparse_table_dim (a);
  g_autofree float *va = row_of (a, id, FALSE), *vb = row_of (b, id, FALSE);
  float sa[3], sb[3];
  int ua, ub;
  gboolean ea, eb;
  g_assert_true (ks_sparse_table_row_stats (a, id, &sa[0], &sa[1], &sa[2], &ua, &ea));
  g_assert_true (ks_sparse_table_row_stats (b, id, &sb[0], &sb[1], &sb[2], &ub, &eb));
  g_assert_cmpmem (va, dim * sizeof (float), vb, dim * sizeof (float));
  g_assert_cmpmem (sa, sizeof sa, sb, sizeof sb);
  g_assert_cmpint (ua, ==, ub);
  g_assert_cmpint (ea, ==, eb);
}

static void
test_on_demand (Fixture *f, gconstpointer data)
{
  KsSparseConfig c = config (4, KS_SPARSE_RULE_ADAGRAD, 0, 8);
  g_autoptr (KsSparseTable) t = ks_sparse_table_new ("emb", &c);
  const guint64 ids[] = { 7, 0, 12345678901234ull, 7, 3, G_MAXUINT64, 0 };
  float out[G_N_ELEMENTS (ids) * 5], zeros[5] = { 0 };

  g_assert_cmpuint (ks_sparse_table_dim (t), ==, 5);
  ks_sparse_table_lookup (t, ids, G_N_ELEMENTS (ids), out);
  g_assert_cmpuint (ks_sparse_table_size (t), ==, 0);
  for (gsize i = 0; i < G_N_ELEMENTS (ids); i++)
    g_assert_cmpmem (out + i * 5, sizeof zeros, zeros, sizeof zeros);

  g_assert_true (ks_sparse_table_pull (t, ids, G_N_ELEMENTS (ids), out, NULL));
  g_assert_cmpuint (ks_sparse_table_size (t), ==, 4); /* 7, 1234..., 3, max; never 0 */
  g_assert_cmpmem (out + 1 * 5, sizeof zeros, zeros, sizeof zeros);
  g_assert_cmpmem (out + 0 * 5, sizeof zeros, out + 3 * 5, sizeof zeros);
  g_assert_true (out[0] != 0 || out[1] != 0);
  g_assert_false (ks_sparse_table_row_stats (t, 0, NULL, NULL, NULL, NULL, NULL));
  g_assert_true (ks_sparse_table_row_stats (t, 3, NULL, NULL, NULL, NULL, NULL));

  /* id 0's push is ignored; a push to a missing row makes it */
  const guint64 pid[] = { 0, 99 };
  const float grads[10] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 }, shows[] = { 1, 1 }, clicks[] = { 0, 0 };
  g_assert_true (ks_sparse_table_push (t, pid, 2, grads, shows, clicks, NULL));
  g_assert_cmpuint (ks_sparse_table_size (t), ==, 5);
  ks_sparse_table_lookup (t, pid, 1, out);
  g_assert_cmpmem (out, sizeof zeros, zeros, sizeof zeros);
  g_assert_cmpstr (ks_sparse_table_name (t), ==, "emb");
}

static void
test_initial_values (Fixture *f, gconstpointer data)
{
  KsSparseConfig c1 = config (15, KS_SPARSE_RULE_ADAGRAD, 0, 3);
  KsSparseConfig c2 = config (15, KS_SPARSE_RULE_ADAGRAD, 0, 64);
  KsSparseConfig c3 = c2;
  c3.seed = 2;
  g_autoptr (KsSparseTable) a = ks_sparse_table_new ("a", &c1);
  g_autoptr (KsSparseTable) b = ks_sparse_table_new ("b", &c2);
  g_autoptr (KsSparseTable) s = ks_sparse_table_new ("s", &c3);
  enum { N = 200 };
  guint64 ids[N];
  for (int i = 0; i < N; i++)
    ids[i] = (guint64) i * 7919 + 1;
  g_autofree float *va = g_new (float, N * 16), *vb = g_new (float, N * 16),
                   *vs = g_new (float, N * 16);
  g_assert_true (ks_sparse_table_pull (a, ids, N, va, NULL));
  /* another order, another sharding: the same rows */
  for (int i = N - 1; i >= 0; i--)
    g_assert_true (ks_sparse_table_pull (b, &ids[i], 1, vb + i * 16, NULL));
  g_assert_true (ks_sparse_table_pull (s, ids, N, vs, NULL));
  g_assert_cmpmem (va, N * 16 * sizeof (float), vb, N * 16 * sizeof (float));
  double sum = 0, lo = 1, hi = -1;
  int same_seed_diff = 0;
  for (int i = 0; i < N * 16; i++)
    {
      g_assert_cmpfloat (fabs (va[i]), <=, c1.initial_range);
      sum += va[i], lo = MIN (lo, va[i]), hi = MAX (hi, va[i]);
      same_seed_diff += va[i] != vs[i];
    }
  g_assert_cmpfloat (hi - lo, >, 1.8 * c1.initial_range); /* spread over the range */
  g_assert_cmpfloat (fabs (sum / (N * 16)), <, 0.1 * c1.initial_range);
  g_assert_cmpint (same_seed_diff, >, N * 16 - 5); /* another seed: other values */
}

/* Pushes two steps on one row and checks each rule against its formula here. */
static void
check_rule (KsSparseRule rule)
{
  enum { D = 3 };
  KsSparseConfig c = config (D, rule, 0, 4);
  c.learning_rate = 0.1;
  c.initial_g2sum = 3;
  g_autoptr (KsSparseTable) t = ks_sparse_table_new ("r", &c);
  const guint64 id = 42;
  g_autofree float *w0 = row_of (t, id, TRUE);
  double w[D + 1], g2[2] = { 0, 0 }, m[D + 1] = { 0 }, v[D + 1] = { 0 };
  const float grads[2][D + 1] = { { 0.6f, -1.2f, 2.4f, 0.3f }, { -0.5f, 0.25f, 1.0f, -3.0f } };
  const float shows[2] = { 2, 0 }; /* the second: shows <= 0 counts as 1 */

  for (int j = 0; j <= D; j++)
    w[j] = w0[j];
  for (int step = 0; step < 2; step++)
    {
      push1 (t, id, grads[step], shows[step], 0);
      double n = shows[step] > 0 ? shows[step] : 1, sq[2] = { 0, 0 };
      for (int j = 0; j <= D; j++)
        {
          double g = grads[step][j] / n;
          int part = j == 0 ? 0 : 1;
          int t_step = step + 1;
          switch (rule)
            {
            case KS_SPARSE_RULE_ADAGRAD: /* ratio = lr sqrt(g0 / (g0 + g2sum)) per part */
              w[j] -= c.learning_rate * sqrt (c.initial_g2sum / (c.initial_g2sum + g2[part])) * g;
              sq[part] += g * g;
              break;
            case KS_SPARSE_RULE_SGD:
              w[j] -= c.learning_rate * g;
              break;
            case KS_SPARSE_RULE_ADAM: /* bias-corrected, per-part step count */
              m[j] = c.beta1 * m[j] + (1 - c.beta1) * g;
              v[j] = c.beta2 * v[j] + (1 - c.beta2) * g * g;
              w[j] -= c.learning_rate * (m[j] / (1 - pow (c.beta1, t_step)))
                      / (sqrt (v[j] / (1 - pow (c.beta2, t_step))) + c.epsilon);
              break;
            }
        }
      g2[0] += sq[0] / 1, g2[1] += sq[1] / D; /* g2sum grows by the part's mean square */
    }
  g_autofree float *got = row_of (t, id, FALSE);
  for (int j = 0; j <= D; j++)
    g_assert_cmpfloat_with_epsilon (got[j], w[j], 1e-6);
  /* distinct from plain SGD wherever the rule is not */
  if (rule != KS_SPARSE_RULE_SGD)
    g_assert_cmpfloat (fabs (got[3] - (w0[3] - 0.1 * (0.3 / 2 - 3.0))), >, 1e-3);
}

static void
test_adagrad (Fixture *f, gconstpointer data)
{
  check_rule (KS_SPARSE_RULE_ADAGRAD);
}

static void
test_sgd (Fixture *f, gconstpointer data)
{
  check_rule (KS_SPARSE_RULE_SGD);
}

static void
test_adam (Fixture *f, gconstpointer data)
{
  check_rule (KS_SPARSE_RULE_ADAM);
  /* embedx made after the first push: its step count starts then, embed's before */
  KsSparseConfig c = config (1, KS_SPARSE_RULE_ADAM, 0.2, 2);
  c.learning_rate = 0.01;
  g_autoptr (KsSparseTable) t = ks_sparse_table_new ("adam", &c);
  g_autofree float *w0 = row_of (t, 5, TRUE);
  const float g[2] = { 1, 2 };
  push1 (t, 5, g, 2, 0); /* score 0.2: embedx made, not stepped */
  g_autofree float *w1 = row_of (t, 5, FALSE);
  push1 (t, 5, g, 1, 0);
  g_autofree float *w2 = row_of (t, 5, FALSE);
  /* a first Adam step moves by lr (m/(1-b1) = g, sqrt(v/(1-b2)) = |g|); later steps with
   * the same g as well, but embed's second step with g=1 after g=0.5 moves by less */
  g_assert_cmpfloat_with_epsilon (w2[1], w1[1] - 0.01, 1e-6);
  double m1 = 0.1 * 0.5, v1 = 0.001 * 0.25, m2 = 0.9 * m1 + 0.1, v2 = 0.999 * v1 + 0.001;
  double e2 = w0[0] - 0.01 - 0.01 * (m2 / (1 - 0.81)) / (sqrt (v2 / (1 - 0.999 * 0.999)) + 1e-8);
  g_assert_cmpfloat_with_epsilon (w2[0], e2, 1e-6);
}

static void
test_clip (Fixture *f, gconstpointer data)
{
  KsSparseConfig c = config (2, KS_SPARSE_RULE_SGD, 0, 2);
  c.learning_rate = 1;
  c.min_bound = -0.5;
  c.max_bound = 0.25;
  g_autoptr (KsSparseTable) t = ks_sparse_table_new ("clip", &c);
  const float g[3] = { -100, 100, 0.1f };
  push1 (t, 9, g, 1, 0);
  g_autofree float *w = row_of (t, 9, FALSE);
  g_assert_cmpfloat (w[0], ==, 0.25f);
  g_assert_cmpfloat (w[1], ==, -0.5f);
  g_assert_cmpfloat (w[2], >, -0.11f);
  g_assert_cmpfloat (w[2], <, -0.09f);
}

static void
test_embedx_threshold (Fixture *f, gconstpointer data)
{
  KsSparseConfig c = config (3, KS_SPARSE_RULE_ADAGRAD, 1.0, 4);
  KsSparseConfig c0 = config (3, KS_SPARSE_RULE_ADAGRAD, 0, 4);
  g_autoptr (KsSparseTable) t = ks_sparse_table_new ("x", &c);
  g_autoptr (KsSparseTable) ref = ks_sparse_table_new ("ref", &c0);
  const float g[4] = { 0.5f, 1, 1, 1 };
  gboolean made;
  float zeros[3] = { 0 };

  for (int i = 1; i <= 3; i++)
    {
      /* score 0.4, 0.8, then 1.2: 4 shows, no click, nonclk_coeff 0.1 */
      push1 (t, 77, g, 4, 0);
      g_assert_true (ks_sparse_table_row_stats (t, 77, NULL, NULL, NULL, NULL, &made));
      g_assert_cmpint (made, ==, i == 3);
      g_autofree float *w = row_of (t, 77, TRUE);
      if (i < 3)
        g_assert_cmpmem (w + 1, sizeof zeros, zeros, sizeof zeros);
    }
  /* made with the seeded initial values, untouched by the pushes before */
  g_autofree float *w = row_of (t, 77, FALSE), *init = row_of (ref, 77, TRUE);
  g_assert_cmpmem (w + 1, sizeof zeros, init + 1, sizeof zeros);
  g_assert_cmpfloat (w[0], !=, init[0]);
  /* the next push steps embedx with its own g2sum still 0: ratio = lr */
  push1 (t, 77, g, 1, 1);
  g_autofree float *w2 = row_of (t, 77, FALSE);
  for (int j = 1; j < 4; j++)
    g_assert_cmpfloat_with_epsilon (w2[j], init[j] - 0.05 * 1, 1e-7);
  /* a click weighs click_coeff: one show with a click reaches 1.0 at once */
  push1 (t, 78, g, 1, 1);
  g_assert_true (ks_sparse_table_row_stats (t, 78, NULL, NULL, NULL, NULL, &made));
  g_assert_true (made);
}

static void
test_shrink (Fixture *f, gconstpointer data)
{
  KsSparseConfig c = config (2, KS_SPARSE_RULE_ADAGRAD, 0, 4);
  c.delete_after_unseen_days = 2;
  g_autoptr (KsSparseTable) t = ks_sparse_table_new ("s", &c);
  const float g[3] = { 0 };
  float show, click, delta;
  int unseen;

  push1 (t, 1, g, 100, 10); /* score 19: kept while seen */
  push1 (t, 2, g, 8.5f, 0); /* score 0.85 -> 0.833 -> 0.816 -> 0.800 -> 0.784: day 4 */
  push1 (t, 3, g, 100, 0);  /* score 10, never seen again: unseen 3 > 2 on day 3 */
  /* score 0: day 1 */
  g_assert_true (ks_sparse_table_pull (t, (guint64[]) { 4 }, 1, (float[3]) { 0 }, NULL));
  g_assert_cmpuint (ks_sparse_table_size (t), ==, 4);

  g_assert_cmpuint (ks_sparse_table_shrink (t), ==, 1);
  g_assert_false (ks_sparse_table_row_stats (t, 4, NULL, NULL, NULL, NULL, NULL));
  g_assert_true (ks_sparse_table_row_stats (t, 1, &show, &click, &delta, &unseen, NULL));
  g_assert_cmpfloat (show, ==, (float) (100 * 0.98));
  g_assert_cmpfloat (click, ==, (float) (10 * 0.98));
  g_assert_cmpfloat_with_epsilon (delta, 19, 1e-5); /* shrink leaves delta_score */
  g_assert_cmpint (unseen, ==, 1);
  push1 (t, 1, g, 1, 0);
  g_assert_true (ks_sparse_table_row_stats (t, 1, NULL, NULL, NULL, &unseen, NULL));
  g_assert_cmpint (unseen, ==, 0);

  g_assert_cmpuint (ks_sparse_table_shrink (t), ==, 0); /* day 2: unseen 2 is kept */
  push1 (t, 1, g, 0, 0); /* seen, no new shows */
  push1 (t, 2, g, 0, 0);
  g_assert_cmpuint (ks_sparse_table_shrink (t), ==, 1); /* day 3: id 3 (unseen 3) */
  g_assert_false (ks_sparse_table_row_stats (t, 3, NULL, NULL, NULL, NULL, NULL));
  g_assert_true (ks_sparse_table_row_stats (t, 2, NULL, NULL, NULL, NULL, NULL));
  g_assert_cmpuint (ks_sparse_table_shrink (t), ==, 1); /* day 4: id 2's score < 0.8 */
  g_assert_false (ks_sparse_table_row_stats (t, 2, NULL, NULL, NULL, NULL, NULL));
  g_assert_cmpuint (ks_sparse_table_size (t), ==, 1);

  /* many rows: deletion keeps every other row findable */
  push1 (t, 1, g, 0, 0);
  for (guint64 id = 10; id < 5010; id++)
    push1 (t, id, g, id % 2 ? 100 : 1, 0);
  g_assert_cmpuint (ks_sparse_table_shrink (t), ==, 2500);
  for (guint64 id = 10; id < 5010; id++)
    g_assert_cmpint (ks_sparse_table_row_stats (t, id, NULL, NULL, NULL, NULL, NULL), ==, id % 2);
}

static char *
save (Fixture *f, KsSparseTable *t, const char *name, KsSparseSaveMode mode, gsize expect)
{
  g_autoptr (GError) error = NULL;
  char *path = g_build_filename (f->dir, name, NULL);
  gsize n = 0;
  g_assert_true (ks_sparse_table_save (t, path, mode, &n, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (n, ==, expect);
  return path;
}

static void
load (KsSparseTable *t, const char *path, gboolean replace, gsize expect)
{
  g_autoptr (GError) error = NULL;
  gsize n = 0;
  g_assert_true (ks_sparse_table_load (t, (const char *[]) { path }, 1, 0, 1, replace, &n, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (n, ==, expect);
}

static float
delta_of (KsSparseTable *t, guint64 id)
{
  float d = -1;
  g_assert_true (ks_sparse_table_row_stats (t, id, NULL, NULL, &d, NULL, NULL));
  return d;
}

static void
test_save_modes (Fixture *f, gconstpointer data)
{
  KsSparseConfig c = config (3, KS_SPARSE_RULE_ADAGRAD, 1, 4);
  g_autoptr (KsSparseTable) t = ks_sparse_table_new ("m", &c);
  const float g[4] = { 0.1f, 0.2f, 0.3f, 0.4f };
  KsSparseSaveMode mode;

  g_assert_true (ks_sparse_save_mode_from_name ("delta", &mode));
  g_assert_cmpint (mode, ==, KS_SPARSE_SAVE_DELTA);
  g_assert_false (ks_sparse_save_mode_from_name ("full", &mode));
  g_assert_cmpstr (ks_sparse_save_mode_name (KS_SPARSE_SAVE_BASE), ==, "base");

  push1 (t, 1, g, 20, 0); /* score 2.0 */
  push1 (t, 2, g, 5, 0);  /* 0.5: below base_threshold 1.5 */
  push1 (t, 3, g, 10, 1); /* 1.9 */
  push1 (t, 3, g, 1, 0);  /* 2.0, embedx stepped once */
  g_assert_true (ks_sparse_table_pull (t, (guint64[]) { 4 }, 1, (float[4]) { 0 }, NULL));

  g_autofree char *all = save (f, t, "all", KS_SPARSE_SAVE_ALL, 4);
  g_assert_cmpfloat_with_epsilon (delta_of (t, 1), 2.0, 1e-6); /* all resets nothing */
  g_autoptr (KsSparseTable) a = ks_sparse_table_new ("m", &c);
  load (a, all, TRUE, 4);
  g_assert_cmpuint (ks_sparse_table_size (a), ==, 4);
  for (guint64 id = 1; id <= 4; id++)
    assert_same_row (t, a, id);

  g_autofree char *d1 = save (f, t, "d1", KS_SPARSE_SAVE_DELTA, 2); /* 1 and 3 */
  g_assert_cmpfloat (delta_of (t, 1), ==, 0);
  g_assert_cmpfloat (delta_of (t, 3), ==, 0);
  g_assert_cmpfloat_with_epsilon (delta_of (t, 2), 0.5, 1e-6); /* not saved: kept */
  g_autofree char *d1b = save (f, t, "d1b", KS_SPARSE_SAVE_DELTA, 0);
  g_autoptr (KsSparseTable) d = ks_sparse_table_new ("m", &c);
  load (d, d1, TRUE, 2);
  g_assert_false (ks_sparse_table_row_stats (d, 2, NULL, NULL, NULL, NULL, NULL));
  g_assert_cmpfloat (delta_of (d, 1), ==, 0); /* as the table is after the save */
  assert_same_row (t, d, 1);

  push1 (t, 1, g, 5, 0); /* delta 0.5 */
  push1 (t, 3, g, 1, 0); /* delta 0.1 < delta_threshold */
  g_autofree char *d2 = save (f, t, "d2", KS_SPARSE_SAVE_DELTA, 1);
  g_assert_cmpfloat_with_epsilon (delta_of (t, 3), 0.1, 1e-6);

  push1 (t, 5, g, 30, 0); /* score 3, in the base only */
  g_autofree char *base = save (f, t, "base", KS_SPARSE_SAVE_BASE, 3); /* 1, 3, 5 */
  for (guint64 id = 1; id <= 5; id++)
    g_assert_cmpfloat (delta_of (t, id), ==, 0); /* every row's, 2 and 4 too */
  g_autoptr (KsSparseTable) b = ks_sparse_table_new ("m", &c);
  load (b, base, TRUE, 3);
  g_autofree float *old1 = row_of (b, 1, FALSE);

  push1 (t, 1, g, 10, 0);
  push1 (t, 3, g, 10, 1);
  g_autofree char *d3 = save (f, t, "d3", KS_SPARSE_SAVE_DELTA, 2);
  load (b, d3, FALSE, 2); /* the delta over its base */
  g_assert_cmpuint (ks_sparse_table_size (b), ==, 3);
  for (guint64 id = 1; id <= 5; id += 2)
    assert_same_row (t, b, id);
  g_autofree float *new1 = row_of (b, 1, FALSE);
  g_assert_cmpfloat (new1[1], !=, old1[1]);
  load (b, d3, TRUE, 2); /* replace: the base's rows go */
  g_assert_cmpuint (ks_sparse_table_size (b), ==, 2);
  g_assert_false (ks_sparse_table_row_stats (b, 5, NULL, NULL, NULL, NULL, NULL));

  /* rows unseen longer than delta_keep_days stay out of a delta */
  KsSparseConfig ck = c;
  ck.delta_keep_days = 1;
  g_autoptr (KsSparseTable) k = ks_sparse_table_new ("k", &ck);
  push1 (k, 8, g, 40, 0);
  push1 (k, 9, g, 40, 0);
  ks_sparse_table_shrink (k);
  push1 (k, 9, g, 1, 0);
  ks_sparse_table_shrink (k);
  g_autofree char *dk = save (f, k, "dk", KS_SPARSE_SAVE_DELTA, 1); /* 9 (1 day), not 8 (2) */
  g_assert_cmpfloat (delta_of (k, 9), ==, 0);
  g_assert_cmpfloat (delta_of (k, 8), >, 3);
}

static void
test_reshard (Fixture *f, gconstpointer data)
{
  enum { N = 3000, D = 5 };
  KsSparseConfig c = config (D, KS_SPARSE_RULE_ADAGRAD, 2, 16);
  g_autoptr (KsSparseTable) ref = ks_sparse_table_new ("r", &c);
  KsSparseTable *old[2], *nu[3];
  g_autoptr (GRand) rng = g_rand_new_with_seed (11);
  g_autofree guint64 *ids = g_new (guint64, N);
  float g[D + 1];

  for (int s = 0; s < 2; s++)
    {
      KsSparseConfig cs = c;
      cs.shard_num = 5 + 3 * s;
      old[s] = ks_sparse_table_new ("r", &cs);
    }
  for (int i = 0; i < N; i++)
    {
      ids[i] = ((guint64) g_rand_int (rng) << 32 | g_rand_int (rng)) | 1u << (i % 2);
      float show = (float) g_rand_int_range (rng, 0, 40), click = show > 0 ? 1 : 0;
      for (int j = 0; j <= D; j++)
        g[j] = (float) g_rand_double_range (rng, -1, 1);
      push1 (ref, ids[i], g, show, click);
      push1 (old[ids[i] % 2], ids[i], g, show, click);
      push1 (ref, ids[i], g, 1, 0);
      push1 (old[ids[i] % 2], ids[i], g, 1, 0);
    }
  g_autofree char *p0 = save (f, old[0], "s0", KS_SPARSE_SAVE_ALL, ks_sparse_table_size (old[0]));
  g_autofree char *p1 = save (f, old[1], "s1", KS_SPARSE_SAVE_ALL, ks_sparse_table_size (old[1]));
  const char *paths[] = { p0, p1 };
  gsize total = 0;
  for (int s = 0; s < 3; s++)
    {
      g_autoptr (GError) error = NULL;
      KsSparseConfig cs = c;
      cs.shard_num = 7;
      nu[s] = ks_sparse_table_new ("r", &cs);
      g_assert_true (ks_sparse_table_pull (nu[s], (guint64[]) { 3 * 1000 + s }, 1,
                                           (float[D + 1]) { 0 }, NULL));
      gsize n;
      g_assert_true (ks_sparse_table_load (nu[s], paths, 2, s, 3, TRUE, &n, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (n, ==, ks_sparse_table_size (nu[s]));
      total += n;
    }
  g_assert_cmpuint (total, ==, ks_sparse_table_size (ref));
  for (int i = 0; i < N; i++)
    {
      int home = (int) (ids[i] % 3);
      for (int s = 0; s < 3; s++)
        g_assert_cmpint (ks_sparse_table_row_stats (nu[s], ids[i], NULL, NULL, NULL, NULL, NULL),
                         ==, s == home);
      assert_same_row (ref, nu[home], ids[i]);
      /* the optimizer state came along: the same push gives the same bits */
      for (int j = 0; j <= D; j++)
        g[j] = 0.5f - (float) j / 8;
      push1 (ref, ids[i], g, 2, 0);
      push1 (nu[home], ids[i], g, 2, 0);
      assert_same_row (ref, nu[home], ids[i]);
    }
  for (int s = 0; s < 2; s++)
    ks_sparse_table_free (old[s]);
  for (int s = 0; s < 3; s++)
    ks_sparse_table_free (nu[s]);
}

static void
write_bytes (const char *path, const char *data, gsize n)
{
  g_autoptr (GError) error = NULL;
  g_assert_true (g_file_set_contents (path, data, (gssize) n, &error));
}

static void
test_bad_files (Fixture *f, gconstpointer data)
{
  KsSparseConfig c = config (3, KS_SPARSE_RULE_ADAGRAD, 0, 4);
  KsSparseConfig c7 = config (7, KS_SPARSE_RULE_ADAGRAD, 0, 4);
  KsSparseConfig cs = config (3, KS_SPARSE_RULE_SGD, 0, 4);
  g_autoptr (KsSparseTable) src = ks_sparse_table_new ("b", &c);
  g_autoptr (KsSparseTable) src7 = ks_sparse_table_new ("b", &c7);
  g_autoptr (KsSparseTable) srcs = ks_sparse_table_new ("b", &cs);
  g_autoptr (KsSparseTable) t = ks_sparse_table_new ("b", &c);
  const float g[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
  for (guint64 id = 1; id <= 20; id++)
    {
      push1 (src, id, g, 3, 1);
      push1 (src7, id, g, 3, 1);
      push1 (srcs, id, g, 3, 1);
    }
  for (guint64 id = 100; id < 110; id++)
    push1 (t, id, g, 2, 0);
  g_autofree float *before = row_of (t, 105, FALSE);
  float show_before;
  g_assert_true (ks_sparse_table_row_stats (t, 105, &show_before, NULL, NULL, NULL, NULL));

  g_autofree char *good = save (f, src, "good", KS_SPARSE_SAVE_ALL, 20);
  g_autofree char *dim7 = save (f, src7, "dim7", KS_SPARSE_SAVE_ALL, 20);
  g_autofree char *sgd = save (f, srcs, "sgd", KS_SPARSE_SAVE_ALL, 20);
  g_autofree char *bytes = NULL;
  gsize n;
  g_assert_true (g_file_get_contents (good, &bytes, &n, NULL));
  /* header, an empty identity block (its length), rows, SHA-256 */
  gsize rec = (n - 68) / 20;
  g_assert_cmpuint (68 + 20 * rec, ==, n);

  g_autofree char *cut = g_build_filename (f->dir, "cut", NULL);
  write_bytes (cut, bytes, n - 10);
  g_autofree char *cut_rec = g_build_filename (f->dir, "cut-record", NULL);
  write_bytes (cut_rec, bytes, n - rec);
  g_autofree char *flip = g_build_filename (f->dir, "flip", NULL);
  bytes[36 + 7 * rec + rec / 2] ^= 0x10;
  write_bytes (flip, bytes, n);
  bytes[36 + 7 * rec + rec / 2] ^= 0x10;
  g_autofree char *magic = g_build_filename (f->dir, "magic", NULL);
  bytes[2] = 'X';
  write_bytes (magic, bytes, n);
  g_autofree char *missing = g_build_filename (f->dir, "missing", NULL);

  const struct {
    const char *path;
    int code;
  } cases[] = {
    { cut, KS_CHECKPOINT_ERROR_CORRUPT },   { cut_rec, KS_CHECKPOINT_ERROR_CORRUPT },
    { flip, KS_CHECKPOINT_ERROR_CORRUPT },  { magic, KS_CHECKPOINT_ERROR_FORMAT },
    { dim7, KS_CHECKPOINT_ERROR_MISMATCH }, { sgd, KS_CHECKPOINT_ERROR_MISMATCH },
    { missing, KS_CHECKPOINT_ERROR_IO },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    for (int replace = 0; replace < 2; replace++)
      {
        g_autoptr (GError) error = NULL;
        /* the bad file second: the good one before it must not have gone in */
        const char *paths[] = { good, cases[i].path };
        g_assert_false (ks_sparse_table_load (t, paths, 2, 0, 1, replace, NULL, &error));
        g_assert_error (error, KS_CHECKPOINT_ERROR, cases[i].code);
        g_test_message ("%s", error->message);
        g_assert_nonnull (strstr (error->message, cases[i].path));
        g_assert_cmpuint (ks_sparse_table_size (t), ==, 10);
        g_assert_false (ks_sparse_table_row_stats (t, 1, NULL, NULL, NULL, NULL, NULL));
        g_autofree float *now = row_of (t, 105, FALSE);
        float show;
        g_assert_true (ks_sparse_table_row_stats (t, 105, &show, NULL, NULL, NULL, NULL));
        g_assert_cmpmem (now, 4 * sizeof (float), before, 4 * sizeof (float));
        g_assert_cmpfloat (show, ==, show_before);
      }
  load (t, good, FALSE, 20); /* and the good file alone loads */
  g_assert_cmpuint (ks_sparse_table_size (t), ==, 30);
  /* no temporary files left behind by the saves */
  g_autoptr (GDir) dir = g_dir_open (f->dir, 0, NULL);
  for (const char *name; (name = g_dir_read_name (dir)) != NULL;)
    g_assert_null (strstr (name, ".tmp-"));
  /* a save that cannot be written is an error and leaves no file */
  g_autoptr (GError) error = NULL;
  g_autofree char *nodir = g_build_filename (f->dir, "no", "such", NULL);
  g_assert_false (ks_sparse_table_save (t, nodir, KS_SPARSE_SAVE_ALL, NULL, &error));
  g_assert_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO);
}

/* `bytes` (a file of `n` bytes) with its SHA-256 recomputed, as a forger would. */
static void
reseal (char *bytes, gsize n)
{
  gsize dlen = 32;
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  g_checksum_update (sum, (const guint8 *) bytes, n - 32);
  g_checksum_get_digest (sum, (guint8 *) bytes + n - 32, &dlen);
}

/* A file names its save, server and table; a load that requires another is refused naming
 * the file, what it holds and what was expected. Rows no save writes (a value that is not
 * finite, an id twice, an id of another server), sealed again after the edit, are refused
 * too; the table is as it was. */
static void
test_identity_and_rows (Fixture *f, gconstpointer data)
{
  KsSparseConfig c = config (3, KS_SPARSE_RULE_ADAGRAD, 0, 4);
  g_autoptr (KsSparseTable) src = ks_sparse_table_new ("id", &c);
  g_autoptr (KsSparseTable) t = ks_sparse_table_new ("id", &c);
  g_autoptr (GHashTable) mine = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GHashTable) other = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GError) error = NULL;
  const float g[4] = { 1, 2, 3, 4 };
  gsize n_rows = 0;

  for (guint64 id = 2; id <= 40; id += 2) /* server 0 of 2's ids */
    push1 (src, id, g, 3, 1);
  g_hash_table_insert (mine, "save_id", "aaaa");
  g_hash_table_insert (mine, "table", "id");
  g_hash_table_insert (other, "save_id", "bbbb");
  g_hash_table_insert (other, "table", "id");
  g_autofree char *path = g_build_filename (f->dir, "s0", NULL);
  g_assert_true (ks_sparse_table_save_with (src, path, KS_SPARSE_SAVE_ALL, mine, &n_rows, &error));
  g_assert_no_error (error);
  KsSparseFileCheck ok = { mine, 0, 2, "job.json" }, wrong = { other, 0, 2, "job.json" };
  KsSparseFileCheck as_server1 = { mine, 1, 2, "job.json" };
  const char *paths[] = { path };
  g_assert_true (ks_sparse_table_load_with (t, paths, &ok, 1, 0, 1, TRUE, &n_rows, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (n_rows, ==, 20);
  g_assert_false (ks_sparse_table_load_with (t, paths, &wrong, 1, 0, 1, TRUE, NULL, &error));
  g_assert_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_MISMATCH);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, path));
  g_assert_nonnull (strstr (error->message, "holds save_id aaaa but job.json expects save_id bbbb"));
  g_clear_error (&error);
  /* server 0's file where server 1's belongs */
  g_assert_false (ks_sparse_table_load_with (t, paths, &as_server1, 1, 0, 1, TRUE, NULL, &error));
  g_assert_nonnull (strstr (error->message, "a row of server 0 of 2, but this is server 1's file"));
  g_clear_error (&error);
  /* a file without identity where one is required */
  g_autofree char *bare = g_build_filename (f->dir, "bare", NULL);
  g_assert_true (ks_sparse_table_save (src, bare, KS_SPARSE_SAVE_ALL, NULL, &error));
  paths[0] = bare;
  g_assert_false (ks_sparse_table_load_with (t, paths, &ok, 1, 0, 1, TRUE, NULL, &error));
  g_assert_nonnull (strstr (error->message, "carries no save identity"));
  g_clear_error (&error);

  /* rows edited and sealed again */
  g_autofree char *bytes = NULL;
  gsize n;
  g_assert_true (g_file_get_contents (path, &bytes, &n, NULL));
  gsize rec = 8 + 16 + (4 + 2) * 4, rows_at = n - 32 - 20 * rec;
  g_assert_cmpuint ((n - 32 - rows_at) % rec, ==, 0);
  g_autofree char *copy = g_memdup2 (bytes, n);
  float nan_value = NAN;
  guint64 dup, odd = 7;
  struct {
    const char *name, *want;
    gsize at;
    const void *with;
    gsize len;
  } edits[] = {
    { "nan", "not finite", rows_at + 3 * rec + 8 + 16, &nan_value, 4 },
    { "dup", "is saved twice", rows_at + 5 * rec, NULL, 8 },
    { "odd", "a row of server 1 of 2", rows_at + 9 * rec, &odd, 8 },
  };
  memcpy (&dup, bytes + rows_at + 4 * rec, 8);
  edits[1].with = &dup;
  /* an identity that names a key twice (the second save_id would win a lookup) */
  char *table = NULL;
  for (gsize at = 0; table == NULL && at + 9 <= n; at++)
    if (memcmp (bytes + at, "table=id\n", 9) == 0)
      table = bytes + at;
  g_assert_nonnull (table);
  memcpy (copy, bytes, n);
  memcpy (copy + (table - bytes), "save_id=\n", 9);
  reseal (copy, n);
  g_autofree char *twice = g_build_filename (f->dir, "twice", NULL);
  write_bytes (twice, copy, n);
  paths[0] = twice;
  g_assert_false (ks_sparse_table_load_with (t, paths, &ok, 1, 0, 1, TRUE, NULL, &error));
  g_assert_nonnull (strstr (error->message, "gives 'save_id' twice"));
  g_clear_error (&error);
  for (guint i = 0; i < G_N_ELEMENTS (edits); i++)
    {
      g_autofree char *forged = g_build_filename (f->dir, edits[i].name, NULL);
      memcpy (copy, bytes, n);
      memcpy (copy + edits[i].at, edits[i].with, edits[i].len);
      reseal (copy, n);
      write_bytes (forged, copy, n);
      paths[0] = forged;
      g_assert_false (ks_sparse_table_load_with (t, paths, &ok, 1, 0, 1, TRUE, NULL, &error));
      g_test_message ("%s", error->message);
      g_assert_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_CORRUPT);
      g_assert_nonnull (strstr (error->message, forged));
      g_assert_nonnull (strstr (error->message, edits[i].want));
      g_clear_error (&error);
      g_assert_cmpuint (ks_sparse_table_size (t), ==, 20); /* as the good load left it */
    }
}

static void
test_memory (Fixture *f, gconstpointer data)
{
  enum { N = 100000 };
  KsSparseConfig c = config (15, KS_SPARSE_RULE_ADAGRAD, 0, 64);
  g_autoptr (KsSparseTable) t = ks_sparse_table_new ("mem", &c);
  g_autofree guint64 *ids = g_new (guint64, N);
  g_autofree float *out = g_new (float, (gsize) N * 16);
  for (int i = 0; i < N; i++)
    ids[i] = (guint64) i * 2654435761u + 17;
  g_assert_true (ks_sparse_table_pull (t, ids, N, out, NULL));
  g_assert_cmpuint (ks_sparse_table_size (t), ==, N);
  gboolean made;
  g_assert_true (ks_sparse_table_row_stats (t, ids[N / 2], NULL, NULL, NULL, NULL, &made));
  g_assert_true (made);
  double per_row = (double) ks_sparse_table_memory (t) / N;
  g_test_message ("memory: %.1f bytes per row (%d rows, embedx_dim 15, adagrad)", per_row, N);
  g_assert_cmpfloat (per_row, >=, 64 + 8 + 12); /* values, state, statistics at least */
  g_assert_cmpfloat (per_row, <=, 128);
}

static void
test_config_read (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsConfig) kc = ks_test_config (
      "[table.emb]\nembedx_dim = 15\nrule = adam\nlearning_rate = 0.01\nseed = 7\n", f->dir,
      &error);
  g_assert_no_error (error);
  g_assert_true (ks_config_validate (kc, &error));
  KsSparseConfig c, d;
  ks_sparse_config_read (kc, "emb", &c);
  ks_sparse_config_defaults (&d);
  g_assert_cmpint (c.embedx_dim, ==, 15);
  g_assert_cmpint (c.rule, ==, KS_SPARSE_RULE_ADAM);
  g_assert_cmpfloat (c.learning_rate, ==, 0.01);
  g_assert_cmpuint (c.seed, ==, 7);
  g_assert_cmpfloat (c.embedx_threshold, ==, d.embedx_threshold);
  ks_sparse_config_read (kc, "other", &c); /* not in the file: the template's defaults */
  g_assert_cmpint (c.embedx_dim, ==, d.embedx_dim);
  g_assert_cmpint (c.rule, ==, d.rule);
  g_assert_cmpfloat (c.learning_rate, ==, d.learning_rate);
  g_assert_cmpfloat (c.delete_threshold, ==, d.delete_threshold);
  g_assert_cmpint (c.shard_num, ==, d.shard_num);
  g_assert_cmpuint (c.seed, ==, d.seed);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(name, fn) g_test_add ("/sparse/" name, Fixture, NULL, setup, fn, teardown)
  ADD ("on-demand", test_on_demand);
  ADD ("initial-values", test_initial_values);
  ADD ("adagrad", test_adagrad);
  ADD ("sgd", test_sgd);
  ADD ("adam", test_adam);
  ADD ("clip", test_clip);
  ADD ("embedx-threshold", test_embedx_threshold);
  ADD ("shrink", test_shrink);
  ADD ("save-modes", test_save_modes);
  ADD ("reshard", test_reshard);
  ADD ("bad-files", test_bad_files);
  ADD ("identity-and-rows", test_identity_and_rows);
  ADD ("memory", test_memory);
  ADD ("config-read", test_config_read);
  return g_test_run ();
}
