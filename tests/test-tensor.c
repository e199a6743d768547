/* Tensors and arenas on the CPU backend: shapes, copies, and the arena's one buffer. */
#include "testutil.h"

#include <string.h>

typedef CpuFixture Fixture;

static void
setup (Fixture *f, gconstpointer data)
{
  ks_test_cpu_setup (f, NULL);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  ks_test_cpu_teardown (f);
}

static void
test_tensor (Fixture *f, gconstpointer data)
{
  const gint64 shape[] = { 2, 3, 4 };
  g_autoptr (GError) error = NULL;
  g_autoptr (KsTensor) t = ks_tensor_new (f->c, KS_DTYPE_INT64, 3, shape, &error);
  gint64 in[24], out[24];

  g_assert_no_error (error);
  g_assert_cmpuint (t->numel, ==, 24);
  g_assert_cmpuint (ks_tensor_nbytes (t), ==, 24 * 8);
  g_autofree char *s = ks_tensor_shape_string (t);
  g_assert_cmpstr (s, ==, "[2, 3, 4]");
  g_assert_true (ks_tensor_to_host (t, out, sizeof out, NULL));
  for (int i = 0; i < 24; i++)
    g_assert_cmpint (out[i], ==, 0); /* new tensors are zero */
  for (int i = 0; i < 24; i++)
    in[i] = i * 1000003LL;
  g_assert_true (ks_tensor_from_host (t, in, sizeof in, NULL));
  g_assert_true (ks_tensor_to_host (t, out, sizeof out, NULL));
  g_assert_cmpmem (in, sizeof in, out, sizeof out);

  g_assert_false (ks_tensor_from_host (t, in, 8, &error));
  g_assert_cmpstr (error->message, ==, "a int64 tensor of shape [2, 3, 4] holds 192 bytes, not 8");

  g_autoptr (KsTensor) scalar = ks_tensor_new (f->c, KS_DTYPE_FLOAT32, 0, NULL, NULL);
  g_autofree char *s0 = ks_tensor_shape_string (scalar);
  g_assert_cmpstr (s0, ==, "[]");
  g_assert_cmpuint (scalar->numel, ==, 1);
}

static void
test_bad_shapes (Fixture *f, gconstpointer data)
{
  const gint64 zero[] = { 3, 0 }, huge[] = { G_MAXINT64 / 2, G_MAXINT64 / 2 };
  const gint64 nine[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
  g_autoptr (GError) error = NULL;

  g_assert_null (ks_tensor_new (f->c, KS_DTYPE_FLOAT32, 2, zero, &error));
  g_assert_cmpstr (error->message, ==, "dimension 1 of a tensor is 0; each must be at least 1");
  g_clear_error (&error);
  g_assert_null (ks_tensor_new (f->c, KS_DTYPE_FLOAT32, 2, huge, &error));
  g_assert_true (g_str_has_prefix (error->message, "a tensor of that shape would not fit"));
  g_clear_error (&error);
  g_assert_null (ks_tensor_new (f->c, KS_DTYPE_FLOAT32, 9, nine, &error));
  g_assert_cmpstr (error->message, ==, "a tensor has 0 to 8 dimensions, not 9");
}

static void
test_arena (Fixture *f, gconstpointer data)
{
  const gint64 w[] = { 3, 5 }, b[] = { 5 }, e[] = { 17, 2 };
  g_autoptr (KsArena) params = ks_arena_new (f->c);
  g_autoptr (GError) error = NULL;
  const char *name;
  gsize offset;

  g_assert_true (ks_arena_add (params, "fc.w", 2, w, NULL));
  g_assert_true (ks_arena_add (params, "fc.b", 1, b, NULL));
  g_assert_true (ks_arena_add (params, "emb", 2, e, NULL));
  g_assert_false (ks_arena_add (params, "fc.b", 1, b, &error));
  g_assert_cmpstr (error->message, ==, "arena: a tensor named 'fc.b' is already declared");
  g_clear_error (&error);
  g_assert_true (ks_arena_allocate (params, NULL));

  /* 15, 5 and 34 floats, each starting on a 16-float (64-byte) boundary */
  g_assert_cmpuint (ks_arena_count (params), ==, 3);
  g_assert_cmpuint (ks_arena_numel (params), ==, 16 + 16 + 48);
  const KsTensor *t = ks_arena_tensor_at (params, 2, &name, &offset);
  g_assert_cmpstr (name, ==, "emb");
  g_assert_cmpuint (offset, ==, 32);
  g_assert_true ((float *) t->data == ks_arena_data (params) + 32);
  g_assert_true (ks_arena_tensor (params, "fc.b") == ks_arena_tensor_at (params, 1, NULL, NULL));
  g_assert_null (ks_arena_tensor (params, "nope"));
  g_assert_cmpuint ((guintptr) ks_arena_tensor (params, "fc.b")->data % 64, ==, 0);

  /* writes through the views land in the one buffer, padding stays zero */
  const KsTensor *bias = ks_arena_tensor (params, "fc.b");
  float ones[5] = { 1, 1, 1, 1, 1 };
  g_assert_true (ks_tensor_from_host ((KsTensor *) bias, ones, sizeof ones, NULL));
  float *all = ks_arena_data (params);
  for (gsize i = 0; i < ks_arena_numel (params); i++)
    g_assert_cmpfloat (all[i], ==, i >= 16 && i < 21 ? 1 : 0);

  /* a gradient arena of the same layout */
  g_autoptr (KsArena) grads = ks_arena_new_like (params, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (ks_arena_numel (grads), ==, ks_arena_numel (params));
  ks_arena_tensor_at (grads, 2, &name, &offset);
  g_assert_cmpstr (name, ==, "emb");
  g_assert_cmpuint (offset, ==, 32);
  g_assert_true (ks_arena_data (grads) != ks_arena_data (params));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (!ks_test_have_openblas ())
    return g_test_run ();
  g_test_add ("/tensor/basics", Fixture, NULL, setup, test_tensor, teardown);
  g_test_add ("/tensor/bad-shapes", Fixture, NULL, setup, test_bad_shapes, teardown);
  g_test_add ("/tensor/arena", Fixture, NULL, setup, test_arena, teardown);
  return g_test_run ();
}
