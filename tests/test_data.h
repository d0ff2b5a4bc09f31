/* test_data.h — the unit tests' deterministic random numbers and a comparison: xorshift64
 * uniforms (urand, in [0, 1)), Box-Muller normals (nrand, N(0, 1)) and the relative L2 error
 * rel_l2. A test picks its seed by defining VQ_TEST_SEED before including this header
 * (default 0x2545F4914F6CDD1D) and may reseed rng_ at any time; the sequence is the same on
 * every machine. One test thread only. */
#ifndef VQ_TEST_DATA_H
#define VQ_TEST_DATA_H

#include <math.h>
#include <stdint.h>

#ifndef VQ_TEST_SEED
#define VQ_TEST_SEED 0x2545F4914F6CDD1Dull
#endif

static uint64_t rng_ = VQ_TEST_SEED;

static inline double urand(void) {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return (double)(rng_ >> 11) / 9007199254740992.0;
}

static inline float nrand(void) {
    double u1 = urand(), u2 = urand();
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ||a - b|| / ||b|| over n floats (b = 0: ||a|| / 1e-15). */
static inline double rel_l2(const float *a, const float *b, int64_t n) {
    double e = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return sqrt(e / (r + 1e-30));
}

#endif
