/*
 * kivi_avx2.c — AVX2 + FMA kernels of the KIVI codecs (contract in codecs/kivi.h).
 * Codes of 8 channels are expanded with one scalar load per bit plane, a broadcast and a
 * per-lane variable shift (vpsrlvd), then converted to fp32 (5..7 bits: the planes' fields
 * are masked, shifted to their bit position and OR-ed before one conversion; 8 bits:
 * vpmovzxbd). dot_rows scores 8 rows at a time (8 independent accumulators, hadd-tree
 * reduction); dot_classes (keys with width classes) carries the same 8 accumulators over every
 * class, dot_classes_multi two rows of up to 4 queries (each code unpacked once for all, every
 * score the bits of its query alone); acc_row needs group size % 8 == 0 (else the scalar
 * reference is used).
 */
#include <immintrin.h>
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

VQ_INLINE __m256 hsum8x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                         __m256 a6, __m256 a7) {
    const __m256 t0 = _mm256_hadd_ps(a0, a1), t1 = _mm256_hadd_ps(a2, a3);
    const __m256 t2 = _mm256_hadd_ps(a4, a5), t3 = _mm256_hadd_ps(a6, a7);
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                         _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* Sum of the 8 lanes in the same order as one lane of hsum8x8, so a token scores bit-identically
 * whether it is reduced alone or in a group of 8. */
VQ_INLINE float hsum1(__m256 a) {
    const __m256 t = _mm256_hadd_ps(a, a);
    const __m256 u = _mm256_hadd_ps(t, t);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

/* Adds rows r .. r + 7 of one width class (d channels, BITS) times qp to A[0..7]. */
VQ_INLINE void acc8(const float *qp, const uint8_t *r, int d, __m256 *A, const int BITS) {
    const size_t rb = (size_t)d * BITS / 8;
    __m256 a0 = A[0], a1 = A[1], a2 = A[2], a3 = A[3], a4 = A[4], a5 = A[5], a6 = A[6], a7 = A[7];
    for (int c = 0; c < d; c += 8) {
        const __m256 q = _mm256_loadu_ps(qp + c);
        a0 = _mm256_fmadd_ps(q, codes8(r, d, c, BITS), a0);
        a1 = _mm256_fmadd_ps(q, codes8(r + rb, d, c, BITS), a1);
        a2 = _mm256_fmadd_ps(q, codes8(r + 2 * rb, d, c, BITS), a2);
        a3 = _mm256_fmadd_ps(q, codes8(r + 3 * rb, d, c, BITS), a3);
        a4 = _mm256_fmadd_ps(q, codes8(r + 4 * rb, d, c, BITS), a4);
        a5 = _mm256_fmadd_ps(q, codes8(r + 5 * rb, d, c, BITS), a5);
        a6 = _mm256_fmadd_ps(q, codes8(r + 6 * rb, d, c, BITS), a6);
        a7 = _mm256_fmadd_ps(q, codes8(r + 7 * rb, d, c, BITS), a7);
    }
    A[0] = a0, A[1] = a1, A[2] = a2, A[3] = a3, A[4] = a4, A[5] = a5, A[6] = a6, A[7] = a7;
}

/* Adds one row r of one width class times qp to *A. */
VQ_INLINE void acc1(const float *qp, const uint8_t *r, int d, __m256 *A, const int BITS) {
    for (int c = 0; c < d; c += 8)
        *A = _mm256_fmadd_ps(_mm256_loadu_ps(qp + c), codes8(r, d, c, BITS), *A);
}

VQ_INLINE void dot_rows(const float *qp, const uint8_t *rows, int d, int64_t n, float bias,
                        float *out, const int BITS) {
    const size_t rb = (size_t)d * BITS / 8;
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        __m256 A[8];
        for (int i = 0; i < 8; i++) A[i] = _mm256_setzero_ps();
        acc8(qp, rows + (size_t)t * rb, d, A, BITS);
        _mm256_storeu_ps(out + t,
                         _mm256_add_ps(_mm256_set1_ps(bias),
                                       hsum8x8(A[0], A[1], A[2], A[3], A[4], A[5], A[6], A[7])));
    }
    for (; t < n; t++) {
        __m256 a0 = _mm256_setzero_ps();
        acc1(qp, rows + (size_t)t * rb, d, &a0, BITS);
        out[t] = bias + hsum1(a0);
    }
}

void vq_kivi_dot_rows_avx2(const float *qp, const uint8_t *rows, int d, int bits, int64_t n,
                           float bias, float *out) {
#define DOT_ROWS(B) dot_rows(qp, rows, d, n, bias, out, B)
    VQ_KIVI_WITH_BITS(bits, DOT_ROWS);
#undef DOT_ROWS
}

/* Row t of every class for query qp, alone: bias + hsum1 (one lane of hsum8x8's order). */
VQ_INLINE float row1(const float *qp, const uint8_t *rows, int ncls, const int *bits,
                     const int *nch, const size_t *off, int64_t t, float bias) {
    __m256 a = _mm256_setzero_ps();
    for (int k = 0; k < ncls; k++) {
        const uint8_t *r = rows + off[k] + (size_t)t * (size_t)nch[k] * (size_t)bits[k] / 8;
#define ACC1(B) acc1(qp, r, nch[k], &a, B)
        VQ_KIVI_WITH_BITS(bits[k], ACC1);
#undef ACC1
        qp += nch[k];
    }
    return bias + hsum1(a);
}

void vq_kivi_dot_classes_avx2(const float *qp, const uint8_t *rows, int ncls, const int *bits,
                              const int *nch, const size_t *off, int64_t n, float bias,
                              float *out) {
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        __m256 A[8];
        for (int i = 0; i < 8; i++) A[i] = _mm256_setzero_ps();
        const float *q = qp;
        for (int k = 0; k < ncls; k++) {
            const uint8_t *r = rows + off[k] + (size_t)t * (size_t)nch[k] * (size_t)bits[k] / 8;
#define ACC8(B) acc8(q, r, nch[k], A, B)
            VQ_KIVI_WITH_BITS(bits[k], ACC8);
#undef ACC8
            q += nch[k];
        }
        _mm256_storeu_ps(out + t,
                         _mm256_add_ps(_mm256_set1_ps(bias),
                                       hsum8x8(A[0], A[1], A[2], A[3], A[4], A[5], A[6], A[7])));
    }
    for (; t < n; t++) out[t] = row1(qp, rows, ncls, bits, nch, off, t, bias);
}

/* Adds rows r and r + rb of one width class times each of the NQ queries qp[j] (channels from
 * qo) to A[j][0..1]: the codes are unpacked once for all queries; each row's fma sequence is
 * dot_classes' (acc8 / acc1). */
VQ_INLINE void acc2m(const float *const *qp, const int NQ, size_t qo, const uint8_t *r, int d,
                     __m256 A[][2], const int BITS) {
    const size_t rb = (size_t)d * BITS / 8;
    for (int c = 0; c < d; c += 8) {
        const __m256 k0 = codes8(r, d, c, BITS), k1 = codes8(r + rb, d, c, BITS);
        for (int j = 0; j < NQ; j++) {
            const __m256 q = _mm256_loadu_ps(qp[j] + qo + c);
            A[j][0] = _mm256_fmadd_ps(q, k0, A[j][0]);
            A[j][1] = _mm256_fmadd_ps(q, k1, A[j][1]);
        }
    }
}

/* Two rows at a time for up to 4 queries; the 2 NQ row sums come out of one hsum8x8, whose
 * lanes are hsum1's order, so every score is the bits of dot_classes for that query alone. */
VQ_INLINE void dot_classes_m(const float *const *qp, const int NQ, const uint8_t *rows, int ncls,
                             const int *bits, const int *nch, const size_t *off, int64_t n,
                             const float *bias, float *const *out) {
    int64_t t = 0;
    for (; t + 2 <= n; t += 2) {
        __m256 A[4][2];
        for (int j = 0; j < 4; j++) A[j][0] = A[j][1] = _mm256_setzero_ps();
        size_t qo = 0;
        for (int k = 0; k < ncls; k++) {
            const uint8_t *r = rows + off[k] + (size_t)t * (size_t)nch[k] * (size_t)bits[k] / 8;
#define ACC2M(B) acc2m(qp, NQ, qo, r, nch[k], A, B)
            VQ_KIVI_WITH_BITS(bits[k], ACC2M);
#undef ACC2M
            qo += (size_t)nch[k];
        }
        float h[8];
        _mm256_storeu_ps(
            h, hsum8x8(A[0][0], A[0][1], A[1][0], A[1][1], A[2][0], A[2][1], A[3][0], A[3][1]));
        for (int j = 0; j < NQ; j++) {
            out[j][t] = bias[j] + h[2 * j];
            out[j][t + 1] = bias[j] + h[2 * j + 1];
        }
    }
    if (t < n)
        for (int j = 0; j < NQ; j++)
            out[j][t] = row1(qp[j], rows, ncls, bits, nch, off, t, bias[j]);
}

void vq_kivi_dot_classes_multi_avx2(const float *const *qp, int nq, const uint8_t *rows, int ncls,
                                    const int *bits, const int *nch, const size_t *off, int64_t n,
                                    const float *bias, float *const *out) {
    switch (nq) {
    case 1: dot_classes_m(qp, 1, rows, ncls, bits, nch, off, n, bias, out); break;
    case 2: dot_classes_m(qp, 2, rows, ncls, bits, nch, off, n, bias, out); break;
    case 3: dot_classes_m(qp, 3, rows, ncls, bits, nch, off, n, bias, out); break;
    default: dot_classes_m(qp, 4, rows, ncls, bits, nch, off, n, bias, out); break;
    }
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
