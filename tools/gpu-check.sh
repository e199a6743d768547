#!/bin/sh
# The GPU checks in one device-tool call (the GPU machine has CUDA, NCCL and PyTorch but
# none of ksdist's Debian libraries, and nothing can be fetched there).
#
# 1. Here, in the build tree (configured with CUDA: the summary says "cuda yes"):
#      tools/gpu-check.sh pack
#    builds everything (tests and benchmarks too) and copies the Debian libraries the
#    binaries load (GLib, OpenBLAS, Gloo, ZeroMQ, ...) into .gpu/lib (.gitignore has it).
# 2. Through the device tool, from the repository root:
#      run (command = "sh tools/gpu-check.sh run", carry = [".gpu"])
#    runs the GPU tests (test-cuda, test-nccl, test-amp), trains the default MLP, a GPT
#    and the addition task on the GPU and on the CPU, checks a resumed GPU run against an
#    unbroken one, and runs the benchmarks against PyTorch eager on the same GPU. Logs
#    and a summary come back in $OUT; the command exits non-zero when a check failed.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

pack () {
  set -e
  for so in plugins/cuda/.libs/cuda.so plugins/nccl/.libs/nccl.so; do
    [ -f "$so" ] || { echo "gpu-check: $so is missing: configure found no CUDA or NCCL" >&2; exit 2; }
  done
  make -j"$(nproc)" >/dev/null
  make -j"$(nproc)" check TESTS= >/dev/null # the test programs, not run
  rm -rf .gpu && mkdir -p .gpu/lib
  echo "$top" >.gpu/build-dir # libtool's wrappers name it: the run links it there
  # the binaries without objects, and every library they load except the C library's
  # own and CUDA's (the GPU machine has those, matching its driver), each compressed:
  # the device tool carries 64 MiB
  binaries=$(ls -d libksdist/.libs/*.so* plugins/*/.libs/*.so tools/ksdist tools/.libs/* \
               tests/.libs/* bench/.libs/* 2>/dev/null | grep -v '\.o$')
  wrappers=$(for f in tests/test-* bench/bench-* bench/*.sh bench/*.py; do
               if [ -f "$f" ] && [ -x "$f" ]; then echo "$f"; fi; done)
  for f in $binaries; do
    if [ -f "$f" ]; then ldd "$f" 2>/dev/null || true; fi
  done | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u | while read -r lib; do
    case $lib in
      */libc.so*|*/libm.so*|*/libdl.so*|*/libpthread.so*|*/librt.so*|*/ld-linux*) ;;
      */libcuda*|*/libcublas*|*/libnccl*|/usr/local/cuda*|*/libksdist.so*) ;;
      *) cp -L "$lib" .gpu/lib/ ;;
    esac
  done
  tar -cJf .gpu/libs.tar.xz -C .gpu lib && rm -rf .gpu/lib
  # shellcheck disable=SC2086
  tar -cJf .gpu/build.tar.xz $binaries $wrappers
  du -sh .gpu/*.tar.xz | sed 's/^/gpu-check: /'
  echo "gpu-check: packed; now run 'sh tools/gpu-check.sh run' through the device tool"
}

# A result line for the summary, and the exit status
failed=0
note () {
  echo "$*" | tee -a "$OUT/summary.txt"
  case $1 in FAIL*) failed=1 ;; esac
}

check () { # NAME COMMAND...: runs it, its output in $OUT/NAME.log
  check_name=$1
  shift
  if "$@" >"$OUT/$check_name.log" 2>&1; then
    note "PASS $check_name"
  else
    note "FAIL $check_name (rc $?)"
  fi
}

eval_line () { # the held-out metric's line of a training log
  grep '^eval ' "$1" | tail -n 1
}

run () {
  : "${OUT:?gpu-check: run it through the device tool (OUT unset)}"
  built=$(cat .gpu/build-dir 2>/dev/null) || { echo "gpu-check: run 'tools/gpu-check.sh pack' here first" >&2; exit 2; }
  tar -xJf .gpu/build.tar.xz && tar -xJf .gpu/libs.tar.xz -C .gpu || exit 2
  if [ "$built" != "$top" ] && [ ! -e "$built" ]; then
    mkdir -p "$(dirname "$built")" && ln -s "$top" "$built"
  fi
  # NCCL: the toolkit's, else PyTorch's wheel
  nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), "lib"))' 2>/dev/null || true)
  export LD_LIBRARY_PATH="$top/.gpu/lib:/usr/local/cuda/lib64:${nccl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export KS_BUILD_PLUGINS="$top/plugins" KS_PLUGIN_SYSTEM_PATH=
  export KS_PLUGIN_PATH="$top/plugins/cuda/.libs:$top/plugins/nccl/.libs:$top/plugins/openblas/.libs:$top/plugins/optim/.libs:$top/plugins/store/.libs:$top/plugins/gloo/.libs:$top/plugins/collective/.libs:$top/plugins/roles/.libs"
  : >"$OUT/summary.txt"
  nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true
  tools/ksdist plugins >"$OUT/plugins.txt" 2>&1 || true

  for t in test-cuda test-nccl test-amp; do
    check "$t" "tests/$t"
    grep -E '^(ok|not ok)' "$OUT/$t.log" | grep -c '# SKIP' | sed "s/^/      $t skipped cases: /" >>"$OUT/summary.txt"
  done

  # the same job on both devices: the held-out metrics side by side
  text="$top/README.md"
  for job in "default examples/default.ini" \
             "gpt examples/gpt-words.ini --set data.path=$text --set train.steps=300" \
             "addition examples/addition.ini --set train.steps=1000"; do
    set -- $job
    job_name=$1
    shift
    for backend in openblas cuda; do
      check "train-$job_name-$backend" tools/ksdist train "$@" --set compute.backend=$backend
      note "      $job_name on $backend: $(eval_line "$OUT/train-$job_name-$backend.log")"
    done
    check "train-$job_name-cuda-bf16" tools/ksdist train "$@" --set compute.backend=cuda --set amp.dtype=bf16
    note "      $job_name on cuda, bf16: $(eval_line "$OUT/train-$job_name-cuda-bf16.log")"
  done

  # bitwise resume on the GPU: 40 steps, against 20, then 20 more from the checkpoint
  dirs=$(mktemp -d)
  for mode in straight resumed; do
    if [ $mode = resumed ]; then
      tools/ksdist train examples/default.ini --set compute.backend=cuda --set train.steps=20 --set train.checkpoint_dir="$dirs/$mode" >/dev/null 2>&1
    fi
    tools/ksdist train examples/default.ini --set compute.backend=cuda --set train.steps=40 --set train.resume=true \
      --set train.checkpoint_dir="$dirs/$mode" >"$OUT/resume-$mode.log" 2>&1
  done
  check resume-bitwise cmp "$dirs/straight/checkpoint-40/model.safetensors" "$dirs/resumed/checkpoint-40/model.safetensors"
  rm -rf "$dirs"

  # against PyTorch eager on the same GPU: bench/'s tiny GPT and GPT-2 small at context
  # 1024, each in float32 and bfloat16 (the [amp] target: bf16 1.5x float32's tokens/s)
  for amp in off bf16; do
    check "bench-gpt-$amp" env DEVICE=cuda PYTHON=python3 AMP=$amp CONTEXTS="64 512" \
      bench/run-vs-torch.sh gpt 1
    check "bench-gpt2-$amp" env DEVICE=cuda PYTHON=python3 AMP=$amp GPT_SHAPE=12,12,768,8 \
      CONTEXTS=1024 bench/run-vs-torch.sh gpt 1
  done
  check bench-mlp env DEVICE=cuda PYTHON=python3 bench/run-vs-torch.sh mlp 1
  for f in "$OUT"/bench-*.log; do
    echo "      $(basename "$f" .log):"
    grep -v '^#' "$f" | tail -n 2
  done >>"$OUT/summary.txt"
  cat "$OUT/summary.txt"
  exit $failed
}

case ${1:-} in
  pack) pack ;;
  run) run ;;
  *) echo "usage: tools/gpu-check.sh pack (here) | run (on the GPU machine, through the device tool)" >&2; exit 2 ;;
esac
