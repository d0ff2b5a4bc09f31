/*
 * fuzz_tokenizer.c — libFuzzer target for the tokenizer. Byte 0 of the input picks the
 * tokenizer and flags, the rest is the text:
 *   bits 0-1: 0/1 = the default model's tokenizer (SmolLM2, loaded once from $VQ_MODELS or
 *             ~/.cache/veloxquant/models when present, else the tiny BPE vocabulary),
 *             2 = tiny byte-level BPE (all 256 bytes, a few merges, specials),
 *             3 = tiny SentencePiece vocabulary (byte fallback)
 *   bit 2: parse_special (and unparse_special on the way back); bit 3: add_special
 * Checked on every input: the -(needed) convention, ids in range, and the round trip:
 * byte-level BPE gives back the input minus the bytes the vocabulary cannot represent;
 * SentencePiece gives it back exactly for valid UTF-8 without U+2581 and special tokens; the
 * streaming helper produces the same bytes as concatenated pieces. A violation aborts (a crash for
 * libFuzzer). Replayed over fuzz/corpus/tokenizer/ by fuzz/replay_main.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) \
    do { \
        if (!(c)) { \
            fprintf(stderr, "fuzz_tokenizer: check failed: %s (line %d)\n", #c, __LINE__); \
            abort(); \
        } \
    } while (0)

static vq_tokenizer *tiny_bpe(void) {
    static char text[272][16];
    static const char *const merges[] = {
        "h e",          "l l", "he ll",          "hell o", "\xc4\xa0 w", "o r",
        "\xc4\xa0w or", "l d", "\xc4\xa0wor ld", "x y",    "xy z",       "\xc4\xa0 \xc4\xa0",
        "1 2"};
    static const char *const extra[] = {
        "he",          "ll", "hell",          "hello", "\xc4\xa0w",        "or",
        "\xc4\xa0wor", "ld", "\xc4\xa0world", "xyz",   "\xc4\xa0\xc4\xa0", "12"};
    const char *toks[272];
    int32_t types[272];
    strcpy(text[0], "<|endoftext|>");
    strcpy(text[1], "<|im_start|>");
    strcpy(text[2], "<|im_end|>");
    strcpy(text[3], "<tool>");
    int n = 0;
    for (int b = 0; b < 256; b++) { /* GPT-2 byte map */
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        int cp = printable ? b : 256 + n++;
        char *o = text[4 + b];
        if (cp < 0x80) {
            o[0] = (char)cp;
            o[1] = 0;
        } else {
            o[0] = (char)(0xC0 | (cp >> 6));
            o[1] = (char)(0x80 | (cp & 0x3F));
            o[2] = 0;
        }
    }
    for (int i = 0; i < 12; i++) strcpy(text[260 + i], extra[i]);
    for (int i = 0; i < 272; i++) {
        toks[i] = text[i];
        types[i] = VQ_TOK_TYPE_NORMAL;
    }
    types[0] = types[1] = types[2] = VQ_TOK_TYPE_CONTROL;
    types[3] = VQ_TOK_TYPE_USER_DEFINED;
    struct vq_tok_vocab v;
    vq_tok_vocab_init(&v);
    v.model = "gpt2";
    v.pre = "smollm";
    v.n_tokens = 272;
    v.tokens = toks;
    v.types = types;
    v.n_merges = (int32_t)(sizeof merges / sizeof merges[0]);
    v.merges = merges;
    v.bos = 1;
    v.eos = 2;
    v.add_bos = 1;
    return vq_tok_create_vocab(&v, NULL);
}

static vq_tokenizer *tiny_spm(void) {
    static char text[270][12];
    static const char *const extra[] = {
        "\xe2\x96\x81",    "h",     "e", "l", "o", "\xe2\x96\x81h", "\xe2\x96\x81he", "ll", "lo",
        "\xe2\x96\x81hel", "<tool>"};
    static const float esc[] = {-5, -5, -5, -5, -5, -3, -2.5f, -1, -0.5f, -2, 0};
    const char *toks[270];
    float sc[270];
    int32_t ty[270];
    strcpy(text[0], "<unk>");
    strcpy(text[1], "<s>");
    strcpy(text[2], "</s>");
    for (int b = 0; b < 256; b++) snprintf(text[3 + b], sizeof text[0], "<0x%02X>", b);
    for (int i = 0; i < 11; i++) strcpy(text[259 + i], extra[i]);
    for (int i = 0; i < 270; i++) {
        toks[i] = text[i];
        sc[i] = i >= 259 ? esc[i - 259] : 0.0f;
        ty[i] = i == 0  ? VQ_TOK_TYPE_UNKNOWN
              : i < 3   ? VQ_TOK_TYPE_CONTROL
              : i < 259 ? VQ_TOK_TYPE_BYTE
                        : VQ_TOK_TYPE_NORMAL;
    }
    ty[269] = VQ_TOK_TYPE_USER_DEFINED;
    struct vq_tok_vocab v;
    vq_tok_vocab_init(&v);
    v.model = "llama";
    v.n_tokens = 270;
    v.tokens = toks;
    v.scores = sc;
    v.types = ty;
    v.bos = 1;
    v.eos = 2;
    v.unk = 0;
    return vq_tok_create_vocab(&v, NULL);
}

static vq_tokenizer *model_tok(void) {
    char path[1024];
    const char *dir = getenv("VQ_MODELS");
    if (dir && *dir) snprintf(path, sizeof path, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", dir);
    else
        snprintf(path, sizeof path, "%s/.cache/veloxquant/models/SmolLM2-135M-Instruct.Q4_1.gguf",
                 getenv("HOME") ? getenv("HOME") : ".");
    vq_gguf *g = vq_gguf_open(path, NULL);
    if (!g) return NULL;
    vq_tokenizer *t = vq_tok_create(g, NULL);
    vq_gguf_close(g);
    return t;
}

/* valid for SentencePiece symbol splitting: every lead byte has its continuation bytes */
static int spm_clean(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t b = s[i];
        size_t need = b < 0x80                 ? 1
                    : (b >= 0xC0 && b <= 0xDF) ? 2
                    : (b >= 0xE0 && b <= 0xEF) ? 3
                    : (b >= 0xF0 && b <= 0xF7) ? 4
                                               : 0;
        if (!need || i + need > n) return 0;
        for (size_t k = 1; k < need; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        if (need == 3 && b == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) return 0;
        i += need;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static vq_tokenizer *tm, *tb, *ts;
    static int init;
    if (!init) {
        init = 1;
        tm = model_tok();
        tb = tiny_bpe();
        ts = tiny_spm();
        CHECK(tb && ts);
    }
    if (size < 1) return 0;
    int sel = data[0] & 3;
    bool special = (data[0] >> 2) & 1, add = (data[0] >> 3) & 1;
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    vq_tokenizer *t = sel == 3 ? ts : sel == 2 ? tb : (tm ? tm : tb);

    int64_t need = vq_tok_encode(t, text, n, add, special, NULL, 0);
    CHECK(need <= 0);
    int64_t cnt = -need;
    int32_t *ids = malloc((size_t)(cnt + 1) * sizeof *ids);
    CHECK(ids);
    if (cnt > 1) CHECK(vq_tok_encode(t, text, n, add, special, ids, cnt - 1) == need);
    CHECK(vq_tok_encode(t, text, n, add, special, ids, cnt) == cnt);
    int32_t nv = vq_tok_n_vocab(t);
    for (int64_t i = 0; i < cnt; i++) CHECK(ids[i] >= 0 && ids[i] < nv);

    /* concatenated pieces and the stream */
    size_t cap = 8 * n + 64 * (size_t)cnt + 16;
    char *pieces = malloc(cap), *streamed = malloc(cap), *det = malloc(cap);
    CHECK(pieces && streamed && det);
    size_t pl = 0, sl = 0;
    struct vq_tok_stream st;
    vq_tok_stream_init(&st);
    for (int64_t i = 0; i < cnt; i++) {
        int64_t k = vq_tok_token_to_piece(t, ids[i], pieces + pl, cap - pl, special);
        CHECK(k >= 0);
        pl += (size_t)k;
        int64_t e = vq_tok_stream_push(t, &st, ids[i], special, streamed + sl, cap - sl);
        CHECK(e >= 0);
        sl += (size_t)e;
    }
    int64_t e = vq_tok_stream_flush(&st, streamed + sl, cap - sl);
    CHECK(e >= 0);
    sl += (size_t)e;
    CHECK(sl == pl && memcmp(pieces, streamed, pl) == 0);

    int64_t dl = vq_tok_detokenize(t, ids, cnt, det, cap, false, special);
    CHECK(dl >= 0);
    if (dl > 0) CHECK(vq_tok_detokenize(t, ids, cnt, det, (size_t)dl - 1, false, special) < 0);

    if (vq_tok_model(t) == VQ_TOK_MODEL_BPE && !add) {
        /* expected: the input without bytes that have no token */
        size_t w = 0;
        char *exp = malloc(n + 1);
        CHECK(exp);
        for (size_t i = 0; i < n; i++) {
            /* the byte's token text is its GPT-2 mapped character */
            uint8_t b = (uint8_t)text[i];
            int cp = b, k = 0;
            if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
                for (int c = 0; c < b; c++)
                    if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) k++;
                cp = 256 + k;
            }
            char bc[2];
            size_t bl = 1;
            if (cp < 0x80) bc[0] = (char)cp;
            else {
                bc[0] = (char)(0xC0 | (cp >> 6));
                bc[1] = (char)(0x80 | (cp & 0x3F));
                bl = 2;
            }
            if (vq_tok_find(t, bc, bl) >= 0) exp[w++] = text[i];
        }
        /* special-token texts are ASCII made of representable bytes in both vocabularies, so
         * the property holds with parse_special too */
        CHECK(pl == w && memcmp(pieces, exp, w) == 0);
        free(exp);
    }
    /* SentencePiece: a special token in the middle makes the next fragment start with the
     * space prefix again (llama.cpp behaviour), so only plain texts must round-trip */
    int plain = 1;
    for (int64_t i = 0; i < cnt; i++) {
        enum vq_tok_type ty = vq_tok_type(t, ids[i]);
        if (ty == VQ_TOK_TYPE_CONTROL || ty == VQ_TOK_TYPE_USER_DEFINED ||
            ty == VQ_TOK_TYPE_UNKNOWN)
            plain = 0;
    }
    if (vq_tok_model(t) == VQ_TOK_MODEL_SPM && !add && plain && spm_clean(data + 1, n)) {
        CHECK((size_t)dl == n && memcmp(det, text, n) == 0);
    }
    free(ids);
    free(pieces);
    free(streamed);
    free(det);
    return 0;
}
