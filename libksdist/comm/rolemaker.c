/* The role maker as the core calls it. A plugin says who this process is; the
 * collectives run over the communicator the caller hands in, unless the plugin brings
 * its own. */
#include "ks-private.h"

#include <string.h>

struct KsRoleMaker {
  KsInstance instance;
  KsComm *all;     /* not owned */
  KsComm *workers; /* owned when it is a sub-group of `all` */
};

#define OPS(r) KS_INSTANCE_OPS (&(r)->instance, KsRoleMakerOps)
#define CTX(r) ((r)->instance.ctx)
#define HAS(r, field) KS_OPS_HAS (OPS (r), KsRoleMakerOps, field)

KsRoleMaker *
ks_role_maker_new (KsRegistry *registry, const KsConfig *config, const char *name, GError **error)
{
  KsRoleMaker *role = (KsRoleMaker *) ks_instance_new (registry, config, KS_KIND_ROLE_MAKER, name,
                                                       sizeof (KsRoleMaker), error);
  if (role != NULL && !OPS (role)->generate_role (CTX (role), error))
    {
      g_prefix_error (error, "role maker %s: ", ks_role_maker_name (role));
      ks_role_maker_free (role);
      return NULL;
    }
  return role;
}

void
ks_role_maker_free (KsRoleMaker *role)
{
  if (role == NULL)
    return;
  if (role->workers != role->all)
    ks_comm_free (role->workers);
  ks_instance_free ((KsInstance *) role);
}

const char *
ks_role_maker_name (const KsRoleMaker *role)
{
  return role->instance.impl->name;
}

gboolean
ks_role_maker_is_worker (const KsRoleMaker *role)
{
  return OPS (role)->is_worker (CTX (role));
}

gboolean
ks_role_maker_is_server (const KsRoleMaker *role)
{
  return OPS (role)->is_server (CTX (role));
}

gboolean
ks_role_maker_is_first_worker (const KsRoleMaker *role)
{
  return OPS (role)->is_first_worker (CTX (role));
}

int
ks_role_maker_worker_num (const KsRoleMaker *role)
{
  return OPS (role)->worker_num (CTX (role));
}

int
ks_role_maker_worker_index (const KsRoleMaker *role)
{
  return OPS (role)->worker_index (CTX (role));
}

int
ks_role_maker_server_num (const KsRoleMaker *role)
{
  return OPS (role)->server_num (CTX (role));
}

int
ks_role_maker_server_index (const KsRoleMaker *role)
{
  return OPS (role)->server_index (CTX (role));
}

const char *const *
ks_role_maker_trainer_endpoints (const KsRoleMaker *role)
{
  return OPS (role)->get_trainer_endpoints (CTX (role));
}

const char *const *
ks_role_maker_pserver_endpoints (const KsRoleMaker *role)
{
  return OPS (role)->get_pserver_endpoints (CTX (role));
}

char *
ks_role_maker_to_string (const KsRoleMaker *role)
{
  return OPS (role)->to_string (CTX (role));
}

int
ks_role_maker_global_rank (const KsRoleMaker *role)
{
  return ks_role_maker_is_worker (role)
             ? ks_role_maker_worker_index (role)
             : ks_role_maker_worker_num (role) + ks_role_maker_server_index (role);
}

char **
ks_role_maker_split_files (const KsRoleMaker *role, const char *const *files, GError **error)
{
  int n = ks_role_maker_worker_num (role), me = ks_role_maker_worker_index (role);
  guint len = files != NULL ? g_strv_length ((char **) files) : 0;
  guint block = len / (guint) n, extra = len % (guint) n;
  guint begin = (guint) me * block + MIN ((guint) me, extra);
  guint count = block + ((guint) me < extra ? 1 : 0);
  char **mine;

  if (!ks_role_maker_is_worker (role))
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "split_files gives workers their files, and this process is server %d",
                   ks_role_maker_server_index (role));
      return NULL;
    }
  mine = g_new0 (char *, count + 1);
  for (guint i = 0; i < count; i++)
    mine[i] = g_strdup (files[begin + i]);
  return mine;
}

gboolean
ks_role_maker_set_comm (KsRoleMaker *role, KsComm *all, GError **error)
{
  int workers = ks_role_maker_worker_num (role);
  int total = workers + ks_role_maker_server_num (role);

  if (ks_comm_size (all) != total || ks_comm_rank (all) != ks_role_maker_global_rank (role))
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "role maker %s: this process is rank %d of %d (%d workers, %d servers), but "
                   "the communicator says rank %d of %d",
                   ks_role_maker_name (role), ks_role_maker_global_rank (role), total, workers,
                   total - workers, ks_comm_rank (all), ks_comm_size (all));
      return FALSE;
    }
  role->all = all;
  if (workers == total)
    role->workers = all;
  else if (ks_role_maker_is_worker (role))
    {
      g_autofree int *ranks = g_new (int, workers);
      for (int i = 0; i < workers; i++)
        ranks[i] = i;
      if ((role->workers = ks_comm_subgroup (all, ranks, workers, error)) == NULL)
        return FALSE;
    }
  return TRUE;
}

KsComm *
ks_role_maker_worker_comm (const KsRoleMaker *role)
{
  return role->workers;
}

/* Collectives need a communicator: the plugin's own, or the one of set_comm. */
static gboolean
need_comm (KsRoleMaker *role, gboolean workers, const char *what, GError **error)
{
  if (workers && !ks_role_maker_is_worker (role))
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "role maker %s: %s is for workers, and this process is server %d",
                   ks_role_maker_name (role), what, ks_role_maker_server_index (role));
      return FALSE;
    }
  if (role->all == NULL)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "role maker %s: %s needs a communicator; call ks_role_maker_set_comm first",
                   ks_role_maker_name (role), what);
      return FALSE;
    }
  return TRUE;
}

gboolean
ks_role_maker_all_gather (KsRoleMaker *role, gint64 value, gint64 *out, GError **error)
{
  if (HAS (role, all_gather))
    return OPS (role)->all_gather (CTX (role), value, out, error);
  return need_comm (role, FALSE, "all_gather", error)
         && ks_comm_allgather (role->all, &value, out, 1, KS_DTYPE_INT64, error);
}

gboolean
ks_role_maker_all_reduce_worker (KsRoleMaker *role, const double *in, double *out, gsize count,
                                 KsReduceOp op, GError **error)
{
  if (HAS (role, all_reduce_worker))
    return OPS (role)->all_reduce_worker (CTX (role), in, out, count, op, error);
  if (op != KS_REDUCE_SUM && op != KS_REDUCE_MIN && op != KS_REDUCE_MAX)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "role maker %s: all_reduce_worker takes sum, min or max, not %s",
                   ks_role_maker_name (role), ks_reduce_op_name (op));
      return FALSE;
    }
  if (!need_comm (role, TRUE, "all_reduce_worker", error))
    return FALSE;
  if (out != in)
    memcpy (out, in, count * sizeof *out);
  return ks_comm_allreduce (role->workers, out, count, KS_DTYPE_FLOAT64, op, error);
}

gboolean
ks_role_maker_barrier_worker (KsRoleMaker *role, GError **error)
{
  if (HAS (role, barrier_worker))
    return OPS (role)->barrier_worker (CTX (role), error);
  return need_comm (role, TRUE, "barrier_worker", error) && ks_comm_barrier (role->workers, error);
}

gboolean
ks_role_maker_barrier_all (KsRoleMaker *role, GError **error)
{
  if (HAS (role, barrier_all))
    return OPS (role)->barrier_all (CTX (role), error);
  return need_comm (role, FALSE, "barrier_all", error) && ks_comm_barrier (role->all, error);
}
