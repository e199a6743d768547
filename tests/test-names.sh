#!/bin/sh
# Names that one place owns are written only there: the store implementations ("tcp",
# "file", "c10d") in libksdist/comm/store-kinds.c (the tools and the trainer ask for a
# kind, ks_store_kind_name), the schema's default of [comm] store aside; the tasks
# library's tasks (gpt, mlp, ctr, layers, reptile) and its input files ([data] path,
# test_path, labels, test_labels: KS_VALUE_PATH in its schema) in tasks/, never in the
# core. A string literal elsewhere fails, naming the file and line. TAP output.
set -u
src=${KS_SRCDIR:-.}
n=0
failed=0

# literal STRINGS-REGEX EXCLUDED-REGEX DIR...: the lines of C files under DIR that hold one
literal () {
  want=$1 except=$2
  shift 2
  (cd "$src" && grep -rnE --include='*.c' --include='*.h' "\"($want)\"" "$@" | grep -vE "$except")
}

n=$((n + 1))
found=$(literal 'tcp|file|c10d' '^libksdist/comm/store-kinds\.c:|^libksdist/config/config-schema\.c:' \
  libksdist tools)
if [ -z "$found" ]; then
  echo "ok $n - store implementations are named only in libksdist/comm/store-kinds.c"
else
  failed=1
  echo "not ok $n - a store implementation named outside store-kinds.c (use ks_store_kind_name):"
  echo "$found" | sed 's/^/# /'
fi

n=$((n + 1))
found=$(literal 'gpt|mlp|ctr|layers|reptile|data\.(path|test_path|labels|test_labels)' '^$' libksdist)
if [ -z "$found" ]; then
  echo "ok $n - the core (libksdist/) names no task of the tasks library, nor its input files"
else
  failed=1
  echo "not ok $n - the core names a task or a task's key (let the task declare it: KsTrainTask,"
  echo "# its schema's KS_VALUE_PATH):"
  echo "$found" | sed 's/^/# /'
fi

echo "1..$n"
exit $failed
