#!/bin/sh
# The bounded mutation run of fuzz-store over its corpus (TAP).
exec "$KS_BUILDDIR/tests/fuzz/fuzz-store" "$KS_SRCDIR/tests/fuzz/corpus/store"
