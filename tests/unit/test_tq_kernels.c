/* test_tq_kernels.c — the shared turboquant kernels directly: for every plane combination
 * (1, 2, 4 bits; 2+1, 1+1, 2+2), head dims with partial chunks / tail words and odd token
 * counts, on random code bytes, random (also negative and zero) scales: LUT-mode reference
 * score vs NIB-mode reference vs generic vs AVX2 vs AVX-512 scores, and reference vs generic
 * vs SIMD accumulate (every case with an odd and an even token count: the AVX-512 2-bit
 * accumulate handles two tokens per lookup plus an odd tail token). */
#include "test_tq_util.h"

static uint64_t g_seed;

typedef struct {
    int ba, bb;
} combo;

static void run_case(vq_rng *g, combo cb, int d, int n) {
    const int L = 1 << (cb.ba + cb.bb);
    /* layout like the codecs: rvq pads planes to 32-bit words, mse does not */
    const int pa = cb.bb == cb.ba ? 4 * ((d * cb.ba + 31) / 32) : d * cb.ba / 8;
    const int pb = cb.bb == cb.ba ? pa : d * cb.bb / 8;
    const int rec = 2 + pa + pb;
    float lev[16], la[4], lb[4];
    const int additive = cb.ba <= 2 && (cb.bb == 0 || cb.bb == cb.ba);
    for (int i = 0; i < 4; i++) {
        la[i] = (float)vq_rng_normal(g);
        lb[i] = (float)vq_rng_normal(g) * 0.3f;
    }
    for (int i = 0; i < L; i++)
        lev[i] = additive ? la[i & ((1 << cb.ba) - 1)] + (cb.bb ? lb[i >> cb.ba] : 0.0f)
                          : (float)vq_rng_normal(g);
    uint8_t *codes = (uint8_t *)malloc((size_t)rec * n);
    for (int64_t i = 0; i < (int64_t)rec * n; i++) codes[i] = (uint8_t)vq_rng_u64(g);
    for (int t = 0; t < n; t++) {
        float s = (float)(0.1 + 10.0 * vq_rng_uniform(g));
        if (t % 7 == 3) s = -s;
        if (t % 11 == 5) s = 0.0f;
        uint16_t h = vq_fp32_to_sf16(s);
        codes[(size_t)t * rec] = (uint8_t)h;
        codes[(size_t)t * rec + 1] = (uint8_t)(h >> 8);
    }
    vq_rht r;
    vq_rht_init(&r, d, 3);
    float q[1024], w[64], s_ref[64], s_x[64];
    for (int i = 0; i < d; i++) q[i] = (float)vq_rng_normal(g);
    for (int t = 0; t < n; t++) w[t] = (float)vq_rng_normal(g);
    vq_tq_kern kl, kn;
    vq_tq_kern_init(&kl, d, cb.ba, cb.bb, 2, 2 + pa, rec, lev, VQ_ISA_SCALAR);
    kn = kl;
    kl.score_mode = VQ_TQ_SCORE_LUT; /* force the LUT form for the reference */
    kl.q_floats = kl.dpad;
    ASSERT_EQ_INT(kn.score_mode, additive ? VQ_TQ_SCORE_NIB : VQ_TQ_SCORE_LUT);
    float *ql = (float *)vq_alloc(sizeof(float) * (size_t)kl.q_floats);
    float *qn = (float *)vq_alloc(sizeof(float) * (size_t)kn.q_floats);
    vq_tq_prepare_query(&kl, &r, q, ql);
    vq_tq_prepare_query(&kn, &r, q, qn);
    vq_tq_score_ref(&kl, ql, codes, n, s_ref);
    /* tolerance: relative to sum_j |q_r[j]| * max|level| * |scale| */
    double qa = 0, lm = 0;
    for (int i = 0; i < kl.dpad; i++) qa += fabs(ql[i]);
    for (int i = 0; i < L; i++) lm = fmax(lm, fabs(lev[i]));
    int bad = 0;
    struct {
        const char *name;
        vq_tq_score_fn f;
        const float *qs;
        enum vq_isa isa;
    } sv[] = {
        {"nib_ref", vq_tq_nib_score_ref, qn, VQ_ISA_SCALAR},
        {"generic", vq_tq_score_generic, ql, VQ_ISA_SCALAR},
#ifdef VQ_HAVE_X86
        {"avx2", vq_tq_score_avx2, ql, VQ_ISA_AVX2},
        {"avx512", vq_tq_score_avx512, ql, VQ_ISA_AVX512},
        {"nib_avx2", vq_tq_nib_score_avx2, qn, VQ_ISA_AVX2},
        {"nib_avx512", vq_tq_nib_score_avx512, qn, VQ_ISA_AVX512},
#endif
    };
    for (size_t v = 0; v < sizeof(sv) / sizeof(sv[0]); v++) {
        if (!vq_isa_available(sv[v].isa)) continue;
        if (sv[v].qs == qn && kn.score_mode != VQ_TQ_SCORE_NIB) continue;
        const vq_tq_kern *kk = sv[v].qs == qn ? &kn : &kl;
        sv[v].f(kk, sv[v].qs, codes, n, s_x);
        for (int t = 0; t < n; t++) {
            double sc = fabs(vq_sf16_to_fp32(
                (uint16_t)(codes[(size_t)t * rec] | codes[(size_t)t * rec + 1] << 8)));
            if (fabs(s_x[t] - s_ref[t]) > 1e-5 * qa * lm * sc + 1e-30) {
                if (bad < 4)
                    fprintf(stderr, "  %s ba=%d bb=%d d=%d n=%d t=%d: %.8g vs %.8g\n", sv[v].name,
                            cb.ba, cb.bb, d, n, t, s_x[t], s_ref[t]);
                bad++;
            }
        }
    }
    /* accumulate (LUT layout for every variant) */
    float *a_ref = (float *)vq_alloc(sizeof(float) * (size_t)kl.dpad);
    float *a_x = (float *)vq_alloc(sizeof(float) * (size_t)kl.dpad);
    for (int i = 0; i < kl.dpad; i++) a_ref[i] = (float)i * 0.01f;
    vq_tq_accumulate_ref(&kl, codes, n, w, a_ref);
    struct {
        const char *name;
        vq_tq_acc_fn f;
        enum vq_isa isa;
    } av[] = {
        {"generic", vq_tq_accumulate_generic, VQ_ISA_SCALAR},
#ifdef VQ_HAVE_X86
        {"avx2", vq_tq_accumulate_avx2, VQ_ISA_AVX2},
        {"avx512", vq_tq_accumulate_avx512, VQ_ISA_AVX512},
#endif
    };
    double wsum = 0;
    for (int t = 0; t < n; t++) wsum += fabs(w[t]) * 10.0;
    for (size_t v = 0; v < sizeof(av) / sizeof(av[0]); v++) {
        if (!vq_isa_available(av[v].isa)) continue;
        for (int i = 0; i < kl.dpad; i++) a_x[i] = (float)i * 0.01f;
        av[v].f(&kl, codes, n, w, a_x);
        for (int j = 0; j < d; j++) {
            int p = vq_tq_pos(j);
            if (fabs(a_x[p] - a_ref[p]) > 1e-5 * (wsum * lm + fabs(a_ref[p]))) {
                if (bad < 4)
                    fprintf(stderr, "  acc %s ba=%d bb=%d d=%d j=%d: %.8g vs %.8g\n", av[v].name,
                            cb.ba, cb.bb, d, j, a_x[p], a_ref[p]);
                bad++;
            }
        }
    }
    ASSERT_EQ_INT(bad, 0);
    vq_free(ql);
    vq_free(qn);
    vq_free(a_ref);
    vq_free(a_x);
    vq_rht_free(&r);
    free(codes);
}

TEST(all_variants) {
    const combo cbs[] = {{1, 0}, {2, 0}, {4, 0}, {2, 1}, {1, 1}, {2, 2}};
    const int dims[] = {8, 24, 64, 72, 120, 128, 200, 256, 1024};
    const int ns[] = {1, 17, 40, 33};
    vq_rng g;
    vq_rng_seed(&g, g_seed);
    for (size_t c = 0; c < sizeof(cbs) / sizeof(cbs[0]); c++)
        for (size_t k = 0; k < sizeof(dims) / sizeof(dims[0]); k++)
            for (int e = 0; e < 2; e++) /* an odd and an even token count (pairwise kernels) */
                run_case(&g, cbs[c], dims[k], ns[(c + k + e) % 4]);
}

/* The integer accumulate (2+1 bits; d multiple of 64): the AVX-512 VNNI + VBMI kernel
 * equals its reference bit for bit for 1..4 queries and token counts with partial chunks and
 * odd tails; weights in [0, 1] (softmax-like), some chunks all zero, some peaked, one query
 * with a non-finite weight (NaN sums); and the reference is within its rounding bound of the
 * float accumulate: per chunk of m tokens m * max|w s| * max|level| * (1/65534 + 1/4095)
 * (a weight off by at most half a step of 32767, a level by at most 1/4095 of the largest). */
TEST(i16_accumulate) {
    const combo cbs[] = {{2, 1}, {2, 1}, {2, 1}};
    const int dims[] = {64, 128, 256, 1024};
    const int ns[] = {1, 2, 31, 32, 33, 64, 100, 257};
    vq_rng g;
    vq_rng_seed(&g, g_seed ^ 0x1616);
    int checks = 0, bad = 0, simd = 0;
    for (int rep = 0; rep < 96; rep++) {
        const combo cb = cbs[rep % 3];
        const int d = dims[(rep / 3) % 4], n = ns[(rep / 12) % 8], nq = 1 + rep % 4;
        const int L = 1 << (cb.ba + cb.bb), pa = d * cb.ba / 8, pb = d * cb.bb / 8;
        const int rec = 2 + pa + pb;
        float lev[16];
        for (int i = 0; i < L; i++) lev[i] = (float)vq_rng_normal(&g);
        uint8_t *codes = (uint8_t *)malloc((size_t)rec * n);
        for (int64_t i = 0; i < (int64_t)rec * n; i++) codes[i] = (uint8_t)vq_rng_u64(&g);
        for (int t = 0; t < n; t++) {
            float sc = (float)(0.1 + 10.0 * vq_rng_uniform(&g));
            if (t % 7 == 3) sc = -sc;
            if (t % 11 == 5) sc = 0.0f;
            const uint16_t h = vq_fp32_to_sf16(sc);
            codes[(size_t)t * rec] = (uint8_t)h;
            codes[(size_t)t * rec + 1] = (uint8_t)(h >> 8);
        }
        vq_tq_kern k;
        vq_tq_kern_init(&k, d, cb.ba, cb.bb, 2, 2 + pa, rec, lev, VQ_ISA_SCALAR);
        ASSERT(k.i16);
        static float wb[4][257], ar[4][1024], ax[4][1024], af[4][1024];
        const float *w[4] = {wb[0], wb[1], wb[2], wb[3]};
        float *pr[4] = {ar[0], ar[1], ar[2], ar[3]};
        for (int j = 0; j < nq; j++) {
            for (int t = 0; t < n; t++) {
                wb[j][t] = (float)vq_rng_uniform(&g);
                if (rep % 5 == 1) wb[j][t] *= wb[j][t] * wb[j][t] * wb[j][t]; /* peaked */
                if (rep % 4 == 2 && t >= 32 && t < 64) wb[j][t] = 0.0f;       /* a zero chunk */
            }
            for (int i = 0; i < k.dpad; i++) ar[j][i] = ax[j][i] = af[j][i] = (float)i * 0.01f;
        }
        const int nanq = rep % 9 == 4 ? nq - 1 : -1;
        if (nanq >= 0) wb[nanq][n / 2] = rep % 2 ? INFINITY : NAN;
        vq_tq_accumulate_i16_ref(&k, codes, n, w, nq, pr);
#ifdef VQ_HAVE_X86
        if (vq_isa_available(VQ_ISA_AVX512) && vq_cpu_avx512vnni() && vq_cpu_avx512vbmi()) {
            float *px[4] = {ax[0], ax[1], ax[2], ax[3]};
            vq_tq_accumulate_i16_avx512icl(&k, codes, n, w, nq, px);
            for (int j = 0; j < nq; j++, simd++)
                bad += memcmp(ar[j], ax[j], (size_t)k.dpad * sizeof(float)) != 0;
        }
#endif
        double lm = 0;
        for (int i = 0; i < L; i++) lm = fmax(lm, fabs(lev[i]));
        for (int j = 0; j < nq; j++) {
            vq_tq_accumulate_ref(&k, codes, n, w[j], af[j]);
            double bound = 0, mass = 0;
            for (int t0 = 0; t0 < n; t0 += VQ_TQ_I16_CHUNK) {
                double mx = 0;
                const int m = n - t0 < VQ_TQ_I16_CHUNK ? n - t0 : VQ_TQ_I16_CHUNK;
                for (int t = t0; t < t0 + m; t++) {
                    const double u = fabs(
                        (double)wb[j][t] *
                        vq_sf16_to_fp32(
                            (uint16_t)(codes[(size_t)t * rec] | codes[(size_t)t * rec + 1] << 8)));
                    mx = fmax(mx, u);
                    mass += u;
                }
                bound += m * mx * lm * (1.0 / 65534.0 + 1.0 / 4095.0);
            }
            for (int c = 0; c < d; c++, checks++) {
                const int p = vq_tq_pos(c);
                if (j == nanq) bad += !isnan(ar[j][p]);
                else
                    bad += !(fabs((double)ar[j][p] - af[j][p]) <=
                             1.01 * bound + 1e-5 * (mass * lm + fabs(af[j][p])));
            }
        }
        free(codes);
    }
    if (bad) fprintf(stderr, "  i16 accumulate: %d bad of %d checks, %d SIMD\n", bad, checks, simd);
    ASSERT_EQ_INT(bad, 0);
    ASSERT_GE(checks, 20000);
    fprintf(stderr, "  i16 accumulate: %d checks, %d SIMD comparisons\n", checks, simd);
}

int main(void) {
    g_seed = tq_seed();
    RUN(all_variants);
    RUN(i16_accumulate);
    return TEST_REPORT();
}
