/* The shared-memory communicator's names in /dev/shm and what a process leaves at exit:
 * every name this process made or opened and has not unlinked yet is unlinked when it
 * exits (atexit; at_quick_exit too, which a signal in start-up ends by), every communicator's line then says RANK_CLOSED, and rank 0 removes
 * the names that killed jobs left (sweep). */
#include "shm.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether process `pid` has ended: gone, or a zombie its parent has not reaped yet. */
gboolean
shm_process_ended (int pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree char *stat = NULL;
  const char *state;

  if (kill (pid, 0) != 0)
    return errno == ESRCH;
  if (!g_file_get_contents (path, &stat, NULL, NULL))
    return FALSE;
  state = strrchr (stat, ')'); /* the name in parentheses may hold anything */
  return state != NULL && (state[2] == 'Z' || state[2] == 'X');
}

static GMutex registry_lock;
static GPtrArray *linked; /* names this process made or opened, not yet unlinked */
static GPtrArray *open_shms; /* communicators whose line says RANK_RUNNING */
static pid_t owner;          /* the process they are of: a forked child's exit is not its */

static void
at_exit (void)
{
  if (getpid () != owner || !g_mutex_trylock (&registry_lock)) /* never hang at exit */
    return;
  for (guint i = 0; i < linked->len; i++)
    shm_unlink (linked->pdata[i]);
  for (guint i = 0; i < open_shms->len; i++)
    {
      Shm *s = open_shms->pdata[i];
      int running = RANK_RUNNING;
      atomic_compare_exchange_strong (&s->h->ranks[s->rank].state, &running, RANK_CLOSED);
    }
  g_mutex_unlock (&registry_lock);
}

static void
registry_init (void)
{
  if (linked == NULL)
    {
      linked = g_ptr_array_new_with_free_func (g_free);
      open_shms = g_ptr_array_new ();
      owner = getpid ();
      atexit (at_exit);
      at_quick_exit (at_exit);
    }
}

void
shm_remember_name (const char *name)
{
  g_mutex_lock (&registry_lock);
  registry_init ();
  g_ptr_array_add (linked, g_strdup (name));
  g_mutex_unlock (&registry_lock);
}

void
shm_unlink_name (char **name)
{
  if (*name == NULL)
    return;
  shm_unlink (*name); /* ENOENT when another rank was first */
  g_mutex_lock (&registry_lock);
  for (guint i = 0; linked != NULL && i < linked->len; i++)
    if (strcmp (linked->pdata[i], *name) == 0)
      {
        g_ptr_array_remove_index_fast (linked, i);
        break;
      }
  g_mutex_unlock (&registry_lock);
  g_clear_pointer (name, g_free);
}

/* This rank's line says it is running (and, at exit, closed) while the communicator is. */
gboolean
shm_track (Shm *s, gboolean on)
{
  gboolean was = FALSE;
  g_mutex_lock (&registry_lock);
  registry_init ();
  if (on)
    g_ptr_array_add (open_shms, s);
  else
    was = g_ptr_array_remove_fast (open_shms, s);
  g_mutex_unlock (&registry_lock);
  return was;
}

/* Removes the names in /dev/shm that a process of this pid namespace made and left when it
 * was killed (no code ran): /ksdist-<pid>-<namespace>-<random>, its creator ended, the file
 * ours. A live creator's name, or one from another namespace, stays. */
static void
sweep_stale (guint64 pid_ns)
{
  g_autoptr (GDir) d = g_dir_open ("/dev/shm", 0, NULL);
  const char *entry;
  int removed = 0;

  while (d != NULL && (entry = g_dir_read_name (d)) != NULL)
    {
      int pid;
      guint64 ns;
      unsigned random;
      char end;
      struct stat st;
      g_autofree char *path = g_build_filename ("/dev/shm", entry, NULL);
      if (sscanf (entry, "ksdist-%d-%" G_GINT64_MODIFIER "x-%8x%c", &pid, &ns, &random, &end) != 3
          || pid <= 0 || ns != pid_ns || pid == (int) getpid ())
        continue;
      if (lstat (path, &st) != 0 || !S_ISREG (st.st_mode) || st.st_uid != geteuid ()
          || !shm_process_ended (pid))
        continue;
      g_autofree char *name = g_strdup_printf ("/%s", entry);
      removed += shm_unlink (name) == 0;
    }
  if (removed > 0)
    g_message ("shm: removed %d segment%s from /dev/shm left by killed jobs (their processes "
               "have ended)", removed, removed > 1 ? "s" : "");
}

void
shm_sweep_stale (guint64 pid_ns)
{
  static gsize swept = 0;
  if (g_once_init_enter (&swept))
    {
      sweep_stale (pid_ns);
      g_once_init_leave (&swept, 1);
    }
}
