/*
 * test_model_tokenizer.c — the tokenizer of the default model (SmolLM2-135M-Instruct, byte-level
 * BPE, pre-tokenizer "smollm") against reference ids, round trips, streaming, chat prompt and
 * speed. Reference ids: HF `tokenizers` 0.23.3 built from this GGUF's own vocab and merges with
 * SmolLM2's pre-tokenizer (Digits(individual) + ByteLevel), an implementation independent of
 * ours; and llama.cpp's own ids, pieces and detokenized text from tests/golden/ (llama-cpp-python
 * 0.3.36: tokenizer_ids.json and the 1343 ids of text_en.txt in smollm2_logits.bin). The other
 * pre-tokenizers and SentencePiece are checked against llama.cpp on variants of this vocabulary
 * (test_tokenizer_llamacpp_ids.h, from scripts/gen_tokenizer_llamacpp_ids.py).
 * Skips (passes with a note) when the model file is absent.
 */
#include <time.h>
#include <cjson/cJSON.h>
#include "test.h"
#include "engine/chat.h"
#include "engine/tokenizer.h"
#include "test_tokenizer_llamacpp_ids.h"
#include "golden_check.h"

#define MODEL VQ_MODELS_DIR "/SmolLM2-135M-Instruct.Q4_1.gguf"

static vq_tokenizer *T;
static vq_gguf *G;

struct ref {
    const char *name, *text;
    int special;
    int32_t ids[80];
    int n;
};
static const struct ref REFS[] = {
    {"english",
     "The quick brown fox jumps over the lazy dog.",
     0,
     {504, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 30},
     10},
    {"hello", "Hello, we can use", 0, {19556, 28, 392, 416, 722}, 5},
    {"punct",
     "Wait... what?! (Really) -- yes; no: [maybe] {ok} \"quoted\" 'single' #hash @at 50% & more*",
     0,
     {33359, 2026,  732,  17593, 365,  3733, 682, 25,  3009, 9805, 43,  787,   42,
      933,   27066, 77,   1662,  2231, 109,  476, 385, 5036, 18,   637, 18536, 23,
      907,   14307, 3394, 261,   216,  37,   32,  21,  1456, 540,  26},
     37},
    {"numbers",
     "In 2024, 1,234,567 people paid $3.50 each; pi=3.14159, 0x1F, 1e-9, 12:30pm.",
     0,
     {788,  216, 34, 32, 34,  36,  28, 216,   33, 28, 34,  35, 36, 28, 37, 38, 39,    701, 5940,
      1885, 35,  30, 37, 32,  971, 43, 16916, 45, 35, 30,  33, 36, 33, 37, 41, 28,    216, 32,
      104,  33,  54, 28, 216, 33,  85, 29,    41, 28, 216, 33, 34, 42, 35, 32, 11043, 30},
     56},
    {"spaces", "  multiple   spaces    here  ", 0, {216, 2701, 256, 5600, 333, 1535, 256}, 7},
    {"newlines",
     "line one\nline two\n\n\nline five\r\n\ttabbed\n",
     0,
     {1311, 582, 198, 1311, 827, 1116, 198, 1311, 2531, 2738, 197, 15999, 5776, 198},
     14},
    {"contractions",
     "I'm sure they'll've done it, isn't it? We're here, you've seen, he'd go. IT'S LOUD",
     0,
     {57,   5248, 2090, 502,  3060, 3543, 2294, 357,  28,  3247, 982,  357, 47, 1046,  2316,
      1535, 28,   346,  3543, 2269, 28,   384,  6737, 685, 30,   9627, 23,  67, 16887, 11911},
     30},
    {"unicode",
     "Caf\xc3"
     "\xa9"
     " d\xc3"
     "\xa9"
     "j\xc3"
     "\xa0"
     " vu \xe2"
     "\x80"
     "\x94"
     " na\xc3"
     "\xaf"
     "ve co\xc3"
     "\xb6"
     "peration, Stra\xc3"
     "\x9f"
     "e, \xce"
     "\x95"
     "\xce"
     "\xbb"
     "\xce"
     "\xbb"
     "\xce"
     "\xb7"
     "\xce"
     "\xbd"
     "\xce"
     "\xb9"
     "\xce"
     "\xba"
     "\xce"
     "\xac"
     ", \xd1"
     "\x80"
     "\xd1"
     "\x83"
     "\xd1"
     "\x81"
     "\xd1"
     "\x81"
     "\xd0"
     "\xba"
     "\xd0"
     "\xb8"
     "\xd0"
     "\xb9"
     ", \xe6"
     "\x97"
     "\xa5"
     "\xe6"
     "\x9c"
     "\xac"
     "\xe8"
     "\xaa"
     "\x9e"
     "\xe3"
     "\x81"
     "\xae"
     "\xe3"
     "\x83"
     "\x86"
     "\xe3"
     "\x82"
     "\xad"
     "\xe3"
     "\x82"
     "\xb9"
     "\xe3"
     "\x83"
     "\x88"
     ", \xed"
     "\x95"
     "\x9c"
     "\xea"
     "\xb5"
     "\xad"
     "\xec"
     "\x96"
     "\xb4"
     ", \xd8"
     "\xa7"
     "\xd9"
     "\x84"
     "\xd8"
     "\xb9"
     "\xd8"
     "\xb1"
     "\xd8"
     "\xa8"
     "\xd9"
     "\x8a"
     "\xd8"
     "\xa9"
     "",
     0,
     {51,    1939,  2756,  32564, 90,    16739, 386,   101,   1841,  15486, 46494, 857,
      7466,  456,   309,   28,    19144, 34878, 85,    28,    5664,  239,   17162, 17162,
      25723, 11517, 12001, 21118, 26112, 28,    216,   9175,  14714, 9382,  39511, 7872,
      24958, 28,    17097, 241,   115,   40993, 179,   120,   248,   26453, 11100, 224,
      10391, 251,   10391, 134,   11100, 226,   28,    216,   33085, 246,   181,   130,
      251,   183,   240,   129,   28,    27819, 34966, 20602, 31462, 23339, 43463},
     71},
    {"emoji",
     "emoji \xf0"
     "\x9f"
     "\x98"
     "\x80"
     "\xf0"
     "\x9f"
     "\x9a"
     "\x80"
     "\xf0"
     "\x9f"
     "\x91"
     "\x8d"
     "\xf0"
     "\x9f"
     "\x8f"
     "\xbd"
     " and flags \xf0"
     "\x9f"
     "\x87"
     "\xab"
     "\xf0"
     "\x9f"
     "\x87"
     "\xb7"
     " and ZWJ \xf0"
     "\x9f"
     "\x91"
     "\xa9"
     "\xe2"
     "\x80"
     "\x8d"
     "\xf0"
     "\x9f"
     "\x91"
     "\xa9"
     "\xe2"
     "\x80"
     "\x8d"
     "\xf0"
     "\x9f"
     "\x91"
     "\xa7"
     "",
     0,
     {391, 33777, 40303, 218, 10813, 244,   218, 10813, 235, 231,   10813, 233, 138,
      284, 13198, 15107, 225, 121,   10813, 225, 132,   284, 1777,  71,    58,  15107,
      235, 119,   321,   231, 10813, 235,   119, 321,   231, 10813, 235,   117},
     38},
    {"code",
     "def f(x):\n    return x**2 + 1  # comment\n\nif __name__ == '__main__':\n    print(f(3))",
     0,
     {1604, 275, 24,   104,  727, 472,  1003,  1792, 828,   34,  1232, 216, 33, 216, 907, 5189, 198,
      198,  342, 2758, 1245, 890, 1758, 14209, 6157, 15791, 472, 1628, 24,  86, 24,  35,  1292},
     33},
    {"special_parsed",
     "<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n",
     1,
     {1, 4093, 198, 26843, 665, 17, 2, 198, 1, 520, 9531, 198},
     12},
    {"special_literal",
     "<|im_start|>user\nHi there!<|im_end|>\n",
     0,
     {44,  108, 306, 79,  3738, 108, 46,  4093, 198, 26843,
      665, 17,  44,  108, 306,  79,  486, 108,  46,  198},
     20},
    {"mixed_specials",
     "a<|endoftext|>b<repo_name>c<|im_end|><|im_end|>",
     1,
     {81, 0, 82, 3, 83, 2, 2},
     7},
};

TEST(test_metadata) {
    ASSERT_EQ_INT(vq_tok_n_vocab(T), 49152);
    ASSERT_EQ_INT(vq_tok_model(T), VQ_TOK_MODEL_BPE);
    ASSERT_EQ_INT(vq_tok_bos(T), 1);
    ASSERT_EQ_INT(vq_tok_eos(T), 2);
    ASSERT_EQ_INT(vq_tok_unk(T), 0);
    ASSERT_EQ_INT(vq_tok_pad(T), 2);
    ASSERT(!vq_tok_add_bos(T));
    ASSERT(vq_tok_is_eog(T, 2)); /* <|im_end|> */
    ASSERT(vq_tok_is_eog(T, 0)); /* <|endoftext|> */
    ASSERT(!vq_tok_is_eog(T, 1));
    ASSERT(!vq_tok_is_eog(T, 504));
    ASSERT(vq_tok_is_control(T, 1));
    ASSERT_EQ_INT(vq_tok_find(T, "<|im_start|>", 12), 1);
}

TEST(test_reference_ids) {
    int32_t ids[256];
    for (size_t k = 0; k < sizeof REFS / sizeof REFS[0]; k++) {
        const struct ref *r = &REFS[k];
        int64_t n = vq_tok_encode(T, r->text, strlen(r->text), true, r->special, ids, 256);
        ASSERT_EQ_INT(n, r->n);
        int same = n == r->n;
        for (int i = 0; same && i < r->n; i++) same = ids[i] == r->ids[i];
        if (!same) fprintf(stderr, "  mismatch in \"%s\"\n", r->name);
        ASSERT(same);
        /* detokenize gives the text back (specials rendered when they were parsed) */
        char buf[1024];
        int64_t m = vq_tok_detokenize(T, ids, n, buf, sizeof buf, false, r->special);
        ASSERT_EQ_INT(m, (int64_t)strlen(r->text));
        ASSERT(m >= 0 && memcmp(buf, r->text, (size_t)m) == 0);
    }
}

TEST(test_buffer_conventions) {
    const char *s = "The quick brown fox jumps over the lazy dog.";
    int32_t ids[4];
    ASSERT_EQ_INT(vq_tok_encode(T, s, strlen(s), false, false, ids, 4), -10);
    ASSERT_EQ_INT(ids[0], 504);
    ASSERT_EQ_INT(vq_tok_encode(T, s, strlen(s), false, false, NULL, 0), -10);
    int32_t all[10];
    ASSERT_EQ_INT(vq_tok_encode(T, s, strlen(s), false, false, all, 10), 10);
    char small[8];
    ASSERT_EQ_INT(vq_tok_detokenize(T, all, 10, small, sizeof small, false, false),
                  -(int64_t)strlen(s));
    ASSERT_EQ_INT(vq_tok_token_to_piece(T, 2365, small, 2, false), -6); /* " quick" */
    ASSERT_EQ_INT(vq_tok_token_to_piece(T, 2365, small, 8, false), 6);
    ASSERT(memcmp(small, " quick", 6) == 0);
    /* control tokens render only with special */
    ASSERT_EQ_INT(vq_tok_token_to_piece(T, 2, small, 8, false), 0);
    char big[32];
    ASSERT_EQ_INT(vq_tok_token_to_piece(T, 2, big, sizeof big, true), 10);
    ASSERT(memcmp(big, "<|im_end|>", 10) == 0);
    ASSERT_EQ_INT(vq_tok_token_to_piece(T, -1, big, sizeof big, true), 0);
    ASSERT_EQ_INT(vq_tok_token_to_piece(T, 49152, big, sizeof big, true), 0);
    ASSERT_EQ_INT(vq_tok_encode(T, "", 0, true, true, all, 10), 0);
}

/* Bytes the SmolLM2 vocabulary has no token for (dropped by the tokenizer, as in llama.cpp
 * and HF): they never appear in valid UTF-8 except as lead bytes of U+40000..U+BFFFF and
 * the C0 controls 0x04 0x06 0x13 0x14 0x16 0x1D. */
static int representable(uint32_t cp) {
    if (cp == 0x04 || cp == 0x06 || cp == 0x13 || cp == 0x14 || cp == 0x16 || cp == 0x1D) return 0;
    if (cp >= 0x40000 && cp < 0xC0000) return 0;
    if (cp >= 0xD800 && cp < 0xE000) return 0;
    return 1;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static size_t random_text(char *o, size_t max_cps) {
    static const char *const words[] = {" ",  "  ",   "\n",  "\t",           "the",         " and",
                                        "'s", "'ll",  "123", "<|im_start|>", "<|im_end|>",  "...",
                                        "é",  "日本", "😀",   "\xc2\xa0",     "\xe3\x80\x80"};
    size_t n = 0, k = rnd() % max_cps;
    for (size_t i = 0; i < k; i++) {
        uint32_t r = rnd() % 10, cp;
        if (r < 3) {
            const char *w = words[rnd() % (sizeof words / sizeof words[0])];
            memcpy(o + n, w, strlen(w));
            n += strlen(w);
            continue;
        }
        if (r < 6) cp = 0x20 + rnd() % 95;
        else if (r < 7) cp = 0x80 + rnd() % 0x780;
        else if (r < 9) cp = 0x800 + rnd() % 0xF800;
        else cp = 0x10000 + rnd() % 0x100000;
        if (!representable(cp)) cp = 'x';
        n += put_utf8(o + n, cp);
    }
    return n;
}

TEST(test_round_trip_random_utf8) {
    static char text[4096], back[8192];
    static int32_t ids[4096];
    int fails = 0;
    for (int it = 0; it < 3000; it++) {
        size_t n = random_text(text, 60);
        int special = it & 1;
        int64_t k = vq_tok_encode(T, text, n, false, special, ids, 4096);
        ASSERT(k >= 0);
        int64_t m = vq_tok_detokenize(T, ids, k, back, sizeof back, false, special);
        if (m != (int64_t)n || memcmp(back, text, n) != 0) fails++;
        /* streaming gives the same bytes, and never splits a UTF-8 character */
        struct vq_tok_stream st;
        vq_tok_stream_init(&st);
        size_t w = 0;
        for (int64_t i = 0; i < k; i++) {
            int64_t e = vq_tok_stream_push(T, &st, ids[i], special, back + w, sizeof back - w);
            ASSERT(e >= 0);
            if (e > 0 && w + (size_t)e < n) {
                /* a chunk never ends inside a character */
                unsigned char next = (unsigned char)text[w + (size_t)e];
                if ((next & 0xC0) == 0x80) fails++;
            }
            w += (size_t)e;
        }
        int64_t e = vq_tok_stream_flush(&st, back + w, sizeof back - w);
        ASSERT(e == 0);
        w += (size_t)e;
        if (w != n || memcmp(back, text, n) != 0) fails++;
    }
    ASSERT_EQ_INT(fails, 0);
}

TEST(test_unrepresentable_bytes_dropped) {
    /* U+50000 starts with 0xF1, which has no token: its 3 continuation bytes survive */
    const char s[] =
        "a\xf1\x90\x80\x80"
        "b";
    int32_t ids[16];
    int64_t k = vq_tok_encode(T, s, sizeof s - 1, false, false, ids, 16);
    char back[16];
    int64_t m = vq_tok_detokenize(T, ids, k, back, sizeof back, false, false);
    ASSERT_EQ_INT(m, 5);
    ASSERT(memcmp(back,
                  "a\x90\x80\x80"
                  "b",
                  5) == 0);
}

TEST(test_chat_prompt) {
    struct vq_chat_template ct;
    ASSERT_STATUS(vq_chat_from_gguf(G, &ct), VQ_STATUS_OK);
    ASSERT_EQ_INT(ct.format, VQ_CHAT_CHATML);
    ASSERT(ct.has_default_system);
    ASSERT(strcmp(ct.default_system,
                  "You are a helpful AI assistant named SmolLM, trained by Hugging Face") == 0);
    struct vq_chat_msg m[1] = {{"user", "What is 2+2?"}};
    char buf[512];
    int64_t n = vq_chat_apply(&ct, m, 1, true, buf, sizeof buf);
    const char *want =
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n"
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n";
    ASSERT_EQ_INT(n, (int64_t)strlen(want));
    ASSERT(strcmp(buf, want) == 0);
    int32_t ids[128];
    int64_t k = vq_tok_encode(T, buf, (size_t)n, true, true, ids, 128);
    static const int32_t want_ids[] = {
        1,   9690, 198, 2683, 359,   253,  5356, 5646, 11173, 3365, 3511, 308,  34519,
        28,  7018, 411, 407,  19712, 8182, 2,    198,  1,     4093, 198,  1780, 314,
        216, 34,   27,  34,   47,    2,    198,  1,    520,   9531, 198};
    ASSERT_EQ_INT(k, (int64_t)(sizeof want_ids / sizeof want_ids[0]));
    for (int64_t i = 0; i < k && i < (int64_t)(sizeof want_ids / sizeof want_ids[0]); i++)
        ASSERT_EQ_INT(ids[i], want_ids[i]);
}

TEST(test_speed_100kb) {
    static const char *const para =
        "The tokenizer splits text into words with the pre-tokenizer of the model, maps every byte "
        "to a printable character and merges adjacent symbols by rank until no merge applies. "
        "Numbers like 1234 are split into digits; punctuation, quotes (\"like these\") and "
        "spaces   are kept. ";
    size_t pl = strlen(para), n = 0, cap = 100 * 1024;
    char *text = malloc(cap + pl);
    while (n < cap) {
        memcpy(text + n, para, pl);
        n += pl;
    }
    int32_t *ids = malloc(cap * sizeof *ids);
    clock_t c0 = clock();
    int64_t k = vq_tok_encode(T, text, n, false, false, ids, (int64_t)cap);
    double sec = (double)(clock() - c0) / CLOCKS_PER_SEC;
    fprintf(stderr, "  %zu bytes -> %lld tokens in %.1f ms\n", n, (long long)k, 1e3 * sec);
    ASSERT(k > 10000);
    ASSERT_LE(sec, 1.0);
    char *back = malloc(n + 1);
    ASSERT_EQ_INT(vq_tok_detokenize(T, ids, k, back, n + 1, false, false), (int64_t)n);
    ASSERT(memcmp(back, text, n) == 0);
    free(back);
    free(ids);
    free(text);
}

TEST(test_golden_llamacpp_prompts) {
    golden_tokenizer_check(T, VQ_SOURCE_DIR "/tests/golden/tokenizer_ids.json", 22);
}

TEST(test_golden_llamacpp_text) {
    /* smollm2_logits.bin: u32 n_text at offset 16, ids from offset 40; the text was tokenized
     * with add_special = true, parse_special = false */
    size_t tl, bl;
    char *text = golden_read_file(VQ_SOURCE_DIR "/tests/golden/text_en.txt", &tl);
    char *bin = golden_read_file(VQ_SOURCE_DIR "/tests/golden/smollm2_logits.bin", &bl);
    ASSERT(text && bin && bl > 40 && memcmp(bin, "VQGLOGIT", 8) == 0);
    if (!text || !bin || bl <= 40) {
        free(text);
        free(bin);
        return;
    }
    uint32_t n_text;
    memcpy(&n_text, bin + 16, 4);
    ASSERT_EQ_INT(n_text, 1343);
    ASSERT(40 + 4 * (size_t)n_text <= bl);
    int32_t *ids = malloc(4096 * sizeof *ids);
    int64_t n = vq_tok_encode(T, text, tl, true, false, ids, 4096);
    ASSERT_EQ_INT(n, n_text);
    int diff = 0;
    for (uint32_t i = 0; i < n_text && (int64_t)i < n; i++) {
        int32_t w;
        memcpy(&w, bin + 40 + 4 * (size_t)i, 4);
        diff += ids[i] != w;
    }
    ASSERT_EQ_INT(diff, 0);
    free(ids);
    free(text);
    free(bin);
}

TEST(test_golden_chat_texts) {
    /* the two ChatML prompts of tokenizer_ids.json, rebuilt from their messages */
    struct vq_chat_template ct;
    ASSERT_STATUS(vq_chat_from_gguf(G, &ct), VQ_STATUS_OK);
    char buf[1024];
    struct vq_chat_msg a[] = {{"user", "What is the capital of France?"}};
    vq_chat_apply(&ct, a, 1, true, buf, sizeof buf);
    ASSERT(strcmp(buf,
                  "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
                  "Hugging Face<|im_end|>\n"
                  "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                  "<|im_start|>assistant\n") == 0);
    struct vq_chat_msg b[] = {{"system", "You are terse."},
                              {"user", "List three colors."},
                              {"assistant", "Red, green, blue."},
                              {"user", "Two more?"}};
    vq_chat_apply(&ct, b, 4, true, buf, sizeof buf);
    ASSERT(strcmp(buf,
                  "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n"
                  "List three colors.<|im_end|>\n"
                  "<|im_start|>assistant\nRed, green, blue.<|im_end|>\n<|im_start|>user\n"
                  "Two more?<|im_end|>\n"
                  "<|im_start|>assistant\n") == 0);
}

/* GPT-2 byte of a mapped code point, -1 if none (independent of tokenizer.c) */
static int gpt2_inv(uint32_t cp) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        uint32_t c = printable ? (uint32_t)b : (uint32_t)(256 + n++);
        if (c == cp) return b;
    }
    return -1;
}

/* Builds the variant tokenizers of scripts/gen_tokenizer_llamacpp_ids.py from the model. */
static vq_tokenizer *make_variant(const char *name) {
    const struct vq_gguf_kv *kt = vq_gguf_find(G, "tokenizer.ggml.tokens");
    const struct vq_gguf_kv *ky = vq_gguf_find(G, "tokenizer.ggml.token_type");
    const struct vq_gguf_kv *km = vq_gguf_find(G, "tokenizer.ggml.merges");
    int32_t n = (int32_t)kt->arr_count, nm = (int32_t)km->arr_count;
    const char **toks = malloc((size_t)(n + 300) * sizeof *toks);
    uint32_t *lens = malloc((size_t)(n + 300) * sizeof *lens);
    int32_t *types = malloc((size_t)(n + 300) * sizeof *types);
    float *scores = malloc((size_t)(n + 300) * sizeof *scores);
    const char **merges = malloc((size_t)nm * sizeof *merges);
    uint32_t *mlens = malloc((size_t)nm * sizeof *mlens);
    char *arena = malloc((size_t)n * 64 + 8192), *ap = arena;
    struct vq_tok_vocab v;
    vq_tok_vocab_init(&v);
    v.bos = 1;
    v.eos = 2;
    if (!strncmp(name, "bpe:", 4)) {
        for (int32_t i = 0; i < n; i++) {
            struct vq_gguf_str st;
            vq_gguf_arr_str(G, kt, (uint64_t)i, &st);
            toks[i] = st.ptr;
            lens[i] = (uint32_t)st.len;
            vq_gguf_arr_i32(G, ky, (uint64_t)i, &types[i]);
        }
        for (int32_t i = 0; i < nm; i++) {
            struct vq_gguf_str st;
            vq_gguf_arr_str(G, km, (uint64_t)i, &st);
            merges[i] = st.ptr;
            mlens[i] = (uint32_t)st.len;
        }
        v.model = "gpt2";
        v.pre = name + 4;
        v.n_tokens = n;
        v.add_bos = 0;
        v.n_merges = nm;
        v.merges = merges;
        v.merge_lens = mlens;
    } else {
        int32_t k = 0;
        const char *fixed[3] = {"<unk>", "<s>", "</s>"};
        for (int i = 0; i < 3; i++) {
            toks[k] = fixed[i];
            lens[k] = (uint32_t)strlen(fixed[i]);
            types[k++] = i ? 3 : 2;
        }
        for (int b = 0; b < 256; b++) {
            snprintf(ap, 8, "<0x%02X>", b);
            toks[k] = ap;
            lens[k] = 6;
            types[k++] = 6;
            ap += 7;
        }
        for (int32_t i = 0; i < n; i++) {
            struct vq_gguf_str st;
            int32_t ty;
            vq_gguf_arr_str(G, kt, (uint64_t)i, &st);
            vq_gguf_arr_i32(G, ky, (uint64_t)i, &ty);
            if (ty != 1 || st.len == 0) continue;
            char *o = ap;
            int ok = 1;
            for (uint64_t j = 0; j < st.len && ok;) {
                uint8_t c0 = (uint8_t)st.ptr[j];
                uint32_t cp;
                if (c0 < 0x80) {
                    cp = c0;
                    j++;
                } else if ((c0 & 0xE0) == 0xC0 && j + 1 < st.len) {
                    cp = ((uint32_t)(c0 & 0x1F) << 6) | ((uint8_t)st.ptr[j + 1] & 0x3F);
                    j += 2;
                } else {
                    ok = 0;
                    break;
                }
                int b = gpt2_inv(cp);
                if (b < 0x20 || b > 0x7E) {
                    ok = 0;
                    break;
                }
                if (b == ' ') {
                    memcpy(o, "\xe2\x96\x81", 3);
                    o += 3;
                } else *o++ = (char)b;
            }
            if (!ok) continue;
            toks[k] = ap;
            lens[k] = (uint32_t)(o - ap);
            types[k++] = 1;
            ap = o;
        }
        toks[k] = "<|im_start|>";
        lens[k] = 12;
        types[k++] = 3;
        toks[k] = "<tool>";
        lens[k] = 6;
        types[k++] = 4;
        for (int32_t i = 0; i < k; i++) scores[i] = i < 259 ? 0.0f : -(float)(i - 259);
        v.model = "llama";
        v.n_tokens = k;
        v.scores = scores;
        v.add_bos = 1;
        v.unk = 0;
        v.add_space_prefix = name[4] == '1';
    }
    v.tokens = toks;
    v.token_lens = lens;
    v.types = types;
    vq_tokenizer *t = vq_tok_create_vocab(&v, NULL);
    free(toks);
    free(lens);
    free(types);
    free(scores);
    free(merges);
    free(mlens);
    free(arena);
    return t;
}

TEST(test_llamacpp_variants) {
    int nv = (int)(sizeof LLC_VARIANTS / sizeof LLC_VARIANTS[0]);
    for (int vi = 0; vi < nv; vi++) {
        vq_tokenizer *t = make_variant(LLC_VARIANTS[vi]);
        ASSERT(t != NULL);
        if (!t) continue;
        int bad_ids = 0, bad_det = 0, cases = 0;
        for (size_t c = 0; c < sizeof LLC_CASES / sizeof LLC_CASES[0]; c++) {
            const struct llc_case *k = &LLC_CASES[c];
            if (k->variant != vi) continue;
            cases++;
            const char *text = LLC_TEXTS[k->text];
            int32_t ids[512];
            int64_t n = vq_tok_encode(t, text, strlen(text), true, k->special, ids, 512);
            int same = n == k->n;
            for (int i = 0; same && i < k->n; i++) same = ids[i] == LLC_IDS[k->off + i];
            if (!same) {
                if (!bad_ids)
                    fprintf(stderr, "  %s special=%d text %d: ids differ from llama.cpp\n",
                            LLC_VARIANTS[vi], k->special, k->text);
                bad_ids++;
            }
            char buf[1024];
            int64_t dl = vq_tok_detokenize(t, LLC_IDS + k->off, k->n, buf, sizeof buf, false,
                                           k->special);
            if (dl != (int64_t)strlen(k->detok) || memcmp(buf, k->detok, (size_t)dl) != 0) {
                if (!bad_det)
                    fprintf(stderr, "  %s special=%d text %d: detokenized text differs\n",
                            LLC_VARIANTS[vi], k->special, k->text);
                bad_det++;
            }
        }
        ASSERT(cases > 50);
        ASSERT_EQ_INT(bad_ids, 0);
        ASSERT_EQ_INT(bad_det, 0);
        vq_tok_free(t);
    }
}

int main(void) {
    vq_status st;
    G = vq_gguf_open(MODEL, &st);
    if (!G) {
        printf("skipped: %s not found\n0 passed, 0 failed\n", MODEL);
        return 0;
    }
    T = vq_tok_create(G, &st);
    ASSERT(T != NULL);
    if (!T) return TEST_REPORT();
    RUN(test_metadata);
    RUN(test_reference_ids);
    RUN(test_buffer_conventions);
    RUN(test_round_trip_random_utf8);
    RUN(test_unrepresentable_bytes_dropped);
    RUN(test_chat_prompt);
    RUN(test_speed_100kb);
    RUN(test_golden_llamacpp_prompts);
    RUN(test_golden_llamacpp_text);
    RUN(test_golden_chat_texts);
    RUN(test_llamacpp_variants);
    vq_tok_free(T);
    vq_gguf_close(G);
    return TEST_REPORT();
}
