/* test_model_perplexity.c — the perplexity protocol on the default model and a fixed slice of
 * the corpus (first 8 KiB of data/corpus_en.txt): reproducible between runs, KL of an fp16 run
 * against its own saved logits is exactly 0 with 100% top-1 agreement, saved logits survive a
 * file round trip, and KL grows as turboquant_mse bits go 4 -> 3 -> 2. Kept short (ctx 128,
 * 2 chunks) so that it runs in well under two minutes on two cores. */
#include "test.h"

#include <unistd.h>

#include "eval/logits.h"
#include "eval/ppl.h"
#include "engine/chat.h"
#include "engine/model.h"
#include "engine/tokenizer.h"

#define MODEL VQ_MODELS_DIR "/SmolLM2-135M-Instruct.Q4_1.gguf"
#define CORPUS VQ_SOURCE_DIR "/data/corpus_en.txt"
#define SLICE_BYTES 8192
#define CTX 128
#define CHUNKS 2

static vq_model *model;
static int32_t *tokens;
static int64_t n_tokens;

static int setup(void) {
    if (access(MODEL, R_OK) != 0) {
        fprintf(stderr, "model %s missing (run scripts/fetch_models.sh)\n", MODEL);
        return 0;
    }
    FILE *f = fopen(CORPUS, "rb");
    if (!f) {
        fprintf(stderr, "corpus %s missing (run make bench-data)\n", CORPUS);
        return 0;
    }
    static char text[SLICE_BYTES];
    size_t n = fread(text, 1, sizeof text, f);
    fclose(f);
    vq_status st;
    model = vq_model_load(MODEL, &st);
    if (!model) {
        fprintf(stderr, "load: %s\n", vq_engine_last_error());
        return 0;
    }
    vq_tokenizer *tok = vq_tok_create(vq_model_gguf(model), &st);
    if (!tok) return 0;
    tokens = malloc(n * sizeof *tokens);
    n_tokens = vq_tok_encode(tok, text, n, true, false, tokens, (int64_t)n);
    vq_tok_free(tok);
    fprintf(stderr, "  slice: %zu bytes, %lld tokens\n", n, (long long)n_tokens);
    return n_tokens >= CTX * CHUNKS;
}

static struct vq_ppl_params params(enum vq_method m, int bits) {
    struct vq_ppl_params p = vq_ppl_params_default();
    p.ctx = CTX;
    p.n_chunks = CHUNKS;
    p.n_threads = 1; /* two cores shared in CI: OpenMP barriers under contention are slow */
    p.cache.key.method = p.cache.value.method = m;
    p.cache.key.bits = p.cache.value.bits = bits;
    return p;
}

/* per-process path: parallel test runs (ctest -j, several build trees) must not share it */
static char BASE[64];

TEST(reproducible_and_self_kl_zero) {
    struct vq_ppl_params p = params(VQ_METHOD_FP16, 16);
    struct vq_ppl_result a, b;
    char err[256];
    vq_status st;
    vq_logits_file *save = vq_logits_create(BASE, 32, vq_model_info_get(model)->n_vocab, CTX, &st);
    ASSERT(save != NULL);
    ASSERT_STATUS(
        vq_ppl_run(model, tokens, n_tokens, &p, save, NULL, NULL, NULL, &a, err, sizeof err),
        VQ_STATUS_OK);
    ASSERT_STATUS(vq_logits_close(save), VQ_STATUS_OK);
    ASSERT_EQ_INT(a.n_chunks, CHUNKS);
    ASSERT_EQ_INT(a.n_scored, CHUNKS * (CTX - 1 - CTX / 2));
    ASSERT(a.ppl > 3 && a.ppl < 200);
    fprintf(stderr, "  fp16 ppl %.6f (+/- %.4f), %.1f tok/s\n", a.ppl, a.ppl_stderr,
            a.prefill_tok_s);
    ASSERT(isnan(a.kld_mean));
    /* the same run again, now against the saved base */
    vq_logits_file *base = vq_logits_open(BASE, &st);
    ASSERT(base != NULL);
    if (!base) return;
    ASSERT_EQ_INT(vq_logits_n_records(base), a.n_scored);
    ASSERT_STATUS(
        vq_ppl_run(model, tokens, n_tokens, &p, NULL, base, NULL, NULL, &b, err, sizeof err),
        VQ_STATUS_OK);
    vq_logits_close(base);
    ASSERT_NEAR(a.ppl, b.ppl, 1e-6);
    ASSERT(a.nll_mean == b.nll_mean); /* bit-identical in fact */
    ASSERT(b.kld_mean == 0.0 && b.kld_p99 == 0.0);
    ASSERT(b.top1 == 1.0);
    /* fp16 KV: exactly 2 bytes per element of a chunk */
    ASSERT_EQ_INT(a.mem.total_bytes, 2ull * 2 * 30 * 3 * 64 * CTX);
}

/* The public entry (vq_perplexity, vq_engine.h) is the same protocol: with no config name it
 * equals vq_ppl_run bit for bit, with the name "fp16" (resolved by the KV spec, as the CLI and
 * Python pass it) too; a name it cannot resolve, an odd ctx and a short text are refused with
 * a reason. The progress callback sees every chunk. */
static int n_progress;
static void count_progress(void *user, int chunk, int n, double ppl) {
    (void)user;
    (void)ppl;
    n_progress += chunk >= 1 && chunk <= n;
}

TEST(public_entry_is_the_protocol) {
    struct vq_ppl_params p = params(VQ_METHOD_FP16, 16);
    struct vq_ppl_result a, b, c;
    char err[256];
    ASSERT_STATUS(
        vq_ppl_run(model, tokens, n_tokens, &p, NULL, NULL, NULL, NULL, &a, err, sizeof err),
        VQ_STATUS_OK);
    n_progress = 0;
    ASSERT_STATUS(
        vq_perplexity(model, tokens, n_tokens, &p, NULL, count_progress, NULL, &b, err, sizeof err),
        VQ_STATUS_OK);
    ASSERT_EQ_INT(n_progress, CHUNKS);
    ASSERT(a.nll_mean == b.nll_mean && a.ppl == b.ppl && a.n_scored == b.n_scored);
    ASSERT_STATUS(
        vq_perplexity(model, tokens, n_tokens, &p, "fp16", NULL, NULL, &c, err, sizeof err),
        VQ_STATUS_OK);
    ASSERT(c.nll_mean == a.nll_mean && c.mem.total_bytes == a.mem.total_bytes);
    ASSERT(isnan(b.kld_mean) && isnan(c.top1));
    ASSERT_STATUS(
        vq_perplexity(model, tokens, n_tokens, &p, "kv44", NULL, NULL, &c, err, sizeof err),
        VQ_STATUS_INVALID_ARG);
    ASSERT(strstr(err, "kv4") != NULL);
    p.ctx = CTX + 1;
    ASSERT_STATUS(vq_perplexity(model, tokens, n_tokens, &p, NULL, NULL, NULL, &c, err, sizeof err),
                  VQ_STATUS_INVALID_ARG);
    p.ctx = CTX;
    ASSERT_STATUS(vq_perplexity(model, tokens, CTX - 1, &p, NULL, NULL, NULL, &c, err, sizeof err),
                  VQ_STATUS_INVALID_ARG);
    ASSERT(strstr(err, "fewer than one chunk") != NULL);
    ASSERT_STATUS(vq_perplexity(NULL, tokens, n_tokens, &p, NULL, NULL, NULL, &c, NULL, 0),
                  VQ_STATUS_INVALID_ARG);
    /* SmolLM2's tokenizer adds no BOS: VQ_PPL_BOS_AUTO replaces nothing */
    ASSERT_EQ_INT(vq_token_add_bos(model), 0);
}

TEST(base_mismatch_rejected) {
    struct vq_ppl_params p = params(VQ_METHOD_FP16, 16);
    p.n_chunks = CHUNKS - 1; /* fewer positions than the base holds */
    struct vq_ppl_result r;
    char err[256];
    vq_status st;
    vq_logits_file *base = vq_logits_open(BASE, &st);
    ASSERT(base != NULL);
    if (!base) return;
    ASSERT_STATUS(
        vq_ppl_run(model, tokens, n_tokens, &p, NULL, base, NULL, NULL, &r, err, sizeof err),
        VQ_STATUS_BAD_FORMAT);
    ASSERT(strstr(err, "do not match") != NULL);
    vq_logits_close(base);
    /* another text with the same length: targets differ */
    p.n_chunks = CHUNKS;
    base = vq_logits_open(BASE, &st);
    ASSERT_STATUS(vq_ppl_run(model, tokens + 1, n_tokens - 1, &p, NULL, base, NULL, NULL, &r, err,
                             sizeof err),
                  VQ_STATUS_BAD_FORMAT);
    vq_logits_close(base);
}

TEST(kl_grows_as_bits_drop) {
    double kl[3], ppl[3], top1[3];
    const int bits[3] = {4, 3, 2};
    for (int i = 0; i < 3; i++) {
        struct vq_ppl_params p = params(VQ_METHOD_TURBOQUANT_MSE, bits[i]);
        struct vq_ppl_result r;
        char err[256];
        vq_status st;
        vq_logits_file *base = vq_logits_open(BASE, &st);
        ASSERT(base != NULL);
        if (!base) return;
        st = vq_ppl_run(model, tokens, n_tokens, &p, NULL, base, NULL, NULL, &r, err, sizeof err);
        vq_logits_close(base);
        ASSERT_STATUS(st, VQ_STATUS_OK);
        if (st != VQ_STATUS_OK) {
            fprintf(stderr, "  %s\n", err);
            return;
        }
        kl[i] = r.kld_mean;
        ppl[i] = r.ppl;
        top1[i] = r.top1;
        fprintf(stderr,
                "  turboquant_mse-%d: ppl %.4f, KL mean %.5f median %.5f p99 %.5f, top-1 %.3f, "
                "KV %zu bytes\n",
                bits[i], r.ppl, r.kld_mean, r.kld_median, r.kld_p99, r.top1, r.mem.total_bytes);
        ASSERT(r.kld_mean > 0);
        ASSERT(r.mem.total_bytes < 2ull * 2 * 30 * 3 * 64 * CTX);
    }
    ASSERT(kl[0] < kl[1]);
    ASSERT(kl[1] < kl[2]);
    ASSERT(top1[0] >= top1[2]);
    ASSERT(ppl[2] > ppl[0] * 0.98);
}

static int eog(void *user, int32_t id) { return vq_tok_is_eog((const vq_tokenizer *)user, id); }

TEST(probe_greedy) {
    /* the first probe prompt through the chat template: greedy output is deterministic, stops
     * at end-of-turn before the limit, and answers "Paris" */
    vq_status st;
    vq_tokenizer *tok = vq_tok_create(vq_model_gguf(model), &st);
    struct vq_chat_template tmpl;
    vq_chat_from_gguf(vq_model_gguf(model), &tmpl);
    struct vq_chat_msg msg = {"user", vq_probe_prompts[0]};
    char text[2048];
    int64_t tl = vq_chat_apply(&tmpl, &msg, 1, true, text, sizeof text);
    ASSERT(tl > 0);
    int32_t ids[512];
    int64_t n = vq_tok_encode(tok, text, (size_t)tl, true, true, ids, 512);
    ASSERT(n > 10);
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = 256;
    cp.n_threads = 1;
    vq_ctx *c = vq_ctx_create(model, &cp, &st);
    ASSERT(c != NULL);
    if (!c || n <= 0) {
        vq_tok_free(tok);
        return;
    }
    const int max_new = 40;
    int32_t a[40], b[40];
    int na, nb;
    double ps, ds;
    ASSERT_STATUS(vq_probe_generate(c, vq_model_info_get(model)->n_vocab, ids, n, max_new, eog, tok,
                                    a, &na, &ps, &ds),
                  VQ_STATUS_OK);
    ASSERT_STATUS(vq_probe_generate(c, vq_model_info_get(model)->n_vocab, ids, n, max_new, eog, tok,
                                    b, &nb, &ps, &ds),
                  VQ_STATUS_OK);
    ASSERT(na > 0 && na < max_new);
    ASSERT_EQ_INT(vq_common_prefix(a, na, b, nb), na);
    ASSERT_EQ_INT(na, nb);
    char out[1024];
    int64_t ol = vq_tok_detokenize(tok, a, na, out, sizeof out - 1, true, false);
    ASSERT(ol > 0);
    out[ol > 0 ? ol : 0] = 0;
    fprintf(stderr, "  probe: %d tokens: %s\n", na, out);
    ASSERT(strstr(out, "Paris") != NULL);
    ASSERT(vq_probe_n_prompts >= 8);
    vq_ctx_free(c);
    vq_tok_free(tok);
}

int main(void) {
    snprintf(BASE, sizeof BASE, "/tmp/vq_test_ppl_base_%ld.logits", (long)getpid());
    if (!setup()) {
        ASSERT(0);
        return TEST_REPORT();
    }
    RUN(reproducible_and_self_kl_zero);
    RUN(base_mismatch_rejected);
    RUN(public_entry_is_the_protocol);
    RUN(kl_grows_as_bits_drop);
    RUN(probe_greedy);
    unlink(BASE);
    free(tokens);
    vq_model_free(model);
    return TEST_REPORT();
}
