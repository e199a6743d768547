/* The compute conformance suite's shared parts (test-kind-compute.c: the fixture, the
 * copies, memory, products and elementwise ops; kind-compute-ops.c: the rest). */
#ifndef KS_KIND_COMPUTE_H
#define KS_KIND_COMPUTE_H

#include "testutil.h"

#include <ksdist/half.h>
#include <math.h>
#include <string.h>

typedef struct {
  KsConfig *config;
  KsRegistry *registry;
  KsCompute *c; /* NULL when the backend cannot run here: the test is skipped */
  guint32 traits;
  GRand *rng;
} Fixture;

/* n floats or bytes from the host into new backend memory; a host copy of n floats at
 * `dev`, which is freed */
void *up (Fixture *f, const void *host, gsize nbytes);
float *upf (Fixture *f, const float *host, gsize n);
float *down (Fixture *f, float *dev, gsize n);
/* FALSE, with the test skipped, when the call failed because the slot is missing. */
gboolean has_slot (GError **error, const char *slot);
/* Asserts |got - want| <= tol * (1 + |want|), naming the check and index on failure. */
void assert_close (const char *what, gsize i, double got, double want, double tol);
double weighted_sum (const float *w, const float *y, gsize n);
/* L(x) = sum (w * forward (x)), run on the backend, for finite differences. */
typedef double (*Loss) (Fixture *f, const float *x, gpointer data);
/* grad[i] = dL/dx[i] by central differences of step h. */
void check_gradient (Fixture *f, const char *what, Loss loss, gpointer data, float *x, gsize n,
                     const float *grad, double h, double tol);

/* kind-compute-ops.c */
void test_softmax (Fixture *f, gconstpointer data);
void test_layer_norm (Fixture *f, gconstpointer data);
void test_cross_entropy (Fixture *f, gconstpointer data);
void test_embedding (Fixture *f, gconstpointer data);
void test_transpose (Fixture *f, gconstpointer data);
void test_dropout_mask (Fixture *f, gconstpointer data);
void test_update (Fixture *f, gconstpointer data);
void test_im2col (Fixture *f, gconstpointer data);
void test_pools (Fixture *f, gconstpointer data);
void test_batch_norm (Fixture *f, gconstpointer data);
void test_half (Fixture *f, gconstpointer data);

#endif
