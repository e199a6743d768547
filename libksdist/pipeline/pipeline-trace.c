/* A pipeline stage's timing and its trace events (pipeline.h). */
#include "pipeline-private.h"

void
ks_pipeline_timing (const KsPipeline *pl, double *busy, double *wall)
{
  *busy = pl->busy;
  *wall = pl->wall;
}

void
ks_pipeline_record (KsPipeline *pl, gboolean on)
{
  if (on && pl->events == NULL)
    pl->events = g_array_new (FALSE, FALSE, sizeof (Event));
  else if (!on && pl->events != NULL)
    g_clear_pointer (&pl->events, g_array_unref);
}

/* This stage's events as Chrome trace events (process `replica`, one thread per stage),
 * comma-led. */
static GString *
trace_events (const KsPipeline *pl, int replica)
{
  static const char *const category[] = { "forward", "backward", "send", "recv", "send",
                                          "recv", "shared", "optimizer" };
  GString *text = g_string_new (NULL);

  g_string_append_printf (text, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, "
                          "\"tid\": %d, \"args\": {\"name\": \"stage %d\"}}", replica, pl->stage,
                          pl->stage);
  for (guint i = 0; pl->events != NULL && i < pl->events->len; i++)
    {
      const Event *e = &g_array_index (pl->events, Event, i);
      g_autofree char *name = ks_schedule_describe_instr (&e->instr);
      g_string_append_printf (text, ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", "
                              "\"ts\": %" G_GINT64_FORMAT ", \"dur\": %" G_GINT64_FORMAT
                              ", \"pid\": %d, \"tid\": %d}",
                              name, category[e->instr.op], e->start, e->end - e->start,
                              replica, pl->stage);
    }
  return text;
}

gboolean
ks_pipeline_trace_events (KsPipeline *pl, int replica, GString **events, GError **error)
{
  g_autoptr (GString) mine = trace_events (pl, replica);
  gint64 len = mine->len;

  *events = NULL;
  if (pl->stage > 0)
    return ks_comm_send (pl->comm, &len, sizeof len, 0, tag_of (TAG_TRACE, 0, 0), error)
           && ks_comm_send (pl->comm, mine->str, len, 0, tag_of (TAG_TRACE, 0, 1), error);
  g_autoptr (GString) all = g_string_new (NULL);
  g_string_append_printf (all, ",\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
                          "\"args\": {\"name\": \"ksdist pipeline, replica %d\"}}", replica,
                          replica);
  g_string_append_len (all, mine->str, mine->len);
  for (int s = 1; s < pl->p; s++)
    {
      if (!ks_comm_recv (pl->comm, &len, sizeof len, s, tag_of (TAG_TRACE, 0, 0), error))
        return FALSE;
      if (len < 0 || len > (1 << 30))
        return ks_invalid (error, "pipeline: stage %d sent a trace of %" G_GINT64_FORMAT
                           " bytes", s, len);
      gsize at = all->len;
      g_string_set_size (all, at + len);
      if (!ks_comm_recv (pl->comm, all->str + at, len, s, tag_of (TAG_TRACE, 0, 1), error))
        return FALSE;
    }
  *events = g_steal_pointer (&all);
  return TRUE;
}
