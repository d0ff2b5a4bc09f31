/*
 * test_tokenizer_pre.c — the hand-written pre-tokenizers and Unicode classes of tokenizer.c
 * (included to reach its statics). Expected splits were produced with Python's `regex`
 * module running llama.cpp's regex lists for each pre-tokenizer type (independent of our
 * code); a 4000-string random comparison against that module was run during development.
 */
#include "test.h"
#include "../../src/engine/tokenizer.c"

struct split_case {
    int pre;
    const char *text;
    const char *parts[20];
    int n;
};
static const struct split_case CASES[] = {
    {0,
     "Hello world!!! 12345 $x+y<=z^2~|w",
     {"Hello", " world", "!!!", " ", "123", "45", " ", "$", "x", "+", "y", "<=", "z", "^", "2",
      "~|", "w"},
     17},
    {0,
     "a,b.c 3.14 and 1234567",
     {"a", ",", "b", ".", "c", " ", "3", ".", "14", " and", " ", "123", "456", "7"},
     14},
    {0, "don't  stop\n\n now", {"don", "'", "t", " ", " stop", "\n\n", " now"}, 7},
    {1, "Hello world!!! 12345", {"Hello", " world", "!!!", " 12345"}, 4},
    {1,
     "I'm here,   you're  there\n\n x",
     {"I", "'m", " here", ",", "  ", " you", "'re", " ", " there", "\n\n", " x"},
     11},
    {1,
     " \xc2"
     "\xa0"
     " end  ",
     {" \xc2"
      "\xa0"
      "",
      " end", "  "},
     3},
    {2, "Hello world 2024!", {"Hello", " world", " ", "2", "0", "2", "4", "!"}, 8},
    {2, "abc123def 45", {"abc", "1", "2", "3", "def", " ", "4", "5"}, 8},
    {2, "x  \n  y\t\tz", {"x", "  \n ", " y", "\t", "\t", "z"}, 6},
    {3, "Hello WORLD'S 1234567 ok", {"Hello", " WORLD", "'S", " ", "123", "456", "7", " ok"}, 8},
    {3, "a\n\n  b\r\n c!!\n", {"a", "\n\n", " ", " b", "\r\n", " c", "!!\n"}, 7},
    {3, "  ,.;x  y", {" ", " ,.;", "x", " ", " y"}, 5},
    {4, "Hello 12345 ok", {"Hello", " ", "1", "2", "3", "4", "5", " ok"}, 8},
    {4, "a\n\n  b\r\n c!!\n", {"a", "\n\n", " ", " b", "\r\n", " c", "!!\n"}, 7},
    {4, "IT'S 99 LUFTBALLONS", {"IT", "'S", " ", "9", "9", " LUFTBALLONS"}, 6},
};

TEST(test_splits) {
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        const struct split_case *k = &CASES[c];
        vq_tokenizer t;
        memset(&t, 0, sizeof t);
        t.pre = (enum pre_type)k->pre;
        size_t n = strlen(k->text);
        struct scratch sc;
        ASSERT(scratch_alloc(&sc, n + 1));
        uint32_t m = 0;
        for (size_t i = 0; i < n;) {
            size_t adv;
            uint32_t cp = utf8_decode((const uint8_t *)k->text, n, i, &adv);
            sc.cps[m] = cp;
            sc.fl[m] = uc_flags(cp);
            sc.bo[m] = (uint32_t)i;
            m++;
            i += adv;
        }
        sc.bo[m] = (uint32_t)n;
        uint32_t *ends;
        size_t nw = pre_tokenize(&t, &sc, m, &ends);
        ASSERT_EQ_INT(nw, k->n);
        uint32_t st = 0;
        for (size_t w = 0; w < nw && (int)w < k->n; w++) {
            size_t b0 = sc.bo[st], b1 = sc.bo[ends[w]];
            int ok = b1 - b0 == strlen(k->parts[w]) &&
                     memcmp(k->text + b0, k->parts[w], b1 - b0) == 0;
            if (!ok)
                fprintf(stderr, "  case %zu word %zu: '%.*s' vs '%s'\n", c, w, (int)(b1 - b0),
                        k->text + b0, k->parts[w]);
            ASSERT(ok);
            st = ends[w];
        }
        scratch_free(&sc);
    }
}

TEST(test_unicode_classes) {
    ASSERT_EQ_INT(uc_flags('a') & UC_CLASS, UC_L);
    ASSERT_EQ_INT(uc_flags('Z') & UC_CLASS, UC_L);
    ASSERT_EQ_INT(uc_flags('7') & UC_CLASS, UC_N);
    ASSERT_EQ_INT(uc_flags(0xBC) & UC_CLASS, UC_N);       /* ¼ No */
    ASSERT_EQ_INT(uc_flags(0x663) & UC_CLASS, UC_N);      /* Arabic-Indic three */
    ASSERT_EQ_INT(uc_flags(0x1C5) & UC_CLASS, UC_L);      /* ǅ Lt */
    ASSERT_EQ_INT(uc_flags(0x65E5) & UC_CLASS, UC_L);     /* 日 */
    ASSERT_EQ_INT(uc_flags(0x2EBF0) & UC_CLASS, UC_L);    /* CJK ext. I, Unicode 15.1 */
    ASSERT_EQ_INT(uc_flags(0x1C89) & UC_CLASS, UC_UNDEF); /* unassigned in 15.1 */
    ASSERT_EQ_INT(uc_flags(0x301) & UC_CLASS, UC_M);
    ASSERT_EQ_INT(uc_flags('!') & UC_CLASS, UC_P);
    ASSERT_EQ_INT(uc_flags('$') & UC_CLASS, UC_S);
    ASSERT_EQ_INT(uc_flags(0x1F600) & UC_CLASS, UC_S); /* 😀 */
    ASSERT_EQ_INT(uc_flags(0x200B) & UC_CLASS, UC_C);  /* ZWSP Cf */
    ASSERT_EQ_INT(uc_flags(0x10FFFF) & UC_CLASS, UC_UNDEF);
    ASSERT_EQ_INT(uc_flags(0x110000) & UC_CLASS, UC_UNDEF);
    static const uint32_t ws[] = {9,      10,     11,     12,     13,     32,     0x85,   0xA0,
                                  0x1680, 0x2000, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) ASSERT(uc_flags(ws[i]) & UC_WS);
    ASSERT(!(uc_flags(0x1C) & UC_WS));
    ASSERT(!(uc_flags(0x200B) & UC_WS));
    ASSERT(!(uc_flags(0xFEFF) & UC_WS));
    /* table is sorted and starts at 0 */
    ASSERT_EQ_INT(vq_ucd_ranges[0] & 0xFFFFFF, 0);
    for (int i = 1; i < VQ_UCD_N_RANGES; i++)
        ASSERT((vq_ucd_ranges[i] & 0xFFFFFF) > (vq_ucd_ranges[i - 1] & 0xFFFFFF));
}

TEST(test_utf8_decode_like_llama_cpp) {
    size_t adv;
    const uint8_t ok3[] = {0xE6, 0x97, 0xA5};
    ASSERT_EQ_INT(utf8_decode(ok3, 3, 0, &adv), 0x65E5);
    ASSERT_EQ_INT(adv, 3);
    ASSERT_EQ_INT(utf8_decode(ok3, 2, 0, &adv), 0xFFFD);
    ASSERT_EQ_INT(adv, 1); /* truncated */
    const uint8_t cont[] = {0x80};
    ASSERT_EQ_INT(utf8_decode(cont, 1, 0, &adv), 0xFFFD);
    ASSERT_EQ_INT(adv, 1);
    const uint8_t f8[] = {0xF8, 0x80, 0x80, 0x80};
    ASSERT_EQ_INT(utf8_decode(f8, 4, 0, &adv), 0xFFFD);
    ASSERT_EQ_INT(adv, 1);
    const uint8_t overlong[] = {0xC0, 0x80}; /* accepted as U+0000, as llama.cpp */
    ASSERT_EQ_INT(utf8_decode(overlong, 2, 0, &adv), 0);
    ASSERT_EQ_INT(adv, 2);
    /* GPT-2 byte map is a bijection onto 256 code points */
    int seen[0x144] = {0};
    for (int b = 0; b < 256; b++) {
        uint32_t cp = gpt2_byte_cp((uint8_t)b);
        ASSERT(cp < 0x144);
        if (cp < 0x144) seen[cp]++;
        ASSERT_EQ_INT(gpt2_cp_byte(cp), b);
    }
    ASSERT_EQ_INT(gpt2_byte_cp(' '), 0x120);  /* Ġ */
    ASSERT_EQ_INT(gpt2_byte_cp('\n'), 0x10A); /* Ċ */
    ASSERT_EQ_INT(gpt2_cp_byte(0x144), -1);
    ASSERT_EQ_INT(gpt2_cp_byte(0x20), -1);
}

int main(void) {
    RUN(test_splits);
    RUN(test_unicode_classes);
    RUN(test_utf8_decode_like_llama_cpp);
    return TEST_REPORT();
}
