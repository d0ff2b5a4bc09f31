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
 * 0 .. 2^bits - 1, higher bits ignored by pack). row: vq_kivi_row_bytes(d, bits) bytes, fully
 * written by pack. Pure, thread-safe. */
void vq_kivi_pack_row(const uint8_t *codes, int d, int bits, uint8_t *row);
void vq_kivi_unpack_row(const uint8_t *row, int d, int bits, uint8_t *codes);

/* out[t] = bias + sum_c qp[c] * code_{t,c} for n consecutive code rows. */
typedef void (*vq_kivi_dot_rows_fn)(const float *qp, const uint8_t *rows, int d, int bits,
                                    int64_t n, float bias, float *out);
/* Key blocks with width classes (kivi.c, channel_bits): class k has nch[k] channels (a multiple
 * of 8) at bits[k] bits, its n code rows (nch[k]*bits[k]/8 bytes each) start at rows + off[k],
 * and its scale-folded query entries follow those of the classes before it in qp.
 * out[t] = bias + sum over classes of sum_c qp[c] * code_{t,c}. */
typedef void (*vq_kivi_dot_classes_fn)(const float *qp, const uint8_t *rows, int ncls,
                                       const int *bits, const int *nch, const size_t *off,
                                       int64_t n, float bias, float *out);
/* dot_classes for nq (1..4) queries at once: out[j][t] = bias[j] + sum over classes of
 * sum_c qp[j][c] * code_{t,c}; every score bit-identical to dot_classes' (the same kernel
 * family's) for that query alone; the codes are unpacked once for all queries. */
typedef void (*vq_kivi_dot_classes_multi_fn)(const float *const *qp, int nq, const uint8_t *rows,
                                             int ncls, const int *bits, const int *nch,
                                             const size_t *off, int64_t n, const float *bias,
                                             float *const *out);
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
void vq_kivi_dot_rows_ref(const float *qp, const uint8_t *rows, int d, int bits, int64_t n,
                          float bias, float *out);
void vq_kivi_acc_row_ref(const uint8_t *row, int d, int bits, int g, const float *a, float *acc);
/* Reference: the first class's vq_kivi_dot_rows_ref (with the bias), then each further class's
 * partial sums added in class order. */
void vq_kivi_dot_classes_ref(const float *qp, const uint8_t *rows, int ncls, const int *bits,
                             const int *nch, const size_t *off, int64_t n, float bias, float *out);
#ifdef VQ_HAVE_X86
float vq_kivi_fold_avx2(const float *q, const uint8_t *s16, const uint8_t *z16, int d, float *qp);
float vq_kivi_fold_avx512(const float *q, const uint8_t *s16, const uint8_t *z16, int d, float *qp);
void vq_kivi_acc_vals_avx2(const uint8_t *blocks, size_t block_bytes, int64_t n, const float *w,
                           int d, int bits, int g, float *acc);
void vq_kivi_acc_vals_avx512(const uint8_t *blocks, size_t block_bytes, int64_t n, const float *w,
                             int d, int bits, int g, float *acc);
void vq_kivi_dot_rows_avx2(const float *qp, const uint8_t *rows, int d, int bits, int64_t n,
                           float bias, float *out);
void vq_kivi_acc_row_avx2(const uint8_t *row, int d, int bits, int g, const float *a, float *acc);
/* One accumulator per row over every class (8 rows at a time, one horizontal sum per row);
 * the sums are ordered differently from the reference (equal to float rounding). */
void vq_kivi_dot_classes_avx2(const float *qp, const uint8_t *rows, int ncls, const int *bits,
                              const int *nch, const size_t *off, int64_t n, float bias, float *out);
/* Up to 4 queries over the same rows (the GQA heads of a decode step): each query's scores
 * bit-identical to vq_kivi_dot_classes_avx2 for it alone. */
void vq_kivi_dot_classes_multi_avx2(const float *const *qp, int nq, const uint8_t *rows, int ncls,
                                    const int *bits, const int *nch, const size_t *off, int64_t n,
                                    const float *bias, float *const *out);
void vq_kivi_dot_rows_avx512(const float *qp, const uint8_t *rows, int d, int bits, int64_t n,
                             float bias, float *out);
void vq_kivi_acc_row_avx512(const uint8_t *row, int d, int bits, int g, const float *a, float *acc);
void vq_kivi_dot_classes_avx512(const float *qp, const uint8_t *rows, int ncls, const int *bits,
                                const int *nch, const size_t *off, int64_t n, float bias,
                                float *out);
/* The AVX-512 kernels built with AVX512_VBMI (callers check vq_cpu_avx512vbmi()); same
 * results as the _avx512 ones. */
float vq_kivi_fold_avx512vbmi(const float *q, const uint8_t *s16, const uint8_t *z16, int d,
                              float *qp);
void vq_kivi_acc_vals_avx512vbmi(const uint8_t *blocks, size_t block_bytes, int64_t n,
                                 const float *w, int d, int bits, int g, float *acc);
void vq_kivi_dot_rows_avx512vbmi(const float *qp, const uint8_t *rows, int d, int bits, int64_t n,
                                 float bias, float *out);
void vq_kivi_acc_row_avx512vbmi(const uint8_t *row, int d, int bits, int g, const float *a,
                                float *acc);
void vq_kivi_dot_classes_avx512vbmi(const float *qp, const uint8_t *rows, int ncls, const int *bits,
                                    const int *nch, const size_t *off, int64_t n, float bias,
                                    float *out);
void vq_kivi_dot_classes_multi_avx512(const float *const *qp, int nq, const uint8_t *rows, int ncls,
                                      const int *bits, const int *nch, const size_t *off, int64_t n,
                                      const float *bias, float *const *out);
void vq_kivi_dot_classes_multi_avx512vbmi(const float *const *qp, int nq, const uint8_t *rows,
                                          int ncls, const int *bits, const int *nch,
                                          const size_t *off, int64_t n, const float *bias,
                                          float *const *out);
#endif

#endif
