#!/bin/sh
# The CSV classifier end to end (examples/csv-classifier.ini: read and standardise the
# CSV files, 1000 steps of an MLP 256-128 at batch 64, the held-out accuracy) by
# `ksdist train` against the same job as a PyTorch user would write it
# (bench/csv-classifier-torch.py, Debian's python3-torch), each timed as a whole process,
# at the same thread count, in one run. Data: ksdist datagen digits (N training images,
# default 20000, and 1000 held out) as CSV. Prints seconds and held-out accuracy of each
# and PyTorch's seconds over ksdist's (above 1: ksdist is faster). From the build tree:
#   bench/bench-csv.sh [N [THREADS...]]   (default: 20000, 1 and the number of cores)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "$(dirname "$0")" && pwd)
ksdist="$top/tools/ksdist"
python=${PYTHON:-/usr/bin/python3}
n=${1:-20000}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- 1 "$(nproc)"
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-bench-csv-XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$ksdist" datagen digits "$dir/digits-csv" --format csv --train "$n" --test 1000 > /dev/null
mb=$(du -sb "$dir/digits-csv" | awk '{ printf "%.1f", $1 / 1e6 }')
have_torch=yes
"$python" -c "import torch, numpy" 2>/dev/null || have_torch=no

now () { date +%s.%N; }
printf "# examples/csv-classifier.ini on %d rows of 784 columns (%s MB of CSV), 1000 steps\n" "$n" "$mb"
printf "# %7s %10s %10s %10s %10s %8s\n" threads ksdist_s ks_acc torch_s torch_acc ratio
for t in "$@"; do
  t0=$(now)
  ks_acc=$(cd "$dir" && OPENBLAS_NUM_THREADS=$t "$ksdist" train "$top/examples/csv-classifier.ini" \
             --set openblas.threads="$t" 2>&1 | awk '/^eval accuracy/ { a = $3 } END { print a }')
  t1=$(now)
  ks_s=$(echo "$t1 $t0" | awk '{ printf "%.2f", $1 - $2 }')
  if [ "$have_torch" = no ]; then
    printf "  %7s %10s %10s %10s %10s %8s\n" "$t" "$ks_s" "$ks_acc" - - "(no python3-torch)"
    continue
  fi
  t0=$(now)
  torch_acc=$(OMP_NUM_THREADS=$t "$python" "$src/csv-classifier-torch.py" "$dir/digits-csv/train.csv" \
                "$dir/digits-csv/t10k.csv" 1000 "$t" | awk '{ print $2 }')
  t1=$(now)
  torch_s=$(echo "$t1 $t0" | awk '{ printf "%.2f", $1 - $2 }')
  echo "$t $ks_s $ks_acc $torch_s $torch_acc" | awk '{
    printf "  %7s %10s %10s %10s %10s %8.2f\n", $1, $2, $3, $4, $5, $4 / $2 }'
done
