/*
 * kivi_tiles_avx2.c — AVX2 integer scores of KIVI key tiles (layout in kivi.c, contract in
 * codecs/kivi.h): vq_kivi_score_tiles_avx2 (the integer queries come from vq_kivi_prep_avx2,
 * kivi_avx2.c).
 *
 * As kivi_tiles_avx512.c on half a tile at a time: channel pair p of tokens 8h .. 8h + 7 widens
 * to eight 32-bit lanes (token t: channel 2p in the low word, 2p + 1 in the high), a 4-bit
 * plane's 8 bytes by VPMOVZXBD + shift / OR / AND, an 8-bit plane's 16 bytes by VPMOVZXBW, a
 * 2-bit plane's dword broadcast, shifted per lane and split by a word blend, a 1-bit plane's
 * 16 bits compared per word against its bit; VPMADDWD + VPADDD per pair and query give the
 * exact int32 class sums, which become the score in the reference's order (the same bits). A
 * last partial tile takes the reference.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "codecs/arch/x86/stream_pf.h"
#include "codecs/kivi.h"

#define VQ_INLINE static inline __attribute__((always_inline))

/* (x | x << S) & M for x < 256 (a zero-extended byte): the field in the low bits to the low
 * word, the one above it to the high. */
VQ_INLINE __m256i split(__m256i x, const int S, int m) {
    return _mm256_and_si256(_mm256_or_si256(x, _mm256_slli_epi32(x, S)), _mm256_set1_epi32(m));
}

/* The 2-bit fields of one pair and half tile (4 bytes at p): lane t = fields 2t, 2t + 1 (the
 * dword shifted by 4t; the high word takes bits 2-3 of it by a shift and a word blend, as the
 * fields above them are still there). */
VQ_INLINE __m256i f2(const uint8_t *p) {
    uint32_t w;
    memcpy(&w, p, 4);
    const __m256i x = _mm256_srlv_epi32(_mm256_set1_epi32((int)w),
                                        _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    return _mm256_and_si256(_mm256_blend_epi16(x, _mm256_slli_epi32(x, 14), 0xAA),
                            _mm256_set1_epi32(0x00030003));
}

/* The 4-bit fields of one pair and half tile (8 bytes at p). */
VQ_INLINE __m256i f4(const uint8_t *p) {
    const __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
    return split(x, 12, 0x000F000F);
}

/* Codes of pair p, tokens 8h .. 8h + 7, of a full tile of n channels (planes 2*n*w bytes). */
VQ_INLINE __m256i pair_codes(const uint8_t *tile, int n, int p, int h, const int BITS) {
    if (BITS == 8)
        return _mm256_cvtepu8_epi16(
            _mm_loadu_si128((const __m128i *)(const void *)(tile + 32 * p + 16 * h)));
    __m256i v;
    const uint8_t *pl = tile;
    if (BITS <= 3) {
        v = f2(pl + 8 * p + 4 * h);
        pl += 4 * n;
    } else {
        v = f4(pl + 16 * p + 8 * h);
        pl += 8 * n;
    }
    if (BITS == 6 || BITS == 7) { /* bits 4-5 */
        v = _mm256_or_si256(v, _mm256_slli_epi32(f2(pl + 8 * p + 4 * h), 4));
        pl += 4 * n;
    }
    if (BITS == 3 || BITS == 5 || BITS == 7) { /* the top bit: word f = bit f of 16 */
        uint16_t m;
        memcpy(&m, pl + 4 * p + 2 * h, 2);
        const __m256i sel = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048,
                                              4096, 8192, 16384, (short)0x8000);
        const __m256i set = _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16((short)m), sel),
                                               sel);
        v = _mm256_add_epi16(v, _mm256_and_si256(set, _mm256_set1_epi16((short)(1 << (BITS - 1)))));
    }
    return v;
}

/* a[2j + h] += the int32 class sums of query j over one full tile of the class, half h. */
VQ_INLINE void class_tile(const int16_t *const *qi, const int NQ, int c0, const uint8_t *tile,
                          int n, __m256i *a, const int BITS) {
    for (int p = 0; p < n / 2; p++) {
        const __m256i v0 = pair_codes(tile, n, p, 0, BITS), v1 = pair_codes(tile, n, p, 1, BITS);
        for (int j = 0; j < NQ; j++) {
            int32_t q;
            memcpy(&q, qi[j] + c0 + 2 * p, 4);
            const __m256i qv = _mm256_set1_epi32(q);
            a[2 * j] = _mm256_add_epi32(a[2 * j], _mm256_madd_epi16(v0, qv));
            a[2 * j + 1] = _mm256_add_epi32(a[2 * j + 1], _mm256_madd_epi16(v1, qv));
        }
    }
}

VQ_INLINE void tiles(const int16_t *const *qi, const float *const *delta, const int NQ,
                     const uint8_t *area, int ncls, const int *bits, const int *nch,
                     const size_t *off, int g, const float *bias, float *const *out,
                     const uint8_t *pf, size_t pf_bytes) {
    const int nt = g / VQ_KIVI_TILE;
    struct vq_pf_steps ps = vq_pf_steps_init(pf, pf_bytes, nt * ncls);
    for (int i = 0; i < nt; i++) {
        __m256 f[8];
        for (int j = 0; j < NQ; j++) f[2 * j] = f[2 * j + 1] = _mm256_set1_ps(bias[j]);
        for (int k = 0, c0 = 0; k < ncls; c0 += nch[k], k++) {
            vq_pf_step(&ps); /* the next block, a step before each class of each tile */
            const uint8_t *tile = area + off[k] +
                                  (size_t)i * vq_kivi_tile_bytes(16, nch[k], bits[k]);
            __m256i a[8];
            for (int j = 0; j < 2 * NQ; j++) a[j] = _mm256_setzero_si256();
#define CLASS_TILE(B) class_tile(qi, NQ, c0, tile, nch[k], a, B)
            VQ_KIVI_WITH_BITS(bits[k], CLASS_TILE);
#undef CLASS_TILE
            for (int j = 0; j < 2 * NQ; j++)
                f[j] = _mm256_add_ps(
                    f[j], _mm256_mul_ps(_mm256_set1_ps(delta[j / 2][k]), _mm256_cvtepi32_ps(a[j])));
        }
        for (int j = 0; j < NQ; j++) {
            _mm256_storeu_ps(out[j] + i * VQ_KIVI_TILE, f[2 * j]);
            _mm256_storeu_ps(out[j] + i * VQ_KIVI_TILE + 8, f[2 * j + 1]);
        }
    }
    if (nt * VQ_KIVI_TILE < g)
        vq_kivi_score_tile_ref(qi, delta, NQ, area, ncls, bits, nch, off, g, nt, bias, out);
}

void vq_kivi_score_tiles_avx2(const int16_t *const *qi, const float *const *delta, int nq,
                              const uint8_t *area, int ncls, const int *bits, const int *nch,
                              const size_t *off, int g, const float *bias, float *const *out,
                              const uint8_t *pf, size_t pf_bytes) {
    if (nq > 4) { /* 16 ymm registers: at most 4 queries a pass */
        vq_kivi_score_tiles_avx2(qi, delta, 4, area, ncls, bits, nch, off, g, bias, out, pf,
                                 pf_bytes);
        vq_kivi_score_tiles_avx2(qi + 4, delta + 4, nq - 4, area, ncls, bits, nch, off, g, bias + 4,
                                 out + 4, NULL, 0);
        return;
    }
    switch (nq) {
    case 1: tiles(qi, delta, 1, area, ncls, bits, nch, off, g, bias, out, pf, pf_bytes); break;
    case 2: tiles(qi, delta, 2, area, ncls, bits, nch, off, g, bias, out, pf, pf_bytes); break;
    case 3: tiles(qi, delta, 3, area, ncls, bits, nch, off, g, bias, out, pf, pf_bytes); break;
    default: tiles(qi, delta, 4, area, ncls, bits, nch, off, g, bias, out, pf, pf_bytes); break;
    }
}
