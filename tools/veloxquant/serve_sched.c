/* serve_sched.c — the scheduler of `veloxquant serve` (serve.h): a FIFO queue of requests, a
 * fixed set of slots (one context each, kept between requests so a new prompt reuses the
 * longest cached prefix), admission by KV bytes and continuous batching on the library's
 * generation sessions: every iteration admits what fits, runs one prefill chunk of each
 * sequence still prefilling, then one decode step of all the others together
 * (vq_ctx_eval_batch: the weights read once for all rows). Sequences join and leave between
 * steps. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"
#include "vq_tools.h"

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct slot {
    vq_ctx *ctx;
    struct srv_req *req; /* running request, NULL when idle */
    vq_gen_session *g;   /* its session */
    size_t retained;     /* idle: KV bytes its cache still holds (charged) */
    double last_used;    /* LRU order of idle slots */
};

struct srv {
    struct srv_config cfg;
    struct slot *slots;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct srv_req **queue; /* (queue_max) FIFO ring */
    int q_head, q_len;
    int stop, draining;
    size_t active_bytes; /* charges of the running requests */
    struct srv_metrics mt;
    /* decode step buffers (n_slots) */
    vq_ctx **b_ctx;
    int32_t *b_tok;
    float **b_logits; /* each row's session's own logits row (the 16-row output products
                       * take one pointer per row: the matrix is still read once per step) */
    int *b_slot;
    int rr; /* the slot the next step's prefill starts at */
};

struct srv_req *srv_req_new(void) {
    struct srv_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->refs = 1;
    r->gp = vq_gen_params_default();
    return r;
}

void srv_req_unref(struct srv_req *r) {
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    const int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left) return;
    free(r->ids);
    for (int i = 0; i < SRV_MAX_STOPS; i++) free(r->stops[i]);
    free(r->pend);
    free(r->text);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

size_t srv_kv_bytes(const struct srv *s, int64_t n) {
    struct vq_cache_memory m;
    if (n < 1) return 0;
    const struct vq_cache_params *p = vq_ctx_cache_params(s->cfg.slots[0]);
    /* outlier tokens depend on the data: charged as if every token were one (the most) */
    if (vq_kv_estimate_outliers(p, n, p->outlier_token_k > 0 ? n : 0, &m) != VQ_STATUS_OK)
        return SIZE_MAX;
    return m.total_bytes;
}

/* Streams a piece into the request (the connection thread sends it); nonzero stops the
 * generation when the request was cancelled. Called on the scheduler thread. */
static int on_piece(void *user, const char *piece, size_t len) {
    struct srv_req *r = user;
    pthread_mutex_lock(&r->mu);
    int stop = r->cancelled;
    if (!stop && r->pend_len + len + 1 > r->pend_cap) {
        size_t nc = r->pend_cap ? r->pend_cap : 256;
        while (nc < r->pend_len + len + 1) nc *= 2;
        char *nb = realloc(r->pend, nc);
        if (!nb) stop = 1;
        else {
            r->pend = nb;
            r->pend_cap = nc;
        }
    }
    if (!stop) {
        memcpy(r->pend + r->pend_len, piece, len);
        r->pend_len += len;
        r->pend[r->pend_len] = 0;
        if (r->t_first == 0) r->t_first = srv_now();
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    return stop;
}

/* Publishes the end of a request (result or error) and drops the scheduler's reference. */
static void req_finish(struct srv_req *r, vq_status st, const char *err,
                       struct vq_gen_result *res) {
    pthread_mutex_lock(&r->mu);
    r->status = (int)st;
    if (err) snprintf(r->err, sizeof r->err, "%s", err);
    if (res) {
        r->text = res->text;
        r->text_len = res->text_len;
        res->text = NULL;
        r->n_prompt = res->n_prompt;
        r->n_generated = res->n_generated;
        r->finish = res->finish;
    }
    r->done = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    srv_req_unref(r);
}

static int req_cancelled(struct srv_req *r) {
    pthread_mutex_lock(&r->mu);
    if (!r->cancelled && srv_now() > r->deadline) r->cancelled = 1;
    const int c = r->cancelled;
    pthread_mutex_unlock(&r->mu);
    return c;
}

/* Tokens of the slot's cache that prefix r's prompt. */
static int64_t prefix_len(const struct slot *sl, const struct srv_req *r) {
    const int32_t *h = vq_ctx_tokens(sl->ctx);
    const int64_t np = vq_ctx_n_past(sl->ctx);
    int64_t k = 0;
    while (k < np && k < r->n_ids && h[k] == r->ids[k]) k++;
    return k;
}

/* Under s->mu: bytes charged now (running requests and idle slots' caches). */
static size_t in_use(const struct srv *s) {
    size_t b = s->active_bytes;
    for (int i = 0; i < s->cfg.n_slots; i++)
        if (!s->slots[i].req) b += s->slots[i].retained;
    return b;
}

/* Under s->mu: starts queued requests while a slot is free and the budget allows, in FIFO
 * order (the head waits rather than being overtaken). Idle slots' caches are dropped, least
 * recently used first, when the head needs their bytes. Returns how many started. */
static int admit(struct srv *s, int *started) {
    int n = 0;
    while (s->q_len > 0) {
        struct srv_req *r = s->queue[s->q_head];
        if (req_cancelled(r)) {
            s->q_head = (s->q_head + 1) % s->cfg.queue_max;
            s->q_len--;
            s->mt.queued = s->q_len;
            req_finish(r, VQ_STATUS_OK, NULL, NULL);
            continue;
        }
        int best = -1;
        int64_t best_pre = -1;
        for (int i = 0; i < s->cfg.n_slots; i++) {
            const struct slot *sl = &s->slots[i];
            if (sl->req) continue;
            const int64_t p = prefix_len(sl, r);
            if (p > best_pre || (p == best_pre && sl->last_used < s->slots[best].last_used)) {
                best = i;
                best_pre = p;
            }
        }
        if (best < 0) break;
        struct slot *sl = &s->slots[best];
        size_t used = in_use(s) - sl->retained;
        while (used + r->charge > s->cfg.budget) { /* drop idle caches, LRU first */
            int lru = -1;
            for (int i = 0; i < s->cfg.n_slots; i++)
                if (!s->slots[i].req && i != best && s->slots[i].retained &&
                    (lru < 0 || s->slots[i].last_used < s->slots[lru].last_used))
                    lru = i;
            if (lru < 0) break;
            vq_ctx_reset(s->slots[lru].ctx);
            used -= s->slots[lru].retained;
            s->slots[lru].retained = 0;
        }
        if (used + r->charge > s->cfg.budget) break; /* waits for running requests to end */
        s->q_head = (s->q_head + 1) % s->cfg.queue_max;
        s->q_len--;
        sl->req = r;
        sl->retained = 0;
        s->active_bytes += r->charge;
        started[n++] = best;
    }
    int active = 0;
    for (int i = 0; i < s->cfg.n_slots; i++) active += s->slots[i].req != NULL;
    s->mt.active = active;
    if (active > s->mt.max_active) s->mt.max_active = active;
    s->mt.queued = s->q_len;
    s->mt.kv_in_use = in_use(s);
    return n;
}

/* Ends slot i's request (session result or error) and frees the slot. */
static void slot_end(struct srv *s, int i, vq_status err_st) {
    struct slot *sl = &s->slots[i];
    struct srv_req *r = sl->req;
    struct vq_gen_result res;
    memset(&res, 0, sizeof res);
    vq_status st = err_st;
    char msg[256] = "";
    if (sl->g) {
        const vq_status e = vq_gen_end(sl->g, &res);
        if (st == VQ_STATUS_OK) st = e;
        sl->g = NULL;
    }
    if (st != VQ_STATUS_OK) snprintf(msg, sizeof msg, "%s", vq_engine_last_error());
    struct vq_cache_memory mem;
    vq_cache_memory(vq_ctx_cache(sl->ctx), &mem);
    pthread_mutex_lock(&s->mu);
    s->mt.prompt_tokens += (uint64_t)res.n_prompt;
    s->mt.completion_tokens += (uint64_t)res.n_generated;
    s->active_bytes -= r->charge;
    /* the cache stays for prefix reuse, charged at its exact size (<= the request's charge) */
    sl->retained = mem.total_bytes;
    sl->req = NULL;
    sl->last_used = srv_now();
    s->mt.active--;
    s->mt.kv_in_use = in_use(s);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    req_finish(r, st, st == VQ_STATUS_OK ? NULL : msg, st == VQ_STATUS_OK ? &res : NULL);
    vq_gen_result_free(&res);
}

static void *sched_main(void *arg) {
    struct srv *s = arg;
    const int N = s->cfg.n_slots;
    int *started = malloc(sizeof(int) * (size_t)N);
    for (;;) {
        pthread_mutex_lock(&s->mu);
        for (;;) {
            int busy = 0;
            for (int i = 0; i < N; i++) busy |= s->slots[i].req != NULL;
            if (s->stop || busy || s->q_len > 0) break;
            pthread_cond_wait(&s->cv, &s->mu);
        }
        if (s->stop) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        const int n_new = started ? admit(s, started) : 0;
        pthread_mutex_unlock(&s->mu);
        for (int k = 0; k < n_new; k++) {
            struct slot *sl = &s->slots[started[k]];
            struct srv_req *r = sl->req;
            r->gp.on_piece = on_piece;
            r->gp.user = r;
            vq_status st;
            sl->g = vq_gen_begin(sl->ctx, r->ids, r->n_ids, &r->gp, &st);
            if (!sl->g) slot_end(s, started[k], st);
        }
        /* prefill: while others decode, about one chunk (-b) of prompt tokens per step in all
         * (round robin over the sequences still prefilling), so a long prompt delays a decode
         * step by one chunk; with nobody decoding, a chunk of each */
        int decoding = 0;
        for (int i = 0; i < N; i++)
            decoding += s->slots[i].g && vq_gen_prefill_left(s->slots[i].g) == 0;
        int64_t pf_budget = decoding ? s->cfg.prefill_chunk : INT64_MAX;
        for (int ii = 0; ii < N && pf_budget > 0; ii++) {
            const int i = (ii + s->rr) % N;
            struct slot *sl = &s->slots[i];
            if (!sl->g || vq_gen_prefill_left(sl->g) == 0) continue;
            if (req_cancelled(sl->req)) {
                slot_end(s, i, VQ_STATUS_OK);
                continue;
            }
            const int64_t left = vq_gen_prefill_left(sl->g);
            int64_t k = left < s->cfg.prefill_chunk ? left : s->cfg.prefill_chunk;
            if (decoding) {
                /* whole chunks only (a chunk cut short would change the numerics: vq_gen_prefill)
                 * so the first one may pass the budget; later ones must fit it */
                if (k > pf_budget && pf_budget < s->cfg.prefill_chunk) break;
                pf_budget -= k;
                s->rr = i + 1; /* the next step starts after this one */
            }
            const double t0 = srv_now();
            const vq_status st = vq_gen_prefill(sl->g, k);
            const double dt = srv_now() - t0;
            pthread_mutex_lock(&s->mu);
            s->mt.prefill_tokens += (uint64_t)k;
            s->mt.prefill_s += dt;
            pthread_mutex_unlock(&s->mu);
            if (st != VQ_STATUS_OK) slot_end(s, i, st);
        }
        /* one decode step of all the others together */
        int n = 0;
        for (int i = 0; i < N; i++) {
            struct slot *sl = &s->slots[i];
            if (!sl->g || vq_gen_prefill_left(sl->g) > 0) continue;
            int32_t t = -1;
            vq_status st = req_cancelled(sl->req) ? VQ_STATUS_OK : vq_gen_next(sl->g, &t);
            if (st != VQ_STATUS_OK || t < 0) {
                slot_end(s, i, st);
                continue;
            }
            s->b_ctx[n] = sl->ctx;
            s->b_tok[n] = t;
            s->b_logits[n] = vq_gen_logits(sl->g);
            s->b_slot[n++] = i;
        }
        if (n > 0) {
            const double t0 = srv_now();
            const vq_status st = vq_ctx_eval_batch(s->b_ctx, s->b_tok, n, s->b_logits);
            const double dt = srv_now() - t0;
            for (int k = 0; k < n; k++) vq_gen_decoded(s->slots[s->b_slot[k]].g, st);
            pthread_mutex_lock(&s->mu);
            s->mt.decode_tokens += (uint64_t)n;
            s->mt.decode_s += dt;
            s->mt.decode_steps++;
            s->mt.decode_rows += (uint64_t)n;
            pthread_mutex_unlock(&s->mu);
        }
    }
    /* stopping: end what runs, then what waits */
    for (int i = 0; i < N; i++)
        if (s->slots[i].req) slot_end(s, i, VQ_STATUS_OK);
    pthread_mutex_lock(&s->mu);
    while (s->q_len > 0) {
        struct srv_req *r = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % s->cfg.queue_max;
        s->q_len--;
        req_finish(r, VQ_STATUS_OK, NULL, NULL);
    }
    pthread_mutex_unlock(&s->mu);
    free(started);
    return NULL;
}

struct srv *srv_create(const struct srv_config *cfg) {
    struct srv *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cfg = *cfg;
    const size_t N = (size_t)cfg->n_slots;
    s->slots = calloc(N, sizeof *s->slots);
    s->queue = calloc((size_t)cfg->queue_max, sizeof *s->queue);
    s->b_ctx = calloc(N, sizeof *s->b_ctx);
    s->b_tok = calloc(N, sizeof *s->b_tok);
    s->b_logits = calloc(N, sizeof *s->b_logits);
    s->b_slot = calloc(N, sizeof *s->b_slot);
    if (!s->slots || !s->queue || !s->b_ctx || !s->b_tok || !s->b_logits || !s->b_slot) {
        srv_free(s);
        return NULL;
    }
    for (size_t i = 0; i < N; i++) s->slots[i].ctx = cfg->slots[i];
    s->mt.kv_budget = cfg->budget;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->th, NULL, sched_main, s) != 0) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        free(s->slots);
        s->slots = NULL;
        srv_free(s);
        return NULL;
    }
    return s;
}

void srv_free(struct srv *s) {
    if (!s) return;
    if (s->slots) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->th, NULL);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
    }
    free(s->slots);
    free(s->queue);
    free(s->b_ctx);
    free(s->b_tok);
    free(s->b_logits);
    free(s->b_slot);
    free(s);
}

int srv_submit(struct srv *s, struct srv_req *r) {
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    if (s->draining) rc = -3;
    else if (r->charge > s->cfg.budget) rc = -2;
    else if (s->q_len >= s->cfg.queue_max) rc = -1;
    else {
        pthread_mutex_lock(&r->mu);
        r->refs++;
        pthread_mutex_unlock(&r->mu);
        s->queue[(s->q_head + s->q_len) % s->cfg.queue_max] = r;
        s->q_len++;
        s->mt.queued = s->q_len;
        s->mt.requests++;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void srv_metrics(struct srv *s, struct srv_metrics *m) {
    pthread_mutex_lock(&s->mu);
    *m = s->mt;
    pthread_mutex_unlock(&s->mu);
}

int srv_drain(struct srv *s) {
    pthread_mutex_lock(&s->mu);
    s->draining = 1;
    pthread_mutex_unlock(&s->mu);
    return srv_busy(s);
}

int srv_busy(struct srv *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->q_len;
    for (int i = 0; i < s->cfg.n_slots; i++) n += s->slots[i].req != NULL;
    pthread_mutex_unlock(&s->mu);
    return n;
}
