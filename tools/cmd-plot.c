/* ksdist plot: the loss curve of a [log] metrics file (one JSON object per logged step)
 * as an SVG image, with the held-out metric where it was evaluated. The image is written
 * to a temporary file and renamed, so a failed plot leaves no half-written file. */
#include "cli.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  double step, loss;
} Point;

enum { WIDTH = 720, HEIGHT = 420, LEFT = 70, RIGHT = 20, TOP = 40, BOTTOM = 50, TICKS = 5 };

/* Reads `step` and `loss` of each line; an error names the file and line. */
static gboolean
read_metrics (const char *path, GArray *points, char **eval_name, double *eval, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();

  if (!g_file_get_contents (path, &text, NULL, error))
    return FALSE;
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (int i = 0; lines[i] != NULL; i++)
    {
      JsonObject *o;
      if (*g_strstrip (lines[i]) == '\0')
        continue;
      if (!json_parser_load_from_data (parser, lines[i], -1, NULL)
          || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))
          || !json_object_has_member (o = json_node_get_object (json_parser_get_root (parser)),
                                      "step")
          || !json_object_has_member (o, "loss"))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_SYNTAX,
                       "%s:%d: not a JSON object with \"step\" and \"loss\" (a [log] metrics "
                       "file of `ksdist train` has one per line)", path, i + 1);
          return FALSE;
        }
      Point p = { json_object_get_double_member (o, "step"),
                  json_object_get_double_member (o, "loss") };
      if (isfinite (p.loss))
        g_array_append_val (points, p);
      GList *members = json_object_get_members (o);
      for (GList *l = members; l != NULL; l = l->next)
        if (g_str_has_prefix (l->data, "eval_")) /* the held-out metric, where evaluated */
          {
            g_free (*eval_name);
            *eval_name = g_strdup ((const char *) l->data + 5);
            *eval = json_object_get_double_member (o, l->data);
          }
      g_list_free (members);
    }
  if (points->len == 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_SYNTAX,
                   "%s: no logged steps with a finite loss to plot", path);
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

static char *
render (const char *title, GArray *points, const char *eval_name, double eval)
{
  GString *svg = g_string_new (NULL);
  double x0 = g_array_index (points, Point, 0).step, x1 = x0, y0 = 0, y1 = 0;
  const double pw = WIDTH - LEFT - RIGHT, ph = HEIGHT - TOP - BOTTOM;

  for (guint i = 0; i < points->len; i++)
    {
      Point *p = &g_array_index (points, Point, i);
      x0 = MIN (x0, p->step), x1 = MAX (x1, p->step), y1 = MAX (y1, p->loss);
      y0 = i == 0 ? p->loss : MIN (y0, p->loss);
    }
  y0 = MIN (y0, 0); /* losses are drawn from zero, so their scale reads honestly */
  if (x1 <= x0)
    x1 = x0 + 1;
  if (y1 <= y0)
    y1 = y0 + 1;
  double dy = tick_step (y1 - y0), dx = tick_step (x1 - x0);
  y1 = ceil (y1 / dy) * dy;

#define X(v) (LEFT + ((v) - x0) / (x1 - x0) * pw)
#define Y(v) (TOP + ph - ((v) - y0) / (y1 - y0) * ph)
  g_string_append_printf (svg,
                          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
                          "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                          WIDTH, HEIGHT, WIDTH, HEIGHT);
  g_autofree char *escaped = g_markup_escape_text (title, -1);
  g_string_append_printf (svg, "<text x=\"%d\" y=\"24\" font-size=\"15\">%s</text>\n", LEFT,
                          escaped);
  for (double v = y0; v <= y1 + dy / 2; v += dy)
    g_string_append_printf (svg,
                            "<line x1=\"%d\" x2=\"%g\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                            "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                            LEFT, LEFT + pw, Y (v), Y (v), LEFT - 6, Y (v) + 4, v);
  for (double v = ceil (x0 / dx) * dx; v <= x1 + dx / 2; v += dx)
    g_string_append_printf (svg,
                            "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>"
                            "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%g</text>\n",
                            X (v), X (v), (double) TOP, TOP + ph, X (v), TOP + ph + 18, v);
  g_string_append_printf (svg,
                          "<text x=\"%g\" y=\"%d\" text-anchor=\"middle\">step</text>\n"
                          "<text x=\"16\" y=\"%g\" transform=\"rotate(-90 16 %g)\" "
                          "text-anchor=\"middle\">loss</text>\n"
                          "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"",
                          LEFT + pw / 2, HEIGHT - 10, TOP + ph / 2, TOP + ph / 2);
  for (guint i = 0; i < points->len; i++)
    {
      Point *p = &g_array_index (points, Point, i);
      g_string_append_printf (svg, "%s%.1f,%.1f", i ? " " : "", X (p->step), Y (p->loss));
    }
  g_string_append (svg, "\"/>\n");
  if (eval_name != NULL)
    g_string_append_printf (svg, "<text x=\"%g\" y=\"24\" text-anchor=\"end\">held-out %s %.4g</text>\n",
                            LEFT + pw, eval_name, eval);
  g_string_append (svg, "</svg>\n");
#undef X
#undef Y
  return g_string_free (svg, FALSE);
}

static int
run_plot (int argc, char **argv)
{
  g_autofree char *output = NULL, *eval_name = NULL, *svg = NULL, *title = NULL;
  GOptionEntry entries[] = {
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "The SVG file (default loss.svg)", "FILE" },
    { NULL },
  };
  g_autoptr (GArray) points = g_array_new (FALSE, FALSE, sizeof (Point));
  g_autoptr (GError) error = NULL;
  double eval = 0;

  if (!ks_cli_parse ("plot", "METRICS.jsonl", ks_cmd_plot.summary, entries, &argc, &argv))
    return KS_EXIT_USAGE;
  if (argc != 2)
    {
      ks_cli_error ("plot: give one METRICS.jsonl, the [log] metrics file of `ksdist train`");
      return KS_EXIT_USAGE;
    }
  if (output == NULL)
    output = g_strdup ("loss.svg");
  if (!g_str_has_suffix (output, ".svg"))
    {
      ks_cli_error ("plot: -o %s: only SVG is written; name the file *.svg", output);
      return KS_EXIT_USAGE;
    }
  if (!read_metrics (argv[1], points, &eval_name, &eval, &error))
    {
      ks_cli_error ("%s", error->message);
      return KS_EXIT_USAGE;
    }
  title = g_path_get_basename (argv[1]);
  svg = render (title, points, eval_name, eval);
  if (!g_file_set_contents (output, svg, -1, &error)) /* a temporary file, then rename */
    {
      ks_cli_error ("plot: %s", error->message);
      return KS_EXIT_RUNTIME;
    }
  printf ("%s: %u points\n", output, points->len);
  return KS_EXIT_OK;
}

const KsCommand ks_cmd_plot = {
  "plot",
  "Draw the loss curve of a [log] metrics file as SVG",
  run_plot,
};
