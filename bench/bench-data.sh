#!/bin/sh
# Loading a user's data set in each format against a plain read of the same bytes, in one
# run: 28 x 28 digits (ksdist datagen digits, N training images, default 20000) as CSV
# (784 pixel columns and a label), CSV gzipped, NumPy .npy, and MNIST's IDX files plain
# and gzipped. A load is `ksdist config` on a config of that data set (it builds the task:
# reads, parses and checks every row, the held-out file too), less the same command on a
# data set of 10 rows; a plain read is `cat` of the same files (from the page cache, as
# the loads). Prints MB of files, seconds, MB/s and the load's MB/s over cat's. From the
# build tree:
#   bench/bench-data.sh [N]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
ksdist="$top/tools/ksdist"
n=${1:-20000}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-bench-data-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir"
for f in idx npy csv; do
  "$ksdist" datagen digits "$f" --format "$f" --train "$n" --test 1000 > /dev/null
  "$ksdist" datagen digits "tiny-$f" --format "$f" --train 10 --test 10 > /dev/null
done
mkdir idx-gz tiny-idx-gz
for f in idx/*; do gzip -1 -c "$f" > "idx-gz/$(basename "$f").gz"; done
for f in tiny-idx/*; do gzip -1 -c "$f" > "tiny-idx-gz/$(basename "$f").gz"; done
mkdir csv-gz tiny-csv-gz
for f in csv/*.csv; do gzip -1 -c "$f" > "csv-gz/$(basename "$f").gz"; done
for f in tiny-csv/*.csv; do gzip -1 -c "$f" > "tiny-csv-gz/$(basename "$f").gz"; done

now () { date +%s.%N; }
config () { # format folder
  case $1 in
    idx|idx-gz) echo "--set data.task=idx --set data.path=$2" ;;
    npy) echo "--set data.task=npy --set data.path=$2/train-images.npy --set data.labels=$2/train-labels.npy --set data.test_path=$2/t10k-images.npy --set data.test_labels=$2/t10k-labels.npy" ;;
    csv) echo "--set data.task=csv --set data.path=$2/train.csv --set data.test_path=$2/t10k.csv --set data.label=label" ;;
    csv-gz) echo "--set data.task=csv --set data.path=$2/train.csv.gz --set data.test_path=$2/t10k.csv.gz --set data.label=label" ;;
  esac
}
best () { # the fastest of three runs of a command, in seconds
  b=
  for i in 1 2 3; do
    t0=$(now); "$@" > /dev/null 2>&1; t1=$(now)
    b=$(echo "$t1 $t0 ${b:-1e9}" | awk '{ d = $1 - $2; print (d < $3) ? d : $3 }')
  done
  echo "$b"
}
printf "# %d images of 28 x 28\n# %-7s %9s %9s %9s %9s %8s\n" "$n" format MB load_s "MB/s" "cat MB/s" ratio
for f in csv csv-gz npy idx idx-gz; do
  mb=$(du -sb "$f" | awk '{ printf "%.1f", $1 / 1e6 }')
  load=$(best "$ksdist" config $(config $f $f))
  base=$(best "$ksdist" config $(config $f tiny-$f))
  read_s=$(best sh -c "cat $f/* > /dev/null")
  echo "$f $mb $load $base $read_s" | awk '{ s = $3 - $4; if (s < 1e-4) s = 1e-4;
    printf "  %-7s %9s %9.3f %9.1f %9.1f %8.3f\n", $1, $2, s, $2 / s, $2 / $5, ($2 / s) / ($2 / $5) }'
done
