#!/bin/sh
# ksdist across hosts joined by shaped links: HOSTS network namespaces from
# tools/cluster.sh, each link limited to RATE by tbf in both directions, one rank per
# host, all in one run:
#  - allreduce, float32 sums of 4 KiB to MAX: ksdist (`ksdist bench allreduce`, Gloo: what
#    `auto` takes for ranks on several hosts), raw Gloo (bench/bench-allreduce, its best
#    algorithm per size), PyTorch's gloo backend (bench/allreduce-torch.py, when python3
#    has torch) and Open MPI over TCP (bench/allreduce-mpi.c; mpirun starts its daemons in
#    the namespaces through an rsh agent, when mpicc is there); busbw beside the link;
#  - data-parallel steps at 1, 2 and 4 hosts (`ksdist launch --nnodes`, weak scaling:
#    efficiency = samples/s at K hosts / (K x samples/s at 1 host)): an MLP
#    2-1024-1024-2 (1.05 M parameters) and the GPT of examples/gpt-words.ini, each beside
#    the same K ranks on host 0 alone (`ksdist launch -n K`, no link: the ceiling that the
#    cores the hosts share set); beside the MLP, PyTorch DDP (gloo) with the same MLP and
#    batch, one rank per host
#    (bench/ddp-torch.py --rank, when python3 has torch: best of 3 rounds of 20 steps);
#  - a pipeline with one stage per host (the MLP of `ksdist bench pipeline`, 8 x 1024 x
#    1024 Linear layers cut by parameters, batch 512): the bubble of its steps after the
#    first from the job's trace, as `ksdist bench pipeline` measures it (1 - the stages'
#    forward and backward time / (p x the step's span from the first stage's start to the
#    last backward's end: a span common to the stages, not each stage's own, which leaves
#    out the last stage's wait at the end)), beside the theory for equal stages,
#    (p-1)/(v m + p-1), for 1F1B m=4, m=8 and FThenB m=8;
#  - parameter servers (2 servers on hosts 0-1, 2 workers on hosts 2-3, one `ksdist
#    launch --nnodes 4 --servers S --workers W` per host; an MLP 2-512-512-2 (relu), the same
#    steps) in sync, half_async, async and geo at RATE and at RATE2: samples/s and
#    held-out accuracy.
# The hosts share this machine's cores: on 2 cores, 4 hosts' compute competes.
#   bench/run-cluster.sh [HOSTS] [RATE] [--json] [--max SIZE] [--rate2 RATE2] [--steps N]
#                        [--only ps|pipeline]
#   (defaults: 4 hosts, 1gbit, --max 64M, --rate2 200mbit, --steps 30; needs root;
#   --only ps, --only pipeline: the parameter servers, or the pipeline, alone)
set -eu
exec </dev/null # nsenter and mpirun would read the caller's stdin (make-benchmarks-doc.sh's template)
top=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
hosts=4 rate=1gbit rate2=200mbit json=no max=64M steps=30 only= python=${PYTHON:-/usr/bin/python3}
pos=0
while [ $# -gt 0 ]; do
  case $1 in
    --json) json=yes ;;
    --max) max=$2; shift ;;
    --rate2) rate2=$2; shift ;;
    --steps) steps=$2; shift ;;
    --only) only=$2; shift
      case $only in ps|pipeline) ;; *) echo "run-cluster.sh: --only $only: give 'ps' or 'pipeline'" >&2; exit 2 ;; esac ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run-cluster.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
    *) if [ $pos = 0 ]; then hosts=$1; else rate=$1; fi; pos=$((pos + 1)) ;;
  esac
  shift
done
[ "$hosts" -ge 2 ] 2>/dev/null || { echo "run-cluster.sh: HOSTS '$hosts': give 2 or more" >&2; exit 2; }
name=kbench$$
cluster="sh $src/tools/cluster.sh --name $name"
out=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-cluster-bench-XXXXXX")
cleanup() { $cluster down >/dev/null 2>&1 || true; rm -rf "$out"; }
trap cleanup EXIT
KS_PLUGIN_PATH=
for p in openblas optim store roles gloo collective segment transpiler; do
  KS_PLUGIN_PATH=$KS_PLUGIN_PATH${KS_PLUGIN_PATH:+:}$top/plugins/$p/.libs
done
export KS_PLUGIN_PATH KS_PLUGIN_SYSTEM_PATH= OPENBLAS_NUM_THREADS=1
export KS_STORE_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
ksdist=$top/tools/ksdist
[ -x "$top/bench/bench-allreduce" ] || make -C "$top" bench/bench-allreduce >/dev/null

# RATE as tc reads it, in GB/s (10^9 bytes/s, busbw's unit)
gbs() {
  echo "$1" | awk '{ r = $1; v = r + 0; u = tolower(substr(r, length(v "") + 1));
    m = u == "gbit" ? 1e9 : u == "mbit" ? 1e6 : u == "kbit" ? 1e3 : u == "bit" ? 1 : -1;
    if (m < 0) { print "bad"; exit } printf "%.6g\n", v * m / 8 / 1e9 }'
}
[ "$(gbs "$rate")" != bad ] && [ "$(gbs "$rate2")" != bad ] \
  || { echo "run-cluster.sh: rates are a number with gbit, mbit or kbit (got $rate, $rate2)" >&2; exit 2; }

up() {
  $cluster down >/dev/null 2>&1 || true
  $cluster up "$hosts" --rate "$1" >"$out/up.log" 2>&1 \
    || { echo "run-cluster.sh: $(tail -n 1 "$out/up.log")" >&2; exit 1; }
}
addr() { $cluster addr "$1"; }
on() { k=$1; shift; $cluster run "$k" "$@"; }
note() { echo "# $*" >&2; }

up "$rate"
link=$(gbs "$rate")

# ---- allreduce (this and the data-parallel steps are left out by --only) ----
a0=$(addr 0)
if [ -z "$only" ]; then
k=0
while [ $k -lt "$hosts" ]; do
  serve=
  [ $k = 0 ] && serve=--serve
  on $k "$ksdist" bench allreduce -n "$hosts" --rank=$k --address="$a0:29400" $serve --json \
    -b 4K -e "$max" --set comm.backend=gloo --set gloo.hostname="$(addr $k)" \
    --set comm.timeout=600 >"$out/ksdist.$k" 2>"$out/ksdist.$k.err" &
  k=$((k + 1))
done
wait
mkdir "$out/gloo-store"
k=0
while [ $k -lt "$hosts" ]; do
  on $k env KS_BENCH_HOSTNAME="$(addr $k)" "$top/bench/bench-allreduce" --rank $k "$hosts" \
    "$out/gloo-store" json >"$out/raw.$k" 2>"$out/raw.$k.err" &
  k=$((k + 1))
done
wait
if "$python" -c "import torch.distributed" 2>/dev/null; then
  k=0
  while [ $k -lt "$hosts" ]; do
    on $k env GLOO_SOCKET_IFNAME=eth0 "$python" "$src/bench/allreduce-torch.py" --rank $k \
      "$hosts" "$out/torch-store" >"$out/torch.$k" 2>"$out/torch.$k.err" &
    k=$((k + 1))
  done
  wait
else
  note "no torch in $python: the PyTorch column is left out"
fi
if command -v mpicc >/dev/null && command -v mpirun >/dev/null \
    && mpicc -O2 "$src/bench/allreduce-mpi.c" -o "$out/allreduce-mpi" 2>"$out/mpicc.err"; then
  # mpirun's rsh agent: "HOST CMD..." runs CMD on the namespace whose address is HOST
  cat >"$out/agent" <<EOF
#!/bin/sh
host=\$1; shift
exec sh $src/tools/cluster.sh --name $name run \$(( \${host##*.} - 1 )) sh -c "\$*"
EOF
  chmod +x "$out/agent"
  list= k=0
  while [ $k -lt "$hosts" ]; do list=$list${list:+,}$(addr $k); k=$((k + 1)); done
  net=${a0%.*}.0/24
  timeout 900 mpirun --allow-run-as-root -n "$hosts" --host "$list" \
    --mca plm_rsh_agent "$out/agent" --mca btl tcp,self --mca btl_tcp_if_include "$net" \
    --mca oob_tcp_if_include "$net" "$out/allreduce-mpi" >"$out/mpi.0" 2>"$out/mpi.err" \
    || note "Open MPI across the hosts failed: $(tail -n 2 "$out/mpi.err" | tr '\n' ' ')"
else
  note "no mpicc/mpirun with Open MPI's headers (libopenmpi-dev): the Open MPI column is left out"
fi

# ---- data-parallel steps at 1, 2, 4 hosts (weak scaling) ----
cat >"$out/mlp.ini" <<EOF
[model]
type = mlp
hidden = 1024, 1024
activation = tanh
[data]
task = spirals
samples = 8192
[train]
optimizer = sgd
steps = $steps
batch = 128
log_every = $steps
[optim]
lr = 0.01
[openblas]
threads = 1
[comm]
timeout = 600
EOF
sed -e "s/^steps = .*/steps = $steps/" -e "s/^log_every = .*/log_every = $steps/" -e "s/^warmup = .*/warmup = 0/" \
  "$src/examples/gpt-words.ini" >"$out/gpt.ini"
printf '[openblas]\nthreads = 1\n[comm]\ntimeout = 600\n' >>"$out/gpt.ini"
# dp MODEL K: samples/s of the last step line of a job of one rank on each of K hosts
dp() {
  if [ "$2" = 1 ]; then
    on 0 "$ksdist" train "$out/$1.ini" >"$out/dp-$1-1.0" 2>&1
  else
    k=0
    while [ $k -lt "$2" ]; do
      on $k "$ksdist" launch -n 1 --nnodes "$2" --node-rank $k --master "$a0:29500" \
        "$out/$1.ini" >"$out/dp-$1-$2.$k" 2>&1 &
      k=$((k + 1))
    done
    wait
  fi
  last_rate "$out/dp-$1-$2.0"
}
# samples/s of the last step line of FILE (rank 0's, where a launch prefixes its ranks)
last_rate() {
  grep -v '^\[rank [1-9]' "$1" | sed -n 's/.*step \([0-9]*\)\/\1 .*samples\/s \([0-9.]*\).*/\2/p' | tail -n 1
}
# one_host MODEL K: the same K ranks on host 0 alone (no link between them): what the
# cores the hosts share allow, the ceiling of the efficiency across hosts
one_host() {
  on 0 "$ksdist" launch -n "$2" "$out/$1.ini" >"$out/dp1-$1-$2" 2>&1
  last_rate "$out/dp1-$1-$2"
}
for model in mlp gpt; do
  for k in 1 2 4; do
    [ $k -le "$hosts" ] || continue
    s=$(dp $model $k)
    if [ $k = 1 ]; then one=$s; else one=$(one_host $model $k); fi
    echo "$model $k ${s:--} ${one:--}" >>"$out/dp.txt"
  done
done
# PyTorch DDP with the MLP above, one rank on each of K hosts: samples/s of the job
if "$python" -c "import torch.distributed" 2>/dev/null; then
  for k in 1 2 4; do
    [ $k -le "$hosts" ] || continue
    j=0
    while [ $j -lt $k ]; do
      on $j env GLOO_SOCKET_IFNAME=eth0 "$python" "$src/bench/ddp-torch.py" --rank $j $k \
        "$out/ddp-store-$k" 2,1024,1024,2 tanh >"$out/ddp-$k.$j" 2>"$out/ddp-$k.$j.err" &
      j=$((j + 1))
    done
    wait
    ms=$(tail -n 1 "$out/ddp-$k.0")
    echo "$k $(awk -v ms="$ms" -v k=$k 'BEGIN { if (ms + 0 > 0) printf "%.0f", k * 128 * 1000 / ms; else print "-" }')" \
      >>"$out/ddp.txt"
  done
else
  note "no torch in $python: the PyTorch DDP column is left out"
fi

fi

# ---- a pipeline with one stage per host: measured bubble beside the theory ----
if [ "$only" != ps ]; then
for run in "1f1b 1 4" "1f1b 1 8" "fthenb 1 8"; do
  set -- $run
  k=0
  while [ $k -lt "$hosts" ]; do
    on $k "$ksdist" launch -n 1 --nnodes "$hosts" --node-rank $k --master "$a0:29700" \
      "$src/examples/default.ini" --set train.steps="$steps" --set train.log_every="$steps" \
      --set train.batch=512 --set model.hidden=1024,1024,1024,1024,1024,1024,1024,1024,1024 \
      --set pipeline.seg_method=parameters --set pipeline.stages="$hosts" \
      --set pipeline.schedule="$1" --set pipeline.virtual_stages="$2" \
      --set pipeline.micro_batches="$3" --set log.level=info --set openblas.threads=1 \
      --set comm.timeout=600 --set trace.path="$out/pipe-$1-$3.json" >"$out/pipe-$1-$3.$k" 2>&1 &
    k=$((k + 1))
  done
  wait
  # The hosts share this machine's clock, so one trace's times compare across stages.
  b=$("$ksdist" bench pipeline -n "$hosts" --trace "$out/pipe-$1-$3.json" 2>>"$out/pipe-$1-$3.0") \
    && b=$(awk -v b="$b" 'BEGIN { printf "%.2f", 100 * b }') || b=-
  # "stage K: computing B s of W s in steps (idle I%; theory for equal stages T%)"
  t=$(sed -n 's/.*stage 0: computing .*theory for equal stages \([0-9.]*\)%).*/\1/p' "$out/pipe-$1-$3.0")
  echo "$1 $2 $3 $b ${t:--}" >>"$out/pipe.txt"
done

fi

# ---- parameter servers: 2 servers (hosts 0, 1), 2 workers (hosts 2, 3) ----
# relu: 512 wide with ps-mlp.ini's tanh stayed at 0.26 (chance) after 400 steps
sed -e "s/^steps = .*/steps = $((steps * 4))/" -e "s/^log_every = .*/log_every = $((steps * 4))/" \
  -e "s/^hidden = .*/hidden = 512, 512/" -e "s/^activation = .*/activation = relu/" \
  "$src/examples/ps-mlp.ini" >"$out/ps.ini"
printf '[openblas]\nthreads = 1\n' >>"$out/ps.ini"
ps_job() { # MODE RATE: one `ksdist launch` per host, each giving the servers and workers it
  # runs (fleetrun's placement); worker 0, the first on host 2, logs in ps-MODE-RATE.2
  for k in 0 1 2 3; do
    if [ $k -lt 2 ]; then s=1 w=0; else s=0 w=1; fi
    on $k "$ksdist" launch --nnodes 4 --node-rank $k --master "$(addr 0):29600" --servers $s \
      --workers $w "$out/ps.ini" --set strategy.mode="$1" --set comm.timeout=600 \
      >"$out/ps-$1-$2.$k" 2>&1 &
  done
  wait
}
if [ "$only" = pipeline ]; then
  :
elif [ "$hosts" -ge 4 ]; then
  for r in "$rate" "$rate2"; do
    [ "$r" = "$rate" ] || up "$r"
    for mode in sync half_async async geo; do
      ps_job $mode "$r"
      f=$out/ps-$mode-$r.2
      sps=$(sed -n 's/.*step \([0-9]*\)\/\1 .*samples\/s \([0-9.]*\).*/\2/p' "$f" | tail -n 1)
      acc=$(sed -n 's/.*eval accuracy \([0-9.]*\).*/\1/p' "$f" | tail -n 1)
      echo "$mode $r $(gbs "$r") ${sps:--} ${acc:--}" >>"$out/ps.txt"
    done
  done
else
  note "parameter servers need 4 hosts: left out"
fi

"$python" - "$out" "$hosts" "$rate" "$link" "$json" "$steps" <<'PY'
import json, os, sys
out, hosts, rate, link, as_json, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), sys.argv[5] == "yes", int(sys.argv[6])
def load(name):
    path = os.path.join(out, name)
    try:
        with open(path) as f:
            text = f.read().strip()
        return {r["bytes"]: r for r in json.loads(text)["results"]} if text else None
    except (OSError, ValueError, KeyError):
        return None
impls = [("ksdist", load("ksdist.0")), ("gloo", load("raw.0")), ("torch", load("torch.0")),
         ("mpi", load("mpi.0"))]
rows = []
for impl, res in impls:
    for size in sorted(res or {}):
        rows.append({"impl": impl, "size": size, "busbw_gbs": res[size]["busbw"], "link_gbs": link})
def lines(name):
    path = os.path.join(out, name)
    return [l.split() for l in open(path)] if os.path.exists(path) else []
dp, ps, pipe = lines("dp.txt"), lines("ps.txt"), lines("pipe.txt")
ddp = {k: s for k, s in lines("ddp.txt")}
def num(x):
    try:
        return float(x)
    except ValueError:
        return None
if as_json:
    for r in rows:
        print(json.dumps(r))
    one = {}
    for d in dp:
        model, k = d[0], d[1]
        s = num(d[2]) if len(d) > 2 else None
        h = num(d[3]) if len(d) > 3 else None
        if k == "1":
            one[model] = s
        eff = s / (int(k) * one[model]) if s and one.get(model) else None
        heff = h / (int(k) * one[model]) if h and one.get(model) else None
        print(json.dumps({"impl": "ksdist dp", "model": model, "hosts": int(k), "samples_per_s": s,
                          "efficiency": eff, "one_host_samples_per_s": h,
                          "one_host_efficiency": heff, "link_gbs": link}))
    for k in sorted(ddp, key=int):
        s, s1 = num(ddp[k]), num(ddp.get("1", "-"))
        print(json.dumps({"impl": "torch ddp", "model": "mlp", "hosts": int(k), "samples_per_s": s,
                          "efficiency": s / (int(k) * s1) if s and s1 else None, "link_gbs": link}))
    for sched, v, m, bubble, theory in pipe:
        print(json.dumps({"impl": "ksdist pipeline", "stages": hosts, "schedule": sched, "v": int(v),
                          "m": int(m), "bubble": num(bubble), "theory": num(theory), "link_gbs": link}))
    for mode, r, lg, sps, acc in ps:
        print(json.dumps({"impl": "ksdist ps", "mode": mode, "rate": r, "link_gbs": float(lg),
                          "samples_per_s": num(sps), "accuracy": num(acc)}))
    sys.exit(0)
present = [(n, r) for n, r in impls if r]
print("# allreduce, float32 sum, %d hosts x 1 rank, links %s (%.4g GB/s): busbw GB/s (%% of the link)" % (hosts, rate, link))
raw = dict(impls)["gloo"] or {}
print("# %10s" % "size (B)" + "".join(" %16s" % n for n, _ in present) + "  raw Gloo's best")
sizes = sorted(set().union(*[set(r) for _, r in present])) if present else []
for b in sizes:
    print("  %10d" % b + "".join(
        (" %8.4f (%4.0f%%)" % (r[b]["busbw"], 100 * r[b]["busbw"] / link)) if b in r else " %16s" % "-"
        for _, r in present) + "  " + raw.get(b, {}).get("algorithm", "-"))
print("#")
print("# data parallel, one rank per host, %d steps; efficiency = samples/s / (hosts x one host's);" % steps)
print("# 1-host eff: the same ranks on host 0 alone, no link (what the shared cores allow)")
print("# %6s %6s %12s %10s %10s %16s %10s" % ("model", "hosts", "samples/s", "efficiency", "1-host eff",
                                             "torch DDP smp/s", "DDP eff"))
one = {}
for model, k, *rest in dp:
    s = num(rest[0]) if rest else None
    h = num(rest[1]) if len(rest) > 1 else None
    if k == "1":
        one[model] = s
    eff = "%.2f" % (s / (int(k) * one[model])) if s and one.get(model) else "-"
    heff = "%.2f" % (h / (int(k) * one[model])) if h and one.get(model) else "-"
    t, t1 = (num(ddp.get(k, "-")), num(ddp.get("1", "-"))) if model == "mlp" else (None, None)
    teff = "%.2f" % (t / (int(k) * t1)) if t and t1 else "-"
    print("  %6s %6s %12s %10s %10s %16s %10s" % (model, k, rest[0] if rest else "-", eff, heff,
                                                 "%.0f" % t if t else "-", teff))
print("#")
print("# pipeline, one stage per host (%d), MLP 8 x 1024 x 1024, batch 512, %d steps: bubble %% of the steps after the first, from the trace (1 - busy / (stages x the common span))" % (hosts, steps))
print("# %10s %3s %3s %10s %10s %8s" % ("schedule", "v", "m", "bubble%", "theory%", "diff_pp"))
for sched, v, m, bubble, theory in pipe:
    b, t = num(bubble), num(theory)
    print("  %10s %3s %3s %10s %10s %8s" % (sched, v, m, bubble, theory, "%+.2f" % (b - t) if b is not None and t is not None else "-"))
print("#")
print("# parameter servers: 2 servers (hosts 0-1), 2 workers (hosts 2-3), MLP 2-512-512-2 (relu), %d steps; x sync = samples/s over sync's" % (steps * 4))
print("# %10s %8s %12s %8s %9s" % ("mode", "link", "samples/s", "x sync", "accuracy"))
sync = {}
for mode, r, lg, sps, acc in ps:
    s = num(sps)
    if mode == "sync":
        sync[r] = s
    x = "%.2f" % (s / sync[r]) if s and sync.get(r) else "-"
    print("  %10s %8s %12s %8s %9s" % (mode, r, sps, x, acc))
PY
