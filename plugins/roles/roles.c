/* Role makers: who this process is, from what the scheduler or the user said.
 *
 *  paddlecloud  PaddleCloud's variables (parameter-server and collective forms)
 *  user         explicit values from the [roles] group, checked like OpenKS's
 *               UserDefinedRoleMaker
 *  env          the ranks mpirun, srun and torchrun set; under srun with [roles]
 *               servers = S, the last S tasks are parameter servers
 *
 * The collectives are the core's (rolemaker.c), over the job's communicator. */
#include <config.h>
#include <ksdist/ksdist.h>

#include <netdb.h>
#include <string.h>
#include <sys/socket.h>

#include "../../libksdist/comm/slurm.h"

#define ROLE_ERROR(error, ...) g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE, __VA_ARGS__)

typedef struct {
  const KsSettings *settings;
  const char *kind; /* the implementation's name */
  KsRole role;
  int worker_num, worker_index, server_num, server_index;
  char **trainers, **servers; /* endpoints, NULL-terminated */
  const char *source;         /* where the identity came from, for to_string */
} Roles;

static void
roles_destroy (void *p)
{
  Roles *r = p;
  g_strfreev (r->trainers);
  g_strfreev (r->servers);
  g_free (r);
}

/* "a:1, b:2" -> {"a:1", "b:2"}; empty entries are an error naming `what`. */
static char **
split_endpoints (const char *text, const char *what, GError **error)
{
  g_auto (GStrv) parts = g_strsplit (text, ",", -1);
  GPtrArray *out = g_ptr_array_new_with_free_func (g_free);

  for (int i = 0; parts[i] != NULL; i++)
    {
      char *e = g_strstrip (parts[i]);
      const char *colon = strrchr (e, ':');
      if (*e == '\0' || colon == NULL || colon == e || colon[1] == '\0'
          || strspn (colon + 1, "0123456789") != strlen (colon + 1))
        {
          ROLE_ERROR (error, "%s: entry %d '%s' is not host:port (in '%s')", what, i + 1, e, text);
          g_ptr_array_free (out, TRUE);
          return NULL;
        }
      for (guint j = 0; j < out->len; j++)
        if (strcmp (g_ptr_array_index (out, j), e) == 0)
          {
            ROLE_ERROR (error, "%s: endpoint '%s' is listed twice; each process needs its own",
                        what, e);
            g_ptr_array_free (out, TRUE);
            return NULL;
          }
      g_ptr_array_add (out, g_strdup (e));
    }
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (out, FALSE);
}

static const char *
need_env (const char *name, GError **error)
{
  const char *v = g_getenv (name);
  if (v == NULL || *v == '\0')
    ROLE_ERROR (error, "environment variable %s is not set; the launcher (ksdist launch, or "
                       "PaddleCloud) sets it",
                name);
  return v != NULL && *v != '\0' ? v : NULL;
}

/* An integer in [lo, hi] from `text`, or an error naming `what`. */
static gboolean
parse_int (const char *text, const char *what, gint64 lo, gint64 hi, int *out, GError **error)
{
  gint64 v;
  if (!g_ascii_string_to_signed (text, 10, lo, hi, &v, NULL))
    {
      ROLE_ERROR (error, "%s = '%s': expected a whole number in [%" G_GINT64_FORMAT ", %"
                         G_GINT64_FORMAT "]",
                  what, text, lo, hi);
      return FALSE;
    }
  *out = (int) v;
  return TRUE;
}

static gboolean
env_int (const char *name, gint64 lo, gint64 hi, int *out, GError **error)
{
  const char *v = need_env (name, error);
  return v != NULL && parse_int (v, name, lo, hi, out, error);
}

static int
count (char **v)
{
  return v != NULL ? (int) g_strv_length (v) : 0;
}

/* ---- paddlecloud ---- */

static gboolean
paddlecloud_ps (Roles *r, const char *role, GError **error)
{
  const char *list = need_env ("PADDLE_PSERVERS_IP_PORT_LIST", error);
  const char *trainers = g_getenv ("PADDLE_TRAINER_ENDPOINTS");

  if (list == NULL
      || (r->servers = split_endpoints (list, "PADDLE_PSERVERS_IP_PORT_LIST", error)) == NULL
      || !env_int ("PADDLE_TRAINERS_NUM", 1, 1 << 20, &r->worker_num, error))
    return FALSE;
  if (trainers != NULL && *trainers != '\0'
      && (r->trainers = split_endpoints (trainers, "PADDLE_TRAINER_ENDPOINTS", error)) == NULL)
    return FALSE;
  r->server_num = count (r->servers);
  if (strcmp (role, "TRAINER") == 0)
    {
      r->role = KS_ROLE_WORKER;
      return env_int ("PADDLE_TRAINER_ID", 0, r->worker_num - 1, &r->worker_index, error);
    }
  if (strcmp (role, "PSERVER") == 0)
    {
      const char *ip = need_env ("POD_IP", error), *port;
      if (ip == NULL || (port = need_env ("PADDLE_PORT", error)) == NULL)
        return FALSE;
      g_autofree char *me = g_strdup_printf ("%s:%s", ip, port);
      r->role = KS_ROLE_SERVER;
      for (int i = 0; i < r->server_num; i++)
        if (strcmp (r->servers[i], me) == 0)
          {
            r->server_index = i;
            return TRUE;
          }
      ROLE_ERROR (error, "POD_IP:PADDLE_PORT = %s is not in PADDLE_PSERVERS_IP_PORT_LIST (%s)",
                  me, list);
      return FALSE;
    }
  ROLE_ERROR (error, "TRAINING_ROLE = '%s': expected TRAINER or PSERVER", role);
  return FALSE;
}

static gboolean
paddlecloud_collective (Roles *r, GError **error)
{
  const char *list = need_env ("PADDLE_TRAINER_ENDPOINTS", error);
  const char *id = g_getenv ("PADDLE_TRAINER_ID"), *current = g_getenv ("PADDLE_CURRENT_ENDPOINT");

  if (list == NULL
      || (r->trainers = split_endpoints (list, "PADDLE_TRAINER_ENDPOINTS", error)) == NULL)
    return FALSE;
  r->role = KS_ROLE_WORKER;
  r->worker_num = count (r->trainers);
  if (id != NULL && *id != '\0'
      && !parse_int (id, "PADDLE_TRAINER_ID", 0, r->worker_num - 1, &r->worker_index, error))
    return FALSE;
  if (current != NULL && *current != '\0' && strcmp (current, r->trainers[r->worker_index]) != 0)
    {
      ROLE_ERROR (error, "PADDLE_CURRENT_ENDPOINT = %s, but entry %d of PADDLE_TRAINER_ENDPOINTS "
                         "(PADDLE_TRAINER_ID) is %s",
                  current, r->worker_index, r->trainers[r->worker_index]);
      return FALSE;
    }
  return TRUE;
}

/* [roles] servers places servers among srun's tasks only: set elsewhere it would be
 * ignored (a setting is never silently ignored). */
static gboolean
no_servers_key (Roles *r, GError **error)
{
  gint64 servers = ks_settings_get_int (r->settings, "servers");
  if (servers == 0)
    return TRUE;
  ROLE_ERROR (error, "[roles] servers = %" G_GINT64_FORMAT " places servers among srun's "
                     "tasks, but this process's roles come from the %s: remove it (ksdist "
                     "launch --servers S starts servers), or run under srun", servers,
              r->source);
  return FALSE;
}

static gboolean
paddlecloud_generate (void *p, GError **error)
{
  Roles *r = p;
  const char *role = g_getenv ("TRAINING_ROLE");
  r->source = "PaddleCloud environment";
  if (!no_servers_key (r, error))
    return FALSE;
  return role != NULL && *role != '\0' ? paddlecloud_ps (r, role, error)
                                       : paddlecloud_collective (r, error);
}

static int
paddlecloud_query (char **reason)
{
  if (g_getenv ("TRAINING_ROLE") != NULL || g_getenv ("PADDLE_TRAINER_ENDPOINTS") != NULL)
    return 100;
  *reason = g_strdup ("neither TRAINING_ROLE nor PADDLE_TRAINER_ENDPOINTS is set");
  return -1;
}

/* ---- user ---- */

static gboolean
user_generate (void *p, GError **error)
{
  Roles *r = p;
  r->source = "[roles] settings";
  if (!no_servers_key (r, error))
    return FALSE;
  const char *role = ks_settings_get_string (r->settings, "role");
  const char *servers = ks_settings_get_string (r->settings, "server_endpoints");
  const char *workers = ks_settings_get_string (r->settings, "worker_endpoints");
  gint64 id = ks_settings_get_int (r->settings, "current_id");

  r->role = strcmp (role, "server") == 0 ? KS_ROLE_SERVER : KS_ROLE_WORKER;
  r->worker_num = (int) ks_settings_get_int (r->settings, "worker_num");
  if (*servers != '\0'
      && (r->servers = split_endpoints (servers, "[roles] server_endpoints", error)) == NULL)
    return FALSE;
  if (*workers != '\0')
    {
      if ((r->trainers = split_endpoints (workers, "[roles] worker_endpoints", error)) == NULL)
        return FALSE;
      if (count (r->trainers) != r->worker_num)
        {
          ROLE_ERROR (error, "[roles] worker_endpoints lists %d endpoints but worker_num = %d",
                      count (r->trainers), r->worker_num);
          return FALSE;
        }
    }
  r->server_num = count (r->servers);
  if (r->worker_num <= 0)
    {
      ROLE_ERROR (error, "[roles] worker_num = %d: there must be at least one worker",
                  r->worker_num);
      return FALSE;
    }
  if (r->role == KS_ROLE_SERVER)
    {
      if (r->server_num == 0)
        {
          ROLE_ERROR (error, "[roles] role = server needs server_endpoints (a non-empty list "
                             "of unique host:port)");
          return FALSE;
        }
      if (id >= r->server_num)
        {
          ROLE_ERROR (error, "[roles] current_id = %" G_GINT64_FORMAT " but there are %d "
                             "server_endpoints",
                      id, r->server_num);
          return FALSE;
        }
      r->server_index = (int) id;
    }
  else
    {
      if (id >= r->worker_num)
        {
          ROLE_ERROR (error, "[roles] current_id = %" G_GINT64_FORMAT " but worker_num = %d", id,
                      r->worker_num);
          return FALSE;
        }
      r->worker_index = (int) id;
    }
  return TRUE;
}

/* ---- env: mpirun, srun, torchrun ---- */

static const char *const rank_vars[][2] = {
  { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
  { "PMI_RANK", "PMI_SIZE" },
  { "SLURM_PROCID", "SLURM_NTASKS" },
  { "RANK", "WORLD_SIZE" },
};

/* `host` as a number: ZeroMQ binds only to addresses and interfaces, not names. */
static char *
numeric_host (const char *host, GError **error)
{
  struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *found;
  char text[NI_MAXHOST];
  int err = getaddrinfo (host, NULL, &hints, &found);
  if (err == 0)
    {
      err = getnameinfo (found->ai_addr, found->ai_addrlen, text, sizeof text, NULL, 0,
                         NI_NUMERICHOST);
      freeaddrinfo (found);
    }
  if (err != 0)
    {
      ROLE_ERROR (error, "[roles] servers: Slurm's node %s has no address here (%s): every "
                         "node's name must resolve on every node",
                  host, gai_strerror (err));
      return NULL;
    }
  return g_strdup (text);
}

/* Under srun with [roles] servers = S: the last S tasks serve (so task 0, worker 0, is
 * global rank 0 on the first node, where the job's store is), server i on its task's
 * node at the store's port + 1 + i. */
static gboolean
env_slurm_servers (Roles *r, int servers, GError **error)
{
  int tasks = r->worker_num, port;
  g_auto (GStrv) hosts = NULL;
  const char *me = g_getenv ("SLURMD_NODENAME");

  if (g_strcmp0 (r->source, "SLURM_PROCID") != 0)
    {
      ROLE_ERROR (error, "[roles] servers = %d places servers among srun's tasks, but this "
                         "process was started by %s's launcher: start parameter servers with "
                         "`ksdist launch --servers`, or run under srun",
                  servers, r->source);
      return FALSE;
    }
  if (servers >= KS_SLURM_PORTS_PER_JOB)
    {
      ROLE_ERROR (error, "[roles] servers = %d: under srun a job has %d ports for its "
                         "servers (after its store's), so at most %d servers",
                  servers, KS_SLURM_PORTS_PER_JOB - 1, KS_SLURM_PORTS_PER_JOB - 1);
      return FALSE;
    }
  if (servers >= tasks)
    {
      ROLE_ERROR (error, "[roles] servers = %d, but srun started %d tasks (SLURM_NTASKS): "
                         "at least one must be a worker",
                  servers, tasks);
      return FALSE;
    }
  if ((hosts = ks_slurm_task_hosts (error)) == NULL
      || !ks_slurm_port (g_getenv ("SLURM_JOB_ID") ? g_getenv ("SLURM_JOB_ID") : "", &port,
                         error))
    return FALSE;
  if (me != NULL && strcmp (me, hosts[r->worker_index]) != 0)
    {
      ROLE_ERROR (error, "[roles] servers: task %d runs on %s, not on %s as srun's block "
                         "distribution would place it: use the default distribution",
                  r->worker_index, me, hosts[r->worker_index]);
      return FALSE;
    }
  r->servers = g_new0 (char *, servers + 1);
  for (int i = 0; i < servers; i++)
    {
      g_autofree char *address = numeric_host (hosts[tasks - servers + i], error);
      if (address == NULL)
        return FALSE;
      r->servers[i] = g_strdup_printf (strchr (address, ':') ? "[%s]:%d" : "%s:%d", address,
                                       port + 1 + i);
    }
  r->server_num = servers;
  r->worker_num = tasks - servers;
  if (r->worker_index >= r->worker_num)
    {
      r->role = KS_ROLE_SERVER;
      r->server_index = r->worker_index - r->worker_num;
    }
  return TRUE;
}

static gboolean
env_generate (void *p, GError **error)
{
  Roles *r = p;
  for (guint i = 0; i < G_N_ELEMENTS (rank_vars); i++)
    {
      if (g_getenv (rank_vars[i][0]) == NULL)
        continue;
      r->source = rank_vars[i][0];
      r->role = KS_ROLE_WORKER;
      if (!env_int (rank_vars[i][1], 1, 1 << 20, &r->worker_num, error)
          || !env_int (rank_vars[i][0], 0, r->worker_num - 1, &r->worker_index, error))
        return FALSE;
      const char *addr = g_getenv ("MASTER_ADDR"), *port = g_getenv ("MASTER_PORT");
      if (addr != NULL && port != NULL)
        {
          g_autofree char *ep = g_strdup_printf ("%s:%s", addr, port);
          r->trainers = split_endpoints (ep, "MASTER_ADDR:MASTER_PORT", error);
          if (r->trainers == NULL)
            return FALSE;
        }
      int servers = (int) ks_settings_get_int (r->settings, "servers");
      return servers == 0 || env_slurm_servers (r, servers, error);
    }
  ROLE_ERROR (error, "no rank in the environment: none of OMPI_COMM_WORLD_RANK (mpirun), "
                     "PMI_RANK, SLURM_PROCID (srun) or RANK (torchrun) is set");
  return FALSE;
}

static int
env_query (char **reason)
{
  for (guint i = 0; i < G_N_ELEMENTS (rank_vars); i++)
    if (g_getenv (rank_vars[i][0]) != NULL)
      return 50;
  *reason = g_strdup ("no OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID or RANK in the environment");
  return -1;
}

/* ---- common ---- */

static Roles *
roles_new (const KsSettings *settings, const char *kind)
{
  Roles *r = g_new0 (Roles, 1);
  r->settings = settings;
  r->kind = kind;
  return r;
}

static void *
paddlecloud_create (const KsSettings *s, GError **error)
{
  return roles_new (s, "paddlecloud");
}

static void *
user_create (const KsSettings *s, GError **error)
{
  return roles_new (s, "user");
}

static void *
env_create (const KsSettings *s, GError **error)
{
  return roles_new (s, "env");
}

static gboolean
is_worker (void *p)
{
  return ((Roles *) p)->role == KS_ROLE_WORKER;
}

static gboolean
is_server (void *p)
{
  return ((Roles *) p)->role == KS_ROLE_SERVER;
}

static gboolean
is_first_worker (void *p)
{
  return is_worker (p) && ((Roles *) p)->worker_index == 0;
}

static int
worker_num (void *p)
{
  return ((Roles *) p)->worker_num;
}

static int
worker_index (void *p)
{
  return ((Roles *) p)->worker_index;
}

static int
server_num (void *p)
{
  return ((Roles *) p)->server_num;
}

static int
server_index (void *p)
{
  return ((Roles *) p)->server_index;
}

static const char *const empty[] = { NULL };

static const char *const *
trainer_endpoints (void *p)
{
  Roles *r = p;
  return r->trainers != NULL ? (const char *const *) r->trainers : empty;
}

static const char *const *
pserver_endpoints (void *p)
{
  Roles *r = p;
  return r->servers != NULL ? (const char *const *) r->servers : empty;
}

static char *
to_string (void *p)
{
  Roles *r = p;
  g_autofree char *t = r->trainers ? g_strjoinv (",", r->trainers) : g_strdup ("");
  g_autofree char *s = r->servers ? g_strjoinv (",", r->servers) : g_strdup ("");
  return g_strdup_printf ("role_maker=%s (%s) role=%s index=%d workers=%d servers=%d "
                          "worker_endpoints=[%s] server_endpoints=[%s]",
                          r->kind, r->source ? r->source : "not generated",
                          r->role == KS_ROLE_WORKER ? "worker" : "server",
                          r->role == KS_ROLE_WORKER ? r->worker_index : r->server_index,
                          r->worker_num, r->server_num, t, s);
}

#define ROLE_OPS(prefix)                                                                  \
  {                                                                                       \
    .size = sizeof (KsRoleMakerOps), .create = prefix##_create, .destroy = roles_destroy, \
    .generate_role = prefix##_generate, .is_worker = is_worker, .is_server = is_server,   \
    .is_first_worker = is_first_worker, .worker_num = worker_num,                         \
    .worker_index = worker_index, .server_num = server_num, .server_index = server_index, \
    .get_trainer_endpoints = trainer_endpoints, .get_pserver_endpoints = pserver_endpoints, \
    .to_string = to_string,                                                               \
  }

static const KsRoleMakerOps paddlecloud_ops = ROLE_OPS (paddlecloud);
static const KsRoleMakerOps user_ops = ROLE_OPS (user);
static const KsRoleMakerOps env_ops = ROLE_OPS (env);

static const KsImplDesc roles_impls[] = {
  { KS_KIND_ROLE_MAKER, "paddlecloud", &paddlecloud_ops, paddlecloud_query,
    "PaddleCloud's variables (TRAINING_ROLE, PADDLE_TRAINER_ID, PADDLE_TRAINER_ENDPOINTS, ...)" },
  { KS_KIND_ROLE_MAKER, "env", &env_ops, env_query,
    "Ranks set by mpirun, srun or torchrun (OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID, RANK)" },
  { KS_KIND_ROLE_MAKER, "user", &user_ops, NULL,
    "Explicit values from [roles]: role, current_id, worker_num, endpoints" },
};

static const KsKeyDesc roles_settings[] = {
  { NULL, "role", KS_VALUE_CHOICE, "worker", 1, 0, "worker|server", "This process's role (user)" },
  { NULL, "current_id", KS_VALUE_INT, "0", 0, 1 << 20, NULL,
    "This process's index among its role's processes (user)" },
  { NULL, "worker_num", KS_VALUE_INT, "1", -(1 << 20), 1 << 20, NULL,
    "Number of workers, at least 1 (user)" },
  { NULL, "server_endpoints", KS_VALUE_STRING, "", 0, 0, NULL,
    "Servers' host:port, comma-separated and unique (user)" },
  { NULL, "worker_endpoints", KS_VALUE_STRING, "", 0, 0, NULL,
    "Workers' host:port for collective jobs, one per worker (user)" },
  { NULL, "servers", KS_VALUE_INT, "0", 0, 1 << 20, NULL,
    "Under srun: the last N tasks are parameter servers, each on its node at the job's "
    "store port + 1 + its index (env)" },
};

static const KsPluginDesc roles_plugin = {
  .abi_major = KS_ABI_MAJOR,
  .abi_minor = KS_ABI_MINOR,
  .name = "roles",
  .version = PACKAGE_VERSION,
  .description = "Role makers: paddlecloud, env (mpirun/srun/torchrun), user",
  .impls = roles_impls,
  .n_impls = G_N_ELEMENTS (roles_impls),
  .settings = roles_settings,
  .n_settings = G_N_ELEMENTS (roles_settings),
};

KS_PLUGIN_DEFINE (roles_plugin)
