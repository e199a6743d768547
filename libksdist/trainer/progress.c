/* The progress of a long phase of a task's (ks_trainer_progress): on a terminal, once the
 * phase has run [log] progress_after seconds, one line rewritten in place with the count
 * and the time left, at most a few times a second. */
#include "trainer-private.h"

#include <stdio.h>

/* One phase at a time in a process: the one being counted */
static struct {
  const KsTrainer *trainer;
  gsize total;
  gint64 start, shown; /* monotonic microseconds */
  gboolean printed;
} phase;

void
ks_trainer_progress (KsTrainer *t, const char *what, gsize done, gsize total)
{
  gint64 now = g_get_monotonic_time ();
  double after = ks_config_get_double (t->config, "log", "progress_after");

  if (phase.trainer != t || phase.total != total || done <= 1)
    phase.trainer = t, phase.total = total, phase.start = now, phase.shown = 0,
    phase.printed = FALSE;
  if (!t->tty || total == 0)
    return;
  if (done < total && (now - phase.start < after * G_USEC_PER_SEC || now - phase.shown < 200000))
    return;
  if (done == total && !phase.printed)
    return; /* a phase that ended before it showed needs no line */
  double elapsed = (now - phase.start) / (double) G_USEC_PER_SEC;
  double left = done > 0 ? elapsed / done * (total - done) : 0;
  printf ("\r%s: %" G_GSIZE_FORMAT "/%" G_GSIZE_FORMAT "  %.0fs, ETA %.0fs   %s", what, done,
          total, elapsed, left, done == total ? "\n" : "");
  fflush (stdout);
  phase.shown = now;
  phase.printed = TRUE;
}
