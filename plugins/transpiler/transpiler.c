/* The transpiler algorithm (OpenKS's CPU/general one): parameter-server training.
 *
 * Servers hold the dense parameters cut into blocks (layout.c) with the optimizer's state
 * and run the update (table.c: the optim plugin's code over a model of the blocks).
 * Workers compute gradients and, by [strategy] mode (strategy.c):
 *   sync        push every step; the server averages all workers' pushes, applies once,
 *               and answers everyone with the new values
 *   half_async  push every step and wait for the answer; servers apply on arrival
 *   async       queue the gradients; a thread merges and pushes them, and the newest
 *               values it gets back are taken at the next step
 *   geo         train locally; every k_steps push (local - old) / workers and take the
 *               servers' values (worker.c)
 * Messages travel on ZeroMQ (client.c, server.c, wire.c). Checkpoints: every server writes
 * its shard (shard.c), worker 0 the job's step and metadata, into one directory renamed
 * into place when all are written; shards load with any server count. */
#include <config.h>
#include <ksdist/ksdist.h>

#include "client.h"
#include "server.h"
#include "shard.h"
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <unistd.h>

#define JOB_FILE "job.json"
#define PREFIX "checkpoint-"
/* A worker waits this much longer than [comm] timeout: a server that gives up on a
 * missing worker after the timeout answers the others first, naming it. */
#define ANSWER_SLACK_MS 2000

typedef struct {
  KsRoleMaker *role;
  gsize block_floats, max_message;
  double log_every_s;
  char *model_dir;
  /* from distributed_optimizer */
  PsStrategy strategy;
  int timeout_ms;
  const KsOptimizerOps *inner_ops;
  void *inner;
  /* from the backward: the model and its cut */
  KsModel *model;
  PsLayout *layout;
  /* a worker's, after init_worker; a server's table after init_server */
  PsClient *client;
  PsWorker *worker;
  PsDenseTable *table;
  gint64 loaded_step;  /* server: of the checkpoint loaded */
  gint64 resumed_step; /* worker: of load_check_point (-1: none) */
} Transpiler;

static void *
transpiler_create (const KsSettings *s, GError **error)
{
  Transpiler *t = g_new0 (Transpiler, 1);
  t->block_floats = ks_settings_get_int (s, "block_floats");
  t->max_message = (gsize) ks_settings_get_int (s, "max_message_mb") << 20;
  t->log_every_s = ks_settings_get_double (s, "log_every_s");
  t->model_dir = g_strdup (ks_settings_get_string (s, "model_dir"));
  t->resumed_step = -1;
  return t;
}

static void
transpiler_destroy (void *p)
{
  Transpiler *t = p;
  /* the sending thread ends first, then the sockets (dropping what is unsent), then the
   * buffers they sent from */
  ps_worker_halt (t->worker);
  ps_client_free (t->client);
  ps_worker_free (t->worker);
  ps_dense_table_free (t->table);
  ps_layout_free (t->layout);
  g_free (t->model_dir);
  g_free (t);
}

static gboolean
failed (GError **error, const char *format, ...) G_GNUC_PRINTF (2, 3);

static gboolean
failed (GError **error, const char *format, ...)
{
  va_list ap;
  va_start (ap, format);
  g_autofree char *m = g_strdup_vprintf (format, ap);
  va_end (ap);
  g_set_error_literal (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED, m);
  return FALSE;
}

static gboolean
transpiler_init (void *p, KsRoleMaker *role, GError **error)
{
  Transpiler *t = p;
  if (role == NULL || ks_role_maker_server_num (role) < 1)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[job] mode = transpiler trains with parameter servers, but this job has "
                   "none: start it with `ksdist launch --servers S --workers W CONFIG` (or set "
                   "TRAINING_ROLE, PADDLE_PSERVERS_IP_PORT_LIST, ... as fleetrun does)");
      return FALSE;
    }
  t->role = role;
  return TRUE;
}

static gboolean
need_model (Transpiler *t, const char *what, GError **error)
{
  return t->layout != NULL
         || failed (error, "transpiler: %s needs the model: wrap the optimizer with "
                    "distributed_optimizer and call minimize first", what);
}

/* ---- the worker ---- */

static gboolean
transpiler_init_worker (void *p, GError **error)
{
  Transpiler *t = p;
  gint64 server_step = 0;

  if (!need_model (t, "init_worker", error))
    return FALSE;
  if (!ks_role_maker_is_worker (t->role))
    return failed (error, "transpiler: init_worker on a server (servers call init_server)");
  if ((t->client = ps_client_new (ks_role_maker_pserver_endpoints (t->role),
                                  g_getenv ("KS_STORE_TOKEN"),
                                  ks_role_maker_worker_index (t->role),
                                  t->timeout_ms + ANSWER_SLACK_MS,
                                  t->max_message, error))
          == NULL
      || (t->worker = ps_worker_new (t->client, t->layout, &t->strategy,
                                     ks_role_maker_worker_index (t->role),
                                     ks_role_maker_worker_num (t->role), t->model, &server_step,
                                     error))
             == NULL)
    return FALSE;
  /* workers that resume need the servers at the same checkpoint (servers that start from
   * [transpiler] model_dir under fresh workers are incremental training) */
  if (t->resumed_step >= 0 && server_step != t->resumed_step)
    return failed (error, "init_worker: the servers loaded the checkpoint of step %"
                   G_GINT64_FORMAT " but the workers resume from step %" G_GINT64_FORMAT ": "
                   "start servers and workers with the same [train] checkpoint_dir and resume",
                   server_step, t->resumed_step);
  return TRUE;
}

static gboolean
transpiler_stop_worker (void *p, GError **error)
{
  Transpiler *t = p;
  if (t->worker == NULL)
    return failed (error, "transpiler: stop_worker before init_worker");
  return ps_worker_stop (t->worker, error);
}

/* ---- the server ---- */

/* The newest checkpoint-N under `dir` (a new string), or NULL. */
static char *
latest_checkpoint (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  gint64 best = -1;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      gint64 step;
      g_autofree char *job = g_build_filename (dir, name, JOB_FILE, NULL);
      if (g_str_has_prefix (name, PREFIX)
          && g_ascii_string_to_signed (name + strlen (PREFIX), 10, 0, G_MAXINT64, &step, NULL)
          && step > best && g_file_test (job, G_FILE_TEST_IS_REGULAR))
        best = step;
    }
  return best < 0 ? NULL : g_strdup_printf ("%s/" PREFIX "%" G_GINT64_FORMAT, dir, best);
}

static gboolean
save_shard (void *data, const char *dir, gint64 step, GError **error)
{
  Transpiler *t = data;
  return ps_shard_save (t->table, dir, ks_role_maker_server_index (t->role),
                        ks_role_maker_server_num (t->role), step, error);
}

static gboolean
transpiler_init_server (void *p, const char *model_dir, GError **error)
{
  Transpiler *t = p;
  int index = ks_role_maker_server_index (t->role);
  KsArena *params;

  if (!need_model (t, "init_server", error))
    return FALSE;
  if (!ks_role_maker_is_server (t->role))
    return failed (error, "transpiler: init_server on a worker (workers call init_worker)");
  if (model_dir == NULL && *t->model_dir != '\0')
    model_dir = t->model_dir;
  params = ks_model_parameters (t->model);
  /* the blocks start from this process's own initialisation: the same seeds as the
   * workers' give the same values */
  if ((t->table = ps_dense_table_new (ks_model_device (t->model), t->layout, index, params,
                                      t->inner_ops, t->inner, error))
      == NULL)
    return FALSE;
  if (model_dir == NULL)
    return TRUE;
  if (!g_file_test (model_dir, G_FILE_TEST_IS_DIR))
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "init_server: the model directory %s does not exist", model_dir);
      return FALSE;
    }
  g_autofree char *job = g_build_filename (model_dir, JOB_FILE, NULL);
  g_autofree char *path = g_file_test (job, G_FILE_TEST_IS_REGULAR) ? g_strdup (model_dir)
                                                                   : latest_checkpoint (model_dir);
  if (path == NULL)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "init_server: %s holds no parameter-server checkpoint (" PREFIX "N/" JOB_FILE
                   " with server-<i>-of-<S>.safetensors)", model_dir);
      return FALSE;
    }
  if (!ps_shard_load (t->table, path, &t->loaded_step, error))
    {
      g_prefix_error (error, "init_server: ");
      return FALSE;
    }
  g_message ("server %d: loaded its blocks from %s (step %" G_GINT64_FORMAT ")", index, path,
             t->loaded_step);
  return TRUE;
}

static gboolean
transpiler_run_server (void *p, GError **error)
{
  Transpiler *t = p;
  int index = ks_role_maker_server_index (t->role);
  PsServerConfig c = { 0 };

  if (t->table == NULL)
    return failed (error, "transpiler: run_server before init_server");
  c.index = index;
  c.servers = ks_role_maker_server_num (t->role);
  c.workers = ks_role_maker_worker_num (t->role);
  c.endpoint = ks_role_maker_pserver_endpoints (t->role)[index];
  c.token = g_getenv ("KS_STORE_TOKEN");
  c.mode = t->strategy.mode;
  c.timeout_ms = t->timeout_ms;
  c.max_message = t->max_message;
  c.log_every_s = t->log_every_s;
  c.fingerprint = t->layout->fingerprint;
  c.step = t->loaded_step;
  c.table = t->table;
  c.save = save_shard;
  c.save_data = t;
  gboolean ok = ps_server_run (&c, error);
  /* served: the table goes now, while the compute it lives on surely exists */
  g_clear_pointer (&t->table, ps_dense_table_free);
  return ok;
}

/* ---- the distributed optimizer ---- */

typedef struct {
  Transpiler *t;
  const KsOptimizerOps *inner_ops;
  void *inner;
} DistOpt;

static void
dist_destroy (void *p)
{
  g_free (p);
}

static gboolean
dist_backward (void *p, KsModel *model, KsExpr *loss, KsExpr *const *params, gsize n_params,
               const char *const *no_grad, GArray *pairs, GError **error)
{
  DistOpt *d = p;
  Transpiler *t = d->t;
  if (!d->inner_ops->backward (d->inner, model, loss, params, n_params, no_grad, pairs, error))
    return FALSE;
  if (ks_model_parameters (model) == NULL)
    return failed (error, "transpiler: the model is not initialised");
  if (pairs->len != ks_arena_count (ks_model_parameters (model)))
    return failed (error, "transpiler: every parameter must be trained (the servers hold all "
                   "of them); no_grad and parameter lists are not supported");
  t->model = model;
  ps_layout_free (t->layout);
  t->layout = ps_layout_new (ks_model_parameters (model), ks_role_maker_server_num (t->role),
                             t->block_floats);
  return TRUE;
}

static gboolean
dist_apply (void *p, KsModel *model, const KsParamGrad *pairs, gsize n_pairs, GError **error)
{
  DistOpt *d = p;
  Transpiler *t = d->t;

  if (t->worker == NULL)
    return failed (error, "transpiler: a training step before init_worker");
  /* GEO trains locally; the other modes leave the update to the servers */
  if (t->strategy.mode == PS_MODE_GEO
      && !d->inner_ops->apply_gradients (d->inner, model, pairs, n_pairs, error))
    return FALSE;
  return ps_worker_step (t->worker, error);
}

static const KsOptimizerOps dist_ops = {
  .size = sizeof (KsOptimizerOps),
  .destroy = dist_destroy,
  .backward = dist_backward,
  .apply_gradients = dist_apply,
  /* the rest is the inner optimizer's (ks_optimizer_learning_rate, ks_optimizer_state) */
};

static gboolean
transpiler_distributed_optimizer (void *p, const KsOptimizerOps *inner_ops, void *inner,
                                  const KsConfig *strategy, const KsOptimizerOps **out_ops,
                                  void **out, GError **error)
{
  Transpiler *t = p;
  DistOpt *d;

  if (t->role == NULL)
    return failed (error, "transpiler: call init with the role maker before distributed_optimizer");
  if (!ps_strategy_read (strategy, &t->strategy, error))
    return FALSE;
  if (t->strategy.mode != PS_MODE_GEO && ks_config_get_double (strategy, "optim", "clip_norm") > 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[optim] clip_norm with [strategy] mode = %s: each server would clip its "
                   "own blocks by their own norm, not the model's; remove clip_norm (or use "
                   "mode = geo, where workers update locally)", ps_mode_name (t->strategy.mode));
      return FALSE;
    }
  t->timeout_ms = (int) (ks_config_get_double (strategy, "comm", "timeout") * 1000);
  t->inner_ops = inner_ops;
  t->inner = inner;
  d = g_new0 (DistOpt, 1);
  d->t = t;
  d->inner_ops = inner_ops;
  d->inner = inner;
  *out_ops = &dist_ops;
  *out = d;
  return TRUE;
}

/* ---- checkpoints ---- */

/* Every worker's flag, and together: TRUE when all are set. */
static gboolean
all_ok (Transpiler *t, gboolean mine, GError **error)
{
  double in = mine, out = 0;
  return ks_role_maker_all_reduce_worker (t->role, &in, &out, 1, KS_REDUCE_MIN, error) && out > 0;
}

static gboolean
write_job_file (const char *dir, const KsTrainStatus *status, GHashTable *metadata,
                int servers, GError **error)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autofree char *path = g_build_filename (dir, JOB_FILE, NULL);
  GHashTableIter it;
  gpointer k, v;

  json_builder_begin_object (b);
  if (metadata != NULL)
    for (g_hash_table_iter_init (&it, metadata); g_hash_table_iter_next (&it, &k, &v);)
      {
        json_builder_set_member_name (b, k);
        json_builder_add_string_value (b, v);
      }
#define FIELD(key, ...)                                                           \
  G_STMT_START {                                                                  \
    g_autofree char *v_ = g_strdup_printf (__VA_ARGS__);                          \
    json_builder_set_member_name (b, key);                                        \
    json_builder_add_string_value (b, v_);                                        \
  } G_STMT_END
  FIELD ("format", "ksdist-ps-job");
  FIELD ("step", "%" G_GINT64_FORMAT, status->step);
  FIELD ("epoch", "%" G_GINT64_FORMAT, status->epoch);
  FIELD ("servers", "%d", servers);
#undef FIELD
  json_builder_end_object (b);
  g_autoptr (JsonNode) root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  gsize len;
  g_autofree char *text = json_generator_to_data (gen, &len);
  return g_file_set_contents_full (path, text, (gssize) len,
                                   G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE,
                                   0644, error);
}

/* Makes a directory's entries durable (after files were written or renamed in it). */
static gboolean
fsync_dir (const char *dir, GError **error)
{
  int fd = open (dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0 || fsync (fd) != 0)
    {
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno), "cannot sync %s: %s",
                   dir, g_strerror (errno));
      if (fd >= 0)
        close (fd);
      return FALSE;
    }
  close (fd);
  return TRUE;
}

static void
remove_tree (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      if (g_file_test (path, G_FILE_TEST_IS_DIR) && !g_file_test (path, G_FILE_TEST_IS_SYMLINK))
        remove_tree (path);
      else
        g_unlink (path);
    }
  g_rmdir (dir);
}

static gint
by_step_descending (gconstpointer a, gconstpointer b)
{
  gint64 x = g_ascii_strtoll (*(char **) a + strlen (PREFIX), NULL, 10);
  gint64 y = g_ascii_strtoll (*(char **) b + strlen (PREFIX), NULL, 10);
  return x < y ? 1 : x > y ? -1 : 0;
}

static void
keep_newest (const char *dir, guint keep)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;
  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    if (g_str_has_prefix (name, PREFIX))
      g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, by_step_descending);
  for (guint i = keep; keep > 0 && i < names->len; i++)
    {
      g_autofree char *path = g_build_filename (dir, g_ptr_array_index (names, i), NULL);
      remove_tree (path);
    }
}

/* Worker 0: the servers' shards and the job file into a hidden directory, renamed into
 * place when all are written. */
static gboolean
save_job (Transpiler *t, const char *dir, const KsTrainStatus *status, GHashTable *metadata,
          guint keep, GError **error)
{
  g_autofree char *final = g_strdup_printf ("%s/" PREFIX "%" G_GINT64_FORMAT, dir, status->step);
  g_autofree char *partial = g_strdup_printf ("%s/.partial-" PREFIX "%" G_GINT64_FORMAT "-%d",
                                              dir, status->step, (int) getpid ());
  g_autofree char *old = g_strconcat (partial, ".old", NULL);

  if (g_mkdir_with_parents (partial, 0755) != 0)
    {
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
                   "cannot create %s: %s", partial, g_strerror (errno));
      return FALSE;
    }
  if (!ps_worker_save (t->worker, partial, status->step, error)
      || !write_job_file (partial, status, metadata, ks_role_maker_server_num (t->role), error)
      || !fsync_dir (partial, error))
    {
      remove_tree (partial);
      return FALSE;
    }
  if (g_file_test (final, G_FILE_TEST_IS_DIR) && g_rename (final, old) != 0)
    {
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
                   "cannot move aside %s: %s", final, g_strerror (errno));
      remove_tree (partial);
      return FALSE;
    }
  if (g_rename (partial, final) != 0)
    {
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
                   "cannot rename %s to %s: %s", partial, final, g_strerror (errno));
      remove_tree (partial);
      g_rename (old, final); /* the older copy of this step comes back */
      return FALSE;
    }
  remove_tree (old);
  if (!fsync_dir (dir, error))
    return FALSE;
  keep_newest (dir, keep); /* only once the new one is durable */
  return TRUE;
}

static gboolean
transpiler_save_check_point (void *p, KsModel *model, KsOptimizer *optimizer, const char *dir,
                             const KsTrainStatus *status, GHashTable *metadata, guint keep,
                             GError **error)
{
  Transpiler *t = p;
  g_autoptr (GError) mine = NULL;
  gboolean saved = TRUE;

  if (t->worker == NULL)
    return failed (error, "transpiler: save_check_point before init_worker");
  /* every worker's gradients of this step are on the servers before they write */
  if (!ps_worker_flush (t->worker, error) || !ks_role_maker_barrier_worker (t->role, error))
    return FALSE;
  if (ks_role_maker_is_first_worker (t->role))
    saved = save_job (t, dir, status, metadata, keep, &mine);
  if (!all_ok (t, saved, error))
    {
      if (error != NULL && *error == NULL)
        g_set_error (error, KS_CHECKPOINT_ERROR, KS_CHECKPOINT_ERROR_IO,
                     "the checkpoint of step %" G_GINT64_FORMAT " was not written%s%s",
                     status->step, mine != NULL ? ": " : " (see worker 0's log)",
                     mine != NULL ? mine->message : "");
      return FALSE;
    }
  return TRUE;
}

static gboolean
read_job_file (const char *path, KsTrainStatus *status, GHashTable **metadata, GError **error)
{
  g_autofree char *file = g_build_filename (path, JOB_FILE, NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GHashTable) meta = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  JsonObject *o;
  const char *step, *epoch;

  if (!json_parser_load_from_mapped_file (parser, file, error))
    return FALSE;
  if (!JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return failed (error, "%s: not a JSON object", file);
  o = json_node_get_object (json_parser_get_root (parser));
  g_autoptr (GList) members = json_object_get_members (o);
  for (GList *l = members; l != NULL; l = l->next)
    {
      JsonNode *n = json_object_get_member (o, l->data);
      if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
        return failed (error, "%s: '%s' is not a string", file, (char *) l->data);
      g_hash_table_insert (meta, g_strdup (l->data), g_strdup (json_node_get_string (n)));
    }
  step = g_hash_table_lookup (meta, "step");
  epoch = g_hash_table_lookup (meta, "epoch");
  if (g_strcmp0 (g_hash_table_lookup (meta, "format"), "ksdist-ps-job") != 0 || step == NULL
      || epoch == NULL
      || !g_ascii_string_to_signed (step, 10, 0, G_MAXINT64 / 2, &status->step, NULL)
      || !g_ascii_string_to_signed (epoch, 10, -1, G_MAXINT64 / 2, &status->epoch, NULL))
    return failed (error, "%s: not a ksdist parameter-server job file (format, step and epoch "
                   "as decimal strings)", file);
  if (metadata != NULL)
    *metadata = g_steal_pointer (&meta);
  return TRUE;
}

static gboolean
transpiler_load_check_point (void *p, KsModel *model, KsOptimizer *optimizer, const char *dir,
                             KsTrainStatus *status, GHashTable **metadata, GError **error)
{
  Transpiler *t = p;
  g_autofree char *latest = latest_checkpoint (dir);
  gint64 found = -1;
  double in, out;

  /* the one worker 0 finds, so all resume from the same */
  if (latest != NULL && !read_job_file (latest, status, metadata, error))
    return FALSE;
  if (latest != NULL)
    found = status->step;
  in = ks_role_maker_is_first_worker (t->role) ? (double) found : -1;
  if (!ks_role_maker_all_reduce_worker (t->role, &in, &out, 1, KS_REDUCE_MAX, error))
    return FALSE;
  if ((gint64) out != found)
    return failed (error, "worker 0 resumes from step %.0f of %s but this worker found step %"
                   G_GINT64_FORMAT ": give every worker the same [train] checkpoint_dir", out,
                   dir, found);
  if (found < 0)
    {
      status->epoch = -1;
      status->step = 0;
    }
  t->resumed_step = found;
  return TRUE;
}

static const KsAlgorithmOps transpiler_ops = {
  .size = sizeof (KsAlgorithmOps),
  .create = transpiler_create,
  .destroy = transpiler_destroy,
  .init = transpiler_init,
  .init_worker = transpiler_init_worker,
  .init_server = transpiler_init_server,
  .run_server = transpiler_run_server,
  .stop_worker = transpiler_stop_worker,
  .distributed_optimizer = transpiler_distributed_optimizer,
  .save_check_point = transpiler_save_check_point,
  .load_check_point = transpiler_load_check_point,
};

static const KsImplDesc transpiler_impls[] = {
  { KS_KIND_ALGORITHM, "transpiler", &transpiler_ops, NULL,
    "Parameter servers: dense tables on the servers; sync, half_async, async or geo" },
};

static const KsKeyDesc transpiler_settings[] = {
  { NULL, "block_floats", KS_VALUE_INT, "8192", 1, 1e12, NULL,
    "Least floats in a block: a parameter of n floats is cut into min(servers, n / "
    "block_floats) blocks, spread over the servers round-robin" },
  { NULL, "max_message_mb", KS_VALUE_INT, "1024", 1, 1 << 20, NULL,
    "Largest message a server or worker accepts, in MiB; a larger one is refused" },
  { NULL, "log_every_s", KS_VALUE_DOUBLE, "10", 0, 1e6, NULL,
    "Seconds between a server's log lines of request rate, bytes and updates; 0 only at the end" },
  { NULL, "model_dir", KS_VALUE_STRING, "", 1, 0, NULL,
    "Servers start from this checkpoint (init_server's model_dir: a checkpoint-N directory "
    "of a parameter-server job, or a directory holding them; any server count); empty for "
    "the initial values" },
};

static const KsPluginDesc transpiler_plugin = {
  .abi_major = KS_ABI_MAJOR,
  .abi_minor = KS_ABI_MINOR,
  .name = "transpiler",
  .version = PACKAGE_VERSION,
  .description = "The transpiler algorithm: parameter-server training over ZeroMQ",
  .impls = transpiler_impls,
  .n_impls = G_N_ELEMENTS (transpiler_impls),
  .settings = transpiler_settings,
  .n_settings = G_N_ELEMENTS (transpiler_settings),
};

KS_PLUGIN_DEFINE (transpiler_plugin)
