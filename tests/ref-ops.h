/* References for the compute tests (test-kernels on the CPU backend, test-kind-compute on
 * every backend): what each kernel should give, computed here in double precision from
 * the formulas, and the finite-difference check of a backward kernel. */
#ifndef KS_REF_OPS_H
#define KS_REF_OPS_H

#include <ksdist/ksdist.h>

/* Asserts |got - want| <= tol * (1 + |want|), naming the check and index on failure. */
void ks_test_assert_close (const char *what, gsize i, double got, double want, double tol);
/* sum (w[i] * y[i]) in double: L = sum (w * y) has dL/dy = w. */
double ks_test_weighted_sum (const float *w, const float *y, gsize n);

/* L(x), run on the backend that `ctx` (the test's fixture) holds, for finite differences. */
typedef double (*KsTestLoss) (gpointer ctx, const float *x, gpointer data);
/* Asserts grad[i] = dL/dx[i] by central differences of step h (relative tolerance tol);
 * x is changed one element at a time and restored. */
void ks_test_check_gradient (gpointer ctx, const char *what, KsTestLoss loss, gpointer data,
                             float *x, gsize n, const float *grad, double h, double tol);

/* y = op (x); GELU in the tanh form compute.h names (GPT-2's). */
double ks_test_reference_unary (KsUnaryOp op, double x);
/* Softmax (or log-softmax) of each row of x [rows, cols] into y. */
void ks_test_reference_softmax (const float *x, gsize rows, gsize cols, gboolean log_softmax,
                                double *y);
/* Layer norm of each row: y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt (var + eps)
 * with the biased variance. */
void ks_test_reference_layer_norm (const float *x, const float *gamma, const float *beta,
                                   gsize rows, gsize cols, double eps, double *y, double *mean,
                                   double *rstd);
/* Each row's loss: log (sum exp (x)) - x[label]. */
void ks_test_reference_cross_entropy (const float *x, const gint64 *labels, gsize rows,
                                      gsize cols, double *losses);
/* One step (a->step) of a->rule on n values, from the textbook formulas: p, s1 and s2 (the
 * rule's state, zero at first) are updated in place with the gradient g. */
void ks_test_reference_update (const KsUpdateArgs *a, double *p, double *s1, double *s2,
                               const float *g, gsize n);

#endif
