#!/bin/sh
# A long phase shows its progress on a terminal (a pseudo-terminal made by script(1)):
# Reptile's evaluation over many tasks counts them with the time left, once it has run
# [log] progress_after seconds; written to a pipe, the output holds no such line. TAP
# output. Needs KSDIST (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-progress-XXXXXX")
trap 'rm -rf "$dir"' EXIT
echo "1..2"
if ! command -v script >/dev/null 2>&1; then
  echo "ok 1 # SKIP script(1) is not installed (bsdutils)"; echo "ok 2 # SKIP"; exit 0
fi
if ! "$KSDIST" datagen glyphs "$dir/set" --per-class 6 --alphabets 3 --characters 6 >"$dir/datagen.log" 2>&1; then
  if grep -q "built without" "$dir/datagen.log"; then
    echo "ok 1 # SKIP no glyphs in this build (FreeType, fontconfig)"; echo "ok 2 # SKIP"; exit 0
  fi
  echo "not ok 1 - ksdist datagen glyphs failed"; sed 's/^/# /' "$dir/datagen.log"; echo "not ok 2"
  exit 0
fi
train="$KSDIST train --set data.path=$dir/set --set meta.algorithm=reptile --set meta.ways=3"
train="$train --set meta.shots=2 --set meta.filters=8 --set meta.inner_iters=2"
train="$train --set meta.eval_inner_iters=4 --set meta.eval_tasks=40 --set train.steps=2"
train="$train --set openblas.threads=1 --set log.progress_after=0"
# shellcheck disable=SC2086
script -qec "$train" /dev/null >"$dir/tty.log" 2>&1 </dev/null
if tr '\r' '\n' <"$dir/tty.log" | grep -Eq '^evaluation tasks: 40/40  [0-9]+s, ETA 0s'; then
  echo "ok 1 - on a terminal the final evaluation counts its 40 tasks"
else
  echo "not ok 1 - no progress line 'evaluation tasks: 40/40' on a terminal"
  tr '\r' '\n' <"$dir/tty.log" | sed 's/^/# /' | tail -20
fi
# shellcheck disable=SC2086
$train >"$dir/pipe.log" 2>&1
if grep -q '^eval accuracy' "$dir/pipe.log" && ! grep -q 'evaluation tasks' "$dir/pipe.log"; then
  echo "ok 2 - written to a file, no progress line"
else
  echo "not ok 2 - the piped run's output:"; sed 's/^/# /' "$dir/pipe.log" | tail -20
fi
