#!/bin/sh
# Jobs and faults across hosts on tools/cluster.sh: 4 network namespaces, each with its
# own address and host name, one `ksdist launch` per host meeting at host 0's store.
# - 4 hosts x 1 rank end bitwise where `ksdist launch -n 4` on one host does, and the log
#   names the algorithms Gloo's `auto` takes across hosts;
# - 2 hosts x 2 ranks go hierarchical (shm inside, Gloo between) and end within float
#   rounding of one process with the 4 workers' batch;
# - a pipeline with one stage per host ends bitwise where the same pipeline on one host does;
# - a parameter server on host 0 and its workers on hosts 1 and 2 (paddlecloud variables)
#   end bitwise where `ksdist launch --servers 1 --workers 2` does;
# - a worker killed on one host: every host's launcher restarts from the newest
#   checkpoint (--max-restarts) and the job ends bitwise equal to the uninterrupted one;
# - a host whose link is cut, and a host whose processes are all killed, mid-step: the
#   others end within twice [comm] timeout plus a margin, naming that host and its rank;
# - a host that does not come back for a restart ends the job naming it.
# Skipped where namespaces cannot be made (no root, no iproute2, no CAP_SYS_ADMIN).
# TAP output. Needs KSDIST, KS_BUILD_PLUGINS and KS_SRCDIR (tests/local.mk).
set -u
name=kstest-$$ # apart from any other cluster (the Slurm test's, a user's)
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-cluster-XXXXXX")
cl() { "$KS_SRCDIR/tools/cluster.sh" --name "$name" "$@"; }
cleanup() {
  cl down >/dev/null 2>&1
  "$KS_SRCDIR/tools/cluster.sh" --name "$name-b" down >/dev/null 2>&1
  [ -n "${KS_TEST_KEEP:-}" ] && echo "# kept $dir" || rm -rf "$dir"
}
trap cleanup EXIT
# dash runs no EXIT trap on a signal: a timeout or ^C must still take the hosts down
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP
cd "$dir" || exit 1
. "$KS_SRCDIR/tests/tap.sh"

if [ "$(id -u)" != 0 ]; then
  echo "1..0 # SKIP not root: network namespaces need it"
  exit 0
fi
if ! command -v ip >/dev/null 2>&1; then
  echo "1..0 # SKIP no ip command (install iproute2)"
  exit 0
fi
if ! cl up 4 >up.log 2>&1; then
  echo "1..0 # SKIP cannot make a cluster of network namespaces here: $(tail -n 1 up.log)"
  exit 0
fi
if command -v ping >/dev/null 2>&1 && ! cl run 0 ping -c 1 -W 2 "$(cl addr 1)" >ping.log 2>&1; then
  echo "1..0 # SKIP the bridge does not carry traffic between the hosts here (a firewall's FORWARD policy?): $(tail -n 1 ping.log)"
  exit 0
fi
if ! command -v pgrep >/dev/null 2>&1; then
  echo "1..0 # SKIP no pgrep (install procps)"
  exit 0
fi
master=$(cl addr 0):29500

path=
for p in openblas optim store roles gloo collective segment; do path=$path${path:+:}$KS_BUILD_PLUGINS/$p/.libs; done
export KS_PLUGIN_PATH=$path KS_PLUGIN_SYSTEM_PATH= KS_STORE_TOKEN=5a0c33e1b7d24f96
timeout=30 # [comm] timeout: 8 s for the restart and the faults below, which wait on it
steps=2000 batch=16
sets() {
  for s in train.steps=$steps train.log_every=500 log.level=${level:-warning} \
      openblas.threads=1 train.batch=$batch train.checkpoint_every=250 comm.timeout=$timeout \
      "train.checkpoint_dir=$dir/$1"; do
    printf -- '--set %s ' "$s"
  done
}
# The float data of RUN's last checkpoint (FILE, model.safetensors by default), after
# safetensors' header length and header.
floats() {
  file=$dir/$1/checkpoint-$steps/${2:-model.safetensors}
  [ -f "$file" ] || return
  header=$(od -An -t u8 -N 8 "$file" | tr -d ' ')
  tail -c +$((9 + header)) "$file"
}
same() {
  floats "$1" "${3:-}" >"$1.bin"; floats "$2" "${3:-}" >"$2.bin"
  [ -s "$1.bin" ] && cmp -s "$1.bin" "$2.bin"
}

# job RUN HOSTS NPROC [ARGS...]: one launcher per host 0..HOSTS-1 in the background, its
# output in RUN-nodeK.log and its status in RUN-nodeK.status
job() {
  run=$1 hosts=$2 nproc=$3
  shift 3
  k=0
  while [ $k -lt "$hosts" ]; do
    # shellcheck disable=SC2046
    (cl run $k timeout 120 "$KSDIST" launch -n "$nproc" --nnodes "$hosts" --node-rank $k \
      --master "$master" $(sets "$run") "$@" >"$run-node$k.log" 2>&1
     echo $? >"$run-node$k.status") &
    k=$((k + 1))
  done
}
# statuses RUN HOSTS: "0 0 0 0", after `wait` (in this shell, not in a $(...))
statuses() {
  k=0 out=
  while [ $k -lt "$2" ]; do out="$out${out:+ }$(cat "$1-node$k.status")"; k=$((k + 1)); done
  echo "$out"
}
# when_saved RUN: waits (at most 60 s) for RUN's first checkpoint, so a fault hits mid-job
when_saved() {
  i=0
  while [ ! -d "$dir/$1/checkpoint-250" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
}
# mid_job RUN HOSTS NPROC [ARGS...]: starts RUN as job does and waits for its first
# checkpoint with every launcher still running. A job that ended before it (on a loaded
# machine a rank can reach Gloo's connect later than the faults' 8 s [comm] timeout) is
# not the fault under test: it is said and started once more, as RUN-again.
mid_job() {
  run=$1
  for attempt in 1 2; do
    job "$@"
    when_saved "$run"
    if [ -d "$dir/$run/checkpoint-250" ] && ! ls "$run"-node*.status >/dev/null 2>&1; then
      return 0
    fi
    echo "# $run ended or did not save before the fault (attempt $attempt): $(grep -h ksdist "$run"-node*.log | head -n 2 | tr '\n' ' ')"
    wait
    [ "$attempt" = 2 ] || { shift; set -- "$run-again" "$@"; run=$run-again; }
  done
  return 1
}
# the `ksdist train` processes on host K
trainers() {
  for p in $(ip netns pids "$name-host$1"); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q ' train ' && echo "$p"
  done
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# shellcheck disable=SC2046
timeout 120 "$KSDIST" launch -n 4 $(sets one-host) >one-host.log 2>&1
if [ $? -eq 0 ]; then ok "ksdist launch -n 4 on one host"; else not_ok "ksdist launch -n 4 on one host" one-host.log; fi

level=info
job four 4 1
wait
level=warning
s=$(statuses four 4)
if [ "$s" = "0 0 0 0" ] && same one-host four \
    && grep -q "gloo by auto: ranks on several hosts" four-node0.log; then
  ok "4 hosts x 1 rank (Gloo between $name-host0..3) end bitwise where one host's 4 ranks do"
else
  echo "# statuses $s"; not_ok "4 hosts x 1 rank against one host" four-node0.log four-node3.log
fi
# Gloo's `auto` says what it takes for ranks on several hosts (plugins/gloo/choose.c).
rule="gloo: 4 ranks on several hosts: allreduce \`auto\` takes the ring below 131072 bytes ([gloo] auto_hosts_ring_bytes), halving_doubling below 1048576 ([gloo] auto_small_bytes), ring_chunked from there"
if grep -qF "$rule" four-node0.log; then
  ok "4 hosts x 1 rank: the log names auto's algorithms across hosts"
else
  echo "# node 0's log lacks: $rule"; not_ok "the log names auto's algorithms across hosts" four-node0.log
fi

# The same with the shm plugin: auto makes the allreduce hierarchical.
# 200 steps: float sums in another order drift apart with every step
export KS_PLUGIN_PATH=$path:$KS_BUILD_PLUGINS/shm/.libs
level=info steps=200
job hier 2 2
wait
s=$(statuses hier 2)
# shellcheck disable=SC2046
timeout 120 "$KSDIST" train $(sets one-process) --set train.batch=64 >one-process.log 2>&1
floats one-process | od -An -v -t f4 | tr -s ' ' '\n' | sed '/^$/d' >one-process.txt
floats hier | od -An -v -t f4 | tr -s ' ' '\n' | sed '/^$/d' >hier.txt
export KS_PLUGIN_PATH=$path
level=warning steps=2000
worst=$(paste one-process.txt hier.txt | awk '
  { d = $1 - $2; if (d < 0) d = -d; if (d > worst) worst = d; n++ }
  END { if (n < 1000) print "none"; else printf "%.3g\n", worst }')
if [ "$s" = "0 0" ] && grep -q "hierarchical by auto: several hosts with several ranks each" hier-node0.log \
    && [ "$worst" != none ] && awk -v w="$worst" 'BEGIN { exit !(w <= 1e-4) }'; then
  ok "2 hosts x 2 ranks, hierarchical, end within $worst of one process with batch 64"
else
  echo "# statuses $s, largest difference $worst (want <= 1e-4)"; not_ok "2 hosts x 2 ranks, hierarchical" hier-node0.log
fi

# A pipeline of 2 stages, one per host, against the same on one host.
pipe="--set model.hidden=32,32,32 --set pipeline.stages=2 --set pipeline.micro_batches=4"
# shellcheck disable=SC2046,SC2086
timeout 120 "$KSDIST" launch -n 2 $(sets pipe-one-host) $pipe >pipe-one-host.log 2>&1
# shellcheck disable=SC2086
job pipe 2 1 $pipe
wait
s=$(statuses pipe 2)
if [ "$s" = "0 0" ] && same pipe-one-host pipe stage-0-of-2.safetensors \
    && same pipe-one-host pipe stage-1-of-2.safetensors; then
  ok "a pipeline with a stage on each of 2 hosts ends bitwise where it does on one host"
else
  echo "# statuses $s"; not_ok "a pipeline with a stage per host" pipe-one-host.log pipe-node0.log pipe-node1.log
fi

# A worker killed on host 2: every launcher restarts from the newest checkpoint, and
# the job ends bitwise where one host's job restarted from the same checkpoint does. (A
# resumed job whose allreduce is Gloo's ends within float rounding of an uninterrupted one,
# on one host too: 5e-7 here; with shared memory, bitwise.)
ex=$KS_SRCDIR/examples/default.ini batch=128 steps=1000 timeout=8
# shellcheck disable=SC2046
timeout 120 "$KSDIST" launch -n 4 "$ex" $(sets one-host-restart) --max-restarts 2 \
  >one-host-restart.log 2>&1 &
when_saved one-host-restart
kill -KILL $(pgrep -f " train .*checkpoint_dir=$dir/one-host-restart" | tail -n 1)
job restart 4 1 "$ex" --max-restarts 2
when_saved restart
kill -KILL $(trainers 2) 2>/dev/null
wait
s=$(statuses restart 4)
restarted=$(grep -l "restart 1 of 2 from checkpoint-250 " restart-node*.log | wc -l)
if [ "$s" = "0 0 0 0" ] && [ "$restarted" -eq 4 ] \
    && grep -q "restart 1 of 2 from checkpoint-250 " one-host-restart.log \
    && same one-host-restart restart; then
  ok "a worker killed on host 2: the 4 launchers restart from checkpoint-250 and end bitwise where one host's restarted job does"
else
  echo "# statuses $s, $restarted launchers restarted from checkpoint-250"
  not_ok "restart across hosts" one-host-restart.log restart-node0.log restart-node2.log
fi
batch=16 steps=2000

# Parameter servers as fleetrun places them: the server on host 0, a worker on each of
# hosts 1 and 2, each process started with the paddlecloud variables and meeting in a
# directory all hosts see; sync ends bitwise where `ksdist launch` on one host does.
if [ -f "$KS_BUILD_PLUGINS/transpiler/.libs/transpiler.so" ]; then
  export KS_PLUGIN_PATH=$path:$KS_BUILD_PLUGINS/transpiler/.libs
  ps="$KS_SRCDIR/examples/ps-mlp.ini --set train.steps=200 --set train.log_every=100 --set openblas.threads=1"
  # shellcheck disable=SC2086
  timeout 120 "$KSDIST" launch --servers 1 --workers 2 $ps --set "train.checkpoint_dir=$dir/ps-one-host" \
    >ps-one-host.log 2>&1
  server=$(cl addr 0):6200
  for k in 0 1 2; do
    role=TRAINER
    [ $k -eq 0 ] && role=PSERVER
    # shellcheck disable=SC2086
    (cl run $k env TRAINING_ROLE=$role PADDLE_PSERVERS_IP_PORT_LIST="$server" PADDLE_TRAINERS_NUM=2 \
       PADDLE_TRAINER_ID=$((k > 0 ? k - 1 : 0)) POD_IP="$(cl addr 0)" PADDLE_PORT=6200 \
       timeout 120 "$KSDIST" train $ps --set "train.checkpoint_dir=$dir/ps" --set "gloo.hostname=$(cl addr $k)" \
       --set "comm.store_address=$dir/ps-store" --set job.name=ps-across >"ps-host$k.log" 2>&1
     echo $? >"ps-host$k.status") &
  done
  wait
  s="$(cat ps-host0.status) $(cat ps-host1.status) $(cat ps-host2.status)"
  steps=200
  if [ "$s" = "0 0 0" ] && same ps-one-host ps server-0-of-1.safetensors; then
    ok "parameter servers across hosts (server on host 0, workers on 1 and 2) end bitwise where one host's do"
  else
    echo "# statuses $s"; not_ok "parameter servers across hosts" ps-one-host.log ps-host0.log ps-host1.log
  fi
  export KS_PLUGIN_PATH=$path
  steps=2000
else
  skip "parameter servers across hosts: the transpiler plugin was not built (it needs libzmq3-dev)"
fi

# fault RUN K HOW: HOW (link, or kill: every process of host K) mid-job; the others must
# end with status 1 within twice [comm] timeout plus 10 s, node 0 naming host K.
fault() {
  steps=100000
  mid_job "$1" 4 1
  set -- "$run" "$2" "$3" "$4"
  t0=$(now)
  if [ "$3" = link ]; then cl link "$2" down; else kill -KILL $(ip netns pids "$name-host$2"); fi
  k=0 took=0 s=
  for k in 0 1 2 3; do
    [ $k -eq "$2" ] && continue
    i=0
    while [ ! -f "$1-node$k.status" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    took=$(elapsed "$t0") s="$s $(cat "$1-node$k.status" 2>/dev/null)"
  done
  [ "$3" = link ] && cl link "$2" up
  wait
  steps=2000
  want="node $2 (host $name-host$2, $(cl addr "$2"): rank $2) was lost"
  if [ "$s" = " 1 1 1" ] && awk -v t="$took" -v m=$((2 * timeout + 10)) 'BEGIN { exit !(t <= m) }' \
      && grep -q "launch: $want" "$1-node0.log"; then
    ok "$4: the others end in $took s ([comm] timeout $timeout s): $(grep -o "launch: node $2 [^;]*" "$1-node0.log" | head -n 1)"
  else
    echo "# statuses$s after $took s; node 0's log lacks: $want"; not_ok "$4" "$1-node0.log"
  fi
}
fault cut 3 link "host 3's link cut mid-job"
fault killed 2 kill "every process of host 2 killed mid-job"

# A host that does not come back for the restart: the others end naming it.
mid_job gone 4 1 --max-restarts 1
gone=$run
t0=$(now)
kill -KILL $(ip netns pids "$name-host1")
wait
s=$(statuses "$gone" 4 | cut -d' ' -f1,3,4)
took=$(elapsed "$t0")
want="node 1 (host $name-host1, $(cl addr 1): rank 1) did not come back for restart 1"
if [ "$s" = "1 1 1" ] && grep -q "$want" "$gone-node0.log"; then
  ok "host 1 gone for good: the others end in $took s naming it"
else
  echo "# statuses $s; node 0's log lacks: $want"; not_ok "a host that does not come back" "$gone-node0.log"
fi
# The tool itself: each host its own name; bad use refused, naming what to do; a second
# cluster beside this one; `down` removes this one's namespaces and bridge, not the other's.
other=$name-b
bridge=ksbr$(cat "/run/ksdist-cluster/$name/index")
if [ "$(cl run 2 hostname)" = "$name-host2" ] && [ "$(cl run 0 hostname)" = "$name-host0" ] \
    && [ "$(cl addr bridge)" = "$(ip -4 -o addr show "$bridge" | awk '{ sub("/.*", "", $4); print $4 }')" ]; then
  ok "cluster.sh run K: host K's own host name ($(cl run 2 hostname))"
else
  not_ok "cluster.sh run K: host names $(cl run 0 hostname), $(cl run 2 hostname)"
fi
cl run 9 true >err 2>&1
status=$?
check "cluster.sh run 9 on 4 hosts is refused" 1 "cluster '$name' has no host 9: its hosts are 0..3"
cl up 2 >err 2>&1
status=$?
check "a second up of the same name is refused" 1 "cluster '$name' is already up"
if command -v setpriv >/dev/null 2>&1; then
  # a copy anyone can read: the checkout may be in a folder only root enters
  cp "$KS_SRCDIR/tools/cluster.sh" "$dir/cluster-copy.sh" && chmod 755 "$dir" "$dir/cluster-copy.sh"
  setpriv --reuid 65534 --regid 65534 --clear-groups "$dir/cluster-copy.sh" up 1 >err 2>&1
  status=$?
  check "cluster.sh without root is refused" 1 "needs root to make network namespaces"
else
  skip "no setpriv to run cluster.sh as another user"
fi
"$KS_SRCDIR/tools/cluster.sh" --name "$other" up 1 >err 2>&1
cl down >down.log 2>&1
left=$(ip netns list | grep -c "^$name-host")
if [ "$left" -eq 0 ] && ! ip link show "$bridge" >/dev/null 2>&1 && [ ! -e "/run/ksdist-cluster/$name" ] \
    && [ "$("$KS_SRCDIR/tools/cluster.sh" --name "$other" run 0 hostname)" = "$other-host0" ]; then
  ok "down removes $name's hosts and $bridge; $other, beside it, is still up"
else
  echo "# $left namespaces left"; not_ok "cluster.sh down" down.log err
fi
"$KS_SRCDIR/tools/cluster.sh" --name "$other" down >/dev/null 2>&1
tap_done
