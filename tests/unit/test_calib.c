/* test_calib.c — calibration numerics: k-means recovers planted clusters (deterministic,
 * empty-cluster reseeding), Jacobi PCA of known covariances, participation ratio,
 * RateQuant allocation (budget, ordering, clamping, beta fit), VecInfer smoothing invariance
 * of q.k, and the fit_* entry points. */
#include "test.h"
#include "veloxquant.h"
#include "calib/calib.h"

static vq_rng rng_;
static float nrand(void) { return (float)vq_rng_normal(&rng_); }

TEST(kmeans_planted_clusters) {
    vq_rng_seed(&rng_, 1);
    enum { K = 8, DIM = 4, PER = 200 };
    float centers[K][DIM];
    for (int c = 0; c < K; c++)
        for (int j = 0; j < DIM; j++) centers[c][j] = 10.0f * nrand();
    static float x[K * PER * DIM];
    int truth[K * PER];
    for (int i = 0; i < K * PER; i++) {
        const int c = (i * 7 + i / 13) % K; /* interleaved labels */
        truth[i] = c;
        for (int j = 0; j < DIM; j++) x[i * DIM + j] = centers[c][j] + 0.1f * nrand();
    }
    float cb[K * DIM], cb2[K * DIM];
    static int32_t as[K * PER];
    /* several seeds: Lloyd with random init may merge clusters for an unlucky seed; the
     * planted solution must be found for most and every run must be deterministic */
    int found = 0;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        ASSERT_STATUS(vq_kmeans(x, K * PER, DIM, K, 30, seed, cb, as), VQ_STATUS_OK);
        ASSERT_STATUS(vq_kmeans(x, K * PER, DIM, K, 30, seed, cb2, NULL), VQ_STATUS_OK);
        ASSERT(memcmp(cb, cb2, sizeof cb) == 0);
        /* every planted center has a centroid within 0.1, and labels are a bijection */
        int ok = 1, map[K];
        for (int c = 0; c < K; c++) {
            map[c] = -1;
            for (int i = 0; i < K; i++) {
                float dd = 0;
                for (int j = 0; j < DIM; j++)
                    dd += (cb[i * DIM + j] - centers[c][j]) * (cb[i * DIM + j] - centers[c][j]);
                if (dd < 0.01f) map[c] = i;
            }
            if (map[c] < 0) ok = 0;
        }
        if (ok)
            for (int i = 0; i < K * PER; i++)
                if (as[i] != map[truth[i]]) ok = 0;
        found += ok;
    }
    ASSERT_GE(found, 5);
}

/* The transposed, blocked nearest-centroid search of vq_kmeans returns exactly the scalar
 * reference's index: random points and codebooks of odd and block-edge sizes, and exact ties
 * (duplicated centroids: the lowest index wins in both). */
TEST(nearest_centroid_transposed_matches_ref) {
    static const int ks[] = {1, 7, 63, 64, 65, 200, 4096};
    static const int dims[] = {1, 3, 8, 16};
    vq_rng rng;
    vq_rng_seed(&rng, 7);
    for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++) {
        for (size_t b = 0; b < sizeof dims / sizeof dims[0]; b++) {
            const int k = ks[a], dim = dims[b];
            float *c = malloc(sizeof(float) * (size_t)k * dim),
                  *ct = malloc(sizeof(float) * (size_t)k * dim);
            float *cn = malloc(sizeof(float) * (size_t)k), p[16];
            for (int i = 0; i < k * dim; i++) c[i] = (float)vq_rng_normal(&rng);
            for (int i = 1; i < k; i += 5) /* duplicates: ties */
                memcpy(c + (size_t)i * dim, c + (size_t)(i - 1) * dim, sizeof(float) * (size_t)dim);
            for (int i = 0; i < k; i++) {
                float s = 0.0f;
                for (int j = 0; j < dim; j++) s += c[i * dim + j] * c[i * dim + j];
                cn[i] = s;
                for (int j = 0; j < dim; j++) ct[(size_t)j * k + i] = c[i * dim + j];
            }
            int mism = 0;
            for (int t = 0; t < 200; t++) {
                for (int j = 0; j < dim; j++)
                    p[j] = t % 3 ? (float)vq_rng_normal(&rng)
                                 : c[(t % k) * dim + j]; /* on a centroid */
                mism += vq_nearest_centroid_t(p, ct, cn, k, dim) !=
                        vq_nearest_centroid(p, c, cn, k, dim);
            }
            ASSERT_EQ_INT(mism, 0);
            free(c);
            free(ct);
            free(cn);
        }
    }
}

TEST(kmeans_reseeds_empty_and_validates) {
    /* 40 points, only 11 distinct, k = 12: some cluster is necessarily empty after the first
     * assignment and must be reseeded; every distinct point still ends up a centroid */
    enum { N = 40, K = 12 };
    float x[N * 2];
    for (int i = 0; i < N; i++) {
        x[2 * i] = i < 30 ? 0.0f : (float)(i - 29);
        x[2 * i + 1] = i < 30 ? 0.0f : 1.0f;
    }
    float cb[K * 2];
    int32_t as[N];
    ASSERT_STATUS(vq_kmeans(x, N, 2, K, 30, 5, cb, as), VQ_STATUS_OK);
    int hit = 0;
    for (int p = 29; p < N; p++) {
        for (int i = 0; i < K; i++)
            if (cb[2 * i] == x[2 * p] && cb[2 * i + 1] == x[2 * p + 1]) {
                hit++;
                break;
            }
    }
    ASSERT_EQ_INT(hit, 11); /* the 10 distinct outer points and the origin */
    ASSERT_STATUS(vq_kmeans(x, 5, 2, 6, 30, 1, cb, NULL), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_kmeans(NULL, 5, 2, 2, 30, 1, cb, NULL), VQ_STATUS_INVALID_ARG);
    x[7] = NAN;
    ASSERT_STATUS(vq_kmeans(x, N, 2, 4, 30, 1, cb, NULL), VQ_STATUS_NON_FINITE);
}

TEST(jacobi_known_covariance) {
    /* A = Q diag(l) Q^T with Q a random orthogonal matrix (Gram-Schmidt) */
    enum { D = 24 };
    vq_rng_seed(&rng_, 2);
    static double Q[D * D], A[D * D], ev[D], V[D * D];
    double l[D];
    for (int i = 0; i < D; i++) l[i] = 100.0 / (1.0 + i * i);
    for (int j = 0; j < D; j++) {
        for (int i = 0; i < D; i++) Q[i * D + j] = nrand();
        for (int p = 0; p < j; p++) {
            double dot = 0;
            for (int i = 0; i < D; i++) dot += Q[i * D + j] * Q[i * D + p];
            for (int i = 0; i < D; i++) Q[i * D + j] -= dot * Q[i * D + p];
        }
        double nn = 0;
        for (int i = 0; i < D; i++) nn += Q[i * D + j] * Q[i * D + j];
        for (int i = 0; i < D; i++) Q[i * D + j] /= sqrt(nn);
    }
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++) {
            double s = 0;
            for (int k = 0; k < D; k++) s += Q[i * D + k] * l[k] * Q[j * D + k];
            A[i * D + j] = s;
        }
    ASSERT_STATUS(vq_sym_eig(A, D, ev, V), VQ_STATUS_OK);
    for (int j = 0; j < D; j++) {
        ASSERT_NEAR(ev[j], l[j], 1e-9 * l[0]);
        double dot = 0; /* |<v_j, q_j>| = 1 */
        for (int i = 0; i < D; i++) dot += V[i * D + j] * Q[i * D + j];
        ASSERT_NEAR(fabs(dot), 1.0, 1e-8);
    }
    /* orthonormal columns */
    double worst = 0;
    for (int a = 0; a < D; a++)
        for (int b = 0; b < D; b++) {
            double s = 0;
            for (int i = 0; i < D; i++) s += V[i * D + a] * V[i * D + b];
            worst = fmax(worst, fabs(s - (a == b)));
        }
    ASSERT_LE(worst, 1e-12);
    const double pr = vq_participation_ratio(l, D);
    double s = 0, s2 = 0;
    for (int i = 0; i < D; i++) {
        s += l[i];
        s2 += l[i] * l[i];
    }
    ASSERT_NEAR(pr, s * s / s2, 1e-12);
    double flat[5] = {2, 2, 2, 2, 2};
    ASSERT_NEAR(vq_participation_ratio(flat, 5), 5.0, 1e-12);
}

TEST(fit_spectral_recovers_subspace) {
    /* samples x = sum_k sqrt(l_k) z_k e_{pi(k)} with a dominant 3-dim subspace */
    enum { D = 32, N = 4000 };
    vq_rng_seed(&rng_, 3);
    static float x[N * D];
    const int dirs[3] = {5, 17, 30};
    for (int t = 0; t < N; t++) {
        for (int c = 0; c < D; c++) x[t * D + c] = 0.05f * nrand();
        x[t * D + dirs[0]] += 10.0f * nrand();
        x[t * D + dirs[1]] += 6.0f * nrand();
        x[t * D + dirs[2]] += 3.0f * nrand();
    }
    vq_status st;
    vq_calib_data *cd = vq_calib_data_create(2, D, &st);
    ASSERT(cd != NULL);
    if (!cd) return;
    ASSERT_STATUS(vq_calib_fit_spectral(cd, 1, VQ_ROLE_KEY, x, N), VQ_STATUS_OK);
    const struct vq_calib_lr *e = vq_calib_get(cd, 1, VQ_ROLE_KEY);
    ASSERT(e && e->pca_u && e->pca_lambda);
    if (!e || !e->pca_u) {
        vq_calib_data_free(cd);
        return;
    }
    ASSERT_NEAR(e->pca_lambda[0], 100.0, 6.0);
    ASSERT_NEAR(e->pca_lambda[1], 36.0, 3.0);
    ASSERT_NEAR(e->pca_lambda[2], 9.0, 1.0);
    ASSERT_LE(e->pca_lambda[3], 0.01);
    for (int k = 0; k < 3; k++) ASSERT_GE(fabs(e->pca_u[dirs[k] * D + k]), 0.999);
    /* PR = (145.1)^2 / (100^2 + 36^2 + 9^2) = 1.86 -> d_s = 2 */
    ASSERT_EQ_INT(e->pca_ds, 2);
    ASSERT(vq_calib_get(cd, 0, VQ_ROLE_KEY)->pca_u == NULL);
    ASSERT(vq_calib_get(cd, 2, VQ_ROLE_KEY) == NULL);
    ASSERT_STATUS(vq_calib_fit_spectral(cd, 2, VQ_ROLE_KEY, x, N), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_calib_fit_spectral(cd, 0, VQ_ROLE_KEY, x, 1), VQ_STATUS_INVALID_ARG);
    vq_calib_data_free(cd);
}

TEST(ratequant_allocation) {
    const int allowed[4] = {1, 2, 3, 4};
    double w[30];
    int bits[30];
    vq_rng_seed(&rng_, 4);
    for (int i = 0; i < 30; i++) w[i] = exp(1.5 * nrand());
    const double avgs[] = {1.0, 1.5, 2.0, 2.37, 3.0, 4.0};
    for (size_t a = 0; a < sizeof avgs / sizeof *avgs; a++) {
        ASSERT_STATUS(vq_ratequant_allocate(w, 30, avgs[a], allowed, 4, 3.5, bits), VQ_STATUS_OK);
        long sum = 0;
        for (int i = 0; i < 30; i++) {
            sum += bits[i];
            ASSERT(bits[i] >= 1 && bits[i] <= 4);
            for (int j = 0; j < 30; j++)
                if (w[i] > w[j]) ASSERT(bits[i] >= bits[j]);
        }
        ASSERT_EQ_INT(sum, llround(30 * avgs[a]));
    }
    /* closed form exactly on the grid: w ratio beta^k -> k bits apart */
    double w3[3] = {1.0, 4.0, 16.0};
    ASSERT_STATUS(vq_ratequant_allocate(w3, 3, 2.0, allowed, 4, 4.0, bits), VQ_STATUS_OK);
    ASSERT_EQ_INT(bits[0], 1);
    ASSERT_EQ_INT(bits[1], 2);
    ASSERT_EQ_INT(bits[2], 3);
    /* equal sensitivities, fractional average: the extra bits go to the lowest indices */
    double we[4] = {1, 1, 1, 1};
    ASSERT_STATUS(vq_ratequant_allocate(we, 4, 1.5, allowed, 4, 4.0, bits), VQ_STATUS_OK);
    ASSERT_EQ_INT(bits[0] + bits[1] + bits[2] + bits[3], 6);
    /* gapped allowed set {2, 4}: closest reachable sum not above the target */
    const int gap[2] = {2, 4};
    double wg[3] = {1, 1, 1};
    ASSERT_STATUS(vq_ratequant_allocate(wg, 3, 3.0, gap, 2, 4.0, bits), VQ_STATUS_OK);
    ASSERT_EQ_INT(bits[0] + bits[1] + bits[2], 8);
    /* errors */
    ASSERT_STATUS(vq_ratequant_allocate(w, 30, 5.0, allowed, 4, 4.0, bits), VQ_STATUS_RANGE);
    w[3] = 0.0;
    ASSERT_STATUS(vq_ratequant_allocate(w, 30, 2.0, allowed, 4, 4.0, bits), VQ_STATUS_INVALID_ARG);
    const int unsorted[3] = {1, 3, 2};
    ASSERT_STATUS(vq_ratequant_allocate(we, 4, 2.0, unsorted, 3, 4.0, bits), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_ratequant_allocate(we, 4, 2.0, allowed, 4, 1.0, bits), VQ_STATUS_INVALID_ARG);
    /* fitted beta: Lloyd-Max Gaussian D(b) over b = 1..3 (ratios 3.09, 3.40) */
    const int fb[3] = {1, 2, 3};
    double beta = 0;
    ASSERT_STATUS(vq_ratequant_fit_beta(fb, 3, &beta), VQ_STATUS_OK);
    ASSERT_NEAR(beta, sqrt(0.363380 / 0.034548), 1e-3);
    ASSERT_STATUS(vq_ratequant_allocate(w3, 3, 2.0, allowed, 4, 0.0, bits), VQ_STATUS_OK);
    ASSERT_EQ_INT(bits[0] + bits[1] + bits[2], 6);
    ASSERT(bits[0] <= bits[1] && bits[1] <= bits[2]);
}

TEST(smoothing_invariance) {
    /* (q * lambda) H . (k / lambda) H == q . k for every d the codec accepts */
    const int dims[] = {64, 80, 96, 128};
    vq_rng_seed(&rng_, 5);
    for (size_t di = 0; di < 4; di++) {
        const int d = dims[di];
        static float K[50 * 128], lam[128], q[128], qt[128], kt[128];
        for (int i = 0; i < 50 * d; i++) K[i] = nrand() * (1.0f + 20.0f * ((i % d) == 3));
        vq_smooth_factors(K, 50, d, lam);
        for (int c = 0; c < d; c++) {
            float m = 0;
            for (int t = 0; t < 50; t++) m = fmaxf(m, fabsf(K[t * d + c]));
            ASSERT_NEAR(lam[c], fmaxf(sqrtf(m), 1e-4f), 1e-6);
        }
        for (int c = 0; c < d; c++) q[c] = nrand();
        for (int c = 0; c < d; c++) qt[c] = q[c] * lam[c];
        vq_wht_blocks(qt, d);
        double worst = 0;
        for (int t = 0; t < 50; t++) {
            double ref = 0, got = 0, nk = 0;
            for (int c = 0; c < d; c++) {
                kt[c] = K[t * d + c] / lam[c];
                ref += (double)q[c] * K[t * d + c];
                nk += (double)K[t * d + c] * K[t * d + c];
            }
            vq_wht_blocks(kt, d);
            for (int c = 0; c < d; c++) got += (double)qt[c] * kt[c];
            worst = fmax(worst, fabs(got - ref) / sqrt(nk));
        }
        ASSERT_LE(worst, 1e-4);
        /* WHT is self-inverse */
        for (int c = 0; c < d; c++) kt[c] = q[c];
        vq_wht_blocks(kt, d);
        vq_wht_blocks(kt, d);
        for (int c = 0; c < d; c++) ASSERT_NEAR(kt[c], q[c], 1e-5);
    }
    float z[8] = {0};
    float l8[8];
    vq_smooth_factors(z, 1, 8, l8);
    ASSERT_NEAR(l8[0], 1e-4, 1e-9);
}

TEST(fit_vecinfer_and_sensitivity) {
    enum { D = 16, N = 600 };
    static float x[N * D];
    vq_rng_seed(&rng_, 6);
    for (int i = 0; i < N * D; i++) x[i] = nrand() * (1.0f + 3.0f * (i % D == 2));
    vq_calib_data *cd = vq_calib_data_create(3, D, NULL);
    ASSERT(cd);
    if (!cd) return;
    ASSERT_STATUS(vq_calib_fit_vecinfer(cd, 2, VQ_ROLE_KEY, x, N, 6, 4, 9), VQ_STATUS_OK);
    ASSERT_STATUS(vq_calib_fit_vecinfer(cd, 2, VQ_ROLE_VALUE, x, N, 5, 8, 9), VQ_STATUS_OK);
    const struct vq_calib_lr *k = vq_calib_get(cd, 2, VQ_ROLE_KEY);
    const struct vq_calib_lr *v = vq_calib_get(cd, 2, VQ_ROLE_VALUE);
    ASSERT(k->smooth && k->codebook && k->cb_k == 64 && k->cb_v == 4);
    ASSERT(!v->smooth && v->codebook && v->cb_k == 32 && v->cb_v == 8);
    ASSERT_STATUS(vq_calib_fit_vecinfer(cd, 0, VQ_ROLE_KEY, x, N, 6, 3, 9), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_calib_fit_vecinfer(cd, 0, VQ_ROLE_KEY, x, 10, 8, 8, 9), VQ_STATUS_INVALID_ARG);
    ASSERT(vq_calib_sensitivities(cd) == NULL);
    for (int l = 0; l < 3; l++)
        ASSERT_STATUS(vq_calib_fit_sensitivity(cd, l, x + l * D, 100), VQ_STATUS_OK);
    const double *s = vq_calib_sensitivities(cd);
    ASSERT(s != NULL);
    double ref = 0;
    for (int t = 0; t < 100; t++)
        for (int c = 0; c < D; c++) ref += (double)x[t * D + c] * x[t * D + c];
    if (s) ASSERT_NEAR(s[0], ref / 100, 1e-9 * ref);
    x[5] = INFINITY;
    ASSERT_STATUS(vq_calib_fit_sensitivity(cd, 0, x, 10), VQ_STATUS_NON_FINITE);
    vq_calib_data_free(cd);
    vq_calib_data_free(NULL);
    ASSERT(vq_calib_data_create(0, 64, NULL) == NULL);
    ASSERT(vq_calib_data_create(1, 60, NULL) == NULL);
}

int main(void) {
    RUN(kmeans_planted_clusters);
    RUN(nearest_centroid_transposed_matches_ref);
    RUN(kmeans_reseeds_empty_and_validates);
    RUN(jacobi_known_covariance);
    RUN(fit_spectral_recovers_subspace);
    RUN(ratequant_allocation);
    RUN(smoothing_invariance);
    RUN(fit_vecinfer_and_sensitivity);
    return TEST_REPORT();
}
