/* The pslib mode with real server and worker processes over 127.0.0.1, on data of
 * ksdist datagen ctr: one server and one worker with staleness 0 train exactly as one
 * process; 2 servers x 2 workers reach the teacher's AUC, asynchronous as synchronous;
 * checkpoints of 2 servers resume on 3 (dense part on the servers or on the workers) and
 * a damaged table file is refused; shrink deletes rows; bad settings and data are refused
 * naming them; hostile sparse requests are refused; a killed server ends the job;
 * a stopped worker, continued, says it was the one away. */
#include "ps-harness.h"

#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#define DATA(path) g_strdup_printf ("data.path=%s", path)

/* 60 steps of one process against one server and one worker with staleness 0 (and
 * encryption = off): the same dense parameters and the same rows (emb.rows holds the last
 * evaluation batch's rows, read from the local table and from the server), the same AUC. */
static void
test_alone_equals_one_process (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *data = NULL, *set_data = NULL;
  g_autofree char *one = g_build_filename (dir, "one", NULL);
  g_autofree char *ps = g_build_filename (dir, "ps", NULL);
  g_autofree char *set_one = g_strdup_printf ("train.export_dir=%s", one);
  g_autofree char *set_ps = g_strdup_printf ("train.export_dir=%s", ps);
  g_autofree char *o1 = NULL, *e1 = NULL, *o2 = NULL, *e2 = NULL;

  if (!ps_test_have_pslib ())
    return;
  data = ps_test_small_ctr_data (dir);
  set_data = DATA (data);
  g_assert_cmpint (ps_test_run (ARGS ("train"),
                                ARGS ("job.mode=collective", set_data, "train.steps=60",
                                      "train.batch=64", "train.log_every=60", set_one),
                                &o1, &e1),
                   ==, 0);
  /* without encryption (its PLAIN connections: the dense client's and the sparse pulls'
   * and pushes'), the same values; the other tests run CURVE */
  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "1", "--workers", "1"),
                                ARGS (set_data, "strategy.staleness=0", "train.steps=60",
                                      "train.batch=64", "train.log_every=60", set_ps,
                                      "pslib.encryption=off"),
                                &o2, &e2),
                   ==, 0);
  g_assert_nonnull (strstr (o2, "(sync mode, "));
  g_assert_nonnull (strstr (o2, "workers; NOT ENCRYPTED (encryption = off"));
  g_assert_nonnull (strstr (o2, "worker 0: its traffic with the servers is NOT ENCRYPTED"));
  g_assert_nonnull (strstr (o2, "sparse rows"));
  g_assert_nonnull (strstr (o2, "60 updates")); /* the servers trained the dense part */
  ps_test_assert_exports_close (one, ps, 1e-5);
  double a1 = ps_test_value_after (o1, "eval auc "), a2 = ps_test_value_after (o2, "eval auc ");
  g_assert_cmpfloat (a1, >, 0.55); /* it learnt something */
  g_assert_cmpfloat (fabs (a1 - a2), <=, 1e-4);
  ks_test_rmtree (dir);
}

/* 2 servers x 2 workers, 2 epochs of 1M generated samples: AUC within 0.01 of the teacher
 * with staleness 0, and asynchronous (staleness 2) within 0.005 of that. */
static void
test_auc_reaches_teacher (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *data = g_build_filename (dir, "data", NULL);
  g_autofree char *set_data = DATA (data);
  double auc[2];

  if (!ps_test_have_pslib ())
    return;
  double teacher = ps_test_datagen_ctr (data, ARGS ("--train", "1000000", "--test", "50000", "--vocab",
                                        "100", "--files", "4"));
  for (int s = 0; s < 2; s++)
    {
      g_autofree char *o = NULL, *e = NULL;
      g_autofree char *staleness = g_strdup_printf ("strategy.staleness=%d", s * 2);
      g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "2"),
                                    ARGS (set_data, staleness, "train.steps=3900",
                                          "train.log_every=3900"),
                                    &o, &e),
                       ==, 0);
      auc[s] = ps_test_value_after (o, "[rank 0] eval auc ");
      g_assert_cmpfloat (auc[s], ==, ps_test_value_after (o, "[rank 1] eval auc "));
      g_test_message ("staleness %d: auc %.4f, the teacher's %.4f", s * 2, auc[s], teacher);
    }
  g_assert_cmpfloat (teacher - auc[0], <=, 0.01);
  g_assert_cmpfloat (fabs (auc[1] - auc[0]), <=, 0.005);
  ks_test_rmtree (dir);
}

/* 40 steps on 2 servers, against 20 steps checkpointed and resumed on 3 servers: the same
 * parameters and rows, with the dense part on the servers or allreduced by the workers.
 * A damaged table file is refused by name. */
static void
test_checkpoint_reshard (void)
{
  static const char *const dense[] = { "strategy.dense=servers", "strategy.dense=allreduce" };
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *data = NULL, *set_data = NULL;

  if (!ps_test_have_pslib ())
    return;
  data = ps_test_small_ctr_data (dir);
  set_data = DATA (data);
  for (guint d = 0; d < G_N_ELEMENTS (dense); d++)
    {
      g_autofree char *ckpt = g_strdup_printf ("%s/ckpt-%u", dir, d);
      g_autofree char *e_a = g_strdup_printf ("%s/a-%u", dir, d);
      g_autofree char *e_b = g_strdup_printf ("%s/b-%u", dir, d);
      g_autofree char *set_ckpt = g_strdup_printf ("train.checkpoint_dir=%s", ckpt);
      g_autofree char *set_a = g_strdup_printf ("train.export_dir=%s", e_a);
      g_autofree char *set_b = g_strdup_printf ("train.export_dir=%s", e_b);
      g_autofree char *table = g_build_filename (ckpt, "checkpoint-20",
                                                 "sparse-emb-server-1-of-2.bin", NULL);
      g_autofree char *o1 = NULL, *e1 = NULL, *o2 = NULL, *e2 = NULL, *o3 = NULL, *e3 = NULL;
      g_autofree char *o4 = NULL, *e4 = NULL;

      g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "1"),
                                    ARGS (set_data, dense[d], "strategy.staleness=0",
                                          "train.steps=40", "train.batch=64",
                                          "train.log_every=20", set_a),
                                    &o1, &e1),
                       ==, 0);
      /* what a killed worker 0 left of a save: removed by the next one */
      pid_t dead = fork ();
      if (dead == 0)
        _exit (0);
      g_assert_cmpint (waitpid (dead, NULL, 0), ==, dead);
      g_autofree char *stale = g_strdup_printf ("%s/.partial-checkpoint-9@%s-%d", ckpt,
                                                g_get_host_name (), (int) dead);
      g_assert_cmpint (g_mkdir_with_parents (stale, 0755), ==, 0);
      g_free (ks_test_write (stale, "job.json", "{}"));
      g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "1"),
                                    ARGS (set_data, dense[d], "strategy.staleness=0",
                                          "train.steps=20", "train.batch=64",
                                          "train.log_every=20", set_ckpt),
                                    &o2, &e2),
                       ==, 0);
      g_assert_true (g_file_test (table, G_FILE_TEST_IS_REGULAR));
      g_assert_false (g_file_test (stale, G_FILE_TEST_EXISTS));
      g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "3", "--workers", "1"),
                                    ARGS (set_data, dense[d], "strategy.staleness=0",
                                          "train.steps=40", "train.batch=64",
                                          "train.log_every=20", set_ckpt, "train.resume=true",
                                          set_b),
                                    &o3, &e3),
                       ==, 0);
      g_assert_nonnull (strstr (o3, "written by 2 servers"));
      g_assert_nonnull (strstr (o3, "server 2: loaded "));
      ps_test_assert_exports_close (e_a, e_b, 1e-6);
      g_assert_cmpfloat (ps_test_value_after (o3, "eval auc "), ==,
                         ps_test_value_after (o1, "eval auc "));

      /* a flipped byte in a table file of the newest checkpoint: the servers refuse to
       * start, naming it */
      g_autofree char *newest = g_build_filename (ckpt, "checkpoint-40",
                                                  "sparse-emb-server-1-of-3.bin", NULL);
      g_autofree char *bytes = NULL;
      gsize len;
      g_assert_true (g_file_get_contents (newest, &bytes, &len, NULL));
      bytes[len / 2] ^= 0x10;
      g_assert_true (g_file_set_contents (newest, bytes, len, NULL));
      g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "3", "--workers", "1"),
                                    ARGS (set_data, dense[d], "train.steps=40", "train.batch=64",
                                          set_ckpt, "train.resume=true"),
                                    &o4, &e4),
                       !=, 0);
      g_assert_nonnull (strstr (o4, "sparse-emb-server-1-of-3.bin"));
    }
  ks_test_rmtree (dir);
}

/* Shrinks with a high delete threshold delete rows on the servers; rows are made only for
 * ids pulled. */
static void
test_shrink (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *data = NULL, *set_data = NULL;
  g_autofree char *o1 = NULL, *e1 = NULL, *o2 = NULL, *e2 = NULL;

  if (!ps_test_have_pslib ())
    return;
  data = ps_test_small_ctr_data (dir);
  set_data = DATA (data);
  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "2"),
                                ARGS (set_data, "train.steps=40", "train.batch=64",
                                      "train.log_every=40"),
                                &o1, &e1),
                   ==, 0);
  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "2"),
                                ARGS (set_data, "train.steps=40", "train.batch=64",
                                      "train.log_every=40", "data.shrink_every=20",
                                      "table.emb.delete_threshold=5"),
                                &o2, &e2),
                   ==, 0);
  double kept = ps_test_value_after (o1, "server 0: holds ") + ps_test_value_after (o1, "server 1: holds ");
  g_assert_nonnull (strstr (o2, "step 20: shrink deleted "));
  double deleted = ps_test_value_after (o2, "step 20: shrink deleted ");
  g_assert_cmpfloat (deleted, >, 0);
  g_test_message ("rows without shrink %.0f, deleted by the first shrink %.0f", kept, deleted);
  /* a worker pulls at most 64 x 26 ids a step: 2 workers, 40 steps */
  g_assert_cmpfloat (kept, <=, 2 * 40 * 64 * 26);
  ks_test_rmtree (dir);
}

/* Settings and data that cannot work are refused, naming what is wrong. */
static void
test_refusals (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *bad = g_build_filename (dir, "bad", NULL);
  g_autofree char *set_bad = DATA (bad);
  g_autofree char *set_none = g_strdup_printf ("data.path=%s/none", dir);
  g_autofree char *set_ckpt = g_strdup_printf ("train.checkpoint_dir=%s/ckpt", dir);
  g_autofree char *good = g_build_filename (dir, "good", NULL);
  g_autofree char *set_good = DATA (good);
  g_autofree char *set_model = g_strdup_printf ("pslib.model_dir=%s", dir);
  static const char *const one[] = { "job.mode=collective", NULL };
  struct {
    const char *const *head;
    const char *sets[4];
    const char *message;
  } cases[] = {
    { ARGS ("launch", "-n", "2"), { "job.mode=collective", set_good, NULL },
      "[data] task = ctr keeps its embeddings in a sparse table" },
    { ARGS ("launch", "--servers", "1", "--workers", "1"), { "strategy.mode=sync", set_good, NULL },
      "[strategy] mode, a_sync and k_steps choose the transpiler's modes" },
    /* before: accepted, and pslib's dense tables are never GEO, whose deltas it bounds */
    { ARGS ("launch", "--servers", "1", "--workers", "1"),
      { "strategy.max_update_norm=3", set_good, NULL },
      "[strategy] max_update_norm is set, but [job] mode = pslib does not use it" },
    { ARGS ("train"), { one[0], set_bad, set_ckpt, NULL },
      "keeps its sparse table in memory only" },
    { ARGS ("train"), { one[0], set_none, NULL }, "none (--set): not found" },
    { ARGS ("train"), { one[0], set_bad, NULL }, "train/part-00000:" },
    { ARGS ("launch", "--servers", "1", "--workers", "1"),
      { "strategy.dense=allreduce", set_model, set_good, NULL },
      "[pslib] model_dir with [strategy] dense = allreduce" },
  };

  if (!ps_test_have_pslib ())
    return;
  ps_test_datagen_ctr (bad, ARGS ("--train", "2000", "--test", "500", "--vocab", "50", "--files", "2",
                      "--bad-lines", "3"));
  ps_test_datagen_ctr (good, ARGS ("--train", "2000", "--test", "500", "--vocab", "50", "--files", "2"));
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *o = NULL, *e = NULL;
      g_assert_cmpint (ps_test_run (cases[i].head, cases[i].sets, &o, &e), !=, 0);
      g_autofree char *all = g_strconcat (o, e, NULL);
      g_assert_nonnull (strstr (all, cases[i].message));
    }
  /* skipped and counted on request */
  g_autofree char *o = NULL, *e = NULL;
  g_assert_cmpint (ps_test_run (ARGS ("train"),
                                ARGS (one[0], set_bad, "data.bad_lines=skip", "train.steps=5",
                                      "train.batch=32"),
                                &o, &e),
                   ==, 0);
  g_assert_nonnull (strstr (e, "skipped 3 malformed lines"));
  ks_test_rmtree (dir);
}

/* Sends one request of `type` (table `arg`) with `payload` as worker 0. */
static void
send_request (void *socket, guint type, guint32 arg, const void *payload, gsize len)
{
  PsHeader h = { 0 };
  h.type = type;
  h.arg = arg;
  h.id = 424242;
  ps_token_digest ("the-jobs-token", h.token);
  g_assert_true (ps_send (socket, NULL, 0, &h, payload, len, FALSE));
}

/* A hand-started job without KS_STORE_TOKEN: every process names the missing token, found
 * before the processes meet, so that none can be caught in a collective with a peer that
 * ended on it (issue 49 item 8: worker 0 exited 3 with only gloo's "Connection closed by
 * peer"); the servers no longer build their tables and wait for the meeting first. */
static void
test_no_token_two_workers (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *data = NULL, *set_data = NULL;
  PsTestJob j = { .no_token = TRUE };

  if (!ps_test_have_pslib ())
    return;
  data = ps_test_small_ctr_data (dir);
  set_data = DATA (data);
  ps_test_job_start (&j, 2, 2, ARGS (set_data, "train.steps=200", "train.batch=64", "strategy.dense=allreduce",
                                     "openblas.threads=1", "comm.timeout=10"));
  ps_test_job_wait (&j, 60);
  for (int w = 0; w < 2; w++)
    {
      g_autofree char *log = ps_test_read_log (&j, w);
      g_autofree char *want = g_strdup_printf ("worker %d: KS_STORE_TOKEN is not set", w);
      if (strstr (log, want) == NULL)
        g_error ("worker %d's log lacks '%s':\n%s", w, want, log);
      g_assert_cmpint (ps_test_job_status (&j, w), ==, 2);
    }
  /* checked before the processes meet: a server built no table, served nothing */
  for (int p = 2; p < 4; p++)
    {
      g_autofree char *log = ps_test_read_log (&j, p);
      g_autofree char *want = g_strdup_printf ("server %d: KS_STORE_TOKEN is not set", p - 2);
      if (strstr (log, want) == NULL || strstr (log, "table emb holds") != NULL)
        g_error ("server %d's log lacks '%s' or shows it built its tables first:\n%s", p - 2,
                 want, log);
      g_assert_cmpint (ps_test_job_status (&j, p), ==, 2);
    }
  ps_test_job_free (&j);
  ks_test_rmtree (dir);
}

/* Sparse requests that lie (ids of another server, a record size that does not divide,
 * an unknown table, a gradient that is not finite, clicks above shows) are refused; the
 * job finishes. */
static void
test_bad_sparse_requests (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *data = NULL, *set_data = NULL;
  PsTestJob j = { 0 };

  if (!ps_test_have_pslib ())
    return;
  data = ps_test_small_ctr_data (dir);
  set_data = DATA (data);
  ps_test_job_start (&j, 2, 1, ARGS (set_data, "train.steps=2000", "train.batch=64",
                                     "train.log_every=2000", "openblas.threads=1",
                                     "comm.timeout=20"));
  g_assert_true (ps_test_job_wait_log (&j, 0, "training a ctr model", 30));

  void *ctx = zmq_ctx_new (), *s = zmq_socket (ctx, ZMQ_DEALER);
  g_autofree char *uri = g_strdup_printf ("tcp://127.0.0.1:%d", j.ports[0]);
  int linger = 10000;
  zmq_setsockopt (s, ZMQ_LINGER, &linger, sizeof linger);
  ps_test_curve (s, "the-jobs-token");
  ps_test_speak_for (s, 0); /* worker 0's process */
  g_assert_cmpint (zmq_connect (s, uri), ==, 0);
  guint64 odd[2] = { 3, 5 }; /* ids of server 1 of 2 */
  send_request (s, PS_PULL_SPARSE, 0, odd, sizeof odd);
  send_request (s, PS_PULL_SPARSE, 0, "12345", 5);
  send_request (s, PS_PULL_SPARSE, 7, odd, 8);
  guint8 record[16 + 9 * 4] = { 0 };
  guint64 even = 4;
  float show = 1, click = 0, nan_grad = NAN;
  memcpy (record, &even, 8);
  memcpy (record + 8, &show, 4);
  memcpy (record + 12, &click, 4);
  memcpy (record + 16, &nan_grad, 4);
  send_request (s, PS_PUSH_SPARSE, 0, record, sizeof record);
  click = 2;
  nan_grad = 0;
  memcpy (record + 12, &click, 4);
  memcpy (record + 16, &nan_grad, 4);
  send_request (s, PS_PUSH_SPARSE, 0, record, sizeof record);
  zmq_close (s);
  zmq_ctx_term (ctx);

  ps_test_job_wait (&j, 120);
  for (int p = 0; p < 3; p++)
    g_assert_cmpint (ps_test_job_status (&j, p), ==, 0);
  g_autofree char *server = ps_test_read_log (&j, 1);
  g_assert_nonnull (strstr (server, "id 3 belongs to server 1, not 0"));
  g_assert_nonnull (strstr (server, "is not a whole number of 8-byte records"));
  g_assert_nonnull (strstr (server, "sparse table 7, but this job has 1"));
  g_assert_nonnull (strstr (server, "a gradient that is not finite"));
  g_assert_nonnull (strstr (server, "show 1 and click 2"));
  ps_test_job_free (&j);
  ks_test_rmtree (dir);
}

/* The temporary directory ks_checkpoint_begin would make for checkpoint-<step> in `ckpt`
 * (of a writer on another host), made. */
static char *
make_save_dir (const char *ckpt, gint64 step)
{
  char *tmp = g_strdup_printf ("%s/.tmp-checkpoint-%" G_GINT64_FORMAT
                               ".0123456789abcdef0123456789abcdef@elsewhere-1", ckpt, step);
  g_assert_cmpint (g_mkdir_with_parents (tmp, 0755), ==, 0);
  return tmp;
}

/* A save whose table file's temporary name was predictable (FILE.tmp-<server's pid>):
 * a link planted there is not followed (its target stays as it was) and a FIFO there
 * does not block the server (it once waited for a reader forever, its workers with it). */
static void
test_save_planted_temporaries (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *data = NULL, *set_data = NULL, *set_ckpt = NULL, *tmp = NULL;
  g_autofree char *ckpt = g_build_filename (dir, "ckpt", NULL);
  g_autofree char *victim = g_build_filename (dir, "victim", NULL);
  PsTestJob j = { 0 };
  int reply[2];

  if (!ps_test_have_pslib ())
    return;
  data = ps_test_small_ctr_data (dir);
  set_data = DATA (data);
  set_ckpt = g_strdup_printf ("train.checkpoint_dir=%s", ckpt);
  ps_test_job_start (&j, 2, 1, ARGS (set_data, set_ckpt, "train.steps=4000", "train.batch=64",
                                     "train.log_every=2000", "openblas.threads=1",
                                     "comm.timeout=20"));
  g_assert_true (ps_test_job_wait_log (&j, 0, "training a ctr model", 30));
  g_assert_true (g_file_set_contents (victim, "precious", -1, NULL));
  tmp = make_save_dir (ckpt, 5);
  g_autofree char *link = g_strdup_printf ("%s/sparse-emb-server-0-of-2.bin.tmp-%s", tmp,
                                           g_subprocess_get_identifier (j.proc[1]));
  g_autofree char *fifo = g_strdup_printf ("%s/sparse-emb-server-1-of-2.bin.tmp-%s", tmp,
                                           g_subprocess_get_identifier (j.proc[2]));
  g_assert_cmpint (symlink (victim, link), ==, 0);
  g_assert_cmpint (mkfifo (fifo, 0644), ==, 0);

  for (int s = 0; s < 2; s++)
    reply[s] = ps_test_request (j.ports[s], PS_SAVE, 5, tmp, strlen (tmp), 20, NULL);
  if (reply[1] < 0) /* a server stuck opening the FIFO: freed, so that the job can end */
    close (open (fifo, O_RDWR | O_NONBLOCK));
  g_autofree char *kept = NULL;
  g_assert_true (g_file_get_contents (victim, &kept, NULL, NULL));
  g_assert_cmpstr (kept, ==, "precious");
  g_assert_cmpint (reply[0], ==, PS_REPLY_OK);
  g_assert_cmpint (reply[1], ==, PS_REPLY_OK);
  for (int s = 0; s < 2; s++)
    {
      g_autofree char *file = g_strdup_printf ("%s/sparse-emb-server-%d-of-2.bin", tmp, s);
      g_assert_true (g_file_test (file, G_FILE_TEST_IS_REGULAR));
    }

  ps_test_job_wait (&j, 120);
  for (int p = 0; p < 3; p++)
    g_assert_cmpint (ps_test_job_status (&j, p), ==, 0);
  g_autofree char *job = g_build_filename (ckpt, "checkpoint-4000", "job.json", NULL);
  g_assert_true (g_file_test (job, G_FILE_TEST_IS_REGULAR));
  ps_test_job_free (&j);
  ks_test_rmtree (dir);
}

/* A server killed mid-run: the worker ends within the timeout naming it. */
static void
test_killed_server (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *data = NULL, *set_data = NULL;
  PsTestJob j = { 0 };

  if (!ps_test_have_pslib ())
    return;
  data = ps_test_small_ctr_data (dir);
  set_data = DATA (data);
  ps_test_job_start (&j, 2, 1, ARGS (set_data, "train.steps=100000000",
                                     "train.log_every=100000000", "comm.timeout=3",
                                     "openblas.threads=1"));
  g_assert_true (ps_test_job_wait_log (&j, 0, "training a ctr model", 30));
  g_usleep (300000);
  g_subprocess_send_signal (j.proc[1 + 1], SIGKILL);
  double took = ps_test_job_wait (&j, 30);
  g_autofree char *log = ps_test_read_log (&j, 0);
  g_autofree char *who = g_strdup_printf ("server 1 (127.0.0.1:%d) did not answer", j.ports[1]);
  g_autofree char *silent = g_strdup_printf ("server 1 (127.0.0.1:%d) sent nothing for",
                                             j.ports[1]);
  g_test_message ("worker 0 (status %d): %s", ps_test_job_status (&j, 0), log);
  /* it lost a peer: KS_EXIT_PEER, so that a launcher names the server */
  g_assert_cmpint (ps_test_job_status (&j, 0), ==, 3);
  /* named by the request that waited on it, or first by the heartbeat thread (pslib is
   * asynchronous: CI's run found it that way) */
  g_assert_true (strstr (log, who) != NULL || strstr (log, silent) != NULL);
  g_test_message ("the worker ended %.1f s after the kill", took);
  ps_test_job_free (&j);
  ks_test_rmtree (dir);
}

/* The worker stopped (SIGSTOP) past the timeout: the servers end naming it; continued, it
 * says that it was the one away, not that the servers did not answer its pulls. */
static void
test_stopped_worker (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *data = NULL, *set_data = NULL;
  PsTestJob j = { 0 };

  if (!ps_test_have_pslib ())
    return;
  data = ps_test_small_ctr_data (dir);
  set_data = DATA (data);
  ps_test_job_start (&j, 2, 1, ARGS (set_data, "train.steps=100000000",
                                     "train.log_every=100000000", "comm.timeout=3",
                                     "openblas.threads=1"));
  g_assert_true (ps_test_job_wait_log (&j, 0, "training a ctr model", 30));
  g_usleep (300000);
  g_subprocess_send_signal (j.proc[0], SIGSTOP);
  for (int s = 0; s < 2; s++)
    g_assert_true (ps_test_job_wait_log (&j, 1 + s, "worker 0 sent nothing for 3 s", 15));
  g_usleep (1500000);
  g_subprocess_send_signal (j.proc[0], SIGCONT);
  ps_test_job_wait (&j, 30);
  g_autofree char *log = ps_test_read_log (&j, 0);
  g_assert_cmpint (ps_test_job_status (&j, 0), ==, 3);
  g_assert_nonnull (strstr (log, "worker 0: this worker was stopped or starved for "));
  g_assert_null (strstr (log, "did not answer"));
  for (int s = 0; s < 2; s++)
    g_assert_cmpint (ps_test_job_status (&j, 1 + s), ==, 3);
  ps_test_job_free (&j);
  ks_test_rmtree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  ps_test_setup_pslib ();
  g_test_add_func ("/pslib/alone-equals-one-process", test_alone_equals_one_process);
  g_test_add_func ("/pslib/auc-reaches-teacher", test_auc_reaches_teacher);
  g_test_add_func ("/pslib/checkpoint-reshard", test_checkpoint_reshard);
  g_test_add_func ("/pslib/shrink", test_shrink);
  g_test_add_func ("/pslib/refusals", test_refusals);
  g_test_add_func ("/pslib/bad-sparse-requests", test_bad_sparse_requests);
  g_test_add_func ("/pslib/no-token-two-workers", test_no_token_two_workers);
  g_test_add_func ("/pslib/killed-server", test_killed_server);
  g_test_add_func ("/pslib/stopped-worker", test_stopped_worker);
  g_test_add_func ("/pslib/save-planted-temporaries", test_save_planted_temporaries);
  return g_test_run ();
}
