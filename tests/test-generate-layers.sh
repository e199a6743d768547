#!/bin/sh
# ksdist generate runs the export of a layer-list language model trained on a text (with
# a position layer, and without one): each character it adds at temperature 0 is the
# argmax of the logits `ksdist infer` gives for the window so far, at its last position;
# a layer list's checkpoint is refused with a message saying to give its export. TAP
# output. Needs KSDIST (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-generate-layers-XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
echo "1..3"
awk 'BEGIN { srand (5); split ("alpha beta gamma delta epsilon zeta eta theta", w, " ");
  for (i = 0; i < 3000; i++) print w[int (rand () * 8) + 1] }' > text.txt
cat > lm.ini <<'INI'
[model]
type = layers
net = embed, position, block, norm, head
context = 16
[layer.embed]
type = embedding
size = 32
[layer.position]
type = position
[layer.block]
type = transformer
heads = 2
[layer.norm]
type = layer_norm
[layer.head]
type = linear
tie = embed
[data]
task = text
path = text.txt
[train]
steps = 100
batch = 16
checkpoint_dir = ck
checkpoint_every = 100
export_dir = ex
[optim]
lr = 0.01
INI
# the vocabulary: the text's bytes sorted, newline first
letters=$(tr -d '\n' < text.txt | fold -w1 | sort -u | tr -d '\n')
# check N WHAT EXPORT FEEDS: the first 3 characters generated after "be" are infer's argmax
check () {
  n=$1 what=$2 export=$3 feeds=$4
  "$KSDIST" generate "$export" --prompt "be" -n 3 > gen.txt 2> gen.log
  status=$?
  got=$(head -c 5 gen.txt | tr '\n' '|')
  want=be
  for k in 1 2 3; do
    # the window so far as token ids (newline 0, letter i at i), padded with 0 to 16, and
    # with positions 0 to 15 when the export feeds them
    printf '%s' "$want" | tr '|' '\n' | awk -v letters="$letters" -v feeds="$feeds" '
      BEGIN { RS = "\001" } { n = length ($0); line = "";
        for (i = 1; i <= 16; i++) { c = substr ($0, i, 1);
          t = (i > n) ? 0 : (c == "\n" ? 0 : index (letters, c)); line = line t " " }
        if (feeds == 2) for (i = 0; i < 16; i++) line = line i " ";
        print line; print n > "len.txt" }' > row.txt
    "$KSDIST" infer "$export" -i row.txt > logits.txt 2>> gen.log
    len=$(cat len.txt)
    next=$(awk -v len="$len" -v v="$(( ${#letters} + 1 ))" -v letters="$letters" '{
      best = (len - 1) * v + 1;
      for (j = 1; j < v; j++) if ($((len - 1) * v + 1 + j) > $best) best = (len - 1) * v + 1 + j;
      k = best - (len - 1) * v - 1; printf "%s", k == 0 ? "|" : substr (letters, k, 1) }' logits.txt)
    want="$want$next"
  done
  if [ $status -eq 0 ] && [ "$got" = "$want" ]; then
    echo "ok $n - $what: 'be' + 3 characters, each infer's argmax ($got)"
  else
    echo "not ok $n - $what: generate gave '$got', infer's argmax '$want' (status $status)"
    sed 's/^/# /' gen.log
  fi
}
"$KSDIST" train lm.ini > train.log 2>&1
check 1 "a layer list with a position layer" ex 2
sed -e 's/^net = embed, position, block/net = embed, block/' -e '/^\[layer.position\]/,+1d' \
  lm.ini > lm1.ini
"$KSDIST" train lm1.ini --set train.export_dir=ex1 --set train.checkpoint_dir= > train1.log 2>&1
check 2 "a layer list without one (tokens alone)" ex1 1
"$KSDIST" generate ck --prompt "be" > /dev/null 2> ck.log
status=$?
if [ $status -eq 2 ] && grep -q "is a checkpoint of a layer list (\[model\] type = layers): \`ksdist generate\` runs a layer list's export" ck.log; then
  echo "ok 3 - a layer list's checkpoint: refused, saying to give its export"
else
  echo "not ok 3 - a layer list's checkpoint (status $status)"; sed 's/^/# /' ck.log
fi
