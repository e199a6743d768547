#!/bin/sh
# Parameter-server training beside the collective mode and loopback TCP, in one run
# (bench/bench-ps): the MLP 784-1024-1024-10, batch 128 per worker, W workers x 1 thread,
# each transpiler mode with 1 and 2 servers. From the build tree:
#   bench/run-ps.sh [W] [--set GROUP.KEY=VALUE ...]        (W = 2)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
export KS_PLUGIN_PATH=
for p in openblas optim store roles gloo collective transpiler; do
  KS_PLUGIN_PATH=$KS_PLUGIN_PATH${KS_PLUGIN_PATH:+:}$top/plugins/$p/.libs
done
export KS_PLUGIN_SYSTEM_PATH= OPENBLAS_NUM_THREADS=1
[ -x "$top/bench/bench-ps" ] || make -C "$top" bench/bench-ps >/dev/null
exec "$top/bench/bench-ps" "$@"
