/* Checkpoints: round trip and bitwise resume, safetensors layout, rotation, and every
 * damaged-file case ending in a named error with the model left untouched. */
#include "testutil.h"
#include <ksdist/tasks.h>

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { N = 32 };

typedef struct {
  KsModel *model;
  KsOptimizer *opt;
  KsExpr *loss;
} Trained;

typedef struct {
  CpuFixture cpu;
  char *dir;
  float xs[N * 2];
  gint64 ys[N];
  KsFeed feeds[2];
} Fixture;

static void
setup (Fixture *f, gconstpointer data)
{
  ks_test_cpu_setup (&f->cpu, (const char *const[]) { "optim.lr=0.05", NULL });
  f->dir = ks_test_tmpdir ();
  ks_task_generate (KS_TASK_RINGS, N, 0.01, 5, f->xs, f->ys);
  f->feeds[0] = (KsFeed) { "x", f->xs, sizeof f->xs };
  f->feeds[1] = (KsFeed) { "y", f->ys, sizeof f->ys };
}

static void
teardown (Fixture *f, gconstpointer data)
{
  ks_test_cpu_teardown (&f->cpu);
  ks_test_rmtree (f->dir);
  g_free (f->dir);
}

/* The same model every time (hidden width and an extra parameter vary it on purpose),
 * with dropout, so a resume must also continue the model's mask counter. */
static void
make_with (Fixture *f, Trained *t, gint64 hidden, gboolean extra, const char *optimizer)
{
  const gint64 xshape[] = { N, 2 }, yshape[] = { N }, eshape[] = { 3 };
  g_autoptr (GError) error = NULL;
  KsInit zero = { KS_INIT_CONSTANT, 0, 0, 0 };

  t->model = ks_model_new (f->cpu.c);
  KsExpr *x = ks_model_data (t->model, "x", 2, xshape, KS_DTYPE_FLOAT32, &error);
  KsExpr *y = ks_model_data (t->model, "y", 1, yshape, KS_DTYPE_INT64, &error);
  KsExpr *h = ks_dropout (ks_fc (x, hidden, KS_UNARY_TANH, "fc1", 1, &error), 0.2f, 3, &error);
  t->loss = ks_softmax_cross_entropy (ks_fc (h, 3, -1, "fc2", 2, &error), y, &error);
  if (extra)
    ks_model_parameter (t->model, "extra.w", 1, eshape, zero, &error);
  g_assert_no_error (error);
  g_assert_true (ks_model_init (t->model, &error));
  t->opt = ks_optimizer_new (f->cpu.registry, f->cpu.config, optimizer, &error);
  g_assert_true (ks_optimizer_minimize (t->opt, t->model, t->loss, NULL, 0, NULL, &error));
}

static void
make (Fixture *f, Trained *t, gint64 hidden, gboolean extra)
{
  make_with (f, t, hidden, extra, "adam");
}

static void
drop (Trained *t)
{
  ks_optimizer_free (t->opt);
  ks_model_free (t->model);
}

static void
steps (Fixture *f, Trained *t, int n)
{
  for (int i = 0; i < n; i++)
    g_assert_true (ks_optimizer_step (t->opt, f->feeds, 2, NULL));
}

static void
assert_same_parameters (Trained *a, Trained *b)
{
  KsArena *pa = ks_model_parameters (a->model), *pb = ks_model_parameters (b->model);
  g_assert_cmpmem (ks_arena_data (pa), ks_arena_numel (pa) * sizeof (float), ks_arena_data (pb),
                   ks_arena_numel (pb) * sizeof (float));
}

static void
test_round_trip_and_resume (Fixture *f, gconstpointer data)
{
  Trained a, b;
  g_autoptr (GError) error = NULL;
  g_autoptr (GHashTable) meta = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GHashTable) read_meta = NULL;
  gint64 step = 0;

  make (f, &a, 8, FALSE);
  steps (f, &a, 5);
  g_hash_table_insert (meta, "epoch_no", "2");
  g_assert_true (ks_checkpoint_save (f->dir, 5, a.model, a.opt, meta, 0, &error));
  g_assert_no_error (error);

  make (f, &b, 8, FALSE); /* fresh: other values until loaded */
  g_autofree char *latest = ks_checkpoint_latest (f->dir);
  g_autofree char *want = g_build_filename (f->dir, "checkpoint-5", NULL);
  g_assert_cmpstr (latest, ==, want);
  g_assert_true (ks_checkpoint_load (latest, b.model, b.opt, &step, &read_meta, &error));
  g_assert_no_error (error);
  g_assert_cmpint (step, ==, 5);
  g_assert_cmpstr (g_hash_table_lookup (read_meta, "epoch_no"), ==, "2");
  g_assert_cmpstr (g_hash_table_lookup (read_meta, "optimizer"), ==, "adam");
  g_assert_cmpstr (g_hash_table_lookup (read_meta, "rng_state"), ==, "5");
  g_assert_cmpuint (ks_model_rng_state (b.model), ==, 5);
  assert_same_parameters (&a, &b);

  /* both go on: with Adam's moments and step restored they stay bitwise equal */
  steps (f, &a, 7);
  steps (f, &b, 7);
  assert_same_parameters (&a, &b);
  drop (&a);
  drop (&b);
}

/* An optimizer without state (SGD): its file holds its name and step, no tensors. */
static void
test_stateless_optimizer (Fixture *f, gconstpointer data)
{
  Trained a, b;
  g_autoptr (GError) error = NULL;
  g_autoptr (GHashTable) meta = NULL;
  g_autofree char *ck = g_build_filename (f->dir, "checkpoint-4", NULL);

  make_with (f, &a, 8, FALSE, "sgd");
  steps (f, &a, 4);
  g_assert_true (ks_checkpoint_save (f->dir, 4, a.model, a.opt, NULL, 0, &error));
  g_assert_no_error (error);
  make_with (f, &b, 8, FALSE, "sgd");
  g_assert_true (ks_checkpoint_load (ck, b.model, b.opt, NULL, &meta, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (g_hash_table_lookup (meta, "optimizer"), ==, "sgd");
  g_assert_cmpstr (g_hash_table_lookup (meta, "optimizer_step"), ==, "4");
  assert_same_parameters (&a, &b);
  steps (f, &a, 2);
  steps (f, &b, 2);
  assert_same_parameters (&a, &b);
  drop (&a);
  drop (&b);
}

/* The error for two files of different saves in one checkpoint directory. */
static char *
mixed_message (const char *a, const char *b)
{
  return g_strdup_printf ("%s and %s are files of two different saves in one checkpoint "
                          "directory: keep one save's files only (remove the others, or "
                          "restore the directory whole from the run that saved it)", a, b);
}

/* Saves `t` at `step` as the directory `final` in two parts, as a pipeline's two stages
 * would: fc1 in part 0, the rest in part 1. */
static void
save_two_parts (Trained *t, const char *final, gint64 step)
{
  const char *const part0_skip[] = { "fc2.w", "fc2.b", NULL };
  const char *const part1_skip[] = { "fc1.w", "fc1.b", NULL };
  g_autoptr (GError) error = NULL;
  g_autofree char *tmp = ks_checkpoint_begin (final, &error);

  g_assert_no_error (error);
  g_assert_true (ks_checkpoint_write_part (tmp, 0, 2, step, t->model, t->opt, NULL, part0_skip,
                                           &error));
  g_assert_true (ks_checkpoint_write_part (tmp, 1, 2, step, t->model, t->opt, NULL, part1_skip,
                                           &error));
  g_assert_true (ks_checkpoint_commit (tmp, final, 0, &error));
  g_assert_no_error (error);
}

static void
copy_file (const char *from_dir, const char *to_dir, const char *name)
{
  g_autofree char *from = g_build_filename (from_dir, name, NULL);
  g_autofree char *to = g_build_filename (to_dir, name, NULL);
  g_autofree char *bytes = NULL;
  gsize len;
  g_assert_true (g_file_get_contents (from, &bytes, &len, NULL));
  g_assert_true (g_file_set_contents (to, bytes, len, NULL));
}

/* The load of `ck` fails naming the files `a` and `b` of it, as different saves', and
 * leaves the model as it was; its metadata (what `ksdist generate` reads first) too. */
static void
assert_mixed (Fixture *f, const char *ck, const char *a, const char *b)
{
  Trained fresh, b_model;
  g_autoptr (GError) error = NULL;
  g_autofree char *path_a = g_build_filename (ck, a, NULL);
  g_autofree char *path_b = g_build_filename (ck, b, NULL);
  g_autofree char *want = mixed_message (path_a, path_b);

  make (f, &fresh, 8, FALSE);
  make (f, &b_model, 8, FALSE);
  g_assert_false (ks_checkpoint_load (ck, b_model.model, b_model.opt, NULL, NULL, &error));
  g_assert_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_CORRUPT);
  g_assert_cmpstr (error->message, ==, want);
  assert_same_parameters (&fresh, &b_model);
  g_clear_error (&error);
  g_assert_null (ks_checkpoint_metadata (ck, &error));
  g_assert_cmpstr (error->message, ==, want);
  drop (&fresh);
  drop (&b_model);
}

/* A pipeline's part and its optimizer's state copied from another run's save of the same
 * step are refused, naming both parts (the step alone tied the parts together once). */
static void
test_swapped_parts (Fixture *f, gconstpointer data)
{
  Trained a, other, b;
  g_autoptr (GError) error = NULL;
  g_autofree char *mine = g_build_filename (f->dir, "run", "checkpoint-5", NULL);
  g_autofree char *theirs = g_build_filename (f->dir, "other-run", "checkpoint-5", NULL);

  make (f, &a, 8, FALSE);
  steps (f, &a, 5);
  make (f, &other, 8, FALSE);
  steps (f, &other, 2); /* another run: other values at its step 5 */
  save_two_parts (&a, mine, 5);
  save_two_parts (&other, theirs, 5);
  copy_file (theirs, mine, "stage-1-of-2.safetensors");
  copy_file (theirs, mine, "optimizer-stage-1-of-2.safetensors");
  assert_mixed (f, mine, "stage-0-of-2.safetensors", "stage-1-of-2.safetensors");
  /* the run it came from still loads */
  make (f, &b, 8, FALSE);
  g_assert_true (ks_checkpoint_load (theirs, b.model, b.opt, NULL, NULL, &error));
  g_assert_no_error (error);
  assert_same_parameters (&other, &b);
  drop (&a);
  drop (&other);
  drop (&b);
}

/* A whole checkpoint (model.safetensors and optimizer.safetensors) beside a pipeline's
 * parts is refused, naming model.safetensors and a part (it used to win silently). */
static void
test_whole_beside_parts (Fixture *f, gconstpointer data)
{
  Trained a;
  g_autoptr (GError) error = NULL;
  g_autofree char *parts = g_build_filename (f->dir, "parts", "checkpoint-5", NULL);
  g_autofree char *whole_dir = g_build_filename (f->dir, "whole", NULL);
  g_autofree char *whole = g_build_filename (whole_dir, "checkpoint-5", NULL);

  make (f, &a, 8, FALSE);
  steps (f, &a, 5);
  save_two_parts (&a, parts, 5);
  g_assert_true (ks_checkpoint_save (whole_dir, 5, a.model, a.opt, NULL, 0, &error));
  g_assert_no_error (error);
  copy_file (whole, parts, "model.safetensors");
  copy_file (whole, parts, "optimizer.safetensors");
  assert_mixed (f, parts, "model.safetensors", "stage-0-of-2.safetensors");
  drop (&a);
}

/* Parts written before they named their save still load, with a warning; one part of a
 * new save beside one without the name is refused. */
static void
test_parts_without_save_id (Fixture *f, gconstpointer data)
{
  Trained a, b;
  g_autoptr (GError) error = NULL;
  g_autofree char *ck = g_build_filename (f->dir, "checkpoint-5", NULL);
  g_autofree char *part0 = g_build_filename (ck, "stage-0-of-2.safetensors", NULL);
  g_autofree char *part1 = g_build_filename (ck, "stage-1-of-2.safetensors", NULL);

  make (f, &a, 8, FALSE);
  steps (f, &a, 5);
  save_two_parts (&a, ck, 5);
  ks_test_edit_header (part1, "\"save_id\":", "\"sav_id\":", TRUE, 0);
  assert_mixed (f, ck, "stage-0-of-2.safetensors", "stage-1-of-2.safetensors");
  ks_test_edit_header (part0, "\"save_id\":", "\"sav_id\":", TRUE, 0);
  make (f, &b, 8, FALSE);
  g_test_expect_message (NULL, G_LOG_LEVEL_WARNING, "*pipeline parts do not name their save*");
  g_assert_true (ks_checkpoint_load (ck, b.model, NULL, NULL, NULL, &error));
  g_test_assert_expected_messages ();
  g_assert_no_error (error);
  assert_same_parameters (&a, &b);
  drop (&a);
  drop (&b);
}

/* A checkpoint in two parts (as a pipeline's stages write it): fc1 in part 0, fc2 and
 * the rest in part 1 (fc1 left out of it, as a shared parameter is). It loads into the
 * whole model and goes on bitwise; nothing is there until commit; a missing part or a
 * part of another step is refused, naming the file. */
static void
test_parts (Fixture *f, gconstpointer data)
{
  Trained a, b;
  g_autoptr (GError) error = NULL;
  g_autoptr (GHashTable) meta = g_hash_table_new (g_str_hash, g_str_equal);
  const char *const part0_skip[] = { "fc2.w", "fc2.b", NULL };
  const char *const part1_skip[] = { "fc1.w", "fc1.b", NULL };
  g_autofree char *final = g_build_filename (f->dir, "checkpoint-5", NULL);
  gint64 step = 0;

  make (f, &a, 8, FALSE);
  steps (f, &a, 5);
  g_autofree char *tmp = ks_checkpoint_begin (final, &error);
  g_assert_no_error (error);
  g_assert_true (ks_checkpoint_write_part (tmp, 0, 2, 5, a.model, a.opt, meta, part0_skip, &error));
  g_assert_true (ks_checkpoint_write_part (tmp, 1, 2, 5, a.model, a.opt, meta, part1_skip, &error));
  g_assert_false (g_file_test (final, G_FILE_TEST_EXISTS)); /* not until committed */
  g_assert_true (ks_checkpoint_commit (tmp, final, 0, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (tmp, G_FILE_TEST_EXISTS));

  make (f, &b, 8, FALSE);
  g_assert_true (ks_checkpoint_load (final, b.model, b.opt, &step, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpint (step, ==, 5);
  assert_same_parameters (&a, &b);
  steps (f, &a, 3);
  steps (f, &b, 3);
  assert_same_parameters (&a, &b);

  /* a part of another save */
  g_autofree char *part1 = g_build_filename (final, "stage-1-of-2.safetensors", NULL);
  g_autofree char *other = g_build_filename (f->dir, "checkpoint-6", NULL);
  g_autofree char *tmp6 = ks_checkpoint_begin (other, &error);
  g_assert_true (ks_checkpoint_write_part (tmp6, 1, 2, 6, a.model, a.opt, meta, part1_skip, &error));
  g_autofree char *part1_6 = g_build_filename (tmp6, "stage-1-of-2.safetensors", NULL);
  g_assert_cmpint (g_rename (part1_6, part1), ==, 0);
  ks_checkpoint_abort (tmp6);
  g_assert_false (ks_checkpoint_load (final, b.model, b.opt, &step, NULL, &error));
  g_assert_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_CORRUPT);
  g_autofree char *part0 = g_build_filename (final, "stage-0-of-2.safetensors", NULL);
  g_autofree char *want = mixed_message (part0, part1);
  g_assert_cmpstr (error->message, ==, want);
  g_clear_error (&error);

  /* a part missing */
  g_assert_cmpint (g_unlink (part1), ==, 0);
  g_assert_false (ks_checkpoint_load (final, b.model, b.opt, &step, NULL, &error));
  g_autofree char *prefix = g_strdup_printf ("%s is a pipeline's checkpoint of 2 stages, but part 1 "
                                             "cannot be read: ", final);
  g_assert_true (g_str_has_prefix (error->message, prefix));
  drop (&a);
  drop (&b);
}

/* Plain safetensors: 8-byte little-endian header length, then a JSON object. */
static void
test_safetensors_layout (Fixture *f, gconstpointer data)
{
  Trained a;
  g_autofree char *bytes = NULL;
  gsize len;
  guint64 header_len;

  make (f, &a, 4, FALSE);
  g_assert_true (ks_checkpoint_save (f->dir, 1, a.model, NULL, NULL, 0, NULL));
  g_autofree char *file = g_build_filename (f->dir, "checkpoint-1", "model.safetensors", NULL);
  g_autofree char *optim = g_build_filename (f->dir, "checkpoint-1", "optimizer.safetensors", NULL);
  g_assert_false (g_file_test (optim, G_FILE_TEST_EXISTS)); /* no optimizer given, none saved */
  g_assert_true (g_file_get_contents (file, &bytes, &len, NULL));
  memcpy (&header_len, bytes, 8);
  header_len = GUINT64_FROM_LE (header_len);
  g_assert_cmpuint (header_len % 8, ==, 0);
  g_autofree char *header = g_strndup (bytes + 8, header_len);
  g_assert_true (header[0] == '{');
  g_assert_nonnull (strstr (header, "\"fc1.w\":{\"dtype\":\"F32\",\"shape\":[2,4],\"data_offsets\":[0,32]}"));
  g_assert_null (strstr (header, "optim."));
  /* parameters only: 2x4 + 4 + 4x3 + 3 floats */
  g_assert_cmpuint (len - 8 - header_len, ==, (8 + 4 + 12 + 3) * sizeof (float));

  /* with an optimizer the weights file is the same, and its state is in a file beside
   * it naming the weights file's seal */
  g_autofree char *bytes2 = NULL, *optim_bytes = NULL;
  gsize len2, optim_len;
  g_assert_true (ks_checkpoint_save (f->dir, 2, a.model, a.opt, NULL, 0, NULL));
  g_autofree char *file2 = g_build_filename (f->dir, "checkpoint-2", "model.safetensors", NULL);
  g_autofree char *optim2 = g_build_filename (f->dir, "checkpoint-2", "optimizer.safetensors", NULL);
  g_assert_true (g_file_get_contents (file2, &bytes2, &len2, NULL));
  g_assert_cmpuint (len2, ==, len);
  g_assert_null (g_strstr_len (bytes2 + 8, len2 - 8, "optim."));
  g_assert_true (g_file_get_contents (optim2, &optim_bytes, &optim_len, NULL));
  g_assert_nonnull (g_strstr_len (optim_bytes + 8, optim_len - 8,
                                  "\"optim.0.fc1.w\":{\"dtype\":\"F32\",\"shape\":[2,4],"
                                  "\"data_offsets\":[0,32]}"));
  g_assert_nonnull (g_strstr_len (optim_bytes + 8, optim_len - 8, "\"optimizer\":\"adam\""));
  g_autofree char *names = g_strdup_printf ("\"model_sha256\":\"%.64s\"",
                                            strstr (bytes2 + 8, "\"sha256\":\"") + 10);
  g_assert_nonnull (g_strstr_len (optim_bytes + 8, optim_len - 8, names));
  drop (&a);
}

static void
test_keep_last (Fixture *f, gconstpointer data)
{
  Trained a;
  make (f, &a, 4, FALSE);
  for (int s = 1; s <= 5; s++)
    g_assert_true (ks_checkpoint_save (f->dir, s * 10, a.model, a.opt, NULL, 2, NULL));
  g_autoptr (GDir) d = g_dir_open (f->dir, 0, NULL);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;
  while ((name = g_dir_read_name (d)) != NULL)
    g_ptr_array_add (names, g_strdup (name));
  g_assert_cmpuint (names->len, ==, 2); /* no temporary left either */
  g_assert_true (g_ptr_array_find_with_equal_func (names, "checkpoint-50", g_str_equal, NULL));
  g_assert_true (g_ptr_array_find_with_equal_func (names, "checkpoint-40", g_str_equal, NULL));
  drop (&a);
}

/* Loads `path` into a fresh model and expects `code` with `message` ("@" = the file);
 * the model's parameters must be as they were. */
static void
assert_load_fails_in (Fixture *f, const char *path, const char *name, gint64 hidden,
                      gboolean extra, int code, const char *message)
{
  Trained b;
  g_autoptr (GError) error = NULL;
  g_autofree char *file = g_build_filename (path, name, NULL);
  g_auto (GStrv) parts = g_strsplit (message, "@", -1);
  g_autofree char *want = g_strjoinv (file, parts);

  make (f, &b, hidden, extra);
  KsArena *p = ks_model_parameters (b.model);
  g_autofree float *before = g_memdup2 (ks_arena_data (p), ks_arena_numel (p) * sizeof (float));
  g_assert_false (ks_checkpoint_load (path, b.model, b.opt, NULL, NULL, &error));
  g_assert_error (error, KS_CHECKPOINT_ERROR, code);
  g_assert_cmpstr (error->message, ==, want);
  g_assert_cmpmem (before, ks_arena_numel (p) * sizeof (float), ks_arena_data (p),
                   ks_arena_numel (p) * sizeof (float));
  drop (&b);
}

static void
assert_load_fails (Fixture *f, const char *path, gint64 hidden, gboolean extra, int code,
                   const char *message)
{
  assert_load_fails_in (f, path, "model.safetensors", hidden, extra, code, message);
}

static void
test_damaged (Fixture *f, gconstpointer data)
{
  Trained a;
  g_autofree char *ck = g_build_filename (f->dir, "checkpoint-3", NULL);
  g_autofree char *file = g_build_filename (ck, "model.safetensors", NULL);
  g_autofree char *bytes = NULL;
  gsize len;

  make (f, &a, 8, FALSE);
  steps (f, &a, 3);
  g_assert_true (ks_checkpoint_save (f->dir, 3, a.model, a.opt, NULL, 0, NULL));
  steps (f, &a, 1);
  g_assert_true (ks_checkpoint_save (f->dir, 4, a.model, a.opt, NULL, 0, NULL));
  drop (&a);
  g_assert_true (g_file_get_contents (file, &bytes, &len, NULL));

  /* the optimizer's file: damaged, of another save, missing */
  g_autofree char *optim = g_build_filename (ck, "optimizer.safetensors", NULL);
  g_autofree char *optim4 = g_build_filename (f->dir, "checkpoint-4", "optimizer.safetensors", NULL);
  g_autofree char *optim_bytes = NULL, *optim4_bytes = NULL;
  gsize optim_len, optim4_len;
  g_assert_true (g_file_get_contents (optim, &optim_bytes, &optim_len, NULL));
  g_assert_true (g_file_get_contents (optim4, &optim4_bytes, &optim4_len, NULL));
  optim_bytes[optim_len - 1] ^= 1;
  g_assert_true (g_file_set_contents (optim, optim_bytes, optim_len, NULL));
  assert_load_fails_in (f, ck, "optimizer.safetensors", 8, FALSE, KS_CHECKPOINT_ERROR_CORRUPT,
                        "@: the file does not match its SHA-256: it is damaged, truncated or "
                        "edited");
  optim_bytes[optim_len - 1] ^= 1;
  g_assert_true (g_file_set_contents (optim, optim4_bytes, optim4_len, NULL));
  assert_load_fails_in (f, ck, "optimizer.safetensors", 8, FALSE, KS_CHECKPOINT_ERROR_MISMATCH,
                        "@: its model_sha256 is not the SHA-256 of model.safetensors: the "
                        "optimizer's state and the weights are of different saves (copy the "
                        "whole checkpoint directory)");
  g_assert_cmpint (g_unlink (optim), ==, 0);
  assert_load_fails (f, ck, 8, FALSE, KS_CHECKPOINT_ERROR_MISMATCH,
                     "@: holds no optimizer state (no optimizer.safetensors beside it); load it "
                     "without an optimizer");
  g_assert_true (g_file_set_contents (optim, optim_bytes, optim_len, NULL));
  g_autofree char *ck4 = g_build_filename (f->dir, "checkpoint-4", NULL);
  ks_checkpoint_remove_all (ck4);

  /* other shapes, a tensor the file lacks */
  assert_load_fails (f, ck, 6, FALSE, KS_CHECKPOINT_ERROR_MISMATCH,
                     "@: tensor 'fc1.w' has shape [2, 8]; the model's is [2, 6]");
  assert_load_fails (f, ck, 8, TRUE, KS_CHECKPOINT_ERROR_MISMATCH,
                     "@: no tensor 'extra.w', which the model has (shape [3])");
  /* truncated: the last tensor no longer fits */
  g_assert_true (g_file_set_contents (file, bytes, len - 10, NULL));
  assert_load_fails (f, ck, 8, FALSE, KS_CHECKPOINT_ERROR_CORRUPT,
                     "@: tensor 'fc2.b': data_offsets are not [begin, end] within the "
                     "194 data bytes");
  g_assert_true (g_file_set_contents (file, bytes, 20, NULL));
  assert_load_fails (f, ck, 8, FALSE, KS_CHECKPOINT_ERROR_CORRUPT,
                     "@: truncated: 20 bytes, too short for its header");
  /* one flipped bit in the data */
  bytes[len - 5] ^= 1;
  g_assert_true (g_file_set_contents (file, bytes, len, NULL));
  assert_load_fails (f, ck, 8, FALSE, KS_CHECKPOINT_ERROR_CORRUPT,
                     "@: the file does not match its SHA-256: it is damaged, truncated or edited");
  /* not ours */
  g_assert_true (g_file_set_contents (file, "\x08\0\0\0\0\0\0\0{}      ", 16, NULL));
  assert_load_fails (f, ck, 8, FALSE, KS_CHECKPOINT_ERROR_FORMAT,
                     "@: not a ksdist checkpoint (no __metadata__ format \"ksdist-checkpoint\")");
  g_unlink (file);
  g_autoptr (GError) error = NULL;
  Trained b;
  make (f, &b, 8, FALSE);
  g_assert_false (ks_checkpoint_load (ck, b.model, NULL, NULL, NULL, &error));
  g_assert_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO);
  g_assert_nonnull (strstr (error->message, "model.safetensors: No such file or directory"));
  drop (&b);
  /* the newest is this broken one: resume must say so, not fall back to an older one */
  g_autofree char *latest = ks_checkpoint_latest (f->dir);
  g_assert_cmpstr (latest, ==, ck);
}

/* The file's header with `from` replaced by `to`; with `reseal` its checksum made right
 * again (SHA-256 of the length field, the header with the value zeroed, and the data), as
 * a careful forger would, so the rules behind the checksum are tested too. `extra` bytes
 * are appended to the data. */
/* A header whose seal is spaced as Python's json writes it ("sha256": "...") and sealed
 * right loads: the seal is found as JSON has it, not as bytes ksdist writes. */
static void
test_seal_spacing (Fixture *f, gconstpointer data)
{
  Trained a, b;
  g_autoptr (GError) error = NULL;
  g_autofree char *ck = g_build_filename (f->dir, "checkpoint-3", NULL);
  g_autofree char *file = g_build_filename (ck, "model.safetensors", NULL);

  /* the weights alone: an optimizer file is tied to the model file's seal */
  make (f, &a, 8, FALSE);
  steps (f, &a, 3);
  g_assert_true (ks_checkpoint_save (f->dir, 3, a.model, NULL, NULL, 0, NULL));
  drop (&a);
  ks_test_edit_header (file, "\"sha256\":\"", "\"sha256\": \"", TRUE, 0);
  make (f, &b, 8, FALSE);
  if (!ks_checkpoint_load (ck, b.model, NULL, NULL, NULL, &error))
    g_error ("%s", error->message);
  drop (&b);
  /* and an edit under that spacing is still caught */
  ks_test_edit_header (file, "\"step\":\"3\"", "\"step\":\"2\"", FALSE, 0);
  make (f, &b, 8, FALSE);
  g_assert_false (ks_checkpoint_load (ck, b.model, NULL, NULL, NULL, &error));
  g_assert_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_CORRUPT);
  drop (&b);
}

/* Edited and hostile files: every field read is checked for its type and range, an edit
 * anywhere breaks the checksum, the safetensors rules hold even under a right checksum,
 * a FIFO is refused at once, and the loaded model is left as it was. */
static void
test_hostile (Fixture *f, gconstpointer data)
{
  static const struct {
    const char *from, *to; /* in optimizer.safetensors when `from` is optimizer_step */
    gboolean reseal;
    gsize extra;
    int code;
    const char *message;
  } cases[] = {
    { "\"optimizer_step\":\"3\"", "\"optimizer_step\":\"2\"", FALSE, 0,
      KS_CHECKPOINT_ERROR_CORRUPT,
      "@: the file does not match its SHA-256: it is damaged, truncated or edited" },
    { "\"data_offsets\":[64,96]", "\"data_offsets\":[60,92]", TRUE, 0,
      KS_CHECKPOINT_ERROR_CORRUPT, "@: tensor 'fc1.b' starts at byte 60 of the data, where "
      "another tensor lies (data_offsets must cover the data without overlaps or gaps)" },
    { "\"optimizer_step\":\"3\"", "\"optimizer_step\":3", TRUE, 0,
      KS_CHECKPOINT_ERROR_FORMAT, "@: metadata 'optimizer_step' is not a string (safetensors "
      "metadata maps strings to strings)" },
    { "\"optimizer_step\":\"3\"", "\"optimizer_step\":\"-5\"", TRUE, 0,
      KS_CHECKPOINT_ERROR_FORMAT, "@: metadata 'optimizer_step' is '-5', not an integer in "
      "[0, 9007199254740992]" },
    { "\"rng_state\":\"", "\"rng_state\":\"x", TRUE, 0, KS_CHECKPOINT_ERROR_FORMAT, NULL },
    { "{", " {", TRUE, 0, KS_CHECKPOINT_ERROR_FORMAT,
      "@: the header is not a JSON object starting at its first byte" },
    { "\"dtype\":\"F32\"", "\"dtype\":\"F31\"", TRUE, 0, KS_CHECKPOINT_ERROR_FORMAT,
      "@: tensor 'fc1.w' has no known dtype" },
    { "\"format\"", "\"formal\"", TRUE, 4, KS_CHECKPOINT_ERROR_CORRUPT,
      "@: 4 bytes of data after the last tensor" },
  };
  Trained a;
  g_autofree char *ck = g_build_filename (f->dir, "checkpoint-3", NULL);
  g_autofree char *file = g_build_filename (ck, "model.safetensors", NULL);
  g_autofree char *optim = g_build_filename (ck, "optimizer.safetensors", NULL);
  g_autofree char *good = NULL, *good_optim = NULL;
  gsize len, optim_len;

  make (f, &a, 8, FALSE);
  steps (f, &a, 3);
  g_assert_true (ks_checkpoint_save (f->dir, 3, a.model, a.opt, NULL, 0, NULL));
  drop (&a);
  g_assert_true (g_file_get_contents (file, &good, &len, NULL));
  g_assert_true (g_file_get_contents (optim, &good_optim, &optim_len, NULL));
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      gboolean in_optim = strstr (cases[i].from, "optimizer_step") != NULL;
      g_assert_true (g_file_set_contents (file, good, len, NULL));
      g_assert_true (g_file_set_contents (optim, good_optim, optim_len, NULL));
      ks_test_edit_header (in_optim ? optim : file, cases[i].from, cases[i].to, cases[i].reseal,
                   cases[i].extra);
      if (cases[i].message != NULL)
        assert_load_fails_in (f, ck, in_optim ? "optimizer.safetensors" : "model.safetensors", 8,
                              FALSE, cases[i].code, cases[i].message);
      else
        {
          Trained b;
          g_autoptr (GError) error = NULL;
          make (f, &b, 8, FALSE);
          g_assert_false (ks_checkpoint_load (ck, b.model, b.opt, NULL, NULL, &error));
          g_assert_error (error, KS_CHECKPOINT_ERROR, cases[i].code);
          g_assert_nonnull (strstr (error->message, "metadata 'rng_state' is 'x"));
          drop (&b);
        }
    }

  /* two tensors of one size swapped: the layout holds, the checksum does not */
  g_assert_true (g_file_set_contents (file, good, len, NULL));
  g_assert_true (g_file_set_contents (optim, good_optim, optim_len, NULL));
  ks_test_edit_header (optim, "\"optim.0.fc1.w\":{\"dtype\":\"F32\",\"shape\":[2,8],\"data_offsets\":[0,64]}",
               "\"optim.0.fc1.w\":{\"dtype\":\"F32\",\"shape\":[2,8],\"data_offsets\":[204,268]}", FALSE, 0);
  ks_test_edit_header (optim, "\"optim.1.fc1.w\":{\"dtype\":\"F32\",\"shape\":[2,8],\"data_offsets\":[204,268]}",
               "\"optim.1.fc1.w\":{\"dtype\":\"F32\",\"shape\":[2,8],\"data_offsets\":[0,64]}", FALSE, 0);
  assert_load_fails_in (f, ck, "optimizer.safetensors", 8, FALSE, KS_CHECKPOINT_ERROR_CORRUPT,
                        "@: the file does not match its SHA-256: it is damaged, truncated or "
                        "edited");
  g_assert_true (g_file_set_contents (optim, good_optim, optim_len, NULL));

  /* the step: a number that is not one, negative, past 2^53, missing */
  static const char *const bad_steps[] = { "\"abc\"", "\"-5\"", "\"99999999999999999999\"" };
  for (guint i = 0; i <= G_N_ELEMENTS (bad_steps); i++)
    {
      Trained b;
      g_autoptr (GError) error = NULL;
      gint64 step = -7;
      g_assert_true (g_file_set_contents (file, good, len, NULL));
      if (i < G_N_ELEMENTS (bad_steps))
        {
          g_autofree char *to = g_strconcat ("\"step\":", bad_steps[i], NULL);
          ks_test_edit_header (file, "\"step\":\"3\"", to, TRUE, 0);
        }
      else
        ks_test_edit_header (file, "\"step\":\"3\"", "\"stop\":\"3\"", TRUE, 0);
      make (f, &b, 8, FALSE);
      g_assert_false (ks_checkpoint_load (ck, b.model, b.opt, &step, NULL, &error));
      g_assert_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_FORMAT);
      g_assert_nonnull (strstr (error->message, "metadata 'step' is "));
      g_assert_cmpint (step, ==, -7);
      drop (&b);
    }

  /* a FIFO where the file should be: refused at once, never opened */
  g_unlink (file);
  g_assert_cmpint (mkfifo (file, 0600), ==, 0);
  assert_load_fails (f, ck, 8, FALSE, KS_CHECKPOINT_ERROR_IO, "@: not a regular file");
  g_assert_null (ks_checkpoint_metadata (ck, NULL));
}

/* A file's header (parsed) and data. */
static JsonObject *
read_safetensors (const char *file, char **bytes, gsize *len, const char **data, gsize *data_len)
{
  guint64 hlen;
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_assert_true (g_file_get_contents (file, bytes, len, NULL));
  memcpy (&hlen, *bytes, 8);
  hlen = GUINT64_FROM_LE (hlen);
  g_assert_true (json_parser_load_from_data (parser, *bytes + 8, hlen, NULL));
  *data = *bytes + 8 + hlen;
  *data_len = *len - 8 - hlen;
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

/* Rewrites the checkpoint `ck` as ksdist wrote it before the optimizer's state had its
 * own file: one model.safetensors holding the state as optim.<i>.<name> too, and the
 * optimizer's name and step in its metadata; sealed. */
static void
merge_optimizer_into_weights (const char *ck)
{
  g_autofree char *file = g_build_filename (ck, "model.safetensors", NULL);
  g_autofree char *optim = g_build_filename (ck, "optimizer.safetensors", NULL);
  g_autofree char *mbytes = NULL, *obytes = NULL;
  const char *mdata, *odata;
  gsize mlen, olen, mdata_len, odata_len;
  g_autoptr (JsonObject) model = read_safetensors (file, &mbytes, &mlen, &mdata, &mdata_len);
  g_autoptr (JsonObject) state = read_safetensors (optim, &obytes, &olen, &odata, &odata_len);
  JsonObject *meta = json_object_get_object_member (model, "__metadata__");
  JsonObject *ometa = json_object_get_object_member (state, "__metadata__");
  g_autoptr (GList) names = json_object_get_members (state);

  json_object_set_string_member (meta, "optimizer", json_object_get_string_member (ometa, "optimizer"));
  json_object_set_string_member (meta, "optimizer_step",
                                 json_object_get_string_member (ometa, "optimizer_step"));
  json_object_set_string_member (meta, "sha256", "0000000000000000000000000000000000000000000000000000000000000000");
  for (GList *n = names; n != NULL; n = n->next)
    if (strcmp (n->data, "__metadata__") != 0)
      {
        JsonObject *t = json_object_get_object_member (state, n->data);
        JsonArray *offsets = json_object_get_array_member (t, "data_offsets");
        JsonArray *moved = json_array_new ();
        for (guint k = 0; k < 2; k++)
          json_array_add_int_element (moved, json_array_get_int_element (offsets, k) + mdata_len);
        json_object_set_array_member (t, "data_offsets", moved);
        json_object_set_object_member (model, n->data, json_object_ref (t));
      }
  g_autoptr (JsonNode) root = json_node_init_object (json_node_alloc (), model);
  g_autofree char *json = json_to_string (root, FALSE);
  GString *header = g_string_new (json);
  while (header->len % 8 != 0)
    g_string_append_c (header, ' ');
  guint64 hlen = GUINT64_TO_LE (header->len);
  GString *out = g_string_new_len ((const char *) &hlen, 8);
  g_string_append_len (out, header->str, header->len);
  g_string_append_len (out, mdata, mdata_len);
  g_string_append_len (out, odata, odata_len);
  g_assert_true (g_file_set_contents (file, out->str, out->len, NULL));
  g_assert_cmpint (g_unlink (optim), ==, 0);
  g_string_free (header, TRUE);
  g_string_free (out, TRUE);
  ks_test_edit_header (file, "\"format\"", "\"format\"", TRUE, 0); /* seals it */
}

/* A checkpoint from before the optimizer's state had its own file loads, and goes on
 * bitwise. */
static void
test_one_file_layout (Fixture *f, gconstpointer data)
{
  Trained a, b;
  g_autofree char *ck = g_build_filename (f->dir, "checkpoint-2", NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (GHashTable) meta = NULL;

  make (f, &a, 8, FALSE);
  steps (f, &a, 2);
  g_assert_true (ks_checkpoint_save (f->dir, 2, a.model, a.opt, NULL, 0, NULL));
  merge_optimizer_into_weights (ck);
  make (f, &b, 8, FALSE);
  g_assert_true (ks_checkpoint_load (ck, b.model, b.opt, NULL, &meta, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (g_hash_table_lookup (meta, "optimizer"), ==, "adam");
  assert_same_parameters (&a, &b);
  steps (f, &a, 3);
  steps (f, &b, 3);
  assert_same_parameters (&a, &b);
  drop (&a);
  drop (&b);
}

/* A checkpoint written by format 1 (its checksum covers the data only) still loads, with
 * a warning. */
static void
test_format_1 (Fixture *f, gconstpointer data)
{
  Trained a, b;
  g_autofree char *ck = g_build_filename (f->dir, "checkpoint-2", NULL);
  g_autofree char *file = g_build_filename (ck, "model.safetensors", NULL);
  g_autofree char *bytes = NULL;
  g_autoptr (GError) error = NULL;
  gsize len;
  guint64 hlen;

  make (f, &a, 8, FALSE);
  steps (f, &a, 2);
  g_assert_true (ks_checkpoint_save (f->dir, 2, a.model, a.opt, NULL, 0, NULL));
  merge_optimizer_into_weights (ck); /* as format 1 was */
  g_assert_true (g_file_get_contents (file, &bytes, &len, NULL));
  memcpy (&hlen, bytes, 8);
  hlen = GUINT64_FROM_LE (hlen);
  g_autofree char *sha = g_compute_checksum_for_data (G_CHECKSUM_SHA256,
                                                      (const guint8 *) bytes + 8 + hlen,
                                                      len - 8 - hlen);
  g_autofree char *old = g_strconcat ("\"data_sha256\":\"", sha, "\"", NULL);
  char *slot = strstr (bytes + 8, "\"sha256\":\"");
  g_assert_nonnull (slot);
  g_autofree char *was = g_strndup (slot, strlen ("\"sha256\":\"") + 65);
  ks_test_edit_header (file, was, old, FALSE, 0);
  ks_test_edit_header (file, "\"version\":\"2\"", "\"version\":\"1\"", FALSE, 0);
  make (f, &b, 8, FALSE);
  g_test_expect_message (NULL, G_LOG_LEVEL_WARNING, "*written by an older ksdist (checkpoint format 1)*");
  g_assert_true (ks_checkpoint_load (ck, b.model, b.opt, NULL, NULL, &error));
  g_test_assert_expected_messages ();
  assert_same_parameters (&a, &b);
  drop (&a);
  drop (&b);
}

/* Temporary directories of killed writers on this host are removed by the next save, and
 * so are this process id's of the same checkpoint; those of live writers stay. */
static void
test_stale_temporaries (Fixture *f, gconstpointer data)
{
  Trained a;
  pid_t dead = fork ();
  if (dead == 0)
    _exit (0);
  g_assert_cmpint (waitpid (dead, NULL, 0), ==, dead);
  g_autofree char *gone = g_strdup_printf ("%s/.tmp-checkpoint-5@%s-%d", f->dir,
                                           g_get_host_name (), (int) dead);
  g_autofree char *gone_old = g_strconcat (gone, ".old", NULL);
  g_autofree char *live = g_strdup_printf ("%s/.tmp-checkpoint-6@%s-%d", f->dir,
                                           g_get_host_name (), (int) getppid ());
  g_autofree char *other = g_strdup_printf ("%s/.tmp-checkpoint-7@another-host-%d", f->dir,
                                            (int) dead);
  /* a save of checkpoint-1 by a crashed writer whose process id this one has now */
  g_autofree char *own = g_strdup_printf ("%s/.tmp-checkpoint-1.0123abcd@%s-%d", f->dir,
                                          g_get_host_name (), (int) getpid ());
  const char *dirs[] = { gone, gone_old, live, other, own };
  for (guint i = 0; i < G_N_ELEMENTS (dirs); i++)
    {
      g_assert_cmpint (g_mkdir_with_parents (dirs[i], 0755), ==, 0);
      g_free (ks_test_write (dirs[i], "model.safetensors", "partial"));
    }
  make (f, &a, 4, FALSE);
  g_assert_true (ks_checkpoint_save (f->dir, 1, a.model, NULL, NULL, 0, NULL));
  drop (&a);
  g_assert_false (g_file_test (gone, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (gone_old, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (own, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (live, G_FILE_TEST_IS_DIR));
  g_assert_true (g_file_test (other, G_FILE_TEST_IS_DIR));
}

/* A step saved again replaces its checkpoint whole (not file by file: the optimizer's
 * state of the first save does not stay beside the second's weights), and leaves nothing
 * hidden beside it. */
static void
test_saved_again (Fixture *f, gconstpointer data)
{
  Trained a;
  g_autofree char *optim = g_build_filename (f->dir, "checkpoint-2", "optimizer.safetensors",
                                             NULL);
  g_autoptr (GError) error = NULL;
  const char *name;

  make (f, &a, 4, FALSE);
  g_assert_true (ks_checkpoint_save (f->dir, 2, a.model, a.opt, NULL, 0, &error));
  g_assert_true (g_file_test (optim, G_FILE_TEST_IS_REGULAR));
  g_assert_true (ks_checkpoint_save (f->dir, 2, a.model, NULL, NULL, 0, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (optim, G_FILE_TEST_EXISTS));
  g_autoptr (GDir) d = g_dir_open (f->dir, 0, NULL);
  while ((name = g_dir_read_name (d)) != NULL)
    g_assert_cmpstr (name, ==, "checkpoint-2");
  drop (&a);
}

/* The one safetensors writer: the tensors in order, the metadata's keys sorted, the
 * header padded with spaces to 8 bytes, the seal right; a file written again is replaced
 * and no temporary stays beside it; a directory that is not there is an error naming the
 * file. */
static void
test_safetensors_write (Fixture *f, gconstpointer data)
{
  static const float x[] = { 1, 2, 3, 4, 5, 6 }, y[] = { 7 };
  const KsSafetensor tensors[] = { { "x", 2, { 2, 3 }, 6, x }, { "a.y", 1, { 1 }, 1, y } };
  g_autoptr (GHashTable) meta = g_hash_table_new (g_str_hash, g_str_equal);
  g_autofree char *path = g_build_filename (f->dir, "t.safetensors", NULL);
  g_autofree char *nowhere = g_build_filename (f->dir, "no", "t.safetensors", NULL);
  g_autofree char *bytes = NULL, *digest = NULL;
  g_autoptr (GError) error = NULL;
  guint64 header_len;
  gsize len;
  const char *name;

  g_hash_table_insert (meta, "b", "2");
  g_hash_table_insert (meta, "a", "1");
  for (int i = 0; i < 2; i++) /* the second time over the first */
    {
      g_clear_pointer (&digest, g_free);
      g_assert_true (ks_safetensors_write (path, tensors, 2, meta, TRUE, &digest, &error));
      g_assert_no_error (error);
    }
  g_assert_true (g_file_get_contents (path, &bytes, &len, NULL));
  g_assert_true (ks_safetensors_check (path, bytes, len, &header_len, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (header_len % 8, ==, 0);
  g_assert_cmpuint (len, ==, 8 + header_len + 7 * sizeof (float));
  g_autofree char *header = g_strndup (bytes + 8, header_len);
  g_autofree char *want = g_strdup_printf (
      "{\"__metadata__\":{\"a\":\"1\",\"b\":\"2\",\"" KS_SEAL_KEY "\":\"%s\"},"
      "\"x\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
      "\"a.y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[24,28]}}", digest);
  g_assert_true (g_str_has_prefix (header, want));
  for (gsize i = strlen (want); i < header_len; i++)
    g_assert_cmpint (header[i], ==, ' ');
  g_assert_true (ks_seal_matches (bytes, len, digest));
  g_assert_true (memcmp (bytes + 8 + header_len, x, sizeof x) == 0);
  g_autoptr (GDir) d = g_dir_open (f->dir, 0, NULL);
  while ((name = g_dir_read_name (d)) != NULL)
    g_assert_cmpstr (name, ==, "t.safetensors");

  g_assert_false (ks_safetensors_write (nowhere, tensors, 2, NULL, FALSE, NULL, &error));
  g_assert_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO);
  g_assert_nonnull (strstr (error->message, "/no/.t.safetensors.tmp-"));
}

/* The graph's JSON in an inference model's metadata. */
static char *
graph_of (const char *dir)
{
  g_autoptr (GHashTable) meta = ks_checkpoint_metadata (dir, NULL);
  g_assert_nonnull (meta);
  return g_strdup (g_hash_table_lookup (meta, "inference_graph"));
}

/* A checkpoint of `model` whose metadata holds `graph` as an inference graph. */
static void
write_graph (const char *dir, KsModel *model, const char *graph)
{
  g_autoptr (GHashTable) meta = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GError) error = NULL;
  g_hash_table_insert (meta, "inference_graph", (char *) graph);
  g_assert_true (ks_checkpoint_save (dir, 1, model, NULL, meta, 1, &error));
  g_assert_no_error (error);
}

/* Loading `dir` fails with `want` (%s: the file), or with a message starting with it when
 * it ends in "..." (a JSON parser's own words follow). */
static void
assert_inference_fails (Fixture *f, const char *dir, const char *want)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *file = g_build_filename (dir, "model.safetensors", NULL);
  g_autofree char *message = g_strdup_printf (want, file);
  g_assert_null (ks_load_inference_model (dir, f->cpu.c, NULL, NULL, &error));
  g_assert_nonnull (error);
  if (g_str_has_suffix (message, "..."))
    {
      message[strlen (message) - 3] = '\0';
      g_assert_true (g_str_has_prefix (error->message, message));
    }
  else
    g_assert_cmpstr (error->message, ==, message);
}

/* save_inference_model: the pruned forward graph and its parameters, loaded without the
 * code that built it, computes what the trained model computes in evaluation mode; it
 * holds nothing the targets do not need; bad requests and damaged graphs are errors. */
static void
test_inference_model (Fixture *f, gconstpointer data)
{
  const gint64 xshape[] = { N, 2 }, yshape[] = { N };
  const int swap[] = { 1, 0 };
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_build_filename (f->dir, "infer", NULL);
  g_autofree char *bad = g_build_filename (f->dir, "bad", NULL);
  g_autofree float *want = g_new (float, N * 3), *got = g_new (float, N * 3);
  g_auto (GStrv) feeds = NULL, targets = NULL;
  Trained t;

  t.model = ks_model_new (f->cpu.c);
  KsExpr *x = ks_model_data (t.model, "x", 2, xshape, KS_DTYPE_FLOAT32, &error);
  KsExpr *y = ks_model_data (t.model, "y", 1, yshape, KS_DTYPE_INT64, &error);
  KsExpr *h = ks_dropout (ks_fc (x, 8, KS_UNARY_TANH, "fc1", 1, &error), 0.3f, 9, &error);
  h = ks_transpose (ks_transpose (ks_layer_norm (h, "ln", 1e-5f, &error), swap, &error), swap,
                    &error);
  KsExpr *logits = ks_fc (h, 3, -1, "fc2", 2, &error);
  KsExpr *probs = ks_softmax (logits, FALSE, &error);
  KsExpr *side = ks_fc (x, 4, -1, "unused", 3, &error); /* not needed by probs */
  KsExpr *loss = ks_softmax_cross_entropy (logits, y, &error);
  g_assert_no_error (error);
  g_assert_true (ks_model_init (t.model, &error));
  t.opt = ks_optimizer_new (f->cpu.registry, f->cpu.config, "adam", &error);
  g_assert_true (ks_optimizer_minimize (t.opt, t.model, loss, NULL, 0, NULL, &error));
  steps (f, &t, 5);

  g_assert_true (ks_save_inference_model (dir, t.model, (const char *[]) { "x", NULL }, &probs,
                                          1, &error));
  g_assert_no_error (error);
  ks_model_set_training (t.model, FALSE);
  g_assert_true (ks_model_run (t.model, f->feeds, 1, &probs, 1, &error));
  g_assert_true (ks_tensor_to_host (ks_expr_value (probs, NULL), want, N * 3 * 4, &error));

  g_autoptr (KsModel) loaded = ks_load_inference_model (dir, f->cpu.c, &feeds, &targets, &error);
  g_assert_no_error (error);
  g_assert_cmpstrv (feeds, ((const char *[]) { "x", NULL }));
  g_assert_cmpstrv (targets, ((const char *[]) { ks_expr_name (probs), NULL }));
  g_assert_false (ks_model_training (loaded));
  KsExpr *out = ks_model_find (loaded, targets[0]);
  g_assert_true (ks_model_run (loaded, f->feeds, 1, &out, 1, &error));
  g_assert_no_error (error);
  g_assert_true (ks_tensor_to_host (ks_expr_value (out, NULL), got, N * 3 * 4, &error));
  g_assert_cmpmem (got, N * 3 * 4, want, N * 3 * 4);
  /* its transposes move the batch to the second dimension: no other batch */
  g_assert_null (ks_load_inference_model_with_batch (dir, f->cpu.c, 5, NULL, NULL, &error));
  g_assert_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_FORMAT);
  g_assert_nonnull (strstr (error->message, "computed from the feeds, its shape [8, 32] does "
                                            "not keep the batch (32) in its first dimension"));
  g_clear_error (&error);
  /* pruned: the labels, the loss and the unused layer are not in it */
  g_assert_nonnull (ks_model_find (loaded, "fc1.w"));
  g_assert_nonnull (ks_model_find (loaded, "ln.gamma"));
  g_assert_null (ks_model_find (loaded, "y"));
  g_assert_null (ks_model_find (loaded, "unused.w"));
  g_assert_null (ks_model_find (loaded, ks_expr_name (loss)));
  g_assert_cmpuint (ks_arena_count (ks_model_parameters (loaded)), ==, 6);

  /* what cannot be saved */
  g_assert_false (ks_save_inference_model (bad, t.model, (const char *[]) { "x", NULL }, &loss,
                                           1, &error));
  g_assert_cmpstr (error->message, ==, "save_inference_model: the targets need data 'y', which "
                                       "is not among the feeds: add it, or choose targets that "
                                       "do not need it");
  g_clear_error (&error);
  KsExpr *grad = g_array_index (ks_optimizer_pairs (t.opt), KsParamGrad, 0).grad;
  g_assert_false (ks_save_inference_model (bad, t.model, (const char *[]) { "x", "y", NULL },
                                           &grad, 1, &error));
  g_assert_cmpstr (error->message, ==, "save_inference_model: the targets need the gradient "
                                       "'fc1.w@GRAD'; an inference model holds the forward "
                                       "graph only");
  g_clear_error (&error);
  g_assert_false (ks_save_inference_model (bad, t.model, (const char *[]) { "z", NULL }, &side,
                                           1, &error));
  g_assert_cmpstr (error->message, ==, "save_inference_model: feed 'z' is not a data input of "
                                       "the model");
  g_clear_error (&error);
  g_assert_false (g_file_test (bad, G_FILE_TEST_EXISTS));

  /* damaged: a training checkpoint, graphs edited by hand, a truncated file */
  g_autofree char *graph = graph_of (dir);
  g_autofree char *ck = g_build_filename (bad, "checkpoint-1", NULL);
  g_assert_true (ks_checkpoint_save (bad, 1, t.model, NULL, NULL, 1, &error));
  assert_inference_fails (f, ck, "%s is a training checkpoint, not an inference model (no "
                                 "inference_graph in its metadata): write one with "
                                 "ks_save_inference_model");
  const struct {
    const char *from, *to, *want;
  } edits[] = {
    { "\"op\":\"matmul\"", "\"op\":\"conv\"",
      "%s: inference graph, op 3 'matmul_4': 'conv' is not an op this ksdist can run for "
      "inference" },
    { "\"fn\":\"tanh\"", "\"fn\":\"tan\"",
      "%s: inference graph, op 5 'unary_6': unknown function tan" },
    { "\"in\":[\"x\",\"fc1.w\"]", "\"in\":[\"fc1.w\",\"x\"]",
      "%s: inference graph, op 3 'matmul_4': matmul: 'fc1.w' is [2, 8] and 'x' is [32, 2]; it "
      "multiplies [m, k] by [k, n]" },
    { "\"in\":[\"x\",\"fc1.w\"]", "\"in\":[\"x\",\"fc9.w\"]",
      "%s: inference graph, op 3 'matmul_4': input 'fc9.w' is not defined before it" },
    { "\"perm\":[1,0]", "\"perm\":[1,1]",
      "%s: inference graph, op 10 'transpose_11': transpose: 'layer_norm_10' is [32, 8]; "
      "perm[1] = 1, but perm must order its dimensions 0 .. 1, each once" },
    { "\"targets\":[\"", "\"targets\":[\"no",
      "%s: inference graph: target 'nosoftmax_17' is not in the graph" },
    { "{\"batch\"", "[{\"batch\"", "%s: inference graph: not a JSON object: ..." },
    { "\"batch\":32", "\"batch\":-3", "%s: inference graph: its batch is not a positive integer" },
    { "\"ops\":[", "\"ops\":[1,", "%s: inference graph, op 0 '?': each op needs a name, a "
      "shape (at most 8 integers) and its inputs" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (edits); i++)
    {
      g_autoptr (GString) edited = g_string_new (graph);
      g_assert_cmpuint (g_string_replace (edited, edits[i].from, edits[i].to, 1), ==, 1);
      write_graph (bad, t.model, edited->str);
      assert_inference_fails (f, ck, edits[i].want);
    }
  g_autofree char *file = g_build_filename (dir, "model.safetensors", NULL);
  g_autofree char *bytes = NULL;
  gsize len;
  g_assert_true (g_file_get_contents (file, &bytes, &len, NULL));
  g_assert_true (g_file_set_contents (file, bytes, len - 8, NULL));
  assert_inference_fails (f, dir, "%s: tensor 'fc2.b': data_offsets are not [begin, end] "
                                  "within the 260 data bytes");
  bytes[len - 3] ^= 4;
  g_assert_true (g_file_set_contents (file, bytes, len, NULL));
  assert_inference_fails (f, dir, "%s: the file does not match its SHA-256: it is damaged, "
                                  "truncated or edited");
  drop (&t);
}

/* Runs `target` of `model` on `feeds`, into `out` (n floats). */
static void
run_into (KsModel *model, const char *target, const KsFeed *feeds, gsize n_feeds, float *out,
          gsize n)
{
  g_autoptr (GError) error = NULL;
  KsExpr *e = ks_model_find (model, target);
  g_assert_nonnull (e);
  g_assert_true (ks_model_run (model, feeds, n_feeds, &e, 1, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (ks_expr_value (e, NULL)->numel, ==, n);
  g_assert_true (ks_tensor_to_host (ks_expr_value (e, NULL), out, n * sizeof (float), &error));
}

static void
assert_close (const float *got, const float *want, gsize n)
{
  for (gsize i = 0; i < n; i++)
    g_assert_cmpfloat_with_epsilon (got[i], want[i], 1e-5 * (1 + fabsf (want[i])));
}

/* An inference model saved with one batch runs with another: an MLP's rows and a GPT's
 * sequences give what the saved batch gave them. */
static void
test_inference_free_batch (Fixture *f, gconstpointer data)
{
  enum { B = 4, T = 8, V = 11 };
  const gint64 xshape[] = { N, 2 };
  g_autoptr (GError) error = NULL;
  g_autofree char *mlp_dir = g_build_filename (f->dir, "mlp", NULL);
  g_autofree char *gpt_dir = g_build_filename (f->dir, "gpt", NULL);
  g_autofree float *want = g_new (float, B * T * V), *got = g_new (float, B * T * V);

  /* an MLP saved with batch N, run on 5 rows and on 1 */
  g_autoptr (KsModel) mlp = ks_model_new (f->cpu.c);
  KsExpr *x = ks_model_data (mlp, "x", 2, xshape, KS_DTYPE_FLOAT32, &error);
  KsExpr *probs = ks_softmax (ks_fc (ks_fc (x, 8, KS_UNARY_TANH, "fc1", 1, &error), 3, -1, "fc2",
                                     2, &error), FALSE, &error);
  g_assert_no_error (error);
  g_assert_true (ks_model_init (mlp, &error));
  g_assert_true (ks_save_inference_model (mlp_dir, mlp, (const char *[]) { "x", NULL }, &probs,
                                          1, &error));
  g_assert_no_error (error);
  run_into (mlp, ks_expr_name (probs), f->feeds, 1, want, N * 3);
  for (gint64 rows = 5; rows >= 1; rows -= 4)
    {
      g_auto (GStrv) targets = NULL;
      g_autoptr (KsModel) loaded = ks_load_inference_model_with_batch (mlp_dir, f->cpu.c, rows,
                                                                       NULL, &targets, &error);
      g_assert_no_error (error);
      KsFeed feed = { "x", f->xs, rows * 2 * sizeof (float) };
      run_into (loaded, targets[0], &feed, 1, got, rows * 3);
      assert_close (got, want, rows * 3);
    }

  /* a GPT saved with batch B, run on its third sequence alone */
  KsGptShape shape = { .vocab = V, .context = T, .layers = 2, .heads = 2, .width = 8,
                       .batch = B, .seed = 3 };
  g_autoptr (KsModel) gpt = ks_model_new (f->cpu.c);
  KsExpr *logits, *loss;
  g_autofree gint64 *tokens = g_new (gint64, B * T), *positions = g_new (gint64, B * T);
  for (gint64 i = 0; i < B * T; i++)
    tokens[i] = (i * 7 + 3) % V, positions[i] = i % T;
  g_assert_true (ks_gpt_build (gpt, &shape, &logits, &loss, &error));
  g_assert_true (ks_model_init (gpt, &error));
  g_assert_true (ks_save_inference_model (gpt_dir, gpt, (const char *[]) { "tokens", "positions",
                                                                           NULL },
                                          &logits, 1, &error));
  g_assert_no_error (error);
  KsFeed feeds[] = { { "tokens", tokens, B * T * sizeof (gint64) },
                     { "positions", positions, B * T * sizeof (gint64) } };
  run_into (gpt, ks_expr_name (logits), feeds, 2, want, B * T * V);
  g_auto (GStrv) targets = NULL;
  g_autoptr (KsModel) one = ks_load_inference_model_with_batch (gpt_dir, f->cpu.c, 1, NULL,
                                                                &targets, &error);
  g_assert_no_error (error);
  KsFeed third[] = { { "tokens", tokens + 2 * T, T * sizeof (gint64) },
                     { "positions", positions + 2 * T, T * sizeof (gint64) } };
  run_into (one, targets[0], third, 2, got, T * V);
  assert_close (got, want + 2 * T * V, T * V);
}

/* `ksdist train` with [train] export_dir: the MLP it trained loads as an inference
 * model, takes points, and classifies them as the training run's own evaluation did. */
static void
test_train_export (Fixture *f, gconstpointer data)
{
  enum { BATCH = 64 };
  g_autofree char *dir = g_build_filename (f->dir, "export", NULL);
  g_autofree char *set_dir = g_strconcat ("train.export_dir=", dir, NULL);
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) feeds = NULL, targets = NULL;
  float xs[BATCH * 2], logits[BATCH * 3];
  gint64 ys[BATCH];
  double accuracy = 0, want = -1;

  int status = ks_test_run_ksdist (
      (const char *const[]) { "train", "--set", "data.task=rings", "--set", "train.steps=1000",
                              "--set", "train.batch=64", "--set", "train.log_every=1000",
                              "--set", "model.dropout=0.1", "--set", "optim.lr=0.01", "--set", set_dir,
                              NULL },
      NULL, (const char *const[]) { "openblas", "optim", NULL }, &out, &err);
  g_assert_cmpint (status, ==, 0);
  g_assert_nonnull (strstr (err, "inference model (x to logits) written to "));
  g_assert_nonnull (g_strrstr (out, "eval accuracy "));
  want = g_ascii_strtod (g_strrstr (out, "eval accuracy ") + strlen ("eval accuracy "), NULL);

  g_autoptr (KsModel) model = ks_load_inference_model (dir, f->cpu.c, &feeds, &targets, &error);
  g_assert_no_error (error);
  g_assert_cmpstrv (feeds, ((const char *[]) { "x", NULL }));
  g_assert_cmpstrv (targets, ((const char *[]) { "logits", NULL }));
  KsExpr *out_expr = ks_model_find (model, targets[0]);
  /* new points of the same task: about as accurate as the run's held-out score */
  ks_task_generate (KS_TASK_RINGS, BATCH, 0.02, 99, xs, ys);
  KsFeed feed = { "x", xs, sizeof xs };
  g_assert_true (ks_model_run (model, &feed, 1, &out_expr, 1, &error));
  g_assert_true (ks_tensor_to_host (ks_expr_value (out_expr, NULL), logits, sizeof logits,
                                    &error));
  g_assert_no_error (error);
  for (int r = 0; r < BATCH; r++)
    {
      int best = 0;
      for (int k = 1; k < 3; k++)
        best = logits[r * 3 + k] > logits[r * 3 + best] ? k : best;
      accuracy += (best == ys[r]) / (double) BATCH;
    }
  g_test_message ("exported MLP: accuracy %.3f on new points (the run's held-out: %.3f)",
                  accuracy, want);
  g_assert_cmpfloat (want, >, 0.8);
  g_assert_cmpfloat (accuracy, >, want - 0.15);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (!ks_test_have_openblas ())
    return g_test_run ();
#define ADD(name, fn) g_test_add ("/checkpoint/" name, Fixture, NULL, setup, fn, teardown)
  ADD ("round-trip-and-resume", test_round_trip_and_resume);
  ADD ("safetensors-layout", test_safetensors_layout);
  ADD ("keep-last", test_keep_last);
  ADD ("stateless-optimizer", test_stateless_optimizer);
  ADD ("parts", test_parts);
  ADD ("swapped-parts", test_swapped_parts);
  ADD ("whole-beside-parts", test_whole_beside_parts);
  ADD ("parts-without-save-id", test_parts_without_save_id);
  ADD ("damaged", test_damaged);
  ADD ("hostile", test_hostile);
  ADD ("seal-spacing", test_seal_spacing);
  ADD ("format-1", test_format_1);
  ADD ("one-file-layout", test_one_file_layout);
  ADD ("stale-temporaries", test_stale_temporaries);
  ADD ("saved-again", test_saved_again);
  ADD ("safetensors-write", test_safetensors_write);
  ADD ("inference-model", test_inference_model);
  ADD ("inference-free-batch", test_inference_free_batch);
  ADD ("train-export", test_train_export);
  return g_test_run ();
}
