/* test_cache_outlier.c — the outlier modifiers of vq_cache (outlier_token_k: high-norm tokens
 * kept fp16; n_outlier_channels: int8 two-stream keys): fused attention equals the
 * decode-then-dot reference for every supported codec, modifier and ISA (GQA, odd chunk
 * lengths, split decode); exact bytes against the documented formulas and the analytic
 * estimate; planted outlier tokens / channels are found; unsupported combinations are
 * refused; failed appends, truncate and reset leave exactly the state of a cache that never
 * saw the dropped tokens; and the modifiers lower the attention KL on keys with planted
 * outliers (measured against the same codec without them). */
#include "test.h"
#include "veloxquant.h"
#include "eval/kvmem.h"

#include "test_data.h"
#include "cache_test_util.h"

/* Planted outlier channels (keys): these get std 12 instead of 1. */
static const int OC[4] = {3, 17, 40, 41};

/* (n, n_kv, d) keys or values: N(0, 1) plus a per-channel offset; keys get the planted
 * channels; tokens with (pos0 + t) % every == every - 1 (every > 0) are scaled by `big`. */
static float *gen(int64_t n, int n_kv, int d, int planted_ch, int64_t pos0, int every, float big) {
    float *x = malloc((size_t)(n * n_kv * d) * sizeof(float));
    for (int64_t t = 0; t < n; t++) {
        const float s = every > 0 && (pos0 + t) % every == every - 1 ? big : 1.0f;
        for (int h = 0; h < n_kv; h++)
            for (int i = 0; i < d; i++) {
                float v = nrand() + 0.3f * (float)((i * 7 + h) % 5);
                if (planted_ch)
                    for (int j = 0; j < 4; j++)
                        if (OC[j] == i) v = 12.0f * nrand();
                x[(t * n_kv + h) * d + i] = s * v;
            }
    }
    return x;
}


static struct vq_cache_params mkp(enum vq_method m, int d, int n_kv, float ot_k, int n_oc) {
    struct vq_cache_params p = vq_cache_params_default();
    p.n_layers = 2;
    p.n_kv_heads = n_kv;
    p.head_dim = d;
    p.max_tokens = 400;
    p.page_tokens = 16;
    p.key.method = p.value.method = m;
    p.key.bits = p.value.bits = m == VQ_METHOD_TURBOQUANT_RVQ ? 1 : m == VQ_METHOD_QJL ? 1 : 3;
    if (m == VQ_METHOD_POLAR) p.key.bits = p.value.bits = 4;
    p.key.group_size = p.value.group_size = 8;
    p.key.residual_length = p.value.residual_length = 16;
    p.outlier_token_k = ot_k;
    p.n_outlier_channels = n_oc;
    p.n_calib_tokens = 45;
    p.n_threads = 8; /* few (query, head) pairs: the split-decode path runs too */
    return p;
}

static int oc_ok(enum vq_method m) {
    return m == VQ_METHOD_TURBOQUANT_MSE || m == VQ_METHOD_TURBOQUANT_PROD ||
           m == VQ_METHOD_TURBOQUANT_RVQ || m == VQ_METHOD_QJL || m == VQ_METHOD_POLAR;
}

/* Worst relative error of fused vs reference attention on layer 1 after n tokens. */
static double check_attend(vq_cache *c, int n_kv, int d, int64_t n, int nqh_mul, int64_t nq) {
    const int nqh = n_kv * nqh_mul;
    if (nq > n) nq = n;
    float *q = gen(nq, nqh, d, 0, 0, 0, 1.0f);
    float *o1 = malloc((size_t)(nq * nqh * d) * sizeof(float)),
          *o2 = malloc((size_t)(nq * nqh * d) * sizeof(float));
    double worst = 0;
    if (vq_cache_attend(c, 1, q, nqh, nq, NULL, 0.125f, o1) != VQ_STATUS_OK ||
        vq_cache_attend_ref(c, 1, q, nqh, nq, NULL, 0.125f, o2) != VQ_STATUS_OK) {
        worst = 1e9;
    } else {
        for (int64_t i = 0; i < nq * nqh; i++) {
            const double e = rel_l2(o1 + i * d, o2 + i * d, d);
            if (e > worst) worst = e;
        }
    }
    free(q);
    free(o1);
    free(o2);
    return worst;
}

TEST(fused_equals_reference) {
    const int n_kv = 2, d = 64;
    const int64_t chunks[] = {37, 1, 5, 1, 29, 61, 1};
    const enum vq_method ms[] = {VQ_METHOD_TURBOQUANT_MSE,
                                 VQ_METHOD_TURBOQUANT_PROD,
                                 VQ_METHOD_TURBOQUANT_RVQ,
                                 VQ_METHOD_KIVI,
                                 VQ_METHOD_QJL,
                                 VQ_METHOD_POLAR};
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
            for (int mod = 0; mod < 3; mod++) { /* 0: tokens, 1: channels, 2: both */
                if (mod > 0 && !oc_ok(ms[mi])) continue;
                struct vq_cache_params p = mkp(ms[mi], d, n_kv, mod != 1 ? 2.0f : 0.0f,
                                               mod > 0 ? 4 : 0);
                p.key.isa = p.value.isa = (enum vq_isa)isa;
                vq_status st;
                vq_cache *c = vq_cache_create(&p, &st);
                ASSERT(c != NULL);
                if (!c) continue;
                double worst = 0;
                int64_t n = 0;
                for (size_t ci = 0; ci < sizeof chunks / sizeof *chunks; ci++) {
                    float *k = gen(chunks[ci], n_kv, d, 1, n, 9, 6.0f);
                    float *v = gen(chunks[ci], n_kv, d, 0, n, 9, 3.0f);
                    ASSERT_STATUS(vq_cache_append(c, 1, k, v, VQ_DTYPE_F32, chunks[ci]),
                                  VQ_STATUS_OK);
                    free(k);
                    free(v);
                    n += chunks[ci];
                    const double e = check_attend(c, n_kv, d, n, 1 + (int)(ci % 3), ci % 2 ? 1 : 5);
                    if (e > worst) worst = e;
                }
                struct vq_cache_memory mm;
                vq_cache_memory(c, &mm);
                ASSERT(mm.outlier_bytes > 0);
                if (worst > fused_tol(ms[mi]))
                    fprintf(stderr, "  %s %s mod %d: rel err %.3g\n", vq_isa_name((enum vq_isa)isa),
                            vq_method_name(ms[mi]), mod, worst);
                ASSERT_LE(worst, fused_tol(ms[mi]));
                vq_cache_free(c);
            }
    }
}

/* Unsupported combinations and bad values are refused at create. */
TEST(refused_combinations) {
    vq_status st;
    struct vq_cache_params p = mkp(VQ_METHOD_KIVI_SINK, 64, 1, 2.5f, 0);
    ASSERT(vq_cache_create(&p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_UNSUPPORTED);
    p = mkp(VQ_METHOD_FP16, 64, 1, 2.5f, 0);
    ASSERT(vq_cache_create(&p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_UNSUPPORTED);
    const enum vq_method no_oc[] = {VQ_METHOD_FP16,      VQ_METHOD_FP32,     VQ_METHOD_KIVI,
                                    VQ_METHOD_KIVI_SINK, VQ_METHOD_VECINFER, VQ_METHOD_SPECTRAL};
    for (size_t i = 0; i < sizeof no_oc / sizeof *no_oc; i++) {
        p = mkp(no_oc[i], 64, 1, 0.0f, 4);
        ASSERT(vq_cache_create(&p, &st) == NULL);
        ASSERT_STATUS(st, VQ_STATUS_UNSUPPORTED);
    }
    p = mkp(VQ_METHOD_TURBOQUANT_MSE, 64, 1, -1.0f, 0);
    ASSERT(vq_cache_create(&p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    p = mkp(VQ_METHOD_TURBOQUANT_MSE, 64, 1, NAN, 0);
    ASSERT(vq_cache_create(&p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    p = mkp(VQ_METHOD_TURBOQUANT_MSE, 64, 1, 0.0f, 33); /* > head_dim / 2 */
    ASSERT(vq_cache_create(&p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    p = mkp(VQ_METHOD_TURBOQUANT_MSE, 64, 1, 0.0f, 4);
    p.n_calib_tokens = 0;
    ASSERT(vq_cache_create(&p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    /* fp16 keys with quantized values: outlier tokens keep value copies only */
    p = mkp(VQ_METHOD_TURBOQUANT_MSE, 64, 1, 2.5f, 0);
    p.key.method = VQ_METHOD_FP16;
    vq_cache *c = vq_cache_create(&p, &st);
    ASSERT(c != NULL);
    vq_cache_free(c);
}

/* Bytes: outlier channels cost exactly (2 + n_out) bytes per key token plus 2 n_out bytes of
 * channel list per (layer, kv-head) once calibrated; the estimate equals the cache for every
 * ctx (no data-dependent part); outlier tokens cost 2 d bytes per token, kv-head and side and
 * the estimate with the measured count equals the cache. */
TEST(bytes_exact) {
    const int n_kv = 3, d = 64, n_oc = 5;
    const int64_t ctxs[] = {1, 44, 45, 77, 200};
    for (size_t ci = 0; ci < sizeof ctxs / sizeof *ctxs; ci++) {
        const int64_t n = ctxs[ci];
        struct vq_cache_params p0 = mkp(VQ_METHOD_TURBOQUANT_MSE, d, n_kv, 0.0f, 0);
        struct vq_cache_params p1 = mkp(VQ_METHOD_TURBOQUANT_MSE, d, n_kv, 0.0f, n_oc);
        vq_cache *a = vq_cache_create(&p0, NULL), *b = vq_cache_create(&p1, NULL);
        ASSERT(a && b);
        if (!a || !b) {
            vq_cache_free(a);
            vq_cache_free(b);
            continue;
        }
        float *k = gen(n, n_kv, d, 1, 0, 0, 1.0f), *v = gen(n, n_kv, d, 0, 0, 0, 1.0f);
        for (int l = 0; l < 2; l++) {
            ASSERT_STATUS(vq_cache_append(a, l, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_append(b, l, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
        }
        struct vq_cache_memory ma, mb, est;
        vq_cache_memory(a, &ma);
        vq_cache_memory(b, &mb);
        const size_t per_head = (size_t)n * (2 + n_oc) + (n >= 45 ? 2 * n_oc : 0);
        ASSERT_EQ_INT(mb.outlier_bytes, 2 * n_kv * per_head);
        ASSERT_EQ_INT(ma.outlier_bytes, 0);
        ASSERT_EQ_INT(mb.key_bytes, ma.key_bytes);
        ASSERT_EQ_INT(mb.key_total_bytes, ma.key_total_bytes + mb.outlier_bytes);
        ASSERT_EQ_INT(mb.total_bytes, ma.total_bytes + mb.outlier_bytes);
        /* extra bits per key element = (8 n_out + 16) / d for the per-token records */
        ASSERT_NEAR(8.0 * (double)(2 * n_kv * n * (2 + n_oc)) / (double)(2 * n_kv * n * d),
                    (8.0 * n_oc + 16.0) / d, 1e-12);
        ASSERT_STATUS(vq_kv_estimate(&p1, n, &est), VQ_STATUS_OK);
        ASSERT(memcmp(&mb, &est, sizeof mb) == 0);
        free(k);
        free(v);
        vq_cache_free(a);
        vq_cache_free(b);
    }
    /* outlier tokens: every 20th token 8x larger. (Every 10th put the threshold, mean + 2.5 std of
     * the norms, at 0.84 of an outlier's norm, a few sigma of the norms' noise: a different
     * random stream, as on a build without the x86 kernels, missed one.) */
    const enum vq_method ms[] = {VQ_METHOD_TURBOQUANT_RVQ, VQ_METHOD_KIVI};
    for (size_t mi = 0; mi < 2; mi++) {
        const int64_t n = 123;
        struct vq_cache_params p = mkp(ms[mi], d, n_kv, 2.5f, 0);
        p.key.method = VQ_METHOD_FP16; /* keys fp16: only value copies */
        for (int pass = 0; pass < 2; pass++, p.key.method = ms[mi]) {
            vq_cache *c = vq_cache_create(&p, NULL);
            ASSERT(c != NULL);
            if (!c) continue;
            float *k = gen(n, n_kv, d, 0, 0, 20, 8.0f), *v = gen(n, n_kv, d, 0, 0, 0, 1.0f);
            for (int l = 0; l < 2; l++)
                ASSERT_STATUS(vq_cache_append(c, l, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
            struct vq_cache_memory m, est;
            vq_cache_memory(c, &m);
            const int sides = pass == 0 ? 1 : 2;
            const size_t row = (size_t)n_kv * d * 2 * (size_t)sides *
                               2; /* per token, both layers */
            ASSERT_EQ_INT(m.outlier_bytes % row, 0);
            const int64_t n_ot = (int64_t)(m.outlier_bytes / row);
            ASSERT_EQ_INT(n_ot, 6); /* positions 19, 39, ..., 119 */
            ASSERT_STATUS(vq_kv_estimate_outliers(&p, n, n_ot, &est), VQ_STATUS_OK);
            ASSERT(memcmp(&m, &est, sizeof m) == 0);
            free(k);
            free(v);
            vq_cache_free(c);
        }
    }
}

/* Planted outlier tokens are exactly the ones kept (their decoded K/V equal the fp16-rounded
 * input); single-token appends never add outliers; planted channels are split (after
 * calibration their per-channel error is tiny, before it is the codec's). */
TEST(detection) {
    const int n_kv = 2, d = 64;
    const int64_t n = 101;
    struct vq_cache_params p = mkp(VQ_METHOD_TURBOQUANT_MSE, d, n_kv, 2.5f, 0);
    vq_cache *c = vq_cache_create(&p, NULL);
    ASSERT(c != NULL);
    if (!c) return;
    float *k = gen(n, n_kv, d, 0, 0, 0, 1.0f), *v = gen(n, n_kv, d, 0, 0, 0, 1.0f);
    const int64_t planted[3] = {7, 50, 99};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < n_kv * d; j++) k[planted[i] * n_kv * d + j] *= 8.0f;
    ASSERT_STATUS(vq_cache_append(c, 0, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
    struct vq_cache_memory m0, m1;
    vq_cache_memory(c, &m0);
    ASSERT_EQ_INT(m0.outlier_bytes, 3 * 2 * n_kv * d * 2);
    float *rk = malloc((size_t)(n + 1) * d * sizeof(float)),
          *rv = malloc((size_t)(n + 1) * d * sizeof(float));
    for (int h = 0; h < n_kv; h++) {
        ASSERT_STATUS(vq_cache_read(c, 0, h, rk, rv), VQ_STATUS_OK);
        for (int64_t t = 0; t < n; t++) {
            const int is_p = t == 7 || t == 50 || t == 99;
            const double ek = rel_l2(rk + t * d, k + (t * n_kv + h) * d, d);
            const double ev = rel_l2(rv + t * d, v + (t * n_kv + h) * d, d);
            if (is_p) {
                ASSERT_LE(ek, 1e-3);
                ASSERT_LE(ev, 1e-3);
            } else ASSERT_GE(ek, 1e-2);
        }
    }
    /* a huge single token (decode step) is not an outlier */
    float *k1 = gen(1, n_kv, d, 0, 0, 0, 1.0f), *v1 = gen(1, n_kv, d, 0, 0, 0, 1.0f);
    for (int j = 0; j < n_kv * d; j++) k1[j] *= 50.0f;
    ASSERT_STATUS(vq_cache_append(c, 0, k1, v1, VQ_DTYPE_F32, 1), VQ_STATUS_OK);
    vq_cache_memory(c, &m1);
    ASSERT_EQ_INT(m1.outlier_bytes, m0.outlier_bytes);
    vq_cache_free(c);
    free(k);
    free(v);
    free(k1);
    free(v1);
    free(rk);
    free(rv);

    /* channels: tq_mse 3 bits, calibration over the first 45 tokens */
    const int64_t n2 = 90;
    struct vq_cache_params q0 = mkp(VQ_METHOD_TURBOQUANT_MSE, d, n_kv, 0.0f, 0);
    struct vq_cache_params q1 = mkp(VQ_METHOD_TURBOQUANT_MSE, d, n_kv, 0.0f, 4);
    vq_cache *a = vq_cache_create(&q0, NULL), *b = vq_cache_create(&q1, NULL);
    ASSERT(a && b);
    if (!a || !b) {
        vq_cache_free(a);
        vq_cache_free(b);
        return;
    }
    k = gen(n2, n_kv, d, 1, 0, 0, 1.0f);
    v = gen(n2, n_kv, d, 0, 0, 0, 1.0f);
    ASSERT_STATUS(vq_cache_append(a, 0, k, v, VQ_DTYPE_F32, n2), VQ_STATUS_OK);
    ASSERT_STATUS(vq_cache_append(b, 0, k, v, VQ_DTYPE_F32, n2), VQ_STATUS_OK);
    float *ra = malloc((size_t)n2 * d * sizeof(float)),
          *rb = malloc((size_t)n2 * d * sizeof(float));
    for (int h = 0; h < n_kv; h++) {
        vq_cache_read(a, 0, h, ra, NULL);
        vq_cache_read(b, 0, h, rb, NULL);
        double ea[2] = {0, 0}, eb[2] = {0, 0}, sig = 0; /* [before, after calibration] */
        for (int64_t t = 0; t < n2; t++)
            for (int j = 0; j < 4; j++) {
                const double x = k[(t * n_kv + h) * d + OC[j]];
                ea[t >= 45] += (ra[t * d + OC[j]] - x) * (ra[t * d + OC[j]] - x);
                eb[t >= 45] += (rb[t * d + OC[j]] - x) * (rb[t * d + OC[j]] - x);
                if (t >= 45) sig += x * x;
            }
        ASSERT_NEAR(eb[0], ea[0], 1e-6 * ea[0] + 1e-9); /* before calibration: plain codec */
        ASSERT_LE(eb[1], 0.3 * ea[1]); /* after: int8 stream on the planted channels */
        ASSERT_LE(eb[1], 1e-3 * sig);
    }
    free(k);
    free(v);
    free(ra);
    free(rb);
    vq_cache_free(a);
    vq_cache_free(b);
}

/* Compares two caches' stored state: memory and every decoded row. */
static int same_state(vq_cache *a, vq_cache *b, int n_layers, int n_kv, int d) {
    struct vq_cache_memory ma, mb;
    vq_cache_memory(a, &ma);
    vq_cache_memory(b, &mb);
    if (ma.total_bytes != mb.total_bytes || ma.outlier_bytes != mb.outlier_bytes) return 0;
    int ok = 1;
    for (int l = 0; l < n_layers; l++) {
        const int64_t n = vq_cache_n_tokens(a, l);
        if (n != vq_cache_n_tokens(b, l)) return 0;
        if (n == 0) continue;
        float *x = malloc((size_t)(4 * n * d) * sizeof(float));
        for (int h = 0; h < n_kv; h++) {
            vq_cache_read(a, l, h, x, x + n * d);
            vq_cache_read(b, l, h, x + 2 * n * d, x + 3 * n * d);
            if (memcmp(x, x + 2 * n * d, (size_t)(2 * n * d) * sizeof(float)) != 0) ok = 0;
        }
        free(x);
    }
    return ok;
}

/* Failed appends (NaN late in the batch; an outlier-channel scale beyond vq_sf16 found while
 * encoding) leave the cache as it was: it keeps matching a twin that never saw them. */
TEST(failed_append_unchanged) {
    const int n_kv = 2, d = 64;
    for (int mod = 0; mod < 2; mod++) {
        struct vq_cache_params p = mkp(VQ_METHOD_TURBOQUANT_MSE, d, n_kv, mod ? 0.0f : 2.0f, 4);
        vq_cache *a = vq_cache_create(&p, NULL), *b = vq_cache_create(&p, NULL);
        ASSERT(a && b);
        if (!a || !b) {
            vq_cache_free(a);
            vq_cache_free(b);
            continue;
        }
        const int64_t n1 = 30, n2 = 33, n3 = 21;
        float *k = gen(n1 + n2 + n3, n_kv, d, 1, 0, 7, 5.0f),
              *v = gen(n1 + n2 + n3, n_kv, d, 0, 0, 0, 1.0f);
        ASSERT_STATUS(vq_cache_append(a, 1, k, v, VQ_DTYPE_F32, n1), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_append(b, 1, k, v, VQ_DTYPE_F32, n1), VQ_STATUS_OK);
        float *bad = malloc((size_t)(n2 * n_kv * d) * sizeof(float));
        memcpy(bad, k + n1 * n_kv * d, (size_t)(n2 * n_kv * d) * sizeof(float));
        if (mod == 0) bad[(n2 - 2) * n_kv * d + 5] = NAN;
        else bad[(n2 - 3) * n_kv * d + d + OC[2]] = 3e12f; /* after calibration (pos 60) */
        ASSERT_STATUS(vq_cache_append(a, 1, bad, v + n1 * n_kv * d, VQ_DTYPE_F32, n2),
                      mod == 0 ? VQ_STATUS_NON_FINITE : VQ_STATUS_RANGE);
        ASSERT(same_state(a, b, 2, n_kv, d));
        for (int64_t off = n1; off < n1 + n2 + n3;) {
            const int64_t m = off == n1 ? n2 : n3;
            ASSERT_STATUS(
                vq_cache_append(a, 1, k + off * n_kv * d, v + off * n_kv * d, VQ_DTYPE_F32, m),
                VQ_STATUS_OK);
            ASSERT_STATUS(
                vq_cache_append(b, 1, k + off * n_kv * d, v + off * n_kv * d, VQ_DTYPE_F32, m),
                VQ_STATUS_OK);
            off += m;
        }
        ASSERT(same_state(a, b, 2, n_kv, d));
        ASSERT_LE(check_attend(a, n_kv, d, n1 + n2 + n3, 2, 3), 1e-4);
        free(k);
        free(v);
        free(bad);
        vq_cache_free(a);
        vq_cache_free(b);
    }
}

/* Truncate / reset: outlier channels refuse a cut inside the calibrated prefix (unchanged),
 * accept cuts at or after it (the result equals a fresh cache fed the same tokens, however
 * split: the split depends on positions only); truncate to 0 and reset re-calibrate. Outlier
 * tokens beyond a cut go away. */
TEST(truncate_reset) {
    const int n_kv = 2, d = 64;
    const int64_t N = 120;
    struct vq_cache_params p = mkp(VQ_METHOD_TURBOQUANT_PROD, d, n_kv, 0.0f, 4);
    p.center_keys = p.center_values = 0; /* the centering vectors depend on the first append */
    float *k = gen(N, n_kv, d, 1, 0, 0, 1.0f), *v = gen(N, n_kv, d, 0, 0, 0, 1.0f);
    float *k2 = gen(N, n_kv, d, 1, 0, 0, 1.0f);
    vq_cache *a = vq_cache_create(&p, NULL), *b = vq_cache_create(&p, NULL);
    ASSERT(a && b);
    if (!a || !b) {
        vq_cache_free(a);
        vq_cache_free(b);
        free(k);
        free(v);
        free(k2);
        return;
    }
    ASSERT_STATUS(vq_cache_append(a, 0, k, v, VQ_DTYPE_F32, N), VQ_STATUS_OK);
    const int64_t parts[] = {13, 1, 40, 7, 59}; /* same tokens, other split */
    for (int64_t i = 0, off = 0; i < 5; off += parts[i], i++)
        ASSERT_STATUS(
            vq_cache_append(b, 0, k + off * n_kv * d, v + off * n_kv * d, VQ_DTYPE_F32, parts[i]),
            VQ_STATUS_OK);
    ASSERT(same_state(a, b, 2, n_kv, d));
    ASSERT_STATUS(vq_cache_truncate(a, 30), VQ_STATUS_UNSUPPORTED);
    ASSERT_EQ_INT(vq_cache_n_tokens(a, 0), N);
    ASSERT(same_state(a, b, 2, n_kv, d));
    ASSERT_STATUS(vq_cache_truncate(a, 45), VQ_STATUS_OK);
    ASSERT_STATUS(vq_cache_append(a, 0, k + 45 * n_kv * d, v + 45 * n_kv * d, VQ_DTYPE_F32, N - 45),
                  VQ_STATUS_OK);
    ASSERT(same_state(a, b, 2, n_kv, d));
    /* inside the calibration prefix (45 tokens) only the last append can be undone: a cache
     * that got 13 + 20 tokens and is cut back to 13 equals one that got the 13 only, and can
     * then be cut no further than 0 */
    {
        vq_cache *u = vq_cache_create(&p, NULL), *w = vq_cache_create(&p, NULL);
        ASSERT(u && w);
        if (u && w) {
            ASSERT_STATUS(vq_cache_append(u, 0, k, v, VQ_DTYPE_F32, 13), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_append(w, 0, k, v, VQ_DTYPE_F32, 13), VQ_STATUS_OK);
            ASSERT_STATUS(
                vq_cache_append(u, 0, k + 13 * n_kv * d, v + 13 * n_kv * d, VQ_DTYPE_F32, 20),
                VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_truncate(u, 5), VQ_STATUS_UNSUPPORTED);
            ASSERT_STATUS(vq_cache_truncate(u, 13), VQ_STATUS_OK);
            ASSERT(same_state(u, w, 2, n_kv, d));
            ASSERT_STATUS(vq_cache_truncate(u, 5), VQ_STATUS_UNSUPPORTED);
            /* growing again past the calibration prefix matches the twin */
            ASSERT_STATUS(
                vq_cache_append(u, 0, k + 13 * n_kv * d, v + 13 * n_kv * d, VQ_DTYPE_F32, N - 13),
                VQ_STATUS_OK);
            ASSERT_STATUS(
                vq_cache_append(w, 0, k + 13 * n_kv * d, v + 13 * n_kv * d, VQ_DTYPE_F32, N - 13),
                VQ_STATUS_OK);
            ASSERT(same_state(u, w, 2, n_kv, d));
        }
        vq_cache_free(u);
        vq_cache_free(w);
    }
    /* truncate to 0 / reset, then other data: equal to a fresh cache */
    vq_cache *f = vq_cache_create(&p, NULL);
    ASSERT(f != NULL);
    if (f) {
        ASSERT_STATUS(vq_cache_append(f, 0, k2, v, VQ_DTYPE_F32, N), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_truncate(a, 0), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_append(a, 0, k2, v, VQ_DTYPE_F32, N), VQ_STATUS_OK);
        ASSERT(same_state(a, f, 2, n_kv, d));
        vq_cache_reset(b);
        ASSERT_STATUS(vq_cache_append(b, 0, k2, v, VQ_DTYPE_F32, N), VQ_STATUS_OK);
        ASSERT(same_state(b, f, 2, n_kv, d));
        vq_cache_free(f);
    }
    vq_cache_free(a);
    vq_cache_free(b);

    /* outlier tokens: every 9th token 6x (positions 8, 17, ...); cut at 50 keeps 5 */
    struct vq_cache_params po = mkp(VQ_METHOD_KIVI, d, n_kv, 2.0f, 0);
    vq_cache *c = vq_cache_create(&po, NULL);
    ASSERT(c != NULL);
    if (c) {
        float *ko = gen(N, n_kv, d, 0, 0, 9, 6.0f);
        ASSERT_STATUS(vq_cache_append(c, 1, ko, v, VQ_DTYPE_F32, N), VQ_STATUS_OK);
        struct vq_cache_memory m;
        vq_cache_memory(c, &m);
        const size_t row = (size_t)n_kv * d * 2 * 2;
        ASSERT_EQ_INT(m.outlier_bytes, 13 * row);
        ASSERT_STATUS(vq_cache_truncate(c, 48), VQ_STATUS_OK); /* kivi: block-aligned cut */
        vq_cache_memory(c, &m);
        ASSERT_EQ_INT(m.outlier_bytes, 5 * row);
        ASSERT_STATUS(
            vq_cache_append(c, 1, ko + 48 * n_kv * d, v + 48 * n_kv * d, VQ_DTYPE_F32, 33),
            VQ_STATUS_OK);
        ASSERT_LE(check_attend(c, n_kv, d, 81, 2, 4), 1e-4);
        vq_cache_reset(c);
        vq_cache_memory(c, &m);
        ASSERT_EQ_INT(m.outlier_bytes, 0);
        free(ko);
        vq_cache_free(c);
    }
    free(k);
    free(v);
    free(k2);
}

/* Mean KL(p_true || p_cache) of softmax(q.k / sqrt(d)) over random queries attending to all
 * n keys of head 0, layer 0, with the cache's keys decoded by vq_cache_read (fused attention
 * equals that reference, tested above). */
static double attn_kl(vq_cache *c, const float *k, int64_t n, int n_kv, int d) {
    float *r = malloc((size_t)(n * d) * sizeof(float));
    double *s0 = malloc((size_t)n * sizeof(double)), *s1 = malloc((size_t)n * sizeof(double));
    vq_cache_read(c, 0, 0, r, NULL);
    double kl = 0;
    const int nq = 64;
    for (int qi = 0; qi < nq; qi++) {
        float q[1024];
        for (int i = 0; i < d; i++) q[i] = nrand();
        double m0 = -1e300, m1 = -1e300, z0 = 0, z1 = 0;
        for (int64_t t = 0; t < n; t++) {
            double a = 0, b = 0;
            for (int i = 0; i < d; i++) {
                a += q[i] * k[(t * n_kv) * d + i];
                b += q[i] * r[t * d + i];
            }
            s0[t] = a / sqrt((double)d);
            s1[t] = b / sqrt((double)d);
            if (s0[t] > m0) m0 = s0[t];
            if (s1[t] > m1) m1 = s1[t];
        }
        for (int64_t t = 0; t < n; t++) {
            z0 += exp(s0[t] - m0);
            z1 += exp(s1[t] - m1);
        }
        for (int64_t t = 0; t < n; t++) {
            const double lp = s0[t] - m0 - log(z0), lq = s1[t] - m1 - log(z1);
            kl += exp(lp) * (lp - lq);
        }
    }
    free(r);
    free(s0);
    free(s1);
    return kl / nq;
}

/* Quality: on keys with planted outlier channels, tq_mse-3 with 4 outlier channels has a
 * lower attention KL than tq_mse-3 alone (after calibration); on keys with planted outlier
 * tokens, rvq-1 with outlier tokens has a lower KL than rvq-1 alone. */
TEST(quality_gain) {
    const int n_kv = 1, d = 64;
    const int64_t n = 300;
    for (int which = 0; which < 2; which++) {
        const enum vq_method m = which == 0 ? VQ_METHOD_TURBOQUANT_MSE : VQ_METHOD_TURBOQUANT_RVQ;
        struct vq_cache_params p0 = mkp(m, d, n_kv, 0.0f, 0);
        struct vq_cache_params p1 = mkp(m, d, n_kv, which ? 2.5f : 0.0f, which ? 0 : 4);
        p0.n_layers = p1.n_layers = 1;
        p1.n_calib_tokens = 20;
        vq_cache *a = vq_cache_create(&p0, NULL), *b = vq_cache_create(&p1, NULL);
        ASSERT(a && b);
        if (!a || !b) {
            vq_cache_free(a);
            vq_cache_free(b);
            continue;
        }
        float *k = which == 0 ? gen(n, n_kv, d, 1, 0, 0, 1.0f) : gen(n, n_kv, d, 0, 0, 25, 4.0f);
        float *v = gen(n, n_kv, d, 0, 0, 0, 1.0f);
        /* prefill of 200, then decode steps */
        ASSERT_STATUS(vq_cache_append(a, 0, k, v, VQ_DTYPE_F32, 200), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_append(b, 0, k, v, VQ_DTYPE_F32, 200), VQ_STATUS_OK);
        for (int64_t t = 200; t < n; t++) {
            ASSERT_STATUS(
                vq_cache_append(a, 0, k + t * n_kv * d, v + t * n_kv * d, VQ_DTYPE_F32, 1),
                VQ_STATUS_OK);
            ASSERT_STATUS(
                vq_cache_append(b, 0, k + t * n_kv * d, v + t * n_kv * d, VQ_DTYPE_F32, 1),
                VQ_STATUS_OK);
        }
        const uint64_t seed = rng_;
        const double kla = attn_kl(a, k, n, n_kv, d);
        rng_ = seed; /* same queries */
        const double klb = attn_kl(b, k, n, n_kv, d);
        struct vq_cache_memory ma, mb;
        vq_cache_memory(a, &ma);
        vq_cache_memory(b, &mb);
        printf("  %s: attention KL %.4g without, %.4g with the modifier (%.3f vs %.3f bits/elem)\n",
               which ? "rvq-1 + outlier tokens" : "tq_mse-3 + 4 outlier channels", kla, klb,
               8.0 * (double)ma.total_bytes / (double)(2 * n * d),
               8.0 * (double)mb.total_bytes / (double)(2 * n * d));
        ASSERT_LE(klb, 0.7 * kla);
        free(k);
        free(v);
        vq_cache_free(a);
        vq_cache_free(b);
    }
}

int main(void) {
    RUN(fused_equals_reference);
    RUN(refused_combinations);
    RUN(bytes_exact);
    RUN(detection);
    RUN(failed_append_unchanged);
    RUN(truncate_reset);
    RUN(quality_gain);
    return TEST_REPORT();
}
