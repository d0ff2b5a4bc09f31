/*
 * chat.c — chat prompt formatting (contract: chat.h). The formats follow the models' own
 * Jinja templates and llama.cpp's llm_chat_apply_template.
 */
#include "engine/chat.h"

#include <string.h>

struct vq_chat_template vq_chat_template_default(enum vq_chat_format f) {
    struct vq_chat_template t;
    memset(&t, 0, sizeof t);
    t.format = f;
    return t;
}

static const char *find_in(const char *hay, size_t hl, const char *needle) {
    size_t nl = strlen(needle);
    if (nl == 0 || nl > hl) return NULL;
    for (size_t i = 0; i + nl <= hl; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, nl) == 0) return hay + i;
    return NULL;
}

/* The text from p to the next '<|im_end|>' (before end) into out, "\n" escapes unescaped, when
 * it is plain literal text: not empty, no Jinja expression, quote or string concatenation. */
static bool extract_literal(const char *p, const char *end, char *out, size_t cap) {
    const char *e = find_in(p, (size_t)(end - p), "<|im_end|>");
    if (!e) return false;
    size_t n = (size_t)(e - p);
    /* a Jinja expression (e.g. message['content']) is not a literal default */
    if (n == 0 || find_in(p, n, "{{") || find_in(p, n, "'") || find_in(p, n, "\"") ||
        find_in(p, n, "+"))
        return false;
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n && p[i + 1] == 'n') {
            c = '\n';
            i++;
        }
        if (w + 1 >= cap) return false;
        out[w++] = c;
    }
    out[w] = 0;
    return true;
}

/* Extracts the literal text of a default system turn, written in the template as
 * '<|im_start|>system\nTEXT<|im_end|>' inside a Jinja string literal (the "\n" may appear as
 * an escape or a real newline). Only plain literal text is accepted. Every occurrence of the
 * head is tried in order: Qwen2.5's template writes it first alone (its tools branch) and as
 * '<|im_start|>system\n' + messages[0]['content'] before the literal default. */
static bool extract_default_system(const char *tmpl, size_t len, char *out, size_t cap) {
    static const char *const heads[] = {"<|im_start|>system\\n", "<|im_start|>system\n", NULL};
    const char *end = tmpl + len;
    for (int h = 0; heads[h]; h++)
        for (const char *p = find_in(tmpl, len, heads[h]); p;
             p = find_in(p + 1, (size_t)(end - p - 1), heads[h]))
            if (extract_literal(p + strlen(heads[h]), end, out, cap)) return true;
    return false;
}

vq_status vq_chat_template_parse(const char *tmpl, size_t len, struct vq_chat_template *out) {
    if (!out) return VQ_STATUS_INVALID_ARG;
    *out = vq_chat_template_default(VQ_CHAT_CHATML);
    if (!tmpl) return VQ_STATUS_NOT_FOUND;
    if (find_in(tmpl, len, "<|im_start|>")) {
        out->format = VQ_CHAT_CHATML;
        out->has_default_system = extract_default_system(tmpl, len, out->default_system,
                                                         sizeof out->default_system);
        return VQ_STATUS_OK;
    }
    if (find_in(tmpl, len, "<|start_header_id|>")) {
        out->format = VQ_CHAT_LLAMA3;
        return VQ_STATUS_OK;
    }
    if (find_in(tmpl, len, "<start_of_turn>")) {
        out->format = VQ_CHAT_GEMMA;
        return VQ_STATUS_OK;
    }
    if (find_in(tmpl, len, "[INST]")) {
        out->format = VQ_CHAT_LLAMA2;
        return VQ_STATUS_OK;
    }
    return VQ_STATUS_NOT_FOUND;
}

vq_status vq_chat_from_gguf(const vq_gguf *g, struct vq_chat_template *out) {
    if (!g || !out) return VQ_STATUS_INVALID_ARG;
    struct vq_gguf_str s;
    vq_status st = vq_gguf_get_str(g, "tokenizer.chat_template", &s);
    if (st != VQ_STATUS_OK) {
        *out = vq_chat_template_default(VQ_CHAT_CHATML);
        /* Gemma GGUFs converted without the template (e.g. Gemma 3 270M) */
        struct vq_gguf_str arch;
        if (st == VQ_STATUS_NOT_FOUND &&
            vq_gguf_get_str(g, "general.architecture", &arch) == VQ_STATUS_OK && arch.len >= 5 &&
            !memcmp(arch.ptr, "gemma", 5)) {
            out->format = VQ_CHAT_GEMMA;
            return VQ_STATUS_OK;
        }
        return st == VQ_STATUS_NOT_FOUND ? st : VQ_STATUS_BAD_FORMAT;
    }
    return vq_chat_template_parse(s.ptr, (size_t)s.len, out);
}

vq_status vq_chat_format_from_name(const char *name, enum vq_chat_format *out) {
    static const struct {
        const char *n;
        enum vq_chat_format f;
    } tab[] = {{"chatml", VQ_CHAT_CHATML},
               {"llama2", VQ_CHAT_LLAMA2},
               {"llama3", VQ_CHAT_LLAMA3},
               {"gemma", VQ_CHAT_GEMMA}};
    if (!name || !out) return VQ_STATUS_INVALID_ARG;
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(name, tab[i].n)) {
            *out = tab[i].f;
            return VQ_STATUS_OK;
        }
    return VQ_STATUS_NOT_FOUND;
}

/* ---- output writer: counts everything, copies what fits ---- */
struct wr {
    char *buf;
    size_t cap, n;
};

static void put_n(struct wr *w, const char *s, size_t n) {
    if (w->n < w->cap) {
        size_t room = w->cap - w->n;
        memcpy(w->buf + w->n, s, n < room ? n : room);
    }
    w->n += n;
}
static void put(struct wr *w, const char *s) { put_n(w, s, strlen(s)); }

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Writes s without leading/trailing ASCII whitespace (llama.cpp trim). */
static void put_trim(struct wr *w, const char *s) {
    size_t n = strlen(s), a = 0;
    while (a < n && is_space(s[a])) a++;
    while (n > a && is_space(s[n - 1])) n--;
    put_n(w, s + a, n - a);
}

int64_t vq_chat_apply(const struct vq_chat_template *tmpl, const struct vq_chat_msg *msgs, size_t n,
                      bool add_generation_prompt, char *buf, size_t cap) {
    struct wr w = {buf, buf ? cap : 0, 0};
    if (!tmpl || (n && !msgs)) return 0;
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content) return 0;
    switch (tmpl->format) {
    case VQ_CHAT_CHATML:
        if (tmpl->has_default_system && (n == 0 || strcmp(msgs[0].role, "system") != 0) && n > 0) {
            put(&w, "<|im_start|>system\n");
            put(&w, tmpl->default_system);
            put(&w, "<|im_end|>\n");
        }
        for (size_t i = 0; i < n; i++) {
            put(&w, "<|im_start|>");
            put(&w, msgs[i].role);
            put(&w, "\n");
            put(&w, msgs[i].content);
            put(&w, "<|im_end|>\n");
        }
        if (add_generation_prompt) put(&w, "<|im_start|>assistant\n");
        break;
    case VQ_CHAT_LLAMA2: {
        bool inside = true;
        if (n || add_generation_prompt) put(&w, "[INST] ");
        for (size_t i = 0; i < n; i++) {
            if (!inside) {
                inside = true;
                put(&w, "[INST] ");
            }
            if (!strcmp(msgs[i].role, "system")) {
                put(&w, "<<SYS>>\n");
                put(&w, msgs[i].content);
                put(&w, "\n<</SYS>>\n\n");
            } else if (!strcmp(msgs[i].role, "user")) {
                put(&w, msgs[i].content);
                put(&w, " [/INST]");
            } else {
                put(&w, msgs[i].content);
                put(&w, "</s>");
                inside = false;
            }
        }
        break;
    }
    case VQ_CHAT_LLAMA3:
        for (size_t i = 0; i < n; i++) {
            put(&w, "<|start_header_id|>");
            put(&w, msgs[i].role);
            put(&w, "<|end_header_id|>\n\n");
            put_trim(&w, msgs[i].content);
            put(&w, "<|eot_id|>");
        }
        if (add_generation_prompt) put(&w, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case VQ_CHAT_GEMMA: {
        /* system text (trimmed, concatenated) goes in front of the next non-model turn */
        size_t sys_from = n; /* index of the first pending system message, n = none */
        for (size_t i = 0; i < n; i++) {
            if (!strcmp(msgs[i].role, "system")) {
                if (sys_from == n) sys_from = i;
                continue;
            }
            bool model = !strcmp(msgs[i].role, "assistant") || !strcmp(msgs[i].role, "model");
            put(&w, "<start_of_turn>");
            put(&w, model ? "model" : msgs[i].role);
            put(&w, "\n");
            if (sys_from < n && !model) {
                for (size_t k = sys_from; k < i; k++)
                    if (!strcmp(msgs[k].role, "system")) put_trim(&w, msgs[k].content);
                put(&w, "\n\n");
                sys_from = n;
            }
            put_trim(&w, msgs[i].content);
            put(&w, "<end_of_turn>\n");
        }
        if (add_generation_prompt) put(&w, "<start_of_turn>model\n");
        break;
    }
    default: return 0;
    }
    if (w.n + 1 > w.cap) return -(int64_t)(w.n + 1);
    buf[w.n] = 0;
    return (int64_t)w.n;
}
