#!/bin/sh
# A training step in ksdist against the same step in PyTorch (Debian's python3-torch),
# with the same thread count for both, in one run. Prints ms/step, peak RSS, and the
# speed-up of ksdist over PyTorch (PyTorch ms / ksdist ms). From the build tree:
#   bench/run-vs-torch.sh mlp|gpt [THREADS...]      (default: 1 and the number of cores)
#   mlp: MLP 784-1024-1024-10, batch 128, SGD
#   gpt: GPT vocab 65, context 64, 4 layers, 4 heads, width 128, batch 16, AdamW
# DEVICE=cuda runs both on the GPU (ksdist's cuda plugin, torch's cuda device); PYTHON
# names the interpreter that has torch (default /usr/bin/python3).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "$(dirname "$0")" && pwd)
name=${1:?usage: bench/run-vs-torch.sh mlp|gpt [THREADS...]}
shift
device=${DEVICE:-cpu} python=${PYTHON:-/usr/bin/python3}
case $device in
  cpu) backend=openblas ;;
  cuda) backend=cuda ;;
  *) echo "run-vs-torch.sh: DEVICE=$device; it is cpu or cuda" >&2; exit 2 ;;
esac
export KS_PLUGIN_PATH="$top/plugins/$backend/.libs:$top/plugins/optim/.libs" KS_PLUGIN_SYSTEM_PATH=
have_torch=yes
"$python" -c "import torch" 2>/dev/null || have_torch=no
[ $# -gt 0 ] || set -- 1 "$(nproc)"
printf "# %s on %s\n# %7s %12s %10s %12s %10s %8s\n" "$name" \
  "$device" threads "ksdist ms" "RSS MiB" "torch ms" "RSS MiB" speedup
for t in "$@"; do
  set -- $(OPENBLAS_NUM_THREADS=$t "$top/bench/bench-$name" "$t" "$backend")
  ks_ms=$1 ks_rss=$2
  if [ $have_torch = yes ]; then
    set -- $(OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t "$python" "$src/bench-$name-torch.py" "$t" "$device")
    printf "  %7s %12s %10s %12s %10s %8.2f\n" "$t" "$ks_ms" "$ks_rss" "$1" "$2" \
      "$(echo "$1 / $ks_ms" | bc -l)"
  else
    printf "  %7s %12s %10s %12s %10s %8s\n" "$t" "$ks_ms" "$ks_rss" "-" "-" "(no python3-torch)"
  fi
done
