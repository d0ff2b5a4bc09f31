/* test_core_lloyd.c — Lloyd-Max codebooks against the tables of docs/ALGORITHMS.md §2.2 (N(0,1)),
 * §2.3 (Laplace scale 1) and §2.4 (rotated unit-vector coordinates, sqrt(d)-scaled), to 1e-5;
 * symmetry, ascending order, midpoint boundaries, MSE values and argument checks; N(0,1) at
 * 5..8 bits: every centroid is the mean of its cell (the Lloyd-Max fixed point) and the MSE
 * equals the plain-Python reference (scripts/golden/core_reference.py gauss_newton). */
#include "test.h"
#include "core/core.h"

/* positive halves */
static const double GAUSS[5][8] = {
    {0},
    {0.797885},
    {0.452780, 1.510418},
    {0.245094, 0.756005, 1.343909, 2.151946},
    {0.128395, 0.388048, 0.656759, 0.942340, 1.256231, 1.618046, 2.069017, 2.732590},
};
static const double GAUSS_MSE[9] = {0,         0.363380,  0.117482,   0.034548,  0.009501,
                                    0.0025047, 6.4424e-4, 1.63478e-4, 4.11851e-5};
static const double LAPLACE[5][8] = {
    {0},
    {1.000000},
    {0.593624, 2.593624},
    {0.330079, 1.177986, 2.365234, 4.365234},
    {0.175343, 0.572529, 1.030467, 1.571169, 2.231326, 3.079233, 4.266482, 6.266482},
};
static const double LAPLACE_B4_BOUNDS[7] = {0.373936, 0.801498, 1.300818, 1.901247,
                                            2.655280, 3.672858, 5.266482};
static const int SPH_D[5] = {64, 80, 96, 128, 256};
static const double SPHERE[5][5][8] = {
    {{0},
     {0.80101},
     {0.45212, 1.49997},
     {0.24375, 0.75066, 1.32934, 2.11131},
     {0.12735, 0.38472, 0.65049, 0.93189, 1.23940, 1.59085, 2.02331, 2.64637}},
    {{0},
     {0.80038},
     {0.45225, 1.50206},
     {0.24402, 0.75173, 1.33224, 2.11934},
     {0.12756, 0.38538, 0.65174, 0.93397, 1.24274, 1.59622, 2.03230, 2.66322}},
    {{0},
     {0.79997},
     {0.45234, 1.50345},
     {0.24420, 0.75244, 1.33417, 2.12472},
     {0.12770, 0.38583, 0.65258, 0.93536, 1.24497, 1.59982, 2.03833, 2.67456}},
    {{0},
     {0.79944},
     {0.45245, 1.50519},
     {0.24442, 0.75333, 1.33660, 2.13147},
     {0.12787, 0.38638, 0.65362, 0.93710, 1.24777, 1.60434, 2.04593, 2.68886}},
    {{0},
     {0.79866},
     {0.45262, 1.50780},
     {0.24476, 0.75467, 1.34025, 2.14167},
     {0.12813, 0.38721, 0.65519, 0.93971, 1.25199, 1.61117, 2.05741, 2.71057}},
};

static void check_shape(const float *c, const float *t, int L) {
    for (int i = 0; i < L; i++) ASSERT_NEAR(c[i], -c[L - 1 - i], 1e-7);
    for (int i = 0; i + 1 < L; i++) {
        ASSERT(c[i] < c[i + 1]);
        ASSERT_NEAR(t[i], 0.5 * ((double)c[i] + c[i + 1]), 1e-6);
    }
    ASSERT_NEAR(t[L / 2 - 1], 0.0, 0);
}

TEST(gauss_tables) {
    for (int b = 1; b <= 4; b++) {
        const float *c, *t;
        ASSERT_STATUS(vq_lloyd_max(VQ_LAW_GAUSS, b, 0, &c, &t), VQ_STATUS_OK);
        int L = 1 << b, h = L / 2;
        for (int i = 0; i < h; i++) ASSERT_NEAR(c[h + i], GAUSS[b][i], 1e-5);
        check_shape(c, t, L);
        /* MSE by direct integration: D = 1 - sum c_i^2 P_i */
        double s = 0.0;
        for (int i = 0; i < L; i++) {
            double a = i == 0 ? -INFINITY : t[i - 1], z = i == L - 1 ? INFINITY : t[i];
            double P = 0.5 * (erfc(-z / sqrt(2.0)) - erfc(-a / sqrt(2.0)));
            s += (double)c[i] * c[i] * P;
        }
        ASSERT_NEAR(1.0 - s, GAUSS_MSE[b], 1e-5);
    }
    for (int b = 5; b <= 8; b++) {
        const float *c, *t;
        ASSERT_STATUS(vq_lloyd_max(VQ_LAW_GAUSS, b, 0, &c, &t), VQ_STATUS_OK);
        const int L = 1 << b;
        check_shape(c, t, L);
        double s = 0.0, worst = 0.0;
        for (int i = 0; i < L; i++) {
            const double a = i == 0 ? -INFINITY : t[i - 1], z = i == L - 1 ? INFINITY : t[i];
            const double P = 0.5 * (erfc(-z / sqrt(2.0)) - erfc(-a / sqrt(2.0)));
            const double pa = isinf(a) ? 0.0 : exp(-0.5 * a * a),
                         pz = isinf(z) ? 0.0 : exp(-0.5 * z * z);
            const double mean = (pa - pz) / sqrt(2.0 * M_PI) / P;
            worst = fmax(worst, fabs(mean - c[i]));
            s += (double)c[i] * c[i] * P;
        }
        fprintf(stderr, "  gauss b=%d: max |centroid - cell mean| %.2e, MSE %.6e\n", b, worst,
                1.0 - s);
        ASSERT(worst < 2e-6); /* float tables: rounding of c and t */
        ASSERT_NEAR((1.0 - s) / GAUSS_MSE[b], 1.0, 1e-3);
    }
}

TEST(laplace_tables) {
    for (int b = 1; b <= 4; b++) {
        const float *c, *t;
        ASSERT_STATUS(vq_lloyd_max(VQ_LAW_LAPLACE, b, 0, &c, &t), VQ_STATUS_OK);
        int L = 1 << b, h = L / 2;
        for (int i = 0; i < h; i++) ASSERT_NEAR(c[h + i], LAPLACE[b][i], 1e-5);
        check_shape(c, t, L);
        /* outer cell of a Laplace quantizer is exactly boundary + 1 */
        if (b > 1) ASSERT_NEAR(c[L - 1], t[L - 2] + 1.0, 1e-5);
    }
    const float *c, *t;
    ASSERT_STATUS(vq_lloyd_max(VQ_LAW_LAPLACE, 4, 0, &c, &t), VQ_STATUS_OK);
    for (int i = 0; i < 7; i++) ASSERT_NEAR(t[8 + i], LAPLACE_B4_BOUNDS[i], 1e-5);
}

TEST(sphere_tables) {
    for (int k = 0; k < 5; k++) {
        for (int b = 1; b <= 4; b++) {
            const float *c, *t;
            ASSERT_STATUS(vq_lloyd_max(VQ_LAW_SPHERE, b, SPH_D[k], &c, &t), VQ_STATUS_OK);
            int L = 1 << b, h = L / 2;
            for (int i = 0; i < h; i++) ASSERT_NEAR(c[h + i], SPHERE[k][b][i], 1e-5);
            check_shape(c, t, L);
        }
    }
    /* cached: same pointer on the second call */
    const float *c1, *c2;
    ASSERT_STATUS(vq_lloyd_max(VQ_LAW_SPHERE, 3, 128, &c1, NULL), VQ_STATUS_OK);
    ASSERT_STATUS(vq_lloyd_max(VQ_LAW_SPHERE, 3, 128, &c2, NULL), VQ_STATUS_OK);
    ASSERT(c1 == c2);
    /* d = 3: the coordinate is uniform on [-1, 1]; 1-bit centroid sqrt(3) * 0.5 */
    ASSERT_STATUS(vq_lloyd_max(VQ_LAW_SPHERE, 1, 3, &c1, NULL), VQ_STATUS_OK);
    ASSERT_NEAR(c1[1], sqrt(3.0) * 0.5, 1e-5);
}

TEST(bad_args) {
    const float *c, *t;
    ASSERT_STATUS(vq_lloyd_max(VQ_LAW_GAUSS, 0, 0, &c, &t), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_lloyd_max(VQ_LAW_GAUSS, 9, 0, &c, &t), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_lloyd_max(VQ_LAW_LAPLACE, 7, 0, &c, &t), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_lloyd_max(VQ_LAW_SPHERE, 5, 128, &c, &t), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_lloyd_max(VQ_LAW_SPHERE, 2, 2, &c, &t), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_lloyd_max((enum vq_law)9, 2, 0, &c, &t), VQ_STATUS_INVALID_ARG);
}

TEST(encode_index) {
    const float *c, *t;
    ASSERT_STATUS(vq_lloyd_max(VQ_LAW_GAUSS, 2, 0, &c, &t), VQ_STATUS_OK);
    ASSERT_EQ_INT(vq_lm_encode(-5.0f, t, 3), 0);
    ASSERT_EQ_INT(vq_lm_encode(-0.5f, t, 3), 1);
    ASSERT_EQ_INT(vq_lm_encode(0.0f, t, 3), 1); /* strictly below: tie at 0 goes down */
    ASSERT_EQ_INT(vq_lm_encode(0.5f, t, 3), 2);
    ASSERT_EQ_INT(vq_lm_encode(5.0f, t, 3), 3);
}

int main(void) {
    RUN(gauss_tables);
    RUN(laplace_tables);
    RUN(sphere_tables);
    RUN(bad_args);
    RUN(encode_index);
    return TEST_REPORT();
}
