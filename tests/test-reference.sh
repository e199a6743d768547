#!/bin/sh
# doc/config.md is what `ksdist config --reference` prints: every group and key, the
# core's, the tasks library's and the plugins', each under who reads it, with its
# default, range and meaning, so the reference cannot drift from the program. Where this
# build lacks a plugin the file lists (CUDA, say), the core's and the tasks library's
# groups and the plugins both have are compared. TAP output. Needs KSDIST and KS_SRCDIR
# (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-reference-XXXXXX")
trap 'rm -rf "$dir"' EXIT
echo "1..1"
doc="$KS_SRCDIR/doc/config.md"
if ! "$KSDIST" config --reference > "$dir/now.md" 2> "$dir/err"; then
  echo "not ok 1 - ksdist config --reference failed"; sed 's/^/# /' "$dir/err"
  exit 0
fi
# the sections of the groups both know: a plugin's group ("### [NAME] (plugin)") only if
# its plugin is in both; the readers' sections ("## ...") and their text always
sections () { # file, plugins to keep (space-separated)
  awk -v keep=" $2 " '
    /^## / { show = 1 }
    /^### / { name = $2; gsub (/[][]/, "", name);
              show = ($0 !~ /\(plugin\)/) || index (keep, " " name " ") > 0 }
    /^Every group/ { next }
    show || !/^(#|\|)/ && !started { print }
    /^## / { started = 1 }' "$1" | grep -v '^$'
}
plugins () { sed -n 's/.*plugins found when it was made (\([^)]*\)).*/\1/p' "$1" | tr -d ','; }
if [ "$(plugins "$dir/now.md")" = "$(plugins "$doc")" ]; then
  if diff -u "$doc" "$dir/now.md" > "$dir/diff"; then
    echo "ok 1 - doc/config.md is what ksdist config --reference prints ($(grep -c '^| `' "$doc") keys)"
  else
    echo "not ok 1 - doc/config.md differs from ksdist config --reference: regenerate it with"
    echo "#   tools/ksdist config --reference > doc/config.md"
    sed 's/^/# /' "$dir/diff" | head -40
  fi
else
  both=
  for p in $(plugins "$doc"); do
    case " $(plugins "$dir/now.md") " in *" $p "*) both="$both $p" ;; esac
  done
  sections "$doc" "$both" > "$dir/a"
  sections "$dir/now.md" "$both" > "$dir/b"
  if diff -u "$dir/a" "$dir/b" > "$dir/diff"; then
    echo "ok 1 - doc/config.md agrees with ksdist config --reference on the core and the plugins built here ($both; the file lists $(plugins "$doc"))"
  else
    echo "not ok 1 - doc/config.md differs from ksdist config --reference"; sed 's/^/# /' "$dir/diff" | head -40
  fi
fi
