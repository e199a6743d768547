/* Preemption: Slurm and Kubernetes stop a job with SIGTERM and a grace period, a person
 * with Ctrl-C (SIGINT). During ks_trainer_run either signal only asks for a stop: at the
 * next step boundary the workers agree whether any of them was asked (the max of their
 * flags over the workers' communicator), save a checkpoint of that step where [train]
 * checkpoint_dir is set, say where and how to resume, and end with an error whose code
 * is the signal (ks_trainer_exit_status: 128 + it). A second signal stops at once (the
 * default action, re-raised); under ksdist launch the launcher does that instead (its
 * workers may get one signal twice: from the terminal's process group or the scheduler,
 * and from the launcher passing it on), so there a worker ignores the repeats.
 *
 * Before the first step (start-up: loading plugins and data, meeting the job, building)
 * there is nothing to save and the waits there (a rendezvous, a connect) can last
 * [comm] timeout, so a signal ends the process at once: one line saying nothing was
 * trained and nothing saved (none under ksdist launch, which says it for the job), the
 * checkpoint directory it made removed, exit 128 + the signal. The handler only writes
 * the signal to a pipe; a watcher thread does the rest and calls quick_exit, so that the
 * clean-ups the plugins registered with at_quick_exit run (the shm communicator's names
 * in /dev/shm are unlinked and its peers see this rank closed, where _exit left them).
 * Not exit: the other threads go on meanwhile, and exit's destructors (OpenBLAS's, the
 * GType system's) under a thread still using them crashed it in 11 of 16 tries.
 * Under ksdist launch a worker tells the launcher through KS_LAUNCH_STEP_FD when its
 * first step begins, so that the launcher promises a checkpoint only when one will be
 * saved. */
#include "trainer-private.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

G_DEFINE_QUARK (ks-trainer-signal-error-quark, ks_trainer_signal_error)

/* the first SIGTERM or SIGINT since the handlers were installed, or 0 */
static volatile sig_atomic_t stop_signal;
/* under ksdist launch: repeats are ignored (the launcher stops us at once) */
static volatile sig_atomic_t launched;
static struct sigaction old_term, old_int;
static gboolean caught_int; /* SIGINT's handler is ours (it was not ignored) */
static gboolean installed;  /* the handlers are ours now */
/* start-up: a signal ends the process at once. STARTUP until the first step begins,
 * then STEPPING; the handler moves STARTUP to ENDING (one compare-and-swap, so that the
 * first step and a signal cannot both win) and the watcher thread ends the process. */
enum { STEPPING, STARTUP, ENDING };
static volatile sig_atomic_t phase = STEPPING;
static int wake[2] = { -1, -1 }; /* the self-pipe: the handler writes the signal's number */
static volatile pid_t watched;   /* the process whose watcher reads it (not a forked child) */
static char program[64] = "ksdist"; /* the start of the start-up line */
/* the checkpoint directory start-up made, and its lock file: removed when a signal ends
 * start-up. Read only while made_ready is set: it is cleared before the paths are
 * written and set after, so that a reader never sees half a path. */
static char made_dir[PATH_MAX], made_lock[PATH_MAX];
static volatile sig_atomic_t made_ready;
/* held while start-up makes the directory and its lock, so that the watcher removes them
 * after they exist, never between their making (it would leave them behind) */
static GMutex making;

static void
say (const char *text)
{
  ssize_t ignored = write (STDERR_FILENO, text, strlen (text));
  (void) ignored;
}

/* The watcher: a signal in start-up ends the process here, outside the handler, so that
 * the line, the directory's removal and the at_quick_exit clean-ups run in a thread. */
static gpointer
watch_startup (gpointer data)
{
  unsigned char sig;
  ssize_t n;

  (void) data;
  while ((n = read (wake[0], &sig, 1)) < 0 && errno == EINTR)
    ;
  if (n != 1)
    return NULL;
  if (!launched)
    {
      say (program);
      say (sig == SIGTERM ? ": stopped by SIGTERM" : ": stopped by SIGINT");
      say (" before the first step: nothing was trained and nothing saved\n");
    }
  g_mutex_lock (&making); /* kept: the process ends here */
  __sync_synchronize ();
  if (made_ready)
    {
      unlink (made_lock);
      rmdir (made_dir); /* only when empty: nothing else was put there */
    }
  quick_exit (128 + sig);
}

/* The watcher is ending the process: this thread waits for it. */
static void
wait_for_the_end (void)
{
  for (;;)
    pause ();
}

static void
on_stop_signal (int sig)
{
  struct sigaction dfl;
  unsigned char byte = (unsigned char) sig;

  if (__sync_bool_compare_and_swap (&phase, STARTUP, ENDING))
    {
      /* a child forked without exec has no watcher, and the pipe is its parent's */
      if (getpid () != watched || write (wake[1], &byte, 1) != 1)
        _exit (128 + sig); /* as before the watcher: at once, without the clean-up */
      return;
    }
  if (phase == ENDING)
    {
      if (!launched) /* a second signal in start-up: now, without the clean-up */
        _exit (128 + sig);
      return;
    }
  /* the first (two threads may take one signal each at once: one of them is) */
  if (__sync_bool_compare_and_swap (&stop_signal, 0, sig))
    return;
  if (launched)
    return;
  /* a second signal: its default action, now (sigaction and raise are
   * async-signal-safe; the signal is blocked here and acts once the handler returns) */
  memset (&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset (&dfl.sa_mask);
  sigaction (sig, &dfl, NULL);
  raise (sig);
}

/* Whether ksdist launch started this process: it says its process id, and is the parent. */
static gboolean
under_launch (void)
{
  const char *pid = g_getenv ("KS_LAUNCHER_PID");
  return pid != NULL && atoi (pid) == (int) getppid ();
}

/* The self-pipe and its watcher, once per process (the thread waits while it lives). */
static void
start_watcher (void)
{
  static gsize started = 0;
  if (g_once_init_enter (&started))
    {
      GError *error = NULL;
      if (g_unix_open_pipe (wake, FD_CLOEXEC, &error))
        {
          watched = getpid ();
          g_thread_unref (g_thread_new ("ks-startup-signal", watch_startup, NULL));
        }
      else /* no watcher: a start-up signal ends the process at once, without the clean-up */
        {
          g_warning ("cannot make the pipe that start-up signals are told through: %s",
                     error->message);
          g_error_free (error);
        }
      g_once_init_leave (&started, 1);
    }
}

static void
install (void)
{
  struct sigaction sa;

  memset (&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset (&sa.sa_mask);
  sa.sa_flags = SA_RESTART; /* reads, writes and waits go on until the step's end */
  stop_signal = 0;
  launched = under_launch ();
  start_watcher ();
  sigaction (SIGTERM, &sa, &old_term);
  /* SIGINT ignored (a shell's background job, nohup) stays ignored */
  caught_int = sigaction (SIGINT, NULL, &old_int) == 0 && old_int.sa_handler != SIG_IGN;
  if (caught_int)
    sigaction (SIGINT, &sa, NULL);
  installed = TRUE;
}

void
ks_trainer_catch_startup_signals (const char *name)
{
  if (name != NULL)
    g_strlcpy (program, name, sizeof program);
  if (installed)
    return;
  phase = STARTUP;
  install ();
}

void
ks_trainer_signals_catch (void)
{
  if (!installed)
    ks_trainer_catch_startup_signals (NULL);
}

/* Start-up is over; never returns when a signal is ending it (the watcher exits). */
static void
leave_startup (void)
{
  if (!__sync_bool_compare_and_swap (&phase, STARTUP, STEPPING) && phase == ENDING)
    wait_for_the_end ();
}

void
ks_trainer_signals_restore (void)
{
  leave_startup ();
  made_ready = 0;
  if (!installed)
    return;
  sigaction (SIGTERM, &old_term, NULL);
  if (caught_int)
    sigaction (SIGINT, &old_int, NULL);
  caught_int = installed = FALSE;
}

void
ks_trainer_startup_made_dir (const char *dir, const char *lock)
{
  g_mutex_lock (&making); /* until ks_trainer_startup_made_done */
  /* published to the watcher: the flag cleared, the paths written, then the flag set */
  made_ready = 0;
  __sync_synchronize ();
  if (strlen (dir) >= sizeof made_dir || strlen (lock) >= sizeof made_lock)
    return;
  memcpy (made_dir, dir, strlen (dir) + 1);
  memcpy (made_lock, lock, strlen (lock) + 1);
  __sync_synchronize ();
  made_ready = 1;
}

void
ks_trainer_startup_made_done (void)
{
  g_mutex_unlock (&making);
}

void
ks_trainer_signals_stepping (void)
{
  const char *fd_text = g_getenv ("KS_LAUNCH_STEP_FD");
  int fd = fd_text != NULL && launched ? atoi (fd_text) : -1;

  if (phase == STEPPING)
    return;
  leave_startup (); /* from here a signal is a stop at a step boundary, saved */
  /* the launcher reads it: this worker saves at the next step if a signal comes */
  if (fd > 2 && fcntl (fd, F_GETFD) != -1)
    {
      if (write (fd, "s", 1) != 1)
        g_debug ("cannot tell the launcher the first step began: %s", g_strerror (errno));
      close (fd);
    }
}

/* Whether any worker was asked to stop: *sig the signal (the largest number when they
 * differ, so that every worker reports the same), 0 when none was. Every worker calls it
 * after each step. With several workers they agree in one small allreduce (the max of
 * the flag and of each one's proposal for the next agreement), not at every step where
 * steps are short: the next is about AGREE_S of training later (at most AGREE_MAX steps),
 * so that its cost stays a small part of the time and a stop comes soon. */
#define AGREE_S 0.05
#define AGREE_MAX 100
gboolean
ks_trainer_stop_agreed (KsTrainer *t, gint64 step, int *sig, GError **error)
{
  gint64 now;

  *sig = 0;
  if (t->role == NULL || !ks_role_maker_is_worker (t->role)
      || ks_role_maker_worker_num (t->role) <= 1)
    {
      *sig = stop_signal; /* alone: at once */
      return TRUE;
    }
  if (step < t->agree_next)
    return TRUE;
  now = g_get_monotonic_time ();
  double per_step = t->agree_at_us > 0 && step > t->agree_at_step
                        ? (now - t->agree_at_us) / 1e6 / (step - t->agree_at_step)
                        : 0;
  double in[2] = { stop_signal, per_step > 0 ? MIN (AGREE_MAX, AGREE_S / per_step) : 1 };
  double out[2];
  if (!ks_role_maker_all_reduce_worker (t->role, in, out, 2, KS_REDUCE_MAX, error))
    return g_prefix_error (error, "agreeing whether a worker was asked to stop: "), FALSE;
  *sig = (int) out[0];
  t->agree_next = step + MAX (1, (gint64) out[1]);
  t->agree_at_us = g_get_monotonic_time ();
  t->agree_at_step = step;
  return TRUE;
}

/* The command that resumes this run: that of the ksdist launch that started this
 * process, else this process's own, with --set train.resume=true unless the run resumed already. */
static char *
resume_command (KsTrainer *t)
{
  g_autofree char *cmdline = NULL;
  g_autofree char *path = under_launch () ? g_strdup_printf ("/proc/%d/cmdline", (int) getppid ())
                                          : g_strdup ("/proc/self/cmdline");
  gsize len = 0;
  g_autoptr (GString) out = g_string_new (NULL);

  if (g_file_get_contents (path, &cmdline, &len, NULL) && len > 0)
    for (gsize at = 0; at < len; at += strlen (cmdline + at) + 1)
      {
        const char *a = cmdline + at;
        g_autofree char *base = at == 0 ? g_path_get_basename (a) : NULL;
        g_autofree char *quoted = NULL;
        /* the build tree's libtool binary (.libs/lt-ksdist) is ksdist to a person */
        if (base != NULL && g_str_has_suffix (base, "ksdist"))
          quoted = g_strdup ("ksdist");
        else if (*a == '\0' || strpbrk (a, " \t\n'\"\\$`*?[]#~&;|<>(){}!") != NULL)
          quoted = g_shell_quote (a);
        else
          quoted = g_strdup (a);
        g_string_append_printf (out, "%s%s", at > 0 ? " " : "", quoted);
      }
  else
    g_string_append (out, "the same command");
  if (!ks_config_get_bool (t->config, "train", "resume"))
    g_string_append (out, " --set train.resume=true");
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static const char *
signal_name (int sig)
{
  return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a signal";
}

/* The stop after `step` was saved (or not, without a checkpoint_dir): FALSE with the
 * error that says so. */
gboolean
ks_trainer_stopped (KsTrainer *t, int sig, gint64 step, const char *ckpt_dir, GError **error)
{
  if (*ckpt_dir == '\0')
    {
      g_set_error (error, KS_TRAINER_SIGNAL_ERROR, sig,
                   "stopped by %s at step %" G_GINT64_FORMAT ": nothing was saved, as [train] "
                   "checkpoint_dir is not set (set it, e.g. --set train.checkpoint_dir=DIR, "
                   "for a stop to save a checkpoint to resume from)",
                   signal_name (sig), step);
      return FALSE;
    }
  g_autofree char *command = resume_command (t);
  g_set_error (error, KS_TRAINER_SIGNAL_ERROR, sig,
               "stopped by %s at step %" G_GINT64_FORMAT ": saved checkpoint-%" G_GINT64_FORMAT
               " in %s; resume with: %s",
               signal_name (sig), step, step, ckpt_dir, command);
  return FALSE;
}

int
ks_trainer_stop_signal (void)
{
  return stop_signal;
}

/* A server stops when every worker has: after a signal, with the signal's status. */
gboolean
ks_trainer_server_stopped (KsTrainer *t, GError **error)
{
  int sig = stop_signal;
  if (sig == 0)
    return TRUE;
  g_set_error (error, KS_TRAINER_SIGNAL_ERROR, sig,
               "server %d: stopped by %s: it served until every worker had stopped (the "
               "workers' lines say what they saved)",
               ks_role_maker_server_index (t->role), signal_name (sig));
  return FALSE;
}
