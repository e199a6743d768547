#!/bin/sh
# The pslib mode on this machine, in one run:
#  1. the sparse table alone (bench/bench-sparse): N rows of 26 slots' ids (default 10M)
#     made, pulled and pushed, its memory per row, its save and load, beside memcpy's
#     bandwidth measured in the same run;
#  2. examples/ctr-pslib.ini on data of `ksdist datagen ctr` with W = 2 workers: samples/s,
#     the servers' pull and push rates (rows/s while serving them) and the AUC reached,
#     for S = 1 and 2 servers, staleness 0 and 4, and the dense part on the servers or
#     allreduced among the workers.
# From the build tree:
#   bench/run-pslib.sh [ROWS [SAMPLES]]      (10000000 rows, 2000000 training samples)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
rows=${1:-10000000}
samples=${2:-2000000}
export KS_PLUGIN_PATH=
for p in openblas optim store roles gloo collective pslib; do
  KS_PLUGIN_PATH=$KS_PLUGIN_PATH${KS_PLUGIN_PATH:+:}$top/plugins/$p/.libs
done
export KS_PLUGIN_SYSTEM_PATH= OPENBLAS_NUM_THREADS=1
[ -x "$top/bench/bench-sparse" ] || make -C "$top" bench/bench-sparse >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== the sparse table alone, $rows rows"
mkdir "$work/table"
"$top/bench/bench-sparse" "$rows" "$work/table"

echo
echo "== training, 2 workers, $samples samples (one epoch)"
"$top/tools/ksdist" datagen ctr "$work/data" --train "$samples" --test 100000 --vocab 1000000 \
  --files 8
steps=$((samples / 2 / 256))
printf '%-8s %-10s %-10s %10s %8s %8s %14s %14s\n' servers staleness dense samples/s seconds auc \
  "pull Mrows/s" "push Mrows/s"
for servers in 1 2; do
  for staleness in 0 4; do
    for dense in servers allreduce; do
      start=$(date +%s.%N)
      out=$("$top/tools/ksdist" launch --servers "$servers" --workers 2 \
        "$top/examples/ctr-pslib.ini" --set data.path="$work/data" --set train.steps=$steps \
        --set train.log_every=$steps --set strategy.staleness=$staleness \
        --set strategy.dense=$dense --set openblas.threads=1 2>&1)
      end=$(date +%s.%N)
      rate=$(echo "$out" | sed -n 's/.*\[rank 0\] step .* samples\/s \([0-9]*\).*/\1/p' | tail -1)
      auc=$(echo "$out" | sed -n 's/.*\[rank 0\] eval auc \([0-9.]*\).*/\1/p')
      pull=$(echo "$out" | sed -n 's/.*server 0: served .* (\([0-9.]*\) M rows\/s while.*/\1/p')
      push=$(echo "$out" | sed -n 's/.*server 0: served .* pushed rows (\([0-9.]*\) M rows\/s).*/\1/p')
      printf '%-8s %-10s %-10s %10s %8.1f %8s %14s %14s\n' "$servers" "$staleness" "$dense" \
        "$rate" "$(awk "BEGIN { print $end - $start }")" "$auc" "$pull" "$push"
    done
  done
done
