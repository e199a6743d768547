#!/bin/sh
# Parameter-server jobs across hosts as fleetrun places them (servers on some hosts,
# workers on others), one `ksdist launch --nnodes N --node-rank K --master ADDR:PORT
# --servers S --workers W` per host, each saying the servers and workers IT runs:
# - two launchers on 127.0.0.1 (no namespaces needed): a node of workers and a node of
#   one server end bitwise where `ksdist launch --servers 1 --workers 2` does (sync),
#   also when a process is killed and both restart (--max-restarts);
#   fleetrun's lists of endpoints (--servers IP:PORT,... --workers IP:PORT,...) end
#   where the counts do; layouts without a worker, nodes of two kinds and lists that
#   name no host, or two, of this machine, or one endpoint in both lists, are refused,
#   saying what to do;
# - on hosts of tools/cluster.sh (skipped with the reason where namespaces cannot be
#   made): the transpiler's four modes with the server on host 1 and both workers on
#   host 0 (sync bitwise as one host's job, also when a worker is killed and both hosts'
#   launchers restart; half_async, async and geo within 0.25 of one host's held-out
#   accuracy); pslib with 2 servers and 2 workers over 3 hosts (a host of a server, a
#   host of a worker and a server, a host of a worker) at most 0.03 below one host's AUC, also
#   when the worker host's process is killed and the 3 launchers restart; pslib with the
#   mixed host's link cut, and the transpiler with the server host's (which serves the
#   job's store too), end the other launchers, each naming the host lost and its roles.
# TAP output. Needs KSDIST, KS_BUILD_PLUGINS and KS_SRCDIR (tests/local.mk).
set -u
name=kstestps-$$
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-cluster-ps-XXXXXX")
cl() { "$KS_SRCDIR/tools/cluster.sh" --name "$name" "$@"; }
cleanup() {
  [ -n "${cluster:-}" ] && cl down >/dev/null 2>&1
  [ -n "${KS_TEST_KEEP:-}" ] && echo "# kept $dir" || rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP
cd "$dir" || exit 1
. "$KS_SRCDIR/tests/tap.sh"

if [ ! -f "$KS_BUILD_PLUGINS/transpiler/.libs/transpiler.so" ]; then
  echo "1..0 # SKIP the transpiler plugin was not built (it needs libzmq3-dev)"
  exit 0
fi
path=
for p in openblas optim store roles gloo collective segment transpiler pslib; do
  path=$path${path:+:}$KS_BUILD_PLUGINS/$p/.libs
done
export KS_PLUGIN_PATH=$path KS_PLUGIN_SYSTEM_PATH= KS_STORE_TOKEN=3e9d1c07a5f24b68
ps=$KS_SRCDIR/examples/ps-mlp.ini
on_host=
common="--set openblas.threads=1 --set log.level=info --set train.log_every=100"

# The float data of a safetensors FILE, after its header length and header.
floats() {
  [ -f "$1" ] || return
  header=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
  tail -c +$((9 + header)) "$1"
}
# same RUN1 RUN2 STEP: server 0's shard at STEP bitwise equal in both runs
same() {
  floats "$1/checkpoint-$3/server-0-of-1.safetensors" >"$1.bin"
  floats "$2/checkpoint-$3/server-0-of-1.safetensors" >"$2.bin"
  [ -s "$1.bin" ] && cmp -s "$1.bin" "$2.bin"
}
# metric LOG NAME: the workers' mean held-out NAME (accuracy, auc), or "none"
metric() {
  awk -v m="$2" '$3 == "eval" && $4 == m { s += $5; n++ }
    END { if (n) printf "%.4f\n", s / n; else print "none" }' "$1"
}
# close A B TOL FLOOR: both numbers, within TOL of each other and above FLOOR
close() {
  [ "$1" != none ] && [ "$2" != none ] \
    && awk -v a="$1" -v b="$2" -v t="$3" -v f="$4" \
      'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t && a > f && b > f) }'
}
# no_worse A B TOL FLOOR: B at most TOL below A, both above FLOOR (an asynchronous job's
# metric varies from run to run, and better is no failure: 0.6870 against 0.6637 was seen)
no_worse() {
  [ "$1" != none ] && [ "$2" != none ] \
    && awk -v a="$1" -v b="$2" -v t="$3" -v f="$4" 'BEGIN { exit !(b >= a - t && a > f && b > f) }'
}
# one RUN CONFIG SERVERS WORKERS ARGS...: the job on this host, one launcher
one() {
  run=$1 config=$2 s=$3 w=$4
  shift 4
  # shellcheck disable=SC2086
  timeout 120 "$KSDIST" launch --servers "$s" --workers "$w" "$config" $common \
    --set "train.checkpoint_dir=$dir/$run" "$@" >"$run.log" 2>&1
  echo $? >"$run.status"
}
# node RUN K NODES SERVERS WORKERS CONFIG ARGS...: node K's launcher in the background
# (on host K of the cluster once it is up), its output in RUN-nodeK.log
node() {
  run=$1 k=$2 nodes=$3 s=$4 w=$5 config=$6
  shift 6
  # shellcheck disable=SC2086
  ($on_host timeout 120 "$KSDIST" launch --nnodes "$nodes" --node-rank "$k" --master "$master" \
     --servers "$s" --workers "$w" "$config" $common --set "train.checkpoint_dir=$dir/$run" \
     "$@" >"$run-node$k.log" 2>&1
   echo $? >"$run-node$k.status") &
}
on() { [ -n "${cluster:-}" ] && echo "$KS_SRCDIR/tools/cluster.sh --name $name run $1"; }
# the `ksdist train` processes on cluster host K
trainers() {
  for p in $(ip netns pids "$name-host$1"); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q ' train ' && echo "$p"
  done
}
statuses() {
  k=0 out=
  while [ $k -lt "$2" ]; do out="$out${out:+ }$(cat "$1-node$k.status")"; k=$((k + 1)); done
  echo "$out"
}
# two RUN ARGS...: node 0 runs both workers, node 1 the server; waits for both
two() {
  run=$1
  shift
  on_host=$(on 0) node "$run" 0 2 0 2 "$ps" "$@"
  on_host=$(on 1) node "$run" 1 2 1 0 "$ps" "$@"
  wait
}
# mid_job START RUN: `START RUN` starts the job's launchers in the background; this waits
# for its checkpoint-100 with every launcher still running. A job that ended before it (on
# a loaded machine a process can start later than the faults' 5 s [comm] timeout) is not
# the fault under test: it is said and started once more, as RUN-again ($run after).
mid_job() {
  start=$1 run=$2
  for attempt in 1 2; do
    "$start" "$run"
    i=0
    while [ ! -d "$dir/$run/checkpoint-100" ] && ! ls "$run"-node*.status >/dev/null 2>&1 \
        && [ $i -lt 600 ]; do
      sleep 0.1; i=$((i + 1))
    done
    if [ -d "$dir/$run/checkpoint-100" ] && ! ls "$run"-node*.status >/dev/null 2>&1; then
      return 0
    fi
    echo "# $run ended or did not save before the fault (attempt $attempt): $(grep -h ksdist "$run"-node*.log | head -n 2 | tr '\n' ' ')"
    wait
    [ "$attempt" = 2 ] || run=$run-again
  done
  return 1
}

# ---- two launchers on 127.0.0.1 ----
master=127.0.0.1:$((20000 + $$ % 20000))
sync="--set train.steps=200"
# shellcheck disable=SC2086
one sync-one "$ps" 1 2 $sync
# shellcheck disable=SC2086
two loop $sync
s=$(statuses loop 2)
if [ "$(cat sync-one.status)" = 0 ] && [ "$s" = "0 0" ] && same sync-one loop 200 \
    && grep -q "servers at 127.0.0.1:[0-9]*; node 0 (host [^:]*: workers 0-1), node 1 (host [^:]*: server 0)" loop-node1.log; then
  ok "a node of 2 workers and a node of 1 server on 127.0.0.1 end bitwise where one launch does (sync)"
else
  echo "# statuses $(cat sync-one.status) / $s"; not_ok "2 nodes on 127.0.0.1 against one launch" sync-one.log loop-node0.log loop-node1.log
fi

# --max-restarts on both nodes: a process of the job killed after the first checkpoint;
# both launchers restart from the same one and the job ends bitwise where an
# uninterrupted one does.
rs="--set train.steps=1000 --set train.checkpoint_every=100 --set comm.timeout=5"
# shellcheck disable=SC2086
one rs-one "$ps" 1 2 $rs
# shellcheck disable=SC2086
node rs 0 2 0 2 "$ps" $rs --max-restarts 1
# shellcheck disable=SC2086
node rs 1 2 1 0 "$ps" $rs --max-restarts 1
i=0
while [ ! -d "$dir/rs/checkpoint-100" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
kill -KILL "$(pgrep -f " train .*checkpoint_dir=$dir/rs" | head -n 1)"
wait
s=$(statuses rs 2)
from=$(grep -ho "restart 1 of 1 from checkpoint-[0-9]* " rs-node0.log rs-node1.log | sort -u)
if [ "$(cat rs-one.status)" = 0 ] && [ "$s" = "0 0" ] && [ "$(echo "$from" | wc -l)" -eq 1 ] \
    && [ "$(grep -l "$from" rs-node0.log rs-node1.log | wc -l)" -eq 2 ] && same rs-one rs 1000; then
  ok "a process killed: both nodes' launchers ${from% }, and end bitwise where an uninterrupted job does"
else
  echo "# statuses $(cat rs-one.status) / $s; the launchers said: $from"
  not_ok "--max-restarts on 2 nodes" rs-one.log rs-node0.log rs-node1.log
fi

node noworker 0 2 1 0 "$ps" --set comm.timeout=10
node noworker 1 2 1 0 "$ps" --set comm.timeout=10
wait
want="the nodes start no worker in all (node 0: 0 workers, 1 server; node 1: 0 workers, 1 server): a parameter-server job needs at least one; give it to a node with --workers"
if [ "$(statuses noworker 2)" = "1 1" ] && grep -qF "$want" noworker-node0.log && grep -qF "$want" noworker-node1.log; then
  ok "servers only, on every node: refused on each ($want)"
else
  not_ok "servers only, on every node" noworker-node0.log noworker-node1.log
fi

# node 0 collective (-n 1), node 1 a parameter-server node
(timeout 60 "$KSDIST" launch -n 1 --nnodes 2 --node-rank 0 --master "$master" \
   "$KS_SRCDIR/examples/default.ini" \
   --set comm.timeout=10 >kinds-node0.log 2>&1; echo $? >kinds-node0.status) &
node kinds 1 2 1 1 "$ps" --set comm.timeout=10
wait
want="node 1 starts a parameter-server job (--servers S --workers W) and this node (0) a collective job (-n N): give every node the same kind"
if [ "$(cat kinds-node0.status)" = 1 ] && grep -qF "$want" kinds-node0.log \
    && [ "$(cat kinds-node1.status)" = 1 ]; then
  ok "a collective node and a parameter-server node: refused ($want)"
else
  not_ok "nodes of two kinds" kinds-node0.log kinds-node1.log
fi

"$KSDIST" launch --nnodes 2 --node-rank 1 --master "$master" --servers 0 --workers 0 "$ps" >err 2>&1
status=$?
check "--servers 0 --workers 0 on a node is refused" 2 "this node would run nothing; on several nodes each node's launcher gives the servers and workers IT runs"
"$KSDIST" launch --servers 1 --workers 0 "$ps" >err 2>&1
status=$?
check "--workers 0 on one node is refused" 2 "a parameter-server job on one node needs at least 1 of each"
# fleetrun's form: --servers and --workers as lists of IP:PORT, one node per IP, the
# servers on the ports given; on one host, bitwise where the counts' form ends.
# A port no socket of this network namespace uses (local or remote, in
# /proc/net/tcp{,6}), from one derived from this test's pid: a fixed guess failed when
# the port was busy.
free_port() {
  p=$((20001 + $$ % 20000))
  while cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q ":$(printf %04X $p) "; do
    p=$((p + 1))
  done
  echo $p
}
port=$(free_port)
# shellcheck disable=SC2086
timeout 120 "$KSDIST" launch --servers 127.0.0.1:$port --workers 127.0.0.1:1,127.0.0.1:2 "$ps" \
  $common $sync --set "train.checkpoint_dir=$dir/fleet-one" >fleet-one.log 2>&1
status=$?
if [ $status = 0 ] && same sync-one fleet-one 200 \
    && grep -q "server 0 of 1 listening on 127.0.0.1:$port " fleet-one.log; then
  ok "fleetrun's lists on one host: the server on the port given, bitwise where --servers 1 --workers 2 ends"
else
  echo "# status $status"; not_ok "fleetrun's lists on one host" fleet-one.log
fi
"$KSDIST" launch --servers 10.0.0.1:6170,10.0.0.2:6170 --workers 10.0.0.3:6170 "$ps" >err 2>&1
status=$?
check "fleetrun's lists naming no host of this machine are refused" 2 \
  "none of the hosts in --servers and --workers is this machine (it reaches 10.0.0.1 from "
"$KSDIST" launch --servers 127.0.0.1:6170 --workers 127.0.0.1:6171,127.0.0.1:6170 "$ps" >err 2>&1
status=$?
check "an endpoint in both --servers and --workers is refused, naming it" 2 \
  "--workers: the endpoint 127.0.0.1:6170 is also in --servers: a server and a worker cannot be one process; give the worker another port"
"$KSDIST" launch --node-rank -3 --servers 127.0.0.1:6170 --workers 127.0.0.1:6171 "$ps" >err 2>&1
status=$?
check "a negative --node-rank is refused (before: read before the node list)" 2 \
  "launch: --node-rank -3: a node's place is 0 or more"
"$KSDIST" launch --servers 127.0.0.1:6170 --workers 2 "$ps" >err 2>&1
status=$?
check "a list and a count are refused" 2 \
  "give both as fleetrun's lists of IP:PORT, or both as this node's counts"
"$KSDIST" launch --servers 127.0.0.1:6170 --workers 127.0.0.2:6171 "$ps" >err 2>&1
status=$?
check "two hosts of the lists on this machine: refused, asking for --node-rank" 2 \
  "several hosts in --servers and --workers are this machine's (127.0.0.1, 127.0.0.2): give --node-rank K"

# ---- hosts of tools/cluster.sh ----
cluster_skip() { skip "$1 (the jobs across hosts)"; tap_done; }
[ "$(id -u)" = 0 ] || cluster_skip "not root: network namespaces need it"
command -v ip >/dev/null 2>&1 || cluster_skip "no ip command (install iproute2)"
cl up 3 >up.log 2>&1 || cluster_skip "cannot make a cluster of network namespaces here: $(tail -n 1 up.log)"
cluster=1
if command -v ping >/dev/null 2>&1 && ! cl run 0 ping -c 1 -W 2 "$(cl addr 1)" >ping.log 2>&1; then
  cluster_skip "the bridge does not carry traffic between the hosts here: $(tail -n 1 ping.log)"
fi
master=$(cl addr 0):29500

# shellcheck disable=SC2086
two sync $sync
s=$(statuses sync 2)
if [ "$s" = "0 0" ] && same sync-one sync 200 \
    && grep -q "servers at $(cl addr 1):[0-9]*; node 0 (host $name-host0, $(cl addr 0): workers 0-1), node 1 (host $name-host1, $(cl addr 1): server 0)" sync-node0.log; then
  ok "sync, the server on host 1 and the workers on host 0, ends bitwise where one host's job does"
else
  echo "# statuses $s"; not_ok "sync across hosts" sync-node0.log sync-node1.log
fi

# --max-restarts across hosts: a worker on host 0 killed after the first checkpoint; the
# launchers of both hosts restart from the same one and the job ends bitwise where the
# uninterrupted one on 127.0.0.1 above (rs-one, the same settings) does.
# shellcheck disable=SC2086
on_host=$(on 0) node rsx 0 2 0 2 "$ps" $rs --max-restarts 1
# shellcheck disable=SC2086
on_host=$(on 1) node rsx 1 2 1 0 "$ps" $rs --max-restarts 1
i=0
while [ ! -d "$dir/rsx/checkpoint-100" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
kill -KILL $(trainers 0 | head -n 1) 2>/dev/null
wait
s=$(statuses rsx 2)
from=$(grep -ho "restart 1 of 1 from checkpoint-[0-9]* " rsx-node0.log rsx-node1.log | sort -u)
if [ "$s" = "0 0" ] && [ "$(echo "$from" | wc -l)" -eq 1 ] \
    && [ "$(grep -l "$from" rsx-node0.log rsx-node1.log | wc -l)" -eq 2 ] \
    && grep -qF "launch: node 0 (host $name-host0, $(cl addr 0): workers 0-1) was lost" rsx-node1.log \
    && same rs-one rsx 1000; then
  ok "a worker killed on host 0: the launchers of host 0 (workers) and host 1 (server) ${from% }, and end bitwise where an uninterrupted job does"
else
  echo "# statuses $s; the launchers said: $from"
  not_ok "--max-restarts across hosts" rsx-node0.log rsx-node1.log
fi

# fleetrun's lists across hosts: the same command on hosts 0 and 1, the server on host 1
# (node 0: the servers' list comes first) at the port given, the workers on host 0.
for k in 0 1; do
  # shellcheck disable=SC2086
  ($(on $k) timeout 120 "$KSDIST" launch --servers "$(cl addr 1):6170" \
     --workers "$(cl addr 0):6171,$(cl addr 0):6172" "$ps" $common $sync \
     --set "train.checkpoint_dir=$dir/fleet" >fleet-node$k.log 2>&1
   echo $? >fleet-node$k.status) &
done
wait
s=$(statuses fleet 2)
if [ "$s" = "0 0" ] && same sync-one fleet 200 \
    && grep -q "servers at $(cl addr 1):6170; node 0 (host $name-host1, $(cl addr 1): server 0), node 1 (host $name-host0, $(cl addr 0): workers 0-1)" fleet-node0.log; then
  ok "fleetrun's lists on hosts 0 and 1 (one command on both): bitwise where one host's job ends"
else
  echo "# statuses $s"; not_ok "fleetrun's lists across hosts" fleet-node0.log fleet-node1.log
fi

# The other modes are not deterministic: the held-out accuracy, against one host's. One
# host's async ends anywhere from 0.76 to 1.0 from run to run (issue 47; it gave 0.92
# beside the hosts' 1.0 under load), so the bound is loose: both well above chance (1/3)
# and near each other.
# A short queue and a lower rate keep async from running ahead of the servers; 1500
# steps, for each worker of async to end near 1 (at 800 one ended at 0.71 in a run).
for mode in half_async async geo; do
  args="--set strategy.mode=$mode --set train.steps=1500 --set optim.lr=0.001"
  [ $mode = async ] && args="$args --set strategy.send_queue_size=1"
  [ $mode = geo ] && args="$args --set strategy.k_steps=10"
  # shellcheck disable=SC2086
  one $mode-one "$ps" 1 2 $args
  # shellcheck disable=SC2086
  two $mode $args
  a=$(metric $mode-one.log accuracy) b=$(metric $mode-node0.log accuracy)
  s=$(statuses $mode 2)
  if [ "$(cat $mode-one.status)" = 0 ] && [ "$s" = "0 0" ] && close "$a" "$b" 0.25 0.7; then
    ok "$mode across hosts: held-out accuracy $b, one host's $a"
  else
    echo "# statuses $(cat $mode-one.status) / $s, accuracy $b against $a (want within 0.25, above 0.7)"
    not_ok "$mode across hosts" $mode-one.log $mode-node0.log $mode-node1.log
  fi
done

# pslib: 2 servers and 2 workers, on one host and over 3.
if [ -f "$KS_BUILD_PLUGINS/pslib/.libs/pslib.so" ]; then
  "$KSDIST" datagen ctr ctr --train 20000 --test 4000 --vocab 300 --files 4 >datagen.log 2>&1
  ctr="$KS_SRCDIR/examples/ctr-pslib.ini"
  args="--set data.path=$dir/ctr --set train.steps=300"
  # shellcheck disable=SC2086
  one pslib-one "$ctr" 2 2 $args
  # shellcheck disable=SC2086
  on_host=$(on 0) node pslib 0 3 1 0 "$ctr" $args
  # shellcheck disable=SC2086
  on_host=$(on 1) node pslib 1 3 1 1 "$ctr" $args
  # shellcheck disable=SC2086
  on_host=$(on 2) node pslib 2 3 0 1 "$ctr" $args
  wait
  a=$(metric pslib-one.log auc) b=$(cat pslib-node1.log pslib-node2.log | metric - auc)
  s=$(statuses pslib 3)
  if [ "$(cat pslib-one.status)" = 0 ] && [ "$s" = "0 0 0" ] && no_worse "$a" "$b" 0.03 0.6 \
      && grep -q "node 1 (host $name-host1, $(cl addr 1): worker 0, server 1)" pslib-node0.log; then
    ok "pslib over 3 hosts (a server; a worker and a server; a worker): AUC $b, one host's $a"
  else
    echo "# statuses $(cat pslib-one.status) / $s, AUC $b against $a (want at most 0.03 below, above 0.6)"
    not_ok "pslib across hosts" pslib-one.log pslib-node0.log pslib-node1.log pslib-node2.log
  fi

  # pslib restarted across the same 3 hosts: the worker on host 2 killed after the first
  # checkpoint; the 3 launchers restart from the same one, and the job (asynchronous:
  # not bitwise) ends at most 0.03 below one host's AUC.
  for k in 0 1 2; do
    # shellcheck disable=SC2086
    on_host=$(on $k) node pslib-rs $k 3 $((k < 2)) $((k > 0)) "$ctr" $args \
      --set train.checkpoint_every=100 --set comm.timeout=10 --max-restarts 1
  done
  i=0
  while [ ! -d "$dir/pslib-rs/checkpoint-100" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
  kill -KILL $(trainers 2) 2>/dev/null
  wait
  b=$(cat pslib-rs-node1.log pslib-rs-node2.log | metric - auc)
  s=$(statuses pslib-rs 3)
  from=$(grep -ho "restart 1 of 1 from checkpoint-[0-9]* " pslib-rs-node*.log | sort -u)
  if [ "$s" = "0 0 0" ] && [ "$(echo "$from" | wc -l)" -eq 1 ] \
      && [ "$(grep -l "$from" pslib-rs-node*.log | wc -l)" -eq 3 ] && no_worse "$a" "$b" 0.03 0.6; then
    ok "pslib, the worker on host 2 killed: the 3 launchers ${from% }; AUC $b, one host's $a"
  else
    echo "# statuses $s, the launchers said: $from; AUC $b against $a (want at most 0.03 below, above 0.6)"
    not_ok "pslib restarted across hosts" pslib-rs-node0.log pslib-rs-node1.log pslib-rs-node2.log
  fi

  # pslib with host 1's link cut (worker 0 and server 1): host 0 (server 0 and the store)
  # and host 2 (worker 1) end within twice [comm] timeout plus a margin, naming host 1.
  timeout=5
  pslib_cut() {
    for k in 0 1 2; do
      # shellcheck disable=SC2086
      on_host=$(on $k) node "$1" $k 3 $((k < 2)) $((k > 0)) "$ctr" $args \
        --set train.steps=1000000 --set train.checkpoint_every=100 --set comm.timeout=$timeout
    done
  }
  mid_job pslib_cut pslib-cut
  t0=$(date +%s.%N)
  cl link 1 down
  i=0
  while { [ ! -f "$run-node0.status" ] || [ ! -f "$run-node2.status" ]; } && [ $i -lt 600 ]; do
    sleep 0.1; i=$((i + 1))
  done
  took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  cl link 1 up
  wait
  s="$(cat "$run-node0.status") $(cat "$run-node2.status")"
  want="launch: node 1 (host $name-host1, $(cl addr 1): worker 0, server 1) was lost"
  if [ "$s" = "1 1" ] && awk -v t="$took" -v m=$((2 * timeout + 10)) 'BEGIN { exit !(t <= m) }' \
      && grep -qF "$want" "$run-node0.log" && grep -qF "$want" "$run-node2.log"; then
    ok "pslib, host 1's link cut: hosts 0 and 2 end in $took s ([comm] timeout $timeout s): $(grep -o "launch: node 1 [^;]*" "$run-node2.log" | head -n 1)"
  else
    echo "# statuses $s after $took s; want '$want' in the logs of nodes 0 and 2"
    not_ok "pslib, a host's link cut" "$run-node0.log" "$run-node1.log" "$run-node2.log"
  fi
else
  skip "pslib across hosts: the pslib plugin was not built"
fi

# The server host's link cut mid-job, host 0, whose launcher serves the job's store too:
# both launchers end within twice [comm] timeout plus a margin, each naming the other
# host and its roles.
timeout=5
server_cut() {
  on_host=$(on 0) node "$1" 0 2 1 0 "$ps" --set train.steps=1000000 \
    --set train.checkpoint_every=100 --set comm.timeout=$timeout
  on_host=$(on 1) node "$1" 1 2 0 2 "$ps" --set train.steps=1000000 \
    --set train.checkpoint_every=100 --set comm.timeout=$timeout
}
mid_job server_cut cut
t0=$(date +%s.%N)
cl link 0 down
i=0
while { [ ! -f "$run-node0.status" ] || [ ! -f "$run-node1.status" ]; } && [ $i -lt 600 ]; do
  sleep 0.1; i=$((i + 1))
done
took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
cl link 0 up
wait
s=$(statuses "$run" 2)
want1="launch: node 0 (host $name-host0, $(cl addr 0): server 0) was lost: server 0 ($(cl addr 0):"
# the server saw both workers silent, or in sync one of them missing a step's gradient
want0="launch: node 1 (host $name-host1, $(cl addr 1): workers 0-1) was lost: worker "
if [ "$s" = "1 1" ] && awk -v t="$took" -v m=$((2 * timeout + 10)) 'BEGIN { exit !(t <= m) }' \
    && grep -qF "$want1" "$run-node1.log" && grep -qF "$want0" "$run-node0.log"; then
  ok "the server host's link cut: both end in $took s ([comm] timeout $timeout s): $(grep -o "launch: node 0 [^;]*" "$run-node1.log" | head -n 1)"
else
  echo "# statuses $s after $took s; want '$want1' in node 1's log and '$want0' in node 0's"
  not_ok "the server host's link cut" "$run-node0.log" "$run-node1.log"
fi
tap_done
