/* What `ksdist train` would refuse in a configuration, found before anything runs: by
 * train itself, by `ksdist config`, and once by `ksdist launch` before any process
 * starts (rather than by every rank). */
#include "train.h"

#include <stdio.h>
#include <string.h>

/* [optim] total_steps = 0 (its default) follows [train] steps, so a longer run keeps its
 * schedule's shape. */
static void
follow_steps (KsConfig *c)
{
  g_autofree char *set = NULL;
  const char *value;
  KsSource source;

  if (!ks_config_lookup (c, "optim", "total_steps", &value, &source, NULL)
      || strcmp (value, "0") != 0)
    return;
  set = g_strdup_printf ("optim.total_steps=%" G_GINT64_FORMAT,
                         ks_config_get_int (c, "train", "steps"));
  ks_config_set_override (c, set, NULL);
}

int
ks_train_check (KsRegistry *registry, KsConfig *c, gboolean build)
{
  g_autoptr (GError) error = NULL;
  Trainer t = { .config = c, .registry = registry, .world = 1, .describe_only = TRUE };
  int status = KS_EXIT_OK;

  follow_steps (c);
  t.batch = ks_config_get_int (c, "train", "batch");
  if (ks_config_get_bool (c, "train", "resume")
      && *ks_config_get_string (c, "train", "checkpoint_dir") == '\0')
    g_set_error (&error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                 "[train] resume = true needs [train] checkpoint_dir, the directory to resume "
                 "from");
  else if (build && (t.task = ks_train_task (c, &error)) != NULL
           && (t.compute = ks_compute_new (registry, c, NULL, &error)) != NULL
           && t.task->build (&t, &error)
           && (!ks_train_pipelined (c) || ks_train_has_layers (&t, &error)))
    t.optimizer = ks_optimizer_new (registry, c, ks_config_get_string (c, "train", "optimizer"),
                                    &error);
  if (error != NULL)
    {
      /* a name in the config that nothing here provides is a configuration error */
      gboolean config_error = error->domain == KS_CONFIG_ERROR
                              || error->domain == KS_PLUGIN_ERROR;
      ks_cli_error ("%s", error->message);
      status = config_error ? KS_EXIT_USAGE : KS_EXIT_RUNTIME;
    }
  ks_trainer_clear (&t);
  return status;
}
