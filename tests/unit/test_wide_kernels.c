/* test_wide_kernels.c — the kernels of the 5..8-bit rotated codecs (wide_kernels.h) directly:
 * for LUT codes of 5, 6, 7, 8 bits and int8 (LIN) codes, head dims with a half-vector tail
 * (d = 8 mod 16) and several accumulator blocks, odd and even token counts, on fresh random
 * code bytes (seed printed) and random (also negative and zero) scales, with random levels
 * and with symmetric ones (lev[2^b - 1 - i] = -lev[i], vq_wk.sym): vq_wk_code against an
 * independent bit-stream reader, the sym flag, the AVX-512 kernel choice (VBMI kernels exactly
 * for 6, 7 bits and symmetric 8 bits where the CPU has VBMI), then the AVX2, AVX-512 and
 * AVX-512 VBMI (where the CPU has it) score and accumulate against the scalar reference,
 * within a bound on float rounding. Accumulator entries past d must stay untouched. */
#include "test_tq_util.h"
#include "codecs/wide_kernels.h"

static uint64_t g_seed;

/* Independent reader: code j = bits [j*b, (j+1)*b) of the LSB-first stream, one bit at a time. */
static int code_slow(const uint8_t *p, int j, int b, int lin) {
    int v = 0;
    for (int i = 0; i < b; i++) {
        const int bit = j * b + i;
        v |= ((p[bit >> 3] >> (bit & 7)) & 1) << i;
    }
    return lin && v >= 128 ? v - 256 : v;
}

/* One case; sym: levels with lev[2^bits - 1 - i] = -lev[i] (as the Lloyd-Max tables), which
 * the VBMI kernels need for 8-bit codes. */
static int run_case(vq_rng *g, int bits, int lin, int sym, int d, int n) {
    vq_wk k;
    float lev[256];
    const int L = 1 << bits;
    for (int i = 0; i < L; i++) lev[i] = (float)vq_rng_normal(g);
    for (int i = 0; sym && i < L / 2; i++) lev[L - 1 - i] = -lev[i];
    vq_wk_init(&k, d, bits, lin, lev);
    int bad = 0;
    if (!lin && k.sym != sym) {
        fprintf(stderr, "  b=%d sym=%d: vq_wk_init found sym=%d\n", bits, sym, k.sym);
        bad++;
    }
#ifdef VQ_HAVE_X86
    { /* the AVX-512 choice: the VBMI kernels exactly where they have a path and the CPU VBMI */
        vq_wk_score_fn sf;
        vq_wk_acc_fn af;
        vq_wk_select(&k, VQ_ISA_AVX512, &sf, &af);
        const int fits = !lin && (bits == 6 || bits == 7 || (bits == 8 && sym));
        if (vq_wk_vbmi_fits(&k) != fits ||
            (sf == vq_wk_score_avx512vbmi) != (fits && vq_cpu_avx512vbmi()) ||
            (af == vq_wk_accumulate_avx512vbmi) != (sf == vq_wk_score_avx512vbmi)) {
            fprintf(stderr, "  b=%d lin=%d sym=%d: wrong AVX-512 kernel choice\n", bits, lin, sym);
            bad++;
        }
    }
#endif
    uint8_t *codes = (uint8_t *)malloc((size_t)k.rec * (size_t)n);
    for (int64_t i = 0; i < (int64_t)k.rec * n; i++) codes[i] = (uint8_t)vq_rng_u64(g);
    float sc[64];
    for (int t = 0; t < n; t++) {
        float s = (float)(0.1 + 10.0 * vq_rng_uniform(g));
        if (t % 7 == 3) s = -s;
        if (t % 11 == 5) s = 0.0f;
        const uint16_t h = vq_fp32_to_sf16(s);
        codes[(size_t)t * k.rec] = (uint8_t)h;
        codes[(size_t)t * k.rec + 1] = (uint8_t)(h >> 8);
        sc[t] = vq_sf16_to_fp32(h);
    }
    for (int t = 0; t < n; t++)
        for (int j = 0; j < d; j++)
            if (vq_wk_code(&k, codes + (size_t)t * k.rec, j) !=
                code_slow(codes + (size_t)t * k.rec + 2, j, bits, lin))
                bad++;
    float q[1040], w[64], s_ref[64], s_x[64];
    for (int j = 0; j < k.dpad; j++) q[j] = j < d ? (float)vq_rng_normal(g) : 0.0f;
    for (int t = 0; t < n; t++) w[t] = (float)vq_rng_normal(g);
    vq_wk_score_ref(&k, q, codes, n, s_ref);
    double qa = 0, lm = lin ? 128.0 : 0.0, wsum = 0;
    for (int j = 0; j < d; j++) qa += fabs(q[j]);
    for (int i = 0; !lin && i < (1 << bits); i++) lm = fmax(lm, fabs(lev[i]));
    for (int t = 0; t < n; t++) wsum += fabs(w[t] * sc[t]);
    float a_ref[1040], a_x[1040];
    for (int j = 0; j < k.dpad; j++) a_ref[j] = (float)j * 0.01f;
    vq_wk_accumulate_ref(&k, codes, n, w, a_ref);
    struct {
        const char *name;
        vq_wk_score_fn s;
        vq_wk_acc_fn a;
        enum vq_isa isa;
    } v[] = {
#ifdef VQ_HAVE_X86
        {"avx2", vq_wk_score_avx2, vq_wk_accumulate_avx2, VQ_ISA_AVX2},
        {"avx512", vq_wk_score_avx512, vq_wk_accumulate_avx512, VQ_ISA_AVX512},
        {"avx512vbmi", vq_wk_score_avx512vbmi, vq_wk_accumulate_avx512vbmi, VQ_ISA_AVX512},
#endif
        {"ref", vq_wk_score_ref, vq_wk_accumulate_ref, VQ_ISA_SCALAR},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        if (!vq_isa_available(v[i].isa)) continue;
#ifdef VQ_HAVE_X86
        if (v[i].s == vq_wk_score_avx512vbmi && !vq_cpu_avx512vbmi()) continue;
#endif
        v[i].s(&k, q, codes, n, s_x);
        for (int t = 0; t < n; t++)
            if (!(fabs(s_x[t] - s_ref[t]) <= 1e-5 * qa * lm * fabs(sc[t]))) {
                if (bad < 4)
                    fprintf(stderr, "  score %s b=%d lin=%d sym=%d d=%d n=%d t=%d: %.8g vs %.8g\n",
                            v[i].name, bits, lin, sym, d, n, t, s_x[t], s_ref[t]);
                bad++;
            }
        for (int j = 0; j < k.dpad; j++) a_x[j] = (float)j * 0.01f;
        v[i].a(&k, codes, n, w, a_x);
        for (int j = 0; j < k.dpad; j++) {
            const double tol = j < d ? 1e-5 * (wsum * lm + fabs(a_ref[j])) : 0.0;
            if (!(fabs(a_x[j] - a_ref[j]) <= tol)) {
                if (bad < 4)
                    fprintf(stderr, "  acc %s b=%d lin=%d sym=%d d=%d j=%d: %.8g vs %.8g\n",
                            v[i].name, bits, lin, sym, d, j, a_x[j], a_ref[j]);
                bad++;
            }
        }
    }
#ifdef VQ_HAVE_X86
    /* the AVX-512 multi-query kernels: nq = 1..8 queries (5 and 6 in one pass, more split) and
     * weight vectors, each exactly the bits of its own single call */
    if (vq_isa_available(VQ_ISA_AVX512))
        for (int nq = 1; nq <= 8; nq++) {
            static float qm[8][1040], wm[8][64], sm[8][64], am[8][1040], a1[1040];
            const float *qp[8], *wp[8];
            float *sp[8], *ap[8];
            for (int j = 0; j < nq; j++) {
                for (int i = 0; i < k.dpad; i++) qm[j][i] = i < d ? (float)vq_rng_normal(g) : 0;
                for (int t = 0; t < n; t++) wm[j][t] = (float)vq_rng_normal(g);
                for (int i = 0; i < k.dpad; i++) am[j][i] = (float)i * 0.01f;
                qp[j] = qm[j];
                wp[j] = wm[j];
                sp[j] = sm[j];
                ap[j] = am[j];
            }
            vq_wk_score_multi_avx512(&k, qp, nq, codes, n, sp);
            vq_wk_accumulate_multi_avx512(&k, codes, n, wp, nq, ap);
            for (int j = 0; j < nq; j++) {
                vq_wk_score_avx512(&k, qm[j], codes, n, s_x);
                for (int i = 0; i < k.dpad; i++) a1[i] = (float)i * 0.01f;
                vq_wk_accumulate_avx512(&k, codes, n, wm[j], a1);
                if (memcmp(s_x, sm[j], sizeof(float) * (size_t)n) ||
                    memcmp(a1, am[j], sizeof(float) * (size_t)k.dpad)) {
                    if (bad < 4)
                        fprintf(stderr, "  multi b=%d lin=%d d=%d n=%d nq=%d: query %d differs\n",
                                bits, lin, d, n, nq, j);
                    bad++;
                }
            }
        }
#endif
    free(codes);
    return bad;
}

TEST(all_variants) {
    const int dims[] = {8, 24, 64, 72, 120, 128, 200, 256, 1016, 1024};
    const int ns[] = {1, 17, 40, 33, 8, 9};
    vq_rng g;
    vq_rng_seed(&g, g_seed);
    int bad = 0, cases = 0;
    for (int bits = 5; bits <= 9; bits++) /* 9 = int8 (LIN) */
        for (size_t k = 0; k < sizeof(dims) / sizeof(dims[0]); k++)
            for (int e = 0; e < 3; e++) { /* e = 2: symmetric levels */
                if (bits == 9 && e == 2) continue;
                bad += run_case(&g, bits == 9 ? 8 : bits, bits == 9, e == 2, dims[k],
                                ns[(bits + k + e) % 6]);
                cases++;
            }
#ifdef VQ_HAVE_X86
    fprintf(stderr, "  %d cases (AVX-512 VBMI kernels %s)\n", cases,
            vq_cpu_avx512vbmi() ? "tested" : "not available");
#else
    fprintf(stderr, "  %d cases\n", cases);
#endif
    ASSERT_EQ_INT(bad, 0);
}

int main(void) {
    g_seed = tq_seed();
    RUN(all_variants);
    return TEST_REPORT();
}
