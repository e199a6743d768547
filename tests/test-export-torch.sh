#!/bin/sh
# `ksdist export --torch` loaded by PyTorch (Debian's python3-torch) into modules of the
# same shape (tests/torch-load.py, load_state_dict strict): an MLP's weights from its
# checkpoint and a GPT's (with the long skip) from its export give the logits `ksdist
# infer` gives on the run's export, for the same rows. Skipped, with the reason, without
# python3-torch. TAP output. Needs KSDIST and KS_SRCDIR (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH # this build's ksdist finds its own plugins
python=${PYTHON:-/usr/bin/python3}
echo "1..2"
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "ok 1 - mlp # SKIP $python cannot import torch (apt-get install python3-torch)"
  echo "ok 2 - gpt # SKIP $python cannot import torch (apt-get install python3-torch)"
  exit 0
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-torch-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
export OPENBLAS_NUM_THREADS=1

# The largest difference of two files of numbers, relative to 1 + |value|: fails above
# 1e-4 (float32 sums in another order) or when their shapes differ.
compare () {
  "$python" - "$1" "$2" <<'EOF'
import sys
a, b = ([[float(v) for v in line.split()] for line in open(f)] for f in sys.argv[1:3])
assert len(a) == len(b) and all(len(x) == len(y) for x, y in zip(a, b)), "shapes differ"
worst = max(abs(x - y) / (1 + abs(y)) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
print("%d rows of %d, largest difference %.2e" % (len(a), len(a[0]), worst))
sys.exit(0 if worst < 1e-4 else 1)
EOF
}

# $1: test number and name; the rest: the command. Prints ok / not ok with the log.
check () {
  name=$1
  shift
  if "$@" >"$dir/log" 2>&1; then
    echo "ok $name - $(tail -n 1 "$dir/log")"
  else
    echo "not ok $name"
    sed 's/^/# /' "$dir/log"
  fi
}

mlp () {
  "$KSDIST" train --set data.task=rings --set model.hidden=16,8 --set model.activation=relu \
    --set train.steps=100 --set train.log_every=100 --set optim.warmup=0 \
    --set train.checkpoint_dir=ck --set train.export_dir=mlp-export &&
    "$python" -c "
import random
random.seed(5)
for _ in range(40): print('%.6f %.6f' % (random.uniform(-1, 1), random.uniform(-1, 1)))" >rows &&
    "$KSDIST" infer mlp-export --input rows >ksdist.out &&
    "$KSDIST" export --torch ck -o mlp.safetensors &&
    "$python" "$KS_SRCDIR/tests/torch-load.py" mlp.safetensors <rows >torch.out &&
    compare torch.out ksdist.out
}

gpt () {
  for i in $(seq 40); do echo "the quick brown fox jumps over the lazy dog."; done >fox.txt
  "$KSDIST" train --set model.type=gpt --set data.task=text --set data.path=fox.txt \
    --set model.context=16 --set model.layers=2 --set model.heads=2 --set model.width=16 \
    --set model.skip=true --set train.batch=4 --set train.steps=30 --set train.log_every=30 \
    --set optim.warmup=0 --set train.export_dir=gpt-export &&
    "$python" -c "
import random
random.seed(6)
for _ in range(5):
    ids = [random.randrange(20) for _ in range(16)]
    print(' '.join(map(str, ids)), file=open('tokens', 'a'))
    print(' '.join(map(str, ids + list(range(16)))))" >rows &&
    "$KSDIST" infer gpt-export --input rows >ksdist.out &&
    "$KSDIST" export --torch gpt-export -o gpt.safetensors &&
    "$python" "$KS_SRCDIR/tests/torch-load.py" gpt.safetensors <tokens >torch.out &&
    compare torch.out ksdist.out
}

check "1 mlp" mlp
check "2 gpt" gpt
