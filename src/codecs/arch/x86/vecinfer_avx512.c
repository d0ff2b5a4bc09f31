/* vecinfer_avx512.c — AVX-512 kernels of the calibrated codecs vecinfer and spectral (contract
 * and layout in codecs/lutsum_kernels.h; scalar references vq_vi_*_ref / vq_sp_*_ref).
 * Score: 16 tokens in the lanes, one 32-bit gather per program word, shift / and / table
 * gather per field, one sum per group in field order (bitwise equal to the reference).
 * No histogram accumulate or finish here: a gather + add + scatter accumulate (16 fields of one
 * token in the lanes) and a 16-lane finish measured 2-4x / 2x slower than the generic
 * accumulate and the 8-lane AVX2 finish on the development CPU (AMD Zen 4).
 * vecinfer's multi-query kernels (vq_vi_*_multi_avx512, end of file) work in the coordinate
 * domain instead: each token's codewords are gathered once into 16-coordinate vectors and dotted
 * with / added for up to 4 queries (the reference within float rounding, not bitwise;
 * docs/ALGORITHMS.md §9.15). */
#include <immintrin.h>
#include <math.h>

#include "codecs/arch/x86/tq_x86.h"
#include "codecs/arch/x86/wide_x86.h"
#include "codecs/lutsum_kernels.h"

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
            r = _mm512_add_ps(_mm512_mul_ps(vq_sf16x16(sc), a0),
                              _mm512_mul_ps(vq_sf16x16(_mm512_srli_epi32(sc, 16)), a1));
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

/* ---- vecinfer, coordinate domain (vq_vi_vk) ------------------------------------------------ */

/* The sub-vector codes of the token at p into cd[0 .. n_sub) (at most 64); not needed (left
 * unset) when vi_vec reads byte codes itself (V == 4, c == 8). */
VQ_INLINE void vi_codes(const vq_vi_vk *k, const uint8_t *p, int32_t *cd, const int V) {
    if (V == 4 && k->c == 8) return;
    if (k->c == 8) {
        for (int s = 0; s < k->n_sub; s++) cd[s] = p[s];
        return;
    }
    const uint32_t mask = (1u << k->c) - 1u;
    for (int s = 0; s < k->n_sub; s++) {
        const size_t bit = (size_t)s * (size_t)k->c, byte = bit >> 3;
        uint32_t v = p[byte];
        if (byte + 1 < (size_t)k->code_bytes) v |= (uint32_t)p[byte + 1] << 8;
        if (byte + 2 < (size_t)k->code_bytes) v |= (uint32_t)p[byte + 2] << 16;
        cd[s] = (int32_t)((v >> (bit & 7)) & mask);
    }
}

/* Coordinates 16 z .. 16 z + 15 of the token's x~^ (codes cd), V = v when the codeword rows
 * are loaded and inserted whole (V = 2, 4, 8, 16 with d % 16 == 0), else V = 0: a gather
 * (lanes past d read 0). Whole rows: gathers were slower on the measured CPU. */
VQ_INLINE __m512 vi_vec(const vq_vi_vk *k, int z, const int32_t *cd, const uint8_t *p,
                        const int V) {
    const float *cb = k->cb;
    if (V == 4 && k->c == 8) { /* codes straight from the record (no store to forward) */
        const uint8_t *c4 = p + 4 * z;
        __m512 x = _mm512_castps128_ps512(_mm_loadu_ps(cb + 4 * (size_t)c4[0]));
        x = _mm512_insertf32x4(x, _mm_loadu_ps(cb + 4 * (size_t)c4[1]), 1);
        x = _mm512_insertf32x4(x, _mm_loadu_ps(cb + 4 * (size_t)c4[2]), 2);
        return _mm512_insertf32x4(x, _mm_loadu_ps(cb + 4 * (size_t)c4[3]), 3);
    }
    if (V == 16) return _mm512_loadu_ps(cb + 16 * (size_t)cd[z]);
    if (V == 8)
        return _mm512_insertf32x8(
            _mm512_castps256_ps512(_mm256_loadu_ps(cb + 8 * (size_t)cd[2 * z])),
            _mm256_loadu_ps(cb + 8 * (size_t)cd[2 * z + 1]), 1);
    if (V == 4) {
        const int32_t *c4 = cd + 4 * z;
        __m512 x = _mm512_castps128_ps512(_mm_loadu_ps(cb + 4 * (size_t)c4[0]));
        x = _mm512_insertf32x4(x, _mm_loadu_ps(cb + 4 * (size_t)c4[1]), 1);
        x = _mm512_insertf32x4(x, _mm_loadu_ps(cb + 4 * (size_t)c4[2]), 2);
        return _mm512_insertf32x4(x, _mm_loadu_ps(cb + 4 * (size_t)c4[3]), 3);
    }
    if (V == 2) {
        const int32_t *c2 = cd + 8 * z;
        __m128d r[4];
        for (int i = 0; i < 4; i++)
            r[i] = _mm_loadh_pd(
                _mm_load_sd((const double *)(const void *)(cb + 2 * (size_t)c2[2 * i])),
                (const double *)(const void *)(cb + 2 * (size_t)c2[2 * i + 1]));
        __m512d x = _mm512_castpd128_pd512(r[0]);
        x = _mm512_insertf64x2(x, r[1], 1);
        x = _mm512_insertf64x2(x, r[2], 2);
        return _mm512_castpd_ps(_mm512_insertf64x2(x, r[3], 3));
    }
    const __m512i code = _mm512_mask_i32gather_epi32(
        _mm512_setzero_si512(), (__mmask16)0xFFFF,
        _mm512_loadu_si512((const void *)(k->sub + 16 * z)), cd, 4);
    const __m512i ix = _mm512_add_epi32(_mm512_mullo_epi32(code, _mm512_set1_epi32(k->v)),
                                        _mm512_loadu_si512((const void *)(k->j + 16 * z)));
    const __mmask16 m = (__mmask16)(k->d - 16 * z >= 16 ? 0xFFFF : (1u << (k->d - 16 * z)) - 1u);
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, ix, cb, 4);
}

/* V: the row width of vi_vec. */
VQ_INLINE void vi_score_nq(const vq_vi_vk *k, const float *const *qs, const int NQ, const int V,
                           const uint8_t *codes, int64_t n, float *const *scores) {
    const int cbytes = k->code_bytes;
    for (int64_t t0 = 0; t0 < n; t0 += 8) {
        const int mt = n - t0 < 8 ? (int)(n - t0) : 8;
        __m256 f[4][8];
        for (int u = 0; u < 8; u++) {
            if (u >= mt) {
                for (int j = 0; j < NQ; j++) f[j][u] = _mm256_setzero_ps();
                continue;
            }
            int32_t cd[64];
            const uint8_t *p = codes + (size_t)(t0 + u) * (size_t)cbytes;
            vi_codes(k, p, cd, V);
            __m512 a[4];
            for (int j = 0; j < NQ; j++) a[j] = _mm512_setzero_ps();
            for (int z = 0; z < k->nz; z++) {
                const __m512 x = vi_vec(k, z, cd, p, V);
#pragma GCC unroll 4
                for (int j = 0; j < NQ; j++)
                    a[j] = _mm512_fmadd_ps(_mm512_loadu_ps(qs[j] + k->q_off + 16 * z), x, a[j]);
            }
            for (int j = 0; j < NQ; j++) f[j][u] = fold8(a[j]);
        }
        for (int j = 0; j < NQ; j++)
            _mm256_mask_storeu_ps(scores[j] + t0, (__mmask8)((1u << mt) - 1u), hsum8x8(f[j]));
    }
}

/* The row width vi_vec uses for k (0: gathers). */
static int vi_rows(const vq_vi_vk *k) {
    return k->d % 16 == 0 && (k->v == 2 || k->v == 4 || k->v == 8 || k->v == 16) ? k->v : 0;
}

#define VI_BY_V(CALL) \
    switch (vi_rows(k)) { \
    case 2: CALL(2); break; \
    case 4: CALL(4); break; \
    case 8: CALL(8); break; \
    case 16: CALL(16); break; \
    default: CALL(0); break; \
    }

void vq_vi_score_multi_avx512(const vq_vi_vk *k, const float *const *qs, int nq,
                              const uint8_t *codes, int64_t n, float *const *scores){
#define VI_SC(V) \
    (nq == 1   ? vi_score_nq(k, qs, 1, V, codes, n, scores) \
     : nq == 2 ? vi_score_nq(k, qs, 2, V, codes, n, scores) \
     : nq == 3 ? vi_score_nq(k, qs, 3, V, codes, n, scores) \
               : vi_score_nq(k, qs, 4, V, codes, n, scores))
    VI_BY_V(VI_SC)
#undef VI_SC
}

VQ_INLINE void vi_acc_nq(const vq_vi_vk *k, const uint8_t *codes, int64_t n, const float *const *w,
                         const int NQ, const int V, float *const *acc) {
    const int cbytes = k->code_bytes;
    for (int z0 = 0; z0 < k->nz; z0 += 4) {
        const int nzz = k->nz - z0 < 4 ? k->nz - z0 : 4;
        __m512 a[4][4];
        for (int j = 0; j < NQ; j++)
            for (int zz = 0; zz < 4; zz++)
                a[j][zz] = zz < nzz ? _mm512_loadu_ps(acc[j] + k->z_off + 16 * (z0 + zz))
                                    : _mm512_setzero_ps();
        for (int64_t t = 0; t < n; t++) {
            int32_t cd[64];
            const uint8_t *p = codes + (size_t)t * (size_t)cbytes;
            vi_codes(k, p, cd, V);
#pragma GCC unroll 4
            for (int zz = 0; zz < 4; zz++) {
                if (zz >= nzz) break;
                const __m512 x = vi_vec(k, z0 + zz, cd, p, V);
#pragma GCC unroll 4
                for (int j = 0; j < NQ; j++)
                    a[j][zz] = _mm512_fmadd_ps(_mm512_set1_ps(w[j][t]), x, a[j][zz]);
            }
        }
        for (int j = 0; j < NQ; j++)
            for (int zz = 0; zz < nzz; zz++)
                _mm512_storeu_ps(acc[j] + k->z_off + 16 * (z0 + zz), a[j][zz]);
    }
}

void vq_vi_acc_multi_avx512(const vq_vi_vk *k, const uint8_t *codes, int64_t n,
                            const float *const *w, int nq, float *const *acc) {
#define VI_AC(V) \
    (nq == 1   ? vi_acc_nq(k, codes, n, w, 1, V, acc) \
     : nq == 2 ? vi_acc_nq(k, codes, n, w, 2, V, acc) \
     : nq == 3 ? vi_acc_nq(k, codes, n, w, 3, V, acc) \
               : vi_acc_nq(k, codes, n, w, 4, V, acc))
    VI_BY_V(VI_AC)
#undef VI_AC
}
