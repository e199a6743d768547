/* The core's configuration schema: every group and key the core itself reads. The parts
 * declare their own: plugins in their descriptors, a task in KsTrainTask.schema, the
 * tasks library ([model], [data], [meta], [layer.NAME]) with ks_tasks_add_schema. */
#include "ks-private.h"

#include <string.h>

static const KsKeyDesc core_schema[] = {
  { "plugins", "path", KS_VALUE_LIST, "", 1, 0, NULL,
    "Directories (or plugin files) searched after KS_PLUGIN_PATH and before the system "
    "directory; relative entries are relative to this config file" },
  { "plugins", "load", KS_VALUE_LIST, "", 1, 0, NULL,
    "Include list (gloo,openblas) or, starting with ^, exclude list (^mpi,cuda); empty "
    "loads every plugin found. KS_PLUGINS overrides it" },
  { "compute", "backend", KS_VALUE_STRING, "auto", 1, 0, NULL,
    "Compute implementation, a name listed by `ksdist plugins`, or auto for the available "
    "one of highest priority" },
  { "comm", "backend", KS_VALUE_STRING, "auto", 1, 0, NULL,
    "Communicator implementation, a name listed by `ksdist plugins`, or auto" },
  { "comm", "timeout", KS_VALUE_DOUBLE, "300", 0.001, 1e6, NULL,
    "Seconds a collective may wait before it fails, naming the ranks that did not answer" },
  { "comm", "store", KS_VALUE_STRING, "file", 1, 0, NULL,
    "Rendezvous store implementation: file (a directory every rank can reach) or tcp (a "
    "server on one host; jobs across machines). KS_STORE overrides it" },
  { "comm", "store_address", KS_VALUE_STRING, "", 1, 0, NULL,
    "Where the ranks of a job meet: the file store's directory, or the TCP store's "
    "HOST:PORT. KS_STORE_ADDRESS overrides it; ksdist launch sets that" },
  { "comm", "hierarchical", KS_VALUE_CHOICE, "auto", 1, 0, "auto|true|false",
    "Allreduce inside each host through shared memory, between hosts among one rank per "
    "host, then inside the host again (Paddle's use_hierarchical_allreduce); auto: when "
    "backend is auto and the launcher says this host has several ranks but not all" },
  { "job", "mode", KS_VALUE_STRING, "collective", 1, 0, NULL,
    "Distributed algorithm: collective, transpiler, pslib (or one a plugin provides)" },
  { "job", "name", KS_VALUE_STRING, "", 1, 0, NULL,
    "Keeps this job's rendezvous apart from other jobs' in the same store; KS_JOB overrides "
    "it; ksdist launch makes a unique one" },
  { "job", "role_maker", KS_VALUE_STRING, "auto", 1, 0, NULL,
    "Who this process is: paddlecloud, env (mpirun/srun/torchrun), user ([roles]), or auto "
    "(the one whose environment is present; a single worker when none is)" },
  { "log", "level", KS_VALUE_CHOICE, "info", 1, 0, "error|warning|info|debug",
    "Least severe log messages shown" },
  { "log", "progress_after", KS_VALUE_DOUBLE, "2", 0, 1e6, NULL,
    "Seconds a long phase (an evaluation over many tasks, say) runs before its progress "
    "shows on a terminal; 0 at once" },
  { "log", "metrics", KS_VALUE_STRING, "", 1, 0, NULL,
    "File to write one JSON object per logged step to (step, loss, lr, throughput, eval "
    "metrics); empty for none" },
  /* the trainer's, for every task (init-from.c); the tasks library declares the rest of
   * [model] */
  { "model", "init_from", KS_VALUE_PATH, "", 1, 0, NULL,
    "A safetensors file of weights to start from instead of the initialisers: a "
    "checkpoint's model.safetensors or PyTorch's layout and names (what `ksdist export "
    "--torch` writes); every parameter must be there with its shape, and nothing else" },
  { "amp", "dtype", KS_VALUE_CHOICE, "off", 1, 0, "off|bf16|fp16",
    "Mixed precision: the matmuls' operands in bfloat16 or float16 with float32 sums; "
    "parameters, gradients, optimizer state, softmax, layer norm and the loss stay float32 "
    "(collective mode)" },
  { "amp", "initial_scale", KS_VALUE_DOUBLE, "32768", 1e-30, 3.4e38, NULL,
    "fp16: the loss scale the backward starts from (bf16 is not scaled)" },
  { "amp", "dynamic", KS_VALUE_BOOL, "true", 1, 0, NULL,
    "fp16: move the loss scale (down on an inf/NaN gradient, whose step is skipped; up "
    "after growth_interval good steps); false keeps it fixed and still skips such steps" },
  { "amp", "growth_interval", KS_VALUE_INT, "1000", 1, 1e12, NULL,
    "fp16: good steps in a row before the loss scale grows" },
  { "amp", "growth_factor", KS_VALUE_DOUBLE, "2", 1, 1e6, NULL,
    "fp16: what the loss scale is multiplied by when it grows" },
  { "amp", "backoff_factor", KS_VALUE_DOUBLE, "0.5", 1e-6, 1, NULL,
    "fp16: what the loss scale is multiplied by after an inf/NaN gradient" },
  { "train", "optimizer", KS_VALUE_STRING, "adam", 1, 0, NULL,
    "Optimizer implementation (see `ksdist plugins`); its settings are in [optim]" },
  { "train", "steps", KS_VALUE_INT, "1000", 1, 1e12, NULL, "Optimizer steps" },
  { "train", "batch", KS_VALUE_INT, "128", 1, 1e8, NULL, "Samples per step" },
  { "train", "log_every", KS_VALUE_INT, "100", 1, 1e12, NULL, "Steps between log lines" },
  { "train", "eval_every", KS_VALUE_INT, "0", 0, 1e12, NULL,
    "Steps between held-out evaluations during training (0: only at the end)" },
  { "train", "eval_rows", KS_VALUE_INT, "0", 0, 1e12, NULL,
    "The most held-out rows an evaluation scores (each one, eval_every's too), the first "
    "ones; a language model's rows are windows of context tokens; 0: every row. The "
    "printed line says N of M. Not for reptile (its [meta] eval_tasks) nor addition" },
  { "train", "seed", KS_VALUE_INT, "3", 0, 1e15, NULL,
    "Seed of the batch shuffling (each epoch's order depends only on it and the epoch)" },
  { "train", "checkpoint_dir", KS_VALUE_STRING, "", 1, 0, NULL,
    "Directory for checkpoints (parameters and optimizer state); empty for none" },
  { "train", "checkpoint_every", KS_VALUE_INT, "0", 0, 1e12, NULL,
    "Steps between checkpoints; 0 saves only at the end" },
  { "train", "keep", KS_VALUE_INT, "3", 0, 1e6, NULL, "Checkpoints kept; 0 keeps all" },
  { "train", "export_dir", KS_VALUE_STRING, "", 1, 0, NULL,
    "Directory to write the trained model's inference model to at the end (the forward "
    "graph from its inputs to the logits, and its parameters); empty for none" },
  { "train", "resume", KS_VALUE_BOOL, "false", 1, 0, NULL,
    "Start from the newest checkpoint in checkpoint_dir when there is one" },
  { "train", "start_over", KS_VALUE_BOOL, "false", 1, 0, NULL,
    "A fresh run (resume = false) into a checkpoint_dir that holds checkpoints moves them "
    "aside into checkpoint_dir/previous-<UTC time>/ (never deletes them) and starts from "
    "step 1; without it such a run is refused" },
  { "pipeline", "stages", KS_VALUE_INT, "1", 1, 4095, NULL,
    "Pipeline stages: `ksdist train` cuts the model's layer list over this many workers "
    "(one process each; a job of k times as many workers runs k data-parallel replicas); 1 "
    "for none" },
  { "pipeline", "virtual_stages", KS_VALUE_INT, "1", 1, 4095, NULL,
    "Model chunks per stage (interleaved schedule): stage s owns chunks s, s + stages, ..." },
  { "pipeline", "micro_batches", KS_VALUE_INT, "1", 1, 65535, NULL,
    "Micro-batches each step's batch is split into (they must divide [train] batch)" },
  { "pipeline", "schedule", KS_VALUE_CHOICE, "1f1b", 1, 0, "fthenb|1f1b|interleaved",
    "Order of forwards and backwards: fthenb (GPipe), 1f1b, interleaved (virtual stages)" },
  { "pipeline", "seg_method", KS_VALUE_STRING, "uniform", 1, 0, NULL,
    "How layers are cut into stages: uniform, parameters, cost (time measured by worker 0 "
    "over a few steps), layer:<regex>, or a boundary list such as 0,3,6,10" },
  { "pipeline", "recompute_interval", KS_VALUE_INT, "0", 0, 1e6, NULL,
    "Keep every k-th layer's output between forward and backward and recompute the rest; "
    "0 keeps all" },
  { "pipeline", "overlap", KS_VALUE_BOOL, "true", 1, 0, NULL,
    "With data-parallel replicas: average a chunk's gradients in buckets while the backward "
    "goes on, after its last micro-batch; false averages them all after the last backward" },
  { "strategy", "mode", KS_VALUE_CHOICE, "auto", 1, 0, "auto|sync|half_async|async|geo",
    "Parameter-server mode ([job] mode = transpiler): sync, half_async, async or geo; auto "
    "follows Paddle's a_sync and k_steps" },
  { "strategy", "a_sync", KS_VALUE_BOOL, "false", 1, 0, NULL,
    "Paddle's form: false is sync; true is async, or GEO when k_steps > 0" },
  { "strategy", "k_steps", KS_VALUE_INT, "0", 0, 1e9, NULL,
    "GEO: local steps between pushes of the parameter delta (mode = geo with 0 uses 100, "
    "Paddle's geo_sgd_need_push_nums)" },
  { "strategy", "send_queue_size", KS_VALUE_INT, "2", 1, 1e6, NULL,
    "Async: gradients a worker may queue for sending before its step waits (2: a push "
    "travels while the next step computes and two queued gradients may merge; 1 waits "
    "more and is slower than sync on a fast model; Paddle's default is 20: a model whose "
    "step is faster than a push then runs 20 steps ahead of the servers on old values)" },
  { "strategy", "max_merge_var_num", KS_VALUE_INT, "20", 1, 1e6, NULL,
    "Async: queued gradients averaged into one push" },
  { "strategy", "staleness_lr", KS_VALUE_BOOL, "true", 1, 0, NULL,
    "Async: a server applies each push at [optim] lr divided by its staleness (the updates "
    "applied since the values its gradients were computed on); false: at [optim] lr" },
  { "strategy", "max_update_norm", KS_VALUE_DOUBLE, "10", 0, 1e12, NULL,
    "GEO: a parameter server refuses a delta (added to its parameters as it is) whose L2 "
    "norm is above this times the norm of its parameters (at least the square root of "
    "their count), naming the worker; 0: no bound. Gradients are not bounded: the "
    "optimizer scales them" },
  /* [table.NAME]: one group per sparse table of the pslib mode (sparse.h), pslib's defaults */
  { "table.*", "embedx_dim", KS_VALUE_INT, "8", 0, 4096, NULL,
    "Sparse table: floats of a row's embedx (its wide part); a pull gives 1 + embedx_dim "
    "floats per id (embed_w, then embedx)" },
  { "table.*", "rule", KS_VALUE_CHOICE, "adagrad", 1, 0, "adagrad|sgd|adam",
    "Sparse table: update rule of a row (pslib's is adagrad: lr * sqrt (initial_g2sum / "
    "(initial_g2sum + g2sum)))" },
  { "table.*", "learning_rate", KS_VALUE_DOUBLE, "0.05", 0, 1e6, NULL,
    "Sparse table: learning rate of the rule" },
  { "table.*", "initial_g2sum", KS_VALUE_DOUBLE, "3", 1e-12, 1e12, NULL,
    "Sparse table: adagrad's starting sum of squared gradients" },
  { "table.*", "initial_range", KS_VALUE_DOUBLE, "1e-4", 0, 1e3, NULL,
    "Sparse table: new values are uniform in [-initial_range, initial_range], seeded by "
    "the table's seed and the id only" },
  { "table.*", "min_bound", KS_VALUE_DOUBLE, "-10", -1e30, 0, NULL,
    "Sparse table: values are clipped to [min_bound, max_bound]" },
  { "table.*", "max_bound", KS_VALUE_DOUBLE, "10", 0, 1e30, NULL,
    "Sparse table: values are clipped to [min_bound, max_bound]" },
  { "table.*", "beta1", KS_VALUE_DOUBLE, "0.9", 0, 0.999999, NULL, "Sparse table: adam's beta1" },
  { "table.*", "beta2", KS_VALUE_DOUBLE, "0.999", 0, 0.999999999, NULL,
    "Sparse table: adam's beta2" },
  { "table.*", "epsilon", KS_VALUE_DOUBLE, "1e-8", 0, 1, NULL, "Sparse table: adam's epsilon" },
  { "table.*", "embedx_threshold", KS_VALUE_DOUBLE, "10", 0, 1e12, NULL,
    "Sparse table: a row's embedx is made (and trained) once its score reaches this; "
    "before, it reads as zeros" },
  { "table.*", "nonclk_coeff", KS_VALUE_DOUBLE, "0.1", 0, 1e6, NULL,
    "Sparse table: score = (show - click) * nonclk_coeff + click * click_coeff" },
  { "table.*", "click_coeff", KS_VALUE_DOUBLE, "1", 0, 1e6, NULL,
    "Sparse table: score = (show - click) * nonclk_coeff + click * click_coeff" },
  { "table.*", "base_threshold", KS_VALUE_DOUBLE, "1.5", 0, 1e12, NULL,
    "Sparse table: base and delta saves keep rows of at least this score" },
  { "table.*", "delta_threshold", KS_VALUE_DOUBLE, "0.25", 0, 1e12, NULL,
    "Sparse table: a delta save keeps rows whose score grew by at least this since the "
    "last base or delta save" },
  { "table.*", "delta_keep_days", KS_VALUE_INT, "16", 0, 1e6, NULL,
    "Sparse table: a delta save skips rows unseen for more days (shrinks) than this" },
  { "table.*", "show_click_decay_rate", KS_VALUE_DOUBLE, "0.98", 0, 1, NULL,
    "Sparse table: each shrink multiplies show and click by this" },
  { "table.*", "delete_threshold", KS_VALUE_DOUBLE, "0.8", 0, 1e12, NULL,
    "Sparse table: a shrink deletes rows whose score is below this" },
  { "table.*", "delete_after_unseen_days", KS_VALUE_INT, "30", 0, 1e6, NULL,
    "Sparse table: a shrink deletes rows unseen for more days (shrinks) than this" },
  { "table.*", "shard_num", KS_VALUE_INT, "64", 1, 65536, NULL,
    "Sparse table: hash tables per server (a row goes by its id); pslib uses 1000" },
  { "table.*", "seed", KS_VALUE_INT, "1", 0, 1e15, NULL,
    "Sparse table: seed of the initial values" },
  { "table.*", "max_grad", KS_VALUE_DOUBLE, "100", 1e-6, 1e12, NULL,
    "Sparse table: a parameter server refuses a push whose gradient exceeds this per show "
    "in any element (normal training stays far below; a larger one would only freeze or "
    "wreck the rows it reaches)" },
  { "table.*", "max_new_rows", KS_VALUE_INT, "0", 0, 1e12, NULL,
    "Sparse table: a parameter server refuses a pull that would create more rows than "
    "this; 0: the most ids one batch pulls (the rows parameter's rows)" },
  { "table.*", "max_rows", KS_VALUE_INT, "0", 0, 1e15, NULL,
    "Sparse table: the most rows a parameter server holds of this table; a pull or push "
    "that would create more is refused, naming it ([data] shrink_every deletes rows); 0: "
    "a share of the server's budget ([pslib] server_memory_mb, by default a quarter of "
    "the host's memory or of its memory cgroup's limit over the host's parameter "
    "servers) with its other tables of max_rows 0 (the server's first line says the "
    "number)" },
  { "strategy", "staleness", KS_VALUE_INT, "2", 0, 1e6, NULL,
    "pslib: sparse pushes a worker may have unanswered when it pulls the next batch's rows "
    "(0: each step waits for its pushes, and the dense part on the servers is sync; more: "
    "async)" },
  { "strategy", "dense", KS_VALUE_CHOICE, "servers", 1, 0, "servers|allreduce",
    "pslib: where the dense part of the model trains: on the servers' dense tables, or on "
    "the workers with its gradients averaged every step (PERSIA's hybrid)" },
  { "trace", "path", KS_VALUE_STRING, "", 1, 0, NULL,
    "A pipelined run writes a Chrome trace (Perfetto, chrome://tracing) of every stage's "
    "forwards, backwards, sends and receives here; empty for none" },
};

/* Plugins of the ksdist tree: a config may configure one that is not built on this
 * machine (a [cuda] group on a CPU-only build) and only gets a warning. */
static const char *const first_party_plugins[] = {
  "openblas", "cuda", "optim", "store", "roles", "gloo", "nccl", "shm",
  "collective", "transpiler", "pslib", "segment", NULL,
};

const KsKeyDesc *
ks_core_schema (gsize *n_keys)
{
  *n_keys = G_N_ELEMENTS (core_schema);
  return core_schema;
}

const KsKeyDesc *
ks_core_key (const char *group, const char *key)
{
  for (gsize i = 0; i < G_N_ELEMENTS (core_schema); i++)
    if (strcmp (core_schema[i].group, group) == 0 && strcmp (core_schema[i].key, key) == 0)
      return &core_schema[i];
  g_return_val_if_reached (NULL);
}

gboolean
ks_is_first_party_plugin (const char *name)
{
  return g_strv_contains (first_party_plugins, name);
}
