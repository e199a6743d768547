/* Pipelined training against one process, with real processes over 127.0.0.1.
 *
 * The model: an embedding whose table is shared with the output layer (a SharedLayerDesc
 * on the first and last stage), six residual tanh blocks, and the tied head. Two skip
 * connections: block 1 stashes its output for block 6 ("long/h1", across 1 to 3 stages
 * depending on the cut), and block 3 its input for block 4 ("short/x3", which with two
 * virtual stages goes from stage 1 back to stage 0). Each case
 * starts this program once per stage of each of D data-parallel replicas (`test-pipe-train
 * --rank R P V M SCHEDULE RECOMPUTE D DIR`; rank R is stage R mod P of replica R / P, which
 * is fed its own rows of the batch); a stage trains the same model on the whole batch in
 * one process beside the pipeline and checks, at every step, the pipeline's loss against
 * the one-process loss and at the end its own parameters against the same-named ones
 * there. It exits non-zero with a message on stderr when one differs. */
#define _GNU_SOURCE /* memmem */
#include "testutil.h"

#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARGS(...) ((const char *const[]) { __VA_ARGS__, NULL })

enum { VOCAB = 12, WIDTH = 8, BLOCKS = 6, BATCH = 16, STEPS = 6 };
#define CLIP_NORM 4.0 /* binds in some steps, not all */

typedef struct {
  int index;
  gint64 rows; /* per micro-batch (the whole batch in one process) */
  /* skip connections: the block stashes its input or its output, or pops and adds */
  const char *stash_input, *stash_output, *pop;
} LayerArgs;

static KsExpr *
embed (KsModel *model, KsExpr *x, gconstpointer args, GError **error)
{
  const LayerArgs *a = args;
  const gint64 rows[] = { a->rows }, table[] = { VOCAB, WIDTH };
  KsInit init = { KS_INIT_NORMAL, 0, 0.5, 11 };
  KsExpr *ids, *wte;
  if ((ids = ks_model_data (model, "ids", 1, rows, KS_DTYPE_INT64, error)) == NULL
      || (wte = ks_model_shared_parameter (model, "wte", 2, table, init, error)) == NULL)
    return NULL;
  return ks_embedding (ids, wte, error);
}

static KsExpr *
block (KsModel *model, KsExpr *x, gconstpointer args, GError **error)
{
  const LayerArgs *a = args;
  g_autofree char *name = g_strdup_printf ("block%d", a->index);
  KsExpr *h = ks_fc (x, WIDTH, KS_UNARY_TANH, name, 100 + a->index, error), *skip, *out;
  if (h == NULL || (out = ks_add (x, h, error)) == NULL
      || (a->stash_input != NULL && !ks_layer_stash (model, a->stash_input, x, error))
      || (a->stash_output != NULL && !ks_layer_stash (model, a->stash_output, out, error)))
    return NULL;
  if (a->pop == NULL)
    return out;
  return (skip = ks_layer_pop (model, a->pop, error)) == NULL ? NULL : ks_add (out, skip, error);
}

/* logits = x wte^T + b: the embedding's table again */
static KsExpr *
head (KsModel *model, KsExpr *x, gconstpointer args, GError **error)
{
  const gint64 table[] = { VOCAB, WIDTH }, bias[] = { VOCAB };
  KsInit init = { KS_INIT_NORMAL, 0, 0.5, 11 }, zero = { KS_INIT_CONSTANT, 0, 0, 0 };
  const int swap[] = { 1, 0 };
  KsExpr *wte, *b, *logits;
  if ((wte = ks_model_shared_parameter (model, "wte", 2, table, init, error)) == NULL
      || (b = ks_model_parameter (model, "head.b", 1, bias, zero, error)) == NULL
      || (wte = ks_transpose (wte, swap, error)) == NULL
      || (logits = ks_matmul (x, wte, error)) == NULL)
    return NULL;
  return ks_add (logits, b, error);
}

static KsExpr *
labels (KsModel *model, const LayerArgs *a, GError **error)
{
  const gint64 rows[] = { a->rows };
  KsExpr *y = ks_model_find (model, "y");
  return y != NULL ? y : ks_model_data (model, "y", 1, rows, KS_DTYPE_INT64, error);
}

static KsExpr *
loss (KsModel *model, KsExpr *logits, gconstpointer args, GError **error)
{
  KsExpr *y = labels (model, args, error);
  return y == NULL ? NULL : ks_softmax_cross_entropy (logits, y, error);
}

static KsExpr *
accuracy (KsModel *model, KsExpr *logits, gconstpointer args, GError **error)
{
  KsExpr *y = labels (model, args, error);
  return y == NULL ? NULL : ks_accuracy (logits, y, error);
}

enum { N_LAYERS = BLOCKS + 2 };

static void
describe (LayerArgs *args, gint64 rows, KsLayerDesc *layers, KsLayerDesc *loss_desc,
          KsLayerDesc *metric_desc)
{
  static const char *const long_skip[] = { "long/h1", NULL }, *const short_skip[] = {
    "short/x3", NULL };
  for (int i = 0; i < N_LAYERS + 1; i++)
    args[i] = (LayerArgs) { i, rows };
  layers[0] = (KsLayerDesc) { "Embedding", embed, &args[0], "wte" };
  for (int i = 1; i <= BLOCKS; i++)
    layers[i] = (KsLayerDesc) { "Block", block, &args[i], NULL };
  args[1].stash_output = long_skip[0];
  layers[1].stash = long_skip;
  args[6].pop = long_skip[0];
  layers[6].pop = long_skip;
  args[3].stash_input = short_skip[0];
  layers[3].stash = short_skip;
  args[4].pop = short_skip[0];
  layers[4].pop = short_skip;
  layers[N_LAYERS - 1] = (KsLayerDesc) { "Head", head, &args[N_LAYERS - 1], "wte" };
  *loss_desc = (KsLayerDesc) { "CrossEntropy", loss, &args[N_LAYERS], NULL };
  *metric_desc = (KsLayerDesc) { "Accuracy", accuracy, &args[N_LAYERS], NULL };
}

/* Step s's batch: tokens and the labels a fixed rule gives them. */
static void
batch (int step, gint64 *ids, gint64 *y)
{
  g_autoptr (GRand) rng = g_rand_new_with_seed (1000 + step);
  for (int i = 0; i < BATCH; i++)
    {
      ids[i] = g_rand_int_range (rng, 0, VOCAB);
      y[i] = (ids[i] * 5 + 3) % VOCAB;
    }
}

#define FAIL(...) KS_RANK_CHECK ("stage", stage, FALSE, __VA_ARGS__)
#define OK(call) KS_RANK_OK ("stage", stage, call)

static int
run_stage (char **argv)
{
  int rank = atoi (argv[2]), p = atoi (argv[3]), v = atoi (argv[4]), m = atoi (argv[5]);
  int recompute = atoi (argv[7]), d = atoi (argv[8]), stage = rank % p, replica = rank / p;
  const char *dir = argv[9];
  const gsize rows = BATCH / d; /* this replica's */
  g_autofree char *openblas = ks_test_build_plugin_dir ("openblas");
  g_autofree char *optim = ks_test_build_plugin_dir ("optim");
  g_autofree char *store_dir = ks_test_build_plugin_dir ("store");
  g_autofree char *gloo = ks_test_build_plugin_dir ("gloo");
  g_autofree char *shm = ks_test_build_plugin_dir ("shm");
  g_autofree char *paths = g_strdup_printf ("%s:%s:%s:%s:%s", openblas, optim, store_dir, gloo,
                                            shm);
  g_autoptr (KsConfig) config = ks_config_new ();
  g_autoptr (KsRegistry) registry = NULL;
  g_autoptr (KsCompute) compute = NULL;
  g_autoptr (KsStore) store = NULL;
  g_autoptr (KsComm) comm = NULL, pipe_comm = NULL, data_comm = NULL;
  LayerArgs args1[N_LAYERS + 1], argsm[N_LAYERS + 1];
  KsLayerDesc one[N_LAYERS], piped[N_LAYERS], loss1, lossm, metric1, metricm;
  gsize boundaries[64];
  KsPipelineShape shape = { p, v, m, 0, boundaries, recompute };

  g_assert_true (ks_config_set_override (config, "optim.lr=0.2", NULL));
  g_assert_true (ks_config_set_override (config, "optim.momentum=0.5", NULL));
  registry = ks_test_scan (config, paths);
  /* the pipeline clips by the norm over its stages, one process in its optimizer */
  g_autoptr (KsOptimizer) optm = NULL;
  OK ((optm = ks_optimizer_new (registry, config, "momentum", ERR)) != NULL);
  g_assert_true (ks_config_set_override (config, "optim.clip_norm=" G_STRINGIFY (CLIP_NORM),
                                         NULL));
  OK ((compute = ks_compute_new (registry, config, "openblas", ERR)) != NULL);
  g_assert_true (ks_schedule_kind_from_name (argv[6], &shape.schedule));
  if (p * d > 1)
    {
      OK ((store = ks_store_new (registry, config, "file", ERR)) != NULL);
      OK (ks_store_open (store, dir, "pipe", NULL, ERR));
      OK ((comm = ks_comm_new (registry, config, argv[10], ERR)) != NULL);
      OK (ks_comm_connect (comm, store, rank, p * d, 30000, ERR));
      OK (ks_pipeline_groups (comm, p, &pipe_comm, &data_comm, ERR));
      if (ks_comm_rank (pipe_comm) != stage || ks_comm_rank (data_comm) != replica)
        FAIL ("rank %d is stage %d of replica %d, not %d of %d", rank, ks_comm_rank (pipe_comm),
              ks_comm_rank (data_comm), stage, replica);
    }

  /* one process, the whole batch at once */
  describe (args1, BATCH, one, &loss1, &metric1);
  g_autoptr (KsModel) model1 = ks_model_new (compute);
  g_autoptr (KsOptimizer) opt1 = NULL;
  KsExpr *logits1, *loss_expr1;
  OK (ks_layers_build (model1, one, N_LAYERS, &logits1, ERR));
  OK ((loss_expr1 = loss (model1, logits1, &args1[N_LAYERS], ERR)) != NULL);
  OK (ks_model_init (model1, ERR));
  OK ((opt1 = ks_optimizer_new (registry, config, "momentum", ERR)) != NULL);
  OK (ks_optimizer_minimize (opt1, model1, loss_expr1, NULL, 0, NULL, ERR));

  /* the pipeline: layers cut uniformly into p * v chunks */
  describe (argsm, rows / m, piped, &lossm, &metricm);
  KsLayerInfo info[N_LAYERS];
  g_autoptr (KsSegmenter) seg = NULL;
  g_autoptr (KsPipeline) pipe = NULL;
  OK (ks_layers_info (piped, N_LAYERS, info, ERR));
  if (info[0].n_params != VOCAB * WIDTH || info[N_LAYERS - 1].n_params != VOCAB)
    FAIL ("layer info: embedding %" G_GINT64_FORMAT ", head %" G_GINT64_FORMAT " parameters",
          info[0].n_params, info[N_LAYERS - 1].n_params);
  for (int i = 0; i <= p * v; i++) /* uniform, remainder last */
    boundaries[i] = (gsize) i * N_LAYERS / (p * v);
  OK ((pipe = ks_pipeline_new (compute, pipe_comm, stage, &shape, piped, N_LAYERS, &lossm,
                               &metricm, ERR)) != NULL);
  ks_pipeline_set_data_parallel (pipe, data_comm);
  ks_pipeline_set_clip_norm (pipe, CLIP_NORM);
  OK (ks_pipeline_init (pipe, ERR));

  double first = 0, last = 0;
  int clipped_steps = 0;
  for (int step = 1; step <= STEPS; step++)
    {
      gint64 ids[BATCH], y[BATCH];
      batch (step, ids, y);
      KsFeed feeds[] = { { "ids", ids, sizeof ids }, { "y", y, sizeof y } };
      KsFeed mine[] = { { "ids", ids + replica * rows, rows * sizeof *ids },
                        { "y", y + replica * rows, rows * sizeof *y } };
      double lm;
      float l1;
      OK (ks_optimizer_step (opt1, feeds, 2, ERR));
      OK (ks_tensor_to_host (ks_expr_last_value (loss_expr1), &l1, sizeof l1, ERR));
      OK (ks_pipeline_step (pipe, optm, mine, 2, &lm, ERR));
      if (fabs (lm - l1) > 2e-5 * MAX (1, fabs (l1)))
        FAIL ("step %d: pipelined loss %.7f, one process %.7f", step, lm, l1);
      if (step == 1)
        first = l1;
      last = l1;
      /* the one-process optimizer clipped in place: a norm of CLIP_NORM says it bound */
      KsArena *g1 = ks_model_gradients (model1);
      g_autofree float *g = g_new (float, ks_arena_numel (g1));
      double squares = 0;
      memcpy (g, ks_arena_data (g1), ks_arena_numel (g1) * sizeof *g);
      for (gsize j = 0; j < ks_arena_numel (g1); j++)
        squares += (double) g[j] * g[j];
      clipped_steps += fabs (sqrt (squares) - CLIP_NORM) < 1e-4;
    }
  if (clipped_steps == 0 || clipped_steps == STEPS)
    FAIL ("clipping bound in %d of %d steps: the test needs some of each", clipped_steps, STEPS);
  if (!(last < first - 0.05))
    FAIL ("the one-process loss went from %.4f to %.4f: the run does not train", first, last);

  /* this stage's parameters, each against the one-process one */
  KsArena *params = ks_model_parameters (ks_pipeline_model (pipe));
  for (gsize i = 0; i < ks_arena_count (params); i++)
    {
      const char *name;
      const KsTensor *mine = ks_arena_tensor_at (params, i, &name, NULL);
      const KsTensor *ref = ks_arena_tensor (ks_model_parameters (model1), name);
      g_autofree float *a = g_new (float, mine->numel), *b = g_new (float, mine->numel);
      if (ref == NULL)
        FAIL ("parameter '%s' is not in the one-process model", name);
      OK (ks_tensor_to_host (mine, a, mine->numel * sizeof (float), ERR));
      OK (ks_tensor_to_host (ref, b, ref->numel * sizeof (float), ERR));
      for (gsize j = 0; j < mine->numel; j++)
        if (fabsf (a[j] - b[j]) > 2e-5f * MAX (1, fabsf (b[j])))
          FAIL ("parameter %s[%" G_GSIZE_FORMAT "] = %.7f, one process %.7f", name, j, a[j],
                b[j]);
    }

  /* evaluation: the pipelined accuracy of a fresh batch (averaged over the replicas, each
   * given its rows) equals the one-process one */
  gint64 ids[BATCH], y[BATCH];
  double am;
  float a1;
  batch (99, ids, y);
  KsFeed feeds[] = { { "ids", ids, sizeof ids }, { "y", y, sizeof y } };
  KsFeed mine[] = { { "ids", ids + replica * rows, rows * sizeof *ids },
                    { "y", y + replica * rows, rows * sizeof *y } };
  KsExpr *acc1;
  OK ((acc1 = accuracy (model1, logits1, &args1[N_LAYERS], ERR)) != NULL);
  OK (ks_model_run (model1, feeds, 2, &acc1, 1, ERR));
  OK (ks_tensor_to_host (ks_expr_last_value (acc1), &a1, sizeof a1, ERR));
  OK (ks_pipeline_evaluate (pipe, mine, 2, &am, ERR));
  OK (data_comm == NULL
      || ks_comm_allreduce (data_comm, &am, 1, KS_DTYPE_FLOAT64, KS_REDUCE_AVG, ERR));
  if (fabs (am - a1) > 1e-6)
    FAIL ("pipelined accuracy %.4f, one process %.4f", am, a1);
  return 0;
}

static const char *self;

/* The skip layout of the test model under a cut, and every wrong description refused at
 * build time with the layer named. */
static void
test_skip_layout (void)
{
  LayerArgs args[N_LAYERS + 1];
  KsLayerDesc layers[N_LAYERS], loss_desc, metric_desc;
  const gsize four[] = { 0, 2, 4, 6, 8 };
  g_autofree KsSkipRoute *routes = NULL;
  gsize n_routes;
  GError *error = NULL;

  describe (args, 4, layers, &loss_desc, &metric_desc);
  g_assert_true (ks_skip_layout (layers, N_LAYERS, four, 4, &routes, &n_routes, &error));
  g_assert_cmpuint (n_routes, ==, 2);
  g_assert_cmpstr (routes[0].name, ==, "long/h1");
  g_assert_cmpuint (routes[0].stash_layer, ==, 1);
  g_assert_cmpuint (routes[0].pop_layer, ==, 6);
  g_assert_cmpint (routes[0].stash_chunk, ==, 0);
  g_assert_cmpint (routes[0].pop_chunk, ==, 3);
  g_assert_cmpstr (routes[1].name, ==, "short/x3");
  g_assert_cmpint (routes[1].stash_chunk, ==, 1);
  g_assert_cmpint (routes[1].pop_chunk, ==, 2);

  static const char *const long_skip[] = { "long/h1", NULL }, *const other[] = { "other", NULL };
  static const struct {
    int layer;
    gboolean stash; /* else pop */
    const char *const *names;
    const char *want;
  } wrong[] = {
    { 2, FALSE, other, "layer 2 (Block) pops 'other', which no earlier layer stashes" },
    { 5, TRUE, other, "layer 5 (Block) stashes 'other', which no later layer pops" },
    { 2, TRUE, long_skip, "layer 2 (Block) stashes 'long/h1', which layer 1 stashes already" },
    { 7, FALSE, long_skip, "layer 7 (Head) pops 'long/h1', which layer 6 pops already" },
    { 1, FALSE, long_skip, "layer 1 (Block) pops 'long/h1', which no earlier layer stashes" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (wrong); i++)
    {
      KsLayerDesc bad[N_LAYERS];
      g_autofree KsSkipRoute *none = NULL;
      memcpy (bad, layers, sizeof bad);
      if (wrong[i].stash)
        bad[wrong[i].layer].stash = wrong[i].names;
      else
        bad[wrong[i].layer].pop = wrong[i].names;
      g_assert_false (ks_skip_layout (bad, N_LAYERS, four, 4, &none, &n_routes, &error));
      g_assert_nonnull (error);
      if (strstr (error->message, wrong[i].want) == NULL)
        g_error ("case %u: want '%s', got '%s'", i, wrong[i].want, error->message);
      g_assert_null (none);
      g_clear_error (&error);
    }

  /* a builder that does not do what its lists say */
  g_autoptr (KsModel) model = ks_model_new (NULL);
  KsExpr *out;
  args[3].stash_input = NULL; /* layer 3 still lists "short/x3" */
  g_assert_false (ks_layers_build (model, layers, N_LAYERS, &out, &error));
  g_assert_cmpstr (error->message, ==, "layer 3 (Block): its stash list names 'short/x3' but "
                                       "it did not stash it");
  g_clear_error (&error);
  describe (args, 4, layers, &loss_desc, &metric_desc);
  layers[6].pop = NULL; /* the builder pops it all the same */
  layers[7].pop = long_skip;
  g_autoptr (KsModel) model2 = ks_model_new (NULL);
  g_assert_false (ks_layers_build (model2, layers, N_LAYERS, &out, &error));
  g_assert_cmpstr (error->message, ==, "layer 6 (Block): pops 'long/h1' but its pop list does "
                                       "not name it");
  g_clear_error (&error);
}

/* Runs every stage of one configuration; fails the test with their messages. */
typedef struct {
  int p, v, m;
  const char *schedule;
  int recompute, d;
  const char *comm; /* the communicator's plugin */
} Case;

/* Runs every stage of every replica of one configuration; fails the test with their
 * messages. */
static void
run_job (const Case *c)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *ps = g_strdup_printf ("%d", c->p), *vs = g_strdup_printf ("%d", c->v);
  g_autofree char *ms = g_strdup_printf ("%d", c->m), *rs = g_strdup_printf ("%d", c->recompute);
  g_autofree char *ds = g_strdup_printf ("%d", c->d);
  const char *argv[] = { self, "--rank", "R", ps, vs, ms, c->schedule, rs, ds, dir, c->comm,
                         NULL };
  KsTestJob job;
  int status[8];

  ks_test_start_ranks (&job, argv, 2, c->p * c->d);
  g_autofree char *err = ks_test_wait_ranks (&job, status);
  for (int r = 0; r < c->p * c->d; r++)
    if (!g_spawn_check_wait_status (status[r], NULL))
      g_error ("p=%d v=%d m=%d %s recompute %d d=%d %s: rank %d failed:\n%s", c->p, c->v,
               c->m, c->schedule, c->recompute, c->d, c->comm, r, err);
  ks_test_rmtree (dir);
}

/* ---- ksdist train and launch with [pipeline] ---- */

static const char *const plugins[] = { "openblas", "optim", "store", "roles", "gloo", "shm",
                                       "segment", NULL };

/* The MLP of examples/default.ini for 120 steps with three hidden layers (four Linear
 * layers) */
static const char *const mlp_sets[] = { "train.steps=120", "train.log_every=20",
                                        "model.hidden=32,32,32", "optim.warmup=0",
                                        "optim.lr=0.01", "data.task=rings", NULL };
/* The GPT of examples/gpt-words.ini for 60 steps (Embedding, two Blocks, Head), its
 * gradients clipped to a norm of 1 */
static const char *const gpt_sets[] = { "train.steps=60", "train.log_every=10",
                                        "optim.warmup=0", NULL };

/* The start of a command line: `launch -n N INI`, or `train INI` when n is NULL. */
static GPtrArray *
command_line (const char *n, const char *ini)
{
  GPtrArray *args = g_ptr_array_new ();
  if (n != NULL)
    {
      g_ptr_array_add (args, "launch");
      g_ptr_array_add (args, "-n");
      g_ptr_array_add (args, (char *) n);
    }
  else
    g_ptr_array_add (args, "train");
  g_ptr_array_add (args, (char *) ini);
  return args;
}

/* Runs ksdist on examples/`example`, its `sets` and then `extra` --set lines added;
 * returns the metrics file's lines. */
static GStrv
train_example (const char *dir, const char *example, const char *const *sets,
               const char *launch_n, const char *const *extra)
{
  g_autofree char *ini = g_build_filename (g_getenv ("KS_SRCDIR"), "examples", example, NULL);
  g_autofree char *metrics = g_build_filename (dir, "metrics.jsonl", NULL);
  g_autofree char *metrics_set = g_strconcat ("log.metrics=", metrics, NULL);
  g_autoptr (GPtrArray) args = command_line (launch_n, ini);
  g_autofree char *out = NULL, *err = NULL, *text = NULL;

  g_ptr_array_add (args, "--set");
  g_ptr_array_add (args, metrics_set);
  for (const char *const *set = sets; *set != NULL; set++)
    {
      g_ptr_array_add (args, "--set");
      g_ptr_array_add (args, (char *) *set);
    }
  for (; extra != NULL && *extra != NULL; extra++)
    {
      g_ptr_array_add (args, "--set");
      g_ptr_array_add (args, (char *) *extra);
    }
  g_ptr_array_add (args, NULL);
  int status = ks_test_run_ksdist ((const char *const *) args->pdata, NULL, plugins, &out, &err);
  if (status != 0)
    g_error ("ksdist failed (%d):\n%s%s", status, out, err);
  g_assert_true (g_file_get_contents (metrics, &text, NULL, NULL));
  return g_strsplit (g_strstrip (text), "\n", -1);
}

static double
field (const char *line, const char *key)
{
  g_autofree char *pattern = g_strdup_printf ("\"%s\": ", key);
  const char *at = strstr (line, pattern);
  g_assert_nonnull (at);
  return g_ascii_strtod (at + strlen (pattern), NULL);
}

/* The stages of one host meet through shared memory unless told otherwise, and say so. */
static void
test_launch_comm (void)
{
  g_autofree char *ini = g_build_filename (g_getenv ("KS_SRCDIR"), "examples", "default.ini",
                                           NULL);
  static const char *const said[][2] = {
    { "comm.backend=auto", ", through shm by auto: every rank on this host" },
    { "comm.backend=gloo", ", through gloo by [comm] backend" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (said); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      const char *args[] = { "launch", "-n", "2", ini, "--set", "pipeline.stages=2",
                             "--set", "train.steps=2", "--set", "optim.warmup=0", "--set",
                             said[i][0], NULL };
      int status = ks_test_run_ksdist (args, NULL, plugins, &out, &err);
      g_autofree char *all = g_strconcat (out, err, NULL);
      if (status != 0 || strstr (all, said[i][1]) == NULL
          || strstr (all, "stage 1 of 2 (1f1b schedule") == NULL)
        g_error ("%s: want '%s' from each stage (status %d):\n%s", said[i][0], said[i][1],
                 status, all);
    }
}

/* A pipelined run against the one-process run: the same loss at every log line (to
 * float rounding) and the same held-out metric (`eval`, to `eval_tolerance`). */
static void
assert_same_run_within (GStrv one, GStrv piped, const char *what, double loss_tolerance,
                        const char *eval, double eval_tolerance)
{
  guint n = g_strv_length (one);
  g_assert_cmpuint (g_strv_length (piped), ==, n);
  for (guint i = 0; i < n; i++)
    {
      double a = field (piped[i], "loss"), b = field (one[i], "loss");
      if (fabs (a - b) > loss_tolerance * MAX (1, fabs (b)))
        g_error ("%s, line %u: loss %.6f, one process %.6f", what, i, a, b);
    }
  double a = field (piped[n - 1], eval), b = field (one[n - 1], eval);
  if (fabs (a - b) > eval_tolerance)
    g_error ("%s: %s %.6f, one process %.6f", what, eval, a, b);
}

static void
assert_same_run (GStrv one, GStrv piped, const char *what, const char *eval,
                 double eval_tolerance)
{
  assert_same_run_within (one, piped, what, 1e-4, eval, eval_tolerance);
}

/* The MLP in one process, then pipelined runs of it. */
static void
test_launch (void)
{
  const char *runs[][6] = {
    { "pipeline.micro_batches=4", NULL },
    { "pipeline.stages=2", "pipeline.micro_batches=4", NULL },
    { "pipeline.stages=4", "pipeline.micro_batches=8", "pipeline.schedule=fthenb",
      "pipeline.recompute_interval=1", NULL },
    { "pipeline.stages=2", "pipeline.virtual_stages=2", "pipeline.micro_batches=2",
      "pipeline.schedule=interleaved", "pipeline.seg_method=parameters", NULL },
    /* two replicas of a 2-stage pipeline, each with half of the batch */
    { "pipeline.stages=2", "pipeline.micro_batches=2", "train.batch=64", NULL },
    /* cut by the time worker 0 measured: every worker must cut alike */
    { "pipeline.stages=4", "pipeline.micro_batches=4", "pipeline.seg_method=cost", NULL },
  };
  static const char *const launch_n[] = { NULL, "2", "4", "2", "4", "4" };
  g_autofree char *dir = ks_test_tmpdir ();
  g_auto (GStrv) one = train_example (dir, "default.ini", mlp_sets, NULL, NULL);

  g_autofree char *trace = g_build_filename (dir, "trace.json", NULL);
  g_autofree char *trace_set = g_strconcat ("trace.path=", trace, NULL);
  g_autofree char *trace2 = g_build_filename (dir, "trace-dp.json", NULL);
  g_autofree char *trace2_set = g_strconcat ("trace.path=", trace2, NULL);
  g_autofree char *text = NULL, *text2 = NULL;

  g_assert_cmpuint (g_strv_length (one), ==, 6);
  g_assert_cmpfloat (field (one[5], "loss"), <, field (one[0], "loss") - 0.05);
  /* a trace of the 1f1b run on 2 stages: per step and stage, 4 forwards, 4 backwards,
   * their 8 transfers, the shared reduction and the optimizer */
  runs[1][2] = trace_set;
  runs[4][3] = trace2_set; /* and of 2 replicas x 2 stages: one file, a process each */
  for (guint r = 0; r < G_N_ELEMENTS (runs); r++)
    {
      g_auto (GStrv) piped = train_example (dir, "default.ini", mlp_sets, launch_n[r], runs[r]);
      g_autofree char *what = g_strdup_printf ("mlp run %u (%s ...)", r, runs[r][0]);
      assert_same_run (one, piped, what, "eval_accuracy", 0);
    }
  g_assert_true (g_file_get_contents (trace, &text, NULL, NULL));
  g_assert_true (g_str_has_prefix (text, "[{\"name\": \"process_name\""));
  g_assert_true (g_str_has_suffix (text, "}\n]\n"));
  g_assert_nonnull (strstr (text, "{\"name\": \"F0.0\", \"cat\": \"forward\", \"ph\": \"X\""));
  g_assert_nonnull (strstr (text, "\"args\": {\"name\": \"stage 1\"}"));
  gsize events = 0;
  for (const char *at = text; (at = strstr (at, "\"ph\": \"X\"")) != NULL; at++)
    events++;
  g_assert_cmpuint (events, ==, 120 * 2 * 18);

  g_assert_true (g_file_get_contents (trace2, &text2, NULL, NULL));
  g_assert_nonnull (strstr (text2, "\"pid\": 1, \"args\": {\"name\": \"ksdist pipeline, replica 1\"}"));
  gsize per_replica[2] = { 0, 0 };
  for (int r = 0; r < 2; r++)
    {
      g_autofree char *mark = g_strdup_printf ("\"pid\": %d, \"tid\": ", r);
      for (const char *at = text2; (at = strstr (at, "\"ph\": \"X\"")) != NULL; at++)
        if (strstr (at, "}") > strstr (at, mark) && strstr (at, mark) != NULL)
          per_replica[r]++;
    }
  g_test_message ("dp x pp trace: %zu and %zu events", per_replica[0], per_replica[1]);
  /* per step and stage: 2 forwards, 2 backwards, 4 transfers, shared and optimizer */
  g_assert_cmpuint (per_replica[0], ==, 120 * 2 * 10);
  g_assert_cmpuint (per_replica[1], ==, 120 * 2 * 10);

  /* drawn: a row per stage of each replica */
  g_autofree char *svg_path = g_build_filename (dir, "trace.svg", NULL);
  g_autofree char *out = NULL, *err = NULL, *svg = NULL;
  g_assert_cmpint (ks_test_run_ksdist (ARGS ("plot", trace2, "-o", svg_path, "--steps", "all"),
                                       NULL, plugins, &out, &err), ==, 0);
  g_assert_nonnull (strstr (out, ": 4 rows, 4800 events over "));
  g_assert_nonnull (strstr (out, " ms (steps 1 to 120 of 120)"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  /* by default the last steps, readable */
  g_assert_cmpint (ks_test_run_ksdist (ARGS ("plot", trace2, "-o", svg_path), NULL, plugins,
                                       &out, &err), ==, 0);
  g_assert_nonnull (strstr (out, " ms (steps 118 to 120 of 120)"));
  g_assert_true (g_file_get_contents (svg_path, &svg, NULL, NULL));
  g_assert_nonnull (strstr (svg, ">replica 1 stage 1 ("));
  g_assert_nonnull (strstr (svg, "fill=\"#2ca02c\"")); /* a backward */
  ks_test_rmtree (dir);
}

/* The GPT of examples/gpt-words.ini in one process, then on 2 and 4 stages, and as 2
 * replicas of 2 stages. */
static void
test_launch_gpt (void)
{
  const char *runs[][4] = {
    { "pipeline.stages=2", "pipeline.micro_batches=4", NULL },
    { "pipeline.stages=4", "pipeline.micro_batches=4", "pipeline.recompute_interval=1", NULL },
    { "pipeline.stages=2", "pipeline.micro_batches=2", "train.batch=8", NULL },
  };
  static const char *const launch_n[] = { "2", "4", "4" };
  /* the held-out windows are spaced by [train] batch, so 2 replicas' batch of 8 scores
   * other windows than the one-process batch of 16 */
  static const double eval_tolerance[] = { 1e-4, 1e-4, 0.05 };
  g_autofree char *dir = ks_test_tmpdir ();
  g_auto (GStrv) one = train_example (dir, "gpt-words.ini", gpt_sets, NULL, NULL);

  g_assert_cmpuint (g_strv_length (one), ==, 6);
  g_assert_cmpfloat (field (one[5], "loss"), <, field (one[0], "loss") - 0.3);
  for (guint r = 0; r < G_N_ELEMENTS (runs); r++)
    {
      g_auto (GStrv) piped = train_example (dir, "gpt-words.ini", gpt_sets, launch_n[r], runs[r]);
      g_autofree char *what = g_strdup_printf ("gpt run %u (%s ...)", r, runs[r][0]);
      assert_same_run (one, piped, what, "eval_loss", eval_tolerance[r]);
    }
  ks_test_rmtree (dir);
}

/* bfloat16's matmuls on 2 stages follow one process in bfloat16: the rounding is per
 * element, so the micro-batches round what the whole batch rounds */
static void
test_launch_gpt_bf16 (void)
{
  const char *const bf16[] = { "amp.dtype=bf16", NULL };
  const char *const piped_bf16[] = { "amp.dtype=bf16", "pipeline.stages=2",
                                     "pipeline.micro_batches=4", NULL };
  g_autofree char *dir = ks_test_tmpdir ();
  g_auto (GStrv) one = train_example (dir, "gpt-words.ini", gpt_sets, NULL, bf16);
  g_auto (GStrv) fp32 = train_example (dir, "gpt-words.ini", gpt_sets, NULL, NULL);
  g_auto (GStrv) piped = train_example (dir, "gpt-words.ini", gpt_sets, "2", piped_bf16);

  /* the losses of 5 logged steps within 1e-3 (relative): bfloat16 keeps 8 bits, and a
   * sanitizer build's other float contractions drifted 1.2e-4 by the last one */
  assert_same_run_within (one, piped, "gpt in bf16 on 2 stages", 1e-3, "eval_loss", 1e-3);
  /* and bf16 is not float32: the comparison could tell them apart */
  g_assert_cmpfloat (fabs (field (one[5], "loss") - field (fp32[5], "loss")), >, 1e-6);
  ks_test_rmtree (dir);
}

/* examples/gpt-pipeline.ini (2 stages x 2 virtual stages, interleaved, recompute, the
 * long skip from the embeddings to the head) follows one process of the same GPT; and
 * the skip changes the model (without it the losses differ). */
static void
test_gpt_pipeline_example (void)
{
  static const char *const steps[] = { "train.steps=30", "train.log_every=10", "optim.warmup=0",
                                        NULL };
  static const char *const alone[] = { "pipeline.stages=1", "pipeline.virtual_stages=1",
                                       "pipeline.micro_batches=1", "pipeline.schedule=1f1b",
                                       "pipeline.recompute_interval=0", NULL };
  static const char *const no_skip[] = { "pipeline.stages=1", "pipeline.virtual_stages=1",
                                         "pipeline.micro_batches=1", "pipeline.schedule=1f1b",
                                         "pipeline.recompute_interval=0", "model.skip=false",
                                         NULL };
  g_autofree char *dir = ks_test_tmpdir ();
  g_auto (GStrv) one = train_example (dir, "gpt-pipeline.ini", steps, NULL, alone);
  g_auto (GStrv) piped = train_example (dir, "gpt-pipeline.ini", steps, "2", NULL);
  g_auto (GStrv) plain = train_example (dir, "gpt-pipeline.ini", steps, NULL, no_skip);

  g_assert_cmpuint (g_strv_length (one), ==, 3);
  assert_same_run (one, piped, "gpt-pipeline.ini on 2 stages", "eval_loss", 1e-4);
  g_assert_cmpfloat (fabs (field (one[2], "loss") - field (plain[2], "loss")), >, 1e-4);
  ks_test_rmtree (dir);
}

/* Runs ksdist (launch -n `n`, or train when NULL) on examples/gpt-words.ini with
 * checkpoints every 10 steps into `ckpt` and `extra` settings; returns stdout, stderr. */
static char *
gpt_checkpointed (const char *n, const char *ckpt, const char *const *extra)
{
  g_autofree char *ini = g_build_filename (g_getenv ("KS_SRCDIR"), "examples", "gpt-words.ini",
                                           NULL);
  g_autofree char *set_ckpt = g_strdup_printf ("train.checkpoint_dir=%s", ckpt);
  g_autoptr (GPtrArray) args = command_line (n, ini);
  const char *common[] = { "train.log_every=10", "optim.warmup=0", "optim.total_steps=30",
                           "train.checkpoint_every=10", set_ckpt };
  char *out = NULL, *err = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (common); i++)
    {
      g_ptr_array_add (args, "--set");
      g_ptr_array_add (args, (char *) common[i]);
    }
  for (; extra != NULL && *extra != NULL; extra++)
    {
      g_ptr_array_add (args, "--set");
      g_ptr_array_add (args, (char *) *extra);
    }
  g_ptr_array_add (args, NULL);
  int status = ks_test_run_ksdist ((const char *const *) args->pdata, NULL, plugins, &out, &err);
  if (status != 0)
    g_error ("ksdist failed (%d):\n%s%s", status, out, err);
  char *both = g_strconcat (out, err, NULL);
  g_free (out);
  g_free (err);
  return both;
}

static GBytes *
file_bytes (const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  char *text = NULL;
  gsize len;
  g_assert_true (g_file_get_contents (path, &text, &len, NULL));
  return g_bytes_new_take (text, len);
}

static gboolean
holds (GBytes *bytes, const char *text)
{
  gsize len;
  const char *data = g_bytes_get_data (bytes, &len);
  return memmem (data, len, text, strlen (text)) != NULL;
}

/* The loss a run printed at `step` (stdout of train, or of launch: rank 0's line). */
static double
loss_at (const char *out, int step)
{
  g_autofree char *mark = g_strdup_printf ("step %d/30 loss ", step);
  const char *at = strstr (out, mark);
  g_assert_nonnull (at);
  return g_ascii_strtod (at + strlen (mark), NULL);
}

/* Pipelined checkpoints (a GPT on 2 stages): each stage writes its part; a run with
 * dropout stopped at step 20 and resumed ends bitwise where an uninterrupted one does;
 * without dropout (whose masks depend on the micro-batch) the parts load into one
 * process, and one process's checkpoint into the stages, each going on as the run it
 * came from (to float rounding: one process sums in another order). */
static void
test_pipeline_checkpoints (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *whole = g_build_filename (dir, "whole", NULL);
  g_autofree char *half = g_build_filename (dir, "half", NULL);
  g_autofree char *one = g_build_filename (dir, "one", NULL);
  g_autofree char *plain = g_build_filename (dir, "plain", NULL);
  static const char *const piped_20[] = { "pipeline.stages=2", "pipeline.micro_batches=2",
                                          "train.steps=20", "model.dropout=0.1", NULL };
  static const char *const piped_resume[] = { "pipeline.stages=2", "pipeline.micro_batches=2",
                                              "train.steps=30", "train.resume=true",
                                              "model.dropout=0.1", NULL };
  static const char *const plain_resume[] = { "pipeline.stages=2", "pipeline.micro_batches=2",
                                              "train.steps=30", "train.resume=true", NULL };

  g_free (gpt_checkpointed ("2", whole, ARGS ("pipeline.stages=2", "pipeline.micro_batches=2",
                                              "train.steps=30", "model.dropout=0.1")));
  g_autofree char *ck = g_build_filename (whole, "checkpoint-30", NULL);
  g_autofree char *ck_whole_file = g_build_filename (ck, "model.safetensors", NULL);
  g_autoptr (GBytes) part1 = file_bytes (ck, "stage-1-of-2.safetensors");
  g_assert_true (holds (part1, "\"part\":\"1\""));
  g_assert_true (holds (part1, "\"parts\":\"2\""));
  g_assert_true (holds (part1, "\"head.w\""));
  g_assert_false (holds (part1, "\"wte\"")); /* stage 0's */
  g_assert_false (g_file_test (ck_whole_file, G_FILE_TEST_EXISTS));

  g_free (gpt_checkpointed ("2", half, piped_20));
  g_autofree char *o_half = gpt_checkpointed ("2", half, piped_resume);
  g_assert_nonnull (strstr (o_half, "resumed from "));
  g_autofree char *ck_half = g_build_filename (half, "checkpoint-30", NULL);
  for (int s = 0; s < 2; s++)
    {
      g_autofree char *name = g_strdup_printf ("stage-%d-of-2.safetensors", s);
      g_autofree char *path = g_build_filename (ck, name, NULL);
      g_autofree char *path_half = g_build_filename (ck_half, name, NULL);
      g_autoptr (GBytes) a = ks_test_checkpoint_bytes (path);
      g_autoptr (GBytes) b = ks_test_checkpoint_bytes (path_half);
      /* the header (step, counters; not the save's identity) and the tensors */
      g_assert_true (g_bytes_equal (a, b));
    }

  /* the stages' parts into one process: steps 21-30 go as the pipeline's went */
  g_autofree char *o_plain = gpt_checkpointed ("2", plain, ARGS ("pipeline.stages=2",
                                                                 "pipeline.micro_batches=2",
                                                                 "train.steps=30"));
  g_autofree char *plain_30 = g_build_filename (plain, "checkpoint-30", NULL);
  ks_test_rmtree (plain_30);
  g_autofree char *o_one_from_parts = gpt_checkpointed (NULL, plain, ARGS ("train.steps=30",
                                                                           "train.resume=true"));
  g_assert_nonnull (strstr (o_one_from_parts, "resumed from "));
  g_assert_cmpfloat (fabs (loss_at (o_one_from_parts, 30) - loss_at (o_plain, 30)), <=, 1e-3);

  /* one process's checkpoint into the stages */
  g_free (gpt_checkpointed (NULL, one, ARGS ("train.steps=20")));
  g_autofree char *o_one = gpt_checkpointed (NULL, one, ARGS ("train.steps=30", "train.resume=true"));
  g_autofree char *one_20 = g_build_filename (one, "checkpoint-30", NULL);
  ks_test_rmtree (one_20); /* resume the stages from step 20 */
  g_autofree char *o_piped_from_one = gpt_checkpointed ("2", one, plain_resume);
  g_assert_nonnull (strstr (o_piped_from_one, "resumed from "));
  g_assert_cmpfloat (fabs (loss_at (o_piped_from_one, 30) - loss_at (o_one, 30)), <=, 1e-3);
  ks_test_rmtree (dir);
}

/* ksdist segment: the stage table of an MLP of six Linear layers (2-64, four 64-64,
 * 64-2: 192, 4160 x4 and 130 parameters) cut into 2 x 2 chunks, and by parameters. */
static void
test_segment_command (void)
{
  g_autofree char *ini = g_build_filename (g_getenv ("KS_SRCDIR"), "examples", "default.ini",
                                           NULL);
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL;
  int status = ks_test_run_ksdist (
      (const char *const[]) { "segment", ini, "--set", "model.hidden=64,64,64,64,64", "--set",
                              "pipeline.stages=2", "--set", "pipeline.virtual_stages=2", "--set",
                              "pipeline.schedule=interleaved", "--set", "pipeline.micro_batches=2",
                              NULL },
      NULL, plugins, &out, &err);
  g_test_message ("%s%s", out, err);
  g_assert_cmpint (status, ==, 0);
  g_assert_nonnull (strstr (out, "# spirals: 6 layers, 16962 parameters; 2 stages x 2 virtual "
                                 "stages, seg_method uniform\n"));
  g_assert_nonnull (strstr (out, "\n0      0      0-0                 192  Linear\n"
                                 "0      2      2-3                8320  Linear x2\n"
                                 "1      1      1-1                4160  Linear\n"
                                 "1      3      4-5                4290  Linear x2\n"));
  status = ks_test_run_ksdist (
      (const char *const[]) { "segment", ini, "--set", "model.hidden=64,64,64,64,64", "--set",
                              "pipeline.stages=2", "--set", "pipeline.seg_method=parameters",
                              NULL },
      NULL, plugins, &out2, NULL);
  g_assert_cmpint (status, ==, 0);
  g_assert_nonnull (strstr (out2, "\n0      0      0-2                8512  Linear x3\n"
                                  "1      1      3-5                8450  Linear x3\n"));

  /* seg_method cost: each layer (a stage each) with its measured time */
  g_autofree char *out3 = NULL, *err3 = NULL;
  status = ks_test_run_ksdist (
      (const char *const[]) { "segment", ini, "--set", "model.hidden=64,64", "--set",
                              "pipeline.stages=3", "--set", "pipeline.seg_method=cost", NULL },
      NULL, plugins, &out3, &err3);
  g_test_message ("%s%s", out3, err3);
  g_assert_cmpint (status, ==, 0);
  g_assert_nonnull (strstr (out3, "stage  chunk  layers       parameters    cost_ms  names\n"));
  g_assert_nonnull (strstr (err3, "seg_method cost: 3 layers take "));
  g_auto (GStrv) lines = g_strsplit (out3, "\n", -1);
  for (int s = 0; s < 3; s++)
    {
      g_auto (GStrv) cols = g_strsplit_set (lines[2 + s], " ", -1);
      double ms = -1;
      int k = 0;
      for (guint i = 0; cols[i] != NULL; i++)
        if (*cols[i] != '\0' && k++ == 4)
          ms = g_ascii_strtod (cols[i], NULL);
      if (!(ms > 0 && ms < 1e4))
        g_error ("stage %d: cost %g ms in '%s'", s, ms, lines[2 + s]);
    }
}

/* ksdist bench pipeline runs every schedule of its table on a small model and reports a
 * bubble for each (how large is not asserted: timings are noise here) beside the exact
 * theory. */
static void
test_bench_command (void)
{
  g_autofree char *out = NULL, *err = NULL;
  int status = ks_test_run_ksdist (
      (const char *const[]) { "bench", "pipeline", "-n", "2", "--json", "--set",
                              "model.hidden=16,16,16", "--set", "train.steps=3", "--set",
                              "train.batch=64", NULL },
      NULL, plugins, &out, &err);
  g_test_message ("%s%s", out, err);
  g_assert_cmpint (status, ==, 0);
  g_assert_true (g_str_has_prefix (out, "{\"what\": \"pipeline\", \"stages\": 2, \"results\": ["));
  g_assert_nonnull (strstr (out, "{\"schedule\": \"1f1b\", \"v\": 1, \"m\": 2, \"bubble\": "));
  g_assert_nonnull (strstr (out, ", \"theory\": 0.3333}"));
  g_assert_nonnull (strstr (out, "{\"schedule\": \"interleaved\", \"v\": 2, \"m\": 16, "));
  g_assert_nonnull (strstr (out, ", \"theory\": 0.0303}]}\n"));
  int n = 0;
  for (const char *at = out; (at = strstr (at, "\"bubble\": ")) != NULL; n++)
    {
      double b = g_ascii_strtod (at += strlen ("\"bubble\": "), NULL);
      if (!(b >= -0.01 && b < 1))
        g_error ("bubble %g in:\n%s", b, out);
    }
  g_assert_cmpint (n, ==, 8);
}

/* bench/run-cluster.sh's measure (`bench pipeline --trace`): the bubble over the span
 * common to the stages. A hand-made trace of 2 stages; in step 1 (step 0 is left out)
 * stage 0 computes 100 + 200 us from 1000 to 1500, stage 1 100 + 100 us from 1000 (a
 * receive) to 1300: 1 - 500 / (2 x 500) = 0.5 (each stage's own span would give
 * 1 - 300/500 and 1 - 200/300, mean 0.3667). */
static void
test_bench_trace (void)
{
  static const char trace[] =
    "[{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": 0},\n"
#define EV(cat, ts, dur, tid)                                                                 \
  "{\"name\": \"x\", \"cat\": \"" cat "\", \"ph\": \"X\", \"ts\": " #ts ", \"dur\": " #dur  \
  ", \"pid\": 0, \"tid\": " #tid "}"
    EV ("forward", 0, 50, 0) ",\n" EV ("optimizer", 60, 5, 0) ",\n"
    EV ("forward", 50, 50, 1) ",\n" EV ("optimizer", 110, 5, 1) ",\n"
    EV ("forward", 1000, 100, 0) ",\n" EV ("send", 1100, 10, 0) ",\n"
    EV ("backward", 1300, 200, 0) ",\n" EV ("optimizer", 1500, 10, 0) ",\n"
    EV ("recv", 1000, 100, 1) ",\n" EV ("forward", 1100, 100, 1) ",\n"
    EV ("backward", 1200, 100, 1) ",\n" EV ("optimizer", 1300, 10, 1) "]\n";
#undef EV
  g_autofree char *dir = g_dir_make_tmp ("ksdist-bench-trace-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "trace.json", NULL);
  g_autofree char *missing = g_build_filename (dir, "none.json", NULL);
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;

  g_assert_true (g_file_set_contents (path, trace, -1, NULL));
  int status = ks_test_run_ksdist (
      (const char *const[]) { "bench", "pipeline", "-n", "2", "--trace", path, NULL }, NULL,
      plugins, &out, &err);
  g_test_message ("%s%s", out, err);
  g_assert_cmpint (status, ==, 0);
  g_assert_cmpstr (out, ==, "0.5000\n");
  status = ks_test_run_ksdist (
      (const char *const[]) { "bench", "pipeline", "-n", "2", "--trace", missing, NULL }, NULL,
      plugins, &out2, &err2);
  g_assert_cmpint (status, !=, 0);
  g_assert_nonnull (strstr (err2, "bench pipeline --trace: "));
  g_assert_nonnull (strstr (err2, "none.json"));
  g_clear_pointer (&out2, g_free);
  g_clear_pointer (&err2, g_free);
  status = ks_test_run_ksdist ((const char *const[]) { "bench", "pipeline", "-n", "2", "--trace",
                                                       path, "--set", "train.steps=3", NULL },
                               NULL, plugins, &out2, &err2);
  g_assert_cmpint (status, ==, 2);
  g_assert_nonnull (strstr (err2, "runs no job: leave out CONFIG and --set"));
  g_remove (path);
  g_rmdir (dir);
}

/* What a pipelined run cannot do says so before it starts. */
static void
test_launch_errors (void)
{
  static const struct {
    const char *n, *set1, *set2, *want, *set3, *ini; /* ini: default.ini when NULL */
  } cases[] = {
    { NULL, "pipeline.stages=2", NULL,
      "[pipeline] stages = 2 needs one worker process per stage: run `ksdist launch -n 2 "
      "CONFIG`" },
    { "3", "pipeline.stages=2", NULL, "[pipeline] stages = 2 but the job has 3 workers" },
    { NULL, "pipeline.micro_batches=5", NULL,
      "[pipeline] micro_batches = 5 does not divide [train] batch = 128" },
    { NULL, "pipeline.micro_batches=2", "train.export_dir=/tmp/x",
      "[train] export_dir: a pipelined run (see [pipeline]) cannot export" },
    { "2", "pipeline.stages=2", "pipeline.seg_method=0,1,9",
      "[pipeline] seg_method 0,1,9: boundaries must start at 0 and end at the layer count 3" },
    { NULL, "pipeline.micro_batches=2", NULL,
      "[pipeline]: the addition task scores by decoding the logits greedily in one process",
      NULL, "addition.ini" },
    { "2", "pipeline.stages=2", "pipeline.schedule=interleaved",
      "[pipeline] schedule interleaved needs virtual_stages >= 2 (it is 1)" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      g_autofree char *ini = g_build_filename (g_getenv ("KS_SRCDIR"), "examples",
                                               cases[i].ini ? cases[i].ini : "default.ini", NULL);
      const char *args[14];
      int k = 0;
      if (cases[i].n != NULL)
        {
          args[k++] = "launch";
          args[k++] = "-n";
          args[k++] = cases[i].n;
        }
      else
        args[k++] = "train";
      args[k++] = ini;
      args[k++] = "--set";
      args[k++] = cases[i].set1;
      if (cases[i].set2 != NULL)
        {
          args[k++] = "--set";
          args[k++] = cases[i].set2;
        }
      if (cases[i].set3 != NULL)
        {
          args[k++] = "--set";
          args[k++] = cases[i].set3;
        }
      args[k] = NULL;
      int status = ks_test_run_ksdist (args, NULL, plugins, &out, &err);
      g_autofree char *said = g_strconcat (out, err, NULL); /* launch relays workers' lines */
      g_test_message ("%s", said);
      /* launch refuses once, as train does, before any process starts */
      g_assert_cmpint (status, ==, 2);
      if (strstr (said, cases[i].want) == NULL)
        g_error ("case %u: want '%s' in:\n%s", i, cases[i].want, said);
    }
}


int
main (int argc, char **argv)
{
  static const Case cases[] = {
    { 1, 1, 4, "fthenb", 0, 1, "gloo" },      { 1, 2, 2, "interleaved", 0, 1, "gloo" },
    { 2, 1, 4, "fthenb", 0, 1, "gloo" },      { 2, 1, 4, "1f1b", 0, 1, "gloo" },
    { 2, 1, 4, "1f1b", 1, 1, "gloo" },        { 2, 2, 4, "interleaved", 0, 1, "gloo" },
    { 2, 2, 2, "interleaved", 2, 1, "gloo" }, { 4, 1, 8, "1f1b", 0, 1, "gloo" },
    { 4, 1, 4, "fthenb", 3, 1, "gloo" },      { 4, 2, 4, "interleaved", 0, 1, "gloo" },
    { 4, 2, 8, "interleaved", 1, 1, "gloo" },
    /* data parallel across pipelines: dp x pp ranks */
    { 1, 1, 2, "fthenb", 0, 2, "gloo" },      { 2, 1, 4, "1f1b", 0, 2, "gloo" },
    { 2, 2, 2, "interleaved", 1, 2, "gloo" }, { 2, 1, 2, "fthenb", 0, 4, "gloo" },
    /* through shared memory: the stages' messages and the replicas' sub-groups */
    { 2, 1, 4, "1f1b", 0, 1, "shm" },         { 4, 2, 8, "interleaved", 1, 1, "shm" },
    { 2, 2, 2, "interleaved", 1, 2, "shm" },
  };

  self = argv[0];
  if (argc == 11 && strcmp (argv[1], "--rank") == 0)
    return run_stage (argv);
  g_test_init (&argc, &argv, NULL);
  if (!ks_test_have_openblas ())
    return 0;
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const Case *c = &cases[i];
      g_autofree char *path = g_strdup_printf ("/pipeline/train/p%d-v%d-m%d-%s-recompute%d-dp%d%s",
                                               c->p, c->v, c->m, c->schedule, c->recompute, c->d,
                                               strcmp (c->comm, "shm") == 0 ? "-shm" : "");
      g_test_add_data_func (path, c, (GTestDataFunc) run_job);
    }
  g_test_add_func ("/pipeline/skip-layout", test_skip_layout);
  g_test_add_func ("/pipeline/launch", test_launch);
  g_test_add_func ("/pipeline/launch-comm", test_launch_comm);
  g_test_add_func ("/pipeline/launch-gpt", test_launch_gpt);
  g_test_add_func ("/pipeline/launch-gpt-bf16", test_launch_gpt_bf16);
  g_test_add_func ("/pipeline/gpt-pipeline-example", test_gpt_pipeline_example);
  g_test_add_func ("/pipeline/checkpoints", test_pipeline_checkpoints);
  g_test_add_func ("/pipeline/launch-errors", test_launch_errors);
  g_test_add_func ("/pipeline/bench-command", test_bench_command);
  g_test_add_func ("/pipeline/bench-trace", test_bench_trace);
  g_test_add_func ("/pipeline/segment-command", test_segment_command);
  return g_test_run ();
}
