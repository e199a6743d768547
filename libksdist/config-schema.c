/* The core's configuration schema: every group and key the core itself reads.
 * Later work appends its groups here; plugins declare theirs in their descriptors. */
#include "ks-private.h"

static const KsKeyDesc core_schema[] = {
  { "plugins", "path", KS_VALUE_LIST, "", 1, 0, NULL,
    "Directories (or plugin files) searched after KS_PLUGIN_PATH and before the system "
    "directory; relative entries are relative to this config file" },
  { "plugins", "load", KS_VALUE_LIST, "", 1, 0, NULL,
    "Include list (gloo,openblas) or, starting with ^, exclude list (^mpi,cuda); empty "
    "loads every plugin found. KS_PLUGINS overrides it" },
  { "compute", "backend", KS_VALUE_STRING, "auto", 1, 0, NULL,
    "Compute implementation, a name listed by `ksdist plugins`, or auto for the available "
    "one of highest priority" },
  { "comm", "backend", KS_VALUE_STRING, "auto", 1, 0, NULL,
    "Communicator implementation, a name listed by `ksdist plugins`, or auto" },
  { "comm", "timeout", KS_VALUE_DOUBLE, "300", 0.001, 1e6, NULL,
    "Seconds a collective may wait before it fails, naming the ranks that did not answer" },
  { "job", "mode", KS_VALUE_STRING, "collective", 1, 0, NULL,
    "Distributed algorithm: collective, transpiler, pslib (or one a plugin provides)" },
  { "log", "level", KS_VALUE_CHOICE, "info", 1, 0, "error|warning|info|debug",
    "Least severe log messages shown" },
};

/* Plugins of the ksdist tree: a config may configure one that is not built on this
 * machine (a [cuda] group on a CPU-only build) and only gets a warning. */
static const char *const first_party_plugins[] = {
  "openblas", "cuda", "optim", "gloo", "nccl", "mpi", "collective", "transpiler", "pslib", NULL,
};

const KsKeyDesc *
ks_core_schema (gsize *n_keys)
{
  *n_keys = G_N_ELEMENTS (core_schema);
  return core_schema;
}

gboolean
ks_is_first_party_plugin (const char *name)
{
  return g_strv_contains (first_party_plugins, name);
}
