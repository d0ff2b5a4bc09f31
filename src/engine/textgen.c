/*
 * textgen.c — text on top of the engine (vq_engine.h "text"): the model's tokenizer and chat
 * template (created on first use, shared by every thread), tokenize / detokenize wrappers, the
 * incremental detokenizer, the generation loop (prefix reuse of the context's cache, prefill,
 * sample / stream / decode, stop strings held back until they cannot match) and multi-turn
 * conversations that evaluate only the tokens the cache lacks.
 *
 * Allocation: vq_generate_tokens allocates its sampler, logits row, stop-string lengths and
 * text buffers before the loop; per token only the text (and a conversation's token list) grow,
 * geometrically.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine/chat.h"
#include "engine/model.h"
#include "engine/tokenizer.h"

struct vq_model_text {
    vq_tokenizer *tok;
    struct vq_chat_template tmpl;
};

void vq_model_text_free(struct vq_model_text *t) {
    if (!t) return;
    vq_tok_free(t->tok);
    free(t);
}

/* The model's tokenizer and template, created once (the thread that loses a race frees its
 * copy). NULL with *st and a message when the file has no usable tokenizer. */
static const struct vq_model_text *model_text(const vq_model *m, vq_status *st) {
    if (!m) {
        vq_engine_set_error("text: NULL model");
        if (st) *st = VQ_STATUS_INVALID_ARG;
        return NULL;
    }
    struct vq_model *mm = (struct vq_model *)m; /* only the atomic slot is written */
    struct vq_model_text *t = atomic_load_explicit(&mm->text, memory_order_acquire);
    if (t) {
        if (st) *st = VQ_STATUS_OK;
        return t;
    }
    vq_status s = VQ_STATUS_OK;
    t = calloc(1, sizeof *t);
    if (!t) {
        vq_engine_set_error("text: out of memory");
        if (st) *st = VQ_STATUS_NO_MEMORY;
        return NULL;
    }
    t->tok = vq_tok_create(m->gguf, &s);
    if (!t->tok) {
        /* the tokenizer's own message names the key and what is wrong with it */
        char why[512];
        snprintf(why, sizeof why, "%s", vq_engine_last_error());
        if (strncmp(why, "tokenizer: ", 11) == 0)
            vq_engine_set_error("model has no usable tokenizer: %s", why + 11);
        else vq_engine_set_error("model has no usable tokenizer: %s", vq_status_str(s));
        free(t);
        if (st) *st = s;
        return NULL;
    }
    if (vq_tok_n_vocab(t->tok) != m->info.n_vocab) {
        vq_engine_set_error(
            "text: the tokenizer has %d tokens but the model's vocabulary (token "
            "embedding / output layer) has %d; the file is inconsistent",
            vq_tok_n_vocab(t->tok), m->info.n_vocab);
        vq_model_text_free(t);
        if (st) *st = VQ_STATUS_BAD_FORMAT;
        return NULL;
    }
    (void)vq_chat_from_gguf(m->gguf, &t->tmpl); /* NOT_FOUND: ChatML */
    struct vq_model_text *expected = NULL;
    if (!atomic_compare_exchange_strong_explicit(&mm->text, &expected, t, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        vq_model_text_free(t);
        t = expected;
    }
    if (st) *st = VQ_STATUS_OK;
    return t;
}

/* ---- tokenizer wrappers ---- */

int64_t vq_tokenize(const vq_model *m, const char *text, size_t len, int add_special,
                    int parse_special, int32_t *out, int64_t cap) {
    const struct vq_model_text *t = model_text(m, NULL);
    if (!t) return VQ_TEXT_ERROR;
    if ((!text && len) || cap < 0 || (!out && cap > 0)) {
        vq_engine_set_error("vq_tokenize: NULL text or output buffer");
        return VQ_TEXT_ERROR;
    }
    const int64_t n = vq_tok_encode(t->tok, text ? text : "", len, add_special != 0,
                                    parse_special != 0, out, cap);
    if (n == VQ_TOK_ERR_NO_MEMORY) {
        vq_engine_set_error("vq_tokenize: out of memory or text longer than 2^28 bytes");
        return VQ_TEXT_ERROR;
    }
    return n;
}

int64_t vq_detokenize(const vq_model *m, const int32_t *ids, int64_t n, char *buf, size_t cap,
                      int remove_special, int unparse_special) {
    const struct vq_model_text *t = model_text(m, NULL);
    if (!t) return VQ_TEXT_ERROR;
    if (n < 0 || (!ids && n) || (!buf && cap)) {
        vq_engine_set_error("vq_detokenize: NULL ids or buffer, or n < 0");
        return VQ_TEXT_ERROR;
    }
    return vq_tok_detokenize(t->tok, ids, n, buf, cap, remove_special != 0, unparse_special != 0);
}

int64_t vq_token_to_piece(const vq_model *m, int32_t id, char *buf, size_t cap, int special) {
    const struct vq_model_text *t = model_text(m, NULL);
    if (!t) return VQ_TEXT_ERROR;
    if (!buf && cap) {
        vq_engine_set_error("vq_token_to_piece: NULL buffer");
        return VQ_TEXT_ERROR;
    }
    return vq_tok_token_to_piece(t->tok, id, buf, cap, special != 0);
}

int vq_token_is_eog(const vq_model *m, int32_t id) {
    const struct vq_model_text *t = model_text(m, NULL);
    return t && vq_tok_is_eog(t->tok, id) ? 1 : 0;
}

int32_t vq_token_bos(const vq_model *m) {
    const struct vq_model_text *t = model_text(m, NULL);
    return t ? vq_tok_bos(t->tok) : -1;
}

int32_t vq_token_eos(const vq_model *m) {
    const struct vq_model_text *t = model_text(m, NULL);
    return t ? vq_tok_eos(t->tok) : -1;
}

int vq_token_add_bos(const vq_model *m) {
    const struct vq_model_text *t = model_text(m, NULL);
    return t && vq_tok_add_bos(t->tok) ? 1 : 0;
}

/* ---- incremental detokenizer ---- */

struct vq_detok {
    const vq_tokenizer *tok;
    struct vq_tok_stream s;
    bool special;
};

vq_detok *vq_detok_create(const vq_model *m, int special, vq_status *st) {
    const struct vq_model_text *t = model_text(m, st);
    if (!t) return NULL;
    vq_detok *d = calloc(1, sizeof *d);
    if (!d) {
        vq_engine_set_error("vq_detok_create: out of memory");
        if (st) *st = VQ_STATUS_NO_MEMORY;
        return NULL;
    }
    d->tok = t->tok;
    d->special = special != 0;
    vq_tok_stream_init(&d->s);
    if (st) *st = VQ_STATUS_OK;
    return d;
}

void vq_detok_free(vq_detok *d) { free(d); }

int64_t vq_detok_push(vq_detok *d, int32_t id, char *buf, size_t cap) {
    if (!d || (!buf && cap)) return VQ_TEXT_ERROR;
    return vq_tok_stream_push(d->tok, &d->s, id, d->special, buf, cap);
}

int64_t vq_detok_flush(vq_detok *d, char *buf, size_t cap) {
    if (!d || (!buf && cap)) return VQ_TEXT_ERROR;
    return vq_tok_stream_flush(&d->s, buf, cap);
}

/* ---- chat template ---- */

/* vq_chat_apply with the template t; VQ_TEXT_ERROR (and a message) for a NULL string. */
static int64_t chat_apply(const struct vq_model_text *t, const struct vq_chat_message *msgs,
                          size_t n, int add_gen, char *buf, size_t cap) {
    if ((n && !msgs) || (!buf && cap)) {
        vq_engine_set_error("chat template: NULL messages or buffer");
        return VQ_TEXT_ERROR;
    }
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content) {
            vq_engine_set_error("chat template: message %zu has a NULL role or content", i);
            return VQ_TEXT_ERROR;
        }
    /* struct vq_chat_message and struct vq_chat_msg have the same two members */
    const struct vq_chat_msg *cm = (const struct vq_chat_msg *)(const void *)msgs;
    _Static_assert(
        sizeof(struct vq_chat_msg) == sizeof(struct vq_chat_message) &&
            offsetof(struct vq_chat_msg, content) == offsetof(struct vq_chat_message, content),
        "chat message layouts differ");
    return vq_chat_apply(&t->tmpl, cm, n, add_gen != 0, buf, cap);
}

int64_t vq_model_chat_apply(const vq_model *m, const struct vq_chat_message *msgs, size_t n,
                            int add_generation_prompt, char *buf, size_t cap) {
    const struct vq_model_text *t = model_text(m, NULL);
    if (!t) return VQ_TEXT_ERROR;
    return chat_apply(t, msgs, n, add_generation_prompt, buf, cap);
}

/* Applies the template into a malloc'd NUL-terminated buffer; NULL on error (message set). */
static char *chat_apply_alloc(const struct vq_model_text *t, const struct vq_chat_message *msgs,
                              size_t n, size_t *len) {
    int64_t need = chat_apply(t, msgs, n, 1, NULL, 0);
    if (need == VQ_TEXT_ERROR) return NULL;
    size_t cap = (size_t)(need < 0 ? -need : need + 1);
    char *buf = malloc(cap);
    if (!buf) {
        vq_engine_set_error("chat template: out of memory");
        return NULL;
    }
    int64_t w = chat_apply(t, msgs, n, 1, buf, cap);
    if (w < 0) {
        vq_engine_set_error("chat template: failed");
        free(buf);
        return NULL;
    }
    *len = (size_t)w;
    return buf;
}

/* ---- generation ---- */

const char *vq_finish_reason_name(enum vq_finish_reason f) {
    switch (f) {
    case VQ_FINISH_NONE: return "none";
    case VQ_FINISH_STOP: return "stop";
    case VQ_FINISH_LENGTH: return "length";
    case VQ_FINISH_CONTEXT: return "context";
    case VQ_FINISH_CALLBACK: return "callback";
    }
    return NULL;
}

struct vq_gen_params vq_gen_params_default(void) {
    struct vq_gen_params p;
    memset(&p, 0, sizeof p);
    p.sampling = vq_sampler_params_default();
    p.max_tokens = 256;
    p.add_special = 1;
    p.parse_special = 0;
    return p;
}

void vq_gen_result_free(struct vq_gen_result *r) {
    if (!r) return;
    free(r->text);
    memset(r, 0, sizeof *r);
}

/* Ids sampled by one generation (end-of-generation token included), for conversations. */
struct gen_trace {
    int32_t *ids;
    int64_t n, cap;
};

/* Growable text (NUL-terminated when len < cap). */
struct gbuf {
    char *b;
    size_t len, cap;
};

static bool gbuf_reserve(struct gbuf *g, size_t more) {
    if (g->len + more + 1 <= g->cap) return true;
    size_t nc = g->cap ? g->cap : 256;
    while (nc < g->len + more + 1) nc *= 2;
    char *nb = realloc(g->b, nc);
    if (!nb) return false;
    g->b = nb;
    g->cap = nc;
    return true;
}

static bool gbuf_put(struct gbuf *g, const char *s, size_t n) {
    if (!gbuf_reserve(g, n)) return false;
    if (n) memcpy(g->b + g->len, s, n);
    g->len += n;
    g->b[g->len] = 0;
    return true;
}

/* Stop strings with their lengths (empty ones dropped). */
struct stops {
    const char **s;
    size_t *len;
    int *index; /* position in vq_gen_params.stop */
    int n;
};

/* Earliest start >= from of a whole stop string in t[0..len), or -1 (*which: its index in
 * vq_gen_params.stop); then *safe is the first position >= from where t[p..len) is a proper
 * prefix of a stop string (len if none): the text before it can never be part of one. */
static int64_t stops_scan(const struct stops *S, const char *t, size_t from, size_t len,
                          size_t *safe, int *which) {
    *safe = len;
    if (!S->n) return -1;
    for (size_t p = from; p < len; p++)
        for (int k = 0; k < S->n; k++)
            if (len - p >= S->len[k] && !memcmp(t + p, S->s[k], S->len[k])) {
                *which = S->index[k];
                return (int64_t)p;
            }
    for (size_t p = from; p < len; p++)
        for (int k = 0; k < S->n; k++)
            if (S->len[k] > len - p && !memcmp(t + p, S->s[k], len - p)) {
                *safe = p;
                return -1;
            }
    return -1;
}

static void timings_sub(struct vq_ctx_timings *d, const struct vq_ctx_timings *a,
                        const struct vq_ctx_timings *b) {
    for (int k = 0; k < 2; k++) {
        for (int p = 0; p < VQ_PHASE_COUNT; p++)
            d->seconds[k][p] = a->seconds[k][p] - b->seconds[k][p];
        d->tokens[k] = a->tokens[k] - b->tokens[k];
        d->passes[k] = a->passes[k] - b->passes[k];
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Cuts the context back to at most keep tokens, at the first point at or below keep that its
 * codecs can cut at (a KIVI block may not re-open; windowed layers refuse cuts far back), else
 * to 0. */
static void ctx_cut(vq_ctx *c, int64_t keep) {
    if (keep >= vq_ctx_n_past(c)) return;
    for (int64_t k = keep, tries = 0; k > 0 && tries < 4096; k--, tries++)
        if (vq_ctx_truncate(c, k) == VQ_STATUS_OK) return;
    vq_ctx_reset(c);
}

/* ---- the generation loop: a session stepped by vq_generate_tokens or by a scheduler ---- */

enum gen_phase { GEN_PREFILL, GEN_DECODE, GEN_DONE };

/* Everything one generation holds; released by vq_gen_end. */
struct vq_gen_session {
    vq_ctx *c;
    const struct vq_model_text *mt;
    struct vq_gen_params p; /* copy; the stop strings stay borrowed */
    struct gen_trace *tr;   /* sampled ids (conversations), may be NULL */
    vq_sampler *smp;
    float *logits; /* (n_vocab) */
    struct stops stops;
    char *piece; /* (piece_cap) one detokenized piece */
    size_t piece_cap;
    int32_t *ids;   /* (n) the prompt, until prefilled */
    int64_t n, pos; /* prompt tokens, prompt tokens in the cache */
    enum gen_phase phase;
    int pending;   /* a token returned by vq_gen_next awaits vq_gen_decoded */
    vq_status err; /* first error, OK while none */
    struct gbuf out;
    struct vq_tok_stream ts;
    size_t emitted; /* bytes of out delivered (never part of a stop string) */
    enum vq_finish_reason fin;
    bool matched;
    double t_decode; /* clock at the first vq_gen_next */
    struct vq_ctx_timings t0, t1;
    struct vq_gen_result r;
};

static void session_free(vq_gen_session *g) {
    vq_sampler_free(g->smp);
    free(g->logits);
    free(g->stops.s);
    free(g->stops.len);
    free(g->stops.index);
    free(g->piece);
    free(g->ids);
    free(g->out.b);
    free(g);
}

/* vq_gen_begin with a trace for conversations (tr may be NULL). */
static vq_gen_session *session_begin(vq_ctx *c, const struct vq_model_text *mt, const int32_t *ids,
                                     int64_t n, const struct vq_gen_params *p, struct gen_trace *tr,
                                     vq_status *st) {
    const vq_model *m = vq_ctx_model(c);
    const int n_vocab = m->info.n_vocab;
    const int64_t n_ctx = vq_ctx_n_ctx(c);
    *st = VQ_STATUS_INVALID_ARG;
    if (p->max_tokens < 0 || p->n_stop < 0 || (p->n_stop > 0 && !p->stop)) {
        vq_engine_set_error("generate: max_tokens < 0, n_stop < 0 or NULL stop list");
        return NULL;
    }
    for (int i = 0; i < p->n_stop; i++)
        if (!p->stop[i]) {
            vq_engine_set_error("generate: stop string %d is NULL", i);
            return NULL;
        }
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab) {
            vq_engine_set_error("generate: token id %d at %lld out of range (n_vocab %d)", ids[i],
                                (long long)i, n_vocab);
            return NULL;
        }
    /* the longest prefix the cache already holds, leaving the last prompt token to evaluate */
    const int32_t *hist = vq_ctx_tokens(c);
    const int64_t np = vq_ctx_n_past(c);
    int64_t keep = 0;
    while (keep < np && keep < n - 1 && hist[keep] == ids[keep]) keep++;
    if (n > n_ctx) {
        vq_engine_set_error("context full: %lld tokens needed, %lld free", (long long)(n - keep),
                            (long long)(n_ctx - keep));
        *st = VQ_STATUS_CAPACITY;
        return NULL;
    }
    vq_gen_session *g = calloc(1, sizeof *g);
    if (!g) {
        vq_engine_set_error("generate: out of memory");
        *st = VQ_STATUS_NO_MEMORY;
        return NULL;
    }
    g->c = c;
    g->mt = mt;
    g->p = *p;
    g->tr = tr;
    g->n = n;
    g->r.n_prompt = n;
    g->r.stop_index = -1;
    g->fin = VQ_FINISH_LENGTH;
    g->smp = vq_sampler_create(&p->sampling, n_vocab, st);
    if (!g->smp) {
        vq_engine_set_error("generate: bad sampling parameters: %s", vq_status_str(*st));
        session_free(g);
        return NULL;
    }
    g->logits = malloc(sizeof(float) * (size_t)n_vocab);
    g->piece_cap = 256;
    g->piece = malloc(g->piece_cap);
    g->ids = malloc(sizeof *g->ids * (size_t)n);
    if (p->n_stop > 0) {
        g->stops.s = malloc(sizeof *g->stops.s * (size_t)p->n_stop);
        g->stops.len = malloc(sizeof *g->stops.len * (size_t)p->n_stop);
        g->stops.index = malloc(sizeof *g->stops.index * (size_t)p->n_stop);
    }
    if (!g->logits || !g->piece || !g->ids ||
        (p->n_stop > 0 && (!g->stops.s || !g->stops.len || !g->stops.index)) ||
        !gbuf_reserve(&g->out, 256)) {
        session_free(g);
        vq_engine_set_error("generate: out of memory");
        *st = VQ_STATUS_NO_MEMORY;
        return NULL;
    }
    memcpy(g->ids, ids, sizeof *ids * (size_t)n);
    g->out.b[0] = 0;
    for (int i = 0; i < p->n_stop; i++)
        if (p->stop[i][0]) {
            g->stops.s[g->stops.n] = p->stop[i];
            g->stops.index[g->stops.n] = i;
            g->stops.len[g->stops.n++] = strlen(p->stop[i]);
        }
    const int rl = p->sampling.repeat_last_n;
    if (p->sampling.repeat_penalty != 1.0f && rl > 0)
        for (int64_t i = n > rl ? n - rl : 0; i < n; i++) vq_sampler_accept(g->smp, ids[i]);
    ctx_cut(c, keep);
    g->pos = vq_ctx_n_past(c);
    g->r.n_cached = g->pos;
    vq_tok_stream_init(&g->ts);
    vq_ctx_get_timings(c, &g->t0);
    g->t1 = g->t0;
    *st = VQ_STATUS_OK;
    return g;
}

vq_gen_session *vq_gen_begin(vq_ctx *c, const int32_t *ids, int64_t n,
                             const struct vq_gen_params *p, vq_status *st) {
    vq_status s = VQ_STATUS_INVALID_ARG;
    vq_gen_session *g = NULL;
    if (!c || !ids || n < 1) vq_engine_set_error("vq_gen_begin: NULL context or ids, or n < 1");
    else {
        const struct vq_model_text *mt = model_text(vq_ctx_model(c), &s);
        struct vq_gen_params d = vq_gen_params_default();
        if (mt) g = session_begin(c, mt, ids, n, p ? p : &d, NULL, &s);
    }
    if (st) *st = s;
    return g;
}

int64_t vq_gen_prefill_left(const vq_gen_session *g) {
    return g && g->phase == GEN_PREFILL && g->err == VQ_STATUS_OK ? g->n - g->pos : 0;
}

vq_ctx *vq_gen_ctx(const vq_gen_session *g) { return g ? g->c : NULL; }

float *vq_gen_logits(vq_gen_session *g) { return g ? g->logits : NULL; }

int vq_gen_finished(const vq_gen_session *g) {
    return !g || g->phase == GEN_DONE || g->err != VQ_STATUS_OK;
}

vq_status vq_gen_prefill(vq_gen_session *g, int64_t max_tokens) {
    if (!g || max_tokens < 0) return VQ_STATUS_INVALID_ARG;
    if (g->err != VQ_STATUS_OK) return g->err;
    if (g->phase != GEN_PREFILL) return VQ_STATUS_OK;
    const int64_t left = g->n - g->pos;
    const int64_t k = max_tokens == 0 || max_tokens > left ? left : max_tokens;
    const bool last = k == left;
    const double s0 = now_s();
    vq_status st = vq_ctx_eval(g->c, g->ids + g->pos, k, last ? g->logits : NULL);
    g->r.prefill_s += now_s() - s0;
    if (st != VQ_STATUS_OK) {
        vq_engine_set_error("generate: prefill of %lld tokens failed: %s", (long long)k,
                            vq_status_str(st));
        g->err = st;
        return st;
    }
    g->pos += k;
    g->r.n_evaluated += k;
    if (last) {
        vq_ctx_get_timings(g->c, &g->t1);
        timings_sub(&g->r.prefill_timings, &g->t1, &g->t0);
        g->phase = GEN_DECODE;
        free(g->ids);
        g->ids = NULL;
    }
    return VQ_STATUS_OK;
}

vq_status vq_gen_decoded(vq_gen_session *g, vq_status eval_status) {
    if (!g || !g->pending) return VQ_STATUS_INVALID_ARG;
    g->pending = 0;
    if (eval_status != VQ_STATUS_OK) {
        vq_engine_set_error("generate: decode step %lld failed: %s", (long long)g->r.n_decoded + 1,
                            vq_status_str(eval_status));
        g->err = eval_status;
        return eval_status;
    }
    g->r.n_decoded++;
    return VQ_STATUS_OK;
}

/* Ends the decode with reason f (the text is settled by vq_gen_end). */
static void session_finish(vq_gen_session *g, enum vq_finish_reason f) {
    g->fin = f;
    g->phase = GEN_DONE;
}

vq_status vq_gen_next(vq_gen_session *g, int32_t *token) {
    if (token) *token = -1;
    if (!g || !token || g->pending || g->phase == GEN_PREFILL) {
        vq_engine_set_error("vq_gen_next: NULL session, prefill not done or a token not decoded");
        return VQ_STATUS_INVALID_ARG;
    }
    if (g->err != VQ_STATUS_OK) return g->err;
    if (g->phase == GEN_DONE) return VQ_STATUS_OK;
    if (g->t_decode == 0) g->t_decode = now_s();
    struct vq_gen_result *r = &g->r;
    const struct vq_gen_params *p = &g->p;
    if (r->n_generated >= p->max_tokens) {
        session_finish(g, VQ_FINISH_LENGTH);
        return VQ_STATUS_OK;
    }
    const int32_t t = vq_sampler_sample(g->smp, g->logits);
    vq_sampler_accept(g->smp, t);
    struct gen_trace *tr = g->tr;
    if (tr) {
        if (tr->n == tr->cap) {
            int64_t nc = tr->cap ? tr->cap * 2 : 64;
            int32_t *ni = realloc(tr->ids, sizeof *ni * (size_t)nc);
            if (!ni) return g->err = VQ_STATUS_NO_MEMORY;
            tr->ids = ni;
            tr->cap = nc;
        }
        tr->ids[tr->n++] = t;
    }
    if (vq_tok_is_eog(g->mt->tok, t)) {
        session_finish(g, VQ_FINISH_STOP);
        return VQ_STATUS_OK;
    }
    r->n_generated++;
    int64_t w;
    while ((w = vq_tok_stream_push(g->mt->tok, &g->ts, t, false, g->piece, g->piece_cap)) < 0) {
        char *nb = realloc(g->piece, (size_t)-w);
        if (!nb) break;
        g->piece = nb;
        g->piece_cap = (size_t)-w;
    }
    if (w < 0 || !gbuf_put(&g->out, g->piece, (size_t)w)) return g->err = VQ_STATUS_NO_MEMORY;
    size_t safe;
    const int64_t at = stops_scan(&g->stops, g->out.b, g->emitted, g->out.len, &safe,
                                  &r->stop_index);
    if (at >= 0) {
        g->out.len = (size_t)at;
        g->out.b[g->out.len] = 0;
        safe = g->out.len;
        g->matched = true;
    }
    if (safe > g->emitted) {
        const int stop_cb = p->on_piece &&
                            p->on_piece(p->user, g->out.b + g->emitted, safe - g->emitted);
        g->emitted = safe;
        if (stop_cb) {
            session_finish(g, VQ_FINISH_CALLBACK);
            return VQ_STATUS_OK;
        }
    }
    if (g->matched) session_finish(g, VQ_FINISH_STOP);
    else if (r->n_generated == p->max_tokens) session_finish(g, VQ_FINISH_LENGTH);
    else if (vq_ctx_n_past(g->c) >= vq_ctx_n_ctx(g->c)) session_finish(g, VQ_FINISH_CONTEXT);
    else {
        *token = t;
        g->pending = 1;
    }
    return VQ_STATUS_OK;
}

vq_status vq_gen_end(vq_gen_session *g, struct vq_gen_result *r) {
    if (r) memset(r, 0, sizeof *r);
    if (!g) return VQ_STATUS_INVALID_ARG;
    vq_status st = g->err;
    const bool prefilled = g->phase != GEN_PREFILL;
    if (st == VQ_STATUS_OK && g->phase != GEN_DONE) session_finish(g, VQ_FINISH_CALLBACK);
    if (prefilled) {
        if (g->t_decode != 0) g->r.decode_s = now_s() - g->t_decode;
        struct vq_ctx_timings t2;
        vq_ctx_get_timings(g->c, &t2);
        timings_sub(&g->r.decode_timings, &t2, &g->t1);
    }
    if (st == VQ_STATUS_NO_MEMORY) vq_engine_set_error("generate: out of memory");
    struct gbuf *out = &g->out;
    if (st == VQ_STATUS_OK && g->fin == VQ_FINISH_CALLBACK) {
        out->len = g->emitted; /* what the callback did not get is dropped */
        out->b[out->len] = 0;
    } else if (st == VQ_STATUS_OK && !g->matched) {
        /* the end: an unfinished character, then everything held back for stop strings */
        const int64_t w = vq_tok_stream_flush(&g->ts, g->piece, g->piece_cap); /* <= 4 bytes */
        if (w > 0 && !gbuf_put(out, g->piece, (size_t)w)) st = VQ_STATUS_NO_MEMORY;
        size_t safe;
        const int64_t at = st ? -1
                              : stops_scan(&g->stops, out->b, g->emitted, out->len, &safe,
                                           &g->r.stop_index);
        if (at >= 0) {
            out->len = (size_t)at;
            out->b[out->len] = 0;
            g->fin = VQ_FINISH_STOP;
        }
        if (st == VQ_STATUS_OK && out->len > g->emitted && g->p.on_piece)
            (void)g->p.on_piece(g->p.user, out->b + g->emitted, out->len - g->emitted);
    }
    if (r) {
        *r = g->r;
        if (st == VQ_STATUS_OK) {
            r->finish = g->fin;
            r->text = out->b;
            r->text_len = out->len;
            out->b = NULL;
        }
    }
    session_free(g);
    return st;
}

/* The generation of vq_generate_tokens on one context; tr (may be NULL) receives the sampled
 * ids. */
static vq_status gen_core(vq_ctx *c, const struct vq_model_text *mt, const int32_t *ids, int64_t n,
                          const struct vq_gen_params *p, struct vq_gen_result *r,
                          struct gen_trace *tr) {
    memset(r, 0, sizeof *r);
    r->n_prompt = n;
    r->stop_index = -1;
    vq_status st;
    vq_gen_session *g = session_begin(c, mt, ids, n, p, tr, &st);
    if (!g) return st;
    st = vq_gen_prefill(g, 0);
    while (st == VQ_STATUS_OK) {
        int32_t t;
        st = vq_gen_next(g, &t);
        if (st != VQ_STATUS_OK || t < 0) break;
        st = vq_gen_decoded(g, vq_ctx_eval(c, &t, 1, g->logits));
    }
    return vq_gen_end(g, r);
}

vq_status vq_generate_tokens(vq_ctx *c, const int32_t *ids, int64_t n,
                             const struct vq_gen_params *p, struct vq_gen_result *r) {
    if (r) memset(r, 0, sizeof *r);
    if (!c || !ids || n < 1 || !r) {
        vq_engine_set_error("vq_generate_tokens: NULL context, ids or result, or n < 1");
        return VQ_STATUS_INVALID_ARG;
    }
    vq_status st;
    const struct vq_model_text *mt = model_text(vq_ctx_model(c), &st);
    if (!mt) return st;
    struct vq_gen_params d = vq_gen_params_default();
    return gen_core(c, mt, ids, n, p ? p : &d, r, NULL);
}

vq_status vq_generate(vq_ctx *c, const char *prompt, const struct vq_gen_params *p,
                      struct vq_gen_result *r) {
    if (r) memset(r, 0, sizeof *r);
    if (!c || !prompt || !r) {
        vq_engine_set_error("vq_generate: NULL context, prompt or result");
        return VQ_STATUS_INVALID_ARG;
    }
    struct vq_gen_params d = vq_gen_params_default();
    if (!p) p = &d;
    const vq_model *m = vq_ctx_model(c);
    vq_status st;
    const struct vq_model_text *mt = model_text(m, &st);
    if (!mt) return st;
    const size_t len = strlen(prompt);
    int64_t n = vq_tok_encode(mt->tok, prompt, len, p->add_special != 0, p->parse_special != 0,
                              NULL, 0);
    if (n == VQ_TOK_ERR_NO_MEMORY) {
        vq_engine_set_error("vq_generate: out of memory while tokenizing");
        return VQ_STATUS_NO_MEMORY;
    }
    if (n < 0) n = -n;
    if (n == 0) {
        vq_engine_set_error("vq_generate: the prompt is empty after tokenization");
        return VQ_STATUS_INVALID_ARG;
    }
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
    if (!ids) {
        vq_engine_set_error("vq_generate: out of memory");
        return VQ_STATUS_NO_MEMORY;
    }
    if (vq_tok_encode(mt->tok, prompt, len, p->add_special != 0, p->parse_special != 0, ids, n) !=
        n) {
        free(ids);
        vq_engine_set_error("vq_generate: tokenization failed");
        return VQ_STATUS_NO_MEMORY;
    }
    st = gen_core(c, mt, ids, n, p, r, NULL);
    free(ids);
    return st;
}

/* ---- conversations ---- */

struct vq_conversation {
    vq_ctx *c;
    const struct vq_model_text *mt;
    struct vq_chat_message *msgs; /* (cap_msgs) roles static, contents owned */
    size_t n_msgs, cap_msgs;
    bool has_system;
    /* the known token sequence (evaluated, plus the last sampled tokens not yet evaluated)
     * and its text: token i covers text[end[i-1] .. end[i]); end[i] = -1 where the boundary
     * is not known (inside a segment that did not tokenize back to its exact bytes) */
    struct gbuf text;
    int32_t *toks;
    int64_t *end;
    int64_t n_toks, cap_toks;
    uint64_t n_turns; /* turns generated since create / reset: mixed into each turn's seed */
};

vq_conversation *vq_conversation_create(vq_ctx *c, const char *system, vq_status *st) {
    if (!c) {
        vq_engine_set_error("vq_conversation_create: NULL context");
        if (st) *st = VQ_STATUS_INVALID_ARG;
        return NULL;
    }
    const struct vq_model_text *mt = model_text(vq_ctx_model(c), st);
    if (!mt) return NULL;
    vq_conversation *v = calloc(1, sizeof *v);
    if (v) {
        v->c = c;
        v->mt = mt;
        v->cap_msgs = 8;
        v->msgs = calloc(v->cap_msgs, sizeof *v->msgs);
        if (v->msgs && system) {
            v->msgs[0].role = "system";
            v->msgs[0].content = strdup(system);
            if (v->msgs[0].content) v->n_msgs = 1;
            v->has_system = true;
        }
    }
    if (!v || !v->msgs || (system && !v->n_msgs)) {
        vq_conversation_free(v);
        vq_engine_set_error("vq_conversation_create: out of memory");
        if (st) *st = VQ_STATUS_NO_MEMORY;
        return NULL;
    }
    if (st) *st = VQ_STATUS_OK;
    return v;
}

void vq_conversation_free(vq_conversation *v) {
    if (!v) return;
    for (size_t i = 0; i < v->n_msgs; i++) free((char *)v->msgs[i].content);
    free(v->msgs);
    free(v->text.b);
    free(v->toks);
    free(v->end);
    free(v);
}

void vq_conversation_reset(vq_conversation *v) {
    if (!v) return;
    const size_t keep = v->has_system ? 1 : 0;
    for (size_t i = keep; i < v->n_msgs; i++) free((char *)v->msgs[i].content);
    v->n_msgs = keep;
    v->text.len = 0;
    v->n_toks = 0;
    v->n_turns = 0;
    vq_ctx_reset(v->c);
}

size_t vq_conversation_n_messages(const vq_conversation *v) { return v ? v->n_msgs : 0; }

const struct vq_chat_message *vq_conversation_message(const vq_conversation *v, size_t i) {
    return v && i < v->n_msgs ? &v->msgs[i] : NULL;
}

int64_t vq_conversation_n_past(const vq_conversation *v) { return v ? vq_ctx_n_past(v->c) : 0; }

vq_ctx *vq_conversation_ctx(const vq_conversation *v) { return v ? v->c : NULL; }

/* Appends a message (content copied). false when out of memory. */
static bool conv_push_msg(vq_conversation *v, const char *role, const char *content, size_t len) {
    if (v->n_msgs == v->cap_msgs) {
        struct vq_chat_message *nm = realloc(v->msgs, sizeof *nm * v->cap_msgs * 2);
        if (!nm) return false;
        v->msgs = nm;
        v->cap_msgs *= 2;
    }
    char *s = malloc(len + 1);
    if (!s) return false;
    memcpy(s, content, len);
    s[len] = 0;
    v->msgs[v->n_msgs].role = role;
    v->msgs[v->n_msgs].content = s;
    v->n_msgs++;
    return true;
}

static bool conv_reserve_toks(vq_conversation *v, int64_t n) {
    if (n <= v->cap_toks) return true;
    int64_t nc = v->cap_toks ? v->cap_toks : 256;
    while (nc < n) nc *= 2;
    int32_t *nt = realloc(v->toks, sizeof *nt * (size_t)nc);
    if (nt) v->toks = nt;
    int64_t *ne = realloc(v->end, sizeof *ne * (size_t)nc);
    if (ne) v->end = ne;
    if (!nt || !ne) return false;
    v->cap_toks = nc;
    return true;
}

/* Sets the end offsets of tokens [from, v->n_toks) that were tokenized from text[base .. len):
 * their pieces when they spell exactly that text (a BOS the tokenizer added spells nothing),
 * else unknown inside and len at the last token. */
static void conv_segment_ends(vq_conversation *v, int64_t from, size_t base, bool bos_first) {
    const vq_tokenizer *tok = v->mt->tok;
    size_t off = base;
    bool exact = true;
    for (int64_t i = from; i < v->n_toks && exact; i++) {
        size_t pl = 0;
        const char *pc = vq_tok_piece(tok, v->toks[i], &pl);
        if (i == from && bos_first) pl = 0;
        if (pl && (!pc || off + pl > v->text.len || memcmp(v->text.b + off, pc, pl))) exact = false;
        off += pl;
        v->end[i] = (int64_t)off;
    }
    if (exact && off == v->text.len) return;
    for (int64_t i = from; i < v->n_toks; i++) v->end[i] = -1;
    if (v->n_toks > from) v->end[v->n_toks - 1] = (int64_t)v->text.len;
}

vq_status vq_conversation_turn(vq_conversation *v, const char *user_text,
                               const struct vq_gen_params *p, struct vq_gen_result *r) {
    if (r) memset(r, 0, sizeof *r);
    if (!v || !user_text || !r) {
        vq_engine_set_error("vq_conversation_turn: NULL conversation, text or result");
        return VQ_STATUS_INVALID_ARG;
    }
    /* turn k samples with the seed mixed with k: a seeded conversation replays exactly, and its
     * turns do not restart one random stream (turn 0 uses the seed as given) */
    struct vq_gen_params d = p ? *p : vq_gen_params_default();
    d.sampling.seed ^= v->n_turns * 0x9E3779B97F4A7C15ull;
    p = &d;
    if (!conv_push_msg(v, "user", user_text, strlen(user_text))) {
        vq_engine_set_error("vq_conversation_turn: out of memory");
        return VQ_STATUS_NO_MEMORY;
    }
    vq_status st = VQ_STATUS_NO_MEMORY;
    size_t flen = 0;
    char *f = chat_apply_alloc(v->mt, v->msgs, v->n_msgs, &flen);
    int32_t *want = NULL;
    struct gen_trace tr = {NULL, 0, 0};
    if (!f) goto fail;
    /* the known tokens up to the last boundary inside the common text prefix */
    size_t L = 0;
    while (L < v->text.len && L < flen && v->text.b[L] == f[L]) L++;
    int64_t k = v->n_toks;
    while (k > 0 && (v->end[k - 1] < 0 || (size_t)v->end[k - 1] > L)) k--;
    const size_t base = k ? (size_t)v->end[k - 1] : 0;
    const bool add_special = k == 0; /* BOS only at the start of the conversation */
    int64_t ns = vq_tok_encode(v->mt->tok, f + base, flen - base, add_special, true, NULL, 0);
    if (ns == VQ_TOK_ERR_NO_MEMORY) goto fail;
    if (ns < 0) ns = -ns;
    const int64_t n = k + ns;
    if (n < 1) {
        vq_engine_set_error("vq_conversation_turn: the prompt is empty");
        st = VQ_STATUS_INVALID_ARG;
        goto fail;
    }
    want = malloc(sizeof *want * (size_t)n);
    if (!want) goto fail;
    if (k) memcpy(want, v->toks, sizeof *want * (size_t)k);
    if (ns &&
        vq_tok_encode(v->mt->tok, f + base, flen - base, add_special, true, want + k, ns) != ns)
        goto fail;
    st = gen_core(v->c, v->mt, want, n, p, r, &tr);
    if (st != VQ_STATUS_OK) goto fail_keep_msg;
    /* record: the known tokens become want + the sampled ids, the text the prompt + pieces */
    if (!conv_reserve_toks(v, n + tr.n) || !gbuf_reserve(&v->text, 0)) goto nomem_after;
    v->text.len = 0;
    if (!gbuf_put(&v->text, f, flen)) goto nomem_after;
    memcpy(v->toks + k, want + k, sizeof *want * (size_t)ns);
    v->n_toks = n;
    conv_segment_ends(
        v, k, base,
        add_special && vq_tok_add_bos(v->mt->tok) && ns > 0 && want[0] == vq_tok_bos(v->mt->tok));
    for (int64_t i = 0; i < tr.n; i++) {
        size_t pl = 0;
        const char *pc = vq_tok_piece(v->mt->tok, tr.ids[i], &pl);
        if (!gbuf_put(&v->text, pc ? pc : "", pc ? pl : 0)) goto nomem_after;
        v->toks[v->n_toks] = tr.ids[i];
        v->end[v->n_toks++] = (int64_t)v->text.len;
    }
    if (!conv_push_msg(v, "assistant", r->text, r->text_len)) goto nomem_after;
    v->n_turns++;
    free(f);
    free(want);
    free(tr.ids);
    return VQ_STATUS_OK;
nomem_after:
    /* the known tokens are unreliable now: start the next turn from the cache's own ids */
    v->n_toks = 0;
    v->text.len = 0;
    vq_gen_result_free(r);
    vq_engine_set_error("vq_conversation_turn: out of memory");
    st = VQ_STATUS_NO_MEMORY;
    goto fail_keep_msg;
fail:
    if (st == VQ_STATUS_NO_MEMORY) vq_engine_set_error("vq_conversation_turn: out of memory");
fail_keep_msg:
    /* the user message is not kept: the conversation is as before the call */
    free((char *)v->msgs[--v->n_msgs].content);
    free(f);
    free(want);
    free(tr.ids);
    return st;
}
