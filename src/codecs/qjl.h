/*
 * qjl.h — internal pieces shared by the qjl and turboquant_prod codecs: the Hadamard sign
 * sketch S (m x d) and the per-token row kernels (sign dot, small-codebook table dot) with
 * their scalar references and x86 variants. Not part of the public API.
 *
 * Sketch definition (normative; docs/FORMAT.md depends on it):
 *   S = [S_0; S_1; ...; S_{B-1}] truncated to its first m rows, B = ceil(m / d),
 *   S_b = sqrt(d) * R_b where R_b is the orthogonal vq_rht of size d seeded with
 *   vq_sketch_block_seed(seed, b). Rows have norm sqrt(d); rows of one block are orthogonal,
 *   blocks have independent random signs.
 * Sign bits: bit i of a sign stream is bit (i % 8) of byte i / 8 (LSB first); 1 means
 * z_i = +1 ((S x)_i > 0), 0 means z_i = -1 ((S x)_i <= 0).
 */
#ifndef VQ_CODECS_QJL_H
#define VQ_CODECS_QJL_H

#include <math.h>

#include "codecs/codec_impl.h"

#define VQ_QJL_MAX_M 8192    /* largest accepted jl_dim */
#define VQ_SKETCH_MAX_D 1024 /* largest head_dim (stack scratch size) */

typedef struct vq_sketch {
    int d;        /* input dimension */
    int m;        /* output rows (multiple of 8) */
    int n_blocks; /* ceil(m / d) */
    float scale;  /* sqrt(d) */
    vq_rht *blk;  /* (n_blocks) orthogonal rotations, owned */
} vq_sketch;

/* Seed of sketch block b derived from the codec seed (splitmix64 of seed ^ tag, b-th draw). */
uint64_t vq_sketch_block_seed(uint64_t seed, int b);
/* Builds the sketch for dimension d (a valid vq_rht size) and m rows (1..VQ_QJL_MAX_M).
 * Returns NO_MEMORY / the vq_rht_init status on failure (sk is then freed). */
vq_status vq_sketch_init(vq_sketch *sk, int d, int m, uint64_t seed);
/* Releases the sketch; safe on a zeroed or already freed struct. */
void vq_sketch_free(vq_sketch *sk);
/* out (m floats) = S x (x: d floats). Thread-safe (sketch is read-only). */
void vq_sketch_apply(const vq_sketch *sk, const float *x, float *out);
/* bits (m/8 bytes) = sign bits of S x. */
void vq_sketch_signs(const vq_sketch *sk, const float *x, uint8_t *bits);
/* out (d floats) = S^T v (v: m floats). */
void vq_sketch_transpose(const vq_sketch *sk, const float *v, float *out);

/* ---- row kernels -------------------------------------------------------------------- */
/* out[t] = sum_i a[i] * z_i for the sign stream at src + t * stride (m bits, m % 8 == 0).
 * sum_a = sum_i a[i] (lets SIMD versions compute 2 * sum_{z=+1} a - sum_a). */
typedef void (*vq_signdot_rows_fn)(const float *a, float sum_a, int m, const uint8_t *src,
                                   size_t stride, int64_t n, float *out);
/* out[t] = sum_j q[j] * cb[code_j] for the LSB-first `bits`-bit code stream of d codes at
 * src + t * stride (bits 1..3, d % 8 == 0, cb has 2^bits entries). */
typedef void (*vq_lutdot_rows_fn)(const float *q, const float *cb, int bits, int d,
                                  const uint8_t *src, size_t stride, int64_t n, float *out);

/* acc[i] += z_i ? g : -g for the m sign bits at z (m % 8 == 0). */
typedef void (*vq_signacc_fn)(const uint8_t *z, int m, float g, float *acc);
/* acc[j] += wn * cb[code_j] for the LSB-first `bits`-bit stream of d codes (bits 1..3,
 * d % 8 == 0). */
typedef void (*vq_lutacc_fn)(const uint8_t *codes, const float *cb, int bits, int d, float wn,
                             float *acc);

void vq_signdot_rows_ref(const float *a, float sum_a, int m, const uint8_t *src, size_t stride,
                         int64_t n, float *out);
void vq_lutdot_rows_ref(const float *q, const float *cb, int bits, int d, const uint8_t *src,
                        size_t stride, int64_t n, float *out);
void vq_signacc_ref(const uint8_t *z, int m, float g, float *acc);
void vq_lutacc_ref(const uint8_t *codes, const float *cb, int bits, int d, float wn, float *acc);
#if defined(VQ_HAVE_X86)
void vq_signacc_avx2(const uint8_t *z, int m, float g, float *acc);
void vq_signacc_avx512(const uint8_t *z, int m, float g, float *acc);
void vq_lutacc_avx2(const uint8_t *codes, const float *cb, int bits, int d, float wn, float *acc);
void vq_lutacc_avx512(const uint8_t *codes, const float *cb, int bits, int d, float wn, float *acc);
void vq_signdot_rows_avx2(const float *a, float sum_a, int m, const uint8_t *src, size_t stride,
                          int64_t n, float *out);
void vq_signdot_rows_avx512(const float *a, float sum_a, int m, const uint8_t *src, size_t stride,
                            int64_t n, float *out);
void vq_lutdot_rows_avx2(const float *q, const float *cb, int bits, int d, const uint8_t *src,
                         size_t stride, int64_t n, float *out);
void vq_lutdot_rows_avx512(const float *q, const float *cb, int bits, int d, const uint8_t *src,
                           size_t stride, int64_t n, float *out);
#endif

/* The record and prepared-query geometry of turboquant_prod and qjl, for their multi-query
 * kernels. turboquant_prod: record [n sf16][gamma sf16][d bm-bit MSE codes][m sign bits],
 * prepared query q_r (q_floats), a = S q_r (a_floats), sum(a); accumulator [d MSE][m sketch].
 * qjl: the same with d = bm = q_floats = 0 and no gamma (1): record [n sf16][m sign bits]. */
typedef struct vq_prod_kern {
    int d, m, bm;           /* head dim (0: no MSE part), sketch rows, MSE bits (0..3) */
    int code_bytes, rec;    /* d bm / 8; record bytes */
    int sign_off, gamma;    /* byte offset of the signs; 1: gamma sf16 at byte 2, 0: gamma 1 */
    int q_floats, a_floats; /* pad16(d) (0 without MSE part), pad16(m) */
    float k;                /* sqrt(pi/2) / m */
    float cb[16];           /* 2^bm centroids at unit-vector scale, rest 0 */
} vq_prod_kern;
/* The kernels' signatures (below: the x86 ones). */
typedef void (*vq_prod_score_multi_fn)(const vq_prod_kern *pk, const float *const *qs, int nq,
                                       const uint8_t *codes, int64_t n, float *const *scores);
typedef void (*vq_prod_acc_multi_fn)(const vq_prod_kern *pk, const uint8_t *codes, int64_t n,
                                     const float *const *w, int nq, float *const *acc);
#if defined(VQ_HAVE_X86)
/* nq (1..4) prepared queries qs[j] over the same n records: scores[j][t] = n_t (<q_r, y^_t> +
 * k gamma_t (2 sum_{z=1} a - sum a)), each query's result independent of nq and of the other
 * queries (the reference's value within float rounding; qjl: n_t k <a, z_t>). AVX-512, BMI2. */
void vq_prod_score_multi_avx512(const vq_prod_kern *pk, const float *const *qs, int nq,
                                const uint8_t *codes, int64_t n, float *const *scores);
/* nq (1..4) weight vectors over the same records: acc[j][0, d) += w n y^, acc[j][d, d + m) +=
 * w n k gamma z, as prod_accumulate / qjl_accumulate (within float rounding), each query
 * independent of nq. */
void vq_prod_acc_multi_avx512(const vq_prod_kern *pk, const uint8_t *codes, int64_t n,
                              const float *const *w, int nq, float *const *acc);
/* The same two kernels with AVX512_VBMI (the same results; CPUs with vq_cpu_avx512vbmi). */
void vq_prod_score_multi_avx512vbmi(const vq_prod_kern *pk, const float *const *qs, int nq,
                                    const uint8_t *codes, int64_t n, float *const *scores);
void vq_prod_acc_multi_avx512vbmi(const vq_prod_kern *pk, const uint8_t *codes, int64_t n,
                                  const float *const *w, int nq, float *const *acc);
#endif

/* The multi-query state turboquant_prod and qjl share: the first member of both codecs' impl
 * structs, so one pair of codec slots serves both. msc / mac: the kernels (AVX-512, or the
 * VBMI build for prod), NULL where none applies (then the row kernels run). */
struct vq_prod_multi {
    vq_prod_kern pk;
    vq_prod_score_multi_fn msc;
    vq_prod_acc_multi_fn mac;
};
/* Codec slots score_multi / accumulate_multi over c->impl, which must start with a struct
 * vq_prod_multi whose kernels are set; nq = 1 gives score / accumulate. Thread-safe. */
void vq_prod_codec_score_multi(const struct vq_codec *c, const void *const *qs, int nq,
                               const uint8_t *codes, int64_t n_tokens, float *const *scores);
void vq_prod_codec_accumulate_multi(const struct vq_codec *c, const uint8_t *codes,
                                    int64_t n_tokens, const float *const *w, int nq,
                                    float *const *acc);

/* Kernel choice for a resolved ISA (scalar fallback when x86 kernels are not built). */
vq_signdot_rows_fn vq_signdot_rows_pick(enum vq_isa isa);
vq_lutdot_rows_fn vq_lutdot_rows_pick(enum vq_isa isa);
vq_signacc_fn vq_signacc_pick(enum vq_isa isa);
vq_lutacc_fn vq_lutacc_pick(enum vq_isa isa);

/* Sum of squares of x (n % 8 == 0) in double with 8 independent partial sums (pipelines, and
 * cannot overflow for finite floats); returns -1 if any element is NaN or Inf. */
static inline double vq_sumsq_finite(const float *x, int n) {
    double p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int bad = 0;
    for (int j = 0; j < n; j += 8)
        for (int k = 0; k < 8; k++) {
            const float v = x[j + k];
            bad |= !isfinite(v);
            p[k] += (double)v * (double)v;
        }
    if (bad) return -1.0;
    return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

/* Little-endian 16-bit load/store of stored sf16 scalars. */
static inline uint16_t vq_rd_le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline void vq_wr_le16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}

#endif
