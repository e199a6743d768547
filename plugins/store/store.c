/* The file store: rendezvous through a directory every rank can see (one machine, or a
 * shared file system). A key is a file under <directory>/<prefix>/, written to a
 * temporary name and renamed, so a reader sees all of a value or none of it. */
#include <config.h>
#include <ksdist/ksdist.h>

#include "tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

typedef struct {
  char *dir; /* <address>/<prefix> once opened */
  int poll_max_ms;
  int lock_fd; /* DIR/.lock, held shared while the store is open */
} FileStore;

#define LOCK_NAME ".lock" /* no key's file name: escape() writes a leading '.' as %2E */
#define RUN_NAME ".run"   /* which run (of the job's token) the records are of */

static void *
file_create (const KsSettings *settings, GError **error)
{
  FileStore *s = g_new0 (FileStore, 1);
  s->poll_max_ms = (int) ks_settings_get_int (settings, "poll_max_ms");
  s->lock_fd = -1;
  return s;
}

static void
file_destroy (void *p)
{
  FileStore *s = p;
  if (s->lock_fd >= 0)
    close (s->lock_fd);
  g_free (s->dir);
  g_free (s);
}

/* Every process using the store holds a shared lock on DIR/.lock. The first process of a
 * job finds no lock held: any record there was left by an earlier job of the same name
 * (ended or killed), which would send this job's ranks to peers that are gone, so it
 * removes them (and says so) before taking its shared lock; a process coming meanwhile
 * waits for that. With a token (ksdist launch gives each run its own), DIR/.run holds a
 * digest of it, and records of the same token are this run's: a rank that failed and
 * ended before another opened the store left them (its failure among them), and they
 * stay. */
static gboolean
claim (FileStore *s, const char *job, const char *token, GError **error)
{
  g_autofree char *lock = g_build_filename (s->dir, LOCK_NAME, NULL);
  int fd = open (lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

  if (fd < 0)
    {
      int e = errno;
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED, "file store: cannot open %s: %s",
                   lock, g_strerror (e));
      return FALSE;
    }
  int got = flock (fd, LOCK_EX | LOCK_NB), why = errno;
  if (got != 0 && why != EWOULDBLOCK)
    {
      /* a file system without flock: no cleaning, and no lock to hold */
      g_warning ("file store %s: cannot lock %s (%s): records of an earlier job with this "
                 "name are not detected; give each job its own [job] name", s->dir, lock,
                 g_strerror (why));
      s->lock_fd = fd;
      return TRUE;
    }
  g_autofree char *run_path = g_build_filename (s->dir, RUN_NAME, NULL), *theirs = NULL;
  g_autofree char *mine = token != NULL && *token != '\0'
                              ? g_compute_checksum_for_string (G_CHECKSUM_SHA256, token, -1)
                              : NULL;
  if (got == 0 && (mine == NULL || !g_file_get_contents (run_path, &theirs, NULL, NULL)
                   || strcmp (mine, theirs) != 0))
    {
      g_autoptr (GDir) d = g_dir_open (s->dir, 0, NULL);
      const char *name;
      int removed = 0;
      while (d != NULL && (name = g_dir_read_name (d)) != NULL)
        if (strcmp (name, LOCK_NAME) != 0)
          {
            g_autofree char *path = g_build_filename (s->dir, name, NULL);
            removed += g_unlink (path) == 0 && strcmp (name, RUN_NAME) != 0;
          }
      if (removed > 0)
        g_warning ("file store %s: removed %d records of an earlier job named '%s' (no "
                   "process of it holds the store any more); this job starts clean%s",
                   s->dir, removed, job, mine != NULL ? "" : " (without KS_STORE_TOKEN a "
                   "rank of this job that failed and ended before this one started looks "
                   "the same: give each run its own [job] name, or a token)");
      if (mine != NULL)
        g_file_set_contents (run_path, mine, -1, NULL);
    }
  if (flock (fd, LOCK_SH) != 0) /* waits while another process clears the directory */
    {
      int e = errno;
      close (fd);
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED, "file store: cannot lock %s: %s",
                   lock, g_strerror (e));
      return FALSE;
    }
  s->lock_fd = fd;
  return TRUE;
}

/* Keys may hold any byte; file names get [A-Za-z0-9_.-] and %XX for the rest. */
static char *
escape (const char *key)
{
  GString *out = g_string_new (NULL);
  for (const unsigned char *c = (const unsigned char *) key; *c; c++)
    if (g_ascii_isalnum (*c) || *c == '_' || *c == '-' || (*c == '.' && c != (const unsigned char *) key))
      g_string_append_c (out, *c);
    else
      g_string_append_printf (out, "%%%02X", *c);
  return g_string_free (out, FALSE);
}

static char *
key_path (FileStore *s, const char *key)
{
  g_autofree char *name = escape (key);
  return g_build_filename (s->dir, name, NULL);
}

static gboolean
not_open (FileStore *s, GError **error)
{
  if (s->dir != NULL)
    return FALSE;
  g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID, "file store: call open first");
  return TRUE;
}

static gboolean
file_open (void *p, const char *address, const char *prefix, const char *token, GError **error)
{
  FileStore *s = p;
  g_autofree char *job = escape (prefix != NULL && *prefix ? prefix : "default");

  if (address == NULL || *address == '\0')
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "file store: no directory given: set the store address to a directory "
                   "every rank can reach");
      return FALSE;
    }
  g_free (s->dir);
  s->dir = g_build_filename (address, job, NULL);
  if (g_mkdir_with_parents (s->dir, 0700) != 0)
    {
      int e = errno;
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
                   "file store: cannot create the directory %s: %s", s->dir, g_strerror (e));
      g_clear_pointer (&s->dir, g_free);
      return FALSE;
    }
  if (s->lock_fd >= 0)
    close (s->lock_fd);
  s->lock_fd = -1;
  if (!claim (s, prefix != NULL && *prefix ? prefix : "default", token, error))
    {
      g_clear_pointer (&s->dir, g_free);
      return FALSE;
    }
  return TRUE;
}

static gboolean
file_set (void *p, const char *key, const void *data, gsize len, GError **error)
{
  FileStore *s = p;
  if (not_open (s, error))
    return FALSE;
  g_autofree char *path = key_path (s, key);
  return g_file_set_contents (path, data, len, error);
}

/* Sleeps between polls: 1 ms at first, doubling up to poll_max_ms. */
static void
poll_sleep (FileStore *s, int *wait_ms)
{
  g_usleep (*wait_ms * 1000);
  *wait_ms = MIN (*wait_ms * 2, s->poll_max_ms);
}

static gboolean
file_get (void *p, const char *key, int timeout_ms, void **data, gsize *len, GError **error)
{
  FileStore *s = p;
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  int wait_ms = 1;

  if (not_open (s, error))
    return FALSE;
  g_autofree char *path = key_path (s, key);
  for (;;)
    {
      g_autoptr (GError) local = NULL;
      char *contents;
      if (g_file_get_contents (path, &contents, len, &local))
        {
          *data = contents;
          return TRUE;
        }
      if (!g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        {
          g_propagate_prefixed_error (error, g_steal_pointer (&local), "file store: ");
          return FALSE;
        }
      if (g_get_monotonic_time () >= deadline)
        {
          g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
                       "file store %s: key '%s' did not appear within %d ms", s->dir, key,
                       timeout_ms);
          return FALSE;
        }
      poll_sleep (s, &wait_ms);
    }
}

static gboolean
file_wait (void *p, const char *const *keys, int timeout_ms, GError **error)
{
  FileStore *s = p;
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  int wait_ms = 1;

  if (not_open (s, error))
    return FALSE;
  for (;;)
    {
      g_autoptr (GString) missing = g_string_new (NULL);
      for (guint i = 0; keys[i] != NULL; i++)
        {
          g_autofree char *path = key_path (s, keys[i]);
          if (!g_file_test (path, G_FILE_TEST_EXISTS))
            g_string_append_printf (missing, "%s'%s'", missing->len ? ", " : "", keys[i]);
        }
      if (missing->len == 0)
        return TRUE;
      if (g_get_monotonic_time () >= deadline)
        {
          g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT,
                       "file store %s: keys %s did not appear within %d ms", s->dir,
                       missing->str, timeout_ms);
          return FALSE;
        }
      poll_sleep (s, &wait_ms);
    }
}

/* A counter: the value is decimal text; an flock on <key>.lock orders the updates. */
static gboolean
file_add (void *p, const char *key, gint64 delta, gint64 *result, GError **error)
{
  FileStore *s = p;
  g_autofree char *contents = NULL;
  gint64 value = 0;
  gboolean ok;
  int fd;

  if (not_open (s, error))
    return FALSE;
  g_autofree char *path = key_path (s, key);
  g_autofree char *lock = g_strconcat (path, ".lock", NULL);
  if ((fd = g_open (lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0 || flock (fd, LOCK_EX) != 0)
    {
      int e = errno;
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED, "file store: cannot lock %s: %s",
                   lock, g_strerror (e));
      if (fd >= 0)
        close (fd);
      return FALSE;
    }
  if (g_file_get_contents (path, &contents, NULL, NULL)
      && !g_ascii_string_to_signed (contents, 10, G_MININT64, G_MAXINT64, &value, NULL))
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "file store: %s holds '%.20s', not a counter", path, contents);
      close (fd);
      return FALSE;
    }
  value += delta;
  g_autofree char *text = g_strdup_printf ("%" G_GINT64_FORMAT, value);
  ok = g_file_set_contents (path, text, -1, error);
  close (fd); /* releases the lock */
  if (ok && result != NULL)
    *result = value;
  return ok;
}

static gboolean
file_remove (void *p, const char *key, GError **error)
{
  FileStore *s = p;
  if (not_open (s, error))
    return FALSE;
  g_autofree char *path = key_path (s, key);
  if (g_unlink (path) != 0 && errno != ENOENT)
    {
      int e = errno;
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED, "file store: cannot remove %s: %s",
                   path, g_strerror (e));
      return FALSE;
    }
  return TRUE;
}

static const KsStoreOps file_store_ops = {
  .size = sizeof (KsStoreOps),
  .create = file_create,
  .destroy = file_destroy,
  .open = file_open,
  .set = file_set,
  .get = file_get,
  .wait = file_wait,
  .add = file_add,
  .remove = file_remove,
};

static const KsImplDesc store_impls[] = {
  { KS_KIND_STORE, "file", &file_store_ops, NULL,
    "Rendezvous through a directory (one machine or a shared file system)" },
  { KS_KIND_STORE, "tcp", &ks_tcp_store_ops, NULL,
    "Rendezvous at a server one process hosts (jobs across machines); clients need the "
    "job's token" },
  { KS_KIND_STORE, "c10d", &ks_c10d_store_ops, NULL,
    "Rendezvous at PyTorch's TCPStore (torchrun's agent store; torch 1.13's protocol)" },
};

static const KsKeyDesc store_settings[] = {
  { NULL, "poll_max_ms", KS_VALUE_INT, "20", 1, 10000, NULL,
    "Longest sleep between looks for a key that is not there yet (file store)" },
  { NULL, "connect_timeout_ms", KS_VALUE_INT, "300000", 1, G_MAXINT, NULL,
    "How long a TCP store client keeps trying to reach a server that is not up yet" },
};

static const KsPluginDesc store_plugin = {
  .abi_major = KS_ABI_MAJOR,
  .abi_minor = KS_ABI_MINOR,
  .name = "store",
  .version = PACKAGE_VERSION,
  .description = "Rendezvous stores: file, TCP and PyTorch's c10d TCPStore (client)",
  .impls = store_impls,
  .n_impls = G_N_ELEMENTS (store_impls),
  .settings = store_settings,
  .n_settings = G_N_ELEMENTS (store_settings),
};

KS_PLUGIN_DEFINE (store_plugin)
