#!/bin/sh
# An optimizer of a plugin other than optim (tests/plugins/topt) receives [optim] lr and
# its schedule step by step through set_learning_rate (the rates it logs are checked
# against the schedule computed here); the plan (ksdist config) refuses checkpoint_dir
# for an optimizer without a `state` slot, and an [optim] lr for one that cannot take it.
# TAP output. Needs KSDIST and KS_TEST_PLUGINS (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH
export KS_PLUGIN_PATH="$KS_TEST_PLUGINS/topt.so"
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-plugin-optim-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
echo "1..4"

cat > job.ini <<'INI'
[model]
type = mlp
hidden = 8
[compute]
backend = openblas
[train]
optimizer = tp-sgd
steps = 6
batch = 16
log_every = 1
[optim]
lr = 0.2
warmup = 2
schedule = cosine
INI
# warmup to lr over 2 steps, then the cosine to 0 at step 6
want=$(awk 'BEGIN { pi = atan2 (0, -1); for (s = 1; s <= 6; s++) {
  lr = s <= 2 ? 0.2 * s / 2 : 0.2 * 0.5 * (1 + cos (pi * (s - 2) / 4));
  printf "%.4f ", lr } }')
rates () { sed -n 's/.*tp-sgd: step lr \([-0-9.e]*\).*/\1/p' "$1" | awk '{ printf "%.4f ", $1 }'; }

"$KSDIST" train job.ini > run.log 2>&1
got=$(rates run.log)
if [ "$got" = "$want" ]; then
  echo "ok 1 - tp-sgd took [optim] lr, warmup and the cosine step by step ($got)"
else
  echo "not ok 1 - tp-sgd's rates '$got', the schedule's '$want'"; sed 's/^/# /' run.log | tail -15
fi

"$KSDIST" train job.ini --set optim.schedule=constant --set optim.warmup=0 \
  --set optim.lr=0.05 > set.log 2>&1
got=$(rates set.log)
if [ "$got" = "0.0500 0.0500 0.0500 0.0500 0.0500 0.0500 " ]; then
  echo "ok 2 - --set optim.lr and optim.schedule reach tp-sgd"
else
  echo "not ok 2 - with --set: '$got'"; sed 's/^/# /' set.log | tail -10
fi

"$KSDIST" config job.ini --set train.checkpoint_dir=ck > ck.log 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "\[train\] checkpoint_dir = ck, but optimizer tp-sgd (plugin topt) has no \`state\` slot" ck.log && [ ! -e ck ]; then
  echo "ok 3 - ksdist config refuses checkpoint_dir for an optimizer without a state slot"
else
  echo "not ok 3 - checkpoint_dir with tp-sgd: exit $rc"; sed 's/^/# /' ck.log | tail -5
fi

"$KSDIST" config job.ini --set train.optimizer=tp-fixed > fixed.log 2>&1
rc=$?
"$KSDIST" train job.ini --set train.optimizer=tp-fixed --set optim.lr=0.001 \
  --set optim.schedule=constant --set optim.warmup=0 > fixed2.log 2>&1
rc2=$?
if [ $rc -eq 2 ] && grep -q "\[optim\] lr is set, but optimizer tp-fixed (plugin topt) has no set_learning_rate slot" fixed.log \
   && [ $rc2 -eq 2 ]; then
  echo "ok 4 - an [optim] lr for an optimizer without set_learning_rate is refused (config and train)"
else
  echo "not ok 4 - tp-fixed: exit $rc and $rc2"; sed 's/^/# /' fixed.log fixed2.log | tail -8
fi
