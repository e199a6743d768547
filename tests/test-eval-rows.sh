#!/bin/sh
# The held-out metric scores every held-out row exactly once, the last batch partial,
# and prints the true count: on one model, data parallel, parameter servers and the
# pipeline; a regression's RMSE equals one computed from `ksdist infer` of its export.
# TAP output. Needs KSDIST (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-eval-rows-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
echo "1..9"
# two separable classes: label 1 when a + b > 0, rows far from the boundary
awk 'BEGIN { srand (11); print "a,b,label";
  for (i = 0; i < 600; i++) { s = (i % 2) ? 1 : -1; a = s * (1 + rand ()); b = s * (0.5 + rand ());
    printf "%.4f,%.4f,%d\n", a, b, (s > 0) } }' > train.csv
# 101 held-out rows: the first 64 labelled right, the last 37 wrong
awk 'BEGIN { srand (12); print "a,b,label";
  for (i = 0; i < 101; i++) { s = (i % 2) ? 1 : -1; a = s * (1 + rand ()); b = s * (0.5 + rand ());
    y = s > 0; if (i >= 64) y = 1 - y; printf "%.4f,%.4f,%d\n", a, b, y } }' > test101.csv
head -n 11 test101.csv > test10.csv
cat > c.ini <<'INI'
[model]
type = mlp
hidden = 8
activation = tanh
[data]
task = csv
path = train.csv
test_path = test101.csv
label = label
[train]
steps = 150
batch = 64
[optim]
lr = 0.05
INI
# A trained model is right on every true label: 64 of the 101 rows count as right.
want="eval accuracy 0.6337 (101 held-out samples)"
check () { # N WHAT LOG WANT [COUNT]: every line of the log's evaluations is WANT
  n=$1 what=$2 log=$3 line=$4 count=${5:-1}
  got=$(grep -c "eval " "$log") same=$(grep -c "$line\$" "$log")
  if [ "$got" = "$count" ] && [ "$same" = "$count" ]; then
    echo "ok $n - $what: $line"
  else
    echo "not ok $n - $what: not $count lines of '$line'"; sed 's/^/# /' "$log"
  fi
}
"$KSDIST" train c.ini > one.log 2>&1
check 1 "101 rows at batch 64 (the last batch 37 rows)" one.log "$want"
"$KSDIST" train c.ini --set train.batch=100 > b100.log 2>&1
check 2 "101 rows at batch 100 (the last batch one row)" b100.log "$want"
"$KSDIST" train c.ini --set data.test_path=test10.csv > ten.log 2>&1
check 3 "10 rows, fewer than a batch, none repeated" ten.log "eval accuracy 1.0000 (10 held-out samples)"

# A regression on 44 held-out rows: the RMSE of the evaluation against ksdist infer's.
awk 'BEGIN { srand (5); print "a,b,y";
  for (i = 0; i < 400; i++) { a = 4 * rand () - 2; b = 4 * rand () - 2;
    printf "%.5f,%.5f,%.5f\n", a, b, 3 * a - 2 * b + 1 + 0.5 * (rand () - 0.5) } }' > line.csv
awk 'BEGIN { srand (6); print "a,b,y";
  for (i = 0; i < 44; i++) { a = 4 * rand () - 2; b = 4 * rand () - 2;
    printf "%.5f,%.5f,%.5f\n", a, b, 3 * a - 2 * b + 1 + 2 * (rand () - 0.5) } }' > line44.csv
cat > r.ini <<'INI'
[model]
type = layers
net = hidden, out
loss = mse
[layer.hidden]
type = linear
size = 8
activation = tanh
[layer.out]
type = linear
size = 1
[data]
task = csv
path = line.csv
test_path = line44.csv
label = y
[train]
steps = 100
batch = 32
export_dir = reg-export
[optim]
lr = 0.01
INI
"$KSDIST" train r.ini > reg.log 2>&1
tail -n +2 line44.csv | cut -d, -f1,2 | tr ',' ' ' > rows44.txt
tail -n +2 line44.csv | cut -d, -f3 > y44.txt
"$KSDIST" infer reg-export -i rows44.txt > pred.txt 2> infer.log
truth=$(paste -d' ' pred.txt y44.txt | awk '{ d = $1 - $2; s += d * d; n++ }
  END { if (n == 44) printf "%.4f", sqrt (s / n) }')
check 4 "a regression's RMSE over all 44 rows, as infer's predictions give it" reg.log \
  "eval rmse $truth (44 held-out samples)"

"$KSDIST" launch -n 2 c.ini > dp.log 2>&1
check 5 "data parallel, 2 workers" dp.log "$want" 2
"$KSDIST" launch -n 2 c.ini --set pipeline.stages=2 --set pipeline.micro_batches=2 > pp.log 2>&1
check 6 "a pipeline of 2 stages" pp.log "$want" 2
if "$KSDIST" plugins --json | grep -q '"name": "transpiler", "path": "[^"]*", "state": "loaded"'; then
  "$KSDIST" launch --servers 1 --workers 2 c.ini --set job.mode=transpiler > ps.log 2>&1
  check 7 "parameter servers, 2 workers" ps.log "$want" 2
else
  echo "ok 7 # SKIP the transpiler plugin is not built (ZeroMQ)"
fi
# A held-out set split over workers by files (split_files) is summed: both print 101.
head -n 51 test101.csv > part1.csv
{ head -n 1 test101.csv; tail -n +52 test101.csv; } > part2.csv
head -n 301 train.csv > train1.csv
{ head -n 1 train.csv; tail -n +302 train.csv; } > train2.csv
"$KSDIST" launch -n 2 c.ini --set data.path='train*.csv' --set data.test_path='part*.csv' \
  --set data.split_files=true \
  > split.log 2>&1
check 8 "held-out files split over 2 workers and summed" split.log "$want" 2

# A regression on raw targets (about 150) on parameter servers: its gradients are far above
# its parameters' norm and trains (a bound on gradient pushes refused it at step 1).
if "$KSDIST" plugins --json | grep -q '"name": "transpiler", "path": "[^"]*", "state": "loaded"'; then
  for f in line line44; do
    awk -F, 'NR == 1 { print; next } { printf "%s,%s,%.5f\n", $1, $2, $3 + 150 }' $f.csv > raw-$f.csv
  done
  "$KSDIST" launch --servers 1 --workers 2 r.ini --set job.mode=transpiler \
    --set data.path=raw-line.csv --set data.test_path=raw-line44.csv --set train.export_dir= \
    > psreg.log 2>&1
  check 9 "a regression on raw targets, parameter servers" psreg.log "(44 held-out samples)" 2
else
  echo "ok 9 # SKIP the transpiler plugin is not built (ZeroMQ)"
fi
