/* A checkpoint directory's life: written under a temporary name, fsynced, committed by a
 * rename (or an atomic exchange), the older ones pruned, the temporaries of killed
 * writers removed (checkpoint.h). Every directory ksdist writes whole goes through here. */
/* renameat2 and RENAME_EXCHANGE (glibc 2.28), where the C library has them */
#define _GNU_SOURCE 1
#include "checkpoint-private.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

gboolean
ks_io_error (GError **error, const char *what, const char *path)
{
  int saved = errno;
  g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO, "%s %s: %s", what, path,
               g_strerror (saved));
  return FALSE;
}


gboolean
ks_checkpoint_fsync (const char *path, GError **error)
{
  int fd = open (path, O_RDONLY);
  gboolean ok = fd >= 0 && fsync (fd) == 0;
  if (fd >= 0)
    close (fd);
  return ok || ks_io_error (error, "cannot fsync", path);
}

/* Removes a committed checkpoint directory: the files a checkpoint holds (safetensors
 * files, a job's JSON file) and then it, if that left it empty; anything else a user put
 * there stays, and so does the directory. */
static void
remove_tree (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    if (g_str_has_suffix (name, ".safetensors") || g_str_has_suffix (name, ".json"))
      {
        g_autofree char *path = g_build_filename (dir, name, NULL);
        if (g_file_test (path, G_FILE_TEST_IS_REGULAR)
            && !g_file_test (path, G_FILE_TEST_IS_SYMLINK))
          g_unlink (path);
      }
  g_rmdir (dir);
}

static gint64
checkpoint_step (const char *name)
{
  gint64 step;
  if (!g_str_has_prefix (name, PREFIX)
      || !g_ascii_string_to_signed (name + strlen (PREFIX), 10, 0, G_MAXINT64, &step, NULL))
    return -1;
  return step;
}

static gint
by_step_descending (gconstpointer a, gconstpointer b)
{
  gint64 sa = checkpoint_step (*(const char *const *) a);
  gint64 sb = checkpoint_step (*(const char *const *) b);
  return sa < sb ? 1 : sa > sb ? -1 : 0;
}

/* The names of the checkpoints in `dir`, newest first. */
static GPtrArray *
list_checkpoints (const char *dir)
{
  GPtrArray *names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    if (checkpoint_step (name) >= 0)
      g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, by_step_descending);
  return names;
}

char *
ks_checkpoint_temporary_name (const char *parent, const char *prefix, const char *base)
{
  return g_strdup_printf ("%s/%s%s@%s-%d", parent, prefix, base, g_get_host_name (),
                          (int) getpid ());
}

void
ks_checkpoint_remove_all (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      if (g_file_test (path, G_FILE_TEST_IS_DIR) && !g_file_test (path, G_FILE_TEST_IS_SYMLINK))
        ks_checkpoint_remove_all (path);
      else
        g_unlink (path);
    }
  g_rmdir (dir);
}

void
ks_checkpoint_remove_stale (const char *parent, const char *prefix)
{
  g_autoptr (GDir) d = g_dir_open (parent, 0, NULL);
  g_autofree char *host = g_strdup_printf ("@%s-", g_get_host_name ());
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      const char *at = g_str_has_prefix (name, prefix) ? g_strrstr (name, host) : NULL;
      guint64 pid;
      g_autofree char *digits = at != NULL ? g_strdup (at + strlen (host)) : NULL;
      if (digits != NULL && g_str_has_suffix (digits, ".old"))
        digits[strlen (digits) - 4] = '\0';
      if (digits == NULL || !g_ascii_string_to_unsigned (digits, 10, 1, G_MAXINT32, &pid, NULL)
          || kill ((pid_t) pid, 0) == 0 || errno != ESRCH) /* alive, or not ours to judge */
        continue;
      g_autofree char *path = g_build_filename (parent, name, NULL);
      g_message ("removing %s, left by a writer (process %" G_GUINT64_FORMAT ") that is gone",
                 path, pid);
      ks_checkpoint_remove_all (path);
    }
}

/* Removes the temporary directories of `base` that a crashed writer with this process id
 * left (their random part differs; a process id may come again, in a container). */
static void
remove_own_leftovers (const char *parent, const char *base)
{
  g_autoptr (GDir) d = g_dir_open (parent, 0, NULL);
  g_autofree char *start = g_strdup_printf (".tmp-%s.", base);
  g_autofree char *end = g_strdup_printf ("@%s-%d", g_get_host_name (), (int) getpid ());
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    if (g_str_has_prefix (name, start) && g_str_has_suffix (name, end))
      {
        g_autofree char *path = g_build_filename (parent, name, NULL);
        ks_checkpoint_remove_all (path);
      }
}

char *
ks_checkpoint_begin (const char *final, GError **error)
{
  g_autofree char *parent = g_path_get_dirname (final);
  g_autofree char *base = g_path_get_basename (final);
  /* random, so that the save's identity (save_of) is this save's alone */
  g_autofree char *unique = g_strdup_printf ("%s.%08x%08x%08x%08x", base, g_random_int (),
                                             g_random_int (), g_random_int (), g_random_int ());
  char *tmp = ks_checkpoint_temporary_name (parent, ".tmp-", unique);

  if (g_mkdir_with_parents (parent, 0755) != 0)
    {
      ks_io_error (error, "cannot create the directory", parent);
      g_free (tmp);
      return NULL;
    }
  remove_own_leftovers (parent, base);
  ks_checkpoint_remove_stale (parent, ".tmp-");
  /* parameter-server checkpoints were written under this prefix before they used this */
  ks_checkpoint_remove_stale (parent, ".partial-");
  if (g_mkdir (tmp, 0755) != 0)
    {
      ks_io_error (error, "cannot create", tmp);
      g_free (tmp);
      return NULL;
    }
  return tmp;
}

gboolean
ks_checkpoint_check_temporary (const char *dir, const char *tmp, gint64 step, GError **error)
{
  g_autofree char *name = g_path_get_basename (tmp);
  g_autofree char *parent = g_path_get_dirname (tmp);
  g_autofree char *start = g_strdup_printf (".tmp-" PREFIX "%" G_GINT64_FORMAT ".", step);
  g_autofree char *real_dir = NULL, *real_parent = NULL;
  const char *rest = name + MIN (strlen (start), strlen (name)), *pid;
  struct stat st;
  /* begin's name whole: <32 hex>@HOST-PID, nothing after (not a committed checkpoint
   * moved aside, <name>.old) */
  gboolean named = g_str_has_prefix (name, start) && strlen (rest) > 33 && rest[32] == '@';

  for (int i = 0; named && i < 32; i++)
    named = g_ascii_isxdigit (rest[i]);
  pid = named ? strrchr (rest, '-') : NULL;
  if (pid == NULL || pid[1] == '\0' || strspn (pid + 1, "0123456789") != strlen (pid + 1))
    return g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO,
                        "%s is not the temporary directory of a save of step %" G_GINT64_FORMAT
                        " (.tmp-" PREFIX "%" G_GINT64_FORMAT ".* made by ks_checkpoint_begin)",
                        tmp, step, step), FALSE;
  /* links resolved: no "..", no link to elsewhere */
  if ((real_dir = realpath (dir, NULL)) == NULL || (real_parent = realpath (parent, NULL)) == NULL
      || strcmp (real_dir, real_parent) != 0)
    return g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO,
                        "%s is not in the checkpoint directory %s", tmp, dir), FALSE;
  if (lstat (tmp, &st) != 0 || !S_ISDIR (st.st_mode))
    return g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO,
                        "%s is not a directory (missing, or a link)", tmp), FALSE;
  return TRUE;
}

void
ks_checkpoint_abort (const char *tmp)
{
  g_autofree char *name = g_path_get_basename (tmp);
  /* only a directory ks_checkpoint_begin made: everything in it is ours */
  g_return_if_fail (g_str_has_prefix (name, ".tmp-"));
  ks_checkpoint_remove_all (tmp);
}

/* The newest `keep` checkpoints of `dir` stay (keep 0: all). */
static void
keep_newest (const char *dir, guint keep)
{
  g_autoptr (GPtrArray) names = list_checkpoints (dir);
  for (guint i = keep; keep > 0 && i < names->len; i++)
    {
      g_autofree char *path = g_build_filename (dir, g_ptr_array_index (names, i), NULL);
      remove_tree (path);
    }
}

/* Puts `tmp` in the place of `final`, an existing directory, so that a crash at any moment
 * leaves the one or the other complete there; *older receives where the older copy is
 * now (tmp or old), for the caller to remove once the new one is durable. */
static gboolean
replace_dir (const char *tmp, const char *final, const char *old, const char **older,
             GError **error)
{
#ifdef RENAME_EXCHANGE
  /* one atomic step where the file system can */
  if (renameat2 (AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) == 0)
    {
      *older = tmp;
      return TRUE;
    }
  if (errno != EINVAL && errno != ENOSYS)
    return ks_io_error (error, "cannot put the new checkpoint in place of", final);
#endif
  if (g_rename (final, old) != 0)
    return ks_io_error (error, "cannot move aside", final);
  if (g_rename (tmp, final) != 0)
    {
      ks_io_error (error, "cannot rename the new checkpoint to", final);
      g_rename (old, final); /* the older copy comes back */
      return FALSE;
    }
  *older = old;
  return TRUE;
}

/* One commit for every directory written whole (a checkpoint, a pipeline's parts, a
 * parameter-server job's shards, an inference model): a checkpoint written again for a
 * step replaces the older copy whole, never file by file; the older copy and the older
 * checkpoints are removed only once the new one is durable. */
gboolean
ks_checkpoint_commit (const char *tmp, const char *final, guint keep, GError **error)
{
  g_autofree char *parent = g_path_get_dirname (final);
  g_autofree char *old = g_strconcat (tmp, ".old", NULL);
  const char *older = NULL;
  gboolean ok;

  if (!ks_checkpoint_fsync (tmp, error))
    {
      ks_checkpoint_abort (tmp);
      return FALSE;
    }
  if (g_file_test (final, G_FILE_TEST_IS_DIR) && !g_file_test (final, G_FILE_TEST_IS_SYMLINK))
    ok = replace_dir (tmp, final, old, &older, error);
  else if (!(ok = g_rename (tmp, final) == 0))
    ks_io_error (error, "cannot rename the new checkpoint to", final);
  if (!ok)
    {
      ks_checkpoint_abort (tmp);
      return FALSE;
    }
  if (!ks_checkpoint_fsync (parent, error))
    return FALSE; /* the older copy stays hidden; a later save removes it */
  if (older != NULL)
    ks_checkpoint_remove_all (older);
  keep_newest (parent, keep);
  return TRUE;
}

/* The newest: a newest directory that cannot be read is the caller's error to report
 * (resuming from an older state silently would lose the user's work). */
char *
ks_checkpoint_latest (const char *dir)
{
  g_autoptr (GPtrArray) names = list_checkpoints (dir);
  return names->len > 0 ? g_build_filename (dir, g_ptr_array_index (names, 0), NULL) : NULL;
}

