/* rng.c — seeded xoshiro256** (splitmix64 seeding); deterministic across platforms. */
#include <math.h>

#include "core/core.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Seeds r from a 64-bit seed (any value, 0 included). */
void vq_rng_seed(vq_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* Next 64 uniformly random bits. */
uint64_t vq_rng_u64(vq_rng *r) {
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

/* Uniform double in [0, 1) with 53 random bits. */
double vq_rng_uniform(vq_rng *r) { return (double)(vq_rng_u64(r) >> 11) * 0x1.0p-53; }

/* Standard normal sample (Box-Muller, one value per call; deterministic for a seed). */
double vq_rng_normal(vq_rng *r) {
    double u1 = vq_rng_uniform(r), u2 = vq_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}
