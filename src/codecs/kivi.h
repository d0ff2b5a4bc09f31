/*
 * kivi.h — kernels of the KIVI codecs (kivi, kivi_sink): scalar reference + x86 variants.
 * A "code row" is the d codes of one token packed as described in kivi.c (bits 2 and 4: one
 * LSB-first stream of d codes; bits 8: one byte per code; bits 3, 5, 6, 7: bit planes of
 * decreasing width, low bits first: 3 = 2+1, 5 = 4+1, 6 = 4+2, 7 = 4+2+1).
 */
#ifndef VQ_CODECS_KIVI_H
#define VQ_CODECS_KIVI_H

#include <stddef.h>
#include <stdint.h>

/* Most sink tokens a kivi_sink codec may keep per layer (n_sink_tokens range 0..64). */
#define VQ_KIVI_MAX_SINKS 64

/* Bytes of one code row of d codes at `bits` bits (d multiple of 8): d*bits/8. */
static inline size_t vq_kivi_row_bytes(int d, int bits) { return (size_t)d * (size_t)bits / 8; }

/* vq_sf16 -> fp32, exact and identical to vq_sf16_to_fp32 for all 65536 inputs (tested):
 * (|h| << 14) read as fp32 is the value times 2^-96 for normal and subnormal sf16 alike. */
static inline float vq_kivi_sf16(uint16_t h) {
    union {
        uint32_t u;
        float f;
    } m, r;
    m.u = (uint32_t)(h & 0x7FFFu) << 14;
    r.f = m.f * 0x1.0p96f;
    r.u |= (uint32_t)(h & 0x8000u) << 16;
    return r.f;
}

/* Runs F(B) with B the compile-time constant equal to bits (2..8): the SIMD kernels are
 * specialized per width (BITS template arguments). */
#define VQ_KIVI_WITH_BITS(bits, F) \
    do { \
        switch (bits) { \
        case 2: F(2); break; \
        case 3: F(3); break; \
        case 4: F(4); break; \
        case 5: F(5); break; \
        case 6: F(6); break; \
        case 7: F(7); break; \
        default: F(8); break; \
        } \
    } while (0)

/* Packs / unpacks one code row of d codes (d multiple of 8, <= 1024; bits 2..8; codes in
 * 0 .. 2^bits - 1, higher bits ignored by pack); the layout of value blocks. row:
 * vq_kivi_row_bytes(d, bits) bytes, fully written by pack. Pure, thread-safe. */
void vq_kivi_pack_row(const uint8_t *codes, int d, int bits, uint8_t *row);
void vq_kivi_unpack_row(const uint8_t *row, int d, int bits, uint8_t *codes);

/* Key tiles (kivi.c): a width class's codes of VQ_KIVI_TILE consecutive tokens (fewer in a
 * block's last tile when G % 16 != 0), stored channel pair by channel pair so that one vector
 * lane holds one token's two codes of a pair. */
#define VQ_KIVI_TILE 16

/* Bytes of a tile of m tokens x n channels (n a multiple of 8) at `bits` bits: m*n*bits/8. */
static inline size_t vq_kivi_tile_bytes(int m, int n, int bits) {
    return (size_t)m * (size_t)n * (size_t)bits / 8;
}

/* Largest |integer query| of a width class of n channels at `bits` bits: 32767, or less where
 * n * (2^bits - 1) * 32767 would overflow an int32 sum (so every class sum is exact). */
static inline int vq_kivi_qmax(int n, int bits) {
    const long long lim = 2147483647LL / ((long long)n * ((1 << bits) - 1));
    return lim < 32767 ? (int)lim : 32767;
}

/* Packs / unpacks one key tile of m (1..16) tokens x n channels (n a multiple of 8, <= 1024)
 * at `bits` (2..8): codes[t * stride + i] is token t's code of the class's channel i (higher
 * bits ignored by pack). tile: vq_kivi_tile_bytes(m, n, bits) bytes, fully written by pack.
 * Pure, thread-safe. */
void vq_kivi_pack_tile(const uint8_t *codes, size_t stride, int m, int n, int bits, uint8_t *tile);
void vq_kivi_unpack_tile(const uint8_t *tile, int m, int n, int bits, uint8_t *codes,
                         size_t stride);

/* Integer query of one width class (reference): with M = max_c |qp[c]| over n entries, qi[c] =
 * rint(qp[c] * (qmax / M)) (round to nearest even; |qi| <= qmax); returns delta = M / qmax, so
 * qp[c] ~ delta * qi[c]. M = 0: every qi 0, returns 0; a non-finite qp: every qi 0, returns NaN
 * (the block's scores become NaN, as with the float query). Pure. */
float vq_kivi_quant16_ref(const float *qp, int n, int qmax, int16_t *qi);

/* The integer queries of one key block for nq (1..4) queries q[j] (d floats, position order):
 * the fold (qp = q * ŝ, bias[j] = sum q * ẑ over the block's d sf16 scales s16 and zeros z16)
 * and, per width class k (nch[k] entries after those of the classes before it, bound
 * qmax[k]), qi[j] and delta[j][k] as vq_kivi_quant16_ref of its qp. qi and delta are the same
 * bits in every kernel family (qp is an exact product); bias is the family's fold (the
 * reference's within float rounding). Pure. */
/* The most queries one prep / score_tiles call takes (a GQA group of 6 query heads per kv
 * head, as in Qwen2.5, in one pass over the codes). */
#define VQ_KIVI_MAX_Q 6

typedef void (*vq_kivi_prep_fn)(const float *const *q, int nq, const uint8_t *s16,
                                const uint8_t *z16, int d, int ncls, const int *nch,
                                const int *qmax, int16_t *const *qi, float *const *delta,
                                float *bias);

/* Scores of one key block's tiles for nq (1..VQ_KIVI_MAX_Q) queries. The block's code area
 * (after the scales and zeros) holds ncls width classes; class k (nch[k] channels, a multiple
 * of 8, at bits[k] in 2..8) starts at area + off[k] with its ceil(g / 16) tiles one after
 * another; its integer query entries follow those of the classes before it in qi[j], and
 * delta[j][k] is their scale. For token t < g:
 *   out[j][t] = bias[j] + delta[j][0] * S_0 + delta[j][1] * S_1 + ...   (left to right, each
 *   product rounded to float before its add), S_k = sum over the class of qi * code (int32,
 *   exact, as float by round to nearest).
 * Every kernel gives the same bits. pf: NULL, or pf_bytes bytes (the next block) the kernel
 * prefetches a part of per tile. */
typedef void (*vq_kivi_score_tiles_fn)(const int16_t *const *qi, const float *const *delta, int nq,
                                       const uint8_t *area, int ncls, const int *bits,
                                       const int *nch, const size_t *off, int g, const float *bias,
                                       float *const *out, const uint8_t *pf, size_t pf_bytes);
/* acc[c] += a[c / g] * code_c for one code row (g = channel group size). */
typedef void (*vq_kivi_acc_row_fn)(const uint8_t *row, int d, int bits, int g, const float *a,
                                   float *acc);

/* Scale-folded query of one key block: qp[c] = q[c] * ŝ_c; returns sum_c q[c] * ẑ_c.
 * s16 / z16 point at the block's d sf16 scales / zeros (any alignment). */
typedef float (*vq_kivi_fold_fn)(const float *q, const uint8_t *s16, const uint8_t *z16, int d,
                                 float *qp);
/* Value accumulation over n value blocks (block_bytes apart, layout in kivi.c):
 * acc[c] += sum_t w[t] ŝ_{t,c/g} code_{t,c} and acc[d + h] += sum_t w[t] ẑ_{t,h}. */
typedef void (*vq_kivi_acc_vals_fn)(const uint8_t *blocks, size_t block_bytes, int64_t n,
                                    const float *w, int d, int bits, int g, float *acc);

float vq_kivi_fold_ref(const float *q, const uint8_t *s16, const uint8_t *z16, int d, float *qp);
void vq_kivi_acc_vals_ref(const uint8_t *blocks, size_t block_bytes, int64_t n, const float *w,
                          int d, int bits, int g, float *acc);
void vq_kivi_acc_row_ref(const uint8_t *row, int d, int bits, int g, const float *a, float *acc);
void vq_kivi_prep_ref(const float *const *q, int nq, const uint8_t *s16, const uint8_t *z16, int d,
                      int ncls, const int *nch, const int *qmax, int16_t *const *qi,
                      float *const *delta, float *bias);
void vq_kivi_score_tiles_ref(const int16_t *const *qi, const float *const *delta, int nq,
                             const uint8_t *area, int ncls, const int *bits, const int *nch,
                             const size_t *off, int g, const float *bias, float *const *out,
                             const uint8_t *pf, size_t pf_bytes);
/* Tile i of the block only (tokens 16i .. min(16i + 16, g) - 1; same bits as the whole-block
 * reference): the SIMD kernels' tail. */
void vq_kivi_score_tile_ref(const int16_t *const *qi, const float *const *delta, int nq,
                            const uint8_t *area, int ncls, const int *bits, const int *nch,
                            const size_t *off, int g, int i, const float *bias, float *const *out);
#ifdef VQ_HAVE_X86
float vq_kivi_fold_avx2(const float *q, const uint8_t *s16, const uint8_t *z16, int d, float *qp);
float vq_kivi_fold_avx512(const float *q, const uint8_t *s16, const uint8_t *z16, int d, float *qp);
void vq_kivi_acc_vals_avx2(const uint8_t *blocks, size_t block_bytes, int64_t n, const float *w,
                           int d, int bits, int g, float *acc);
void vq_kivi_acc_vals_avx512(const uint8_t *blocks, size_t block_bytes, int64_t n, const float *w,
                             int d, int bits, int g, float *acc);
void vq_kivi_acc_row_avx2(const uint8_t *row, int d, int bits, int g, const float *a, float *acc);
void vq_kivi_acc_row_avx512(const uint8_t *row, int d, int bits, int g, const float *a, float *acc);
/* The AVX-512 kernels built with AVX512_VBMI (callers check vq_cpu_avx512vbmi()); same
 * results as the _avx512 ones. */
float vq_kivi_fold_avx512vbmi(const float *q, const uint8_t *s16, const uint8_t *z16, int d,
                              float *qp);
void vq_kivi_acc_vals_avx512vbmi(const uint8_t *blocks, size_t block_bytes, int64_t n,
                                 const float *w, int d, int bits, int g, float *acc);
void vq_kivi_acc_row_avx512vbmi(const uint8_t *row, int d, int bits, int g, const float *a,
                                float *acc);
void vq_kivi_prep_avx2(const float *const *q, int nq, const uint8_t *s16, const uint8_t *z16, int d,
                       int ncls, const int *nch, const int *qmax, int16_t *const *qi,
                       float *const *delta, float *bias);
void vq_kivi_prep_avx512(const float *const *q, int nq, const uint8_t *s16, const uint8_t *z16,
                         int d, int ncls, const int *nch, const int *qmax, int16_t *const *qi,
                         float *const *delta, float *bias);
void vq_kivi_prep_avx512vbmi(const float *const *q, int nq, const uint8_t *s16, const uint8_t *z16,
                             int d, int ncls, const int *nch, const int *qmax, int16_t *const *qi,
                             float *const *delta, float *bias);
/* Key tiles (kivi_tiles_*.c), the reference's bits. AVX2: VPMADDWD over 8 tokens; AVX-512:
 * VPMADDWD over 16; the _avx512vnni kernel (callers check vq_cpu_avx512vnni()) VPDPWSSD. */
void vq_kivi_score_tiles_avx2(const int16_t *const *qi, const float *const *delta, int nq,
                              const uint8_t *area, int ncls, const int *bits, const int *nch,
                              const size_t *off, int g, const float *bias, float *const *out,
                              const uint8_t *pf, size_t pf_bytes);
void vq_kivi_score_tiles_avx512(const int16_t *const *qi, const float *const *delta, int nq,
                                const uint8_t *area, int ncls, const int *bits, const int *nch,
                                const size_t *off, int g, const float *bias, float *const *out,
                                const uint8_t *pf, size_t pf_bytes);
void vq_kivi_score_tiles_avx512vnni(const int16_t *const *qi, const float *const *delta, int nq,
                                    const uint8_t *area, int ncls, const int *bits, const int *nch,
                                    const size_t *off, int g, const float *bias, float *const *out,
                                    const uint8_t *pf, size_t pf_bytes);
#endif

#endif
