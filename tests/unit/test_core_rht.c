/* test_core_rht.c — randomized Hadamard rotation: kind selection, orthogonality (R R^T = I
 * built column by column), norm preservation, inverse, in-place use, the power-of-two case
 * against the explicit Sylvester matrix, the Paley matrices H_K H_K^T = K I, determinism. */
#include "test.h"
#include "core/core.h"

static const int DIMS[] = {8,   16,  24,  40,  48,  56,  64,  72,  80,  96,  104, 112,  120,
                           128, 136, 160, 192, 200, 224, 256, 320, 384, 448, 512, 1016, 1024};

TEST(kinds) {
    vq_rht r;
    struct {
        int d, kind, K;
    } cases[] = {{128, 0, 1},  {64, 0, 1},  {96, 1, 12}, {80, 1, 20}, {112, 1, 28}, {160, 1, 20},
                 {192, 1, 12}, {24, 1, 12}, {72, 2, 0},  {104, 2, 0}, {1016, 2, 0}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ASSERT_STATUS(vq_rht_init(&r, cases[i].d, 1), VQ_STATUS_OK);
        ASSERT_EQ_INT(r.kind, cases[i].kind);
        if (cases[i].kind == 1) ASSERT_EQ_INT(r.K, cases[i].K);
        vq_rht_free(&r);
    }
    ASSERT_STATUS(vq_rht_init(&r, 0, 1), VQ_STATUS_INVALID_ARG);
    vq_rht_free(&r);
    ASSERT_STATUS(vq_rht_init(&r, 5000, 1), VQ_STATUS_INVALID_ARG);
    vq_rht_free(&r);
}

TEST(paley_hadamard) {
    int ds[3] = {12 * 4, 20 * 4, 28 * 4};
    for (int k = 0; k < 3; k++) {
        vq_rht r;
        ASSERT_STATUS(vq_rht_init(&r, ds[k], 3), VQ_STATUS_OK);
        int K = r.K, bad = 0;
        for (int i = 0; i < K; i++)
            for (int j = 0; j < K; j++) {
                double s = 0;
                for (int m = 0; m < K; m++) s += r.hk[i * K + m] * r.hk[j * K + m];
                if (s != (i == j ? K : 0)) bad++;
                if (fabsf(r.hk[i * K + j]) != 1.0f) bad++;
            }
        ASSERT_EQ_INT(bad, 0);
        vq_rht_free(&r);
    }
}

TEST(orthogonal_all_dims) {
    static float M[1024 * 1024];
    float x[1024], y[1024], z[1024];
    for (size_t k = 0; k < sizeof(DIMS) / sizeof(DIMS[0]); k++) {
        int d = DIMS[k];
        vq_rht r;
        ASSERT_STATUS(vq_rht_init(&r, d, 1234 + (uint64_t)d), VQ_STATUS_OK);
        /* columns R e_j */
        for (int j = 0; j < d; j++) {
            for (int i = 0; i < d; i++) x[i] = i == j ? 1.0f : 0.0f;
            vq_rht_forward(&r, x, M + (size_t)j * d);
        }
        double worst = 0.0;
        int step = d > 256 ? 7 : 1; /* sample pairs for large d */
        for (int a = 0; a < d; a += step)
            for (int b = 0; b < d; b++) {
                double s = 0;
                for (int i = 0; i < d; i++)
                    s += (double)M[(size_t)a * d + i] * M[(size_t)b * d + i];
                worst = fmax(worst, fabs(s - (a == b)));
            }
        ASSERT_LE(worst, 1e-5);
        /* inverse and in-place, random vector */
        vq_rng g;
        vq_rng_seed(&g, (uint64_t)d);
        double n0 = 0, n1 = 0;
        for (int i = 0; i < d; i++) {
            x[i] = (float)vq_rng_normal(&g);
            n0 += (double)x[i] * x[i];
        }
        vq_rht_forward(&r, x, y);
        for (int i = 0; i < d; i++) n1 += (double)y[i] * y[i];
        ASSERT_NEAR(n1 / n0, 1.0, 1e-5);
        vq_rht_inverse(&r, y, z);
        double e = 0;
        for (int i = 0; i < d; i++) e = fmax(e, fabs(z[i] - x[i]));
        ASSERT_LE(e, 1e-5);
        for (int i = 0; i < d; i++) z[i] = x[i];
        vq_rht_forward(&r, z, z);
        for (int i = 0; i < d; i++) ASSERT_NEAR(z[i], y[i], 0);
        vq_rht_inverse(&r, z, z);
        e = 0;
        for (int i = 0; i < d; i++) e = fmax(e, fabs(z[i] - x[i]));
        ASSERT_LE(e, 1e-5);
        /* inverse is the transpose: R^T y against the matrix */
        for (int i = 0; i < d; i++) {
            double s = 0;
            for (int j = 0; j < d; j++) s += (double)M[(size_t)i * d + j] * y[j];
            ASSERT_NEAR(s, x[i], 1e-4);
        }
        vq_rht_free(&r);
    }
}

TEST(pow2_matches_sylvester) {
    int d = 64;
    vq_rht r;
    ASSERT_STATUS(vq_rht_init(&r, d, 77), VQ_STATUS_OK);
    float x[64], y[64];
    vq_rng g;
    vq_rng_seed(&g, 5);
    for (int i = 0; i < d; i++) x[i] = (float)vq_rng_normal(&g);
    vq_rht_forward(&r, x, y);
    for (int i = 0; i < d; i++) {
        double s = 0;
        for (int j = 0; j < d; j++)
            s += (__builtin_popcount((unsigned)(i & j)) & 1 ? -1.0 : 1.0) * r.signs[j] * x[j];
        ASSERT_NEAR(y[i], s / 8.0, 1e-5);
    }
    vq_rht_free(&r);
}

TEST(seeded) {
    vq_rht a, b, c;
    ASSERT_STATUS(vq_rht_init(&a, 96, 42), VQ_STATUS_OK);
    ASSERT_STATUS(vq_rht_init(&b, 96, 42), VQ_STATUS_OK);
    ASSERT_STATUS(vq_rht_init(&c, 96, 43), VQ_STATUS_OK);
    ASSERT(memcmp(a.signs, b.signs, 96 * sizeof(float)) == 0);
    ASSERT(memcmp(a.signs, c.signs, 96 * sizeof(float)) != 0);
    vq_rht_free(&a);
    vq_rht_free(&b);
    vq_rht_free(&c);
    /* rng: deterministic, uniform in [0,1), normal moments */
    vq_rng g, h;
    vq_rng_seed(&g, 9);
    vq_rng_seed(&h, 9);
    ASSERT(vq_rng_u64(&g) == vq_rng_u64(&h));
    double m = 0, v = 0;
    for (int i = 0; i < 100000; i++) {
        double u = vq_rng_uniform(&g);
        ASSERT(u >= 0.0 && u < 1.0);
        double z = vq_rng_normal(&g);
        m += z;
        v += z * z;
    }
    ASSERT_NEAR(m / 1e5, 0.0, 0.02);
    ASSERT_NEAR(v / 1e5, 1.0, 0.03);
}

TEST(fwht_small) {
    float v[4] = {1, 2, 3, 4};
    vq_fwht(v, 4);
    ASSERT_NEAR(v[0], 10, 0);
    ASSERT_NEAR(v[1], -2, 0);
    ASSERT_NEAR(v[2], -4, 0);
    ASSERT_NEAR(v[3], 0, 0);
    float w[2] = {1, 3};
    vq_fwht(w, 2);
    ASSERT_NEAR(w[0], 4, 0);
    ASSERT_NEAR(w[1], -2, 0);
}

int main(void) {
    RUN(kinds);
    RUN(paley_hadamard);
    RUN(orthogonal_all_dims);
    RUN(pow2_matches_sylvester);
    RUN(seeded);
    RUN(fwht_small);
    return TEST_REPORT();
}
