#!/bin/sh
# A CNN written in the config against PyTorch from the same initial weights (when
# Debian's python3-torch is installed): the loss of examples/cnn-idx.ini's network on 64
# images, and every parameter's gradient, taken from one plain SGD step of ksdist
# (tests/layers_torch.py). TAP output. Needs KSDIST and KS_SRCDIR (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
python=${PYTHON:-/usr/bin/python3}
echo "1..1"
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "ok 1 # SKIP $python cannot import torch (apt-get install python3-torch)"
  exit 0
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-layers-torch-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
if ! "$KSDIST" datagen digits digits --train 64 --test 64 > datagen.log 2>&1; then
  echo "ok 1 # SKIP ksdist datagen digits failed: $(head -1 datagen.log)"
  exit 0
fi
one_step () { # learning rate, checkpoint folder
  "$KSDIST" train "$KS_SRCDIR/examples/cnn-idx.ini" --set train.optimizer=sgd \
    --set optim.momentum=0 --set optim.lr="$1" --set train.batch=64 --set train.steps=1 \
    --set train.log_every=1 --set train.checkpoint_every=1 --set train.checkpoint_dir="$2" \
    > "$2.log" 2>&1 && "$KSDIST" export --torch "$2" -o "$2.safetensors" >> "$2.log" 2>&1
}
if one_step 0 w0 && one_step 0.1 w1; then
  loss=$(sed -n 's/^step 1\/1 loss \([0-9.]*\) .*/\1/p' w0.log)
  if "$python" "$KS_SRCDIR/tests/layers_torch.py" digits w0.safetensors w1.safetensors 0.1 "$loss" > torch.log 2>&1; then
    echo "ok 1 - the config CNN's loss and gradients equal PyTorch's from the same weights ($(head -1 torch.log))"
    sed 's/^/# /' torch.log
  else
    echo "not ok 1 - the config CNN against PyTorch"; sed 's/^/# /' torch.log
  fi
else
  echo "not ok 1 - ksdist train or export failed"; sed 's/^/# /' w0.log w1.log
fi
