/* test_tq_util.h — helpers shared by the turboquant codec tests (test_tq_*.c). */
#ifndef VQ_TEST_TQ_UTIL_H
#define VQ_TEST_TQ_UTIL_H
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "test.h"
#include "codecs/codec_impl.h"
#include "codecs/turboquant_kernels.h"

extern const struct vq_codec_i vq_codec_turboquant_mse;
extern const struct vq_codec_i vq_codec_turboquant_rvq;

/* Creates a codec through the public API when the method is registered, else directly
 * through its vtable (same init contract as vq_codec_create). NULL + *st on failure. */
static inline vq_codec *tq_create(enum vq_method m, int d, int bits, enum vq_isa isa, int unbiased,
                                  uint64_t seed, vq_status *st) {
    struct vq_codec_params p = vq_codec_params_default();
    p.method = m;
    p.head_dim = d;
    p.bits = bits;
    p.isa = isa;
    p.unbiased_scale = unbiased;
    p.seed = seed;
    if (vq_codec_iface(m)) return vq_codec_create(&p, st);
    const struct vq_codec_i *it = m == VQ_METHOD_TURBOQUANT_MSE ? &vq_codec_turboquant_mse
                                                                : &vq_codec_turboquant_rvq;
    struct vq_codec *c = (struct vq_codec *)vq_alloc(sizeof(*c));
    c->p = p;
    c->iface = it;
    c->isa = vq_isa_resolve(isa);
    c->p.isa = c->isa;
    *st = it->init(c);
    if (*st != VQ_STATUS_OK) {
        vq_free(c);
        return NULL;
    }
    return c;
}

static inline uint64_t tq_seed(void) {
    const char *e = getenv("VQ_TEST_SEED");
    uint64_t s = e ? (uint64_t)strtoull(e, NULL, 10) : (uint64_t)time(NULL);
    fprintf(stderr, "seed %llu (set VQ_TEST_SEED to replay)\n", (unsigned long long)s);
    return s;
}

static inline void tq_unit(vq_rng *g, float *x, int d) {
    double n = 0;
    for (int i = 0; i < d; i++) {
        x[i] = (float)vq_rng_normal(g);
        n += (double)x[i] * x[i];
    }
    float inv = (float)(1.0 / sqrt(n));
    for (int i = 0; i < d; i++) x[i] *= inv;
}

static inline double tq_cos(const float *a, const float *b, int d) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < d; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0.0;
}

/* Mean reconstruction cosine over n fresh random unit vectors. */
static inline double tq_mean_cos(vq_codec *c, vq_rng *g, int n) {
    int d = c->p.head_dim;
    float *x = (float *)malloc(sizeof(float) * (size_t)d * n),
          *y = (float *)malloc(sizeof(float) * (size_t)d * n);
    uint8_t *codes = (uint8_t *)malloc(c->block_bytes * (size_t)n);
    for (int t = 0; t < n; t++) tq_unit(g, x + (size_t)t * d, d);
    double s = 0;
    if (vq_codec_encode(c, x, n, codes) == VQ_STATUS_OK &&
        vq_codec_decode(c, codes, n, y) == VQ_STATUS_OK)
        for (int t = 0; t < n; t++) s += tq_cos(x + (size_t)t * d, y + (size_t)t * d, d);
    free(x);
    free(y);
    free(codes);
    return s / n;
}

/* Fused score and accumulate+finish against decode-then-dot / decode-weighted-sum, tolerance
 * 1e-4 relative to |q|*|x^| (scores) and to |sum| (values). Returns mismatches. */
static inline int tq_check_fused(vq_codec *c, vq_rng *g, int n) {
    int d = c->p.head_dim, bad = 0;
    float *x = (float *)malloc(sizeof(float) * (size_t)d * n),
          *y = (float *)malloc(sizeof(float) * (size_t)d * n);
    uint8_t *codes = (uint8_t *)malloc(c->block_bytes * (size_t)n);
    float *q = (float *)malloc(sizeof(float) * (size_t)d),
          *sc = (float *)malloc(sizeof(float) * (size_t)n);
    float *w = (float *)malloc(sizeof(float) * (size_t)n),
          *out = (float *)malloc(sizeof(float) * (size_t)d);
    float *qs = (float *)vq_alloc(vq_codec_query_bytes(c));
    float *acc = (float *)vq_alloc(sizeof(float) * vq_codec_acc_floats(c));
    double *ref = (double *)calloc((size_t)d, sizeof(double));
    for (int64_t i = 0; i < (int64_t)d * n; i++)
        x[i] = (float)(vq_rng_normal(g) * (1.0 + (i % d % 7)));
    for (int t = 0; t < n; t += 5)
        for (int i = 0; i < d; i++) x[(size_t)t * d + i] *= 30.0f; /* mixed norms */
    for (int i = 0; i < d; i++) q[i] = (float)vq_rng_normal(g);
    for (int t = 0; t < n; t++) w[t] = (float)vq_rng_uniform(g);
    if (vq_codec_encode(c, x, n, codes) != VQ_STATUS_OK) bad++;
    vq_codec_decode(c, codes, n, y);
    vq_codec_prepare_query(c, q, qs);
    vq_codec_score(c, qs, codes, n, sc);
    vq_codec_accumulate(c, codes, n, w, acc);
    vq_codec_finish(c, acc, out);
    double qn = 0;
    for (int i = 0; i < d; i++) qn += (double)q[i] * q[i];
    for (int t = 0; t < n; t++) {
        double dot = 0, yn = 0;
        for (int i = 0; i < d; i++) {
            double v = y[(size_t)t * d + i];
            dot += q[i] * v;
            yn += v * v;
            ref[i] += w[t] * v;
        }
        if (fabs(sc[t] - dot) > 1e-4 * sqrt(qn * yn) + 1e-7) {
            if (bad < 3) fprintf(stderr, "  score t=%d: %.8g vs %.8g\n", t, sc[t], dot);
            bad++;
        }
    }
    double rn = 0;
    for (int i = 0; i < d; i++) rn += ref[i] * ref[i];
    for (int i = 0; i < d; i++)
        if (fabs(out[i] - ref[i]) > 1e-4 * sqrt(rn) + 1e-7) {
            if (bad < 3) fprintf(stderr, "  value i=%d: %.8g vs %.8g\n", i, out[i], ref[i]);
            bad++;
        }
    free(x);
    free(y);
    free(codes);
    free(q);
    free(sc);
    free(w);
    free(out);
    free(ref);
    vq_free(qs);
    vq_free(acc);
    return bad;
}

/* Encodes the n tokens x (d floats each) with method m at `bits`, seed 77: twice with one codec,
 * once with the scalar ISA, once with seed 78. Returns the number of broken expectations
 * (same bytes for the first three, other bytes for the other seed). */
static inline int tq_check_deterministic(enum vq_method m, int d, int bits, const float *x, int n) {
    vq_status st;
    vq_codec *c1 = tq_create(m, d, bits, VQ_ISA_AUTO, 1, 77, &st);
    vq_codec *c2 = tq_create(m, d, bits, VQ_ISA_SCALAR, 1, 77, &st);
    vq_codec *c3 = tq_create(m, d, bits, VQ_ISA_AUTO, 1, 78, &st);
    if (!c1 || !c2 || !c3) return 1;
    const size_t nb = c1->block_bytes * (size_t)n;
    uint8_t *a = (uint8_t *)malloc(nb), *b = (uint8_t *)malloc(nb), *c = (uint8_t *)malloc(nb),
            *e = (uint8_t *)malloc(nb);
    vq_codec_encode(c1, x, n, a);
    vq_codec_encode(c1, x, n, b);
    vq_codec_encode(c2, x, n, c);
    vq_codec_encode(c3, x, n, e);
    const int bad = (memcmp(a, b, nb) != 0) + (memcmp(a, c, nb) != 0) + (memcmp(a, e, nb) == 0);
    free(a);
    free(b);
    free(c);
    free(e);
    vq_codec_free(c1);
    vq_codec_free(c2);
    vq_codec_free(c3);
    return bad;
}

#endif
