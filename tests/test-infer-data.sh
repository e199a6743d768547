#!/bin/sh
# ksdist infer on the data a model was trained from, read as training read it: an image
# folder and image files decoded to the export's height, width and channels and
# standardised by its moments (scored as the training-time evaluation scored them; an
# IDX-trained CNN gives on the same digits as PNG files the logits it gives on the IDX
# files, whose bytes are read without gdk-pixbuf); a CSV file with or without its label
# column (told by its header or its width), and a clear error where the columns fit
# neither. TAP output. Needs KSDIST (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-infer-data-XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
echo "1..13"
ok () { echo "ok $1 - $2"; }
not_ok () { n=$1 what=$2; shift 2; echo "not ok $n - $what"; for f in "$@"; do sed 's/^/# /' "$f"; done; }

# --- CSV: rows with and without the label column -------------------------------------
awk 'BEGIN { srand (3); print "f1,f2,f3,kind"; split ("alpha beta gamma", names, " ");
  for (i = 0; i < 300; i++) { k = i % 3; line = "";
    for (j = 0; j < 3; j++) line = line sprintf ("%.4f,", 2 * k + j + rand () - 0.5);
    print line names[k + 1] } }' > kinds.csv
cat > c.ini <<'INI'
[model]
type = mlp
hidden = 8
[data]
task = csv
path = kinds.csv
label = kind
normalize = standard
[train]
steps = 60
batch = 32
export_dir = cexp
INI
"$KSDIST" train c.ini > c.log 2>&1
"$KSDIST" infer cexp --format csv -i kinds.csv --argmax > with.txt 2> with.log
cut -d, -f1-3 kinds.csv > feat.csv
tail -n +2 feat.csv > feat-bare.csv
awk -F, '{ print $4 "," $1 "," $2 "," $3 }' kinds.csv > label-first.csv
n=1
for f in feat.csv feat-bare.csv; do
  "$KSDIST" infer cexp --format csv -i $f --argmax > got.txt 2> got.log
  if [ $? -eq 0 ] && [ "$(wc -l < with.txt)" -eq 300 ] && cmp -s got.txt with.txt; then
    ok $n "$f (features only) gives the classes of the rows with their label"
  else
    not_ok $n "$f: features only" got.log with.log
  fi
  n=$((n + 1))
done
"$KSDIST" infer cexp --format csv -i label-first.csv --argmax > got.txt 2> got.log
if cmp -s got.txt with.txt && grep -q "accuracy .* rows of label-first.csv" got.log \
   && [ "$(sed -n 's/.*accuracy \([0-9.]*\).*/\1/p' got.log)" = "$(sed -n 's/.*accuracy \([0-9.]*\).*/\1/p' with.log)" ]; then
  ok 3 "a header naming the label column first: that column is the label (scored)"
else
  not_ok 3 "label column first" got.log with.log
fi
printf 'a,b,c\n1,2,3\n' > other.csv
"$KSDIST" infer cexp --format csv -i other.csv > /dev/null 2> other.log
rc=$?
printf '1,2\n3,4\n' > narrow.csv
"$KSDIST" infer cexp --format csv -i narrow.csv > /dev/null 2> narrow.log
rc2=$?
# a wide header is named by its first difference and counts, not all its columns listed
awk 'BEGIN { printf "f1,f2,x"; for (i = 0; i < 800; i++) printf ",p%d", i; print ""; }' > wide.csv
"$KSDIST" infer cexp --format csv -i wide.csv > /dev/null 2> wide.log
rc3=$?
if [ $rc -eq 2 ] && grep -q "other.csv: its header's 3 columns are neither this model's 3 features nor them and one label column (column 1 of other.csv is 'a', the model's feature 1 is 'f1'): name the columns as the training file did" other.log \
   && [ $rc2 -eq 2 ] && grep -q "narrow.csv: 2 columns, but the model of cexp reads 3 features a row" narrow.log \
   && [ $rc3 -eq 2 ] && grep -q "wide.csv: its header's 803 columns are neither this model's 3 features nor them and one label column (column 3 of wide.csv is 'x', the model's feature 3 is 'f3')" wide.log \
   && [ "$(wc -c < wide.log)" -lt 400 ]; then
  ok 4 "columns that fit neither the features nor them and a label: one message naming where they differ"
else
  not_ok 4 "columns that fit neither" other.log narrow.log wide.log
fi

printf 'f1,f2,f3\n1,,3\n' > gap.csv
"$KSDIST" infer cexp --format csv -i gap.csv > /dev/null 2> gap.log
rc=$?
if [ $rc -eq 1 ] && grep -q "gap.csv:2: column 'f2': '' is a missing value; the model of cexp was trained with \[data\] missing = error, so infer does not fill it" gap.log; then
  ok 5 "a missing cell for a model trained without [data] missing: what infer can do"
else
  not_ok 5 "a missing cell (status $rc)" gap.log
fi

# --- images --------------------------------------------------------------------------
if ! "$KSDIST" datagen digits png --format folder --train 600 --test 100 > gen.log 2>&1 \
   || ! "$KSDIST" datagen digits idx --train 600 --test 100 >> gen.log 2>&1; then
  for n in 6 7 8 9 10 11; do echo "ok $n # SKIP ksdist datagen digits failed: $(head -1 gen.log)"; done
  exit 0
fi
small="--set layer.conv1.filters=4 --set layer.conv2.filters=4 --set train.steps=60"
"$KSDIST" train "$KS_SRCDIR/examples/image-folder.ini" $small --set data.path=png/train \
  --set data.test_path=png/t10k --set data.normalize=standard --set train.export_dir=fexp \
  > f.log 2>&1
want=$(sed -n 's/^eval accuracy \([0-9.]*\) (100 held-out samples)$/\1/p' f.log)
"$KSDIST" infer fexp --format image_folder -i png/t10k --argmax > f-classes.txt 2> f-infer.log
got=$(sed -n 's/.*accuracy \([0-9.]*\) ([0-9]* of 100 rows of png\/t10k)$/\1/p' f-infer.log)
if [ -n "$want" ] && [ "$got" = "$want" ] && grep -q "standardised by the training rows' moments" f-infer.log; then
  ok 6 "--format image_folder scores the held-out folder as training's evaluation did ($got)"
else
  not_ok 6 "image_folder: '$got' against the training eval '$want'" f.log f-infer.log
fi
# the images of class 3 given as files: the lines the folder gives them (one row a batch,
# so that each row runs alone in both)
"$KSDIST" infer fexp --format image_folder -i png/t10k -b 1 > f-all.txt 2> /dev/null
first=$(ls png/t10k/[012]/*.png | wc -l)
count=$(ls png/t10k/3/*.png | wc -l)
sed -n "$((first + 1)),$((first + count))p" f-all.txt > f-three.txt
"$KSDIST" infer fexp -b 1 png/t10k/3/*.png > files.txt 2> files.log
"$KSDIST" infer fexp -b 1 --format image -i "$(ls png/t10k/3/*.png | head -1)" > one.txt 2>> files.log
if [ "$count" -gt 0 ] && [ "$(wc -l < files.txt)" -eq "$count" ] && cmp -s files.txt f-three.txt && [ "$(head -1 f-three.txt)" = "$(cat one.txt)" ]; then
  ok 7 "image files given after EXPORT (and one with -i) give the folder's logits ($count files)"
else
  not_ok 7 "image files against the folder" files.log
fi
# a CNN trained on the IDX files: the PNG copies of its held-out digits give its logits on
# the IDX files (pixel / 255 read without gdk-pixbuf), row for row
"$KSDIST" train "$KS_SRCDIR/examples/cnn-idx.ini" $small --set layer.hidden.size=16 \
  --set data.path=idx --set train.export_dir=iexp > i.log 2>&1
"$KSDIST" infer iexp --format idx -i idx -b 1 > i-idx.txt 2> i.log
"$KSDIST" infer iexp --format image_folder -i png/t10k -b 1 > i-png.txt 2> i-png.log
# the folder's rows are in class order, each file named by its index in the IDX file
ls png/t10k/*/*.png | sort -t/ -k3,3 -k4,4 | sed 's|.*/0*\([0-9]\)|\1|; s|\.png$||' \
  | paste -d' ' - i-png.txt | sort -n -k1,1 | cut -d' ' -f2- > i-png-sorted.txt
if [ "$(wc -l < i-idx.txt)" -eq 100 ] && cmp -s i-png-sorted.txt i-idx.txt; then
  ok 8 "an IDX-trained CNN on the same digits as PNG files: the IDX logits, row for row"
else
  not_ok 8 "IDX CNN on PNG files" i.log i-png.log
fi
# errors: images for a model of rows, a model of 1 channel given the 3-channel training
"$KSDIST" infer cexp png/t10k/3/*.png > /dev/null 2> e1.log
rc=$?
if [ $rc -eq 2 ] && grep -q "cexp: trained on rows of shape \[3\], not images" e1.log; then
  ok 9 "images for a model of CSV rows: refused, naming the shape"
else
  not_ok 9 "images for a CSV model (status $rc)" e1.log
fi
mkdir -p bad/a bad/b && cp png/t10k/3/*.png bad/a && cp png/t10k/4/*.png bad/b
"$KSDIST" infer iexp --format image_folder -i bad --argmax > /dev/null 2> e2.log
rc=$?
if [ $rc -eq 2 ] && grep -q "class folder 'a' is not a class id: the model was trained on numbered classes" e2.log; then
  ok 10 "class folders not named by the numbered classes of the model: refused"
else
  not_ok 10 "class folders named a, b (status $rc)" e2.log
fi
"$KSDIST" infer iexp --format image_folder png/t10k/3/x.png > /dev/null 2> e3.log
rc=$?
"$KSDIST" infer iexp --format image -i png/t10k/3/none.png > /dev/null 2> e4.log
rc4=$?
if [ $rc -eq 2 ] && grep -q "infer: --format is text, csv, npy, idx, image_folder or image" e3.log \
   && [ $rc4 -eq 2 ] && grep -q "png/t10k/3/none.png: no such file" e4.log; then
  ok 11 "files after EXPORT with another format, a missing image: one message each"
else
  not_ok 11 "usage errors ($rc, $rc4)" e3.log e4.log
fi

# Rows of some of the classes: scored by the training's class ids, not their own sorted
# set's (the rows of beta and gamma alone were scored as 0 and 1, against the model's 1
# and 2); a class training never saw is refused
awk -F, 'NR == 1 || $4 != "alpha"' kinds.csv > bg.csv
"$KSDIST" infer cexp --format csv -i bg.csv --argmax > /dev/null 2> bg.log
tail -n +2 kinds.csv > rows.csv
want=$(paste -d, rows.csv with.txt | awk -F, '$4 != "alpha" { n++; if ($4 == $5) r++ }
  END { printf "accuracy %.4f (%d of %d rows of bg.csv)", r / n, r, n }')
{ head -n 1 kinds.csv; echo "1,2,3,delta"; } > delta.csv
"$KSDIST" infer cexp --format csv -i delta.csv > /dev/null 2> delta.log
rc=$?
if grep -qF "$want" bg.log && [ $rc -eq 2 ] \
   && grep -q "delta.csv: class 'delta' is not one the model of cexp was trained on (alpha, beta, gamma)" delta.log; then
  ok 12 "rows of two of the three classes are scored by the training's ids ($want); an unknown class is refused"
else
  echo "# want: $want"; not_ok 12 "class names against the training's" bg.log delta.log
fi

# A headerless file whose first row has an empty cell: that row is data, not a header
# (it was dropped, exit 0)
printf ',1.5,0.5\n3.2,3.1,0.4\n0.1,0.2,0.3\n' > gap-bare.csv
"$KSDIST" infer cexp --format csv -i gap-bare.csv > /dev/null 2> gap-bare.log
rc=$?
if [ $rc -eq 1 ] && grep -q "gap-bare.csv:1: column 0: '' is a missing value" gap-bare.log; then
  ok 13 "a first row with an empty cell is read as a data row"
else
  not_ok 13 "a first row with an empty cell (status $rc)" gap-bare.log
fi
