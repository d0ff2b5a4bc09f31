/* kvconfig.c — the KV option family of the CLI (see kvconfig.h): options into a library KV spec
 * (veloxquant.h "KV specs"), the spec resolved for a model, and the config's results.json
 * fields. Names, presets and resolution are the library's. */
#include "kvconfig.h"

#include <math.h>
#include <stdio.h>

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "opts.h"
#include "vq_tools.h"

void vq_kv_opts_init(struct vq_kv_opts *o) {
    memset(o, 0, sizeof *o);
    vq_kv_spec_init(&o->s);
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
static int parse_fp16_layers(const char *cmd, const char *arg, struct vq_kv_spec *o) {
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
    return o->s.n_k_bpl || o->s.n_v_bpl || o->s.fp16_first || o->s.fp16_last || o->s.ratequant > 0;
}

int vq_kv_opts_handle(struct vq_kv_opts *o, const char *cmd, int code, const char *arg) {
    if (o->kv_given && code >= VQ_KVOPT_METHOD && code < VQ_KVOPT_LAST &&
        code != VQ_KVOPT_PRINT_CONFIG) {
        fprintf(stderr, "%s: --kv %s replaces the other KV options; give it alone\n", cmd,
                o->kv_name);
        return 0;
    }
    switch (code) {
    case VQ_KVOPT_KV: {
        if (vq_kv_opts_given(o)) {
            fprintf(stderr, "%s: --kv %s replaces the other KV options; give it alone\n", cmd, arg);
            return 0;
        }
        char err[256];
        if (vq_kv_spec_parse(arg, &o->s, err, sizeof err) != VQ_STATUS_OK) {
            fprintf(stderr, "%s: --kv: %s\n", cmd, err);
            return 0;
        }
        o->kv_given = 1;
        snprintf(o->kv_name, sizeof o->kv_name, "%s", arg);
        return 1;
    }
    case VQ_KVOPT_METHOD:
        o->s.has_method = 1;
        return vq_opt_method(cmd, "--method", arg, &o->s.method);
    case VQ_KVOPT_K_METHOD:
        o->s.has_k_method = 1;
        return vq_opt_method(cmd, "--k-method", arg, &o->s.k_method);
    case VQ_KVOPT_V_METHOD:
        o->s.has_v_method = 1;
        return vq_opt_method(cmd, "--v-method", arg, &o->s.v_method);
    case VQ_KVOPT_BITS: return parse_bits(cmd, "--bits", arg, &o->s.bits);
    case VQ_KVOPT_K_BITS: return parse_bits(cmd, "--k-bits", arg, &o->s.k_bits);
    case VQ_KVOPT_V_BITS: return parse_bits(cmd, "--v-bits", arg, &o->s.v_bits);
    case VQ_KVOPT_GROUP: return vq_opt_int(cmd, "--group-size", arg, 1, 1024, &o->s.group_size);
    case VQ_KVOPT_RESID:
        return vq_opt_int(cmd, "--residual-length", arg, 0, 1 << 20, &o->s.residual_length);
    case VQ_KVOPT_SINKS: return vq_opt_int(cmd, "--n-sink-tokens", arg, 0, 64, &o->s.n_sink_tokens);
    case VQ_KVOPT_JL: return vq_opt_int(cmd, "--jl-dim", arg, 1, 1 << 16, &o->s.jl_dim);
    case VQ_KVOPT_KV_SEED: o->s.has_seed = 1; return vq_opt_u64(cmd, "--kv-seed", arg, &o->s.seed);
    case VQ_KVOPT_K_BPL:
        return parse_list(cmd, "--k-bits-per-layer", arg, o->s.k_bpl, &o->s.n_k_bpl);
    case VQ_KVOPT_V_BPL:
        return parse_list(cmd, "--v-bits-per-layer", arg, o->s.v_bpl, &o->s.n_v_bpl);
    case VQ_KVOPT_FP16_LAYERS: return parse_fp16_layers(cmd, arg, &o->s);
    case VQ_KVOPT_FP16_FIRST:
        return vq_opt_int(cmd, "--keep-fp16-first", arg, 0, VQ_KV_MAX_LAYERS, &o->s.fp16_first);
    case VQ_KVOPT_FP16_LAST:
        return vq_opt_int(cmd, "--keep-fp16-last", arg, 0, VQ_KV_MAX_LAYERS, &o->s.fp16_last);
    case VQ_KVOPT_RATEQUANT:
        return vq_opt_double(cmd, "--ratequant", arg, 1.0, 8.0, &o->s.ratequant);
    case VQ_KVOPT_RQ_VALUES:
        if (arg && !strcmp(arg, "keys")) o->s.rq_values = VQ_KV_RQ_VALUES_KEYS;
        else if (arg && !strcmp(arg, "even")) o->s.rq_values = VQ_KV_RQ_VALUES_EVEN;
        else if (arg && !strcmp(arg, "off")) o->s.rq_values = VQ_KV_RQ_VALUES_OFF;
        else {
            fprintf(stderr, "%s: --ratequant-values: want keys, even or off\n", cmd);
            return 0;
        }
        return 1;
    case VQ_KVOPT_CALIB_TOKENS:
        return vq_opt_int(cmd, "--calib-tokens", arg, 16, 1 << 20, &o->s.calib_tokens);
    case VQ_KVOPT_OUTLIER_TOKENS: {
        char *end;
        const double k = strtod(arg, &end);
        if (end == arg || *end || !(k >= 0.0 && k <= 100.0)) {
            fprintf(stderr, "%s: --outlier-tokens: '%s' is not a number in 0..100\n", cmd, arg);
            return 0;
        }
        o->s.outlier_token_k = (float)k;
        return 1;
    }
    case VQ_KVOPT_OUTLIER_CHANNELS:
        return vq_opt_int(cmd, "--outlier-channels", arg, 0, 64, &o->s.n_outlier_channels);
    case VQ_KVOPT_N_CALIB:
        return vq_opt_int(cmd, "--n-calib-tokens", arg, 1, 1 << 20, &o->s.n_calib_tokens);
    case VQ_KVOPT_PRINT_CONFIG: o->print_config = 1; return 1;
    case VQ_KVOPT_WINDOW: return vq_opt_int(cmd, "--window", arg, 0, 1 << 24, &o->s.stream_window);
    case VQ_KVOPT_STREAM_SINKS: return vq_opt_int(cmd, "--sinks", arg, 0, 1024, &o->s.stream_sinks);
    case VQ_KVOPT_KEY_SCALES: {
        static const char *const modes[3] = {"off", "keys", "qk"};
        for (int i = 0; i < 3; i++)
            if (!strcmp(arg, modes[i])) {
                o->s.key_scales = i;
                return 1;
            }
        fprintf(stderr, "%s: --key-scales: '%s' is not off, keys or qk\n", cmd, arg);
        return 0;
    }
    case VQ_KVOPT_KEY_CHANNEL_BITS:
        if (!strcmp(arg, "on") || !strcmp(arg, "off") || !strcmp(arg, "zero")) {
            o->s.key_channel_bits = !strcmp(arg, "on") ? 1 : !strcmp(arg, "zero") ? 2 : 0;
            return 1;
        }
        fprintf(stderr, "%s: --key-channel-bits: '%s' is not on, zero or off\n", cmd, arg);
        return 0;
    default: return -1;
    }
}

int vq_kv_opts_given(const struct vq_kv_opts *o) {
    struct vq_kv_spec e;
    vq_kv_spec_init(&e);
    return o->kv_given || memcmp(&e, &o->s, sizeof e) != 0; /* both memset in init */
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
    return o->s.has_method || o->s.has_k_method || o->s.has_v_method;
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
    if (o->s.has_method) {
        PUSH("--method");
        PUSH(vq_method_name(o->s.method));
    }
    if (o->s.has_k_method) {
        PUSH("--k-method");
        PUSH(vq_method_name(o->s.k_method));
    }
    if (o->s.has_v_method) {
        PUSH("--v-method");
        PUSH(vq_method_name(o->s.v_method));
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
    if (o->s.bits) PUSHG("--bits", o->s.bits);
    if (o->s.k_bits) PUSHG("--k-bits", o->s.k_bits);
    if (o->s.v_bits) PUSHG("--v-bits", o->s.v_bits);
    if (o->s.group_size >= 0) PUSHI("--group-size", o->s.group_size);
    if (o->s.residual_length >= 0) PUSHI("--residual-length", o->s.residual_length);
    if (o->s.n_sink_tokens >= 0) PUSHI("--n-sink-tokens", o->s.n_sink_tokens);
    if (o->s.jl_dim >= 0) PUSHI("--jl-dim", o->s.jl_dim);
    if (o->s.has_seed && nb < nbuf) {
        snprintf(buf[nb], 32, "%llu", (unsigned long long)o->s.seed);
        PUSH("--kv-seed");
        PUSH(buf[nb]);
        nb++;
    }
    if (o->s.ratequant > 0 && nb < nbuf) {
        snprintf(buf[nb], 32, "%.17g", o->s.ratequant);
        PUSH("--ratequant");
        PUSH(buf[nb]);
        nb++;
    }
    if (o->s.rq_values == VQ_KV_RQ_VALUES_EVEN) {
        PUSH("--ratequant-values");
        PUSH("even");
    }
    if (o->s.rq_values == VQ_KV_RQ_VALUES_OFF) {
        PUSH("--ratequant-values");
        PUSH("off");
    }
    if (o->s.fp16_first) PUSHI("--keep-fp16-first", o->s.fp16_first);
    if (o->s.fp16_last) PUSHI("--keep-fp16-last", o->s.fp16_last);
    if (o->s.calib_tokens) PUSHI("--calib-tokens", o->s.calib_tokens);
    if (o->s.outlier_token_k >= 0.0f && nb < nbuf) {
        snprintf(buf[nb], 32, "%.9g", (double)o->s.outlier_token_k);
        PUSH("--outlier-tokens");
        PUSH(buf[nb]);
        nb++;
    }
    if (o->s.n_outlier_channels >= 0) PUSHI("--outlier-channels", o->s.n_outlier_channels);
    if (o->s.n_calib_tokens >= 0) PUSHI("--n-calib-tokens", o->s.n_calib_tokens);
    if (o->s.stream_window >= 0) PUSHI("--window", o->s.stream_window);
    if (o->s.stream_sinks >= 0) PUSHI("--sinks", o->s.stream_sinks);
    if (o->s.key_scales >= 0) {
        static const char *const modes[3] = {"off", "keys", "qk"};
        PUSH("--key-scales");
        PUSH(modes[o->s.key_scales]);
    }
    if (o->s.key_channel_bits >= 0) {
        PUSH("--key-channel-bits");
        PUSH(o->s.key_channel_bits == 2 ? "zero" : o->s.key_channel_bits ? "on" : "off");
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
        struct vq_kv_spec o;
        if (vq_kv_spec_parse(rc->name, &o, NULL, 0) != VQ_STATUS_OK) continue;
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
    struct vq_kv_spec mo;
    if (vq_kv_spec_parse(name, &mo, NULL, 0) == VQ_STATUS_OK) {
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
    if (l->ratequant_mean > 0)
        OPT("ratequant_mbits", (long long)(l->ratequant_mean * 1000.0 + 0.5));
    if (cp->fp16_first_layers) OPT("fp16_first", cp->fp16_first_layers);
    if (cp->fp16_last_layers) OPT("fp16_last", cp->fp16_last_layers);
    const int same = l->key_bits && l->value_bits &&
                     !memcmp(l->key_bits, l->value_bits, sizeof(int) * (size_t)l->n_layers);
    if (same) OPT("v_bits_same_as_k", 1);
    if (l->key_bits && !add_digit_groups(rc, "k", l->key_bits, l->n_layers))
        add_counts(rc, "k", l->key_bits, l->n_layers);
    if (l->value_bits && !same && !add_digit_groups(rc, "v", l->value_bits, l->n_layers))
        add_counts(rc, "v", l->value_bits, l->n_layers);
#undef OPT
}


int vq_kv_opts_prepare(const char *cmd, const struct vq_kv_opts *o, struct vq_cache_params *cp,
                       char *name, size_t cap) {
    char err[256];
    *cp = vq_cache_params_default();
    if (vq_kv_spec_codecs(&o->s, &cp->key, &cp->value, err, sizeof err) != VQ_STATUS_OK) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return 0;
    }
    vq_kv_spec_apply_modifiers(&o->s, cp);
    if (vq_kv_spec_name(&o->s, name, cap) < 0 && cap) name[0] = 0;
    return 1;
}

int vq_kv_opts_build(const char *cmd, const struct vq_kv_opts *o, const char *model_path,
                     struct vq_model *model, int n_layers, int n_kv_heads, int head_dim,
                     struct vq_cache_params *cp, struct vq_kv_layers *lb, vq_calib_data *owned[2],
                     int flags) {
    memset(lb, 0, sizeof *lb);
    if (owned) owned[0] = owned[1] = NULL;
    vq_cli_calib_set_tokens(o->s.calib_tokens);
    double *w = NULL;
    if (vq_kv_spec_needs_layer_weights(&o->s) && n_layers >= 1) {
        w = malloc(sizeof(double) * (size_t)n_layers);
        if (!w) {
            fprintf(stderr, "%s: out of memory\n", cmd);
            return -1;
        }
        if (flags & VQ_KV_EQUAL_WEIGHTS) {
            for (int l = 0; l < n_layers; l++) w[l] = 1.0;
        } else if (!vq_cli_ratequant_sens(cmd, model_path, model, n_layers, head_dim,
                                          o->s.calib_tokens, 1, w)) {
            free(w);
            return -1;
        } else if (!(flags & VQ_KV_QUIET)) {
            fprintf(stderr, "%s: ratequant: layer sensitivities (mean ||k||^2):", cmd);
            for (int l = 0; l < n_layers; l++) fprintf(stderr, " %.4g", w[l]);
            fprintf(stderr, "\n");
        }
    }
    char err[256];
    vq_status st = vq_kv_spec_cache_params(&o->s, n_layers, n_kv_heads, head_dim, w, cp, lb, err,
                                           sizeof err);
    free(w);
    if (st != VQ_STATUS_OK) {
        if (st == VQ_STATUS_NO_MEMORY) fprintf(stderr, "%s: out of memory\n", cmd);
        else fprintf(stderr, "%s: %s\n", cmd, err);
        vq_kv_layer_bits_free(lb);
        return st == VQ_STATUS_NO_MEMORY ? -1 : 0;
    }
    if (lb->ratequant_mean > 0 && !(flags & (VQ_KV_QUIET | VQ_KV_EQUAL_WEIGHTS))) {
        char what[96];
        snprintf(what, sizeof what, "ratequant %g: key bits per layer", lb->ratequant_mean);
        print_bits(cmd, what, lb->key_bits, n_layers, o->s.fp16_first, o->s.fp16_last);
        if (lb->value_bits && !o->s.n_v_bpl)
            print_bits(cmd,
                       o->s.rq_values == VQ_KV_RQ_VALUES_KEYS ? "value bits per layer (= keys)"
                                                              : "value bits per layer (even)",
                       lb->value_bits, n_layers, o->s.fp16_first, o->s.fp16_last);
    }
    if (owned && !vq_cli_attach_calib(cmd, model_path, cp, n_layers, head_dim, owned)) {
        vq_kv_layer_bits_free(lb);
        return -1;
    }
    return 1;
}
