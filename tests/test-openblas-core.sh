#!/bin/sh
# OpenBLAS's kernels. Debian 12's OpenBLAS (0.3.21) takes an AMD CPU with AVX-512 (Zen 4)
# for a Zen and runs Haswell's AVX2 kernels on it, at half the sgemm speed of its AVX-512
# kernels there: on such a CPU (read from /proc/cpuinfo here, not as ksdist reads it)
# ksdist names the AVX-512 kernels (OPENBLAS_CORETYPE: Cooperlake where the CPU has
# AVX-512 BF16, else SkylakeX) before the openblas plugin loads; a user's
# OPENBLAS_CORETYPE is kept. The kernels are read from the start line of `ksdist train`,
# which gives OpenBLAS's configuration, its core's name among it.
# TAP output. Needs KSDIST, KS_SRCDIR, KS_BUILD_PLUGINS.
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGINS OPENBLAS_CORETYPE
blas=$KS_BUILD_PLUGINS/openblas/.libs/openblas.so
[ -e "$blas" ] || { echo "1..0 # SKIP the openblas plugin was not built"; exit 0; }
export KS_PLUGIN_PATH=$KS_BUILD_PLUGINS/openblas/.libs:$KS_BUILD_PLUGINS/optim/.libs
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-openblas-core-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
. "$KS_SRCDIR/tests/tap.sh"

# start_line: train a few steps of the default job, keep the line naming OpenBLAS in ./line
start_line () {
  "$KSDIST" train "$KS_SRCDIR/examples/default.ini" --set train.steps=30 \
    --set train.log_every=30 >err 2>&1
  status=$?
  grep -o "OpenBLAS ([^)]*)" err >line
}

start_line
if [ $status -ne 0 ] || ! grep -q "DYNAMIC_ARCH" line; then
  skip "OpenBLAS is not a build for many CPUs (DYNAMIC_ARCH) or did not start: $(cat line)"
  tap_done
  exit
fi

flags=$(grep -m1 "^flags" /proc/cpuinfo 2>/dev/null)
has () { case " $flags " in *" $1 "*) return 0 ;; esac; return 1; }
if grep -q -m1 "^vendor_id.*AuthenticAMD" /proc/cpuinfo 2>/dev/null &&
  has avx512f && has avx512bw && has avx512dq && has avx512vl; then
  want=SkylakeX
  has avx512_bf16 && want=Cooperlake
  if grep -q " $want " line; then ok "an AMD CPU with AVX-512 gets $want's kernels: $(cat line)"
  else not_ok "an AMD CPU with AVX-512 should get $want's kernels" line; fi
else
  skip "not an AMD CPU with AVX-512: OpenBLAS chooses ($(cat line))"
fi

# Prescott's kernels (SSE3) run on every x86-64 CPU
OPENBLAS_CORETYPE=Prescott start_line
if [ $status -eq 0 ] && grep -q " Prescott " line; then ok "a user's OPENBLAS_CORETYPE is kept"
else not_ok "OPENBLAS_CORETYPE=Prescott should be kept (exit $status)" line err; fi
tap_done
