#!/bin/sh
# The examples the README names, each trained as its header says on the data set its
# header makes (ksdist datagen, in a fresh folder), in one run: the metric each prints
# at its end on held-out data and the wall time of the train command; for cnn-idx.ini the
# same network and steps in PyTorch (bench/cnn-idx-accuracy-torch.py, Debian's
# python3-torch) on the same files as the reference. From the build tree:
#   bench/run-examples.sh [--quick]
# --quick: the examples that take seconds (default.ini in one process and as two
# workers, the CSV, NumPy and regression examples); without it also cnn-idx.ini with its
# PyTorch reference, image-folder.ini, tokens-lm.ini and reptile-glyphs.ini (4000
# meta-steps and 1000 test tasks: about 10 minutes on one core). PYTHON names the
# interpreter with torch (default /usr/bin/python3).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "$(dirname "$0")" && pwd)
quick=no
[ "${1:-}" != --quick ] || quick=yes
python=${PYTHON:-/usr/bin/python3}
ksdist="$top/tools/ksdist"
export KS_PLUGIN_PATH=
for p in openblas optim store roles gloo shm collective; do
  KS_PLUGIN_PATH=$KS_PLUGIN_PATH${KS_PLUGIN_PATH:+:}$top/plugins/$p/.libs
done
export KS_PLUGIN_SYSTEM_PATH=
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-bench-examples-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir"
ln -s "$(cd "$src/../examples" && pwd)" examples

now () { date +%s.%N; }
printf "# each example trained as its header says; metric at its end on held-out data; wall seconds\n"
printf "# %-30s %-9s %9s %9s\n" example metric value seconds
# NAME: what the row is called; then the command; the metric is the last eval line's.
row () {
  name=$1; shift
  t0=$(now)
  if "$@" >out.log 2>&1; then
    t1=$(now)
    set -- $(sed -n 's/^\(\[rank 0\] \)\{0,1\}eval \([a-z_]*\) \([0-9.]*\) .*/\2 \3/p' out.log | tail -1)
    printf "  %-30s %-9s %9s %9.1f\n" "$name" "${1:--}" "${2:--}" "$(echo "$t1 $t0" | awk '{ print $1 - $2 }')"
  else
    printf "  %-30s %-9s %9s %9s\n" "$name" failed - -
    tail -n 5 out.log | sed 's/^/#   /'
  fi
}
row default.ini "$ksdist" train examples/default.ini
row "default.ini (launch -n 2)" "$ksdist" launch -n 2 examples/default.ini
row csv-regression.ini "$ksdist" train examples/csv-regression.ini
"$ksdist" datagen digits digits-csv --format csv >/dev/null
row csv-classifier.ini "$ksdist" train examples/csv-classifier.ini
"$ksdist" datagen digits digits-npy --format npy >/dev/null
row npy-classifier.ini "$ksdist" train examples/npy-classifier.ini
[ $quick = no ] || exit 0

"$ksdist" datagen digits digits >/dev/null
row cnn-idx.ini "$ksdist" train examples/cnn-idx.ini
if "$python" -c "import torch" 2>/dev/null; then
  t0=$(now)
  acc=$(OMP_NUM_THREADS=1 "$python" "$src/cnn-idx-accuracy-torch.py" digits 600 1 2>/dev/null) || acc=-
  t1=$(now)
  printf "  %-30s %-9s %9s %9.1f\n" "cnn-idx (PyTorch, 1 thread)" accuracy "$acc" "$(echo "$t1 $t0" | awk '{ print $1 - $2 }')"
else
  printf "  %-30s %-9s %9s %9s\n" "cnn-idx (PyTorch)" "(no python3-torch)" - -
fi
"$ksdist" datagen digits digits-png --format folder >/dev/null
row image-folder.ini "$ksdist" train examples/image-folder.ini
"$ksdist" datagen tokens words-tokens >/dev/null
row tokens-lm.ini "$ksdist" train examples/tokens-lm.ini
"$ksdist" datagen glyphs glyphs >/dev/null
row "reptile-glyphs.ini (5-shot)" "$ksdist" train examples/reptile-glyphs.ini --set openblas.threads=1
