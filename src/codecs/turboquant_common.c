/* turboquant_common.c — layout helpers and scalar reference kernels shared by the
 * turboquant_mse and turboquant_rvq codecs (contract in turboquant_kernels.h). */
#include <string.h>

#include "codecs/turboquant_kernels.h"

/* Fills the kernel description (see turboquant_kernels.h). */
void vq_tq_kern_init(vq_tq_kern *k, int d, int bits_a, int bits_b, int off_a, int off_b, int rec,
                     const float *levels) {
    VQ_ASSERT(d % 8 == 0 && (bits_a == 1 || bits_a == 2 || bits_a == 4));
    VQ_ASSERT(bits_b >= 0 && bits_b <= 2 && bits_a + bits_b <= 4);
    memset(k, 0, sizeof(*k));
    k->d = d;
    k->n_chunks = (d + VQ_TQ_CHUNK - 1) / VQ_TQ_CHUNK;
    k->dpad = k->n_chunks * VQ_TQ_CHUNK;
    k->bits_a = bits_a;
    k->bits_b = bits_b;
    k->off_a = off_a;
    k->off_b = off_b;
    k->rec = rec;
    int L = 1 << (bits_a + bits_b);
    for (int i = 0; i < 16; i++) k->lut[i] = levels[i & (L - 1)];
}

/* Chooses score/accumulate kernels for isa; unavailable variants use the reference. */
void vq_tq_kern_select(enum vq_isa isa, vq_tq_score_fn *score, vq_tq_acc_fn *acc) {
    *score = vq_tq_score_ref;
    *acc = vq_tq_accumulate_ref;
#ifdef VQ_HAVE_X86
    if (isa == VQ_ISA_AVX512) {
        *score = vq_tq_score_avx512;
        *acc = vq_tq_accumulate_avx512;
    } else if (isa == VQ_ISA_AVX2) {
        *score = vq_tq_score_avx2;
        *acc = vq_tq_accumulate_avx2;
    }
#else
    (void)isa;
#endif
}

/* qs = chunk-interleaved RHT(q), zero padding. */
void vq_tq_prepare_query(const vq_tq_kern *k, const vq_rht *r, const float *q, float *qs) {
    float y[4096];
    vq_rht_forward(r, q, y);
    for (int i = k->d; i < k->dpad; i++) qs[vq_tq_pos(i)] = 0.0f;
    for (int j = 0; j < k->d; j++) qs[vq_tq_pos(j)] = y[j];
}

/* out = RHT^-1(acc in natural order). */
void vq_tq_finish(const vq_tq_kern *k, const vq_rht *r, const float *acc, float *out) {
    float y[4096];
    for (int j = 0; j < k->d; j++) y[j] = acc[vq_tq_pos(j)];
    vq_rht_inverse(r, y, out);
}

static inline unsigned get_bits(const uint8_t *plane, int j, int bits) {
    /* bits in {1, 2, 4}: a code never straddles a byte */
    int bit = j * bits;
    return (plane[bit >> 3] >> (bit & 7)) & ((1u << bits) - 1u);
}

/* Combined level index of coordinate j: a | b << bits_a. */
int vq_tq_code(const vq_tq_kern *k, const uint8_t *rec, int j) {
    unsigned a = get_bits(rec + k->off_a, j, k->bits_a);
    unsigned b = k->bits_b ? get_bits(rec + k->off_b, j, k->bits_b) : 0u;
    return (int)(a | b << k->bits_a);
}

/* Scalar reference score (the normative definition). */
void vq_tq_score_ref(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                     float *scores) {
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *rec = codes + t * k->rec;
        float s = vq_tq_sf16(rec), sum = 0.0f;
        for (int j = 0; j < k->d; j++) sum += qs[vq_tq_pos(j)] * k->lut[vq_tq_code(k, rec, j)];
        scores[t] = s * sum;
    }
}

/* Scalar reference accumulate (the normative definition). */
void vq_tq_accumulate_ref(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *w,
                          float *acc) {
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *rec = codes + t * k->rec;
        float ws = w[t] * vq_tq_sf16(rec);
        for (int j = 0; j < k->d; j++) acc[vq_tq_pos(j)] += ws * k->lut[vq_tq_code(k, rec, j)];
    }
}
