#!/bin/sh
# Preemption (issue 38): Slurm and Kubernetes stop a job with SIGTERM and a grace period,
# a person with Ctrl-C (SIGINT). The run saves a checkpoint at the next step boundary
# (every worker at the same step), says where and the command that resumes, and exits
# 128 + the signal (143, 130); resuming finishes with the tensors of an uninterrupted
# run. A second signal stops at once. (Before: SIGTERM and SIGINT killed the run saying
# nothing and saving nothing; SIGTERM to the launcher exited 130.)
# TAP output. Needs KSDIST and KS_SRCDIR (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH # this build's ksdist finds its own plugins
ex=$KS_SRCDIR/examples
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-preempt-XXXXXX")
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
cd "$dir" || exit 1
export OPENBLAS_NUM_THREADS=1
. "$KS_SRCDIR/tests/tap.sh"
# tensors FILE: a checksum of a safetensors file's tensor bytes (after the header, whose
# metadata differs from save to save)
tensors () {
  h=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
  tail -c +$((9 + h)) "$1" | sha256sum | cut -d' ' -f1
}
# same A B: every .safetensors file of checkpoint directory A has B's tensors
same () {
  [ -d "$1" ] && [ -d "$2" ] || return 1
  for f in "$1"/*.safetensors; do
    [ -f "$f" ] && [ "$(tensors "$f")" = "$(tensors "$2/${f##*/}")" ] || return 1
  done
}
# A constant learning rate: the trajectory does not depend on [train] steps, so a run
# stopped anywhere and resumed to step N repeats an uninterrupted run of N steps.
# (No shell function around ksdist: the signals go to ksdist itself, not a subshell.)
mlp="$ex/default.ini --set optim.warmup=0 --set optim.schedule=constant --set train.log_every=1
  --set train.checkpoint_every=0"
# A shell starts a background job with SIGINT ignored, and ksdist leaves an ignored SIGINT
# ignored: GNU env (coreutils 8.31) restores it, as on a terminal.
if env --default-signal=INT true 2>/dev/null; then dfl="env --default-signal=INT"; else dfl=; fi
# start ARGS...: the run in the background (pid), its output in err; waits (60 s at most)
# until it has trained a few steps
start () {
  rm -f err # no earlier run's "step 3/"
  $dfl "$@" >err 2>&1 &
  pid=$!
  i=0
  while ! grep -q "step 3/" err 2>/dev/null && [ $i -lt 600 ] && kill -0 "$pid" 2>/dev/null; do
    sleep 0.1; i=$((i + 1)); done
}
# finish: waits for the run (120 s at most, then kills it); status
finish () {
  i=0
  while kill -0 "$pid" 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
  [ $i -lt 1200 ] || { echo "# the run did not stop within 120 s"; kill -9 "$pid"; }
  wait "$pid"
  status=$?
  pid=
}
# stopped_step: the step of err's first "stopped by" line
stopped_step () { sed -n 's/.*stopped by SIG[A-Z]* at step \([0-9]*\):.*/\1/p' err | head -n 1; }

# 1 and 2: SIGTERM and SIGINT to `ksdist train`: a checkpoint of the step, the message,
# 143 and 130; resuming to 20 steps later repeats an uninterrupted run.
for sig in TERM INT; do
  [ $sig = TERM ] && code=143 || code=130
  if [ $sig = INT ] && [ -z "$dfl" ]; then
    n=$((n + 1)); echo "ok $n # SKIP SIGINT: env --default-signal (coreutils 8.31) is missing"
    continue
  fi
  start "$KSDIST" train $mlp --set train.steps=1000000000 --set train.checkpoint_dir=ck$sig
  kill -$sig "$pid"
  finish
  check "SIG$sig: ksdist train exits $code, saying where it saved and how to resume" $code \
    "^ksdist: stopped by SIG$sig at step [0-9]*: saved checkpoint-[0-9]* in ck$sig; resume with: ksdist train .*default.ini .*--set train.resume=true$"
  s=$(stopped_step)
  if [ -n "$s" ] && [ -f "ck$sig/checkpoint-$s/model.safetensors" ] \
     && [ -z "$(ls -d ck$sig/checkpoint-* ck$sig/.*tmp* 2>/dev/null | grep -v "checkpoint-$s\$")" ]; then
    ok "SIG$sig: checkpoint-$s is there, whole, and nothing else"
  else
    echo "# $(find ck$sig 2>/dev/null | sort | tr '\n' ' ')"; not_ok "SIG$sig: checkpoint-$s is there"
  fi
  found=$s
  [ -n "$s" ] || s=1
  end=$((s + 20))
  "$KSDIST" train $mlp --set train.steps=$end --set train.checkpoint_dir=ck$sig --set train.resume=true \
    >err 2>&1
  status=$?
  # default.ini: batches of 128 of its 2048 training rows; whole epochs are counted
  e=$((s * 128 / 2048))
  case $e in 0) epochs= ;; 1) epochs=" (1 epoch over the training data done)" ;;
    *) epochs=" ($e epochs over the training data done)" ;; esac
  check "SIG$sig: the resumed run finishes, saying where it resumed" 0 \
    "resumed from ck$sig/checkpoint-$s at step $s$epochs\$"
  "$KSDIST" train $mlp --set train.steps=$end --set train.checkpoint_dir=ref$sig >err 2>&1
  # (without a stop's checkpoint the "resumed" run starts over: no evidence)
  if [ -n "$found" ] && same "ck$sig/checkpoint-$end" "ref$sig/checkpoint-$end"; then
    ok "SIG$sig: stopped at $s and resumed, step $end's tensors are an uninterrupted run's"
  else not_ok "SIG$sig: stopped and resumed, step $end's tensors are an uninterrupted run's"; fi
done

# 3. Without a checkpoint_dir: nothing saved, and it says so and how to set one.
start "$KSDIST" train $mlp --set train.steps=1000000000
kill -TERM "$pid"
finish
check "no checkpoint_dir: exits 143 saying nothing was saved and what to set" 143 \
  "stopped by SIGTERM at step [0-9]*: nothing was saved, as \[train\] checkpoint_dir is not set (set it, e.g. --set train.checkpoint_dir=DIR"

# 4. A second signal stops at once. Two `ksdist train` of one job (started by launch,
# but not told so: each acts on a second signal itself); worker B stopped (SIGSTOP), so
# that A, asked to stop by SIGTERM, waits at the step boundary for B's word and cannot
# have saved: it is still there a second later (before, SIGTERM killed it), and SIGINT
# then kills it at once (the launcher names "signal 2"); no checkpoint is written.
if [ -z "$dfl" ] || ! command -v pgrep >/dev/null; then
  n=$((n + 1)); echo "ok $n # SKIP a second signal: needs env --default-signal (coreutils 8.31) and pgrep"
else
start "$KSDIST" launch -n 2 -- env -u KS_LAUNCHER_PID --default-signal=INT \
  "$KSDIST" train $mlp --set train.steps=1000000000 --set train.checkpoint_dir=twice
launcher=$pid
set -- $(pgrep -P "$launcher")
a=${1:-0} b=${2:-0}
kill -STOP "$b"
kill -TERM "$a"
sleep 1
if kill -0 "$a" 2>/dev/null; then ok "SIGTERM: a worker waits at the step boundary for the others"
else not_ok "SIGTERM: a worker waits at the step boundary for the others"; fi
kill -INT "$a"
i=0
while kill -0 "$a" 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
kill -CONT "$b"
finish
if grep -q "was killed by signal 2 " err && [ -z "$(ls -d twice/checkpoint-* 2>/dev/null)" ]; then
  ok "a second signal stops at once (killed by SIGINT, nothing saved)"
else echo "# status $status"; not_ok "a second signal stops at once"; fi
fi

# 5. SIGTERM to `ksdist launch -n 2`: both workers save the same step and exit 143, and
# so does the launcher, naming no worker as failed; resuming repeats an uninterrupted run.
start "$KSDIST" launch -n 2 $mlp --set train.steps=1000000000 --set train.checkpoint_dir=ckl
kill -TERM "$pid"
finish
check "launch: the launcher exits 143" 143 "ksdist: launch: SIGTERM: the workers save a checkpoint"
s0=$(sed -n 's/^\[rank 0\] ksdist: stopped by SIGTERM at step \([0-9]*\): saved checkpoint-\1 in ckl; resume with: ksdist launch -n 2 .*/\1/p' err)
s1=$(sed -n 's/^\[rank 1\] ksdist: stopped by SIGTERM at step \([0-9]*\): saved checkpoint-\1 in ckl; resume with: ksdist launch -n 2 .*/\1/p' err)
if [ -n "$s0" ] && [ "$s0" = "$s1" ] && [ -f "ckl/checkpoint-$s0/model.safetensors" ] \
   && ! grep -q "launch: worker" err; then
  ok "launch: both workers stopped at step $s0, saved there, naming the launch command"
else echo "# steps '$s0' '$s1'"; not_ok "launch: both workers stopped at the same step, saved"; fi
found=$s0
[ -n "$s0" ] || s0=1
end=$((s0 + 20))
"$KSDIST" launch -n 2 $mlp --set train.steps=$end --set train.checkpoint_dir=ckl --set train.resume=true \
  >err 2>&1
status=$?
check "launch: the resumed job finishes" 0 "resumed from ckl/checkpoint-$s0 at step $s0"
"$KSDIST" launch -n 2 $mlp --set train.steps=$end --set train.checkpoint_dir=refl >err 2>&1
if [ -n "$found" ] && same "ckl/checkpoint-$end" "refl/checkpoint-$end"; then
  ok "launch: stopped at $s0 and resumed, step $end's tensors are an uninterrupted job's"
else not_ok "launch: stopped and resumed, step $end's tensors are an uninterrupted job's"; fi

# 5b. SIGTERM to one worker alone (a scheduler that signals processes, not the launcher):
# the job stops the same way, the launcher naming no failure (it said "worker 1 exited
# with status 143").
if command -v pgrep >/dev/null; then
start "$KSDIST" launch -n 2 $mlp --set train.steps=1000000000 --set train.checkpoint_dir=ckw
set -- $(pgrep -P "$pid")
kill -TERM "${2:-0}"
finish
s0=$(sed -n 's/^\[rank 0\] ksdist: stopped by SIGTERM at step \([0-9]*\): saved checkpoint-\1 in ckw; .*/\1/p' err)
s1=$(sed -n 's/^\[rank 1\] ksdist: stopped by SIGTERM at step \([0-9]*\): saved checkpoint-\1 in ckw; .*/\1/p' err)
if [ "$status" -eq 143 ] && [ -n "$s0" ] && [ "$s0" = "$s1" ] && [ -d "ckw/checkpoint-$s0" ] \
   && grep -q "ksdist: launch: worker [01] was stopped by SIGTERM" err && ! grep -q "exited with status" err; then
  ok "launch: SIGTERM to one worker: both save step $s0, exit 143, no failure named"
else echo "# status $status, steps '$s0' '$s1'"; not_ok "launch: SIGTERM to one worker stops the job, saved"; fi
else
  n=$((n + 1)); echo "ok $n # SKIP SIGTERM to one worker: needs pgrep"
fi

# 6. A second signal to the launcher kills the workers at once.
start "$KSDIST" launch -n 2 $mlp --set train.steps=1000000000 --set train.checkpoint_dir=twicel
kill -STOP "$pid"
kill -INT "$pid"
kill -TERM "$pid"
kill -CONT "$pid"
finish
# (which of the two the launcher takes first is GLib's choice)
if { [ "$status" -eq 130 ] || [ "$status" -eq 143 ]; } \
   && grep -q "ksdist: launch: SIG[A-Z]*, a second signal: killing the workers now" err; then
  ok "launch: a second signal kills the workers at once"
else echo "# status $status"; not_ok "launch: a second signal kills the workers at once"; fi

tap_done
