/*
 * kivi_avx2.c — AVX2 + FMA kernels of the KIVI codecs (contract in codecs/kivi.h).
 * Codes of 8 channels are expanded with one scalar load per bit plane, a broadcast and a
 * per-lane variable shift (vpsrlvd), then converted to fp32 (5..7 bits: the planes' fields
 * are masked, shifted to their bit position and OR-ed before one conversion; 8 bits:
 * vpmovzxbd): the value accumulation (acc_row needs group size % 8 == 0, else the scalar
 * reference is used) and the scale fold of key blocks; the key tiles' integer scores are in
 * kivi_tiles_avx2.c.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "codecs/kivi.h"
#include "veloxquant.h"

#define VQ_INLINE static inline __attribute__((always_inline))

/* The fields of channels c..c+7 in one plane of FW-bit fields (FW = 1, 2, 4; kivi.c layout),
 * one per lane: one scalar load, a broadcast and a per-lane variable shift (vpsrlvd); lane i
 * holds field i in its low FW bits (higher bits: the following fields). */
VQ_INLINE __m256i fields8(const uint8_t *plane, int c, const int FW) {
    if (FW == 4) {
        uint32_t w;
        memcpy(&w, plane + c / 2, 4);
        return _mm256_srlv_epi32(_mm256_set1_epi32((int)w),
                                 _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    }
    if (FW == 2) {
        uint16_t w;
        memcpy(&w, plane + c / 4, 2);
        return _mm256_srlv_epi32(_mm256_set1_epi32(w),
                                 _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    }
    return _mm256_srlv_epi32(_mm256_set1_epi32(plane[c / 8]),
                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Codes of channels c..c+7 as fp32 (BITS is a compile-time constant). 2-bit planes use
 * vpermps on the shifted words (low 3 bits index a table of i & 3); 4-bit codes need a mask
 * and a conversion; 5..7 bits combine the 4-bit plane with the 2-bit and / or 1-bit planes
 * in integers (mask, shift to the bit position, OR), then convert once; 8 bits: vpmovzxbd. */
VQ_INLINE __m256 codes8(const uint8_t *row, int d, int c, const int BITS) {
    if (BITS == 8) {
        const __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(row + c));
        return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
    }
    if (BITS >= 4) {
        __m256i v = _mm256_and_si256(fields8(row, c, 4), _mm256_set1_epi32(15));
        const uint8_t *p = row + d / 2; /* the plane after the 4-bit plane */
        if (BITS == 6 || BITS == 7) {   /* bits 4-5 */
            const __m256i f = _mm256_and_si256(fields8(p, c, 2), _mm256_set1_epi32(3));
            v = _mm256_or_si256(v, _mm256_slli_epi32(f, 4));
            p += d / 4;
        }
        if (BITS == 5 || BITS == 7) { /* the top bit (4 or 6) */
            const __m256i f = _mm256_and_si256(fields8(p, c, 1), _mm256_set1_epi32(1));
            v = _mm256_or_si256(v, _mm256_slli_epi32(f, BITS - 1));
        }
        return _mm256_cvtepi32_ps(v);
    }
    __m256 r = _mm256_permutevar8x32_ps(_mm256_setr_ps(0, 1, 2, 3, 0, 1, 2, 3), fields8(row, c, 2));
    if (BITS == 3)
        r = _mm256_add_ps(r, _mm256_permutevar8x32_ps(_mm256_setr_ps(0, 4, 0, 4, 0, 4, 0, 4),
                                                      fields8(row + d / 4, c, 1)));
    return r;
}

/* Horizontal sum of 8 lanes (the fold's bias). */
VQ_INLINE float hsum1(__m256 a) {
    const __m256 t = _mm256_hadd_ps(a, a);
    const __m256 u = _mm256_hadd_ps(t, t);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

VQ_INLINE void acc_row(const uint8_t *row, int d, int g, const float *a, float *acc,
                       const int BITS) {
    for (int c = 0; c < d; c += 8) {
        const __m256 av = _mm256_set1_ps(a[c / g]);
        _mm256_storeu_ps(acc + c,
                         _mm256_fmadd_ps(av, codes8(row, d, c, BITS), _mm256_loadu_ps(acc + c)));
    }
}

void vq_kivi_acc_row_avx2(const uint8_t *row, int d, int bits, int g, const float *a, float *acc) {
    if (g % 8 != 0) {
        vq_kivi_acc_row_ref(row, d, bits, g, a, acc);
        return;
    }
#define ACC_ROW(B) acc_row(row, d, g, a, acc, B)
    VQ_KIVI_WITH_BITS(bits, ACC_ROW);
#undef ACC_ROW
}

/* sf16 -> fp32 for 8 values (exact): |h| << 14 read as fp32 is the value times 2^-96 for
 * normal and subnormal sf16 alike, so one multiply by 2^96 finishes it. */
VQ_INLINE __m256 sf16x8(const uint8_t *p) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    const __m256i mag = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7FFF)), 14);
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
    const __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(mag), _mm256_set1_ps(0x1.0p96f));
    return _mm256_or_ps(v, _mm256_castsi256_ps(sign));
}

float vq_kivi_fold_avx2(const float *q, const uint8_t *s16, const uint8_t *z16, int d, float *qp) {
    __m256 b = _mm256_setzero_ps();
    for (int c = 0; c < d; c += 8) {
        const __m256 qv = _mm256_loadu_ps(q + c);
        _mm256_storeu_ps(qp + c, _mm256_mul_ps(qv, sf16x8(s16 + 2 * c)));
        b = _mm256_fmadd_ps(qv, sf16x8(z16 + 2 * c), b);
    }
    return hsum1(b);
}

/* quant16 of one class (vq_kivi_quant16_ref's results) on 8 lanes: the max is exact in any
 * order; VCVTPS2DQ rounds to nearest even; entries past a multiple of 8 by lrintf. */
VQ_INLINE float quant16(const float *qp, int n, int qmax, int16_t *qi) {
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256 fmax = _mm256_set1_ps(3.40282347e38f);
    __m256 mx = _mm256_setzero_ps();
    int bad = 0, c = 0;
    for (; c + 8 <= n; c += 8) {
        const __m256 a = _mm256_and_ps(_mm256_loadu_ps(qp + c), absm);
        bad |= _mm256_movemask_ps(_mm256_cmp_ps(a, fmax, _CMP_NLE_UQ));
        mx = _mm256_max_ps(mx, a);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    float m = _mm_cvtss_f32(m4);
    for (int i = c; i < n; i++) {
        const float a = fabsf(qp[i]);
        bad |= !(a <= 3.40282347e38f);
        m = a > m ? a : m;
    }
    if (bad || m == 0.0f) {
        memset(qi, 0, (size_t)n * sizeof *qi);
        return bad ? NAN : 0.0f;
    }
    const float invs = (float)qmax / m;
    const __m256 inv = _mm256_set1_ps(invs);
    for (c = 0; c + 8 <= n; c += 8) {
        const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(qp + c), inv));
        _mm_storeu_si128(
            (__m128i *)(void *)(qi + c),
            _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
    }
    for (; c < n; c++) qi[c] = (int16_t)lrintf(qp[c] * invs);
    return m / (float)qmax;
}

/* The integer queries of one key block (vq_kivi_prep_fn): each query folded exactly as
 * vq_kivi_fold_avx2, then quant16 per class. */
void vq_kivi_prep_avx2(const float *const *q, int nq, const uint8_t *s16, const uint8_t *z16, int d,
                       int ncls, const int *nch, const int *qmax, int16_t *const *qi,
                       float *const *delta, float *bias) {
    float qp[1024];
    for (int j = 0; j < nq; j++) {
        bias[j] = vq_kivi_fold_avx2(q[j], s16, z16, d, qp);
        for (int k = 0, c0 = 0; k < ncls; c0 += nch[k], k++)
            delta[j][k] = quant16(qp + c0, nch[k], qmax[k], qi[j] + c0);
    }
}

/* acc[cb .. cb + 8*NR) += sum_t a[t][c/g] code_{t,c} over nt rows (block_bytes apart). */
VQ_INLINE void acc_blk(const uint8_t *rows, size_t bb, int nt, const float *a, int ng, int d, int g,
                       float *acc, int cb, const int NR, const int BITS) {
    __m256 e[4];
    for (int j = 0; j < NR; j++) e[j] = _mm256_loadu_ps(acc + cb + 8 * j);
    for (int t = 0; t < nt; t++) {
        const uint8_t *r = rows + (size_t)t * bb;
        const float *at = a + t * ng;
        for (int j = 0; j < NR; j++) {
            const int c = cb + 8 * j;
            e[j] = _mm256_fmadd_ps(_mm256_broadcast_ss(at + c / g), codes8(r, d, c, BITS), e[j]);
        }
    }
    for (int j = 0; j < NR; j++) _mm256_storeu_ps(acc + cb + 8 * j, e[j]);
}

VQ_INLINE void acc_chunk(const uint8_t *rows, size_t bb, int nt, const float *a, int ng, int d,
                         int g, float *acc, const int BITS) {
    int cb = 0;
    for (; cb + 32 <= d; cb += 32) acc_blk(rows, bb, nt, a, ng, d, g, acc, cb, 4, BITS);
    switch ((d - cb) / 8) {
    case 3: acc_blk(rows, bb, nt, a, ng, d, g, acc, cb, 3, BITS); break;
    case 2: acc_blk(rows, bb, nt, a, ng, d, g, acc, cb, 2, BITS); break;
    case 1: acc_blk(rows, bb, nt, a, ng, d, g, acc, cb, 1, BITS); break;
    default: break;
    }
}

void vq_kivi_acc_vals_avx2(const uint8_t *blocks, size_t block_bytes, int64_t n, const float *w,
                           int d, int bits, int g, float *acc) {
    const int ng = d / g;
    if (g % 8 != 0 || ng > 128) {
        vq_kivi_acc_vals_ref(blocks, block_bytes, n, w, d, bits, g, acc);
        return;
    }
    float a[32 * 128];
    for (int64_t t0 = 0; t0 < n; t0 += 32) {
        const int nt = n - t0 < 32 ? (int)(n - t0) : 32;
        const uint8_t *b0 = blocks + (size_t)t0 * block_bytes;
        if (ng <= 4) {
            /* one masked dword load of the 2*ng sf16 header values (scales, then zeros) per
             * token; the zero-point sums stay in a register */
            const __m128i lm = _mm_cmpgt_epi32(_mm_set1_epi32(ng), _mm_setr_epi32(0, 1, 2, 3));
            __m256 zacc = _mm256_setzero_ps();
            float tmp[8];
            for (int t = 0; t < nt; t++) {
                const uint8_t *blk = b0 + (size_t)t * block_bytes;
                const __m256i h = _mm256_cvtepu16_epi32(
                    _mm_maskload_epi32((const int *)(const void *)blk, lm));
                const __m256i mag = _mm256_slli_epi32(
                    _mm256_and_si256(h, _mm256_set1_epi32(0x7FFF)), 14);
                const __m256i sign = _mm256_slli_epi32(
                    _mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
                __m256 hv = _mm256_mul_ps(_mm256_castsi256_ps(mag), _mm256_set1_ps(0x1.0p96f));
                hv = _mm256_mul_ps(_mm256_or_ps(hv, _mm256_castsi256_ps(sign)),
                                   _mm256_set1_ps(w[t0 + t]));
                _mm256_storeu_ps(tmp, hv);
                for (int k = 0; k < ng; k++) a[t * ng + k] = tmp[k];
                zacc = _mm256_add_ps(zacc, hv);
            }
            _mm256_storeu_ps(tmp, zacc);
            for (int h2 = 0; h2 < ng; h2++) acc[d + h2] += tmp[ng + h2];
        } else {
            for (int t = 0; t < nt; t++) {
                const float wt = w[t0 + t];
                const uint8_t *blk = b0 + (size_t)t * block_bytes;
                for (int h = 0; h < ng; h++) {
                    const uint16_t s = (uint16_t)(blk[2 * h] | blk[2 * h + 1] << 8);
                    const uint16_t z = (uint16_t)(blk[2 * ng + 2 * h] | blk[2 * ng + 2 * h + 1]
                                                                            << 8);
                    a[t * ng + h] = wt * vq_kivi_sf16(s);
                    acc[d + h] += wt * vq_kivi_sf16(z);
                }
            }
        }
        const uint8_t *rows = b0 + 4 * (size_t)ng;
#define ACC_CHUNK(B) acc_chunk(rows, block_bytes, nt, a, ng, d, g, acc, B)
        VQ_KIVI_WITH_BITS(bits, ACC_CHUNK);
#undef ACC_CHUNK
    }
}
