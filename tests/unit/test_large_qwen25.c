/* test_large_qwen25.c — Qwen2.5-Coder 1.5B Instruct Q4_K_M (scripts/fetch_models.sh
 * qwen2.5-1.5b, 1.1 GB) against llama.cpp (tests/golden/qwen25_*, llama-cpp-python 0.3.36,
 * format in tests/golden/README.md):
 *   - metadata: qwen2, 28 layers, 12 query heads and 2 KV heads of 128, q/k/v biases, NEOX
 *     RoPE with base 1e6, its own output matrix (Q6_K; the other matrices Q4_K or Q6_K);
 *   - tokenizer (byte-level BPE, pre-tokenizer qwen2, 151,936 tokens, no BOS): llama.cpp's ids,
 *     pieces and detokenized text for 22 prompts and the ids of text_en.txt; ChatML with Qwen's
 *     default system message;
 *   - fp16-KV log-probs over the golden positions: top-1 agreement >= 99 %, mean KL <= 2e-3,
 *     perplexity within 0.5 % of llama.cpp's;
 *   - greedy continuations of 3 prompts (64 tokens each) equal llama.cpp's.
 * Label "large": not in the default `make test` (ctest -LE large); `make test-large` fetches the
 * model and runs it. Fails when the model file is missing. */
#include "test.h"

#include <stdint.h>
#include <unistd.h>

#include "vq_engine.h"
#include "engine/chat.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "golden_check.h"

#define MODEL VQ_MODELS_DIR "/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
#define GOLDEN VQ_SOURCE_DIR "/tests/golden/qwen25_logits.bin"
#define GREEDY VQ_SOURCE_DIR "/tests/golden/qwen25_greedy.json"
#define TOKENS VQ_SOURCE_DIR "/tests/golden/qwen25_tokenizer_ids.json"
#define CHUNK 64
#define PPL_LLAMA_CPP 10.1514 /* llama.cpp's perplexity over the 1273 predictions (README) */

static vq_model *g_m;
static vq_tokenizer *g_t;

TEST(metadata) {
    const struct vq_model_info *I = vq_model_info_get(g_m);
    ASSERT(!strcmp(I->arch, "qwen2"));
    ASSERT_EQ_INT(I->n_layers, 28);
    ASSERT_EQ_INT(I->n_heads, 12);
    ASSERT_EQ_INT(I->n_kv_heads, 2);
    ASSERT_EQ_INT(I->head_dim, 128);
    ASSERT_EQ_INT(I->n_embd, 1536);
    ASSERT_EQ_INT(I->n_ff, 8960);
    ASSERT_EQ_INT(I->n_vocab, 151936);
    ASSERT_EQ_INT(I->rope_type, VQ_ROPE_NEOX);
    ASSERT_NEAR(I->rope_theta, 1e6, 0);
    ASSERT(!I->tied_embeddings && I->has_qkv_bias && !I->has_qk_norm); /* own output.weight */
    ASSERT_EQ_INT(I->swa_window, 0);
    for (int l = 0; l < I->n_layers; l++) ASSERT_EQ_INT(vq_model_layer_window(g_m, l), 0);
}

TEST(tokenizer_matches_llama_cpp) {
    ASSERT_EQ_INT(vq_tok_n_vocab(g_t), 151936);
    ASSERT(!vq_tok_add_bos(g_t));
    ASSERT(vq_tok_is_eog(g_t, vq_tok_find(g_t, "<|im_end|>", 10)));
    ASSERT(vq_tok_is_eog(g_t, vq_tok_find(g_t, "<|endoftext|>", 13)));
    golden_tokenizer_check(g_t, TOKENS, 22);
    /* the text of the logits file (add_special = true, parse_special = false) */
    size_t tl;
    char *text = golden_read_file(VQ_SOURCE_DIR "/tests/golden/text_en.txt", &tl);
    struct golden gd;
    const int gok = golden_open(&gd, GOLDEN);
    ASSERT(text && gok);
    if (!text || !gok) {
        free(text);
        golden_close(&gd);
        return;
    }
    const uint32_t n_text = gd.n_text;
    int32_t *ids = malloc(4096 * sizeof *ids);
    const int64_t n = vq_tok_encode(g_t, text, tl, true, false, ids, 4096);
    ASSERT_EQ_INT(n, n_text);
    int diff = 0;
    for (uint32_t i = 0; i < n_text && (int64_t)i < n; i++) diff += ids[i] != golden_id(&gd, i);
    ASSERT_EQ_INT(diff, 0);
    free(ids);
    free(text);
    golden_close(&gd);
}

/* The GGUF's Jinja template is ChatML that writes Qwen's default system turn when the
 * conversation has none; the engine extracts it. */
TEST(chat_format) {
    struct vq_chat_template ct;
    ASSERT_STATUS(vq_chat_from_gguf(vq_model_gguf(g_m), &ct), VQ_STATUS_OK);
    ASSERT_EQ_INT(ct.format, VQ_CHAT_CHATML);
    char buf[1024];
    struct vq_chat_msg a[] = {{"user", "What is the capital of France?"}};
    ASSERT(vq_chat_apply(&ct, a, 1, true, buf, sizeof buf) > 0);
    ASSERT(!strcmp(buf,
                   "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a "
                   "helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is the capital of "
                   "France?<|im_end|>\n<|im_start|>assistant\n"));
}

/* The bars of the other real models: top-1 >= 99 %, mean KL <= 2e-3 over >= 1000 positions,
 * perplexity within 0.5 % of llama.cpp's. */
TEST(golden_logits) {
    struct golden_cmp r = golden_logits_compare(g_m, GOLDEN, 0, 0, CHUNK); /* flags 0: no BOS */
    ASSERT(r.ok);
    ASSERT_GE(r.n_eval, 1000);
    ASSERT_GE(r.top1, 0.99);
    ASSERT_GE(r.top1_clear, 0.999);
    ASSERT_LE(r.kl_mean, 2e-3);
    ASSERT_LE(r.kl_max, 0.02);
    ASSERT_NEAR(r.ppl, PPL_LLAMA_CPP, 0.005 * PPL_LLAMA_CPP);
}

/* llama.cpp's greedy continuations (prompt as one batch, then one token per decode) token for
 * token. */
TEST(greedy_follows_llama_cpp) {
    struct golden_prompt P[4];
    const int nP = golden_greedy_load(GREEDY, P, 4);
    ASSERT_EQ_INT(nP, 3);
    for (int k = 0; k < nP; k++) {
        int32_t f[GOLDEN_NGEN];
        ASSERT(golden_greedy_run(g_m, P[k].ids, P[k].n, P[k].n_gold, VQ_METHOD_FP16, 16,
                                 VQ_METHOD_FP16, 16, 2, 512, f));
        int same = 0;
        while (same < P[k].n_gold && f[same] == P[k].gold[same]) same++;
        printf("%-8s fp16: %d of %d tokens equal llama.cpp's\n", P[k].name, same, P[k].n_gold);
        ASSERT_EQ_INT(same, P[k].n_gold);
    }
}

int main(void) {
    if (access(MODEL, R_OK) != 0) {
        fprintf(stderr, "model %s missing (run scripts/fetch_models.sh qwen2.5-1.5b)\n", MODEL);
        return 1;
    }
    vq_status st;
    g_m = vq_model_load(MODEL, &st);
    if (!g_m) {
        fprintf(stderr, "%s\n", vq_engine_last_error());
        return 1;
    }
    g_t = vq_tok_create(vq_model_gguf(g_m), &st);
    if (!g_t) {
        fprintf(stderr, "tokenizer: %s\n", vq_status_str(st));
        vq_model_free(g_m);
        return 1;
    }
    RUN(metadata);
    RUN(tokenizer_matches_llama_cpp);
    RUN(chat_format);
    RUN(golden_logits);
    RUN(greedy_follows_llama_cpp);
    vq_tok_free(g_t);
    vq_model_free(g_m);
    return TEST_REPORT();
}
