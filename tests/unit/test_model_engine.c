/* test_model_engine.c — the engine on the default model (SmolLM2-135M-Instruct Q4_1):
 * metadata, a factual next token, batched prefill == token-by-token decode, chunking, errors,
 * truncated model files. */
#include "test.h"

#include <stdint.h>
#include <unistd.h>

#include "vq_engine.h"

#define MODEL VQ_MODELS_DIR "/SmolLM2-135M-Instruct.Q4_1.gguf"

/* "The capital of France is" in SmolLM2's vocabulary; " Paris" is 7042. */
static const int32_t PROMPT[] = {504, 3575, 282, 4649, 314};
#define N_PROMPT 5
#define TOK_PARIS 7042

static vq_model *g_m;

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

TEST(model_info) {
    const struct vq_model_info *I = vq_model_info_get(g_m);
    ASSERT(!strcmp(I->arch, "llama"));
    ASSERT_EQ_INT(I->n_layers, 30);
    ASSERT_EQ_INT(I->n_heads, 9);
    ASSERT_EQ_INT(I->n_kv_heads, 3);
    ASSERT_EQ_INT(I->head_dim, 64);
    ASSERT_EQ_INT(I->n_embd, 576);
    ASSERT_EQ_INT(I->n_ff, 1536);
    ASSERT_EQ_INT(I->n_vocab, 49152);
    ASSERT_EQ_INT(I->n_ctx_train, 8192);
    ASSERT_NEAR(I->rope_theta, 100000.0, 0);
    ASSERT_EQ_INT(I->rope_type, VQ_ROPE_NORM);
    ASSERT_EQ_INT(I->tied_embeddings, 1);
    ASSERT_EQ_INT(I->has_qkv_bias, 0);
}

TEST(paris_and_batch_equals_sequential) {
    const int nv = vq_model_info_get(g_m)->n_vocab;
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = 64;
    cp.n_threads = 1; /* the machine running the tests may be oversubscribed */
    cp.logits_all = 1;
    vq_status st;
    vq_ctx *cb = vq_ctx_create(g_m, &cp, &st);
    cp.logits_all = 0;
    cp.n_batch = 2; /* chunked prefill */
    vq_ctx *cs = vq_ctx_create(g_m, &cp, &st);
    ASSERT(cb && cs);
    if (!cb || !cs) {
        vq_ctx_free(cb);
        vq_ctx_free(cs);
        return;
    }
    float *all = malloc(sizeof(float) * (size_t)nv * N_PROMPT),
          *one = malloc(sizeof(float) * (size_t)nv);
    ASSERT_STATUS(vq_ctx_eval(cb, PROMPT, N_PROMPT, all), VQ_STATUS_OK);
    ASSERT_EQ_INT(vq_ctx_n_past(cb), N_PROMPT);
    ASSERT_EQ_INT(argmax(all + (size_t)(N_PROMPT - 1) * nv, nv), TOK_PARIS);
    /* token by token */
    double maxdiff = 0;
    for (int i = 0; i < N_PROMPT; i++) {
        ASSERT_STATUS(vq_ctx_eval(cs, PROMPT + i, 1, one), VQ_STATUS_OK);
        for (int j = 0; j < nv; j++) {
            double d = fabs(one[j] - all[(size_t)i * nv + j]);
            if (d > maxdiff) maxdiff = d;
        }
    }
    ASSERT_LE(maxdiff, 2e-3);
    /* chunked prefill (n_batch 2) of the whole prompt after a reset */
    vq_ctx_reset(cs);
    ASSERT_EQ_INT(vq_ctx_n_past(cs), 0);
    ASSERT_STATUS(vq_ctx_eval(cs, PROMPT, N_PROMPT, one), VQ_STATUS_OK);
    maxdiff = 0;
    for (int j = 0; j < nv; j++) {
        double d = fabs(one[j] - all[(size_t)(N_PROMPT - 1) * nv + j]);
        if (d > maxdiff) maxdiff = d;
    }
    ASSERT_LE(maxdiff, 2e-3);
    /* truncate back to 3 tokens and re-evaluate the last two: same logits */
    ASSERT_STATUS(vq_ctx_truncate(cs, 3), VQ_STATUS_OK);
    ASSERT_STATUS(vq_ctx_eval(cs, PROMPT + 3, 2, one), VQ_STATUS_OK);
    ASSERT_EQ_INT(argmax(one, nv), TOK_PARIS);

    /* errors leave the context usable and unchanged */
    int32_t bad = nv;
    ASSERT_STATUS(vq_ctx_eval(cs, &bad, 1, one), VQ_STATUS_INVALID_ARG);
    bad = -1;
    ASSERT_STATUS(vq_ctx_eval(cs, &bad, 1, one), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_ctx_eval(cs, PROMPT, 0, one), VQ_STATUS_INVALID_ARG);
    static int32_t many[80];
    for (int i = 0; i < 80; i++) many[i] = PROMPT[i % N_PROMPT];
    ASSERT_STATUS(vq_ctx_eval(cs, many, 60, one), VQ_STATUS_CAPACITY);
    ASSERT_EQ_INT(vq_ctx_n_past(cs), N_PROMPT);
    ASSERT_STATUS(vq_ctx_eval(cs, many, 64 - N_PROMPT, NULL), VQ_STATUS_OK);
    ASSERT_EQ_INT(vq_ctx_n_past(cs), 64);
    ASSERT_STATUS(vq_ctx_eval(cs, many, 1, one), VQ_STATUS_CAPACITY);
    struct vq_cache_memory mem;
    vq_cache_memory(vq_ctx_cache(cs), &mem);
    ASSERT_EQ_INT(mem.fp16_bytes, 64 * 30 * 3 * 64 * 2 * 2);
    free(all);
    free(one);
    vq_ctx_free(cb);
    vq_ctx_free(cs);
}

TEST(greedy_generation_deterministic) {
    const int nv = vq_model_info_get(g_m)->n_vocab;
    int32_t out[2][24];
    float *lg = malloc(sizeof(float) * (size_t)nv);
    for (int run = 0; run < 2; run++) {
        struct vq_ctx_params cp = vq_ctx_params_default();
        cp.n_ctx = 64;
        cp.n_threads = run + 1;
        vq_status st;
        vq_ctx *c = vq_ctx_create(g_m, &cp, &st);
        struct vq_sampler_params sp = vq_sampler_params_default();
        vq_sampler *s = vq_sampler_create(&sp, nv, &st);
        ASSERT(c && s);
        if (!c || !s) {
            vq_ctx_free(c);
            vq_sampler_free(s);
            free(lg);
            return;
        }
        ASSERT_STATUS(vq_ctx_eval(c, PROMPT, N_PROMPT, lg), VQ_STATUS_OK);
        for (int i = 0; i < 24; i++) {
            out[run][i] = vq_sampler_sample(s, lg);
            ASSERT_STATUS(vq_ctx_eval(c, &out[run][i], 1, lg), VQ_STATUS_OK);
        }
        vq_sampler_free(s);
        vq_ctx_free(c);
    }
    ASSERT_EQ_INT(out[0][0], TOK_PARIS);
    ASSERT(!memcmp(out[0], out[1], sizeof out[0]));
    free(lg);
}

/* KIVI with a residual window covering the whole context gives the fp16 cache's logits bit
 * for bit (prefill of 40 tokens, then decode up to R = 64; the append that fills the key window
 * still reads it in fp16); one token later the full key window is coded and the logits move. */
TEST(kivi_window_covering_context_equals_fp16) {
    const int nv = vq_model_info_get(g_m)->n_vocab, R = 64;
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = 96;
    cp.n_threads = 1;
    vq_status st;
    vq_ctx *cf = vq_ctx_create(g_m, &cp, &st);
    cp.cache.key.method = cp.cache.value.method = VQ_METHOD_KIVI;
    cp.cache.key.bits = cp.cache.value.bits = 2;
    cp.cache.key.residual_length = cp.cache.value.residual_length = R;
    vq_ctx *ck = vq_ctx_create(g_m, &cp, &st);
    ASSERT(cf && ck);
    float *lf = malloc(sizeof(float) * (size_t)nv), *lk = malloc(sizeof(float) * (size_t)nv);
    int32_t toks[R + 1];
    for (int i = 0; i < R + 1; i++) toks[i] = PROMPT[i % N_PROMPT] + 7 * (i / N_PROMPT);
    int n = 0;
    while (cf && ck && n < R + 1) {
        const int nb = n == 0 ? 40 : 1;
        ASSERT_STATUS(vq_ctx_eval(cf, toks + n, nb, lf), VQ_STATUS_OK);
        ASSERT_STATUS(vq_ctx_eval(ck, toks + n, nb, lk), VQ_STATUS_OK);
        n += nb;
        const int same = !memcmp(lf, lk, sizeof(float) * (size_t)nv);
        if (n <= R) ASSERT(same);
        else ASSERT(!same);
    }
    free(lf);
    free(lk);
    vq_ctx_free(cf);
    vq_ctx_free(ck);
}

TEST(ctx_param_errors) {
    vq_status st;
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = 0;
    ASSERT(vq_ctx_create(g_m, &cp, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    cp = vq_ctx_params_default();
    cp.n_batch = 0;
    ASSERT(vq_ctx_create(g_m, &cp, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    cp = vq_ctx_params_default();
    cp.cache.key.method = VQ_METHOD_COUNT;
    ASSERT(vq_ctx_create(g_m, &cp, &st) == NULL);
    ASSERT(st != VQ_STATUS_OK);
    ASSERT(strlen(vq_engine_last_error()) > 0);
    ASSERT(vq_ctx_create(NULL, NULL, &st) == NULL);
    vq_ctx_free(NULL);
}

/* The largest context (2^24 tokens) costs no per-position RoPE tables: they are computed per
 * batch (formerly n_ctx x rope_dim floats, 4.3 GB here), and a short run gives the same logits
 * bit for bit as in a small context. */
TEST(huge_ctx_rope_sized_by_batch) {
    const int nv = vq_model_info_get(g_m)->n_vocab;
    float *lg[2] = {malloc(sizeof(float) * (size_t)nv), malloc(sizeof(float) * (size_t)nv)};
    size_t scratch[2] = {0, 0};
    const int64_t n_ctx[2] = {64, (int64_t)1 << 24};
    for (int k = 0; k < 2; k++) {
        struct vq_ctx_params cp = vq_ctx_params_default();
        cp.n_ctx = n_ctx[k];
        cp.n_threads = 1;
        cp.n_batch = 8;
        vq_status st;
        vq_ctx *c = vq_ctx_create(g_m, &cp, &st);
        ASSERT(c != NULL);
        if (!c) break;
        scratch[k] = vq_ctx_scratch_bytes(c);
        ASSERT_STATUS(vq_ctx_eval(c, PROMPT, 2, lg[k]), VQ_STATUS_OK);
        vq_ctx_free(c);
    }
    printf("scratch bytes: n_ctx 64: %zu, n_ctx 2^24: %zu\n", scratch[0], scratch[1]);
    /* what still grows with n_ctx: one attention score row per query head of a kv group */
    const struct vq_model_info *I = vq_model_info_get(g_m);
    const size_t scores = (size_t)(I->n_heads / I->n_kv_heads) * ((size_t)1 << 24) * sizeof(float);
    ASSERT(scratch[1] > 0 && scratch[1] - scratch[0] <= scores + ((size_t)1 << 20));
    ASSERT(!memcmp(lg[0], lg[1], sizeof(float) * (size_t)nv));
    free(lg[0]);
    free(lg[1]);
}

/* Truncated copies of the model fail to load with BAD_FORMAT, never crash. */
TEST(truncated_model_load) {
    FILE *f = fopen(MODEL, "rb");
    ASSERT(f != NULL);
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    char tmpl[] = "/tmp/vq_engine_trunc_XXXXXX";
    int fd = mkstemp(tmpl);
    ASSERT(fd >= 0);
    if (fd < 0) {
        fclose(f);
        return;
    }
    close(fd);
    const long cuts[] = {10, 4096, 3000000, size - 12345678, size - 1};
    static char buf[1 << 16];
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        FILE *o = fopen(tmpl, "wb");
        fseek(f, 0, SEEK_SET);
        for (long left = cuts[i]; left > 0;) {
            size_t n = fread(buf, 1, left < (long)sizeof buf ? (size_t)left : sizeof buf, f);
            if (!n) break;
            fwrite(buf, 1, n, o);
            left -= (long)n;
        }
        fclose(o);
        vq_status st;
        vq_model *m = vq_model_load(tmpl, &st);
        ASSERT(m == NULL);
        ASSERT_STATUS(st, VQ_STATUS_BAD_FORMAT);
        ASSERT(strlen(vq_engine_last_error()) > 0);
    }
    fclose(f);
    remove(tmpl);
    vq_status st;
    ASSERT(vq_model_load("/nonexistent.gguf", &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_IO);
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
    RUN(model_info);
    RUN(paris_and_batch_equals_sequential);
    RUN(greedy_generation_deterministic);
    RUN(kivi_window_covering_context_equals_fp16);
    RUN(ctx_param_errors);
    RUN(huge_ctx_rope_sized_by_batch);
    RUN(truncated_model_load);
    vq_model_free(g_m);
    return TEST_REPORT();
}
