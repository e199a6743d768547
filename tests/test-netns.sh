#!/bin/sh
# Two hosts on one machine: two network namespaces joined by a veth pair, each with its
# own address (10.211.0.1 and .2) and no route to the other's loopback. A job of two
# nodes x two workers, one ksdist launch per namespace meeting at node 0's TCP store,
# must end with exactly the parameters of `ksdist launch -n 4` on 127.0.0.1: so the
# launchers found their own addresses and Gloo listened on them. Then the same job with
# the shm plugin loaded goes hierarchical (shared memory inside each namespace, Gloo
# between them) and ends within float rounding of one process with the 4 workers'
# batch. Skipped where
# namespaces cannot be made (no root, no iproute2, a container without CAP_SYS_ADMIN).
# TAP output. Needs KSDIST and KS_BUILD_PLUGINS from the environment (tests/local.mk).
set -u
id=$$
ns0=ksdist-$id-0 ns1=ksdist-$id-1
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-netns-XXXXXX")
cleanup() {
  ip netns del "$ns0" 2>/dev/null
  ip netns del "$ns1" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

if ! command -v ip >/dev/null 2>&1; then
  echo "1..0 # SKIP no ip command (install iproute2)"
  exit 0
fi
if ! ip netns add "$ns0" 2>"$dir/netns.err" || ! ip netns add "$ns1" 2>>"$dir/netns.err" \
    || ! ip netns exec "$ns0" true 2>>"$dir/netns.err"; then
  echo "1..0 # SKIP cannot make network namespaces here: $(head -n 1 "$dir/netns.err")"
  exit 0
fi
echo "1..6"
fail() { echo "not ok $1 - $2"; shift 2; for line in "$@"; do echo "# $line"; done; exit 1; }

ip link add "ksv$id" type veth peer name "ksw$id" \
  && ip link set "ksv$id" netns "$ns0" && ip link set "ksw$id" netns "$ns1" \
  && ip -n "$ns0" addr add 10.211.0.1/24 dev "ksv$id" \
  && ip -n "$ns1" addr add 10.211.0.2/24 dev "ksw$id" \
  && ip -n "$ns0" link set lo up && ip -n "$ns1" link set lo up \
  && ip -n "$ns0" link set "ksv$id" up && ip -n "$ns1" link set "ksw$id" up \
  || fail 1 "two hosts joined by a veth pair"
echo "ok 1 - hosts 10.211.0.1 ($ns0) and 10.211.0.2 ($ns1)"

path=
for p in openblas optim store roles gloo collective; do path=$path${path:+:}$KS_BUILD_PLUGINS/$p/.libs; done
export KS_PLUGIN_PATH=$path KS_PLUGIN_SYSTEM_PATH= KS_STORE_TOKEN=6d1f0c9e2a7b4853
sets() {
  for s in train.steps=20 train.log_every=20 log.level=${level:-warning} openblas.threads=1 \
      train.batch=16 comm.timeout=${timeout:-60} "train.checkpoint_dir=$dir/$1"; do
    printf -- '--set %s ' "$s"
  done
}
# The float data of a checkpoint, after safetensors' 8-byte header length and header.
floats() {
  file=$dir/$1/checkpoint-20/model.safetensors
  header=$(od -An -t u8 -N 8 "$file" | tr -d ' ')
  tail -c +$((9 + header)) "$file"
}

# shellcheck disable=SC2046
timeout 120 "$KSDIST" launch -n 4 $(sets one-host) >"$dir/one-host.log" 2>&1 \
  || fail 2 "ksdist launch -n 4 on 127.0.0.1" "$(tail -n 20 "$dir/one-host.log")"
echo "ok 2 - ksdist launch -n 4 on 127.0.0.1"

# node NS RANK RUN [COMMAND...]: one node of the two-host job RUN (its checkpoints in
# $dir/RUN), started through COMMAND when given
node() {
  ns=$1 rank=$2 run=$3
  shift 3
  # shellcheck disable=SC2046
  ip netns exec "$ns" "$@" timeout 120 "$KSDIST" launch -n 2 --nnodes 2 --node-rank "$rank" \
    --master 10.211.0.1:29500 $(sets "$run") ${extra:-} >"$dir/$run-node$rank.log" 2>&1
}
# two_hosts TEST RUN: both nodes; fails TEST when one does
two_hosts() {
  node "$ns1" 1 "$2" &
  node1=$!
  node "$ns0" 0 "$2"
  status0=$?
  wait $node1
  status1=$?
  [ $status0 -eq 0 ] || fail "$1" "node 0 in $ns0 (exit $status0)" "$(tail -n 20 "$dir/$2-node0.log")"
  [ $status1 -eq 0 ] || fail "$1" "node 1 in $ns1 (exit $status1)" "$(tail -n 20 "$dir/$2-node1.log")"
}
two_hosts 3 two-hosts
floats one-host >"$dir/one-host.bin"
floats two-hosts >"$dir/two-hosts.bin"
[ -s "$dir/one-host.bin" ] && cmp -s "$dir/one-host.bin" "$dir/two-hosts.bin" \
  || fail 3 "two hosts end with the parameters of one" \
    "$(wc -c "$dir/one-host.bin" "$dir/two-hosts.bin")"
echo "ok 3 - 2 hosts x 2 workers over 10.211.0.0/24 end bitwise where one host's 4 workers do"

# The same with the shm plugin: auto makes the allreduce hierarchical.
export KS_PLUGIN_PATH=$path:$KS_BUILD_PLUGINS/shm/.libs
level=info # for the start-up lines
two_hosts 4 hierarchical
grep -q "worker 0 of 4 (collective mode, hierarchical by auto: several hosts with several ranks each)" \
  "$dir/hierarchical-node0.log" \
  || fail 4 "worker 0 says the allreduce is hierarchical" "$(grep "worker 0" "$dir/hierarchical-node0.log")"
echo "ok 4 - 2 hosts x 2 workers, hierarchical: shared memory in each host, Gloo between them"

# One process with the batch of the four workers (4 x 16 rows) ends where they did, but
# for the order of float sums.
# shellcheck disable=SC2046
timeout 120 "$KSDIST" train $(sets one-process) --set train.batch=64 >"$dir/one-process.log" 2>&1 \
  || fail 5 "ksdist train with batch 64" "$(tail -n 20 "$dir/one-process.log")"
floats one-process | od -An -v -t f4 | tr -s ' ' '\n' | sed '/^$/d' >"$dir/one-process.txt"
floats hierarchical | od -An -v -t f4 | tr -s ' ' '\n' | sed '/^$/d' >"$dir/hierarchical.txt"
worst=$(paste "$dir/one-process.txt" "$dir/hierarchical.txt" | awk '
  { d = $1 - $2; if (d < 0) d = -d; if (d > worst) worst = d; n++ }
  END { if (n < 1000) print "none"; else printf "%.3g\n", worst }')
[ "$worst" != none ] && awk -v w="$worst" 'BEGIN { exit !(w <= 1e-5) }' \
  || fail 5 "hierarchical against one process: largest difference $worst (want <= 1e-5)" \
    "$(wc -l "$dir/one-process.txt" "$dir/hierarchical.txt")"
echo "ok 5 - hierarchical ends within $worst of one process with batch 64"

# Shared memory asked for by name across hosts: node 1 gets a host name of its own (a UTS
# namespace), and its first rank refuses, naming both hosts, instead of mapping a
# segment it cannot share.
if unshare --uts true 2>/dev/null; then
  timeout=5 extra="--set comm.backend=shm"
  node "$ns1" 1 across unshare --uts sh -c 'hostname ksdist-other-host && exec "$0" "$@"' &
  node1=$!
  node "$ns0" 0 across
  wait $node1
  # the first of node 1's ranks to fail is named; the launcher stops the other
  grep -Eq "shm: rank [23] is on host ksdist-other-host, rank 0 on another" "$dir/across-node1.log" \
    || fail 6 "shm across hosts is refused, naming them" "$(tail -n 5 "$dir/across-node1.log")"
  echo "ok 6 - shm across two host names is refused: $(grep -Eo "rank [23] is on host [^:(]*" "$dir/across-node1.log" | head -n 1)"
else
  echo "ok 6 # SKIP unshare --uts is not allowed here"
fi
