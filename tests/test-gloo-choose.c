/* What `[gloo] algorithm = auto` takes (plugins/gloo/choose.c): the ring below
 * auto_small_bytes, then halving-doubling on one host, ring_chunked across hosts; across
 * hosts with more than 2 ranks, halving-doubling already from auto_hosts_ring_bytes (the
 * busbw measured for each is in choose.c and doc/benchmarks.md). */
#include "../plugins/gloo/choose.h"

#include <glib.h>

#define KiB ((gsize) 1 << 10)
#define MiB ((gsize) 1 << 20)

static void
test_auto (void)
{
  static const struct {
    gint64 small, ring;
    gboolean hosts;
    int ranks;
    gsize bytes;
    const char *want;
  } cases[] = {
    /* one host: auto_small_bytes alone, whatever the ranks */
    { 1 << 20, 1 << 17, FALSE, 4, 4096, "ring" },
    { 1 << 20, 1 << 17, FALSE, 4, 256 * KiB, "ring" },
    { 1 << 20, 1 << 17, FALSE, 4, MiB - 1, "ring" },
    { 1 << 20, 1 << 17, FALSE, 4, MiB, "halving_doubling" },
    { 1 << 20, 1 << 17, FALSE, 2, 64 * MiB, "halving_doubling" },
    { 0, 1 << 17, FALSE, 4, 1, "halving_doubling" },         /* 0: never the ring */
    { (gint64) 1e12, 1 << 17, FALSE, 4, 64 * MiB, "ring" },  /* above every message */
    /* several hosts, more than 2 ranks: the ring, halving-doubling, ring_chunked */
    { 1 << 20, 1 << 17, TRUE, 4, 4096, "ring" },
    { 1 << 20, 1 << 17, TRUE, 4, 128 * KiB - 1, "ring" },
    { 1 << 20, 1 << 17, TRUE, 4, 128 * KiB, "halving_doubling" },
    { 1 << 20, 1 << 17, TRUE, 4, 256 * KiB, "halving_doubling" }, /* was the ring: 47% */
    { 1 << 20, 1 << 17, TRUE, 3, MiB - 1, "halving_doubling" },
    { 1 << 20, 1 << 17, TRUE, 4, MiB, "ring_chunked" },
    { 1 << 20, 1 << 17, TRUE, 8, 64 * MiB, "ring_chunked" },
    { 0, 1 << 17, TRUE, 4, 1, "ring_chunked" },               /* 0: never the ring */
    { 1 << 20, 0, TRUE, 4, 1, "halving_doubling" },
    { 1 << 20, (gint64) 1e12, TRUE, 4, 256 * KiB, "ring" },   /* no middle band */
    { (gint64) 1e12, (gint64) 1e12, TRUE, 4, 64 * MiB, "ring" },
    /* several hosts, 2 ranks: the ring up to auto_small_bytes */
    { 1 << 20, 1 << 17, TRUE, 2, 256 * KiB, "ring" },
    { 1 << 20, 1 << 17, TRUE, 2, MiB - 1, "ring" },
    { 1 << 20, 1 << 17, TRUE, 2, MiB, "ring_chunked" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      KsGlooAuto a = { cases[i].small, cases[i].ring, cases[i].hosts, cases[i].ranks };
      const char *got = ks_gloo_choose ("auto", &a, cases[i].bytes);
      if (g_strcmp0 (got, cases[i].want) != 0)
        g_error ("auto, auto_small_bytes %" G_GINT64_FORMAT ", auto_hosts_ring_bytes %" G_GINT64_FORMAT
                 ", %d ranks on %s, %" G_GSIZE_FORMAT " bytes: took %s, want %s", cases[i].small,
                 cases[i].ring, cases[i].ranks, cases[i].hosts ? "several hosts" : "one host",
                 cases[i].bytes, got, cases[i].want);
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
        {
          KsGlooAuto a = { 1 << 20, 1 << 17, hosts, 4 };
            g_assert_cmpstr (ks_gloo_choose (names[i], &a, bytes), ==, names[i]);
        }
}

/* The log line names each band with the key that sets it. */
static void
test_describe (void)
{
  KsGlooAuto hosts = { 1 << 20, 1 << 17, TRUE, 4 }, two = { 1 << 20, 1 << 17, TRUE, 2 },
             one = { 1 << 20, 1 << 17, FALSE, 4 };
  g_autofree char *h = ks_gloo_auto_describe (&hosts);
  g_autofree char *t = ks_gloo_auto_describe (&two);
  g_autofree char *o = ks_gloo_auto_describe (&one);
  g_assert_cmpstr (h, ==, "the ring below 131072 bytes ([gloo] auto_hosts_ring_bytes), "
                          "halving_doubling below 1048576 ([gloo] auto_small_bytes), "
                          "ring_chunked from there");
  g_assert_cmpstr (t, ==, "the ring below 1048576 bytes ([gloo] auto_small_bytes), "
                          "ring_chunked from there");
  g_assert_cmpstr (o, ==, "the ring below 1048576 bytes ([gloo] auto_small_bytes), "
                          "halving_doubling from there");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/gloo/choose/auto", test_auto);
  g_test_add_func ("/gloo/choose/named", test_named);
  g_test_add_func ("/gloo/choose/describe", test_describe);
  return g_test_run ();
}
