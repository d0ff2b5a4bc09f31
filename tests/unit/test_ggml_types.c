/* test_ggml_types.c — ggml block formats: dequantization of hand-built blocks with known values,
 * reference quantizer round trips, dot kernels against fp64 and every ISA variant against _ref
 * (odd block counts, odd float lengths), and the matrix product with odd row/token counts. */
#include "test.h"

#include <stdint.h>
#include <string.h>
#include <math.h>

#include "core/core.h"
#include "engine/ggml.h"
#include "core/sha256.h"

static uint64_t rs = 0x243F6A8885A308D3ull;
static uint64_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}
static float frand(void) { return (float)((double)(rnd() >> 11) / 9007199254740992.0 * 2.0 - 1.0); }
static vq_half H(float f) { return vq_ggml_f2h(f); }

TEST(half_conversion) {
    ASSERT_EQ_INT(H(1.0f), 0x3c00);
    ASSERT_EQ_INT(H(-2.0f), 0xc000);
    ASSERT_EQ_INT(H(65504.0f), 0x7bff);
    ASSERT_EQ_INT(H(1e6f), 0x7c00);
    ASSERT_EQ_INT(H(5.9604645e-8f), 0x0001); /* smallest subnormal */
    ASSERT_NEAR(vq_ggml_h2f(0x0001), 5.9604645e-8, 1e-15);
    ASSERT_NEAR(vq_ggml_h2f(0x03ff), 6.0975552e-5, 1e-12);
    ASSERT_NEAR(vq_ggml_h2f(0x3555), 0.33325195, 1e-8);
    ASSERT_NEAR(vq_ggml_bf2f(0x3f80), 1.0, 0);
    for (uint32_t h = 0; h < 0x7c00; h++) { /* every finite positive half round-trips */
        if (H(vq_ggml_h2f((vq_half)h)) != h) {
            ASSERT_EQ_INT(H(vq_ggml_h2f((vq_half)h)), h);
            break;
        }
    }
    ASSERT_EQ_INT(H(1.0f + 1.0f / 2048), 0x3c00); /* tie -> even */
    ASSERT_EQ_INT(H(1.0f + 3.0f / 2048), 0x3c02);
}

/* ---- hand-built blocks ---- */

TEST(dequant_legacy_known) {
    float y[32];
    vq_block_q4_0 b40;
    b40.d = H(0.5f);
    for (int j = 0; j < 16; j++) b40.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    vq_dequantize_row_q4_0_ref(&b40, y, 32);
    ASSERT_NEAR(y[0], -4.0, 0);
    ASSERT_NEAR(y[15], 3.5, 0);
    ASSERT_NEAR(y[16], 3.5, 0);
    ASSERT_NEAR(y[31], -4.0, 0);
    ASSERT_NEAR(y[9], 0.5, 0);

    vq_block_q4_1 b41;
    b41.d = H(0.25f);
    b41.m = H(-1.0f);
    for (int j = 0; j < 16; j++) b41.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    vq_dequantize_row_q4_1_ref(&b41, y, 32);
    ASSERT_NEAR(y[0], -1.0, 0);
    ASSERT_NEAR(y[15], 2.75, 0);
    ASSERT_NEAR(y[16], 2.75, 0);
    ASSERT_NEAR(y[20], 1.75, 0);

    vq_block_q5_0 b50;
    b50.d = H(2.0f);
    for (int j = 0; j < 16; j++) b50.qs[j] = (uint8_t)(j | (j << 4));
    /* qh bit e set for e in {1, 17, 31} */
    uint32_t qh = (1u << 1) | (1u << 17) | (1u << 31);
    memcpy(b50.qh, &qh, 4);
    vq_dequantize_row_q5_0_ref(&b50, y, 32);
    ASSERT_NEAR(y[0], 2.0 * (0 - 16), 0);
    ASSERT_NEAR(y[1], 2.0 * (1 + 16 - 16), 0);
    ASSERT_NEAR(y[17], 2.0 * (1 + 16 - 16), 0);
    ASSERT_NEAR(y[18], 2.0 * (2 - 16), 0);
    ASSERT_NEAR(y[31], 2.0 * (15 + 16 - 16), 0);

    vq_block_q5_1 b51;
    b51.d = H(0.5f);
    b51.m = H(10.0f);
    memcpy(b51.qs, b50.qs, 16);
    memcpy(b51.qh, b50.qh, 4);
    vq_dequantize_row_q5_1_ref(&b51, y, 32);
    ASSERT_NEAR(y[0], 10.0, 0);
    ASSERT_NEAR(y[1], 10.0 + 0.5 * 17, 0);
    ASSERT_NEAR(y[31], 10.0 + 0.5 * 31, 0);

    vq_block_q8_0 b80;
    b80.d = H(0.125f);
    for (int j = 0; j < 32; j++) b80.qs[j] = (int8_t)(j * 8 - 128);
    vq_dequantize_row_q8_0_ref(&b80, y, 32);
    ASSERT_NEAR(y[0], -16.0, 0);
    ASSERT_NEAR(y[31], 0.125 * 120, 0);

    uint16_t f16[3] = {0x3c00, 0xc000, 0x3555};
    vq_dequantize_row_f16_ref(f16, y, 3);
    ASSERT_NEAR(y[1], -2.0, 0);
    ASSERT_NEAR(y[2], 0.33325195, 1e-8);
    uint16_t bf[2] = {0x3f80, 0xc040};
    vq_dequantize_row_bf16_ref(bf, y, 2);
    ASSERT_NEAR(y[0], 1.0, 0);
    ASSERT_NEAR(y[1], -3.0, 0);
}

TEST(dequant_kquants_known) {
    static float y[256];
    /* Q4_K: sub-block s has scale s+1 and min 2s (6-bit packing per docs/ALGORITHMS.md §9.2). */
    vq_block_q4_K b;
    memset(&b, 0, sizeof b);
    b.d = H(0.5f);
    b.dmin = H(0.25f);
    int sc[8], mn[8];
    for (int s = 0; s < 8; s++) {
        sc[s] = s + 1 + (s == 7 ? 50 : 0);
        mn[s] = 2 * s + (s == 6 ? 40 : 0);
    }
    for (int s = 0; s < 4; s++) {
        b.scales[s] = (uint8_t)((sc[s] & 63) | ((sc[s + 4] >> 4) << 6));
        b.scales[s + 4] = (uint8_t)((mn[s] & 63) | ((mn[s + 4] >> 4) << 6));
        b.scales[s + 8] = (uint8_t)((sc[s + 4] & 15) | ((mn[s + 4] & 15) << 4));
    }
    for (int j = 0; j < 128; j++) b.qs[j] = (uint8_t)((j % 16) | ((15 - j % 16) << 4));
    vq_dequantize_row_q4_K_ref(&b, y, 256);
    for (int e = 0; e < 256; e++) {
        int s = e / 32, l = e % 32, p = e / 64;
        int nib = (e % 64) < 32 ? ((32 * p + l) % 16) : (15 - (32 * p + l) % 16);
        double want = 0.5 * sc[s] * nib - 0.25 * mn[s];
        if (fabs(y[e] - want) > 1e-6) {
            ASSERT_NEAR(y[e], want, 1e-6);
            break;
        }
    }
    ASSERT_NEAR(y[255], -0.25 * 14, 1e-6); /* e=255: sub-block 7, nibble 0, min 14 */

    /* Q5_K: same scales plus a high bit from qh[l] bit s. */
    vq_block_q5_K b5;
    memset(&b5, 0, sizeof b5);
    b5.d = b.d;
    b5.dmin = b.dmin;
    memcpy(b5.scales, b.scales, 12);
    memcpy(b5.qs, b.qs, 128);
    for (int l = 0; l < 32; l++) b5.qh[l] = (uint8_t)(l % 2 ? 0xAA : 0x55);
    vq_dequantize_row_q5_K_ref(&b5, y, 256);
    for (int e = 0; e < 256; e++) {
        int s = e / 32, l = e % 32, p = e / 64;
        int nib = (e % 64) < 32 ? ((32 * p + l) % 16) : (15 - (32 * p + l) % 16);
        int hb = (((l % 2) ? 0xAA : 0x55) >> s) & 1;
        double want = 0.5 * sc[s] * (nib + 16 * hb) - 0.25 * mn[s];
        if (fabs(y[e] - want) > 1e-6) {
            ASSERT_NEAR(y[e], want, 1e-6);
            break;
        }
    }

    /* Q6_K: q = (low4 | hi2 << 4) - 32 with per-16 int8 scales. */
    vq_block_q6_K b6;
    for (int j = 0; j < 128; j++) b6.ql[j] = (uint8_t)(j * 7 + 3);
    for (int j = 0; j < 64; j++) b6.qh[j] = (uint8_t)(j * 13 + 5);
    for (int j = 0; j < 16; j++) b6.scales[j] = (int8_t)(j * 9 - 70);
    b6.d = H(0.03125f);
    vq_dequantize_row_q6_K_ref(&b6, y, 256);
    for (int e = 0; e < 256; e++) {
        int h = e / 128, g = (e % 128) / 32, l = e % 32;
        int qlb = b6.ql[64 * h + 32 * (g & 1) + l];
        int low4 = g < 2 ? qlb & 15 : qlb >> 4;
        int hi2 = (b6.qh[32 * h + l] >> (2 * g)) & 3;
        double want = 0.03125 * b6.scales[e / 16] * ((low4 | (hi2 << 4)) - 32);
        if (fabs(y[e] - want) > 1e-6) {
            ASSERT_NEAR(y[e], want, 1e-6);
            break;
        }
    }
    /* a fixed element checked by hand: e=0: ql[0]=3 -> low4 3, qh[0]=5 -> hi2 1, q=19-32=-13 */
    ASSERT_NEAR(y[0], 0.03125 * -70 * -13, 1e-6);
}

/* ---- round trips of the reference quantizers ---- */

TEST(quantize_round_trip) {
    enum { N = 32 * 64 };
    static float x[N], y[N];
    static uint8_t buf[N * 2];
    for (int i = 0; i < N; i++) x[i] = frand() * (1.0f + (float)(i % 7));
    struct {
        void (*q)(const float *, void *, int64_t);
        void (*dq)(const void *, float *, int64_t);
        double tol;
        const char *name;
    } c[] = {
        {vq_quantize_row_q4_0_ref, vq_dequantize_row_q4_0_ref, 0.12, "q4_0"},
        {vq_quantize_row_q4_1_ref, vq_dequantize_row_q4_1_ref, 0.09, "q4_1"},
        {vq_quantize_row_q5_0_ref, vq_dequantize_row_q5_0_ref, 0.06, "q5_0"},
        {vq_quantize_row_q5_1_ref, vq_dequantize_row_q5_1_ref, 0.045, "q5_1"},
        {vq_quantize_row_q8_0_ref, vq_dequantize_row_q8_0_ref, 0.008, "q8_0"},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        c[k].q(x, buf, N);
        c[k].dq(buf, y, N);
        double e = 0, r = 0;
        for (int i = 0; i < N; i++) {
            e += (x[i] - y[i]) * (x[i] - y[i]);
            r += x[i] * x[i];
        }
        double rel = sqrt(e / r);
        if (rel > c[k].tol) fprintf(stderr, "%s rel rmse %g\n", c[k].name, rel);
        ASSERT_LE(rel, c[k].tol);
        ASSERT_GE(rel, c[k].tol / 20); /* not lossless: the check can fail */
    }
    /* q8a activation: s = d * sum(q) and |q| <= 127 */
    static vq_block_q8a qa[N / 32];
    vq_quantize_row_q8a_ref(x, qa, N);
    for (int b = 0; b < N / 32; b++) {
        int s = 0;
        for (int j = 0; j < 32; j++) {
            s += qa[b].qs[j];
            ASSERT(qa[b].qs[j] >= -127);
        }
        ASSERT_NEAR(qa[b].s, qa[b].d * s, 1e-4 * fabs(qa[b].d * 32 * 127));
    }
}

/* ---- random valid weight blocks ---- */

static void fill_random_blocks(uint32_t type, uint8_t *w, int64_t n_elem) {
    const struct vq_ggml_type_info *ti = vq_ggml_type_info(type);
    int64_t nb = n_elem / ti->block_size;
    size_t bytes = (size_t)nb * (size_t)ti->type_size;
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd();
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = w + b * ti->type_size;
        vq_half h1 = H(0.01f + 0.05f * fabsf(frand())), h2 = H(0.01f * frand());
        switch (type) {
        case VQ_GGML_F32:
            for (int64_t i = 0; i < n_elem; i++) ((float *)w)[i] = frand();
            return;
        case VQ_GGML_F16:
            for (int64_t i = 0; i < n_elem; i++) ((vq_half *)w)[i] = H(frand());
            return;
        case VQ_GGML_BF16:
            for (int64_t i = 0; i < n_elem; i++) {
                float f = frand();
                uint32_t u;
                memcpy(&u, &f, 4);
                ((uint16_t *)w)[i] = (uint16_t)(u >> 16);
            }
            return;
        case VQ_GGML_Q4_1:
        case VQ_GGML_Q5_1:
        case VQ_GGML_Q4_K:
        case VQ_GGML_Q5_K:
            memcpy(p, &h1, 2);
            memcpy(p + 2, &h2, 2);
            break;
        case VQ_GGML_Q6_K: memcpy(p + 208, &h1, 2); break;
        default: memcpy(p, &h1, 2); break;
        }
    }
}

static const uint32_t all_types[] = {VQ_GGML_F32,  VQ_GGML_F16,  VQ_GGML_BF16, VQ_GGML_Q4_0,
                                     VQ_GGML_Q4_1, VQ_GGML_Q5_0, VQ_GGML_Q5_1, VQ_GGML_Q8_0,
                                     VQ_GGML_Q4_K, VQ_GGML_Q5_K, VQ_GGML_Q6_K};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

/* The reference dot equals the fp64 dot of the dequantized weight and dequantized activation. */
TEST(ref_dot_vs_fp64) {
    enum { N = 256 * 3 };
    static uint8_t w[N * 4], act[N * 4];
    static float x[N], wf[N], af[N];
    for (size_t k = 0; k < N_TYPES; k++) {
        const struct vq_ggml_kernels *kr = vq_ggml_kernels(all_types[k], VQ_ISA_SCALAR);
        ASSERT(kr != NULL);
        if (!kr) continue;
        fill_random_blocks(all_types[k], w, N);
        for (int i = 0; i < N; i++) x[i] = frand();
        vq_ggml_quantize_act(kr->act, x, act, N);
        kr->to_float(w, wf, N);
        /* dequantize the activation */
        if (kr->act == VQ_ACT_F32) memcpy(af, x, sizeof af);
        else if (kr->act == VQ_ACT_Q8A) {
            const vq_block_q8a *q = (const vq_block_q8a *)act;
            for (int i = 0; i < N; i++) af[i] = q[i / 32].d * q[i / 32].qs[i % 32];
        } else {
            const vq_block_q8_K *q = (const vq_block_q8_K *)act;
            for (int i = 0; i < N; i++) af[i] = q[i / 256].d * q[i / 256].qs[i % 256];
        }
        double want = 0, wx = 0, mag = 0;
        for (int i = 0; i < N; i++) {
            want += (double)wf[i] * af[i];
            wx += (double)wf[i] * x[i];
            mag += fabs(wf[i] * x[i]);
        }
        float got = kr->vec_dot(N, w, act);
        if (fabs(got - want) > 1e-5 * mag + 1e-6)
            fprintf(stderr, "type %s\n", vq_ggml_type_name(all_types[k]));
        ASSERT_NEAR(got, want, 1e-5 * mag + 1e-6);
        ASSERT_NEAR(got, wx, 0.02 * mag); /* activation quantization error stays small */
    }
}

/* Every ISA variant matches the reference on odd sizes and fresh random inputs. */
TEST(isa_variants_match_ref) {
    static uint8_t w[256 * 19 * 4], act[256 * 19 * 4 + 64];
    static float x[256 * 19];
    const int nblk[] = {1, 2, 3, 7, 17, 19};
    const int nflt[] = {1, 7, 8, 13, 31, 67, 129, 576};
    int checked = 0;
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_ggml_isa_available((enum vq_isa)isa)) {
            fprintf(stderr, "  (isa %d not available)\n", isa);
            continue;
        }
        for (size_t k = 0; k < N_TYPES; k++) {
            const struct vq_ggml_kernels *kr = vq_ggml_kernels(all_types[k], VQ_ISA_SCALAR);
            const struct vq_ggml_kernels *kv = vq_ggml_kernels(all_types[k], (enum vq_isa)isa);
            ASSERT(kv && kv->act == kr->act);
            const struct vq_ggml_type_info *ti = vq_ggml_type_info(all_types[k]);
            int float_type = ti->block_size == 1;
            int ncase = float_type ? (int)(sizeof nflt / sizeof nflt[0])
                                   : (int)(sizeof nblk / sizeof nblk[0]);
            for (int c = 0; c < ncase; c++) {
                int64_t n = float_type ? nflt[c] : (int64_t)nblk[c] * ti->block_size;
                if (n > 256 * 19) continue;
                for (int rep = 0; rep < 4; rep++) {
                    fill_random_blocks(all_types[k], w, n);
                    for (int64_t i = 0; i < n; i++) x[i] = frand() * 3.0f;
                    vq_ggml_quantize_act(kr->act, x, act, n);
                    float r = kr->vec_dot(n, w, act), v = kv->vec_dot(n, w, act);
                    double mag = 0;
                    static float wf[256 * 19];
                    kr->to_float(w, wf, n);
                    for (int64_t i = 0; i < n; i++) mag += fabs(wf[i] * x[i]);
                    if (fabs(r - v) > 1e-5 * mag + 1e-6)
                        fprintf(stderr, "isa %d type %s n %lld: ref %g got %g\n", isa,
                                vq_ggml_type_name(all_types[k]), (long long)n, r, v);
                    ASSERT_NEAR(v, r, 1e-5 * mag + 1e-6);
                    /* the types of the golden-tested models (SmolLM2 Q4_1, Gemma 3 Q4_K_M) follow
                     * ggml's x86 order on every ISA */
                    const uint32_t t = all_types[k];
                    const int exact = t == VQ_GGML_Q4_0 || t == VQ_GGML_Q4_1 || t == VQ_GGML_Q5_0 ||
                                      t == VQ_GGML_Q8_0 || t == VQ_GGML_Q4_K || t == VQ_GGML_Q6_K;
                    if (exact && memcmp(&r, &v, 4) != 0) {
                        fprintf(stderr, "isa %d %s n %lld not bit-identical: %.9g vs %.9g\n", isa,
                                vq_ggml_type_name(t), (long long)n, r, v);
                        ASSERT(0);
                    }
                    checked++;
                }
            }
        }
    }
    ASSERT(checked > 100);
}

/* vec_dot4 (one weight row x 4 activation rows) equals vec_dot on each row bit for bit, for
 * every ISA: batched prefill and one-token decode then give identical logits. */
TEST(vec_dot4_bitwise_equals_vec_dot) {
    static uint8_t w[32 * 19 * 2];
    static vq_block_q8a act[4][19];
    static float x[32 * 19];
    int checked = 0;
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_ggml_isa_available((enum vq_isa)isa)) continue;
        for (size_t k = 0; k < N_TYPES; k++) {
            const struct vq_ggml_kernels *kv = vq_ggml_kernels(all_types[k], (enum vq_isa)isa);
            if (!kv->vec_dot4 || kv->act != VQ_ACT_Q8A) continue; /* Q4_K: test below */
            for (int nb = 1; nb <= 19; nb += 2) {
                int64_t n = 32 * nb;
                fill_random_blocks(all_types[k], w, n);
                for (int j = 0; j < 4; j++) {
                    for (int64_t i = 0; i < n; i++) x[i] = frand() * (float)(j + 1);
                    vq_quantize_row_q8a_ref(x, act[j], n);
                }
                float o4[4];
                kv->vec_dot4(n, w, act[0], sizeof act[0], o4);
                for (int j = 0; j < 4; j++) {
                    float o1 = kv->vec_dot(n, w, act[j]);
                    if (memcmp(&o1, &o4[j], 4))
                        fprintf(stderr, "isa %d %s nb %d row %d: %.9g vs %.9g\n", isa,
                                vq_ggml_type_name(all_types[k]), nb, j, o1, o4[j]);
                    ASSERT(!memcmp(&o1, &o4[j], 4));
                    checked++;
                }
            }
        }
    }
    /* the scalar table has no vec_dot4: a build without the x86 kernels checks nothing here */
    if (vq_ggml_isa_available(VQ_ISA_AVX2)) ASSERT(checked >= 4 * 10 * 3);
}

/* vec_dot_r4 (4 weight rows x one activation row, decode), vec_dot_r4x4 and vec_dot_r4x8
 * (x 4 or 8 activation rows, prefill) equal the scalar vec_dot on each pair bit for bit, for
 * rows at any stride, odd block counts and fresh random blocks (q8_0 weights of -128
 * included: the bytes are uniform). */
TEST(vec_dot_r4_bitwise_equals_vec_dot) {
    enum { NB = 21, STRIDE = 34 * NB + 6, LD = 7 };
    static uint8_t w[4 * STRIDE];
    static vq_block_q8a act[8][NB];
    static float x[32 * NB];
    int checked = 0;
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_ggml_isa_available((enum vq_isa)isa)) continue;
        for (size_t k = 0; k < N_TYPES; k++) {
            const struct vq_ggml_kernels *kv = vq_ggml_kernels(all_types[k], (enum vq_isa)isa);
            const struct vq_ggml_kernels *kr = vq_ggml_kernels(all_types[k], VQ_ISA_SCALAR);
            if (!kv->vec_dot_r4 && !kv->vec_dot_r4x4) continue;
            if (kv->act == VQ_ACT_Q8K) continue; /* K-quants: test below */
            for (int nb = 1; nb <= NB; nb += 2) {
                const int64_t n = 32 * nb;
                for (int r = 0; r < 4; r++) fill_random_blocks(all_types[k], w + r * STRIDE, n);
                for (int t = 0; t < 8; t++) {
                    for (int64_t i = 0; i < n; i++) x[i] = frand() * (float)(t + 1);
                    vq_quantize_row_q8a_ref(x, act[t], n);
                }
                float o[8 * LD], want[8 * LD];
                for (int t = 0; t < 8; t++)
                    for (int r = 0; r < 4; r++)
                        want[t * LD + r] = kr->vec_dot(n, w + r * STRIDE, act[t]);
                if (kv->vec_dot_r4) {
                    kv->vec_dot_r4(n, w, STRIDE, act[1], o);
                    for (int r = 0; r < 4; r++) {
                        if (memcmp(&want[LD + r], &o[r], 4))
                            fprintf(stderr, "isa %d %s r4 nb %d row %d: %.9g vs %.9g\n", isa,
                                    vq_ggml_type_name(all_types[k]), nb, r, want[LD + r], o[r]);
                        ASSERT(!memcmp(&want[LD + r], &o[r], 4));
                        checked++;
                    }
                }
                for (int nt = 4; nt <= 8; nt += 4) {
                    const vq_ggml_vec_dot_r4x4_fn f = nt == 4 ? kv->vec_dot_r4x4 : kv->vec_dot_r4x8;
                    if (!f) continue;
                    f(n, w, STRIDE, act[0], sizeof act[0], o, LD);
                    for (int t = 0; t < nt; t++)
                        for (int r = 0; r < 4; r++) {
                            const int e = t * LD + r;
                            if (memcmp(&want[e], &o[e], 4))
                                fprintf(stderr,
                                        "isa %d %s r4x%d nb %d row %d act %d: %.9g vs %.9g\n", isa,
                                        vq_ggml_type_name(all_types[k]), nt, nb, r, t, want[e],
                                        o[e]);
                            ASSERT(!memcmp(&want[e], &o[e], 4));
                            checked++;
                        }
                }
            }
        }
    }
    fprintf(stderr, "  vec_dot_r4 / r4x4 / r4x8: %d dots checked%s\n", checked,
            vq_cpu_avx512vnni() ? "" : " (no AVX512_VNNI here: no four-row kernels)");
    ASSERT(checked > 0 || !vq_cpu_avx512vnni());
}

/* vec_dot_r16 (16 weight rows x 1..VQ_R16_MAX_TOK activation rows, the weights repacked once)
 * equals the scalar vec_dot on each pair bit for bit: rows at an odd stride, block counts that
 * end inside the first repack chunk of 32 blocks and after one and two more, token counts odd
 * and even up to the maximum, activations with all-zero blocks (d = 0) and blocks at the
 * extremes (+-127: the offset sums of signed weights at their largest), fresh random blocks
 * (q8_0 weights of -128 included). */
TEST(vec_dot_r16_bitwise_equals_vec_dot) {
    enum { NB = 69, STRIDE = 34 * NB + 6, NT = VQ_R16_MAX_TOK };
    static uint8_t w[16 * STRIDE];
    static vq_block_q8a act[NT][NB];
    static float x[32 * NB], o[NT][16];
    const int nbs[] = {1, 3, 18, 32, 33, 48, 69}, nts[] = {1, 2, 3, 7, 16, NT};
    int checked = 0;
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_ggml_isa_available((enum vq_isa)isa)) continue;
        for (size_t k = 0; k < N_TYPES; k++) {
            const struct vq_ggml_kernels *kv = vq_ggml_kernels(all_types[k], (enum vq_isa)isa);
            const struct vq_ggml_kernels *kr = vq_ggml_kernels(all_types[k], VQ_ISA_SCALAR);
            if (!kv->vec_dot_r16) continue;
            for (size_t ib = 0; ib < sizeof nbs / sizeof nbs[0]; ib++) {
                const int nb = nbs[ib];
                const int64_t n = 32 * nb;
                for (int r = 0; r < 16; r++) fill_random_blocks(all_types[k], w + r * STRIDE, n);
                for (int t = 0; t < NT; t++) {
                    for (int64_t i = 0; i < n; i++) x[i] = frand() * (float)(t + 1);
                    if (t % 5 == 1) memset(x + 32 * (t % nb), 0, 32 * sizeof(float)); /* d = 0 */
                    if (t % 5 == 2)
                        for (int i = 0; i < 32; i++) x[32 * (nb - 1) + i] = i % 3 ? 9.0f : -9.0f;
                    vq_quantize_row_q8a_ref(x, act[t], n);
                }
                for (size_t it = 0; it < sizeof nts / sizeof nts[0]; it++) {
                    const int nt = nts[it];
                    float *out[NT];
                    for (int t = 0; t < nt; t++) {
                        out[t] = o[t];
                        for (int r = 0; r < 16; r++) o[t][r] = -999.0f;
                    }
                    kv->vec_dot_r16(n, w, STRIDE, act[NT - nt], sizeof act[0], nt, out);
                    for (int t = 0; t < nt; t++)
                        for (int r = 0; r < 16; r++) {
                            const float want = kr->vec_dot(n, w + r * STRIDE, act[NT - nt + t]);
                            if (memcmp(&want, &o[t][r], 4))
                                fprintf(stderr,
                                        "isa %d %s r16 nb %d nt %d row %d act %d: %.9g vs %.9g\n",
                                        isa, vq_ggml_type_name(all_types[k]), nb, nt, r, t, want,
                                        o[t][r]);
                            ASSERT(!memcmp(&want, &o[t][r], 4));
                            checked++;
                        }
                }
            }
        }
    }
    fprintf(stderr, "  vec_dot_r16: %d dots checked%s\n", checked,
            vq_cpu_avx512vnni() ? "" : " (no AVX512_VNNI here: no 16-row kernels)");
    ASSERT(checked >= 3 * 7 * 16 * (1 + 2 + 3 + 7 + 16 + NT) || !vq_cpu_avx512vnni());
}

/* The K-quant four-row kernels (4 weight rows x 4 Q8_K activation rows) equal the scalar
 * twins bit for bit: Q4_K its four-row kernel (vec_dot4, the gemm order), Q6_K vec_dot; the
 * decode kernels (4 weight rows x 1 activation row) vec_dot; rows at an odd stride, 1..7
 * super-blocks, fresh random blocks and activations. */
TEST(kquant_r4x4_bitwise_equals_scalar) {
    enum { NB = 7, STRIDE = 210 * NB + 10, LD = 9 };
    static uint8_t w[4 * STRIDE];
    static vq_block_q8_K act[4][NB];
    static float x[256 * NB];
    const uint32_t types[] = {VQ_GGML_Q4_K, VQ_GGML_Q6_K};
    int checked = 0;
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_ggml_isa_available((enum vq_isa)isa)) continue;
        for (size_t k = 0; k < 2; k++) {
            const struct vq_ggml_kernels *kv = vq_ggml_kernels(types[k], (enum vq_isa)isa);
            const struct vq_ggml_kernels *kr = vq_ggml_kernels(types[k], VQ_ISA_SCALAR);
            if (!kv->vec_dot_r4x4) continue;
            for (int nb = 1; nb <= NB; nb += 2) {
                const int64_t n = 256 * nb;
                for (int r = 0; r < 4; r++) fill_random_blocks(types[k], w + r * STRIDE, n);
                for (int t = 0; t < 4; t++) {
                    for (int64_t i = 0; i < n; i++) x[i] = frand() * (float)(t + 1);
                    vq_quantize_row_q8_K_ref(x, act[t], n);
                }
                float o[4 * LD], want[4 * LD];
                for (int r = 0; r < 4; r++) {
                    float o4[4];
                    if (types[k] == VQ_GGML_Q4_K)
                        kr->vec_dot4(n, w + r * STRIDE, act[0], sizeof act[0], o4);
                    else
                        for (int t = 0; t < 4; t++) o4[t] = kr->vec_dot(n, w + r * STRIDE, act[t]);
                    for (int t = 0; t < 4; t++) want[t * LD + r] = o4[t];
                }
                if (kv->vec_dot_r4) { /* decode: vec_dot's one-row order, one activation */
                    kv->vec_dot_r4(n, w, STRIDE, act[2], o);
                    for (int r = 0; r < 4; r++) {
                        const float want1 = kr->vec_dot(n, w + r * STRIDE, act[2]);
                        if (memcmp(&want1, &o[r], 4))
                            fprintf(stderr, "isa %d %s r4 nb %d row %d: %.9g vs %.9g\n", isa,
                                    vq_ggml_type_name(types[k]), nb, r, want1, o[r]);
                        ASSERT(!memcmp(&want1, &o[r], 4));
                        checked++;
                    }
                }
                kv->vec_dot_r4x4(n, w, STRIDE, act[0], sizeof act[0], o, LD);
                for (int t = 0; t < 4; t++)
                    for (int r = 0; r < 4; r++) {
                        const int e = t * LD + r;
                        if (memcmp(&want[e], &o[e], 4))
                            fprintf(stderr, "isa %d %s r4x4 nb %d row %d act %d: %.9g vs %.9g\n",
                                    isa, vq_ggml_type_name(types[k]), nb, r, t, want[e], o[e]);
                        ASSERT(!memcmp(&want[e], &o[e], 4));
                        checked++;
                    }
            }
        }
    }
    fprintf(stderr, "  K-quant r4x4: %d dots checked%s\n", checked,
            vq_cpu_avx512vnni() ? "" : " (no AVX512_VNNI here: no four-row kernels)");
    ASSERT(checked >= 2 * 4 * (16 + 4) || !vq_cpu_avx512vnni());
}

/* Q4_K's four-row kernel follows ggml's repacked gemm (one fma per 64-element chunk), its
 * one-row kernel the gemv (one per super-block): every ISA equals the scalar twins bit for bit,
 * and the two orders agree to float rounding. */
TEST(q4_K_gemm_and_gemv_orders) {
    enum { NB = 5, N = 256 * NB };
    static uint8_t w[N];
    static vq_block_q8_K act[4][NB];
    static float x[N];
    int differ = 0, checked = 0;
    for (int rep = 0; rep < 20; rep++) {
        fill_random_blocks(VQ_GGML_Q4_K, w, N);
        for (int j = 0; j < 4; j++) {
            for (int i = 0; i < N; i++) x[i] = frand() * (float)(j + 1);
            vq_quantize_row_q8_K_ref(x, act[j], N);
        }
        float r4[4], r1[4];
        vq_vec_dot4_q4_K_q8_K_ref(N, w, act[0], sizeof act[0], r4);
        for (int j = 0; j < 4; j++) r1[j] = vq_vec_dot_q4_K_q8_K_ref(N, w, act[j]);
        for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
            if (!vq_ggml_isa_available((enum vq_isa)isa)) continue;
            const struct vq_ggml_kernels *kv = vq_ggml_kernels(VQ_GGML_Q4_K, (enum vq_isa)isa);
            ASSERT(kv->vec_dot4 != NULL);
            float o4[4];
            kv->vec_dot4(N, w, act[0], sizeof act[0], o4);
            ASSERT(!memcmp(o4, r4, sizeof o4));
            for (int j = 0; j < 4; j++) {
                const float o1 = kv->vec_dot(N, w, act[j]);
                ASSERT(!memcmp(&o1, &r1[j], 4));
                checked++;
            }
        }
        for (int j = 0; j < 4; j++) {
            ASSERT_NEAR(r4[j], r1[j], 1e-5 * (fabs(r1[j]) + 1));
            differ += memcmp(&r4[j], &r1[j], 4) != 0;
        }
    }
    fprintf(stderr, "  Q4_K: gemm and gemv orders differ in the last bits for %d of 80 rows\n",
            differ);
    ASSERT(checked >= 80);
}

/* Q4_K and Q6_K repacked in 16-row groups (ggml.h): the in-place rewrite keeps every row
 * (dequantization equal), and the products through the repacked kernels of every ISA equal,
 * bit for bit, the scalar products of the original rows as the tile loop orders them (Q4_K:
 * gemm for whole groups of 4 tokens, gemv for the rest and for every token of a rowwise job
 * and of out_rows; Q6_K: vec_dot for all): 32 rows (two groups), 1, 2 and 7 super-blocks,
 * 1..13 tokens, 1 and 2 threads; shapes without a layout are refused, the data untouched. */
TEST(kquant_x16_repacked_equals_rows) {
    enum { ROWS = 32, NB = 7, TOK = 13, LD = 37 };
    static uint8_t w[ROWS * NB * 210], orig[ROWS * NB * 210];
    static vq_block_q8_K act[TOK][NB];
    static float x[256 * NB], want[TOK * LD], got[TOK * LD], fa[256 * NB], fb[256 * NB];
    ASSERT(vq_ggml_kernels_x16(VQ_GGML_Q5_K, VQ_ISA_SCALAR) == NULL);
    int checked = 0, isas = 0;
    const int nbs[] = {1, 2, NB};
    for (int ty = 0; ty < 2; ty++)
        for (size_t b = 0; b < 3; b++) {
            const uint32_t type = ty ? VQ_GGML_Q6_K : VQ_GGML_Q4_K;
            const struct vq_ggml_kernels *kr = vq_ggml_kernels(type, VQ_ISA_SCALAR);
            ASSERT(vq_ggml_kernels_x16(type, VQ_ISA_SCALAR) != NULL);
            const int nb = nbs[b];
            const int64_t n = 256 * nb;
            const size_t rb = (size_t)nb * (ty ? 210 : 144);
            fill_random_blocks(type, orig, ROWS * n);
            for (int t = 0; t < TOK; t++) {
                for (int64_t i = 0; i < n; i++) x[i] = frand() * (float)(t % 3 + 1);
                vq_quantize_row_q8_K_ref(x, act[t], n);
            }
            memcpy(w, orig, ROWS * rb);
            ASSERT_EQ_INT(vq_ggml_repack_x16(type, w, 24, n), -1); /* not 16-row groups */
            ASSERT_EQ_INT(vq_ggml_repack_x16(VQ_GGML_Q5_K, w, ROWS, n), -1);
            ASSERT(!memcmp(w, orig, ROWS * rb));
            ASSERT_EQ_INT(vq_ggml_repack_x16(type, w, ROWS, n), 0);
            ASSERT(memcmp(w, orig, ROWS * rb) != 0);
            for (int r = 0; r < ROWS; r++) {
                kr->to_float(orig + r * rb, fa, n);
                vq_ggml_dequantize_row_x16(type, w + (r / 16) * 16 * rb, r % 16, fb, n);
                ASSERT(!memcmp(fa, fb, (size_t)n * sizeof(float)));
            }
            for (int ntok = 1; ntok <= TOK; ntok++)
                for (int rowwise = 0; rowwise < 3; rowwise++) { /* 2: out_rows */
                    float *rows_out[TOK];
                    for (int t = 0; t < TOK; t++) rows_out[t] = got + t * LD;
                    for (int t = 0; t < ntok; t++)
                        for (int r = 0; r < ROWS; r++) {
                            const uint8_t *wr = orig + r * rb;
                            if (!ty && !rowwise && t < ntok - ntok % 4) {
                                float o4[4];
                                kr->vec_dot4(n, wr, act[t - t % 4], sizeof act[0], o4);
                                want[t * LD + r] = o4[t % 4];
                            } else want[t * LD + r] = kr->vec_dot(n, wr, act[t]);
                        }
                    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
                        const struct vq_ggml_kernels *kx = vq_ggml_kernels_x16(type,
                                                                               (enum vq_isa)isa);
                        if (!vq_ggml_isa_available((enum vq_isa)isa) || !kx) continue;
                        if (b == 0 && ntok == 1 && rowwise == 0) isas++;
                        for (int th = 1; th <= 2; th++) {
                            for (int i = 0; i < TOK * LD; i++) got[i] = -999.0f;
                            const struct vq_ggml_mm_job j = {kx,
                                                             w,
                                                             rb,
                                                             ROWS,
                                                             n,
                                                             act[0],
                                                             sizeof act[0],
                                                             got,
                                                             LD,
                                                             rowwise != 0,
                                                             rowwise == 2 ? rows_out : NULL};
                            vq_ggml_matmul_multi(&j, 1, ntok, th);
                            for (int t = 0; t < TOK; t++)
                                for (int r = 0; r < LD; r++) {
                                    const int e = t * LD + r;
                                    if (t >= ntok || r >= ROWS) {
                                        ASSERT(got[e] == -999.0f); /* nothing written outside */
                                        continue;
                                    }
                                    if (memcmp(&want[e], &got[e], 4))
                                        fprintf(stderr,
                                                "%s isa %d nb %d ntok %d rowwise %d row %d tok %d: "
                                                "%.9g vs %.9g\n",
                                                vq_ggml_type_name(type), isa, nb, ntok, rowwise, r,
                                                t, want[e], got[e]);
                                    ASSERT(!memcmp(&want[e], &got[e], 4));
                                    checked++;
                                }
                        }
                    }
                }
        }
    fprintf(stderr, "  Q4_K / Q6_K x16: %d products of %d type x ISA kernels checked\n", checked,
            isas);
    /* scalar everywhere; AVX2 where it runs (AVX-512 without VNNI takes the AVX2 kernels) */
    ASSERT(isas >= (vq_ggml_isa_available(VQ_ISA_AVX2) ? 4 : 2));
}

/* Matrix product with odd rows/tokens equals per-row reference dots. */
TEST(matmul_odd_shapes) {
    /* 13 tokens: one group of 8, one of 4, one alone; 37 rows: tiles of 16 with a tail of 5 */
    enum { COLS = 256, ROWS = 37, TOK = 13 };
    const uint32_t types[] = {VQ_GGML_Q4_1, VQ_GGML_Q8_0, VQ_GGML_F32, VQ_GGML_Q4_0,
                              VQ_GGML_Q5_0, VQ_GGML_Q4_K, VQ_GGML_Q6_K};
    static uint8_t w[ROWS * COLS * 4], act[TOK * COLS * 4];
    static float x[TOK * COLS], out[TOK * 41];
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const struct vq_ggml_kernels *kr = vq_ggml_kernels(types[k], VQ_ISA_SCALAR);
        const struct vq_ggml_kernels *kv = vq_ggml_kernels(types[k], VQ_ISA_AUTO);
        const struct vq_ggml_type_info *ti = vq_ggml_type_info(types[k]);
        size_t rb = (size_t)(COLS / ti->block_size * ti->type_size);
        fill_random_blocks(types[k], w, (int64_t)ROWS * COLS);
        for (int i = 0; i < TOK * COLS; i++) x[i] = frand();
        size_t ab = vq_ggml_act_row_bytes(kr->act, COLS);
        for (int t = 0; t < TOK; t++)
            vq_ggml_quantize_act(kr->act, x + t * COLS, act + t * ab, COLS);
        for (int nt = 1; nt <= 2; nt++) {
            for (int i = 0; i < TOK * 41; i++) out[i] = -999.0f;
            vq_ggml_matmul(kv, w, rb, ROWS, COLS, act, ab, TOK, out, 41, nt);
            int bad = 0;
            for (int t = 0; t < TOK; t++) {
                for (int r = 0; r < ROWS; r++) {
                    float want = kr->vec_dot(COLS, w + r * rb, act + t * ab);
                    if (fabsf(out[t * 41 + r] - want) > 1e-4f * (1 + fabsf(want))) bad++;
                }
                for (int r = ROWS; r < 41; r++)
                    if (out[t * 41 + r] != -999.0f) bad++; /* no writes past n_rows */
            }
            ASSERT_EQ_INT(bad, 0);
        }
    }
}


/* Activation quantization: the roundings of ggml's quantize_row_q8_1 (x86): d and s rounded to
 * fp16, q = round-half-even(x * 127 / amax). */
TEST(q8a_matches_ggml_q8_1) {
    float x[64];
    vq_block_q8a b[2];
    for (int i = 0; i < 64; i++) x[i] = frand() * (i < 32 ? 0.01f : 3.0f);
    x[5] = -0.01f * 1.5f; /* amax of block 0 */
    vq_quantize_row_q8a_ref(x, b, 64);
    for (int k = 0; k < 2; k++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * k + j]));
        ASSERT_EQ_INT(memcmp(&b[k].d, &(float){vq_ggml_h2f(H(amax / 127.0f))}, 4), 0);
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            ASSERT_EQ_INT(b[k].qs[j], (int)lrintf(x[32 * k + j] * (127.0f / amax)));
            sum += b[k].qs[j];
        }
        ASSERT_EQ_INT(memcmp(&b[k].s, &(float){vq_ggml_h2f(H(amax / 127.0f * (float)sum))}, 4), 0);
    }
    /* the AVX2 / AVX-512 quantizers equal the reference byte for byte (incl. an all-zero block
     * and values at the .5 rounding boundary) */
    static float xs[32 * 9];
    static vq_block_q8a r[9], v[9];
    for (int isa = VQ_ISA_AVX2; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_ggml_isa_available((enum vq_isa)isa)) continue;
        for (int rep = 0; rep < 50; rep++) {
            for (int i = 0; i < 32 * 9; i++) xs[i] = frand() * (float)(1 + rep);
            for (int i = 32; i < 64; i++) xs[i] = 0.0f;
            for (int i = 64; i < 96; i++)
                xs[i] = (float)(i - 80) * 0.5f; /* amax 7.5: q = x * 127 / 7.5 */
            vq_quantize_row_q8a_ref(xs, r, 32 * 9);
            vq_ggml_quantize_act_isa((enum vq_isa)isa, VQ_ACT_Q8A, xs, v, 32 * 9);
            ASSERT(!memcmp(r, v, sizeof r));
        }
    }
}

/* SwiGLU: the AVX2/AVX-512 twins equal the scalar reference bit for bit (with and without a
 * scalar tail); the reference is x / (1 + e^-x) * u. (The fp16 attention kernels are tested
 * with the cache: test_cache_ggml_attn.c.) */
TEST(swiglu_bitwise) {
    static float g0[203], g1[203], u[203];
    int checked = 0;
    for (int isa = VQ_ISA_AVX2; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_ggml_isa_available((enum vq_isa)isa)) continue;
        const struct vq_ggml_nn_kernels *r = vq_ggml_nn_kernels(VQ_ISA_SCALAR),
                                        *v = vq_ggml_nn_kernels((enum vq_isa)isa);
        for (int rep = 0; rep < 20; rep++) {
            const int nf = rep % 2 ? 203 : 192; /* with and without a scalar tail */
            for (int i = 0; i < nf; i++) {
                g0[i] = g1[i] = frand() * (rep < 10 ? 12.0f : 120.0f);
                u[i] = frand();
            }
            r->swiglu(g0, u, nf);
            v->swiglu(g1, u, nf);
            ASSERT(!memcmp(g0, g1, sizeof(float) * (size_t)nf));
            checked++;
        }
    }
    fprintf(stderr, "  swiglu: %d ISA cases bit-identical to scalar\n", checked);
    float g = 2.0f, one = 1.0f;
    vq_ggml_swiglu_ref(&g, &one, 1);
    ASSERT_NEAR(g, 2.0 / (1.0 + exp(-2.0)), 1e-6);
}

/* The GELU table equals ggml's ggml_table_gelu_f16 entry for entry: its sha256 was read from
 * llama.cpp's own table (libggml-cpu of llama-cpp-python 0.3.36, after ggml_cpu_init, on this
 * project's machine); one of the 65536 entries (x = -1.999) depends on the FMA gcc forms in
 * ggml's build. GEGLU applies it as ggml_vec_geglu_f32 does, with its cut-offs at +-10. */
TEST(gelu_table_equals_ggml) {
    static uint16_t t[VQ_GELU_TABLE_LEN];
    vq_ggml_gelu_table_init(t);
    uint8_t h[32], want[32];
    struct vq_sha256 s;
    vq_sha256_init(&s);
    vq_sha256_update(&s, t, 65536 * sizeof t[0]); /* the padding entry is not ggml's */
    vq_sha256_final(&s, h);
    ASSERT(vq_sha256_from_hex("5eceda6f287dec9dc0bcfa24516d6744a031a5c52d1984688b4558aeb1daf909",
                              want));
    ASSERT(!memcmp(h, want, 32));
    ASSERT_EQ_INT(t[49151], 0xa9d3);
    float g[5] = {-10.0f, 10.0f, 1.0f, -0.5f, 0.0f}, u[5] = {3.0f, 2.0f, 2.0f, 1.0f, 5.0f};
    vq_ggml_geglu_ref(t, g, u, 5);
    ASSERT_NEAR(g[0], 0.0, 0);
    ASSERT_NEAR(g[1], 20.0, 0);
    ASSERT_NEAR(g[2], 2 * 0.8411920071, 2e-3); /* tanh-GELU(1) through fp16 */
    ASSERT_NEAR(g[3], -0.1542859972, 2e-4);
    ASSERT_NEAR(g[4], 0.0, 0);
    /* every ISA's GEGLU equals the scalar one bit for bit: values across the cut-offs (+-10
     * exactly), tiny and subnormal values, rows with and without a tail */
    static float g0[211], g1[211], uu[211];
    int checked = 0;
    for (int isa = VQ_ISA_AVX2; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_ggml_isa_available((enum vq_isa)isa)) continue;
        const struct vq_ggml_nn_kernels *v = vq_ggml_nn_kernels((enum vq_isa)isa);
        for (int rep = 0; rep < 20; rep++) {
            const int nf = rep % 2 ? 211 : 192;
            for (int i = 0; i < nf; i++) {
                g0[i] = g1[i] = frand() * (rep < 10 ? 12.0f : 3.0f);
                uu[i] = frand();
            }
            g0[3] = g1[3] = 10.0f;
            g0[4] = g1[4] = -10.0f;
            g0[5] = g1[5] = 1e-40f;
            g0[6] = g1[6] = -3e-6f;
            vq_ggml_geglu_ref(t, g0, uu, nf);
            v->geglu(t, g1, uu, nf);
            ASSERT(!memcmp(g0, g1, sizeof(float) * (size_t)nf));
            checked++;
        }
    }
    fprintf(stderr, "  geglu: %d ISA cases bit-identical to scalar\n", checked);
}

/* The vector Q8_K quantizers equal the reference byte for byte: the first element of largest
 * magnitude sets the sign of the scale (ties of +-amax), all-zero blocks, .5 boundaries. */
TEST(q8_K_quantizers_match_ref) {
    enum { NB = 5 };
    static float xs[256 * NB];
    static vq_block_q8_K r[NB], v[NB];
    int checked = 0;
    for (int isa = VQ_ISA_AVX2; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_ggml_isa_available((enum vq_isa)isa)) continue;
        for (int rep = 0; rep < 40; rep++) {
            for (int i = 0; i < 256 * NB; i++) xs[i] = frand() * (float)(1 + rep);
            for (int i = 256; i < 512; i++) xs[i] = 0.0f;
            for (int i = 512; i < 768; i++) xs[i] = (float)(i - 640) * 0.5f; /* .5 steps */
            xs[768 + 7] = -50.0f; /* a tie: -amax first, +amax later */
            xs[768 + 200] = 50.0f;
            xs[1024 + 9] = 60.0f; /* +amax first, -amax later */
            xs[1024 + 100] = -60.0f;
            vq_quantize_row_q8_K_ref(xs, r, 256 * NB);
            vq_ggml_quantize_act_isa((enum vq_isa)isa, VQ_ACT_Q8K, xs, v, 256 * NB);
            ASSERT(!memcmp(r, v, sizeof r));
            checked++;
        }
    }
    fprintf(stderr, "  q8_K: %d ISA cases byte-identical to the reference\n", checked);
}

int main(void) {
    RUN(half_conversion);
    RUN(dequant_legacy_known);
    RUN(dequant_kquants_known);
    RUN(quantize_round_trip);
    RUN(ref_dot_vs_fp64);
    RUN(isa_variants_match_ref);
    RUN(vec_dot4_bitwise_equals_vec_dot);
    RUN(vec_dot_r4_bitwise_equals_vec_dot);
    RUN(vec_dot_r16_bitwise_equals_vec_dot);
    RUN(kquant_r4x4_bitwise_equals_scalar);
    RUN(q4_K_gemm_and_gemv_orders);
    RUN(kquant_x16_repacked_equals_rows);
    RUN(matmul_odd_shapes);
    RUN(q8a_matches_ggml_q8_1);
    RUN(swiglu_bitwise);
    RUN(gelu_table_equals_ggml);
    RUN(q8_K_quantizers_match_ref);
    return TEST_REPORT();
}
