#!/bin/sh
# Pipeline bubble and recompute memory. `ksdist bench pipeline -n P` trains an MLP
# pipelined whose 8 middle Linear layers are 1024 x 1024, cut by parameters, for several
# schedules, v and m, and prints the bubble measured from a Chrome trace beside the
# theory for equal stages, (p-1)/(v m + p-1) (see tools/bench-pipeline.c). A second
# table gives each stage's peak memory with recompute off and on. From the build tree:
#   bench/run-pipeline.sh [P]     (default 2; more stages than cores time-share them)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
p=${1:-2}
out=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-pipeline-XXXXXX")
trap 'rm -rf "$out"' EXIT
export KS_PLUGIN_PATH=$(for x in openblas optim store roles gloo shm segment; do
  printf "%s:" "$top/plugins/$x/.libs"; done) KS_PLUGIN_SYSTEM_PATH= OPENBLAS_NUM_THREADS=1
hidden=1024,1024,1024,1024,1024,1024,1024,1024,1024

"$top/tools/ksdist" bench pipeline -n "$p"

# Recompute: each stage's peak resident memory (getrusage) with the activations of every
# layer kept between forward and backward, and with only each layer's output kept
# (recompute_interval = 1); batch 4096 in 8 micro-batches, so activations weigh.
echo
echo "# recompute: peak resident MiB per stage, batch 4096 in 8 micro-batches, 5 steps"
printf "%-8s %9s %s\n" schedule recompute "stage 0 .. $((p - 1))"
for run in "fthenb 0" "fthenb 1" "1f1b 0" "1f1b 1"; do
  set -- $run
  "$top/tools/ksdist" launch -n "$p" "$top/examples/default.ini" --set train.steps=5 \
    --set train.log_every=5 --set train.batch=4096 --set data.samples=8192 \
    --set model.hidden=$hidden --set pipeline.stages="$p" --set pipeline.schedule="$1" \
    --set pipeline.micro_batches=8 --set pipeline.seg_method=parameters \
    --set pipeline.recompute_interval="$2" >"$out/log" 2>&1 || { cat "$out/log" >&2; exit 1; }
  printf "%-8s %9s" "$1" "$2"
  for s in $(seq 0 $((p - 1))); do
    printf " %8s" "$(sed -n "s/.*stage $s: peak resident memory \([0-9.]*\) MiB.*/\1/p" "$out/log")"
  done
  echo
done
