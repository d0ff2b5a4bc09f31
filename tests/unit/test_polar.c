/* test_polar.c — PolarQuant codec: angle codebooks vs docs/ALGORITHMS.md §5.2, block size formula,
 * parameter validation, the documented bit layout (re-derived independently from the RHT
 * output), reconstruction cosine at several head dims, fused score / accumulate vs decode on
 * every ISA with odd token counts, determinism, NaN/Inf/range statuses. */
#include "test.h"
#include "veloxquant.h"
#include "codecs/polar.h"
#include "multi_check.h"

static vq_rng g_rng;
static float nrand(void) { return (float)vq_rng_normal(&g_rng); }

static vq_codec *mk(int d, const int *pb, uint64_t seed, enum vq_isa isa, vq_status *st) {
    struct vq_codec_params p = vq_codec_params_default();
    p.method = VQ_METHOD_POLAR;
    p.head_dim = d;
    p.seed = seed;
    p.isa = isa;
    if (pb) memcpy(p.polar_bits, pb, sizeof p.polar_bits);
    return vq_codec_create(&p, st);
}

static double dotd(const float *a, const float *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

TEST(codebooks_match_spec) {
    float c[64], t[64];
    struct {
        int level, bits;
        double c[8], t[3];
        int nt;
    } ref[] = {
        {2, 1, {0.50000, 1.07080}, {0}, 0},
        {2, 2, {0.30976, 0.63398, 0.93682, 1.26104}, {0.47187, 0.78540, 1.09893}, 3},
        {2, 3, {0.18845, 0.38000, 0.54825, 0.70723, 0.86357, 1.02254, 1.19080, 1.38235}, {0}, 0},
        {3, 2, {0.42625, 0.67438, 0.89641, 1.14455}, {0.55032, M_PI / 4, 1.02048}, 3},
        {4, 2, {0.52421, 0.70591, 0.86489, 1.04658}, {0.61506, M_PI / 4, 0.95573}, 3},
    };
    for (size_t k = 0; k < sizeof ref / sizeof *ref; k++) {
        ASSERT_STATUS(vq_polar_codebook(ref[k].level, ref[k].bits, c, t), VQ_STATUS_OK);
        for (int i = 0; i < (1 << ref[k].bits); i++) ASSERT_NEAR(c[i], ref[k].c[i], 1e-4);
        for (int i = 0; i < ref[k].nt; i++) ASSERT_NEAR(t[i], ref[k].t[i], 1e-4);
        for (int i = 0; i + 1 < (1 << ref[k].bits); i++)
            ASSERT_NEAR(t[i], 0.5 * (c[i] + c[i + 1]), 1e-6);
    }
    /* symmetric law around pi/4 */
    ASSERT_STATUS(vq_polar_codebook(4, 4, c, t), VQ_STATUS_OK);
    for (int i = 0; i < 16; i++) ASSERT_NEAR(c[i] + c[15 - i], M_PI / 2, 1e-5);
    ASSERT_STATUS(vq_polar_codebook(1, 4, c, t), VQ_STATUS_OK);
    for (int i = 0; i < 16; i++) ASSERT_NEAR(c[i], (i + 0.5) * 2 * M_PI / 16, 1e-6);
    ASSERT_STATUS(vq_polar_codebook(0, 2, c, t), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_polar_codebook(5, 2, c, t), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_polar_codebook(1, 7, c, t), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_polar_codebook(2, 5, c, t), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_polar_codebook(2, 0, c, t), VQ_STATUS_INVALID_ARG);
}

TEST(layout_and_validation) {
    const int dims[] = {16, 32, 48, 64, 80, 96, 128, 256, 1024};
    const int pbs[][4] = {{4, 2, 2, 2}, {3, 3, 2, 1}, {6, 4, 4, 4}, {1, 1, 1, 1}, {5, 2, 1, 3}};
    for (size_t k = 0; k < sizeof dims / sizeof *dims; k++) {
        for (size_t j = 0; j < sizeof pbs / sizeof *pbs; j++) {
            vq_status st;
            vq_codec *c = mk(dims[k], pbs[j], 1, VQ_ISA_AUTO, &st);
            ASSERT(c != NULL);
            if (!c) continue;
            const int nb = dims[k] / 16;
            const int B = 8 * pbs[j][0] + 4 * pbs[j][1] + 2 * pbs[j][2] + pbs[j][3];
            ASSERT_EQ_INT(vq_codec_block_bytes(c), 2 * nb + (nb * B + 7) / 8);
            ASSERT_EQ_INT(vq_codec_acc_floats(c), dims[k]);
            vq_codec_free(c);
        }
    }
    vq_status st;
    vq_codec *c = mk(128, NULL, 1, VQ_ISA_AUTO, &st);
    ASSERT_NEAR(vq_codec_bits_per_elem(c), 3.875, 1e-12);
    vq_codec_free(c);
    const int zero[4] = {0, 0, 0, 0}; /* all zero = default 4,2,2,2 */
    c = mk(64, zero, 1, VQ_ISA_AUTO, &st);
    ASSERT(c != NULL);
    if (c) {
        ASSERT_EQ_INT(vq_codec_params_get(c)->polar_bits[0], 4);
        ASSERT_EQ_INT(vq_codec_params_get(c)->polar_bits[3], 2);
        ASSERT_NEAR(vq_codec_bits_per_elem(c), 3.875, 1e-12);
    }
    vq_codec_free(c);
    const int bad_d[] = {8, 24, 40, 72, 136, 1000};
    for (int i = 0; i < 6; i++) {
        ASSERT(mk(bad_d[i], NULL, 1, VQ_ISA_AUTO, &st) == NULL);
        ASSERT_STATUS(st, VQ_STATUS_UNSUPPORTED);
    }
    const int bad_pb[][4] = {{0, 2, 2, 2}, {7, 2, 2, 2}, {4, 5, 2, 2}, {4, 2, 0, 2}, {4, 2, 2, -1}};
    for (int i = 0; i < 5; i++) {
        ASSERT(mk(128, bad_pb[i], 1, VQ_ISA_AUTO, &st) == NULL);
        ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    }
}

/* Re-derives the codes of every coordinate block from the RHT output in double precision and
 * compares them with the bytes read bit by bit per the documented layout. A code may differ
 * only where the reference angle lies within 1e-5 of a cell boundary. */
static unsigned get_field(const uint8_t *p, long off, int w) {
    unsigned v = 0;
    for (int i = 0; i < w; i++) v |= (unsigned)((p[(off + i) >> 3] >> ((off + i) & 7)) & 1) << i;
    return v;
}

TEST(bit_layout_matches_reference) {
    const int d = 96;
    const int pb[4] = {5, 3, 2, 1};
    vq_status st;
    vq_codec *c = mk(d, pb, 3, VQ_ISA_SCALAR, &st);
    ASSERT(c != NULL);
    if (!c) return;
    vq_rht R;
    ASSERT_STATUS(vq_rht_init(&R, d, 3), VQ_STATUS_OK);
    float cent[4][64], bnd[4][64];
    for (int l = 0; l < 4; l++)
        ASSERT_STATUS(vq_polar_codebook(l + 1, pb[l], cent[l], bnd[l]), VQ_STATUS_OK);
    const int B = 8 * 5 + 4 * 3 + 2 * 2 + 1, nb = d / 16;
    int mism = 0, near = 0, rad_bad = 0;
    for (int rep = 0; rep < 200; rep++) {
        float x[96], y[96];
        uint8_t code[256];
        for (int i = 0; i < d; i++) x[i] = nrand() * (rep % 3 == 0 ? 100.0f : 1.0f);
        if (rep % 5 == 0) x[rep % d] += 20.0f;
        ASSERT_STATUS(vq_codec_encode(c, x, 1, code), VQ_STATUS_OK);
        vq_rht_forward(&R, x, y);
        for (int k = 0; k < nb; k++) {
            double r[8], ang[15];
            int na = 0;
            for (int j = 0; j < 8; j++) {
                r[j] = hypot(y[16 * k + 2 * j], y[16 * k + 2 * j + 1]);
                double a = atan2(y[16 * k + 2 * j + 1], y[16 * k + 2 * j]);
                ang[na++] = a < 0 ? a + 2 * M_PI : a;
            }
            for (int l = 1; l < 4; l++) {
                for (int j = 0; j < (8 >> l); j++) {
                    ang[na++] = atan2(r[2 * j + 1], r[2 * j]);
                    r[j] = hypot(r[2 * j], r[2 * j + 1]);
                }
            }
            const uint16_t hr = (uint16_t)(code[2 * k] | (code[2 * k + 1] << 8));
            if (hr != vq_fp32_to_sf16((float)r[0])) rad_bad++;
            long off = 8L * 2 * nb + (long)k * B;
            na = 0;
            for (int l = 0; l < 4; l++) {
                for (int j = 0; j < (8 >> l); j++, na++) {
                    const double a = ang[na];
                    unsigned want = 0;
                    double dist = 1e9;
                    if (l == 0) {
                        const double w = 2 * M_PI / 32;
                        want = (unsigned)floor(a / w) % 32u;
                        dist = fmin(fabs(a - floor(a / w) * w), fabs(a - (floor(a / w) + 1) * w));
                    } else {
                        for (int i = 0; i < (1 << pb[l]) - 1; i++) {
                            want += a > bnd[l][i];
                            dist = fmin(dist, fabs(a - bnd[l][i]));
                        }
                    }
                    const unsigned got = get_field(code, off, pb[l]);
                    off += pb[l];
                    if (got != want) {
                        if (dist < 1e-5) near++;
                        else mism++;
                    }
                }
            }
        }
        /* padding bits after the last block are zero */
        const long end = 8L * 2 * nb + (long)nb * B;
        for (long b = end; b < 8L * (long)vq_codec_block_bytes(c); b++)
            ASSERT_EQ_INT(get_field(code, b, 1), 0);
    }
    ASSERT_EQ_INT(mism, 0);
    ASSERT_EQ_INT(rad_bad, 0);
    ASSERT_LE(near, 3);
    vq_rht_free(&R);
    vq_codec_free(c);
}

/* ---------------------------------------------------------------------------------------- */

static double mean_cos(int d, const int *pb, int outlier, int n, double *ip_sd) {
    vq_status st;
    vq_codec *c = mk(d, pb, 11, VQ_ISA_AUTO, &st);
    VQ_ASSERT(c);
    float *x = malloc(sizeof(float) * (size_t)(n * d)),
          *y = malloc(sizeof(float) * (size_t)(n * d));
    uint8_t *codes = malloc(vq_codec_block_bytes(c) * (size_t)n);
    for (int i = 0; i < n * d; i++) x[i] = nrand() + (outlier && i % d == 5 ? 10.0f : 0.0f);
    VQ_ASSERT(vq_codec_encode(c, x, n, codes) == VQ_STATUS_OK);
    VQ_ASSERT(vq_codec_decode(c, codes, n, y) == VQ_STATUS_OK);
    double s = 0, e2 = 0;
    float q[1024];
    for (int t = 0; t < n; t++) {
        const float *a = x + (size_t)t * d, *b = y + (size_t)t * d;
        s += dotd(a, b, d) / sqrt(dotd(a, a, d) * dotd(b, b, d));
        for (int i = 0; i < d; i++) q[i] = nrand();
        const double e = (dotd(q, b, d) - dotd(q, a, d)) / sqrt(dotd(q, q, d) * dotd(a, a, d));
        e2 += e * e;
    }
    if (ip_sd) *ip_sd = sqrt(e2 / n);
    free(x);
    free(y);
    free(codes);
    vq_codec_free(c);
    return s / n;
}

TEST(reconstruction_cosine) {
    double sd;
    const double c128 = mean_cos(128, NULL, 0, 2000, &sd);
    fprintf(stderr, "  polar 4,2,2,2 d=128: cos %.4f (sim 0.984) IP err sd %.4f (sim 0.014)\n",
            c128, sd);
    ASSERT_GE(c128, 0.97);
    ASSERT_LE(sd, 0.02);
    const int dims[] = {16, 64, 96, 256};
    for (int k = 0; k < 4; k++) {
        const double cd = mean_cos(dims[k], NULL, 0, 1000, NULL);
        fprintf(stderr, "  d=%d cos %.4f\n", dims[k], cd);
        ASSERT_NEAR(cd, c128, 0.01); /* Gaussian input: the same angle laws at every d */
    }
    const double co = mean_cos(128, NULL, 1, 1000, NULL);
    fprintf(stderr, "  d=128 outlier channel cos %.4f\n", co);
    ASSERT_GE(co, 0.97);
    const int hi[4] = {6, 4, 4, 4}, lo[4] = {2, 1, 1, 1};
    const double chi = mean_cos(128, hi, 0, 500, NULL), clo = mean_cos(128, lo, 0, 500, NULL);
    fprintf(stderr, "  6,4,4,4 cos %.4f  2,1,1,1 cos %.4f\n", chi, clo);
    ASSERT_GE(chi, 0.995);
    ASSERT(clo < c128 && clo > 0.7);
}

/* ---------------------------------------------------------------------------------------- */

static void check_fused(int d, const int *pb, enum vq_isa isa) {
    vq_status st;
    vq_codec *c = mk(d, pb, 21, isa, &st);
    ASSERT(c != NULL);
    if (!c) return;
    const int n = 37;
    const size_t bb = vq_codec_block_bytes(c);
    float *x = malloc(sizeof(float) * (size_t)(n * d)),
          *y = malloc(sizeof(float) * (size_t)(n * d));
    uint8_t *codes = malloc(bb * n);
    float q[1024], sc[37], sc2[37], w[37], out[1024];
    void *qs = vq_alloc(vq_codec_query_bytes(c));
    float *acc = calloc(vq_codec_acc_floats(c), sizeof(float));
    for (int i = 0; i < n * d; i++) x[i] = nrand() * (1.0f + (float)(i % 5));
    for (int i = 0; i < d; i++) x[3 * d + i] = 0.0f; /* a zero token */
    for (int i = 0; i < d; i++) q[i] = nrand();
    for (int t = 0; t < n; t++) w[t] = (float)vq_rng_uniform(&g_rng) - 0.3f;
    ASSERT_STATUS(vq_codec_encode(c, x, n, codes), VQ_STATUS_OK);
    ASSERT_STATUS(vq_codec_decode(c, codes, n, y), VQ_STATUS_OK);
    vq_codec_prepare_query(c, q, qs);
    vq_codec_score(c, qs, codes, n, sc);
    vq_codec_score(c, qs, codes, 7, sc2);
    vq_codec_score(c, qs, codes + 7 * bb, n - 7, sc2 + 7);
    vq_codec_accumulate(c, codes, 12, w, acc);
    vq_codec_accumulate(c, codes + 12 * bb, n - 12, w + 12, acc);
    vq_codec_finish(c, acc, out);
    const double qn = sqrt(dotd(q, q, d));
    int bad = 0;
    double ref[1024] = {0};
    for (int t = 0; t < n; t++) {
        const float *yt = y + (size_t)t * d;
        const double dot = dotd(q, yt, d), yn = sqrt(dotd(yt, yt, d));
        if (fabs(sc[t] - dot) > 1e-4 * qn * yn + 1e-7) bad++;
        if (fabs(sc2[t] - sc[t]) > 1e-6 * qn * yn) bad++;
        for (int i = 0; i < d; i++) ref[i] += (double)w[t] * yt[i];
    }
    for (int i = 0; i < d; i++) bad += y[3 * d + i] != 0.0f;
    double rn = 0;
    for (int i = 0; i < d; i++) rn += ref[i] * ref[i];
    for (int i = 0; i < d; i++)
        if (fabs(out[i] - ref[i]) > 1e-4 * sqrt(rn) + 1e-7) bad++;
    if (bad) fprintf(stderr, "  polar d=%d isa=%s: %d mismatches\n", d, vq_isa_name(isa), bad);
    ASSERT_EQ_INT(bad, 0);
    free(x);
    free(y);
    free(codes);
    free(acc);
    vq_free(qs);
    vq_codec_free(c);
}

TEST(fused_vs_decode_all_isas) {
    const int dims[] = {16, 48, 64, 80, 96, 128, 256};
    /* B = 46, 41, 76 (scalar path on every ISA), 15, 55 (level-1 gather), 54 */
    const int pbs[][4] = {{4, 2, 2, 2}, {3, 3, 2, 1}, {6, 4, 4, 4},
                          {1, 1, 1, 1}, {6, 1, 1, 1}, {5, 2, 2, 2}};
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        for (size_t k = 0; k < sizeof dims / sizeof *dims; k++)
            for (size_t j = 0; j < sizeof pbs / sizeof *pbs; j++)
                check_fused(dims[k], pbs[j], (enum vq_isa)isa);
    }
}

TEST(determinism_and_errors) {
    const int d = 64, n = 5;
    vq_status st;
    vq_codec *c = mk(d, NULL, 5, VQ_ISA_SCALAR, &st);
    vq_codec *c2 = mk(d, NULL, 5, VQ_ISA_AUTO, &st);
    vq_codec *c3 = mk(d, NULL, 6, VQ_ISA_AUTO, &st);
    ASSERT(c && c2 && c3);
    if (!c || !c2 || !c3) return;
    const size_t bb = vq_codec_block_bytes(c);
    float x[64 * 5], y[64];
    uint8_t b1[512], b2[512], b3[512];
    for (int i = 0; i < d * n; i++) x[i] = nrand();
    ASSERT_STATUS(vq_codec_encode(c, x, n, b1), VQ_STATUS_OK);
    ASSERT_STATUS(vq_codec_encode(c2, x, n, b2), VQ_STATUS_OK);
    ASSERT_STATUS(vq_codec_encode(c3, x, n, b3), VQ_STATUS_OK);
    ASSERT(memcmp(b1, b2, bb * n) == 0);
    ASSERT(memcmp(b1, b3, bb * n) != 0);
    float z[64] = {0};
    ASSERT_STATUS(vq_codec_encode(c, z, 1, b1), VQ_STATUS_OK);
    ASSERT_STATUS(vq_codec_decode(c, b1, 1, y), VQ_STATUS_OK);
    for (int i = 0; i < d; i++) ASSERT(y[i] == 0.0f);
    x[d * (n - 1) + 9] = NAN;
    ASSERT_STATUS(vq_codec_encode(c, x, n, b1), VQ_STATUS_NON_FINITE);
    x[d * (n - 1) + 9] = INFINITY;
    ASSERT_STATUS(vq_codec_encode(c, x, n, b1), VQ_STATUS_NON_FINITE);
    x[d * (n - 1) + 9] = 2e10f;
    ASSERT_STATUS(vq_codec_encode(c, x, n, b1), VQ_STATUS_RANGE);
    x[d * (n - 1) + 9] = 3e38f;
    ASSERT_STATUS(vq_codec_encode(c, x, n, b1), VQ_STATUS_RANGE);
    vq_codec_free(c);
    vq_codec_free(c2);
    vq_codec_free(c3);
}

/* The multi-query kernels (AVX-512 VBMI): three queries in one pass give each query the bits of
 * its own score / accumulate call, at head dims with 1..16 blocks and odd token counts; the
 * per-token AVX-512 kernels they replace there stay checked against the reference. */
static void check_multi(int d, const int *pb) {
    vq_status st;
    vq_codec *c = mk(d, pb, 31, VQ_ISA_AVX512, &st);
    ASSERT(c != NULL);
    if (!c) return;
    const struct polar_impl *im = (const struct polar_impl *)c->impl;
    const int n = 45;
    const size_t bb = vq_codec_block_bytes(c);
    float *x = malloc(sizeof(float) * (size_t)(n * d));
    uint8_t *codes = malloc(bb * n);
    for (int i = 0; i < n * d; i++) x[i] = nrand() * (1.0f + (float)(i % 3));
    ASSERT_STATUS(vq_codec_encode(c, x, n, codes), VQ_STATUS_OK);
    if (vq_cpu_avx512vbmi() && im->rec_bits + 7 <= 64) ASSERT(c->score_multi != NULL);
    ASSERT_EQ_INT(multi_check_bits(c, codes, n, d, 3, &g_rng), 0);
    ASSERT_EQ_INT(multi_check_bits(c, codes + 3 * bb, n - 3, d, 2, &g_rng), 0);
    float q0[1024], *w0 = malloc(sizeof(float) * n);
    for (int i = 0; i < d; i++) q0[i] = nrand();
    for (int t = 0; t < n; t++) w0[t] = (float)vq_rng_uniform(&g_rng);
    void *qs0 = vq_alloc(vq_codec_query_bytes(c));
    vq_codec_prepare_query(c, q0, qs0);
    float *sm0 = malloc(sizeof(float) * n);
#if defined(VQ_HAVE_X86)
    if (im->score_rows) { /* the per-token kernels against the reference of vq_codec_score */
        vq_codec *r = mk(d, pb, 31, VQ_ISA_SCALAR, &st);
        ASSERT(r != NULL);
        float *ref = malloc(sizeof(float) * n), *acc = calloc((size_t)d, sizeof(float));
        float *racc = calloc((size_t)d, sizeof(float));
        vq_codec_score(r, qs0, codes, n, ref);
        im->score_rows(im, (const float *)qs0, codes, bb, n - 1, sm0);
        vq_codec_accumulate(r, codes, n - 1, w0, racc);
        im->acc_rows(im, codes, bb, n - 1, w0, acc);
        double rn = 0, an = 0;
        for (int t = 0; t < n - 1; t++) rn += (double)ref[t] * ref[t];
        for (int i = 0; i < d; i++) an += (double)racc[i] * racc[i];
        int bad = 0;
        for (int t = 0; t < n - 1; t++) bad += fabs(sm0[t] - ref[t]) > 1e-5 * sqrt(rn / n) + 1e-7;
        for (int i = 0; i < d; i++) bad += fabs(acc[i] - racc[i]) > 1e-5 * sqrt(an / d) + 1e-7;
        ASSERT_EQ_INT(bad, 0);
        free(ref);
        free(acc);
        free(racc);
        vq_codec_free(r);
    }
#endif
    vq_free(qs0);
    free(w0);
    free(sm0);
    free(x);
    free(codes);
    vq_codec_free(c);
}

TEST(multi_query_same_bits) {
    if (!vq_isa_available(VQ_ISA_AVX512)) return;
    const int dims[] = {16, 64, 128, 256};
    const int pbs[][4] = {{4, 2, 2, 2}, {3, 3, 2, 1}, {1, 1, 1, 1}, {4, 4, 4, 4}};
    for (size_t k = 0; k < sizeof dims / sizeof *dims; k++)
        for (size_t j = 0; j < sizeof pbs / sizeof *pbs; j++) check_multi(dims[k], pbs[j]);
}

int main(void) {
    vq_rng_seed(&g_rng, 777);
    RUN(codebooks_match_spec);
    RUN(layout_and_validation);
    RUN(bit_layout_matches_reference);
    RUN(reconstruction_cosine);
    RUN(fused_vs_decode_all_isas);
    RUN(determinism_and_errors);
    RUN(multi_query_same_bits);
    return TEST_REPORT();
}
