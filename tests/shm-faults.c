/* test-shm's ranks in the scenarios that kill or fail one of them: a rank killed while
 * rank 0's segment has a name, rank 0 killed then, rank 0 failing on a full /dev/shm. */
#define _GNU_SOURCE /* unshare */
#include "shm-faults.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK(cond, ...) KS_RANK_CHECK ("rank", rank, cond, __VA_ARGS__)
#define OK(call) KS_RANK_OK ("rank", rank, call)

/* Whether process `pid` has ended: gone, or a zombie not reaped yet. */
static gboolean
process_ended (int pid)
{
  char state = ks_test_process_state (pid);
  return state == 0 || state == 'Z' || state == 'X';
}

/* Rank 0's process id, from the store (rank 0 puts it there before it connects). */
static int
rank0_pid (KsStore *store, int rank)
{
  g_autofree char *pid = NULL;
  gsize len;
  OK (ks_store_get (store, "test/pid0", 60000, (void **) &pid, &len, ERR));
  return atoi (pid);
}

/* Waits (a minute at most) until rank 0's process has ended. */
void
shm_faults_wait_rank0_ended (KsStore *store, int rank)
{
  int pid = rank0_pid (store, rank);
  for (int i = 0; i < 600 && !process_ended (pid); i++)
    g_usleep (100000);
  CHECK (process_ended (pid), "rank 0 (process %d) still runs after a minute", pid);
}

/* Before connecting: the scenarios that kill a rank while rank 0's segment has a name
 * (published in the store, not yet mapped by every rank). */
void
shm_faults_before_connect (KsStore *store, const char *scenario, int rank)
{
  g_autofree void *name = NULL;
  gsize len;

  if (rank == 0)
    {
      g_autofree char *pid = g_strdup_printf ("%d", (int) getpid ());
      OK (ks_store_set (store, "test/pid0", pid, strlen (pid) + 1, ERR));
      return;
    }
  if (strcmp (scenario, "kill-unmapped") != 0 && strcmp (scenario, "kill-connecting") != 0
      && strcmp (scenario, "kill-root") != 0)
    return;
  OK (ks_store_get (store, "ks/shm/segment", 60000, &name, &len, ERR));
  if (strcmp (scenario, "kill-connecting") == 0)
    {
      /* as connect does first: its process id for rank 0 */
      struct stat ns;
      CHECK (stat ("/proc/self/ns/pid", &ns) == 0, "no /proc/self/ns/pid");
      g_autofree char *pid = g_strdup_printf ("%d %" G_GINT64_MODIFIER "x", (int) getpid (),
                                              (guint64) ns.st_ino);
      OK (ks_store_set (store, "ks/shm/pid/1", pid, strlen (pid) + 1, ERR));
    }
  if (strcmp (scenario, "kill-root") != 0)
    kill (getpid (), SIGKILL); /* before mapping it */
  else
    {
      kill (rank0_pid (store, rank), SIGKILL);
      shm_faults_wait_rank0_ended (store, rank);
    }
}

/* rank0-full: rank 0 sees a /dev/shm of 64 KiB (a tmpfs in a mount namespace of its own;
 * exit 77 where this process may not make one), fails to connect and ends; rank 1 opens
 * the store only then. Rank 0's process id is in DIR/pid0. */
void
shm_faults_rank0_full (const char *dir, int rank)
{
  g_autofree char *file = g_build_filename (dir, "pid0", NULL);
  g_autofree char *pid = NULL;

  if (rank == 0)
    {
      if (unshare (CLONE_NEWNS) != 0 || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0
          || mount ("tmpfs", "/dev/shm", "tmpfs", 0, "size=64k") != 0)
        {
          g_printerr ("rank 0: cannot make a small /dev/shm: %s\n", g_strerror (errno));
          exit (77);
        }
      pid = g_strdup_printf ("%d", (int) getpid ());
      g_assert_true (g_file_set_contents (file, pid, -1, NULL));
      return;
    }
  for (int i = 0; i < 600 && !g_file_get_contents (file, &pid, NULL, NULL); i++)
    g_usleep (100000);
  CHECK (pid != NULL, "rank 0 did not start within a minute");
  for (int i = 0; i < 600 && !process_ended (atoi (pid)); i++)
    g_usleep (100000);
  CHECK (process_ended (atoi (pid)), "rank 0 still runs after a minute");
}


/* die-crowded: every rank on one CPU (the first this process may use) with two busy
 * processes of rank 0's, which end with it: a core that a waiting rank gives away is
 * taken for milliseconds, as on a loaded machine, whatever the machine's own load. */
void
shm_faults_crowd (int rank)
{
  cpu_set_t all, one;
  int cpu = 0;

  CHECK (sched_getaffinity (0, sizeof all, &all) == 0, "sched_getaffinity: %s",
         g_strerror (errno));
  while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET (cpu, &all))
    cpu++;
  CPU_ZERO (&one);
  CPU_SET (cpu, &one);
  CHECK (sched_setaffinity (0, sizeof one, &one) == 0, "sched_setaffinity: %s",
         g_strerror (errno));
  for (int i = 0; rank == 0 && i < 2; i++)
    {
      pid_t parent = getpid (), pid = fork ();
      CHECK (pid >= 0, "fork: %s", g_strerror (errno));
      if (pid > 0)
        continue;
      /* ends with rank 0, and holds none of its pipes open */
      prctl (PR_SET_PDEATHSIG, SIGKILL);
      int null = open ("/dev/null", O_WRONLY);
      dup2 (null, 1);
      dup2 (null, 2);
      if (getppid () != parent)
        _exit (0);
      for (volatile unsigned long x = 0;; x++)
        ;
    }
}
