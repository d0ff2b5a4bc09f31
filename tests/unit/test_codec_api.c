/* test_codec_api.c — codec registry, parameter validation, the generic codec contract
 * (checked for every registered method and every available ISA), and the fp16 kernels
 * (every ISA variant against the scalar reference on odd sizes). */
#include "test.h"
#include "veloxquant.h"
#include "codecs/codec_impl.h"
#include "codecs/fp16.h"

#define VQ_TEST_SEED 0x9E3779B97F4A7C15ull
#include "test_data.h"
static void fill(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = scale * nrand();
}

TEST(defaults_and_names) {
    struct vq_codec_params p = vq_codec_params_default();
    ASSERT_EQ_INT(p.method, VQ_METHOD_FP16);
    ASSERT_EQ_INT(p.role, VQ_ROLE_KEY);
    ASSERT_EQ_INT(p.head_dim, 128);
    ASSERT_EQ_INT(p.bits, 4);
    ASSERT_EQ_INT(p.seed, 42);
    ASSERT_EQ_INT(p.unbiased_scale, 1);
    ASSERT_EQ_INT(p.jl_dim, 0);
    ASSERT_EQ_INT(p.group_size, 32);
    ASSERT_EQ_INT(p.residual_length, 128);
    ASSERT_EQ_INT(p.n_sink_tokens, 5);
    ASSERT_EQ_INT(p.polar_bits[0], 4);
    ASSERT_EQ_INT(p.polar_bits[3], 2);
    ASSERT_EQ_INT(p.isa, VQ_ISA_AUTO);
    for (int m = 0; m < VQ_METHOD_COUNT; m++) {
        const char *nm = vq_method_name((enum vq_method)m);
        ASSERT(nm != NULL);
        enum vq_method back = VQ_METHOD_COUNT;
        ASSERT_STATUS(vq_method_from_name(nm, &back), VQ_STATUS_OK);
        ASSERT_EQ_INT(back, m);
        const struct vq_codec_i *it = vq_codec_iface((enum vq_method)m);
        if (it) ASSERT(strcmp(it->name, nm) == 0);
    }
    ASSERT(strcmp(vq_method_name(VQ_METHOD_TURBOQUANT_MSE), "turboquant_mse") == 0);
    ASSERT(vq_method_name(VQ_METHOD_COUNT) == NULL);
    ASSERT(vq_method_name((enum vq_method) - 1) == NULL);
    enum vq_method m;
    ASSERT_STATUS(vq_method_from_name("nope", &m), VQ_STATUS_NOT_FOUND);
    ASSERT_STATUS(vq_method_from_name(NULL, &m), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_method_from_name("fp16", NULL), VQ_STATUS_INVALID_ARG);
    ASSERT(vq_codec_iface(VQ_METHOD_FP16) != NULL);
    ASSERT(vq_codec_iface(VQ_METHOD_FP32) != NULL);
    ASSERT(vq_codec_iface(VQ_METHOD_COUNT) == NULL);
}

TEST(create_validation) {
    vq_status st = 123;
    ASSERT(vq_codec_create(NULL, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    ASSERT(vq_codec_create(NULL, NULL) == NULL); /* st may be NULL */
    const int bad_dims[] = {0, 7, 12, 1025, 1032, -8};
    for (size_t i = 0; i < sizeof bad_dims / sizeof *bad_dims; i++) {
        struct vq_codec_params p = vq_codec_params_default();
        p.head_dim = bad_dims[i];
        ASSERT(vq_codec_create(&p, &st) == NULL);
        ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    }
    struct vq_codec_params p = vq_codec_params_default();
    p.method = VQ_METHOD_COUNT;
    ASSERT(vq_codec_create(&p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    p = vq_codec_params_default();
    p.role = (enum vq_role)2;
    ASSERT(vq_codec_create(&p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    p = vq_codec_params_default();
    p.isa = VQ_ISA_COUNT;
    ASSERT(vq_codec_create(&p, &st) == NULL);
    ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        p = vq_codec_params_default();
        p.isa = (enum vq_isa)isa;
        vq_codec *c = vq_codec_create(&p, &st);
        if (vq_isa_available((enum vq_isa)isa)) {
            ASSERT(c != NULL);
            ASSERT_EQ_INT(vq_codec_params_get(c)->isa, isa);
        } else {
            ASSERT(c == NULL);
            ASSERT_STATUS(st, VQ_STATUS_UNSUPPORTED);
        }
        vq_codec_free(c);
    }
    for (int m = 0; m < VQ_METHOD_COUNT; m++) {
        if (vq_codec_iface((enum vq_method)m)) continue;
        p = vq_codec_params_default();
        p.method = (enum vq_method)m;
        ASSERT(vq_codec_create(&p, &st) == NULL);
        ASSERT_STATUS(st, VQ_STATUS_UNSUPPORTED);
    }
    vq_codec_free(NULL);
    ASSERT_EQ_INT(vq_codec_block_tokens(NULL), 0);
    ASSERT_EQ_INT(vq_codec_block_bytes(NULL), 0);
    ASSERT(vq_codec_params_get(NULL) == NULL);
}

TEST(fp16_fp32_records) {
    for (int d = 8; d <= 136; d += 8) {
        struct vq_codec_params p = vq_codec_params_default();
        p.head_dim = d;
        vq_status st;
        vq_codec *h = vq_codec_create(&p, &st);
        p.method = VQ_METHOD_FP32;
        vq_codec *f = vq_codec_create(&p, &st);
        ASSERT(h && f);
        if (!h || !f) {
            vq_codec_free(h);
            vq_codec_free(f);
            return;
        }
        ASSERT_EQ_INT(vq_codec_block_tokens(h), 1);
        ASSERT_EQ_INT(vq_codec_block_bytes(h), 2 * d);
        ASSERT_EQ_INT(vq_codec_block_bytes(f), 4 * d);
        ASSERT_NEAR(vq_codec_bits_per_elem(h), 16.0, 0);
        ASSERT_NEAR(vq_codec_bits_per_elem(f), 32.0, 0);
        float x[3 * 136], y[3 * 136];
        uint8_t buf[3 * 136 * 4];
        fill(x, 3 * d, 3.0f);
        ASSERT_STATUS(vq_codec_encode(f, x, 3, buf), VQ_STATUS_OK);
        ASSERT_STATUS(vq_codec_decode(f, buf, 3, y), VQ_STATUS_OK);
        ASSERT(memcmp(x, y, (size_t)(3 * d) * sizeof(float)) == 0);
        ASSERT_STATUS(vq_codec_encode(h, x, 3, buf), VQ_STATUS_OK);
        ASSERT_STATUS(vq_codec_decode(h, buf, 3, y), VQ_STATUS_OK);
        int bad = 0;
        for (int i = 0; i < 3 * d; i++) {
            const uint16_t *hh = (const uint16_t *)(const void *)buf;
            bad += hh[i] != vq_fp32_to_fp16(x[i]);
            bad += fabsf(y[i] - x[i]) > fabsf(x[i]) * (1.0f / 2048.0f) + 1e-7f;
        }
        ASSERT_EQ_INT(bad, 0);
        vq_codec_free(h);
        vq_codec_free(f);
    }
}

TEST(encode_errors) {
    struct vq_codec_params p = vq_codec_params_default();
    p.head_dim = 16;
    vq_codec *h = vq_codec_create(&p, NULL);
    p.method = VQ_METHOD_FP32;
    vq_codec *f = vq_codec_create(&p, NULL);
    ASSERT(h && f);
    if (!h || !f) return;
    float x[32];
    uint8_t buf[256];
    fill(x, 32, 1.0f);
    ASSERT_STATUS(vq_codec_encode(h, x, -1, buf), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_codec_encode(h, NULL, 2, buf), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_codec_encode(h, x, 2, NULL), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_codec_encode(NULL, x, 2, buf), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_codec_decode(h, NULL, 2, x), VQ_STATUS_INVALID_ARG);
    ASSERT_STATUS(vq_codec_encode(h, x, 0, NULL), VQ_STATUS_OK);
    x[20] = 65504.0f;
    ASSERT_STATUS(vq_codec_encode(h, x, 2, buf), VQ_STATUS_OK);
    x[20] = -65505.0f;
    ASSERT_STATUS(vq_codec_encode(h, x, 2, buf), VQ_STATUS_RANGE);
    ASSERT_STATUS(vq_codec_encode(f, x, 2, buf), VQ_STATUS_OK);
    x[3] = NAN;
    ASSERT_STATUS(vq_codec_encode(h, x, 2, buf), VQ_STATUS_NON_FINITE);
    ASSERT_STATUS(vq_codec_encode(f, x, 2, buf), VQ_STATUS_NON_FINITE);
    x[3] = -INFINITY;
    ASSERT_STATUS(vq_codec_encode(h, x, 2, buf), VQ_STATUS_NON_FINITE);
    ASSERT_STATUS(vq_codec_encode(f, x, 2, buf), VQ_STATUS_NON_FINITE);
    vq_codec_free(h);
    vq_codec_free(f);
}

/* Generic contract for every registered codec with its default parameters: the fused score
 * equals <q, decode(x)> and accumulate+finish equals sum_t w_t decode(x_t), on every ISA;
 * encoding is deterministic. */
static void check_contract(enum vq_method m, enum vq_role role, int d, enum vq_isa isa) {
    struct vq_codec_params p = vq_codec_params_default();
    p.method = m;
    p.role = role;
    p.head_dim = d;
    p.isa = isa;
    p.group_size = 16; /* KIVI values need head_dim % G == 0 (d = 80) */
    p.residual_length = 32;
    if (m == VQ_METHOD_TURBOQUANT_RVQ) p.bits = 2; /* bits per stage: 1..2 */
    vq_status st;
    vq_codec *c = vq_codec_create(&p, &st);
    if (!c) {
        fprintf(stderr, "  %s d=%d isa=%s: create failed: %s\n", vq_method_name(m), d,
                vq_isa_name(isa), vq_status_str(st));
        ASSERT(c != NULL);
        return;
    }
    const int bt = vq_codec_block_tokens(c);
    const int64_t n = (int64_t)bt * (bt == 1 ? 37 : 3);
    const size_t bb = vq_codec_block_bytes(c);
    float *x = malloc((size_t)(n * d) * sizeof(float));
    float *y = malloc((size_t)(n * d) * sizeof(float));
    uint8_t *codes = malloc(bb * (size_t)(n / bt));
    uint8_t *codes2 = malloc(bb * (size_t)(n / bt));
    float *q = malloc((size_t)d * sizeof(float));
    void *qs = vq_alloc(vq_codec_query_bytes(c) + 64);
    float *sc = malloc((size_t)n * sizeof(float)), *w = malloc((size_t)n * sizeof(float));
    float *acc = calloc(vq_codec_acc_floats(c), sizeof(float));
    float *out = malloc((size_t)d * sizeof(float));
    for (int64_t i = 0; i < n * d; i++) x[i] = nrand() + 0.3f * (float)((i % d) % 5);
    fill(q, d, 1.0f);
    for (int64_t t = 0; t < n; t++) w[t] = (float)urand();
    ASSERT_STATUS(vq_codec_encode(c, x, n, codes), VQ_STATUS_OK);
    ASSERT_STATUS(vq_codec_encode(c, x, n, codes2), VQ_STATUS_OK);
    ASSERT(memcmp(codes, codes2, bb * (size_t)(n / bt)) == 0);
    ASSERT_STATUS(vq_codec_decode(c, codes, n, y), VQ_STATUS_OK);
    vq_codec_prepare_query(c, q, qs);
    vq_codec_score(c, qs, codes, n, sc);
    vq_codec_accumulate(c, codes, n, w, acc);
    vq_codec_finish(c, acc, out);
    double qn = 0;
    for (int i = 0; i < d; i++) qn += (double)q[i] * q[i];
    int bad_s = 0, bad_a = 0;
    double ref_out[1024] = {0}, out_norm = 0;
    for (int64_t t = 0; t < n; t++) {
        double dot = 0, yn = 0;
        for (int i = 0; i < d; i++) {
            dot += (double)q[i] * y[t * d + i];
            yn += (double)y[t * d + i] * y[t * d + i];
            ref_out[i] += (double)w[t] * y[t * d + i];
        }
        if (fabs(sc[t] - dot) > 1e-4 * sqrt(qn * yn) + 1e-6) bad_s++;
    }
    for (int i = 0; i < d; i++) out_norm += ref_out[i] * ref_out[i];
    for (int i = 0; i < d; i++)
        if (fabs(out[i] - ref_out[i]) > 1e-4 * sqrt(out_norm) + 1e-6) bad_a++;
    if (bad_s || bad_a)
        fprintf(stderr, "  %s role=%d d=%d isa=%s: %d score / %d value mismatches\n",
                vq_method_name(m), (int)role, d, vq_isa_name(isa), bad_s, bad_a);
    ASSERT_EQ_INT(bad_s, 0);
    ASSERT_EQ_INT(bad_a, 0);
    free(x);
    free(y);
    free(codes);
    free(codes2);
    free(q);
    vq_free(qs);
    free(sc);
    free(w);
    free(acc);
    free(out);
    vq_codec_free(c);
}

TEST(registry_contract) {
    const int dims[] = {64, 80, 128};
    for (int m = 0; m < VQ_METHOD_COUNT; m++) {
        if (!vq_codec_iface((enum vq_method)m)) continue;
        for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
            if (!vq_isa_available((enum vq_isa)isa)) continue;
            for (size_t k = 0; k < sizeof dims / sizeof *dims; k++) {
                check_contract((enum vq_method)m, VQ_ROLE_KEY, dims[k], (enum vq_isa)isa);
                check_contract((enum vq_method)m, VQ_ROLE_VALUE, dims[k], (enum vq_isa)isa);
            }
        }
    }
}

#ifdef VQ_HAVE_X86
typedef void (*score_fn)(const float *, const uint16_t *, int, int64_t, float *);
typedef void (*acc_fn)(const uint16_t *, int, int64_t, const float *, float *);

TEST(fp16_kernels_vs_ref) {
    const score_fn sf[2] = {vq_fp16_score_avx2, vq_fp16_score_avx512};
    const acc_fn af[2] = {vq_fp16_accumulate_avx2, vq_fp16_accumulate_avx512};
    const enum vq_isa isas[2] = {VQ_ISA_AVX2, VQ_ISA_AVX512};
    const int dims[] = {8, 16, 24, 40, 56, 64, 72, 80, 96, 120, 128, 136, 200, 256, 1024};
    const int64_t ns[] = {1, 2, 7, 8, 9, 15, 16, 17, 37, 100};
    float *q = malloc(1024 * sizeof(float)), *xf = malloc(100 * 1024 * sizeof(float));
    uint16_t *x = malloc(100 * 1024 * sizeof(uint16_t));
    float s_ref[100], s[100], w[100], *a_ref = malloc(1024 * 4), *a = malloc(1024 * 4);
    for (int v = 0; v < 2; v++) {
        if (!vq_isa_available(isas[v])) continue;
        int bad = 0;
        for (size_t di = 0; di < sizeof dims / sizeof *dims; di++) {
            const int d = dims[di];
            for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
                const int64_t n = ns[ni];
                fill(q, d, 1.0f);
                fill(xf, n * d, 2.0f);
                for (int64_t i = 0; i < n * d; i++) x[i] = vq_fp32_to_fp16(xf[i]);
                for (int64_t t = 0; t < n; t++) w[t] = (float)urand() - 0.2f;
                for (int i = 0; i < d; i++) a_ref[i] = a[i] = (float)i * 0.01f;
                vq_fp16_score_ref(q, x, d, n, s_ref);
                sf[v](q, x, d, n, s);
                vq_fp16_accumulate_ref(x, d, n, w, a_ref);
                af[v](x, d, n, w, a);
                for (int64_t t = 0; t < n; t++)
                    bad += fabsf(s[t] - s_ref[t]) > 1e-5f * (2.0f * (float)d);
                for (int i = 0; i < d; i++)
                    bad += fabsf(a[i] - a_ref[i]) > 1e-5f * (2.0f * (float)n + 1.0f);
            }
        }
        if (bad) fprintf(stderr, "  %s: %d mismatches\n", vq_isa_name(isas[v]), bad);
        ASSERT_EQ_INT(bad, 0);
    }
    free(q);
    free(xf);
    free(x);
    free(a_ref);
    free(a);
}
#endif

/* The traits of every method (vq_method_info) agree with what its codec accepts: bits in
 * min..max create, outside fail with INVALID_ARG (methods with a choice of widths), the default
 * is accepted, needs_calibration matches the flag, set_bits / bits / label round-trip, and the
 * flags agree with the cache's rules (fp16 rows only for fp16; sinks only with a window). */
TEST(method_traits) {
    for (int mi_ = 0; mi_ < VQ_METHOD_COUNT; mi_++) {
        const enum vq_method m = (enum vq_method)mi_;
        struct vq_method_info mi;
        ASSERT_STATUS(vq_method_info_get(m, &mi), VQ_STATUS_OK);
        if (!mi.implemented) continue;
        ASSERT(mi.min_bits >= 1 && mi.min_bits <= mi.max_bits);
        ASSERT(mi.default_bits >= mi.min_bits && mi.default_bits <= mi.max_bits);
        ASSERT_EQ_INT(vq_method_default_bits(m), mi.default_bits);
        ASSERT_EQ_INT(vq_method_flags(m), mi.flags);
        ASSERT_EQ_INT(mi.needs_calibration, (mi.flags & VQ_METHOD_F_CALIBRATION) != 0);
        ASSERT_EQ_INT(mi.needs_calibration, /* a calibrated method names its artifact kind */
                      (mi.flags & (VQ_METHOD_F_CALIB_CODEBOOK | VQ_METHOD_F_CALIB_PCA)) != 0);
        ASSERT_EQ_INT((mi.flags & VQ_METHOD_F_QUANTIZED) != 0, mi.default_bits < 16);
        ASSERT(!(mi.flags & VQ_METHOD_F_SINKS) || (mi.flags & VQ_METHOD_F_WINDOWED));
        ASSERT(!(mi.flags & VQ_METHOD_F_OUTLIER_CHANNELS) ||
               (mi.flags & VQ_METHOD_F_OUTLIER_TOKENS));
        struct vq_codec_params p = vq_codec_params_default();
        ASSERT_STATUS(vq_codec_params_set_method(&p, m), VQ_STATUS_OK);
        ASSERT_EQ_INT(p.bits, mi.default_bits);
        ASSERT_NEAR(vq_codec_params_bits(&p), mi.default_bits, 0);
        if (mi.min_bits == mi.max_bits) continue; /* bits is not read (qjl, polar, fp16, fp32) */
        for (int b = 1; b <= 16; b++) {
            struct vq_codec_params q = p;
            q.bits = b;
            vq_status st = VQ_STATUS_OK;
            vq_codec *c = vq_codec_create(&q, &st);
            const int in = b >= mi.min_bits && b <= mi.max_bits;
            ASSERT_EQ_INT(c != NULL, in);
            if (!in) ASSERT_STATUS(st, VQ_STATUS_INVALID_ARG);
            vq_codec_free(c);
            ASSERT_STATUS(vq_codec_params_set_bits(&q, b), in ? VQ_STATUS_OK : VQ_STATUS_RANGE);
            if (in) ASSERT_NEAR(vq_codec_params_bits(&q), b, 0);
        }
        char lab[64];
        ASSERT(vq_codec_params_label(&p, lab, sizeof lab) > 0 && strchr(lab, '/') != NULL);
    }
    /* fp16 is the one method whose rows are plain fp16; qjl has no width choice: no "/B-bit" */
    ASSERT_EQ_INT(vq_method_flags(VQ_METHOD_FP16), VQ_METHOD_F_FP16_ROWS);
    struct vq_codec_params p = vq_codec_params_default();
    char lab[64];
    ASSERT_STATUS(vq_codec_params_set_method(&p, VQ_METHOD_QJL), VQ_STATUS_OK);
    vq_codec_params_label(&p, lab, sizeof lab);
    ASSERT(!strcmp(lab, "qjl"));
    /* vecinfer 1.5: shape (12, 8), nominal 1.5 bits, label, stored bits/elem exactly 1.5 */
    ASSERT_STATUS(vq_codec_params_set_method(&p, VQ_METHOD_VECINFER), VQ_STATUS_OK);
    ASSERT_STATUS(vq_codec_params_set_bits(&p, 1.5), VQ_STATUS_OK);
    ASSERT_EQ_INT(p.pq_codeword_bits, 12);
    ASSERT_EQ_INT(p.pq_subvec_dim, 8);
    ASSERT_NEAR(vq_codec_params_bits(&p), 1.5, 0);
    vq_codec_params_label(&p, lab, sizeof lab);
    ASSERT(!strcmp(lab, "vecinfer/1.5-bit"));
    p.head_dim = 64;
    vq_codec *c = vq_codec_create(&p, NULL);
    ASSERT(c != NULL);
    if (c) ASSERT_NEAR(vq_codec_bits_per_elem(c), 1.5, 0);
    vq_codec_free(c);
    ASSERT_STATUS(vq_codec_params_set_bits(&p, 2), VQ_STATUS_OK); /* back to a preset */
    ASSERT_EQ_INT(p.pq_codeword_bits, 0);
    ASSERT_NEAR(vq_codec_params_bits(&p), 2, 0);
    /* a fractional width elsewhere, or on fp16, is refused and leaves p unchanged */
    ASSERT_STATUS(vq_codec_params_set_method(&p, VQ_METHOD_TURBOQUANT_MSE), VQ_STATUS_OK);
    ASSERT_STATUS(vq_codec_params_set_bits(&p, 2.5), VQ_STATUS_RANGE);
    ASSERT_EQ_INT(p.bits, 4);
    ASSERT_STATUS(vq_codec_params_set_method(&p, VQ_METHOD_COUNT), VQ_STATUS_INVALID_ARG);
    ASSERT_EQ_INT(vq_method_flags(VQ_METHOD_COUNT), 0);
}

/* vq_codec_use_ref_kernels: vecinfer and spectral switch to their reference kernels, which
 * score and decode the same codes as the kernels they replace; methods without separate
 * reference kernels say UNSUPPORTED and keep working; NULL is refused. */
TEST(use_ref_kernels) {
    ASSERT_STATUS(vq_codec_use_ref_kernels(NULL), VQ_STATUS_INVALID_ARG);
    enum { D = 64, N = 48 };
    float x[N * D], q[D], w[N], s0[N], s1[N], o0[D], o1[D];
    fill(x, N * D, 1.0f);
    fill(q, D, 1.0f);
    for (int t = 0; t < N; t++) w[t] = 1.0f / N;
    for (int m = 0; m < VQ_METHOD_COUNT; m++) {
        struct vq_codec_params p = vq_codec_params_default();
        if (vq_codec_params_set_method(&p, (enum vq_method)m) != VQ_STATUS_OK) continue;
        p.head_dim = D;
        vq_status st;
        vq_codec *a = vq_codec_create(&p, &st), *r = vq_codec_create(&p, &st);
        if (!a || !r) { /* not built, or needs options this test does not give */
            vq_codec_free(a);
            vq_codec_free(r);
            continue;
        }
        const int want = (vq_method_flags((enum vq_method)m) & VQ_METHOD_F_CALIBRATION) != 0;
        ASSERT_STATUS(vq_codec_use_ref_kernels(r), want ? VQ_STATUS_OK : VQ_STATUS_UNSUPPORTED);
        const int64_t bt = vq_codec_block_tokens(a), n = N / bt * bt;
        uint8_t *codes = vq_alloc((size_t)(n / bt) * vq_codec_block_bytes(a));
        void *qa = vq_alloc(vq_codec_query_bytes(a)), *qr = vq_alloc(vq_codec_query_bytes(r));
        float *aa = vq_alloc(sizeof(float) * vq_codec_acc_floats(a));
        float *ar = vq_alloc(sizeof(float) * vq_codec_acc_floats(r));
        ASSERT_STATUS(vq_codec_encode(a, x, n, codes), VQ_STATUS_OK);
        vq_codec_prepare_query(a, q, qa);
        vq_codec_prepare_query(r, q, qr);
        vq_codec_score(a, qa, codes, n, s0);
        vq_codec_score(r, qr, codes, n, s1);
        for (int64_t t = 0; t < n; t++) ASSERT_NEAR(s1[t], s0[t], 1e-3 * (1 + fabsf(s0[t])));
        vq_codec_accumulate(a, codes, n, w, aa);
        vq_codec_accumulate(r, codes, n, w, ar);
        vq_codec_finish(a, aa, o0);
        vq_codec_finish(r, ar, o1);
        for (int i = 0; i < D; i++) ASSERT_NEAR(o1[i], o0[i], 1e-3 * (1 + fabsf(o0[i])));
        vq_free(codes);
        vq_free(qa);
        vq_free(qr);
        vq_free(aa);
        vq_free(ar);
        vq_codec_free(a);
        vq_codec_free(r);
    }
}

static void multi_query_case(int d);

/* vq_codec_score_multi / vq_codec_accumulate_multi (the optional multi-query kernels: KIVI keys
 * (every ISA), turboquant_mse / _rvq values (d = 64, 256, 96 and 128; AVX-512 and AVX2) and
 * 5..8-bit and int8 scores
 * and values on AVX-512 without VBMI's kernels; the loop elsewhere)
 * give each query the same bits as its own score / accumulate call, for 1..6 queries and
 * odd token counts, on every ISA. */
TEST(multi_query_kernels_bitwise) {
    const int dims[] = {64, 256, 96,
                        128}; /* d > 64: turboquant's pairs / groups (96: a partial chunk) */
    for (int di = 0; di < 4; di++) multi_query_case(dims[di]);
}

static void multi_query_case(int d) {
    uint8_t cb[64];
    for (int i = 0; i < 64; i++)
        cb[i] = i < 8 ? 6 : i < 16 ? 4 : i < 48 ? 4 : i < 56 ? 3 : 3; /* mean 4, 3 classes */
    struct {
        enum vq_method m;
        int bits, role;
        const uint8_t *cbits;
    } cs[] = {{VQ_METHOD_KIVI, 4, VQ_ROLE_KEY, cb},
              {VQ_METHOD_KIVI, 4, VQ_ROLE_KEY, NULL},
              {VQ_METHOD_TURBOQUANT_MSE, 4, VQ_ROLE_VALUE, NULL},
              {VQ_METHOD_TURBOQUANT_MSE, 3, VQ_ROLE_VALUE, NULL},
              {VQ_METHOD_TURBOQUANT_MSE, 2, VQ_ROLE_VALUE, NULL},
              {VQ_METHOD_TURBOQUANT_MSE, 5, VQ_ROLE_VALUE, NULL},
              {VQ_METHOD_TURBOQUANT_MSE, 6, VQ_ROLE_VALUE, NULL},
              {VQ_METHOD_TURBOQUANT_RVQ, 1, VQ_ROLE_VALUE, NULL},
              {VQ_METHOD_INT8, 8, VQ_ROLE_VALUE, NULL}};
    const int64_t ns[] = {1, 2, 7, 64, 129};
    int multi_paths = 0;
    for (int isa = VQ_ISA_SCALAR; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_available((enum vq_isa)isa)) continue;
        for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++) {
            struct vq_codec_params p = vq_codec_params_default();
            p.method = cs[ci].m;
            p.bits = cs[ci].bits;
            p.role = (enum vq_role)cs[ci].role;
            p.head_dim = d;
            p.group_size = 64;
            p.channel_bits = cs[ci].cbits;
            if (d != 64 && (cs[ci].m == VQ_METHOD_KIVI || cs[ci].m == VQ_METHOD_INT8) &&
                (d != 128 || cs[ci].cbits))
                continue; /* d > 64: turboquant's cases, and KIVI / int8 at 128 (Qwen2.5) */
            p.isa = (enum vq_isa)isa;
            vq_status st;
            vq_codec *c = vq_codec_create(&p, &st);
            if (!c) fprintf(stderr, "  case %zu: %s\n", ci, vq_status_str(st));
            ASSERT(c != NULL);
            if (!c) continue;
            multi_paths += c->score_multi != NULL || c->accumulate_multi != NULL;
            const int bt = vq_codec_block_tokens(c);
            for (size_t ni = 0; ni < 5; ni++) {
                const int64_t n = (ns[ni] + bt - 1) / bt * bt;
                float *x = malloc((size_t)(n * d) * sizeof(float));
                for (int64_t i = 0; i < n * d; i++) x[i] = nrand() + (float)(i % d % 5);
                uint8_t *codes = malloc(vq_codec_block_bytes(c) * (size_t)(n / bt));
                ASSERT_STATUS(vq_codec_encode(c, x, n, codes), VQ_STATUS_OK);
                const int nq = 1 + (int)((ni + ci) % 6);
                void *qs[6];
                float *s1[6], *s2[6], *w[6], *a1[6], *a2[6];
                for (int j = 0; j < nq; j++) {
                    float q[256];
                    for (int i = 0; i < d; i++) q[i] = nrand();
                    qs[j] = malloc(vq_codec_query_bytes(c));
                    vq_codec_prepare_query(c, q, qs[j]);
                    s1[j] = malloc((size_t)n * sizeof(float));
                    s2[j] = malloc((size_t)n * sizeof(float));
                    w[j] = malloc((size_t)n * sizeof(float));
                    for (int64_t t = 0; t < n; t++) w[j][t] = (float)urand();
                    a1[j] = calloc(vq_codec_acc_floats(c), sizeof(float));
                    a2[j] = calloc(vq_codec_acc_floats(c), sizeof(float));
                    vq_codec_score(c, qs[j], codes, n, s1[j]);
                    vq_codec_accumulate(c, codes, n, w[j], a1[j]);
                }
                vq_codec_score_multi(c, (const void *const *)qs, nq, codes, n, s2);
                vq_codec_accumulate_multi(c, codes, n, (const float *const *)w, nq, a2);
                for (int j = 0; j < nq; j++) {
                    ASSERT(memcmp(s1[j], s2[j], (size_t)n * sizeof(float)) == 0);
                    ASSERT(memcmp(a1[j], a2[j], vq_codec_acc_floats(c) * sizeof(float)) == 0);
                    free(qs[j]), free(s1[j]), free(s2[j]), free(w[j]), free(a1[j]), free(a2[j]);
                }
                free(x);
                free(codes);
            }
            vq_codec_free(c);
        }
    }
    if (vq_isa_available(VQ_ISA_AVX512)) ASSERT_GE(multi_paths, d == 64 ? 4 : 2);
}

int main(void) {
    RUN(defaults_and_names);
    RUN(method_traits);
    RUN(create_validation);
    RUN(fp16_fp32_records);
    RUN(encode_errors);
    RUN(registry_contract);
    RUN(use_ref_kernels);
    RUN(multi_query_kernels_bitwise);
#ifdef VQ_HAVE_X86
    RUN(fp16_kernels_vs_ref);
#endif
    return TEST_REPORT();
}
