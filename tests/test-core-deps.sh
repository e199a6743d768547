#!/bin/sh
# The core (libksdist) and a program on it alone load no image or font library: those
# are the tasks library's (libksdist-tasks), which holds the models, data readers and
# Reptile the core no longer exports. Run in the build directory. TAP output.
set -u
images='gdk_pixbuf|libpng|libjpeg|libtiff|freetype|fontconfig'
lt=./libtool
echo "1..5"

loads () { # whether the object $1 (through libtool for a program) loads one of $images
  $lt --mode=execute ldd "$1" | grep -Eq "$images"
}

if loads .libs/libksdist.so; then
  echo "not ok 1 - libksdist.so loads an image or font library:"
  $lt --mode=execute ldd .libs/libksdist.so | grep -E "$images" | sed 's/^/# /'
else
  echo "ok 1 - libksdist.so loads no image or font library"
fi

if loads examples/own-model; then
  echo "not ok 2 - examples/own-model, a program on the core alone, loads an image library"
else
  echo "ok 2 - examples/own-model, a program on the core alone, loads no image library"
fi

# the check above can fail: the tasks library does load gdk-pixbuf where it was found
if ! grep -q '^#define HAVE_PIXBUF 1' config.h; then
  echo "ok 3 # SKIP built without gdk-pixbuf"
elif loads .libs/libksdist-tasks.so; then
  echo "ok 3 - libksdist-tasks.so loads gdk-pixbuf"
else
  echo "not ok 3 - libksdist-tasks.so should load gdk-pixbuf (the check of 1 and 2 sees nothing)"
fi

exports () { nm -D --defined-only "$1" | awk '{ print $3 }' | grep -Ex "$2" | sort | tr '\n' ' '; }
tasks='ks_gpt_build|ks_reptile_new|ks_image_set_open|ks_criteo_load|ks_builtin_task|ks_task_generate'
core=$(exports .libs/libksdist.so "$tasks")
lib=$(exports .libs/libksdist-tasks.so "$tasks")
if [ -z "$core" ] && [ "$(echo $lib | wc -w)" -eq 6 ]; then
  echo "ok 4 - the models, data readers and Reptile are the tasks library's, not the core's"
else
  echo "not ok 4 - the core exports [$core]; the tasks library [$lib] (all 6 expected)"
fi

# Both libraries export only what an installed header declares: the rest (their private
# headers' functions) is hidden, so no program or plugin comes to depend on it.
src=${KS_SRCDIR:-.}
if ! glib=$(pkg-config --cflags glib-2.0 2>/dev/null); then
  echo "ok 5 # SKIP pkg-config knows no glib-2.0: cannot preprocess the installed headers"
else
  for h in "$src"/include/ksdist/*.h; do echo "#include <ksdist/${h##*/}>"; done \
    | ${CC:-cc} -E -P -I"$src/include" -Iinclude $glib -x c - 2>/dev/null \
    | tr -c 'A-Za-z0-9_' '\n' | grep '^ks_' | sort -u > core-deps.declared
  undeclared=$(for lib in .libs/libksdist.so .libs/libksdist-tasks.so; do
    nm -D --defined-only "$lib" | awk '$2 == "T" { print $3 }'; done | sort -u \
    | comm -23 - core-deps.declared | tr '\n' ' ')
  if [ ! -s core-deps.declared ]; then
    echo "not ok 5 - the installed headers did not preprocess (${CC:-cc} -E)"
  elif [ -n "$undeclared" ]; then
    echo "not ok 5 - exported but in no installed header (declare them in a private header"
    echo "#   between #pragma GCC visibility push(hidden) and pop): $undeclared"
  else
    echo "ok 5 - libksdist and libksdist-tasks export only functions of installed headers"
  fi
  rm -f core-deps.declared
fi
