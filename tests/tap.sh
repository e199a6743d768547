# TAP helpers for the shell tests, sourced after `cd` into the test's directory.
# ok NAME / not_ok NAME [FILE...]: one result (not_ok shows each FILE, by default the end
# of ./err); skip REASON: a result skipped;
# check NAME STATUS PATTERN: $status is STATUS and a line of ./err matches PATTERN;
# refused NAME PATTERN ARGS...: `$KSDIST config ARGS` exits 2 (a configuration error) with
# a line matching PATTERN;
# tap_done: the plan, and the exit status.
n=0
failed=0
ok () { n=$((n + 1)); echo "ok $n - $1"; }
not_ok () {
  n=$((n + 1)); failed=1; echo "not ok $n - $1"; shift
  if [ $# -eq 0 ]; then sed 's/^/# /' err | tail -n 15 | cut -c1-400; return; fi
  for f in "$@"; do sed 's/^/# /' "$f"; done
}
skip () { n=$((n + 1)); echo "ok $n # SKIP $1"; }
check () {
  if [ "$status" -eq "$2" ] && grep -q -- "$3" err; then ok "$1"; else
    echo "# status $status, expected $2; err lacks: $3"; not_ok "$1"; fi
}
refused () {
  what=$1 want=$2
  shift 2
  "$KSDIST" config "$@" > err 2>&1
  status=$?
  if [ $status -eq 2 ] && grep -q -- "$want" err; then
    ok "$what is refused: $(grep -- "$want" err | head -1 | cut -c1-160)"
  else
    not_ok "$what: exit $status, wanted 2 and '$want'" err
  fi
}
tap_done () { echo "1..$n"; exit $failed; }
