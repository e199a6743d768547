/* ksdist launch: N workers of `ksdist train` on this machine, as one data-parallel job.
 *
 * Each worker gets the environment the paddlecloud role maker reads (collective form)
 * plus the rendezvous: a fresh private store directory and a job name of its own, so
 * concurrent launches never meet. Output lines are prefixed with the rank and copied to
 * --log-dir/workerlog.R. Ctrl-C and SIGTERM are passed on to the workers. When one
 * worker fails, the others are stopped and the launcher exits non-zero naming the rank
 * and its log. */
#include "cli.h"

#include <gio/gio.h>
#include <errno.h>
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#define STOP_GRACE_MS 5000 /* SIGTERM, then SIGKILL after this long */

typedef struct Launch Launch;

typedef struct {
  Launch *launch;
  int rank;
  GSubprocess *process;
  GDataInputStream *output;
  FILE *log;
  char *log_path;
  gboolean output_done, exited;
} Worker;

struct Launch {
  GMainLoop *loop;
  Worker *workers;
  int n, running, reading;
  int failed_rank;     /* the first worker that failed, or -1 */
  char *failure;       /* how it failed */
  gboolean stopping;   /* the workers were told to stop */
  int signal_received; /* SIGINT/SIGTERM that asked us to stop, or 0 */
};

static void
maybe_quit (Launch *l)
{
  if (l->running == 0 && l->reading == 0)
    g_main_loop_quit (l->loop);
}

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
      maybe_quit (w->launch);
      return;
    }
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
  g_data_input_stream_read_line_async (w->output, G_PRIORITY_DEFAULT, NULL, on_line, w);
}

static void
kill_all (Launch *l, int sig)
{
  for (int r = 0; r < l->n; r++)
    if (!l->workers[r].exited)
      g_subprocess_send_signal (l->workers[r].process, sig);
}

static gboolean
on_grace_over (gpointer data)
{
  kill_all (data, SIGKILL);
  return G_SOURCE_REMOVE;
}

/* Stops every worker still running: SIGTERM now, SIGKILL if it lingers. */
static void
stop_all (Launch *l)
{
  if (l->stopping)
    return;
  l->stopping = TRUE;
  kill_all (l, SIGTERM);
  g_timeout_add (STOP_GRACE_MS, on_grace_over, l);
}

static void
on_worker_exit (GObject *source, GAsyncResult *result, gpointer data)
{
  Worker *w = data;
  Launch *l = w->launch;

  g_subprocess_wait_finish (w->process, result, NULL);
  w->exited = TRUE;
  l->running--;
  if (!g_subprocess_get_successful (w->process) && l->failed_rank < 0 && !l->stopping)
    {
      l->failed_rank = w->rank;
      if (g_subprocess_get_if_signaled (w->process))
        l->failure = g_strdup_printf ("was killed by signal %d (%s)",
                                      g_subprocess_get_term_sig (w->process),
                                      g_strsignal (g_subprocess_get_term_sig (w->process)));
      else
        l->failure = g_strdup_printf ("exited with status %d",
                                      g_subprocess_get_exit_status (w->process));
      stop_all (l);
    }
  maybe_quit (l);
}

static gboolean
on_signal (gpointer data)
{
  Launch *l = data;
  l->signal_received = SIGINT;
  g_printerr ("ksdist: launch: stopping the workers\n");
  stop_all (l);
  return G_SOURCE_CONTINUE;
}

/* A random name for the job's rendezvous. */
static char *
job_name (void)
{
  return g_strdup_printf ("launch-%d-%08x%08x", (int) getpid (), g_random_int (), g_random_int ());
}

/* The rendezvous directory holds one folder, the job's, of plain files. */
static void
remove_store (const char *store_dir, const char *job)
{
  g_autofree char *folder = g_build_filename (store_dir, job, NULL);
  g_autoptr (GDir) dir = g_dir_open (folder, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = g_build_filename (folder, name, NULL);
      g_unlink (path);
    }
  g_rmdir (folder);
  g_rmdir (store_dir);
}

static gboolean
start_worker (Launch *l, Worker *w, char **child_argv, const char *store_dir, const char *job,
              const char *endpoints, const char *log_dir, GError **error)
{
  g_autoptr (GSubprocessLauncher) launcher
      = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_MERGE);
  g_autofree char *id = g_strdup_printf ("%d", w->rank);
  g_autofree char *n = g_strdup_printf ("%d", l->n);
  g_auto (GStrv) eps = g_strsplit (endpoints, ",", -1);

  g_subprocess_launcher_unsetenv (launcher, "TRAINING_ROLE");
  g_subprocess_launcher_setenv (launcher, "PADDLE_TRAINER_ID", id, TRUE);
  g_subprocess_launcher_setenv (launcher, "PADDLE_TRAINERS_NUM", n, TRUE);
  g_subprocess_launcher_setenv (launcher, "PADDLE_TRAINER_ENDPOINTS", endpoints, TRUE);
  g_subprocess_launcher_setenv (launcher, "PADDLE_CURRENT_ENDPOINT", eps[w->rank], TRUE);
  g_subprocess_launcher_setenv (launcher, "KS_STORE_ADDRESS", store_dir, TRUE);
  g_subprocess_launcher_setenv (launcher, "KS_JOB", job, TRUE);
  if (log_dir != NULL)
    {
      w->log_path = g_strdup_printf ("%s/workerlog.%d", log_dir, w->rank);
      if ((w->log = fopen (w->log_path, "w")) == NULL)
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
  g_subprocess_wait_async (w->process, NULL, on_worker_exit, w);
  return TRUE;
}

static int
run_launch (int argc, char **argv)
{
  int n = 2;
  g_autofree char *log_dir = NULL;
  g_auto (GStrv) sets = NULL;
  GOptionEntry entries[] = {
    { "nproc", 'n', 0, G_OPTION_ARG_INT, &n, "Workers to start on this machine (default 2)", "N" },
    { "log-dir", 0, 0, G_OPTION_ARG_FILENAME, &log_dir,
      "Write each worker's output to DIR/workerlog.RANK too", "DIR" },
    KS_CLI_SET_OPTION (sets),
    { NULL },
  };
  g_autoptr (KsConfig) config = NULL;
  g_autoptr (KsRegistry) registry = NULL;
  g_autoptr (GError) error = NULL;
  Launch l = { .failed_rank = -1 };
  int status;

  if (!ks_cli_parse ("launch", "[CONFIG]", ks_cmd_launch.summary, entries, &argc, &argv))
    return KS_EXIT_USAGE;
  if (argc > 2)
    {
      ks_cli_error ("launch: one CONFIG at most, got '%s' too (see ksdist help launch)", argv[2]);
      return KS_EXIT_USAGE;
    }
  if (n < 1 || n > 1024)
    {
      ks_cli_error ("launch: -n %d: start between 1 and 1024 workers", n);
      return KS_EXIT_USAGE;
    }
  /* a bad configuration is reported once, here, rather than by every worker */
  if ((status = ks_cli_load (argc == 2 ? argv[1] : NULL, sets, &config, &registry)) != 0)
    return status;
  if (log_dir != NULL && g_mkdir_with_parents (log_dir, 0755) != 0)
    {
      ks_cli_error ("launch: cannot create --log-dir %s: %s", log_dir, g_strerror (errno));
      return KS_EXIT_USAGE;
    }

  g_autofree char *store_dir = g_dir_make_tmp ("ksdist-launch-XXXXXX", &error);
  if (store_dir == NULL)
    {
      ks_cli_error ("launch: cannot make the rendezvous directory: %s", error->message);
      return KS_EXIT_RUNTIME;
    }
  g_autofree char *job = job_name ();
  g_autoptr (GString) endpoints = g_string_new (NULL);
  for (int r = 0; r < n; r++)
    g_string_append_printf (endpoints, "%s127.0.0.1:%d", r ? "," : "", 6170 + r);

  /* the workers run this same program's `train` with the same config and --set */
  g_autoptr (GPtrArray) child = g_ptr_array_new ();
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_ptr_array_add (child, self != NULL ? self : (char *) g_get_prgname ());
  g_ptr_array_add (child, (char *) "train");
  if (argc == 2)
    g_ptr_array_add (child, argv[1]);
  for (int i = 0; sets != NULL && sets[i] != NULL; i++)
    {
      g_ptr_array_add (child, (char *) "--set");
      g_ptr_array_add (child, sets[i]);
    }
  g_ptr_array_add (child, NULL);

  l.n = n;
  l.loop = g_main_loop_new (NULL, FALSE);
  l.workers = g_new0 (Worker, n);
  guint sigint = g_unix_signal_add (SIGINT, on_signal, &l);
  guint sigterm = g_unix_signal_add (SIGTERM, on_signal, &l);
  for (int r = 0; r < n && error == NULL; r++)
    {
      l.workers[r].launch = &l;
      l.workers[r].rank = r;
      if (!start_worker (&l, &l.workers[r], (char **) child->pdata, store_dir, job,
                         endpoints->str, log_dir, &error))
        {
          ks_cli_error ("launch: cannot start worker %d: %s", r, error->message);
          stop_all (&l);
        }
    }
  if (l.running > 0 || l.reading > 0)
    g_main_loop_run (l.loop);
  g_source_remove (sigint);
  g_source_remove (sigterm);

  status = KS_EXIT_OK;
  if (error != NULL)
    status = KS_EXIT_RUNTIME;
  else if (l.failed_rank >= 0)
    {
      Worker *w = &l.workers[l.failed_rank];
      ks_cli_error ("launch: worker %d %s; the others were stopped. Its output is above%s%s",
                    l.failed_rank, l.failure, w->log_path ? " and in " : "",
                    w->log_path ? w->log_path : " (keep it with --log-dir)");
      status = KS_EXIT_RUNTIME;
    }
  else if (l.signal_received)
    status = 128 + SIGINT;
  for (int r = 0; r < n; r++)
    {
      g_clear_object (&l.workers[r].output);
      g_clear_object (&l.workers[r].process);
      if (l.workers[r].log != NULL)
        fclose (l.workers[r].log);
      g_free (l.workers[r].log_path);
    }
  g_free (l.workers);
  g_free (l.failure);
  g_main_loop_unref (l.loop);
  remove_store (store_dir, job);
  return status;
}

const KsCommand ks_cmd_launch = {
  "launch",
  "Train with N workers on this machine (data parallel), one `ksdist train` each",
  run_launch,
};
