#!/bin/sh
# A real Slurm on this machine: four hosts from tools/cluster.sh (network namespaces,
# each with its own host name), slurmctld on the bridge's address, one slurmd per host,
# a private munged; Slurm's state, spools, logs and munge key all in a temporary
# directory. A batch job of 4 nodes x 1 task whose only ksdist line is
# `srun ksdist train CONFIG` (no flags: the job meets at the first node, on a port from
# the job id) must end with exactly the parameters and the eval line of
# `ksdist launch -n 4` on 127.0.0.1. A parameter-server job (sync, [roles] servers = 2:
# the last two tasks serve) ends with the eval line and, bit for bit, the servers' shards
# of `ksdist launch --servers 2 --workers 2`. Skipped with the reason where Slurm cannot start
# (not root, no slurm-wlm or munge, no namespaces).
# TAP output. Needs KSDIST, KS_BUILD_PLUGINS and KS_SRCDIR from the environment
# (tests/local.mk).
set -u
name=slurm$$
cluster="sh ${KS_SRCDIR:-.}/tools/cluster.sh --name $name"
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-slurm-XXXXXX")
nodes=4
pids=
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null; done
  [ -f "$dir/munged.pid" ] && kill "$(cat "$dir/munged.pid")" 2>/dev/null
  $cluster down >/dev/null 2>&1
  rm -rf "$dir"
}
trap cleanup EXIT
# dash runs no EXIT trap on a signal: a timeout or ^C must still stop the daemons
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP

skip() { echo "1..0 # SKIP $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "not root: slurmd and network namespaces need root"
for tool in slurmctld slurmd sbatch sinfo munged ip unshare; do
  command -v $tool >/dev/null 2>&1 \
    || skip "no $tool command (install slurm-wlm, munge, iproute2: tools/setup.sh does)"
done
$cluster up $nodes >"$dir/cluster.log" 2>&1 \
  || skip "cannot make the hosts: $(tail -n 1 "$dir/cluster.log")"
bridge=$($cluster addr bridge)
net=${bridge%.*}

# A munge key of our own, and munged on a socket in $dir: no system daemon needed.
dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 2>/dev/null && chmod 600 "$dir/munge.key"
munged -f -S "$dir/munge.sock" --key-file="$dir/munge.key" --log-file="$dir/munged.log" \
  --pid-file="$dir/munged.pid" --seed-file="$dir/munged.seed" 2>"$dir/munged.err" \
  || skip "munged does not start: $(head -n 1 "$dir/munged.err")"

# Ports of our own: slurmctld listens on the machine, beside any other Slurm.
ctld_port=$((20000 + $$ % 20000))
export SLURM_CONF="$dir/slurm.conf"
cat >"$SLURM_CONF" <<EOF
ClusterName=$name
SlurmctldHost=$(hostname -s)($bridge)
SlurmctldPort=$ctld_port
SlurmdPort=$((ctld_port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/linear
NodeName=$name-host[0-$((nodes - 1))] NodeAddr=$net.[1-$nodes] CPUs=1 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
# a machine that mounts cgroup v1 beside a v2 tree: slurmd's autodetection refuses
# hybrids, so v1 is named; on a v2-only machine autodetection finds it
if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then
  : >"$dir/cgroup.conf"
else
  echo "CgroupPlugin=cgroup/v1" >"$dir/cgroup.conf"
fi
mkdir -p "$dir/state"
# Each host resolves the others' names (a private /etc/hosts in its mount namespace).
{
  echo "127.0.0.1 localhost"
  k=0
  while [ $k -lt $nodes ]; do echo "$net.$((k + 1)) $name-host$k"; k=$((k + 1)); done
} >"$dir/hosts"

slurmctld -D -i >"$dir/slurmctld.out" 2>&1 &
pids="$pids $!"
k=0
while [ $k -lt $nodes ]; do
  $cluster run $k unshare --mount --propagation private sh -c \
    "mount --bind '$dir/hosts' /etc/hosts && exec slurmd -D -N $name-host$k" \
    >"$dir/slurmd$k.out" 2>&1 &
  pids="$pids $!"
  k=$((k + 1))
done
idle=0
for _ in $(seq 60); do
  idle=$(sinfo -h -t idle -o %D 2>/dev/null | head -n 1)
  [ "${idle:-0}" = $nodes ] && break
  sleep 0.5
done
[ "${idle:-0}" = $nodes ] \
  || skip "Slurm did not start ($idle of $nodes nodes idle): $(tail -n 1 "$dir/slurmctld.log" "$dir/slurmd0.out" 2>/dev/null | tr '\n' ' ')"

echo "1..3"
# fail N NAME LINE...: result N failed; ends the case (run in a subshell)
fail() { echo "not ok $1 - $2"; shift 2; for line in "$@"; do echo "# $line"; done; exit 1; }
echo "ok 1 - Slurm: $nodes nodes idle ($name-host0..$((nodes - 1)) at $net.1..$nodes)"

# Gloo between hosts; without shm, so the one-host reference takes the same sums.
path=
for p in openblas optim store roles gloo collective transpiler; do path=$path${path:+:}$KS_BUILD_PLUGINS/$p/.libs; done
export KS_PLUGIN_PATH=$path KS_PLUGIN_SYSTEM_PATH=
unset KS_STORE_TOKEN
config() {
  cat <<EOF
[model]
type = mlp
hidden = 64, 64
activation = tanh
[data]
task = spirals
samples = 2048
[train]
optimizer = adam
steps = 20
batch = 16
log_every = 20
checkpoint_dir = $dir/$1
[optim]
lr = 0.003
[openblas]
threads = 1
[log]
level = warning
EOF
}
# The float data of a checkpoint's FILE (the model's by default), after safetensors'
# 8-byte header length and header.
floats() {
  file=$dir/$1/checkpoint-${2:-20/model}.safetensors
  [ -f "$file" ] || return
  header=$(od -An -t u8 -N 8 "$file" | tr -d ' ')
  tail -c +$((9 + header)) "$file"
}

# Each case in a subshell: its fail ends the case only, and the next case still runs.
failed=0
(
config launch >"$dir/launch.ini"
timeout 120 "$KSDIST" launch -n $nodes "$dir/launch.ini" >"$dir/launch.log" 2>&1 \
  || fail 2 "ksdist launch -n $nodes on 127.0.0.1" "$(tail -n 20 "$dir/launch.log")"
want=$(sed -n 's/^\[rank 0\] \(eval .*\)/\1/p' "$dir/launch.log")

config slurm >"$dir/slurm.ini"
cat >"$dir/job.sh" <<EOF
#!/bin/sh
srun "$KSDIST" train "$dir/slurm.ini"
EOF
timeout 180 sbatch --wait -N $nodes --ntasks-per-node 1 -o "$dir/job.out" "$dir/job.sh" \
  >"$dir/sbatch.log" 2>&1 \
  || fail 2 "sbatch -N $nodes --ntasks-per-node 1: srun ksdist train" \
    "$(cat "$dir/sbatch.log")" "$(tail -n 20 "$dir/job.out" 2>/dev/null)"
got=$(grep -c "^$want\$" "$dir/job.out")
[ -n "$want" ] && [ "$got" = $nodes ] \
  || fail 2 "every task prints the launcher's '$want'" "$(tail -n 20 "$dir/job.out")"
floats launch >"$dir/launch.bin" && floats slurm >"$dir/slurm.bin" \
  && [ -s "$dir/launch.bin" ] && cmp -s "$dir/launch.bin" "$dir/slurm.bin" \
  || fail 2 "the Slurm job's parameters equal the launcher's bit for bit" \
    "$(tail -n 20 "$dir/job.out")"
jobid=$(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' "$dir/sbatch.log")
k=0
while [ $k -lt $nodes ]; do
  grep -q "launch task StepId=$jobid.0 " "$dir/slurmd-$name-host$k.log" \
    || fail 2 "the step ran a task on $name-host$k" "$(tail -n 5 "$dir/slurmd-$name-host$k.log")"
  k=$((k + 1))
done
echo "ok 2 - sbatch -N $nodes: srun ksdist train ends as ksdist launch -n $nodes ($want, parameters bitwise equal)"
) || failed=1

(
# Parameter servers: the same srun line, the config says how many tasks serve.
if [ ! -e "$KS_BUILD_PLUGINS/transpiler/.libs/transpiler.so" ]; then
  echo "ok 3 # SKIP the transpiler plugin is not built (ZeroMQ)"
  exit 0
fi
cat >"$dir/ps.ini" <<EOF
[job]
mode = transpiler
[strategy]
mode = sync
[model]
type = mlp
hidden = 64, 64
activation = tanh
[data]
task = rings
samples = 2048
[train]
optimizer = adam
steps = 30
batch = 64
log_every = 30
checkpoint_dir = $dir/ps-slurm
[optim]
lr = 0.003
[roles]
servers = 2
[openblas]
threads = 1
[log]
level = warning
EOF
timeout 120 "$KSDIST" launch --servers 2 --workers 2 "$dir/ps.ini" --set roles.servers=0 \
  --set "train.checkpoint_dir=$dir/ps-launch" >"$dir/ps-launch.log" 2>&1 \
  || fail 3 "ksdist launch --servers 2 --workers 2" "$(tail -n 20 "$dir/ps-launch.log")"
want=$(sed -n 's/^\[rank 0\] \(eval .*\)/\1/p' "$dir/ps-launch.log")
cat >"$dir/ps.sh" <<EOF
#!/bin/sh
srun "$KSDIST" train "$dir/ps.ini"
EOF
timeout 180 sbatch --wait -N $nodes --ntasks-per-node 1 -o "$dir/ps.out" "$dir/ps.sh" \
  >"$dir/sbatch.log" 2>&1 \
  || fail 3 "sbatch -N $nodes: srun ksdist train, 2 servers and 2 workers" \
    "$(cat "$dir/sbatch.log")" "$(tail -n 20 "$dir/ps.out" 2>/dev/null)"
got=$(grep -c "^$want\$" "$dir/ps.out")
[ -n "$want" ] && [ "$got" = 2 ] \
  || fail 3 "both workers print the launcher's '$want'" "$(tail -n 20 "$dir/ps.out")"
# sync: each server's shard after the last step bitwise equal to the launcher's
for i in 0 1; do
  floats ps-launch "30/server-$i-of-2" >"$dir/ps-launch-$i.bin"
  floats ps-slurm "30/server-$i-of-2" >"$dir/ps-slurm-$i.bin"
  [ -s "$dir/ps-launch-$i.bin" ] && cmp -s "$dir/ps-launch-$i.bin" "$dir/ps-slurm-$i.bin" \
    || fail 3 "server $i's shard after step 30 equals the launcher's bit for bit" \
      "$(ls "$dir/ps-launch" "$dir/ps-slurm" 2>&1)" "$(tail -n 20 "$dir/ps.out")"
done
echo "ok 3 - sbatch -N $nodes: 2 parameter servers and 2 workers end as ksdist launch --servers 2 --workers 2 ($want, both servers' shards bitwise equal)"
) || failed=1
exit $failed
