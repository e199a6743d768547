/* Names of the shared enums, error domains, and the version. */
#include "ks-private.h"

G_DEFINE_QUARK (ks-config-error-quark, ks_config_error)
G_DEFINE_QUARK (ks-plugin-error-quark, ks_plugin_error)
G_DEFINE_QUARK (ks-compute-error-quark, ks_compute_error)
G_DEFINE_QUARK (ks-comm-error-quark, ks_comm_error)

const char *
ks_version (void)
{
  return KS_VERSION;
}

gsize
ks_dtype_size (KsDType dtype)
{
  switch (dtype)
    {
    case KS_DTYPE_FLOAT32: case KS_DTYPE_INT32: return 4;
    case KS_DTYPE_FLOAT64: case KS_DTYPE_INT64: return 8;
    case KS_DTYPE_FLOAT16: case KS_DTYPE_BFLOAT16: return 2;
    case KS_DTYPE_UINT8: return 1;
    }
  return 0;
}

const char *
ks_dtype_name (KsDType dtype)
{
  static const char *const names[] = { "float32", "float64", "int32", "int64",
                                       "float16", "bfloat16", "uint8" };
  return (guint) dtype < G_N_ELEMENTS (names) ? names[dtype] : "?";
}

const char *
ks_reduce_op_name (KsReduceOp op)
{
  static const char *const names[] = { "sum", "min", "max", "avg", "prod" };
  return (guint) op < G_N_ELEMENTS (names) ? names[op] : "?";
}

const char *
ks_kind_name (KsKind kind)
{
  static const char *const names[] = { "compute", "comm", "store", "role_maker",
                                       "segmenter", "optimizer", "algorithm" };
  G_STATIC_ASSERT (G_N_ELEMENTS (names) == KS_KIND_COUNT);
  return (guint) kind < G_N_ELEMENTS (names) ? names[kind] : "?";
}

const char *
ks_plugin_state_name (KsPluginState state)
{
  static const char *const names[] = { "loaded", "rejected", "shadowed", "excluded" };
  return (guint) state < G_N_ELEMENTS (names) ? names[state] : "?";
}

gboolean
ks_set_not_supported (GError **error, const char *plugin, KsKind kind, const char *method)
{
  g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_NOT_SUPPORTED,
               "%s.%s is not supported by plugin '%s': update the plugin or choose another "
               "%s implementation",
               ks_kind_name (kind), method, plugin, ks_kind_name (kind));
  return FALSE;
}

gboolean
ks_fail_valist (GError **error, GQuark domain, int code, const char *format, va_list args)
{
  if (error != NULL)
    g_propagate_error (error, g_error_new_valist (domain, code, format, args));
  return FALSE;
}

gboolean
ks_fail (GError **error, GQuark domain, int code, const char *format, ...)
{
  va_list args;
  va_start (args, format);
  ks_fail_valist (error, domain, code, format, args);
  va_end (args);
  return FALSE;
}
