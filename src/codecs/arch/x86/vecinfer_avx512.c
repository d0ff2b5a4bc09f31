/* vecinfer_avx512.c — AVX-512 kernels of the calibrated codecs vecinfer and spectral (contract
 * and layout in codecs/lutsum_kernels.h; scalar references vq_vi_*_ref / vq_sp_*_ref).
 * Score: 16 tokens in the lanes, one 32-bit gather per program word, shift / and / table
 * gather per field, one sum per group in field order (bitwise equal to the reference).
 * No accumulate or finish here: a gather + add + scatter accumulate (16 fields of one token in
 * the lanes) and a 16-lane finish measured 2-4x / 2x slower than the generic accumulate and
 * the 8-lane AVX2 finish on the development CPU. */
#include <immintrin.h>
#include <math.h>

#include "codecs/lutsum_kernels.h"

/* vq_sf16 -> fp32 of the low 16 bits of every lane (see vq_sf16_to_fp32). */
static inline __m512 sf16_to_ps(__m512i h) {
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(h, _mm512_set1_epi32(0x8000)), 16);
    const __m512i e = _mm512_and_si512(_mm512_srli_epi32(h, 9), _mm512_set1_epi32(63));
    const __m512i m = _mm512_and_si512(h, _mm512_set1_epi32(511));
    const __m512i normal = _mm512_or_si512(
        sign, _mm512_or_si512(_mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(96)), 23),
                              _mm512_slli_epi32(m, 14)));
    const __m512 sub = _mm512_or_ps(
        _mm512_mul_ps(_mm512_cvtepi32_ps(m), _mm512_set1_ps(0x1.0p-39f)),
        _mm512_castsi512_ps(sign));
    const __mmask16 is_sub = _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512());
    return _mm512_mask_blend_ps(is_sub, _mm512_castsi512_ps(normal), sub);
}

/* sum of the lookups of words [k0, k1) of 16 records (lane l at base + vidx[l]; lanes off in
 * km read no codes and look up entry 0 of each table), one sum in field order from 0 */
static inline __m512 words_sum(const vq_ls_prog *p, int k0, int k1, const float *lut,
                               const uint8_t *base, __m512i vidx, __mmask16 km) {
    __m512 a = _mm512_setzero_ps();
    for (int k = k0; k < k1; k++) {
        const vq_ls_word *w = &p->words[k];
        const __m512i word = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), km, vidx,
                                                         base + w->off, 1);
        for (int f = w->f0; f < w->f0 + w->nf; f++) {
            const __m512i i0 = _mm512_and_si512(
                _mm512_srl_epi32(word, _mm_cvtsi32_si128(p->shift[f])),
                _mm512_set1_epi32((int)p->mask[f]));
            a = _mm512_add_ps(a, _mm512_i32gather_ps(i0, lut + p->lut_off[f], 4));
        }
    }
    return a;
}

void vq_ls_score_avx512(const vq_ls_prog *p, const float *lut, const uint8_t *codes, int64_t n,
                        float *scores) {
    const __m512i vidx = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(p->rec));
    for (int64_t t0 = 0; t0 < n; t0 += 16) {
        const int m = n - t0 < 16 ? (int)(n - t0) : 16;
        const __mmask16 km = (__mmask16)(0xFFFFu >> (16 - m)); /* lanes past n read nothing */
        const uint8_t *base = codes + (size_t)t0 * (size_t)p->rec;
        __m512 r;
        if (p->n_scales == 0) {
            r = words_sum(p, 0, p->n_words, lut, base, vidx, km);
        } else {
            const __m512 a0 = words_sum(p, 0, p->w_split, lut, base, vidx, km);
            const __m512 a1 = words_sum(p, p->w_split, p->n_words, lut, base, vidx, km);
            const __m512i sc = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), km, vidx, base,
                                                           1);
            r = _mm512_add_ps(_mm512_mul_ps(sf16_to_ps(sc), a0),
                              _mm512_mul_ps(sf16_to_ps(_mm512_srli_epi32(sc, 16)), a1));
        }
        _mm512_mask_storeu_ps(scores + t0, km, r);
    }
}

void vq_ls_cols_dot_avx512(const float *a, int rows, int cols, const float *x, float *y) {
    int c = 0;
    for (; c + 64 <= cols; c += 64) {
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        for (int r = 0; r < rows; r++) {
            const float *ar = a + (size_t)r * (size_t)cols + c;
            const __m512 xr = _mm512_set1_ps(x[r]);
            s0 = _mm512_add_ps(s0, _mm512_mul_ps(xr, _mm512_loadu_ps(ar)));
            s1 = _mm512_add_ps(s1, _mm512_mul_ps(xr, _mm512_loadu_ps(ar + 16)));
            s2 = _mm512_add_ps(s2, _mm512_mul_ps(xr, _mm512_loadu_ps(ar + 32)));
            s3 = _mm512_add_ps(s3, _mm512_mul_ps(xr, _mm512_loadu_ps(ar + 48)));
        }
        _mm512_storeu_ps(y + c, s0);
        _mm512_storeu_ps(y + c + 16, s1);
        _mm512_storeu_ps(y + c + 32, s2);
        _mm512_storeu_ps(y + c + 48, s3);
    }
    for (; c < cols; c += 16) {
        const int m = cols - c < 16 ? cols - c : 16;
        const __mmask16 km = (__mmask16)(0xFFFFu >> (16 - m));
        __m512 s = _mm512_setzero_ps();
        for (int r = 0; r < rows; r++)
            s = _mm512_add_ps(
                s, _mm512_mul_ps(_mm512_set1_ps(x[r]),
                                 _mm512_maskz_loadu_ps(km, a + (size_t)r * (size_t)cols + c)));
        _mm512_mask_storeu_ps(y + c, km, s);
    }
}

int vq_ls_argmin_avx512(const float *p, const float *cbt, const float *cn, int k, int v) {
    __m512 best = _mm512_set1_ps(INFINITY);
    __m512i bidx = _mm512_setzero_si512();
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 two = _mm512_set1_ps(2.0f);
    for (int i0 = 0; i0 < k; i0 += 16) {
        const int m = k - i0 < 16 ? k - i0 : 16;
        const __mmask16 km = (__mmask16)(0xFFFFu >> (16 - m));
        __m512 dot = _mm512_setzero_ps();
        for (int j = 0; j < v; j++)
            dot = _mm512_add_ps(
                dot, _mm512_mul_ps(_mm512_set1_ps(p[j]),
                                   _mm512_maskz_loadu_ps(km, cbt + (size_t)j * (size_t)k + i0)));
        const __m512 dd = _mm512_sub_ps(_mm512_maskz_loadu_ps(km, cn + i0),
                                        _mm512_mul_ps(two, dot));
        const __mmask16 lt = _mm512_mask_cmp_ps_mask(km, dd, best, _CMP_LT_OQ);
        best = _mm512_mask_blend_ps(lt, best, dd);
        bidx = _mm512_mask_blend_epi32(lt, bidx, _mm512_add_epi32(iota, _mm512_set1_epi32(i0)));
    }
    const float mn = _mm512_reduce_min_ps(best);
    const __mmask16 eq = _mm512_cmp_ps_mask(best, _mm512_set1_ps(mn), _CMP_EQ_OQ);
    if (!eq) return 0; /* no finite distance (NaN everywhere): as the scalar loop */
    return _mm512_mask_reduce_min_epi32(eq, bidx);
}
