#!/bin/sh
# The hostile-client test (tests/test-ps-hostile) with its counts raised: every attack
# N times (a client without CURVE, another job's token, the servers' key with a keypair
# of its own), N connections announcing 600 MiB frames, 300 N idle connections (the
# server's RLIMIT_NOFILE is 256).
# Prints the attacks tried and refused, the server's memory, and whether the job ended
# as an unattacked one. From the build tree:
#   bench/hostile-ps.sh [N]        (N = 5)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$top/tests/test-ps-hostile" ] || make -C "$top" tests/test-ps-hostile >/dev/null
unset KS_PLUGIN_PATH KS_PLUGINS
export KS_PLUGIN_SYSTEM_PATH= KS_TEST_PLUGINS=$top/tests/plugins/.libs \
  KS_BUILD_PLUGINS=$top/plugins KSDIST=$top/tools/ksdist KS_SRCDIR=$top \
  KS_HOSTILE_SCALE=${1:-5}
"$top/tests/test-ps-hostile" | grep -E '^(# (hostile|huge|[0-9]+ idle)|ok|not ok)'
