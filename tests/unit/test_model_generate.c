/* test_model_generate.c — greedy generation on the default model: deterministic across thread
 * counts and batch sizes; turboquant_mse 4-bit K and V follow the fp16-KV run (teacher-forced
 * top-1); the fp16 run reproduces llama.cpp's greedy continuation (tests/golden/greedy.json)
 * token for token. */
#include "test.h"

#include <stdint.h>
#include <unistd.h>

#include "vq_engine.h"
#include "golden_check.h"

#define MODEL VQ_MODELS_DIR "/SmolLM2-135M-Instruct.Q4_1.gguf"
#define GREEDY VQ_SOURCE_DIR "/tests/golden/greedy.json"
static vq_model *g_m;
static struct golden_prompt P[8];
static int nP;

static int greedy(const int32_t *ids, int n, int n_gen, enum vq_method km, int kb,
                  enum vq_method vm, int vb, int threads, int batch, int32_t *out) {
    return golden_greedy_run(g_m, ids, n, n_gen, km, kb, vm, vb, threads, batch, out);
}

static int common_prefix(const int32_t *a, const int32_t *b, int n) {
    int i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* Same tokens for 1 and 2 threads and for prefill in one batch or in small batches. (As in
 * llama.cpp, a batch of exactly one token takes the single-token attention kernels, whose
 * summation order differs, so the small batch size is chosen to leave no 1-token batch.) */
TEST(deterministic) {
    int32_t a[32], b[32], c[32];
    const struct golden_prompt *p = &P[0];
    int small = 3;
    while (p->n % small == 1) small++;
    ASSERT(greedy(p->ids, p->n, 32, VQ_METHOD_FP16, 16, VQ_METHOD_FP16, 16, 1, 512, a));
    ASSERT(greedy(p->ids, p->n, 32, VQ_METHOD_FP16, 16, VQ_METHOD_FP16, 16, 2, 512, b));
    ASSERT(greedy(p->ids, p->n, 32, VQ_METHOD_FP16, 16, VQ_METHOD_FP16, 16, 1, small, c));
    ASSERT(!memcmp(a, b, sizeof a));
    ASSERT(!memcmp(a, c, sizeof a));
}

/* Teacher-forced: the fp16 greedy sequence is fed through a turboquant_mse 4-bit K+V context;
 * its argmax must match the fp16 choice at most positions. (Free-running greedy sequences of
 * this model diverge at the first near-tie: fp16 vs fp32 storage of the same K/V already
 * moves its logits by a mean KL of ~3e-3, so exact equality of 20 tokens is not a stable
 * property; the free-running prefix is printed for the report.) */
TEST(turboquant_mse_4bit_vs_fp16) {
    const int nv = vq_model_info_get(g_m)->n_vocab;
    float *lg = malloc(sizeof(float) * (size_t)nv);
    int agree = 0, total = 0;
    for (int k = 0; k < nP; k++) {
        const struct golden_prompt *p = &P[k];
        int32_t f[32], q[32];
        ASSERT(greedy(p->ids, p->n, 32, VQ_METHOD_FP16, 16, VQ_METHOD_FP16, 16, 1, 512, f));
        ASSERT(greedy(p->ids, p->n, 32, VQ_METHOD_TURBOQUANT_MSE, 4, VQ_METHOD_TURBOQUANT_MSE, 4, 1,
                      512, q));
        printf(
            "%-8s turboquant_mse 4-bit K+V: free-running greedy equals fp16 for %d of 32 tokens\n",
            p->name, common_prefix(f, q, 32));
        struct vq_ctx_params cp = vq_ctx_params_default();
        cp.n_ctx = p->n + 32;
        cp.n_threads = 1;
        cp.cache.key.method = cp.cache.value.method = VQ_METHOD_TURBOQUANT_MSE;
        cp.cache.key.bits = cp.cache.value.bits = 4;
        vq_status st;
        vq_ctx *c = vq_ctx_create(g_m, &cp, &st);
        ASSERT(c != NULL);
        if (!c) break;
        ASSERT_STATUS(vq_ctx_eval(c, p->ids, p->n, lg), VQ_STATUS_OK);
        int a = 0;
        for (int i = 0; i < 32; i++) {
            int best = 0;
            for (int j = 1; j < nv; j++)
                if (lg[j] > lg[best]) best = j;
            a += best == f[i];
            if (i + 1 < 32) ASSERT_STATUS(vq_ctx_eval(c, &f[i], 1, lg), VQ_STATUS_OK);
        }
        printf("%-8s turboquant_mse 4-bit K+V: teacher-forced top-1 = fp16 at %d of 32 positions\n",
               p->name, a);
        agree += a;
        total += 32;
        vq_ctx_free(c);
    }
    free(lg);
    ASSERT_GE((double)agree / total, 0.75);
}

/* llama.cpp's greedy continuation (prompt as one batch, then one token per decode, fp16 KV)
 * is reproduced token for token: the engine repeats ggml's arithmetic, batched kernels for the
 * prompt and the single-token kernels for each decode step, so even the near-ties (top-2
 * margins down to 0.011) fall the same way. */
TEST(fp16_follows_llama_cpp_greedy) {
    for (int k = 0; k < nP; k++) {
        const struct golden_prompt *p = &P[k];
        int32_t f[GOLDEN_NGEN];
        ASSERT(greedy(p->ids, p->n, p->n_gold, VQ_METHOD_FP16, 16, VQ_METHOD_FP16, 16, 1, 512, f));
        int same = common_prefix(f, p->gold, p->n_gold);
        int first_tie = 0;
        while (first_tie < p->n_gold && p->margin[first_tie] >= 0.1) first_tie++;
        printf("%-8s fp16: %d of %d tokens equal llama.cpp's (first near-tie at %d)\n", p->name,
               same, p->n_gold, first_tie);
        ASSERT_EQ_INT(same, p->n_gold);
    }
}

int main(void) {
    if (access(MODEL, R_OK) != 0) {
        fprintf(stderr, "model %s missing (run scripts/fetch_models.sh)\n", MODEL);
        return 1;
    }
    nP = golden_greedy_load(GREEDY, P, 8);
    if (!nP) {
        fprintf(stderr, "cannot read %s\n", GREEDY);
        return 1;
    }
    vq_status st;
    g_m = vq_model_load(MODEL, &st);
    if (!g_m) {
        fprintf(stderr, "load failed: %s\n", vq_engine_last_error());
        return 1;
    }
    RUN(deterministic);
    RUN(turboquant_mse_4bit_vs_fp16);
    RUN(fp16_follows_llama_cpp_greedy);
    vq_model_free(g_m);
    return TEST_REPORT();
}
