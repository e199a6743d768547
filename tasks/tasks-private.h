/* Internal declarations of libksdist-tasks; not installed. */
#ifndef KS_TASKS_PRIVATE_H
#define KS_TASKS_PRIVATE_H

#include <config.h>
#include <ksdist/tasks.h>

/* the library's insides: not exported (it exports ksdist/tasks.h's API only) */
#pragma GCC visibility push(hidden)

G_BEGIN_DECLS

/* The keys the library reads, a table per group beside the code that reads it, each
 * ended by { NULL }: builtin.c ([model]), samples.c ([data]), meta-task.c ([meta]),
 * net-config.c ([layer.*]). ks_tasks_add_schema adds them to a configuration. */
extern const KsKeyDesc ks_tasks_model_keys[];
extern const KsKeyDesc ks_tasks_data_keys[];
extern const KsKeyDesc ks_tasks_meta_keys[];
extern const KsKeyDesc ks_tasks_layer_keys[];

/* sets KS_COMPUTE_ERROR_INVALID, the error of a bad argument or data; FALSE */
static inline G_GNUC_PRINTF (2, 3) gboolean
ks_tasks_invalid (GError **error, const char *format, ...)
{
  va_list args;
  va_start (args, format);
  g_propagate_error (error, g_error_new_valist (KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID,
                                                format, args));
  va_end (args);
  return FALSE;
}

/* sets KS_CONFIG_ERROR_BAD_VALUE, a setting to change; FALSE */
static inline G_GNUC_PRINTF (2, 3) gboolean
ks_tasks_config_error (GError **error, const char *format, ...)
{
  va_list args;
  va_start (args, format);
  g_propagate_error (error, g_error_new_valist (KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                                                format, args));
  va_end (args);
  return FALSE;
}

G_END_DECLS

#pragma GCC visibility pop

#endif
