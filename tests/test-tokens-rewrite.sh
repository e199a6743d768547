#!/bin/sh
# A token file rewritten while a job trains on it (issue 49, item 8c): token files are
# memory-mapped, so a rewrite in place shows in the windows read after it; a token past
# the vocabulary the job started with ends the job naming the file, the token and its
# place, and what to do. (Before: `step 76: embedding: ids[0] = 34222 is outside the
# table's 71 rows`, exit 1, no file named.) The training file and the held-out one.
# TAP output. Needs KSDIST and KS_SRCDIR (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH # this build's ksdist finds its own plugins
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-tokrw-XXXXXX")
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
cd "$dir" || exit 1
export OPENBLAS_NUM_THREADS=1
. "$KS_SRCDIR/tests/tap.sh"
"$KSDIST" datagen tokens tok >/dev/null 2>&1 || { not_ok "ksdist datagen tokens tok"; tap_done; }
cp tok/train.bin train.orig && cp tok/val.bin val.orig
# rewrite FILE: every token of FILE made 65535 (far past the 71 of the words' bytes), in place
rewrite () { head -c "$(wc -c <"$1")" /dev/zero | tr '\000' '\377' | dd of="$1" conv=notrunc status=none; }
for which in train val; do
  cp train.orig tok/train.bin && cp val.orig tok/val.bin
  # removed first: a slow start once let the wait below read the last run's evaluation in
  # it, and the file was rewritten before this job opened it (its vocabulary then took
  # the token in, and there was nothing to find)
  rm -f err
  "$KSDIST" train "$KS_SRCDIR/examples/tokens-lm.ini" --set data.path=tok/train.bin \
    --set data.test_path=tok/val.bin --set train.steps=1000000 --set train.log_every=1 \
    --set train.eval_every=2 --set log.level=error >err 2>&1 &
  pid=$!
  # bounds, not timings: under the sanitizers on a loaded 2-core machine a step and an
  # evaluation took tens of seconds (CI once saw one step in 120 s)
  i=0
  while ! grep -qs "^eval loss" err && [ $i -lt 3000 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
  rewrite tok/$which.bin
  i=0
  while kill -0 "$pid" 2>/dev/null && [ $i -lt 3000 ]; do sleep 0.1; i=$((i + 1)); done
  [ $i -lt 3000 ] || { echo "# the run went on 300 s after the rewrite"; kill -9 "$pid"; }
  wait "$pid"
  status=$?
  pid=
  check "tok/$which.bin rewritten during the run ends it naming the file and the token" 1 \
    "^ksdist: step [0-9]*: .*tok/$which.bin: token 65535 at position [0-9]* is outside the vocabulary of [0-9]* it had when the job started: the file was rewritten while this job read it"
done
tap_done
