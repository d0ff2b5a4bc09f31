/* test_kvspec.c — the library's KV specs (veloxquant.h "KV specs"): every named config parses,
 * prints back as its canonical name and resolves to the cache the preset stands for; unknown
 * names suggest the nearest; widths a method does not take are refused; RateQuant needs layer
 * weights; bits/elem of the presets stay within their budgets. */
#include "test.h"
#include "veloxquant.h"

/* parse(name) -> spec -> canonical name -> parse -> the same spec (preset index aside). */
static void round_trip(const char *name, const char *want_canon) {
    struct vq_kv_spec a, b;
    char err[256], canon[256];
    ASSERT_EQ_INT(vq_kv_spec_parse(name, &a, err, sizeof err), VQ_STATUS_OK);
    const int n = vq_kv_spec_name(&a, canon, sizeof canon);
    ASSERT(n > 0 && (size_t)n == strlen(canon));
    if (want_canon && strcmp(canon, want_canon)) {
        fprintf(stderr, "  canonical name of '%s': '%s', want '%s'\n", name, canon, want_canon);
        ASSERT(0);
    }
    ASSERT_EQ_INT(vq_kv_spec_parse(canon, &b, err, sizeof err), VQ_STATUS_OK);
    a.preset = b.preset = 0;
    ASSERT(memcmp(&a, &b, sizeof a) == 0);
}

TEST(named_configs_round_trip) {
    const int n = vq_kv_preset_count();
    ASSERT(n >= 6);
    struct vq_kv_preset_info pi;
    int tiers = 0, seen_fp16 = 0;
    for (int i = 0; i < n; i++) {
        ASSERT_EQ_INT(vq_kv_preset_get(i, &pi), VQ_STATUS_OK);
        ASSERT(pi.name && pi.config && pi.description && *pi.description);
        if (pi.tier) ASSERT_EQ_INT(1 + tiers++, i); /* fp16, then the tiers */
        seen_fp16 |= !strcmp(pi.name, "fp16") && i == 0;
        round_trip(pi.name, pi.name);   /* a named config is its own canonical name */
        round_trip(pi.config, pi.name); /* and so is what it stands for */
    }
    ASSERT_EQ_INT(tiers, 5);
    ASSERT(seen_fp16);
    ASSERT_EQ_INT(vq_kv_preset_get(n, &pi), VQ_STATUS_INVALID_ARG);
    ASSERT_EQ_INT(vq_kv_preset_get(-1, &pi), VQ_STATUS_INVALID_ARG);
}

TEST(grammar_round_trip) {
    round_trip("turboquant_mse-k4v2", "turboquant_mse-k4v2");
    round_trip("turboquant_mse-4:kivi-2", "turboquant_mse-4:kivi-2");
    round_trip("qjl-1:qjl-1", "qjl-1:qjl-1"); /* "qjl" names qjl keys with kivi values */
    round_trip("kivi-3+g128+res64", "kivi-3+g128+res64");
    round_trip("turboquant_mse-3+oc4t100", "turboquant_mse-3+oc4t100");
    round_trip("kivi-4:turboquant_mse-4+kb45+vb3+g128+res0", NULL);
    round_trip("turboquant_mse-3+fp16f1l1+seed7", NULL);
    round_trip("ratequant-2.5", "ratequant-2.5");
    round_trip("turboquant_mse-2+rq2.5+rqv_even", NULL);
    round_trip("vecinfer-1.5", "vecinfer-1.5");
    round_trip("kivi-2+w256s4", NULL);
    round_trip("turboquant_mse-4+ks", NULL);
    /* the empty spec is fp16 */
    struct vq_kv_spec e;
    char canon[64];
    vq_kv_spec_init(&e);
    ASSERT(vq_kv_spec_name(&e, canon, sizeof canon) > 0 && !strcmp(canon, "fp16"));
    /* a buffer too small: -(length + 1) */
    ASSERT_EQ_INT(vq_kv_spec_name(&e, canon, 2), -5);
}

/* parse fails with a message containing want */
static void refused(const char *name, const char *want) {
    struct vq_kv_spec s;
    char err[256] = "";
    ASSERT_EQ_INT(vq_kv_spec_parse(name, &s, err, sizeof err), VQ_STATUS_INVALID_ARG);
    if (!strstr(err, want)) {
        fprintf(stderr, "  '%s': message '%s' lacks '%s'\n", name, err, want);
        ASSERT(0);
    }
}

TEST(errors_name_the_problem) {
    refused("kv44", "did you mean kv4?");
    refused("kv", "did you mean");
    refused("turboqant_mse-4", "did you mean turboquant_mse-4?");
    refused("turboqant_mse-4:kivi-2", "did you mean turboquant_mse?");
    refused("fp61", "did you mean fp16?");
    refused("zzzzzzzzzz", "veloxquant methods");
    refused("kivi-4+zz", "'+zz'");
    refused("kivi-4+kbpl", "per-layer list");
    refused("kivi-99", "1..32");
    refused("", "empty");
    /* widths: syntax passes, the codecs refuse with the method's widths */
    struct vq_kv_spec s;
    struct vq_codec_params k, v;
    char err[256];
    ASSERT_EQ_INT(vq_kv_spec_parse("polar-7", &s, err, sizeof err), VQ_STATUS_OK);
    ASSERT_EQ_INT(vq_kv_spec_codecs(&s, &k, &v, err, sizeof err), VQ_STATUS_INVALID_ARG);
    ASSERT(strstr(err, "polar") && strstr(err, "fixed width"));
    ASSERT_EQ_INT(vq_kv_spec_parse("qjl-3:kivi-2", &s, err, sizeof err), VQ_STATUS_OK);
    ASSERT_EQ_INT(vq_kv_spec_codecs(&s, &k, &v, err, sizeof err), VQ_STATUS_INVALID_ARG);
    ASSERT(strstr(err, "qjl"));
    ASSERT_EQ_INT(vq_kv_spec_parse("turboquant_mse-9", &s, err, sizeof err), VQ_STATUS_OK);
    ASSERT_EQ_INT(vq_kv_spec_codecs(&s, &k, &v, err, sizeof err), VQ_STATUS_INVALID_ARG);
    ASSERT(strstr(err, "accepts"));
}

TEST(kv4_resolves_to_its_cache) {
    struct vq_kv_spec s;
    struct vq_cache_params p;
    struct vq_kv_layer_bits lb;
    char err[256];
    ASSERT_EQ_INT(vq_kv_spec_parse("kv4", &s, err, sizeof err), VQ_STATUS_OK);
    ASSERT_EQ_INT(vq_kv_spec_cache_params(&s, 30, 3, 64, NULL, &p, &lb, err, sizeof err),
                  VQ_STATUS_OK);
    ASSERT_EQ_INT(p.n_layers, 30);
    ASSERT_EQ_INT(p.n_kv_heads, 3);
    ASSERT_EQ_INT(p.head_dim, 64);
    ASSERT_EQ_INT(p.key.method, VQ_METHOD_KIVI);
    ASSERT_EQ_INT(p.key.bits, 4);
    ASSERT_EQ_INT(p.key.group_size, 64);
    ASSERT_EQ_INT(p.key.residual_length, 0);
    ASSERT_EQ_INT(p.value.method, VQ_METHOD_TURBOQUANT_MSE);
    ASSERT_EQ_INT(p.value.bits, 4);
    ASSERT_EQ_INT(p.stream_sinks, 1);
    ASSERT_EQ_INT(p.key_channel_bits, 1);
    ASSERT(!p.key_bits_per_layer && !lb.key_bits);
    /* the cache takes it as is */
    p.max_tokens = 300;
    vq_status st;
    vq_cache *c = vq_cache_create(&p, &st);
    ASSERT(c != NULL);
    vq_cache_free(c);
    vq_kv_layer_bits_free(&lb);
    /* a model deeper than a per-layer list is refused with the counts */
    ASSERT_EQ_INT(vq_kv_spec_parse("turboquant_mse-4+fp16f40l0", &s, err, sizeof err),
                  VQ_STATUS_OK);
    ASSERT_EQ_INT(vq_kv_spec_cache_params(&s, 30, 3, 64, NULL, &p, &lb, err, sizeof err),
                  VQ_STATUS_INVALID_ARG);
    ASSERT(strstr(err, "30 layers") != NULL);
    vq_kv_layer_bits_free(&lb);
    /* modifiers that do not combine */
    ASSERT_EQ_INT(vq_kv_spec_parse("fp16+kc", &s, err, sizeof err), VQ_STATUS_OK);
    ASSERT_EQ_INT(vq_kv_spec_cache_params(&s, 30, 3, 64, NULL, &p, &lb, err, sizeof err),
                  VQ_STATUS_INVALID_ARG);
    ASSERT(strstr(err, "KIVI") != NULL);
    vq_kv_layer_bits_free(&lb);
}

TEST(ratequant_needs_weights) {
    struct vq_kv_spec s;
    struct vq_cache_params p;
    struct vq_kv_layer_bits lb;
    char err[256];
    ASSERT_EQ_INT(vq_kv_spec_parse("ratequant-2.5", &s, err, sizeof err), VQ_STATUS_OK);
    ASSERT(vq_kv_spec_needs_layer_weights(&s));
    ASSERT_EQ_INT(vq_kv_spec_cache_params(&s, 8, 2, 64, NULL, &p, &lb, err, sizeof err),
                  VQ_STATUS_INVALID_ARG);
    ASSERT(strstr(err, "sensitivities") != NULL);
    vq_kv_layer_bits_free(&lb);
    const double w[8] = {8, 1, 1, 1, 1, 1, 1, 4};
    ASSERT_EQ_INT(vq_kv_spec_cache_params(&s, 8, 2, 64, w, &p, &lb, err, sizeof err), VQ_STATUS_OK);
    ASSERT(lb.key_bits && lb.value_bits && p.key_bits_per_layer == lb.key_bits);
    int sum = 0;
    for (int l = 0; l < 8; l++) {
        sum += lb.key_bits[l];
        ASSERT(lb.key_bits[l] == lb.value_bits[l]);
    }
    ASSERT_EQ_INT(sum, 20); /* mean 2.5 */
    ASSERT(lb.key_bits[0] > lb.key_bits[1]);
    ASSERT_NEAR(lb.ratequant_mean, 2.5, 0);
    vq_kv_layer_bits_free(&lb);
    ASSERT(!lb.key_bits);
}

TEST(preset_bits_within_budget) {
    struct vq_kv_preset_info pi;
    for (int i = 0; vq_kv_preset_get(i, &pi) == VQ_STATUS_OK; i++) {
        if (!pi.tier) continue;
        struct vq_kv_spec s;
        double b = 0;
        ASSERT_EQ_INT(vq_kv_spec_parse(pi.name, &s, NULL, 0), VQ_STATUS_OK);
        ASSERT_EQ_INT(vq_kv_spec_bits_per_elem(&s, 30, 3, 64, 2048, &b), VQ_STATUS_OK);
        ASSERT(b > 1 && b <= pi.max_bits);
    }
    struct vq_kv_spec f;
    double b = 0;
    vq_kv_spec_init(&f);
    ASSERT_EQ_INT(vq_kv_spec_bits_per_elem(&f, 30, 3, 64, 2048, &b), VQ_STATUS_OK);
    ASSERT_NEAR(b, 16.0, 1e-9);
}

TEST(cache_and_codec_by_name) {
    char err[256];
    vq_status st;
    vq_cache *c = vq_cache_create_kv("kv4", 2, 1, 64, 256, 1, err, sizeof err, &st);
    ASSERT(c != NULL);
    ASSERT_EQ_INT(st, VQ_STATUS_OK);
    /* append 130 tokens (two KIVI groups of 64 and a tail) after the first batch's queries,
     * then attention from the codes stays close to exact attention */
    enum { T = 130, D = 64 };
    static float k[T * D], v[T * D], q[D], out[D], ref[D];
    uint64_t s = 7;
    for (int i = 0; i < T * D; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        k[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
    }
    for (int i = 0; i < D; i++) q[i] = k[(T - 1) * D + i] * 4.0f;
    for (int l = 0; l < 2; l++) {
        ASSERT_EQ_INT(vq_cache_observe_queries(c, l, q, 1, 1), VQ_STATUS_OK);
        ASSERT_EQ_INT(vq_cache_append(c, l, k, v, VQ_DTYPE_F32, T), VQ_STATUS_OK);
    }
    ASSERT_EQ_INT(vq_cache_attend(c, 1, q, 1, 1, NULL, 0.125f, out), VQ_STATUS_OK);
    vq_cache *f = vq_cache_create_kv("fp16", 2, 1, 64, 256, 1, err, sizeof err, &st);
    ASSERT(f != NULL);
    for (int l = 0; l < 2; l++) ASSERT_EQ_INT(vq_cache_append(f, l, k, v, VQ_DTYPE_F32, T), 0);
    ASSERT_EQ_INT(vq_cache_attend(f, 1, q, 1, 1, NULL, 0.125f, ref), VQ_STATUS_OK);
    double e = 0, n = 0;
    for (int i = 0; i < D; i++) e += (out[i] - ref[i]) * (out[i] - ref[i]), n += ref[i] * ref[i];
    ASSERT(e < 0.01 * n); /* 4-bit codes: within 10 % in L2 */
    struct vq_cache_memory mk, mf;
    vq_cache_memory(c, &mk);
    vq_cache_memory(f, &mf);
    ASSERT(mk.total_bytes * 3 < mf.total_bytes);
    vq_cache_free(c);
    vq_cache_free(f);
    /* errors carry the reason */
    ASSERT(vq_cache_create_kv("kv44", 2, 1, 64, 256, 1, err, sizeof err, &st) == NULL);
    ASSERT(st == VQ_STATUS_INVALID_ARG && strstr(err, "did you mean kv4?"));
    ASSERT(vq_cache_create_kv("ratequant-2.5", 2, 1, 64, 256, 1, err, sizeof err, &st) == NULL);
    ASSERT(st == VQ_STATUS_INVALID_ARG && strstr(err, "sensitivities"));
    /* a codec by name: kv4's keys are KIVI 4-bit, its values turboquant_mse 4-bit */
    vq_codec *kc = vq_codec_create_kv("kv4", VQ_ROLE_KEY, 64, err, sizeof err, &st);
    vq_codec *vc = vq_codec_create_kv("kv4", VQ_ROLE_VALUE, 64, err, sizeof err, &st);
    ASSERT(kc && vc);
    if (kc && vc) {
        ASSERT_EQ_INT(vq_codec_params_get(kc)->method, VQ_METHOD_KIVI);
        ASSERT_EQ_INT(vq_codec_params_get(kc)->group_size, 64);
        ASSERT_EQ_INT(vq_codec_params_get(vc)->method, VQ_METHOD_TURBOQUANT_MSE);
        ASSERT_EQ_INT(vq_codec_params_get(vc)->bits, 4);
    }
    vq_codec_free(kc);
    vq_codec_free(vc);
    ASSERT(vq_codec_create_kv("polar-7", VQ_ROLE_KEY, 64, err, sizeof err, &st) == NULL);
    ASSERT(strstr(err, "fixed width") != NULL);
}

int main(void) {
    RUN(named_configs_round_trip);
    RUN(grammar_round_trip);
    RUN(errors_name_the_problem);
    RUN(kv4_resolves_to_its_cache);
    RUN(ratequant_needs_weights);
    RUN(preset_bits_within_budget);
    RUN(cache_and_codec_by_name);
    return TEST_REPORT();
}
