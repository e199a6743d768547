/* The core's configuration schema: every group and key the core itself reads.
 * Later work appends its groups here; plugins declare theirs in their descriptors. */
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
  { "model", "type", KS_VALUE_CHOICE, "mlp", 1, 0, "mlp|layers|gpt|ctr",
    "The model `ksdist train` builds: mlp (for spirals, rings), layers (the [layer.NAME] "
    "groups listed in [model] net), gpt (for text, addition) or ctr (for ctr: sparse slots' "
    "embeddings and integer features into an MLP)" },
  { "model", "net", KS_VALUE_LIST, "", 1, 0, NULL,
    "layers: the names of the [layer.NAME] groups, input to output (e.g. conv1, pool1, "
    "flat, out); the last layer gives one value per class (per target with loss = mse, one "
    "logit with loss = logistic)" },
  { "model", "loss", KS_VALUE_CHOICE, "cross_entropy", 1, 0, "cross_entropy|mse|logistic",
    "layers: cross_entropy (softmax over classes; metric accuracy), mse (mean squared "
    "error against values; metric RMSE) or logistic (binary: sigmoid and binary cross "
    "entropy of one logit a row against labels 0 and 1; metric AUC)" },
  { "model", "hidden", KS_VALUE_LIST, "64,64", 1, 0, NULL,
    "Sizes of the MLP's hidden layers, input to output (mlp and ctr)" },
  { "model", "activation", KS_VALUE_CHOICE, "tanh", 1, 0, "relu|tanh|sigmoid|gelu",
    "Activation after each hidden layer of the MLP" },
  { "model", "dropout", KS_VALUE_DOUBLE, "0", 0, 0.95, NULL,
    "Dropout rate: after each hidden layer of the MLP; on the GPT's embeddings and on each "
    "residual branch before it is added. 0 for none; evaluation never drops" },
  { "model", "context", KS_VALUE_INT, "64", 2, 4096, NULL, "GPT: tokens per sequence" },
  { "model", "layers", KS_VALUE_INT, "2", 1, 256, NULL, "GPT: transformer blocks" },
  { "model", "heads", KS_VALUE_INT, "4", 1, 256, NULL, "GPT: attention heads (divide width)" },
  { "model", "width", KS_VALUE_INT, "64", 1, 65536, NULL, "GPT: embedding width" },
  { "model", "skip", KS_VALUE_BOOL, "false", 1, 0, NULL,
    "GPT: a long skip connection, the embeddings added to the last block's output (on a "
    "pipeline it goes straight from the first stage to the last)" },
  { "model", "init_from", KS_VALUE_STRING, "", 1, 0, NULL,
    "A safetensors file of weights to start from instead of the initialisers: a "
    "checkpoint's model.safetensors or PyTorch's layout and names (what `ksdist export "
    "--torch` writes); every parameter must be there with its shape, and nothing else" },
  { "model", "seed", KS_VALUE_INT, "1", 0, 1e15, NULL, "Seed of the parameter initialisers" },
  { "data", "task", KS_VALUE_CHOICE, "spirals", 1, 0,
    "spirals|rings|csv|npy|idx|image_folder|tokens|text|addition|ctr",
    "spirals, rings: generated classification in the plane (mlp, layers); csv, npy, idx, "
    "image_folder: your own rows from [data] path (mlp, layers); tokens: a language model (layers) on a "
    "token file (llm.c's .bin shards, nanoGPT's train.bin); text: next-character "
    "prediction on [data] path (gpt); addition: lines such as 12+34=46 (gpt), scored by "
    "exact match on held-out sums; ctr: click-through rate on Criteo-format files in [data] "
    "path's train/ and test/ (ctr), scored by AUC" },
  { "data", "images", KS_VALUE_CHOICE, "characters", 1, 0, "characters|colour",
    "Few-shot image set at [data] path (train, val, test; a folder of images per class): "
    "characters, 28x28 grey with rotations as more training classes (Omniglot; `ksdist "
    "datagen glyphs`), or colour, 84x84 RGB (Mini-ImageNet; `ksdist datagen images`)" },
  { "data", "cache_mb", KS_VALUE_INT, "512", 0, 1e7, NULL,
    "Decoded images kept in memory after their first read, in MiB" },
  { "data", "bad_images", KS_VALUE_CHOICE, "error", 1, 0, "error|skip",
    "A file of the image set that does not decode is an error naming it, or skipped and "
    "counted" },
  { "meta", "algorithm", KS_VALUE_CHOICE, "none", 1, 0, "none|reptile",
    "Meta-learning: reptile trains on few-shot tasks of the image set at [data] path ([train] "
    "steps meta-steps, [train] optimizer in the inner loop); none trains as [model] says" },
  { "meta", "ways", KS_VALUE_INT, "5", 2, 1000, NULL, "Classes of a task" },
  { "meta", "shots", KS_VALUE_INT, "5", 1, 10000, NULL, "Training images of each class of a task" },
  { "meta", "train_shots", KS_VALUE_INT, "0", 0, 10000, NULL,
    "Images of each class in a training task (supervised-reptile's --train-shots: its "
    "Omniglot runs train on 10 or 15 and test on 5 or 1); 0: shots" },
  { "meta", "inner_batch", KS_VALUE_INT, "5", 1, 100000, NULL, "Images per inner step" },
  { "meta", "inner_iters", KS_VALUE_INT, "20", 1, 1e6, NULL, "Inner steps on a training task" },
  { "meta", "meta_step", KS_VALUE_DOUBLE, "0.1", 0, 1, NULL,
    "Meta step size at the first meta-step (the fraction of the way to the tasks' weights)" },
  { "meta", "meta_step_final", KS_VALUE_DOUBLE, "0", 0, 1, NULL,
    "Meta step size at the last meta-step (linear in between)" },
  { "meta", "meta_batch", KS_VALUE_INT, "1", 1, 100000, NULL,
    "Tasks per meta-step on each worker (ksdist launch -n N: N times as many in all)" },
  { "meta", "eval_inner_batch", KS_VALUE_INT, "5", 1, 100000, NULL,
    "Images per fine-tuning step on an evaluation task's shots" },
  { "meta", "eval_inner_iters", KS_VALUE_INT, "50", 1, 1e6, NULL,
    "Fine-tuning steps on an evaluation task" },
  { "meta", "eval_tasks", KS_VALUE_INT, "1000", 1, 1e7, NULL,
    "Test tasks of the final evaluation (held-out classes); [train] eval_every evaluates "
    "on a tenth as many of val" },
  { "meta", "filters", KS_VALUE_INT, "64", 1, 4096, NULL,
    "Filters of each of the 4 convolutions (supervised-reptile: 64 for characters, 32 for "
    "colour)" },
  { "data", "shrink_every", KS_VALUE_INT, "0", 0, 1e12, NULL,
    "ctr: steps between shrinks of the sparse table (a day's end: show and click decay, rows "
    "of low score or unseen too long go; see [table.NAME]), asked by the first worker; 0 "
    "never" },
  { "data", "bad_lines", KS_VALUE_CHOICE, "error", 1, 0, "error|skip",
    "ctr: a malformed line of the data is an error naming its file and line, or skipped and "
    "counted" },
  { "data", "digits", KS_VALUE_INT, "2", 1, 9, NULL,
    "Addition task: the largest number of digits of an operand" },
  { "data", "path", KS_VALUE_STRING, "/usr/share/dict/words", 1, 0, NULL,
    "Text corpus of the text task (the last tenth is held out; by default the English word "
    "list of Debian's wamerican); the ctr task's directory of train/ and test/ files; csv: "
    "a CSV or TSV file (gzip read directly), or a folder or glob (data/part-*.csv) of many "
    "of the same columns, their rows one after another in name order; npy: the features' "
    ".npy file, or a folder or glob of NAME.npy files each with its labels in "
    "NAME.labels.npy beside it; npy and uncompressed IDX rows stay in their files "
    "(memory-mapped: a data set larger than memory trains), the other formats and gzipped "
    "files load into memory; idx: a folder of MNIST's four files (train-images-idx3-ubyte, ..., t10k-labels-idx1-ubyte, or .gz); "
    "image_folder: a folder of one sub-folder of PNG or JPEG images per class "
    "(torchvision's ImageFolder); tokens: the training tokens' file" },
  { "data", "height", KS_VALUE_INT, "32", 1, 4096, NULL,
    "image_folder: the rows' image height; each image is resized to height x width" },
  { "data", "width", KS_VALUE_INT, "32", 1, 4096, NULL, "image_folder: the rows' image width" },
  { "data", "channels", KS_VALUE_CHOICE, "3", 1, 0, "1|3",
    "image_folder: 1 (grey, the mean of red, green and blue) or 3 (RGB)" },
  { "data", "labels", KS_VALUE_STRING, "", 1, 0, NULL,
    "npy: the labels' .npy file, one per row of [data] path (empty when the path names many "
    "files: NAME.labels.npy pairs with NAME.npy)" },
  { "data", "test_path", KS_VALUE_STRING, "", 1, 0, NULL,
    "csv, npy: the held-out rows' file (npy: with [data] test_labels), or a folder or glob "
    "of them as [data] path (read by every worker, also with split_files); image_folder: the "
    "held-out images' folder, its classes the same; tokens: the "
    "held-out tokens' file; empty: [data] holdout of the rows (chosen by a seeded hash) or "
    "of the tokens (the file's end)" },
  { "data", "test_labels", KS_VALUE_STRING, "", 1, 0, NULL, "npy: the held-out labels' .npy file" },
  { "data", "holdout", KS_VALUE_DOUBLE, "0.1", 0.001, 0.9, NULL,
    "csv, npy without a test_path: the fraction of rows held out (by a hash of the row "
    "number, its file's number among many and [data] seed, so every run and every worker "
    "holds out the same rows)" },
  { "data", "label", KS_VALUE_STRING, "", 1, 0, NULL,
    "csv: the label column: a 0-based index when written as digits (a header cell named 4 "
    "is picked by its index too), else a header name; empty: the last column" },
  { "data", "dtype", KS_VALUE_CHOICE, "uint16", 1, 0, "uint16|uint32",
    "tokens: the token files' integers: uint16 (llm.c's shards, nanoGPT's train.bin) or "
    "uint32 (a plain file, for vocabularies over 65,536); a file that looks read with the "
    "wrong one (many 0 tokens as uint16, ids over 16M as uint32) is warned about" },
  { "data", "missing", KS_VALUE_CHOICE, "error", 1, 0, "error|skip|mean|zero",
    "csv: a missing cell (empty, NA, N/A or ?) is an error naming it, or its record is "
    "skipped (one warning counts them), or a missing feature is its column's mean over the "
    "training file's values (a test_path file's too; exports keep the means for ksdist "
    "infer), or 0 (a missing label is an error unless skip)" },
  { "data", "header", KS_VALUE_CHOICE, "auto", 1, 0, "auto|yes|no",
    "csv: whether the first line names the columns (auto: when a field of it other than "
    "the label's is not a number)" },
  { "data", "delimiter", KS_VALUE_CHOICE, "auto", 1, 0, "auto|comma|tab|semicolon|space",
    "csv: the field separator (auto: tab for .tsv, else comma)" },
  { "data", "normalize", KS_VALUE_CHOICE, "none", 1, 0, "none|standard",
    "csv, npy, idx: standard scales each feature by the training rows' mean and standard "
    "deviation (saved with checkpoints and exports as data.mean and data.std)" },
  { "data", "split_files", KS_VALUE_BOOL, "false", 1, 0, NULL,
    "csv, npy with [data] path a folder or glob of many files: each worker reads only its "
    "contiguous share of the files (sorted by name; at least one each) and shuffles its own "
    "rows each epoch; the held-out rows and standard moments stay those of all files; false: "
    "every worker reads every file" },
  { "data", "samples", KS_VALUE_INT, "2048", 16, 1e8, NULL, "Training samples generated" },
  { "data", "noise", KS_VALUE_DOUBLE, "0.02", 0, 10, NULL, "Gaussian noise added to each point" },
  { "data", "seed", KS_VALUE_INT, "7", 0, 1e15, NULL,
    "Seed of the generated data (the held-out set uses seed + 1), and of csv's and npy's "
    "held-out rows" },
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
  { "strategy", "send_queue_size", KS_VALUE_INT, "20", 1, 1e6, NULL,
    "Async: gradients a worker may queue for sending before its step waits" },
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
  /* [layer.NAME]: one group per layer of a [model] type = layers network */
  { "layer.*", "type", KS_VALUE_CHOICE, "linear", 1, 0,
    "linear|conv2d|max_pool|avg_pool|batch_norm|layer_norm|dropout|flatten|activation|"
    "embedding|"
    "position|transformer",
    "Layer: what it computes (required). Images are [rows, height, width, channels]; "
    "embedding, position and transformer work on [data] task = tokens or text" },
  { "layer.*", "size", KS_VALUE_INT, "1", 1, 1 << 24, NULL,
    "Layer: linear's outputs; embedding's width" },
  { "layer.*", "vocab", KS_VALUE_INT, "1", 1, 1 << 24, NULL,
    "Layer: embedding's token ids (default: the data's largest + 1)" },
  { "layer.*", "heads", KS_VALUE_INT, "1", 1, 1024, NULL,
    "Layer: transformer's attention heads (they divide the width)" },
  { "layer.*", "tie", KS_VALUE_STRING, "", 1, 0, NULL,
    "Layer: linear: the name of an earlier embedding whose table it uses, transposed, as "
    "its weights (a language model's head tied to its input, as GPT-2's)" },
  { "layer.*", "filters", KS_VALUE_INT, "1", 1, 1 << 20, NULL, "Layer: conv2d's output channels" },
  { "layer.*", "kernel", KS_VALUE_INT, "3", 1, 64, NULL,
    "Layer: conv2d's, max_pool's and avg_pool's window, kernel x kernel" },
  { "layer.*", "stride", KS_VALUE_INT, "1", 1, 64, NULL,
    "Layer: conv2d's step (default 1), max_pool's and avg_pool's (default the kernel)" },
  { "layer.*", "padding", KS_VALUE_INT, "0", 0, 64, NULL,
    "Layer: conv2d's and avg_pool's zeros on each side (avg_pool: at most half the kernel; "
    "the zeros count in each window's mean, as PyTorch's AvgPool2d)" },
  { "layer.*", "activation", KS_VALUE_CHOICE, "none", 1, 0, "none|relu|tanh|sigmoid|gelu",
    "Layer: applied to the output of linear, conv2d, batch_norm, layer_norm, or alone" },
  { "layer.*", "rate", KS_VALUE_DOUBLE, "0", 0, 0.95, NULL,
    "Layer: dropout's rate; on linear, dropout after the activation; on transformer, on "
    "each residual branch" },
  { "layer.*", "momentum", KS_VALUE_DOUBLE, "0.1", 0, 1, NULL,
    "Layer: batch_norm's running-statistics update weight" },
  { "layer.*", "eps", KS_VALUE_DOUBLE, "1e-5", 1e-12, 1, NULL,
    "Layer: batch_norm's and layer_norm's epsilon" },
  { "layer.*", "seed", KS_VALUE_INT, "0", 0, 1e15, NULL,
    "Layer: seed of its initialiser or dropout masks (default [model] seed + its index)" },
  { "layer.*", "add", KS_VALUE_STRING, "", 1, 0, NULL,
    "Layer: a skip connection: the output of the named earlier layer is added to this "
    "layer's output (after its activation); works across pipeline stages" },
  { "layer.*", "repeat", KS_VALUE_INT, "1", 1, 1000, NULL,
    "Layer: copies of this layer in a row (named NAME.0, NAME.1, ...)" },
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
    "as many as a quarter of the host's memory (or its cgroup's limit) holds, shared by "
    "the parameter servers on the host and by each one's tables (the server's first line "
    "says the number)" },
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
