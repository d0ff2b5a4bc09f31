/* test_cache_center.c — key/value centering in vq_cache: fused attention equals the
 * decode-then-dot reference with centering on for every codec; exact memory (center_bytes,
 * estimate mirror); auto defaults; reset / truncate-to-0 relearn mu; a large quality gain when
 * keys and values are a big common vector plus small noise. */
#include "test.h"
#include "veloxquant.h"
#include "codecs/codec_impl.h"
#include "eval/kvmem.h"

#define VQ_TEST_SEED 0x9E3779B97F4A7C15ull
#include "test_data.h"
/* (n, n_kv, d): common[h] + noise * N(0, 1) */
static float *gen(int64_t n, int n_kv, int d, const float *common, float noise) {
    float *x = malloc((size_t)(n * n_kv * d) * sizeof(float));
    for (int64_t t = 0; t < n; t++)
        for (int h = 0; h < n_kv; h++)
            for (int i = 0; i < d; i++)
                x[(t * n_kv + h) * d + i] = (common ? common[h * d + i] : 0.0f) + noise * nrand();
    return x;
}
static float *common_vec(int n_kv, int d, float norm) {
    float *c = malloc((size_t)n_kv * d * sizeof(float));
    for (int h = 0; h < n_kv; h++) {
        double s = 0;
        for (int i = 0; i < d; i++) {
            c[h * d + i] = nrand() + (i % 9 == 0 ? 6.0f : 0.0f);
            s += c[h * d + i] * c[h * d + i];
        }
        for (int i = 0; i < d; i++) c[h * d + i] = (float)(c[h * d + i] * norm / sqrt(s));
    }
    return c;
}
static struct vq_cache_params mkp(enum vq_method m, int d, int n_kv, int center) {
    struct vq_cache_params p = vq_cache_params_default();
    p.n_layers = 2;
    p.n_kv_heads = n_kv;
    p.head_dim = d;
    p.max_tokens = 200;
    p.page_tokens = 16;
    p.key.method = p.value.method = m;
    if (m == VQ_METHOD_TURBOQUANT_RVQ) p.key.bits = p.value.bits = 2;
    p.key.group_size = p.value.group_size = 8;
    p.key.residual_length = p.value.residual_length = 16;
    p.key.n_sink_tokens = p.value.n_sink_tokens = 3;
    p.center_keys = p.center_values = center;
    p.n_threads = 2;
    return p;
}

TEST(fused_equals_reference_centered) {
    const int n_kv = 2, d = 64;
    const int64_t chunks[] = {29, 1, 6, 1, 23, 1};
    for (int m = 0; m < VQ_METHOD_COUNT; m++) {
        if (!vq_codec_iface((enum vq_method)m)) continue;
        struct vq_cache_params p = mkp((enum vq_method)m, d, n_kv, 1);
        p.n_threads = 8; /* fewer (query, head) pairs than threads: chunked decode + merge */
        vq_status st;
        vq_cache *c = vq_cache_create(&p, &st);
        ASSERT(c != NULL);
        if (!c) continue;
        float *ck = common_vec(n_kv, d, 30.0f), *cv = common_vec(n_kv, d, 10.0f);
        double worst = 0;
        int64_t n = 0;
        for (size_t ci = 0; ci < sizeof chunks / sizeof *chunks; ci++) {
            float *k = gen(chunks[ci], n_kv, d, ck, 2.0f), *v = gen(chunks[ci], n_kv, d, cv, 1.0f);
            ASSERT_STATUS(vq_cache_append(c, 1, k, v, VQ_DTYPE_F32, chunks[ci]), VQ_STATUS_OK);
            free(k);
            free(v);
            n += chunks[ci];
            const int nqh = n_kv * (int)(1 + ci % 3);
            const int64_t nq = ci % 2 ? 1 : n < 3 ? n : 3; /* 1 query: split decode path */
            float *q = gen(nq, nqh, d, NULL, 1.0f);
            float *o1 = malloc((size_t)(nq * nqh * d) * sizeof(float)),
                  *o2 = malloc((size_t)(nq * nqh * d) * sizeof(float));
            ASSERT_STATUS(vq_cache_attend(c, 1, q, nqh, nq, NULL, 0.125f, o1), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_attend_ref(c, 1, q, nqh, nq, NULL, 0.125f, o2), VQ_STATUS_OK);
            for (int64_t i = 0; i < nq * nqh; i++) {
                const double e = rel_l2(o1 + i * d, o2 + i * d, d);
                if (e > worst) worst = e;
            }
            free(q);
            free(o1);
            free(o2);
        }
        if (worst > 1e-4)
            fprintf(stderr, "  %s: rel err %.3g\n", vq_method_name((enum vq_method)m), worst);
        ASSERT_LE(worst, 1e-4);
        free(ck);
        free(cv);
        vq_cache_free(c);
    }
}

/* Memory: centering adds exactly 2*d bytes per (layer with tokens, kv-head, centered stream);
 * everything else is as without centering; the analytic estimate agrees. */
TEST(memory_exact) {
    const int n_kv = 3, d = 64;
    const enum vq_method ms[] = {VQ_METHOD_TURBOQUANT_MSE, VQ_METHOD_KIVI, VQ_METHOD_QJL,
                                 VQ_METHOD_POLAR};
    for (size_t mi = 0; mi < 4; mi++) {
        struct vq_cache_params p0 = mkp(ms[mi], d, n_kv, 0), p1 = mkp(ms[mi], d, n_kv, 1);
        p1.center_values = 0; /* keys only */
        vq_cache *a = vq_cache_create(&p0, NULL), *b = vq_cache_create(&p1, NULL);
        ASSERT(a && b);
        if (!a || !b) {
            vq_cache_free(a);
            vq_cache_free(b);
            continue;
        }
        float *k = gen(40, n_kv, d, NULL, 1.0f), *v = gen(40, n_kv, d, NULL, 1.0f);
        ASSERT_STATUS(vq_cache_append(a, 0, k, v, VQ_DTYPE_F32, 40), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_append(b, 0, k, v, VQ_DTYPE_F32, 40), VQ_STATUS_OK);
        struct vq_cache_memory ma, mb, est;
        vq_cache_memory(a, &ma);
        vq_cache_memory(b, &mb);
        const size_t mu = (size_t)n_kv * d * 2; /* one layer holds tokens, keys only */
        ASSERT_EQ_INT(ma.center_bytes, 0);
        ASSERT_EQ_INT(mb.center_bytes, mu);
        ASSERT_EQ_INT(mb.key_bytes, ma.key_bytes);
        ASSERT_EQ_INT(mb.value_bytes, ma.value_bytes);
        ASSERT_EQ_INT(mb.window_bytes, ma.window_bytes);
        ASSERT_EQ_INT(mb.key_total_bytes, ma.key_total_bytes + mu);
        ASSERT_EQ_INT(mb.total_bytes, ma.total_bytes + mu);
        ASSERT_EQ_INT(mb.allocated_bytes, ma.allocated_bytes + 2 * mu); /* both layers allocated */
        /* estimate for a single-layer geometry mirrors the cache */
        p1.n_layers = 1;
        vq_cache *e = vq_cache_create(&p1, NULL);
        ASSERT(e != NULL);
        if (e) {
            ASSERT_STATUS(vq_cache_append(e, 0, k, v, VQ_DTYPE_F32, 40), VQ_STATUS_OK);
            struct vq_cache_memory me;
            vq_cache_memory(e, &me);
            ASSERT_STATUS(vq_kv_estimate(&p1, 40, &est), VQ_STATUS_OK);
            ASSERT(memcmp(&me, &est, sizeof me) == 0);
            ASSERT_EQ_INT(me.center_bytes, mu);
            vq_cache_free(e);
        }
        /* reset clears mu; truncate to 0 clears it; truncate to n > 0 keeps it */
        ASSERT_STATUS(vq_cache_truncate(b, 8), VQ_STATUS_OK);
        vq_cache_memory(b, &mb);
        ASSERT_EQ_INT(mb.center_bytes, mu);
        ASSERT_STATUS(vq_cache_truncate(b, 0), VQ_STATUS_OK);
        vq_cache_memory(b, &mb);
        ASSERT_EQ_INT(mb.center_bytes, 0);
        ASSERT_STATUS(vq_cache_append(b, 1, k, v, VQ_DTYPE_F32, 5), VQ_STATUS_OK);
        vq_cache_memory(b, &mb);
        ASSERT_EQ_INT(mb.center_bytes, mu);
        vq_cache_reset(b);
        vq_cache_memory(b, &mb);
        ASSERT_EQ_INT(mb.center_bytes, 0);
        ASSERT_EQ_INT(mb.total_bytes, 0);
        free(k);
        free(v);
        vq_cache_free(a);
        vq_cache_free(b);
    }
}

/* auto (-1, the default) centers the rotation-based codecs only. */
TEST(auto_defaults) {
    struct vq_cache_params d0 = vq_cache_params_default();
    ASSERT_EQ_INT(d0.center_keys, -1);
    ASSERT_EQ_INT(d0.center_values, -1);
    const struct {
        enum vq_method m;
        int on;
    } cases[] = {{VQ_METHOD_FP16, 0},           {VQ_METHOD_FP32, 0},
                 {VQ_METHOD_TURBOQUANT_MSE, 1}, {VQ_METHOD_TURBOQUANT_PROD, 1},
                 {VQ_METHOD_TURBOQUANT_RVQ, 1}, {VQ_METHOD_QJL, 1},
                 {VQ_METHOD_POLAR, 0},          {VQ_METHOD_KIVI, 0},
                 {VQ_METHOD_KIVI_SINK, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct vq_cache_params p = mkp(cases[i].m, 64, 1, -1);
        vq_cache *c = vq_cache_create(&p, NULL);
        ASSERT(c != NULL);
        if (!c) continue;
        float *k = gen(20, 1, 64, NULL, 1.0f);
        ASSERT_STATUS(vq_cache_append(c, 0, k, k, VQ_DTYPE_F32, 20), VQ_STATUS_OK);
        struct vq_cache_memory m;
        vq_cache_memory(c, &m);
        ASSERT_EQ_INT(m.center_bytes, cases[i].on ? 2 * 64 * 2 : 0);
        free(k);
        vq_cache_free(c);
    }
    struct vq_cache_params bad = mkp(VQ_METHOD_FP16, 64, 1, 2);
    vq_status st;
    ASSERT(vq_cache_create(&bad, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
}

/* Keys = big common vector + small noise (|mu| = 10x the noise norm): centering must cut the
 * attention error against exact fp32 attention by a large factor; vq_cache_read returns the
 * uncentered rows. */
TEST(quality_gain_common_vector) {
    const int n_kv = 2, d = 64, n = 160, nqh = 6, nq = 8;
    const enum vq_method ms[] = {VQ_METHOD_TURBOQUANT_MSE, VQ_METHOD_TURBOQUANT_PROD};
    for (size_t mi = 0; mi < 2; mi++) {
        float *ck = common_vec(n_kv, d, 80.0f), *cv = common_vec(n_kv, d, 40.0f);
        float *k = gen(n, n_kv, d, ck, 1.0f), *v = gen(n, n_kv, d, cv, 1.0f);
        float *q = gen(nq, nqh, d, NULL, 0.3f);
        float *o[3];
        const int cfg[3] = {-2, 0, 1}; /* exact fp32, tq off, tq on */
        for (int j = 0; j < 3; j++) {
            struct vq_cache_params p = mkp(cfg[j] == -2 ? VQ_METHOD_FP32 : ms[mi], d, n_kv,
                                           cfg[j] < 0 ? 0 : cfg[j]);
            p.key.bits = p.value.bits = 3;
            vq_cache *c = vq_cache_create(&p, NULL);
            ASSERT(c != NULL);
            o[j] = malloc((size_t)nq * nqh * d * sizeof(float));
            if (!c) {
                memset(o[j], 0, (size_t)nq * nqh * d * sizeof(float));
                continue;
            }
            ASSERT_STATUS(vq_cache_append(c, 0, k, v, VQ_DTYPE_F32, 100), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_append(c, 0, k + 100 * n_kv * d, v + 100 * n_kv * d,
                                          VQ_DTYPE_F32, n - 100),
                          VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_attend(c, 0, q, nqh, nq, NULL, 0.125f, o[j]), VQ_STATUS_OK);
            if (cfg[j] == 1) {
                float *kr = malloc((size_t)n * d * sizeof(float));
                ASSERT_STATUS(vq_cache_read(c, 0, 1, kr, NULL), VQ_STATUS_OK);
                float *k1 = malloc((size_t)n * d * sizeof(float));
                for (int t = 0; t < n; t++)
                    memcpy(k1 + t * d, k + (t * n_kv + 1) * d, (size_t)d * sizeof(float));
                ASSERT_LE(rel_l2(kr, k1, (int64_t)n * d),
                          0.05); /* decode adds mu back (without: ~1) */
                free(kr);
                free(k1);
            }
            vq_cache_free(c);
        }
        const double e_off = rel_l2(o[1], o[0], (int64_t)nq * nqh * d);
        const double e_on = rel_l2(o[2], o[0], (int64_t)nq * nqh * d);
        fprintf(stderr, "  %s 3-bit: attention rel err off %.4g, centered %.4g\n",
                vq_method_name(ms[mi]), e_off, e_on);
        ASSERT_LE(e_on * 5.0, e_off);
        for (int j = 0; j < 3; j++) free(o[j]);
        free(ck);
        free(cv);
        free(k);
        free(v);
        free(q);
    }
}

int main(void) {
    RUN(auto_defaults);
    RUN(fused_equals_reference_centered);
    RUN(memory_exact);
    RUN(quality_gain_common_vector);
    return TEST_REPORT();
}
