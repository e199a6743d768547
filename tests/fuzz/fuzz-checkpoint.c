/* Fuzz target: a checkpoint file (model.safetensors) read for its metadata, loaded into
 * a small model, and loaded as an inference model. `fuzz-checkpoint --write-seeds DIR`
 * writes a checkpoint and an inference model of that model: the corpus's seeds. */
#include "fuzz.h"

#include <ksdist/ksdist.h>
#include <stdio.h>
#include <stdlib.h>

static char *dir, *file;
static KsRegistry *registry;
static KsConfig *config;
static KsCompute *compute;
static KsModel *model;
static KsExpr *logits;

/* x [4, 2] -> fc [2, 3] -> logits, with its cross entropy: the model the seed holds. */
static KsModel *
small_model (void)
{
  const gint64 xs[] = { 4, 2 };
  KsModel *m = ks_model_new (compute);
  KsExpr *x = ks_model_data (m, "x", 2, xs, KS_DTYPE_FLOAT32, NULL);
  logits = ks_fc (x, 3, -1, "fc", 1, NULL);
  if (logits == NULL || !ks_model_init (m, NULL))
    {
      ks_model_free (m);
      return NULL;
    }
  return m;
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  const char *plugins = g_getenv ("KS_BUILD_PLUGINS");
  g_log_set_default_handler (fuzz_log_handler, NULL);
  dir = g_dir_make_tmp ("ksdist-fuzz-XXXXXX", NULL);
  file = g_build_filename (dir, "model.safetensors", NULL);
  config = ks_config_new ();
  registry = ks_registry_new ();
  if (plugins != NULL)
    {
      g_autofree char *openblas = g_build_filename (plugins, "openblas", ".libs", NULL);
      g_setenv ("KS_PLUGIN_PATH", openblas, TRUE);
      g_setenv ("KS_PLUGIN_SYSTEM_PATH", "", TRUE);
    }
  if (ks_registry_scan (registry, config, NULL))
    compute = ks_compute_new (registry, config, "openblas", NULL);
  if (compute != NULL)
    model = small_model ();
  if (argc != NULL && *argc == 3 && g_strcmp0 ((*argv)[1], "--write-seeds") == 0)
    {
      g_autoptr (GError) error = NULL;
      g_autofree char *ck = g_build_filename (dir, "checkpoint-1", "model.safetensors", NULL);
      g_autofree char *inf = g_build_filename (dir, "inference", "model.safetensors", NULL);
      g_autofree char *inf_dir = g_build_filename (dir, "inference", NULL);
      g_autofree char *out1 = g_build_filename ((*argv)[2], "checkpoint.safetensors", NULL);
      g_autofree char *out2 = g_build_filename ((*argv)[2], "inference.safetensors", NULL);
      g_autofree char *b1 = NULL, *b2 = NULL;
      gsize l1, l2;
      if (model == NULL || !ks_checkpoint_save (dir, 1, model, NULL, NULL, 0, &error)
          || !ks_save_inference_model (inf_dir, model, (const char *const[]) { "x", NULL },
                                       &logits, 1, &error)
          || !g_file_get_contents (ck, &b1, &l1, NULL) || !g_file_get_contents (inf, &b2, &l2, NULL)
          || !g_file_set_contents (out1, b1, l1, NULL) || !g_file_set_contents (out2, b2, l2, NULL))
        {
          fprintf (stderr, "cannot write the seeds: %s\n", error ? error->message : "no model");
          exit (1);
        }
      exit (0);
    }
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr (GHashTable) meta = NULL, meta2 = NULL;
  g_auto (GStrv) feeds = NULL, targets = NULL;
  gint64 step;

  if (dir == NULL)
    LLVMFuzzerInitialize (NULL, NULL);
  if (!g_file_set_contents (file, (const char *) data, (gssize) size, NULL))
    return 0;
  meta = ks_checkpoint_metadata (dir, NULL);
  if (model != NULL)
    {
      ks_checkpoint_load (dir, model, NULL, &step, &meta2, NULL);
      KsModel *loaded = ks_load_inference_model (dir, compute, &feeds, &targets, NULL);
      ks_model_free (loaded);
    }
  return 0;
}
