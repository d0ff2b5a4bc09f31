/* test_cache_keyscale.c — per-channel key scales in vq_cache (key_scales, docs/ALGORITHMS.md
 * §8.6): q.k unchanged (exact fp32 keys give the unscaled attention and vq_cache_read returns
 * the keys appended); the scales equal a double-precision recomputation of the rule (b, a,
 * RoPE pairs, floor, geometric mean, clamp, fp16); fused attention equals the decode-then-dot
 * reference for every codec (windows, sinks, outlier modifiers included) and SIMD equals scalar;
 * exact memory (center_bytes, estimate mirror); relearning after reset / truncate to 0; bad
 * arguments; a large attention-error cut for rotated keys with outlier channels. */
#include "test.h"
#include "veloxquant.h"
#include "codecs/codec_impl.h"
#include "eval/kvmem.h"

#include "test_data.h"
#include "cache_test_util.h"
/* Channel spreads of keys with outlier channels: 1, except every 16th channel (and its
 * RoPE partner 2i+1) at `big`. */
static float *outlier_sd(int d, float big) {
    float *s = malloc((size_t)d * sizeof(float));
    for (int i = 0; i < d; i++) s[i] = (i / 2) % 8 == 0 ? big : 1.0f;
    return s;
}
static float *ones(int d, float v) {
    float *s = malloc((size_t)d * sizeof(float));
    for (int i = 0; i < d; i++) s[i] = v;
    return s;
}
static struct vq_cache_params mkp(enum vq_method m, int d, int n_kv, int ks) {
    struct vq_cache_params p = vq_cache_params_default();
    p.n_layers = 2;
    p.n_kv_heads = n_kv;
    p.head_dim = d;
    p.max_tokens = 256;
    p.page_tokens = 16;
    p.key.method = p.value.method = m;
    if (m == VQ_METHOD_TURBOQUANT_RVQ) p.key.bits = p.value.bits = 2;
    p.key.group_size = p.value.group_size = 8;
    p.key.residual_length = p.value.residual_length = 16;
    p.key.n_sink_tokens = p.value.n_sink_tokens = 3;
    p.key_scales = ks;
    p.key_scale_pairs = 1;
    p.n_threads = 2;
    return p;
}

/* Exact keys (fp32 codec): attention with scales (both modes) equals attention without to
 * float rounding, and vq_cache_read returns the appended keys; the scales are not trivial. */
TEST(qk_invariant_exact_keys) {
    const int n_kv = 2, d = 64, nqh = 6, n = 90, nq = 5;
    float *ksd = outlier_sd(d, 12.0f), *kmean = ones(d, 0.5f), *qsd = ones(d, 1.0f);
    float *k = gen_rows(n, n_kv, d, kmean, ksd), *v = gen_rows(n, n_kv, d, NULL, qsd);
    float *q = gen_rows(nq, nqh, d, NULL, qsd);
    float *o[3];
    for (int ks = 0; ks < 3; ks++) {
        struct vq_cache_params p = mkp(VQ_METHOD_FP32, d, n_kv, ks);
        p.center_keys = 1;
        vq_cache *c = vq_cache_create(&p, NULL);
        ASSERT(c != NULL);
        o[ks] = calloc((size_t)nq * nqh * d, sizeof(float));
        if (!c) continue;
        ASSERT_STATUS(vq_cache_observe_queries(c, 0, q, nqh, nq), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_append(c, 0, k, v, VQ_DTYPE_F32, 60), VQ_STATUS_OK);
        ASSERT_STATUS(
            vq_cache_append(c, 0, k + 60 * n_kv * d, v + 60 * n_kv * d, VQ_DTYPE_F32, n - 60),
            VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_attend(c, 0, q, nqh, nq, NULL, 0.125f, o[ks]), VQ_STATUS_OK);
        float s[64], kr[90 * 64], k1[90 * 64];
        ASSERT_STATUS(vq_cache_key_scales(c, 0, 1, s), VQ_STATUS_OK);
        float lo = s[0], hi = s[0];
        for (int i = 0; i < d; i++) {
            lo = s[i] < lo ? s[i] : lo;
            hi = s[i] > hi ? s[i] : hi;
        }
        if (ks > 0) ASSERT_GE(hi / lo, 2.0f); /* outlier channels get larger scales */
        else ASSERT(lo == 1.0f && hi == 1.0f);
        ASSERT_STATUS(vq_cache_read(c, 0, 1, kr, NULL), VQ_STATUS_OK);
        for (int t = 0; t < n; t++)
            memcpy(k1 + t * d, k + (t * n_kv + 1) * d, (size_t)d * sizeof(float));
        ASSERT_LE(rel_l2(kr, k1, (int64_t)n * d), 1e-6);
        vq_cache_free(c);
    }
    ASSERT_LE(rel_l2(o[1], o[0], (int64_t)nq * nqh * d), 1e-5);
    ASSERT_LE(rel_l2(o[2], o[0], (int64_t)nq * nqh * d), 1e-5);
    for (int i = 0; i < 3; i++) free(o[i]);
    free(ksd);
    free(kmean);
    free(qsd);
    free(k);
    free(v);
    free(q);
}

/* The rule of vq_cache_params.key_scales recomputed in double: b_i = mean (k_i - mu_i)^2
 * (mu = fp16-rounded mean), a_i = mean q_i^2 over the kv-head's query heads (or 1), RoPE
 * pairing, floor 1e-3 of the mean, (b / a)^(1/4) over the geometric mean, clamp [1/16, 16]. */
static void ref_scales(const float *k, const float *q, int64_t n, int64_t nq, int n_kv, int nqh,
                       int d, int h, int pairs, int r, int use_q, double *s) {
    double b[64], a[64], mu[64];
    for (int i = 0; i < d; i++) {
        double m = 0;
        for (int64_t t = 0; t < n; t++) m += k[(t * n_kv + h) * d + i];
        mu[i] = vq_fp16_to_fp32(vq_fp32_to_fp16((float)(m / (double)n)));
        b[i] = 0;
        for (int64_t t = 0; t < n; t++) {
            const double x = (double)(k[(t * n_kv + h) * d + i] - (float)mu[i]);
            b[i] += x * x;
        }
        b[i] /= (double)n;
        const int grp = nqh / n_kv;
        a[i] = 0;
        for (int64_t t = 0; t < nq; t++)
            for (int g = h * grp; g < (h + 1) * grp; g++) {
                const double x = q[(t * nqh + g) * d + i];
                a[i] += x * x;
            }
        a[i] = use_q ? a[i] / (double)(nq * grp) : 1.0;
    }
    double *both[2] = {b, a};
    for (int j = 0; j < 2; j++) {
        double *x = both[j];
        for (int i = 0; i < r / 2 && pairs > 0; i++) {
            const int i0 = pairs == 1 ? 2 * i : i, i1 = pairs == 1 ? 2 * i + 1 : i + r / 2;
            x[i0] = x[i1] = 0.5 * (x[i0] + x[i1]);
        }
        double m = 0;
        for (int i = 0; i < d; i++) m += x[i] / d;
        for (int i = 0; i < d; i++)
            if (x[i] < 1e-3 * m) x[i] = 1e-3 * m;
    }
    double lg = 0;
    for (int i = 0; i < d; i++) lg += 0.25 * log(b[i] / a[i]) / d;
    for (int i = 0; i < d; i++) {
        double e = 0.25 * log(b[i] / a[i]) - lg;
        e = e > log(16.0) ? log(16.0) : e < -log(16.0) ? -log(16.0) : e;
        s[i] = exp(e);
    }
}

TEST(scales_follow_the_rule) {
    const int n_kv = 2, d = 64, nqh = 4, n = 50, nq = 50;
    float *ksd = outlier_sd(d, 9.0f), *qsd = ones(d, 1.0f), *kmean = ones(d, 2.0f);
    for (int i = 0; i < d; i++) qsd[i] = i % 5 == 0 ? 4.0f : 1.0f; /* query outliers too */
    ksd[3] = 1e-4f;            /* a dead channel: its pair average keeps it above the floor */
    ksd[20] = ksd[52] = 1e-6f; /* a dead halves-pair: floored, then clamped */
    float *k = gen_rows(n, n_kv, d, kmean, ksd), *v = gen_rows(n, n_kv, d, NULL, qsd);
    float *q = gen_rows(nq, nqh, d, NULL, qsd);
    const int pairs[3] = {0, 1, 2}, rdim[3] = {0, 64, 48};
    for (int pi = 0; pi < 3; pi++)
        for (int ks = 1; ks <= 2; ks++) {
            struct vq_cache_params p = mkp(VQ_METHOD_TURBOQUANT_MSE, d, n_kv, ks);
            p.key_scale_pairs = pairs[pi];
            p.key_scale_rope_dim = rdim[pi];
            vq_cache *c = vq_cache_create(&p, NULL);
            ASSERT(c != NULL);
            if (!c) continue;
            ASSERT_STATUS(vq_cache_observe_queries(c, 1, q, nqh, nq), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_append(c, 1, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
            for (int h = 0; h < n_kv; h++) {
                float s[64];
                double want[64];
                ASSERT_STATUS(vq_cache_key_scales(c, 1, h, s), VQ_STATUS_OK);
                ref_scales(k, q, n, nq, n_kv, nqh, d, h, pairs[pi], rdim[pi] ? rdim[pi] : d,
                           ks == 2, want);
                double worst = 0;
                for (int i = 0; i < d; i++) {
                    const double e = fabs(s[i] / want[i] - 1.0);
                    if (e > worst) worst = e;
                }
                ASSERT_LE(worst, 1.5e-3); /* fp16 rounding of s */
                if (pairs[pi] == 1)
                    for (int i = 0; i < d; i += 2) ASSERT(s[i] == s[i + 1]);
                if (pairs[pi] == 2)
                    for (int i = 0; i < 24; i++) ASSERT(s[i] == s[i + 24]);
            }
            /* layer 0 has not been appended to: unit scales */
            float s0[64];
            ASSERT_STATUS(vq_cache_key_scales(c, 0, 0, s0), VQ_STATUS_OK);
            for (int i = 0; i < d; i++) ASSERT(s0[i] == 1.0f);
            vq_cache_free(c);
        }
    free(ksd);
    free(qsd);
    free(kmean);
    free(k);
    free(v);
    free(q);
}

/* Fused attention equals the decode-then-dot reference with key scales on, for every codec
 * (KIVI windows, kivi_sink sinks), with outlier tokens / channels on rotation keys, and the
 * SIMD kernels equal the scalar ones. */
TEST(fused_equals_reference_and_scalar) {
    const int n_kv = 2, d = 64;
    const int64_t chunks[] = {29, 1, 6, 1, 23, 1};
    float *ksd = outlier_sd(d, 10.0f), *vsd = ones(d, 1.0f), *kmean = ones(d, 3.0f);
    for (int m = 0; m < VQ_METHOD_COUNT; m++) {
        if (!vq_codec_iface((enum vq_method)m)) continue;
        const unsigned fl = vq_method_flags((enum vq_method)m);
        if (fl & VQ_METHOD_F_CALIBRATION) continue; /* need a calibration (own tests) */
        for (int mod = 0; mod < 3; mod++) {
            if (mod == 1 && !(fl & VQ_METHOD_F_OUTLIER_CHANNELS)) continue;
            if (mod == 2 && !(fl & VQ_METHOD_F_OUTLIER_TOKENS)) continue;
            float *out[2] = {NULL, NULL};
            int64_t n = 0, nq = 0, nqh = 0;
            for (int isa = 0; isa < 2; isa++) {
                struct vq_cache_params p = mkp((enum vq_method)m, d, n_kv, 2);
                p.n_threads = 8; /* fewer pairs than threads: split decode + merge */
                if (mod == 1) p.n_outlier_channels = 4, p.n_calib_tokens = 20;
                if (mod == 2) p.outlier_token_k = 1.5f;
                if (isa == 0) p.key.isa = p.value.isa = VQ_ISA_SCALAR;
                vq_status st;
                vq_cache *c = vq_cache_create(&p, &st);
                ASSERT(c != NULL);
                if (!c) continue;
                rng_ = 0x2545F4914F6CDD1Dull + (uint64_t)m * 7919u;
                double worst = 0;
                n = 0;
                for (size_t ci = 0; ci < sizeof chunks / sizeof *chunks; ci++) {
                    float *k = gen_rows(chunks[ci], n_kv, d, kmean, ksd);
                    float *v = gen_rows(chunks[ci], n_kv, d, NULL, vsd);
                    nqh = n_kv * (int)(1 + ci % 3);
                    n += chunks[ci];
                    nq = ci % 2 ? 1 : n < 3 ? n : 3;
                    float *q = gen_rows(nq, (int)nqh, d, NULL, vsd);
                    ASSERT_STATUS(vq_cache_observe_queries(c, 1, q, (int)nqh, nq), VQ_STATUS_OK);
                    ASSERT_STATUS(vq_cache_append(c, 1, k, v, VQ_DTYPE_F32, chunks[ci]),
                                  VQ_STATUS_OK);
                    float *o1 = attend_vs_ref(c, 1, q, (int)nqh, nq, d, &worst);
                    ASSERT(o1 != NULL);
                    free(out[isa]);
                    out[isa] = o1; /* the last chunk's output */
                    free(q);
                    free(k);
                    free(v);
                }
                if (worst > fused_tol((enum vq_method)m))
                    fprintf(stderr, "  %s mod %d isa %d: fused vs reference %.3g\n",
                            vq_method_name((enum vq_method)m), mod, isa, worst);
                ASSERT_LE(worst, fused_tol((enum vq_method)m));
                vq_cache_free(c);
            }
            if (out[0] && out[1]) {
                const double e = rel_l2(out[1], out[0], nq * nqh * d);
                if (e > 1e-4)
                    fprintf(stderr, "  %s mod %d: SIMD vs scalar %.3g\n",
                            vq_method_name((enum vq_method)m), mod, e);
                ASSERT_LE(e, 1e-4);
            }
            free(out[0]);
            free(out[1]);
        }
    }
    free(ksd);
    free(vsd);
    free(kmean);
}

/* Memory: the scales add exactly 2*d bytes per (layer with tokens, kv-head) to center_bytes
 * and key_total_bytes (none on fp16 edge layers); the analytic estimate agrees; reset and
 * truncate to 0 relearn them (a short first append gives unit scales). */
TEST(memory_and_relearning) {
    const int n_kv = 3, d = 64;
    float *ksd = outlier_sd(d, 8.0f), *vsd = ones(d, 1.0f);
    float *k = gen_rows(40, n_kv, d, NULL, ksd), *v = gen_rows(40, n_kv, d, NULL, vsd);
    struct vq_cache_params p0 = mkp(VQ_METHOD_TURBOQUANT_MSE, d, n_kv, 0);
    struct vq_cache_params p1 = mkp(VQ_METHOD_TURBOQUANT_MSE, d, n_kv, 1);
    p1.fp16_last_layers = 1; /* layer 1: fp16, no scales */
    p0.fp16_last_layers = 1;
    vq_cache *a = vq_cache_create(&p0, NULL), *b = vq_cache_create(&p1, NULL);
    ASSERT(a && b);
    if (a && b) {
        for (int l = 0; l < 2; l++) {
            ASSERT_STATUS(vq_cache_append(a, l, k, v, VQ_DTYPE_F32, 40), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_append(b, l, k, v, VQ_DTYPE_F32, 40), VQ_STATUS_OK);
        }
        struct vq_cache_memory ma, mb, est;
        vq_cache_memory(a, &ma);
        vq_cache_memory(b, &mb);
        const size_t sc = (size_t)n_kv * d * 2; /* layer 0 only */
        ASSERT_EQ_INT(mb.center_bytes, ma.center_bytes + sc);
        ASSERT_EQ_INT(mb.key_total_bytes, ma.key_total_bytes + sc);
        ASSERT_EQ_INT(mb.total_bytes, ma.total_bytes + sc);
        ASSERT_EQ_INT(mb.key_bytes, ma.key_bytes);
        ASSERT_EQ_INT(mb.allocated_bytes, ma.allocated_bytes + sc);
        ASSERT_STATUS(vq_kv_estimate(&p1, 40, &est), VQ_STATUS_OK);
        ASSERT(memcmp(&mb, &est, sizeof mb) == 0);
        float s[64];
        ASSERT_STATUS(vq_cache_key_scales(b, 1, 0, s), VQ_STATUS_OK);
        for (int i = 0; i < d; i++) ASSERT(s[i] == 1.0f); /* fp16 edge layer */
        /* truncate to n > 0 keeps the scales, to 0 forgets them; a 5-token first append
         * learns unit scales; reset forgets them */
        ASSERT_STATUS(vq_cache_truncate(b, 16), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_key_scales(b, 0, 0, s), VQ_STATUS_OK);
        ASSERT(s[0] != 1.0f);
        ASSERT_STATUS(vq_cache_truncate(b, 0), VQ_STATUS_OK);
        vq_cache_memory(b, &mb);
        ASSERT_EQ_INT(mb.center_bytes, 0);
        ASSERT_STATUS(vq_cache_append(b, 0, k, v, VQ_DTYPE_F32, 5), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_append(b, 0, k, v, VQ_DTYPE_F32, 35), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_key_scales(b, 0, 0, s), VQ_STATUS_OK);
        for (int i = 0; i < d; i++) ASSERT(s[i] == 1.0f);
        vq_cache_memory(b, &mb);
        ASSERT_EQ_INT(mb.center_bytes, 3 * sc); /* mu of keys and values (auto) + scales */
        vq_cache_reset(b);
        ASSERT_STATUS(vq_cache_append(b, 0, k, v, VQ_DTYPE_F32, 40), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_key_scales(b, 0, 0, s), VQ_STATUS_OK);
        ASSERT(s[0] != 1.0f);
    }
    vq_cache_free(a);
    vq_cache_free(b);
    free(ksd);
    free(vsd);
    free(k);
    free(v);
}

TEST(bad_arguments) {
    const int bad[][3] = {{3, 0, 0}, {-1, 0, 0}, {1, 3, 0}, {1, -1, 0}, {1, 1, 7}, {1, 1, 66}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct vq_cache_params p = mkp(VQ_METHOD_TURBOQUANT_MSE, 64, 1, bad[i][0]);
        p.key_scale_pairs = bad[i][1];
        p.key_scale_rope_dim = bad[i][2];
        vq_status st = VQ_STATUS_OK;
        ASSERT(vq_cache_create(&p, &st) == NULL);
        ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    }
    struct vq_cache_params p = mkp(VQ_METHOD_TURBOQUANT_MSE, 64, 2, 2);
    vq_cache *c = vq_cache_create(&p, NULL);
    ASSERT(c != NULL);
    if (!c) return;
    float q[4 * 64] = {0}, s[64];
    ASSERT_STATUS(vq_cache_observe_queries(c, 2, q, 4, 1), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_cache_observe_queries(c, 0, q, 3, 1), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_cache_observe_queries(c, 0, NULL, 4, 1), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_cache_observe_queries(c, 0, q, 4, 0), VQ_STATUS_OK);
    q[70] = NAN;
    ASSERT_STATUS(vq_cache_observe_queries(c, 0, q, 4, 1), VQ_STATUS_NON_FINITE);
    ASSERT_STATUS(vq_cache_key_scales(c, 0, 2, s), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_cache_key_scales(c, 0, 0, NULL), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_cache_key_scales(NULL, 0, 0, s), VQ_STATUS_INVALID_ARG);
    vq_cache_free(c);
}

/* Keys with strong outlier channels (8 of 64 channels at 10x the spread), isotropic queries:
 * turboquant_mse 3-bit keys (fp32 values) with key scales cut the attention error against
 * exact attention by a large factor (rotation alone spreads the outliers over every
 * coordinate). */
TEST(quality_gain_outlier_channels) {
    const int n_kv = 2, d = 64, n = 200, nqh = 6, nq = 16;
    float *ksd = outlier_sd(d, 10.0f), *qsd = ones(d, 0.15f), *vsd = ones(d, 1.0f);
    float *k = gen_rows(n, n_kv, d, NULL, ksd), *v = gen_rows(n, n_kv, d, NULL, vsd);
    float *q = gen_rows(nq, nqh, d, NULL, qsd);
    float *o[3];
    for (int j = 0; j < 3; j++) { /* exact, scales off, scales on */
        struct vq_cache_params p = mkp(j == 0 ? VQ_METHOD_FP32 : VQ_METHOD_TURBOQUANT_MSE, d, n_kv,
                                       j == 2 ? 1 : 0);
        p.value.method = VQ_METHOD_FP32;
        p.key.bits = 3;
        vq_cache *c = vq_cache_create(&p, NULL);
        ASSERT(c != NULL);
        o[j] = calloc((size_t)nq * nqh * d, sizeof(float));
        if (!c) continue;
        ASSERT_STATUS(vq_cache_append(c, 0, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_attend(c, 0, q, nqh, nq, NULL, 0.125f, o[j]), VQ_STATUS_OK);
        vq_cache_free(c);
    }
    const double e_off = rel_l2(o[1], o[0], (int64_t)nq * nqh * d);
    const double e_on = rel_l2(o[2], o[0], (int64_t)nq * nqh * d);
    fprintf(stderr, "  turboquant_mse-3 keys: attention rel err off %.4g, key scales %.4g\n", e_off,
            e_on);
    /* score error variance (sum b)(d) -> (sum sqrt b)^2: 856 * 64 / 136^2 = 2.96, i.e. ~1.7x
     * less error */
    ASSERT_LE(e_on * 1.5, e_off);
    for (int j = 0; j < 3; j++) free(o[j]);
    free(ksd);
    free(qsd);
    free(vsd);
    free(k);
    free(v);
    free(q);
}

int main(void) {
    RUN(qk_invariant_exact_keys);
    RUN(scales_follow_the_rule);
    RUN(fused_equals_reference_and_scalar);
    RUN(memory_and_relearning);
    RUN(bad_arguments);
    RUN(quality_gain_outlier_channels);
    return TEST_REPORT();
}
