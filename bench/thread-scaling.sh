#!/bin/sh
# ksdist's step time at 1, 2 and `nproc` threads ([openblas] threads), each the best of
# ROUNDS runs (default 3), and its speed-up over 1 thread: the small MLP of
# examples/default.ini (2-64-64 on spirals: products too small to split) and the CNN of
# examples/cnn-idx.ini (on IDX digits), each trained by `ksdist train` at batch 128 (the
# median of its logged windows after the first), bench/bench-mlp and bench/bench-gpt (as
# run-vs-torch.sh runs them). The
# header names the cores, the OpenBLAS build (its OpenMP build shares one pool with
# ksdist's kernels; its pthread build leaves them on one thread) and the load average at
# the start: on a machine others use, the figures are noisy. Last for each work, `nproc`
# threads once more with GOMP_SPINCOUNT=300 (threads spin that long before they sleep
# between parallel regions; ksdist's default is OMP_WAIT_POLICY=passive, no spin): faster
# on cores of one's own, a hazard on cores others use (doc/benchmarks.md). From the
# build tree:
#   bench/thread-scaling.sh [ROUNDS]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-3}
ksdist="$top/tools/ksdist"
export KS_PLUGIN_PATH="$top/plugins/openblas/.libs:$top/plugins/optim/.libs" KS_PLUGIN_SYSTEM_PATH=
make -C "$top" bench/bench-mlp bench/bench-gpt >/dev/null
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-thread-scaling-XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$ksdist" datagen digits "$dir/digits" --train 4000 --test 500 > /dev/null
cores=$(nproc)
threads=$(printf "1\n2\n%s\n" "$cores" | sort -nu | tr '\n' ' ')
cpu=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)
if [ -n "${GOMP_SPINCOUNT:-}" ] && [ -z "${OMP_WAIT_POLICY:-}" ]; then
  wait_policy="unset, GOMP_SPINCOUNT=$GOMP_SPINCOUNT"
else
  wait_policy=${OMP_WAIT_POLICY:-"passive (ksdist's default)"}
fi
printf "# %s cores (%s); OMP_WAIT_POLICY=%s; load average at start %s\n" "$cores" \
  "${cpu:-cpu unknown}" "$wait_policy" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf "# best of %s rounds; speed-up: 1 thread's ms / this row's\n" "$rounds"
printf "# %-5s %7s %10s %8s\n" work threads "ms/step" speedup

# ms/step of `ksdist train EXAMPLE` at batch 128 and THREADS, STEPS steps logged every
# EVERY: the median of its logged windows after the first
train_ms () {
  (cd "$dir" && "$ksdist" train "$top/examples/$1" --set train.batch=128 \
     --set train.steps="$3" --set train.log_every="$4" --set openblas.threads="$2" \
     --set log.metrics=metrics.jsonl > train.log 2>&1) || { cat "$dir/train.log" >&2; exit 1; }
  sed -n 's/.*"samples_per_s": \([0-9.]*\).*/\1/p' "$dir/metrics.jsonl" | tail -n +2 \
    | sort -n | awk '{ v[NR] = $1 } END { printf "%.3f\n", 128000 / v[int ((NR + 1) / 2)] }'
  rm -f "$dir/metrics.jsonl"
}
blas=

# the best of ROUNDS step times of `work` at `t` threads
best_ms () {
  w=$1 n=$2 best=
  for r in $(seq 1 "$rounds"); do
    case $w in
      cnn) ms=$(OPENBLAS_NUM_THREADS=$n train_ms cnn-idx.ini "$n" 40 10) ;; # keeps train.log
      small) ms=$(OPENBLAS_NUM_THREADS=$n train_ms default.ini "$n" 3000 300) ;;
      *) ms=$(OPENBLAS_NUM_THREADS=$n "$top/bench/bench-$w" "$n" openblas | cut -d' ' -f1) ;;
    esac
    best=$(printf "%s\n%s\n" "$ms" "${best:-$ms}" | sort -g | head -1)
  done
  echo "$best"
}

for work in small cnn mlp gpt; do
  one=
  for t in $threads spin; do
    if [ $t = spin ]; then
      [ -z "${GOMP_SPINCOUNT:-}${OMP_WAIT_POLICY:-}" ] && [ "$cores" -gt 1 ] || continue
      best=$(GOMP_SPINCOUNT=300 best_ms $work "$cores") label="$cores+spin"
    else
      best=$(best_ms $work "$t") label=$t
    fi
    [ $work != cnn ] || [ -n "${blas:-}" ] \
      || blas=$(sed -n 's/.* on OpenBLAS (\(.*\)), [0-9]* threads*$/\1/p' "$dir/train.log" | head -1)
    one=${one:-$best}
    printf "  %-5s %7s %10s %8.2f\n" "$work" "$label" "$best" \
      "$(awk -v a="$one" -v b="$best" 'BEGIN { print a / b }')"
  done
done
printf "# the backend: %s\n" "${blas:-unknown}"
printf "# load average at the end %s\n" "$(cut -d' ' -f1-3 /proc/loadavg)"
