/* ksdist launch's processes: the job this node launches, its workers and servers, and
 * how they end (launch-watch.c): stopped on a failure or a signal, the first cause named. */
#ifndef KS_LAUNCH_JOB_H
#define KS_LAUNCH_JOB_H

#include "launch.h"

#include <gio/gio.h>
#include <stdio.h>

#define STOP_GRACE_MS 5000 /* SIGTERM, then SIGKILL after this long */
#define SIGNAL_GRACE_S 30  /* --grace-period's default: Slurm's KillWait, Kubernetes' */
#define WATCH_MS 500       /* how often the processes' states are looked at */
#define DRAIN_MS 5000      /* output read after the last process ended, at most */
/* after a process reported a peer's failure (KS_EXIT_PEER), how long the others may end
 * by themselves before they are stopped: the peer that failed first, still ending (its
 * atexit work under the sanitizers takes seconds), is then named, not the report */
#define PEER_WAIT_MS 10000

typedef struct Launch Launch;

typedef struct {
  Launch *launch;
  int rank;   /* in the job: workers first, then servers */
  char *name; /* "worker 3", "server 0" */
  GSubprocess *process;
  GDataInputStream *output;
  FILE *log;
  char *log_path;
  gboolean output_done, exited;
  gboolean failed_alone; /* ended badly, and not by the launcher's own signal */
  gint64 stopped_since; /* monotonic µs when it was first seen stopped, or 0 */
  char *lost; /* several nodes: the first nodes its output said were lost, or NULL */
  int step_fd;      /* a worker's KS_LAUNCH_STEP_FD pipe, read end, or -1 */
  gboolean stepped; /* it said its first step began (a signal now is saved) */
} Worker;

struct Launch {
  GMainLoop *loop;
  LaunchRendezvous rv;
  int servers;     /* > 0: a parameter-server job of rv.nproc - servers workers */
  int first_rank;  /* the job rank of this node's first process */
  int world;       /* processes in the job, all nodes */
  char *endpoints; /* the workers' (collective) or the servers' (parameter server) */
  const char *gloo_hostname; /* exported as KS_GLOO_HOSTNAME, or NULL */
  Worker *workers;
  int n, running, reading;
  Worker *failed;      /* the process that failed first, or NULL */
  char *failure;       /* how it failed */
  gboolean failed_stopped; /* it was stopped (SIGSTOP) too long: nothing overrides that */
  gboolean stopping;   /* the workers were told to stop (SIGTERM) */
  gboolean killing;    /* ... and those left were sent SIGKILL */
  guint grace;         /* the source that sends that SIGKILL, or 0 */
  guint peer_wait;     /* the source that stops them after PEER_WAIT_MS, or 0 */
  GCancellable *reads; /* the output reads of this start */
  guint drain;         /* the source that ends them once every process has ended, or 0 */
  int restart, max_restarts; /* this start's number (0: the first) and the limit */
  int signal_received; /* SIGINT/SIGTERM that asked us to stop, or 0 */
  gboolean program;    /* the processes run `-- PROGRAM`, which need not say its steps */
  double grace_s;      /* --grace-period: from that signal to SIGKILL */
  int worker_signal;   /* a worker stopped by a signal sent to it alone (exit 128 + it) */
  double timeout_s;    /* [comm] timeout: how long a stopped process is waited for */
  char *master_addr;   /* MASTER_ADDR and MASTER_PORT given to the processes */
  int master_port;
};

void launch_maybe_quit (Launch *l);
/* Stops every worker still running: SIGTERM now, SIGKILL if it lingers. */
void launch_stop_all (Launch *l);
/* Every WATCH_MS: a process stopped for [comm] timeout fails the job. */
gboolean launch_on_watch (gpointer data);
/* A process ended: the job stops if it failed (the first cause named), or the loop ends. */
void launch_on_worker_exit (GObject *source, GAsyncResult *result, gpointer data);
/* Ctrl-C and SIGTERM, passed on (a second one kills) */
gboolean launch_on_sigint (gpointer data);
gboolean launch_on_sigterm (gpointer data);

#endif
