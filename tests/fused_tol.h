/* fused_tol.h — the tolerance of the cache tests' fused-vs-reference attention comparisons,
 * per method (test_cache*.c). */
#ifndef VQ_FUSED_TOL_H
#define VQ_FUSED_TOL_H

#include "veloxquant.h"

/* Relative error allowed between vq_cache_attend and vq_cache_attend_ref (decode, then exact
 * attention) for a method: fp16 and KIVI 5e-3, float rounding 1e-4 for the others. fp16: the
 * fp16 rounding of the products; KIVI: its keys score with the query rounded to int16 per
 * width class (docs/ALGORITHMS.md §7.3), a term off by up to 2^-16 of the class's largest
 * |q_c s_c| times the code, which on rows with a few wide channels reaches ~2e-3 of an output
 * (far below the keys' own rounding, which the reference does not see). */
static inline double fused_tol(enum vq_method m) {
    return m == VQ_METHOD_FP16 || m == VQ_METHOD_KIVI || m == VQ_METHOD_KIVI_SINK ? 5e-3 : 1e-4;
}

#endif
