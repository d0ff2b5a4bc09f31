/* multi_check.h — the multi-query contract of a codec (codecs/codec_impl.h): nq queries through
 * vq_codec_score_multi / vq_codec_accumulate_multi give each query exactly the bits of its own
 * vq_codec_score / vq_codec_accumulate call. Shared by the codec tests. */
#ifndef VQ_TEST_MULTI_CHECK_H
#define VQ_TEST_MULTI_CHECK_H
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "codecs/codec_impl.h"

/* Checks nq (1..4) random queries and weight vectors over the n tokens at codes (encoded by c;
 * head_dim d); returns the number of queries whose scores or accumulators differ. Queries and
 * weights come from rng. */
static inline int multi_check_bits(const vq_codec *c, const uint8_t *codes, int n, int d, int nq,
                                   vq_rng *rng) {
    void *qs[4];
    float *sc[4], *sm[4], *w[4], *a1[4], *am[4];
    const size_t af = vq_codec_acc_floats(c);
    for (int j = 0; j < nq; j++) {
        float q[1024];
        for (int i = 0; i < d; i++) q[i] = (float)vq_rng_normal(rng);
        qs[j] = vq_alloc(vq_codec_query_bytes(c));
        vq_codec_prepare_query(c, q, qs[j]);
        sc[j] = malloc(sizeof(float) * (size_t)n);
        sm[j] = malloc(sizeof(float) * (size_t)n);
        w[j] = malloc(sizeof(float) * (size_t)n);
        a1[j] = calloc(af, sizeof(float));
        am[j] = calloc(af, sizeof(float));
        for (int t = 0; t < n; t++) w[j][t] = (float)vq_rng_uniform(rng);
        vq_codec_score(c, qs[j], codes, n, sc[j]);
        vq_codec_accumulate(c, codes, n, w[j], a1[j]);
    }
    vq_codec_score_multi(c, (const void *const *)qs, nq, codes, n, sm);
    vq_codec_accumulate_multi(c, codes, n, (const float *const *)w, nq, am);
    int bad = 0;
    for (int j = 0; j < nq; j++) {
        bad += memcmp(sc[j], sm[j], sizeof(float) * (size_t)n) != 0 ||
               memcmp(a1[j], am[j], sizeof(float) * af) != 0;
        vq_free(qs[j]);
        free(sc[j]);
        free(sm[j]);
        free(w[j]);
        free(a1[j]);
        free(am[j]);
    }
    return bad;
}

#endif
