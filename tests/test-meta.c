/* Reptile end to end through `ksdist train` and `ksdist launch` on a glyph set made by
 * `ksdist datagen glyphs`: it learns (held-out scripts, far above chance), two workers
 * with a meta-batch of 1 each equal one process with 2, a resumed run equals an unbroken
 * one bitwise, and bad settings are named. */
#include "testutil.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

static const char *const plugins[] = { "openblas", "optim", "store", "roles", "gloo", "shm",
                                       "collective", NULL };

#define ARGS(...) ((const char *const[]) { __VA_ARGS__, NULL })

static char *
make_glyphs (const char *dir)
{
  return ks_test_datagen ("glyphs", dir, ARGS ("--alphabets", "6", "--characters", "8",
                                               "--per-class", "6"));
}

/* Runs `command` (train or launch -n N) with reptile on `set` and the --set lines
 * `extra`; returns the exit status, with stdout and stderr. */
static int
run_reptile (const char *const *command, const char *set, const char *const *extra, char **out,
             char **err)
{
  g_autoptr (GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  const char *common[] = { "meta.algorithm=reptile", "meta.ways=3", "meta.shots=2",
                           "meta.filters=8", "meta.inner_iters=4", "meta.eval_inner_iters=8",
                           "meta.eval_tasks=60", "log.level=warning",
                           "openblas.threads=1", "optim.beta1=0" };
  for (int i = 0; command[i] != NULL; i++)
    g_ptr_array_add (args, g_strdup (command[i]));
  g_ptr_array_add (args, g_strdup ("--set"));
  g_ptr_array_add (args, g_strdup_printf ("data.path=%s", set));
  for (guint i = 0; i < G_N_ELEMENTS (common); i++)
    g_ptr_array_add (args, g_strdup ("--set")), g_ptr_array_add (args, g_strdup (common[i]));
  for (int i = 0; extra != NULL && extra[i] != NULL; i++)
    g_ptr_array_add (args, g_strdup ("--set")), g_ptr_array_add (args, g_strdup (extra[i]));
  g_ptr_array_add (args, NULL);
  return ks_test_run_ksdist ((const char *const *) args->pdata, NULL, plugins, out, err);
}

static double
test_accuracy (const char *out)
{
  const char *line = strstr (out, "eval accuracy ");
  g_assert_nonnull (line);
  return g_ascii_strtod (line + strlen ("eval accuracy "), NULL);
}

/* The inner loss (the mean over the log window's meta-steps) of the log line after
 * `after` (the first one: NULL). */
static double
inner_loss (const char *out, const char *after)
{
  const char *line = strstr (after != NULL ? after : out, " loss ");
  g_assert_nonnull (line);
  return g_ascii_strtod (line + strlen (" loss "), NULL);
}

/* Meta-training lowers the loss its tasks reach in their few inner steps (what Reptile
 * optimises), and the weights then classify tasks of held-out scripts well above
 * chance. (At this size, a random start fine-tuned as long scores about as well: the
 * gain over it is measured on the full glyph set, see the README.) */
static void
test_learns (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *set = make_glyphs (dir);
  g_autofree char *out = NULL, *err = NULL;

  g_assert_cmpint (run_reptile (ARGS ("train"), set, ARGS ("train.steps=300",
                                "train.log_every=50", "meta.meta_step=0.5", "optim.lr=0.003"),
                                &out, &err), ==, 0);
  double first = inner_loss (out, NULL), last = inner_loss (out, strstr (out, "300/300"));
  double accuracy = test_accuracy (out);
  g_test_message ("3-way 2-shot: inner loss %.3f after 50 meta-steps, %.3f after 300; test "
                  "accuracy %.3f on held-out scripts (chance 0.333)", first, last, accuracy);
  g_assert_cmpfloat (last, <, 0.8 * first);
  g_assert_cmpfloat (accuracy, >, 0.45);
  ks_test_rmtree (dir);
}

static float *
weights_at (const char *ckpt, int step, gsize *n)
{
  g_autofree char *name = g_strdup_printf ("checkpoint-%d", step);
  g_autofree char *file = g_build_filename (ckpt, name, "model.safetensors", NULL);
  return ks_test_safetensors_floats (file, n);
}

/* SGD in the inner loop: a fresh Adam's first step is lr times the gradient's sign, which
 * turns float-rounding differences of a near-zero gradient into lr-sized ones */
#define SGD "train.optimizer=sgd", "optim.lr=0.05"

static void
test_launch_equals_one (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *set = make_glyphs (dir);
  g_autofree char *one = g_build_filename (dir, "one", NULL);
  g_autofree char *two = g_build_filename (dir, "two", NULL);
  g_autofree char *ck1 = g_strdup_printf ("train.checkpoint_dir=%s", one);
  g_autofree char *ck2 = g_strdup_printf ("train.checkpoint_dir=%s", two);
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;
  gsize n1, n2;
  double worst, moved;

  g_assert_cmpint (run_reptile (ARGS ("train"), set,
                                ARGS ("train.steps=4", "meta.meta_batch=2", ck1, SGD), &out,
                                &err),
                   ==, 0);
  g_assert_cmpint (run_reptile (ARGS ("launch", "-n", "2"), set,
                                ARGS ("train.steps=4", "meta.meta_batch=1", ck2, SGD), &out2,
                                &err2),
                   ==, 0);
  g_autofree float *a = weights_at (one, 4, &n1), *b = weights_at (two, 4, &n2);
  g_autofree float *a0 = NULL;
  g_assert_cmpuint (n1, ==, n2);
  worst = ks_test_max_difference (a, b, n1);
  g_test_message ("one process, meta-batch 2 against 2 workers of 1: %g apart", worst);
  g_assert_cmpfloat (worst, <=, 1e-5);
  /* and they did train: a run of meta-batch 1 alone ends elsewhere */
  g_autofree char *lone = g_build_filename (dir, "lone", NULL);
  g_autofree char *ck3 = g_strdup_printf ("train.checkpoint_dir=%s", lone);
  g_autofree char *out3 = NULL, *err3 = NULL;
  g_assert_cmpint (run_reptile (ARGS ("train"), set, ARGS ("train.steps=4", ck3, SGD), &out3,
                                &err3),
                   ==, 0);
  a0 = weights_at (lone, 4, &n1);
  moved = ks_test_max_difference (a, a0, n1);
  g_assert_cmpfloat (moved, >, 1e-3);
  ks_test_rmtree (dir);
}

static void
test_resume (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *set = make_glyphs (dir);
  g_autofree char *ckpt = g_build_filename (dir, "ckpt", NULL);
  g_autofree char *ck = g_strdup_printf ("train.checkpoint_dir=%s", ckpt);
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;
  gsize n1, n2;

  g_assert_cmpint (run_reptile (ARGS ("train"), set, ARGS ("train.steps=6", ck,
                                "train.checkpoint_every=3", "train.keep=0"), &out, &err), ==, 0);
  g_autofree float *unbroken = weights_at (ckpt, 6, &n1);
  g_autofree char *last = g_build_filename (ckpt, "checkpoint-6", NULL);
  ks_test_rmtree (last);
  g_assert_false (g_file_test (last, G_FILE_TEST_EXISTS));
  g_assert_cmpint (run_reptile (ARGS ("train"), set, ARGS ("train.steps=6", ck,
                                "train.checkpoint_every=3", "train.resume=true",
                                "train.log_every=1"), &out2, &err2), ==, 0);
  /* it took meta-steps 4 to 6 only, and ended where the unbroken run did */
  g_assert_null (strstr (out2, "step 3/6"));
  g_assert_nonnull (strstr (out2, "step 4/6"));
  g_autofree float *resumed = weights_at (ckpt, 6, &n2);
  g_assert_cmpuint (n1, ==, n2);
  g_assert_cmpint (memcmp (unbroken, resumed, n1 * sizeof (float)), ==, 0);
  ks_test_rmtree (dir);
}

static void
test_errors (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *set = make_glyphs (dir);
  g_autofree char *missing = g_build_filename (dir, "nothing", NULL);
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;

  g_assert_cmpint (run_reptile (ARGS ("train"), missing, NULL, &out, &err), ==, 2);
  g_assert_nonnull (strstr (err, "[data] path = "));
  g_assert_nonnull (strstr (err, "nothing (--set): not found"));
  /* the test split holds one script of 8 characters: 9-way tasks are refused at once */
  g_assert_cmpint (run_reptile (ARGS ("train"), set, ARGS ("train.steps=100000", "meta.ways=9"),
                                &out2, &err2), ==, 2);
  g_assert_nonnull (strstr (err2, "reptile: 9-way tasks, but the val split has 8 classes"));
  /* classes of 6 images: training tasks of 7 a class cannot be drawn */
  g_autofree char *out3 = NULL, *err3 = NULL;
  g_assert_cmpint (run_reptile (ARGS ("train"), set, ARGS ("train.steps=100000",
                                "meta.train_shots=7"), &out3, &err3), ==, 2);
  g_assert_nonnull (strstr (err3, "of the train split has 6 images; its tasks take 7 of a "
                            "class"));
  ks_test_rmtree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (!ks_test_have_openblas ())
    return g_test_run ();
  g_test_add_func ("/meta/learns", test_learns);
  g_test_add_func ("/meta/launch-equals-one", test_launch_equals_one);
  g_test_add_func ("/meta/resume", test_resume);
  g_test_add_func ("/meta/errors", test_errors);
  return g_test_run ();
}
