#include "testutil.h"

#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

char *
ks_test_tmpdir (void)
{
  g_autoptr (GError) error = NULL;
  char *dir = g_dir_make_tmp ("ksdist-test-XXXXXX", &error);
  g_assert_no_error (error);
  return dir;
}

double
ks_test_max_difference (const float *a, const float *b, gsize n)
{
  double worst = 0;
  for (gsize i = 0; i < n; i++)
    worst = MAX (worst, fabs ((double) a[i] - b[i]));
  return worst;
}

void
ks_test_rmtree (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  if (d == NULL)
    return;
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      if (g_file_test (path, G_FILE_TEST_IS_DIR) && !g_file_test (path, G_FILE_TEST_IS_SYMLINK))
        ks_test_rmtree (path);
      else
        g_unlink (path);
    }
  g_chmod (dir, 0700);
  g_rmdir (dir);
}

char *
ks_test_copy_plugin (const char *variant, const char *dir, const char *file_name, int mode)
{
  const char *built = g_getenv ("KS_TEST_PLUGINS");
  g_autofree char *source = NULL;
  g_autofree char *contents = NULL;
  gsize length;
  char *path = g_build_filename (dir, file_name, NULL);
  g_autoptr (GError) error = NULL;

  g_assert_nonnull (built);
  source = g_strdup_printf ("%s/%s.so", built, variant);
  g_file_get_contents (source, &contents, &length, &error);
  g_assert_no_error (error);
  g_file_set_contents (path, contents, length, &error);
  g_assert_no_error (error);
  g_assert_cmpint (g_chmod (path, mode), ==, 0);
  return path;
}

char *
ks_test_write (const char *dir, const char *name, const char *text)
{
  g_autoptr (GError) error = NULL;
  char *path = g_build_filename (dir, name, NULL);
  g_file_set_contents (path, text, -1, &error);
  g_assert_no_error (error);
  return path;
}

char *
ks_test_write_not_elf (const char *dir, const char *name)
{
  return ks_test_write (dir, name, "This is a text file that only pretends to be a plugin; it "
                                   "is long enough to hold an ELF header.\n");
}

KsConfig *
ks_test_config (const char *text, const char *dir, GError **error)
{
  KsConfig *config = ks_config_new ();
  if (text != NULL)
    {
      g_autofree char *path = ks_test_write (dir, "test.ini", text);
      if (!ks_config_load_file (config, path, error))
        {
          ks_config_free (config);
          return NULL;
        }
    }
  return config;
}

KsRegistry *
ks_test_scan (KsConfig *config, const char *plugin_path)
{
  KsRegistry *registry = ks_registry_new ();
  g_autoptr (GError) error = NULL;

  g_setenv ("KS_PLUGIN_PATH", plugin_path, TRUE);
  ks_registry_scan (registry, config, &error);
  g_assert_no_error (error);
  return registry;
}

const KsPluginRecord *
ks_test_record (KsRegistry *registry, const char *file_name)
{
  const GPtrArray *records = ks_registry_records (registry);
  for (guint i = 0; i < records->len; i++)
    {
      const KsPluginRecord *r = g_ptr_array_index (records, i);
      g_autofree char *base = g_path_get_basename (r->path);
      if (strcmp (base, file_name) == 0)
        return r;
    }
  return NULL;
}

void
ks_test_clear_env (void)
{
  g_unsetenv ("KS_PLUGIN_PATH");
  g_unsetenv ("KS_PLUGINS");
  g_setenv ("KS_PLUGIN_SYSTEM_PATH", "", TRUE);
}

void
ks_test_fixture_teardown (PluginFixture *f, gconstpointer data)
{
  ks_registry_free (f->registry);
  ks_config_free (f->config);
  ks_test_rmtree (f->dir);
  g_free (f->dir);
}

char *
ks_test_build_plugin_dir (const char *name)
{
  return g_build_filename (g_getenv ("KS_BUILD_PLUGINS"), name, ".libs", NULL);
}

void
ks_test_cpu_setup (CpuFixture *f, const char *const *sets)
{
  g_autofree char *openblas = ks_test_build_plugin_dir ("openblas");
  g_autofree char *optim = ks_test_build_plugin_dir ("optim");
  g_autofree char *path = g_strdup_printf ("%s:%s", openblas, optim);
  g_autoptr (GError) error = NULL;

  ks_test_clear_env ();
  f->config = ks_config_new ();
  for (int i = 0; sets != NULL && sets[i] != NULL; i++)
    g_assert_true (ks_config_set_override (f->config, sets[i], NULL));
  f->registry = ks_test_scan (f->config, path);
  g_assert_true (ks_config_validate (f->config, &error));
  f->c = ks_compute_new (f->registry, f->config, "openblas", &error);
  g_assert_no_error (error);
}

void
ks_test_cpu_teardown (CpuFixture *f)
{
  ks_compute_free (f->c);
  ks_registry_free (f->registry);
  ks_config_free (f->config);
}

/* Whether the build made plugin `name`; else the test skips saying `why`. */
static gboolean
have_plugin (const char *name, const char *why)
{
  g_autofree char *dir = ks_test_build_plugin_dir (name);
  g_autofree char *file = g_strconcat (name, ".so", NULL);
  g_autofree char *plugin = g_build_filename (dir, file, NULL);
  if (g_file_test (plugin, G_FILE_TEST_EXISTS))
    return TRUE;
  g_test_skip (why);
  return FALSE;
}

gboolean
ks_test_have_openblas (void)
{
  return have_plugin ("openblas", "the OpenBLAS plugin was not built (configure found no OpenBLAS)");
}

gboolean
ks_test_have_gloo (void)
{
  return have_plugin ("gloo", "the gloo plugin was not built (apt-get install libgloo-dev, "
                              "reconfigure)");
}

float *
ks_test_random_floats (GRand *rng, gsize n, double lo, double hi)
{
  float *x = g_new (float, n);
  for (gsize i = 0; i < n; i++)
    x[i] = (float) g_rand_double_range (rng, lo, hi);
  return x;
}

/* The environment for running ksdist on the build tree's `plugins`. */
static char **
ksdist_environ (const char *const *env, const char *const *plugins)
{
  g_auto (GStrv) envp = g_get_environ ();
  g_autoptr (GString) path = g_string_new (NULL);

  for (int i = 0; plugins[i] != NULL; i++)
    {
      g_autofree char *dir = ks_test_build_plugin_dir (plugins[i]);
      g_string_append_printf (path, "%s%s", i > 0 ? ":" : "", dir);
    }
  envp = g_environ_setenv (envp, "KS_PLUGIN_PATH", path->str, TRUE);
  envp = g_environ_setenv (envp, "KS_PLUGIN_SYSTEM_PATH", "", TRUE);
  for (int i = 0; env != NULL && env[i] != NULL; i++)
    {
      g_auto (GStrv) kv = g_strsplit (env[i], "=", 2);
      envp = kv[1] != NULL ? g_environ_setenv (envp, kv[0], kv[1], TRUE)
                           : g_environ_unsetenv (envp, kv[0]); /* "NAME" alone: unset */
    }
  return g_steal_pointer (&envp);
}

static char **
ksdist_argv (const char *const *args)
{
  GPtrArray *argv = g_ptr_array_new ();
  g_ptr_array_add (argv, g_strdup (g_getenv ("KSDIST")));
  for (int i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, g_strdup (args[i]));
  g_ptr_array_add (argv, NULL);
  return (char **) g_ptr_array_free (argv, FALSE);
}

int
ks_test_run_ksdist (const char *const *args, const char *const *env,
                    const char *const *plugins, char **out, char **err)
{
  g_auto (GStrv) argv = ksdist_argv (args);
  return ks_test_run_program ((const char *const *) argv, env, plugins, out, err);
}

int
ks_test_run_program (const char *const *argv, const char *const *env,
                     const char *const *plugins, char **out, char **err)
{
  g_auto (GStrv) envp = ksdist_environ (env, plugins);
  g_autoptr (GError) error = NULL;
  int wait_status;

  g_spawn_sync (NULL, (char **) argv, envp, G_SPAWN_SEARCH_PATH, NULL, NULL, out, err,
                &wait_status, &error);
  g_assert_no_error (error);
  g_assert_true (WIFEXITED (wait_status)); /* never a crash */
  return WEXITSTATUS (wait_status);
}

GPid
ks_test_spawn_ksdist (const char *const *args, const char *const *env,
                      const char *const *plugins, int *out_fd, int *err_fd)
{
  g_auto (GStrv) argv = ksdist_argv (args);
  g_auto (GStrv) envp = ksdist_environ (env, plugins);
  g_autoptr (GError) error = NULL;
  GPid pid;

  g_spawn_async_with_pipes (NULL, argv, envp, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, NULL,
                            out_fd, err_fd, &error);
  g_assert_no_error (error);
  return pid;
}

void
ks_test_start_ranks (KsTestJob *job, const char *const *argv, int rank_arg, int started)
{
  g_autofree const char **args = g_new0 (const char *, g_strv_length ((char **) argv) + 1);

  g_assert_cmpint (started, <=, (int) G_N_ELEMENTS (job->pid));
  memcpy (args, argv, g_strv_length ((char **) argv) * sizeof *args);
  job->started = started;
  for (int r = 0; r < started; r++)
    {
      g_autofree char *rank = g_strdup_printf ("%d", r);
      g_autoptr (GError) error = NULL;
      args[rank_arg] = rank;
      g_spawn_async_with_pipes (NULL, (char **) args, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                NULL, &job->pid[r], NULL, NULL, &job->err_fd[r], &error);
      g_assert_no_error (error);
    }
}

char *
ks_test_wait_ranks (KsTestJob *job, int *status)
{
  GString *err = g_string_new (NULL);
  for (int r = 0; r < job->started; r++)
    {
      char buf[4096];
      gssize got;
      while ((got = read (job->err_fd[r], buf, sizeof buf)) > 0)
        g_string_append_len (err, buf, got);
      close (job->err_fd[r]);
      waitpid (job->pid[r], &status[r], 0);
      g_spawn_close_pid (job->pid[r]);
    }
  return g_string_free (err, FALSE);
}

/* A safetensors file read whole (the caller frees *contents); its header's length. */
static guint64
read_safetensors (const char *file, char **contents, gsize *len)
{
  guint64 header;

  g_assert_true (g_file_get_contents (file, contents, len, NULL));
  g_assert_cmpuint (*len, >=, 8);
  memcpy (&header, *contents, 8);
  header = GUINT64_FROM_LE (header);
  g_assert_cmpuint (8 + header, <=, *len);
  return header;
}

float *
ks_test_safetensors_floats (const char *file, gsize *n)
{
  g_autofree char *contents = NULL;
  gsize len;
  guint64 header = read_safetensors (file, &contents, &len);

  *n = (len - 8 - header) / sizeof (float);
  return g_memdup2 (contents + 8 + header, *n * sizeof (float));
}

GBytes *
ks_test_checkpoint_bytes (const char *file)
{
  static const char *const keys[] = { "\"save_id\":\"", "\"sha256\":\"", "\"model_sha256\":\"" };
  char *contents = NULL;
  gsize len;
  guint64 header = read_safetensors (file, &contents, &len);

  for (gsize i = 0; i < G_N_ELEMENTS (keys); i++)
    {
      char *at = g_strstr_len (contents + 8, header, keys[i]);
      if (at == NULL)
        continue;
      at += strlen (keys[i]);
      g_assert_cmpuint (at + 64 - contents, <=, 8 + header);
      memset (at, '0', 64);
    }
  return g_bytes_new_take (contents, len);
}

double
ks_test_rank_value (int r, gsize i)
{
  return (double) ((r + 1) * 3 + (gint64) (i % 7)) * (i % 2 ? 1 : -1);
}

double
ks_test_reduced (KsReduceOp op, int n, gsize i)
{
  double acc = ks_test_rank_value (0, i);
  for (int r = 1; r < n; r++)
    {
      double v = ks_test_rank_value (r, i);
      acc = op == KS_REDUCE_MIN ? MIN (acc, v)
            : op == KS_REDUCE_MAX ? MAX (acc, v)
            : op == KS_REDUCE_PROD ? acc * v
                                   : acc + v;
    }
  return op == KS_REDUCE_AVG ? acc / n : acc;
}

void
ks_test_fill_rank (void *buf, KsDType t, int r, gsize count)
{
  for (gsize i = 0; i < count; i++)
    switch (t)
      {
      case KS_DTYPE_FLOAT32: ((float *) buf)[i] = ks_test_rank_value (r, i); break;
      case KS_DTYPE_FLOAT64: ((double *) buf)[i] = ks_test_rank_value (r, i); break;
      case KS_DTYPE_INT32: ((gint32 *) buf)[i] = ks_test_rank_value (r, i); break;
      default: ((gint64 *) buf)[i] = ks_test_rank_value (r, i); break;
      }
}

double
ks_test_element (const void *buf, KsDType t, gsize i)
{
  switch (t)
    {
    case KS_DTYPE_FLOAT32: return ((const float *) buf)[i];
    case KS_DTYPE_FLOAT64: return ((const double *) buf)[i];
    case KS_DTYPE_INT32: return ((const gint32 *) buf)[i];
    default: return ((const gint64 *) buf)[i];
    }
}

void
ks_test_check_allreduce (KsComm *comm, int rank, int n, KsDType t, KsReduceOp op, gsize count,
                         double tolerance)
{
  g_autofree void *buf = g_malloc (count * 8);
  ks_test_fill_rank (buf, t, rank, count);
  KS_RANK_OK ("rank", rank, ks_comm_allreduce (comm, buf, count, t, op, ERR));
  for (gsize i = 0; i < count; i++)
    KS_RANK_CHECK ("rank", rank,
                   fabs (ks_test_element (buf, t, i) - ks_test_reduced (op, n, i))
                       <= tolerance * fabs (ks_test_reduced (op, n, i)),
                   "allreduce %s %s of %" G_GSIZE_FORMAT ": [%" G_GSIZE_FORMAT "] = %g, want %g",
                   ks_reduce_op_name (op), ks_dtype_name (t), count, i,
                   ks_test_element (buf, t, i), ks_test_reduced (op, n, i));
}

void
ks_test_check_rounds (KsComm *comm, int rank, int n)
{
  for (gint64 round = 0; round < 300; round++)
    {
      gint64 v = round * 100 + rank, values[64];
      KS_RANK_OK ("rank", rank, ks_comm_allgather (comm, &v, values, 1, KS_DTYPE_INT64, ERR));
      for (int r = 0; r < n; r++)
        KS_RANK_CHECK ("rank", rank, values[r] == round * 100 + r, "allgather round %"
                       G_GINT64_FORMAT ": [%d] = %" G_GINT64_FORMAT, round, r, values[r]);
      KS_RANK_OK ("rank", rank,
                  ks_comm_allreduce (comm, &v, 1, KS_DTYPE_INT64, KS_REDUCE_SUM, ERR));
      KS_RANK_CHECK ("rank", rank, v == round * 100 * n + n * (n - 1) / 2, "allreduce round %"
                     G_GINT64_FORMAT ": %" G_GINT64_FORMAT, round, v);
    }
}

float
ks_test_scalar (KsExpr *e)
{
  float v;
  g_assert_true (ks_tensor_to_host (ks_expr_value (e, NULL), &v, sizeof v, NULL));
  return v;
}

/* dropout keeps one mask: every evaluation starts from the same RNG counter */
gsize
ks_test_check_parameter_gradients (KsModel *model, KsExpr *loss, double h, double tol)
{
  KsArena *params = ks_model_parameters (model);
  float *p = ks_arena_data (params);
  g_autofree float *g = g_memdup2 (ks_arena_data (ks_model_gradients (model)),
                                   ks_arena_numel (params) * sizeof (float));
  guint64 rng = ks_model_rng_state (model);
  gsize checked = 0;

  for (gsize t = 0; t < ks_arena_count (params); t++)
    {
      const char *name;
      gsize offset;
      const KsTensor *view = ks_arena_tensor_at (params, t, &name, &offset);
      if (g_str_has_suffix (name, ".running_mean") || g_str_has_suffix (name, ".running_var"))
        continue; /* batch norm's statistics: no gradient */
      for (gsize i = offset; i < offset + view->numel; i++, checked++)
        {
          float saved = p[i];
          p[i] = saved + (float) h;
          ks_model_parameters_changed (model);
          ks_model_set_rng_state (model, rng);
          double up = ks_test_scalar (loss);
          p[i] = saved - (float) h;
          ks_model_parameters_changed (model);
          ks_model_set_rng_state (model, rng);
          double down = ks_test_scalar (loss);
          p[i] = saved;
          double want = (up - down) / (2 * h);
          if (fabs (g[i] - want) > tol * (1 + fabs (want)))
            g_error ("d loss / d %s[%" G_GSIZE_FORMAT "]: backward %.6g, finite differences "
                     "%.6g", name, i - offset, g[i], want);
        }
    }
  ks_model_parameters_changed (model);
  return checked;
}

char *
ks_test_datagen (const char *kind, const char *dir, const char *const *extra)
{
  char *set = g_build_filename (dir, kind, NULL);
  g_autoptr (GStrvBuilder) b = g_strv_builder_new ();
  g_auto (GStrv) args = NULL;
  g_autofree char *out = NULL, *err = NULL;
  const char *const no_plugins[] = { NULL };

  g_strv_builder_add_many (b, "datagen", kind, set, NULL);
  g_strv_builder_addv (b, (const char **) extra);
  args = g_strv_builder_end (b);
  if (ks_test_run_ksdist ((const char *const *) args, NULL, no_plugins, &out, &err) != 0)
    g_error ("ksdist datagen %s: %s", kind, err);
  return set;
}

/* (testutil.h) */
void
ks_test_edit_header (const char *file, const char *from, const char *to, gboolean reseal,
             gsize extra)
{
  g_autofree char *bytes = NULL;
  gsize len;
  guint64 hlen;

  g_assert_true (g_file_get_contents (file, &bytes, &len, NULL));
  memcpy (&hlen, bytes, 8);
  hlen = GUINT64_FROM_LE (hlen);
  g_autofree char *header = g_strndup (bytes + 8, hlen);
  char *at = strstr (header, from);
  g_assert_nonnull (at);
  GString *h = g_string_new_len (header, at - header);
  g_string_append (h, to);
  g_string_append (h, at + strlen (from));
  while (h->len % 8 != 0)
    g_string_append_c (h, ' ');
  gsize data_len = len - 8 - hlen + extra;
  g_autofree guint8 *data = g_malloc0 (data_len + 1);
  memcpy (data, bytes + 8 + hlen, len - 8 - hlen);
  guint64 new_len = GUINT64_TO_LE (h->len);
  char *slot = strstr (h->str, "\"sha256\":\"");
  gsize key_len = strlen ("\"sha256\":\"");
  if (slot == NULL && (slot = strstr (h->str, "\"sha256\": \"")) != NULL)
    key_len++; /* spaced as other writers space it */
  if (reseal && slot != NULL)
    {
      slot += key_len;
      memset (slot, '0', 64);
      g_autoptr (GChecksum) sha = g_checksum_new (G_CHECKSUM_SHA256);
      g_checksum_update (sha, (const guint8 *) &new_len, 8);
      g_checksum_update (sha, (const guint8 *) h->str, h->len);
      g_checksum_update (sha, data, data_len);
      memcpy (slot, g_checksum_get_string (sha), 64);
    }
  GString *out = g_string_new_len ((const char *) &new_len, 8);
  g_string_append_len (out, h->str, h->len);
  g_string_append_len (out, (const char *) data, data_len);
  g_assert_true (g_file_set_contents (file, out->str, out->len, NULL));
  g_string_free (h, TRUE);
  g_string_free (out, TRUE);
}


GPid
ks_test_find_child (GPid parent, const char *env_entry)
{
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *name;

  while ((name = g_dir_read_name (proc)) != NULL)
    {
      g_autofree char *stat_path = g_strdup_printf ("/proc/%s/stat", name);
      g_autofree char *env_path = g_strdup_printf ("/proc/%s/environ", name);
      g_autofree char *stat = NULL, *env = NULL;
      gsize len;
      const char *close_paren;
      int ppid;
      if (!g_file_get_contents (stat_path, &stat, NULL, NULL)
          || (close_paren = strrchr (stat, ')')) == NULL
          || sscanf (close_paren + 2, "%*c %d", &ppid) != 1 || ppid != parent
          || !g_file_get_contents (env_path, &env, &len, NULL))
        continue;
      for (gsize off = 0; off < len; off += strlen (env + off) + 1)
        if (strcmp (env + off, env_entry) == 0)
          return atoi (name);
    }
  return 0;
}

gboolean
ks_test_read_exact (int fd, void *buf, gsize len)
{
  for (gsize got = 0; got < len;)
    {
      ssize_t n = read (fd, (char *) buf + got, len - got);
      if (n <= 0)
        return FALSE;
      got += n;
    }
  return TRUE;
}

char *
ks_test_read_string (int fd, gsize max, gsize *len)
{
  guint64 n;
  if (!ks_test_read_exact (fd, &n, 8) || n > max)
    return NULL;
  char *s = g_malloc0 (n + 1);
  if (!ks_test_read_exact (fd, s, n))
    return g_free (s), NULL;
  *len = n;
  return s;
}

char *
ks_test_read_all (int fd)
{
  GString *s = g_string_new (NULL);
  char buf[4096];
  gssize got;
  while ((got = read (fd, buf, sizeof buf)) > 0)
    g_string_append_len (s, buf, got);
  close (fd);
  return g_string_free (s, FALSE);
}

char
ks_test_process_state (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", (int) pid);
  g_autofree char *stat = NULL;
  const char *paren;
  /* the name in parentheses may hold anything: the state follows the last ')' */
  if (!g_file_get_contents (path, &stat, NULL, NULL) || (paren = strrchr (stat, ')')) == NULL
      || paren[1] == '\0')
    return 0;
  return paren[2];
}
