#!/bin/sh
# Installs ksdist into a temporary root, builds a plugin outside the tree against the
# installed headers with `pkg-config ksdist`, and loads it with the installed ksdist; a
# program on the tasks library runs. TAP output. Needs from the environment
# (tests/local.mk): MAKE, CC, KS_BUILDDIR, KS_SRCDIR, KS_PREFIX, KS_LIBDIR, KS_BINDIR, and
# KS_PROGRAM_FLAGS (the build's warnings and sanitizers: a program linked against
# sanitized libraries must be built with them too).
set -u
echo "1..7"
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

# Every installed header compiles alone (a user includes only what they use); ksdist.h
# stays the one-include convenience.
flags=$(pkg-config --cflags ksdist-tasks) || fail 7 "pkg-config ksdist-tasks"
alone=0
for h in "$root$KS_PREFIX"/include/ksdist/*.h; do
  name=$(basename "$h")
  # shellcheck disable=SC2086
  printf '#include <ksdist/%s>\n' "$name" | $CC -fsyntax-only -Wall -Werror -x c - $flags \
      >"$root/cc.log" 2>&1 || fail 7 "<ksdist/$name> does not compile alone" "$(head -n 5 "$root/cc.log")"
  alone=$((alone + 1))
done
[ $alone -ge 25 ] || fail 7 "only $alone installed headers found in $root$KS_PREFIX/include/ksdist"
echo "ok 7 - each of the $alone installed headers compiles alone"
