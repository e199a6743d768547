/* ksdist launch and data-parallel training, with real worker processes over 127.0.0.1:
 * N workers with batch b end where one process with batch N·b does; LocalSGD with k = 1
 * is gradient allreduce; a killed worker stops the job, named; a bad config fails once;
 * two nodes meeting at a TCP store train as one launch does; parameter-server jobs get
 * their roles. */
#include "testutil.h"

#include <arpa/inet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <glib/gstdio.h>
#include <unistd.h>

static const char *const plugins[] = { "openblas", "optim", "store", "roles", "gloo", "shm",
                                       "collective", NULL };

#define ARGS(...) ((const char *const[]) { __VA_ARGS__, NULL })

/* The float32 data of a checkpoint's safetensors file, after its JSON header. */
static float *
checkpoint_floats (const char *dir, gsize *n)
{
  g_autofree char *file = g_build_filename (dir, "checkpoint-20", "model.safetensors", NULL);
  return ks_test_safetensors_floats (file, n);
}

/* The arguments that train 20 steps with the --set values `extra`, checkpointing to
 * `ckpt` (NULL: as the config says): `command` is "train" or a launch command line. */
static GPtrArray *
train_args (const char *ckpt, const char *const *command, int batch, const char *const *extra)
{
  GPtrArray *args = g_ptr_array_new_with_free_func (g_free);
  const char *common[] = { "train.steps=20", "train.log_every=20", "log.level=warning",
                           "openblas.threads=1" };

  for (int i = 0; command[i] != NULL; i++)
    g_ptr_array_add (args, g_strdup (command[i]));
  for (guint i = 0; i < G_N_ELEMENTS (common); i++)
    {
      g_ptr_array_add (args, g_strdup ("--set"));
      g_ptr_array_add (args, g_strdup (common[i]));
    }
  g_ptr_array_add (args, g_strdup ("--set"));
  g_ptr_array_add (args, g_strdup_printf ("train.batch=%d", batch));
  if (ckpt != NULL)
    {
      g_ptr_array_add (args, g_strdup ("--set"));
      g_ptr_array_add (args, g_strdup_printf ("train.checkpoint_dir=%s", ckpt));
    }
  for (int i = 0; extra != NULL && extra[i] != NULL; i++)
    {
      g_ptr_array_add (args, g_strdup ("--set"));
      g_ptr_array_add (args, g_strdup (extra[i]));
    }
  g_ptr_array_add (args, NULL);
  return args;
}

/* Trains and returns where the checkpoint went: with `launch_n` workers via ksdist
 * launch (0: one process with `ksdist train`). */
static char *
train (const char *dir, const char *name, int launch_n, int batch, const char *const *extra)
{
  g_autofree char *out = NULL, *err = NULL;
  char *ckpt = g_build_filename (dir, name, NULL);
  g_autofree char *n = g_strdup_printf ("%d", launch_n);
  g_autoptr (GPtrArray) args
      = train_args (ckpt, launch_n > 0 ? ARGS ("launch", "-n", n) : ARGS ("train"), batch, extra);
  int status = ks_test_run_ksdist ((const char *const *) args->pdata, NULL, plugins, &out, &err);
  if (status != 0)
    g_error ("ksdist failed (%d):\n%s%s", status, out, err);
  return ckpt;
}

static double
max_difference (const char *a, const char *b)
{
  gsize na, nb;
  g_autofree float *x = checkpoint_floats (a, &na), *y = checkpoint_floats (b, &nb);
  g_assert_cmpuint (na, ==, nb);
  return ks_test_max_difference (x, y, na);
}

/* Parameters and Adam's moments after 20 steps: 3 workers of 32 rows against one process
 * of 96. They differ only by the order of float sums. The same with 1 KiB buckets (two
 * here, the first averaged on the communication thread while backward goes on), without
 * overlap, and through Gloo instead of shared memory (auto's choice on one host). */
static void
test_equivalence (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *one = train (dir, "one", 0, 96, NULL);
  g_autofree char *three = train (dir, "three", 3, 32, NULL);
  g_autofree char *buckets = train (dir, "buckets", 3, 32, ARGS ("collective.bucket_kb=1"));
  g_autofree char *serial = train (dir, "serial", 3, 32, ARGS ("collective.overlap=false"));
  g_autofree char *gloo = train (dir, "gloo", 3, 32, ARGS ("comm.backend=gloo"));
  double diff = max_difference (one, three), diff_buckets = max_difference (one, buckets);
  double diff_serial = max_difference (one, serial), diff_gloo = max_difference (one, gloo);

  g_test_message ("largest difference of a parameter or moment: %g (1 KiB buckets %g, no "
                  "overlap %g, Gloo %g)", diff, diff_buckets, diff_serial, diff_gloo);
  g_assert_cmpfloat (diff, <=, 1e-5);
  g_assert_cmpfloat (diff_gloo, <=, 1e-5);
  g_assert_cmpfloat (diff_buckets, <=, 1e-5);
  g_assert_cmpfloat (diff_serial, <=, 1e-5);
  g_assert_cmpfloat (diff, >=, 0); /* compared something */
  ks_test_rmtree (dir);
}

/* Clipping by global norm is the distributed-optimizer base's, after the average: 3
 * workers of 32 rows clip as one process of 96 does (clipped before the average, each
 * worker's own larger norm would shrink its share differently). The bound binds: the
 * clipped run ends far from the unclipped one. */
static void
test_clip_equivalence (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  const char *const *clip = ARGS ("train.optimizer=sgd", "optim.lr=0.5", "optim.clip_norm=0.05");
  g_autofree char *free_run = train (dir, "free", 0, 96, ARGS ("train.optimizer=sgd", "optim.lr=0.5"));
  g_autofree char *one = train (dir, "one", 0, 96, clip);
  g_autofree char *three = train (dir, "three", 3, 32, clip);
  double diff = max_difference (one, three), bound = max_difference (one, free_run);

  g_test_message ("clipped: 3 workers against one process %g; clipped against not %g", diff,
                  bound);
  g_assert_cmpfloat (bound, >, 1e-3);
  g_assert_cmpfloat (diff, <=, 1e-5);
  ks_test_rmtree (dir);
}

/* float16 from a loss scale that overflows, 2 workers of 48 rows against one process of
 * 96. A worker's loss is the mean of its 48 rows, so at half the scale each row's
 * gradient has the same 16-bit value as the one process's: the same steps overflow, and
 * since every worker decides on the averaged gradients (an inf anywhere reaches all),
 * the workers skip exactly the steps the one process skips and end where it ends. */
static void
test_amp_equivalence (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *one = train (dir, "one", 0, 96,
                                ARGS ("amp.dtype=fp16", "amp.initial_scale=1e12",
                                      "amp.growth_interval=4"));
  g_autofree char *two = train (dir, "two", 2, 48,
                                ARGS ("amp.dtype=fp16", "amp.initial_scale=5e11",
                                      "amp.growth_interval=4"));
  g_autofree char *one_latest = ks_checkpoint_latest (one);
  g_autofree char *two_latest = ks_checkpoint_latest (two);
  g_autoptr (GHashTable) a = ks_checkpoint_metadata (one_latest, NULL);
  g_autoptr (GHashTable) b = ks_checkpoint_metadata (two_latest, NULL);

  g_assert_nonnull (a);
  g_assert_nonnull (b);
  g_assert_cmpstr (g_hash_table_lookup (a, "loss_scale_skipped"), !=, "0");
  g_assert_cmpstr (g_hash_table_lookup (a, "loss_scale_skipped"), ==,
                   g_hash_table_lookup (b, "loss_scale_skipped"));
  g_assert_cmpstr (g_hash_table_lookup (a, "loss_scale_good_steps"), ==,
                   g_hash_table_lookup (b, "loss_scale_good_steps"));
  g_assert_cmpfloat (g_ascii_strtod (g_hash_table_lookup (a, "loss_scale"), NULL), ==,
                     2 * g_ascii_strtod (g_hash_table_lookup (b, "loss_scale"), NULL));
  g_assert_cmpfloat (max_difference (one, two), <=, 1e-5);
  ks_test_rmtree (dir);
}

/* With plain SGD, averaging the parameters after every step is averaging the gradients. */
static void
test_local_sgd_k1 (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *grads = train (dir, "grads", 2, 32,
                                  ARGS ("train.optimizer=sgd", "optim.lr=0.3", "collective.strategy=grad_allreduce"));
  g_autofree char *k1 = train (dir, "k1", 2, 32,
                               ARGS ("train.optimizer=sgd", "optim.lr=0.3", "collective.strategy=local_sgd",
                                     "collective.local_sgd_k=1"));
  g_autofree char *k4 = train (dir, "k4", 2, 32,
                               ARGS ("train.optimizer=sgd", "optim.lr=0.3", "collective.strategy=local_sgd",
                                     "collective.local_sgd_k=4"));
  double diff = max_difference (grads, k1), diff4 = max_difference (grads, k4);

  g_test_message ("against grad_allreduce: local_sgd k=1 %g, k=4 %g", diff, diff4);
  g_assert_cmpfloat (diff, <=, 1e-6);
  g_assert_cmpfloat (diff4, >, 1e-5); /* k = 4 really is something else */
  ks_test_rmtree (dir);
}

/* A port nothing listens on now. */
static int
free_port (void)
{
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof addr;
  int fd = socket (AF_INET, SOCK_STREAM, 0), port;
  g_assert_cmpint (bind (fd, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (getsockname (fd, (struct sockaddr *) &addr, &len), ==, 0);
  port = ntohs (addr.sin_port);
  close (fd);
  return port;
}

/* One job as two nodes on this machine, meeting at node 0's TCP store (node 1 starts
 * first and waits for it), trains exactly as two workers of one launch do, with either
 * store. */
static void
test_two_nodes (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *master = g_strdup_printf ("127.0.0.1:%d", free_port ());
  g_autofree char *file = train (dir, "file", 2, 32, NULL);
  g_autofree char *tcp = train (dir, "tcp", 2, 32, ARGS ("comm.store=tcp"));
  g_autofree char *nodes = g_build_filename (dir, "nodes", NULL);
  g_autofree char *out = NULL, *err = NULL;
  const char *const token[] = { "KS_STORE_TOKEN=2f9c0d41", NULL };
  int status = 0;

  g_autoptr (GPtrArray) node1 = train_args (
      nodes, ARGS ("launch", "-n", "1", "--nnodes", "2", "--node-rank", "1", "--master", master),
      32, NULL);
  g_autoptr (GPtrArray) node0 = train_args (
      nodes, ARGS ("launch", "-n", "1", "--nnodes", "2", "--node-rank", "0", "--master", master),
      32, NULL);
  GPid pid1 = ks_test_spawn_ksdist ((const char *const *) node1->pdata, token, plugins, NULL, NULL);
  g_usleep (300 * 1000);
  int status0 = ks_test_run_ksdist ((const char *const *) node0->pdata, token, plugins, &out, &err);
  waitpid (pid1, &status, 0);
  if (status0 != 0)
    g_error ("node 0 failed (%d):\n%s%s", status0, out, err);
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  g_assert_cmpfloat (max_difference (file, tcp), ==, 0);
  g_assert_cmpfloat (max_difference (file, nodes), ==, 0);

  /* as a scheduler starts them (torchrun's variables, no agent store): rank 0 serves the
   * TCP store itself at MASTER_ADDR:MASTER_PORT */
  g_autofree char *env_run = g_build_filename (dir, "env", NULL);
  g_autoptr (GPtrArray) rank0 = train_args (env_run, ARGS ("train"), 32, NULL);
  g_autofree char *port = g_strdup_printf ("MASTER_PORT=%s", strrchr (master, ':') + 1);
  const char *const env1[] = { "KS_STORE_TOKEN=2f9c0d41", "RANK=1", "WORLD_SIZE=2",
                               "MASTER_ADDR=127.0.0.1", port, NULL };
  const char *const env0[] = { "KS_STORE_TOKEN=2f9c0d41", "RANK=0", "WORLD_SIZE=2",
                               "MASTER_ADDR=127.0.0.1", port, NULL };
  pid1 = ks_test_spawn_ksdist ((const char *const *) rank0->pdata, env1, plugins, NULL, NULL);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  status0 = ks_test_run_ksdist ((const char *const *) rank0->pdata, env0, plugins, &out, &err);
  waitpid (pid1, &status, 0);
  if (status0 != 0)
    g_error ("rank 0 failed (%d):\n%s%s", status0, out, err);
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  g_assert_cmpfloat (max_difference (file, env_run), ==, 0);
  ks_test_rmtree (dir);
}

/* The argv of `launcher` ARGS ksdist train with train_args' settings into `ckpt`. */
static GPtrArray *
foreign_args (const char *const *launcher, const char *ckpt)
{
  g_autoptr (GPtrArray) settings = train_args (ckpt, ARGS ("train"), 32, NULL);
  GPtrArray *argv = g_ptr_array_new_with_free_func (g_free);
  for (int i = 0; launcher[i] != NULL; i++)
    g_ptr_array_add (argv, g_strdup (launcher[i]));
  g_ptr_array_add (argv, g_strdup (g_getenv ("KSDIST")));
  for (guint i = 0; i < settings->len - 1; i++)
    g_ptr_array_add (argv, g_strdup (g_ptr_array_index (settings, i)));
  g_ptr_array_add (argv, NULL);
  return argv;
}

/* Whether `program` is here and runs (with `probe`, an option that only prints), else
 * skips naming the package. */
static gboolean
have_launcher (const char *program, const char *probe, const char *package)
{
  g_autofree char *path = g_find_program_in_path (program);
  g_autofree char *out = NULL, *err = NULL;
  int status = -1;
  const char *argv[] = { program, probe, NULL };

  if (path != NULL)
    g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err,
                  &status, NULL);
  if (path != NULL && g_spawn_check_wait_status (status, NULL))
    return TRUE;
  g_autofree char *why = g_strdup_printf ("%s is not installed or does not run (apt-get "
                                          "install %s)", program, package);
  g_test_skip (why);
  return FALSE;
}

/* Under torchrun (its agent's store, PyTorch's protocol) and under mpirun (a file store
 * named by mpirun's job), `ksdist train` with no extra flag ends bitwise where `ksdist
 * launch -n 2` does. torchrun gets --redirects/--tee: with Debian 12's Python 3.11, its
 * defaults fail before starting anything (pytorch issue 92319). */
static void
test_foreign_launchers (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *launched = train (dir, "launch", 2, 32, NULL);
  g_autofree char *port = g_strdup_printf ("%d", free_port ());
  const char *const root[] = { "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                               NULL };
  struct {
    const char *program, *probe, *package, *name;
    const char *const *argv;
  } launchers[] = {
    { "torchrun", "--help", "python3-torch", "torchrun",
      ARGS ("torchrun", "--nproc_per_node", "2", "--no_python", "--redirects", "1", "--tee",
            "1", "--master_port", port) },
    { "mpirun", "--version", "openmpi-bin", "mpirun", ARGS ("mpirun", "-n", "2", "--oversubscribe") },
  };

  for (guint i = 0; i < G_N_ELEMENTS (launchers); i++)
    {
      if (!have_launcher (launchers[i].program, launchers[i].probe, launchers[i].package))
        continue;
      g_autofree char *ckpt = g_build_filename (dir, launchers[i].name, NULL);
      g_autoptr (GPtrArray) argv = foreign_args (launchers[i].argv, ckpt);
      g_autofree char *out = NULL, *err = NULL;
      int status = ks_test_run_program ((const char *const *) argv->pdata, root, plugins, &out,
                                        &err);
      g_test_message ("%s: %s%s", launchers[i].name, out, err);
      g_assert_cmpint (status, ==, 0);
      g_assert_cmpfloat (max_difference (launched, ckpt), ==, 0);
    }
  ks_test_rmtree (dir);
}

/* Checkpoints of a collective job: worker 0 writes them every 5 steps, keeping the
 * newest 2, with the epoch in their metadata; a job stopped at step 10 and resumed ends
 * bitwise where an uninterrupted one does, with gradient allreduce and with LocalSGD
 * (k = 5: its checkpoints are exact where the parameters were just averaged). */
static void
test_resume (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  const char *const *sgd = ARGS ("data.samples=200", "train.checkpoint_every=5", "train.keep=2");
  const char *const *local = ARGS ("data.samples=200", "collective.strategy=local_sgd",
                                   "collective.local_sgd_k=5", "train.optimizer=sgd");
  g_autofree char *whole = train (dir, "whole", 2, 32, sgd);
  g_autofree char *half = train (dir, "half", 2, 32,
                                 ARGS ("data.samples=200", "train.checkpoint_every=5",
                                       "train.keep=2", "train.steps=10"));
  g_autofree char *ten = g_build_filename (half, "checkpoint-10", NULL);
  g_autofree char *fifteen = g_build_filename (whole, "checkpoint-15", NULL);
  g_autofree char *ten_whole = g_build_filename (whole, "checkpoint-10", NULL);
  g_autofree char *last = g_build_filename (whole, "checkpoint-20", NULL);
  g_autoptr (GHashTable) meta = ks_checkpoint_metadata (last, NULL);

  g_assert_true (g_file_test (fifteen, G_FILE_TEST_IS_DIR));
  g_assert_false (g_file_test (ten_whole, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (ten, G_FILE_TEST_IS_DIR));
  g_assert_nonnull (meta);
  /* 20 steps of 2 x 32 rows over 200 samples: epochs 0 to 5 done */
  g_assert_cmpstr (g_hash_table_lookup (meta, "epoch"), ==, "5");
  g_free (train (dir, "half", 2, 32,
                 ARGS ("data.samples=200", "train.checkpoint_every=5", "train.keep=2",
                       "train.resume=true")));
  g_assert_cmpfloat (max_difference (whole, half), ==, 0);

  g_autofree char *local_whole = train (dir, "local-whole", 2, 32, local);
  g_autofree char *local_half = train (dir, "local-half", 2, 32,
                                       ARGS ("data.samples=200", "collective.strategy=local_sgd",
                                             "collective.local_sgd_k=5", "train.optimizer=sgd",
                                             "train.steps=10"));
  g_free (train (dir, "local-half", 2, 32,
                 ARGS ("data.samples=200", "collective.strategy=local_sgd",
                       "collective.local_sgd_k=5", "train.optimizer=sgd", "train.resume=true")));
  g_assert_cmpfloat (max_difference (local_whole, local_half), ==, 0);
  ks_test_rmtree (dir);
}

/* A worker that cannot load the checkpoint worker 0 resumes from (here its
 * checkpoint_dir is empty, as on a machine without the shared disk): both workers stop,
 * each saying which worker could not and why, rather than one training on alone. */
static void
test_resume_missing (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *ckpt = train (dir, "ckpt", 2, 32, NULL);
  g_autofree char *empty = g_build_filename (dir, "empty", NULL);
  g_autofree char *address = g_strdup_printf ("comm.store_address=127.0.0.1:%d", free_port ());
  g_autofree char *elsewhere = g_strdup_printf ("KS_TRAIN_CHECKPOINT_DIR=%s", empty);
  g_autoptr (GPtrArray) args = train_args (NULL, ARGS ("train"), 32,
                                           ARGS ("comm.store=tcp", address, "train.resume=true",
                                                 "train.steps=25", "comm.timeout=20"));
  g_autofree char *here = g_strdup_printf ("KS_TRAIN_CHECKPOINT_DIR=%s", ckpt);
  const char *const env1[] = { "KS_STORE_TOKEN=77", "RANK=1", "WORLD_SIZE=2", elsewhere, NULL };
  const char *const env0[] = { "KS_STORE_TOKEN=77", "RANK=0", "WORLD_SIZE=2", here, NULL };
  g_autofree char *out = NULL, *err = NULL;
  int err_fd, status;

  g_assert_cmpint (g_mkdir (empty, 0700), ==, 0);
  GPid pid1 = ks_test_spawn_ksdist ((const char *const *) args->pdata, env1, plugins, NULL, &err_fd);
  int status0 = ks_test_run_ksdist ((const char *const *) args->pdata, env0, plugins, &out, &err);
  g_autofree char *err1 = ks_test_read_all (err_fd);
  waitpid (pid1, &status, 0);
  g_test_message ("worker 0: %s\nworker 1: %s", err, err1);
  g_assert_cmpint (status0, ==, 1);
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 1);
  g_autofree char *path = g_build_filename (empty, "checkpoint-20", NULL);
  g_autofree char *want1 = g_strdup_printf ("worker 1 cannot resume from %s, the newest "
                                            "checkpoint worker 0 finds", path);
  g_assert_nonnull (strstr (err1, want1));
  g_assert_nonnull (strstr (err, "worker 1 cannot load"));
  g_assert_nonnull (strstr (err, "so no worker resumes"));
  ks_test_rmtree (dir);
}

/* A node job without a token, without --master, or missing a node says so. */
static void
test_node_errors (void)
{
  g_autofree char *master = g_strdup_printf ("127.0.0.1:%d", free_port ());
  const char *const token[] = { "KS_STORE_TOKEN=2f9c0d41", NULL };
  g_autofree char *out = NULL, *err = NULL;
  int status;

  g_unsetenv ("KS_STORE_TOKEN");
  status = ks_test_run_ksdist (ARGS ("launch", "-n", "1", "--nnodes", "2", "--master", master),
                               NULL, plugins, &out, &err);
  g_assert_cmpint (status, ==, 1);
  g_assert_nonnull (strstr (err, "a job on 2 nodes needs a token every node shares: set "
                                 "KS_STORE_TOKEN"));
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&out, g_free);
  status = ks_test_run_ksdist (ARGS ("launch", "--nnodes", "2", "--node-rank", "1"), token,
                               plugins, &out, &err);
  g_assert_cmpint (status, ==, 2);
  g_assert_nonnull (strstr (err, "--nnodes 2 needs --master HOST:PORT"));
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&out, g_free);
  status = ks_test_run_ksdist (ARGS ("launch", "-n", "1", "--nnodes", "2", "--master", master,
                                     "--set", "comm.timeout=0.5"),
                               token, plugins, &out, &err);
  g_test_message ("%s", err);
  g_assert_cmpint (status, ==, 1);
  g_assert_nonnull (strstr (err, "not every node's launcher came"));
  g_assert_nonnull (strstr (err, "keys 'launch/node/1' did not appear within 500 ms"));
}

/* A parameter-server job whose mode has no use for a server (collective) is refused by
 * the launcher, once, before any process starts. */
static void
test_servers (void)
{
  g_autofree char *out = NULL, *err = NULL;
  int status = ks_test_run_ksdist (ARGS ("launch", "--servers", "1", "--workers", "2", "--set",
                                         "comm.timeout=5"),
                                   NULL, plugins, &out, &err);
  g_test_message ("%s%s", out, err);
  g_assert_cmpint (status, ==, 2);
  g_assert_nonnull (strstr (err, "ksdist: --servers 1: [job] mode = collective has no "
                                 "parameter servers"));
  g_assert_null (strstr (out, "[rank "));
}

/* fleetrun's lists with IPv6 endpoints ([V6]:PORT, the brackets taken off by the
 * library's ks_comm_address_host): hosts told apart, the job's store at node 0's. */
static void
test_endpoints_ipv6 (void)
{
  g_autofree char *out = NULL, *err = NULL;
  const char *env[] = { "KS_STORE_TOKEN=", NULL };
  int status = ks_test_run_ksdist (ARGS ("launch", "--node-rank", "1", "--servers",
                                         "[2001:db8::1]:6170", "--workers",
                                         "[2001:db8::1]:6171,[2001:db8::2]:6171", "--set",
                                         "job.mode=transpiler"),
                                   env, plugins, &out, &err);
  g_test_message ("%s%s", out, err);
  g_assert_cmpint (status, ==, 1); /* no token for a job on 2 nodes: nothing starts */
  g_assert_nonnull (strstr (err, "fleetrun's lists name 2 hosts; this is node 1 (2001:db8::2): "
                                 "0 servers, 1 worker; the job's store at [2001:db8::1]:29500"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  status = ks_test_run_ksdist (ARGS ("launch", "--servers", "[2001:db8::1:6170", "--workers",
                                     "[2001:db8::2]:6171", "--set", "job.mode=transpiler"),
                               env, plugins, &out, &err);
  g_assert_cmpint (status, ==, 2);
  g_assert_nonnull (strstr (err, "item 1 '[2001:db8::1:6170' is not IP:PORT"));
}

/* `launch -- PROGRAM`: any program, with torchrun's variables, under torchrun's and
 * fleetrun's spellings of the options; its failure is named as a worker's. */
static void
test_program (void)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *logs = g_build_filename (dir, "logs", NULL);
  g_autofree char *log1 = g_build_filename (logs, "workerlog.1", NULL);
  g_autofree char *out = NULL, *err = NULL, *text = NULL;
  const char *say = "echo rank $RANK of $WORLD_SIZE, local $LOCAL_RANK of $LOCAL_WORLD_SIZE, "
                    "meets at $MASTER_ADDR:$MASTER_PORT, paddle id $PADDLE_TRAINER_ID";
  int status = ks_test_run_ksdist (ARGS ("launch", "--nproc_per_node", "2", "--log_dir", logs,
                                         "--", "sh", "-c", say),
                                   NULL, plugins, &out, &err);
  g_test_message ("%s%s", out, err);
  g_assert_cmpint (status, ==, 0);
  g_assert_nonnull (strstr (out, "[rank 0] rank 0 of 2, local 0 of 2, meets at 127.0.0.1:"));
  g_assert_nonnull (strstr (out, "[rank 1] rank 1 of 2, local 1 of 2, meets at 127.0.0.1:"));
  g_assert_nonnull (strstr (out, "paddle id 1"));
  g_assert_true (g_file_get_contents (log1, &text, NULL, NULL));
  g_assert_nonnull (strstr (text, "rank 1 of 2"));

  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  status = ks_test_run_ksdist (ARGS ("launch", "--nproc-per-node", "3", "--", "sh", "-c",
                                     "[ $RANK != 2 ] || exit 3; sleep 30"),
                               NULL, plugins, &out, &err);
  g_assert_cmpint (status, ==, 1);
  g_assert_nonnull (strstr (err, "ksdist: launch: worker 2 exited with status 3"));

  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  status = ks_test_run_ksdist (ARGS ("launch", "--master", "h:1", "--master-port", "2", "--",
                                     "true"),
                               NULL, plugins, &out, &err);
  g_assert_cmpint (status, ==, 2);
  g_assert_nonnull (strstr (err, "give --master (or --rdzv-endpoint) or --master-addr"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  status = ks_test_run_ksdist (ARGS ("launch", "--"), NULL, plugins, &out, &err);
  g_assert_cmpint (status, ==, 2);
  g_assert_nonnull (strstr (err, "nothing after --"));
  ks_test_rmtree (dir);
}

/* The pid of the launcher's child of rank `rank`, or 0. */
static GPid
find_worker (GPid launcher, int rank)
{
  g_autofree char *want = g_strdup_printf ("PADDLE_TRAINER_ID=%d", rank);
  return ks_test_find_child (launcher, want);
}

/* Worker 2 of 3 gets `sig` mid-training with a 5 s timeout; returns the launcher's
 * stderr and how long after the signal it ended, asserting that it exited 1. */
static char *
signal_worker (int sig, double *seconds)
{
  g_autofree char *dir = ks_test_tmpdir ();
  g_autofree char *set_logs = g_build_filename (dir, "logs", NULL);
  g_autofree char *log2 = g_build_filename (set_logs, "workerlog.2", NULL);
  int err_fd;
  GPid launcher = ks_test_spawn_ksdist (ARGS ("launch", "-n", "3", "--log-dir", set_logs, "--set",
                                              "train.steps=100000000", "--set", "comm.timeout=5",
                                              "--set", "openblas.threads=1"),
                                        NULL, plugins, NULL, &err_fd);
  GPid worker = 0;
  gint64 start = g_get_monotonic_time (), signalled_at;
  int status = 0;
  GString *err = g_string_new (NULL);
  char buf[4096];
  gssize got;

  /* wait until worker 2 is training (its log has its first line) */
  for (int i = 0; i < 600 && worker == 0; i++)
    {
      g_autofree char *text = NULL;
      if (g_file_get_contents (log2, &text, NULL, NULL) && strstr (text, "worker 2 of 3"))
        worker = find_worker (launcher, 2);
      else
        g_usleep (50000);
    }
  g_assert_cmpint (worker, >, 0);
  g_assert_cmpint (kill (worker, sig), ==, 0);
  signalled_at = g_get_monotonic_time ();
  while ((got = read (err_fd, buf, sizeof buf)) > 0)
    g_string_append_len (err, buf, got);
  close (err_fd);
  waitpid (launcher, &status, 0);
  *seconds = (g_get_monotonic_time () - signalled_at) / 1e6;
  g_test_message ("%s", err->str);
  g_test_message ("ended %.1f s after signal %d (%.1f s in all)", *seconds, sig,
                  (g_get_monotonic_time () - start) / 1e6);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 1);
  g_assert_nonnull (strstr (err->str, "workerlog.2"));
  g_assert_cmpint (kill (worker, 0), !=, 0); /* nothing left running */
  ks_test_rmtree (dir);
  return g_string_free (err, FALSE);
}

/* A killed worker: the launcher stops the others and exits 1 naming it, well within the
 * timeout. */
static void
test_killed_worker (void)
{
  double seconds;
  g_autofree char *err = signal_worker (SIGKILL, &seconds);
  g_assert_nonnull (strstr (err, "ksdist: launch: worker 2 was killed by signal 9"));
  g_assert_cmpfloat (seconds, <, 60);
}

/* A stopped worker (SIGSTOP): the launcher names it, not the worker that gave up waiting,
 * within about one timeout (the ranks alone would take 1.5; before, 3), and ends it. */
static void
test_stopped_worker (void)
{
  double seconds;
  g_autofree char *err = signal_worker (SIGSTOP, &seconds);
  g_assert_nonnull (strstr (err, "ksdist: launch: worker 2 was stopped (SIGSTOP"));
  g_assert_cmpfloat (seconds, <, 30); /* 5 s timeout: "did not wait forever" on a shared machine */
}

/* The launcher killed by SIGKILL (it cannot stop anyone): its workers end within two
 * seconds instead of training on alone. */
static void
test_killed_launcher (void)
{
  GPid launcher = ks_test_spawn_ksdist (ARGS ("launch", "-n", "2", "--set",
                                              "train.steps=100000000", "--set",
                                              "train.log_every=100000000", "--set",
                                              "openblas.threads=1"),
                                        NULL, plugins, NULL, NULL);
  GPid workers[2] = { 0, 0 };
  for (int i = 0; i < 600 && (workers[0] == 0 || workers[1] == 0); i++)
    {
      for (int r = 0; r < 2; r++)
        if (workers[r] == 0)
          workers[r] = find_worker (launcher, r);
      g_usleep (50000);
    }
  g_assert_cmpint (workers[0], >, 0);
  g_assert_cmpint (workers[1], >, 0);
  g_usleep (500000);
  g_assert_cmpint (kill (launcher, SIGKILL), ==, 0);
  waitpid (launcher, NULL, 0);
  gint64 killed_at = g_get_monotonic_time ();
  gboolean alive = TRUE;
  while (alive && g_get_monotonic_time () - killed_at < 10 * G_USEC_PER_SEC)
    {
      g_usleep (50000);
      alive = FALSE;
      for (int r = 0; r < 2; r++)
        {
          /* a worker that ended is a zombie of init until reaped, or gone */
          char state = ks_test_process_state (workers[r]);
          if (state != 0 && state != 'Z')
            alive = TRUE;
        }
    }
  double took = (g_get_monotonic_time () - killed_at) / 1e6;
  g_test_message ("the workers ended %.2f s after the launcher was killed", took);
  g_assert_false (alive); /* within the loop's 10 s: no timing assertion on a shared machine */
}

/* A wrong key is reported once, by the launcher, before any worker starts. */
static void
test_bad_config (void)
{
  g_autofree char *out = NULL, *err = NULL;
  int status = ks_test_run_ksdist (ARGS ("launch", "-n", "2", "--set", "train.stepz=3"), NULL,
                                   plugins, &out, &err);
  g_assert_cmpint (status, ==, 2);
  g_assert_cmpstr (out, ==, "");
  g_assert_cmpstr (err, ==, "ksdist: --set train.stepz: unknown key 'stepz' in [train]; did you "
                            "mean 'steps'? (known: optimizer, steps, batch, log_every, eval_every, "
                            "eval_rows, seed, checkpoint_dir, checkpoint_every, keep, export_dir, "
                            "resume, start_over)\n");

  /* one that only building the model finds: also once, by the launcher, exit 2 */
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  status = ks_test_run_ksdist (ARGS ("launch", "-n", "2", "--set", "model.hidden=64, x"), NULL,
                               plugins, &out, &err);
  g_assert_cmpint (status, ==, 2);
  g_assert_cmpstr (out, ==, "");
  g_assert_cmpstr (err, ==, "ksdist: [model] hidden: 'x' is not a layer size (an integer in "
                            "[1, 1048576])\n");

  /* a plugin's own check of its settings (KsPluginDesc.check_settings): a key that
   * another key's value leaves unused */
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  status = ks_test_run_ksdist (ARGS ("launch", "-n", "2", "--set", "gloo.algorithm=ring",
                                     "--set", "gloo.auto_hosts_ring_bytes=65536"),
                               NULL, plugins, &out, &err);
  g_assert_cmpint (status, ==, 2);
  g_assert_cmpstr (out, ==, "");
  g_assert_cmpstr (err, ==, "ksdist: [gloo] auto_hosts_ring_bytes is set, but [gloo] algorithm = "
                            "ring does not read it (only auto chooses by size): remove "
                            "auto_hosts_ring_bytes, or set algorithm = auto\n");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (!ks_test_have_openblas () || !ks_test_have_gloo ())
    return g_test_run ();
  g_test_add_func ("/launch/equivalence", test_equivalence);
  g_test_add_func ("/launch/clip-equivalence", test_clip_equivalence);
  g_test_add_func ("/launch/amp-equivalence", test_amp_equivalence);
  g_test_add_func ("/launch/local-sgd-k1", test_local_sgd_k1);
  g_test_add_func ("/launch/killed-worker", test_killed_worker);
  g_test_add_func ("/launch/stopped-worker", test_stopped_worker);
  g_test_add_func ("/launch/killed-launcher", test_killed_launcher);
  g_test_add_func ("/launch/bad-config", test_bad_config);
  g_test_add_func ("/launch/two-nodes", test_two_nodes);
  g_test_add_func ("/launch/foreign-launchers", test_foreign_launchers);
  g_test_add_func ("/launch/node-errors", test_node_errors);
  g_test_add_func ("/launch/servers", test_servers);
  g_test_add_func ("/launch/endpoints-ipv6", test_endpoints_ipv6);
  g_test_add_func ("/launch/program", test_program);
  g_test_add_func ("/launch/resume", test_resume);
  g_test_add_func ("/launch/resume-missing", test_resume_missing);
  return g_test_run ();
}
