#!/bin/sh
# Data-parallel step time with and without overlapping the gradient allreduce with
# backward: `ksdist launch -n 2` on an MLP of two 1024-wide layers (about 1.05 M
# parameters, 4 buckets of 1 MiB), 128 rows per worker, one OpenBLAS thread each.
# The two settings alternate, ROUNDS times each; the median samples/s of each and their
# ratio are printed. Run from the build tree: sh bench/bench-overlap.sh [ROUNDS]
set -eu
rounds=${1:-5}
top=$(cd "$(dirname "$0")/.." && pwd)
path=
for p in openblas optim store roles gloo collective; do path="$path$top/plugins/$p/.libs:"; done
export KS_PLUGIN_PATH="$path" KS_PLUGIN_SYSTEM_PATH=

run () {
  "$top/tools/ksdist" launch -n 2 --set model.hidden=1024,1024 --set train.batch=128 \
    --set train.steps=60 --set train.log_every=60 --set openblas.threads=1 \
    --set collective.bucket_kb=1024 --set collective.overlap="$1" 2>&1 |
    sed -n 's/^\[rank 0\] step 60\/60 .*samples\/s \([0-9.]*\).*/\1/p'
}

median () { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

on=$(mktemp) off=$(mktemp)
trap 'rm -f "$on" "$off"' EXIT
i=0
while [ "$i" -lt "$rounds" ]; do
  run true >>"$on"
  run false >>"$off"
  i=$((i + 1))
done
a=$(median <"$on") b=$(median <"$off")
echo "samples/s (median of $rounds): overlap $a, serial $b, ratio $(echo "$a $b" | awk '{ printf "%.3f", $1 / $2 }')"
