/* Fuzz targets for hostile input: each defines libFuzzer's entry points, so the same file
 * builds with `clang -fsanitize=fuzzer,address` for coverage-guided runs, and with
 * driver.c (any compiler) for the bounded mutation run `make check` does. */
#ifndef KS_FUZZ_H
#define KS_FUZZ_H

#include <glib.h>
#include <stdint.h>

/* Called once before the first input (argv of the program). */
int LLVMFuzzerInitialize (int *argc, char ***argv);
/* One input; must not crash, hang or leak whatever the bytes. Returns 0. */
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#endif
