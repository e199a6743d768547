/* Parameter-server training (the transpiler plugin) with real server and worker processes
 * over 127.0.0.1: sync equals one process with the whole batch; half_async, async and GEO
 * reach its held-out accuracy; async servers divide lr by staleness unless
 * [strategy] staleness_lr = false; bad [strategy] settings are refused naming the keys; a
 * checkpoint written by 2 servers resumes on 3; hostile messages to a server's port, a
 * non-finite push, save requests for a directory outside [train] checkpoint_dir and a
 * server without a token each end as they should; a checkpoint commits whole. Killed
 * and stopped processes: test-ps-faults.c. */
#define _GNU_SOURCE /* memmem */
#include "ps-harness.h"

#include <math.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

/* One process with the whole batch (2 x 64 rows) against 2 workers x 64 rows on 2
 * servers, sync mode, 20 Adam steps: the same parameters. The blocks are small enough
 * that the larger parameters are cut over both servers. */
static void
test_sync_equals_one_process (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *one = g_build_filename (dir, "one", NULL);
  g_autofree char *ps = g_build_filename (dir, "ps", NULL);
  g_autofree char *set_one = g_strdup_printf ("train.export_dir=%s", one);
  g_autofree char *set_ps = g_strdup_printf ("train.export_dir=%s", ps);
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;

  if (!ps_test_have_transpiler ())
    return;
  g_assert_cmpint (ps_test_run (ARGS ("train"),
                        ARGS ("job.mode=collective", "train.batch=128", "train.steps=20",
                              "train.log_every=20", set_one),
                        &out, &err),
                   ==, 0);
  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "2"),
                        ARGS ("strategy.mode=sync", "train.steps=20", "train.log_every=20",
                              "transpiler.block_floats=200", set_ps),
                        &out2, &err2),
                   ==, 0);
  g_assert_nonnull (strstr (out2, "server 0 of 2 listening on 127.0.0.1:"));
  g_assert_nonnull (strstr (out2, "(sync mode, "));
  /* the 64 x 64 weight is cut in two: each server holds more than one block */
  g_assert_nonnull (strstr (out2, "server 1: "));
  g_assert_nonnull (strstr (out2, "20 updates"));
  ps_test_assert_exports_close (one, ps, 1e-5);
  g_assert_cmpfloat (fabs (ps_test_value_after (out, "step 20/20 loss ")
                           - ps_test_value_after (out2, "[rank 0] step 20/20 loss ")),
                     <, 1e-4);
  ks_test_rmtree (dir);
}

/* half_async, async and GEO reach the one-process held-out accuracy within 0.02. */
static void
test_modes_accuracy (void)
{
  static const char *const modes[][6] = {
    { "strategy.mode=half_async", NULL },
    /* this model computes a step faster than a push travels: with Paddle's queue of 20 the
     * workers would run 20 steps ahead of the servers. Stale updates keep the loss moving
     * at a constant rate; the servers' cosine schedule over their 2 x 1500 updates (a push
     * of each worker per step) lets it settle */
    { "strategy.mode=async", "strategy.send_queue_size=1",
      "strategy.max_merge_var_num=1", "optim.schedule=cosine", "optim.total_steps=3000", NULL },
    /* GEO in Paddle's form */
    { "strategy.mode=auto", "strategy.a_sync=true", "strategy.k_steps=10", NULL },
  };
  g_autofree char *out = NULL, *err = NULL;

  if (!ps_test_have_transpiler ())
    return;
  g_assert_cmpint (ps_test_run (ARGS ("train"), ARGS ("job.mode=collective", "train.batch=128"), &out,
                        &err),
                   ==, 0);
  double one = ps_test_value_after (out, "eval accuracy ");
  g_assert_cmpfloat (one, >=, 0.9);
  for (guint m = 0; m < G_N_ELEMENTS (modes); m++)
    {
      g_autofree char *o = NULL, *e = NULL;
      g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "2"), modes[m], &o,
                            &e),
                       ==, 0);
      for (int w = 0; w < 2; w++)
        {
          g_autofree char *key = g_strdup_printf ("[rank %d] eval accuracy ", w);
          double acc = ps_test_value_after (o, key);
          g_test_message ("%s: worker %d accuracy %.4f, one process %.4f", modes[m][0], w, acc,
                          one);
          g_assert_cmpfloat (fabs (acc - one), <=, 0.02);
        }
    }
}

/* Both servers' last lines in `out` (2 servers, 2 workers, async): pushes computed on
 * values 2 or more updates old came, and (`divided`) most were applied at lr / staleness,
 * or none was. */
static void
assert_staleness_lr (const char *out, gboolean divided)
{
  for (int s = 0; s < 2; s++)
    {
      g_autofree char *key = g_strdup_printf ("server %d: largest staleness ", s);
      const char *line = strstr (out, key);
      g_assert_nonnull (line);
      g_assert_cmpfloat (ps_test_value_after (out, key), >=, 2);
      line = strchr (line, ';');
      g_assert_nonnull (line);
      if (divided)
        {
          /* 2 workers x 1500 pushes; nearly every one is 2 or more updates old */
          g_assert_cmpfloat (g_ascii_strtod (line + 1, NULL), >, 300);
          g_assert_true (g_str_has_prefix (strchr (line + 2, ' '),
                                           " pushes applied at [optim] lr / staleness"));
        }
      else
        g_assert_true (g_str_has_prefix (line, "; every push applied at [optim] lr, "
                                               "whatever its staleness"));
    }
}

/* examples/ps-mlp.ini in async mode, as its header runs it, learns on both workers, and
 * the servers divide lr by each push's staleness. How well depends on scheduling, so the
 * figure of the goal, >= 0.95 in every run, is bench/ps-async-accuracy.sh's (10 of 10 at
 * 1.0 on a quiet machine; without the division 0.33 to 0.89 with Paddle's queue of 20),
 * not this test's: under the sanitizers on CI's loaded 2 cores a worker's pushes reached
 * staleness 35 and one worker ended at 0.7949 (0.873 in another run). This asserts that
 * async learns, far above the 0.33 of chance on the 3 rings. */
static void
test_async_example (void)
{
  g_autofree char *out = NULL, *err = NULL;

  if (!ps_test_have_transpiler ())
    return;
  /* a queue of 1, not the default 2: the least staleness, for the sanitizers' slow steps
   * (bench/ps-async-accuracy.sh measures the default) */
  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "2"),
                                ARGS ("strategy.mode=async", "strategy.send_queue_size=1"),
                                &out, &err),
                   ==, 0);
  for (int w = 0; w < 2; w++)
    {
      g_autofree char *key = g_strdup_printf ("[rank %d] eval accuracy ", w);
      g_assert_cmpfloat (ps_test_value_after (out, key), >=, 0.7);
    }
  assert_staleness_lr (out, TRUE);
}

/* [strategy] staleness_lr = false: the servers see stale pushes and apply every one at
 * [optim] lr, the update of half_async (ps_dense_table_apply, the rate never set). */
static void
test_async_plain_lr (void)
{
  g_autofree char *out = NULL, *err = NULL;

  if (!ps_test_have_transpiler ())
    return;
  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "2"),
                                ARGS ("strategy.mode=async", "strategy.staleness_lr=false",
                                      "train.steps=300"),
                                &out, &err),
                   ==, 0);
  assert_staleness_lr (out, FALSE);
}

/* Impossible [strategy] settings are refused, naming the keys. */
static void
test_strategy_refusals (void)
{
  static const struct {
    const char *sets[3];
    const char *message;
  } cases[] = {
    { { "strategy.a_sync=false", "strategy.k_steps=5", NULL },
      "[strategy] a_sync = false with k_steps = 5" },
    { { "strategy.mode=sync", "strategy.k_steps=5", NULL },
      "[strategy] k_steps = 5 is for mode = geo, not mode = sync" },
    { { "strategy.mode=geo", "strategy.a_sync=false", NULL },
      "[strategy] mode = geo but a_sync = false: they disagree" },
    { { "strategy.mode=sync", "strategy.staleness_lr=false", NULL },
      "[strategy] staleness_lr is for mode = async, not mode = sync" },
    /* before: accepted and unused */
    { { "strategy.mode=sync", "strategy.send_queue_size=4", NULL },
      "[strategy] send_queue_size is for mode = async, not mode = sync" },
    { { "strategy.mode=half_async", "strategy.max_merge_var_num=4", NULL },
      "[strategy] max_merge_var_num is for mode = async, not mode = half_async" },
    { { "strategy.mode=async", "strategy.max_update_norm=3", NULL },
      "[strategy] max_update_norm is for mode = geo, not mode = async" },
    { { "strategy.mode=half_async", "optim.clip_norm=1", NULL },
      "[optim] clip_norm with [strategy] mode = half_async" },
  };
  g_autofree char *out = NULL, *err = NULL;

  if (!ps_test_have_transpiler ())
    return;
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *o = NULL, *e = NULL;
      int status = ps_test_run (ARGS ("launch", "--servers", "1", "--workers", "1"), cases[i].sets, &o,
                        &e);
      /* refused once, by the launcher, before any process starts */
      g_assert_cmpint (status, ==, 2);
      g_assert_nonnull (strstr (e, cases[i].message));
    }
  /* one process alone cannot train with servers */
  g_assert_cmpint (ps_test_run (ARGS ("train"), NULL, &out, &err), ==, 2);
  g_assert_nonnull (strstr (err, "[job] mode = transpiler trains with parameter servers, but "
                                 "the job has none (one process alone)"));
}

/* 40 sync steps on 2 servers, against 20 steps on 2 servers checkpointed and resumed on 3
 * servers: the same parameters (sync mode does not depend on the server count). Servers
 * also start from the checkpoint by [transpiler] model_dir, and refuse an edited shard. */
static void
test_reshard (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *ckpt = g_build_filename (dir, "ckpt", NULL);
  g_autofree char *e_a = g_build_filename (dir, "a", NULL);
  g_autofree char *e_b = g_build_filename (dir, "b", NULL);
  g_autofree char *set_ckpt = g_strdup_printf ("train.checkpoint_dir=%s", ckpt);
  g_autofree char *set_a = g_strdup_printf ("train.export_dir=%s", e_a);
  g_autofree char *set_b = g_strdup_printf ("train.export_dir=%s", e_b);
  g_autofree char *model_dir = g_strdup_printf ("transpiler.model_dir=%s/checkpoint-20", ckpt);
  g_autofree char *shard = g_build_filename (ckpt, "checkpoint-20", "server-1-of-2.safetensors",
                                             NULL);
  g_autofree char *o1 = NULL, *e1 = NULL, *o2 = NULL, *e2 = NULL, *o3 = NULL, *e3 = NULL;
  g_autofree char *o4 = NULL, *e4 = NULL, *o5 = NULL, *e5 = NULL;

  if (!ps_test_have_transpiler ())
    return;
  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "2"),
                        ARGS ("train.steps=40", "train.log_every=20", "transpiler.block_floats=200",
                              set_a),
                        &o1, &e1),
                   ==, 0);
  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "2"),
                        ARGS ("train.steps=20", "train.log_every=20", "transpiler.block_floats=200",
                              set_ckpt),
                        &o2, &e2),
                   ==, 0);
  g_assert_true (g_file_test (shard, G_FILE_TEST_IS_REGULAR));
  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "3", "--workers", "2"),
                        ARGS ("train.steps=40", "train.log_every=20", "transpiler.block_floats=200",
                              set_ckpt, "train.resume=true", set_b),
                        &o3, &e3),
                   ==, 0);
  g_assert_nonnull (strstr (o3, "server 2: loaded its blocks from"));
  g_assert_nonnull (strstr (o3, "/checkpoint-20 at step 20"));
  ps_test_assert_exports_close (e_a, e_b, 1e-6);
  g_assert_cmpfloat (ps_test_value_after (o3, "[rank 0] step 40/40 loss "), ==,
                     ps_test_value_after (o1, "[rank 0] step 40/40 loss "));

  /* init_server(model_dir) with fresh workers: incremental training from the checkpoint */
  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "3", "--workers", "1"),
                        ARGS ("train.steps=5", "train.log_every=5", "transpiler.block_floats=200",
                              model_dir),
                        &o4, &e4),
                   ==, 0);
  g_assert_nonnull (strstr (o4, "server 0: loaded its blocks from"));

  /* an edited header (the step, as a one-bit flip could): the servers refuse to start,
   * naming the file; the seal covers the data the same way */
  g_autofree char *bytes = NULL;
  gsize len;
  char *step;
  g_assert_true (g_file_get_contents (shard, &bytes, &len, NULL));
  g_assert_nonnull (step = memmem (bytes, MIN (len, 4096), "\"step\":\"20\"", 11));
  step[9] = '1';
  g_assert_true (g_file_set_contents (shard, bytes, len, NULL));
  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "3", "--workers", "1"),
                        ARGS ("train.steps=5", "transpiler.block_floats=200", model_dir),
                        &o5, &e5),
                   !=, 0);
  g_assert_nonnull (strstr (o5, "server-1-of-2.safetensors: the file does not match its SHA-256"));

  /* against the safetensors rules, with the seal recomputed: refused as a checkpoint is
   * (the shard reader once read one tensor's bytes from another's) */
  static const struct {
    const char *from, *to, *want;
    gsize extra;
  } forged[] = {
    { "\"format\"", "\"formal\"", "4 bytes of data after the last tensor", 4 },
    { "{", " {", "the header is not a JSON object starting at its first byte", 0 },
    { "\"servers\":\"2\"", "\"servers\":2", "metadata 'servers' is not a string", 0 },
    { "\"data_offsets\":[0,", "\"data_offsets\":[4,", "data_offsets", 0 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (forged); i++)
    {
      g_autofree char *o6 = NULL, *e6 = NULL;
      step[9] = '0';
      g_assert_true (g_file_set_contents (shard, bytes, len, NULL));
      ks_test_edit_header (shard, forged[i].from, forged[i].to, TRUE, forged[i].extra);
      g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "3", "--workers", "1"),
                                    ARGS ("train.steps=5", "transpiler.block_floats=200",
                                          model_dir),
                                    &o6, &e6),
                       !=, 0);
      g_test_message ("%s", o6);
      g_assert_nonnull (strstr (o6, "server-1-of-2.safetensors: "));
      g_assert_nonnull (strstr (o6, forged[i].want));
    }
  ks_test_rmtree (dir);
}

/* ---- jobs started by hand, as fleetrun does, to watch each process ---- */


/* Garbage, a wrong token, lying lengths, strangers' worker numbers, several parts and a
 * half message to a server's port: each refused; the job finishes and learns. */
static void
test_bad_messages (void)
{
  PsTestJob j = { 0 };
  guint8 token[PS_TOKEN_BYTES], wrong[PS_TOKEN_BYTES];
  PsHeader h = { 0 };

  if (!ps_test_have_transpiler ())
    return;
  ps_test_job_start (&j, 1, 2, ARGS ("strategy.mode=sync", "train.steps=3000", "log.level=info",
                             "openblas.threads=1", "comm.timeout=20", "train.log_every=3000"));
  g_assert_true (ps_test_job_wait_log (&j, 2, "listening on", 30));

  /* raw TCP: not even ZeroMQ's greeting; then the start of a greeting and silence */
  ps_test_raw_send (j.ports[0], "GET / HTTP/1.0\r\n\r\n", 18, FALSE);
  ps_test_raw_send (j.ports[0], "\xff\x00\x00\x00", 4, TRUE);

  void *ctx = zmq_ctx_new (), *s = zmq_socket (ctx, ZMQ_DEALER);
  g_autofree char *uri = g_strdup_printf ("tcp://127.0.0.1:%d", j.ports[0]);
  int linger = 10000; /* zmq_ctx_term waits until they are out */
  zmq_setsockopt (s, ZMQ_LINGER, &linger, sizeof linger);
  ps_test_curve (s, "the-jobs-token");
  ps_test_speak_for (s, 0); /* worker 0's process */
  g_assert_cmpint (zmq_connect (s, uri), ==, 0);
  ps_token_digest ("the-jobs-token", token);
  ps_token_digest ("another-token", wrong);

  zmq_send (s, "garbage!", 8, 0);                    /* one part */
  zmq_send (s, "garbage!", 8, ZMQ_SNDMORE);
  zmq_send (s, "", 0, 0);                            /* a header shorter than one */
  h.type = PS_PULL;
  memcpy (h.token, wrong, sizeof wrong);
  ps_test_send_header (s, &h, 0, 0);                         /* the wrong token */
  memcpy (h.token, token, sizeof token);
  ps_test_send_header (s, &h, G_GUINT64_CONSTANT (1) << 60, 0); /* a payload length it does not have */
  h.sender = 77;
  ps_test_send_header (s, &h, 0, 0);                         /* a worker the job does not have */
  ps_header_seal (&h, 18);
  zmq_send (s, &h, sizeof h, ZMQ_SNDMORE);
  zmq_send (s, "part two", 8, ZMQ_SNDMORE);
  zmq_send (s, "part three", 10, 0);                 /* a payload cut in small frames */
  h.sender = 1;
  h.type = 999;
  ps_test_send_header (s, &h, 0, 0x12345678);                /* not the magic */
  zmq_close (s);
  zmq_ctx_term (ctx);

  ps_test_job_wait (&j, 60);
  for (int p = 0; p < 3; p++)
    g_assert_cmpint (ps_test_job_status (&j, p), ==, 0);
  g_autofree char *server = ps_test_read_log (&j, 2);
  g_autofree char *w0 = ps_test_read_log (&j, 0);
  g_test_message ("%s", server);
  g_assert_nonnull (strstr (server, "a message of 1 parts"));
  g_assert_nonnull (strstr (server, "a header of 8 bytes, not 64"));
  g_assert_nonnull (strstr (server, "refused: wrong token"));
  g_assert_nonnull (strstr (server, "payload bytes but 0 came"));
  g_assert_nonnull (strstr (server, "from worker 77 of a job of 2 workers"));
  g_assert_nonnull (strstr (server, "a payload in frames of 8 bytes"));
  g_assert_nonnull (strstr (server, "bad magic"));
  g_assert_nonnull (strstr (server, "7 refused"));
  g_assert_cmpfloat (ps_test_value_after (w0, "eval accuracy "), >=, 0.95);
  ps_test_job_free (&j);
}

/* A save request (the job's token, worker 0's name) for `tmp`: refused, and nothing
 * written there. */
static void
assert_save_refused (PsTestJob *j, const char *tmp, const char *why)
{
  g_autofree char *text = NULL;
  g_autofree char *shard = g_build_filename (tmp, "server-0-of-1.safetensors", NULL);
  g_assert_cmpint (ps_test_request (j->ports[0], PS_SAVE, 5, tmp, strlen (tmp), 20, &text), ==,
                   PS_REPLY_ERROR);
  g_test_message ("%s: %s", tmp, text);
  g_assert_nonnull (strstr (text, why));
  g_assert_false (g_file_test (shard, G_FILE_TEST_EXISTS));
}

/* Save requests with the job's token that name a directory elsewhere (it was created and
 * written), one reached by ".." or a link, or a committed checkpoint (it was rewritten in
 * place) are refused; a save's own temporary directory in [train] checkpoint_dir is
 * written, and the job's own checkpoint still is. */
static void
test_save_confined (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *ckpt = g_build_filename (dir, "ckpt", NULL);
  g_autofree char *set_ckpt = g_strdup_printf ("train.checkpoint_dir=%s", ckpt);
  const char *own = ".tmp-checkpoint-5.0123456789abcdef0123456789abcdef@elsewhere-1";
  g_autofree char *elsewhere = g_build_filename (dir, "elsewhere", "made", NULL);
  g_autofree char *outside = g_build_filename (dir, "outside", own, NULL);
  g_autofree char *dotdot = g_build_filename (ckpt, "..", "outside", own, NULL);
  g_autofree char *target = g_build_filename (dir, "target", NULL);
  g_autofree char *linked = g_build_filename (ckpt, own, NULL);
  g_autofree char *committed = g_build_filename (ckpt, "checkpoint-5", NULL);
  g_autofree char *good = g_strdup_printf ("%s/.tmp-checkpoint-5.%s@elsewhere-2", ckpt,
                                           "fedcba9876543210fedcba9876543210");
  PsTestJob j = { 0 };

  if (!ps_test_have_transpiler ())
    return;
  g_assert_cmpint (g_mkdir_with_parents (outside, 0755), ==, 0);
  g_assert_cmpint (g_mkdir_with_parents (target, 0755), ==, 0);
  g_assert_cmpint (g_mkdir_with_parents (good, 0755), ==, 0);
  g_assert_cmpint (symlink (target, linked), ==, 0);
  ps_test_job_start (&j, 1, 1, ARGS ("strategy.mode=async", "train.steps=10000", set_ckpt,
                                     "openblas.threads=1", "comm.timeout=20",
                                     "train.log_every=10000"));
  g_assert_true (ps_test_job_wait_log (&j, 0, "training rings", 60)); /* worker 0 said hello */
  /* committed once the job runs: a fresh job refuses a directory holding checkpoints */
  g_assert_cmpint (g_mkdir_with_parents (committed, 0755), ==, 0);
  g_free (ks_test_write (committed, "job.json", "{}"));

  assert_save_refused (&j, elsewhere, "not the temporary directory of a save of step 5");
  g_assert_false (g_file_test (elsewhere, G_FILE_TEST_EXISTS));
  assert_save_refused (&j, outside, "is not in the checkpoint directory");
  assert_save_refused (&j, dotdot, "is not in the checkpoint directory");
  assert_save_refused (&j, linked, "is not a directory (missing, or a link)");
  g_autofree char *in_target = g_build_filename (target, "server-0-of-1.safetensors", NULL);
  g_assert_false (g_file_test (in_target, G_FILE_TEST_EXISTS));
  assert_save_refused (&j, committed, "not the temporary directory of a save of step 5");
  g_autofree char *shard = g_build_filename (good, "server-0-of-1.safetensors", NULL);
  g_assert_cmpint (ps_test_request (j.ports[0], PS_SAVE, 5, good, strlen (good), 20, NULL), ==,
                   PS_REPLY_OK);
  g_assert_true (g_file_test (shard, G_FILE_TEST_IS_REGULAR));

  ps_test_job_wait (&j, 120);
  for (int p = 0; p < 2; p++)
    g_assert_cmpint (ps_test_job_status (&j, p), ==, 0);
  g_autofree char *job = g_build_filename (ckpt, "checkpoint-10000", "job.json", NULL);
  g_assert_true (g_file_test (job, G_FILE_TEST_IS_REGULAR));
  ps_test_job_free (&j);
  ks_test_rmtree (dir);
}

/* A server without KS_STORE_TOKEN does not start, saying how to set one (it accepted the
 * all-zero token of anyone, and an outsider's pushes with it); a worker without one says
 * the same, not that the server did not answer. */
static void
test_no_token (void)
{
  PsTestJob j = { .no_token = TRUE };

  if (!ps_test_have_transpiler ())
    return;
  ps_test_job_start (&j, 1, 1, ARGS ("strategy.mode=sync", "train.steps=200",
                                     "openblas.threads=1", "comm.timeout=5",
                                     "train.log_every=200"));
  ps_test_job_wait (&j, 60);
  g_autofree char *server = ps_test_read_log (&j, 1);
  g_assert_nonnull (strstr (server, "KS_STORE_TOKEN is not set"));
  g_assert_nonnull (strstr (server, "`ksdist launch` sets one"));
  g_assert_cmpint (ps_test_job_status (&j, 1), !=, 0);
  g_autofree char *worker = ps_test_read_log (&j, 0);
  g_assert_nonnull (strstr (worker, "worker 0: KS_STORE_TOKEN is not set"));
  g_assert_cmpint (ps_test_job_status (&j, 0), !=, 0);
  ps_test_job_free (&j);
}

/* A push of `bytes` of `data` as worker h->sender. */
static void
push (void *socket, PsHeader *h, const void *data, gsize bytes)
{
  g_assert_true (ps_send (socket, NULL, 0, h, data, bytes, FALSE));
}

/* A gradient with NaNs, pushed with the job's token in worker 0's name, is refused and
 * logged (it once made every value of the server NaN and the job ended at chance with
 * exit 0), and the job learns as an unattacked one; a job whose own training diverges
 * stops, naming the worker, before a NaN reaches the servers. */
static void
test_nonfinite_push (void)
{
  PsTestJob j = { 0 };
  PsHeader h = { 0 };
  float one = 1;

  if (!ps_test_have_transpiler ())
    return;
  /* long enough to be training when the pushes come */
  ps_test_job_start (&j, 1, 2, ARGS ("strategy.mode=async", "train.steps=10000",
                                     "log.level=info", "openblas.threads=1", "comm.timeout=20",
                                     "train.log_every=10000"));
  g_assert_true (ps_test_job_wait_log (&j, 0, "training rings", 60)); /* worker 0 said hello */
  void *ctx = zmq_ctx_new (), *s = zmq_socket (ctx, ZMQ_DEALER);
  g_autofree char *uri = g_strdup_printf ("tcp://127.0.0.1:%d", j.ports[0]);
  int linger = 10000;
  zmq_setsockopt (s, ZMQ_LINGER, &linger, sizeof linger);
  ps_test_curve (s, "the-jobs-token");
  ps_test_speak_for (s, 0); /* worker 0's process */
  g_assert_cmpint (zmq_connect (s, uri), ==, 0);
  ps_token_digest ("the-jobs-token", h.token);
  h.type = PS_PUSH_GRAD;
  h.sender = 0;
  push (s, &h, &one, sizeof one); /* the wrong size: the server says how many it holds */
  g_assert_true (ps_test_job_wait_log (&j, 2, "floats of the model", 30));
  g_autofree char *said = ps_test_read_log (&j, 2);
  gsize n = (gsize) ps_test_value_after (said, "but this server holds ");
  g_assert_cmpuint (n, >, 1000);
  g_autofree float *nan = g_new (float, n);
  for (gsize i = 0; i < n; i++)
    nan[i] = i == n / 2 ? INFINITY : NAN;
  push (s, &h, nan, n * sizeof (float));
  g_assert_true (ps_test_job_wait_log (&j, 2, "not finite: nothing of this push was applied",
                                       30));
  zmq_close (s);
  zmq_ctx_term (ctx);
  ps_test_job_wait (&j, 120);
  for (int p = 0; p < 3; p++)
    g_assert_cmpint (ps_test_job_status (&j, p), ==, 0);
  g_autofree char *w0 = ps_test_read_log (&j, 0);
  g_assert_cmpfloat (ps_test_value_after (w0, "eval accuracy "), >=, 0.95);
  ps_test_job_free (&j);

  /* a worker's own gradients not finite (a small GPT at lr 1000 diverges within 10
   * steps; async, whose servers divide the rate by the staleness, within about 35: a
   * 30-step run could end with a finite loss of 1e16), or finite and huge first: the job
   * fails naming it, in every mode, before the loss is logged */
  static const char *const modes[] = { "strategy.mode=sync", "strategy.mode=half_async",
                                       "strategy.mode=async", "strategy.mode=geo" };
  g_autofree char *gpt = g_build_filename (g_getenv ("KS_SRCDIR"), "examples", "gpt-words.ini",
                                           NULL);
  for (guint i = 0; i < G_N_ELEMENTS (modes); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      const char *k = i == 3 ? "strategy.k_steps=1" : "strategy.k_steps=0";
      /* async: a queue of 1, not the default 2, keeps the staleness that divides the
       * servers' rate low, and 400 steps (with 2 and staleness 7 a sanitizer run ended its
       * 100 steps at a finite loss of 1.5e17; with 1, runs here turned non-finite at step
       * 94); the other modes refuse that key, and repeat one instead */
      const char *queue = i == 2 ? "strategy.send_queue_size=1" : "train.log_every=100";
      const char *steps = i == 2 ? "train.steps=400" : "train.steps=100";
      int status = ks_test_run_ksdist (
          ARGS ("launch", "--servers", "1", "--workers", "2", gpt, "--set", "job.mode=transpiler",
                "--set", modes[i], "--set", k, "--set", "optim.lr=1000", "--set",
                "optim.warmup=0", "--set", "optim.schedule=constant", "--set",
                "optim.clip_norm=0", "--set", steps, "--set", "train.log_every=100",
                "--set", "model.context=16", "--set", "model.width=32", "--set",
                "train.batch=8", "--set", "openblas.threads=1", "--set", "comm.timeout=20",
                "--set", queue),
          NULL, ps_test_plugins, &out, &err);
      g_test_message ("%s: %s%s", modes[i], out, err);
      g_assert_cmpint (status, ==, 1);
      /* the worker's own check, or a server's bound on a finite but huge push, or (async:
       * the servers' rate divided by the staleness slows the divergence) the loss's check
       * at the logged step */
      g_assert_true (strstr (out, "which is not finite: its training diverged, and nothing "
                                  "was pushed") != NULL
                     || strstr (out, "above [strategy] max_update_norm") != NULL
                     || (strstr (out, ": the training loss is ") != NULL
                         && strstr (out, "nan: the model diverged") != NULL));
      g_assert_null (strstr (out, "eval loss"));
    }
}

static gint
by_name (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* A job's checkpoints are committed as the library commits every checkpoint: the
 * temporaries of killed writers are removed (the library's names and the older ".partial-"
 * ones), none of this save is left, and keep-pruning removes only checkpoint-<step>
 * directories, leaving a user's "checkpoint-1.notes" beside them. */
static void
test_checkpoint_commit (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *ckpt = g_build_filename (dir, "ckpt", NULL);
  g_autofree char *set_ckpt = g_strdup_printf ("train.checkpoint_dir=%s", ckpt);
  g_autofree char *o = NULL, *e = NULL;
  pid_t dead;

  if (!ps_test_have_transpiler ())
    return;
  if ((dead = fork ()) == 0)
    _exit (0);
  g_assert_cmpint (waitpid (dead, NULL, 0), ==, dead);
  g_autofree char *notes = g_build_filename (ckpt, "checkpoint-1.notes", NULL);
  g_autofree char *stale = g_strdup_printf ("%s/.tmp-checkpoint-3.0123abcd@%s-%d", ckpt,
                                            g_get_host_name (), (int) dead);
  g_autofree char *partial = g_strdup_printf ("%s/.partial-checkpoint-3@%s-%d", ckpt,
                                              g_get_host_name (), (int) dead);
  const char *dirs[] = { notes, stale, partial };
  for (guint i = 0; i < G_N_ELEMENTS (dirs); i++)
    {
      g_assert_cmpint (g_mkdir_with_parents (dirs[i], 0755), ==, 0);
      g_free (ks_test_write (dirs[i], "job.json", "{}"));
    }
  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "1"),
                        ARGS ("train.steps=4", "train.log_every=4", "train.checkpoint_every=2",
                              "train.keep=1", set_ckpt),
                        &o, &e),
                   ==, 0);
  g_autoptr (GDir) d = g_dir_open (ckpt, 0, NULL);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;
  while ((name = g_dir_read_name (d)) != NULL)
    g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, by_name);
  g_ptr_array_add (names, NULL);
  g_autofree char *listed = g_strjoinv (" ", (char **) names->pdata);
  /* .ksdist-lock: the job's lock on the directory, emptied when the job ended */
  g_assert_cmpstr (listed, ==, ".ksdist-lock checkpoint-1.notes checkpoint-4");
  g_autofree char *job = g_build_filename (ckpt, "checkpoint-4", "job.json", NULL);
  g_assert_true (g_file_test (job, G_FILE_TEST_IS_REGULAR));
  ks_test_rmtree (dir);
}

/* A server started by hand whose worker meets at another store: it said only "gloo: ...
 * rank 0 did not join"; now what it waited for, where, and the likely causes (the
 * workers not started, another store address or job name, a missing or other token). */
static void
test_server_not_met (void)
{
  PsTestJob j = { .worker_elsewhere = TRUE };

  if (!ps_test_have_transpiler ())
    return;
  ps_test_job_start (&j, 1, 1, ARGS ("comm.timeout=3", "openblas.threads=1"));
  ps_test_job_wait (&j, 60);
  g_autofree char *server = ps_test_read_log (&j, 1);
  g_autofree char *store = g_build_filename (j.dir, "store", NULL);
  g_autofree char *where = g_strdup_printf ("to meet at the file store %s (job 'ps-test')", store);
  g_test_message ("server: %s", server);
  g_assert_cmpint (ps_test_job_status (&j, 1), !=, 0);
  g_assert_nonnull (strstr (server, "server 0 of 1: waited [comm] timeout = 3 s for the job's 1 "
                                    "worker and 1 server"));
  g_assert_nonnull (strstr (server, where));
  g_assert_nonnull (strstr (server, "rank 0 did not join"));
  g_assert_nonnull (strstr (server, "KS_STORE_ADDRESS or [comm] store_address"));
  g_assert_nonnull (strstr (server, "KS_STORE_TOKEN is missing or not this server's"));
  ps_test_job_free (&j);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  ps_test_setup_transpiler ();
  g_test_add_func ("/ps/sync-equals-one-process", test_sync_equals_one_process);
  g_test_add_func ("/ps/modes-accuracy", test_modes_accuracy);
  g_test_add_func ("/ps/async-example", test_async_example);
  g_test_add_func ("/ps/async-plain-lr", test_async_plain_lr);
  g_test_add_func ("/ps/strategy-refusals", test_strategy_refusals);
  g_test_add_func ("/ps/reshard", test_reshard);
  g_test_add_func ("/ps/bad-messages", test_bad_messages);
  g_test_add_func ("/ps/nonfinite-push", test_nonfinite_push);
  g_test_add_func ("/ps/checkpoint-commit", test_checkpoint_commit);
  g_test_add_func ("/ps/save-confined", test_save_confined);
  g_test_add_func ("/ps/no-token", test_no_token);
  g_test_add_func ("/ps/server-not-met", test_server_not_met);
  return g_test_run ();
}
