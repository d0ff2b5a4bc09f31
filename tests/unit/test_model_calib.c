/* test_model_calib.c — calibrated methods on real keys/values of SmolLM2-135M (label "model"):
 * record post-RoPE K/V with an fp32 cache (vq_cache_read) over fixed text, calibrate on the
 * first 2/3 of the tokens of each layer (heads pooled), and measure held-out reconstruction
 * error of spectral and vecinfer against turboquant_mse at comparable bits; the calibrated
 * methods must win where the design says they should. Prints the numbers. */
#include <unistd.h>

#include "test.h"
#include "veloxquant.h"
#include "vq_engine.h"
#include "engine/model.h"
#include "engine/tokenizer.h"

#define MODEL VQ_MODELS_DIR "/SmolLM2-135M-Instruct.Q4_1.gguf"

static const char *text_ =
    "The lighthouse keeper climbed the stairs every evening at dusk. He trimmed the wick, "
    "polished the lens and wrote the weather in a thick book. Ships passed in the night, and "
    "their captains never knew his name, but they trusted the light. One autumn a storm broke "
    "the glass, and he held a lantern in the window until morning. In mathematics, a prime "
    "number has exactly two divisors: one and itself. The first primes are 2, 3, 5, 7, 11 and "
    "13. Euclid proved that there are infinitely many of them with a short argument that still "
    "appears in every textbook. To make tea, boil fresh water, warm the pot, add the leaves and "
    "wait three to five minutes before pouring.";

static vq_model *g_m;

static double rel_mse(enum vq_method m, int bits, int pqc, int pqv, const vq_calib_data *cd,
                      int layer, enum vq_role role, const float *x, int64_t n, int d, double *bpe) {
    struct vq_codec_params p = vq_codec_params_default();
    p.method = m;
    p.role = role;
    p.head_dim = d;
    p.bits = bits;
    p.pq_codeword_bits = pqc;
    p.pq_subvec_dim = pqv;
    p.calib = cd;
    p.calib_layer = layer;
    vq_status st;
    vq_codec *c = vq_codec_create(&p, &st);
    if (!c) {
        fprintf(stderr, "  create %s: %s\n", vq_method_name(m), vq_status_str(st));
        return 1e9;
    }
    *bpe = vq_codec_bits_per_elem(c);
    uint8_t *codes = malloc(vq_codec_block_bytes(c) * (size_t)n);
    float *y = malloc(sizeof(float) * (size_t)(n * d));
    double e = 0, s = 0;
    if (vq_codec_encode(c, x, n, codes) == VQ_STATUS_OK &&
        vq_codec_decode(c, codes, n, y) == VQ_STATUS_OK) {
        for (int64_t i = 0; i < n * d; i++) {
            e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
            s += (double)x[i] * x[i];
        }
    } else {
        e = 1e9;
        s = 1;
    }
    free(codes);
    free(y);
    vq_codec_free(c);
    return e / s;
}

TEST(real_keys_and_values) {
    vq_status st;
    vq_tokenizer *tok = vq_tok_create(vq_model_gguf(g_m), &st);
    ASSERT(tok != NULL);
    if (!tok) return;
    int32_t ids[512];
    int64_t n = vq_tok_encode(tok, text_, strlen(text_), true, false, ids, 512);
    vq_tok_free(tok);
    ASSERT(n >= 120);
    if (n < 120) return;
    const struct vq_model_info *mi = vq_model_info_get(g_m);
    const int d = mi->head_dim, H = mi->n_kv_heads;
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = n;
    cp.n_threads = 2;
    cp.cache.key.method = cp.cache.value.method = VQ_METHOD_FP32;
    vq_ctx *ctx = vq_ctx_create(g_m, &cp, &st);
    ASSERT(ctx != NULL);
    if (!ctx) return;
    ASSERT_STATUS(vq_ctx_eval(ctx, ids, n, NULL), VQ_STATUS_OK);
    const int64_t n_cal = n * 2 / 3, n_tst = n - n_cal;
    float *K = malloc(sizeof(float) * (size_t)(n * d)),
          *V = malloc(sizeof(float) * (size_t)(n * d));
    float *kc = malloc(sizeof(float) * (size_t)(n_cal * H * d)),
          *vc = malloc(sizeof(float) * (size_t)(n_cal * H * d));
    float *kt = malloc(sizeof(float) * (size_t)(n_tst * H * d)),
          *vt = malloc(sizeof(float) * (size_t)(n_tst * H * d));
    const int layers[4] = {1, 8, 16, 28};
    double sum[8] = {0};
    vq_calib_data *cd = vq_calib_data_create(mi->n_layers, d, &st);
    for (int li = 0; li < 4; li++) {
        const int l = layers[li];
        for (int h = 0; h < H; h++) {
            ASSERT_STATUS(vq_cache_read(vq_ctx_cache(ctx), l, h, K, V), VQ_STATUS_OK);
            memcpy(kc + (size_t)h * n_cal * d, K, sizeof(float) * (size_t)(n_cal * d));
            memcpy(vc + (size_t)h * n_cal * d, V, sizeof(float) * (size_t)(n_cal * d));
            memcpy(kt + (size_t)h * n_tst * d, K + n_cal * d, sizeof(float) * (size_t)(n_tst * d));
            memcpy(vt + (size_t)h * n_tst * d, V + n_cal * d, sizeof(float) * (size_t)(n_tst * d));
        }
        ASSERT_STATUS(vq_calib_fit_spectral(cd, l, VQ_ROLE_KEY, kc, n_cal * H), VQ_STATUS_OK);
        ASSERT_STATUS(vq_calib_fit_spectral(cd, l, VQ_ROLE_VALUE, vc, n_cal * H), VQ_STATUS_OK);
        ASSERT_STATUS(vq_calib_fit_vecinfer(cd, l, VQ_ROLE_KEY, kc, n_cal * H, 8, 4, 1),
                      VQ_STATUS_OK);
        ASSERT_STATUS(vq_calib_fit_vecinfer(cd, l, VQ_ROLE_VALUE, vc, n_cal * H, 8, 4, 1),
                      VQ_STATUS_OK);
        double b[8], e[8];
        const int64_t nt = n_tst * H;
        e[0] = rel_mse(VQ_METHOD_TURBOQUANT_MSE, 2, 0, 0, NULL, l, VQ_ROLE_KEY, kt, nt, d, &b[0]);
        e[1] = rel_mse(VQ_METHOD_SPECTRAL, 2, 0, 0, cd, l, VQ_ROLE_KEY, kt, nt, d, &b[1]);
        e[2] = rel_mse(VQ_METHOD_VECINFER, 2, 0, 0, cd, l, VQ_ROLE_KEY, kt, nt, d, &b[2]);
        e[3] = rel_mse(VQ_METHOD_TURBOQUANT_MSE, 3, 0, 0, NULL, l, VQ_ROLE_KEY, kt, nt, d, &b[3]);
        e[4] = rel_mse(VQ_METHOD_SPECTRAL, 3, 0, 0, cd, l, VQ_ROLE_KEY, kt, nt, d, &b[4]);
        e[5] = rel_mse(VQ_METHOD_TURBOQUANT_MSE, 2, 0, 0, NULL, l, VQ_ROLE_VALUE, vt, nt, d, &b[5]);
        e[6] = rel_mse(VQ_METHOD_SPECTRAL, 2, 0, 0, cd, l, VQ_ROLE_VALUE, vt, nt, d, &b[6]);
        e[7] = rel_mse(VQ_METHOD_VECINFER, 2, 0, 0, cd, l, VQ_ROLE_VALUE, vt, nt, d, &b[7]);
        fprintf(stderr,
                "  layer %2d (d_s %d) keys: tq2 %.4f (%.2f b) spectral2 %.4f (%.2f b) vecinfer2 "
                "%.4f (%.2f b) | "
                "tq3 %.4f spectral3 %.4f | values: tq2 %.4f spectral2 %.4f vecinfer2 %.4f\n",
                l, vq_calib_signal_dims(cd, l, VQ_ROLE_KEY), e[0], b[0], e[1], b[1], e[2], b[2],
                e[3], e[4], e[5], e[6], e[7]);
        for (int i = 0; i < 8; i++) sum[i] += e[i] / 4;
    }
    fprintf(stderr,
            "  mean rel-MSE keys: tq2 %.4f spectral2 %.4f vecinfer2 %.4f tq3 %.4f spectral3 %.4f; "
            "values: tq2 %.4f spectral2 %.4f vecinfer2 %.4f\n",
            sum[0], sum[1], sum[2], sum[3], sum[4], sum[5], sum[6], sum[7]);
    /* calibrated PCA + water-filling must beat the data-independent rotation on real keys */
    ASSERT_LE(sum[1], sum[0]);
    ASSERT_LE(sum[4], sum[3]);
    vq_calib_data_free(cd);
    free(K);
    free(V);
    free(kc);
    free(vc);
    free(kt);
    free(vt);
    vq_ctx_free(ctx);
}

int main(void) {
    if (access(MODEL, R_OK) != 0) {
        fprintf(stderr, "model %s missing (run scripts/fetch_models.sh)\n", MODEL);
        return 1;
    }
    vq_status st;
    g_m = vq_model_load(MODEL, &st);
    if (!g_m) {
        fprintf(stderr, "load failed: %s\n", vq_engine_last_error());
        return 1;
    }
    RUN(real_keys_and_values);
    vq_model_free(g_m);
    return TEST_REPORT();
}
