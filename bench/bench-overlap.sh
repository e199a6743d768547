#!/bin/sh
# Data-parallel step time with and without overlapping the gradient average with the
# backward, one OpenBLAS thread per process:
#   collective: `ksdist launch -n 2` on an MLP of two 1024-wide layers (about 1.05 M
#     parameters, 4 buckets of 1 MiB), 128 rows per worker; [collective] overlap.
#   pipeline: `ksdist launch -n 4`, 2 replicas of 2 stages on an MLP of four 1024-wide
#     layers (about 3.2 M parameters), 4 micro-batches of 32 rows; [pipeline] overlap
#     (false: every bucket averaged after the last backward).
#   pslib: `ksdist launch --servers 2 --workers 2 examples/ctr-pslib.ini` on generated
#     click logs ($TMPDIR/ksdist-bench-ctr, made on the first run and kept): the sparse
#     rows on the servers in both; [strategy] dense = allreduce (the dense MLP averaged
#     among the workers on the shared averaging path, overlapped with the backward)
#     against dense = servers (pushed to and pulled from the servers every step,
#     staleness 0 so both are synchronous).
# The two settings alternate, ROUNDS times each; the median samples/s of each and their
# ratio (first / second) are printed. Run from the build tree:
#   sh bench/bench-overlap.sh [ROUNDS] [collective|pipeline|pslib]
set -eu
rounds=${1:-5}
what=${2:-collective}
top=$(cd "$(dirname "$0")/.." && pwd)
path=
for p in openblas optim store roles shm gloo collective segment pslib; do path="$path$top/plugins/$p/.libs:"; done
export KS_PLUGIN_PATH="$path" KS_PLUGIN_SYSTEM_PATH=

steps=60 first=true second=false names="overlap serial" config=
case $what in
  collective)
    procs="-n 2" shape="--set model.hidden=1024,1024 --set train.batch=128 --set collective.bucket_kb=1024"
    key=collective.overlap ;;
  pipeline)
    procs="-n 4" shape="--set model.hidden=1024,1024,1024,1024 --set train.batch=128
      --set pipeline.stages=2 --set pipeline.micro_batches=4"
    key=pipeline.overlap ;;
  pslib)
    data="${TMPDIR:-/tmp}/ksdist-bench-ctr"
    [ -d "$data" ] || "$top/tools/ksdist" datagen ctr --train=100000 --test=2000 --files=2 \
      --vocab=20000 "$data" >/dev/null
    procs="--servers 2 --workers 2" config="$top/examples/ctr-pslib.ini"
    shape="--set data.path=$data --set strategy.staleness=0 --set train.batch=256
      --set train.eval_every=0"
    steps=100 key=strategy.dense first=allreduce second=servers names="allreduce servers" ;;
  *) echo "usage: sh bench/bench-overlap.sh [ROUNDS] [collective|pipeline|pslib]" >&2; exit 2 ;;
esac

run () {
  # shellcheck disable=SC2086
  "$top/tools/ksdist" launch $procs $config $shape --set train.steps=$steps \
    --set train.log_every=$steps --set openblas.threads=1 --set "$key=$1" 2>&1 |
    sed -n "s/^\[rank 0\] step $steps\/$steps .*samples\/s \([0-9.]*\).*/\1/p"
}

median () { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

on=$(mktemp) off=$(mktemp)
trap 'rm -f "$on" "$off"' EXIT
i=0
while [ "$i" -lt "$rounds" ]; do
  run $first >>"$on"
  run $second >>"$off"
  i=$((i + 1))
done
a=$(median <"$on") b=$(median <"$off")
set -- $names
echo "$what samples/s (median of $rounds): $1 $a, $2 $b, ratio $(echo "$a $b" | awk '{ printf "%.3f", $1 / $2 }')"
