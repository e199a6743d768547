#!/bin/sh
# [data] dtype for token files: the same tokens as llm.c's uint16 shard and as a plain
# uint32 file train to the same held-out loss; uint32 tokens read as uint16 (the default)
# are warned about; a uint32 file of a size that is no multiple of 4 is refused. TAP
# output. Needs KSDIST (tests/local.mk); perl makes the uint32 files.
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
echo "1..4"
if ! command -v perl > /dev/null; then
  for i in 1 2 3 4; do echo "ok $i # SKIP perl is absent (it writes the uint32 files)"; done
  exit 0
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-tokens-dtype-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1

awk 'BEGIN { srand (5); split ("alpha beta gamma delta epsilon zeta eta theta", w, " ");
  for (i = 0; i < 3000; i++) print w[int (rand () * 8) + 1] }' > text.txt
"$KSDIST" datagen tokens tok --text text.txt > datagen.log 2>&1 || { cat datagen.log; exit 1; }
# the shards' tokens (after the 1024-byte header) as plain little-endian uint32
for f in train val; do
  perl -e 'local $/; $_ = <STDIN>; print pack ("V*", unpack ("v*", substr ($_, 1024)))' \
    < tok/$f.bin > tok/$f.u32
done
cat > lm.ini <<'INI'
[model]
type = layers
net = embed, position, block, norm, head
context = 8
[layer.embed]
type = embedding
size = 16
[layer.position]
type = position
[layer.block]
type = transformer
heads = 2
[layer.norm]
type = layer_norm
[layer.head]
type = linear
tie = embed
[data]
task = tokens
path = tok/train.bin
test_path = tok/val.bin
[train]
steps = 30
batch = 8
log_every = 30
[optim]
lr = 0.003
INI
loss () { sed -n 's/.*eval loss \([0-9.]*\) .*/\1/p' "$1" | tail -1; }

"$KSDIST" train lm.ini > u16.log 2>&1
"$KSDIST" train lm.ini --set data.dtype=uint32 --set data.path=tok/train.u32 \
  --set data.test_path=tok/val.u32 > u32.log 2>&1
a=$(loss u16.log) b=$(loss u32.log)
if [ -n "$a" ] && [ "$a" = "$b" ] && ! grep -qi "warning" u32.log; then
  echo "ok 1 - the tokens as uint16 shards and as uint32 files: the same held-out loss ($a)"
else
  echo "not ok 1 - uint16 loss '$a', uint32 loss '$b'"; sed 's/^/# /' u16.log u32.log | tail -20
fi

"$KSDIST" train lm.ini --set data.path=tok/train.u32 --set data.test_path=tok/val.u32 \
  --set train.steps=2 > wrong.log 2>&1
if grep -q "tok/train.u32: [0-9]*% of its [0-9]* uint16 tokens are 0, as when wider values (uint32, int64, float32) are read as uint16: if the file holds uint32 tokens, set \[data\] dtype = uint32" wrong.log; then
  echo "ok 2 - uint32 tokens read as uint16 are warned about, naming [data] dtype"
else
  echo "not ok 2 - no warning for uint32 tokens read as uint16"; sed 's/^/# /' wrong.log | tail -10
fi

head -c 4001 tok/train.u32 > tok/odd.u32
"$KSDIST" train lm.ini --set data.dtype=uint32 --set data.path=tok/odd.u32 \
  --set data.test_path=tok/val.u32 > odd.log 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "odd.u32: 4001 bytes, not a multiple of 4: not uint32 tokens" odd.log; then
  echo "ok 3 - a uint32 file of 4001 bytes is refused, naming its size (exit $rc)"
else
  echo "not ok 3 - odd uint32 file: exit $rc"; sed 's/^/# /' odd.log | tail -5
fi

"$KSDIST" config lm.ini --set data.dtype=uint64 > bad.log 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "\[data\] dtype = 'uint64': expected one of uint16, uint32" bad.log; then
  echo "ok 4 - [data] dtype = uint64 is refused by ksdist config"
else
  echo "not ok 4 - dtype uint64: exit $rc"; sed 's/^/# /' bad.log | tail -5
fi
