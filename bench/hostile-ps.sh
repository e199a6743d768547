#!/bin/sh
# The hostile-client tests with their counts raised: tests/test-ps-hostile's attacks N
# times (a client without CURVE, another job's token, the servers' key with a keypair
# of its own), N connections announcing 600 MiB frames, 300 N idle connections (the
# server's RLIMIT_NOFILE is 256), a token holder's GEO delta of 1e3 per float (refused)
# and of 1e30 with no bound (applied: what the workers then say), a second peer's stop
# and push in a worker's name; and tests/test-pslib-trust's flood of new sparse rows
# against [table.emb] max_rows.
# Prints the attacks tried and refused, the server's memory, and whether the job ended
# as an unattacked one. From the build tree:
#   bench/hostile-ps.sh [N]        (N = 5)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
for t in test-ps-hostile test-pslib-trust; do
  [ -x "$top/tests/$t" ] || make -C "$top" "tests/$t" >/dev/null
done
unset KS_PLUGIN_PATH KS_PLUGINS
export KS_PLUGIN_SYSTEM_PATH= KS_TEST_PLUGINS=$top/tests/plugins/.libs \
  KS_BUILD_PLUGINS=$top/plugins KSDIST=$top/tools/ksdist KS_SRCDIR=$top \
  KS_HOSTILE_SCALE=${1:-5}
"$top/tests/test-ps-hostile" | grep -E '^(# (hostile|huge|[0-9]+ idle|geo delta|second peer)|ok|not ok)'
"$top/tests/test-pslib-trust" -p /pslib/row-flood | grep -E '^(# row flood|ok|not ok)'
