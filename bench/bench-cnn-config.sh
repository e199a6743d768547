#!/bin/sh
# The CNN of examples/cnn-idx.ini, written in the config, trained by `ksdist train` on
# IDX digits (ksdist datagen digits), batch 128, beside the same network's step in
# PyTorch (bench-cnn-idx-torch.py) at the same thread count, in one run. ksdist's ms/step
# is the median over the logged windows after the first (the trainer's own step: data,
# forward, backward, Adam), PyTorch's the best of three rounds on one fixed batch. From
# the build tree:
#   bench/bench-cnn-config.sh [THREADS...]   (default: 1 and the number of cores)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-/usr/bin/python3}
ksdist="$top/tools/ksdist"
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-bench-cnn-XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$ksdist" datagen digits "$dir/digits" --train 4000 --test 500 > /dev/null
have_torch=yes
"$python" -c "import torch" 2>/dev/null || have_torch=no
[ $# -gt 0 ] || set -- 1 "$(nproc)"
printf "# the CNN of examples/cnn-idx.ini, batch 128\n# %7s %12s %12s %8s\n" threads \
  "ksdist ms" "torch ms" speedup
for t in "$@"; do
  (cd "$dir" && OPENBLAS_NUM_THREADS=$t "$ksdist" train "$top/examples/cnn-idx.ini" \
     --set train.batch=128 --set train.steps=60 --set train.log_every=10 \
     --set openblas.threads="$t" --set log.metrics=metrics.jsonl > train.log 2>&1)
  ks_ms=$(sed -n 's/.*"samples_per_s": \([0-9.]*\).*/\1/p' "$dir/metrics.jsonl" | tail -n +2 \
          | sort -n | awk '{ v[NR] = $1 } END { printf "%.2f", 128000 / v[int ((NR + 1) / 2)] }')
  if [ $have_torch = yes ]; then
    set -- $(OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t "$python" "$src/bench-cnn-idx-torch.py" "$t" cpu 128)
    printf "  %7s %12s %12s %8.2f\n" "$t" "$ks_ms" "$1" "$(awk -v a="$1" -v b="$ks_ms" 'BEGIN { print a / b }')"
  else
    printf "  %7s %12s %12s %8s\n" "$t" "$ks_ms" - "(no python3-torch)"
  fi
done
