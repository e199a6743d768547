#!/bin/sh
# A training step in ksdist against the same step in PyTorch (Debian's python3-torch),
# with the same thread count for both, in one run. Prints ms/step, peak RSS, and the
# speed-up of ksdist over PyTorch (PyTorch ms / ksdist ms). From the build tree:
#   bench/run-vs-torch.sh mlp|gpt|conv [THREADS...]  (default: 1 and the number of cores)
#   mlp: MLP 784-1024-1024-10, batch 128, SGD
#   gpt: GPT vocab 65, 4 layers, 4 heads, width 128, batch 16, AdamW, at each context of
#        CONTEXTS (default 64; 512 is where attention dominates)
#   conv: Reptile's Omniglot model (28x28x1 images, 4 x conv 3x3/64/stride 2, batch norm,
#         ReLU; fc to 5), Adam, at each batch of BATCHES (default 5 25 100; Reptile's
#         inner batch is 5)
# DEVICE=cuda runs both on the GPU (ksdist's cuda plugin, torch's cuda device); PYTHON
# names the interpreter that has torch (default /usr/bin/python3). For gpt,
# GPT_SHAPE=LAYERS,HEADS,WIDTH,BATCH sets another shape (GPT-2 small: 12,12,768,8) and
# AMP=bf16|fp16 mixed precision (ksdist's [amp], torch.autocast).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "$(dirname "$0")" && pwd)
name=${1:?usage: bench/run-vs-torch.sh mlp|gpt|conv [THREADS...]}
shift
device=${DEVICE:-cpu} python=${PYTHON:-/usr/bin/python3}
case $device in
  cpu) backend=openblas ;;
  cuda) backend=cuda ;;
  *) echo "run-vs-torch.sh: DEVICE=$device; it is cpu or cuda" >&2; exit 2 ;;
esac
export KS_PLUGIN_PATH="$top/plugins/$backend/.libs:$top/plugins/optim/.libs" KS_PLUGIN_SYSTEM_PATH=
have_torch=yes
"$python" -c "import torch" 2>/dev/null || have_torch=no
[ $# -gt 0 ] || set -- 1 "$(nproc)"
# conv takes the batch as its third argument, gpt the context; mlp has its built in ("-").
case $name in
  conv) batches=${BATCHES:-5 25 100} size=batch ;;
  gpt) batches=${CONTEXTS:-64} size=context ;;
  *) batches=- size=- ;;
esac
printf "# %s on %s\n# %7s %7s %12s %10s %12s %10s %8s\n" "$name" \
  "$device" threads $size "ksdist ms" "RSS MiB" "torch ms" "RSS MiB" speedup
for t in "$@"; do
  for b in $batches; do
    arg=${b#-}  # an unquoted empty $arg passes no argument
    set -- $(OPENBLAS_NUM_THREADS=$t "$top/bench/bench-$name" "$t" "$backend" $arg)
    ks_ms=$1 ks_rss=$2
    if [ $have_torch = yes ]; then
      set -- $(OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t "$python" "$src/bench-$name-torch.py" "$t" "$device" $arg) - -
      if [ "$1" = - ]; then # torch failed (its error is above): fp16 autocast on a CPU, say
        printf "  %7s %7s %12s %10s %12s %10s %8s\n" "$t" "$b" "$ks_ms" "$ks_rss" - - "(torch failed)"
      else
        printf "  %7s %7s %12s %10s %12s %10s %8.2f\n" "$t" "$b" "$ks_ms" "$ks_rss" "$1" "$2" \
          "$(awk -v a="$1" -v b="$ks_ms" 'BEGIN { print a / b }')"
      fi
    else
      printf "  %7s %7s %12s %10s %12s %10s %8s\n" "$t" "$b" "$ks_ms" "$ks_rss" "-" "-" \
        "(no python3-torch)"
    fi
  done
done
