/* The processes of a job: the role maker says who this process is; with more than
 * one worker the ranks meet at the store (a TCP store is served by ksdist launch, or
 * else by rank 0 at [comm] store_address), connect a communicator, and the [job] mode's
 * algorithm wraps the optimizer (collective: gradients averaged every step). Worker r of
 * n trains on rows [r·b, (r+1)·b) of each step's global batch of n·b rows, so the run
 * follows a one-process run with batch n·b.
 *
 * A pipelined run has no algorithm: its workers are dp replicas of a pipeline of p stages
 * (worker w is stage w mod p of replica w / p), and the replicas play the part of the
 * workers above. */
#include "trainer-private.h"
#include "../comm/slurm.h"

#include <string.h>

/* The environment (set by ksdist launch) first, then the config. */
static const char *
setting (const KsConfig *c, const char *env, const char *group, const char *key)
{
  const char *v = g_getenv (env);
  return v != NULL && *v != '\0' ? v : ks_config_get_string (c, group, key);
}

static gboolean
on_device (KsTrainer *t)
{
  return ks_trainer_on_device (t->registry, t->config);
}

/* The name of the loaded communicator of highest priority with traits `want` among
 * `mask`, or NULL. */
static const char *
comm_with (KsTrainer *t, guint32 mask, guint32 want)
{
  const KsImplDesc *impl = ks_registry_choose (t->registry, KS_KIND_COMM, mask, want);
  return impl != NULL ? impl->name : NULL;
}

/* The ranks on this host and in the world as the launcher says: LOCAL_WORLD_SIZE and
 * WORLD_SIZE (ksdist launch, torchrun), else Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE and
 * OMPI_COMM_WORLD_SIZE (mpirun), else Slurm's tasks on this node and SLURM_NTASKS (srun);
 * FALSE where none says. */
static gboolean
launcher_sizes (int *local, int *world)
{
  const char *l = g_getenv ("LOCAL_WORLD_SIZE"), *w = g_getenv ("WORLD_SIZE");
  if (l == NULL || w == NULL)
    l = g_getenv ("OMPI_COMM_WORLD_LOCAL_SIZE"), w = g_getenv ("OMPI_COMM_WORLD_SIZE");
  if (l == NULL || w == NULL)
    return ks_slurm_sizes (local, world);
  *local = atoi (l), *world = atoi (w);
  return TRUE;
}

/* [comm] backend = auto: with tensors in device memory (data parallel), a communicator
 * that reads it (NCCL); with every rank on this host as the launcher says
 * (launcher_sizes equal), whatever the mode, one of one host (shared memory); else the
 * available one of highest priority of any host (Gloo), or what auto selects. */
static const char *
comm_backend (KsTrainer *t, int total, const char **why)
{
  const KsConfig *c = t->config;
  const char *backend = ks_config_get_string (c, "comm", "backend"), *chosen;
  int local, world;
  gboolean known = launcher_sizes (&local, &world);

  *why = "[comm] backend";
  if (strcmp (backend, "auto") != 0)
    return backend;
  /* device buffers: moved without host copies (a pipeline stages its transfers through
   * host memory: those go by the rules below) */
  if (on_device (t) && !t->pipelined)
    {
      chosen = comm_with (t, KS_COMM_DEVICE_MEMORY, KS_COMM_DEVICE_MEMORY);
      *why = chosen != NULL ? "auto: the compute backend keeps device memory"
                            : "auto: the compute backend keeps device memory, and no loaded "
                              "communicator reads it";
      return chosen != NULL ? chosen : backend;
    }
  const guint32 reach = KS_COMM_ONE_HOST | KS_COMM_DEVICE_MEMORY;
  if (known && local == world && world == total)
    {
      *why = "auto: every rank on this host";
      if ((chosen = comm_with (t, reach, KS_COMM_ONE_HOST)) != NULL)
        return chosen;
      *why = "auto: every rank on this host, and no communicator of one host is loaded";
    }
  else
    *why = "auto: ranks on several hosts, or not known to share one";
  chosen = comm_with (t, reach, 0);
  return chosen != NULL ? chosen : backend;
}

/* A communicator of one host and host memory for a hierarchical one's inner level. */
static const char *
local_comm (KsTrainer *t)
{
  return comm_with (t, KS_COMM_ONE_HOST | KS_COMM_DEVICE_MEMORY, KS_COMM_ONE_HOST);
}

/* [comm] hierarchical: with auto, when the backend is auto, the launcher says this host
 * has several of the job's ranks but not all, and a communicator of one host is loaded. */
static gboolean
hierarchical (KsTrainer *t, int total, const char **why)
{
  const KsConfig *c = t->config;
  const char *want = ks_config_get_string (c, "comm", "hierarchical");
  int local, world;
  gboolean known = launcher_sizes (&local, &world);

  if (strcmp (want, "auto") != 0)
    {
      *why = "[comm] hierarchical";
      return strcmp (want, "true") == 0;
    }
  *why = "auto: several hosts with several ranks each";
  if (on_device (t) && !t->pipelined)
    return FALSE; /* one host's shared memory cannot take device buffers: those go all the way */
  return strcmp (ks_config_get_string (c, "comm", "backend"), "auto") == 0 && known
         && local > 1 && local < world && world == total && local_comm (t) != NULL;
}

/* The world's communicator made hierarchical: shared memory inside this host (told
 * apart by its name and the launcher's node rank), the world's backend between hosts. */
static gboolean
make_hierarchical (KsTrainer *t, GError **error)
{
  const char *node = g_getenv ("GROUP_RANK");
  if (node == NULL)
    node = g_getenv ("SLURM_NODEID");
  g_autofree char *host = g_strdup_printf ("%s node %s", g_get_host_name (),
                                           node != NULL ? node : "?");
  const char *local = local_comm (t);
  if (local == NULL)
    return g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                        "[comm] hierarchical = true needs a communicator of one host (shared "
                        "memory) for the ranks of each host, and no loaded plugin provides "
                        "one: see `ksdist plugins`, or set [comm] hierarchical = false"),
           FALSE;
  KsComm *comm = ks_comm_hierarchical (t->registry, t->config, t->comm, host, local, error);
  if (comm == NULL)
    return FALSE;
  t->comm = comm;
  return TRUE;
}

/* A communicator's `hostname` setting (Gloo's: 127.0.0.1 by default) reaches no other
 * node: where neither it nor `iface` is set, each communicator that declares one listens
 * on `host`, where the peers route. */
static void
listen_where_peers_route (KsTrainer *t, const char *host)
{
  g_autoptr (GPtrArray) comms = ks_registry_list (t->registry, KS_KIND_COMM);
  for (guint i = 0; i < comms->len; i++)
    {
      const KsPluginDesc *d = ((const KsImplInfo *) g_ptr_array_index (comms, i))->plugin->desc;
      gboolean listens = FALSE;
      for (gsize k = 0; k < d->n_settings; k++)
        listens |= strcmp (d->settings[k].key, "hostname") == 0;
      if (!listens || ks_config_is_set (t->config, d->name, "hostname")
          || ks_config_is_set (t->config, d->name, "iface"))
        continue;
      g_autofree char *set = g_strdup_printf ("%s.hostname=%s", d->name, host);
      ks_config_set_override (t->config, set, NULL);
    }
}

/* A signal handler may not cancel a GCancellable (it takes a lock): this thread does,
 * a few milliseconds after the stop signal, until the trainer is cleared. */
static gpointer
watch_stop (gpointer data)
{
  KsTrainer *t = data;
  while (!g_atomic_int_get (&t->stop_watch_done))
    {
      if (ks_trainer_stop_signal () != 0)
        {
          g_cancellable_cancel (t->stop);
          break;
        }
      g_usleep (20000);
    }
  return NULL;
}

/* A server's blocking calls (the mode's run_server) return once asked to stop. */
static void
cancel_on_stop (KsTrainer *t)
{
  t->stop = g_cancellable_new ();
  t->stop_watch = g_thread_new ("ks-stop-watch", watch_stop, t);
  ks_algorithm_set_cancellable (t->algorithm, t->stop);
}

/* Whether the job has parameter servers: its workers then start and stop them. */
static gboolean
has_servers (const KsTrainer *t)
{
  return t->role != NULL && t->algorithm != NULL && ks_role_maker_server_num (t->role) > 0;
}

gboolean
ks_trainer_mode_begin (KsTrainer *t, GError **error)
{
  return !has_servers (t) || ks_algorithm_init_worker (t->algorithm, error);
}

/* With servers, the evaluation sees their final values (async: nothing queued); a mode
 * whose evaluation reads the servers' sparse rows stops this worker after it. */
gboolean
ks_trainer_mode_flush (KsTrainer *t, GError **error)
{
  return !has_servers (t) || t->worker_stopped
         || ks_algorithm_flush_worker (t->algorithm, &t->worker_stopped, error);
}

gboolean
ks_trainer_mode_end (KsTrainer *t, GError **error)
{
  return !has_servers (t) || t->worker_stopped
         || ks_algorithm_stop_worker (t->algorithm, error);
}

/* A server started by hand that no worker met (none started, another store or job
 * name, or workers that ended at once without the job's token) said only "rank 0 did
 * not join": what it waited for, where, and the likely causes come first. */
static void
server_not_met (KsTrainer *t, const char *store, const char *address, const char *job,
                int timeout_ms, GError **error)
{
  KsRoleMaker *r = t->role;
  int workers = ks_role_maker_worker_num (r), servers = ks_role_maker_server_num (r);
  if (!ks_role_maker_is_server (r) || error == NULL || *error == NULL)
    return;
  g_autofree char *cause = (*error)->message;
  (*error)->message = g_strdup_printf (
      "server %d of %d: waited [comm] timeout = %g s for the job's %d worker%s and %d "
      "server%s to meet at the %s store %s (job '%s'), and not all came (%s). Likely: the "
      "workers were not started, or not with this store's address and job name "
      "(KS_STORE_ADDRESS or [comm] store_address, KS_JOB or [job] name); or they ended at "
      "once because their KS_STORE_TOKEN is missing or not this server's (their logs say "
      "so). The workers are ranks 0 to %d, the servers follow",
      ks_role_maker_server_index (r), servers, timeout_ms / 1000.0, workers,
      workers == 1 ? "" : "s", servers, servers == 1 ? "" : "s", store,
      address != NULL && *address ? address : "(the launcher's)", job, cause, workers - 1);
}

gboolean
ks_trainer_dist_setup (KsTrainer *t, GError **error)
{
  const KsConfig *c = t->config;
  const char *address = setting (c, "KS_STORE_ADDRESS", "comm", "store_address");
  const char *job = setting (c, "KS_JOB", "job", "name");
  int timeout_ms = (int) (ks_config_get_double (c, "comm", "timeout") * 1000);
  const char *why = NULL, *hier_why = NULL;
  int total;

  const char *role_maker = ks_config_get_string (c, "job", "role_maker");
  g_autoptr (GPtrArray) role_makers = ks_registry_list (t->registry, KS_KIND_ROLE_MAKER);

  t->world = 1;
  if (strcmp (role_maker, "auto") == 0 && role_makers->len == 0)
    {
      /* no role maker plugin loaded: one process on its own */
      static const KsTrainWorld alone = { 1, 0 };
      return ks_trainer_check_world (t->registry, c, t->task, &alone, error);
    }
  if ((t->role = ks_role_maker_new (t->registry, c, role_maker, error)) == NULL)
    return FALSE;
  total = ks_role_maker_worker_num (t->role) + ks_role_maker_server_num (t->role);
  /* the plan's check of the world, as ksdist config and launch made it */
  KsTrainWorld world = { ks_role_maker_worker_num (t->role), ks_role_maker_server_num (t->role) };
  if (!ks_trainer_check_world (t->registry, c, t->task, &world, error))
    return FALSE;
  if (total == 1)
    return TRUE;
  /* ksdist launch hosts a TCP store and says where; without it, rank 0 serves it */
  const char *store = setting (c, "KS_STORE", "comm", "store"), *token = g_getenv ("KS_STORE_TOKEN");
  gboolean rank0 = ks_role_maker_global_rank (t->role) == 0;
  gboolean rank0_serves = ks_store_kind_is (store, KS_STORE_KIND_SERVED)
                          && g_getenv ("KS_STORE_ADDRESS") == NULL && rank0;
  g_autofree char *bound = NULL;
  g_auto (KsMeeting) meeting = { 0 };

  /* a server has no rows of the data: rank -1 */
  t->rank = ks_role_maker_is_worker (t->role) ? ks_role_maker_worker_index (t->role) : -1;
  t->world = ks_role_maker_worker_num (t->role);
  if (t->pipelined)
    {
      /* every stage of a replica sees the replica's rows */
      gint64 stages = ks_config_get_int (c, "pipeline", "stages");
      t->stage = t->rank % stages;
      t->rank /= stages;
      t->world /= stages;
    }
  if (*address == '\0')
    {
      /* started by torchrun, mpirun, a scheduler: their variables may say where */
      if (!ks_trainer_meeting (*job ? job : "default", rank0, &meeting, error))
        return FALSE;
      if (meeting.address == NULL)
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "a job of %d processes needs a place to meet: `ksdist launch` and "
                       "torchrun give one, as does mpirun on one host; elsewhere set [comm] "
                       "store_address to a directory every process can reach (or [comm] store "
                       "= tcp and the HOST:PORT of a store server, or MASTER_ADDR and "
                       "MASTER_PORT where rank 0 serves one), and [job] name to a name unique "
                       "to this run",
                       total);
          return FALSE;
        }
      store = meeting.store;
      address = meeting.address;
      job = meeting.job;
      rank0_serves = meeting.serve;
      token = g_getenv ("KS_STORE_TOKEN"); /* made for a Slurm step without one */
      if (meeting.host != NULL)
        listen_where_peers_route (t, meeting.host);
    }
  /* with servers, every process needs the token: checked before meeting, so that a worker
   * never reports only a peer that ended on it first */
  if (ks_role_maker_server_num (t->role) > 0)
    {
      g_autofree char *who = ks_role_maker_is_worker (t->role)
                                 ? g_strdup_printf ("worker %d",
                                                    ks_role_maker_worker_index (t->role))
                                 : g_strdup_printf ("server %d",
                                                    ks_role_maker_server_index (t->role));
      if (!ks_store_token_required (token, who, error))
        return FALSE;
    }
  const char *backend = comm_backend (t, total, &why); /* the plan checked it for cuda */
  if ((t->store = ks_store_new (t->registry, c, store, error)) == NULL
      || (rank0_serves
          && !ks_store_serve (t->store, meeting.listen ? meeting.listen : address, token,
                              &bound, error))
      || !ks_store_open (t->store, address, *job ? job : "default", token, error)
      || (t->comm = ks_comm_new (t->registry, c, backend, error)) == NULL)
    return FALSE;
  if (!ks_comm_connect (t->comm, t->store, ks_role_maker_global_rank (t->role), total,
                        timeout_ms, error))
    return server_not_met (t, store, address, *job ? job : "default", timeout_ms, error), FALSE;
  if ((hierarchical (t, total, &hier_why) && !make_hierarchical (t, error))
      || !ks_role_maker_set_comm (t->role, t->comm, error))
    return FALSE;
  if (strcmp (ks_comm_name (t->comm), "hierarchical") == 0)
    why = hier_why;
  t->comm_why = why;
  if (t->exec->connect != NULL)
    return t->exec->connect (t, error);
  if ((t->algorithm = ks_factory_instantiate (t->registry, c,
                                                 ks_config_get_string (c, "job", "mode"), error))
             == NULL
      || !ks_algorithm_init (t->algorithm, t->role, error))
    return FALSE;
  if (ks_role_maker_is_server (t->role))
    cancel_on_stop (t);
  return TRUE;
}

/* Wraps the optimizer with the algorithm's (before ks_optimizer_minimize). */
gboolean
ks_trainer_dist_wrap (KsTrainer *t, GError **error)
{
  KsOptimizer *wrapped;
  if (t->algorithm == NULL)
    return TRUE;
  if ((wrapped = ks_algorithm_distributed_optimizer (t->algorithm, t->optimizer, t->config,
                                                     error))
      == NULL)
    return FALSE;
  t->optimizer = wrapped; /* it owns the inner one now */
  return TRUE;
}

/* The mean of a value over the workers (the value itself in one process). */
gboolean
ks_trainer_dist_mean (KsTrainer *t, double *value, GError **error)
{
  KsComm *workers = t->role != NULL ? ks_role_maker_worker_comm (t->role) : NULL;
  return workers == NULL || t->pipelined /* the same on every stage and replica */
         || ks_comm_allreduce (workers, value, 1, KS_DTYPE_FLOAT64, KS_REDUCE_AVG, error);
}

void
ks_trainer_dist_clear (KsTrainer *t)
{
  if (t->stop_watch != NULL)
    {
      g_atomic_int_set (&t->stop_watch_done, 1);
      g_clear_pointer (&t->stop_watch, g_thread_join);
    }
  g_clear_object (&t->stop);
  ks_algorithm_free (t->algorithm);
  ks_role_maker_free (t->role);
  ks_comm_free (t->comm);
  ks_store_free (t->store);
}
