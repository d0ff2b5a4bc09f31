/*
 * wide_avx512.c — AVX-512 (F, BW, VL, DQ) score / accumulate kernels of the codecs with 5..8-bit
 * codes in the rotated domain (turboquant_mse b = 5..8, int8); contract and layout in
 * codecs/wide_kernels.h.
 *
 * One vector holds 16 consecutive coordinates of one token. int8 codes: VPMOVSXBD +
 * VCVTDQ2PS. LUT codes: 8-bit codes are zero-extended (VPMOVZXBD); 5..7-bit codes (16 codes =
 * 2b bytes) are loaded once, broadcast to the four 128-bit lanes, and one VPSHUFB puts the two
 * bytes holding code l into 32-bit lane l; VPSRLVD by (l*b) mod 8 and a mask finish the
 * index; VGATHERDPS looks the levels up. A head dim that is 8 mod 16 ends with a half vector
 * (8 codes; the upper lanes are zero and masked out). Each kernel is specialized for int8,
 * 8-bit LUT and 5..7-bit LUT codes (no per-vector branch on the code kind). Accumulate sums
 * even and odd tokens in separate registers (two FMA chains) and adds them to acc at the end.
 */
#include <immintrin.h>
#include <stdint.h>

#include "codecs/turboquant_kernels.h"
#include "codecs/wide_kernels.h"

#define VQ_INLINE static inline __attribute__((always_inline))

typedef struct {
    __m512i ctl, shv, msk;
} unpack_k;

static unpack_k unpack_init(int b) {
    int32_t ctl[16], sh[16];
    for (int l = 0; l < 16; l++) {
        const int B = (l * b) >> 3;
        ctl[l] = B | (B + 1) << 8 | (int32_t)0x80800000u;
        sh[l] = (l * b) & 7;
    }
    unpack_k u;
    u.ctl = _mm512_loadu_si512((const void *)ctl);
    u.shv = _mm512_loadu_si512((const void *)sh);
    u.msk = _mm512_set1_epi32((1 << b) - 1);
    return u;
}

/* Levels of coordinates j .. j+15 (cnt = 16) or j .. j+7 (cnt = 8, upper lanes 0) of the
 * code bytes p. LIN and B8 are compile-time constants in the specialized kernels below. */
VQ_INLINE __m512 lev16(const vq_wk *k, const unpack_k *u, const uint8_t *p, int j, int cnt,
                       const int LIN, const int B8) {
    const __mmask16 m = cnt == 16 ? (__mmask16)0xffff : (__mmask16)0xff;
    if (LIN || B8) {
        const __m128i raw = cnt == 16 ? _mm_loadu_si128((const __m128i *)(const void *)(p + j))
                                      : _mm_loadl_epi64((const __m128i *)(const void *)(p + j));
        if (LIN) return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(raw));
        return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, _mm512_cvtepu8_epi32(raw), k->lut,
                                        4);
    }
    const int nb = cnt * k->bits / 8;
    const __m128i raw = _mm_maskz_loadu_epi8((__mmask16)((1u << nb) - 1u), p + j * k->bits / 8);
    __m512i x = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(raw), u->ctl);
    x = _mm512_and_si512(_mm512_srlv_epi32(x, u->shv), u->msk);
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, x, k->lut, 4);
}

VQ_INLINE __m256 fold8(__m512 a) {
    return _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
}

VQ_INLINE __m256 hsum8x8(const __m256 *a) {
    const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                         _mm256_permute2f128_ps(u0, u1, 0x31));
}

VQ_INLINE void score_t(const vq_wk *k, const float *qs, const uint8_t *codes, int64_t n,
                       float *scores, const int LIN, const int B8) {
    const unpack_k u = unpack_init(k->bits);
    const int d = k->d, dfull = d & ~15, rec = k->rec;
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        const uint8_t *r0 = codes + t * rec;
        __m512 acc[8];
        __m256 h[8];
        float sc[8];
        for (int i = 0; i < 8; i++) acc[i] = _mm512_setzero_ps();
        for (int j = 0; j < dfull; j += 16) {
            const __m512 q = _mm512_loadu_ps(qs + j);
            for (int i = 0; i < 8; i++)
                acc[i] = _mm512_fmadd_ps(lev16(k, &u, r0 + i * rec + 2, j, 16, LIN, B8), q, acc[i]);
        }
        if (dfull < d) {
            const __m512 q = _mm512_loadu_ps(qs + dfull); /* zero beyond d */
            for (int i = 0; i < 8; i++)
                acc[i] = _mm512_fmadd_ps(lev16(k, &u, r0 + i * rec + 2, dfull, 8, LIN, B8), q,
                                         acc[i]);
        }
        for (int i = 0; i < 8; i++) {
            h[i] = fold8(acc[i]);
            sc[i] = vq_tq_sf16(r0 + i * rec);
        }
        _mm256_storeu_ps(scores + t, _mm256_mul_ps(hsum8x8(h), _mm256_loadu_ps(sc)));
    }
    for (; t < n; t++) {
        const uint8_t *r = codes + t * rec;
        __m512 acc = _mm512_setzero_ps();
        for (int j = 0; j < dfull; j += 16)
            acc = _mm512_fmadd_ps(lev16(k, &u, r + 2, j, 16, LIN, B8), _mm512_loadu_ps(qs + j),
                                  acc);
        if (dfull < d)
            acc = _mm512_fmadd_ps(lev16(k, &u, r + 2, dfull, 8, LIN, B8),
                                  _mm512_loadu_ps(qs + dfull), acc);
        scores[t] = vq_tq_sf16(r) * _mm512_reduce_add_ps(acc);
    }
}

/* 64 coordinates (4 vectors) of the accumulator stay in registers across all tokens; even and
 * odd tokens go to separate accumulators (two independent FMA chains), added at the end. */
VQ_INLINE void acc_t(const vq_wk *k, const uint8_t *codes, int64_t n, const float *w, float *acc,
                     const int LIN, const int B8) {
    const unpack_k u = unpack_init(k->bits);
    const int d = k->d, rec = k->rec;
    for (int j0 = 0; j0 < d; j0 += 64) {
        const int nv = (d - j0 + 15) / 16 < 4 ? (d - j0 + 15) / 16 : 4;
        const int last = j0 + 16 * nv > d ? 8 : 16; /* codes in the last vector */
        __m512 a[4], b[4];
        for (int v = 0; v < 4; v++) {
            a[v] = _mm512_setzero_ps();
            b[v] = _mm512_setzero_ps();
        }
        int64_t t = 0;
        for (; t + 2 <= n; t += 2) {
            const uint8_t *r = codes + t * rec;
            const __m512 w0 = _mm512_set1_ps(w[t] * vq_tq_sf16(r));
            const __m512 w1 = _mm512_set1_ps(w[t + 1] * vq_tq_sf16(r + rec));
            for (int v = 0; v < nv; v++) {
                const int cnt = v == nv - 1 ? last : 16;
                a[v] = _mm512_fmadd_ps(w0, lev16(k, &u, r + 2, j0 + 16 * v, cnt, LIN, B8), a[v]);
                b[v] = _mm512_fmadd_ps(w1, lev16(k, &u, r + rec + 2, j0 + 16 * v, cnt, LIN, B8),
                                       b[v]);
            }
        }
        if (t < n) {
            const uint8_t *r = codes + t * rec;
            const __m512 w0 = _mm512_set1_ps(w[t] * vq_tq_sf16(r));
            for (int v = 0; v < nv; v++)
                a[v] = _mm512_fmadd_ps(
                    w0, lev16(k, &u, r + 2, j0 + 16 * v, v == nv - 1 ? last : 16, LIN, B8), a[v]);
        }
        for (int v = 0; v < nv; v++) {
            const __mmask16 m = v == nv - 1 && last == 8 ? 0xff : 0xffff;
            float *p = acc + j0 + 16 * v;
            _mm512_mask_storeu_ps(
                p, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, p), _mm512_add_ps(a[v], b[v])));
        }
    }
}

void vq_wk_score_avx512(const vq_wk *k, const float *qs, const uint8_t *codes, int64_t n,
                        float *scores) {
    if (k->lin) score_t(k, qs, codes, n, scores, 1, 0);
    else if (k->bits == 8) score_t(k, qs, codes, n, scores, 0, 1);
    else score_t(k, qs, codes, n, scores, 0, 0);
}

void vq_wk_accumulate_avx512(const vq_wk *k, const uint8_t *codes, int64_t n, const float *w,
                             float *acc) {
    if (k->lin) acc_t(k, codes, n, w, acc, 1, 0);
    else if (k->bits == 8) acc_t(k, codes, n, w, acc, 0, 1);
    else acc_t(k, codes, n, w, acc, 0, 0);
}
