/* away.h: one watch per process for its own gaps (stopped or starved of CPU). */
#include "ks-private.h"

#include <string.h>

#define TICK_US (200 * 1000)
#define GAP_MIN_US G_USEC_PER_SEC
/* a gap shorter than the kept one replaces it only once the kept one is this old */
#define KEEP_US (60 * G_USEC_PER_SEC)

static GMutex life_lock; /* begin and end: the users and the thread */
static int users;
static GThread *thread;

static GMutex lock; /* the record, and the thread's quit and wake */
static GCond wake;
static gboolean quit, running;
static gint64 last;     /* the last tick, or the end of the last gap */
static gint64 total;    /* all gaps so far */
static gint64 gap, at;  /* the gap kept, and when it ended */
static gboolean told;   /* a message said the gap kept */

/* With the lock: a gap when `now` is past the due tick by more than GAP_MIN_US, whichever
 * thread sees it first (a caller woken with the watch's thread after SIGCONT must not
 * judge its peers before the gap is known). */
static void
observe (gint64 now)
{
  gint64 late = now - last - TICK_US;
  if (!running || late <= GAP_MIN_US)
    return;
  total += late;
  if (late > gap || now - at > KEEP_US)
    gap = late, at = now, told = FALSE;
  last = now;
}

static gpointer
tick (gpointer data)
{
  (void) data;
  g_mutex_lock (&lock);
  while (!quit)
    {
      g_cond_wait_until (&wake, &lock, last + TICK_US);
      gint64 now = g_get_monotonic_time ();
      observe (now);
      last = now;
    }
  g_mutex_unlock (&lock);
  return NULL;
}

void
ks_away_watch_begin (void)
{
  g_mutex_lock (&life_lock);
  if (users++ == 0)
    {
      g_mutex_lock (&lock);
      quit = FALSE;
      running = TRUE;
      last = g_get_monotonic_time ();
      g_mutex_unlock (&lock);
      thread = g_thread_new ("ks-away", tick, NULL);
    }
  g_mutex_unlock (&life_lock);
}

void
ks_away_watch_end (void)
{
  g_mutex_lock (&life_lock);
  if (users > 0 && --users == 0)
    {
      g_mutex_lock (&lock);
      quit = TRUE;
      running = FALSE;
      g_cond_signal (&wake);
      g_mutex_unlock (&lock);
      g_thread_join (thread);
      thread = NULL;
    }
  g_mutex_unlock (&life_lock);
}

gint64
ks_away_total (void)
{
  g_mutex_lock (&lock);
  observe (g_get_monotonic_time ());
  gint64 t = total;
  g_mutex_unlock (&lock);
  return t;
}

gboolean
ks_away_last (gint64 *gap_us, gint64 *at_us)
{
  g_mutex_lock (&lock);
  observe (g_get_monotonic_time ());
  *gap_us = gap;
  *at_us = at;
  g_mutex_unlock (&lock);
  return *at_us != 0;
}

void
ks_away_told (gint64 when)
{
  g_mutex_lock (&lock);
  if (when == at)
    told = TRUE;
  g_mutex_unlock (&lock);
}

void
ks_away_explain (double timeout_s, GError **error)
{
  if (error == NULL || *error == NULL
      || !(g_error_matches (*error, KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST)
           || g_error_matches (*error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT)
           || g_error_matches (*error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED)))
    return;
  gboolean said = strstr ((*error)->message, KS_AWAY_SAID) != NULL;
  g_mutex_lock (&lock);
  gint64 now = g_get_monotonic_time ();
  observe (now);
  gint64 g = gap;
  /* away longer than the timeout, and lately: within the time its peers take to give up
   * and this process to find it out */
  gboolean say = !told && !said && g > timeout_s * G_USEC_PER_SEC
                 && now - at < (3 * timeout_s + 10) * G_USEC_PER_SEC;
  told |= say || said;
  g_mutex_unlock (&lock);
  if (say)
    g_prefix_error (error, "this process was stopped or starved for %.1f s, longer than "
                    "[comm] timeout = %g s, so its peers gave up on it; what it found when "
                    "it went on: ", g / 1e6, timeout_s);
}
