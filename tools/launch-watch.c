/* How a launched job's processes end: a failure stops the others (SIGTERM, then SIGKILL),
 * the first cause is named, a process stopped too long fails the job, and Ctrl-C or
 * SIGTERM is passed on for the workers to save and stop (launch-job.h). */
#include "launch-job.h"

#include <glib-unix.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

void
launch_maybe_quit (Launch *l)
{
  if (l->running == 0 && l->reading == 0)
    g_main_loop_quit (l->loop);
}

static void
kill_all (Launch *l, int sig)
{
  for (int r = 0; r < l->n; r++)
    if (!l->workers[r].exited)
      {
        g_subprocess_send_signal (l->workers[r].process, sig);
        if (sig != SIGKILL) /* a stopped process acts on it only once woken */
          g_subprocess_send_signal (l->workers[r].process, SIGCONT);
      }
}

static gboolean
on_grace_over (gpointer data)
{
  Launch *l = data;
  l->grace = 0;
  l->killing = TRUE;
  kill_all (l, SIGKILL);
  return G_SOURCE_REMOVE;
}

/* Stops every worker still running: SIGTERM now, SIGKILL if it lingers. */
void
launch_stop_all (Launch *l)
{
  if (l->peer_wait != 0)
    g_source_remove (l->peer_wait);
  l->peer_wait = 0;
  if (l->stopping)
    return;
  l->stopping = TRUE;
  kill_all (l, SIGTERM);
  l->grace = g_timeout_add (STOP_GRACE_MS, on_grace_over, l);
}

/* Whether the process is stopped now (state T or t in /proc/PID/stat). */
static gboolean
is_stopped (Worker *w)
{
  const char *pid = g_subprocess_get_identifier (w->process);
  g_autofree char *path = g_strdup_printf ("/proc/%s/stat", pid != NULL ? pid : "0");
  g_autofree char *stat = NULL;
  const char *paren;

  if (!g_file_get_contents (path, &stat, NULL, NULL) || (paren = strrchr (stat, ')')) == NULL
      || paren[1] != ' ')
    return FALSE;
  return paren[2] == 'T' || paren[2] == 't';
}

static void
fail_stopped (Launch *l, Worker *w, Worker *gave_up)
{
  gint64 for_us = g_get_monotonic_time () - w->stopped_since;
  l->failed = w;
  l->failed_stopped = TRUE;
  g_free (l->failure);
  l->failure = g_strdup_printf (
      "was stopped (SIGSTOP, Ctrl-Z or a debugger) %.0f s ago and did not go on%s%s%s",
      for_us / 1e6, gave_up != NULL ? ": " : "", gave_up != NULL ? gave_up->name : "",
      gave_up != NULL ? " gave up waiting for it" : "; [comm] timeout is its limit");
  launch_stop_all (l);
}

/* Every WATCH_MS: notes which processes are stopped; one stopped for [comm] timeout
 * fails the job (the others would wait for it that long, then longer to agree on it). */
gboolean
launch_on_watch (gpointer data)
{
  Launch *l = data;
  gint64 now = g_get_monotonic_time ();

  for (int r = 0; r < l->n; r++)
    {
      Worker *w = &l->workers[r];
      if (w->exited || w->process == NULL)
        continue;
      if (!is_stopped (w))
        w->stopped_since = 0;
      else if (w->stopped_since == 0)
        w->stopped_since = now;
      else if (now - w->stopped_since >= (gint64) (l->timeout_s * G_USEC_PER_SEC)
               && l->failed == NULL && !l->stopping)
        fail_stopped (l, w, NULL);
    }
  return G_SOURCE_CONTINUE;
}

/* The process stopped for half a timeout or more, if one is: the cause when another
 * fails by timing out (one stopped just now did not make anyone time out). */
static Worker *
stopped_worker (Launch *l)
{
  gint64 now = g_get_monotonic_time ();
  for (int r = 0; r < l->n; r++)
    if (!l->workers[r].exited && l->workers[r].process != NULL && is_stopped (&l->workers[r])
        && l->workers[r].stopped_since != 0
        && now - l->workers[r].stopped_since >= (gint64) (l->timeout_s * G_USEC_PER_SEC / 2))
      return &l->workers[r];
  return NULL;
}

static void stop_for_signal (Launch *l, int sig, const char *who);

/* Every process has ended, and something they started still holds an output pipe open
 * (`sleep 60 &` in a script): its output is not waited for any longer. */
static gboolean
on_drain_over (gpointer data)
{
  Launch *l = data;
  l->drain = 0;
  g_printerr ("ksdist: launch: every process has ended, but something they started keeps "
              "their output open; not reading it any longer\n");
  g_cancellable_cancel (l->reads);
  return G_SOURCE_REMOVE;
}

/* Whether the process was killed by a signal the launcher did not send. */
static gboolean
killed_by_other (Launch *l, Worker *w)
{
  int sig;
  if (!w->exited || !g_subprocess_get_if_signaled (w->process))
    return FALSE;
  sig = g_subprocess_get_term_sig (w->process);
  return !(l->stopping && sig == SIGTERM) && !(l->killing && sig == SIGKILL);
}

/* Whether it exited (not killed) with `status`. */
static gboolean
exited_with (Worker *w, int status)
{
  return w->exited && g_subprocess_get_if_exited (w->process)
         && g_subprocess_get_exit_status (w->process) == status;
}

/* How likely a failed process is the first cause: killed by a signal the launcher did
 * not send (3), failed by itself (2), or only reporting a peer that failed first (1:
 * `ksdist train` exits KS_EXIT_PEER then) */
static int
cause_rank (Launch *l, Worker *w)
{
  return killed_by_other (l, w) ? 3 : exited_with (w, KS_EXIT_PEER) ? 1 : 2;
}

/* Whether it ended as a stop signal asks (ksdist train exits 128 + SIGTERM or SIGINT). */
static gboolean
exited_by_stop_signal (Worker *w)
{
  return exited_with (w, 128 + SIGTERM) || exited_with (w, 128 + SIGINT);
}

/* Whether `w` failed by itself, not as a report of another's failure or of a stop. Before
 * the others were told to stop, any failure is its own (no signal asked for it); after,
 * only when a signal the launcher did not send killed it (it died at about the same
 * time), or when it failed on its own while the one named so far only reported a peer's
 * failure (the two reaped in either order: a rank out of disk space and the rank that
 * lost it). */
static gboolean
failed_by_itself (Launch *l, Worker *w)
{
  if (g_subprocess_get_successful (w->process) || l->signal_received)
    return FALSE;
  if (!l->stopping || killed_by_other (l, w))
    return TRUE;
  return l->failed != NULL && cause_rank (l, l->failed) == 1
         && g_subprocess_get_if_exited (w->process) && !exited_with (w, KS_EXIT_PEER)
         && !exited_by_stop_signal (w);
}

/* Whether `w` is a better first cause than the one named so far: a process killed by a
 * signal comes before one that exited non-zero, which may only have reported it (the
 * two can be reaped in either order); otherwise the one reaped first stays. */
static gboolean
blame_instead (Launch *l, Worker *w)
{
  if (l->failed == NULL)
    return TRUE;
  return !l->failed_stopped && cause_rank (l, w) > cause_rank (l, l->failed);
}

static gboolean
on_peer_wait_over (gpointer data)
{
  Launch *l = data;
  l->peer_wait = 0;
  launch_stop_all (l);
  return G_SOURCE_REMOVE;
}

/* The others are stopped: at once, unless `w` only reported a peer's failure on this
 * node; then that peer, failing too, is left PEER_WAIT_MS to end by itself and be named
 * (stopped at once, it died by the SIGTERM, a cause no more, and the report was named). */
static void
stop_after (Launch *l, Worker *w)
{
  if (cause_rank (l, w) == 1 && l->rv.nnodes == 1 && l->running > 0)
    {
      if (l->peer_wait == 0)
        l->peer_wait = g_timeout_add (PEER_WAIT_MS, on_peer_wait_over, l);
    }
  else
    launch_stop_all (l);
}

void
launch_on_worker_exit (GObject *source, GAsyncResult *result, gpointer data)
{
  Worker *w = data;
  Launch *l = w->launch;
  Worker *stopped;

  g_subprocess_wait_finish (w->process, result, NULL);
  w->exited = TRUE;
  l->running--;
  w->failed_alone = failed_by_itself (l, w);
  if (w->failed_alone && l->failed == NULL && !l->stopping
      && (stopped = stopped_worker (l)) != NULL)
    fail_stopped (l, stopped, w);
  else if (l->failed == NULL && !l->stopping && exited_by_stop_signal (w))
    {
      /* a worker a signal stopped (the scheduler's, to it alone): no failure; the others
       * stop at the same step */
      l->worker_signal = g_subprocess_get_exit_status (w->process) - 128;
      stop_for_signal (l, l->worker_signal, w->name);
    }
  else if (w->failed_alone && blame_instead (l, w))
    {
      l->failed = w;
      g_free (l->failure);
      if (g_subprocess_get_if_signaled (w->process))
        l->failure = g_strdup_printf ("was killed by signal %d (%s)",
                                      g_subprocess_get_term_sig (w->process),
                                      g_strsignal (g_subprocess_get_term_sig (w->process)));
      else
        l->failure = g_strdup_printf ("exited with status %d",
                                      g_subprocess_get_exit_status (w->process));
      stop_after (l, w);
    }
  if (l->running == 0 && l->reading > 0 && l->drain == 0)
    l->drain = g_timeout_add (DRAIN_MS, on_drain_over, l);
  launch_maybe_quit (l);
}

/* Ctrl-C or SIGTERM: passed on, the workers save at the next step and stop (SIGKILL after
 * --grace-period); a second one kills them at once. */
static void
on_signal (Launch *l, int sig)
{
  const char *name = sig == SIGTERM ? "SIGTERM" : "SIGINT";

  if (l->signal_received != 0)
    {
      g_printerr ("ksdist: launch: %s, a second signal: killing the workers now\n", name);
      kill_all (l, SIGKILL);
      return;
    }
  l->signal_received = sig;
  if (!l->stopping) /* else a failure or a worker's signal is stopping them already */
    stop_for_signal (l, sig, NULL);
}

/* Whether every worker here said its first step began (KS_LAUNCH_STEP_FD): only then
 * does a signal leave a checkpoint (one still starting up ends at once, and the others
 * cannot agree on a step without it). */
static gboolean
all_stepped (Launch *l)
{
  char byte;
  for (int r = 0; r < l->n; r++)
    {
      Worker *w = &l->workers[r];
      if (!w->stepped && w->step_fd >= 0 && read (w->step_fd, &byte, 1) == 1)
        w->stepped = TRUE;
      if (w->step_fd >= 0 && !w->stepped)
        return FALSE;
    }
  return TRUE;
}

/* The signal passed on (`who` got it alone, or NULL: the launcher): the workers save at
 * the next step and stop, or, before their first step, stop at once with nothing saved. */
static void
stop_for_signal (Launch *l, int sig, const char *who)
{
  const char *name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
  g_autofree char *kill_note = g_strdup_printf ("a second signal kills them now; they are "
                                                "killed after --grace-period %g s", l->grace_s);
  g_autofree char *subject = who != NULL ? g_strdup_printf ("%s was stopped by %s", who, name)
                                         : g_strdup (name);

  l->stopping = TRUE;
  if (l->program)
    g_printerr ("ksdist: launch: %s: passed on to the processes (%s)\n", subject, kill_note);
  else if (all_stepped (l))
    g_printerr ("ksdist: launch: %s: the workers save a checkpoint at the next step and stop "
                "(%s)\n", subject, kill_note);
  else
    g_printerr ("ksdist: launch: %s%s before the first step: nothing was trained and nothing "
                "saved\n", who != NULL ? "" : "stopped by ", subject);
  kill_all (l, sig);
  l->grace = g_timeout_add ((guint) (l->grace_s * 1000), on_grace_over, l);
}

gboolean
launch_on_sigint (gpointer data)
{
  on_signal (data, SIGINT);
  return G_SOURCE_CONTINUE;
}

gboolean
launch_on_sigterm (gpointer data)
{
  on_signal (data, SIGTERM);
  return G_SOURCE_CONTINUE;
}

