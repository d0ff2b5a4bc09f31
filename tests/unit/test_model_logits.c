/* test_model_logits.c — fp16-KV engine vs llama.cpp golden next-token log-probs
 * (tests/golden/smollm2_logits.bin, format in tests/golden/README.md): over the 1024 stored
 * positions, top-1 agreement >= 99% and mean KL(golden || engine) <= 2e-3. The KL is computed
 * on the golden top-32 ids plus one bucket for the remaining mass (a coarse-graining, which can
 * only lower the KL: the bound is checked on what the file allows). */
#include "test.h"

#include <stdint.h>
#include <unistd.h>

#include "vq_engine.h"

#define MODEL VQ_MODELS_DIR "/SmolLM2-135M-Instruct.Q4_1.gguf"
#define GOLDEN VQ_SOURCE_DIR "/tests/golden/smollm2_logits.bin"
#define REF64 VQ_SOURCE_DIR "/tests/golden/smollm2_logits_ref64.bin"
#define KL_REF64 1e-5   /* measured 4.2e-7 (AVX-512) */
#define CHUNK 64

static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static float rdf(const uint8_t *p) { float v; memcpy(&v, p, 4); return v; }

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) { free(b); b = NULL; }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

struct cmp { double top1, top1_clear, kl_mean, kl_max, ppl; int ok; };

/* Runs the fp16-KV engine (f32act: exact activations) over the positions of a golden file
 * (format in tests/golden/README.md) in batches of CHUNK and compares its log-probs. */
static struct cmp compare(const char *path, int f32act, int want_flags) {
    struct cmp R = {0, 0, 0, 0, 0, 0};
    size_t n = 0;
    uint8_t *g = read_all(path, &n);
    ASSERT(g != NULL && n > 40);
    if (!g || n <= 40) return R;
    ASSERT(!memcmp(g, "VQGLOGIT", 8));
    ASSERT_EQ_INT(rd32(g + 8), 1);
    const uint32_t n_vocab = rd32(g + 12), n_text = rd32(g + 16), n_eval = rd32(g + 20), k = rd32(g + 24);
    const uint32_t flags = rd32(g + 32);
    const size_t rec = 4 + 8 * (size_t)k + 4, rec0 = 40 + 4 * (size_t)n_text;
    ASSERT(n == rec0 + rec * n_eval);
    ASSERT_EQ_INT(flags, want_flags);
    if (n != rec0 + rec * n_eval) { free(g); return R; }

    vq_status st;
    vq_model *m = vq_model_load(MODEL, &st);
    ASSERT(m != NULL);
    if (!m) { fprintf(stderr, "%s\n", vq_engine_last_error()); free(g); return R; }
    ASSERT_EQ_INT(vq_model_info_get(m)->n_vocab, n_vocab);
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = n_eval;
    cp.n_batch = CHUNK;
    cp.logits_all = 1;
    cp.f32_activations = f32act;
    cp.cache.key.method = VQ_METHOD_FP16;
    cp.cache.value.method = VQ_METHOD_FP16;
    vq_ctx *c = vq_ctx_create(m, &cp, &st);
    ASSERT(c != NULL);
    if (!c) { vq_model_free(m); free(g); return R; }

    int32_t *ids = malloc(sizeof(int32_t) * n_eval);
    for (uint32_t i = 0; i < n_eval; i++) ids[i] = (int32_t)rd32(g + 40 + 4 * i);
    float *lg = malloc(sizeof(float) * (size_t)n_vocab * CHUNK);
    double kl_sum = 0, kl_max = 0, nll_o = 0, nll_g = 0;
    int agree = 0, n_clear = 0, agree_clear = 0, n_scored = 0;
    for (uint32_t c0 = 0; c0 < n_eval; c0 += CHUNK) {
        uint32_t nc = n_eval - c0 < CHUNK ? n_eval - c0 : CHUNK;
        ASSERT_STATUS(vq_ctx_eval(c, ids + c0, nc, lg), VQ_STATUS_OK);
        for (uint32_t t = 0; t < nc; t++) {
            const float *l = lg + (size_t)t * n_vocab;
            const uint8_t *r = g + rec0 + rec * (c0 + t);
            ASSERT_EQ_INT(rd32(r), ids[c0 + t]);
            double mx = l[0];
            int best = 0;
            for (uint32_t j = 1; j < n_vocab; j++) if (l[j] > mx) { mx = l[j]; best = (int)j; }
            double se = 0;
            for (uint32_t j = 0; j < n_vocab; j++) se += exp(l[j] - mx);
            const double lse = mx + log(se);
            double kl = 0, mass_o = 0;
            for (uint32_t j = 0; j < k; j++) {
                uint32_t id = rd32(r + 4 + 4 * j);
                double lpg = rdf(r + 4 + 4 * k + 4 * j), lpo = l[id] - lse;
                kl += exp(lpg) * (lpg - lpo);
                mass_o += exp(lpo);
            }
            double lrg = rdf(r + 4 + 8 * k), lro = log(fmax(1.0 - mass_o, 1e-30));
            kl += exp(lrg) * (lrg - lro);
            kl_sum += kl;
            if (kl > kl_max) kl_max = kl;
            agree += (uint32_t)best == rd32(r + 4);
            /* positions where llama.cpp's best token leads by >= 0.2 nats are not near-ties */
            if (rdf(r + 4 + 4 * k) - rdf(r + 4 + 4 * k + 4) >= 0.2f) {
                n_clear++;
                agree_clear += (uint32_t)best == rd32(r + 4);
            }
            /* perplexity of the text: position i predicts text id i + 1 */
            if (c0 + t + 1 < n_eval) {   /* the 1023 predictions the generator scored */
                uint32_t next = rd32(g + 40 + 4 * (c0 + t + 1));
                nll_o -= l[next] - lse;
                for (uint32_t j = 0; j < k; j++)
                    if (rd32(r + 4 + 4 * j) == next) { nll_g -= rdf(r + 4 + 4 * k + 4 * j); break; }
                n_scored++;
            }
        }
    }
    R.top1 = (double)agree / n_eval;
    R.kl_mean = kl_sum / n_eval;
    R.kl_max = kl_max;
    R.top1_clear = (double)agree_clear / n_clear;
    R.ppl = exp(nll_o / n_scored);
    R.ok = 1;
    printf("%s%s: %u positions, top-1 agreement %.4f (%.4f on %d positions with margin >= 0.2), "
           "mean KL %.3g, max KL %.3g, ppl %.4f\n", path + strlen(VQ_SOURCE_DIR "/tests/golden/"),
           f32act ? " (f32 activations)" : "", n_eval, R.top1, R.top1_clear, n_clear, R.kl_mean, R.kl_max, R.ppl);
    (void)nll_g;
    free(ids);
    free(lg);
    vq_ctx_free(c);
    vq_model_free(m);
    free(g);
    return R;
}

/* The bars: top-1 >= 99 %, mean KL <= 2e-3. The engine repeats ggml's arithmetic
 * (Q8_1 activations, Q4_1 dot order, rms_norm, rope, fp16 attention, SwiGLU), so on this file
 * it reaches top-1 1.0 and KL ~1e-10 on every ISA (tests/golden/README.md); a wrong RoPE,
 * norm or attention gives KL > 0.1 and top-1 < 0.8. */
TEST(golden_logits) {
    struct cmp r = compare(GOLDEN, 0, 0);
    ASSERT(r.ok);
    ASSERT_GE(r.top1, 0.99);
    ASSERT_GE(r.top1_clear, 0.999);
    ASSERT_LE(r.kl_mean, 2e-3);
    ASSERT_LE(r.kl_max, 0.02);
    ASSERT_NEAR(r.ppl, 17.2414, 0.01);
}

/* With exact activations the engine computes the model's own float math: against the
 * independent NumPy float64 forward (ref64: dequantized weights, float64 activations, K/V
 * rounded to fp16) it agrees to float32 rounding plus the fp16 rounding of q and of the
 * softmax output that the fp16-KV attention keeps (llama.cpp's), not to int8 noise (~3e-3). */
TEST(f32_activations_match_float64_reference) {
    struct cmp r = compare(REF64, 1, 2);
    ASSERT(r.ok);
    ASSERT_GE(r.top1, 0.99);
    ASSERT_LE(r.kl_mean, KL_REF64);
    ASSERT_NEAR(r.ppl, 17.1291, 0.005);
}

int main(void) {
    if (access(MODEL, R_OK) != 0) {
        fprintf(stderr, "model %s missing (run scripts/fetch_models.sh)\n", MODEL);
        return 1;
    }
    RUN(golden_logits);
    RUN(f32_activations_match_float64_reference);
    return TEST_REPORT();
}
