/*
 * tq_x86.h — a helper shared by the AVX-512 kernels of turboquant_mse / turboquant_rvq
 * (turboquant_avx512.c, turboquant_i16_avx512icl.c; record layout in
 * codecs/turboquant_kernels.h). Include only from files built with AVX-512F.
 */
#ifndef VQ_TQ_X86_H
#define VQ_TQ_X86_H

#include <immintrin.h>
#include <stdint.h>

/* The sf16 scales of up to 16 records rl bytes apart from r (lanes where mk is set; others
 * 0) as fp32, exactly vq_tq_sf16 of each: the 15 magnitude bits shifted into a float's
 * exponent and mantissa are the value times 2^-96 (e = 0 gives the subnormal m * 2^-135), so
 * one exact multiply by 2^96 and the sign bit finish it. Reads 4 bytes at each record (rl >= 4
 * where the buffer ends at the last record). */
static inline __attribute__((always_inline)) __m512 vq_tq_scales16(const uint8_t *r, int rl,
                                                                   __mmask16 mk) {
    const __m512i ix = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(rl));
    const __m512i h = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mk, ix, r, 1);
    const __m512i mag = _mm512_slli_epi32(_mm512_and_si512(h, _mm512_set1_epi32(0x7FFF)), 14);
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(h, _mm512_set1_epi32(0x8000)), 16);
    const __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(mag), _mm512_set1_ps(0x1.0p96f));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), sign));
}

#endif
