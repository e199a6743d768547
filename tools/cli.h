/* The ksdist command: shared pieces of the subcommands. */
#ifndef KS_CLI_H
#define KS_CLI_H

#include <ksdist/tasks.h>

enum {
  KS_EXIT_OK = 0,
  KS_EXIT_RUNTIME = 1, /* the work failed */
  KS_EXIT_USAGE = 2,   /* bad arguments or configuration */
  KS_EXIT_PEER = 3,    /* another process of the job failed first (lost, or timed out) */
};

typedef struct {
  const char *name;
  const char *summary;
  int (*run) (int argc, char **argv); /* argv[0] is the subcommand's name */
} KsCommand;

extern const KsCommand ks_cmd_plugins;
extern const KsCommand ks_cmd_config;
extern const KsCommand ks_cmd_train;
extern const KsCommand ks_cmd_generate;
extern const KsCommand ks_cmd_infer;
extern const KsCommand ks_cmd_export;
extern const KsCommand ks_cmd_datagen;
extern const KsCommand ks_cmd_plot;
extern const KsCommand ks_cmd_launch;
extern const KsCommand ks_cmd_bench;
/* ksdist bench pipeline (bench-pipeline.c): P stages, the CONFIG (may be NULL) and --set
 * lines after the benchmark's own; returns the exit status. */
int ks_bench_pipeline (int stages, const char *config, char **sets, gboolean json);
int ks_bench_pipeline_trace (int stages, const char *path);
extern const KsCommand ks_cmd_segment;


/* One line on stderr, starting with "ksdist: ". */
void ks_cli_error (const char *format, ...) G_GNUC_PRINTF (1, 2);

/* The most processes ksdist launch starts on one machine. */
#define KS_CLI_MAX_PROCESSES 1024

/* Whether ksdist launch starts a job of `n` processes on one machine, `given` the options
 * that asked for them ("-n 0"); prints what is wrong and returns FALSE. ksdist config -n
 * checks by it too, so that its 0 exit means launch takes the count. */
gboolean ks_cli_check_processes (const char *command, const char *given, int n);

/* Prints `error` as ks_cli_error does and returns its exit status: 2 for a configuration
 * error (KS_CONFIG_ERROR, a plugin not found or unavailable), 1 for failed work. */
int ks_cli_fail (const GError *error);

/* Parses a subcommand's options; prints the error and returns FALSE on bad usage.
 * `--help` prints the help and exits 0. */
gboolean ks_cli_parse (const char *name, const char *parameters, const char *summary,
                       GOptionEntry *entries, int *argc, char ***argv);
/* Prints the --help text ks_cli_parse would, without parsing anything: for a command
 * whose kinds each have their own options (datagen) */
void ks_cli_print_help (const char *name, const char *parameters, const char *summary,
                        GOptionEntry *entries);

/* The configuration (file optional, then --set overrides) and the plugins it selects,
 * validated against the core's keys, the tasks library's (ks_tasks_add_schema) and the
 * plugins' settings. Returns an exit status. */
int ks_cli_load (const char *file, char **sets, KsConfig **config, KsRegistry **registry);

/* What a CHECKPOINT argument names: a checkpoint-N (or export) directory, or the
 * checkpoint_dir holding them, whose newest it takes. */
char *ks_cli_checkpoint_path (const char *arg);

/* ks_cli_fail for a checkpoint or export that could not be read or used: damaged data
 * (truncated, edited) is bad data, as `train` says of it (1); another checkpoint error
 * (missing, not a checkpoint, not this model's) a path to change (2); any other error
 * as ks_cli_fail says. */
int ks_cli_checkpoint_fail (const GError *error);

/* The GOptionEntry of "--set group.key=value", repeatable. */
#define KS_CLI_SET_OPTION(sets)                                                          \
  { "set", 's', 0, G_OPTION_ARG_STRING_ARRAY, &(sets),                                   \
    "Override a setting (repeatable); wins over the file and KS_<GROUP>_<KEY>",          \
    "GROUP.KEY=VALUE" }



/* plot-trace.c: draws a pipeline trace file as SVG into `output`, the steps `steps`
 * ("A:B", "A", "all"; NULL: the last few); the exit status. */
int ks_plot_trace (const char *path, const char *output, const char *steps);
/* plot-write.c: whether `output` names a format ksdist writes (*.svg; *.png with
 * librsvg); writes `svg` there as that format, through a temporary file. */
gboolean ks_plot_check_output (const char *output, GError **error);
gboolean ks_plot_write (const char *output, const char *svg, GError **error);

/* Appends `s` as a JSON string (or null). */
void ks_cli_json_string (GString *out, const char *s);
/* The name of a value type: "int", "choice (a|b)", ... */
char *ks_cli_type_text (const KsKeyDesc *desc);
#endif
