/* test_vecinfer.c — VecInfer product-VQ codec: preset and explicit (c, v) sizes (bytes =
 * formula), codec contract with calibration fitted here on synthetic correlated keys with
 * outlier channels (keys and values, d = 64/80/128), calibrated quality far above the
 * data-free fallback, calibration errors, artifact round trip gives identical codes,
 * the 1.5-bit (12, 8) configuration. */
#include "calib_test_util.h"
#include "codecs/codec_impl.h"

static vq_codec *mk(int d, enum vq_role role, int bits, int c, int v, const vq_calib_data *cd,
                    int layer, vq_status *st) {
    struct vq_codec_params p = vq_codec_params_default();
    p.method = VQ_METHOD_VECINFER;
    p.head_dim = d;
    p.role = role;
    p.bits = bits;
    p.pq_codeword_bits = c;
    p.pq_subvec_dim = v;
    p.calib = cd;
    p.calib_layer = layer;
    return vq_codec_create(&p, st);
}

/* keys: correlated (random orthogonal mixing of a decaying spectrum) + 3 outlier channels */
static void gen_keys(vq_rng *r, int d, const double *Q, int64_t n, float *x) {
    double lam[1024];
    float mu[1024];
    for (int j = 0; j < d; j++) lam[j] = 4.0 * exp(-0.08 * j) + 0.05;
    for (int i = 0; i < d; i++) mu[i] = (i % 29 == 3) ? 8.0f : 0.0f;
    cu_gen(r, d, Q, lam, mu, n, x);
    for (int64_t t = 0; t < n; t++) x[t * d + 5] *= 6.0f; /* channel-aligned outlier */
}

TEST(sizes_and_presets) {
    const int presets[4][3] = {{1, 8, 8}, {2, 8, 4}, {3, 12, 4}, {4, 8, 2}};
    const int dims[] = {64, 80, 128};
    for (int di = 0; di < 3; di++)
        for (int k = 0; k < 4; k++) {
            vq_status st;
            vq_codec *c = mk(dims[di], VQ_ROLE_KEY, presets[k][0], 0, 0, NULL, 0, &st);
            ASSERT(c != NULL);
            if (!c) continue;
            const int n_sub = dims[di] / presets[k][2];
            ASSERT_EQ_INT(vq_codec_block_bytes(c), (n_sub * presets[k][1] + 7) / 8);
            ASSERT_NEAR(vq_codec_bits_per_elem(c), (double)presets[k][1] / presets[k][2], 1e-12);
            /* + the coordinate-domain part of the AVX-512 multi-query kernels (vecinfer.c) */
            const int zf = c->accumulate_multi ? 16 * ((dims[di] + 15) / 16) : 0;
            ASSERT_EQ_INT(vq_codec_acc_floats(c), (n_sub << presets[k][1]) + zf);
            ASSERT_EQ_INT(c->accumulate_multi != NULL,
                          vq_isa_resolve(VQ_ISA_AUTO) == VQ_ISA_AVX512 && n_sub <= 64);
            vq_codec_free(c);
        }
    vq_codec *c = mk(128, VQ_ROLE_KEY, 2, 12, 8, NULL, 0, NULL); /* "1.5 bits" */
    ASSERT(c && vq_codec_block_bytes(c) == 24);
    ASSERT(c && fabs(vq_codec_bits_per_elem(c) - 1.5) < 1e-12);
    vq_codec_free(c);
    vq_status st;
    ASSERT(mk(64, VQ_ROLE_KEY, 5, 0, 0, NULL, 0, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    ASSERT(mk(64, VQ_ROLE_KEY, 2, 8, 0, NULL, 0, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    ASSERT(mk(80, VQ_ROLE_KEY, 2, 8, 32, NULL, 0, &st) == NULL);
    ASSERT(mk(72, VQ_ROLE_KEY, 2, 8, 16, NULL, 0, &st) == NULL); /* 16 does not divide 72 */
    ASSERT(mk(64, VQ_ROLE_KEY, 2, 13, 4, NULL, 0, &st) == NULL);
}

TEST(calibrated_contract_and_quality) {
    const int dims[] = {64, 80, 128};
    for (int di = 0; di < 3; di++) {
        const int d = dims[di];
        const int64_t n_cal = 500, n_test = 200;
        vq_rng r;
        vq_rng_seed(&r, 100 + d);
        double *Q = malloc(sizeof(double) * (size_t)(d * d));
        cu_orthogonal(&r, d, Q);
        float *cal = malloc(sizeof(float) * (size_t)(n_cal * d)),
              *tst = malloc(sizeof(float) * (size_t)(n_test * d));
        gen_keys(&r, d, Q, n_cal, cal);
        gen_keys(&r, d, Q, n_test, tst);
        vq_calib_data *cd = vq_calib_data_create(2, d, NULL);
        ASSERT(cd != NULL);
        ASSERT_STATUS(vq_calib_fit_vecinfer(cd, 1, VQ_ROLE_KEY, cal, n_cal, 8, 4, 7), VQ_STATUS_OK);
        ASSERT_STATUS(vq_calib_fit_vecinfer(cd, 1, VQ_ROLE_VALUE, cal, n_cal, 8, 8, 7),
                      VQ_STATUS_OK);
        vq_status st;
        vq_codec *k = mk(d, VQ_ROLE_KEY, 2, 0, 0, cd, 1, &st);
        vq_codec *v = mk(d, VQ_ROLE_VALUE, 1, 0, 0, cd, 1, &st);
        vq_codec *kf = mk(d, VQ_ROLE_KEY, 2, 0, 0, NULL, 0, &st);
        ASSERT(k && v && kf);
        if (k && v && kf) {
            ASSERT_EQ_INT(cu_contract(k, tst, n_test, &r), 0);
            ASSERT_EQ_INT(cu_contract(v, tst, n_test, &r), 0);
            ASSERT_EQ_INT(cu_contract(kf, tst, n_test, &r), 0);
            const double ek = cu_rel_mse(k, tst, n_test), ev = cu_rel_mse(v, tst, n_test);
            const double ef = cu_rel_mse(kf, tst, n_test);
            fprintf(stderr,
                    "  d=%d vecinfer rel-MSE: keys 2-bit %.4f, values 1-bit %.4f, "
                    "uncalibrated keys 2-bit %.4f\n",
                    d, ek, ev, ef);
            ASSERT_LE(ek, 0.07);
            ASSERT_LE(ev, 0.16);
            ASSERT_GE(ef, 4 * ek); /* calibration matters */
        }
        vq_codec_free(k);
        vq_codec_free(v);
        vq_codec_free(kf);
        /* errors */
        ASSERT(mk(d, VQ_ROLE_KEY, 2, 0, 0, cd, 0, &st) == NULL); /* layer 0 not fitted */
        ASSERT_STATUS(st, VQ_STATUS_NOT_FOUND);
        ASSERT(mk(d, VQ_ROLE_KEY, 2, 0, 0, cd, 2, &st) == NULL); /* no layer 2 */
        ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
        ASSERT(mk(d, VQ_ROLE_KEY, 1, 0, 0, cd, 1, &st) == NULL); /* codebook is (8, 4) */
        ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
        ASSERT(mk(d + 8, VQ_ROLE_KEY, 2, 0, 0, cd, 1, &st) == NULL);
        ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
        float bad[1024];
        memcpy(bad, tst, sizeof(float) * (size_t)d);
        k = mk(d, VQ_ROLE_KEY, 2, 0, 0, cd, 1, &st);
        uint8_t buf[256];
        bad[3] = NAN;
        ASSERT_STATUS(vq_codec_encode(k, bad, 1, buf), VQ_STATUS_NON_FINITE);
        bad[3] = 1e10f;
        ASSERT_STATUS(vq_codec_encode(k, bad, 1, buf), VQ_STATUS_RANGE);
        vq_codec_free(k);

        /* artifact round trip: same codes from the loaded calibration */
        if (d == 64) {
            uint8_t sha[32] = {7};
            char dir[] = "/tmp/vq_vecinfer_XXXXXX", path[600];
            ASSERT(mkdtemp(dir) != NULL);
            snprintf(path, sizeof path, "%s/a/b/keys.vqcal", dir);
            ASSERT_STATUS(vq_calib_data_save(cd, path, "vecinfer", sha, NULL), VQ_STATUS_OK);
            vq_calib_data *cd2 = vq_calib_data_load(path, "vecinfer", sha, &st);
            ASSERT(cd2 != NULL);
            vq_codec *k1 = mk(d, VQ_ROLE_KEY, 2, 0, 0, cd, 1, &st),
                     *k2 = mk(d, VQ_ROLE_KEY, 2, 0, 0, cd2, 1, &st);
            ASSERT(k1 && k2);
            if (k1 && k2) {
                uint8_t *c1 = malloc(vq_codec_block_bytes(k1) * (size_t)n_test);
                uint8_t *c2 = malloc(vq_codec_block_bytes(k1) * (size_t)n_test);
                vq_codec_encode(k1, tst, n_test, c1);
                vq_codec_encode(k2, tst, n_test, c2);
                ASSERT(memcmp(c1, c2, vq_codec_block_bytes(k1) * (size_t)n_test) == 0);
                free(c1);
                free(c2);
            }
            vq_codec_free(k1);
            vq_codec_free(k2);
            vq_calib_data_free(cd2);
            char cmd[700];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
            ASSERT_EQ_INT(system(cmd), 0);
        }
        vq_calib_data_free(cd);
        free(Q);
        free(cal);
        free(tst);
    }
}

TEST(one_and_a_half_bits) {
    /* (c, v) = (12, 8) at d = 16: 2048 calibration tokens give exactly 4096 sub-vectors, so
     * k-means keeps every calibration sub-vector as a codeword: those tokens reconstruct
     * exactly, and the codec path with 12-bit codes (straddling bytes) is exercised. */
    enum { D = 16, N = 2048 };
    static float x[N * D];
    vq_rng r;
    vq_rng_seed(&r, 77);
    for (int i = 0; i < N * D; i++) x[i] = (float)vq_rng_normal(&r);
    vq_calib_data *cd = vq_calib_data_create(1, D, NULL);
    ASSERT_STATUS(vq_calib_fit_vecinfer(cd, 0, VQ_ROLE_VALUE, x, N, 12, 8, 3), VQ_STATUS_OK);
    vq_status st;
    vq_codec *c = mk(D, VQ_ROLE_VALUE, 1, 12, 8, cd, 0, &st);
    ASSERT(c != NULL);
    if (c) {
        ASSERT_EQ_INT(vq_codec_block_bytes(c), 3);
        ASSERT_NEAR(vq_codec_bits_per_elem(c), 1.5, 1e-12);
        ASSERT_LE(cu_rel_mse(c, x, 200), 1e-12);
        ASSERT_EQ_INT(cu_contract(c, x, 101, &r), 0);
    }
    vq_codec_free(c);
    vq_calib_data_free(cd);
}

int main(void) {
    RUN(sizes_and_presets);
    RUN(calibrated_contract_and_quality);
    RUN(one_and_a_half_bits);
    return TEST_REPORT();
}
