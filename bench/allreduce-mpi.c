/* The Open MPI reference for bench/run-allreduce.sh: MPI_Allreduce of float32 sums, 4 KiB
 * to 64 MiB by 4, timed as bench/bench-allreduce.cc times raw Gloo (two warm-up calls, a
 * barrier, then 5 to 200 calls); on one host Open MPI moves them through its shared-
 * memory transport. Built by the script with mpicc when Open MPI's headers are there:
 *   mpicc -O2 bench/allreduce-mpi.c -o allreduce-mpi && mpirun -n 2 ./allreduce-mpi */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int
iterations (size_t bytes)
{
  size_t n = (size_t) (256 << 20) / bytes;
  return n < 5 ? 5 : n > 200 ? 200 : (int) n;
}

int
main (int argc, char **argv)
{
  int rank, n;
  MPI_Init (&argc, &argv);
  MPI_Comm_rank (MPI_COMM_WORLD, &rank);
  MPI_Comm_size (MPI_COMM_WORLD, &n);
  if (rank == 0)
    printf ("{\"what\": \"allreduce\", \"comm\": \"open mpi\", \"ranks\": %d, \"results\": [", n);
  for (size_t bytes = 4096; bytes <= (64u << 20); bytes *= 4)
    {
      int count = (int) (bytes / sizeof (float)), iters = iterations (bytes);
      float *buf = calloc (count, sizeof (float));
      for (int i = 0; i < 2; i++)
        MPI_Allreduce (MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      MPI_Barrier (MPI_COMM_WORLD);
      double start = MPI_Wtime ();
      for (int i = 0; i < iters; i++)
        MPI_Allreduce (MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t = (MPI_Wtime () - start) / iters;
      if (rank == 0)
        printf ("%s\n  {\"bytes\": %zu, \"time_us\": %.2f, \"busbw\": %.4f}",
                bytes == 4096 ? "" : ",", bytes, t * 1e6, bytes / t / 1e9 * 2.0 * (n - 1) / n);
      free (buf);
    }
  if (rank == 0)
    printf ("\n]}\n");
  MPI_Finalize ();
  return 0;
}
