/* The CUDA device of a rank that names none ([cuda] device and [nccl] device = -1): its
 * place among the ranks of its host, as the launcher says (LOCAL_RANK: ksdist launch,
 * torchrun; OMPI_COMM_WORLD_LOCAL_RANK: mpirun; SLURM_LOCALID: srun), modulo the devices
 * (more ranks than GPUs share them), else 0. The compute and NCCL plugins both use it, so
 * a rank's kernels and its collectives are on one device. */
#ifndef KS_CUDA_LOCAL_DEVICE_H
#define KS_CUDA_LOCAL_DEVICE_H

#include <glib.h>
#include <stdlib.h>

static inline int
ks_cuda_local_device (int devices)
{
  static const char *const names[] = { "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                       "SLURM_LOCALID" };
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      const char *value = g_getenv (names[i]);
      gint64 local;
      if (value != NULL && g_ascii_string_to_signed (value, 10, 0, 1 << 20, &local, NULL))
        return devices > 0 ? (int) (local % devices) : 0;
    }
  return 0;
}

#endif
