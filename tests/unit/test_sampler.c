/* test_sampler.c — the sampler's min-p and repetition penalty (llama.cpp semantics) on
 * synthetic logits: defaults, parameter checks, min-p cut relative to the best logit before
 * temperature, the penalty dividing positive and multiplying negative logits once per distinct
 * token of the last repeat_last_n accepted ones, greedy included; determinism for a seed. */
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vq_engine.h"

#define NV 8

static vq_sampler *mk(struct vq_sampler_params p) {
    vq_status st;
    vq_sampler *s = vq_sampler_create(&p, NV, &st);
    ASSERT(s != NULL);
    return s;
}

TEST(defaults_and_checks) {
    struct vq_sampler_params p = vq_sampler_params_default();
    ASSERT(p.temperature == 0.0f && p.top_k == 40 && p.seed == 42);
    ASSERT(p.min_p == 0.0f && p.repeat_penalty == 1.0f && p.repeat_last_n == 64);
    vq_status st;
    struct vq_sampler_params b = p;
    b.min_p = 1.5f;
    ASSERT(vq_sampler_create(&b, NV, &st) == NULL && st == VQ_STATUS_INVALID_ARG);
    b = p;
    b.min_p = -0.1f;
    ASSERT(vq_sampler_create(&b, NV, &st) == NULL);
    b = p;
    b.repeat_penalty = 0.0f;
    ASSERT(vq_sampler_create(&b, NV, &st) == NULL);
    b = p;
    b.repeat_penalty = INFINITY;
    ASSERT(vq_sampler_create(&b, NV, &st) == NULL);
    b = p;
    b.repeat_last_n = -1;
    ASSERT(vq_sampler_create(&b, NV, &st) == NULL);
}

/* min_p 0.5 keeps logits >= max + log 0.5: only token 0 of {0, -1, ...}; without it a hot
 * temperature draws others too. */
TEST(min_p_cut) {
    const float lg[NV] = {0.0f, -1.0f, -1.5f, -2.0f, -0.5f, -3.0f, -3.0f, -3.0f};
    struct vq_sampler_params p = vq_sampler_params_default();
    p.temperature = 2.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    vq_sampler *s = mk(p);
    int other = 0;
    for (int i = 0; i < 200; i++) other += vq_sampler_sample(s, lg) != 0;
    ASSERT(other > 50);
    vq_sampler_free(s);
    p.min_p = 0.5f; /* threshold -0.693: tokens 0 and 4 */
    s = mk(p);
    int seen[NV] = {0};
    for (int i = 0; i < 400; i++) seen[vq_sampler_sample(s, lg)]++;
    ASSERT(seen[0] > 0 && seen[4] > 0);
    ASSERT_EQ_INT(seen[0] + seen[4], 400);
    vq_sampler_free(s);
    p.min_p = 1.0f; /* only the best */
    s = mk(p);
    for (int i = 0; i < 50; i++) ASSERT_EQ_INT(vq_sampler_sample(s, lg), 0);
    vq_sampler_free(s);
}

TEST(repeat_penalty_greedy) {
    struct vq_sampler_params p = vq_sampler_params_default();
    p.repeat_penalty = 1.1f;
    p.repeat_last_n = 4;
    float lg[NV] = {2.0f, 1.9f, 1.0f, 0.0f, -1.0f, -1.05f, -5.0f, -5.0f};
    vq_sampler *s = mk(p);
    ASSERT_EQ_INT(vq_sampler_sample(s, lg), 0); /* nothing accepted yet */
    vq_sampler_accept(s, 0);
    ASSERT_EQ_INT(vq_sampler_sample(s, lg), 1); /* 2.0 / 1.1 = 1.82 < 1.9 */
    ASSERT(lg[0] == 2.0f);                      /* the caller's logits are not modified */
    /* a token accepted three times is penalized once: 2.0 / 1.1 > 1.7 */
    float l2[NV] = {2.0f, 1.7f, 0, 0, 0, 0, 0, 0};
    vq_sampler_accept(s, 0);
    vq_sampler_accept(s, 0);
    ASSERT_EQ_INT(vq_sampler_sample(s, l2), 0);
    /* out of the window of 4: no penalty any more */
    for (int i = 0; i < 4; i++) vq_sampler_accept(s, 7);
    ASSERT_EQ_INT(vq_sampler_sample(s, lg), 0);
    vq_sampler_free(s);
    /* negative logits are multiplied: -1 * 1.1 = -1.1 < -1.05 */
    float l3[NV] = {-1.0f, -1.05f, -9, -9, -9, -9, -9, -9};
    s = mk(p);
    vq_sampler_accept(s, 0);
    ASSERT_EQ_INT(vq_sampler_sample(s, l3), 1);
    vq_sampler_free(s);
    /* off (penalty 1 or window 0): accept is a no-op */
    p.repeat_last_n = 0;
    s = mk(p);
    vq_sampler_accept(s, 0);
    ASSERT_EQ_INT(vq_sampler_sample(s, lg), 0);
    vq_sampler_free(s);
}

/* The same seed and the same accepted tokens give the same draws. */
TEST(deterministic_with_penalty) {
    const float lg[NV] = {1.0f, 0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.4f, 0.3f};
    struct vq_sampler_params p = vq_sampler_params_default();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.3f;
    p.seed = 7;
    int32_t a[64], b[64];
    for (int k = 0; k < 2; k++) {
        vq_sampler *s = mk(p);
        for (int i = 0; i < 64; i++) {
            int32_t t = vq_sampler_sample(s, lg);
            vq_sampler_accept(s, t);
            (k ? b : a)[i] = t;
        }
        vq_sampler_free(s);
    }
    ASSERT(!memcmp(a, b, sizeof a));
}

/* Greedy picks the first largest logit, skips NaN, and gives 0 when every logit is NaN: the
 * one-pass scan below on random vectors with ties, NaN and infinities, odd sizes. */
static int32_t scan_argmax(const float *x, int n) {
    int32_t best = -1;
    for (int i = 0; i < n; i++)
        if (!isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
    return best < 0 ? 0 : best;
}

TEST(greedy_first_max) {
    uint64_t r = 0x9E3779B97F4A7C15u;
    float x[1003];
    for (int iter = 0; iter < 300; iter++) {
        const int n = 1 + iter * 1002 / 299;
        for (int i = 0; i < n; i++) {
            r = r * 6364136223846793005u + 1442695040888963407u;
            const int u = (int)(r >> 59); /* 0..31 */
            x[i] = u == 0                  ? NAN
                 : u == 1                  ? -INFINITY
                 : u == 2 && iter % 7 == 0 ? INFINITY
                                           : (float)(u % 9);
        }
        if (iter % 50 == 3)
            for (int i = 0; i < n; i++) x[i] = NAN;
        if (iter % 50 == 4)
            for (int i = 0; i < n; i++) x[i] = i % 2 ? NAN : -INFINITY;
        struct vq_sampler_params p = vq_sampler_params_default();
        vq_status st;
        vq_sampler *s = vq_sampler_create(&p, n, &st);
        ASSERT(s != NULL);
        ASSERT_EQ_INT(vq_sampler_sample(s, x), scan_argmax(x, n));
        vq_sampler_free(s);
    }
}

int main(void) {
    RUN(defaults_and_checks);
    RUN(min_p_cut);
    RUN(repeat_penalty_greedy);
    RUN(deterministic_with_penalty);
    RUN(greedy_first_max);
    return TEST_REPORT();
}
