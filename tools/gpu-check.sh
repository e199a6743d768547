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
#    runs the GPU tests (test-cuda, test-amp, test-nccl), trains the default MLP, a GPT
#    and the addition task on the GPU in float32 and bfloat16 (and on the CPU with
#    GPU_CHECK_CPU=yes), checks a resumed GPU run against an unbroken one, and runs the
#    benchmarks against PyTorch eager on the same GPU, most important first, each with
#    a time limit and all within GPU_CHECK_BUDGET seconds (default 420). The summary and
#    logs.tar.gz come back in $OUT; the command exits non-zero when a check failed.
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
  make -j"$(nproc)" bench/bench-mlp bench/bench-gpt >/dev/null
  rm -rf .gpu && mkdir -p .gpu/lib
  echo "$top" >.gpu/build-dir # libtool's wrappers name it: the run links it there
  # the binaries without objects, and every library they load except the C library's
  # own and CUDA's (the GPU machine has those, matching its driver), each compressed:
  # the device tool carries 64 MiB
  binaries=$(ls -d .libs/*.so* plugins/*/.libs/*.so tools/ksdist tools/.libs/* \
               tests/.libs/* bench/.libs/* 2>/dev/null | grep -v '\.o$')
  wrappers=$(for f in tests/test-* bench/bench-* bench/*.sh bench/*.py; do
               if [ -f "$f" ] && [ -x "$f" ]; then echo "$f"; fi; done)
  for f in $binaries; do
    if [ -f "$f" ]; then ldd "$f" 2>/dev/null || true; fi
  done | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u | while read -r lib; do
    case $lib in
      */libc.so*|*/libm.so*|*/libdl.so*|*/libpthread.so*|*/librt.so*|*/libresolv.so*|*/ld-linux*) ;;
      */libcuda*|*/libcublas*|*/libnccl*|/usr/local/cuda*|*/libksdist.so*) ;;
      # the GPU machine's own are newer, and PyTorch there needs them
      */libstdc++.so*|*/libgcc_s.so*) ;;
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

check () { # NAME SECONDS COMMAND...: runs it, its output in $OUT/logs/NAME.log, within the
  # whole run's budget (GPU_CHECK_BUDGET seconds, default 420: device time is scarce)
  check_name=$1 check_limit=$2
  shift 2
  left=$((deadline - $(date +%s)))
  if [ "$left" -lt 15 ]; then
    note "SKIP $check_name (out of time)"
    return
  fi
  [ "$check_limit" -lt "$left" ] || check_limit=$left
  check_start=$(date +%s)
  if timeout -k 5 "$check_limit" "$@" >"$OUT/logs/$check_name.log" 2>&1; then
    note "PASS $check_name ($(( $(date +%s) - check_start )) s)"
  else
    note "FAIL $check_name (rc $?, $(( $(date +%s) - check_start )) s)"
  fi
}

eval_line () { # the held-out metric's line of a training log
  grep '^eval ' "$1" | tail -n 1
}

setup () { # unpacks the build where it was built and points the loader and ksdist at it
  built=$(cat .gpu/build-dir 2>/dev/null) || { echo "gpu-check: run 'tools/gpu-check.sh pack' here first" >&2; exit 2; }
  tar -xJf .gpu/build.tar.xz && tar -xJf .gpu/libs.tar.xz -C .gpu || exit 2
  if [ "$built" != "$top" ] && [ ! -e "$built" ]; then
    mkdir -p "$(dirname "$built")" && ln -s "$top" "$built"
  fi
  # PyTorch runs with the machine's own libraries, not the Debian ones packed here
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec python3 "$@"\n' "${LD_LIBRARY_PATH:-}" >.gpu/python3
  chmod +x .gpu/python3
  # NCCL: the toolkit's, else PyTorch's wheel
  nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), "lib"))' 2>/dev/null || true)
  export LD_LIBRARY_PATH="$top/.gpu/lib:/usr/local/cuda/lib64:${nccl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export KS_BUILD_PLUGINS="$top/plugins" KS_PLUGIN_SYSTEM_PATH=
  export KS_PLUGIN_PATH="$top/plugins/cuda/.libs:$top/plugins/nccl/.libs:$top/plugins/openblas/.libs:$top/plugins/optim/.libs:$top/plugins/store/.libs:$top/plugins/gloo/.libs:$top/plugins/collective/.libs:$top/plugins/roles/.libs"
}

run () {
  : "${OUT:?gpu-check: run it through the device tool (OUT unset)}"
  deadline=$(( $(date +%s) + ${GPU_CHECK_BUDGET:-420} ))
  setup
  mkdir -p "$OUT/logs"
  : >"$OUT/summary.txt"
  # the logs come back as one file: the device tool returns at most 8
  trap 'tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"' EXIT
  { nvidia-smi; ldd plugins/cuda/.libs/cuda.so plugins/nccl/.libs/nccl.so; } >"$OUT/logs/machine.txt" 2>&1 || true
  tools/ksdist plugins >"$OUT/logs/plugins.txt" 2>&1 || true

  for t in test-cuda test-amp test-nccl; do
    check "$t" 120 "tests/$t"
    grep -E '^(ok|not ok)' "$OUT/logs/$t.log" | grep -c '# SKIP' | sed "s/^/      $t skipped cases: /" >>"$OUT/summary.txt"
  done

  # the same jobs on the GPU, float32 and bfloat16 (the CPU's figures: GPU_CHECK_CPU=yes,
  # or measured beside it)
  text="$top/README.md"
  backends="cuda cuda-bf16"
  [ "${GPU_CHECK_CPU:-no}" = no ] || backends="$backends openblas"
  runs=$(mktemp -d) # each run its own checkpoint_dir: a run never replaces another's
  for backend in $backends; do
    for job in "default examples/default.ini" \
               "addition examples/addition.ini" \
               "gpt examples/gpt-words.ini --set data.path=$text --set train.steps=300"; do
      set -- $job
      job_name=$1
      shift
      case $backend in
        cuda-bf16) set -- "$@" --set compute.backend=cuda --set amp.dtype=bf16 ;;
        *) set -- "$@" --set compute.backend=$backend ;;
      esac
      check "train-$job_name-$backend" 150 tools/ksdist train "$@" \
        --set train.checkpoint_dir="$runs/$job_name-$backend"
      note "      $job_name on $backend: $(eval_line "$OUT/logs/train-$job_name-$backend.log")"
    done
  done

  # bitwise resume on the GPU: 40 steps saving at 20 and 40, against its step 20 resumed
  # to 40 (the tensors compared; each save has its own id)
  py="$top/.gpu/python3"
  dirs=$(mktemp -d)
  resume="tools/ksdist train examples/default.ini --set compute.backend=cuda --set train.steps=40"
  $resume --set train.checkpoint_every=20 --set train.checkpoint_dir="$dirs/straight" >"$OUT/logs/resume-straight.log" 2>&1
  mkdir -p "$dirs/resumed" && cp -r "$dirs/straight/checkpoint-20" "$dirs/resumed/" 2>/dev/null
  $resume --set train.resume=true --set train.checkpoint_dir="$dirs/resumed" >"$OUT/logs/resume-resumed.log" 2>&1
  check resume-bitwise 20 "$py" -c 'import sys, json, struct
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    header.pop("__metadata__")
    return header, b[8 + n:]
sys.exit(tensors(sys.argv[1]) != tensors(sys.argv[2]))' "$dirs/straight/checkpoint-40/model.safetensors" "$dirs/resumed/checkpoint-40/model.safetensors"
  rm -rf "$dirs"

  # against PyTorch eager on the same GPU: bench/'s tiny GPT and GPT-2 small at context
  # 1024, each in float32 and bfloat16 (the [amp] target: bf16 1.5x float32's tokens/s)
  check bench-mlp 60 env DEVICE=cuda PYTHON="$py" bench/run-vs-torch.sh mlp 1
  for amp in off bf16; do
    check "bench-gpt-$amp" 90 env DEVICE=cuda PYTHON="$py" AMP=$amp CONTEXTS="64 512" \
      bench/run-vs-torch.sh gpt 1
    check "bench-gpt2-$amp" 150 env DEVICE=cuda PYTHON="$py" AMP=$amp GPT_SHAPE=12,12,768,8 \
      CONTEXTS=1024 bench/run-vs-torch.sh gpt 1
  done
  for f in "$OUT"/logs/bench-*.log; do
    echo "      $(basename "$f" .log):"
    grep -v '^#' "$f" | tail -n 2
  done >>"$OUT/summary.txt"
  cat "$OUT/summary.txt"
  exit $failed
}

# Where a GPT-2-small step's GPU time goes: ncu times each kernel of the first 2,000
# launches of bench-gpt (warm-up steps included), summed per kernel, float32 and bf16
profile () {
  : "${OUT:?gpu-check: run it through the device tool (OUT unset)}"
  setup
  ncu --version >"$OUT/ncu-version.txt" 2>&1
  for amp in off bf16; do
    KS_PLUGIN_PATH="$top/plugins/cuda/.libs:$top/plugins/optim/.libs" GPT_SHAPE=12,12,768,8 AMP=$amp \
      PATH="/usr/local/cuda/bin:$PATH" timeout 150 ncu --metrics gpu__time_duration.sum --csv --print-units base \
      --launch-count 2000 bench/bench-gpt 1 cuda 1024 >"$OUT/ncu-$amp.csv" 2>"$OUT/ncu-$amp.err"
    .gpu/python3 - "$OUT/ncu-$amp.csv" <<'PY' | tee "$OUT/kernels-$amp.txt"
import csv, sys, collections
total = collections.Counter(); count = collections.Counter()
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
for row in csv.DictReader(lines):
    if row.get("Metric Name") == "gpu__time_duration.sum":
        name = row["Kernel Name"].split("(")[0][:70]
        total[name] += float(row["Metric Value"].replace(",", "")); count[name] += 1
all_ns = sum(total.values())
print(f"{sys.argv[1]}: {sum(count.values())} launches, {all_ns / 1e6:.1f} ms of kernel time")
for name, ns in total.most_common(25):
    print(f"{100 * ns / all_ns:5.1f}% {ns / 1e6:9.2f} ms {count[name]:6d}x  {name}")
PY
  done
}

# compute-sanitizer's memcheck (out-of-bounds and misaligned accesses, leaks of device
# memory) over test-cuda and a short GPT run (test-amp runs on the CPU alone)
sanitize () {
  : "${OUT:?gpu-check: run it through the device tool (OUT unset)}"
  setup
  export LD_LIBRARY_PATH="$top/.libs:$LD_LIBRARY_PATH" # the programs themselves, not libtool's wrappers
  failed=0
  deadline=$(( $(date +%s) + ${GPU_CHECK_BUDGET:-200} ))
  mkdir -p "$OUT/logs"
  memcheck="/usr/local/cuda/bin/compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 --target-processes application-only"
  check memcheck-test-cuda 120 $memcheck tests/.libs/test-cuda
  check memcheck-gpt 120 $memcheck tools/.libs/ksdist train examples/gpt-words.ini \
    --set data.path="$top/README.md" --set train.steps=3 --set model.context=32 --set compute.backend=cuda
  tar -czf "$OUT/sanitize.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
  exit $failed
}

case ${1:-} in
  pack) pack ;;
  sanitize) sanitize ;;
  run) run ;;
  profile) profile ;;
  *) echo "usage: tools/gpu-check.sh pack (here) | run | profile | sanitize (on the GPU machine, through the device tool)" >&2; exit 2 ;;
esac
