/*
 * sampler.c — next-token sampling: an optional repetition penalty over the last accepted
 * tokens, then greedy, or temperature + top-k + top-p (nucleus) + min-p with a seeded
 * xoshiro256** stream. Buffers are allocated once at create.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "vq_engine.h"

struct cand {
    float logit;
    int32_t id;
};

struct vq_sampler {
    struct vq_sampler_params p;
    int n_vocab;
    vq_rng rng;
    struct cand *c; /* (n_vocab) candidates */
    float *prob;    /* (n_vocab) */
    /* repetition penalty (repeat_penalty != 1 and repeat_last_n > 0), else NULL */
    float *pen;      /* (n_vocab) penalized copy of the logits */
    uint32_t *stamp; /* (n_vocab) epoch at which a token was last penalized */
    uint32_t epoch;
    int32_t *hist; /* (repeat_last_n) ring of the last accepted tokens */
    int hist_n;    /* tokens in the ring */
    int hist_pos;  /* next slot to write */
};

struct vq_sampler_params vq_sampler_params_default(void) {
    struct vq_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 0.0f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.seed = 42;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    return p;
}

static bool penalty_on(const struct vq_sampler_params *p) {
    return p->repeat_penalty != 1.0f && p->repeat_last_n > 0;
}

vq_sampler *vq_sampler_create(const struct vq_sampler_params *p, int n_vocab, vq_status *st) {
    struct vq_sampler_params d = vq_sampler_params_default();
    if (!p) p = &d;
    if (n_vocab < 1 || isnan(p->temperature) || p->top_k < 0 ||
        !(p->top_p > 0.0f && p->top_p <= 1.0f) || !(p->min_p >= 0.0f && p->min_p <= 1.0f) ||
        !(p->repeat_penalty > 0.0f && isfinite(p->repeat_penalty)) || p->repeat_last_n < 0 ||
        p->repeat_last_n > (1 << 24)) {
        if (st) *st = VQ_STATUS_INVALID_ARG;
        return NULL;
    }
    vq_sampler *s = calloc(1, sizeof *s);
    if (s) {
        s->c = malloc((size_t)n_vocab * sizeof *s->c);
        s->prob = malloc((size_t)n_vocab * sizeof *s->prob);
        if (penalty_on(p)) {
            s->pen = malloc((size_t)n_vocab * sizeof *s->pen);
            s->stamp = calloc((size_t)n_vocab, sizeof *s->stamp);
            s->hist = malloc((size_t)p->repeat_last_n * sizeof *s->hist);
        }
    }
    if (!s || !s->c || !s->prob || (penalty_on(p) && (!s->pen || !s->stamp || !s->hist))) {
        vq_sampler_free(s);
        if (st) *st = VQ_STATUS_NO_MEMORY;
        return NULL;
    }
    s->p = *p;
    s->n_vocab = n_vocab;
    vq_rng_seed(&s->rng, p->seed);
    if (st) *st = VQ_STATUS_OK;
    return s;
}

void vq_sampler_free(vq_sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->prob);
    free(s->pen);
    free(s->stamp);
    free(s->hist);
    free(s);
}

void vq_sampler_reseed(vq_sampler *s, uint64_t seed) {
    if (s) vq_rng_seed(&s->rng, seed);
}

void vq_sampler_accept(vq_sampler *s, int32_t token) {
    if (!s || !s->hist) return;
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % s->p.repeat_last_n;
    if (s->hist_n < s->p.repeat_last_n) s->hist_n++;
}

/* llama.cpp's penalty_repeat on a copy of the logits: every distinct token of the window
 * once, divided when positive, multiplied when not. Returns the logits to sample from. */
static const float *apply_penalty(vq_sampler *s, const float *logits) {
    if (!s->hist || s->hist_n == 0) return logits;
    memcpy(s->pen, logits, (size_t)s->n_vocab * sizeof *s->pen);
    if (++s->epoch == 0) { /* wrapped: clear the stamps once every 2^32 calls */
        memset(s->stamp, 0, (size_t)s->n_vocab * sizeof *s->stamp);
        s->epoch = 1;
    }
    const float rp = s->p.repeat_penalty;
    for (int i = 0; i < s->hist_n; i++) {
        const int32_t t = s->hist[i];
        if (t < 0 || t >= s->n_vocab || s->stamp[t] == s->epoch) continue;
        s->stamp[t] = s->epoch;
        s->pen[t] = s->pen[t] <= 0.0f ? s->pen[t] * rp : s->pen[t] / rp;
    }
    return s->pen;
}

/* Descending by logit, ascending id on ties (deterministic). */
static int cand_cmp(const void *a, const void *b) {
    const struct cand *x = a, *y = b;
    if (x->logit > y->logit) return -1;
    if (x->logit < y->logit) return 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Restores the heap property below i; the root holds the candidate that sorts last. */
static void sift_down(struct cand *h, int n, int i) {
    for (;;) {
        int w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && cand_cmp(&h[l], &h[w]) > 0) w = l;
        if (r < n && cand_cmp(&h[r], &h[w]) > 0) w = r;
        if (w == i) return;
        struct cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static int32_t argmax(const float *logits, int n) {
    /* the largest value (NaN never wins a >; max is exact in any order), then its first index:
     * two passes over blocks of 16 the compiler vectorizes, the id of the one-pass scan (first
     * maximum, NaN skipped, 0 if none) */
    float m16[16];
    int i = 0;
    for (int k = 0; k < 16; k++) m16[k] = -INFINITY;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++) m16[k] = logits[i + k] > m16[k] ? logits[i + k] : m16[k];
    float mx = -INFINITY;
    for (int k = 0; k < 16; k++) mx = m16[k] > mx ? m16[k] : mx;
    for (; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
    for (i = 0; i + 16 <= n; i += 16) {
        int hit = 0;
        for (int k = 0; k < 16; k++) hit |= logits[i + k] == mx;
        if (hit) break;
    }
    for (; i < n; i++)
        if (logits[i] == mx) return i;
    return 0;
}

int32_t vq_sampler_sample(vq_sampler *s, const float *logits) {
    if (!s || !logits) return -1;
    const int n = s->n_vocab;
    logits = apply_penalty(s, logits);
    if (s->p.temperature <= 0.0f || s->p.top_k == 1) return argmax(logits, n);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(logits[i])) {
            s->c[m].logit = logits[i];
            s->c[m].id = i;
            m++;
        }
    if (m == 0) return 0;
    int k = s->p.top_k > 0 && s->p.top_k < m ? s->p.top_k : m;
    if (k < m) {
        /* min-heap (worst candidate at the root) of the k best: O(m log k) */
        struct cand *h = s->c;
        for (int i = k / 2 - 1; i >= 0; i--) sift_down(h, k, i);
        for (int j = k; j < m; j++)
            if (cand_cmp(&h[j], &h[0]) < 0) {
                h[0] = h[j];
                sift_down(h, k, 0);
            }
        m = k;
    }
    qsort(s->c, (size_t)m, sizeof *s->c, cand_cmp);
    /* softmax with temperature over the m sorted candidates */
    const float inv_t = 1.0f / s->p.temperature;
    const float mx = s->c[0].logit;
    double sum = 0;
    for (int i = 0; i < m; i++) {
        float e = isinf(mx) ? (s->c[i].logit == mx ? 1.0f : 0.0f)
                            : expf((s->c[i].logit - mx) * inv_t);
        s->prob[i] = e;
        sum += e;
    }
    /* nucleus: smallest prefix with mass >= top_p */
    if (s->p.top_p < 1.0f) {
        double acc = 0;
        int cut = m;
        for (int i = 0; i < m; i++) {
            acc += s->prob[i] / sum;
            if (acc >= s->p.top_p) {
                cut = i + 1;
                break;
            }
        }
        m = cut;
        sum = 0;
        for (int i = 0; i < m; i++) sum += s->prob[i];
    }
    /* min-p on the logits before temperature (llama.cpp): logit >= max + log(min_p); the
     * first candidate always stays */
    if (s->p.min_p > 0.0f && !isinf(mx)) {
        const float lo = mx + logf(s->p.min_p);
        int cut = 1;
        while (cut < m && s->c[cut].logit >= lo) cut++;
        if (cut < m) {
            m = cut;
            sum = 0;
            for (int i = 0; i < m; i++) sum += s->prob[i];
        }
    }
    double r = vq_rng_uniform(&s->rng) * sum, acc = 0;
    for (int i = 0; i < m; i++) {
        acc += s->prob[i];
        if (r < acc) return s->c[i].id;
    }
    return s->c[m - 1].id;
}
