/* Role makers: the identity each reads from the environment or the configuration, and
 * the error that names what is missing or wrong; split_files. (Their collectives:
 * test-comm.) */
#include "testutil.h"

#include <string.h>

static const char *const all_vars[] = {
  "TRAINING_ROLE", "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_PSERVERS_IP_PORT_LIST",
  "POD_IP", "PADDLE_PORT", "PADDLE_TRAINER_ENDPOINTS", "PADDLE_CURRENT_ENDPOINT",
  "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID",
  "SLURM_NTASKS", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID",
  "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE", "SLURMD_NODENAME",
};

/* Sets exactly the variables of `env` ("NAME=value", NULL-terminated) and makes the role
 * maker `name` with `sets`; returns it or NULL with *error. */
static KsRoleMaker *
make (const char *name, const char *const *env, const char *const *sets, GError **error)
{
  static KsConfig *config;
  static KsRegistry *registry;
  g_autofree char *dir = ks_test_build_plugin_dir ("roles");

  for (guint i = 0; i < G_N_ELEMENTS (all_vars); i++)
    g_unsetenv (all_vars[i]);
  for (int i = 0; env != NULL && env[i] != NULL; i++)
    {
      g_auto (GStrv) kv = g_strsplit (env[i], "=", 2);
      g_setenv (kv[0], kv[1], TRUE);
    }
  g_clear_pointer (&registry, ks_registry_free);
  g_clear_pointer (&config, ks_config_free);
  config = ks_config_new ();
  for (int i = 0; sets != NULL && sets[i] != NULL; i++)
    g_assert_true (ks_config_set_override (config, sets[i], NULL));
  registry = ks_test_scan (config, dir);
  g_assert_true (ks_config_validate (config, NULL));
  return ks_role_maker_new (registry, config, name, error);
}

static void
assert_fails (const char *name, const char *const *env, const char *const *sets, const char *want)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (KsRoleMaker) role = make (name, env, sets, &error);
  g_assert_null (role);
  g_assert_nonnull (error);
  if (strstr (error->message, want) == NULL)
    g_error ("expected '%s' in: %s", want, error->message);
}

static void
test_paddlecloud_ps (void)
{
  const char *trainer[] = { "TRAINING_ROLE=TRAINER", "PADDLE_TRAINER_ID=1",
                            "PADDLE_TRAINERS_NUM=2",
                            "PADDLE_PSERVERS_IP_PORT_LIST=10.0.0.1:6170, 10.0.0.2:6170", NULL };
  const char *server[] = { "TRAINING_ROLE=PSERVER", "PADDLE_TRAINERS_NUM=2", "POD_IP=10.0.0.2",
                           "PADDLE_PORT=6170",
                           "PADDLE_PSERVERS_IP_PORT_LIST=10.0.0.1:6170,10.0.0.2:6170", NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (KsRoleMaker) t = make ("paddlecloud", trainer, NULL, &error);

  g_assert_no_error (error);
  g_assert_true (ks_role_maker_is_worker (t) && !ks_role_maker_is_server (t));
  g_assert_false (ks_role_maker_is_first_worker (t));
  g_assert_cmpint (ks_role_maker_worker_index (t), ==, 1);
  g_assert_cmpint (ks_role_maker_worker_num (t), ==, 2);
  g_assert_cmpint (ks_role_maker_server_num (t), ==, 2);
  g_assert_cmpstr (ks_role_maker_pserver_endpoints (t)[1], ==, "10.0.0.2:6170");
  g_assert_cmpint (ks_role_maker_global_rank (t), ==, 1);

  g_autoptr (KsRoleMaker) s = make ("paddlecloud", server, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (ks_role_maker_is_server (s));
  g_assert_cmpint (ks_role_maker_server_index (s), ==, 1);
  g_assert_cmpint (ks_role_maker_global_rank (s), ==, 3);
  g_autofree char *text = ks_role_maker_to_string (s);
  g_assert_nonnull (strstr (text, "role=server index=1 workers=2 servers=2"));
}

static void
test_paddlecloud_errors (void)
{
  const char *no_id[] = { "TRAINING_ROLE=TRAINER", "PADDLE_TRAINERS_NUM=2",
                          "PADDLE_PSERVERS_IP_PORT_LIST=a:1", NULL };
  const char *bad_id[] = { "TRAINING_ROLE=TRAINER", "PADDLE_TRAINERS_NUM=2",
                           "PADDLE_TRAINER_ID=2", "PADDLE_PSERVERS_IP_PORT_LIST=a:1", NULL };
  const char *bad_role[] = { "TRAINING_ROLE=WORKER", "PADDLE_TRAINERS_NUM=2",
                             "PADDLE_PSERVERS_IP_PORT_LIST=a:1", NULL };
  const char *not_listed[] = { "TRAINING_ROLE=PSERVER", "PADDLE_TRAINERS_NUM=1", "POD_IP=b",
                               "PADDLE_PORT=1", "PADDLE_PSERVERS_IP_PORT_LIST=a:1", NULL };
  const char *dup[] = { "PADDLE_TRAINER_ENDPOINTS=a:1,a:1", NULL };
  const char *no_port[] = { "PADDLE_TRAINER_ENDPOINTS=a:1,b", NULL };
  const char *mismatch[] = { "PADDLE_TRAINER_ENDPOINTS=a:1,b:2", "PADDLE_TRAINER_ID=1",
                             "PADDLE_CURRENT_ENDPOINT=a:1", NULL };

  assert_fails ("paddlecloud", NULL, NULL, "is unavailable: neither TRAINING_ROLE nor");
  assert_fails ("paddlecloud", no_id, NULL, "PADDLE_TRAINER_ID is not set");
  assert_fails ("paddlecloud", bad_id, NULL, "PADDLE_TRAINER_ID = '2': expected a whole number in [0, 1]");
  assert_fails ("paddlecloud", bad_role, NULL, "TRAINING_ROLE = 'WORKER': expected TRAINER or PSERVER");
  assert_fails ("paddlecloud", not_listed, NULL, "POD_IP:PADDLE_PORT = b:1 is not in");
  assert_fails ("paddlecloud", dup, NULL, "endpoint 'a:1' is listed twice");
  assert_fails ("paddlecloud", no_port, NULL, "entry 2 'b' is not host:port");
  assert_fails ("paddlecloud", mismatch, NULL, "PADDLE_CURRENT_ENDPOINT = a:1, but entry 1");
}

static void
test_paddlecloud_collective (void)
{
  const char *env[] = { "PADDLE_TRAINER_ENDPOINTS=127.0.0.1:6170,127.0.0.1:6171,127.0.0.1:6172",
                        "PADDLE_TRAINER_ID=2", "PADDLE_CURRENT_ENDPOINT=127.0.0.1:6172", NULL };
  const char *no_id[] = { "PADDLE_TRAINER_ENDPOINTS=127.0.0.1:6170", NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (KsRoleMaker) r = make (NULL, env, NULL, &error); /* auto finds it */

  g_assert_no_error (error);
  g_assert_cmpstr (ks_role_maker_name (r), ==, "paddlecloud");
  g_assert_cmpint (ks_role_maker_worker_num (r), ==, 3);
  g_assert_cmpint (ks_role_maker_worker_index (r), ==, 2);
  g_assert_cmpint (ks_role_maker_server_num (r), ==, 0);
  g_assert_cmpstr (ks_role_maker_trainer_endpoints (r)[0], ==, "127.0.0.1:6170");

  g_autoptr (KsRoleMaker) d = make ("paddlecloud", no_id, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (ks_role_maker_is_first_worker (d)); /* PADDLE_TRAINER_ID defaults to 0 */
}

static void
test_env (void)
{
  const char *mpi[] = { "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", NULL };
  const char *slurm[] = { "SLURM_PROCID=1", "SLURM_NTASKS=2", NULL };
  const char *torch[] = { "RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=10.1.1.1", "MASTER_PORT=29500",
                          NULL };
  const char *bad[] = { "PMI_RANK=5", "PMI_SIZE=4", NULL };
  const char *no_size[] = { "SLURM_PROCID=0", NULL };
  g_autoptr (GError) error = NULL;

  g_autoptr (KsRoleMaker) a = make (NULL, mpi, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (ks_role_maker_name (a), ==, "env");
  g_assert_cmpint (ks_role_maker_worker_index (a), ==, 3);
  g_assert_cmpint (ks_role_maker_worker_num (a), ==, 4);
  g_autoptr (KsRoleMaker) b = make ("env", slurm, NULL, &error);
  g_assert_cmpint (ks_role_maker_worker_index (b), ==, 1);
  g_autoptr (KsRoleMaker) c = make ("env", torch, NULL, &error);
  g_assert_true (ks_role_maker_is_first_worker (c));
  g_assert_cmpstr (ks_role_maker_trainer_endpoints (c)[0], ==, "10.1.1.1:29500");

  assert_fails ("env", bad, NULL, "PMI_RANK = '5': expected a whole number in [0, 3]");
  assert_fails ("env", no_size, NULL, "SLURM_NTASKS is not set");
  assert_fails ("env", NULL, NULL, "is unavailable: no OMPI_COMM_WORLD_RANK");
}

/* Under srun with [roles] servers = S the last S tasks serve, each on its node (block
 * distribution) at the store's port (15000 + 16 x the job id's last three digits) + 1 + its
 * index. */
static void
test_env_slurm_servers (void)
{
  const char *server[] = { "SLURM_PROCID=3", "SLURM_NTASKS=4", "SLURM_JOB_ID=42",
                           "SLURM_STEP_NODELIST=127.0.0.[1-2]", "SLURMD_NODENAME=127.0.0.2",
                           "SLURM_STEP_TASKS_PER_NODE=2(x2)", NULL };
  const char *worker[] = { "SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_JOB_ID=42",
                           "SLURM_STEP_NODELIST=127.0.0.[1-2]", "SLURMD_NODENAME=127.0.0.1",
                           "SLURM_STEP_TASKS_PER_NODE=2(x2)", NULL };
  const char *elsewhere[] = { "SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_JOB_ID=42",
                              "SLURM_STEP_NODELIST=127.0.0.[1-2]", "SLURMD_NODENAME=127.0.0.2",
                              "SLURM_STEP_TASKS_PER_NODE=2(x2)", NULL };
  const char *short_list[] = { "SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_JOB_ID=42",
                               "SLURM_STEP_NODELIST=127.0.0.1", "SLURM_STEP_TASKS_PER_NODE=3",
                               NULL };
  const char *mpi[] = { "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", NULL };
  const char *three[] = { "roles.servers=3", NULL };
  const char *four[] = { "roles.servers=4", NULL };
  g_autoptr (GError) error = NULL;

  g_autoptr (KsRoleMaker) s = make ("env", server, three, &error);
  g_assert_no_error (error);
  g_assert_true (ks_role_maker_is_server (s));
  g_assert_cmpint (ks_role_maker_server_index (s), ==, 2);
  g_assert_cmpint (ks_role_maker_server_num (s), ==, 3);
  g_assert_cmpint (ks_role_maker_worker_num (s), ==, 1);
  g_assert_cmpint (ks_role_maker_global_rank (s), ==, 3);
  const char *const *eps = ks_role_maker_pserver_endpoints (s);
  g_assert_cmpstr (eps[0], ==, "127.0.0.1:15673");
  g_assert_cmpstr (eps[1], ==, "127.0.0.2:15674");
  g_assert_cmpstr (eps[2], ==, "127.0.0.2:15675");
  g_assert_null (eps[3]);
  g_autoptr (KsRoleMaker) w = make ("env", worker, three, &error);
  g_assert_no_error (error);
  g_assert_true (ks_role_maker_is_first_worker (w));
  g_assert_cmpint (ks_role_maker_global_rank (w), ==, 0);

  assert_fails ("env", server, four, "[roles] servers = 4, but srun started 4 tasks "
                                     "(SLURM_NTASKS): at least one must be a worker");
  assert_fails ("env", mpi, three, "[roles] servers = 3 places servers among srun's tasks, "
                                   "but this process was started by OMPI_COMM_WORLD_RANK's");
  assert_fails ("env", elsewhere, three, "task 0 runs on 127.0.0.2, not on 127.0.0.1");
  /* a job's 16 ports: its store's and 15 servers' */
  const char *sixteen[] = { "roles.servers=16", NULL };
  assert_fails ("env", server, sixteen, "so at most 15 servers");
  /* elsewhere the key would be ignored: refused */
  assert_fails ("user", NULL, three, "[roles] servers = 3 places servers among srun's tasks, "
                                     "but this process's roles come from the [roles] settings");
  assert_fails ("env", short_list, three, "SLURM_STEP_TASKS_PER_NODE = '3' on the nodes "
                                          "127.0.0.1 gives 3 tasks, but SLURM_NTASKS = 4");
}

static void
test_user (void)
{
  const char *server[] = { "roles.role=server", "roles.current_id=1", "roles.worker_num=3",
                           "roles.server_endpoints=a:1,b:2", NULL };
  const char *no_servers[] = { "roles.role=server", NULL };
  const char *id_range[] = { "roles.current_id=2", "roles.worker_num=2", NULL };
  const char *server_range[] = { "roles.role=server", "roles.current_id=2",
                                 "roles.server_endpoints=a:1,b:2", NULL };
  const char *zero[] = { "roles.worker_num=0", NULL };
  const char *count[] = { "roles.worker_num=2", "roles.worker_endpoints=a:1", NULL };
  g_autoptr (GError) error = NULL;

  g_autoptr (KsRoleMaker) single = make (NULL, NULL, NULL, &error); /* nothing set: one worker */
  g_assert_no_error (error);
  g_assert_cmpstr (ks_role_maker_name (single), ==, "user");
  g_assert_true (ks_role_maker_is_first_worker (single));
  g_assert_cmpint (ks_role_maker_worker_num (single), ==, 1);

  g_autoptr (KsRoleMaker) s = make ("user", NULL, server, &error);
  g_assert_no_error (error);
  g_assert_true (ks_role_maker_is_server (s));
  g_assert_cmpint (ks_role_maker_server_index (s), ==, 1);
  g_assert_cmpint (ks_role_maker_global_rank (s), ==, 4);

  assert_fails ("user", NULL, no_servers, "role = server needs server_endpoints");
  assert_fails ("user", NULL, id_range, "current_id = 2 but worker_num = 2");
  assert_fails ("user", NULL, server_range, "current_id = 2 but there are 2 server_endpoints");
  assert_fails ("user", NULL, zero, "worker_num = 0: there must be at least one worker");
  assert_fails ("user", NULL, count, "worker_endpoints lists 1 endpoints but worker_num = 2");
}

/* The files worker `index` of `n` gets, joined with commas. */
static char *
split (int index, int n, const char *const *files)
{
  g_autofree char *id = g_strdup_printf ("roles.current_id=%d", index);
  g_autofree char *num = g_strdup_printf ("roles.worker_num=%d", n);
  const char *sets[] = { id, num, NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (KsRoleMaker) role = make ("user", NULL, sets, &error);
  g_assert_no_error (error);
  g_auto (GStrv) mine = ks_role_maker_split_files (role, files, &error);
  g_assert_no_error (error);
  return g_strjoinv (",", mine);
}

/* OpenKS's split_files: 7 files over 3 workers are 3, 2, 2 in order; fewer files than
 * workers leave the last ones none; a server has no share. */
static void
test_split_files (void)
{
  const char *const files[] = { "a", "b", "c", "d", "e", "f", "g", NULL };
  const char *const two[] = { "x", "y", NULL };
  const char *const server[] = { "roles.role=server", "roles.server_endpoints=s:1", NULL };
  const char *want[] = { "a,b,c", "d,e", "f,g" };
  g_autoptr (GError) error = NULL;

  for (int i = 0; i < 3; i++)
    {
      g_autofree char *got = split (i, 3, files);
      g_assert_cmpstr (got, ==, want[i]);
    }
  for (int i = 0; i < 7; i++)
    {
      g_autofree char *got = split (i, 7, files);
      g_assert_cmpstr (got, ==, files[i]);
    }
  g_autofree char *x = split (0, 3, two), *y = split (1, 3, two), *none = split (2, 3, two);
  g_assert_cmpstr (x, ==, "x");
  g_assert_cmpstr (y, ==, "y");
  g_assert_cmpstr (none, ==, "");
  g_autoptr (KsRoleMaker) s = make ("user", NULL, server, &error);
  g_assert_null (ks_role_maker_split_files (s, files, &error));
  g_assert_nonnull (strstr (error->message, "this process is server 0"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/roles/paddlecloud/ps", test_paddlecloud_ps);
  g_test_add_func ("/roles/paddlecloud/errors", test_paddlecloud_errors);
  g_test_add_func ("/roles/paddlecloud/collective", test_paddlecloud_collective);
  g_test_add_func ("/roles/env", test_env);
  g_test_add_func ("/roles/env/slurm-servers", test_env_slurm_servers);
  g_test_add_func ("/roles/user", test_user);
  g_test_add_func ("/roles/split-files", test_split_files);
  return g_test_run ();
}
