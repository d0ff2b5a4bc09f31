/* test_spectral.c — SpectralQuant codec: bytes = 4 + d*b/8 (both allocation modes), codec
 * contract with a PCA basis fitted here (keys and values, d = 64/80/128), quality against
 * turboquant_mse at equal bits on strongly anisotropic data (water-filling must beat it),
 * calibration errors, and a 2-layer vq_cache with per-layer calibration: fused attention ==
 * reference attention, and close to exact attention. */
#include "calib_test_util.h"

static vq_codec *mk(enum vq_method m, int d, enum vq_role role, int bits, int wf,
                    const vq_calib_data *cd, int layer, vq_status *st) {
    struct vq_codec_params p = vq_codec_params_default();
    p.method = m;
    p.head_dim = d;
    p.role = role;
    p.bits = bits;
    p.spectral_waterfill = wf;
    p.calib = cd;
    p.calib_layer = layer;
    return vq_codec_create(&p, st);
}

/* strongly anisotropic: 4 dominant directions, a decaying tail, random orthogonal basis */
static void aniso_lam(int d, double *lam) {
    const double top[4] = {60, 30, 15, 8};
    for (int j = 0; j < d; j++) lam[j] = j < 4 ? top[j] : 0.3 * exp(-0.03 * j);
}

TEST(sizes) {
    const int dims[] = {64, 80, 96, 128};
    for (int di = 0; di < 4; di++)
        for (int b = 1; b <= 4; b++)
            for (int wf = 0; wf <= 1; wf++) {
                vq_codec *c = mk(VQ_METHOD_SPECTRAL, dims[di], VQ_ROLE_KEY, b, wf, NULL, 0, NULL);
                ASSERT(c != NULL);
                if (!c) continue;
                ASSERT_EQ_INT(vq_codec_block_bytes(c), 4 + dims[di] * b / 8);
                ASSERT_NEAR(vq_codec_bits_per_elem(c), b + 32.0 / dims[di], 1e-12);
                vq_codec_free(c);
            }
    vq_status st;
    ASSERT(mk(VQ_METHOD_SPECTRAL, 64, VQ_ROLE_KEY, 5, 1, NULL, 0, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    ASSERT(mk(VQ_METHOD_SPECTRAL, 64, VQ_ROLE_KEY, 2, 2, NULL, 0, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
}

TEST(calibrated_contract_and_quality) {
    const int dims[] = {64, 80, 128};
    for (int di = 0; di < 3; di++) {
        const int d = dims[di];
        const int64_t n_cal = 2000, n_test = 400;
        vq_rng r;
        vq_rng_seed(&r, 300 + d);
        double *Q = malloc(sizeof(double) * (size_t)(d * d)), lam[1024];
        cu_orthogonal(&r, d, Q);
        aniso_lam(d, lam);
        float *cal = malloc(sizeof(float) * (size_t)(n_cal * d)),
              *tst = malloc(sizeof(float) * (size_t)(n_test * d));
        cu_gen(&r, d, Q, lam, NULL, n_cal, cal);
        cu_gen(&r, d, Q, lam, NULL, n_test, tst);
        vq_calib_data *cd = vq_calib_data_create(1, d, NULL);
        ASSERT_STATUS(vq_calib_fit_spectral(cd, 0, VQ_ROLE_KEY, cal, n_cal), VQ_STATUS_OK);
        ASSERT_STATUS(vq_calib_fit_spectral(cd, 0, VQ_ROLE_VALUE, cal + d, n_cal - 1),
                      VQ_STATUS_OK);
        for (int b = 2; b <= 3; b++) {
            vq_status st;
            vq_codec *sw = mk(VQ_METHOD_SPECTRAL, d, VQ_ROLE_KEY, b, 1, cd, 0, &st);
            vq_codec *su = mk(VQ_METHOD_SPECTRAL, d, VQ_ROLE_KEY, b, 0, cd, 0, &st);
            vq_codec *sv = mk(VQ_METHOD_SPECTRAL, d, VQ_ROLE_VALUE, b, 1, cd, 0, &st);
            vq_codec *tq = mk(VQ_METHOD_TURBOQUANT_MSE, d, VQ_ROLE_KEY, b, 1, NULL, 0, &st);
            ASSERT(sw && su && sv && tq);
            if (sw && su && sv && tq) {
                ASSERT_EQ_INT(cu_contract(sw, tst, n_test, &r), 0);
                ASSERT_EQ_INT(cu_contract(su, tst, n_test, &r), 0);
                ASSERT_EQ_INT(cu_contract(sv, tst, n_test, &r), 0);
                const double ew = cu_rel_mse(sw, tst, n_test), eu = cu_rel_mse(su, tst, n_test);
                const double et = cu_rel_mse(tq, tst, n_test);
                fprintf(stderr,
                        "  d=%d b=%d rel-MSE: spectral waterfill %.5f (%.3f bits/elem), "
                        "spectral uniform %.5f, turboquant_mse %.5f (%.3f bits/elem)\n",
                        d, b, ew, vq_codec_bits_per_elem(sw), eu, et, vq_codec_bits_per_elem(tq));
                ASSERT_LE(ew, 0.5 * et);  /* water-filling: at least 2x lower error */
                ASSERT_LE(eu, 1.25 * et); /* uniform bits: comparable (same bits/coord) */
            }
            vq_codec_free(sw);
            vq_codec_free(su);
            vq_codec_free(sv);
            vq_codec_free(tq);
        }
        vq_status st;
        vq_calib_data *empty = vq_calib_data_create(1, d, NULL);
        ASSERT(mk(VQ_METHOD_SPECTRAL, d, VQ_ROLE_KEY, 2, 1, empty, 0, &st) == NULL);
        ASSERT_STATUS(st, VQ_STATUS_NOT_FOUND);
        ASSERT(mk(VQ_METHOD_SPECTRAL, d, VQ_ROLE_KEY, 2, 1, cd, 1, &st) == NULL);
        ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
        vq_calib_data_free(empty);
        vq_calib_data_free(cd);
        free(Q);
        free(cal);
        free(tst);
    }
}

enum { D = 64, NKV = 2, NQH = 4, T = 70 };
/* squared error of out (2 queries at positions T-2, T-1; NQH heads) against causal softmax
 * attention (scale 1/8) over keys k and values v (T, NKV, D), computed in double */
static double attn_err(const float *q, const float *k, const float *v, const float *o) {
    double ex = 0;
    for (int qi = 0; qi < 2; qi++)
        for (int h = 0; h < NQH; h++) {
            const int kh = h / (NQH / NKV);
            const float *qq = q + (qi * NQH + h) * D;
            const int n = T - 2 + qi + 1;
            double sc[T], mx = -1e300, z = 0, out[D] = {0};
            for (int t = 0; t < n; t++) {
                double dd = 0;
                for (int i = 0; i < D; i++) dd += (double)qq[i] * k[(t * NKV + kh) * D + i];
                sc[t] = 0.125 * dd;
                if (sc[t] > mx) mx = sc[t];
            }
            for (int t = 0; t < n; t++) {
                sc[t] = exp(sc[t] - mx);
                z += sc[t];
            }
            for (int t = 0; t < n; t++)
                for (int i = 0; i < D; i++) out[i] += sc[t] / z * v[(t * NKV + kh) * D + i];
            for (int i = 0; i < D; i++) {
                const double dlt = out[i] - o[(qi * NQH + h) * D + i];
                ex += dlt * dlt;
            }
        }
    return ex;
}

TEST(cache_per_layer_calibration) {
    /* 2 layers with different spectra; the cache must give each layer its own calibration */
    vq_rng r;
    vq_rng_seed(&r, 9);
    double Q[2][D * D], lam[D];
    aniso_lam(D, lam);
    static float cal[2][600 * D];
    vq_calib_data *cd = vq_calib_data_create(2, D, NULL);
    for (int l = 0; l < 2; l++) {
        cu_orthogonal(&r, D, Q[l]);
        cu_gen(&r, D, Q[l], lam, NULL, 600, cal[l]);
        ASSERT_STATUS(vq_calib_fit_spectral(cd, l, VQ_ROLE_KEY, cal[l], 600), VQ_STATUS_OK);
        ASSERT_STATUS(vq_calib_fit_spectral(cd, l, VQ_ROLE_VALUE, cal[l], 600), VQ_STATUS_OK);
        ASSERT_STATUS(vq_calib_fit_vecinfer(cd, l, VQ_ROLE_KEY, cal[l], 600, 8, 4, 1),
                      VQ_STATUS_OK);
        ASSERT_STATUS(vq_calib_fit_vecinfer(cd, l, VQ_ROLE_VALUE, cal[l], 600, 8, 4, 1),
                      VQ_STATUS_OK);
    }
    const enum vq_method methods[2] = {VQ_METHOD_SPECTRAL, VQ_METHOD_VECINFER};
    for (int mi = 0; mi < 2; mi++) {
        struct vq_cache_params p = vq_cache_params_default();
        p.n_layers = 2;
        p.n_kv_heads = NKV;
        p.head_dim = D;
        p.max_tokens = 256;
        p.page_tokens = 32;
        p.key.method = p.value.method = methods[mi];
        p.key.bits = methods[mi] == VQ_METHOD_SPECTRAL ? 3 : 2;
        p.value.bits = methods[mi] == VQ_METHOD_SPECTRAL ? 3 : 2;
        p.key.calib = p.value.calib = cd;
        vq_status st;
        vq_cache *c = vq_cache_create(&p, &st);
        ASSERT(c != NULL);
        if (!c) continue;
        static float k[2][T * NKV * D], v[2][T * NKV * D];
        for (int l = 0; l < 2; l++) {
            cu_gen(&r, D, Q[l], lam, NULL, T * NKV, k[l]);
            cu_gen(&r, D, Q[l], lam, NULL, T * NKV, v[l]);
            ASSERT_STATUS(vq_cache_append(c, l, k[l], v[l], VQ_DTYPE_F32, T), VQ_STATUS_OK);
        }
        float q[2 * NQH * D], o[2 * NQH * D], oref[2 * NQH * D];
        for (int i = 0; i < 2 * NQH * D; i++) q[i] = 0.2f * (float)vq_rng_normal(&r);
        for (int l = 0; l < 2; l++) {
            ASSERT_STATUS(vq_cache_attend(c, l, q, NQH, 2, NULL, 0.125f, o), VQ_STATUS_OK);
            ASSERT_STATUS(vq_cache_attend_ref(c, l, q, NQH, 2, NULL, 0.125f, oref), VQ_STATUS_OK);
            double e = 0, s = 0;
            for (int i = 0; i < 2 * NQH * D; i++) {
                e += ((double)o[i] - oref[i]) * ((double)o[i] - oref[i]);
                s += (double)oref[i] * oref[i];
            }
            /* exact attention on the fp32 data, and on data decoded by stand-alone codecs
             * calibrated for this layer (must match the cache: per-layer calibration) */
            float *kd = malloc(sizeof(float) * T * NKV * D),
                  *vd = malloc(sizeof(float) * T * NKV * D);
            struct vq_codec_params kp = p.key, vp = p.value;
            kp.head_dim = vp.head_dim = D;
            kp.role = VQ_ROLE_KEY;
            vp.role = VQ_ROLE_VALUE;
            kp.calib_layer = vp.calib_layer = l;
            vq_codec *kc = vq_codec_create(&kp, NULL), *vc = vq_codec_create(&vp, NULL);
            ASSERT(kc && vc);
            if (!kc || !vc) {
                free(kd);
                free(vd);
                vq_codec_free(kc);
                vq_codec_free(vc);
                continue;
            }
            uint8_t *buf = malloc(vq_codec_block_bytes(kc) * T * NKV +
                                  vq_codec_block_bytes(vc) * T * NKV);
            ASSERT_STATUS(vq_codec_encode(kc, k[l], T * NKV, buf), VQ_STATUS_OK);
            vq_codec_decode(kc, buf, T * NKV, kd);
            ASSERT_STATUS(vq_codec_encode(vc, v[l], T * NKV, buf), VQ_STATUS_OK);
            vq_codec_decode(vc, buf, T * NKV, vd);
            const double ex = attn_err(q, k[l], v[l], o), ed = attn_err(q, kd, vd, o);
            free(buf);
            free(kd);
            free(vd);
            vq_codec_free(kc);
            vq_codec_free(vc);
            fprintf(stderr,
                    "  %s layer %d: fused vs ref rel err %.2e, vs decoded-by-layer-codec "
                    "%.2e, vs exact attention rel err %.3f\n",
                    vq_method_name(methods[mi]), l, sqrt(e / s), sqrt(ed / s), sqrt(ex / s));
            ASSERT_LE(sqrt(e / s), 1e-4);
            ASSERT_LE(sqrt(ed / s), 1e-4);
            ASSERT_LE(sqrt(ex / s), mi == 0 ? 0.2 : 0.45);
        }
        struct vq_cache_memory mem;
        vq_cache_memory(c, &mem);
        const size_t per_tok = methods[mi] == VQ_METHOD_SPECTRAL ? (4 + D * 3 / 8) * 2
                                                                 : (D / 4) * 2;
        ASSERT_EQ_INT(mem.total_bytes, (size_t)2 * NKV * T * per_tok);
        vq_cache_free(c);
    }
    vq_calib_data_free(cd);
}

int main(void) {
    RUN(sizes);
    RUN(calibrated_contract_and_quality);
    RUN(cache_per_layer_calibration);
    return TEST_REPORT();
}
