/*
 * wide_avx512.c — AVX-512 (F, BW, VL, DQ) score / accumulate kernels of the codecs with 5..8-bit
 * codes in the rotated domain (turboquant_mse b = 5..8, int8); contract and layout in
 * codecs/wide_kernels.h.
 *
 * One vector holds 16 consecutive coordinates of one token. int8 codes: VPMOVSXBD +
 * VCVTDQ2PS. LUT codes: 5..7-bit codes (16 codes = 2b bytes) are loaded once (a whole 16-byte
 * broadcast load where it stays inside the record, else a masked load), and one VPSHUFB puts
 * the two bytes holding code l into 32-bit lane l; VPSRLVD by (l*b) mod 8 leaves the code in
 * the low b bits (the bits above are ignored by the lookup). The levels live in registers: one
 * VPERMT2PS per 32 levels, then a VPTESTMD + VBLENDMPS tree on bits 5 and 6 (5 bits: one
 * permute; 6: two and a blend; 7: four and three blends). 8-bit LUT codes are zero-extended
 * (VPMOVZXBD) and looked up with VGATHERDPS. A head dim that is 8 mod 16 ends with a half
 * vector (8 codes; the upper lanes are zeroed). Each kernel is specialized per code kind and
 * width (no per-vector branch on them). Accumulate sums even and odd tokens in separate
 * registers (two FMA chains) and adds them to acc at the end.
 */
#include <immintrin.h>
#include <stdint.h>

#include "codecs/arch/x86/stream_pf.h"
#include "codecs/arch/x86/tq_x86.h"
#include "codecs/turboquant_kernels.h"
#include "codecs/wide_kernels.h"
#include "codecs/arch/x86/wide_x86.h"

typedef struct {
    __m512i ctl, shv;
    __m512 t[8];      /* LUT codes of 5..7 bits: the levels as 2^b / 16 vectors (lut[16i ..]) */
    const float *lut; /* LUT codes of 8 bits: the table VGATHERDPS reads */
} unpack_k;

VQ_INLINE void unpack_init(const vq_wk *k, unpack_k *u, const int LIN, const int B) {
    int32_t ctl[16], sh[16];
    for (int l = 0; l < 16; l++) {
        const int o = (l * B) >> 3;
        ctl[l] = o | (o + 1) << 8 | (int32_t)0x80800000u;
        sh[l] = (l * B) & 7;
    }
    u->ctl = _mm512_loadu_si512((const void *)ctl);
    u->shv = _mm512_loadu_si512((const void *)sh);
    u->lut = k->lut;
    for (int i = 0; !LIN && B < 8 && i < (1 << B) / 16; i++)
        u->t[i] = _mm512_loadu_ps(k->lut + 16 * i);
}

/* lut[x] for 16 indices whose low B bits are the code (higher bits are ignored; B = 8: none):
 * 5..7 bits: VPERMT2PS on pairs of table vectors (32 levels each, it reads the low 5 bits),
 * then a blend tree on bits 5 and 6 (VPTESTMD + VBLENDMPS); 8 bits: VGATHERDPS (measured
 * faster than the 8-permute, 7-blend tree). */
VQ_INLINE __m512 lookup(const unpack_k *u, __m512i x, const int B) {
    if (B == 8) return _mm512_i32gather_ps(x, u->lut, 4);
    __m512 r[4];
    for (int i = 0; i < (1 << B) / 32; i++)
        r[i] = _mm512_permutex2var_ps(u->t[2 * i], x, u->t[2 * i + 1]);
    for (int b = 5, n = (1 << B) / 32; b < B; b++, n /= 2) {
        const __mmask16 m = _mm512_test_epi32_mask(x, _mm512_set1_epi32(1 << b));
        for (int i = 0; i < n / 2; i++) r[i] = _mm512_mask_mov_ps(r[2 * i], m, r[2 * i + 1]);
    }
    return r[0];
}

/* Levels of coordinates j .. j+15 (cnt = 16) or j .. j+7 (cnt = 8, upper lanes 0) of the
 * code bytes p of a record of rec bytes. LIN and B are compile-time constants in the
 * specialized kernels below. */
VQ_INLINE __m512 lev16(const unpack_k *u, const uint8_t *p, int rec, int j, int cnt, const int LIN,
                       const int B) {
    if (B == 8) {
        const __m128i raw = cnt == 16 ? _mm_loadu_si128((const __m128i *)(const void *)(p + j))
                                      : _mm_loadl_epi64((const __m128i *)(const void *)(p + j));
        if (LIN) return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(raw));
        const __m512 v = lookup(u, _mm512_cvtepu8_epi32(raw), 8);
        return cnt == 16 ? v : _mm512_maskz_mov_ps(0xff, v);
    }
    /* 16 codes = 2B bytes: a whole 16-byte load where it stays inside the record (the bytes
     * past the group are shuffled away), else a masked load of the group's bytes */
    const uint8_t *src = p + j * B / 8;
    const __m128i raw = cnt == 16 && j * B / 8 + 16 <= rec - 2
                          ? _mm_loadu_si128((const __m128i *)(const void *)src)
                          : _mm_maskz_loadu_epi8((__mmask16)((1u << (cnt * B / 8)) - 1u), src);
    __m512i x = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(raw), u->ctl);
    const __m512 v = lookup(u, _mm512_srlv_epi32(x, u->shv), B);
    return cnt == 16 ? v : _mm512_maskz_mov_ps(0xff, v);
}

/* NQ (1..4) queries qs[j] over the same records: 8 tokens per step (8 FMA chains per query,
 * one fold + hadd tree for the 8 scores), the codes of the 8 tokens unpacked once for every
 * query; each query's FMAs, fold and sum tree do not depend on NQ, so every scores[j] has the
 * bits of the single-query call (NQ = 1, vq_wk_score_avx512). */
VQ_INLINE void score_tm(const vq_wk *k, const float *const *qs, const int NQ, const uint8_t *codes,
                        int64_t n, float *const *scores, const int LIN, const int B) {
    unpack_k u;
    unpack_init(k, &u, LIN, B);
    const int d = k->d, dfull = d & ~15, rec = k->rec;
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        const uint8_t *r0 = codes + t * rec;
        vq_pf_lines(r0 + VQ_PF_RECS * (size_t)rec, 8 * (size_t)rec);
        __m512 acc[4][8];
        for (int j = 0; j < NQ; j++)
            for (int i = 0; i < 8; i++) acc[j][i] = _mm512_setzero_ps();
        for (int c = 0; c < d; c += 16) {
            const int cnt = c < dfull ? 16 : 8;
            __m512 q[4];
            for (int j = 0; j < NQ; j++) q[j] = _mm512_loadu_ps(qs[j] + c); /* zero beyond d */
            for (int i = 0; i < 8; i++) {
                const __m512 l = lev16(&u, r0 + i * rec + 2, rec, c, cnt, LIN, B);
                for (int j = 0; j < NQ; j++) acc[j][i] = _mm512_fmadd_ps(l, q[j], acc[j][i]);
            }
        }
        float sc[8];
        for (int i = 0; i < 8; i++) sc[i] = vq_tq_sf16(r0 + i * rec);
        const __m256 scv = _mm256_loadu_ps(sc);
        for (int j = 0; j < NQ; j++) {
            __m256 h[8];
            for (int i = 0; i < 8; i++) h[i] = fold8(acc[j][i]);
            _mm256_storeu_ps(scores[j] + t, _mm256_mul_ps(hsum8x8(h), scv));
        }
    }
    for (; t < n; t++) {
        const uint8_t *r = codes + t * rec;
        __m512 acc[4];
        for (int j = 0; j < NQ; j++) acc[j] = _mm512_setzero_ps();
        for (int c = 0; c < d; c += 16) {
            const __m512 l = lev16(&u, r + 2, rec, c, c < dfull ? 16 : 8, LIN, B);
            for (int j = 0; j < NQ; j++)
                acc[j] = _mm512_fmadd_ps(l, _mm512_loadu_ps(qs[j] + c), acc[j]);
        }
        for (int j = 0; j < NQ; j++) scores[j][t] = vq_tq_sf16(r) * _mm512_reduce_add_ps(acc[j]);
    }
}

/* score_tm for NQ (5..6) queries, four tokens per step: 4 x NQ accumulators in registers
 * where 8 x NQ would not fit. A token of the 8-token blocks keeps score_tm's arithmetic (the
 * same FMA chain, fold8, and hsum8x8's pairing ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 +
 * x7)) by three HADDs over 4 tokens), the tokens after the last whole block its
 * _mm512_reduce_add_ps: every scores[j] has the bits of the single-query call. */
VQ_INLINE void score_t4(const vq_wk *k, const float *const *qs, const int NQ, const uint8_t *codes,
                        int64_t n, float *const *scores, const int LIN, const int B) {
    unpack_k u;
    unpack_init(k, &u, LIN, B);
    const int d = k->d, dfull = d & ~15, rec = k->rec;
    const int64_t nb = n & ~(int64_t)7;
    int64_t t = 0;
    for (; t < nb; t += 4) {
        const uint8_t *r0 = codes + t * rec;
        vq_pf_lines(r0 + VQ_PF_RECS * (size_t)rec, 4 * (size_t)rec);
        __m512 acc[6][4];
        for (int j = 0; j < NQ; j++)
            for (int i = 0; i < 4; i++) acc[j][i] = _mm512_setzero_ps();
        for (int c = 0; c < d; c += 16) {
            const int cnt = c < dfull ? 16 : 8;
            for (int i = 0; i < 4; i++) {
                const __m512 l = lev16(&u, r0 + i * rec + 2, rec, c, cnt, LIN, B);
                for (int j = 0; j < NQ; j++)
                    acc[j][i] = _mm512_fmadd_ps(l, _mm512_loadu_ps(qs[j] + c), acc[j][i]);
            }
        }
        float sc[4];
        for (int i = 0; i < 4; i++) sc[i] = vq_tq_sf16(r0 + i * rec);
        const __m128 scv = _mm_loadu_ps(sc);
        for (int j = 0; j < NQ; j++) {
            const __m256 t0 = _mm256_hadd_ps(fold8(acc[j][0]), fold8(acc[j][1]));
            const __m256 t1 = _mm256_hadd_ps(fold8(acc[j][2]), fold8(acc[j][3]));
            const __m256 u0 = _mm256_hadd_ps(t0, t1);
            const __m128 sum = _mm_add_ps(_mm256_castps256_ps128(u0), _mm256_extractf128_ps(u0, 1));
            _mm_storeu_ps(scores[j] + t, _mm_mul_ps(sum, scv));
        }
    }
    for (; t < n; t++) {
        const uint8_t *r = codes + t * rec;
        for (int j = 0; j < NQ; j++) {
            __m512 acc = _mm512_setzero_ps();
            for (int c = 0; c < d; c += 16)
                acc = _mm512_fmadd_ps(lev16(&u, r + 2, rec, c, c < dfull ? 16 : 8, LIN, B),
                                      _mm512_loadu_ps(qs[j] + c), acc);
            scores[j][t] = vq_tq_sf16(r) * _mm512_reduce_add_ps(acc);
        }
    }
}

VQ_INLINE void score_tq(const vq_wk *k, const float *const *qs, int nq, const uint8_t *codes,
                        int64_t n, float *const *scores, const int LIN, const int B) {
    for (int j = 0; j < nq;) { /* up to 4 at a time, or 5 / 6 in one pass */
        const int m = nq - j;
        switch (m > 6 ? 4 : m) {
        case 1: score_tm(k, qs + j, 1, codes, n, scores + j, LIN, B); break;
        case 2: score_tm(k, qs + j, 2, codes, n, scores + j, LIN, B); break;
        case 3: score_tm(k, qs + j, 3, codes, n, scores + j, LIN, B); break;
        case 4: score_tm(k, qs + j, 4, codes, n, scores + j, LIN, B); break;
        case 5: score_t4(k, qs + j, 5, codes, n, scores + j, LIN, B); break;
        default: score_t4(k, qs + j, 6, codes, n, scores + j, LIN, B); break;
        }
        j += m > 6 ? 4 : m;
    }
}

/* Tokens per chunk of acc_tm (a multiple of 16), and the most coordinates one coordinate
 * block holds (its accumulators wait in memory between chunks). */
#define ACC_CHUNK 64
#define ACC_DBLK 256

/* NQ (1..6) weight vectors w[j] into acc[j]. The tokens are taken in chunks of ACC_CHUNK:
 * per chunk the scaled weights w[j][t] * scale_t are formed once (vq_tq_weights16: one gather
 * of the sf16 scales and one VMULPS per query per 16 tokens, the scalar products bit for bit)
 * and kept in memory, then every pass over the coordinates (64 of them, 4 vectors, a pass; 32
 * for NQ > 3: at most 24 accumulators) runs over the chunk, whose records stay in L1, while
 * the next chunk's lines are asked for a few per token pair (vq_pf_steps). Even and odd tokens
 * go to separate accumulators (two independent FMA chains), which wait in memory between
 * chunks and are added to acc at the end, so each acc[j] gets the same bits as with NQ = 1 and
 * as with any chunk size. (Passes over all n tokens, each reading the whole stream again, had
 * the value attention of a Qwen2.5-shaped decode step at depth 32768 reading its records four
 * times.) Head dims above ACC_DBLK go in blocks of ACC_DBLK coordinates, each over all tokens.
 * The loops over queries and vectors are unrolled so that GCC keeps the accumulators in
 * registers (§9.11 of docs/ALGORITHMS.md, as for the 1..4-bit kernels). */
VQ_INLINE void acc_tm(const vq_wk *k, const uint8_t *codes, int64_t n, const float *const *w,
                      const int NQ, float *const *acc, const int LIN, const int B) {
    unpack_k u;
    unpack_init(k, &u, LIN, B);
    const int d = k->d, rec = k->rec;
    const int PV = NQ > 3 ? 2 : 4; /* vectors per pass */
    float sa[6][ACC_DBLK] __attribute__((aligned(64))),
        sb[6][ACC_DBLK] __attribute__((aligned(64)));
    float wb[6][ACC_CHUNK] __attribute__((aligned(64)));
    for (int jb = 0; jb < d && n > 0; jb += ACC_DBLK) {
        const int je = d - jb < ACC_DBLK ? d : jb + ACC_DBLK;
        const int npass = (je - jb + 16 * PV - 1) / (16 * PV);
        for (int64_t c0 = 0; c0 < n; c0 += ACC_CHUNK) {
            const int cn = n - c0 < ACC_CHUNK ? (int)(n - c0) : ACC_CHUNK;
            const int first = c0 == 0, fin = c0 + ACC_CHUNK >= n;
            for (int t0 = 0; t0 < cn; t0 += 16) {
                const int m = cn - t0 < 16 ? cn - t0 : 16;
                __m512 wv[6];
                vq_tq_weights16(codes + (c0 + t0) * rec, rec, (__mmask16)((1u << m) - 1u), w,
                                c0 + t0, NQ, wv);
#pragma GCC unroll 6
                for (int j = 0; j < NQ; j++) _mm512_store_ps(wb[j] + t0, wv[j]);
            }
            struct vq_pf_steps ps = vq_pf_steps_init(fin ? NULL : codes + (c0 + ACC_CHUNK) * rec,
                                                     (size_t)ACC_CHUNK * (size_t)rec,
                                                     cn / 2 * npass);
            for (int j0 = jb; j0 < je; j0 += 16 * PV) {
                const int nv = (je - j0 + 15) / 16 < PV ? (je - j0 + 15) / 16 : PV;
                const int last = j0 + 16 * nv > d ? 8 : 16; /* codes in the last vector */
                __m512 a[6][4], b[6][4];
#pragma GCC unroll 6
                for (int j = 0; j < NQ; j++)
#pragma GCC unroll 6
                    for (int v = 0; v < 4; v++) {
                        const int o = j0 - jb + 16 * v;
                        a[j][v] = first || v >= nv ? _mm512_setzero_ps()
                                                   : _mm512_load_ps(sa[j] + o);
                        b[j][v] = first || v >= nv ? _mm512_setzero_ps()
                                                   : _mm512_load_ps(sb[j] + o);
                    }
                int p = 0;
                for (; p + 1 < cn; p += 2) {
                    const uint8_t *r = codes + (c0 + p) * rec;
                    vq_pf_step(&ps);
                    __m512 w0[6], w1[6];
#pragma GCC unroll 6
                    for (int j = 0; j < NQ; j++) {
                        w0[j] = _mm512_set1_ps(wb[j][p]);
                        w1[j] = _mm512_set1_ps(wb[j][p + 1]);
                    }
#pragma GCC unroll 6
                    for (int v = 0; v < nv; v++) {
                        const int cnt = v == nv - 1 ? last : 16;
                        const __m512 l0 = lev16(&u, r + 2, rec, j0 + 16 * v, cnt, LIN, B);
                        const __m512 l1 = lev16(&u, r + rec + 2, rec, j0 + 16 * v, cnt, LIN, B);
#pragma GCC unroll 6
                        for (int j = 0; j < NQ; j++) {
                            a[j][v] = _mm512_fmadd_ps(w0[j], l0, a[j][v]);
                            b[j][v] = _mm512_fmadd_ps(w1[j], l1, b[j][v]);
                        }
                    }
                }
                if (p < cn) { /* an odd last token (only the last chunk can have one) */
                    const uint8_t *r = codes + (c0 + p) * rec;
#pragma GCC unroll 6
                    for (int v = 0; v < nv; v++) {
                        const __m512 l0 = lev16(&u, r + 2, rec, j0 + 16 * v,
                                                v == nv - 1 ? last : 16, LIN, B);
#pragma GCC unroll 6
                        for (int j = 0; j < NQ; j++)
                            a[j][v] = _mm512_fmadd_ps(_mm512_set1_ps(wb[j][p]), l0, a[j][v]);
                    }
                }
#pragma GCC unroll 6
                for (int j = 0; j < NQ; j++)
#pragma GCC unroll 6
                    for (int v = 0; v < nv; v++) {
                        const int o = j0 - jb + 16 * v;
                        if (!fin) {
                            _mm512_store_ps(sa[j] + o, a[j][v]);
                            _mm512_store_ps(sb[j] + o, b[j][v]);
                            continue;
                        }
                        const __mmask16 m = v == nv - 1 && last == 8 ? 0xff : 0xffff;
                        float *q = acc[j] + j0 + 16 * v;
                        _mm512_mask_storeu_ps(q, m,
                                              _mm512_add_ps(_mm512_maskz_loadu_ps(m, q),
                                                            _mm512_add_ps(a[j][v], b[j][v])));
                    }
            }
        }
    }
}

/* One weight vector: acc_tm with NQ = 1. */
VQ_INLINE void acc_t(const vq_wk *k, const uint8_t *codes, int64_t n, const float *w, float *acc,
                     const int LIN, const int B) {
    acc_tm(k, codes, n, &w, 1, &acc, LIN, B);
}

VQ_INLINE void acc_tq(const vq_wk *k, const uint8_t *codes, int64_t n, const float *const *w,
                      int nq, float *const *acc, const int LIN, const int B) {
    for (int j = 0; j < nq;) { /* at most 6 at a time: 24 accumulators in registers */
        const int m = nq - j < 6 ? nq - j : 6;
        switch (m) {
        case 1: acc_tm(k, codes, n, w + j, 1, acc + j, LIN, B); break;
        case 2: acc_tm(k, codes, n, w + j, 2, acc + j, LIN, B); break;
        case 3: acc_tm(k, codes, n, w + j, 3, acc + j, LIN, B); break;
        case 4: acc_tm(k, codes, n, w + j, 4, acc + j, LIN, B); break;
        case 5: acc_tm(k, codes, n, w + j, 5, acc + j, LIN, B); break;
        default: acc_tm(k, codes, n, w + j, 6, acc + j, LIN, B); break;
        }
        j += m;
    }
}

/* nq weight vectors over the same records (any nq >= 1); each acc[j] the same bits as
 * vq_wk_accumulate_avx512 with w[j]. */
void vq_wk_accumulate_multi_avx512(const vq_wk *k, const uint8_t *codes, int64_t n,
                                   const float *const *w, int nq, float *const *acc) {
    switch (k->lin ? 0 : k->bits) {
    case 0: acc_tq(k, codes, n, w, nq, acc, 1, 8); break;
    case 5: acc_tq(k, codes, n, w, nq, acc, 0, 5); break;
    case 6: acc_tq(k, codes, n, w, nq, acc, 0, 6); break;
    case 7: acc_tq(k, codes, n, w, nq, acc, 0, 7); break;
    default: acc_tq(k, codes, n, w, nq, acc, 0, 8); break;
    }
}

/* nq (any >= 1; 5 or 6 in one pass) queries over the same records; each scores[j] the same
 * bits as vq_wk_score_avx512 with qs[j]. */
void vq_wk_score_multi_avx512(const vq_wk *k, const float *const *qs, int nq, const uint8_t *codes,
                              int64_t n, float *const *scores) {
    switch (k->lin ? 0 : k->bits) {
    case 0: score_tq(k, qs, nq, codes, n, scores, 1, 8); break;
    case 5: score_tq(k, qs, nq, codes, n, scores, 0, 5); break;
    case 6: score_tq(k, qs, nq, codes, n, scores, 0, 6); break;
    case 7: score_tq(k, qs, nq, codes, n, scores, 0, 7); break;
    default: score_tq(k, qs, nq, codes, n, scores, 0, 8); break;
    }
}

void vq_wk_score_avx512(const vq_wk *k, const float *qs, const uint8_t *codes, int64_t n,
                        float *scores) {
    vq_wk_score_multi_avx512(k, &qs, 1, codes, n, &scores);
}

void vq_wk_accumulate_avx512(const vq_wk *k, const uint8_t *codes, int64_t n, const float *w,
                             float *acc) {
    switch (k->lin ? 0 : k->bits) {
    case 0: acc_t(k, codes, n, w, acc, 1, 8); break;
    case 5: acc_t(k, codes, n, w, acc, 0, 5); break;
    case 6: acc_t(k, codes, n, w, acc, 0, 6); break;
    case 7: acc_t(k, codes, n, w, acc, 0, 7); break;
    default: acc_t(k, codes, n, w, acc, 0, 8); break;
    }
}
