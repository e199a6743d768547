/* The store kinds (KsStoreKind, comm.h) and the implementations of plugins/store that
 * are them: the one place that maps one to the other, so the trainer and the tools ask
 * for a kind and never name or compare an implementation. */
#include "ks-private.h"

#include <string.h>

static const char *const kind_names[] = {
  [KS_STORE_KIND_DIRECTORY] = "file",
  [KS_STORE_KIND_SERVED] = "tcp",
  [KS_STORE_KIND_TORCH] = "c10d",
};

const char *
ks_store_kind_name (KsStoreKind kind)
{
  g_return_val_if_fail ((guint) kind < G_N_ELEMENTS (kind_names), NULL);
  return kind_names[kind];
}

gboolean
ks_store_kind_is (const char *name, KsStoreKind kind)
{
  return name != NULL && (guint) kind < G_N_ELEMENTS (kind_names)
         && strcmp (name, kind_names[kind]) == 0;
}
