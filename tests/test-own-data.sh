#!/bin/sh
# A user's own data: rows in files the test writes itself (never downloaded), trained by
# `ksdist train` end to end: a CSV classifier with a header and categorical labels, a
# regression on a CSV (loss = mse, RMSE near the noise), a gzipped TSV; malformed files
# refused naming the file and line, settings that do not go together refused by `ksdist
# config`. TAP output. Needs KSDIST (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-own-data-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
echo "1..18"

# three classes of 4 features, separable: class k centred on k, named
awk 'BEGIN { srand (3); print "f1,f2,f3,f4,kind";
  split ("alpha beta gamma", names, " ");
  for (i = 0; i < 900; i++) { k = i % 3; line = "";
    for (j = 0; j < 4; j++) line = line sprintf ("%.4f,", 2 * k + j + rand () - 0.5);
    print line names[k + 1] } }' > kinds.csv
cat > csv.ini <<'INI'
[model]
type = mlp
hidden = 16
activation = relu
[data]
task = csv
path = kinds.csv
label = kind
normalize = standard
[train]
steps = 200
batch = 32
[optim]
lr = 0.01
INI
value () { sed -n "s/.*eval $2 \([0-9.]*\) .*/\1/p" "$1" | tail -1; }
at_least () { [ -n "$1" ] && awk -v a="$1" -v m="$2" 'BEGIN { exit !(a >= m) }'; }
at_most () { [ -n "$1" ] && awk -v a="$1" -v m="$2" 'BEGIN { exit !(a <= m) }'; }

"$KSDIST" train csv.ini > csv.log 2>&1
a=$(value csv.log accuracy)
if at_least "$a" 0.97; then
  echo "ok 1 - a CSV with a header and named classes trains (held-out accuracy $a)"
else
  echo "not ok 1 - CSV classifier: accuracy '$a'"; sed 's/^/# /' csv.log
fi

# y = 3 a - 2 b + 1 + noise of standard deviation 0.1
awk 'BEGIN { srand (5); print "a,b,y";
  for (i = 0; i < 2000; i++) { a = 4 * rand () - 2; b = 4 * rand () - 2;
    n = sqrt (-2 * log (1 - rand ())) * cos (6.2831853 * rand ());
    printf "%.5f,%.5f,%.5f\n", a, b, 3 * a - 2 * b + 1 + 0.1 * n } }' > line.csv
cat > reg.ini <<'INI'
[model]
type = layers
net = hidden, out
loss = mse
[layer.hidden]
type = linear
size = 32
activation = tanh
[layer.out]
type = linear
size = 1
[data]
task = csv
path = line.csv
[train]
steps = 800
batch = 64
[optim]
lr = 0.01
INI
"$KSDIST" train reg.ini > reg.log 2>&1
r=$(value reg.log rmse)
if at_most "$r" 0.3; then
  echo "ok 2 - a regression on a CSV learns the line (held-out RMSE $r, noise 0.1)"
else
  echo "not ok 2 - CSV regression: RMSE '$r'"; sed 's/^/# /' reg.log
fi

# the same classes as a gzipped TSV without a header, numeric labels in column 0
awk -F, 'NR > 1 { k = ($5 == "alpha") ? 0 : ($5 == "beta") ? 1 : 2;
  printf "%d\t%s\t%s\t%s\t%s\n", k, $1, $2, $3, $4 }' kinds.csv | gzip > kinds.tsv.gz
"$KSDIST" train csv.ini --set data.path=kinds.tsv.gz --set data.label=0 > tsv.log 2>&1
a=$(value tsv.log accuracy)
if at_least "$a" 0.97; then
  echo "ok 3 - a gzipped TSV with the label in column 0 trains (accuracy $a)"
else
  echo "not ok 3 - gzipped TSV: accuracy '$a'"; sed 's/^/# /' tsv.log
fi

# the held-out rows from a file of their own
head -1 kinds.csv > test.csv && sed -n '2,100p' kinds.csv >> test.csv
"$KSDIST" train csv.ini --set data.test_path=test.csv > test.log 2>&1
a=$(value test.log accuracy)
if at_least "$a" 0.97 && grep -q "eval accuracy [0-9.]* (99 held-out" test.log; then
  echo "ok 4 - [data] test_path's rows are the held-out ones (accuracy $a on all 99)"
else
  echo "not ok 4 - test_path: '$(grep eval test.log)'"; sed 's/^/# /' test.log
fi

# malformed rows: the error names the file and line
# bad data exits 1, a setting to change 2
failing () { # number, description, expected text, expected exit status, arguments...
  n=$1 what=$2 want=$3 code=$4
  shift 4
  "$KSDIST" "$@" > err.log 2>&1
  status=$?
  if [ $status -eq "$code" ] && grep -q -- "$want" err.log; then
    echo "ok $n - $what (exit $status): $(grep -- "$want" err.log | head -1 | cut -c1-160)"
  else
    echo "not ok $n - $what: exit $status, wanted $code and '$want'"; sed 's/^/# /' err.log
  fi
}
sed '7s/,[^,]*$//' kinds.csv > short.csv
failing 5 "a short row" "short.csv:7" 1 train csv.ini --set data.path=short.csv
sed '9s/^[^,]*/abc/' kinds.csv > word.csv
failing 6 "a word among the numbers" "word.csv:9" 1 train csv.ini --set data.path=word.csv
failing 7 "a CSV task without a path" "\[data\] task = csv reads \[data\] path" 2 config csv.ini --set data.path=
sed '/^path/d' reg.ini > points.ini
failing 8 "mse on classes from a generator" "\[model\] loss = mse needs values" 2 config points.ini --set data.task=spirals

# ksdist infer on an export of a standardised model takes the file's raw values
"$KSDIST" train csv.ini --set train.export_dir=export > export.log 2>&1
sed -n '2,61p' kinds.csv | cut -d, -f1-4 > rows.txt
sed -n '2,61p' kinds.csv | cut -d, -f5 > want.txt
"$KSDIST" infer export --argmax -i rows.txt > got.txt 2> infer.log
right=$(paste -d' ' got.txt want.txt | awk '$1 == $2 { n++ } END { print n + 0 }')
if [ "$right" -ge 57 ] && grep -q "standardised by the training rows' moments" infer.log; then
  echo "ok 9 - ksdist infer standardises raw CSV rows as training did and names their classes ($right of 60 right)"
else
  echo "not ok 9 - infer on raw rows: $right of 60 right"; sed 's/^/# /' export.log infer.log
fi

# a folder of texts for the character-level GPT: the files joined in name order
mkdir texts
for f in a b c; do awk -v f=$f 'BEGIN { for (i = 0; i < 300; i++) printf "%s line %d of the text\n", f, i }' > texts/$f.txt; done
bytes=$(cat texts/*.txt | wc -c)
gpt="$KS_SRCDIR/examples/gpt-words.ini --set data.path=texts --set train.steps=5 --set model.context=8 --set model.width=16 --set train.batch=4 --set optim.clip_norm=0"
"$KSDIST" train $gpt > texts.log 2>&1
if grep -q "on texts ($bytes bytes)" texts.log && grep -q "^eval loss" texts.log; then
  echo "ok 10 - a folder of text files is one corpus ($bytes bytes) for the GPT"
else
  echo "not ok 10 - a folder of texts"; sed 's/^/# /' texts.log
fi
mkdir texts/more
failing 11 "a folder inside the texts' folder" "texts/more is not a text file (a folder)" 2 train $gpt

# a CNN of the config on 28 x 28 digits in MNIST's IDX files
if ! "$KSDIST" datagen digits digits --train 2000 --test 500 > datagen.log 2>&1; then
  for n in 12 13 14 15; do echo "ok $n # SKIP ksdist datagen digits failed: $(head -1 datagen.log)"; done
  exit 0
fi
cnn="$KS_SRCDIR/examples/cnn-idx.ini --set layer.conv1.filters=8 --set layer.conv2.filters=8 --set layer.hidden.size=32 --set train.batch=32"
"$KSDIST" train $cnn --set train.steps=150 --set train.export_dir=cnn-export > cnn.log 2>&1
a=$(value cnn.log accuracy)
if at_least "$a" 0.9; then
  echo "ok 12 - the CNN of examples/cnn-idx.ini learns the IDX digits (held-out accuracy $a)"
else
  echo "not ok 12 - CNN on IDX: accuracy '$a'"; sed 's/^/# /' cnn.log
fi
mkdir gz && for f in digits/*; do gzip -c "$f" > "gz/$(basename "$f").gz"; done
"$KSDIST" train $cnn --set train.steps=150 --set data.path=gz > gz.log 2>&1
if [ -n "$a" ] && [ "$(grep '^eval' gz.log)" = "$(grep '^eval' cnn.log)" ]; then
  echo "ok 13 - the same files gzipped train the same ($(grep '^eval' gz.log))"
else
  echo "not ok 13 - gzipped IDX: '$(grep '^eval' gz.log)'"; sed 's/^/# /' gz.log
fi
if [ ! -e "$KS_BUILD_PLUGINS/gloo/.libs/gloo.so" ]; then
  echo "ok 14 # SKIP the gloo plugin was not built"
else
  "$KSDIST" launch -n 2 $cnn --set train.steps=20 --set pipeline.stages=2 --set pipeline.micro_batches=2 > pp.log 2>&1
  if [ $? -eq 0 ] && grep -q "eval accuracy" pp.log; then
    echo "ok 14 - the CNN cut into two pipeline stages trains ($(grep 'eval accuracy' pp.log | head -1))"
  else
    echo "not ok 14 - CNN pipeline"; sed 's/^/# /' pp.log
  fi
fi
cp -r digits bad && printf '\000\000\010\002' | dd of=bad/train-images-idx3-ubyte conv=notrunc 2>/dev/null
failing 15 "an IDX file of the wrong magic" "train-images-idx3-ubyte: magic 0x00000802" 1 train $cnn --set data.path=bad

# ksdist infer reads the training formats: the export scored on the IDX folder's t10k files
"$KSDIST" infer cnn-export --format idx -i digits --argmax > classes.txt 2> infer.log
a=$(sed -n 's/.*accuracy \([0-9.]*\) (\([0-9]*\) of 500 rows.*/\1/p' infer.log)
if at_least "$a" 0.9 && [ "$(wc -l < classes.txt)" -eq 500 ]; then
  echo "ok 16 - ksdist infer --format idx runs and scores the 500 held-out images (accuracy $a)"
else
  echo "not ok 16 - infer --format idx: '$a'"; sed 's/^/# /' infer.log
fi

# an image folder (torchvision's layout): one folder of PNGs per class
if ! "$KSDIST" datagen digits png --format folder --train 1000 --test 200 > png.log 2>&1; then
  echo "ok 17 # SKIP ksdist datagen digits --format folder failed: $(head -1 png.log)"
  echo "ok 18 # SKIP ksdist datagen digits --format folder failed"
  exit 0
fi
folder="$KS_SRCDIR/examples/image-folder.ini --set data.path=png/train --set data.test_path=png/t10k --set train.batch=32"
"$KSDIST" train $folder --set train.steps=150 > folder.log 2>&1
a=$(value folder.log accuracy)
if at_least "$a" 0.8; then
  echo "ok 17 - examples/image-folder.ini learns the PNG folders (held-out accuracy $a)"
else
  echo "not ok 17 - image folder: accuracy '$a'"; sed 's/^/# /' folder.log
fi
first=$(ls png/train/3 | head -1)
head -c 100 "png/train/3/$first" > cut.png && mv cut.png "png/train/3/$first"
failing 18 "a PNG cut short in a class folder" "png/train/3/$first: truncated" 1 train $folder --set train.steps=1
