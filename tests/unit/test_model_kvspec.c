/* test_model_kvspec.c — a context by KV config name on the default model (vq_ctx_create_kv):
 * the cache is the spec resolved for the model, generation runs on it, the fp16 name gives
 * exactly the logits of a context built from default params, and bad names say why. */
#include "test.h"

#include <stdint.h>
#include <unistd.h>

#include "vq_engine.h"

#define MODEL VQ_MODELS_DIR "/SmolLM2-135M-Instruct.Q4_1.gguf"
static vq_model *g_m;

TEST(kv4_context) {
    struct vq_ctx_params p = vq_ctx_params_default();
    p.n_ctx = 256;
    p.n_threads = 1;
    vq_status st;
    vq_ctx *c = vq_ctx_create_kv(g_m, &p, "kv4", &st);
    ASSERT(c != NULL);
    if (!c) return;
    const struct vq_cache_params *cp = vq_ctx_cache_params(c);
    ASSERT_EQ_INT(cp->key.method, VQ_METHOD_KIVI);
    ASSERT_EQ_INT(cp->key.bits, 4);
    ASSERT_EQ_INT(cp->key.group_size, 64);
    ASSERT_EQ_INT(cp->value.method, VQ_METHOD_TURBOQUANT_MSE);
    ASSERT_EQ_INT(cp->stream_sinks, 1);
    ASSERT_EQ_INT(cp->key_channel_bits, 1);
    ASSERT_EQ_INT(cp->max_tokens, 256);
    ASSERT_EQ_INT(vq_ctx_n_threads(c), 1);
    const int nv = vq_model_info_get(g_m)->n_vocab;
    float *lg = malloc(sizeof(float) * (size_t)nv);
    int32_t toks[100];
    for (int i = 0; i < 100; i++) toks[i] = 1000 + 37 * i;
    ASSERT_EQ_INT(vq_ctx_eval(c, toks, 100, lg), VQ_STATUS_OK);
    int finite = 1;
    for (int i = 0; i < nv; i++) finite &= lg[i] == lg[i];
    ASSERT(finite);
    struct vq_cache_memory m;
    vq_cache_memory(vq_ctx_cache(c), &m);
    ASSERT(m.total_bytes > 0 && m.total_bytes * 2 < m.fp16_bytes); /* 64 of 100 tokens coded */
    vq_ctx_free(c);
    /* fp16 by name = the default context */
    vq_ctx *a = vq_ctx_create_kv(g_m, &p, "fp16", &st), *b = vq_ctx_create(g_m, &p, &st);
    float *lb = malloc(sizeof(float) * (size_t)nv);
    ASSERT(a && b);
    if (a && b) {
        ASSERT_EQ_INT(vq_ctx_eval(a, toks, 20, lg), VQ_STATUS_OK);
        ASSERT_EQ_INT(vq_ctx_eval(b, toks, 20, lb), VQ_STATUS_OK);
        ASSERT(memcmp(lg, lb, sizeof(float) * (size_t)nv) == 0);
    }
    vq_ctx_free(a);
    vq_ctx_free(b);
    free(lg);
    free(lb);
}

TEST(bad_names) {
    vq_status st;
    ASSERT(vq_ctx_create_kv(g_m, NULL, "kv44", &st) == NULL);
    ASSERT_EQ_INT(st, VQ_STATUS_INVALID_ARG);
    ASSERT(strstr(vq_engine_last_error(), "did you mean kv4?") != NULL);
    ASSERT(vq_ctx_create_kv(g_m, NULL, "kivi-4+fp16f40l0", &st) == NULL);
    ASSERT_EQ_INT(st, VQ_STATUS_INVALID_ARG);
    ASSERT(strstr(vq_engine_last_error(), "30 layers") != NULL);
    ASSERT(vq_ctx_create_kv(NULL, NULL, "kv4", &st) == NULL);
    ASSERT_EQ_INT(st, VQ_STATUS_INVALID_ARG);
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
    RUN(kv4_context);
    RUN(bad_names);
    vq_model_free(g_m);
    return TEST_REPORT();
}
