/* kvconfig.c — KV-method option family, presets and config names (see kvconfig.h). */
#include "kvconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opts.h"

const struct vq_kv_preset vq_kv_presets[] = {
    {"fp16", VQ_METHOD_FP16, 16, VQ_METHOD_FP16, 16},
    {"turboquant_mse-4", VQ_METHOD_TURBOQUANT_MSE, 4, VQ_METHOD_TURBOQUANT_MSE, 4},
    {"turboquant_mse-3", VQ_METHOD_TURBOQUANT_MSE, 3, VQ_METHOD_TURBOQUANT_MSE, 3},
    {"turboquant_mse-2", VQ_METHOD_TURBOQUANT_MSE, 2, VQ_METHOD_TURBOQUANT_MSE, 2},
    {"turboquant_prod-4", VQ_METHOD_TURBOQUANT_PROD, 4, VQ_METHOD_TURBOQUANT_PROD, 4},
    {"turboquant_prod-3", VQ_METHOD_TURBOQUANT_PROD, 3, VQ_METHOD_TURBOQUANT_PROD, 3},
    {"turboquant_prod-2", VQ_METHOD_TURBOQUANT_PROD, 2, VQ_METHOD_TURBOQUANT_PROD, 2},
    {"turboquant_rvq-2", VQ_METHOD_TURBOQUANT_RVQ, 2, VQ_METHOD_TURBOQUANT_RVQ, 2},
    {"turboquant_rvq-1", VQ_METHOD_TURBOQUANT_RVQ, 1, VQ_METHOD_TURBOQUANT_RVQ, 1},
    /* QJL sketches keys only; values as in the official QJL code: KIVI-style 2-bit */
    {"qjl", VQ_METHOD_QJL, 1, VQ_METHOD_KIVI, 2},
    {"polar", VQ_METHOD_POLAR, 4, VQ_METHOD_POLAR, 4},
    {"kivi-4", VQ_METHOD_KIVI, 4, VQ_METHOD_KIVI, 4},
    {"kivi-2", VQ_METHOD_KIVI, 2, VQ_METHOD_KIVI, 2},
    {"kivi_sink-2", VQ_METHOD_KIVI_SINK, 2, VQ_METHOD_KIVI_SINK, 2},
    {"asym-k4v2", VQ_METHOD_TURBOQUANT_MSE, 4, VQ_METHOD_TURBOQUANT_MSE, 2},
    /* calibrated (artifacts from `veloxquant calibrate`): vecinfer 1 and 2 bits/elem product
     * VQ on keys and values, spectral 3 bits (water-filled over the PCA coordinates) */
    {"vecinfer-2", VQ_METHOD_VECINFER, 2, VQ_METHOD_VECINFER, 2},
    {"vecinfer-1", VQ_METHOD_VECINFER, 1, VQ_METHOD_VECINFER, 1},
    {"spectral-3", VQ_METHOD_SPECTRAL, 3, VQ_METHOD_SPECTRAL, 3},
};
const int vq_kv_n_presets = (int)(sizeof vq_kv_presets / sizeof vq_kv_presets[0]);

void vq_kv_opts_init(struct vq_kv_opts *o) {
    memset(o, 0, sizeof *o);
    o->group_size = o->residual_length = o->n_sink_tokens = o->jl_dim = -1;
}

int vq_kv_default_bits(enum vq_method m) {
    switch (m) {
    case VQ_METHOD_FP16: return 16;
    case VQ_METHOD_FP32: return 32;
    case VQ_METHOD_TURBOQUANT_MSE: return 4;
    case VQ_METHOD_TURBOQUANT_PROD: return 3;
    case VQ_METHOD_QJL: return 1;
    case VQ_METHOD_POLAR: return 4;
    case VQ_METHOD_TURBOQUANT_RVQ: return 2;
    case VQ_METHOD_KIVI: return 2;
    case VQ_METHOD_KIVI_SINK: return 2;
    case VQ_METHOD_VECINFER: return 2;
    case VQ_METHOD_SPECTRAL: return 3;
    default: return 4;
    }
}

static int has_bits_choice(enum vq_method m) {
    return m != VQ_METHOD_FP16 && m != VQ_METHOD_FP32 && m != VQ_METHOD_QJL && m != VQ_METHOD_POLAR;
}

int vq_kv_opts_handle(struct vq_kv_opts *o, const char *cmd, int code, const char *arg) {
    switch (code) {
    case VQ_KVOPT_METHOD: o->has_method = 1; return vq_opt_method(cmd, "--method", arg, &o->method);
    case VQ_KVOPT_K_METHOD: o->has_k_method = 1; return vq_opt_method(cmd, "--k-method", arg, &o->k_method);
    case VQ_KVOPT_V_METHOD: o->has_v_method = 1; return vq_opt_method(cmd, "--v-method", arg, &o->v_method);
    case VQ_KVOPT_BITS: return vq_opt_int(cmd, "--bits", arg, 1, 32, &o->bits);
    case VQ_KVOPT_K_BITS: return vq_opt_int(cmd, "--k-bits", arg, 1, 32, &o->k_bits);
    case VQ_KVOPT_V_BITS: return vq_opt_int(cmd, "--v-bits", arg, 1, 32, &o->v_bits);
    case VQ_KVOPT_GROUP: return vq_opt_int(cmd, "--group-size", arg, 1, 1024, &o->group_size);
    case VQ_KVOPT_RESID: return vq_opt_int(cmd, "--residual-length", arg, 0, 1 << 20, &o->residual_length);
    case VQ_KVOPT_SINKS: return vq_opt_int(cmd, "--n-sink-tokens", arg, 0, 64, &o->n_sink_tokens);
    case VQ_KVOPT_JL: return vq_opt_int(cmd, "--jl-dim", arg, 1, 1 << 16, &o->jl_dim);
    case VQ_KVOPT_KV_SEED: o->has_seed = 1; return vq_opt_u64(cmd, "--kv-seed", arg, &o->seed);
    default: return -1;
    }
}

int vq_kv_opts_any_method(const struct vq_kv_opts *o) {
    return o->has_method || o->has_k_method || o->has_v_method;
}

void vq_kv_opts_resolve(const struct vq_kv_opts *o, struct vq_codec_params *k,
                        struct vq_codec_params *v) {
    *k = vq_codec_params_default();
    *v = vq_codec_params_default();
    k->role = VQ_ROLE_KEY;
    v->role = VQ_ROLE_VALUE;
    enum vq_method base = o->has_method ? o->method : VQ_METHOD_FP16;
    k->method = o->has_k_method ? o->k_method : base;
    v->method = o->has_v_method ? o->v_method : base;
    k->bits = o->k_bits ? o->k_bits : o->bits ? o->bits : vq_kv_default_bits(k->method);
    v->bits = o->v_bits ? o->v_bits : o->bits ? o->bits : vq_kv_default_bits(v->method);
    struct vq_codec_params *both[2] = {k, v};
    for (int i = 0; i < 2; i++) {
        if (o->group_size >= 0) both[i]->group_size = o->group_size;
        if (o->residual_length >= 0) both[i]->residual_length = o->residual_length;
        if (o->n_sink_tokens >= 0) both[i]->n_sink_tokens = o->n_sink_tokens;
        if (o->jl_dim >= 0) both[i]->jl_dim = o->jl_dim;
        if (o->has_seed) both[i]->seed = o->seed;
    }
}

void vq_kv_config_name(const struct vq_codec_params *k, const struct vq_codec_params *v,
                       char *out, size_t cap) {
    const char *kn = vq_method_name(k->method), *vn = vq_method_name(v->method);
    for (int i = 0; i < vq_kv_n_presets; i++) {
        const struct vq_kv_preset *p = &vq_kv_presets[i];
        if (p->km == k->method && p->vm == v->method &&
            (!has_bits_choice(p->km) || p->kb == k->bits) && (!has_bits_choice(p->vm) || p->vb == v->bits)) {
            snprintf(out, cap, "%s", p->name);
            return;
        }
    }
    if (k->method == v->method) {
        if (!has_bits_choice(k->method)) snprintf(out, cap, "%s", kn);
        else if (k->bits == v->bits) snprintf(out, cap, "%s-%d", kn, k->bits);
        else snprintf(out, cap, "%s-k%dv%d", kn, k->bits, v->bits);
        return;
    }
    snprintf(out, cap, "%s-%d:%s-%d", kn, k->bits, vn, v->bits);
}

/* "METHOD" or "METHOD-B" into method and bits (0 = default); 1 on success. */
static int parse_mb(const char *s, size_t n, enum vq_method *m, int *bits) {
    char buf[64];
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, s, n);
    buf[n] = 0;
    *bits = 0;
    char *dash = strrchr(buf, '-');
    if (dash) {
        char *end;
        long b = strtol(dash + 1, &end, 10);
        if (end == dash + 1 || *end || b < 1 || b > 32) return 0;
        *bits = (int)b;
        *dash = 0;
    }
    return vq_method_from_name(buf, m) == VQ_STATUS_OK;
}

int vq_kv_opts_from_name(const char *name, struct vq_kv_opts *o) {
    vq_kv_opts_init(o);
    for (int i = 0; i < vq_kv_n_presets; i++) {
        const struct vq_kv_preset *p = &vq_kv_presets[i];
        if (strcmp(name, p->name) != 0) continue;
        o->has_k_method = o->has_v_method = 1;
        o->k_method = p->km; o->k_bits = p->kb;
        o->v_method = p->vm; o->v_bits = p->vb;
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
    int kb, vb;
    char tail;
    if (dash && sscanf(dash + 1, "k%dv%d%c", &kb, &vb, &tail) == 2) {
        int b;
        if (!parse_mb(name, (size_t)(dash - name), &o->method, &b) || b) return 0;
        if (kb < 1 || kb > 32 || vb < 1 || vb > 32) return 0;
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
#define PUSH(s) do { if (*argc < max) argv[(*argc)++] = (char *)(s); } while (0)
#define PUSHI(flag, v) do { if (nb < nbuf) { snprintf(buf[nb], 32, "%lld", (long long)(v)); PUSH(flag); PUSH(buf[nb]); nb++; } } while (0)
    if (o->has_method) { PUSH("--method"); PUSH(vq_method_name(o->method)); }
    if (o->has_k_method) { PUSH("--k-method"); PUSH(vq_method_name(o->k_method)); }
    if (o->has_v_method) { PUSH("--v-method"); PUSH(vq_method_name(o->v_method)); }
    if (o->bits) PUSHI("--bits", o->bits);
    if (o->k_bits) PUSHI("--k-bits", o->k_bits);
    if (o->v_bits) PUSHI("--v-bits", o->v_bits);
    if (o->group_size >= 0) PUSHI("--group-size", o->group_size);
    if (o->residual_length >= 0) PUSHI("--residual-length", o->residual_length);
    if (o->n_sink_tokens >= 0) PUSHI("--n-sink-tokens", o->n_sink_tokens);
    if (o->jl_dim >= 0) PUSHI("--jl-dim", o->jl_dim);
    if (o->has_seed && nb < nbuf) {
        snprintf(buf[nb], 32, "%llu", (unsigned long long)o->seed);
        PUSH("--kv-seed"); PUSH(buf[nb]); nb++;
    }
#undef PUSHI
#undef PUSH
}

void vq_kv_fill_result_config(const char *name, const struct vq_codec_params *k,
                              const struct vq_codec_params *v, struct vq_result_config *rc) {
    memset(rc, 0, sizeof *rc);
    snprintf(rc->name, sizeof rc->name, "%s", name);
    snprintf(rc->k_method, sizeof rc->k_method, "%s", vq_method_name(k->method));
    snprintf(rc->v_method, sizeof rc->v_method, "%s", vq_method_name(v->method));
    rc->k_bits = k->bits;
    rc->v_bits = v->bits;
    const int kivi = k->method == VQ_METHOD_KIVI || k->method == VQ_METHOD_KIVI_SINK ||
                     v->method == VQ_METHOD_KIVI || v->method == VQ_METHOD_KIVI_SINK;
    const int sink = k->method == VQ_METHOD_KIVI_SINK || v->method == VQ_METHOD_KIVI_SINK;
    const int jl = k->method == VQ_METHOD_QJL || k->method == VQ_METHOD_TURBOQUANT_PROD ||
                   v->method == VQ_METHOD_QJL || v->method == VQ_METHOD_TURBOQUANT_PROD;
#define OPT(key_, val_) do { snprintf(rc->opts[rc->n_opts].key, 32, "%s", key_); \
    rc->opts[rc->n_opts++].value = (val_); } while (0)
    if (kivi) { OPT("group_size", k->group_size); OPT("residual_length", k->residual_length); }
    if (sink) OPT("n_sink_tokens", k->n_sink_tokens);
    if (jl && k->jl_dim) OPT("jl_dim", k->jl_dim);
    OPT("seed", (long long)k->seed);
#undef OPT
}
