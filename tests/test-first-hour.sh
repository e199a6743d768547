#!/bin/sh
# The first hour's frictions, end to end with `ksdist train` on files the test writes: an
# installed example run from another folder finds its data beside it; a missing file names
# its setting and the rule for relative paths; a comment after a value is no part of it;
# CSV cells with no value are an error naming [data] missing, or filled; a held-out file
# may lack some classes (its names mapped onto the training ones), but not hold new ones.
# TAP output. Needs KSDIST and KS_SRCDIR (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-first-hour-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
echo "1..8"
value () { sed -n "s/.*eval $2 \([0-9.]*\) .*/\1/p" "$1" | tail -1; }
at_least () { [ -n "$1" ] && awk -v a="$1" -v m="$2" 'BEGIN { exit !(a >= m) }'; }
check () { # number, description, log, status wanted, status got, text wanted
  if [ "$5" -eq "$4" ] && grep -q -- "$6" "$3"; then
    echo "ok $1 - $2"
  else
    echo "not ok $1 - $2: exit $5 (wanted $4), '$6' wanted"; sed 's/^/# /' "$3" | tail -10
  fi
}

"$KSDIST" train "$KS_SRCDIR/examples/csv-regression.ini" --set train.steps=20 > example.log 2>&1
check 1 "examples/csv-regression.ini runs from another folder (its data beside it)" \
  example.log 0 $? "eval rmse [0-9.]* ("

# three classes of 4 features, separable, named; the held-out file lacks beta
awk 'BEGIN { srand (3); print "f1,f2,f3,f4,kind";
  split ("alpha beta gamma", names, " ");
  for (i = 0; i < 900; i++) { k = i % 3; line = "";
    for (j = 0; j < 4; j++) line = line sprintf ("%.4f,", 2 * k + j + rand () - 0.5);
    print line names[k + 1] } }' > kinds.csv
awk -F, 'NR == 1 || (NR % 5 == 0 && $5 != "beta")' kinds.csv > no-beta.csv
cat > csv.ini <<'INI'
[model]
type = mlp     # a perceptron
hidden = 16
[data]         ; the rows
task = csv
path = kinds.csv         # beside this file
label = kind
normalize = standard
[train]
steps = 200
batch = 32
[optim]
lr = 0.01
INI
"$KSDIST" train csv.ini --set data.test_path=no-beta.csv > classes.log 2>&1
status=$? a=$(value classes.log accuracy)
if [ $status -eq 0 ] && at_least "$a" 0.97; then
  echo "ok 2 - comments after values; a held-out file without class beta scores alpha and gamma (accuracy $a)"
else
  echo "not ok 2 - no-beta test file: exit $status, accuracy '$a'"; sed 's/^/# /' classes.log | tail -10
fi

sed 's/gamma$/delta/' no-beta.csv > delta.csv
"$KSDIST" train csv.ini --set data.test_path=delta.csv > delta.log 2>&1
check 3 "a held-out class no training row has is refused, naming it" delta.log 2 $? \
  "delta.csv holds class 'delta', which no training row has"

cp csv.ini sub.ini && mkdir -p elsewhere && mv sub.ini elsewhere/
printf 'test_path = gone.csv\n' > extra && sed -i '/^label = kind/r extra' elsewhere/sub.ini
"$KSDIST" train elsewhere/sub.ini > gone.log 2>&1
check 4 "a missing test_path names the setting, the file and the rule" gone.log 2 $? \
  "\[data\] test_path = gone.csv (in elsewhere/sub.ini:8): not found (relative paths are taken from the config file's folder $dir/elsewhere, then the current directory $dir)"

# cells with no value: f2 empty on some rows, NA on one
awk -F, 'BEGIN { OFS = "," } NR > 1 && NR % 7 == 0 { $2 = "" } NR == 9 { $3 = "NA" } { print }' \
  kinds.csv > gaps.csv
"$KSDIST" train csv.ini --set data.path=gaps.csv > gaps.log 2>&1
check 5 "a missing value is an error naming [data] missing" gaps.log 1 $? \
  "gaps.csv:7: column 'f2': '' is a missing value; set \[data\] missing = skip"
"$KSDIST" train csv.ini --set data.path=gaps.csv --set data.missing=mean > mean.log 2>&1
status=$? a=$(value mean.log accuracy)
if [ $status -eq 0 ] && at_least "$a" 0.95; then
  echo "ok 6 - [data] missing = mean trains on the gaps (accuracy $a)"
else
  echo "not ok 6 - missing = mean: exit $status, accuracy '$a'"; sed 's/^/# /' mean.log | tail -10
fi
"$KSDIST" train csv.ini --set data.path=gaps.csv --set data.missing=skip > skip.log 2>&1
check 7 "[data] missing = skip drops those rows, saying how many" skip.log 0 $? \
  "gaps.csv: skipped 129 of 900 records with a missing value"

# a small noisy table shaped as scikit-learn's diabetes (398 training rows, 10 correlated
# features, a linear signal and noise of standard deviation 54, so no model can score
# below about 54 and the mean scores about 78): the example must not learn it by heart
awk 'BEGIN { srand (11); split ("0 -11 25 15 -30 18 5 8 30 4", w, " ");
  for (f = 0; f < 2; f++) {
    file = f ? "diab-test.csv" : "diab.csv"; n = f ? 1000 : 398;
    print "age,sex,bmi,bp,s1,s2,s3,s4,s5,s6,y" > file;
    for (i = 0; i < n; i++) { c = g(); y = 152; line = "";
      for (j = 1; j <= 10; j++) { x = sqrt (0.3) * c + sqrt (0.7) * g(); y += w[j] * x;
        line = line sprintf ("%.5f,", x) }
      printf "%s%.1f\n", line, y + 54 * g() > file } } }
  function g() { return sqrt (-2 * log (1 - rand ())) * cos (6.2831853 * rand ()) }'
"$KSDIST" train "$KS_SRCDIR/examples/csv-regression.ini" --set data.path=diab.csv \
  --set data.label=y --set data.test_path=diab-test.csv > diab.log 2>&1
r=$(value diab.log rmse)
if [ -n "$r" ] && awk -v r="$r" 'BEGIN { exit !(r < 62) }'; then
  echo "ok 8 - examples/csv-regression.ini generalises on a small noisy table (held-out RMSE $r; the noise 54)"
else
  echo "not ok 8 - examples/csv-regression.ini on a diabetes-like table: RMSE '$r' (the noise 54)"
  sed 's/^/# /' diab.log | tail -5
fi
