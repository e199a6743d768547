/* Held-out windows of a language model scored once each: what the token and text tasks
 * share. */
#include "net.h"

#include <ksdist/trainer.h>

gboolean
net_eval_windows (KsTrainer *t, gsize windows, gsize context, NetFillRow fill, gpointer data,
                  double *mean, gsize *tokens, GError **error)
{
  gsize batch = ks_trainer_batch (t), cap = ks_trainer_eval_cap (t);
  double sum = 0;
  if (cap > 0 && cap < windows)
    {
      ks_trainer_set_eval_total (t, windows * context);
      windows = cap;
    }
  for (gsize first = 0; first < windows; first += batch)
    {
      gsize rows = MIN (batch, windows - first), n_feeds;
      double v;
      for (gsize r = 0; r < rows; r++)
        fill (data, r, first + r);
      const KsFeed *feeds = ks_trainer_feeds (t, &n_feeds);
      if (!ks_trainer_metric_sum (t, feeds, n_feeds, ks_trainer_loss (t), rows, &v, error))
        return FALSE;
      sum += v;
    }
  *mean = sum / (double) windows;
  if (tokens != NULL)
    *tokens = windows * context;
  return TRUE;
}
