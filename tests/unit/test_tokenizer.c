/*
 * test_tokenizer.c — tokenizer and chat formatting on small hand-made vocabularies (no model
 * file needed): merge order (rank, leftmost tie, merges through non-token intermediates),
 * special / user-defined tokens, byte fallback, buffer conventions, round trips of random
 * bytes, the streaming UTF-8 helper and the chat formats. Expected ids are derived by hand in
 * the comments.
 */
#include "test.h"
#include "engine/chat.h"
#include "engine/tokenizer.h"
#include "vq_engine.h"

/* ---- tiny byte-level BPE vocabulary ------------------------------------------------------ */

/* GPT-2 bytes_to_unicode, written independently of tokenizer.c */
static void byte_char(int b, char *out) {
    int cps[256], n = 0, bs[256], k = 0;
    for (int c = 0; c < 256; c++)
        if ((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)) {
            bs[k] = c;
            cps[k++] = c;
        }
    for (int c = 0; c < 256; c++) {
        int found = 0;
        for (int j = 0; j < k; j++) found |= bs[j] == c;
        if (!found) {
            bs[k] = c;
            cps[k++] = 256 + n++;
        }
    }
    for (int j = 0; j < 256; j++) {
        if (bs[j] != b) continue;
        int cp = cps[j];
        if (cp < 0x80) {
            out[0] = (char)cp;
            out[1] = 0;
        } else {
            out[0] = (char)(0xC0 | (cp >> 6));
            out[1] = (char)(0x80 | (cp & 0x3F));
            out[2] = 0;
        }
    }
}

#define B(c) (4 + (int)(unsigned char)(c)) /* id of the token of one byte */
enum { T_HE = 260, T_LL, T_HELL, T_HELLO, T_GW, T_OR, T_GWOR, T_LD, T_GWORLD, T_XYZ, T_GG, N_BPE };

static char bpe_text[N_BPE][16];
static vq_tokenizer *make_bpe(int add_bos, const char *pre) {
    static const char *const tail[] = {
        "he",          "ll", "hell",          "hello", "\xc4\xa0w",       "or",
        "\xc4\xa0wor", "ld", "\xc4\xa0world", "xyz",   "\xc4\xa0\xc4\xa0"};
    static const char *const merges[] = {
        "h e",          "l l", "he ll",          "hell o", "\xc4\xa0 w", "o r",
        "\xc4\xa0w or", "l d", "\xc4\xa0wor ld", "x y",    "xy z",       "\xc4\xa0 \xc4\xa0"};
    const char *toks[N_BPE];
    int32_t types[N_BPE];
    strcpy(bpe_text[0], "<|endoftext|>");
    strcpy(bpe_text[1], "<|im_start|>");
    strcpy(bpe_text[2], "<|im_end|>");
    strcpy(bpe_text[3], "<tool>");
    for (int b = 0; b < 256; b++) byte_char(b, bpe_text[4 + b]);
    for (int i = 0; i < N_BPE - 260; i++) strcpy(bpe_text[260 + i], tail[i]);
    for (int i = 0; i < N_BPE; i++) {
        toks[i] = bpe_text[i];
        types[i] = VQ_TOK_TYPE_NORMAL;
    }
    types[0] = types[1] = types[2] = VQ_TOK_TYPE_CONTROL;
    types[3] = VQ_TOK_TYPE_USER_DEFINED;
    struct vq_tok_vocab v;
    vq_tok_vocab_init(&v);
    v.model = "gpt2";
    v.pre = pre;
    v.n_tokens = N_BPE;
    v.tokens = toks;
    v.types = types;
    v.n_merges = (int32_t)(sizeof merges / sizeof merges[0]);
    v.merges = merges;
    v.bos = 0;
    v.eos = 0;
    v.add_bos = add_bos;
    vq_status st;
    vq_tokenizer *t = vq_tok_create_vocab(&v, &st);
    ASSERT_STATUS(st, VQ_STATUS_OK);
    return t;
}

static int64_t enc(const vq_tokenizer *t, const char *s, bool add, bool sp, int32_t *ids) {
    return vq_tok_encode(t, s, strlen(s), add, sp, ids, 256);
}

#define EXPECT_IDS(t, s, add, sp, ...) \
    do { \
        static const int32_t want_[] = {__VA_ARGS__}; \
        int32_t got_[256]; \
        int64_t n_ = enc(t, s, add, sp, got_); \
        ASSERT_EQ_INT(n_, (int64_t)(sizeof want_ / sizeof want_[0])); \
        for (int64_t i_ = 0; i_ < n_ && i_ < (int64_t)(sizeof want_ / sizeof want_[0]); i_++) \
            ASSERT_EQ_INT(got_[i_], want_[i_]); \
    } while (0)

TEST(test_bpe_merges) {
    vq_tokenizer *t = make_bpe(0, "gpt2");
    if (!t) return;
    /* words "hello", " world": h e -> he, l l -> ll, he ll -> hell, hell o -> hello;
     * Ġ w -> Ġw, o r -> or, Ġw or -> Ġwor, l d -> ld, Ġwor ld -> Ġworld */
    EXPECT_IDS(t, "hello world", false, false, T_HELLO, T_GWORLD);
    /* "helloo": the extra o has no merge */
    EXPECT_IDS(t, "helloo", false, false, T_HELLO, B('o'));
    /* equal ranks: the leftmost pair merges first: (l l) l */
    EXPECT_IDS(t, "lll", false, false, T_LL, B('l'));
    /* "x y" makes "xy", which is no token; "xy z" then makes the token xyz */
    EXPECT_IDS(t, "xyz", false, false, T_XYZ);
    /* a lone intermediate is emitted as its bytes */
    EXPECT_IDS(t, "xy", false, false, B('x'), B('y'));
    /* GPT-2 regex: "   hello" -> "  " (\s+(?!\S)) + " hello"; Ġ h.. has no Ġh merge */
    EXPECT_IDS(t, "   hello", false, false, T_GG, B(' '), T_HELLO);
    /* digits stay one word with the gpt2 pre-tokenizer: no merges, so byte tokens */
    EXPECT_IDS(t, "a 12", false, false, B('a'), B(' '), B('1'), B('2'));
    int32_t ids[4];
    ASSERT_EQ_INT(enc(t, "", true, true, ids), 0);
    vq_tok_free(t);
}

TEST(test_bpe_special_tokens) {
    vq_tokenizer *t = make_bpe(1, "smollm");
    if (!t) return;
    ASSERT(vq_tok_add_bos(t));
    /* control tokens only with parse_special; BOS (id 0) with add_special */
    EXPECT_IDS(t, "<|im_start|>hi<|im_end|>", true, true, 0, 1, B('h'), B('i'), 2);
    EXPECT_IDS(t, "<|im_start|>hi", false, false, B('<'), B('|'), B('i'), B('m'), B('_'), B('s'),
               B('t'), B('a'), B('r'), B('t'), B('|'), B('>'), B('h'), B('i'));
    /* user-defined tokens are always matched */
    EXPECT_IDS(t, "a<tool>b", false, false, B('a'), 3, B('b'));
    EXPECT_IDS(t, "<tool><tool>", false, true, 3, 3);
    ASSERT(vq_tok_is_eog(t, 2)); /* <|im_end|> by text */
    ASSERT(vq_tok_is_eog(t, 0)); /* eos and <|endoftext|> */
    ASSERT(!vq_tok_is_eog(t, 1));
    ASSERT(!vq_tok_is_eog(t, T_HELLO));
    ASSERT(!vq_tok_is_eog(t, -5));
    ASSERT_EQ_INT(vq_tok_find(t, "hello", 5), T_HELLO);
    ASSERT_EQ_INT(vq_tok_find(t, "xy", 2), -1); /* virtual merge results are no tokens */
    /* smollm: every digit alone, then GPT-2: " 12" -> " " "1" "2" */
    EXPECT_IDS(t, " 12", false, false, B(' '), B('1'), B('2'));
    /* pieces */
    char buf[32];
    ASSERT_EQ_INT(vq_tok_token_to_piece(t, T_GWORLD, buf, sizeof buf, false), 6);
    ASSERT(memcmp(buf, " world", 6) == 0);
    ASSERT_EQ_INT(vq_tok_token_to_piece(t, 1, buf, sizeof buf, false), 0);
    ASSERT_EQ_INT(vq_tok_token_to_piece(t, 1, buf, sizeof buf, true), 12);
    ASSERT_EQ_INT(vq_tok_token_to_piece(t, 3, buf, sizeof buf, false), 6); /* user-defined always */
    ASSERT_EQ_INT(vq_tok_token_to_piece(t, B('\n'), buf, sizeof buf, false), 1);
    ASSERT_EQ_INT(buf[0], '\n');
    ASSERT_EQ_INT(vq_tok_token_to_piece(t, T_GWORLD, buf, 3, false), -6);
    vq_tok_free(t);
}

static uint64_t rs = 88172645463325252ull;
static uint32_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)rs;
}

TEST(test_bpe_round_trip_random_bytes) {
    /* every byte has a token, so any byte string (valid UTF-8 or not) comes back exactly */
    static const char *const pres[] = {"gpt2", "smollm", "llama3", "qwen2", "whatever"};
    for (int p = 0; p < 5; p++) {
        vq_tokenizer *t = make_bpe(0, pres[p]);
        if (!t) return;
        int bad = 0;
        for (int it = 0; it < 600; it++) {
            char s[200], back[400];
            int32_t ids[400];
            size_t n = rnd() % 120;
            for (size_t i = 0; i < n; i++) {
                uint32_t r = rnd() % 8;
                s[i] = r < 3 ? (char)(rnd() & 0xFF)
                     : r < 5 ? "helo wrd\n 'sxyz1"[rnd() % 16]
                             : (char)(0x20 + rnd() % 95);
            }
            if (it % 3 == 0 && n > 14) memcpy(s + n / 2, "<|im_end|>", 10);
            bool sp = it & 1;
            int64_t k = vq_tok_encode(t, s, n, false, sp, ids, 400);
            if (k < 0) {
                bad++;
                continue;
            }
            int64_t m = 0;
            if (p == 1 || p == 3) { /* smollm, qwen2: no clean-up passes */
                m = vq_tok_detokenize(t, ids, k, back, sizeof back, false, sp);
            } else { /* others clean up " ," etc.: concatenate the pieces */
                for (int64_t i = 0; i < k; i++)
                    m += vq_tok_token_to_piece(t, ids[i], back + m, sizeof back - (size_t)m, sp);
            }
            if (m != (int64_t)n || memcmp(back, s, n) != 0) bad++;
        }
        ASSERT_EQ_INT(bad, 0);
        vq_tok_free(t);
    }
}

TEST(test_clean_spaces) {
    /* the gpt2 pre-tokenizer keeps llama.cpp's clean-up passes on detokenize; smollm not */
    vq_tokenizer *g = make_bpe(0, "gpt2"), *s = make_bpe(0, "smollm");
    if (!g || !s) return;
    const char *text = "a , b ' c 's d";
    int32_t ids[64];
    char out[64];
    int64_t k = enc(g, text, false, false, ids);
    int64_t m = vq_tok_detokenize(g, ids, k, out, sizeof out, false, false);
    ASSERT_EQ_INT(m, 10);
    ASSERT(m == 10 && memcmp(out, "a, b'c's d", 10) == 0);
    k = enc(s, text, false, false, ids);
    m = vq_tok_detokenize(s, ids, k, out, sizeof out, false, false);
    ASSERT_EQ_INT(m, (int64_t)strlen(text));
    vq_tok_free(g);
    vq_tok_free(s);
}

TEST(test_stream) {
    vq_tokenizer *t = make_bpe(0, "gpt2");
    if (!t) return;
    struct vq_tok_stream st;
    vq_tok_stream_init(&st);
    char out[16];
    /* "é" = C3 A9 arrives as two byte tokens: nothing, then both bytes */
    ASSERT_EQ_INT(vq_tok_stream_push(t, &st, B(0xC3), false, out, sizeof out), 0);
    ASSERT_EQ_INT(vq_tok_stream_push(t, &st, B(0xA9), false, out, sizeof out), 2);
    ASSERT(memcmp(out, "\xc3\xa9", 2) == 0);
    /* 😀 = F0 9F 98 80 in four pieces */
    ASSERT_EQ_INT(vq_tok_stream_push(t, &st, B(0xF0), false, out, sizeof out), 0);
    ASSERT_EQ_INT(vq_tok_stream_push(t, &st, B(0x9F), false, out, sizeof out), 0);
    ASSERT_EQ_INT(vq_tok_stream_push(t, &st, B(0x98), false, out, sizeof out), 0);
    /* too small a buffer: refused, state kept */
    ASSERT_EQ_INT(vq_tok_stream_push(t, &st, B(0x80), false, out, 3), -4);
    ASSERT_EQ_INT(vq_tok_stream_push(t, &st, B(0x80), false, out, sizeof out), 4);
    ASSERT(memcmp(out, "\xf0\x9f\x98\x80", 4) == 0);
    /* a lead byte followed by ASCII can never complete: both go out */
    ASSERT_EQ_INT(vq_tok_stream_push(t, &st, B(0xC3), false, out, sizeof out), 0);
    ASSERT_EQ_INT(vq_tok_stream_push(t, &st, T_HELLO, false, out, sizeof out), 6);
    ASSERT(memcmp(out, "\xc3hello", 6) == 0);
    /* unfinished character at the end comes out on flush */
    ASSERT_EQ_INT(vq_tok_stream_push(t, &st, B(0xE6), false, out, sizeof out), 0);
    ASSERT_EQ_INT(vq_tok_stream_flush(&st, out, 0), -1);
    ASSERT_EQ_INT(vq_tok_stream_flush(&st, out, sizeof out), 1);
    ASSERT_EQ_INT((unsigned char)out[0], 0xE6);
    ASSERT_EQ_INT(vq_tok_stream_flush(&st, out, sizeof out), 0);
    /* control tokens: nothing unless special */
    ASSERT_EQ_INT(vq_tok_stream_push(t, &st, 2, false, out, sizeof out), 0);
    ASSERT_EQ_INT(vq_tok_stream_push(t, &st, 2, true, out, sizeof out), 10);
    vq_tok_free(t);
}

/* ---- tiny SentencePiece vocabulary ------------------------------------------------------- */

#define SB(b) (3 + (b)) /* <0xXX> byte tokens */
enum { S_SP = 259, S_H, S_E, S_L, S_O, S_SPH, S_SPHE, S_LL, S_LO, S_SPHEL, S_SPHELL, N_SPM };

static vq_tokenizer *make_spm(int add_space_prefix) {
    static char text[N_SPM][12];
    static const char *const tail[] = {"\xe2\x96\x81",
                                       "h",
                                       "e",
                                       "l",
                                       "o",
                                       "\xe2\x96\x81h",
                                       "\xe2\x96\x81he",
                                       "ll",
                                       "lo",
                                       "\xe2\x96\x81hel",
                                       "\xe2\x96\x81hell"};
    static const float tail_sc[] = {-5, -5, -5, -5, -5, -3, -2.5f, -1, -0.5f, -2, -4};
    const char *toks[N_SPM];
    float sc[N_SPM];
    int32_t ty[N_SPM];
    strcpy(text[0], "<unk>");
    strcpy(text[1], "<s>");
    strcpy(text[2], "</s>");
    for (int b = 0; b < 256; b++) snprintf(text[3 + b], sizeof text[0], "<0x%02X>", b);
    for (int i = 0; i < N_SPM - 259; i++) strcpy(text[259 + i], tail[i]);
    for (int i = 0; i < N_SPM; i++) {
        toks[i] = text[i];
        sc[i] = i >= 259 ? tail_sc[i - 259] : 0.0f;
        ty[i] = i == 0  ? VQ_TOK_TYPE_UNKNOWN
              : i < 3   ? VQ_TOK_TYPE_CONTROL
              : i < 259 ? VQ_TOK_TYPE_BYTE
                        : VQ_TOK_TYPE_NORMAL;
    }
    struct vq_tok_vocab v;
    vq_tok_vocab_init(&v);
    v.model = "llama";
    v.n_tokens = N_SPM;
    v.tokens = toks;
    v.scores = sc;
    v.types = ty;
    v.bos = 1;
    v.eos = 2;
    v.unk = 0;
    v.add_space_prefix = add_space_prefix;
    vq_status st;
    vq_tokenizer *t = vq_tok_create_vocab(&v, &st);
    ASSERT_STATUS(st, VQ_STATUS_OK);
    return t;
}

TEST(test_spm) {
    vq_tokenizer *t = make_spm(-1);
    if (!t) return;
    ASSERT_EQ_INT(vq_tok_model(t), VQ_TOK_MODEL_SPM);
    ASSERT(vq_tok_add_bos(t));
    /* "hello" -> "▁hello": best pair first: lo(-0.5); ll(-1) is then stale; ▁h(-3);
     * ▁h+e = ▁he(-2.5); ▁he+l = ▁hel(-2); ▁hel+lo is no token -> ▁hel, lo */
    EXPECT_IDS(t, "hello", false, false, S_SPHEL, S_LO);
    EXPECT_IDS(t, "hello", true, false, 1, S_SPHEL, S_LO);
    /* é has no token: byte fallback */
    EXPECT_IDS(t, "h\xc3\xa9", false, false, S_SPH, SB(0xC3), SB(0xA9));
    /* a space inside: "▁h▁l": ▁h(-3) twice; leftmost first */
    EXPECT_IDS(t, "h l", false, false, S_SPH, S_SP, S_L);
    /* the space prefix follows special tokens too */
    EXPECT_IDS(t, "<s>h", false, true, 1, S_SPH);
    int32_t ids[64];
    char out[64];
    int64_t k = enc(t, "hello h\xc3\xa9", true, false, ids);
    /* detokenize: BOS is control (hidden) and consumes the leading-space removal, as in
     * llama.cpp; without BOS the prefix space is removed */
    int64_t m = vq_tok_detokenize(t, ids, k, out, sizeof out, false, false);
    ASSERT_EQ_INT(m, 10);
    ASSERT(memcmp(out, " hello h\xc3\xa9", 10) == 0);
    m = vq_tok_detokenize(t, ids + 1, k - 1, out, sizeof out, false, false);
    ASSERT_EQ_INT(m, 9);
    ASSERT(memcmp(out, "hello h\xc3\xa9", 9) == 0);
    ASSERT_EQ_INT(vq_tok_token_to_piece(t, SB('A'), out, sizeof out, false), 1);
    ASSERT_EQ_INT(out[0], 'A');
    ASSERT_EQ_INT(vq_tok_token_to_piece(t, 0, out, sizeof out, false), 0); /* unknown */
    ASSERT_EQ_INT(vq_tok_token_to_piece(t, 0, out, sizeof out, true), 5);
    ASSERT(vq_tok_is_eog(t, 2));
    /* round trip of random valid UTF-8 without U+2581 (which detokenizes to a space). Invalid
     * UTF-8 does not round-trip with SPM, in llama.cpp either: a lead byte swallows the first
     * byte of the escaped space that follows it. */
    static const char *const parts[] = {
        "h",  "e", "l", "o", " ", "  ", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80",
        "\n", "A", "~", "\t"};
    int bad = 0;
    for (int it = 0; it < 500; it++) {
        char s[400], back[800];
        int32_t v[800];
        size_t n = 0, np = rnd() % 60;
        for (size_t i = 0; i < np; i++) {
            const char *q = parts[rnd() % (sizeof parts / sizeof parts[0])];
            memcpy(s + n, q, strlen(q));
            n += strlen(q);
        }
        int64_t kk = vq_tok_encode(t, s, n, false, false, v, 800);
        int64_t mm = vq_tok_detokenize(t, v, kk, back, sizeof back, false, false);
        if (mm != (int64_t)n || memcmp(s, back, n) != 0) bad++;
    }
    ASSERT_EQ_INT(bad, 0);
    vq_tok_free(t);
    /* without the space prefix (Gemma style) */
    t = make_spm(0);
    if (!t) return;
    /* h e l l o: lo(-0.5) first, then ll is stale -> h e l lo */
    EXPECT_IDS(t, "hello", false, false, S_H, S_E, S_L, S_LO);
    vq_tok_free(t);
}

TEST(test_bad_vocab) {
    struct vq_tok_vocab v;
    vq_status st;
    vq_tok_vocab_init(&v);
    ASSERT(vq_tok_create_vocab(&v, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    const char *toks[2] = {"a", "b"};
    v.model = "bert";
    v.n_tokens = 2;
    v.tokens = toks;
    ASSERT(vq_tok_create_vocab(&v, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_UNSUPPORTED);
    v.model = "gpt2";
    const char *merges[3] = {"a b", "nospace", "a"};
    v.merges = merges;
    v.n_merges = 3;
    v.bos = 7; /* out of range: ignored */
    vq_tokenizer *t = vq_tok_create_vocab(&v, &st);
    ASSERT(t != NULL);
    ASSERT_EQ_INT(vq_tok_bos(t), -1);
    int32_t ids[8];
    /* "ab" merges into a virtual "ab"; no byte token for 'c' -> dropped */
    ASSERT_EQ_INT(enc(t, "abc", false, false, ids), 2);
    ASSERT_EQ_INT(ids[0], 0);
    ASSERT_EQ_INT(ids[1], 1);
    vq_tok_free(t);
    vq_tok_free(NULL);
    ASSERT(vq_tok_create(NULL, &st) == NULL);
    /* every token string empty: refused with a message (and no NULL text buffer reaches
     * memcpy on the way: UBSan) */
    const char *empty[3] = {"", "", ""};
    v.tokens = empty;
    v.n_tokens = 3;
    v.n_merges = 0;
    ASSERT(vq_tok_create_vocab(&v, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_BAD_FORMAT);
    ASSERT(strstr(vq_engine_last_error(), "every token string is empty") != NULL);
}

/* ---- chat formats ------------------------------------------------------------------------ */

TEST(test_chat_formats) {
    const struct vq_chat_msg msgs[] = {
        {"system", "  Be brief.  "}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "2+2?"}};
    char buf[512];
    struct vq_chat_template ct = vq_chat_template_default(VQ_CHAT_CHATML);
    int64_t n = vq_chat_apply(&ct, msgs, 4, true, buf, sizeof buf);
    const char *want_chatml =
        "<|im_start|>system\n  Be brief.  <|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
        "<|im_start|>assistant\n";
    ASSERT_EQ_INT(n, (int64_t)strlen(want_chatml));
    ASSERT(strcmp(buf, want_chatml) == 0);
    /* too small: -(length + 1), then exact fit works */
    ASSERT_EQ_INT(vq_chat_apply(&ct, msgs, 4, true, buf, 10), -(int64_t)(strlen(want_chatml) + 1));
    ASSERT_EQ_INT(vq_chat_apply(&ct, msgs, 4, true, buf, strlen(want_chatml) + 1),
                  (int64_t)strlen(want_chatml));
    ASSERT_EQ_INT(vq_chat_apply(&ct, msgs, 4, true, NULL, 0), -(int64_t)(strlen(want_chatml) + 1));

    ct = vq_chat_template_default(VQ_CHAT_LLAMA3);
    n = vq_chat_apply(&ct, msgs + 1, 1, true, buf, sizeof buf);
    ASSERT(n > 0 && strcmp(buf,
                           "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                           "<|start_header_id|>assistant<|end_header_id|>\n\n") == 0);
    ct = vq_chat_template_default(VQ_CHAT_GEMMA);
    n = vq_chat_apply(&ct, msgs, 4, true, buf, sizeof buf);
    ASSERT(n > 0 &&
           strcmp(buf,
                  "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
                  "Hello!<end_of_turn>\n"
                  "<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n") == 0);
    ct = vq_chat_template_default(VQ_CHAT_LLAMA2);
    n = vq_chat_apply(&ct, msgs, 4, true, buf, sizeof buf);
    ASSERT(
        n > 0 &&
        strcmp(
            buf,
            "[INST] <<SYS>>\n  Be brief.  \n<</SYS>>\n\nHi [/INST]Hello!</s>[INST] 2+2? [/INST]") ==
            0);

    /* template detection and default system prompt extraction (SmolLM2's template) */
    const char *smol =
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by "
        "Hugging Face<|im_end|>\\n' }}"
        "{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
        "'<|im_end|>' + '\\n'}}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    ASSERT_STATUS(vq_chat_template_parse(smol, strlen(smol), &ct), VQ_STATUS_OK);
    ASSERT_EQ_INT(ct.format, VQ_CHAT_CHATML);
    ASSERT(ct.has_default_system);
    ASSERT(strcmp(ct.default_system,
                  "You are a helpful AI assistant named SmolLM, trained by Hugging Face") == 0);
    n = vq_chat_apply(&ct, msgs + 1, 1, false, buf, sizeof buf);
    ASSERT(n > 0 &&
           strcmp(buf,
                  "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
                  "Hugging Face<|im_end|>\n"
                  "<|im_start|>user\nHi<|im_end|>\n") == 0);
    /* an explicit system message replaces the default */
    n = vq_chat_apply(&ct, msgs, 2, false, buf, sizeof buf);
    ASSERT(n > 0 && strncmp(buf, "<|im_start|>system\n  Be brief.", 30) == 0);
    /* Qwen-style template without a literal default: ChatML, no default */
    const char *qwen =
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
        "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
    ASSERT_STATUS(vq_chat_template_parse(qwen, strlen(qwen), &ct), VQ_STATUS_OK);
    ASSERT(!ct.has_default_system);
    const char *l3 = "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}";
    ASSERT_STATUS(vq_chat_template_parse(l3, strlen(l3), &ct), VQ_STATUS_OK);
    ASSERT_EQ_INT(ct.format, VQ_CHAT_LLAMA3);
    ASSERT_STATUS(vq_chat_template_parse("{{ x }}", 7, &ct), VQ_STATUS_NOT_FOUND);
    enum vq_chat_format f;
    ASSERT_STATUS(vq_chat_format_from_name("gemma", &f), VQ_STATUS_OK);
    ASSERT_EQ_INT(f, VQ_CHAT_GEMMA);
    ASSERT_STATUS(vq_chat_format_from_name("vicuna", &f), VQ_STATUS_NOT_FOUND);
}

int main(void) {
    RUN(test_bpe_merges);
    RUN(test_bpe_special_tokens);
    RUN(test_bpe_round_trip_random_bytes);
    RUN(test_clean_spaces);
    RUN(test_stream);
    RUN(test_spm);
    RUN(test_bad_vocab);
    RUN(test_chat_formats);
    return TEST_REPORT();
}
