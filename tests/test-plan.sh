#!/bin/sh
# The plan: every mode x executor x task x mixed precision the README lists either trains
# two steps under ksdist launch, or `ksdist config` refuses it (exit 2), ksdist launch
# refuses it once with the same message before any process starts (exit 2), and `ksdist
# train` in each process refuses it with that message too. Then the mix-ups that once
# ran silently, each refused or stopped with a message. TAP output; the matrix is also
# written to plan-matrix.txt in the test's log. Needs KSDIST, KS_SRCDIR, KS_BUILD_PLUGINS.
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
ex=$KS_SRCDIR/examples
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-plan-XXXXXX")
trap 'rm -rf "$dir"' EXIT
for p in gloo transpiler pslib; do
  if [ ! -e "$KS_BUILD_PLUGINS/$p/.libs/$p.so" ]; then
    echo "1..0 # SKIP the $p plugin was not built"
    exit 0
  fi
done
cd "$dir" || exit 1
"$KSDIST" datagen ctr ctr --train 600 --test 200 >/dev/null 2>&1 \
  && "$KSDIST" datagen glyphs glyphs --alphabets 6 --characters 8 --per-class 12 >/dev/null 2>&1 \
  || { echo "1..0 # SKIP ksdist datagen failed"; exit 0; }

common="--set train.steps=2 --set train.log_every=1 --set optim.warmup=0 --set openblas.threads=1 --set comm.timeout=30"
task_args () {
  case $1 in
    mlp) echo "$ex/default.ini --set data.samples=256 --set train.batch=32" ;;
    gpt) echo "$ex/gpt-words.ini --set model.context=8 --set model.width=16 --set train.batch=4 --set optim.clip_norm=0" ;;
    addition) echo "$ex/addition.ini --set train.batch=8 --set train.checkpoint_dir= --set optim.clip_norm=0" ;;
    ctr) echo "$ex/ctr-pslib.ini --set data.path=ctr --set train.batch=32" ;;
    reptile) echo "$ex/reptile-glyphs.ini --set data.path=glyphs --set meta.ways=3 --set meta.shots=2 --set meta.train_shots=2 --set meta.meta_batch=2 --set meta.eval_tasks=2 --set meta.eval_inner_iters=1 --set meta.filters=8" ;;
  esac
}
world_args () { # mode, executor: ksdist launch's and ksdist config's options
  case $1 in collective) echo "-n 2" ;; *) echo "--servers 1 --workers 2" ;; esac
}
config_world () {
  case $1 in collective) echo "--workers 2" ;; *) echo "--workers 2 --servers 1" ;; esac
}

n=0
echo "1..110"
: >"$dir/matrix"
for task in mlp gpt addition ctr reptile; do
  for mode in collective transpiler pslib; do
    for exec in single pipeline; do
      for amp in off bf16 fp16; do
        n=$((n + 1))
        sets="$(task_args $task) $common --set job.mode=$mode --set amp.dtype=$amp"
        [ $exec = pipeline ] && sets="$sets --set pipeline.stages=2"
        name="$task x $mode x $exec x amp $amp"
        # shellcheck disable=SC2086
        "$KSDIST" config $(config_world $mode) $sets >/dev/null 2>"$dir/c.err"; c=$?
        # shellcheck disable=SC2086
        "$KSDIST" launch $(world_args $mode) $sets >"$dir/l.out" 2>"$dir/l.err"; l=$?
        said=$(tail -n 1 "$dir/c.err" | sed 's/^ksdist: //')
        if [ $c = 0 ]; then
          if [ $l = 0 ] && grep -q "eval [a-z_]* [0-9.]* (" "$dir/l.out"; then
            echo "ok $n - $name trains"
            echo "trains  $name" >>"$dir/matrix"
          else
            echo "not ok $n - $name: config accepts it, launch exits $l"
            tail -n 15 "$dir/l.out" "$dir/l.err" | sed 's/^/# /'
          fi
          continue
        fi
        # refused: by launch once, before any process, and by train in every process
        # shellcheck disable=SC2086
        "$KSDIST" launch $(world_args $mode) -- "$KSDIST" train $sets >"$dir/t.out" 2>&1; t=$?
        if [ $c = 2 ] && [ $l = 2 ] && grep -qF "$said" "$dir/l.err" \
           && ! grep -q '^\[rank' "$dir/l.out" && [ $t != 0 ] && grep -qF "$said" "$dir/t.out"; then
          echo "ok $n - $name refused: $said"
          echo "refused $name: $said" >>"$dir/matrix"
        else
          echo "not ok $n - $name: config $c, launch $l, train $t; config said: $said"
          tail -n 5 "$dir/l.err" "$dir/t.out" | sed 's/^/# /'
        fi
      done
    done
  done
done
sed 's/^/# /' "$dir/matrix"

# refused: status 2 and the message
refused () { # name, message, command...
  name=$1 want=$2
  shift 2
  n=$((n + 1))
  "$@" >"$dir/r.out" 2>"$dir/r.err"; s=$?
  if [ $s = 2 ] && grep -qF "$want" "$dir/r.err" && ! grep -q '^\[rank' "$dir/r.out"; then
    echo "ok $n - $name"
  else
    echo "not ok $n - $name: exit $s"
    tail -n 5 "$dir/r.out" "$dir/r.err" | sed 's/^/# /'
  fi
}
refused "dp-pp.ini on 3 workers, by config and once by launch" \
  "[pipeline] stages = 2 but the job has 3 workers" "$KSDIST" config -n 3 "$ex/dp-pp.ini"
refused "dp-pp.ini on 3 workers, once by launch" \
  "[pipeline] stages = 2 but the job has 3 workers" "$KSDIST" launch -n 3 "$ex/dp-pp.ini"
refused "[strategy] a_sync = false with k_steps = 5" \
  "[strategy] a_sync = false with k_steps = 5" "$KSDIST" config "$ex/ps-mlp.ini" \
  --set strategy.mode=auto --set strategy.a_sync=false --set strategy.k_steps=5
refused "[data] path with generated spirals" "[data] path is set, but" \
  "$KSDIST" config "$ex/default.ini" --set data.path=/usr/share/dict/words
refused "[train] export_dir under Reptile" "[train] export_dir: meta-learning has no" \
  "$KSDIST" config "$ex/reptile-glyphs.ini" --set train.export_dir=out
refused "an unwritable checkpoint_dir" "[train] checkpoint_dir = /dev/null/ck: /dev/null is not a directory" \
  "$KSDIST" config "$ex/default.ini" --set train.checkpoint_dir=/dev/null/ck
refused "an unwritable export_dir" "[train] export_dir = /dev/null/ex: /dev/null is not a directory" \
  "$KSDIST" config "$ex/default.ini" --set train.export_dir=/dev/null/ex

# [strategy] where the collective mode reads none of it: a shared parameter-server config
# run collective is legitimate, so a warning names the key, once, by config
n=$((n + 1))
"$KSDIST" config "$ex/ps-mlp.ini" --set job.mode=collective >/dev/null 2>"$dir/w.err"; s=$?
if [ $s = 0 ] && [ "$(grep -c 'warning: \[strategy\] mode is set, but \[job\] mode = collective (its settings are in \[collective\]) does not use it.*ignored' "$dir/w.err")" = 1 ]; then
  echo "ok $n - [strategy] with the collective mode: warned, not ignored silently"
else
  echo "not ok $n - [strategy] with the collective mode: exit $s"
  sed 's/^/# /' "$dir/w.err"
fi

# [pipeline] keys in a run without a pipeline do nothing: said once, naming them (a
# pipeline's config run on one process is its reference); none said once it pipelines
n=$((n + 1))
"$KSDIST" config "$ex/gpt-pipeline.ini" --set pipeline.stages=1 --set pipeline.virtual_stages=1 \
  --set pipeline.micro_batches=1 >/dev/null 2>"$dir/p.err"; s=$?
"$KSDIST" config "$ex/gpt-pipeline.ini" >/dev/null 2>"$dir/p2.err"; s2=$?
if [ $s = 0 ] && [ $s2 = 0 ] && [ "$(grep -c 'warning: \[pipeline\] schedule, recompute_interval are set, but this run has no pipeline .*(ignored)' "$dir/p.err")" = 1 ] \
    && ! grep -q "no pipeline" "$dir/p2.err"; then
  echo "ok $n - [pipeline] keys without a pipeline: warned, not ignored silently"
else
  echo "not ok $n - [pipeline] keys without a pipeline: exit $s / $s2"
  sed 's/^/# /' "$dir/p.err" "$dir/p2.err"
fi

# a key of a plugin that the run's choices rule out is refused before anything starts:
# another communicator's, another compute backend's, another mode's; auto, or a
# hierarchical communicator's inner one of shared memory, may use it
unused_plugin () { # what, want (exit 2 and its line, or 0), --set...
  what=$1 want=$2
  shift 2
  n=$((n + 1))
  "$KSDIST" config "$ex/default.ini" "$@" >/dev/null 2>"$dir/u.err"; s=$?
  if { [ "$want" = 0 ] && [ $s = 0 ]; } || { [ "$want" != 0 ] && [ $s = 2 ] && grep -qF "ksdist: $want" "$dir/u.err"; }; then
    echo "ok $n - $what"
  else
    echo "not ok $n - $what: exit $s"
    sed 's/^/# /' "$dir/u.err"
  fi
}
unused_plugin "[shm] with [comm] backend = gloo: refused" \
  "[shm] chunk_kib is set, but this run does not use the shm plugin ([comm] backend = gloo); remove it, or choose shm as [comm] backend" \
  --set comm.backend=gloo --set shm.chunk_kib=64
unused_plugin "[gloo] with [comm] backend = shm: refused" \
  "[gloo] algorithm is set, but this run does not use the gloo plugin ([comm] backend = shm)" \
  --set comm.backend=shm --set gloo.algorithm=ring
unused_plugin "[transpiler] with [job] mode = collective: refused" \
  "[transpiler] block_floats is set, but this run does not use the transpiler plugin ([job] mode = collective); remove it, or choose transpiler as [job] mode" \
  --set transpiler.block_floats=4096
unused_plugin "[shm] with [comm] backend = auto: accepted" 0 --set shm.chunk_kib=64
unused_plugin "[shm] with gloo made hierarchical: accepted" 0 \
  --set comm.backend=gloo --set comm.hierarchical=true --set shm.chunk_kib=64

# a run shortened from outside its file runs: the file's longer warmup shrinks, said once;
# a warmup set from outside as well stays the user's, and the optimizer refuses it
n=$((n + 1))
"$KSDIST" config "$ex/default.ini" --set train.steps=20 >"$dir/s.out" 2>"$dir/s.err"; s=$?
if [ $s = 0 ] && [ "$(grep -c 'warning: \[optim\] warmup = 100 is not shorter than this run of 20 steps: warming up for 2' "$dir/s.err")" = 1 ]; then
  echo "ok $n - a shortened example runs, its warmup shrunk with one warning"
else
  echo "not ok $n - a shortened example: exit $s"
  sed 's/^/# /' "$dir/s.err"
fi
n=$((n + 1))
"$KSDIST" config "$ex/default.ini" --set train.steps=20 --set optim.warmup=100 >/dev/null 2>"$dir/s.err"; s=$?
if [ $s != 0 ] && grep -q 'needs total_steps (20) greater than warmup (100)' "$dir/s.err"; then
  echo "ok $n - a warmup set with the steps stays the user's: refused"
else
  echo "not ok $n - a warmup set with the steps: exit $s"
  sed 's/^/# /' "$dir/s.err"
fi

# the plan's warnings: once, by ksdist launch's check, not again by each worker
n=$((n + 1))
"$KSDIST" launch -n 2 "$ex/gpt-pipeline.ini" --set train.steps=6 --set model.layers=2 \
  --set model.context=8 --set model.width=16 --set train.log_every=3 >"$dir/w.out" 2>&1; s=$?
c=$(grep -c 'warmup = 100 is not shorter than this run of 6 steps' "$dir/w.out")
if [ $s = 0 ] && [ "$c" = 1 ]; then
  echo "ok $n - launch -n 2: the plan's warning printed once"
else
  echo "not ok $n - launch -n 2: exit $s, the plan's warning printed $c times"
  sed 's/^/# /' "$dir/w.out" | tail -n 20
fi

# a pslib server budget past this host's memory: refused by config, before any server
n=$((n + 1))
"$KSDIST" config "$ex/ctr-pslib.ini" --servers 2 -n 2 --set pslib.server_memory_mb=1000000000 \
  >/dev/null 2>"$dir/m.err"; s=$?
if [ $s = 2 ] && grep -q 'server_memory_mb = 1000000000: more than the [0-9]* MiB this process may use' "$dir/m.err"; then
  echo "ok $n - config: [pslib] server_memory_mb past this host's memory refused"
else
  echo "not ok $n - config: server_memory_mb past the memory: exit $s"
  sed 's/^/# /' "$dir/m.err"
fi

# a diverging run stops at the step whose loss is not finite (exit 1, no crash), alone and
# pipelined
diverges () { # name, command...
  name=$1
  shift
  n=$((n + 1))
  "$@" >"$dir/d.out" 2>"$dir/d.err"; s=$?
  cat "$dir/d.out" "$dir/d.err" >"$dir/d.all"
  if [ $s = 1 ] && grep -q "step [0-9]*: the training loss is \|the held-out loss is " "$dir/d.all" \
     && ! grep -q "eval loss" "$dir/d.all"; then
    echo "ok $n - $name: $(grep -o 'step [0-9]*: the [a-z-]* loss is [^:]*' "$dir/d.all" | head -n 1)"
  else
    echo "not ok $n - $name: exit $s"
    tail -n 5 "$dir/d.out" "$dir/d.err" | sed 's/^/# /'
  fi
}
nan="--set optim.lr=1000 --set optim.warmup=0 --set optim.schedule=constant --set optim.clip_norm=0 --set train.steps=30 --set train.log_every=10 --set model.context=16 --set model.width=32 --set train.batch=8"
# shellcheck disable=SC2086
diverges "a GPT at lr 1000" "$KSDIST" train "$ex/gpt-words.ini" $nan
# shellcheck disable=SC2086
diverges "a pipelined GPT at lr 1000" "$KSDIST" launch -n 2 "$ex/gpt-pipeline.ini" $nan \
  --set model.layers=2 --set pipeline.micro_batches=2 --set pipeline.recompute_interval=0
