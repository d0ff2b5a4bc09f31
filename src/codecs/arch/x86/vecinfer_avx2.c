/* vecinfer_avx2.c — AVX2 kernels of the calibrated codecs vecinfer and spectral (contract and
 * layout in codecs/lutsum_kernels.h; scalar references vq_vi_*_ref / vq_sp_*_ref).
 * Score: 8 tokens in the lanes, one 32-bit gather per program word, shift / and / table
 * gather per field, one sum per group in field order (bitwise equal to the reference). AVX2
 * has no scatter: the codecs keep the generic accumulate. */
#include <immintrin.h>
#include <math.h>

#include "codecs/lutsum_kernels.h"

/* vq_sf16 -> fp32 of the low 16 bits of every lane (see vq_sf16_to_fp32). */
static inline __m256 sf16_to_ps(__m256i h) {
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
    const __m256i e = _mm256_and_si256(_mm256_srli_epi32(h, 9), _mm256_set1_epi32(63));
    const __m256i m = _mm256_and_si256(h, _mm256_set1_epi32(511));
    const __m256i normal = _mm256_or_si256(
        sign, _mm256_or_si256(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(96)), 23),
                              _mm256_slli_epi32(m, 14)));
    const __m256 sub = _mm256_or_ps(
        _mm256_mul_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(0x1.0p-39f)),
        _mm256_castsi256_ps(sign));
    const __m256 is_sub = _mm256_castsi256_ps(_mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
    return _mm256_blendv_ps(_mm256_castsi256_ps(normal), sub, is_sub);
}

static inline __m256i field(__m256i word, const vq_ls_prog *p, int f) {
    return _mm256_and_si256(_mm256_srl_epi32(word, _mm_cvtsi32_si128(p->shift[f])),
                            _mm256_set1_epi32((int)p->mask[f]));
}

/* sum of the lookups of words [k0, k1) of 8 records (lane l at base + vidx[l], lanes off in
 * km read no codes and look up entry 0 of each table), one sum in field order from 0 */
static inline __m256 words_sum(const vq_ls_prog *p, int k0, int k1, const float *lut,
                               const uint8_t *base, __m256i vidx, __m256i km) {
    __m256 a = _mm256_setzero_ps();
    for (int k = k0; k < k1; k++) {
        const vq_ls_word *w = &p->words[k];
        const __m256i word = _mm256_mask_i32gather_epi32(
            _mm256_setzero_si256(), (const int *)(const void *)(base + w->off), vidx, km, 1);
        for (int f = w->f0; f < w->f0 + w->nf; f++)
            a = _mm256_add_ps(a, _mm256_i32gather_ps(lut + p->lut_off[f], field(word, p, f), 4));
    }
    return a;
}

void vq_ls_score_avx2(const vq_ls_prog *p, const float *lut, const uint8_t *codes, int64_t n,
                      float *scores) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i vidx = _mm256_mullo_epi32(lane, _mm256_set1_epi32(p->rec));
    for (int64_t t0 = 0; t0 < n; t0 += 8) {
        const int m = n - t0 < 8 ? (int)(n - t0) : 8;
        const __m256i km = _mm256_cmpgt_epi32(_mm256_set1_epi32(m), lane);
        const uint8_t *base = codes + (size_t)t0 * (size_t)p->rec;
        __m256 r;
        if (p->n_scales == 0) {
            r = words_sum(p, 0, p->n_words, lut, base, vidx, km);
        } else {
            const __m256 a0 = words_sum(p, 0, p->w_split, lut, base, vidx, km);
            const __m256 a1 = words_sum(p, p->w_split, p->n_words, lut, base, vidx, km);
            const __m256i sc = _mm256_mask_i32gather_epi32(
                _mm256_setzero_si256(), (const int *)(const void *)base, vidx, km, 1);
            r = _mm256_add_ps(_mm256_mul_ps(sf16_to_ps(sc), a0),
                              _mm256_mul_ps(sf16_to_ps(_mm256_srli_epi32(sc, 16)), a1));
        }
        if (m == 8) _mm256_storeu_ps(scores + t0, r);
        else _mm256_maskstore_ps(scores + t0, km, r);
    }
}

void vq_ls_cols_dot_avx2(const float *a, int rows, int cols, const float *x, float *y) {
    int c = 0;
    for (; c + 32 <= cols; c += 32) {
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        for (int r = 0; r < rows; r++) {
            const float *ar = a + (size_t)r * (size_t)cols + c;
            const __m256 xr = _mm256_set1_ps(x[r]);
            s0 = _mm256_add_ps(s0, _mm256_mul_ps(xr, _mm256_loadu_ps(ar)));
            s1 = _mm256_add_ps(s1, _mm256_mul_ps(xr, _mm256_loadu_ps(ar + 8)));
            s2 = _mm256_add_ps(s2, _mm256_mul_ps(xr, _mm256_loadu_ps(ar + 16)));
            s3 = _mm256_add_ps(s3, _mm256_mul_ps(xr, _mm256_loadu_ps(ar + 24)));
        }
        _mm256_storeu_ps(y + c, s0);
        _mm256_storeu_ps(y + c + 8, s1);
        _mm256_storeu_ps(y + c + 16, s2);
        _mm256_storeu_ps(y + c + 24, s3);
    }
    for (; c + 8 <= cols; c += 8) {
        __m256 s = _mm256_setzero_ps();
        for (int r = 0; r < rows; r++)
            s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_set1_ps(x[r]),
                                               _mm256_loadu_ps(a + (size_t)r * (size_t)cols + c)));
        _mm256_storeu_ps(y + c, s);
    }
    for (; c < cols; c++) { /* same order as the vector lanes */
        float s = 0.0f;
        for (int r = 0; r < rows; r++) s += x[r] * a[(size_t)r * (size_t)cols + c];
        y[c] = s;
    }
}

void vq_ls_vi_finish_avx2(const float *hist, int n_sub, int k, int v, const float *cb, float *out) {
    const __m256i vidx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                            _mm256_set1_epi32(k));
    int s0 = 0;
    for (; s0 + 8 <= n_sub; s0 += 8) { /* 8 sub-vectors in the lanes */
        const float *h0 = hist + (size_t)s0 * (size_t)k;
        __m256 o[16];
        for (int j = 0; j < v; j++) o[j] = _mm256_setzero_ps();
        for (int i = 0; i < k; i++) {
            const __m256 h = _mm256_i32gather_ps(h0 + i, vidx, 4);
            const float *cw = cb + (size_t)i * (size_t)v;
            for (int j = 0; j < v; j++)
                o[j] = _mm256_add_ps(o[j], _mm256_mul_ps(h, _mm256_set1_ps(cw[j])));
        }
        float tmp[8];
        for (int j = 0; j < v; j++) {
            _mm256_storeu_ps(tmp, o[j]);
            for (int l = 0; l < 8; l++) out[(s0 + l) * v + j] = tmp[l];
        }
    }
    for (; s0 < n_sub; s0++) { /* remaining sub-vectors: the scalar loop */
        const float *h = hist + (size_t)s0 * (size_t)k;
        float o[16] = {0};
        for (int i = 0; i < k; i++) {
            if (h[i] == 0.0f) continue;
            for (int j = 0; j < v; j++) o[j] += h[i] * cb[(size_t)i * (size_t)v + j];
        }
        for (int j = 0; j < v; j++) out[s0 * v + j] = o[j];
    }
}

int vq_ls_argmin_avx2(const float *p, const float *cbt, const float *cn, int k, int v) {
    int i0 = 0, best_i = 0;
    float best_d = INFINITY;
    if (k >= 8) {
        __m256 best = _mm256_set1_ps(INFINITY);
        __m256i bidx = _mm256_setzero_si256();
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256 two = _mm256_set1_ps(2.0f);
        for (; i0 + 8 <= k; i0 += 8) {
            __m256 dot = _mm256_setzero_ps();
            for (int j = 0; j < v; j++)
                dot = _mm256_add_ps(
                    dot, _mm256_mul_ps(_mm256_set1_ps(p[j]),
                                       _mm256_loadu_ps(cbt + (size_t)j * (size_t)k + i0)));
            const __m256 dd = _mm256_sub_ps(_mm256_loadu_ps(cn + i0), _mm256_mul_ps(two, dot));
            const __m256 lt = _mm256_cmp_ps(dd, best, _CMP_LT_OQ);
            best = _mm256_blendv_ps(best, dd, lt);
            bidx = _mm256_castps_si256(_mm256_blendv_ps(
                _mm256_castsi256_ps(bidx),
                _mm256_castsi256_ps(_mm256_add_epi32(lane, _mm256_set1_epi32(i0))), lt));
        }
        float bd[8];
        int bi[8];
        _mm256_storeu_ps(bd, best);
        _mm256_storeu_si256((__m256i *)(void *)bi, bidx);
        for (int l = 0; l < 8; l++) /* smallest distance, lowest index among equals */
            if (bd[l] < best_d || (bd[l] == best_d && bi[l] < best_i)) {
                best_d = bd[l];
                best_i = bi[l];
            }
    }
    for (int i = i0; i < k; i++) { /* tail: larger indices, strict < keeps the first */
        float dot = 0.0f;
        for (int j = 0; j < v; j++) dot += p[j] * cbt[(size_t)j * (size_t)k + i];
        const float dd = cn[i] - 2.0f * dot;
        if (dd < best_d) {
            best_d = dd;
            best_i = i;
        }
    }
    return best_i;
}
