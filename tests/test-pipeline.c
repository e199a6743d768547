/* Pipeline schedules as data: the exact programs of a small 1F1B, every micro-step once
 * and in order for every schedule over a range of p, v, m, no deadlock, activations in
 * flight, the simulated bubble against (p-1)/(v m + p-1), and the requirements of the
 * interleaved schedule. */
#include "testutil.h"

#include <math.h>

static void
test_programs (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsSchedule) s = ks_schedule_new (KS_SCHEDULE_1F1B, 2, 1, 3, &error);
  g_assert_no_error (error);
  g_autofree char *first = ks_schedule_describe_stage (s, 0);
  g_autofree char *last = ks_schedule_describe_stage (s, 1);
  g_assert_cmpstr (first, ==, "F0.0 sa0.0>1 F1.0 sa1.0>1 rg0.0<1 B0.0 F2.0 sa2.0>1 rg1.0<1 "
                              "B1.0 rg2.0<1 B2.0 tied step");
  g_assert_cmpstr (last, ==, "ra0.0<0 F0.0 B0.0 sg0.0>0 ra1.0<0 F1.0 B1.0 sg1.0>0 ra2.0<0 "
                             "F2.0 B2.0 sg2.0>0 tied step");

  /* interleaved, p=2 v=2 m=2: stage 0 holds global chunks 0 and 2, stage 1 chunks 1, 3 */
  g_autoptr (KsSchedule) i = ks_schedule_new (KS_SCHEDULE_INTERLEAVED, 2, 2, 2, &error);
  g_autofree char *i1 = ks_schedule_describe_stage (i, 1);
  g_assert_cmpstr (i1, ==, "ra0.0<0 F0.0 sa0.0>0 ra1.0<0 F1.0 sa1.0>0 ra0.1<0 F0.1 B0.1 "
                           "sg0.1>0 ra1.1<0 F1.1 B1.1 sg1.1>0 rg0.0<0 B0.0 sg0.0>0 rg1.0<0 "
                           "B1.0 sg1.0>0 tied step");
}

/* Every forward and backward of (micro-batch, chunk) once per stage, the backward after
 * its forward; the most micro-batches a stage holds activations of at once. */
static int
check_program (const KsSchedule *s, int stage)
{
  int m = s->micro_batches, v = s->virtual_stages, held = 0, most = 0;
  g_autofree int *state = g_new0 (int, m * v); /* 0 none, 1 forward done, 2 backward done */
  GArray *program = s->program[stage];

  for (guint k = 0; k < program->len; k++)
    {
      const KsPipeInstr *in = &g_array_index (program, KsPipeInstr, k);
      if (in->op != KS_PIPE_FORWARD && in->op != KS_PIPE_BACKWARD)
        continue;
      int *st = &state[in->micro_batch * v + in->chunk];
      g_assert_cmpint (*st, ==, in->op == KS_PIPE_FORWARD ? 0 : 1);
      *st += 1;
      held += in->op == KS_PIPE_FORWARD ? 1 : -1;
      most = MAX (most, held);
    }
  for (int k = 0; k < m * v; k++)
    g_assert_cmpint (state[k], ==, 2);
  return most;
}

static void
test_every_shape (void)
{
  int runs = 0;
  for (int kind = 0; kind < 3; kind++)
    for (int p = 1; p <= 6; p++)
      for (int v = 1; v <= 4; v++)
        for (int m = 1; m <= 12; m++)
          {
            g_autoptr (GError) error = NULL;
            gboolean valid = kind == KS_SCHEDULE_INTERLEAVED ? v >= 2 && m % p == 0 : v == 1;
            g_autoptr (KsSchedule) s = ks_schedule_new (kind, p, v, m, &error);
            KsScheduleTiming t;
            g_assert_true ((s != NULL) == valid);
            if (s == NULL)
              continue;
            for (int st = 0; st < p; st++)
              {
                int most = check_program (s, st);
                if (kind == KS_SCHEDULE_FTHENB)
                  g_assert_cmpint (most, ==, m);
                else if (kind == KS_SCHEDULE_1F1B)
                  g_assert_cmpint (most, ==, MIN (p - st, m)); /* what 1F1B saves */
              }
            if (!ks_schedule_simulate (s, 1, 2, 0, &t, &error))
              g_error ("%s", error->message);
            g_assert_cmpfloat (fabs (t.busy - 3.0 * m * p), <, 1e-9 * m * p);
            runs++;
          }
  g_test_message ("%d schedules checked and simulated", runs);
}

/* Equal stages, no transfer time: the simulated bubble is the theory's, for FThenB and
 * 1F1B exactly; interleaving lowers it as (p-1)/(v m + p-1) says. */
static void
test_bubble (void)
{
  const int shapes[][3] = { { 4, 1, 8 }, { 4, 2, 8 }, { 4, 4, 8 }, { 2, 1, 4 }, { 8, 1, 16 },
                            { 2, 4, 4 }, { 8, 2, 16 }, { 3, 3, 6 } };
  double previous = 1;
  for (gsize i = 0; i < G_N_ELEMENTS (shapes); i++)
    {
      int p = shapes[i][0], v = shapes[i][1], m = shapes[i][2];
      for (int kind = 0; kind < 3; kind++)
        {
          g_autoptr (KsSchedule) s = ks_schedule_new (kind, p, v, m, NULL);
          KsScheduleTiming t;
          if (s == NULL)
            continue;
          g_assert_true (ks_schedule_simulate (s, 1, 2, 0, &t, NULL));
          double theory = ks_schedule_theoretical_bubble (p, v, m);
          g_test_message ("%s p=%d v=%d m=%d: bubble %.4f, theory %.4f",
                          ks_schedule_kind_name (kind), p, v, m, t.bubble, theory);
          g_assert_cmpfloat (fabs (t.bubble - theory), <, 1e-9);
        }
    }
  /* p=4, m=8: 27.3% with one chunk per stage, 15.8% with 2, 8.6% with 4 */
  for (int v = 1; v <= 4; v *= 2)
    {
      g_autoptr (KsSchedule) s = ks_schedule_new (v == 1 ? KS_SCHEDULE_1F1B
                                                         : KS_SCHEDULE_INTERLEAVED, 4, v, 8, NULL);
      KsScheduleTiming t;
      g_assert_true (ks_schedule_simulate (s, 1, 2, 0, &t, NULL));
      g_assert_cmpfloat (t.bubble, <, previous);
      previous = t.bubble;
    }
  g_assert_cmpfloat (fabs (previous - 3.0 / 35), <, 1e-9);
}

static void
test_errors (void)
{
  g_autoptr (GError) error = NULL;
  KsScheduleKind kind;

  g_assert_null (ks_schedule_new (KS_SCHEDULE_INTERLEAVED, 4, 2, 6, &error));
  g_assert_cmpstr (error->message, ==, "schedule interleaved needs virtual_stages >= 2 (it is "
                                       "2) and micro_batches a multiple of stages (6 is not a "
                                       "multiple of 4): each round sends one micro-batch per "
                                       "stage through a chunk before the next chunk");
  g_clear_error (&error);
  g_assert_null (ks_schedule_new (KS_SCHEDULE_1F1B, 4, 2, 8, &error));
  g_assert_cmpstr (error->message, ==, "schedule 1f1b runs one chunk per stage "
                                       "(virtual_stages = 1, not 2); use schedule = interleaved "
                                       "for virtual stages");
  g_assert_true (ks_schedule_kind_from_name ("interleaved", &kind));
  g_assert_cmpint (kind, ==, KS_SCHEDULE_INTERLEAVED);
  g_assert_false (ks_schedule_kind_from_name ("gpipe", &kind));
}

/* A program edited into a deadlock is reported with the stages that wait. */
static void
test_deadlock (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsSchedule) s = ks_schedule_new (KS_SCHEDULE_1F1B, 2, 1, 1, &error);
  KsScheduleTiming t;
  /* stage 0 waits for the gradient before sending the activation it depends on */
  KsPipeInstr *a = &g_array_index (s->program[0], KsPipeInstr, 1);
  KsPipeInstr *b = &g_array_index (s->program[0], KsPipeInstr, 2);
  KsPipeInstr tmp = *a;
  *a = *b;
  *b = tmp;
  g_assert_false (ks_schedule_simulate (s, 1, 2, 0, &t, &error));
  g_assert_cmpstr (error->message, ==, "schedule 1f1b (p=2 v=1 m=1) deadlocks: stage 0 waits "
                                       "for stage 1 (micro-batch 0), stage 1 waits for stage 0 "
                                       "(micro-batch 0)");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/pipeline/programs", test_programs);
  g_test_add_func ("/pipeline/every-shape", test_every_shape);
  g_test_add_func ("/pipeline/bubble", test_bubble);
  g_test_add_func ("/pipeline/errors", test_errors);
  g_test_add_func ("/pipeline/deadlock", test_deadlock);
  return g_test_run ();
}
