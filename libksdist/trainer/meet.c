/* Where the processes of a job meet when another launcher started them and [comm]
 * store_address is not set (ksdist launch always says where):
 * - torchrun with its agent's store (TORCHELASTIC_USE_AGENT_STORE=True, the default):
 *   PyTorch's TCPStore at MASTER_ADDR:MASTER_PORT, keys under ksdist/attempt_<restart>/
 *   so a restarted attempt never reads an earlier one's;
 * - RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT alone (a scheduler, torchrun with another
 *   rendezvous): rank 0 serves ksdist's TCP store there, for clients with KS_STORE_TOKEN;
 * - srun (SLURM_JOB_ID, SLURM_PROCID): task 0 serves ksdist's TCP store on the first node
 *   of the step's node list, at a port derived from the job id (slurm.c); the token is
 *   KS_STORE_TOKEN, else one made of the job id and the user id (it keeps jobs apart,
 *   it is no secret); on several nodes Gloo listens on this node's address toward the
 *   first one;
 * - mpirun with every rank on this host: a file store in a private directory named by
 *   mpirun's job id (PMIX_NAMESPACE). */
#include "trainer-private.h"
#include "../comm/slurm.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

gboolean
ks_trainer_meeting (const char *job, gboolean rank0, KsMeeting *m, GError **error)
{
  const char *addr = g_getenv ("MASTER_ADDR"), *port = g_getenv ("MASTER_PORT");
  const char *mpi_job = g_getenv ("PMIX_NAMESPACE");
  const char *local = g_getenv ("OMPI_COMM_WORLD_LOCAL_SIZE");
  const char *size = g_getenv ("OMPI_COMM_WORLD_SIZE");

  *m = (KsMeeting) { 0 };
  if (g_getenv ("RANK") != NULL && addr != NULL && port != NULL)
    {
      m->address = g_strdup_printf ("%s:%s", addr, port);
      if (g_strcmp0 (g_getenv ("TORCHELASTIC_USE_AGENT_STORE"), "True") == 0)
        {
          const char *restart = g_getenv ("TORCHELASTIC_RESTART_COUNT");
          m->store = g_strdup (ks_store_kind_name (KS_STORE_KIND_TORCH));
          m->job = g_strdup_printf ("ksdist/attempt_%s/%s", restart != NULL ? restart : "0", job);
          return TRUE;
        }
      m->store = g_strdup (ks_store_kind_name (KS_STORE_KIND_SERVED));
      m->job = g_strdup (job);
      m->serve = rank0;
      return TRUE;
    }
  g_autofree char *connect = NULL, *listen = NULL;
  int nodes;
  if (!ks_slurm_meeting (&connect, &listen, &nodes, error))
    return FALSE;
  if (connect != NULL)
    {
      const char *token = g_getenv ("KS_STORE_TOKEN");
      m->store = g_strdup (ks_store_kind_name (KS_STORE_KIND_SERVED));
      m->job = g_strdup (job);
      m->serve = rank0;
      m->listen = g_steal_pointer (&listen);
      if (token == NULL || *token == '\0')
        {
          /* the parameter servers' plugin reads it from the environment too */
          g_autofree char *made = ks_slurm_token ();
          g_setenv ("KS_STORE_TOKEN", made, TRUE);
        }
      if (nodes > 1)
        m->host = ks_comm_address_toward (connect);
      m->address = g_steal_pointer (&connect);
      return TRUE;
    }
  if (mpi_job != NULL && local != NULL && g_strcmp0 (local, size) == 0)
    {
      g_autofree char *name = g_strdup_printf ("ksdist-mpirun-%s", mpi_job);
      m->address = g_build_filename (g_get_tmp_dir (), name, NULL);
      GStatBuf st;
      if (g_mkdir (m->address, 0700) != 0 && errno != EEXIST)
        {
          g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
                       "cannot make the job's meeting directory %s: %s", m->address,
                       g_strerror (errno));
          ks_trainer_meeting_clear (m);
          return FALSE;
        }
      /* made by another user, or open to others: not a safe place to meet */
      if (g_lstat (m->address, &st) != 0 || !S_ISDIR (st.st_mode) || st.st_uid != getuid ()
          || (st.st_mode & 077) != 0)
        {
          g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_PERM,
                       "the job's meeting directory %s is not a directory of yours that only "
                       "you can use: remove it, or set [comm] store_address", m->address);
          ks_trainer_meeting_clear (m);
          return FALSE;
        }
      m->store = g_strdup (ks_store_kind_name (KS_STORE_KIND_DIRECTORY));
      m->job = g_strdup (job);
      return TRUE;
    }
  return TRUE; /* nowhere known: m->address stays NULL */
}

void
ks_trainer_meeting_clear (KsMeeting *m)
{
  g_free (m->store);
  g_free (m->address);
  g_free (m->job);
  g_free (m->listen);
  g_free (m->host);
  *m = (KsMeeting) { 0 };
}
