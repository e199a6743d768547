#!/bin/sh
# A cluster on one machine: N hosts, each a network namespace with its own address on a
# bridge, its own host name (a UTS namespace) and a link shaped with tbf, for trying a
# multi-machine ksdist job on a laptop. Needs root, iproute2 (ip, tc) and util-linux
# (unshare, nsenter, flock).
#
#   cluster.sh [--name NAME] up N [--rate RATE]   make hosts NAME-host0..N-1
#   cluster.sh [--name NAME] run K CMD...          run CMD on host K (its network and name)
#   cluster.sh [--name NAME] link K down|up        cut or restore host K's link
#   cluster.sh [--name NAME] addr K|bridge         print host K's address (bridge: this machine's)
#   cluster.sh [--name NAME] hosts                 one line per host: K, name, address
#   cluster.sh [--name NAME] down                  remove what `up` made, and only that
#
# NAME (default $KS_CLUSTER, else ksdist) lets several clusters live side by side: each
# has its own namespaces, bridge and /24, and its state in /run/ksdist-cluster/NAME.
set -u
prog=cluster.sh
root=${KS_CLUSTER_STATE:-/run/ksdist-cluster}
name=${KS_CLUSTER:-ksdist}

die() { echo "$prog: $*" >&2; exit 1; }
usage() {
  sed -n '/^#   cluster.sh/s/^#   //p' "$0" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case $1 in
  --name) [ $# -ge 2 ] || usage; name=$2; shift 2 ;;
  --name=*) name=${1#--name=}; shift ;;
  -h|--help) usage ;;
  *) break ;;
  esac
done
[ $# -ge 1 ] || usage
cmd=$1
shift

check_name() {
  case $name in
  ''|*[!A-Za-z0-9_-]*) die "cluster name '$name' must be letters, digits, - and _ (--name or KS_CLUSTER)" ;;
  esac
  [ ${#name} -le 32 ] || die "cluster name '$name' is longer than 32 characters"
}
check_name
state=$root/$name

need_root() {
  [ "$(id -u)" = 0 ] \
    || die "needs root to make network namespaces, links and host names: run it with sudo"
  for tool in ip unshare nsenter flock; do
    command -v $tool >/dev/null 2>&1 \
      || die "no '$tool' command: install iproute2 (ip, tc) and util-linux (unshare, nsenter, flock)"
  done
}

# What `up` recorded: hosts (the count), index (the cluster's bridge ksbrI and 10.213.I.0/24)
load() {
  [ -f "$state/hosts" ] && [ -f "$state/index" ] \
    || die "cluster '$name' is not up (no $state): run '$prog --name $name up N' first"
  hosts=$(cat "$state/hosts") index=$(cat "$state/index")
}
host_arg() {
  case ${1:-} in
  ''|*[!0-9]*) die "'${1:-}' is not a host number: give K in 0..$((hosts - 1)) (cluster '$name')" ;;
  esac
  [ "$1" -lt "$hosts" ] || die "cluster '$name' has no host $1: its hosts are 0..$((hosts - 1))"
}
ns() { echo "$name-host$1"; }
addr() { echo "10.213.$index.$(($1 + 1))"; }
veth() { echo "ks$index-$1"; }   # the machine's end of host K's link

cmd_up() {
  [ $# -ge 1 ] || usage
  n=$1
  shift
  rate=
  while [ $# -gt 0 ]; do
    case $1 in
    --rate) [ $# -ge 2 ] || usage; rate=$2; shift 2 ;;
    --rate=*) rate=${1#--rate=}; shift ;;
    *) die "up: unknown argument '$1' (up N [--rate RATE])" ;;
    esac
  done
  case $n in
  ''|*[!0-9]*) die "up: '$n' is not a number of hosts (1 to 250)" ;;
  esac
  [ "$n" -ge 1 ] && [ "$n" -le 250 ] || die "up: $n hosts: give 1 to 250"
  [ -z "$rate" ] || command -v tc >/dev/null 2>&1 || die "up: --rate needs tc: install iproute2"
  mkdir -p "$root" || die "cannot make $root"
  # One `up` at a time picks a free index, so two clusters never share a bridge or subnet.
  exec 9>"$root/.lock"
  flock 9
  [ ! -e "$state" ] || die "cluster '$name' is already up ($state): '$prog --name $name down' first, or choose another --name"
  index=0
  while [ $index -lt 256 ]; do
    taken=
    for f in "$root"/*/index; do
      [ -f "$f" ] && [ "$(cat "$f")" = $index ] && taken=1
    done
    if [ -z "$taken" ] && ! ip link show "ksbr$index" >/dev/null 2>&1 \
        && ! ip -4 addr show | grep -q "inet 10\.213\.$index\."; then
      break
    fi
    index=$((index + 1))
  done
  [ $index -lt 256 ] || die "up: no free subnet left in 10.213.0.0/16"
  # Recorded before anything is made, so `down` removes a half-made cluster too.
  mkdir -p "$state" && echo "$n" >"$state/hosts" && echo $index >"$state/index" \
    && echo "${rate:-none}" >"$state/rate" || die "cannot write $state"
  flock -u 9
  hosts=$n
  if ! make_hosts; then
    cmd_down >/dev/null 2>&1
    die "up: could not make cluster '$name': $(head -n 1 "$root/.up-$name.err" 2>/dev/null)"
  fi
  rm -f "$root/.up-$name.err"
  echo "cluster '$name': $n hosts $(ns 0)..$((n - 1)) at $(addr 0) to $(addr $((n - 1))) on bridge ksbr$index (10.213.$index.254/24), links ${rate:-not shaped}"
}

make_hosts() {
  exec 8>"$root/.up-$name.err"
  ip link add "ksbr$index" type bridge 2>&8 \
    && ip addr add "10.213.$index.254/24" dev "ksbr$index" 2>&8 \
    && ip link set "ksbr$index" up 2>&8 || return 1
  k=0
  while [ $k -lt "$hosts" ]; do
    ip netns add "$(ns $k)" 2>&8 \
      && ip link add "$(veth $k)" type veth peer name eth0 netns "$(ns $k)" 2>&8 \
      && ip link set "$(veth $k)" master "ksbr$index" up 2>&8 \
      && ip -n "$(ns $k)" addr add "$(addr $k)/24" dev eth0 2>&8 \
      && ip -n "$(ns $k)" link set lo up 2>&8 \
      && ip -n "$(ns $k)" link set eth0 up 2>&8 \
      && touch "$state/uts$k" \
      && unshare --uts="$state/uts$k" hostname "$(ns $k)" 2>&8 || return 1
    if [ -n "$rate" ]; then
      # both directions: the machine's end shapes what host K receives, eth0 what it sends
      tc qdisc add dev "$(veth $k)" root tbf rate "$rate" burst 128kb latency 5ms 2>&8 \
        && ip netns exec "$(ns $k)" tc qdisc add dev eth0 root tbf rate "$rate" burst 128kb latency 5ms 2>&8 \
        || return 1
    fi
    k=$((k + 1))
  done
}

cmd_run() {
  [ $# -ge 2 ] || usage
  load
  host_arg "$1"
  k=$1
  shift
  exec nsenter --net="/run/netns/$(ns $k)" --uts="$state/uts$k" -- "$@"
}

cmd_link() {
  [ $# -eq 2 ] || usage
  load
  host_arg "$1"
  case $2 in
  down|up) ip link set "$(veth $1)" "$2" || die "link: could not set $(veth $1) $2" ;;
  *) die "link: '$2' is neither down nor up" ;;
  esac
}

cmd_down() {
  load
  k=0
  while [ $k -lt "$hosts" ]; do
    # what `run` started there and still runs would keep the namespace alive
    pids=$(ip netns pids "$(ns $k)" 2>/dev/null)
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
    ip netns del "$(ns $k)" 2>/dev/null   # takes host K's veth pair with it
    ip link del "$(veth $k)" 2>/dev/null
    umount "$state/uts$k" 2>/dev/null
    rm -f "$state/uts$k"
    k=$((k + 1))
  done
  ip link del "ksbr$index" 2>/dev/null
  rm -f "$state/hosts" "$state/index" "$state/rate"
  rmdir "$state" || die "down: $state still holds files of someone else's; left there"
  echo "cluster '$name' is down"
}

need_root
case $cmd in
up) cmd_up "$@" ;;
run) cmd_run "$@" ;;
link) cmd_link "$@" ;;
addr)
  [ $# -eq 1 ] || usage
  load
  if [ "$1" = bridge ]; then echo "10.213.$index.254"; else host_arg "$1"; addr "$1"; fi ;;
hosts)
  load
  k=0
  while [ $k -lt "$hosts" ]; do echo "$k $(ns $k) $(addr $k)"; k=$((k + 1)); done ;;
down) cmd_down ;;
*) echo "$prog: unknown command '$cmd'" >&2; usage ;;
esac
