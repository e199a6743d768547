/* Kernels built twice, for x86-64-v3 (AVX2 and FMA: twice the vector width) and for the
 * baseline the plugins are built for; the loader picks one for the machine (GCC's
 * target_clones, through an ifunc). Whether both clones give the same bits is each
 * kernel's own affair: FMA rounds once where a multiply and an add round twice. */
#ifndef KS_PLUGINS_TARGET_CLONES_H
#define KS_PLUGINS_TARGET_CLONES_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KS_VECTOR_KERNEL __attribute__ ((target_clones ("arch=x86-64-v3", "default")))
#else
#define KS_VECTOR_KERNEL
#endif

#endif
