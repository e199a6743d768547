#!/bin/sh
# Allreduce, float32 sums of 4 KiB to 64 MiB between N processes on this machine, in one
# run: `ksdist bench allreduce` beside raw Gloo (bench/bench-allreduce, the best of its
# algorithm classes per size) and PyTorch's gloo backend (Debian's python3-torch; its
# column is left out when /usr/bin/python3 has no torch). Ratios are speeds (the
# reference's time over ksdist's): above 1, ksdist is faster. From the build tree:
#   bench/run-allreduce.sh [N]          (default 2; PYTHON names another interpreter)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "$(dirname "$0")" && pwd)
n=${1:-2} python=${PYTHON:-/usr/bin/python3}
out=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-allreduce-XXXXXX")
trap 'rm -rf "$out"' EXIT
export KS_PLUGIN_PATH="$top/plugins/store/.libs:$top/plugins/gloo/.libs" KS_PLUGIN_SYSTEM_PATH=

[ -x "$top/bench/bench-allreduce" ] || make -C "$top" bench/bench-allreduce >/dev/null
"$top/tools/ksdist" bench allreduce -n "$n" --json >"$out/ksdist.json"
"$top/bench/bench-allreduce" "$n" --json >"$out/raw.json"
if "$python" -c "import torch.distributed" 2>/dev/null; then
  "$python" "$src/allreduce-torch.py" "$n" --json >"$out/torch.json"
else
  echo "# no torch in $python: the PyTorch column is left out" >&2
fi
"$python" - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    path = os.path.join(out, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return {r["bytes"]: r for r in json.load(f)["results"]}
ks, raw, torch = load("ksdist"), load("raw"), load("torch")
print("# allreduce, float32 sum: time in us, busbw in GB/s; x raw, x torch = ksdist speed over theirs")
cols = "%10s %9s %7s %-16s %9s %7s %7s" % ("size (B)", "ksdist", "busbw", "raw Gloo best",
                                            "time", "busbw", "x raw")
if torch:
    cols += " %9s %7s %7s" % ("torch", "busbw", "x torch")
print("# " + cols)
for b in sorted(ks):
    k, r = ks[b], raw[b]
    line = "%10d %9.1f %7.3f %-16s %9.1f %7.3f %7.2f" % (
        b, k["time_us"], k["busbw"], r["algorithm"], r["time_us"], r["busbw"],
        r["time_us"] / k["time_us"])
    if torch:
        t = torch[b]
        line += " %9.1f %7.3f %7.2f" % (t["time_us"], t["busbw"], t["time_us"] / k["time_us"])
    print("  " + line)
PY
