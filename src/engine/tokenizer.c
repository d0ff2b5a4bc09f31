/*
 * tokenizer.c — byte-level BPE and SentencePiece BPE tokenizers built from GGUF metadata.
 * Contract: tokenizer.h. Behaviour follows llama.cpp's llama-vocab.cpp / unicode.cpp (the
 * reference our golden ids come from); the code is our own.
 *
 * Sections: unicode helpers · hash tables · construction · pre-tokenizers · BPE · SPM ·
 * special-token partition and encode · pieces, detokenize, streaming.
 */
#include "engine/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "engine/model.h"
#include "engine/tokenizer_unicode.h"

#define TOK_MAX_TOKENS (1 << 24)
#define TOK_MAX_TEXT (1u << 16) /* bytes per token / merge string */
#define TOK_MAX_INPUT ((size_t)1 << 28)

enum pre_type { PRE_DEFAULT, PRE_GPT2, PRE_SMOLLM, PRE_LLAMA3, PRE_QWEN2 };

struct vq_tokenizer {
    enum vq_tok_model model;
    enum pre_type pre;
    int32_t n_vocab; /* real tokens */
    int32_t n_ids;   /* real + virtual (BPE merge results that are no token) */
    /* token texts: text of id i is text_buf[text_off[i] .. text_off[i+1]) */
    char *text_buf;
    size_t text_cap, text_len;
    uint64_t *text_off; /* (n_ids_cap + 1) */
    int32_t n_ids_cap;
    /* pieces (detokenized bytes, special = true) of real tokens */
    char *piece_buf;
    uint64_t *piece_off; /* (n_vocab + 1) */
    float *scores;       /* (n_vocab) */
    uint8_t *types;      /* (n_vocab) enum vq_tok_type, after EOG forcing */
    uint8_t *eog;        /* (n_vocab) 1 = ends generation */
    /* text -> id, open addressing; slot holds id + 1, 0 = empty */
    int32_t *tslot;
    uint32_t tmask;
    /* (left id, right id) -> merge rank and result id */
    struct merge_slot {
        uint64_t key;
        int32_t rank;
        int32_t result;
    } * mslot;
    uint32_t mmask;
    int32_t byte_sym[256]; /* BPE: id (maybe virtual) of the mapped char of a byte */
    int32_t byte_tok[256]; /* token emitted for a raw byte (BPE mapped char / SPM <0xXX>) */
    int32_t *special;      /* special-token candidates, longest text first */
    int32_t n_special;
    int32_t bos, eos, unk, pad, eot, eom;
    bool add_bos, add_eos, add_space_prefix, clean_spaces, ignore_merges;
};

/* ======================================================================================== */
/* Unicode helpers                                                                           */
/* ======================================================================================== */

enum {
    UC_UNDEF = 1,
    UC_N = 2,
    UC_L = 3,
    UC_Z = 4,
    UC_M = 5,
    UC_P = 6,
    UC_S = 7,
    UC_C = 8,
    UC_WS = 0x10,
    UC_CLASS = 0x0F
};

/* Class of a code point (binary search in the generated range table) plus the White_Space
 * bit. Code points above U+10FFFF are "unassigned", as in llama.cpp. */
static uint8_t uc_flags(uint32_t cp) {
    uint8_t f;
    if (cp > 0x10FFFF) {
        f = UC_UNDEF;
    } else {
        int lo = 0, hi = VQ_UCD_N_RANGES - 1;
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if ((vq_ucd_ranges[mid] & 0xFFFFFFu) <= cp) lo = mid;
            else hi = mid - 1;
        }
        f = (uint8_t)(vq_ucd_ranges[lo] >> 24);
    }
    if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
        (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
        cp == 0x205F || cp == 0x3000)
        f |= UC_WS;
    return f;
}

/* Decodes one code point at s[i] the way llama.cpp does (no overlong/surrogate checks);
 * an invalid or truncated sequence yields U+FFFD and consumes one byte. */
static uint32_t utf8_decode(const uint8_t *s, size_t n, size_t i, size_t *adv) {
    uint8_t b = s[i];
    if (!(b & 0x80)) {
        *adv = 1;
        return b;
    }
    if ((b & 0x40) && !(b & 0x20)) {
        if (i + 1 < n && (s[i + 1] & 0xC0) == 0x80) {
            *adv = 2;
            return ((uint32_t)(b & 0x1F) << 6) | (s[i + 1] & 0x3F);
        }
    } else if ((b & 0x40) && !(b & 0x10)) {
        if (i + 2 < n && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80) {
            *adv = 3;
            return ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) |
                   (s[i + 2] & 0x3F);
        }
    } else if ((b & 0x40) && !(b & 0x08)) {
        if (i + 3 < n && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80 &&
            (s[i + 3] & 0xC0) == 0x80) {
            *adv = 4;
            return ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) |
                   ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
        }
    }
    *adv = 1;
    return 0xFFFD;
}

/* Sequence length announced by a UTF-8 lead byte (llama.cpp unicode_len_utf8). */
static size_t utf8_len(uint8_t b) {
    static const uint8_t lut[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lut[b >> 4];
}

static size_t utf8_encode(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | ((cp >> 18) & 0x07));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* GPT-2 bytes_to_unicode: printable bytes map to themselves, the other 68 to U+0100.. in
 * byte order. */
static uint32_t gpt2_byte_cp(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
    uint32_t n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE))) n++;
    return 256 + n;
}

/* Inverse: byte of a mapped code point, or -1. */
static int gpt2_cp_byte(uint32_t cp) {
    if (cp < 256) {
        uint8_t b = (uint8_t)cp;
        return ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) ? b : -1;
    }
    if (cp >= 256 + 68) return -1;
    uint32_t n = 0;
    for (int c = 0; c < 256; c++) {
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE))) {
            if (256 + n == cp) return c;
            n++;
        }
    }
    return -1;
}

/* ======================================================================================== */
/* Hash tables                                                                               */
/* ======================================================================================== */

static uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)p[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static inline const char *tok_text_ptr(const vq_tokenizer *t, int32_t id, size_t *len) {
    *len = (size_t)(t->text_off[id + 1] - t->text_off[id]);
    return t->text_buf + t->text_off[id];
}

/* Looks up a text among real and virtual ids; -1 if absent. */
static int32_t text_lookup(const vq_tokenizer *t, const char *s, size_t n) {
    uint32_t i = (uint32_t)hash_bytes(s, n) & t->tmask;
    for (;;) {
        int32_t v = t->tslot[i];
        if (!v) return -1;
        size_t l;
        const char *p = tok_text_ptr(t, v - 1, &l);
        if (l == n && memcmp(p, s, n) == 0) return v - 1;
        i = (i + 1) & t->tmask;
    }
}

/* Inserts id under its text; a later id with the same text replaces the earlier one (as
 * llama.cpp's token_to_id map assignment). */
static void text_insert(vq_tokenizer *t, int32_t id) {
    size_t n;
    const char *s = tok_text_ptr(t, id, &n);
    uint32_t i = (uint32_t)hash_bytes(s, n) & t->tmask;
    for (;;) {
        int32_t v = t->tslot[i];
        if (!v) {
            t->tslot[i] = id + 1;
            return;
        }
        size_t l;
        const char *p = tok_text_ptr(t, v - 1, &l);
        if (l == n && memcmp(p, s, n) == 0) {
            t->tslot[i] = id + 1;
            return;
        }
        i = (i + 1) & t->tmask;
    }
}

static const struct merge_slot *merge_lookup(const vq_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t i = (uint32_t)hash_u64(key) & t->mmask;
    for (;;) {
        const struct merge_slot *s = &t->mslot[i];
        if (s->rank < 0) return NULL;
        if (s->key == key) return s;
        i = (i + 1) & t->mmask;
    }
}

/* ======================================================================================== */
/* Construction                                                                              */
/* ======================================================================================== */

static bool text_append(vq_tokenizer *t, const char *s, size_t n) {
    /* allocated on the first call even for n = 0: a vocabulary of empty strings must not leave
     * text_buf NULL for the pointer arithmetic and memcpy calls of the decoders */
    if (!t->text_buf || t->text_len + n > t->text_cap) {
        size_t cap = t->text_cap ? t->text_cap : 4096;
        while (cap < t->text_len + n) cap *= 2;
        char *nb = realloc(t->text_buf, cap);
        if (!nb) return false;
        t->text_buf = nb;
        t->text_cap = cap;
    }
    if (n) memcpy(t->text_buf + t->text_len, s, n);
    t->text_len += n;
    return true;
}

/* Adds a virtual id whose text is s (BPE merge part or result that is no token). */
static int32_t add_virtual(vq_tokenizer *t, const char *s, size_t n) {
    if (t->n_ids >= t->n_ids_cap) return -1;
    if (!text_append(t, s, n)) return -1;
    int32_t id = t->n_ids++;
    t->text_off[id + 1] = t->text_len;
    text_insert(t, id);
    return id;
}

static int32_t get_or_add(vq_tokenizer *t, const char *s, size_t n, bool *oom) {
    int32_t id = text_lookup(t, s, n);
    if (id >= 0) return id;
    id = add_virtual(t, s, n);
    if (id < 0) *oom = true;
    return id;
}

static enum pre_type pre_from_name(const char *pre) {
    static const char *const smollm[] = {"smollm",    "starcoder", "refact",     "command-r",
                                         "codeshell", "exaone",    "minerva-7b", NULL};
    static const char *const gpt2[] = {"gpt-2", "gpt2", "phi-2",    "mpt",
                                       "olmo",  "jais", "trillion", NULL};
    static const char *const llama3[] = {"llama3",  "llama-v3", "llama-bpe", "falcon3",
                                         "pixtral", "dbrx",     "smaug-bpe", NULL};
    static const char *const qwen2[] = {"qwen2", "deepseek-r1-qwen", "stablelm2", NULL};
    if (!pre) return PRE_DEFAULT;
    for (int i = 0; smollm[i]; i++)
        if (!strcmp(pre, smollm[i])) return PRE_SMOLLM;
    for (int i = 0; gpt2[i]; i++)
        if (!strcmp(pre, gpt2[i])) return PRE_GPT2;
    for (int i = 0; llama3[i]; i++)
        if (!strcmp(pre, llama3[i])) return PRE_LLAMA3;
    for (int i = 0; qwen2[i]; i++)
        if (!strcmp(pre, qwen2[i])) return PRE_QWEN2;
    return PRE_DEFAULT;
}

/* Detokenized bytes of token id (special = true form) appended to buf. */
static bool build_piece(const vq_tokenizer *t, int32_t id, char **buf, size_t *len, size_t *cap) {
    size_t n;
    const char *s = tok_text_ptr(t, id, &n);
    size_t need = *len + n + 4;
    if (need > *cap) {
        size_t c = *cap ? *cap : 4096;
        while (c < need) c *= 2;
        char *nb = realloc(*buf, c);
        if (!nb) return false;
        *buf = nb;
        *cap = c;
    }
    char *o = *buf + *len;
    size_t w = 0;
    int type = t->types[id];
    if (type == VQ_TOK_TYPE_UNUSED || type == VQ_TOK_TYPE_UNDEFINED) {
        w = 0;
    } else if (type == VQ_TOK_TYPE_CONTROL || type == VQ_TOK_TYPE_UNKNOWN ||
               type == VQ_TOK_TYPE_USER_DEFINED) {
        memcpy(o, s, n);
        w = n;
    } else if (type == VQ_TOK_TYPE_BYTE && n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' &&
               s[5] == '>') {
        unsigned v = 0;
        bool ok = true;
        for (int k = 3; k < 5; k++) {
            char c = s[k];
            v <<= 4;
            if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
            else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
            else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
            else ok = false;
        }
        if (ok) {
            o[0] = (char)v;
            w = 1;
        }
    } else if (t->model == VQ_TOK_MODEL_SPM) {
        /* NORMAL (and malformed BYTE): U+2581 -> space */
        for (size_t i = 0; i < n;) {
            if (i + 2 < n && (uint8_t)s[i] == 0xE2 && (uint8_t)s[i + 1] == 0x96 &&
                (uint8_t)s[i + 2] == 0x81) {
                o[w++] = ' ';
                i += 3;
            } else {
                o[w++] = s[i++];
            }
        }
    } else {
        /* byte-level BPE: mapped chars -> bytes; chars outside the map are kept as UTF-8 */
        for (size_t i = 0; i < n;) {
            size_t adv;
            uint32_t cp = utf8_decode((const uint8_t *)s, n, i, &adv);
            int b = gpt2_cp_byte(cp);
            if (b >= 0 && !(cp == 0xFFFD && adv == 1)) {
                o[w++] = (char)b;
            } else {
                memcpy(o + w, s + i, adv);
                w += adv;
            }
            i += adv;
        }
    }
    *len += w;
    return true;
}

void vq_tok_vocab_init(struct vq_tok_vocab *v) {
    memset(v, 0, sizeof *v);
    v->bos = v->eos = v->unk = v->pad = v->eot = v->eom = -1;
    v->add_bos = v->add_eos = v->add_space_prefix = -1;
}

/* Sorts the special ids by text length (longest first), then id: a stable, deterministic
 * order (merge sort, since qsort has no context argument in C11). */
static void sort_special(vq_tokenizer *t) {
    int32_t n = t->n_special;
    if (n < 2) return;
    int32_t *tmp = malloc((size_t)n * sizeof *tmp);
    if (!tmp) { /* fall back to insertion sort */
        for (int32_t i = 1; i < n; i++) {
            int32_t x = t->special[i], j = i - 1;
            uint64_t lx = t->text_off[x + 1] - t->text_off[x];
            while (j >= 0) {
                int32_t y = t->special[j];
                uint64_t ly = t->text_off[y + 1] - t->text_off[y];
                if (ly > lx || (ly == lx && y < x)) break;
                t->special[j + 1] = y;
                j--;
            }
            t->special[j + 1] = x;
        }
        return;
    }
    for (int32_t w = 1; w < n; w *= 2) {
        for (int32_t lo = 0; lo < n; lo += 2 * w) {
            int32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int32_t a = t->special[i], b = t->special[j];
                uint64_t la = t->text_off[a + 1] - t->text_off[a],
                         lb = t->text_off[b + 1] - t->text_off[b];
                if (la > lb || (la == lb && a <= b)) tmp[k++] = t->special[i++];
                else tmp[k++] = t->special[j++];
            }
            while (i < mid) tmp[k++] = t->special[i++];
            while (j < hi) tmp[k++] = t->special[j++];
        }
        memcpy(t->special, tmp, (size_t)n * sizeof *tmp);
    }
    free(tmp);
}

vq_tokenizer *vq_tok_create_vocab(const struct vq_tok_vocab *v, vq_status *st) {
    vq_status dummy;
    if (!st) st = &dummy;
    *st = VQ_STATUS_INVALID_ARG;
    if (!v || !v->model || v->n_tokens <= 0 || v->n_tokens > TOK_MAX_TOKENS || !v->tokens ||
        v->n_merges < 0 || v->n_merges > TOK_MAX_TOKENS || (v->n_merges && !v->merges))
        return NULL;
    enum vq_tok_model model;
    if (!strcmp(v->model, "gpt2")) model = VQ_TOK_MODEL_BPE;
    else if (!strcmp(v->model, "llama")) model = VQ_TOK_MODEL_SPM;
    else {
        *st = VQ_STATUS_UNSUPPORTED;
        return NULL;
    }

    vq_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        *st = VQ_STATUS_NO_MEMORY;
        return NULL;
    }
    *st = VQ_STATUS_NO_MEMORY;
    t->model = model;
    t->pre = model == VQ_TOK_MODEL_BPE ? pre_from_name(v->pre) : PRE_DEFAULT;
    t->n_vocab = v->n_tokens;
    int32_t n_merges = model == VQ_TOK_MODEL_BPE ? v->n_merges : 0;
    /* each merge can add at most 3 virtual ids, the byte symbols 256 */
    int64_t cap_ids = (int64_t)v->n_tokens + 3 * (int64_t)n_merges + 256;
    t->n_ids_cap = (int32_t)cap_ids;
    t->text_off = malloc(((size_t)cap_ids + 1) * sizeof *t->text_off);
    t->scores = calloc((size_t)t->n_vocab, sizeof *t->scores);
    t->types = malloc((size_t)t->n_vocab);
    t->eog = calloc((size_t)t->n_vocab, 1);
    uint32_t tcap = 1;
    while (tcap < 2 * (uint64_t)cap_ids) tcap <<= 1;
    t->tslot = calloc(tcap, sizeof *t->tslot);
    t->tmask = tcap - 1;
    if (!t->text_off || !t->scores || !t->types || !t->eog || !t->tslot) goto fail;

    /* token texts */
    t->text_off[0] = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const char *s = v->tokens[i];
        if (!s) {
            *st = VQ_STATUS_BAD_FORMAT;
            goto fail;
        }
        size_t n = v->token_lens ? v->token_lens[i] : strlen(s);
        if (n > TOK_MAX_TEXT) {
            *st = VQ_STATUS_BAD_FORMAT;
            goto fail;
        }
        if (!text_append(t, s, n)) goto fail;
        t->text_off[i + 1] = t->text_len;
        float sc = v->scores ? v->scores[i] : 0.0f;
        t->scores[i] = sc == sc ? sc : 0.0f; /* NaN scores would break the ordering */
        int32_t ty = v->types ? v->types[i] : VQ_TOK_TYPE_NORMAL;
        t->types[i] = (uint8_t)((ty >= 0 && ty <= VQ_TOK_TYPE_BYTE) ? ty : VQ_TOK_TYPE_UNDEFINED);
    }
    if (t->text_len == 0) { /* nothing to match or print: no tokenizer at all */
        vq_engine_set_error("tokenizer: every token string is empty (%d tokens)", t->n_vocab);
        *st = VQ_STATUS_BAD_FORMAT;
        goto fail;
    }
    t->n_ids = t->n_vocab;
    for (int32_t i = 0; i < t->n_vocab; i++) text_insert(t, i);

    /* special ids */
    int32_t ids[6] = {v->bos, v->eos, v->unk, v->pad, v->eot, v->eom};
    for (int k = 0; k < 6; k++)
        if (ids[k] < -1 || ids[k] >= t->n_vocab) ids[k] = -1; /* out of range: ignore */
    t->bos = ids[0];
    t->eos = ids[1];
    t->unk = ids[2];
    t->pad = ids[3];
    t->eot = ids[4];
    t->eom = ids[5];
    if (model == VQ_TOK_MODEL_SPM) {
        t->add_bos = v->add_bos != 0; /* default on */
        t->add_eos = v->add_eos == 1;
        t->add_space_prefix = v->add_space_prefix != 0;
        t->clean_spaces = false;
    } else {
        t->add_bos = v->add_bos == 1 || (v->add_bos == -1 && t->pre == PRE_LLAMA3);
        t->add_eos = v->add_eos == 1;
        t->add_space_prefix = v->add_space_prefix == 1;
        /* llama.cpp cleans up spaces on detokenize unless the pre-tokenizer opts out */
        t->clean_spaces = !(v->pre &&
                            (!strcmp(v->pre, "smollm") || !strcmp(v->pre, "command-r") ||
                             !strcmp(v->pre, "qwen2") || !strcmp(v->pre, "deepseek-r1-qwen")));
        t->ignore_merges = t->pre == PRE_LLAMA3;
    }
    if (t->add_bos && t->bos < 0) t->add_bos = false;
    if (t->add_eos && t->eos < 0) t->add_eos = false;

    /* end-of-generation tokens by text (llama.cpp), forced to CONTROL */
    {
        static const char *const eot_names[] = {"<|eot_id|>",
                                                "<|im_end|>",
                                                "<|end|>",
                                                "<end_of_turn>",
                                                "<|endoftext|>",
                                                "<EOT>",
                                                "_<EOT>",
                                                "\xef\xbd\x9c"
                                                "end\xe2\x96\x81"
                                                "of\xe2\x96\x81"
                                                "sentence\xef\xbd\x9c",
                                                NULL};
        static const char *const eog_names[] = {
            "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",   "<|endoftext|>",
            "<|eom_id|>", "<EOT>",      "_<EOT>",  "<|end_of_text|>", NULL};
        if (t->eot < 0) {
            for (int k = 0; eot_names[k] && t->eot < 0; k++) {
                int32_t id = text_lookup(t, eot_names[k], strlen(eot_names[k]));
                if (id >= 0 && id < t->n_vocab) t->eot = id;
            }
        }
        if (t->eom < 0) {
            int32_t id = text_lookup(t, "<|eom_id|>", 10);
            if (id >= 0 && id < t->n_vocab) t->eom = id;
        }
        for (int k = 0; eog_names[k]; k++) {
            int32_t id = text_lookup(t, eog_names[k], strlen(eog_names[k]));
            if (id >= 0 && id < t->n_vocab) {
                t->eog[id] = 1;
                t->types[id] = VQ_TOK_TYPE_CONTROL;
            }
        }
        if (t->eot >= 0) {
            t->eog[t->eot] = 1;
            t->types[t->eot] = VQ_TOK_TYPE_CONTROL;
        }
        if (t->eom >= 0) {
            t->eog[t->eom] = 1;
            t->types[t->eom] = VQ_TOK_TYPE_CONTROL;
        }
        if (t->eos >= 0) t->eog[t->eos] = 1;
    }

    /* BPE merges (rank = index) */
    uint32_t mcap = 1;
    while (mcap < 2 * (uint64_t)n_merges + 2) mcap <<= 1;
    t->mslot = malloc((size_t)mcap * sizeof *t->mslot);
    if (!t->mslot) goto fail;
    for (uint32_t i = 0; i < mcap; i++) {
        t->mslot[i].rank = -1;
        t->mslot[i].key = 0;
        t->mslot[i].result = -1;
    }
    t->mmask = mcap - 1;
    if (model == VQ_TOK_MODEL_BPE) {
        char *cat = malloc(2 * TOK_MAX_TEXT + 2);
        if (!cat) goto fail;
        bool oom = false;
        for (int32_t r = 0; r < n_merges && !oom; r++) {
            const char *m = v->merges[r];
            if (!m) continue;
            size_t n = v->merge_lens ? v->merge_lens[r] : strlen(m);
            if (n > 2 * TOK_MAX_TEXT) continue;
            const char *sp = n > 1 ? memchr(m + 1, ' ', n - 1) : NULL; /* find(' ', 1) */
            if (!sp) continue;
            size_t la = (size_t)(sp - m), lb = n - la - 1;
            int32_t a = get_or_add(t, m, la, &oom);
            int32_t b = get_or_add(t, sp + 1, lb, &oom);
            memcpy(cat, m, la);
            memcpy(cat + la, sp + 1, lb);
            int32_t c = get_or_add(t, cat, la + lb, &oom);
            if (oom) break;
            uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
            uint32_t i = (uint32_t)hash_u64(key) & t->mmask;
            while (t->mslot[i].rank >= 0 && t->mslot[i].key != key) i = (i + 1) & t->mmask;
            if (t->mslot[i].rank < 0) { /* first rank wins (llama.cpp emplace) */
                t->mslot[i].key = key;
                t->mslot[i].rank = r;
                t->mslot[i].result = c;
            }
        }
        free(cat);
        if (oom) goto fail;
        for (int b = 0; b < 256; b++) {
            uint8_t u[4];
            size_t n = utf8_encode(gpt2_byte_cp((uint8_t)b), u);
            int32_t id = text_lookup(t, (const char *)u, n);
            t->byte_sym[b] = id;
            t->byte_tok[b] = (id >= 0 && id < t->n_vocab) ? id : -1;
        }
    } else {
        for (int b = 0; b < 256; b++) {
            char hex[8];
            snprintf(hex, sizeof hex, "<0x%02X>", b);
            int32_t id = text_lookup(t, hex, 6);
            if (id < 0) {
                char c = (char)b;
                id = text_lookup(t, &c, 1);
            }
            t->byte_sym[b] = -1;
            t->byte_tok[b] = id >= 0 ? id : t->unk;
        }
    }

    /* pieces */
    {
        size_t cap = 0, len = 0;
        t->piece_off = malloc(((size_t)t->n_vocab + 1) * sizeof *t->piece_off);
        if (!t->piece_off) goto fail;
        t->piece_off[0] = 0;
        for (int32_t i = 0; i < t->n_vocab; i++) {
            if (!build_piece(t, i, &t->piece_buf, &len, &cap)) goto fail;
            t->piece_off[i + 1] = len;
        }
    }

    /* special-token candidates */
    t->special = malloc((size_t)t->n_vocab * sizeof *t->special);
    if (!t->special) goto fail;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int ty = t->types[i];
        if ((ty == VQ_TOK_TYPE_CONTROL || ty == VQ_TOK_TYPE_USER_DEFINED ||
             ty == VQ_TOK_TYPE_UNKNOWN) &&
            t->text_off[i + 1] > t->text_off[i])
            t->special[t->n_special++] = i;
    }
    sort_special(t);
    *st = VQ_STATUS_OK;
    return t;
fail:
    vq_tok_free(t);
    return NULL;
}

static bool gguf_bool(const vq_gguf *g, const char *key, int *out) {
    const struct vq_gguf_kv *kv = vq_gguf_find(g, key);
    if (!kv) return true;
    if (kv->type != VQ_GGUF_BOOL) return false;
    *out = kv->data[0] ? 1 : 0;
    return true;
}

static bool gguf_id(const vq_gguf *g, const char *key, int32_t *out) {
    uint32_t u;
    vq_status s = vq_gguf_get_u32(g, key, &u);
    if (s == VQ_STATUS_NOT_FOUND) return true;
    if (s != VQ_STATUS_OK) {
        /* some converters store -1 as int32 for "none" */
        const struct vq_gguf_kv *kv = vq_gguf_find(g, key);
        if (kv && kv->type == VQ_GGUF_I32) return true;
        return false;
    }
    *out = u > INT32_MAX ? -1 : (int32_t)u;
    return true;
}

/* GGUF value type names for messages. */
static const char *gguf_type_name(enum vq_gguf_type ty) {
    static const char *const n[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                    "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)ty < sizeof n / sizeof n[0] ? n[ty] : "an unknown type";
}

/* Describes kv's type ("array of u32", "string") into buf. */
static const char *kv_type_desc(const struct vq_gguf_kv *kv, char *buf, size_t cap) {
    if (!kv) snprintf(buf, cap, "missing");
    else if (kv->type == VQ_GGUF_ARRAY)
        snprintf(buf, cap, "an array of %llu %s", (unsigned long long)kv->arr_count,
                 gguf_type_name(kv->arr_type));
    else snprintf(buf, cap, "a %s", gguf_type_name(kv->type));
    return buf;
}

/* 1 if a gpt2 (BPE) pre-tokenizer name is one this tokenizer implements. */
static int pre_known(const char *pre) {
    return !pre || !*pre || !strcmp(pre, "default") || pre_from_name(pre) != PRE_DEFAULT;
}

vq_tokenizer *vq_tok_create(const vq_gguf *g, vq_status *st) {
    vq_status dummy;
    if (!st) st = &dummy;
    if (!g) {
        *st = VQ_STATUS_INVALID_ARG;
        vq_engine_set_error("tokenizer: no GGUF file");
        return NULL;
    }
    struct vq_tok_vocab v;
    vq_tok_vocab_init(&v);
    struct vq_gguf_str s;
    char tb[64];
    vq_status r = vq_gguf_get_str(g, "tokenizer.ggml.model", &s);
    if (r != VQ_STATUS_OK) {
        *st = r;
        const struct vq_gguf_kv *km = vq_gguf_find(g, "tokenizer.ggml.model");
        if (!km) vq_engine_set_error("tokenizer: metadata 'tokenizer.ggml.model' is missing");
        else
            vq_engine_set_error("tokenizer: 'tokenizer.ggml.model' is %s, expected a string",
                                kv_type_desc(km, tb, sizeof tb));
        return NULL;
    }
    if (s.len > 64 || s.len == 0) {
        *st = s.len ? VQ_STATUS_BAD_FORMAT : VQ_STATUS_UNSUPPORTED;
        vq_engine_set_error(
            "tokenizer: 'tokenizer.ggml.model' is %s%zu bytes), expected "
            "'gpt2' or 'llama'",
            s.len ? "too long (" : "empty (", s.len);
        return NULL;
    }
    char model[72], pre[72];
    memcpy(model, s.ptr, s.len);
    model[s.len] = 0;
    v.model = model;
    if (strcmp(model, "gpt2") && strcmp(model, "llama")) {
        *st = VQ_STATUS_UNSUPPORTED;
        vq_engine_set_error(
            "tokenizer: 'tokenizer.ggml.model' is '%s'; this engine has the "
            "'gpt2' (BPE) and 'llama' (SentencePiece) tokenizers only",
            model);
        return NULL;
    }
    const struct vq_gguf_kv *kpre = vq_gguf_find(g, "tokenizer.ggml.pre");
    if (kpre) {
        if (vq_gguf_get_str(g, "tokenizer.ggml.pre", &s) != VQ_STATUS_OK || s.len > 64) {
            *st = VQ_STATUS_BAD_FORMAT;
            vq_engine_set_error(
                "tokenizer: 'tokenizer.ggml.pre' is %s%s, expected a string of "
                "at most 64 bytes",
                kv_type_desc(kpre, tb, sizeof tb), kpre->type == VQ_GGUF_STRING ? " too long" : "");
            return NULL;
        }
        memcpy(pre, s.ptr, s.len);
        pre[s.len] = 0;
        v.pre = pre;
        /* a BPE pre-tokenizer this engine does not implement would split text differently
         * from the model's training: the ids would be another tokenization */
        if (!strcmp(model, "gpt2") && !pre_known(pre)) {
            *st = VQ_STATUS_UNSUPPORTED;
            vq_engine_set_error(
                "tokenizer: 'tokenizer.ggml.pre' is '%s', a pre-tokenizer this "
                "engine does not implement (smollm, gpt2, llama3, qwen2 and "
                "their aliases, default)",
                pre);
            return NULL;
        }
    }

    const struct vq_gguf_kv *ktok = vq_gguf_find(g, "tokenizer.ggml.tokens");
    const struct vq_gguf_kv *ksc = vq_gguf_find(g, "tokenizer.ggml.scores");
    const struct vq_gguf_kv *kty = vq_gguf_find(g, "tokenizer.ggml.token_type");
    const struct vq_gguf_kv *kmg = vq_gguf_find(g, "tokenizer.ggml.merges");
    if (!ktok) {
        *st = VQ_STATUS_NOT_FOUND;
        vq_engine_set_error("tokenizer: metadata 'tokenizer.ggml.tokens' is missing");
        return NULL;
    }
    *st = VQ_STATUS_BAD_FORMAT;
    if (ktok->type != VQ_GGUF_ARRAY || ktok->arr_type != VQ_GGUF_STRING || ktok->arr_count == 0 ||
        ktok->arr_count > TOK_MAX_TOKENS) {
        vq_engine_set_error(
            "tokenizer: 'tokenizer.ggml.tokens' is %s, expected an array of "
            "1..%d strings",
            kv_type_desc(ktok, tb, sizeof tb), TOK_MAX_TOKENS);
        return NULL;
    }
    int32_t n = (int32_t)ktok->arr_count;
    if (ksc && (ksc->type != VQ_GGUF_ARRAY || ksc->arr_count != (uint64_t)n)) {
        vq_engine_set_error(
            "tokenizer: 'tokenizer.ggml.scores' is %s, expected an array of %d "
            "f32 (one per token)",
            kv_type_desc(ksc, tb, sizeof tb), n);
        return NULL;
    }
    if (kty && (kty->type != VQ_GGUF_ARRAY || kty->arr_count != (uint64_t)n)) {
        vq_engine_set_error(
            "tokenizer: 'tokenizer.ggml.token_type' is %s, expected an array "
            "of %d i32 (one per token)",
            kv_type_desc(kty, tb, sizeof tb), n);
        return NULL;
    }
    if (kmg && (kmg->type != VQ_GGUF_ARRAY || kmg->arr_type != VQ_GGUF_STRING ||
                kmg->arr_count > TOK_MAX_TOKENS)) {
        vq_engine_set_error(
            "tokenizer: 'tokenizer.ggml.merges' is %s, expected an array of at "
            "most %d strings",
            kv_type_desc(kmg, tb, sizeof tb), TOK_MAX_TOKENS);
        return NULL;
    }
    int32_t nm = kmg ? (int32_t)kmg->arr_count : 0;
    if (!strcmp(model, "gpt2") && nm == 0) {
        /* BPE without merges never joins two symbols: every text would become bytes */
        vq_engine_set_error(
            "tokenizer: 'tokenizer.ggml.merges' is %s; a 'gpt2' (BPE) "
            "tokenizer needs its merges",
            kmg ? "empty" : "missing");
        return NULL;
    }

    const char **toks = malloc((size_t)n * sizeof *toks);
    uint32_t *tlens = malloc((size_t)n * sizeof *tlens);
    float *scores = ksc ? malloc((size_t)n * sizeof *scores) : NULL;
    int32_t *types = kty ? malloc((size_t)n * sizeof *types) : NULL;
    const char **merges = nm ? malloc((size_t)nm * sizeof *merges) : NULL;
    uint32_t *mlens = nm ? malloc((size_t)nm * sizeof *mlens) : NULL;
    vq_tokenizer *t = NULL;
    if (!toks || !tlens || (ksc && !scores) || (kty && !types) || (nm && (!merges || !mlens))) {
        *st = VQ_STATUS_NO_MEMORY;
        vq_engine_set_error("tokenizer: out of memory");
        goto done;
    }
    uint64_t text_bytes = 0;
    for (int32_t i = 0; i < n; i++) {
        if (vq_gguf_arr_str(g, ktok, (uint64_t)i, &s) != VQ_STATUS_OK) {
            vq_engine_set_error("tokenizer: entry %d of 'tokenizer.ggml.tokens' is truncated", i);
            goto done;
        }
        if (s.len > TOK_MAX_TEXT) {
            vq_engine_set_error(
                "tokenizer: entry %d of 'tokenizer.ggml.tokens' is %zu bytes, "
                "expected at most %d",
                i, s.len, TOK_MAX_TEXT);
            goto done;
        }
        toks[i] = s.ptr;
        tlens[i] = (uint32_t)s.len;
        text_bytes += s.len;
        if (ksc && vq_gguf_arr_f32(g, ksc, (uint64_t)i, &scores[i]) != VQ_STATUS_OK) {
            vq_engine_set_error(
                "tokenizer: entry %d of 'tokenizer.ggml.scores' (%s) is not a "
                "number",
                i, kv_type_desc(ksc, tb, sizeof tb));
            goto done;
        }
        if (kty && vq_gguf_arr_i32(g, kty, (uint64_t)i, &types[i]) != VQ_STATUS_OK) {
            vq_engine_set_error(
                "tokenizer: entry %d of 'tokenizer.ggml.token_type' (%s) is not "
                "an i32 token type",
                i, kv_type_desc(kty, tb, sizeof tb));
            goto done;
        }
    }
    if (text_bytes == 0) {
        vq_engine_set_error(
            "tokenizer: every one of the %d strings of 'tokenizer.ggml.tokens' "
            "is empty",
            n);
        goto done;
    }
    for (int32_t i = 0; i < nm; i++) {
        if (vq_gguf_arr_str(g, kmg, (uint64_t)i, &s) != VQ_STATUS_OK || s.len > 2 * TOK_MAX_TEXT) {
            vq_engine_set_error("tokenizer: entry %d of 'tokenizer.ggml.merges' is %s", i,
                                s.len > 2 * TOK_MAX_TEXT ? "too long" : "truncated");
            goto done;
        }
        merges[i] = s.ptr;
        mlens[i] = (uint32_t)s.len;
    }
    static const char *const id_keys[6] = {
        "tokenizer.ggml.bos_token_id",     "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
        "tokenizer.ggml.eot_token_id",     "tokenizer.ggml.eom_token_id"};
    int32_t *id_out[6] = {&v.bos, &v.eos, &v.unk, &v.pad, &v.eot, &v.eom};
    for (int k = 0; k < 6; k++)
        if (!gguf_id(g, id_keys[k], id_out[k])) {
            vq_engine_set_error("tokenizer: '%s' is %s, expected a u32 token id", id_keys[k],
                                kv_type_desc(vq_gguf_find(g, id_keys[k]), tb, sizeof tb));
            goto done;
        }
    static const char *const bool_keys[3] = {"tokenizer.ggml.add_bos_token",
                                             "tokenizer.ggml.add_eos_token",
                                             "tokenizer.ggml.add_space_prefix"};
    int *bool_out[3] = {&v.add_bos, &v.add_eos, &v.add_space_prefix};
    for (int k = 0; k < 3; k++)
        if (!gguf_bool(g, bool_keys[k], bool_out[k])) {
            vq_engine_set_error("tokenizer: '%s' is %s, expected a bool", bool_keys[k],
                                kv_type_desc(vq_gguf_find(g, bool_keys[k]), tb, sizeof tb));
            goto done;
        }
    v.n_tokens = n;
    v.tokens = toks;
    v.token_lens = tlens;
    v.scores = scores;
    v.types = types;
    v.n_merges = nm;
    v.merges = merges;
    v.merge_lens = mlens;
    t = vq_tok_create_vocab(&v, st);
    if (!t) vq_engine_set_error("tokenizer: %s", vq_status_str(*st));
done:
    free(toks);
    free(tlens);
    free(scores);
    free(types);
    free(merges);
    free(mlens);
    return t;
}

void vq_tok_free(vq_tokenizer *t) {
    if (!t) return;
    free(t->text_buf);
    free(t->text_off);
    free(t->piece_buf);
    free(t->piece_off);
    free(t->scores);
    free(t->types);
    free(t->eog);
    free(t->tslot);
    free(t->mslot);
    free(t->special);
    free(t);
}

/* ======================================================================================== */
/* Per-call scratch                                                                          */
/* ======================================================================================== */

struct heap_ent {
    float score;
    int32_t rank, left, right, res, lenl, lenr;
};

struct scratch {
    uint32_t *cps;         /* (n) code points of the fragment */
    uint8_t *fl;           /* (n) uc flags */
    uint32_t *bo;          /* (n + 1) byte offset of each code point */
    uint32_t *ch_a, *ch_b; /* (n + 1) chunk end lists */
    int32_t *sym_id, *sym_len, *sym_start, *prev, *next; /* (m) symbols */
    struct heap_ent *heap;
    size_t heap_n; /* (3 m) */
    char *buf;     /* (3 n + 4) escaped text / mapped word */
};

struct sink {
    int32_t *out;
    int64_t max, n;
};

static inline void sink_push(struct sink *s, int32_t id) {
    if (s->n < s->max) s->out[s->n] = id;
    s->n++;
}

static bool scratch_alloc(struct scratch *sc, size_t n) {
    size_t m = 3 * n + 4;
    memset(sc, 0, sizeof *sc);
    sc->cps = malloc((n + 1) * sizeof *sc->cps);
    sc->fl = malloc(n + 1);
    sc->bo = malloc((n + 1) * sizeof *sc->bo);
    sc->ch_a = malloc((n + 2) * sizeof *sc->ch_a);
    sc->ch_b = malloc((n + 2) * sizeof *sc->ch_b);
    sc->sym_id = malloc(m * sizeof(int32_t));
    sc->sym_len = malloc(m * sizeof(int32_t));
    sc->sym_start = malloc(m * sizeof(int32_t));
    sc->prev = malloc(m * sizeof(int32_t));
    sc->next = malloc(m * sizeof(int32_t));
    sc->heap = malloc(3 * m * sizeof *sc->heap);
    sc->buf = malloc(m);
    return sc->cps && sc->fl && sc->bo && sc->ch_a && sc->ch_b && sc->sym_id && sc->sym_len &&
           sc->sym_start && sc->prev && sc->next && sc->heap && sc->buf;
}

static void scratch_free(struct scratch *sc) {
    free(sc->cps);
    free(sc->fl);
    free(sc->bo);
    free(sc->ch_a);
    free(sc->ch_b);
    free(sc->sym_id);
    free(sc->sym_len);
    free(sc->sym_start);
    free(sc->prev);
    free(sc->next);
    free(sc->heap);
    free(sc->buf);
}

/* Binary heap: BPE pops the lowest rank, SPM the highest score; ties go to the leftmost. */
static inline bool heap_before(const struct heap_ent *a, const struct heap_ent *b, bool spm) {
    if (spm) return a->score > b->score || (a->score == b->score && a->left < b->left);
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(struct scratch *sc, const struct heap_ent *e, bool spm) {
    size_t i = sc->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_before(e, &sc->heap[p], spm)) break;
        sc->heap[i] = sc->heap[p];
        i = p;
    }
    sc->heap[i] = *e;
}

static struct heap_ent heap_pop(struct scratch *sc, bool spm) {
    struct heap_ent top = sc->heap[0];
    struct heap_ent last = sc->heap[--sc->heap_n];
    size_t n = sc->heap_n, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_before(&sc->heap[c + 1], &sc->heap[c], spm)) c++;
        if (!heap_before(&sc->heap[c], &last, spm)) break;
        sc->heap[i] = sc->heap[c];
        i = c;
    }
    if (n) sc->heap[i] = last;
    return top;
}

/* ======================================================================================== */
/* Pre-tokenizers (llama.cpp unicode_regex_split semantics, written by hand)                 */
/* ======================================================================================== */

#define OOR 0xFFFFFFFFu

struct chunk_out {
    uint32_t *ends;
    size_t n;
    uint32_t prev;
};

static inline void chunk_add(struct chunk_out *o, uint32_t end) {
    if (end > o->prev) o->ends[o->n++] = end;
    o->prev = end;
}

static inline bool f_L(uint8_t f) { return (f & UC_CLASS) == UC_L; }
static inline bool f_N(uint8_t f) { return (f & UC_CLASS) == UC_N; }
static inline bool f_WS(uint8_t f) { return (f & UC_WS) != 0; }
static inline uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ over [a, b). */
static void split_gpt2(const struct scratch *sc, uint32_t a, uint32_t b, struct chunk_out *o) {
#define CP(i) (((i) >= a && (i) < b) ? sc->cps[i] : OOR)
#define FL(i) (((i) >= a && (i) < b) ? sc->fl[i] : (uint8_t)0)
    uint32_t pos = a;
    o->prev = a;
    while (pos < b) {
        uint32_t c = CP(pos);
        uint8_t f = FL(pos);
        if (c == '\'' && pos + 1 < b) {
            uint32_t c1 = CP(pos + 1);
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                pos += 2;
                chunk_add(o, pos);
                continue;
            }
            if (pos + 2 < b) {
                uint32_t c2 = CP(pos + 2);
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') ||
                    (c1 == 'l' && c2 == 'l')) {
                    pos += 3;
                    chunk_add(o, pos);
                    continue;
                }
            }
        }
        uint8_t f2 = c == ' ' ? FL(pos + 1) : f;
        if (f_L(f2)) {
            pos += c == ' ';
            while (f_L(f2)) f2 = (++pos, FL(pos));
            chunk_add(o, pos);
            continue;
        }
        if (f_N(f2)) {
            pos += c == ' ';
            while (f_N(f2)) f2 = (++pos, FL(pos));
            chunk_add(o, pos);
            continue;
        }
        if (!(f_WS(f2) || f_L(f2) || f_N(f2)) && f2) {
            pos += c == ' ';
            while (!(f_WS(f2) || f_L(f2) || f_N(f2)) && f2) f2 = (++pos, FL(pos));
            chunk_add(o, pos);
            continue;
        }
        uint32_t nws = 0;
        while (f_WS(FL(pos + nws))) nws++;
        if (nws > 1 && CP(pos + nws) != OOR) {
            pos += nws - 1;
            chunk_add(o, pos);
            continue;
        }
        if (nws > 0) {
            pos += nws;
            chunk_add(o, pos);
            continue;
        }
        chunk_add(o, ++pos);
    }
}

/* Llama 3 regex (max_digits = 3) and Qwen2 regex (max_digits = 1):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,k}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 * \s*[\r\n]+|\s+(?!\S)|\s+ */
static void split_llama3(const struct scratch *sc, uint32_t a, uint32_t b, uint32_t max_digits,
                         struct chunk_out *o) {
    uint32_t pos = a;
    o->prev = a;
    while (pos < b) {
        uint32_t c = CP(pos);
        uint8_t f = FL(pos);
        if (c == '\'' && pos + 1 < b) {
            uint32_t c1 = ascii_lower(CP(pos + 1));
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                pos += 2;
                chunk_add(o, pos);
                continue;
            }
            if (pos + 2 < b) {
                uint32_t c2 = ascii_lower(CP(pos + 2));
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') ||
                    (c1 == 'l' && c2 == 'l')) {
                    pos += 3;
                    chunk_add(o, pos);
                    continue;
                }
            }
        }
        if (!(c == '\r' || c == '\n' || f_N(f))) {
            if (f_L(f) || f_L(FL(pos + 1))) {
                pos++;
                while (f_L(FL(pos))) pos++;
                chunk_add(o, pos);
                continue;
            }
        }
        if (f_N(f)) {
            uint32_t ini = pos;
            while (f_N(FL(pos))) {
                if (++pos - ini >= max_digits) {
                    chunk_add(o, pos);
                    ini = pos;
                }
            }
            chunk_add(o, pos);
            continue;
        }
        uint8_t f2 = c == ' ' ? FL(pos + 1) : f;
        if (!(f_WS(f2) || f_L(f2) || f_N(f2)) && f) {
            pos += c == ' ';
            while (!(f_WS(f2) || f_L(f2) || f_N(f2)) && f2) f2 = (++pos, FL(pos));
            uint32_t c2 = CP(pos);
            while (c2 == '\r' || c2 == '\n') c2 = (++pos, CP(pos));
            chunk_add(o, pos);
            continue;
        }
        uint32_t nws = 0, last_rn = 0;
        while (f_WS(FL(pos + nws))) {
            uint32_t c2 = CP(pos + nws);
            if (c2 == '\r' || c2 == '\n') last_rn = pos + nws + 1;
            nws++;
        }
        if (last_rn > 0) {
            pos = last_rn;
            chunk_add(o, pos);
            continue;
        }
        if (nws > 1 && CP(pos + nws) != OOR) {
            pos += nws - 1;
            chunk_add(o, pos);
            continue;
        }
        if (nws > 0) {
            pos += nws;
            chunk_add(o, pos);
            continue;
        }
        chunk_add(o, ++pos);
    }
#undef CP
#undef FL
}

enum class_split { CS_NUM_EACH, CS_NUM_RUN, CS_PUNCT_RUN, CS_DIGIT3 };

static bool cs_match(const struct scratch *sc, uint32_t i, enum class_split k) {
    uint32_t c = sc->cps[i];
    uint8_t f = sc->fl[i];
    switch (k) {
    case CS_NUM_EACH:
    case CS_NUM_RUN: return f_N(f);
    case CS_PUNCT_RUN:
        return (f & UC_CLASS) == UC_P ||
               (c < 128 && (c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
                            c == '~' || c == '|'));
    case CS_DIGIT3: return c >= '0' && c <= '9';
    }
    return false;
}

/* Regex-search splitting (std::regex_iterator semantics): matches and the gaps between them
 * become separate chunks. Patterns: \p{N}, \p{N}+, [\p{P}\$\+<=>\^~\|]+, [0-9][0-9][0-9]. */
static void split_class(const struct scratch *sc, uint32_t a, uint32_t b, enum class_split k,
                        struct chunk_out *o) {
    uint32_t pos = a;
    o->prev = a;
    while (pos < b) {
        if (k == CS_DIGIT3) {
            if (pos + 3 <= b && cs_match(sc, pos, k) && cs_match(sc, pos + 1, k) &&
                cs_match(sc, pos + 2, k)) {
                chunk_add(o, pos); /* gap before the match */
                pos += 3;
                chunk_add(o, pos);
            } else {
                pos++;
            }
            continue;
        }
        if (!cs_match(sc, pos, k)) {
            pos++;
            continue;
        }
        chunk_add(o, pos);
        if (k == CS_NUM_EACH) pos++;
        else
            while (pos < b && cs_match(sc, pos, k)) pos++;
        chunk_add(o, pos);
    }
    chunk_add(o, b);
}

/* Splits code points [0, m) of the fragment into words; returns the number of word ends
 * stored in *ends_out. */
static size_t pre_tokenize(const vq_tokenizer *t, struct scratch *sc, uint32_t m,
                           uint32_t **ends_out) {
    enum { ST_GPT2, ST_LLAMA3, ST_QWEN2, ST_CLASS };
    struct {
        int kind;
        enum class_split k;
    } stages[4];
    int ns = 0;
    switch (t->pre) {
    case PRE_GPT2: stages[ns++].kind = ST_GPT2; break;
    case PRE_SMOLLM:
        stages[ns].kind = ST_CLASS;
        stages[ns++].k = CS_NUM_EACH;
        stages[ns++].kind = ST_GPT2;
        break;
    case PRE_LLAMA3: stages[ns++].kind = ST_LLAMA3; break;
    case PRE_QWEN2: stages[ns++].kind = ST_QWEN2; break;
    case PRE_DEFAULT:
    default:
        stages[ns].kind = ST_CLASS;
        stages[ns++].k = CS_PUNCT_RUN;
        stages[ns++].kind = ST_GPT2;
        stages[ns].kind = ST_CLASS;
        stages[ns++].k = CS_NUM_RUN;
        stages[ns].kind = ST_CLASS;
        stages[ns++].k = CS_DIGIT3;
        break;
    }
    uint32_t *in = sc->ch_a, *out = sc->ch_b;
    size_t n_in = 1;
    in[0] = m;
    for (int s = 0; s < ns; s++) {
        struct chunk_out o = {out, 0, 0};
        uint32_t start = 0;
        for (size_t c = 0; c < n_in; c++) {
            uint32_t end = in[c];
            switch (stages[s].kind) {
            case ST_GPT2: split_gpt2(sc, start, end, &o); break;
            case ST_LLAMA3: split_llama3(sc, start, end, 3, &o); break;
            case ST_QWEN2: split_llama3(sc, start, end, 1, &o); break;
            default: split_class(sc, start, end, stages[s].k, &o); break;
            }
            start = end;
        }
        uint32_t *tmp = in;
        in = out;
        out = tmp;
        n_in = o.n;
    }
    *ends_out = in;
    return n_in;
}

/* ======================================================================================== */
/* Byte-level BPE                                                                            */
/* ======================================================================================== */

static void bpe_try_push(const vq_tokenizer *t, struct scratch *sc, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    int32_t a = sc->sym_id[l], b = sc->sym_id[r];
    if (a < 0 || b < 0) return;
    const struct merge_slot *m = merge_lookup(t, a, b);
    if (!m) return;
    struct heap_ent e = {0.0f, m->rank, l, r, m->result, sc->sym_len[l], sc->sym_len[r]};
    heap_push(sc, &e, false);
}

/* Merges one word (bytes w[0..n)) and emits its tokens. */
static void bpe_word(const vq_tokenizer *t, struct scratch *sc, const uint8_t *w, int32_t n,
                     struct sink *out) {
    if (n <= 0) return;
    if (t->ignore_merges) {
        size_t k = 0;
        for (int32_t i = 0; i < n; i++)
            k += utf8_encode(gpt2_byte_cp(w[i]), (uint8_t *)sc->buf + k);
        int32_t id = text_lookup(t, sc->buf, k);
        if (id >= 0 && id < t->n_vocab) {
            sink_push(out, id);
            return;
        }
    }
    for (int32_t i = 0; i < n; i++) {
        sc->sym_id[i] = t->byte_sym[w[i]];
        sc->sym_len[i] = 1;
        sc->prev[i] = i - 1;
        sc->next[i] = i + 1 < n ? i + 1 : -1;
    }
    sc->heap_n = 0;
    for (int32_t i = 1; i < n; i++) bpe_try_push(t, sc, i - 1, i);
    while (sc->heap_n) {
        struct heap_ent e = heap_pop(sc, false);
        int32_t l = e.left, r = e.right;
        if (sc->sym_len[l] == 0 || sc->sym_len[r] == 0 || sc->sym_len[l] != e.lenl ||
            sc->sym_len[r] != e.lenr)
            continue; /* outdated */
        sc->sym_id[l] = e.res;
        sc->sym_len[l] += sc->sym_len[r];
        sc->sym_len[r] = 0;
        sc->next[l] = sc->next[r];
        if (sc->next[r] >= 0) sc->prev[sc->next[r]] = l;
        bpe_try_push(t, sc, sc->prev[l], l);
        bpe_try_push(t, sc, l, sc->next[l]);
    }
    for (int32_t i = 0; i != -1; i = sc->next[i]) {
        int32_t id = sc->sym_id[i];
        if (id >= 0 && id < t->n_vocab) {
            sink_push(out, id);
        } else {
            for (int32_t k = 0; k < sc->sym_len[i]; k++) {
                int32_t bt = t->byte_tok[w[i + k]];
                if (bt >= 0) sink_push(out, bt); /* llama.cpp drops bytes without a token */
            }
        }
    }
}

static void bpe_fragment(const vq_tokenizer *t, struct scratch *sc, const uint8_t *s, size_t n,
                         struct sink *out) {
    uint32_t m = 0;
    for (size_t i = 0; i < n;) {
        size_t adv;
        uint32_t cp = utf8_decode(s, n, i, &adv);
        sc->cps[m] = cp;
        sc->fl[m] = uc_flags(cp);
        sc->bo[m] = (uint32_t)i;
        m++;
        i += adv;
    }
    sc->bo[m] = (uint32_t)n;
    if (m == 0) return;
    uint32_t *ends;
    size_t nw = pre_tokenize(t, sc, m, &ends);
    uint32_t start = 0;
    for (size_t k = 0; k < nw; k++) {
        uint32_t b0 = sc->bo[start], b1 = sc->bo[ends[k]];
        bpe_word(t, sc, s + b0, (int32_t)(b1 - b0), out);
        start = ends[k];
    }
}

/* ======================================================================================== */
/* SentencePiece BPE                                                                         */
/* ======================================================================================== */

static void spm_try_push(const vq_tokenizer *t, struct scratch *sc, const char *text, int32_t l,
                         int32_t r) {
    if (l < 0 || r < 0) return;
    int32_t id = text_lookup(t, text + sc->sym_start[l], (size_t)(sc->sym_len[l] + sc->sym_len[r]));
    if (id < 0 || id >= t->n_vocab) return;
    struct heap_ent e = {t->scores[id], 0, l, r, id, sc->sym_len[l], sc->sym_len[r]};
    heap_push(sc, &e, true);
}

static void spm_fragment(const vq_tokenizer *t, struct scratch *sc, const uint8_t *s, size_t n,
                         bool prefix_space, struct sink *out) {
    /* escape: optional leading space, ' ' -> U+2581 */
    char *e = sc->buf;
    size_t k = 0;
    if (prefix_space) {
        e[k++] = (char)0xE2;
        e[k++] = (char)0x96;
        e[k++] = (char)0x81;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            e[k++] = (char)0xE2;
            e[k++] = (char)0x96;
            e[k++] = (char)0x81;
        } else e[k++] = (char)s[i];
    }
    if (k == 0) return;
    int32_t ns = 0;
    for (size_t off = 0; off < k;) {
        size_t l = utf8_len((uint8_t)e[off]);
        if (l > k - off) l = k - off;
        sc->sym_start[ns] = (int32_t)off;
        sc->sym_len[ns] = (int32_t)l;
        sc->prev[ns] = ns - 1;
        off += l;
        sc->next[ns] = off == k ? -1 : ns + 1;
        ns++;
    }
    sc->heap_n = 0;
    for (int32_t i = 1; i < ns; i++) spm_try_push(t, sc, e, i - 1, i);
    while (sc->heap_n) {
        struct heap_ent h = heap_pop(sc, true);
        int32_t l = h.left, r = h.right;
        if (sc->sym_len[l] == 0 || sc->sym_len[r] == 0 ||
            sc->sym_len[l] + sc->sym_len[r] != h.lenl + h.lenr)
            continue;
        sc->sym_len[l] += sc->sym_len[r];
        sc->sym_len[r] = 0;
        sc->next[l] = sc->next[r];
        if (sc->next[r] >= 0) sc->prev[sc->next[r]] = l;
        spm_try_push(t, sc, e, sc->prev[l], l);
        spm_try_push(t, sc, e, l, sc->next[l]);
    }
    for (int32_t i = 0; i != -1; i = sc->next[i]) {
        int32_t id = text_lookup(t, e + sc->sym_start[i], (size_t)sc->sym_len[i]);
        if (id >= 0 && id < t->n_vocab) {
            sink_push(out, id);
            continue;
        }
        for (int32_t j = 0; j < sc->sym_len[i]; j++) {
            int32_t bt = t->byte_tok[(uint8_t)e[sc->sym_start[i] + j]];
            if (bt >= 0) sink_push(out, bt);
        }
    }
}

/* ======================================================================================== */
/* Special-token partition and encode                                                        */
/* ======================================================================================== */

/* First occurrence of needle (nl >= 1 bytes) in hay, or NULL (memmem is not in C11/POSIX). */
static const char *find_bytes(const char *hay, size_t hl, const char *needle, size_t nl) {
    if (nl == 0 || nl > hl) return NULL;
    const char *end = hay + (hl - nl) + 1;
    const char *p = hay;
    while (p < end) {
        p = memchr(p, needle[0], (size_t)(end - p));
        if (!p) return NULL;
        if (memcmp(p, needle, nl) == 0) return p;
        p++;
    }
    return NULL;
}

struct frag {
    int32_t tok;
    size_t off, len;
}; /* tok >= 0: special token, else raw text */
struct frag_list {
    struct frag *v;
    size_t n, cap;
};

static bool frag_push(struct frag_list *l, int32_t tok, size_t off, size_t len) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        struct frag *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv) return false;
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n].tok = tok;
    l->v[l->n].off = off;
    l->v[l->n].len = len;
    l->n++;
    return true;
}

/* llama.cpp tokenizer_st_partition: for each special token, longest first, cut every
 * leftmost non-overlapping occurrence out of the remaining raw fragments. */
static bool partition(const vq_tokenizer *t, const char *text, size_t len, bool parse_special,
                      struct frag_list *res) {
    struct frag_list a = {0, 0, 0}, b = {0, 0, 0};
    if (!frag_push(&a, -1, 0, len)) return false;
    for (int32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        int ty = t->types[id];
        if (!parse_special && (ty == VQ_TOK_TYPE_CONTROL || ty == VQ_TOK_TYPE_UNKNOWN)) continue;
        size_t sl;
        const char *st = tok_text_ptr(t, id, &sl);
        if (sl > len || !find_bytes(text, len, st, sl)) continue;
        b.n = 0;
        for (size_t f = 0; f < a.n; f++) {
            struct frag fr = a.v[f];
            if (fr.tok >= 0 || fr.len < sl) {
                if (!frag_push(&b, fr.tok, fr.off, fr.len)) goto oom;
                continue;
            }
            size_t off = fr.off, end = fr.off + fr.len;
            while (off < end) {
                const char *p = end - off >= sl ? find_bytes(text + off, end - off, st, sl) : NULL;
                if (!p) {
                    if (!frag_push(&b, -1, off, end - off)) goto oom;
                    break;
                }
                size_t at = (size_t)(p - text);
                if (at > off && !frag_push(&b, -1, off, at - off)) goto oom;
                if (!frag_push(&b, id, at, sl)) goto oom;
                off = at + sl;
            }
        }
        struct frag_list tmp = a;
        a = b;
        b = tmp;
    }
    free(b.v);
    *res = a;
    return true;
oom:
    free(a.v);
    free(b.v);
    return false;
}

int64_t vq_tok_encode(const vq_tokenizer *t, const char *text, size_t len, bool add_special,
                      bool parse_special, int32_t *out, int64_t max) {
    if (!t || (!text && len) || len > TOK_MAX_INPUT) return VQ_TOK_ERR_NO_MEMORY;
    if (max < 0 || !out) max = 0;
    struct sink sk = {out, max, 0};
    if (add_special && t->add_bos) sink_push(&sk, t->bos);
    if (len) {
        struct frag_list fl;
        if (!partition(t, text, len, parse_special, &fl)) return VQ_TOK_ERR_NO_MEMORY;
        size_t maxfrag = 0;
        for (size_t i = 0; i < fl.n; i++)
            if (fl.v[i].tok < 0 && fl.v[i].len > maxfrag) maxfrag = fl.v[i].len;
        struct scratch sc;
        if (!scratch_alloc(&sc, maxfrag + 1)) {
            scratch_free(&sc);
            free(fl.v);
            return VQ_TOK_ERR_NO_MEMORY;
        }
        bool prev_special = true;
        for (size_t i = 0; i < fl.n; i++) {
            const struct frag *f = &fl.v[i];
            if (f->tok >= 0) {
                sink_push(&sk, f->tok);
                prev_special = true;
                continue;
            }
            if (t->model == VQ_TOK_MODEL_BPE) {
                bpe_fragment(t, &sc, (const uint8_t *)text + f->off, f->len, &sk);
            } else {
                spm_fragment(t, &sc, (const uint8_t *)text + f->off, f->len,
                             t->add_space_prefix && prev_special, &sk);
            }
            prev_special = false;
        }
        scratch_free(&sc);
        free(fl.v);
    }
    if (add_special && t->add_eos) sink_push(&sk, t->eos);
    return sk.n <= max ? sk.n : -sk.n;
}

/* ======================================================================================== */
/* Pieces, detokenize, streaming                                                             */
/* ======================================================================================== */

const char *vq_tok_piece(const vq_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = (size_t)(t->piece_off[id + 1] - t->piece_off[id]);
    return t->piece_buf ? t->piece_buf + t->piece_off[id] : "";
}

const char *vq_tok_text(const vq_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    size_t l;
    const char *p = tok_text_ptr(t, id, &l);
    if (len) *len = l;
    return p;
}

/* Piece of id as token_to_piece with lstrip leading spaces removed (at most lstrip). */
static const char *piece_view(const vq_tokenizer *t, int32_t id, bool special, int lstrip,
                              size_t *n) {
    *n = 0;
    if (id < 0 || id >= t->n_vocab) return "";
    int ty = t->types[id];
    if (!special && (ty == VQ_TOK_TYPE_CONTROL || ty == VQ_TOK_TYPE_UNKNOWN)) return "";
    size_t l = (size_t)(t->piece_off[id + 1] - t->piece_off[id]);
    const char *p = t->piece_buf ? t->piece_buf + t->piece_off[id] : "";
    for (int i = 0; i < lstrip && l && *p == ' '; i++) {
        p++;
        l--;
    }
    *n = l;
    return p;
}

int64_t vq_tok_token_to_piece(const vq_tokenizer *t, int32_t id, char *buf, size_t cap,
                              bool special) {
    if (!t) return 0;
    size_t n;
    const char *p = piece_view(t, id, special, 0, &n);
    if (n > cap) return -(int64_t)n;
    if (n) memcpy(buf, p, n);
    return (int64_t)n;
}

int64_t vq_tok_detokenize(const vq_tokenizer *t, const int32_t *ids, int64_t n, char *buf,
                          size_t cap, bool remove_special, bool unparse_special) {
    if (!t || n <= 0 || !ids) return 0;
    if (!buf) cap = 0;
    bool remove_space = t->add_space_prefix;
    if (remove_special && t->add_bos && n > 0 && ids[0] == t->bos) {
        remove_space = false;
        ids++;
        n--;
    }
    if (remove_special && t->add_eos && n > 0 && ids[n - 1] == t->eos) n--;
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t l;
        const char *p = piece_view(t, ids[i], unparse_special, remove_space ? 1 : 0, &l);
        remove_space = false;
        if (total + l <= cap) memcpy(buf + total, p, l);
        total += l;
    }
    if (total > cap) return -(int64_t)total;
    if (t->clean_spaces && total > 0) {
        char *x = buf;
        /* pass 1: " ?", " !", " .", " ," lose the space */
        size_t t1 = total, w = 1;
        for (size_t i = 1; i < t1; i++) {
            char c = x[i];
            if (x[i - 1] == ' ' && (c == '?' || c == '!' || c == '.' || c == ',')) w--;
            x[w++] = c;
        }
        /* pass 2: " ' " -> "'" */
        size_t t2 = w;
        w = 1;
        for (size_t i = 1; i < t2; i++) {
            char c = x[i];
            if (c == '\'' && i + 1 < t2 && x[i - 1] == ' ' && x[i + 1] == ' ') {
                w--;
                x[++i] = 0;
            }
            x[w++] = c;
        }
        /* pass 3: " 's", " 'm", " 're", " 've" lose the space */
        size_t t3 = w;
        w = 1;
        for (size_t i = 1; i < t3; i++) {
            char c = x[i];
            if (x[i - 1] == ' ' && c == '\'' && i + 1 < t3) {
                char c1 = x[i + 1];
                if (c1 == 's' || c1 == 'm') w--;
                else if (i + 2 < t3 &&
                         ((c1 == 'r' && x[i + 2] == 'e') || (c1 == 'v' && x[i + 2] == 'e')))
                    w--;
            }
            x[w++] = c;
        }
        total = w;
    }
    return (int64_t)total;
}

int32_t vq_tok_find(const vq_tokenizer *t, const char *text, size_t len) {
    if (!t || (!text && len)) return -1;
    int32_t id = text_lookup(t, text ? text : "", len);
    return id < t->n_vocab ? id : -1;
}

int32_t vq_tok_n_vocab(const vq_tokenizer *t) { return t ? t->n_vocab : 0; }
enum vq_tok_model vq_tok_model(const vq_tokenizer *t) { return t ? t->model : VQ_TOK_MODEL_BPE; }
int32_t vq_tok_bos(const vq_tokenizer *t) { return t ? t->bos : -1; }
int32_t vq_tok_eos(const vq_tokenizer *t) { return t ? t->eos : -1; }
int32_t vq_tok_eot(const vq_tokenizer *t) { return t ? t->eot : -1; }
int32_t vq_tok_unk(const vq_tokenizer *t) { return t ? t->unk : -1; }
int32_t vq_tok_pad(const vq_tokenizer *t) { return t ? t->pad : -1; }
bool vq_tok_add_bos(const vq_tokenizer *t) { return t && t->add_bos; }

enum vq_tok_type vq_tok_type(const vq_tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->n_vocab) return VQ_TOK_TYPE_UNDEFINED;
    return (enum vq_tok_type)t->types[id];
}

bool vq_tok_is_eog(const vq_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n_vocab && t->eog[id];
}

bool vq_tok_is_control(const vq_tokenizer *t, int32_t id) {
    return vq_tok_type(t, id) == VQ_TOK_TYPE_CONTROL;
}

void vq_tok_stream_init(struct vq_tok_stream *s) { memset(s, 0, sizeof *s); }

/* Number of trailing bytes of p[0..n) that form the start of a UTF-8 character still
 * waiting for continuation bytes. */
static size_t utf8_incomplete_tail(const uint8_t *p, size_t n) {
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        uint8_t b = p[n - back];
        if ((b & 0xC0) == 0x80) continue; /* continuation: look further back */
        size_t need = (b >= 0xC0 && b <= 0xDF) ? 2
                    : (b >= 0xE0 && b <= 0xEF) ? 3
                    : (b >= 0xF0 && b <= 0xF7) ? 4
                                               : 1;
        return need > back ? back : 0;
    }
    return 0;
}

int64_t vq_tok_stream_push(const vq_tokenizer *t, struct vq_tok_stream *s, int32_t id, bool special,
                           char *buf, size_t cap) {
    size_t n;
    const char *p = t ? piece_view(t, id, special, 0, &n) : "";
    if (!t) n = 0;
    size_t total = (size_t)s->n_pend + n;
    /* decide the tail to keep without building the concatenation */
    uint8_t tail[8];
    size_t tl = total < 4 ? total : 4, k = 0;
    for (size_t i = total - tl; i < total; i++, k++)
        tail[k] = i < (size_t)s->n_pend ? s->pend[i] : (uint8_t)p[i - (size_t)s->n_pend];
    size_t keep = utf8_incomplete_tail(tail, tl);
    size_t emit = total - keep;
    if (emit > cap) return -(int64_t)emit;
    size_t w = 0;
    for (int i = 0; i < s->n_pend && w < emit; i++) buf[w++] = (char)s->pend[i];
    size_t from_p = emit - w;
    if (from_p) memcpy(buf + w, p, from_p);
    /* new pending bytes: the last keep bytes of the concatenation */
    uint8_t np[4];
    for (size_t i = 0; i < keep; i++) np[i] = tail[tl - keep + i];
    memcpy(s->pend, np, keep);
    s->n_pend = (int)keep;
    return (int64_t)emit;
}

int64_t vq_tok_stream_flush(struct vq_tok_stream *s, char *buf, size_t cap) {
    size_t n = (size_t)s->n_pend;
    if (n > cap) return -(int64_t)n;
    if (n) memcpy(buf, s->pend, n);
    s->n_pend = 0;
    return (int64_t)n;
}
