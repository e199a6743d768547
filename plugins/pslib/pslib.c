/* The pslib algorithm: parameter servers with sparse tables (after Paddle's pslib /
 * DownpourSGD, whose source is closed, and its CtrCommonAccessor).
 *
 * Servers hold the job's sparse tables (rows.c over ks_sparse_table, a row per id made on
 * its first pull) and, by [strategy] dense, the dense parameters:
 *   servers    on the servers' dense tables (the transpiler's), sync when staleness is 0,
 *              else async
 *   allreduce  on the workers, their gradients averaged every step (PERSIA's hybrid:
 *              sparse asynchronous on servers, dense synchronous among workers)
 * A task declares each table with the parameter that holds a batch's pulled rows
 * (sparse_table), pulls a batch's rows before its step and pushes their gradients after it
 * (sparse-worker.c: asynchronous, bounded by [strategy] staleness). Checkpoints are the
 * transpiler's job directories (job.c) with each server's table files beside its dense
 * shard; they load with any server count. */
#include <config.h>
#include <ksdist/ksdist.h>

#include "budget.h"
#include "ps/auth.h"
#include "ps/client.h"
#include "ps/job.h"
#include "ps/server.h"
#include "ps/settings.h"
#include "ps/shard.h"
#include "ps/worker.h"
#include "rows.h"
#include "sparse-worker.h"

#include <string.h>

#define DENSE_DIR "dense" /* with dense = allreduce: worker 0's checkpoint of the dense part */
#define JOB_SAVE_KEY "ps_save_id" /* its metadata: the save of the job directory */

typedef struct {
  char *name, *rows_param;
  KsSparseConfig config;
  gsize dim;
  gint64 batch_rows; /* the rows parameter's rows: the most ids one batch pulls */
} Table;

typedef struct {
  KsRoleMaker *role;
  PsSettings settings;
  gint64 server_memory_mb; /* [pslib] server_memory_mb: 0, from the host's memory */
  GPtrArray *tables; /* Table*, in declaration order */
  GPtrArray *skip;   /* the rows parameters, NULL-terminated */
  /* from distributed_optimizer */
  PsStrategy dense_strategy;
  gboolean dense_allreduce;
  int staleness, timeout_ms;
  const KsOptimizerOps *inner_ops;
  void *inner;
  const KsConfig *config; /* its [table.NAME] groups */
  /* from the backward */
  KsModel *model;
  KsGradAverage *average; /* dense = allreduce over 2 or more workers: averaging while backward runs */
  GArray *dense_pairs;    /* dense = allreduce: the step's pairs without the rows' */
  PsLayout *layout; /* of the dense parameters */
  /* a worker's */
  PsClient *client;
  PsWorker *dense;
  PsSparseWorker *sparse;
  KsOptimizer *optimizer; /* during a save: worker 0 writes the dense part (allreduce) */
  gint64 resumed_step;
  /* a server's */
  PsDenseTable *table;
  PsRows *rows;
  gint64 loaded_step;
} Pslib;

static void
table_free (gpointer p)
{
  Table *t = p;
  g_free (t->name);
  g_free (t->rows_param);
  g_free (t);
}

static void *
pslib_create (const KsSettings *s, GError **error)
{
  Pslib *p = g_new0 (Pslib, 1);
  ps_settings_read (s, &p->settings);
  p->server_memory_mb = ks_settings_get_int (s, "server_memory_mb");
  p->tables = g_ptr_array_new_with_free_func (table_free);
  p->skip = g_ptr_array_new ();
  p->dense_pairs = g_array_new (FALSE, FALSE, sizeof (KsParamGrad));
  g_ptr_array_add (p->skip, NULL);
  p->resumed_step = -1;
  return p;
}

static void
pslib_destroy (void *ctx)
{
  Pslib *p = ctx;
  ps_worker_halt (p->dense);
  ps_sparse_worker_free (p->sparse);
  ps_client_free (p->client);
  ps_worker_free (p->dense);
  ps_dense_table_free (p->table);
  ps_rows_free (p->rows);
  ps_layout_free (p->layout);
  g_ptr_array_unref (p->skip);
  g_array_unref (p->dense_pairs);
  g_ptr_array_unref (p->tables);
  ps_settings_clear (&p->settings);
  g_free (p);
}

static gboolean
pslib_init (void *ctx, KsRoleMaker *role, GError **error)
{
  Pslib *p = ctx;
  if (role == NULL || ks_role_maker_server_num (role) < 1)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[job] mode = pslib keeps its sparse tables on parameter servers, but this "
                   "job has none: start it with `ksdist launch --servers S --workers W CONFIG`");
      return FALSE;
    }
  p->role = role;
  return TRUE;
}

static Table *
find_table (Pslib *p, const char *name, guint *index)
{
  for (guint i = 0; i < p->tables->len; i++)
    {
      Table *t = g_ptr_array_index (p->tables, i);
      if (strcmp (t->name, name) == 0)
        {
          if (index != NULL)
            *index = i;
          return t;
        }
    }
  return NULL;
}

static gboolean
pslib_sparse_table (void *ctx, const char *name, const char *rows_param, GError **error)
{
  Pslib *p = ctx;
  Table *t;
  if (p->model != NULL)
    return ps_failed (error, "pslib: declare sparse table %s before minimize", name);
  if (find_table (p, name, NULL) != NULL)
    return ps_failed (error, "pslib: sparse table %s declared twice", name);
  t = g_new0 (Table, 1);
  t->name = g_strdup (name);
  t->rows_param = g_strdup (rows_param);
  g_ptr_array_add (p->tables, t);
  g_ptr_array_insert (p->skip, p->skip->len - 1, t->rows_param);
  return TRUE;
}

/* The layout's fingerprint with the tables' names and widths: hello compares it. */
static guint64
fingerprint (Pslib *p)
{
  guint64 h = p->layout->fingerprint;
  for (guint i = 0; i < p->tables->len; i++)
    {
      Table *t = g_ptr_array_index (p->tables, i);
      h = (h ^ g_str_hash (t->name)) * 1099511628211ull;
      h = (h ^ t->dim) * 1099511628211ull;
    }
  return h;
}

static gboolean
need_model (Pslib *p, const char *what, GError **error)
{
  return p->layout != NULL
         || ps_failed (error, "pslib: %s needs the model: wrap the optimizer with "
                    "distributed_optimizer and call minimize first", what);
}

/* ---- the worker ---- */

static gboolean
pslib_init_worker (void *ctx, GError **error)
{
  Pslib *p = ctx;
  const char *const *endpoints;
  const char *token = g_getenv ("KS_STORE_TOKEN");
  int index, timeout;
  gint64 server_step = 0;
  g_autofree gsize *dims = NULL;

  if (!need_model (p, "init_worker", error))
    return FALSE;
  if (!ks_role_maker_is_worker (p->role))
    return ps_failed (error, "pslib: init_worker on a server (servers call init_server)");
  endpoints = ks_role_maker_pserver_endpoints (p->role);
  index = ks_role_maker_worker_index (p->role);
  timeout = p->timeout_ms + PS_ANSWER_SLACK_MS;
  if ((p->client = ps_client_new (endpoints, token, index, timeout, p->settings.max_message,
                                  p->settings.unencrypted, error))
      == NULL)
    return FALSE;
  ps_auth_say_worker_security (index, p->settings.unencrypted);
  if (!p->dense_allreduce
      && (p->dense = ps_worker_new (p->client, p->layout, &p->dense_strategy, index,
                                    ks_role_maker_worker_num (p->role), p->model, &server_step,
                                    error))
             == NULL)
    return FALSE;
  dims = g_new (gsize, MAX (p->tables->len, 1));
  for (guint i = 0; i < p->tables->len; i++)
    dims[i] = ((Table *) g_ptr_array_index (p->tables, i))->dim;
  PsSparseWorkerConfig c = { endpoints, token, index, timeout, p->settings.max_message,
                             p->settings.unencrypted, p->layout->fingerprint,
                             p->dense_strategy.mode, dims, p->tables->len, p->staleness };
  if ((p->sparse = ps_sparse_worker_new (&c, &server_step, error)) == NULL)
    return FALSE;
  /* the servers learn this worker is alive while it computes, and it that they are */
  ps_client_heartbeat_start (ps_sparse_worker_pull_client (p->sparse), p->timeout_ms);
  /* workers that resume need the servers at the same checkpoint (servers that start from
   * [pslib] model_dir under fresh workers are incremental training) */
  if (p->resumed_step >= 0 && server_step != p->resumed_step)
    return ps_failed (error, "init_worker: the servers loaded the checkpoint of step %"
                   G_GINT64_FORMAT " but the workers resume from step %" G_GINT64_FORMAT ": "
                   "start servers and workers with the same [train] checkpoint_dir and resume",
                   server_step, p->resumed_step);
  return TRUE;
}

static gboolean
flush (Pslib *p, GError **error)
{
  if (p->sparse == NULL)
    return ps_failed (error, "pslib: a worker's request before init_worker");
  return ps_sparse_worker_flush (p->sparse, error)
         && (p->dense == NULL || ps_worker_flush (p->dense, error));
}

/* Before an evaluation: every worker's pushes are on the servers, then each takes the
 * servers' dense values, so all evaluate one model. */
static gboolean
pslib_flush_worker (void *ctx, GError **error)
{
  Pslib *p = ctx;
  return flush (p, error) && ks_role_maker_barrier_worker (p->role, error)
         && (p->dense == NULL || ps_worker_pull (p->dense, error));
}

/* One request without payload to every server. */
static gboolean
tell_servers (Pslib *p, PsType type, GError **error)
{
  int servers = ks_role_maker_server_num (p->role);
  g_autofree PsCall *calls = g_new0 (PsCall, servers);
  for (int s = 0; s < servers; s++)
    calls[s] = (PsCall) { s, NULL, 0, NULL, 0, 0 };
  return ps_client_call (p->client, type, 0, 0, 0, calls, servers, error);
}

static gboolean
pslib_stop_worker (void *ctx, GError **error)
{
  Pslib *p = ctx;
  if (!flush (p, error))
    return FALSE;
  /* the servers may end once every worker stopped */
  ps_client_heartbeat_stop (ps_sparse_worker_pull_client (p->sparse));
  if (p->dense != NULL)
    return ps_worker_stop (p->dense, error);
  return tell_servers (p, PS_STOP, error);
}

static gboolean
pslib_pull_sparse (void *ctx, const char *name, const guint64 *ids, gsize n, gboolean create,
                   float *out, GError **error)
{
  Pslib *p = ctx;
  guint index;
  if (find_table (p, name, &index) == NULL)
    return ps_failed (error, "pslib: no sparse table %s was declared", name);
  if (p->sparse == NULL)
    return ps_failed (error, "pslib: a pull before init_worker");
  return ps_sparse_worker_pull (p->sparse, index, ids, n, create, out, error);
}

static gboolean
pslib_push_sparse (void *ctx, const char *name, gint64 step, const guint64 *ids, gsize n,
                   const float *grads, const float *shows, const float *clicks, GError **error)
{
  Pslib *p = ctx;
  guint index;
  if (find_table (p, name, &index) == NULL)
    return ps_failed (error, "pslib: no sparse table %s was declared", name);
  if (p->sparse == NULL)
    return ps_failed (error, "pslib: a push before init_worker");
  return ps_sparse_worker_push (p->sparse, index, step, ids, n, grads, shows, clicks, error);
}

static gboolean
pslib_shrink (void *ctx, guint64 *deleted, GError **error)
{
  Pslib *p = ctx;
  if (p->sparse == NULL)
    return ps_failed (error, "pslib: shrink before init_worker");
  return ps_sparse_worker_shrink (p->sparse, deleted, error);
}

/* ---- the server ---- */

static gboolean
save_server (void *data, const char *dir, gint64 step, GError **error)
{
  Pslib *p = data;
  int index = ks_role_maker_server_index (p->role), servers = ks_role_maker_server_num (p->role);
  return (p->dense_allreduce || ps_shard_save (p->table, dir, index, servers, step, error))
         && ps_rows_save (p->rows, dir, step, error);
}

static gboolean
load_server (Pslib *p, const char *model_dir, GError **error)
{
  g_autofree char *path = ps_job_resolve (model_dir, error);
  PsJobIdentity id;

  if (path == NULL)
    return FALSE;
  /* every file must be of the save job.json names: its save id, step and server count */
  gboolean ok = ps_job_identity_read (path, &id, error)
                && (p->dense_allreduce || ps_shard_load (p->table, path, &id, &p->loaded_step, error))
                && ps_rows_load (p->rows, path, &id, error);
  if (ok)
    {
      p->loaded_step = id.step;
      g_message ("server %d: loaded %s (step %" G_GINT64_FORMAT ", written by %d servers)",
                 ks_role_maker_server_index (p->role), path, id.step, id.servers);
    }
  else
    g_prefix_error (error, "init_server: ");
  ps_job_identity_clear (&id);
  return ok;
}

static gboolean
pslib_init_server (void *ctx, const char *model_dir, GError **error)
{
  Pslib *p = ctx;
  int index = ks_role_maker_server_index (p->role);
  g_autofree char **names = g_new0 (char *, p->tables->len + 1);
  g_autofree KsSparseConfig *configs = g_new0 (KsSparseConfig, MAX (p->tables->len, 1));
  g_autofree gint64 *max_new = g_new0 (gint64, MAX (p->tables->len, 1));
  const char *every = NULL;
  gint64 shrink_every = 0;

  if (!need_model (p, "init_server", error))
    return FALSE;
  if (!ks_role_maker_is_server (p->role))
    return ps_failed (error, "pslib: init_server on a worker (workers call init_worker)");
  if (model_dir == NULL && *p->settings.model_dir != '\0')
    {
      if (p->dense_allreduce)
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "[pslib] model_dir with [strategy] dense = allreduce: the servers would "
                       "load the sparse tables but the dense part lives on the workers; resume "
                       "the job from its [train] checkpoint_dir instead");
          return FALSE;
        }
      model_dir = p->settings.model_dir;
    }
  if ((p->table = ps_dense_table_new (ks_model_device (p->model), p->layout, index,
                                      ks_model_parameters (p->model), p->inner_ops, p->inner,
                                      error))
      == NULL)
    return FALSE;
  for (guint i = 0; i < p->tables->len; i++)
    {
      Table *t = g_ptr_array_index (p->tables, i);
      names[i] = t->name;
      configs[i] = t->config;
      max_new[i] = t->config.max_new_rows > 0 ? t->config.max_new_rows : t->batch_rows;
    }
  /* the task's day length, when the configuration has the key (a benchmark's has not) */
  if (ks_config_lookup (p->config, "data", "shrink_every", &every, NULL, NULL) && every != NULL)
    shrink_every = g_ascii_strtoll (every, NULL, 10);
  int servers = ks_role_maker_server_num (p->role);
  double budget;
  g_autofree char *why = NULL;
  if (!ps_server_budget ("/", p->server_memory_mb,
                         ps_servers_on_host (ks_role_maker_pserver_endpoints (p->role), servers,
                                             index),
                         &budget, &why, error))
    return FALSE;
  p->rows = ps_rows_new ((const char *const *) names, configs, max_new, p->tables->len, index,
                         servers, budget, why,
                         p->settings.max_message, MAX (shrink_every, 0));
  return model_dir == NULL || load_server (p, model_dir, error);
}

static gboolean
pslib_run_server_cancellable (void *ctx, GCancellable *cancellable, GError **error)
{
  Pslib *p = ctx;
  int index = ks_role_maker_server_index (p->role);
  PsServerConfig c;
  gsize rows, bytes;

  if (p->table == NULL)
    return ps_failed (error, "pslib: run_server before init_server");
  ps_server_config_init (&c, p->role, &p->settings, p->timeout_ms);
  c.mode = p->dense_strategy.mode;
  c.max_update_norm = p->dense_strategy.max_update_norm;
  c.fingerprint = p->layout->fingerprint;
  c.step = p->loaded_step;
  c.table = p->table;
  c.save = save_server;
  c.save_data = p;
  c.extra = ps_rows_handle;
  c.extra_data = p->rows;
  c.cancellable = cancellable;
  gboolean ok = ps_server_run (&c, error);
  ps_rows_usage (p->rows, &rows, &bytes);
  g_message ("server %d: holds %" G_GSIZE_FORMAT " sparse rows, %.1f MB (%.1f bytes per row)", index,
             rows, bytes / 1e6, rows > 0 ? (double) bytes / rows : 0.0);
  guint64 pulled, pushed;
  double pull_s, push_s;
  ps_rows_served (p->rows, &pulled, &pull_s, &pushed, &push_s);
  g_message ("server %d: served %" G_GUINT64_FORMAT " pulled rows (%.2f M rows/s while serving "
             "them) and %" G_GUINT64_FORMAT " pushed rows (%.2f M rows/s)", index, pulled,
             pulled / MAX (pull_s, 1e-9) / 1e6, pushed, pushed / MAX (push_s, 1e-9) / 1e6);
  g_clear_pointer (&p->table, ps_dense_table_free);
  return ok;
}

static gboolean
pslib_run_server (void *ctx, GError **error)
{
  return pslib_run_server_cancellable (ctx, NULL, error);
}

/* ---- the distributed optimizer: the core's base with this mode's exchange ---- */

static void
mode_destroy (void *ctx)
{
  Pslib *p = ctx;
  if (p->average != NULL)
    ks_model_set_grad_ready (p->model, NULL, NULL); /* the model outlives its optimizer */
  g_clear_pointer (&p->average, ks_grad_average_free);
}

static gboolean
mode_bind (void *ctx, KsModel *model, GArray *pairs, GError **error)
{
  Pslib *p = ctx;
  const KsArena *arena;

  if ((arena = ks_model_parameters (model)) == NULL)
    return ps_failed (error, "pslib: the model is not initialised");
  if (pairs->len != ks_arena_count (arena))
    return ps_failed (error, "pslib: every parameter must be trained; no_grad and parameter "
                   "lists are not supported");
  for (guint i = 0; i < p->tables->len; i++)
    {
      Table *t = g_ptr_array_index (p->tables, i);
      ks_sparse_config_read (p->config, t->name, &t->config);
      t->dim = 1 + (gsize) t->config.embedx_dim;
      const KsTensor *rows = ks_arena_tensor (arena, t->rows_param);
      if (rows == NULL || rows->ndim != 2 || (gsize) rows->shape[1] != t->dim)
        return ps_failed (error, "pslib: sparse table %s: parameter %s must be [rows, %" G_GSIZE_FORMAT
                       "] (1 + [table.%s] embedx_dim)", t->name, t->rows_param, t->dim, t->name);
      t->batch_rows = rows->shape[0];
    }
  p->model = model;
  ps_layout_free (p->layout);
  p->layout = ps_layout_new_without (arena, ks_role_maker_server_num (p->role), p->settings.block_floats,
                                     (const char *const *) p->skip->pdata);
  p->layout->fingerprint = fingerprint (p);
  return TRUE;
}

static gboolean
is_rows (Pslib *p, KsExpr *param)
{
  return g_strv_contains ((const char *const *) p->skip->pdata, ks_expr_name (param));
}

/* dense = allreduce: the dense gradients averaged over the workers, and only they
 * updated here (the rows' go to the sparse tables); dense = servers: the gradients
 * pushed, the servers update. */
static gboolean
mode_exchange (void *ctx, KsModel *model, const KsParamGrad **pairs, gsize *n_pairs,
               gboolean *update, GError **error)
{
  Pslib *p = ctx;
  KsComm *comm = ks_role_maker_worker_comm (p->role);

  if (p->sparse == NULL)
    return ps_failed (error, "pslib: a training step before init_worker");
  if (!p->dense_allreduce)
    {
      *update = FALSE;
      return ps_worker_step (p->dense, error);
    }
  g_array_set_size (p->dense_pairs, 0);
  for (gsize i = 0; i < *n_pairs; i++)
    if (!is_rows (p, (*pairs)[i].param))
      g_array_append_val (p->dense_pairs, (*pairs)[i]);
  *pairs = (const KsParamGrad *) p->dense_pairs->data;
  *n_pairs = p->dense_pairs->len;
  if (comm == NULL || ks_comm_size (comm) < 2)
    return TRUE;
  /* the collective mode's averaging: from the second step on, each bucket while the
   * backward goes on (the first step's buckets are all averaged here) */
  if (p->average == NULL)
    {
      p->average = ks_grad_average_new (model, comm, *pairs, *n_pairs,
                                        KS_GRAD_AVERAGE_BUCKET_FLOATS);
      ks_model_set_grad_ready (model, ks_grad_average_ready, p->average);
    }
  return ks_grad_average_finish (p->average, error);
}

static const KsDistModeOps mode_ops = {
  .size = sizeof (KsDistModeOps),
  .destroy = mode_destroy,
  .bind = mode_bind,
  .exchange = mode_exchange,
};

/* The plan's check, and distributed_optimizer's: the transpiler's settings are not
 * pslib's. */
static gboolean
pslib_check_strategy (const KsConfig *strategy, GError **error)
{
  if (strcmp (ks_config_get_string (strategy, "strategy", "mode"), "auto") != 0
      || ks_config_get_bool (strategy, "strategy", "a_sync")
      || ks_config_get_int (strategy, "strategy", "k_steps") > 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[strategy] mode, a_sync and k_steps choose the transpiler's modes; pslib "
                   "pushes asynchronously within [strategy] staleness (0: every step waits) "
                   "and keeps the dense part where [strategy] dense says: remove them");
      return FALSE;
    }
  if (strcmp (ks_config_get_string (strategy, "strategy", "dense"), "allreduce") != 0
      && ks_config_get_double (strategy, "optim", "clip_norm") > 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[optim] clip_norm with the dense part on the servers: each server would "
                   "clip its own blocks; remove clip_norm or set [strategy] dense = allreduce");
      return FALSE;
    }
  /* a server budget past this host's memory: refused by `ksdist config` and the launcher,
   * as a server on this host would refuse it at its start */
  double bytes;
  g_autofree char *why = NULL;
  gint64 server_memory_mb = ks_config_get_int (strategy, "pslib", "server_memory_mb");
  if (server_memory_mb > 0 && !ps_server_budget ("/", server_memory_mb, 1, &bytes, &why, error))
    return FALSE;
  static const char *const used[] = { "strategy.mode", "strategy.a_sync", "strategy.k_steps",
                                       "strategy.staleness", "strategy.dense", NULL };
  return ks_config_check_used (strategy, "strategy", used, "[job] mode = pslib", error);
}

static gboolean
pslib_distributed_optimizer (void *ctx, const KsOptimizerOps *inner_ops, void *inner,
                             const KsConfig *strategy, const KsOptimizerOps **out_ops, void **out,
                             GError **error)
{
  Pslib *p = ctx;

  if (p->role == NULL)
    return ps_failed (error, "pslib: call init with the role maker before distributed_optimizer");
  if (!pslib_check_strategy (strategy, error))
    return FALSE;
  p->staleness = (int) ks_config_get_int (strategy, "strategy", "staleness");
  p->dense_allreduce = strcmp (ks_config_get_string (strategy, "strategy", "dense"), "allreduce") == 0;
  /* the dense tables: sync when no staleness is allowed, else async one push at a time;
   * never GEO, so no delta bound ([strategy] max_update_norm is refused as unused) */
  p->dense_strategy = (PsStrategy) { p->staleness == 0 ? PS_MODE_SYNC : PS_MODE_ASYNC, 0,
                                     MAX (p->staleness, 1), 1, 0 };
  p->timeout_ms = (int) (ks_config_get_double (strategy, "comm", "timeout") * 1000);
  ps_settings_read_job (&p->settings, strategy);
  p->inner_ops = inner_ops;
  p->inner = inner;
  p->config = strategy;
  ks_dist_optimizer_new (&mode_ops, p, inner_ops, inner, out_ops, out);
  return TRUE;
}

/* ---- checkpoints ---- */

static gboolean
save_servers (void *data, const char *dir, gint64 step, GError **error)
{
  Pslib *p = data;
  int servers = ks_role_maker_server_num (p->role);
  g_autofree PsCall *calls = g_new0 (PsCall, servers);
  for (int s = 0; s < servers; s++)
    calls[s] = (PsCall) { s, dir, strlen (dir), NULL, 0, 0 };
  if (!ps_client_call (p->client, PS_SAVE, step, 0, 0, calls, servers, error))
    return FALSE;
  if (!p->dense_allreduce)
    return TRUE;
  /* the dense part lives on the workers: worker 0's copy (all are equal), naming the
   * save of the job directory it is in */
  g_autofree char *dense = g_build_filename (dir, DENSE_DIR, NULL);
  g_autoptr (GHashTable) meta = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
  g_hash_table_insert (meta, JOB_SAVE_KEY, ks_checkpoint_save_id (dir));
  return ks_checkpoint_save (dense, step, p->model, p->optimizer, meta, 0, error);
}

static gboolean
pslib_save_check_point (void *ctx, KsModel *model, KsOptimizer *optimizer, const char *dir,
                        const KsTrainStatus *status, GHashTable *metadata, guint keep,
                        GError **error)
{
  Pslib *p = ctx;
  gboolean ok;
  if (!flush (p, error))
    return FALSE;
  p->optimizer = optimizer;
  ok = ps_job_save_check_point (p->role, dir, status, metadata, keep, save_servers, p, error);
  p->optimizer = NULL;
  return ok;
}

static gboolean
pslib_load_check_point (void *ctx, KsModel *model, KsOptimizer *optimizer, const char *dir,
                        KsTrainStatus *status, GHashTable **metadata, GError **error)
{
  Pslib *p = ctx;
  if (!ps_job_load_check_point (p->role, dir, status, metadata, &p->resumed_step, error))
    return FALSE;
  if (p->resumed_step < 0 || !p->dense_allreduce)
    return TRUE;
  g_autofree char *job = ps_job_latest (dir);
  g_autofree char *dense_dir = g_build_filename (job, DENSE_DIR, NULL);
  g_autofree char *dense = ks_checkpoint_latest (dense_dir);
  g_autoptr (GHashTable) meta = NULL;
  PsJobIdentity id;
  gint64 step = -1;
  if (dense == NULL)
    return ps_failed (error, "%s holds no dense part (%s/checkpoint-N): was it written with "
                   "[strategy] dense = allreduce?", job, DENSE_DIR);
  if (!ps_job_identity_read (job, &id, error))
    {
      ps_job_identity_clear (&id);
      return FALSE;
    }
  /* checked before the model changes: a part of another save or step is refused */
  g_autoptr (GHashTable) saved = ks_checkpoint_metadata (dense, error);
  gboolean ok = saved != NULL;
  const char *got = ok ? g_hash_table_lookup (saved, JOB_SAVE_KEY) : NULL;
  const char *got_step = ok ? g_hash_table_lookup (saved, "step") : NULL;
  if (ok && ((id.save_id != NULL && g_strcmp0 (got, id.save_id) != 0)
             || !g_ascii_string_to_signed (got_step != NULL ? got_step : "", 10, 0, G_MAXINT64,
                                           &step, NULL)
             || step != id.step))
    ok = ps_failed (error, "%s holds save %s of step %s but %s names save %s of step %"
                    G_GINT64_FORMAT ": a dense part of another save; restore the checkpoint "
                    "directory whole from the run that saved it", dense,
                    got != NULL ? got : "(none)", got_step != NULL ? got_step : "(none)",
                    id.file, id.save_id != NULL ? id.save_id : "(none)", id.step);
  ok = ok && ks_checkpoint_load (dense, model, optimizer, NULL, &meta, error);
  ps_job_identity_clear (&id);
  return ok;
}

static const KsAlgorithmOps pslib_ops = {
  .size = sizeof (KsAlgorithmOps),
  .create = pslib_create,
  .destroy = pslib_destroy,
  .init = pslib_init,
  .init_worker = pslib_init_worker,
  .init_server = pslib_init_server,
  .run_server = pslib_run_server,
  .run_server_cancellable = pslib_run_server_cancellable,
  .stop_worker = pslib_stop_worker,
  .distributed_optimizer = pslib_distributed_optimizer,
  .save_check_point = pslib_save_check_point,
  .load_check_point = pslib_load_check_point,
  .sparse_table = pslib_sparse_table,
  .pull_sparse = pslib_pull_sparse,
  .push_sparse = pslib_push_sparse,
  .flush_worker = pslib_flush_worker,
  .shrink = pslib_shrink,
  .check_strategy = pslib_check_strategy,
  .traits = KS_ALGORITHM_SERVERS | KS_ALGORITHM_SERVER_CHECKPOINTS,
};

/* the parameter-server runtime's settings, and the sparse tables' budget */
static const KsKeyDesc pslib_settings[] = {
  PS_SETTINGS_KEYS,
  { NULL, "server_memory_mb", KS_VALUE_INT, "0", 0, 1e12, NULL,
    "MiB a parameter server's sparse tables may hold, shared by its tables whose [table.NAME] "
    "max_rows is 0 (a table's own max_rows wins); refused above the memory the server may "
    "use; 0: a quarter of the host's memory (or its memory cgroup's limit, the smallest of "
    "the server's own and its parents'), shared by the host's parameter servers" },
};

static const KsImplDesc pslib_impls[] = {
  { KS_KIND_ALGORITHM, "pslib", &pslib_ops, NULL,
    "Parameter servers with sparse tables (a row per id, CTR statistics) and the dense part "
    "on the servers or allreduced" },
};


static const KsPluginDesc pslib_plugin = {
  .abi_major = KS_ABI_MAJOR,
  .abi_minor = KS_ABI_MINOR,
  .name = "pslib",
  .version = PACKAGE_VERSION,
  .description = "The pslib algorithm: sparse parameter servers over ZeroMQ",
  .impls = pslib_impls,
  .n_impls = G_N_ELEMENTS (pslib_impls),
  .settings = pslib_settings,
  .n_settings = G_N_ELEMENTS (pslib_settings),
};

KS_PLUGIN_DEFINE (pslib_plugin)
