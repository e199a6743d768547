/* Helpers shared by the tests: temporary directories, plugin copies, config files. */
#ifndef KS_TESTUTIL_H
#define KS_TESTUTIL_H

#include <ksdist/ksdist.h>

#include <stdlib.h>

/* A new private (0700) directory, removed with ks_test_rmtree. */
char *ks_test_tmpdir (void);
void ks_test_rmtree (const char *dir);

/* The pid of `parent`'s child whose environment holds the entry `env_entry` (such as
 * "RANK=1"), or 0: how tests find a launcher's worker. */
GPid ks_test_find_child (GPid parent, const char *env_entry);
/* The state letter of process `pid` from /proc/PID/stat (R, S, T stopped, Z a zombie not
 * reaped yet, ...), or 0 when it is gone. */
char ks_test_process_state (GPid pid);

/* Everything a pipe gives until its end (fd closed then). */
char *ks_test_read_all (int fd);
/* Reads exactly len bytes from fd; FALSE at its end or on an error. */
gboolean ks_test_read_exact (int fd, void *buf, gsize len);
/* Reads a c10d store string (its 8-byte length, then the bytes) of at most `max` bytes,
 * 0-terminated; NULL when cut short or longer. */
char *ks_test_read_string (int fd, gsize max, gsize *len);

/* The largest |a[i] - b[i]| over n floats, in double. */
double ks_test_max_difference (const float *a, const float *b, gsize n);
/* Rewrites a safetensors file's header, `from` (which must be there) replaced by `to`,
 * padded with spaces to a multiple of 8, with `extra` zero bytes after the data; with
 * `reseal`, its "sha256" seal recomputed, as a forger who knows the format would. */
void ks_test_edit_header (const char *file, const char *from, const char *to,
                          gboolean reseal, gsize extra);

/* Copies the built test plugin `variant` (tgood, tabimajor, ...) into `dir` as
 * `file_name` with `mode`; returns the new path. */
char *ks_test_copy_plugin (const char *variant, const char *dir, const char *file_name, int mode);

/* Writes `text` to dir/name; returns the path. */
char *ks_test_write (const char *dir, const char *name, const char *text);
/* Writes dir/name: text long enough that dlopen reports "invalid ELF header". */
char *ks_test_write_not_elf (const char *dir, const char *name);

/* A configuration that loaded `text` (NULL: none) and the registry scanned with it. */
KsConfig *ks_test_config (const char *text, const char *dir, GError **error);
KsRegistry *ks_test_scan (KsConfig *config, const char *plugin_path);

/* The record of the file named `file_name` (basename) in the registry, or NULL. */
const KsPluginRecord *ks_test_record (KsRegistry *registry, const char *file_name);

/* The fixture of tests that scan plugins: a private directory, a configuration and
 * the registry scanned with it (set by the test's own setup). */
typedef struct {
  char *dir;
  KsConfig *config;
  KsRegistry *registry;
} PluginFixture;

void ks_test_fixture_teardown (PluginFixture *f, gconstpointer data);

/* The CPU backend the model tests run on: a configuration with `sets` (--set lines,
 * NULL-terminated, may be NULL), the registry of the build tree's openblas and optim
 * plugins, and the openblas compute. */
typedef struct {
  KsConfig *config;
  KsRegistry *registry;
  KsCompute *c;
} CpuFixture;

void ks_test_cpu_setup (CpuFixture *f, const char *const *sets);
void ks_test_cpu_teardown (CpuFixture *f);
/* FALSE, with the program's run marked skipped, when the OpenBLAS plugin was not built. */
gboolean ks_test_have_openblas (void);
/* The same for the Gloo plugin. */
gboolean ks_test_have_gloo (void);

/* A scalar expression's value, computed if stale. */
float ks_test_scalar (KsExpr *e);
/* Every parameter's gradient (already computed into the gradient arena) against central
 * finite differences of `loss` (steps of h, relative tolerance `tol`); returns how
 * many elements were checked. Parameters without a gradient (running statistics) are
 * skipped. Each evaluation starts from the model's RNG counter at entry. */
gsize ks_test_check_parameter_gradients (KsModel *model, KsExpr *loss, double h,
                                         double tol);

/* n floats drawn uniformly from [lo, hi); g_free them. */
float *ks_test_random_floats (GRand *rng, gsize n, double lo, double hi);

/* The float32 data of a safetensors file, after its JSON header (g_free); asserts it
 * can be read. */
float *ks_test_safetensors_floats (const char *file, gsize *n);
/* A checkpoint file's bytes with the values that differ between two saves of one state
 * as '0's: its save's identity, and the seals that cover it; what a resumed run's file
 * must match bitwise. */
GBytes *ks_test_checkpoint_bytes (const char *file);

/* Collective tests: what rank r contributes at index i (distinct per rank, exact in
 * float32, float64, int32 and int64, products of up to 4 ranks below 2^24), the
 * reduction `op` of n ranks' values there, a buffer of type t filled with rank r's
 * first `count` values, and element i of such a buffer as a double. */
double ks_test_rank_value (int r, gsize i);
double ks_test_reduced (KsReduceOp op, int n, gsize i);
void ks_test_fill_rank (void *buf, KsDType t, int r, gsize count);
double ks_test_element (const void *buf, KsDType t, gsize i);

/* In a rank of a collective test (exits with a message when wrong): an allreduce of
 * `count` rank values against ks_test_reduced, within `tolerance` relative; and 300
 * rounds back to back of a one-value allgather and allreduce, each round's values new, so
 * a fast rank's next round landing in a slow rank's result of this one is caught. */
void ks_test_check_allreduce (KsComm *comm, int rank, int n, KsDType t, KsReduceOp op,
                              gsize count, double tolerance);
void ks_test_check_rounds (KsComm *comm, int rank, int n);

/* DIR/KIND written by `ksdist datagen KIND` with the options `extra`; asserts it worked. */
char *ks_test_datagen (const char *kind, const char *dir, const char *const *extra);

/* The directory of the build tree's plugin `name` (its .libs). */
char *ks_test_build_plugin_dir (const char *name);

/* Runs $KSDIST with `args` (NULL-terminated), extra "NAME=value" environment `env` (may
 * be NULL) and the build tree's `plugins` (names); returns the exit status (asserting it
 * did not crash) with stdout and stderr. */
int ks_test_run_ksdist (const char *const *args, const char *const *env,
                        const char *const *plugins, char **out, char **err);
/* The same for any program (argv[0] searched in PATH), e.g. torchrun running ksdist. */
int ks_test_run_program (const char *const *argv, const char *const *env,
                         const char *const *plugins, char **out, char **err);
/* ks_test_run_ksdist started in the background with pipes for stdout and stderr (NULL:
 * none). */
GPid ks_test_spawn_ksdist (const char *const *args, const char *const *env,
                           const char *const *plugins, int *out_fd, int *err_fd);

/* In one rank of a multi-process test: a failed condition (or call taking ERR) prints
 * "WHO ID: message" on stderr and exits 1, for the test to report. */
#define KS_RANK_CHECK(who, id, cond, ...)                                                 \
  G_STMT_START                                                                            \
  {                                                                                       \
    if (!(cond))                                                                          \
      {                                                                                   \
        g_printerr ("%s %d: ", who, id);                                                  \
        g_printerr (__VA_ARGS__);                                                         \
        g_printerr ("\n");                                                                \
        exit (1);                                                                         \
      }                                                                                   \
  }                                                                                       \
  G_STMT_END
#define KS_RANK_OK(who, id, call)                                                         \
  G_STMT_START                                                                            \
  {                                                                                       \
    g_autoptr (GError) e_ = NULL;                                                         \
    gboolean ok_ = (call);                                                                \
    KS_RANK_CHECK (who, id, ok_, "%s", e_ ? e_->message : "failed without a message");   \
  }                                                                                       \
  G_STMT_END
#define ERR (&e_)

/* A multi-process job of a test program started again once per rank. */
typedef struct {
  GPid pid[8];
  int err_fd[8];
  int started;
} KsTestJob;

/* Starts ranks 0 .. started - 1 of `argv` (NULL-terminated) with argv[rank_arg] replaced
 * by the rank, their stderr piped. */
void ks_test_start_ranks (KsTestJob *job, const char *const *argv, int rank_arg, int started);
/* Waits for the ranks; returns their exit statuses and their stderr joined. */
char *ks_test_wait_ranks (KsTestJob *job, int *status);

/* Resets the variables that steer plugin search between test cases. */
void ks_test_clear_env (void);

#endif
