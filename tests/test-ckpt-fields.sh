#!/bin/sh
# Re-sealed checkpoint fields (issue 49, item 6): an attacker who edits a checkpoint's
# metadata and re-seals it (the files' SHA-256 and the optimizer's model_sha256,
# recomputed by tests/ckpt-reseal.py) passes the checksums; the numbers must still agree
# with what the writer makes: rng_state within what the step can reach, the optimizer's
# file of the weights' step, its optimizer_step one a step. (Before: rng_state = 2^64-1
# and optimizer_step = 5 beside step 30 resumed with exit 0.)
# TAP output. Needs KSDIST and KS_SRCDIR (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH # this build's ksdist finds its own plugins
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 is needed to re-seal a checkpoint"; exit 0; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-ckfields-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
export OPENBLAS_NUM_THREADS=1
. "$KS_SRCDIR/tests/tap.sh"
run="$KS_SRCDIR/examples/default.ini --set optim.warmup=0 --set log.level=error"
"$KSDIST" train $run --set train.steps=30 --set train.checkpoint_dir=base >/dev/null 2>err \
  || { not_ok "a 30-step run saves checkpoint-30"; tap_done; }
# edited NAME FILE KEY VALUE: a copy of the checkpoint with FILE's KEY set to VALUE,
# re-sealed, resumed to step 40 (its status in status, its output in err)
edited () {
  rm -rf "$1" && cp -r base "$1" \
    && python3 "$KS_SRCDIR/tests/ckpt-reseal.py" "$1/checkpoint-30" "$2" "$3" "$4" || return 1
  "$KSDIST" train $run --set train.steps=40 --set train.checkpoint_dir="$1" \
    --set train.resume=true >/dev/null 2>err
  status=$?
}

# the re-sealing is sound: a value the writer could have made resumes
edited legal model.safetensors rng_state 7
if [ $status -eq 0 ] && [ -d legal/checkpoint-40 ]; then ok "re-sealed rng_state 7 at step 30 resumes"
else not_ok "re-sealed rng_state 7 at step 30 resumes (status $status)"; fi

edited rng model.safetensors rng_state 18446744073709551615
check "rng_state 2^64-1 is refused, naming the file and the field" 1 \
  "rng/checkpoint-30/model.safetensors: metadata 'rng_state' is 18446744073709551615, more than step 30 can reach"
edited rng2 model.safetensors rng_state 1966051
check "rng_state one past 30 x 65535 is refused" 1 "model.safetensors: metadata 'rng_state' is 1966051"

edited opt5 optimizer.safetensors optimizer_step 5
check "optimizer_step 5 beside step 30 is refused, naming the file and the field" 1 \
  "opt5/checkpoint-30/optimizer.safetensors: metadata 'optimizer_step' is 5, but the weights beside it are of step 30"
edited opt31 optimizer.safetensors optimizer_step 31
check "optimizer_step 31 beside step 30 is refused" 1 "optimizer.safetensors: metadata 'optimizer_step' is 31"

edited ostep optimizer.safetensors step 29
check "the optimizer's file of step 29 beside weights of step 30 is refused" 1 \
  "ostep/checkpoint-30/optimizer.safetensors: metadata 'step' is 29, but the weights beside it"
tap_done
