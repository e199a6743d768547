#!/bin/sh
# examples/ps-mlp.ini in async mode, 2 servers and 2 workers, N times with [train] seed
# 1..N: each run's held-out accuracy (the lower of the two workers') and the minimum over
# the runs. Async runs differ from run to run even at one seed (which gradients a push
# merges depends on timing), so the minimum is the figure. From the build tree:
#   bench/ps-async-accuracy.sh [N] [--set GROUP.KEY=VALUE ...]        (N = 10)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
n=10
case "${1:-}" in [0-9]*) n=$1; shift ;; esac
export KS_PLUGIN_PATH=
for p in openblas optim store roles gloo collective transpiler; do
  KS_PLUGIN_PATH=$KS_PLUGIN_PATH${KS_PLUGIN_PATH:+:}$top/plugins/$p/.libs
done
export KS_PLUGIN_SYSTEM_PATH=
log=$(mktemp "${TMPDIR:-/tmp}/ksdist-ps-async-XXXXXX")
trap 'rm -f "$log"' EXIT
printf "# examples/ps-mlp.ini, [strategy] mode = async, 2 servers x 2 workers, 1 thread each%s\n" \
  "${*:+, $*}"
printf "# %4s %9s %9s %8s\n" seed accuracy updates seconds
min=
for seed in $(seq 1 "$n"); do
  t0=$(date +%s.%N)
  if ! "$top/tools/ksdist" launch --servers 2 --workers 2 "$src/examples/ps-mlp.ini" \
       --set strategy.mode=async --set train.seed="$seed" --set openblas.threads=1 "$@" \
       >"$log" 2>&1; then
    cat "$log" >&2
    echo "bench/ps-async-accuracy.sh: the run of seed $seed failed (its log above)" >&2
    exit 1
  fi
  t1=$(date +%s.%N)
  acc=$(sed -n 's/.*eval accuracy \([0-9.]*\) .*/\1/p' "$log" | sort -n | head -1)
  upd=$(sed -n 's/.*server 0: .*(\([0-9]*\) updates,.*/\1/p' "$log" | tail -1)
  [ -n "$acc" ] || { cat "$log" >&2; echo "bench/ps-async-accuracy.sh: no eval line (seed $seed)" >&2; exit 1; }
  printf "  %4d %9s %9s %8.1f\n" "$seed" "$acc" "${upd:--}" "$(echo "$t1 $t0" | awk '{ print $1 - $2 }')"
  min=$(printf "%s\n%s\n" "$acc" "${min:-$acc}" | sort -n | head -1)
done
printf "# min accuracy over %d runs: %s\n" "$n" "$min"
