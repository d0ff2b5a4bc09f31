/*
 * kivi_avx512.c — AVX-512 (F, BW, VL, DQ) kernels of the KIVI codecs (contract in
 * codecs/kivi.h): the scale fold of key blocks and the value accumulation (the key tiles'
 * integer scores are in kivi_tiles_avx512.c). Codes of 16 channels of a value row: each bit
 * plane becomes floats on its own and the planes are added (2..7 bits): a 4- or 2-bit plane by
 * one load, VPERMD / broadcast, a per-lane variable shift and a VPERMPS table of the field's
 * value at its bit position; a 1-bit plane is loaded as a lane mask and adds 2^s where set
 * (masked add); 8 bits: vpmovzxbd. A row tail of 8 channels (d % 16 == 8) reads only its own
 * bytes; acc_row needs group size % 8 == 0 (else scalar reference).
 *
 * kivi_avx512vbmi.c compiles this file again with AVX512_VBMI (VQ_KIVI_VBMI; the kernels are
 * then named *_avx512vbmi and chosen at run time where the CPU has VBMI): 5..7-bit rows of
 * acc_vals then build 64 codes at a time as bytes (nibbles by VPMOVZXBW + shift +
 * VPTERNLOGD, the 2-bit plane by VPMOVZXBD + VPMULTISHIFTQB, a 1-bit plane by a masked byte
 * add) and widen 16 of them per zero-masked VPERMB + conversion; the products and their order
 * are those of the 16-channel path.
 */
#include <immintrin.h>
#include <math.h>
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

/* Horizontal sum of 8 lanes (the fold's bias). */
VQ_INLINE float hsum1(__m256 a) {
    const __m256 t = _mm256_hadd_ps(a, a);
    const __m256 u = _mm256_hadd_ps(t, t);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
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

/* max |qp| over n entries by 16-lane max (exact in any order), a lane mask of non-finite
 * entries alongside; then qi = cvt(qp * inv) (VCVTPS2DQ rounds to nearest even, as lrintf in
 * the default mode) narrowed to int16 (|qi| <= qmax, no saturation). */
VQ_INLINE float quant16(const float *qp, int n, int qmax, int16_t *qi) {
    __m512 mx = _mm512_setzero_ps();
    __mmask16 bad = 0;
    const __m512 fmax = _mm512_set1_ps(3.40282347e38f);
    int c = 0;
    for (; c + 16 <= n; c += 16) {
        const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(qp + c));
        bad |= _mm512_cmp_ps_mask(a, fmax, _CMP_NLE_UQ);
        mx = _mm512_max_ps(mx, a);
    }
    if (c < n) {
        const __mmask16 m = (__mmask16)((1u << (n - c)) - 1);
        const __m512 a = _mm512_abs_ps(_mm512_maskz_loadu_ps(m, qp + c));
        bad |= _mm512_cmp_ps_mask(a, fmax, _CMP_NLE_UQ);
        mx = _mm512_max_ps(mx, a);
    }
    const float m = _mm512_reduce_max_ps(mx);
    if (bad || m == 0.0f) {
        memset(qi, 0, (size_t)n * sizeof *qi);
        return bad ? NAN : 0.0f;
    }
    const __m512 inv = _mm512_set1_ps((float)qmax / m);
    for (c = 0; c + 16 <= n; c += 16)
        _mm256_storeu_si256(
            (__m256i *)(void *)(qi + c),
            _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(qp + c), inv))));
    if (c < n) {
        const __mmask16 mk = (__mmask16)((1u << (n - c)) - 1);
        _mm256_mask_storeu_epi16(qi + c, mk,
                                 _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(
                                     _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, qp + c), inv))));
    }
    return m / (float)qmax;
}

/* Lane t of the result = max of the 16 lanes of v[4 (t % 4) + t / 4] (a transposing tree:
 * 15 pairs of shuffles; a maximum is exact in any order). */
VQ_INLINE __m512 max16x16(const __m512 *v) {
    __m512 a[8], b[4], c[2];
    for (int i = 0; i < 8; i++)
        a[i] = _mm512_max_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++)
        b[i] = _mm512_max_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++)
        c[i] = _mm512_max_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0xEE));
    return _mm512_max_ps(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xDD));
}

/* prep at d = 64 with 2..4 classes (SmolLM2's decode shape; docs/ALGORITHMS.md §9.16) in
 * registers: the 4 x NQ folded chunks, the class maxima of every (query j, class k) pair as
 * masked maxima per chunk and one transposing tree (pair in lane 4 j + k), 1 / scale and scale
 * of all pairs by one division each, and qi per 16 channels with each lane's 1 / scale permuted
 * in. The same products, quotients, conversions and bias as the general path (quant16, the
 * fold), so the same bits; its loads of qp at class offsets that straddle the stored vectors (a
 * store forwarding stall each) are gone. Returns 0 (nothing written but bias) where a query
 * has a non-finite qp: the general path then takes the block. */
VQ_INLINE int prep64(const float *const *q, const int NQ, const uint8_t *s16, const uint8_t *z16,
                     int ncls, const int *nch, const int *qmax, int16_t *const *qi,
                     float *const *delta, float *bias) {
    __m512 sf[4], zf[4], qv[4][4], av[4][4], v[16]; /* av: |qv| */
    for (int i = 0; i < 4; i++) {
        sf[i] = sf16x16(s16 + 32 * i);
        zf[i] = sf16x16(z16 + 32 * i);
    }
    for (int t = 0; t < 16; t++) v[t] = _mm512_setzero_ps();
    __mmask16 bad = 0;
    const __m512 fmax = _mm512_set1_ps(3.40282347e38f);
    for (int j = 0; j < NQ; j++) {
        __m512 b = _mm512_setzero_ps();
        for (int i = 0; i < 4; i++) {
            const __m512 x = _mm512_loadu_ps(q[j] + 16 * i);
            qv[j][i] = _mm512_mul_ps(x, sf[i]);
            av[j][i] = _mm512_abs_ps(qv[j][i]);
            b = _mm512_fmadd_ps(x, zf[i], b);
            bad |= _mm512_cmp_ps_mask(av[j][i], fmax, _CMP_NLE_UQ);
        }
        bias[j] = hsum1(fold(b));
    }
    __m512i cls[4]; /* lane -> class of channel 16 i + lane */
    for (int i = 0; i < 4; i++) cls[i] = _mm512_setzero_si512();
    int c0 = 0;
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        if (k >= ncls) break;
        const int c1 = c0 + nch[k];
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            const int lo = c0 > 16 * i ? c0 - 16 * i : 0, hi = c1 < 16 * i + 16 ? c1 - 16 * i : 16;
            if (lo >= hi) continue;
            const __mmask16 mk = (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
            cls[i] = _mm512_mask_mov_epi32(cls[i], mk, _mm512_set1_epi32(k));
            for (int j = 0; j < NQ; j++)
                v[4 * k + j] = _mm512_mask_max_ps(v[4 * k + j], mk, v[4 * k + j], av[j][i]);
        }
        c0 = c1;
    }
    if (bad) return 0;
    const int total = c0; /* channels of no class (0-bit, after the others) get no entries */
    const __m512 m = max16x16(v);
    const __m512 qm = _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(
        _mm512_and_si512(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(3)),
        _mm512_castsi128_si512(
            _mm_maskz_loadu_epi32((__mmask8)((1u << ncls) - 1u), (const void *)qmax))));
    const __mmask16 nz = _mm512_cmp_ps_mask(m, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    const __m512 inv = _mm512_maskz_div_ps(nz, qm, m); /* 0 for an all-zero class: qi = 0 */
    float dl[16];
    _mm512_storeu_ps(dl, _mm512_maskz_div_ps(nz, m, qm));
    for (int j = 0; j < NQ; j++) {
        for (int k = 0; k < ncls; k++) delta[j][k] = dl[4 * j + k];
        const __m512i off = _mm512_set1_epi32(4 * j);
        for (int i = 0; i < 4; i++) {
            if (16 * i >= total) break;
            const __m512 iv = _mm512_permutexvar_ps(_mm512_add_epi32(cls[i], off), inv);
            const __m256i w = _mm512_cvtepi32_epi16(
                _mm512_cvtps_epi32(_mm512_mul_ps(qv[j][i], iv)));
            if (total - 16 * i >= 16) _mm256_storeu_si256((__m256i *)(void *)(qi[j] + 16 * i), w);
            else
                _mm256_mask_storeu_epi16(qi[j] + 16 * i, (__mmask16)((1u << (total - 16 * i)) - 1u),
                                         w);
        }
    }
    return 1;
}

/* The integer queries of one key block (vq_kivi_prep_fn): ŝ and ẑ widened once for all the
 * queries, each query folded exactly as VQ_KIVI_FN(vq_kivi_fold) (the same products and bias)
 * and quantized per class (quant16). */
void VQ_KIVI_FN(vq_kivi_prep)(const float *const *q, int nq, const uint8_t *s16, const uint8_t *z16,
                              int d, int ncls, const int *nch, const int *qmax, int16_t *const *qi,
                              float *const *delta, float *bias) {
    /* measured (one thread, per block): 3 queries x 4 classes 95 -> 60 ns, 2 x 2 51 -> 35; with
     * one class, or fewer than 4 pairs, the general path is as fast or faster (1 x 1: 21 vs 35) */
    if (d == 64 && ncls >= 2 && ncls <= 4 && nq * ncls >= 4 && nq <= 4) { /* 16 (j, k) lanes */
        int done = 0;
        switch (nq) {
        case 1: done = prep64(q, 1, s16, z16, ncls, nch, qmax, qi, delta, bias); break;
        case 2: done = prep64(q, 2, s16, z16, ncls, nch, qmax, qi, delta, bias); break;
        case 3: done = prep64(q, 3, s16, z16, ncls, nch, qmax, qi, delta, bias); break;
        default: done = prep64(q, 4, s16, z16, ncls, nch, qmax, qi, delta, bias); break;
        }
        if (done) return;
    }
    float sf[1024], zf[1024], qp[1024];
    const int d16 = d & ~15;
    for (int c = 0; c < d16; c += 16) {
        _mm512_storeu_ps(sf + c, sf16x16(s16 + 2 * c));
        _mm512_storeu_ps(zf + c, sf16x16(z16 + 2 * c));
    }
    if (d16 < d) {
        _mm256_storeu_ps(sf + d16, sf16x8(s16 + 2 * d16));
        _mm256_storeu_ps(zf + d16, sf16x8(z16 + 2 * d16));
    }
    for (int j = 0; j < nq; j++) {
        __m512 b = _mm512_setzero_ps();
        for (int c = 0; c < d16; c += 16) {
            const __m512 qv = _mm512_loadu_ps(q[j] + c);
            _mm512_storeu_ps(qp + c, _mm512_mul_ps(qv, _mm512_loadu_ps(sf + c)));
            b = _mm512_fmadd_ps(qv, _mm512_loadu_ps(zf + c), b);
        }
        __m256 bt = fold(b);
        if (d16 < d) {
            const __m256 qv = _mm256_loadu_ps(q[j] + d16);
            _mm256_storeu_ps(qp + d16, _mm256_mul_ps(qv, _mm256_loadu_ps(sf + d16)));
            bt = _mm256_fmadd_ps(qv, _mm256_loadu_ps(zf + d16), bt);
        }
        bias[j] = hsum1(bt);
        for (int k = 0, c0 = 0; k < ncls; c0 += nch[k], k++)
            delta[j][k] = quant16(qp + c0, nch[k], qmax[k], qi[j] + c0);
    }
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
