/* Parameter-server jobs (the transpiler plugin) whose processes fail, with real server
 * and worker processes over 127.0.0.1: a killed server, a killed worker (also in async
 * and GEO, found by heartbeats), a stopped worker or server that says so once continued,
 * and a job under ksdist launch that restarts on 3 servers after one was killed. */
#define _GNU_SOURCE /* memmem */
#include "ps-harness.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A process of a job that failed: by itself (1), or reporting a peer that failed first
 * (3, `ksdist train`'s KS_EXIT_PEER: a peer lost or silent past the timeout) */
static void
assert_failed (int status)
{
  if (status != 1 && status != 3)
    g_error ("exit status %d, want 1 or 3", status);
}

/* Processes started by the job would run long; each test ends them by a fault. */
#define LONG_RUN "train.steps=100000000", "train.log_every=100000000", "comm.timeout=3", \
                 "log.level=info", "openblas.threads=1"

/* A server killed mid-run: every worker ends within the timeout naming it and its endpoint;
 * the other server, left without workers, ends too. */
static void
test_killed_server (void)
{
  PsTestJob j = { 0 };
  if (!ps_test_have_transpiler ())
    return;
  ps_test_job_start (&j, 2, 2, ARGS ("strategy.mode=sync", LONG_RUN));
  g_assert_true (ps_test_job_wait_log (&j, 0, "training rings", 30));
  g_usleep (300000);
  g_subprocess_send_signal (j.proc[2 + 1], SIGKILL);
  double took = ps_test_job_wait (&j, 30);
  g_autofree char *endpoint = g_strdup_printf ("server 1 (127.0.0.1:%d) did not answer a push",
                                               j.ports[1]);
  /* the usual end: both workers wait on server 1, server 0 finds them silent. When
   * server 1 died between its replies of a step, one worker went on to the next step and
   * server 0 tells it the other sent no gradient for that step. */
  gboolean raced = FALSE;
  for (int w = 0; w < 2; w++)
    {
      g_autofree char *log = ps_test_read_log (&j, w);
      assert_failed (ps_test_job_status (&j, w));
      if (strstr (log, endpoint) == NULL)
        {
          g_assert_nonnull (strstr (log, "sent no gradient for step"));
          raced = TRUE;
        }
    }
  g_autofree char *server0 = ps_test_read_log (&j, 2);
  assert_failed (ps_test_job_status (&j, 2));
  g_assert_nonnull (strstr (server0, raced ? "sent no gradient for step" : "sent nothing for 3 s"));
  g_test_message ("the job ended %.1f s after the kill", took);
  g_assert_cmpfloat (took, <, 15);
  ps_test_job_free (&j);
}

/* A worker killed mid-run in sync mode: the servers give up on its step after the timeout
 * and tell the other worker, which ends naming it. */
static void
test_killed_worker (void)
{
  PsTestJob j = { 0 };
  if (!ps_test_have_transpiler ())
    return;
  /* mid-run: in sync mode worker 0 reaches step 4 only after worker 1 pushed step 3 (a
   * kill soon after worker 1's hello can come before its first push on a loaded machine,
   * and then the servers find both workers silent instead) */
  ps_test_job_start (&j, 2, 2,
                     ARGS ("strategy.mode=sync", "train.steps=100000000", "train.log_every=2",
                           "comm.timeout=3", "log.level=info", "openblas.threads=1"));
  g_assert_true (ps_test_job_wait_log (&j, 0, "step 4/", 60));
  g_subprocess_send_signal (j.proc[1], SIGKILL);
  ps_test_job_wait (&j, 30);
  g_autofree char *w0 = ps_test_read_log (&j, 0);
  g_test_message ("worker 0: %s", w0);
  assert_failed (ps_test_job_status (&j, 0));
  /* the servers tell it, or it finds worker 1 gone first itself, in the workers' own
   * allreduce of the loss or of whether to stop (the dead peer's socket is reset at once,
   * before the servers' timeout); either way worker 1 is named */
  g_assert_true (strstr (w0, "worker 1 sent no gradient for step") != NULL
                 || strstr (w0, "rank 1 did not reach") != NULL);
  for (int s = 0; s < 2; s++)
    {
      g_autofree char *log = ps_test_read_log (&j, 2 + s);
      assert_failed (ps_test_job_status (&j, 2 + s));
      /* "worker 1 sent no gradient", or (killed between its two pushes) "worker 0, 1 sent
       * nothing" from the server that never saw its step */
      g_assert_nonnull (strstr (log, "1 sent no"));
    }
  ps_test_job_free (&j);
}

/* The modes whose workers may compute long between two requests (GEO: k_steps local
 * steps); heartbeats tell the servers they are alive. */
static const char *const async_modes[] = { "strategy.mode=async", "strategy.mode=geo" };

/* The worker not killed or stopped ends too (3): the servers are gone, or (in the workers'
 * own allreduce of whether to stop) worker 1 is. */
static void
assert_lost_peer (PsTestJob *j, int w)
{
  g_autofree char *log = ps_test_read_log (j, w);
  g_test_message ("worker %d: %s", w, log);
  g_assert_cmpint (ps_test_job_status (j, w), ==, 3);
  g_assert_true (strstr (log, "not even an answer to a heartbeat") != NULL
                 || strstr (log, "did not answer a") != NULL
                 || strstr (log, "rank 1 did not reach") != NULL);
}

/* Servers and workers started by hand (no launcher to end the job), in half_async, async
 * and GEO: a worker killed mid-run is named by every server within the timeout (its heartbeats
 * stopped), and each server ends with 3; the other worker then finds the servers gone. */
static void
test_killed_worker_heartbeat (void)
{
  static const char *const modes[] = { "strategy.mode=half_async", "strategy.mode=async",
                                       "strategy.mode=geo" };
  if (!ps_test_have_transpiler ())
    return;
  for (guint m = 0; m < G_N_ELEMENTS (modes); m++)
    {
      PsTestJob j = { 0 };
      ps_test_job_start (&j, 2, 2, ARGS (modes[m], LONG_RUN));
      g_assert_true (ps_test_job_wait_log (&j, 1, "worker 1 of 2", 30)); /* it said hello */
      g_usleep (1000000);
      g_subprocess_send_signal (j.proc[1], SIGKILL);
      double took = ps_test_job_wait (&j, 30);
      g_test_message ("%s: the job ended %.1f s after the kill", modes[m], took);
      for (int s = 0; s < 2; s++)
        {
          g_autofree char *log = ps_test_read_log (&j, 2 + s);
          g_assert_cmpint (ps_test_job_status (&j, 2 + s), ==, 3);
          g_assert_nonnull (strstr (log, "worker 1 sent nothing for 3 s, not even a heartbeat"));
        }
      assert_lost_peer (&j, 0);
      /* the servers within the timeout, the other worker within one more */
      g_assert_cmpfloat (took, <, 12);
      ps_test_job_free (&j);
    }
}

/* A server killed while GEO workers compute locally (k_steps far beyond the run): each
 * worker notices within the timeout by its heartbeats, naming the server, and ends (3);
 * the other server then finds the workers silent. */
static void
test_killed_server_heartbeat (void)
{
  PsTestJob j = { 0 };
  if (!ps_test_have_transpiler ())
    return;
  ps_test_job_start (&j, 2, 2, ARGS ("strategy.mode=geo", "strategy.k_steps=100000000", LONG_RUN));
  for (int w = 0; w < 2; w++)
    g_assert_true (ps_test_job_wait_log (&j, w, "of 2 (transpiler mode", 30));
  g_usleep (1000000);
  g_subprocess_send_signal (j.proc[2 + 1], SIGKILL);
  double took = ps_test_job_wait (&j, 30);
  g_test_message ("the job ended %.1f s after the kill", took);
  g_autofree char *lost = g_strdup_printf ("server 1 (127.0.0.1:%d) sent nothing for 3 s, not "
                                           "even an answer to a heartbeat", j.ports[1]);
  int named = 0;
  for (int w = 0; w < 2; w++)
    {
      g_autofree char *log = ps_test_read_log (&j, w);
      g_test_message ("worker %d: %s", w, log);
      g_assert_cmpint (ps_test_job_status (&j, w), ==, 3);
      /* both find it within a beat of each other; the one a moment later may first find
       * the other worker gone, in the workers' own allreduce */
      if (strstr (log, lost) != NULL)
        named++;
      else
        g_assert_nonnull (strstr (log, "did not reach"));
    }
  g_assert_cmpint (named, >=, 1);
  g_autofree char *server0 = ps_test_read_log (&j, 2);
  g_assert_cmpint (ps_test_job_status (&j, 2), ==, 3);
  g_assert_nonnull (strstr (server0, "sent nothing for 3 s, not even a heartbeat"));
  g_assert_cmpfloat (took, <, 12);
  ps_test_job_free (&j);
}

/* A worker stopped (SIGSTOP) past the timeout: the servers end naming it; continued, it
 * says that it was the one away, not that the servers died. */
static void
test_stopped_worker (void)
{
  if (!ps_test_have_transpiler ())
    return;
  for (guint m = 0; m < G_N_ELEMENTS (async_modes); m++)
    {
      PsTestJob j = { 0 };
      ps_test_job_start (&j, 2, 2, ARGS (async_modes[m], LONG_RUN));
      g_assert_true (ps_test_job_wait_log (&j, 1, "worker 1 of 2", 30)); /* it said hello */
      g_usleep (1000000);
      g_subprocess_send_signal (j.proc[1], SIGSTOP);
      for (int s = 0; s < 2; s++)
        g_assert_true (ps_test_job_wait_log (&j, 2 + s, "worker 1 sent nothing", 15));
      g_usleep (1500000); /* stopped for more than the timeout, surely */
      g_subprocess_send_signal (j.proc[1], SIGCONT);
      ps_test_job_wait (&j, 30);
      g_autofree char *w1 = ps_test_read_log (&j, 1);
      g_test_message ("%s: worker 1: %s", async_modes[m], w1);
      g_assert_cmpint (ps_test_job_status (&j, 1), ==, 3);
      /* its PS client says it (heartbeats, calls), or, when the workers' own allreduce
       * found worker 0 gone first, the trainer does, before what it found */
      if (strstr (w1, "worker 1: this worker was stopped or starved for ") != NULL)
        g_assert_null (strstr (w1, "did not answer"));
      else
        g_assert_nonnull (strstr (w1, "ksdist: this process was stopped or starved for "));
      g_assert_nonnull (strstr (w1, "longer than [comm] timeout = 3 s"));
      for (int s = 0; s < 2; s++)
        g_assert_cmpint (ps_test_job_status (&j, 2 + s), ==, 3);
      assert_lost_peer (&j, 0);
      ps_test_job_free (&j);
    }
}

/* A server stopped (SIGSTOP) past the timeout in async mode: the workers end naming it;
 * continued, it says that it was the one away, and ends (3). */
static void
test_stopped_server (void)
{
  PsTestJob j = { 0 };
  if (!ps_test_have_transpiler ())
    return;
  ps_test_job_start (&j, 2, 2, ARGS ("strategy.mode=async", LONG_RUN));
  for (int w = 0; w < 2; w++)
    g_assert_true (ps_test_job_wait_log (&j, w, "of 2 (transpiler mode", 30));
  g_usleep (1000000);
  g_subprocess_send_signal (j.proc[2 + 1], SIGSTOP);
  /* the first worker to find it silent names it and ends; the other may name either */
  gboolean named = FALSE;
  for (int i = 0; i < 150 && !named; i++)
    for (int w = 0; w < 2; w++)
      named = named || ps_test_job_wait_log (&j, w, "server 1 (127.0.0.1:", 0.05);
  g_assert_true (named);
  g_usleep (2000000);
  g_subprocess_send_signal (j.proc[2 + 1], SIGCONT);
  ps_test_job_wait (&j, 30);
  g_autofree char *server1 = ps_test_read_log (&j, 3);
  g_test_message ("server 1: %s", server1);
  g_assert_cmpint (ps_test_job_status (&j, 3), ==, 3);
  g_assert_nonnull (strstr (server1, "server 1 (127.0.0.1:"));
  g_assert_nonnull (strstr (server1, "): this server was stopped or starved for "));
  for (int p = 0; p < 3; p++)
    g_assert_cmpint (ps_test_job_status (&j, p), ==, 3);
  ps_test_job_free (&j);
}

/* A server killed under ksdist launch: the launcher stops the job, naming it, and leaves
 * no process; the job restarts from its last checkpoint on 3 servers and converges. */
static void
test_restart_after_killed_server (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *ckpt = g_build_filename (dir, "ckpt", NULL);
  g_autofree char *first = g_build_filename (ckpt, "checkpoint-200", NULL);
  g_autofree char *set_ckpt = g_strdup_printf ("train.checkpoint_dir=%s", ckpt);
  g_autofree char *o = NULL, *e = NULL;
  int out_fd, err_fd;

  if (!ps_test_have_transpiler ())
    return;
  GPid launcher = ks_test_spawn_ksdist (
      ARGS ("launch", "--servers", "2", "--workers", "2", ps_test_config, "--set", set_ckpt,
            "--set", "train.checkpoint_every=100", "--set", "train.steps=100000000", "--set",
            "train.log_every=100000000", "--set", "openblas.threads=1", "--set",
            "comm.timeout=5"),
      NULL, ps_test_plugins, &out_fd, &err_fd);
  gint64 end = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  while (!g_file_test (first, G_FILE_TEST_IS_DIR) && g_get_monotonic_time () < end)
    g_usleep (50000);
  g_assert_true (g_file_test (first, G_FILE_TEST_IS_DIR));
  g_autoptr (GArray) kids = ps_test_children_of (launcher);
  g_assert_cmpuint (kids->len, ==, 4);
  /* the server: the child whose environment says PSERVER */
  GPid server = 0;
  for (guint i = 0; i < kids->len; i++)
    {
      g_autofree char *env_path = g_strdup_printf ("/proc/%d/environ", g_array_index (kids, GPid, i));
      g_autofree char *env = NULL;
      gsize len;
      if (g_file_get_contents (env_path, &env, &len, NULL)
          && memmem (env, len, "TRAINING_ROLE=PSERVER", 21) != NULL)
        server = g_array_index (kids, GPid, i);
    }
  g_assert_cmpint (server, >, 0);
  kill (server, SIGKILL);
  int status;
  g_assert_cmpint (waitpid (launcher, &status, 0), ==, launcher);
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) != 0);
  char buf[65536];
  gssize got = read (err_fd, buf, sizeof buf - 1);
  buf[MAX (got, 0)] = '\0';
  g_test_message ("%s", buf);
  g_assert_nonnull (strstr (buf, "was killed by signal 9"));
  close (out_fd);
  close (err_fd);
  for (guint i = 0; i < kids->len; i++) /* nothing left running */
    g_assert_cmpint (kill (g_array_index (kids, GPid, i), 0), !=, 0);

  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "3", "--workers", "2"),
                        ARGS (set_ckpt, "train.resume=true"), &o, &e),
                   ==, 0);
  g_assert_nonnull (strstr (o, "resumed from"));
  g_assert_nonnull (strstr (o, "server 2: loaded its blocks from"));
  g_assert_cmpfloat (ps_test_value_after (o, "[rank 0] eval accuracy "), >=, 0.95);
  ks_test_rmtree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  ps_test_setup_transpiler ();
  g_test_add_func ("/ps-faults/killed-server", test_killed_server);
  g_test_add_func ("/ps-faults/killed-worker", test_killed_worker);
  g_test_add_func ("/ps-faults/killed-worker-heartbeat", test_killed_worker_heartbeat);
  g_test_add_func ("/ps-faults/killed-server-heartbeat", test_killed_server_heartbeat);
  g_test_add_func ("/ps-faults/stopped-worker", test_stopped_worker);
  g_test_add_func ("/ps-faults/stopped-server", test_stopped_server);
  g_test_add_func ("/ps-faults/restart-after-killed-server", test_restart_after_killed_server);
  return g_test_run ();
}
