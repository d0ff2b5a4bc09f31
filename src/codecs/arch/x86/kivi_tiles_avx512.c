/*
 * kivi_tiles_avx512.c — AVX-512 (F, BW, VL, DQ) integer scores of KIVI key tiles (layout in
 * kivi.c, contract in codecs/kivi.h): vq_kivi_score_tiles_avx512 (the integer queries come
 * from vq_kivi_prep_avx512, kivi_avx512.c).
 *
 * A full tile's channel pair p widens to sixteen 32-bit lanes, lane t = token t with the code
 * of channel 2p in its low 16 bits and of 2p + 1 in its high 16 bits, straight from the planes:
 * a 4-bit plane's 16 bytes by VPMOVZXBD (byte t = the two nibbles) and one shift + VPTERNLOGD
 * that moves the high nibble to the high word; an 8-bit plane's 32 bytes by VPMOVZXBW; a 2-bit
 * plane's 8 bytes by VPERMW (word t / 4 to lane t) and a per-word shift (VPSRLVW); a 1-bit
 * plane's 32 bits are a word mask that adds 2^s (VPADDW masked).
 * Each pair then meets each query's two int16 entries (one dword broadcast) in VPMADDWD +
 * VPADDD, exact int32 class sums per token; per class the sums become floats once, times the
 * class's delta, added to the score in class order: the reference's bits. A last partial tile
 * (G % 16 != 0) takes the reference. The queries are a template constant (1..6) so their
 * accumulators stay in registers; the codes are widened once for all of them.
 *
 * kivi_tiles_avx512vnni.c compiles this file again with AVX512_VNNI (VQ_KIVI_VNNI): one
 * VPDPWSSD per pair and query instead of VPMADDWD + VPADDD; the same sums.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "codecs/arch/x86/stream_pf.h"
#include "codecs/kivi.h"

#define VQ_INLINE static inline __attribute__((always_inline))

#ifdef VQ_KIVI_VNNI
#define TILES_FN vq_kivi_score_tiles_avx512vnni
#include "codecs/arch/x86/vnni_x86.h"
VQ_INLINE __m512i dp(__m512i a, __m512i v, __m512i q) { return vq_dpwssd(a, v, q); }
#else
#define TILES_FN vq_kivi_score_tiles_avx512
VQ_INLINE __m512i dp(__m512i a, __m512i v, __m512i q) {
    return _mm512_add_epi32(a, _mm512_madd_epi16(v, q));
}
#endif

/* (x | x << S) & M for x < 256 (a zero-extended byte): the field in the low bits to the low
 * word, the one above it (S = 16 - w) to the high word. */
VQ_INLINE __m512i split(__m512i x, const int S, int m) {
    return _mm512_ternarylogic_epi32(x, _mm512_slli_epi32(x, S), _mm512_set1_epi32(m), 0xA8);
}

/* The 2-bit fields of one pair of a full tile (8 bytes at p): lane t = fields 2t, 2t + 1, one
 * per word: word 2t + e takes the stream's word t / 4 (VPERMW), shifted by 4 (t % 4) + 2e. */
VQ_INLINE __m512i f2(const uint8_t *p) {
    const __m512i w = _mm512_permutexvar_epi16(
        _mm512_setr_epi32(0, 0, 0, 0, 0x00010001, 0x00010001, 0x00010001, 0x00010001, 0x00020002,
                          0x00020002, 0x00020002, 0x00020002, 0x00030003, 0x00030003, 0x00030003,
                          0x00030003),
        _mm512_castsi128_si512(_mm_loadl_epi64((const __m128i *)(const void *)p)));
    const __m512i x = _mm512_srlv_epi16(
        w, _mm512_set4_epi32(0x000E000C, 0x000A0008, 0x00060004, 0x00020000));
    return _mm512_and_si512(x, _mm512_set1_epi16(3));
}

/* The 4-bit fields of one pair of a full tile (16 bytes at p). */
VQ_INLINE __m512i f4(const uint8_t *p) {
    const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    return split(x, 12, 0x000F000F);
}

/* Codes of pair p of a full tile of n channels at BITS: lane t = token t's two codes as
 * 16-bit words. Planes of a 16-token tile: 2*n*w bytes each. */
VQ_INLINE __m512i pair_codes(const uint8_t *tile, int n, int p, const int BITS) {
    if (BITS == 8)
        return _mm512_cvtepu8_epi16(
            _mm256_loadu_si256((const __m256i *)(const void *)(tile + 32 * p)));
    __m512i v;
    const uint8_t *pl = tile;
    if (BITS <= 3) {
        v = f2(pl + 8 * p);
        pl += 4 * n;
    } else {
        v = f4(pl + 16 * p);
        pl += 8 * n;
    }
    if (BITS == 6 || BITS == 7) { /* bits 4-5 */
        v = _mm512_or_si512(v, _mm512_slli_epi16(f2(pl + 8 * p), 4));
        pl += 4 * n;
    }
    if (BITS == 3 || BITS == 5 || BITS == 7) { /* the top bit: word f = field f */
        uint32_t m;
        memcpy(&m, pl + 4 * p, 4);
        v = _mm512_mask_add_epi16(v, (__mmask32)m, v, _mm512_set1_epi16((short)(1 << (BITS - 1))));
    }
    return v;
}

/* a[j] += the int32 class sums of query j over one full tile of the class. */
VQ_INLINE void class_tile(const int16_t *const *qi, const int NQ, int c0, const uint8_t *tile,
                          int n, __m512i *a, const int BITS) {
    for (int p = 0; p < n / 2; p++) {
        const __m512i v = pair_codes(tile, n, p, BITS);
        for (int j = 0; j < NQ; j++) {
            int32_t q;
            memcpy(&q, qi[j] + c0 + 2 * p, 4);
            a[j] = dp(a[j], v, _mm512_set1_epi32(q));
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
        __m512 f[VQ_KIVI_MAX_Q];
        for (int j = 0; j < NQ; j++) f[j] = _mm512_set1_ps(bias[j]);
        for (int k = 0, c0 = 0; k < ncls; c0 += nch[k], k++) {
            vq_pf_step(&ps); /* the next block, a step before each class of each tile */
            const uint8_t *tile = area + off[k] +
                                  (size_t)i * vq_kivi_tile_bytes(16, nch[k], bits[k]);
            __m512i a[VQ_KIVI_MAX_Q];
            for (int j = 0; j < NQ; j++) a[j] = _mm512_setzero_si512();
#define CLASS_TILE(B) class_tile(qi, NQ, c0, tile, nch[k], a, B)
            VQ_KIVI_WITH_BITS(bits[k], CLASS_TILE);
#undef CLASS_TILE
            for (int j = 0; j < NQ; j++)
                f[j] = _mm512_add_ps(
                    f[j], _mm512_mul_ps(_mm512_set1_ps(delta[j][k]), _mm512_cvtepi32_ps(a[j])));
        }
        for (int j = 0; j < NQ; j++) _mm512_storeu_ps(out[j] + i * VQ_KIVI_TILE, f[j]);
    }
    if (nt * VQ_KIVI_TILE < g)
        vq_kivi_score_tile_ref(qi, delta, NQ, area, ncls, bits, nch, off, g, nt, bias, out);
}

void TILES_FN(const int16_t *const *qi, const float *const *delta, int nq, const uint8_t *area,
              int ncls, const int *bits, const int *nch, const size_t *off, int g,
              const float *bias, float *const *out, const uint8_t *pf, size_t pf_bytes) {
    switch (nq) {
    case 1: tiles(qi, delta, 1, area, ncls, bits, nch, off, g, bias, out, pf, pf_bytes); break;
    case 2: tiles(qi, delta, 2, area, ncls, bits, nch, off, g, bias, out, pf, pf_bytes); break;
    case 3: tiles(qi, delta, 3, area, ncls, bits, nch, off, g, bias, out, pf, pf_bytes); break;
    case 4: tiles(qi, delta, 4, area, ncls, bits, nch, off, g, bias, out, pf, pf_bytes); break;
    case 5: tiles(qi, delta, 5, area, ncls, bits, nch, off, g, bias, out, pf, pf_bytes); break;
    default: tiles(qi, delta, 6, area, ncls, bits, nch, off, g, bias, out, pf, pf_bytes); break;
    }
}
