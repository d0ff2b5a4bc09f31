/* test_model_batch.c — vq_ctx_eval_batch against one vq_ctx_eval per context, bit for bit: six
 * contexts (fp16, kv4 and kv3 caches; one and two threads) at different depths decode together
 * for several steps on the default model (Q4_1 weights) and on Gemma 3 270M (Q4_K, whose
 * four-token kernels sum in another order and must run one token at a time in a batch); and
 * generation sessions (vq_gen_begin ... vq_gen_end) stepped together through
 * vq_ctx_eval_batch give the text of vq_generate_tokens on each context alone; contexts that
 * share one set of activation buffers (vq_ctx_share_scratch) give the logits of their own. */
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "vq_engine.h"

#define SMOL VQ_MODELS_DIR "/SmolLM2-135M-Instruct.Q4_1.gguf"
#define GEMMA VQ_MODELS_DIR "/gemma-3-270m-q4_k_m.gguf"
#define N_SEQ 6
#define N_STEPS 6

static const char *PROMPTS[N_SEQ] = {
    "The capital of France is", "Once upon a time, in a small village,", "def fibonacci(n):",
    "Water boils at",           "A list of prime numbers: 2, 3, 5,",     "Hello",
};

static int g_threads = 1; /* every context's n_threads (2: the rows' attention in parallel) */

static vq_ctx *make(vq_model *m, int i) {
    static const char *const KV[3] = {"fp16", "kv4", "kv3"};
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = 256;
    cp.n_batch = 4; /* batches of 6 rows run as 4 + 2; prompts prefill in chunks of 4 */
    cp.n_threads = g_threads;
    vq_status st;
    vq_ctx *c = vq_ctx_create_kv(m, &cp, KV[i % 3], &st);
    if (!c) fprintf(stderr, "ctx: %s\n", vq_engine_last_error());
    return c;
}

static int32_t argmax(const float *x, int n) {
    int32_t b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Prefills each prompt on a batched and a reference context, then decodes greedily: the batch
 * through vq_ctx_eval_batch (logits rows given one array, then scattered rows), the reference
 * one context at a time; every logit must match exactly. */
static void batch_equals_single(vq_model *m) {
    const int V = vq_model_info_get(m)->n_vocab;
    vq_ctx *cb[N_SEQ], *cr[N_SEQ];
    float *lb = malloc(sizeof(float) * (size_t)V * N_SEQ), *lr = malloc(sizeof(float) * (size_t)V);
    float *scattered[N_SEQ];
    int32_t tok[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) {
        cb[i] = make(m, i);
        cr[i] = make(m, i);
        ASSERT(cb[i] && cr[i]);
        int32_t ids[64];
        const int64_t n = vq_tokenize(m, PROMPTS[i], strlen(PROMPTS[i]), 1, 0, ids, 64);
        ASSERT(n > 0);
        ASSERT_STATUS(vq_ctx_eval(cb[i], ids, n, lb + (size_t)i * V), VQ_STATUS_OK);
        ASSERT_STATUS(vq_ctx_eval(cr[i], ids, n, lr), VQ_STATUS_OK);
        tok[i] = argmax(lb + (size_t)i * V, V);
        scattered[i] = malloc(sizeof(float) * (size_t)V);
    }
    int mismatches = 0;
    for (int step = 0; step < N_STEPS; step++) {
        float *rows[N_SEQ];
        const int even = step % 2 == 0; /* one array (output matrix read once) or scattered */
        for (int i = 0; i < N_SEQ; i++) rows[i] = even ? lb + (size_t)i * V : scattered[i];
        /* a shrinking batch: sequences leave as in a server */
        const int n = step < 3 ? N_SEQ : N_SEQ - 2;
        ASSERT_STATUS(vq_ctx_eval_batch(cb, tok, n, rows), VQ_STATUS_OK);
        for (int i = 0; i < n; i++) {
            ASSERT_STATUS(vq_ctx_eval(cr[i], &tok[i], 1, lr), VQ_STATUS_OK);
            if (memcmp(lr, rows[i], sizeof(float) * (size_t)V)) mismatches++;
            ASSERT_EQ_INT(vq_ctx_n_past(cb[i]), vq_ctx_n_past(cr[i]));
            tok[i] = argmax(lr, V);
        }
    }
    ASSERT_EQ_INT(mismatches, 0);
    /* bad calls change nothing */
    ASSERT_STATUS(vq_ctx_eval_batch(cb, tok, 0, scattered), VQ_STATUS_INVALID_ARG);
    vq_ctx *dup[2] = {cb[0], cb[0]};
    ASSERT_STATUS(vq_ctx_eval_batch(dup, tok, 2, scattered), VQ_STATUS_INVALID_ARG);
    int32_t bad[2] = {0, V};
    ASSERT_STATUS(vq_ctx_eval_batch(cb, bad, 2, scattered), VQ_STATUS_INVALID_ARG);
    for (int i = 0; i < N_SEQ; i++) {
        vq_ctx_free(cb[i]);
        vq_ctx_free(cr[i]);
        free(scattered[i]);
    }
    free(lb);
    free(lr);
}

/* Sessions stepped together equal vq_generate_tokens alone (text, counts, finish). */
static void sessions_equal_generate(vq_model *m) {
    vq_ctx *cb[N_SEQ], *cr[N_SEQ];
    vq_gen_session *g[N_SEQ];
    struct vq_gen_params gp = vq_gen_params_default();
    gp.max_tokens = 12;
    for (int i = 0; i < N_SEQ; i++) {
        cb[i] = make(m, i);
        cr[i] = make(m, i);
        int32_t ids[64];
        const int64_t n = vq_tokenize(m, PROMPTS[i], strlen(PROMPTS[i]), 1, 0, ids, 64);
        vq_status st;
        g[i] = vq_gen_begin(cb[i], ids, n, &gp, &st);
        ASSERT(g[i] != NULL);
        /* chunks of n_batch: the numerics of one call (vq_gen_prefill), so of generate's */
        while (vq_gen_prefill_left(g[i]) > 0) ASSERT_STATUS(vq_gen_prefill(g[i], 4), VQ_STATUS_OK);
    }
    for (int live = N_SEQ; live > 0;) {
        vq_ctx *cs[N_SEQ];
        int32_t ts[N_SEQ];
        float *ls[N_SEQ];
        int who[N_SEQ], n = 0;
        for (int i = 0; i < N_SEQ; i++) {
            if (!g[i] || vq_gen_finished(g[i])) continue;
            int32_t t;
            ASSERT_STATUS(vq_gen_next(g[i], &t), VQ_STATUS_OK);
            if (t < 0) continue;
            cs[n] = vq_gen_ctx(g[i]);
            ts[n] = t;
            ls[n] = vq_gen_logits(g[i]);
            who[n++] = i;
        }
        if (n) {
            const vq_status st = vq_ctx_eval_batch(cs, ts, n, ls);
            for (int k = 0; k < n; k++) vq_gen_decoded(g[who[k]], st);
        }
        live = n;
    }
    for (int i = 0; i < N_SEQ; i++) {
        struct vq_gen_result a, b;
        ASSERT_STATUS(vq_gen_end(g[i], &a), VQ_STATUS_OK);
        int32_t ids[64];
        const int64_t n = vq_tokenize(m, PROMPTS[i], strlen(PROMPTS[i]), 1, 0, ids, 64);
        ASSERT_STATUS(vq_generate_tokens(cr[i], ids, n, &gp, &b), VQ_STATUS_OK);
        ASSERT(a.text && b.text && !strcmp(a.text, b.text));
        ASSERT_EQ_INT(a.n_generated, b.n_generated);
        ASSERT_EQ_INT(a.finish, b.finish);
        vq_gen_result_free(&a);
        vq_gen_result_free(&b);
        vq_ctx_free(cb[i]);
        vq_ctx_free(cr[i]);
    }
}

/* Contexts sharing one context's activation buffers (vq_ctx_share_scratch), evaluated in
 * turn and in a batch, give the logits of contexts with their own buffers; the refusals. */
static void shared_scratch_equals_own(vq_model *m) {
    const int V = vq_model_info_get(m)->n_vocab;
    vq_ctx *cs[N_SEQ], *cr[N_SEQ];
    float *ls = malloc(sizeof(float) * (size_t)V * N_SEQ), *lr = malloc(sizeof(float) * (size_t)V);
    int32_t tok[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) {
        cs[i] = make(m, i);
        cr[i] = make(m, i);
        ASSERT(cs[i] && cr[i]);
        if (i > 0) {
            ASSERT_STATUS(vq_ctx_share_scratch(cs[i], cs[0]), VQ_STATUS_OK);
            ASSERT(vq_ctx_scratch_bytes(cs[i]) == 0);
        }
    }
    ASSERT(vq_ctx_scratch_bytes(cs[0]) > 0);
    /* refusals: NULL, itself, an already sharing context, a sharing donor, a donor sharing
     * another's, a larger n_batch */
    ASSERT_STATUS(vq_ctx_share_scratch(NULL, cs[0]), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_ctx_share_scratch(cs[0], cs[0]), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_ctx_share_scratch(cs[1], cs[0]), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_ctx_share_scratch(cr[0], cs[1]), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_ctx_share_scratch(cs[0], cr[0]), VQ_STATUS_INVALID_ARG); /* a donor */
    struct vq_ctx_params big = vq_ctx_params_default();
    big.n_ctx = 256;
    big.n_batch = 8;
    vq_status st;
    vq_ctx *cb = vq_ctx_create(m, &big, &st);
    ASSERT(cb != NULL);
    ASSERT_STATUS(vq_ctx_share_scratch(cb, cr[0]), VQ_STATUS_INVALID_ARG);
    vq_ctx_free(cb);
    /* prompts in turn (each pass overwrites the shared buffers), then decode steps alternating
     * one-token passes and batches */
    int mismatches = 0;
    for (int i = 0; i < N_SEQ; i++) {
        int32_t ids[64];
        const int64_t n = vq_tokenize(m, PROMPTS[i], strlen(PROMPTS[i]), 1, 0, ids, 64);
        ASSERT(n > 0);
        ASSERT_STATUS(vq_ctx_eval(cs[i], ids, n, ls + (size_t)i * V), VQ_STATUS_OK);
        ASSERT_STATUS(vq_ctx_eval(cr[i], ids, n, lr), VQ_STATUS_OK);
        mismatches += memcmp(lr, ls + (size_t)i * V, sizeof(float) * (size_t)V) != 0;
        tok[i] = argmax(lr, V);
    }
    for (int step = 0; step < 4; step++) {
        float *rows[N_SEQ];
        for (int i = 0; i < N_SEQ; i++) rows[i] = ls + (size_t)i * V;
        if (step % 2) ASSERT_STATUS(vq_ctx_eval_batch(cs, tok, N_SEQ, rows), VQ_STATUS_OK);
        else
            for (int i = N_SEQ - 1; i >= 0; i--)
                ASSERT_STATUS(vq_ctx_eval(cs[i], &tok[i], 1, rows[i]), VQ_STATUS_OK);
        for (int i = 0; i < N_SEQ; i++) {
            ASSERT_STATUS(vq_ctx_eval(cr[i], &tok[i], 1, lr), VQ_STATUS_OK);
            mismatches += memcmp(lr, rows[i], sizeof(float) * (size_t)V) != 0;
            tok[i] = argmax(lr, V);
        }
    }
    ASSERT_EQ_INT(mismatches, 0);
    /* the sharing contexts first, the donor (cs[0]) last, as the contract asks */
    for (int i = N_SEQ - 1; i >= 0; i--) {
        vq_ctx_free(cs[i]);
        vq_ctx_free(cr[i]);
    }
    free(ls);
    free(lr);
}

static vq_model *g_model;

TEST(smollm2_batch) { batch_equals_single(g_model); }
/* two threads: the batch's rows attend in parallel, each cache's own split on one thread */
TEST(smollm2_batch_2threads) {
    g_threads = 2;
    batch_equals_single(g_model);
    sessions_equal_generate(g_model);
    g_threads = 1;
}
TEST(smollm2_sessions) { sessions_equal_generate(g_model); }
TEST(smollm2_shared_scratch) { shared_scratch_equals_own(g_model); }
TEST(gemma3_batch) { batch_equals_single(g_model); }

int main(void) {
    vq_status st;
    if (access(SMOL, R_OK) != 0) {
        fprintf(stderr, "model %s missing (run scripts/fetch_models.sh)\n", SMOL);
        return 1;
    }
    g_model = vq_model_load(SMOL, &st);
    if (!g_model) return 1;
    RUN(smollm2_batch);
    RUN(smollm2_sessions);
    RUN(smollm2_batch_2threads);
    RUN(smollm2_shared_scratch);
    vq_model_free(g_model);
    if (access(GEMMA, R_OK) == 0) {
        g_model = vq_model_load(GEMMA, &st);
        if (!g_model) return 1;
        RUN(gemma3_batch);
        g_threads = 2;
        RUN(gemma3_batch);
        vq_model_free(g_model);
    } else fprintf(stderr, "note: %s missing; the Q4_K batch check is skipped\n", GEMMA);
    return TEST_REPORT();
}
