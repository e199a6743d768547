/* A run owns its [train] checkpoint_dir: a fresh run does not replace another run's
 * checkpoints (it is refused, or moves them aside when told to start over), and one
 * process of each job holds a lock on the directory while the job trains, so that a
 * second job started with the same directory is refused instead of overwriting the
 * first one's checkpoint-N. */
#include "trainer-private.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOCK_NAME ".ksdist-lock"

static gboolean
io_error (GError **error, const char *what, const char *path)
{
  int saved = errno;
  g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO, "%s %s: %s", what, path,
               g_strerror (saved));
  return FALSE;
}

/* "checkpoint-2000 (step 2000, model.type = gpt)": the newest checkpoint of `dir` and
 * what its metadata says of the model, or NULL when `dir` holds no checkpoint-N. */
char *
ks_trainer_describe_checkpoints (const char *dir)
{
  g_autofree char *latest = ks_checkpoint_latest (dir);
  if (latest == NULL)
    return NULL;
  g_autofree char *base = g_path_get_basename (latest);
  /* a parameter-server job's checkpoint has no such metadata: its name says the step */
  g_autoptr (GHashTable) meta = ks_checkpoint_metadata (latest, NULL);
  const char *type = meta != NULL ? g_hash_table_lookup (meta, "model.type") : NULL;
  g_autofree char *from_config = NULL;
  const char *config = meta != NULL ? g_hash_table_lookup (meta, "config") : NULL;
  const char *line = config != NULL ? strstr (config, "model.type = ") : NULL;

  if (type == NULL && line != NULL)
    type = from_config = g_strndup (line + 13, strcspn (line + 13, "\n"));
  if (type != NULL && *type != '\0')
    return g_strdup_printf ("%s (a model of [model] type = %.64s)", base, type);
  return g_steal_pointer (&base);
}

/* Moves every checkpoint-N of `dir` into a new dir/previous-<UTC time>/ (nothing is
 * deleted); says where. */
static gboolean
move_aside (const char *dir, GError **error)
{
  g_autoptr (GDateTime) now = g_date_time_new_now_utc ();
  g_autofree char *stamp = g_date_time_format (now, "previous-%Y%m%dT%H%M%SZ");
  g_autofree char *aside = g_build_filename (dir, stamp, NULL);
  g_autoptr (GDir) d = NULL;
  const char *name;
  guint moved = 0;

  /* two starts over in one second: a second folder, never a merge */
  for (int i = 2; g_file_test (aside, G_FILE_TEST_EXISTS); i++)
    {
      g_free (aside);
      aside = g_strdup_printf ("%s/%s-%d", dir, stamp, i);
    }
  if (g_mkdir (aside, 0755) != 0)
    return io_error (error, "[train] start_over: cannot create", aside);
  d = g_dir_open (dir, 0, error);
  if (d == NULL)
    return FALSE;
  while ((name = g_dir_read_name (d)) != NULL)
    {
      gint64 step;
      if (!g_str_has_prefix (name, "checkpoint-")
          || !g_ascii_string_to_signed (name + 11, 10, 0, G_MAXINT64, &step, NULL))
        continue;
      g_autofree char *from = g_build_filename (dir, name, NULL);
      g_autofree char *to = g_build_filename (aside, name, NULL);
      if (g_rename (from, to) != 0)
        return io_error (error, "[train] start_over: cannot move aside", from);
      moved++;
    }
  g_message ("[train] start_over: moved the %u checkpoint%s that %s held to %s; this run "
             "starts from step 1", moved, moved == 1 ? "" : "s", dir, aside);
  return TRUE;
}

/* Takes dir/.ksdist-lock for this process (flock: the kernel releases it when the
 * process ends, however it ends, so a dead holder's lock is simply taken over). */
gboolean
ks_trainer_own_checkpoints (KsTrainer *t, const char *dir, GError **error)
{
  g_autofree char *path = g_build_filename (dir, LOCK_NAME, NULL);
  char held[256] = "";
  g_autoptr (GDateTime) now = g_date_time_new_now_local ();
  g_autofree char *started = g_date_time_format (now, "%Y-%m-%d %H:%M:%S %Z");
  struct stat st;
  int fd;

  gboolean existed = g_file_test (dir, G_FILE_TEST_IS_DIR);
  if (!existed) /* a signal in start-up leaves nothing behind */
    ks_trainer_startup_made_dir (dir, path);
  gboolean made = g_mkdir_with_parents (dir, 0755) == 0;
  int saved = errno;
  /* not through a link, and only a regular file (a FIFO there would block the read) */
  fd = made ? open (path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644) : -1;
  if (made)
    saved = errno;
  if (!existed)
    ks_trainer_startup_made_done ();
  errno = saved;
  if (!made)
    return io_error (error, "[train] checkpoint_dir: cannot create", dir);
  if (!existed)
    t->ckpt_made = g_strdup (dir);
  if (fd < 0)
    return io_error (error, "[train] checkpoint_dir: cannot open the lock file", path);
  if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      return g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                          "[train] checkpoint_dir = %s: %s is not a regular file; remove it "
                          "(ksdist keeps its lock there)", dir, path), FALSE;
    }
  gboolean busy = flock (fd, LOCK_EX | LOCK_NB) != 0;
  saved = errno;
  /* read after the flock: a holder writes it while holding it; its first line only */
  ssize_t got = pread (fd, held, sizeof held - 1, 0);
  held[MAX (got, 0)] = '\0';
  held[strcspn (held, "\n")] = '\0';
  if (busy)
    {
      close (fd);
      if (saved != EWOULDBLOCK)
        {
          errno = saved;
          return io_error (error, "[train] checkpoint_dir: cannot lock", path);
        }
      return g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                          "[train] checkpoint_dir = %s is in use by the job of %s, which "
                          "holds %s: wait for it, or give this run another checkpoint_dir",
                          dir, *held != '\0' ? held : "another process",
                          path), FALSE;
    }
  /* a holder that ended normally emptied the file: what is left was killed */
  if (*held != '\0')
    g_message ("%s: taking over the lock of the job of %s, which ended without "
               "releasing it", path, held);
  g_autofree char *text = g_strdup_printf ("process %d on host %s (started %s)\n",
                                           (int) getpid (), g_get_host_name (), started);
  if (ftruncate (fd, 0) != 0 || pwrite (fd, text, strlen (text), 0) != (ssize_t) strlen (text))
    {
      close (fd);
      return io_error (error, "[train] checkpoint_dir: cannot write the lock file", path);
    }
  t->ckpt_lock = fd;
  if (!ks_config_get_bool (t->config, "train", "resume")
      && ks_config_get_bool (t->config, "train", "start_over"))
    {
      g_autofree char *there = ks_trainer_describe_checkpoints (dir);
      if (there != NULL && !move_aside (dir, error))
        return FALSE;
    }
  return TRUE;
}

void
ks_trainer_release_checkpoints (KsTrainer *t)
{
  if (t->ckpt_lock < 0)
    {
      g_clear_pointer (&t->ckpt_made, g_free);
      return;
    }
  /* empty: the next job knows this one ended as it should */
  if (ftruncate (t->ckpt_lock, 0) != 0)
    g_debug ("cannot empty the checkpoint lock: %s", g_strerror (errno));
  /* a run that made the directory and saved nothing in it (it failed before its first
   * save) leaves nothing behind: the lock file goes, then the directory if empty */
  if (t->ckpt_made != NULL)
    {
      g_autofree char *there = ks_trainer_describe_checkpoints (t->ckpt_made);
      g_autofree char *path = g_build_filename (t->ckpt_made, LOCK_NAME, NULL);
      if (there == NULL && g_unlink (path) == 0)
        g_rmdir (t->ckpt_made);
    }
  close (t->ckpt_lock); /* releases the flock */
  t->ckpt_lock = -1;
  g_clear_pointer (&t->ckpt_made, g_free);
}
