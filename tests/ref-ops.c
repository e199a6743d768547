/* References for the compute tests (ref-ops.h). */
#include "ref-ops.h"

#include <math.h>

void
ks_test_assert_close (const char *what, gsize i, double got, double want, double tol)
{
  if (!(fabs (got - want) <= tol * (1 + fabs (want)))) /* NaN fails too */
    g_error ("%s[%" G_GSIZE_FORMAT "]: got %.7g, want %.7g (tolerance %g)", what, i, got, want,
             tol);
}

double
ks_test_weighted_sum (const float *w, const float *y, gsize n)
{
  double s = 0;
  for (gsize i = 0; i < n; i++)
    s += (double) w[i] * y[i];
  return s;
}

void
ks_test_check_gradient (gpointer ctx, const char *what, KsTestLoss loss, gpointer data,
                        float *x, gsize n, const float *grad, double h, double tol)
{
  for (gsize i = 0; i < n; i++)
    {
      float saved = x[i];
      x[i] = saved + (float) h;
      double hi = loss (ctx, x, data);
      x[i] = saved - (float) h;
      double lo = loss (ctx, x, data);
      x[i] = saved;
      ks_test_assert_close (what, i, grad[i], (hi - lo) / (2 * h), tol);
    }
}

double
ks_test_reference_unary (KsUnaryOp op, double x)
{
  switch (op)
    {
    case KS_UNARY_RELU: return fmax (x, 0);
    case KS_UNARY_TANH: return tanh (x);
    case KS_UNARY_SIGMOID: return 1 / (1 + exp (-x));
    case KS_UNARY_GELU: return 0.5 * x * (1 + tanh (sqrt (2 / G_PI) * (x + 0.044715 * x * x * x)));
    case KS_UNARY_EXP: return exp (x);
    case KS_UNARY_LOG: return log (x);
    case KS_UNARY_NEG: return -x;
    case KS_UNARY_SQRT: return sqrt (x);
    }
  return NAN;
}

void
ks_test_reference_softmax (const float *x, gsize rows, gsize cols, gboolean log_softmax,
                           double *y)
{
  for (gsize r = 0; r < rows; r++)
    {
      const float *row = x + r * cols;
      double mx = -INFINITY, sum = 0;
      for (gsize j = 0; j < cols; j++)
        mx = fmax (mx, row[j]);
      for (gsize j = 0; j < cols; j++)
        sum += exp (row[j] - mx);
      for (gsize j = 0; j < cols; j++)
        {
          double lp = row[j] - mx - log (sum);
          y[r * cols + j] = log_softmax ? lp : exp (lp);
        }
    }
}

void
ks_test_reference_layer_norm (const float *x, const float *gamma, const float *beta,
                              gsize rows, gsize cols, double eps, double *y, double *mean,
                              double *rstd)
{
  for (gsize r = 0; r < rows; r++)
    {
      const float *row = x + r * cols;
      double mu = 0, var = 0;
      for (gsize j = 0; j < cols; j++)
        mu += row[j];
      mu /= cols;
      for (gsize j = 0; j < cols; j++)
        var += (row[j] - mu) * (row[j] - mu);
      double rs = 1 / sqrt (var / cols + eps);
      mean[r] = mu, rstd[r] = rs;
      for (gsize j = 0; j < cols; j++)
        y[r * cols + j] = (row[j] - mu) * rs * gamma[j] + beta[j];
    }
}

void
ks_test_reference_cross_entropy (const float *x, const gint64 *labels, gsize rows, gsize cols,
                                 double *losses)
{
  for (gsize r = 0; r < rows; r++)
    {
      double sum = 0;
      for (gsize j = 0; j < cols; j++)
        sum += exp (x[r * cols + j]);
      losses[r] = log (sum) - x[r * cols + labels[r]];
    }
}

void
ks_test_reference_update (const KsUpdateArgs *a, double *p, double *s1, double *s2,
                          const float *g, gsize n)
{
  double wd = a->weight_decay;
  for (gsize i = 0; i < n; i++)
    {
      double gi = g[i] + (a->rule == KS_UPDATE_ADAMW ? 0 : wd * p[i]); /* AdamW: decoupled */
      switch (a->rule)
        {
        case KS_UPDATE_SGD: p[i] -= a->lr * gi; break;
        case KS_UPDATE_MOMENTUM:
          s1[i] = a->momentum * s1[i] + gi;
          p[i] -= a->lr * (a->nesterov ? gi + a->momentum * s1[i] : s1[i]);
          break;
        case KS_UPDATE_ADAGRAD:
          s1[i] += gi * gi;
          p[i] -= a->lr * gi / (sqrt (s1[i]) + a->eps);
          break;
        case KS_UPDATE_ADAM:
        case KS_UPDATE_ADAMW:
          if (a->rule == KS_UPDATE_ADAMW)
            p[i] *= 1 - a->lr * wd;
          s1[i] = a->beta1 * s1[i] + (1 - a->beta1) * gi;
          s2[i] = a->beta2 * s2[i] + (1 - a->beta2) * gi * gi;
          p[i] -= a->lr * (s1[i] / (1 - pow (a->beta1, a->step)))
                  / (sqrt (s2[i] / (1 - pow (a->beta2, a->step))) + a->eps);
          break;
        }
    }
}
