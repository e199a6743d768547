#!/bin/sh
# A data-parallel training step in ksdist (bench/bench-ddp, through shared memory as
# `auto` picks for ranks of one host, and through Gloo) and in PyTorch DDP on gloo
# (bench/ddp-torch.py, Debian's python3-torch), in one run: the MLP 784-1024-1024-10,
# batch 128 per rank, SGD, N processes with one thread each. Prints ms/step for each
# and the speed-up of ksdist over PyTorch (PyTorch ms / ksdist ms), ROUNDS times
# (default 3), alternating them. From the build tree:
#   bench/run-ddp.sh [N] [ROUNDS]        (N = 2; PYTHON names another interpreter;
#                                        TORCH_TIMEOUT: seconds before a hung PyTorch
#                                        run is tried again, then given up, default 180)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "$(dirname "$0")" && pwd)
n=${1:-2} rounds=${2:-3} python=${PYTHON:-/usr/bin/python3}
export KS_PLUGIN_PATH=
for p in openblas optim store roles gloo shm collective; do
  KS_PLUGIN_PATH=$KS_PLUGIN_PATH${KS_PLUGIN_PATH:+:}$top/plugins/$p/.libs
done
export KS_PLUGIN_SYSTEM_PATH= OPENBLAS_NUM_THREADS=1
[ -x "$top/bench/bench-ddp" ] || make -C "$top" bench/bench-ddp >/dev/null
have_torch=yes
"$python" -c "import torch.distributed" 2>/dev/null || have_torch=no
printf "# MLP 784-1024-1024-10, batch 128 per rank, %s ranks x 1 thread\n# %10s %10s %10s %9s %9s\n" \
  "$n" "shm ms" "gloo ms" "torch ms" "x (shm)" "x (gloo)"
for _ in $(seq "$rounds"); do
  shm=$("$top/bench/bench-ddp" "$n" --set comm.backend=shm)
  gloo=$("$top/bench/bench-ddp" "$n" --set comm.backend=gloo)
  if [ $have_torch = yes ]; then
    # PyTorch's start sometimes hangs here (2 of 6 direct runs on a 2-core machine, which end
    # in 5 s otherwise): a round that fails or times out is tried once more
    torch=$(timeout "${TORCH_TIMEOUT:-180}" "$python" "$src/ddp-torch.py" "$n" 2>/dev/null) ||
      torch=$(timeout "${TORCH_TIMEOUT:-180}" "$python" "$src/ddp-torch.py" "$n" 2>/dev/null) ||
      torch=-
    [ "$torch" = - ] && { printf "  %10s %10s %10s %9s %9s\n" "$shm" "$gloo" "(timeout)" - -; continue; }
    printf "  %10s %10s %10s %9.2f %9.2f\n" "$shm" "$gloo" "$torch" \
      "$(echo "$torch $shm" | awk '{print $1 / $2}')" "$(echo "$torch $gloo" | awk '{print $1 / $2}')"
  else
    printf "  %10s %10s %10s %9s %9s\n" "$shm" "$gloo" "-" "-" "-"
  fi
done
