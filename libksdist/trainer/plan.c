/* The plan: mode x executor x task x mixed precision x world, decided from the settings
 * before anything is built. Every combination either runs as documented or is refused
 * here, with one message naming the settings that clash and what to change. ksdist
 * config, ksdist launch (once, before any process starts) and the trainer call it. */
#include "trainer-private.h"

#include <errno.h>
#include <stdio.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

/* The [pipeline] keys of its shape: any above 1 makes a run pipelined. */
static const char *const pipeline_shape[] = { "stages", "virtual_stages", "micro_batches", NULL };

gboolean
ks_trainer_pipelined_config (const KsConfig *c)
{
  for (int i = 0; pipeline_shape[i] != NULL; i++)
    if (ks_config_get_int (c, "pipeline", pipeline_shape[i]) > 1)
      return TRUE;
  return FALSE;
}

/* A configuration error: the plan's every refusal. */
#define refuse(error, ...) ks_fail (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE, __VA_ARGS__)

/* Configuration error "[amp] dtype = X: `why`; set [amp] dtype = off" unless amp is off. */
static gboolean
amp_refused (const KsConfig *c, const char *why, GError **error)
{
  const char *dtype = ks_config_get_string (c, "amp", "dtype");
  if (strcmp (dtype, "off") == 0)
    return TRUE;
  return refuse (error, "[amp] dtype = %s: %s; set [amp] dtype = off", dtype, why);
}

int
ks_trainer_exit_status (const GError *error)
{
  if (error->domain == KS_TRAINER_SIGNAL_ERROR)
    return 128 + error->code;
  /* a blocking call the stop signal cancelled (a server's run_server): the signal's */
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED) && ks_trainer_stop_signal () != 0)
    return 128 + ks_trainer_stop_signal ();
  return error->domain == KS_CONFIG_ERROR
                 || g_error_matches (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_FOUND)
                 || g_error_matches (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_UNAVAILABLE)
             ? 2
             : 1;
}

/* Whether group.key was set from outside the file (the environment or --set). */
static gboolean
set_from_outside (const KsConfig *c, const char *group, const char *key)
{
  KsSource source = KS_SOURCE_DEFAULT;
  return ks_config_lookup (c, group, key, NULL, &source, NULL)
         && (source == KS_SOURCE_ENV || source == KS_SOURCE_CMDLINE);
}

/* A run shortened from outside its file (--set train.steps=20 on an example with a warmup
 * of 100) runs: the file's warmup, as long as the run or longer, shrinks to a tenth of
 * it, said once. Set from outside too, the warmup is the user's and the optimizer's
 * error stands. */
static void
shrink_warmup (KsConfig *c)
{
  const char *warmup;
  if (!ks_config_lookup (c, "optim", "warmup", &warmup, NULL, NULL)
      || !set_from_outside (c, "train", "steps") || set_from_outside (c, "optim", "warmup"))
    return;
  gint64 steps = ks_config_get_int (c, "optim", "total_steps");
  if (g_ascii_strtoll (warmup, NULL, 10) < steps)
    return;
  g_autofree char *set = g_strdup_printf ("optim.warmup=%" G_GINT64_FORMAT, steps / 10);
  if (ks_config_set_override (c, set, NULL))
    g_warning ("[optim] warmup = %s is not shorter than this run of %" G_GINT64_FORMAT
               " steps: warming up for %" G_GINT64_FORMAT " (a tenth) instead; set [optim] "
               "warmup to choose", warmup, steps, steps / 10);
}

/* [pipeline] keys given to a run without a pipeline (stages, virtual_stages and
 * micro_batches all 1) do nothing: said, not refused, since a pipeline's config run on one
 * process (--set pipeline.stages=1) is its legitimate reference, as a parameter-server
 * config run collective is (plugins/collective). */
static void
warn_unpipelined (const KsConfig *c)
{
  g_autoptr (GPtrArray) keys = ks_config_group_keys (c, "pipeline");
  g_autoptr (GString) set = g_string_new (NULL);
  guint n = 0;
  for (guint i = 0; keys != NULL && i < keys->len; i++)
    {
      const KsKeyDesc *d = g_ptr_array_index (keys, i);
      if (ks_config_is_set (c, "pipeline", d->key) && !g_strv_contains (pipeline_shape, d->key))
        g_string_append_printf (set, "%s%s", n++ > 0 ? ", " : "", d->key);
    }
  if (n > 0)
    g_warning ("[pipeline] %s %s set, but this run has no pipeline ([pipeline] stages, "
               "virtual_stages and micro_batches are 1): set stages to cut the model into "
               "stages, or remove %s (ignored)", set->str, n > 1 ? "are" : "is",
               n > 1 ? "them" : "it");
}

/* [optim] total_steps = 0 (its default) follows [train] steps, so a longer run keeps its
 * schedule's shape. */
static void
follow_steps (KsConfig *c)
{
  g_autofree char *set = NULL;
  const char *value;

  if (!ks_config_lookup (c, "optim", "total_steps", &value, NULL, NULL)
      || strcmp (value, "0") != 0)
    return;
  set = g_strdup_printf ("optim.total_steps=%" G_GINT64_FORMAT,
                         ks_config_get_int (c, "train", "steps"));
  ks_config_set_override (c, set, NULL);
  shrink_warmup (c);
}

/* The cosine decays from the end of its warmup to total_steps: a total not past the
 * warmup leaves it nothing. The optimizer refuses it too, but as a plugin's failure;
 * here it is the configuration error it is (exit 2) from config, launch and train. */
static gboolean
check_schedule (const KsConfig *c, GError **error)
{
  const char *schedule;
  if (!ks_config_lookup (c, "optim", "schedule", &schedule, NULL, NULL)
      || strcmp (schedule, "cosine") != 0)
    return TRUE;
  gint64 total = ks_config_get_int (c, "optim", "total_steps");
  gint64 warmup = ks_config_get_int (c, "optim", "warmup");
  if (total > warmup)
    return TRUE;
  return refuse (error, "[optim] schedule = cosine needs total_steps (%" G_GINT64_FORMAT ") "
                 "greater than warmup (%" G_GINT64_FORMAT "); set [optim] total_steps (0 "
                 "follows [train] steps) past the warmup, or a shorter [optim] warmup", total,
                 warmup);
}

/* A directory the run will write: it exists and is writable, or can be made. */
static gboolean
writable_dir (const char *group, const char *key, const char *dir, GError **error)
{
  g_autofree char *probe = g_strdup (dir);

  /* the nearest existing ancestor decides whether it can be made */
  while (!g_file_test (probe, G_FILE_TEST_EXISTS))
    {
      char *up = g_path_get_dirname (probe);
      gboolean top = strcmp (up, probe) == 0;
      g_free (probe);
      probe = up;
      if (top)
        break;
    }
  if (!g_file_test (probe, G_FILE_TEST_IS_DIR))
    return refuse (error, "[%s] %s = %s: %s is not a directory, so the run could not write "
                   "there; choose another path", group, key, dir, probe);
  if (access (probe, W_OK | X_OK) != 0)
    return refuse (error, "[%s] %s = %s: %s is not writable (%s); choose another path",
                   group, key, dir, probe, g_strerror (errno));
  return TRUE;
}

/* A fresh run into a checkpoint_dir holding another run's checkpoints would replace them
 * (a GPT's checkpoint-2000 became an MLP's): refused, before any process starts, unless
 * the user says to resume or to start over. */
static gboolean
check_owner (const KsConfig *c, GError **error)
{
  const char *dir = ks_config_get_string (c, "train", "checkpoint_dir");
  gboolean resume = ks_config_get_bool (c, "train", "resume");
  gboolean start_over = ks_config_get_bool (c, "train", "start_over");

  if (resume && start_over)
    return refuse (error, "[train] resume = true and [train] start_over = true: resume goes "
                   "on from the checkpoints in checkpoint_dir, start_over moves them aside; "
                   "set one of them");
  if (*dir == '\0' || resume || start_over)
    return TRUE;
  g_autofree char *there = ks_trainer_describe_checkpoints (dir);
  if (there == NULL)
    return TRUE;
  return refuse (error, "[train] checkpoint_dir = %s already holds checkpoints, the newest "
                 "%s, and this run (resume = false) would replace them: --set "
                 "train.resume=true goes on from them, or --set train.start_over=true moves "
                 "them aside into %s/previous-<time>/ and starts again (or give this run "
                 "another checkpoint_dir)", dir, there, dir);
}

/* A file the run will write: its directory must be one it can write. */
static gboolean
writable_file (const char *group, const char *key, const char *path, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (path);
  if (g_file_test (path, G_FILE_TEST_IS_DIR))
    return refuse (error, "[%s] %s = %s is a directory; name a file", group, key, path);
  if (g_file_test (path, G_FILE_TEST_EXISTS) && access (path, W_OK) != 0)
    return refuse (error, "[%s] %s = %s is not writable (%s); choose another path", group,
                   key, path, g_strerror (errno));
  return writable_dir (group, key, dir, error);
}

/* The task's hint for the missing file of the setting an input path error names
 * ("[data] path = X ..."), added to it. */
static void
add_missing_hint (const KsConfig *c, const KsTrainTask *task, GError *error)
{
  char group[32], key[64];
  if (task == NULL || task->missing_hint == NULL || error == NULL
      || sscanf (error->message, "[%31[a-z_]] %63[a-z_] = ", group, key) != 2)
    return;
  g_autofree char *name = g_strconcat (group, ".", key, NULL);
  g_autofree char *hint = task->missing_hint (c, name);
  if (hint == NULL)
    return;
  char *message = error->message;
  error->message = g_strconcat (message, "; ", hint, NULL);
  g_free (message);
}

static gboolean
check_paths (const KsConfig *c, const KsTrainTask *task, GError **error)
{
  static const char *const dirs[][2] = { { "train", "checkpoint_dir" },
                                         { "train", "export_dir" } };
  static const char *const files[][2] = { { "log", "metrics" }, { "trace", "path" } };

  for (guint i = 0; i < G_N_ELEMENTS (dirs); i++)
    {
      const char *v = ks_config_get_string (c, dirs[i][0], dirs[i][1]);
      if (*v != '\0' && !writable_dir (dirs[i][0], dirs[i][1], v, error))
        return FALSE;
    }
  for (guint i = 0; i < G_N_ELEMENTS (files); i++)
    {
      const char *v = ks_config_get_string (c, files[i][0], files[i][1]);
      if (*v != '\0' && !writable_file (files[i][0], files[i][1], v, error))
        return FALSE;
    }
  if (!check_owner (c, error))
    return FALSE;
  if (!ks_config_check_input_paths (c, error))
    {
      add_missing_hint (c, task, error != NULL ? *error : NULL);
      return FALSE;
    }
  const char *init = ks_config_get_string (c, "model", "init_from");
  if (*init != '\0' && !g_file_test (init, G_FILE_TEST_IS_REGULAR))
    return refuse (error, "[model] init_from = %s: no such file (give a .safetensors file of "
                   "weights, e.g. a checkpoint's model.safetensors or what `ksdist export "
                   "--torch` wrote)", init);
  return TRUE;
}

/* A [model] or [data] key set but not among those the task reads ([model] init_from is
 * the trainer's, for every task). */
static gboolean
check_task_settings (const KsConfig *c, const KsTrainTask *task, GError **error)
{
  if (task->settings == NULL)
    return TRUE;
  g_autoptr (GPtrArray) used = g_ptr_array_new ();
  for (int i = 0; task->settings[i] != NULL; i++)
    g_ptr_array_add (used, (gpointer) task->settings[i]);
  g_autoptr (GPtrArray) own = g_ptr_array_new_with_free_func (g_free);
  for (gsize i = 0; task->schema != NULL && i < task->n_schema; i++)
    g_ptr_array_add (own, g_strdup_printf ("%s.%s", task->schema[i].group, task->schema[i].key));
  for (guint i = 0; i < own->len; i++)
    g_ptr_array_add (used, own->pdata[i]);
  g_ptr_array_add (used, "model.init_from");
  g_ptr_array_add (used, NULL);
  const char *const *names = (const char *const *) used->pdata;
  return ks_config_check_used (c, "model", names, task->name, error)
         && ks_config_check_used (c, "data", names, task->name, error);
}

/* [train] eval_rows set for a task whose evaluation does not say it takes the cap: it
 * would score every held-out row, silently. */
static gboolean
check_eval_rows (const KsConfig *c, const KsTrainTask *task, GError **error)
{
  gint64 rows = ks_config_get_int (c, "train", "eval_rows");
  if (rows == 0 || task->honours_eval_rows)
    return TRUE;
  return refuse (error, "[train] eval_rows = %" G_GINT64_FORMAT ": the task '%s' does not "
                 "cap its evaluation (its evaluate would score every held-out row); remove "
                 "[train] eval_rows, or have the task's evaluate score at most "
                 "ks_trainer_eval_cap's rows and set honours_eval_rows in its KsTrainTask",
                 rows, task->name != NULL ? task->name : "(unnamed)");
}

/* A [table.NAME] group set for a sparse table the task does not have. */
static gboolean
check_tables (const KsConfig *c, const KsTrainTask *task, GError **error)
{
  g_auto (GStrv) groups = ks_config_groups (c);
  const char *const *tables = task->sparse_tables;

  for (int i = 0; groups[i] != NULL; i++)
    {
      const char *name = groups[i] + strlen ("table.");
      if (!g_str_has_prefix (groups[i], "table.") || strcmp (name, "*") == 0
          || (tables != NULL && g_strv_contains (tables, name)))
        continue;
      g_autoptr (GPtrArray) keys = ks_config_group_keys (c, groups[i]);
      gboolean set = FALSE;
      for (guint k = 0; k < keys->len && !set; k++)
        set = ks_config_is_set (c, groups[i], ((const KsKeyDesc *) keys->pdata[k])->key);
      if (!set)
        continue;
      g_autofree char *list = tables != NULL && tables[0] != NULL
                                  ? g_strjoinv ("], [table.", (char **) tables)
                                  : NULL;
      if (list != NULL)
        return refuse (error, "[%s]: %s has no sparse table named '%s' (its tables: "
                       "[table.%s]); remove the group or rename it", groups[i], task->name,
                       name, list);
      return refuse (error, "[%s]: %s has no sparse tables ([table.NAME] configures a "
                     "sparse table of a task that has them, such as [data] task = ctr); "
                     "remove the group", groups[i], task->name);
    }
  return TRUE;
}

/* Whether the job's mode is one a loaded plugin provides, and its traits. A single process
 * needs none; a job whose mode no plugin provides is refused by the factory, which lists
 * the modes there are: the checks below then assume neither way. */
static gboolean
mode_traits (KsRegistry *registry, const KsConfig *c, guint32 *traits)
{
  const char *mode = ks_config_get_string (c, "job", "mode");
  *traits = 0;
  return strcmp (mode, "auto") != 0
         && ks_registry_traits (registry, KS_KIND_ALGORITHM, mode, traits);
}

/* "set [job] mode = A or B": the loaded modes with (or without) parameter servers. */
static char *
set_mode (KsRegistry *registry, gboolean servers)
{
  g_autofree char *names = ks_registry_names_with (registry, KS_KIND_ALGORITHM,
                                                   KS_ALGORITHM_SERVERS,
                                                   servers ? KS_ALGORITHM_SERVERS : 0);
  if (*names == '\0')
    return g_strdup_printf ("load a plugin with a mode %s parameter servers (see `ksdist "
                            "plugins`)", servers ? "with" : "without");
  return g_strdup_printf ("set [job] mode = %s", names);
}

/* What the mode, the executor and the task allow of each other, without the world. */
static gboolean
check_combination (KsRegistry *registry, const KsConfig *c, const KsTrainTask *task,
                   GError **error)
{
  const char *mode = ks_config_get_string (c, "job", "mode");
  guint32 traits;
  gboolean servers = mode_traits (registry, c, &traits) && (traits & KS_ALGORITHM_SERVERS);
  g_autofree char *no_servers = set_mode (registry, FALSE);
  gboolean pipelined = ks_trainer_pipelined_config (c);
  const char *dtype = ks_config_get_string (c, "amp", "dtype");

  if (ks_config_get_bool (c, "train", "resume")
      && *ks_config_get_string (c, "train", "checkpoint_dir") == '\0')
    return refuse (error, "[train] resume = true needs [train] checkpoint_dir, the "
                   "directory to resume from");
  if (pipelined && servers)
    return refuse (error, "[job] mode = %s with [pipeline]: a pipelined run has no parameter "
                   "servers (its replicas average gradients as a mode without servers "
                   "does); %s, or train without [pipeline]", mode, no_servers);
  if (task != NULL && task->step != NULL)
    {
      if (servers)
        return refuse (error, "[job] mode = %s: %s takes whole steps of its own, averaged "
                       "over the workers; it has no parameter servers: %s", mode,
                       task->name, no_servers);
      if (pipelined)
        return refuse (error, "[pipeline]: %s takes whole steps of its own and cannot be "
                       "cut into stages; train it without [pipeline]", task->name);
      if (*ks_config_get_string (c, "train", "export_dir") != '\0')
        return refuse (error, "[train] export_dir: %s has no inference model to export "
                       "(its checkpoints hold the weights); leave it empty", task->name);
      g_autofree char *why = g_strdup_printf ("%s does not support mixed precision yet",
                                              task->name);
      if (!amp_refused (c, why, error))
        return FALSE;
    }
  if (!pipelined && *ks_config_get_string (c, "trace", "path") != '\0')
    return refuse (error, "[trace] path: only a pipelined run (see [pipeline]) writes a "
                   "trace; leave it empty");
  if (!pipelined)
    warn_unpipelined (c);
  if (pipelined && strcmp (dtype, "fp16") == 0)
    /* a stage's backward starts from what the next stage sent, which no scale reached */
    return amp_refused (c, "a pipelined run cannot scale its loss; bf16 needs no scaling",
                        error);
  g_autofree char *why = g_strdup_printf ("with parameter servers the update runs on the "
                                          "servers, in float32; for mixed precision, %s",
                                          no_servers);
  if (servers && !amp_refused (c, why, error))
    return FALSE;
  if (pipelined && !ks_trainer_pipeline_check (c, error))
    return FALSE;
  /* a pipeline's and a task's own steps run without servers: its check refuses [strategy] */
  if (!ks_algorithm_check_strategy (registry, c, mode, error))
    return FALSE;
  return TRUE;
}

gboolean
ks_trainer_on_device (KsRegistry *registry, const KsConfig *c)
{
  guint32 traits;
  return ks_registry_traits (registry, KS_KIND_COMPUTE,
                             ks_config_get_string (c, "compute", "backend"), &traits)
         && (traits & KS_COMPUTE_DEVICE_MEMORY);
}

/* Data parallel on a backend of device memory: only a communicator that reads device
 * memory can average the gradients. A backend no plugin provides is ks_comm_new's to
 * name. */
static gboolean
check_device_comm (KsRegistry *registry, const KsConfig *c, GError **error)
{
  const char *backend = ks_config_get_string (c, "comm", "backend");
  gboolean automatic = strcmp (backend, "auto") == 0;
  guint32 traits;

  if (!ks_trainer_on_device (registry, c)
      || (automatic
          ? ks_registry_choose (registry, KS_KIND_COMM, KS_COMM_DEVICE_MEMORY,
                                KS_COMM_DEVICE_MEMORY) != NULL
          : !ks_registry_traits (registry, KS_KIND_COMM, backend, &traits)
                || (traits & KS_COMM_DEVICE_MEMORY)))
    return TRUE;
  g_autofree char *comms = ks_registry_names_with (registry, KS_KIND_COMM,
                                                   KS_COMM_DEVICE_MEMORY, KS_COMM_DEVICE_MEMORY);
  g_autofree char *hosts = ks_registry_names_with (registry, KS_KIND_COMPUTE,
                                                   KS_COMPUTE_DEVICE_MEMORY, 0);
  g_autofree char *comm_fix = *comms != '\0'
                                  ? g_strdup_printf ("set [comm] backend = %s or auto", comms)
                                  : g_strdup ("load a communicator that reads device memory "
                                              "(see `ksdist plugins`)");
  g_autofree char *compute_fix = *hosts != '\0'
                                     ? g_strdup_printf (", or [compute] backend = %s", hosts)
                                     : g_strdup ("");
  return refuse (error, "[comm] backend = %s cannot average gradients in the device memory "
                 "of [compute] backend = %s (%s); %s%s", backend,
                 ks_config_get_string (c, "compute", "backend"),
                 automatic ? "no loaded communicator reads device memory"
                           : "it reads host memory only",
                 comm_fix, compute_fix);
}

gboolean
ks_trainer_check_world (KsRegistry *registry, const KsConfig *c, const KsTrainTask *task,
                        const KsTrainWorld *w, GError **error)
{
  const char *mode = ks_config_get_string (c, "job", "mode");
  guint32 traits;
  gboolean known = mode_traits (registry, c, &traits);
  gboolean servers = known && (traits & KS_ALGORITHM_SERVERS);
  gboolean averaging = known && !servers; /* the workers average among themselves */
  gint64 stages = ks_config_get_int (c, "pipeline", "stages");

  if (w->workers == 0 && w->servers == 0) /* not known yet */
    return task == NULL || task->check == NULL || task->check (c, w, error);
  if (ks_trainer_pipelined_config (c))
    {
      if (w->servers > 0)
        return refuse (error, "--servers %d: a pipelined run ([pipeline]) has no parameter "
                       "servers; launch -n %" G_GINT64_FORMAT " without --servers", w->servers,
                       stages);
      if (stages > 1 && w->workers == 1)
        return refuse (error, "[pipeline] stages = %" G_GINT64_FORMAT " needs one worker "
                       "process per stage: run `ksdist launch -n %" G_GINT64_FORMAT " CONFIG`",
                       stages, stages);
      if (w->workers % stages != 0)
        return refuse (error, "[pipeline] stages = %" G_GINT64_FORMAT " but the job has %d "
                       "workers: a pipelined run has one worker per stage of each "
                       "data-parallel replica; launch -n %" G_GINT64_FORMAT " (one pipeline) "
                       "or a multiple of it", stages, w->workers, stages);
    }
  else if (servers && w->servers == 0)
    return refuse (error, "[job] mode = %s trains with parameter servers, but the job has "
                   "none%s: start it with `ksdist launch --servers S --workers W CONFIG`",
                   mode, w->workers == 1 ? " (one process alone)" : "");
  else if (averaging && w->servers > 0)
    {
      g_autofree char *with = set_mode (registry, TRUE);
      return refuse (error, "--servers %d: [job] mode = %s has no parameter servers; %s, or "
                     "launch without --servers", w->servers, mode, with);
    }
  if (task != NULL && task->step != NULL && w->servers > 0)
    return refuse (error, "%s has no parameter servers: launch it without --servers",
                   task->name);
  if (averaging && !ks_trainer_pipelined_config (c) && w->workers > 1
      && !check_device_comm (registry, c, error))
    return FALSE;
  return task == NULL || task->check == NULL || task->check (c, w, error);
}

/* A pipelined model's cut into stages (but for seg_method cost, which measures). */
static gboolean
check_segments (KsTrainer *t, GError **error)
{
  const KsConfig *c = t->config;
  gsize parts = ks_config_get_int (c, "pipeline", "stages")
                * ks_config_get_int (c, "pipeline", "virtual_stages");
  gboolean measured;

  if (!t->pipelined || strcmp (ks_config_get_string (c, "pipeline", "seg_method"), "cost") == 0)
    return TRUE;
  g_autofree KsLayerInfo *info = g_new0 (KsLayerInfo, t->n_layers);
  g_autofree gsize *boundaries = g_new (gsize, parts + 1);
  return ks_trainer_segment (t, info, boundaries, &measured, error);
}

/* The key that names the implementation of a kind the settings choose; NULL for a store,
 * role maker, segmenter or optimizer (chosen elsewhere, or by need). */
typedef struct {
  KsKind kind;
  const char *group, *key;
} KindChoice;

static const KindChoice *
choice_of (KsKind kind)
{
  static const KindChoice choices[] = {
    { KS_KIND_COMPUTE, "compute", "backend" },
    { KS_KIND_COMM, "comm", "backend" },
    { KS_KIND_ALGORITHM, "job", "mode" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (choices); i++)
    if (choices[i].kind == kind)
      return &choices[i];
  return NULL;
}

/* The key that rules out `impl` for this run ("[comm] backend = gloo"; free it), or NULL
 * when the run may use it: auto may choose any backend, and [comm] hierarchical = true
 * adds a communicator of one host inside each host. */
static char *
ruled_out_by (KsRegistry *registry, const KsConfig *c, const KsImplDesc *impl)
{
  const KindChoice *choice = choice_of (impl->kind);
  guint32 traits;
  if (choice == NULL)
    return NULL;
  const char *chosen = ks_config_get_string (c, choice->group, choice->key);
  if (strcmp (chosen, impl->name) == 0
      || (impl->kind != KS_KIND_ALGORITHM && strcmp (chosen, "auto") == 0))
    return NULL;
  if (impl->kind == KS_KIND_COMM
      && strcmp (ks_config_get_string (c, "comm", "hierarchical"), "true") == 0
      && ks_registry_traits (registry, KS_KIND_COMM, impl->name, &traits)
      && (traits & KS_COMM_ONE_HOST))
    return NULL;
  return g_strdup_printf ("[%s] %s = %s", choice->group, choice->key, chosen);
}

/* A key of a plugin that this run cannot use (every implementation it provides is a
 * compute backend, communicator or mode that the settings rule out) is refused, as any
 * other key the run would not read: `[shm] chunk_kib` with `[comm] backend = gloo`. */
static gboolean
check_unused_plugins (KsRegistry *registry, const KsConfig *c, GError **error)
{
  const GPtrArray *records = ks_registry_records (registry);
  for (guint i = 0; i < records->len; i++)
    {
      const KsPluginRecord *r = g_ptr_array_index (records, i);
      if (r->state != KS_PLUGIN_LOADED || r->desc->n_impls == 0)
        continue;
      g_autoptr (GPtrArray) keys = ks_config_group_keys (c, r->name);
      const char *set = NULL;
      for (guint k = 0; keys != NULL && k < keys->len && set == NULL; k++)
        {
          const KsKeyDesc *d = g_ptr_array_index (keys, k);
          if (ks_config_is_set (c, r->name, d->key))
            set = d->key;
        }
      if (set == NULL)
        continue;
      g_autofree char *why = NULL;
      gsize n = 0;
      for (; n < r->desc->n_impls; n++)
        {
          g_autofree char *out = ruled_out_by (registry, c, &r->desc->impls[n]);
          if (out == NULL)
            break;
          if (why == NULL)
            why = g_steal_pointer (&out);
        }
      if (n < r->desc->n_impls)
        continue;
      const KsImplDesc *first = &r->desc->impls[0];
      const KindChoice *choice = choice_of (first->kind); /* every impl was ruled out by one */
      return refuse (error, "[%s] %s is set, but this run does not use the %s plugin (%s); "
                     "remove it, or choose %s as [%s] %s", r->name, set, r->name, why,
                     first->name, choice->group, choice->key);
    }
  return TRUE;
}

gboolean
ks_trainer_check (KsRegistry *registry, KsConfig *c, const KsTrainTask *program_task,
                  const KsTrainWorld *world, gboolean build, GError **error)
{
  KsTrainTask copy;
  const KsTrainTask *task = NULL;

  if (program_task != NULL && !ks_trainer_task_copy (program_task, &copy, error))
    return FALSE;
  if (program_task != NULL)
    task = &copy;
  /* the task's own keys, and the configuration checked with them, so that a program need
   * not add them before its own ks_config_validate (a second validation changes nothing) */
  if (task != NULL)
    ks_trainer_add_task_schema (c, task);
  if (!ks_config_validate (c, error) || !ks_registry_check_settings (registry, c, error)
      || !check_unused_plugins (registry, c, error))
    return FALSE;
  follow_steps (c);
  if (!check_combination (registry, c, task, error) || !check_schedule (c, error)
      || !check_paths (c, task, error)
      || (task != NULL && !check_task_settings (c, task, error))
      || (task != NULL && !check_tables (c, task, error))
      || !ks_trainer_check_world (registry, c, task,
                                  world != NULL ? world : &(KsTrainWorld) { 0, 0 }, error)
      || (task != NULL && !check_eval_rows (c, task, error)))
    return FALSE;
  if (!build || task == NULL)
    return TRUE;
  g_autoptr (KsTrainer) t = ks_trainer_alloc (registry, c, task, NULL, error);
  if (t == NULL || !ks_trainer_describe (t, error) || !check_segments (t, error))
    return FALSE;
  /* a layer list always has logits; a model of the task's own may have none */
  if (*ks_config_get_string (c, "train", "export_dir") != '\0' && t->layers == NULL
      && t->model != NULL && t->logits == NULL)
    return refuse (error, "[train] export_dir: %s sets no logits to export; leave it empty",
                   ks_trainer_task_describe (t));
  /* the optimizer's name and settings, and what it can take and save */
  g_autoptr (KsOptimizer) o = ks_optimizer_new (registry, c,
                                                ks_config_get_string (c, "train", "optimizer"),
                                                error);
  return o != NULL && ks_optimizer_check_plan (o, c, error);
}
