/* kvconfig.c — KV-method option family, presets and config names (see kvconfig.h). */
#include "kvconfig.h"

#include <math.h>
#include <stdio.h>

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "opts.h"
#include "vq_tools.h"

static int is_rq_preset(const char *name) { return strncmp(name, "ratequant-", 10) == 0; }

const struct vq_kv_preset vq_kv_presets[] = {
    {"fp16", "fp16", 16, "fp16", 16},
    {"turboquant_mse-4", "turboquant_mse", 4, "turboquant_mse", 4},
    {"turboquant_mse-3", "turboquant_mse", 3, "turboquant_mse", 3},
    {"turboquant_mse-2", "turboquant_mse", 2, "turboquant_mse", 2},
    {"turboquant_prod-4", "turboquant_prod", 4, "turboquant_prod", 4},
    {"turboquant_prod-3", "turboquant_prod", 3, "turboquant_prod", 3},
    {"turboquant_prod-2", "turboquant_prod", 2, "turboquant_prod", 2},
    {"turboquant_rvq-2", "turboquant_rvq", 2, "turboquant_rvq", 2},
    {"turboquant_rvq-1", "turboquant_rvq", 1, "turboquant_rvq", 1},
    /* QJL sketches keys only; values as in the official QJL code: KIVI-style 2-bit */
    {"qjl", "qjl", 1, "kivi", 2},
    {"polar", "polar", 4, "polar", 4},
    {"kivi-4", "kivi", 4, "kivi", 4},
    {"kivi-2", "kivi", 2, "kivi", 2},
    {"kivi_sink-2", "kivi_sink", 2, "kivi_sink", 2},
    {"asym-k4v2", "turboquant_mse", 4, "turboquant_mse", 2},
    /* calibrated (artifacts from `veloxquant calibrate`): vecinfer 2, 1.5 and 1 bits/elem
     * product VQ on keys and values (1.5 = codebook shape (12, 8)), spectral 3 bits
     * (water-filled over the PCA coordinates) */
    {"vecinfer-2", "vecinfer", 2, "vecinfer", 2},
    {"vecinfer-1.5", "vecinfer", 1.5, "vecinfer", 1.5},
    {"vecinfer-1", "vecinfer", 1, "vecinfer", 1},
    {"spectral-3", "spectral", 3, "spectral", 3},
    /* RateQuant per-layer bits (mean 1.5 / 2.5 bits, sensitivities calibrated on demand) */
    {"ratequant-1.5", "turboquant_mse", 1, "turboquant_mse", 1},
    {"ratequant-2.5", "turboquant_mse", 2, "turboquant_mse", 2},
    /* outlier modifiers (the "+..." suffix is parsed by vq_kv_opts_from_name): rvq 1-bit with
     * outlier tokens (k = 2.5) kept fp16; tq_mse 3-bit with 4 int8 outlier key channels */
    {"turboquant_rvq-1+ot", "turboquant_rvq", 1, "turboquant_rvq", 1},
    {"turboquant_mse-3+oc4", "turboquant_mse", 3, "turboquant_mse", 3},
};
const int vq_kv_n_presets = (int)(sizeof vq_kv_presets / sizeof vq_kv_presets[0]);

const struct vq_kv_tier vq_kv_tiers[] = {
    {"kv8", 8.5, "int8"},
    /* kv5, kv4, kv3: KIVI keys with per-channel widths learned from the first 64 tokens
     * (docs/ALGORITHMS.md §8.8; per-layer widths, §8.7, no longer help on top of them) and
     * rotated values, mean 5 / 4 / 3 bits; kv2: the same at mean 2 with 0-bit channels
     * allowed (+kcz: a channel worth less than 2 bits keeps its group mean alone); kv5..kv2
     * attend to the first token (the attention sinks) from fp16 rows (§8.9) */
    {"kv5", 5.5, "kivi-5:turboquant_mse-5+g64+res0+s1+kc"},
    {"kv4", 4.5, "kivi-4:turboquant_mse-4+g64+res0+s1+kc"},
    {"kv3", 3.5, "kivi-3:turboquant_mse-3+g64+res0+s1+kc"},
    {"kv2", 2.5, "kivi-2:turboquant_mse-2+g64+res0+s1+kcz"},
};
const int vq_kv_n_tiers = (int)(sizeof vq_kv_tiers / sizeof vq_kv_tiers[0]);

/* Bits/elem of cache params p holding ctx tokens (vq_kv_estimate); 0 on failure. */
static double est_bits(const struct vq_cache_params *p, int64_t ctx) {
    struct vq_cache_memory m;
    if (vq_kv_estimate(p, ctx, &m) != VQ_STATUS_OK) return 0;
    return (double)m.total_bytes * 8.0 /
           (2.0 * (double)p->n_layers * p->n_kv_heads * p->head_dim * (double)ctx);
}

int vq_kv_tier_bits(const struct vq_kv_tier *t, int64_t ctx, double *bits, double *mean_bits) {
    struct vq_kv_opts o;
    struct vq_cache_params p = vq_cache_params_default();
    p.n_layers = 30;
    p.n_kv_heads = 3;
    p.head_dim = 64;
    if (ctx < VQ_KV_TIER_CYCLE || !vq_kv_opts_from_name(t->config, &o) ||
        !vq_kv_opts_resolve("kv", &o, &p.key, &p.value))
        return 0;
    vq_kv_opts_apply_cache(&o, &p);
    struct vq_kv_layers kl;
    if (vq_kv_layers_apply("kv", &o, NULL, NULL, p.n_layers, p.head_dim, &p, &kl,
                           VQ_KV_QUIET | VQ_KV_EQUAL_WEIGHTS) != 1)
        return 0;
    *bits = est_bits(&p, ctx);
    double sum = 0;
    for (int64_t c = ctx - VQ_KV_TIER_CYCLE + 1; c <= ctx; c++) sum += est_bits(&p, c);
    *mean_bits = sum / VQ_KV_TIER_CYCLE;
    vq_kv_layers_free(&kl);
    return *bits > 0 && *mean_bits > 0;
}

void vq_kv_opts_init(struct vq_kv_opts *o) {
    memset(o, 0, sizeof *o);
    o->group_size = o->residual_length = o->n_sink_tokens = o->jl_dim = -1;
    o->outlier_token_k = -1.0f;
    o->n_outlier_channels = o->n_calib_tokens = -1;
    o->stream_window = o->stream_sinks = -1;
    o->key_scales = o->key_channel_bits = -1;
}

int vq_kv_default_bits(enum vq_method m) { return vq_method_default_bits(m); }

/* Whether the method has a choice of widths (its label carries "-B"). */
static int has_bits_choice(enum vq_method m) {
    struct vq_method_info mi;
    return vq_method_info_get(m, &mi) == VQ_STATUS_OK &&
           (mi.min_bits < mi.max_bits || mi.frac_bits > 0);
}

/* Parses a width for --bits / --k-bits / --v-bits: an integer 1..32 or a half (e.g. 1.5);
 * which widths a method accepts is checked by vq_kv_opts_resolve. */
static int parse_bits(const char *cmd, const char *opt, const char *arg, double *out) {
    double b;
    if (!vq_opt_double(cmd, opt, arg, 1.0, 32.0, &b)) return 0;
    if (b * 2 != floor(b * 2)) {
        fprintf(stderr, "%s: %s: '%s' is not a whole or half number of bits\n", cmd, opt, arg);
        return 0;
    }
    *out = b;
    return 1;
}

/* "4,2,3,..." into out (1..32 each, at most VQ_KV_MAX_LAYERS); 1 ok, 0 after a message. */
static int parse_list(const char *cmd, const char *opt, const char *arg, int *out, int *n) {
    *n = 0;
    if (!arg || !*arg) {
        fprintf(stderr, "%s: %s: empty list\n", cmd, opt);
        return 0;
    }
    const char *p = arg;
    for (;;) {
        char *end;
        long b = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',')) {
            fprintf(stderr, "%s: %s: entry %d of '%s' is not an integer\n", cmd, opt, *n + 1, arg);
            return 0;
        }
        if (b < 1 || b > 32) {
            fprintf(stderr, "%s: %s: entry %d (%ld) is out of range [1, 32]\n", cmd, opt, *n + 1,
                    b);
            return 0;
        }
        if (*n == VQ_KV_MAX_LAYERS) {
            fprintf(stderr, "%s: %s: more than %d entries\n", cmd, opt, VQ_KV_MAX_LAYERS);
            return 0;
        }
        out[(*n)++] = (int)b;
        if (!*end) return 1;
        p = end + 1;
    }
}

/* "first", "last", "first,last", "first=N,last=M" */
static int parse_fp16_layers(const char *cmd, const char *arg, struct vq_kv_opts *o) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", arg ? arg : "");
    o->fp16_first = o->fp16_last = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int *dst = !strncmp(t, "first", 5) ? &o->fp16_first
                 : !strncmp(t, "last", 4)  ? &o->fp16_last
                                           : NULL;
        const char *rest = dst == &o->fp16_first ? t + 5 : dst ? t + 4 : NULL;
        if (dst && !*rest) {
            *dst = 1;
            continue;
        }
        if (dst && *rest == '=') {
            char *end;
            long n = strtol(rest + 1, &end, 10);
            if (end != rest + 1 && !*end && n >= 0 && n <= VQ_KV_MAX_LAYERS) {
                *dst = (int)n;
                continue;
            }
        }
        fprintf(stderr, "%s: --fp16-layers: '%s' is not first, last, first=N or last=N\n", cmd, t);
        return 0;
    }
    if (!o->fp16_first && !o->fp16_last && !(arg && strstr(arg, "=0"))) {
        fprintf(stderr, "%s: --fp16-layers: want first, last or first,last\n", cmd);
        return 0;
    }
    return 1;
}

int vq_kv_opts_any_layers(const struct vq_kv_opts *o) {
    return o->n_k_bpl || o->n_v_bpl || o->fp16_first || o->fp16_last || o->ratequant > 0;
}

int vq_kv_opts_handle(struct vq_kv_opts *o, const char *cmd, int code, const char *arg) {
    if (o->kv_tier && code >= VQ_KVOPT_METHOD && code < VQ_KVOPT_LAST &&
        code != VQ_KVOPT_PRINT_CONFIG) {
        fprintf(stderr, "%s: --kv %s replaces the other KV options; give it alone\n", cmd,
                vq_kv_tiers[o->kv_tier - 1].name);
        return 0;
    }
    switch (code) {
    case VQ_KVOPT_KV: {
        if (vq_kv_opts_given(o)) {
            fprintf(stderr, "%s: --kv %s replaces the other KV options; give it alone\n", cmd, arg);
            return 0;
        }
        for (int i = 0; i < vq_kv_n_tiers; i++)
            if (!strcmp(arg, vq_kv_tiers[i].name)) {
                const int pc = o->print_config;
                if (!vq_kv_opts_from_name(vq_kv_tiers[i].config, o)) return 0;
                o->print_config = pc;
                o->kv_tier = i + 1;
                return 1;
            }
        fprintf(stderr, "%s: --kv: '%s' is not one of kv8, kv5, kv4, kv3, kv2\n", cmd, arg);
        return 0;
    }
    case VQ_KVOPT_METHOD: o->has_method = 1; return vq_opt_method(cmd, "--method", arg, &o->method);
    case VQ_KVOPT_K_METHOD:
        o->has_k_method = 1;
        return vq_opt_method(cmd, "--k-method", arg, &o->k_method);
    case VQ_KVOPT_V_METHOD:
        o->has_v_method = 1;
        return vq_opt_method(cmd, "--v-method", arg, &o->v_method);
    case VQ_KVOPT_BITS: return parse_bits(cmd, "--bits", arg, &o->bits);
    case VQ_KVOPT_K_BITS: return parse_bits(cmd, "--k-bits", arg, &o->k_bits);
    case VQ_KVOPT_V_BITS: return parse_bits(cmd, "--v-bits", arg, &o->v_bits);
    case VQ_KVOPT_GROUP: return vq_opt_int(cmd, "--group-size", arg, 1, 1024, &o->group_size);
    case VQ_KVOPT_RESID:
        return vq_opt_int(cmd, "--residual-length", arg, 0, 1 << 20, &o->residual_length);
    case VQ_KVOPT_SINKS: return vq_opt_int(cmd, "--n-sink-tokens", arg, 0, 64, &o->n_sink_tokens);
    case VQ_KVOPT_JL: return vq_opt_int(cmd, "--jl-dim", arg, 1, 1 << 16, &o->jl_dim);
    case VQ_KVOPT_KV_SEED: o->has_seed = 1; return vq_opt_u64(cmd, "--kv-seed", arg, &o->seed);
    case VQ_KVOPT_K_BPL: return parse_list(cmd, "--k-bits-per-layer", arg, o->k_bpl, &o->n_k_bpl);
    case VQ_KVOPT_V_BPL: return parse_list(cmd, "--v-bits-per-layer", arg, o->v_bpl, &o->n_v_bpl);
    case VQ_KVOPT_FP16_LAYERS: return parse_fp16_layers(cmd, arg, o);
    case VQ_KVOPT_FP16_FIRST:
        return vq_opt_int(cmd, "--keep-fp16-first", arg, 0, VQ_KV_MAX_LAYERS, &o->fp16_first);
    case VQ_KVOPT_FP16_LAST:
        return vq_opt_int(cmd, "--keep-fp16-last", arg, 0, VQ_KV_MAX_LAYERS, &o->fp16_last);
    case VQ_KVOPT_RATEQUANT: return vq_opt_double(cmd, "--ratequant", arg, 1.0, 8.0, &o->ratequant);
    case VQ_KVOPT_RQ_VALUES:
        if (arg && !strcmp(arg, "keys")) o->rq_values = VQ_RQ_VALUES_KEYS;
        else if (arg && !strcmp(arg, "even")) o->rq_values = VQ_RQ_VALUES_EVEN;
        else if (arg && !strcmp(arg, "off")) o->rq_values = VQ_RQ_VALUES_OFF;
        else {
            fprintf(stderr, "%s: --ratequant-values: want keys, even or off\n", cmd);
            return 0;
        }
        return 1;
    case VQ_KVOPT_CALIB_TOKENS:
        return vq_opt_int(cmd, "--calib-tokens", arg, 16, 1 << 20, &o->calib_tokens);
    case VQ_KVOPT_OUTLIER_TOKENS: {
        char *end;
        const double k = strtod(arg, &end);
        if (end == arg || *end || !(k >= 0.0 && k <= 100.0)) {
            fprintf(stderr, "%s: --outlier-tokens: '%s' is not a number in 0..100\n", cmd, arg);
            return 0;
        }
        o->outlier_token_k = (float)k;
        return 1;
    }
    case VQ_KVOPT_OUTLIER_CHANNELS:
        return vq_opt_int(cmd, "--outlier-channels", arg, 0, 64, &o->n_outlier_channels);
    case VQ_KVOPT_N_CALIB:
        return vq_opt_int(cmd, "--n-calib-tokens", arg, 1, 1 << 20, &o->n_calib_tokens);
    case VQ_KVOPT_PRINT_CONFIG: o->print_config = 1; return 1;
    case VQ_KVOPT_WINDOW: return vq_opt_int(cmd, "--window", arg, 0, 1 << 24, &o->stream_window);
    case VQ_KVOPT_STREAM_SINKS: return vq_opt_int(cmd, "--sinks", arg, 0, 1024, &o->stream_sinks);
    case VQ_KVOPT_KEY_SCALES: {
        static const char *const modes[3] = {"off", "keys", "qk"};
        for (int i = 0; i < 3; i++)
            if (!strcmp(arg, modes[i])) {
                o->key_scales = i;
                return 1;
            }
        fprintf(stderr, "%s: --key-scales: '%s' is not off, keys or qk\n", cmd, arg);
        return 0;
    }
    case VQ_KVOPT_KEY_CHANNEL_BITS:
        if (!strcmp(arg, "on") || !strcmp(arg, "off") || !strcmp(arg, "zero")) {
            o->key_channel_bits = !strcmp(arg, "on") ? 1 : !strcmp(arg, "zero") ? 2 : 0;
            return 1;
        }
        fprintf(stderr, "%s: --key-channel-bits: '%s' is not on, zero or off\n", cmd, arg);
        return 0;
    default: return -1;
    }
}

int vq_kv_opts_given(const struct vq_kv_opts *o) {
    struct vq_kv_opts e;
    vq_kv_opts_init(&e);
    e.print_config = o->print_config;
    return memcmp(&e, o, sizeof e) != 0; /* both fully initialised (memset in init) */
}

int vq_kv_print_config(const char *name, const struct vq_cache_params *cp) {
    cJSON *js = cJSON_CreateObject();
    if (!js) return 1;
    const struct vq_codec_params *sides[2] = {&cp->key, &cp->value};
    static const char *const pfx[2] = {"k", "v"};
    char key[48];
    cJSON_AddStringToObject(js, "config", name);
    for (int s = 0; s < 2; s++) {
        const struct vq_codec_params *p = sides[s];
        char label[64];
        vq_codec_params_label(p, label, sizeof label);
#define ADD(field, val) \
    do { \
        snprintf(key, sizeof key, "%s_%s", pfx[s], field); \
        cJSON_AddNumberToObject(js, key, (double)(val)); \
    } while (0)
        snprintf(key, sizeof key, "%s_method", pfx[s]);
        cJSON_AddStringToObject(js, key, vq_method_name(p->method));
        snprintf(key, sizeof key, "%s_label", pfx[s]);
        cJSON_AddStringToObject(js, key, label);
        ADD("bits", vq_codec_params_bits(p));
        ADD("group_size", p->group_size);
        ADD("residual_length", p->residual_length);
        ADD("n_sink_tokens", p->n_sink_tokens);
        ADD("jl_dim", p->jl_dim);
        ADD("seed", p->seed);
        ADD("pq_codeword_bits", p->pq_codeword_bits);
        ADD("pq_subvec_dim", p->pq_subvec_dim);
#undef ADD
    }
    cJSON_AddNumberToObject(js, "outlier_token_k", cp->outlier_token_k);
    cJSON_AddNumberToObject(js, "n_outlier_channels", cp->n_outlier_channels);
    cJSON_AddNumberToObject(js, "n_calib_tokens", cp->n_calib_tokens);
    cJSON_AddNumberToObject(js, "fp16_first_layers", cp->fp16_first_layers);
    cJSON_AddNumberToObject(js, "fp16_last_layers", cp->fp16_last_layers);
    cJSON_AddNumberToObject(js, "stream_window", cp->stream_window);
    cJSON_AddNumberToObject(js, "stream_sinks", cp->stream_sinks);
    cJSON_AddNumberToObject(js, "key_scales", cp->key_scales);
    cJSON_AddNumberToObject(js, "key_channel_bits", cp->key_channel_bits);
    char *t = cJSON_PrintUnformatted(js);
    cJSON_Delete(js);
    if (!t) return 1;
    printf("%s\n", t);
    free(t);
    return 0;
}

int vq_kv_opts_any_method(const struct vq_kv_opts *o) {
    return o->has_method || o->has_k_method || o->has_v_method;
}

/* Sets the width of one side: a width the method accepts through vq_codec_params_set_bits.
 * A width the user gave (given = 1) outside the range of a method with a range of widths
 * (min_bits < max_bits) is refused here, with the range; any other integer is stored as is (a
 * method without a choice, fp16, qjl, polar, int8, ignores it; --ratequant reports its own
 * range, vq_codec_create the rest); a fractional width the method does not accept is an error.
 * 1 ok, 0 printed. */
static int resolve_bits(const char *cmd, struct vq_codec_params *p, double bits, int given,
                        const char *side) {
    if (vq_codec_params_set_bits(p, bits) == VQ_STATUS_OK) return 1;
    struct vq_method_info mi;
    vq_method_info_get(p->method, &mi);
    if (bits == floor(bits) && (!given || mi.min_bits == mi.max_bits)) {
        p->bits = (int)bits;
        return 1;
    }
    fprintf(stderr, "%s: %s bits %g: %s accepts %d..%d", cmd, side, bits, vq_method_name(p->method),
            mi.min_bits, mi.max_bits);
    if (mi.frac_bits > 0) fprintf(stderr, " and %g", mi.frac_bits);
    fprintf(stderr, "\n");
    return 0;
}

int vq_kv_opts_resolve(const char *cmd, const struct vq_kv_opts *o, struct vq_codec_params *k,
                       struct vq_codec_params *v) {
    *k = vq_codec_params_default();
    *v = vq_codec_params_default();
    k->role = VQ_ROLE_KEY;
    v->role = VQ_ROLE_VALUE;
    /* --ratequant alone means the RateQuant preset's codec (turboquant_mse) for keys and values */
    enum vq_method base = o->has_method    ? o->method
                        : o->ratequant > 0 ? VQ_KV_RQ_METHOD
                                           : VQ_METHOD_FP16;
    k->method = o->has_k_method ? o->k_method : base;
    v->method = o->has_v_method ? o->v_method : base;
    /* with --ratequant B the uniform bits (used where no per-layer value is set) are floor(B) */
    const double rq_b = o->ratequant > 0 ? floor(o->ratequant) : 0;
    const double kb = o->k_bits ? o->k_bits
                    : o->bits   ? o->bits
                    : rq_b      ? rq_b
                                : vq_kv_default_bits(k->method);
    const double vb = o->v_bits ? o->v_bits
                    : o->bits   ? o->bits
                    : rq_b      ? rq_b
                                : vq_kv_default_bits(v->method);
    if (!resolve_bits(cmd, k, kb, o->k_bits || o->bits, "key") ||
        !resolve_bits(cmd, v, vb, o->v_bits || o->bits, "value"))
        return 0;
    struct vq_codec_params *both[2] = {k, v};
    for (int i = 0; i < 2; i++) {
        if (o->group_size >= 0) both[i]->group_size = o->group_size;
        if (o->residual_length >= 0) both[i]->residual_length = o->residual_length;
        if (o->n_sink_tokens >= 0) both[i]->n_sink_tokens = o->n_sink_tokens;
        if (o->jl_dim >= 0) both[i]->jl_dim = o->jl_dim;
        if (o->has_seed) both[i]->seed = o->seed;
    }
    return 1;
}

void vq_kv_opts_apply_cache(const struct vq_kv_opts *o, struct vq_cache_params *cp) {
    if (o->outlier_token_k >= 0.0f) cp->outlier_token_k = o->outlier_token_k;
    if (o->n_outlier_channels >= 0) cp->n_outlier_channels = o->n_outlier_channels;
    if (o->n_calib_tokens >= 0) cp->n_calib_tokens = o->n_calib_tokens;
    if (o->stream_window >= 0) cp->stream_window = o->stream_window;
    if (o->stream_sinks >= 0) cp->stream_sinks = o->stream_sinks;
    if (o->key_scales >= 0) cp->key_scales = o->key_scales;
    if (o->key_channel_bits >= 0) cp->key_channel_bits = o->key_channel_bits;
}

const char *vq_kv_modifier_error(const struct vq_cache_params *cp) {
    const enum vq_method km = cp->key.method, vm = cp->value.method;
    const unsigned kf = vq_method_flags(km), vf = vq_method_flags(vm);
    /* the rules of vq_cache_params (veloxquant.h) in method traits: outlier tokens need a side
     * that can bypass them and no kivi_sink side; the channel split needs keys that take it */
    const int ot_ok = !((kf | vf) & VQ_METHOD_F_SINKS) && ((kf | vf) & VQ_METHOD_F_OUTLIER_TOKENS);
    if (cp->outlier_token_k > 0.0f && !ot_ok)
        return (kf | vf) & VQ_METHOD_F_SINKS
                 ? "--outlier-tokens does not combine with kivi_sink (it keeps its high-norm "
                   "tokens in fp16 already)"
                 : "--outlier-tokens needs a quantized key or value method (fp16/fp32 have "
                   "nothing to bypass)";
    if (cp->n_outlier_channels > 0) {
        if (!(kf & VQ_METHOD_F_OUTLIER_CHANNELS))
            return kf & VQ_METHOD_F_PER_CHANNEL_KEYS
                     ? "--outlier-channels: kivi quantizes keys per channel, which already "
                       "isolates outlier channels"
                 : !(kf & VQ_METHOD_F_QUANTIZED)
                     ? "--outlier-channels needs a quantized key method (fp16/fp32 keys have "
                       "nothing to split)"
                     : "--outlier-channels: calibrated key codecs (vecinfer, spectral) are "
                       "fitted on whole keys; "
                       "use turboquant_mse/prod/rvq, qjl or polar keys";
        if (cp->n_outlier_channels > cp->head_dim / 2)
            return "--outlier-channels must be at most head_dim / 2";
    }
    if (cp->key_scales > 0 && !(kf & VQ_METHOD_F_QUANTIZED))
        return "--key-scales needs a quantized key method (fp16/fp32 keys lose nothing to scale)";
    if (cp->key_channel_bits && !(kf & VQ_METHOD_F_PER_CHANNEL_KEYS))
        return "--key-channel-bits needs per-channel KIVI keys (kivi, kivi_sink)";
    return NULL;
}

void vq_kv_config_name_mod(const struct vq_cache_params *cp, char *out, size_t cap) {
    size_t n = strlen(out);
    if (cp->outlier_token_k > 0.0f && n < cap) {
        if (cp->outlier_token_k == 2.5f) snprintf(out + n, cap - n, "+ot");
        else snprintf(out + n, cap - n, "+ot%g", (double)cp->outlier_token_k);
        n = strlen(out);
    }
    if (cp->n_outlier_channels > 0 && n < cap) {
        if (cp->n_calib_tokens == 200) snprintf(out + n, cap - n, "+oc%d", cp->n_outlier_channels);
        else snprintf(out + n, cap - n, "+oc%dt%d", cp->n_outlier_channels, cp->n_calib_tokens);
        n = strlen(out);
    }
    if (cp->stream_window > 0 && n < cap) {
        if (cp->stream_sinks > 0)
            snprintf(out + n, cap - n, "+w%ds%d", cp->stream_window, cp->stream_sinks);
        else snprintf(out + n, cap - n, "+w%d", cp->stream_window);
    } else if (cp->stream_sinks > 0 && n < cap) { /* sinks alone, full attention */
        snprintf(out + n, cap - n, "+s%d", cp->stream_sinks);
        n = strlen(out);
    }
    if (cp->key_scales > 0 && n < cap)
        snprintf(out + n, cap - n, cp->key_scales == 2 ? "+ks" : "+ksk");
    n = strlen(out);
    if (cp->key_channel_bits > 0 && n < cap)
        snprintf(out + n, cap - n, cp->key_channel_bits == 2 ? "+kcz" : "+kc");
}

void vq_kv_config_name(const struct vq_codec_params *k, const struct vq_codec_params *v, char *out,
                       size_t cap) {
    const char *kn = vq_method_name(k->method), *vn = vq_method_name(v->method);
    const double kb = vq_codec_params_bits(k), vb = vq_codec_params_bits(v);
    for (int i = 0; i < vq_kv_n_presets; i++) {
        const struct vq_kv_preset *p = &vq_kv_presets[i];
        if (is_rq_preset(p->name) || strchr(p->name, '+')) continue; /* suffixed presets */
        if (!strcmp(p->km, kn) && !strcmp(p->vm, vn) &&
            (!has_bits_choice(k->method) || p->kb == kb) &&
            (!has_bits_choice(v->method) || p->vb == vb)) {
            snprintf(out, cap, "%s", p->name);
            return;
        }
    }
    if (k->method == v->method) {
        if (!has_bits_choice(k->method)) snprintf(out, cap, "%s", kn);
        else if (kb == vb) snprintf(out, cap, "%s-%g", kn, kb);
        else snprintf(out, cap, "%s-k%gv%g", kn, kb, vb);
        /* a preset of that name means another config (preset "qjl" = qjl keys, kivi values) */
        int taken = 0;
        for (int i = 0; i < vq_kv_n_presets; i++) taken |= !strcmp(out, vq_kv_presets[i].name);
        if (!taken) return;
    }
    snprintf(out, cap, "%s-%g:%s-%g", kn, kb, vn, vb);
}

/* "METHOD" or "METHOD-B" into method and bits (0 = default; B whole or half); 1 on success. */
static int parse_mb(const char *s, size_t n, enum vq_method *m, double *bits) {
    char buf[64];
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, s, n);
    buf[n] = 0;
    *bits = 0;
    char *dash = strrchr(buf, '-');
    if (dash) {
        char *end;
        const double b = strtod(dash + 1, &end);
        if (end == dash + 1 || *end || !(b >= 1 && b <= 32) || b * 2 != floor(b * 2)) return 0;
        *bits = b;
        *dash = 0;
    }
    return vq_method_from_name(buf, m) == VQ_STATUS_OK;
}

/* "+kb<digits>" / "+vb<digits>" (side 'k' / 'v'): per-layer bits as one digit 1..9 per entry,
 * 1 .. 40 entries; spread over the model's depth by vq_kv_layers_apply. 1 ok, 0 not one. */
static int digit_pattern(const char *d, struct vq_kv_opts *o, char side) {
    int *out = side == 'k' ? o->k_bpl : o->v_bpl, n = 0;
    for (; d[n]; n++) {
        if (d[n] < '1' || d[n] > '9' || n == 40) return 0;
        out[n] = d[n] - '0';
    }
    if (n == 0) return 0;
    if (side == 'k') {
        o->n_k_bpl = n;
        o->k_bpl_pattern = 1;
    } else {
        o->n_v_bpl = n;
        o->v_bpl_pattern = 1;
    }
    return 1;
}

/* Parses the "+..." suffixes of a name (see vq_kv_config_name_opts); 1 ok. */
static int parse_suffixes(const char *s, struct vq_kv_opts *o) {
    while (*s == '+') {
        s++;
        const char *e = strchr(s, '+');
        const size_t n = e ? (size_t)(e - s) : strlen(s);
        char t[48], tail;
        if (n == 0 || n >= sizeof t) return 0;
        memcpy(t, s, n);
        t[n] = 0;
        double b;
        int f, l;
        char *end;
        if (!strcmp(t, "ot")) o->outlier_token_k = 2.5f; /* outlier tokens, k = 2.5 */
        else if (!strncmp(t, "ot", 2) && (b = strtod(t + 2, &end)) > 0 && b <= 100 && end > t + 2 &&
                 !*end)
            o->outlier_token_k = (float)b;
        else if (!strncmp(t, "oc", 2) && sscanf(t, "oc%dt%d%c", &f, &l, &tail) == 2 && f >= 1 &&
                 f <= 64 && l >= 1 && l <= (1 << 20)) {
            o->n_outlier_channels = f;
            o->n_calib_tokens = l;
        } else if (!strncmp(t, "oc", 2) && sscanf(t, "oc%d%c", &f, &tail) == 1 && f >= 1 && f <= 64)
            o->n_outlier_channels = f;
        else if ((t[0] == 'k' || t[0] == 'v') && t[1] == 'b' && digit_pattern(t + 2, o, t[0]))
            ; /* per-layer bits pattern, e.g. kb45 */
        else if (sscanf(t, "g%d%c", &f, &tail) == 1 && f >= 1 && f <= 1024) o->group_size = f;
        else if (sscanf(t, "res%d%c", &f, &tail) == 1 && f >= 0 && f <= (1 << 20))
            o->residual_length = f;
        else if (sscanf(t, "sink%d%c", &f, &tail) == 1 && f >= 0 && f <= 64) o->n_sink_tokens = f;
        else if (sscanf(t, "jl%d%c", &f, &tail) == 1 && f >= 1 && f <= (1 << 16)) o->jl_dim = f;
        else if (!strncmp(t, "seed", 4) && t[4] >= '0' && t[4] <= '9' &&
                 (o->seed = strtoull(t + 4, &end, 10), !*end))
            o->has_seed = 1;
        else if (sscanf(t, "w%ds%d%c", &f, &l, &tail) == 2 && f >= 1 && f <= (1 << 24) && l >= 0 &&
                 l <= 1024) {
            o->stream_window = f;
            o->stream_sinks = l;
        } else if (sscanf(t, "w%d%c", &f, &tail) == 1 && f >= 1 && f <= (1 << 24))
            o->stream_window = f;
        else if (sscanf(t, "s%d%c", &f, &tail) == 1 && t[1] >= '0' && t[1] <= '9' && f >= 1 &&
                 f <= 1024)
            o->stream_sinks = f; /* sinks alone: full attention, positions 0..f-1 in fp16 */
        else if (!strcmp(t, "ks")) o->key_scales = 2;
        else if (!strcmp(t, "ksk")) o->key_scales = 1;
        else if (!strcmp(t, "kc")) o->key_channel_bits = 1;
        else if (!strcmp(t, "kcz")) o->key_channel_bits = 2;
        else if (!strcmp(t, "rqv_even")) o->rq_values = VQ_RQ_VALUES_EVEN;
        else if (!strcmp(t, "rqv_off")) o->rq_values = VQ_RQ_VALUES_OFF;
        else if (sscanf(t, "rq%lf%c", &b, &tail) == 1 && b >= 1 && b <= 8) o->ratequant = b;
        else if (sscanf(t, "fp16f%dl%d%c", &f, &l, &tail) == 2 && f >= 0 && l >= 0 &&
                 f <= VQ_KV_MAX_LAYERS && l <= VQ_KV_MAX_LAYERS) {
            o->fp16_first = f;
            o->fp16_last = l;
        } else return 0;
        s += n;
    }
    return *s == 0;
}

int vq_kv_opts_from_name(const char *name, struct vq_kv_opts *o) {
    vq_kv_opts_init(o);
    const char *plus = strchr(name, '+');
    if (plus) {
        char base[64];
        const size_t n = (size_t)(plus - name);
        if (n == 0 || n >= sizeof base) return 0;
        memcpy(base, name, n);
        base[n] = 0;
        if (!vq_kv_opts_from_name(base, o)) return 0;
        return parse_suffixes(plus, o);
    }
    for (int i = 0; i < vq_kv_n_tiers; i++) /* --kv presets: their config */
        if (!strcmp(name, vq_kv_tiers[i].name))
            return vq_kv_opts_from_name(vq_kv_tiers[i].config, o);
    if (is_rq_preset(name)) { /* ratequant-B: turboquant_mse with --ratequant B */
        char *end;
        const double b = strtod(name + 10, &end);
        if (end == name + 10 || *end || !(b >= 1 && b <= 8)) return 0;
        o->has_method = 1;
        o->method = VQ_KV_RQ_METHOD;
        o->ratequant = b;
        return 1;
    }
    for (int i = 0; i < vq_kv_n_presets; i++) {
        const struct vq_kv_preset *p = &vq_kv_presets[i];
        if (strcmp(name, p->name) != 0) continue;
        o->has_k_method = o->has_v_method = 1;
        if (vq_method_from_name(p->km, &o->k_method) != VQ_STATUS_OK ||
            vq_method_from_name(p->vm, &o->v_method) != VQ_STATUS_OK)
            return 0;
        o->k_bits = p->kb;
        o->v_bits = p->vb;
        return 1;
    }
    const char *colon = strchr(name, ':');
    if (colon) {
        if (!parse_mb(name, (size_t)(colon - name), &o->k_method, &o->k_bits)) return 0;
        if (!parse_mb(colon + 1, strlen(colon + 1), &o->v_method, &o->v_bits)) return 0;
        o->has_k_method = o->has_v_method = 1;
        return 1;
    }
    /* METHOD-kXvY */
    const char *dash = strrchr(name, '-');
    double kb, vb;
    char tail;
    if (dash && sscanf(dash + 1, "k%lfv%lf%c", &kb, &vb, &tail) == 2) {
        double b;
        if (!parse_mb(name, (size_t)(dash - name), &o->method, &b) || b) return 0;
        if (!(kb >= 1 && kb <= 32 && vb >= 1 && vb <= 32) || kb * 2 != floor(kb * 2) ||
            vb * 2 != floor(vb * 2))
            return 0;
        o->has_method = 1;
        o->k_bits = kb;
        o->v_bits = vb;
        return 1;
    }
    if (!parse_mb(name, strlen(name), &o->method, &o->bits)) return 0;
    o->has_method = 1;
    return 1;
}

void vq_kv_opts_to_argv(const struct vq_kv_opts *o, char **argv, int *argc, int max,
                        char (*buf)[32], int nbuf) {
    int nb = 0;
#define PUSH(s) \
    do { \
        if (*argc < max) argv[(*argc)++] = (char *)(s); \
    } while (0)
#define PUSHI(flag, v) \
    do { \
        if (nb < nbuf) { \
            snprintf(buf[nb], 32, "%lld", (long long)(v)); \
            PUSH(flag); \
            PUSH(buf[nb]); \
            nb++; \
        } \
    } while (0)
    if (o->has_method) {
        PUSH("--method");
        PUSH(vq_method_name(o->method));
    }
    if (o->has_k_method) {
        PUSH("--k-method");
        PUSH(vq_method_name(o->k_method));
    }
    if (o->has_v_method) {
        PUSH("--v-method");
        PUSH(vq_method_name(o->v_method));
    }
#define PUSHG(flag, v) \
    do { \
        if (nb < nbuf) { \
            snprintf(buf[nb], 32, "%g", (double)(v)); \
            PUSH(flag); \
            PUSH(buf[nb]); \
            nb++; \
        } \
    } while (0)
    if (o->bits) PUSHG("--bits", o->bits);
    if (o->k_bits) PUSHG("--k-bits", o->k_bits);
    if (o->v_bits) PUSHG("--v-bits", o->v_bits);
    if (o->group_size >= 0) PUSHI("--group-size", o->group_size);
    if (o->residual_length >= 0) PUSHI("--residual-length", o->residual_length);
    if (o->n_sink_tokens >= 0) PUSHI("--n-sink-tokens", o->n_sink_tokens);
    if (o->jl_dim >= 0) PUSHI("--jl-dim", o->jl_dim);
    if (o->has_seed && nb < nbuf) {
        snprintf(buf[nb], 32, "%llu", (unsigned long long)o->seed);
        PUSH("--kv-seed");
        PUSH(buf[nb]);
        nb++;
    }
    if (o->ratequant > 0 && nb < nbuf) {
        snprintf(buf[nb], 32, "%.17g", o->ratequant);
        PUSH("--ratequant");
        PUSH(buf[nb]);
        nb++;
    }
    if (o->rq_values == VQ_RQ_VALUES_EVEN) {
        PUSH("--ratequant-values");
        PUSH("even");
    }
    if (o->rq_values == VQ_RQ_VALUES_OFF) {
        PUSH("--ratequant-values");
        PUSH("off");
    }
    if (o->fp16_first) PUSHI("--keep-fp16-first", o->fp16_first);
    if (o->fp16_last) PUSHI("--keep-fp16-last", o->fp16_last);
    if (o->calib_tokens) PUSHI("--calib-tokens", o->calib_tokens);
    if (o->outlier_token_k >= 0.0f && nb < nbuf) {
        snprintf(buf[nb], 32, "%.9g", (double)o->outlier_token_k);
        PUSH("--outlier-tokens");
        PUSH(buf[nb]);
        nb++;
    }
    if (o->n_outlier_channels >= 0) PUSHI("--outlier-channels", o->n_outlier_channels);
    if (o->n_calib_tokens >= 0) PUSHI("--n-calib-tokens", o->n_calib_tokens);
    if (o->stream_window >= 0) PUSHI("--window", o->stream_window);
    if (o->stream_sinks >= 0) PUSHI("--sinks", o->stream_sinks);
    if (o->key_scales >= 0) {
        static const char *const modes[3] = {"off", "keys", "qk"};
        PUSH("--key-scales");
        PUSH(modes[o->key_scales]);
    }
    if (o->key_channel_bits >= 0) {
        PUSH("--key-channel-bits");
        PUSH(o->key_channel_bits == 2 ? "zero" : o->key_channel_bits ? "on" : "off");
    }
#undef PUSHG
#undef PUSHI
#undef PUSH
}

/* One side of vq_kv_results_upgrade: w is the width the config name gives (0 = none). */
static void upgrade_bits(const char *method, double w, double *recorded) {
    struct vq_codec_params p = vq_codec_params_default();
    enum vq_method m;
    if (w == floor(w) || vq_method_from_name(method, &m) != VQ_STATUS_OK ||
        vq_codec_params_set_method(&p, m) != VQ_STATUS_OK ||
        vq_codec_params_set_bits(&p, w) != VQ_STATUS_OK)
        return;
    if (*recorded == p.bits) *recorded = w;
}

void vq_kv_results_upgrade(struct vq_results *r) {
    for (int i = 0; i < r->n_results; i++) {
        struct vq_result_config *rc = &r->results[i].config;
        struct vq_kv_opts o;
        if (!vq_kv_opts_from_name(rc->name, &o)) continue;
        upgrade_bits(rc->k_method, o.k_bits ? o.k_bits : o.bits, &rc->k_bits);
        upgrade_bits(rc->v_method, o.v_bits ? o.v_bits : o.bits, &rc->v_bits);
    }
}

void vq_kv_fill_result_config(const char *name, const struct vq_codec_params *k,
                              const struct vq_codec_params *v, struct vq_result_config *rc) {
    memset(rc, 0, sizeof *rc);
    snprintf(rc->name, sizeof rc->name, "%s", name);
    snprintf(rc->k_method, sizeof rc->k_method, "%s", vq_method_name(k->method));
    snprintf(rc->v_method, sizeof rc->v_method, "%s", vq_method_name(v->method));
    rc->k_bits = vq_codec_params_bits(k);
    rc->v_bits = vq_codec_params_bits(v);
    const unsigned f = vq_method_flags(k->method) | vq_method_flags(v->method);
    const int kivi = (f & (VQ_METHOD_F_WINDOWED | VQ_METHOD_F_PER_CHANNEL_KEYS)) != 0;
    const int sink = (f & VQ_METHOD_F_SINKS) != 0;
    const int jl = (f & VQ_METHOD_F_SKETCH) != 0;
#define OPT(key_, val_) \
    do { \
        snprintf(rc->opts[rc->n_opts].key, 32, "%s", key_); \
        rc->opts[rc->n_opts++].value = (val_); \
    } while (0)
    if (kivi) {
        OPT("group_size", k->group_size);
        OPT("residual_length", k->residual_length);
    }
    if (sink) OPT("n_sink_tokens", k->n_sink_tokens);
    if (jl && k->jl_dim) OPT("jl_dim", k->jl_dim);
    OPT("seed", (long long)k->seed);
#undef OPT
    /* outlier modifiers from the label's suffixes */
    struct vq_kv_opts mo;
    if (strchr(name, '+') && vq_kv_opts_from_name(name, &mo)) {
#define OPTB(key_, val_) \
    do { \
        if (rc->n_opts < VQ_RESULT_MAX_OPTS) { \
            snprintf(rc->opts[rc->n_opts].key, 32, "%s", key_); \
            rc->opts[rc->n_opts++].value = (val_); \
        } \
    } while (0)
        if (mo.outlier_token_k > 0.0f)
            OPTB("outlier_token_k_x100", (long long)lround(mo.outlier_token_k * 100.0));
        if (mo.n_outlier_channels > 0) {
            OPTB("n_outlier_channels", mo.n_outlier_channels);
            OPTB("n_calib_tokens", mo.n_calib_tokens > 0 ? mo.n_calib_tokens : 200);
        }
        if (mo.stream_window > 0 || mo.stream_sinks > 0) {
            OPTB("stream_window", mo.stream_window > 0 ? mo.stream_window : 0);
            OPTB("stream_sinks", mo.stream_sinks > 0 ? mo.stream_sinks : 0);
        }
        if (mo.key_scales > 0) OPTB("key_scales", mo.key_scales);
        if (mo.key_channel_bits > 0) OPTB("key_channel_bits", mo.key_channel_bits);
#undef OPTB
    }
}

void vq_kv_config_name_opts(const struct vq_kv_opts *o, const struct vq_codec_params *k,
                            const struct vq_codec_params *v, char *out, size_t cap) {
    if (o->kv_tier) { /* a --kv preset is labelled by its name (its config may be long) */
        snprintf(out, cap, "%s", vq_kv_tiers[o->kv_tier - 1].name);
        return;
    }
    char base[64];
    if (o->ratequant > 0 && k->method == VQ_KV_RQ_METHOD && v->method == VQ_KV_RQ_METHOD &&
        !o->bits && !o->k_bits && !o->v_bits && o->rq_values == VQ_RQ_VALUES_KEYS) {
        snprintf(base, sizeof base, "ratequant-%g", o->ratequant);
    } else {
        vq_kv_config_name(k, v, base, sizeof base);
        if (o->ratequant > 0) {
            const size_t n = strlen(base);
            snprintf(base + n, sizeof base - n, "+rq%g%s", o->ratequant,
                     o->rq_values == VQ_RQ_VALUES_EVEN  ? "+rqv_even"
                     : o->rq_values == VQ_RQ_VALUES_OFF ? "+rqv_off"
                                                        : "");
        }
    }
    size_t n = strlen(base);
    if (o->fp16_first || o->fp16_last)
        n += (size_t)snprintf(base + n, n < sizeof base ? sizeof base - n : 0, "+fp16f%dl%d",
                              o->fp16_first, o->fp16_last);
    for (int side = 0; side < 2; side++) {
        const int nb = side ? o->n_v_bpl : o->n_k_bpl;
        const int *l = side ? o->v_bpl : o->k_bpl;
        if (!nb || n >= sizeof base) continue;
        if (!(side ? o->v_bpl_pattern : o->k_bpl_pattern)) {
            n += (size_t)snprintf(base + n, sizeof base - n, side ? "+vbpl" : "+kbpl");
            continue;
        }
        n += (size_t)snprintf(base + n, sizeof base - n, side ? "+vb" : "+kb");
        for (int i = 0; i < nb && n < sizeof base; i++)
            n += (size_t)snprintf(base + n, sizeof base - n, "%d", l[i]);
    }
    /* codec options given (the name must tell configs apart: results are keyed by it) */
    const int co[4] = {o->group_size, o->residual_length, o->n_sink_tokens, o->jl_dim};
    static const char *const cs[4] = {"g", "res", "sink", "jl"};
    for (int i = 0; i < 4; i++)
        if (co[i] >= 0 && n < sizeof base)
            n += (size_t)snprintf(base + n, sizeof base - n, "+%s%d", cs[i], co[i]);
    if (o->has_seed && n < sizeof base)
        snprintf(base + n, sizeof base - n, "+seed%llu", (unsigned long long)o->seed);
    struct vq_cache_params mp = vq_cache_params_default();
    vq_kv_opts_apply_cache(o, &mp);
    vq_kv_config_name_mod(&mp, base, sizeof base);
    snprintf(out, cap, "%s", base);
}

void vq_kv_layers_free(struct vq_kv_layers *l) {
    if (!l) return;
    free(l->k_bits);
    free(l->v_bits);
    memset(l, 0, sizeof *l);
}

/* 1 if a codec with params p (bits replaced) can be created at head_dim. */
static int codec_accepts(const struct vq_codec_params *p, int bits, int head_dim, vq_status *st) {
    struct vq_codec_params q = *p;
    q.bits = bits;
    q.head_dim = head_dim;
    vq_codec *c = vq_codec_create(&q, st);
    vq_codec_free(c);
    return c != NULL;
}

/* The bit-widths 1..16 the codec of p accepts at head_dim, ascending; returns the count. */
static int allowed_bits(const struct vq_codec_params *p, int head_dim, int *allowed) {
    int n = 0;
    for (int b = 1; b <= 16; b++)
        if (codec_accepts(p, b, head_dim, NULL)) allowed[n++] = b;
    return n;
}

/* Prints bits of layers [f, n - l) (the quantized ones; fp16 edge layers shown as 16). */
static void print_bits(const char *cmd, const char *what, const int *bits, int n, int f, int l) {
    int sum = 0;
    fprintf(stderr, "%s: %s:", cmd, what);
    for (int i = 0; i < n; i++) {
        const int edge = i < f || i >= n - l;
        fprintf(stderr, " %d", edge ? 16 : bits[i]);
        if (!edge) sum += bits[i];
    }
    const int nq = n - f - l;
    fprintf(stderr, " (sum %d, mean %.3f%s)\n", sum, nq > 0 ? (double)sum / nq : 0.0,
            f || l ? " over the quantized layers; 16 = fp16 edge layer" : "");
}

/* The per-layer options against the model's n_layers layers. 1 ok, 0 printed. */
static int layers_check(const char *cmd, const struct vq_kv_opts *o, int n_layers) {
    if (o->n_k_bpl && o->n_k_bpl != n_layers && !o->k_bpl_pattern) {
        fprintf(stderr, "%s: --k-bits-per-layer: %d entries, but the model has %d layers\n", cmd,
                o->n_k_bpl, n_layers);
        return 0;
    }
    if (o->n_v_bpl && o->n_v_bpl != n_layers && !o->v_bpl_pattern) {
        fprintf(stderr, "%s: --v-bits-per-layer: %d entries, but the model has %d layers\n", cmd,
                o->n_v_bpl, n_layers);
        return 0;
    }
    if (o->fp16_first > n_layers || o->fp16_last > n_layers) {
        fprintf(stderr, "%s: fp16 layers: first %d / last %d, but the model has %d layers\n", cmd,
                o->fp16_first, o->fp16_last, n_layers);
        return 0;
    }
    if (o->ratequant > 0 && o->n_k_bpl) {
        fprintf(stderr, "%s: --ratequant and --k-bits-per-layer are exclusive\n", cmd);
        return 0;
    }
    return 1;
}

/* --ratequant-values even: the mean o->ratequant spread evenly over the nq quantized layers
 * from f0 (2.5 -> 2,3,2,3...) into v_bits (n_layers); RANGE when a width is not one of the value
 * codec's va[0..nva). */
static vq_status rq_values_even(const struct vq_kv_opts *o, int n_layers, int f0, int nq,
                                const int *va, int nva, int *v_bits) {
    for (int l = 0; l < n_layers; l++) {
        const int j = l - f0; /* index among the quantized layers */
        const int b = j < 0 || j >= nq ? (int)o->ratequant
                                       : (int)floor((j + 1) * o->ratequant + 0.5) -
                                             (int)floor(j * o->ratequant + 0.5);
        int okb = 0;
        for (int a = 0; a < nva; a++) okb |= va[a] == b;
        if (!okb) return VQ_STATUS_RANGE;
        v_bits[l] = b;
    }
    return VQ_STATUS_OK;
}

/* --ratequant B: key bits per layer (out->k_bits, allocated) from the layer sensitivities
 * (the model's, or equal ones with VQ_KV_EQUAL_WEIGHTS) over the widths the key codec accepts;
 * values (out->v_bits, when allocated) follow o->rq_values unless listed. Returns 1, 0 after
 * printing a usage problem, -1 on a runtime failure (sensitivities not available). */
static int layers_ratequant(const char *cmd, const struct vq_kv_opts *o, const char *model_path,
                            struct vq_model *model, int n_layers, int head_dim,
                            const struct vq_cache_params *cp, struct vq_kv_layers *out, int flags) {
    struct vq_method_info mi;
    int allowed[16];
    const int na = allowed_bits(&cp->key, head_dim, allowed);
    if ((vq_method_info_get(cp->key.method, &mi) == VQ_STATUS_OK && mi.needs_calibration) ||
        na < 2) {
        fprintf(stderr,
                "%s: --ratequant needs a key method with a range of bit-widths "
                "(e.g. turboquant_mse, kivi); %s has %d\n",
                cmd, vq_method_name(cp->key.method), na);
        return 0;
    }
    if (o->ratequant < allowed[0] || o->ratequant > allowed[na - 1]) {
        fprintf(stderr, "%s: --ratequant %g: outside the bit-widths %d..%d of %s\n", cmd,
                o->ratequant, allowed[0], allowed[na - 1], vq_method_name(cp->key.method));
        return 0;
    }
    double *w = malloc(sizeof(double) * (size_t)n_layers);
    if (!w) return -1;
    if (flags & VQ_KV_EQUAL_WEIGHTS) {
        for (int l = 0; l < n_layers; l++) w[l] = 1.0;
    } else if (!vq_cli_ratequant_sens(cmd, model_path, model, n_layers, head_dim, o->calib_tokens,
                                      1, w)) {
        free(w);
        return -1;
    }
    if (!(flags & (VQ_KV_QUIET | VQ_KV_EQUAL_WEIGHTS))) {
        fprintf(stderr, "%s: ratequant: layer sensitivities (mean ||k||^2):", cmd);
        for (int l = 0; l < n_layers; l++) fprintf(stderr, " %.4g", w[l]);
        fprintf(stderr, "\n");
    }
    /* allocate over the quantized layers only (fp16 edge layers keep their bytes) */
    const int f0 = o->fp16_first < n_layers ? o->fp16_first : n_layers;
    const int nq = n_layers - o->fp16_first - o->fp16_last;
    for (int l = 0; l < n_layers; l++) out->k_bits[l] = (int)o->ratequant;
    vq_status st = nq > 0 ? vq_ratequant_allocate(w + f0, nq, o->ratequant, allowed, na, 0.0,
                                                  out->k_bits + f0)
                          : VQ_STATUS_OK;
    free(w);
    if (st == VQ_STATUS_OK && o->rq_values != VQ_RQ_VALUES_OFF && !o->n_v_bpl) {
        if (o->rq_values == VQ_RQ_VALUES_KEYS) {
            memcpy(out->v_bits, out->k_bits, sizeof(int) * (size_t)n_layers);
        } else {
            int va[16];
            const int nva = allowed_bits(&cp->value, head_dim, va);
            st = rq_values_even(o, n_layers, f0, nq, va, nva, out->v_bits);
        }
    }
    if (st != VQ_STATUS_OK) {
        fprintf(stderr, "%s: ratequant allocation: %s\n", cmd, vq_status_str(st));
        return 0;
    }
    out->rq_mean = o->ratequant;
    if (!(flags & VQ_KV_QUIET)) {
        char what[96];
        snprintf(what, sizeof what, "ratequant %g: key bits per layer", o->ratequant);
        print_bits(cmd, what, out->k_bits, n_layers, o->fp16_first, o->fp16_last);
        if (out->v_bits && !o->n_v_bpl)
            print_bits(cmd,
                       o->rq_values == VQ_RQ_VALUES_KEYS ? "value bits per layer (= keys)"
                                                         : "value bits per layer (even)",
                       out->v_bits, n_layers, o->fp16_first, o->fp16_last);
    }
    return 1;
}

/* Every per-layer width of out must be accepted by its codec (calibrated codecs are checked
 * when their calibration is attached; fp16 edge layers are skipped). 1 ok, 0 printed. */
static int layers_accepted(const char *cmd, const struct vq_kv_opts *o, int n_layers, int head_dim,
                           const struct vq_cache_params *cp, const struct vq_kv_layers *out) {
    const int *lists[2] = {out->k_bits, out->v_bits};
    const struct vq_codec_params *cps[2] = {&cp->key, &cp->value};
    for (int s = 0; s < 2; s++) {
        struct vq_method_info mi;
        if (!lists[s] ||
            (vq_method_info_get(cps[s]->method, &mi) == VQ_STATUS_OK && mi.needs_calibration))
            continue;
        for (int l = 0; l < n_layers; l++) {
            if (l < o->fp16_first || l >= n_layers - o->fp16_last) continue;
            vq_status st = VQ_STATUS_OK;
            if (!codec_accepts(cps[s], lists[s][l], head_dim, &st)) {
                fprintf(stderr, "%s: %s: layer %d: %d bits not accepted by %s (%s)\n", cmd,
                        s == 0 ? "key bits per layer" : "value bits per layer", l, lists[s][l],
                        vq_method_name(cps[s]->method), vq_status_str(st));
                return 0;
            }
        }
    }
    return 1;
}

/* out[i] = l[floor(i * n / n_layers)] for the model's n_layers layers: a list of n_layers entries
 * is copied as is, a pattern of other length spread over the depth. */
static void spread_layers(const int *l, int n, int *out, int n_layers) {
    for (int i = 0; i < n_layers; i++) out[i] = l[(int64_t)i * n / n_layers];
}

int vq_kv_layers_apply(const char *cmd, const struct vq_kv_opts *o, const char *model_path,
                       struct vq_model *model, int n_layers, int head_dim,
                       struct vq_cache_params *cp, struct vq_kv_layers *out, int flags) {
    memset(out, 0, sizeof *out);
    vq_cli_calib_set_tokens(o->calib_tokens);
    out->n_layers = n_layers;
    if (!layers_check(cmd, o, n_layers)) return 0;
    cp->fp16_first_layers = o->fp16_first;
    cp->fp16_last_layers = o->fp16_last;
    const int want_k = o->n_k_bpl || o->ratequant > 0;
    const int want_v = o->n_v_bpl || (o->ratequant > 0 && o->rq_values != VQ_RQ_VALUES_OFF);
    if (want_k) out->k_bits = malloc(sizeof(int) * (size_t)n_layers);
    if (want_v) out->v_bits = malloc(sizeof(int) * (size_t)n_layers);
    if ((want_k && !out->k_bits) || (want_v && !out->v_bits)) {
        fprintf(stderr, "%s: out of memory\n", cmd);
        vq_kv_layers_free(out);
        return -1;
    }
    if (o->n_k_bpl) spread_layers(o->k_bpl, o->n_k_bpl, out->k_bits, n_layers);
    if (o->ratequant > 0) {
        const int r = layers_ratequant(cmd, o, model_path, model, n_layers, head_dim, cp, out,
                                       flags);
        if (r != 1) {
            vq_kv_layers_free(out);
            return r;
        }
    }
    if (o->n_v_bpl) spread_layers(o->v_bpl, o->n_v_bpl, out->v_bits, n_layers);
    if (!layers_accepted(cmd, o, n_layers, head_dim, cp, out)) {
        vq_kv_layers_free(out);
        return 0;
    }
    cp->key_bits_per_layer = out->k_bits;
    cp->value_bits_per_layer = out->v_bits;
    return 1;
}

/* Adds digit groups "<p>_bits_l<first>" for bits (n); returns 0 if they do not fit. */
static int add_digit_groups(struct vq_result_config *rc, const char *prefix, const int *bits,
                            int n) {
    const int groups = (n + 14) / 15;
    if (rc->n_opts + groups > VQ_RESULT_MAX_OPTS) return 0;
    for (int l = 0; l < n; l++)
        if (bits[l] < 1 || bits[l] > 9) return 0;
    for (int g = 0; g < groups; g++) {
        long long v = 0;
        for (int l = g * 15; l < n && l < g * 15 + 15; l++) v = v * 10 + bits[l];
        snprintf(rc->opts[rc->n_opts].key, 32, "%s_bits_l%d", prefix, g * 15);
        rc->opts[rc->n_opts++].value = v;
    }
    return 1;
}

/* Fallback: "<p>_layers_b<B>" = layers with B bits. */
static void add_counts(struct vq_result_config *rc, const char *prefix, const int *bits, int n) {
    for (int b = 1; b <= 32 && rc->n_opts < VQ_RESULT_MAX_OPTS; b++) {
        int c = 0;
        for (int l = 0; l < n; l++) c += bits[l] == b;
        if (!c) continue;
        snprintf(rc->opts[rc->n_opts].key, 32, "%s_layers_b%d", prefix, b);
        rc->opts[rc->n_opts++].value = c;
    }
}

void vq_kv_result_config_layers(const struct vq_cache_params *cp, const struct vq_kv_layers *l,
                                struct vq_result_config *rc) {
#define OPT(key_, val_) \
    do { \
        if (rc->n_opts < VQ_RESULT_MAX_OPTS) { \
            snprintf(rc->opts[rc->n_opts].key, 32, "%s", key_); \
            rc->opts[rc->n_opts++].value = (val_); \
        } \
    } while (0)
    if (l->rq_mean > 0) OPT("ratequant_mbits", (long long)(l->rq_mean * 1000.0 + 0.5));
    if (cp->fp16_first_layers) OPT("fp16_first", cp->fp16_first_layers);
    if (cp->fp16_last_layers) OPT("fp16_last", cp->fp16_last_layers);
    const int same = l->k_bits && l->v_bits &&
                     !memcmp(l->k_bits, l->v_bits, sizeof(int) * (size_t)l->n_layers);
    if (same) OPT("v_bits_same_as_k", 1);
    if (l->k_bits && !add_digit_groups(rc, "k", l->k_bits, l->n_layers))
        add_counts(rc, "k", l->k_bits, l->n_layers);
    if (l->v_bits && !same && !add_digit_groups(rc, "v", l->v_bits, l->n_layers))
        add_counts(rc, "v", l->v_bits, l->n_layers);
#undef OPT
}
