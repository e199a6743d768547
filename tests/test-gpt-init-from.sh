#!/bin/sh
# [model] init_from of a GPT from its `ksdist export --torch` file (nanoGPT's names, the
# GPT task's KsTrainTask.torch_name): a run with lr 0 evaluates as the exported run ended,
# not as a fresh model. TAP output. Needs KSDIST (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
export OPENBLAS_NUM_THREADS=1
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-gptinit-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
echo "1..1"
for i in $(seq 40); do echo "the quick brown fox jumps over the lazy dog."; done >fox.txt
set -- --set model.type=gpt --set data.task=text --set data.path=fox.txt \
  --set model.context=16 --set model.layers=2 --set model.heads=2 --set model.width=16 \
  --set train.batch=4 --set train.log_every=30 --set optim.warmup=0
evalof () { sed -n 's/^eval loss \([0-9.]*\) .*/\1/p' "$1"; }
"$KSDIST" train "$@" --set train.steps=30 --set train.export_dir=ex >a.log 2>&1 &&
  "$KSDIST" export --torch ex -o g.safetensors >x.log 2>&1 &&
  "$KSDIST" train "$@" --set train.steps=1 --set optim.lr=0 \
    --set model.init_from=g.safetensors >b.log 2>&1 &&
  "$KSDIST" train "$@" --set train.steps=1 --set optim.lr=0 >c.log 2>&1
a=$(evalof a.log) b=$(evalof b.log) c=$(evalof c.log)
if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$b" != "$c" ] \
   && grep -q 'started from the 30 weights of g.safetensors' b.log; then
  echo "ok 1 - a GPT started from its PyTorch-named weights evaluates as it ended ($b; fresh $c)"
else
  echo "not ok 1 - trained $a, started from its weights '$b', fresh '$c'"
  sed 's/^/# /' a.log x.log b.log | tail -n 20
fi
