# TAP helpers for the shell tests, sourced after `cd` into the test's directory.
# ok NAME / not_ok NAME: one result (not_ok shows the end of ./err);
# check NAME STATUS PATTERN: $status is STATUS and a line of ./err matches PATTERN;
# tap_done: the plan, and the exit status.
n=0
failed=0
ok () { n=$((n + 1)); echo "ok $n - $1"; }
not_ok () { n=$((n + 1)); failed=1; echo "not ok $n - $1"; sed 's/^/# /' err | tail -n 15 | cut -c1-400; }
check () {
  if [ "$status" -eq "$2" ] && grep -q -- "$3" err; then ok "$1"; else
    echo "# status $status, expected $2; err lacks: $3"; not_ok "$1"; fi
}
tap_done () { echo "1..$n"; exit $failed; }
