/*
 * lutsum_kernels.h — fused kernels of the calibrated codecs vecinfer and spectral (scalar
 * reference in the codec files, portable "generic" versions, AVX2 and AVX-512 in
 * src/codecs/arch/x86/vecinfer_{avx2,avx512}.c, shared by both codecs).
 *
 * Both codecs score a token as a sum of table lookups: field f of the token's record is a code
 * of width w_f bits at a fixed bit offset, and the score adds lut[lut_off_f + code_f] (vecinfer:
 * one field per sub-vector, tables of <q~_s, C_i>; spectral: one field per active PCA
 * coordinate, tables of q~_j c_b[i], in two groups scaled by the record's two sf16 scales).
 * The value side is the transpose: acc[lut_off_f + code_f] += w_t (* group scale).
 *
 * A vq_ls_prog describes the fields as a list of 32-bit little-endian "words": word k is read
 * at byte off_k of the record (off_k + 4 <= record bytes, so reads never leave the record)
 * and holds fields f0_k .. f0_k + nf_k - 1, field f being (word >> shift_f) & mask_f. Words of
 * group 0 come first (words [0, w_split)); a word never mixes groups.
 *
 * SIMD score kernels put 16 (AVX-512) or 8 (AVX2) tokens in the lanes: one gather of a word
 * per lane, then per field shift / and / table gather / add. No table is quantized: the
 * tables are the fp32 tables of the scalar reference, and every kernel (generic and SIMD)
 * adds a token's lookups in field order into one sum starting at 0.0f, as the reference does,
 * so scores are bitwise equal to the reference (the spectral scales are applied as
 * s0 * sum0 + s1 * sum1 with separately rounded products, also as the reference). Accumulate has no
 * SIMD histogram version: a histogram gather + scatter (AVX-512, 16 fields of one token in the
 * lanes) measured 2-4x slower than the generic kernel on the development CPU (AMD Zen 4), so it
 * was dropped. On AVX-512 with VBMI spectral leaves the histograms altogether: its multi-query
 * kernels (vq_sp_*_multi_avx512vbmi below) decode each token's whitened coordinates once and
 * dot / add them for every query of a kv head (equal to the reference within float rounding,
 * not bitwise).
 *
 * Table helpers (x86): exact mul-then-add loops in the same order as the scalar loops of the
 * codecs, so prepared tables, encodes and decodes are bitwise identical on every ISA.
 *
 * All kernels are thread-safe (read-only program), do not allocate, and accept n = 0.
 */
#ifndef VQ_LUTSUM_KERNELS_H
#define VQ_LUTSUM_KERNELS_H

#include <stdint.h>
#include <string.h>

#include "core/core.h"

typedef struct vq_ls_word {
    uint16_t off; /* byte offset of the 32-bit word in the record */
    uint16_t f0;  /* first field */
    uint16_t nf;  /* fields in this word */
    uint16_t grp; /* 0 or 1 */
} vq_ls_word;

typedef struct vq_ls_prog {
    int rec;      /* record bytes (token stride), >= 4 */
    int n_scales; /* 0: score = plain sum (vecinfer); 2: sf16 scales at bytes 0 and 2 */
    int n_words, w_split;
    int n_fields;      /* fields */
    vq_ls_word *words; /* (n_words) */
    uint8_t *shift;    /* (n_fields) shift of field f inside its word */
    uint32_t *mask;    /* (n_fields) 2^w_f - 1 */
    uint32_t *lut_off; /* (n_fields) table offset of field f */
} vq_ls_prog;

/* Builds p for records of rec bytes whose code stream starts at byte code_off: n_fields
 * fields, field f of width[f] (1..12) bits at bit offset bit[f] of the stream (increasing),
 * table offset lut_off[f]; fields [0, f_split) are group 0, the rest group 1; n_scales 0 or 2.
 * Requires rec >= 4 and code_off + ceil(bits/8) <= rec. Returns OK or NO_MEMORY (p then holds
 * nothing to free). Free with vq_ls_prog_free (also safe on a zeroed p). */
vq_status vq_ls_prog_build(vq_ls_prog *p, int rec, int code_off, int n_fields, const uint32_t *bit,
                           const uint8_t *width, const uint32_t *lut_off, int f_split,
                           int n_scales);
void vq_ls_prog_free(vq_ls_prog *p);

/* scores[t] = [s0_t *] sum_{f in group 0} lut[lut_off_f + code_tf] [+ s1_t * sum over group 1]
 * for n records of p->rec bytes at codes. */
typedef void (*vq_ls_score_fn)(const vq_ls_prog *p, const float *lut, const uint8_t *codes,
                               int64_t n, float *scores);
/* acc[lut_off_f + code_tf] += w[t] [* s_{g(f), t}] for every token t and field f. */
typedef void (*vq_ls_acc_fn)(const vq_ls_prog *p, const uint8_t *codes, int64_t n, const float *w,
                             float *acc);

/* Portable versions (4 independent sums per token, word loads instead of per-code byte
 * arithmetic); used for VQ_ISA_SCALAR. */
void vq_ls_score_generic(const vq_ls_prog *p, const float *lut, const uint8_t *codes, int64_t n,
                         float *scores);
void vq_ls_accumulate_generic(const vq_ls_prog *p, const uint8_t *codes, int64_t n, const float *w,
                              float *acc);

/* Byte-code versions for programs whose field f is byte f of the record with a 256-entry
 * table at f * 256 and n_scales = 0 (vecinfer with c = 8). */
void vq_ls_score_bytes_generic(const vq_ls_prog *p, const float *lut, const uint8_t *codes,
                               int64_t n, float *scores);
void vq_ls_accumulate_bytes_generic(const vq_ls_prog *p, const uint8_t *codes, int64_t n,
                                    const float *w, float *acc);

#ifdef VQ_HAVE_X86
void vq_ls_score_avx2(const vq_ls_prog *p, const float *lut, const uint8_t *codes, int64_t n,
                      float *scores);
void vq_ls_score_avx512(const vq_ls_prog *p, const float *lut, const uint8_t *codes, int64_t n,
                        float *scores);

/* y[c] = sum_{r = 0..rows-1} x[r] * a[r * cols + c] for c < cols, summed in order of r from
 * 0.0f with a rounded product then a rounded add (bitwise equal to that scalar loop). */
void vq_ls_cols_dot_avx2(const float *a, int rows, int cols, const float *x, float *y);
void vq_ls_cols_dot_avx512(const float *a, int rows, int cols, const float *x, float *y);
/* vecinfer finish: out[s * v + j] = sum_{i < k, hist[s * k + i] != 0} hist[s * k + i] *
 * cb[i * v + j] for s < n_sub, j < v (v <= 16), summed in order of i from 0.0f with a rounded
 * product then a rounded add (bitwise equal to the scalar loop; zero terms cannot change a
 * sum that starts at +0). 8 sub-vectors in the lanes; also used for VQ_ISA_AVX512 (a 16-lane
 * version measured 2x slower on the development CPU). */
void vq_ls_vi_finish_avx2(const float *hist, int n_sub, int k, int v, const float *cb, float *out);
/* Nearest codeword, identical to vq_nearest_centroid(p, C, cn, k, v) where cbt = C^T (v, k):
 * argmin_i cn[i] - 2 <p, C_i> with <.,.> summed in order of j, lowest index on ties. */
int vq_ls_argmin_avx2(const float *p, const float *cbt, const float *cn, int k, int v);
int vq_ls_argmin_avx512(const float *p, const float *cbt, const float *cn, int k, int v);
#endif

/* spectral's value accumulate in the coordinate domain (AVX-512 VBMI): the active coordinates
 * in groups of 16 lanes; per group the byte permutation that brings each lane's code bytes
 * into its dword (VPERMI2B over the code stream), the bit shift, width mask and offset of the
 * lane's Lloyd-Max codebook in ctab, and the lanes of the noise group. Lanes past the active
 * coordinates read a zero centroid. acc + z_off holds one float per group lane:
 * sum_t w_t s_{g,t} c_{b_j}[code_{t,j}] (spectral.c's finish adds it to the histogram part). */
typedef struct vq_sp_vk {
    int n_grp, code_bytes, rec, z_off;
    uint8_t *pidx;   /* (n_grp * 64) */
    int32_t *lane;   /* (n_grp * 48): shift[16], mask[16], ctab offset[16] */
    uint16_t *noise; /* (n_grp) lanes of the noise group */
    uint8_t *small;  /* (n_grp) 1: every width <= 4 (ctab[0, 32) by VPERMI2PS), 0: gather */
    float ctab[160]; /* widths 1..6 at 0, 4, 8, 16, 32, 64 (multiples of their counts); 0 at 2 */
} vq_sp_vk;
#ifdef VQ_HAVE_X86
/* acc[j] + z_off (n_grp * 16 floats) += the coordinate-domain sums of the n records at codes
 * for nq (1..4) weight vectors w[j]; each query's result independent of nq. Requires
 * code_bytes <= 128. */
void vq_sp_acc_multi_avx512vbmi(const vq_sp_vk *k, const uint8_t *codes, int64_t n,
                                const float *const *w, int nq, float *const *acc);
/* scores[j][t] = sum_e qa[j][e] * (whitened coordinate e of record t) for nq (1..4) queries, qa
 * the whitened queries in active order (n_grp * 16 floats, zero past the active coordinates):
 * vq_sp_score_ref within float rounding; each query's result independent of nq. */
void vq_sp_score_multi_avx512vbmi(const vq_sp_vk *k, const float *const *qa, int nq,
                                  const uint8_t *codes, int64_t n, float *const *scores);
#endif

/* vecinfer's score and value accumulate in the coordinate domain (AVX-512): a token's x~^ is
 * its codewords side by side; 16 coordinates per vector, lane l of vector z reading codebook
 * float code[sub[z][l]] * v + j[z][l]. Codes: bytes (c = 8) or the bit stream (c != 8), at
 * most 64 sub-vectors. The prepared query holds q~ (pad16(d) floats) at q_off; the
 * accumulator sum_t w_t x~^_t at z_off (vecinfer.c's finish adds it to the histogram part). */
typedef struct vq_vi_vk {
    int d, c, v, n_sub, code_bytes, nz, q_off, z_off;
    int32_t *sub, *j; /* (nz * 16) sub-vector and offset in the codeword of each lane */
    const float *cb;  /* (2^c, v) codebook (the codec's) */
} vq_vi_vk;
#ifdef VQ_HAVE_X86
/* scores[j][t] = <q~_j, x~^_t> for nq (1..4) prepared queries (vq_vi_score_ref within float
 * rounding); each query's result independent of nq. */
void vq_vi_score_multi_avx512(const vq_vi_vk *k, const float *const *qs, int nq,
                              const uint8_t *codes, int64_t n, float *const *scores);
/* acc[j] + z_off (pad16(d) floats) += sum_t w[j][t] x~^_t for nq (1..4) weight vectors; each
 * query's result independent of nq. */
void vq_vi_acc_multi_avx512(const vq_vi_vk *k, const uint8_t *codes, int64_t n,
                            const float *const *w, int nq, float *const *acc);
#endif

/* The codecs' scalar reference kernels (codec slot signatures; c must be a vecinfer / spectral
 * codec of any isa). Used by the codecs when no program applies, and by the tests. */
struct vq_codec;
vq_status vq_vi_encode_ref(const struct vq_codec *c, const float *x, int64_t n_blocks,
                           uint8_t *dst);
void vq_vi_prepare_query_ref(const struct vq_codec *c, const float *q, void *qs);
void vq_vi_score_ref(const struct vq_codec *c, const void *qs, const uint8_t *codes, int64_t n,
                     float *scores);
void vq_vi_accumulate_ref(const struct vq_codec *c, const uint8_t *codes, int64_t n, const float *w,
                          float *acc);
void vq_vi_finish_ref(const struct vq_codec *c, const float *acc, float *out);
vq_status vq_sp_encode_ref(const struct vq_codec *c, const float *x, int64_t n_blocks,
                           uint8_t *dst);
void vq_sp_decode_ref(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x);
void vq_sp_prepare_query_ref(const struct vq_codec *c, const float *q, void *qs);
void vq_sp_score_ref(const struct vq_codec *c, const void *qs, const uint8_t *codes, int64_t n,
                     float *scores);
void vq_sp_accumulate_ref(const struct vq_codec *c, const uint8_t *codes, int64_t n, const float *w,
                          float *acc);
void vq_sp_finish_ref(const struct vq_codec *c, const float *acc, float *out);

/* little-endian 32-bit load (any alignment) */
static inline uint32_t vq_ls_load32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

#endif
