/*
 * tq_x86.h — helpers shared by the AVX-512 kernels that read records [sf16 scale][codes]
 * (turboquant_mse / turboquant_rvq: turboquant_avx512.c, turboquant_i16_avx512icl.c; the 5..8-bit
 * codecs: wide_avx512.c; layouts in codecs/turboquant_kernels.h and codecs/wide_kernels.h).
 * Include only from files built with AVX-512F.
 */
#ifndef VQ_TQ_X86_H
#define VQ_TQ_X86_H

#include <immintrin.h>
#include <stdint.h>

/* The vq_sf16 value in the low 16 bits of every lane of h as fp32, exactly (vq_tq_sf16,
 * vq_sf16_to_fp32): the 15 magnitude bits shifted into a float's exponent and mantissa are the
 * value times 2^-96 (e = 0 gives the subnormal m * 2^-135), so one exact multiply by 2^96 and
 * the sign bit finish it. Bits 16..31 of the lanes are ignored. */
static inline __attribute__((always_inline)) __m512 vq_sf16x16(__m512i h) {
    const __m512i mag = _mm512_slli_epi32(_mm512_and_si512(h, _mm512_set1_epi32(0x7FFF)), 14);
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(h, _mm512_set1_epi32(0x8000)), 16);
    const __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(mag), _mm512_set1_ps(0x1.0p96f));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), sign));
}

/* The sf16 scales of up to 16 records rl bytes apart from r (lanes where mk is set; others
 * 0) as fp32, exactly vq_tq_sf16 of each (vq_sf16x16). One gather of 4 bytes per record;
 * records shorter than 4 bytes (turboquant d = 8, 1 bit) are read 2 bytes at a time instead,
 * so that nothing past the last record is read. */
static inline __attribute__((always_inline)) __m512 vq_tq_scales16(const uint8_t *r, int rl,
                                                                   __mmask16 mk) {
    __m512i h;
    if (rl >= 4) {
        const __m512i ix = _mm512_mullo_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
            _mm512_set1_epi32(rl));
        h = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mk, ix, r, 1);
    } else {
        int32_t hv[16] = {0};
        for (int i = 0; i < 16; i++)
            if (mk >> i & 1) hv[i] = r[i * rl] | r[i * rl + 1] << 8;
        h = _mm512_loadu_si512((const void *)hv);
    }
    return vq_sf16x16(h);
}

/* The scaled weights of up to 16 records at r (rl bytes apart; lanes where mk is set, others
 * 0) for nq queries: wv[j] lane i = w[j][t0 + i] * scale_i, the products of the scalar form
 * bit for bit (one VMULPS per query after vq_tq_scales16). The accumulate kernels form them
 * once per 16 tokens and broadcast one lane per token (docs/ALGORITHMS.md §9.11). */
static inline __attribute__((always_inline)) void vq_tq_weights16(const uint8_t *r, int rl,
                                                                  __mmask16 mk,
                                                                  const float *const *w, int64_t t0,
                                                                  int nq, __m512 *wv) {
    const __m512 sc = vq_tq_scales16(r, rl, mk);
#pragma GCC unroll 4
    for (int j = 0; j < nq; j++) wv[j] = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, w[j] + t0), sc);
}

#endif
