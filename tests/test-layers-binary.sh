#!/bin/sh
# Binary classifiers written in the config: [model] loss = logistic (sigmoid and binary
# cross entropy of one logit a row, labels 0 and 1) scored by the held-out AUC, and the
# avg_pool layer. A layer list learns the spirals (two classes) to a stated AUC, alone,
# data parallel, on parameter servers, and on two pipeline stages to the AUC one process reaches (the last
# stage's probabilities of every row sent to all); examples/cnn-binary.ini (two avg
# pools, one padded and overlapping) learns the digits 0 and 1 of ksdist datagen to a
# stated AUC; each mistake (a last layer of two outputs, data of ten classes, a pool's
# padding above half its kernel, a kernel wider than its input) is refused by `ksdist
# config` (exit 2) naming the group or key; the example's export, avg pools included,
# runs in `ksdist infer`, whose --argmax of one logit is 1 where it is above 0. TAP
# output. Needs KSDIST, KS_SRCDIR and KS_BUILD_PLUGINS (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-binary-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
. "$KS_SRCDIR/tests/tap.sh"

cat > spirals.ini <<'INI'
[model]
type = layers
loss = logistic
net = h1, h2, out
[layer.h1]
type = linear
size = 48
activation = tanh
[layer.h2]
type = linear
size = 48
activation = tanh
[layer.out]
type = linear
size = 1
[data]
task = spirals
[train]
steps = 800
batch = 128
[optim]
lr = 0.003
INI
auc () { sed -n 's/.*eval auc \([0-9.]*\) .*/\1/p' "$1" | tail -1; }
good () { [ -n "$1" ] && awk -v a="$1" -v m="$2" 'BEGIN { exit !(a >= m) }'; }
"$KSDIST" train spirals.ini > one.log 2>&1
a=$(auc one.log)
# a model that learned nothing scores 0.5; a wrong-signed gradient, below it
if good "$a" 0.95 && grep -q "(512 held-out samples)" one.log; then
  ok "a layer list with the logistic loss learns the spirals (held-out AUC $a)"
else
  not_ok "logistic loss on the spirals: AUC '$a'" one.log
fi
if [ ! -e "$KS_BUILD_PLUGINS/gloo/.libs/gloo.so" ]; then
  skip "the gloo plugin was not built"
else
  "$KSDIST" launch -n 2 spirals.ini > dp.log 2>&1
  a=$(auc dp.log)
  if good "$a" 0.95 && grep -q "\[rank 1\] eval auc $a " dp.log; then
    ok "two data-parallel workers train it, both ranks scoring the same (held-out AUC $a)"
  else
    not_ok "data parallel: AUC '$a'" dp.log
  fi
fi
if [ ! -e "$KS_BUILD_PLUGINS/transpiler/.libs/transpiler.so" ]; then
  skip "the transpiler plugin was not built"
else
  "$KSDIST" launch --servers 1 --workers 2 spirals.ini --set job.mode=transpiler > ps.log 2>&1
  a=$(auc ps.log)
  if good "$a" 0.95; then
    ok "a server and two workers (transpiler, sync) train it (held-out AUC $a)"
  else
    not_ok "parameter servers: AUC '$a'" ps.log
  fi
fi

# each mistake: `ksdist config` exits 2 with one message naming the place (tap.sh)
refused "the logistic loss after a last layer of two outputs" \
  "loss = logistic takes one logit a row, but the last layer (out) gives \[128, 2\].*\[layer.out\] size" \
  spirals.ini --set layer.out.size=2
refused "the logistic loss on three classes" "loss = logistic takes labels 0 and 1, but rings has 3 classes" \
  spirals.ini --set data.task=rings
if [ ! -e "$KS_BUILD_PLUGINS/gloo/.libs/gloo.so" ]; then
  skip "the gloo plugin was not built"
else
  "$KSDIST" launch -n 2 spirals.ini --set pipeline.stages=2 --set pipeline.micro_batches=2 > pp.log 2>&1
  want=$(grep '^eval' one.log)
  if [ -n "$want" ] && grep -q "\[rank 0\] $want" pp.log && grep -q "\[rank 1\] $want" pp.log; then
    ok "two pipeline stages, 2 micro-batches, score the AUC of one process ($want)"
  else
    not_ok "pipeline: '$(grep eval pp.log | head -1)' against '$want'" pp.log
  fi
fi

if ! "$KSDIST" datagen digits digits01 --classes 2 --train 2000 --test 500 > datagen.log 2>&1; then
  for i in 1 2 3 4 5; do skip "ksdist datagen digits failed: $(head -1 datagen.log)"; done
  tap_done
fi
ex="$KS_SRCDIR/examples/cnn-binary.ini"
refused "an avg_pool's padding above half its kernel" \
  "\[layer.pool2\] padding = 2 with kernel = 3: an avg_pool layer's padding is at most half its kernel" \
  "$ex" --set layer.pool2.padding=2
refused "an avg_pool kernel wider than its input" \
  "\[layer.pool2\]: avg pool of .* \[64, 14, 14, 16\]: kernel 15, stride 2, pad 0 do not fit" \
  "$ex" --set layer.pool2.kernel=15 --set layer.pool2.padding=0
"$KSDIST" datagen digits digits10 --train 200 --test 50 > /dev/null 2>&1
refused "the logistic loss on the ten digits" "takes labels 0 and 1, but digits10 has 10 classes" \
  "$ex" --set data.path=digits10

"$KSDIST" train "$ex" --set train.steps=100 --set train.export_dir=exp > cnn.log 2>&1
a=$(auc cnn.log)
if good "$a" 0.98 && grep -q "(500 held-out samples)" cnn.log; then
  ok "examples/cnn-binary.ini learns the digits 0 and 1 in 100 steps (held-out AUC $a)"
else
  not_ok "examples/cnn-binary.ini: AUC '$a'" cnn.log
fi
"$KSDIST" infer exp --format idx -i digits01 --argmax > classes.txt 2> infer.log
acc=$(sed -n 's/.*accuracy \([0-9.]*\) (\([0-9]*\) of 500 rows.*/\1/p' infer.log)
if good "$acc" 0.95 && [ "$(sort -u classes.txt | tr '\n' ' ')" = "0 1 " ]; then
  ok "ksdist infer runs the export: --argmax gives classes 0 and 1 (accuracy $acc)"
else
  not_ok "ksdist infer of the binary export: accuracy '$acc'" infer.log
  sort classes.txt | uniq -c | sed 's/^/# /'
fi
tap_done
