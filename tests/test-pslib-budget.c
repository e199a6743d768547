/* The memory a pslib server's default table budget starts from (plugins/pslib/budget.c),
 * read from fake roots: the process's own cgroup (/proc/self/cgroup's path) and its
 * parents up to the mount point, the smallest limit winning, cgroup v2 (pure and hybrid)
 * and v1; else the host's MemTotal. */
#include "testutil.h"

#include "../plugins/pslib/budget.h"

#include <string.h>

#define GIB ((double) (1 << 30))

/* root/relative = text, its directories made */
static void
put (const char *root, const char *relative, const char *text)
{
  g_autofree char *path = g_build_filename (root, relative, NULL);
  g_autofree char *dir = g_path_get_dirname (path);
  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
}

/* The memory read at root: `want` bytes, from a source ending in `file` */
static void
check (const char *root, double want, const char *file)
{
  g_autofree char *source = NULL;
  double got = ps_memory_at (root, &source);
  g_test_message ("%.0f bytes from %s", got, source);
  g_assert_cmpfloat (got, ==, want);
  g_assert_true (g_str_has_suffix (source, file));
}

/* 16 GiB of MemTotal under every case's root */
static char *
fake_root (void)
{
  char *root = ks_test_tmpdir ();
  put (root, "proc/meminfo", "MemTotal:       16777216 kB\nMemFree:         1024 kB\n");
  return root;
}

static void
test_v2_parent (void)
{
  g_autofree char *root = fake_root ();
  put (root, "proc/self/cgroup", "0::/job.slice/server\n");
  put (root, "sys/fs/cgroup/job.slice/server/memory.max", "max\n");
  put (root, "sys/fs/cgroup/job.slice/memory.max", "1073741824\n");
  /* the root cgroup has no memory.max */
  check (root, GIB, "sys/fs/cgroup/job.slice/memory.max");
  /* the process's own, lower, wins over its parent's */
  put (root, "sys/fs/cgroup/job.slice/server/memory.max", "536870912\n");
  check (root, GIB / 2, "sys/fs/cgroup/job.slice/server/memory.max");
  /* a namespaced container: its cgroup is the mount's root, which holds the limit */
  put (root, "proc/self/cgroup", "0::/\n");
  put (root, "sys/fs/cgroup/memory.max", "2147483648\n");
  check (root, 2 * GIB, "sys/fs/cgroup/memory.max");
  ks_test_rmtree (root);
}

static void
test_v1_and_hybrid (void)
{
  g_autofree char *root = fake_root ();
  /* v1: "unlimited" is a huge number, the parent's limit holds */
  put (root, "proc/self/cgroup", "5:cpu,cpuacct:/a\n4:memory:/batch/42\n0::/\n");
  put (root, "sys/fs/cgroup/memory/batch/42/memory.limit_in_bytes", "9223372036854771712\n");
  put (root, "sys/fs/cgroup/memory/batch/memory.limit_in_bytes", "3221225472\n");
  put (root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  check (root, 3 * GIB, "sys/fs/cgroup/memory/batch/memory.limit_in_bytes");
  /* hybrid: v2's unified hierarchy, lower, wins */
  put (root, "proc/self/cgroup", "4:memory:/batch/42\n0::/user/7\n");
  put (root, "sys/fs/cgroup/unified/user/7/memory.max", "1073741824\n");
  check (root, GIB, "sys/fs/cgroup/unified/user/7/memory.max");
  ks_test_rmtree (root);
}

static void
test_mem_total (void)
{
  g_autofree char *root = fake_root ();
  /* no limit anywhere */
  put (root, "proc/self/cgroup", "0::/a\n");
  put (root, "sys/fs/cgroup/a/memory.max", "max\n");
  check (root, 16 * GIB, "/proc/meminfo");
  /* a limit above the host's memory does not raise it */
  put (root, "sys/fs/cgroup/memory.max", "68719476736\n");
  check (root, 16 * GIB, "/proc/meminfo");
  /* garbage in a limit file is no limit */
  put (root, "sys/fs/cgroup/a/memory.max", "lots\n");
  check (root, 16 * GIB, "/proc/meminfo");
  ks_test_rmtree (root);
}

/* The server's budget: [pslib] server_memory_mb when set, refused past the memory; else a
 * quarter of the memory over the host's servers; a table's default share */
static void
test_server_budget (void)
{
  g_autofree char *root = fake_root ();
  g_autofree char *why = NULL;
  GError *error = NULL;
  double bytes = 0;
  put (root, "proc/self/cgroup", "0::/a\n");
  put (root, "sys/fs/cgroup/a/memory.max", "4294967296\n");
  g_assert_true (ps_server_budget (root, 0, 2, &bytes, &why, &error));
  g_assert_cmpfloat (bytes, ==, GIB / 2);
  g_assert_true (g_str_has_prefix (why, "a quarter of this host's 4295 MB (the memory cgroup's "
                                        "limit, "));
  g_assert_true (g_str_has_suffix (why, "sys/fs/cgroup/a/memory.max) over its 2 servers"));
  g_clear_pointer (&why, g_free);
  g_assert_true (ps_server_budget (root, 512, 2, &bytes, &why, &error));
  g_assert_cmpfloat (bytes, ==, GIB / 2);
  g_assert_cmpstr (why, ==, "[pslib] server_memory_mb = 512");
  g_clear_pointer (&why, g_free);
  /* past the 4096 MiB the cgroup allows */
  g_assert_false (ps_server_budget (root, 5000, 1, &bytes, &why, &error));
  g_assert_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE);
  g_test_message ("%s", error->message);
  g_assert_true (g_str_has_prefix (error->message, "[pslib] server_memory_mb = 5000: more than "
                                                   "the 4096 MiB this process may use (the "
                                                   "memory cgroup's limit, "));
  g_assert_true (g_str_has_suffix (error->message, "); set at most 4096, or 0 for a quarter of "
                                                   "it shared by the host's servers"));
  g_clear_error (&error);
  g_assert_null (why);
  /* 512 MiB over 2 tables of 100-byte rows; at least 1000 */
  g_assert_cmpint (ps_default_max_rows (GIB / 2, 2, 100), ==, 2684354);
  g_assert_cmpint (ps_default_max_rows (1e4, 1, 100), ==, 1000);
  ks_test_rmtree (root);
}

/* The machine's own: some positive figure, from a file that says which */
static void
test_this_machine (void)
{
  g_autofree char *source = NULL;
  double got = ps_memory_at ("/", &source);
  g_test_message ("this machine: %.0f MB from %s", got / 1e6, source);
  g_assert_cmpfloat (got, >, 0);
  g_assert_true (strstr (source, "MemTotal") != NULL || strstr (source, "cgroup") != NULL);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/pslib-budget/v2-parent", test_v2_parent);
  g_test_add_func ("/pslib-budget/v1-and-hybrid", test_v1_and_hybrid);
  g_test_add_func ("/pslib-budget/mem-total", test_mem_total);
  g_test_add_func ("/pslib-budget/server-budget", test_server_budget);
  g_test_add_func ("/pslib-budget/this-machine", test_this_machine);
  return g_test_run ();
}
