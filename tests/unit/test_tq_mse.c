/* test_tq_mse.c — turboquant_mse at 1..8 bits: reconstruction cosine vs theory on fresh random unit
 * vectors (seed printed), unbiased-scale slope, fused score/accumulate vs decode on every ISA
 * (odd token counts, several head dims), SIMD vs scalar kernels, the documented record layout
 * (codes recomputed independently), large norms beyond fp16, RANGE / NON_FINITE / zero
 * vectors, determinism, block_bytes formula, argument checks. */
#include "test_tq_util.h"

static uint64_t g_seed;
static const double COS_MIN[9] = {0, 0.79, 0.93, 0.98, 0.994, 0.998, 0.9996, 0.9999, 0.99997};
/* Gaussian Lloyd-Max MSE (docs/ALGORITHMS.md §2.2; 5..8 bits: scripts/golden/core_reference.py) */
static const double GAUSS_D[9] = {0,         0.363380,  0.117482,   0.034548,  0.009501,
                                  0.0025047, 6.4424e-4, 1.63478e-4, 4.11851e-5};

TEST(block_bytes_formula) {
    int bad = 0;
    for (int d = 8; d <= 1024; d += 8)
        for (int b = 1; b <= 8; b++) {
            vq_status st;
            vq_codec *c = tq_create(VQ_METHOD_TURBOQUANT_MSE, d, b, VQ_ISA_SCALAR, 1, 1, &st);
            if (!c) {
                bad++;
                continue;
            }
            if (vq_codec_block_bytes(c) != (size_t)(2 + (d * b + 7) / 8)) bad++;
            if (vq_codec_block_tokens(c) != 1) bad++;
            if (fabs(vq_codec_bits_per_elem(c) - (b + 16.0 / d)) > 1e-12) bad++;
            vq_codec_free(c);
        }
    ASSERT_EQ_INT(bad, 0);
    vq_status st;
    ASSERT(tq_create(VQ_METHOD_TURBOQUANT_MSE, 128, 0, VQ_ISA_SCALAR, 1, 1, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    ASSERT(tq_create(VQ_METHOD_TURBOQUANT_MSE, 128, 9, VQ_ISA_SCALAR, 1, 1, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
}

TEST(cosine_d128) {
    vq_rng g;
    vq_rng_seed(&g, g_seed);
    for (int b = 1; b <= 8; b++) {
        vq_status st;
        vq_codec *c = tq_create(VQ_METHOD_TURBOQUANT_MSE, 128, b, VQ_ISA_AUTO, 1, g_seed + 7, &st);
        ASSERT(c != NULL);
        if (!c) continue;
        double cs = tq_mean_cos(c, &g, 1000);
        fprintf(stderr, "  d=128 b=%d mean cos %.6f (theory %.6f)\n", b, cs, sqrt(1 - GAUSS_D[b]));
        ASSERT_GE(cs, COS_MIN[b]);
        ASSERT_NEAR(cs, sqrt(1 - GAUSS_D[b]), 0.01);
        /* at 5..8 bits the tolerance above says nothing: 1 - cos ~ D/2 to a few percent */
        if (b >= 5) ASSERT_NEAR((1.0 - cs) / (1.0 - sqrt(1 - GAUSS_D[b])), 1.0, 0.1);
        vq_codec_free(c);
    }
}

TEST(cosine_other_dims) {
    const int dims[] = {64, 80, 96, 256, 200};
    vq_rng g;
    vq_rng_seed(&g, g_seed + 1);
    for (size_t k = 0; k < sizeof(dims) / sizeof(dims[0]); k++)
        for (int b = 1; b <= 8; b++) {
            vq_status st;
            vq_codec *c = tq_create(VQ_METHOD_TURBOQUANT_MSE, dims[k], b, VQ_ISA_AUTO, 1, g_seed,
                                    &st);
            ASSERT(c != NULL);
            if (!c) continue;
            double cs = tq_mean_cos(c, &g, 600);
            if (fabs(cs - sqrt(1 - GAUSS_D[b])) > 0.01)
                fprintf(stderr, "  d=%d b=%d mean cos %.4f\n", dims[k], b, cs);
            ASSERT_NEAR(cs, sqrt(1 - GAUSS_D[b]), 0.01);
            vq_codec_free(c);
        }
}

/* Least-squares slope of estimated vs true <q, k> over n correlated pairs. */
static double slope(vq_codec *c, vq_rng *g, int n) {
    int d = c->p.head_dim;
    float q[1024], k[1024], sc;
    uint8_t codes[1024];
    float *qs = (float *)vq_alloc(vq_codec_query_bytes(c));
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        tq_unit(g, q, d);
        tq_unit(g, k, d);
        double rho = 2.0 * vq_rng_uniform(g) - 1.0, nk = 0.5 + 3.0 * vq_rng_uniform(g);
        for (int j = 0; j < d; j++) k[j] = (float)(nk * (rho * q[j] + sqrt(1 - rho * rho) * k[j]));
        double tr = 0;
        for (int j = 0; j < d; j++) tr += (double)q[j] * k[j];
        vq_codec_encode(c, k, 1, codes);
        vq_codec_prepare_query(c, q, qs);
        vq_codec_score(c, qs, codes, 1, &sc);
        num += sc * tr;
        den += tr * tr;
    }
    vq_free(qs);
    return num / den;
}

TEST(unbiased_slope) {
    vq_rng g;
    vq_rng_seed(&g, g_seed + 2);
    for (int b = 1; b <= 8; b++) {
        vq_status st;
        vq_codec *c = tq_create(VQ_METHOD_TURBOQUANT_MSE, 128, b, VQ_ISA_AUTO, 1, g_seed + 3, &st);
        double s = slope(c, &g, 2000);
        fprintf(stderr, "  b=%d slope (unbiased) %.4f\n", b, s);
        ASSERT_NEAR(s, 1.0, 0.05);
        vq_codec_free(c);
    }
    /* s = n: slope ~ 1 - D (2/pi at b = 1) */
    vq_status st;
    vq_codec *c = tq_create(VQ_METHOD_TURBOQUANT_MSE, 128, 1, VQ_ISA_AUTO, 0, g_seed + 3, &st);
    double s = slope(c, &g, 2000);
    fprintf(stderr, "  b=1 slope (s = n) %.4f\n", s);
    ASSERT_NEAR(s, 1.0 - GAUSS_D[1], 0.05);
    vq_codec_free(c);
}

TEST(fused_matches_decode) {
    const int dims[] = {8, 64, 80, 96, 128, 136, 192, 256, 512, 1016};
    const int ns[] = {37, 1, 6};
    vq_rng g;
    vq_rng_seed(&g, g_seed + 4);
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        for (size_t k = 0; k < sizeof(dims) / sizeof(dims[0]); k++)
            for (int b = 1; b <= 8; b++)
                for (int u = 0; u < 2; u++) {
                    vq_status st;
                    vq_codec *c = tq_create(VQ_METHOD_TURBOQUANT_MSE, dims[k], b, (enum vq_isa)isa,
                                            u, g_seed + 5, &st);
                    ASSERT(c != NULL && (int)c->isa == isa);
                    int bad = tq_check_fused(c, &g, ns[(k + b) % 3]);
                    if (bad)
                        fprintf(stderr, "  isa=%s d=%d b=%d: %d mismatches\n",
                                vq_isa_name((enum vq_isa)isa), dims[k], b, bad);
                    ASSERT_EQ_INT(bad, 0);
                    vq_codec_free(c);
                }
    }
}

TEST(simd_matches_ref) {
    const int dims[] = {64, 72, 128, 200, 384};
    vq_rng g;
    vq_rng_seed(&g, g_seed + 6);
    for (size_t k = 0; k < sizeof(dims) / sizeof(dims[0]); k++)
        for (int b = 1; b <= 8; b++) {
            int d = dims[k], n = 41;
            vq_status st;
            vq_codec *r = tq_create(VQ_METHOD_TURBOQUANT_MSE, d, b, VQ_ISA_SCALAR, 1, 9, &st);
            float *x = malloc(sizeof(float) * d * n), q[512], w[41], s0[41], s1[41];
            uint8_t *codes = malloc(r->block_bytes * n);
            for (int i = 0; i < d * n; i++) x[i] = (float)vq_rng_normal(&g);
            for (int i = 0; i < d; i++) q[i] = (float)vq_rng_normal(&g);
            for (int t = 0; t < n; t++) w[t] = (float)vq_rng_normal(&g);
            vq_codec_encode(r, x, n, codes);
            float *qs0 = vq_alloc(r->query_bytes), *a0 = vq_alloc(4 * r->acc_floats);
            vq_codec_prepare_query(r, q, qs0);
            vq_codec_score(r, qs0, codes, n, s0);
            vq_codec_accumulate(r, codes, n, w, a0);
            for (int isa = VQ_ISA_AVX2; isa < VQ_ISA_COUNT; isa++) {
                if (!vq_isa_available((enum vq_isa)isa)) continue;
                vq_codec *c = tq_create(VQ_METHOD_TURBOQUANT_MSE, d, b, (enum vq_isa)isa, 1, 9,
                                        &st);
                float *qs1 = vq_alloc(c->query_bytes), *a1 = vq_alloc(4 * c->acc_floats);
                vq_codec_prepare_query(c, q, qs1); /* layout may differ per isa (score mode) */
                vq_codec_score(c, qs1, codes, n, s1);
                vq_codec_accumulate(c, codes, n, w, a1);
                int bad = 0;
                double qn = 0;
                for (int i = 0; i < d; i++) qn += (double)q[i] * q[i];
                for (int t = 0; t < n; t++) {
                    float sc = vq_sf16_to_fp32(
                        (uint16_t)(codes[t * r->block_bytes] | codes[t * r->block_bytes + 1] << 8));
                    if (fabs(s0[t] - s1[t]) > 1e-5 * sqrt(qn) * fabs(sc) + 1e-7) bad++;
                }
                /* the integer accumulate (AVX-512 VNNI + VBMI): within its rounding bound,
                 * per chunk of m tokens m * max|w s| * max|level| * (1/65534 + 1/4095) */
                const vq_tq_kern *kk = &((const struct vq_tq_base *)c->impl)->k;
                double ib = 0;
#ifdef VQ_HAVE_X86
                if (((const struct vq_tq_base *)c->impl)->acc == vq_tq_accumulate1_i16_avx512icl) {
                    double lm = 0;
                    for (int i = 0; i < 16; i++) lm = fmax(lm, fabs(kk->lut[i]));
                    for (int t0 = 0; t0 < n; t0 += VQ_TQ_I16_CHUNK) {
                        const int m = n - t0 < VQ_TQ_I16_CHUNK ? n - t0 : VQ_TQ_I16_CHUNK;
                        double mx = 0;
                        for (int t = t0; t < t0 + m; t++)
                            mx = fmax(mx, fabs(w[t] *
                                               vq_sf16_to_fp32((
                                                   uint16_t)(codes[t * r->block_bytes] |
                                                             codes[t * r->block_bytes + 1] << 8))));
                        ib += m * mx * lm * (1.0 / 65534.0 + 1.0 / 4095.0);
                    }
                }
#endif
                (void)kk;
                for (size_t i = 0; i < c->acc_floats; i++)
                    if (fabs(a0[i] - a1[i]) > 1.01 * ib + 1e-4 * (fabs(a0[i]) + 1.0)) bad++;
                ASSERT_EQ_INT(bad, 0);
                vq_free(qs1);
                vq_free(a1);
                vq_codec_free(c);
            }
            vq_free(qs0);
            vq_free(a0);
            free(x);
            free(codes);
            vq_codec_free(r);
        }
}

TEST(layout) {
    /* Recompute the codes independently: RHT with the same seed, Gaussian Lloyd-Max / sqrt(d),
     * and check the bytes of the documented layout. */
    vq_rng g;
    vq_rng_seed(&g, g_seed + 8);
    const int dims[] = {128, 96, 72};
    for (size_t k = 0; k < 3; k++)
        for (int b = 1; b <= 8; b++) {
            int d = dims[k];
            vq_status st;
            vq_codec *c = tq_create(VQ_METHOD_TURBOQUANT_MSE, d, b, VQ_ISA_AUTO, 0, 1234, &st);
            vq_rht r;
            vq_rht_init(&r, d, 1234);
            const float *cb, *bd;
            vq_lloyd_max(VQ_LAW_GAUSS, b, 0, &cb, &bd);
            float x[256], y[256], bnd[255];
            uint8_t rec[1024], idx[256], exp_rec[1024];
            for (int i = 0; i < (1 << b) - 1; i++) bnd[i] = bd[i] / sqrtf((float)d);
            for (int i = 0; i < d; i++) x[i] = (float)vq_rng_normal(&g) * 3.0f;
            double n = 0;
            for (int i = 0; i < d; i++) n += (double)x[i] * x[i];
            n = sqrt(n);
            for (int i = 0; i < d; i++) y[i] = x[i] * (float)(1.0 / n);
            vq_rht_forward(&r, y, y);
            int near_tie = 0;
            uint8_t tie[256];
            for (int i = 0; i < d; i++) {
                idx[i] = (uint8_t)vq_lm_encode(y[i], bnd, (1 << b) - 1);
                tie[i] = 0;
                for (int j = 0; j < (1 << b) - 1; j++) tie[i] |= fabsf(y[i] - bnd[j]) < 1e-5f;
                near_tie |= tie[i];
            }
            memset(exp_rec, 0, sizeof(exp_rec));
            uint16_t h = vq_fp32_to_sf16((float)n);
            exp_rec[0] = (uint8_t)h;
            exp_rec[1] = (uint8_t)(h >> 8);
            if (b == 3) {
                for (int i = 0; i < d; i++) {
                    exp_rec[2 + (2 * i) / 8] |= (uint8_t)((idx[i] & 3) << ((2 * i) % 8));
                    exp_rec[2 + d / 4 + i / 8] |= (uint8_t)((idx[i] >> 2) << (i % 8));
                }
            } else {
                for (int i = 0; i < d; i++) { /* 5..7 bits: a code may straddle two bytes */
                    exp_rec[2 + (b * i) / 8] |= (uint8_t)(idx[i] << ((b * i) % 8));
                    if ((b * i) % 8 + b > 8)
                        exp_rec[2 + (b * i) / 8 + 1] |= (uint8_t)(idx[i] >> (8 - (b * i) % 8));
                }
            }
            ASSERT_STATUS(vq_codec_encode(c, x, 1, rec), VQ_STATUS_OK);
            if (!near_tie) ASSERT(memcmp(rec, exp_rec, c->block_bytes) == 0);
            else { /* the codec's rotation rounds differently: a coordinate within 1e-5 of a
                    * boundary may take the neighbouring level, nothing else may differ */
                uint8_t got[256], hi[256]; /* 3 bits: a 2-bit plane, then a 1-bit plane */
                vq_unpack(rec + 2, d, b == 3 ? 2 : b, got);
                if (b == 3) vq_unpack(rec + 2 + d / 4, d, 1, hi);
                for (int i = 0; i < d; i++) {
                    if (b == 3) got[i] = (uint8_t)(got[i] | hi[i] << 2);
                    ASSERT(got[i] == idx[i] || (tie[i] && abs(got[i] - idx[i]) == 1));
                    idx[i] = got[i];
                }
            }
            /* decode = s * RHT^-1(level) */
            float dec[256], lv[256];
            vq_codec_decode(c, rec, 1, dec);
            float s = vq_sf16_to_fp32(h);
            for (int i = 0; i < d; i++) lv[i] = s * cb[idx[i]] / sqrtf((float)d);
            vq_rht_inverse(&r, lv, lv);
            for (int i = 0; i < d; i++) ASSERT_NEAR(dec[i], lv[i], 1e-5 * s);
            vq_rht_free(&r);
            vq_codec_free(c);
        }
}

TEST(large_norms_and_errors) {
    vq_rng g;
    vq_rng_seed(&g, g_seed + 9);
    for (int b = 1; b <= 8; b++) {
        vq_status st;
        vq_codec *c = tq_create(VQ_METHOD_TURBOQUANT_MSE, 128, b, VQ_ISA_AUTO, 1, 5, &st);
        enum { N = 200 };
        static float x[N * 128], xb[N * 128], y[N * 128], yb[N * 128];
        static uint8_t codes[N * 130], codes_b[N * 130];
        for (int t = 0; t < N; t++) tq_unit(&g, x + t * 128, 128);
        for (int i = 0; i < N * 128; i++) xb[i] = x[i] * 1e6f;
        ASSERT_STATUS(vq_codec_encode(c, x, N, codes), VQ_STATUS_OK);
        ASSERT_STATUS(vq_codec_encode(c, xb, N, codes_b), VQ_STATUS_OK);
        vq_codec_decode(c, codes, N, y);
        vq_codec_decode(c, codes_b, N, yb);
        double c1 = 0, c2 = 0;
        int same_codes = 0;
        for (int t = 0; t < N; t++) {
            c1 += tq_cos(x + t * 128, y + t * 128, 128);
            c2 += tq_cos(xb + t * 128, yb + t * 128, 128);
            same_codes += memcmp(codes + t * c->block_bytes + 2, codes_b + t * c->block_bytes + 2,
                                 c->block_bytes - 2) == 0;
        }
        ASSERT_NEAR(c1 / N, c2 / N, 1e-3);
        ASSERT_GE(same_codes, N - 2);
        /* norms beyond vq_sf16 -> RANGE; NaN / Inf -> NON_FINITE */
        float big[128];
        for (int i = 0; i < 128; i++) big[i] = x[i] * 1e10f;
        ASSERT_STATUS(vq_codec_encode(c, big, 1, codes), VQ_STATUS_RANGE);
        big[5] = NAN;
        ASSERT_STATUS(vq_codec_encode(c, big, 1, codes), VQ_STATUS_NON_FINITE);
        big[5] = -INFINITY;
        ASSERT_STATUS(vq_codec_encode(c, big, 1, codes), VQ_STATUS_NON_FINITE);
        /* zero vector -> scale 0, codes 0, decodes to zeros, scores 0 */
        float z[128] = {0};
        memset(codes, 0xFF, c->block_bytes);
        ASSERT_STATUS(vq_codec_encode(c, z, 1, codes), VQ_STATUS_OK);
        int nz = 0;
        for (size_t i = 0; i < c->block_bytes; i++) nz += codes[i] != 0;
        ASSERT_EQ_INT(nz, 0);
        vq_codec_decode(c, codes, 1, y);
        for (int i = 0; i < 128; i++) ASSERT_NEAR(y[i], 0.0, 0);
        vq_codec_free(c);
    }
}

TEST(deterministic) {
    vq_rng g;
    vq_rng_seed(&g, g_seed + 10);
    float x[37 * 96];
    for (int i = 0; i < 37 * 96; i++) x[i] = (float)vq_rng_normal(&g);
    for (int b = 1; b <= 8; b++)
        ASSERT_EQ_INT(tq_check_deterministic(VQ_METHOD_TURBOQUANT_MSE, 96, b, x, 37), 0);
}

int main(void) {
    g_seed = tq_seed();
    RUN(block_bytes_formula);
    RUN(cosine_d128);
    RUN(cosine_other_dims);
    RUN(unbiased_slope);
    RUN(fused_matches_decode);
    RUN(simd_matches_ref);
    RUN(layout);
    RUN(large_norms_and_errors);
    RUN(deterministic);
    return TEST_REPORT();
}
