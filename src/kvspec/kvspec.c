/* kvspec.c — KV specs: the named configurations (presets), the config-name grammar, canonical
 * names and the resolution of a spec into cache params for a model geometry (veloxquant.h
 * "KV specs"). The one place where a name such as "kv4" is given a meaning: the CLI, the
 * benchmarks and the bindings call these functions. Defaults (bits per method, which options a
 * method reads, which modifiers combine) come from the codec traits (vq_method_info_get /
 * vq_method_flags), never from a per-method switch here. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sha256.h"
#include "engine/model.h"
#include "eval/kvmem.h"
#include "veloxquant.h"
#include "vq_engine.h"

/* ---- the named configurations ---- */

struct named {
    const char *name, *config, *description;
    double max_bits; /* tier presets only */
    int tier;
};

/* The presets' ratios against fp16 are their bits/elem on SmolLM2-135M at ctx 2048
 * (`veloxquant methods`). kv5, kv4, kv3: KIVI keys with per-channel widths learned from the
 * first 64 tokens (docs/ALGORITHMS.md §8.8) and rotated values, mean 5 / 4 / 3 bits; kv2: the
 * same at mean 2 with 0-bit channels allowed (+kcz); kv5..kv2 attend to the first token (the
 * attention sink) from fp16 rows (§8.9). fp16 (the baseline) comes first, the named sweep
 * configurations after the presets. */
static const struct named g_named[] = {
    {"fp16", "fp16:fp16", "fp16 keys and values (the baseline, llama.cpp-exact)", 0, 0},
    {"kv8", "int8", "int8 keys and values: 1.9x smaller than fp16, the closest to it", 8.5, 1},
    {"kv5", "kivi-5:turboquant_mse-5+g64+res0+s1+kc", "5 bits: 3.0x smaller than fp16", 5.5, 1},
    {"kv4", "kivi-4:turboquant_mse-4+g64+res0+s1+kc",
     "4 bits: 3.6x smaller than fp16, the default choice", 4.5, 1},
    {"kv3", "kivi-3:turboquant_mse-3+g64+res0+s1+kc", "3 bits: 4.7x smaller than fp16", 3.5, 1},
    {"kv2", "kivi-2:turboquant_mse-2+g64+res0+s1+kcz",
     "2 bits: 6.7x smaller than fp16, the largest quality cost", 2.5, 1},
    {"turboquant_mse-4", "turboquant_mse-4:turboquant_mse-4", "TurboQuant MSE, 4 bits", 0, 0},
    {"turboquant_mse-3", "turboquant_mse-3:turboquant_mse-3", "TurboQuant MSE, 3 bits", 0, 0},
    {"turboquant_mse-2", "turboquant_mse-2:turboquant_mse-2", "TurboQuant MSE, 2 bits", 0, 0},
    {"turboquant_prod-4", "turboquant_prod-4:turboquant_prod-4", "TurboQuant prod, 4 bits", 0, 0},
    {"turboquant_prod-3", "turboquant_prod-3:turboquant_prod-3", "TurboQuant prod, 3 bits", 0, 0},
    {"turboquant_prod-2", "turboquant_prod-2:turboquant_prod-2", "TurboQuant prod, 2 bits", 0, 0},
    {"turboquant_rvq-2", "turboquant_rvq-2:turboquant_rvq-2", "two-stage RVQ, 2 bits", 0, 0},
    {"turboquant_rvq-1", "turboquant_rvq-1:turboquant_rvq-1", "two-stage RVQ, 1 bit", 0, 0},
    /* QJL sketches keys only; values as in the official QJL code: KIVI-style 2-bit */
    {"qjl", "qjl-1:kivi-2", "QJL 1-bit key sketch, KIVI 2-bit values", 0, 0},
    {"polar", "polar-4:polar-4", "PolarQuant", 0, 0},
    {"kivi-4", "kivi-4:kivi-4", "KIVI, 4 bits", 0, 0},
    {"kivi-2", "kivi-2:kivi-2", "KIVI, 2 bits", 0, 0},
    {"kivi_sink-2", "kivi_sink-2:kivi_sink-2", "KIVI 2 bits with fp16 sink tokens", 0, 0},
    {"asym-k4v2", "turboquant_mse-4:turboquant_mse-2", "TurboQuant MSE, 4-bit keys, 2-bit values",
     0, 0},
    /* calibrated (artifacts from `veloxquant calibrate`) */
    {"vecinfer-2", "vecinfer-2:vecinfer-2", "VecInfer product VQ, 2 bits (calibrated)", 0, 0},
    {"vecinfer-1.5", "vecinfer-1.5:vecinfer-1.5", "VecInfer, 1.5 bits (calibrated)", 0, 0},
    {"vecinfer-1", "vecinfer-1:vecinfer-1", "VecInfer, 1 bit (calibrated)", 0, 0},
    {"spectral-3", "spectral-3:spectral-3", "SpectralQuant, 3 bits (calibrated)", 0, 0},
    /* RateQuant per-layer bits (mean 1.5 / 2.5 bits, sensitivities calibrated on demand) */
    {"ratequant-1.5", "turboquant_mse+rq1.5", "RateQuant per-layer key bits, mean 1.5", 0, 0},
    {"ratequant-2.5", "turboquant_mse+rq2.5", "RateQuant per-layer key bits, mean 2.5", 0, 0},
    /* outlier modifiers: rvq 1-bit with outlier tokens (k = 2.5) kept fp16; tq_mse 3-bit with
     * 4 int8 outlier key channels */
    {"turboquant_rvq-1+ot", "turboquant_rvq-1:turboquant_rvq-1+ot", "RVQ 1 bit, outlier tokens", 0,
     0},
    {"turboquant_mse-3+oc4", "turboquant_mse-3:turboquant_mse-3+oc4",
     "TurboQuant MSE 3 bits, 4 outlier key channels", 0, 0},
};
#define N_NAMED ((int)(sizeof g_named / sizeof g_named[0]))

int vq_kv_preset_count(void) { return N_NAMED; }

vq_status vq_kv_preset_get(int i, struct vq_kv_preset_info *out) {
    if (i < 0 || i >= N_NAMED || !out) return VQ_STATUS_INVALID_ARG;
    out->name = g_named[i].name;
    out->config = g_named[i].config;
    out->description = g_named[i].description;
    out->max_bits = g_named[i].max_bits;
    out->tier = g_named[i].tier;
    return VQ_STATUS_OK;
}

/* ---- errors ---- */

static vq_status fail(char *err, size_t cap, vq_status st, const char *fmt, ...) {
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return st;
}

const char *vq_kv_nearest_name(const char *s, int methods_only) {
    const char *names[N_NAMED + 64];
    int n = 0;
    for (int i = 0; !methods_only && i < N_NAMED; i++) names[n++] = g_named[i].name;
    for (int m = 0; m < 64; m++) {
        const char *mn = vq_method_name((enum vq_method)m);
        if (mn && strcmp(mn, "unknown")) names[n++] = mn;
    }
    const int i = vq_nearest_name(s, names, n);
    return i >= 0 ? names[i] : NULL;
}

/* ---- spec basics ---- */

void vq_kv_spec_init(struct vq_kv_spec *s) {
    memset(s, 0, sizeof *s);
    s->group_size = s->residual_length = s->n_sink_tokens = s->jl_dim = -1;
    s->outlier_token_k = -1.0f;
    s->n_outlier_channels = s->n_calib_tokens = -1;
    s->stream_window = s->stream_sinks = -1;
    s->key_scales = s->key_channel_bits = -1;
}

/* Whether the method has a choice of widths (its label carries "-B"). */
static int has_bits_choice(enum vq_method m) {
    struct vq_method_info mi;
    return vq_method_info_get(m, &mi) == VQ_STATUS_OK &&
           (mi.min_bits < mi.max_bits || mi.frac_bits > 0);
}

/* Sets the width of one side. A width the user gave (given = 1) must be one the method accepts
 * (vq_codec_params_set_bits: its range, or its half width); a default width of a method without
 * a choice is stored as is. 0 ok, else INVALID_ARG with the reason. */
static vq_status resolve_bits(struct vq_codec_params *p, double bits, int given, const char *side,
                              char *err, size_t cap) {
    if (vq_codec_params_set_bits(p, bits) == VQ_STATUS_OK) return VQ_STATUS_OK;
    struct vq_method_info mi;
    vq_method_info_get(p->method, &mi);
    if (bits == floor(bits) && !given) {
        p->bits = (int)bits;
        return VQ_STATUS_OK;
    }
    if (mi.min_bits == mi.max_bits)
        return fail(err, cap, VQ_STATUS_INVALID_ARG, "%s bits %g: %s has a fixed width (%d)", side,
                    bits, vq_method_name(p->method), mi.min_bits);
    if (mi.frac_bits > 0)
        return fail(err, cap, VQ_STATUS_INVALID_ARG, "%s bits %g: %s accepts %d..%d and %g", side,
                    bits, vq_method_name(p->method), mi.min_bits, mi.max_bits, mi.frac_bits);
    return fail(err, cap, VQ_STATUS_INVALID_ARG, "%s bits %g: %s accepts %d..%d", side, bits,
                vq_method_name(p->method), mi.min_bits, mi.max_bits);
}

vq_status vq_kv_spec_codecs(const struct vq_kv_spec *o, struct vq_codec_params *k,
                            struct vq_codec_params *v, char *err, size_t cap) {
    *k = vq_codec_params_default();
    *v = vq_codec_params_default();
    k->role = VQ_ROLE_KEY;
    v->role = VQ_ROLE_VALUE;
    /* RateQuant alone means turboquant_mse keys and values */
    enum vq_method base = o->has_method    ? o->method
                        : o->ratequant > 0 ? VQ_METHOD_TURBOQUANT_MSE
                                           : VQ_METHOD_FP16;
    k->method = o->has_k_method ? o->k_method : base;
    v->method = o->has_v_method ? o->v_method : base;
    /* with RateQuant B the uniform bits (used where no per-layer value is set) are floor(B) */
    const double rq_b = o->ratequant > 0 ? floor(o->ratequant) : 0;
    const double kb = o->k_bits ? o->k_bits
                    : o->bits   ? o->bits
                    : rq_b      ? rq_b
                                : vq_method_default_bits(k->method);
    const double vb = o->v_bits ? o->v_bits
                    : o->bits   ? o->bits
                    : rq_b      ? rq_b
                                : vq_method_default_bits(v->method);
    vq_status st = resolve_bits(k, kb, o->k_bits || o->bits, "key", err, cap);
    if (st == VQ_STATUS_OK) st = resolve_bits(v, vb, o->v_bits || o->bits, "value", err, cap);
    if (st != VQ_STATUS_OK) return st;
    struct vq_codec_params *both[2] = {k, v};
    for (int i = 0; i < 2; i++) {
        if (o->group_size >= 0) both[i]->group_size = o->group_size;
        if (o->residual_length >= 0) both[i]->residual_length = o->residual_length;
        if (o->n_sink_tokens >= 0) both[i]->n_sink_tokens = o->n_sink_tokens;
        if (o->jl_dim >= 0) both[i]->jl_dim = o->jl_dim;
        if (o->has_seed) both[i]->seed = o->seed;
    }
    return VQ_STATUS_OK;
}

void vq_kv_spec_apply_modifiers(const struct vq_kv_spec *o, struct vq_cache_params *cp) {
    if (o->outlier_token_k >= 0.0f) cp->outlier_token_k = o->outlier_token_k;
    if (o->n_outlier_channels >= 0) cp->n_outlier_channels = o->n_outlier_channels;
    if (o->n_calib_tokens >= 0) cp->n_calib_tokens = o->n_calib_tokens;
    if (o->stream_window >= 0) cp->stream_window = o->stream_window;
    if (o->stream_sinks >= 0) cp->stream_sinks = o->stream_sinks;
    if (o->key_scales >= 0) cp->key_scales = o->key_scales;
    if (o->key_channel_bits >= 0) cp->key_channel_bits = o->key_channel_bits;
    cp->fp16_first_layers = o->fp16_first;
    cp->fp16_last_layers = o->fp16_last;
}

const char *vq_kv_modifier_error(const struct vq_cache_params *cp) {
    const enum vq_method km = cp->key.method, vm = cp->value.method;
    const unsigned kf = vq_method_flags(km), vf = vq_method_flags(vm);
    /* the rules of vq_cache_params (veloxquant.h) in method traits: outlier tokens need a side
     * that can bypass them and no kivi_sink side; the channel split needs keys that take it */
    const int ot_ok = !((kf | vf) & VQ_METHOD_F_SINKS) && ((kf | vf) & VQ_METHOD_F_OUTLIER_TOKENS);
    if (cp->outlier_token_k > 0.0f && !ot_ok)
        return (kf | vf) & VQ_METHOD_F_SINKS
                 ? "outlier tokens (+ot, --outlier-tokens) do not combine with kivi_sink (it "
                   "keeps its high-norm tokens in fp16 already)"
                 : "outlier tokens (+ot, --outlier-tokens) need a quantized key or value method "
                   "(fp16/fp32 have nothing to bypass)";
    if (cp->n_outlier_channels > 0) {
        if (!(kf & VQ_METHOD_F_OUTLIER_CHANNELS))
            return kf & VQ_METHOD_F_PER_CHANNEL_KEYS
                     ? "outlier channels (+oc, --outlier-channels): kivi quantizes keys per "
                       "channel, which already isolates outlier channels"
                 : !(kf & VQ_METHOD_F_QUANTIZED)
                     ? "outlier channels (+oc, --outlier-channels) need a quantized key method "
                       "(fp16/fp32 keys have nothing to split)"
                     : "outlier channels (+oc, --outlier-channels): calibrated key codecs "
                       "(vecinfer, spectral) are fitted on whole keys; use turboquant_mse/prod/"
                       "rvq, qjl or polar keys";
        if (cp->n_outlier_channels > cp->head_dim / 2)
            return "outlier channels (+oc, --outlier-channels) must be at most head_dim / 2";
    }
    if (cp->key_scales > 0 && !(kf & VQ_METHOD_F_QUANTIZED))
        return "key scales (+ks, --key-scales) need a quantized key method (fp16/fp32 keys lose "
               "nothing to scale)";
    if (cp->key_channel_bits && !(kf & VQ_METHOD_F_PER_CHANNEL_KEYS))
        return "per-channel key widths (+kc, --key-channel-bits) need KIVI keys (kivi, "
               "kivi_sink)";
    return NULL;
}

/* ---- names ---- */

/* Appends the modifier suffix of cp to a label: "+otK" ("+ot" for K = 2.5), "+ocN[tT]",
 * "+wW[sS]" or "+sS", "+ks" / "+ksk", "+kc" / "+kcz". */
static void name_modifiers(const struct vq_cache_params *cp, char *out, size_t cap) {
    size_t n = strlen(out);
#define ADD(...) \
    do { \
        if (n < cap) n += (size_t)snprintf(out + n, cap - n, __VA_ARGS__); \
    } while (0)
    if (cp->outlier_token_k > 0.0f) {
        if (cp->outlier_token_k == 2.5f) ADD("+ot");
        else ADD("+ot%g", (double)cp->outlier_token_k);
    }
    if (cp->n_outlier_channels > 0) {
        if (cp->n_calib_tokens == 200) ADD("+oc%d", cp->n_outlier_channels);
        else ADD("+oc%dt%d", cp->n_outlier_channels, cp->n_calib_tokens);
    }
    if (cp->stream_window > 0) {
        if (cp->stream_sinks > 0) ADD("+w%ds%d", cp->stream_window, cp->stream_sinks);
        else ADD("+w%d", cp->stream_window);
    } else if (cp->stream_sinks > 0) ADD("+s%d", cp->stream_sinks); /* sinks alone */
    if (cp->key_scales > 0) ADD(cp->key_scales == 2 ? "+ks" : "+ksk");
    if (cp->key_channel_bits > 0) ADD(cp->key_channel_bits == 2 ? "+kcz" : "+kc");
#undef ADD
}

/* 1 if the spec parsed from config c equals s (preset field aside). */
static int spec_equals_config(const struct vq_kv_spec *s, const char *c);
static vq_status parse_name(const char *name, struct vq_kv_spec *o, char *err, size_t cap,
                            int depth);

/* Base label of resolved codecs: a plain named configuration they match ("qjl",
 * "asym-k4v2"), else "turboquant_mse-3", "turboquant_mse-k4v2" (same method, different bits),
 * "qjl-1:kivi-2" (different methods); methods without a choice of widths have no "-B". */
static void name_codecs(const struct vq_codec_params *k, const struct vq_codec_params *v, char *out,
                        size_t cap) {
    const char *kn = vq_method_name(k->method), *vn = vq_method_name(v->method);
    const double kb = vq_codec_params_bits(k), vb = vq_codec_params_bits(v);
    if (k->method == v->method) {
        if (!has_bits_choice(k->method)) snprintf(out, cap, "%s", kn);
        else if (kb == vb) snprintf(out, cap, "%s-%g", kn, kb);
        else snprintf(out, cap, "%s-k%gv%g", kn, kb, vb);
        /* a configuration of that name means another cache (named "qjl" = qjl keys, kivi
         * values): spell both sides out */
        int taken = 0;
        for (int i = 0; i < N_NAMED; i++)
            if (!strcmp(out, g_named[i].name)) {
                struct vq_kv_spec ns;
                struct vq_codec_params nk, nv;
                vq_kv_spec_init(&ns);
                taken = parse_name(g_named[i].config, &ns, NULL, 0, 1) != VQ_STATUS_OK ||
                        vq_kv_spec_codecs(&ns, &nk, &nv, NULL, 0) != VQ_STATUS_OK ||
                        nk.method != k->method || nv.method != v->method ||
                        vq_codec_params_bits(&nk) != kb || vq_codec_params_bits(&nv) != vb;
            }
        if (!taken) return;
    }
    snprintf(out, cap, "%s-%g:%s-%g", kn, kb, vn, vb);
}


int vq_kv_spec_name(const struct vq_kv_spec *o, char *out, size_t cap) {
    char buf[256];
    /* a named configuration whose spec this is exactly */
    for (int i = 0; i < N_NAMED; i++)
        if ((o->preset == i + 1 || !o->preset) && spec_equals_config(o, g_named[i].config)) {
            snprintf(buf, sizeof buf, "%s", g_named[i].name);
            goto done;
        }
    struct vq_codec_params k, v;
    if (vq_kv_spec_codecs(o, &k, &v, NULL, 0) != VQ_STATUS_OK) {
        /* a width no codec takes: spell what was given */
        k = vq_codec_params_default();
        v = vq_codec_params_default();
        k.method = o->has_k_method ? o->k_method : o->has_method ? o->method : VQ_METHOD_FP16;
        v.method = o->has_v_method ? o->v_method : o->has_method ? o->method : VQ_METHOD_FP16;
        k.bits = (int)(o->k_bits ? o->k_bits : o->bits);
        v.bits = (int)(o->v_bits ? o->v_bits : o->bits);
    }
    size_t n;
    if (o->ratequant > 0 && k.method == VQ_METHOD_TURBOQUANT_MSE &&
        v.method == VQ_METHOD_TURBOQUANT_MSE && !o->bits && !o->k_bits && !o->v_bits &&
        o->rq_values == VQ_KV_RQ_VALUES_KEYS) {
        snprintf(buf, sizeof buf, "ratequant-%g", o->ratequant);
    } else {
        name_codecs(&k, &v, buf, sizeof buf);
        if (o->ratequant > 0) {
            n = strlen(buf);
            snprintf(buf + n, sizeof buf - n, "+rq%g%s", o->ratequant,
                     o->rq_values == VQ_KV_RQ_VALUES_EVEN  ? "+rqv_even"
                     : o->rq_values == VQ_KV_RQ_VALUES_OFF ? "+rqv_off"
                                                           : "");
        }
    }
    n = strlen(buf);
#define ADD(...) \
    do { \
        if (n < sizeof buf) n += (size_t)snprintf(buf + n, sizeof buf - n, __VA_ARGS__); \
    } while (0)
    if (o->fp16_first || o->fp16_last) ADD("+fp16f%dl%d", o->fp16_first, o->fp16_last);
    for (int side = 0; side < 2; side++) {
        const int nb = side ? o->n_v_bpl : o->n_k_bpl;
        const int *l = side ? o->v_bpl : o->k_bpl;
        if (!nb) continue;
        if (!(side ? o->v_bpl_pattern : o->k_bpl_pattern)) {
            ADD(side ? "+vbpl" : "+kbpl");
            continue;
        }
        ADD(side ? "+vb" : "+kb");
        for (int i = 0; i < nb; i++) ADD("%d", l[i]);
    }
    /* codec options given (the name must tell configs apart: results are keyed by it) */
    const int co[4] = {o->group_size, o->residual_length, o->n_sink_tokens, o->jl_dim};
    static const char *const cs[4] = {"g", "res", "sink", "jl"};
    for (int i = 0; i < 4; i++)
        if (co[i] >= 0) ADD("+%s%d", cs[i], co[i]);
    if (o->has_seed) ADD("+seed%llu", (unsigned long long)o->seed);
#undef ADD
    struct vq_cache_params mp = vq_cache_params_default();
    vq_kv_spec_apply_modifiers(o, &mp);
    name_modifiers(&mp, buf, sizeof buf);
done:;
    const size_t len = strlen(buf);
    if (!out || len + 1 > cap) return -(int)(len + 1);
    memcpy(out, buf, len + 1);
    return (int)len;
}

/* ---- parsing ---- */

/* "METHOD" or "METHOD-B" into method and bits (0 = default; B whole or half): OK, or
 * INVALID_ARG with the reason. */
static vq_status parse_mb(const char *s, size_t n, enum vq_method *m, double *bits, char *err,
                          size_t cap) {
    char buf[64];
    if (n == 0 || n >= sizeof buf)
        return fail(err, cap, VQ_STATUS_INVALID_ARG, "empty or overlong method in '%.*s'",
                    (int)(n < 64 ? n : 64), s);
    memcpy(buf, s, n);
    buf[n] = 0;
    *bits = 0;
    char *dash = strrchr(buf, '-');
    if (dash && vq_method_from_name(buf, m) != VQ_STATUS_OK) {
        char *end;
        const double b = strtod(dash + 1, &end);
        if (end == dash + 1 || *end || !(b >= 1 && b <= 32) || b * 2 != floor(b * 2))
            return fail(err, cap, VQ_STATUS_INVALID_ARG,
                        "'%s': bits '%s' are not a whole or half number in 1..32", buf, dash + 1);
        *bits = b;
        *dash = 0;
    }
    if (vq_method_from_name(buf, m) == VQ_STATUS_OK) return VQ_STATUS_OK;
    const char *near = vq_kv_nearest_name(buf, 0);
    if (near)
        return fail(err, cap, VQ_STATUS_INVALID_ARG, "unknown method '%s': did you mean %s?", buf,
                    near);
    return fail(err, cap, VQ_STATUS_INVALID_ARG,
                "unknown method '%s' (see `veloxquant methods` for the methods and presets)", buf);
}

/* "+kb<digits>" / "+vb<digits>" (side 'k' / 'v'): per-layer bits as one digit 1..9 per entry,
 * 1 .. 40 entries. 1 ok, 0 not one. */
static int digit_pattern(const char *d, struct vq_kv_spec *o, char side) {
    int *out = side == 'k' ? o->k_bpl : o->v_bpl, n = 0;
    for (; d[n]; n++) {
        if (d[n] < '1' || d[n] > '9' || n == 40) return 0;
        out[n] = d[n] - '0';
    }
    if (n == 0) return 0;
    if (side == 'k') o->n_k_bpl = n, o->k_bpl_pattern = 1;
    else o->n_v_bpl = n, o->v_bpl_pattern = 1;
    return 1;
}

/* Parses the "+..." suffixes of a name; OK or INVALID_ARG naming the suffix. */
static vq_status parse_suffixes(const char *name, const char *s, struct vq_kv_spec *o, char *err,
                                size_t cap) {
    while (*s == '+') {
        s++;
        const char *e = strchr(s, '+');
        const size_t n = e ? (size_t)(e - s) : strlen(s);
        char t[48], tail;
        if (n == 0 || n >= sizeof t)
            return fail(err, cap, VQ_STATUS_INVALID_ARG,
                        "KV config '%s': empty or overlong '+' "
                        "modifier",
                        name);
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
        else if ((t[0] == 'k' || t[0] == 'v') && t[1] == 'b' && !strcmp(t + 2, "pl"))
            return fail(err, cap, VQ_STATUS_INVALID_ARG,
                        "KV config '%s': '+%s' stands for an explicit per-layer list, which a "
                        "name cannot carry (give the list as an option)",
                        name, t);
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
        else if (!strcmp(t, "rqv_even")) o->rq_values = VQ_KV_RQ_VALUES_EVEN;
        else if (!strcmp(t, "rqv_off")) o->rq_values = VQ_KV_RQ_VALUES_OFF;
        else if (sscanf(t, "rq%lf%c", &b, &tail) == 1 && b >= 1 && b <= 8) o->ratequant = b;
        else if (sscanf(t, "fp16f%dl%d%c", &f, &l, &tail) == 2 && f >= 0 && l >= 0 &&
                 f <= VQ_KV_MAX_LAYERS && l <= VQ_KV_MAX_LAYERS) {
            o->fp16_first = f;
            o->fp16_last = l;
        } else
            return fail(err, cap, VQ_STATUS_INVALID_ARG,
                        "KV config '%s': unknown or out-of-range modifier '+%s' (modifiers: +gG "
                        "+resR +sinkN +jlM +seedS +kbD.. +vbD.. +fp16fAlB +rqB +ot[K] +ocN[tT] "
                        "+wW[sS] +sS +ks +ksk +kc +kcz)",
                        name, t);
        s += n;
    }
    return VQ_STATUS_OK;
}

/* Parses a name without the preset bookkeeping (recursive for presets and suffixes). */
static vq_status parse_name(const char *name, struct vq_kv_spec *o, char *err, size_t cap,
                            int depth) {
    if (depth > 2) return fail(err, cap, VQ_STATUS_INTERNAL, "preset table loops");
    const char *plus = strchr(name, '+');
    if (plus) {
        char base[64];
        const size_t n = (size_t)(plus - name);
        if (n == 0 || n >= sizeof base)
            return fail(err, cap, VQ_STATUS_INVALID_ARG, "KV config '%s': no method before '+'",
                        name);
        memcpy(base, name, n);
        base[n] = 0;
        vq_status st = parse_name(base, o, err, cap, depth);
        if (st != VQ_STATUS_OK) return st;
        return parse_suffixes(name, plus, o, err, cap);
    }
    for (int i = 0; i < N_NAMED; i++)
        if (!strcmp(name, g_named[i].name)) {
            /* a named config that is its own grammar spelling ("polar" = "polar-4:polar-4") */
            if (!strcmp(g_named[i].config, name)) break;
            return parse_name(g_named[i].config, o, err, cap, depth + 1);
        }
    if (!strncmp(name, "ratequant-", 10)) { /* ratequant-B: turboquant_mse with RateQuant B */
        char *end;
        const double b = strtod(name + 10, &end);
        if (end == name + 10 || *end || !(b >= 1 && b <= 8))
            return fail(err, cap, VQ_STATUS_INVALID_ARG,
                        "KV config '%s': RateQuant mean bits must be a number in 1..8", name);
        o->has_method = 1;
        o->method = VQ_METHOD_TURBOQUANT_MSE;
        o->ratequant = b;
        return VQ_STATUS_OK;
    }
    const char *colon = strchr(name, ':');
    if (colon) {
        vq_status st = parse_mb(name, (size_t)(colon - name), &o->k_method, &o->k_bits, err, cap);
        if (st == VQ_STATUS_OK)
            st = parse_mb(colon + 1, strlen(colon + 1), &o->v_method, &o->v_bits, err, cap);
        if (st != VQ_STATUS_OK) return st;
        o->has_k_method = o->has_v_method = 1;
        return VQ_STATUS_OK;
    }
    /* METHOD-kXvY */
    const char *dash = strrchr(name, '-');
    double kb, vb;
    char tail;
    if (dash && sscanf(dash + 1, "k%lfv%lf%c", &kb, &vb, &tail) == 2) {
        double b;
        vq_status st = parse_mb(name, (size_t)(dash - name), &o->method, &b, err, cap);
        if (st != VQ_STATUS_OK) return st;
        if (b || !(kb >= 1 && kb <= 32 && vb >= 1 && vb <= 32) || kb * 2 != floor(kb * 2) ||
            vb * 2 != floor(vb * 2))
            return fail(err, cap, VQ_STATUS_INVALID_ARG,
                        "KV config '%s': key / value bits must be whole or half numbers in 1..32",
                        name);
        o->has_method = 1;
        o->k_bits = kb;
        o->v_bits = vb;
        return VQ_STATUS_OK;
    }
    vq_status st = parse_mb(name, strlen(name), &o->method, &o->bits, err, cap);
    if (st != VQ_STATUS_OK) {
        /* an unknown whole name: suggest among the named configurations too */
        enum vq_method m;
        char base[64];
        snprintf(base, sizeof base, "%s", name);
        char *d = strrchr(base, '-');
        if (d) *d = 0;
        if (vq_method_from_name(base, &m) != VQ_STATUS_OK) {
            const char *near = vq_kv_nearest_name(name, 0);
            if (near)
                return fail(err, cap, VQ_STATUS_INVALID_ARG,
                            "unknown KV config '%s': did you mean %s?", name, near);
            return fail(err, cap, VQ_STATUS_INVALID_ARG,
                        "unknown KV config '%s' (presets: fp16, kv8, kv5, kv4, kv3, kv2; "
                        "methods and named configs: `veloxquant methods`)",
                        name);
        }
        return st;
    }
    o->has_method = 1;
    return VQ_STATUS_OK;
}

vq_status vq_kv_spec_parse(const char *name, struct vq_kv_spec *s, char *err, size_t cap) {
    if (err && cap) err[0] = 0;
    if (!s) return fail(err, cap, VQ_STATUS_INVALID_ARG, "no spec to fill");
    vq_kv_spec_init(s);
    if (!name || !*name) return fail(err, cap, VQ_STATUS_INVALID_ARG, "empty KV config name");
    vq_status st = parse_name(name, s, err, cap, 0);
    if (st != VQ_STATUS_OK) vq_kv_spec_init(s);
    for (int i = 0; st == VQ_STATUS_OK && i < N_NAMED; i++)
        if (!strcmp(name, g_named[i].name)) s->preset = i + 1;
    return st;
}

static int spec_equals_config(const struct vq_kv_spec *s, const char *c) {
    struct vq_kv_spec t, u = *s;
    if (parse_name(c, (vq_kv_spec_init(&t), &t), NULL, 0, 1) != VQ_STATUS_OK) return 0;
    u.preset = 0;
    /* both came from vq_kv_spec_init (memset), so padding bytes match */
    return !memcmp(&t, &u, sizeof t);
}

/* ---- resolution for a geometry ---- */

void vq_kv_layer_bits_free(struct vq_kv_layer_bits *lb) {
    if (!lb) return;
    free(lb->key_bits);
    free(lb->value_bits);
    memset(lb, 0, sizeof *lb);
}

int vq_kv_spec_needs_layer_weights(const struct vq_kv_spec *s) { return s && s->ratequant > 0; }

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

/* The even spread of RateQuant's mean over the nq quantized layers from f0 (2.5 -> 2,3,2,3...)
 * into v_bits; RANGE when a width is not one of the value codec's va[0..nva). */
static vq_status rq_values_even(double mean, int n_layers, int f0, int nq, const int *va, int nva,
                                int *v_bits) {
    for (int l = 0; l < n_layers; l++) {
        const int j = l - f0; /* index among the quantized layers */
        const int b = j < 0 || j >= nq
                        ? (int)mean
                        : (int)floor((j + 1) * mean + 0.5) - (int)floor(j * mean + 0.5);
        int okb = 0;
        for (int a = 0; a < nva; a++) okb |= va[a] == b;
        if (!okb) return VQ_STATUS_RANGE;
        v_bits[l] = b;
    }
    return VQ_STATUS_OK;
}

/* RateQuant: key bits per layer from the layer weights w over the widths the key codec
 * accepts; values follow rq_values unless listed. */
static vq_status layers_ratequant(const struct vq_kv_spec *o, int n_layers, int head_dim,
                                  const double *w, const struct vq_cache_params *cp,
                                  struct vq_kv_layer_bits *out, char *err, size_t cap) {
    struct vq_method_info mi;
    int allowed[16];
    const int na = allowed_bits(&cp->key, head_dim, allowed);
    if ((vq_method_info_get(cp->key.method, &mi) == VQ_STATUS_OK && mi.needs_calibration) || na < 2)
        return fail(err, cap, VQ_STATUS_INVALID_ARG,
                    "RateQuant needs a key method with a range of bit-widths (e.g. "
                    "turboquant_mse, kivi); %s has %d",
                    vq_method_name(cp->key.method), na);
    if (o->ratequant < allowed[0] || o->ratequant > allowed[na - 1])
        return fail(err, cap, VQ_STATUS_INVALID_ARG,
                    "RateQuant %g: outside the bit-widths %d..%d of %s", o->ratequant, allowed[0],
                    allowed[na - 1], vq_method_name(cp->key.method));
    if (!w)
        return fail(err, cap, VQ_STATUS_INVALID_ARG,
                    "RateQuant %g needs the model's layer sensitivities (a ratequant "
                    "calibration artifact: `veloxquant calibrate`)",
                    o->ratequant);
    /* allocate over the quantized layers only (fp16 edge layers keep their bytes) */
    const int f0 = o->fp16_first < n_layers ? o->fp16_first : n_layers;
    const int nq = n_layers - o->fp16_first - o->fp16_last;
    for (int l = 0; l < n_layers; l++) out->key_bits[l] = (int)o->ratequant;
    vq_status st = nq > 0 ? vq_ratequant_allocate(w + f0, nq, o->ratequant, allowed, na, 0.0,
                                                  out->key_bits + f0)
                          : VQ_STATUS_OK;
    if (st == VQ_STATUS_OK && o->rq_values != VQ_KV_RQ_VALUES_OFF && !o->n_v_bpl) {
        if (o->rq_values == VQ_KV_RQ_VALUES_KEYS) {
            memcpy(out->value_bits, out->key_bits, sizeof(int) * (size_t)n_layers);
        } else {
            int va[16];
            const int nva = allowed_bits(&cp->value, head_dim, va);
            st = rq_values_even(o->ratequant, n_layers, f0, nq, va, nva, out->value_bits);
        }
    }
    if (st != VQ_STATUS_OK)
        return fail(err, cap, VQ_STATUS_INVALID_ARG, "RateQuant %g: allocation failed: %s",
                    o->ratequant, vq_status_str(st));
    out->ratequant_mean = o->ratequant;
    return VQ_STATUS_OK;
}

/* out[i] = l[floor(i * n / n_layers)]: a list of n_layers entries is copied as is, a pattern
 * of other length spread over the depth. */
static void spread_layers(const int *l, int n, int *out, int n_layers) {
    for (int i = 0; i < n_layers; i++) out[i] = l[(int64_t)i * n / n_layers];
}

vq_status vq_kv_spec_cache_params(const struct vq_kv_spec *o, int n_layers, int n_kv_heads,
                                  int head_dim, const double *layer_weights,
                                  struct vq_cache_params *cp, struct vq_kv_layer_bits *out,
                                  char *err, size_t cap) {
    if (err && cap) err[0] = 0;
    if (!o || !cp || !out || n_layers < 1 || n_layers > VQ_KV_MAX_LAYERS || n_kv_heads < 1 ||
        head_dim < 1)
        return fail(err, cap, VQ_STATUS_INVALID_ARG,
                    "bad geometry: %d layers (1..%d), %d kv heads, head_dim %d", n_layers,
                    VQ_KV_MAX_LAYERS, n_kv_heads, head_dim);
    memset(out, 0, sizeof *out);
    out->n_layers = n_layers;
    *cp = vq_cache_params_default();
    cp->n_layers = n_layers;
    cp->n_kv_heads = n_kv_heads;
    cp->head_dim = head_dim;
    vq_status st = vq_kv_spec_codecs(o, &cp->key, &cp->value, err, cap);
    if (st != VQ_STATUS_OK) return st;
    cp->key.head_dim = cp->value.head_dim = head_dim;
    vq_kv_spec_apply_modifiers(o, cp);
    const char *why = vq_kv_modifier_error(cp);
    if (why) return fail(err, cap, VQ_STATUS_INVALID_ARG, "%s", why);
    /* per-layer options against the model's depth */
    if (o->n_k_bpl && o->n_k_bpl != n_layers && !o->k_bpl_pattern)
        return fail(err, cap, VQ_STATUS_INVALID_ARG,
                    "key bits per layer: %d entries, but the model has %d layers", o->n_k_bpl,
                    n_layers);
    if (o->n_v_bpl && o->n_v_bpl != n_layers && !o->v_bpl_pattern)
        return fail(err, cap, VQ_STATUS_INVALID_ARG,
                    "value bits per layer: %d entries, but the model has %d layers", o->n_v_bpl,
                    n_layers);
    if (o->fp16_first > n_layers || o->fp16_last > n_layers)
        return fail(err, cap, VQ_STATUS_INVALID_ARG,
                    "fp16 layers: first %d / last %d, but the model has %d layers", o->fp16_first,
                    o->fp16_last, n_layers);
    if (o->ratequant > 0 && o->n_k_bpl)
        return fail(err, cap, VQ_STATUS_INVALID_ARG,
                    "RateQuant and per-layer key bits are exclusive");
    const int want_k = o->n_k_bpl || o->ratequant > 0;
    const int want_v = o->n_v_bpl || (o->ratequant > 0 && o->rq_values != VQ_KV_RQ_VALUES_OFF);
    if (want_k && !(out->key_bits = malloc(sizeof(int) * (size_t)n_layers)))
        return VQ_STATUS_NO_MEMORY;
    if (want_v && !(out->value_bits = malloc(sizeof(int) * (size_t)n_layers)))
        return VQ_STATUS_NO_MEMORY;
    if (o->n_k_bpl) spread_layers(o->k_bpl, o->n_k_bpl, out->key_bits, n_layers);
    if (o->ratequant > 0) {
        st = layers_ratequant(o, n_layers, head_dim, layer_weights, cp, out, err, cap);
        if (st != VQ_STATUS_OK) return st;
    }
    if (o->n_v_bpl) spread_layers(o->v_bpl, o->n_v_bpl, out->value_bits, n_layers);
    /* every per-layer width must be accepted by its codec (calibrated codecs are checked when
     * their calibration is attached; fp16 edge layers are skipped) */
    const int *lists[2] = {out->key_bits, out->value_bits};
    const struct vq_codec_params *cps[2] = {&cp->key, &cp->value};
    for (int s = 0; s < 2; s++) {
        struct vq_method_info mi;
        if (!lists[s] ||
            (vq_method_info_get(cps[s]->method, &mi) == VQ_STATUS_OK && mi.needs_calibration))
            continue;
        for (int l = 0; l < n_layers; l++) {
            if (l < o->fp16_first || l >= n_layers - o->fp16_last) continue;
            vq_status cs = VQ_STATUS_OK;
            if (!codec_accepts(cps[s], lists[s][l], head_dim, &cs))
                return fail(err, cap, VQ_STATUS_INVALID_ARG,
                            "%s bits per layer: layer %d: %d bits not accepted by %s (%s)",
                            s == 0 ? "key" : "value", l, lists[s][l],
                            vq_method_name(cps[s]->method), vq_status_str(cs));
        }
    }
    cp->key_bits_per_layer = out->key_bits;
    cp->value_bits_per_layer = out->value_bits;
    return VQ_STATUS_OK;
}

vq_status vq_kv_spec_bits_per_elem(const struct vq_kv_spec *s, int n_layers, int n_kv_heads,
                                   int head_dim, int64_t n_tokens, double *bits) {
    if (!s || !bits || n_tokens < 1) return VQ_STATUS_INVALID_ARG;
    double *w = NULL;
    if (s->ratequant > 0) {
        if (n_layers < 1 || !(w = malloc(sizeof(double) * (size_t)n_layers)))
            return n_layers < 1 ? VQ_STATUS_INVALID_ARG : VQ_STATUS_NO_MEMORY;
        for (int l = 0; l < n_layers; l++) w[l] = 1.0;
    }
    struct vq_cache_params p;
    struct vq_kv_layer_bits lb;
    vq_status st = vq_kv_spec_cache_params(s, n_layers, n_kv_heads, head_dim, w, &p, &lb, NULL, 0);
    free(w);
    struct vq_cache_memory m;
    if (st == VQ_STATUS_OK) st = vq_kv_estimate(&p, n_tokens, &m);
    if (st == VQ_STATUS_OK)
        *bits = (double)m.total_bytes * 8.0 /
                (2.0 * (double)n_layers * n_kv_heads * head_dim * (double)n_tokens);
    vq_kv_layer_bits_free(&lb);
    return st;
}

/* ---- contexts and caches by name ---- */

/* RateQuant layer sensitivities of the model whose file has SHA-256 sha into w (n_layers):
 * the "ratequant" artifact of the artifact cache. OK, or NOT_FOUND with the reason in err. */
static vq_status load_ratequant(const uint8_t sha[32], int n_layers, int head_dim, double *w,
                                char *err, size_t cap) {
    char path[4096];
    vq_status st = vq_calib_artifact_path("ratequant", sha, "sens", path, sizeof path);
    if (st != VQ_STATUS_OK)
        return fail(err, cap, VQ_STATUS_NOT_FOUND,
                    "RateQuant: no artifact cache (set VQ_CACHE_DIR or HOME)");
    vq_calib_data *cd = vq_calib_data_load(path, "ratequant", sha, &st);
    const double *s = cd ? vq_calib_sensitivities(cd) : NULL;
    int ok = s && vq_calib_data_n_layers(cd) == n_layers && vq_calib_data_head_dim(cd) == head_dim;
    for (int l = 0; ok && l < n_layers; l++) ok = s[l] > 0;
    if (ok) memcpy(w, s, sizeof(double) * (size_t)n_layers);
    vq_calib_data_free(cd);
    if (ok) return VQ_STATUS_OK;
    return fail(err, cap, VQ_STATUS_NOT_FOUND,
                "RateQuant: no usable layer sensitivities at %s (%s); run `veloxquant calibrate "
                "-m MODEL --method ratequant`",
                path, cd ? "another geometry" : vq_status_str(st));
}

vq_ctx *vq_ctx_create_kv(const vq_model *m, const struct vq_ctx_params *p, const char *kv,
                         vq_status *st) {
    struct vq_ctx_params cp = p ? *p : vq_ctx_params_default();
    vq_status s;
    if (!m) {
        vq_engine_set_error("ctx: NULL model");
        if (st) *st = VQ_STATUS_INVALID_ARG;
        return NULL;
    }
    if (!kv) return vq_ctx_create(m, &cp, st);
    const struct vq_model_info *I = vq_model_info_get(m);
    struct vq_kv_spec spec;
    struct vq_kv_layer_bits lb = {0};
    vq_calib_data *owned[2] = {NULL, NULL};
    char err[512] = "";
    double *w = NULL;
    uint8_t sha[32];
    int have_sha = 0;
    s = vq_kv_spec_parse(kv, &spec, err, sizeof err);
    struct vq_codec_params kp, vp;
    if (s == VQ_STATUS_OK) s = vq_kv_spec_codecs(&spec, &kp, &vp, err, sizeof err);
    struct vq_method_info ki, vi;
    const int calib = s == VQ_STATUS_OK && vq_kv_spec_needs_layer_weights(&spec);
    const int books = s == VQ_STATUS_OK && ((vq_method_info_get(kp.method, &ki) == VQ_STATUS_OK &&
                                             ki.needs_calibration) ||
                                            (vq_method_info_get(vp.method, &vi) == VQ_STATUS_OK &&
                                             vi.needs_calibration));
    char hex[65];
    if ((calib || books) && s == VQ_STATUS_OK) {
        s = m->path && vq_sha256_file(m->path, hex) == VQ_STATUS_OK && vq_sha256_from_hex(hex, sha)
              ? VQ_STATUS_OK
              : fail(err, sizeof err, VQ_STATUS_NOT_FOUND,
                     "KV config '%s' reads calibration, but the model file cannot be hashed", kv);
        have_sha = s == VQ_STATUS_OK;
    }
    if (s == VQ_STATUS_OK && calib) {
        w = malloc(sizeof(double) * (size_t)I->n_layers);
        s = !w ? VQ_STATUS_NO_MEMORY
               : load_ratequant(sha, I->n_layers, I->head_dim, w, err, sizeof err);
    }
    if (s == VQ_STATUS_OK)
        s = vq_kv_spec_cache_params(&spec, I->n_layers, I->n_kv_heads, I->head_dim, w, &cp.cache,
                                    &lb, err, sizeof err);
    free(w);
    if (s == VQ_STATUS_OK && books && have_sha) {
        s = vq_calib_attach(&cp.cache, I->n_layers, I->head_dim, hex, owned);
        if (s != VQ_STATUS_OK)
            snprintf(err, sizeof err,
                     "KV config '%s' needs calibration artifacts for this model: run `veloxquant "
                     "calibrate -m MODEL`",
                     kv);
    }
    vq_ctx *c = NULL;
    if (s == VQ_STATUS_OK) {
        cp.cache.key.isa = cp.cache.value.isa = cp.isa;
        c = vq_ctx_create(m, &cp, &s); /* copies the per-layer widths */
    } else {
        vq_engine_set_error("%s", err[0] ? err : vq_status_str(s));
    }
    vq_kv_layer_bits_free(&lb);
    if (c) vq_ctx_own_calib(c, owned[0], owned[1]);
    else {
        vq_calib_data_free(owned[0]);
        vq_calib_data_free(owned[1]);
    }
    if (st) *st = s;
    return c;
}

vq_cache *vq_cache_create_kv(const char *kv, int n_layers, int n_kv_heads, int head_dim,
                             int64_t max_tokens, int n_threads, char *err, size_t cap,
                             vq_status *st) {
    struct vq_kv_spec spec;
    struct vq_kv_layer_bits lb = {0};
    struct vq_cache_params p;
    vq_status s = vq_kv_spec_parse(kv, &spec, err, cap);
    if (s == VQ_STATUS_OK)
        s = vq_kv_spec_cache_params(&spec, n_layers, n_kv_heads, head_dim, NULL, &p, &lb, err, cap);
    vq_cache *c = NULL;
    if (s == VQ_STATUS_OK) {
        p.max_tokens = max_tokens;
        p.n_threads = n_threads;
        c = vq_cache_create(&p, &s); /* copies the per-layer widths */
        if (!c)
            fail(err, cap, s, "KV config '%s': cache: %s (max_tokens %lld, threads %d)", kv,
                 vq_status_str(s), (long long)max_tokens, n_threads);
    }
    vq_kv_layer_bits_free(&lb);
    if (st) *st = s;
    return c;
}

vq_codec *vq_codec_create_kv(const char *kv, enum vq_role role, int head_dim, char *err, size_t cap,
                             vq_status *st) {
    struct vq_kv_spec spec;
    struct vq_codec_params k, v;
    vq_status s = role == VQ_ROLE_KEY || role == VQ_ROLE_VALUE
                    ? vq_kv_spec_parse(kv, &spec, err, cap)
                    : fail(err, cap, VQ_STATUS_INVALID_ARG, "role %d is not key or value",
                           (int)role);
    if (s == VQ_STATUS_OK) s = vq_kv_spec_codecs(&spec, &k, &v, err, cap);
    vq_codec *c = NULL;
    if (s == VQ_STATUS_OK) {
        struct vq_codec_params *p = role == VQ_ROLE_KEY ? &k : &v;
        p->head_dim = head_dim;
        c = vq_codec_create(p, &s);
        if (!c)
            fail(err, cap, s, "KV config '%s': %s codec at head_dim %d: %s", kv,
                 role == VQ_ROLE_KEY ? "key" : "value", head_dim, vq_status_str(s));
    }
    if (st) *st = s;
    return c;
}
