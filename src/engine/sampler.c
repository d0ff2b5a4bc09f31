/*
 * sampler.c — next-token sampling: greedy, or temperature + top-k + top-p (nucleus) with a
 * seeded xoshiro256** stream. Buffers are allocated once at create.
 */
#include <math.h>
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
};

struct vq_sampler_params vq_sampler_params_default(void) {
    struct vq_sampler_params p = {0.0f, 40, 0.95f, 42};
    return p;
}

vq_sampler *vq_sampler_create(const struct vq_sampler_params *p, int n_vocab, vq_status *st) {
    struct vq_sampler_params d = vq_sampler_params_default();
    if (!p) p = &d;
    if (n_vocab < 1 || isnan(p->temperature) || p->top_k < 0 ||
        !(p->top_p > 0.0f && p->top_p <= 1.0f)) {
        if (st) *st = VQ_STATUS_INVALID_ARG;
        return NULL;
    }
    vq_sampler *s = calloc(1, sizeof *s);
    if (s) {
        s->c = malloc((size_t)n_vocab * sizeof *s->c);
        s->prob = malloc((size_t)n_vocab * sizeof *s->prob);
    }
    if (!s || !s->c || !s->prob) {
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
    free(s);
}

void vq_sampler_reseed(vq_sampler *s, uint64_t seed) {
    if (s) vq_rng_seed(&s->rng, seed);
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
    int32_t best = -1;
    for (int i = 0; i < n; i++)
        if (!isnan(logits[i]) && (best < 0 || logits[i] > logits[best])) best = i;
    return best < 0 ? 0 : best;
}

int32_t vq_sampler_sample(vq_sampler *s, const float *logits) {
    if (!s || !logits) return -1;
    const int n = s->n_vocab;
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
    double r = vq_rng_uniform(&s->rng) * sum, acc = 0;
    for (int i = 0; i < m; i++) {
        acc += s->prob[i];
        if (r < acc) return s->c[i].id;
    }
    return s->c[m - 1].id;
}
