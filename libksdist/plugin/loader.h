/* Opening and validating one plugin file (internal to the registry). */
#ifndef KS_LOADER_H
#define KS_LOADER_H

#include "ks-private.h"

/* the library's insides: not exported (libksdist.so exports the public API only) */
#pragma GCC visibility push(hidden)

/* Opens `path` and returns its validated descriptor, or NULL with a reason. */
const KsPluginDesc *ks_loader_open (const char *path, const char *file_name, char **reason);
/* A reason to refuse `path` or its directory for their owner or mode, or NULL. */
char *ks_loader_check_permissions (const char *path);
/* A reason the descriptor is unusable (ABI, name, vtables, settings), or NULL. */
char *ks_loader_check_descriptor (const KsPluginDesc *desc, const char *file_name);

#pragma GCC visibility pop

#endif
