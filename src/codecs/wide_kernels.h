/*
 * wide_kernels.h — fused score / accumulate kernels of the rotated codecs with 5..8-bit codes
 * (turboquant_mse b = 5..8 and int8; docs/ALGORITHMS.md §3.1 and §3.8), scalar reference +
 * AVX2 + AVX-512, and the record layout they read.
 *
 * A record (one token) is [scale: vq_sf16, 2 bytes LE][codes: d*bits/8 bytes]. Codes are an
 * LSB-first bit stream, code j at bit offset j*bits (bits = 8: byte j). Two kinds of codes:
 *   LUT (lin = 0, bits 5..8): unsigned index into a 2^bits-entry level table lut[];
 *   LIN (lin = 1, bits = 8):  a two's-complement int8 whose value is the level itself.
 * The token's vector in the rotated domain is scale * level(code_j), j = 0..d-1.
 *
 * Unlike the 1..4-bit kernels (turboquant_kernels.h) the prepared query and the accumulator
 * are in natural coordinate order: qs = RHT(q) followed by zeros up to dpad = d rounded up to
 * 16 (so SIMD kernels read whole vectors), acc has dpad floats of which the first d matter.
 *
 * SIMD kernels: 16 (AVX-512) or 8 (AVX2) consecutive coordinates of one token per vector.
 * LIN codes are sign-extended and converted (VPMOVSXBD + VCVTDQ2PS). LUT codes of 5..7 bits are
 * extracted by one byte shuffle per 128-bit lane (each code's two bytes into its 32-bit lane)
 * and a variable right shift. AVX2 then looks the levels up with VGATHERDPS (8-bit codes too).
 * AVX-512 keeps the table in registers: one VPERMT2PS per 32 levels and a blend tree on the
 * bits above (5 bits: one permute, 6: two + a blend, 7: four + three); 8-bit codes use
 * VGATHERDPS. Where the CPU has AVX512_VBMI, codes of 6 and 7 bits and symmetric 8-bit tables
 * (sym: the Lloyd-Max ones) go to wide_avx512vbmi.c instead: 64 codes per VPERMB
 * (+ VPMULTISHIFTQB), the levels looked up one byte plane at a time (VPERMB / VPERMI2B) and
 * interleaved into floats. Measured on the development CPU (Xeon with AVX-512 VBMI, d = 64,
 * one core shared with other jobs, ns per token for score / accumulate): int8 4.1 / 3.6;
 * VGATHERDPS 14-27 / 14-27 (5 bits slowest); register table 5 bits 5.6 / 4.4, 6 bits 7.8 /
 * 8.0, 7 bits 11.3 / 12.3; VBMI 6 bits 6.7 / 5.7, 7 bits 8.0 / 6.7 (symmetric 7.2 / 5.8),
 * symmetric 8 bits 8.3 / 6.9. Score keeps 8 tokens in flight (8 accumulators, then one
 * horizontal-sum tree gives 8 scores); accumulate keeps up to 4 vectors of the accumulator in
 * registers across a chunk of 64 tokens (every coordinate pass over a chunk before the next
 * chunk, so each record is read from memory once). Sums run in another order than the
 * reference: SIMD results equal the reference up to float rounding
 * (tests/unit/test_wide_kernels.c bounds the difference).
 *
 * All kernels are thread-safe (read-only k), never allocate and accept n = 0.
 */
#ifndef VQ_WIDE_KERNELS_H
#define VQ_WIDE_KERNELS_H

#include <stdint.h>

#include "core/core.h"

typedef struct vq_wk {
    int d;          /* head_dim (multiple of 8, <= 1024) */
    int dpad;       /* d rounded up to 16: floats of the prepared query and the accumulator */
    int bits;       /* 5..8 */
    int lin;        /* 1: int8 codes are the levels (bits = 8); 0: codes index lut */
    int rec;        /* record bytes: 2 + d*bits/8 */
    int sym;        /* LUT codes: 1 if lut[2^bits - 1 - i] is exactly -lut[i] for every i */
    float lut[256]; /* (2^bits) levels, LUT codes only */
} vq_wk;

typedef void (*vq_wk_score_fn)(const vq_wk *k, const float *qs, const uint8_t *codes, int64_t n,
                               float *scores);
typedef void (*vq_wk_acc_fn)(const vq_wk *k, const uint8_t *codes, int64_t n, const float *w,
                             float *acc);

/* The state every wide codec starts with (first member of its impl struct), so decode /
 * prepare / score / accumulate / finish / destroy are shared (wide_common.c). */
struct vq_wk_base {
    vq_rht rht;
    vq_wk k;
    vq_wk_score_fn score;
    vq_wk_acc_fn acc;
};

/* Fills k for head dim d and bits (5..8; lin requires 8); levels: 2^bits entries, ignored
 * (may be NULL) for lin. Asserts on bad arguments (callers validate first). */
void vq_wk_init(vq_wk *k, int d, int bits, int lin, const float *levels);
/* Picks the score / accumulate kernels of isa (the scalar reference for VQ_ISA_SCALAR or
 * where the isa has none). */
void vq_wk_select(const vq_wk *k, enum vq_isa isa, vq_wk_score_fn *score, vq_wk_acc_fn *acc);
/* 1 if the AVX512_VBMI kernels have a path of their own for k: LUT codes of 6 or 7 bits, or
 * of 8 bits with sym levels. Pure. */
int vq_wk_vbmi_fits(const vq_wk *k);
/* Code j of record rec (unsigned index, or the int8 value for lin). */
int vq_wk_code(const vq_wk *k, const uint8_t *rec, int j);
/* Writes the d codes (each < 2^bits; lin: int8 values as bytes) into the code bytes of rec
 * (after the scale). */
void vq_wk_put_codes(const vq_wk *k, const uint8_t *codes, uint8_t *rec);
/* Level of coordinate j of record rec (without the scale). */
static inline float vq_wk_level(const vq_wk *k, const uint8_t *rec, int j) {
    const int c = vq_wk_code(k, rec, j);
    return k->lin ? (float)c : k->lut[c];
}

/* Reference kernels (the normative definitions):
 * scores[t] = scale_t * sum_{j<d} qs[j] * level_tj, summed in order of j from 0.0f;
 * acc[j] += w[t] * scale_t * level_tj for t = 0..n-1 in order. */
void vq_wk_score_ref(const vq_wk *k, const float *qs, const uint8_t *codes, int64_t n,
                     float *scores);
void vq_wk_accumulate_ref(const vq_wk *k, const uint8_t *codes, int64_t n, const float *w,
                          float *acc);
#ifdef VQ_HAVE_X86
void vq_wk_score_avx2(const vq_wk *k, const float *qs, const uint8_t *codes, int64_t n,
                      float *scores);
void vq_wk_accumulate_avx2(const vq_wk *k, const uint8_t *codes, int64_t n, const float *w,
                           float *acc);
void vq_wk_score_avx512(const vq_wk *k, const float *qs, const uint8_t *codes, int64_t n,
                        float *scores);
/* nq (>= 1) queries qs[j] over the same records, each scores[j] the bits of
 * vq_wk_score_avx512 with qs[j] (the codes unpacked once for all). */
void vq_wk_score_multi_avx512(const vq_wk *k, const float *const *qs, int nq, const uint8_t *codes,
                              int64_t n, float *const *scores);
/* nq (>= 1) queries at once, each scores[j] the bits of vq_wk_score_avx2 with qs[j]. */
void vq_wk_score_multi_avx2(const vq_wk *k, const float *const *qs, int nq, const uint8_t *codes,
                            int64_t n, float *const *scores);
/* nq (>= 1) weight vectors at once, each accumulator the bits of its vq_wk_accumulate_avx2. */
void vq_wk_accumulate_multi_avx2(const vq_wk *k, const uint8_t *codes, int64_t n,
                                 const float *const *w, int nq, float *const *acc);
/* nq weight vectors over the same records, each acc[j] the bits of vq_wk_accumulate_avx512. */
void vq_wk_accumulate_multi_avx512(const vq_wk *k, const uint8_t *codes, int64_t n,
                                   const float *const *w, int nq, float *const *acc);
void vq_wk_accumulate_avx512(const vq_wk *k, const uint8_t *codes, int64_t n, const float *w,
                             float *acc);
/* AVX-512 + AVX512_VBMI (callers check vq_cpu_avx512vbmi()): their own kernels where
 * vq_wk_vbmi_fits(k), the AVX-512 ones otherwise. */
void vq_wk_score_avx512vbmi(const vq_wk *k, const float *qs, const uint8_t *codes, int64_t n,
                            float *scores);
void vq_wk_accumulate_avx512vbmi(const vq_wk *k, const uint8_t *codes, int64_t n, const float *w,
                                 float *acc);
#endif

/* Codec slots over c->impl, which must start with a struct vq_wk_base. Thread-safe. */
struct vq_codec;
void vq_wk_codec_decode(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x);
void vq_wk_codec_prepare_query(const struct vq_codec *c, const float *q, void *qs);
void vq_wk_codec_score(const struct vq_codec *c, const void *qs, const uint8_t *codes,
                       int64_t n_tokens, float *scores);
void vq_wk_codec_accumulate(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                            const float *w, float *acc);
void vq_wk_codec_finish(const struct vq_codec *c, const float *acc, float *out);
/* Fills c's block sizes and the five shared slots (not encode) from the base in c->impl. */
void vq_wk_codec_setup(struct vq_codec *c);
/* Frees the rotation and the impl (vq_alloc'd); NULL impl is a no-op. */
void vq_wk_codec_destroy(struct vq_codec *c);

#endif
