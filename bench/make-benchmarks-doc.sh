#!/bin/sh
# Writes doc/benchmarks.md: runs the bench behind each of its tables, each RUNS times,
# and fills bench/benchmarks.md.in with what they printed (the median of each number
# over the runs and how far the runs spread, then every run's own output), the command
# that printed it, and the machine (CPU, cores, memory, load, date, commit). Every
# reference (PyTorch, Open MPI, cblas, memcpy, cat, the theory) is measured in the same
# run by the bench itself; one that is not installed makes its table say so. From the
# build tree, after make:
#   bench/make-benchmarks-doc.sh [--quick] [--runs R] [--only ID,...] [--note TEXT] [-o FILE]
#   bench/make-benchmarks-doc.sh --list [--quick]    (each table's id, needs and command)
#   bench/make-benchmarks-doc.sh --needs             (each need: ok, or why it is missing)
# --quick: smaller sizes of the same benches, and the longest (parameter servers, pslib,
# pipelines, 4 ranks) left to the full run; without it the full sizes (an hour or more
# on 2 cores). RUNS: 3 by default. --only runs those
# tables and marks the others "not run". --note adds a line on the machine (e.g. that it
# was shared). PYTHON names the interpreter with torch (default /usr/bin/python3).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
quick=no list=no runs=3 only= note= out="$src/doc/benchmarks.md"
argv=
for a in "$@"; do # the command line as it can be typed again, for the doc's header
  case $a in
    *[!A-Za-z0-9_.,/=-]*) argv="$argv${argv:+ }'$(printf '%s' "$a" | sed "s/'/'\\\\''/g")'" ;;
    *) argv="$argv${argv:+ }$a" ;;
  esac
done
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=yes ;;
    --list|--dry-run) list=yes ;;
    --needs) list=needs ;;
    --runs) runs=$2; shift ;;
    --only) only=$2; shift ;;
    --note) note=$2; shift ;;
    -o) out=$2; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "make-benchmarks-doc.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
  shift
done
python=${PYTHON:-/usr/bin/python3}
template="$src/bench/benchmarks.md.in"

# The tables: ID|NEEDS|QUICK COMMAND|FULL COMMAND[|CONVERTER], run from the build tree's top.
# CONVERTER: a script of bench/ that turns the command's --json rows into the table.
# NEEDS: what must be built for the table at all (openblas, gloo, zmq), then the
# references it is measured against (torch, mpi), which it is run without.
sections () {
  cat <<'EOF'
sgemm|openblas|KS_PLUGIN_PATH=plugins/openblas/.libs KS_PLUGIN_SYSTEM_PATH= bench/bench-sgemm 1 512|KS_PLUGIN_PATH=plugins/openblas/.libs KS_PLUGIN_SYSTEM_PATH= bench/bench-sgemm 1
sgemm-cores|openblas|KS_PLUGIN_PATH=plugins/openblas/.libs KS_PLUGIN_SYSTEM_PATH= bench/bench-sgemm 0 512|KS_PLUGIN_PATH=plugins/openblas/.libs KS_PLUGIN_SYSTEM_PATH= bench/bench-sgemm
mlp|openblas torch|bench/run-vs-torch.sh mlp 1|bench/run-vs-torch.sh mlp 1 2
gpt|openblas torch|bench/run-vs-torch.sh gpt 1|CONTEXTS="64 512" bench/run-vs-torch.sh gpt 1 2
conv|openblas torch|BATCHES=5 bench/run-vs-torch.sh conv 1|bench/run-vs-torch.sh conv 1 2
cnn|openblas torch|bench/bench-cnn-config.sh 1|bench/bench-cnn-config.sh 1 2
threads|openblas|bench/thread-scaling.sh 3|bench/thread-scaling.sh 3
data|openblas|bench/bench-data.sh 10000|bench/bench-data.sh
allreduce|gloo torch mpi|bench/run-allreduce.sh 2|bench/run-allreduce.sh 2
allreduce-4|gloo torch mpi|-|bench/run-allreduce.sh 4
ddp|openblas gloo torch|TORCH_TIMEOUT=60 bench/run-ddp.sh 2 1|bench/run-ddp.sh 2 1
ps|openblas zmq|-|bench/run-ps.sh 2
pslib|openblas zmq|-|bench/run-pslib.sh
pipeline|openblas gloo|-|bench/run-pipeline.sh 2
overlap|openblas gloo|sh bench/bench-overlap.sh 1 collective|sh bench/bench-overlap.sh 5 collective
overlap-pslib|openblas gloo zmq|-|sh bench/bench-overlap.sh 5 pslib
examples|openblas torch|bench/run-examples.sh --quick|bench/run-examples.sh
cluster|openblas gloo netns torch mpi|bench/run-cluster.sh 4 1gbit|bench/run-cluster.sh 4 1gbit|bench/cluster-doc.py
EOF
}

# A reference or a part that is missing, in words; nothing when it is there.
missing () {
  case $1 in
    openblas) [ -x "$top/bench/bench-mlp" ] || [ -d "$top/plugins/openblas/.libs" ] ||
                echo "the openblas plugin not built (libopenblas-dev)" ;;
    gloo) [ -d "$top/plugins/gloo/.libs" ] || echo "the gloo plugin not built (libgloo-dev)" ;;
    # configure's HAVE_ZMQ is an automake conditional, never in config.h: what ZeroMQ
    # builds are the parameter-server plugins
    zmq) { [ -d "$top/plugins/transpiler/.libs" ] && [ -d "$top/plugins/pslib/.libs" ]; } ||
           echo "the transpiler and pslib plugins not built (ZeroMQ: libzmq3-dev)" ;;
    torch) "$python" -c "import torch" 2>/dev/null || echo "python3-torch not installed ($python has no torch)" ;;
    netns) { [ "$(id -u)" = 0 ] && command -v ip && command -v tc; } >/dev/null 2>&1 ||
             echo "network namespaces cannot be made here (needs root and iproute2)" ;;
    mpi) { command -v mpirun && command -v mpicc; } >/dev/null 2>&1 ||
           echo "Open MPI not installed (no mpirun and mpicc: openmpi-bin, libopenmpi-dev)" ;;
  esac
}
reference_name () {
  case $1 in torch) echo PyTorch ;; mpi) echo "Open MPI" ;; *) echo "$1" ;; esac
}

if [ $list = needs ]; then
  for need in $(sections | cut -d'|' -f2 | tr ' ' '\n' | sort -u); do
    why=$(missing "$need")
    printf '%s\t%s\n' "$need" "${why:-ok}"
  done
  exit 0
fi

mode=full field=4
[ $quick = no ] || { mode=quick field=3; }

if [ $list = yes ]; then
  sections | while IFS='|' read -r id needs q f _conv; do
    cmd=$f; [ $quick = no ] || cmd=$q
    printf '%s\t%s\t%s\n' "$id" "$needs" "$cmd"
  done
  exit 0
fi

# Merges the outputs of one command's runs (files in $@): each line of the first run with
# every number that is a number in every run replaced by its median, printed as wide and
# with as many decimals as in the first run, and, where the runs differ, how far apart
# their extremes are: (max - min) / median, the largest over the line's numbers.
merge () {
  awk -v runs=$# '
    function isnum(s) { return s ~ /^-?[0-9]+(\.[0-9]+)?[,;:%)]?$/ }
    function suffix(s) { return (s ~ /[,;:%)]$/) ? substr(s, length(s)) : "" }
    function decimals(s) { return index(s, ".") ? length(s) - index(s, ".") : 0 }
    FNR == 1 { r++ }
    { line[r, FNR] = $0; n[r] = FNR }
    END {
      for (i = 1; i <= n[1]; i++) {
        s = line[1, i]
        if (runs == 1) { print s; continue }
        ok = 1
        for (q = 1; q <= runs; q++) {
          if (i > n[q]) { ok = 0; break }
          c[q] = split(line[q, i], f, " ")
          for (k = 1; k <= c[q]; k++) t[q, k] = f[k]
          if (c[q] != c[1]) ok = 0
        }
        if (!ok) { print s "   | runs differ here"; continue }
        # walk the first run line, keeping its spaces
        outl = ""; rest = s; k = 0; spread = 0
        while (match(rest, /[^ ]+/)) {
          k++
          pre = substr(rest, 1, RSTART - 1); tokn = substr(rest, RSTART, RLENGTH)
          rest = substr(rest, RSTART + RLENGTH)
          num = isnum(tokn)
          for (q = 1; q <= runs && num; q++) if (!isnum(t[q, k])) num = 0
          if (num) {
            for (q = 1; q <= runs; q++) v[q] = t[q, k] + 0
            end = suffix(tokn)
            for (a = 2; a <= runs; a++) for (b = a; b > 1 && v[b - 1] > v[b]; b--) {
              x = v[b]; v[b] = v[b - 1]; v[b - 1] = x }
            med = (runs % 2) ? v[(runs + 1) / 2] : (v[runs / 2] + v[runs / 2 + 1]) / 2
            d = decimals(substr(tokn, 1, length(tokn) - length(end)))
            m = sprintf("%." d "f", med) end
            if (length(m) < length(tokn)) m = sprintf("%" length(tokn) "s", m)
            if (med > 0 && v[runs] > v[1]) {
              sp = (v[runs] - v[1]) / med; if (sp > spread) spread = sp }
            tokn = m
          }
          outl = outl pre tokn
        }
        outl = outl rest
        if (spread > 0) outl = outl sprintf("   | spread %d%%", spread * 100 + 0.5)
        print outl
      }
    }' "$@"
}

commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$src" diff --quiet HEAD 2>/dev/null || commit="$commit (with uncommitted changes)"
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
cores=$(nproc)
mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
openblas=$(dpkg-query -W -f '${Version}' libopenblas0 2>/dev/null || true)
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
  kernels_by="OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE in the environment"
else
  kernels_by="OpenBLAS's own choice for this CPU: OPENBLAS_CORETYPE unset"
fi
torchv=$("$python" -c "import torch; print(torch.__version__)" 2>/dev/null || echo "not installed")
t0=$(date +%s)

# The bench programs are not built by `make`: build those that can be.
programs="bench/bench-ps bench/bench-sparse"
[ -n "$(missing openblas)" ] ||
  programs="$programs bench/bench-sgemm bench/bench-mlp bench/bench-gpt bench/bench-conv bench/bench-ddp"
[ -n "$(missing gloo)" ] || programs="$programs bench/bench-allreduce"
make -C "$top" $programs tools/ksdist >/dev/null
# the kernels OpenBLAS runs, by the name it gives in its configuration (OPENBLAS_CORETYPE
# names others: the tables' speed depends on it)
kernels=
[ -n "$(missing openblas)" ] || kernels=$(cd "$top" && KS_PLUGIN_PATH=plugins/openblas/.libs \
  KS_PLUGIN_SYSTEM_PATH= bench/bench-sgemm 1 0 | sed -n 's/.* \([A-Za-z0-9]*\) MAX_THREADS.*/\1/p')

work=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-benchdoc-XXXXXX")
trap 'rm -rf "$work"' EXIT

# One table: its block of markdown on stdout, its progress on stderr.
table () {
  id=$1
  line=$(sections | grep "^$id|") || { echo "**No table '$id' in bench/make-benchmarks-doc.sh.**"; return; }
  needs=$(echo "$line" | cut -d'|' -f2)
  cmd=$(echo "$line" | cut -d'|' -f$field)
  conv=$(echo "$line" | cut -d'|' -f5 -s)
  if [ "$cmd" = - ]; then
    echo "Not measured in this run: this table is made by the full run only (\`$(echo "$line" | cut -d'|' -f4)\`, without \`--quick\`)."
    return
  fi
  if [ -n "$only" ] && ! echo ",$only," | grep -q ",$id,"; then
    echo "Not run in this generation (\`--only $only\`): \`$cmd\`."
    return
  fi
  blocked= refs=
  for need in $needs; do
    why=$(missing "$need")
    case $need in
      torch|mpi) [ -z "$why" ] || refs="$refs
- $(reference_name "$need"): not measured: $why." ;;
      *) [ -z "$why" ] || blocked="$blocked${blocked:+; }$why" ;;
    esac
  done
  if [ -n "$blocked" ]; then
    echo "Not measured: $blocked. Command: \`$cmd\`."
    return
  fi
  i=1 files= fails=
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  s0=$(date +%s)
  while [ $i -le "$runs" ]; do
    echo "  [$id] run $i of $runs: $cmd" >&2
    # under set -e, each in an `if`; with a converter, the --json rows turned into the table;
    # stdin would otherwise be the template being read (mpirun read the rest of it)
    rc=0
    if [ -n "$conv" ]; then
      if (cd "$top" && eval "timeout ${BENCH_TIMEOUT:-3600} env $cmd --json" >"$work/$id.$i.json" \
          </dev/null && "$python" "$src/$conv" <"$work/$id.$i.json") >"$work/$id.$i" \
          2>"$work/$id.$i.err"; then :; else rc=$?; fi
    elif (cd "$top" && eval "timeout ${BENCH_TIMEOUT:-3600} env $cmd") >"$work/$id.$i" \
      2>"$work/$id.$i.err" </dev/null; then
      :
    else
      rc=$?
    fi
    if [ $rc -eq 0 ]; then
      files="$files $work/$id.$i"
    else
      fails="$fails $i:$rc"
    fi
    i=$((i + 1))
  done
  s1=$(date +%s)
  load1=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "  [$id] $((s1 - s0)) s for $runs run(s)${fails:+, failed:$fails}" >&2
  if [ -n "$fails" ]; then
    echo "**Failed**: \`$cmd\` (run:exit status$fails); the last lines of the first failing run's errors:"
    echo
    echo '```text'
    f=$(echo "$fails" | awk '{ split($1, a, ":"); print a[1] }')
    tail -n 15 "$work/$id.$f.err"
    echo '```'
    echo
  fi
  [ -n "$files" ] || { echo "Command: \`$cmd\`.$refs"; return 0; }
  count=$(echo $files | wc -w)
  if [ "$count" = 1 ]; then how="one run, so no spread"; else how="$count runs one after another, medians"; fi
  echo "Printed by \`$cmd\`${conv:+ (its \`--json\` rows made into this table by \`$conv\`)}: $how; $(( (s1 - s0) / runs )) s a run; load average $load0 before, $load1 after."
  [ -z "$refs" ] || { echo "$refs"; }
  echo
  echo '```text'
  # shellcheck disable=SC2086
  merge $files
  echo '```'
  if [ "$count" -gt 1 ]; then
    echo
    echo "<details><summary>each run's own output</summary>"
    echo
    n=1
    for f in $files; do
      echo "Run $n:"
      echo
      echo '```text'
      cat "$f"
      echo '```'
      echo
      n=$((n + 1))
    done
    echo "</details>"
  fi
}

tmp="$out.tmp.$$"
{
  while IFS= read -r l; do
    case $l in
      @TABLE\ *@)
        id=${l#@TABLE }; id=${id%@}
        echo "table $id ..." >&2
        # nothing a table runs may read the template: with only the examples table, its
        # read position moved back twice and the loop ran that table three times
        table "$id" </dev/null ;;
      @HEADER@)
        echo "<!-- Generated by bench/make-benchmarks-doc.sh from bench/benchmarks.md.in: edit those, not this file. -->"
        echo
        echo "Generated by \`bench/make-benchmarks-doc.sh${argv:+ $argv}\` on $started from commit $commit ($mode run, $runs run$( [ "$runs" = 1 ] || echo s) of each bench)." ;;
      @MACHINE@)
        echo "- CPU: $cpu, $cores cores (\`nproc\`); memory $mem"
        echo "- load average when the run began: $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "- OpenBLAS (Debian's libopenblas0): ${openblas:-unknown}; PyTorch (\`$python\`): $torchv; Open MPI: $(command -v mpirun >/dev/null 2>&1 && mpirun --version 2>/dev/null </dev/null | head -1 || echo not installed)"
        echo "- OpenBLAS's kernels: ${kernels:-unknown} ($kernels_by)"
        [ -z "$note" ] || echo "- $note" ;;
      @DURATION@)
        echo "The whole run took $(( ($(date +%s) - t0) / 60 )) minutes." ;;
      *) printf '%s\n' "$l" ;;
    esac
  done <"$template"
} >"$tmp"
mv "$tmp" "$out"
echo "wrote $out" >&2
