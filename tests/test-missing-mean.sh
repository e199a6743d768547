#!/bin/sh
# [data] missing = mean fills a held-out file's missing cells with the training rows'
# column means, not the held-out file's own: a regression whose held-out feature lies far
# from the training one scores the RMSE that `ksdist infer` gives on its rows filled by
# awk with the training file's mean (and not the one its own mean gives); the export keeps
# the means, so `ksdist infer --format csv` fills the same cells the same way. TAP
# output. Needs KSDIST (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-missing-mean-XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
echo "1..4"
# y = 2a + b + noise; a in [0, 1) for training, in [5, 6) held out, empty on every 4th row
awk 'BEGIN { srand (7); print "a,b,y";
  for (i = 0; i < 400; i++) { a = rand (); b = rand ();
    printf "%.5f,%.5f,%.5f\n", a, b, 2 * a + b + 0.1 * (rand () - 0.5) } }' > train.csv
awk 'BEGIN { srand (8); print "a,b,y";
  for (i = 0; i < 40; i++) { a = 5 + rand (); b = rand ();
    y = 2 * a + b + 0.1 * (rand () - 0.5);
    if (i % 4 == 0) printf ",%.5f,%.5f\n", b, y; else printf "%.5f,%.5f,%.5f\n", a, b, y } }' > test.csv
cat > r.ini <<'INI'
[model]
type = layers
net = out
loss = mse
[layer.out]
type = linear
size = 1
[data]
task = csv
path = train.csv
test_path = test.csv
label = y
missing = mean
[train]
steps = 300
batch = 40
export_dir = exp
[optim]
lr = 0.05
INI
"$KSDIST" train r.ini > train.log 2>&1
got=$(sed -n 's/^eval rmse \([0-9.]*\) (40 held-out samples)$/\1/p' train.log)
# the held-out rows filled with a mean computed here, their predictions from the export
rmse_with () { # MEAN [EXPORT]: the RMSE of the held-out rows whose empty a is MEAN
  tail -n +2 test.csv | awk -F, -v m="$1" '{ printf "%s %s\n", ($1 == "" ? m : $1), $2 }' > rows.txt
  "$KSDIST" infer "${2:-exp}" -i rows.txt > pred.txt 2> infer.log
  tail -n +2 test.csv | cut -d, -f3 | paste -d' ' pred.txt - \
    | awk '{ d = $1 - $2; s += d * d; n++ } END { if (n == 40) printf "%.4f", sqrt (s / n) }'
}
train_mean=$(tail -n +2 train.csv | awk -F, '{ s += $1 } END { printf "%.9g", s / NR }')
own_mean=$(tail -n +2 test.csv | awk -F, '$1 != "" { s += $1; n++ } END { printf "%.9g", s / n }')
want=$(rmse_with "$train_mean")
cp pred.txt pred-train.txt
other=$(rmse_with "$own_mean")
if [ -n "$got" ] && [ "$got" = "$want" ] && [ "$other" != "$want" ]; then
  echo "ok 1 - the held-out gaps take the training mean $train_mean: rmse $got (its own mean $own_mean would give $other)"
else
  echo "not ok 1 - eval rmse '$got'; with the training mean $train_mean '$want', with the file's own $own_mean '$other'"
  sed 's/^/# /' train.log
fi
"$KSDIST" infer exp --format csv -i test.csv > csv-pred.txt 2> csv.log
if [ $? -eq 0 ] && paste -d' ' csv-pred.txt pred-train.txt | awk '{ d = $1 - $2; if (d < 0) d = -d;
     if (d > 1e-5 * (1 + ($2 < 0 ? -$2 : $2))) bad++; n++ } END { exit !(n == 40 && !bad) }' \
   && grep -q "rmse $got (40 rows of test.csv)" csv.log; then
  echo "ok 2 - ksdist infer --format csv fills the same gaps with the export's training means (rmse $got)"
else
  echo "not ok 2 - infer --format csv on the gaps"; sed 's/^/# /' csv.log
fi
# a held-out file's whole column empty: filled too (its own mean would not exist)
awk -F, 'BEGIN { OFS = "," } NR > 1 { $1 = "" } { print }' test.csv > empty.csv
"$KSDIST" train r.ini --set data.test_path=empty.csv --set train.export_dir= > empty.log 2>&1
if [ $? -eq 0 ] && grep -q "^eval rmse [0-9.]* (40 held-out samples)$" empty.log; then
  echo "ok 3 - a held-out column with no value at all is filled by the training mean"
else
  echo "not ok 3 - an empty held-out column"; sed 's/^/# /' empty.log
fi

# training files split over 2 workers whose a differ (about 0.5 and 2.5): both workers
# fill the held-out gaps with the mean of every training row, so both print the RMSE
# the export's predictions give with that mean
awk 'NR == 1 || NR % 2 == 0' train.csv > half1.csv
awk -F, 'BEGIN { OFS = "," } NR == 1 { print; next } NR % 2 == 1 { $1 = sprintf ("%.5f", $1 + 2);
  $3 = sprintf ("%.5f", $3 + 4); print }' train.csv > half2.csv
"$KSDIST" launch -n 2 r.ini --set data.path='half*.csv' --set data.split_files=true \
  --set train.export_dir=exp2 > split.log 2>&1
all_mean=$(tail -q -n +2 half1.csv half2.csv | awk -F, '{ s += $1 } END { printf "%.9g", s / NR }')
want=$(rmse_with "$all_mean" exp2)
lines=$(grep -c "eval rmse $want (40 held-out samples)\$" split.log)
if [ -n "$want" ] && [ "$lines" = 2 ]; then
  echo "ok 4 - split_files: both workers fill with the mean of all training rows ($all_mean): rmse $want"
else
  echo "not ok 4 - split_files: want 2 lines of rmse '$want' (the mean $all_mean)"; sed 's/^/# /' split.log
fi
