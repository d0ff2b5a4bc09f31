/* test_model_textgen.c — the text API of vq_engine.h on the default model: tokenize /
 * detokenize round trip with multi-byte UTF-8, the incremental detokenizer, the chat template
 * against the internal vq_chat_apply, vq_generate against the manual loop (vq_ctx_eval +
 * vq_sampler_sample) token for token, streaming, stop strings, finish reasons (LENGTH, CONTEXT,
 * CAPACITY) and conversations whose later turns evaluate only their new tokens (fp16 and KIVI
 * caches). */
#include "test.h"

#include <stdint.h>
#include <unistd.h>

#include "vq_engine.h"
#include "engine/chat.h"
#include "engine/gguf.h"
#include "engine/tokenizer.h"

#define MODEL VQ_MODELS_DIR "/SmolLM2-135M-Instruct.Q4_1.gguf"
static vq_model *g_m;

static const char *PROMPTS[] = {
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
};
#define N_PROMPTS 3

static vq_ctx *make_ctx(int64_t n_ctx, enum vq_method km, int kbits) {
    struct vq_ctx_params cp = vq_ctx_params_default();
    cp.n_ctx = n_ctx;
    cp.n_threads = 1;
    cp.cache.key.method = km;
    cp.cache.key.bits = kbits;
    if (km == VQ_METHOD_KIVI) {
        cp.cache.key.group_size = 32;
        cp.cache.key.residual_length = 32;
    }
    vq_status st;
    vq_ctx *c = vq_ctx_create(g_m, &cp, &st);
    if (!c) fprintf(stderr, "ctx: %s\n", vq_engine_last_error());
    return c;
}

/* Text of a generation collected from the streaming callback. */
struct sink {
    char buf[8192];
    size_t len;
    int calls;
    int stop_after; /* > 0: return 1 at this call */
};

static int on_piece(void *user, const char *piece, size_t len) {
    struct sink *s = user;
    if (s->len + len < sizeof s->buf) {
        memcpy(s->buf + s->len, piece, len);
        s->len += len;
        s->buf[s->len] = 0;
    }
    s->calls++;
    return s->stop_after > 0 && s->calls >= s->stop_after;
}

TEST(tokenize_roundtrip_utf8) {
    const char *text = "Héllo wörld — naïve café, 日本語のテキスト 🙂🚀 done.";
    int32_t ids[256];
    int64_t n = vq_tokenize(g_m, text, strlen(text), 0, 0, ids, 256);
    ASSERT(n > 10);
    /* too small a buffer: -(ids needed) */
    ASSERT_EQ_INT(vq_tokenize(g_m, text, strlen(text), 0, 0, ids, 3), -n);
    ASSERT_EQ_INT(vq_tokenize(g_m, text, strlen(text), 0, 0, NULL, 0), -n);
    char out[512];
    int64_t w = vq_detokenize(g_m, ids, n, out, sizeof out, 0, 0);
    ASSERT_EQ_INT(w, (int64_t)strlen(text));
    ASSERT(w > 0 && !memcmp(out, text, (size_t)w));
    ASSERT(vq_detokenize(g_m, ids, n, out, 4, 0, 0) == -(int64_t)strlen(text));
    /* pieces concatenate to the text too */
    size_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t pw = vq_token_to_piece(g_m, ids[i], out + off, sizeof out - off, 0);
        ASSERT(pw >= 0);
        off += (size_t)(pw > 0 ? pw : 0);
    }
    ASSERT(off == strlen(text) && !memcmp(out, text, off));
    /* special tokens: parsed only with parse_special */
    const char *sp = "<|im_start|>user";
    int32_t a[16], b[16];
    int64_t na = vq_tokenize(g_m, sp, strlen(sp), 0, 1, a, 16);
    int64_t nb = vq_tokenize(g_m, sp, strlen(sp), 0, 0, b, 16);
    ASSERT(na == 2 && nb > na);
    ASSERT(vq_token_is_eog(g_m, vq_token_eos(g_m)));
    ASSERT(!vq_token_is_eog(g_m, ids[0]));
    ASSERT(vq_token_to_piece(g_m, a[0], out, sizeof out, 0) == 0); /* control: no text */
    ASSERT(vq_token_to_piece(g_m, a[0], out, sizeof out, 1) == 12);
    ASSERT(vq_tokenize(NULL, "x", 1, 0, 0, a, 16) == VQ_TEXT_ERROR);
}

TEST(detok_stream_equals_detokenize) {
    const char *text =
        "ÀÉÎ 漢字かな 🙂🙃🤖 mixed ascii + ÿ and emoji 👩‍💻 end";
    int32_t ids[256];
    int64_t n = vq_tokenize(g_m, text, strlen(text), 0, 0, ids, 256);
    ASSERT(n > 0);
    vq_status st;
    vq_detok *d = vq_detok_create(g_m, 0, &st);
    ASSERT(d != NULL);
    if (!d) return;
    char all[512], piece[64];
    size_t len = 0;
    int partial = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t w = vq_detok_push(d, ids[i], piece, sizeof piece);
        ASSERT(w >= 0);
        if (w < 0) break;
        /* every output is whole UTF-8: it never ends inside a character */
        if (w > 0) {
            unsigned char last = (unsigned char)piece[w - 1];
            ASSERT(last < 0x80 || (last & 0xC0) == 0x80);
        }
        partial += w == 0;
        memcpy(all + len, piece, (size_t)w);
        len += (size_t)w;
    }
    int64_t w = vq_detok_flush(d, piece, sizeof piece);
    ASSERT(w >= 0);
    memcpy(all + len, piece, (size_t)(w > 0 ? w : 0));
    len += (size_t)(w > 0 ? w : 0);
    char whole[512];
    int64_t ww = vq_detokenize(g_m, ids, n, whole, sizeof whole, 0, 0);
    ASSERT_EQ_INT(ww, (int64_t)len);
    ASSERT(!memcmp(all, whole, len));
    printf("detok: %lld ids, %d pushes held bytes back\n", (long long)n, partial);
    /* too small a buffer: nothing changes, the call can be repeated */
    vq_detok *d2 = vq_detok_create(g_m, 0, &st);
    int64_t need = vq_detok_push(d2, ids[0], piece, 0);
    ASSERT(need <= 0);
    vq_detok_free(d2);
    vq_detok_free(d);
    vq_detok_free(NULL);
}

TEST(chat_template_matches_internal) {
    struct vq_chat_message msgs[] = {
        {"system", "You are terse."},
        {"user", "Hi there"},
        {"assistant", "Hello!"},
        {"user", "What is 2+2?"},
    };
    struct vq_chat_template t;
    /* SmolLM2's template is ChatML with a default system prompt */
    vq_gguf *g = vq_gguf_open(MODEL, NULL);
    ASSERT(g != NULL);
    if (!g) return;
    ASSERT_STATUS(vq_chat_from_gguf(g, &t), VQ_STATUS_OK);
    ASSERT_EQ_INT(t.format, VQ_CHAT_CHATML);
    for (size_t first = 0; first < 2; first++) { /* with and without the system message */
        char a[2048], b[2048];
        int64_t na = vq_model_chat_apply(g_m, msgs + first, 4 - first, 1, a, sizeof a);
        int64_t nb = vq_chat_apply(&t, (const struct vq_chat_msg *)(const void *)(msgs + first),
                                   4 - first, true, b, sizeof b);
        ASSERT(na > 0);
        ASSERT_EQ_INT(na, nb);
        ASSERT(!strcmp(a, b));
        ASSERT(strstr(a, "<|im_start|>assistant\n") != NULL);
        ASSERT_EQ_INT(vq_model_chat_apply(g_m, msgs + first, 4 - first, 1, a, 10), -(na + 1));
        ASSERT_EQ_INT(vq_model_chat_apply(g_m, msgs + first, 4 - first, 1, NULL, 0), -(na + 1));
        if (first) ASSERT(strstr(a, "SmolLM") != NULL); /* the template's default system */
    }
    struct vq_chat_message bad = {"user", NULL};
    char x[64];
    ASSERT(vq_model_chat_apply(g_m, &bad, 1, 1, x, sizeof x) == VQ_TEXT_ERROR);
    vq_gguf_close(g);
}

/* The loop cmd_generate ran before vq_generate: prefill in one call, greedy sample, stop at
 * end-of-generation, evaluate each token. Writes the text into out. Returns tokens generated. */
static int manual_loop(const char *prompt, int n_gen, char *out, size_t cap) {
    int32_t ids[256];
    int64_t n = vq_tokenize(g_m, prompt, strlen(prompt), 1, 0, ids, 256);
    vq_ctx *c = make_ctx(256, VQ_METHOD_FP16, 16);
    const int nv = vq_model_info_get(g_m)->n_vocab;
    float *lg = malloc(sizeof(float) * (size_t)nv);
    struct vq_sampler_params sp = vq_sampler_params_default();
    vq_status st;
    vq_sampler *s = vq_sampler_create(&sp, nv, &st);
    vq_detok *d = vq_detok_create(g_m, 0, &st);
    size_t len = 0;
    int gen = 0;
    if (vq_ctx_eval(c, ids, n, lg) == VQ_STATUS_OK)
        while (gen < n_gen) {
            int32_t t = vq_sampler_sample(s, lg);
            if (vq_token_is_eog(g_m, t)) break;
            gen++;
            int64_t w = vq_detok_push(d, t, out + len, cap - len);
            len += (size_t)(w > 0 ? w : 0);
            if (gen == n_gen || vq_ctx_eval(c, &t, 1, lg) != VQ_STATUS_OK) break;
        }
    int64_t w = vq_detok_flush(d, out + len, cap - len);
    len += (size_t)(w > 0 ? w : 0);
    out[len] = 0;
    vq_detok_free(d);
    vq_sampler_free(s);
    free(lg);
    vq_ctx_free(c);
    return gen;
}

TEST(generate_matches_manual_loop) {
    for (int k = 0; k < N_PROMPTS; k++) {
        char want[4096];
        int n_want = manual_loop(PROMPTS[k], 24, want, sizeof want);
        vq_ctx *c = make_ctx(256, VQ_METHOD_FP16, 16);
        struct vq_gen_params p = vq_gen_params_default();
        p.max_tokens = 24;
        struct sink snk = {{0}, 0, 0, 0};
        p.on_piece = on_piece;
        p.user = &snk;
        struct vq_gen_result r;
        ASSERT_STATUS(vq_generate(c, PROMPTS[k], &p, &r), VQ_STATUS_OK);
        ASSERT_EQ_INT(r.n_generated, n_want);
        ASSERT(r.text && !strcmp(r.text, want));
        ASSERT_EQ_INT(r.text_len, strlen(want));
        ASSERT(snk.len == r.text_len && !memcmp(snk.buf, r.text, r.text_len));
        ASSERT_EQ_INT(r.n_cached, 0);
        ASSERT_EQ_INT(r.n_evaluated, r.n_prompt);
        ASSERT_EQ_INT(vq_ctx_n_past(c), r.n_prompt + r.n_decoded);
        if (r.finish == VQ_FINISH_LENGTH) ASSERT_EQ_INT(r.n_decoded, r.n_generated - 1);
        else ASSERT_EQ_INT(r.finish, VQ_FINISH_STOP);
        printf("%-40s -> \"%s\" (%s)\n", PROMPTS[k], r.text, vq_finish_reason_name(r.finish));
        /* the same prompt again on the same context: the cache is reused but for the last
         * prompt token (a one-token batch: numerics may differ slightly, so only counts) */
        struct vq_gen_result r2;
        p.on_piece = NULL;
        ASSERT_STATUS(vq_generate(c, PROMPTS[k], &p, &r2), VQ_STATUS_OK);
        ASSERT_EQ_INT(r2.n_cached, r.n_prompt - 1);
        ASSERT_EQ_INT(r2.n_evaluated, 1);
        vq_gen_result_free(&r2);
        vq_gen_result_free(&r);
        vq_ctx_free(c);
    }
}

/* A stop string taken from the middle of the greedy text: the text ends right before its first
 * occurrence, and no piece delivered ever contains it. */
TEST(stop_strings) {
    vq_ctx *c = make_ctx(256, VQ_METHOD_FP16, 16);
    struct vq_gen_params p = vq_gen_params_default();
    p.max_tokens = 40;
    struct vq_gen_result full;
    ASSERT_STATUS(vq_generate(c, PROMPTS[1], &p, &full), VQ_STATUS_OK);
    ASSERT(full.text_len > 20);
    if (full.text_len <= 20) return;
    /* a 5-byte stop string starting near the middle, on a character boundary */
    size_t at = full.text_len / 2;
    while (at > 0 && ((unsigned char)full.text[at] & 0xC0) == 0x80) at--;
    char stop[8];
    memcpy(stop, full.text + at, 5);
    stop[5] = 0;
    const size_t first = (size_t)(strstr(full.text, stop) - full.text);
    const char *stops[] = {"", "zzzz-never", stop};
    p.stop = stops;
    p.n_stop = 3;
    struct sink snk = {{0}, 0, 0, 0};
    p.on_piece = on_piece;
    p.user = &snk;
    struct vq_gen_result r;
    ASSERT_STATUS(vq_generate(c, PROMPTS[1], &p, &r), VQ_STATUS_OK);
    ASSERT_EQ_INT(r.finish, VQ_FINISH_STOP);
    ASSERT_EQ_INT(r.text_len, first);
    ASSERT(!memcmp(r.text, full.text, first));
    ASSERT(snk.len == r.text_len && !memcmp(snk.buf, r.text, r.text_len));
    ASSERT(strstr(snk.buf, stop) == NULL);
    ASSERT(r.n_generated < full.n_generated);
    printf("stop \"%s\": \"%s\"\n", stop, r.text);
    vq_gen_result_free(&r);
    /* a stop string that starts at the first byte: no text at all */
    char first2[3] = {full.text[0], 0, 0};
    const char *s2[] = {first2};
    p.stop = s2;
    p.n_stop = 1;
    snk.len = 0;
    snk.calls = 0;
    ASSERT_STATUS(vq_generate(c, PROMPTS[1], &p, &r), VQ_STATUS_OK);
    ASSERT_EQ_INT(r.finish, VQ_FINISH_STOP);
    ASSERT_EQ_INT(r.text_len, 0);
    ASSERT_EQ_INT(snk.calls, 0);
    vq_gen_result_free(&r);
    /* a NULL entry is an argument error */
    const char *s3[] = {NULL};
    p.stop = s3;
    ASSERT_STATUS(vq_generate(c, PROMPTS[1], &p, &r), VQ_STATUS_INVALID_ARG);
    ASSERT(r.text == NULL);
    vq_gen_result_free(&full);
    vq_ctx_free(c);
}

TEST(finish_reasons) {
    vq_ctx *c = make_ctx(256, VQ_METHOD_FP16, 16);
    struct vq_gen_params p = vq_gen_params_default();
    struct vq_gen_result r;
    p.max_tokens = 5;
    ASSERT_STATUS(vq_generate(c, PROMPTS[1], &p, &r), VQ_STATUS_OK);
    ASSERT_EQ_INT(r.finish, VQ_FINISH_LENGTH);
    ASSERT_EQ_INT(r.n_generated, 5);
    ASSERT_EQ_INT(r.n_decoded, 4);
    vq_gen_result_free(&r);
    p.max_tokens = 0; /* prefill only */
    ASSERT_STATUS(vq_generate(c, PROMPTS[1], &p, &r), VQ_STATUS_OK);
    ASSERT_EQ_INT(r.finish, VQ_FINISH_LENGTH);
    ASSERT_EQ_INT(r.n_generated, 0);
    ASSERT(r.text && r.text_len == 0 && r.text[0] == 0);
    vq_gen_result_free(&r);
    /* callback stop after the second piece: the text is what the callback got */
    struct sink snk = {{0}, 0, 0, 2};
    p.max_tokens = 30;
    p.on_piece = on_piece;
    p.user = &snk;
    ASSERT_STATUS(vq_generate(c, PROMPTS[1], &p, &r), VQ_STATUS_OK);
    ASSERT_EQ_INT(r.finish, VQ_FINISH_CALLBACK);
    ASSERT_EQ_INT(snk.calls, 2);
    ASSERT(snk.len == r.text_len && !memcmp(snk.buf, r.text, r.text_len));
    vq_gen_result_free(&r);
    vq_ctx_free(c);
    /* a context 3 tokens longer than the prompt: CONTEXT after 4 tokens (the last one sampled
     * from the full context is not evaluated) */
    int64_t np = vq_tokenize(g_m, PROMPTS[1], strlen(PROMPTS[1]), 1, 0, NULL, 0);
    np = np < 0 ? -np : np;
    c = make_ctx(np + 3, VQ_METHOD_FP16, 16);
    p.on_piece = NULL;
    ASSERT_STATUS(vq_generate(c, PROMPTS[1], &p, &r), VQ_STATUS_OK);
    ASSERT(r.finish == VQ_FINISH_CONTEXT || r.finish == VQ_FINISH_STOP);
    if (r.finish == VQ_FINISH_CONTEXT) ASSERT_EQ_INT(r.n_generated, 4);
    ASSERT_EQ_INT(vq_ctx_n_past(c), np + r.n_decoded);
    ASSERT(vq_ctx_n_past(c) <= np + 3);
    vq_gen_result_free(&r);
    vq_ctx_free(c);
    /* a context shorter than the prompt: CAPACITY with a message, nothing evaluated */
    c = make_ctx(np - 2, VQ_METHOD_FP16, 16);
    ASSERT_STATUS(vq_generate(c, PROMPTS[1], &p, &r), VQ_STATUS_CAPACITY);
    ASSERT(strstr(vq_engine_last_error(), "context full") != NULL);
    ASSERT_EQ_INT(vq_ctx_n_past(c), 0);
    ASSERT(r.text == NULL);
    vq_ctx_free(c);
}

/* Three turns: the second and third evaluate only their new tokens, on the whole cache of the
 * turn before (n_cached = n_past after the previous turn). */
static void conversation_check(enum vq_method km, int kbits, const char *label) {
    vq_ctx *c = make_ctx(1024, km, kbits);
    ASSERT(c != NULL);
    if (!c) return;
    vq_status st;
    vq_conversation *v = vq_conversation_create(c, "You are a helpful assistant.", &st);
    ASSERT(v != NULL);
    if (!v) return;
    const char *turns[] = {"What is the capital of France?", "And of Italy?",
                           "Name one famous dish from there."};
    struct vq_gen_params p = vq_gen_params_default();
    p.max_tokens = 40;
    int64_t prev = 0;
    static struct sink snk; /* outlives the loop: p keeps pointing at it */
    for (int t = 0; t < 3; t++) {
        struct vq_gen_result r;
        memset(&snk, 0, sizeof snk);
        p.on_piece = on_piece;
        p.user = &snk;
        ASSERT_STATUS(vq_conversation_turn(v, turns[t], &p, &r), VQ_STATUS_OK);
        /* the whole templated conversation, for comparison */
        size_t nm = vq_conversation_n_messages(v);
        ASSERT_EQ_INT(nm, 1 + 2 * (t + 1));
        struct vq_chat_message m[8];
        for (size_t i = 0; i + 1 < nm; i++) m[i] = *vq_conversation_message(v, i);
        char buf[8192];
        int64_t fl = vq_model_chat_apply(g_m, m, nm - 1, 1, buf, sizeof buf);
        int64_t full = vq_tokenize(g_m, buf, (size_t)fl, 1, 1, NULL, 0);
        full = full < 0 ? -full : full;
        printf(
            "%s turn %d: prompt %lld (templated alone %lld), cached %lld, evaluated %lld, "
            "generated %lld (%s), n_past %lld\n",
            label, t + 1, (long long)r.n_prompt, (long long)full, (long long)r.n_cached,
            (long long)r.n_evaluated, (long long)r.n_generated, vq_finish_reason_name(r.finish),
            (long long)vq_conversation_n_past(v));
        ASSERT_EQ_INT(r.n_cached + r.n_evaluated, r.n_prompt);
        if (t > 0) {
            ASSERT_EQ_INT(r.n_cached, prev);
            ASSERT(r.n_evaluated < full);
            ASSERT(r.n_evaluated < r.n_prompt);
        } else {
            ASSERT_EQ_INT(r.n_prompt, full);
            ASSERT_EQ_INT(r.n_cached, 0);
        }
        ASSERT(snk.len == r.text_len && !memcmp(snk.buf, r.text, r.text_len));
        const struct vq_chat_message *last = vq_conversation_message(v, nm - 1);
        ASSERT(last && !strcmp(last->role, "assistant") && !strcmp(last->content, r.text));
        prev = vq_conversation_n_past(v);
        ASSERT_EQ_INT(prev, r.n_prompt + r.n_decoded);
        vq_gen_result_free(&r);
    }
    /* a turn that cannot fit: CAPACITY, the messages stay as they were */
    char big[6000];
    for (size_t i = 0; i + 1 < sizeof big; i++) big[i] = "abc def "[i % 8];
    big[sizeof big - 1] = 0;
    struct vq_gen_result r;
    size_t nm = vq_conversation_n_messages(v);
    ASSERT_STATUS(vq_conversation_turn(v, big, &p, &r), VQ_STATUS_CAPACITY);
    ASSERT(strstr(vq_engine_last_error(), "context full") != NULL);
    ASSERT_EQ_INT(vq_conversation_n_messages(v), nm);
    /* the next turn still works and reuses the cache */
    ASSERT_STATUS(vq_conversation_turn(v, "Thanks!", &p, &r), VQ_STATUS_OK);
    ASSERT_EQ_INT(r.n_cached, prev);
    vq_gen_result_free(&r);
    vq_conversation_reset(v);
    ASSERT_EQ_INT(vq_conversation_n_past(v), 0);
    ASSERT_EQ_INT(vq_conversation_n_messages(v), 1);
    ASSERT_STATUS(vq_conversation_turn(v, turns[0], &p, &r), VQ_STATUS_OK);
    ASSERT_EQ_INT(r.n_cached, 0);
    vq_gen_result_free(&r);
    vq_conversation_free(v);
    vq_ctx_free(c);
}

TEST(conversation_fp16) { conversation_check(VQ_METHOD_FP16, 16, "fp16"); }
TEST(conversation_kivi4) { conversation_check(VQ_METHOD_KIVI, 4, "kivi4"); }

/* KIVI keys (groups of 32, 32 fp16 tokens): a prompt that shares only a prefix with the cache
 * cuts it back inside an encoded group; the cut lands where the codec can cut (at or before the
 * common prefix) and the rest is evaluated. */
TEST(prefix_reuse_kivi_cut) {
    vq_ctx *c = make_ctx(512, VQ_METHOD_KIVI, 4);
    ASSERT(c != NULL);
    if (!c) return;
    int32_t ids[200];
    const char *text =
        "The history of the city begins with a small fishing settlement on the "
        "river, where traders from the north met farmers from the south. Over "
        "the centuries the market grew into a town, the town into a city, and "
        "the city into the capital of a kingdom that stretched to the sea. Its "
        "walls were rebuilt three times, each time larger than before.";
    int64_t n = vq_tokenize(g_m, text, strlen(text), 1, 0, ids, 200);
    printf("kivi cut: prompt of %lld tokens\n", (long long)n);
    ASSERT(n > 60);
    if (n <= 60) return;
    struct vq_gen_params p = vq_gen_params_default();
    p.max_tokens = 4;
    struct vq_gen_result r;
    ASSERT_STATUS(vq_generate_tokens(c, ids, n, &p, &r), VQ_STATUS_OK);
    vq_gen_result_free(&r);
    const int64_t common = 20; /* inside the first encoded group */
    for (int64_t i = common; i < n; i++) ids[i] = ids[i - common]; /* a different tail */
    ASSERT_STATUS(vq_generate_tokens(c, ids, n, &p, &r), VQ_STATUS_OK);
    printf("kivi cut: common prefix %lld, cached %lld, evaluated %lld\n", (long long)common,
           (long long)r.n_cached, (long long)r.n_evaluated);
    ASSERT(r.n_cached <= common);
    ASSERT_EQ_INT(r.n_cached + r.n_evaluated, n);
    const int32_t *h = vq_ctx_tokens(c);
    ASSERT(!memcmp(h, ids, sizeof *ids * (size_t)n));
    vq_gen_result_free(&r);
    vq_ctx_free(c);
}

/* A stop string that cuts the reply: the next turn's text differs from the known tokens' text
 * inside the reply, so the reply is partly evaluated again; counts stay consistent. */
TEST(conversation_after_stop_string) {
    vq_ctx *c = make_ctx(1024, VQ_METHOD_FP16, 16);
    vq_status st;
    vq_conversation *v = vq_conversation_create(c, NULL, &st);
    ASSERT(v != NULL);
    if (!v) return;
    struct vq_gen_params p = vq_gen_params_default();
    p.max_tokens = 30;
    const char *stops[] = {" "};
    p.stop = stops;
    p.n_stop = 1;
    struct vq_gen_result r;
    ASSERT_STATUS(vq_conversation_turn(v, "Say hello to the world.", &p, &r), VQ_STATUS_OK);
    ASSERT(r.finish == VQ_FINISH_STOP);
    ASSERT(strchr(r.text, ' ') == NULL);
    const int64_t prev = vq_conversation_n_past(v);
    vq_gen_result_free(&r);
    p.n_stop = 0;
    ASSERT_STATUS(vq_conversation_turn(v, "Again please.", &p, &r), VQ_STATUS_OK);
    ASSERT_EQ_INT(r.n_cached + r.n_evaluated, r.n_prompt);
    ASSERT(r.n_cached > 0 && r.n_cached <= prev);
    vq_gen_result_free(&r);
    vq_conversation_free(v);
    vq_ctx_free(c);
}

/* A reply that fills the context ends with CONTEXT (the cache then holds n_ctx tokens); the
 * next turn cannot fit: CAPACITY with a message, the messages unchanged, no crash; after a
 * reset the conversation works again. */
TEST(conversation_fills_context) {
    vq_ctx *c = make_ctx(48, VQ_METHOD_FP16, 16);
    vq_status st;
    vq_conversation *v = vq_conversation_create(c, "Be verbose.", &st);
    ASSERT(v != NULL);
    if (!v) return;
    struct vq_gen_params p = vq_gen_params_default();
    p.max_tokens = 1000;
    p.sampling.temperature = 0.8f; /* keeps talking */
    p.sampling.seed = 3;
    struct vq_gen_result r;
    ASSERT_STATUS(vq_conversation_turn(v, "Tell me a long story about a dragon.", &p, &r),
                  VQ_STATUS_OK);
    printf("fill: %lld generated, %s, n_past %lld\n", (long long)r.n_generated,
           vq_finish_reason_name(r.finish), (long long)vq_conversation_n_past(v));
    ASSERT(r.finish == VQ_FINISH_CONTEXT || r.finish == VQ_FINISH_STOP);
    if (r.finish == VQ_FINISH_CONTEXT) ASSERT_EQ_INT(vq_conversation_n_past(v), 48);
    vq_gen_result_free(&r);
    size_t nm = vq_conversation_n_messages(v);
    ASSERT_STATUS(vq_conversation_turn(v, "Go on.", &p, &r), VQ_STATUS_CAPACITY);
    ASSERT(strstr(vq_engine_last_error(), "context full") != NULL);
    ASSERT_EQ_INT(vq_conversation_n_messages(v), nm);
    vq_conversation_reset(v);
    p.max_tokens = 4;
    ASSERT_STATUS(vq_conversation_turn(v, "Hi", &p, &r), VQ_STATUS_OK);
    vq_gen_result_free(&r);
    vq_conversation_free(v);
    vq_ctx_free(c);
}

/* Sampled turns: a conversation replays exactly after a reset (same seed, same messages), and
 * turn 2 does not sample with the caller's seed itself (turn k mixes k into it: passing
 * seed ^ K on turn 2 gives the raw seed's draws, which differ at temperature 1). */
static void two_sampled_turns(vq_conversation *v, uint64_t seed2, char out[2][512]) {
    const char *turns[] = {"Write a line about the sea.", "Another one, about the sky."};
    for (int t = 0; t < 2; t++) {
        struct vq_gen_params p = vq_gen_params_default();
        p.max_tokens = 16;
        p.sampling.temperature = 1.0f;
        p.sampling.seed = t == 0 ? 7 : seed2;
        struct vq_gen_result r;
        ASSERT_STATUS(vq_conversation_turn(v, turns[t], &p, &r), VQ_STATUS_OK);
        snprintf(out[t], 512, "%s", r.text ? r.text : "");
        vq_gen_result_free(&r);
    }
}

TEST(conversation_seed_per_turn) {
    vq_ctx *c = make_ctx(512, VQ_METHOD_FP16, 16);
    vq_status st;
    vq_conversation *v = vq_conversation_create(c, NULL, &st);
    ASSERT(v != NULL);
    if (!v) return;
    char a[2][512], b[2][512], raw[2][512];
    two_sampled_turns(v, 7, a);
    vq_conversation_reset(v);
    two_sampled_turns(v, 7, b);
    ASSERT(!strcmp(a[0], b[0]) && !strcmp(a[1], b[1]));
    vq_conversation_reset(v);
    two_sampled_turns(v, 7 ^ 0x9E3779B97F4A7C15ull, raw);
    printf("seeded turn 2: '%s' | raw seed: '%s'\n", a[1], raw[1]);
    ASSERT(!strcmp(a[0], raw[0]));
    ASSERT(strcmp(a[1], raw[1]) != 0);
    vq_conversation_free(v);
    vq_ctx_free(c);
}

int main(void) {
    if (access(MODEL, R_OK) != 0) {
        fprintf(stderr, "model %s missing (run scripts/fetch_models.sh)\n", MODEL);
        return 1;
    }
    vq_status st;
    g_m = vq_model_load(MODEL, &st);
    if (!g_m) {
        fprintf(stderr, "load: %s\n", vq_engine_last_error());
        return 1;
    }
    RUN(tokenize_roundtrip_utf8);
    RUN(detok_stream_equals_detokenize);
    RUN(chat_template_matches_internal);
    RUN(generate_matches_manual_loop);
    RUN(stop_strings);
    RUN(finish_reasons);
    RUN(conversation_fp16);
    RUN(conversation_kivi4);
    RUN(prefix_reuse_kivi_cut);
    RUN(conversation_after_stop_string);
    RUN(conversation_fills_context);
    RUN(conversation_seed_per_turn);
    vq_model_free(g_m);
    return TEST_REPORT();
}
