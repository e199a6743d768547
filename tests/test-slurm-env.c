/* Slurm's variables as srun sets them (libksdist/comm/slurm.c, built in): the node
 * list expanded, the tasks of a node, the port from the job id, where a step meets, and
 * the message for each malformed value. (A real Slurm runs the job in test-slurm.sh.) */
#include "testutil.h"

#include "../libksdist/comm/slurm.h"

#include <string.h>

static void
assert_hosts (const char *list, const char *want)
{
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) hosts = ks_slurm_hostlist_expand (list, "SLURM_JOB_NODELIST", &error);
  g_assert_no_error (error);
  g_autofree char *got = g_strjoinv (" ", hosts);
  g_assert_cmpstr (got, ==, want);
}

static void
assert_bad_list (const char *list, const char *want)
{
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) hosts = ks_slurm_hostlist_expand (list, "SLURM_JOB_NODELIST", &error);
  g_assert_null (hosts);
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error->message, "SLURM_JOB_NODELIST"));
  if (strstr (error->message, want) == NULL)
    g_error ("expected '%s' in: %s", want, error->message);
}

static void
test_hostlist (void)
{
  assert_hosts ("n0", "n0");
  assert_hosts ("n[0-3],x1", "n0 n1 n2 n3 x1");
  assert_hosts ("node[08-10,7]", "node08 node09 node10 node7");
  assert_hosts ("r[1-2]n[1-2]", "r1n1 r1n2 r2n1 r2n2");
  assert_hosts ("a,b[1],c-d[3-4]e", "a b1 c-d3e c-d4e");
  assert_hosts ("host.example.org", "host.example.org");

  assert_bad_list ("n[0-3", "unbalanced brackets");
  assert_bad_list ("n0-3]", "unbalanced brackets");
  assert_bad_list ("n[3-1]", "'[3-1]' is not a list of numbers");
  assert_bad_list ("n[a]", "'[a]' is not a list of numbers");
  assert_bad_list ("n[]", "'[]' is not a list of numbers");
  assert_bad_list ("n0,,n1", "an empty host name");
  assert_bad_list ("n[0-9999999]", "at most");
}

static void
test_tasks_per_node (void)
{
  const char *spec = "2(x3),1,4";
  const int want[] = { 2, 2, 2, 1, 4 };
  for (int node = 0; node < 5; node++)
    {
      int tasks = -1;
      g_assert_true (ks_slurm_tasks_on_node (spec, "SLURM_TASKS_PER_NODE", node, &tasks, NULL));
      g_assert_cmpint (tasks, ==, want[node]);
    }

  g_autoptr (GError) error = NULL;
  int tasks;
  g_assert_false (ks_slurm_tasks_on_node (spec, "SLURM_TASKS_PER_NODE", 5, &tasks, &error));
  g_assert_cmpstr (error->message, ==, "SLURM_TASKS_PER_NODE = '2(x3),1,4' counts 5 nodes, "
                                       "but this is node 5 (SLURM_NODEID)");
  const char *bad[] = { "2(3)", "x", "2(x0)", "2(x3", "2,", "2(x3)y" };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_clear_error (&error);
      g_assert_false (ks_slurm_tasks_on_node (bad[i], "SLURM_TASKS_PER_NODE", 0, &tasks, &error));
      g_assert_nonnull (strstr (error->message, "expected counts like 2(x3),1"));
    }
}

static const char *const slurm_vars[] = {
  "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NODEID", "SLURMD_NODENAME",
  "SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST", "SLURM_TASKS_PER_NODE",
  "SLURM_STEP_TASKS_PER_NODE",
};

static void
set_env (const char *const *env)
{
  for (guint i = 0; i < G_N_ELEMENTS (slurm_vars); i++)
    g_unsetenv (slurm_vars[i]);
  for (int i = 0; env[i] != NULL; i++)
    {
      g_auto (GStrv) kv = g_strsplit (env[i], "=", 2);
      g_setenv (kv[0], kv[1], TRUE);
    }
}

static void
test_meeting (void)
{
  g_autofree char *connect = NULL, *listen = NULL;
  g_autoptr (GError) error = NULL;
  int nodes, port, local, world;

  /* outside srun: nothing said */
  set_env ((const char *[]) { NULL });
  g_assert_true (ks_slurm_meeting (&connect, &listen, &nodes, NULL));
  g_assert_null (connect);
  g_assert_false (ks_slurm_sizes (&local, &world));

  /* the step's list wins over the job's; 15000 + 16 x the job id's last three digits */
  set_env ((const char *[]) { "SLURM_JOB_ID=1234567", "SLURM_PROCID=0", "SLURM_NTASKS=5",
                              "SLURM_NODEID=1", "SLURMD_NODENAME=n2",
                              "SLURM_JOB_NODELIST=n[0-3]", "SLURM_STEP_NODELIST=n[2-3]",
                              "SLURM_STEP_TASKS_PER_NODE=2,3", "SLURM_TASKS_PER_NODE=1(x4)",
                              NULL });
  g_assert_true (ks_slurm_meeting (&connect, &listen, &nodes, NULL));
  g_assert_cmpstr (connect, ==, "n2:24072");
  g_assert_cmpstr (listen, ==, "0.0.0.0:24072");
  g_assert_cmpint (nodes, ==, 2);
  g_assert_true (ks_slurm_sizes (&local, &world));
  g_assert_cmpint (local, ==, 3);
  g_assert_cmpint (world, ==, 5);
  g_assert_true (ks_slurm_port ("42", &port, NULL));
  g_assert_cmpint (port, ==, 15672); /* 15000 + 16 x 42 */
  g_assert_true (ks_slurm_port ("43", &port, NULL));
  g_assert_cmpint (port, ==, 15688); /* the next job: past job 42's 15 server ports */

  /* task 0 elsewhere than the first node: no one would find its store */
  g_setenv ("SLURMD_NODENAME", "n3", TRUE);
  g_clear_pointer (&connect, g_free);
  g_clear_pointer (&listen, g_free);
  g_assert_false (ks_slurm_meeting (&connect, &listen, &nodes, &error));
  g_assert_cmpstr (error->message, ==,
                   "Slurm put task 0 on n3, but the job meets on the first node of "
                   "SLURM_STEP_NODELIST (n2): use srun's default block distribution, or set "
                   "[comm] store_address");
  g_clear_error (&error);
  g_setenv ("SLURM_PROCID", "1", TRUE); /* another task there is fine */
  g_assert_true (ks_slurm_meeting (&connect, &listen, &nodes, NULL));
  g_clear_pointer (&connect, g_free);
  g_clear_pointer (&listen, g_free);

  g_setenv ("SLURM_JOB_ID", "12a", TRUE);
  g_assert_false (ks_slurm_meeting (&connect, &listen, &nodes, &error));
  g_assert_cmpstr (error->message, ==, "SLURM_JOB_ID = '12a' is not a number");
  g_clear_error (&error);

  set_env ((const char *[]) { "SLURM_JOB_ID=7", "SLURM_PROCID=0", NULL });
  g_assert_false (ks_slurm_meeting (&connect, &listen, &nodes, &error));
  g_assert_nonnull (strstr (error->message, "not SLURM_JOB_NODELIST"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/slurm-env/hostlist", test_hostlist);
  g_test_add_func ("/slurm-env/tasks-per-node", test_tasks_per_node);
  g_test_add_func ("/slurm-env/meeting", test_meeting);
  return g_test_run ();
}
