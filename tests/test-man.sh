#!/bin/sh
# ksdist(1), as the build made it (doc/make-man.sh), holds every command of `ksdist
# --help`, every option of each command's help and every key of the core's and the tasks library's settings,
# and man reads it without a warning (where man is installed). TAP output. Needs KSDIST
# (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
page="$(dirname "$KSDIST")/../doc/ksdist.1"
echo "1..4"
if [ ! -s "$page" ]; then
  echo "not ok 1 - $page was not made"; echo "not ok 2"; echo "not ok 3"; echo "not ok 4"
  exit 0
fi
commands=$("$KSDIST" --help | awk '/^Commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }')
missing=
for c in $commands; do
  [ "$c" = help ] || grep -q "^\.SS \"ksdist $c " "$page" || missing="$missing $c"
done
if [ -z "$missing" ]; then echo "ok 1 - every command has its section ($(echo $commands | wc -w) commands)"
else echo "not ok 1 - commands without a section:$missing"; fi

missing=
for c in $commands; do
  [ "$c" != help ] || continue
  # the long name of each option, from the column before its help
  for option in $("$KSDIST" help "$c" | awk '/^Application Options:/ { on = 1; next } !NF { on = 0 }
                                            on { sub (/^ +/, ""); split ($0, column, /  +/)
                                                 if (match (column[1], /--[a-z0-9_-]+/))
                                                   print substr (column[1], RSTART, RLENGTH) }'); do
    grep -qF -- "$(echo "$option" | sed 's/-/\\-/g')" "$page" || missing="$missing $c:$option"
  done
done
if [ -z "$missing" ]; then echo "ok 2 - every option of every command is there"
else echo "not ok 2 - options missing:$missing"; fi

keys=$("$KSDIST" config --reference | awk '/^## / { part = ($0 !~ /plugins/); core = 0 }
                                            /^### / { core = part && ($0 !~ /\(plugin\)/) }
                                            core && /^\| `/ { print $2 }' | tr -d '`')
missing=
for k in $keys; do
  grep -q "^\.B $k\$" "$page" || missing="$missing $k"
done
if [ -z "$missing" ]; then echo "ok 3 - every core key is there ($(echo $keys | wc -w) keys)"
else echo "not ok 3 - keys missing:$missing"; fi

if command -v man >/dev/null 2>&1; then
  warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
  if [ -z "$warnings" ]; then echo "ok 4 - man reads it without a warning"
  else echo "not ok 4 - man warns:"; echo "$warnings" | sed 's/^/# /' | head -20; fi
else
  echo "ok 4 # SKIP man is not installed"
fi
