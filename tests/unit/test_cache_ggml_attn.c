/* test_cache_ggml_attn.c — the cache's llama.cpp-identical fp16 attention: every AVX2/AVX-512
 * kernel equals its scalar reference bit for bit (odd lengths, page-like segments, -inf
 * entries, exp's whole range), and vq_cache_attend on plain fp16 layers equals the same
 * kernels run over one flat, position-ordered K/V buffer (what llama.cpp sees) bit for bit, for
 * every ISA, page size, thread count, GQA group (incl. more heads than one work item takes),
 * query batch (tinyBLAS order) and single query (vec_dot_f16 order), and stays within fp16
 * rounding of the float64 reference. */
#include "test.h"

#include <stdint.h>
#include <string.h>

#include "veloxquant.h"
#include "cache/ggml_attn.h"

static uint64_t rs = 0x243F6A8885A308D3ull;
static uint64_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}
static float frand(void) { return (float)((double)(rnd() >> 11) / 9007199254740992.0 * 2.0 - 1.0); }
static uint16_t H(float f) { return vq_fp32_to_fp16(f); }
static float F(uint16_t h) { return vq_fp16_to_fp32(h); }

/* ggml_v_expf: close to exp, 0 below ~-104 and for -inf, inf above ~89, and the AVX2/AVX-512
 * twins of every kernel equal the scalar reference bit for bit. */
TEST(kernels_bitwise) {
    ASSERT_NEAR(vq_ggml_expf_ref(0.0f), 1.0, 2e-7);
    ASSERT_NEAR(vq_ggml_expf_ref(1.0f), 2.718281828, 3e-7 * 2.72);
    ASSERT_NEAR(vq_ggml_expf_ref(-10.0f), 4.539993e-5, 4.54e-5 * 3e-7);
    ASSERT(vq_ggml_expf_ref(-INFINITY) == 0.0f);
    ASSERT(vq_ggml_expf_ref(-200.0f) == 0.0f);
    ASSERT(vq_ggml_expf_ref(-95.0f) > 0.0f && vq_ggml_expf_ref(-95.0f) < 1e-38f); /* subnormal */
    ASSERT(isinf(vq_ggml_expf_ref(100.0f)));
    enum { D = 128, NT = 83, G = 14 }; /* G: 6-row chunks of the batch scores and a rest */
    static float w0[96], w1[96], q[G * D], acc0[G * 64 * D], acc1[G * 64 * D], p[G * NT];
    static float s0[G * NT], s1[G * NT], o0[G * D];
    static uint16_t kv[NT * D];
    int checked = 0;
    const struct vq_ggml_attn_kernels *r = vq_ggml_attn_kernels(VQ_ISA_SCALAR);
    for (int isa = VQ_ISA_AVX2; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        const struct vq_ggml_attn_kernels *v = vq_ggml_attn_kernels((enum vq_isa)isa);
        ASSERT(v != r);
        for (int rep = 0; rep < 24; rep++) {
            const int b1 = rep % 2, d = rep % 3 == 0 ? 64
                                      : rep % 3 == 1 ? 128
                                                     : 80; /* 80: b1 leftover */
            const int g = 1 + (rep / 2) % G;
            for (int i = 0; i < NT * D; i++) kv[i] = H(frand() * 4.0f);
            for (int i = 0; i < G * D; i++) q[i] = F(H(frand() * 3.0f));
            for (int t = 0; t < 4; t++) {
                float a[G], bb[G];
                r->dot_f16(q, g, kv + t * d, d, b1, a);
                v->dot_f16(q, g, kv + t * d, d, b1, bb);
                ASSERT_EQ_INT(memcmp(a, bb, sizeof(float) * (size_t)g), 0);
            }
            /* scores of n rows (4-row blocks plus a tail), row stride NT */
            if (d % 16 == 0 || b1) {
                const int n = 1 + (rep * 7) % NT;
                memset(s0, 0, sizeof s0);
                memset(s1, 0, sizeof s1);
                r->scores_f16(q, g, kv, n, d, b1, 0.125f, s0, NT);
                v->scores_f16(q, g, kv, n, d, b1, 0.125f, s1, NT);
                ASSERT_EQ_INT(memcmp(s0, s1, sizeof s0), 0);
            }
            /* (the reference itself: vs a double dot, within float rounding) */
            {
                float a[1];
                double ex = 0, mag = 0;
                r->dot_f16(q, 1, kv, d, b1, a);
                for (int i = 0; i < d; i++) {
                    ex += (double)q[i] * F(kv[i]);
                    mag += fabs((double)q[i] * F(kv[i]));
                }
                ASSERT_NEAR(a[0], ex, 1e-6 * mag);
            }
            /* scores spanning exp's whole range, -inf for masked tail entries */
            int n = 16 * (1 + rep % 6);
            for (int i = 0; i < n; i++)
                w0[i] = w1[i] = (i % 17 == 16) ? -INFINITY : frand() * (rep < 12 ? 12.0f : 120.0f);
            double e0 = r->softmax_exp(w0, n, 1.5f), e1 = v->softmax_exp(w1, n, 1.5f);
            ASSERT(e0 == e1 && !memcmp(w0, w1, sizeof(float) * (size_t)n));
            for (int i = 0; i < n; i++) w0[i] = w1[i] = frand() * 3.0f;
            r->scale_round_f16(w0, n - 3, 0.7f);
            v->scale_round_f16(w1, n - 3, 0.7f);
            ASSERT(!memcmp(w0, w1, sizeof(float) * (size_t)n));
            memset(acc0, 0, sizeof acc0);
            memset(acc1, 0, sizeof acc1);
            for (int t = 0; t < G * NT; t++) p[t] = F(H(fabsf(frand())));
            const int dv = d == 80 ? 64 : d;
            /* two page-like segments, odd lengths; the SIMD side as two slot ranges (what
             * threads sharing a head do), the upper range first: the same bits */
            const int Sl = b1 ? 64 : 16, ks = 1 + rep % (Sl - 1);
            r->pv_f16(acc0, g, kv, p, NT, 0, 37, dv, b1, 0, Sl);
            r->pv_f16(acc0, g, kv + 37 * dv, p + 37, NT, 37, NT - 37, dv, b1, 0, Sl);
            v->pv_f16(acc1, g, kv, p, NT, 0, 37, dv, b1, ks, Sl);
            v->pv_f16(acc1, g, kv + 37 * dv, p + 37, NT, 37, NT - 37, dv, b1, ks, Sl);
            v->pv_f16(acc1, g, kv, p, NT, 0, 37, dv, b1, 0, ks);
            v->pv_f16(acc1, g, kv + 37 * dv, p + 37, NT, 37, NT - 37, dv, b1, 0, ks);
            ASSERT(!memcmp(acc0, acc1, sizeof acc0));
            const size_t S = b1 ? 64 : 16;
            vq_ggml_pv_finish(acc0, dv, b1, o0);
            for (int j = 0; j < dv; j++) { /* the documented order, column by column */
                float v16[16], t8[8], u4[4];
                for (int l = 0; l < 16; l++)
                    v16[l] = b1 ? (acc0[l * dv + j] + acc0[(32 + l) * dv + j]) +
                                      (acc0[(16 + l) * dv + j] + acc0[(48 + l) * dv + j])
                                : acc0[l * dv + j];
                for (int i = 0; i < 8; i++) t8[i] = v16[i + 8] + v16[i];
                for (int i = 0; i < 4; i++) u4[i] = t8[i + 4] + t8[i];
                const float want = (u4[0] + u4[2]) + (u4[1] + u4[3]);
                ASSERT(!memcmp(&want, &o0[j], 4));
            }
            for (int j = 0; j < dv; j++) { /* the finished product vs a double sum */
                double ex = 0, mag = 0;
                for (int t = 0; t < NT; t++) {
                    ex += (double)p[t] * F(kv[t * dv + j]);
                    mag += fabs((double)p[t] * F(kv[t * dv + j]));
                }
                ASSERT_NEAR(o0[j], ex, 1e-6 * mag + 1e-12);
            }
            (void)S;
            checked++;
        }
    }
    fprintf(stderr, "  attention kernels: %d ISA cases bit-identical to scalar\n", checked);
}

/* llama.cpp's computation for the G query heads (q, fp32) of one query at position nv - 1 over a
 * flat, position-ordered fp16 K/V buffer (nv rows of d), with the scalar kernels in one call
 * each: what the cache must reproduce whatever its paging and threading. */
static void flat_reference(const uint16_t *K, const uint16_t *V, const float *q, int G, int d,
                           int64_t nv, int b1, float scale, float *out) {
    const struct vq_ggml_attn_kernels *r = vq_ggml_attn_kernels(VQ_ISA_SCALAR);
    const int64_t np = (nv + 15) / 16 * 16;
    const size_t S = b1 ? 64 : 16;
    float *q16 = malloc(sizeof(float) * (size_t)(G * d));
    float *w = malloc(sizeof(float) * (size_t)(G * np));
    float *acc = calloc((size_t)G * S * (size_t)d, sizeof(float));
    memcpy(q16, q, sizeof(float) * (size_t)(G * d));
    r->scale_round_f16(q16, (int64_t)G * d, 1.0f);
    r->scores_f16(q16, G, K, nv, d, b1, scale, w, (size_t)np);
    for (int h = 0; h < G; h++) {
        float *wh = w + h * np, mx = -INFINITY;
        for (int64_t t = 0; t < nv; t++) mx = wh[t] > mx ? wh[t] : mx;
        for (int64_t t = nv; t < np; t++) wh[t] = -INFINITY;
        r->scale_round_f16(wh, nv, (float)(1.0 / r->softmax_exp(wh, np, mx)));
    }
    r->pv_f16(acc, G, V, w, (size_t)np, 0, nv, d, b1, 0, b1 ? 64 : 16);
    for (int h = 0; h < G; h++)
        vq_ggml_pv_finish(acc + (size_t)h * S * (size_t)d, d, b1, out + h * d);
    free(q16);
    free(w);
    free(acc);
}

/* vq_cache_attend on fp16 layers == flat_reference, bit for bit, for n_kv kv heads. */
static void check_flat_llama_order(int n_kv) {
    const int d = 64, n = 83;
    const float scale = 0.125f;
    float *k = malloc(sizeof(float) * (size_t)(n * n_kv * d)),
          *v = malloc(sizeof(float) * (size_t)(n * n_kv * d));
    for (int i = 0; i < n * n_kv * d; i++) {
        k[i] = frand() * 3.0f + (float)(i % 5) * 0.3f;
        v[i] = frand();
    }
    uint16_t *K = malloc(2 * (size_t)(n * d) * n_kv), *V = malloc(2 * (size_t)(n * d) * n_kv);
    for (int h = 0; h < n_kv; h++) /* flat per-head buffers (h, t, j) */
        for (int t = 0; t < n; t++)
            for (int j = 0; j < d; j++) {
                K[((size_t)h * n + t) * d + j] = H(k[((size_t)t * n_kv + h) * d + j]);
                V[((size_t)h * n + t) * d + j] = H(v[((size_t)t * n_kv + h) * d + j]);
            }
    const int groups[3] = {1, 3, 9}; /* 9 > the 8 heads of one work item */
    const int pages[3] = {5, 16, 256}, threads[3] = {1, 2, 3};
    int cases = 0;
    for (int gi = 0; gi < 3; gi++) {
        const int G = groups[gi], nh = G * n_kv;
        const int64_t nq = 29; /* batch: the last 29 positions; then one decode query */
        float *q = malloc(sizeof(float) * (size_t)(nq * nh * d));
        for (int i = 0; i < nq * nh * d; i++) q[i] = frand() * 2.0f;
        float *ref = malloc(sizeof(float) * (size_t)(nq * nh * d)),
              *ref1 = malloc(sizeof(float) * (size_t)(nh * d));
        float *got = malloc(sizeof(float) * (size_t)(nq * nh * d));
        float *f64 = malloc(sizeof(float) * (size_t)(nq * nh * d));
        for (int64_t i = 0; i < nq; i++)
            for (int g = 0; g < n_kv; g++)
                flat_reference(K + (size_t)g * n * d, V + (size_t)g * n * d,
                               q + (size_t)(i * nh + g * G) * d, G, d, n - nq + i + 1, 0, scale,
                               ref + (size_t)(i * nh + g * G) * d);
        for (int g = 0; g < n_kv; g++) /* one query at the last position: vec_dot_f16 order */
            flat_reference(K + (size_t)g * n * d, V + (size_t)g * n * d,
                           q + (size_t)((nq - 1) * nh + g * G) * d, G, d, n, 1, scale,
                           ref1 + (size_t)g * G * d);
        for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
            if (!vq_isa_available((enum vq_isa)isa)) continue;
            for (int pi = 0; pi < 3; pi++) {
                struct vq_cache_params p = vq_cache_params_default();
                p.n_kv_heads = n_kv;
                p.head_dim = d;
                p.max_tokens = 100;
                p.page_tokens = pages[pi];
                p.n_threads = threads[pi];
                p.key.isa = p.value.isa = (enum vq_isa)isa;
                vq_cache *c = vq_cache_create(&p, NULL);
                ASSERT(c != NULL);
                if (!c) continue;
                ASSERT_STATUS(vq_cache_append(c, 0, k, v, VQ_DTYPE_F32, 40), VQ_STATUS_OK);
                ASSERT_STATUS(vq_cache_append(c, 0, k + 40 * n_kv * d, v + 40 * n_kv * d,
                                              VQ_DTYPE_F32, n - 40),
                              VQ_STATUS_OK);
                ASSERT_STATUS(vq_cache_attend(c, 0, q, nh, nq, NULL, scale, got), VQ_STATUS_OK);
                ASSERT_EQ_INT(memcmp(got, ref, sizeof(float) * (size_t)(nq * nh * d)), 0);
                ASSERT_STATUS(
                    vq_cache_attend(c, 0, q + (size_t)(nq - 1) * nh * d, nh, 1, NULL, scale, got),
                    VQ_STATUS_OK);
                ASSERT_EQ_INT(memcmp(got, ref1, sizeof(float) * (size_t)(nh * d)), 0);
                /* explicit positions (any order) select the same rows */
                const int64_t pos[3] = {n - 1, n - nq + 3, n - nq};
                float *q3 = malloc(sizeof(float) * (size_t)(3 * nh * d)),
                      *o3 = malloc(sizeof(float) * (size_t)(3 * nh * d));
                for (int j = 0; j < 3; j++)
                    memcpy(q3 + (size_t)j * nh * d, q + (size_t)(pos[j] - (n - nq)) * nh * d,
                           sizeof(float) * (size_t)(nh * d));
                ASSERT_STATUS(vq_cache_attend(c, 0, q3, nh, 3, pos, scale, o3), VQ_STATUS_OK);
                for (int j = 0; j < 3; j++)
                    ASSERT_EQ_INT(
                        memcmp(o3 + (size_t)j * nh * d, ref + (size_t)(pos[j] - (n - nq)) * nh * d,
                               sizeof(float) * (size_t)(nh * d)),
                        0);
                free(q3);
                free(o3);
                /* within fp16 rounding (q, probabilities) of the float64 reference */
                ASSERT_STATUS(vq_cache_attend_ref(c, 0, q, nh, nq, NULL, scale, f64), VQ_STATUS_OK);
                double worst = 0;
                for (int64_t i = 0; i < nq * nh * d; i++) {
                    const double e = fabs((double)ref[i] - f64[i]);
                    if (e > worst) worst = e;
                }
                ASSERT_LE(worst, 3e-3);
                vq_cache_free(c);
                cases++;
            }
        }
        free(q);
        free(ref);
        free(ref1);
        free(got);
        free(f64);
    }
    fprintf(stderr,
            "  %d kv heads: %d cache configurations bit-identical to the flat llama.cpp order\n",
            n_kv, cases);
    free(k);
    free(v);
    free(K);
    free(V);
}

/* 2 kv heads: on 2 threads the decode split gives each thread one; 3 kv heads (SmolLM2): on
 * 2 threads one kv head's scores and lane slots are shared; 3 threads split both. */
TEST(cache_equals_flat_llama_order) {
    check_flat_llama_order(2);
    check_flat_llama_order(3);
}

/* Layers that are not plain fp16 rows (centered fp16 keys, head_dim not a multiple of 16) take
 * the codec path: still the same attention within float rounding, not the fp16 roundings. */
TEST(other_layers_use_codec_path) {
    const int n_kv = 1, n = 40, nh = 2;
    const int dims[2] = {64, 24};
    for (int di = 0; di < 2; di++) {
        const int d = dims[di];
        float *k = malloc(sizeof(float) * (size_t)(n * d)),
              *v = malloc(sizeof(float) * (size_t)(n * d));
        float *q = malloc(sizeof(float) * (size_t)(nh * d)),
              *o = malloc(sizeof(float) * (size_t)(nh * d));
        float *o2 = malloc(sizeof(float) * (size_t)(nh * d));
        for (int i = 0; i < n * d; i++) {
            k[i] = F(H(frand() * 2.0f + 1.0f));
            v[i] = F(H(frand()));
        }
        for (int i = 0; i < nh * d; i++) q[i] = frand() * 1.3f; /* not fp16-exact */
        struct vq_cache_params p = vq_cache_params_default();
        p.n_kv_heads = n_kv;
        p.head_dim = d;
        p.max_tokens = 64;
        p.center_keys = di == 0; /* d = 64: centered keys; d = 24: plain but d % 16 != 0 */
        vq_cache *c = vq_cache_create(&p, NULL);
        ASSERT_STATUS(vq_cache_append(c, 0, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_attend(c, 0, q, nh, 1, NULL, 0.2f, o), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_attend_ref(c, 0, q, nh, 1, NULL, 0.2f, o2), VQ_STATUS_OK);
        double worst = 0;
        for (int i = 0; i < nh * d; i++) worst = fmax(worst, fabs((double)o[i] - o2[i]));
        ASSERT_LE(worst, 2e-5); /* far below the fp16 path's rounding of q and P */
        vq_cache_free(c);
        free(k);
        free(v);
        free(q);
        free(o);
        free(o2);
    }
}

int main(void) {
    RUN(kernels_bitwise);
    RUN(cache_equals_flat_llama_order);
    RUN(other_layers_use_codec_path);
    return TEST_REPORT();
}
