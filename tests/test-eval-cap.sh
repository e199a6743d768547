#!/bin/sh
# [train] eval_rows caps the held-out rows every evaluation scores (the first ones; eval_every's
# too), and the line says "N of M": on one model, data parallel with held-out files split
# over the workers, and a language model's windows of tokens; the tasks that score no rows
# refuse it. The capped accuracy is known by construction (the first 64 held-out rows are
# labelled right, the rest wrong). TAP output. Needs KSDIST (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-eval-cap-XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
echo "1..8"
awk 'BEGIN { srand (11); print "a,b,label";
  for (i = 0; i < 600; i++) { s = (i % 2) ? 1 : -1; a = s * (1 + rand ()); b = s * (0.5 + rand ());
    printf "%.4f,%.4f,%d\n", a, b, (s > 0) } }' > train.csv
# 101 held-out rows: the first 64 labelled right, the last 37 wrong
awk 'BEGIN { srand (12); print "a,b,label";
  for (i = 0; i < 101; i++) { s = (i % 2) ? 1 : -1; a = s * (1 + rand ()); b = s * (0.5 + rand ());
    y = s > 0; if (i >= 64) y = 1 - y; printf "%.4f,%.4f,%d\n", a, b, y } }' > test101.csv
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
check () { # N WHAT LOG WANT COUNT: COUNT eval lines, each ending in WANT
  n=$1 what=$2 log=$3 line=$4 count=$5
  got=$(grep -c "eval [a-z]* [0-9]" "$log") same=$(grep -cF "$line" "$log")
  if [ "$got" = "$count" ] && [ "$same" = "$count" ]; then
    echo "ok $n - $what: $line"
  else
    echo "not ok $n - $what: not $count lines of '$line'"; sed 's/^/# /' "$log"
  fi
}
"$KSDIST" train c.ini --set train.eval_rows=64 --set train.eval_every=50 > cap.log 2>&1
check 1 "the first 64 of 101 rows, at every evaluation" cap.log \
  "(64 of 101 held-out samples: [train] eval_rows = 64)" 3
if ! grep -q "^eval accuracy 1.0000 (64 of 101" cap.log; then
  echo "not ok 2 - the 64 rows scored are the first (all labelled right)"; sed 's/^/# /' cap.log
else
  "$KSDIST" train c.ini --set train.eval_rows=1000 > all.log 2>&1
  check 2 "the first 64 scored (accuracy 1); a cap above the set scores all" all.log \
    "eval accuracy 0.6337 (101 held-out samples)" 1
fi

# data parallel: every worker scores the first 64 rows of the whole test_path; rows held
# out of each worker's own files (split_files, holdout) are capped to 32 a worker, summed
head -n 301 train.csv > half1.csv
{ head -n 1 train.csv; tail -n +302 train.csv; } > half2.csv
"$KSDIST" launch -n 2 c.ini --set train.eval_rows=64 > dp.log 2>&1
split="--set data.path=half*.csv --set data.test_path= --set data.holdout=0.2 --set data.split_files=true"
"$KSDIST" launch -n 2 c.ini $split > split-all.log 2>&1
m=$(sed -n 's/.*eval accuracy [0-9.]* (\([0-9]*\) held-out samples)$/\1/p' split-all.log | head -1)
"$KSDIST" launch -n 2 c.ini $split --set train.eval_rows=64 > split.log 2>&1
# a cap below the workers: worker 1 scores none (it scored one before, 2 of the cap 1)
"$KSDIST" launch -n 2 c.ini $split --set train.eval_rows=1 > split1.log 2>&1
if [ -n "$m" ] && [ "$m" -gt 64 ] \
   && [ "$(grep -cF "(1 of $m held-out samples: [train] eval_rows = 1)" split1.log)" = 2 ] \
   && [ "$(grep -cF "eval accuracy 1.0000 (64 of 101 held-out samples: [train] eval_rows = 64)" dp.log)" = 2 ]; then
  check 3 "2 workers: the test file's first 64 rows; 32 held-out rows of each worker's files" \
    split.log "(64 of $m held-out samples: [train] eval_rows = 64)" 2
else
  echo "not ok 3 - data parallel: '$m' rows held out"; sed 's/^/# /' dp.log split-all.log split1.log
fi

# a language model: windows of 8 tokens
awk 'BEGIN { srand (5); split ("alpha beta gamma delta epsilon zeta eta theta", w, " ");
  for (i = 0; i < 3000; i++) print w[int (rand () * 8) + 1] }' > text.txt
if ! "$KSDIST" datagen tokens tok --text text.txt > datagen.log 2>&1; then
  echo "ok 4 # SKIP ksdist datagen tokens failed: $(head -1 datagen.log)"
else
  cat > lm.ini <<'INI'
[model]
type = layers
net = embed, head
context = 8
[layer.embed]
type = embedding
size = 16
[layer.head]
type = linear
tie = embed
[data]
task = tokens
path = tok/train.bin
test_path = tok/val.bin
[train]
steps = 20
batch = 4
eval_every = 10
INI
  "$KSDIST" train lm.ini > lm-all.log 2>&1
  total=$(sed -n 's/^eval loss [0-9.]* (\([0-9]*\) held-out tokens)$/\1/p' lm-all.log)
  "$KSDIST" train lm.ini --set train.eval_rows=3 > lm-cap.log 2>&1
  if [ -n "$total" ] && [ "$total" -gt 24 ]; then
    check 4 "a language model: 3 windows of 8 tokens, at every evaluation" lm-cap.log \
      "(24 of $total held-out tokens: [train] eval_rows = 3)" 2
  else
    echo "not ok 4 - the language model's held-out tokens: '$total'"; sed 's/^/# /' lm-all.log
  fi
fi

# tasks that score no rows refuse it, as `ksdist config` checks
"$KSDIST" config "$KS_SRCDIR/examples/reptile-glyphs.ini" --set data.path="$dir" --set train.eval_rows=10 > /dev/null 2> meta.log
rc=$?
if [ $rc -eq 2 ] && grep -q "\[train\] eval_rows: meta-learning scores tasks, not rows; set how many with \[meta\] eval_tasks" meta.log; then
  echo "ok 5 - meta-learning refuses eval_rows (ksdist config, status 2)"
else
  echo "not ok 5 - reptile with eval_rows: status $rc"; sed 's/^/# /' meta.log
fi
"$KSDIST" config "$KS_SRCDIR/examples/addition.ini" --set train.eval_rows=10 > /dev/null 2> add.log
rc=$?
if [ $rc -eq 2 ] && grep -q "\[train\] eval_rows: the addition task scores a fixed number" add.log; then
  echo "ok 6 - the addition task refuses eval_rows (ksdist config, status 2)"
else
  echo "not ok 6 - addition with eval_rows: status $rc"; sed 's/^/# /' add.log
fi

# a binary classifier's AUC over the first 64 rows (all labelled right, separable: 1),
# and the ctr model's, whose held-out samples are split over workers
cat > b.ini <<'INI'
[model]
type = layers
net = hidden, out
loss = logistic
[layer.hidden]
type = linear
size = 8
activation = tanh
[layer.out]
type = linear
size = 1
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
"$KSDIST" train b.ini --set train.eval_rows=64 > auc.log 2>&1
check 7 "a binary classifier's AUC over the first 64 rows" auc.log \
  "eval auc 1.0000 (64 of 101 held-out samples: [train] eval_rows = 64)" 1
if ! "$KSDIST" datagen ctr ctr --train 600 --test 200 > ctrgen.log 2>&1; then
  echo "ok 8 # SKIP ksdist datagen ctr failed: $(head -1 ctrgen.log)"
else
  "$KSDIST" train "$KS_SRCDIR/examples/ctr-pslib.ini" --set data.path=ctr --set job.mode=collective \
    --set train.steps=5 --set train.batch=32 --set train.eval_rows=50 > ctr.log 2>&1
  check 8 "the ctr model: 50 of its 200 held-out samples" ctr.log \
    "(50 of 200 held-out samples: [train] eval_rows = 50)" 1
fi
