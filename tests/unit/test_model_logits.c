/* test_model_logits.c — fp16-KV engine vs llama.cpp golden next-token log-probs
 * (tests/golden/smollm2_logits.bin, format in tests/golden/README.md): over the 1024 stored
 * positions, top-1 agreement >= 99% and mean KL(golden || engine) <= 2e-3. The KL is computed
 * on the golden top-32 ids plus one bucket for the remaining mass (a coarse-graining, which can
 * only lower the KL: the bound is checked on what the file allows). */
#include "test.h"

#include <stdint.h>
#include <unistd.h>

#include "vq_engine.h"
#include "golden_check.h"

#define MODEL VQ_MODELS_DIR "/SmolLM2-135M-Instruct.Q4_1.gguf"
#define GOLDEN VQ_SOURCE_DIR "/tests/golden/smollm2_logits.bin"
#define REF64 VQ_SOURCE_DIR "/tests/golden/smollm2_logits_ref64.bin"
#define KL_REF64 1e-5 /* measured 4.2e-7 (AVX-512) */
#define CHUNK 64

/* The bars: top-1 >= 99 %, mean KL <= 2e-3. The engine repeats ggml's arithmetic
 * (Q8_1 activations, Q4_1 dot order, rms_norm, rope, fp16 attention, SwiGLU), so on this file
 * it reaches top-1 1.0 and KL ~1e-10 on every ISA (tests/golden/README.md); a wrong RoPE,
 * norm or attention gives KL > 0.1 and top-1 < 0.8. */
static vq_model *g_m;

TEST(golden_logits) {
    struct golden_cmp r = golden_logits_compare(g_m, GOLDEN, 0, 0, CHUNK);
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
    struct golden_cmp r = golden_logits_compare(g_m, REF64, 1, 2, CHUNK);
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
    vq_status st;
    g_m = vq_model_load(MODEL, &st);
    if (!g_m) {
        fprintf(stderr, "%s\n", vq_engine_last_error());
        return 1;
    }
    RUN(golden_logits);
    RUN(f32_activations_match_float64_reference);
    vq_model_free(g_m);
    return TEST_REPORT();
}
