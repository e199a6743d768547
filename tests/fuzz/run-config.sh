#!/bin/sh
# The bounded mutation run of fuzz-config over its corpus (TAP).
exec "$KS_BUILDDIR/tests/fuzz/fuzz-config" "$KS_SRCDIR/examples"
