/* ksdist segment: how [pipeline] cuts the configured model into stages, without
 * training: per stage its chunks, their layers, their parameters and, with seg_method
 * cost, their measured time per micro-batch; then the routes of skip connections. */
#include "train.h"

#include <stdio.h>

/* "Linear x3, Block" from layers first .. last - 1: runs of one name counted. */
static char *
layer_names (const KsLayerInfo *info, gsize first, gsize last)
{
  GString *text = g_string_new (NULL);
  for (gsize i = first; i < last;)
    {
      gsize run = 1;
      while (i + run < last && g_strcmp0 (info[i + run].name, info[i].name) == 0)
        run++;
      g_string_append_printf (text, "%s%s", text->len ? ", " : "", info[i].name);
      if (run > 1)
        g_string_append_printf (text, " x%" G_GSIZE_FORMAT, run);
      i += run;
    }
  return g_string_free (text, FALSE);
}

static int
segment (KsTrainer *t)
{
  const KsConfig *c = ks_trainer_config (t);
  g_autoptr (GError) error = NULL;
  int p = ks_config_get_int (c, "pipeline", "stages");
  int v = ks_config_get_int (c, "pipeline", "virtual_stages");
  g_autofree gsize *b = g_new (gsize, p * v + 1);
  g_autofree KsLayerInfo *info = NULL;
  g_autofree KsSkipRoute *routes = NULL;
  gsize n_routes, n_layers = 0;
  const KsLayerDesc *layers = NULL;
  gint64 total = 0;
  gboolean measured;

  if (ks_trainer_describe (t, &error)
      && (layers = ks_trainer_layers (t, &n_layers, NULL)) == NULL)
    g_set_error (&error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                 "%s is not described as a layer list, so it cannot be cut into stages",
                 ks_trainer_task_describe (t));
  if (error != NULL)
    {
      ks_cli_error ("%s", error->message);
      return ks_trainer_exit_status (error);
    }
  info = g_new (KsLayerInfo, n_layers);
  if (!ks_trainer_segment (t, info, b, &measured, &error)
      || !ks_skip_layout (layers, n_layers, b, p * v, &routes, &n_routes, &error))
    {
      ks_cli_error ("%s", error->message);
      return KS_EXIT_USAGE;
    }
  for (gsize i = 0; i < n_layers; i++)
    total += info[i].n_params;
  printf ("# %s: %" G_GSIZE_FORMAT " layers, %" G_GINT64_FORMAT " parameters; %d stage%s x %d "
          "virtual stage%s, seg_method %s\n", ks_trainer_task_describe (t), n_layers, total, p,
          p == 1 ? "" : "s", v, v == 1 ? "" : "s",
          ks_config_get_string (c, "pipeline", "seg_method"));
  printf ("%-6s %-6s %-10s %12s  %s%s\n", "stage", "chunk", "layers", "parameters",
          measured ? "  cost_ms  " : "", "names");
  for (int s = 0; s < p; s++)
    for (int k = 0; k < v; k++)
      {
        int g = k * p + s;
        gint64 params = 0;
        double cost = 0;
        for (gsize i = b[g]; i < b[g + 1]; i++)
          {
            params += info[i].n_params;
            cost += info[i].cost;
          }
        g_autofree char *range = g_strdup_printf ("%" G_GSIZE_FORMAT "-%" G_GSIZE_FORMAT, b[g],
                                                  b[g + 1] - 1);
        g_autofree char *names = layer_names (info, b[g], b[g + 1]);
        g_autofree char *ms = measured ? g_strdup_printf ("%9.3f  ", 1e3 * cost) : g_strdup ("");
        printf ("%-6d %-6d %-10s %12" G_GINT64_FORMAT "  %s%s\n", s, g, range, params, ms, names);
      }
  for (gsize r = 0; r < n_routes; r++)
    printf ("# skip '%s': layer %" G_GSIZE_FORMAT " (chunk %d, stage %d) -> layer %" G_GSIZE_FORMAT
            " (chunk %d, stage %d)\n", routes[r].name, routes[r].stash_layer,
            routes[r].stash_chunk, routes[r].stash_chunk % p, routes[r].pop_layer,
            routes[r].pop_chunk, routes[r].pop_chunk % p);
  return KS_EXIT_OK;
}

static int
run_segment (int argc, char **argv)
{
  return ks_train_command (&ks_cmd_segment, argc, argv, segment);
}

const KsCommand ks_cmd_segment = {
  "segment",
  "Print how [pipeline] cuts the configured model into stages (layers, parameters, cost "
  "with seg_method cost, skip routes)",
  run_segment,
};
