/* ksdist launch --max-restarts N: what a restart needs and where it starts from.
 *
 * When a process of the job dies, the launcher stops the others (cmd-launch.c) and, up to
 * N times, starts the whole job again: `ksdist train` with `--set train.resume=true`, so
 * every worker resumes from the newest complete checkpoint in [train] checkpoint_dir (the
 * dead job's lock on the directory went with its processes: owner.c's flock). A job that
 * fails again before saving anything new restarts from the same checkpoint, so N bounds a
 * failure that repeats. On several nodes every node's launcher does this: its processes
 * fail with the lost node's, and the launchers meet again at node 0's store under the
 * restart's number (launch-rendezvous.c), so [train] checkpoint_dir must be one directory
 * all nodes see (a shared file system). A PROGRAM after -- is started again as it was, with torchrun's
 * TORCHELASTIC_RESTART_COUNT telling it which start this is; resuming is its own affair. */
#include "launch.h"

#include <ksdist/checkpoint.h>

#define MAX_RESTARTS 1000

gboolean
ks_launch_restart_check (const KsConfig *config, gboolean program, int max_restarts)
{
  if (max_restarts < 0 || max_restarts > MAX_RESTARTS)
    {
      ks_cli_error ("launch: --max-restarts %d: give 0 (no restart, the default) to %d",
                    max_restarts, MAX_RESTARTS);
      return FALSE;
    }
  if (max_restarts == 0)
    return TRUE;
  if (program)
    return TRUE;
  if (*ks_config_get_string (config, "train", "checkpoint_dir") == '\0')
    {
      ks_cli_error ("launch: --max-restarts %d needs [train] checkpoint_dir, where a restart "
                    "resumes from the newest checkpoint (without one every restart would "
                    "train from step 1): set it, e.g. --set train.checkpoint_dir=ckpt, with "
                    "train.checkpoint_every=STEPS",
                    max_restarts);
      return FALSE;
    }
  if (ks_config_get_int (config, "train", "checkpoint_every") == 0)
    g_printerr ("ksdist: launch: warning: [train] checkpoint_every = 0 saves only at the end, "
                "so a restart trains from step 1; set it (e.g. --set "
                "train.checkpoint_every=100) to restart from the last save\n");
  return TRUE;
}

char *
ks_launch_restart_origin (const KsConfig *config, gboolean program, int restart)
{
  const char *dir = ks_config_get_string (config, "train", "checkpoint_dir");
  g_autofree char *latest = NULL, *base = NULL;

  if (program)
    return g_strdup_printf ("of the same command (TORCHELASTIC_RESTART_COUNT=%d)", restart);
  if ((latest = ks_checkpoint_latest (dir)) == NULL)
    return g_strdup_printf ("from step 1 (no checkpoint in %s yet)", dir);
  base = g_path_get_basename (latest);
  return g_strdup_printf ("from %s in %s", base, dir);
}
