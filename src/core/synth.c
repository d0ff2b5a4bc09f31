/* synth.c — the synthetic vectors of `veloxquant bench` (veloxquant.h "Synthetic vectors"): a
 * xorshift64 stream with Box-Muller normals. The exact sequence is the contract. */
#include <math.h>

#include "veloxquant.h"

void vq_synth_seed(vq_synth *g, uint64_t seed) { g->state = seed * 0x9E3779B97F4A7C15ull + 1; }

static double synth_u(vq_synth *g) {
    uint64_t s = g->state;
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    g->state = s;
    return ((double)(s >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static float synth_n(vq_synth *g) {
    const double u1 = synth_u(g), u2 = synth_u(g);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void vq_synth_normal(vq_synth *g, float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = synth_n(g);
}

void vq_synth_keys(vq_synth *g, float *x, int64_t n, int d) {
    const int period = d / 4 > 0 ? d / 4 : 1;
    for (int64_t t = 0; t < n; t++)
        for (int j = 0; j < d; j++) x[t * d + j] = synth_n(g) + (j % period == 3 ? 4.0f : 0.0f);
}
