#!/bin/sh
# The bounded mutation run of fuzz-table over its corpus (TAP).
exec "$KS_BUILDDIR/tests/fuzz/fuzz-table" "$KS_SRCDIR/tests/fuzz/corpus/table"
