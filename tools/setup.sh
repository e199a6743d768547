#!/bin/sh
# Sets up ksdist on Debian 12 from a fresh clone, in one command:
#   tools/setup.sh           install packages, configure, build, train the default job
#   tools/setup.sh --check   the same, then the whole test suite (make check, distcheck,
#                            and make check-sanitize: again under ASan, LSan and UBSan)
# Packages are installed with apt-get when run as root (or with sudo); otherwise the
# missing ones are named and the script stops.
set -eu
cd "$(dirname "$0")/.."

check=no
case "${1:-}" in
  --check) check=yes ;;
  "") ;;
  *) echo "usage: tools/setup.sh [--check]" >&2; exit 2 ;;
esac

# Build tools and libraries; CUDA and NCCL come from /usr/local/cuda when present.
packages="build-essential autoconf automake libtool pkgconf libglib2.0-dev libjson-glib-dev libopenblas-dev libopenblas-openmp-dev libgloo-dev libzmq3-dev librsvg2-dev libgdk-pixbuf-2.0-dev libfreetype-dev libfontconfig-dev fonts-noto-core wamerican iproute2 iputils-ping procps zlib1g-dev slurm-wlm munge"
missing=
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then sudo=; elif command -v sudo >/dev/null; then sudo=sudo; else
    echo "ksdist setup: install these Debian packages as root first:$missing" >&2; exit 1
  fi
  echo "ksdist setup: installing$missing"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # shellcheck disable=SC2086
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
fi

jobs=$(nproc 2>/dev/null || echo 2)
started=$(date +%s)
# The build's output goes to setup.log (its end is shown if a step fails); --check, as
# CI runs it, shows everything.
log=$PWD/setup.log
: >"$log"
step () { # WHAT COMMAND...
  what=$1
  shift
  if [ $check = yes ]; then "$@"; return; fi
  echo "ksdist setup: $what (output in setup.log)"
  if ! "$@" >>"$log" 2>&1; then
    echo "ksdist setup: $what failed; the end of setup.log:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
}
[ -x configure ] || step "making configure" autoreconf -fi
# root installs to /usr/local; anyone else to ~/.local
if [ ! -f Makefile ]; then
  if [ "$(id -u)" = 0 ]; then step configuring ./configure; else step configuring ./configure --prefix="$HOME/.local"; fi
fi
step "building with $jobs jobs" make -j"$jobs"

# When a suite fails, the logs of its failed tests are printed last, so that the end of
# CI's output (often all that is kept) names the test and shows why.
show_failed () { # WHAT COMMAND...
  what=$1
  shift
  "$@" && return 0
  echo "ksdist setup: $what failed; the failed tests' logs:" >&2
  find . -name '*.trs' -newer "$log" -exec grep -l -E '^:test-result: (FAIL|ERROR|XPASS)' {} + 2>/dev/null |
    while read -r trs; do
      echo "===== ${trs%.trs}.log (last 80 lines)" >&2
      tail -n 80 "${trs%.trs}.log" >&2
    done
  exit 1
}
if [ $check = yes ]; then
  show_failed "make check" make -j"$jobs" check
  show_failed "make distcheck" make -j"$jobs" distcheck
  show_failed "make check-sanitize" make -j"$jobs" check-sanitize
  exit 0
fi

# Install, so that `ksdist` is on the PATH: as root to /usr/local, else to ~/.local
# (configured so above). Then the default job with the installed ksdist: an MLP trained
# on examples/default.ini by two data-parallel workers (one process when Gloo is
# missing).
step installing make install
[ "$(id -u)" != 0 ] || ldconfig # libksdist.so in /usr/local/lib
bindir=$(make -s print-bindir)
prefix=$(dirname "$bindir")
case ":$PATH:" in
  *":$bindir:"*) path_note= ;;
  *) PATH="$bindir:$PATH"; export PATH
     path_note="  add $bindir to your PATH (e.g. in ~/.profile) to run ksdist from anywhere" ;;
esac
echo "ksdist setup: the default job, an MLP on two spirals:"
if ksdist plugins --json | grep -q '"name": "gloo", "path": "[^"]*", "state": "loaded"'; then
  ksdist launch -n 2 examples/default.ini
else
  ksdist train examples/default.ini
fi

# What there is now, and what to try next
echo
echo "ksdist setup: done in $(( $(date +%s) - started )) s"
echo "  installed: ksdist in $bindir, its plugins in $prefix/lib/ksdist, examples in"
echo "    $prefix/share/ksdist/examples, the documentation in $prefix/share/doc/ksdist, man ksdist"
echo "  plugins (configure's summary; the full build log is setup.log):"
awk '/^  plugins \(installed into/ { on = 1; next } /^  MPI/ { exit } on { sub (/^ +/, "    "); print }' config.log
[ -z "$path_note" ] || echo "$path_note"
echo "  next: ksdist train $prefix/share/ksdist/examples/gpt-words.ini   (a small GPT, a minute)"
echo "        ksdist help; README.md's \"Your own model and data\" to train yours"
