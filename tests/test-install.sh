#!/bin/sh
# Installs ksdist into a temporary root, builds a plugin outside the tree against the
# installed headers with `pkg-config ksdist`, and loads it with the installed ksdist; a
# program on the tasks library runs. TAP output. Needs from the environment
# (tests/local.mk): MAKE, CC, KS_BUILDDIR, KS_SRCDIR, KS_PREFIX, KS_LIBDIR, KS_BINDIR, and
# KS_PROGRAM_FLAGS (the build's warnings and sanitizers: a program linked against
# sanitized libraries must be built with them too). Then the installed plugin template
# (examples/plugin-template, doc/plugins.md) is built with autotools, installed with
# `make install` into ksdist.pc's plugindir, listed by `ksdist plugins`, and trains:
# its checkpoints resume to an uninterrupted run's tensors.
set -u
echo "1..9"
root=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-install-XXXXXX")
trap 'rm -rf "$root"' EXIT
fail() { echo "not ok $1 - $2"; shift 2; for line in "$@"; do echo "# $line"; done; exit 1; }

if ! $MAKE -C "$KS_BUILDDIR" install DESTDIR="$root" >"$root/install.log" 2>&1; then
  fail 1 "make install DESTDIR" "$(tail -n 20 "$root/install.log")"
fi
echo "ok 1 - make install DESTDIR=$root"

# Relocate the installed ksdist.pc to the temporary root (only it: a global
# --define-variable=prefix would move GLib's headers too).
export PKG_CONFIG_PATH="$root$KS_LIBDIR/pkgconfig"
sed -i "s|^prefix=.*|prefix=$root$KS_PREFIX|" "$PKG_CONFIG_PATH/ksdist.pc" \
  "$PKG_CONFIG_PATH/ksdist-tasks.pc"
flags=$(pkg-config --cflags --libs ksdist) \
  || fail 2 "pkg-config ksdist" "PKG_CONFIG_PATH=$PKG_CONFIG_PATH"
mkdir -m 700 "$root/plugins"
# shellcheck disable=SC2086
if ! $CC -shared -fPIC -Wall -Werror -o "$root/plugins/oot.so" "$KS_SRCDIR/tests/out-of-tree/oot.c" \
    $flags >"$root/cc.log" 2>&1; then
  fail 2 "build a plugin with pkg-config ksdist" "$(cat "$root/cc.log")"
fi
echo "ok 2 - built oot.so with: $flags"

plugdir=$(pkg-config --variable=plugindir ksdist)
out=$(LD_LIBRARY_PATH="$root$KS_LIBDIR" KS_PLUGIN_PATH="$root/plugins" \
      KS_PLUGIN_SYSTEM_PATH="$plugdir" "$root$KS_BINDIR/ksdist" plugins --json 2>&1) \
  || fail 3 "installed ksdist plugins" "$out"
case $out in
  *'{"name": "oot", "path": "'"$root"'/plugins/oot.so", "state": "loaded", "reason": null, "version": "1.2.3"'*) ;;
  *) fail 3 "oot.so loaded by the installed ksdist" "$out" ;;
esac
echo "ok 3 - the installed ksdist loads the out-of-tree plugin"

if [ -f "$plugdir/openblas.so" ]; then
  case $out in
    *'{"name": "openblas", "path": "'"$plugdir"'/openblas.so", "state": "loaded"'*) ;;
    *) fail 4 "installed openblas.so loaded from $plugdir" "$out" ;;
  esac
  echo "ok 4 - the installed OpenBLAS plugin loads from $plugdir"
else
  echo "ok 4 # SKIP the OpenBLAS plugin is not built"
fi

# The examples and the man page: `ksdist train PREFIX/share/ksdist/examples/default.ini`
# and `man ksdist` work after make install.
for f in "$KS_PREFIX/share/ksdist/examples/default.ini" "$KS_PREFIX/share/man/man1/ksdist.1"; do
  [ -s "$root$f" ] || fail 5 "installed $f" "$(ls -R "$root$KS_PREFIX/share" 2>&1 | head -n 20)"
done
grep -q '^\[model\]' "$root$KS_PREFIX/share/ksdist/examples/default.ini" \
  || fail 5 "installed default.ini is the example"
echo "ok 5 - examples and the man page are installed"

# A program on the tasks library, built with `pkg-config ksdist-tasks`, draws 300
# points of the rings task, each of one of its three classes, every class drawn.
cat >"$root/rings.c" <<'C'
#include <ksdist/tasks.h>
#include <stdio.h>
int
main (void)
{
  float xs[2 * 300];
  gint64 labels[300], seen[3] = { 0 };
  ks_task_generate (KS_TASK_RINGS, 300, 0.1, 7, xs, labels);
  for (int i = 0; i < 300; i++)
    if (labels[i] >= 0 && labels[i] < 3)
      seen[labels[i]]++;
  printf ("%d classes: %ld %ld %ld\n", ks_task_classes (KS_TASK_RINGS), (long) seen[0],
          (long) seen[1], (long) seen[2]);
  return seen[0] > 0 && seen[1] > 0 && seen[2] > 0 && seen[0] + seen[1] + seen[2] == 300 ? 0 : 1;
}
C
flags=$(pkg-config --cflags --libs ksdist-tasks) || fail 6 "pkg-config ksdist-tasks"
# shellcheck disable=SC2086
$CC ${KS_PROGRAM_FLAGS:-} -Werror -o "$root/rings" "$root/rings.c" $flags >"$root/cc.log" 2>&1 \
  || fail 6 "build a program with pkg-config ksdist-tasks" "$(cat "$root/cc.log")"
out=$(LD_LIBRARY_PATH="$root$KS_LIBDIR" "$root/rings" 2>&1) \
  || fail 6 "the tasks library's program: a point without a class" "$out"
case $out in "3 classes: "*) ;; *) fail 6 "the tasks library's program" "$out" ;; esac
echo "ok 6 - a program on the installed tasks library (pkg-config ksdist-tasks) runs"

# Every installed header compiles alone (a user includes only what they use) and says
# who it is for; ksdist.h stays the one-include convenience.
flags=$(pkg-config --cflags ksdist-tasks) || fail 7 "pkg-config ksdist-tasks"
alone=0
for h in "$root$KS_PREFIX"/include/ksdist/*.h; do
  name=$(basename "$h")
  # shellcheck disable=SC2086
  printf '#include <ksdist/%s>\n' "$name" | $CC -fsyntax-only -Wall -Werror -x c - $flags \
      >"$root/cc.log" 2>&1 || fail 7 "<ksdist/$name> does not compile alone" "$(head -n 5 "$root/cc.log")"
  # its first lines say who it is for: a plugin author, a program author, the tasks'
  sed -n '1,6p' "$h" | grep -q '^ \* For ' \
    || fail 7 "<ksdist/$name>: its first lines do not say who it is for (a ' * For ...' line)"
  alone=$((alone + 1))
done
[ $alone -ge 25 ] || fail 7 "only $alone installed headers found in $root$KS_PREFIX/include/ksdist"
echo "ok 7 - each of the $alone installed headers compiles alone and says who it is for"

# The plugin template, as a plugin author uses it: a copy of the installed folder,
# autoreconf, configure (pkg-config finds the installed ksdist), make, make install.
for tool in autoreconf libtoolize automake make; do
  if ! command -v $tool >/dev/null 2>&1; then
    echo "ok 8 # SKIP $tool is not installed (the template builds with autotools)"
    echo "ok 9 # SKIP $tool is not installed"
    exit 0
  fi
done
tpl="$root/signum"
cp -r "$root$KS_PREFIX/share/ksdist/examples/plugin-template" "$tpl" \
  || fail 8 "the installed template" "$(ls "$root$KS_PREFIX/share/ksdist/examples" 2>&1)"
plugdir=$(pkg-config --variable=plugindir ksdist)
# libtool would link the libraries' .la files' own libdir (the prefix, not this temporary
# root): without them it takes pkg-config's -L, as the relocated ksdist.pc says
rm -f "$root$KS_LIBDIR"/*.la
if ! (cd "$tpl" && autoreconf -fi && ./configure CC="$CC" && $MAKE && $MAKE install) \
    >"$root/template.log" 2>&1; then
  fail 8 "the template builds and installs" "$(tail -n 20 "$root/template.log")"
fi
[ -f "$plugdir/signum.so" ] || fail 8 "make install put no signum.so into $plugdir" \
  "$(tail -n 10 "$root/template.log")"
run () { LD_LIBRARY_PATH="$root$KS_LIBDIR" KS_PLUGIN_SYSTEM_PATH="$plugdir" "$root$KS_BINDIR/ksdist" "$@"; }
out=$(run plugins 2>&1) || fail 8 "ksdist plugins" "$out"
case $out in
  *"signum       loaded    $plugdir/signum.so"*"optimizer signum: available"*) ;;
  *) fail 8 "ksdist plugins lists signum from $plugdir" "$out" ;;
esac
echo "ok 8 - the template builds with autotools, installs into plugindir ($plugdir), and ksdist plugins lists it"

# It trains, its setting is checked, and its `state` makes a resumed run an uninterrupted
# one: step 40's tensors (after the header, whose metadata differs from save to save).
tensors () {
  h=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
  tail -c +$((9 + h)) "$1" | sha256sum | cut -d' ' -f1
}
ex="$root$KS_PREFIX/share/ksdist/examples/default.ini"
set -- "$ex" --set train.optimizer=signum --set optim.lr=0.01 --set optim.warmup=0 \
  --set optim.schedule=constant --set train.checkpoint_every=20 --set log.level=warning
cd "$root" || exit 1
out=$(run config "$@" --set signum.betta=0.5 2>&1) && fail 9 "a wrong key of [signum] was taken" "$out"
case $out in *"unknown key 'betta' in [signum]; did you mean 'beta'?"*) ;;
  *) fail 9 "a wrong key of [signum]" "$out" ;; esac
run train "$@" --set train.steps=40 --set train.checkpoint_dir=whole >"$root/whole.log" 2>&1 \
  || fail 9 "training with signum" "$(tail -n 5 "$root/whole.log")"
run train "$@" --set train.steps=20 --set train.checkpoint_dir=part >"$root/part.log" 2>&1 \
  && run train "$@" --set train.steps=40 --set train.checkpoint_dir=part --set train.resume=true \
       >>"$root/part.log" 2>&1 || fail 9 "a resumed run with signum" "$(tail -n 5 "$root/part.log")"
run train "$@" --set train.steps=40 --set signum.beta=0 --set train.checkpoint_dir=beta0 \
  >"$root/beta0.log" 2>&1 || fail 9 "signum with beta 0" "$(tail -n 5 "$root/beta0.log")"
for f in model optimizer; do
  a=$(tensors "whole/checkpoint-40/$f.safetensors") b=$(tensors "part/checkpoint-40/$f.safetensors")
  [ -n "$a" ] && [ "$a" = "$b" ] || fail 9 "resumed at 20, step 40's $f tensors differ from an uninterrupted run's"
done
[ "$(tensors whole/checkpoint-40/model.safetensors)" != "$(tensors beta0/checkpoint-40/model.safetensors)" ] \
  || fail 9 "[signum] beta changed nothing"
echo "ok 9 - signum trains, [signum] beta is read and checked, and a run resumed at step 20 ends with an uninterrupted run's tensors"
