/* ksdist plot: [log] metrics files (one JSON object per logged step) as one SVG image of
 * stacked panels sharing the step axis: the loss of every run (a legend names them), the
 * learning rate, and the held-out metric where it was evaluated. Each panel's y range
 * fits its data; every logged point has a marker. The image is written to a temporary
 * file and renamed, so a failed plot leaves no half-written file. */
#include "cli.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  double step, value;
} Point;

/* One metrics file: its curves. */
typedef struct {
  char *name;
  GArray *loss, *lr, *eval; /* of Point */
  char *eval_name;
} Run;

enum { WIDTH = 760, PANEL = 250, LEFT = 80, RIGHT = 24, TOP = 56, GAP = 46, BOTTOM = 46, LEGEND_ROW = 18,
       TICKS = 5 };

static const char *const colours[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                       "#8c564b", "#e377c2", "#17becf" };

static void
run_clear (Run *r)
{
  g_free (r->name);
  g_free (r->eval_name);
  if (r->loss != NULL)
    g_array_unref (r->loss);
  if (r->lr != NULL)
    g_array_unref (r->lr);
  if (r->eval != NULL)
    g_array_unref (r->eval);
}

static void
add_point (GArray *a, double step, JsonObject *o, const char *member)
{
  Point p = { step, json_object_get_double_member (o, member) };
  if (isfinite (p.value))
    g_array_append_val (a, p);
}

/* Reads a metrics file into `r`; an error names the file and line. */
static gboolean
read_metrics (const char *path, Run *r, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();

  r->name = g_path_get_basename (path);
  r->loss = g_array_new (FALSE, FALSE, sizeof (Point));
  r->lr = g_array_new (FALSE, FALSE, sizeof (Point));
  r->eval = g_array_new (FALSE, FALSE, sizeof (Point));
  if (!g_file_get_contents (path, &text, NULL, error))
    return FALSE;
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (int i = 0; lines[i] != NULL; i++)
    {
      JsonObject *o = NULL;
      gboolean useful = FALSE;
      if (*g_strstrip (lines[i]) == '\0')
        continue;
      if (json_parser_load_from_data (parser, lines[i], -1, NULL)
          && JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))
          && json_object_has_member (o = json_node_get_object (json_parser_get_root (parser)),
                                     "step"))
        {
          double step = json_object_get_double_member (o, "step");
          GList *members = json_object_get_members (o);
          for (GList *l = members; l != NULL; l = l->next)
            {
              const char *m = l->data;
              if (strcmp (m, "loss") == 0 || strcmp (m, "lr") == 0)
                add_point (strcmp (m, "loss") == 0 ? r->loss : r->lr, step, o, m);
              else if (g_str_has_prefix (m, "eval_")) /* the held-out metric */
                {
                  add_point (r->eval, step, o, m);
                  g_free (r->eval_name);
                  r->eval_name = g_strdup (m + 5);
                }
              else
                continue;
              useful = TRUE;
            }
          g_list_free (members);
        }
      if (!useful)
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_SYNTAX,
                       "%s:%d: not a JSON object with \"step\" and \"loss\" or a held-out "
                       "metric (a [log] metrics file of `ksdist train` has one per line)",
                       path, i + 1);
          return FALSE;
        }
    }
  if (r->loss->len < 2)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_SYNTAX,
                   "%s: %u logged step%s with a finite loss; a curve needs 2 or more (log more "
                   "often with [train] log_every)",
                   path, r->loss->len, r->loss->len == 1 ? "" : "s");
      return FALSE;
    }
  return TRUE;
}

/* A round tick spacing (1, 2 or 5 times a power of ten) for about TICKS ticks. */
static double
tick_step (double span)
{
  double raw = span / TICKS, power = pow (10, floor (log10 (raw))), f = raw / power;
  return power * (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10);
}

typedef struct {
  GString *svg;
  double x0, x1; /* the steps, shared by the panels */
} Chart;

/* The curves at `offset` (a GArray* field of Run) of every run, in a panel at `top`:
 * axes fitted to the data, round ticks, a marker on each point. */
static void
panel (Chart *c, int top, const char *label, Run *runs, int n, gsize offset)
{
  const double pw = WIDTH - LEFT - RIGHT, ph = PANEL;
  double y0 = INFINITY, y1 = -INFINITY, x0 = c->x0, x1 = c->x1;

  for (int r = 0; r < n; r++)
    {
      GArray *a = G_STRUCT_MEMBER (GArray *, &runs[r], offset);
      for (guint i = 0; i < a->len; i++)
        y0 = MIN (y0, g_array_index (a, Point, i).value),
        y1 = MAX (y1, g_array_index (a, Point, i).value);
    }
  double pad = y1 > y0 ? (y1 - y0) * 0.05 : MAX (fabs (y0) * 0.1, 1e-3);
  y0 -= pad, y1 += pad;
  double dy = tick_step (y1 - y0), dx = tick_step (x1 - x0);

#define X(v) (LEFT + ((v) - x0) / (x1 - x0) * pw)
#define Y(v) (top + ph - ((v) - y0) / (y1 - y0) * ph)
  g_string_append_printf (c->svg, "<rect x=\"%d\" y=\"%d\" width=\"%g\" height=\"%g\" "
                          "fill=\"none\" stroke=\"#999\"/>\n", LEFT, top, pw, ph);
  /* the ticks counted, so a step below the values' precision cannot loop for ever */
  for (int k = 0; k <= 4 * TICKS; k++)
    {
      double v = ceil (y0 / dy) * dy + k * dy;
      if (v > y1)
        break;
      g_string_append_printf (c->svg,
                              "<line x1=\"%d\" x2=\"%g\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                              "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n",
                              LEFT, LEFT + pw, Y (v), Y (v), LEFT - 6, Y (v) + 4,
                              fabs (v) < dy / 1e6 ? 0 : v);
    }
  for (int k = 0; k <= 4 * TICKS; k++)
    {
      double v = ceil (x0 / dx) * dx + k * dx;
      if (v > x1 + dx / 1e6)
        break;
      g_string_append_printf (c->svg,
                              "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%g\" stroke=\"#ddd\"/>"
                              "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%g</text>\n",
                              X (v), X (v), top, top + ph, X (v), top + ph + 16, v);
    }
  g_autofree char *escaped = g_markup_escape_text (label, -1);
  g_string_append_printf (c->svg, "<text x=\"18\" y=\"%g\" transform=\"rotate(-90 18 %g)\" "
                          "text-anchor=\"middle\">%s</text>\n",
                          top + ph / 2, top + ph / 2, escaped);
  for (int r = 0; r < n; r++)
    {
      GArray *a = G_STRUCT_MEMBER (GArray *, &runs[r], offset);
      const char *colour = colours[r % G_N_ELEMENTS (colours)];
      if (a->len > 1)
        {
          g_string_append_printf (c->svg, "<polyline fill=\"none\" stroke=\"%s\" "
                                  "stroke-width=\"1.5\" points=\"", colour);
          for (guint i = 0; i < a->len; i++)
            g_string_append_printf (c->svg, "%s%.1f,%.1f", i ? " " : "",
                                    X (g_array_index (a, Point, i).step),
                                    Y (g_array_index (a, Point, i).value));
          g_string_append (c->svg, "\"/>\n");
        }
      for (guint i = 0; i < a->len; i++)
        g_string_append_printf (c->svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n",
                                X (g_array_index (a, Point, i).step),
                                Y (g_array_index (a, Point, i).value), colour);
    }
#undef X
#undef Y
}

static gboolean
any (Run *runs, int n, gsize offset)
{
  for (int r = 0; r < n; r++)
    if (G_STRUCT_MEMBER (GArray *, &runs[r], offset)->len > 0)
      return TRUE;
  return FALSE;
}

static char *
render (Run *runs, int n, int *n_panels)
{
  Chart c = { g_string_new (NULL), INFINITY, -INFINITY };
  gsize offsets[] = { G_STRUCT_OFFSET (Run, loss), G_STRUCT_OFFSET (Run, lr),
                      G_STRUCT_OFFSET (Run, eval) };
  const char *eval_name = runs[0].eval_name;
  g_autofree char *eval_label = NULL;
  int panels = 0, height;

  for (int r = 0; r < n; r++)
    for (guint k = 0; k < G_N_ELEMENTS (offsets); k++)
      {
        GArray *a = G_STRUCT_MEMBER (GArray *, &runs[r], offsets[k]);
        for (guint i = 0; i < a->len; i++)
          c.x0 = MIN (c.x0, g_array_index (a, Point, i).step),
          c.x1 = MAX (c.x1, g_array_index (a, Point, i).step);
      }
  if (c.x1 <= c.x0)
    c.x1 = c.x0 + 1;
  for (int r = 0; eval_name == NULL && r < n; r++)
    eval_name = runs[r].eval_name;
  eval_label = g_strdup_printf ("held-out %s", eval_name != NULL ? eval_name : "metric");
  const char *labels[] = { "loss", "learning rate", eval_label };
  gboolean shown[G_N_ELEMENTS (offsets)];
  for (guint k = 0; k < G_N_ELEMENTS (offsets); k++)
    panels += shown[k] = any (runs, n, offsets[k]);
  /* the legend: each run's file in its colour, with its held-out result, in rows that
   * wrap at the chart's width so that every run is named */
  g_autoptr (GString) legend = g_string_new (NULL);
  int x = LEFT, y = 24;
  for (int r = 0; r < n; r++)
    {
      g_autofree char *name = g_markup_escape_text (runs[r].name, -1);
      g_autofree char *metric = g_markup_escape_text (runs[r].eval_name ? runs[r].eval_name : "", -1);
      g_autofree char *result
          = runs[r].eval->len > 0
                ? g_strdup_printf (" (held-out %s %.4g)", metric,
                                   g_array_index (runs[r].eval, Point, runs[r].eval->len - 1).value)
                : g_strdup ("");
      /* 7 px a character: wide enough for the 12 px sans-serif of most fonts */
      int width = 18 + 7 * (int) (g_utf8_strlen (runs[r].name, -1) + strlen (result));
      if (x > LEFT && x + width > WIDTH - RIGHT)
        x = LEFT, y += LEGEND_ROW;
      g_string_append_printf (legend, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" "
                              "fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s%s</text>\n",
                              x, y - 6, colours[r % G_N_ELEMENTS (colours)], x + 18, y, name,
                              result);
      x += width + 22;
    }
  const int shift = y - 24; /* the legend's rows after its first push the panels down */
  height = TOP + shift + panels * PANEL + (panels - 1) * GAP + BOTTOM;

  g_string_append_printf (c.svg,
                          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
                          "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                          WIDTH, height, WIDTH, height);
  g_string_append_len (c.svg, legend->str, legend->len);
  for (guint k = 0, top = TOP + shift; k < G_N_ELEMENTS (offsets); k++)
    if (shown[k])
      {
        panel (&c, (int) top, labels[k], runs, n, offsets[k]);
        top += PANEL + GAP;
      }
  g_string_append_printf (c.svg, "<text x=\"%g\" y=\"%d\" text-anchor=\"middle\">step</text>\n"
                          "</svg>\n", LEFT + (WIDTH - LEFT - RIGHT) / 2.0, height - 8);
  *n_panels = panels;
  return g_string_free (c.svg, FALSE);
}

/* A trace file is one JSON array; a metrics file a JSON object per line. */
static gboolean
is_trace (const char *path)
{
  char first = 0;
  FILE *f = fopen (path, "r");
  int c;
  if (f == NULL)
    return FALSE;
  while ((c = fgetc (f)) != EOF && g_ascii_isspace (c))
    ;
  first = (char) c;
  fclose (f);
  return first == '[';
}

static int
run_plot (int argc, char **argv)
{
  g_autofree char *output = NULL, *svg = NULL, *steps = NULL;
  GOptionEntry entries[] = {
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "The picture: *.svg (default loss.svg) or *.png", "FILE" },
    { "steps", 0, 0, G_OPTION_ARG_STRING, &steps,
      "A trace's steps to draw: A:B, one step, or all (default: the last 3)", "A:B" },
    { NULL },
  };
  g_autoptr (GError) error = NULL;
  int n, panels, status = KS_EXIT_OK;
  Run *runs;

  if (!ks_cli_parse ("plot", "METRICS.jsonl... | TRACE.json", ks_cmd_plot.summary, entries,
                     &argc, &argv))
    return KS_EXIT_USAGE;
  if (argc < 2)
    {
      ks_cli_error ("plot: give one METRICS.jsonl or more, [log] metrics files of `ksdist "
                    "train`");
      return KS_EXIT_USAGE;
    }
  if (output == NULL)
    output = g_strdup ("loss.svg");
  if (!ks_plot_check_output (output, &error))
    {
      ks_cli_error ("plot: %s", error->message);
      return KS_EXIT_USAGE;
    }
  if (argc == 2 && is_trace (argv[1]))
    return ks_plot_trace (argv[1], output, steps);
  if (steps != NULL)
    {
      ks_cli_error ("plot: --steps %s: only a pipeline trace ([trace] path) is drawn by steps; "
                    "a metrics file is drawn whole", steps);
      return KS_EXIT_USAGE;
    }
  n = argc - 1;
  runs = g_new0 (Run, n);
  for (int r = 0; r < n && status == KS_EXIT_OK; r++)
    if (!read_metrics (argv[r + 1], &runs[r], &error))
      {
        ks_cli_error ("%s", error->message);
        status = KS_EXIT_USAGE;
      }
  if (status == KS_EXIT_OK)
    {
      svg = render (runs, n, &panels);
      if (!ks_plot_write (output, svg, &error))
        {
          ks_cli_error ("plot: %s", error->message);
          status = KS_EXIT_RUNTIME;
        }
      else
        printf ("%s: %d run%s, %d panel%s\n", output, n, n == 1 ? "" : "s", panels,
                panels == 1 ? "" : "s");
    }
  for (int r = 0; r < n; r++)
    run_clear (&runs[r]);
  g_free (runs);
  return status;
}

const KsCommand ks_cmd_plot = {
  "plot",
  "Draw [log] metrics files as SVG or PNG: the loss of each run (compared, with a legend), the "
  "learning rate and the held-out metric in panels of their own; or a pipeline's [trace] "
  "file: a row per stage, its forwards, backwards and idle time",
  run_plot,
};
