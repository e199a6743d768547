#!/bin/sh
# CNNs written in the config against PyTorch from the same initial weights (when Debian's
# python3-torch is installed): the loss of examples/cnn-idx.ini's network on 64 images,
# and every parameter's gradient, taken from one plain SGD step of ksdist; the same for
# examples/cnn-binary.ini (average pools, one padded and overlapping, and the binary
# logistic loss: PyTorch's AvgPool2d and binary_cross_entropy_with_logits) on 64 images
# of the digits 0 and 1 (tests/layers_torch.py). TAP output. Needs KSDIST and KS_SRCDIR
# (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
python=${PYTHON:-/usr/bin/python3}
echo "1..2"
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "ok 1 # SKIP $python cannot import torch (apt-get install python3-torch)"
  echo "ok 2 # SKIP $python cannot import torch (apt-get install python3-torch)"
  exit 0
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-layers-torch-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
if ! "$KSDIST" datagen digits digits --train 64 --test 64 > datagen.log 2>&1 \
   || ! "$KSDIST" datagen digits digits01 --classes 2 --train 64 --test 64 >> datagen.log 2>&1; then
  echo "ok 1 # SKIP ksdist datagen digits failed: $(head -1 datagen.log)"
  echo "ok 2 # SKIP ksdist datagen digits failed: $(head -1 datagen.log)"
  exit 0
fi
one_step () { # example, data folder, learning rate, checkpoint folder
  "$KSDIST" train "$KS_SRCDIR/examples/$1" --set data.path="$2" --set train.optimizer=sgd \
    --set optim.momentum=0 --set optim.lr="$3" --set train.batch=64 --set train.steps=1 \
    --set train.log_every=1 --set train.checkpoint_every=1 --set train.checkpoint_dir="$4" \
    > "$4.log" 2>&1 && "$KSDIST" export --torch "$4" -o "$4.safetensors" >> "$4.log" 2>&1
}
compare () { # number, example, data folder, what, layers_torch.py's mode
  n=$1 example=$2 data=$3 what=$4 mode=$5
  if one_step "$example" "$data" 0 "w0-$n" && one_step "$example" "$data" 0.1 "w1-$n"; then
    loss=$(sed -n 's/^step 1\/1 loss \([0-9.]*\) .*/\1/p' "w0-$n.log")
    if "$python" "$KS_SRCDIR/tests/layers_torch.py" "$data" "w0-$n.safetensors" "w1-$n.safetensors" \
         0.1 "$loss" $mode > "torch-$n.log" 2>&1; then
      echo "ok $n - $what: loss and gradients equal PyTorch's from the same weights ($(head -1 "torch-$n.log"))"
      sed 's/^/# /' "torch-$n.log"
    else
      echo "not ok $n - $what against PyTorch"; sed 's/^/# /' "torch-$n.log"
    fi
  else
    echo "not ok $n - $what: ksdist train or export failed"; sed 's/^/# /' "w0-$n.log" "w1-$n.log"
  fi
}
compare 1 cnn-idx.ini digits "the config CNN" ""
compare 2 cnn-binary.ini digits01 "the config CNN with average pools and the logistic loss" binary
