/*
 * kivi_avx512.c — AVX-512 (F, BW, VL, DQ) kernels of the KIVI codecs (contract in
 * codecs/kivi.h). Codes of 16 channels: each bit plane becomes floats on its own and the
 * planes are added (2..7 bits): a 4- or 2-bit plane by one load, VPERMD / broadcast, a
 * per-lane variable shift and a VPERMPS table of the field's value at its bit position; a
 * 1-bit plane is loaded as a lane mask and adds 2^s where set (masked add); 8 bits: vpmovzxbd.
 * A row tail of 8 channels (d % 16 == 8) reads only its own bytes and multiplies the 8 unused
 * lanes by zero query lanes. dot_rows: 8 rows at a time (8 independent zmm accumulators);
 * dot_classes (keys with width classes): the same 8 accumulators carried over every class,
 * one horizontal sum per row, and the last 8 channels of a class of 8 mod 16 channels taken
 * for two rows at once (codes_pair: one row per half of the vector, into an accumulator per
 * row pair) instead of a half-empty vector per row;
 * acc_row needs group size % 8 == 0 (else scalar reference).
 *
 * kivi_avx512vbmi.c compiles this file again with AVX512_VBMI (VQ_KIVI_VBMI; the kernels are
 * then named *_avx512vbmi and chosen at run time where the CPU has VBMI): 5..7-bit rows of
 * dot_rows and acc_vals then build 64 codes at a time as bytes (nibbles by VPMOVZXBW + shift +
 * VPTERNLOGD, the 2-bit plane by VPMOVZXBD + VPMULTISHIFTQB, a 1-bit plane by a masked byte
 * add) and widen 16 of them per zero-masked VPERMB + conversion; the products and their order
 * are those of the 16-channel path.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "codecs/kivi.h"
#include "veloxquant.h"

#define VQ_INLINE static inline __attribute__((always_inline))

#ifdef VQ_KIVI_VBMI
#define VQ_KIVI_FN(f) f##_avx512vbmi
#define VQ_VB 1
#else
#define VQ_KIVI_FN(f) f##_avx512
#define VQ_VB 0
#endif

/* The fields of channels c..c+15 in one plane of FW-bit fields (FW = 2, 4; kivi.c layout),
 * one per lane (c..c+7 when HALF: only their bytes are read, the upper lanes are then
 * arbitrary): one load (broadcast, or for the 8 bytes of 16 4-bit fields VPERMD of its two
 * dwords to the two halves) and a per-lane variable shift; lane i holds field i in its low FW
 * bits (higher bits: the following fields). */
VQ_INLINE __m512i fields16(const uint8_t *plane, int c, const int FW, const int HALF) {
    if (FW == 4) {
        __m512i w;
        if (HALF) {
            uint32_t lo;
            memcpy(&lo, plane + c / 2, 4);
            w = _mm512_set1_epi32((int)lo);
        } else {
            w = _mm512_permutexvar_epi32(
                _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                _mm512_castsi128_si512(
                    _mm_loadl_epi64((const __m128i *)(const void *)(plane + c / 2))));
        }
        return _mm512_srlv_epi32(
            w, _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28));
    }
    uint32_t w;
    if (HALF) {
        uint16_t h;
        memcpy(&h, plane + c / 4, 2);
        w = h;
    } else {
        memcpy(&w, plane + c / 4, 4);
    }
    return _mm512_srlv_epi32(
        _mm512_set1_epi32((int)w),
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30));
}

/* The 1-bit fields of channels c..c+15 (c..c+7 when HALF, upper bits 0) as a lane mask. */
VQ_INLINE __mmask16 bits16(const uint8_t *plane, int c, const int HALF) {
    if (HALF) return (__mmask16)plane[c / 8];
    uint16_t m;
    memcpy(&m, plane + c / 8, 2);
    return (__mmask16)m;
}

/* Codes of channels c..c+15 as fp32 (c..c+7 when HALF; the upper lanes are then arbitrary
 * codes, and only the bytes of channels c..c+7 are read). 2..7 bits: every plane is turned
 * into floats on its own and the planes are added (exact: integers < 128): the shifted words
 * of a 4- or 2-bit plane go straight into vpermps (it reads the low 4 bits of each lane; a
 * 16-entry table maps them to the field's value at its bit position: i for the 4-bit plane,
 * (i & 3) << s for a 2-bit plane of bits s, s+1), which replaces a mask + shift + int->float
 * conversion; a 1-bit plane is loaded as a lane mask and adds 2^s to its lanes (masked add).
 * 8 bits: vpmovzxbd. */
VQ_INLINE __m512 codes16(const uint8_t *row, int d, int c, const int BITS, const int HALF) {
    if (BITS == 8) {
        const __m128i b = HALF ? _mm_loadl_epi64((const __m128i *)(const void *)(row + c))
                               : _mm_loadu_si128((const __m128i *)(const void *)(row + c));
        return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b));
    }
    const __m512 f2 = _mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
    if (BITS == 2 || BITS == 3) {
        __m512 r = _mm512_permutexvar_ps(fields16(row, c, 2, HALF), f2);
        if (BITS == 3)
            r = _mm512_mask_add_ps(r, bits16(row + d / 4, c, HALF), r, _mm512_set1_ps(4.0f));
        return r;
    }
    __m512 r = _mm512_permutexvar_ps(
        fields16(row, c, 4, HALF),
        _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const uint8_t *p = row + d / 2; /* the plane after the 4-bit plane */
    if (BITS == 6 || BITS == 7) {   /* bits 4-5 */
        r = _mm512_add_ps(r, _mm512_permutexvar_ps(fields16(p, c, 2, HALF),
                                                   _mm512_mul_ps(f2, _mm512_set1_ps(16.0f))));
        p += d / 4;
    }
    if (BITS == 5 || BITS == 7) /* the top bit (4 or 6) */
        r = _mm512_mask_add_ps(r, bits16(p, c, HALF), r, _mm512_set1_ps((float)(1 << (BITS - 1))));
    return r;
}

/* Channels c..c+7 of two rows of one class (width classes whose channel count is 8 mod 16):
 * row ra in lanes 0-7, row rb in lanes 8-15, the values of codes16(.., HALF) of each row; only
 * those channels' bytes are read. A 4-bit plane: each row's 4 bytes broadcast to its half; a
 * 2-bit plane: the two rows' 2 bytes as one word; a 1-bit plane: their bytes as one mask. */
VQ_INLINE __m512i fields_pair(const uint8_t *pa, const uint8_t *pb, int c, const int FW) {
    if (FW == 4) {
        uint32_t a, b;
        memcpy(&a, pa + c / 2, 4);
        memcpy(&b, pb + c / 2, 4);
        return _mm512_srlv_epi32(
            _mm512_mask_set1_epi32(_mm512_set1_epi32((int)a), 0xFF00, (int)b),
            _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28));
    }
    uint16_t a, b;
    memcpy(&a, pa + c / 4, 2);
    memcpy(&b, pb + c / 4, 2);
    return _mm512_srlv_epi32(
        _mm512_set1_epi32((int)((uint32_t)a | (uint32_t)b << 16)),
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30));
}

VQ_INLINE __mmask16 bits_pair(const uint8_t *pa, const uint8_t *pb, int c) {
    return (__mmask16)(pa[c / 8] | pb[c / 8] << 8);
}

VQ_INLINE __m512 codes_pair(const uint8_t *ra, const uint8_t *rb, int d, int c, const int BITS) {
    if (BITS == 8) {
        uint64_t a, b;
        memcpy(&a, ra + c, 8);
        memcpy(&b, rb + c, 8);
        return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_set_epi64x((long long)b, (long long)a)));
    }
    const __m512 f2 = _mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
    if (BITS == 2 || BITS == 3) {
        __m512 r = _mm512_permutexvar_ps(fields_pair(ra, rb, c, 2), f2);
        if (BITS == 3)
            r = _mm512_mask_add_ps(r, bits_pair(ra + d / 4, rb + d / 4, c), r,
                                   _mm512_set1_ps(4.0f));
        return r;
    }
    __m512 r = _mm512_permutexvar_ps(
        fields_pair(ra, rb, c, 4),
        _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const uint8_t *pa = ra + d / 2, *pb = rb + d / 2; /* the planes after the 4-bit plane */
    if (BITS == 6 || BITS == 7) {
        r = _mm512_add_ps(r, _mm512_permutexvar_ps(fields_pair(pa, pb, c, 2),
                                                   _mm512_mul_ps(f2, _mm512_set1_ps(16.0f))));
        pa += d / 4;
        pb += d / 4;
    }
    if (BITS == 5 || BITS == 7)
        r = _mm512_mask_add_ps(r, bits_pair(pa, pb, c), r,
                               _mm512_set1_ps((float)(1 << (BITS - 1))));
    return r;
}

/* The 8 query floats at p in both halves (the pair path's query). */
VQ_INLINE __m512 q_pair(const float *p) { return _mm512_broadcast_f32x8(_mm256_loadu_ps(p)); }

#if VQ_VB
/* Codes of channels c..c+63 (c + 64 <= d) of a 5..7-bit row as bytes, channel order. */
VQ_INLINE __m512i bytes64(const uint8_t *row, int d, int c, const int BITS) {
    /* word i = byte i of the 4-bit plane; (w | w << 4) & 0x0F0F: its two nibbles as bytes */
    const __m512i w = _mm512_cvtepu8_epi16(
        _mm256_loadu_si256((const __m256i *)(const void *)(row + c / 2)));
    __m512i v = _mm512_ternarylogic_epi32(w, _mm512_slli_epi16(w, 4), _mm512_set1_epi16(0x0F0F),
                                          0xA8);
    const uint8_t *p = row + d / 2;
    if (BITS >= 6) { /* dword j = byte j of the 2-bit plane; byte k of it takes field 4j + k
                      * into bits 4-5 (bit offset 2k - 4 of the dword, mod 64 in its qword) */
        const __m512i z = _mm512_cvtepu8_epi32(
            _mm_loadu_si128((const __m128i *)(const void *)(p + c / 4)));
        const __m512i sh = _mm512_set1_epi64(0x22201E1C02003E3Cll); /* 60 62 0 2 28 30 32 34 */
        v = _mm512_ternarylogic_epi32(v, _mm512_multishift_epi64_epi8(sh, z),
                                      _mm512_set1_epi8(0x30), 0xF8);
        p += d / 4;
    }
    if (BITS != 6) {
        uint64_t m;
        memcpy(&m, p + c / 8, 8);
        v = _mm512_mask_add_epi8(v, (__mmask64)m, v, _mm512_set1_epi8((char)(1 << (BITS - 1))));
    }
    return v;
}

/* Bytes 16i .. 16i + 15 of v as fp32. */
VQ_INLINE __m512 bytes_f(__m512i v, const int i) {
    const __m512i idx = _mm512_add_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(16 * i));
    return _mm512_cvtepi32_ps(_mm512_maskz_permutexvar_epi8(0x1111111111111111ull, idx, v));
}
#endif

VQ_INLINE __m256 fold(__m512 a) {
    return _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
}

VQ_INLINE __m256 hsum8x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                         __m256 a6, __m256 a7) {
    const __m256 t0 = _mm256_hadd_ps(a0, a1), t1 = _mm256_hadd_ps(a2, a3);
    const __m256 t2 = _mm256_hadd_ps(a4, a5), t3 = _mm256_hadd_ps(a6, a7);
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                         _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* Same lane order as one lane of hsum8x8 (bit-identical scores for leftover rows). */
VQ_INLINE float hsum1(__m256 a) {
    const __m256 t = _mm256_hadd_ps(a, a);
    const __m256 u = _mm256_hadd_ps(t, t);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

#define STEP8(HALF, Q, C) \
    do { \
        a0 = _mm512_fmadd_ps(Q, codes16(r, d, C, BITS, HALF), a0); \
        a1 = _mm512_fmadd_ps(Q, codes16(r + rb, d, C, BITS, HALF), a1); \
        a2 = _mm512_fmadd_ps(Q, codes16(r + 2 * rb, d, C, BITS, HALF), a2); \
        a3 = _mm512_fmadd_ps(Q, codes16(r + 3 * rb, d, C, BITS, HALF), a3); \
        a4 = _mm512_fmadd_ps(Q, codes16(r + 4 * rb, d, C, BITS, HALF), a4); \
        a5 = _mm512_fmadd_ps(Q, codes16(r + 5 * rb, d, C, BITS, HALF), a5); \
        a6 = _mm512_fmadd_ps(Q, codes16(r + 6 * rb, d, C, BITS, HALF), a6); \
        a7 = _mm512_fmadd_ps(Q, codes16(r + 7 * rb, d, C, BITS, HALF), a7); \
    } while (0)

/* Row K of the 8: channels c..c+63 into accumulator A (the 16-channel path's order). */
#define STEP64(K, A) \
    do { \
        const __m512i v_ = bytes64(r + (K)*rb, d, c, BITS); \
        A = _mm512_fmadd_ps(q0, bytes_f(v_, 0), A); \
        A = _mm512_fmadd_ps(q1, bytes_f(v_, 1), A); \
        A = _mm512_fmadd_ps(q2, bytes_f(v_, 2), A); \
        A = _mm512_fmadd_ps(q3, bytes_f(v_, 3), A); \
    } while (0)

VQ_INLINE void dot_rows(const float *qp, const uint8_t *rows, int d, int64_t n, float bias,
                        float *out, const int BITS) {
    const size_t rb = (size_t)d * BITS / 8;
    const int d16 = d & ~15;
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        const uint8_t *r = rows + (size_t)t * rb;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        int c = 0;
#if VQ_VB
        if (BITS >= 5 && BITS <= 7)
            for (; c + 64 <= d; c += 64) {
                const __m512 q0 = _mm512_loadu_ps(qp + c), q1 = _mm512_loadu_ps(qp + c + 16);
                const __m512 q2 = _mm512_loadu_ps(qp + c + 32), q3 = _mm512_loadu_ps(qp + c + 48);
                STEP64(0, a0);
                STEP64(1, a1);
                STEP64(2, a2);
                STEP64(3, a3);
                STEP64(4, a4);
                STEP64(5, a5);
                STEP64(6, a6);
                STEP64(7, a7);
            }
#endif
        for (; c < d16; c += 16) {
            const __m512 q = _mm512_loadu_ps(qp + c);
            STEP8(0, q, c);
        }
        if (d16 < d) {
            const __m512 q = _mm512_maskz_loadu_ps(0xFF, qp + d16);
            STEP8(1, q, d16);
        }
        _mm256_storeu_ps(out + t, _mm256_add_ps(_mm256_set1_ps(bias),
                                                hsum8x8(fold(a0), fold(a1), fold(a2), fold(a3),
                                                        fold(a4), fold(a5), fold(a6), fold(a7))));
    }
    for (; t < n; t++) {
        const uint8_t *r = rows + (size_t)t * rb;
        __m512 a0 = _mm512_setzero_ps();
        for (int c = 0; c < d16; c += 16)
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qp + c), codes16(r, d, c, BITS, 0), a0);
        if (d16 < d)
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(0xFF, qp + d16), codes16(r, d, d16, BITS, 1),
                                 a0);
        out[t] = bias + hsum1(fold(a0));
    }
}

void VQ_KIVI_FN(vq_kivi_dot_rows)(const float *qp, const uint8_t *rows, int d, int bits, int64_t n,
                                  float bias, float *out) {
#define DOT_ROWS(B) dot_rows(qp, rows, d, n, bias, out, B)
    VQ_KIVI_WITH_BITS(bits, DOT_ROWS);
#undef DOT_ROWS
}

/* A row's accumulator with its pair accumulator's half added (lanes 0-7: the pair's first row,
 * 8-15: its second): the one order every path of the class kernels uses. */
VQ_INLINE __m512 row_lo(__m512 a, __m512 p) { return _mm512_mask_add_ps(a, 0x00FF, a, p); }
VQ_INLINE __m512 row_hi(__m512 a, __m512 p) { return _mm512_mask_add_ps(a, 0xFF00, a, p); }

/* The lane sums of four rows' accumulators in lanes 0..3, each by one fixed tree of its own
 * lanes whatever the other three hold (blocks of 4 lanes: 2 + 0 and 3 + 1, then their sum,
 * then pairs inside the block), so a row sums to the same bits in a group of 4 or alone. */
VQ_INLINE __m128 hsum16x4(__m512 a, __m512 b, __m512 c, __m512 d) {
    const __m512 tab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0xEE),
                                     _mm512_shuffle_f32x4(a, b, 0x44));
    const __m512 tcd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0xEE),
                                     _mm512_shuffle_f32x4(c, d, 0x44));
    const __m512 u = _mm512_add_ps(_mm512_shuffle_f32x4(tab, tcd, 0xDD),
                                   _mm512_shuffle_f32x4(tab, tcd, 0x88));
    const __m512 x = _mm512_add_ps(u, _mm512_permute_ps(u, 0x4E));
    const __m512 y = _mm512_add_ps(x, _mm512_permute_ps(x, 0xB1));
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(
        _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), y));
}

/* Width classes (dot_classes, dot_classes_multi): each row's full 16-channel vectors of every
 * class go into its own accumulator, the last 8 channels of a class of 8 mod 16 channels into
 * the accumulator of its row pair (rows 2i, 2i + 1 of the call: lanes 0-7 / 8-15, codes_pair),
 * so a class of 8 or 24 channels costs whole vectors instead of a half-empty one per row. A
 * row's result: bias + hsum16x4 of row_lo / row_hi of the two; the same sequence for a row
 * whichever path (8, 4, 2 rows or a lone last row paired with itself) computes it. */

/* Adds rows r .. r + 7 (rb bytes apart) of one width class (d channels, BITS) times qp: the
 * full vectors into A[0..7] (the 16-channel path of dot_rows), a tail into P[0..3]. */
VQ_INLINE void acc8(const float *qp, const uint8_t *r, int d, __m512 *A, __m512 *P,
                    const int BITS) {
    const size_t rb = (size_t)d * BITS / 8;
    const int d16 = d & ~15;
    __m512 a0 = A[0], a1 = A[1], a2 = A[2], a3 = A[3], a4 = A[4], a5 = A[5], a6 = A[6], a7 = A[7];
    for (int c = 0; c < d16; c += 16) {
        const __m512 q = _mm512_loadu_ps(qp + c);
        STEP8(0, q, c);
    }
    A[0] = a0, A[1] = a1, A[2] = a2, A[3] = a3, A[4] = a4, A[5] = a5, A[6] = a6, A[7] = a7;
    if (d16 < d) {
        const __m512 q = q_pair(qp + d16);
        for (int i = 0; i < 4; i++)
            P[i] = _mm512_fmadd_ps(
                q, codes_pair(r + 2 * i * rb, r + (2 * i + 1) * rb, d, d16, BITS), P[i]);
    }
}

/* Adds row ra (and rb when TWO; else the tail pairs ra with itself) of one width class times
 * qp: full vectors into *a0 (and *a1), the tail into *p. */
VQ_INLINE void acc2(const float *qp, const uint8_t *ra, const uint8_t *rb, int d, __m512 *a0,
                    __m512 *a1, __m512 *p, const int TWO, const int BITS) {
    const int d16 = d & ~15;
    for (int c = 0; c < d16; c += 16) {
        const __m512 q = _mm512_loadu_ps(qp + c);
        *a0 = _mm512_fmadd_ps(q, codes16(ra, d, c, BITS, 0), *a0);
        if (TWO) *a1 = _mm512_fmadd_ps(q, codes16(rb, d, c, BITS, 0), *a1);
    }
    if (d16 < d)
        *p = _mm512_fmadd_ps(q_pair(qp + d16), codes_pair(ra, TWO ? rb : ra, d, d16, BITS), *p);
}

/* Rows t, t + 1 (TWO) or t alone of every class for query qp: out[t] (and out[t + 1]). */
VQ_INLINE void rows2(const float *qp, const uint8_t *rows, int ncls, const int *bits,
                     const int *nch, const size_t *off, int64_t t, float bias, float *out,
                     const int TWO) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, p = a0;
    const float *q = qp;
    for (int k = 0; k < ncls; k++) {
        const size_t rb = (size_t)nch[k] * (size_t)bits[k] / 8;
        const uint8_t *r = rows + off[k] + (size_t)t * rb;
#define ACC2(B) acc2(q, r, r + rb, nch[k], &a0, &a1, &p, TWO, B)
        VQ_KIVI_WITH_BITS(bits[k], ACC2);
#undef ACC2
        q += nch[k];
    }
    const __m512 z = _mm512_setzero_ps();
    float h[4];
    _mm_storeu_ps(h, hsum16x4(row_lo(a0, p), TWO ? row_hi(a1, p) : z, z, z));
    out[t] = bias + h[0];
    if (TWO) out[t + 1] = bias + h[1];
}

/* The rows from t on, two at a time, then a lone last row. */
VQ_INLINE void rows_rest(const float *qp, const uint8_t *rows, int ncls, const int *bits,
                         const int *nch, const size_t *off, int64_t t, int64_t n, float bias,
                         float *out) {
    for (; t + 2 <= n; t += 2) rows2(qp, rows, ncls, bits, nch, off, t, bias, out, 1);
    if (t < n) rows2(qp, rows, ncls, bits, nch, off, t, bias, out, 0);
}

void VQ_KIVI_FN(vq_kivi_dot_classes)(const float *qp, const uint8_t *rows, int ncls,
                                     const int *bits, const int *nch, const size_t *off, int64_t n,
                                     float bias, float *out) {
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        __m512 A[8], P[4];
        for (int i = 0; i < 8; i++) A[i] = _mm512_setzero_ps();
        for (int i = 0; i < 4; i++) P[i] = _mm512_setzero_ps();
        const float *q = qp;
        for (int k = 0; k < ncls; k++) {
            const uint8_t *r = rows + off[k] + (size_t)t * (size_t)nch[k] * (size_t)bits[k] / 8;
#define ACC8(B) acc8(q, r, nch[k], A, P, B)
            VQ_KIVI_WITH_BITS(bits[k], ACC8);
#undef ACC8
            q += nch[k];
        }
        const __m128 b4 = _mm_set1_ps(bias);
        _mm_storeu_ps(out + t, _mm_add_ps(b4, hsum16x4(row_lo(A[0], P[0]), row_hi(A[1], P[0]),
                                                       row_lo(A[2], P[1]), row_hi(A[3], P[1]))));
        _mm_storeu_ps(out + t + 4,
                      _mm_add_ps(b4, hsum16x4(row_lo(A[4], P[2]), row_hi(A[5], P[2]),
                                              row_lo(A[6], P[3]), row_hi(A[7], P[3]))));
    }
    rows_rest(qp, rows, ncls, bits, nch, off, t, n, bias, out);
}

/* Adds rows r .. r + 3 (rb bytes apart) of one width class times each of the NQ queries
 * qp[j] to A[j][0..3] and the tails to P[j][0..1]: the codes are unpacked once for all
 * queries; each row's fma sequence is dot_classes' (acc8 / acc2). */
VQ_INLINE void acc4m(const float *const *qp, const int NQ, size_t qo, const uint8_t *r, int d,
                     __m512 A[][4], __m512 P[][2], const int BITS) {
    const size_t rb = (size_t)d * BITS / 8;
    const int d16 = d & ~15;
    for (int c = 0; c < d16; c += 16) {
        const __m512 k0 = codes16(r, d, c, BITS, 0), k1 = codes16(r + rb, d, c, BITS, 0);
        const __m512 k2 = codes16(r + 2 * rb, d, c, BITS, 0);
        const __m512 k3 = codes16(r + 3 * rb, d, c, BITS, 0);
        for (int j = 0; j < NQ; j++) {
            const __m512 q = _mm512_loadu_ps(qp[j] + qo + c);
            A[j][0] = _mm512_fmadd_ps(q, k0, A[j][0]);
            A[j][1] = _mm512_fmadd_ps(q, k1, A[j][1]);
            A[j][2] = _mm512_fmadd_ps(q, k2, A[j][2]);
            A[j][3] = _mm512_fmadd_ps(q, k3, A[j][3]);
        }
    }
    if (d16 < d) {
        const __m512 k01 = codes_pair(r, r + rb, d, d16, BITS);
        const __m512 k23 = codes_pair(r + 2 * rb, r + 3 * rb, d, d16, BITS);
        for (int j = 0; j < NQ; j++) {
            const __m512 q = q_pair(qp[j] + qo + d16);
            P[j][0] = _mm512_fmadd_ps(q, k01, P[j][0]);
            P[j][1] = _mm512_fmadd_ps(q, k23, P[j][1]);
        }
    }
}

VQ_INLINE void dot_classes_m(const float *const *qp, const int NQ, const uint8_t *rows, int ncls,
                             const int *bits, const int *nch, const size_t *off, int64_t n,
                             const float *bias, float *const *out) {
    int64_t t = 0;
    for (; t + 4 <= n; t += 4) {
        __m512 A[4][4], P[4][2];
        for (int j = 0; j < NQ; j++) {
            for (int i = 0; i < 4; i++) A[j][i] = _mm512_setzero_ps();
            P[j][0] = P[j][1] = _mm512_setzero_ps();
        }
        size_t qo = 0;
        for (int k = 0; k < ncls; k++) {
            const uint8_t *r = rows + off[k] + (size_t)t * (size_t)nch[k] * (size_t)bits[k] / 8;
#define ACC4M(B) acc4m(qp, NQ, qo, r, nch[k], A, P, B)
            VQ_KIVI_WITH_BITS(bits[k], ACC4M);
#undef ACC4M
            qo += (size_t)nch[k];
        }
        for (int j = 0; j < NQ; j++)
            _mm_storeu_ps(out[j] + t,
                          _mm_add_ps(_mm_set1_ps(bias[j]),
                                     hsum16x4(row_lo(A[j][0], P[j][0]), row_hi(A[j][1], P[j][0]),
                                              row_lo(A[j][2], P[j][1]), row_hi(A[j][3], P[j][1]))));
    }
    for (int j = 0; j < NQ; j++)
        rows_rest(qp[j], rows, ncls, bits, nch, off, t, n, bias[j], out[j]);
}

void VQ_KIVI_FN(vq_kivi_dot_classes_multi)(const float *const *qp, int nq, const uint8_t *rows,
                                           int ncls, const int *bits, const int *nch,
                                           const size_t *off, int64_t n, const float *bias,
                                           float *const *out) {
    switch (nq) {
    case 1: dot_classes_m(qp, 1, rows, ncls, bits, nch, off, n, bias, out); break;
    case 2: dot_classes_m(qp, 2, rows, ncls, bits, nch, off, n, bias, out); break;
    case 3: dot_classes_m(qp, 3, rows, ncls, bits, nch, off, n, bias, out); break;
    default: dot_classes_m(qp, 4, rows, ncls, bits, nch, off, n, bias, out); break;
    }
}

VQ_INLINE void acc_row(const uint8_t *row, int d, int g, const float *a, float *acc,
                       const int BITS) {
    const int d16 = d & ~15;
    for (int c = 0; c < d16; c += 16) {
        const __m512 av = (g % 16 == 0) ? _mm512_set1_ps(a[c / g])
                                        : _mm512_insertf32x8(_mm512_set1_ps(a[c / g]),
                                                             _mm256_set1_ps(a[(c + 8) / g]), 1);
        _mm512_storeu_ps(
            acc + c, _mm512_fmadd_ps(av, codes16(row, d, c, BITS, 0), _mm512_loadu_ps(acc + c)));
    }
    if (d16 < d) {
        const __m512 av = _mm512_set1_ps(a[d16 / g]);
        const __m512 s = _mm512_fmadd_ps(av, codes16(row, d, d16, BITS, 1),
                                         _mm512_maskz_loadu_ps(0xFF, acc + d16));
        _mm512_mask_storeu_ps(acc + d16, 0xFF, s);
    }
}

void VQ_KIVI_FN(vq_kivi_acc_row)(const uint8_t *row, int d, int bits, int g, const float *a,
                                 float *acc) {
    if (g % 8 != 0) {
        vq_kivi_acc_row_ref(row, d, bits, g, a, acc);
        return;
    }
#define ACC_ROW(B) acc_row(row, d, g, a, acc, B)
    VQ_KIVI_WITH_BITS(bits, ACC_ROW);
#undef ACC_ROW
}

/* sf16 -> fp32 (exact), see kivi_avx2.c. 16 values / 8 values. */
VQ_INLINE __m512 sf16x16(const uint8_t *p) {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p));
    const __m512i mag = _mm512_slli_epi32(_mm512_and_si512(h, _mm512_set1_epi32(0x7FFF)), 14);
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(h, _mm512_set1_epi32(0x8000)), 16);
    const __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(mag), _mm512_set1_ps(0x1.0p96f));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), sign));
}
/* Masked variant: lanes outside m read nothing and convert to 0. */
VQ_INLINE __m512 sf16x16_mask(const uint8_t *p, __mmask16 m) {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    const __m512i mag = _mm512_slli_epi32(_mm512_and_si512(h, _mm512_set1_epi32(0x7FFF)), 14);
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(h, _mm512_set1_epi32(0x8000)), 16);
    const __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(mag), _mm512_set1_ps(0x1.0p96f));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), sign));
}
VQ_INLINE __m256 sf16x8(const uint8_t *p) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    const __m256i mag = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7FFF)), 14);
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
    const __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(mag), _mm256_set1_ps(0x1.0p96f));
    return _mm256_or_ps(v, _mm256_castsi256_ps(sign));
}

float VQ_KIVI_FN(vq_kivi_fold)(const float *q, const uint8_t *s16, const uint8_t *z16, int d,
                               float *qp) {
    __m512 b = _mm512_setzero_ps();
    int c = 0;
    for (; c + 16 <= d; c += 16) {
        const __m512 qv = _mm512_loadu_ps(q + c);
        _mm512_storeu_ps(qp + c, _mm512_mul_ps(qv, sf16x16(s16 + 2 * c)));
        b = _mm512_fmadd_ps(qv, sf16x16(z16 + 2 * c), b);
    }
    __m256 bt = fold(b);
    if (c < d) {
        const __m256 qv = _mm256_loadu_ps(q + c);
        _mm256_storeu_ps(qp + c, _mm256_mul_ps(qv, sf16x8(s16 + 2 * c)));
        bt = _mm256_fmadd_ps(qv, sf16x8(z16 + 2 * c), bt);
    }
    return hsum1(bt);
}

/* acc[cb .. cb + 16*NR) += sum_t a[t][c/g] code_{t,c} over nt rows (block_bytes apart); the
 * last 16-lane chunk covers 8 channels when HALF. g % 8 == 0. */
VQ_INLINE void acc_blk(const uint8_t *rows, size_t bb, int nt, const float *a, int ng, int d, int g,
                       float *acc, int cb, const int NR, const int HALF, const int BITS) {
    __m512 e[4];
    const int g16 = g % 16 == 0;
    for (int j = 0; j < NR; j++)
        e[j] = (HALF && j == NR - 1) ? _mm512_maskz_loadu_ps(0xFF, acc + cb + 16 * j)
                                     : _mm512_loadu_ps(acc + cb + 16 * j);
    for (int t = 0; t < nt; t++) {
        const uint8_t *r = rows + (size_t)t * bb;
        const float *at = a + t * ng;
#if VQ_VB
        __m512i v64 = _mm512_setzero_si512();
        if (BITS >= 5 && BITS <= 7 && NR == 4 && !HALF) v64 = bytes64(r, d, cb, BITS);
#endif
        for (int j = 0; j < NR; j++) {
            const int c = cb + 16 * j;
            const int half = HALF && j == NR - 1;
            const __m512 av = (g16 || half)
                                ? _mm512_set1_ps(at[c / g])
                                : _mm512_insertf32x8(_mm512_set1_ps(at[c / g]),
                                                     _mm256_set1_ps(at[(c + 8) / g]), 1);
#if VQ_VB
            if (BITS >= 5 && BITS <= 7 && NR == 4 && !HALF) {
                e[j] = _mm512_fmadd_ps(av, bytes_f(v64, j), e[j]);
                continue;
            }
#endif
            e[j] = _mm512_fmadd_ps(av, half ? codes16(r, d, c, BITS, 1) : codes16(r, d, c, BITS, 0),
                                   e[j]);
        }
    }
    for (int j = 0; j < NR; j++) {
        if (HALF && j == NR - 1) _mm512_mask_storeu_ps(acc + cb + 16 * j, 0xFF, e[j]);
        else _mm512_storeu_ps(acc + cb + 16 * j, e[j]);
    }
}

VQ_INLINE void acc_chunk(const uint8_t *rows, size_t bb, int nt, const float *a, int ng, int d,
                         int g, float *acc, const int BITS) {
    int cb = 0;
    for (; cb + 64 <= d; cb += 64) acc_blk(rows, bb, nt, a, ng, d, g, acc, cb, 4, 0, BITS);
    const int rest = d - cb;
    const int half = rest % 16 != 0;
    switch ((rest + 15) / 16) {
    case 4:
        if (half) acc_blk(rows, bb, nt, a, ng, d, g, acc, cb, 4, 1, BITS);
        else acc_blk(rows, bb, nt, a, ng, d, g, acc, cb, 4, 0, BITS);
        break;
    case 3:
        if (half) acc_blk(rows, bb, nt, a, ng, d, g, acc, cb, 3, 1, BITS);
        else acc_blk(rows, bb, nt, a, ng, d, g, acc, cb, 3, 0, BITS);
        break;
    case 2:
        if (half) acc_blk(rows, bb, nt, a, ng, d, g, acc, cb, 2, 1, BITS);
        else acc_blk(rows, bb, nt, a, ng, d, g, acc, cb, 2, 0, BITS);
        break;
    case 1:
        if (half) acc_blk(rows, bb, nt, a, ng, d, g, acc, cb, 1, 1, BITS);
        else acc_blk(rows, bb, nt, a, ng, d, g, acc, cb, 1, 0, BITS);
        break;
    default: break;
    }
}

void VQ_KIVI_FN(vq_kivi_acc_vals)(const uint8_t *blocks, size_t block_bytes, int64_t n,
                                  const float *w, int d, int bits, int g, float *acc) {
    const int ng = d / g;
    if (g % 8 != 0 || ng > 128) {
        vq_kivi_acc_vals_ref(blocks, block_bytes, n, w, d, bits, g, acc);
        return;
    }
    float a[32 * 128];
    for (int64_t t0 = 0; t0 < n; t0 += 32) {
        const int nt = n - t0 < 32 ? (int)(n - t0) : 32;
        const uint8_t *b0 = blocks + (size_t)t0 * block_bytes;
        if (ng <= 8) {
            /* one masked load of the 2*ng sf16 header values (scales, then zeros) per token;
             * the zero-point sums stay in a register */
            const __mmask16 hm = (__mmask16)((1u << (2 * ng)) - 1u);
            const __mmask16 am = (__mmask16)((1u << ng) - 1u);
            __m512 zacc = _mm512_setzero_ps();
            for (int t = 0; t < nt; t++) {
                const uint8_t *blk = b0 + (size_t)t * block_bytes;
                const __m512 hv = _mm512_mul_ps(sf16x16_mask(blk, hm), _mm512_set1_ps(w[t0 + t]));
                _mm512_mask_storeu_ps(a + t * ng, am, hv);
                zacc = _mm512_add_ps(zacc, hv);
            }
            float zs[16];
            _mm512_storeu_ps(zs, zacc);
            for (int h = 0; h < ng; h++) acc[d + h] += zs[ng + h];
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
