/* The kinds of store a job meets at, by what their address is: the one place that maps
 * them to the store plugin's implementations, so the trainer asks for a kind and never
 * names or compares an implementation. */
#pragma once

#include <glib.h>

#pragma GCC visibility push(hidden)

typedef enum {
  KS_STORE_KIND_DIRECTORY, /* a directory every rank can reach (one host, a shared disk) */
  KS_STORE_KIND_SERVED,    /* HOST:PORT of a server one process of the job hosts */
  KS_STORE_KIND_TORCH,     /* PyTorch's TCPStore, which torchrun's agent hosts */
} KsStoreKind;

/* The store implementation of `kind` ([comm] store's value). */
const char *ks_store_kind_name (KsStoreKind kind);
/* Whether the store implementation `name` is of `kind` (FALSE for a name no kind has). */
gboolean ks_store_kind_is (const char *name, KsStoreKind kind);

#pragma GCC visibility pop
