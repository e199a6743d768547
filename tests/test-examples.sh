#!/bin/sh
# Every example runs: each examples/*.ini names its commands in its header ("#   ksdist
# ..."), and they run here in that order, shortened (20 steps, a small data set), from an
# empty directory; a training command must end with its held-out result. The ksdist of
# this build finds its own plugins. TAP output. Needs KSDIST, KS_SRCDIR and
# KS_BUILD_PLUGINS (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
examples=$(ls "$KS_SRCDIR"/examples/*.ini)
echo "1..$(echo "$examples" | wc -l)"
n=0
for ini in $examples; do
  n=$((n + 1))
  name=$(basename "$ini")
  dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-example-XXXXXX")
  if [ "$name" = own-model.ini ]; then
    echo "ok $n - $name # SKIP the config of examples/own-model.c: tests/test-own-model.sh runs it"
    rm -rf "$dir"
    continue
  fi
  commands=$(sed -n '/^\[/q; s/^#   ksdist /ksdist /p' "$ini")
  if [ -z "$commands" ]; then
    echo "not ok $n - $name names no command in its header (#   ksdist ...)"
    rm -rf "$dir"
    continue
  fi
  result="ok $n - $name:"
  # launch needs Gloo; parameter servers need ZeroMQ's transpiler plugin
  case $commands in *"--servers"*) need=transpiler ;; *" launch "*) need=gloo ;; *) need= ;; esac
  if [ -n "$need" ] && [ ! -e "$KS_BUILD_PLUGINS/$need/.libs/$need.so" ]; then
    echo "ok $n - $name # SKIP the $need plugin was not built"
    rm -rf "$dir"
    continue
  fi
  log="$dir/log"
  # the data files examples name by their relative path, examples/data/...
  mkdir -p "$dir/examples" && cp -r "$KS_SRCDIR/examples/data" "$dir/examples/"
  while IFS= read -r command; do
    args=${command#ksdist }
    args=$(printf '%s' "$args" | sed "s|examples/|$KS_SRCDIR/examples/|g")
    case $args in
      train*|launch*) args="$args --set train.steps=20 --set train.log_every=10 --set optim.warmup=0"
        # few-shot: a few evaluation tasks
        if grep -q '^\[meta\]' "$ini"; then
          args="$args --set meta.eval_tasks=10 --set meta.eval_inner_iters=5"
        fi ;;
      datagen\ glyphs*) args="$args --alphabets 6 --characters 8 --per-class 12" ;;
      datagen\ images*) args="$args --classes 10 --per-class 8" ;;
      datagen\ tokens*) ;;
      datagen*) args="$args --train 4000 --test 1000" ;;
    esac
    if ! (cd "$dir" && eval "\"$KSDIST\" $args") >"$log" 2>&1; then
      result="not ok $n - $name: \`ksdist $args\` failed"
      break
    fi
    case $args in
      train*|launch*)
        if ! grep -q "eval [a-z_]* [0-9.]* (" "$log"; then
          result="not ok $n - $name: \`ksdist $args\` printed no held-out result"
          break
        fi ;;
    esac
    result="$result ksdist ${args%% *};"
  done <<EOF_COMMANDS
$commands
EOF_COMMANDS
  echo "$result"
  case $result in not*) sed 's/^/# /' "$log" | tail -n 30 ;; esac
  rm -rf "$dir"
done
