#!/bin/sh
# Networks written in the config ([model] type = layers, one [layer.NAME] group per
# layer): the built-in mlp written as a layer list trains bitwise as `type = mlp`; a layer
# list with a skip connection learns the spirals, alone, data parallel and cut into two
# pipeline stages (the skip crossing them); every mistake in a layer group is refused by
# `ksdist config` (exit 2) naming the group and what to do; [model] init_from; a
# transformer language model with a tied head on token files, alone and on two pipeline
# stages (the tied table's gradient summed over both). TAP output. Needs KSDIST,
# KS_SRCDIR and KS_BUILD_PLUGINS (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-layers-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
. "$KS_SRCDIR/tests/tap.sh"

# the tensors of a safetensors file: the bytes after its header
tensors () {
  len=$(od -An -t u8 -j0 -N8 "$1" | tr -d ' ')
  tail -c +$((len + 9)) "$1" | sha256sum | cut -d' ' -f1
}

cat > mlp.ini <<'INI'
[model]
type = mlp
hidden = 32, 16
activation = relu
dropout = 0.1
[data]
task = rings
samples = 512
[train]
steps = 30
batch = 32
[optim]
lr = 0.01
INI
cat > mlp-layers.ini <<'INI'
[model]
type = layers
net = fc_0, fc_1, out
[layer.fc_0]
type = linear
size = 32
activation = relu
rate = 0.1
seed = 1
[layer.fc_1]
type = linear
size = 16
activation = relu
rate = 0.1
seed = 2
[layer.out]
type = linear
size = 3
seed = 1001
[data]
task = rings
samples = 512
[train]
steps = 30
batch = 32
[optim]
lr = 0.01
INI
ck="--set train.checkpoint_every=30 --set train.checkpoint_dir"
"$KSDIST" train mlp.ini $ck=a > a.log 2>&1 && "$KSDIST" train mlp-layers.ini $ck=b > b.log 2>&1
if [ -f a/checkpoint-30/model.safetensors ] && [ -f b/checkpoint-30/model.safetensors ] \
   && [ "$(tensors a/checkpoint-30/model.safetensors)" = "$(tensors b/checkpoint-30/model.safetensors)" ] \
   && [ "$(grep '^eval' a.log)" = "$(grep '^eval' b.log)" ]; then
  ok "the mlp written as a layer list trains bitwise as type = mlp"
else
  not_ok "the mlp written as a layer list differs from type = mlp" a.log b.log
fi

cat > skip.ini <<'INI'
[model]
type = layers
net = h1, h2, h3, out
[layer.h1]
type = linear
size = 48
activation = tanh
[layer.h2]
type = linear
size = 48
activation = tanh
[layer.h3]
type = linear
size = 48
activation = tanh
add = h1
[layer.out]
type = linear
size = 2
[data]
task = spirals
[train]
steps = 1500
batch = 128
[optim]
lr = 0.003
INI
accuracy () { sed -n 's/.*eval accuracy \([0-9.]*\) .*/\1/p' "$1" | tail -1; }
good () { [ -n "$1" ] && awk -v a="$1" -v m="$2" 'BEGIN { exit !(a >= m) }'; }
"$KSDIST" train skip.ini > one.log 2>&1
a=$(accuracy one.log)
if good "$a" 0.95; then
  ok "a layer list with a skip connection learns the spirals (accuracy $a)"
else
  not_ok "a layer list with a skip connection: accuracy '$a'" one.log
fi

if [ ! -e "$KS_BUILD_PLUGINS/gloo/.libs/gloo.so" ]; then
  skip "the gloo plugin was not built"
  skip "the gloo plugin was not built"
else
  "$KSDIST" launch -n 2 skip.ini --set train.steps=750 > dp.log 2>&1
  a=$(accuracy dp.log)
  if good "$a" 0.9; then
    ok "two data-parallel workers train the layer list (accuracy $a)"
  else
    not_ok "data parallel: accuracy '$a'" dp.log
  fi
  "$KSDIST" launch -n 2 skip.ini --set pipeline.stages=2 --set pipeline.micro_batches=2 > pp.log 2>&1
  a=$(accuracy pp.log)
  if good "$a" 0.95 && "$KSDIST" segment skip.ini --set pipeline.stages=2 2>&1 | grep -q h3; then
    ok "two pipeline stages train it, the skip from h1 to h3 crossing them (accuracy $a)"
  else
    not_ok "pipeline: accuracy '$a'" pp.log
  fi
fi

# each mistake: `ksdist config` exits 2 with one message naming the place (tap.sh)
refused "a key the layer's type does not use" "\[layer.h1\] kernel is set, but a linear layer does not use it" skip.ini --set layer.h1.kernel=3
refused "a layer group not in [model] net" "\[layer.extra\] is not in \[model\] net" skip.ini --set layer.extra.type=linear
refused "a skip from a later layer" "\[layer.h1\] add = h3: no layer of that name comes before it" skip.ini --set layer.h1.add=h3
refused "a last layer of the wrong size" "the last layer (out) gives \[128, 3\]" skip.ini --set layer.out.size=3
refused "a linear layer missing its size" "\[layer.extra\] is a linear layer and needs size" skip.ini --set model.net=h1,h2,h3,extra,out --set layer.extra.type=linear

# [model] init_from: weights in PyTorch's layout (export --torch) start a run where the
# exported one ended: with lr = 0 the held-out result is the same
"$KSDIST" export --torch a -o torch.safetensors > export.log 2>&1
zero="--set train.steps=1 --set optim.lr=0 --set optim.warmup=0"
"$KSDIST" train mlp.ini $zero --set model.init_from=torch.safetensors > init.log 2>&1
if [ "$(grep '^eval' init.log)" = "$(grep '^eval' a.log)" ] && grep -q "started from the 6 weights" init.log; then
  ok "init_from a PyTorch-layout file starts where that run ended ($(grep '^eval' init.log))"
else
  not_ok "init_from: '$(grep '^eval' init.log)' against '$(grep '^eval' a.log)'" export.log init.log
fi
"$KSDIST" train mlp.ini --set model.hidden=32,8 --set model.init_from=torch.safetensors > err.log 2>&1
if [ $? -ne 0 ] && grep -q "tensor 'fc_1.weight' is \[16, 32\], but the parameter fc_1.w needs \[8, 32\]" err.log; then
  ok "a tensor of another shape is refused, naming both"
else
  not_ok "a misshapen tensor" err.log
fi
"$KSDIST" train mlp.ini --set model.hidden=32 --set model.init_from=torch.safetensors > err.log 2>&1
if [ $? -ne 0 ] && grep -q "its tensor 'fc_1.weight' is no parameter of this model" err.log; then
  ok "a tensor the model does not have is refused, naming it"
else
  not_ok "an extra tensor" err.log
fi

# a transformer language model of the config on token files (llm.c's shard layout)
words=/usr/share/dict/words
if [ ! -r "$words" ] || ! "$KSDIST" datagen tokens words-tokens --text "$words" > tokens.log 2>&1; then
  for i in 1 2 3; do skip "no token files: $words or ksdist datagen tokens"; done
  tap_done
fi
lm="$KS_SRCDIR/examples/tokens-lm.ini --set optim.warmup=5"
"$KSDIST" train $lm --set train.steps=200 > lm.log 2>&1
l=$(sed -n 's/.*eval loss \([0-9.]*\) .*/\1/p' lm.log)
# a model that learned nothing scores ln 71 = 4.26 (uniform) or about 3.2 (letter frequencies)
if [ -n "$l" ] && awk -v l="$l" 'BEGIN { exit !(l < 2.9) }'; then
  ok "the tied-head transformer learns the words' tokens (held-out loss $l)"
else
  not_ok "token LM: loss '$l'" lm.log
fi
if [ ! -e "$KS_BUILD_PLUGINS/gloo/.libs/gloo.so" ]; then
  skip "the gloo plugin was not built"
else
  "$KSDIST" train $lm --set train.steps=30 > one.log 2>&1
  "$KSDIST" launch -n 2 $lm --set train.steps=30 --set pipeline.stages=2 --set pipeline.micro_batches=2 > pp.log 2>&1
  want=$(grep '^eval' one.log)
  if [ -n "$want" ] && grep -q "\[rank 0\] $want" pp.log; then
    ok "two stages, the embedding on one and its tied head on the other, train as one process ($want)"
  else
    not_ok "tied head on a pipeline: '$(grep eval pp.log | head -1)' against '$want'" pp.log
  fi
fi
refused "a head tied to a layer that is no embedding" "\[layer.head\] tie: name an embedding layer" $KS_SRCDIR/examples/tokens-lm.ini --set layer.head.tie=norm
tap_done
