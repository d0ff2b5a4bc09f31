/* test_int8.c — int8 (rotated per-token int8, docs/ALGORITHMS.md §3.8): block bytes and traits,
 * the documented record layout recomputed independently (RHT, absmax codes, least-squares
 * scale, codes for the stored scale), the per-vector error bound of a uniform quantizer and the
 * mean error against its a^2/12 theory on fresh random vectors with an outlier channel (seed
 * printed), the least-squares scale lower in mean error than plain absmax, fused score /
 * accumulate vs decode on every ISA (odd token counts, head dims with a half-vector tail), SIMD
 * vs scalar kernels, zero / one-hot / NaN / out-of-range inputs, determinism for a seed. */
#include "test_tq_util.h"

static uint64_t g_seed;

static vq_codec *mk(int d, enum vq_isa isa, uint64_t seed) {
    vq_status st;
    vq_codec *c = tq_create(VQ_METHOD_INT8, d, 8, isa, 1, seed, &st);
    if (!c) fprintf(stderr, "  int8 d=%d: %s\n", d, vq_status_str(st));
    return c;
}

TEST(traits_and_sizes) {
    struct vq_method_info mi;
    ASSERT_STATUS(vq_method_info_get(VQ_METHOD_INT8, &mi), VQ_STATUS_OK);
    ASSERT(strcmp(mi.name, "int8") == 0);
    ASSERT_EQ_INT(mi.default_bits, 8);
    ASSERT_EQ_INT(mi.min_bits, 8);
    ASSERT_EQ_INT(mi.max_bits, 8);
    ASSERT(mi.flags & VQ_METHOD_F_QUANTIZED);
    enum vq_method m;
    ASSERT_STATUS(vq_method_from_name("int8", &m), VQ_STATUS_OK);
    ASSERT_EQ_INT((int)m, (int)VQ_METHOD_INT8);
    int bad = 0;
    for (int d = 8; d <= 1024; d += 8) {
        vq_codec *c = mk(d, VQ_ISA_SCALAR, 1);
        if (!c) {
            bad++;
            continue;
        }
        bad += vq_codec_block_bytes(c) != (size_t)(2 + d) || vq_codec_block_tokens(c) != 1;
        bad += fabs(vq_codec_bits_per_elem(c) - (8.0 + 16.0 / d)) > 1e-12;
        vq_codec_free(c);
    }
    ASSERT_EQ_INT(bad, 0);
    struct vq_codec_params p = vq_codec_params_default();
    ASSERT_STATUS(vq_codec_params_set_method(&p, VQ_METHOD_INT8), VQ_STATUS_OK);
    ASSERT_EQ_INT(p.bits, 8);
    ASSERT_STATUS(vq_codec_params_set_bits(&p, 4), VQ_STATUS_RANGE);
    p.head_dim = 12;
    vq_status st;
    ASSERT(vq_codec_create(&p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
}

/* Expected record of x, computed without the codec. Returns 1 when a code sits within 1e-4 of
 * a rounding tie (float vs double rounding may then differ). */
static int expected_record(const float *x, int d, uint64_t seed, uint8_t *rec) {
    vq_rht r;
    vq_rht_init(&r, d, seed);
    float y[1024];
    vq_rht_forward(&r, x, y);
    vq_rht_free(&r);
    double m = 0;
    for (int j = 0; j < d; j++) m = fmax(m, fabs(y[j]));
    double yc = 0, cc = 0;
    for (int j = 0; j < d; j++) {
        const double v = fmin(127.0, fmax(-127.0, floor(y[j] / (m / 127.0) + 0.5)));
        yc += y[j] * v;
        cc += v * v;
    }
    const uint16_t h = vq_fp32_to_sf16((float)(yc / cc));
    const double s = vq_sf16_to_fp32(h);
    int tie = 0;
    for (int j = 0; j < d; j++) {
        const double u = y[j] / s;
        tie |= fabs(u - floor(u) - 0.5) < 1e-4;
        rec[2 + j] = (uint8_t)(int8_t)fmin(127.0, fmax(-127.0, floor(u + 0.5)));
    }
    rec[0] = (uint8_t)h;
    rec[1] = (uint8_t)(h >> 8);
    return tie;
}

TEST(layout) {
    vq_rng g;
    vq_rng_seed(&g, g_seed + 1);
    const int dims[] = {64, 96, 72, 128, 8};
    int checked = 0;
    for (size_t k = 0; k < sizeof(dims) / sizeof(dims[0]); k++)
        for (int rep = 0; rep < 20; rep++) {
            const int d = dims[k];
            vq_codec *c = mk(d, VQ_ISA_AUTO, 4321);
            float x[1024], dec[1024], lv[1024];
            uint8_t rec[1100], exp_rec[1100];
            for (int j = 0; j < d; j++) x[j] = (float)(vq_rng_normal(&g) * (j % 5 == 0 ? 9 : 1));
            ASSERT_STATUS(vq_codec_encode(c, x, 1, rec), VQ_STATUS_OK);
            if (!expected_record(x, d, 4321, exp_rec)) {
                ASSERT(memcmp(rec, exp_rec, c->block_bytes) == 0);
                checked++;
            }
            /* decode = RHT^-1(s * code) */
            vq_rht r;
            vq_rht_init(&r, d, 4321);
            const float s = vq_sf16_to_fp32((uint16_t)(rec[0] | rec[1] << 8));
            for (int j = 0; j < d; j++) lv[j] = s * (float)(int8_t)rec[2 + j];
            vq_rht_inverse(&r, lv, lv);
            vq_codec_decode(c, rec, 1, dec);
            for (int j = 0; j < d; j++) ASSERT_NEAR(dec[j], lv[j], 1e-5 * 127 * fabs(s));
            vq_rht_free(&r);
            vq_codec_free(c);
        }
    fprintf(stderr, "  %d records compared byte for byte\n", checked);
    ASSERT_GE(checked, 80);
}

TEST(error_bounds) {
    vq_rng g;
    vq_rng_seed(&g, g_seed + 2);
    const int dims[] = {64, 128, 200};
    for (size_t k = 0; k < 3; k++) {
        const int d = dims[k], n = 2000;
        vq_codec *c = mk(d, VQ_ISA_AUTO, 7);
        vq_rht r;
        vq_rht_init(&r, d, 7);
        float *x = malloc(sizeof(float) * d * n), *y = malloc(sizeof(float) * d * n);
        uint8_t *codes = malloc(c->block_bytes * n);
        for (int i = 0; i < d * n; i++) x[i] = (float)vq_rng_normal(&g);
        for (int t = 0; t < n; t += 3) x[t * d + 5] *= 40.0f; /* an outlier channel */
        ASSERT_STATUS(vq_codec_encode(c, x, n, codes), VQ_STATUS_OK);
        vq_codec_decode(c, codes, n, y);
        double sum_rel = 0, sum_theory = 0, sum_absmax = 0;
        int bad = 0;
        for (int t = 0; t < n; t++) {
            float yr[1024];
            vq_rht_forward(&r, x + t * d, yr);
            double m = 0, e2 = 0, e2abs = 0, n2 = 0;
            for (int j = 0; j < d; j++) m = fmax(m, fabs(yr[j]));
            const double a = m / 127.0, sa = vq_sf16_to_fp32(vq_fp32_to_sf16((float)a));
            const double s = vq_sf16_to_fp32(
                (uint16_t)(codes[t * c->block_bytes] | codes[t * c->block_bytes + 1] << 8));
            for (int j = 0; j < d; j++) {
                const double e = (double)x[t * d + j] - y[t * d + j];
                const double ca = fmin(127.0, fmax(-127.0, floor(yr[j] / sa + 0.5)));
                e2 += e * e;
                e2abs += (yr[j] - sa * ca) * (yr[j] - sa * ca);
                n2 += (double)x[t * d + j] * x[t * d + j];
            }
            /* every coordinate is within s/2 of its level, or clipped at 127 s (s < a) */
            const double per = fmax(s / 2, m - 127 * s);
            if (sqrt(e2) > sqrt(d) * per * (1 + 1e-4) + 1e-5 * sqrt(n2)) bad++;
            sum_rel += e2 / n2;
            sum_absmax += e2abs / n2;
            sum_theory += d * a * a / 12.0 / n2;
        }
        fprintf(stderr,
                "  d=%d mean ||x - x^||^2 / ||x||^2 %.4e (plain absmax %.4e, a^2/12 theory %.4e)\n",
                d, sum_rel / n, sum_absmax / n, sum_theory / n);
        ASSERT_EQ_INT(bad, 0);
        ASSERT(sum_rel < sum_absmax); /* the least-squares scale lowers the error (~2 %) */
        ASSERT(sum_rel / n < 1.05 * sum_theory / n);
        ASSERT(sum_rel / n > 0.8 * sum_theory / n);
        vq_rht_free(&r);
        free(x);
        free(y);
        free(codes);
        vq_codec_free(c);
    }
}

TEST(fused_matches_decode) {
    const int dims[] = {8, 24, 64, 80, 96, 128, 136, 200, 256, 1016};
    const int ns[] = {37, 1, 6, 9};
    vq_rng g;
    vq_rng_seed(&g, g_seed + 3);
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        for (size_t k = 0; k < sizeof(dims) / sizeof(dims[0]); k++) {
            vq_codec *c = mk(dims[k], (enum vq_isa)isa, g_seed + 5);
            ASSERT(c != NULL && (int)c->isa == isa);
            if (!c) continue;
            const int bad = tq_check_fused(c, &g, ns[k % 4]);
            if (bad)
                fprintf(stderr, "  isa=%s d=%d: %d mismatches\n", vq_isa_name((enum vq_isa)isa),
                        dims[k], bad);
            ASSERT_EQ_INT(bad, 0);
            vq_codec_free(c);
        }
    }
}

TEST(simd_matches_scalar) {
    const int dims[] = {64, 72, 128, 200, 384};
    vq_rng g;
    vq_rng_seed(&g, g_seed + 4);
    for (size_t k = 0; k < sizeof(dims) / sizeof(dims[0]); k++) {
        const int d = dims[k], n = 41;
        vq_codec *r = mk(d, VQ_ISA_SCALAR, 9);
        float *x = malloc(sizeof(float) * d * n), q[512], w[41], s0[41], s1[41];
        uint8_t *codes = malloc(r->block_bytes * n), *codes1 = malloc(r->block_bytes * n);
        for (int i = 0; i < d * n; i++) x[i] = (float)vq_rng_normal(&g);
        for (int i = 0; i < d; i++) q[i] = (float)vq_rng_normal(&g);
        for (int t = 0; t < n; t++) w[t] = (float)vq_rng_normal(&g);
        ASSERT_STATUS(vq_codec_encode(r, x, n, codes), VQ_STATUS_OK);
        float *qs0 = vq_alloc(r->query_bytes), *a0 = vq_alloc(4 * r->acc_floats), o0[512];
        vq_codec_prepare_query(r, q, qs0);
        vq_codec_score(r, qs0, codes, n, s0);
        vq_codec_accumulate(r, codes, n, w, a0);
        vq_codec_finish(r, a0, o0);
        for (int isa = VQ_ISA_AVX2; isa < VQ_ISA_COUNT; isa++) {
            if (!vq_isa_available((enum vq_isa)isa)) continue;
            vq_codec *c = mk(d, (enum vq_isa)isa, 9);
            ASSERT_STATUS(vq_codec_encode(c, x, n, codes1), VQ_STATUS_OK);
            ASSERT(memcmp(codes, codes1, r->block_bytes * n) == 0); /* encode is ISA-free */
            float *qs1 = vq_alloc(c->query_bytes), *a1 = vq_alloc(4 * c->acc_floats), o1[512];
            vq_codec_prepare_query(c, q, qs1);
            vq_codec_score(c, qs1, codes, n, s1);
            vq_codec_accumulate(c, codes, n, w, a1);
            vq_codec_finish(c, a1, o1);
            int bad = 0;
            double qn = 0, on = 0;
            for (int i = 0; i < d; i++) qn += (double)q[i] * q[i];
            for (int i = 0; i < d; i++) on += (double)o0[i] * o0[i];
            for (int t = 0; t < n; t++) {
                const float sc = vq_sf16_to_fp32(
                    (uint16_t)(codes[t * r->block_bytes] | codes[t * r->block_bytes + 1] << 8));
                if (fabs(s0[t] - s1[t]) > 1e-5 * sqrt(qn) * 127 * sqrt(d) * fabs(sc)) bad++;
            }
            for (int i = 0; i < d; i++)
                if (fabs(o0[i] - o1[i]) > 1e-5 * sqrt(on) + 1e-6) bad++;
            ASSERT_EQ_INT(bad, 0);
            vq_free(qs1);
            vq_free(a1);
            vq_codec_free(c);
        }
        vq_free(qs0);
        vq_free(a0);
        free(x);
        free(codes);
        free(codes1);
        vq_codec_free(r);
    }
}

TEST(edge_inputs) {
    vq_codec *c = mk(64, VQ_ISA_AUTO, 3);
    float x[64], y[64];
    uint8_t rec[66];
    for (int j = 0; j < 64; j++) x[j] = 0.0f;
    memset(rec, 0xAB, sizeof rec);
    ASSERT_STATUS(vq_codec_encode(c, x, 1, rec), VQ_STATUS_OK);
    int nz = 0;
    for (int i = 0; i < 66; i++) nz += rec[i] != 0;
    ASSERT_EQ_INT(nz, 0);
    vq_codec_decode(c, rec, 1, y);
    for (int j = 0; j < 64; j++) ASSERT_NEAR(y[j], 0.0, 0);
    /* one coordinate only: every rotated coordinate has the same magnitude, codes +-127 */
    x[5] = 3.0f;
    ASSERT_STATUS(vq_codec_encode(c, x, 1, rec), VQ_STATUS_OK);
    vq_codec_decode(c, rec, 1, y);
    for (int j = 0; j < 64; j++) ASSERT_NEAR(y[j], j == 5 ? 3.0 : 0.0, 1e-2);
    for (int j = 0; j < 64; j++) x[j] = 1e12f;
    ASSERT_STATUS(vq_codec_encode(c, x, 1, rec), VQ_STATUS_RANGE);
    x[7] = NAN;
    ASSERT_STATUS(vq_codec_encode(c, x, 1, rec), VQ_STATUS_NON_FINITE);
    x[7] = INFINITY;
    ASSERT_STATUS(vq_codec_encode(c, x, 1, rec), VQ_STATUS_NON_FINITE);
    vq_codec_free(c);
}

TEST(deterministic) {
    vq_rng g;
    vq_rng_seed(&g, g_seed + 5);
    float x[37 * 96];
    for (int i = 0; i < 37 * 96; i++) x[i] = (float)vq_rng_normal(&g);
    ASSERT_EQ_INT(tq_check_deterministic(VQ_METHOD_INT8, 96, 8, x, 37), 0);
}

int main(void) {
    g_seed = tq_seed();
    RUN(traits_and_sizes);
    RUN(layout);
    RUN(error_bounds);
    RUN(fused_matches_decode);
    RUN(simd_matches_scalar);
    RUN(edge_inputs);
    RUN(deterministic);
    return TEST_REPORT();
}
