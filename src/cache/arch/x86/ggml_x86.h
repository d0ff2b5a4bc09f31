/*
 * ggml_x86.h — inline AVX2 / AVX-512 pieces of ggml's CPU arithmetic shared by the cache's
 * fp16 attention (ggml_attn_*.c) and the engine's kernels (SwiGLU, dot products). Include
 * only from files compiled with the matching ISA flags (the arch/x86 files named _avx2.c /
 * _avx512.c).
 */
#ifndef VQ_GGML_X86_H
#define VQ_GGML_X86_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "core/core.h"

/* Sum of 8 floats: (lo128 + hi128), then pairs, then the last two. */
static inline float hsum256(__m256 v) {
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

/* Prefetch into L2 (PREFETCHT1) for the engine's four-row decode kernels: the bytes of block
 * off..off + bsize of rows ahead..ahead + 3 of a matrix with contiguous rows (row stride
 * `stride`), which the four-row step walks as one span of 4 x bsize bytes per block. Into L1
 * (T0) the requests held the line fill buffers that the loads need: Gemma 3's output head
 * (262144 x 640 Q8_0) streamed at 9.4 GB/s on one thread, 18 on two, against 11-12 and 22-24
 * with T1 (docs/ALGORITHMS.md §9.4). ahead <= 0: nothing (prefetch off). Never faults past the
 * end of the matrix. */
static inline void vq_pf_rows4(const void *w, size_t stride, int ahead, size_t off, size_t bsize) {
    if (ahead <= 0) return;
    const char *pf = (const char *)w + (size_t)ahead * stride + 4 * off;
    for (size_t k = 0; k < 4 * bsize; k += 64) vq_prefetch_l2(pf + k);
}

/* Largest of the 8 floats of v (exact in any order). */
static inline float hmax256(__m256 v) {
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

/* Software prefetch for the slot-major V^T P (pv_f16 of ggml_attn_*.c): the rows of `slot`
 * (tokens t0 + t with t = slot mod S, every S-th row of this call's n rows: 8 KB apart at
 * head_dim 64, a stride the hardware prefetchers do not follow), asked for a few slots before
 * their chain runs (VQ_PV_PF_SLOTS). */
#define VQ_PV_PF_SLOTS 4
static inline void pv_prefetch_slot(const uint16_t *v, int64_t t0, int64_t n, int d, int S,
                                    int slot) {
    const int64_t f = (int64_t)((slot - (t0 & (S - 1)) + S) & (S - 1));
    for (int64_t t = f; t < n; t += S)
        for (int o = 0; o < d; o += 32) vq_prefetch(v + t * d + o);
}

/* ---- ggml_v_expf on 8 lanes (AVX2): ggml's AVX-512 sequence, bit-identical to
 * vq_ggml_expf_ref and to ggml_v_expf512 ---- */

/* j * 2^n for integral n (|n| <= 192), rounded once like _mm512_scalef_ps: the first factor
 * keeps the product normal and exact, the second rounds (subnormal or overflow) once. */
static inline __m256 scalef8(__m256 j, __m256 n) {
    const __m256i ni = _mm256_cvtps_epi32(n);
    /* a >= -125 keeps j * 2^a normal (j >= 0.7); b = n - a in [-67, 65] */
    const __m256i a = _mm256_min_epi32(_mm256_max_epi32(ni, _mm256_set1_epi32(-125)),
                                       _mm256_set1_epi32(127));
    const __m256i b = _mm256_sub_epi32(ni, a);
    const __m256 pa = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(a, _mm256_set1_epi32(127)), 23));
    const __m256i bb = _mm256_min_epi32(_mm256_max_epi32(b, _mm256_set1_epi32(-126)),
                                        _mm256_set1_epi32(127));
    const __m256 pb = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(bb, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(j, pa), pb);
}

static inline __m256 ggml_v_expf8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 absn = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 d = _mm256_cmp_ps(absn, _mm256_set1_ps(192), _CMP_GT_OQ);
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(
            _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
            _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
    if (_mm256_movemask_ps(d) == 0) return scalef8(j, n);
    const __m256 nn = _mm256_blendv_ps(n, _mm256_setzero_ps(), d); /* keep scalef8 in range */
    const __m256 res = scalef8(j, nn);
    const __m256 alt = _mm256_blendv_ps(_mm256_set1_ps(INFINITY), _mm256_setzero_ps(),
                                        _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ));
    return _mm256_blendv_ps(res, alt, d);
}

#ifdef __AVX512F__
/* ggml_v_expf (ggml's AVX-512 code). */
static inline __m512 ggml_v_expf512(__m512 x) {
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(
            _mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
            _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512 res = _mm512_scalef_ps(j, n);
    if (_mm512_kortestz(d, d)) return res;
    const __m512 zero = _mm512_setzero_ps();
    const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, zero, _CMP_LE_OQ),
                                            _mm512_set1_ps(INFINITY), zero);
    return _mm512_mask_blend_ps(d, res, alt);
}

#endif

#endif
