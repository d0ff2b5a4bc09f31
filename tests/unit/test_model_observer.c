/* test_model_observer.c — the layer hook of vq_ctx and the KV observer (src/eval/observer.h)
 * on the default model: hook contract (order, positions, error propagation, removal);
 * fp32 K/V give exact statistics (cosine 1, KL 0, slope 1) and key-norm / channel statistics
 * equal to a direct computation over the stored keys; fp16 within fp16 rounding;
 * turboquant_mse 2-bit near the codec's Gaussian cosine (~0.94) with KL > 0 and larger than
 * 4-bit; sample counts follow the documented sampling; the shadow follows resets and
 * truncations; the JSON has one entry per layer. */
#include "test.h"

#include <stddef.h>
#include <stdint.h>

#include "vq_engine.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "eval/observer.h"
#include "observer_json.h"

#define MODEL VQ_MODELS_DIR "/SmolLM2-135M-Instruct.Q4_1.gguf"
#define TEXT \
    "The history of the printing press begins in the fifteenth century, when Johannes " \
    "Gutenberg combined movable metal type, oil-based ink and a screw press. Within a few " \
    "decades printing shops had spread to more than two hundred cities across Europe."

static vq_model *g_m;
static int32_t g_ids[256];
static int g_n;

static vq_ctx *make_ctx(enum vq_method km, int kb, enum vq_method vm, int vb, int center,
                        int batch) {
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = 128;
    cp.n_threads = 1;
    cp.n_batch = batch;
    cp.cache.key.method = km;
    cp.cache.key.bits = kb;
    cp.cache.value.method = vm;
    cp.cache.value.bits = vb;
    cp.cache.center_keys = center;
    cp.cache.center_values = center;
    vq_status st;
    vq_ctx *c = vq_ctx_create(g_m, &cp, &st);
    if (!c) fprintf(stderr, "ctx: %s\n", vq_engine_last_error());
    return c;
}

/* Prefill g_ids then n_dec decode steps: greedy, or (forced) the prompt's tokens again so
 * that runs with different caches see the same tokens. */
static int run_ex(vq_ctx *c, int n_dec, int forced) {
    const int nv = vq_model_info_get(g_m)->n_vocab;
    float *lg = malloc(sizeof(float) * (size_t)nv);
    if (!lg) return 0;
    int ok = vq_ctx_eval(c, g_ids, g_n, lg) == VQ_STATUS_OK;
    for (int s = 0; ok && s < n_dec; s++) {
        int32_t best = 0;
        for (int i = 1; i < nv; i++)
            if (lg[i] > lg[best]) best = i;
        if (forced) best = g_ids[1 + s % (g_n - 1)];
        ok = vq_ctx_eval(c, &best, 1, lg) == VQ_STATUS_OK;
    }
    free(lg);
    return ok;
}
static int run(vq_ctx *c, int n_dec) { return run_ex(c, n_dec, 0); }

/* ---- the hook itself ---- */

struct rec {
    int calls, bad, fail_at, expect_layer;
    int64_t last_pos0, last_n;
};

static vq_status rec_hook(void *user, const struct vq_layer_event *ev) {
    struct rec *r = user;
    const struct vq_model_info *I = vq_model_info_get(g_m);
    if (ev->layer != r->expect_layer) r->bad++;
    r->expect_layer = (ev->layer + 1) % I->n_layers;
    if (ev->n_heads != I->n_heads || ev->n_kv_heads != I->n_kv_heads ||
        ev->head_dim != I->head_dim || !ev->q || !ev->k || !ev->v || !ev->attn_out || !ev->cache ||
        vq_cache_n_tokens(ev->cache, ev->layer) != ev->pos0 + ev->n_tokens ||
        fabsf(ev->scale - 1.0f / sqrtf((float)I->head_dim)) > 1e-7f)
        r->bad++;
    r->last_pos0 = ev->pos0;
    r->last_n = ev->n_tokens;
    r->calls++;
    if (r->fail_at && r->calls == r->fail_at) return VQ_STATUS_RANGE;
    return VQ_STATUS_OK;
}

TEST(hook_contract) {
    const int L = vq_model_info_get(g_m)->n_layers;
    vq_ctx *c = make_ctx(VQ_METHOD_FP16, 16, VQ_METHOD_FP16, 16, -1, 16);
    ASSERT(c != NULL);
    if (!c) return;
    struct rec r = {0};
    vq_ctx_set_layer_hook(c, rec_hook, &r);
    ASSERT(run(c, 2));
    const int passes = (g_n + 15) / 16 + 2;
    ASSERT_EQ_INT(r.calls, passes * L);
    ASSERT_EQ_INT(r.bad, 0);
    ASSERT_EQ_INT(r.last_pos0, g_n + 1);
    ASSERT_EQ_INT(r.last_n, 1);
    /* an error from the hook aborts the eval and drops its tokens */
    const int64_t np = vq_ctx_n_past(c);
    r.fail_at = r.calls + 5;
    int32_t t = 42;
    ASSERT_STATUS(vq_ctx_eval(c, &t, 1, NULL), VQ_STATUS_RANGE);
    ASSERT_EQ_INT(vq_ctx_n_past(c), np);
    ASSERT_EQ_INT(r.calls, r.fail_at);
    /* removed: no more calls */
    vq_ctx_set_layer_hook(c, NULL, &r);
    const int before = r.calls;
    ASSERT_STATUS(vq_ctx_eval(c, &t, 1, NULL), VQ_STATUS_OK);
    ASSERT_EQ_INT(r.calls, before);
    vq_ctx_free(c);
}

/* ---- observer ---- */

static double mean_over_layers(const vq_observer *o, size_t off) {
    double s = 0;
    const int L = vq_observer_n_layers(o);
    for (int l = 0; l < L; l++) {
        struct vq_observer_stats st;
        vq_observer_stats_get(o, l, -1, &st);
        s += *(const double *)((const char *)&st + off);
    }
    return s / L;
}
#define MEAN(o, field) mean_over_layers(o, offsetof(struct vq_observer_stats, field))

TEST(observer_args) {
    vq_status st = VQ_STATUS_OK;
    ASSERT(vq_observer_create(NULL, NULL, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    vq_ctx *c = make_ctx(VQ_METHOD_FP16, 16, VQ_METHOD_FP16, 16, -1, 64);
    if (!c) {
        ASSERT(0);
        return;
    }
    struct vq_observer_params p = vq_observer_params_default();
    p.max_queries = 0;
    ASSERT(vq_observer_create(c, &p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    ASSERT(vq_ctx_layer_hook_user(c) == NULL); /* a failed create attaches nothing */
    /* a second observer replaces the first; freeing the first leaves the second attached */
    vq_observer *a = vq_observer_create(c, NULL, &st), *b = vq_observer_create(c, NULL, &st);
    ASSERT(a && b && vq_ctx_layer_hook_user(c) == b);
    vq_observer_free(a);
    ASSERT(vq_ctx_layer_hook_user(c) == b);
    vq_observer_free(b);
    ASSERT(vq_ctx_layer_hook_user(c) == NULL);
    int32_t t = 1;
    ASSERT_STATUS(vq_ctx_eval(c, &t, 1, NULL), VQ_STATUS_OK);
    ASSERT(vq_observer_create(c, NULL, &st) == NULL); /* tokens already evaluated */
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    vq_ctx_free(c);
}

/* fp32 keys/values: every statistic exact; key norms and channels equal a direct computation
 * over the stored keys; sample counts as documented. */
TEST(observer_fp32_exact) {
    const struct vq_model_info *I = vq_model_info_get(g_m);
    const int L = I->n_layers, KV = I->n_kv_heads, d = I->head_dim, B = 16, NDEC = 5, MQ = 4;
    vq_ctx *c = make_ctx(VQ_METHOD_FP32, 16, VQ_METHOD_FP32, 16, 0, B);
    if (!c) {
        ASSERT(0);
        return;
    }
    struct vq_observer_params p = vq_observer_params_default();
    p.max_queries = MQ;
    vq_status st;
    vq_observer *o = vq_observer_create(c, &p, &st);
    ASSERT(o != NULL);
    if (!o) {
        vq_ctx_free(c);
        return;
    }
    ASSERT(run(c, NDEC));
    ASSERT_STATUS(vq_observer_snapshot(o), VQ_STATUS_OK);
    const int64_t n = vq_ctx_n_past(c);
    ASSERT_EQ_INT(n, g_n + NDEC);
    ASSERT_EQ_INT(vq_observer_n_passes(o), (g_n + B - 1) / B + NDEC);
    /* expected sample counts: per pass, m = min(n, MQ) positions pos0 + floor((j+1)n/m) - 1 */
    int64_t want_attn = 0, want_ip = 0;
    for (int64_t p0 = 0; p0 < n;) {
        const int64_t nb = p0 < g_n ? (g_n - p0 < B ? g_n - p0 : B) : 1;
        const int64_t m = nb < MQ ? nb : MQ;
        for (int64_t j = 0; j < m; j++) want_ip += (p0 + (j + 1) * nb / m) * I->n_heads;
        want_attn += m * I->n_heads;
        p0 += nb;
    }
    float *K = malloc(sizeof(float) * (size_t)(n * d));
    double *cs = calloc((size_t)(KV * d), sizeof(double));
    for (int l = 0; l < L; l++) {
        struct vq_observer_stats s;
        ASSERT_STATUS(vq_observer_stats_get(o, l, -1, &s), VQ_STATUS_OK);
        ASSERT_EQ_INT(s.n_vectors, n * KV);
        ASSERT_NEAR(s.cos_k, 1.0, 1e-12);
        ASSERT_NEAR(s.cos_v_min, 1.0, 1e-12);
        ASSERT(s.rel_mse_k == 0.0 && s.rel_mse_v == 0.0);
        ASSERT_EQ_INT(s.n_attn, want_attn);
        ASSERT_EQ_INT(s.n_ip, want_ip);
        ASSERT(s.attn_kl_mean == 0.0 && s.attn_kl_max == 0.0);
        ASSERT(s.ip_rel_err == 0.0 && s.ip_err_sd == 0.0);
        ASSERT_NEAR(s.ip_slope, 1.0, 1e-9);
        ASSERT_NEAR(s.ip_bias, 0.0, 1e-9);
        ASSERT_NEAR(s.attn_out_cos, 1.0, 1e-5); /* fused fp32 attention vs double reference */
        /* direct key-norm statistics over the stored keys */
        double sum = 0, sum2 = 0, mx = 0;
        memset(cs, 0, sizeof(double) * (size_t)(KV * d));
        for (int g = 0; g < KV; g++) {
            ASSERT_STATUS(vq_cache_read(vq_ctx_cache(c), l, g, K, NULL), VQ_STATUS_OK);
            double hs = 0;
            for (int64_t t = 0; t < n; t++) {
                double ss = 0;
                for (int j = 0; j < d; j++) {
                    ss += (double)K[t * d + j] * K[t * d + j];
                    cs[g * d + j] += fabs(K[t * d + j]);
                }
                sum += sqrt(ss);
                sum2 += ss;
                hs += sqrt(ss);
                if (sqrt(ss) > mx) mx = sqrt(ss);
            }
            struct vq_observer_stats h;
            ASSERT_STATUS(vq_observer_stats_get(o, l, g, &h), VQ_STATUS_OK);
            ASSERT_NEAR(h.knorm_mean, hs / (double)n, 1e-9 * hs / (double)n);
        }
        const double cnt = (double)(n * KV), mean = sum / cnt;
        ASSERT_EQ_INT(s.n_keys, n * KV);
        ASSERT_NEAR(s.knorm_mean, mean, 1e-9 * mean);
        ASSERT_NEAR(s.knorm_std, sqrt(sum2 / cnt - mean * mean), 1e-6 * mean);
        ASSERT_NEAR(s.knorm_max, mx, 1e-6 * mx);
        ASSERT_NEAR(s.knorm_max_over_mean, mx / mean, 1e-6);
        /* largest channel by mean |k_c| */
        int best = 0;
        for (int i = 1; i < KV * d; i++)
            if (cs[i] > cs[best]) best = i;
        struct vq_observer_channel ch[3];
        ASSERT_EQ_INT(vq_observer_top_channels(o, l, ch, 3), 3);
        ASSERT_EQ_INT(ch[0].kv_head * d + ch[0].channel, best);
        ASSERT_NEAR(ch[0].mean_abs, cs[best] / (double)n, 1e-9 * cs[best]);
        ASSERT(ch[0].mean_abs >= ch[1].mean_abs && ch[1].mean_abs >= ch[2].mean_abs);
        ASSERT(s.chan_max_over_median > 1.0);
    }
    free(cs);
    free(K);
    ASSERT(vq_observer_bytes(o) >= (size_t)(n * L * KV * d * 8));
    /* JSON: one entry per layer, means, worst layers */
    cJSON *js = vq_observer_to_json(o);
    ASSERT(js != NULL);
    if (js) {
        ASSERT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(js, "layers")), L);
        cJSON *mean = cJSON_GetObjectItem(js, "mean");
        ASSERT(cJSON_IsNumber(cJSON_GetObjectItem(mean, "attn_kl_mean")));
        ASSERT(cJSON_IsNumber(cJSON_GetObjectItem(mean, "knorm_max_over_mean")));
        ASSERT_EQ_INT(cJSON_GetArraySize(
                          cJSON_GetObjectItem(cJSON_GetObjectItem(js, "worst_layers"), "cos_k")),
                      5);
        cJSON *l0 = cJSON_GetArrayItem(cJSON_GetObjectItem(js, "layers"), 0);
        ASSERT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(l0, "cos_k_heads")), KV);
        ASSERT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(l0, "top_channels")), 4);
        cJSON_Delete(js);
    }
    /* after a reset the shadow follows the context (pos0 back to 0) */
    vq_ctx_reset(c);
    ASSERT(run(c, 1));
    ASSERT_STATUS(vq_observer_snapshot(o), VQ_STATUS_OK);
    struct vq_observer_stats s;
    vq_observer_stats_get(o, 0, -1, &s);
    ASSERT_EQ_INT(s.n_vectors, (n + g_n + 1) * KV);
    ASSERT_EQ_INT(s.n_keys, (n + g_n + 1) * KV);
    ASSERT(s.attn_kl_max == 0.0);
    /* and after a truncate */
    ASSERT_STATUS(vq_ctx_truncate(c, 7), VQ_STATUS_OK);
    int32_t t = 100;
    ASSERT_STATUS(vq_ctx_eval(c, &t, 1, NULL), VQ_STATUS_OK);
    ASSERT_STATUS(vq_observer_snapshot(o), VQ_STATUS_OK);
    vq_observer_free(o);
    vq_ctx_free(c);
}

/* Runs the prompt with one K/V method and returns the observer (caller frees o and *c). */
static vq_observer *observe(enum vq_method m, int bits, int center, vq_ctx **c) {
    *c = make_ctx(m, bits, m, bits, center, 64);
    if (!*c) return NULL;
    vq_status st;
    vq_observer *o = vq_observer_create(*c, NULL, &st);
    if (!o || !run_ex(*c, 8, 1) || vq_observer_snapshot(o) != VQ_STATUS_OK) {
        vq_observer_free(o);
        vq_ctx_free(*c);
        *c = NULL;
        return NULL;
    }
    return o;
}

TEST(observer_fp16_and_tq) {
    vq_ctx *c16, *c2, *c4, *c2c;
    vq_observer *o16 = observe(VQ_METHOD_FP16, 16, -1, &c16);
    vq_observer *o2 = observe(VQ_METHOD_TURBOQUANT_MSE, 2, 0, &c2);
    vq_observer *o4 = observe(VQ_METHOD_TURBOQUANT_MSE, 4, 0, &c4);
    vq_observer *o2c = observe(VQ_METHOD_TURBOQUANT_MSE, 2, -1, &c2c); /* centering auto (on) */
    ASSERT(o16 && o2 && o4 && o2c);
    if (o16 && o2 && o4 && o2c) {
        const double cos16 = MEAN(o16, cos_k), kl16 = MEAN(o16, attn_kl_mean);
        const double cos2 = MEAN(o2, cos_k), cosv2 = MEAN(o2, cos_v), kl2 = MEAN(o2, attn_kl_mean);
        const double cos4 = MEAN(o4, cos_k), kl4 = MEAN(o4, attn_kl_mean);
        fprintf(stderr,
                "fp16 cos_k %.8f kl %.3g | tq2 cos_k %.4f cos_v %.4f kl %.4g ip_rel %.3f | "
                "tq4 cos_k %.4f kl %.4g | tq2 centered cos_k %.4f kl %.4g\n",
                cos16, kl16, cos2, cosv2, kl2, MEAN(o2, ip_rel_err), cos4, kl4, MEAN(o2c, cos_k),
                MEAN(o2c, attn_kl_mean));
        /* fp16: cosine 1 within fp16 rounding (relative step 2^-11), KL ~ 0 */
        ASSERT_NEAR(cos16, 1.0, 1e-6);
        ASSERT_NEAR(MEAN(o16, cos_v_min), 1.0, 1e-5);
        ASSERT_LE(kl16, 1e-5);
        ASSERT_NEAR(MEAN(o16, ip_slope), 1.0, 1e-3);
        ASSERT_NEAR(MEAN(o16, attn_out_cos), 1.0, 1e-5);
        /* turboquant_mse 2-bit: the Gaussian Lloyd-Max cosine sqrt(1 - 0.1175) = 0.939 */
        ASSERT_NEAR(cos2, 0.94, 0.02);
        ASSERT_NEAR(cosv2, 0.94, 0.02);
        ASSERT_NEAR(cos4, 0.995, 0.004);
        ASSERT_GE(kl2, 1e-3);
        ASSERT_GE(kl2, 2.0 * kl4);
        ASSERT_GE(kl4, 10.0 * kl16);
        ASSERT_GE(MEAN(o2, ip_rel_err), MEAN(o4, ip_rel_err));
        ASSERT(MEAN(o2, attn_out_cos) < MEAN(o4, attn_out_cos));
        /* centering keeps the common part of the keys: a better full-vector cosine */
        ASSERT(MEAN(o2c, cos_k) > cos2);
        /* same tokens: layer-0 keys do not depend on the cache */
        struct vq_observer_stats a, b;
        vq_observer_stats_get(o16, 0, -1, &a);
        vq_observer_stats_get(o2, 0, -1, &b);
        ASSERT_NEAR(a.knorm_mean, b.knorm_mean, 1e-9 * a.knorm_mean);
    }
    vq_observer_free(o16);
    vq_ctx_free(c16);
    vq_observer_free(o2);
    vq_ctx_free(c2);
    vq_observer_free(o4);
    vq_ctx_free(c4);
    vq_observer_free(o2c);
    vq_ctx_free(c2c);
}

int main(void) {
    vq_status st;
    g_m = vq_model_load(MODEL, &st);
    if (!g_m) {
        fprintf(stderr, "cannot load %s: %s (scripts/fetch_models.sh)\n", MODEL,
                vq_engine_last_error());
        return 1;
    }
    vq_tokenizer *tok = vq_tok_create(vq_model_gguf(g_m), &st);
    if (!tok) {
        fprintf(stderr, "tokenizer: %s\n", vq_status_str(st));
        return 1;
    }
    int64_t n = vq_tok_encode(tok, TEXT, strlen(TEXT), true, false, g_ids, 256);
    vq_tok_free(tok);
    if (n < 20 || n > 256) {
        fprintf(stderr, "tokenize: %lld\n", (long long)n);
        return 1;
    }
    g_n = (int)n;
    RUN(hook_contract);
    RUN(observer_args);
    RUN(observer_fp32_exact);
    RUN(observer_fp16_and_tq);
    vq_model_free(g_m);
    return TEST_REPORT();
}
