#!/bin/sh
# A CNN written as a layer list (conv2d, batch_norm with running statistics, max and
# average pools, flatten, linear) crosses to PyTorch and back (tests/cnn_torch.py, when
# Debian's python3-torch is installed): 1. `ksdist export --torch` of its export loads
# strictly into nn.Conv2d / nn.BatchNorm2d / nn.Linear and gives the logits `ksdist
# infer` gives; 2. a state_dict PyTorch made, as [model] init_from, gives ksdist the
# logits PyTorch gives (lr 0 and momentum 0, so one step changes nothing). Both within
# 1e-5 on 16 images. TAP output. Needs KSDIST and KS_SRCDIR (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
python=${PYTHON:-/usr/bin/python3}
echo "1..2"
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "ok 1 - export # SKIP $python cannot import torch (apt-get install python3-torch)"
  echo "ok 2 - init_from # SKIP $python cannot import torch (apt-get install python3-torch)"
  exit 0
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-cnn-torch-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
export OPENBLAS_NUM_THREADS=1
if ! "$KSDIST" datagen digits digits --train 64 --test 16 >datagen.log 2>&1; then
  echo "ok 1 # SKIP ksdist datagen digits failed: $(head -1 datagen.log)"
  echo "ok 2 # SKIP ksdist datagen digits failed: $(head -1 datagen.log)"
  exit 0
fi
cat >cnn.ini <<'INI'
[model]
type = layers
net = conv1, bn1, pool1, conv2, pool2, flat, hidden, out
[layer.conv1]
type = conv2d
filters = 4
kernel = 3
padding = 1
[layer.bn1]
type = batch_norm
activation = relu
[layer.pool1]
type = max_pool
kernel = 2
[layer.conv2]
type = conv2d
filters = 6
kernel = 5
padding = 2
activation = relu
[layer.pool2]
type = avg_pool
kernel = 2
[layer.flat]
type = flatten
[layer.hidden]
type = linear
size = 16
activation = relu
[layer.out]
type = linear
size = 10
[data]
task = idx
path = digits
[train]
optimizer = sgd
steps = 5
batch = 16
log_every = 5
INI

# The largest difference of two files of logits; fails above 1e-5 or when shapes differ.
compare () {
  "$python" - "$1" "$2" <<'EOF'
import sys
a, b = ([[float(v) for v in line.split()] for line in open(f)] for f in sys.argv[1:3])
assert len(a) == len(b) > 0 and all(len(x) == len(y) for x, y in zip(a, b)), "shapes differ"
worst = max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
print("%d rows of %d logits, largest difference %.2e" % (len(a), len(a[0]), worst))
sys.exit(0 if worst <= 1e-5 else 1)
EOF
}
check () { # number and name, then the command
  name=$1
  shift
  if "$@" >log 2>&1; then
    echo "ok $name - $(tail -n 1 log)"
  else
    echo "not ok $name"
    sed 's/^/# /' log
  fi
}
to_torch () {
  "$KSDIST" train cnn.ini --set train.export_dir=ex &&
    "$KSDIST" infer ex --format idx -i digits >ksdist.out &&
    "$KSDIST" export --torch ex -o cnn.safetensors &&
    "$python" "$KS_SRCDIR/tests/cnn_torch.py" load cnn.safetensors digits >torch.out &&
    compare torch.out ksdist.out
}
from_torch () {
  "$python" "$KS_SRCDIR/tests/cnn_torch.py" make made.safetensors digits >made.out &&
    "$KSDIST" train cnn.ini --set model.init_from=made.safetensors --set optim.lr=0 \
      --set layer.bn1.momentum=0 --set train.steps=1 --set train.export_dir=ex2 &&
    "$KSDIST" infer ex2 --format idx -i digits >ksdist2.out &&
    compare made.out ksdist2.out
}
check "1 export" to_torch
check "2 init_from" from_torch
