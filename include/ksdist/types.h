/* ksdist — types shared by every interface: data types, reductions, errors.
 *
 * For everyone: every other header includes it. */
#ifndef KSDIST_TYPES_H
#define KSDIST_TYPES_H

#include <glib.h>

G_BEGIN_DECLS

/* Element types of tensors and of communicator buffers. Values are ABI: append only. */
typedef enum {
  KS_DTYPE_FLOAT32 = 0,
  KS_DTYPE_FLOAT64 = 1,
  KS_DTYPE_INT32 = 2,
  KS_DTYPE_INT64 = 3,
  KS_DTYPE_FLOAT16 = 4,
  KS_DTYPE_BFLOAT16 = 5,
  KS_DTYPE_UINT8 = 6,
} KsDType;

gsize ks_dtype_size (KsDType dtype);
const char *ks_dtype_name (KsDType dtype);

/* Reductions of allreduce, reduce-scatter and the role maker's all_reduce_worker. */
typedef enum {
  KS_REDUCE_SUM = 0,
  KS_REDUCE_MIN = 1,
  KS_REDUCE_MAX = 2,
  KS_REDUCE_AVG = 3,
  KS_REDUCE_PROD = 4,
} KsReduceOp;

const char *ks_reduce_op_name (KsReduceOp op);

/* For "did you mean": the candidate nearest to `word` by edit distance (case-blind),
 * or NULL when none is near enough to be a likely typo. */
const char *ks_suggest (const char *word, const char *const *candidates, gsize n);

/* `message` with every run of more than 256 bytes without a blank cut to its first 200
 * and "... (N bytes)": a value pasted whole into a message (a 16 MB path) stays a line
 * a person can read. Newly allocated. */
char *ks_message_shorten (const char *message);

/* One error domain per area; messages name the file, line, key, rank or path. */
#define KS_CONFIG_ERROR (ks_config_error_quark ())
#define KS_PLUGIN_ERROR (ks_plugin_error_quark ())
#define KS_COMPUTE_ERROR (ks_compute_error_quark ())
#define KS_COMM_ERROR (ks_comm_error_quark ())
GQuark ks_config_error_quark (void);
GQuark ks_plugin_error_quark (void);
GQuark ks_compute_error_quark (void);
GQuark ks_comm_error_quark (void);

/* Sets *error (unless `error` is NULL) to a new error of `domain` and `code` with the
 * printf-style message, and returns FALSE, so that a failure is one statement:
 *   return ks_fail (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE, "[%s] %s: ...", ...);
 * An error already set is replaced with a warning, as g_set_error does. */
gboolean ks_fail (GError **error, GQuark domain, int code, const char *format, ...)
    G_GNUC_PRINTF (4, 5);
/* The same with the arguments as a va_list, for a helper that adds a prefix. */
gboolean ks_fail_valist (GError **error, GQuark domain, int code, const char *format,
                         va_list args) G_GNUC_PRINTF (4, 0);

typedef enum {
  KS_CONFIG_ERROR_IO,            /* the file cannot be read */
  KS_CONFIG_ERROR_SYNTAX,        /* a line is not [group], key = value or a comment */
  KS_CONFIG_ERROR_UNKNOWN_GROUP, /* the group is not in the schema */
  KS_CONFIG_ERROR_UNKNOWN_KEY,   /* the key is not in its group's schema */
  KS_CONFIG_ERROR_BAD_VALUE,     /* wrong type, out of range, not one of the choices */
  KS_CONFIG_ERROR_DUPLICATE,     /* a key given twice in one group */
  KS_CONFIG_ERROR_USAGE,         /* a malformed --set argument */
} KsConfigError;

typedef enum {
  KS_PLUGIN_ERROR_NOT_FOUND,     /* no plugin/implementation of that name */
  KS_PLUGIN_ERROR_UNAVAILABLE,   /* found, but its query says it cannot run here */
  KS_PLUGIN_ERROR_NOT_SUPPORTED, /* the plugin lacks the vtable slot */
  KS_PLUGIN_ERROR_INVALID,       /* bad include/exclude list, bad descriptor */
  KS_PLUGIN_ERROR_FAILED,        /* the plugin itself reported a failure */
} KsPluginError;

typedef enum {
  KS_COMPUTE_ERROR_NO_MEMORY,
  KS_COMPUTE_ERROR_INVALID,
  KS_COMPUTE_ERROR_DEVICE,
} KsComputeError;

typedef enum {
  KS_COMM_ERROR_TIMEOUT,
  KS_COMM_ERROR_PEER_LOST,
  KS_COMM_ERROR_INVALID,
  KS_COMM_ERROR_FAILED,
} KsCommError;

G_END_DECLS

#endif
