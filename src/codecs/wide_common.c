/* wide_common.c — layout helpers, scalar reference kernels and shared codec slots of the
 * codecs with 5..8-bit codes in the rotated domain (turboquant_mse b = 5..8, int8); contract
 * in wide_kernels.h. */
#include <string.h>

#include "codecs/codec_impl.h"
#include "codecs/turboquant_kernels.h"
#include "codecs/wide_kernels.h"

void vq_wk_init(vq_wk *k, int d, int bits, int lin, const float *levels) {
    VQ_ASSERT(d >= 8 && d <= 1024 && d % 8 == 0 && bits >= 5 && bits <= 8);
    VQ_ASSERT(!lin || bits == 8);
    memset(k, 0, sizeof(*k));
    k->d = d;
    k->dpad = (d + 15) & ~15;
    k->bits = bits;
    k->lin = lin;
    k->rec = 2 + d * bits / 8;
    if (lin) return;
    const int L = 1 << bits;
    k->sym = 1;
    for (int i = 0; i < L; i++) {
        k->lut[i] = levels[i];
        uint32_t a, b;
        memcpy(&a, &levels[i], 4);
        memcpy(&b, &levels[L - 1 - i], 4);
        if (a != (b ^ 0x80000000u)) k->sym = 0;
    }
}

int vq_wk_vbmi_fits(const vq_wk *k) {
    return !k->lin && (k->bits == 6 || k->bits == 7 || (k->bits == 8 && k->sym));
}

void vq_wk_select(const vq_wk *k, enum vq_isa isa, vq_wk_score_fn *score, vq_wk_acc_fn *acc) {
    *score = vq_wk_score_ref;
    *acc = vq_wk_accumulate_ref;
#ifdef VQ_HAVE_X86
    if (isa == VQ_ISA_AVX512 && vq_wk_vbmi_fits(k) && vq_cpu_avx512vbmi()) {
        *score = vq_wk_score_avx512vbmi;
        *acc = vq_wk_accumulate_avx512vbmi;
    } else if (isa == VQ_ISA_AVX512) {
        *score = vq_wk_score_avx512;
        *acc = vq_wk_accumulate_avx512;
    } else if (isa == VQ_ISA_AVX2) {
        *score = vq_wk_score_avx2;
        *acc = vq_wk_accumulate_avx2;
    }
#else
    (void)k;
    (void)isa;
#endif
}

int vq_wk_code(const vq_wk *k, const uint8_t *rec, int j) {
    const uint8_t *p = rec + 2;
    if (k->bits == 8) return k->lin ? (int)(int8_t)p[j] : (int)p[j];
    /* a code of 5..7 bits spans at most two bytes; the second exists whenever it is needed */
    const int bit = j * k->bits, sh = bit & 7;
    unsigned v = p[bit >> 3];
    if (sh + k->bits > 8) v |= (unsigned)p[(bit >> 3) + 1] << 8;
    return (int)((v >> sh) & ((1u << k->bits) - 1u));
}

void vq_wk_put_codes(const vq_wk *k, const uint8_t *codes, uint8_t *rec) {
    vq_pack(codes, k->d, k->bits, rec + 2);
}

void vq_wk_score_ref(const vq_wk *k, const float *qs, const uint8_t *codes, int64_t n,
                     float *scores) {
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *rec = codes + t * k->rec;
        float sum = 0.0f;
        for (int j = 0; j < k->d; j++) sum += qs[j] * vq_wk_level(k, rec, j);
        scores[t] = vq_tq_sf16(rec) * sum;
    }
}

void vq_wk_accumulate_ref(const vq_wk *k, const uint8_t *codes, int64_t n, const float *w,
                          float *acc) {
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *rec = codes + t * k->rec;
        const float ws = w[t] * vq_tq_sf16(rec);
        for (int j = 0; j < k->d; j++) acc[j] += ws * vq_wk_level(k, rec, j);
    }
}

/* ---- codec slots ---- */

void vq_wk_codec_decode(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x) {
    const struct vq_wk_base *m = (const struct vq_wk_base *)c->impl;
    const int d = c->p.head_dim;
    float y[1024];
    for (int64_t t = 0; t < n_blocks; t++) {
        const uint8_t *r = src + t * (int64_t)c->block_bytes;
        const float s = vq_tq_sf16(r);
        for (int j = 0; j < d; j++) y[j] = s * vq_wk_level(&m->k, r, j);
        vq_rht_inverse(&m->rht, y, x + t * d);
    }
}

void vq_wk_codec_prepare_query(const struct vq_codec *c, const float *q, void *qs) {
    const struct vq_wk_base *m = (const struct vq_wk_base *)c->impl;
    float *o = (float *)qs;
    vq_rht_forward(&m->rht, q, o);
    for (int j = m->k.d; j < m->k.dpad; j++) o[j] = 0.0f;
}

void vq_wk_codec_score(const struct vq_codec *c, const void *qs, const uint8_t *codes,
                       int64_t n_tokens, float *scores) {
    const struct vq_wk_base *m = (const struct vq_wk_base *)c->impl;
    m->score(&m->k, (const float *)qs, codes, n_tokens, scores);
}

void vq_wk_codec_accumulate(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                            const float *w, float *acc) {
    const struct vq_wk_base *m = (const struct vq_wk_base *)c->impl;
    m->acc(&m->k, codes, n_tokens, w, acc);
}

#ifdef VQ_HAVE_X86
static void wk_codec_score_multi(const struct vq_codec *c, const void *const *qs, int nq,
                                 const uint8_t *codes, int64_t n_tokens, float *const *scores) {
    const struct vq_wk_base *m = (const struct vq_wk_base *)c->impl;
    vq_wk_score_multi_avx512(&m->k, (const float *const *)qs, nq, codes, n_tokens, scores);
}

static void wk_codec_accumulate_multi(const struct vq_codec *c, const uint8_t *codes,
                                      int64_t n_tokens, const float *const *w, int nq,
                                      float *const *acc) {
    const struct vq_wk_base *m = (const struct vq_wk_base *)c->impl;
    vq_wk_accumulate_multi_avx512(&m->k, codes, n_tokens, w, nq, acc);
}

static void wk_codec_score_multi_avx2(const struct vq_codec *c, const void *const *qs, int nq,
                                      const uint8_t *codes, int64_t n_tokens,
                                      float *const *scores) {
    const struct vq_wk_base *m = (const struct vq_wk_base *)c->impl;
    vq_wk_score_multi_avx2(&m->k, (const float *const *)qs, nq, codes, n_tokens, scores);
}

static void wk_codec_accumulate_multi_avx2(const struct vq_codec *c, const uint8_t *codes,
                                           int64_t n_tokens, const float *const *w, int nq,
                                           float *const *acc) {
    const struct vq_wk_base *m = (const struct vq_wk_base *)c->impl;
    vq_wk_accumulate_multi_avx2(&m->k, codes, n_tokens, w, nq, acc);
}
#endif

void vq_wk_codec_finish(const struct vq_codec *c, const float *acc, float *out) {
    const struct vq_wk_base *m = (const struct vq_wk_base *)c->impl;
    vq_rht_inverse(&m->rht, acc, out);
}

void vq_wk_codec_setup(struct vq_codec *c) {
    struct vq_wk_base *m = (struct vq_wk_base *)c->impl;
    vq_wk_select(&m->k, c->isa, &m->score, &m->acc);
    c->block_tokens = 1;
    c->block_bytes = (size_t)m->k.rec;
    c->query_bytes = sizeof(float) * (size_t)m->k.dpad;
    c->acc_floats = (size_t)m->k.dpad;
    c->decode = vq_wk_codec_decode;
    c->prepare_query = vq_wk_codec_prepare_query;
    c->score = vq_wk_codec_score;
    c->accumulate = vq_wk_codec_accumulate;
    c->finish = vq_wk_codec_finish;
#ifdef VQ_HAVE_X86
    /* the AVX-512 (non-VBMI) kernels have multi-query twins: one lookup for every query */
    if (m->acc == vq_wk_accumulate_avx512) c->accumulate_multi = wk_codec_accumulate_multi;
    if (m->score == vq_wk_score_avx512) c->score_multi = wk_codec_score_multi;
    /* AVX2: groups of 3 queries inside */
    if (m->acc == vq_wk_accumulate_avx2) c->accumulate_multi = wk_codec_accumulate_multi_avx2;
    if (m->score == vq_wk_score_avx2) c->score_multi = wk_codec_score_multi_avx2;
    c->multi_max = 6; /* a GQA group of 6 query heads (Qwen2.5) in one pass */
#endif
}

void vq_wk_codec_destroy(struct vq_codec *c) {
    struct vq_wk_base *m = (struct vq_wk_base *)c->impl;
    if (!m) return;
    vq_rht_free(&m->rht);
    vq_free(m);
    c->impl = NULL;
}
