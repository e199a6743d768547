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
packages="build-essential autoconf automake libtool pkgconf libglib2.0-dev libjson-glib-dev libopenblas-dev libgloo-dev libzmq3-dev wamerican iproute2"
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
[ -f Makefile ] || ./configure
make -j"$jobs"

if [ $check = yes ]; then
  make -j"$jobs" check
  make -j"$jobs" distcheck
  make -j"$jobs" check-sanitize
  exit 0
fi

# The default job, from this build tree: the plugins found, then an MLP trained on
# examples/default.ini by two data-parallel workers (one process when Gloo is missing).
# A plugin that fails to load is reported and does not stop it.
KS_PLUGIN_PATH=
for p in openblas cuda optim store roles gloo segment collective transpiler pslib; do
  KS_PLUGIN_PATH="$KS_PLUGIN_PATH${KS_PLUGIN_PATH:+:}$PWD/plugins/$p/.libs"
done
export KS_PLUGIN_PATH
./tools/ksdist plugins || true
if [ -e plugins/gloo/.libs/gloo.so ]; then
  ./tools/ksdist launch -n 2 examples/default.ini
else
  ./tools/ksdist train examples/default.ini
fi
echo
echo "ksdist is built. Use it from here with KS_PLUGIN_PATH=$KS_PLUGIN_PATH,"
echo "or install it: make install (plugins go to \$(libdir)/ksdist)."
