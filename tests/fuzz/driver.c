/* The bounded mutation run of a fuzz target (fuzz.h), for `make check`: every file of the
 * corpus directory (argument 1) as it is, then KS_FUZZ_RUNS (default 3000) inputs made
 * from them by a seeded random mutator (bit flips, random bytes, insertions, deletions,
 * repeats, splices of two inputs, interesting integers), and prints TAP. A crash or a
 * sanitizer report ends the program, which the TAP driver reports. Not coverage-guided:
 * build the target with libFuzzer for that (see the README's Tests). */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const guint32 interesting[] = { 0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff,
                                       0x80000000u, 0xffffffffu };

static void
insert_bytes (GByteArray *b, guint at, const guint8 *bytes, guint n)
{
  guint len = b->len;
  g_byte_array_set_size (b, len + n);
  memmove (b->data + at + n, b->data + at, len - at);
  memcpy (b->data + at, bytes, n);
}

static void
mutate (GRand *rng, GByteArray *b, GPtrArray *corpus)
{
  int steps = g_rand_int_range (rng, 1, 9);
  for (int i = 0; i < steps; i++)
    {
      guint len = b->len, at = len ? g_rand_int_range (rng, 0, (gint32) len) : 0;
      guint span = g_rand_int_range (rng, 1, 65); /* drawn once: MIN evaluates twice */
      switch (g_rand_int_range (rng, 0, 7))
        {
        case 0: /* flip a bit */
          if (len)
            b->data[at] ^= (guint8) (1u << g_rand_int_range (rng, 0, 8));
          break;
        case 1: /* a random byte */
          if (len)
            b->data[at] = (guint8) g_rand_int_range (rng, 0, 256);
          break;
        case 2: /* insert random bytes */
          {
            guint8 ins[16];
            int n = g_rand_int_range (rng, 1, 17);
            for (int k = 0; k < n; k++)
              ins[k] = (guint8) g_rand_int_range (rng, 0, 256);
            insert_bytes (b, at, ins, n);
            break;
          }
        case 3: /* delete a range */
          if (len)
            g_byte_array_remove_range (b, at, MIN (len - at, span));
          break;
        case 4: /* repeat a range */
          if (len && len < (1u << 20))
            {
              guint n = MIN (len - at, span);
              g_autofree guint8 *copy = g_memdup2 (b->data + at, n);
              insert_bytes (b, at, copy, n);
            }
          break;
        case 5: /* splice in part of another input */
          {
            GByteArray *o = g_ptr_array_index (corpus, g_rand_int_range (rng, 0, (gint32) corpus->len));
            if (o->len)
              {
                guint from = g_rand_int_range (rng, 0, (gint32) o->len);
                guint n = MIN (o->len - from, span * 4);
                if (o == b)
                  break;
                insert_bytes (b, at, o->data + from, n);
              }
            break;
          }
        default: /* an interesting 32-bit integer, either byte order */
          if (len >= 4)
            {
              guint32 v = interesting[g_rand_int_range (rng, 0, G_N_ELEMENTS (interesting))];
              if (g_rand_boolean (rng))
                v = GUINT32_SWAP_LE_BE (v);
              memcpy (b->data + MIN (at, len - 4), &v, 4);
            }
          break;
        }
    }
}

int
main (int argc, char **argv)
{
  const char *runs_env = g_getenv ("KS_FUZZ_RUNS");
  int runs = runs_env != NULL ? atoi (runs_env) : 3000;
  g_autoptr (GPtrArray) corpus = g_ptr_array_new_with_free_func ((GDestroyNotify) g_byte_array_unref);
  g_autoptr (GRand) rng = g_rand_new_with_seed (20261123);
  g_autoptr (GDir) dir = NULL;
  const char *name;

  LLVMFuzzerInitialize (&argc, &argv);
  if (argc < 2 || (dir = g_dir_open (argv[1], 0, NULL)) == NULL)
    {
      printf ("1..0 # SKIP no corpus directory given\n");
      return 0;
    }
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = g_build_filename (argv[1], name, NULL);
      gchar *bytes;
      gsize len;
      if (g_file_get_contents (path, &bytes, &len, NULL))
        g_ptr_array_add (corpus, g_byte_array_new_take ((guint8 *) bytes, len));
    }
  if (corpus->len == 0)
    g_ptr_array_add (corpus, g_byte_array_new ());
  printf ("1..1\n");
  for (guint i = 0; i < corpus->len; i++)
    {
      GByteArray *b = g_ptr_array_index (corpus, i);
      LLVMFuzzerTestOneInput (b->data, b->len);
    }
  for (int r = 0; r < runs; r++)
    {
      GByteArray *seed = g_ptr_array_index (corpus, g_rand_int_range (rng, 0, (gint32) corpus->len));
      g_autoptr (GByteArray) b = g_byte_array_sized_new (seed->len + 64);
      g_byte_array_append (b, seed->data, seed->len);
      mutate (rng, b, corpus);
      LLVMFuzzerTestOneInput (b->data, b->len);
    }
  g_autofree char *me = g_path_get_basename (argv[0]);
  printf ("ok 1 - %s: %u corpus inputs and %d mutated ones, no crash\n", me, corpus->len, runs);
  return 0;
}
