/* Passes over a message's floats (the checks and sums of every push and reply): each is
 * one pass as fast as memory allows, since the sync step waits on them at both ends. */
#ifndef KS_PS_FLOATS_H
#define KS_PS_FLOATS_H

#include <glib.h>

/* The index of the first float that is NaN or infinite, or n when every one is finite. */
gsize ps_floats_nonfinite (const float *v, gsize n);
/* The Euclidean norm, accumulated in double (in an order of its own: the last bits may
 * differ from a plain loop's; it bounds and watches, it is never applied). */
double ps_floats_norm (const float *v, gsize n);
/* dst[i] += src[i] (dst and src do not overlap). */
void ps_floats_add (float *dst, const float *src, gsize n);
/* v[i] /= d. */
void ps_floats_divide (float *v, gsize n, float d);

#endif
