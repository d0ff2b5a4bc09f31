/*
 * wide_avx2.c — AVX2 score / accumulate kernels of the codecs with 5..8-bit codes in the
 * rotated domain (turboquant_mse b = 5..8, int8); contract and layout in
 * codecs/wide_kernels.h.
 *
 * One vector holds 8 consecutive coordinates of one token (head dims are multiples of 8, so
 * there is no tail). int8 codes: VPMOVSXBD + VCVTDQ2PS. LUT codes: 8-bit codes are
 * zero-extended; 5..7-bit codes (8 codes = b bytes, read with one 8-byte load, or a b-byte copy
 * for the last group of a record so no load leaves the record) are broadcast to both 128-bit
 * lanes, one VPSHUFB puts the two bytes holding code l into 32-bit lane l, VPSRLVD by (l*b)
 * mod 8 and a mask finish the index; VGATHERDPS looks the levels up (5-bit codes: four
 * VPERMPS and three blends instead, the same levels: gathers are slow on AMD Zen). Each kernel
 * is specialized per code kind and width (no per-vector branch on them). Accumulate sums even
 * and odd tokens in separate registers (two FMA chains) and adds them to acc at the end. The
 * multi-query twins take up to 3 (scores) or 6 (values) queries per pass over the codes, each
 * query's bits those of its own call (docs/ALGORITHMS.md §9.6).
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "codecs/arch/x86/stream_pf.h"
#include "codecs/turboquant_kernels.h"
#include "codecs/wide_kernels.h"
#include "codecs/arch/x86/wide_x86.h"

typedef struct {
    __m256i ctl, shv, msk;
} unpack_k;

static unpack_k unpack_init(int b) {
    int32_t ctl[8], sh[8];
    for (int l = 0; l < 8; l++) {
        const int B = (l * b) >> 3;
        ctl[l] = B | (B + 1) << 8 | (int32_t)0x80800000u;
        sh[l] = (l * b) & 7;
    }
    unpack_k u;
    u.ctl = _mm256_loadu_si256((const __m256i *)(const void *)ctl);
    u.shv = _mm256_loadu_si256((const __m256i *)(const void *)sh);
    u.msk = _mm256_set1_epi32((1 << b) - 1);
    return u;
}

/* Levels of coordinates j .. j+7 of the code bytes p (LIN, B: compile-time constants in the
 * specialized kernels). */
VQ_INLINE __m256 lev8(const vq_wk *k, const unpack_k *u, const uint8_t *p, int j, const int LIN,
                      const int B) {
    if (B == 8) {
        const __m128i raw = _mm_loadl_epi64((const __m128i *)(const void *)(p + j));
        if (LIN) return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(raw));
        return _mm256_i32gather_ps(k->lut, _mm256_cvtepu8_epi32(raw), 4);
    }
    /* 8 codes = B bytes; an 8-byte load reads up to 3 bytes of the next group (masked off
     * below), so the last group of a record is copied instead (the record may end the buffer) */
    const uint8_t *src = p + j * B / 8;
    __m128i raw;
    if (j + 8 < k->d) {
        raw = _mm_loadl_epi64((const __m128i *)(const void *)src);
    } else {
        uint64_t w = 0;
        memcpy(&w, src, (size_t)B);
        raw = _mm_cvtsi64_si128((long long)w);
    }
    __m256i x = _mm256_broadcastsi128_si256(raw);
    x = _mm256_shuffle_epi8(x, u->ctl);
    x = _mm256_and_si256(_mm256_srlv_epi32(x, u->shv), u->msk);
    if (B == 5) { /* 32 levels: four VPERMPS from the table in memory, blends on bits 3, 4 */
        const __m256 b3 = _mm256_castsi256_ps(_mm256_slli_epi32(x, 28));
        const __m256 v01 = _mm256_blendv_ps(
            _mm256_permutevar8x32_ps(_mm256_loadu_ps(k->lut), x),
            _mm256_permutevar8x32_ps(_mm256_loadu_ps(k->lut + 8), x), b3);
        const __m256 v23 = _mm256_blendv_ps(
            _mm256_permutevar8x32_ps(_mm256_loadu_ps(k->lut + 16), x),
            _mm256_permutevar8x32_ps(_mm256_loadu_ps(k->lut + 24), x), b3);
        return _mm256_blendv_ps(v01, v23, _mm256_castsi256_ps(_mm256_slli_epi32(x, 27)));
    }
    return _mm256_i32gather_ps(k->lut, x, 4);
}

VQ_INLINE float hsum1(__m256 a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

VQ_INLINE void score_t(const vq_wk *k, const float *qs, const uint8_t *codes, int64_t n,
                       float *scores, const int LIN, const int B) {
    const unpack_k u = unpack_init(B);
    const int d = k->d, rec = k->rec;
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        const uint8_t *r0 = codes + t * rec;
        vq_pf_lines(r0 + VQ_PF_RECS * (size_t)rec, 8 * (size_t)rec);
        __m256 acc[8];
        float sc[8];
        for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
        for (int j = 0; j < d; j += 8) {
            const __m256 q = _mm256_loadu_ps(qs + j);
            for (int i = 0; i < 8; i++)
                acc[i] = _mm256_fmadd_ps(lev8(k, &u, r0 + i * rec + 2, j, LIN, B), q, acc[i]);
        }
        for (int i = 0; i < 8; i++) sc[i] = vq_tq_sf16(r0 + i * rec);
        _mm256_storeu_ps(scores + t, _mm256_mul_ps(hsum8x8(acc), _mm256_loadu_ps(sc)));
    }
    for (; t < n; t++) {
        const uint8_t *r = codes + t * rec;
        __m256 acc = _mm256_setzero_ps();
        for (int j = 0; j < d; j += 8)
            acc = _mm256_fmadd_ps(lev8(k, &u, r + 2, j, LIN, B), _mm256_loadu_ps(qs + j), acc);
        scores[t] = vq_tq_sf16(r) * hsum1(acc);
    }
}

/* Tokens per chunk of acc_t (even). */
#define ACC_CHUNK 64

/* Chunk c0 of the accumulate kernels: its token count, whether it is the first / the last,
 * and the requests for the next chunk's lines, spread over npass passes of its token pairs. */
struct acc_chunk {
    int64_t cn;
    int first, fin;
    struct vq_pf_steps ps;
};
VQ_INLINE struct acc_chunk acc_chunk_at(const uint8_t *codes, int64_t n, int64_t c0, int rec,
                                        int npass) {
    struct acc_chunk ch;
    ch.cn = n - c0 < ACC_CHUNK ? n - c0 : ACC_CHUNK;
    ch.first = c0 == 0;
    ch.fin = c0 + ACC_CHUNK >= n;
    ch.ps = vq_pf_steps_init(ch.fin ? NULL : codes + (c0 + ACC_CHUNK) * rec,
                             (size_t)ACC_CHUNK * (size_t)rec, (int)(ch.cn / 2) * npass);
    return ch;
}

/* 32 coordinates (4 vectors) of the accumulator stay in registers per pass; even and odd
 * tokens go to separate accumulators (two independent FMA chains), added to acc at the end.
 * The tokens go in chunks of ACC_CHUNK, every pass over a chunk while its records are in L1
 * (the accumulators wait in sa / sb between chunks: the same FMA order and final sums, so the
 * same bits as passes over all tokens, which read a long run of records from memory once per
 * pass), and the next chunk's lines are asked for a few per token pair. */
VQ_INLINE void acc_t(const vq_wk *k, const uint8_t *codes, int64_t n, const float *w, float *acc,
                     const int LIN, const int B) {
    const unpack_k u = unpack_init(B);
    const int d = k->d, rec = k->rec, npass = (d + 31) / 32;
    float sa[1024] __attribute__((aligned(32))), sb[1024] __attribute__((aligned(32)));
    for (int64_t c0 = 0; c0 < n; c0 += ACC_CHUNK) {
        struct acc_chunk ch = acc_chunk_at(codes, n, c0, rec, npass);
        const int64_t cn = ch.cn;
        const int first = ch.first, fin = ch.fin;
        for (int j0 = 0; j0 < d; j0 += 32) {
            const int nv = (d - j0) / 8 < 4 ? (d - j0) / 8 : 4;
            __m256 a[4], b[4];
            for (int v = 0; v < 4; v++) {
                a[v] = first || v >= nv ? _mm256_setzero_ps() : _mm256_load_ps(sa + j0 + 8 * v);
                b[v] = first || v >= nv ? _mm256_setzero_ps() : _mm256_load_ps(sb + j0 + 8 * v);
            }
            int64_t t = 0;
            for (; t + 2 <= cn; t += 2) {
                const uint8_t *r = codes + (c0 + t) * rec;
                vq_pf_step(&ch.ps);
                const __m256 w0 = _mm256_set1_ps(w[c0 + t] * vq_tq_sf16(r));
                const __m256 w1 = _mm256_set1_ps(w[c0 + t + 1] * vq_tq_sf16(r + rec));
                for (int v = 0; v < nv; v++) {
                    a[v] = _mm256_fmadd_ps(w0, lev8(k, &u, r + 2, j0 + 8 * v, LIN, B), a[v]);
                    b[v] = _mm256_fmadd_ps(w1, lev8(k, &u, r + rec + 2, j0 + 8 * v, LIN, B), b[v]);
                }
            }
            if (t < cn) { /* an odd last token (only the last chunk can have one) */
                const uint8_t *r = codes + (c0 + t) * rec;
                const __m256 w0 = _mm256_set1_ps(w[c0 + t] * vq_tq_sf16(r));
                for (int v = 0; v < nv; v++)
                    a[v] = _mm256_fmadd_ps(w0, lev8(k, &u, r + 2, j0 + 8 * v, LIN, B), a[v]);
            }
            for (int v = 0; v < nv; v++) {
                if (!fin) {
                    _mm256_store_ps(sa + j0 + 8 * v, a[v]);
                    _mm256_store_ps(sb + j0 + 8 * v, b[v]);
                    continue;
                }
                float *p = acc + j0 + 8 * v;
                _mm256_storeu_ps(p, _mm256_add_ps(_mm256_loadu_ps(p), _mm256_add_ps(a[v], b[v])));
            }
        }
    }
}

/* score_t for Q (1..3) queries: 4 tokens x Q queries of accumulators, each code converted
 * once for the Q queries. Tokens in whole groups of 8 (score_t's hsum8x8 blocks) are reduced
 * 4 at a time with hsum8x8's additions (its hadd pairs, then the two 128-bit halves), the
 * others one by one with hsum1, as score_t does; every fma chain over d is score_t's, so each
 * query's scores are the bits of its own score_t call. */
VQ_INLINE void score_multi_t(const vq_wk *k, const float *const *qs, const uint8_t *codes,
                             int64_t n, float *const *scores, const int Q, const int LIN,
                             const int B) {
    const unpack_k u = unpack_init(B);
    const int d = k->d, rec = k->rec;
    const int64_t n8 = n / 8 * 8;
    int64_t t = 0;
    for (; t < n8; t += 4) {
        const uint8_t *r0 = codes + t * rec;
        if ((t & 7) == 0) vq_pf_lines(r0 + VQ_PF_RECS * (size_t)rec, 8 * (size_t)rec);
        __m256 acc[3][4];
        for (int q = 0; q < Q; q++)
            for (int i = 0; i < 4; i++) acc[q][i] = _mm256_setzero_ps();
        for (int j = 0; j < d; j += 8)
            for (int i = 0; i < 4; i++) {
                const __m256 l = lev8(k, &u, r0 + i * rec + 2, j, LIN, B);
                for (int q = 0; q < Q; q++)
                    acc[q][i] = _mm256_fmadd_ps(l, _mm256_loadu_ps(qs[q] + j), acc[q][i]);
            }
        const __m128 sc = _mm_setr_ps(vq_tq_sf16(r0), vq_tq_sf16(r0 + rec),
                                      vq_tq_sf16(r0 + 2 * rec), vq_tq_sf16(r0 + 3 * rec));
        for (int q = 0; q < Q; q++) {
            const __m256 u4 = _mm256_hadd_ps(_mm256_hadd_ps(acc[q][0], acc[q][1]),
                                             _mm256_hadd_ps(acc[q][2], acc[q][3]));
            const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(u4), _mm256_extractf128_ps(u4, 1));
            _mm_storeu_ps(scores[q] + t, _mm_mul_ps(s4, sc));
        }
    }
    for (; t < n; t++) {
        const uint8_t *r = codes + t * rec;
        __m256 acc[3];
        for (int q = 0; q < Q; q++) acc[q] = _mm256_setzero_ps();
        for (int j = 0; j < d; j += 8) {
            const __m256 l = lev8(k, &u, r + 2, j, LIN, B);
            for (int q = 0; q < Q; q++)
                acc[q] = _mm256_fmadd_ps(l, _mm256_loadu_ps(qs[q] + j), acc[q]);
        }
        for (int q = 0; q < Q; q++) scores[q][t] = vq_tq_sf16(r) * hsum1(acc[q]);
    }
}

VQ_INLINE void score_multi_q(const vq_wk *k, const float *const *qs, const uint8_t *codes,
                             int64_t n, float *const *scores, int Q, const int LIN, const int B) {
    switch (Q) {
    case 1: score_multi_t(k, qs, codes, n, scores, 1, LIN, B); break;
    case 2: score_multi_t(k, qs, codes, n, scores, 2, LIN, B); break;
    default: score_multi_t(k, qs, codes, n, scores, 3, LIN, B); break;
    }
}

void vq_wk_score_multi_avx2(const vq_wk *k, const float *const *qs, int nq, const uint8_t *codes,
                            int64_t n, float *const *scores) {
    for (int q0 = 0; q0 < nq;) {
        const int rest = nq - q0, Q = rest == 4 ? 2 : rest < 3 ? rest : 3;
        switch (k->lin ? 0 : k->bits) {
        case 0: score_multi_q(k, qs + q0, codes, n, scores + q0, Q, 1, 8); break;
        case 5: score_multi_q(k, qs + q0, codes, n, scores + q0, Q, 0, 5); break;
        case 6: score_multi_q(k, qs + q0, codes, n, scores + q0, Q, 0, 6); break;
        case 7: score_multi_q(k, qs + q0, codes, n, scores + q0, Q, 0, 7); break;
        default: score_multi_q(k, qs + q0, codes, n, scores + q0, Q, 0, 8); break;
        }
        q0 += Q;
    }
}

/* acc_t for Q (1..6) weight vectors: each code converted once for the Q queries. Passes of
 * 8 coordinates (Q x even / odd chains: 12 accumulators for a Qwen2.5 group of 6, the
 * weights broadcast from memory), the tokens in the same chunks, the scaled weights
 * w[q][t] x scale(t) formed once per chunk (the product acc_t broadcasts); every query's
 * per-lane FMA sequence (even tokens, odd tokens, chunk after chunk, acc += a + b at the end)
 * is acc_t's, so each accumulator gets the bits of its own acc_t call. */
VQ_INLINE void acc_multi_t(const vq_wk *k, const uint8_t *codes, int64_t n, const float *const *w,
                           float *const *acc, const int Q, const int LIN, const int B) {
    const unpack_k u = unpack_init(B);
    const int d = k->d, rec = k->rec, npass = d / 8;
    float sa[6][1024] __attribute__((aligned(32))), sb[6][1024] __attribute__((aligned(32)));
    float ws[6][ACC_CHUNK];
    for (int64_t c0 = 0; c0 < n; c0 += ACC_CHUNK) {
        struct acc_chunk ch = acc_chunk_at(codes, n, c0, rec, npass);
        const int64_t cn = ch.cn;
        const int first = ch.first, fin = ch.fin;
        for (int64_t t = 0; t < cn; t++) {
            const float sf = vq_tq_sf16(codes + (c0 + t) * rec);
            for (int q = 0; q < Q; q++) ws[q][t] = w[q][c0 + t] * sf;
        }
        for (int j0 = 0; j0 < d; j0 += 8) {
            __m256 a[6], b[6];
            for (int q = 0; q < Q; q++) {
                a[q] = first ? _mm256_setzero_ps() : _mm256_load_ps(sa[q] + j0);
                b[q] = first ? _mm256_setzero_ps() : _mm256_load_ps(sb[q] + j0);
            }
            int64_t t = 0;
            for (; t + 2 <= cn; t += 2) {
                const uint8_t *r = codes + (c0 + t) * rec;
                vq_pf_step(&ch.ps);
                const __m256 l0 = lev8(k, &u, r + 2, j0, LIN, B);
                const __m256 l1 = lev8(k, &u, r + rec + 2, j0, LIN, B);
                for (int q = 0; q < Q; q++) {
                    a[q] = _mm256_fmadd_ps(_mm256_broadcast_ss(&ws[q][t]), l0, a[q]);
                    b[q] = _mm256_fmadd_ps(_mm256_broadcast_ss(&ws[q][t + 1]), l1, b[q]);
                }
            }
            if (t < cn) { /* an odd last token (only the last chunk can have one) */
                const __m256 l0 = lev8(k, &u, codes + (c0 + t) * rec + 2, j0, LIN, B);
                for (int q = 0; q < Q; q++)
                    a[q] = _mm256_fmadd_ps(_mm256_broadcast_ss(&ws[q][t]), l0, a[q]);
            }
            for (int q = 0; q < Q; q++) {
                if (!fin) {
                    _mm256_store_ps(sa[q] + j0, a[q]);
                    _mm256_store_ps(sb[q] + j0, b[q]);
                    continue;
                }
                float *p = acc[q] + j0;
                _mm256_storeu_ps(p, _mm256_add_ps(_mm256_loadu_ps(p), _mm256_add_ps(a[q], b[q])));
            }
        }
    }
}

VQ_INLINE void acc_multi_q(const vq_wk *k, const uint8_t *codes, int64_t n, const float *const *w,
                           float *const *acc, int Q, const int LIN, const int B) {
    switch (Q) {
    case 1: acc_multi_t(k, codes, n, w, acc, 1, LIN, B); break;
    case 2: acc_multi_t(k, codes, n, w, acc, 2, LIN, B); break;
    case 3: acc_multi_t(k, codes, n, w, acc, 3, LIN, B); break;
    case 4: acc_multi_t(k, codes, n, w, acc, 4, LIN, B); break;
    case 5: acc_multi_t(k, codes, n, w, acc, 5, LIN, B); break;
    default: acc_multi_t(k, codes, n, w, acc, 6, LIN, B); break;
    }
}

void vq_wk_accumulate_multi_avx2(const vq_wk *k, const uint8_t *codes, int64_t n,
                                 const float *const *w, int nq, float *const *acc) {
    for (int q0 = 0; q0 < nq;) {
        const int Q = nq - q0 < 6 ? nq - q0 : 6;
        switch (k->lin ? 0 : k->bits) {
        case 0: acc_multi_q(k, codes, n, w + q0, acc + q0, Q, 1, 8); break;
        case 5: acc_multi_q(k, codes, n, w + q0, acc + q0, Q, 0, 5); break;
        case 6: acc_multi_q(k, codes, n, w + q0, acc + q0, Q, 0, 6); break;
        case 7: acc_multi_q(k, codes, n, w + q0, acc + q0, Q, 0, 7); break;
        default: acc_multi_q(k, codes, n, w + q0, acc + q0, Q, 0, 8); break;
        }
        q0 += Q;
    }
}

void vq_wk_score_avx2(const vq_wk *k, const float *qs, const uint8_t *codes, int64_t n,
                      float *scores) {
    switch (k->lin ? 0 : k->bits) {
    case 0: score_t(k, qs, codes, n, scores, 1, 8); break;
    case 5: score_t(k, qs, codes, n, scores, 0, 5); break;
    case 6: score_t(k, qs, codes, n, scores, 0, 6); break;
    case 7: score_t(k, qs, codes, n, scores, 0, 7); break;
    default: score_t(k, qs, codes, n, scores, 0, 8); break;
    }
}

void vq_wk_accumulate_avx2(const vq_wk *k, const uint8_t *codes, int64_t n, const float *w,
                           float *acc) {
    switch (k->lin ? 0 : k->bits) {
    case 0: acc_t(k, codes, n, w, acc, 1, 8); break;
    case 5: acc_t(k, codes, n, w, acc, 0, 5); break;
    case 6: acc_t(k, codes, n, w, acc, 0, 6); break;
    case 7: acc_t(k, codes, n, w, acc, 0, 7); break;
    default: acc_t(k, codes, n, w, acc, 0, 8); break;
    }
}
