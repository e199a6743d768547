/* Data files memory-mapped for reading in place (npy, IDX, token files), and what happens
 * when one is cut short while mapped: a read past its new end faults with SIGBUS, which
 * would kill the job with no word. The mapped ranges are kept here so that the handler
 * names the file and says what to do instead. */
#include "table-private.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

/* The files a job maps are a few (one per npy part or token file); past this many the
 * handler still explains, without the name. */
enum { MAPS_KEPT = 256, PATH_KEPT = 512 };

typedef struct {
  const char *start; /* NULL: a free entry */
  gsize length;
  char path[PATH_KEPT];
} MapEntry;

static MapEntry maps[MAPS_KEPT];
static GMutex maps_lock; /* the handler only reads, after the loads that write */

static void
say (const char *s)
{
  gsize n = strlen (s);
  while (n > 0)
    {
      gssize k = write (STDERR_FILENO, s, n);
      if (k <= 0)
        return;
      s += k;
      n -= (gsize) k;
    }
}

/* Async-signal-safe: a fault inside a mapped data file ends the process (status 1) with
 * one message; any other goes on as the default SIGBUS would. */
static void
on_sigbus (int sig, siginfo_t *info, void *context)
{
  const char *at = info->si_addr;
  (void) context;
  for (gsize i = 0; i < MAPS_KEPT; i++)
    if (maps[i].start != NULL && at >= maps[i].start && at < maps[i].start + maps[i].length)
      {
        say ("ksdist: ");
        say (maps[i].path);
        say (" was cut short while this job read it (a data file is memory-mapped: it must "
             "not be truncated or rewritten while a job trains on it); restore it, then "
             "resume from the newest checkpoint\n");
        _exit (1);
      }
  /* not a data file's fault: with the default back, a fault repeats and a SIGBUS sent by
   * kill (si_code <= 0) is sent again, so either ends the process as it would have */
  signal (sig, SIG_DFL);
  if (info->si_code <= 0)
    raise (sig);
}

static gpointer
install (gpointer unused)
{
  struct sigaction sa = { 0 };
  (void) unused;
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset (&sa.sa_mask);
  sigaction (SIGBUS, &sa, NULL);
  return NULL;
}

GMappedFile *
ks_table_map (const char *path, GError **error)
{
  static GOnce once = G_ONCE_INIT;
  g_autoptr (GError) local = NULL;
  GMappedFile *map = g_mapped_file_new (path, FALSE, &local);

  if (map == NULL)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_IO, "%s", local->message);
      return NULL;
    }
  g_once (&once, install, NULL);
  g_mutex_lock (&maps_lock);
  for (gsize i = 0; i < MAPS_KEPT; i++)
    if (maps[i].start == NULL)
      {
        g_strlcpy (maps[i].path, path, PATH_KEPT);
        maps[i].length = g_mapped_file_get_length (map);
        maps[i].start = g_mapped_file_get_contents (map);
        break;
      }
  g_mutex_unlock (&maps_lock);
  return map;
}

void
ks_table_unmap (GMappedFile *map)
{
  if (map == NULL)
    return;
  const char *start = g_mapped_file_get_contents (map);
  g_mutex_lock (&maps_lock);
  for (gsize i = 0; i < MAPS_KEPT && start != NULL; i++)
    if (maps[i].start == start)
      maps[i].start = NULL;
  g_mutex_unlock (&maps_lock);
  g_mapped_file_unref (map);
}
