/* test_cache_layers.c — mixed precision across layers in vq_cache: full-precision (fp16)
 * first/last layers (vq_cache_params.fp16_first_layers / fp16_last_layers) store exactly
 * fp16 bytes and attend exactly like an all-fp16 cache on those layers and like the
 * reference elsewhere; the analytic estimate (vq_kv_estimate) equals the measured bytes;
 * per-layer key/value bits combine with the fp16 edges; parameters are validated. */
#include "test.h"
#include "veloxquant.h"
#include "eval/kvmem.h"

static uint64_t rng_ = 0x9E3779B97F4A7C15ull;
static float nrand(void) {
    double s = 0;
    for (int i = 0; i < 4; i++) {
        rng_ ^= rng_ << 13;
        rng_ ^= rng_ >> 7;
        rng_ ^= rng_ << 17;
        s += (double)(rng_ >> 11) / 9007199254740992.0 - 0.5;
    }
    return (float)(s * 1.7320508);
}

static float *gen(int64_t n, float offset) {
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = nrand() + offset * (float)(i % 5 - 2);
    return x;
}

enum { L_ = 5, H_ = 2, D_ = 64, T_ = 77, QH_ = 4 };

static struct vq_cache_params base(void) {
    struct vq_cache_params p = vq_cache_params_default();
    p.n_layers = L_;
    p.n_kv_heads = H_;
    p.head_dim = D_;
    p.max_tokens = 256;
    p.page_tokens = 32;
    p.n_threads = 2;
    p.key.method = p.value.method = VQ_METHOD_TURBOQUANT_MSE;
    p.key.bits = 2;
    p.value.bits = 3;
    return p;
}

static size_t tq_bytes_per_token(int bits, enum vq_role role) {
    struct vq_codec_params q = vq_codec_params_default();
    q.method = VQ_METHOD_TURBOQUANT_MSE;
    q.head_dim = D_;
    q.bits = bits;
    q.role = role;
    vq_codec *c = vq_codec_create(&q, NULL);
    const size_t b = vq_codec_block_bytes(c) / (size_t)vq_codec_block_tokens(c);
    vq_codec_free(c);
    return b;
}

static void fill(vq_cache *c, const float *k, const float *v) {
    for (int l = 0; l < L_; l++) {
        /* two appends: the first one also fixes the centering vector */
        ASSERT_STATUS(vq_cache_append(c, l, k, v, VQ_DTYPE_F32, 40), VQ_STATUS_OK);
        ASSERT_STATUS(
            vq_cache_append(c, l, k + 40 * H_ * D_, v + 40 * H_ * D_, VQ_DTYPE_F32, T_ - 40),
            VQ_STATUS_OK);
    }
}

TEST(fp16_edges_bytes_and_attend) {
    float *k = gen((int64_t)T_ * H_ * D_, 0.8f), *v = gen((int64_t)T_ * H_ * D_, 0.0f);
    float *q = gen((int64_t)3 * QH_ * D_, 0.0f);
    const int kbits[L_] = {1, 4, 2, 3, 1};
    for (int variant = 0; variant < 3; variant++) {
        struct vq_cache_params p = base();
        p.fp16_first_layers = variant == 2 ? 0 : 1;
        p.fp16_last_layers = variant == 0 ? 1 : 2;
        if (variant == 1) p.key_bits_per_layer = kbits;
        vq_status st;
        vq_cache *c = vq_cache_create(&p, &st);
        ASSERT(c != NULL);
        if (!c) continue;
        struct vq_cache_params pf = base();
        pf.key.method = pf.value.method = VQ_METHOD_FP16;
        vq_cache *cf = vq_cache_create(&pf, NULL);
        fill(c, k, v);
        fill(cf, k, v);
        /* exact bytes: fp16 rows on the edge layers, tq codes (+ centering mu) elsewhere */
        size_t want_k = 0, want_v = 0, want_center = 0;
        for (int l = 0; l < L_; l++) {
            const int edge = l < p.fp16_first_layers || l >= L_ - p.fp16_last_layers;
            if (edge) {
                want_k += (size_t)T_ * H_ * D_ * 2;
                want_v += (size_t)T_ * H_ * D_ * 2;
            } else {
                const int kb = p.key_bits_per_layer ? kbits[l] : p.key.bits;
                want_k += (size_t)T_ * H_ * tq_bytes_per_token(kb, VQ_ROLE_KEY);
                want_v += (size_t)T_ * H_ * tq_bytes_per_token(p.value.bits, VQ_ROLE_VALUE);
                want_center += 2 * (size_t)H_ * D_ * 2; /* centering on (auto) for tq_mse */
            }
        }
        struct vq_cache_memory m, e;
        vq_cache_memory(c, &m);
        ASSERT_EQ_INT(m.key_bytes, want_k);
        ASSERT_EQ_INT(m.value_bytes, want_v);
        ASSERT_EQ_INT(m.window_bytes, 0);
        ASSERT_EQ_INT(m.center_bytes, want_center);
        ASSERT_EQ_INT(m.total_bytes, want_k + want_v + want_center);
        ASSERT_EQ_INT(m.fp16_bytes, (size_t)L_ * T_ * H_ * D_ * 2 * 2);
        /* the estimate agrees field by field */
        ASSERT_STATUS(vq_kv_estimate(&p, T_, &e), VQ_STATUS_OK);
        ASSERT_EQ_INT(e.key_bytes, m.key_bytes);
        ASSERT_EQ_INT(e.value_bytes, m.value_bytes);
        ASSERT_EQ_INT(e.window_bytes, m.window_bytes);
        ASSERT_EQ_INT(e.total_bytes, m.total_bytes);
        ASSERT_EQ_INT(e.key_total_bytes, m.key_total_bytes);
        ASSERT_EQ_INT(e.center_bytes, m.center_bytes);
        ASSERT_EQ_INT(e.allocated_bytes, m.allocated_bytes);
        /* attention: edge layers == the all-fp16 cache bit for bit; every layer == reference */
        float out[3 * QH_ * D_], ref[3 * QH_ * D_], f16out[3 * QH_ * D_];
        for (int l = 0; l < L_; l++) {
            const int edge = l < p.fp16_first_layers || l >= L_ - p.fp16_last_layers;
            ASSERT_STATUS(vq_cache_attend(c, l, q, QH_, 3, NULL, 0.125f, out), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_attend_ref(c, l, q, QH_, 3, NULL, 0.125f, ref), VQ_STATUS_OK);
            double worst = 0;
            for (int i = 0; i < 3 * QH_ * D_; i++) {
                const double dlt = fabs((double)out[i] - ref[i]);
                if (dlt > worst) worst = dlt;
            }
            ASSERT_LE(worst, edge ? 2e-3 : 2e-4); /* edge: llama.cpp's fp16 roundings */
            if (edge) {
                ASSERT_STATUS(vq_cache_attend(cf, l, q, QH_, 3, NULL, 0.125f, f16out),
                              VQ_STATUS_OK);
                ASSERT(memcmp(out, f16out, sizeof out) == 0);
                /* and the stored rows are the fp16 rounding of the input */
                float *kr = malloc(sizeof(float) * T_ * D_);
                ASSERT_STATUS(vq_cache_read(c, l, 1, kr, NULL), VQ_STATUS_OK);
                for (int t = 0; t < T_; t += 13)
                    ASSERT_EQ_INT(vq_fp32_to_fp16(kr[t * D_ + 5]),
                                  vq_fp32_to_fp16(k[((size_t)t * H_ + 1) * D_ + 5]));
                free(kr);
            } else {
                /* a quantized layer really differs from fp16 */
                ASSERT_STATUS(vq_cache_attend(cf, l, q, QH_, 3, NULL, 0.125f, f16out),
                              VQ_STATUS_OK);
                ASSERT(memcmp(out, f16out, sizeof out) != 0);
            }
        }
        vq_cache_free(c);
        vq_cache_free(cf);
    }
    free(k);
    free(v);
    free(q);
}

TEST(fp16_edges_all_layers_and_validation) {
    struct vq_cache_params p = base();
    struct vq_cache_memory m, e;
    /* overlapping edges cover every layer: the cache is an fp16 cache */
    p.fp16_first_layers = 3;
    p.fp16_last_layers = 3;
    vq_cache *c = vq_cache_create(&p, NULL);
    ASSERT(c != NULL);
    if (c) {
        float *k = gen((int64_t)T_ * H_ * D_, 0.5f), *v = gen((int64_t)T_ * H_ * D_, 0.0f);
        fill(c, k, v);
        vq_cache_memory(c, &m);
        ASSERT_EQ_INT(m.total_bytes, m.fp16_bytes);
        ASSERT_STATUS(vq_kv_estimate(&p, T_, &e), VQ_STATUS_OK);
        ASSERT_EQ_INT(e.total_bytes, m.total_bytes);
        free(k);
        free(v);
        vq_cache_free(c);
    }
    const int bad[4][2] = {{-1, 0}, {0, -1}, {L_ + 1, 0}, {0, L_ + 1}};
    for (int i = 0; i < 4; i++) {
        p = base();
        p.fp16_first_layers = bad[i][0];
        p.fp16_last_layers = bad[i][1];
        vq_status st = VQ_STATUS_OK;
        ASSERT(vq_cache_create(&p, &st) == NULL);
        ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
        ASSERT_STATUS(vq_kv_estimate(&p, 10, &e), VQ_STATUS_INVALID_ARG);
    }
    /* defaults: no fp16 edges */
    p = vq_cache_params_default();
    ASSERT_EQ_INT(p.fp16_first_layers, 0);
    ASSERT_EQ_INT(p.fp16_last_layers, 0);
}

TEST(fp16_edges_with_outlier_channels) {
    /* the outlier-channel modifier applies to the quantized layers only; bytes stay exact */
    float *k = gen((int64_t)T_ * H_ * D_, 0.8f), *v = gen((int64_t)T_ * H_ * D_, 0.0f);
    float *q = gen((int64_t)QH_ * D_, 0.0f);
    struct vq_cache_params p = base();
    p.fp16_first_layers = 1;
    p.fp16_last_layers = 1;
    p.n_outlier_channels = 4;
    p.n_calib_tokens = 20;
    vq_cache *c = vq_cache_create(&p, NULL);
    ASSERT(c != NULL);
    if (c) {
        fill(c, k, v);
        struct vq_cache_memory m, e;
        vq_cache_memory(c, &m);
        ASSERT_STATUS(vq_kv_estimate(&p, T_, &e), VQ_STATUS_OK);
        ASSERT_EQ_INT(e.total_bytes, m.total_bytes);
        ASSERT_EQ_INT(e.outlier_bytes, m.outlier_bytes);
        ASSERT_EQ_INT(e.key_total_bytes, m.key_total_bytes);
        /* 3 quantized layers x 2 heads: (2 + 4) bytes per token + 2 * 4 bytes of channel list */
        ASSERT_EQ_INT(m.outlier_bytes, (size_t)3 * H_ * (T_ * 6 + 8));
        float out[QH_ * D_], ref[QH_ * D_];
        for (int l = 0; l < L_; l++) {
            ASSERT_STATUS(vq_cache_attend(c, l, q, QH_, 1, NULL, 0.125f, out), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_attend_ref(c, l, q, QH_, 1, NULL, 0.125f, ref), VQ_STATUS_OK);
            const int edge = l < p.fp16_first_layers || l >= L_ - p.fp16_last_layers;
            for (int i = 0; i < QH_ * D_; i++) ASSERT_NEAR(out[i], ref[i], edge ? 2e-3 : 2e-4);
        }
        vq_cache_free(c);
    }
    free(k);
    free(v);
    free(q);
}

int main(void) {
    RUN(fp16_edges_with_outlier_channels);
    RUN(fp16_edges_bytes_and_attend);
    RUN(fp16_edges_all_layers_and_validation);
    return TEST_REPORT();
}
