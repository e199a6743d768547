/* The progress of a long phase of a task's (ks_trainer_progress): once the phase has run
 * [log] progress_after seconds, told to the observers at most five times a second, and at
 * its end if told before (the default observer prints it on a terminal: observe.c). */
#include "trainer-private.h"

/* One phase at a time in a process: the one being counted */
static struct {
  const KsTrainer *trainer;
  gsize total;
  gint64 start, shown; /* monotonic microseconds */
  gboolean told;
} phase;

void
ks_trainer_progress (KsTrainer *t, const char *what, gsize done, gsize total)
{
  gint64 now = g_get_monotonic_time ();
  double after = ks_config_get_double (t->config, "log", "progress_after");

  if (phase.trainer != t || phase.total != total || done <= 1)
    phase.trainer = t, phase.total = total, phase.start = now, phase.shown = 0,
    phase.told = FALSE;
  if (total == 0)
    return;
  if (done < total && (now - phase.start < after * G_USEC_PER_SEC || now - phase.shown < 200000))
    return;
  if (done == total && !phase.told)
    return; /* a phase that ended before it showed needs no report */
  double elapsed = (now - phase.start) / (double) G_USEC_PER_SEC;
  double left = done > 0 ? elapsed / done * (total - done) : 0;
  ks_trainer_notify_progress (t, &(KsTrainProgress) { sizeof (KsTrainProgress), what, done,
                                                      total, elapsed, left });
  phase.shown = now;
  phase.told = TRUE;
}
