/* ksdist plot on a pipeline trace ([trace] path, Chrome's trace format): one row per
 * stage of each replica, its forwards, backwards, transfers and updates as boxes along
 * time, idle time left blank, and each row's busy share, for users who do not open
 * Perfetto. */
#include "cli.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  gint64 pid, tid;
  double start, dur; /* microseconds */
  const char *cat;
} Box;

typedef struct {
  gint64 pid, tid;
  double busy; /* forward and backward, microseconds */
} Row;

static const struct {
  const char *cat, *colour, *label;
} kinds[] = {
  { "forward", "#1f77b4", "forward" },   { "backward", "#2ca02c", "backward" },
  { "send", "#bbbbbb", "send / receive" }, { "recv", "#bbbbbb", NULL },
  { "shared", "#9467bd", "shared weights" }, { "optimizer", "#ff7f0e", "optimizer" },
};

enum { WIDTH = 1000, LEFT = 200, RIGHT = 20, TOP = 50, ROW = 28, GAP = 6, TICKS = 6 };

/* A long run's trace is a blur: by default the last few steps are drawn */
enum { DEFAULT_STEPS = 3 };

static const char *
colour_of (const char *cat)
{
  for (guint k = 0; k < G_N_ELEMENTS (kinds); k++)
    if (g_strcmp0 (cat, kinds[k].cat) == 0)
      return kinds[k].colour;
  return "#444444";
}

static int
row_of (GArray *rows, gint64 pid, gint64 tid)
{
  for (guint i = 0; i < rows->len; i++)
    if (g_array_index (rows, Row, i).pid == pid && g_array_index (rows, Row, i).tid == tid)
      return (int) i;
  Row r = { pid, tid, 0 };
  g_array_append_val (rows, r);
  return (int) rows->len - 1;
}

static int
by_row (gconstpointer a, gconstpointer b)
{
  const Row *x = a, *y = b;
  return x->pid != y->pid ? (x->pid > y->pid) - (x->pid < y->pid) : (x->tid > y->tid) - (x->tid < y->tid);
}

/* The steps of `steps` ("A:B", "A", "all", or NULL: the last DEFAULT_STEPS) among the
 * n counted as the first row's optimizer events; FALSE with the error printed. */
static gboolean
parse_steps (const char *path, const char *steps, guint n, guint *first, guint *last)
{
  guint64 a = 0, b = 0;
  char *end = NULL;

  if (steps == NULL || strcmp (steps, "all") == 0)
    {
      *first = steps == NULL && n > DEFAULT_STEPS ? n - DEFAULT_STEPS + 1 : 1, *last = n;
      return TRUE;
    }
  if (n == 0)
    {
      ks_cli_error ("%s: --steps %s: the trace has no optimizer events to count steps by; "
                    "leave out --steps", path, steps);
      return FALSE;
    }
  a = g_ascii_strtoull (steps, &end, 10);
  b = a;
  if (end != steps && *end == ':')
    {
      const char *second = end + 1;
      b = g_ascii_strtoull (second, &end, 10);
      if (end == second)
        end = (char *) second - 1; /* "A:" is not a range */
    }
  if (end == steps || *end != '\0' || a < 1 || b < a || b > n)
    {
      ks_cli_error ("%s: --steps %s: give A:B (or one step, or all) with 1 <= A <= B <= %u, "
                    "the steps this trace holds", path, steps, n);
      return FALSE;
    }
  *first = (guint) a, *last = (guint) b;
  return TRUE;
}

static int
by_start (gconstpointer a, gconstpointer b)
{
  const Box *x = a, *y = b;
  return (x->start > y->start) - (x->start < y->start);
}

int
ks_plot_trace (const char *path, const char *output, const char *steps)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) boxes = g_array_new (FALSE, FALSE, sizeof (Box));
  g_autoptr (GArray) rows = g_array_new (FALSE, FALSE, sizeof (Row));
  double t0 = INFINITY, t1 = -INFINITY;

  if (!json_parser_load_from_file (parser, path, &error)
      || !JSON_NODE_HOLDS_ARRAY (json_parser_get_root (parser)))
    {
      ks_cli_error ("%s: not a trace (a JSON array of Chrome trace events, as [trace] path "
                    "writes)%s%s", path, error ? ": " : "", error ? error->message : "");
      return KS_EXIT_USAGE;
    }
  JsonArray *events = json_node_get_array (json_parser_get_root (parser));
  for (guint i = 0; i < json_array_get_length (events); i++)
    {
      JsonNode *n = json_array_get_element (events, i);
      JsonObject *e = JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
      if (e == NULL || g_strcmp0 (json_object_get_string_member_with_default (e, "ph", ""), "X") != 0)
        continue; /* names of processes and threads */
      Box b = { json_object_get_int_member_with_default (e, "pid", 0),
                json_object_get_int_member_with_default (e, "tid", 0),
                json_object_get_double_member_with_default (e, "ts", NAN),
                json_object_get_double_member_with_default (e, "dur", NAN),
                json_object_get_string_member_with_default (e, "cat", "") };
      if (b.cat == NULL) /* not a string */
        b.cat = "";
      if (!isfinite (b.start) || !isfinite (b.dur) || b.dur < 0)
        {
          ks_cli_error ("%s: event %u has no finite \"ts\" and \"dur\"", path, i);
          return KS_EXIT_USAGE;
        }
      g_array_append_val (boxes, b);
      t0 = MIN (t0, b.start);
      t1 = MAX (t1, b.start + b.dur);
    }
  if (boxes->len == 0)
    {
      ks_cli_error ("%s: no events to draw (was the run pipelined, with [trace] path set?)", path);
      return KS_EXIT_USAGE;
    }
  for (guint i = 0; i < boxes->len; i++)
    {
      Box *b = &g_array_index (boxes, Box, i);
      row_of (rows, b->pid, b->tid);
    }
  g_array_sort (rows, by_row);
  g_array_sort (boxes, by_start);
  /* the steps: each ends with the first row's optimizer event */
  g_autoptr (GArray) ends = g_array_new (FALSE, FALSE, sizeof (double));
  const Row *first_row = &g_array_index (rows, Row, 0);
  for (guint i = 0; i < boxes->len; i++)
    {
      const Box *b = &g_array_index (boxes, Box, i);
      if (b->pid == first_row->pid && b->tid == first_row->tid
          && strcmp (b->cat, "optimizer") == 0)
        {
          double end = b->start + b->dur;
          g_array_append_val (ends, end);
        }
    }
  guint first, last;
  if (!parse_steps (path, steps, ends->len, &first, &last))
    return KS_EXIT_USAGE;
  /* the window: from the end of the step before the first to the end of the last */
  double w0 = first > 1 ? g_array_index (ends, double, first - 2) : -INFINITY;
  double w1 = ends->len > 0 && (steps == NULL ? last < ends->len : strcmp (steps, "all") != 0)
                  ? g_array_index (ends, double, last - 1) : INFINITY;
  guint kept = 0;
  t0 = INFINITY, t1 = -INFINITY;
  for (guint i = 0; i < boxes->len; i++)
    {
      const Box *b = &g_array_index (boxes, Box, i);
      if (b->start < w0 || b->start >= w1)
        continue;
      g_array_index (boxes, Box, kept++) = *b;
      t0 = MIN (t0, b->start);
      t1 = MAX (t1, b->start + b->dur);
    }
  g_array_set_size (boxes, kept);
  for (guint i = 0; i < boxes->len; i++)
    {
      Box *b = &g_array_index (boxes, Box, i);
      if (strcmp (b->cat, "forward") == 0 || strcmp (b->cat, "backward") == 0)
        g_array_index (rows, Row, row_of (rows, b->pid, b->tid)).busy += b->dur;
    }

  const double span = MAX (t1 - t0, 1), pw = WIDTH - LEFT - RIGHT;
  int height = TOP + (int) rows->len * (ROW + GAP) + 50;
  g_autoptr (GString) svg = g_string_new (NULL);
  g_string_append_printf (svg,
                          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
                          "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                          WIDTH, height, WIDTH, height);
  for (guint k = 0, x = LEFT; k < G_N_ELEMENTS (kinds); k++)
    if (kinds[k].label != NULL)
      {
        g_string_append_printf (svg, "<rect x=\"%u\" y=\"16\" width=\"14\" height=\"10\" "
                                "fill=\"%s\"/><text x=\"%u\" y=\"25\">%s</text>\n",
                                x, kinds[k].colour, x + 18, kinds[k].label);
        x += 40 + 7 * (guint) strlen (kinds[k].label);
      }
  for (guint r = 0; r < rows->len; r++)
    {
      const Row *row = &g_array_index (rows, Row, r);
      double y = TOP + r * (ROW + GAP);
      g_string_append_printf (svg, "<rect x=\"%d\" y=\"%.0f\" width=\"%.0f\" height=\"%d\" "
                              "fill=\"#f4f4f4\"/><text x=\"%d\" y=\"%.0f\" text-anchor=\"end\">"
                              "replica %" G_GINT64_FORMAT " stage %" G_GINT64_FORMAT
                              " (%.0f%% busy)</text>\n",
                              LEFT, y, pw, ROW, LEFT - 6, y + ROW / 2 + 4, row->pid, row->tid,
                              100 * row->busy / span);
    }
  for (guint i = 0; i < boxes->len; i++)
    {
      const Box *b = &g_array_index (boxes, Box, i);
      int r = row_of (rows, b->pid, b->tid);
      g_string_append_printf (svg, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                              "fill=\"%s\"/>\n",
                              LEFT + (b->start - t0) / span * pw, TOP + r * (ROW + GAP),
                              MAX (b->dur / span * pw, 0.3), ROW, colour_of (b->cat));
    }
  /* the time axis: ticks at a round number of milliseconds, and its label with the unit */
  double tick = pow (10, floor (log10 (span / 1000 / TICKS)));
  if (span / 1000 / tick > 2 * TICKS)
    tick *= span / 1000 / (tick * 2) > 2 * TICKS ? 5 : 2;
  const double axis = TOP + rows->len * (ROW + GAP);
  for (int k = 0; k * tick <= span / 1000 + tick / 1e6; k++)
    g_string_append_printf (svg, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.0f\" y2=\"%.0f\" "
                            "stroke=\"#999\"/><text x=\"%.1f\" y=\"%.0f\" "
                            "text-anchor=\"middle\">%g</text>\n",
                            LEFT + k * tick * 1000 / span * pw, LEFT + k * tick * 1000 / span * pw,
                            axis - 2, axis + 3, LEFT + k * tick * 1000 / span * pw, axis + 16,
                            k * tick);
  g_autofree char *window = ends->len > 0 ? g_strdup_printf ("steps %u to %u of %u", first, last,
                                                             ends->len)
                                          : g_strdup ("the whole trace");
  g_string_append_printf (svg, "<text x=\"%g\" y=\"%d\" text-anchor=\"middle\">time (ms), %s"
                          "</text>\n</svg>\n", LEFT + pw / 2, height - 12, window);
  if (!ks_plot_write (output, svg->str, &error))
    {
      ks_cli_error ("plot: %s", error->message);
      return KS_EXIT_RUNTIME;
    }
  printf ("%s: %u rows, %u events over %.1f ms (%s)\n", output, rows->len, boxes->len,
          span / 1000, window);
  return KS_EXIT_OK;
}
