/* What the pslib mode trusts, with real server and worker processes over 127.0.0.1:
 * a checkpoint resumes only from files of one save (each forgery of issue 35 item 5 is
 * refused naming the file), and requests of a token holder that would degrade the tables
 * (shrink and save from any worker, unbounded new rows, huge gradients) are refused. */
#include "ps-harness.h"
#include "../plugins/pslib/budget.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <zmq.h>

/* The memory a server's default budget starts from (budget.c's reading of this process's
 * cgroups and MemTotal: tests/test-pslib-budget checks it on fake roots) */
static double
host_memory (void)
{
  g_autofree char *source = NULL;
  return ps_memory_at ("/", &source);
}

/* [table.NAME] max_rows = 0 (a default as large as the host's memory, for each server
 * of the host, was too high): each server of the two on this host holds at most a
 * quarter of the host's memory over the two, in rows of the bytes it says, and says so. */
static void
assert_default_budget (const char *log)
{
  const char *line = strstr (log, "table emb holds at most ");
  g_assert_nonnull (line);
  gint64 rows = 0;
  int row_bytes = 0;
  g_assert_cmpint (sscanf (line, "table emb holds at most %" G_GINT64_FORMAT " rows (%*f MB at %d "
                           "bytes a row", &rows, &row_bytes), ==, 2);
  double want = floor (host_memory () / 4 / 2 / row_bytes);
  g_test_message ("default max_rows %" G_GINT64_FORMAT " (%d bytes a row), expected %.0f", rows,
                  row_bytes, want);
  g_assert_cmpfloat (fabs ((double) rows - want), <=, 1);
  g_assert_nonnull (strstr (line, "[table.emb] max_rows = 0: a quarter of this host's "));
  g_assert_nonnull (strstr (line, " over its 2 servers and 1 table)"));
}

static char *
read_all (const char *path, gsize *len)
{
  char *bytes = NULL;
  g_assert_true (g_file_get_contents (path, &bytes, len, NULL));
  return bytes;
}

/* Copies the files of directory `from` (flat) into a new directory `to`. */
static void
copy_dir (const char *from, const char *to)
{
  g_autoptr (GDir) d = g_dir_open (from, 0, NULL);
  const char *name;
  g_assert_nonnull (d);
  g_assert_cmpint (g_mkdir_with_parents (to, 0755), ==, 0);
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *src = g_build_filename (from, name, NULL);
      g_autofree char *dst = g_build_filename (to, name, NULL);
      gsize len;
      g_autofree char *bytes = read_all (src, &len);
      g_assert_true (g_file_set_contents (dst, bytes, len, NULL));
    }
}

static void
copy_file (const char *from, const char *to)
{
  gsize len;
  g_autofree char *bytes = read_all (from, &len);
  g_assert_true (g_file_set_contents (to, bytes, len, NULL));
}

/* A sparse table file's rows edited as `edit` says, its SHA-256 recomputed (a forger's
 * edit that the checksum alone does not catch). */
typedef enum { EDIT_NAN, EDIT_DUPLICATE, EDIT_OTHER_SERVER } Edit;

static void
forge_rows (const char *path, Edit edit, guint64 other_server_id)
{
  gsize n, dlen = 32;
  g_autofree char *b = read_all (path, &n);
  guint32 id_len;
  guint64 rows;
  memcpy (&rows, b + 24, 8);
  memcpy (&id_len, b + 32, 4);
  gsize at = 36 + id_len, rec = (n - at - 32) / rows;
  g_assert_cmpuint (rows, >=, 2);
  g_assert_cmpuint (at + rows * rec + 32, ==, n);
  float nan_value = NAN;
  switch (edit)
    {
    case EDIT_NAN: /* the first row's embed_w, after its id and statistics */
      memcpy (b + at + 8 + 16, &nan_value, 4);
      break;
    case EDIT_DUPLICATE: /* the second row's id is the first's */
      memcpy (b + at + rec, b + at, 8);
      break;
    case EDIT_OTHER_SERVER:
      memcpy (b + at, &other_server_id, 8);
      break;
    }
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  g_checksum_update (sum, (const guint8 *) b, n - 32);
  g_checksum_get_digest (sum, (guint8 *) b + n - 32, &dlen);
  g_assert_true (g_file_set_contents (path, b, n, NULL));
}

/* Each forgery of a checkpoint of 2 servers is refused when the job resumes from it, the
 * message naming the forged file and what it holds; the checkpoint unforged resumes. */
static void
test_resume_identity (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *data = NULL, *set_data = NULL;
  g_autofree char *ckpt = g_build_filename (dir, "ckpt", NULL);
  g_autofree char *other = g_build_filename (dir, "other", NULL);
  g_autofree char *set_ckpt = NULL, *set_other = NULL;
  g_autofree char *o = NULL, *e = NULL;

  if (!ps_test_have_pslib ())
    return;
  data = ps_test_small_ctr_data (dir);
  set_data = g_strdup_printf ("data.path=%s", data);
  set_ckpt = g_strdup_printf ("train.checkpoint_dir=%s", ckpt);
  set_other = g_strdup_printf ("train.checkpoint_dir=%s", other);
  /* checkpoint-20 and checkpoint-40 of this job, checkpoint-40 of another */
  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "1"),
                                ARGS (set_data, set_ckpt, "train.steps=40", "train.batch=64",
                                      "train.checkpoint_every=20", "train.log_every=40"),
                                &o, &e),
                   ==, 0);
  g_clear_pointer (&o, g_free);
  g_clear_pointer (&e, g_free);
  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "1"),
                                ARGS (set_data, set_other, "train.steps=40", "train.batch=64",
                                      "train.log_every=40"),
                                &o, &e),
                   ==, 0);
  g_autofree char *c20 = g_build_filename (ckpt, "checkpoint-20", NULL);
  g_autofree char *c40 = g_build_filename (ckpt, "checkpoint-40", NULL);
  g_autofree char *x40 = g_build_filename (other, "checkpoint-40", NULL);
  static const char *const sparse1 = "sparse-emb-server-1-of-2.bin";
  static const char *const sparse0 = "sparse-emb-server-0-of-2.bin";
  static const char *const dense0 = "server-0-of-2.safetensors";
  static const char *const dense1 = "server-1-of-2.safetensors";
  enum { OLDER_SPARSE, OLDER_DENSE, SERVER0_OVER_1, STEP_EDITED, OTHER_JOB, NAN_ROW,
         DUPLICATE_ID, OTHER_SERVER_ID, FIFO, DEV_ZERO, UNFORGED };
  static const struct {
    const char *name, *file, *want;
  } cases[] = {
    [OLDER_SPARSE] = { "older-sparse", sparse1, "holds save_id " },
    [OLDER_DENSE] = { "older-dense", dense0, "a file of another save or job" },
    [SERVER0_OVER_1] = { "server0-over-1", sparse1, "holds server 0 but " },
    [STEP_EDITED] = { "step-edited", "server-0-of-2.safetensors", "is of step 40 but " },
    [OTHER_JOB] = { "other-job", sparse1, "holds save_id " },
    [NAN_ROW] = { "nan-row", sparse1, "not finite" },
    [DUPLICATE_ID] = { "duplicate-id", sparse1, "is saved twice" },
    [OTHER_SERVER_ID] = { "other-server-id", sparse1, "a row of server 0 of 2, but this is "
                                                      "server 1's file" },
    /* issue 49 item 8: "missing" before, and a FIFO must not block the load */
    [FIFO] = { "fifo", sparse1, "is not a regular file (a FIFO)" },
    [DEV_ZERO] = { "dev-zero", sparse1, "is not a regular file (a link to a character device)" },
    [UNFORGED] = { "unforged", NULL, NULL },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *root = g_build_filename (dir, cases[i].name, NULL);
      g_autofree char *to = g_build_filename (root, "checkpoint-40", NULL);
      g_autofree char *set_root = g_strdup_printf ("train.checkpoint_dir=%s", root);
      g_autofree char *target = cases[i].file ? g_build_filename (to, cases[i].file, NULL) : NULL;
      copy_dir (c40, to);
      switch (i)
        {
        case OLDER_SPARSE:
          {
            g_autofree char *from = g_build_filename (c20, cases[i].file, NULL);
            copy_file (from, target);
            break;
          }
        case OLDER_DENSE: /* both: the shards agree with each other, not with job.json */
          for (int k = 0; k < 2; k++)
            {
              const char *name = k == 0 ? dense0 : dense1;
              g_autofree char *from = g_build_filename (c20, name, NULL);
              g_autofree char *into = g_build_filename (to, name, NULL);
              copy_file (from, into);
            }
          break;
        case SERVER0_OVER_1:
          {
            g_autofree char *from = g_build_filename (c40, sparse0, NULL);
            copy_file (from, target);
            break;
          }
        case STEP_EDITED:
          {
            g_autofree char *job = g_build_filename (to, "job.json", NULL);
            gsize len;
            g_autofree char *text = NULL;
            g_assert_true (g_file_get_contents (job, &text, &len, NULL));
            char *step = strstr (text, "\"step\" : \"40\"");
            g_assert_nonnull (step);
            memcpy (step + strlen ("\"step\" : \""), "39", 2);
            g_assert_true (g_file_set_contents (job, text, len, NULL));
            break;
          }
        case OTHER_JOB:
          {
            g_autofree char *from = g_build_filename (x40, cases[i].file, NULL);
            copy_file (from, target);
            break;
          }
        case NAN_ROW:
          forge_rows (target, EDIT_NAN, 0);
          break;
        case DUPLICATE_ID:
          forge_rows (target, EDIT_DUPLICATE, 0);
          break;
        case OTHER_SERVER_ID:
          forge_rows (target, EDIT_OTHER_SERVER, 1000000);
          break;
        case FIFO:
          g_assert_cmpint (g_unlink (target), ==, 0);
          g_assert_cmpint (mkfifo (target, 0644), ==, 0);
          break;
        case DEV_ZERO:
          g_assert_cmpint (g_unlink (target), ==, 0);
          g_assert_cmpint (symlink ("/dev/zero", target), ==, 0);
          break;
        }
      g_autofree char *out = NULL, *err = NULL;
      int status = ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "1"),
                                ARGS (set_data, set_root, "train.steps=60", "train.batch=64",
                                      "train.log_every=60", "train.resume=true"),
                                &out, &err);
      g_autofree char *all = g_strconcat (out, err, NULL);
      if (i == UNFORGED)
        {
          g_assert_cmpint (status, ==, 0);
          g_assert_nonnull (strstr (all, "(step 40, written by 2 servers)"));
          continue;
        }
      g_test_message ("%s: refused with exit %d", cases[i].name, status);
      g_assert_cmpint (status, !=, 0);
      if (strstr (all, target) == NULL || strstr (all, cases[i].want) == NULL)
        g_error ("%s: no message naming %s with '%s'", cases[i].name, target, cases[i].want);
      g_assert_null (strstr (all, "step 60/60"));
    }
  ks_test_rmtree (dir);
}

/* With the dense part on the workers ([strategy] dense = allreduce, worker 0's checkpoint
 * under dense/): an older dense part in a newer job directory is refused naming it. */
static void
test_resume_identity_allreduce (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *data = NULL, *set_data = NULL, *set_ckpt = NULL;
  g_autofree char *ckpt = g_build_filename (dir, "ckpt", NULL);
  g_autofree char *o = NULL, *e = NULL, *o2 = NULL, *e2 = NULL;

  if (!ps_test_have_pslib ())
    return;
  data = ps_test_small_ctr_data (dir);
  set_data = g_strdup_printf ("data.path=%s", data);
  set_ckpt = g_strdup_printf ("train.checkpoint_dir=%s", ckpt);
  g_assert_cmpint (ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "1"),
                                ARGS (set_data, set_ckpt, "strategy.dense=allreduce",
                                      "train.steps=40", "train.batch=64",
                                      "train.checkpoint_every=20", "train.log_every=40"),
                                &o, &e),
                   ==, 0);
  g_autofree char *old = g_build_filename (ckpt, "checkpoint-20", "dense", "checkpoint-20", NULL);
  g_autofree char *mine = g_build_filename (ckpt, "checkpoint-40", "dense", "checkpoint-40", NULL);
  g_autofree char *planted = g_build_filename (ckpt, "checkpoint-40", "dense", "checkpoint-20", NULL);
  g_assert_true (g_file_test (mine, G_FILE_TEST_IS_DIR));
  ks_test_rmtree (mine);
  copy_dir (old, planted);
  int status = ps_test_run (ARGS ("launch", "--servers", "2", "--workers", "1"),
                            ARGS (set_data, set_ckpt, "strategy.dense=allreduce",
                                  "train.steps=60", "train.batch=64", "train.log_every=60",
                                  "train.resume=true"),
                            &o2, &e2);
  g_autofree char *all = g_strconcat (o2, e2, NULL);
  g_assert_cmpint (status, !=, 0);
  g_autofree char *want = g_strdup_printf ("%s holds save ", planted);
  g_assert_nonnull (strstr (all, want));
  g_assert_nonnull (strstr (all, "of step 20 but "));
  g_assert_nonnull (strstr (all, "a dense part of another save"));
  ks_test_rmtree (dir);
}

/* One push record of table emb (embedx_dim 8): id, show 1, click 0, gradient `g` in
 * embed_w. */
static gsize
push_record (guint8 *record, guint64 id, float g)
{
  float show = 1, click = 0;
  memset (record, 0, 16 + 9 * 4);
  memcpy (record, &id, 8);
  memcpy (record + 8, &show, 4);
  memcpy (record + 12, &click, 4);
  memcpy (record + 16, &g, 4);
  return 16 + 9 * 4;
}

/* Requests a token holder may forge, each once, as worker 0 or 1 of a running job: a save
 * and a shrink from worker 1, 40 shrinks from worker 0 (one is due every [data]
 * shrink_every steps), a pull that would create 10,000 rows (one batch pulls at most
 * 64 x 26), a gradient of 9.9e5 per show (above [table.emb] max_grad): all refused and
 * logged, and what is allowed still answered (a pull's repeated ids count once against
 * the rows it may create); the job finishes. */
static void
test_forged_requests (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *data = NULL, *set_data = NULL, *set_ckpt = NULL;
  g_autofree char *ckpt = g_build_filename (dir, "ckpt", NULL);
  PsTestJob j = { 0 };
  char *text = NULL;

  if (!ps_test_have_pslib ())
    return;
  data = ps_test_small_ctr_data (dir);
  set_data = g_strdup_printf ("data.path=%s", data);
  set_ckpt = g_strdup_printf ("train.checkpoint_dir=%s", ckpt);
  ps_test_job_start (&j, 2, 2, ARGS (set_data, set_ckpt, "train.steps=3000", "train.batch=64",
                                     "train.log_every=3000", "data.shrink_every=100000",
                                     "openblas.threads=1", "comm.timeout=20"));
  g_assert_true (ps_test_job_wait_log (&j, 0, "training a ctr model", 30));
  int port = j.ports[0];

  /* a save that worker 0 could ask for, from worker 1 */
  g_autofree char *tmp = g_strdup_printf ("%s/.tmp-checkpoint-5.0123456789abcdef0123456789abcdef"
                                          "@elsewhere-1", ckpt);
  g_assert_cmpint (g_mkdir_with_parents (tmp, 0755), ==, 0);
  /* (until worker 1 said hello: a request before it is refused as such) */
  for (int tries = 0; tries < 300; tries++, g_usleep (100000))
    {
      g_clear_pointer (&text, g_free);
      g_assert_cmpint (ps_test_request_as (port, 1, PS_SAVE, 0, 0, 5, tmp, strlen (tmp), 20,
                                           &text),
                       ==, PS_REPLY_ERROR);
      if (strstr (text, "before hello") == NULL)
        break;
    }
  g_assert_nonnull (strstr (text, "a save from worker 1: only worker 0"));
  g_clear_pointer (&text, g_free);
  g_autofree char *saved = g_build_filename (tmp, "sparse-emb-server-0-of-2.bin", NULL);
  g_assert_false (g_file_test (saved, G_FILE_TEST_EXISTS));

  /* shrinks: none from worker 1, one of 40 from worker 0, none beyond training */
  g_assert_cmpint (ps_test_request_as (port, 1, PS_SHRINK, 0, 0, 100000, NULL, 0, 20, &text),
                   ==, PS_REPLY_ERROR);
  g_assert_nonnull (strstr (text, "a shrink from worker 1"));
  g_clear_pointer (&text, g_free);
  int accepted = 0;
  for (int i = 0; i < 40; i++)
    {
      int r = ps_test_request_as (port, 0, PS_SHRINK, 0, 0, 100000, NULL, 0, 20, &text);
      g_assert_cmpint (r, >=, 0);
      accepted += r == PS_REPLY_OK;
      if (r == PS_REPLY_ERROR)
        g_assert_nonnull (strstr (text, "the last was at step 100000"));
      g_clear_pointer (&text, g_free);
    }
  g_assert_cmpint (accepted, ==, 1);
  g_assert_cmpint (ps_test_request_as (port, 0, PS_SHRINK, 0, 0, 300000, NULL, 0, 20, &text),
                   ==, PS_REPLY_ERROR);
  g_clear_pointer (&text, g_free);

  /* pulls that create rows: 10,000 refused, 100 served */
  g_autofree guint64 *ids = g_new (guint64, 10000);
  for (int i = 0; i < 10000; i++)
    ids[i] = (guint64) (1u << 30) * 2 + 2 * (guint64) i; /* even: server 0's, new */
  g_assert_cmpint (ps_test_request_as (port, 0, PS_PULL_SPARSE, 0, 1, 0, ids,
                                       10000 * sizeof (guint64), 20, &text),
                   ==, PS_REPLY_ERROR);
  g_assert_nonnull (strstr (text, "a pull that would create 10000 rows of table emb, above the "
                                  "1665 one pull may create"));
  g_clear_pointer (&text, g_free);
  g_assert_cmpint (ps_test_request_as (port, 0, PS_PULL_SPARSE, 0, 1, 0, ids,
                                       100 * sizeof (guint64), 20, NULL),
                   ==, PS_REPLY_OK);
  /* an id repeated in one pull makes one row: 1,000 new ids 5 times each (5,000 ids) are
   * within the 1,665 (before: counted 5,000 and refused); 2,000 twice each create 2,000 */
  g_autofree guint64 *repeated = g_new (guint64, 5000);
  for (int i = 0; i < 5000; i++)
    repeated[i] = (guint64) (1u << 31) * 2 + 2 * (guint64) (i % 1000);
  g_assert_cmpint (ps_test_request_as (port, 0, PS_PULL_SPARSE, 0, 1, 0, repeated,
                                       5000 * sizeof (guint64), 20, &text),
                   ==, PS_REPLY_OK);
  g_clear_pointer (&text, g_free);
  for (int i = 0; i < 4000; i++)
    repeated[i] = (guint64) (1u << 31) * 4 + 2 * (guint64) (i % 2000);
  g_assert_cmpint (ps_test_request_as (port, 0, PS_PULL_SPARSE, 0, 1, 0, repeated,
                                       4000 * sizeof (guint64), 20, &text),
                   ==, PS_REPLY_ERROR);
  g_assert_nonnull (strstr (text, "a pull that would create 2000 rows of table emb"));
  g_clear_pointer (&text, g_free);

  /* gradients: 9.9e5 per show refused, 50 applied */
  guint8 record[16 + 9 * 4];
  gsize len = push_record (record, ids[0], 9.9e5f);
  g_assert_cmpint (ps_test_request_as (port, 0, PS_PUSH_SPARSE, 0, 0, 1, record, len, 20, &text),
                   ==, PS_REPLY_ERROR);
  g_assert_nonnull (strstr (text, "above 100 per show"));
  g_assert_nonnull (strstr (text, "[table.emb] max_grad"));
  g_clear_pointer (&text, g_free);
  len = push_record (record, ids[0], 50);
  g_assert_cmpint (ps_test_request_as (port, 0, PS_PUSH_SPARSE, 0, 0, 1, record, len, 20, NULL),
                   ==, PS_REPLY_OK);

  ps_test_job_wait (&j, 300);
  for (int p = 0; p < 4; p++)
    g_assert_cmpint (ps_test_job_status (&j, p), ==, 0);
  g_autofree char *server = ps_test_read_log (&j, 2);
  assert_default_budget (server);
  g_assert_nonnull (strstr (server, "refused a save from worker 1"));
  g_assert_nonnull (strstr (server, "refused a shrink from worker 1"));
  ps_test_job_free (&j);
  ks_test_rmtree (dir);
}

/* A token holder's pulls of 1,000 new ids each (below the per-pull cap) made rows without
 * end (2.4 M in 42 s, the server's memory doubling). With [table.emb] max_rows = 10,000
 * they are refused once server 0 would pass it, naming the table, the server and the key;
 * the job (its ids all made in its first epoch, no shrink) then ends with exit 0. */
static void
test_row_flood (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *data = NULL, *set_data = NULL;
  PsTestJob j = { 0 };
  const int max_rows = 10000, per_pull = 1000;

  if (!ps_test_have_pslib ())
    return;
  data = ps_test_small_ctr_data (dir);
  set_data = g_strdup_printf ("data.path=%s", data);
  ps_test_job_start (&j, 2, 2, ARGS (set_data, "train.steps=1500", "train.batch=64",
                                     "train.log_every=500", "data.shrink_every=100000",
                                     "table.emb.max_rows=10000", "pslib.server_memory_mb=1",
                                     "openblas.threads=1",
                                     "comm.timeout=20"));
  /* 500 steps of 2 x 64 rows: every id of the 20,000 training rows was pulled */
  g_assert_true (ps_test_job_wait_log (&j, 0, "step 500/", 120));
  for (int w = 0; w < 2; w++)
    g_subprocess_send_signal (j.proc[w], SIGSTOP);
  g_autofree guint64 *ids = g_new (guint64, per_pull);
  g_autofree char *text = NULL;
  int accepted = 0, reply = PS_REPLY_OK;
  for (int k = 0; k < 400 && reply == PS_REPLY_OK; k++)
    {
      for (int i = 0; i < per_pull; i++) /* even: server 0's, and new */
        ids[i] = ((guint64) 3 << 40) + 2 * (guint64) (k * per_pull + i);
      g_clear_pointer (&text, g_free);
      reply = ps_test_request_as (j.ports[0], 0, PS_PULL_SPARSE, 0, 1, 0, ids,
                                  per_pull * sizeof (guint64), 20, &text);
      accepted += reply == PS_REPLY_OK;
    }
  for (int w = 0; w < 2; w++)
    g_subprocess_send_signal (j.proc[w], SIGCONT);
  g_test_message ("%d pulls of %d new ids accepted, then: %s", accepted, per_pull, text);
  printf ("# row flood: %d pulls of %d new ids accepted (max_rows %d), then %s\n", accepted,
          per_pull, max_rows, reply == PS_REPLY_OK ? "none refused" : "refused");
  g_assert_cmpint (reply, ==, PS_REPLY_ERROR);
  g_assert_cmpint (accepted, >=, 1);
  g_assert_cmpint (accepted, <=, max_rows / per_pull);
  g_assert_nonnull (strstr (text, "a pull that would create 1000 rows of table emb on server 0"));
  g_assert_nonnull (strstr (text, "of the 10000 it may ([table.emb] max_rows)"));
  ps_test_job_wait (&j, 300);
  for (int p = 0; p < 4; p++)
    g_assert_cmpint (ps_test_job_status (&j, p), ==, 0);
  g_autofree char *server = ps_test_read_log (&j, 2);
  /* the table's own max_rows wins over the server's budget (1 MiB: 9709 rows) */
  g_assert_nonnull (strstr (server, "table emb holds at most 10000 rows"));
  g_assert_nonnull (strstr (server, "refused a sparse pull from worker 0"));
  double held = ps_test_value_after (server, "holds ");
  g_assert_cmpfloat (held, <=, max_rows);
  ps_test_job_free (&j);
  ks_test_rmtree (dir);
}

/* [pslib] server_memory_mb = 1: the table of max_rows 0 holds what 1 MiB holds, and the
 * server's line says where the number comes from. */
static void
test_server_memory (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *data = NULL, *set_data = NULL;
  PsTestJob j = { 0 };

  if (!ps_test_have_pslib ())
    return;
  data = ps_test_small_ctr_data (dir);
  set_data = g_strdup_printf ("data.path=%s", data);
  ps_test_job_start (&j, 1, 1, ARGS (set_data, "train.steps=20", "train.batch=64",
                                     "pslib.server_memory_mb=1", "openblas.threads=1",
                                     "comm.timeout=60"));
  ps_test_job_wait (&j, 300);
  g_autofree char *server = ps_test_read_log (&j, 1);
  for (int p = 0; p < 2; p++)
    g_assert_cmpint (ps_test_job_status (&j, p), ==, 0);
  const char *line = strstr (server, "table emb holds at most ");
  g_assert_nonnull (line);
  gint64 rows = 0;
  int row_bytes = 0;
  g_assert_cmpint (sscanf (line, "table emb holds at most %" G_GINT64_FORMAT " rows (%*f MB at %d "
                           "bytes a row", &rows, &row_bytes), ==, 2);
  g_test_message ("%" G_GINT64_FORMAT " rows of %d bytes", rows, row_bytes);
  g_assert_cmpint (rows, ==, (1 << 20) / row_bytes);
  g_assert_nonnull (strstr (line, "[table.emb] max_rows = 0: [pslib] server_memory_mb = 1 and "
                                  "1 table)"));
  ps_test_job_free (&j);
  ks_test_rmtree (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  ps_test_setup_pslib ();
  g_test_add_func ("/pslib/resume-identity", test_resume_identity);
  g_test_add_func ("/pslib/resume-identity-allreduce", test_resume_identity_allreduce);
  g_test_add_func ("/pslib/forged-requests", test_forged_requests);
  g_test_add_func ("/pslib/row-flood", test_row_flood);
  g_test_add_func ("/pslib/server-memory", test_server_memory);
  return g_test_run ();
}
