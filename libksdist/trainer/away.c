/* Whether this process was itself away: stopped (SIGSTOP, a debugger) or starved of CPU
 * for longer than [comm] timeout. Its peers then gave up on it, and the error it finds
 * when it continues (a closed connection, a timeout) must say so rather than blame them.
 * A thread ticks every 200 ms while the run lasts; a tick that comes late by more than a
 * second is a gap, and the longest recent one is kept. */
#include "trainer-private.h"

#include <string.h>

#define TICK_US (200 * 1000)

struct KsAwayWatch {
  GThread *thread;
  GMutex lock;
  GCond wake;
  gboolean quit;
  gint64 gap, at; /* the longest gap lately and when it ended */
};

static gpointer
tick (gpointer data)
{
  KsAwayWatch *w = data;
  gint64 last = g_get_monotonic_time ();

  g_mutex_lock (&w->lock);
  while (!w->quit)
    {
      g_cond_wait_until (&w->wake, &w->lock, last + TICK_US);
      gint64 now = g_get_monotonic_time (), gap = now - last - TICK_US;
      if (gap > G_USEC_PER_SEC && (gap > w->gap || now - w->at > 60 * G_USEC_PER_SEC))
        w->gap = gap, w->at = now;
      last = now;
    }
  g_mutex_unlock (&w->lock);
  return NULL;
}

KsAwayWatch *
ks_away_watch_start (void)
{
  KsAwayWatch *w = g_new0 (KsAwayWatch, 1);
  g_mutex_init (&w->lock);
  g_cond_init (&w->wake);
  w->thread = g_thread_new ("ks-away", tick, w);
  return w;
}

void
ks_away_watch_stop (KsAwayWatch *w)
{
  if (w == NULL)
    return;
  g_mutex_lock (&w->lock);
  w->quit = TRUE;
  g_cond_signal (&w->wake);
  g_mutex_unlock (&w->lock);
  g_thread_join (w->thread);
  g_mutex_clear (&w->lock);
  g_cond_clear (&w->wake);
  g_free (w);
}

void
ks_away_watch_explain (KsAwayWatch *w, double timeout_s, GError **error)
{
  if (w == NULL || error == NULL || *error == NULL
      || !(g_error_matches (*error, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST)
           || g_error_matches (*error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT))
      || strstr ((*error)->message, "stopped or starved") != NULL) /* a plugin said it */
    return;
  g_mutex_lock (&w->lock);
  gint64 gap = w->gap, at = w->at, now = g_get_monotonic_time ();
  g_mutex_unlock (&w->lock);
  /* away longer than the timeout, and lately: within the time its peers take to give up
   * and this process to find it out */
  if (gap > timeout_s * G_USEC_PER_SEC && now - at < (3 * timeout_s + 10) * G_USEC_PER_SEC)
    g_prefix_error (error, "this process was stopped or starved for %.1f s, longer than "
                    "[comm] timeout = %g s, so its peers gave up on it; what it found when "
                    "it went on: ", gap / 1e6, timeout_s);
}
