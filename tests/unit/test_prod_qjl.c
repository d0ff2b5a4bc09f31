/* test_prod_qjl.c — qjl and turboquant_prod codecs: layout sizes, parameter validation,
 * unbiasedness of the inner-product estimators (slope over many seeds), reconstruction cosine
 * against docs/ALGORITHMS.md §3.5/§4.1, fused score / accumulate vs decode on every ISA, the x86
 * row kernels vs their scalar references, determinism, NaN/Inf/range statuses. */
#include "multi_check.h"
#include "test.h"
#include "veloxquant.h"
#include "codecs/qjl.h"

static vq_rng g_rng;
static float nrand(void) { return (float)vq_rng_normal(&g_rng); }

static vq_codec *mk(enum vq_method m, int d, int bits, int jl, uint64_t seed, enum vq_isa isa,
                    vq_status *st) {
    struct vq_codec_params p = vq_codec_params_default();
    p.method = m;
    p.head_dim = d;
    p.bits = bits;
    p.jl_dim = jl;
    p.seed = seed;
    p.isa = isa;
    return vq_codec_create(&p, st);
}

static double dotd(const float *a, const float *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* ---------------------------------------------------------------------------------------- */

TEST(layout_and_validation) {
    const int dims[] = {8, 64, 80, 96, 128, 256, 1024};
    for (size_t k = 0; k < sizeof dims / sizeof *dims; k++) {
        const int d = dims[k];
        const int jls[] = {0, d, 2 * d, d + 8, 8};
        for (size_t j = 0; j < 5; j++) {
            const int m = jls[j] ? jls[j] : d;
            vq_status st;
            vq_codec *c = mk(VQ_METHOD_QJL, d, 4, jls[j], 1, VQ_ISA_AUTO, &st);
            ASSERT(c != NULL);
            if (!c) continue;
            ASSERT_EQ_INT(vq_codec_block_bytes(c), 2 + m / 8);
            ASSERT_EQ_INT(vq_codec_params_get(c)->jl_dim, m);
            ASSERT_EQ_INT(vq_codec_block_tokens(c), 1);
            ASSERT_NEAR(vq_codec_bits_per_elem(c), (double)(m + 16) / d, 1e-12);
            vq_codec_free(c);
            for (int b = 2; b <= 4; b++) {
                c = mk(VQ_METHOD_TURBOQUANT_PROD, d, b, jls[j], 1, VQ_ISA_AUTO, &st);
                ASSERT(c != NULL);
                if (!c) continue;
                ASSERT_EQ_INT(vq_codec_block_bytes(c), 4 + d * (b - 1) / 8 + m / 8);
                ASSERT_EQ_INT(vq_codec_acc_floats(c), d + m);
                ASSERT_NEAR(vq_codec_bits_per_elem(c), (b - 1) + (double)m / d + 32.0 / d, 1e-12);
                vq_codec_free(c);
            }
        }
    }
    vq_status st = VQ_STATUS_OK;
    /* d = m = 128: 3.25 bits at b = 3 (docs/ALGORITHMS.md §0) */
    vq_codec *c = mk(VQ_METHOD_TURBOQUANT_PROD, 128, 3, 0, 1, VQ_ISA_AUTO, &st);
    ASSERT_NEAR(vq_codec_bits_per_elem(c), 3.25, 1e-12);
    vq_codec_free(c);
    const int bad_bits[] = {0, 1, 5, 8};
    for (int i = 0; i < 4; i++) {
        ASSERT(mk(VQ_METHOD_TURBOQUANT_PROD, 128, bad_bits[i], 0, 1, VQ_ISA_AUTO, &st) == NULL);
        ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    }
    const int bad_jl[] = {-8, 4, 12, 130, VQ_QJL_MAX_M + 8};
    for (int i = 0; i < 5; i++) {
        ASSERT(mk(VQ_METHOD_QJL, 128, 4, bad_jl[i], 1, VQ_ISA_AUTO, &st) == NULL);
        ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
        ASSERT(mk(VQ_METHOD_TURBOQUANT_PROD, 128, 3, bad_jl[i], 1, VQ_ISA_AUTO, &st) == NULL);
        ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Unbiasedness: the estimator is unbiased over the random signs of the sketch (and of the
 * rotation), so every few pairs get a codec with a fresh seed. q = 0.5 k + noise so that the
 * true inner products spread over a wide range; k optionally has an outlier channel. */
struct ip_stats {
    double slope, mean_err, sd_err;
};

static struct ip_stats ip_experiment(enum vq_method meth, int d, int bits, int jl, int outlier,
                                     int n_seeds, int per_seed) {
    double stt = 0, ste = 0, se = 0, see = 0;
    int n = 0;
    float k[1024], q[1024];
    float *qs_buf = vq_alloc(sizeof(float) * 4 * 1024);
    uint8_t code[2048];
    for (int s = 0; s < n_seeds; s++) {
        vq_status st;
        vq_codec *c = mk(meth, d, bits, jl, 1000 + (uint64_t)s, VQ_ISA_AUTO, &st);
        VQ_ASSERT(c && vq_codec_query_bytes(c) <= sizeof(float) * 4 * 1024 &&
                  vq_codec_block_bytes(c) <= sizeof code);
        for (int r = 0; r < per_seed; r++) {
            for (int i = 0; i < d; i++) k[i] = nrand();
            if (outlier) k[3] += 8.0f;
            for (int i = 0; i < d; i++) q[i] = 0.5f * k[i] + nrand();
            VQ_ASSERT(vq_codec_encode(c, k, 1, code) == VQ_STATUS_OK);
            vq_codec_prepare_query(c, q, qs_buf);
            float est;
            vq_codec_score(c, qs_buf, code, 1, &est);
            const double t = dotd(q, k, d);
            const double e = (est - t) / sqrt(dotd(q, q, d) * dotd(k, k, d));
            stt += t * t;
            ste += t * est;
            se += e;
            see += e * e;
            n++;
        }
        vq_codec_free(c);
    }
    vq_free(qs_buf);
    struct ip_stats r;
    r.slope = ste / stt;
    r.mean_err = se / n;
    r.sd_err = sqrt(see / n - r.mean_err * r.mean_err);
    return r;
}

TEST(qjl_unbiased) {
    struct {
        int d, jl, outlier;
        double sd_max;
    } cases[] = {
        {128, 0, 0, 0.075}, {128, 256, 0, 0.055}, {128, 0, 1, 0.075},
        {96, 0, 0, 0.09},   {80, 0, 0, 0.09},     {64, 200, 0, 0.075},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct ip_stats r = ip_experiment(VQ_METHOD_QJL, cases[i].d, 1, cases[i].jl,
                                          cases[i].outlier, 250, 8);
        fprintf(stderr, "  qjl d=%d m=%d outlier=%d: slope %.4f mean err %+.5f sd %.4f\n",
                cases[i].d, cases[i].jl ? cases[i].jl : cases[i].d, cases[i].outlier, r.slope,
                r.mean_err, r.sd_err);
        ASSERT_NEAR(r.slope, 1.0, 0.05);
        ASSERT_NEAR(r.mean_err, 0.0, 0.01);
        ASSERT_LE(r.sd_err, cases[i].sd_max);
    }
}

TEST(prod_unbiased) {
    /* IP err sd at d = m = 128 (docs/ALGORITHMS.md §3.5): a Gaussian sketch would give about
     * sqrt((pi/2) D(b-1) / d) = 0.066 / 0.038 / 0.020; the orthogonal Hadamard sketch gives
     * about sqrt((pi/2 - 1) D(b-1) / d) = 0.040 / 0.023 / 0.012, the bound used here (25%
     * slack). */
    const double sd_ref[5] = {0, 0, 0.040, 0.023, 0.0123};
    for (int b = 2; b <= 4; b++) {
        struct ip_stats r = ip_experiment(VQ_METHOD_TURBOQUANT_PROD, 128, b, 0, 0, 250, 8);
        fprintf(stderr, "  prod b=%d d=128: slope %.4f mean err %+.5f sd %.4f (theory %.4f)\n", b,
                r.slope, r.mean_err, r.sd_err, sd_ref[b]);
        ASSERT_NEAR(r.slope, 1.0, 0.05);
        ASSERT_NEAR(r.mean_err, 0.0, 0.01);
        ASSERT_LE(r.sd_err, sd_ref[b] * 1.25);
    }
    struct ip_stats r = ip_experiment(VQ_METHOD_TURBOQUANT_PROD, 96, 3, 192, 1, 250, 8);
    fprintf(stderr, "  prod b=3 d=96 m=192 outlier: slope %.4f sd %.4f\n", r.slope, r.sd_err);
    ASSERT_NEAR(r.slope, 1.0, 0.05);
}

/* ---------------------------------------------------------------------------------------- */

static double mean_cos(enum vq_method meth, int d, int bits, int jl, int n) {
    vq_status st;
    vq_codec *c = mk(meth, d, bits, jl, 7, VQ_ISA_AUTO, &st);
    VQ_ASSERT(c);
    float *x = malloc(sizeof(float) * (size_t)(n * d)),
          *y = malloc(sizeof(float) * (size_t)(n * d));
    uint8_t *codes = malloc(vq_codec_block_bytes(c) * (size_t)n);
    for (int i = 0; i < n * d; i++) x[i] = nrand();
    VQ_ASSERT(vq_codec_encode(c, x, n, codes) == VQ_STATUS_OK);
    VQ_ASSERT(vq_codec_decode(c, codes, n, y) == VQ_STATUS_OK);
    double s = 0;
    for (int t = 0; t < n; t++) {
        const float *a = x + (size_t)t * d, *b = y + (size_t)t * d;
        s += dotd(a, b, d) / sqrt(dotd(a, a, d) * dotd(b, b, d));
    }
    free(x);
    free(y);
    free(codes);
    vq_codec_free(c);
    return s / n;
}

/* Reconstruction cosine. With the Hadamard sketch (B = m/d orthogonal blocks) the QJL part of
 * a unit residual r (||r||^2 = D) reconstructs r^ with E<r, r^> = D and
 * E||r^||^2 = D (1 + (pi/2 - 1)/B), so E<u, x^> = 1 and cos = 1/sqrt(1 + (pi/2 - 1) D / B).
 * With D = d MSE / d of the (b-1)-bit sphere codebook (docs/ALGORITHMS.md §2.4, d = 128:
 * 0.36089, 0.11600, 0.03397) that is 0.911 / 0.969 / 0.990 for b = 2 / 3 / 4 — higher than
 * with a Gaussian sketch (0.80 / 0.92 / 0.975, docs/ALGORITHMS.md §3.5), whose rows are not
 * orthogonal.
 * qjl alone is the case D = 1: 0.798 at m = d, 0.882 at m = 2d (Gaussian rows: 0.62 / 0.75). */
static double cos_theory(double D, double B) { return 1.0 / sqrt(1.0 + (M_PI / 2 - 1) * D / B); }

TEST(reconstruction_cosine) {
    const double dmse[5] = {0, 0, 0.36089, 0.11600, 0.03397};
    for (int b = 2; b <= 4; b++) {
        const double c128 = mean_cos(VQ_METHOD_TURBOQUANT_PROD, 128, b, 0, 1500);
        const double th = cos_theory(dmse[b], 1.0);
        fprintf(stderr, "  prod b=%d cos d=128 %.4f (theory %.4f)", b, c128, th);
        ASSERT_NEAR(c128, th, 0.01);
        const int dims[] = {64, 96, 256};
        for (int k = 0; k < 3; k++) {
            const double cd = mean_cos(VQ_METHOD_TURBOQUANT_PROD, dims[k], b, 0, 800);
            fprintf(stderr, "  d=%d %.4f", dims[k], cd);
            ASSERT_NEAR(cd, c128, 0.01);
        }
        const double c2 = mean_cos(VQ_METHOD_TURBOQUANT_PROD, 128, b, 256, 800);
        fprintf(stderr, "  m=2d %.4f (theory %.4f)\n", c2, cos_theory(dmse[b], 2.0));
        ASSERT_NEAR(c2, cos_theory(dmse[b], 2.0), 0.01);
    }
    const double q1 = mean_cos(VQ_METHOD_QJL, 128, 1, 0, 1500);
    const double q2 = mean_cos(VQ_METHOD_QJL, 128, 1, 256, 1500);
    const double q3 = mean_cos(VQ_METHOD_QJL, 96, 1, 0, 800);
    fprintf(stderr, "  qjl cos m=d %.4f (theory %.4f) m=2d %.4f (theory %.4f) d=96 %.4f\n", q1,
            cos_theory(1, 1), q2, cos_theory(1, 2), q3);
    ASSERT_NEAR(q1, cos_theory(1, 1), 0.01);
    ASSERT_NEAR(q2, cos_theory(1, 2), 0.01);
    ASSERT_NEAR(q3, q1, 0.01);
}

/* ---------------------------------------------------------------------------------------- */
/* Fused paths vs decode on every ISA, odd token counts, several (d, m, b). For qjl the score is
 * also checked against the estimator computed from an explicit sketch matrix. */
static void check_fused(enum vq_method meth, int d, int bits, int jl, enum vq_isa isa) {
    vq_status st;
    vq_codec *c = mk(meth, d, bits, jl, 99, isa, &st);
    ASSERT(c != NULL);
    if (!c) return;
    const int n = 37;
    const size_t bb = vq_codec_block_bytes(c);
    float *x = malloc(sizeof(float) * (size_t)(n * d)),
          *y = malloc(sizeof(float) * (size_t)(n * d));
    uint8_t *codes = malloc(bb * n);
    float q[1024], sc[37], w[37], out[1024];
    void *qs = vq_alloc(vq_codec_query_bytes(c));
    float *acc = calloc(vq_codec_acc_floats(c), sizeof(float));
    for (int i = 0; i < n * d; i++) x[i] = nrand() * (1.0f + (float)(i % 7));
    for (int i = 0; i < d; i++) q[i] = nrand();
    for (int t = 0; t < n; t++) w[t] = (float)vq_rng_uniform(&g_rng) - 0.3f;
    ASSERT_STATUS(vq_codec_encode(c, x, n, codes), VQ_STATUS_OK);
    ASSERT_STATUS(vq_codec_decode(c, codes, n, y), VQ_STATUS_OK);
    vq_codec_prepare_query(c, q, qs);
    vq_codec_score(c, qs, codes, n, sc);
    /* scores also in two uneven calls (tail handling) */
    float sc2[37];
    vq_codec_score(c, qs, codes, 5, sc2);
    vq_codec_score(c, qs, codes + 5 * bb, n - 5, sc2 + 5);
    vq_codec_accumulate(c, codes, 20, w, acc);
    vq_codec_accumulate(c, codes + 20 * bb, n - 20, w + 20, acc);
    vq_codec_finish(c, acc, out);
    const double qn = sqrt(dotd(q, q, d));
    int bad = 0;
    double ref[1024] = {0};
    for (int t = 0; t < n; t++) {
        const float *yt = y + (size_t)t * d;
        const double dot = dotd(q, yt, d), yn = sqrt(dotd(yt, yt, d));
        if (fabs(sc[t] - dot) > 1e-4 * qn * yn + 1e-7) bad++;
        if (sc2[t] != sc[t]) bad++;
        for (int i = 0; i < d; i++) ref[i] += (double)w[t] * yt[i];
    }
    double rn = 0;
    for (int i = 0; i < d; i++) rn += ref[i] * ref[i];
    for (int i = 0; i < d; i++)
        if (fabs(out[i] - ref[i]) > 1e-4 * sqrt(rn) + 1e-7) bad++;
    if (meth == VQ_METHOD_QJL) {
        /* explicit S (m x d) from the sketch definition in qjl.h */
        const int m = vq_codec_params_get(c)->jl_dim;
        vq_sketch sk;
        ASSERT_STATUS(vq_sketch_init(&sk, d, m, 99), VQ_STATUS_OK);
        float *S = malloc(sizeof(float) * (size_t)m * d), e[1024], col[VQ_QJL_MAX_M];
        for (int j = 0; j < d; j++) {
            for (int i = 0; i < d; i++) e[i] = (i == j) ? 1.0f : 0.0f;
            vq_sketch_apply(&sk, e, col);
            for (int i = 0; i < m; i++) S[(size_t)i * d + j] = col[i];
        }
        for (int t = 0; t < n; t++) {
            const float *xt = x + (size_t)t * d;
            double est = 0, nx = sqrt(dotd(xt, xt, d));
            for (int i = 0; i < m; i++) {
                const double sq = dotd(S + (size_t)i * d, q, d);
                const double sk_ = dotd(S + (size_t)i * d, xt, d);
                est += (sk_ > 0 ? sq : -sq);
            }
            est *= sqrt(M_PI / 2) / m * nx;
            /* sf16 norm (rel. 2^-10) and float sums; a sign flip at |S k| ~ 0 changes est by
             * at most 2 |Sq_i| sqrt(pi/2)/m n */
            if (fabs(sc[t] - est) > 2e-3 * fabs(est) + 1e-3 * qn * nx) bad++;
        }
        free(S);
        vq_sketch_free(&sk);
    }
    if (bad)
        fprintf(stderr, "  %s d=%d b=%d jl=%d isa=%s: %d mismatches\n", vq_method_name(meth), d,
                bits, jl, vq_isa_name(isa), bad);
    ASSERT_EQ_INT(bad, 0);
    free(x);
    free(y);
    free(codes);
    free(acc);
    vq_free(qs);
    vq_codec_free(c);
}

TEST(fused_vs_decode_all_isas) {
    const int dims[] = {8, 24, 64, 80, 96, 128, 136, 256};
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        for (size_t k = 0; k < sizeof dims / sizeof *dims; k++) {
            const int d = dims[k];
            const int jls[] = {0, 2 * d, d + 8, 40};
            for (int j = 0; j < 4; j++) {
                check_fused(VQ_METHOD_QJL, d, 1, jls[j], (enum vq_isa)isa);
                for (int b = 2; b <= 4; b++)
                    check_fused(VQ_METHOD_TURBOQUANT_PROD, d, b, jls[j], (enum vq_isa)isa);
            }
        }
    }
}

/* Multi-query kernels: each query of a pass gets its own call's bits (head dims with tails,
 * sketch sizes with tails, every MSE width). */
TEST(multi_query_same_bits) {
    const int dims[] = {8, 24, 64, 136};
    for (size_t k = 0; k < sizeof dims / sizeof *dims; k++)
        for (int b = 2; b <= 4; b++) {
            const int d = dims[k], jls[] = {0, d + 8, 40};
            for (int j = 0; j < 3; j++) {
                vq_status st;
                /* b = 4 with m = d + 8 checks qjl (signs only) instead */
                const enum vq_method me = b == 4 && j == 1 ? VQ_METHOD_QJL
                                                           : VQ_METHOD_TURBOQUANT_PROD;
                vq_codec *c = mk(me, d, me == VQ_METHOD_QJL ? 1 : b, jls[j], 7, VQ_ISA_AUTO, &st);
                ASSERT(c != NULL);
                if (!c) continue;
                const int n = 29;
                const size_t bb = vq_codec_block_bytes(c);
                float *x = malloc(sizeof(float) * (size_t)(n * d));
                uint8_t *codes = malloc(bb * n);
                for (int i = 0; i < n * d; i++) x[i] = nrand();
                ASSERT_STATUS(vq_codec_encode(c, x, n, codes), VQ_STATUS_OK);
                ASSERT_EQ_INT(multi_check_bits(c, codes, n, d, 3, &g_rng), 0);
                ASSERT_EQ_INT(multi_check_bits(c, codes + bb, n - 1, d, 4, &g_rng), 0);
                free(x);
                free(codes);
                vq_codec_free(c);
            }
        }
}

/* The VBMI build of the multi-query kernels against the plain AVX-512 one: the same bits on
 * random records (every MSE width, d and m with tails, odd token counts, 1..4 queries). */
TEST(prod_multi_vbmi_same_bits) {
#if defined(VQ_HAVE_X86)
    if (!vq_isa_available(VQ_ISA_AVX512) || !vq_cpu_avx512vbmi()) return;
    const int dims[] = {8, 24, 64, 136}, ms[] = {8, 40, 64, 200};
    for (int bm = 1; bm <= 3; bm++)
        for (int di = 0; di < 4; di++) {
            vq_prod_kern pk;
            memset(&pk, 0, sizeof pk);
            pk.d = dims[di];
            pk.m = ms[di];
            pk.bm = bm;
            pk.code_bytes = pk.d * bm / 8;
            pk.sign_off = 4 + pk.code_bytes;
            pk.rec = pk.sign_off + pk.m / 8;
            pk.gamma = 1;
            pk.q_floats = (pk.d + 15) & ~15;
            pk.a_floats = (pk.m + 15) & ~15;
            pk.k = 0.1f;
            for (int i = 0; i < (1 << bm); i++) pk.cb[i] = nrand();
            const int n = 21;
            uint8_t rec[21 * 240];
            for (int i = 0; i < n * pk.rec; i++) rec[i] = (uint8_t)vq_rng_u64(&g_rng);
            for (int t = 0; t < n; t++) { /* moderate sf16 scales: exponent field 28..35 */
                rec[t * pk.rec + 1] = (uint8_t)(0x38 + (t & 7));
                rec[t * pk.rec + 3] = (uint8_t)(0x38 + (t % 5));
            }
            float *qs[4], *w[4], s1[4][21], s2[4][21], a1[4][400], a2[4][400];
            for (int j = 0; j < 4; j++) {
                qs[j] = malloc(sizeof(float) * (size_t)(pk.q_floats + pk.a_floats + 16));
                for (int i = 0; i < pk.q_floats + pk.a_floats + 16; i++) qs[j][i] = nrand();
                w[j] = malloc(sizeof(float) * n);
                for (int t = 0; t < n; t++) w[j][t] = (float)vq_rng_uniform(&g_rng);
                for (int i = 0; i < pk.d + pk.m; i++) a1[j][i] = a2[j][i] = 0.0f;
            }
            float *p1[4] = {s1[0], s1[1], s1[2], s1[3]}, *p2[4] = {s2[0], s2[1], s2[2], s2[3]};
            float *c1[4] = {a1[0], a1[1], a1[2], a1[3]}, *c2[4] = {a2[0], a2[1], a2[2], a2[3]};
            for (int nq = 1; nq <= 4; nq++) {
                vq_prod_score_multi_avx512(&pk, (const float *const *)qs, nq, rec, n, p1);
                vq_prod_score_multi_avx512vbmi(&pk, (const float *const *)qs, nq, rec, n, p2);
                vq_prod_acc_multi_avx512(&pk, rec, n, (const float *const *)w, nq, c1);
                vq_prod_acc_multi_avx512vbmi(&pk, rec, n, (const float *const *)w, nq, c2);
                for (int j = 0; j < nq; j++) {
                    ASSERT(memcmp(s1[j], s2[j], sizeof(float) * n) == 0);
                    ASSERT(memcmp(a1[j], a2[j], sizeof(float) * (size_t)(pk.d + pk.m)) == 0);
                }
            }
            for (int j = 0; j < 4; j++) {
                free(qs[j]);
                free(w[j]);
            }
        }
#endif
}

/* Row kernels of every ISA against the scalar references: random inputs, odd counts. */
TEST(row_kernels_vs_ref) {
    const int ms[] = {8, 16, 24, 40, 128, 136, 200, 264};
    float a[264], o_ref[13], o[13];
    uint8_t src[13 * 40];
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        vq_signdot_rows_fn sd = vq_signdot_rows_pick((enum vq_isa)isa);
        vq_lutdot_rows_fn ld = vq_lutdot_rows_pick((enum vq_isa)isa);
        for (int k = 0; k < 8; k++) {
            const int m = ms[k];
            const size_t stride = (size_t)m / 8 + 3; /* unaligned rows */
            double sum = 0, sabs = 0;
            for (int i = 0; i < m; i++) {
                a[i] = nrand();
                sum += a[i];
                sabs += fabs(a[i]);
            }
            for (size_t i = 0; i < sizeof src; i++) src[i] = (uint8_t)vq_rng_u64(&g_rng);
            vq_signdot_rows_ref(a, (float)sum, m, src, stride, 13, o_ref);
            sd(a, (float)sum, m, src, stride, 13, o);
            for (int t = 0; t < 13; t++) ASSERT_NEAR(o[t], o_ref[t], 1e-5 * sabs);
            /* sign accumulate: same start, same bits */
            float acc_ref[264], acc[264];
            for (int i = 0; i < m; i++) acc_ref[i] = acc[i] = nrand();
            vq_signacc_ref(src + 1, m, 0.37f, acc_ref);
            vq_signacc_pick((enum vq_isa)isa)(src + 1, m, 0.37f, acc);
            for (int i = 0; i < m; i++) ASSERT_NEAR(acc[i], acc_ref[i], 1e-6);
            for (int bits = 1; bits <= 3; bits++) {
                const int d = m;
                const size_t st2 = (size_t)d * bits / 8 + 1;
                if (st2 * 13 > sizeof src) continue;
                float cb[8];
                for (int i = 0; i < 8; i++) cb[i] = nrand();
                vq_lutdot_rows_ref(a, cb, bits, d, src, st2, 13, o_ref);
                ld(a, cb, bits, d, src, st2, 13, o);
                double bound = 0;
                for (int i = 0; i < d; i++) bound += fabs(a[i]) * 3.0;
                for (int t = 0; t < 13; t++) ASSERT_NEAR(o[t], o_ref[t], 1e-5 * bound);
                float lacc_ref[264], lacc[264];
                for (int i = 0; i < d; i++) lacc_ref[i] = lacc[i] = nrand();
                vq_lutacc_ref(src + 3, cb, bits, d, -1.7f, lacc_ref);
                vq_lutacc_pick((enum vq_isa)isa)(src + 3, cb, bits, d, -1.7f, lacc);
                for (int i = 0; i < d; i++) ASSERT_NEAR(lacc[i], lacc_ref[i], 1e-5);
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------- */

TEST(determinism_and_errors) {
    const enum vq_method ms[2] = {VQ_METHOD_QJL, VQ_METHOD_TURBOQUANT_PROD};
    for (int k = 0; k < 2; k++) {
        const int d = 96, n = 5;
        vq_status st;
        vq_codec *c = mk(ms[k], d, 3, 0, 5, VQ_ISA_SCALAR, &st);
        vq_codec *c2 = mk(ms[k], d, 3, 0, 5, VQ_ISA_AUTO, &st);
        vq_codec *c3 = mk(ms[k], d, 3, 0, 6, VQ_ISA_AUTO, &st);
        ASSERT(c && c2 && c3);
        if (!c || !c2 || !c3) return;
        const size_t bb = vq_codec_block_bytes(c);
        float x[96 * 5], y[96 * 5];
        uint8_t b1[512], b2[512], b3[512];
        for (int i = 0; i < d * n; i++) x[i] = nrand();
        ASSERT_STATUS(vq_codec_encode(c, x, n, b1), VQ_STATUS_OK);
        ASSERT_STATUS(vq_codec_encode(c2, x, n, b2), VQ_STATUS_OK);
        ASSERT_STATUS(vq_codec_encode(c3, x, n, b3), VQ_STATUS_OK);
        ASSERT(memcmp(b1, b2, bb * n) == 0); /* same seed: same bytes on any ISA */
        ASSERT(memcmp(b1, b3, bb * n) != 0); /* another seed: other sketch */
        /* zero vector: all-zero block, decodes to zeros */
        float z[96] = {0};
        memset(b1, 0xAB, bb);
        ASSERT_STATUS(vq_codec_encode(c, z, 1, b1), VQ_STATUS_OK);
        int nz = 0;
        for (size_t i = 0; i < bb; i++) nz += b1[i] != 0;
        ASSERT_EQ_INT(nz, 0);
        ASSERT_STATUS(vq_codec_decode(c, b1, 1, y), VQ_STATUS_OK);
        for (int i = 0; i < d; i++) ASSERT(y[i] == 0.0f);
        /* NaN / Inf / out of sf16 range in the last token */
        x[d * (n - 1) + 7] = NAN;
        ASSERT_STATUS(vq_codec_encode(c, x, n, b1), VQ_STATUS_NON_FINITE);
        x[d * (n - 1) + 7] = -INFINITY;
        ASSERT_STATUS(vq_codec_encode(c, x, n, b1), VQ_STATUS_NON_FINITE);
        x[d * (n - 1) + 7] = 1e10f;
        ASSERT_STATUS(vq_codec_encode(c, x, n, b1), VQ_STATUS_RANGE);
        x[d * (n - 1) + 7] = 3e38f; /* norm^2 overflows float, not double */
        ASSERT_STATUS(vq_codec_encode(c, x, n, b1), VQ_STATUS_RANGE);
        x[d * (n - 1) + 7] = 8e9f; /* just below VQ_SF16_MAX */
        ASSERT_STATUS(vq_codec_encode(c, x, n, b1), VQ_STATUS_OK);
        vq_codec_free(c);
        vq_codec_free(c2);
        vq_codec_free(c3);
    }
}

int main(void) {
    vq_rng_seed(&g_rng, 12345);
    RUN(layout_and_validation);
    RUN(qjl_unbiased);
    RUN(prod_unbiased);
    RUN(reconstruction_cosine);
    RUN(fused_vs_decode_all_isas);
    RUN(multi_query_same_bits);
    RUN(prod_multi_vbmi_same_bits);
    RUN(row_kernels_vs_ref);
    RUN(determinism_and_errors);
    return TEST_REPORT();
}
