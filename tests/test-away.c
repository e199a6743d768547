/* The process's watch of its own gaps (away.h), in a child process that stops itself
 * (SIGSTOP) while it holds the watch and is continued by this one: the time it was
 * stopped is found by ks_away_total and ks_away_last, and ks_away_explain says it before
 * a comm error once (a lost peer, a timeout, a failed exchange: whichever collective met
 * it): not for a gap shorter than the timeout, not for other errors, not again, not after
 * ks_away_told, and not into an error that says it already (a PS client's: under load
 * the async sending thread's error said it and told the watch, and the main thread's
 * gloo error in the stop agreement went out without it). */
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define FIRST_US (1500 * 1000) /* how long the child is stopped, the first time */
#define SECOND_US (2500 * 1000) /* the second, longer: it replaces the first as kept */
#define THIRD_US (3500 * 1000)  /* and the third the second */

#define CHECK(cond, ...)                                                                  \
  do                                                                                      \
    {                                                                                     \
      if (!(cond))                                                                        \
        {                                                                                 \
          fprintf (stderr, "child: line %d: %s: ", __LINE__, #cond);                      \
          fprintf (stderr, __VA_ARGS__);                                                  \
          fprintf (stderr, "\n");                                                         \
          _exit (1);                                                                      \
        }                                                                                 \
    }                                                                                     \
  while (0)

/* A comm error of `code` and `message` after ks_away_explain with `timeout_s`: its
 * message. */
static char *
explained_message (GQuark domain, int code, const char *message, double timeout_s)
{
  GError *e = g_error_new_literal (domain, code, message);
  ks_away_explain (timeout_s, &e);
  char *m = g_strdup (e->message);
  g_error_free (e);
  return m;
}

static char *
explained (GQuark domain, int code, double timeout_s)
{
  return explained_message (domain, code, "a peer did not answer", timeout_s);
}

static gboolean
said_away (const char *message)
{
  return g_str_has_prefix (message, "this process was stopped or starved for ");
}

static void
child (void)
{
  gint64 gap, at;

  ks_away_watch_begin ();
  g_usleep (500000);
  CHECK (ks_away_total () == 0, "away %" G_GINT64_FORMAT " us while it ran", ks_away_total ());
  CHECK (!ks_away_last (&gap, &at), "a gap of %" G_GINT64_FORMAT " us while it ran", gap);
  g_autofree char *none = explained (KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT, 1.0);
  CHECK (!said_away (none), "%s", none);

  raise (SIGSTOP);
  gint64 total = ks_away_total ();
  /* the tick due during the stop is not counted (200 ms); the parent's sleep may run long */
  CHECK (total > FIRST_US - 400000 && total < FIRST_US + 3000000, "away %" G_GINT64_FORMAT
         " us, stopped about %d", total, FIRST_US);
  CHECK (ks_away_last (&gap, &at) && gap == total, "kept %" G_GINT64_FORMAT, gap);
  CHECK (g_get_monotonic_time () - at < 1000000, "it ended %" G_GINT64_FORMAT " us ago",
         g_get_monotonic_time () - at);
  g_autofree char *other = explained (KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE, 1.0);
  CHECK (!said_away (other), "not a comm error: %s", other);
  g_autofree char *shorter = explained (KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT, 10.0);
  CHECK (!said_away (shorter), "a gap shorter than the timeout: %s", shorter);
  g_autofree char *first = explained (KS_COMM_ERROR, KS_COMM_ERROR_FAILED, 1.0);
  CHECK (said_away (first) && strstr (first, "longer than [comm] timeout = 1 s") != NULL
         && g_str_has_suffix (first, "what it found when it went on: a peer did not answer"),
         "%s", first);
  g_autofree char *again = explained (KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST, 1.0);
  CHECK (!said_away (again), "said twice: %s", again);

  raise (SIGSTOP);
  gint64 second = ks_away_total () - total, at2;
  CHECK (second > SECOND_US - 400000, "away %" G_GINT64_FORMAT " us the second time", second);
  CHECK (ks_away_last (&gap, &at2) && gap == second && at2 > at, "kept %" G_GINT64_FORMAT, gap);
  /* an error that says it already goes out as it is, once */
  const char *own = "worker 1: this worker was stopped or starved for 2.5 s, longer than ...";
  g_autofree char *kept = explained_message (KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT, own, 1.0);
  CHECK (strcmp (kept, own) == 0, "an error that said it became: %s", kept);
  g_autofree char *after = explained (KS_COMM_ERROR, KS_COMM_ERROR_PEER_LOST, 1.0);
  CHECK (!said_away (after), "said after an error that said it: %s", after);

  raise (SIGSTOP);
  gint64 at3;
  CHECK (ks_away_last (&gap, &at3) && at3 > at2, "a third gap kept: %" G_GINT64_FORMAT, gap);
  ks_away_told (at3); /* as a plugin whose printed message said it */
  g_autofree char *told = explained (KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT, 1.0);
  CHECK (!said_away (told), "said after ks_away_told: %s", told);
  ks_away_watch_end ();
  _exit (0);
}

/* Waits until the child is stopped (TRUE) or has exited (FALSE, with its status). */
static gboolean
wait_stopped (pid_t pid, int *status)
{
  g_assert_cmpint (waitpid (pid, status, WUNTRACED), ==, pid);
  return WIFSTOPPED (*status);
}

static void
test_stopped_child (void)
{
  int status;
  pid_t pid = fork ();

  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    child ();
  g_assert_true (wait_stopped (pid, &status));
  g_usleep (FIRST_US);
  kill (pid, SIGCONT);
  g_assert_true (wait_stopped (pid, &status));
  g_usleep (SECOND_US);
  kill (pid, SIGCONT);
  g_assert_true (wait_stopped (pid, &status));
  g_usleep (THIRD_US);
  kill (pid, SIGCONT);
  g_assert_false (wait_stopped (pid, &status));
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0); /* its checks passed (else it says which) */
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/away/stopped-child", test_stopped_child);
  return g_test_run ();
}
