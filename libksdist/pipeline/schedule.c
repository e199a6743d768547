/* Pipeline schedules as data (pipeline.h): the order of forward and backward micro-steps
 * per stage, the transfers around them, and a simulator that runs them against a clock. */
#include "ks-private.h"

#include <ksdist/pipeline.h>

static const char *const kind_names[] = { "fthenb", "1f1b", "interleaved" };

const char *
ks_schedule_kind_name (KsScheduleKind kind)
{
  return (guint) kind < G_N_ELEMENTS (kind_names) ? kind_names[kind] : "?";
}

gboolean
ks_schedule_kind_from_name (const char *name, KsScheduleKind *kind)
{
  for (guint i = 0; i < G_N_ELEMENTS (kind_names); i++)
    if (g_strcmp0 (name, kind_names[i]) == 0)
      {
        *kind = i;
        return TRUE;
      }
  return FALSE;
}

static void
emit (GArray *program, KsPipeOp op, int micro_batch, int chunk, int peer)
{
  KsPipeInstr in = { op, micro_batch, chunk, peer };
  g_array_append_val (program, in);
}

/* A forward or backward micro-step with the receive before it and the send after it. */
static void
emit_compute (const KsSchedule *s, int stage, gboolean forward, int micro_batch, int chunk)
{
  GArray *program = s->program[stage];
  int p = s->stages, last = p * s->virtual_stages - 1;
  int g = chunk * p + stage; /* the global chunk */

  if (forward)
    {
      if (g > 0)
        emit (program, KS_PIPE_RECV_ACTIVATION, micro_batch, chunk, (g - 1) % p);
      emit (program, KS_PIPE_FORWARD, micro_batch, chunk, -1);
      if (g < last)
        emit (program, KS_PIPE_SEND_ACTIVATION, micro_batch, chunk, (g + 1) % p);
    }
  else
    {
      if (g < last)
        emit (program, KS_PIPE_RECV_GRADIENT, micro_batch, chunk, (g + 1) % p);
      emit (program, KS_PIPE_BACKWARD, micro_batch, chunk, -1);
      if (g > 0)
        emit (program, KS_PIPE_SEND_GRADIENT, micro_batch, chunk, (g - 1) % p);
    }
}

/* The k-th forward (or backward) micro-step of a stage: which micro-batch on which local
 * chunk. Interleaved runs p micro-batches through one chunk, then the next chunk
 * (backwards for the backward pass); the others have one chunk. */
static void
micro_step (const KsSchedule *s, gboolean forward, int k, int *micro_batch, int *chunk)
{
  int p = s->stages, v = s->virtual_stages;
  if (s->kind != KS_SCHEDULE_INTERLEAVED)
    {
      *micro_batch = k;
      *chunk = 0;
      return;
    }
  int in_group = k % (p * v);
  *micro_batch = k / (p * v) * p + in_group % p;
  *chunk = forward ? in_group / p : v - 1 - in_group / p;
}

static void
build_stage (KsSchedule *s, int stage)
{
  int p = s->stages, v = s->virtual_stages, m = s->micro_batches, total = m * v;
  int warmup, mb, chunk;

  switch (s->kind)
    {
    case KS_SCHEDULE_FTHENB: warmup = total; break;
    case KS_SCHEDULE_1F1B: warmup = p - stage - 1; break;
    default: warmup = 2 * (p - stage - 1) + (v - 1) * p; break;
    }
  warmup = MIN (warmup, total);
  for (int k = 0; k < warmup; k++)
    {
      micro_step (s, TRUE, k, &mb, &chunk);
      emit_compute (s, stage, TRUE, mb, chunk);
    }
  for (int k = 0; k < total - warmup; k++) /* steady state: one forward, one backward */
    {
      micro_step (s, TRUE, warmup + k, &mb, &chunk);
      emit_compute (s, stage, TRUE, mb, chunk);
      micro_step (s, FALSE, k, &mb, &chunk);
      emit_compute (s, stage, FALSE, mb, chunk);
    }
  for (int k = total - warmup; k < total; k++)
    {
      micro_step (s, FALSE, k, &mb, &chunk);
      emit_compute (s, stage, FALSE, mb, chunk);
    }
  emit (s->program[stage], KS_PIPE_REDUCE_TIED, -1, -1, -1);
  emit (s->program[stage], KS_PIPE_OPTIMIZER_STEP, -1, -1, -1);
}

KsSchedule *
ks_schedule_new (KsScheduleKind kind, int stages, int virtual_stages, int micro_batches,
                 GError **error)
{
  KsSchedule *s;

  if ((guint) kind >= G_N_ELEMENTS (kind_names) || stages < 1 || virtual_stages < 1
      || micro_batches < 1)
    {
      ks_invalid (error, "schedule: stages %d, virtual stages %d and micro-batches %d must be "
                  "at least 1", stages, virtual_stages, micro_batches);
      return NULL;
    }
  if (kind != KS_SCHEDULE_INTERLEAVED && virtual_stages != 1)
    {
      ks_invalid (error, "schedule %s runs one chunk per stage (virtual_stages = 1, not %d); "
                  "use schedule = interleaved for virtual stages", kind_names[kind],
                  virtual_stages);
      return NULL;
    }
  if (kind == KS_SCHEDULE_INTERLEAVED && (virtual_stages < 2 || micro_batches % stages != 0))
    {
      ks_invalid (error, "schedule interleaved needs virtual_stages >= 2 (it is %d) and "
                  "micro_batches a multiple of stages (%d is not a multiple of %d): each "
                  "round sends one micro-batch per stage through a chunk before the next "
                  "chunk", virtual_stages, micro_batches, stages);
      return NULL;
    }
  s = g_new0 (KsSchedule, 1);
  s->kind = kind;
  s->stages = stages;
  s->virtual_stages = virtual_stages;
  s->micro_batches = micro_batches;
  s->program = g_new0 (GArray *, stages);
  for (int i = 0; i < stages; i++)
    {
      s->program[i] = g_array_new (FALSE, FALSE, sizeof (KsPipeInstr));
      build_stage (s, i);
    }
  return s;
}

void
ks_schedule_free (KsSchedule *s)
{
  if (s == NULL)
    return;
  for (int i = 0; i < s->stages; i++)
    g_array_unref (s->program[i]);
  g_free (s->program);
  g_free (s);
}

char *
ks_schedule_describe_instr (const KsPipeInstr *in)
{
  static const char *const codes[] = { "F", "B", "sa", "ra", "sg", "rg", "tied", "step" };
  GString *text = g_string_new (codes[in->op]);

  if (in->micro_batch >= 0)
    g_string_append_printf (text, "%d.%d", in->micro_batch, in->chunk);
  if (in->peer >= 0)
    g_string_append_printf (text, "%s%d",
                            in->op == KS_PIPE_SEND_ACTIVATION || in->op == KS_PIPE_SEND_GRADIENT
                                ? ">" : "<", in->peer);
  return g_string_free (text, FALSE);
}

char *
ks_schedule_describe_stage (const KsSchedule *s, int stage)
{
  GString *text = g_string_new (NULL);
  GArray *program = s->program[stage];

  for (guint i = 0; i < program->len; i++)
    {
      g_autofree char *one = ks_schedule_describe_instr (&g_array_index (program, KsPipeInstr, i));
      g_string_append_printf (text, "%s%s", i ? " " : "", one);
    }
  return g_string_free (text, FALSE);
}

/* ---- simulation ---- */

/* A message's key: which transfer (activation 0, gradient 1), the micro-batch and the
 * global chunk that produced it. */
static gint64
message_key (const KsSchedule *s, int gradient, int micro_batch, int global_chunk)
{
  return ((gint64) gradient * s->micro_batches + micro_batch) * s->stages * s->virtual_stages
         + global_chunk;
}

gboolean
ks_schedule_simulate (const KsSchedule *s, double forward, double backward, double transfer,
                      KsScheduleTiming *timing, GError **error)
{
  int p = s->stages, v = s->virtual_stages, left = 0;
  g_autofree guint *next = g_new0 (guint, p);
  g_autofree double *clock = g_new0 (double, p);
  g_autoptr (GHashTable) arrivals = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free,
                                                           g_free);
  double busy = 0;
  gboolean progress = TRUE;

  for (int i = 0; i < p; i++)
    left += s->program[i]->len;
  while (left > 0 && progress)
    {
      progress = FALSE;
      for (int st = 0; st < p; st++)
        while (next[st] < s->program[st]->len)
          {
            const KsPipeInstr *in = &g_array_index (s->program[st], KsPipeInstr, next[st]);
            int g = in->chunk * p + st;
            if (in->op == KS_PIPE_FORWARD || in->op == KS_PIPE_BACKWARD)
              {
                double cost = (in->op == KS_PIPE_FORWARD ? forward : backward) / v;
                clock[st] += cost;
                busy += cost;
              }
            else if (in->op == KS_PIPE_SEND_ACTIVATION || in->op == KS_PIPE_SEND_GRADIENT)
              {
                gint64 key = message_key (s, in->op == KS_PIPE_SEND_GRADIENT, in->micro_batch, g);
                g_hash_table_insert (arrivals, g_memdup2 (&key, sizeof key),
                                     g_memdup2 (&(double) { clock[st] + transfer },
                                                sizeof (double)));
              }
            else if (in->op == KS_PIPE_RECV_ACTIVATION || in->op == KS_PIPE_RECV_GRADIENT)
              {
                gboolean gradient = in->op == KS_PIPE_RECV_GRADIENT;
                gint64 key = message_key (s, gradient, in->micro_batch, gradient ? g + 1 : g - 1);
                const double *at = g_hash_table_lookup (arrivals, &key);
                if (at == NULL)
                  break; /* waits for the send */
                clock[st] = MAX (clock[st], *at);
              }
            next[st]++;
            left--;
            progress = TRUE;
          }
    }
  if (left > 0)
    {
      g_autoptr (GString) waits = g_string_new (NULL);
      for (int st = 0; st < p; st++)
        if (next[st] < s->program[st]->len)
          {
            const KsPipeInstr *in = &g_array_index (s->program[st], KsPipeInstr, next[st]);
            g_string_append_printf (waits, "%sstage %d waits for stage %d (micro-batch %d)",
                                    waits->len ? ", " : "", st, in->peer, in->micro_batch);
          }
      ks_invalid (error, "schedule %s (p=%d v=%d m=%d) deadlocks: %s",
                  ks_schedule_kind_name (s->kind), p, v, s->micro_batches, waits->str);
      return FALSE;
    }
  timing->makespan = 0;
  for (int st = 0; st < p; st++)
    timing->makespan = MAX (timing->makespan, clock[st]);
  timing->busy = busy;
  timing->bubble = timing->makespan > 0 ? 1 - busy / (p * timing->makespan) : 0;
  return TRUE;
}

double
ks_schedule_theoretical_bubble (int stages, int virtual_stages, int micro_batches)
{
  return (double) (stages - 1) / ((double) virtual_stages * micro_batches + stages - 1);
}
