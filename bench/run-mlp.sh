#!/bin/sh
# MLP 784-1024-1024-10, batch 128, SGD: ksdist against PyTorch (Debian's python3-torch)
# with the same thread count for both, in one run. Prints ms/step, peak RSS, and the
# speed-up of ksdist over PyTorch (PyTorch ms / ksdist ms). Run from the build tree:
#   bench/run-mlp.sh [THREADS...]        (default: 1 and the number of cores)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
export KS_PLUGIN_PATH="$top/plugins/openblas/.libs:$top/plugins/optim/.libs" KS_PLUGIN_SYSTEM_PATH=
have_torch=yes
/usr/bin/python3 -c "import torch" 2>/dev/null || have_torch=no
[ $# -gt 0 ] || set -- 1 "$(nproc)"
printf "# MLP 784-1024-1024-10 batch 128 SGD\n# %7s %12s %10s %12s %10s %8s\n" \
  threads "ksdist ms" "RSS MiB" "torch ms" "RSS MiB" speedup
for t in "$@"; do
  set -- $(OPENBLAS_NUM_THREADS=$t "$top/bench/bench-mlp" "$t")
  ks_ms=$1 ks_rss=$2
  if [ $have_torch = yes ]; then
    set -- $(OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t /usr/bin/python3 "$top/bench/bench-mlp-torch.py" "$t")
    printf "  %7s %12s %10s %12s %10s %8.2f\n" "$t" "$ks_ms" "$ks_rss" "$1" "$2" \
      "$(echo "$1 / $ks_ms" | bc -l)"
  else
    printf "  %7s %12s %10s %12s %10s %8s\n" "$t" "$ks_ms" "$ks_rss" "-" "-" "(no python3-torch)"
  fi
done
