#!/bin/sh
# Pipeline bubble: `ksdist launch -n P` trains an MLP pipelined whose 8 middle Linear
# layers are 1024 x 1024 (the first and last are small), cut by parameters so that every
# stage gets as many big ones, and writes a Chrome trace ([trace] path). From it, per
# step after the first: bubble = 1 - (forward and backward time summed over the stages)
# / (P x the step's span, from the first stage starting to the last backward ending);
# the table has their mean beside the theory for equal stages, (p-1)/(v m + p-1). The
# measured bubble also holds the transfers and per-micro-batch overheads the theory
# leaves out. A second table gives each stage's peak memory with recompute off and on.
# From the build tree:
#   bench/run-pipeline.sh [P]     (default 2; more stages than cores time-share them)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
p=${1:-2} python=${PYTHON:-/usr/bin/python3}
out=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-pipeline-XXXXXX")
trap 'rm -rf "$out"' EXIT
export KS_PLUGIN_PATH=$(for x in openblas optim store roles gloo segment; do
  printf "%s:" "$top/plugins/$x/.libs"; done) KS_PLUGIN_SYSTEM_PATH= OPENBLAS_NUM_THREADS=1
hidden=1024,1024,1024,1024,1024,1024,1024,1024,1024

echo "# pipeline bubble: $p stages, MLP of 8 x (1024 x 1024) Linear layers, batch 512, 30 steps"
printf "%-12s %3s %3s %10s %10s %8s\n" schedule v m "bubble%" "theory%" "diff_pp"
for run in "1f1b 1 2" "1f1b 1 4" "1f1b 1 8" "1f1b 1 16" "fthenb 1 8" \
           "interleaved 2 4" "interleaved 2 8" "interleaved 2 16"; do
  set -- $run
  "$top/tools/ksdist" launch -n "$p" "$top/examples/default.ini" --set train.steps=30 \
    --set train.log_every=30 --set train.batch=512 --set model.hidden=$hidden \
    --set pipeline.stages="$p" --set pipeline.schedule="$1" --set pipeline.virtual_stages="$2" \
    --set pipeline.micro_batches="$3" --set pipeline.seg_method=parameters \
    --set trace.path="$out/trace.json" >"$out/log" 2>&1 || { cat "$out/log" >&2; exit 1; }
  "$python" - "$out/trace.json" "$p" "$@" <<'PY'
import json, sys
path, p, schedule, v, m = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
steps = {}  # step -> list of (stage, event)
seen = [0] * p
for e in json.load(open(path)):
    if e.get("ph") != "X":
        continue
    s = e["tid"]
    steps.setdefault(seen[s], []).append(e)
    if e["cat"] == "optimizer":
        seen[s] += 1
bubbles = []
for k in sorted(steps)[1:]:
    ev = steps[k]
    compute = [e for e in ev if e["cat"] in ("forward", "backward")]
    start = min(e["ts"] for e in ev)
    end = max(e["ts"] + e["dur"] for e in compute)
    busy = sum(e["dur"] for e in compute)
    bubbles.append(1 - busy / (p * (end - start)))
theory = (p - 1) / (v * m + p - 1)
b = 100 * sum(bubbles) / len(bubbles)
print("%-12s %3d %3d %10.2f %10.2f %+8.2f" % (schedule, v, m, b, 100 * theory, b - 100 * theory))
PY
done

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
