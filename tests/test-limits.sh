#!/bin/sh
# Limits and bad values (issue 38): a configuration error exits 2 from every command that
# reads a configuration; what the loaded OpenBLAS cannot run is refused, never a hang;
# over-long values are cut in messages.
# TAP output. Needs KSDIST and KS_SRCDIR (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH # this build's ksdist finds its own plugins
ex=$KS_SRCDIR/examples
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-limits-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
export OPENBLAS_NUM_THREADS=1
. "$KS_SRCDIR/tests/tap.sh"

# A GPT checkpoint and an export for generate and infer, two steps long.
"$KSDIST" train "$ex/gpt-words.ini" --set model.context=8 --set model.width=16 \
  --set train.batch=4 --set train.steps=2 --set train.log_every=1 --set optim.warmup=0 \
  --set train.checkpoint_dir=ckpt --set train.checkpoint_every=2 --set train.export_dir=export \
  >/dev/null 2>err || { sed 's/^/# /' err; echo "1..0 # SKIP the tiny GPT did not train"; exit 0; }

# 1. [openblas] threads beyond what any OpenBLAS build runs (MAX_THREADS) is a configuration
# error, exit 2, from each command; it was 0 (OpenBLAS silently ran fewer).
big="--set openblas.threads=4096"
for cmd in config train "launch -n 2"; do
  timeout 120 "$KSDIST" $cmd "$ex/default.ini" $big --set train.steps=2 >/dev/null 2>err
  status=$?; check "$cmd: [openblas] threads = 4096 exits 2" 2 "\[openblas\] threads = 4096: "
done
timeout 120 "$KSDIST" generate ckpt --prompt "e" -n 2 $big >/dev/null 2>err
status=$?; check "generate: [openblas] threads = 4096 exits 2" 2 "\[openblas\] threads = 4096: "
timeout 120 "$KSDIST" infer export $big </dev/null >/dev/null 2>err
status=$?; check "infer: [openblas] threads = 4096 exits 2" 2 "\[openblas\] threads = 4096: "

# A configuration error found by a worker (launch runs no check before a PROGRAM) is the
# job's: launch exits 2, as the worker did (it said 1).
timeout 120 "$KSDIST" launch -n 2 -- "$KSDIST" config --set train.stpes=1 >/dev/null 2>err
status=$?; check "launch: a worker's configuration error exits 2" 2 "exited with status 2"

# The cosine shorter than its warmup, both set explicitly: exit 2 from each (train said 1).
cosine="--set optim.schedule=cosine --set optim.total_steps=50 --set optim.warmup=100"
for cmd in config train "launch -n 2"; do
  timeout 120 "$KSDIST" $cmd "$ex/default.ini" $cosine >/dev/null 2>err
  status=$?; check "$cmd: a cosine shorter than its warmup exits 2" 2 \
    "\[optim\] schedule = cosine needs total_steps (50) greater than warmup (100); set "
done

# 4. Under an address-space limit OpenBLAS's threads do not all fit (each reserves a
# 128 MB buffer): the first sgemm hung; now refused, naming the limit.
if (ulimit -v 4194304 && "$KSDIST" --version) >/dev/null 2>&1; then
  (ulimit -v 4194304; exec timeout 60 "$KSDIST" train "$ex/default.ini" --set train.steps=2 \
     --set openblas.threads=60) >/dev/null 2>err
  status=$?; check "threads = 60 under ulimit -v 4 GB refused, no hang" 2 \
    "\[openblas\] threads = 60: .*ulimit -v"
  (ulimit -v 4194304; OPENBLAS_NUM_THREADS=60 exec timeout 60 "$KSDIST" train \
     "$ex/default.ini" --set train.steps=2) >/dev/null 2>err
  status=$?; check "60 threads by default under ulimit -v 4 GB capped with a warning" 0 \
    "warning: openblas: 60 threads by default, but .*: running "
else
  ok "threads under ulimit -v # SKIP this build does not start under ulimit -v (ASan?)"
  ok "default threads under ulimit -v # SKIP as above"
fi

# 3. A value, key or group of 1 MB (a file) or 100 KB (the most one argument or variable
# can hold) is cut in the message: one line under 1 KB, where it was echoed whole.
# short NAME COMMAND...: exits 2 with one short stderr line that says how long it was
short () {
  name=$1; shift
  "$@" >/dev/null 2>err; status=$?
  bytes=$(wc -c <err); lines=$(wc -l <err)
  if [ "$status" -eq 2 ] && [ "$bytes" -lt 1024 ] && [ "$lines" -eq 1 ] \
     && grep -q "\.\.\. ([0-9]* bytes)" err; then ok "$name"; else
    echo "# status $status, $bytes bytes, $lines lines"; not_ok "$name"; fi
}
mb=$(head -c 1048576 /dev/zero | tr '\0' x)
kb=$(printf %s "$mb" | head -c 100000)
printf '[train]\noptimizer = %s\n' "$mb" >value.ini
printf '[comm]\n%s = 1\n' "$mb" >key.ini
printf '[%s]\nsteps = 1\n' "$mb" >group.ini
printf '[%s]\na = 1\na = 2\n' "$mb" >duplicate.ini
printf '[model]\nhidden = 64, %s\n' "$mb" >item.ini
for f in value key group duplicate item; do
  short "a 1 MB $f in a file" "$KSDIST" train $f.ini
done
short "a 100 KB value in KS_TRAIN_OPTIMIZER" env KS_TRAIN_OPTIMIZER="$kb" "$KSDIST" train
short "a 100 KB name KS_TRAIN_..." env KS_TRAIN_"$kb"=1 "$KSDIST" train
short "a 100 KB key in --set" "$KSDIST" train --set comm."$kb"=1
short "a 100 KB group in --set" "$KSDIST" config --set "$kb".key=1
short "a 100 KB list item in --set" "$KSDIST" train --set model.hidden="64, $kb"
short "a 100 KB path in --set" "$KSDIST" train --set train.export_dir=/etc/passwd/"$kb"

tap_done
