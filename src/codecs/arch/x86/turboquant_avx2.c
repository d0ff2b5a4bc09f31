/*
 * turboquant_avx2.c — AVX2 + FMA score / accumulate kernels of turboquant_mse and
 * turboquant_rvq (contract and layout in codecs/turboquant_kernels.h).
 *
 * Same scheme as the AVX-512 file on 8-lane halves of each 128-coordinate chunk: lane l of
 * half h reads the codes 128c + 8(8h+l) .. +7; shift k selects code k; VPERMPS
 * (_mm256_permutevar8x32_ps, low 3 index bits) looks up the level; 16-level tables use two
 * lookups and a blend on index bit 3. Two 1-bit planes (rvq b=1) are bit-interleaved once per
 * half chunk so each code costs one shift. A partial last half (head_dim % 128 not a multiple of
 * 64) is staged through a zeroed buffer.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "codecs/arch/x86/stream_pf.h"
#include "codecs/turboquant_kernels.h"

#define VQ_INLINE static inline __attribute__((always_inline))

/* 8 lanes of `bits` bytes each from p (nbytes valid; the rest read as zero). */
VQ_INLINE __m256i ld_lanes8(const uint8_t *p, int bits, int nv) {
    uint8_t tmp[32];
    if (nv < 8) {
        memset(tmp, 0, sizeof(tmp));
        memcpy(tmp, p, (size_t)(nv * bits));
        p = tmp;
    }
    if (bits == 1) return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
    if (bits == 2) return _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

/* Per-half-chunk index source: for two 1-bit planes (rvq b=1) the bits are interleaved once
 * (a_k at bit 2k, b_k at bit 2k+1), else A and B << BA are kept apart. */
VQ_INLINE void half_src(__m256i A, __m256i B, int BA, int BB, __m256i *X, __m256i *Bs) {
    if (BA == 1 && BB == 1) {
        __m256i x = _mm256_or_si256(A, _mm256_slli_epi32(B, 16));
        x = _mm256_and_si256(_mm256_or_si256(x, _mm256_slli_epi32(x, 4)),
                             _mm256_set1_epi32(0x0F0F0F0F));
        x = _mm256_and_si256(_mm256_or_si256(x, _mm256_slli_epi32(x, 2)),
                             _mm256_set1_epi32(0x33333333));
        x = _mm256_and_si256(_mm256_or_si256(x, _mm256_slli_epi32(x, 1)),
                             _mm256_set1_epi32(0x55555555));
        *X = _mm256_or_si256(x, _mm256_srli_epi32(x, 15));
        *Bs = *X;
        return;
    }
    *X = A;
    *Bs = BB ? _mm256_slli_epi32(B, BA) : A;
}

VQ_INLINE __m256 lookup(__m256i A, __m256i Bs, int k, int BA, int BB, __m256 lo, __m256 hi) {
    __m256i idx;
    if (BA == 1 && BB == 1) {
        idx = _mm256_srli_epi32(A, 2 * k);
    } else {
        idx = _mm256_srli_epi32(A, k * BA);
        if (BB) {
            const __m256i ma = _mm256_set1_epi32((1 << BA) - 1);
            __m256i b = _mm256_srli_epi32(Bs, k * BB);
            idx = _mm256_or_si256(_mm256_and_si256(ma, idx), _mm256_andnot_si256(ma, b));
        }
    }
    __m256 v = _mm256_permutevar8x32_ps(lo, idx);
    if (BA + BB < 4) return v;
    __m256 u = _mm256_permutevar8x32_ps(hi, idx);
    return _mm256_blendv_ps(v, u, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

VQ_INLINE __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

#define TQ_HALF_DOT(acc, rec) \
    do { \
        __m256i A_, B_; \
        half_src(ld_lanes8((rec) + k->off_a + (c * 16 + h * 8) * BA, BA, nv), \
                 BB ? ld_lanes8((rec) + k->off_b + (c * 16 + h * 8) * BB, BB, nv) \
                    : _mm256_setzero_si256(), \
                 BA, BB, &A_, &B_); \
        for (int kk = 0; kk < 8; kk++) \
            acc = _mm256_fmadd_ps(lookup(A_, B_, kk, BA, BB, lo, hi), \
                                  _mm256_loadu_ps(qc + 16 * kk), acc); \
    } while (0)

VQ_INLINE int half_lanes(const vq_tq_kern *k, int c, int h) {
    int lanes = (k->d - c * VQ_TQ_CHUNK) / 8;
    if (lanes > 16) lanes = 16;
    int nv = lanes - 8 * h;
    return nv < 0 ? 0 : nv > 8 ? 8 : nv;
}

VQ_INLINE void score_t(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                       float *scores, int BA, int BB) {
    const __m256 lo = _mm256_loadu_ps(k->lut), hi = _mm256_loadu_ps(k->lut + 8);
    const int nc = k->n_chunks, rl = k->rec;
    int64_t t = 0;
    for (; t + 4 <= n; t += 4) {
        const uint8_t *r0 = codes + t * rl, *r1 = r0 + rl, *r2 = r1 + rl, *r3 = r2 + rl;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int c = 0; c < nc; c++) {
            for (int h = 0; h < 2; h++) {
                const int nv = half_lanes(k, c, h);
                if (nv == 0) continue;
                const float *qc = qs + c * VQ_TQ_CHUNK + h * 8;
                TQ_HALF_DOT(a0, r0);
                TQ_HALF_DOT(a1, r1);
                TQ_HALF_DOT(a2, r2);
                TQ_HALF_DOT(a3, r3);
            }
        }
        __m128 s = _mm_setr_ps(vq_tq_sf16(r0), vq_tq_sf16(r1), vq_tq_sf16(r2), vq_tq_sf16(r3));
        _mm_storeu_ps(scores + t, _mm_mul_ps(s, hsum4(a0, a1, a2, a3)));
    }
    for (; t < n; t++) {
        const uint8_t *r0 = codes + t * rl;
        __m256 a0 = _mm256_setzero_ps();
        for (int c = 0; c < nc; c++) {
            for (int h = 0; h < 2; h++) {
                const int nv = half_lanes(k, c, h);
                if (nv == 0) continue;
                const float *qc = qs + c * VQ_TQ_CHUNK + h * 8;
                TQ_HALF_DOT(a0, r0);
            }
        }
        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(a0), _mm256_extractf128_ps(a0, 1));
        s4 = _mm_hadd_ps(s4, s4);
        s4 = _mm_hadd_ps(s4, s4);
        scores[t] = vq_tq_sf16(r0) * _mm_cvtss_f32(s4);
    }
}

/* Accumulate for Q (1..3) weight vectors at once: per half chunk (8 lanes x 8 coordinate
 * slots kk), each record is loaded and each code looked up once per group of KK slots for the
 * Q queries (Q x KK accumulators beside the Q weights), the tokens walked once per group; each
 * accumulator lane runs its fma chain over the tokens in order (acc += level x w[t] x scale),
 * so a query gets the same bits with any Q and KK. One query: Q = 1, KK = 8 (one walk). */
VQ_INLINE void acc_multi_t(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                           const float *const *w, float *const *acc, const int Q, const int KK,
                           int BA, int BB) {
    const __m256 lo = _mm256_loadu_ps(k->lut), hi = _mm256_loadu_ps(k->lut + 8);
    const int nc = k->n_chunks, rl = k->rec;
    for (int c = 0; c < nc; c++) {
        for (int h = 0; h < 2; h++) {
            const int nv = half_lanes(k, c, h);
            if (nv == 0) continue;
            const size_t off = (size_t)(c * VQ_TQ_CHUNK + h * 8);
            const __m256i msk = _mm256_cmpgt_epi32(_mm256_set1_epi32(nv),
                                                   _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
#pragma GCC unroll 8
            for (int kg = 0; kg < 8; kg += KK) {
                __m256 v[3][8];
                for (int q = 0; q < Q; q++)
                    for (int j = 0; j < KK; j++)
                        v[q][j] = _mm256_loadu_ps(acc[q] + off + 16 * (kg + j));
                for (int64_t t = 0; t < n; t++) {
                    const uint8_t *r = codes + t * rl;
                    if (kg == 0) vq_pf_span(r + VQ_PF_RECS * (size_t)rl, (size_t)rl);
                    const float sf = vq_tq_sf16(r);
                    __m256 ws[3];
                    for (int q = 0; q < Q; q++) ws[q] = _mm256_set1_ps(w[q][t] * sf);
                    __m256i A, B;
                    half_src(ld_lanes8(r + k->off_a + (c * 16 + h * 8) * BA, BA, nv),
                             BB ? ld_lanes8(r + k->off_b + (c * 16 + h * 8) * BB, BB, nv)
                                : _mm256_setzero_si256(),
                             BA, BB, &A, &B);
                    for (int j = 0; j < KK; j++) {
                        const __m256 lv = lookup(A, B, kg + j, BA, BB, lo, hi);
                        for (int q = 0; q < Q; q++) v[q][j] = _mm256_fmadd_ps(lv, ws[q], v[q][j]);
                    }
                }
                for (int q = 0; q < Q; q++)
                    for (int j = 0; j < KK; j++) {
                        float *dst = acc[q] + off + 16 * (kg + j);
                        if (nv == 8) _mm256_storeu_ps(dst, v[q][j]);
                        else _mm256_maskstore_ps(dst, msk, v[q][j]); /* padding lanes kept */
                    }
            }
        }
    }
}

VQ_INLINE void acc_multi_lay(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                             const float *const *w, float *const *acc, int Q, int BA, int BB) {
    switch (Q) {
    case 1: acc_multi_t(k, codes, n, w, acc, 1, 8, BA, BB); break;
    case 2: acc_multi_t(k, codes, n, w, acc, 2, 4, BA, BB); break;
    default: acc_multi_t(k, codes, n, w, acc, 3, 2, BA, BB); break;
    }
}

/* nq weight vectors in groups of up to 3 (4: 2 + 2); each accumulator the bits of its own
 * vq_tq_accumulate_avx2 call. */
void vq_tq_accumulate_multi_avx2(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                                 const float *const *w, int nq, float *const *acc) {
    for (int q0 = 0; q0 < nq;) {
        const int rest = nq - q0, Q = rest == 4 ? 2 : rest < 3 ? rest : 3;
        switch (k->bits_a * 4 + k->bits_b) {
        case 4: acc_multi_lay(k, codes, n, w + q0, acc + q0, Q, 1, 0); break;
        case 8: acc_multi_lay(k, codes, n, w + q0, acc + q0, Q, 2, 0); break;
        case 16: acc_multi_lay(k, codes, n, w + q0, acc + q0, Q, 4, 0); break;
        case 9: acc_multi_lay(k, codes, n, w + q0, acc + q0, Q, 2, 1); break;
        case 5: acc_multi_lay(k, codes, n, w + q0, acc + q0, Q, 1, 1); break;
        case 10: acc_multi_lay(k, codes, n, w + q0, acc + q0, Q, 2, 2); break;
        default:
            for (int q = 0; q < Q; q++) vq_tq_accumulate_ref(k, codes, n, w[q0 + q], acc[q0 + q]);
            break;
        }
        q0 += Q;
    }
}

/* AVX2 score; same result as vq_tq_score_ref up to summation order. */
void vq_tq_score_avx2(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                      float *scores) {
    switch (k->bits_a * 4 + k->bits_b) {
    case 4: score_t(k, qs, codes, n, scores, 1, 0); break;
    case 8: score_t(k, qs, codes, n, scores, 2, 0); break;
    case 16: score_t(k, qs, codes, n, scores, 4, 0); break;
    case 9: score_t(k, qs, codes, n, scores, 2, 1); break;
    case 5: score_t(k, qs, codes, n, scores, 1, 1); break;
    case 10: score_t(k, qs, codes, n, scores, 2, 2); break;
    default: vq_tq_score_ref(k, qs, codes, n, scores); break;
    }
}

/* AVX2 accumulate; same result as vq_tq_accumulate_ref up to rounding. */
void vq_tq_accumulate_avx2(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *w,
                           float *acc) {
    const float *const w1[1] = {w};
    float *const a1[1] = {acc};
    switch (k->bits_a * 4 + k->bits_b) {
    case 4: acc_multi_t(k, codes, n, w1, a1, 1, 8, 1, 0); break;
    case 8: acc_multi_t(k, codes, n, w1, a1, 1, 8, 2, 0); break;
    case 16: acc_multi_t(k, codes, n, w1, a1, 1, 8, 4, 0); break;
    case 9: acc_multi_t(k, codes, n, w1, a1, 1, 8, 2, 1); break;
    case 5: acc_multi_t(k, codes, n, w1, a1, 1, 8, 1, 1); break;
    case 10: acc_multi_t(k, codes, n, w1, a1, 1, 8, 2, 2); break;
    default: vq_tq_accumulate_ref(k, codes, n, w, acc); break;
    }
}

/* ---- NIB score mode: 8 tokens in the lanes, one 16-entry lookup per nibble -------------- */

VQ_INLINE __m256 lut16(__m256i idx, const float *T) {
    const __m256 v = _mm256_permutevar8x32_ps(_mm256_loadu_ps(T), idx);
    const __m256 u = _mm256_permutevar8x32_ps(_mm256_loadu_ps(T + 8), idx);
    return _mm256_blendv_ps(v, u, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

/* Loads 16 bytes (the first nb valid) at p + u*rl for tokens u = 0..7 and transposes them so
 * that W[w] lane u = bytes 4w..4w+3 of token u (tokens g and g+4 share a register before a
 * 4x4 in-lane dword transpose). */
VQ_INLINE void unit_t8(const uint8_t *p, int rl, int nb, __m256i W[4]) {
    __m256i R[4];
    for (int g = 0; g < 4; g++) {
        __m128i x[2];
        for (int j = 0; j < 2; j++) {
            const uint8_t *b = p + (size_t)(g + 4 * j) * rl;
            if (nb == 16) {
                x[j] = _mm_loadu_si128((const __m128i *)(const void *)b);
            } else if (nb == 8) { /* head_dim 64, 1-bit plane */
                x[j] = _mm_loadl_epi64((const __m128i *)(const void *)b);
            } else {
                uint8_t tmp[16] = {0};
                memcpy(tmp, b, (size_t)nb);
                x[j] = _mm_loadu_si128((const __m128i *)(const void *)tmp);
            }
        }
        R[g] = _mm256_inserti128_si256(_mm256_castsi128_si256(x[0]), x[1], 1);
    }
    const __m256i t0 = _mm256_unpacklo_epi32(R[0], R[1]), t1 = _mm256_unpackhi_epi32(R[0], R[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(R[2], R[3]), t3 = _mm256_unpackhi_epi32(R[2], R[3]);
    W[0] = _mm256_unpacklo_epi64(t0, t2);
    W[1] = _mm256_unpackhi_epi64(t0, t2);
    W[2] = _mm256_unpacklo_epi64(t1, t3);
    W[3] = _mm256_unpackhi_epi64(t1, t3);
}

VQ_INLINE void nib_plane8(const uint8_t *r, int rl, int off, int n_nib, const float *T,
                          __m256 *acc) {
    const int nbytes = n_nib / 2;
    for (int u0 = 0; u0 < nbytes; u0 += 16) {
        const int nb = nbytes - u0 < 16 ? nbytes - u0 : 16;
        __m256i W[4];
        unit_t8(r + off + u0, rl, nb, W);
        const float *Tu = T + 16 * 2 * u0;
        const int nn = 2 * nb;
        for (int w = 0; w < 4; w++)
            for (int i = 0; i < 8; i++) {
                if (8 * w + i >= nn) break;
                acc[i & 1] = _mm256_add_ps(
                    acc[i & 1], lut16(_mm256_srli_epi32(W[w], 4 * i), Tu + 16 * (8 * w + i)));
            }
    }
}

/* AVX2 score, NIB mode; same result as vq_tq_nib_score_ref up to summation order. */
void vq_tq_nib_score_avx2(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                          float *scores) {
    const int rl = k->rec;
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        const uint8_t *r = codes + t * rl;
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        nib_plane8(r, rl, k->off_a, k->nib_a, qs, acc);
        if (k->nib_b) nib_plane8(r, rl, k->off_b, k->nib_b, qs + 16 * k->nib_a, acc);
        const __m256 sc = _mm256_setr_ps(vq_tq_sf16(r), vq_tq_sf16(r + rl), vq_tq_sf16(r + 2 * rl),
                                         vq_tq_sf16(r + 3 * rl), vq_tq_sf16(r + 4 * rl),
                                         vq_tq_sf16(r + 5 * rl), vq_tq_sf16(r + 6 * rl),
                                         vq_tq_sf16(r + 7 * rl));
        _mm256_storeu_ps(scores + t, _mm256_mul_ps(sc, _mm256_add_ps(acc[0], acc[1])));
    }
    if (t < n) vq_tq_nib_score_ref(k, qs, codes + t * rl, n - t, scores + t);
}
