/*
 * turboquant_avx512.c — AVX-512 (F, BW, VL, DQ) score / accumulate kernels of turboquant_mse
 * and turboquant_rvq (contract and layout in codecs/turboquant_kernels.h).
 *
 * A 16-lane vector covers one 128-coordinate chunk: lane l loads the bits_a bytes holding
 * codes 128c+8l .. 128c+8l+7 (zero-extended to 32 bits); shifting by k*bits_a brings code k
 * to the low bits, and VPERMPS (_mm512_permutexvar_ps, which only reads the low 4 index bits)
 * looks the level up in the 16-entry replicated table. With a second plane, VPTERNLOGD merges
 * the high index bits. The prepared query is stored in the same interleaved order, so the
 * level vector multiplies the query vector directly (one FMA per 16 coordinates).
 * Two 1-bit planes (1+1) are bit-interleaved once per chunk so each code costs one shift.
 * Score: 8 tokens per step (8 FMA chains), then a hadd tree gives 8 scores at once.
 * Accumulate: per chunk, 8 accumulators (one per k) stay in registers across all tokens; one
 * 2-bit plane (d > 64) takes two tokens per lookup (acc2x_t).
 * Head dims <= 64 use half a chunk, so there two tokens share each vector (lanes 0-7 / 8-15).
 *
 * Measured and rejected (Zen4, d=128, 8192 tokens, accumulate us; bench/bench_codec): masked
 * adds from the code bits (acc_pos += w under a k-mask from a 1-bit plane, out = l0*S +
 * dl*acc_pos): rvq two 1-bit planes 77.8 vs 63.6, mse b=1 42.3 vs 36.5 (KMOV + masked VADDPS
 * per 16 codes costs more than shift + permute + FMA); VPERMILPS instead of VPERMPS for codes of
 * <= 2 bits: no change. Score of one 2-bit plane: NIB mode 39.9 us (49.5 with VPGATHERDD
 * instead of the load/insert transposes) vs this LUT kernel 37.7 us.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "codecs/arch/x86/stream_pf.h"
#include "codecs/arch/x86/tq_x86.h"
#include "codecs/turboquant_kernels.h"

#define VQ_INLINE static inline __attribute__((always_inline))

VQ_INLINE __m512i ld_lanes(const uint8_t *p, int bits, int full, __mmask16 m) {
    if (bits == 1)
        return _mm512_cvtepu8_epi32(full ? _mm_loadu_si128((const __m128i *)(const void *)p)
                                         : _mm_maskz_loadu_epi8(m, p));
    if (bits == 2)
        return _mm512_cvtepu16_epi32(full ? _mm256_loadu_si256((const __m256i *)(const void *)p)
                                          : _mm256_maskz_loadu_epi16(m, p));
    return full ? _mm512_loadu_si512((const void *)p) : _mm512_maskz_loadu_epi32(m, p);
}

/* Index vector of code k: low BA bits from A, next BB bits from Bs (= B << BA). */
VQ_INLINE __m512i idx_k(__m512i A, __m512i Bs, int k, int BA, int BB) {
    __m512i a = _mm512_srli_epi32(A, (unsigned)(k * BA));
    if (!BB) return a;
    __m512i b = _mm512_srli_epi32(Bs, (unsigned)(k * BB));
    return _mm512_ternarylogic_epi32(_mm512_set1_epi32((1 << BA) - 1), a, b, 0xCA);
}

/* Per-chunk index source of one record. For two 1-bit planes (rvq b=1) the bits are
 * interleaved once per chunk (a_k at bit 2k, b_k at bit 2k+1) so each code costs one shift;
 * otherwise A and B << BA are kept apart and merged per code by VPTERNLOGD. */
VQ_INLINE void chunk_src(const vq_tq_kern *k, const uint8_t *rec, int c, int full, __mmask16 m,
                         int BA, int BB, __m512i *X, __m512i *Bs) {
    __m512i A = ld_lanes(rec + k->off_a + c * 16 * BA, BA, full, m);
    if (!BB) {
        *X = A;
        *Bs = A;
        return;
    }
    __m512i B = ld_lanes(rec + k->off_b + c * 16 * BB, BB, full, m);
    if (BA == 1 && BB == 1) {
        __m512i x = _mm512_or_si512(A, _mm512_slli_epi32(B, 16));
        x = _mm512_ternarylogic_epi32(x, _mm512_slli_epi32(x, 4), _mm512_set1_epi32(0x0F0F0F0F),
                                      0xA8);
        x = _mm512_ternarylogic_epi32(x, _mm512_slli_epi32(x, 2), _mm512_set1_epi32(0x33333333),
                                      0xA8);
        x = _mm512_ternarylogic_epi32(x, _mm512_slli_epi32(x, 1), _mm512_set1_epi32(0x55555555),
                                      0xA8);
        *X = _mm512_or_si512(x, _mm512_srli_epi32(x, 15));
        *Bs = *X;
        return;
    }
    *X = A;
    *Bs = _mm512_slli_epi32(B, (unsigned)BA);
}

/* Index vector of code kk from the chunk source. */
VQ_INLINE __m512i code_idx(__m512i X, __m512i Bs, int kk, int BA, int BB) {
    if (BA == 1 && BB == 1) return _mm512_srli_epi32(X, (unsigned)(2 * kk));
    return idx_k(X, Bs, kk, BA, BB);
}

VQ_INLINE __m256 fold8(__m512 a) {
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

/* Head dims <= 64 fill at most 8 of the 16 lanes of a chunk, so two tokens share a vector:
 * token A in lanes 0..7, token B in lanes 8..15 (B is loaded 8 lanes "early" with a shifted
 * mask; masked-off elements are never read). */
VQ_INLINE __m512i ld_lanes_pair(const uint8_t *pa, const uint8_t *pb, int bits, __mmask16 m8) {
    const __mmask16 mh = (__mmask16)(m8 << 8);
    /* base address 8 lanes before pb (integer arithmetic: it may lie outside the buffer,
     * but only lanes 8.. are accessed) */
    const void *pb8 = (const void *)((uintptr_t)pb - (uintptr_t)(8 * bits));
    if (bits == 1)
        return _mm512_cvtepu8_epi32(_mm_mask_loadu_epi8(_mm_maskz_loadu_epi8(m8, pa), mh, pb8));
    if (bits == 2)
        return _mm512_cvtepu16_epi32(
            _mm256_mask_loadu_epi16(_mm256_maskz_loadu_epi16(m8, pa), mh, pb8));
    return _mm512_mask_loadu_epi32(_mm512_maskz_loadu_epi32(m8, pa), mh, pb8);
}

VQ_INLINE void pair_src(const vq_tq_kern *k, const uint8_t *ra, const uint8_t *rb, __mmask16 m8,
                        int BA, int BB, __m512i *X, __m512i *Bs) {
    __m512i A = ld_lanes_pair(ra + k->off_a, rb + k->off_a, BA, m8);
    if (!BB) {
        *X = A;
        *Bs = A;
        return;
    }
    __m512i B = ld_lanes_pair(ra + k->off_b, rb + k->off_b, BB, m8);
    if (BA == 1 && BB == 1) {
        __m512i x = _mm512_or_si512(A, _mm512_slli_epi32(B, 16));
        x = _mm512_ternarylogic_epi32(x, _mm512_slli_epi32(x, 4), _mm512_set1_epi32(0x0F0F0F0F),
                                      0xA8);
        x = _mm512_ternarylogic_epi32(x, _mm512_slli_epi32(x, 2), _mm512_set1_epi32(0x33333333),
                                      0xA8);
        x = _mm512_ternarylogic_epi32(x, _mm512_slli_epi32(x, 1), _mm512_set1_epi32(0x55555555),
                                      0xA8);
        *X = _mm512_or_si512(x, _mm512_srli_epi32(x, 15));
        *Bs = *X;
        return;
    }
    *X = A;
    *Bs = _mm512_slli_epi32(B, (unsigned)BA);
}

/* Score for d <= 64: 8 tokens (4 pairs) per step. */
VQ_INLINE void score_pair_t(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                            float *scores, int BA, int BB) {
    const __m512 lut = _mm512_loadu_ps(k->lut);
    const int rl = k->rec;
    const __mmask16 m8 = (__mmask16)((1u << (k->d / 8)) - 1u);
    __m512 qd[8];
    for (int kk = 0; kk < 8; kk++) {
        const __m256 h = _mm256_loadu_ps(qs + 16 * kk);
        qd[kk] = _mm512_insertf32x8(_mm512_castps256_ps512(h), h, 1);
    }
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        const uint8_t *r = codes + t * rl;
        __m512 a[4];
        __m512i X[4], Bs[4];
        for (int u = 0; u < 4; u++) {
            a[u] = _mm512_setzero_ps();
            pair_src(k, r + 2 * u * rl, r + (2 * u + 1) * rl, m8, BA, BB, &X[u], &Bs[u]);
        }
        for (int kk = 0; kk < 8; kk++)
            for (int u = 0; u < 4; u++)
                a[u] = _mm512_fmadd_ps(
                    _mm512_permutexvar_ps(code_idx(X[u], Bs[u], kk, BA, BB), lut), qd[kk], a[u]);
        const __m256 sc = _mm256_setr_ps(vq_tq_sf16(r), vq_tq_sf16(r + rl), vq_tq_sf16(r + 2 * rl),
                                         vq_tq_sf16(r + 3 * rl), vq_tq_sf16(r + 4 * rl),
                                         vq_tq_sf16(r + 5 * rl), vq_tq_sf16(r + 6 * rl),
                                         vq_tq_sf16(r + 7 * rl));
        __m256 s = hsum8x8(_mm512_castps512_ps256(a[0]), _mm512_extractf32x8_ps(a[0], 1),
                           _mm512_castps512_ps256(a[1]), _mm512_extractf32x8_ps(a[1], 1),
                           _mm512_castps512_ps256(a[2]), _mm512_extractf32x8_ps(a[2], 1),
                           _mm512_castps512_ps256(a[3]), _mm512_extractf32x8_ps(a[3], 1));
        _mm256_storeu_ps(scores + t, _mm256_mul_ps(sc, s));
    }
    for (; t < n; t++) {
        const uint8_t *r0 = codes + t * rl;
        __m512 a0 = _mm512_setzero_ps();
        __m512i X, Bs;
        chunk_src(k, r0, 0, 0, m8, BA, BB, &X, &Bs);
        for (int kk = 0; kk < 8; kk++)
            a0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(code_idx(X, Bs, kk, BA, BB), lut),
                                 _mm512_loadu_ps(qs + 16 * kk), a0);
        scores[t] = vq_tq_sf16(r0) * _mm512_reduce_add_ps(a0);
    }
}

/* Accumulate for d <= 64, NQ (1..4) weight vectors w[j] into acc[j]: two tokens per vector
 * (token t in lanes 0..7, t + 1 in 8..15), halves folded at the end; each pair of records is
 * unpacked and looked up once for every query, so each acc[j] has the bits of NQ = 1.
 * Per 16 tokens the scaled weights w[j][t] * scale_t are formed at once (16 scales by one
 * gather and one VMULPS per query, vq_tq_weights16: the products of the scalar form, bit for bit)
 * and each pair's two weights are put in the vector halves by one VPERMPS per query, instead
 * of per token and query a scalar multiply, two broadcasts and an insert (which, with the
 * scalar scale conversions, took as many uops as the lookups). */
VQ_INLINE void acc_pair_tm(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                           const float *const *w, const int NQ, float *const *acc, int BA, int BB) {
    static const int32_t half[8][16] __attribute__((aligned(64))) = {
        {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
        {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
        {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
        {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
        {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9},
        {10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
        {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13},
        {14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}};
    const __m512 lut = _mm512_loadu_ps(k->lut);
    const int rl = k->rec;
    const __mmask16 m8 = (__mmask16)((1u << (k->d / 8)) - 1u);
    __m512 v[4][8];
#pragma GCC unroll 8
    for (int j = 0; j < NQ; j++)
#pragma GCC unroll 8
        for (int kk = 0; kk < 8; kk++) v[j][kk] = _mm512_setzero_ps();
    int64_t t = 0;
    for (int64_t t0 = 0; t0 + 2 <= n; t0 += 16) {
        const int m = n - t0 < 16 ? (int)(n - t0) : 16;
        const __mmask16 mk = (__mmask16)((1u << m) - 1u);
        __m512 wv[4];
        vq_tq_weights16(codes + t0 * rl, rl, mk, w, t0, NQ, wv);
        for (int p = 0; p + 1 < m; p += 2) {
            t = t0 + p + 2;
            const uint8_t *ra = codes + (t0 + p) * rl, *rb = ra + rl;
            vq_pf_span(ra + VQ_PF_RECS * (size_t)rl, 2 * (size_t)rl);
            const __m512i ix = _mm512_load_si512((const void *)half[p / 2]);
            __m512 ws[4];
#pragma GCC unroll 8
            for (int j = 0; j < NQ; j++) ws[j] = _mm512_permutexvar_ps(ix, wv[j]);
            __m512i X, Bs;
            pair_src(k, ra, rb, m8, BA, BB, &X, &Bs);
#pragma GCC unroll 8
            for (int kk = 0; kk < 8; kk++) {
                const __m512 lv = _mm512_permutexvar_ps(code_idx(X, Bs, kk, BA, BB), lut);
#pragma GCC unroll 8
                for (int j = 0; j < NQ; j++) v[j][kk] = _mm512_fmadd_ps(lv, ws[j], v[j][kk]);
            }
        }
    }
    if (t < n) { /* odd last token: lanes 0..7 only */
        const uint8_t *ra = codes + t * rl;
        const float sa = vq_tq_sf16(ra);
        __m512i X, Bs;
        chunk_src(k, ra, 0, 0, m8, BA, BB, &X, &Bs);
#pragma GCC unroll 8
        for (int kk = 0; kk < 8; kk++) {
            const __m512 lv = _mm512_permutexvar_ps(code_idx(X, Bs, kk, BA, BB), lut);
#pragma GCC unroll 8
            for (int j = 0; j < NQ; j++)
                v[j][kk] = _mm512_fmadd_ps(
                    lv, _mm512_maskz_mov_ps(0x00FF, _mm512_set1_ps(w[j][t] * sa)), v[j][kk]);
        }
    }
    const __mmask8 m = (__mmask8)m8;
#pragma GCC unroll 8
    for (int j = 0; j < NQ; j++)
#pragma GCC unroll 8
        for (int kk = 0; kk < 8; kk++) {
            const __m256 f = _mm256_add_ps(_mm512_castps512_ps256(v[j][kk]),
                                           _mm512_extractf32x8_ps(v[j][kk], 1));
            float *ac = acc[j] + 16 * kk;
            _mm256_mask_storeu_ps(ac, m, _mm256_add_ps(_mm256_maskz_loadu_ps(m, ac), f));
        }
}

VQ_INLINE void acc_pair_tq(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                           const float *const *w, int nq, float *const *acc, int BA, int BB) {
    switch (nq) {
    case 1: acc_pair_tm(k, codes, n, w, 1, acc, BA, BB); break;
    case 2: acc_pair_tm(k, codes, n, w, 2, acc, BA, BB); break;
    case 3: acc_pair_tm(k, codes, n, w, 3, acc, BA, BB); break;
    default: acc_pair_tm(k, codes, n, w, 4, acc, BA, BB); break;
    }
}

/* 8 tokens per step: 8 independent FMA chains, one hadd tree for the 8 scores; the scales
 * are converted on the scalar ports. */
VQ_INLINE void score_t(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                       float *scores, int BA, int BB) {
    if (k->d <= 64) {
        score_pair_t(k, qs, codes, n, scores, BA, BB);
        return;
    }
    const __m512 lut = _mm512_loadu_ps(k->lut);
    const int nc = k->n_chunks, rl = k->rec;
    const int last_lanes = (k->d - (nc - 1) * VQ_TQ_CHUNK) / 8;
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        const uint8_t *r = codes + t * rl;
        __m512 a[8];
        for (int u = 0; u < 8; u++) a[u] = _mm512_setzero_ps();
        for (int c = 0; c < nc; c++) {
            const int full = c < nc - 1 || last_lanes == 16;
            const __mmask16 m = (__mmask16)(full ? 0xFFFF : (1u << last_lanes) - 1u);
            const float *qc = qs + c * VQ_TQ_CHUNK;
            __m512i X[8], Bs[8];
            for (int u = 0; u < 8; u++) chunk_src(k, r + u * rl, c, full, m, BA, BB, &X[u], &Bs[u]);
            for (int kk = 0; kk < 8; kk++) {
                const __m512 qv = _mm512_loadu_ps(qc + 16 * kk);
                for (int u = 0; u < 8; u++)
                    a[u] = _mm512_fmadd_ps(
                        _mm512_permutexvar_ps(code_idx(X[u], Bs[u], kk, BA, BB), lut), qv, a[u]);
            }
        }
        const __m256 sc = _mm256_setr_ps(vq_tq_sf16(r), vq_tq_sf16(r + rl), vq_tq_sf16(r + 2 * rl),
                                         vq_tq_sf16(r + 3 * rl), vq_tq_sf16(r + 4 * rl),
                                         vq_tq_sf16(r + 5 * rl), vq_tq_sf16(r + 6 * rl),
                                         vq_tq_sf16(r + 7 * rl));
        __m256 s = hsum8x8(fold8(a[0]), fold8(a[1]), fold8(a[2]), fold8(a[3]), fold8(a[4]),
                           fold8(a[5]), fold8(a[6]), fold8(a[7]));
        _mm256_storeu_ps(scores + t, _mm256_mul_ps(sc, s));
    }
    for (; t < n; t++) {
        const uint8_t *r0 = codes + t * rl;
        __m512 a0 = _mm512_setzero_ps();
        for (int c = 0; c < nc; c++) {
            const int full = c < nc - 1 || last_lanes == 16;
            const __mmask16 m = (__mmask16)(full ? 0xFFFF : (1u << last_lanes) - 1u);
            const float *qc = qs + c * VQ_TQ_CHUNK;
            __m512i X, Bs;
            chunk_src(k, r0, c, full, m, BA, BB, &X, &Bs);
            for (int kk = 0; kk < 8; kk++)
                a0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(code_idx(X, Bs, kk, BA, BB), lut),
                                     _mm512_loadu_ps(qc + 16 * kk), a0);
        }
        scores[t] = vq_tq_sf16(r0) * _mm512_reduce_add_ps(a0);
    }
}

/* Accumulate for one 2-bit plane (turboquant_mse b=2, turboquant_rvq b=1), d > 64: two tokens
 * per table lookup. For tokens t, u the 16-entry table T[i | j << 2] = ws_t*lev[i] + ws_u*lev[j]
 * holds every sum of their two levels; a lane's nibble c_t | c_u << 2 picks it. With A, B the
 * lanes' 16-bit code words of t and u (code k at bits 2k), one VPTERNLOGD each builds the
 * nibbles of the even codes (A & 0x3333 | (B << 2) & ~0x3333: nibble m = code 2m) and of the
 * odd codes ((A >> 2) & 0x3333 | B & ~0x3333: nibble m = code 2m+1). Per pair and chunk:
 * 8 permutes + 8 adds (+ 8 shifts, 2 merges) instead of 2 x (8 permutes + 8 FMAs + 8 shifts). */
VQ_INLINE void acc2x_t(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *w,
                       float *acc) {
    const __m512 llo = _mm512_loadu_ps(k->lut); /* lut[i] = lev[i & 3] */
    const __m512 lhi = _mm512_permutexvar_ps(
        _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), llo);
    const __m512i m33 = _mm512_set1_epi32(0x33333333);
    const int nc = k->n_chunks, rl = k->rec;
    const int last_lanes = (k->d - (nc - 1) * VQ_TQ_CHUNK) / 8;
    for (int c = 0; c < nc; c++) {
        const int full = c < nc - 1 || last_lanes == 16;
        const __mmask16 m = (__mmask16)(full ? 0xFFFF : (1u << last_lanes) - 1u);
        float *ac = acc + c * VQ_TQ_CHUNK;
        const uint8_t *pc = codes + k->off_a + c * 32;
        __m512 v[8];
        for (int kk = 0; kk < 8; kk++) v[kk] = _mm512_loadu_ps(ac + 16 * kk);
        int64_t t = 0;
        for (; t + 2 <= n; t += 2) {
            const size_t o = (size_t)t * (size_t)rl;
            vq_pf_span(codes + o + VQ_PF_RECS * (size_t)rl, 2 * (size_t)rl);
            const float w0 = w[t] * vq_tq_sf16(codes + o),
                        w1 = w[t + 1] * vq_tq_sf16(codes + o + rl);
            const __m512 T = _mm512_fmadd_ps(_mm512_set1_ps(w1), lhi,
                                             _mm512_mul_ps(_mm512_set1_ps(w0), llo));
            const __m512i A = ld_lanes(pc + o, 2, full, m), B = ld_lanes(pc + o + rl, 2, full, m);
            const __m512i ze = _mm512_ternarylogic_epi32(m33, A, _mm512_slli_epi32(B, 2), 0xCA);
            const __m512i zo = _mm512_ternarylogic_epi32(m33, _mm512_srli_epi32(A, 2), B, 0xCA);
            for (int mm = 0; mm < 4; mm++) {
                const __m512 le = _mm512_permutexvar_ps(_mm512_srli_epi32(ze, (unsigned)(4 * mm)),
                                                        T);
                const __m512 lo = _mm512_permutexvar_ps(_mm512_srli_epi32(zo, (unsigned)(4 * mm)),
                                                        T);
                v[2 * mm] = full ? _mm512_add_ps(v[2 * mm], le)
                                 : _mm512_mask_add_ps(v[2 * mm], m, v[2 * mm], le);
                v[2 * mm + 1] = full ? _mm512_add_ps(v[2 * mm + 1], lo)
                                     : _mm512_mask_add_ps(v[2 * mm + 1], m, v[2 * mm + 1], lo);
            }
        }
        if (t < n) { /* odd last token */
            const uint8_t *r = codes + (size_t)t * (size_t)rl;
            const __m512 ws = _mm512_set1_ps(w[t] * vq_tq_sf16(r));
            const __m512i A = ld_lanes(pc + (size_t)t * (size_t)rl, 2, full, m);
            for (int kk = 0; kk < 8; kk++) {
                const __m512 lv = _mm512_permutexvar_ps(_mm512_srli_epi32(A, (unsigned)(2 * kk)),
                                                        llo);
                v[kk] = _mm512_mask3_fmadd_ps(lv, ws, v[kk], m);
            }
        }
        for (int kk = 0; kk < 8; kk++) _mm512_storeu_ps(ac + 16 * kk, v[kk]);
    }
}

VQ_INLINE void acc_t(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *w,
                     float *acc, int BA, int BB) {
    if (k->d <= 64) {
        acc_pair_tm(k, codes, n, &w, 1, &acc, BA, BB);
        return;
    }
    if (BA == 2 && BB == 0) {
        acc2x_t(k, codes, n, w, acc);
        return;
    }
    const __m512 lut = _mm512_loadu_ps(k->lut);
    const int nc = k->n_chunks, rl = k->rec;
    const int last_lanes = (k->d - (nc - 1) * VQ_TQ_CHUNK) / 8;
    for (int c = 0; c < nc; c++) {
        const int full = c < nc - 1 || last_lanes == 16;
        const __mmask16 m = (__mmask16)(full ? 0xFFFF : (1u << last_lanes) - 1u);
        float *ac = acc + c * VQ_TQ_CHUNK;
        __m512 v[8];
        for (int kk = 0; kk < 8; kk++) v[kk] = _mm512_loadu_ps(ac + 16 * kk);
        for (int64_t t = 0; t < n; t++) {
            const uint8_t *r = codes + t * rl;
            vq_pf_span(r + VQ_PF_RECS * (size_t)rl, (size_t)rl);
            const __m512 ws = _mm512_set1_ps(w[t] * vq_tq_sf16(r));
            __m512i X, Bs;
            chunk_src(k, r, c, full, m, BA, BB, &X, &Bs);
            for (int kk = 0; kk < 8; kk++) {
                __m512 lv = _mm512_permutexvar_ps(code_idx(X, Bs, kk, BA, BB), lut);
                v[kk] = full ? _mm512_fmadd_ps(lv, ws, v[kk])
                             : _mm512_mask3_fmadd_ps(lv, ws, v[kk], m);
            }
        }
        for (int kk = 0; kk < 8; kk++) _mm512_storeu_ps(ac + 16 * kk, v[kk]);
    }
}

/* acc_t's general path (d > 64) for two weight vectors over the same records: each record is
 * unpacked and looked up once; each accumulator's fma sequence is acc_t's for its w alone. */
VQ_INLINE void acc_t2(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *w0,
                      const float *w1, float *acc0, float *acc1, int BA, int BB) {
    const __m512 lut = _mm512_loadu_ps(k->lut);
    const int nc = k->n_chunks, rl = k->rec;
    const int last_lanes = (k->d - (nc - 1) * VQ_TQ_CHUNK) / 8;
    for (int c = 0; c < nc; c++) {
        const int full = c < nc - 1 || last_lanes == 16;
        const __mmask16 m = (__mmask16)(full ? 0xFFFF : (1u << last_lanes) - 1u);
        float *a0 = acc0 + c * VQ_TQ_CHUNK, *a1 = acc1 + c * VQ_TQ_CHUNK;
        __m512 v0[8], v1[8];
        for (int kk = 0; kk < 8; kk++) {
            v0[kk] = _mm512_loadu_ps(a0 + 16 * kk);
            v1[kk] = _mm512_loadu_ps(a1 + 16 * kk);
        }
        for (int64_t t = 0; t < n; t++) {
            const uint8_t *r = codes + t * rl;
            vq_pf_span(r + VQ_PF_RECS * (size_t)rl, (size_t)rl);
            const float sf = vq_tq_sf16(r);
            const __m512 ws0 = _mm512_set1_ps(w0[t] * sf), ws1 = _mm512_set1_ps(w1[t] * sf);
            __m512i X, Bs;
            chunk_src(k, r, c, full, m, BA, BB, &X, &Bs);
            for (int kk = 0; kk < 8; kk++) {
                const __m512 lv = _mm512_permutexvar_ps(code_idx(X, Bs, kk, BA, BB), lut);
                v0[kk] = full ? _mm512_fmadd_ps(lv, ws0, v0[kk])
                              : _mm512_mask3_fmadd_ps(lv, ws0, v0[kk], m);
                v1[kk] = full ? _mm512_fmadd_ps(lv, ws1, v1[kk])
                              : _mm512_mask3_fmadd_ps(lv, ws1, v1[kk], m);
            }
        }
        for (int kk = 0; kk < 8; kk++) {
            _mm512_storeu_ps(a0 + 16 * kk, v0[kk]);
            _mm512_storeu_ps(a1 + 16 * kk, v1[kk]);
        }
    }
}

/* Tokens per chunk of acc_wide_multi (even). */
#define ACC_CHUNK 64

/* d > 64, NQ (3..6) weight vectors over the ACC_CHUNK-token chunk of m tokens at codes
 * (weights w[j] + t for its token t): every code is looked up once for all queries, and each
 * query's accumulator takes acc_t's FMA sequence with its weight (w[j][t] * scale_t, formed
 * 16 at a time by vq_tq_weights16: the scalar products bit for bit), so each acc[j] gets the
 * bits of acc_t alone. Per chunk of 128 coordinates two halves of 4 vectors: NQ x 4
 * accumulators in registers. */
VQ_INLINE void acc_tm_chunk(const vq_tq_kern *k, const uint8_t *codes, int m, const float *const *w,
                            const int NQ, float *const *acc, int BA, int BB) {
    const __m512 lut = _mm512_loadu_ps(k->lut);
    const int nc = k->n_chunks, rl = k->rec;
    const int last_lanes = (k->d - (nc - 1) * VQ_TQ_CHUNK) / 8;
    float wb[6][ACC_CHUNK] __attribute__((aligned(64)));
    for (int t0 = 0; t0 < m; t0 += 16) {
        const int r = m - t0 < 16 ? m - t0 : 16;
        __m512 wv[6];
        vq_tq_weights16(codes + (size_t)t0 * (size_t)rl, rl, (__mmask16)((1u << r) - 1u), w, t0, NQ,
                        wv);
#pragma GCC unroll 6
        for (int j = 0; j < NQ; j++) _mm512_store_ps(wb[j] + t0, wv[j]);
    }
    for (int c = 0; c < nc; c++) {
        const int full = c < nc - 1 || last_lanes == 16;
        const __mmask16 mk = (__mmask16)(full ? 0xFFFF : (1u << last_lanes) - 1u);
        for (int h = 0; h < 8; h += 4) {
            __m512 v[6][4];
#pragma GCC unroll 6
            for (int j = 0; j < NQ; j++)
#pragma GCC unroll 4
                for (int kk = 0; kk < 4; kk++)
                    v[j][kk] = _mm512_loadu_ps(acc[j] + c * VQ_TQ_CHUNK + 16 * (h + kk));
            for (int t = 0; t < m; t++) {
                const uint8_t *r = codes + (size_t)t * (size_t)rl;
                if (c == 0 && h == 0) vq_pf_span(r + VQ_PF_RECS * (size_t)rl, (size_t)rl);
                __m512i X, Bs;
                chunk_src(k, r, c, full, mk, BA, BB, &X, &Bs);
#pragma GCC unroll 4
                for (int kk = 0; kk < 4; kk++) {
                    const __m512 lv = _mm512_permutexvar_ps(code_idx(X, Bs, h + kk, BA, BB), lut);
#pragma GCC unroll 6
                    for (int j = 0; j < NQ; j++) {
                        const __m512 ws = _mm512_set1_ps(wb[j][t]);
                        v[j][kk] = full ? _mm512_fmadd_ps(lv, ws, v[j][kk])
                                        : _mm512_mask3_fmadd_ps(lv, ws, v[j][kk], mk);
                    }
                }
            }
#pragma GCC unroll 6
            for (int j = 0; j < NQ; j++)
#pragma GCC unroll 4
                for (int kk = 0; kk < 4; kk++)
                    _mm512_storeu_ps(acc[j] + c * VQ_TQ_CHUNK + 16 * (h + kk), v[j][kk]);
        }
    }
}

/* d > 64: 3..6 queries at a time through acc_tm_chunk, a last pair through acc_t2, a last odd
 * one (and every query of the 2-bit layout, which has its own kernel) through acc_t. The
 * tokens go in chunks of ACC_CHUNK (even: acc2x_t's token pairs stay the same), every query
 * over a chunk while its records are in L1, so a stream is read once, not once per group;
 * each accumulator's FMA sequence (load acc, the tokens in order, store) and thus its bits do
 * not depend on the chunking. */
VQ_INLINE void acc_wide_multi(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                              const float *const *w, int nq, float *const *acc, int BA, int BB) {
    const int grouped = !(BA == 2 && BB == 0);
    for (int64_t c0 = 0; c0 < n; c0 += ACC_CHUNK) {
        const int64_t m = n - c0 < ACC_CHUNK ? n - c0 : ACC_CHUNK;
        const uint8_t *cc = codes + c0 * k->rec;
        int j = 0;
        const float *wc[6];
        for (; grouped && nq - j >= 3; j += nq - j < 6 ? nq - j : 6) {
            const int q = nq - j < 6 ? nq - j : 6;
            for (int i = 0; i < q; i++) wc[i] = w[j + i] + c0;
            switch (q) {
            case 3: acc_tm_chunk(k, cc, (int)m, wc, 3, acc + j, BA, BB); break;
            case 4: acc_tm_chunk(k, cc, (int)m, wc, 4, acc + j, BA, BB); break;
            case 5: acc_tm_chunk(k, cc, (int)m, wc, 5, acc + j, BA, BB); break;
            default: acc_tm_chunk(k, cc, (int)m, wc, 6, acc + j, BA, BB); break;
            }
        }
        for (; grouped && j + 2 <= nq; j += 2)
            acc_t2(k, cc, m, w[j] + c0, w[j + 1] + c0, acc[j], acc[j + 1], BA, BB);
        for (; j < nq; j++) acc_t(k, cc, m, w[j] + c0, acc[j], BA, BB);
    }
}

/* The multi-query accumulate of one bit layout: record pairs for d <= 64, query pairs above. */
VQ_INLINE void acc_multi(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                         const float *const *w, int nq, float *const *acc, int BA, int BB) {
    if (k->d > 64) acc_wide_multi(k, codes, n, w, nq, acc, BA, BB);
    else acc_pair_tq(k, codes, n, w, nq, acc, BA, BB);
}

/* AVX-512 score; same result as vq_tq_score_ref up to summation order. */
void vq_tq_score_avx512(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
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

/* AVX-512 accumulate; same result as vq_tq_accumulate_ref up to rounding. */
void vq_tq_accumulate_avx512(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *w,
                             float *acc) {
    switch (k->bits_a * 4 + k->bits_b) {
    case 4: acc_t(k, codes, n, w, acc, 1, 0); break;
    case 8: acc_t(k, codes, n, w, acc, 2, 0); break;
    case 16: acc_t(k, codes, n, w, acc, 4, 0); break;
    case 9: acc_t(k, codes, n, w, acc, 2, 1); break;
    case 5: acc_t(k, codes, n, w, acc, 1, 1); break;
    case 10: acc_t(k, codes, n, w, acc, 2, 2); break;
    default: vq_tq_accumulate_ref(k, codes, n, w, acc); break;
    }
}

/* nq (1..4; d > 64: 1..6) weight vectors over the same records; the bit layouts of
 * vq_tq_accumulate_avx512 only (vq_tq_codec_set_multi); each acc[j] the same bits as
 * vq_tq_accumulate_avx512 with w[j]. d <= 64: every record pair unpacked once for all; d > 64:
 * every code looked up once for 3..6 queries (once per pair for 2, except one 2-bit plane). */
void vq_tq_accumulate_multi_avx512(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                                   const float *const *w, int nq, float *const *acc) {
    switch (k->bits_a * 4 + k->bits_b) {
    case 4: acc_multi(k, codes, n, w, nq, acc, 1, 0); break;
    case 8: acc_multi(k, codes, n, w, nq, acc, 2, 0); break;
    case 16: acc_multi(k, codes, n, w, nq, acc, 4, 0); break;
    case 9: acc_multi(k, codes, n, w, nq, acc, 2, 1); break;
    case 5: acc_multi(k, codes, n, w, nq, acc, 1, 1); break;
    default: acc_multi(k, codes, n, w, nq, acc, 2, 2); break;
    }
}

/* ---- NIB score mode: 16 tokens in the lanes, one table permute per nibble -------------- */

/* Loads 16 bytes (the first nb valid) at p + u*rl for tokens u = 0..15 and transposes them so
 * that W[w] lane u = bytes 4w..4w+3 of token u. Tokens g, g+4, g+8, g+12 share a register
 * before a 4x4 in-lane dword transpose. */
VQ_INLINE void unit_t16(const uint8_t *p, int rl, int nb, __m512i W[4]) {
    __m512i R[4];
    const __mmask16 m = (__mmask16)((1u << nb) - 1u);
    for (int g = 0; g < 4; g++) {
        __m128i x[4];
        for (int j = 0; j < 4; j++) {
            const uint8_t *b = p + (size_t)(g + 4 * j) * rl;
            x[j] = nb == 16 ? _mm_loadu_si128((const __m128i *)(const void *)b)
                            : _mm_maskz_loadu_epi8(m, b);
        }
        __m512i v = _mm512_castsi128_si512(x[0]);
        v = _mm512_inserti32x4(v, x[1], 1);
        v = _mm512_inserti32x4(v, x[2], 2);
        R[g] = _mm512_inserti32x4(v, x[3], 3);
    }
    const __m512i t0 = _mm512_unpacklo_epi32(R[0], R[1]), t1 = _mm512_unpackhi_epi32(R[0], R[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(R[2], R[3]), t3 = _mm512_unpackhi_epi32(R[2], R[3]);
    W[0] = _mm512_unpacklo_epi64(t0, t2);
    W[1] = _mm512_unpackhi_epi64(t0, t2);
    W[2] = _mm512_unpacklo_epi64(t1, t3);
    W[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* Adds the tables of one plane (n_nib nibbles at byte offset off of each record) for the 16
 * records at r into acc[0..3]. */
VQ_INLINE void nib_plane16(const uint8_t *r, int rl, int off, int n_nib, const float *T,
                           __m512 *acc) {
    const int nbytes = n_nib / 2;
    for (int u0 = 0; u0 < nbytes; u0 += 16) {
        const int nb = nbytes - u0 < 16 ? nbytes - u0 : 16;
        __m512i W[4];
        unit_t16(r + off + u0, rl, nb, W);
        const float *Tu = T + 16 * 2 * u0;
        const int nn = 2 * nb; /* nibbles in this unit */
        for (int w = 0; w < 4; w++)
            for (int i = 0; i < 8; i++) {
                if (8 * w + i >= nn) break;
                acc[i & 3] = _mm512_add_ps(
                    acc[i & 3], _mm512_permutexvar_ps(_mm512_srli_epi32(W[w], (unsigned)(4 * i)),
                                                      _mm512_loadu_ps(Tu + 16 * (8 * w + i))));
            }
    }
}

/* AVX-512 score, NIB mode; same result as vq_tq_nib_score_ref up to summation order. */
void vq_tq_nib_score_avx512(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                            float *scores) {
    const int rl = k->rec;
    int64_t t = 0;
    for (; t + 16 <= n; t += 16) {
        const uint8_t *r = codes + t * rl;
        __m512 acc[4];
        for (int i = 0; i < 4; i++) acc[i] = _mm512_setzero_ps();
        nib_plane16(r, rl, k->off_a, k->nib_a, qs, acc);
        if (k->nib_b) nib_plane16(r, rl, k->off_b, k->nib_b, qs + 16 * k->nib_a, acc);
        float sc[16];
        for (int u = 0; u < 16; u++) sc[u] = vq_tq_sf16(r + (size_t)u * rl);
        const __m512 s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]),
                                       _mm512_add_ps(acc[2], acc[3]));
        _mm512_storeu_ps(scores + t, _mm512_mul_ps(_mm512_loadu_ps(sc), s));
    }
    if (t < n) vq_tq_nib_score_ref(k, qs, codes + t * rl, n - t, scores + t);
}
