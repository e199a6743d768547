#!/bin/sh
# The bounded mutation run of fuzz-checkpoint over its corpus (TAP).
exec "$KS_BUILDDIR/tests/fuzz/fuzz-checkpoint" "$KS_SRCDIR/tests/fuzz/corpus/checkpoint"
