/* Fuzz targets for hostile input: each defines libFuzzer's entry points, so the same file
 * builds with `clang -fsanitize=fuzzer,address` for coverage-guided runs, and with
 * driver.c (any compiler) for the bounded mutation run `make check` does. */
#ifndef KS_FUZZ_H
#define KS_FUZZ_H

#include <glib.h>
#include <stdint.h>
#include <stdio.h>

/* Called once before the first input (argv of the program). */
int LLVMFuzzerInitialize (int *argc, char ***argv);
/* One input; must not crash, hang or leak whatever the bytes. Returns 0. */
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* A default log handler for the targets: the code's own warnings about the bad input are
 * expected and dropped; a critical is a bug and is printed (G_DEBUG=fatal-criticals in
 * make check then ends the run). */
static inline void
fuzz_log_handler (const char *domain, GLogLevelFlags level, const char *message, gpointer data)
{
  if (level & (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_ERROR))
    fprintf (stderr, "%s: %s\n", domain ? domain : "", message);
}

#endif
