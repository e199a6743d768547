#!/bin/sh
# Traits, not names: copies of the openblas backend, the collective mode and the
# transpiler mode built from their sources under other names (tests/plugins: tblas,
# tcoll, tps) are judged by the plan exactly as the originals (`ksdist config`'s status
# and message, the names swapped back), and train to the same losses under ksdist launch;
# a copy of shm (tshm) is what [comm] backend = auto takes on one host, as shm is; a copy
# of openblas declaring device memory (tdev) is judged as the plan judges cuda. The
# core once took every mode not named "collective" for one with servers (tcoll was
# refused a job without servers) and auto for shm by its name (tshm lost to gloo).
# TAP output. Needs KSDIST, KS_SRCDIR, KS_BUILD_PLUGINS, KS_TEST_PLUGINS.
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGINS
ex=$KS_SRCDIR/examples
for p in "$KS_BUILD_PLUGINS"/openblas/.libs/openblas.so "$KS_BUILD_PLUGINS"/transpiler/.libs/transpiler.so \
  "$KS_TEST_PLUGINS"/tblas.so "$KS_TEST_PLUGINS"/tps.so "$KS_TEST_PLUGINS"/tcoll.so \
  "$KS_BUILD_PLUGINS"/shm/.libs/shm.so "$KS_TEST_PLUGINS"/tshm.so "$KS_TEST_PLUGINS"/tdev.so; do
  [ -e "$p" ] || { echo "1..0 # SKIP $p was not built (OpenBLAS or ZeroMQ missing)"; exit 0; }
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-traits-XXXXXX")
trap 'rm -rf "$dir"' EXIT
# the build's plugins and the three copies, none of the other test plugins
mkdir "$dir/plugins"
for p in "$KS_BUILD_PLUGINS"/*/.libs/*.so "$KS_TEST_PLUGINS"/tblas.so "$KS_TEST_PLUGINS"/tps.so \
  "$KS_TEST_PLUGINS"/tcoll.so "$KS_TEST_PLUGINS"/tshm.so "$KS_TEST_PLUGINS"/tdev.so; do
  ln -s "$p" "$dir/plugins/"
done
export KS_PLUGIN_PATH="$dir/plugins"
cd "$dir" || exit 1
. "$KS_SRCDIR/tests/tap.sh"

# Each original's and its copy's name as one word, blanks squeezed (columns align to the
# longest name), so that two runs' words can be compared.
unnamed () {
  sed -e 's/openblas\|tblas/BLAS/g' -e 's/collective\|tcoll/MODE/g' -e 's/transpiler\|tps/PS/g' \
    -e 's/  */ /g' "$1" >"$1.u"
}

# same NAME STATUS ARGS...: `ksdist config ARGS` exits STATUS with the originals and with
# the copies (ARGS written with @BLAS@ and @MODE@, or @PS@ for a mode with servers), and
# says the same, names swapped back.
same () {
  what=$1 want=$2
  shift 2
  # shellcheck disable=SC2046
  "$KSDIST" config $(echo "$@" | sed -e 's/@BLAS@/openblas/g' -e 's/@MODE@/collective/g' \
    -e 's/@PS@/transpiler/g') >a.out 2>a.err
  a=$?
  # shellcheck disable=SC2046
  "$KSDIST" config $(echo "$@" | sed -e 's/@BLAS@/tblas/g' -e 's/@MODE@/tcoll/g' \
    -e 's/@PS@/tps/g') >b.out 2>b.err
  b=$?
  unnamed a.err; unnamed b.err; unnamed a.out; unnamed b.out
  if [ $a -ne "$want" ] || [ $b -ne "$want" ]; then
    not_ok "$what: exit $a with the originals, $b with the copies, wanted $want" a.err b.err
  elif ! cmp -s a.err.u b.err.u || ! cmp -s a.out.u b.out.u; then
    not_ok "$what: the copies are judged otherwise" /dev/null; diff a.err b.err | sed 's/^/# /'
    diff a.out.u b.out.u | head -20 | sed 's/^/# /'
  else
    ok "$what: exit $want with both$(tail -n 1 a.err | sed 's/^ksdist: /: /' | cut -c1-140)"
  fi
}

ps="$ex/ps-mlp.ini --set job.mode=@PS@ --set compute.backend=@BLAS@"
dp="$ex/default.ini --set job.mode=@MODE@ --set compute.backend=@BLAS@"
same "data parallel, 2 workers" 0 --workers 2 $dp
same "data parallel with a server" 2 --workers 2 --servers 1 $dp
same "data parallel, a pipeline of 2 stages" 0 --workers 2 --set pipeline.stages=2 $dp
same "data parallel, bf16" 0 --workers 2 --set amp.dtype=bf16 $dp
same "parameter servers, 1 server 2 workers" 0 --workers 2 --servers 1 $ps
same "parameter servers without a server" 2 --workers 2 $ps
same "parameter servers and a pipeline" 2 --workers 2 --servers 1 --set pipeline.stages=2 $ps
same "parameter servers and bf16" 2 --workers 2 --servers 1 --set amp.dtype=bf16 $ps

# train NAME LAUNCH-OPTIONS -- ARGS: the same losses and evaluation, step by step, with
# the originals and with the copies
train () {
  what=$1 world=$2
  shift 2
  common="--set train.steps=20 --set train.log_every=5 --set train.batch=32 --set data.samples=256 --set optim.warmup=0"
  # shellcheck disable=SC2086,SC2046
  "$KSDIST" launch $world $(echo "$@" --set @BLAS@.threads=1 | sed -e 's/@BLAS@/openblas/g' -e 's/@MODE@/collective/g' \
    -e 's/@PS@/transpiler/g') $common >a.out 2>&1
  a=$?
  # shellcheck disable=SC2086,SC2046
  "$KSDIST" launch $world $(echo "$@" --set @BLAS@.threads=1 | sed -e 's/@BLAS@/tblas/g' -e 's/@MODE@/tcoll/g' \
    -e 's/@PS@/tps/g') $common >b.out 2>&1
  b=$?
  grep -o 'step [0-9/]* loss [0-9.]*\|eval [a-z]* [0-9.]*' a.out | sort >a.losses
  grep -o 'step [0-9/]* loss [0-9.]*\|eval [a-z]* [0-9.]*' b.out | sort >b.losses
  if [ $a -ne 0 ] || [ $b -ne 0 ] || [ "$(grep -c loss a.losses)" -ne 4 ]; then
    not_ok "$what: exit $a with the originals, $b with the copies" a.out b.out
  elif ! cmp -s a.losses b.losses; then
    not_ok "$what: the copies train otherwise" /dev/null; diff a.losses b.losses | sed 's/^/# /'
  elif ! grep -q "(tcoll mode\|(tps mode\|training .* on OpenBLAS" b.out; then
    not_ok "$what: the copies' run does not say it ran them" b.out
  else
    ok "$what: the same $(wc -l <a.losses) losses and evaluations ($(grep 'step 20/20' a.losses))"
  fi
}
train "data parallel on the copied backend and mode" "-n 2" $dp
train "parameter servers on the copied backend and mode" "--servers 1 --workers 2" $ps

# a backend of device memory (tdev: openblas that says so; cuda, without a GPU): data
# parallel needs a communicator that reads it, a pipeline stages through host memory
dev="--workers 2 $ex/default.ini --set compute.backend=tdev --set tdev.threads=1"
# shellcheck disable=SC2086
refused "a backend of device memory with gloo" \
  "cannot average gradients in the device memory of \[compute\] backend = tdev (it reads host memory only); .*\[compute\] backend = openblas or tblas" \
  $dev --set comm.backend=gloo
if "$KSDIST" plugins | grep -q "comm nccl: available"; then
  # shellcheck disable=SC2086
  "$KSDIST" config $dev >err 2>&1; status=$?
  check "a backend of device memory with auto and nccl available" 0 ""
else
  # shellcheck disable=SC2086
  refused "a backend of device memory with auto and no nccl" \
    "no loaded communicator reads device memory); load a communicator that reads device memory" $dev
fi
# shellcheck disable=SC2086
"$KSDIST" config $dev --set comm.backend=gloo --set pipeline.stages=2 >err 2>&1; status=$?
check "a pipeline on a backend of device memory with gloo (staged through host memory)" 0 ""

# what each declares, as `ksdist plugins -v` says
"$KSDIST" plugins -v >plugins.out 2>&1
for pair in "tshm:host memory, ranks on one host" "tblas:host memory" "tdev:device memory" \
  "tps:parameter servers, the servers write checkpoints in shards" \
  "tcoll:no servers, worker 0 writes checkpoints whole"; do
  name=${pair%%:*} traits=${pair#*:}
  if grep -A1 "^  [a-z]* $name: available" plugins.out | grep -q "^    traits: $traits\$"; then
    ok "ksdist plugins -v: $name declares $traits"
  else
    not_ok "ksdist plugins -v does not say $name declares $traits" plugins.out
  fi
done

# auto on one host: shm, or its copy where shm is left out; the same losses
common="--set train.steps=20 --set train.log_every=5 --set train.batch=32 --set data.samples=256 --set optim.warmup=0 --set openblas.threads=1"
KS_PLUGINS=^tshm "$KSDIST" launch -n 2 "$ex/default.ini" $common >a.out 2>&1; a=$?
KS_PLUGINS=^shm "$KSDIST" launch -n 2 "$ex/default.ini" $common >b.out 2>&1; b=$?
grep -o 'step [0-9/]* loss [0-9.]*\|eval [a-z]* [0-9.]*' a.out | sort >a.losses
grep -o 'step [0-9/]* loss [0-9.]*\|eval [a-z]* [0-9.]*' b.out | sort >b.losses
if [ $a -ne 0 ] || [ $b -ne 0 ]; then
  not_ok "auto on one host: exit $a with shm, $b with its copy" a.out b.out
elif ! grep -q "shm by auto: every rank on this host" a.out \
  || ! grep -q "tshm by auto: every rank on this host" b.out; then
  not_ok "auto on one host did not take shm, then its copy" a.out b.out
elif ! cmp -s a.losses b.losses || [ "$(grep -c loss a.losses)" -ne 4 ]; then
  not_ok "auto on one host: the copy of shm trains otherwise" /dev/null
  diff a.losses b.losses | sed 's/^/# /'
else
  ok "auto on one host takes shm, or its copy tshm, and both give the same $(wc -l <a.losses) losses and evaluations"
fi
tap_done
