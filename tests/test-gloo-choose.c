/* What `[gloo] algorithm = auto` takes (plugins/gloo/choose.c): the ring below
 * auto_small_bytes; above it halving-doubling on one host, ring_chunked across hosts
 * (the busbw measured for each is in choose.c and doc/benchmarks.md). */
#include "../plugins/gloo/choose.h"

#include <glib.h>

#define MiB ((gsize) 1 << 20)

static void
test_auto (void)
{
  static const struct {
    gint64 small;
    gboolean hosts;
    gsize bytes;
    const char *want;
  } cases[] = {
    { 1 << 20, FALSE, 4096, "ring" },
    { 1 << 20, TRUE, 4096, "ring" },
    { 1 << 20, FALSE, MiB - 1, "ring" },
    { 1 << 20, TRUE, MiB - 1, "ring" },
    { 1 << 20, FALSE, MiB, "halving_doubling" },
    { 1 << 20, TRUE, MiB, "ring_chunked" },
    { 1 << 20, FALSE, 64 * MiB, "halving_doubling" },
    { 1 << 20, TRUE, 64 * MiB, "ring_chunked" },
    { 0, TRUE, 1, "ring_chunked" },          /* auto_small_bytes = 0: never the ring */
    { 0, FALSE, 1, "halving_doubling" },
    { (gint64) 1e12, TRUE, 64 * MiB, "ring" }, /* above every message: always the ring */
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *got = ks_gloo_choose ("auto", cases[i].small, cases[i].hosts, cases[i].bytes);
      if (g_strcmp0 (got, cases[i].want) != 0)
        g_error ("auto, auto_small_bytes %" G_GINT64_FORMAT ", %s, %" G_GSIZE_FORMAT
                 " bytes: took %s, want %s", cases[i].small,
                 cases[i].hosts ? "several hosts" : "one host", cases[i].bytes, got, cases[i].want);
    }
}

/* A named algorithm is taken as it is, whatever the size and hosts. */
static void
test_named (void)
{
  const char *names[] = { "ring", "ring_chunked", "halving_doubling", "bcube", "unbound" };
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    for (int hosts = 0; hosts < 2; hosts++)
      for (gsize bytes = 4; bytes <= 64 * MiB; bytes *= 64)
        g_assert_cmpstr (ks_gloo_choose (names[i], 1 << 20, hosts, bytes), ==, names[i]);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/gloo/choose/auto", test_auto);
  g_test_add_func ("/gloo/choose/named", test_named);
  return g_test_run ();
}
