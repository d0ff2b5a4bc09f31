/*
 * ggml.h — ggml weight block formats (docs/ALGORITHMS.md §9): type traits, row dequantization
 * (scalar _ref, the normative spec) and dot-product kernels for matrix-vector / matrix-matrix
 * products that never dequantize a whole matrix. Not part of the public API.
 *
 * Products follow ggml: the activation row is quantized once per row (vec_dot_type) and every
 * weight row is dotted against it with integer arithmetic per block:
 *   - legacy 32-element weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) use VQ_ACT_Q8A
 *     (32 int8 + float scale d + float s = d * sum(q)), like ggml's Q8_1;
 *   - K-quants (Q4_K, Q5_K, Q6_K) use VQ_ACT_Q8K (256 int8 + float d + 16 int16 block sums);
 *   - float weights (F32, F16, BF16) use the fp32 activation as is (VQ_ACT_F32).
 * Kernels are pure functions of their inputs (thread-safe); the table returned by
 * vq_ggml_kernels is immutable.
 */
#ifndef VQ_GGML_H
#define VQ_GGML_H

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "engine/gguf.h"

/* Storage traits of a ggml type. block_size elements take type_size bytes. */
struct vq_ggml_type_info {
    const char *name;
    int block_size;
    int type_size;
};

/* Traits of a ggml type id whose layout this reader knows, or NULL (unknown / removed ids). */
const struct vq_ggml_type_info *vq_ggml_type_info(uint32_t type);

/* ---- block structs ------------------------------------------------------------------- */

typedef uint16_t vq_half; /* IEEE binary16 bits */

#define VQ_QK4_0 32
#define VQ_QK4_1 32
#define VQ_QK5_0 32
#define VQ_QK5_1 32
#define VQ_QK8_0 32
#define VQ_QK8A 32
#define VQ_QK_K 256
#define VQ_K_SCALE_SIZE 12

typedef struct {
    vq_half d;
    uint8_t qs[16];
} vq_block_q4_0;
typedef struct {
    vq_half d, m;
    uint8_t qs[16];
} vq_block_q4_1;
typedef struct {
    vq_half d;
    uint8_t qh[4];
    uint8_t qs[16];
} vq_block_q5_0;
typedef struct {
    vq_half d, m;
    uint8_t qh[4];
    uint8_t qs[16];
} vq_block_q5_1;
typedef struct {
    vq_half d;
    int8_t qs[32];
} vq_block_q8_0;
typedef struct {
    vq_half d, dmin;
    uint8_t scales[VQ_K_SCALE_SIZE];
    uint8_t qs[128];
} vq_block_q4_K;
typedef struct {
    vq_half d, dmin;
    uint8_t scales[VQ_K_SCALE_SIZE];
    uint8_t qh[32];
    uint8_t qs[128];
} vq_block_q5_K;
typedef struct {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    vq_half d;
} vq_block_q6_K;
/* activation blocks (in memory only) */
/* Activation block, ggml Q8_1 values in fp32 fields: d = fp16(amax / 127),
 * qs = round(x * 127 / amax) (ties to even), s = fp16(amax / 127 * sum(qs)) — the roundings of
 * quantize_row_q8_1, so that matmuls see the same numbers as llama.cpp. */
typedef struct {
    float d;
    float s;
    int8_t qs[32];
} vq_block_q8a;
typedef struct {
    float d;
    int8_t qs[256];
    int16_t bsums[16];
} vq_block_q8_K; /* bsums: 16-sums */

static_assert(sizeof(vq_block_q4_0) == 18, "q4_0 size");
static_assert(sizeof(vq_block_q4_1) == 20, "q4_1 size");
static_assert(sizeof(vq_block_q5_0) == 22, "q5_0 size");
static_assert(sizeof(vq_block_q5_1) == 24, "q5_1 size");
static_assert(sizeof(vq_block_q8_0) == 34, "q8_0 size");
static_assert(sizeof(vq_block_q4_K) == 144, "q4_K size");
static_assert(sizeof(vq_block_q5_K) == 176, "q5_K size");
static_assert(sizeof(vq_block_q6_K) == 210, "q6_K size");
static_assert(sizeof(vq_block_q8a) == 40, "q8a size");
static_assert(sizeof(vq_block_q8_K) == 292, "q8_K size");

/* ---- scalar conversions -------------------------------------------------------------- */

/* binary16 -> fp32, exact (subnormals, inf, NaN). */
static inline float vq_ggml_h2f(vq_half h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 0x3FFu, u;
    if (e == 0) {
        if (m == 0) u = sign;
        else { /* subnormal: normalize */ int sh = 0;
            while (!(m & 0x400u)) {
                m <<= 1;
                sh++;
            }
            u = sign | ((uint32_t)(113 - sh) << 23) | ((m & 0x3FFu) << 13);
        }
    } else if (e == 31) u = sign | 0x7F800000u | (m << 13);
    else u = sign | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* fp32 -> binary16, round to nearest even (used by tests and the reference quantizers). */
static inline vq_half vq_ggml_f2h(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u) return (vq_half)(sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u : 0));
    if (ax >= 0x477FF000u) return (vq_half)(sign | 0x7C00u); /* overflow -> inf */
    if (ax < 0x38800000u) {                                  /* subnormal / zero */
        if (ax < 0x33000000u) return (vq_half)sign;
        uint32_t e = ax >> 23, m = (ax & 0x7FFFFFu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14 + (113 - e) - 1 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (vq_half)(sign | r);
    }
    uint32_t r = ax + 0xFFFu + ((ax >> 13) & 1u);
    return (vq_half)(sign | ((r - 0x38000000u) >> 13));
}

static inline float vq_ggml_bf2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- kernels ------------------------------------------------------------------------- */

enum vq_ggml_act { VQ_ACT_F32 = 0, VQ_ACT_Q8A = 1, VQ_ACT_Q8K = 2 };

/* Dequantizes n elements (a multiple of the block size) of one row. */
typedef void (*vq_ggml_to_float_fn)(const void *x, float *y, int64_t n);
/* Returns the dot product of one weight row w (n elements, the weight type) with one
 * activation row a (n elements in the kernel's act format). n is a multiple of the block size. */
typedef float (*vq_ggml_vec_dot_fn)(int64_t n, const void *w, const void *a);
/* Converts an fp32 activation row to an act format (n a multiple of its block size). */
typedef void (*vq_ggml_from_float_fn)(const float *x, void *y, int64_t n);

/* Dots of one weight row with 4 activation rows (a, a + a_stride, ...) into out[0..3]; the
 * weight blocks are decoded once for the 4 rows (batched prefill). Equal to vec_dot on each row
 * bit for bit, except Q4_K, whose four-row kernel chains its floats per 64-element chunk as
 * ggml's repacked gemm does (vq_vec_dot_q4_K_q8_K_ref). The matmuls use it for the tokens
 * 0 .. n - n % 4 - 1 of a batch and vec_dot for the rest, as ggml splits gemm and gemv. */
typedef void (*vq_ggml_vec_dot4_fn)(int64_t n, const void *w, const void *a, size_t a_stride,
                                    float *out);

/* Dots of 4 weight rows (w, w + w_stride, ...) with one activation row a into out[0..3] (one
 * token, decode). Equal to vec_dot on each row bit for bit. The matmuls use it for whole groups
 * of 4 rows of a tile and vec_dot for the rest. */
typedef void (*vq_ggml_vec_dot_r4_fn)(int64_t n, const void *w, size_t w_stride, const void *a,
                                      float *out);

/* Dots of 4 weight rows (w, w + w_stride, ...) with 4 activation rows (a, a + a_stride, ...):
 * out[t * ld_out + r] for row r and activation row t (batched prefill). Equal to vec_dot on
 * each pair bit for bit (Q4_K: to vec_dot4 on each row, its four-row order). */
typedef void (*vq_ggml_vec_dot_r4x4_fn)(int64_t n, const void *w, size_t w_stride, const void *a,
                                        size_t a_stride, float *out, size_t ld_out);

/* Dots of 16 weight rows (w, w + w_stride, ...) with n_tok activation rows (a, a + a_stride,
 * ...; 1 <= n_tok <= VQ_R16_MAX_TOK): out[t][r] for row r < 16 and activation row t, the weights
 * repacked once for all n_tok rows. Equal to vec_dot on each pair bit for bit, whatever n_tok,
 * so the matmuls use it for rowwise jobs too (only types whose gemm equals their gemv have
 * one). */
#define VQ_R16_MAX_TOK 32
typedef void (*vq_ggml_vec_dot_r16_fn)(int64_t n, const void *w, size_t w_stride, const void *a,
                                       size_t a_stride, int n_tok, float *const *out);
/* Weights repacked in groups of 16 rows (vq_ggml_repack_x16): rows 0..15 of one group
 * (w: the group's first byte) against n_tok activation rows (a, a + a_stride, ...; n_tok 1..8)
 * into out[t * ld_out + r] for r < 16. gemm 1: the four-row (gemm) float order of the type's
 * vec_dot4 for every token (n_tok a multiple of 4); 0: vec_dot's one-row (gemv) order. Equal
 * bit for bit to vec_dot4 / vec_dot on the rows before repacking. */
typedef void (*vq_ggml_vec_dot_x16_fn)(int64_t n, const void *w, const void *a, size_t a_stride,
                                       int n_tok, int gemm, float *out, size_t ld_out);

struct vq_ggml_kernels {
    uint32_t type;
    enum vq_ggml_act act;
    vq_ggml_to_float_fn to_float;
    vq_ggml_vec_dot_fn vec_dot;
    vq_ggml_vec_dot4_fn vec_dot4;         /* NULL: vec_dot per row */
    vq_ggml_vec_dot_r4_fn vec_dot_r4;     /* NULL: vec_dot per row */
    vq_ggml_vec_dot_r4x4_fn vec_dot_r4x4; /* NULL: vec_dot4 (or vec_dot) per row */
    /* vec_dot_r4x4's contract for 8 activation rows (t < 8), the weights unpacked once for
     * the 8; NULL: vec_dot_r4x4 twice */
    vq_ggml_vec_dot_r4x4_fn vec_dot_r4x8;
    /* tiles of 16 rows against VQ_MM_R16_MIN_TOK or more tokens; NULL: the kernels above */
    vq_ggml_vec_dot_r16_fn vec_dot_r16;
    /* non-NULL only in the tables of repacked weights (vq_ggml_kernels_x16): the products of
     * 16-row groups; to_float and the other kernels are then NULL */
    vq_ggml_vec_dot_x16_fn vec_dot_x16;
};

/* ---- repacked weights (16-row groups) -------------------------------------------------
 * Q4_K and Q6_K matrices whose row count is a multiple of 16 can be rewritten in place, group
 * by group, into an interleaved layout of the same size (VQ_X16_ROWS rows x row bytes per
 * group), whose kernels load 4 code bytes of each of the 16 rows in one 64-byte vector (as
 * llama.cpp repacks K-quants into 8-row blocks for its gemm). Per super-block i of a Q4_K
 * group (2304 bytes):
 *   bytes    0..31   d of rows 0..15 (fp16)
 *           32..63   dmin of rows 0..15
 *           64..255  the 12 scale bytes as three 64-byte parts: 32-bit word j of row r's scales
 *                    at 64 + 64 j + 4 r
 *          256..2303 codes: bytes 4k..4k+3 of the 32-byte chunk p of row r (qs[32p + 4k ..])
 *                    at 256 + 64 (8p + k) + 4 r
 * The float results are those of the rows before repacking (vec_dot_x16's contract). */
#define VQ_X16_ROWS 16
/* Kernels of type's repacked layout for isa (AUTO: the default), or NULL where the type or the
 * ISA has none (then keep the rows as they are). */
const struct vq_ggml_kernels *vq_ggml_kernels_x16(uint32_t type, enum vq_isa isa);
/* Rewrites rows (a multiple of VQ_X16_ROWS) x cols (a multiple of 256, at most
 * VQ_X16_MAX_COLS) of type in data into the repacked layout, in place (one group of scratch
 * allocated). Returns 0, or -1 (data untouched) for a type without a layout, shapes outside
 * those bounds or no memory for the scratch. */
#define VQ_X16_MAX_COLS 65536
int vq_ggml_repack_x16(uint32_t type, void *data, int64_t rows, int64_t cols);
/* Dequantizes row r (0..VQ_X16_ROWS-1) of a repacked group (group: its first byte; n
 * elements) into y: the type's _ref dequantization of the row before repacking. */
void vq_ggml_dequantize_row_x16(uint32_t type, const void *group, int r, float *y, int64_t n);
/* Scalar reference of vec_dot_x16 for Q4_K (normative: each row unpacked, then
 * vq_vec_dot4_q4_K_q8_K_ref / vq_vec_dot_q4_K_q8_K_ref). */
void vq_vec_dot_x16_q4_K_q8_K_ref(int64_t n, const void *w, const void *a, size_t a_stride,
                                  int n_tok, int gemm, float *out, size_t ld_out);
/* Q6_K's layout (repacked 16-row super-block of 3360 bytes): d of rows 0..15 (fp16) at 0;
 * scale j of row r at 32 + 16 j + r; then per word k (0..7) 384 bytes: for h = 0, 1 the ql
 * bytes 64 h + 4 k .. + 3 and 64 h + 32 + 4 k .. + 3 and the qh bytes 32 h + 4 k .. + 3 of
 * every row (row r at + 4 r of each 64-byte piece), the kernel's reading order. One float
 * order (vec_dot's) whatever gemm says. */
void vq_vec_dot_x16_q6_K_q8_K_ref(int64_t n, const void *w, const void *a, size_t a_stride,
                                  int n_tok, int gemm, float *out, size_t ld_out);
void vq_vec_dot_x16_q6_K_q8_K_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                                   int n_tok, int gemm, float *out, size_t ld_out);
void vq_vec_dot_x16_q4_K_q8_K_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                                   int n_tok, int gemm, float *out, size_t ld_out);
void vq_vec_dot_x16_q6_K_q8_K_avx512vnni(int64_t n, const void *w, const void *a, size_t a_stride,
                                         int n_tok, int gemm, float *out, size_t ld_out);
void vq_vec_dot_x16_q4_K_q8_K_avx512vnni(int64_t n, const void *w, const void *a, size_t a_stride,
                                         int n_tok, int gemm, float *out, size_t ld_out);

/* Kernels of a weight type for an ISA (VQ_ISA_AUTO resolves to the best available; types with
 * no variant for an ISA fall back to the next lower one). NULL if the type has no kernels. */
const struct vq_ggml_kernels *vq_ggml_kernels(uint32_t type, enum vq_isa isa);
/* Bytes of one activation row of n elements in format act. */
size_t vq_ggml_act_row_bytes(enum vq_ggml_act act, int64_t n);
/* Converts an fp32 activation row into act format (VQ_ACT_F32 copies). n must be a multiple
 * of 32 (Q8A) or 256 (Q8K). */
void vq_ggml_quantize_act(enum vq_ggml_act act, const float *x, void *y, int64_t n);
/* Same result, bit for bit, with the kernels of isa (AUTO: vq_ggml_isa_default(); unavailable:
 * scalar). Thread-safe. */
void vq_ggml_quantize_act_isa(enum vq_isa isa, enum vq_ggml_act act, const float *x, void *y,
                              int64_t n);
void vq_quantize_row_q8a_avx2(const float *x, void *y, int64_t n);
void vq_quantize_row_q8a_avx512(const float *x, void *y, int64_t n);
void vq_quantize_row_q8_K_avx512(const float *x, void *y, int64_t n);
void vq_quantize_row_q8_K_avx2(const float *x, void *y, int64_t n);
/* Returns the ISA the engine uses for VQ_ISA_AUTO: $VQ_ISA if set and available, else the best
 * of avx512 / avx2 / scalar this CPU and build support. Thread-safe. */
enum vq_isa vq_ggml_isa_default(void);
int vq_ggml_isa_available(enum vq_isa isa);

/* ---- llama.cpp (ggml CPU) numerics outside the matmuls --------------------------------
 * The engine's SwiGLU repeats ggml's CPU operation sequence (x86, AVX-512 build) so that its
 * logits equal llama.cpp's to the last bits (the fp16 attention does the same inside the
 * cache: src/cache/ggml_attn.h). Scalar reference (ggml_v_expf with fmaf) and AVX2/AVX-512
 * twins return bit-identical results. */
struct vq_ggml_nn_kernels {
    /* g[i] = silu(g[i]) * u[i] for one row of n values: ggml_vec_swiglu_f32 (16-wide ggml_v_silu,
     * tail x / (1 + expf(-x)) with libm expf). */
    void (*swiglu)(float *g, const float *u, int64_t n);
    /* g[i] = gelu(g[i]) * u[i] through ggml's fp16 GELU table (vq_ggml_geglu_ref's contract;
     * table from vq_ggml_gelu_table_init, VQ_GELU_TABLE_LEN entries). */
    void (*geglu)(const uint16_t *table, float *g, const float *u, int64_t n);
};
/* The kernels for isa (AUTO: vq_ggml_isa_default(); an unavailable ISA falls back to scalar).
 * Static table, thread-safe. */
const struct vq_ggml_nn_kernels *vq_ggml_nn_kernels(enum vq_isa isa);
/* Entries of a GELU table: one per fp16 bit pattern and one of padding (zero), which lets the
 * vector kernels read 32 bits at any entry. */
#define VQ_GELU_TABLE_LEN 65537
/* ggml's GELU table (GGML_GELU_FP16): table[h] = fp16(gelu(h2f(h))) for every fp16 bit
 * pattern h, gelu(x) = 0.5 x (1 + tanhf(sqrt(2/pi) x (1 + 0.044715 x^2))) with the one FMA gcc
 * forms in ggml's build; table[65536] = 0. table holds VQ_GELU_TABLE_LEN entries
 * (caller-owned). Thread-safe. */
void vq_ggml_gelu_table_init(uint16_t *table);
/* g[i] = gelu(g[i]) * u[i] for one row of n values as ggml_vec_geglu_f32 computes it: 0 for
 * g <= -10, g * u for g >= 10, else h2f(table[f2h(g)]) * u. Thread-safe. */
void vq_ggml_geglu_ref(const uint16_t *table, float *g, const float *u, int64_t n);
void vq_ggml_swiglu_ref(float *g, const float *u, int64_t n);
void vq_ggml_swiglu_avx2(float *g, const float *u, int64_t n);
void vq_ggml_swiglu_avx512(float *g, const float *u, int64_t n);
void vq_ggml_geglu_avx512(const uint16_t *table, float *g, const float *u, int64_t n);

/* Q4_K float chains over one super-block's exact integer parts per 64-element chunk p
 * (ints: isum[p] = sum of scale x (q . a), imin[p] = sum of min x block sum), in the orders of
 * ggml's repacked kernels (vq_vec_dot_q4_K_q8_K_ref): one fma per super-block for one row
 * (gemv), one per chunk for four rows (gemm). Shared by the scalar and AVX2 kernels. */
typedef void (*vq_q4_K_ints_fn)(const vq_block_q4_K *x, const vq_block_q8_K *y, int isum[4],
                                int imin[4]);
static inline float vq_q4_K_gemv_chain(vq_q4_K_ints_fn ints, int64_t n, const void *w,
                                       const void *a) {
    const vq_block_q4_K *x = (const vq_block_q4_K *)w;
    const vq_block_q8_K *y = (const vq_block_q8_K *)a;
    float acc = 0, accm = 0;
    for (int64_t i = 0; i < n / VQ_QK_K; i++) {
        int isum[4], imin[4];
        ints(&x[i], &y[i], isum, imin);
        acc = fmaf((float)(isum[0] + isum[1] + isum[2] + isum[3]), vq_ggml_h2f(x[i].d) * y[i].d,
                   acc);
        accm = fmaf((float)(imin[0] + imin[1] + imin[2] + imin[3]), vq_ggml_h2f(x[i].dmin) * y[i].d,
                    accm);
    }
    return acc - accm;
}
static inline void vq_q4_K_gemm_chain(vq_q4_K_ints_fn ints, int64_t n, const void *w, const void *a,
                                      size_t a_stride, float *out) {
    const vq_block_q4_K *x = (const vq_block_q4_K *)w;
    for (int j = 0; j < 4; j++) {
        const vq_block_q8_K *y = (const vq_block_q8_K *)(const void *)((const uint8_t *)a +
                                                                       (size_t)j * a_stride);
        float acc = 0, accm = 0;
        for (int64_t i = 0; i < n / VQ_QK_K; i++) {
            int isum[4], imin[4];
            ints(&x[i], &y[i], isum, imin);
            const float d = vq_ggml_h2f(x[i].d) * y[i].d, dm = vq_ggml_h2f(x[i].dmin) * y[i].d;
            for (int p = 0; p < 4; p++) {
                acc = fmaf((float)isum[p], d, acc);
                accm = fmaf((float)imin[p], dm, accm);
            }
        }
        out[j] = acc - accm;
    }
}

/* Scalar reference kernels (normative). */
void vq_dequantize_row_f32_ref(const void *x, float *y, int64_t n);
void vq_dequantize_row_f16_ref(const void *x, float *y, int64_t n);
void vq_dequantize_row_bf16_ref(const void *x, float *y, int64_t n);
void vq_dequantize_row_q4_0_ref(const void *x, float *y, int64_t n);
void vq_dequantize_row_q4_1_ref(const void *x, float *y, int64_t n);
void vq_dequantize_row_q5_0_ref(const void *x, float *y, int64_t n);
void vq_dequantize_row_q5_1_ref(const void *x, float *y, int64_t n);
void vq_dequantize_row_q8_0_ref(const void *x, float *y, int64_t n);
void vq_dequantize_row_q4_K_ref(const void *x, float *y, int64_t n);
void vq_dequantize_row_q5_K_ref(const void *x, float *y, int64_t n);
void vq_dequantize_row_q6_K_ref(const void *x, float *y, int64_t n);
void vq_quantize_row_q8a_ref(const float *x, void *y, int64_t n);
void vq_quantize_row_q8_K_ref(const float *x, void *y, int64_t n);
/* Reference quantizers of weight formats (tests and fixtures; docs/ALGORITHMS.md §9.1). */
void vq_quantize_row_q4_0_ref(const float *x, void *y, int64_t n);
void vq_quantize_row_q4_1_ref(const float *x, void *y, int64_t n);
void vq_quantize_row_q5_0_ref(const float *x, void *y, int64_t n);
void vq_quantize_row_q5_1_ref(const float *x, void *y, int64_t n);
void vq_quantize_row_q8_0_ref(const float *x, void *y, int64_t n);

float vq_vec_dot_f32_f32_ref(int64_t n, const void *w, const void *a);
float vq_vec_dot_f16_f32_ref(int64_t n, const void *w, const void *a);
float vq_vec_dot_bf16_f32_ref(int64_t n, const void *w, const void *a);
float vq_vec_dot_q4_0_q8a_ref(int64_t n, const void *w, const void *a);
float vq_vec_dot_q4_1_q8a_ref(int64_t n, const void *w, const void *a);
float vq_vec_dot_q5_0_q8a_ref(int64_t n, const void *w, const void *a);
float vq_vec_dot_q5_1_q8a_ref(int64_t n, const void *w, const void *a);
float vq_vec_dot_q8_0_q8a_ref(int64_t n, const void *w, const void *a);
float vq_vec_dot_q4_K_q8_K_ref(int64_t n, const void *w, const void *a);
void vq_vec_dot4_q4_K_q8_K_ref(int64_t n, const void *w, const void *a, size_t a_stride,
                               float *out);
float vq_vec_dot_q5_K_q8_K_ref(int64_t n, const void *w, const void *a);
float vq_vec_dot_q6_K_q8_K_ref(int64_t n, const void *w, const void *a);

/* ISA variants (src/engine/arch/x86/); only called after vq_ggml_isa_available(). */
float vq_vec_dot_f32_f32_avx2(int64_t n, const void *w, const void *a);
float vq_vec_dot_f16_f32_avx2(int64_t n, const void *w, const void *a);
float vq_vec_dot_bf16_f32_avx2(int64_t n, const void *w, const void *a);
float vq_vec_dot_q4_0_q8a_avx2(int64_t n, const void *w, const void *a);
float vq_vec_dot_q4_1_q8a_avx2(int64_t n, const void *w, const void *a);
float vq_vec_dot_q5_0_q8a_avx2(int64_t n, const void *w, const void *a);
float vq_vec_dot_q5_1_q8a_avx2(int64_t n, const void *w, const void *a);
float vq_vec_dot_q8_0_q8a_avx2(int64_t n, const void *w, const void *a);
float vq_vec_dot_q4_K_q8_K_avx2(int64_t n, const void *w, const void *a);
float vq_vec_dot_q6_K_q8_K_avx2(int64_t n, const void *w, const void *a);
void vq_vec_dot4_q4_1_q8a_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                               float *out);
void vq_vec_dot4_q8_0_q8a_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                               float *out);
void vq_vec_dot4_q4_0_q8a_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                               float *out);
void vq_vec_dot4_q5_0_q8a_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                               float *out);
void vq_vec_dot4_q4_K_q8_K_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                                float *out);
void vq_vec_dot4_q4_1_q8a_avx512(int64_t n, const void *w, const void *a, size_t a_stride,
                                 float *out);
float vq_vec_dot_f32_f32_avx512(int64_t n, const void *w, const void *a);
float vq_vec_dot_q4_1_q8a_avx512(int64_t n, const void *w, const void *a);
/* AVX-512 VNNI (callers check vq_cpu_avx512vnni()) */
void vq_vec_dotr4_q4_1_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                      float *out);
void vq_vec_dotr4x8_q4_1_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                        size_t a_stride, float *out, size_t ld_out);
#define VQ_GGML_VNNI_S8(T) \
    void vq_vec_dotr4_##T##_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, \
                                           const void *a, float *out); \
    void vq_vec_dotr4x4_##T##_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, \
                                             const void *a, size_t a_stride, float *out, \
                                             size_t ld_out); \
    void vq_vec_dotr4x8_##T##_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, \
                                             const void *a, size_t a_stride, float *out, \
                                             size_t ld_out);
VQ_GGML_VNNI_S8(q4_0)
VQ_GGML_VNNI_S8(q5_0)
VQ_GGML_VNNI_S8(q8_0)
void vq_vec_dotr4x4_q4_1_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                        size_t a_stride, float *out, size_t ld_out);
void vq_vec_dotr16_q4_1_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                       size_t a_stride, int n_tok, float *const *out);
void vq_vec_dotr16_q4_0_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                       size_t a_stride, int n_tok, float *const *out);
void vq_vec_dotr16_q8_0_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                       size_t a_stride, int n_tok, float *const *out);
/* K-quants x Q8_K (ggml_kquant_avx512vnni.c): r4x4 Q4_K in its four-row (gemm) order, r4
 * (decode) in vec_dot's one-row order; Q6_K in vec_dot's */
void vq_vec_dotr4_q4_K_q8_K_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                       float *out);
void vq_vec_dotr4_q6_K_q8_K_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                       float *out);
void vq_vec_dotr4x4_q4_K_q8_K_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                         size_t a_stride, float *out, size_t ld_out);
void vq_vec_dotr4x4_q6_K_q8_K_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                         size_t a_stride, float *out, size_t ld_out);


/* Matrix product out[t * ld_out + r] = dot(W row r, act row t) for r < n_rows, t < n_tok.
 * w: n_rows rows of n_cols elements of k->type (row stride w_row_bytes); act: n_tok rows already
 * in k->act format (stride act_stride bytes). Rows are split across n_threads OpenMP threads
 * (0 = default) in tiles of 16 rows so that a tile stays in L1 while every token passes over it.
 * No allocation; safe to call concurrently on disjoint outputs. */
void vq_ggml_matmul(const struct vq_ggml_kernels *k, const void *w, size_t w_row_bytes,
                    int64_t n_rows, int64_t n_cols, const void *act, size_t act_stride,
                    int64_t n_tok, float *out, int64_t ld_out, int n_threads);

/* One product job of vq_ggml_matmul_multi. */
struct vq_ggml_mm_job {
    const struct vq_ggml_kernels *k;
    const void *w;
    size_t w_row_bytes;
    int64_t n_rows, n_cols;
    const void *act; /* n_tok rows in k->act format */
    size_t act_stride;
    float *out; /* out[t * ld_out + r] */
    int64_t ld_out;
    /* 1: every token through the one-token (gemv) kernels, so that each token's result equals
     * a one-token product bit for bit whatever the batch (vq_ctx_eval_batch: decode rows of
     * several sequences); 0 (positional initializers): gemm for whole groups of 4 tokens */
    int rowwise;
    /* NULL: token t's outputs at out + t * ld_out; else at out_rows[t] (rowwise must be 1: the
     * rows of several sequences' logits, each in its own buffer) */
    float *const *out_rows;
};

/* Runs several products over the same n_tok tokens in one OpenMP parallel loop (one fork/join
 * for e.g. the q, k and v projections), tiles of all jobs interleaved across threads. */
void vq_ggml_matmul_multi(const struct vq_ggml_mm_job *jobs, int n_jobs, int64_t n_tok,
                          int n_threads);

#endif
