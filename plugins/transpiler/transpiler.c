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

#include "ps/auth.h"
#include "ps/client.h"
#include "ps/job.h"
#include "ps/server.h"
#include "ps/settings.h"
#include "ps/shard.h"
#include "ps/worker.h"

#include <string.h>


typedef struct {
  KsRoleMaker *role;
  PsSettings settings;
  /* from distributed_optimizer */
  PsStrategy strategy;
  int timeout_ms;
  const KsOptimizerOps *inner_ops;
  double base_lr; /* [optim] lr: async servers divide it by a push's staleness */
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
  ps_settings_read (s, &t->settings);
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
  ps_settings_clear (&t->settings);
  g_free (t);
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
         || ps_failed (error, "transpiler: %s needs the model: wrap the optimizer with "
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
    return ps_failed (error, "transpiler: init_worker on a server (servers call init_server)");
  if ((t->client = ps_client_new (ks_role_maker_pserver_endpoints (t->role),
                                  g_getenv ("KS_STORE_TOKEN"),
                                  ks_role_maker_worker_index (t->role),
                                  t->timeout_ms + PS_ANSWER_SLACK_MS,
                                  t->settings.max_message, t->settings.unencrypted, error))
          == NULL
      || (t->worker = ps_worker_new (t->client, t->layout, &t->strategy,
                                     ks_role_maker_worker_index (t->role),
                                     ks_role_maker_worker_num (t->role), t->model, &server_step,
                                     error))
             == NULL)
    return FALSE;
  ps_auth_say_worker_security (ks_role_maker_worker_index (t->role), t->settings.unencrypted);
  /* the servers learn this worker is alive while it computes, and it that they are */
  ps_client_heartbeat_start (t->client, t->timeout_ms);
  /* workers that resume need the servers at the same checkpoint (servers that start from
   * [transpiler] model_dir under fresh workers are incremental training) */
  if (t->resumed_step >= 0 && server_step != t->resumed_step)
    return ps_failed (error, "init_worker: the servers loaded the checkpoint of step %"
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
    return ps_failed (error, "transpiler: stop_worker before init_worker");
  return ps_worker_stop (t->worker, error);
}

/* ---- the server ---- */


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
    return ps_failed (error, "transpiler: init_server on a worker (workers call init_worker)");
  if (model_dir == NULL && *t->settings.model_dir != '\0')
    model_dir = t->settings.model_dir;
  params = ks_model_parameters (t->model);
  /* the blocks start from this process's own initialisation: the same seeds as the
   * workers' give the same values */
  if ((t->table = ps_dense_table_new (ks_model_device (t->model), t->layout, index, params,
                                      t->inner_ops, t->inner, error))
      == NULL)
    return FALSE;
  if (t->strategy.mode == PS_MODE_ASYNC && t->strategy.staleness_lr)
    t->table->base_lr = t->base_lr;
  if (model_dir == NULL)
    return TRUE;
  g_autofree char *path = ps_job_resolve (model_dir, error);
  if (path == NULL)
    return FALSE;
  PsJobIdentity id;
  gboolean ok = ps_job_identity_read (path, &id, error)
                && ps_shard_load (t->table, path, &id, &t->loaded_step, error);
  ps_job_identity_clear (&id);
  if (!ok)
    {
      g_prefix_error (error, "init_server: ");
      return FALSE;
    }
  g_message ("server %d: loaded its blocks from %s (step %" G_GINT64_FORMAT ")", index, path,
             t->loaded_step);
  return TRUE;
}

static gboolean
transpiler_run_server_cancellable (void *p, GCancellable *cancellable, GError **error)
{
  Transpiler *t = p;
  PsServerConfig c;

  if (t->table == NULL)
    return ps_failed (error, "transpiler: run_server before init_server");
  ps_server_config_init (&c, t->role, &t->settings, t->timeout_ms);
  c.mode = t->strategy.mode;
  c.max_update_norm = t->strategy.max_update_norm;
  c.fingerprint = t->layout->fingerprint;
  c.step = t->loaded_step;
  c.table = t->table;
  c.save = save_shard;
  c.save_data = t;
  c.cancellable = cancellable;
  gboolean ok = ps_server_run (&c, error);
  /* served: the table goes now, while the compute it lives on surely exists */
  g_clear_pointer (&t->table, ps_dense_table_free);
  return ok;
}

static gboolean
transpiler_run_server (void *p, GError **error)
{
  return transpiler_run_server_cancellable (p, NULL, error);
}

/* ---- the distributed optimizer: the core's base with this mode's exchange ---- */

static gboolean
mode_bind (void *p, KsModel *model, GArray *pairs, GError **error)
{
  Transpiler *t = p;
  if (ks_model_parameters (model) == NULL)
    return ps_failed (error, "transpiler: the model is not initialised");
  if (pairs->len != ks_arena_count (ks_model_parameters (model)))
    return ps_failed (error, "transpiler: every parameter must be trained (the servers hold all "
                   "of them); no_grad and parameter lists are not supported");
  t->model = model;
  ps_layout_free (t->layout);
  t->layout = ps_layout_new (ks_model_parameters (model), ks_role_maker_server_num (t->role),
                             t->settings.block_floats);
  return TRUE;
}

/* GEO trains locally and pushes after the update; the other modes push the gradients
 * and leave the update to the servers */
static gboolean
mode_exchange (void *p, KsModel *model, const KsParamGrad **pairs, gsize *n_pairs,
               gboolean *update, GError **error)
{
  Transpiler *t = p;
  if (t->worker == NULL)
    return ps_failed (error, "transpiler: a training step before init_worker");
  if (t->strategy.mode == PS_MODE_GEO)
    return TRUE;
  *update = FALSE;
  return ps_worker_step (t->worker, error);
}

static gboolean
mode_after_update (void *p, KsModel *model, GError **error)
{
  Transpiler *t = p;
  return t->strategy.mode != PS_MODE_GEO || ps_worker_step (t->worker, error);
}

static const KsDistModeOps mode_ops = {
  .size = sizeof (KsDistModeOps),
  .bind = mode_bind,
  .exchange = mode_exchange,
  .after_update = mode_after_update,
};

/* [strategy], and what its mode cannot honour: the plan's check (check_strategy) and
 * distributed_optimizer's. */
static gboolean
read_strategy (const KsConfig *config, PsStrategy *out, GError **error)
{
  if (!ps_strategy_read (config, out, error))
    return FALSE;
  if (out->mode != PS_MODE_GEO && ks_config_get_double (config, "optim", "clip_norm") > 0)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "[optim] clip_norm with [strategy] mode = %s: each server would clip its "
                   "own blocks by their own norm, not the model's; remove clip_norm (or use "
                   "mode = geo, where workers update locally)", ps_mode_name (out->mode));
      return FALSE;
    }
  return TRUE;
}

static gboolean
transpiler_distributed_optimizer (void *p, const KsOptimizerOps *inner_ops, void *inner,
                                  const KsConfig *strategy, const KsOptimizerOps **out_ops,
                                  void **out, GError **error)
{
  Transpiler *t = p;

  if (t->role == NULL)
    return ps_failed (error, "transpiler: call init with the role maker before distributed_optimizer");
  if (!read_strategy (strategy, &t->strategy, error))
    return FALSE;
  t->timeout_ms = (int) (ks_config_get_double (strategy, "comm", "timeout") * 1000);
  ps_settings_read_job (&t->settings, strategy);
  t->inner_ops = inner_ops;
  t->base_lr = ks_config_get_double (strategy, "optim", "lr");
  t->inner = inner;
  ks_dist_optimizer_new (&mode_ops, t, inner_ops, inner, out_ops, out);
  return TRUE;
}

/* ---- checkpoints ---- */

static gboolean
save_servers (void *data, const char *dir, gint64 step, GError **error)
{
  return ps_worker_save (data, dir, step, error);
}

static gboolean
transpiler_save_check_point (void *p, KsModel *model, KsOptimizer *optimizer, const char *dir,
                             const KsTrainStatus *status, GHashTable *metadata, guint keep,
                             GError **error)
{
  Transpiler *t = p;
  if (t->worker == NULL)
    return ps_failed (error, "transpiler: save_check_point before init_worker");
  return ps_worker_flush (t->worker, error)
         && ps_job_save_check_point (t->role, dir, status, metadata, keep, save_servers,
                                     t->worker, error);
}

static gboolean
transpiler_load_check_point (void *p, KsModel *model, KsOptimizer *optimizer, const char *dir,
                             KsTrainStatus *status, GHashTable **metadata, GError **error)
{
  Transpiler *t = p;
  return ps_job_load_check_point (t->role, dir, status, metadata, &t->resumed_step, error);
}

static gboolean
transpiler_check_strategy (const KsConfig *config, GError **error)
{
  static const char *const used[] = { "strategy.mode", "strategy.a_sync", "strategy.k_steps",
                                       "strategy.send_queue_size",
                                       "strategy.max_merge_var_num",
                                       "strategy.max_update_norm",
                                       "strategy.staleness_lr", NULL };
  PsStrategy strategy;
  return read_strategy (config, &strategy, error)
         && ks_config_check_used (config, "strategy", used, "[job] mode = transpiler", error);
}

static const KsAlgorithmOps transpiler_ops = {
  .size = sizeof (KsAlgorithmOps),
  .create = transpiler_create,
  .destroy = transpiler_destroy,
  .init = transpiler_init,
  .init_worker = transpiler_init_worker,
  .init_server = transpiler_init_server,
  .run_server = transpiler_run_server,
  .run_server_cancellable = transpiler_run_server_cancellable,
  .stop_worker = transpiler_stop_worker,
  .distributed_optimizer = transpiler_distributed_optimizer,
  .save_check_point = transpiler_save_check_point,
  .load_check_point = transpiler_load_check_point,
  .check_strategy = transpiler_check_strategy,
  .traits = KS_ALGORITHM_SERVERS | KS_ALGORITHM_SERVER_CHECKPOINTS,
};

/* The name; a test builds a copy under another (tests/local.mk) that the core must judge
 * by its traits as it does this one. */
#ifndef KS_TRANSPILER_NAME
#define KS_TRANSPILER_NAME "transpiler"
#endif

static const KsImplDesc transpiler_impls[] = {
  { KS_KIND_ALGORITHM, KS_TRANSPILER_NAME, &transpiler_ops, NULL,
    "Parameter servers: dense tables on the servers; sync, half_async, async or geo" },
};


static const KsPluginDesc transpiler_plugin = {
  .abi_major = KS_ABI_MAJOR,
  .abi_minor = KS_ABI_MINOR,
  .name = KS_TRANSPILER_NAME,
  .version = PACKAGE_VERSION,
  .description = "The transpiler algorithm: parameter-server training over ZeroMQ",
  .impls = transpiler_impls,
  .n_impls = G_N_ELEMENTS (transpiler_impls),
  .settings = ps_settings,
  .n_settings = PS_N_SETTINGS,
};

KS_PLUGIN_DEFINE (transpiler_plugin)
