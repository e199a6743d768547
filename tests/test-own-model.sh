#!/bin/sh
# examples/own-model.c, a program of a user's own on the public headers, trains in every
# mode: data parallel (2 workers), parameter servers (2 servers, 2 workers, sync) and
# pipelined (2 stages), each ending where the program alone ends with the same global
# batch of 128 rows (the pipeline bitwise, the others within float rounding of a sum in
# another order). Bad settings are refused as `ksdist train` refuses them. TAP output.
# Needs KSDIST, KS_SRCDIR and KS_BUILD_PLUGINS (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
prog=$(pwd)/examples/own-model
ini=$KS_SRCDIR/examples/own-model.ini
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-own-XXXXXX")
trap 'rm -rf "$dir"' EXIT
echo "1..6"
common="--set openblas.threads=1 --set comm.timeout=30"

# The last "step N/N loss X" and "eval accuracy Y" of a log (worker 0's under launch).
result () {
  sed -n 's/^\(\[rank 0\] \)\{0,1\}step \([0-9]*\)\/\2 loss \([0-9.]*\).*/\3/p' "$1" | tail -n 1
  sed -n 's/^\(\[rank 0\] \)\{0,1\}eval accuracy \([0-9.]*\) .*/\2/p' "$1" | tail -n 1
}

# Whether two results agree within tol (absolute, on the loss and the accuracy).
agree () {
  printf '%s\n%s\n' "$1" "$2" | awk -v tol="$3" 'NR <= 2 { a[NR] = $0 } NR > 2 { b[NR - 2] = $0 }
    END { if (a[1] == "" || a[2] == "") exit 1;
          for (i = 1; i <= 2; i++) { d = a[i] - b[i]; if (d < 0) d = -d; if (d > tol) exit 1 } }'
}

run () { # name, log, command...
  name=$1 log=$2
  shift 2
  if ! (cd "$dir" && "$@") >"$log" 2>&1; then
    n=$((n + 1))
    echo "not ok $n - $name: $* failed"
    sed 's/^/# /' "$log" | tail -n 20
    return 1
  fi
}

n=0
run alone "$dir/alone" "$prog" "$ini" $common --set train.batch=128 || exit 1
alone=$(result "$dir/alone")
n=$((n + 1))
case $(echo "$alone" | tail -n 1) in
  0.9*|1*) echo "ok $n - alone: loss and accuracy $(echo $alone)" ;;
  *) echo "not ok $n - alone: accuracy $(echo $alone) is not above 0.9"; sed 's/^/# /' "$dir/alone" | tail ;;
esac

check () { # name, tolerance, log
  n=$((n + 1))
  got=$(result "$3")
  if agree "$alone" "$got" "$2"; then
    echo "ok $n - $1 ends where one process does: $(echo $got) against $(echo $alone)"
  else
    echo "not ok $n - $1: $(echo $got), one process $(echo $alone) (tolerance $2)"
    sed 's/^/# /' "$3" | tail -n 20
  fi
}

if [ ! -e "$KS_BUILD_PLUGINS/gloo/.libs/gloo.so" ]; then
  for i in 2 3 4; do echo "ok $i # SKIP the gloo plugin was not built"; done
  n=4
else
  run "data parallel" "$dir/dp" "$KSDIST" launch -n 2 -- "$prog" "$ini" $common \
    && check "data parallel (2 workers of 64 rows)" 0.002 "$dir/dp"
  run "pipeline" "$dir/pp" "$KSDIST" launch -n 2 -- "$prog" "$ini" $common \
      --set train.batch=128 --set pipeline.stages=2 \
    && check "pipelined (2 stages, 128 rows)" 0 "$dir/pp"
  if [ -e "$KS_BUILD_PLUGINS/transpiler/.libs/transpiler.so" ]; then
    run "servers" "$dir/ps" "$KSDIST" launch --servers 2 --workers 2 -- "$prog" "$ini" \
        $common --set job.mode=transpiler \
      && check "parameter servers (sync, 2 servers, 2 workers of 64 rows)" 0.002 "$dir/ps"
  else
    n=$((n + 1)); echo "ok $n # SKIP the transpiler plugin was not built"
  fi
fi

# a setting the program does not know (the built-in tasks' [data] is the tasks library's,
# which a program on the core alone does not link), and a mode one process cannot run,
# are refused
n=$((n + 1))
(cd "$dir" && "$prog" "$ini" --set data.path=/tmp) >"$dir/bad1" 2>&1; s1=$?
(cd "$dir" && "$prog" "$ini" --set job.mode=transpiler) >"$dir/bad2" 2>&1; s2=$?
if [ $s1 = 2 ] && grep -q -- '--set data.path: unknown group \[data\]' "$dir/bad1" \
   && [ $s2 = 2 ] && grep -q 'trains with parameter servers, but the job has none' "$dir/bad2"; then
  echo "ok $n - refusals: [data] path unknown, transpiler alone"
else
  echo "not ok $n - refusals: exit $s1 and $s2"
  sed 's/^/# /' "$dir/bad1" "$dir/bad2"
fi

# [model] units, a key the program declares itself (KsTrainTask.schema): read (another
# width trains to another loss), range-checked, and a misspelt key refused as ksdist's own
n=$((n + 1))
short="$common --set train.steps=20 --set train.log_every=20"
(cd "$dir" && "$prog" "$ini" $short) >"$dir/u32" 2>&1; s0=$?
(cd "$dir" && "$prog" "$ini" $short --set model.units=8) >"$dir/u8" 2>&1; s1=$?
(cd "$dir" && "$prog" "$ini" --set model.units=0) >"$dir/u0" 2>&1; s2=$?
(cd "$dir" && "$prog" "$ini" --set model.unit=8) >"$dir/ux" 2>&1; s3=$?
l32=$(result "$dir/u32" | head -n 1) l8=$(result "$dir/u8" | head -n 1)
if [ $s0 = 0 ] && [ $s1 = 0 ] && [ -n "$l8" ] && [ -n "$l32" ] && [ "$l8" != "$l32" ] \
   && [ $s2 = 2 ] && grep -q "\[model\] units = '0': expected an integer in \[1, 4096\]" "$dir/u0" \
   && [ $s3 = 2 ] && grep -q "unknown key 'unit' in \[model\]; did you mean 'units'?" "$dir/ux"; then
  echo "ok $n - the program's own [model] units: loss $l8 at 8 against $l32 at 32, 0 and 'unit' refused"
else
  echo "not ok $n - the program's own [model] units: exits $s0 $s1 $s2 $s3, losses '$l8' '$l32'"
  sed 's/^/# /' "$dir/u8" "$dir/u0" "$dir/ux" | tail -n 20
fi
