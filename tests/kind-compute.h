/* The compute conformance suite's shared parts (test-kind-compute.c: the fixture, the
 * copies, memory, products and elementwise ops; kind-compute-ops.c: the rest). */
#ifndef KS_KIND_COMPUTE_H
#define KS_KIND_COMPUTE_H

#include "ref-ops.h"
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
