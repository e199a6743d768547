/* The built-in GPT ([model] type = gpt) is a layer list like every config model: the same
 * network written as [layer.NAME] groups ([model] type = layers) on the same text trains
 * to the same losses and, after the steps, to the same weights and optimizer state, bit
 * for bit. And the GPT's list keeps its shape: Embedding, a Block each, Head, the long
 * skip from the first to the last. Real `ksdist train` runs on a text written here. */
#define _GNU_SOURCE /* memmem */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#define ARGS(...) ((const char *const[]) { __VA_ARGS__, NULL })

static const char *const plugins[] = { "openblas", "optim", "store", "roles", "gloo", "shm",
                                       "segment", NULL };

enum { CONTEXT = 8, HEADS = 2, WIDTH = 16, SEED = 5 };

typedef struct {
  int layers;
  double dropout;
  gboolean skip;
  gboolean pipelined; /* on 2 stages, the same layers on each */
} Shape;

typedef struct {
  char *dir, *text;
  gsize vocab; /* the text's distinct bytes */
} Fixture;

static void
setup (Fixture *f, gconstpointer data)
{
  g_autoptr (GString) text = g_string_new (NULL);
  gboolean seen[256] = { 0 };
  (void) data;
  f->dir = ks_test_tmpdir ();
  for (int i = 0; i < 40; i++)
    g_string_append_printf (text, "%d sheep jumped over %d fences; ", i * 7 % 13, i % 5);
  for (gsize i = 0; i < text->len; i++)
    seen[(guint8) text->str[i]] = TRUE;
  for (int b = 0; b < 256; b++)
    f->vocab += seen[b];
  f->text = ks_test_write (f->dir, "sheep.txt", text->str);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  (void) data;
  ks_test_rmtree (f->dir);
  g_free (f->dir);
  g_free (f->text);
}

/* What both configs share: the data, the training, a checkpoint at the end; pipelined, 2
 * stages cut before layer `cut` of the `n_layers`: the first Block's, so that both
 * runs hold the same parameters on each stage. */
static void
append_training (GString *ini, const Fixture *f, const Shape *s, const char *name, int cut,
                 int n_layers)
{
  if (s->pipelined)
    g_string_append_printf (ini, "[pipeline]\nstages = 2\nmicro_batches = 2\n"
                            "seg_method = 0,%d,%d\n", cut, n_layers);
  g_string_append_printf (ini,
                          "[data]\ntask = text\npath = %s\n"
                          "[train]\noptimizer = adamw\nsteps = 6\nbatch = 4\nlog_every = 2\n"
                          "checkpoint_dir = %s/%s\n"
                          "[optim]\nlr = 0.01\nweight_decay = 0.01\nclip_norm = 1.0\n",
                          f->text, f->dir, name);
}

static char *
gpt_config (const Fixture *f, const Shape *s)
{
  g_autoptr (GString) ini = g_string_new (NULL);
  g_string_append_printf (ini,
                          "[model]\ntype = gpt\ncontext = %d\nlayers = %d\nheads = %d\n"
                          "width = %d\nseed = %d\ndropout = %g\nskip = %s\n",
                          CONTEXT, s->layers, HEADS, WIDTH, SEED, s->dropout,
                          s->skip ? "true" : "false");
  append_training (ini, f, s, "gpt", 2, s->layers + 2); /* Embedding, h0 | h1 ..., Head */
  return ks_test_write (f->dir, "gpt.ini", ini->str);
}

/* The GPT as its layers: the names, seeds and skip that [model] type = gpt documents. */
static char *
layers_config (const Fixture *f, const Shape *s)
{
  g_autoptr (GString) ini = g_string_new (NULL), net = g_string_new ("wte, wpe");
  const char *last = s->dropout > 0 ? "drop" : "wpe"; /* the embeddings' last layer */
  if (s->dropout > 0)
    g_string_append (net, ", drop");
  for (int i = 0; i < s->layers; i++)
    g_string_append_printf (net, ", h%d", i);
  g_string_append_printf (ini, "[model]\ntype = layers\ncontext = %d\nnet = %s, ln_f, head\n",
                          CONTEXT, net->str);
  g_string_append_printf (ini, "[layer.wte]\ntype = embedding\nsize = %d\nseed = %d\n", WIDTH,
                          SEED);
  g_string_append_printf (ini, "[layer.wpe]\ntype = position\nseed = %d\n", SEED + 7);
  if (s->dropout > 0)
    g_string_append_printf (ini, "[layer.drop]\ntype = dropout\nrate = %g\nseed = %d\n",
                            s->dropout, SEED + 8);
  for (int i = 0; i < s->layers; i++)
    g_string_append_printf (ini, "[layer.h%d]\ntype = transformer\nheads = %d\nrate = %g\n"
                            "seed = %d\n%s%s\n", i, HEADS, s->dropout, SEED + 16 * i,
                            s->skip && i == s->layers - 1 ? "add = " : "",
                            s->skip && i == s->layers - 1 ? last : "");
  g_string_append_printf (ini, "[layer.ln_f]\ntype = layer_norm\neps = 1e-5\n"
                          "[layer.head]\ntype = linear\nsize = %" G_GSIZE_FORMAT "\nseed = %d\n",
                          f->vocab, SEED + 999);
  /* wte, wpe, (drop,) h0 | h1 ..., ln_f, head */
  int embeddings = s->dropout > 0 ? 3 : 2;
  append_training (ini, f, s, "layers", embeddings + 1, embeddings + s->layers + 2);
  return ks_test_write (f->dir, "layers.ini", ini->str);
}

/* The run's loss lines ("step 2/6 loss 3.1234 lr 0.01", the throughput left out) and its
 * held-out loss (of rank 0, pipelined); asserts it trained. */
static char *
train (const char *config, const Shape *s)
{
  g_autofree char *out = NULL, *err = NULL;
  int status = ks_test_run_ksdist (s->pipelined ? ARGS ("launch", "-n", "2", config)
                                                : ARGS ("train", config),
                                   NULL, plugins, &out, &err);
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  GString *losses = g_string_new (NULL);
  if (status != 0)
    g_printerr ("%s", err);
  g_assert_cmpint (status, ==, 0);
  for (int i = 0; lines[i] != NULL; i++)
    {
      char *line = lines[i], *cut = strstr (line, " samples/s");
      if (cut != NULL)
        *cut = '\0';
      if (s->pipelined && !g_str_has_prefix (line, "[rank 0] "))
        continue;
      line += s->pipelined ? strlen ("[rank 0] ") : 0;
      if (g_str_has_prefix (line, "step ") || g_str_has_prefix (line, "eval loss "))
        g_string_append_printf (losses, "%s\n", line);
    }
  g_assert_nonnull (strstr (losses->str, "step 6/6 loss "));
  g_assert_nonnull (strstr (losses->str, "eval loss "));
  return g_string_free (losses, FALSE);
}

/* The float data of DIR/RUN/checkpoint-6/FILE */
static float *
saved (const Fixture *f, const char *run, const char *file, gsize *n)
{
  g_autofree char *path = g_build_filename (f->dir, run, "checkpoint-6", file, NULL);
  return ks_test_safetensors_floats (path, n);
}

static void
test_same_bits (Fixture *f, gconstpointer data)
{
  const Shape *s = data;
  g_autofree char *gpt = gpt_config (f, s), *layers = layers_config (f, s);
  g_autofree char *gpt_losses = train (gpt, s), *layers_losses = train (layers, s);
  g_test_message ("the GPT:\n%sits layers:\n%s", gpt_losses, layers_losses);
  g_assert_cmpstr (gpt_losses, ==, layers_losses);

  /* the same tensors in the same order (only wte and wpe are named wte.table and
   * wpe.table by the layers), their values to the bit */
  static const char *const files[] = { "model.safetensors", "optimizer.safetensors" };
  static const char *const stage_files[] = { "stage-0-of-2.safetensors",
                                             "stage-1-of-2.safetensors",
                                             "optimizer-stage-0-of-2.safetensors",
                                             "optimizer-stage-1-of-2.safetensors", NULL };
  for (gsize i = 0; s->pipelined ? stage_files[i] != NULL : i < G_N_ELEMENTS (files); i++)
    {
      gsize n_gpt, n_layers;
      const char *file = s->pipelined ? stage_files[i] : files[i];
      g_autofree float *a = saved (f, "gpt", file, &n_gpt);
      g_autofree float *b = saved (f, "layers", file, &n_layers);
      g_assert_cmpuint (n_gpt, ==, n_layers);
      g_assert_cmpint (memcmp (a, b, n_gpt * sizeof (float)), ==, 0);
    }

  /* the GPT's checkpoint keeps the names it always had */
  g_autofree char *file = g_build_filename (f->dir, "gpt", "checkpoint-6",
                                            s->pipelined ? "stage-0-of-2.safetensors"
                                                         : "model.safetensors", NULL);
  g_autofree char *bytes = NULL;
  gsize len;
  g_assert_true (g_file_get_contents (file, &bytes, &len, NULL));
  static const char *const names[] = { "\"wte\"", "\"wpe\"", "\"h0.attn.qkv.w\"",
                                       "\"h0.mlp.proj.b\"", "\"ln_f.gamma\"", "\"head.w\"" };
  for (gsize i = 0; i < (s->pipelined ? 4 : G_N_ELEMENTS (names)); i++) /* stage 0's */
    g_assert_nonnull (memmem (bytes, len, names[i], strlen (names[i])));
}

/* The GPT's layer list as the pipeline cuts it: Embedding, a Block each, Head (what
 * [pipeline] seg_method = layer:<regex> matches), the long skip from the first to the
 * last. */
static void
test_segments (Fixture *f, gconstpointer data)
{
  const Shape s = { 3, 0.1, TRUE };
  g_autofree char *gpt = gpt_config (f, &s);
  g_autofree char *out = NULL, *err = NULL;
  (void) data;
  int status = ks_test_run_ksdist (ARGS ("segment", gpt, "--set", "pipeline.stages=2",
                                         "--set", "pipeline.seg_method=layer:Block"),
                                   NULL, plugins, &out, &err);
  g_test_message ("%s%s", out, err);
  g_assert_cmpint (status, ==, 0);
  g_assert_nonnull (strstr (out, ": 5 layers, "));
  g_assert_nonnull (strstr (out, "0-1 "));
  g_assert_nonnull (strstr (out, "Embedding, Block\n"));
  g_assert_nonnull (strstr (out, "Block x2, Head\n"));
  g_assert_nonnull (strstr (out, "# skip 'embeddings': layer 0 (chunk 0, stage 0) -> layer 4 "
                                 "(chunk 1, stage 1)"));
}

/* A key or group the model does not read is refused, not ignored. */
static void
test_unused (Fixture *f, gconstpointer data)
{
  const Shape s = { 1, 0, FALSE };
  g_autofree char *gpt = gpt_config (f, &s), *layers = layers_config (f, &s);
  static const struct {
    gboolean gpt;
    const char *set, *error;
  } cases[] = {
    { FALSE, "model.width=32", "[model] width is set, but a layer list on a text does not use "
                               "it" },
    { FALSE, "data.task=addition", "[model] type = layers does not train on [data] task = "
                                   "addition" },
    { TRUE, "layer.x.type=linear", "[layer.x] is set, but [model] type = gpt does not read "
                                   "layer groups" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      const char *set = cases[i].set;
      int status = ks_test_run_ksdist (ARGS ("config", cases[i].gpt ? gpt : layers, "--set", set),
                                       NULL, plugins, &out, &err);
      g_test_message ("--set %s: %s", set, err);
      g_assert_cmpint (status, ==, 2);
      g_assert_nonnull (strstr (err, cases[i].error));
    }
}

int
main (int argc, char **argv)
{
  static const Shape plain = { 1, 0, FALSE }, full = { 2, 0.1, TRUE },
                     pipelined = { 3, 0.1, TRUE, TRUE };
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/gpt-net/same-bits", Fixture, &plain, setup, test_same_bits, teardown);
  g_test_add ("/gpt-net/same-bits-dropout-skip", Fixture, &full, setup, test_same_bits,
              teardown);
  g_test_add ("/gpt-net/same-bits-pipelined", Fixture, &pipelined, setup, test_same_bits,
              teardown);
  g_test_add ("/gpt-net/segments", Fixture, NULL, setup, test_segments, teardown);
  g_test_add ("/gpt-net/unused", Fixture, NULL, setup, test_unused, teardown);
  return g_test_run ();
}
