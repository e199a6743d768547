/* ksdist bench pipeline: the measured bubble of pipeline schedules against the theory.
 * For each (schedule, v, m) it runs `ksdist launch -n P` on an MLP whose eight middle
 * Linear layers are 1024 x 1024, cut by parameters so every stage gets as many, with a
 * Chrome trace ([trace] path); from the trace, per step after the first: bubble = 1 −
 * (forward and backward time summed over the stages) / (P × the step's span, from the
 * first instruction to the last backward's end), beside (p − 1)/(v·m + p − 1). The
 * measured bubble also holds transfers and per-micro-batch overheads the theory leaves
 * out. The CONFIG and --set lines, if given, come after the MLP's settings. */
#include "cli.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

static const char *const base_sets[] = {
  "train.steps=30", "train.log_every=30", "train.batch=512", "pipeline.seg_method=parameters",
  "model.hidden=1024,1024,1024,1024,1024,1024,1024,1024,1024", NULL,
};

static const struct {
  const char *schedule;
  int v, m;
} runs[] = {
  { "1f1b", 1, 2 },        { "1f1b", 1, 4 },        { "1f1b", 1, 8 },
  { "1f1b", 1, 16 },       { "fthenb", 1, 8 },      { "interleaved", 2, 4 },
  { "interleaved", 2, 8 }, { "interleaved", 2, 16 },
};

/* The mean bubble of the steps after the first in the trace at `path`, or -1. */
static double
trace_bubble (const char *path, int p, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GArray) start = g_array_new (FALSE, TRUE, sizeof (gint64));
  g_autoptr (GArray) end = g_array_new (FALSE, TRUE, sizeof (gint64));
  g_autoptr (GArray) busy = g_array_new (FALSE, TRUE, sizeof (gint64));
  g_autofree int *seen = g_new0 (int, p); /* steps each stage has ended */
  double sum = 0;

  if (!json_parser_load_from_file (parser, path, error))
    return -1;
  JsonArray *events = json_node_get_array (json_parser_get_root (parser));
  for (guint i = 0; i < json_array_get_length (events); i++)
    {
      JsonObject *e = json_array_get_object_element (events, i);
      if (g_strcmp0 (json_object_get_string_member_with_default (e, "ph", ""), "X") != 0)
        continue;
      int s = json_object_get_int_member (e, "tid");
      const char *cat = json_object_get_string_member (e, "cat");
      gint64 ts = json_object_get_int_member (e, "ts"), dur = json_object_get_int_member (e, "dur");
      if (s < 0 || s >= p)
        continue;
      guint k = seen[s];
      if (k >= start->len)
        {
          g_array_set_size (start, k + 1);
          g_array_set_size (end, k + 1);
          g_array_set_size (busy, k + 1);
          g_array_index (start, gint64, k) = G_MAXINT64;
        }
      g_array_index (start, gint64, k) = MIN (g_array_index (start, gint64, k), ts);
      if (strcmp (cat, "forward") == 0 || strcmp (cat, "backward") == 0)
        {
          g_array_index (busy, gint64, k) += dur;
          g_array_index (end, gint64, k) = MAX (g_array_index (end, gint64, k), ts + dur);
        }
      if (strcmp (cat, "optimizer") == 0)
        seen[s]++;
    }
  if (start->len < 2)
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: fewer than 2 steps", path);
      return -1;
    }
  for (guint k = 1; k < start->len; k++)
    sum += 1 - (double) g_array_index (busy, gint64, k)
                   / (p * (double) (g_array_index (end, gint64, k)
                                    - g_array_index (start, gint64, k)));
  return sum / (start->len - 1);
}

/* bench/run-cluster.sh: the bubble of a trace written by a job of its own (one stage per
 * host), measured as the runs above are, as a fraction on one line. */
int
ks_bench_pipeline_trace (int p, const char *path)
{
  g_autoptr (GError) error = NULL;
  double bubble = trace_bubble (path, p, &error);
  if (bubble < 0)
    {
      ks_cli_error ("bench pipeline --trace: %s", error->message);
      return KS_EXIT_RUNTIME;
    }
  printf ("%.4f\n", bubble);
  return KS_EXIT_OK;
}

int
ks_bench_pipeline (int p, const char *config, char **sets, gboolean json)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("ksdist-bench-pipeline-XXXXXX", &error);
  g_autofree char *trace = NULL, *trace_set = NULL;

  if (dir == NULL)
    {
      ks_cli_error ("bench pipeline: %s", error->message);
      return KS_EXIT_RUNTIME;
    }
  trace = g_build_filename (dir, "trace.json", NULL);
  trace_set = g_strconcat ("trace.path=", trace, NULL);
  if (json)
    printf ("{\"what\": \"pipeline\", \"stages\": %d, \"results\": [", p);
  else
    printf ("# pipeline bubble: %d stages, MLP of 8 x (1024 x 1024) Linear layers, batch 512, "
            "30 steps (before your CONFIG and --set)\n# %-11s %3s %3s %10s %10s %8s\n", p,
            "schedule", "v", "m", "bubble%", "theory%", "diff_pp");
  for (guint r = 0; r < G_N_ELEMENTS (runs); r++)
    {
      g_autoptr (GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
      g_autofree char *out = NULL, *err = NULL;
      int status;
      g_ptr_array_add (args, g_strdup (self));
      g_ptr_array_add (args, g_strdup ("launch"));
      g_ptr_array_add (args, g_strdup ("-n"));
      g_ptr_array_add (args, g_strdup_printf ("%d", p));
      if (config != NULL)
        g_ptr_array_add (args, g_strdup (config));
      const char *const *lists[] = { base_sets, (const char *const *) sets };
      for (guint l = 0; l < G_N_ELEMENTS (lists); l++)
        for (const char *const *set = lists[l]; set != NULL && *set != NULL; set++)
          {
            g_ptr_array_add (args, g_strdup ("--set"));
            g_ptr_array_add (args, g_strdup (*set));
          }
      const char *run_sets[] = { "pipeline.stages=%d", "pipeline.schedule=%s",
                                 "pipeline.virtual_stages=%d", "pipeline.micro_batches=%d" };
      for (guint i = 0; i < G_N_ELEMENTS (run_sets); i++)
        {
          g_ptr_array_add (args, g_strdup ("--set"));
          g_ptr_array_add (args, i == 1 ? g_strdup_printf (run_sets[i], runs[r].schedule)
                                        : g_strdup_printf (run_sets[i], i == 0 ? p
                                                                           : i == 2 ? runs[r].v
                                                                                    : runs[r].m));
        }
      g_ptr_array_add (args, g_strdup ("--set"));
      g_ptr_array_add (args, g_strdup (trace_set));
      g_ptr_array_add (args, NULL);
      if (!g_spawn_sync (NULL, (char **) args->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                         &err, &status, &error)
          || !g_spawn_check_wait_status (status, &error))
        {
          ks_cli_error ("bench pipeline: %s v=%d m=%d: ksdist launch: %s; it said:\n%s%s",
                        runs[r].schedule, runs[r].v, runs[r].m, error->message,
                        out ? out : "", err ? err : "");
          return KS_EXIT_RUNTIME;
        }
      double bubble = trace_bubble (trace, p, &error);
      double theory = ks_schedule_theoretical_bubble (p, runs[r].v, runs[r].m);
      if (bubble < 0)
        {
          ks_cli_error ("bench pipeline: reading the trace: %s", error->message);
          return KS_EXIT_RUNTIME;
        }
      if (json)
        printf ("%s{\"schedule\": \"%s\", \"v\": %d, \"m\": %d, \"bubble\": %.4f, "
                "\"theory\": %.4f}", r ? ", " : "", runs[r].schedule, runs[r].v, runs[r].m,
                bubble, theory);
      else
        printf ("  %-11s %3d %3d %10.2f %10.2f %+8.2f\n", runs[r].schedule, runs[r].v,
                runs[r].m, 100 * bubble, 100 * theory, 100 * (bubble - theory));
      fflush (stdout);
      g_remove (trace);
    }
  if (json)
    printf ("]}\n");
  g_rmdir (dir);
  return KS_EXIT_OK;
}
