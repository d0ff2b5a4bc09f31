/* test_cache_dense.c — the cache's decode-once attention of batched queries: its fp32 kernels
 * (AVX2 / AVX-512 against the scalar reference on fresh random inputs, odd sizes and tails),
 * and vq_cache_attend on batches large enough to take it, against the decode-everything
 * reference and against the fused per-pair path ($VQ_PREFILL_ATTEND=fused) for every codec,
 * with fp16 windows, sinks, centering, key scales, outlier tokens and channels, per-channel
 * KIVI key widths, model and StreamingLLM windows, stream sinks alone (decode checked too);
 * the bytes of stream sinks alone. */
#include "test.h"
#include "veloxquant.h"
#include "cache/dense.h"

#include "test_data.h"

static void fill(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = nrand();
}

/* max |a - b| / (1 + |b|) */
static double worst_rel(const float *a, const float *b, size_t n) {
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));
        if (e > w) w = e;
    }
    return w;
}

TEST(kernels_match_reference) {
    /* blocks of 8 or 6, 4 and 1 queries / weight rows, alone and together; channels in 16 / 32 /
     * 64-wide steps with tails */
    const int nqs[] = {1, 3, 4, 5, 6, 8, 9, 13, 17};
    const int ds[] = {8, 20, 40, 64, 72, 256};
    const int64_t ns[] = {1, 15, 16, 17, 33, 70};
    for (int isa = VQ_ISA_SCALAR + 1; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        const struct vq_dense_kernels *k = vq_dense_kernels((enum vq_isa)isa);
        double ws = 0, wp = 0;
        for (size_t a = 0; a < sizeof nqs / sizeof nqs[0]; a++)
            for (size_t b = 0; b < sizeof ds / sizeof ds[0]; b++)
                for (size_t e = 0; e < sizeof ns / sizeof ns[0]; e++) {
                    const int nq = nqs[a], d = ds[b];
                    const int64_t n = ns[e];
                    const size_t ldk = (size_t)n + 3, lds = (size_t)n + 5;
                    float *q = malloc((size_t)nq * (size_t)d * sizeof(float));
                    float *kt = malloc((size_t)d * ldk * sizeof(float));
                    float *s1 = malloc((size_t)nq * lds * sizeof(float));
                    float *s2 = malloc((size_t)nq * lds * sizeof(float));
                    fill(q, (size_t)nq * (size_t)d);
                    fill(kt, (size_t)d * ldk);
                    for (size_t i = 0; i < (size_t)nq * lds; i++) s1[i] = s2[i] = 7.0f;
                    k->scores(q, nq, d, kt, ldk, n, 0.125f, s1, lds);
                    vq_dense_scores_ref(q, nq, d, kt, ldk, n, 0.125f, s2, lds);
                    double w = worst_rel(s1, s2, (size_t)nq * lds);
                    if (w > ws) ws = w;
                    /* pv: weights in [0, 1), accumulators start non-zero */
                    float *v = malloc((size_t)n * (size_t)d * sizeof(float));
                    float *a1 = malloc((size_t)nq * (size_t)d * sizeof(float));
                    float *a2 = malloc((size_t)nq * (size_t)d * sizeof(float));
                    fill(v, (size_t)n * (size_t)d);
                    fill(a1, (size_t)nq * (size_t)d);
                    memcpy(a2, a1, (size_t)nq * (size_t)d * sizeof(float));
                    for (size_t i = 0; i < (size_t)nq * lds; i++) s1[i] = urand();
                    k->pv(a1, nq, d, s1, lds, v, n);
                    vq_dense_pv_ref(a2, nq, d, s1, lds, v, n);
                    w = worst_rel(a1, a2, (size_t)nq * (size_t)d);
                    if (w > wp) wp = w;
                    /* max: exact, with -inf entries */
                    for (int64_t t = 0; t < n; t += 3) s2[t] = -INFINITY;
                    ASSERT(k->max(s2, n) == vq_dense_max_ref(s2, n));
                    ASSERT(k->max(s2 + 1, n - (n > 1)) == vq_dense_max_ref(s2 + 1, n - (n > 1)));
                    free(q), free(kt), free(s1), free(s2), free(v), free(a1), free(a2);
                }
        fprintf(stderr, "  %s: scores %.2g, pv %.2g\n", vq_isa_name((enum vq_isa)isa), ws, wp);
        ASSERT_LE(ws, 1e-5);
        ASSERT_LE(wp, 1e-5);
    }
}

/* max over output vectors of ||a - b|| / ||b|| */
static double rel_err(const float *a, const float *b, int64_t n_vec, int d) {
    double worst = 0;
    for (int64_t v = 0; v < n_vec; v++) {
        double e = 0, r = 0;
        for (int i = 0; i < d; i++) {
            const double df = (double)a[v * d + i] - b[v * d + i];
            e += df * df;
            r += (double)b[v * d + i] * b[v * d + i];
        }
        const double rel = sqrt(e) / (sqrt(r) + 1e-12);
        if (rel > worst) worst = rel;
    }
    return worst;
}

enum { NKV = 2, GRP = 3, NL = 2, N0 = 150 };

/* One cache configuration of the comparison. */
struct cfg {
    const char *name;
    enum vq_method km, vm;
    int kbits, vbits, d;
    int resid, sinks, center, ks, ot, oc, kc, window, s_win, s_sinks;
    int threads; /* 0 = 2; more threads cut each page's decode into more chunks */
};

static vq_cache *mk(const struct cfg *f, enum vq_isa isa, int fused) {
    struct vq_cache_params p = vq_cache_params_default();
    p.n_layers = NL;
    p.n_kv_heads = NKV;
    p.head_dim = f->d;
    p.max_tokens = 400;
    p.page_tokens = 32;
    p.key.method = f->km;
    p.value.method = f->vm;
    if (f->kbits) p.key.bits = f->kbits;
    if (f->vbits) p.value.bits = f->vbits;
    p.key.isa = p.value.isa = isa;
    p.key.group_size = p.value.group_size = 16;
    p.key.residual_length = p.value.residual_length = f->resid;
    p.key.n_sink_tokens = p.value.n_sink_tokens = f->sinks;
    p.center_keys = p.center_values = f->center;
    p.key_scales = f->ks;
    p.outlier_token_k = (float)f->ot;
    p.n_outlier_channels = f->oc;
    p.n_calib_tokens = 40;
    p.key_channel_bits = f->kc;
    static const int lw[NL] = {0, 48};
    if (f->window) p.layer_window = lw;
    p.stream_window = f->s_win;
    p.stream_sinks = f->s_sinks;
    p.n_threads = f->threads ? f->threads : 2;
    if (fused) setenv("VQ_PREFILL_ATTEND", "fused", 1);
    vq_status st;
    vq_cache *c = vq_cache_create(&p, &st);
    unsetenv("VQ_PREFILL_ATTEND");
    if (!c) fprintf(stderr, "  %s: %s\n", f->name, vq_status_str(st));
    return c;
}

static void compare(const struct cfg *f, enum vq_isa isa) {
    vq_cache *cd = mk(f, isa, 0), *cf = mk(f, isa, 1);
    ASSERT(cd != NULL && cf != NULL);
    if (!cd || !cf) {
        vq_cache_free(cd);
        vq_cache_free(cf);
        return;
    }
    const int d = f->d, nqh = NKV * GRP;
    const int64_t chunks[] = {N0, 37, 9, 1, 70};
    double wr = 0, wf = 0;
    float *q = malloc((size_t)(N0 * nqh * d) * sizeof(float));
    float *o1 = malloc((size_t)(N0 * nqh * d) * sizeof(float));
    float *o2 = malloc((size_t)(N0 * nqh * d) * sizeof(float));
    float *o3 = malloc((size_t)(N0 * nqh * d) * sizeof(float));
    for (size_t ci = 0; ci < sizeof chunks / sizeof *chunks; ci++) {
        const int64_t m = chunks[ci];
        float *k = malloc((size_t)(m * NKV * d) * sizeof(float));
        float *v = malloc((size_t)(m * NKV * d) * sizeof(float));
        for (int64_t i = 0; i < m * NKV * d; i++) {
            k[i] = nrand() + 2.0f * (float)((i % d) % 7 - 3) / 3.0f;
            v[i] = nrand() + 0.5f;
        }
        if (f->ot && ci == 0) /* a few loud tokens for the outlier-token bypass */
            for (int i = 0; i < d; i++) k[(size_t)(17 * NKV) * (size_t)d + (size_t)i] *= 9.0f;
        fill(q, (size_t)(m * nqh * d));
        for (int l = 0; l < NL; l++) {
            /* the engine shows the cache its queries before the first append (+kc widths) */
            if (f->kc) {
                ASSERT_STATUS(vq_cache_observe_queries(cd, l, q, nqh, m), VQ_STATUS_OK);
                ASSERT_STATUS(vq_cache_observe_queries(cf, l, q, nqh, m), VQ_STATUS_OK);
            }
            ASSERT_STATUS(vq_cache_append(cd, l, k, v, VQ_DTYPE_F32, m), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_append(cf, l, k, v, VQ_DTYPE_F32, m), VQ_STATUS_OK);
            /* the chunk's queries, causal (m >= 6: 18 pairs per kv head take the dense path) */
            const float sc = 1.0f / sqrtf((float)d);
            ASSERT_STATUS(vq_cache_attend(cd, l, q, nqh, m, NULL, sc, o1), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_attend(cf, l, q, nqh, m, NULL, sc, o2), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_attend_ref(cd, l, q, nqh, m, NULL, sc, o3), VQ_STATUS_OK);
            double e = rel_err(o1, o3, m * nqh, d);
            if (e > wr) wr = e;
            e = rel_err(o1, o2, m * nqh, d);
            if (e > wf) wf = e;
            /* decode: the last query alone takes the fused kernels in both caches */
            ASSERT_STATUS(vq_cache_attend(cd, l, q, nqh, 1, NULL, sc, o1), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_attend_ref(cd, l, q, nqh, 1, NULL, sc, o3), VQ_STATUS_OK);
            e = rel_err(o1, o3, nqh, d);
            if (e > wr) wr = e;
        }
        free(k);
        free(v);
    }
    if (wr > 1e-4 || wf > 1e-4)
        fprintf(stderr, "  %s isa=%s: vs ref %.3g, vs fused %.3g\n", f->name, vq_isa_name(isa), wr,
                wf);
    ASSERT_LE(wr, 1e-4);
    ASSERT_LE(wf, 1e-4);
    free(q), free(o1), free(o2), free(o3);
    vq_cache_free(cd);
    vq_cache_free(cf);
}

TEST(dense_equals_reference_and_fused) {
    const struct cfg cfgs[] = {
#define TQ VQ_METHOD_TURBOQUANT_MSE
        {.name = "turboquant_mse-4", .km = TQ, .vm = TQ, .kbits = 4, .vbits = 4, .d = 64},
        {.name = "turboquant_mse-3 d80 centered",
         .km = TQ,
         .vm = TQ,
         .kbits = 3,
         .vbits = 3,
         .d = 80,
         .center = 1},
        {.name = "kivi-4 R16 sinks",
         .km = VQ_METHOD_KIVI,
         .vm = VQ_METHOD_KIVI,
         .kbits = 4,
         .vbits = 4,
         .d = 64,
         .resid = 16,
         .sinks = 3},
        {.name = "kivi_sink-2 R0",
         .km = VQ_METHOD_KIVI_SINK,
         .vm = VQ_METHOD_KIVI_SINK,
         .kbits = 2,
         .vbits = 2,
         .d = 64,
         .sinks = 2},
        {.name = "kivi-4:tq4 +kc",
         .km = VQ_METHOD_KIVI,
         .vm = TQ,
         .kbits = 4,
         .vbits = 4,
         .d = 64,
         .kc = 1},
        {.name = "tq4 key scales", .km = TQ, .vm = TQ, .kbits = 4, .vbits = 4, .d = 64, .ks = 1},
        {.name = "tq4 outlier tokens+channels",
         .km = TQ,
         .vm = TQ,
         .kbits = 4,
         .vbits = 4,
         .d = 64,
         .ot = 4,
         .oc = 4},
        {.name = "polar", .km = VQ_METHOD_POLAR, .vm = VQ_METHOD_POLAR, .d = 64},
        {.name = "qjl:int8", .km = VQ_METHOD_QJL, .vm = VQ_METHOD_INT8, .d = 64},
        {.name = "turboquant_prod:fp16",
         .km = VQ_METHOD_TURBOQUANT_PROD,
         .vm = VQ_METHOD_FP16,
         .d = 64},
        {.name = "turboquant_rvq:tq4 layer window",
         .km = VQ_METHOD_TURBOQUANT_RVQ,
         .vm = TQ,
         .kbits = 1,
         .vbits = 4,
         .d = 64,
         .window = 1},
        {.name = "kivi-4 R16 stream window",
         .km = VQ_METHOD_KIVI,
         .vm = VQ_METHOD_KIVI,
         .kbits = 4,
         .vbits = 4,
         .d = 64,
         .resid = 16,
         .s_win = 40,
         .s_sinks = 4},
        {.name = "tq2 stream window",
         .km = TQ,
         .vm = TQ,
         .kbits = 2,
         .vbits = 2,
         .d = 64,
         .s_win = 56,
         .s_sinks = 8},
        {.name = "tq3 stream window, 5 threads (page decode in 8 chunks)",
         .km = TQ,
         .vm = TQ,
         .kbits = 3,
         .vbits = 3,
         .d = 64,
         .s_win = 56,
         .s_sinks = 8,
         .threads = 5},
        {.name = "kivi-4 R16 sinks, outlier tokens, 5 threads",
         .km = VQ_METHOD_KIVI,
         .vm = VQ_METHOD_KIVI,
         .kbits = 4,
         .vbits = 4,
         .d = 64,
         .resid = 16,
         .sinks = 3,
         .ot = 4,
         .threads = 5},
        {.name = "kivi-4:tq4 +kc, sinks alone",
         .km = VQ_METHOD_KIVI,
         .vm = TQ,
         .kbits = 4,
         .vbits = 4,
         .d = 64,
         .kc = 1,
         .s_sinks = 4},
        {.name = "tq3 sinks alone, layer window",
         .km = TQ,
         .vm = TQ,
         .kbits = 3,
         .vbits = 3,
         .d = 64,
         .window = 1,
         .s_sinks = 2},
#undef TQ
    };
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++) compare(&cfgs[i], (enum vq_isa)isa);
    }
}

/* stream_sinks S without a window: full attention, S fp16 rows per stream on top of the codes
 * (positions < S keep their codes too) */
TEST(sinks_alone_bytes) {
    const struct cfg a = {.name = "tq4",
                          .km = VQ_METHOD_TURBOQUANT_MSE,
                          .vm = VQ_METHOD_TURBOQUANT_MSE,
                          .kbits = 4,
                          .vbits = 4,
                          .d = 64};
    struct cfg b = a;
    b.s_sinks = 5;
    vq_cache *ca = mk(&a, VQ_ISA_AUTO, 0), *cb = mk(&b, VQ_ISA_AUTO, 0);
    ASSERT(ca && cb);
    if (!ca || !cb) return;
    const int64_t n = 70;
    float *k = malloc((size_t)(n * NKV * 64) * sizeof(float));
    float *v = malloc((size_t)(n * NKV * 64) * sizeof(float));
    fill(k, (size_t)(n * NKV * 64));
    fill(v, (size_t)(n * NKV * 64));
    for (int l = 0; l < NL; l++) {
        ASSERT_STATUS(vq_cache_append(ca, l, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_append(cb, l, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
    }
    struct vq_cache_memory ma, mb;
    vq_cache_memory(ca, &ma);
    vq_cache_memory(cb, &mb);
    ASSERT_EQ_INT((int64_t)(mb.total_bytes - ma.total_bytes), 5 * 64 * 2 * 2 * NKV * NL);
    ASSERT_EQ_INT((int64_t)mb.key_bytes, (int64_t)ma.key_bytes);
    ASSERT_EQ_INT(vq_cache_n_tokens(cb, 0), n);
    free(k);
    free(v);
    vq_cache_free(ca);
    vq_cache_free(cb);
}

int main(void) {
    RUN(kernels_match_reference);
    RUN(dense_equals_reference_and_fused);
    RUN(sinks_alone_bytes);
    return TEST_REPORT();
}
