#!/bin/sh
# Data-parallel step time with and without overlapping the gradient average with the
# backward, one OpenBLAS thread per process:
#   collective: `ksdist launch -n 2` on an MLP of two 1024-wide layers (about 1.05 M
#     parameters, 4 buckets of 1 MiB), 128 rows per worker; [collective] overlap.
#   pipeline: `ksdist launch -n 4`, 2 replicas of 2 stages on an MLP of four 1024-wide
#     layers (about 3.2 M parameters), 4 micro-batches of 32 rows; [pipeline] overlap
#     (false: every bucket averaged after the last backward).
# The two settings alternate, ROUNDS times each; the median samples/s of each and their
# ratio are printed. Run from the build tree:
#   sh bench/bench-overlap.sh [ROUNDS] [collective|pipeline]
set -eu
rounds=${1:-5}
what=${2:-collective}
top=$(cd "$(dirname "$0")/.." && pwd)
path=
for p in openblas optim store roles gloo collective segment; do path="$path$top/plugins/$p/.libs:"; done
export KS_PLUGIN_PATH="$path" KS_PLUGIN_SYSTEM_PATH=

case $what in
  collective)
    n=2 shape="--set model.hidden=1024,1024 --set train.batch=128 --set collective.bucket_kb=1024"
    key=collective.overlap ;;
  pipeline)
    n=4 shape="--set model.hidden=1024,1024,1024,1024 --set train.batch=128
      --set pipeline.stages=2 --set pipeline.micro_batches=4"
    key=pipeline.overlap ;;
  *) echo "usage: sh bench/bench-overlap.sh [ROUNDS] [collective|pipeline]" >&2; exit 2 ;;
esac

run () {
  # shellcheck disable=SC2086
  "$top/tools/ksdist" launch -n "$n" $shape --set train.steps=60 --set train.log_every=60 \
    --set openblas.threads=1 --set "$key=$1" 2>&1 |
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
echo "$what samples/s (median of $rounds): overlap $a, serial $b, ratio $(echo "$a $b" | awk '{ printf "%.3f", $1 / $2 }')"
