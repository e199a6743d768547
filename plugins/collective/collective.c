/* The collective algorithm (OpenKS's GPU/heterogeneous one, on any device): every
 * worker holds the whole model and trains on its share of each batch.
 *
 *   grad_allreduce  gradients averaged over the workers before every update
 *   local_sgd       k updates on local gradients, then the parameters averaged
 *
 * Parameters are broadcast from worker 0 when the optimizer is set up, so every worker
 * starts from the same point. Averages go in buckets of bucket_kb, one allreduce each,
 * so a large model never needs one huge message. With overlap (the default), a bucket
 * of gradients is averaged on a communication thread as soon as backward has finished
 * it, while backward goes on (ks_grad_average, average.h); the update waits for the last. Through shared
 * memory the gradients live in memory every worker maps, so averaging copies nothing in
 * or out. There are no servers in this mode: init_server, run_server, init_worker and
 * stop_worker only warn. */
#include <config.h>
#include <ksdist/ksdist.h>

#include "checkpoint.h"

#include <string.h>

typedef struct {
  KsRoleMaker *role;
  gboolean local_sgd, overlap;
  gint64 k;
  gsize bucket_floats;
} Collective;

static void *
collective_create (const KsSettings *s, GError **error)
{
  Collective *c = g_new0 (Collective, 1);
  c->local_sgd = strcmp (ks_settings_get_string (s, "strategy"), "local_sgd") == 0;
  c->k = ks_settings_get_int (s, "local_sgd_k");
  c->overlap = ks_settings_get_bool (s, "overlap");
  c->bucket_floats = MAX (1, ks_settings_get_int (s, "bucket_kb") * 1024 / sizeof (float));
  return c;
}

static void
collective_destroy (void *p)
{
  g_free (p);
}

static gboolean
collective_init (void *p, KsRoleMaker *role, GError **error)
{
  Collective *c = p;
  if (role != NULL && ks_role_maker_is_server (role))
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "this process is server %d, but [job] mode = collective has no servers "
                   "(parameter servers are [job] mode = transpiler)",
                   ks_role_maker_server_index (role));
      return FALSE;
    }
  if (role == NULL || (ks_role_maker_worker_num (role) > 1 && ks_role_maker_worker_comm (role) == NULL))
    {
      g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED,
                   "collective: init needs a role maker with its communicator set "
                   "(ks_role_maker_set_comm)");
      return FALSE;
    }
  if (ks_role_maker_server_num (role) > 0)
    g_warning ("collective mode uses no parameter servers, but the role maker lists %d; they "
               "will sit idle",
               ks_role_maker_server_num (role));
  c->role = role;
  return TRUE;
}

static gboolean
nothing_to_do (const char *what)
{
  g_warning ("collective mode: %s does nothing here (it is for parameter-server modes)", what);
  return TRUE;
}

static gboolean
collective_init_worker (void *p, GError **error)
{
  return nothing_to_do ("init_worker");
}

static gboolean
collective_stop_worker (void *p, GError **error)
{
  return nothing_to_do ("stop_worker");
}

static gboolean
collective_init_server (void *p, const char *model_dir, GError **error)
{
  return nothing_to_do ("init_server");
}

static gboolean
collective_run_server (void *p, GError **error)
{
  return nothing_to_do ("run_server");
}

/* ---- the distributed optimizer: the core's base with this mode's exchange ---- */

typedef struct {
  Collective *algorithm;
  gint64 updates;
  KsModel *model;
  KsGradAverage *overlap; /* grad_allreduce with overlap, once backward has made the pairs */
  gboolean shared;  /* the gradients were offered shared memory */
} Mode;

static KsComm *
workers (Mode *d)
{
  return ks_role_maker_worker_comm (d->algorithm->role);
}

/* Averages an arena over the workers, a bucket at a time. */
static gboolean
average (Mode *d, KsArena *arena, GError **error)
{
  float *data = ks_arena_data (arena);
  gsize n = ks_arena_numel (arena), bucket = d->algorithm->bucket_floats;

  if (workers (d) == NULL || ks_comm_size (workers (d)) == 1)
    return TRUE;
  for (gsize off = 0; off < n; off += bucket)
    if (!ks_comm_allreduce (workers (d), data + off, MIN (bucket, n - off), KS_DTYPE_FLOAT32,
                            KS_REDUCE_AVG, error))
      return FALSE;
  return TRUE;
}

static void
mode_destroy (void *p)
{
  Mode *d = p;
  if (d->overlap != NULL)
    ks_model_set_grad_ready (d->model, NULL, NULL); /* the model outlives its optimizer */
  ks_grad_average_free (d->overlap);
  g_free (d);
}

/* Where the communicator has memory every worker maps (shm), the gradients move there
 * before backward takes views of them: then averaging a bucket reads every worker's
 * gradients where backward wrote them and writes the average back, with no copies in and
 * out of staging. */
static gboolean
share_gradients (KsComm *comm, KsModel *model, GError **error)
{
  KsArena *grads = ks_model_gradients (model);
  g_autoptr (GError) local = NULL;
  float *memory = ks_comm_alloc_shared (comm, ks_arena_numel (grads) * sizeof (float), &local);

  if (memory != NULL)
    return ks_arena_move (grads, memory, error);
  if (g_error_matches (local, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_SUPPORTED))
    return TRUE;
  g_propagate_prefixed_error (error, g_steal_pointer (&local),
                              "collective: sharing the gradients' memory: ");
  return FALSE;
}

static gboolean
mode_prepare (void *p, KsModel *model, GError **error)
{
  Mode *d = p;
  KsComm *comm = workers (d);
  return comm == NULL || ks_comm_size (comm) == 1 || d->algorithm->local_sgd || d->shared
         || (d->shared = TRUE, share_gradients (comm, model, error));
}

static gboolean
mode_bind (void *p, KsModel *model, GArray *pairs, GError **error)
{
  Mode *d = p;
  KsComm *comm = workers (d);
  KsArena *weights = ks_model_parameters (model);

  /* everyone starts from worker 0's parameters */
  if (comm != NULL && ks_comm_size (comm) > 1
      && !ks_comm_broadcast (comm, ks_arena_data (weights), ks_arena_numel (weights),
                             KS_DTYPE_FLOAT32, 0, error))
    {
      g_prefix_error (error, "collective: broadcasting the initial parameters: ");
      return FALSE;
    }
  if (comm != NULL && ks_comm_size (comm) > 1 && !d->algorithm->local_sgd && d->algorithm->overlap
      && d->overlap == NULL)
    {
      d->model = model;
      d->overlap = ks_grad_average_new (model, comm, (const KsParamGrad *) pairs->data, pairs->len,
                                   d->algorithm->bucket_floats);
      ks_model_set_grad_ready (model, ks_grad_average_ready, d->overlap);
    }
  return TRUE;
}

/* grad_allreduce: the gradients averaged before the update */
static gboolean
mode_exchange (void *p, KsModel *model, const KsParamGrad **pairs, gsize *n_pairs,
               gboolean *update, GError **error)
{
  Mode *d = p;
  if (d->algorithm->local_sgd)
    return TRUE;
  return d->overlap != NULL ? ks_grad_average_finish (d->overlap, error)
                            : average (d, ks_model_gradients (model), error);
}

/* local_sgd: the parameters averaged after every k-th update */
static gboolean
mode_after_update (void *p, KsModel *model, GError **error)
{
  Mode *d = p;
  Collective *c = d->algorithm;
  return !c->local_sgd || ++d->updates % c->k != 0
         || average (d, ks_model_parameters (model), error);
}

static const KsDistModeOps mode_ops = {
  .size = sizeof (KsDistModeOps),
  .destroy = mode_destroy,
  .prepare = mode_prepare,
  .bind = mode_bind,
  .exchange = mode_exchange,
  .after_update = mode_after_update,
};

static gboolean
collective_distributed_optimizer (void *p, const KsOptimizerOps *inner_ops, void *inner,
                                  const KsConfig *strategy, const KsOptimizerOps **out_ops,
                                  void **out, GError **error)
{
  Collective *c = p;
  Mode *d;

  if (c->role == NULL)
    {
      g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED,
                   "collective: call init with the role maker before distributed_optimizer");
      return FALSE;
    }
  d = g_new0 (Mode, 1);
  d->algorithm = c;
  ks_dist_optimizer_new (&mode_ops, d, inner_ops, inner, out_ops, out);
  return TRUE;
}

static gboolean
collective_save_check_point (void *p, KsModel *model, KsOptimizer *optimizer, const char *dir,
                             const KsTrainStatus *status, GHashTable *metadata, guint keep,
                             GError **error)
{
  Collective *c = p;
  if (c->local_sgd && status->step % c->k != 0 && ks_role_maker_is_first_worker (c->role))
    g_warning ("collective: the checkpoint of step %" G_GINT64_FORMAT " holds worker 0's "
               "parameters, not averaged since step %" G_GINT64_FORMAT " (local_sgd_k = %"
               G_GINT64_FORMAT "): a run resumed from it will not repeat this one exactly; "
               "checkpoint at multiples of local_sgd_k for that",
               status->step, status->step - status->step % c->k, c->k);
  return ks_collective_save_check_point (c->role, model, optimizer, dir, status, metadata, keep,
                                         error);
}

static gboolean
collective_load_check_point (void *p, KsModel *model, KsOptimizer *optimizer, const char *dir,
                             KsTrainStatus *status, GHashTable **metadata, GError **error)
{
  Collective *c = p;
  return ks_collective_load_check_point (c->role, model, optimizer, dir, status, metadata,
                                         error);
}

/* The plan's check: the collective mode reads no [strategy] key (its settings are the
 * [collective] group's). A parameter-server config run collective, as the one-process
 * reference of its job, legitimately carries them: a warning names what is ignored. */
static gboolean
collective_check_strategy (const KsConfig *config, GError **error)
{
  static const char *const none[] = { NULL };
  g_autoptr (GError) unused = NULL;
  if (!ks_config_check_used (config, "strategy", none,
                             "[job] mode = collective (its settings are in [collective])",
                             &unused))
    g_warning ("%s (ignored)", unused->message);
  return TRUE;
}

static const KsAlgorithmOps collective_ops = {
  .size = sizeof (KsAlgorithmOps),
  .create = collective_create,
  .destroy = collective_destroy,
  .init = collective_init,
  .init_worker = collective_init_worker,
  .init_server = collective_init_server,
  .run_server = collective_run_server,
  .stop_worker = collective_stop_worker,
  .distributed_optimizer = collective_distributed_optimizer,
  .save_check_point = collective_save_check_point,
  .load_check_point = collective_load_check_point,
  .check_strategy = collective_check_strategy,
  .traits = 0, /* no servers: worker 0 writes each checkpoint whole */
};

/* The name; a test builds a copy under another (tests/local.mk) that the core must judge
 * by its traits as it does this one. */
#ifndef KS_COLLECTIVE_NAME
#define KS_COLLECTIVE_NAME "collective"
#endif

static const KsImplDesc collective_impls[] = {
  { KS_KIND_ALGORITHM, KS_COLLECTIVE_NAME, &collective_ops, NULL,
    "Data parallel: gradient allreduce or LocalSGD over the workers" },
};

static const KsKeyDesc collective_settings[] = {
  { NULL, "strategy", KS_VALUE_CHOICE, "grad_allreduce", 1, 0, "grad_allreduce|local_sgd",
    "Average gradients every step, or parameters every local_sgd_k steps" },
  { NULL, "local_sgd_k", KS_VALUE_INT, "4", 1, 1e9, NULL, "Local steps between averages (local_sgd)" },
  { NULL, "bucket_kb", KS_VALUE_INT, "4096", 1, 1 << 21, NULL,
    "Size of one allreduce when averaging, in KiB" },
  { NULL, "overlap", KS_VALUE_BOOL, "true", 0, 0, NULL,
    "Average each bucket of gradients as soon as backward has made it, on a thread, while "
    "backward goes on (grad_allreduce)" },
};

static const KsPluginDesc collective_plugin = {
  .abi_major = KS_ABI_MAJOR,
  .abi_minor = KS_ABI_MINOR,
  .name = KS_COLLECTIVE_NAME,
  .version = PACKAGE_VERSION,
  .description = "The collective algorithm: data-parallel training over a communicator",
  .impls = collective_impls,
  .n_impls = G_N_ELEMENTS (collective_impls),
  .settings = collective_settings,
  .n_settings = G_N_ELEMENTS (collective_settings),
};

KS_PLUGIN_DEFINE (collective_plugin)
