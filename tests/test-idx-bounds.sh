#!/bin/sh
# IDX headers checked before decompressing (issue 49, item 5): the images' and labels'
# counts against each other and the image size against the 64-megapixel cap of image
# folders, read from the first bytes of a gzip stream alone; the rest decompressed only
# up to what the header promised (a longer stream refused there, a shorter one too).
# (Before: a gzipped IDX declaring 4 images of 32768x32768 was decompressed whole, 4.4 GB
# held, before it was refused.) Each bad file here is a 256 MiB stream in a small .gz:
# refused at once, the process's peak memory far below it (GNU time's %M, where present).
# TAP output. Needs KSDIST and KS_SRCDIR (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH # this build's ksdist finds its own plugins
command -v gzip >/dev/null || { echo "1..0 # SKIP gzip is needed to make the files"; exit 0; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-idx-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
export OPENBLAS_NUM_THREADS=1
. "$KS_SRCDIR/tests/tap.sh"
if /usr/bin/time -f %M -o /dev/null true 2>/dev/null; then timed="/usr/bin/time -f %M -o rss"; else timed=; fi
# be32 N: N as 4 big-endian bytes (octal escapes for printf)
be32 () { printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)))"; }
# images DIR COUNT ROWS COLS BYTES: DIR/train-images-idx3-ubyte.gz, that header then BYTES
# pixel bytes (not what the header says, where a case wants that)
images () {
  mkdir -p "$1"
  { printf '\000\000\010\003'; be32 "$2"; be32 "$3"; be32 "$4"; head -c "$5" /dev/zero; } \
    | gzip -1 >"$1/train-images-idx3-ubyte.gz"
}
# labels DIR COUNT: DIR/train-labels-idx1-ubyte.gz of COUNT labels 0, 1, ..., 9, 0, ...
labels () {
  { printf '\000\000\010\001'; be32 "$2"; i=0; while [ $i -lt "$2" ]; do printf "\\$(printf %03o $((i % 10)))"; i=$((i + 1)); done; } \
    | gzip -1 >"$1/train-labels-idx1-ubyte.gz"
}
big=268435456
# load NAME DIR: trains on DIR (status, err, and the peak RSS in KiB in rss when timed)
load () {
  rm -f rss
  $timed "$KSDIST" train "$KS_SRCDIR/examples/cnn-idx.ini" --set data.path="$2" \
    --set train.steps=2 --set train.batch=4 --set log.level=error >/dev/null 2>err
  status=$?
}
# the peak RSS of a run that reads no data (plugins, BLAS buffers): the bad files may add
# 64 MiB at most to it, a quarter of their stream
load none no-such-folder
base=$( [ -s rss ] && tail -n 1 rss || echo 0)
# refused_small NAME PATTERN: status 1, PATTERN in err, and a small peak RSS
refused_small () {
  peak=$( [ -s rss ] && tail -n 1 rss || echo 0)
  if [ $status -eq 1 ] && grep -q -- "$2" err && [ "$peak" -lt $((base + 65536)) ]; then
    ok "$1 (peak RSS ${peak} KiB, ${base} KiB without data$([ -n "$timed" ] || echo ': not measured'))"
  else
    echo "# status $status (wanted 1), peak RSS $peak KiB (wanted under $base + 65536), err lacks: $2"
    not_ok "$1"
  fi
}

images huge 4 32768 32768 $big && labels huge 4
load huge huge
refused_small "4 images of 32768x32768 are refused from the header, naming the file" \
  "huge/train-images-idx3-ubyte.gz: its header declares images of 32768x32768, over the 64 megapixels"

images counts 4 28 28 $big && labels counts 20
load counts counts
refused_small "4 images beside 20 labels are refused before decompressing" \
  "counts/train-labels-idx1-ubyte.gz: 20 labels but counts/train-images-idx3-ubyte.gz has 4 images"

images longer 2 28 28 $big && labels longer 2
load longer longer
refused_small "a stream longer than its header promises is cut off there and refused" \
  "longer/train-images-idx3-ubyte.gz: the gzip stream holds more than the 1584 bytes its header promises"

images shorter 2 28 28 784 && labels shorter 2
load shorter shorter
check "a stream shorter than its header promises is refused" 1 \
  "shorter/train-images-idx3-ubyte.gz: truncated: the header says 1568 bytes of data but 784 follow"

# the same reader takes a sound pair: 10 images of 28x28, exactly as promised
images sound 10 28 28 7840 && labels sound 10
for f in images labels; do cp sound/train-$f-*.gz "sound/t10k-$f-$(cd sound && ls train-$f-* | sed "s/train-$f-//")"; done
load sound sound
if [ $status -eq 0 ]; then ok "10 gzipped images of 28x28 with 10 labels train"
else not_ok "10 gzipped images of 28x28 with 10 labels train (status $status)"; fi
tap_done
