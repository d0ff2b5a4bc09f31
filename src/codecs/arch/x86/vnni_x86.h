/*
 * vnni_x86.h — VPDPWSSD for the kernels built with AVX512_VNNI (kivi_tiles_avx512vnni.c,
 * turboquant_i16_avx512icl.c).
 */
#ifndef VQ_VNNI_X86_H
#define VQ_VNNI_X86_H

#include <immintrin.h>

/* a + the pairwise int16 products of v and w, summed per 32-bit lane (VPDPWSSD), computed in
 * a's own register. VPDPWSSD's only form overwrites its sum; from the intrinsic GCC 12 copied
 * each sum to another register and back around every instruction (docs/ALGORITHMS.md §9.11),
 * which an asm statement with the sum as an in-out operand avoids. */
static inline __attribute__((always_inline)) __m512i vq_dpwssd(__m512i a, __m512i v, __m512i w) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(a) : "v"(v), "v"(w));
    return a;
}

#endif
