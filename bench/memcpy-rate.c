/* One thread's memcpy rate per size, the reference for the shared-memory allreduce's
 * busbw (bench/run-allreduce.sh): for each size of 4 KiB to 64 MiB (x4), the best of 5
 * timings of 200 MB of copies. Prints {"bytes": B, "gbs": G} rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
now (void)
{
  struct timespec t;
  clock_gettime (CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int
main (void)
{
  size_t most = (size_t) 64 << 20;
  char *a = malloc (most), *b = malloc (most);
  if (a == NULL || b == NULL)
    return 1;
  memset (a, 1, most);
  memset (b, 2, most);
  printf ("{\"results\": [");
  for (size_t size = 4096; size <= most; size *= 4)
    {
      size_t reps = (size_t) 200e6 / size + 1; /* 200 MB: about 20 ms at 10 GB/s */
      double best = 1e30;
      for (int round = 0; round < 5; round++)
        {
          double t0 = now ();
          for (size_t r = 0; r < reps; r++)
            {
              memcpy (b, a, size);
              __asm__ volatile ("" : : "r"(b) : "memory"); /* each copy is made */
            }
          double t = (now () - t0) / reps;
          best = t < best ? t : best;
        }
      printf ("%s{\"bytes\": %zu, \"gbs\": %.3f}", size == 4096 ? "" : ", ", size, size / best / 1e9);
    }
  printf ("]}\n");
  return 0;
}
