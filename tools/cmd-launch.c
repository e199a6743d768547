/* ksdist launch: the processes of one job on this machine, one `ksdist train` each.
 *
 * Collective (data-parallel) jobs: -n workers here, or -n on each of --nnodes machines
 * that meet at --master. Parameter-server jobs: --servers S --workers W here, or with
 * --nnodes the servers and workers each node runs (launch-layout.c). Each
 * process gets the environment the paddlecloud role maker reads plus the rendezvous
 * (launch-rendezvous.c). Output lines are prefixed with the rank and copied to
 * --log-dir/workerlog.R (serverlog.S for a server). Ctrl-C and SIGTERM are passed on:
 * the workers save a checkpoint at the next step and stop, with --grace-period to do it;
 * a second signal kills them at once; the launcher exits with the signal's status.
 * When one process fails, the others are stopped and the launcher exits non-zero
 * naming it and its log. A process stopped (SIGSTOP, a debugger) for [comm] timeout is a
 * failure too, and it is the one named when the others give up waiting for it. The one
 * named is the first cause: a process killed by a signal the launcher did not send comes
 * before one that exited non-zero (often only reporting the dead one), and a process that
 * ended after the launcher began stopping the others counts only when such a signal
 * killed it. With --max-restarts N the whole job then starts again from its newest
 * checkpoint, up to N times (launch-restart.c). */
#include "launch-job.h"
#include "train.h"

#include <gio/gio.h>
#include <errno.h>
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static void read_next_line (Worker *w);

static void
on_line (GObject *source, GAsyncResult *result, gpointer data)
{
  Worker *w = data;
  gsize len;
  g_autofree char *line = g_data_input_stream_read_line_finish_utf8 (w->output, result, &len, NULL);

  if (line == NULL)
    {
      w->output_done = TRUE;
      w->launch->reading--;
      launch_maybe_quit (w->launch);
      return;
    }
  if (w->lost == NULL)
    w->lost = ks_launch_lost_nodes (&w->launch->rv, line);
  printf ("[rank %d] %s\n", w->rank, line);
  fflush (stdout);
  if (w->log != NULL)
    {
      fprintf (w->log, "%s\n", line);
      fflush (w->log);
    }
  read_next_line (w);
}

static void
read_next_line (Worker *w)
{
  g_data_input_stream_read_line_async (w->output, G_PRIORITY_DEFAULT, w->launch->reads, on_line,
                                       w);
}

/* The endpoint list: each node's host, ports 6170 + the job rank (unique even when
 * several nodes are one host). Parameter servers listen on theirs, so they get ports
 * free now, which keeps concurrent jobs on one machine apart; on several nodes each
 * node chose its own servers' at the meeting. */
static char *
endpoint_list (const Launch *l, int first, int count)
{
  if (l->servers > 0 && l->rv.nnodes > 1)
    return ks_launch_layout_servers (&l->rv);
  GString *out = g_string_new (NULL);
  g_autoptr (GPtrArray) held = g_ptr_array_new_with_free_func (g_object_unref);
  g_auto (GStrv) given = l->rv.own_ports != NULL ? g_strsplit (l->rv.own_ports, ",", -1) : NULL;
  for (int r = first; r < first + count; r++)
    {
      const char *host = l->rv.hosts[r / l->rv.nproc];
      int port = l->servers > 0 ? ks_launch_free_port (host, held) : 0;
      if (l->servers > 0 && l->rv.own_ports != NULL) /* fleetrun's lists gave them */
        port = atoi (given[r - first]);
      g_string_append_printf (out, "%s%s:%d", r > first ? "," : "", host,
                              port > 0 ? port : 6170 + r);
    }
  return g_string_free (out, FALSE);
}

#define SETENV_INT(launcher, name, value)                                   \
  G_STMT_START {                                                            \
    g_autofree char *v_ = g_strdup_printf ("%d", (int) (value));            \
    g_subprocess_launcher_setenv ((launcher), (name), v_, TRUE);            \
  } G_STMT_END

/* torchrun's variables, for programs written for it: the job rank and size, the rank on
 * this node, and a MASTER_ADDR:MASTER_PORT free for the program's own rendezvous. */
static void
set_torch_environment (Launch *l, Worker *w, GSubprocessLauncher *launcher)
{
  SETENV_INT (launcher, "RANK", w->rank);
  SETENV_INT (launcher, "WORLD_SIZE", l->world);
  SETENV_INT (launcher, "LOCAL_RANK", w - l->workers);
  SETENV_INT (launcher, "LOCAL_WORLD_SIZE", l->n);
  SETENV_INT (launcher, "GROUP_RANK", l->rv.node_rank);
  SETENV_INT (launcher, "TORCHELASTIC_RESTART_COUNT", l->restart);
  SETENV_INT (launcher, "TORCHELASTIC_MAX_RESTARTS", l->max_restarts);
  g_subprocess_launcher_setenv (launcher, "MASTER_ADDR", l->master_addr, TRUE);
  SETENV_INT (launcher, "MASTER_PORT", l->master_port);
}

/* What the role maker and the store need to know, in the process's environment. */
static void
set_environment (Launch *l, Worker *w, GSubprocessLauncher *launcher)
{
  int workers = l->world - l->servers;
  g_autofree char *id = g_strdup_printf ("%d", w->rank < workers ? w->rank : 0);
  g_autofree char *n = g_strdup_printf ("%d", workers);
  g_auto (GStrv) eps = g_strsplit (l->endpoints, ",", -1);

  g_subprocess_launcher_setenv (launcher, "KS_STORE", l->rv.store_kind, TRUE);
  g_subprocess_launcher_setenv (launcher, "KS_STORE_ADDRESS", l->rv.store_address, TRUE);
  g_subprocess_launcher_setenv (launcher, "KS_JOB", l->rv.job, TRUE);
  /* a stopped worker names this launcher's command as the one that resumes */
  g_autofree char *pid = g_strdup_printf ("%d", (int) getpid ());
  g_subprocess_launcher_setenv (launcher, "KS_LAUNCHER_PID", pid, TRUE);
  /* this launcher's check printed the plan's warnings once: its workers do not repeat
   * them (a new user saw each 5 times with 4 workers) */
  if (!l->program)
    g_subprocess_launcher_setenv (launcher, "KS_LAUNCH_CHECKED", "1", TRUE);
  if (l->rv.token != NULL)
    g_subprocess_launcher_setenv (launcher, "KS_STORE_TOKEN", l->rv.token, TRUE);
  if (l->gloo_hostname != NULL)
    g_subprocess_launcher_setenv (launcher, "KS_GLOO_HOSTNAME", l->gloo_hostname, TRUE);
  g_subprocess_launcher_setenv (launcher, "PADDLE_TRAINER_ID", id, TRUE);
  g_subprocess_launcher_setenv (launcher, "PADDLE_TRAINERS_NUM", n, TRUE);
  set_torch_environment (l, w, launcher);
  if (l->servers == 0)
    {
      g_subprocess_launcher_unsetenv (launcher, "TRAINING_ROLE");
      g_subprocess_launcher_setenv (launcher, "PADDLE_TRAINER_ENDPOINTS", l->endpoints, TRUE);
      g_subprocess_launcher_setenv (launcher, "PADDLE_CURRENT_ENDPOINT", eps[w->rank], TRUE);
      return;
    }
  g_subprocess_launcher_unsetenv (launcher, "PADDLE_TRAINER_ENDPOINTS");
  g_subprocess_launcher_setenv (launcher, "PADDLE_PSERVERS_IP_PORT_LIST", l->endpoints, TRUE);
  g_subprocess_launcher_setenv (launcher, "TRAINING_ROLE", w->rank < workers ? "TRAINER" : "PSERVER",
                                TRUE);
  if (w->rank >= workers)
    {
      const char *ep = eps[w->rank - workers], *colon = strrchr (ep, ':');
      g_autofree char *ip = g_strndup (ep, (gsize) (colon - ep));
      g_subprocess_launcher_setenv (launcher, "POD_IP", ip, TRUE);
      g_subprocess_launcher_setenv (launcher, "PADDLE_PORT", colon + 1, TRUE);
    }
}

/* In the child before exec: it ends when the launcher dies, even by SIGKILL, instead of
 * training on alone (Linux's parent-death signal). SIGKILL, not SIGTERM: a stopped
 * process (SIGSTOP, a debugger) keeps a SIGTERM pending and would outlive the launcher.
 * Nothing is saved then; a launcher that is asked to stop (SIGTERM, Ctrl-C) passes the
 * signal on itself, and one killed outright leaves no one to agree on a step anyway. */
static void
die_with_launcher (gpointer launcher_pid)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  if (getppid () != GPOINTER_TO_INT (launcher_pid)) /* it died before the line above */
    _exit (1);
}

static gboolean
start_worker (Launch *l, Worker *w, char **child_argv, const char *log_dir, GError **error)
{
  g_autoptr (GSubprocessLauncher) launcher
      = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_MERGE);

  g_subprocess_launcher_set_child_setup (launcher, die_with_launcher,
                                         GINT_TO_POINTER ((int) getpid ()), NULL);
  set_environment (l, w, launcher);
  if (!l->program && w->rank < l->world - l->servers)
    {
      /* the worker writes a byte there when its first step begins (stop.c) */
      int ends[2];
      if (!g_unix_open_pipe (ends, FD_CLOEXEC, error)
          || !g_unix_set_fd_nonblocking (ends[0], TRUE, error))
        return FALSE;
      w->step_fd = ends[0];
      g_subprocess_launcher_take_fd (launcher, ends[1], 3);
      g_subprocess_launcher_setenv (launcher, "KS_LAUNCH_STEP_FD", "3", TRUE);
    }
  if (log_dir != NULL)
    {
      g_auto (GStrv) what = g_strsplit (w->name, " ", 2);
      w->log_path = g_strdup_printf ("%s/%slog.%s", log_dir, what[0], what[1]);
      /* a restart's output goes after the earlier starts' */
      if ((w->log = fopen (w->log_path, l->restart > 0 ? "a" : "w")) == NULL)
        {
          g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
                       "cannot write the log %s: %s", w->log_path, g_strerror (errno));
          return FALSE;
        }
    }
  if ((w->process = g_subprocess_launcher_spawnv (launcher, (const char *const *) child_argv,
                                                  error))
      == NULL)
    return FALSE;
  w->output = g_data_input_stream_new (g_subprocess_get_stdout_pipe (w->process));
  l->running++;
  l->reading++;
  read_next_line (w);
  g_subprocess_wait_async (w->process, NULL, launch_on_worker_exit, w);
  return TRUE;
}

/* --servers or --workers (`option`) as a count: -1 when not given (fleetrun's lists of
 * endpoints are taken apart before, by take_endpoints). */
static gboolean
parse_count (const char *text, const char *option, int *out)
{
  gint64 v;
  *out = -1;
  if (text == NULL)
    return TRUE;
  if (g_ascii_string_to_signed (text, 10, 0, KS_CLI_MAX_PROCESSES, &v, NULL))
    {
      *out = (int) v;
      return TRUE;
    }
  ks_cli_error ("launch: %s %s: give a number of processes, 0 to %d, or as fleetrun "
                "takes it a list IP:PORT,IP:PORT,... (with the other also a list)",
                option, text, KS_CLI_MAX_PROCESSES);
  return FALSE;
}

/* fleetrun's form, --servers and --workers as lists of IP:PORT (either a list makes
 * both lists): this node's place, servers and workers, and node 0's store, in `l`, and
 * the counts in the texts' place. Prints what is wrong and returns FALSE. */
/* --node-rank not given (any given value below 0 is refused) */
#define NODE_RANK_UNSET G_MININT

static gboolean
take_endpoints (Launch *l, char **servers_text, char **workers_text, char **master,
                char **own_host, char **own_ports)
{
  gboolean list_s = *servers_text != NULL && strchr (*servers_text, ':') != NULL;
  gboolean list_w = *workers_text != NULL && strchr (*workers_text, ':') != NULL;
  g_autoptr (GError) error = NULL;

  if (l->rv.node_rank != NODE_RANK_UNSET && l->rv.node_rank < 0)
    {
      ks_cli_error ("launch: --node-rank %d: a node's place is 0 or more", l->rv.node_rank);
      return FALSE;
    }
  if (!list_s && !list_w)
    {
      if (l->rv.node_rank == NODE_RANK_UNSET)
        l->rv.node_rank = 0;
      return TRUE;
    }
  if (!list_s || !list_w)
    {
      ks_cli_error ("launch: --servers %s --workers %s: give both as fleetrun's lists of "
                    "IP:PORT, or both as this node's counts",
                    *servers_text != NULL ? *servers_text : "(none)",
                    *workers_text != NULL ? *workers_text : "(none)");
      return FALSE;
    }
  LaunchEndpoints e = { .nnodes = l->rv.nnodes,
                        .node_rank = l->rv.node_rank == NODE_RANK_UNSET ? -1 : l->rv.node_rank,
                        .master = *master };
  gboolean ok = ks_launch_endpoints (&e, *servers_text, *workers_text, &error);
  *master = e.master;
  *own_host = e.host;
  *own_ports = e.ports;
  if (!ok)
    {
      ks_cli_error ("launch: %s", error->message);
      return FALSE;
    }
  l->rv.nnodes = e.nnodes;
  l->rv.node_rank = e.node_rank;
  l->rv.own_host = e.host;
  l->rv.own_ports = e.ports;
  g_free (*servers_text);
  g_free (*workers_text);
  *servers_text = g_strdup_printf ("%d", e.servers);
  *workers_text = g_strdup_printf ("%d", e.workers);
  g_printerr ("ksdist: launch: fleetrun's lists name %d host%s; this is node %d (%s): %d "
              "server%s, %d worker%s%s%s\n",
              e.nnodes, e.nnodes == 1 ? "" : "s", e.node_rank, e.host, e.servers,
              e.servers == 1 ? "" : "s", e.workers, e.workers == 1 ? "" : "s",
              e.nnodes > 1 ? "; the job's store at " : "", e.nnodes > 1 ? *master : "");
  return TRUE;
}

/* Checks the options; prints what is wrong and returns FALSE. --servers and --workers
 * are -1 when not given; on several nodes they are this node's own (either may be 0). */
static gboolean
check_options (Launch *l, int n, int servers, int workers, const char *master)
{
  if (servers >= 0 || workers >= 0)
    {
      if (servers < 0 || workers < 0)
        {
          ks_cli_error ("launch: a parameter-server job takes both --servers S and --workers W "
                        "(with --nnodes, this node's own: either may be 0)");
          return FALSE;
        }
      if (l->rv.nnodes > 1 && servers + workers < 1)
        {
          ks_cli_error ("launch: --servers 0 --workers 0: this node would run nothing; on "
                        "several nodes each node's launcher gives the servers and workers IT "
                        "runs (either may be 0, not both)");
          return FALSE;
        }
      if (l->rv.nnodes == 1 && (servers < 1 || workers < 1))
        {
          ks_cli_error ("launch: --servers %d --workers %d: a parameter-server job on one "
                        "node needs at least 1 of each (with --nnodes, each node gives its "
                        "own and either may be 0)",
                        servers, workers);
          return FALSE;
        }
      l->servers = l->rv.servers = servers;
      l->rv.workers = workers;
      l->rv.ps = TRUE;
      n = servers + workers;
    }
  g_autofree char *given = l->rv.ps ? g_strdup_printf ("--servers %d --workers %d", servers,
                                                        workers)
                                     : g_strdup_printf ("-n %d", n);
  if (!ks_cli_check_processes ("launch", given, n))
    return FALSE;
  if (l->rv.nnodes < 1 || l->rv.node_rank < 0 || l->rv.node_rank >= l->rv.nnodes)
    {
      ks_cli_error ("launch: --node-rank %d of --nnodes %d: the rank must be from 0 to %d",
                    l->rv.node_rank, l->rv.nnodes, MAX (l->rv.nnodes - 1, 0));
      return FALSE;
    }
  if (l->rv.nnodes > 1 && master == NULL)
    {
      ks_cli_error ("launch: --nnodes %d needs --master HOST:PORT, where node 0 serves the "
                    "job's store (the same on every node)",
                    l->rv.nnodes);
      return FALSE;
    }
  l->n = l->rv.nproc = n;
  l->world = n * l->rv.nnodes;
  l->first_rank = n * l->rv.node_rank;
  return TRUE;
}

/* The job's workers (or servers) for the check before it starts; a parameter-server
 * node on several nodes knows only its own, so at least 1 each (the totals are checked
 * once the nodes have met). */
static int
own_world (const Launch *l, gboolean servers)
{
  if (l->rv.ps && l->rv.nnodes > 1)
    return MAX (servers ? l->rv.servers : l->rv.workers, 1);
  return servers ? l->servers : l->world - l->servers;
}

/* A parameter-server job on several nodes, once they have met: the job's totals, and the
 * same check as before the start with them (the first start only). */
static int
take_layout (Launch *l, KsRegistry *registry, const KsConfig *config, gboolean check)
{
  int workers = ks_launch_layout_total (&l->rv, FALSE);
  l->servers = ks_launch_layout_total (&l->rv, TRUE);
  l->world = workers + l->servers;
  g_autofree char *where = ks_launch_layout_describe (&l->rv);
  g_printerr ("ksdist: launch: %s\n", where);
  if (check && l->restart == 0)
    return ks_train_check (registry, (KsConfig *) config,
                           &(KsTrainWorld) { workers, l->servers }, FALSE);
  return KS_EXIT_OK;
}

/* Whether the job may use Gloo ([comm] backend auto or gloo: a key of a plugin the run
 * cannot use is refused) and the user left [gloo] hostname and iface alone (in the file,
 * env and --set). */
static gboolean
gloo_address_unset (const KsConfig *config)
{
  KsSource hostname, iface;
  const char *value, *backend = ks_config_get_string (config, "comm", "backend");
  return (strcmp (backend, "auto") == 0 || strcmp (backend, "gloo") == 0)
         && ks_config_lookup (config, "gloo", "hostname", &value, &hostname, NULL)
         && ks_config_lookup (config, "gloo", "iface", &value, &iface, NULL)
         && hostname == KS_SOURCE_DEFAULT && iface == KS_SOURCE_DEFAULT;
}

/* The processes run this same program's `train` with the same config and --set (and
 * for a restart, resume). */
static GPtrArray *
child_command (const char *config_file, char **sets, gboolean resume)
{
  GPtrArray *child = g_ptr_array_new_with_free_func (g_free);
  char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_ptr_array_add (child, self != NULL ? self : g_strdup (g_get_prgname ()));
  g_ptr_array_add (child, g_strdup ("train"));
  if (config_file != NULL)
    g_ptr_array_add (child, g_strdup (config_file));
  for (int i = 0; sets != NULL && sets[i] != NULL; i++)
    {
      g_ptr_array_add (child, g_strdup ("--set"));
      g_ptr_array_add (child, g_strdup (sets[i]));
    }
  if (resume)
    {
      g_ptr_array_add (child, g_strdup ("--set"));
      g_ptr_array_add (child, g_strdup ("train.resume=true"));
    }
  g_ptr_array_add (child, NULL);
  return child;
}

/* torchrun's --master-addr and --master-port as one --master HOST:PORT. */
static gboolean
join_master (char **master, char *addr, int port)
{
  if (addr == NULL && port == 0)
    return TRUE;
  if (*master != NULL)
    {
      ks_cli_error ("launch: give --master (or --rdzv-endpoint) or --master-addr and "
                    "--master-port, not both");
      return FALSE;
    }
  if (port < 0 || port > 65535)
    {
      ks_cli_error ("launch: --master-port %d: a port is 1 to 65535", port);
      return FALSE;
    }
  *master = g_strdup_printf ("%s:%d", addr != NULL ? addr : "127.0.0.1",
                             port != 0 ? port : 29500);
  return TRUE;
}

/* Where a program of its own may meet (MASTER_ADDR:MASTER_PORT): a free port here, or
 * on several nodes the port after --master's on node 0. */
static void
choose_master (Launch *l)
{
  g_autoptr (GPtrArray) held = g_ptr_array_new_with_free_func (g_object_unref);
  if (l->rv.nnodes > 1)
    {
      const char *colon = strrchr (l->rv.master, ':');
      const char *host = l->rv.master;
      gsize len = (gsize) (colon - l->rv.master);
      if (len >= 2 && host[0] == '[' && host[len - 1] == ']') /* [v6]: torch wants it bare */
        host++, len -= 2;
      l->master_addr = g_strndup (host, len);
      l->master_port = atoi (colon + 1) < 65535 ? atoi (colon + 1) + 1 : 65534;
      return;
    }
  l->master_addr = g_strdup ("127.0.0.1");
  l->master_port = ks_launch_free_port (l->master_addr, held);
}

/* Whether a start that ended with `status` is followed by another: a process failed at
 * run time (a configuration error comes back at every start; a signal asked us to stop)
 * and a restart is left. */
static gboolean
will_restart (const Launch *l, int status)
{
  return l->failed != NULL && status == KS_EXIT_RUNTIME && !l->signal_received
         && l->restart < l->max_restarts;
}

/* One start of the job: a fresh rendezvous, the processes, until all have ended. The
 * exit status; l->failed names the process that failed first, if one did. */
static int
run_once (Launch *l, const KsConfig *config, KsRegistry *registry, char **argv,
          gboolean program, const char *log_dir)
{
  g_autoptr (GError) error = NULL;
  int status;

  l->failed = NULL;
  l->failed_stopped = l->stopping = l->killing = FALSE;
  g_clear_pointer (&l->failure, g_free);
  l->reads = g_cancellable_new ();
  l->rv.generation = l->restart;
  l->rv.keep = FALSE;
  if (!ks_launch_rendezvous_begin (&l->rv, registry, config, &error))
    {
      ks_cli_error ("launch: %s", error->message);
      ks_launch_rendezvous_end (&l->rv, 0);
      g_clear_object (&l->reads);
      return KS_EXIT_RUNTIME;
    }
  if (l->rv.ps && l->rv.nnodes > 1
      && (status = take_layout (l, registry, config, !program)) != KS_EXIT_OK)
    {
      ks_launch_rendezvous_end (&l->rv, 0);
      g_clear_object (&l->reads);
      return status;
    }
  /* across nodes Gloo listens where this node meets the master, unless told otherwise */
  if (l->rv.nnodes > 1 && gloo_address_unset (config))
    l->gloo_hostname = l->rv.hosts[l->rv.node_rank];
  l->endpoints = l->servers > 0 ? endpoint_list (l, l->world - l->servers, l->servers)
                                : endpoint_list (l, 0, l->world);
  choose_master (l);
  for (int i = 0; i < l->n && error == NULL; i++)
    {
      Worker *w = &l->workers[i];
      memset (w, 0, sizeof *w);
      w->step_fd = -1;
      w->launch = l;
      w->rank = l->rv.ps && l->rv.nnodes > 1 ? ks_launch_layout_rank (&l->rv, i)
                                              : l->first_rank + i;
      w->name = w->rank < l->world - l->servers
                    ? g_strdup_printf ("worker %d", w->rank)
                    : g_strdup_printf ("server %d", w->rank - (l->world - l->servers));
      if (!start_worker (l, w, argv, log_dir, &error))
        {
          ks_cli_error ("launch: cannot start %s: %s", w->name, error->message);
          launch_stop_all (l);
        }
    }
  if (l->running > 0 || l->reading > 0)
    g_main_loop_run (l->loop);
  if (l->grace != 0)
    g_source_remove (l->grace);
  if (l->peer_wait != 0)
    g_source_remove (l->peer_wait);
  l->peer_wait = 0;
  if (l->drain != 0)
    g_source_remove (l->drain);
  l->grace = l->drain = 0;
  g_clear_object (&l->reads);

  status = KS_EXIT_OK;
  if (error != NULL)
    status = KS_EXIT_RUNTIME;
  else if (l->failed != NULL)
    /* a configuration error a worker found is still one: its status, 2, is the job's */
    status = l->failed->exited && !g_subprocess_get_if_signaled (l->failed->process)
                     && g_subprocess_get_exit_status (l->failed->process) == KS_EXIT_USAGE
                 ? KS_EXIT_USAGE
                 : KS_EXIT_RUNTIME;
  else if (l->signal_received || l->worker_signal)
    status = 128 + (l->signal_received ? l->signal_received : l->worker_signal);
  g_clear_pointer (&l->endpoints, g_free);
  g_clear_pointer (&l->master_addr, g_free);
  l->rv.keep = will_restart (l, status);
  ks_launch_rendezvous_end (&l->rv, status == KS_EXIT_OK ? 30000 : 0);
  return status;
}

/* The processes of one start, gone: their objects, logs and names. */
static void
clear_workers (Launch *l)
{
  for (int i = 0; i < l->n; i++)
    {
      g_clear_object (&l->workers[i].output);
      g_clear_object (&l->workers[i].process);
      if (l->workers[i].log != NULL)
        fclose (l->workers[i].log);
      l->workers[i].log = NULL;
      g_clear_pointer (&l->workers[i].log_path, g_free);
      g_clear_pointer (&l->workers[i].name, g_free);
      g_clear_pointer (&l->workers[i].lost, g_free);
      if (l->workers[i].step_fd >= 0)
        close (l->workers[i].step_fd);
      l->workers[i].step_fd = -1;
    }
}

static int
run_launch (int argc, char **argv)
{
  int n = 2, servers, workers, master_port = 0;
  g_autofree char *log_dir = NULL, *master = NULL, *master_addr = NULL;
  g_autofree char *servers_text = NULL, *workers_text = NULL;
  g_autofree char *own_host = NULL, *own_ports = NULL; /* fleetrun's lists' */
  char **program = NULL;
  g_auto (GStrv) sets = NULL;
  Launch l = { .rv = { .nnodes = 1, .node_rank = NODE_RANK_UNSET }, .grace_s = SIGNAL_GRACE_S };
  GOptionEntry entries[] = {
    { "nproc", 'n', 0, G_OPTION_ARG_INT, &n, "Workers to start on this machine (default 2)", "N" },
    { "nnodes", 0, 0, G_OPTION_ARG_INT, &l.rv.nnodes,
      "Machines in the job, each running its own ksdist launch (default 1)", "M" },
    { "node-rank", 0, 0, G_OPTION_ARG_INT, &l.rv.node_rank, "This machine's place, 0 to M-1",
      "K" },
    { "master", 0, 0, G_OPTION_ARG_STRING, &master,
      "Where node 0 serves the job's TCP store; every node gives the same", "HOST:PORT" },
    { "servers", 0, 0, G_OPTION_ARG_STRING, &servers_text,
      "A parameter-server job: this many servers (with --workers); with --nnodes, this "
      "node's (0 or more); or fleetrun's list IP:PORT,... the same on every node", "S" },
    { "workers", 0, 0, G_OPTION_ARG_STRING, &workers_text,
      "A parameter-server job: this many workers (with --servers); with --nnodes, this "
      "node's (0 or more); or fleetrun's list IP:PORT,...", "W" },
    { "log-dir", 0, 0, G_OPTION_ARG_FILENAME, &log_dir,
      "Write each process's output to DIR/workerlog.RANK (serverlog.S) too", "DIR" },
    { "grace-period", 0, 0, G_OPTION_ARG_DOUBLE, &l.grace_s,
      "After Ctrl-C or SIGTERM, the seconds the workers have to save a checkpoint and stop "
      "before they are killed (default 30)", "SECONDS" },
    { "max-restarts", 0, 0, G_OPTION_ARG_INT, &l.max_restarts,
      "When a process dies, stop the others and start the job again from the newest "
      "checkpoint in [train] checkpoint_dir (train.resume=true), up to N times (default 0)",
      "N" },
    KS_CLI_SET_OPTION (sets),
    /* torchrun's and fleetrun's spellings */
    { "nproc-per-node", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &n, NULL, NULL },
    { "nproc_per_node", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &n, NULL, NULL },
    { "node_rank", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &l.rv.node_rank, NULL, NULL },
    { "master-addr", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &master_addr, NULL, NULL },
    { "master_addr", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &master_addr, NULL, NULL },
    { "master-port", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &master_port, NULL, NULL },
    { "master_port", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &master_port, NULL, NULL },
    { "max_restarts", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &l.max_restarts, NULL, NULL },
    { "rdzv-endpoint", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &master, NULL, NULL },
    { "rdzv_endpoint", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &master, NULL, NULL },
    { "server_num", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &servers_text, NULL, NULL },
    { "worker_num", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &workers_text, NULL, NULL },
    { "log_dir", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_FILENAME, &log_dir, NULL, NULL },
    { NULL },
  };
  g_autoptr (KsConfig) config = NULL;
  g_autoptr (KsRegistry) registry = NULL;
  int status;

  /* a signal before the workers start: one line, nothing started (the main loop's
   * handlers take over before they do) */
  ks_trainer_catch_startup_signals ("ksdist: launch");
  /* `-- PROGRAM ARGS...`: the processes run PROGRAM instead of `ksdist train` */
  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "--") == 0)
      {
        program = argv + i + 1;
        argv[i] = NULL;
        argc = i;
        break;
      }
  if (program != NULL && program[0] == NULL)
    {
      ks_cli_error ("launch: nothing after --: give the PROGRAM to run and its arguments");
      return KS_EXIT_USAGE;
    }
  if (!ks_cli_parse ("launch", "[CONFIG] [-- PROGRAM ARGS...]", ks_cmd_launch.summary, entries,
                     &argc, &argv))
    return KS_EXIT_USAGE;
  if (!join_master (&master, master_addr, master_port))
    return KS_EXIT_USAGE;
  if (argc > 2)
    {
      ks_cli_error ("launch: one CONFIG at most, got '%s' too (see ksdist help launch)", argv[2]);
      return KS_EXIT_USAGE;
    }
  if (!take_endpoints (&l, &servers_text, &workers_text, &master, &own_host, &own_ports)
      || !parse_count (servers_text, "--servers", &servers)
      || !parse_count (workers_text, "--workers", &workers)
      || !check_options (&l, n, servers, workers, master))
    return KS_EXIT_USAGE;
  if (!(l.grace_s > 0 && l.grace_s <= 86400))
    {
      ks_cli_error ("launch: --grace-period %g: give the seconds the workers have to save and "
                    "stop after a signal, more than 0 and at most 86400", l.grace_s);
      return KS_EXIT_USAGE;
    }
  l.rv.master = master;
  /* a bad configuration is reported once, here, rather than by every process */
  if ((status = ks_cli_load (argc == 2 ? argv[1] : NULL, sets, &config, &registry)) != 0
      || (program == NULL
          && (status = ks_train_check (registry, config,
                                       &(KsTrainWorld) { own_world (&l, FALSE),
                                                         own_world (&l, TRUE) },
                                       TRUE))
                 != 0))
    return status;
  if (!ks_launch_restart_check (config, program != NULL, l.max_restarts))
    return KS_EXIT_USAGE;
  if (log_dir != NULL && g_mkdir_with_parents (log_dir, 0755) != 0)
    {
      ks_cli_error ("launch: cannot create --log-dir %s: %s", log_dir, g_strerror (errno));
      return KS_EXIT_USAGE;
    }
  g_autoptr (GPtrArray) child = program != NULL ? NULL
                                                 : child_command (argc == 2 ? argv[1] : NULL, sets,
                                                                  FALSE);
  g_autoptr (GPtrArray) resume = program != NULL ? NULL
                                                  : child_command (argc == 2 ? argv[1] : NULL,
                                                                   sets, TRUE);

  l.program = program != NULL;
  l.loop = g_main_loop_new (NULL, FALSE);
  l.workers = g_new0 (Worker, l.n);
  for (int i = 0; i < l.n; i++)
    l.workers[i].step_fd = -1;
  guint sigint = g_unix_signal_add (SIGINT, launch_on_sigint, &l);
  guint sigterm = g_unix_signal_add (SIGTERM, launch_on_sigterm, &l);
  guint watch = g_timeout_add (WATCH_MS, launch_on_watch, &l);
  l.timeout_s = ks_config_get_double (config, "comm", "timeout");
  for (;; l.restart++)
    {
      char **args = program != NULL ? program
                    : (char **) (l.restart > 0 ? resume : child)->pdata;
      status = run_once (&l, config, registry, args, program != NULL, log_dir);
      if (l.failed == NULL)
        break;
      g_autofree char *where = l.failed->log_path != NULL
                                   ? g_strdup_printf (" and in %s", l.failed->log_path)
                                   : g_strdup (" (keep it with --log-dir)");
      /* several nodes: the nodes lost, as this node's first failed process saw them,
       * rather than a survivor that only reported them */
      const char *subject = l.failed->name, *failure = l.failure;
      if (l.failed->lost != NULL)
        subject = l.failed->lost, failure = g_strdup_printf ("(seen by %s here)", l.failed->name);
      g_autofree char *own_failure = failure != l.failure ? (char *) failure : NULL;
      if (!will_restart (&l, status))
        {
          g_autofree char *spent = l.max_restarts > 0
                                       ? g_strdup_printf (" (no restart left of --max-restarts "
                                                          "%d)", l.max_restarts)
                                       : g_strdup ("");
          ks_cli_error ("launch: %s %s; the others were stopped%s. Its output is above%s",
                        subject, failure, spent, where);
          break;
        }
      g_autofree char *origin = ks_launch_restart_origin (config, program != NULL, l.restart + 1);
      ks_cli_error ("launch: %s %s; the others were stopped; restart %d of %d %s. Its output "
                    "is above%s",
                    subject, failure, l.restart + 1, l.max_restarts, origin, where);
      clear_workers (&l);
    }
  g_source_remove (sigint);
  g_source_remove (sigterm);
  g_source_remove (watch);
  clear_workers (&l);
  g_free (l.workers);
  g_free (l.failure);
  g_main_loop_unref (l.loop);
  return status;
}

const KsCommand ks_cmd_launch = {
  "launch",
  "Train with N workers on this machine or on several (data parallel), or with servers and "
  "workers (parameter server), one `ksdist train` each (or any PROGRAM after --). torchrun's "
  "--nproc-per-node, --node-rank, --master-addr, --master-port, --rdzv-endpoint and "
  "fleetrun's --server_num, --worker_num, --log_dir are understood",
  run_launch,
};
