/* ksdist launch when a process dies, with real processes: --max-restarts N restarts the
 * whole job from its newest checkpoint and ends where an uninterrupted run does; a
 * failure that repeats stops after N restarts; --max-restarts without a checkpoint_dir is
 * refused before anything starts; output held open by a process's own children is not
 * waited for; a stopped worker dies with a SIGKILLed launcher; and
 * the launcher names the rank that died first, not one that only reported it. */
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <glib/gstdio.h>
#include <unistd.h>

static const char *const plugins[] = { "openblas", "optim", "store", "roles", "gloo", "shm",
                                       "collective", NULL };

#define ARGS(...) ((const char *const[]) { __VA_ARGS__, NULL })
#define WAIT_S 120 /* generous: the machine may be busy */

/* The pid of the launcher's child of rank `rank`, or 0. */
static GPid
find_worker (GPid launcher, int rank)
{
  g_autofree char *want = g_strdup_printf ("RANK=%d", rank);
  return ks_test_find_child (launcher, want);
}

/* Waits up to WAIT_S for the launcher's worker `rank`, once `file` holds `text`. */
static GPid
wait_worker (GPid launcher, int rank, const char *file, const char *text)
{
  for (int i = 0; i < WAIT_S * 20; i++)
    {
      g_autofree char *got = NULL;
      GPid pid;
      if (g_file_get_contents (file, &got, NULL, NULL) && strstr (got, text) != NULL
          && (pid = find_worker (launcher, rank)) > 0)
        return pid;
      g_usleep (50000);
    }
  g_error ("worker %d of launcher %d did not come (no '%s' in %s)", rank, (int) launcher, text,
           file);
  return 0;
}

/* Waits up to WAIT_S for `pid` to reach state `want`; its state then. */
static char
wait_state (GPid pid, char want)
{
  for (int i = 0; i < WAIT_S * 20 && ks_test_process_state (pid) != want; i++)
    g_usleep (50000);
  return ks_test_process_state (pid);
}

/* The launch arguments of a 1000-step collective job of examples/default.ini that saves
 * every 50 steps into `ckpt`, with `more` after. */
static GPtrArray *
job_args (const char *ckpt, const char *const *more)
{
  GPtrArray *args = g_ptr_array_new_with_free_func (g_free);
  const char *const sets[] = { "train.steps=1000", "train.checkpoint_every=50", "train.keep=2",
                               "train.log_every=500", "openblas.threads=1" };
  g_ptr_array_add (args, g_strdup ("launch"));
  g_ptr_array_add (args, g_strdup ("-n"));
  g_ptr_array_add (args, g_strdup ("2"));
  g_ptr_array_add (args,
                   g_build_filename (g_getenv ("KS_SRCDIR"), "examples", "default.ini", NULL));
  for (guint i = 0; i < G_N_ELEMENTS (sets); i++)
    {
      g_ptr_array_add (args, g_strdup ("--set"));
      g_ptr_array_add (args, g_strdup (sets[i]));
    }
  g_ptr_array_add (args, g_strdup ("--set"));
  g_ptr_array_add (args, g_strdup_printf ("train.checkpoint_dir=%s", ckpt));
  for (int i = 0; more != NULL && more[i] != NULL; i++)
    g_ptr_array_add (args, g_strdup (more[i]));
  g_ptr_array_add (args, NULL);
  return args;
}

/* The tensor data of DIR/checkpoint-1000/model.safetensors (after its header, which
 * differs by its save_id). */
static float *
final_floats (const char *ckpt, gsize *n)
{
  g_autofree char *file = g_build_filename (ckpt, "checkpoint-1000", "model.safetensors", NULL);
  return ks_test_safetensors_floats (file, n);
}

/* Worker 1 killed (SIGKILL) mid-run of a job with --max-restarts 2: the launcher names
 * it, restarts the job from the newest checkpoint, and the job ends with exit 0 and the
 * tensors of an uninterrupted run, bit for bit (collective, sync: deterministic). */
static void
test_restart (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *whole = g_build_filename (dir, "whole", NULL);
  g_autofree char *ckpt = g_build_filename (dir, "restarted", NULL);
  g_autofree char *logs = g_build_filename (dir, "logs", NULL);
  g_autofree char *log0 = g_build_filename (logs, "workerlog.0", NULL);
  g_autofree char *fifty = g_build_filename (ckpt, "checkpoint-50", NULL);
  g_autofree char *hundred = g_build_filename (ckpt, "checkpoint-100", NULL);
  g_autoptr (GPtrArray) plain = job_args (whole, NULL);
  g_autoptr (GPtrArray) args
      = job_args (ckpt, ARGS ("--max-restarts", "2", "--log-dir", logs));
  g_autofree char *out = NULL, *err = NULL, *log = NULL;
  int status, err_fd;

  status = ks_test_run_ksdist ((const char *const *) plain->pdata, NULL, plugins, &out, &err);
  g_assert_cmpint (status, ==, 0);

  GPid launcher = ks_test_spawn_ksdist ((const char *const *) args->pdata, NULL, plugins,
                                        NULL, &err_fd);
  GPid worker = 0;
  for (int i = 0; i < WAIT_S * 500 && (worker = find_worker (launcher, 1)) == 0; i++)
    g_usleep (2000);
  g_assert_cmpint (worker, >, 0);
  /* worker 1 runs in windows of 2 ms until a checkpoint is seen, so the whole job (about
   * 0.2 s of steps) cannot end unseen however busy the machine: CI-like load once let it
   * end before this test looked, and there was no worker left to kill */
  g_assert_cmpint (kill (worker, SIGSTOP), ==, 0);
  for (int i = 0; i < WAIT_S * 50 && !g_file_test (fifty, G_FILE_TEST_IS_DIR)
                  && !g_file_test (hundred, G_FILE_TEST_IS_DIR); i++)
    {
      kill (worker, SIGCONT);
      g_usleep (2000);
      kill (worker, SIGSTOP);
      g_usleep (18000);
    }
  g_assert_cmpint (kill (worker, SIGKILL), ==, 0);
  g_free (err);
  err = ks_test_read_all (err_fd);
  waitpid (launcher, &status, 0);
  g_test_message ("%s", err);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  g_assert_nonnull (strstr (err, "ksdist: launch: worker 1 was killed by signal 9"));
  g_assert_nonnull (strstr (err, "; restart 1 of 2 from checkpoint-"));
  g_assert_null (strstr (err, "restart 2 of 2"));
  g_assert_true (g_file_get_contents (log0, &log, NULL, NULL));
  g_assert_nonnull (strstr (log, "resumed from"));

  gsize na, nb;
  g_autofree float *a = final_floats (whole, &na), *b = final_floats (ckpt, &nb);
  g_assert_cmpuint (na, ==, nb);
  g_assert_cmpuint (na, >, 0);
  g_assert_cmpint (memcmp (a, b, na * sizeof *a), ==, 0);
  ks_test_rmtree (dir);
}

/* A failure that comes back at every start: two restarts, then the launcher gives up,
 * exit 1, saying so; each start knows its number (torchrun's variable). */
static void
test_restarts_spent (void)
{
  g_autofree char *out = NULL, *err = NULL;
  int status = ks_test_run_ksdist (
      ARGS ("launch", "-n", "2", "--max-restarts", "2", "--", "sh", "-c",
            "echo start $TORCHELASTIC_RESTART_COUNT of $TORCHELASTIC_MAX_RESTARTS; "
            "if [ $RANK = 1 ]; then exit 4; fi; exec sleep 300"),
      NULL, plugins, &out, &err);
  g_test_message ("%s%s", out, err);
  g_assert_cmpint (status, ==, 1);
  g_assert_nonnull (strstr (err, "worker 1 exited with status 4; the others were stopped; "
                                 "restart 1 of 2 of the same command "
                                 "(TORCHELASTIC_RESTART_COUNT=1)"));
  g_assert_nonnull (strstr (err, "restart 2 of 2"));
  g_assert_null (strstr (err, "restart 3"));
  g_assert_nonnull (strstr (err, "worker 1 exited with status 4; the others were stopped (no "
                                 "restart left of --max-restarts 2)"));
  g_assert_nonnull (strstr (out, "[rank 0] start 0 of 2"));
  g_assert_nonnull (strstr (out, "[rank 1] start 2 of 2"));
}

/* A process that leaves something of its own holding its output open (`sleep 60 &`):
 * the launcher does not wait for that output for ever, so the job ends (and a restart
 * could happen). */
static void
test_output_held (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *pids = g_build_filename (dir, "pids", NULL);
  g_autofree char *script = g_strdup_printf ("sleep 60 & echo $! >> %s; exit 4", pids);
  g_autofree char *out = NULL, *err = NULL, *text = NULL;
  gint64 start = g_get_monotonic_time ();
  int status = ks_test_run_ksdist (ARGS ("launch", "-n", "2", "--max-restarts", "1", "--", "sh",
                                         "-c", script),
                                   NULL, plugins, &out, &err);
  double took = (g_get_monotonic_time () - start) / 1e6;
  g_auto (GStrv) lines = NULL;

  g_test_message ("%s\nended in %.1f s", err, took);
  g_assert_true (g_file_get_contents (pids, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  for (int i = 0; lines[i] != NULL; i++)
    if (atoi (lines[i]) > 0)
      kill (atoi (lines[i]), SIGKILL);
  g_assert_cmpint (status, ==, 1);
  g_assert_nonnull (strstr (err, "restart 1 of 1"));
  g_assert_nonnull (strstr (err, "keeps their output open"));
  g_assert_nonnull (strstr (err, "(no restart left of --max-restarts 1)"));
  g_assert_cmpfloat (took, <, 55); /* not the sleep's 60 s (DRAIN_MS is 5 s a start) */
  ks_test_rmtree (dir);
}

/* --max-restarts needs a checkpoint_dir to restart from: refused with exit
 * 2 before any process starts. */
static void
test_refused (void)
{
  g_autofree char *out = NULL, *err = NULL;
  int status = ks_test_run_ksdist (ARGS ("launch", "-n", "2", "--max-restarts", "1"), NULL,
                                   plugins, &out, &err);
  g_assert_cmpint (status, ==, 2);
  g_assert_cmpstr (out, ==, "");
  g_assert_nonnull (strstr (err, "--max-restarts 1 needs [train] checkpoint_dir"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  status = ks_test_run_ksdist (ARGS ("launch", "-n", "2", "--max-restarts", "-2"), NULL,
                               plugins, &out, &err);
  g_assert_cmpint (status, ==, 2);
  g_assert_nonnull (strstr (err, "--max-restarts -2: give 0"));
  /* several nodes restart together now: tests/test-cluster.sh */
}

/* A worker stopped with SIGSTOP when the launcher is killed with SIGKILL: every worker
 * is gone soon after (a parent-death SIGTERM would stay pending in the stopped one). */
static void
test_stopped_orphan (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *logs = g_build_filename (dir, "logs", NULL);
  g_autofree char *log1 = g_build_filename (logs, "workerlog.1", NULL);
  GPid launcher = ks_test_spawn_ksdist (ARGS ("launch", "-n", "2", "--log-dir", logs, "--set",
                                              "train.steps=100000000", "--set",
                                              "openblas.threads=1"),
                                        NULL, plugins, NULL, NULL);
  GPid w1 = wait_worker (launcher, 1, log1, "worker 1 of 2"), w0 = find_worker (launcher, 0);
  gboolean alive = TRUE;

  g_assert_cmpint (w0, >, 0);
  g_assert_cmpint (kill (w1, SIGSTOP), ==, 0);
  for (int i = 0; i < 200 && ks_test_process_state (w1) != 'T'; i++)
    g_usleep (10000);
  g_assert_cmpint (ks_test_process_state (w1), ==, 'T');
  g_assert_cmpint (kill (launcher, SIGKILL), ==, 0);
  waitpid (launcher, NULL, 0);
  /* an ended worker is a zombie of init until reaped, or gone */
  for (int i = 0; i < 30 * 20 && alive; i++)
    {
      char s0 = ks_test_process_state (w0), s1 = ks_test_process_state (w1);
      alive = (s0 != 0 && s0 != 'Z') || (s1 != 0 && s1 != 'Z');
      if (alive)
        g_usleep (50000);
    }
  if (alive) /* do not leave it behind */
    kill (w1, SIGKILL), kill (w0, SIGKILL);
  g_assert_false (alive);
  ks_test_rmtree (dir);
}

/* Two processes end while the launcher is stopped, so that both are reaped in one go:
 * the victim first (killed with SIGKILL, or exiting 1 by itself), then the reporter,
 * exiting as if it reported the victim's end (1 after a signal, KS_EXIT_PEER 3 after an
 * exit). The launcher must name the victim, in both places (worker 0 or 1), so that
 * neither reaping order passes by luck. */
static void
blame_one (int victim, gboolean by_signal)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *go = g_build_filename (dir, "go", NULL);
  g_autofree char *die = g_build_filename (dir, "die", NULL);
  g_autofree char *script = g_strdup_printf (
      "echo ready; if [ $RANK = %d ]; then while [ ! -e %s ]; do sleep 0.05; done; exit 1; fi; "
      "while [ ! -e %s ]; do sleep 0.05; done; exit %d",
      victim, die, go, by_signal ? 1 : 3);
  g_autofree char *name = g_strdup_printf ("workerlog.%d", 1 - victim);
  g_autofree char *ready = g_build_filename (dir, "logs", name, NULL);
  g_autofree char *logs = g_build_filename (dir, "logs", NULL);
  int err_fd, status;
  GPid launcher = ks_test_spawn_ksdist (ARGS ("launch", "-n", "2", "--log-dir", logs, "--", "sh",
                                              "-c", script),
                                        NULL, plugins, NULL, &err_fd);
  GPid reporter = wait_worker (launcher, 1 - victim, ready, "ready");
  GPid dead = find_worker (launcher, victim);

  g_assert_cmpint (dead, >, 0);
  g_assert_cmpint (kill (launcher, SIGSTOP), ==, 0);
  /* the stop takes effect when the launcher next runs: wait for it, or a loaded machine
   * lets it reap the victim before it stops */
  wait_state (launcher, 'T');
  char stopped = ks_test_process_state (launcher);
  if (by_signal)
    g_assert_cmpint (kill (dead, SIGKILL), ==, 0);
  else
    g_assert_true (g_file_set_contents (die, "", 0, NULL));
  char dead_state = wait_state (dead, 'Z');
  g_assert_true (g_file_set_contents (go, "", 0, NULL));
  char reporter_state = wait_state (reporter, 'Z');
  /* assert only once the launcher runs again, so that a failure leaves nothing behind */
  g_assert_cmpint (kill (launcher, SIGCONT), ==, 0);
  if (stopped != 'T' || dead_state != 'Z' || reporter_state != 'Z')
    kill (launcher, SIGKILL); /* and its workers with it (their parent-death signal) */
  g_assert_cmpint (stopped, ==, 'T');
  g_assert_cmpint (dead_state, ==, 'Z');
  g_assert_cmpint (reporter_state, ==, 'Z');
  g_autofree char *err = ks_test_read_all (err_fd);
  waitpid (launcher, &status, 0);
  g_test_message ("%s", err);
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 1);
  g_autofree char *want = by_signal
                              ? g_strdup_printf ("ksdist: launch: worker %d was killed by "
                                                 "signal 9", victim)
                              : g_strdup_printf ("ksdist: launch: worker %d exited with "
                                                 "status 1;", victim);
  g_assert_nonnull (strstr (err, want));
  ks_test_rmtree (dir);
}

static void
test_blame (void)
{
  blame_one (1, TRUE);
  blame_one (0, TRUE);
  blame_one (1, FALSE);
  blame_one (0, FALSE);
}

/* The real thing, a few times: worker 1 of a training job killed with SIGKILL is the one
 * named, though worker 0 fails too when it finds it gone. */
static void
test_blame_training (void)
{
  for (int round = 0; round < 3; round++)
    {
      g_autofree char *dir = ks_test_tmpdir ();
      g_autofree char *logs = g_build_filename (dir, "logs", NULL);
      g_autofree char *log1 = g_build_filename (logs, "workerlog.1", NULL);
      int err_fd, status;
      GPid launcher = ks_test_spawn_ksdist (
          ARGS ("launch", "-n", "2", "--log-dir", logs, "--set", "train.steps=100000000",
                "--set", "openblas.threads=1", "--set", "comm.timeout=20"),
          NULL, plugins, NULL, &err_fd);
      GPid w1 = wait_worker (launcher, 1, log1, "worker 1 of 2");
      g_usleep (200000);
      g_assert_cmpint (kill (w1, SIGKILL), ==, 0);
      g_autofree char *err = ks_test_read_all (err_fd);
      waitpid (launcher, &status, 0);
      g_test_message ("round %d: %s", round, err);
      g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 1);
      g_assert_nonnull (strstr (err, "ksdist: launch: worker 1 was killed by signal 9"));
      ks_test_rmtree (dir);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (!ks_test_have_openblas () || !ks_test_have_gloo ())
    return g_test_run ();
  g_test_add_func ("/launch-restart/restart", test_restart);
  g_test_add_func ("/launch-restart/restarts-spent", test_restarts_spent);
  g_test_add_func ("/launch-restart/refused", test_refused);
  g_test_add_func ("/launch-restart/output-held", test_output_held);
  g_test_add_func ("/launch-restart/stopped-orphan", test_stopped_orphan);
  g_test_add_func ("/launch-restart/blame", test_blame);
  g_test_add_func ("/launch-restart/blame-training", test_blame_training);
  return g_test_run ();
}
