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
packages="build-essential autoconf automake libtool pkgconf libglib2.0-dev libjson-glib-dev libopenblas-dev libopenblas-openmp-dev libgloo-dev libzmq3-dev librsvg2-dev libgdk-pixbuf-2.0-dev libfreetype-dev libfontconfig-dev fonts-noto-core wamerican iproute2 zlib1g-dev"
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
[ -x configure ] || autoreconf -fi
# root installs to /usr/local; anyone else to ~/.local
if [ ! -f Makefile ]; then
  if [ "$(id -u)" = 0 ]; then ./configure; else ./configure --prefix="$HOME/.local"; fi
fi
make -j"$jobs"

if [ $check = yes ]; then
  make -j"$jobs" check
  make -j"$jobs" distcheck
  make -j"$jobs" check-sanitize
  exit 0
fi

# Install, so that `ksdist` is on the PATH: as root to /usr/local, else to ~/.local
# (configured so above). Then the default job with the installed ksdist: the plugins
# found, then an MLP trained on examples/default.ini by two data-parallel workers (one
# process when Gloo is missing).
make install >/dev/null
[ "$(id -u)" != 0 ] || ldconfig # libksdist.so in /usr/local/lib
bindir=$(make -s print-bindir)
case ":$PATH:" in
  *":$bindir:"*) ;;
  *) PATH="$bindir:$PATH"; export PATH
     echo "ksdist setup: add $bindir to your PATH (e.g. in ~/.profile) to run ksdist from anywhere" ;;
esac
ksdist plugins || true
if ksdist plugins --json | grep -q '"name": "gloo", "path": "[^"]*", "state": "loaded"'; then
  ksdist launch -n 2 examples/default.ini
else
  ksdist train examples/default.ini
fi
echo
echo "ksdist is installed in $bindir (man ksdist; examples in $(dirname "$bindir")/share/ksdist/examples)."
