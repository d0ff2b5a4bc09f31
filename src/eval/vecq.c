/*
 * vecq.c — codec reconstruction cosine on synthetic vectors (see vecq.h).
 */
#include "eval/vecq.h"

#include <math.h>
#include <stdlib.h>

#include "core/core.h"

vq_status vq_eval_codec_cosine(const struct vq_codec_params *p, int64_t n_tokens, int outliers,
                               uint64_t seed, double *cosine) {
    vq_status st;
    vq_codec *c = vq_codec_create(p, &st);
    if (!c) return st;
    const int d = p->head_dim;
    const int64_t bt = vq_codec_block_tokens(c);
    const int64_t n = (n_tokens + bt - 1) / bt * bt;
    float *x = malloc((size_t)(n * d) * sizeof *x), *y = malloc((size_t)(n * d) * sizeof *y);
    uint8_t *codes = malloc((size_t)(n / bt) * vq_codec_block_bytes(c));
    st = VQ_STATUS_NO_MEMORY;
    if (x && y && codes) {
        vq_rng r;
        vq_rng_seed(&r, seed);
        for (int64_t i = 0; i < n * d; i++)
            x[i] = (float)vq_rng_normal(&r) + (outliers && (i % d) % 16 == 3 ? 4.0f : 0.0f);
        st = vq_codec_encode(c, x, n, codes);
        if (st == VQ_STATUS_OK) st = vq_codec_decode(c, codes, n, y);
        if (st == VQ_STATUS_OK) {
            double sum = 0;
            for (int64_t t = 0; t < n; t++) {
                double xy = 0, xx = 0, yy = 0;
                for (int j = 0; j < d; j++) {
                    const double a = x[t * d + j], b = y[t * d + j];
                    xy += a * b;
                    xx += a * a;
                    yy += b * b;
                }
                sum += xx > 0 && yy > 0 ? xy / sqrt(xx * yy) : 0;
            }
            *cosine = sum / (double)n;
        }
    }
    free(codes);
    free(y);
    free(x);
    vq_codec_free(c);
    return st;
}
