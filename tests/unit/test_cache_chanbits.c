/* test_cache_chanbits.c — per-channel KIVI key widths in vq_cache (key_channel_bits,
 * docs/ALGORITHMS.md §8.8): the allocation rule (vq_cache_channel_widths: sum, range, classes
 * of 8, monotone in the weight, a hand-computed case, equal weights = one width); the widths a
 * cache learns (vq_cache_key_channel_bits) equal the rule applied to w = a R^2 recomputed here
 * and the codes use them (each decoded channel's error); fused attention equals the
 * decode-then-dot reference and SIMD equals scalar; key bytes unchanged, the width bytes
 * counted exactly (estimate mirror); a short first append, reset and truncate to 0; bad
 * arguments; and a large cut of the attention error when the queries load a few channels. */
#include "test.h"
#include "veloxquant.h"
#include "cache/center.h"
#include "core/core.h"
#include "eval/kvmem.h"

#define VQ_TEST_SEED 0x9E3779B97F4A7C15ull
#include "test_data.h"
#include "cache_test_util.h"

static struct vq_cache_params mkp(int d, int n_kv, int bits, int g, int on) {
    struct vq_cache_params p = vq_cache_params_default();
    p.n_layers = 2;
    p.n_kv_heads = n_kv;
    p.head_dim = d;
    p.max_tokens = 512;
    p.page_tokens = 64;
    p.key.method = VQ_METHOD_KIVI;
    p.key.bits = bits;
    p.key.group_size = g;
    p.key.residual_length = 0;
    p.value.method = VQ_METHOD_FP32;
    p.key_channel_bits = on;
    p.n_threads = 2;
    return p;
}

TEST(allocation_rule) {
    uint8_t b[128];
    double w[128];
    /* hand case: d = 16 at 3 bits; unit A (channels 8..15, w 12.5 each: W 100) and unit B
     * (channels 0..7, w 0.125: W 1). Gains of the two spare unit-bits: A 2->3 100 (1/9 - 1/49)
     * = 8.84, then A 3->4 100 (1/49 - 1/225) = 1.60 > B 2->3 0.088: A at 4, B at 2. */
    for (int i = 0; i < 16; i++) w[i] = i < 8 ? 0.125 : 12.5;
    vq_cache_channel_widths(w, 16, 3, 0, b);
    for (int i = 0; i < 16; i++) ASSERT_EQ_INT(b[i], i < 8 ? 2 : 4);
    /* equal weights: one width */
    /* zero (key_channel_bits = 2): hand case d = 16 at 2 bits, unit A (W 100) and B (W 1)
     * from 0: A 0->2 (gain per bit 100 (1.5 - 1/9) / 2 = 69.4), A 2->3 (9.07 > B's 0.69), then
     * one bit left: A 3->4 (B's step costs two): A at 4, B at 0 (the group mean alone). */
    for (int i = 0; i < 16; i++) w[i] = i < 8 ? 0.01 : 12.5;
    vq_cache_channel_widths(w, 16, 2, 1, b);
    for (int i = 0; i < 16; i++) ASSERT_EQ_INT(b[i], i < 8 ? 0 : 4);
    int zeros = 0;
    for (int zero = 0; zero < 2; zero++) {
        for (int bits = 2; bits <= 8; bits++) { /* equal weights: one width */
            for (int i = 0; i < 64; i++) w[i] = 3.0;
            vq_cache_channel_widths(w, 64, bits, zero, b);
            for (int i = 0; i < 64; i++) ASSERT_EQ_INT(b[i], bits);
        }
        /* random weights over 6 decades: sum, range (0 only with zero), classes of 8,
         * monotone */
        for (int rep = 0; rep < 20; rep++)
            for (int bits = 2; bits <= 8; bits++) {
                const int d = rep % 2 ? 128 : 72;
                for (int i = 0; i < d; i++) w[i] = pow(10.0, 6.0 * urand());
                vq_cache_channel_widths(w, d, bits, zero, b);
                int sum = 0, n_at[9] = {0}, mono = 1;
                for (int i = 0; i < d; i++) {
                    ASSERT((zero && b[i] == 0) || (b[i] >= 2 && b[i] <= 8));
                    sum += b[i];
                    n_at[b[i]]++;
                    for (int j = 0; j < d; j++) mono &= !(w[i] > w[j] && b[i] < b[j]);
                }
                zeros += zero ? n_at[0] : 0;
                ASSERT_EQ_INT(sum, d * bits);
                for (int k = 0; k <= 8; k++) ASSERT_EQ_INT(n_at[k] % 8, 0);
                ASSERT(mono);
            }
    }
    ASSERT_GE(zeros, 1); /* six decades of weights: some channels are worth no bits */
}

/* Squared range of channel i of head h over whole groups of g tokens, and the query moment,
 * recomputed here: w_i = a_i * mean_groups (max - min)^2. */
static void ref_weights(const float *k, const float *q, int64_t n, int64_t nq, int n_kv, int nqh,
                        int d, int g, int h, double *w) {
    const int grp = nqh / n_kv;
    for (int i = 0; i < d; i++) {
        double r2 = 0, a = 0;
        for (int64_t t0 = 0; t0 + g <= n; t0 += g) {
            float lo = INFINITY, hi = -INFINITY;
            for (int64_t t = t0; t < t0 + g; t++) {
                const float x = k[(t * n_kv + h) * d + i];
                lo = x < lo ? x : lo;
                hi = x > hi ? x : hi;
            }
            r2 += (double)(hi - lo) * (hi - lo);
        }
        for (int64_t t = 0; t < nq; t++)
            for (int j = h * grp; j < (h + 1) * grp; j++) {
                const double x = q[(t * nqh + j) * d + i];
                a += x * x;
            }
        w[i] = r2 * a;
    }
}

/* The learned widths (vq_cache_key_channel_bits) follow the rule on w = a R^2, and the codes
 * use them: each channel's largest decoding error over the first group is within half a step
 * of its range at its width and above a quarter step at one bit more. */
TEST(learned_widths_follow_the_rule) {
    const int n_kv = 2, d = 64, g = 32, nqh = 6, n = 96, nq = 40;
    float ksd[64], qsd[64];
    for (int i = 0; i < d; i++) {
        ksd[i] = 0.5f + (float)(i % 9);
        qsd[i] = i % 11 == 3 ? 3.0f : 0.3f;
    }
    float *k = gen_rows(n, n_kv, d, NULL, ksd), *v = gen_rows(n, n_kv, d, NULL, ksd);
    float *q = gen_rows(nq, nqh, d, NULL, qsd);
    struct vq_cache_params p = mkp(d, n_kv, 4, g, 1);
    p.key.isa = VQ_ISA_SCALAR;
    vq_cache *c = vq_cache_create(&p, NULL);
    ASSERT(c != NULL);
    if (!c) return;
    ASSERT_STATUS(vq_cache_observe_queries(c, 1, q, nqh, nq), VQ_STATUS_OK);
    ASSERT_STATUS(vq_cache_append(c, 1, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
    float *kr = malloc((size_t)n * d * sizeof(float));
    int spread = 0;
    for (int h = 0; h < n_kv; h++) {
        double w[64];
        uint8_t want[64];
        ref_weights(k, q, n, nq, n_kv, nqh, d, g, h, w);
        vq_cache_channel_widths(w, d, 4, 0, want);
        uint8_t got[64];
        ASSERT_STATUS(vq_cache_key_channel_bits(c, 1, h, got), VQ_STATUS_OK);
        ASSERT(memcmp(got, want, sizeof got) == 0);
        ASSERT_STATUS(vq_cache_key_channel_bits(c, 0, h, got), VQ_STATUS_OK);
        for (int i = 0; i < d; i++) ASSERT_EQ_INT(got[i], 0); /* layer 0: nothing appended */
        ASSERT_STATUS(vq_cache_read(c, 1, h, kr, NULL), VQ_STATUS_OK);
        for (int i = 0; i < d; i++) {
            float lo = INFINITY, hi = -INFINITY, err = 0;
            for (int t = 0; t < g; t++) {
                const float x = k[(t * n_kv + h) * d + i];
                lo = x < lo ? x : lo;
                hi = x > hi ? x : hi;
            }
            for (int t = 0; t < g; t++) {
                const float e = fabsf(kr[t * d + i] - k[(t * n_kv + h) * d + i]);
                err = e > err ? e : err;
            }
            const double step = (hi - lo) / ((1 << want[i]) - 1);
            /* + the fp16 rounding of the stored rows (windowed streams round them) */
            ASSERT_LE(err, 0.5 * step * 1.01 + 1e-3 * fmax(fabs(lo), fabs(hi)));
            if (want[i] < 8) ASSERT_GE(err, 0.25 * (hi - lo) / ((2 << want[i]) - 1));
            spread |= 1 << want[i];
        }
    }
    ASSERT(spread != (1 << 4)); /* not one width */
    free(kr);
    vq_cache_free(c);
    free(k);
    free(v);
    free(q);
}

/* key_channel_bits = 2 on a 2-bit KIVI layer: the learned widths are the zero rule's on
 * w = a R^2 (some channels at 0 bits), a 0-bit channel reads back as its group's mean (not
 * its minimum: the tolerance is a few fp16 steps, the channel's spread is ksd), and
 * attention on the codes equals vq_cache_attend_ref. */
TEST(zero_width_channels) {
    const int n_kv = 2, d = 64, g = 32, nqh = 6, n = 96, nq = 40;
    float ksd[64], qsd[64];
    for (int i = 0; i < d; i++) {
        ksd[i] = 0.2f + (float)(i % 9);
        qsd[i] = i % 11 == 3 ? 3.0f : i % 4 == 0 ? 0.01f : 0.3f;
    }
    float *k = gen_rows(n, n_kv, d, NULL, ksd), *v = gen_rows(n, n_kv, d, NULL, ksd);
    float *q = gen_rows(nq, nqh, d, NULL, qsd);
    struct vq_cache_params p = mkp(d, n_kv, 2, g, 2);
    vq_cache *c = vq_cache_create(&p, NULL);
    ASSERT(c != NULL);
    if (!c) return;
    ASSERT_STATUS(vq_cache_observe_queries(c, 1, q, nqh, nq), VQ_STATUS_OK);
    ASSERT_STATUS(vq_cache_append(c, 1, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
    float *kr = malloc((size_t)n * d * sizeof(float));
    int zeros = 0, mean_bad = 0;
    for (int h = 0; h < n_kv; h++) {
        double w[64];
        uint8_t want[64], got[64];
        ref_weights(k, q, n, nq, n_kv, nqh, d, g, h, w);
        vq_cache_channel_widths(w, d, 2, 1, want);
        ASSERT_STATUS(vq_cache_key_channel_bits(c, 1, h, got), VQ_STATUS_OK);
        ASSERT(memcmp(got, want, sizeof got) == 0);
        ASSERT_STATUS(vq_cache_read(c, 1, h, kr, NULL), VQ_STATUS_OK);
        for (int i = 0; i < d; i++) {
            if (got[i] != 0) continue;
            zeros++;
            for (int t0 = 0; t0 < n; t0 += g) {
                double m = 0;
                for (int t = t0; t < t0 + g; t++) m += k[(t * n_kv + h) * d + i];
                /* the group waits in fp16 until it is full: its mean within fp16 rounding */
                const double tol = 2e-3 * (fabs(m / g) + ksd[i]);
                for (int t = t0; t < t0 + g; t++) mean_bad += fabs(kr[t * d + i] - m / g) > tol;
            }
        }
    }
    ASSERT_GE(zeros, 8);
    ASSERT_EQ_INT(mean_bad, 0);
    float *qa = gen_rows(3, nqh, d, NULL, qsd), oa[3 * 6 * 64], ob[3 * 6 * 64];
    ASSERT_STATUS(vq_cache_attend(c, 1, qa, nqh, 3, NULL, 0.125f, oa), VQ_STATUS_OK);
    ASSERT_STATUS(vq_cache_attend_ref(c, 1, qa, nqh, 3, NULL, 0.125f, ob), VQ_STATUS_OK);
    for (int i = 0; i < 3 * nqh * d; i++)
        ASSERT_LE(fabsf(oa[i] - ob[i]), fused_tol(VQ_METHOD_KIVI) * (1.0f + fabsf(ob[i])));
    free(qa);
    free(kr);
    vq_cache_free(c);
    free(k);
    free(v);
    free(q);
}

/* Fused attention equals the decode-then-dot reference (chunked appends, decode steps, kivi
 * and kivi_sink, windowed and not) and SIMD equals scalar. */
TEST(fused_equals_reference_and_scalar) {
    const int n_kv = 2, d = 64;
    const int64_t chunks[] = {40, 1, 7, 1, 30, 1};
    float ksd[64], qsd[64];
    for (int i = 0; i < d; i++) {
        ksd[i] = 1.0f + (float)(i % 5);
        qsd[i] = i % 7 == 0 ? 2.5f : 0.4f;
    }
    for (int m = 0; m < 2; m++)
        for (int r = 0; r < 2; r++) {
            float *out[2] = {NULL, NULL};
            int64_t nq = 0, nqh = 0;
            for (int isa = 0; isa < 2; isa++) {
                struct vq_cache_params p = mkp(d, n_kv, 5, 16, 1);
                p.key.method = m ? VQ_METHOD_KIVI_SINK : VQ_METHOD_KIVI;
                p.key.n_sink_tokens = 3;
                p.key.residual_length = r ? 32 : 0;
                p.value.method = VQ_METHOD_KIVI;
                p.value.group_size = 16;
                p.n_threads = 8;
                if (isa == 0) p.key.isa = p.value.isa = VQ_ISA_SCALAR;
                vq_cache *c = vq_cache_create(&p, NULL);
                ASSERT(c != NULL);
                if (!c) continue;
                rng_ = 0x2545F4914F6CDD1Dull + (uint64_t)(m * 2 + r);
                double worst = 0;
                for (size_t ci = 0; ci < sizeof chunks / sizeof *chunks; ci++) {
                    float *k = gen_rows(chunks[ci], n_kv, d, NULL, ksd);
                    float *v = gen_rows(chunks[ci], n_kv, d, NULL, ksd);
                    nqh = n_kv * (int)(1 + ci % 3);
                    nq = ci % 2 ? 1 : 3;
                    float *q = gen_rows(nq, (int)nqh, d, NULL, qsd);
                    ASSERT_STATUS(vq_cache_observe_queries(c, 0, q, (int)nqh, nq), VQ_STATUS_OK);
                    ASSERT_STATUS(vq_cache_append(c, 0, k, v, VQ_DTYPE_F32, chunks[ci]),
                                  VQ_STATUS_OK);
                    float *o1 = attend_vs_ref(c, 0, q, (int)nqh, nq, d, &worst);
                    ASSERT(o1 != NULL);
                    free(out[isa]);
                    out[isa] = o1;
                    free(q);
                    free(k);
                    free(v);
                }
                ASSERT_LE(worst, fused_tol(VQ_METHOD_KIVI));
                vq_cache_free(c);
            }
            if (out[0] && out[1]) ASSERT_LE(rel_l2(out[1], out[0], nq * nqh * d), 1e-5);
            free(out[0]);
            free(out[1]);
        }
}

/* Bytes: the codes take exactly the uniform width's bytes; the widths add head_dim bytes per
 * (layer with tokens, kv-head) to center_bytes / key_total_bytes (none on fp16 edge layers);
 * the estimate agrees. A first append shorter than G learns nothing yet (no width bytes), the
 * append that completes the first group does; reset and truncate to 0 relearn. */
TEST(memory_short_append_relearning) {
    const int n_kv = 3, d = 64, g = 32, n = 128, nqh = 3;
    float ksd[64], qsd[64];
    for (int i = 0; i < d; i++) {
        ksd[i] = 1.0f;
        qsd[i] = i < 8 ? 4.0f : 0.25f;
    }
    float *k = gen_rows(n, n_kv, d, NULL, ksd), *v = gen_rows(n, n_kv, d, NULL, ksd);
    float *q = gen_rows(4, nqh, d, NULL, qsd);
    struct vq_cache_params p0 = mkp(d, n_kv, 4, g, 0), p1 = mkp(d, n_kv, 4, g, 1);
    p0.fp16_last_layers = p1.fp16_last_layers = 1;
    vq_cache *a = vq_cache_create(&p0, NULL), *b = vq_cache_create(&p1, NULL);
    ASSERT(a && b);
    if (a && b) {
        for (int l = 0; l < 2; l++) {
            ASSERT_STATUS(vq_cache_observe_queries(b, l, q, nqh, 4), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_append(a, l, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_append(b, l, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
        }
        struct vq_cache_memory ma, mb, est;
        vq_cache_memory(a, &ma);
        vq_cache_memory(b, &mb);
        const size_t wb = (size_t)n_kv * d; /* layer 0 only */
        ASSERT_EQ_INT(mb.key_bytes, ma.key_bytes);
        ASSERT_EQ_INT(mb.center_bytes, ma.center_bytes + wb);
        ASSERT_EQ_INT(mb.key_total_bytes, ma.key_total_bytes + wb);
        ASSERT_EQ_INT(mb.allocated_bytes, ma.allocated_bytes + wb);
        ASSERT_STATUS(vq_kv_estimate(&p1, n, &est), VQ_STATUS_OK);
        ASSERT(memcmp(&mb, &est, sizeof mb) == 0);
        float oa[4 * 3 * 64], ob[4 * 3 * 64];
        ASSERT_STATUS(vq_cache_attend(a, 0, q, nqh, 4, NULL, 0.125f, oa), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_attend(b, 0, q, nqh, 4, NULL, 0.125f, ob), VQ_STATUS_OK);
        ASSERT(memcmp(oa, ob, sizeof oa) != 0); /* the widths changed the keys */
        /* truncate to 0, then a first append of 20 < G tokens: nothing learned yet; the next
         * append (queries shown before each) completes the group and learns the widths */
        ASSERT_STATUS(vq_cache_truncate(a, 0), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_truncate(b, 0), VQ_STATUS_OK);
        vq_cache_memory(b, &mb);
        ASSERT_EQ_INT(mb.center_bytes, 0);
        ASSERT_STATUS(vq_cache_observe_queries(b, 0, q, nqh, 4), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_append(a, 0, k, v, VQ_DTYPE_F32, 20), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_append(b, 0, k, v, VQ_DTYPE_F32, 20), VQ_STATUS_OK);
        uint8_t wb8[64];
        ASSERT_STATUS(vq_cache_key_channel_bits(b, 0, 1, wb8), VQ_STATUS_OK);
        for (int i = 0; i < d; i++) ASSERT_EQ_INT(wb8[i], 0);
        vq_cache_memory(b, &mb);
        ASSERT_EQ_INT(mb.center_bytes, 0);
        ASSERT_STATUS(vq_cache_observe_queries(b, 0, q, nqh, 4), VQ_STATUS_OK);
        const int64_t off = 20 * n_kv * d;
        ASSERT_STATUS(vq_cache_append(a, 0, k + off, v + off, VQ_DTYPE_F32, 100), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_append(b, 0, k + off, v + off, VQ_DTYPE_F32, 100), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_attend(a, 0, q, nqh, 4, NULL, 0.125f, oa), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_attend(b, 0, q, nqh, 4, NULL, 0.125f, ob), VQ_STATUS_OK);
        ASSERT(memcmp(oa, ob, sizeof oa) != 0);
        ASSERT_STATUS(vq_cache_key_channel_bits(b, 0, 1, wb8), VQ_STATUS_OK);
        int lo8 = 8, hi8 = 0;
        for (int i = 0; i < d; i++) {
            lo8 = wb8[i] < lo8 ? wb8[i] : lo8;
            hi8 = wb8[i] > hi8 ? wb8[i] : hi8;
        }
        ASSERT(lo8 >= 2 && hi8 > lo8); /* learned, and not one width */
        vq_cache_memory(b, &mb);
        ASSERT_EQ_INT(mb.center_bytes, (size_t)n_kv * d);
        /* reset: the next (long) first append learns widths again */
        vq_cache_reset(a);
        vq_cache_reset(b);
        ASSERT_STATUS(vq_cache_observe_queries(b, 0, q, nqh, 4), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_append(a, 0, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_append(b, 0, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_attend(a, 0, q, nqh, 4, NULL, 0.125f, oa), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_attend(b, 0, q, nqh, 4, NULL, 0.125f, ob), VQ_STATUS_OK);
        ASSERT(memcmp(oa, ob, sizeof oa) != 0);
    }
    vq_cache_free(a);
    vq_cache_free(b);
    free(k);
    free(v);
    free(q);
}

/* Token by token (the queries of each token shown before its append, as the engine decodes)
 * the widths are learned at the append that completes the first G tokens and equal those of
 * one append of the same G rows after the same queries shown at once (rows exact in fp16, as
 * the held ones are kept); the keys and the attention after more tokens are the same bits. */
TEST(token_by_token_learns_at_first_group) {
    const int n_kv = 2, d = 64, g = 32, nqh = 6, n = 80;
    float ksd[64], qsd[64];
    for (int i = 0; i < d; i++) {
        ksd[i] = 0.5f + (float)(i % 9);
        qsd[i] = i % 11 == 3 ? 3.0f : 0.3f;
    }
    float *k = gen_rows(n, n_kv, d, NULL, ksd), *v = gen_rows(n, n_kv, d, NULL, ksd);
    float *q = gen_rows(n, nqh, d, NULL, qsd);
    uint16_t *h16 = malloc((size_t)n * n_kv * d * sizeof(uint16_t));
    vq_fp32_to_fp16_row(k, h16, (int64_t)n * n_kv * d);
    vq_fp16_to_fp32_row(h16, k, (int64_t)n * n_kv * d);
    free(h16);
    struct vq_cache_params p = mkp(d, n_kv, 4, g, 1);
    vq_cache *a = vq_cache_create(&p, NULL), *b = vq_cache_create(&p, NULL);
    ASSERT(a && b);
    if (a && b) {
        const size_t row = (size_t)n_kv * d;
        ASSERT_STATUS(vq_cache_observe_queries(a, 0, q, nqh, g), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_append(a, 0, k, v, VQ_DTYPE_F32, g), VQ_STATUS_OK);
        uint8_t wa[64], wb[64];
        for (int t = 0; t < n; t++) {
            if (t >= g) {
                ASSERT_STATUS(vq_cache_observe_queries(a, 0, q + (size_t)t * nqh * d, nqh, 1),
                              VQ_STATUS_OK);
                ASSERT_STATUS(vq_cache_append(a, 0, k + t * row, v + t * row, VQ_DTYPE_F32, 1),
                              VQ_STATUS_OK);
            }
            ASSERT_STATUS(vq_cache_observe_queries(b, 0, q + (size_t)t * nqh * d, nqh, 1),
                          VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_append(b, 0, k + t * row, v + t * row, VQ_DTYPE_F32, 1),
                          VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_key_channel_bits(b, 0, 1, wb), VQ_STATUS_OK);
            if (t == g - 2)
                for (int i = 0; i < d; i++) ASSERT_EQ_INT(wb[i], 0); /* not yet */
        }
        int spread = 0;
        for (int h = 0; h < n_kv; h++) {
            ASSERT_STATUS(vq_cache_key_channel_bits(a, 0, h, wa), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_key_channel_bits(b, 0, h, wb), VQ_STATUS_OK);
            ASSERT(memcmp(wa, wb, sizeof wa) == 0);
            for (int i = 0; i < d; i++) spread |= 1 << wa[i];
        }
        ASSERT(spread != (1 << 4) && !(spread & 1));
        float oa[3 * 6 * 64], ob[3 * 6 * 64];
        const float *ql = q + (size_t)(n - 3) * nqh * d;
        ASSERT_STATUS(vq_cache_attend(a, 0, ql, nqh, 3, NULL, 0.125f, oa), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_attend(b, 0, ql, nqh, 3, NULL, 0.125f, ob), VQ_STATUS_OK);
        ASSERT(memcmp(oa, ob, sizeof oa) == 0);
    }
    vq_cache_free(a);
    vq_cache_free(b);
    free(k);
    free(v);
    free(q);
}

TEST(bad_arguments) {
    vq_status st = VQ_STATUS_OK;
    struct vq_cache_params p = mkp(64, 1, 4, 32, 3);
    ASSERT(vq_cache_create(&p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    p.key_channel_bits = -1;
    ASSERT(vq_cache_create(&p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    struct vq_cache_memory m;
    ASSERT_STATUS(vq_kv_estimate(&p, 10, &m), VQ_STATUS_INVALID_ARG);
    p.key_channel_bits = 1;
    vq_cache *c = vq_cache_create(&p, NULL);
    ASSERT(c != NULL);
    uint8_t w[64];
    ASSERT_STATUS(vq_cache_key_channel_bits(c, 2, 0, w), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_cache_key_channel_bits(c, 0, 1, w), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_cache_key_channel_bits(c, 0, 0, NULL), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_cache_key_channel_bits(NULL, 0, 0, w), VQ_STATUS_INVALID_ARG);
    vq_cache_free(c);
    p = mkp(64, 1, 4, 32, 1);
    p.key.method = VQ_METHOD_TURBOQUANT_MSE;
    ASSERT(vq_cache_create(&p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_UNSUPPORTED);
    ASSERT_STATUS(vq_kv_estimate(&p, 10, &m), VQ_STATUS_UNSUPPORTED);
}

/* Keys of equal spread in every channel, queries with 8 of 64 channels at 16x the spread
 * (256x the energy): kivi-3 keys (fp32 values, G 32) with per-channel widths cut the attention
 * error against exact attention by a large factor at the same key bytes. */
TEST(quality_gain_query_heavy_channels) {
    const int n_kv = 2, d = 64, n = 256, nqh = 6, nq = 16;
    float ksd[64], qsd[64];
    for (int i = 0; i < d; i++) {
        ksd[i] = 1.0f;
        qsd[i] = (i * 5) % 64 < 8 ? 0.8f : 0.05f;
    }
    float *k = gen_rows(n, n_kv, d, NULL, ksd), *v = gen_rows(n, n_kv, d, NULL, ksd);
    float *q = gen_rows(nq, nqh, d, NULL, qsd);
    float *o[3];
    for (int j = 0; j < 3; j++) { /* exact, one width, per-channel widths */
        struct vq_cache_params p = mkp(d, n_kv, 3, 32, j == 2);
        if (j == 0) p.key.method = VQ_METHOD_FP32;
        vq_cache *c = vq_cache_create(&p, NULL);
        ASSERT(c != NULL);
        o[j] = calloc((size_t)nq * nqh * d, sizeof(float));
        if (!c) continue;
        ASSERT_STATUS(vq_cache_observe_queries(c, 0, q, nqh, nq), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_append(c, 0, k, v, VQ_DTYPE_F32, n), VQ_STATUS_OK);
        ASSERT_STATUS(vq_cache_attend(c, 0, q, nqh, nq, NULL, 1.0f, o[j]), VQ_STATUS_OK);
        vq_cache_free(c);
    }
    const double e_off = rel_l2(o[1], o[0], (int64_t)nq * nqh * d);
    const double e_on = rel_l2(o[2], o[0], (int64_t)nq * nqh * d);
    fprintf(stderr, "  kivi-3 keys: attention rel err one width %.4g, per-channel widths %.4g\n",
            e_off, e_on);
    ASSERT_LE(e_on * 2.0, e_off);
    for (int j = 0; j < 3; j++) free(o[j]);
    free(k);
    free(v);
    free(q);
}

int main(void) {
    RUN(allocation_rule);
    RUN(learned_widths_follow_the_rule);
    RUN(zero_width_channels);
    RUN(fused_equals_reference_and_scalar);
    RUN(memory_short_append_relearning);
    RUN(token_by_token_learns_at_first_group);
    RUN(bad_arguments);
    RUN(quality_gain_query_heavy_channels);
    return TEST_REPORT();
}
