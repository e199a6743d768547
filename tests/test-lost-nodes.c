/* ksdist launch on several nodes names the node a job lost from the line of the process
 * that saw it (tools/launch-rendezvous.c): each kind of line the ranks, workers and
 * servers print when a peer goes silent, on a parameter-server layout and a collective
 * one. The lines are the plugins' own wording; tests/test-cluster*.sh see them for real. */
#include <glib.h>
#include <string.h>

#include "launch.h"

/* Node 0: server 0; node 1: workers 0-1; node 2: worker 2 and server 1. */
static void
ps_layout (LaunchRendezvous *rv)
{
  static int workers[] = { 0, 2, 1 }, servers[] = { 1, 0, 1 };
  static char *hosts[] = { "10.0.0.1", "10.0.0.2", "10.0.0.3", NULL };
  static char *names[] = { "h0", "h1", "h2", NULL };
  *rv = (LaunchRendezvous) { .nnodes = 3, .node_rank = 1, .ps = TRUE, .hosts = hosts,
                             .names = names, .node_workers = workers, .node_servers = servers };
}

static void
check (const LaunchRendezvous *rv, const char *line, const char *want)
{
  g_autofree char *got = ks_launch_lost_nodes (rv, line);
  g_assert_cmpstr (got, ==, want);
}

static void
test_servers (void)
{
  LaunchRendezvous rv;
  ps_layout (&rv);
  /* a worker whose call timed out */
  check (&rv,
         "ksdist: worker 1: server 0 (10.0.0.1:4100) did not answer a push within 5 s "
         "([comm] timeout): a server died",
         "node 0 (host h0, 10.0.0.1: server 0) was lost: server 0 (10.0.0.1:4100) did not "
         "answer a push within 5 s ([comm] timeout)");
  /* a worker between calls, whose heartbeats went unanswered (the CI failure: the
   * launcher said only that the worker exited) */
  check (&rv,
         "ksdist: worker 1: server 0 (10.0.0.1:4100) sent nothing for 5 s, not even an "
         "answer to a heartbeat ([comm] timeout): it died, hangs or was stopped",
         "node 0 (host h0, 10.0.0.1: server 0) was lost: server 0 (10.0.0.1:4100) sent "
         "nothing for 5 s, not even an answer to a heartbeat");
  /* two servers on two nodes */
  check (&rv,
         "ksdist: worker 0: server 0 (10.0.0.1:4100), server 1 (10.0.0.3:4101) sent nothing "
         "for 5 s, not even an answer to a heartbeat ([comm] timeout)",
         "node 0 (host h0, 10.0.0.1: server 0) and node 2 (host h2, 10.0.0.3: worker 2, "
         "server 1) were lost: server 0 (10.0.0.1:4100), server 1 (10.0.0.3:4101) sent "
         "nothing for 5 s, not even an answer to a heartbeat");
}

static void
test_workers (void)
{
  LaunchRendezvous rv;
  ps_layout (&rv);
  check (&rv, "ksdist: server 0 (10.0.0.1:4100): worker 0, 1 sent nothing for 5 s, not even a "
              "heartbeat",
         "node 1 (host h1, 10.0.0.2: workers 0-1) was lost: worker 0, 1 sent nothing for 5 s");
  check (&rv, "ksdist: server 1: worker 2 sent no gradient for step 40 within 5 s",
         "node 2 (host h2, 10.0.0.3: worker 2, server 1) was lost: worker 2 sent no gradient "
         "for step 40 within 5 s");
  /* a line that names no peer, and a server's own number that is not a worker's */
  check (&rv, "ksdist: worker 1 exited with status 3", NULL);
  check (&rv, "ksdist: info: worker 1 of 3 (transpiler mode)", NULL);
}

static void
test_ranks (void)
{
  static int workers[] = { 2, 2 }, servers[] = { 0, 0 };
  static char *hosts[] = { "10.0.0.1", "10.0.0.2", NULL };
  static char *names[] = { "h0", "h1", NULL };
  LaunchRendezvous rv = { .nnodes = 2, .hosts = hosts, .names = names,
                          .node_workers = workers, .node_servers = servers };
  check (&rv, "ksdist: rank 0: rank 2, 3 did not reach allreduce #40 within 8 s",
         "node 1 (host h1, 10.0.0.2: ranks 2-3) was lost: rank 2, 3 did not reach allreduce #40");
  /* one node: nothing to name */
  rv.nnodes = 1;
  check (&rv, "ksdist: rank 0: rank 2, 3 did not reach allreduce #40", NULL);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/lost-nodes/servers", test_servers);
  g_test_add_func ("/lost-nodes/workers", test_workers);
  g_test_add_func ("/lost-nodes/ranks", test_ranks);
  return g_test_run ();
}
