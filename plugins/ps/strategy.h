/* The parameter-server modes and their settings, from [strategy] (both ksdist's form,
 * mode = ..., and Paddle's, a_sync and k_steps). */
#ifndef KS_PS_STRATEGY_H
#define KS_PS_STRATEGY_H

#include <ksdist/ksdist.h>

typedef enum { PS_MODE_SYNC, PS_MODE_HALF_ASYNC, PS_MODE_ASYNC, PS_MODE_GEO } PsMode;

typedef struct {
  PsMode mode;
  gint64 k_steps;           /* GEO: local steps between pushes */
  gint64 send_queue_size;   /* async: gradients waiting to be sent */
  gint64 max_merge_var_num; /* async: gradients merged into one push */
  /* GEO: a server refuses a delta whose L2 norm is above this times max(norm of its
   * values, sqrt of their count); 0: no bound */
  double max_update_norm;
  /* async: a server divides [optim] lr by each push's staleness (false: the rate as it is) */
  gboolean staleness_lr;
} PsStrategy;

const char *ps_mode_name (PsMode mode);
/* Reads [strategy]; an impossible combination is a KS_CONFIG_ERROR naming the keys. */
gboolean ps_strategy_read (const KsConfig *config, PsStrategy *out, GError **error);

#endif
