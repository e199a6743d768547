#!/bin/sh
# Allreduce, float32 sums of 4 KiB to 64 MiB between N processes on this machine, in one
# run: `ksdist bench allreduce` through shared memory (the shm plugin, what `auto` takes
# for ranks of one host) and through Gloo, beside raw Gloo (bench/bench-allreduce, the
# best of its algorithm classes per size), PyTorch's gloo backend (Debian's python3-torch)
# and Open MPI (bench/allreduce-mpi.c, built with mpicc when libopenmpi-dev is there; on
# one host it uses shared memory). A column is left out when its tool is missing. Ratios
# are speeds (the reference's time over ksdist shm's): above 1, ksdist is faster. One
# thread's memcpy rate at each size (bench/memcpy-rate.c, built with cc) is measured in
# the same run, and shm's busbw is given as a share of it. shm runs twice: on private
# buffers (staged through its segment, as any caller's memory) and on memory from
# alloc_shared (`--shared`: no staging copies; where data parallel keeps its gradients).
#   bench/run-allreduce.sh [N]          (default 2; PYTHON names another interpreter)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "$(dirname "$0")" && pwd)
n=${1:-2} python=${PYTHON:-/usr/bin/python3}
out=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-allreduce-XXXXXX")
trap 'rm -rf "$out"' EXIT
export KS_PLUGIN_PATH="$top/plugins/store/.libs:$top/plugins/gloo/.libs:$top/plugins/shm/.libs" KS_PLUGIN_SYSTEM_PATH=
sizes="-b 4K -e 64M -f 4"

[ -x "$top/bench/bench-allreduce" ] || make -C "$top" bench/bench-allreduce >/dev/null
"$top/tools/ksdist" bench allreduce -n "$n" $sizes --json --set comm.backend=shm >"$out/shm.json"
"$top/tools/ksdist" bench allreduce -n "$n" $sizes --json --set comm.backend=shm --shared \
  >"$out/shared.json"
"$top/tools/ksdist" bench allreduce -n "$n" $sizes --json --set comm.backend=gloo >"$out/ksdist.json"
"$top/bench/bench-allreduce" "$n" --json >"$out/raw.json"
if ${CC:-cc} -O2 "$src/memcpy-rate.c" -o "$out/memcpy-rate" 2>/dev/null; then
  "$out/memcpy-rate" >"$out/memcpy.json"
else
  echo "# no C compiler (${CC:-cc}): the memcpy column is left out" >&2
fi
if "$python" -c "import torch.distributed" 2>/dev/null; then
  "$python" "$src/allreduce-torch.py" "$n" --json >"$out/torch.json"
else
  echo "# no torch in $python: the PyTorch column is left out" >&2
fi
if command -v mpicc >/dev/null && command -v mpirun >/dev/null &&
  mpicc -O2 "$src/allreduce-mpi.c" -o "$out/allreduce-mpi" 2>/dev/null; then
  root=
  [ "$(id -u)" -ne 0 ] || root=--allow-run-as-root
  mpirun $root --oversubscribe -n "$n" "$out/allreduce-mpi" >"$out/mpi.json"
else
  echo "# no mpicc/mpirun with Open MPI's headers (libopenmpi-dev): the Open MPI column is left out" >&2
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
shm, shared, ks, raw, torch, mpi = (load(n) for n in ("shm", "shared", "ksdist", "raw", "torch", "mpi"))
copy = load("memcpy")
refs = [("ksdist gloo", ks), ("raw Gloo", raw), ("torch gloo", torch), ("Open MPI", mpi)]
refs = [(name, r) for name, r in refs if r]
last = refs[-1][0].split()[0] if refs else None  # Open MPI where it is there
print("# allreduce, float32 sum: time in us, busbw in GB/s; x REF = ksdist shm's speed over REF's" +
      ("; memcpy: one thread's memcpy GB/s at that size, shm %: shm's busbw over it" if copy else ""))
print("# shared: shm on alloc_shared memory (data parallel's gradients)" +
      ("; sh x %s: its speed over %s's" % (last, last) if last else "") +
      ("; sh %: its busbw over memcpy's" if copy else ""))
print("# %10s %9s %7s %9s %7s" % ("size (B)", "shm us", "busbw", "shared us", "busbw") +
      "".join(" %9s %7s" % (name.split()[0] + " us", "busbw") for name, _ in refs) +
      "".join(" %8s" % ("x " + name.split()[0]) for name, _ in refs) +
      (" %8s" % ("sh x " + last) if last else "") +
      (" %7s %6s %6s" % ("memcpy", "shm %", "sh %") if copy else ""))
for b in sorted(shm):
    k, s = shm[b], shared[b]
    line = "%10d %9.1f %7.3f %9.1f %7.3f" % (b, k["time_us"], k["busbw"], s["time_us"], s["busbw"])
    line += "".join(" %9.1f %7.3f" % (r[b]["time_us"], r[b]["busbw"]) for _, r in refs)
    line += "".join(" %8.2f" % (r[b]["time_us"] / k["time_us"]) for _, r in refs)
    if last:
        line += " %8.2f" % (refs[-1][1][b]["time_us"] / s["time_us"])
    if copy:
        line += " %7.1f %6.0f %6.0f" % (copy[b]["gbs"], 100 * k["busbw"] / copy[b]["gbs"],
                                        100 * s["busbw"] / copy[b]["gbs"])
    print("  " + line)
PY
