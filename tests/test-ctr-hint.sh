#!/bin/sh
# A missing data folder of the ctr task: the message names the setting, the file and the
# rule for relative paths, then the task's hint to make the data (`ksdist datagen ctr`),
# in `ksdist train` and `ksdist config` alike; another task's missing file gets no such
# hint. TAP output. Needs KSDIST and KS_SRCDIR (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-ctr-hint-XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
echo "1..3"
cp "$KS_SRCDIR/examples/ctr-pslib.ini" .
"$KSDIST" train ctr-pslib.ini > train.log 2>&1
rc=$?
want="[data] path = ctr-data (in ctr-pslib.ini:23): not found (relative paths are taken from the config file's folder $dir, then the current directory $dir); make the data with \`ksdist datagen ctr ctr-data\`"
if [ $rc -eq 2 ] && grep -qF "$want" train.log; then
  echo "ok 1 - ksdist train: the file, the rule and the hint"
else
  echo "not ok 1 - ksdist train without the ctr data (status $rc)"; sed 's/^/# /' train.log
fi
"$KSDIST" config ctr-pslib.ini --set data.path=nodata > /dev/null 2> config.log
rc=$?
if [ $rc -eq 2 ] && grep -qF "[data] path = nodata (--set): not found" config.log \
   && grep -qF "make the data with \`ksdist datagen ctr nodata\`" config.log; then
  echo "ok 2 - ksdist config: the same, for a path given by --set"
else
  echo "not ok 2 - ksdist config without the ctr data (status $rc)"; sed 's/^/# /' config.log
fi
printf '[data]\ntask = csv\npath = none.csv\n' > csv.ini
"$KSDIST" config csv.ini > /dev/null 2> csv.log
rc=$?
if [ $rc -eq 2 ] && grep -qF "[data] path = none.csv (in csv.ini:3): not found" csv.log \
   && ! grep -q "datagen" csv.log; then
  echo "ok 3 - another task's missing file: no datagen hint"
else
  echo "not ok 3 - a missing CSV file (status $rc)"; sed 's/^/# /' csv.log
fi
